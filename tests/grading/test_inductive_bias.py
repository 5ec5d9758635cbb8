"""What only the ``inductive_bias`` gradings show, on the batch that
``tests/grading/test_catalogues.py`` grades (one work unit of pytest-xdist with it, so the same
worker and batch): the messages of made-up functions and wrong answers."""

from __future__ import annotations

import pytest

from tests.fixtures.inductive_bias.catalogue import ALTERNATIVE, HOSTILE, WRONG
from tests.grading import common

NAME = "inductive_bias"

pytestmark = pytest.mark.grading


@pytest.fixture(scope="module")
def graded(tmp_path_factory, answers_folder):
    return common.graded_catalogue(NAME, tmp_path_factory, answers_folder)


def test_catalogue_is_large_enough():
    assert len(WRONG) >= 8 and len(ALTERNATIVE) >= 4


@pytest.mark.parametrize("variant, losing", HOSTILE, ids=lambda v: getattr(v, "name", ""))
def test_hostile_submission_says_why_it_gains_nothing(graded, variant, losing):
    """Each loses exactly its questions (tests/grading/test_catalogues.py), and says why: a rel_err
    honest in q6 and made up later (q8 keeps q6's verdict: the reference's), or made up
    from the start (it failed q6, and errors are not carried forward through a function: the curves
    are the reference's)."""
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
