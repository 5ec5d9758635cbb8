"""Cells named as a student finds them, and graded names a later cell rebound.

A notebook reused ``x`` as a loop variable, set ``order = []`` and ``slide = None`` at its end: each
answer was graded by its final value, as it should be, but the message said "not defined" or "should
be a torch tensor, but it is an int", and named the cell as "Code cell 16", a number Jupyter shows
nowhere.
"""

from __future__ import annotations

import time

import nbformat
import pytest

from autograder.judge_interface import Limits
from autograder.kinds import MISSING, kind_of, kinds_of
from autograder.notes import cell_notes
from autograder.rebound import KindWatch, map_notebook
from autograder.session import Session
from autograder.student_process import CellRecord
from autograder.submission import cells_to_run

md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell


def notebook():
    """A student version's layout: setup, two questions each with an answer cell and Otter's check
    cell, a heading, and a cell at the end that reuses the answers' names."""
    ignored = code("print('ignored')")
    ignored.metadata["tags"] = ["otter_ignore"]
    return nbformat.v4.new_notebook(cells=[
        code("import otter\ngrader = otter.Notebook('x.ipynb')"),
        md("# The assignment"),
        code("import torch"),
        md("**q1. The order.** Store ..."),
        code("order = torch.arange(4)"),
        code('grader.check("q1")'),
        md("**q2_1.** Write `slide` ..."),
        ignored,
        code("def slide(x, pixels):\n    return x"),
        code('grader.check("q2_1")'),
        md("## Scratch work at the end"),
        code("x = 3"),
        code("for order in range(2):\n    pass\nslide = None"),
    ])


def test_cells_are_named_by_the_question_text_or_heading_above_them():
    actual = map_notebook(notebook())
    assert len(actual.labels) == len(cells_to_run(notebook())), "one name per cell the judge runs"
    assert actual.labels == [
        "the 1st code cell of the notebook",
        "the 1st code cell under the heading \"The assignment\"",
        "the 1st code cell under q1's text",
        "the 2nd code cell under q1's text",
        "the 2nd code cell under q2_1's text",  # the ignored cell is counted: the student sees it
        "the 3rd code cell under q2_1's text",
        "the 1st code cell under the heading \"Scratch work at the end\"",
        "the 2nd code cell under the heading \"Scratch work at the end\"",
    ], actual.labels
    assert actual.question_cells == {"q1": 3, "q2_1": 5}, (
        "a question's cell is the one that checks it"
    )


def test_a_question_without_its_check_cell_ends_at_its_last_code_cell():
    nb = notebook()
    del nb.cells[9]  # grader.check("q2_1")
    assert map_notebook(nb).question_cells["q2_1"] == 4


def test_kinds_are_read_without_the_students_code():
    import numpy as np
    import torch

    class Sneaky:
        def __eq__(self, other):
            raise RuntimeError("ran")

        @property
        def __class__(self):
            raise RuntimeError("ran")

    actual = kinds_of(
        {
            "t": torch.zeros(2),
            "p": torch.nn.Parameter(torch.zeros(1)),
            "m": torch.nn.Linear(1, 1),
            "a": np.zeros(2),
            "n": 3,
            "f": 0.5,
            "s": np.float32(1),
            "l": [],
            "d": {},
            "fn": len,
            "lam": lambda: 0,
            "none": None,
            "odd": Sneaky(),
        },
        ["t", "p", "m", "a", "n", "f", "s", "l", "d", "fn", "lam", "none", "odd", "gone"],
    )
    assert actual == {
        "t": "a torch tensor",
        "p": "a torch tensor",
        "m": "a torch model",
        "a": "a NumPy array",
        "n": "a number",
        "f": "a number",
        "s": "a number",
        "l": "a list",
        "d": "a dict",
        "fn": "a function",
        "lam": "a function",
        "none": "None",
        "odd": "a Sneaky",
        "gone": MISSING,
    }, actual
    assert kind_of(True) == kind_of(2), (
        "a bool and an int are the same kind: no rebound between them"
    )


def test_a_watch_reports_a_name_a_later_cell_rebound_and_which_cell():
    nb_map = map_notebook(notebook())
    watch = KindWatch({"q1": ["order"], "q2_1": ["slide", "x"]}, nb_map)
    per_cell = [
        {},
        {},
        {"order": "a torch tensor"},
        {"order": "a torch tensor"},
        {"order": "a torch tensor", "slide": "a function"},
        {"order": "a torch tensor", "slide": "a function"},
        {"order": "a torch tensor", "slide": "a function", "x": "a number"},
        {"order": "a number", "slide": "None", "x": "a number"},
    ]
    for index, kinds in enumerate(per_cell):
        watch.after_cell(index, {n: kinds.get(n, MISSING) for n in watch.names})
    (order,) = watch.rebound("q1")
    assert (order.name, order.then, order.now) == ("order", "a torch tensor", "a number")
    assert order.cell == "the 2nd code cell under the heading \"Scratch work at the end\"", (
        order.cell
    )
    assert [r.name for r in watch.rebound("q2_1")] == ["slide"], (
        "x was not defined after q2_1's cell: not rebound"
    )
    (message,) = watch.messages("q1")
    assert message.startswith(
        "`order` was rebound after its question (the 2nd code cell under the heading "
        "\"Scratch work at the end\"): it is a number at the end of the notebook; it was a "
        "torch tensor right after q1's cell (the 2nd code cell under q1's text)."
    ), message
    assert "Answers are read when the whole notebook has run" in message


def test_the_same_kind_or_a_name_defined_later_is_not_rebound():
    nb_map = map_notebook(notebook())
    watch = KindWatch({"q1": ["order"]}, nb_map)
    for index in range(8):
        watch.after_cell(index, {"order": MISSING if index < 4 else "a torch tensor"})
    assert watch.rebound("q1") == [], (
        "undefined at its check, defined later: graded as it ends, nothing to say"
    )
    watch = KindWatch({"q1": ["order"]}, nb_map)
    for index in range(8):
        watch.after_cell(index, {"order": "a torch tensor"})
    assert watch.rebound("q1") == [], (
        "a tensor replaced by another tensor is no rebound this can see"
    )


def test_a_deleted_name_is_reported_as_deleted():
    watch = KindWatch({"q1": ["order"]}, map_notebook(notebook()))
    for index in range(8):
        watch.after_cell(index, {"order": MISSING if index == 7 else "a torch tensor"})
    (message,) = watch.messages("q1")
    assert message.startswith(
        "`order` was deleted after its question (the 2nd code cell under the heading"
    ), message
    assert message.endswith("keep it defined to the end."), message


def test_cell_notes_name_cells_as_the_student_finds_them():
    labels = map_notebook(notebook())
    notes = cell_notes(
        [
            CellRecord(0),
            CellRecord(4, "ValueError: bad"),
            CellRecord(5, None, "interrupted after 60 seconds"),
            CellRecord(6, None, "not run: the grading deadline passed"),
            CellRecord(7, None, "not run: the grading deadline passed"),
        ],
        labels.label,
    )
    assert notes == [
        "The 2nd code cell under q2_1's text raised ValueError: bad; grading went on after it.",
        "The 3rd code cell under q2_1's text interrupted after 60 seconds; grading went on without "
        "it.",
        "The 1st code cell under the heading \"Scratch work at the end\" and the 1 code cell(s) "
        "after it were not "
        "run: the grading deadline passed.",
    ], notes


@pytest.fixture
def watched(tmp_path):
    nb = notebook()
    nb.cells[0].source = "pass"  # no Otter in the student process
    session = Session(tmp_path, cells_to_run(nb), Limits(), None, time.monotonic() + 120)
    session.notebook = map_notebook(nb)
    session.watch = KindWatch({"q1": ["order"], "q2_1": ["slide"]}, session.notebook)
    session.run_all()
    yield session
    session.process.stop()


def test_a_grading_session_watches_the_kinds_after_every_cell(watched):
    assert [r.name for r in watched.watch.rebound("q1")] == ["order"]
    assert [(r.then, r.now) for r in watched.watch.rebound("q2_1")] == [("a function", "None")]
    assert watched.values(["order"])["order"] == 1, "the watch changed nothing the cells left"
