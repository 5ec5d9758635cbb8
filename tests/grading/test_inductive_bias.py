"""The ``inductive_bias`` autograder: full marks, zero, and exactly the points each mistake costs.

Every submission goes through the hardened judge (``autograder.grade``), as
Gradescope would run it. The catalogue of wrong and alternative submissions
lives in ``tests/fixtures/inductive_bias/catalogue.py``. All are graded in one
batch (two at a time) by a module fixture; each test reads its own row.
"""

from __future__ import annotations

import filecmp
import json

import pytest

from autograder.build import build_assignment
from autograder.grade import grade_many
from tests.fixtures.inductive_bias.catalogue import ALTERNATIVE, WRONG
from tests.fixtures.submissions import apply

pytestmark = pytest.mark.grading

#: The points of every autograded question, as the master notebook sets them.
EXPECTED_POINTS = {"q1": 2, "q2": 3, "q3": 2, "q4": 2, "q5": 4, "q6": 1, "q7": 2, "q8": 4}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``inductive_bias`` built once (otter assign, its own tests run), outside the committed tree."""
    root = tmp_path_factory.mktemp("inductive_bias")
    return build_assignment("inductive_bias", run_tests=True, build_root=root / "build",
                            student_root=root / "student_template")


@pytest.fixture(scope="module")
def graded(built, tmp_path_factory):
    """Every submission of this module graded once: ``{label: GradeResult}``."""
    work = tmp_path_factory.mktemp("submissions")
    subs = {"solution": built.solution, "blank": built.student_dir / "inductive_bias.ipynb"}
    for variant in WRONG + ALTERNATIVE:
        subs[variant.name] = apply(built.solution, variant, work / f"{variant.name}.ipynb")
    results = grade_many(built.autograder_zip, list(subs.values()), work / "graded", jobs=2, progress=False)
    return dict(zip(subs, results))


def test_catalogue_is_large_enough():
    assert len(WRONG) >= 8 and len(ALTERNATIVE) >= 4


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


@pytest.mark.parametrize("variant", WRONG, ids=lambda v: v.name)
def test_wrong_submission_loses_exactly_its_question(graded, variant):
    actual = graded[variant.name]
    assert actual.error is None, actual.error
    expected = {q: (0.0 if q == variant.loses else float(p), float(p)) for q, p in EXPECTED_POINTS.items()}
    assert actual.scores == expected, f"{variant.why}: expected to lose {variant.loses} only, got {actual.scores}"


@pytest.mark.parametrize("variant", ALTERNATIVE, ids=lambda v: v.name)
def test_alternative_correct_submission_scores_full_marks(graded, variant):
    actual = graded[variant.name]
    assert actual.error is None, actual.error
    assert actual.total == sum(EXPECTED_POINTS.values()), f"{variant.why}: lost {actual.scores}"


def test_hidden_failures_name_the_function_and_hide_expected_values(graded):
    results = json.loads(graded["rel_err_by_prediction"].results_path.read_text())
    q6 = next(t for t in results["tests"] if t["name"].startswith("q6"))
    assert "rel_err" in q6["output"], q6["output"]


def test_committed_student_version_is_up_to_date(built, repo):
    """student_template/inductive_bias/ is what building the master notebook writes now."""
    committed = repo / "student_template" / "inductive_bias"
    fresh = built.student_dir
    compared = filecmp.dircmp(committed, fresh)
    assert not compared.left_only and not compared.right_only, (
        f"files differ: {compared.left_only} / {compared.right_only}; run `python -m autograder build inductive_bias`")
    _, mismatch, errors = filecmp.cmpfiles(committed, fresh, compared.common_files, shallow=False)
    assert not mismatch and not errors, (
        f"out of date: {mismatch}; run `python -m autograder build inductive_bias` and commit student_template/")
