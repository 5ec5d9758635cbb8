"""A solution scores the same whether or not other work holds the CPU, and the same every time it is graded.

Three correct, unchanged ``when_it_fails`` notebooks scored 27/27 on an idle
machine and 25/27 and 21/27 while other work held the two cores: a call of
``train_mlp`` passed its 30-second limit (3.6 s of training took 37.9 s,
torch's two threads spinning on busy cores) and the width sweep passed its
cell's 60 seconds. The cell and call limits now count the student's CPU
seconds, and grading computes on one thread (:mod:`autograder.judge`).

``when_it_fails`` is the assignment whose cells and calls come nearest their
limits: its networks train inside the judge's calls. Its solution is graded
once while busy processes (twice the core count) hold the CPU and twice
without them, in one batch; each grading must give every question the same
score and the same output. Cost: one build (shared with
``test_when_it_fails.py`` in a session, :func:`common.build_once`) and about
three solution gradings' time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from autograder.grade import GradeResult, grade_many
from tests.grading import common
from tests.grading.test_when_it_fails import EXPECTED_POINTS

pytestmark = pytest.mark.grading

NAME = "when_it_fails"
#: Busy processes beside the loaded grading: twice the core count, as in the issue (load 6 on 2 cores).
BUSY = 2 * (os.cpu_count() or 1)


@contextmanager
def busy_cores(count: int):
    """``count`` processes that loop forever, stopped on leaving."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield busy
    finally:
        for process in busy:
            process.kill()
            process.wait()


def _shown(result: GradeResult) -> dict[str, tuple[float | None, str]]:
    """Every test's score and output, as the student sees them."""
    results = json.loads(Path(result.results_path).read_text())
    return {test["name"]: (test.get("score"), test.get("output", "")) for test in results["tests"]}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, GradeResult]:
    """The solution graded under load, then twice idle (two at a time): ``{"loaded", "idle_1", "idle_2"}``."""
    built = common.build_once(NAME, tmp_path_factory)
    work = tmp_path_factory.mktemp("load")
    with busy_cores(BUSY):
        [loaded] = grade_many(built.autograder_zip, [built.solution], work / "loaded", progress=False)
    idle = grade_many(built.autograder_zip, [built.solution, built.solution], work / "idle", jobs=2, progress=False)
    return {"loaded": loaded, "idle_1": idle[0], "idle_2": idle[1]}


def test_the_solution_scores_full_marks_while_busy_processes_hold_the_cpu(graded):
    loaded = graded["loaded"]
    assert loaded.error is None, loaded.error
    assert loaded.scores == common.expected_scores(EXPECTED_POINTS), \
        f"under load the solution lost points: {loaded.scores}; {json.loads(loaded.results_path.read_text())['output']}"


def test_the_solution_is_graded_the_same_under_load_and_idle_every_time(graded):
    idle = _shown(graded["idle_1"])
    assert idle == _shown(graded["idle_2"]), "two idle gradings of the solution differ"
    assert _shown(graded["loaded"]) == idle, "the solution graded under load differs from its idle grading"
