"""Refresh the committed generated files: ``python -m tests.refresh``.

Rebuilds every assignment (or those named: ``python -m tests.refresh NAME...``) (which rewrites
``student_template/``) and rewrites the bundled example submissions of ``where_mlps_fail`` from its
solution and the catalogue. Review the diff, then commit.
"""


from autograder.build import ASSIGNMENTS, available, build_assignment, normalise_notebook
from tests.fixtures.submissions import apply
from tests.fixtures.where_mlps_fail.catalogue import EXAMPLES, example_variant


def main(names: list[str] | None = None) -> None:
    for name in names or available():
        built = build_assignment(name, run_tests=True)
        print(f"built {name}: {built.student_dir}")
        if name == "where_mlps_fail":
            for example in EXAMPLES:
                out = apply(
                    built.solution,
                    example_variant(example),
                    ASSIGNMENTS / name / "examples" / f"{example}.ipynb",
                )
                normalise_notebook(out)
                print(f"wrote {out}")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m tests.refresh",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"assignments to rebuild (default: all of {', '.join(available())})",
    )
    names = parser.parse_args().names
    unknown = [n for n in names if n not in available()]
    if unknown:
        parser.error(
            f"no assignment {', '.join(unknown)}: expected one of {', '.join(available())}"
        )
    main(names)
