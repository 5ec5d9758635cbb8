"""Public tests of "Where MLPs Fail" (Lesson 4.5.3): defined, kind, shape and dtype. Reveal no
value."""

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


def public_function(name: str, func: Any, *args: Any) -> Any:
    """``func(*args)`` runs without raising; returns its result (a ``CheckFailure`` naming ``name``
    otherwise)."""
    return call_student(name, func, *args)
