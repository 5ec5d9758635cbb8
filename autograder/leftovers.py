"""What a student process leaves on the host that does not end with it, when grading runs as root:
files in ``/dev/shm``, ``/tmp``, ``/var/tmp`` and ``/run/lock``, and System V shared memory and
message queues, owned by the sandbox user. Shared memory counts against the student's memory limit
while the process runs (:func:`shared_memory_kb`) and is removed when it stops; every walk is
bounded in entries, depth and time. :func:`claim_sandbox` takes a free user slot for a grading and
removes what an earlier grading under that user left.
"""

from __future__ import annotations

import os
import pwd
import signal
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.process_tree import MAX_FILES_LOOKED_AT, as_owner, c_library, process_table, quietly
from autograder.removal import STAGING_PREFIX, remove_folder, remove_tree
from autograder.sandbox_user import MAX_SLOTS, SLOT_UID_BASE, slot_folder, user_problem

#: Reading every process's proportional share may take this long (seconds); past it resident memory
#: counts.
MAX_SHARE_SECONDS = 1.0
#: The student's processes may hold at most this many files open in all: each memory check looks at
#: every one (960,000 open files cost 5 seconds a check, 8,192 cost 0.04 seconds). Past it the
#: student process is stopped; honest processes hold few (a process that imported torch 26, each of
#: a DataLoader's workers about 20).
MAX_OPEN_FILES = 8192


def shared_memory_kb(
    pids: list[int], uid: int | None, owners: dict, kept: SharedMemoryKept | None = None
) -> int:
    """kB of shared-memory files (``memfd``, ``/dev/shm``) that ``pids`` hold open, or that ``uid``
    owns in ``/dev/shm`` (``uid`` ``None``: not sandboxed, so none but those held), each counted
    once: such memory is resident in no process until mapped, so it is counted here or nowhere. What
    ``kept`` holds counts only by what it has grown since.

    Raises :class:`SharedMemoryTooLarge` (:func:`dev_shm_files`), also when ``pids`` hold more than
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

        for info in as_owner(owners.get(pid), held) or []:
            add(info)
    total = 0
    if uid is not None:
        for _, info in dev_shm_files(uid, kept):
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


def remove_shared_memory_files(uid: int, kept: SharedMemoryKept | None = None) -> None:
    """Remove what the sandbox user ``uid`` left in ``/dev/shm`` (files, and folders with all they
    hold) and its System V shared-memory segments (shared memory, held after its processes end;
    a chain of folders left there would break every later grading's walk), but for what ``kept``
    holds."""
    kept = kept or SharedMemoryKept()
    if c_library():
        for shmid, _ in _system_v_segments(uid):
            if shmid not in kept.segments:
                c_library().shmctl(shmid, 0, None)  # IPC_RMID
        # message queues and semaphore sets, which outlive their processes
        for kind, ipc_id in _system_v_queues(uid):
            if (kind, ipc_id) not in kept.queues:
                if kind == "msg":
                    c_library().msgctl(ipc_id, 0, None)  # IPC_RMID
                else:
                    c_library().semctl(ipc_id, 0, 0)  # IPC_RMID
    remove_dev_shm_entries(uid, kept)
    for folder in LEFTOVER_FOLDERS:
        remove_dev_shm_entries(uid, kept, folder)


def remove_dev_shm_entries(
    uid: int, kept: SharedMemoryKept | None = None, folder: str | None = None
) -> None:
    """Remove the files and folders ``uid`` owns in ``folder`` (default
    :data:`SHARED_MEMORY_FOLDER`) or in folders anyone may write to (or ``uid`` owns and ``kept``
    holds) below it, each folder with all it holds, but for what ``kept`` holds."""
    folder = folder or SHARED_MEMORY_FOLDER
    for parent, name, info, _ in walk_shared_memory(
        uid, kept, owned_only=True, bounded=False, folder=folder
    ):
        if stat.S_ISDIR(info.st_mode):
            remove_folder(parent, name, folder)
        else:
            quietly(os.unlink, name, dir_fd=parent)


def remove_abandoned_staging() -> None:
    """Remove the staging folders (:func:`remove_folder`, root's) that judges no longer running
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
    :func:`claim_sandbox`) may be another service's user too."""

    files: dict = field(default_factory=dict)
    segments: frozenset = frozenset()
    queues: frozenset = frozenset()

    @classmethod
    def now(cls, uid: int) -> SharedMemoryKept:
        files = {
            (info.st_dev, info.st_ino): info.st_blocks // 2
            for folder in (SHARED_MEMORY_FOLDER, *LEFTOVER_FOLDERS)
            for _, _, info, _ in walk_shared_memory(uid, bounded=False, folder=folder)
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
    """A walk (:func:`walk_shared_memory`) met more of the sandbox user's entries than its
    limit."""


class TooManyFiles(SharedMemoryTooLarge):
    """The sandbox user keeps more than :data:`MAX_LEFTOVER_ENTRIES` files and folders in
    :data:`LEFTOVER_FOLDERS` and its scratch folder."""


def walk_shared_memory(
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


def count_leftovers(uid: int, kept: SharedMemoryKept | None, workdir: Path) -> int:
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
            for _, _, info, _ in walk_shared_memory(
                uid, kept, folder=folder, limit=MAX_LEFTOVER_ENTRIES - count
            ):
                count += info.st_uid == uid and (info.st_dev, info.st_ino) not in kept.files
        except TooManyEntries:
            raise TooManyFiles(
                f"kept more than {MAX_LEFTOVER_ENTRIES:,} files and folders in "
                f"{', '.join(LEFTOVER_FOLDERS)} and its own folder"
            ) from None
    return count


def dev_shm_files(
    uid: int, kept: SharedMemoryKept | None = None
) -> list[tuple[str, os.stat_result]]:
    """``(name, lstat)`` of each file in ``/dev/shm`` (or a folder below it) that ``uid`` owns.

    Raises :class:`SharedMemoryTooLarge` if ``uid`` keeps more than :data:`MAX_SHARED_ENTRIES` files
    and folders there that ``kept`` does not hold, or such folders :data:`MAX_SHARED_DEPTH` deep.
    """
    return [
        (name, info)
        for _, name, info, _ in walk_shared_memory(uid, kept)
        if info.st_uid == uid and not stat.S_ISDIR(info.st_mode)
    ]


def claim_sandbox(user: pwd.struct_passwd) -> tuple[Any, int | None]:
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
        problem = user_problem(user.pw_uid, user.pw_gid)
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
        for pid, (_, owner, _) in process_table().items():
            if owner == uid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        remove_shared_memory_files(uid)  # and the shared memory such a judge's student left
        if user_problem(uid, uid) is not None:
            os.close(fd)
            continue
        return pwd.struct_passwd(
            (f"{user.pw_name}+{slot}", "x", uid, uid, "", "/", "/bin/false")
        ), fd
    return shared()
