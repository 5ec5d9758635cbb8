"""Chapter 6's autograder grades: full marks, zero, and exactly the points each mistake costs.

Every submission here goes through the real autograder zip with
``autograder.grade`` (the hardened judge), as Gradescope would run it. The
catalogue of wrong and alternative submissions lives in
``tests/fixtures/when_it_fails/catalogue.py``. The assignment is built once
for this module into a scratch folder; all submissions are graded in one
batch (two at a time, one thread each) by a module fixture, and each test
reads its own row.

Cost: each submission runs the whole notebook (17 small trainings, about
25 s of CPU at one thread) and its checks; the module takes several minutes.
"""

from __future__ import annotations

import filecmp
import json
import os

import pytest

from autograder.build import build_assignment
from autograder.grade import grade_many
from tests.fixtures.submissions import apply
from tests.fixtures.when_it_fails.catalogue import ALTERNATIVE, CARRIED_FORWARD, WRONG

pytestmark = pytest.mark.grading

#: The points of every autograded question, as the master notebook sets them
#: (q13-q15, 6 points, are pencil questions graded by hand).
EXPECTED_POINTS = {"q1": 2, "q2": 3, "q3": 3, "q4": 2, "q5": 2, "q6": 2, "q7": 3, "q8": 2, "q9": 2, "q10": 3,
                   "q11": 2, "q12": 1}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``when_it_fails`` built once (otter assign, its own tests run), outside the committed tree.

    The build executes the solution notebook in Otter's own process; one
    thread there is the thread count the reference trains at and the batch
    below grades at, and keeps a loaded 2-core machine from oversubscribing.
    """
    tmp = tmp_path_factory.mktemp("when_it_fails")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
        mp.setenv("MKL_NUM_THREADS", os.environ.get("MKL_NUM_THREADS", "1"))
        return build_assignment("when_it_fails", run_tests=True, build_root=tmp / "build",
                                student_root=tmp / "student_template")


@pytest.fixture(scope="module")
def graded(built, tmp_path_factory):
    """Every submission of this module graded once: ``{label: GradeResult}``."""
    work = tmp_path_factory.mktemp("when_it_fails_submissions")
    subs = {"solution": built.solution, "blank": built.student_dir / "when_it_fails.ipynb"}
    for variant in WRONG + ALTERNATIVE + [v for v, _ in CARRIED_FORWARD]:
        subs[variant.name] = apply(built.solution, variant, work / f"{variant.name}.ipynb")
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


def test_catalogue_is_large_enough_and_covers_the_issues_mistakes():
    assert len(WRONG) >= 8 and len(ALTERNATIVE) >= 4
    names = {v.name for v in WRONG}
    # the issue's examples: roll for the black-filled shift, the permutation on fit but not validation images,
    # the transpose of the right weight, the parameter count without biases, the sealed test on the validation set
    assert {"roll_for_shift", "permutation_on_fit_only", "transposed_weight", "params_without_biases",
            "sealed_test_on_validation"} <= names
    assert {v.loses for v in WRONG} == set(EXPECTED_POINTS), "every question has a mistake that loses it"


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


@pytest.mark.parametrize("variant, losing", CARRIED_FORWARD, ids=lambda v: getattr(v, "name", ""))
def test_a_broken_train_mlp_does_not_excuse_later_models(graded, variant, losing):
    """With train_mlp broken, a later model that is not what train_mlp trains still loses its question."""
    actual = graded[variant.name]
    assert actual.error is None, actual.error
    expected = {q: (0.0 if q in losing else float(p), float(p)) for q, p in EXPECTED_POINTS.items()}
    assert actual.scores == expected, f"{variant.why}: expected to lose {losing} only"


def test_hidden_failures_name_the_variable_and_hide_expected_values(graded):
    """A wrong answer's message names the variable; it never prints the reference value."""
    results = json.loads(graded["params_without_biases"].results_path.read_text())
    q2 = next(t for t in results["tests"] if t["name"].startswith("q2"))
    assert "n_params" in q2["output"], q2["output"]
    assert "203530" not in q2["output"] and "203,530" not in q2["output"], "a hidden test printed the expected value"
    results = json.loads(graded["sealed_test_on_validation"].results_path.read_text())
    q9 = next(t for t in results["tests"] if t["name"].startswith("q9"))
    assert "test_clean" in q9["output"], q9["output"]


def test_committed_student_version_is_up_to_date(built, repo):
    """student_template/when_it_fails/ is what building the master notebook writes now."""
    committed = repo / "student_template" / "when_it_fails"
    fresh = built.student_dir
    compared = filecmp.dircmp(committed, fresh)
    assert not compared.left_only and not compared.right_only, (
        f"files differ: {compared.left_only} / {compared.right_only}; run `python -m autograder build when_it_fails`")
    _, mismatch, errors = filecmp.cmpfiles(committed, fresh, compared.common_files, shallow=False)
    assert not mismatch and not errors, (
        f"out of date: {mismatch}; run `python -m autograder build when_it_fails` and commit student_template/")
