"""The warm judge (:mod:`autograder.warm_judge`): one process imports torch for the judge and the
student's template, and forks the template before it reads what the judge is asked to do.

The template, and every student process it forks, is a copy of that process as it was at the fork:
these tests read the template's memory (as root, through ``/proc/PID/mem``) while a grading runs and
look for a marker that only the judge's request carried, in its environment and in the paths of
its arguments.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from autograder import warm_judge
from autograder.grade import grading_env
from autograder.work_folders import WORK_FOLDER_NAME
from autograder.zygote import COLD_START_ENV

#: Bytes read from another process's memory at a time.
CHUNK = 1 << 24


def _children(pid: int) -> list[int]:
    """The children of process ``pid``, whichever of its threads forked them."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return sorted(set(found))


def _wait_for(found, judge: subprocess.Popen, seconds: float = 120) -> list:
    """What ``found()`` returns once it is not empty, while the judge runs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and judge.poll() is None:
        result = found()
        if result:
            return result
        time.sleep(0.02)
    raise AssertionError(f"not found while the judge ran (exit status {judge.poll()})")


def _no_new_privileges(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NoNewPrivs:"):
            return line.split()[1] == "1"
    return False


def _written_memory_holds(pid: int, needle: bytes) -> list[str]:
    """The writable mappings of process ``pid`` (heap, stacks, the interpreter's arenas, libraries'
    data) that hold ``needle``: what a process read or computed lives there, never in read-only
    file mappings."""
    found = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "w" not in fields[1]:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            tail = b""
            for at in range(start, end, CHUNK):
                try:
                    mem.seek(at)
                    chunk = mem.read(min(CHUNK, end - at))
                except OSError:  # a guard page, or a mapping that went away
                    break
                if needle in tail + chunk:
                    found.append(line.strip())
                    break
                tail = chunk[-len(needle) :]
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="reads another process's memory: needs root")
def test_the_template_holds_nothing_of_the_judges_request(built_where_mlps_fail, tmp_path):
    marker = f"warm-judge-request-{uuid.uuid4().hex}"
    folder = tmp_path / marker  # in the paths of the submission and of the results
    folder.mkdir()
    submission = folder / "solution.ipynb"
    shutil.copy(built_where_mlps_fail.solution, submission)
    results = folder / "results.json"
    # on Gradescope the judge's working folder may be one a student can write: a module there named
    # as one the judge imports as it grades must not be imported (it would run as root)
    for name in ("otter", "nbformat", "hypothesis", "jsonschema", "pandas"):
        (tmp_path / f"{name}.py").write_text(
            f"open({str(tmp_path / ('imported-' + name))!r}, 'w').close()\n"
        )
    judge_tmp = tmp_path / "judge-tmp"  # the judge's own TMPDIR, not the template's
    judge_tmp.mkdir()
    judge_env = grading_env(None, WARM_JUDGE_TEST=marker, TMPDIR=str(judge_tmp))
    # the judge's working folder holds the marker's folder: the import system lists it
    command, env, request, cwd = warm_judge.launch(
        "autograder.judge",
        [str(built_where_mlps_fail.autograder_zip), str(submission), str(results)],
        judge_env,
        tmp_path,
    )
    assert marker not in json.dumps([command, env]), "the command line and environment carry it"
    assert marker in request
    judge = subprocess.Popen(
        command, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        # forked before the request; the session leader of its own (not a library's short-lived
        # subprocess as it loads)
        (template,) = _wait_for(lambda: [c for c in _children(judge.pid) if os.getsid(c) == c],
                                judge)
        judge.stdin.write(request)
        judge.stdin.close()
        judge.stdin = None  # communicate() below reads only
        # a student process forked by the template: the judge has read its request, and grades
        _wait_for(lambda: [c for c in _children(judge.pid) if _no_new_privileges(c)], judge)
        assert template in _children(judge.pid), "the template the judge started with serves"
        assert (judge_tmp / WORK_FOLDER_NAME).is_dir(), "the judge's folders follow its TMPDIR"
        needle = marker.encode()
        # the scan can fail: the judge's own memory holds the request
        assert _written_memory_holds(judge.pid, needle), "the judge should hold its request"
        assert _written_memory_holds(template, needle) == [], "the template holds the request"
        assert Path(f"/proc/{template}/environ").read_bytes().split(b"\0")[:-1] == [
            f"{k}={v}".encode() for k, v in env.items()
        ], "the template's environment is the one the warm judge started with"
        out, err = judge.communicate(timeout=300)
    finally:
        if judge.poll() is None:
            judge.kill()
            judge.wait()
    assert judge.returncode == 0, err
    assert "template is not available" not in err, err
    assert "Total Score: 31 / 31" in out, out
    assert sorted(p.name for p in tmp_path.glob("imported-*")) == [], "imported from its folder"


def test_the_warm_judge_exits_as_the_module_does(tmp_path):
    """argparse's refusal of an unknown option: exit status 2 and its usage line, as from
    ``python -m autograder.judge`` itself."""
    command, env, request, cwd = warm_judge.launch(
        "autograder.judge", ["--bogus"], grading_env(None), tmp_path
    )
    done = subprocess.run(command, env=env, cwd=cwd, input=request, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done
    assert "usage: python -m autograder.judge" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "line, says",
    [
        ("not json\n", "the first line is not JSON"),
        (json.dumps({"module": "os", "argv": [], "env": {}, "cwd": "/"}) + "\n",
         "the first line should be"),
        (json.dumps({"module": "autograder.judge", "argv": [1], "env": {}, "cwd": "/"}) + "\n",
         "the first line should be"),
        (json.dumps({"module": "autograder.judge", "argv": [], "env": {}}) + "\n",
         "the first line should be"),
        ("", "the first line is not JSON"),
    ],
)
def test_a_request_that_is_not_one_is_refused(line, says):
    done = subprocess.run([sys.executable, "-m", "autograder.warm_judge"], input=line,
                          capture_output=True, text=True, timeout=120,
                          env=warm_judge.template_env(os.environ))
    assert done.returncode == 1 and says in done.stderr, done


def test_launch_runs_the_module_itself_when_a_cold_start_is_asked_for():
    env = {**grading_env(None), COLD_START_ENV: "1"}
    command, launched_env, request, cwd = warm_judge.launch(
        "autograder.judge_server", [], env, "/srv"
    )
    assert command == [sys.executable, "-m", "autograder.judge_server"]
    assert launched_env == env and request is None and cwd == "/srv"
    with pytest.raises(ValueError, match="not 'os'"):
        warm_judge.launch("os", [], env, "/")
