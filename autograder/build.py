"""Build an assignment: master notebook -> student version + Gradescope autograder zip.

``build_assignment("where_mlps_fail")`` copies ``assignments/<name>/`` into a
scratch folder, writes the top-level ``otter_config.json`` into the master
notebook's ``generate`` setting (one grading configuration for every
assignment), writes each question's points and test cells from the
assignment's declaration ``questions.yaml`` (:mod:`autograder.facts`; the build
stops when the notebook, the checks or ``answers.md`` disagree with it), runs
``otter assign``, and then

* replaces ``student_template/<name>/`` with Otter's student version
  (notebook plus support files), normalised so that building twice writes the
  same bytes;
* copies Otter's timestamped autograder zip to ``build/<name>/autograder.zip``;
* keeps Otter's solution notebook as ``build/<name>/solution.ipynb``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from autograder import facts

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENTS = REPO / "assignments"
STUDENT_TEMPLATE = REPO / "student_template"
BUILD = REPO / "build"
OTTER_CONFIG = REPO / "otter_config.json"
CONFIG_MARK = "# ASSIGNMENT CONFIG"


class BuildError(RuntimeError):
    """``otter assign`` failed, or the assignment folder is not laid out as expected."""


@dataclass(frozen=True)
class BuiltAssignment:
    """Where a build put its outputs (all absolute paths)."""

    name: str
    student_dir: Path
    autograder_zip: Path
    solution: Path


def available() -> list[str]:
    """Assignment names: folders of ``assignments/`` holding ``<name>.ipynb``."""
    return sorted(p.name for p in ASSIGNMENTS.iterdir() if (p / f"{p.name}.ipynb").is_file())


def master_notebook(name: str) -> Path:
    """``assignments/<name>/<name>.ipynb``; raises :class:`BuildError` naming the choices."""
    path = ASSIGNMENTS / name / f"{name}.ipynb"
    if not path.is_file():
        raise BuildError(
            f"no master notebook {path.relative_to(REPO)}; assignments: {', '.join(available())}"
        )
    return path


def _inject_grading_config(nb: nbformat.NotebookNode, config: dict) -> None:
    """Set the ASSIGNMENT CONFIG cell's ``generate`` to ``config`` (the top-level
    otter_config.json)."""
    for cell in nb.cells:
        if cell.cell_type == "raw" and cell.source.lstrip().startswith(CONFIG_MARK):
            settings = yaml.safe_load(cell.source.split("\n", 1)[1]) or {}
            settings["generate"] = config
            cell.source = CONFIG_MARK + "\n" + yaml.safe_dump(settings, sort_keys=False)
            return
    raise BuildError(f"the master notebook has no raw cell starting with {CONFIG_MARK!r}")


def normalise_notebook(path: Path) -> None:
    """Rewrite ``path`` with stable cell ids and no execution state, so builds are byte-stable."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


#: Replaces Otter's ``run_otter.py`` in the autograder zip: the same entry
#: point and folder, but the hardened judge grades instead of ``otter run``.
RUN_JUDGE = '''"""Runs the hardened judge of vision-autograder (autograder.judge) on Gradescope's
layout."""

import os

# one thread for torch and the BLAS libraries in the judge, set before they load
os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def run_autograder(root):
    """Grade Gradescope's ``root``: this process becomes a judge that shares its student
    template's import of torch (autograder.warm_judge), or grades itself where it cannot."""
    from autograder.warm_judge import exec_warm

    exec_warm("autograder.gradescope_entry", [root])
    from autograder.gradescope_entry import main

    raise SystemExit(main([root]))


if __name__ == "__main__":
    run_autograder("{root}")
'''


def _use_judge(otter_zip: Path, out: Path) -> None:
    """Copy Otter's autograder zip to ``out`` with ``run_otter.py`` calling the judge.

    Keeps the folder Otter rendered into its scripts (``autograder_dir``).
    """
    import re
    import zipfile

    with zipfile.ZipFile(otter_zip) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "run_otter.py":
                match = re.search(r'run_autograder\("([^"]+)"\)', data.decode())
                if match is None:
                    raise BuildError("Otter's run_otter.py no longer calls run_autograder(\"...\")")
                data = RUN_JUDGE.format(root=match.group(1)).encode()
            dst.writestr(info, data)


def check_imports(autograder_zip: Path) -> None:
    """Check that every import of the zip's tests (and of the checks they import) resolves in this
    environment, as the judge will import them: in a new process of this interpreter, from a scratch
    folder (not this repository, which a copy of it would shadow).

    Raises:
        BuildError: naming each test and the import that does not resolve.
    """
    import tempfile
    import zipfile

    with tempfile.TemporaryDirectory(prefix="build-check-") as scratch:
        with zipfile.ZipFile(autograder_zip) as archive:
            for name in archive.namelist():
                if name.startswith("tests/") and name.endswith(".py"):
                    archive.extract(name, scratch)
        proc = subprocess.run(
            [sys.executable, "-m", "autograder.grading_errors", str(Path(scratch) / "tests")],
            cwd=scratch,
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise BuildError(
            f"the tests of {autograder_zip} cannot import what they need in this environment "
            f"({sys.executable}); every submission would get a grading error:\n"
            f"{proc.stdout.strip() or proc.stderr.strip()}"
        )


#: The folder in ``build/NAME/`` that ``grade`` writes to by default: a rebuild keeps it, so that
#: the graded results of the demo survive it.
GRADED_FOLDER = "graded"


def _clear_build(out: Path) -> None:
    """Remove what an earlier build left in ``out``, all but :data:`GRADED_FOLDER`."""
    if out.is_symlink() or out.is_file():
        out.unlink()
    if not out.is_dir():
        return
    for child in out.iterdir():
        if child.name == GRADED_FOLDER:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def build_assignment(
    name: str,
    run_tests: bool = True,
    quiet: bool = True,
    build_root: Path = BUILD,
    student_root: Path = STUDENT_TEMPLATE,
    write_answers: bool = True,
) -> BuiltAssignment:
    """Run ``otter assign`` on ``assignments/<name>/<name>.ipynb``.

    Args:
        name: the assignment id, e.g. ``"where_mlps_fail"``.
        run_tests: let ``otter assign`` execute the solution against every
            test (public and hidden) before writing the outputs; it fails
            the build if any test fails. Costs one notebook run.
        quiet: hide Otter's log unless it fails.
        build_root: where ``<name>/autograder.zip`` goes (default ``build/``).
        student_root: where ``<name>/`` of the student version goes
            (default ``student_template/``, the committed copy).
        write_answers: rewrite the generated tables of ``assignments/<name>/answers.md`` from
            ``questions.yaml`` (tests build without touching the committed tree).

    Returns:
        :class:`BuiltAssignment` with the student folder, zip and solution.

    Raises:
        BuildError: the master notebook is missing, disagrees with ``questions.yaml``, or
            ``otter assign`` failed; the message says where (Otter's output for the latter).
    """
    master = master_notebook(name)
    nb = nbformat.read(master, as_version=4)
    _inject_grading_config(nb, json.loads(OTTER_CONFIG.read_text()))
    try:
        declared = facts.load(name)
        facts.apply_to_notebook(nb, declared)
        facts.check_signatures(declared)
        if write_answers:
            facts.write_answers(declared)
        else:
            facts.render_answers(declared, (ASSIGNMENTS / name / facts.ANSWERS_FILE).read_text())
    except (facts.FactsError, OSError) as err:
        raise BuildError(f"cannot build {name}: {err}") from None
    out = Path(build_root) / name
    scratch = out / "master"
    dist = out / "dist"
    _clear_build(out)
    shutil.copytree(
        master.parent,
        scratch,
        ignore=shutil.ignore_patterns("__pycache__", "examples", "*.md", facts.FACTS_FILE),
    )
    nbformat.write(nb, scratch / master.name)

    command = [sys.executable, "-m", "otter", "assign", master.name, str(dist)]
    if not run_tests:
        command.append("--no-run-tests")
    # the solution runs on one thread, as graded: torch's default threads spin against other work
    # on busy cores, and training then takes many times as long
    from autograder.student_process import SINGLE_THREAD_ENV

    env = {**os.environ, **dict.fromkeys(SINGLE_THREAD_ENV, "1")}
    proc = subprocess.run(command, cwd=scratch, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not (dist / "student").is_dir():
        raise BuildError(
            f"otter assign failed for {name} (exit "
            f"{proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    if not quiet:
        print(proc.stdout, proc.stderr, sep="\n")

    zips = sorted((dist / "autograder").glob(f"{name}-autograder_*.zip"))
    if len(zips) != 1:
        raise BuildError(f"expected one autograder zip in {dist / 'autograder'}, found {len(zips)}")
    autograder_zip = out / "autograder.zip"
    _use_judge(zips[0], autograder_zip)
    check_imports(autograder_zip)
    solution = out / "solution.ipynb"
    shutil.copyfile(dist / "autograder" / master.name, solution)

    student_dir = Path(student_root) / name
    shutil.rmtree(student_dir, ignore_errors=True)
    shutil.copytree(dist / "student", student_dir)
    normalise_notebook(student_dir / master.name)
    return BuiltAssignment(name, student_dir, autograder_zip, solution)
