"""Check a ``results.json`` against Gradescope's results format.

The format is written down as a JSON Schema (draft 2020-12) in
``autograder/schemas/gradescope_results.schema.json``, after Gradescope's
autograder specification and what Otter-Grader 7 writes. :func:`validate_results`
checks a file or a dict against it, and also refuses what JSON Schema cannot
see but Gradescope's parser would: ``NaN`` and ``Infinity``.

    >>> validate_results({"score": 0.0, "tests": []})["score"]
    0.0
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_NAME = "gradescope_results.schema.json"


class ResultsSchemaError(ValueError):
    """A results file is not in Gradescope's format.

    ``problems`` lists each failure as ``"<field>: <reason>"``, the field
    written as a path such as ``tests[3].visibility`` (``<root>`` for the
    whole document); the message starts with the first of them.
    """

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        message = f"{source} is not a valid Gradescope results file: {problems[0]}"
        if len(problems) > 1:
            message += "".join(f"\n  also {p}" for p in problems[1:20])
            if len(problems) > 20:
                message += f"\n  ... and {len(problems) - 20} more"
        super().__init__(message)


@lru_cache(maxsize=1)
def schema() -> dict:
    """The JSON Schema, loaded from the package data."""
    text = (
        resources.files("autograder").joinpath("schemas", SCHEMA_NAME).read_text(encoding="utf-8")
    )
    loaded = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def field_path(parts) -> str:
    """``("tests", 3, "visibility")`` -> ``"tests[3].visibility"``; the empty path is
    ``"<root>"``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _describe(error: jsonschema.ValidationError) -> list[str]:
    """Readable problems for one schema error, naming the field that fails."""
    where = field_path(error.absolute_path)
    if error.validator == "anyOf" and not error.absolute_path:
        # The root rule "a score at the top level or on the tests": say which.
        return [
            f"score: missing; Gradescope needs a top-level 'score', or non-empty 'tests' that each "
            f"carry a 'score' or a 'status', at least one with a 'score' "
            f"({_score_detail(error.instance)})"
        ]
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        prefix = "" if where == "<root>" else where + "."
        return [f"{prefix}{key}: not a field of Gradescope's results format" for key in extra]
    if error.validator == "enum":
        return [
            f"{where}: {error.instance!r} is not one of "
            f"{', '.join(map(repr, error.validator_value))}"
        ]
    if error.validator == "type":
        return [f"{where}: {error.instance!r} is not of type {error.validator_value!r}"]
    return [f"{where}: {error.message}"]


def _score_detail(instance: Any) -> str:
    if not isinstance(instance, dict):
        return "the document is not an object"
    tests = instance.get("tests")
    if not tests:
        return "there is no top-level score and no tests"
    bare = [
        i
        for i, t in enumerate(tests)
        if isinstance(t, dict) and "score" not in t and "status" not in t
    ]
    if bare:
        return ", ".join(f"tests[{i}]" for i in bare) + " lack both score and status"
    return "no test has a score"


def _non_finite(value: Any, parts: tuple = ()) -> list[str]:
    """Paths of NaN or infinite numbers, which Python's json writes but JSON forbids."""
    if isinstance(value, float) and not math.isfinite(value):
        return [
            f"{field_path(parts)}: {value!r} is not a finite number (JSON has no NaN or Infinity)"
        ]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _non_finite(v, parts + (k,))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _non_finite(v, parts + (i,))]
    return []


def problems(results: dict) -> list[str]:
    """Every way ``results`` departs from the format (empty when it is valid)."""
    validator = jsonschema.Draft202012Validator(schema())
    found: list[str] = []
    for error in sorted(
        validator.iter_errors(results), key=lambda e: (list(map(str, e.absolute_path)), e.validator)
    ):
        found.extend(_describe(error))
    found.extend(_non_finite(results))
    return found


def validate_results(results: str | Path | dict) -> dict:
    """Check a results file (path) or an already-loaded dict; returns the dict.

    Raises:
        ResultsSchemaError: the results break the format; the message names
            the failing field, e.g. ``tests[2].visibility: 'secret' is not one of ...``.
        FileNotFoundError: ``results`` is a path that does not exist.
    """
    if isinstance(results, dict):
        source, data = "results", results
    else:
        path = Path(results)
        source = str(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ResultsSchemaError(source, [f"<root>: not JSON ({err})"]) from err
    found = problems(data)
    if found:
        raise ResultsSchemaError(source, found)
    return data
