"""The student process as a notebook sees it: cell magics, ``%matplotlib``, Otter's seeding, cell
errors in the output, and a student process that stops talking in the middle of a reply.

A cell that starts with ``%%time`` or ``%%capture`` runs whole (seeding lines put in front of it
would make the magic a line magic), and ``%matplotlib inline`` keeps the grader's backend (in the
plain IPython shell it raises ``NotImplementedError``): otherwise the cell's answers would be lost,
and the output would not say why. A student process that writes half a frame and sleeps is stopped
within its cell's limit, not waited for past every limit.

Forked processes count the pages they share with their parent once: counted again for each, a
``DataLoader``'s four worker processes take an honest notebook past the memory limit.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder import (
    control_groups,
    scratch_folder,
    student_process,
)
from autograder import session as session_module
from autograder.judge_interface import Limits
from autograder.notes import CELLS_COUNTED, cell_notes
from autograder.process_tree import resident_kb
from autograder.session import Session
from autograder.student_process import StudentFailure
from autograder.submission import without_otter_calls
from tests.conftest import host_pid

SEED = 42

CELLS = [
    "%%time\nfirst = 1",
    "%%capture captured\nprint('hidden')\nsecond = 2",
    "%matplotlib inline\nimport matplotlib\nbackend = matplotlib.get_backend()",
    "import numpy as np, random\ndraws = [float(np.random.rand()), random.random()]",
    "undefined_name + 1",
    "after = 3",
]


@pytest.fixture
def session(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    session = Session(workdir, CELLS, Limits(), None, time.monotonic() + 120, seed=SEED)
    session.run_all()
    yield session
    session.process.stop()


def test_cell_magics_and_matplotlib_magics_run_the_whole_cell(session):
    actual = session.values(["first", "second", "backend", "after"])
    assert actual["first"] == 1, f"a %%time cell's code should run: {session.records[0]}"
    assert actual["second"] == 2, f"a %%capture cell's code should run: {session.records[1]}"
    assert actual["backend"].lower() == "agg", (
        f"%matplotlib keeps the grader's Agg backend: {actual['backend']!r}"
    )
    assert actual["after"] == 3, "the cell after one that raised still runs"
    assert [r.error for r in session.records[:4]] == [None] * 4, [r.error for r in session.records]


def test_every_cell_is_seeded_as_otter_seeds_it(session):
    expected_numpy = np.random.RandomState(SEED).rand()
    expected_random = random.Random(SEED).random()
    actual = session.values(["draws"])["draws"]
    assert actual == [expected_numpy, expected_random], (
        f"each cell starts from numpy's and random's generators seeded with {SEED}: {actual}"
    )


def test_a_cell_that_raised_is_named_in_the_output(session):
    notes = cell_notes(session.records)
    expected = (
        "Code cell 5 raised NameError: name 'undefined_name' is not defined; grading went on "
        "after it.")
    assert notes == [expected, CELLS_COUNTED], (
        f"one note, for the fifth cell, and how cells are counted: {notes}"
    )


def test_names_read_one_by_one_share_one_budget(tmp_path, monkeypatch):
    """Names read one by one share one budget: 12 names of 200 MB each are too large to cross
    together, but each is within the frame's limit, and read one by one and all kept they would hold
    2.6 GB. Here the frame's limit is 3 MB: four names of 1 MB cannot cross together, and read one
    by one the fourth is over the budget."""
    from autograder import channel
    from autograder.session import StudentEnvironment

    # the judge's: the frames it takes, and the budget
    monkeypatch.setattr(channel, "MAX_FRAME", 3 * 2**20)
    workdir = tmp_path / "work"
    workdir.mkdir()
    cells = ["import torch", *[f"{name} = torch.ones(2**18)" for name in "abcd"]]  # 1 MB each
    session = Session(workdir, cells, Limits(), None, time.monotonic() + 120, seed=SEED)
    try:
        session.run_all()
        env = StudentEnvironment(session, list("abcd"))
        env.refresh()
        actual = {name: type(env[name]).__name__ for name in "abcd"}
        assert actual == {"a": "Tensor", "b": "Tensor", "c": "Tensor", "d": "Opaque"}, (
            f"three names of 1 MB fit a budget of 3 MB, the fourth does not: {actual}"
        )
        assert "more than 3 MB of data in all" in env["d"].type_name, env["d"].type_name
    finally:
        session.process.stop()


def test_a_value_over_the_budget_leaves_the_other_names_of_its_payload_readable():
    """A value over the payload's budget is read as opaque, and the names read after it as usual: a
    key of 600 references to one string of a megabyte uses the budget up, and losing every name read
    after it would score 2/31 a notebook whose honest work earns 30."""
    from autograder import channel, encoding

    budget = encoding.Budget()
    huge = {channel.KIND: "list", "items": ["x" * 2**20] * 600}
    actual = [session_module._decoded(value, None, budget) for value in (huge, "after", huge, 7)]
    assert isinstance(actual[0], encoding.Opaque) and "more than 256 MB" in actual[0].type_name, (
        actual[0]
    )
    assert actual[1:] == ["after", actual[2], 7] and isinstance(actual[2], encoding.Opaque), (
        f"the names after it are read as if it were not there: {actual[1:]}"
    )


def test_a_name_too_large_to_read_does_not_take_the_names_read_with_it(tmp_path):
    """A snapshot reads its names together, and one by one when they cannot be read together: a
    name of 1,000 references to a string of 64 K characters (64 MB of JSON on the wire) is
    unreadable, and the name read with it is read (losing every graded name with it would score
    16/31)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    cells = ["big = ['x' * 2**16] * 1000", "then = 'y' * 2**21"]
    session = Session(workdir, cells, Limits(), None, time.monotonic() + 120, seed=SEED)
    try:
        session.run_all()
        with pytest.raises(StudentFailure, match="could not be read together"):
            session.values(["big", "then"], whole=True)
        actual = {**session.values(["big"]), **session.values(["then"])}
        assert isinstance(actual["big"], session_module.encoding.Opaque), actual["big"]
        assert "a payload header of" in actual["big"].type_name, actual["big"].type_name
        assert actual["then"] == "y" * 2**21, "the name read after it is read"
    finally:
        session.process.stop()


def test_what_functions_return_is_collected_before_it_piles_up(tmp_path, monkeypatch):
    """The garbage collector runs whenever the returns read since it last ran pass the frame's
    limit: for functions that return 252 MB on every input but the smallest, Hypothesis's failing
    examples keep 11 of the returns in reference cycles (8.3 GB) until it runs."""
    from autograder import channel

    # the judge's: collect past 3.5 MB returned
    monkeypatch.setattr(channel, "MAX_FRAME", 3.5 * 2**20)
    collected = []
    monkeypatch.setattr(session_module.gc, "collect", lambda *a: collected.append(1) or 0)
    workdir = tmp_path / "work"
    workdir.mkdir()
    cells = ["import torch", "def big():\n    return torch.zeros(2**18)"]  # 1 MB a call
    session = Session(workdir, cells, Limits(), None, time.monotonic() + 120, seed=SEED)
    try:
        session.run_all()
        big = session.values(["big"])["big"]
        returns = [big() for _ in range(7)]
        assert all(r.shape == (2**18,) for r in returns), "every call's return is read"
        assert len(collected) == 2, (
            f"7 returns of 1 MB: collected after the 4th and the 7th, not {len(collected)} times"
        )
    finally:
        session.process.stop()


def test_a_kept_result_is_the_student_processs_own_object_in_later_calls(tmp_path):
    """A result the student process kept (``keeping``) is passed to later calls as that process's
    own object, not sent again: a function that adds 1 to its argument in place sees its own
    earlier change. Only arguments the judge sent are reported as changed in place (the judge holds
    no copy of a kept value), and a kept value dies with its student process."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    cells = [
        "import numpy as np\n"
        "def make(n):\n    return np.arange(n, dtype=float)\n"
        "def bump(a):\n    a += 1\n    return float(a.sum())"
    ]
    session = Session(workdir, cells, Limits(), None, time.monotonic() + 120, seed=SEED)
    try:
        session.run_all()
        values = session.values(["make", "bump"])
        make, bump = values["make"], values["bump"]
        actual, kept = make.keeping("make(4)", 4)
        np.testing.assert_array_equal(actual, [0.0, 1.0, 2.0, 3.0])
        assert repr(kept) == "<kept make(4)>", repr(kept)
        # 0+1+2+3 plus 4 ones, then 4 more: the same object both times
        assert [bump(kept), bump(kept)] == [10.0, 14.0]
        assert bump.mutated_arguments == [], bump.mutated_arguments
        sent = torch.arange(4, dtype=torch.float64)
        assert bump(sent) == 10.0
        assert bump.mutated_arguments == [0], "an argument the judge sent is reported as changed"
        assert sent.tolist() == [0.0, 1.0, 2.0, 3.0], "the judge's own copy is untouched"
        session.rebuild()  # a fresh student process, the notebook replayed
        assert not kept.alive
        bump = session.values(["bump"])["bump"]
        with pytest.raises(StudentFailure, match=r"make\(4\), which the student process kept, is"):
            bump(kept)
    finally:
        session.process.stop()


def test_a_reply_that_the_function_raised_keeps_no_payload_sent_with_it():
    """A payload sent with a "raised" reply is not kept: the judge never reads it, and held by the
    exception's traceback (in the call's frame), 200 MB attached to a "raised" would stay as long as
    the verdict is kept."""
    import traceback

    class Process:
        generation, alive = 0, True

        def request(self, request, payload, timeout, what):
            return {"op": "raised", "type": "ValueError", "message": "no"}, b"x" * 1000

    class FakeSession:
        process, last_failure, returned_bytes = Process(), None, 0

        def call_timeout(self, what):
            return 1.0

    function = session_module.RemoteCallable(FakeSession(), 1, "f", "function", 0)
    with pytest.raises(session_module.StudentError, match="ValueError: no") as info:
        function(1)
    held = [frame.f_locals.get("body") for frame, _ in traceback.walk_tb(info.value.__traceback__)]
    assert not any(held), (
        f"the call's frame should not hold the payload: {[len(b or b'') for b in held]}"
    )


def test_a_function_whose_return_is_padded_with_thousands_of_tensors_is_not_read():
    """A function's return is read with the smaller allowance for replies: a right function that
    pads each return with 55,000 one-element tensors would cost the judge 9 seconds a return."""
    import torch

    from autograder import channel, encoding, tensor_payload

    replies = {
        "padded": [torch.ones(1)] + [torch.zeros(1)] * channel.MAX_REPLY_TENSORS,
        "honest": torch.ones(1),
    }

    class Process:
        generation, alive = 0, True

        def request(self, request, payload, timeout, what):
            reply = encoding.encode(replies[what.split()[-1]], {})
            return {"op": "result"}, tensor_payload.dump(reply)

    class FakeSession:
        process, last_failure, returned_bytes = Process(), None, 0

        def call_timeout(self, what):
            return 1.0

    actual = session_module.RemoteCallable(FakeSession(), 1, "padded", "function", 0)()
    assert isinstance(actual, encoding.Opaque), (
        f"a padded return should not be read: {type(actual).__name__}"
    )
    assert "a payload of more than 4096 tensors" in actual.type_name, actual.type_name
    honest = session_module.RemoteCallable(FakeSession(), 2, "honest", "function", 0)()
    assert torch.equal(honest, torch.ones(1)), f"an honest return is read: {honest!r}"


def test_more_than_ten_cells_that_raised_are_counted_not_listed():
    from autograder.student_process import CellRecord

    records = [CellRecord(i, f"ValueError: bad {i}\nmore lines") for i in range(12)]
    notes = cell_notes(records)
    assert len(notes) == 12, notes
    assert notes[0] == "Code cell 1 raised ValueError: bad 0; grading went on after it."
    assert notes[-2:] == ["2 more code cell(s) raised errors.", CELLS_COUNTED], notes
    assert cell_notes([CellRecord(0, None)]) == [], "a notebook whose cells all ran has no notes"


def test_a_reply_begun_and_never_finished_stops_the_student_process_in_time(tmp_path):
    # the cell writes the first bytes of a frame to the judge's socket itself, then sleeps: the
    # judge must not wait for the rest past the cell's limit
    hang = (
        "import socket, struct, sys, time\n"
        "s = socket.socket(fileno=int(sys.argv[-1]))\n"
        "s.sendall(struct.pack('!II', 100, 0) + b'{\"op\": ')\n"
        "time.sleep(600)"
    )
    limits = Limits(cell_seconds=3)
    session = Session(tmp_path, ["x = 1", hang, "y = 2"], limits, None, time.monotonic() + 120)
    started = time.monotonic()
    try:
        session.run_all()
        seconds = time.monotonic() - started
        values = session.values(["x", "y"])
    finally:
        session.process.stop()
    assert (
        session.records[1].problem is not None
        and "did not finish it within 3 seconds" in session.records[1].problem
    ), f"the second cell should be stopped for a reply it never finished: {session.records[1]}"
    assert values == {"x": 1, "y": 2}, (
        f"the cells before and after it run in a fresh student process: {values}"
    )
    assert seconds < 60, (
        f"the judge waited {seconds:.0f} s for a cell limited to 3 s (and 10 s of grace)"
    )


def test_a_request_the_student_process_never_reads_stops_it(tmp_path):
    session = Session(tmp_path, [], Limits(), None, time.monotonic() + 60)
    session.process.start()
    try:
        session.process.proc.send_signal(19)  # SIGSTOP: alive, reading nothing
        with pytest.raises(StudentFailure, match="did not take the request within 2 seconds"):
            session.process.request(
                {"op": "get", "names": ["x" * 100]}, b"\0" * (64 << 20), 2.0, what="testing"
            )
        assert not session.process.alive, "the student process is stopped"
    finally:
        session.process.stop()


def test_the_student_process_dies_with_a_judge_killed_from_outside(tmp_path):
    """The student process stops when its judge is killed from outside (as ``grade``'s timeout kills
    it), rather than run on."""
    import signal
    import subprocess
    import sys

    judge = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time\n"
                "from autograder.judge_interface import Limits\n"
                "from autograder.session import Session\n"
                f"session = Session({str(tmp_path)!r}, [], Limits(), None, time.monotonic() + 60)\n"
                "session.process.start()\n"
                # a cell that sleeps: the student process is not waiting on the socket
                "from autograder import channel\n"
                "channel.send(session.process.sock, {'op': 'exec', 'source': 'import time; "
                "time.sleep(600)'})\n"
                "print(session.process.proc.pid, flush=True)\n"
                "time.sleep(600)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        worker = int(judge.stdout.readline())
        time.sleep(1)
        assert _alive(worker), "the student process runs while its judge does"
        judge.send_signal(signal.SIGKILL)
        judge.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(worker):
            time.sleep(0.05)
        assert not _alive(worker), "the student process outlived its judge"
    finally:
        judge.kill()
        judge.wait()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for init to reap it does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def started_mb(tmp_path_factory) -> int:
    """The memory (MB, resident plus page tables, as the judge's worker check counts it) a student
    process holds once started: about 530 MB with the CUDA build of torch on this machine, over
    600 MB in one CI run, about 220 MB with the CPU build. Memory limits in these tests are set
    above it, so that the worker's start does not itself pass them (a fixed limit of 600 MB is under
    it in such a run)."""
    session = Session(
        tmp_path_factory.mktemp("started"),
        ["x = 1"],
        Limits(memory_mb=100_000),
        None,
        time.monotonic() + 120,
    )
    session.process.start()
    try:
        rss, pte, _ = resident_kb(session.process.proc.pid)
    finally:
        session.process.stop()
    return (rss + pte) // 1024


def _forking_cell(write: bool) -> str:
    """A cell holding 400 MB that forks four processes which keep it (``write``: each writes its own
    copy, as four processes that each allocate 400 MB would), waits long enough for several memory
    checks, and ends them."""
    return (
        "import os, time\n"
        "big = bytearray(b'\\1') * (400 << 20)\n"
        "children = []\n"
        "for _ in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        + ("        big[::4096] = b'\\2' * len(big[::4096])\n" if write else "")
        + "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "time.sleep(4)\n"
        "for pid in children:\n"
        "    os.kill(pid, 9)\n"
        "    os.waitpid(pid, 0)\n"
        "done = True"
    )


@pytest.mark.parametrize(
    "write, stopped", [(False, False), (True, True)], ids=["shared", "written"]
)
def test_forked_processes_count_the_memory_they_share_once(tmp_path, started_mb, write, stopped):
    # the worker's start plus 700 MB: the worker holds its start plus the 400 MB buffer, so five
    # processes' resident memory sums to over its start plus 2,000 MB whether or not the pages are
    # shared; shared, they use about its start plus 400 MB, written, about its start plus 2,000 MB
    limit = started_mb + 700
    limits = Limits(memory_mb=limit)
    session = Session(tmp_path, [_forking_cell(write)], limits, None, time.monotonic() + 120)
    try:
        session.run_all()
        problem = session.records[0].problem
        values = session.values(["done"])
    finally:
        session.process.stop()
    if stopped:
        assert problem is not None and f"more than {limit} MB of memory" in problem, (
            f"four processes that each write 400 MB should be stopped at {limit} MB: "
            f"{session.records[0]}"
        )
    else:
        assert problem is None and values == {"done": True}, (
            f"four forked processes sharing their parent's 400 MB should stay under {limit} MB: "
            f"{session.records[0]}"
        )


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv to run a judge without CAP_SYS_PTRACE",
)
def test_a_root_judge_without_ptrace_capability_reads_the_sandbox_users_share(tmp_path):
    # Docker's default capabilities (no CAP_SYS_PTRACE): root may not read another user's
    # smaps_rollup, but the same read with that user's file-system ids may
    docker_capabilities = (
        "+chown,+dac_override,+fsetid,+fowner,+mknod,+net_raw,+setgid,+setuid,+setfcap,"
        "+setpcap,+net_bind_service,+sys_chroot,+kill,+audit_write"
    )
    script = (
        "import subprocess, sys, time\n"
        "from autograder.process_tree import proportional_kb, resident_kb\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import time; big = bytearray(b\"\\\\1\") * (100 << 20); print(1, flush=True); "
        "time.sleep(60)'],"
        " user=65534, group=65534, stdout=subprocess.PIPE)\n"
        "child.stdout.readline()\n"
        "try:\n"
        "    try:\n"
        "        open(f'/proc/{child.pid}/smaps_rollup').read()\n"
        "        plain = 'readable'\n"
        "    except PermissionError:\n"
        "        plain = 'refused'\n"
        "    rss, _, owner = resident_kb(child.pid)\n"
        "    print(plain, owner, rss, proportional_kb(child.pid, owner), "
        "open('/proc/self/status').read().count('x'))\n"
        "finally:\n"
        "    child.kill()\n"
    )
    result = subprocess.run(
        [
            "setpriv",
            "--inh-caps=-all",
            f"--bounding-set=-all,{docker_capabilities}",
            sys.executable,
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0, result.stderr
    plain, uid, gid, rss, pss, _ = (
        result.stdout.replace("(", "").replace(")", "").replace(",", "").split()
    )
    assert plain == "refused", (
        "without CAP_SYS_PTRACE root cannot read the file directly (else this tests nothing)"
    )
    assert (int(uid), int(gid)) == (65534, 65534), result.stdout
    assert pss != "None" and 100 * 1024 <= int(pss) <= int(rss), (
        f"the share of a process holding 100 MB is read, and at most its resident memory: "
        f"{result.stdout}"
    )


def _runs_threads(pid: int) -> bool:
    """Whether ``pid`` still runs a thread besides its first (which showed it as a zombie)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


#: A cell whose grandchild leaves the session, ends its first thread alone (SYS_exit), so that
#: ``/proc`` shows it as a zombie while it runs, and then holds 1,000 MB in another thread; it
#: writes its pid to ``escaped``.
ESCAPING_HOLDER = r'''
import ctypes, os, threading, time
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    with open("escaped", "w") as f:
        f.write(str(os.getpid()))
    def hold():
        time.sleep(1)  # after the first thread has exited
        big = bytearray(b'\1') * (1000 << 20)
        os.write(w, b'x')
        while True:
            time.sleep(1)
    threading.Thread(target=hold).start()
    time.sleep(0.1)
    libc.syscall(60, 0)
os.waitpid(pid, 0)
os.read(r, 1)
time.sleep(3)
done = True
'''


def test_a_process_whose_first_thread_exited_is_counted_and_stopped(sandbox, started_mb):
    """A process whose first thread exited alone shows as a zombie while its other threads run: it
    is counted and stopped with the rest. Skipped as a zombie, it would hold memory past the limit
    unseen and outlive the grading (and could kill the next submission's student process, which runs
    as the same user)."""
    user, workdir = sandbox
    # the worker's start plus 400 MB: the escaped process holds 1,000 MB more
    limit = started_mb + 400
    session = Session(
        workdir,
        [ESCAPING_HOLDER, "after = 1"],
        Limits(memory_mb=limit),
        user,
        time.monotonic() + 120,
    )
    try:
        session.run_all()
        values = session.values(["done", "after"])
    finally:
        session.process.stop()
        escaped = int((workdir / "escaped").read_text()) if (workdir / "escaped").exists() else None
    problem = session.records[0].problem
    assert problem is not None and f"more than {limit} MB of memory" in problem, (
        f"the escaped process's 1,000 MB should stop the cell at {limit} MB: {session.records[0]}"
    )
    assert values == {"done": None, "after": 1}, f"the cell is lost and grading goes on: {values}"
    assert escaped is not None, "the cell should have written the escaped process's pid"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _runs_threads(escaped):
        time.sleep(0.05)
    assert not _runs_threads(escaped), "the escaped process outlived its grading"


def test_shared_memory_held_in_files_counts(sandbox, started_mb):
    """Memory held in memfds and in /dev/shm files is counted, though it is resident in no process
    (768 MB of each would otherwise go unseen), and the /dev/shm files are removed when the student
    process stops rather than outlive the grading."""
    user, workdir = sandbox
    cell = (
        "import os, time\n"
        "chunk = b'\\1' * (64 << 20)\n"
        "fds = []\n"
        "for i in range(8):\n"
        "    fd = os.memfd_create(f'm{i}')\n"
        "    os.write(fd, chunk)\n"
        "    fds.append(fd)\n"
        "for i in range(8):\n"
        "    with open(f'/dev/shm/held-{os.getpid()}-{i}', 'wb') as f:\n"
        "        f.write(chunk)\n"
        "del chunk\n"
        "time.sleep(3)\n"
        "done = True"
    )
    # the worker's start plus 400 MB: 2 x 512 MB more sits in the files
    limit = started_mb + 400
    session = Session(workdir, [cell], Limits(memory_mb=limit), user, time.monotonic() + 120)
    try:
        session.run_all()
    finally:
        session.process.stop()
    problem = session.records[0].problem
    assert problem is not None and f"more than {limit} MB of memory" in problem, (
        f"1 GB held in shared-memory files should stop the cell at {limit} MB: {session.records[0]}"
    )
    left = [name for name in os.listdir("/dev/shm") if name.startswith("held-")]
    assert left == [], (
        f"the sandbox user's /dev/shm files should be removed when its process stops: {left}"
    )


def test_system_v_shared_memory_counts_and_is_removed(sandbox):
    """System V shared memory, detached, is resident in no process and outlives it: it counts in the
    student's memory group, and goes with the student process (its IPC namespace's). The student
    process also opens at most 4,096 files and is the first the kernel's out-of-memory killer stops
    (memory no process holds is counted nowhere)."""
    if control_groups.memory_group_parent() is None:
        pytest.skip("no writable memory controller here: System V memory is then not counted")
    user, workdir = sandbox
    cell = (
        "import ctypes, time\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "for _ in range(16):\n"
        "    shmid = libc.shmget(0, 64 << 20, 0o1600)\n"  # IPC_PRIVATE, IPC_CREAT | 0600
        "    if shmid < 0:\n"  # its IPC namespace allows no more than the memory limit
        "        break\n"
        "    address = libc.shmat(shmid, None, 0)\n"
        "    ctypes.memset(address, 1, 64 << 20)\n"
        "    libc.shmdt(ctypes.c_void_p(address))\n"
        "time.sleep(3)\n"
        "done = True"
    )
    settings = (
        "import resource\n"
        "files = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "oom = open('/proc/self/oom_score_adj').read().strip()"
    )
    # 10 segments of 64 MB: all its IPC namespace allows, and with the worker's own pages more
    limit = 640
    session = Session(
        workdir, [cell, settings], Limits(memory_mb=limit), user, time.monotonic() + 120
    )
    try:
        session.run_all()
        values = session.values(["files", "oom"])
    finally:
        session.process.stop()
    problem = session.records[0].problem
    assert problem is not None and f"more than {limit} MB of memory" in problem, (
        f"640 MB or more of detached System V segments should stop the cell at {limit} MB: "
        f"{session.records[0]}"
    )
    with open("/proc/sysvipc/shm") as f:
        left = [
            line.split()[1] for line in f.readlines()[1:] if line.split()[7] == str(user.pw_uid)
        ]
    assert left == [], f"the sandbox user's segments should be gone when it stops: {left}"
    assert values["oom"] == "1000", (
        f"the student process is the out-of-memory killer's first: {values['oom']}"
    )
    assert values["files"][1] <= 4096, (
        f"the student process opens at most 4,096 files: {values['files']}"
    )


DEEP_CHAIN = (
    "import os, time\n"
    "home = os.getcwd()\n"
    "os.mkdir(f'chain-{os.getpid()}')\n"
    "os.chdir(f'chain-{os.getpid()}')\n"
    "for _ in range(DEPTH):\n"
    "    os.mkdir('d')\n"
    "    os.chdir('d')\n"
    "os.chdir(home)\n"
    "AFTER"
)


def test_a_deep_chain_in_the_scratch_folder_stops_its_cell_and_is_removed(sandbox):
    """A chain of 1,000 folders, one in another, in the scratch folder stops its cell with a reason,
    and the folder is put back as staged (the replay would otherwise start over the limit); grading
    goes on, and the next student process starts as usual."""
    user, workdir = sandbox
    (workdir / "support.py").write_text("x = 1\n")
    os.chown(workdir / "support.py", user.pw_uid, user.pw_gid)
    cells = [
        DEEP_CHAIN.replace("DEPTH", "1000").replace("AFTER", "time.sleep(3)\ndone = True"),
        "after = 1",
    ]
    session = Session(workdir, cells, Limits(memory_mb=100_000), user, time.monotonic() + 120)
    try:
        session.run_all()
        values = session.values(["done", "after"])
        left = sorted(p.name for p in workdir.iterdir() if p.name != ".ipython")  # the restart's
    finally:
        session.process.stop()
    problem = session.records[0].problem
    expected = f"made folders more than {scratch_folder.MAX_SCRATCH_DEPTH} deep in its own folder"
    assert problem is not None and expected in problem, (
        f"a chain 1,000 folders deep should stop its cell: {session.records[0]}"
    )
    assert values == {"done": None, "after": 1}, f"the cell is lost and grading goes on: {values}"
    assert left == ["support.py"], f"the scratch folder is put back as staged: {left}"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("import otter", "pass"),
        ("import otter, math", "import math"),
        ("import math, otter as o, numpy as np  # all three", "import math, numpy as np"),
        ("import os.path, otter.api", "import os.path"),
        ('grader = otter.Notebook("where_mlps_fail.ipynb")', "pass"),
        ('grader.check("q1_1");', "pass"),
        ('grader.check("q1_1")  # the public tests', "pass"),
        ("    grader.check_all()", "    pass"),
        ("import otterly", "import otterly"),
        ('result = grader.check("q1_1")', 'result = grader.check("q1_1")'),
        # splitlines would split this string in two (and a SyntaxError lose the cell)
        (
            'label = "T-shirt\u2028top"  # from the lesson\u2029page',
            'label = "T-shirt\u2028top"  # from the lesson\u2029page',
        ),
        # and 100,000 spaces must not take the patterns minutes (trying each split of the run
        # between two \s*)
        (
            "import os, sys" + " " * 100_000 + "; x = 1",
            "import os, sys" + " " * 100_000 + "; x = 1",
        ),
        ("import os, otter" + " " * 900 + "; x = 1", "import os, otter" + " " * 900 + "; x = 1"),
        ("import os, otter" + " " * 900, "import os"),
    ],
    ids=lambda value: " ".join(value.split())[:40],
)
def test_otter_calls_are_taken_out_line_by_line(line, expected):
    """Each Otter line becomes ``pass`` (a block it is alone in stays a block, and line numbers in
    tracebacks stay the student's), ``grader.check("q1_1");`` with its trailing semicolon too (left
    in the cell, its ``NameError`` would lose the lines after it); other modules of an import list
    stay imported (``import otter, torch`` taken out whole would leave ``torch`` unimported)."""
    assert without_otter_calls(line) == expected


def test_a_cell_with_otter_calls_runs_the_rest(tmp_path):
    cell = (
        "import otter, math\n"
        "grader = otter.Notebook('where_mlps_fail.ipynb')\n"
        "value = math.pi\n"
        "grader.check('q1_1');\n"
        "if value > 3:\n"
        "    grader.check('q1_2')  # inside a block\n"
        "after = 2"
    )
    session = Session(tmp_path, [without_otter_calls(cell)], Limits(), None, time.monotonic() + 120)
    try:
        session.run_all()
        values = session.values(["value", "after"])
    finally:
        session.process.stop()
    assert session.records[0].problem is None, session.records[0]
    assert values == {"value": math.pi, "after": 2}, values


# ---------------------------------------------------------------- the student's CPU group


def _cpu_group_of(pid: int) -> str | None:
    """The path of ``pid``'s group in the CPU controller (cgroup v1's ``cpu``, else v2's), from
    ``/proc``."""
    v2 = None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
        if hierarchy == "0":
            v2 = path
    return v2


#: A cell that starts a process in a session of its own (as ``setsid`` does) and writes its pid to
#: ``child``.
SESSION_STARTER = (
    "import subprocess\n"
    "child = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
    "open('child', 'w').write(str(child.pid))\n"
)


def test_the_students_processes_share_one_cpu_group_removed_when_it_stops(sandbox):
    """All of a student's processes are in one CPU group, which weighs as much as one session and is
    removed when the student process stops: the kernel shares the CPU between sessions, so 40 busy
    loops, each in a session of its own, would take the CPU from a submission graded beside them
    (0/31 instead of 31/31)."""
    if control_groups.cpu_group_parent() is None:
        pytest.skip("no writable CPU controller here (a container's read-only /sys/fs/cgroup)")
    user, workdir = sandbox
    session = Session(workdir, [SESSION_STARTER], Limits(), user, time.monotonic() + 120)
    try:
        session.run_all()
        group = session.process.groups.cpu
        child = host_pid(session.process.proc.pid, int((workdir / "child").read_text()))
        actual = {"worker": _cpu_group_of(session.process.proc.pid), "child": _cpu_group_of(child)}
    finally:
        session.process.stop()
    expected = f"/{control_groups.CPU_GROUP_PREFIX}{os.getpid()}"
    assert actual == {"worker": expected, "child": expected}, (
        f"the groups of the student's processes: {actual}"
    )
    assert group is not None and not group.exists(), (
        f"the group should be removed when the process stops: {group}"
    )


@pytest.mark.parametrize(
    "files, self_cgroup, expected",
    [
        ({"cpu/cpu.shares": "1024"}, "1:cpu:/\n0::/\n", "cpu"),
        ({"cgroup.subtree_control": "cpu memory pids"}, "0::/\n", "."),
        ({"cgroup.subtree_control": "memory pids"}, "0::/\n", None),
        ({"cgroup.subtree_control": "cpu memory"}, "0::/system.slice/grading.service\n", None),
        ({}, "0::/\n", None),
    ],
    ids=["v1_cpu", "v2_root_with_cpu", "v2_without_cpu", "v2_not_in_root", "none"],
)
def test_the_cpu_controller_is_found_where_it_can_be_used(
    files, self_cgroup, expected, tmp_path, monkeypatch
):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "self").write_text(self_cgroup)
    monkeypatch.setattr(control_groups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(control_groups, "SELF_CGROUP", tmp_path / "self")
    actual = control_groups.cpu_group_parent()
    assert actual == (None if expected is None else tmp_path / expected), (
        f"expected {expected}, got {actual}"
    )


def test_cpu_groups_of_judges_that_stopped_are_removed(tmp_path, monkeypatch):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.shares").write_text("1024")
    monkeypatch.setattr(control_groups, "CGROUP_ROOT", tmp_path)
    ended = subprocess.Popen(["true"])
    ended.wait()
    running = subprocess.Popen(["sleep", "30"])
    try:
        for pid in (ended.pid, running.pid):
            (tmp_path / "cpu" / f"{control_groups.CPU_GROUP_PREFIX}{pid}").mkdir()
        (tmp_path / "cpu" / "another-service").mkdir()
        group = control_groups.make_cpu_group()
    finally:
        running.kill()
        running.wait()
    actual = sorted(p.name for p in (tmp_path / "cpu").iterdir() if p.is_dir())
    expected = sorted(
        [
            "another-service",
            f"{control_groups.CPU_GROUP_PREFIX}{running.pid}",
            f"{control_groups.CPU_GROUP_PREFIX}{os.getpid()}",
        ]
    )
    assert actual == expected, (
        f"only the stopped judge's group is removed, and this judge's made: {actual}"
    )
    assert group == tmp_path / "cpu" / f"{control_groups.CPU_GROUP_PREFIX}{os.getpid()}", group


# ---------------------------------------------------------------- what the student leaves in /tmp
# and /var/tmp


#: A cell that makes a System V message queue holding a message, and a semaphore set, and names
#: their ids.
def test_a_setuid_program_runs_as_the_sandbox_user(sandbox):
    """The student's processes may not gain privileges (``PR_SET_NO_NEW_PRIVS``), so a setuid
    program runs as the sandbox user: 254 ``su`` processes, each waiting forever for a password,
    with root as their effective user, would be left running by the judge (which finds the student's
    processes by owner), and every later grading as that user would have one process left under its
    limit."""
    user, workdir = sandbox
    cell = (
        "import subprocess\n"
        "child = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
        "open('child', 'w').write(str(child.pid))\n"
    )
    session = Session(workdir, [cell], Limits(), user, time.monotonic() + 120)
    try:
        session.run_all()
        child = host_pid(session.process.proc.pid, int((workdir / "child").read_text()))
        actual = {}
        for name, pid in (("worker", session.process.proc.pid), ("child", child)):
            status = Path(f"/proc/{pid}/status").read_text()
            actual[name] = [
                line.split()[1] for line in status.splitlines() if line.startswith("NoNewPrivs:")
            ]
    finally:
        session.process.stop()
    assert actual == {"worker": ["1"], "child": ["1"]}, (
        f"NoNewPrivs of the student's processes: {actual}"
    )


def test_every_process_in_the_students_cpu_group_is_stopped_with_it(sandbox):
    """Whatever user a process in the student's CPU group runs as (a setuid program's runs as root),
    it is the student's, and is stopped with the student process."""
    if control_groups.cpu_group_parent() is None:
        pytest.skip("no writable CPU controller here (a container's read-only /sys/fs/cgroup)")
    user, workdir = sandbox
    session = Session(workdir, ["ready = True"], Limits(), user, time.monotonic() + 120)
    other = subprocess.Popen(["sleep", "60"])  # root's, as a setuid program's would be
    try:
        session.run_all()
        assert control_groups.join_cpu_group(session.process.groups.cpu, other.pid), (
            "the process should join the group"
        )
    finally:
        session.process.stop()
        try:
            other.wait(timeout=10)
            survived = False
        except subprocess.TimeoutExpired:
            survived = True
            other.terminate()  # SIGTERM: not mistaken for the judge's SIGKILL below
            other.wait()
    assert not survived and other.returncode == -signal.SIGKILL, (
        f"root's process in the student's group should be killed with it (survived: {survived})"
    )


class _Replies:
    """A student process that answers every cell with ``reply`` (the judge side of :class:`Session`
    only)."""

    generation, alive, interrupted_for = 0, True, None

    def __init__(self, reply: dict):
        self.reply = reply

    def start(self):
        pass

    def request(self, request, payload, timeout, what, interrupt=False, limit="call"):
        return dict(self.reply), b""


@pytest.mark.parametrize(
    "error, expected",
    [
        ("AssertionError: ", "AssertionError"),
        ("AssertionError:", "AssertionError"),
        ("ValueError: bad: x", "ValueError: bad: x"),
        (None, None),
    ],
)
def test_an_exception_without_a_message_is_named_without_a_colon(error, expected):
    assert student_process.first_line(error) == expected


def test_the_judge_keeps_only_the_first_line_of_what_each_cell_raised(tmp_path):
    """The judge keeps no output, only each error's first line, and only for the cells the notes
    name: 256 KB of output in every cell's reply, kept for every cell of the notebook, would hold
    7 GB after 24,000 empty cells."""
    cells = ["pass"] * 40
    session = Session(tmp_path, cells, Limits(), None, time.monotonic() + 120, seed=SEED)
    session.process = _Replies(
        {
            "op": "done",
            "error": "ValueError: " + "é" * 65_536 + "\nsecond line",
            "output": "\U0001f600" * 65_536,
        }
    )
    session.run_all()
    actual = session.records
    assert len(actual) == 40, f"one record a cell: {len(actual)}"
    assert not hasattr(actual[0], "output"), (
        f"no output is kept: {len(getattr(actual[0], 'output', ''))} characters"
    )
    cut = student_process.MAX_ERROR_LINE
    assert actual[0].error == ("ValueError: " + "é" * 65_536)[:cut], (
        f"the first line, cut at {cut} characters: {len(actual[0].error)} "
        f"characters kept"
    )
    kept = [r.index for r in actual if r.error != student_process.ERROR_NOT_KEPT]
    assert kept == list(range(student_process.MAX_CELL_ERRORS_NOTED)), (
        f"the first 10 errors kept, the rest counted: {kept}"
    )
    notes = cell_notes(actual)
    assert notes[-2:] == ["30 more code cell(s) raised errors.", CELLS_COUNTED], notes[-2:]


def test_cells_the_deadline_left_no_time_for_share_one_note():
    from autograder.student_process import NOT_RUN, CellRecord

    records = [CellRecord(0, None, "stopped: it used more than 3072 MB")] + [
        CellRecord(i, None, NOT_RUN) for i in range(1, 5000)
    ]
    actual = cell_notes(records)
    assert actual == [
        "Code cell 1 stopped: it used more than 3072 MB; grading went on without it.",
        "Code cells 2 to 5000 were not run: the grading deadline passed.",
        CELLS_COUNTED,
    ], actual
    assert (
        cell_notes([CellRecord(0, None, NOT_RUN)])[0]
        == "Code cell 1 not run: the grading deadline passed."
    ), "one cell not run is named alone"
    stopped = cell_notes(
        [
            CellRecord(i, None, "interrupted: it used more than its 60 CPU seconds")
            for i in range(12)
        ]
    )
    assert stopped[-2:] == ["2 more code cell(s) were stopped.", CELLS_COUNTED], stopped


def _first_cell_is_stopped(
    workdir: Path, user, cell: str, expected: str, then: Callable[[], None] = lambda: None
):
    """Run ``cell`` and then ``after = 1``: the first is stopped with a problem that says
    ``expected``, grading goes on after it, and ``then()`` holds before the student process
    stops."""
    session = Session(
        workdir, [cell, "after = 1"], Limits(), user, time.monotonic() + 120, seed=SEED
    )
    try:
        session.run_all()
        problem = session.records[0].problem or ""
        assert expected in problem, f"the cell should be stopped ({expected}): {session.records[0]}"
        assert session.values(["after"])["after"] == 1, "grading goes on after the stopped cell"
        then()
    finally:
        session.process.stop()


def test_the_walk_reads_a_folder_one_entry_at_a_time(tmp_path):
    """The walk holds one entry at a time: listing every entry with its lstat before removing any
    takes 7 GB for 7.2 million hard links. Here 20,000 entries, which listed whole take about
    16 MB."""
    import tracemalloc

    target = tmp_path / "target"
    target.write_bytes(b"")
    for i in range(20_000):
        # hard links: no data, one inode
        os.link(target, tmp_path / f"link-{i}")
    tracemalloc.start()
    try:
        count = sum(1 for _ in scratch_folder._walk(os.getuid(), str(tmp_path), frozenset(), False))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_001, f"every entry is walked: {count}"
    assert peak < 2 * 2**20, (
        f"the walk should hold one entry at a time, not the folder: {peak / 2**20:.1f} MB"
    )
    scratch_folder.restore(os.getuid(), tmp_path, frozenset())
    assert list(tmp_path.iterdir()) == [], "every entry of the user's is removed"


def test_files_kept_in_the_scratch_folder_are_counted(tmp_path, monkeypatch):
    """What the student keeps in its own folder is counted on every memory check, so that removing
    it when the grading ends stays quick; what was staged there does not count."""
    workdir = tmp_path / "work"
    (workdir / "deeper").mkdir(parents=True)
    (workdir / "support.py").write_text("x = 1\n")
    staged = scratch_folder.staged(os.getuid(), workdir)
    monkeypatch.setattr(scratch_folder, "MAX_SCRATCH_ENTRIES", 50)
    for i in range(40):
        (workdir / "deeper" / f"w{i}").write_bytes(b"")
    assert scratch_folder.count(os.getuid(), workdir, staged) == 40, "40 files, the rest staged"
    for i in range(20):
        (workdir / f"t{i}").write_bytes(b"")
    with pytest.raises(
        scratch_folder.TooManyFiles, match="kept more than 50 files and folders in its own folder"
    ):
        scratch_folder.count(os.getuid(), workdir, staged)


def test_a_cell_that_makes_too_many_files_is_stopped(sandbox, monkeypatch):
    """A cell that keeps more files in its scratch folder than the limit (a student may make 7.2
    million hard links there, which the judge removes afterwards) is stopped, and its scratch
    folder put back as it was staged."""
    user, workdir = sandbox
    monkeypatch.setattr(scratch_folder, "MAX_SCRATCH_ENTRIES", 200)
    cell = "import os, time\nfor i in range(300):\n    open(f'f{i}', 'w').close()\ntime.sleep(20)"

    def put_back() -> None:
        left = sorted(p.name for p in workdir.glob("f*"))
        assert left == [], (
            f"the scratch folder is put back as staged, or the replay stops at once: {left[:5]}"
        )

    _first_cell_is_stopped(workdir, user, cell, "kept more than 200 files and folders", put_back)


def test_a_cell_that_keeps_too_many_megabytes_is_stopped(sandbox, monkeypatch):
    """A cell that keeps more bytes of files in its scratch folder than the limit is stopped (each
    file may hold 512 MB: a few dozen would fill the machine's disk under every grading on it), and
    its scratch folder put back as it was staged. Here the limit is 64 MB."""
    user, workdir = sandbox
    monkeypatch.setattr(scratch_folder, "MAX_SCRATCH_MB", 64)
    cell = (
        "import os, time\n"
        "for i in range(3):\n"
        "    fd = os.open(f'big{i}', os.O_WRONLY | os.O_CREAT, 0o600)\n"
        "    os.posix_fallocate(fd, 0, 40 << 20)\n"
        "    os.close(fd)\n"
        "time.sleep(20)"
    )

    def put_back() -> None:
        left = sorted(p.name for p in workdir.glob("big*"))
        assert left == [], f"the scratch folder is put back as staged: {left}"

    _first_cell_is_stopped(workdir, user, cell, "kept more than 64 MB of files", put_back)
