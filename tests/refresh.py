"""Refresh the committed generated files: ``python -m tests.refresh``.

Rebuilds every assignment (or those named: ``python -m tests.refresh NAME...``) (which rewrites ``student_template/``) and rewrites
the bundled example submissions of ``where_mlps_fail`` from its solution and
the catalogue. Review the diff, then commit.
"""

from pathlib import Path

from autograder.build import ASSIGNMENTS, available, build_assignment, normalise_notebook
from tests.fixtures.submissions import apply
from tests.fixtures.where_mlps_fail.catalogue import EXAMPLES, example_variant


def main(names: list[str] | None = None) -> None:
    for name in names or available():
        built = build_assignment(name, run_tests=True)
        print(f"built {name}: {built.student_dir}")
        if name == "where_mlps_fail":
            for example in EXAMPLES:
                out = apply(built.solution, example_variant(example), ASSIGNMENTS / name / "examples" / f"{example}.ipynb")
                normalise_notebook(out)
                print(f"wrote {out}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
