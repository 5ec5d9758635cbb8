"""Reference values computed once per batch: a private on-disk cache of trusted values.

Every judge process (one per submission) needs its assignment's reference
values (``reference.NAME.answers()`` and friends); some take seconds of CPU
to compute (small models trained, thousands of least-squares fits). When
``$VISION_AUTOGRADER_ANSWERS_DIR`` names a folder, :func:`cached` loads a
value from ``FOLDER/<name>.pt`` when a valid file is there, else computes it
and writes the file atomically (temporary file, then ``os.replace``), under
an exclusive lock (``flock``) so that judges starting together compute it
once. :func:`batch_folder` makes such a folder for one batch
(:func:`autograder.grade.grade_many` uses it). Without the variable,
:func:`cached` just computes (the tests, Gradescope, one-off gradings).

The values decide scores, so the cache is trusted only as far as this:

* only the grader can open the folder: :func:`batch_folder` creates it mode
  0700, and a folder that is not a real directory owned by the current user
  with no rights for group or others is not used at all;
* the student process never gets the variable (the judge starts it with an
  explicit environment, :meth:`autograder.student_process.StudentProcess.start`) and,
  when grading runs as root, runs as another user, who cannot enter the
  folder;
* a file is loaded only if it is a regular file (not a symbolic link),
  owned by the current user and not writable by group or others; its header
  names the value, this file format, the torch version and a digest of the
  reference's source files, and holds the SHA-256 of the payload, which must
  match;
* the payload is read with ``torch.load(weights_only=True)``: tensors,
  numbers, strings, ``torch.Size`` and containers, never code.

A file refused for any of these reasons is recomputed (and replaced when the
folder is trusted), with one line on stderr saying why. What a grading
process does with the cache is logged on stderr as ``answers cache: ...``
lines (the batch's ``grading.log`` files).

Not protected: when grading does not run as root, student code runs as the
grader's user and could write the folder, as it could any of that user's
files (see docs/threat_model.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

#: The environment variable naming the cache folder of the current batch.
ENV_DIR = "VISION_AUTOGRADER_ANSWERS_DIR"
#: Version of the file layout: a JSON header line, then ``torch.save`` bytes.
FORMAT = 1
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$")

T = TypeVar("T")


class CacheRefused(Exception):
    """A cache file that must not be used; the message says why."""


def _note(message: str) -> None:
    print(f"answers cache: {message}", file=sys.stderr, flush=True)


def folder() -> Path | None:
    """The trusted cache folder named by ``$VISION_AUTOGRADER_ANSWERS_DIR``, or ``None``.

    ``None`` when the variable is unset or empty, and (with a note on stderr)
    when the folder is missing, a symbolic link, not owned by the current
    user, or open to group or others in any way.
    """
    value = os.environ.get(ENV_DIR)
    if not value:
        return None
    path = Path(value)
    problem = why_not_private(path)
    if problem:
        _note(f"not used: {path} {problem}")
        return None
    return path


def why_not_private(path: Path) -> str | None:
    """Why ``path`` cannot hold the cache (``None``: it can): it must be a directory (not a
    symbolic link) of this process's user that group and others may not open."""
    try:
        info = path.lstat()
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory (or is a symbolic link)"
    if info.st_uid != os.geteuid():
        return f"is owned by user id {info.st_uid}, not by this process's user ({os.geteuid()})"
    if info.st_mode & 0o077:
        return (
            f"has mode {stat.S_IMODE(info.st_mode):o}: group or others may open it (0700 expected)"
        )
    return None


def fingerprint(name: str, sources: Iterable[str | Path] = ()) -> str:
    """SHA-256 of the value's name, this file format, the torch version and the bytes of
    ``sources``.

    A cache file written by other code (a reference edited since) does not
    match, and is recomputed.
    """
    import torch

    h = hashlib.sha256(f"{FORMAT}\0{name}\0{torch.__version__}\0".encode())
    for source in sources:
        h.update(Path(source).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _path(directory: Path, name: str) -> Path:
    if not _NAME.match(name):
        raise ValueError(
            f"cache name must be letters, digits, '_', '.' or '-' (at most 200), not {name!r}"
        )
    return directory / f"{name}.pt"


def _encode(value: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _decode(payload: bytes) -> Any:
    import torch

    return torch.load(io.BytesIO(payload), weights_only=True)


def load(path: Path, name: str, expected_fingerprint: str) -> Any:
    """The value stored at ``path``.

    Raises:
        FileNotFoundError: no file there.
        CacheRefused: the file is a symbolic link or not a regular file, is
            not owned by the current user, is writable by group or others,
            or its header, fingerprint or payload digest does not match, or
            its payload is not plain data.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise CacheRefused(
            f"{path.name} cannot be opened ({err.strerror}; a symbolic link?)"
        ) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise CacheRefused(f"{path.name} is not a regular file")
        if info.st_uid != os.geteuid():
            raise CacheRefused(f"{path.name} is owned by user id {info.st_uid}, not {os.geteuid()}")
        if info.st_mode & 0o022:
            raise CacheRefused(
                f"{path.name} has mode {stat.S_IMODE(info.st_mode):o}: writable by group or others"
            )
        data = f.read()
    head, sep, payload = data.partition(b"\n")
    try:
        header = json.loads(head.decode("utf-8")) if sep else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CacheRefused(f"{path.name} has no valid header")
    if header.get("name") != name or header.get("fingerprint") != expected_fingerprint:
        raise CacheRefused(f"{path.name} was written for other code (name or fingerprint differs)")
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise CacheRefused(
            f"{path.name}'s payload does not match its SHA-256 (changed or truncated)"
        )
    try:
        return _decode(payload)
    except Exception as err:  # noqa: BLE001 - weights_only refuses anything but plain data
        raise CacheRefused(
            f"{path.name}'s payload is not plain data ({type(err).__name__})"
        ) from None


def store(path: Path, name: str, value_fingerprint: str, value: Any) -> None:
    """Write ``value`` to ``path`` atomically (mode 0600).

    Raises:
        TypeError: ``value`` holds something ``torch.load(weights_only=True)``
            cannot read back (a NumPy array, a module...): convert it first.
    """
    payload = _encode(value)
    try:
        _decode(payload)
    except Exception as err:  # noqa: BLE001 - whatever the reader refuses, as above
        raise TypeError(
            f"cache value {name!r} is not plain data (tensors, numbers, strings, containers): "
            f"{type(err).__name__}: {str(err)[:200]}"
        ) from None
    header = {
        "format": FORMAT,
        "name": name,
        "fingerprint": value_fingerprint,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "bytes": len(payload),
    }
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(header).encode("utf-8") + b"\n")
            f.write(payload)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def _lock(directory: Path, name: str) -> int:
    """A descriptor holding the exclusive lock of ``name`` (waits for it); closing it releases the
    lock."""
    import fcntl

    fd = os.open(
        directory / f".{name}.lock",
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
        0o600,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _try_load(path: Path, name: str, value_fingerprint: str) -> tuple[bool, Any]:
    try:
        value = load(path, name, value_fingerprint)
    except FileNotFoundError:
        return False, None
    except CacheRefused as err:
        _note(f"refused {err}; recomputing")
        return False, None
    _note(f"loaded {name}")
    return True, value


def cached(name: str, compute: Callable[[], T], sources: Iterable[str | Path] = ()) -> T:
    """``compute()``, or its value from the batch's cache folder when one is set and holds it.

    ``name``: the file's name (letters, digits, ``_ . -``), unique per value
    (include the arguments it depends on). ``sources``: files whose content
    the value depends on (the reference module), part of the fingerprint.
    ``compute`` must return plain data (tensors, numbers, strings,
    ``torch.Size``, lists, tuples, dicts): rebuild richer objects around it.

    Without a trusted folder (see :func:`folder`) this is ``compute()``.
    With one: the file is loaded if valid; otherwise, holding the name's
    lock, loaded if another process wrote it meanwhile, else computed and
    written. A value that cannot be stored is returned anyway, with a note.

    Raises:
        ValueError: ``name`` has other characters.
        Whatever ``compute`` raises.
    """
    directory = folder()
    if directory is None:
        return compute()
    path = _path(directory, name)
    value_fingerprint = fingerprint(name, sources)
    hit, value = _try_load(path, name, value_fingerprint)
    if hit:
        return value
    try:
        lock = _lock(directory, name)
    except OSError as err:
        _note(f"computing {name} without the cache: its lock cannot be taken ({err.strerror})")
        return compute()
    try:
        hit, value = _try_load(path, name, value_fingerprint)
        if hit:
            return value
        started = time.perf_counter()
        value = compute()
        seconds = time.perf_counter() - started
        try:
            store(path, name, value_fingerprint, value)
        except (OSError, TypeError) as err:
            _note(f"computed {name} in {seconds:.1f} s but could not store it: {err}")
            return value
        _note(f"computed {name} in {seconds:.1f} s, stored")
        return value
    finally:
        os.close(lock)


@contextlib.contextmanager
def batch_folder(directory: str | Path | None = None) -> Iterator[Path]:
    """Set ``$VISION_AUTOGRADER_ANSWERS_DIR`` for the duration of a batch; yields the folder.

    ``directory``: ``None`` creates a private temporary folder (mode 0700),
    removed at the end; a path is created mode 0700 if missing and kept
    (reusable by a later batch: each file's fingerprint tells whether its
    code changed). The variable's previous value is restored at the end.
    Processes started meanwhile inherit it (the judge does not pass it on
    to the student process).

    Raises:
        ValueError: ``directory`` exists but is not a private folder of the
            current user (see :func:`folder`).
    """
    created = directory is None
    path = Path(tempfile.mkdtemp(prefix="answers-")) if created else Path(directory)
    if not created:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    previous = os.environ.get(ENV_DIR)
    os.environ[ENV_DIR] = str(path)
    try:
        if folder() is None:
            raise ValueError(
                f"{path} cannot hold the answers cache: it must be a directory of this user, "
                "mode 0700"
            )
        yield path
    finally:
        if previous is None:
            os.environ.pop(ENV_DIR, None)
        else:
            os.environ[ENV_DIR] = previous
        if created:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def without_folder() -> Iterator[None]:
    """Unset ``$VISION_AUTOGRADER_ANSWERS_DIR`` for the duration (restored at the end).

    For gradings whose checks run where student code runs (``otter run``):
    they must not learn where the trusted values are.
    """
    previous = os.environ.pop(ENV_DIR, None)
    try:
        yield
    finally:
        if previous is not None:
            os.environ[ENV_DIR] = previous


def fill(assignment: str, directory: str | Path) -> None:
    """Compute ``assignment``'s reference values that every grading reads into ``directory``
    (created mode 0700, kept), with one thread as the judge computes them: its reference module's
    ``fill_answers_cache()``. Where the grading environment is built (``docker/install.sh``), so
    that a grading loads them instead of computing them.

    In a process of its own (``python -m autograder.answers_cache fill``): the references keep
    what they computed in memory, and a value this process holds already is not written again.

    Raises:
        ValueError: ``assignment`` has no reference module with ``fill_answers_cache``, or
            ``directory`` is not a private folder of this user (:func:`folder`).
    """
    import importlib

    import torch

    if not re.fullmatch(r"[a-z][a-z0-9_]*", assignment):
        raise ValueError(f"not an assignment name: {assignment!r}")
    try:
        module = importlib.import_module(f"reference.{assignment}")
    except ModuleNotFoundError:
        module = None
    if not hasattr(module, "fill_answers_cache"):
        raise ValueError(
            f"reference.{assignment} has no fill_answers_cache(): is it an assignment?"
        )
    torch.set_num_threads(1)
    with batch_folder(directory):
        module.fill_answers_cache()


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.answers_cache fill ASSIGNMENT FOLDER``: the values every grading of
    ``ASSIGNMENT`` reads, computed into ``FOLDER`` (:func:`fill`)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m autograder.answers_cache", description=main.__doc__
    )
    commands = parser.add_subparsers(dest="command", required=True)
    fill_parser = commands.add_parser("fill", help="compute an assignment's reference values")
    fill_parser.add_argument("assignment")
    fill_parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        fill(args.assignment, args.folder)
    except ValueError as err:
        parser.error(str(err))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
