"""The student process: started warm from :mod:`autograder.zygote`'s template (or cold), as the
sandbox user when grading runs as root, in namespaces of its own where the kernel makes them
(:mod:`autograder.namespaces`), with one thread for torch and BLAS unless the notebook asks for
more; limited by the CPU seconds its processes use (a wall-clock backstop :data:`WALL_FACTOR` times
as long ends a cell that sleeps), by memory and by the files it keeps (as its control groups and
:mod:`autograder.scratch_folder` count them); asked over :mod:`autograder.channel`; and stopped
with every process it started. What became of each cell is a :class:`CellRecord`.
"""

from __future__ import annotations

import os
import pwd
import re
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder import channel, namespaces, scratch_folder, zygote
from autograder.control_groups import StudentGroups, join_cpu_group
from autograder.judge_interface import Limits
from autograder.process_tree import (
    MAX_FILES_LOOKED_AT,
    TreeCpu,
    become_subreaper,
    c_library,
    first_for_the_oom_killer,
    has_live_threads,
    kill_until_gone,
    limit_resources,
    limit_resources_as_other_user,
    process_table,
    proportional_kb,
    resident_kb,
)
from autograder.scratch_folder import TooManyFiles

#: Reading every process's proportional share may take this long (seconds); past it resident memory
#: counts.
MAX_SHARE_SECONDS = 1.0
#: The limits a student process can be stopped or interrupted by, as results name them
#: (:attr:`StudentProcess.limits_hit`): a cell's or a call's CPU seconds (or its wall-clock
#: backstop), starting up, memory, the files and folders it keeps, the whole-run deadline.
LIMIT_KINDS = ("cell", "call", "startup", "memory", "files", "deadline")


class StudentFailure(Exception):
    """The student process failed while answering the judge (timeout, crash, memory); ``limit`` is
    the kind of limit that stopped it (:data:`LIMIT_KINDS`), ``None`` when it was not a limit (it
    crashed, exited, or answered out of turn)."""

    def __init__(self, message: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(slots=True)
class CellRecord:
    """What became of one code cell: the first line of the error it raised (at most
    :data:`MAX_ERROR_LINE` characters), or why it was stopped or not run. The judge keeps one for
    every cell of the notebook, and nothing else the cell printed, so that a notebook's output
    costs the judge no memory however many cells print."""

    index: int
    error: str | None = None
    problem: str | None = None  # timeout / crash / memory: why the cell was stopped


#: The most of a cell's error the judge keeps: its first line, as the results' notes show it.
MAX_ERROR_LINE = 300
#: What a cell that raised keeps once :data:`MAX_CELL_ERRORS_NOTED` cells before it raised (only
#: counted then).
ERROR_NOT_KEPT = "(an error, counted only)"
#: Why a cell the deadline left no time for was not run.
NOT_RUN = "not run: the grading deadline passed"


def first_line(error: Any) -> str | None:
    """The first non-blank line of a cell's error, at most :data:`MAX_ERROR_LINE` characters,
    without the colon of an exception that has no message (``AssertionError``, not
    ``AssertionError:``); ``None`` stays."""
    if error is None:
        return None
    text = str(error)[: 64 * MAX_ERROR_LINE].strip()
    line = (text.splitlines() or [""])[0][:MAX_ERROR_LINE]
    return line[:-1] if re.fullmatch(r"\w+:", line) else line


class StudentProcess:
    """One ``autograder.worker`` process and the channel to it."""

    def __init__(self, workdir: Path, limits: Limits, user: pwd.struct_passwd | None):
        self.workdir, self.limits, self.user = workdir, limits, user
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.generation = 0
        #: the control groups its processes share when sandboxed, removed when it stops
        self.groups = StudentGroups()
        #: when (``time.monotonic()``) the whole-run deadline comes: no request waits past it
        self.deadline_at: float | None = None
        #: why the last request's cell was interrupted (SIGINT), if it was, and by which kind of
        #: limit
        self.interrupted_for: str | None = None
        self.interrupted_by: str | None = None
        #: every time a limit stopped or interrupted the student's code in this grading, in order:
        #: ``(kind, what happened)`` (:data:`LIMIT_KINDS`), for the results' ``extra_data``
        self.limits_hit: list[tuple[str, str]] = []
        self._tree_cpu = TreeCpu()
        self._oom_kills = 0  # the memory group's, when this process started
        #: the entries of the scratch folder before the notebook ran (:meth:`start`)
        self.staged: frozenset | None = None
        #: in namespaces of its own, with private temporary folders (:mod:`autograder.namespaces`)
        self.isolated = user is not None and namespaces.available()

    # -- life cycle
    def start(self) -> None:
        if self.user is not None and self.staged is None:  # the notebook and its support files
            self.staged = scratch_folder.staged(self.user.pw_uid, self.workdir)
        judge_end, student_end = socket.socketpair()
        env = student_env(self.workdir)
        kwargs: dict[str, Any] = {}
        c_library()
        if self.user is not None:
            kwargs.update(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        # before it runs a cell: every process it starts stays in the group
        groups = self.groups.make(self.limits.memory_mb) if self.user is not None else []
        become_subreaper()  # the warm student process (forked by the template) is re-parented here
        ready_within = self.limits.startup_seconds * WALL_FACTOR  # for the template's imports, once
        if self.deadline_at is not None:
            ready_within = max(1.0, min(ready_within, self.deadline_at - time.monotonic()))
        isolated = None
        if self.isolated:
            isolated = {"read_only": namespaces.read_only_paths(env),
                        "private_mb": self.limits.memory_mb}
        spec = zygote.student_spec(
            self.workdir, env, self.user, MAX_FILES_LOOKED_AT, groups, isolated,
            processes_counted=self.groups.pids is not None,
        )
        self.proc = zygote.spawn(student_end, spec, env, ready_within)
        if self.proc is None and isolated is not None:  # cold, and in namespaces all the same
            # the grader's fault when it cannot (OSError, ValueError): a grading error
            self.proc = zygote.spawn_cold(student_end, spec, env, ready_within)
        elif self.proc is None:  # the cold start
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autograder.worker", str(student_end.fileno())],
                cwd=self.workdir,
                env=env,
                pass_fds=(student_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=limit_resources_as_other_user
                if self.user is not None
                else limit_resources,
                **kwargs,
            )
        first_for_the_oom_killer(self.proc.pid)
        # the warm student process joined them itself, before it dropped privileges
        for group in groups:
            join_cpu_group(group, self.proc.pid)
        self._tree_cpu = TreeCpu()
        self._oom_kills = self.groups.oom_kills()
        student_end.close()
        self.sock = judge_end
        self.generation += 1
        warm = isinstance(self.proc, zygote.Forked) and self.proc.warm
        try:
            header, _ = self._wait(
                self.limits.startup_seconds, what="starting the student process", limit="startup"
            )
        except StudentFailure as failure:
            if not warm:
                raise
            zygote.go_cold(f"a forked student process did not start: {failure}")  # no cell had run
            self.generation -= 1
            return self.start()
        if header.get("op") != "ready":
            raise StudentFailure("the student process did not start properly")

    def stop(self, clean: bool = True) -> None:
        """Kill the worker and every process the student started; then, with ``clean``,
        :meth:`clean` (a grading's last stop leaves that until its results are written: removing
        what a student left may take long)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        if self.proc is not None:
            self._kill_descendants()
            self.proc.wait()
        if self.sock is not None:
            self.sock.close()
        self.proc, self.sock = None, None
        if clean:
            self.clean()

    def clean(self) -> None:
        """Remove the control groups, once the student's processes are stopped."""
        self.groups.remove()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- the student's processes
    def _student_pids(self, zombies: bool = False) -> list[int]:
        """The worker and every process it started, living ones only (a process whose first thread
        has exited shows as a zombie while its other threads run, and may hold memory and outlive
        the grading); ``zombies``: ended ones not yet reaped too.

        A process that left the worker's session (``setsid``) escapes
        ``killpg``; when its parent dies it is re-parented to the judge (a
        child subreaper when sandboxed), where it is found by its user.
        """
        if self.proc is None:
            return []
        table = process_table()
        roots = [
            self.proc.pid,
            *self.groups.members(),
        ]  # the group holds them whatever user they became
        if self.user is not None:
            roots += [
                pid
                for pid, (ppid, uid, _) in table.items()
                if ppid == os.getpid() and uid == self.user.pw_uid and pid != self.proc.pid
            ]
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        found, stack = [], [pid for pid in roots if pid in table]
        while stack:
            pid = stack.pop()
            found.append(pid)
            stack.extend(children.get(pid, []))
        return (
            found
            if zombies
            else [pid for pid in found if table[pid][2] != "Z" or has_live_threads(pid)]
        )

    def cpu_seconds(self, tree: bool = True) -> float | None:
        """A running count of the CPU seconds (user and system) the student's processes used (only
        differences mean anything): what the kernel counted for their control group
        (:meth:`StudentGroups.cpu_seconds`) when they have one, else the sum over the process tree
        (:class:`TreeCpu`; only with ``tree``, which costs a scan of ``/proc``: ``None`` without). A
        busy loop counts; sleeping, waiting and other processes' load do not."""
        if self.proc is None:
            return 0.0
        seconds = self.groups.cpu_seconds()
        if seconds is not None:
            return seconds
        return self._tree_cpu.seconds(self._student_pids(zombies=True)) if tree else None

    def _kill_descendants(self) -> None:
        """SIGKILL every process the student started, until none is left; reap those re-parented to
        the judge."""
        kill_until_gone(self._student_pids, rounds=50, pause=0.02)
        if self.user is not None:
            for pid, (ppid, uid, _) in process_table().items():
                if ppid == os.getpid() and uid == self.user.pw_uid and pid != self.proc.pid:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except OSError:
                        pass

    # -- requests
    def _memory_mb(self, tree: bool = False) -> float:
        """Memory of the student's processes in MB; with ``tree``, the files it keeps in its
        scratch folder are counted too (:func:`scratch_folder.count`: on disk, not memory, but
        bounded so that removing them stays quick).

        Where they have a memory group, what the kernel counts for it
        (:meth:`StudentGroups.memory_mb`: their own pages, pages that forked
        processes share counted once, and the shared memory, tmpfs files and
        System V segments they made), which costs one read. Elsewhere (a
        container, whose own memory limit holds what no process holds), the
        worker's resident memory and page tables (``VmRSS``, ``VmPTE``), or with
        ``tree`` every process's, with the private folders' files in
        namespaces. Where the tree's sum passes the limit, the proportional share
        (``Pss``) replaces resident memory: forked processes (a ``DataLoader``'s
        workers) share their parent's pages until they write them, where summed
        resident memory would count them once per worker (four workers would
        take an honest notebook past 3 GB). A process whose share cannot be read
        counts its resident memory, and so does the whole tree when reading the
        shares takes more than :data:`MAX_SHARE_SECONDS` (one file mapped a
        thousand times makes the read slow).
        """
        if tree and self.user is not None:
            scratch_folder.count(self.user.pw_uid, self.workdir, self.staged or frozenset())
        counted = self.groups.memory_mb()
        if counted is not None:
            return counted
        if not tree:
            return sum(resident_kb(self.proc.pid)[:2]) / 1024 if self.proc else 0.0
        # measured twice when over the limit, the smaller kept: a process that forks or ends while
        # it is read gives a share of none for a moment (an honest notebook's workers, ended at the
        # end of its cell)
        first = self._tree_memory_mb()
        return first if first <= self.limits.memory_mb else min(first, self._tree_memory_mb())

    def _tree_memory_mb(self) -> float:
        """:meth:`_memory_mb` of every process the student started, once, without a memory
        group."""
        pids = self._student_pids()
        resident = {pid: resident_kb(pid) for pid in pids}
        total = sum(kb + tables for kb, tables, _ in resident.values())
        if self.isolated and self.proc is not None:  # files in its private tmpfs folders
            total += namespaces.private_folders_kb(self.proc.pid)
        if total / 1024 <= self.limits.memory_mb:
            return total / 1024
        started = time.monotonic()
        for pid, (kb, _tables, owner) in resident.items():
            share = proportional_kb(pid, owner)
            if time.monotonic() - started > MAX_SHARE_SECONDS:
                return total / 1024
            if share is None:  # unreadable: its resident memory now (none once it has ended)
                share = resident_kb(pid)[0]
            total += share - kb
        return total / 1024

    def note_limit(self, limit: str, message: str) -> None:
        """Note in :attr:`limits_hit` that ``limit`` (:data:`LIMIT_KINDS`) stopped or interrupted
        the student's code, and what happened."""
        self.limits_hit.append((limit, message))

    def stopped_by(self, limit: str, message: str) -> StudentFailure:
        """A :class:`StudentFailure` for ``limit``, noted (:meth:`note_limit`)."""
        self.note_limit(limit, message)
        return StudentFailure(message, limit)

    def _wait(
        self, timeout: float, what: str, interrupt: bool = False, limit: str = "call"
    ) -> tuple[dict, bytes]:
        """Wait for one reply, watching CPU time, wall time and memory; stop the process on a
        problem.

        ``timeout`` counts the CPU seconds the student's processes use while
        the judge waits (:meth:`cpu_seconds`); :data:`WALL_FACTOR` times as
        many wall-clock seconds, and the whole-run deadline (:attr:`deadline_at`,
        at least one second away), end a request that sleeps or waits. With
        ``interrupt`` a cell past either first gets SIGINT (``KeyboardInterrupt``)
        and :data:`INTERRUPT_GRACE_SECONDS` to stop by itself. ``limit``: the kind of
        limit ``timeout`` is (``cell``, ``call`` or ``startup``).
        """
        started = time.monotonic()
        wall = timeout * WALL_FACTOR
        at_deadline = self.deadline_at is not None and self.deadline_at - started < wall
        if at_deadline:
            wall = max(1.0, self.deadline_at - started)
        deadline = started + wall
        cpu_start = self.cpu_seconds()
        self.interrupted_for, self.interrupted_by, interrupted_at, reason = None, None, None, ""
        kind = limit
        polls = [0]

        def watch() -> None:  # between polls, and while a reply that has begun is read
            polls[0] += 1
            self._check_running(what, tree=polls[0] % 10 == 0)

        while True:
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if ready:
                # a reply that has begun gets the limit's seconds of wall-clock time (or a few), not
                # its backstop: sending it needs little CPU, and a reply begun and never finished is
                # a sleeper's
                reply_by = min(deadline, started + timeout)
                try:
                    return channel.recv(
                        self.sock,
                        deadline=max(reply_by, time.monotonic() + REPLY_GRACE_SECONDS),
                        tick=watch,
                    )
                except channel.ChannelTimeout:
                    self.stop()
                    raise self.stopped_by(
                        limit,
                        f"it began a reply but did not finish it within {reply_by - started:.0f} "
                        f"seconds while {what}, and was stopped",
                    ) from None
                except (channel.ChannelClosed, OSError) as err:
                    # the channel closes as the process exits: wait for its exit code (same message
                    # every run)
                    try:
                        code = self.proc.wait(timeout=2) if self.proc else None
                    except subprocess.TimeoutExpired:
                        code = None
                    killed = self.groups.oom_kills() > self._oom_kills
                    self.stop()
                    if killed:
                        raise self._over_memory(what) from None
                    raise StudentFailure(
                        f"the student process ended while {what}"
                        + (f" (exit code {code})" if code is not None else f" ({err})")
                    ) from None
            watch()
            now = time.monotonic()
            if interrupted_at is not None:
                if now > interrupted_at + INTERRUPT_GRACE_SECONDS:
                    self.stop()
                    raise self.stopped_by(
                        kind,
                        f"it {reason} while {what}, did not stop when interrupted, and was stopped",
                    )
                continue
            used = self.cpu_seconds(tree=polls[0] % 10 == 0)
            if used is not None and cpu_start is not None and used - cpu_start > timeout:
                reason = f"used more than its {timeout:g} CPU seconds"
            elif now > deadline and at_deadline:
                reason, kind = "was still running when the grading deadline came", "deadline"
            elif now > deadline:
                used = self.cpu_seconds()
                spent = (
                    f"{used - cpu_start:.1f}"
                    if used is not None and cpu_start is not None
                    else "less"
                )
                reason = (
                    f"was blocked or sleeping ({wall:.0f} seconds passed, and it used {spent} of "
                    f"its "
                    f"{timeout:g} CPU seconds)"
                )
            else:
                continue
            if interrupt:
                # ask nicely first: KeyboardInterrupt in the cell
                interrupted_at, self.interrupted_for, self.interrupted_by = now, reason, kind
                try:
                    os.kill(self.proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
                continue
            self.stop()
            raise self.stopped_by(kind, f"it {reason} while {what}, and was stopped")

    def _check_running(self, what: str, tree: bool) -> None:
        """Stop the process and raise :class:`StudentFailure` if it has ended or uses more memory
        than allowed (``tree``: every process the student started, which costs a scan of ``/proc``;
        else the worker's)."""
        if self.proc.poll() is not None:
            code = self.proc.returncode
            killed = self.groups.oom_kills() > self._oom_kills
            self.stop()
            if killed:  # by the kernel, at the memory group's hard limit
                raise self._over_memory(what)
            raise StudentFailure(f"the student process ended while {what} (exit code {code})")
        try:
            used = self._memory_mb(tree=tree)
        except TooManyFiles as err:
            self.stop()
            if self.user is not None:
                # the scratch folder back as staged: the replay would start over the limit, and stop
                # at once
                scratch_folder.restore(self.user.pw_uid, self.workdir, self.staged or frozenset())
            raise self.stopped_by("files", f"it {err} while {what}, and was stopped") from None
        if used > self.limits.memory_mb:
            self.stop()
            raise self._over_memory(what)

    def _over_memory(self, what: str) -> StudentFailure:
        """The failure of a student process stopped past its memory limit, by the judge or by the
        kernel (the memory group's hard limit)."""
        return self.stopped_by(
            "memory",
            f"it used more than {self.limits.memory_mb} MB of memory while {what}, "
            "and was stopped",
        )

    def request(
        self,
        header: dict,
        payload: bytes,
        timeout: float,
        what: str,
        interrupt: bool = False,
        limit: str = "call",
    ) -> tuple[dict, bytes]:
        """Send ``header`` and ``payload`` and wait for the reply (:meth:`_wait`, where ``timeout``
        is the ``limit`` kind's CPU seconds)."""
        if not self.alive:
            raise StudentFailure(f"the student process is not running ({what})")
        try:
            channel.send(
                self.sock,
                header,
                payload,
                deadline=time.monotonic() + max(timeout, REPLY_GRACE_SECONDS),
                tick=lambda: self._check_running(what, tree=True),
            )
        except channel.ChannelTimeout:
            self.stop()
            raise self.stopped_by(
                limit,
                f"it did not take the request within {timeout:.0f} seconds while {what}, "
                "and was stopped",
            ) from None
        except OSError:
            self.stop()
            raise StudentFailure(f"the student process ended before {what}") from None
        return self._wait(timeout, what, interrupt, limit)


#: A reply the student process has begun to send gets at least this long to arrive whole (seconds);
#: so does a request to be taken. 256 MB, the largest frame, crosses a socket in well under a
#: second.
REPLY_GRACE_SECONDS = 10.0
#: A cell or call may take this many times its limit's CPU seconds in wall-clock seconds: enough for
#: honest work on a machine whose cores are busy with other work (load 6 on 2 cores gives it a third
#: of one) or in a container of half a CPU (Gradescope's default), while a cell that sleeps or waits
#: still ends.
WALL_FACTOR = 4.0
#: Seconds an interrupted cell (SIGINT) gets to stop by itself before it is stopped.
INTERRUPT_GRACE_SECONDS = 5.0
#: The environment that gives torch (OpenMP, MKL) and NumPy's OpenBLAS one thread.
SINGLE_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def student_env(workdir: Path, judge_env: Any = None) -> dict[str, str]:
    """The student process's environment, its scratch folder ``workdir`` as home and temporary
    folder, for a judge whose environment is ``judge_env`` (default this process's)."""
    judge_env = os.environ if judge_env is None else judge_env
    env = {
        "PATH": judge_env.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "TMPDIR": str(workdir),  # temporary files in the private folder, not the shared /tmp
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
        # one thread for torch and the BLAS libraries, whatever the machine's core count, unless a
        # cell asks for more (torch.set_num_threads): results and CPU seconds then do not depend on
        # the machine, and threads do not spin against each other on busy cores (3.6 s of training
        # took 37.9 s so)
        **dict.fromkeys(SINGLE_THREAD_ENV, "1"),
    }
    for key in (
        "VISION_AUTOGRADER_CACHE",
        "FASHION_MNIST_DIR",
        "MNIST_NPZ",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
    ):
        if key in judge_env:
            env[key] = judge_env[key]
    return env


#: At most this many cells that raised are named in the output (the first ones: later errors often
#: follow).
MAX_CELL_ERRORS_NOTED = 10
