"""Gradescope's entry point, :func:`run_gradescope`: called by the ``run_autograder`` that
:mod:`autograder.build` puts in the autograder zip in place of Otter's, so the zip Gradescope runs
grades with the hardened judge.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from autograder import answers_cache
from autograder.judge import grade_submission
from autograder.judge_interface import GRADING_ERROR_FILE, Limits
from autograder.process_tree import is_root
from autograder.results import failure_results, summary_line
from autograder.sandbox_user import lock_down
from autograder.submission import SubmissionError, find_gradescope_submission

#: The folder of Gradescope's ``/autograder`` where ``docker/install.sh`` puts the reference values
#: (:func:`autograder.answers_cache.fill`; the cache refuses it unless it is root's own, mode 0700).
ANSWERS_FOLDER = "answers"


def run_gradescope(root: str | Path = "/autograder", limits: Limits = Limits()) -> dict:
    """Gradescope's entry point: grade ``root/submission`` with ``root/source``, write
    ``root/results/results.json``, reading the reference values from ``root/answers`` when
    ``docker/install.sh`` computed them there.

    Called by the ``run_otter.py`` that :mod:`autograder.build` puts in the
    autograder zip in place of Otter's, so the same zip runs the hardened judge.
    When root, the source folder (hidden tests) and the results folder are
    made unreadable to the student user first.

    A grading error (:mod:`autograder.grading_errors`) leaves no
    ``results.json``: Gradescope then marks the run as failed for staff and
    tells the student "The autograder failed to execute correctly. Please
    contact your course staff" (Gradescope's troubleshooting page: its answer
    when there is no valid ``results.json``), where a results file would have
    recorded a score. Its results, with the cause, go to
    :data:`GRADING_ERROR_FILE` beside it, and the cause to the staff's output.
    """
    from autograder.grading_errors import cause_of
    from autograder.namespaces import DESCRIPTIONS
    from autograder.results import isolation_of

    root = Path(root)
    results_path = root / "results" / "results.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    if is_root():
        lock_down([root / "source", root / "results"])
    if (root / ANSWERS_FOLDER).is_dir():  # the reference values docker/install.sh computed
        os.environ[answers_cache.ENV_DIR] = str(root / ANSWERS_FOLDER)
    try:
        submission = find_gradescope_submission(root / "submission")
    except SubmissionError as err:
        results = failure_results(str(err))
        results_path.write_text(json.dumps(results, indent=2))
        return results
    results = grade_submission(root / "source", submission, results_path, limits)
    cause = cause_of(results)
    if cause is not None:
        os.replace(results_path, results_path.with_name(GRADING_ERROR_FILE))
        print(
            f"GRADING ERROR (the autograder's fault, not the student's; no results.json written, "
            f"so Gradescope "
            f"shows this run as failed): {cause}"
        )
        return results
    print(summary_line(results))
    mode = isolation_of(results)
    if mode is not None:
        print(f"isolation: {DESCRIPTIONS.get(mode, mode)}")
    print(results.get("output") or "")
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.gradescope_entry [ROOT]`` (default ``/autograder``): grade as
    :func:`run_gradescope` does; exit status 1 on a grading error (the autograder's own fault,
    which fails Gradescope's run, as does the missing ``results.json``), else 0."""
    import sys

    from autograder.grading_errors import cause_of

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1:
        raise SystemExit("usage: python -m autograder.gradescope_entry [ROOT]")
    results = run_gradescope(argv[0] if argv else "/autograder")
    return 1 if cause_of(results) is not None else 0


if __name__ == "__main__":
    raise SystemExit(main())
