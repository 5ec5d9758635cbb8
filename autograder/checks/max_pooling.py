"""Hidden checks for the assignment ``max_pooling`` (max pooling over Lesson 4.5.3's sixteen maps).

Each ``check_q*`` function grades one question of the master notebook and is called by that
question's hidden test with the student's names as arguments. The answers and their types are
listed in ``assignments/max_pooling/answers.md``; the expected values come from
``reference.max_pooling`` computed in the grading environment.

Tolerances, and why they are what they are:

* ``pool`` on the property test's batches: exact (``torch.equal`` with ``F.max_pool2d``). A max
  picks one of its four values and does no arithmetic, so any correct way gives the same bits.
* ``POOLED_TOL = 1e-5``: ``pooled`` is ``pool(maps)``, the maps computed by the notebook's own
  convolution. On the thread count the judge and the student process use the maps are the
  reference's to the last bit; a convolution on other threads may sum its 25 products in another
  order, about 25 * 2**-24 * 2 < 1e-5 away (the maps lie in [-1.4, 1]). The smallest real mistake
  (an average instead of a max, a max started from zero) is above 1e-2.
* The counts and the bool of q2 are exact: the nearest difference to the 1e-4 threshold is 5.7e-7
  away (maps) and 4.7e-6 (pooled), far above float32 rounding of a difference of two values.

Whether ``pool`` avoids ``F.max_pool2d`` / ``nn.MaxPool2d``, as the question asks, is not checked
here: the judge sees what the function returns, not its source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from autograder.checks import (
    CheckFailure,
    call_student,
    changed_in_place,
    expect_bool,
    expect_callable,
    expect_close,
    expect_int,
    expect_shape,
    expect_tensor,
)
from autograder.checks.properties import given, run_property, seeded_images, st

POOLED_TOL = 1e-5


def _answers() -> dict[str, Any]:
    from reference import max_pooling

    return max_pooling.answers()


def check_pool_function(pool: Callable) -> None:
    """``pool(x)`` against ``F.max_pool2d(x, 2)``, by property (Hypothesis, derandomized).

    Batches ``(N, C, H, W)`` with ``N`` and ``C`` from 1 to 3 and even ``H`` and ``W`` from 2 to 8
    (not always square), values in [-0.5, 0.5] (the maps hold negative values: a max started from
    zero is wrong on them), about a fifth of them exactly zero. The result must be a new tensor of
    ``x``'s dtype and shape ``(N, C, H // 2, W // 2)`` equal to ``F.max_pool2d(x, 2)``, and ``x``
    unchanged.
    """
    expect_callable("pool", pool)

    @given(st.data())
    def matches_max_pool2d(data):
        n = data.draw(st.integers(1, 3), label="batch")
        c = data.draw(st.integers(1, 3), label="channels")
        h = 2 * data.draw(st.integers(1, 4), label="height // 2")
        w = 2 * data.draw(st.integers(1, 4), label="width // 2")
        x = seeded_images(data.draw, (n, c, h, w), lit_fraction=0.8) - 0.5
        before = x.clone()
        shown = f"pool(x) for x of shape {tuple(x.shape)}"
        actual = call_student("pool", pool, x)
        if changed_in_place(pool, (x, before)):
            raise CheckFailure(
                f"`pool` changed its input x in place ({shown}): return a new tensor."
            )
        expected = F.max_pool2d(x, 2)
        expect_tensor(shown, actual, shape=expected.shape, dtype=x.dtype, requires_grad=None)
        if not torch.equal(actual, expected):
            bad = int((actual != expected).sum())
            raise CheckFailure(
                f"`{shown}` has the right shape, but {bad} of its {expected.numel()} values are "
                "not the largest of their 2 by 2 block (blocks side by side, stride 2)."
            )

    run_property(matches_max_pool2d)


def check_q1(pool, pooled, pooled_shape) -> None:
    """``pool`` by property; ``pooled = pool(maps)`` and its shape against the reference."""
    check_pool_function(pool)
    a = _answers()
    expected = a["pooled"]
    expect_tensor("pooled", pooled, shape=expected.shape, dtype=expected.dtype)
    expect_close("pooled", pooled, expected, rtol=0.0, atol=POOLED_TOL)
    expect_shape("pooled_shape", pooled_shape, a["pooled_shape"])


def check_q2(maps_changed_1, pooled_changed_1, pooled_follow_2) -> None:
    """The sneaker moved down 1 pixel: how many map and pooled values change; moved 2: whether the
    pooled maps move by one row. Against the reference (errors are not carried forward through
    ``pool``, which the judge would have to call again on the lesson's own maps)."""
    a = _answers()
    expect_int("maps_changed_1", maps_changed_1, a["maps_changed_1"])
    expect_int("pooled_changed_1", pooled_changed_1, a["pooled_changed_1"])
    expect_bool("pooled_follow_2", pooled_follow_2, a["pooled_follow_2"])
