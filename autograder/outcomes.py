"""Read a graded batch back from its output folder, for the report and the regrade diff.

A batch's folder (``grade --out OUT``) holds ``OUT/<label>/results.json`` in
Gradescope's format and ``OUT/scores.csv``. :func:`read_batch` reads it back
into one :class:`Outcome` per submission: the scores, the messages the
student saw, why it could not be graded, its grading time, and the limits
that stopped its code (listed in the results' ``extra_data``:
:func:`autograder.results.limits_of`). It needs nothing but those files, so it
works on any batch, also one graded earlier or on another machine.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from autograder.judge_interface import question_order
from autograder.results import NOT_GRADED, Scored, limits_of, question_scores

#: Otter's framing of a question's output (``otter/test_files``): ``q1 results:``, then per test
#: case ``q1 - 1 result:`` and ``✅ Test case passed``, or ``❌ Test case failed`` and ``Error at
#: line 19 in test q1:`` followed by the hidden test's line that raised (one line: Otter's context
#: is 0), then the error itself.
OTTER_SOURCE_LINE = re.compile(r"^[ \t]*Error at line \d+ in test [^\n]*:\n[^\n]*\n?", re.MULTILINE)
OTTER_FRAME = re.compile(
    r"^(\S+( - \d+)? results?:( All test cases passed!)?"
    r"|✅ Test case passed|❌ Test case failed)$"
)


def failure_text(output: str) -> str:
    """What a question's ``output`` says went wrong, without Otter's framing: the errors of its
    failed test cases (``CheckFailure: `slide(x, 1)` is not x moved 1 column(s) right ...``), each
    line once, and any other note. The hidden test's line Otter quotes is left out; an output in
    another form is kept, stripped."""
    lines = [line.strip() for line in OTTER_SOURCE_LINE.sub("", output).splitlines()]
    return "\n".join(dict.fromkeys(line for line in lines if line and not OTTER_FRAME.match(line)))


@dataclass
class Outcome(Scored):
    """One submission of a batch, as its ``results.json`` says.

    ``scores``: ``{question: (score, max_score)}``; ``messages``: ``{question: what its tests said
    went wrong}`` (:func:`failure_text` of its parts' outputs, joined by newlines; empty when
    nothing failed); ``error``: why it could not be graded, else ``None``; ``seconds``: the
    grading's ``execution_time``, ``None`` if missing; ``limits``: ``(kind, message)`` for
    each time a limit stopped or interrupted its code, as the judge listed them
    (:func:`autograder.results.limits_of`); ``out_of``: its row's ``possible`` in
    ``scores.csv`` (for one not graded: the batch's or the assignment's points), ``None`` if
    unknown.
    """

    label: str
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    output: str = ""
    error: str | None = None
    seconds: float | None = None
    limits: list[tuple[str, str]] = field(default_factory=list)
    out_of: float | None = None


class BatchError(ValueError):
    """A folder that holds no graded batch."""


def batch_labels_of(out_dir: Path) -> dict[str, float | None]:
    """The submissions of the batch in ``out_dir``, each with the points it is out of if known: the
    rows of its ``scores.csv`` (a folder reused for another batch keeps the earlier submissions'
    folders, which are not this batch's), else every folder holding a ``results.json``, by name.

    Raises:
        BatchError: ``out_dir`` is not a folder, or holds neither.
    """
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise BatchError(
            f"{out_dir} is not a folder: expected a batch's output folder (grade --out), holding "
            "scores.csv and one folder per submission with its results.json"
        )
    table = out_dir / "scores.csv"
    if table.is_file():
        with open(table, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        if rows and rows[0][:1] == ["submission"]:
            at = rows[0].index("possible") if "possible" in rows[0] else None
            return {
                row[0]: _number(row[at]) if at is not None and at < len(row) else None
                for row in rows[1:]
                if row
            }
    labels = sorted(p.parent.name for p in out_dir.glob("*/results.json"))
    if not labels:
        raise BatchError(
            f"{out_dir} holds no graded batch: no scores.csv and no <submission>/results.json"
        )
    return dict.fromkeys(labels)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_outcome(results_path: Path, label: str) -> Outcome:
    """The :class:`Outcome` of one ``results.json``; a missing or unreadable file is a submission
    that could not be graded, saying so."""
    try:
        results = json.loads(Path(results_path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Outcome(label, error=f"its results file is missing ({results_path})")
    except (OSError, ValueError) as err:
        return Outcome(label, error=f"its results file could not be read ({results_path}: {err})")
    if not isinstance(results, dict):
        return Outcome(label, error=f"its results file is not a results object ({results_path})")
    output = str(results.get("output") or "")
    seconds = results.get("execution_time")
    seconds = float(seconds) if isinstance(seconds, (int, float)) else None
    messages: dict[str, list[str]] = {}
    for test in results.get("tests") or []:
        text = str(test.get("output") or "").strip()
        if test.get("max_score") in (None, 0):
            continue
        question = str(test.get("name", "")).split(" - ")[0]
        messages.setdefault(question, [])
        messages[question].append(failure_text(text))
    if not results.get("tests"):
        error = output.removeprefix(NOT_GRADED) or "not graded"
        return Outcome(
            label,
            output=output,
            error=error,
            seconds=seconds,
            limits=limits_of(results),
        )
    return Outcome(
        label,
        scores=question_scores(results),
        output=output,
        seconds=seconds,
        messages={
            q: "\n".join(dict.fromkeys(line for text in m for line in text.splitlines()))
            for q, m in messages.items()
        },
        limits=limits_of(results),
    )


def read_batch(out_dir: Path) -> list[Outcome]:
    """Every submission of the batch in ``out_dir`` (:func:`batch_labels_of`), in its order.

    Raises:
        BatchError: ``out_dir`` holds no graded batch.
    """
    out_dir = Path(out_dir)
    outcomes = []
    for label, out_of in batch_labels_of(out_dir).items():
        outcome = read_outcome(out_dir / label / "results.json", label)
        outcome.out_of = out_of
        outcomes.append(outcome)
    return outcomes


def batch_possible(outcomes: list[Outcome]) -> float:
    """The points a submission of the batch can get: the most a graded one could, else the most
    ``out_of`` (an ungraded row's in ``scores.csv``: the assignment's), else 0."""
    graded = [o.possible for o in outcomes if o.error is None]
    known = [o.out_of for o in outcomes if o.out_of is not None]
    return max(graded or known or [0.0])


def questions(outcomes: list[Outcome]) -> list[str]:
    """Every question of the batch, in notebook order."""
    return sorted({q for o in outcomes for q in o.scores}, key=question_order)
