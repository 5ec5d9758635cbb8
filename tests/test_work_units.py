"""What each pytest-xdist worker runs whole (``tests/conftest.py``): an assignment's catalogue is
graded once, by the worker that runs all the tests reading it."""

from __future__ import annotations

import pytest

from tests.conftest import work_unit


@pytest.mark.parametrize(
    "nodeid, expected",
    [
        (
            "tests/grading/test_catalogues.py::test_wrong_submission_loses_exactly_its_question"
            "[when_it_fails-roll_for_shift]",
            "grading_when_it_fails",
        ),
        (
            "tests/grading/test_catalogues.py::test_solution_scores_full_marks[where_mlps_fail]",
            "grading_where_mlps_fail",
        ),
        (
            "tests/grading/test_when_it_fails.py::test_hidden_failures_name_the_variable_and_hide_"
            "expected_values",
            "grading_when_it_fails",
        ),
        (
            "tests/grading/test_catalogues.py::test_every_master_notebook_has_a_catalogue",
            "tests/grading/test_catalogues.py",
        ),
        ("tests/grading/test_hostile.py::test_x[where_mlps_fail]", "tests/grading/test_hostile.py"),
        ("tests/test_facts.py::test_y[max_pooling]", "tests/test_facts.py"),
    ],
)
def test_an_assignments_gradings_are_one_unit_and_other_modules_their_own(nodeid, expected):
    assert work_unit(nodeid) == expected
