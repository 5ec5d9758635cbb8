"""The student process in namespaces of its own (:mod:`autograder.namespaces`): what it leaves in
the temporary folders, its System V objects and its processes never reach the machine and end with
it; it sees none of the judge's processes, reaches no network, and what its private folders hold
counts as its memory. Where namespaces are refused, the results say the sandbox user's mode."""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from autograder import namespaces, zygote
from autograder.judge_interface import Limits
from autograder.session import Session

needs_namespaces = pytest.mark.skipif(
    not namespaces.available(), reason="the kernel makes no namespaces here, or not root"
)


@pytest.fixture(params=["warm", "cold"])
def start(request, monkeypatch):
    """Each test once with the student process forked by the template, once started cold."""
    if request.param == "cold":
        monkeypatch.setenv(zygote.COLD_START_ENV, "1")
    return request.param


def _run(workdir: Path, user, cells: list[str], names: list[str], memory_mb: int = 4000):
    session = Session(workdir, cells, Limits(memory_mb=memory_mb), user, time.monotonic() + 120)
    try:
        session.run_all()
        values = session.values(names) if names else {}
        pid = session.process.proc.pid
    finally:
        session.process.stop()
    return session, values, pid


#: A cell that writes a file in each temporary folder and names what it sees.
LOOK_AROUND = """
import os
tag = TAG
seen_before = {d: sorted(os.listdir(d)) for d in ('/tmp', '/var/tmp', '/dev/shm', '/run/lock')}
for d in ('/tmp', '/var/tmp', '/dev/shm', '/run/lock'):
    with open(f'{d}/left-{tag}', 'w') as f:
        f.write('x')
written = sorted(os.listdir('/tmp'))
pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
me = os.getpid()
judge_seen = os.path.exists(f'/proc/{JUDGE}')
"""


@needs_namespaces
def test_the_temporary_folders_are_private_and_go_with_the_student_process(sandbox, start):
    user, workdir = sandbox
    tag = uuid.uuid4().hex[:8]
    cell = f"TAG, JUDGE = {tag!r}, {os.getpid()}\n" + LOOK_AROUND
    names = ["seen_before", "written", "pids", "me", "judge_seen"]
    _, values, _ = _run(workdir, user, [cell], names)
    on_the_machine = [
        f"{d}/left-{tag}" for d in namespaces.PRIVATE_FOLDERS if os.path.exists(f"{d}/left-{tag}")
    ]
    assert on_the_machine == [], f"the student's files reached the machine: {on_the_machine}"
    # /tmp holds only the way to its scratch folder, bound through
    assert values["seen_before"]["/tmp"] == [workdir.parent.name], values["seen_before"]
    assert all(values["seen_before"][d] == [] for d in ("/var/tmp", "/dev/shm", "/run/lock")), (
        values["seen_before"]
    )
    assert values["written"] == sorted([workdir.parent.name, f"left-{tag}"]), values["written"]
    # warm or cold, the first process of its own PID namespace, alone in it
    assert values["me"] == 1 and values["pids"] == [1], (values["me"], values["pids"])
    assert values["judge_seen"] is False, "the student process sees the judge's process"


@needs_namespaces
def test_the_scratch_folder_stays_writable_and_the_interpreter_readable(sandbox, start):
    user, workdir = sandbox
    cell = (
        "import os, sys, json\n"
        "open('answer.txt', 'w').write('42')\n"
        "cwd, home = os.getcwd(), os.environ['HOME']\n"
        "import email.mime.text\n"  # a module nothing imported before: read from the interpreter
        "imported = 'email.mime.text' in sys.modules\n"
    )
    _, values, _ = _run(workdir, user, [cell], ["cwd", "home", "imported"])
    assert (workdir / "answer.txt").read_text() == "42", "the scratch folder is the judge's"
    assert values == {"cwd": str(workdir), "home": str(workdir), "imported": True}, values


#: A cell that asks for more System V shared memory than its memory limit allows, makes a message
#: queue, and tries to reach a port of the machine.
SYSTEM_V_AND_NETWORK = """
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
too_large = libc.shmget(0, ctypes.c_size_t((LIMIT_MB + 1) << 20), 0o1600)
queue = libc.msgget(0, 0o1600)
try:
    socket.create_connection(('127.0.0.1', PORT), timeout=2).close()
    reached = True
except OSError:
    reached = False
"""


@needs_namespaces
def test_system_v_objects_are_bounded_and_the_network_is_out_of_reach(sandbox, start):
    user, workdir = sandbox
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    limit = 4000
    cell = f"LIMIT_MB, PORT = {limit}, {listener.getsockname()[1]}\n" + SYSTEM_V_AND_NETWORK
    try:
        _, values, _ = _run(workdir, user, [cell], ["too_large", "queue", "reached"], limit)
    finally:
        listener.close()
    assert values["too_large"] == -1, "a segment over the memory limit should be refused"
    assert values["queue"] >= 0, "a message queue of its own should be made"
    assert values["reached"] is False, "the student process reached the machine's network"
    # the machine's table never held it (an id may repeat across namespaces: checked by owner)
    with open("/proc/sysvipc/msg") as f:
        nobodys = [line for line in f.readlines()[1:] if int(line.split()[7]) == user.pw_uid]
    assert nobodys == [], f"the student's queue is in the machine's table: {nobodys}"


@needs_namespaces
def test_what_the_private_folders_hold_counts_as_memory(sandbox, start):
    """400 MB held and 768 MB of files in ``/var/tmp`` pass a 1,000 MB limit together, though
    neither does alone (and the files stay under the private folders' size, the same limit)."""
    user, workdir = sandbox
    limit = 1000
    cell = (
        "import time\n"
        "held = bytearray(b'\\1') * (400 << 20)\n"
        "chunk = b'\\1' * (64 << 20)\n"
        "for i in range(12):\n"
        "    with open(f'/var/tmp/held-{i}', 'wb') as f:\n"
        "        f.write(chunk)\n"
        "del chunk\n"
        "time.sleep(3)\n"
        "done = True\n"
    )
    session, _, _ = _run(workdir, user, [cell], [], limit)
    problem = session.records[0].problem
    assert problem is not None and f"more than {limit} MB of memory" in problem, session.records[0]


@needs_namespaces
def test_the_mode_is_the_sandbox_users_where_namespaces_are_refused(sandbox, without_namespaces):
    user, workdir = sandbox
    session = Session(workdir, ["x = 1"], Limits(), user, time.monotonic() + 60)
    assert namespaces.isolation_mode() == namespaces.SANDBOX_USER_MODE
    assert session.process.isolated is False


def test_a_batch_without_namespaces_is_graded_one_submission_at_a_time(
    tmp_path, monkeypatch, capsys
):
    """As root where namespaces are refused, student processes side by side would share one user's
    temporary folders: ``grade --jobs 2`` grades one at a time, and says why."""
    from autograder import grade

    asked = {}
    monkeypatch.setattr(grade, "isolation_mode", lambda: namespaces.SANDBOX_USER_MODE)
    monkeypatch.setattr(grade, "_grade_many", lambda *args: asked.setdefault("jobs", args[3]))
    grade.grade_many(tmp_path / "autograder.zip", [], tmp_path / "out", jobs=2)
    assert asked == {"jobs": 1}, asked
    assert "one submission at a time, not 2" in capsys.readouterr().err
    monkeypatch.setattr(grade, "isolation_mode", lambda: namespaces.NAMESPACES)
    asked.clear()
    grade.grade_many(tmp_path / "autograder.zip", [], tmp_path / "out", jobs=2)
    assert asked == {"jobs": 2}, "in namespaces, side by side"


#: A cell that fills the buffers of 150 socket pairs (kernel memory, in no process's pages) and
#: holds them.
SOCKET_BUFFERS = """
import socket, time
pairs = []
for _ in range(150):
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    a.setblocking(False)
    try:
        while True:
            a.send(b"x" * 65536)
    except OSError:
        pass
    pairs.append((a, b))
time.sleep(3)
done = True
"""


@needs_namespaces
def test_kernel_memory_it_holds_counts(sandbox):
    """Socket buffers are kernel memory, resident in no process: 150 full socket pairs hold about
    a gigabyte, which counts against a 512 MB limit (uncounted, they would take the machine's
    memory, and the kernel would then stop the largest student beside it)."""
    from autograder import control_groups

    if control_groups.memory_group_parent() is None:
        pytest.skip("no writable memory controller here")
    user, workdir = sandbox
    session, _, _ = _run(workdir, user, [SOCKET_BUFFERS], [], 512)
    problem = session.records[0].problem
    assert problem is not None and "more than 512 MB of memory" in problem, session.records[0]


@needs_namespaces
def test_past_the_hard_limit_the_kernel_stops_it_and_the_results_say_memory(
    sandbox, monkeypatch
):
    """A student that passes its memory limit faster than the judge's checks see is stopped by the
    kernel at its memory group's hard limit, and the cell's problem says memory, not a crash. Here
    the hard limit is the limit itself, so the kernel always comes first."""
    from autograder import control_groups

    if control_groups.memory_group_parent() is None:
        pytest.skip("no writable memory controller here")
    monkeypatch.setattr(control_groups, "HARD_HEADROOM", 0.0)
    monkeypatch.setattr(control_groups, "MIN_HARD_HEADROOM_MB", 0)
    monkeypatch.setattr(control_groups, "group_memory_mb", lambda group: 0.0)  # the checks see none
    user, workdir = sandbox
    cell = "held = b'\\1' * (1 << 30)\ndone = True"
    session, _, _ = _run(workdir, user, [cell, "after = 1"], ["after"], 512)
    problem = session.records[0].problem
    assert problem is not None and "more than 512 MB of memory" in problem, session.records[0]
    assert [kind for kind, _ in session.process.limits_hit] == ["memory"], (
        session.process.limits_hit
    )


@needs_namespaces
def test_its_working_folder_leads_nowhere_on_the_machine(sandbox, start):
    """Its working folder is the one bound into its private ``/tmp``: ``..`` is the private folder
    above it, not the machine's folder of every grading's working folders."""
    user, workdir = sandbox
    cell = "import os\nsame = os.stat('..').st_ino == os.stat(os.path.dirname(os.getcwd())).st_ino"
    _, values, _ = _run(workdir, user, [cell], ["same"])
    assert values == {"same": True}, values
