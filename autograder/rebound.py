"""Where a notebook's code cells are, in words a student finds in Jupyter, and which graded names a
later cell rebound.

Jupyter shows no cell numbers (only ``[5]``, the order cells ran in), so a cell is named by the
question text or heading above it: "the 2nd code cell under q1_4". Answers are read when the whole
notebook has run, so a name a later cell reuses (``x`` as a loop variable, ``slide = None`` at the
end) is graded by its last value; the
:class:`KindWatch` of a grading records each graded name's kind (:mod:`autograder.kinds`) after
every cell, so a question that then fails can say "rebound after its question" and by which cell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autograder.kinds import MISSING

#: A question's text: a markdown cell opening with its bold name, ``**q1_4. A shift...**`` or
#: ``**q1.**``.
QUESTION_TEXT = re.compile(r"\s*\*\*(q\d[\w.]*?)[.:*\s]")
#: A markdown heading.
HEADING = re.compile(r"\s*#{1,6}\s+(.+)")
#: Otter's check of one question, as the student version holds it below each answer cell.
CHECK_CALL = re.compile(r"""grader\.check\(\s*["']([\w.]+)["']\s*\)""")
#: The most characters of a heading a cell's name quotes.
MAX_HEADING = 50


def _source(cell) -> str:
    return "".join(cell.source) if isinstance(cell.source, list) else str(cell.source)


def _ignored(cell) -> bool:
    """Otter's ignored cells, which :func:`autograder.submission.cells_to_run` drops (the same
    test)."""
    meta = cell.get("metadata", {})
    return "otter_ignore" in meta.get("tags", []) or meta.get("otter", {}).get("ignore", False)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass
class NotebookMap:
    """For the code cells :func:`autograder.submission.cells_to_run` keeps (by their index in its
    list): each one's name (:meth:`label`), and the cell after which each question's answer stands
    (the cell of its ``grader.check``, else the last code cell under its text)."""

    labels: list[str] = field(default_factory=list)
    question_cells: dict[str, int] = field(default_factory=dict)

    def label(self, index: int) -> str:
        return self.labels[index] if 0 <= index < len(self.labels) else f"code cell {index + 1}"


def map_notebook(nb) -> NotebookMap:
    """The :class:`NotebookMap` of a notebook (``nbformat`` node)."""
    result = NotebookMap()
    # the question text or heading above, and code cells since it (ignored ones too)
    anchor, count = None, 0
    last_under: dict[str, int] = {}
    for cell in nb.cells:
        kind = cell.get("cell_type")
        if kind == "markdown":
            source = _source(cell)
            question, heading = QUESTION_TEXT.match(source), HEADING.match(source)
            if question or heading:
                anchor = (
                    ("question", question.group(1))
                    if question
                    else ("heading", heading.group(1).strip())
                )
                count = 0
            continue
        if kind != "code":
            continue
        count += 1
        if _ignored(cell):
            continue
        index = len(result.labels)
        if anchor is None:
            result.labels.append(f"the {_ordinal(count)} code cell of the notebook")
        elif anchor[0] == "question":
            result.labels.append(f"the {_ordinal(count)} code cell under {anchor[1]}'s text")
            last_under[anchor[1]] = index
        else:
            title = (
                anchor[1]
                if len(anchor[1]) <= MAX_HEADING
                else anchor[1][:MAX_HEADING].rstrip() + "…"
            )
            result.labels.append(f"the {_ordinal(count)} code cell under the heading \"{title}\"")
        for name in CHECK_CALL.findall(_source(cell)):
            result.question_cells.setdefault(name, index)
    for name, index in last_under.items():
        result.question_cells.setdefault(name, index)
    return result


@dataclass
class Rebound:
    """A graded name whose kind at the end differs from its kind right after its question's cell."""

    name: str
    then: str  # its kind right after the question's cell
    now: str  # its kind at the end of the notebook
    cell: str | None  # the name of the cell that last changed its kind

    def message(self, question: str, question_cell: str) -> str:
        by = f" ({self.cell})" if self.cell else ""
        if self.now == MISSING:
            change, fix = f"was deleted after its question{by}", "keep it defined to the end"
        else:
            change = (
                f"was rebound after its question{by}: it is {self.now} at the end of the notebook"
            )
            fix = "give the later value another name"
        return (
            f"`{self.name}` {change}; it was {self.then} right after {question}'s cell "
            f"({question_cell}). "
            f"Answers are read when the whole notebook has run: {fix}."
        )


class KindWatch:
    """Each watched name's kind after every cell: its kind when its question's cell ended, and the
    last cell that changed it. Holds one kind and one cell per name and per question, however many
    cells run."""

    def __init__(self, names_by_question: dict[str, list[str]], notebook: NotebookMap):
        self.notebook = notebook
        self.questions = {
            q: sorted(set(names))
            for q, names in names_by_question.items()
            if q in notebook.question_cells
        }
        self.names = sorted({n for names in self.questions.values() for n in names})
        self.kinds: dict[str, str] = {}
        self.changed_at: dict[str, int] = {}
        self.at_question: dict[str, dict[str, str]] = {}

    def after_cell(self, index: int, kinds: dict) -> None:
        """Record the ``kinds`` (``{name: kind}``, from the student process) the names had after
        cell ``index``."""
        for name in self.names:
            kind = kinds.get(name, MISSING)
            kind = kind[:80] if isinstance(kind, str) else MISSING
            if name in self.kinds and self.kinds[name] != kind:
                self.changed_at[name] = index
            self.kinds[name] = kind
        for question, names in self.questions.items():
            if self.notebook.question_cells[question] == index:
                self.at_question[question] = {n: self.kinds[n] for n in names}

    def rebound(self, question: str) -> list[Rebound]:
        """The names of ``question`` that were defined right after its cell and hold another kind of
        value (or none) now."""
        then = self.at_question.get(question, {})
        found = []
        for name, kind in then.items():
            now = self.kinds.get(name, MISSING)
            if kind != MISSING and now != kind:
                cell = self.changed_at.get(name)
                found.append(
                    Rebound(name, kind, now, None if cell is None else self.notebook.label(cell))
                )
        return found

    def messages(self, question: str) -> list[str]:
        """One sentence per rebound name of ``question`` (:meth:`Rebound.message`)."""
        cell = self.notebook.question_cells.get(question)
        where = self.notebook.label(cell) if cell is not None else "its answer cell"
        return [r.message(question, where) for r in self.rebound(question)]
