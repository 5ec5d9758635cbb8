"""What only Chapter 6's gradings show, on the batch ``tests/grading/test_catalogues.py`` grades
(one work unit of pytest-xdist with it, so the same worker and batch): the load test, and the
messages of special-cased functions and wrong answers.

It is the load test: its networks train inside the judge's calls, so
its cells and calls come nearest their limits. The solution is graded once
more while busy processes (twice the core count) hold the CPU, and must show
exactly what its idle gradings show: the cell and call limits count the
student's CPU seconds, not the machine's load, and grading computes on one
thread.

Cost: each submission runs the whole notebook (17 small trainings, about
25 s of CPU at one thread) and its checks; the module takes several minutes,
the loaded grading a few more.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

import pytest

from autograder.facts import autograded_points
from autograder.grade import grade_many
from autograder.scores import GradeResult
from tests.fixtures.when_it_fails.catalogue import ALTERNATIVE, SPECIAL_CASED, WRONG
from tests.grading import common

NAME = "when_it_fails"

pytestmark = pytest.mark.grading

EXPECTED_POINTS = autograded_points(NAME)


@pytest.fixture(scope="module")
def built(tmp_path_factory, answers_folder):
    return common.build_once(NAME, tmp_path_factory, answers_folder)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, answers_folder):
    return common.graded_catalogue(NAME, tmp_path_factory, answers_folder)


#: Busy processes beside the loaded grading: twice the core count (a load of about 6 on 2 cores lost
#: honest notebooks 2 and 6 points when the limits counted wall-clock seconds).
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


@pytest.fixture(scope="module")
def loaded(built, tmp_path_factory, answers_folder) -> GradeResult:
    """The solution graded alone while :data:`BUSY` busy processes hold the CPU."""
    work = tmp_path_factory.mktemp("loaded")
    with busy_cores(BUSY):
        [result] = grade_many(
            built.autograder_zip,
            [built.solution],
            work / "graded",
            progress=False,
            answers_dir=answers_folder,
        )
    return result


def test_the_solution_graded_while_busy_processes_hold_the_cpu_shows_what_it_shows_idle(
    graded, loaded
):
    assert loaded.error is None, loaded.error
    assert loaded.scores == common.expected_scores(EXPECTED_POINTS), (
        f"under load the solution lost {loaded.scores}"
    )
    assert common.shown(loaded) == common.shown(graded["solution"]), (
        "the loaded grading differs from the idle one"
    )


def test_catalogue_is_large_enough_and_covers_the_issues_mistakes():
    assert len(WRONG) >= 8 and len(ALTERNATIVE) >= 4
    names = {v.name for v in WRONG}
    # the issue's examples: roll for the black-filled shift, the permutation on fit but not
    # validation images, the transpose of the right weight, the parameter count without biases, the
    # sealed test on the validation set
    assert {
        "roll_for_shift",
        "permutation_on_fit_only",
        "transposed_weight",
        "params_without_biases",
        "sealed_test_on_validation",
    } <= names
    assert {v.loses for v in WRONG} == set(EXPECTED_POINTS), (
        "every question has a mistake that loses it"
    )


@pytest.mark.parametrize("variant, losing", SPECIAL_CASED, ids=lambda v: getattr(v, "name", ""))
def test_a_student_function_special_cased_for_the_judge_gains_nothing(graded, variant, losing):
    """Each loses exactly its questions (tests/grading/test_catalogues.py), and says why: train_mlp
    returning a table of its labels for q11's arguments only (the judge scores
    net_memo's weights), or `net` with its columns moved for q4's (not a retraining), or training
    only for the default call (later networks meet the recipe's bands: errors in train_mlp are not
    carried forward); functions that swap `net` while the judge calls them (the judge reads every
    name once, first); a net trained apart from a train_mlp that does not learn, or one that kills
    the process when the judge reads it."""
    common.assert_loses_exactly(graded[variant.name], EXPECTED_POINTS, losing, variant.why)
    not_carried = "graded against the recipe's results, not carried forward"
    expected_reason = {
        "memo_train_mlp_returns_a_table_function": (
            "q11",
            "`net_memo` should be a PyTorch network",
        ),
        "memo_train_mlp_returns_a_table_network": ("q11", "`memo_train_acc` is not the accuracy"),
        "stateful_net_swap": ("q11", not_carried),
        "net_trained_apart": ("q2", "`net` is not the network `train_mlp` trains"),
        "net_crashes_at_the_gate": ("q11", not_carried),
        "moved_columns_for_the_shuffle": (
            "q4",
            "`net_shuffled` is `net` with its first weight's columns moved",
        ),
        "trains_only_for_the_default_call": ("q11", not_carried),
    }
    question, reason = expected_reason[variant.name]
    output = common.test_output(graded[variant.name], question)
    assert reason in output, output


def test_hidden_failures_name_the_variable_and_hide_expected_values(graded):
    """A wrong answer's message names the variable; it never prints the reference value."""
    q2 = common.test_output(graded["params_without_biases"], "q2")
    assert "n_params" in q2, q2
    assert "203530" not in q2 and "203,530" not in q2, "a hidden test printed the expected value"
    q9 = common.test_output(graded["sealed_test_on_validation"], "q9")
    assert "test_clean" in q9, q9
