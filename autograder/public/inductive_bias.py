"""Public tests of "Inductive Bias": defined, a NumPy array of the right shape, a function. Reveal
no value."""

from __future__ import annotations

from typing import Any

from autograder.checks import expect_array, expect_callable
from autograder.public import public_defined

__all__ = ["public_array", "public_defined", "public_function"]


def public_array(name: str, value: Any, shape: tuple) -> None:
    """A NumPy array of ``shape`` (NaN and complex allowed here); raises ``CheckFailure`` naming
    ``name``."""
    expect_array(name, value, shape, complex_ok=True, finite=False)


def public_function(name: str, func: Any) -> None:
    """``func`` is a function (the hidden tests call it); raises ``CheckFailure`` naming
    ``name``."""
    expect_callable(name, func)
