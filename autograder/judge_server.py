"""A judge that grades one submission after another: torch, the checks and the warm start's template
are imported once per batch worker, not once per submission.

``python -m autograder.judge_server`` reads one job per line on its standard
input, a JSON object::

    {"autograder_zip": ..., "submission": ..., "results": ..., "log": ...,
     "cwd": ..., "limits": {field: value} or null}

and grades it with :func:`autograder.judge.grade_submission`, exactly as
``python -m autograder.judge`` grades one: the same limits, the results
written to ``results``. While a job runs, the process's standard output and
error go to the file ``log`` (what ``grade`` keeps as the submission's
``grading.log``) and its working folder is ``cwd``. When the job is done it
writes one line, ``{"done": true}``, to its standard output as it was when the
server started; it then waits for the next job, and exits when its input
ends.

What carries over from one job to the next is what the judge trusts and
computed itself: imported modules, reference values, the template of the
warm start (which reads nothing secret and which student code, running as
another user, cannot reach). Each grading stops every process of its
student, and removes its working folders, as a one-off judge does. A job that
runs past ``grade``'s timeout ends the server (:data:`signal.SIGTERM`, as for a
one-off judge), and the next job starts a new one
(:class:`autograder.judge_pool.JudgeServer`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from autograder import zygote
from autograder.judge import Limits, _exit_on_signal, grade_submission
from autograder.results import summary_line


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """The process's standard output and error (file descriptors 1 and 2, so child processes' too)
    written to ``path`` for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for descriptor in (fd, *saved):
            os.close(descriptor)


def run_job(job: dict) -> None:
    """Grade one job (the module's docstring says its fields)."""
    limits = Limits(**job["limits"]) if job.get("limits") else Limits()
    submission = Path(job["submission"])
    zygote.try_warm_again()  # an earlier job's failed warm start decides nothing for this one
    with _output_to(Path(job["log"])):
        os.chdir(job["cwd"])
        try:
            results = grade_submission(
                Path(job["autograder_zip"]), submission, Path(job["results"]), limits
            )
            print(f"{submission.name}: {summary_line(results)}", flush=True)
        finally:
            os.chdir("/")  # the job's folder is removed once it is done
    # what the grading left in reference cycles (the student's values its checks held) is freed
    # now, before the next grading moves what exists out of the collector's reach (gc.freeze)
    gc.collect()


def main() -> int:
    # the replies go to the standard output the server started with; what a grading prints goes to
    # its job's log, and between jobs to nowhere
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    # stopped from outside (grade's timeout asks first), the judge still stops the student's
    # processes and removes its working folders, as a one-off judge does
    signal.signal(signal.SIGTERM, _exit_on_signal)
    os.chdir("/")
    for line in sys.stdin:
        if not line.strip():
            continue
        run_job(json.loads(line))
        replies.write(json.dumps({"done": True}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
