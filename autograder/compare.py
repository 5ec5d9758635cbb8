"""Compare two gradings of the same batch: ``python -m autograder compare OLD_OUT NEW_OUT``.

After a check is fixed and the batch regraded, staff need to know whose score
changed. :func:`compare` lists every submission whose total or any question's
score differs between the two output folders, with both scores and both
messages the student saw, and every submission graded in only one of them.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from autograder.judge_interface import question_order
from autograder.outcomes import Outcome, batch_possible, read_batch

#: Scores that differ by less than this are the same (sums of float parts).
TOLERANCE = 1e-9
#: The ``question`` of a submission in one of the two batches only.
ONLY_OLD, ONLY_NEW = "only in OLD", "only in NEW"
#: The CSV's file name in the new batch's folder, unless another is asked for.
CSV_NAME = "compare.csv"
#: The CSV's columns (:func:`write_csv`).
CSV_COLUMNS = ("submission", "question", "old score", "new score", "old message", "new message")


@dataclass
class Change:
    """One line of the diff: ``question`` is a question, ``"total"``, or :data:`ONLY_OLD` /
    :data:`ONLY_NEW` for a submission in one batch only (its score in the other is ``None``). A
    score is ``"score/points"``; a message is what that question's tests showed (for the total and
    the one-batch lines: why it could not be graded, if so)."""

    submission: str
    question: str
    old_score: str | None
    new_score: str | None
    old_message: str
    new_message: str


def _fmt(score: float, points: float) -> str:
    return f"{score:g}/{points:g}"


def _total(o: Outcome, possible: float) -> str:
    return _fmt(0.0, possible) if o.error is not None else _fmt(o.total, o.possible)


def compare(old_dir: Path, new_dir: Path) -> list[Change]:
    """The changes from the batch in ``old_dir`` to the one in ``new_dir``, submission by submission
    (in the new batch's order, then those only in the old), each changed submission's total first,
    then its questions in notebook order.

    Raises:
        autograder.outcomes.BatchError: either folder holds no graded batch.
    """
    old_list, new_list = read_batch(old_dir), read_batch(new_dir)
    old, new = {o.label: o for o in old_list}, {o.label: o for o in new_list}
    old_possible, new_possible = batch_possible(old_list), batch_possible(new_list)
    changes: list[Change] = []
    for label in [*new, *(label for label in old if label not in new)]:
        a, b = old.get(label), new.get(label)
        if a is None or b is None:
            if a is None:
                changes.append(
                    Change(label, ONLY_NEW, None, _total(b, new_possible), "", b.error or "")
                )
            else:
                changes.append(
                    Change(label, ONLY_OLD, _total(a, old_possible), None, a.error or "", "")
                )
            continue
        lines = [
            Change(
                label,
                q,
                _fmt(*a.scores[q]) if q in a.scores else None,
                _fmt(*b.scores[q]) if q in b.scores else None,
                a.messages.get(q, ""),
                b.messages.get(q, ""),
            )
            for q in sorted(set(a.scores) | set(b.scores), key=question_order)
            if not _same(a.scores.get(q), b.scores.get(q))
        ]
        a_total, b_total = _total(a, old_possible), _total(b, new_possible)
        if lines or a_total != b_total or (a.error is None) != (b.error is None):
            changes.append(Change(label, "total", a_total, b_total, a.error or "", b.error or ""))
            changes.extend(lines)
    return changes


def _same(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a[0] - b[0]) < TOLERANCE and abs(a[1] - b[1]) < TOLERANCE


def write_csv(changes: list[Change], path: Path) -> None:
    """One row per :class:`Change` (:data:`CSV_COLUMNS`); a missing score is an empty cell."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for c in changes:
            writer.writerow(
                [
                    c.submission,
                    c.question,
                    c.old_score or "",
                    c.new_score or "",
                    c.old_message,
                    c.new_message,
                ]
            )


#: Characters of a message printed; the CSV holds it whole.
PRINTED_CHARS = 400


def format_changes(changes: list[Change], old_dir: Path, new_dir: Path) -> str:
    """The changes as text: one block per submission, its total then each changed question with both
    messages."""
    if not changes:
        return f"no score changed between {old_dir} and {new_dir}"
    submissions = list(dict.fromkeys(c.submission for c in changes))
    out = [f"{len(submissions)} submission(s) changed between OLD {old_dir} and NEW {new_dir}:"]
    for c in changes:
        if c.question in (ONLY_OLD, ONLY_NEW):
            out.append(f"{c.submission}: {c.question} ({c.old_score or c.new_score})")
            out += _messages(c, "    ")
        elif c.question == "total":
            out.append(f"{c.submission}: total {c.old_score} -> {c.new_score}")
            out += _messages(c, "    ")
        else:
            out.append(f"  {c.question}: {c.old_score or 'absent'} -> {c.new_score or 'absent'}")
            out += _messages(c, "      ")
    return "\n".join(out)


def _messages(c: Change, indent: str) -> list[str]:
    lines = []
    for side, message in (("old", c.old_message), ("new", c.new_message)):
        # there a message is why it was not graded
        if not message and c.question in ("total", ONLY_OLD, ONLY_NEW):
            continue
        text = message.strip() or "(no message)"
        if len(text) > PRINTED_CHARS:
            text = text[:PRINTED_CHARS].rstrip() + " ... (whole in the CSV)"
        body = text.replace("\n", "\n" + indent + "     ")
        lines.append(f"{indent}{side}: {body}")
    return lines
