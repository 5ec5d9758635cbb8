"""Public tests of "When It Fails": defined, kind, shape and dtype, a model's logits. Reveal no
value."""

from __future__ import annotations

from typing import Any

import torch

from autograder.checks import (
    CheckFailure,
    call_student,
    expect_callable,
    expect_tensor,
    quoted,
)
from autograder.public import public_defined, public_function

__all__ = ["public_defined", "public_function", "public_model", "public_tensor"]


def model_logits(name: str, net: Any, X: torch.Tensor) -> torch.Tensor:
    """The student's model called on ``X`` (``(N, 784)`` flattened images): an ``(N, 10)`` tensor of
    logits, detached, or a ``CheckFailure`` naming ``name``. Runs under ``no_grad`` with torch's
    random state forked, so a model that draws random numbers (dropout left on) does not move the
    notebook's generator."""
    expect_callable(name, net)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        out = call_student(name, net, X)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (len(X), 10):
        shown = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise CheckFailure(
            f"{quoted(name)} called on a batch of {len(X)} flattened images returned {shown}, "
            f"not a ({len(X)}, 10) tensor of logits."
        )
    return out.detach()


def public_tensor(
    name: str, value: Any, shape: tuple[int, ...], dtype: torch.dtype = torch.float32
) -> None:
    """A tensor of ``shape`` and ``dtype``; raises ``CheckFailure`` naming ``name``."""
    expect_tensor(name, value, shape=shape, dtype=dtype, requires_grad=None)


def public_model(name: str, model: Any) -> None:
    """A model mapping a batch of flattened images ``(2, 784)`` to ten logits each ``(2, 10)``."""
    model_logits(name, model, torch.zeros(2, 784))
