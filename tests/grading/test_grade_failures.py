"""Unit tests for ``autograder/grade.py``: results parsing, the table, the CSV, and ungradable
submissions.

Most tests run no notebook: they feed hand-written Otter results to the
helpers, or grade a submission that cannot be graded (missing, or not a
notebook), which must still get a results file scored 0 that says why.
The tests marked ``grading`` use the real autograder zip of the session
fixture ``built_where_mlps_fail``; each ``otter run`` here stops within
seconds, at reading the submission.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from autograder import grade as grade_module
from autograder import judge_pool, namespaces
from autograder.grade import JUDGE_MARGIN, grade_many, grade_one, judge_limits
from autograder.judge_interface import DEFAULT_TIMEOUT, Limits
from autograder.results import failure_results, limits_of, question_scores
from autograder.scores import GradeResult, format_table, write_csv
from autograder.staging import batch_labels, submission_label

#: Otter's Gradescope results as ``otter run`` writes them: the public summary
#: (no max_score, or 0 points), hidden-test entries, a question split over
#: several test cases (" - 1", " - 2"), and an entry with a null score.
OTTER_RESULTS = {
    "score": 4.5,
    "output": "",
    "tests": [
        {
            "name": "Public Tests",
            "visibility": "visible",
            "output": "q1_1 results: All test cases passed!",
            "status": "passed",
        },
        {
            "name": "Public Tests",
            "score": 0,
            "max_score": 0,
            "visibility": "visible",
            "output": "summary",
        },
        {
            "name": "q1_1",
            "score": 2.0,
            "max_score": 2.0,
            "visibility": "hidden",
            "output": "passed",
        },
        {"name": "q1_4 - 1", "score": 1.0, "max_score": 1.0, "visibility": "hidden", "output": ""},
        {
            "name": "q1_4 - 2",
            "score": 0.0,
            "max_score": 1.5,
            "visibility": "hidden",
            "output": "`slide` ...",
        },
        {"name": "q1_4 - 3", "score": 0.5, "max_score": 0.5, "visibility": "hidden", "output": ""},
        {"name": "q2_1", "score": None, "max_score": 2, "visibility": "hidden", "output": "error"},
        {"name": "q3_6", "score": 1, "max_score": 2, "visibility": "hidden", "output": ""},
    ],
}


def results_of(path: Path) -> dict:
    assert path.is_file(), f"no results file at {path}"
    return json.loads(path.read_text())


def assert_failure_results(results: dict, reason_part: str) -> None:
    """``results`` is a Gradescope results dict for an ungradable submission, naming
    ``reason_part``."""
    assert results["score"] == 0, (
        f"an ungradable submission should score 0, got {results['score']!r}"
    )
    assert results["tests"] == [], (
        f"an ungradable submission should list no tests, got {results['tests']!r}"
    )
    assert results["output"].startswith("This submission could not be graded: "), (
        f"the output should say the submission could not be graded: {results['output']!r}"
    )
    assert reason_part in results["output"], (
        f"expected {reason_part!r} in the output, got {results['output']!r}"
    )
    assert results["visibility"] == "visible", (
        "the student should see why the submission was not graded"
    )


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


# ---------------------------------------------------------------- failure_results


def test_failure_results_is_a_zero_score_with_the_reason():
    actual = failure_results("the notebook is empty.", seconds=1.23456)
    expected = {
        "score": 0.0,
        "execution_time": 1.235,
        "output": "This submission could not be graded: the notebook is empty.",
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }
    assert actual == expected, f"expected {expected}, got {actual}"


def test_failure_results_is_json_serialisable():
    actual = json.loads(json.dumps(failure_results("reason")))
    expected = failure_results("reason")
    assert actual == expected, "failure results should survive a JSON round trip unchanged"


# ---------------------------------------------------------------- question_scores


def test_question_scores_skips_public_tests_and_sums_test_cases():
    actual = question_scores(OTTER_RESULTS)
    expected = {"q1_1": (2.0, 2.0), "q1_4": (1.5, 3.0), "q2_1": (0.0, 2.0), "q3_6": (1.0, 2.0)}
    assert actual == expected, f"expected {expected}, got {actual}"
    assert "Public Tests" not in actual, "the 0-point public summary is not a question"


def test_question_scores_keeps_the_order_of_the_results():
    actual = list(question_scores(OTTER_RESULTS))
    expected = ["q1_1", "q1_4", "q2_1", "q3_6"]
    assert actual == expected, (
        f"questions should keep Otter's order: expected {expected}, got {actual}"
    )


def test_question_scores_returns_floats():
    actual = question_scores({"tests": [{"name": "q5", "score": 1, "max_score": 2}]})
    expected = {"q5": (1.0, 2.0)}
    assert actual == expected, f"expected {expected}, got {actual}"
    assert all(isinstance(v, float) for pair in actual.values() for v in pair), (
        f"scores should be floats: {actual}"
    )


@pytest.mark.parametrize(
    "results", [{}, {"tests": []}, failure_results("x")], ids=["no key", "empty", "failure"]
)
def test_question_scores_of_results_without_tests_is_empty(results):
    actual = question_scores(results)
    assert actual == {}, f"no tests should give no questions, got {actual}"


# ---------------------------------------------------------------- labels and GradeResult


@pytest.mark.parametrize(
    "name, expected",
    [
        ("alice.ipynb", "alice"),
        ("bob.v2.zip", "bob.v2"),
        ("README", "README"),
        # ".." and "." would name the batch's folder's parent and the folder itself
        ("...ipynb", "__"),
        ("..ipynb", "_"),
        (".ipynb", "_"),
        (".hidden.ipynb", ".hidden"),
    ],
)
def test_submission_label_drops_the_extension(name, expected):
    actual = submission_label(Path("/subs") / name)
    assert actual == expected, f"submission_label({name!r}): expected {expected!r}, got {actual!r}"


@pytest.mark.parametrize(
    "paths, expected",
    [
        (["a/x.ipynb", "b/x.ipynb", "c/x-2.ipynb"], ["x", "x-2", "x-2-2"]),
        (["a/x-2.ipynb", "b/x.ipynb", "c/x.ipynb"], ["x-2", "x", "x-3"]),
        (["a/x.ipynb", "b/x.zip", "c/y.ipynb"], ["x", "x-2", "y"]),
        # a folder named scores.csv would stop the batch's table being written
        (["a/scores.csv.ipynb", "b/scores.ipynb"], ["scores.csv-2", "scores"]),
    ],
)
def test_batch_labels_are_distinct_even_when_a_file_name_looks_like_a_suffix(paths, expected):
    """Labels in a batch are distinct, even where a file name looks like the suffix another label
    gets: labelled x, x-2 and x-2, a/x, b/x and c/x-2 would have one results folder overwrite the
    other."""
    actual = batch_labels([Path("/subs") / p for p in paths])
    assert actual == expected, f"batch_labels({paths}): expected {expected}, got {actual}"


def test_grade_result_total_and_possible():
    result = GradeResult(Path("a.ipynb"), Path("a/results.json"), question_scores(OTTER_RESULTS))
    actual = (result.total, result.possible)
    expected = (4.5, 9.0)
    assert actual == expected, f"(total, possible): expected {expected}, got {actual}"


# ---------------------------------------------------------------- format_table and write_csv


def _results() -> tuple[list[GradeResult], list[str]]:
    full = GradeResult(
        Path("/subs/solution.ipynb"), Path("r1"), {"q1": (2.0, 2.0), "q2": (1.0, 1.0)}
    )
    partial = GradeResult(
        Path("/subs/partly_wrong.ipynb"),
        Path("r2"),
        {"q1": (0.5, 2.0), "q2": (1.0, 1.0), "q3": (0.0, 3.0)},
    )
    broken = GradeResult(
        Path("/subs/broken.ipynb"), Path("r3"), {}, "the autograder exited with code 1: boom"
    )
    return [full, partial, broken], ["solution", "partly_wrong", "broken"]


def test_format_table_lists_score_and_lost_points():
    results, _ = _results()
    actual = format_table(results).splitlines()
    expected = [
        "submission    score  lost points on",
        "solution        3/3  -",
        "partly_wrong  1.5/6  q1 (0.5/2), q3 (0/3)",
        "broken          0/6  not graded: the autograder exited with code 1: boom",
    ]
    assert actual == expected, "table differs:\n" + "\n".join(actual)


def test_write_csv_has_one_column_per_question(tmp_path):
    results, labels = _results()
    path = tmp_path / "nested" / "scores.csv"
    write_csv(results, labels, path)
    actual = read_csv(path)
    expected = [
        ["submission", "q1", "q2", "q3", "total", "possible", "error"],
        ["solution", "2", "1", "", "3", "3", ""],
        ["partly_wrong", "0.5", "1", "0", "1.5", "6", ""],
        ["broken", "", "", "", "0", "6", "the autograder exited with code 1: boom"],
    ]
    assert actual == expected, f"expected rows {expected}, got {actual}"
    write_csv(results[2:], labels[2:], path)
    actual = read_csv(path)[1]
    assert actual == ["broken", "0", "0", "the autograder exited with code 1: boom"], (
        f"with nothing graded, the possible points are not known: {actual}"
    )


def test_questions_are_listed_in_notebook_order_not_string_order(tmp_path):
    """Otter's results list q10 before q2; the table and the CSV list q2 first, as the notebook
    does."""
    scores = {q: (0.0, 1.0) for q in ("q1_1", "q10", "q11", "q1_10", "q2", "q1_2")}
    results = [GradeResult(Path("/subs/all_wrong.ipynb"), Path("r"), scores)]
    actual_table = format_table(results).splitlines()[1]
    assert actual_table.endswith(
        "q1_1 (0/1), q1_2 (0/1), q1_10 (0/1), q2 (0/1), q10 (0/1), q11 (0/1)"
    ), actual_table
    write_csv(results, ["all_wrong"], tmp_path / "scores.csv")
    actual_header = read_csv(tmp_path / "scores.csv")[0]
    expected_header = [
        "submission",
        "q1_1",
        "q1_2",
        "q1_10",
        "q2",
        "q10",
        "q11",
        "total",
        "possible",
        "error",
    ]
    assert actual_header == expected_header, f"CSV columns out of notebook order: {actual_header}"


# ---------------------------------------------------------------- grade_one / grade_many without
# otter run


@pytest.fixture
def dummy_zip(tmp_path) -> Path:
    """A zip file standing in for the autograder, for paths where no grading starts."""
    path = tmp_path / "autograder.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("placeholder.txt", "not an autograder")
    return path


def test_grade_one_without_autograder_zip_raises(tmp_path):
    missing = tmp_path / "nowhere" / "autograder.zip"
    with pytest.raises(FileNotFoundError) as info:
        grade_one(missing, tmp_path / "sub.ipynb", tmp_path / "out")
    actual = str(info.value)
    assert str(missing) in actual and "autograder build" in actual, (
        f"the error should name the zip and how to build it: {actual!r}"
    )


def test_grade_one_missing_submission_replaces_a_stale_results_file(dummy_zip, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"score": 31.0, "tests": []}))
    submission = tmp_path / "gone.ipynb"
    actual = grade_one(dummy_zip, submission, out)
    assert actual.error == f"{submission} does not exist.", f"unexpected error {actual.error!r}"
    assert actual.scores == {} and actual.total == 0, (
        f"an ungraded submission has no scores: {actual.scores}"
    )
    assert_failure_results(results_of(out / "results.json"), "does not exist")


def test_grade_many_labels_duplicates_and_writes_the_csv(dummy_zip, tmp_path):
    submissions = [
        tmp_path / "a" / "hw.ipynb",
        tmp_path / "b" / "hw.ipynb",
        tmp_path / "c" / "other.zip",
    ]
    out = tmp_path / "graded"
    results = grade_many(dummy_zip, submissions, out, jobs=2, progress=False)
    actual = [r.submission for r in results]
    assert actual == submissions, f"results should come in the submissions' order: {actual}"
    for label in ("hw", "hw-2", "other"):
        assert_failure_results(results_of(out / label / "results.json"), "does not exist")
    actual_rows = read_csv(out / "scores.csv")
    expected_rows = [["submission", "total", "possible", "error"]] + [
        [label, "0", "0", f"{sub} does not exist."]
        for label, sub in zip(("hw", "hw-2", "other"), submissions)
    ]
    assert actual_rows == expected_rows, f"expected {expected_rows}, got {actual_rows}"


def test_grade_many_keeps_every_output_inside_its_folder_whatever_the_file_names(
    dummy_zip, tmp_path
):
    """Every output stays inside the batch's folder, whatever the file names: ``scores.csv.ipynb``
    is labelled so that its folder is not where the table goes (which would end the batch in a
    traceback), and ``...ipynb`` writes nothing beside the batch's folder."""
    submissions = [tmp_path / "subs" / name for name in ("scores.csv.ipynb", "...ipynb", "..ipynb")]
    out = tmp_path / "batch" / "graded"
    grade_many(dummy_zip, submissions, out, jobs=1, progress=False)
    actual_rows = [row[0] for row in read_csv(out / "scores.csv")[1:]]
    assert actual_rows == ["scores.csv-2", "__", "_"], (
        f"one row per submission, in order: {actual_rows}"
    )
    actual_folders = sorted(p.name for p in out.iterdir())
    assert actual_folders == ["_", "__", "scores.csv", "scores.csv-2"], (
        f"what the batch's folder holds: {actual_folders}"
    )
    assert sorted(p.name for p in out.parent.iterdir()) == ["graded"], (
        "nothing is written beside the batch's folder"
    )


def test_grade_many_logs_one_line_per_submission_when_stderr_is_not_a_terminal(
    dummy_zip, tmp_path, capsys
):
    """When stderr is not a terminal (a log file), progress is plain lines, one a submission: tqdm's
    carriage returns make a log hard to read."""
    submissions = [tmp_path / "a" / "hw.ipynb", tmp_path / "b" / "hw.ipynb"]
    grade_many(dummy_zip, submissions, tmp_path / "graded", jobs=1, progress=True)
    actual = capsys.readouterr().err
    assert actual == "graded 1/2: hw\ngraded 2/2: hw-2\n", (
        f"one line per submission expected, got {actual!r}"
    )


def test_a_batch_with_nothing_graded_is_out_of_the_assignments_points(tmp_path):
    """A batch none of whose submissions could be graded shows each score out of the assignment's
    points, not a bare "0": the points come from the autograder zip's test files (``tests/*.py``, as
    Otter writes them)."""
    autograder_zip = tmp_path / "autograder.zip"
    with zipfile.ZipFile(autograder_zip, "w") as z:
        z.writestr("tests/q1.py", "OK_FORMAT = True\npoints = 2\ntest = {}\n")
        z.writestr("tests/q2.py", "points = 1.5\n")
        z.writestr("tests/files/q3.py", "points = 100\n")  # not a test file of Otter's: not counted
        z.writestr("other/q4.py", "points = 100\n")
    submissions = [tmp_path / "a.ipynb", tmp_path / "b.ipynb"]
    results = grade_many(autograder_zip, submissions, tmp_path / "graded", jobs=1, progress=False)
    actual_rows = [row[-3:-1] for row in read_csv(tmp_path / "graded" / "scores.csv")[1:]]
    assert actual_rows == [["0", "3.5"], ["0", "3.5"]], (
        f"each row should be 0 out of 3.5: {actual_rows}"
    )
    actual_scores = [line.split()[1] for line in format_table(results).splitlines()[1:]]
    assert actual_scores == ["0/3.5", "0/3.5"], f"the table's scores: {actual_scores}"


# ---------------------------------------------------------------- with the real autograder zip


@pytest.fixture
def not_a_notebook(tmp_path) -> Path:
    path = tmp_path / "not_json.ipynb"
    path.write_text("print('hello')  # a script saved with the notebook's name\n")
    return path


@pytest.mark.grading
def test_real_autograder_missing_submission_scores_zero(built_where_mlps_fail, tmp_path):
    out = tmp_path / "out"
    actual = grade_one(built_where_mlps_fail.autograder_zip, tmp_path / "never_uploaded.ipynb", out)
    assert actual.error is not None and "does not exist" in actual.error, (
        f"unexpected error {actual.error!r}"
    )
    assert actual.results_path == out / "results.json", f"results written to {actual.results_path}"
    assert_failure_results(results_of(actual.results_path), "never_uploaded.ipynb does not exist")


@pytest.mark.grading
def test_real_autograder_non_json_notebook_scores_zero(
    built_where_mlps_fail, not_a_notebook, tmp_path
):
    out = tmp_path / "out"
    actual = grade_one(built_where_mlps_fail.autograder_zip, not_a_notebook, out, timeout=120)
    assert actual.error is not None, "a file that is not a notebook should not count as graded"
    # the judge (the default runner) reads the notebook itself and says why it refused it
    # the reason alone: the table prints it after "not graded: " (not "not graded: This submission
    # could not be graded: ...")
    assert actual.error.startswith("not_json.ipynb is not a valid notebook"), (
        f"unexpected error {actual.error!r}"
    )
    assert "JSON" in actual.error, (
        f"the reason should say the notebook is not JSON: {actual.error!r}"
    )
    assert actual.scores == {}, f"an ungraded submission has no scores: {actual.scores}"
    assert_failure_results(results_of(actual.results_path), "not appear to be JSON")
    assert (out / "grading.log").is_file(), (
        "the grading process's output should be kept in grading.log"
    )


@pytest.mark.grading
def test_real_autograder_grade_many_reports_every_failure(
    built_where_mlps_fail, not_a_notebook, tmp_path
):
    submissions = [tmp_path / "missing.ipynb", not_a_notebook]
    out = tmp_path / "graded"
    results = grade_many(
        built_where_mlps_fail.autograder_zip, submissions, out, jobs=2, timeout=120, progress=False
    )
    actual = [(r.submission, r.error is not None, r.total) for r in results]
    expected = [(submissions[0], True, 0), (submissions[1], True, 0)]
    assert actual == expected, f"each submission should have a row with its error set: {actual}"
    for label in ("missing", "not_json"):
        results_file = results_of(out / label / "results.json")
        assert results_file["score"] == 0, f"{label}: score {results_file['score']!r}"
        assert results_file["output"].startswith("This submission could not be graded: "), (
            f"{label}: the output should give the reason: {results_file['output']!r}"
        )
    rows = read_csv(out / "scores.csv")
    actual_errors = [(row[0], bool(row[-1])) for row in rows[1:]]
    expected_errors = [("missing", True), ("not_json", True)]
    assert actual_errors == expected_errors, f"scores.csv rows: {rows}"
    table = format_table(results)
    assert table.count("not graded:") == 2, f"the table should show both as not graded:\n{table}"


# ---------------------------------------------------------------- the judge's limits, checked and
# passed through


def test_judge_limits_default_to_the_judges_with_a_600_second_timeout():
    actual = judge_limits()
    expected = (None, 600.0)
    assert actual == expected, f"no limits and no timeout: expected {expected}, got {actual}"


def test_judge_limits_timeout_follows_the_deadline():
    actual = judge_limits({"deadline": 100, "cell_seconds": 5})
    expected = (Limits(deadline=100, cell_seconds=5), 160.0)
    assert actual == expected, (
        f"the timeout should be the deadline plus {JUDGE_MARGIN:g} s: got {actual}"
    )


@pytest.mark.parametrize("timeout, deadline", [(120, 60.0), (30, 15.0), (900, 540.0)])
def test_judge_limits_deadline_fits_inside_a_timeout(timeout, deadline):
    limits, actual_timeout = judge_limits(None, timeout)
    actual = (limits.deadline if limits is not None else Limits().deadline, actual_timeout)
    assert actual == (deadline, float(timeout)), (
        f"timeout {timeout}: the judge's deadline should be {deadline} so it writes results in "
        f"time, got {actual}"
    )


def test_judge_limits_the_default_timeout_keeps_the_default_limits():
    actual = judge_limits(None, DEFAULT_TIMEOUT)
    assert actual == (None, DEFAULT_TIMEOUT), (
        f"600 s is the default: no limits to pass, got {actual}"
    )


BAD_LIMITS = [
    (
        {"cell_seconds": -1},
        None,
        "judge",
        "limit cell_seconds must be a positive number of seconds, not -1",
    ),
    (
        {"call_seconds": 0},
        None,
        "judge",
        "limit call_seconds must be a positive number of seconds, not 0",
    ),
    (
        {"deadline": float("nan")},
        None,
        "judge",
        "limit deadline must be a positive number of seconds, not nan",
    ),
    (
        {"startup_seconds": float("inf")},
        None,
        "judge",
        "limit startup_seconds must be a positive number of seconds",
    ),
    (
        {"memory_mb": 0},
        None,
        "judge",
        "limit memory_mb must be a positive whole number of megabytes, not 0",
    ),
    (
        {"memory_mb": 1.5},
        None,
        "judge",
        "limit memory_mb must be a positive whole number of megabytes, not 1.5",
    ),
    (
        {"cell_secs": 5},
        None,
        "judge",
        "unknown limit(s) ['cell_secs']: the judge's limits are ['cell_seconds'",
    ),
    (None, -5, "judge", "timeout must be a positive number of seconds, not -5"),
    (None, 0, "otter", "timeout must be a positive number of seconds, not 0"),
    (
        {"deadline": 200},
        100,
        "judge",
        "timeout (100 s) must be at least the judge's deadline (200 s) plus 10 s",
    ),
    (
        {"cell_seconds": 5},
        None,
        "otter",
        "limits apply to the judge runner only: `otter run` has no per-cell",
    ),
    (
        [("cell_seconds", 5)],
        None,
        "judge",
        "limits must be an autograder.judge.Limits or a dict of its fields",
    ),
]


@pytest.mark.parametrize(
    "limits, timeout, runner, message",
    BAD_LIMITS,
    ids=[m.split(":")[0][:40] for *_, m in BAD_LIMITS],
)
def test_bad_limits_raise_a_value_error_saying_what_was_expected(
    limits, timeout, runner, message, dummy_zip, tmp_path
):
    submission = tmp_path / "hw.ipynb"
    submission.write_text("{}")
    out = tmp_path / "out"
    for call in (
        lambda: judge_limits(limits, timeout, runner),
        lambda: grade_one(
            dummy_zip, submission, out, timeout=timeout, runner=runner, limits=limits
        ),
        lambda: grade_many(
            dummy_zip,
            [submission],
            out,
            timeout=timeout,
            runner=runner,
            limits=limits,
            progress=False,
        ),
    ):
        with pytest.raises(ValueError) as info:
            call()
        assert message in str(info.value), (
            f"expected {message!r} in the error, got {str(info.value)!r}"
        )
    assert not out.exists(), "bad limits should be refused before anything is graded or written"


@pytest.mark.parametrize(
    "text, option",
    [
        ("-1", "--cell-seconds"),
        ("0", "--deadline"),
        ("1.5", "--memory-mb"),
        ("soon", "--timeout"),
        ("0", "--jobs"),
    ],
)
def test_grade_cli_refuses_nonsense_limits(text, option, capsys):
    from autograder.cli import main

    with pytest.raises(SystemExit) as info:
        main(["grade", "where_mlps_fail", "hw.ipynb", option, text])
    err = capsys.readouterr().err
    assert info.value.code == 2, (
        f"{option} {text}: expected a usage error (exit 2), got {info.value.code}"
    )
    assert f"argument {option}: expected a positive" in err and repr(text) in err, (
        f"{option} {text}: the error should say what was expected: {err!r}"
    )


def test_grade_cli_refuses_limits_with_the_otter_runner(capsys):
    from autograder.cli import main

    with pytest.raises(SystemExit) as info:
        main(["grade", "where_mlps_fail", "hw.ipynb", "--runner", "otter", "--cell-seconds", "5"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "judge runner only" in err, (
        f"exit {info.value.code}, stderr {err!r}"
    )


def test_grade_cli_refuses_a_pattern_that_matched_nothing(tmp_path, capsys):
    """A pattern that matched nothing, as in `grade NAME nosuch/*.ipynb --out X`, is refused and
    nothing is written: taken as a file name, it would give a results folder named `*` (a trap for
    `rm X/*`)."""
    from autograder.cli import main

    out = tmp_path / "graded"
    with pytest.raises(SystemExit) as info:
        main(["grade", "where_mlps_fail", str(tmp_path / "nosuch" / "*.ipynb"), "--out", str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "no file matches" in err and "*.ipynb" in err, (
        f"exit {info.value.code}: {err!r}"
    )
    assert not out.exists(), "nothing should be written for a pattern that matched nothing"


# ---------------------------------------------------------------- a private copy of each submission


#: A folder and a file name that name a student, as an instructor's download folder does.
PRIVATE_FOLDER = "alice-liddell-7c1f"
PRIVATE_NAME = "alice_liddell_hw3"


@pytest.fixture
def private_submission(tmp_path) -> Path:
    folder = tmp_path / "downloads" / PRIVATE_FOLDER
    folder.mkdir(parents=True)
    path = folder / f"{PRIVATE_NAME}.ipynb"
    path.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    return path


class FakeRun:
    """Stands in for ``_run_stopping_politely`` (the grading process): records what it got, writes
    ``results``."""

    def __init__(self, results: dict):
        self.results, self.calls = results, []

    def __call__(self, command, cwd, timeout, env, input=None):
        warm = command[2] == "autograder.warm_judge"
        if warm:  # what the warm judge runs: its request (autograder.warm_judge)
            request = json.loads(input)
            command = [*command[:2], request["module"], *request["argv"]]
            cwd, env = request["cwd"], request["env"]
        staged = Path(command[4]) if command[2] == "autograder.judge" else Path(command[-1])
        self.calls.append(
            {
                "warm": warm,
                "command": list(command),
                "cwd": str(cwd),
                "timeout": timeout,
                "env": dict(env),
                "staged": staged,
                "staged_is_link": staged.is_symlink(),
                "staged_text": None if staged.is_symlink() else staged.read_text(),
                "folder_mode": stat.S_IMODE(staged.parent.stat().st_mode),
                "folder_owner": staged.parent.stat().st_uid,
            }
        )
        if command[2] == "autograder.judge":
            results_path = Path(command[5])
        else:
            results_path = Path(command[command.index("-o") + 1]) / "results.json"
        results_path.write_text(json.dumps(self.results))
        return subprocess.CompletedProcess(command, 0, "graded\n", "")


def test_grade_one_grades_a_private_copy_and_passes_the_limits(
    private_submission, dummy_zip, tmp_path, monkeypatch
):
    fake = FakeRun(OTTER_RESULTS)
    monkeypatch.setattr(grade_module, "_run_stopping_politely", fake)
    out = tmp_path / "graded" / PRIVATE_NAME
    result = grade_one(
        dummy_zip,
        private_submission,
        out,
        limits={"cell_seconds": 2, "deadline": 100, "memory_mb": 1500},
    )
    (call,) = fake.calls
    shown = " ".join(call["command"]) + " " + call["cwd"] + " " + " ".join(call["env"].values())
    for private in (PRIVATE_FOLDER, PRIVATE_NAME, str(private_submission.parent), str(out)):
        assert private not in shown, (
            f"{private!r} reaches the grading process (command, cwd or environment): {shown}"
        )
    expected_flags = [
        "--cell-seconds=2.0",
        "--call-seconds=30.0",
        "--startup-seconds=60.0",
        "--deadline=100.0",
        "--memory-mb=1500",
    ]
    assert call["command"][-5:] == expected_flags, (
        f"the judge's limits should be passed as options: {call['command']}"
    )
    assert call["timeout"] == 160.0, (
        f"the timeout should be the deadline plus {JUDGE_MARGIN:g} s: {call['timeout']}"
    )
    assert call["warm"], "a warm judge (autograder.warm_judge) should run the judge"
    actual = (call["staged"].name, call["staged_text"], call["folder_mode"], call["folder_owner"])
    expected = ("staged-submission.ipynb", private_submission.read_text(), 0o700, os.geteuid())
    assert actual == expected, (
        f"(staged name, content, folder mode, owner): expected {expected}, got {actual}"
    )
    assert not call["staged"].exists(), "the private copy should be removed after grading"
    assert result.scores == question_scores(OTTER_RESULTS) and result.error is None, (
        f"the results should be read from the out dir as before: {result}"
    )
    assert results_of(out / "results.json") == OTTER_RESULTS, (
        "results.json should land in the out dir unchanged"
    )


def test_grade_one_without_limits_passes_no_options(
    private_submission, dummy_zip, tmp_path, monkeypatch
):
    fake = FakeRun(OTTER_RESULTS)
    monkeypatch.setattr(grade_module, "_run_stopping_politely", fake)
    grade_one(dummy_zip, private_submission, tmp_path / "out")
    (call,) = fake.calls
    actual = (call["command"][2], len(call["command"]), call["timeout"])
    assert actual == ("autograder.judge", 6, DEFAULT_TIMEOUT), (
        f"(module, argument count, timeout) with the judge's defaults: got {actual}, command "
        f"{call['command']}"
    )


def test_grade_one_otter_runner_grades_the_private_copy_too(
    private_submission, dummy_zip, tmp_path, monkeypatch
):
    fake = FakeRun(OTTER_RESULTS)
    monkeypatch.setattr(grade_module, "_run_stopping_politely", fake)
    out = tmp_path / "out"
    grade_one(dummy_zip, private_submission, out, runner="otter", timeout=300)
    (call,) = fake.calls
    shown = " ".join(call["command"])
    assert PRIVATE_FOLDER not in shown and PRIVATE_NAME not in shown, (
        f"otter run got the original path: {shown}"
    )
    assert call["timeout"] == 300.0, f"otter run's timeout: {call['timeout']}"
    assert results_of(out / "results.json") == OTTER_RESULTS, (
        "otter run's results.json should land in the out dir"
    )


def test_a_failure_reason_names_the_original_file_not_the_copy(
    private_submission, dummy_zip, tmp_path, monkeypatch
):
    fake = FakeRun(failure_results("staged-submission.ipynb is empty."))
    monkeypatch.setattr(grade_module, "_run_stopping_politely", fake)
    result = grade_one(dummy_zip, private_submission, tmp_path / "out")
    expected = f"{PRIVATE_NAME}.ipynb is empty."
    assert result.error == expected, f"expected {expected!r}, got {result.error!r}"
    assert (
        results_of(result.results_path)["output"]
        == f"This submission could not be graded: {expected}"
    ), "results.json should name the original file"


@pytest.mark.parametrize(
    "files, graded",
    [
        (["where_mlps_fail.ipynb"], "where_mlps_fail.ipynb"),
        (["where_mlps_fail.ipynb", "notes.txt", ".hidden.ipynb"], "where_mlps_fail.ipynb"),
        (["where_mlps_fail.zip"], "where_mlps_fail.zip"),
        (["draft.zip", "where_mlps_fail.ipynb"], "where_mlps_fail.ipynb"),
        # Gradescope unpacks an uploaded zip, which may hold a folder
        (
            [
                "lab3/where_mlps_fail.ipynb",
                "lab3/.ipynb_checkpoints/where_mlps_fail-checkpoint.ipynb",
                "__MACOSX/lab3/._where_mlps_fail.ipynb",
            ],
            "lab3/where_mlps_fail.ipynb",
        ),
        # a suffix's case does not matter: Windows may save "Lab.IPYNB"
        (["Lab.IPYNB", "notes.txt"], "Lab.IPYNB"),
    ],
    ids=[
        "notebook",
        "notebook_among_other_files",
        "export_zip",
        "notebook_before_zip",
        "notebook_in_a_folder",
        "notebook_with_an_upper_case_suffix",
    ],
)
def test_a_folder_per_student_is_graded_by_its_notebook(
    files, graded, dummy_zip, tmp_path, monkeypatch
):
    """A folder per student, as Gradescope's "Export Submissions" gives them (the README says so),
    is graded by the notebook it holds."""
    folder = tmp_path / "export" / "submission_1234"
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"content of {name}")
    fake = FakeRun(OTTER_RESULTS)
    monkeypatch.setattr(grade_module, "_run_stopping_politely", fake)
    result = grade_one(dummy_zip, folder, tmp_path / "out")
    (call,) = fake.calls
    assert call["staged_text"] == f"content of {graded}", (
        f"{graded} should be graded: {call['staged_text']!r}"
    )
    assert call["staged"].suffix == Path(graded).suffix.lower(), (
        f"the judge reads the copy by its suffix: {call['staged']}"
    )
    assert result.error is None and result.submission == folder, result


@pytest.mark.parametrize(
    "files, reason",
    [
        ([], "is a folder with no notebook (.ipynb) or export zip in it."),
        (
            ["a.ipynb", "b.ipynb"],
            "is a folder holding 2 notebooks (a.ipynb, b.ipynb): a submission's folder should hold "
            "one.",
        ),
        (
            ["a.zip", "b.zip"],
            "is a folder holding 2 zips (a.zip, b.zip): a submission's folder should hold one.",
        ),
    ],
    ids=["empty", "two_notebooks", "two_zips"],
)
def test_a_folder_without_one_notebook_gets_a_reason(
    files, reason, dummy_zip, tmp_path, monkeypatch
):
    folder = tmp_path / "submission_1234"
    folder.mkdir()
    for name in files:
        (folder / name).write_text("{}")
    fake = FakeRun(OTTER_RESULTS)
    monkeypatch.setattr(grade_module, "_run_stopping_politely", fake)
    result = grade_one(dummy_zip, folder, tmp_path / "out")
    assert fake.calls == [], "nothing should be graded"
    assert result.error == f"{folder} {reason}", result.error
    assert_failure_results(results_of(tmp_path / "out" / "results.json"), reason)


def test_a_submission_that_cannot_be_copied_gets_a_results_file(
    private_submission, dummy_zip, tmp_path, monkeypatch
):
    def refuse(submission, folder):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(grade_module, "stage_submission", refuse)
    result = grade_one(dummy_zip, private_submission, tmp_path / "out")
    expected = f"{private_submission} could not be copied for grading (Permission denied)."
    assert result.error == expected, f"expected {expected!r}, got {result.error!r}"
    assert_failure_results(results_of(result.results_path), "could not be copied for grading")


def test_a_symbolic_link_is_staged_as_a_link(tmp_path, dummy_zip, monkeypatch):
    target = tmp_path / "solution.ipynb"
    target.write_text("{}")
    link = tmp_path / "hw.ipynb"
    link.symlink_to(target)
    fake = FakeRun(failure_results("staged-submission.ipynb is a symbolic link, not a file"))
    monkeypatch.setattr(grade_module, "_run_stopping_politely", fake)
    grade_one(dummy_zip, link, tmp_path / "out")
    (call,) = fake.calls
    assert call["staged_is_link"], (
        "a symbolic link must reach the judge as a link, which it refuses, not as its target"
    )


# ---------------------------------------------------------------- limits and the private copy,
# through the real judge


TINY_TEST = '''from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 1

@test_case(points=1, hidden=True)
def test_q1_hidden(answer):
    assert answer == 42, "`answer` should be 42"
'''


@pytest.fixture
def tiny_zip(tmp_path) -> Path:
    """An autograder zip with one hidden test (``answer == 42``), no support files: grading costs
    seconds."""
    path = tmp_path / "tiny-autograder.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("otter_config.json", json.dumps({"show_hidden": True, "lang": "python"}))
        z.writestr("tests/q1.py", TINY_TEST)
    return path


def notebook(path: Path, *sources: str) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.mark.grading
def test_a_tiny_cell_limit_reaches_the_judge(tiny_zip, tmp_path):
    submission = notebook(
        tmp_path / "slow.ipynb", "answer = 42", "import time\ntime.sleep(120)", "after = 1"
    )
    result = grade_one(
        tiny_zip, submission, tmp_path / "out", limits={"cell_seconds": 2, "deadline": 90}
    )
    results = results_of(result.results_path)
    assert result.scores == {"q1": (1.0, 1.0)}, (
        f"the cells before the slow one still count: {result.scores}, {results}"
    )
    # sleeping, the cell uses no CPU seconds: the wall-clock backstop (4 x 2 s) interrupts it, or,
    # on a loaded machine, stops it
    expected = (
        "The 2nd code cell of the notebook interrupted: it was blocked or sleeping (8 seconds "
        "passed, and "
        "it used ",
        "The 2nd code cell of the notebook stopped: it was blocked or sleeping (8 seconds passed, "
        "and it used ",
    )
    assert (
        any(e in results["output"] for e in expected)
        and "of its 2 CPU seconds)" in results["output"]
    ), f"the results should name the 2-second cell limit and its backstop: {results['output']!r}"


@pytest.mark.grading
def test_the_student_process_never_sees_the_original_path(tiny_zip, tmp_path):
    # the student process may run as another user (nobody), in namespaces with a /tmp of its own: a
    # folder anyone may write to, outside the private folders, in one of root's that others may only
    # pass through
    report_dir = Path(tempfile.mkdtemp(prefix="staging-report-", dir="/run"))
    report_dir.chmod(0o711)
    (report_dir / "open").mkdir()
    (report_dir / "open").chmod(0o777)
    report = report_dir / "open" / "report.json"
    probe = f'''import json, os
seen = {{"cwd": os.getcwd(), "files": sorted(os.listdir(".")), "env": dict(os.environ)}}
try:  # in a PID namespace of its own, its parent is not there to see
    with open(f"/proc/{{os.getppid()}}/cmdline", "rb") as f:
        seen["parent"] = f.read().decode(errors="replace").replace("\\0", " ")
except FileNotFoundError:
    seen["parent"] = None
with open({str(report)!r}, "w") as f:
    json.dump(seen, f)
answer = 42'''
    submission = notebook(tmp_path / "downloads" / PRIVATE_FOLDER / f"{PRIVATE_NAME}.ipynb", probe)
    try:
        result = grade_one(tiny_zip, submission, tmp_path / "out" / PRIVATE_NAME)
        assert report.is_file(), f"the probe cell did not run: {results_of(result.results_path)}"
        seen = json.loads(report.read_text())
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)
    assert result.scores == {"q1": (1.0, 1.0)}, (
        f"the probe notebook should be graded: {result.scores}"
    )
    if namespaces.isolation_mode() == namespaces.NAMESPACES:
        assert seen["parent"] is None, f"the judge should be out of sight: {seen['parent']!r}"
    else:
        parent = seen["parent"]
        assert "autograder.judge" in parent and "staged-submission.ipynb" in parent, (
            f"the probe should see the judge's command line (the private copy): {parent!r}"
        )
    shown = json.dumps(seen)
    for private in (PRIVATE_FOLDER, PRIVATE_NAME):
        assert private not in shown, f"the student process can see {private!r}: {shown}"


# ---------------------------------------------------------------- other submissions, unreadable to
# student code


@pytest.mark.skipif(
    os.geteuid() != 0, reason="only grading as root runs student code as another user"
)
def test_grading_as_root_makes_submissions_and_results_unreadable_to_other_users(tmp_path):
    """Grading as root makes the batch's submissions and results unreadable to other users, so
    student code (run as another user) cannot list or read the batch's other submissions; the modes
    are given back after the batch."""
    from autograder.staging import protect_inputs, restore_modes

    subs = tmp_path / "subs"
    subs.mkdir(mode=0o755)
    subs.chmod(0o755)
    mine, theirs = subs / "Jane Doe.ipynb", subs / "mallory.ipynb"
    for path in (mine, theirs):
        path.write_text("{}")
        path.chmod(0o644)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    loose = sticky / "alone.ipynb"
    loose.write_text("{}")
    loose.chmod(0o644)
    out = tmp_path / "graded"
    changed = protect_inputs([mine, theirs, loose], out)
    actual = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in (subs, mine, theirs, out, sticky, loose)
    }
    expected = {
        "subs": 0o700,
        "Jane Doe.ipynb": 0o600,
        "mallory.ipynb": 0o600,
        "graded": 0o700,
        "sticky": 0o1777,
        "alone.ipynb": 0o600,
    }
    assert actual == expected, (
        f"modes after protect_inputs: { {k: oct(v) for k, v in actual.items()} }"
    )
    assert str(sticky) not in changed and changed.get(str(subs)) == 0o755, changed
    restore_modes(changed, out)
    actual = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in (subs, mine, theirs, out, sticky, loose)
    }
    expected = {
        "subs": 0o755,
        "Jane Doe.ipynb": 0o644,
        "mallory.ipynb": 0o644,
        "graded": 0o700,
        "sticky": 0o1777,
        "alone.ipynb": 0o644,
    }
    assert actual == expected, (
        f"modes given back after the batch: { {k: oct(v) for k, v in actual.items()} }"
    )


@pytest.mark.skipif(
    os.geteuid() != 0, reason="only grading as root runs student code as another user"
)
def test_a_folder_on_the_way_to_the_interpreter_stays_traversable(tmp_path, monkeypatch):
    """A folder on the way to the interpreter keeps others' right to pass through it (0711): grading
    as root a notebook kept in the repository's root would otherwise make the root 0700, where the
    sandbox user cannot reach the interpreter in ``.venv/``, and every later grading would fail."""
    from autograder import grade as grade_module
    from autograder.staging import protect_inputs, restore_modes

    repo = tmp_path / "repo"
    interpreter = repo / ".venv" / "bin" / "python"
    interpreter.parent.mkdir(parents=True)
    interpreter.write_text("")
    repo.chmod(0o755)
    submission = repo / "alice.ipynb"
    submission.write_text("{}")
    monkeypatch.setattr(grade_module.sys, "executable", str(interpreter))
    changed = protect_inputs([submission], tmp_path / "graded")
    actual = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in (repo, submission)}
    assert actual == {"repo": oct(0o711), "alice.ipynb": oct(0o600)}, (
        f"the repository keeps others' traverse permission, the notebook is locked: {actual}"
    )
    restore_modes(changed, tmp_path / "graded")
    assert stat.S_IMODE(repo.stat().st_mode) == 0o755, (
        "the repository's mode is given back after the batch"
    )


# ---------------------------------------------------------------- load_submission: sizes


def _notebook_json(padding: int = 0) -> str:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nb.metadata["padding"] = " " * padding
    return nbformat.writes(nb)


def test_a_notebook_larger_than_the_grader_reads_is_refused_saying_how_large(tmp_path):
    from autograder.submission import MAX_NOTEBOOK_BYTES, SubmissionError, load_submission

    path = tmp_path / "huge.ipynb"
    # sparse: the size is what counts, and it is refused before any read
    with open(path, "wb") as f:
        f.truncate(MAX_NOTEBOOK_BYTES + 1)
    with pytest.raises(
        SubmissionError, match=r"huge.ipynb is 32 MB, more than the 32 MB the grader reads"
    ):
        load_submission(path)


def test_a_zip_that_unpacks_to_more_than_the_grader_reads_is_refused_unread(tmp_path):
    """A zip that unpacks to more than the grader reads is refused unread: a zip of 153 KB can take
    the judge (root, no memory limit) to 820 MB."""
    from autograder.submission import MAX_NOTEBOOK_BYTES, SubmissionError, load_submission

    bomb, honest = tmp_path / "bomb.zip", tmp_path / "honest.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("notebook.ipynb", _notebook_json(padding=MAX_NOTEBOOK_BYTES))
    with zipfile.ZipFile(honest, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("notebook.ipynb", _notebook_json(padding=1000))
    assert bomb.stat().st_size < 1 << 20, "the bomb is small on disk"
    with pytest.raises(
        SubmissionError, match=r"notebook.ipynb is 32 MB, more than the 32 MB the grader reads"
    ):
        load_submission(bomb)
    actual = load_submission(honest)
    assert [c.source for c in actual.cells] == ["x = 1"], "a zip of an ordinary notebook is read"


def test_a_grading_past_its_timeout_is_asked_to_stop_before_it_is_killed(tmp_path, monkeypatch):
    """A grading past ``grade``'s timeout gets SIGTERM and a grace period before it is killed: a
    judge killed at once (as ``subprocess.run`` kills it) leaves its working folders, with the
    submission in them, behind."""
    marker = tmp_path / "asked"
    polite = (
        "import pathlib, signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: "
        f"(pathlib.Path({str(marker)!r}).write_text('yes'), "
        "sys.exit(143)))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        grade_module._run_stopping_politely(
            [sys.executable, "-c", polite], cwd=tmp_path, timeout=3, env=dict(os.environ)
        )
    assert marker.read_text() == "yes", "the grading process should have been sent SIGTERM first"
    monkeypatch.setattr(judge_pool, "STOP_GRACE_SECONDS", 1.0)
    stubborn = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        grade_module._run_stopping_politely(
            [sys.executable, "-c", stubborn], cwd=tmp_path, timeout=2, env=dict(os.environ)
        )
    assert time.monotonic() - started < 30, (
        "one that ignores SIGTERM should be killed after the grace period"
    )
    done = grade_module._run_stopping_politely(
        [sys.executable, "-c", "print('out'); import sys; print('err', file=sys.stderr)"],
        cwd=tmp_path,
        timeout=30,
        env=dict(os.environ),
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")


@pytest.mark.skipif(
    os.geteuid() != 0, reason="working folders are kept apart only when grading runs as root"
)
def test_working_folders_are_made_where_no_student_lists_them_and_abandoned_ones_removed(
    monkeypatch, tmp_path
):
    """Working folders are made in a folder only root may list (mode 0711), and a folder whose judge
    has ended is removed by the next grading, however deep it is: a student folder in ``/tmp``,
    owned by ``nobody`` and left behind by a judge killed from outside, could be found by a later
    student run as ``nobody``, who would run the notebook in it as its own (31/31 for a blank
    notebook)."""
    from autograder import work_folders

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent, own = work_folders.work_parent()
    info = parent.lstat()
    assert (parent, own, info.st_uid, stat.S_IMODE(info.st_mode)) == (
        tmp_path / work_folders.WORK_FOLDER_NAME,
        False,
        0,
        0o711,
    )
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    abandoned = parent / f"submission-{int(dead.stdout)}-abc"
    deep = abandoned
    for _ in range(40):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "where_mlps_fail.ipynb").write_text("{}")
    running = parent / f"submission-{os.getpid()}-xyz"
    running.mkdir()
    work_folders._remove_abandoned(parent)
    assert sorted(p.name for p in parent.iterdir()) == [running.name], (
        "the folder of an ended judge should be removed, a running judge's kept"
    )
    # another user's folder of that name is not trusted: the grading makes one of its own, removed
    # afterwards
    running.rmdir()
    os.chown(parent, 65534, 65534)
    other, own = work_folders.work_parent()
    assert (
        own
        and other != parent
        and other.lstat().st_uid == 0
        and stat.S_IMODE(other.lstat().st_mode) == 0o711
    )
    other.rmdir()


def test_remove_tree_removes_a_chain_too_deep_for_shutil(tmp_path):
    """``remove_tree`` removes a chain of folders too deep for ``shutil.rmtree``, which recurses: a
    student's chain of 1,500 folders in its working folder stops it (``RecursionError``) after the
    results are decided."""
    from autograder import removal

    top = tmp_path / "submission"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    (top / "link").symlink_to(tmp_path)  # a link is removed, not followed
    (tmp_path / "kept").write_text("kept")
    removal.remove_tree(top)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]


@pytest.mark.grading
def test_a_judge_stopped_from_outside_leaves_no_student_process_or_working_folder(
    built_where_mlps_fail, tmp_path
):
    """Sent SIGTERM (as ``grade`` sends it first at its timeout), the judge stops the student's
    processes and removes its working folders: the student's working folder, with its notebook, is
    not left for the next student to read."""
    import nbformat

    from autograder import process_tree, work_folders

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import time\nfor _ in range(600):\n    time.sleep(0.1)")]
    submission = tmp_path / "where_mlps_fail.ipynb"
    nbformat.write(nb, submission)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograder.judge",
            str(built_where_mlps_fail.autograder_zip),
            str(submission),
            str(tmp_path / "results.json"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    parent = (
        Path(tempfile.gettempdir()) / work_folders.WORK_FOLDER_NAME
        if os.geteuid() == 0
        else Path(tempfile.gettempdir())
    )
    try:
        deadline = time.monotonic() + 120
        students: list[int] = []
        folders: list[Path] = []
        # until the student process runs the cell: a child seen before the working folder is made is
        # the judge's probe of the sandbox user (it imports the package, which takes seconds on a
        # loaded machine)
        while time.monotonic() < deadline and not (students and folders):
            time.sleep(0.5)
            folders = sorted(parent.glob(f"submission-{proc.pid}-*"))
            students = [
                pid
                for pid, (ppid, _, _) in process_tree.process_table().items()
                if ppid == proc.pid
            ]
        assert students and folders, (
            f"the judge should have started a student process in a working folder: {folders}"
        )
        time.sleep(3)
        proc.terminate()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = [
        pid
        for pid in students
        if os.path.exists(f"/proc/{pid}") and process_tree.has_live_threads(pid)
    ]
    assert left == [], f"the student's processes should be stopped with the judge: {left}"
    assert [f for f in folders if f.exists()] == [] and not list(
        parent.glob(f"judge-{proc.pid}-*")
    ), "the judge's working folders should be removed when it is stopped from outside"


def test_a_notebook_or_zip_is_read_whatever_the_case_of_its_suffix(tmp_path):
    """Windows may save ``Lab.IPYNB``: a notebook or a zip is read whatever the case of its suffix,
    not refused as "not a notebook" and scored 0."""
    from autograder.submission import find_gradescope_submission, load_submission

    notebook = tmp_path / "submission" / "Lab.IPYNB"
    notebook.parent.mkdir()
    notebook.write_text(_notebook_json())
    export = tmp_path / "Export.ZIP"
    with zipfile.ZipFile(export, "w") as archive:
        archive.writestr("Lab.IPYNB", _notebook_json())
    actual = [[c.source for c in load_submission(p).cells] for p in (notebook, export)]
    assert actual == [["x = 1"], ["x = 1"]], (
        f"cells read from the notebook and from the zip: {actual}"
    )
    assert find_gradescope_submission(notebook.parent) == notebook, (
        "Gradescope's folder is searched whatever the case"
    )


@pytest.mark.grading
def test_the_results_are_written_before_what_the_student_left_is_removed(
    tiny_zip, tmp_path, monkeypatch
):
    """The results are written before the working folders are removed: a million folders left behind
    take the removal past the deadline, and a grading stopped from outside then still has its
    results."""
    from autograder import judge

    results_path = tmp_path / "out" / "results.json"
    seen = []
    remove_tree = judge.remove_tree

    def recording(path):
        seen.append(results_path.is_file())
        remove_tree(path)

    monkeypatch.setattr(judge, "remove_tree", recording)
    submission = notebook(tmp_path / "hw.ipynb", "answer = 42")
    results = judge.grade_submission(tiny_zip, submission, results_path, judge.Limits(deadline=90))
    assert results["tests"] and results_of(results_path) == results, "the results should be written"
    assert seen == [True, True], (
        f"results.json written when each working folder was removed: {seen}"
    )


def test_results_written_before_the_timeout_are_kept(dummy_zip, tmp_path, monkeypatch):
    """Results the judge wrote before it was stopped at ``grade``'s timeout (while it removed what
    the submission left) are kept, and the output says the grading was stopped after writing them;
    only a judge that wrote none gives "grading took longer than..."."""

    def written_then_stopped(command, cwd, timeout, env, input=None):
        argv = json.loads(input)["argv"]  # a warm judge's: ZIP SUBMISSION RESULTS_JSON ...
        Path(argv[2]).write_text(json.dumps(OTTER_RESULTS))
        raise subprocess.TimeoutExpired(command, timeout)

    def stopped(command, cwd, timeout, env, **kwargs):
        raise subprocess.TimeoutExpired(command, timeout)

    submission = tmp_path / "hw.ipynb"
    submission.write_text("{}")
    monkeypatch.setattr(grade_module, "_run_stopping_politely", written_then_stopped)
    kept = grade_one(dummy_zip, submission, tmp_path / "kept", timeout=30)
    monkeypatch.setattr(grade_module, "_run_stopping_politely", stopped)
    lost = grade_one(dummy_zip, submission, tmp_path / "lost", timeout=30)
    assert kept.error is None and kept.scores == question_scores(OTTER_RESULTS), f"kept: {kept}"
    assert results_of(kept.results_path)["output"].endswith("its results had been written."), (
        "the output should say the grading was stopped after writing its results"
    )
    assert lost.error == "grading took longer than 30 seconds and was stopped.", (
        f"lost: {lost.error!r}"
    )
    # both list the deadline among the limits the report shows
    assert [kind for kind, _ in limits_of(results_of(kept.results_path))] == ["deadline"]
    assert limits_of(results_of(lost.results_path)) == [("deadline", lost.error)]


#: Kills every other process of its own user, for 60 seconds, as a student graded as ``nobody`` may.
_KILLER = """
import os, signal, time
me, uid = os.getpid(), os.getuid()
end = time.monotonic() + 60
while time.monotonic() < end:
    for name in os.listdir('/proc'):
        if name.isdigit() and int(name) != me:
            try:
                if os.stat(f'/proc/{name}').st_uid == uid:
                    os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
"""


#: A judge's session running one cell (argv[2]) in the scratch folder argv[1] as ``nobody``.
_ATTACKER = """
import pwd, sys, time
from autograder.judge_interface import Limits
from autograder.session import Session
session = Session(__import__("pathlib").Path(sys.argv[1]), [sys.argv[2]],
                  Limits(cell_seconds=120), pwd.getpwnam("nobody"), time.monotonic() + 180)
try:
    session.run_all()
finally:
    session.process.stop()
"""


@pytest.mark.grading
@pytest.mark.skipif(
    not namespaces.available(), reason="only in namespaces are gradings side by side kept apart"
)
def test_a_student_graded_as_nobody_cannot_stop_the_grading_beside_it(
    tiny_zip, tmp_path, monkeypatch
):
    """Every grading's student runs as ``nobody``: one that kills every process of its user, for a
    minute, while a grading beside it checks that ``nobody`` can run Python and then runs its
    notebook, reaches neither from its own PID namespace, and the neighbour is graded in full."""
    import pwd
    import signal

    from autograder import judge, sandbox_user

    nobody = pwd.getpwnam(sandbox_user.SANDBOX_USER)
    attacker_folder = Path(tempfile.mkdtemp(prefix="attacker-"))
    attacker_folder.chmod(0o711)
    (attacker_folder / "work").mkdir()
    os.chown(attacker_folder / "work", nobody.pw_uid, nobody.pw_gid)
    # a judge of its own (control groups are a judge's), grading the killer's notebook
    attacker = subprocess.Popen(
        [sys.executable, "-c", _ATTACKER, str(attacker_folder / "work"), _KILLER],
        start_new_session=True,
    )
    try:
        time.sleep(10)  # the killer is running
        # this judge has checked no user yet
        monkeypatch.setattr(sandbox_user, "_USER_CHECKED", set())
        submission = notebook(tmp_path / "hw.ipynb", "answer = 42")
        results = judge.grade_submission(
            tiny_zip, submission, tmp_path / "results.json", judge.Limits(deadline=90)
        )
        still_killing = attacker.poll() is None
    finally:
        os.killpg(attacker.pid, signal.SIGKILL)
        attacker.wait()
        shutil.rmtree(attacker_folder, ignore_errors=True)
    assert still_killing, "the killer should have run throughout the neighbour's grading"
    actual = {
        test["name"]: test.get("score")
        for test in results["tests"]
        if test["name"] != "Public Tests"
    }
    assert actual == {"q1": 1.0}, (
        f"the honest neighbour should be graded: {actual}, {results.get('output')!r}"
    )


# ---------------------------------------------------------------- grading errors: the grader's
# fault, never a zero


def _zip_with_tests(
    path: Path, tests: dict[str, str], assignment: str | None = "where_mlps_fail"
) -> Path:
    """An autograder zip holding ``tests`` (``{"q1.py": source}``) and an otter_config.json naming
    ``assignment``."""
    config = {"show_hidden": True, "lang": "python"}
    if assignment:
        config["assignment_name"] = assignment
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("otter_config.json", json.dumps(config))
        for name, source in tests.items():
            z.writestr(f"tests/{name}", source)
    return path


def _hidden_test(body: str, name: str = "q1", params: str = "answer") -> str:
    """An Otter exception test file with one hidden 1-point test case whose body is ``body``."""
    indented = "\n".join(f"    {line}" for line in body.splitlines())
    return (
        f'from otter.test_files import test_case\n\nOK_FORMAT = False\n\nname = "{name}"\npoints = '
        f'1\n\n'
        f'@test_case(points=1, hidden=True)\ndef test_{name}_hidden({params}):\n{indented}\n'
    )


def _grade_command(monkeypatch, build_root: Path, *args: str) -> int:
    """``python -m autograder grade ARGS`` (the real command line), its zips taken from
    ``build_root``."""
    from autograder import build as build_mod
    from autograder.cli import main

    monkeypatch.setattr(build_mod, "BUILD", build_root)
    return main(["grade", *args])


def _broken_copy(autograder_zip: Path, out: Path, test: str, old: str, new: str) -> Path:
    """``autograder_zip`` with ``old`` replaced by ``new`` in ``tests/<test>``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with (
        zipfile.ZipFile(autograder_zip) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for info in src.infolist():
            data = src.read(info)
            if info.filename == f"tests/{test}":
                assert old.encode() in data, f"{old!r} is not in {test}"
                data = data.replace(old.encode(), new.encode())
            dst.writestr(info, data)
    return out


def assert_grading_error(results: dict, cause_part: str) -> None:
    """``results`` are a grading error's: valid Gradescope results, 0 points, the cause kept for
    staff, and an output telling the student it is not their fault and to tell staff."""
    from autograder.results_schema import validate_results

    validate_results(results)
    assert results["score"] == 0 and results["tests"] == [], (
        f"a grading error grades nothing: {results}"
    )
    assert cause_part in results["extra_data"]["grading_error"], (
        f"expected {cause_part!r} in the recorded cause: {results['extra_data']!r}"
    )
    output = results["output"]
    assert "not a fault of your work" in output and "course staff" in output, (
        f"the student should be told it is not their fault and to tell staff: {output!r}"
    )


@pytest.fixture(scope="module")
def unbuilt_where_mlps_fail(tmp_path_factory):
    """``where_mlps_fail`` built without running its tests (seconds): its real zip and solution."""
    from autograder.build import build_assignment

    root = tmp_path_factory.mktemp("unbuilt")
    return build_assignment(
        "where_mlps_fail",
        run_tests=False,
        build_root=root / "build",
        student_root=root / "student_template",
    )


@pytest.mark.grading
def test_hidden_tests_that_cannot_import_their_checks_are_a_grading_error_not_a_zero(
    unbuilt_where_mlps_fail, tmp_path, monkeypatch, capsys
):
    """Hidden tests that cannot import their checks are a grading error, found before the notebook
    runs: scored as a zero, the lesson's solution would get 0/31, and `grade` would exit 0."""
    build_root = tmp_path / "build"
    _broken_copy(
        unbuilt_where_mlps_fail.autograder_zip,
        build_root / "where_mlps_fail" / "autograder.zip",
        "q1_1.py",
        "autograder.checks.where_mlps_fail import",
        "autograder.checks.where_mlps_fial import",
    )
    out = tmp_path / "graded"
    code = _grade_command(
        monkeypatch,
        build_root,
        "where_mlps_fail",
        str(unbuilt_where_mlps_fail.solution),
        "--out",
        str(out),
    )
    table = capsys.readouterr().out
    assert code == 3, f"a grading error should make grade exit 3, not {code}:\n{table}"
    expected_cause = (
        "q1_1.py: cannot import autograder.checks.where_mlps_fial (ModuleNotFoundError: No module "
        "named 'autograder.checks.where_mlps_fial')"
    )
    row = read_csv(out / "scores.csv")[1]
    assert (
        row[0] == "solution" and row[-1].startswith("grading error: ") and expected_cause in row[-1]
    ), row
    assert "solution" in table and "grading error: " in table and "not graded" not in table, table
    assert_grading_error(results_of(out / "solution" / "results.json"), expected_cause)


@pytest.mark.grading
def test_a_reference_that_raises_is_a_grading_error(tmp_path, monkeypatch, capsys):
    """An exception raised inside the reference solution is the grader's, whatever the student
    answered."""
    build_root = tmp_path / "build"
    _zip_with_tests(
        build_root / "where_mlps_fail" / "autograder.zip",
        {
            "q1.py": _hidden_test(
                "from reference.where_mlps_fail import slide\nassert answer == 42, '`answer` "
                "should be 42'\nslide(None, 1)"
            )
        },
    )
    submission = notebook(tmp_path / "hw.ipynb", "answer = 42")
    code = _grade_command(
        monkeypatch, build_root, "where_mlps_fail", str(submission), "--out", str(tmp_path / "out")
    )
    capsys.readouterr()
    assert code == 3, f"grade should exit 3 for a grading error, not {code}"
    assert_grading_error(
        results_of(tmp_path / "out" / "hw" / "results.json"),
        "q1: the reference solution raised TypeError: x must be a torch.Tensor, got NoneType",
    )


@pytest.mark.grading
def test_what_the_students_code_raises_stays_the_students_and_no_hidden_source_is_quoted(
    tmp_path, monkeypatch, capsys
):
    """The student's own ImportError (raised in the student's process, through a call of its
    function) loses the question's points: it is not a grading error. Failed hidden results do
    not quote the hidden test's source line (as 'Error at line 16 in test q1_1: check_q1_1(...)'
    would)."""
    build_root = tmp_path / "build"
    _zip_with_tests(
        build_root / "where_mlps_fail" / "autograder.zip",
        {
            "q1.py": _hidden_test(
                "secret_expected = 42  # hidden detail\nassert answer == secret_expected, "
                "'`answer` is not the number of the question'"
            ),
            "q2.py": _hidden_test(
                "value = f()\nassert value == 1, '`f()` should return 1'", name="q2", params="f"
            ),
        },
    )
    submission = notebook(
        tmp_path / "hw.ipynb", "answer = 41", "def f():\n    import no_such_module\n    return 1"
    )
    code = _grade_command(
        monkeypatch, build_root, "where_mlps_fail", str(submission), "--out", str(tmp_path / "out")
    )
    capsys.readouterr()
    results = results_of(tmp_path / "out" / "hw" / "results.json")
    assert code == 0 and "grading_error" not in results.get("extra_data", {}), (
        f"the student's errors are no grading error: {code}, {results}"
    )
    outputs = {t["name"]: t["output"] for t in results["tests"] if t.get("max_score")}
    assert [t.get("score") for t in results["tests"] if t.get("max_score")] == [0, 0], results
    actual_q1 = [line.strip() for line in outputs["q1"].splitlines()][-2:]
    assert actual_q1 == ["❌ Test case failed", "`answer` is not the number of the question"], (
        f"q1 should give the check's own message: {outputs['q1']!r}"
    )
    assert (
        "Your code raised ModuleNotFoundError: No module named 'no_such_module'" in outputs["q2"]
    ), outputs["q2"]
    for name, output in outputs.items():
        for hidden in ("Error at line", "secret_expected", "value = f()", "assert "):
            assert hidden not in output, (
                f"{name}'s feedback quotes the hidden test ({hidden!r}): {output!r}"
            )


@pytest.mark.grading
def test_another_assignments_notebook_is_refused_naming_both(tmp_path, monkeypatch, capsys):
    """Another assignment's notebook (its metadata says which) is refused, naming both assignments:
    the inductive_bias notebook graded as where_mlps_fail would get a silent 0/31."""
    build_root = tmp_path / "build"
    _zip_with_tests(build_root / "where_mlps_fail" / "autograder.zip", {"q1.py": TINY_TEST})
    other = (
        Path(__file__).resolve().parents[2]
        / "student_template"
        / "inductive_bias"
        / "inductive_bias.ipynb"
    )
    code = _grade_command(
        monkeypatch, build_root, "where_mlps_fail", str(other), "--out", str(tmp_path / "out")
    )
    capsys.readouterr()
    expected = (
        "inductive_bias.ipynb is the notebook of the assignment 'inductive_bias' (its metadata "
        "says so), "
        "not of 'where_mlps_fail', the assignment it was submitted to: submit your where_mlps_fail "
        "notebook."
    )
    assert code == 1, f"a refused submission makes grade exit 1, not {code}"
    assert read_csv(tmp_path / "out" / "scores.csv")[1][-1] == expected
    assert_failure_results(
        results_of(tmp_path / "out" / "inductive_bias" / "results.json"), expected
    )


def test_an_autograder_zip_of_another_assignment_is_a_grading_error(tmp_path, monkeypatch, capsys):
    build_root = tmp_path / "build"
    _zip_with_tests(
        build_root / "where_mlps_fail" / "autograder.zip", {"q1.py": TINY_TEST}, "inductive_bias"
    )
    submission = notebook(tmp_path / "hw.ipynb", "answer = 42")
    code = _grade_command(
        monkeypatch, build_root, "where_mlps_fail", str(submission), "--out", str(tmp_path / "out")
    )
    capsys.readouterr()
    assert code == 3, f"grade should exit 3 for a grading error, not {code}"
    assert_grading_error(
        results_of(tmp_path / "out" / "hw" / "results.json"),
        "is the autograder of the assignment 'inductive_bias', not of 'where_mlps_fail'",
    )


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root, to run grade without the right to read every file (setpriv)",
)
def test_an_unreadable_or_vanished_submission_gets_its_results_and_row(tmp_path):
    """An unreadable or vanished submission gets its results file and its row saying why, not a
    PermissionError traceback from the command line's pattern check. ``grade`` runs here as root
    without its right to read any file (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), as a grader's own
    account would."""
    build_root = tmp_path / "build"
    _zip_with_tests(build_root / "where_mlps_fail" / "autograder.zip", {"q1.py": TINY_TEST})
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    os.chown(locked, 65534, 65534)
    unreadable, vanished = locked / "hw[1].ipynb", tmp_path / "gone" / "hw2.ipynb"
    out = tmp_path / "out"
    script = (
        "import sys\nfrom pathlib import Path\nfrom autograder import build\n"
        f"build.BUILD = Path({str(build_root)!r})\nfrom autograder.cli import main\n"
        f"sys.exit(main(['grade', 'where_mlps_fail', {str(unreadable)!r}, {str(vanished)!r}, "
        f"'--out', "
        f"{str(out)!r}]))\n"
    )
    proc = subprocess.run(
        [
            "setpriv",
            "--inh-caps=-all",
            "--bounding-set=-dac_override,-dac_read_search",
            sys.executable,
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    rows = read_csv(out / "scores.csv")[1:]
    expected = [
        ["hw[1]", "0", "1", f"{unreadable} could not be read (Permission denied)."],
        ["hw2", "0", "1", f"{vanished} does not exist."],
    ]
    assert rows == expected, f"one row per submission saying why: {rows}"
    assert_failure_results(
        results_of(out / "hw[1]" / "results.json"), "could not be read (Permission denied)"
    )
    assert_failure_results(results_of(out / "hw2" / "results.json"), "does not exist")


def test_private_folders_get_their_modes_back_when_the_last_grading_ends(tmp_path):
    from autograder import private_dirs

    folders = [tmp_path / "reference", tmp_path / "build", tmp_path / "already_private"]
    for folder, mode in zip(folders, (0o755, 0o775, 0o700)):
        folder.mkdir()
        folder.chmod(mode)
    books = tmp_path / "books"
    books.mkdir(mode=0o700)

    def modes() -> list[str]:
        return [oct(stat.S_IMODE(f.stat().st_mode)) for f in folders]

    first = private_dirs.locked(folders, books)
    second = private_dirs.locked(folders, books)
    first.__enter__()
    assert modes() == ["0o750", "0o770", "0o700"], "no permission of other while a grading runs"
    second.__enter__()
    first.__exit__(None, None, None)
    assert modes() == ["0o750", "0o770", "0o700"], "kept while another grading runs"
    second.__exit__(None, None, None)
    assert modes() == ["0o755", "0o775", "0o700"], "given back when the last grading ends"
    assert not (books / private_dirs.MODES).exists(), (
        "the recorded modes are removed with the last grading"
    )


@pytest.mark.grading
# the modes come back when the last grading on the machine ends: a grading beside this one (another
# xdist worker's batch) would keep them locked past its end, so it runs in bin/test's second pass
@pytest.mark.exclusive
@pytest.mark.skipif(
    os.geteuid() != 0, reason="only grading as root locks the installation's private folders"
)
def test_grading_as_root_gives_the_repository_its_modes_back(tmp_path, monkeypatch, capsys):
    """Grading as root makes build/, docs/, tests/, assignments/ and the other private folders
    unreadable to the student while it runs (the notebook looks), and gives them back their modes
    after, rather than leave them at 0750 for good."""
    from autograder.judge import PRIVATE_DIRS, REPO

    build_root = tmp_path / "build"
    _zip_with_tests(build_root / "where_mlps_fail" / "autograder.zip", {"q1.py": TINY_TEST})
    paths = [REPO / d for d in PRIVATE_DIRS if (REPO / d).exists() and not (REPO / d).is_symlink()]
    original = {p: stat.S_IMODE(p.lstat().st_mode) for p in paths}
    try:
        for path, mode in original.items():  # readable by others, as a checkout usually is
            path.chmod(mode | 0o004 | (0o001 if path.is_dir() else 0))
        before = {str(p): stat.S_IMODE(p.lstat().st_mode) for p in paths}
        look = (
            f"import os\nanswer = 42 if not os.access({str(REPO / 'reference')!r}, os.R_OK) else 0"
        )
        submission = notebook(tmp_path / "hw.ipynb", look)
        code = _grade_command(
            monkeypatch,
            build_root,
            "where_mlps_fail",
            str(submission),
            "--out",
            str(tmp_path / "out"),
        )
        capsys.readouterr()
        after = {str(p): stat.S_IMODE(p.lstat().st_mode) for p in paths}
    finally:
        for path, mode in original.items():
            path.chmod(mode)
    assert code == 0 and read_csv(tmp_path / "out" / "scores.csv")[1][1] == "1", (
        "the student should not have been able to read reference/ while graded"
    )
    assert after == before, f"modes after the grading: { {p: oct(m) for p, m in after.items()} }"


def test_the_build_checks_that_every_tests_imports_resolve(unbuilt_where_mlps_fail, tmp_path):
    from autograder.build import BuildError, check_imports

    check_imports(unbuilt_where_mlps_fail.autograder_zip)  # the real zip's imports all resolve
    broken = _broken_copy(
        unbuilt_where_mlps_fail.autograder_zip,
        tmp_path / "broken.zip",
        "q2_3.py",
        "import check_q2_3",
        "import check_q2_3, check_nothing",
    )
    with pytest.raises(BuildError) as info:
        check_imports(broken)
    assert "q2_3.py: autograder.checks.where_mlps_fail has no check_nothing" in str(info.value), (
        str(info.value)
    )


def test_where_a_failure_was_raised_tells_the_graders_fault_from_the_students():
    from autograder.checks import expect_tensor
    from autograder.grading_errors import fault_of
    from autograder.session import StudentError
    from reference.where_mlps_fail import slide

    def raised(call) -> BaseException:
        try:
            call()
        except Exception as err:  # noqa: BLE001
            return err
        raise AssertionError("expected an exception")

    actual = {
        "reference": fault_of(raised(lambda: slide(None, 1))),
        "import": fault_of(raised(lambda: __import__("autograder.checks.no_such_module"))),
        "check": fault_of(raised(lambda: expect_tensor("x", "text", (2,)))),
        "student": fault_of(StudentError("ModuleNotFoundError: No module named 'x'")),
    }
    expected = {
        "reference": "the reference solution raised TypeError: x must be a torch.Tensor, got "
                     "NoneType",
        "import": "an import failed (ModuleNotFoundError: No module named "
                  "'autograder.checks.no_such_module')",
        "check": None,
        "student": None,
    }
    assert actual == expected, actual


@pytest.mark.grading
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root, to hide the installed data in a mount namespace of its own (unshare)",
)
def test_data_the_grading_environment_lacks_is_a_grading_error(tmp_path):
    """With no Fashion-MNIST to be had (the installed copy hidden, no network), the notebook's own
    cells could not load it and every answer would be missing: a zero for the solution. The judge
    asks first."""
    build_root = tmp_path / "build"
    zip_path = _zip_with_tests(
        build_root / "where_mlps_fail" / "autograder.zip", {"q1.py": TINY_TEST}
    )
    with zipfile.ZipFile(zip_path, "a") as z:
        z.writestr(
            "files/fashion.py",
            "from autograder.data import fashion_mnist\ntest_set = fashion_mnist(False)\n",
        )
    submission = notebook(tmp_path / "hw.ipynb", "from fashion import test_set\nanswer = 42")
    out, empty = tmp_path / "out", tmp_path / "empty"
    empty.mkdir()
    script = (
        "import sys\nfrom pathlib import Path\nfrom autograder import build\n"
        f"build.BUILD = Path({str(build_root)!r})\nfrom autograder.cli import main\n"
        f"sys.exit(main(['grade', 'where_mlps_fail', {str(submission)!r}, '--out', "
        f"{str(out)!r}]))\n"
    )
    hide = "mount -t tmpfs none /usr/share/datasets 2>/dev/null || true; exec \"$@\""
    env = {k: v for k, v in os.environ.items() if k not in ("FASHION_MNIST_DIR", "MNIST_NPZ")}
    env.update(VISION_AUTOGRADER_CACHE=str(empty), HOME=str(empty))
    proc = subprocess.run(
        ["unshare", "--mount", "--net", "sh", "-c", hide, "sh", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 3, (
        f"exit {proc.returncode}: {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    )
    assert_grading_error(
        results_of(out / "hw" / "results.json"),
        "the data this assignment reads is missing here: autograder.data.fashion_mnist_root() "
        "found no data (DataNotFoundError: Fashion-MNIST was not found.",
    )
