"""The lesson's autograder grades: full marks, zero, and exactly the points each mistake costs.

Every submission here goes through the real autograder zip with the hardened
judge (``autograder.grade``), as Gradescope would run it. The catalogue of wrong and
alternative submissions lives in ``tests/fixtures/where_mlps_fail/catalogue.py``.
All of them are graded in one batch (two at a time) by a module fixture, and
each test reads its own row (shared assertions: ``tests/grading/common.py``).
"""

from __future__ import annotations

import pytest

from tests.fixtures.where_mlps_fail.catalogue import ALTERNATIVE, CARRIED_FORWARD, EXAMPLES, WRONG
from tests.grading import common

pytestmark = pytest.mark.grading

NAME = "where_mlps_fail"

#: The points of every autograded question, as the master notebook sets them.
EXPECTED_POINTS = {
    "q1_1": 2, "q1_2": 2, "q1_3": 2, "q1_4": 3, "q1_5": 1,
    "q2_1": 2, "q2_2": 1, "q2_3": 3, "q2_4": 1, "q2_5": 1,
    "q3_1": 1, "q3_2": 2, "q3_3": 3, "q3_4": 1, "q3_5": 1, "q3_6": 2, "q3_7": 1,
    "q5": 2,
}


@pytest.fixture(scope="module")
def graded(built_where_mlps_fail, tmp_path_factory, repo):
    """Every submission of this module graded once: ``{label: GradeResult}``."""
    examples = {
        example: repo / "assignments" / NAME / "examples" / f"{example}.ipynb"
        for example in EXAMPLES
    }
    variants = WRONG + ALTERNATIVE + [v for v, _ in CARRIED_FORWARD]
    return common.grade_catalogue(
        built_where_mlps_fail, variants, tmp_path_factory, extra=examples
    )


def test_the_solutions_gradings_load_every_reference_value_install_computes(graded):
    common.assert_solution_computes_no_reference_value(graded)


def test_solution_scores_full_marks(graded):
    common.assert_solution_scores_full_marks(graded["solution"], EXPECTED_POINTS)


def test_the_solution_graded_three_times_shows_the_same_scores_and_messages(graded):
    common.assert_regrades_identical(graded)


def test_blank_student_notebook_scores_zero_without_crashing(graded):
    common.assert_blank_scores_zero(graded["blank"], EXPECTED_POINTS)


@pytest.mark.parametrize("variant", WRONG, ids=lambda v: v.name)
def test_wrong_submission_loses_exactly_its_question(graded, variant):
    common.assert_loses_exactly(
        graded[variant.name], EXPECTED_POINTS, (variant.loses,) + variant.also_loses, variant.why
    )


@pytest.mark.parametrize("variant", ALTERNATIVE, ids=lambda v: v.name)
def test_alternative_correct_submission_scores_full_marks(graded, variant):
    common.assert_full_marks(graded[variant.name], EXPECTED_POINTS, variant.why)


@pytest.mark.parametrize("variant, losing", CARRIED_FORWARD, ids=lambda v: getattr(v, "name", ""))
def test_a_wrong_value_costs_its_own_question_only(graded, variant, losing):
    """Later answers computed from a wrong edges, flat_edges or maps are graded on the student's own
    value."""
    common.assert_loses_exactly(graded[variant.name], EXPECTED_POINTS, losing, variant.why)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_bundled_examples_lose_the_points_of_their_mistakes(graded, example):
    """The demo's partly wrong notebooks lose exactly their mistakes' questions."""
    losing = {v.loses for v in WRONG if v.name in EXAMPLES[example]}
    common.assert_loses_exactly(
        graded[example], EXPECTED_POINTS, sorted(losing), f"the bundled example {example}"
    )


def test_hidden_failures_name_the_variable_and_hide_expected_values(graded):
    """A wrong answer's message names the variable; it never prints the reference value."""
    q1_1 = common.test_output(graded["logit_without_bias"], "q1_1")
    assert "trouser_logit_by_hand" in q1_1, q1_1
    from reference.where_mlps_fail import answers

    expected_logit = answers()["trouser_logit_by_hand"]
    for shown in (f"{expected_logit:.4f}", f"{expected_logit:.3f}", f"{expected_logit:.2f}"):
        assert shown not in q1_1, "a hidden test printed the expected value"


def test_committed_student_version_is_up_to_date(built_where_mlps_fail, repo):
    common.assert_student_version_up_to_date(NAME, built_where_mlps_fail.student_dir, repo)
