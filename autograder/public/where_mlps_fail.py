"""Public tests of "Where MLPs Fail" (Lesson 4.5.3): defined, kind, shape and dtype. Reveal no
value. The generic ones of :mod:`autograder.public` serve it."""

from __future__ import annotations

from autograder.public import public_defined, public_function, public_tensor

__all__ = ["public_defined", "public_function", "public_tensor"]
