"""Command line: ``python -m autograder build|grade|demo|train|student-package``.

* ``build NAME...`` — student version into ``student_template/NAME/``, the
  autograder zip into ``build/NAME/autograder.zip``.
* ``grade NAME SUBMISSION... [--out DIR] [--jobs N] [--cell-seconds S] [--call-seconds S]
  [--deadline S]
  [--startup-seconds S] [--memory-mb M] [--timeout S] [--runner judge|otter]`` — grade with that zip
  (each submission from a private copy), write each ``results.json`` and ``scores.csv``, print the
  table. The limits are the hardened judge's (CPU seconds per cell, per call of a student's function
  and for the student process's start; wall-clock seconds for the whole run; memory); the timeout
  stops a grading from outside (default: the deadline plus 60 s). ``--runner otter`` grades with
  ``otter run`` instead (hidden tests in the student's kernel, no limits: for comparison only).
* ``report OUT`` — write ``OUT/report.html`` for a batch graded earlier (``grade`` writes it
  itself).
* ``compare OLD_OUT NEW_OUT [--csv FILE]`` — every submission whose total or any question's score
  differs
  between two gradings of a batch, with both scores and messages, also as CSV (default
  ``NEW_OUT/compare.csv``); exit status 0 when nothing changed, 1 when something did.
* ``demo`` — the main job: build every assignment, grade its bundled example
  submissions (the solution, the blank student notebook and the examples in
  ``assignments/NAME/examples/``), print the scores.
* ``train where_mlps_fail`` — retrain the lesson's two weight files.
* ``student-package [--out DIR]`` — the wheel students install for their
  notebooks' imports (public tests, layered checks, data loaders), without
  hidden tests or reference solutions (default ``build/student-package/``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autograder import answers_cache
from autograder import build as build_mod
from autograder import compare as compare_mod
from autograder import grade as grade_mod
from autograder import report as report_mod
from autograder.judge_interface import DEFAULT_TIMEOUT
from autograder.outcomes import BatchError
from autograder.scores import format_table
from autograder.student_package import StudentPackageError, build_student_package, student_modules

#: ``grade``'s exit status when the autograder itself failed on a submission (a grading error).
GRADING_ERROR_EXIT = 3


def bundled_examples(name: str) -> list[Path]:
    """The demo's submissions for ``name``: solution, blank student notebook, then
    ``examples/*.ipynb``."""
    built = build_mod.BUILD / name
    examples = sorted((build_mod.ASSIGNMENTS / name / "examples").glob("*.ipynb"))
    return [
        built / "solution.ipynb",
        build_mod.STUDENT_TEMPLATE / name / f"{name}.ipynb",
        *examples,
    ]


#: What a build prints beside its name, where its notebook runs long without printing (the
#: ``when_it_fails`` build is silent for minutes under load, and would look hung).
SLOW_BUILDS = {
    "when_it_fails": "it trains its networks, silently: about a minute on idle cores, a few "
                     "under load"
}


def _build(names: list[str], run_tests: bool) -> int:
    for name in names:
        slow = f"; {SLOW_BUILDS[name]}" if run_tests and name in SLOW_BUILDS else ""
        print(
            f"building {name} (otter assign{'' if run_tests else ', tests not run'}{slow}) ...",
            flush=True,
        )
        built = build_mod.build_assignment(name, run_tests=run_tests)
        print(f"  student version: {built.student_dir.relative_to(build_mod.REPO)}/")
        print(f"  autograder zip:  {built.autograder_zip.relative_to(build_mod.REPO)}")
    return 0


def kept_answers(name: str) -> Path | None:
    """``build/NAME/answers/``, where ``grade`` keeps the assignment's reference values from one
    batch to the next (made mode 0700; each value is recomputed when its reference's code has
    changed, :mod:`autograder.answers_cache`), or ``None`` when it cannot be this user's private
    folder (another user made it): the batch then computes them in a folder of its own."""
    folder = build_mod.BUILD / name / "answers"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder if answers_cache.why_not_private(folder) is None else None


def _grade(
    name: str,
    submissions: list[Path],
    out: Path | None,
    jobs: int,
    timeout: float | None,
    runner: str = "judge",
    limits: dict | None = None,
) -> list:
    zip_path = build_mod.BUILD / name / "autograder.zip"
    if not zip_path.is_file():
        _build([name], run_tests=False)
    out = out or build_mod.BUILD / name / build_mod.GRADED_FOLDER
    results = grade_mod.grade_many(
        zip_path,
        submissions,
        out,
        jobs=jobs,
        timeout=timeout,
        runner=runner,
        answers_dir=kept_answers(name),
        limits=limits,
        assignment=name,
    )
    print(format_table(results))
    for line in _isolation_lines(results):
        print(line)
    print(f"results: {out}/<submission>/results.json; table: {out / 'scores.csv'}")
    print(f"report:  {report_mod.write_report(out, name)}")
    return results


def _isolation_lines(results: list) -> list[str]:
    """How the student code of ``results`` was isolated (their ``extra_data``), one line per mode
    used."""
    from autograder.namespaces import DESCRIPTIONS
    from autograder.results import isolation_of

    modes = set()
    for result in results:
        try:
            modes.add(isolation_of(json.loads(Path(result.results_path).read_text())))
        except (OSError, ValueError):
            continue
    return [f"isolation: {DESCRIPTIONS.get(mode, mode)}" for mode in sorted(modes - {None})]


def _missing(path: Path) -> bool:
    """Whether nothing is at ``path``. A path that cannot be looked at (a folder on it the grading
    user may not enter) is not missing: it is graded, and gets its results file and row saying why
    it could not be read."""
    try:
        path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def _positive(kind: type, unit: str):
    """An argparse type: a positive ``kind`` (float or int), else an error saying what was
    expected."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0 or value == float("inf"):
            whole = "whole " if kind is int else ""
            raise argparse.ArgumentTypeError(
                f"expected a positive {whole}number of {unit}, got {text!r}"
            )
        return value

    return parse


#: The judge's limits as ``grade`` options: (option, Limits field, type, unit, help).
LIMIT_OPTIONS = (
    (
        "--cell-seconds",
        "cell_seconds",
        float,
        "seconds",
        "CPU seconds the student's processes may use per notebook "
        "cell (default 60; a cell blocked or sleeping ends after "
        "4 times as many wall-clock seconds)",
    ),
    (
        "--call-seconds",
        "call_seconds",
        float,
        "seconds",
        "CPU seconds per call of a student's function (default 30; "
        "4 times as many wall-clock seconds at most)",
    ),
    (
        "--startup-seconds",
        "startup_seconds",
        float,
        "seconds",
        "CPU seconds for the student process to start (default 60)",
    ),
    (
        "--deadline",
        "deadline",
        float,
        "seconds",
        "whole-run deadline of one submission; results are written by then (default 540)",
    ),
    (
        "--memory-mb",
        "memory_mb",
        int,
        "megabytes",
        "memory limit of the student's processes (default 3072)",
    ),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="build student versions and autograder zips")
    p.add_argument("names", nargs="*", help="assignments (default: all)")
    p.add_argument(
        "--no-run-tests", action="store_true", help="skip running the tests on the solution"
    )

    p = sub.add_parser(
        "grade",
        help="grade submissions with an assignment's autograder",
        description="Grade submissions with an assignment's autograder. Every submission gets a "
        "results.json and a row in scores.csv; the exit status is 3 when the autograder "
        "itself failed on any (a grading error: its row says 'grading error: ' and the "
        "cause), else 1 when any could not be graded (its row says why), else 0.",
    )
    grade_parser = p
    p.add_argument("name", help="assignment, e.g. where_mlps_fail")
    p.add_argument(
        "submissions",
        nargs="+",
        type=Path,
        help=".ipynb notebooks, Otter export zips, or folders holding one of either (Gradescope's "
        "\"Export Submissions\" gives a folder per student)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default build/NAME/graded); scores.csv is rewritten for this batch, "
             "other "
        "submissions' folders in it are kept",
    )
    p.add_argument(
        "--jobs",
        type=_positive(int, "submissions"),
        default=1,
        help="submissions graded at once (default 1)",
    )
    p.add_argument(
        "--timeout",
        type=_positive(float, "seconds"),
        default=None,
        help="seconds per submission before its grading process is stopped from outside "
        "(default: the deadline plus 60, 600)",
    )
    p.add_argument(
        "--runner",
        choices=grade_mod.RUNNERS,
        default="judge",
        help="judge: hardened, student code in its own process (default); otter: Otter's otter run "
        "(no limits other than --timeout)",
    )
    for option, _, kind, unit, text in LIMIT_OPTIONS:
        p.add_argument(
            option, type=_positive(kind, unit), default=None, help=f"{text}; judge runner only"
        )

    p = sub.add_parser("report", help="write a graded batch's report.html (grade writes it itself)")
    p.add_argument(
        "out", type=Path, help="the batch's output folder (grade --out), holding scores.csv"
    )

    p = sub.add_parser(
        "compare",
        help="list the submissions whose scores changed between two gradings of a batch",
        description="List every submission whose total or any question's score changed between two "
        "gradings of the same batch, with both scores and both messages, and write the "
        "same as CSV. Exit status 0 when nothing changed, 1 when something did, 2 when a "
        "folder holds no graded batch.",
    )
    p.add_argument("old", type=Path, help="the earlier grading's output folder (grade --out)")
    p.add_argument("new", type=Path, help="the later grading's output folder")
    p.add_argument(
        "--csv", type=Path, default=None, help="where to write the CSV (default NEW/compare.csv)"
    )

    p = sub.add_parser("demo", help="build everything and grade the bundled example submissions")
    p.add_argument(
        "--jobs",
        type=_positive(int, "submissions"),
        default=2,
        help="submissions graded at once (default 2)",
    )

    p = sub.add_parser("train", help="retrain an assignment's committed weight files")
    p.add_argument("name", choices=["where_mlps_fail"])

    p = sub.add_parser(
        "student-package",
        help="build the wheel students install: public tests and data loaders, "
        "no hidden tests, no reference solutions",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=build_mod.BUILD / "student-package",
        help="folder for the wheel (default build/student-package)",
    )

    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            return _build(args.names or build_mod.available(), not args.no_run_tests)
        if args.command == "grade":
            limits = {
                field: getattr(args, field)
                for _, field, _, _, _ in LIMIT_OPTIONS
                if getattr(args, field) is not None
            } or None
            try:
                grade_mod.judge_limits(limits, args.timeout, args.runner)
            except ValueError as err:
                grade_parser.error(str(err))
            unmatched = [
                str(s) for s in args.submissions if _missing(s) and any(c in str(s) for c in "*?[")
            ]
            # the shell passes a pattern that matches nothing on as it is: a typo, not a submission
            if unmatched:
                grade_parser.error(
                    f"no file matches {', '.join(unmatched)} (the shell passed the pattern on as "
                    f"it was); "
                    "nothing was graded or written"
                )
            build_mod.master_notebook(args.name)
            results = _grade(
                args.name, args.submissions, args.out, args.jobs, args.timeout, args.runner, limits
            )
            if any(r.grading_error for r in results):
                return GRADING_ERROR_EXIT
            return 0 if all(r.error is None for r in results) else 1
        if args.command == "report":
            print(f"report: {report_mod.write_report(args.out)}")
            return 0
        if args.command == "compare":
            changes = compare_mod.compare(args.old, args.new)
            table = args.csv or args.new / compare_mod.CSV_NAME
            compare_mod.write_csv(changes, table)
            print(compare_mod.format_changes(changes, args.old, args.new))
            print(f"table: {table}")
            return 1 if changes else 0
        if args.command == "demo":
            names = build_mod.available()
            _build(names, run_tests=True)
            for name in names:
                print(f"\n== {name}: grading the bundled example submissions ==", flush=True)
                _grade(name, bundled_examples(name), None, args.jobs, DEFAULT_TIMEOUT)
            return 0
        if args.command == "train":
            from autograder.training import train_where_mlps_fail

            report = train_where_mlps_fail(build_mod.ASSIGNMENTS / args.name)
            print(report)
            return 0
        if args.command == "student-package":
            wheel = build_student_package(args.out)
            print(f"student package: {wheel}")
            print(
                f"  install where students run their notebooks, with Jupyter (PyTorch's CPU "
                f"wheels, under 1 GB; "
                f"PyPI's default CUDA ones are about 6 GB):\n    pip install notebook {wheel.name} "
                "--extra-index-url https://download.pytorch.org/whl/cpu"
            )
            print(
                f"  holds {', '.join(student_modules())} (autograder.checks: the layered checks "
                f"only); "
                "no hidden tests, no reference/"
            )
            return 0
    except (build_mod.BuildError, StudentPackageError, BatchError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
