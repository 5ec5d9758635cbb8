"""The lesson's autograder grades: full marks, zero, and exactly the points each mistake costs.

Every submission here goes through the real autograder zip with ``otter run``
(``autograder.grade``), as Gradescope would run it. The catalogue of wrong and
alternative submissions lives in ``tests/fixtures/where_mlps_fail/catalogue.py``.
All of them are graded in one batch (two at a time) by a module fixture, and
each test reads its own row.
"""

from __future__ import annotations

import filecmp
import json

import pytest

from autograder.grade import grade_many
from tests.fixtures.submissions import apply
from tests.fixtures.where_mlps_fail.catalogue import ALTERNATIVE, EXAMPLES, WRONG

pytestmark = pytest.mark.grading

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
    work = tmp_path_factory.mktemp("submissions")
    built = built_where_mlps_fail
    subs = {"solution": built.solution, "blank": built.student_dir / "where_mlps_fail.ipynb"}
    for variant in WRONG + ALTERNATIVE:
        subs[variant.name] = apply(built.solution, variant, work / f"{variant.name}.ipynb")
    for example in EXAMPLES:
        subs[example] = repo / "assignments" / "where_mlps_fail" / "examples" / f"{example}.ipynb"
    results = grade_many(built.autograder_zip, list(subs.values()), work / "graded", jobs=2, progress=False)
    return dict(zip(subs, results))


def test_solution_scores_full_marks(graded):
    actual = graded["solution"]
    assert actual.error is None, actual.error
    expected = {q: (float(p), float(p)) for q, p in EXPECTED_POINTS.items()}
    assert actual.scores == expected, f"solution lost points: {actual.scores}"
    results = json.loads(actual.results_path.read_text())
    public = next(t for t in results["tests"] if t["name"] == "Public Tests")
    assert public.get("status") == "passed", f"the solution fails a public test: {public.get('output')}"


def test_blank_student_notebook_scores_zero_without_crashing(graded):
    actual = graded["blank"]
    assert actual.error is None, f"the blank notebook crashed the grader: {actual.error}"
    assert set(actual.scores) == set(EXPECTED_POINTS), "every question should appear in the blank's results"
    assert actual.total == 0.0, f"the blank notebook earned points: {actual.scores}"
    results = json.loads(actual.results_path.read_text())
    messages = " ".join(t.get("output", "") for t in results["tests"])
    assert "still `...`" in messages, "a blank answer should be reported as the unfilled placeholder"


@pytest.mark.parametrize("variant", WRONG, ids=lambda v: v.name)
def test_wrong_submission_loses_exactly_its_question(graded, variant):
    actual = graded[variant.name]
    assert actual.error is None, actual.error
    expected = {q: (0.0 if q == variant.loses else float(p), float(p)) for q, p in EXPECTED_POINTS.items()}
    assert actual.scores == expected, f"{variant.why}: expected to lose {variant.loses} only"


@pytest.mark.parametrize("variant", ALTERNATIVE, ids=lambda v: v.name)
def test_alternative_correct_submission_scores_full_marks(graded, variant):
    actual = graded[variant.name]
    assert actual.error is None, actual.error
    assert actual.total == sum(EXPECTED_POINTS.values()), f"{variant.why}: lost {actual.scores}"


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_bundled_examples_lose_the_points_of_their_mistakes(graded, example):
    """The demo's partly wrong notebooks lose exactly their mistakes' questions."""
    actual = graded[example]
    losing = {v.loses for v in WRONG if v.name in EXAMPLES[example]}
    expected = {q: (0.0 if q in losing else float(p), float(p)) for q, p in EXPECTED_POINTS.items()}
    assert actual.scores == expected, f"{example} should lose {sorted(losing)} only"


def test_hidden_failures_name_the_variable_and_hide_expected_values(graded):
    """A wrong answer's message names the variable; it never prints the reference value."""
    results = json.loads(graded["logit_without_bias"].results_path.read_text())
    q1_1 = next(t for t in results["tests"] if t["name"].startswith("q1_1"))
    assert "trouser_logit_by_hand" in q1_1["output"], q1_1["output"]
    from reference.where_mlps_fail import answers

    expected_logit = answers()["trouser_logit_by_hand"]
    for shown in (f"{expected_logit:.4f}", f"{expected_logit:.3f}", f"{expected_logit:.2f}"):
        assert shown not in q1_1["output"], "a hidden test printed the expected value"


def test_committed_student_version_is_up_to_date(built_where_mlps_fail, repo):
    """student_template/where_mlps_fail/ is what building the master notebook writes now."""
    committed = repo / "student_template" / "where_mlps_fail"
    fresh = built_where_mlps_fail.student_dir
    compared = filecmp.dircmp(committed, fresh)
    assert not compared.left_only and not compared.right_only, (
        f"files differ: {compared.left_only} / {compared.right_only}; run `python -m autograder build where_mlps_fail`")
    _, mismatch, errors = filecmp.cmpfiles(committed, fresh, compared.common_files, shallow=False)
    assert not mismatch and not errors, (
        f"out of date: {mismatch}; run `python -m autograder build where_mlps_fail` and commit student_template/")
