"""Gradescope results the grader writes itself, and what is read back from any results: a
submission that could not be graded (:func:`failure_results`), each question's points
(:func:`question_scores`) and the total line (:func:`summary_line`). Shared by the judge, the
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
