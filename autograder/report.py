"""A graded batch's report for course staff: ``OUT/report.html``.

One self-contained page (styles inline, plots embedded as PNG data; it loads
nothing from the network) that answers what staff ask after a batch: how the
scores are spread, where the class struggled (each question's mean and share of
full marks), which mistakes were common (each question's most frequent failure
messages, as the students saw them), whose code a limit stopped or could not be
graded, and how long each grading took. It is read from the batch's folder
alone (:func:`autograder.outcomes.read_batch`), so any batch can have one.

The page is for staff: its tables name the submissions (folder or file names,
which may name students); its plots name none. It shows only what the results
files hold: messages students saw, never hidden test source or expected values.
"""

from __future__ import annotations

import base64
import html
import io
import statistics
from collections import Counter
from datetime import datetime
from pathlib import Path

from autograder.outcomes import Outcome, batch_possible, questions, read_batch

#: The report's file name in a batch's folder.
REPORT_NAME = "report.html"
#: Failure messages listed per question, the most frequent first.
TOP_MESSAGES = 5
#: Characters of one failure message shown; the rest is cut (the results files hold it whole).
MESSAGE_CHARS = 600
#: What each kind of limit (:data:`autograder.student_process.LIMIT_KINDS`) is called on the page.
LIMIT_NAMES = {"cell": "cell time", "call": "call time", "memory": "memory", "deadline": "deadline",
               "startup": "start-up time", "files": "files"}

BLUE, ORANGE = "#3b6ea5", "#e08a2c"

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       margin: 0 auto; padding: 1.2em 1.5em 3em; max-width: 1100px; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } h2 { font-size: 1.2em; margin: 1.8em 0 .5em;
     border-bottom: 1px solid #ccc; padding-bottom: .2em; }
.meta { color: #555; margin: 0 0 1em; }
.cards { display: flex; flex-wrap: wrap; gap: .8em; margin: 1em 0; }
.card { background: #f3f5f8; border-radius: 6px; padding: .45em .8em; }
.card b { display: block; font-size: 1.35em; }
figure { margin: .5em 0 1em; } figure img { max-width: 100%; height: auto; display: block; }
figcaption { color: #555; font-size: .9em; }
table { border-collapse: collapse; width: 100%; margin: .4em 0 1em; font-size: .93em; }
th, td { text-align: left; vertical-align: top; padding: .3em .6em;
         border-bottom: 1px solid #e3e3e3; }
th { background: #f3f5f8; position: sticky; top: 0; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.msg { white-space: pre-wrap; overflow-wrap: anywhere;
       font: .88em/1.35 ui-monospace, Menlo, Consolas, monospace; margin: 0 0 .35em; }
.count { color: #a33; font-weight: 600; white-space: nowrap; }
.none { color: #777; font-style: italic; }
table.compact { width: auto; min-width: 50%; } td.tag { white-space: nowrap; }
"""


def write_report(out_dir: Path, assignment: str | None = None) -> Path:
    """Write ``out_dir/report.html`` for the batch graded into ``out_dir``; returns its path. The
    title names ``assignment`` if given, else the folder (its last two parts:
    ``where_mlps_fail/graded``).

    Raises:
        autograder.outcomes.BatchError: ``out_dir`` holds no graded batch.
    """
    out_dir = Path(out_dir)
    outcomes = read_batch(out_dir)
    path = out_dir / REPORT_NAME
    title = f"Grading report: {assignment or '/'.join(out_dir.resolve().parts[-2:])}"
    path.write_text(render(outcomes, title, out_dir.resolve()), encoding="utf-8")
    return path


def render(outcomes: list[Outcome], title: str, folder: Path | None = None) -> str:
    """The report's HTML for ``outcomes`` (graded into ``folder``, if given)."""
    graded = [o for o in outcomes if o.error is None]
    possible = batch_possible(outcomes)
    stopped = [o for o in outcomes if o.limits or o.error is not None]
    parts = [
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p class='meta'>{_e(folder) + ', w' if folder else 'W'}ritten "
        f"{datetime.now():%Y-%m-%d %H:%M}. "
        "For course staff only: the tables name the submissions.</p>",
        _cards(outcomes, graded, possible, stopped),
        "<h2>Scores</h2>",
        _score_plot(graded, possible),
        "<h2>Questions</h2>",
        _hardest(graded),
        _question_plot(graded),
        _question_table(graded),
        "<h2>Stopped by a limit or not graded</h2>",
        _stopped_table(stopped, possible),
        "<h2>Submissions</h2>",
        _submissions_table(outcomes, possible),
        "</body></html>\n",
    ]
    return "\n".join(parts)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _g(x: float) -> str:
    return f"{x:.4g}"


def _cards(outcomes, graded, possible, stopped) -> str:
    totals = [o.total for o in graded]
    cards = [
        ("submissions", len(outcomes)),
        ("graded", len(graded)),
        ("not graded", len(outcomes) - len(graded)),
        ("stopped by a limit", sum(1 for o in stopped if o.error is None)),
    ]
    if totals:
        cards += [
            ("mean score", f"{_g(statistics.mean(totals))} / {_g(possible)}"),
            ("median score", f"{_g(statistics.median(totals))} / {_g(possible)}"),
        ]
    seconds = [o.seconds for o in outcomes if o.seconds is not None]
    if seconds:
        cards.append(("grading time, median", f"{statistics.median(seconds):.0f} s"))
    return (
        "<div class='cards'>"
        + "".join(f"<div class='card'>{_e(name)}<b>{_e(value)}</b></div>" for name, value in cards)
        + "</div>"
    )


def _figure(fig, alt: str, caption: str) -> str:
    """``fig`` as an embedded PNG (drawn at twice its size, for sharp text on high-density
    screens)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=200, bbox_inches="tight")
    png = buffer.getvalue()
    # the PNG header's width, in CSS pixels at 100 dpi
    width = int.from_bytes(png[16:20], "big") // 2
    data = base64.b64encode(png).decode("ascii")
    return (
        f"<figure><img src='data:image/png;base64,{data}' alt='{_e(alt)}' width='{width}'>"
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _new_figure(width: float, height: float):
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    fig = Figure(figsize=(width, height))
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def score_figure(graded: list[Outcome], possible: float):
    """The histogram of the graded submissions' totals (a matplotlib ``Figure``; ``None`` when none
    was graded). One bar per point (or per few points, past 40): it names no submission."""
    if not graded:
        return None
    import numpy as np

    fig, ax = _new_figure(10.0, 2.6)
    top = possible or max(o.total for o in graded) or 1.0
    step = max(1.0, float(np.ceil(top / 40)))
    bins = np.arange(-step / 2, top + step, step)  # bars centred on whole scores
    ax.hist([min(o.total, top) for o in graded], bins=bins, color=BLUE, edgecolor="white")
    ax.set_xlim(bins[0], bins[-1])
    ax.set_xlabel(f"total score (of {_g(top)})")
    ax.set_ylabel("submissions")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return fig


def _score_plot(graded: list[Outcome], possible: float) -> str:
    if len(graded) == 1:  # a distribution of one says nothing the tables do not (and matplotlib
        # costs most of a single grading's report)
        return "<p class='none'>One submission was graded: its scores are in the tables below.</p>"
    fig = score_figure(graded, possible)
    if fig is None:
        return "<p class='none'>No submission was graded.</p>"
    return _figure(
        fig,
        "histogram of the graded submissions' total scores",
        f"Total scores of the {len(graded)} graded submission(s); those not graded are left out.",
    )


def _question_stats(graded: list[Outcome]) -> list[tuple[str, float, float, float]]:
    """``(question, points, mean score, share with full marks)`` over the graded submissions."""
    stats = []
    for q in questions(graded):
        rows = [o.scores[q] for o in graded if q in o.scores]
        points = max(m for _, m in rows)
        stats.append(
            (
                q,
                points,
                statistics.mean(s for s, _ in rows),
                sum(s >= m for s, m in rows) / len(rows),
            )
        )
    return stats


def question_figure(graded: list[Outcome]):
    """Each question's mean score and share of full marks, as bars (a matplotlib ``Figure``;
    ``None`` when no question was graded). It names questions only, no submission."""
    stats = _question_stats(graded)
    if not stats:
        return None
    import numpy as np

    fig, ax = _new_figure(10.0, 0.9 + 0.3 * len(stats))
    y = np.arange(len(stats))
    means = [100 * mean / points if points else 0.0 for _, points, mean, _ in stats]
    full = [100 * share for *_, share in stats]
    ax.barh(y - 0.2, means, height=0.4, color=BLUE, label="mean score, % of the question's points")
    ax.barh(y + 0.2, full, height=0.4, color=ORANGE, label="submissions with full marks, %")
    ax.set_yticks(y, [q for q, *_ in stats])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.grid(axis="x", color="#ddd")
    ax.set_axisbelow(True)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    return fig


#: The questions named as the hardest: those fewest submissions got full marks on.
HARDEST = 3


def _hardest(graded: list[Outcome]) -> str:
    missed = sorted((share, q) for q, _, _, share in _question_stats(graded) if share < 1)
    if not missed:
        return ""
    named = ", ".join(f"<b>{_e(q)}</b> ({100 * share:.0f}%)" for share, q in missed[:HARDEST])
    return f"<p>Fewest full marks: {named}.</p>"


def _question_plot(graded: list[Outcome]) -> str:
    fig = question_figure(graded) if len(graded) > 1 else None
    if fig is None:
        return ""
    return _figure(
        fig,
        "bar chart of each question's mean score and share of full marks",
        "Each question over the graded submissions, in notebook order.",
    )


def _question_table(graded: list[Outcome]) -> str:
    rows = []
    for q, points, mean, share in _question_stats(graded):
        missed = Counter(
            (o.messages.get(q) or "").strip()
            for o in graded
            if q in o.scores and o.scores[q][0] < o.scores[q][1]
        )
        shown = "".join(
            f"<div class='msg'><span class='count'>{n} ×</span> "
            + (_e(_cut(message)) if message else "<span class='none'>(no message)</span>")
            + "</div>"
            for message, n in missed.most_common(TOP_MESSAGES)
        )
        if len(missed) > TOP_MESSAGES:
            shown += f"<div class='none'>{len(missed) - TOP_MESSAGES} other message(s)</div>"
        rows.append(
            f"<tr><td>{_e(q)}</td><td class='num'>{_g(points)}</td><td class='num'>{_g(mean)}</td>"
            f"<td class='num'>{100 * share:.0f}%</td>"
            f"<td>{shown or '<span class=none>-</span>'}</td></tr>"
        )
    if not rows:
        return ""
    return (
        "<table><thead><tr><th>question</th><th class='num'>points</th><th class='num'>mean</th>"
        "<th class='num'>full marks</th><th>most frequent failure messages (as students saw "
        "them)</th>"
        "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _cut(message: str) -> str:
    return message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS].rstrip() + " …"


def _score(o: Outcome, possible: float) -> str:
    return f"0 / {_g(possible)}" if o.error is not None else f"{_g(o.total)} / {_g(o.possible)}"


def _stopped_table(stopped: list[Outcome], possible: float) -> str:
    if not stopped:
        return "<p class='none'>No submission was stopped by a limit, and every one was graded.</p>"
    rows = []
    for o in stopped:
        kinds = ", ".join(dict.fromkeys(LIMIT_NAMES.get(k, k) for k, _ in o.limits))
        what = "not graded" + (f" ({kinds})" if kinds else "") if o.error is not None else kinds
        lines = [o.error] if o.error is not None else []
        lines += [line for _, line in o.limits if line not in lines]
        said = "".join(f"<div class='msg'>{_e(_cut(line))}</div>" for line in lines[:TOP_MESSAGES])
        if len(lines) > TOP_MESSAGES:
            said += f"<div class='none'>{len(lines) - TOP_MESSAGES} more</div>"
        rows.append(
            f"<tr><td>{_e(o.label)}</td><td class='num'>{_score(o, possible)}</td>"
            f"<td class='tag'>{_e(what)}</td><td>{said}</td></tr>"
        )
    return (
        "<table><thead><tr><th>submission</th><th class='num'>score</th><th>why</th>"
        "<th>what the grader said</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _submissions_table(outcomes: list[Outcome], possible: float) -> str:
    rows = []
    for o in outcomes:
        kinds = ", ".join(dict.fromkeys(LIMIT_NAMES.get(k, k) for k, _ in o.limits))
        note = "not graded" if o.error is not None else (f"stopped: {kinds}" if kinds else "")
        seconds = "-" if o.seconds is None else f"{o.seconds:.1f}"
        rows.append(
            f"<tr><td>{_e(o.label)}</td><td class='num'>{_score(o, possible)}</td>"
            f"<td class='num'>{seconds}</td><td>{_e(note)}</td></tr>"
        )
    seconds = [o.seconds for o in outcomes if o.seconds is not None]
    summary = (
        f"<p>Grading time: {sum(seconds):.0f} s in all, median {statistics.median(seconds):.1f} s, "
        f"longest {max(seconds):.1f} s (each submission's own grading, from its results file).</p>"
        if seconds
        else ""
    )
    return (
        summary + "<table class='compact'><thead><tr><th>submission</th><th class='num'>score</th>"
        "<th class='num'>grading time (s)</th><th>notes</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )
