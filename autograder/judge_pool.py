"""The batch's long-lived judges: one :mod:`autograder.judge_server` process per batch worker.

A one-off judge imports torch (once for itself and the warm start's template,
:mod:`autograder.warm_judge`), Otter and the checks for every submission:
about 4 CPU seconds before it grades anything, most of what a short notebook
costs to run. In a batch, each worker thread of :func:`autograder.grade.grade_many`
keeps one judge server instead and sends it one submission after another
(:meth:`JudgeServer.grade`). A grading is the same either way: the server runs
:func:`autograder.judge.grade_submission` with the same limits.

A job that runs past its timeout stops the server as a one-off judge is
stopped (SIGTERM, then SIGKILL :data:`STOP_GRACE_SECONDS` later); a server
that died is replaced. Either way the next job gets a new server, so no
grading inherits a judge that was stopped in the middle of another.

This module imports neither torch nor the judge: the ``grade`` command only
orchestrates.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Seconds a grading process past its timeout gets, after SIGTERM, to stop its student's processes
#: and remove its working folders, before SIGKILL.
STOP_GRACE_SECONDS = 10.0
#: Seconds a server whose input has ended gets to exit before it is killed.
EXIT_SECONDS = 30.0


def stop_politely(
    proc: subprocess.Popen, wait: Callable[[float | None], Any] | None = None
) -> None:
    """SIGTERM, then SIGKILL :data:`STOP_GRACE_SECONDS` later if it has not ended; reaped.
    ``wait(timeout)`` waits for it to end (default ``proc.wait``; ``proc.communicate`` for a process
    whose output pipes must be drained meanwhile)."""
    wait = wait or (lambda timeout: proc.wait(timeout=timeout))
    proc.terminate()
    try:
        wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        wait(None)


class JudgeServer:
    """One long-lived judge, started when the first job comes (and again after one was stopped).

    ``env``: the judge's environment (threads, plotting backend, the batch's
    answers cache). ``command``: the server's command line (the tests' stand-in).
    """

    def __init__(self, env: dict[str, str], command: list[str] | None = None):
        self.env = env
        self.command = command
        self.proc: subprocess.Popen | None = None
        self.started = 0  # how many server processes this worker has started

    def _start(self) -> subprocess.Popen:
        """The server: a warm judge (:mod:`autograder.warm_judge`, one import of torch for the judge
        and its student template) unless a stand-in command was given."""
        from autograder import warm_judge

        self.started += 1
        command, env, request, _ = (
            (self.command, self.env, None, "/")
            if self.command is not None
            else warm_judge.launch("autograder.judge_server", [], self.env, "/")
        )
        proc = subprocess.Popen(
            command,
            cwd="/",
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a job's output goes to its log file
        )
        if request is not None:
            try:
                proc.stdin.write(request.encode())
                proc.stdin.flush()
            except BrokenPipeError:  # it ended at once: the job sent next finds it so
                pass
        return proc

    def grade(self, job: dict, timeout: float) -> int:
        """Send ``job`` (:mod:`autograder.judge_server`'s fields) and wait for it: 0 when it is
        done, else the exit code of the server, which ended during it.

        Raises:
            subprocess.TimeoutExpired: the job ran past ``timeout`` seconds; the server was stopped.
        """
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        try:
            proc.stdin.write((json.dumps(job) + "\n").encode())
            proc.stdin.flush()
        except BrokenPipeError:
            return self._ended()
        deadline = time.monotonic() + timeout
        fd = proc.stdout.fileno()
        reply = b""
        while b"\n" not in reply:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stop_politely(proc)
                self.proc = None
                raise subprocess.TimeoutExpired(proc.args, timeout)
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return self._ended()
                reply += chunk
        return 0

    def _ended(self) -> int:
        """The exit code of the server, which ended during a job (never 0: it did not finish it)."""
        proc, self.proc = self.proc, None
        code = proc.wait()
        return code if code != 0 else -signal.SIGPIPE

    def close(self) -> None:
        """End the server: its input closed, it exits after the job it is on (killed if it does
        not within :data:`EXIT_SECONDS`)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            stop_politely(proc)
        proc.stdout.close()


class JudgePool:
    """One :class:`JudgeServer` per worker thread of a batch, all ended by :meth:`close`."""

    def __init__(self, env: dict[str, str], command: list[str] | None = None):
        self.env, self.command = env, command
        self._local = threading.local()
        self._servers: list[JudgeServer] = []
        self._lock = threading.Lock()

    def server(self) -> JudgeServer:
        """The calling thread's server."""
        server = getattr(self._local, "server", None)
        if server is None:
            server = self._local.server = JudgeServer(self.env, self.command)
            with self._lock:
                self._servers.append(server)
        return server

    def close(self) -> None:
        with self._lock:
            servers, self._servers = self._servers, []
        for server in servers:
            server.close()

    def __enter__(self) -> JudgePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def job(
    autograder_zip: Path,
    submission: Path,
    results: Path,
    log: Path,
    cwd: Path,
    limits: dict | None,
) -> dict:
    """A job for :meth:`JudgeServer.grade`: the one-off judge's arguments, the file its output goes
    to, and its working folder."""
    return {
        "autograder_zip": str(Path(autograder_zip).resolve()),
        # made absolute, not resolved: a symbolic link must reach the judge as a link
        "submission": str(Path(submission).absolute()),
        "results": str(Path(results).resolve()),
        "log": str(log),
        "cwd": str(cwd),
        "limits": limits,
    }
