"""The batch report (``autograder/report.py``) and the regrade diff (``autograder/compare.py``) on
real gradings.

One module fixture grades a small ``where_mlps_fail`` batch twice with the
hardened judge. OLD: ``roll_for_slide`` (loses q1_4), ``endless_loop`` (q2_4's cell
loops forever: stopped by the cell limit, loses q2_4) and ``not_a_notebook``
(cannot be graded). NEW, the regrade after a
check changed: the same autograder zip but q1_4's hidden test rewritten to
accept a wrapping slide, graded on ``roll_for_slide``, ``not_a_notebook`` and
``late`` (submitted after the first grading, cannot be graded either);
``endless_loop`` is left out. So between them: ``roll_for_slide`` gains q1_4,
``endless_loop`` is only in OLD, ``late`` only in NEW, ``not_a_notebook`` is
unchanged.
"""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder import cli
from autograder.compare import ONLY_NEW, ONLY_OLD, Change, compare
from autograder.grade import grade_many
from autograder.outcomes import BatchError, Outcome, read_batch
from autograder.report import question_figure, render, score_figure, write_report
from autograder.results import failure_results, limits_of, with_limits
from autograder.staging import batch_labels
from tests.fixtures.hostile.catalogue import HOSTILE, Sources
from tests.fixtures.submissions import apply
from tests.fixtures.where_mlps_fail.catalogue import WRONG

LIMITS = {"cell_seconds": 30.0}
#: q1_4's hidden test as built, and the regrade's: it accepts any slide that keeps the input's
#: shape.
HIDDEN_Q1_4 = "    check_q1_4(slide, slide_accuracy)\n"
CHANGED_Q1_4 = (
    "    import torch\n    out = slide(torch.ones(1, 1, 2, 3), 1)\n"
    "    assert tuple(out.shape) == (1, 1, 2, 3), 'slide(x, 1) should keep the shape of x'\n"
)
#: What roll_for_slide's q1_4 showed in the first grading.
ROLL_MESSAGE = (
    "`slide(x, 1) for x of shape (1, 1, 1, 2)` is not x moved 1 column(s) right with black "
    "filled in on the left."
)
LABELS = ("roll_for_slide", "endless_loop", "not_a_notebook", "late")


@dataclass
class Gradings:
    old: Path
    new: Path


def _changed_zip(original: Path, out: Path) -> Path:
    """``original`` with q1_4's hidden test replaced by :data:`CHANGED_Q1_4`; every other file as it
    was."""
    with zipfile.ZipFile(original) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "tests/q1_4.py":
                text = data.decode()
                assert text.count(HIDDEN_Q1_4) == 1, (
                    f"q1_4's hidden test changed; the fixture must follow:\n{text}"
                )
                data = text.replace(HIDDEN_Q1_4, CHANGED_Q1_4).encode()
            dst.writestr(item, data)
    return out


@pytest.fixture(scope="module")
def gradings(built_where_mlps_fail, tmp_path_factory) -> Gradings:
    built = built_where_mlps_fail
    work = tmp_path_factory.mktemp("report_compare")
    subs = work / "submissions"
    roll = apply(
        built.solution,
        next(v for v in WRONG if v.name == "roll_for_slide"),
        subs / "roll_for_slide.ipynb",
    )
    # a folder holding the notebook, as Gradescope's export gives one per student
    loop = subs / "endless_loop"
    next(h for h in HOSTILE if h.name == "infinite_loop_middle").build(
        Sources(built.solution, built.student_dir / "where_mlps_fail.ipynb"), loop
    )
    (subs / "not_a_notebook.ipynb").write_text("these are my answers")
    (subs / "late.ipynb").write_text("{")
    old, new = work / "old", work / "new"
    grade_many(
        built.autograder_zip,
        [roll, loop, subs / "not_a_notebook.ipynb"],
        old,
        jobs=2,
        progress=False,
        limits=LIMITS,
    )
    changed = _changed_zip(built.autograder_zip, work / "autograder-changed.zip")
    grade_many(
        changed,
        [roll, subs / "not_a_notebook.ipynb", subs / "late.ipynb"],
        new,
        jobs=2,
        progress=False,
        limits=LIMITS,
    )
    return Gradings(old, new)


# ---------------------------------------------------------------- reading a batch back


@pytest.mark.grading
def test_read_batch_gives_scores_messages_and_limits(gradings):
    outcomes = {o.label: o for o in read_batch(gradings.old)}
    assert list(outcomes) == ["roll_for_slide", "endless_loop", "not_a_notebook"]
    roll, loop, junk = outcomes.values()
    assert (roll.error, roll.total, roll.possible, roll.scores["q1_4"]) == (
        None,
        28.0,
        31.0,
        (0.0, 3.0),
    )
    assert roll.messages["q1_4"] == ROLL_MESSAGE, (
        "the failure without Otter's framing or the hidden test's line"
    )
    assert roll.messages["q1_1"] == "" and roll.limits == []
    assert loop.error is None and loop.scores["q2_4"] == (0.0, 1.0) and loop.total == 30.0
    assert {kind for kind, _ in loop.limits} == {"cell"}, loop.limits
    # the endless cell named as the student finds it, in the run's notes and under the question that
    # lost
    assert all("the 1st code cell under q2_4's text" in line.lower() for _, line in loop.limits), (
        loop.limits
    )
    assert junk.error is not None and "not_a_notebook.ipynb" in junk.error and junk.scores == {}
    assert all(o.seconds is not None and o.seconds > 0 for o in outcomes.values())


def test_read_batch_refuses_a_folder_without_a_batch(tmp_path):
    with pytest.raises(BatchError, match="holds no graded batch"):
        read_batch(tmp_path)
    with pytest.raises(BatchError, match="is not a folder"):
        read_batch(tmp_path / "missing")


def test_the_limits_the_judge_lists_are_read_back_and_malformed_entries_are_skipped():
    hits = [
        ("cell", "it used more than its 60 CPU seconds while running code cell 3, and was stopped"),
        ("memory", "it used more than 3072 MB of memory while calling f, and was stopped"),
        ("cell", "it used more than its 60 CPU seconds while running code cell 3, and was stopped"),
    ]
    results = with_limits(failure_results("x"), hits)
    assert limits_of(json.loads(json.dumps(results))) == hits[:2], "each hit once, in order"
    assert with_limits({"tests": []}, []) == {"tests": []}, "no hits: no extra_data"
    many = [("cell", f"code cell {k} was stopped") for k in range(60)]
    assert limits_of(with_limits({}, many)) == many[:50], "the first 50 are listed"
    forged = {"extra_data": {"limits": [{"kind": "cell"}, "deadline", {"kind": 1, "message": ""}]}}
    assert limits_of(forged) == [] and limits_of({"extra_data": []}) == [] and limits_of([]) == []


# ---------------------------------------------------------------- the report


@pytest.mark.grading
def test_report_shows_scores_questions_failures_and_limits(gradings):
    page = write_report(gradings.old).read_text()
    assert len(re.findall(r"<img src='data:image/png;base64,", page)) == 2, (
        "the histogram and the question bars"
    )
    assert (
        not re.search(r"""(src|href)=['"]?(https?:)?//""", page)
        and "<script" not in page
        and "<link" not in page
    )
    row = re.search(r"<tr><td>q1_4</td>(.*?)</tr>", page).group(1)
    assert "<td class='num'>3</td><td class='num'>1.5</td><td class='num'>50%</td>" in row, row
    assert f"1 ×</span> {html.escape(ROLL_MESSAGE)}</div>" in row, row
    stopped = page.split("<h2>Stopped by a limit or not graded</h2>")[1].split("<h2>")[0]
    assert (
        "<td>endless_loop</td><td class='num'>30 / 31</td><td class='tag'>cell time</td>" in stopped
    ), stopped
    assert (
        "<td>not_a_notebook</td><td class='num'>0 / 31</td><td class='tag'>not graded</td>"
        in stopped
    ), stopped
    assert "roll_for_slide" not in stopped
    assert "<p>Fewest full marks: <b>q1_4</b> (50%), <b>q2_4</b> (50%).</p>" in page
    assert "Error at line" not in page and "check_q1_4(" not in page, (
        "the hidden test's source shows"
    )


@pytest.mark.grading
def test_report_command_rewrites_the_report_of_an_earlier_batch(gradings, capsys):
    (gradings.new / "report.html").unlink(missing_ok=True)
    assert cli.main(["report", str(gradings.new)]) == 0
    assert capsys.readouterr().out.strip() == f"report: {gradings.new / 'report.html'}"
    page = (gradings.new / "report.html").read_text()
    assert "<td>late</td><td class='num'>0 / 31</td>" in page and "endless_loop" not in page


@pytest.mark.grading
def test_plots_name_no_submission(gradings):
    graded = [o for o in read_batch(gradings.old) if o.error is None]
    texts = [
        t.get_text()
        for fig in (score_figure(graded, 31.0), question_figure(graded))
        for t in fig.findobj(lambda a: hasattr(a, "get_text"))
    ]
    assert "q1_4" in texts and "total score (of 31)" in texts, texts
    assert not [t for t in texts if any(label in t for label in LABELS)], texts


def test_no_submission_takes_the_reports_or_the_diffs_name():
    """``report.html.ipynb``'s results folder would be where the batch's report goes."""
    assert batch_labels(
        [Path("a/report.html.ipynb"), Path("b/compare.csv.ipynb"), Path("c/report.ipynb")]
    ) == ["report.html-2", "compare.csv-2", "report"]


def test_report_of_a_batch_none_of_which_was_graded():
    page = render([Outcome("late", error="late.ipynb is not a notebook", out_of=31.0)], "t")
    assert "No submission was graded." in page and "<img" not in page
    assert "<td>late</td><td class='num'>0 / 31</td><td class='tag'>not graded</td>" in page


def test_report_of_one_graded_submission_draws_no_plot():
    """A distribution of one score says nothing its table does not."""
    one = Outcome("alone", scores={"q1": (3.0, 4.0)}, out_of=4.0)
    page = render([one], "t")
    assert "One submission was graded" in page and "<img" not in page
    assert "<td>alone</td><td class='num'>3 / 4</td>" in page


def test_report_escapes_names_and_messages():
    """A file name or a message is text, never markup (a student chooses both)."""
    hostile = Outcome(
        "<img src=x onerror=alert(1)>",
        scores={"q1": (0.0, 1.0)},
        messages={"q1": "CheckFailure: `s` is '<script>alert(2)</script>'"},
    )
    page = render([hostile], "t")
    assert "<script>" not in page and "<img src=x" not in page
    assert (
        "&lt;script&gt;alert(2)&lt;/script&gt;" in page
        and "&lt;img src=x onerror=alert(1)&gt;" in page
    )


#: Appended to a copy of the report for the browser test only: once the page has loaded, it writes
#: what the browser made of it into the page's title, which ``--dump-dom`` prints.
PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = [...document.images];
  document.title = "probe " + JSON.stringify({
    images: imgs.length, drawn: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
    widest: Math.max(...imgs.map(i => i.getBoundingClientRect().right)),
    pageWidth: document.documentElement.scrollWidth, windowWidth: window.innerWidth});
});
</script>"""


@pytest.mark.grading
def test_report_renders_in_headless_chromium(gradings, tmp_path):
    """One headless Chromium run on a laptop-sized window (1366 px): both plots load and draw, and
    nothing is wider than the window (no sideways scrolling)."""
    import json

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip(
            "Debian's chromium is not installed (bin/test installs it when run as root with "
            "apt-get)"
        )
    page = tmp_path / "report.html"
    page.write_text(write_report(gradings.old).read_text().replace("</body>", PROBE + "</body>"))
    run = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1366,768",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r"<title>probe (\{.*?\})</title>", run.stdout)
    assert found, f"chromium did not run the page (exit {run.returncode}): {run.stderr[-2000:]}"
    seen = json.loads(found.group(1))
    assert seen["images"] == 2 and seen["drawn"] == 2, seen
    assert seen["pageWidth"] <= seen["windowWidth"] and seen["widest"] <= seen["windowWidth"], seen


# ---------------------------------------------------------------- the regrade diff


@pytest.mark.grading
def test_compare_lists_the_changed_check_and_the_one_sided_submissions(gradings):
    changes = compare(gradings.old, gradings.new)
    late = changes[2]
    assert changes == [
        Change("roll_for_slide", "total", "28/31", "31/31", "", ""),
        Change("roll_for_slide", "q1_4", "0/3", "3/3", ROLL_MESSAGE, ""),
        Change("late", ONLY_NEW, None, "0/31", "", late.new_message),
        Change("endless_loop", ONLY_OLD, "30/31", None, "", ""),
    ]
    assert "late.ipynb" in late.new_message, late


@pytest.mark.grading
def test_compare_command_prints_writes_csv_and_exits_1(gradings, tmp_path, capsys):
    table = tmp_path / "changes.csv"
    assert cli.main(["compare", str(gradings.old), str(gradings.new), "--csv", str(table)]) == 1
    printed = capsys.readouterr().out
    assert "3 submission(s) changed" in printed
    assert "roll_for_slide: total 28/31 -> 31/31" in printed and "q1_4: 0/3 -> 3/3" in printed
    assert f"old: {ROLL_MESSAGE}" in printed and "new: (no message)" in printed
    assert "endless_loop: only in OLD (30/31)" in printed and "late: only in NEW (0/31)" in printed
    with open(table, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == [
        "submission",
        "question",
        "old score",
        "new score",
        "old message",
        "new message",
    ]
    assert rows[1:3] == [
        ["roll_for_slide", "total", "28/31", "31/31", "", ""],
        ["roll_for_slide", "q1_4", "0/3", "3/3", ROLL_MESSAGE, ""],
    ]
    assert [r[:4] for r in rows[3:]] == [
        ["late", ONLY_NEW, "", "0/31"],
        ["endless_loop", ONLY_OLD, "30/31", ""],
    ]


@pytest.mark.grading
def test_compare_of_a_batch_with_itself_is_empty_and_exits_0(gradings, capsys):
    assert cli.main(["compare", str(gradings.old), str(gradings.old)]) == 0
    assert "no score changed" in capsys.readouterr().out
    with open(gradings.old / "compare.csv", newline="") as f:
        assert list(csv.reader(f)) == [
            ["submission", "question", "old score", "new score", "old message", "new message"]
        ]


def test_compare_command_refuses_a_folder_without_a_batch(tmp_path, capsys):
    assert cli.main(["compare", str(tmp_path), str(tmp_path)]) == 2
    assert "holds no graded batch" in capsys.readouterr().err


@pytest.mark.grading
def test_grade_command_writes_the_report_and_says_where(
    built_where_mlps_fail, tmp_path, monkeypatch, capsys
):
    """``grade`` on one submission that cannot be graded (no notebook runs): its report is written
    beside scores.csv and the command prints where."""
    monkeypatch.setattr(cli.build_mod, "BUILD", built_where_mlps_fail.autograder_zip.parent.parent)
    junk, out = tmp_path / "unfinished.ipynb", tmp_path / "graded"
    junk.write_text("not yet")
    assert cli.main(["grade", "where_mlps_fail", str(junk), "--out", str(out)]) == 1
    assert f"report:  {out / 'report.html'}" in capsys.readouterr().out
    page = (out / "report.html").read_text()
    assert "<td>unfinished</td><td class='num'>0 / 31</td><td class='tag'>not graded</td>" in page
