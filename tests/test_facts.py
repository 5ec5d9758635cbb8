"""An assignment's facts, declared once (``assignments/NAME/questions.yaml``,
:mod:`autograder.facts`): what the build makes from them, and what it refuses."""

from __future__ import annotations

import copy
import importlib
import shutil

import nbformat
import pytest

from autograder import facts
from autograder.build import available
from tests.grading import common

ASSIGNMENTS = available()


@pytest.fixture(scope="module")
def where_mlps_fail() -> facts.Facts:
    return facts.load("where_mlps_fail")


def master(name: str) -> nbformat.NotebookNode:
    return nbformat.read(facts.ASSIGNMENTS / name / f"{name}.ipynb", as_version=4)


def raw_question(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    return next(
        c
        for c in nb.cells
        if c.cell_type == "raw" and c.source.startswith(f"# BEGIN QUESTION\nname: {name}\n")
    )


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_assignment_declares_its_questions_and_its_checks_take_the_declared_names(name):
    declared = facts.load(name)
    facts.check_signatures(declared)
    facts.apply_to_notebook(master(name), declared)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_committed_answers_tables_are_what_the_declaration_makes(name):
    path = facts.ASSIGNMENTS / name / facts.ANSWERS_FILE
    actual = path.read_text()
    expected = facts.render_answers(facts.load(name), actual)
    assert actual == expected, f"{path} is out of date: run `python -m autograder build {name}`"


def test_the_points_are_what_the_notebooks_gave():
    """The lesson's 31 autograded points, as its notebook gave them before the declaration; q4_1
    to q4_4 by hand."""
    actual = facts.autograded_points("where_mlps_fail")
    expected = {
        "q1_1": 2, "q1_2": 2, "q1_3": 2, "q1_4": 3, "q1_5": 1,
        "q2_1": 2, "q2_2": 1, "q2_3": 3, "q2_4": 1, "q2_5": 1,
        "q3_1": 1, "q3_2": 2, "q3_3": 3, "q3_4": 1, "q3_5": 1, "q3_6": 2, "q3_7": 1,
        "q5": 2,
    }  # fmt: skip
    assert actual == expected
    # the course's four texts, as docs/assignments.md lists their autograded points
    totals = {
        name: sum(facts.autograded_points(name).values())
        for name in ("where_mlps_fail", "when_it_fails", "inductive_bias", "telling_things_apart")
    }
    assert totals == {
        "where_mlps_fail": 31, "when_it_fails": 27, "inductive_bias": 20, "telling_things_apart": 21
    }  # fmt: skip


def test_the_build_writes_the_declared_points_and_test_cells(where_mlps_fail):
    nb = facts.apply_to_notebook(master("where_mlps_fail"), where_mlps_fail)
    assert "points: 3" in raw_question(nb, "q1_4").source
    cells = [c.source for c in nb.cells]
    hidden = next(s for s in cells if "def test_q3_2_hidden(" in s)
    assert hidden == (
        '""" # BEGIN TEST CONFIG\npoints: 2\nhidden: true\n""" # END TEST CONFIG\n'
        "def test_q3_2_hidden(peak, edges, edges_peak, x, vertical, horizontal):\n"
        "    from autograder.checks.where_mlps_fail import check_q3_2\n"
        "    check_q3_2(peak, edges, edges_peak, x, vertical, horizontal)"
    )
    # the public test takes the graded names, and of the used ones only those its body reads
    public = next(s for s in cells if "def test_q3_2_public(" in s)
    assert public.startswith("def test_q3_2_public(peak, edges, edges_peak):\n    import torch\n")
    # a second application finds its own cells and accepts them
    again = facts.apply_to_notebook(copy.deepcopy(nb), where_mlps_fail)
    assert [c.source for c in again.cells] == cells


def test_a_question_without_a_public_test_checks_its_names_are_defined():
    q = facts.Question("q1", 2, False, ("pool", "pooled"), ("maps",), "", ())
    _, public, _, _ = facts.test_cells("max_pooling", q)
    assert public.source == (
        "def test_q1_public(pool, pooled):\n"
        "    from autograder.public import public_defined\n"
        "    public_defined(pool=pool, pooled=pooled)"
    )


def test_declared_options_are_passed_to_the_check_as_keywords():
    q = facts.Question("q3", 2, False, ("K",), ("neigh",), "", (), (("carry_forward", True),))
    _, _, hidden, _ = facts.test_cells("inductive_bias", q)
    assert hidden.source.endswith("    check_q3(K, neigh, carry_forward=True)")


def test_points_written_in_the_notebook_must_be_the_declared_ones(where_mlps_fail):
    nb = master("where_mlps_fail")
    raw_question(nb, "q1_4").source = "# BEGIN QUESTION\nname: q1_4\npoints: 4\n"
    with pytest.raises(facts.FactsError, match=r"gives q1_4 4 points, questions.yaml 3"):
        facts.apply_to_notebook(nb, where_mlps_fail)


def test_test_cells_written_in_the_notebook_must_be_the_declared_ones(where_mlps_fail):
    nb = facts.apply_to_notebook(master("where_mlps_fail"), where_mlps_fail)
    cell = next(c for c in nb.cells if "def test_q2_5_public(" in c.source)
    cell.source = cell.source.replace("== 3", "== 4")
    with pytest.raises(facts.FactsError, match=r"test cells for q2_5 that differ"):
        facts.apply_to_notebook(nb, where_mlps_fail)


def test_a_question_in_only_one_of_notebook_and_declaration_stops_the_build(where_mlps_fail):
    nb = master("where_mlps_fail")
    raw_question(nb, "q5").source = "# BEGIN QUESTION\nname: q6\n"
    with pytest.raises(facts.FactsError, match=r"question 'q6' is in the master notebook but not"):
        facts.apply_to_notebook(nb, where_mlps_fail)
    nb = master("where_mlps_fail")
    nb.cells.remove(raw_question(nb, "q5"))
    with pytest.raises(facts.FactsError, match=r"declares q5, which the master notebook has no"):
        facts.apply_to_notebook(nb, where_mlps_fail)


def test_a_check_that_takes_other_names_stops_the_build(where_mlps_fail):
    changed = facts.Facts(
        "where_mlps_fail",
        tuple(
            q if q.name != "q1_2" else facts.Question(**{**q.__dict__, "uses": ("linear",)})
            for q in where_mlps_fail.questions
        ),
        where_mlps_fail.answer_columns,
    )
    with pytest.raises(
        facts.FactsError,
        match=r"check_q1_2 in autograder/checks/where_mlps_fail.py takes \(order, "
        r"scrambled_accuracy, saved_accuracy_on_mixed\), but questions.yaml declares",
    ):
        facts.check_signatures(changed)


def test_a_graded_name_without_an_answers_row_stops_the_build(where_mlps_fail):
    q = next(q for q in where_mlps_fail.questions if q.name == "q1_4")
    short = facts.Facts(
        "where_mlps_fail",
        tuple(
            facts.Question(**{**p.__dict__, "answers": q.answers[:1]}) if p is q else p
            for p in where_mlps_fail.questions
        ),
        where_mlps_fail.answer_columns,
    )
    with pytest.raises(facts.FactsError, match=r"gives q1_4 no answers row for slide_accuracy"):
        facts.answers_table(short, ["q1_4"])


@pytest.mark.parametrize(
    "edit, where",
    [
        (("points: 2", "points: two"), r"questions.q1_1.points: 'two' is not of type 'integer'"),
        (("  q1_2:", "  question_2:"), r"questions: 'question_2' does not match"),
        (("    graded: [order,", "    grades: [order,"), r"questions.q1_2: Additional properties"),
    ],
)
def test_a_malformed_declaration_is_refused_with_the_field_named(tmp_path, edit, where):
    folder = tmp_path / "where_mlps_fail"
    folder.mkdir()
    text = (facts.ASSIGNMENTS / "where_mlps_fail" / facts.FACTS_FILE).read_text()
    assert edit[0] in text
    (folder / facts.FACTS_FILE).write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(facts.FactsError, match=where):
        facts.load("where_mlps_fail", tmp_path)


def test_an_assignment_without_a_declaration_is_refused(tmp_path):
    shutil.copytree(facts.ASSIGNMENTS / "where_mlps_fail", tmp_path / "copy", dirs_exist_ok=True)
    (tmp_path / "copy" / facts.FACTS_FILE).unlink()
    with pytest.raises(facts.FactsError, match=r"copy: no declaration .*questions.yaml"):
        facts.load("copy", tmp_path)


# -- the numbers the course text prints -----------------------------------------------------------


def printed_decimals(value: float) -> int:
    """The digits after the point of ``value`` as printed: 0.6411 -> 4."""
    text = repr(value)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 0


def as_printed(actual, printed):
    """``actual`` (a reference value: tensors, tuples, numbers) in the form and rounding of
    ``printed``: floats to the printed digits, sequences element by element."""
    if hasattr(actual, "tolist"):
        actual = actual.tolist()
    if isinstance(printed, float):
        return round(float(actual), printed_decimals(printed))
    if isinstance(printed, (tuple, list)):
        return type(printed)(as_printed(a, p) for a, p in zip(actual, printed, strict=True))
    if isinstance(printed, dict):
        return {k: as_printed(actual[k], p) for k, p in printed.items()}
    return type(printed)(actual)


PRINTED = [
    (name, key, value)
    for name in common.with_catalogue()
    for key, value in getattr(common.catalogue(name), "PRINTED", {}).items()
]


@pytest.mark.parametrize("name, key, printed", PRINTED, ids=[f"{n}-{k}" for n, k, _ in PRINTED])
def test_the_reference_gives_every_number_the_course_text_prints(name, key, printed):
    """A catalogue's ``PRINTED``: the reference value of ``key``, rounded as the text prints it."""
    actual = importlib.import_module(f"reference.{name}").answers()[key]
    assert as_printed(actual, printed) == printed, (
        f"{name}.{key}: {actual!r} printed as {printed!r}"
    )


def test_printed_numbers_are_compared_to_their_printed_digits():
    assert as_printed(0.64108, 0.6411) == 0.6411
    assert as_printed(0.64158, 0.6411) != 0.6411
    assert as_printed((1, 16, 12.0, 12), (1, 16, 12, 12)) == (1, 16, 12, 12)
    assert as_printed({"a": 0.126, "b": 3}, {"a": 0.13, "b": 3}) == {"a": 0.13, "b": 3}
    assert as_printed(2.30258, 2.3) == 2.3
