"""The batch's long-lived judges (autograder.judge_pool, autograder.judge_server).

The pool's own behaviour (a server kept for the next job, replaced after a
timeout or a death, ended at the close) is tested against a stand-in server
that sleeps or exits as each job says; the real server grades real
submissions at the end, in one batch whose results must equal one-off
gradings'.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from autograder import judge_pool
from autograder.grade import grade_many, grade_one
from autograder.judge_pool import JudgePool, JudgeServer

#: A stand-in for ``python -m autograder.judge_server``: for each job line it exits with the job's
#: ``exit`` code, or sleeps the job's ``sleep`` seconds, writes its pid to the job's ``pid_file``
#: and replies that it is done. With ``deaf`` in its arguments it ignores SIGTERM.
STAND_IN = textwrap.dedent(
    """
    import json, os, signal, sys, time
    if "deaf" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin:
        job = json.loads(line)
        if "exit" in job:
            sys.exit(job["exit"])
        time.sleep(job.get("sleep", 0))
        with open(job["pid_file"], "w") as f:
            f.write(str(os.getpid()))
        sys.stdout.write(json.dumps({"done": True}) + "\\n")
        sys.stdout.flush()
    """
)


@pytest.fixture
def stand_in(tmp_path) -> list[str]:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return [sys.executable, str(script)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_server_grades_one_job_after_another(stand_in, tmp_path):
    server = JudgeServer(dict(os.environ), stand_in)
    pids = []
    for i in range(3):
        pid_file = tmp_path / f"pid{i}"
        actual = server.grade({"pid_file": str(pid_file)}, timeout=30)
        assert actual == 0, f"job {i}: a job that is done should give 0, got {actual}"
        pids.append(int(pid_file.read_text()))
    server.close()
    assert len(set(pids)) == 1 and server.started == 1, (
        f"the three jobs should run in one server process, got pids {pids} "
        f"({server.started} started)"
    )
    assert not _alive(pids[0]), "close() should end the server"


def test_a_job_past_its_timeout_stops_the_server_and_the_next_job_gets_a_new_one(
    stand_in, tmp_path
):
    server = JudgeServer(dict(os.environ), stand_in)
    server.grade({"pid_file": str(tmp_path / "first")}, timeout=30)
    first = int((tmp_path / "first").read_text())
    with pytest.raises(subprocess.TimeoutExpired):
        server.grade({"sleep": 60, "pid_file": str(tmp_path / "never")}, timeout=1)
    assert not _alive(first), "the server that ran past the timeout should have been stopped"
    actual = server.grade({"pid_file": str(tmp_path / "after")}, timeout=30)
    after = int((tmp_path / "after").read_text())
    server.close()
    assert actual == 0 and after != first and server.started == 2, (
        f"the next job should be done by a new server (got {actual}, pids {first} and {after}, "
        f"{server.started} started)"
    )


def test_a_server_deaf_to_sigterm_is_killed_after_the_grace(stand_in, tmp_path, monkeypatch):
    monkeypatch.setattr(judge_pool, "STOP_GRACE_SECONDS", 0.5)
    server = JudgeServer(dict(os.environ), [*stand_in, "deaf"])
    server.grade({"pid_file": str(tmp_path / "pid")}, timeout=30)
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(subprocess.TimeoutExpired):
        server.grade({"sleep": 60, "pid_file": str(tmp_path / "never")}, timeout=1)
    assert not _alive(pid), "a server that ignores SIGTERM should be killed"


def test_a_server_that_ends_during_a_job_gives_its_exit_code_and_is_replaced(stand_in, tmp_path):
    server = JudgeServer(dict(os.environ), stand_in)
    actual = server.grade({"exit": 3}, timeout=30)
    assert actual == 3, f"the server's exit code should be returned, got {actual}"
    actual = server.grade({"exit": 0}, timeout=30)
    assert actual != 0, f"a server that ended without finishing its job never gives 0: {actual}"
    actual = server.grade({"pid_file": str(tmp_path / "pid")}, timeout=30)
    server.close()
    assert actual == 0 and server.started == 3, (
        f"each job after a death should get a new server: got {actual}, {server.started} started"
    )


def test_each_worker_thread_has_its_own_server_and_close_ends_them_all(stand_in, tmp_path):
    pool = JudgePool(dict(os.environ), stand_in)
    servers = {}

    def work(name):
        server = pool.server()
        server.grade({"pid_file": str(tmp_path / name)}, timeout=30)
        servers[name] = (server, pool.server())

    threads = [threading.Thread(target=work, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pids = [int((tmp_path / name).read_text()) for name in ("a", "b")]
    assert servers["a"][0] is servers["a"][1] and servers["a"][0] is not servers["b"][0], (
        "a thread should keep its server, and two threads should have two"
    )
    pool.close()
    assert not any(_alive(pid) for pid in pids), f"close() should end every server: {pids}"


def test_a_verdict_of_one_grading_is_forgotten_before_the_next():
    """The checks' verdicts are keyed by the student's names (``once``): a judge that grades one
    submission after another forgets them between gradings, so a blank notebook's ``shift_right``
    verdict never stands for the next notebook's."""
    from autograder import checks

    def fails():
        raise checks.CheckFailure("returned None")

    student = object()
    first = checks.once("shift_right", (student,), fails)
    checks.forget_grading()
    second = checks.once("shift_right", (student,), lambda: None)
    checks.forget_grading()
    assert str(first) == "returned None" and second is None, (first, second)


def test_a_failed_probe_of_the_sandbox_user_is_tried_again_and_a_success_kept(monkeypatch):
    """A probe stopped once (a loaded moment) must not fail every later grading of the judge."""
    from autograder import sandbox_user

    answers = iter(["it was stopped", None])
    probed = []

    def probe(uid, gid):
        probed.append(uid)
        return next(answers)

    monkeypatch.setattr(sandbox_user, "_USER_CHECKED", set())
    monkeypatch.setattr(sandbox_user, "_probe_user", probe)
    actual = [sandbox_user.user_problem(65534, 65534) for _ in range(3)]
    assert actual == ["it was stopped", None, None] and len(probed) == 2, (actual, probed)


def test_the_next_grading_tries_the_warm_start_again(monkeypatch):
    from autograder import zygote

    monkeypatch.setattr(zygote, "_COLD_BECAUSE", "a forked student process did not start")
    zygote.try_warm_again()
    assert zygote._COLD_BECAUSE is None


# ------------------------------------------------------------------ the real server, end to end


@pytest.mark.grading
def test_a_batch_through_one_judge_grades_as_one_off_judges_do(built_where_mlps_fail, tmp_path):
    """The solution, a notebook that is not JSON, and the blank notebook, graded in one batch by one
    long-lived judge (``jobs=1``), give the scores, reasons and outputs that a judge process of
    their own gives each; each submission's grading.log holds its own grading only."""
    built = built_where_mlps_fail
    not_json = tmp_path / "not_json.ipynb"
    not_json.write_text("this is not a notebook")
    blank = tmp_path / "blank.ipynb"
    shutil.copyfile(built.student_dir / "where_mlps_fail.ipynb", blank)
    submissions = [built.solution, not_json, blank]
    batch = grade_many(built.autograder_zip, submissions, tmp_path / "batch", progress=False)
    alone = [
        grade_one(built.autograder_zip, sub, tmp_path / "alone" / sub.stem) for sub in submissions
    ]
    actual = [(r.total, r.error) for r in batch]
    expected = [(r.total, r.error) for r in alone]
    assert actual == expected, f"batch {actual} should equal one-off gradings {expected}"
    assert actual[0] == (31.0, None) and actual[2][0] == 0.0, f"unexpected scores {actual}"
    for result, one_off in zip(batch, alone):
        shown = json.loads(Path(result.results_path).read_text())
        expected_shown = json.loads(Path(one_off.results_path).read_text())
        assert [(t["name"], t.get("score"), t.get("output")) for t in shown["tests"]] == [
            (t["name"], t.get("score"), t.get("output")) for t in expected_shown["tests"]
        ], f"{result.label}: the tests' results differ between the batch and a one-off judge"
    logs = {r.label: (Path(r.results_path).parent / "grading.log").read_text() for r in batch}
    assert "Total Score: 31 / 31" in logs["solution"], logs["solution"][-500:]
    assert "Total Score: 31 / 31" not in logs["blank"], (
        f"the blank notebook's log should not hold the solution's grading: {logs['blank'][-500:]}"
    )
