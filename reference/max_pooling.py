"""Reference solution for the assignment ``max_pooling``.

Specification: Lesson 4.5.3 "Where MLPs Fail - the Case for Convolution"
(course text ``002_f489b58c2689217a.txt``), Lab Exercise 2 ("A Sneaker Moved
Down, and Sixteen Filters"): ``torch.manual_seed(42)``,
``nn.Conv2d(1, 16, kernel_size=5)`` applied to Fashion-MNIST test image 9 (the
sneaker), sixteen maps ``(1, 16, 24, 24)``. The assignment pools them 2x2 with
stride 2 and compares what a move of the sneaker down by 1 and by 2 pixels does
to the maps and to the pooled maps. The lesson prints nothing about pooling; the
graded names, their types and values are listed in
``assignments/max_pooling/answers.md`` (the contract).

What is here:

- the student function :func:`pool` (2x2 max pooling, stride 2, by hand);
- :func:`sneaker_maps`, the lesson's seeded layer on the sneaker and on the
  sneaker rolled down 1 and 2 pixels;
- :func:`answers`, a dict with the reference value of every value name;
- :func:`fill_answers_cache`, what ``docker/install.sh`` computes beforehand.

Rounding: none. ``pooled`` is a float32 tensor; ``maps_changed_1`` and
``pooled_changed_1`` are Python ints (values that change by more than 1e-4,
the threshold of the lesson's Answer 4); ``pooled_follow_2`` a Python bool.

Side effects: none on the caller. The layer is built inside
``torch.random.fork_rng`` (the caller's global random state is kept), on
:data:`THREADS` thread(s) with the caller's count restored; nothing is trained
or written, nothing is loaded at import time.
"""

from __future__ import annotations

import copy
import functools

import torch
from torch import nn

__all__ = ["THREADS", "THRESHOLD", "pool", "sneaker_maps", "answers", "fill_answers_cache"]

#: Threads :func:`answers` computes on (as the judge and the student process run torch).
THREADS = 1
#: "Changed": by more than this (Lesson 4.5.3, Answer 4: ``(row_moved - row).abs() > 1e-4``).
THRESHOLD = 1e-4
#: Test image 9 of Fashion-MNIST, a sneaker (Lab Exercise 2).
SNEAKER_INDEX = 9


def pool(x: torch.Tensor) -> torch.Tensor:
    """2x2 max pooling with stride 2 of a batch, by hand: ``F.max_pool2d(x, 2)`` for even sides.

    Args:
        x: a tensor ``(N, C, H, W)`` with ``H`` and ``W`` even.

    Returns:
        A new tensor ``(N, C, H // 2, W // 2)`` of ``x``'s dtype: entry
        ``[n, c, i, j]`` is the largest of ``x[n, c, 2i:2i + 2, 2j:2j + 2]``
        (exactly one of those four values; no arithmetic). ``x`` is not modified.

    Raises:
        TypeError: ``x`` is not a tensor.
        ValueError: ``x`` is not 4-dimensional, or a side is odd or zero.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"x must be a batch (N, C, H, W), got shape {tuple(x.shape)}")
    n, c, h, w = x.shape
    if h == 0 or w == 0 or h % 2 or w % 2:
        raise ValueError(f"x's height and width must be even and positive, got {h} and {w}")
    blocks = x.reshape(n, c, h // 2, 2, w // 2, 2)  # block (i, j) is [:, :, i, :, j, :]
    return blocks.amax(dim=(3, 5))


def sneaker_maps() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The lesson's sixteen maps of the sneaker, in place and rolled down 1 and 2 pixels.

    ``torch.manual_seed(42); nn.Conv2d(1, 16, kernel_size=5)`` (seeded inside
    ``fork_rng``) applied under ``torch.no_grad()`` to test image 9 as a
    ``(1, 1, 28, 28)`` batch and to ``torch.roll(sneaker, shifts=p, dims=2)``
    for ``p`` of 1 and 2 (the sneaker's first and last two rows are black, so
    nothing lit wraps). Returns three float32 tensors ``(1, 16, 24, 24)``.
    """
    from autograder.data import fashion_mnist

    sneaker = fashion_mnist(train=False)[SNEAKER_INDEX][0].unsqueeze(0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(42)
        conv = nn.Conv2d(1, 16, kernel_size=5)
    with torch.no_grad():
        return (
            conv(sneaker),
            conv(torch.roll(sneaker, shifts=1, dims=2)),
            conv(torch.roll(sneaker, shifts=2, dims=2)),
        )


def _compute() -> dict:
    """Every value of the contract, on :data:`THREADS` thread(s), the caller's count restored."""
    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        maps, down_1, down_2 = sneaker_maps()
    finally:
        torch.set_num_threads(previous)
    pooled = pool(maps)
    return {
        "pooled": pooled,
        "pooled_shape": tuple(pooled.shape),
        "maps_changed_1": int(((down_1 - maps).abs() > THRESHOLD).sum()),
        "pooled_changed_1": int(((pool(down_1) - pooled).abs() > THRESHOLD).sum()),
        "pooled_follow_2": bool(torch.allclose(pool(down_2), torch.roll(pooled, shifts=1, dims=2))),
    }


@functools.cache
def _answers() -> dict:
    # once per batch of gradings when the grader names a cache folder (autograder.answers_cache);
    # the grading tests also expect a correct notebook's grading to load it from there
    from autograder.answers_cache import cached

    return cached("max_pooling.answers", _compute, sources=(__file__,))


def answers() -> dict:
    """The reference value of every value name of the contract (not the function ``pool``):
    ``pooled`` (float32 ``(1, 16, 12, 12)``), ``pooled_shape`` ``(1, 16, 12, 12)``,
    ``maps_changed_1`` 6181, ``pooled_changed_1`` 1158, ``pooled_follow_2`` True. Computed once
    per process (cached; once per batch of gradings, :mod:`autograder.answers_cache`); each call
    returns a deep copy."""
    return copy.deepcopy(_answers())


def fill_answers_cache() -> None:
    """Compute into the answers cache (:mod:`autograder.answers_cache`, the folder its variable
    names) every reference value a grading of a correct notebook reads: :func:`answers`. Run where
    the grading environment is built (``docker/install.sh``), so that no grading computes it."""
    answers()
