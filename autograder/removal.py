"""Removing a folder a student's user could write to, as root: links are removed, never followed
(each folder is opened with ``O_NOFOLLOW`` relative to its parent), and the depth of the tree costs
no recursion (each folder met is moved into a staging folder named :data:`STAGING_PREFIX`, which
only root may write to). Failures are ignored: what cannot be removed stays, and the next grading's
sweep (:mod:`autograder.work_folders`) tries again.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from autograder.process_tree import quietly


def remove_folder(parent: int, name: str, beside: str) -> None:
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
                            if quietly(
                                os.rename, child, str(moved), src_dir_fd=fd, dst_dir_fd=staging_fd
                            ):
                                pending.append(str(moved))
                        else:
                            quietly(os.unlink, child, dir_fd=fd)
            except OSError:
                pass
            finally:
                os.close(fd)
            quietly(os.rmdir, folder, dir_fd=staging_fd)
    finally:
        os.close(staging_fd)
        quietly(os.rmdir, staging)


def remove_tree(path: Path) -> None:
    """Remove ``path`` (a folder, with all it holds, however deep: :func:`remove_folder`; or a
    file); nothing if it is gone. A symbolic link is removed, not followed."""
    path = Path(path)
    try:
        info = path.lstat()
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):
        quietly(os.unlink, path)
        return
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        remove_folder(parent, path.name, str(path.parent))
    finally:
        os.close(parent)


#: How :func:`remove_folder`'s staging folders are named: this, the judge's pid, a dash.
STAGING_PREFIX = ".vision-autograder-removing-"
