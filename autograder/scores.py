"""A batch's scores: one :class:`GradeResult` per submission, ``scores.csv`` (a row per submission,
a column per question) and the table ``grade`` prints.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from autograder.judge_interface import question_order
from autograder.results import Scored
from autograder.staging import submission_label


@dataclass
class GradeResult(Scored):
    """One submission's grade.

    ``scores`` maps question name to ``(score, max_score)``; ``error`` is
    ``None`` when Otter graded the submission, else why it could not.
    """

    submission: Path
    results_path: Path
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    #: the name of its outputs' folder and its row in a batch (:func:`batch_labels`); ``None``: its
    #: file name
    label: str | None = None
    #: the assignment's points (its autograder zip's tests), which a row that could not be graded is
    #: out of when no submission of its batch was graded; ``None`` if unknown
    out_of: float | None = None
    #: whether ``error`` is the grader's own fault (:mod:`autograder.grading_errors`), not the
    #: submission's
    grading_error: bool = False

    @property
    def shown_error(self) -> str | None:
        """``error`` as the table and scores.csv show it: a grading error's begins ``grading error:
        ``."""
        if self.error is None or not self.grading_error:
            return self.error
        from autograder.grading_errors import LABEL

        return f"{LABEL}: {self.error}"


def _questions(results: list[GradeResult]) -> list[str]:
    return sorted({q for r in results for q in r.scores}, key=question_order)


def _batch_possible(results: list[GradeResult]) -> float | None:
    """The points a submission of the batch can get (the most any graded one could; if none was
    graded, the assignment's, :attr:`GradeResult.out_of`), ``None`` if neither is known: an ungraded
    row is out of them too (a spreadsheet must not divide by a ``possible`` of 0)."""
    graded = [r.possible for r in results if not r.error]
    known = [r.out_of for r in results if r.out_of is not None]
    return max(graded) if graded else max(known) if known else None


def write_csv(results: list[GradeResult], labels: list[str], path: Path) -> None:
    """One row per submission: label, each question's score, total, possible, error. A row that
    could not be graded has no question scores, a total of 0, and the batch's possible points
    (:func:`_batch_possible`; 0 if unknown); its error begins ``grading error: `` when the grader
    failed (:attr:`GradeResult.shown_error`)."""
    questions = _questions(results)
    batch_possible = _batch_possible(results) or 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", *questions, "total", "possible", "error"])
        for label, r in zip(labels, results):
            writer.writerow(
                [
                    label,
                    *[_fmt(r.scores[q][0]) if q in r.scores else "" for q in questions],
                    _fmt(r.total),
                    _fmt(batch_possible if r.error else r.possible),
                    r.shown_error or "",
                ]
            )


def _fmt(x: float) -> str:
    return f"{x:g}"


def format_table(results: list[GradeResult]) -> str:
    """A plain-text table: submission, total / possible, then the questions that lost points."""
    rows = [("submission", "score", "lost points on")]
    batch_possible = _batch_possible(results)
    for r in results:
        if r.error:
            score = "0" if batch_possible is None else f"0/{_fmt(batch_possible)}"
            shown = r.shown_error if r.grading_error else f"not graded: {r.error}"
            rows.append((r.label or submission_label(r.submission), score, shown))
            continue
        lost = [
            f"{q} ({_fmt(s)}/{_fmt(m)})"
            for q, (s, m) in sorted(r.scores.items(), key=lambda i: question_order(i[0]))
            if s < m
        ]
        rows.append(
            (
                r.label or submission_label(r.submission),
                f"{_fmt(r.total)}/{_fmt(r.possible)}",
                ", ".join(lost) or "-",
            )
        )
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    return "\n".join(f"{a:<{width[0]}}  {b:>{width[1]}}  {c}" for a, b, c in rows)
