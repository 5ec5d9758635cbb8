"""The installation's private folders: unreadable to other users while a grading runs as root, as
before after.

A grading as root runs student code as another user, who must not read the
reference solutions, the hidden-test helpers, the build or the history
(:data:`autograder.judge.PRIVATE_DIRS`): :func:`locked` takes "other"'s
permissions off them for as long as a grading runs. Gradings run at once
(``grade --jobs``, several batches) share the lock: the first to start
records the folders' modes, the last to end gives them back, so another user
of the machine can read the repository again once no grading runs.

The bookkeeping lives in a folder only root may enter (``/run/vision-autograder``):
a file of the recorded modes, a lock file every running grading holds shared
(``flock``: the kernel releases it when a grading dies, however it dies), and a
mutex file held while a grading starts or ends. A grading that was killed
leaves the modes file; the next grading to end last puts them back. Without a
trustworthy folder the folders are locked and left so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

MODES = "private-modes.json"
USERS = "private-modes.users"
MUTEX = "private-modes.lock"


def lock_down(paths: list[Path]) -> dict[str, int]:
    """Take every permission of "other" off ``paths`` (those that exist); ``{path: mode before}``
    for each changed."""
    changed = {}
    for path in paths:
        try:
            mode = stat.S_IMODE(path.lstat().st_mode)
        except OSError:
            continue
        if mode & stat.S_IRWXO and not path.is_symlink():
            path.chmod(mode & ~stat.S_IRWXO)
            changed[str(path)] = mode
    return changed


def _folder() -> Path | None:
    """Root's private folder for the bookkeeping (made mode 0700 if missing), ``None`` if it cannot
    be trusted."""
    folder = (
        Path("/run/vision-autograder")
        if Path("/run").is_dir()
        else Path(tempfile.gettempdir()) / "vision-autograder-private"
    )
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return None
    return folder


@contextlib.contextmanager
def _mutex(folder: Path) -> Iterator[None]:
    fd = os.open(folder / MUTEX, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _recorded(folder: Path) -> dict[str, int]:
    try:
        modes = json.loads((folder / MODES).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in modes.items()} if isinstance(modes, dict) else {}


def restore(modes: dict[str, int]) -> None:
    """Give each path its recorded mode back, if it still has the locked one (a mode changed since
    is kept)."""
    for path, mode in modes.items():
        try:
            now = stat.S_IMODE(os.lstat(path).st_mode)
            if now == mode & ~stat.S_IRWXO and not os.path.islink(path):
                os.chmod(path, mode)
        except OSError:
            pass


@contextlib.contextmanager
def locked(paths: list[Path], folder: Path | None = None) -> Iterator[None]:
    """``paths`` without "other"'s permissions while the block runs; given back when the last
    grading using them ends (:mod:`autograder.private_dirs`). ``folder``: the bookkeeping folder
    (default: root's,
    :func:`_folder`)."""
    folder = folder if folder is not None else _folder()
    if folder is None:
        lock_down(paths)
        yield
        return
    with _mutex(folder):
        modes = _recorded(folder)
        changed = lock_down(paths)
        if changed:
            modes.update({path: mode for path, mode in changed.items() if path not in modes})
            partial = folder / f".{MODES}.partial"
            partial.write_text(json.dumps(modes))
            os.replace(partial, folder / MODES)
        users = os.open(folder / USERS, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(users, fcntl.LOCK_SH)
    try:
        yield
    finally:
        with _mutex(folder):
            try:
                # granted only when no other grading holds it
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                last = True
            except BlockingIOError:
                last = False
            if last:
                restore(_recorded(folder))
                with contextlib.suppress(FileNotFoundError):
                    (folder / MODES).unlink()
            os.close(users)
