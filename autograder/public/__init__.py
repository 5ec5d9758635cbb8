"""Public tests: what ``grader.check`` runs in a student's notebook.

The generic ones are here: a name defined, a tensor's shape and dtype, a function that runs.
An assignment whose public tests need more has a module of its own
(``autograder.public.telling_things_apart``, ...). They check that names are defined and that
answers have the right kind, shape and dtype, and that functions run on a small input; they
reveal no expected value. They import only the generic layered checks of
:mod:`autograder.checks` (never a hidden test) and nothing of ``reference/``, so that the
student package (``python -m autograder student-package``, :mod:`autograder.student_package`)
can hold them without the hidden tests or the reference solutions.
"""

from __future__ import annotations

from typing import Any

import torch

from autograder.checks import call_student, expect_defined, expect_tensor


def public_defined(**names: Any) -> None:
    """Every name defined (not ``None``, not missing); raises ``CheckFailure`` naming the first that
    is not."""
    for name, value in names.items():
        expect_defined(name, value)


def public_tensor(
    name: str, value: Any, shape: tuple[int, ...], dtype: torch.dtype = torch.float32
) -> None:
    """A tensor of ``shape`` (e.g. ``(1, 1, 28, 28)``) and ``dtype``; raises ``CheckFailure`` naming
    ``name``."""
    expect_tensor(name, value, shape=shape, dtype=dtype)


def public_function(name: str, func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` runs without raising; returns its result (a ``CheckFailure``
    naming ``name`` otherwise)."""
    return call_student(name, func, *args, **kwargs)
