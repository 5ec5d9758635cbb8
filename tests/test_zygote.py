"""The warm start (:mod:`autograder.zygote`): the student process is forked from a template that has
imported the libraries, and keeps every guarantee of the cold start.

Each student process imported torch, torchvision, NumPy, matplotlib and IPython anew (seconds of
CPU and hundreds of MB, at every restart too). These tests check that the forked process is set up
as the cold one is (user, groups, limits, no new privileges, working folder, module path), cannot
reach the template or a file only root reads, is stopped with its children, and that grading falls
back to the cold start when the template is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from autograder import student_process, zygote
from autograder.judge_interface import Limits
from autograder.session import Session

#: The judge's modules: none may be imported in the student process (they import the checks, or
#: read the sandbox's secrets).
JUDGE_SIDE = (
    "autograder.judge",
    "autograder.checks",
    "autograder.session",
    "autograder.student_process",
    "autograder.scratch_folder",
    "autograder.sandbox_user",
    "autograder.work_folders",
    "autograder.notes",
)
#: A cell that records what the process was set up with, and whether it started warm.
PROBE = ("import os, sys\n"
         "setup = {'warm': 'torchvision' in sys.modules, 'cwd': os.getcwd(),\n"
         "         'path0': sys.path[0], 'home': os.environ.get('HOME'), 'judge_modules': sorted(\n"
         "             m for m in sys.modules\n"
         f"             if m.startswith({JUDGE_SIDE!r}))}}\n")


@pytest.fixture
def fresh_template():
    """No template from an earlier test, and none left afterwards."""
    zygote.reset()
    yield
    zygote.reset()


def _status(pid: int) -> dict[str, str]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups", "NoNewPrivs"):
            fields[key] = value.split()
    fields["limits"] = Path(f"/proc/{pid}/limits").read_text()
    fields["oom_score_adj"] = Path(f"/proc/{pid}/oom_score_adj").read_text().strip()
    fields["session_leader"] = os.getsid(pid) == pid == os.getpgid(pid)
    fields["parent_is_judge"] = _parent(pid) == os.getpid()
    fields["cgroup"] = Path(f"/proc/{pid}/cgroup").read_text()
    return fields


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _started(workdir: Path, user, cells: list[str]) -> Session:
    session = Session(workdir, cells, Limits(), user, time.monotonic() + 300)
    session.run_all()
    return session


def test_the_forked_student_process_is_set_up_as_the_cold_one(sandbox, fresh_template):
    user, workdir = sandbox
    warm = _started(workdir, user, [PROBE])
    try:
        assert getattr(warm.process.proc, "warm", False), "the student process should be forked"
        warm_status, warm_setup = _status(warm.process.proc.pid), warm.values(["setup"])["setup"]
    finally:
        warm.process.stop()
    zygote.go_cold("this test compares with the cold start")
    cold = _started(workdir, user, [PROBE])
    try:
        assert not getattr(cold.process.proc, "warm", False), "after go_cold, the cold start"
        cold_status, cold_setup = _status(cold.process.proc.pid), cold.values(["setup"])["setup"]
    finally:
        cold.process.stop()
    assert warm_setup["warm"] and not cold_setup["warm"], (warm_setup, cold_setup)
    assert warm_setup["judge_modules"] == [], \
        f"the template imports nothing of the judge's or the checks': {warm_setup['judge_modules']}"
    for key in ("cwd", "path0", "home"):
        assert warm_setup[key] == cold_setup[key] == str(workdir), (key, warm_setup, cold_setup)
    assert warm_status == cold_status, f"warm {warm_status}\ncold {cold_status}"
    assert warm_status["Uid"][0] == str(user.pw_uid) and warm_status["NoNewPrivs"] == ["1"]


#: A cell that tries to reach what only root may: a file, the template's memory, a signal to it.
REACH = ("import os\n"
         "reached = []\n"
         "for what, attempt in [('file', lambda: open(SECRET).read()),\n"
         "                      ('memory', lambda: open(f'/proc/{TEMPLATE}/environ').read()),\n"
         "                      ('signal', lambda: os.kill(TEMPLATE, 0))]:\n"
         "    try:\n"
         "        attempt()\n"
         "        reached.append(what)\n"
         "    except (PermissionError, FileNotFoundError, ProcessLookupError):\n"
         "        pass  # refused, or (in namespaces of its own) not there\n"
         "sockets = []\n"
         "for fd in os.listdir('/proc/self/fd'):\n"
         "    try:\n"
         "        if os.readlink(f'/proc/self/fd/{fd}').startswith('socket:'):\n"
         "            sockets.append(int(fd))\n"
         "    except OSError:\n"
         "        pass\n")


def test_the_forked_student_process_reaches_no_file_or_process_of_roots(sandbox, fresh_template,
                                                                         tmp_path):
    user, workdir = sandbox
    secret = Path(tempfile.mkdtemp(prefix="secret-")) / "hidden"
    secret.parent.chmod(0o755)
    secret.write_text("hidden test")
    secret.chmod(0o600)
    zygote.start_template(student_process.student_env(workdir))
    template = zygote._TEMPLATE.proc.pid
    cells = [f"SECRET, TEMPLATE = {str(secret)!r}, {template}\n" + REACH]
    session = Session(workdir, cells, Limits(), user, time.monotonic() + 300)
    try:
        session.run_all()
        values = session.values(["reached", "sockets"])
    finally:
        session.process.stop()
        shutil.rmtree(secret.parent)
    assert isinstance(session.process.proc, type(None)), "stopped"
    assert values["reached"] == [], f"the student process reached: {values['reached']}"
    assert len(values["sockets"]) == 1, \
        f"its one socket is the channel, not the template's: {values['sockets']}"


#: A cell that starts a grandchild in a session of its own and writes its pid to ``child``.
ESCAPER = ("import subprocess\n"
           "child = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
           "open('child', 'w').write(str(child.pid))\n"
           "import os\n"
           "open('namespace', 'w').write(os.readlink('/proc/self/ns/pid'))\n")


def test_the_forked_student_process_restarts_and_is_stopped_with_its_children(sandbox,
                                                                              fresh_template):
    user, workdir = sandbox
    session = _started(workdir, user, [ESCAPER, "import os\nos._exit(3)", "after = 1"])
    try:
        child = int((workdir / "child").read_text())
        child_namespace = (workdir / "namespace").read_text()
        after = session.values(["after"])["after"]
        assert getattr(session.process.proc, "warm", False), "the restart is forked too"
        restarted = session.process.proc.pid
    finally:
        session.process.stop()
    assert after == 1, "the cell after the crash runs"
    assert "exit code 3" in session.records[1].problem, session.records[1]
    if child_namespace != os.readlink("/proc/self/ns/pid"):  # the child's pid was its namespace's
        left = _in_namespace(child_namespace)
        assert left == [], f"processes of the crashed student's PID namespace outlived it: {left}"
        child = None
    for pid in (child, restarted):
        if pid is not None:
            assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"{pid} outlived the stop"


def _in_namespace(namespace: str) -> list[int]:
    """The living processes in the PID namespace ``namespace`` (``/proc/PID/ns/pid``'s name)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                found.append(int(entry))
        except OSError:
            continue
    return [pid for pid in found if not _zombie(pid)]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("how", ["cannot_start", "died"])
def test_without_a_template_the_student_process_starts_cold_and_says_so(tmp_path, fresh_template,
                                                                       capfd, monkeypatch, how):
    if how == "cannot_start":
        def cannot(self, env):
            raise OSError("no interpreter")

        monkeypatch.setattr(zygote.Template, "__init__", cannot)
    else:  # and is not started again
        zygote.start_template(student_process.student_env(tmp_path))
        zygote._TEMPLATE.proc.kill()
        zygote._TEMPLATE.proc.wait()
        monkeypatch.setattr(zygote, "start_template", lambda env: None)
    session = _started(tmp_path, None, [PROBE])
    try:
        setup = session.values(["setup"])["setup"]
        cold = not getattr(session.process.proc, "warm", False)
    finally:
        session.process.stop()
    assert cold and not setup["warm"] and setup["cwd"] == str(tmp_path), setup
    assert "student processes start cold" in capfd.readouterr().err
