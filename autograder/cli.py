"""Command line: ``python -m autograder build|grade|demo|train``.

* ``build NAME...`` — student version into ``student_template/NAME/``, the
  autograder zip into ``build/NAME/autograder.zip``.
* ``grade NAME SUBMISSION... [--out DIR] [--jobs N]`` — grade with that zip,
  write each ``results.json`` and ``scores.csv``, print the table.
* ``demo`` — the main job: build every assignment, grade its bundled example
  submissions (the solution, the blank student notebook and the examples in
  ``assignments/NAME/examples/``), print the scores.
* ``train where_mlps_fail`` — retrain the lesson's two weight files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder import build as build_mod
from autograder import grade as grade_mod


def bundled_examples(name: str) -> list[Path]:
    """The demo's submissions for ``name``: solution, blank student notebook, then ``examples/*.ipynb``."""
    built = build_mod.BUILD / name
    examples = sorted((build_mod.ASSIGNMENTS / name / "examples").glob("*.ipynb"))
    return [built / "solution.ipynb", build_mod.STUDENT_TEMPLATE / name / f"{name}.ipynb", *examples]


def _build(names: list[str], run_tests: bool) -> int:
    for name in names:
        print(f"building {name} (otter assign{'' if run_tests else ', tests not run'}) ...", flush=True)
        built = build_mod.build_assignment(name, run_tests=run_tests)
        print(f"  student version: {built.student_dir.relative_to(build_mod.REPO)}/")
        print(f"  autograder zip:  {built.autograder_zip.relative_to(build_mod.REPO)}")
    return 0


def _grade(name: str, submissions: list[Path], out: Path | None, jobs: int, timeout: float,
           runner: str = "judge") -> list:
    zip_path = build_mod.BUILD / name / "autograder.zip"
    if not zip_path.is_file():
        _build([name], run_tests=False)
    out = out or build_mod.BUILD / name / "graded"
    results = grade_mod.grade_many(zip_path, submissions, out, jobs=jobs, timeout=timeout, runner=runner)
    print(grade_mod.format_table(results))
    print(f"results: {out}/<submission>/results.json; table: {out / 'scores.csv'}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="build student versions and autograder zips")
    p.add_argument("names", nargs="*", help="assignments (default: all)")
    p.add_argument("--no-run-tests", action="store_true", help="skip running the tests on the solution")

    p = sub.add_parser("grade", help="grade submissions with an assignment's autograder")
    p.add_argument("name", help="assignment, e.g. where_mlps_fail")
    p.add_argument("submissions", nargs="+", type=Path, help=".ipynb notebooks or Otter export zips")
    p.add_argument("--out", type=Path, default=None, help="output folder (default build/NAME/graded)")
    p.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default 1)")
    p.add_argument("--timeout", type=float, default=grade_mod.DEFAULT_TIMEOUT, help="seconds per submission")
    p.add_argument("--runner", choices=grade_mod.RUNNERS, default="judge",
                   help="judge: hardened, student code in its own process (default); otter: Otter's otter run")

    p = sub.add_parser("demo", help="build everything and grade the bundled example submissions")
    p.add_argument("--jobs", type=int, default=2)

    p = sub.add_parser("train", help="retrain an assignment's committed weight files")
    p.add_argument("name", choices=["where_mlps_fail"])

    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            return _build(args.names or build_mod.available(), not args.no_run_tests)
        if args.command == "grade":
            build_mod.master_notebook(args.name)
            results = _grade(args.name, args.submissions, args.out, args.jobs, args.timeout, args.runner)
            return 0 if all(r.error is None for r in results) else 1
        if args.command == "demo":
            names = build_mod.available()
            _build(names, run_tests=True)
            for name in names:
                print(f"\n== {name}: grading the bundled example submissions ==", flush=True)
                _grade(name, bundled_examples(name), None, args.jobs, grade_mod.DEFAULT_TIMEOUT)
            return 0
        if args.command == "train":
            from autograder.training import train_where_mlps_fail

            report = train_where_mlps_fail(build_mod.ASSIGNMENTS / args.name)
            print(report)
            return 0
    except build_mod.BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
