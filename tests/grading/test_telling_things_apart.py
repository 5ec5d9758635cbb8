"""What only the chapter's gradings show, on the batch ``tests/grading/test_catalogues.py`` grades
(one work unit of pytest-xdist with it, so the same worker and batch): a wrong answer's message,
and the digits the sandbox user reads."""

from __future__ import annotations

import os

import pytest

from autograder.facts import autograded_points
from tests.fixtures.telling_things_apart.catalogue import ALTERNATIVE, WRONG, grading_environment
from tests.grading import common

NAME = "telling_things_apart"

pytestmark = pytest.mark.grading

EXPECTED_POINTS = autograded_points(NAME)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, answers_folder):
    return common.graded_catalogue(NAME, tmp_path_factory, answers_folder)


def test_catalogue_is_large_enough():
    assert len(WRONG) >= 8 and len(ALTERNATIVE) >= 4, (
        "issue 7 asks for 8 mistakes and 4 alternatives at least"
    )
    assert {v.loses for v in WRONG} <= set(EXPECTED_POINTS), (
        "a mistake names a question the notebook does not have"
    )


def test_hidden_failures_name_the_variable_and_hide_expected_values(graded):
    """A wrong answer's message names the variable; it never prints the reference value."""
    q4 = common.test_output(graded["test_digits_used_in_training"], "q4")
    assert "test accuracy" in q4, q4
    from reference.telling_things_apart import answers

    expected = answers()["test_accuracy"]
    for shown in (f"{expected:.4f}", f"{expected:.3f}", f"{expected:.2f}"):
        assert shown not in q4, "a hidden test printed the expected value"


def test_sandbox_can_read_the_digits():
    """The copy the sandbox user reads while the catalogue is graded is world-readable all the way
    down (the catalogue's ``grading_environment``), and named by ``$MNIST_NPZ`` meanwhile."""
    with grading_environment() as readable_mnist:
        assert os.environ["MNIST_NPZ"] == str(readable_mnist)
        assert os.stat(readable_mnist).st_mode & 0o004
        assert os.stat(readable_mnist.parent).st_mode & 0o001
