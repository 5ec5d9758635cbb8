"""Grading errors: the autograder's own faults, told apart from the student's work.

A hidden test that cannot import its check, a reference solution that
raises, data the grading environment lacks: none of these is the student's
doing, and none may cost the student points. :func:`fault_of` decides, from
where an exception was raised (its traceback's frames, never its message),
whether a test's failure is the grader's; :func:`unresolved_imports` finds,
before any student code runs, the imports of an autograder's tests that do
not resolve in this environment (the judge and the build both ask it), and
:func:`missing_data` the datasets the assignment reads that cannot be found.

A grading error's results (:func:`grading_error_results`) are valid
Gradescope results scored 0, with the cause in ``extra_data.grading_error``
(stored by Gradescope, never shown to the student) and an ``output`` telling
the student that the fault is not theirs and to contact staff.
"""

from __future__ import annotations

import ast
import functools
import importlib
import sys
import traceback
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
REFERENCE = PACKAGE.parent / "reference"
#: Modules of the grader that load data or compute expected values: an exception raised in them (or
#: in what they call) is the grader's, whatever the student submitted.
GRADER_MODULES = frozenset(
    str(PACKAGE / f"{name}.py")
    for name in ("data", "mnist_files", "mnist_data", "answers_cache", "training")
)
#: The session's file, whose ``RemoteCallable._call`` raises what the student's code raised in the
#: student process.
SESSION = str(PACKAGE / "session.py")
CHECKS = str(PACKAGE / "checks")
#: The key of Gradescope's ``extra_data`` (stored, never shown to students) that holds a grading
#: error's cause.
KEY = "grading_error"
#: How a grading error's row begins in ``grade``'s table and in scores.csv's error column.
LABEL = "grading error"


class GradingError(Exception):
    """The grader, not the submission, failed; the message names the cause, for staff."""


def _error_line(err: BaseException) -> str:
    message = " ".join(str(err).split())[:300]
    return f"{type(err).__name__}: {message}" if message else type(err).__name__


def _of_the_student(
    err: BaseException, kinds: tuple[str, ...] = ("StudentError", "StudentFailure")
) -> bool:
    """Whether ``err`` is one of the judge's exceptions for what the student's process did (by name:
    this module does not import the judge's, which import torch)."""
    return any(
        k.__name__ in kinds and k.__module__ in ("autograder.session", "autograder.student_process")
        for k in type(err).__mro__
    )


def fault_of(err: BaseException) -> str | None:
    """Why ``err``, raised while a test of the autograder ran, is the grader's fault; ``None`` if it
    is not.

    Decided by where it was raised, walking the traceback from the innermost frame out: in a call
    into the student's process (``RemoteCallable._call``), or in a check's own code
    (``autograder/checks``, which judges the student's values) it is the student's; in the import
    machinery (a test or a check importing a module), in the reference solutions (``reference/``) or
    in the modules that load data and cache expected values (:data:`GRADER_MODULES`), the grader's.
    An ``ImportError`` raised anywhere else in the test is the grader's.
    """
    if _of_the_student(err):
        return None
    for frame, _ in reversed(list(traceback.walk_tb(err.__traceback__))):
        path = frame.f_code.co_filename
        if path == SESSION and frame.f_code.co_name == "_call":
            return None
        if path.startswith("<frozen importlib"):
            return f"an import failed ({_error_line(err)})"
        if path.startswith(str(REFERENCE) + "/"):
            return f"the reference solution raised {_error_line(err)}"
        if path in GRADER_MODULES:
            return f"the grader's data or expected values could not be loaded ({_error_line(err)})"
        if path.startswith(CHECKS + "/"):
            break
    if isinstance(err, ImportError):
        return f"an import failed ({_error_line(err)})"
    return None


def student_message(err: BaseException) -> str:
    """What a failed test shows: the failure's own message, never a line of the test's source
    (Otter's ``Error at line 16 in test q1_1:`` quoted the hidden test)."""
    if isinstance(err, AssertionError) and str(err).strip():
        return str(err).strip()
    if _of_the_student(err, ("StudentError",)):
        return f"Your code raised {err}"
    if _of_the_student(err, ("StudentFailure",)):
        return f"Your code could not be run: {err}"
    return _error_line(err)


def grading_error_results(cause: str, seconds: float = 0.0) -> dict:
    """Gradescope results for a submission the grader failed on: 0 points, not the student's fault.
    The cause (which may name the grader's files and modules) is kept for staff only, in
    ``extra_data``."""
    return {
        "score": 0.0,
        "execution_time": round(seconds, 3),
        "output": (
            "This submission was not graded: the autograder itself failed, which is not a fault of "
            "your "
            "work, and the score of 0 is not your grade. Please tell your course staff: they will "
            "fix the "
            "autograder and grade your submission again (the cause is recorded for them)."
        ),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {KEY: cause},
        "tests": [],
    }


def cause_of(results: dict) -> str | None:
    """The grading error's cause recorded in ``results`` (:func:`grading_error_results`), else
    ``None``."""
    extra = results.get("extra_data") if isinstance(results, dict) else None
    cause = extra.get(KEY) if isinstance(extra, dict) else None
    return str(cause) if cause is not None else None


@functools.cache
def judged_test_file() -> type:
    """Otter's ``ExceptionTestFile``, whose failures say only the failure's own message
    (:func:`student_message`) and which keeps, in ``grading_errors``, the cause of each failure that
    is the grader's fault (:func:`fault_of`). Otter 7 builds each failure's message in
    ``_generate_error_message``, called once per failed test case from ``run``."""
    from otter.test_files.exception_test import ExceptionTestFile

    class JudgedTestFile(ExceptionTestFile):
        def run(self, global_environment) -> None:
            self.grading_errors = []
            super().run(global_environment)

        def _generate_error_message(self, excp: Exception, context: int = 0) -> str:
            cause = fault_of(excp)
            if cause is not None:
                self.grading_errors.append(cause)
                return "Not graded: the autograder failed on this test (not a fault of your work)."
            return student_message(excp)

    return JudgedTestFile


# ------------------------------------------------------------------ imports that must resolve


def _imports(source: str) -> list[tuple[str, tuple[str, ...]]]:
    """``(module, names)`` for each absolute import in ``source`` (``import a.b`` gives ``("a.b",
    ())``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(
                (node.module, tuple(alias.name for alias in node.names if alias.name != "*"))
            )
    return found


def _resolve(module: str, names: tuple[str, ...]) -> tuple[str | None, object]:
    """Why ``from module import names`` fails here (``None``: it does not), and the module
    imported."""
    try:
        imported = importlib.import_module(module)
    except BaseException as err:  # noqa: BLE001 - a module that fails to import in any way
        return f"cannot import {module} ({_error_line(err)})", None
    for name in names:
        if not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except BaseException:  # noqa: BLE001 - as above: any failure means no such name
                return f"{module} has no {name}", imported
    return None, imported


def _ours(imported: object) -> Path | None:
    """The source file of ``imported`` when it is one of the grader's modules (``autograder``,
    ``reference``)."""
    path = getattr(imported, "__file__", None)
    if not path:
        return None
    path = Path(path).resolve()
    return (
        path
        if path.suffix == ".py" and (PACKAGE in path.parents or REFERENCE in path.parents)
        else None
    )


def unresolved_imports(tests: Path) -> list[str]:
    """One line per import of the test files in ``tests`` (Otter's ``tests/*.py``) that does not
    resolve in this interpreter, naming the test file; for a module of the grader's own that a test
    imports (a check), the imports in its source (the reference solution it imports inside a
    function) too."""
    return scan_imports(tests)[0]


#: The grader's data modules, and how each finds its data without a notebook: ``{module: (function,
#: arguments)}`` (``autograder.mnist_data`` reads the file ``autograder.mnist_files`` finds).
DATA_FINDERS = {
    "autograder.data": ("fashion_mnist_root", {}),
    "autograder.mnist_data": ("find_mnist", {}),
    "autograder.mnist_files": ("find_mnist", {}),
}


def missing_data(autograder: Path, imported: list[str] | None = None) -> list[str]:
    """Why each dataset the assignment reads is not to be had here (one line each; empty when all
    are): the data modules (:data:`DATA_FINDERS`) that its support files (``files/*.py``), its
    tests, or the checks and references those import name, each asked to find its data as the
    notebook and the reference will. ``imported``: the modules its tests import, when
    :func:`scan_imports` has already listed them."""
    if imported is None:
        imported = scan_imports(Path(autograder) / "tests")[1]
    wanted: set[str] = set(imported)
    for support in sorted((Path(autograder) / "files").glob("*.py")):
        try:
            wanted.update(module for module, _ in _imports(support.read_text(encoding="utf-8")))
        except (OSError, SyntaxError, ValueError):
            continue
    problems = []
    for module in sorted(wanted & set(DATA_FINDERS)):
        function, kwargs = DATA_FINDERS[module]
        try:
            getattr(importlib.import_module(module), function)(**kwargs)
        except Exception as err:  # noqa: BLE001 - not found, not readable, a failed download...
            problems.append(f"{module}.{function}() found no data ({_error_line(err)})")
    return problems


def scan_imports(tests: Path) -> tuple[list[str], list[str]]:
    """:func:`unresolved_imports`'s lines, and every module the tests import or their grader's
    modules do. Each of the grader's modules is parsed once, however many tests import from it."""
    problems: list[str] = []
    seen: dict[tuple[str, tuple[str, ...]], str | None] = {}
    parsed: dict[Path, list[tuple[str, tuple[str, ...]]]] = {}
    for test in sorted(Path(tests).glob("*.py")):
        try:
            wanted = _imports(test.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError) as err:
            problems.append(f"{test.name}: cannot be read ({_error_line(err)})")
            continue
        for module, names in wanted:
            if (module, names) not in seen:
                problem, imported = _resolve(module, names)
                source = _ours(imported)
                if problem is None and source is not None:
                    if source not in parsed:
                        parsed[source] = _imports(source.read_text(encoding="utf-8"))
                    for inner in parsed[source]:
                        if inner not in seen:
                            seen[inner] = _resolve(*inner)[0]
                        problem = problem or seen[inner]
                seen[(module, names)] = problem
            if seen[(module, names)] is not None:
                problems.append(f"{test.name}: {seen[(module, names)]}")
    return problems, sorted({module for module, _ in seen})


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.grading_errors TESTS_FOLDER``: print each import of the tests that
    does not resolve here; exit 1 if any."""
    args = sys.argv[1:] if argv is None else argv
    problems = unresolved_imports(Path(args[0]))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
