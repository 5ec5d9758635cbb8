"""A Gradescope rehearsal: run an autograder zip exactly as Gradescope would, without Docker.

Gradescope unpacks the autograder zip into ``/autograder/source``, copies
``source/run_autograder`` to ``/autograder/run_autograder``, puts the
student's files in ``/autograder/submission`` and a description of the
submission in ``/autograder/submission_metadata.json``, then runs
``/autograder/run_autograder`` with ``/autograder`` as the working folder and
uploads ``/autograder/results/results.json``; what the script prints goes to
``/autograder/results/stdout``, for instructors only.

:func:`rehearse` lays out that tree under any scratch ``root`` and runs the
zip's own ``run_autograder`` there. Otter bakes the folder into the zip when
it renders its templates: ``run_otter.py`` calls
``otter.run.run_autograder.main("/autograder")`` and ``run_autograder`` runs
``python /autograder/source/run_otter.py``, both from the ``autograder_dir``
setting of ``otter_config.json`` (default ``/autograder``), and ``main``
then reads ``<dir>/source/otter_config.json``. So the rehearsal sets
``autograder_dir`` to ``root`` in the unpacked ``source/otter_config.json``,
the configuration Otter's runner reads, and renders the two scripts for it:
the zip's own text with the folder it was built for (that same setting)
replaced by ``root``. Nothing of Otter is edited or patched.

``run_autograder`` calls ``python``: the rehearsal puts this interpreter's
folder first on ``PATH``, as the grading image links ``python`` to the
grading environment (``docker/install.sh``). Its ``mamba`` lines find no
mamba and are skipped, as in the image.

Command line: ``python -m autograder.gradescope AUTOGRADER_ZIP SUBMISSION... --root DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from autograder.grading_errors import cause_of, grading_error_results
from autograder.judge_interface import DEFAULT_TIMEOUT, GRADING_ERROR_FILE

#: Where Otter renders its scripts for when ``autograder_dir`` is not set.
OTTER_DEFAULT_DIR = "/autograder"
OTTER_CONFIG = "otter_config.json"


class RehearsalError(RuntimeError):
    """The autograder zip is not laid out as Otter writes it, so it cannot be rehearsed."""


def _as_list(submission: Path | str | Iterable[Path | str]) -> list[Path]:
    if isinstance(submission, (str, os.PathLike)):
        return [Path(submission)]
    return [Path(s) for s in submission]


def total_points(source: Path) -> float | None:
    """Sum of ``points = N`` over Otter's test files in ``source/tests`` (``None`` if none say)."""
    return _points(
        [test.read_text(encoding="utf-8") for test in sorted((source / "tests").glob("*.py"))]
    )


def zip_total_points(autograder_zip: Path) -> float | None:
    """Sum of ``points = N`` over the test files (``tests/*.py``) of an autograder zip as Otter
    writes it (``None`` if none say, or the zip cannot be read)."""
    import zipfile

    try:
        with zipfile.ZipFile(autograder_zip) as archive:
            texts = [
                archive.read(name).decode("utf-8", errors="replace")
                for name in sorted(archive.namelist())
                if re.fullmatch(r"tests/[^/]+\.py", name)
            ]
    except (OSError, zipfile.BadZipFile):
        return None
    return _points(texts)


def zip_assignment_name(autograder_zip: Path) -> str | None:
    """The ``assignment_name`` of an autograder zip's ``otter_config.json`` (``otter assign`` writes
    the assignment's name there), ``None`` if it names none or cannot be read."""
    try:
        with zipfile.ZipFile(autograder_zip) as archive:
            config = json.loads(archive.read(OTTER_CONFIG))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    name = config.get("assignment_name") if isinstance(config, dict) else None
    return str(name) if name else None


def _points(texts: list[str]) -> float | None:
    found = []
    for text in texts:
        match = re.search(r"^points\s*=\s*([0-9.]+)\s*$", text, re.MULTILINE)
        if match:
            found.append(float(match.group(1)))
    return sum(found) if found else None


def submission_metadata(title: str, points: float | None, now: datetime | None = None) -> dict:
    """A minimal, realistic ``submission_metadata.json`` as Gradescope's harness writes it.

    Fields as in Gradescope's "Submission Metadata" page: the submission's id
    and time, the assignment (ids, title, dates, group settings, total points
    as a string, submission method), the submitting users and the previous
    submissions (none).
    """
    now = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    return {
        "id": 100000001,
        "created_at": now.isoformat(),
        "assignment": {
            "id": 1000001,
            "course_id": 100001,
            "title": title,
            "release_date": (now - timedelta(days=7)).isoformat(),
            "due_date": (now + timedelta(days=7)).isoformat(),
            "late_due_date": None,
            "group_submission": False,
            "group_size": None,
            "total_points": f"{points:.1f}" if points is not None else None,
            "submission_method": "upload",
        },
        "users": [{"email": "student@example.com", "id": 1000001, "name": "Rehearsal Student"}],
        "previous_submissions": [],
    }


def lay_out(
    autograder_zip: Path,
    submission: Path | Iterable[Path],
    root: Path,
    metadata: dict | None = None,
) -> Path:
    """Write Gradescope's tree under ``root``; returns ``root`` (absolute).

    ``root/source`` is the unzipped autograder, ``root/submission`` the
    submission's files (a folder's contents are copied, files as they are),
    ``root/results`` is empty and ``root/submission_metadata.json`` holds
    ``metadata`` or :func:`submission_metadata`. Earlier rehearsal outputs
    in ``root`` are removed first.
    """
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    for name in ("source", "submission", "results"):
        shutil.rmtree(root / name, ignore_errors=True)
        (root / name).mkdir()
    for name in ("run_autograder", "submission_metadata.json"):
        (root / name).unlink(missing_ok=True)

    with zipfile.ZipFile(autograder_zip) as zf:
        zf.extractall(root / "source")

    for item in _as_list(submission):
        if item.is_dir():
            shutil.copytree(item, root / "submission", dirs_exist_ok=True)
        elif item.is_file():
            shutil.copy2(item, root / "submission" / item.name)
        else:
            raise FileNotFoundError(f"submission {item} does not exist")

    if metadata is None:
        config = _read_config(root / "source")
        title = config.get("assignment_name") or Path(autograder_zip).stem
        metadata = submission_metadata(title, total_points(root / "source"))
    (root / "submission_metadata.json").write_text(
        json.dumps(metadata, indent=2) + "\n", encoding="utf-8"
    )
    return root


def _read_config(source: Path) -> dict:
    path = source / OTTER_CONFIG
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def point_at(root: Path) -> Path:
    """Make the unpacked autograder under ``root`` run in ``root`` instead of ``/autograder``.

    Sets ``autograder_dir`` in ``root/source/otter_config.json`` and renders
    the zip's ``run_otter.py`` and ``run_autograder`` for ``root``: the
    folder they were rendered for (the configuration's previous
    ``autograder_dir``, Otter's default ``/autograder``) becomes ``root``.
    Copies the rendered ``run_autograder`` to ``root/run_autograder``, as
    Gradescope's image build does, and returns that path.

    Raises:
        RehearsalError: a script does not name the folder where Otter's
            templates put it (the zip was not written by ``otter assign``).
    """
    root = Path(root).resolve()
    source = root / "source"
    config = _read_config(source)
    baked = str(config.get("autograder_dir", OTTER_DEFAULT_DIR)).rstrip("/") or "/"
    config["autograder_dir"] = str(root)
    (source / OTTER_CONFIG).write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")

    run_otter = source / "run_otter.py"
    call = f'run_autograder("{baked}")'
    text = run_otter.read_text(encoding="utf-8") if run_otter.is_file() else ""
    if text.count(call) != 1:
        raise RehearsalError(
            f"{run_otter.name} in the autograder zip does not call {call} once; "
            "was the zip written by otter assign / otter generate?"
        )
    run_otter.write_text(
        text.replace(call, f"run_autograder({json.dumps(str(root))})"), encoding="utf-8"
    )

    script = source / "run_autograder"
    token = f"{baked}/source/run_otter.py"
    text = script.read_text(encoding="utf-8") if script.is_file() else ""
    if token not in text:
        raise RehearsalError(f"run_autograder in the autograder zip does not run {token}")
    text = text.replace(token, shlex.quote(str(run_otter)))
    script.write_text(text, encoding="utf-8")
    entry = root / "run_autograder"
    entry.write_text(text, encoding="utf-8")
    entry.chmod(0o755)
    script.chmod(0o755)
    return entry


def _run(entry: Path, root: Path, timeout: float, python_bin: Path) -> tuple[int | None, str]:
    """Run ``entry`` in ``root`` with ``python_bin`` first on PATH; output to ``results/stdout``.

    Returns ``(exit code, last output line)``; the code is ``None`` when the
    run was stopped at ``timeout`` (its whole process group is killed).
    """
    env = dict(os.environ)
    env["PATH"] = f"{python_bin}{os.pathsep}{env.get('PATH', '')}"
    log_path = root / "results" / "stdout"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(entry)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    lines = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return code, (lines[-1] if lines else "no output")


def rehearse(
    autograder_zip: Path | str,
    submission: Path | str | Iterable[Path | str],
    root: Path | str,
    *,
    metadata: dict | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    python_bin: Path | str | None = None,
) -> Path:
    """Grade ``submission`` with ``autograder_zip`` as Gradescope would, in the scratch folder
    ``root``.

    Lays out ``root/source`` (the unzipped autograder), ``root/submission``
    (the submission: a file, several, or a folder's contents),
    ``root/results`` and ``root/submission_metadata.json``, points the zip's
    scripts at ``root`` (:func:`point_at`) and runs ``root/run_autograder``
    with ``root`` as the working folder, its output in ``root/results/stdout``.

    Args:
        autograder_zip: the zip from ``python -m autograder build``.
        submission: what the student uploaded.
        root: the scratch folder standing for ``/autograder``.
        metadata: ``submission_metadata.json`` content (default: :func:`submission_metadata`).
        timeout: seconds before the run is stopped (Gradescope's default limit, 10 minutes).
        python_bin: the folder whose ``python`` runs the autograder
            (default: this interpreter's folder).

    Returns:
        ``root/results/results.json``. It is always written: when the
        autograder leaves none (or not JSON), it holds a grading error's
        results (:func:`autograder.grading_errors.grading_error_results`),
        the judge's own when it wrote them aside
        (:data:`autograder.judge_interface.GRADING_ERROR_FILE`), else with the reason.
        On Gradescope such a run fails: there is no valid ``results.json``.

    Raises:
        FileNotFoundError: ``autograder_zip`` does not exist.
    """
    autograder_zip = Path(autograder_zip)
    if not autograder_zip.is_file():
        raise FileNotFoundError(
            f"no autograder zip at {autograder_zip}: run `python -m autograder build` first"
        )
    root = Path(root).resolve()
    results = root / "results" / "results.json"
    started = time.perf_counter()
    reason = None
    try:
        lay_out(autograder_zip, submission, root, metadata)
        entry = point_at(root)
        code, last = _run(entry, root, timeout, Path(python_bin or Path(sys.executable).parent))
        kept = results.with_name(GRADING_ERROR_FILE)
        if code is None:
            reason = f"grading took longer than {timeout:.0f} seconds and was stopped."
        elif not results.is_file() and kept.is_file():  # the judge's grading error (run_gradescope)
            shutil.copyfile(kept, results)
        elif not results.is_file():
            reason = f"the autograder exited with code {code} and wrote no results.json: {last}"
        else:
            try:
                if not isinstance(json.loads(results.read_text(encoding="utf-8")), dict):
                    reason = "the autograder's results.json is not a JSON object."
            except json.JSONDecodeError as err:
                reason = f"the autograder's results.json is not JSON ({err})."
    except (OSError, RehearsalError, zipfile.BadZipFile) as err:
        reason = f"the rehearsal could not run the autograder: {err}"
    # Gradescope would find no valid results: the autograder failed, not the student
    if reason is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(
            json.dumps(grading_error_results(reason, time.perf_counter() - started), indent=2),
            encoding="utf-8",
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.gradescope",
        description="Rehearse Gradescope: run an autograder zip on a submission "
        "in a scratch /autograder tree, without Docker.",
    )
    parser.add_argument("autograder_zip", type=Path)
    parser.add_argument(
        "submission", type=Path, nargs="+", help="the student's files (or one folder)"
    )
    parser.add_argument(
        "--root", type=Path, required=True, help="scratch folder standing for /autograder"
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    args = parser.parse_args(argv)
    results = rehearse(args.autograder_zip, args.submission, args.root, timeout=args.timeout)
    from autograder.results_schema import ResultsSchemaError, validate_results

    print(f"results: {results}\nstdout:  {results.parent / 'stdout'}")
    try:
        data = validate_results(results)
    except ResultsSchemaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    from autograder.results import question_scores

    cause = cause_of(data)
    if cause is not None:
        print(
            f"GRADING ERROR (the autograder's fault, not the submission's): {cause}\n"
            "on Gradescope this run fails (no results.json): staff see it as failed, and the "
            "student is told "
            "\"The autograder failed to execute correctly. Please contact your course staff\"",
            file=sys.stderr,
        )
        return 3
    scores = question_scores(data)
    got, possible = sum(s for s, _ in scores.values()), sum(m for _, m in scores.values())
    print(f"score:   {data.get('score', got):g} / {possible:g}  (valid Gradescope results)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
