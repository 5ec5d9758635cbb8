"""Shared fixtures: one build of each assignment per test session, into a scratch folder, and one
private folder of reference values (:mod:`autograder.answers_cache`) for the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.build import BuiltAssignment
from tests.session_builds import build_once, shared_folder


@pytest.fixture(scope="session")
def answers_folder(tmp_path_factory) -> Path:
    """The session's answers cache folder (mode 0700): each reference value the checks, builds and
    batches of gradings need is computed once per session by the reference's own code, then loaded
    (the cache's fingerprints tie every file to that code). Tests of the cache itself and of the
    references' computation use folders of their own, or none. Under pytest-xdist the workers share
    it (the cache locks each file while it is computed)."""
    return shared_folder(tmp_path_factory, "answers")


@pytest.fixture(scope="session")
def built_where_mlps_fail(tmp_path_factory, answers_folder) -> BuiltAssignment:
    """``where_mlps_fail`` built once per session (otter assign, its own tests run), outside the
    committed tree."""
    return build_once("where_mlps_fail", tmp_path_factory, answers_folder)


@pytest.fixture(scope="session")
def repo() -> Path:
    return Path(__file__).resolve().parents[1]


#: Modules marked ``exclusive``: the sandbox tests of the student process (the user ``nobody``,
#: fixtures in /tmp and /dev/shm), which a grading running beside them disturbs. ``bin/test`` runs
#: them, and single tests marked ``@pytest.mark.exclusive``, in a second pass, alone.
EXCLUSIVE_MODULES = ("tests/test_student_process.py",)


def pytest_addoption(parser):
    parser.addoption(
        "--exclusive",
        choices=("skip", "only"),
        default=None,
        help="skip the tests marked `exclusive` (the sandbox tests that must run with no grading "
        "beside them), or run only those: bin/test runs the others on two workers, then these",
    )


def work_unit(nodeid: str) -> str:
    """What one pytest-xdist worker runs whole: an assignment's gradings
    (``grading_NAME``: the tests of ``tests/grading/test_catalogues.py`` whose first parameter is
    ``NAME``, and the module ``tests/grading/test_NAME.py``), which grade its catalogue once in that
    worker (:func:`tests.grading.common.graded_catalogue`); otherwise the test's module, so that
    what a module's fixtures build, train or grade is done once."""
    from tests.grading.common import group, with_catalogue

    module, _, rest = nodeid.partition("::")
    if module == "tests/grading/test_catalogues.py" and "[" in rest:
        name = rest.split("[", 1)[1].split("-", 1)[0].rstrip("]")
        if name in with_catalogue():
            return group(name)
    if module.startswith("tests/grading/test_") and module[19:-3] in with_catalogue():
        return group(module[19:-3])
    return module


def pytest_xdist_make_scheduler(config, log):
    """Schedules each :func:`work_unit` whole on one of the workers (``bin/test``'s ``-n 2``),
    those of most tests first. pytest-xdist's own ``--dist loadgroup`` would group by marks, but it
    renames the tests through an attribute pytest 9 no longer reads, and so splits the groups."""
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return WorkUnits(config, log)


def pytest_itemcollected(item):
    """Marks the tests of :data:`EXCLUSIVE_MODULES` ``exclusive`` as they are collected."""
    module = item.path.relative_to(Path(__file__).resolve().parents[1]).as_posix()
    if module.startswith(EXCLUSIVE_MODULES):
        item.add_marker(pytest.mark.exclusive)


def pytest_collection_modifyitems(config, items):
    exclusive = config.getoption("--exclusive")
    if exclusive is not None:
        wanted = exclusive == "only"
        keep = [
            item for item in items if (item.get_closest_marker("exclusive") is not None) == wanted
        ]
        dropped = [
            item for item in items if (item.get_closest_marker("exclusive") is not None) != wanted
        ]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


def host_pid(student: int, pid: int) -> int:
    """The judge's pid of the process a cell of the student process ``student`` knows as ``pid``:
    in namespaces of its own (:mod:`autograder.namespaces`) its processes have pids of their own;
    otherwise ``pid`` itself."""
    import os

    own = os.readlink(f"/proc/{student}/ns/pid")
    if own == os.readlink("/proc/self/ns/pid"):
        return pid
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != own:
                continue
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        nested = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
        if int(nested[-1]) == pid:
            return int(entry)
    raise LookupError(f"no process {pid} in the PID namespace of process {student}")


@pytest.fixture
def without_namespaces(monkeypatch):
    """Grading as root where the kernel refuses namespaces: the student process runs as the sandbox
    user, without namespaces (:data:`autograder.namespaces.SANDBOX_USER_MODE`)."""
    from autograder import namespaces

    monkeypatch.setenv(namespaces.NAMESPACES_ENV, "0")


@pytest.fixture
def sandbox():
    """``(user, workdir)``: the sandbox user ``nobody`` and a scratch folder it owns, in a folder of
    root's that others may only pass through, as the judge's working folders are; removed
    afterwards. Skipped when not root: only then does student code run as the sandbox user."""
    import os
    import pwd
    import shutil
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("the student process runs as a sandbox user only when grading runs as root")
    user = pwd.getpwnam("nobody")
    parent = Path(tempfile.mkdtemp(prefix="sandboxed-"))
    parent.chmod(0o711)
    workdir = parent / "work"
    workdir.mkdir()
    os.chown(workdir, user.pw_uid, user.pw_gid)
    try:
        yield user, workdir
    finally:
        shutil.rmtree(parent, ignore_errors=True)
