"""The kernel's control groups for a student's processes: one for CPU (all of them weigh as one
session, and the kernel counts their CPU seconds), and one for memory (the kernel counts what they
hold: their own pages, pages that forked processes share counted once, and shared memory, tmpfs
files and System V segments they made), made by a judge running as root where the hierarchy is
writable (not a container's read-only ``/sys/fs/cgroup``: Gradescope grades one submission per
container, and its memory limit holds the student). A process cannot leave its groups; only root
may move it. Groups of judges that no longer run are removed when a judge makes its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from autograder.process_tree import kill_until_gone, quietly

#: Where the kernel's control groups are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The judge's own control groups (the line ``0::/`` says it is in cgroup v2's root).
SELF_CGROUP = Path("/proc/self/cgroup")
#: A student CPU group's name: this, then the pid of the judge that made it.
CPU_GROUP_PREFIX = "vision-autograder-"


def cpu_group_parent() -> Path | None:
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


def cpuacct_parent() -> Path | None:
    """The folder of cgroup v1's ``cpuacct`` hierarchy when it is mounted apart from ``cpu`` and
    writable (where the two share one, or in cgroup v2, the CPU group counts its own CPU time), else
    ``None``."""
    v1 = CGROUP_ROOT / "cpuacct"
    if not (v1 / "cpuacct.usage").is_file() or (CGROUP_ROOT / "cpu" / "cpuacct.usage").is_file():
        return None
    return v1 if os.access(v1, os.W_OK) else None


def group_cpu_seconds(group: Path) -> float | None:
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


def make_cpu_group(parent: Path | None = None) -> Path | None:
    """This judge's CPU group for the student's processes (made if needed), or ``None`` where there
    is none; in ``parent`` (another hierarchy, :func:`cpuacct_parent`) if given.

    The kernel shares the CPU between sessions (``sched_autogroup``), so a
    submission that starts many busy loops, each in a session of its own
    (``setsid``), would starve a submission graded beside it (``grade --jobs
    2``). In a group of their own, all of a student's processes together weigh as much
    as one session; a process cannot leave the group (only root may move
    it). Groups of judges that no longer run are removed first.
    """
    parent = parent or cpu_group_parent()
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
            kill_until_gone(lambda g=abandoned: group_members(g), rounds=50, pause=0.02)
            quietly(os.rmdir, parent / name)
    group = parent / f"{CPU_GROUP_PREFIX}{os.getpid()}"
    try:
        group.mkdir(mode=0o755, exist_ok=True)
    except OSError:
        return None
    return group


def group_members(group: Path | None) -> list[int]:
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


def join_cpu_group(group: Path | None, pid: int) -> bool:
    """Move process ``pid`` (all its threads) into ``group``; whether it was moved."""
    if group is None:
        return False
    try:
        with open(group / "cgroup.procs", "w") as f:
            f.write(str(pid))
        return True
    except OSError:
        return False


def memory_group_parent() -> Path | None:
    """Where the student's memory group is made (:func:`_inside_own_group`)."""
    return _inside_own_group("memory", "memory.stat")


def pids_group_parent() -> Path | None:
    """Where the student's process-count group is made (:func:`_inside_own_group`)."""
    return _inside_own_group("pids", "pids.current")


def _inside_own_group(controller: str, marker: str) -> Path | None:
    """Where a group of ``controller`` is made: in cgroup v1, inside the judge's own group of that
    hierarchy (so that whatever limits the machine sets on the judge hold for the student too); in
    cgroup v2, the root, when the judge runs in it and its children have the controller; ``None``
    when neither is there or writable. ``marker``: a file every group of the controller has."""
    v1 = CGROUP_ROOT / controller
    if (v1 / marker).is_file() or (v1 / "cgroup.procs").is_file():
        try:
            own = next(
                line.split(":", 2)[2]
                for line in SELF_CGROUP.read_text().splitlines()
                if controller in line.split(":", 2)[1].split(",")
            )
        except (OSError, StopIteration, IndexError):
            return None
        parent = v1 / own.strip("/")
        usable = (parent / "cgroup.procs").is_file() and os.access(parent, os.W_OK)
        return parent if usable else None
    try:
        in_root = "0::/" in SELF_CGROUP.read_text().splitlines()
        enabled = controller in (CGROUP_ROOT / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return CGROUP_ROOT if in_root and enabled and os.access(CGROUP_ROOT, os.W_OK) else None


#: The most processes (threads included) a student may run at once, where a group counts them:
#: it replaces the per-user ``RLIMIT_NPROC``, which gradings side by side, all as the sandbox
#: user, would share (one student's fork bomb would stop another's ``DataLoader``).
MAX_PROCESSES = 256


#: Per cgroup version: the file of everything the kernel charges to a memory group (its pages,
#: the page cache of files it read or wrote, kernel memory such as page tables and socket
#: buffers), its hard limit, its count of out-of-memory kills, and the ``memory.stat`` fields of
#: page cache (which includes shared memory) and of shared memory.
MEMORY_FILES = {
    "v1": ("memory.usage_in_bytes", "memory.limit_in_bytes", "memory.oom_control",
           "total_cache", "total_shmem"),
    "v2": ("memory.current", "memory.max", "memory.events", "file", "shmem"),
}


def _version(group: Path) -> str:
    return "v1" if (group / "memory.usage_in_bytes").is_file() else "v2"


def group_memory_mb(group: Path) -> float | None:
    """The memory the processes of ``group`` hold, in MB, as the kernel counts it: everything it
    charges to the group but the page cache of files (which it frees as it needs), so their own
    pages, pages that forked processes share counted once, shared memory (tmpfs and ``/dev/shm``
    files, memfds, System V segments) and kernel memory (page tables, socket buffers); ``None``
    when it cannot be read."""
    usage, _, _, cache, shmem = MEMORY_FILES[_version(group)]
    try:
        stat = dict(
            line.split()[:2] for line in (group / "memory.stat").read_text().splitlines()
            if len(line.split()) == 2
        )
        charged = int((group / usage).read_text())
        return (charged - int(stat[cache]) + int(stat[shmem])) / (1 << 20)
    except (OSError, KeyError, ValueError):
        return None


def limit_group_memory(group: Path, mb: int) -> bool:
    """Set ``group``'s hard memory limit to ``mb``: past it the kernel reclaims the group's page
    cache, then stops one of its processes (never another group's). Whether it was set."""
    _, limit, _, _, _ = MEMORY_FILES[_version(group)]
    try:
        (group / limit).write_text(str(mb << 20))
        return True
    except OSError:
        return False


def group_oom_kills(group: Path) -> int:
    """How many processes the kernel stopped in ``group`` at its memory limit (0 when unknown)."""
    _, _, events, _, _ = MEMORY_FILES[_version(group)]
    try:
        for line in (group / events).read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


#: The memory group's hard limit is the student's memory limit and this share more (at least
#: :data:`MIN_HARD_HEADROOM_MB`): the judge's checks, a few a second, stop a student that passes
#: the limit with a message that says so; the kernel's hard limit stops one that passes it faster
#: than the checks see, before it takes the memory of the machine (and of a grading beside it).
HARD_HEADROOM = 0.25
MIN_HARD_HEADROOM_MB = 256


class StudentGroups:
    """The control groups of one grading's student processes, made when a student process first
    starts as the sandbox user and removed once its processes are stopped."""

    def __init__(self) -> None:
        #: the CPU group (:func:`make_cpu_group`)
        self.cpu: Path | None = None
        #: the group that counts their CPU time, where cgroup v1 mounts ``cpuacct`` apart from
        #: ``cpu``
        self.cpuacct: Path | None = None
        #: the memory group (:func:`memory_group_parent`)
        self.memory: Path | None = None
        #: the group that bounds how many processes they run (:data:`MAX_PROCESSES`)
        self.pids: Path | None = None

    def make(self, memory_mb: int | None = None) -> list[Path]:
        """The groups, made where they are missing, the memory group's hard limit above
        ``memory_mb`` (:data:`HARD_HEADROOM`); those that could be made."""
        self.cpu = self.cpu or make_cpu_group()
        uncounted = self.cpu is not None and group_cpu_seconds(self.cpu) is None
        if uncounted and cpuacct_parent():
            self.cpuacct = self.cpuacct or make_cpu_group(cpuacct_parent())
        if self.memory is None and memory_group_parent() is not None:
            self.memory = make_cpu_group(memory_group_parent())
            if self.memory is not None and memory_mb is not None:
                headroom = max(MIN_HARD_HEADROOM_MB, int(memory_mb * HARD_HEADROOM))
                limit_group_memory(self.memory, memory_mb + headroom)
        if self.pids is None and pids_group_parent() is not None:
            self.pids = make_cpu_group(pids_group_parent())
            try:
                (self.pids / "pids.max").write_text(str(MAX_PROCESSES))
            except OSError:  # no bound: the sandbox user's process limit holds instead
                quietly(os.rmdir, self.pids)
                self.pids = None
        return self.all()

    def all(self) -> list[Path]:
        groups = (self.cpu, self.cpuacct, self.memory, self.pids)
        return [group for group in groups if group is not None]

    def cpu_seconds(self) -> float | None:
        """The CPU seconds the kernel counted for them, ``None`` where no group counts."""
        group = self.cpuacct or self.cpu
        return None if group is None else group_cpu_seconds(group)

    def memory_mb(self) -> float | None:
        """The memory the kernel counted for them, ``None`` where no group counts."""
        return None if self.memory is None else group_memory_mb(self.memory)

    def oom_kills(self) -> int:
        """How many of their processes the kernel stopped at the memory group's hard limit."""
        return 0 if self.memory is None else group_oom_kills(self.memory)

    def members(self) -> list[int]:
        """Every process in their groups, whatever user it became."""
        return sorted({pid for group in self.all() for pid in group_members(group)})

    def remove(self) -> None:
        """Remove the groups (empty once the processes are stopped; a restart makes them again)."""
        for group in self.all():
            quietly(os.rmdir, group)
        self.cpu = self.cpuacct = self.memory = self.pids = None
