"""The ``inductive_bias`` autograder: full marks, zero, and exactly the points each mistake costs.

Every submission goes through the hardened judge (``autograder.grade``), as
Gradescope would run it. The catalogue of wrong and alternative submissions
lives in ``tests/fixtures/inductive_bias/catalogue.py``. All are graded in one
batch (two at a time) by a module fixture; each test reads its own row
(shared assertions: ``tests/grading/common.py``).
"""

from __future__ import annotations

import pytest

from tests.fixtures.inductive_bias.catalogue import ALTERNATIVE, CARRIED_FORWARD, HOSTILE, WRONG
from tests.grading import common

pytestmark = pytest.mark.grading

NAME = "inductive_bias"
#: The points of every autograded question, as the master notebook sets them.
EXPECTED_POINTS = {"q1": 2, "q2": 3, "q3": 2, "q4": 2, "q5": 4, "q6": 1, "q7": 2, "q8": 4}


@pytest.fixture(scope="module")
def built(tmp_path_factory, answers_folder):
    return common.build_once(NAME, tmp_path_factory, answers_folder)


@pytest.fixture(scope="module")
def graded(built, tmp_path_factory):
    """Every submission of this module graded once: ``{label: GradeResult}``."""
    variants = WRONG + ALTERNATIVE + [v for v, _ in HOSTILE + CARRIED_FORWARD]
    return common.grade_catalogue(built, variants, tmp_path_factory)


def test_catalogue_is_large_enough():
    assert len(WRONG) >= 8 and len(ALTERNATIVE) >= 4


def test_the_solutions_gradings_load_every_reference_value_install_computes(graded):
    common.assert_solution_computes_no_reference_value(graded)


def test_solution_scores_full_marks(graded):
    common.assert_solution_scores_full_marks(graded["solution"], EXPECTED_POINTS)


def test_the_solution_graded_three_times_shows_the_same_scores_and_messages(graded):
    common.assert_regrades_identical(graded)


def test_blank_student_notebook_scores_zero_without_crashing(graded):
    common.assert_blank_scores_zero(graded["blank"], EXPECTED_POINTS, says_placeholder=False)


@pytest.mark.parametrize("variant", WRONG, ids=lambda v: v.name)
def test_wrong_submission_loses_exactly_its_question(graded, variant):
    common.assert_loses_exactly(
        graded[variant.name], EXPECTED_POINTS, (variant.loses,) + variant.also_loses, variant.why
    )


@pytest.mark.parametrize("variant", ALTERNATIVE, ids=lambda v: v.name)
def test_alternative_correct_submission_scores_full_marks(graded, variant):
    common.assert_full_marks(graded[variant.name], EXPECTED_POINTS, variant.why)


@pytest.mark.parametrize("variant, losing", CARRIED_FORWARD, ids=lambda v: getattr(v, "name", ""))
def test_a_wrong_sigma_costs_q7_only(graded, variant, losing):
    """q8's learning curves are graded on the student's own SIGMA (a value carried forward)."""
    common.assert_loses_exactly(graded[variant.name], EXPECTED_POINTS, losing, variant.why)


@pytest.mark.parametrize("variant, losing", HOSTILE, ids=lambda v: getattr(v, "name", ""))
def test_hostile_submission_gains_nothing(graded, variant, losing):
    """A rel_err honest in q6 and made up later (q8 keeps q6's verdict: the reference's), or made up
    from the start (it failed q6, and errors are not carried forward through a function: the curves
    are the reference's)."""
    common.assert_loses_exactly(graded[variant.name], EXPECTED_POINTS, losing, variant.why)
    expected_reason = {
        "stateful_rel_err": "your functions give the right cells",
        "made_up_rel_err": "Your `rel_err` failed its own question, and errors are not carried "
        "forward",
    }[variant.name]
    q8 = common.test_output(graded[variant.name], "q8")
    assert expected_reason in q8, q8


def test_hidden_failures_name_the_function_and_hide_expected_values(graded):
    q6 = common.test_output(graded["rel_err_by_prediction"], "q6")
    assert "rel_err" in q6, q6


def test_committed_student_version_is_up_to_date(built, repo):
    common.assert_student_version_up_to_date(NAME, built.student_dir, repo)
