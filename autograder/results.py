"""Gradescope results the grader writes itself, and what is read back from any results: a
submission that could not be graded (:func:`failure_results`), each question's points
(:func:`question_scores`), the limits that stopped the student's code (:func:`with_limits`,
:func:`limits_of`) and the total line (:func:`summary_line`). Shared by the judge, the
orchestrator and the rehearsal; imports nothing heavy.
"""

from __future__ import annotations

#: How the output of a submission that could not be graded begins; the reason follows.
NOT_GRADED = "This submission could not be graded: "


def failure_results(reason: str, seconds: float = 0.0) -> dict:
    """Gradescope results for a submission that could not be graded: score 0 and the reason."""
    return {
        "score": 0.0,
        "execution_time": round(seconds, 3),
        "output": f"{NOT_GRADED}{reason}",
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }


class Scored:
    """A submission's points, from its ``scores`` attribute (``{question: (score, max_score)}``, as
    :func:`question_scores` reads them): a grade as ``grade`` returns it, or as a batch's folder
    holds it."""

    scores: dict[str, tuple[float, float]]

    @property
    def total(self) -> float:
        return sum(s for s, _ in self.scores.values())

    @property
    def possible(self) -> float:
        return sum(m for _, m in self.scores.values())


def question_scores(results: dict) -> dict[str, tuple[float, float]]:
    """``{question: (score, max_score)}`` from Otter's results, skipping the 0-point public
    summary."""
    scores = {}
    for test in results.get("tests", []):
        if test.get("max_score") in (None, 0):
            continue
        name = str(test["name"]).split(" - ")[0]
        score, possible = scores.get(name, (0.0, 0.0))
        scores[name] = (
            score + float(test.get("score") or 0.0),
            possible + float(test["max_score"]),
        )
    return scores


def summary_line(results: dict) -> str:
    """``Total Score: 29 / 31`` from Gradescope results (0 / 0 when nothing was graded)."""
    total = sum(t.get("score", 0) or 0 for t in results.get("tests", []))
    possible = sum(t.get("max_score", 0) or 0 for t in results.get("tests", []))
    return f"Total Score: {total:g} / {possible:g}"


#: The key of Gradescope's ``extra_data`` (stored, never shown to students) that lists the limits
#: that stopped or interrupted the student's code: ``[{"kind": ..., "message": ...}, ...]``, kinds
#: as :data:`autograder.student_process.LIMIT_KINDS` names them, plus ``"deadline"`` for a grading
#: ``grade`` stopped at its timeout.
LIMITS_KEY = "limits"
#: The most limits listed for one submission (the first, each once): a notebook of a thousand
#: cells, each stopped by its limit, lists the first 50.
MAX_LIMITS_LISTED = 50


def with_limits(results: dict, hits: list[tuple[str, str]]) -> dict:
    """``results`` with ``hits`` (``(kind, message)``, each once, in order, at most
    :data:`MAX_LIMITS_LISTED`) in its ``extra_data``."""
    if hits:
        listed = list(dict.fromkeys(hits))[:MAX_LIMITS_LISTED]
        extra = results.setdefault("extra_data", {})
        extra[LIMITS_KEY] = [{"kind": k, "message": m} for k, m in listed]
    return results


def limits_of(results: dict) -> list[tuple[str, str]]:
    """The ``(kind, message)`` pairs :func:`with_limits` wrote (none in results written
    otherwise, Otter's own for one); entries of another form are skipped."""
    extra = results.get("extra_data") if isinstance(results, dict) else None
    listed = extra.get(LIMITS_KEY) if isinstance(extra, dict) else None
    if not isinstance(listed, list):
        return []
    return [
        (entry["kind"], entry["message"])
        for entry in listed
        if isinstance(entry, dict)
        and isinstance(entry.get("kind"), str)
        and isinstance(entry.get("message"), str)
    ]


#: The key of ``extra_data`` that says how the student's code was isolated
#: (:func:`autograder.namespaces.isolation_mode`).
ISOLATION_KEY = "isolation"


def with_isolation(results: dict, mode: str) -> dict:
    """``results`` with the isolation ``mode`` its student code ran in, in its ``extra_data``."""
    results.setdefault("extra_data", {})[ISOLATION_KEY] = mode
    return results


def isolation_of(results: dict) -> str | None:
    """The isolation mode :func:`with_isolation` wrote, ``None`` where there is none."""
    extra = results.get("extra_data") if isinstance(results, dict) else None
    mode = extra.get(ISOLATION_KEY) if isinstance(extra, dict) else None
    return mode if isinstance(mode, str) else None
