"""Grade submissions with an assignment's autograder zip.

Two runners: ``"judge"`` (the default), the hardened grader of
:mod:`autograder.judge`, where student code runs in a process of its own and
never touches the hidden tests; and ``"otter"``, Otter's own ``otter run``,
kept as the peer to compare with. Every submission's student code runs in a
process of its own, so one that crashes, hangs or exits cannot take the others
down; in a batch, each worker's judge grades one submission after another
(:mod:`autograder.judge_pool`), and one stopped by its timeout is replaced. Nothing is
lost: a submission Otter could not grade still gets a ``results.json`` in
Gradescope's format, scored 0, whose ``output`` says why.

Outputs, under ``out_dir``:

* ``<submission name>/results.json`` — Otter's Gradescope results;
* ``scores.csv`` — one row per submission, one column per question;
* the same table printed by :func:`autograder.scores.format_table`.

Each submission's files are found, staged and protected by :mod:`autograder.staging`.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, fields
from pathlib import Path

from autograder import warm_judge
from autograder.judge_interface import DEFAULT_TIMEOUT, Limits
from autograder.judge_pool import JudgePool, JudgeServer, job, stop_politely
from autograder.namespaces import SANDBOX_USER_MODE, isolation_mode
from autograder.results import (
    NOT_GRADED,
    failure_results,
    limits_of,
    question_scores,
    with_limits,
)
from autograder.scores import GradeResult, write_csv
from autograder.staging import (
    batch_labels,
    collect_outputs,
    file_to_grade,
    protect_inputs,
    restore_modes,
    stage_submission,
)

#: Seconds the judge process needs beyond its whole-run deadline (importing
#: torch and Otter, stopping the student process, writing the results): a
#: submission's timeout is the judge's deadline plus this (540 + 60 = 600).
JUDGE_MARGIN = 60.0
#: The least margin accepted when both a timeout and limits are given: a
#: judge stopped from outside before its deadline loses everything graded.
MIN_JUDGE_MARGIN = 10.0
RUNNERS = ("judge", "otter")


def _command(runner: str, autograder_zip: Path, submission: Path, out_dir: Path) -> list[str]:
    # the submission's path is made absolute, not resolved: a symbolic link must reach the judge as
    # a link
    if runner == "judge":
        return [
            sys.executable,
            "-m",
            "autograder.judge",
            str(autograder_zip.resolve()),
            str(submission.absolute()),
            str((out_dir / "results.json").resolve()),
        ]
    if runner == "otter":
        return [
            sys.executable,
            "-m",
            "otter",
            "run",
            "-a",
            str(autograder_zip.resolve()),
            "-o",
            str(out_dir.resolve()),
            str(submission.absolute()),
        ]
    raise ValueError(f"runner must be one of {RUNNERS}, not {runner!r}")


def judge_limits(
    limits: Limits | Mapping[str, float] | None = None,
    timeout: float | None = None,
    runner: str = "judge",
) -> tuple[Limits | None, float]:
    """Check a grading's limits and timeout and make them agree: ``(limits for the judge, timeout in
    seconds)``.

    ``limits`` is a :class:`autograder.judge.Limits` or a mapping of its
    fields (``cell_seconds``, ``call_seconds``, ``startup_seconds``,
    ``deadline``: seconds; ``memory_mb``: megabytes). ``timeout`` (seconds)
    stops the grading process from outside. The judge writes its results at
    its deadline, so the timeout must leave it time to do so:

    * neither given: the judge's defaults (deadline 540 s) and 600 s;
    * limits only: timeout = ``deadline`` + :data:`JUDGE_MARGIN`;
    * timeout only: the judge's deadline lowered to fit, to the default or
      ``timeout`` - :data:`JUDGE_MARGIN` (at least half the timeout);
    * both: the timeout must be at least ``deadline`` + :data:`MIN_JUDGE_MARGIN`.

    Returns ``None`` for the limits when they are the judge's defaults.

    Raises:
        ValueError: a limit or timeout that is not a positive number, an
            unknown limit name, a timeout too short for the deadline, or
            limits with the ``"otter"`` runner (``otter run`` has no cell,
            call or memory limits; only the timeout applies).
    """
    if runner not in RUNNERS:
        raise ValueError(f"runner must be one of {RUNNERS}, not {runner!r}")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if limits is None and (runner == "otter" or timeout is None):
        return None, float(timeout or DEFAULT_TIMEOUT)
    if isinstance(limits, Mapping):
        names = [f.name for f in fields(Limits)]
        unknown = [k for k in limits if k not in names]
        if unknown:
            raise ValueError(f"unknown limit(s) {unknown}: the judge's limits are {names}")
        limits = Limits(**limits)
    elif limits is not None and not isinstance(limits, Limits):
        raise ValueError(
            f"limits must be an autograder.judge.Limits or a dict of its fields, not "
            f"{type(limits).__name__}"
        )
    if runner == "otter":
        if limits is not None:
            raise ValueError(
                "limits apply to the judge runner only: `otter run` has no per-cell, per-call or "
                "memory "
                "limits; use only the timeout with it, or the judge runner"
            )
        return None, float(timeout or DEFAULT_TIMEOUT)
    if limits is None:
        deadline = min(Limits().deadline, max(timeout - JUDGE_MARGIN, timeout / 2))
        limits = Limits(deadline=deadline)
    elif timeout is None:
        timeout = limits.deadline + JUDGE_MARGIN
    elif timeout < limits.deadline + MIN_JUDGE_MARGIN:
        raise ValueError(
            f"timeout ({timeout:g} s) must be at least the judge's deadline ({limits.deadline:g} "
            f"s) plus "
            f"{MIN_JUDGE_MARGIN:g} s, so that the judge writes its results before it is stopped; "
            "raise the timeout, lower the deadline, or leave the timeout out"
        )
    return (None if limits == Limits() else limits), float(timeout)


def _limit_flags(limits: Limits | None) -> list[str]:
    """``python -m autograder.judge`` options for ``limits`` (none for the defaults)."""
    if limits is None:
        return []
    return [
        f"--{f.name.replace('_', '-')}={int(value) if f.name == 'memory_mb' else float(value)!r}"
        for f in fields(limits)
        for value in [getattr(limits, f.name)]
    ]


class TimedOut(Exception):
    """A grading stopped at ``grade``'s timeout before it wrote results: the submission is not
    graded, and the results list the deadline among its limits."""


def _run_grading(
    runner: str,
    autograder_zip: Path,
    staged: Path,
    original_name: str,
    out_dir: Path,
    scratch: Path,
    limits: Limits | None,
    timeout: float,
    threads: int | None,
    judge: JudgeServer | None = None,
) -> str | None:
    """Run the grading process on the staged copy in ``scratch`` (``judge``'s next job when given,
    else a process of its own); its files go to ``out_dir``. Why it failed, or ``None``.

    Raises:
        TimedOut: stopped at ``timeout`` before it wrote any results.
    """
    produced = scratch / "out"
    produced.mkdir(mode=0o700)
    try:
        if judge is not None:
            log = scratch / "judge.log"
            code = judge.grade(
                job(
                    autograder_zip,
                    staged,
                    produced / "results.json",
                    log,
                    scratch,
                    None if limits is None else asdict(limits),
                ),
                timeout,
            )
            output = log.read_text(errors="replace")[-400_000:] if log.is_file() else ""
        else:
            command = _command(runner, autograder_zip, staged, produced) + _limit_flags(limits)
            env = grading_env(threads, PWD=str(scratch))
            request, cwd = None, scratch
            if runner == "judge":  # one import of torch for the judge and the student's template
                command, env, request, cwd = warm_judge.launch(
                    "autograder.judge", command[3:], env, scratch
                )
            proc = _run_stopping_politely(command, cwd=cwd, timeout=timeout, env=env, input=request)
            code, output = proc.returncode, proc.stdout[-200_000:] + "\n" + proc.stderr[-200_000:]
    except subprocess.TimeoutExpired:
        written = _graded_results(produced / "results.json")
        if written is None:
            raise TimedOut(
                f"grading took longer than {timeout:.0f} seconds and was stopped."
            ) from None
        # the judge writes the results before it removes what the submission left, which may take
        # long (a million folders): results written before this timeout are kept
        collect_outputs(produced, out_dir, staged.name, original_name)
        stopped = (
            f"The grading was stopped after {timeout:.0f} seconds while it removed what the "
            "submission left; its results had been written."
        )
        written["output"] = f"{written.get('output') or ''}\n{stopped}".strip()
        with_limits(written, [*limits_of(written), ("deadline", stopped)])
        (out_dir / "results.json").write_text(json.dumps(written, indent=2))
        (out_dir / "grading.log").write_text(
            f"stopped after {timeout:.0f} seconds, after writing its results\n"
        )
        return None
    (out_dir / "grading.log").write_text(output)
    collect_outputs(produced, out_dir, staged.name, original_name)
    if code != 0 or not (out_dir / "results.json").is_file():
        tail = output.strip().splitlines()[-1:] or ["no output"]
        # the judge writes results for whatever a submission does: one that ended without them
        # failed itself
        from autograder.grading_errors import GradingError

        raise GradingError(f"the autograder exited with code {code}: {tail[0]}")
    return None


def grading_env(threads: int | None, **extra: str) -> dict[str, str]:
    """The grading process's environment: this one's, with ``extra``, and ``threads`` (default 1)
    BLAS/OpenMP threads.

    One thread wherever grading computes (the student process has one whatever this says): results
    and timing do not depend on the core count, and threads do not spin against each other on busy
    cores (many small least-squares solves of inductive_bias ran 10x slower so).
    """
    env = dict(os.environ, MPLBACKEND="Agg", **extra)
    env.pop("OLDPWD", None)
    env.update(
        OMP_NUM_THREADS=str(threads or 1),
        MKL_NUM_THREADS=str(threads or 1),
        OPENBLAS_NUM_THREADS="1",
    )
    return env


def _graded_results(path: Path) -> dict | None:
    """The results in ``path`` if they grade questions (a results dict with tests), else
    ``None``."""
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return (
        results
        if isinstance(results, dict) and isinstance(results.get("tests"), list) and results["tests"]
        else None
    )


def _run_stopping_politely(
    command: list[str], cwd: Path, timeout: float, env: dict, input: str | None = None
) -> subprocess.CompletedProcess:
    """``subprocess.run(command, input=input, capture_output=True, text=True, ...)``, but past
    ``timeout`` (seconds) the process is stopped politely
    (:func:`autograder.judge_pool.stop_politely`: SIGTERM, and SIGKILL only a grace period later),
    where ``subprocess.run`` kills at once, and a judge killed so leaves its working folders behind.

    Raises:
        subprocess.TimeoutExpired: the process ran past ``timeout``.
    """
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_politely(proc, lambda timeout: proc.communicate(timeout=timeout))
            raise
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def grade_one(
    autograder_zip: Path,
    submission: Path,
    out_dir: Path,
    timeout: float | None = None,
    threads: int | None = None,
    runner: str = "judge",
    limits: Limits | Mapping[str, float] | None = None,
    judge: JudgeServer | None = None,
) -> GradeResult:
    """Grade ``submission`` (a ``.ipynb`` or Otter's export ``.zip``) with ``autograder_zip``.

    ``runner`` is ``"judge"`` (hardened, the default) or ``"otter"`` (``otter run``).

    ``limits`` (judge only) are the judge's time and memory limits
    (:class:`autograder.judge.Limits` or a dict of its fields); ``timeout``
    (seconds) stops the grading process from outside. Left out, each follows
    from the other (:func:`judge_limits`): by default a 540 s deadline and a
    600 s timeout.

    The submission is copied first into a private folder (mode 0700) and the
    copy is graded (:func:`stage_submission`), so the original path, which
    may name students, reaches neither the grading process's command line
    nor the student's code. ``threads`` sets the grading process's
    BLAS/OpenMP threads (torch reads ``OMP_NUM_THREADS``; default 1, as the
    judge computes and as the student process runs). ``judge``: with the judge runner, a
    long-lived judge to grade it (:mod:`autograder.judge_pool`; else a judge process of its own).
    Writes ``out_dir/results.json``
    in every case. Never raises for a bad submission; raises
    ``FileNotFoundError`` if ``autograder_zip`` is missing and ``ValueError``
    for bad ``limits`` or ``timeout`` (see :func:`judge_limits`).
    """
    autograder_zip, submission, out_dir = Path(autograder_zip), Path(submission), Path(out_dir)
    limits, timeout = judge_limits(limits, timeout, runner)
    if not autograder_zip.is_file():
        raise FileNotFoundError(
            f"no autograder zip at {autograder_zip}: run `python -m autograder build` first"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    changed = protect_inputs([submission], out_dir)
    try:
        return _grade_one(
            autograder_zip, submission, out_dir, limits, timeout, threads, runner, judge
        )
    finally:
        restore_modes(changed, out_dir)


def _grade_one(
    autograder_zip: Path,
    submission: Path,
    out_dir: Path,
    limits: Limits | None,
    timeout: float,
    threads: int | None,
    runner: str,
    judge: JudgeServer | None = None,
) -> GradeResult:
    from autograder.grading_errors import GradingError, cause_of, grading_error_results

    results_path = out_dir / "results.json"
    results_path.unlink(missing_ok=True)
    started = time.perf_counter()
    limits_hit: list[tuple[str, str]] = []
    try:
        graded, reason = file_to_grade(submission)
    # a folder on its path that the grading user may not enter, a name too long...
    except OSError as err:
        graded, reason = None, f"{submission} could not be read ({err.strerror or err})."
    if graded is not None:
        with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
            try:
                staged = stage_submission(graded, Path(scratch) / "submission")
            except OSError as err:
                reason = f"{graded} could not be copied for grading ({err.strerror or err})."
            else:
                try:
                    reason = _run_grading(
                        runner,
                        autograder_zip,
                        staged,
                        graded.name,
                        out_dir,
                        Path(scratch),
                        limits,
                        timeout,
                        threads,
                        judge,
                    )
                except TimedOut as err:
                    reason, limits_hit = str(err), [("deadline", str(err))]
                except GradingError as err:
                    seconds = time.perf_counter() - started
                    results_path.write_text(
                        json.dumps(grading_error_results(str(err), seconds), indent=2)
                    )
                    return GradeResult(
                        submission, results_path, {}, str(err), seconds, grading_error=True
                    )
    seconds = time.perf_counter() - started
    if reason is not None:
        results = with_limits(failure_results(reason, seconds), limits_hit)
        results_path.write_text(json.dumps(results, indent=2))
        return GradeResult(submission, results_path, {}, reason, seconds)
    results = json.loads(results_path.read_text())
    cause = cause_of(results)
    # the judge's grading error: the grader's fault, never the student's score
    if cause is not None:
        return GradeResult(submission, results_path, {}, cause, seconds, grading_error=True)
    if not results.get("tests"):  # the judge's own "could not be graded" results
        # the table says "not graded: "
        reason = str(results.get("output", "not graded")).removeprefix(NOT_GRADED)
        return GradeResult(submission, results_path, {}, reason, seconds)
    return GradeResult(submission, results_path, question_scores(results), None, seconds)


def grade_many(
    autograder_zip: Path,
    submissions: list[Path],
    out_dir: Path,
    jobs: int = 1,
    timeout: float | None = None,
    progress: bool = True,
    runner: str = "judge",
    answers_dir: Path | None = None,
    limits: Limits | Mapping[str, float] | None = None,
    assignment: str | None = None,
) -> list[GradeResult]:
    """Grade several submissions, ``jobs`` at a time; results in the submissions' order.

    ``assignment``: the assignment the batch is for; an autograder zip whose ``otter_config.json``
    names another (``assignment_name``) grades nothing, and every submission gets a grading error
    saying so.

    Each submission's outputs go to ``out_dir/<label>/``; two submissions
    with the same file name get ``-2``, ``-3`` suffixes (:func:`batch_labels`). Writes
    ``out_dir/scores.csv``.

    With the judge runner, the reference values are computed once per batch:
    the judges share a private cache folder (:mod:`autograder.answers_cache`;
    the first judge to need a value computes and stores it, the others wait
    for it and load it). ``answers_dir`` keeps that folder (mode 0700) for
    later batches; by default it is a temporary folder removed at the end.
    ``otter run`` executes the checks inside the student's kernel, so the
    ``"otter"`` runner gets no cache.

    ``limits`` and ``timeout`` apply to every submission, as in
    :func:`grade_one`; they are checked before any grading starts
    (``ValueError``).

    As root where the kernel makes no namespaces (:data:`namespaces.SANDBOX_USER_MODE`), student
    processes of gradings side by side would share the temporary folders and System V objects of
    one user: the judge runner then grades one submission at a time, and says so.
    """
    judge_limits(limits, timeout, runner)  # bad limits fail here, before any grading
    out_dir = Path(out_dir)
    if jobs > 1 and runner == "judge" and isolation_mode() == SANDBOX_USER_MODE:
        print(
            f"grading one submission at a time, not {jobs}: the kernel makes no namespaces here, "
            "so student processes side by side would share their temporary folders",
            file=sys.stderr,
        )
        jobs = 1
    # before the first student code runs
    changed = protect_inputs([Path(s) for s in submissions], out_dir)
    try:
        return _grade_many(
            autograder_zip,
            submissions,
            out_dir,
            jobs,
            timeout,
            progress,
            runner,
            answers_dir,
            limits,
            assignment,
        )
    finally:
        restore_modes(changed, out_dir)


def _grade_many(
    autograder_zip: Path,
    submissions: list[Path],
    out_dir: Path,
    jobs: int,
    timeout: float | None,
    progress: bool,
    runner: str,
    answers_dir: Path | None,
    limits: Limits | Mapping[str, float] | None,
    assignment: str | None = None,
) -> list[GradeResult]:
    from autograder import answers_cache
    from autograder.gradescope import zip_assignment_name, zip_total_points
    from autograder.grading_errors import grading_error_results

    labels = batch_labels([Path(s) for s in submissions])
    out_of = zip_total_points(Path(autograder_zip))
    named = zip_assignment_name(Path(autograder_zip)) if assignment else None
    mismatch = (
        (
            f"the autograder zip {autograder_zip} is the autograder of the assignment {named!r}, "
            f"not of "
            f"{assignment!r}; rebuild it: python -m autograder build {assignment}"
        )
        if named and named != assignment
        else None
    )

    threads = 1  # each grading on one thread: results do not depend on the core count or on `jobs`

    def work(item):
        sub, label = item
        if mismatch is not None:
            (out_dir / label).mkdir(parents=True, exist_ok=True)
            path = out_dir / label / "results.json"
            path.write_text(json.dumps(grading_error_results(mismatch), indent=2))
            return GradeResult(Path(sub), path, {}, mismatch, grading_error=True)
        return grade_one(
            autograder_zip,
            Path(sub),
            out_dir / label,
            timeout,
            threads,
            runner,
            limits,
            judges.server() if runner == "judge" else None,
        )

    bar = None
    lines = progress and len(submissions) > 1 and not sys.stderr.isatty()
    if progress and len(submissions) > 1 and not lines:
        from tqdm import tqdm

        bar = tqdm(total=len(submissions), desc="grading", unit="submission", file=sys.stderr)
    results: list[GradeResult] = []
    cache = (
        answers_cache.batch_folder(answers_dir)
        if runner == "judge"
        else answers_cache.without_folder()
    )
    # started within the cache's context: the judges inherit its folder
    with (
        cache,
        JudgePool(grading_env(threads)) as judges,
        ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
    ):
        for label, result in zip(labels, pool.map(work, zip(submissions, labels))):
            result.label, result.out_of = label, out_of
            results.append(result)
            if bar is not None:
                bar.update(1)
            # a log file or a pipe: one line each, not a bar redrawn with carriage returns
            elif lines:
                print(
                    f"graded {len(results)}/{len(submissions)}: {label}",
                    file=sys.stderr,
                    flush=True,
                )
    if bar is not None:
        bar.close()
    write_csv(results, labels, out_dir / "scores.csv")
    return results
