"""Unit tests for ``autograder/grade.py``: results parsing, the table, the CSV, and ungradable submissions.

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
import zipfile
from pathlib import Path

import pytest

from autograder.grade import (
    GradeResult,
    failure_results,
    format_table,
    grade_many,
    grade_one,
    question_scores,
    submission_label,
    write_csv,
)

#: Otter's Gradescope results as ``otter run`` writes them: the public summary
#: (no max_score, or 0 points), hidden-test entries, a question split over
#: several test cases (" - 1", " - 2"), and an entry with a null score.
OTTER_RESULTS = {
    "score": 4.5,
    "output": "",
    "tests": [
        {"name": "Public Tests", "visibility": "visible", "output": "q1_1 results: All test cases passed!",
         "status": "passed"},
        {"name": "Public Tests", "score": 0, "max_score": 0, "visibility": "visible", "output": "summary"},
        {"name": "q1_1", "score": 2.0, "max_score": 2.0, "visibility": "hidden", "output": "passed"},
        {"name": "q1_4 - 1", "score": 1.0, "max_score": 1.0, "visibility": "hidden", "output": ""},
        {"name": "q1_4 - 2", "score": 0.0, "max_score": 1.5, "visibility": "hidden", "output": "`slide` ..."},
        {"name": "q1_4 - 3", "score": 0.5, "max_score": 0.5, "visibility": "hidden", "output": ""},
        {"name": "q2_1", "score": None, "max_score": 2, "visibility": "hidden", "output": "error"},
        {"name": "q3_6", "score": 1, "max_score": 2, "visibility": "hidden", "output": ""},
    ],
}


def results_of(path: Path) -> dict:
    assert path.is_file(), f"no results file at {path}"
    return json.loads(path.read_text())


def assert_failure_results(results: dict, reason_part: str) -> None:
    """``results`` is a Gradescope results dict for an ungradable submission, naming ``reason_part``."""
    assert results["score"] == 0, f"an ungradable submission should score 0, got {results['score']!r}"
    assert results["tests"] == [], f"an ungradable submission should list no tests, got {results['tests']!r}"
    assert results["output"].startswith("This submission could not be graded: "), \
        f"the output should say the submission could not be graded: {results['output']!r}"
    assert reason_part in results["output"], f"expected {reason_part!r} in the output, got {results['output']!r}"
    assert results["visibility"] == "visible", "the student should see why the submission was not graded"


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
    assert actual == expected, f"questions should keep Otter's order: expected {expected}, got {actual}"


def test_question_scores_returns_floats():
    actual = question_scores({"tests": [{"name": "q5", "score": 1, "max_score": 2}]})
    expected = {"q5": (1.0, 2.0)}
    assert actual == expected, f"expected {expected}, got {actual}"
    assert all(isinstance(v, float) for pair in actual.values() for v in pair), f"scores should be floats: {actual}"


@pytest.mark.parametrize("results", [{}, {"tests": []}, failure_results("x")], ids=["no key", "empty", "failure"])
def test_question_scores_of_results_without_tests_is_empty(results):
    actual = question_scores(results)
    assert actual == {}, f"no tests should give no questions, got {actual}"


# ---------------------------------------------------------------- labels and GradeResult


@pytest.mark.parametrize(
    "name, expected",
    [("alice.ipynb", "alice"), ("bob.v2.zip", "bob.v2"), ("README", "README")],
)
def test_submission_label_drops_the_extension(name, expected):
    actual = submission_label(Path("/subs") / name)
    assert actual == expected, f"submission_label({name!r}): expected {expected!r}, got {actual!r}"


def test_grade_result_total_and_possible():
    result = GradeResult(Path("a.ipynb"), Path("a/results.json"), question_scores(OTTER_RESULTS))
    actual = (result.total, result.possible)
    expected = (4.5, 9.0)
    assert actual == expected, f"(total, possible): expected {expected}, got {actual}"


# ---------------------------------------------------------------- format_table and write_csv


def _results() -> tuple[list[GradeResult], list[str]]:
    full = GradeResult(Path("/subs/solution.ipynb"), Path("r1"), {"q1": (2.0, 2.0), "q2": (1.0, 1.0)})
    partial = GradeResult(Path("/subs/partly_wrong.ipynb"), Path("r2"), {"q1": (0.5, 2.0), "q2": (1.0, 1.0),
                                                                          "q3": (0.0, 3.0)})
    broken = GradeResult(Path("/subs/broken.ipynb"), Path("r3"), {}, "the autograder exited with code 1: boom")
    return [full, partial, broken], ["solution", "partly_wrong", "broken"]


def test_format_table_lists_score_and_lost_points():
    results, _ = _results()
    actual = format_table(results).splitlines()
    expected = [
        "submission    score  lost points on",
        "solution        3/3  -",
        "partly_wrong  1.5/6  q1 (0.5/2), q3 (0/3)",
        "broken            0  not graded: the autograder exited with code 1: boom",
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
        ["broken", "", "", "", "0", "0", "the autograder exited with code 1: boom"],
    ]
    assert actual == expected, f"expected rows {expected}, got {actual}"


# ---------------------------------------------------------------- grade_one / grade_many without otter run


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
    assert str(missing) in actual and "autograder build" in actual, \
        f"the error should name the zip and how to build it: {actual!r}"


def test_grade_one_missing_submission_replaces_a_stale_results_file(dummy_zip, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"score": 31.0, "tests": []}))
    submission = tmp_path / "gone.ipynb"
    actual = grade_one(dummy_zip, submission, out)
    assert actual.error == f"{submission} does not exist or is not a file.", f"unexpected error {actual.error!r}"
    assert actual.scores == {} and actual.total == 0, f"an ungraded submission has no scores: {actual.scores}"
    assert_failure_results(results_of(out / "results.json"), "does not exist")


def test_grade_many_labels_duplicates_and_writes_the_csv(dummy_zip, tmp_path):
    submissions = [tmp_path / "a" / "hw.ipynb", tmp_path / "b" / "hw.ipynb", tmp_path / "c" / "other.zip"]
    out = tmp_path / "graded"
    results = grade_many(dummy_zip, submissions, out, jobs=2, progress=False)
    actual = [r.submission for r in results]
    assert actual == submissions, f"results should come in the submissions' order: {actual}"
    for label in ("hw", "hw-2", "other"):
        assert_failure_results(results_of(out / label / "results.json"), "does not exist")
    actual_rows = read_csv(out / "scores.csv")
    expected_rows = [["submission", "total", "possible", "error"]] + [
        [label, "0", "0", f"{sub} does not exist or is not a file."]
        for label, sub in zip(("hw", "hw-2", "other"), submissions)
    ]
    assert actual_rows == expected_rows, f"expected {expected_rows}, got {actual_rows}"


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
    assert actual.error is not None and "does not exist" in actual.error, f"unexpected error {actual.error!r}"
    assert actual.results_path == out / "results.json", f"results written to {actual.results_path}"
    assert_failure_results(results_of(actual.results_path), "never_uploaded.ipynb does not exist")


@pytest.mark.grading
def test_real_autograder_non_json_notebook_scores_zero(built_where_mlps_fail, not_a_notebook, tmp_path):
    out = tmp_path / "out"
    actual = grade_one(built_where_mlps_fail.autograder_zip, not_a_notebook, out, timeout=120)
    assert actual.error is not None, "a file that is not a notebook should not count as graded"
    # the judge (the default runner) reads the notebook itself and says why it refused it
    assert actual.error.startswith("This submission could not be graded: not_json.ipynb is not a valid notebook"), \
        f"unexpected error {actual.error!r}"
    assert "JSON" in actual.error, f"the reason should say the notebook is not JSON: {actual.error!r}"
    assert actual.scores == {}, f"an ungraded submission has no scores: {actual.scores}"
    assert_failure_results(results_of(actual.results_path), "not appear to be JSON")
    assert (out / "grading.log").is_file(), "the grading process's output should be kept in grading.log"


@pytest.mark.grading
def test_real_autograder_grade_many_reports_every_failure(built_where_mlps_fail, not_a_notebook, tmp_path):
    submissions = [tmp_path / "missing.ipynb", not_a_notebook]
    out = tmp_path / "graded"
    results = grade_many(built_where_mlps_fail.autograder_zip, submissions, out, jobs=2, timeout=120, progress=False)
    actual = [(r.submission, r.error is not None, r.total) for r in results]
    expected = [(submissions[0], True, 0), (submissions[1], True, 0)]
    assert actual == expected, f"each submission should have a row with its error set: {actual}"
    for label in ("missing", "not_json"):
        results_file = results_of(out / label / "results.json")
        assert results_file["score"] == 0, f"{label}: score {results_file['score']!r}"
        assert results_file["output"].startswith("This submission could not be graded: "), \
            f"{label}: the output should give the reason: {results_file['output']!r}"
    rows = read_csv(out / "scores.csv")
    actual_errors = [(row[0], bool(row[-1])) for row in rows[1:]]
    expected_errors = [("missing", True), ("not_json", True)]
    assert actual_errors == expected_errors, f"scores.csv rows: {rows}"
    table = format_table(results)
    assert table.count("not graded:") == 2, f"the table should show both as not graded:\n{table}"
