"""Grading cost, measured: ``python -m benchmarks.run [--assignments NAME ...] [--batch N]
[--repeat N] [--update]``.

For each assignment's solution notebook, side by side in one run:

* (a) **plain**: the notebook executed with nbclient, no grading at all (its
  ``grader.check`` lines removed, as the judge removes them): the least a
  grade can cost;
* (b) **judge**: ``python -m autograder grade NAME solution.ipynb`` (the CLI's
  ``main()``, with its build folder pointed at this benchmark's scratch
  build, so nothing under ``build/`` is touched): the hardened judge,
  property tests on, with the reference values computed beforehand into the
  build's answers folder by ``python -m autograder.answers_cache fill``, as
  ``docker/install.sh`` computes them once for the grading image (that fill
  is measured on its own row);
* (c) **otter**: ``otter run`` on the same autograder zip: Otter's own path;

and a bare ``python -c "import torch, torchvision"`` as the baseline, all
four with one torch thread (see :func:`run_env`). The baseline, (a) and (b)
run ``--repeat`` times (default 3; (a) and (b) taking turns), and each row is
the run of the fewest CPU seconds (:func:`least_cpu`). ``--batch N`` also grades
N submissions of ``where_mlps_fail`` (every third the solution, the others
the catalogue's wrong submissions) with ``--jobs 1`` and ``--jobs 2``, after
the same fill, beside one plain run of the solution.

Each run is measured for wall seconds, CPU seconds (every process of the
run, from ``getrusage(RUSAGE_CHILDREN)``) and memory, four ways:

* **cgroup peak**: when a memory cgroup can be created (cgroup v1 memory
  hierarchy, or v2 with the memory controller delegated), each run starts in
  a fresh cgroup of its own (a ``sh`` wrapper writes its pid into
  ``cgroup.procs``, then execs the command), and the peak is the kernel's
  ``memory.max_usage_in_bytes`` (v2: ``memory.peak``): the operating
  system's accounting of the whole process tree, what a Docker or Gradescope
  memory limit counts. The cgroup is created below the benchmark's own
  cgroup (falling back to the hierarchy's root) and removed afterwards.
* **anon peak**: the cgroup's anonymous memory (``memory.stat``
  ``total_rss``; v2 ``anon``), sampled every 50 ms: memory no limit can
  reclaim (no swap).
* **PSS peak**: the sum of ``Pss`` from ``/proc/PID/smaps_rollup`` over the
  run's processes, sampled about once a second (one read costs ~60 ms for a
  process that imported torch): shared pages divided among the processes
  that map them.
* **RSS sum peak**: the sum of resident sets, sampled every 50 ms; it counts
  the shared library pages of torch once per process, so it overstates a
  tree of two torch processes (the judge and the student process).

Without a cgroup the cgroup columns read "n/a" and the report says why.

The report is printed and written to ``benchmarks/results.md`` with the
date, the machine and the load average before each run. With ``--update``
the sections of the existing file that this run does not measure are kept.
Targets (issues 3 and 8) are printed beside the figures; nothing asserts
them.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MB = 2**20
#: Seconds between samples of the cgroup's statistics and the resident sets.
FAST_SAMPLE = 0.05
#: At most this fraction of one core goes to reading ``smaps_rollup``.
PSS_CPU_SHARE = 0.1

#: Targets of issues 3 and 8 (on this 2-core machine).
TARGET_OVERHEAD = 1.3
TARGET_CPU_SECONDS = 60.0
TARGET_MEMORY_MB = 350.0
TARGET_SPEEDUP = 1.8
TARGET_BATCH_CPU = 1.15


# --------------------------------------------------------------------------- memory cgroups

def _memory_hierarchy() -> tuple[str, Path, str] | None:
    """``(version, mount point, this process's cgroup path)`` of the memory controller, or
    ``None``."""
    own_v1 = own_v2 = None
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hierarchy, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                own_v1 = path
            elif hierarchy == "0" and controllers == "":
                own_v2 = path
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, fs = left.split(), right.split()
        if len(fields) < 5 or len(fs) < 3:
            continue
        if fs[0] == "cgroup" and "memory" in fs[2].split(",") and own_v1 is not None:
            return "v1", Path(fields[4]), own_v1
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, fs = left.split(), right.split()
        if len(fields) >= 5 and fs and fs[0] == "cgroup2" and own_v2 is not None:
            return "v2", Path(fields[4]), own_v2
    return None


class MemoryCgroup:
    """A fresh memory cgroup for one run: created by :meth:`create`, removed by :meth:`remove`."""

    _count = 0

    def __init__(self, version: str, path: Path):
        self.version, self.path = version, path

    @classmethod
    def create(cls) -> tuple[MemoryCgroup | None, str]:
        """``(cgroup, where)``, or ``(None, why not)``.

        Tried below this process's own memory cgroup first (the run stays
        inside whatever contains the benchmark), then at the hierarchy's root.
        """
        found = _memory_hierarchy()
        if found is None:
            return None, "no memory cgroup hierarchy is mounted"
        version, mount, own = found
        peak_file = "memory.max_usage_in_bytes" if version == "v1" else "memory.peak"
        problems = []
        for parent in dict.fromkeys([mount / own.lstrip("/"), mount]):
            cls._count += 1
            path = parent / f"vision-bench-{os.getpid()}-{cls._count}"
            try:
                path.mkdir()
            except OSError as err:
                problems.append(f"mkdir {path}: {err.strerror}")
                continue
            if (path / peak_file).exists() and (path / "cgroup.procs").exists():
                return cls(version, path), f"cgroup {version}, {path.parent}"
            problems.append(f"{path} has no {peak_file} (memory controller not enabled there)")
            try:
                path.rmdir()
            except OSError:
                pass
        return None, "; ".join(problems)

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` started by a shell that first moves itself into this cgroup."""
        return [
            "/bin/sh",
            "-c",
            'echo $$ > "$0" && exec "$@"',
            str(self.path / "cgroup.procs"),
            *command,
        ]

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def peak_bytes(self) -> int:
        name = "memory.max_usage_in_bytes" if self.version == "v1" else "memory.peak"
        return int((self.path / name).read_text().split()[0])

    def anon_bytes(self) -> int:
        wanted = "total_rss" if self.version == "v1" else "anon"
        try:
            for line in (self.path / "memory.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == wanted:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kill what the run left in the cgroup (its own processes), then remove the cgroup."""
        from autograder.process_tree import kill_until_gone

        kill_until_gone(self.pids, rounds=100, pause=0.05)
        for _ in range(40):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
        print(f"warning: could not remove {self.path}", file=sys.stderr)


# --------------------------------------------------------------------------- process memory


def _process_table() -> dict[int, tuple[int, int]]:
    """``{pid: (ppid, resident pages)}`` of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            table[int(entry)] = (int(fields[1]), int(fields[21]))
        except (OSError, IndexError, ValueError):
            continue
    return table


def _tree(root: int, table: dict[int, tuple[int, int]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def _pss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError):
            pass
    return total


@dataclass
class Run:
    """One measured command. Memory in MB; ``None`` where it could not be measured."""

    wall: float = 0.0
    cpu: float = 0.0
    exit: int = 0
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cgroup_peak: float | None = None
    anon_peak: float | None = None
    pss_peak: float = 0.0
    rss_peak: float = 0.0
    accounting: str = ""


def measure(
    command: list[str], cwd: Path | None = None, env: dict | None = None, pss: bool = True
) -> Run:
    """Run ``command``, measuring time, CPU and memory of its whole process tree (see the module
    doc)."""
    run = Run(load=os.getloadavg())
    cgroup, where = MemoryCgroup.create()
    run.accounting = where if cgroup is not None else f"no cgroup ({where})"
    page = os.sysconf("SC_PAGE_SIZE")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            cgroup.wrap(command) if cgroup else command,
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise
    done = threading.Event()
    peaks = {"rss": 0, "anon": 0, "pss": 0}

    def pids() -> list[int]:
        if cgroup is not None:
            return cgroup.pids()
        return _tree(proc.pid, _process_table())

    def sample_fast():
        while not done.is_set():
            table = _process_table()
            members = cgroup.pids() if cgroup is not None else _tree(proc.pid, table)
            peaks["rss"] = max(peaks["rss"], sum(table.get(p, (0, 0))[1] for p in members) * page)
            if cgroup is not None:
                peaks["anon"] = max(peaks["anon"], cgroup.anon_bytes())
            done.wait(FAST_SAMPLE)

    def sample_pss():
        while not done.is_set():
            t0 = time.perf_counter()
            peaks["pss"] = max(peaks["pss"], _pss_bytes(pids()))
            cost = time.perf_counter() - t0
            done.wait(max(0.25, cost / PSS_CPU_SHARE))

    samplers = [threading.Thread(target=sample_fast, daemon=True)]
    if pss:
        samplers.append(threading.Thread(target=sample_pss, daemon=True))
    for thread in samplers:
        thread.start()
    try:
        run.exit = proc.wait()
    finally:
        run.wall = time.perf_counter() - started
        done.set()
        for thread in samplers:
            thread.join()
        if cgroup is not None:
            run.cgroup_peak = cgroup.peak_bytes() / MB
            run.anon_peak = peaks["anon"] / MB
            cgroup.remove()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run.pss_peak, run.rss_peak = peaks["pss"] / MB, peaks["rss"] / MB
    return run


# --------------------------------------------------------------------------- the runs

PLAIN = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=False).execute()
"""

#: ``python -m autograder ...`` with the build folder pointed elsewhere (argv[1]).
CLI = """
import sys
from pathlib import Path
from autograder import build
build.BUILD = Path(sys.argv[1])
from autograder.cli import main
sys.exit(main(sys.argv[2:]))
"""


def grade_command(work: Path, name: str, submissions: list[Path], out: Path, *options: str) -> list:
    """``python -m autograder grade NAME SUBMISSION... [OPTIONS] --out OUT`` with the build folder
    of this benchmark's scratch ``work`` (:data:`CLI`)."""
    return [
        PYTHON, "-c", CLI, str(work / "build"), "grade", name, *map(str, submissions), *options,
        "--out", str(out),
    ]  # fmt: skip


def run_env(one_thread: bool) -> dict:
    """The environment of a run: the caller's, with a headless matplotlib and one OpenBLAS thread.

    ``OPENBLAS_NUM_THREADS=1`` is what ``grade_one`` sets for the judge too.
    ``one_thread`` also sets torch's OpenMP and MKL threads to one: the runs
    of one assignment are compared under that setting, because with two
    threads on this shared 2-core machine the notebooks' many small training
    steps slow down up to tenfold whenever another job takes a core (the
    OpenMP threads wait on each other), which made the comparisons noise.
    Gradescope's half a vCPU gives one thread's worth of CPU anyway. The
    batch runs keep the threads ``grade_many`` chooses (one per grading at
    ``--jobs 2``).
    """
    env = dict(os.environ, MPLBACKEND="Agg")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if one_thread:
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("VISION_AUTOGRADER_ANSWERS_DIR", None)
    return env


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _score(results_json: Path) -> str:
    try:
        results = json.loads(results_json.read_text())
    except (OSError, ValueError):
        return "no results"
    tests = [t for t in results.get("tests", []) if t.get("max_score")]
    total = sum(float(t.get("score") or 0) for t in tests)
    possible = sum(float(t["max_score"]) for t in tests)
    if not tests:
        return "not graded"
    if total < possible:  # the solution should score full marks: say what the grader said
        lost = [
            str(t["name"]).split(" - ")[0]
            for t in tests
            if float(t.get("score") or 0) < float(t["max_score"])
        ]
        note = " ".join(str(results.get("output") or "").split())[:200]
        noted = f"; {note}" if note else ""
        return f"{total:g}/{possible:g} (lost {', '.join(dict.fromkeys(lost))}{noted})"
    return f"{total:g}/{possible:g}"


def build(name: str, work: Path):
    from autograder.build import build_assignment

    return build_assignment(
        name, run_tests=False, build_root=work / "build", student_root=work / "student"
    )


def plain_notebook(solution: Path, out: Path) -> Path:
    """``solution`` as the student runs it, without Otter: ignored cells dropped, ``grader`` lines
    removed.

    The same cells the judge executes (:func:`autograder.submission.cells_to_run`
    without the seeds); ``grader.check`` needs the public tests, which are
    not beside the notebook here.
    """
    import nbformat

    from autograder.submission import OTTER_LINE

    nb = nbformat.read(solution, as_version=4)
    kept = []
    for cell in nb.cells:
        meta = cell.get("metadata", {})
        if cell.cell_type == "code":
            if "otter_ignore" in meta.get("tags", []) or meta.get("otter", {}).get("ignore", False):
                continue
            cell.source = "\n".join(
                line for line in cell.source.splitlines() if not OTTER_LINE.match(line)
            )
        kept.append(cell)
    nb.cells = kept
    nbformat.write(nb, out)
    return out


def least_cpu(runs: list[tuple[Run, str]]) -> tuple[Run, str]:
    """Of repeated runs of one command, the one that used the fewest CPU seconds (its memory and
    outcome with it); a run that failed is returned instead, so a failure is never hidden.

    Other work on a shared machine only ever adds to a run's CPU seconds (caches and memory
    bandwidth shared with it), by up to about a quarter here: the least of a few runs is the
    nearest to the run's own cost, as ``timeit`` takes the least of its repeats.
    """
    failed = [r for r in runs if r[0].exit != 0]
    return failed[0] if failed else min(runs, key=lambda r: r[0].cpu)


def bench_assignment(
    name: str, work: Path, pss: bool = True, repeat: int = 1
) -> dict[str, tuple[Run, str]]:
    """``{label: (run, outcome)}`` for the baseline and the three ways of running ``name``'s
    solution; the baseline, the plain run and ``grade`` each ``repeat`` times (the last two taking
    turns), each row the run of the fewest CPU seconds (:func:`least_cpu`)."""
    built = build(name, work)
    solution = built.solution
    run_dir = work / f"plain-{name}"
    # the support files beside the notebook
    shutil.copytree(built.autograder_zip.parent / "master", run_dir)
    notebook = plain_notebook(solution, run_dir / "plain.ipynb")
    env = run_env(one_thread=True)
    rows = {}
    # repeated too: a read of torch's files that are not in the page cache is charged to the run
    # that reads them (about 190 MB), which would make every other row's "above" too small
    rows["import torch, torchvision"] = least_cpu(
        [
            (measure([PYTHON, "-c", "import torch, torchvision"], env=env, pss=pss), "")
            for _ in range(repeat)
        ]
    )
    fill = fill_answers(name, work, env, pss)
    plains, judges = [], []
    for _ in range(repeat):
        plain = measure([PYTHON, "-c", PLAIN, str(notebook)], cwd=run_dir, env=env, pss=pss)
        plains.append((plain, "ran" if plain.exit == 0 else f"exit {plain.exit}"))
        judge_out = _fresh(work / f"judge-{name}")
        judge = measure(
            grade_command(work, name, [solution], judge_out),
            cwd=work,
            env=env,
            pss=pss,
        )
        judges.append((judge, _score(judge_out / "solution" / "results.json")))
    rows[PLAIN_ROW] = least_cpu(plains)
    rows[FILL] = fill
    rows[JUDGE_ROW] = least_cpu(judges)
    otter_out = _fresh(work / f"otter-{name}")
    otter = measure(
        [
            PYTHON,
            "-m",
            "otter",
            "run",
            "-a",
            str(built.autograder_zip),
            "-o",
            str(otter_out),
            str(solution),
        ],
        cwd=work,
        env=env,
        pss=pss,
    )
    rows["(c) otter run"] = (otter, _score(otter_out / "results.json"))
    return rows


#: The row of the reference values computed once, before the gradings (as docker/install.sh does).
FILL = "reference values, computed once per install"
PLAIN_ROW = "(a) plain nbclient"
JUDGE_ROW = "(b) judge: autograder grade"


def fill_answers(name: str, work: Path, env: dict, pss: bool) -> tuple[Run, str]:
    """``python -m autograder.answers_cache fill`` into the scratch build's answers folder, which
    ``grade`` reads (:func:`autograder.cli.kept_answers`), emptied first."""
    answers = work / "build" / name / "answers"
    shutil.rmtree(answers, ignore_errors=True)
    run = measure(
        [PYTHON, "-m", "autograder.answers_cache", "fill", name, str(answers)],
        cwd=work,
        env=env,
        pss=pss,
    )
    return run, "filled" if run.exit == 0 else f"exit {run.exit}"


def batch_submissions(n: int, work: Path) -> list[Path]:
    """``n`` notebooks of ``where_mlps_fail``: every third the solution, the others one wrong
    fixture each."""
    from tests.fixtures.submissions import apply
    from tests.fixtures.where_mlps_fail.catalogue import WRONG

    built = build("where_mlps_fail", work)
    subs = []
    for i in range(n):
        if i % 3 == 0:
            subs.append(built.solution)
        else:
            variant = WRONG[i % len(WRONG)]
            subs.append(
                apply(built.solution, variant, work / "batch" / f"{i:02d}-{variant.name}.ipynb")
            )
    return subs


def _batch_outcome(out: Path, n: int) -> tuple[str, int]:
    """``("n graded, k not", times the reference values were computed)`` from a batch's outputs."""
    try:
        with open(out / "scores.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return "no scores.csv", 0
    failed = sum(1 for r in rows if r.get("error"))
    computed = sum(
        log.read_text(errors="replace").count("answers cache: computed where_mlps_fail.answers")
        for log in out.glob("*/grading.log")
    )
    return f"{len(rows) - failed}/{n} graded", computed


def bench_batch(n: int, work: Path, pss: bool = True) -> dict[str, tuple[Run, str]]:
    subs = batch_submissions(n, work)
    env = run_env(one_thread=True)
    run_dir = _fresh(work / "plain-batch")
    shutil.rmtree(run_dir)
    shutil.copytree(work / "build" / "where_mlps_fail" / "master", run_dir)
    notebook = plain_notebook(subs[0], run_dir / "plain.ipynb")
    plain = measure([PYTHON, "-c", PLAIN, str(notebook)], cwd=run_dir, env=env, pss=pss)
    rows = {"(a) plain nbclient, the solution": (plain, "ran" if plain.exit == 0 else "failed")}
    rows[FILL] = fill_answers("where_mlps_fail", work, env, pss)
    for jobs in (1, 2):
        out = _fresh(work / f"batch-out-{jobs}")
        run = measure(
            grade_command(work, "where_mlps_fail", subs, out, "--jobs", str(jobs)),
            cwd=work,
            env=env,
            pss=pss,
        )
        graded, computed = _batch_outcome(out, n)
        rows[f"{n} submissions, --jobs {jobs}"] = (
            run,
            f"{graded}; reference values computed {computed}x",
        )
    return rows


# --------------------------------------------------------------------------- the report


def _mb(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f}"


def _above(x: float | None, base: float | None) -> str:
    return "n/a" if x is None or base is None else f"{x - base:+.0f}"


def _load(run: Run) -> str:
    return f"{run.load[0]:.1f}"


def _when() -> str:
    return f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"


def header() -> list[str]:
    mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return [
        "# Grading benchmark",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {mem:.0f} GiB, Python "
        f"{platform.python_version()}, "
        f"{platform.platform()}. Written by `python -m benchmarks.run`; each section says when it "
        f"was measured "
        "and the load average (1 minute) before each run: on this shared machine other jobs "
        "inflate wall times.",
        "",
        "Columns: *CPU s* is every process of the run (`getrusage(RUSAGE_CHILDREN)`). *cgroup "
        "peak* is the kernel's "
        "peak charge (`memory.max_usage_in_bytes`) of a fresh memory cgroup holding the run's "
        "whole process tree: the "
        "operating system's accounting, what a Docker/Gradescope memory limit counts. *anon peak* "
        "is that cgroup's "
        "anonymous memory (sampled every 50 ms), which no limit can reclaim. *PSS peak* is the sum "
        "of the processes' "
        "proportional set sizes (`/proc/PID/smaps_rollup`, sampled about once a second, so short "
        "peaks can be "
        "missed): shared pages split among the processes mapping them. *RSS sum* counts torch's "
        "shared libraries "
        "once per process (the judge and the student process both import torch), so it overstates. "
        "*above* is the "
        "same figure minus a bare `import torch, torchvision` measured the same way.",
        "",
        "Page cache: cgroup v1 charges a file page to the cgroup that first reads it into memory. "
        "Pages already "
        "cached by an earlier run (torch's shared libraries, Fashion-MNIST) stay charged to "
        "whoever read them "
        "first, so on this warm machine the cgroup peak leaves them out, for the baseline as for "
        "the gradings; a "
        "cold container (Gradescope) is charged once for every library page it reads, in the "
        "baseline too, so the "
        "*above* figures carry over. Files a run writes or reads for the first time (results, "
        "scratch copies, "
        "tmpfs) are charged to it; the kernel reclaims that cache before a limit is hit, so the "
        "cgroup peak of an "
        "unlimited run is an upper bound and *anon peak* the floor. Nothing is dropped system-wide "
        "to measure.",
        "",
    ]


def assignment_section(name: str, rows: dict[str, tuple[Run, str]], repeat: int = 1) -> list[str]:
    base = rows["import torch, torchvision"][0]
    a = rows[PLAIN_ROW][0]
    b = rows[JUDGE_ROW][0]
    c = rows["(c) otter run"][0]
    lines = [
        f"## {name}",
        "",
        f"Measured {_when()}, every run with one thread (`OMP_NUM_THREADS=1`)"
        + (
            f"; the baseline, (a) and (b) each the run of the fewest CPU seconds of {repeat} "
            "((a) and (b) taking turns)"
            if repeat > 1
            else ""
        )
        + f"; memory accounting: {base.accounting}.",
        "",
        "| run | outcome | load | wall s | CPU s | cgroup peak MB | above | anon peak MB | above | "
        "PSS peak MB | above | RSS sum MB |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, (r, outcome) in rows.items():
        lines.append(
            f"| {label} | {outcome or '-'} | {_load(r)} | {r.wall:.1f} | {r.cpu:.1f} | "
            f"{_mb(r.cgroup_peak)} | "
            f"{_above(r.cgroup_peak, base.cgroup_peak)} | {_mb(r.anon_peak)} | "
            f"{_above(r.anon_peak, base.anon_peak)} | {r.pss_peak:.0f} | "
            f"{r.pss_peak - base.pss_peak:+.0f} | "
            f"{r.rss_peak:.0f} |"
        )
    target = f" (target: at most {TARGET_OVERHEAD})"
    memory = (
        f"{b.cgroup_peak - base.cgroup_peak:.0f} MB above import torch by the cgroup's accounting"
        if b.cgroup_peak is not None and base.cgroup_peak is not None
        else f"{b.pss_peak - base.pss_peak:.0f} MB above import torch by PSS (no cgroup)"
    )
    lines += [
        "",
        f"- b/a (grading overhead over running the notebook): wall {b.wall / a.wall:.2f}, "
        f"CPU {b.cpu / a.cpu:.2f}{target}",
        f"- b/c (judge against otter run): wall {b.wall / c.wall:.2f}, CPU {b.cpu / c.cpu:.2f}",
        f"- judge: {b.cpu:.1f} CPU s (target: at most {TARGET_CPU_SECONDS:.0f}); {memory} "
        f"(target: at most {TARGET_MEMORY_MB:.0f}); PSS {b.pss_peak - base.pss_peak:.0f} MB above",
        "",
    ]
    return lines


def batch_section(rows: dict[str, tuple[Run, str]]) -> list[str]:
    plain = rows["(a) plain nbclient, the solution"][0]
    (_, (one, _)), (_, (two, _)) = [(k, v) for k, v in rows.items() if "submissions" in k]
    n = int(next(k for k in rows if "submissions" in k).split()[0])
    lines = [
        "## Batch grading of where_mlps_fail",
        "",
        f"Measured {_when()}; memory accounting: {one.accounting}. Every third submission is the "
        f"solution, "
        "the others one wrong fixture each of `tests/fixtures/where_mlps_fail/catalogue.py`; "
        "one thread per grading, each worker's judge grading one submission after another "
        "(`autograder/judge_pool.py`), the reference values computed once before (the fill row).",
        "",
        "| run | outcome | load | wall s | CPU s | cgroup peak MB | anon peak MB | PSS peak MB | "
        "RSS sum MB |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, (r, outcome) in rows.items():
        lines.append(
            f"| {label} | {outcome} | {_load(r)} | {r.wall:.1f} | {r.cpu:.1f} | "
            f"{_mb(r.cgroup_peak)} | "
            f"{_mb(r.anon_peak)} | {r.pss_peak:.0f} | {r.rss_peak:.0f} |"
        )
    lines += [
        "",
        f"- CPU seconds per submission over the plain run of the solution: at 1 worker "
        f"{one.cpu / n / plain.cpu:.2f}, at 2 {two.cpu / n / plain.cpu:.2f} (target: at most "
        f"{TARGET_BATCH_CPU}; the catalogue's wrong submissions run about as long as the "
        f"solution)",
        f"- speed-up at 2 workers: {one.wall / two.wall:.2f} (target: at least {TARGET_SPEEDUP}); "
        f"CPU seconds "
        f"at 2 workers / at 1: {two.cpu / one.cpu:.2f}; load average (1 minute) before the runs: "
        f"{one.load[0]:.1f} and {two.load[0]:.1f} on {os.cpu_count()} cores. The speed-up only "
        f"means "
        "something when the load before was well below the core count.",
        "",
    ]
    return lines


def _sections(text: str) -> dict[str, str]:
    """``{"## heading": section text}`` of an existing report."""
    parts = re.split(r"(?m)^(?=## )", text)
    return {part.splitlines()[0]: part.rstrip() + "\n" for part in parts[1:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--assignments",
        nargs="*",
        default=None,
        help="assignments to measure (default: every assignment; give the option alone for none)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=24,
        help="submissions in the batch benchmark (0: skip; default 24)",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the sections of the existing report that this run does not measure",
    )
    parser.add_argument(
        "--no-pss", action="store_true", help="skip the PSS sampling (it costs some CPU)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of the baseline, the plain notebook and grade per assignment; each row is "
        "the run of the fewest CPU seconds (default 3)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results.md")
    args = parser.parse_args(argv)
    if args.batch < 0:
        parser.error(f"--batch expects a number of submissions, 0 or more, got {args.batch}")
    if args.repeat < 1:
        parser.error(f"--repeat expects a number of runs, 1 or more, got {args.repeat}")

    from autograder.build import available

    names = available() if args.assignments is None else args.assignments
    unknown = sorted(set(names) - set(available()))
    if unknown:
        parser.error(f"unknown assignments {', '.join(unknown)}; have {', '.join(available())}")
    sections: dict[str, str] = {}
    if args.update and args.out.is_file():
        sections = _sections(args.out.read_text())
    pss = not args.no_pss
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        for name in names:
            rows = bench_assignment(name, work, pss, args.repeat)
            lines = assignment_section(name, rows, args.repeat)
            sections[lines[0]] = "\n".join(lines)
            print("\n".join(lines), flush=True)
        if args.batch:
            lines = batch_section(bench_batch(args.batch, work, pss))
            sections[lines[0]] = "\n".join(lines)
            print("\n".join(lines), flush=True)
    order = [f"## {n}" for n in available()] + ["## Batch grading of where_mlps_fail"]
    body = [sections[k] for k in order if k in sections] + [
        v for k, v in sections.items() if k not in order
    ]
    text = "\n".join(header()) + "\n" + "\n".join(s.rstrip() + "\n" for s in body)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
