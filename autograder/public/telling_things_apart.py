"""Public tests of "Telling Things Apart": defined, kind, shape and dtype, a model's output shape.
Reveal no value."""

from __future__ import annotations

from typing import Any

import torch

from autograder.checks import (
    CheckFailure,
    call_student,
    expect_callable,
    expect_defined,
    expect_tensor,
)
from autograder.public import public_defined, public_function

__all__ = ["public_defined", "public_function", "public_model", "public_tensor", "weight_tensors"]

#: The shapes of ``mlp()``'s parameters, in ``model.parameters()`` order.
WEIGHT_SHAPES = ((128, 784), (128,), (10, 128), (10,))


def weight_tensors(weights: Any) -> list[torch.Tensor] | None:
    """The four tensors of ``weights`` (a ``state_dict()`` or a list of them), detached float32,
    when shaped like ``mlp()``'s (:data:`WEIGHT_SHAPES`); ``None`` otherwise."""
    if isinstance(weights, dict):
        items = list(weights.values())
    elif isinstance(weights, (list, tuple)):
        items = list(weights)
    else:
        return None
    if len(items) != len(WEIGHT_SHAPES) or not all(
        isinstance(t, torch.Tensor) and tuple(t.shape) == shape and t.is_floating_point()
        for t, shape in zip(items, WEIGHT_SHAPES)
    ):
        return None
    return [t.detach().float() for t in items]


def public_tensor(
    name: str, value: Any, shape: tuple[int, ...], dtype: torch.dtype | None = torch.float32
) -> None:
    """A tensor of ``shape`` (and ``dtype`` unless ``None``); NaN allowed here. Raises
    ``CheckFailure``."""
    expect_tensor(name, value, shape=shape, dtype=dtype, finite=False, requires_grad=None)


def public_model(model: Any, weights: Any) -> None:
    """``model`` maps a batch of digits ``(2, 1, 28, 28)`` to ten scores ``(2, 10)``; ``weights``
    holds four tensors shaped like ``mlp()``'s. Raises ``CheckFailure`` naming ``model`` or
    ``weights``."""
    expect_callable("model", model)
    out = call_student("model", model, torch.zeros(2, 1, 28, 28))
    expect_tensor("model(a batch of 2 digits)", out, shape=(2, 10), requires_grad=None)
    expect_defined("weights", weights)
    if weight_tensors(weights) is None:
        raise CheckFailure(
            "`weights` should be `model.state_dict()`: four tensors shaped (128, 784), (128,), "
            "(10, 128) and (10,)."
        )
