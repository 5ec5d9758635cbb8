"""What kind of value a student's name holds, in words ("a torch tensor", "a function", "None").

Computed in the student process after each cell (:mod:`autograder.worker`'s ``kinds`` request) so
the judge can tell a student that a later cell rebound a graded name. Only the value's class and its
base classes are looked at, through ``type``'s own descriptors, so no code of the student's runs (a
class may redefine ``__name__``, ``__eq__`` or ``__class__``; none of those is called).
"""

from __future__ import annotations

import sys
from typing import Any

#: The kind of a name the notebook does not define.
MISSING = "not defined"
#: The most characters of a kind the judge keeps (a class's name is the student's).
MAX_KIND = 60

_NAME = type.__dict__["__name__"].__get__
_MRO = type.__dict__["__mro__"].__get__

#: Kinds by the name of a builtin class (or a base class) the value's class derives from, first
#: match wins.
_BUILTIN_KINDS = (
    ("bool", "a number"),
    ("int", "a number"),
    ("float", "a number"),
    ("complex", "a number"),
    ("str", "a string"),
    ("bytes", "bytes"),
    ("list", "a list"),
    ("tuple", "a tuple"),
    ("dict", "a dict"),
    ("set", "a set"),
    ("frozenset", "a set"),
    ("function", "a function"),
    ("builtin_function_or_method", "a function"),
    ("method", "a function"),
    ("partial", "a function"),
    ("type", "a class"),
    ("module", "a module"),
)


def _is_instance(mro: tuple, module_name: str, attribute: str) -> bool:
    """Whether a class of ``mro`` is ``sys.modules[module_name].<attribute>`` (identity: no
    ``__eq__`` runs)."""
    module = sys.modules.get(module_name)
    target = (
        module.__dict__.get(attribute)
        if module is not None and hasattr(module, "__dict__")
        else None
    )
    return target is not None and any(cls is target for cls in mro)


def kind_of(value: Any) -> str:
    """``value``'s kind in words: torch tensors, models, NumPy arrays and numbers by what they are,
    builtin containers and functions by theirs, any other object as "a <its class's name>"."""
    if value is None:
        return "None"
    try:
        cls = type(value)
        mro = _MRO(cls)
        if _is_instance(mro, "torch", "Tensor"):
            return "a torch tensor"
        if _is_instance(mro, "torch.nn", "Module"):
            return "a torch model"
        if _is_instance(mro, "numpy", "ndarray"):
            return "a NumPy array"
        if _is_instance(mro, "numpy", "number") or _is_instance(mro, "numpy", "bool_"):
            return "a number"
        names = [
            _NAME(c)
            for c in mro
            if sys.modules["builtins"].__dict__.get(_NAME(c)) is c
            or _NAME(c) in ("function", "builtin_function_or_method", "method", "partial", "module")
        ]
        for builtin, kind in _BUILTIN_KINDS:
            if builtin in names:
                return kind
        return f"a {_NAME(cls)}"[:MAX_KIND]
    except Exception:  # noqa: BLE001 - a class odd enough to defeat the descriptors has a kind of its own
        return "an object"


def kinds_of(namespace: dict, names: list) -> dict[str, str]:
    """``{name: kind}`` for the ``names`` (strings) of ``namespace``, :data:`MISSING` for those it
    lacks."""
    return {
        name: kind_of(namespace[name]) if name in namespace else MISSING
        for name in names
        if isinstance(name, str)
    }
