"""What the test session shares between its pytest-xdist workers: one answers folder and one build
of each assignment, made by whichever worker needs it first while the others wait for it (a file
lock), then read by all. Without xdist the session is one process and the same functions serve it
alone."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from filelock import FileLock

from autograder.answers_cache import ENV_DIR
from autograder.build import BuiltAssignment, build_assignment


def shared_root(tmp_path_factory) -> Path:
    """The folder every worker of this session sees: the parent of the workers' own base folders
    under xdist (``pytest-N/popen-gwK``), the session's base folder otherwise."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_folder(tmp_path_factory, name: str) -> Path:
    """``name`` under :func:`shared_root`, made once (mode 0700) whichever worker asks first."""
    folder = shared_root(tmp_path_factory) / name
    with FileLock(str(folder) + ".lock"):
        folder.mkdir(mode=0o700, exist_ok=True)
    return folder


#: The builds this process has read or made, by assignment name.
_BUILT: dict[str, BuiltAssignment] = {}


def build_once(name: str, tmp_path_factory, answers_folder: Path) -> BuiltAssignment:
    """``name`` built (otter assign, its own tests run) into a scratch folder, outside the committed
    tree, once per test session however many workers ask (a build takes 20 to 110 s).

    The build executes the solution notebook in Otter's own process at one
    thread (unless the caller set another): the thread count the references
    are computed at and the batch grades at, and no oversubscription of a
    loaded 2-core machine. Its hidden tests read the reference values from
    the session's ``answers_folder``.
    """
    if name in _BUILT:
        return _BUILT[name]
    root = shared_root(tmp_path_factory) / f"build_{name}"
    record = root / "built.json"
    with FileLock(str(root) + ".lock"):
        if record.is_file():
            fields = json.loads(record.read_text())
            built = BuiltAssignment(
                name=fields.pop("name"), **{k: Path(v) for k, v in fields.items()}
            )
        else:
            root.mkdir(exist_ok=True)
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
                mp.setenv("MKL_NUM_THREADS", os.environ.get("MKL_NUM_THREADS", "1"))
                mp.setenv(ENV_DIR, str(answers_folder))
                built = build_assignment(
                    name,
                    run_tests=True,
                    build_root=root / "build",
                    student_root=root / "student_template",
                )
            record.write_text(json.dumps(dataclasses.asdict(built), default=str))
    _BUILT[name] = built
    return built
