"""Hypothesis settings and strategies for property-based hidden tests.

Grading must be repeatable: a regrade gives the same score and the same
message. So every property test here is derandomized (its examples are a
function of the test's source), keeps no example database, has no deadline
(the student's function may be slow on the first call) and is bounded in
examples, which bounds its time.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable

import hypothesis
import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from autograder.checks import CheckFailure

#: Derandomized and bounded: the same examples on every run, no database.
GRADING = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=40,
    print_blob=False,
    report_multiple_bugs=False,  # one failure, one student-facing CheckFailure
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=list(HealthCheck),
)


def given(*strategies, **named_strategies) -> Callable:
    """Hypothesis's ``given``, for a property whose failing examples keep nothing they held:
    Hypothesis keeps a failing example's exception while it searches and shrinks, and with it the
    frames that hold what the student's function returned (a function that returns hundreds of MB
    on every input but the smallest would have many of them held at once). Each exception leaves
    with its frames' locals cleared, and those of the exceptions it was raised while handling
    (``traceback.clear_frames``); the examples are the same (Hypothesis derandomizes by the
    property's own source, which ``functools.wraps`` keeps)."""

    def decorate(test: Callable) -> Callable:
        @functools.wraps(test)
        def cleared(*args, **kwargs):
            try:
                return test(*args, **kwargs)
            except Exception as err:
                seen, chained = set(), err
                # the exceptions it was raised from too
                while chained is not None and id(chained) not in seen:
                    seen.add(id(chained))
                    traceback.clear_frames(chained.__traceback__)
                    chained = chained.__context__ or chained.__cause__
                raise

        return hypothesis.given(*strategies, **named_strategies)(cleared)

    return decorate


def seeded_images(draw, shape: tuple[int, ...], lit_fraction: float = 0.6) -> torch.Tensor:
    """A float32 image batch of ``shape`` in [0, 1] with about ``lit_fraction`` lit pixels.

    Drawn from a torch generator seeded by Hypothesis, so a shrunk example
    is still a small, reproducible tensor. Pixels are exact multiples of
    1/255, like Fashion-MNIST's.
    """
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    levels = torch.randint(1, 256, shape, generator=gen).to(torch.float32) / 255
    lit = torch.rand(shape, generator=gen) < lit_fraction
    return levels * lit


def run_property(test: Callable[[], None]) -> None:
    """Run a ``@given`` test under :data:`GRADING`, keeping only the student-facing message.

    Hypothesis shrinks a failure to a small input and re-raises the
    :class:`CheckFailure` that input caused. When the input does not fail
    again on replay (the student's function answered the same input
    differently, or a limit stopped one of its calls), Hypothesis raises
    ``Flaky``: the student sees the first :class:`CheckFailure` it saw, or
    :data:`INCONSISTENT`, never Hypothesis's report (file paths, line
    numbers). Anything else the property raised is the grader's own bug and
    propagates unchanged.
    """
    try:
        GRADING(test)()
    except CheckFailure as failure:
        raise CheckFailure(str(failure)) from None
    except hypothesis.errors.Flaky as flaky:
        first = _first_check_failure(flaky)
        raise CheckFailure(str(first) if first is not None else INCONSISTENT) from None


#: What a student is told when a property's failing input passed when tried again and no check said
#: why.
INCONSISTENT = (
    "the function gave different results when the same input was tried again (a property test "
    "calls it several times): its result must depend on its arguments alone."
)


def _first_check_failure(error: BaseException, depth: int = 0) -> CheckFailure | None:
    """The first :class:`CheckFailure` in ``error``, the exceptions it groups, or those it was
    raised from."""
    if isinstance(error, CheckFailure):
        return error
    if depth > 20:
        return None
    for inner in [*getattr(error, "exceptions", ()), error.__cause__, error.__context__]:
        if isinstance(inner, BaseException):
            found = _first_check_failure(inner, depth + 1)
            if found is not None:
                return found
    return None


__all__ = ["GRADING", "given", "st", "seeded_images", "run_property"]
