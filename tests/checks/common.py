"""Helpers shared by the check-level tests."""

from __future__ import annotations

from collections.abc import Callable

from autograder.checks import CheckFailure


def failures(calls: dict[str, Callable[[], object]]) -> dict[str, str | None]:
    """``{name: failure message, or None when the check passed}`` for each ``name: thunk``."""
    out: dict[str, str | None] = {}
    for name, call in calls.items():
        try:
            call()
            out[name] = None
        except CheckFailure as failure:
            out[name] = str(failure)
    return out
