"""The results' "Public Tests" entry: what the public checks of each question looked at, and that
values are graded after submission.

Otter's own summary says "All test cases passed!" for a question whose public checks (names, kinds,
shapes) passed, even when its hidden tests then take every point. This one lists, per question, the
checks its public test runs (read from the test's source: ``public_tensor("order", order, (784,),
torch.int64)`` becomes "`order`: a torch tensor of shape (784,), torch.int64"), says whether they
passed, and never claims a question passed: its points come from the hidden tests, which this entry
does not reveal.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any

#: The entry's first line.
HEADER = (
    "Public checks: they look at names, types and shapes only, never at values. The points come "
    "from "
    "hidden tests, which check the values after you submit; their results show when grades are "
    "published."
)
#: What a question whose public checks passed gets, after the list of what was checked.
PASSED = "public checks passed; the values are graded after you submit"
#: The lines Otter frames a test case's message with, which say nothing of its cause.
OTTER_FRAMING = ("❌ Test case failed", "✅ Test case passed")
#: At most this many characters of one question's failure message are shown.
MAX_MESSAGE = 600


def _literal(node: ast.AST) -> str:
    """A call argument as written (``(784,)``, ``torch.int64``), quotes of a string removed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def _shape(node: ast.AST | None) -> str | None:
    """A shape argument as written when it is a literal (``(784,)``); ``None`` when absent; "of the
    shape asked for" when it is computed (``(n, 784)``: its names mean nothing to the student)."""
    if node is None:
        return None
    try:
        ast.literal_eval(node)
    except ValueError:
        return "of the shape asked for"
    return f"of shape {ast.unparse(node)}"


def _described(call: ast.Call) -> list[str]:
    """What one call of a public check checks, one phrase per name; ``[]`` for a call that is no
    check, or whose name is computed (a loop's ``name``, an f-string): :func:`checks_of` then names
    the test's parameters."""
    func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    args = [_literal(a) for a in call.args]
    keywords = {k.arg: _literal(k.value) for k in call.keywords if k.arg}
    nodes = {k.arg: k.value for k in call.keywords if k.arg}
    if func == "public_defined":
        return [f"`{name}`: defined" for name in keywords]
    if not args or not (
        isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
    ):
        return []
    name = args[0]
    if func == "public_tensor":
        shape = _shape(call.args[2] if len(call.args) > 2 else nodes.get("shape"))
        dtype = args[3] if len(args) > 3 else keywords.get("dtype", "torch.float32")
        kind = f"a torch tensor {shape}" if shape else "a torch tensor"
        return [f"`{name}`: {kind}" + (f", {dtype}" if dtype and dtype != "None" else "")]
    if func == "public_array":
        shape = _shape(call.args[2] if len(call.args) > 2 else nodes.get("shape"))
        return [f"`{name}`: a NumPy array" + (f" {shape}" if shape else "")]
    if func == "public_function":
        return [f"`{name}`: a function that runs on a small input without raising"]
    if func == "public_model":
        return [f"`{name}`: a torch model with the layers asked for"]
    if func == "expect_type":
        what = (
            keywords.get("what")
            or (args[3] if len(args) > 3 else None)
            or (args[2] if len(args) > 2 else "")
        )
        return [f"`{name}`: {what}"]
    return []


def checks_of(test_func: Any) -> list[str]:
    """The phrases :func:`_described` gives the public check calls in ``test_func``'s source, in
    order, then one naming the parameters none of them names (all of them when its source cannot be
    read or holds no check)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(test_func)))
    except (OSError, TypeError, SyntaxError):
        tree = None
    phrases: list[str] = []
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call):
            phrases += [p for p in _described(node) if p not in phrases]
    try:
        names = [n for n in inspect.signature(test_func).parameters if n != "env"]
    except (TypeError, ValueError):
        names = []
    named = " ".join(phrases)
    # checked under a computed name, or by no check known here
    rest = [n for n in names if f"`{n}`" not in named]
    return phrases + (
        [", ".join(f"`{n}`" for n in rest) + ": defined, of the kind asked for"] if rest else []
    )


def _reason(message: str) -> str:
    """A failed public check's reason: from the line that names the failure (``CheckFailure: ...``)
    on, without Otter's "Error at line N" and the test's source line; the whole message when no line
    names one."""
    lines = [line for line in message.strip().splitlines() if line.strip() not in OTTER_FRAMING]
    start = next(
        (i for i, line in enumerate(lines) if re.match(r"\s*\w*(Failure|Error|Exception): ", line)),
        0,
    )
    reason = "\n".join(line.strip() for line in lines[start:])
    return reason if len(reason) <= MAX_MESSAGE else reason[:MAX_MESSAGE] + " ..."


def question_summary(test_file: Any) -> str:
    """One question's lines: what its public checks looked at, and whether they passed (the reason
    if not)."""
    public = [r for r in test_file.test_case_results if not r.test_case.hidden]
    if not public:
        return f"{test_file.name}: no public checks; the values are graded after you submit."
    failed = [r for r in public if not r.passed]
    phrases = [p for r in public for p in checks_of(r.test_case.body.test_func)]
    detailed = {p.split(":")[0] for p in phrases if not p.endswith(": defined")}
    defined = [
        p.split(":")[0]
        for p in phrases
        if p.endswith(": defined") and p.split(":")[0] not in detailed
    ]
    checked = ([", ".join(defined) + " defined"] if defined else []) + [
        p for p in phrases if not p.endswith(": defined")
    ]
    lines = [f"{test_file.name}: " + ("public check failed" if failed else PASSED)]
    lines += [f"    checked {phrase}" for phrase in checked]
    lines += [textwrap.indent(_reason(r.message or ""), "    ") for r in failed]
    return "\n".join(lines)


def public_summary(test_files: list) -> str:
    """The "Public Tests" entry's text for graded ``test_files`` (Otter's, in notebook order)."""
    return "\n\n".join([HEADER] + [question_summary(tf) for tf in test_files])


def with_public_summary(results: dict, test_files: list) -> dict:
    """``results`` (Otter's Gradescope dict) with its "Public Tests" entry's output replaced by
    :func:`public_summary`; its name, visibility and passed/failed status (of the public checks)
    stay Otter's."""
    for test in results.get("tests", []):
        if test.get("name") == "Public Tests":
            test["output"] = public_summary(test_files)
    return results
