"""Grade submissions with an assignment's autograder zip.

Two runners: ``"judge"`` (the default), the hardened grader of
:mod:`autograder.judge`, where student code runs in a process of its own and
never touches the hidden tests; and ``"otter"``, Otter's own ``otter run``,
kept as the peer to compare with. Every submission is graded in its own
process, so one that crashes, hangs or exits cannot take the others down. Nothing is
lost: a submission Otter could not grade still gets a ``results.json`` in
Gradescope's format, scored 0, whose ``output`` says why.

Outputs, under ``out_dir``:

* ``<submission name>/results.json`` — Otter's Gradescope results;
* ``scores.csv`` — one row per submission, one column per question;
* the same table printed by :func:`format_table`.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

#: Gradescope's default limit for one submission is 10 minutes; a run that
#: exceeds this is stopped and reported, and the batch goes on.
DEFAULT_TIMEOUT = 600.0


@dataclass
class GradeResult:
    """One submission's grade.

    ``scores`` maps question name to ``(score, max_score)``; ``error`` is
    ``None`` when Otter graded the submission, else why it could not.
    """

    submission: Path
    results_path: Path
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0

    @property
    def total(self) -> float:
        return sum(s for s, _ in self.scores.values())

    @property
    def possible(self) -> float:
        return sum(m for _, m in self.scores.values())


def failure_results(reason: str, seconds: float = 0.0) -> dict:
    """Gradescope results for a submission that could not be graded: score 0 and the reason."""
    return {
        "score": 0.0,
        "execution_time": round(seconds, 3),
        "output": f"This submission could not be graded: {reason}",
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }


def question_scores(results: dict) -> dict[str, tuple[float, float]]:
    """``{question: (score, max_score)}`` from Otter's results, skipping the 0-point public summary."""
    scores = {}
    for test in results.get("tests", []):
        if test.get("max_score") in (None, 0):
            continue
        name = str(test["name"]).split(" - ")[0]
        score, possible = scores.get(name, (0.0, 0.0))
        scores[name] = (score + float(test.get("score") or 0.0), possible + float(test["max_score"]))
    return scores


def submission_label(path: Path) -> str:
    """A folder name for a submission's outputs: its file name without the extension."""
    return path.name.rsplit(".", 1)[0] if "." in path.name else path.name


RUNNERS = ("judge", "otter")


def _command(runner: str, autograder_zip: Path, submission: Path, out_dir: Path) -> list[str]:
    if runner == "judge":
        return [sys.executable, "-m", "autograder.judge", str(autograder_zip.resolve()), str(submission.resolve()),
                str((out_dir / "results.json").resolve())]
    if runner == "otter":
        return [sys.executable, "-m", "otter", "run", "-a", str(autograder_zip.resolve()),
                "-o", str(out_dir.resolve()), str(submission.resolve())]
    raise ValueError(f"runner must be one of {RUNNERS}, not {runner!r}")


def grade_one(autograder_zip: Path, submission: Path, out_dir: Path, timeout: float = DEFAULT_TIMEOUT,
              threads: int | None = None, runner: str = "judge") -> GradeResult:
    """Grade ``submission`` (a ``.ipynb`` or Otter's export ``.zip``) with ``autograder_zip``.

    ``runner`` is ``"judge"`` (hardened, the default) or ``"otter"`` (``otter run``).

    ``threads`` caps the grading process's BLAS/OpenMP threads (torch reads
    ``OMP_NUM_THREADS``), so parallel gradings don't oversubscribe the cores.
    Writes ``out_dir/results.json`` in every case. Never raises for a bad
    submission; raises ``FileNotFoundError`` if ``autograder_zip`` is missing.
    """
    autograder_zip, submission, out_dir = Path(autograder_zip), Path(submission), Path(out_dir)
    if not autograder_zip.is_file():
        raise FileNotFoundError(f"no autograder zip at {autograder_zip}: run `python -m autograder build` first")
    out_dir.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / "results.json"
    results_path.unlink(missing_ok=True)
    started = time.perf_counter()
    reason = None
    command = _command(runner, autograder_zip, submission, out_dir)
    if not submission.is_file():
        reason = f"{submission} does not exist or is not a file."
    else:
        with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
            env = dict(os.environ, MPLBACKEND="Agg")
            # many small least-squares solves (inductive_bias) run 10x slower
            # with OpenBLAS's threads spinning against each other
            env.setdefault("OPENBLAS_NUM_THREADS", "1")
            if threads:
                env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
            try:
                proc = subprocess.run(command, cwd=scratch, capture_output=True, text=True, timeout=timeout, env=env)
                (out_dir / "grading.log").write_text(proc.stdout[-200_000:] + "\n" + proc.stderr[-200_000:])
                if proc.returncode != 0 or not results_path.is_file():
                    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                    reason = f"the autograder exited with code {proc.returncode}: {tail[0]}"
            except subprocess.TimeoutExpired:
                reason = f"grading took longer than {timeout:.0f} seconds and was stopped."
    seconds = time.perf_counter() - started
    if reason is not None:
        results_path.write_text(json.dumps(failure_results(reason, seconds), indent=2))
        return GradeResult(submission, results_path, {}, reason, seconds)
    results = json.loads(results_path.read_text())
    if not results.get("tests"):  # the judge's own "could not be graded" results
        return GradeResult(submission, results_path, {}, str(results.get("output", "not graded")), seconds)
    return GradeResult(submission, results_path, question_scores(results), None, seconds)


def grade_many(autograder_zip: Path, submissions: list[Path], out_dir: Path, jobs: int = 1,
               timeout: float = DEFAULT_TIMEOUT, progress: bool = True, runner: str = "judge") -> list[GradeResult]:
    """Grade several submissions, ``jobs`` at a time; results in the submissions' order.

    Each submission's outputs go to ``out_dir/<label>/``; two submissions
    with the same file name get ``-2``, ``-3`` suffixes. Writes
    ``out_dir/scores.csv``.
    """
    out_dir = Path(out_dir)
    labels, seen = [], {}
    for sub in submissions:
        label = submission_label(Path(sub))
        seen[label] = seen.get(label, 0) + 1
        labels.append(label if seen[label] == 1 else f"{label}-{seen[label]}")

    threads = max(1, (os.cpu_count() or 1) // max(1, jobs)) if jobs > 1 else None

    def work(item):
        sub, label = item
        return grade_one(autograder_zip, Path(sub), out_dir / label, timeout, threads, runner)

    bar = None
    if progress and len(submissions) > 1:
        from tqdm import tqdm

        bar = tqdm(total=len(submissions), desc="grading", unit="submission", file=sys.stderr)
    results: list[GradeResult] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for result in pool.map(work, zip(submissions, labels)):
            results.append(result)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    write_csv(results, labels, out_dir / "scores.csv")
    return results


def _questions(results: list[GradeResult]) -> list[str]:
    names: list[str] = []
    for r in results:
        for q in r.scores:
            if q not in names:
                names.append(q)
    return names


def write_csv(results: list[GradeResult], labels: list[str], path: Path) -> None:
    """One row per submission: label, each question's score, total, possible, error."""
    questions = _questions(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", *questions, "total", "possible", "error"])
        for label, r in zip(labels, results):
            writer.writerow([label, *[_fmt(r.scores[q][0]) if q in r.scores else "" for q in questions],
                             _fmt(r.total), _fmt(r.possible), r.error or ""])


def _fmt(x: float) -> str:
    return f"{x:g}"


def format_table(results: list[GradeResult]) -> str:
    """A plain-text table: submission, total / possible, then the questions that lost points."""
    rows = [("submission", "score", "lost points on")]
    for r in results:
        if r.error:
            rows.append((submission_label(r.submission), "0", f"not graded: {r.error}"))
            continue
        lost = [f"{q} ({_fmt(s)}/{_fmt(m)})" for q, (s, m) in r.scores.items() if s < m]
        rows.append((submission_label(r.submission), f"{_fmt(r.total)}/{_fmt(r.possible)}", ", ".join(lost) or "-"))
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    return "\n".join(f"{a:<{width[0]}}  {b:>{width[1]}}  {c}" for a, b, c in rows)
