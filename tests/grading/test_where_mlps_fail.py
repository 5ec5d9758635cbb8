"""What only the lesson's gradings show, on the batch ``tests/grading/test_catalogues.py`` grades
(one work unit of pytest-xdist with it, so the same worker and batch): a wrong answer's message."""

from __future__ import annotations

import pytest

from tests.grading import common

NAME = "where_mlps_fail"

pytestmark = pytest.mark.grading


@pytest.fixture(scope="module")
def graded(tmp_path_factory, answers_folder):
    return common.graded_catalogue(NAME, tmp_path_factory, answers_folder)


def test_hidden_failures_name_the_variable_and_hide_expected_values(graded):
    """A wrong answer's message names the variable; it never prints the reference value."""
    q1_1 = common.test_output(graded["logit_without_bias"], "q1_1")
    assert "trouser_logit_by_hand" in q1_1, q1_1
    from reference.where_mlps_fail import answers

    expected_logit = answers()["trouser_logit_by_hand"]
    for shown in (f"{expected_logit:.4f}", f"{expected_logit:.3f}", f"{expected_logit:.2f}"):
        assert shown not in q1_1, "a hidden test printed the expected value"
