"""What the judge's callers share with it without importing torch: its limits, the questions' order,
and where a grading error's results go on Gradescope.

:mod:`autograder.judge` imports torch (through :mod:`autograder.encoding`); the
orchestrator (:mod:`autograder.grade`, ``python -m autograder grade``) only
starts judges, so it imports these from here and stays free of torch.
:mod:`autograder.judge` re-exports both.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

#: Gradescope's default limit for one submission is 10 minutes; a run that
#: exceeds this is stopped and reported, and the batch goes on.
DEFAULT_TIMEOUT = 600.0
#: Where :func:`autograder.gradescope_entry.run_gradescope` puts a grading error's results, in
#: place of ``results.json`` (Gradescope shows a run without ``results.json`` as failed to staff and
#: students).
GRADING_ERROR_FILE = "grading_error.json"


@dataclass(frozen=True)
class Limits:
    """Time and memory limits of one grading run (seconds, megabytes).

    ``cell_seconds``, ``call_seconds`` and ``startup_seconds`` count the CPU
    seconds the student's processes use
    (:meth:`autograder.student_process.StudentProcess.cpu_seconds`), so that a
    loaded machine, or a container of half a CPU, does not cut honest work;
    :data:`autograder.student_process.WALL_FACTOR` times as many wall-clock
    seconds end a cell or call that sleeps or waits. ``deadline`` is wall-clock and stays
    below Gradescope's default 10-minute limit so that a results file is
    always written before Gradescope stops the container.

    Raises:
        ValueError: a time that is not a positive finite number of seconds,
            or a memory limit that is not a positive whole number of MB.
    """

    cell_seconds: float = 60.0
    call_seconds: float = 30.0
    startup_seconds: float = 60.0
    deadline: float = 540.0
    memory_mb: int = 3072

    def __post_init__(self) -> None:
        for name in ("cell_seconds", "call_seconds", "startup_seconds", "deadline"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Real)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(
                    f"limit {name} must be a positive number of seconds, not {value!r}"
                )
        value = self.memory_mb
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ValueError(
                f"limit memory_mb must be a positive whole number of megabytes, not {value!r}"
            )


def question_order(name: str) -> tuple:
    """Sort key of a question name in notebook order: ``q2`` before ``q10``, ``q1.3`` before
    ``q1.10``."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)
    )
