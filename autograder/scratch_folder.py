"""The files and folders a sandboxed student keeps in its scratch folder, counted while it runs.

Each is looked at on every check of the student's memory and removed when the grading ends, so
their number is bounded (:data:`MAX_SCRATCH_ENTRIES`) and so is their depth
(:data:`MAX_SCRATCH_DEPTH`): past either the student process is stopped, and the scratch folder is
put back as it was staged (:func:`restore`), so that the replay of the earlier cells does not start
over the limit. The walk reads one entry at a time and never follows a link: millions of hard
links, 24 bytes of disk each, listed whole would cost the judge gigabytes and minutes.

The temporary folders every user may write to are not walked: in namespaces they are the
student's own tmpfs, bounded in size and files and gone with it (:mod:`autograder.namespaces`);
without them the student is graded alone in its container.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from autograder.process_tree import quietly
from autograder.removal import remove_folder

#: The student may keep at most this many files and folders of its own in its scratch folder; honest
#: notebooks keep a few dozen (their outputs, matplotlib's cache).
MAX_SCRATCH_ENTRIES = 16_384
#: ... in folders at most this deep (the walk keeps one folder open per level) ...
MAX_SCRATCH_DEPTH = 32
#: ... holding at most this many MB on disk (each file may hold 512 MB, ``RLIMIT_FSIZE``: without
#: a bound on their sum, a few dozen would fill the machine's disk under every grading on it).
MAX_SCRATCH_MB = 2048


class TooManyFiles(Exception):
    """The student keeps more files or folders, or deeper ones, in its scratch folder than
    allowed."""


def staged(uid: int, workdir: Path) -> frozenset[tuple[int, int]]:
    """``(st_dev, st_ino)`` of the entries of ``workdir`` before the notebook runs: the notebook
    and its support files, which the student does not count and :func:`restore` keeps."""
    return frozenset(
        (info.st_dev, info.st_ino) for _, _, info, _ in _walk(uid, str(workdir), frozenset(), False)
    )


def count(uid: int, workdir: Path, kept: frozenset) -> int:
    """How many files and folders ``uid`` made in ``workdir`` (those ``kept`` holds are not
    counted), looking at no more than that and the folders it owns.

    Raises :class:`TooManyFiles` past :data:`MAX_SCRATCH_ENTRIES`, :data:`MAX_SCRATCH_DEPTH` or
    :data:`MAX_SCRATCH_MB` (the disk blocks of its files, each counted once however many links
    it has)."""
    made, blocks, seen = 0, 0, set()
    for _, _, info, _ in _walk(uid, str(workdir), kept, True):
        key = (info.st_dev, info.st_ino)
        if info.st_uid == uid and key not in kept:
            made += 1
            if key not in seen:
                seen.add(key)
                blocks += info.st_blocks  # of 512 bytes
            if blocks > MAX_SCRATCH_MB * 2048:
                raise TooManyFiles(
                    f"kept more than {MAX_SCRATCH_MB:,} MB of files in its own folder"
                )
    return made


def restore(uid: int, workdir: Path, kept: frozenset) -> None:
    """Remove what ``uid`` made in ``workdir`` that ``kept`` does not hold, each folder whole."""
    for parent, name, info, _ in _walk(uid, str(workdir), kept, False, owned_only=True):
        if stat.S_ISDIR(info.st_mode):
            remove_folder(parent, name, str(workdir))
        else:
            quietly(os.unlink, name, dir_fd=parent)


def _walk(
    uid: int, folder: str, kept: frozenset, bounded: bool, owned_only: bool = False
) -> Iterator[tuple[int, str, os.stat_result, int]]:
    """Yield ``(folder fd, name, lstat, depth)`` for the entries below ``folder`` (none if it cannot
    be opened), depth first, without recursion, never following a link, looking into a folder only
    if ``uid`` owns it or anyone may write to it; ``owned_only``: only ``uid``'s new entries, its
    new folders yielded and not entered (the caller removes them whole).

    ``bounded``: raise :class:`TooManyFiles` past :data:`MAX_SCRATCH_ENTRIES` new entries of
    ``uid`` or at a new folder of ``uid`` :data:`MAX_SCRATCH_DEPTH` deep; otherwise deeper folders
    are not looked into. An entry that goes away while it is read is skipped."""
    owned = 0
    try:
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    stack = [(top, _entries(top), 0)]
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
            mine = info.st_uid == uid and (info.st_dev, info.st_ino) not in kept
            owned += mine
            if bounded and owned > MAX_SCRATCH_ENTRIES:
                raise TooManyFiles(
                    f"kept more than {MAX_SCRATCH_ENTRIES:,} files and folders in its own folder"
                )
            if mine or not owned_only:
                yield fd, name, info, depth
            enter = stat.S_ISDIR(info.st_mode) and not (mine and owned_only)
            if not enter or not (info.st_uid == uid or info.st_mode & stat.S_IWOTH):
                continue
            if depth + 1 >= MAX_SCRATCH_DEPTH:
                if bounded and mine:
                    raise TooManyFiles(
                        f"made folders more than {MAX_SCRATCH_DEPTH} deep in its own folder"
                    )
                continue
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                continue
            stack.append((child, _entries(child), depth + 1))
    finally:
        for fd, entries, _ in stack:
            entries.close()
            if fd != top:
                os.close(fd)
        os.close(top)


def _entries(fd: int) -> Iterator[tuple[str, os.stat_result]]:
    """The entries of the open folder ``fd`` with their lstat, read one at a time."""
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    yield entry.name, entry.stat(follow_symlinks=False)
                except OSError:
                    continue
    except OSError:
        return
