"""The cell and call limits count the student's CPU seconds, not the machine's load.

Under load (load average 6 on 2 cores) a 3.6-second training takes 37.9 seconds
of wall-clock time, past the 30-second call limit, and the width sweep passes
the 60-second cell limit: limits in wall-clock time would cost a correct,
unchanged ``when_it_fails`` notebook 2 and 6 points. The limits count the CPU
seconds of the student's processes (the kernel's count for their control group
when the judge can make one, else their process tree's, read from ``/proc``),
with a wall-clock backstop (:data:`autograder.student_process.WALL_FACTOR`
times the limit) for a cell that sleeps or waits.

The tests that expect a CPU limit to stop work raise the wall-clock backstop
far above it, so that a loaded machine cannot make the backstop come first.
"""

from __future__ import annotations

import time

import pytest

from autograder import control_groups, process_tree, student_process
from autograder.judge_interface import Limits
from autograder.notes import _names_set_by, note_stopped_cells
from autograder.session import Session
from autograder.student_process import CellRecord, StudentFailure

BUSY = "while True: pass"
#: A cell whose child process loops while the cell itself waits for it (sleeping: no CPU of its
#: own).
BUSY_CHILD = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'while True: pass'])"
#: A child in a session of its own that loops; the cell sleeps.
BUSY_ESCAPED_CHILD = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'while True: pass'], start_new_session=True)\n"
    "time.sleep(600)"
)


def _run(workdir, cells: list[str], limits: Limits, user=None) -> Session:
    session = Session(workdir, cells, limits, user, time.monotonic() + 600)
    try:
        session.run_all()
        session.values(["after"])  # the process still answers
    finally:
        session.process.stop()
    return session


@pytest.fixture
def far_backstop(monkeypatch):
    """A wall-clock backstop far above the CPU limits: only CPU seconds can stop a cell."""
    monkeypatch.setattr(student_process, "WALL_FACTOR", 60.0)


@pytest.mark.parametrize("cell", [BUSY, BUSY_CHILD], ids=["busy_loop", "busy_child"])
def test_cpu_seconds_of_the_cell_and_its_children_count(tmp_path, far_backstop, cell):
    session = _run(tmp_path, ["x = 1", cell, "after = 2"], Limits(cell_seconds=2))
    actual = [record.problem for record in session.records]
    assert actual == [None, "interrupted: it used more than its 2 CPU seconds", None], actual
    assert session.process.limits_hit == [
        (
            "cell",
            "it used more than its 2 CPU seconds while running code cell 2, and was interrupted",
        )
    ], "the results list the limit, by kind"


def test_a_sleeping_cell_uses_no_cpu_seconds(tmp_path, far_backstop):
    session = _run(
        tmp_path, ["import time\ntime.sleep(4)\nslept = True", "after = 2"], Limits(cell_seconds=2)
    )
    actual = [(record.error, record.problem) for record in session.records]
    assert actual == [(None, None), (None, None)], (
        f"4 seconds of sleep are within 2 CPU seconds: {actual}"
    )


def test_the_wall_clock_backstop_ends_a_sleeping_cell(tmp_path, monkeypatch):
    monkeypatch.setattr(student_process, "WALL_FACTOR", 2.0)
    session = _run(tmp_path, ["import time\ntime.sleep(600)", "after = 2"], Limits(cell_seconds=1))
    problem = session.records[0].problem or ""
    assert problem.startswith(
        "interrupted: it was blocked or sleeping (2 seconds passed, and it used "
    ), problem
    assert problem.endswith(" of its 1 CPU seconds)"), problem
    assert session.records[1].problem is None
    assert [kind for kind, _ in session.process.limits_hit] == ["cell"], (
        "the wall-clock backstop is the cell's limit"
    )


def test_a_call_past_its_cpu_seconds_is_stopped_and_says_so(tmp_path, far_backstop):
    cells = ["def spin():\n    while True:\n        pass", "after = 2"]
    session = Session(tmp_path, cells, Limits(call_seconds=2), None, time.monotonic() + 600)
    try:
        session.run_all()
        spin = session.values(["spin"])["spin"]
        with pytest.raises(StudentFailure) as info:
            spin()
    finally:
        session.process.stop()
    assert (
        str(info.value) == "it used more than its 2 CPU seconds while calling spin, and was stopped"
    )
    assert info.value.limit == "call" and session.process.limits_hit == [
        ("call", str(info.value))
    ], session.process.limits_hit


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "read_only_cgroup"])
def test_a_sandboxed_students_escaped_child_counts(far_backstop, monkeypatch, cgroup, sandbox):
    """Sandboxed, the kernel counts the CPU group's CPU seconds, also of a process in a session of
    its own; where ``/sys/fs/cgroup`` is read-only (Gradescope's container), the process tree's
    count does."""
    if cgroup and control_groups.cpu_group_parent() is None:
        pytest.skip("the CPU group needs a writable CPU controller")
    if not cgroup:
        monkeypatch.setattr(control_groups, "cpu_group_parent", lambda: None)
    user, workdir = sandbox
    session = Session(
        workdir,
        ["x = 1", BUSY_ESCAPED_CHILD, "after = 2"],
        Limits(cell_seconds=2),
        user,
        time.monotonic() + 600,
    )
    session.process.start()
    group = session.process.groups.cpuacct or session.process.groups.cpu
    counted = None if group is None else control_groups.group_cpu_seconds(group)
    session.process.stop()
    session = _run(workdir, session.cells, session.limits, user)
    if cgroup:
        assert counted is not None and counted > 0, (
            f"the group {group} counts the worker's start: {counted}"
        )
    else:
        assert group is None, f"no group where /sys/fs/cgroup cannot be written: {group}"
    actual = [record.problem for record in session.records]
    assert actual == [None, "interrupted: it used more than its 2 CPU seconds", None], actual


def test_the_student_process_runs_one_thread_unless_a_cell_asks(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    cells = [
        "import torch, os\nblas = os.environ['OPENBLAS_NUM_THREADS']",
        "torch.set_num_threads(2)",
        "after = 1",
    ]
    session = _run(tmp_path, cells, Limits())
    assert session.torch_states == [[1, "torch.float32"], [2, "torch.float32"]], (
        session.torch_states
    )


def test_tree_cpu_keeps_what_ended_processes_used():
    tree = process_tree.TreeCpu()
    # 12 ended: reaped by 10, counted in its children
    tree.seen = {10: (1, 3.0), 11: (10, 2.0), 12: (10, 1.0)}
    tree.ended = 0.5
    # 11 and 12 are gone: 11's parent 10 is gone too, so 11 counts on; 12's time moved into 10's,
    # which ended
    assert tree.seconds([]) == 0.5 + 3.0 + 2.0 + 1.0
    tree.last = 100.0
    assert tree.seconds([]) == 100.0, "the count never goes down"


def test_a_question_that_lost_points_names_the_stopped_cell_that_sets_its_names():
    from otter.test_files.abstract_test import TestCase, TestCaseResult

    def q7(widths, sweep_errors, env):
        raise AssertionError("`sweep_errors` has no key 1000")

    def q8(dims, ratios):
        return None

    class File:
        def __init__(self, test, passed):
            case = TestCase(
                name="q",
                body=type("Body", (), {"test_func": staticmethod(test)})(),
                hidden=True,
                points=1,
                success_message=None,
                failure_message=None,
            )
            self.test_cases = [case]
            self.test_case_results = [
                TestCaseResult(case, "❌ Test case failed\nno key 1000", passed)
            ]

    def q9(X_aug):
        raise AssertionError("`X_aug` is not defined")

    cells = [
        "widths = [2, 4]\nsweep_errors = {}",
        "%%time\nfor w in widths:\n    sweep_errors[1000] = w",
        "dims = [1]\nratios = []\nratios.append(1)",
        "assert False\nX_aug = 1",
    ]
    records = [
        CellRecord(0),
        CellRecord(1, "KeyboardInterrupt:", "interrupted: it used more than its 60 CPU seconds"),
        CellRecord(
            2,
            None,
            "stopped: it used more than 3072 MB of memory while running code cell 3, and "
            "was stopped",
        ),
        CellRecord(3, "AssertionError:"),
    ]
    failed, passed, raised = File(q7, False), File(q8, True), File(q9, False)
    note_stopped_cells([failed, passed, raised], records, cells)
    assert failed.test_case_results[0].message == (
        "❌ Test case failed\nno key 1000\n`sweep_errors` may be missing or incomplete: code cell "
        "2, which sets it, "
        "was interrupted: it used more than its 60 CPU seconds."
    )
    assert passed.test_case_results[0].message == "❌ Test case failed\nno key 1000", (
        "a passed question is left"
    )
    assert raised.test_case_results[0].message == (
        "❌ Test case failed\nno key 1000\n"
        "`X_aug` may be missing or incomplete: code cell 4, which "
        "sets it, "
        "raised AssertionError."
    ), "a cell that raised before it set the name is named as the cause"


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            "a = 1\nb[0] = 2\nc.d = 3\ne.append(4)\nf += 1\nfor g in h: pass\ndef i(): "
            "pass\nimport j.k as l, m.n",
            {"a", "b", "c", "e", "f", "g", "i", "l", "m"},
        ),
        ("%%capture out\nx = 1", {"x"}),
        ("%matplotlib inline\ny = 2", {"y"}),
        ("this is not python", set()),
    ],
)
def test_the_names_a_cell_sets_are_read_from_its_code(source, expected):
    assert _names_set_by(source) == expected


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"cpuacct.usage": "2500000000\n"}, 2.5),
        ({"cpu.stat": "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n"}, 1.5),
        ({"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"}, None),
        ({}, None),
    ],
    ids=["v1_cpuacct", "v2", "v1_cpu_apart_from_cpuacct", "none"],
)
def test_a_groups_cpu_seconds_are_read_where_the_kernel_counts_them(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert control_groups.group_cpu_seconds(tmp_path) == expected


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"cpu/cpu.shares": "1024", "cpuacct/cpuacct.usage": "0"}, "cpuacct"),
        ({"cpu/cpu.shares": "1024", "cpu/cpuacct.usage": "0", "cpuacct/cpuacct.usage": "0"}, None),
        ({"cgroup.subtree_control": "cpu"}, None),
    ],
    ids=["v1_apart", "v1_together", "v2"],
)
def test_a_separate_cpuacct_hierarchy_is_found(files, expected, tmp_path, monkeypatch):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(control_groups, "CGROUP_ROOT", tmp_path)
    assert control_groups.cpuacct_parent() == (None if expected is None else tmp_path / expected)
