"""Who a student process runs as when grading runs as root: :data:`SANDBOX_USER`, in every
grading on the machine (gradings side by side are kept apart by their namespaces,
:mod:`autograder.namespaces`; without them ``grade`` grades one submission at a time). A probe
checks that the user can run this installation's Python before a grading relies on it
(:func:`checked_sandbox_user`); :func:`lock_down` makes the folders it must not read unreadable to
other users.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

from autograder.process_tree import is_root

SANDBOX_USER = "nobody"


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


_USER_CHECKED: set[int] = set()
"""The uids a probe found can run this package (:func:`user_problem`)."""


def sandbox_account() -> pwd.struct_passwd:
    """The passwd entry of :data:`SANDBOX_USER`.

    Raises :class:`RuntimeError` when there is no such user (student code is never run as root)."""
    try:
        return pwd.getpwnam(SANDBOX_USER)
    except KeyError:
        raise RuntimeError(
            f"grading as root, but user {SANDBOX_USER!r} does not exist; student code is never "
            "run as root"
        ) from None


def user_problem(uid: int, gid: int) -> str | None:
    """Why ``uid`` cannot run this package with this interpreter (``None``: it can). A success is
    remembered for the judge's life; a failure is probed again next time (a probe stopped by a
    loaded machine, or by another grading's student, must not fail every later grading of a judge
    that grades one submission after another)."""
    if uid in _USER_CHECKED:
        return None
    problem = _probe_user(uid, gid)
    if problem is None:
        _USER_CHECKED.add(uid)
    return problem


def _sandbox_user() -> pwd.struct_passwd | None:
    """The unprivileged user student code runs as, when grading runs as root and it can run Python
    (``None`` otherwise). A check for tests and tools: a grading calls
    :func:`checked_sandbox_user`."""
    if not is_root():
        return None
    try:
        user = sandbox_account()
    except RuntimeError:
        return None
    return user if user_problem(user.pw_uid, user.pw_gid) is None else None


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


def checked_sandbox_user() -> pwd.struct_passwd:
    """The passwd entry student code runs as when grading runs as root, probed once per judge.

    Raises :class:`RuntimeError` when there is no such user or it cannot run this package: student
    code is never run as root."""
    user = sandbox_account()
    problem = user_problem(user.pw_uid, user.pw_gid)
    if problem is not None:
        raise RuntimeError(
            f"grading as root, but user {user.pw_name!r} cannot run {sys.executable} with this "
            f"package ({problem}); bin/install makes the interpreter's folders traversable; "
            "student code is never run as root"
        )
    return user
