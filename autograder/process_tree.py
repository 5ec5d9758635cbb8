"""The student's processes as the kernel shows them, read by the judge: the process table, each
process's resident and proportional memory and threads, the CPU seconds of a process tree
(:class:`TreeCpu`) or of a CPU control group, the limits (rlimits, OOM score) a student process
starts under, and stopping every process of a tree. Nothing here runs student code.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from autograder import zygote


def is_root() -> bool:
    return os.geteuid() == 0


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


def process_table() -> dict[int, tuple[int, int, str]]:
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


def resident_kb(pid: int) -> tuple[int, int, tuple[int, int] | None]:
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


def has_live_threads(pid: int) -> bool:
    """Whether a process that shows as a zombie still runs threads (its first thread exited
    alone)."""
    return len(_threads(pid)) > 1


def as_owner(owner: tuple[int, int] | None, read: Callable[[], Any]) -> Any:
    """``read()``; where it is refused to a judge running as root without ``CAP_SYS_PTRACE``
    (Docker's default), again with the process owner's user and group as file-system ids
    (``setfsuid``, this thread only), as that owner could. ``None`` if it still fails."""
    try:
        return read()
    except PermissionError:
        if os.geteuid() != 0 or owner is None or not c_library():
            return None
    except (OSError, ValueError):
        return None
    libc = c_library()
    old_gid = libc.setfsgid(owner[1])
    old_uid = libc.setfsuid(owner[0])
    try:
        return read()
    except (OSError, ValueError):
        return None
    finally:
        libc.setfsuid(old_uid)
        libc.setfsgid(old_gid)


#: A student process may open at most this many files, and each one is looked at for shared memory.
MAX_FILES_LOOKED_AT = 4096


def quietly(call: Callable, *args: Any, **kwargs: Any) -> bool:
    """``call(*args, **kwargs)``; whether it did not raise :class:`OSError` (a file gone
    meanwhile)."""
    try:
        call(*args, **kwargs)
        return True
    except OSError:
        return False


def proportional_kb(pid: int, owner: tuple[int, int] | None) -> int | None:
    """A process's proportional set size (``Pss`` in ``/proc/PID/smaps_rollup``, kB), or ``None`` if
    unreadable (read as its owner where root may not: :func:`as_owner`)."""

    def read() -> int | None:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
        return None

    return as_owner(owner, read)


def become_subreaper() -> None:
    """Orphans of the student process become the judge's children, not init's, so none escapes
    ``stop()``."""
    if c_library():
        c_library().prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def c_library() -> Any:
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
def first_for_the_oom_killer(pid: int) -> None:
    """Make the student process, and every process it starts, the first the kernel's out-of-memory
    killer stops (``oom_score_adj`` 1000, which only a privileged process can lower), before it runs
    a cell: memory no process holds (a memfd in an unread socket message) is counted nowhere, and a
    machine or container that runs out then stops the student's processes, not the judge."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def limit_resources(sandboxed: bool = False) -> None:
    """In the student process before exec: :func:`autograder.zygote.student_rlimits` (at most
    :data:`MAX_FILES_LOOKED_AT` open files, all of which the memory check looks at), and killed
    when the judge dies (``PR_SET_PDEATHSIG``: a judge killed from outside leaves no student
    process running).

    Runs after the switch to the sandbox user, which may not be able to read
    the judge's Python installation: everything it needs is imported already
    (the C library by :func:`c_library`, before the fork).
    """
    if _LIBC:
        _LIBC.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        # PR_SET_NO_NEW_PRIVS: a setuid program (su) runs as the sandbox user, not as root, so
        # it cannot wait forever as a process of root's, unseen by owner, holding the sandbox
        # user's process limit against every later grading
        _LIBC.prctl(38, 1, 0, 0, 0)
    zygote.set_rlimits(zygote.student_rlimits(sandboxed, MAX_FILES_LOOKED_AT))


def limit_resources_as_other_user() -> None:
    """As :func:`limit_resources`, with the sandbox user's process limit."""
    limit_resources(sandboxed=True)
