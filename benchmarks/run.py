"""Grading cost, measured: ``python -m benchmarks.run [--assignments ...] [--batch N]``.

For each assignment's solution notebook, side by side in one run:

* (a) **plain**: the notebook executed with nbclient, no grading at all — the
  least a grade can cost;
* (b) **judge**: ``python -m autograder grade`` (the hardened judge, property
  tests on);
* (c) **otter**: ``otter run`` on the same autograder zip — Otter's own path.

For each: wall seconds, CPU seconds (all processes of the run, from
``getrusage(RUSAGE_CHILDREN)``), and peak memory of the whole process tree
(the sum of the resident set sizes of the command and all its descendants,
sampled every 20 ms from ``/proc``), also above a bare ``import torch,
torchvision`` in the same environment. Then the ratios b/a and b/c.

``--batch N`` also grades N submissions of ``where_mlps_fail`` (a mix of the
solution and the catalogue's wrong submissions) with 1 and with 2 workers.

The table is printed and written to ``benchmarks/results.md`` with the date
and the machine. Targets (issues 3 and 8) are printed beside the figures;
they are not asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def _tree_rss_mb(root_pid: int) -> float:
    """Resident memory of ``root_pid`` and all its descendants, in MB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ppid, pages = int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = pages
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(command: list[str], cwd: Path | None = None, env: dict | None = None) -> dict:
    """Run ``command``; return wall seconds, CPU seconds of the whole tree, peak tree memory (MB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0.0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_mb(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = proc.wait()
    done.set()
    sampler.join()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "peak_mb": peak, "exit": code}


PLAIN = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True).execute()
"""


def bench_assignment(name: str, work: Path) -> dict:
    from autograder.build import BUILD, build_assignment

    built = build_assignment(name, run_tests=False, build_root=work / "build", student_root=work / "student")
    solution = built.solution
    run_dir = work / f"plain-{name}"
    shutil.copytree(built.autograder_zip.parent / "master", run_dir)  # support files beside the notebook
    env = dict(os.environ, MPLBACKEND="Agg")
    rows = {
        "import torch, torchvision": measure([PYTHON, "-c", "import torch, torchvision"]),
        "(a) plain nbclient": measure([PYTHON, "-c", PLAIN, str(solution)], cwd=run_dir, env=env),
        "(b) judge": measure([PYTHON, "-m", "autograder.judge", str(built.autograder_zip), str(solution),
                              str(work / f"judge-{name}.json")], env=env),
        "(c) otter run": measure([PYTHON, "-m", "otter", "run", "-a", str(built.autograder_zip), "-o",
                                  str(_fresh(work / f"otter-{name}")), str(solution)], env=env),
    }
    return rows


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def bench_batch(n: int, work: Path) -> dict:
    from autograder.build import build_assignment
    from tests.fixtures.submissions import apply
    from tests.fixtures.where_mlps_fail.catalogue import WRONG

    built = build_assignment("where_mlps_fail", run_tests=False, build_root=work / "build", student_root=work / "student")
    subs = []
    for i in range(n):
        if i % 3 == 0:
            subs.append(built.solution)
        else:
            variant = WRONG[i % len(WRONG)]
            subs.append(apply(built.solution, variant, work / "batch" / f"{i:02d}-{variant.name}.ipynb"))
    rows = {}
    for jobs in (1, 2):
        rows[f"{n} submissions, --jobs {jobs}"] = measure(
            [PYTHON, "-m", "autograder", "grade", "where_mlps_fail", *map(str, subs), "--jobs", str(jobs),
             "--out", str(_fresh(work / f"batch-out-{jobs}"))], cwd=REPO)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignments", nargs="*", default=None, help="default: every built assignment")
    parser.add_argument("--batch", type=int, default=24, help="submissions in the batch benchmark (0: skip)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results.md")
    args = parser.parse_args(argv)

    from autograder.build import available

    names = args.assignments if args.assignments is not None else available()
    lines = [f"# Grading benchmark, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
             "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, "
             f"{os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB, "
             f"Python {platform.python_version()}, {platform.platform()}.",
             "CPU seconds cover every process of a run; peak memory is the whole process tree's resident set.",
             ""]
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        for name in names:
            rows = bench_assignment(name, work)
            base = rows["import torch, torchvision"]["peak_mb"]
            a, b, c = rows["(a) plain nbclient"], rows["(b) judge"], rows["(c) otter run"]
            lines += [f"## {name}", "",
                      "| run | wall s | CPU s | peak MB | peak above import torch, MB |",
                      "| --- | ---: | ---: | ---: | ---: |"]
            for label, r in rows.items():
                lines.append(f"| {label} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['peak_mb']:.0f} | "
                             f"{r['peak_mb'] - base:.0f} |")
            lines += ["",
                      f"- b/a (grading overhead over running the notebook): wall {b['wall'] / a['wall']:.2f}, "
                      f"CPU {b['cpu'] / a['cpu']:.2f} (target: at most 1.3)",
                      f"- b/c (judge against otter run): wall {b['wall'] / c['wall']:.2f}, CPU {b['cpu'] / c['cpu']:.2f}",
                      f"- judge: {b['cpu']:.1f} CPU s (target: at most 60), "
                      f"{b['peak_mb'] - base:.0f} MB above import torch (target: at most 350)", ""]
            print("\n".join(lines[-14:]), flush=True)
        if args.batch:
            rows = bench_batch(args.batch, work)
            lines += ["## Batch grading of where_mlps_fail", "",
                      "| run | wall s | CPU s | peak MB |", "| --- | ---: | ---: | ---: |"]
            for label, r in rows.items():
                lines.append(f"| {label} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['peak_mb']:.0f} |")
            one, two = rows.values()
            lines += ["", f"- speed-up at 2 workers: {one['wall'] / two['wall']:.2f} (target: at least 1.8)", ""]
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
