"""The orchestrator (``python -m autograder grade``) starts judges and imports no torch itself.

Each grading already runs two processes that import torch (the judge and the
student's); the command that only starts them, collects their results and
writes the table should not be a third. Checked in a fresh interpreter, since
this test session has imported torch long before.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

#: Runs ``grade`` through the command line's own ``main`` with every limit option, on a tiny
#: autograder zip and a submission that does not exist (so no judge is started), then prints what it
#: imported.
GRADE_WITHOUT_A_JUDGE = textwrap.dedent("""
    import json, sys, zipfile
    from pathlib import Path

    from autograder import build, cli

    root = Path(sys.argv[1])
    (root / "build" / "lab").mkdir(parents=True)
    with zipfile.ZipFile(root / "build" / "lab" / "autograder.zip", "w") as archive:
        archive.writestr("tests/q1.py", "points = 2\\n")
    build.BUILD = root / "build"
    build.master_notebook = lambda name: root / "lab.ipynb"
    status = cli.main(["grade", "lab", str(root / "missing.ipynb"), "--out", str(root / "out"),
                       "--timeout", "700",
                       "--cell-seconds", "50", "--call-seconds", "20", "--startup-seconds", "40",
                       "--deadline", "500", "--memory-mb", "2048"])
    heavy = sorted(m for m in ("torch", "numpy", "otter", "autograder.judge", "autograder.channel")
                   if m in sys.modules)
    print(json.dumps({"status": status, "imported": heavy}))
""")


def _run(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_grade_command_imports_no_torch(tmp_path, repo):
    proc = _run(GRADE_WITHOUT_A_JUDGE, str(tmp_path), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"status": 1, "imported": []}, (
        f"`grade` should fail its missing submission and import none of torch, numpy, Otter or the "
        f"judge: {report}"
    )
    row = (tmp_path / "out" / "scores.csv").read_text().splitlines()[1]
    assert row.startswith("missing,") and "does not exist" in row, (
        f"the missing submission's row: {row!r}"
    )


def test_the_judge_imports_torch(repo):
    """Control: the fresh interpreter's ``sys.modules`` does show torch once the judge is
    imported."""
    proc = _run(
        "import sys; import autograder.grade, autograder.judge; print('torch' in sys.modules)",
        cwd=repo,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
