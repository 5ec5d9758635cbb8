"""The results a student sees for answers of the right kinds and shapes with the wrong values (issue
25).

Otter's public-test summary said "All test cases passed!" for every question of such a notebook,
which then scored 0/31; and a name a later cell rebound was reported as "not defined" or "should be
a torch tensor". Here the solution of ``where_mlps_fail`` gets one last cell that gives
``shift_accuracies`` and ``slide`` wrong values of the right kinds and rebinds ``order`` to a list,
and is graded by the real judge.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from autograder.grade import grade_one
from autograder.public_summary import HEADER

pytestmark = pytest.mark.grading

LAST_CELL = '''shift_accuracies = {key: 0.0 for key in shift_accuracies}

def slide(x, pixels):
    return x.clone()

order = []'''


@pytest.fixture(scope="module")
def graded(built_where_mlps_fail, tmp_path_factory):
    folder = tmp_path_factory.mktemp("public-summary")
    nb = nbformat.read(built_where_mlps_fail.solution, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("## Scratch work"))
    nb.cells.append(nbformat.v4.new_code_cell(LAST_CELL))
    submission = folder / "wrong_values.ipynb"
    nbformat.write(nb, submission)
    result = grade_one(built_where_mlps_fail.autograder_zip, submission, folder / "out")
    assert result.error is None, result.error
    return result, json.loads(result.results_path.read_text())


def test_wrong_values_lose_their_questions(graded):
    result, _ = graded
    lost = sorted(q for q, (score, possible) in result.scores.items() if score < possible)
    assert lost == ["q1_2", "q1_3", "q1_4"], result.scores


def test_the_public_summary_never_says_a_question_passed_that_then_lost_points(graded):
    _, results = graded
    (public,) = [t for t in results["tests"] if t["name"] == "Public Tests"]
    text = public["output"]
    assert "All test cases passed" not in text, text
    assert text.startswith(HEADER), text[:300]
    assert public["status"] == "failed", "q1_2's public check fails: `order` is a list"
    assert ("q1_3: public checks passed; the values are graded after you submit\n"
            "    checked `shift_accuracies`: a dict keyed by (dims, pixels)") in text, text
    assert (
        "q1_4: public checks passed; the values are graded after you submit\n"
        "    checked `slide_accuracy` defined\n"
        "    checked `slide`: a function that runs on a small input without raising"
    ) in text, text
    assert (
        "q1_2: public check failed\n"
        "    checked `scrambled_accuracy`, `saved_accuracy_on_mixed` defined\n"
        "    checked `order`: a torch tensor of shape (784,), torch.int64\n"
        "    `order` should be a torch tensor, but it is a list."
    ) in text, text
    assert "Test case failed" not in text and "CheckFailure" not in text, text


def test_a_rebound_name_is_reported_with_the_cell_that_rebound_it(graded):
    _, results = graded
    (q1_2,) = [t for t in results["tests"] if t["name"] == "q1_2"]
    expected = (
        "`order` was rebound after its question (the 1st code cell under the heading \"Scratch "
        "work\"): "
        "it is a list at the end of the notebook; it was a torch tensor right after q1_2's cell "
        "(the 2nd "
        "code cell under q1_2's text). Answers are read when the whole notebook has run: give the "
        "later "
        "value another name."
    )
    assert expected in q1_2["output"], q1_2["output"]
    assert f"q1_2: {expected}" in results["output"], results["output"]
    assert "rebound" not in results["output"].replace(f"q1_2: {expected}", ""), (
        "shift_accuracies and slide kept their kinds: only order is reported"
    )
