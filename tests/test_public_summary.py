"""What the results' "Public Tests" entry says a question's public checks looked at,
without grading."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

from autograder.public_summary import PASSED, checks_of, question_summary


def public_q1_2(order, scrambled_accuracy, saved_accuracy_on_mixed):
    import torch

    from autograder.public.where_mlps_fail import public_defined, public_tensor

    public_tensor("order", order, (784,), torch.int64)
    public_defined(
        scrambled_accuracy=scrambled_accuracy, saved_accuracy_on_mixed=saved_accuracy_on_mixed
    )


def public_other(weights, crops, fit):
    from autograder.checks import expect_type
    from autograder.public.inductive_bias import public_array, public_function

    public_array("weights", weights, (25,))
    expect_type("crops", crops, list, what="a list of crops")
    public_function("fit", fit)


# names and shapes computed, as when_it_fails's public tests write them
def public_loop(X_fit, y_fit, net_weights):
    import torch

    from autograder.public.when_it_fails import public_tensor

    n = len(X_fit)
    for name, value in (("X_fit", X_fit), ("y_fit", y_fit)):
        public_tensor(name, value, (n, 784))
    for i, weight in enumerate(net_weights):
        public_tensor(f"net_weights[{i}]", weight, weight.shape)
    public_tensor("y_fit", y_fit, (n,), torch.int64)


def opaque(a, b):  # no check this module knows: named by its parameters
    assert a is not b


def case(func, passed, message=""):
    test_case = SimpleNamespace(hidden=False, body=SimpleNamespace(test_func=func))
    return SimpleNamespace(test_case=test_case, passed=passed, message=message)


def test_each_check_is_named_with_its_type_and_shape():
    assert checks_of(public_q1_2) == [
        "`order`: a torch tensor of shape (784,), torch.int64",
        "`scrambled_accuracy`: defined",
        "`saved_accuracy_on_mixed`: defined",
    ]
    assert checks_of(public_other) == [
        "`weights`: a NumPy array of shape (25,)",
        "`crops`: a list of crops",
        "`fit`: a function that runs on a small input without raising",
    ]
    assert checks_of(opaque) == ["`a`, `b`: defined, of the kind asked for"]
    # a computed name is never shown as the code that computes it, nor a computed shape as its
    # variables
    assert checks_of(public_loop) == [
        "`y_fit`: a torch tensor of the shape asked for, torch.int64",
        "`X_fit`, `net_weights`: defined, of the kind asked for",
    ]


def test_a_question_that_passed_its_public_checks_is_not_said_to_have_passed():
    hidden = SimpleNamespace(
        test_case=SimpleNamespace(hidden=True), passed=False, message="hidden: wrong value"
    )
    summary = question_summary(
        SimpleNamespace(name="q1_2", test_case_results=[case(public_q1_2, True), hidden])
    )
    assert summary == textwrap.dedent(f"""\
        q1_2: {PASSED}
            checked `scrambled_accuracy`, `saved_accuracy_on_mixed` defined
            checked `order`: a torch tensor of shape (784,), torch.int64"""), summary
    assert "wrong value" not in summary, (
        "the hidden result is not shown before grades are published"
    )


def test_a_failed_public_check_shows_its_reason_without_otters_source_line():
    message = (
        "❌ Test case failed\nError at line 12 in test q1_2:\n      public_tensor('order', order, "
        "(784,))\n"
        "CheckFailure: `order` should be a torch tensor, but it is a list."
    )
    summary = question_summary(
        SimpleNamespace(name="q1_2", test_case_results=[case(public_q1_2, False, message)])
    )
    assert summary.splitlines()[0] == "q1_2: public check failed", summary
    assert (
        summary.splitlines()[-1]
        == "    CheckFailure: `order` should be a torch tensor, but it is a list."
    ), summary
    assert "Error at line" not in summary, summary
