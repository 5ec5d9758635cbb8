"""The folders a grading works in (the judge's own, and the student process's scratch folder),
made where only their owner reads them, and the removal of those that a grading which ended without
cleaning up abandoned (its judge killed), once no process of it is left.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

from autograder.process_tree import is_root
from autograder.removal import remove_tree

#: Where each grading's working folders (the judge's private copy of the autograder, the student's
#: folder) are made, in the temporary folder, when grading runs as root: root's, mode 0711, which no
#: other user may list. A grading killed from outside (``grade``'s timeout, the out-of-memory
#: killer) removes neither folder, and a student folder left in a listable ``/tmp``, owned by the
#: sandbox user, would let a later submission run another's notebook as its own. Here a later
#: student cannot find it, and the next grading removes it (:func:`_remove_abandoned`).
WORK_FOLDER_NAME = "vision-autograder-work"
#: A working folder's name: its kind, then the pid of the judge that made it (a staging folder of
#: :func:`remove_folder` too, which a judge killed while it removed a student's folders leaves half
#: empty).
_WORK_NAME = re.compile(r"^(judge|submission|\.vision-autograder-removing)-(\d+)-")


def work_parent() -> tuple[Path, bool]:
    """The folder to make this grading's working folders in, and whether it is this grading's own
    (to remove at the end): :data:`WORK_FOLDER_NAME`, or, if another user holds that name, a new one
    like it; the temporary folder itself when not running as root (student code runs as this user
    then)."""
    base = Path(tempfile.gettempdir())
    if not is_root():
        return base, False
    parent = base / WORK_FOLDER_NAME
    try:
        parent.mkdir(mode=0o711, exist_ok=True)
        info = parent.lstat()
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0:
            if stat.S_IMODE(info.st_mode) != 0o711:
                os.chmod(parent, 0o711, follow_symlinks=False)
            _remove_abandoned(parent)
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
