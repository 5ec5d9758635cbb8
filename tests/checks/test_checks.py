"""Unit tests for the layered checks in ``autograder/checks/__init__.py``.

Every layer is tested for its student-facing message: it names the variable,
says what is wrong, and never shows the expected value.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autograder.checks import (
    MISSING,
    CheckFailure,
    call_student,
    expect_bool,
    expect_callable,
    expect_close,
    expect_defined,
    expect_equal,
    expect_int,
    expect_number,
    expect_sequence,
    expect_tensor,
    expect_type,
    keys_shown,
    plain,
    short_repr,
)


def failure_message(func, *args, **kwargs) -> str:
    """The message of the :class:`CheckFailure` that ``func(*args, **kwargs)`` raises."""
    with pytest.raises(CheckFailure) as info:
        func(*args, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------- CheckFailure


def test_check_failure_is_an_assertion_error():
    # Otter counts a hidden test as failed on AssertionError; CheckFailure must be one.
    assert issubclass(CheckFailure, AssertionError), "CheckFailure should subclass AssertionError"


# ---------------------------------------------------------------- defined


@pytest.mark.parametrize("missing", [None, MISSING], ids=["None", "MISSING"])
def test_expect_defined_reports_a_missing_name(missing):
    actual = failure_message(expect_defined, "edges", missing)
    expected = "`edges` is not defined"
    assert expected in actual, (
        f"missing value: expected {expected!r} in the message, got {actual!r}"
    )
    assert "keep the name `edges`" in actual, (
        f"the message should tell the student to keep the name: {actual!r}"
    )


def test_expect_defined_reports_the_unfilled_placeholder():
    actual = failure_message(expect_defined, "edges", ...)
    expected = "`edges` is still `...`"
    assert expected in actual, f"Ellipsis: expected {expected!r} in the message, got {actual!r}"
    assert "not defined" not in actual, f"Ellipsis is defined, only unfilled: {actual!r}"


@pytest.mark.parametrize("value", [0, 0.0, False, "", [], torch.zeros(0)], ids=repr)
def test_expect_defined_returns_falsy_answers_unchanged(value):
    actual = expect_defined("answer", value)
    assert actual is value, (
        f"a falsy but defined answer {value!r} should be returned as it is, got {actual!r}"
    )


@pytest.mark.parametrize(
    "check",
    [
        lambda v: expect_type("answer", v, int),
        lambda v: expect_callable("answer", v),
        lambda v: expect_tensor("answer", v),
        lambda v: expect_number("answer", v),
        lambda v: expect_int("answer", v),
        lambda v: expect_bool("answer", v),
        lambda v: expect_sequence("answer", v, 2),
        lambda v: call_student("answer", v),
    ],
    ids=["type", "callable", "tensor", "number", "int", "bool", "sequence", "call_student"],
)
def test_every_check_starts_with_the_defined_layer(check):
    actual = failure_message(check, None)
    expected = "`answer` is not defined"
    assert expected in actual, (
        f"None should fail the defined layer first: expected {expected!r}, got {actual!r}"
    )
    actual = failure_message(check, ...)
    expected = "`answer` is still `...`"
    assert expected in actual, (
        f"... should fail the defined layer first: expected {expected!r}, got {actual!r}"
    )


# ---------------------------------------------------------------- type


def test_expect_type_names_the_wanted_and_the_actual_type():
    actual = failure_message(expect_type, "fig", "a picture", dict, what="a dict")
    expected = "`fig` should be a dict, but it is a str."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_type_default_description_joins_type_names():
    actual = failure_message(expect_type, "n", 1.5, (int, str))
    expected = "`n` should be int or str, but it is a float."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_type_rejects_bool_where_a_number_is_asked():
    actual = failure_message(expect_type, "count", True, int)
    assert "`count` should be int, but it is a bool." == actual, f"bool passed as int: {actual!r}"


def test_expect_type_accepts_bool_when_bool_is_asked():
    actual = expect_type("flag", True, (bool, int))
    assert actual is True, f"bool should pass when bool is among the types, got {actual!r}"


def test_expect_callable_rejects_a_value():
    actual = failure_message(expect_callable, "slide", torch.zeros(2, 3))
    expected = (
        "`slide` should be a function, but it is a tensor of shape (2, 3) and dtype torch.float32."
    )
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


# ---------------------------------------------------------------- tensor


@pytest.mark.parametrize(
    "value, described",
    [
        ([[1.0, 2.0]], "a list"),
        ((1.0, 2.0), "a tuple"),
        (np.zeros((2, 3), dtype=np.float32), "a NumPy array of shape (2, 3) and dtype float32"),
    ],
    ids=["list", "tuple", "numpy"],
)
def test_expect_tensor_wrong_type_gives_the_conversion_hint(value, described):
    actual = failure_message(expect_tensor, "x", value, shape=(2, 3))
    expected = f"`x` should be a torch tensor, but it is {described}."
    assert actual.startswith(expected), (
        f"expected the message to start with {expected!r}, got {actual!r}"
    )
    assert "torch.tensor(...)" in actual and "torch.from_numpy(...)" in actual, (
        f"a list, tuple or array should come with the conversion hint: {actual!r}"
    )


def test_expect_tensor_wrong_type_without_a_conversion_gives_no_hint():
    actual = failure_message(expect_tensor, "x", 3.0)
    expected = "`x` should be a torch tensor, but it is a float."
    assert actual == expected, (
        f"a float cannot be converted the same way; expected {expected!r}, got {actual!r}"
    )


def test_expect_tensor_wrong_shape_names_both_shapes():
    actual = failure_message(
        expect_tensor, "edges", torch.zeros(1, 1, 28, 28), shape=(1, 1, 26, 26)
    )
    expected = "`edges` has shape (1, 1, 28, 28), but it should have shape (1, 1, 26, 26)."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_tensor_float64_for_float32_is_a_dtype_failure():
    actual = failure_message(
        expect_tensor,
        "edges",
        torch.zeros(2, 2, dtype=torch.float64),
        shape=(2, 2),
        dtype=torch.float32,
    )
    expected = "`edges` has dtype torch.float64, but it should have dtype torch.float32."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_tensor_checks_shape_before_dtype():
    actual = failure_message(
        expect_tensor, "edges", torch.zeros(3, dtype=torch.float64), shape=(2,), dtype=torch.float32
    )
    assert "shape" in actual and "dtype" not in actual, (
        f"the shape layer should fail first: {actual!r}"
    )


def test_expect_tensor_counts_nan_entries():
    value = torch.full((2, 3), float("nan"))
    actual = failure_message(expect_tensor, "edges", value, shape=(2, 3), dtype=torch.float32)
    expected = "`edges` holds 6 NaN or infinite value(s)."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_tensor_counts_infinite_entries_among_finite_ones():
    value = torch.tensor([1.0, float("inf"), -float("inf"), 2.0])
    actual = failure_message(expect_tensor, "edges", value)
    expected = "`edges` holds 2 NaN or infinite value(s)."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_tensor_finite_false_accepts_nan():
    value = torch.tensor([float("nan")])
    actual = expect_tensor("edges", value, finite=False)
    assert actual is value, "finite=False should let NaN through"


def test_expect_tensor_rejects_a_tensor_that_requires_grad():
    value = torch.ones(2, requires_grad=True) * 2
    actual = failure_message(expect_tensor, "maps", value, shape=(2,))
    expected = "`maps` still requires grad"
    assert expected in actual, f"expected {expected!r} in the message, got {actual!r}"
    assert "torch.no_grad()" in actual and ".detach()" in actual, (
        f"the message should say how to fix it: {actual!r}"
    )


def test_expect_tensor_requires_grad_none_skips_the_grad_layer():
    value = torch.ones(2, requires_grad=True)
    actual = expect_tensor("maps", value, requires_grad=None)
    assert actual is value, "requires_grad=None should accept a tensor that requires grad"


def test_expect_tensor_returns_a_good_tensor_unchanged():
    value = torch.arange(6, dtype=torch.float32).view(2, 3)
    actual = expect_tensor("x", value, shape=[2, 3], dtype=torch.float32)
    assert actual is value, "a tensor that passes every layer should be returned as it is"


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize("check", [expect_number, expect_int], ids=["number", "int"])
def test_bool_is_rejected_as_a_number(check):
    actual = failure_message(check, "count", True)
    assert "`count` should be a" in actual and "but it is a bool" in actual, (
        f"True is not a number answer: {actual!r}"
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        (torch.tensor(0.5), 0.5),
        (torch.tensor([0.25]), 0.25),
        (torch.tensor([[2]]), 2.0),
        (np.float32(0.75), 0.75),
        (np.int64(4), 4.0),
        (3, 3.0),
        (np.asarray(0.125), 0.125),
    ],
    ids=[
        "0-d tensor",
        "1-element tensor",
        "1x1 int tensor",
        "np.float32",
        "np.int64",
        "int",
        "0-d ndarray",
    ],
)
def test_expect_number_accepts_one_element_tensors_and_scalars(value, expected):
    actual = expect_number("accuracy", value)
    assert type(actual) is float, (
        f"expect_number should return a Python float, got {type(actual).__name__}"
    )
    assert actual == expected, f"expect_number({value!r}): expected {expected}, got {actual}"


def test_expect_number_rejects_a_tensor_of_several_elements():
    actual = failure_message(expect_number, "accuracy", torch.tensor([0.5, 0.6]))
    expected = (
        "`accuracy` should be a single number, but it is a tensor of shape (2,) and dtype "
        "torch.float32.")
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


@pytest.mark.parametrize(
    "check, value",
    [
        (expect_number, np.array([0.5, 0.6])),
        (expect_number, np.array([0.5])),
        (expect_int, np.array([8])),
    ],
    ids=["two", "one-element 1-d", "int 1-d"],
)
def test_expect_number_rejects_an_array_that_is_not_0_d(check, value):
    actual = failure_message(check, "accuracy", value)
    kind = "number" if check is expect_number else "whole number (int)"
    expected = f"`accuracy` should be a {kind}, but it is a NumPy array"
    assert actual.startswith(expected), f"expected {expected!r}, got {actual!r}"


def test_expect_number_rejects_a_string():
    actual = failure_message(expect_number, "accuracy", "0.87")
    expected = "`accuracy` should be a number, but it is a str."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), torch.tensor(float("nan"))],
    ids=["nan", "inf", "tensor nan"],
)
def test_expect_number_rejects_non_finite_values(value):
    actual = failure_message(expect_number, "logit", value)
    assert "`logit` is" in actual and "not a finite number" in actual, (
        f"non-finite number accepted: {actual!r}"
    )


def test_expect_number_within_tolerance_passes():
    actual = expect_number("logit", 4.12345, 4.1234, abs_tol=1e-4)
    assert actual == pytest.approx(4.12345), (
        f"a value within abs_tol should pass and be returned, got {actual}"
    )
    actual = expect_number("big", 1010.0, 1000.0, rel_tol=0.02)
    assert actual == 1010.0, f"a value within rel_tol should pass and be returned, got {actual}"


def test_expect_number_wrong_value_does_not_reveal_the_expected_value():
    expected_value = 0.8706
    actual = failure_message(expect_number, "accuracy", 0.8401, expected_value, abs_tol=2e-4)
    expected = "`accuracy` has the right type but the wrong value."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"
    assert repr(expected_value) not in actual, f"the message reveals the expected value: {actual!r}"


def test_expect_number_tolerance_is_the_larger_of_abs_and_rel():
    # rel_tol * |expected| = 0.1 > abs_tol, so 100.05 against 100 passes; 100.2 fails
    actual = expect_number("n", 100.05, 100.0, abs_tol=0.01, rel_tol=1e-3)
    assert actual == 100.05, f"within rel_tol should pass, got {actual}"
    failure_message(expect_number, "n", 100.2, 100.0, abs_tol=0.01, rel_tol=1e-3)


@pytest.mark.parametrize(
    "value",
    [3, 3.0, np.int64(3), np.float64(3.0), torch.tensor(3), torch.tensor([3.0])],
    ids=["int", "3.0", "np.int64", "np.float64", "tensor int", "tensor float"],
)
def test_expect_int_accepts_whole_numbers_of_any_kind(value):
    actual = expect_int("count", value, 3)
    assert type(actual) is int and actual == 3, (
        f"expect_int({value!r}) should give the int 3, got {actual!r}"
    )


def test_expect_int_rejects_a_fraction():
    actual = failure_message(expect_int, "count", 3.5)
    expected = "`count` should be a whole number (int), but it is a float."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_int_wrong_value_does_not_reveal_the_expected_value():
    expected_value = 54090
    actual = failure_message(expect_int, "total_count", 54080, expected_value)
    expected = "`total_count` has the right type but the wrong value."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"
    assert repr(expected_value) not in actual, f"the message reveals the expected value: {actual!r}"


@pytest.mark.parametrize(
    "value",
    [True, np.bool_(True), torch.tensor(True), torch.tensor([True])],
    ids=["bool", "np.bool_", "0-d tensor", "1-element tensor"],
)
def test_expect_bool_accepts_every_kind_of_true(value):
    actual = expect_bool("same", value, True)
    assert actual is True, (
        f"expect_bool({value!r}) should return the Python bool True, got {actual!r}"
    )


@pytest.mark.parametrize("value, described", [(1, "an int"), ("True", "a str")], ids=["int", "str"])
def test_expect_bool_rejects_non_bools(value, described):
    actual = failure_message(expect_bool, "same", value)
    expected = "`same` should be True or False, but it is a"
    assert actual.startswith(expected), (
        f"expected the message to start with {expected!r}, got {actual!r}"
    )


def test_expect_bool_wrong_value():
    actual = failure_message(expect_bool, "same", False, True)
    expected = "`same` has the right type but the wrong value."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_plain_unwraps_and_leaves_other_values():
    actual = plain("v", torch.tensor([[7]]))
    assert actual == 7 and type(actual) is int, (
        f"a 1x1 int tensor should become the int 7, got {actual!r}"
    )
    value = [1, 2]
    assert plain("v", value) is value, "a list is not a scalar and should be returned unchanged"


# ---------------------------------------------------------------- close / equal / sequence


def test_expect_close_counts_wrong_elements_without_values():
    expected_tensor = torch.tensor([[0.123456, 0.654321, 1.5], [2.75, -3.125, 0.0]])
    actual_tensor = expected_tensor.clone()
    actual_tensor[0, 0] = 9.0
    actual_tensor[1, 1] = 9.5
    actual = failure_message(
        expect_close, "edges", actual_tensor, expected_tensor, rtol=1e-5, atol=1e-5
    )
    expected = (
        "`edges` has the right shape and dtype, but 2 of its 6 values are wrong (tolerance "
        "atol=1e-05, rtol=1e-05).")
    assert actual == expected, f"expected {expected!r}, got {actual!r}"
    for value in (0.123456, -3.125, 0.654321):
        assert repr(value) not in actual, (
            f"the message reveals the expected value {value!r}: {actual!r}"
        )
    assert "tensor(" not in actual, f"the message prints a tensor: {actual!r}"


def test_expect_close_says_where():
    expected_tensor = torch.zeros(2, 4)
    actual_tensor = torch.ones(2, 4)
    actual = failure_message(
        expect_close,
        "maps",
        actual_tensor,
        expected_tensor,
        rtol=0,
        atol=0,
        where="on the columns both maps hold",
    )
    expected = "8 of its 8 values on the columns both maps hold are wrong"
    assert expected in actual, f"expected {expected!r} in the message, got {actual!r}"


def test_expect_close_nan_is_never_equal():
    expected_tensor = torch.tensor([float("nan"), 1.0])
    actual = failure_message(
        expect_close, "v", expected_tensor.clone(), expected_tensor, rtol=0, atol=0
    )
    assert "1 of its 2 values" in actual, f"NaN should count as a wrong value: {actual!r}"


def test_expect_close_within_tolerance_passes_and_casts_expected():
    expected_tensor = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    actual_tensor = torch.tensor([1.0, 2.0, 3.0 + 5e-6], dtype=torch.float32)
    actual = expect_close("v", actual_tensor, expected_tensor, rtol=0, atol=1e-5)
    assert actual is None, (
        "values within tolerance should pass (a float64 expected is cast to float32)"
    )


def test_expect_close_relative_tolerance_scales_with_expected():
    expected_tensor = torch.tensor([1000.0, 1.0])
    actual_tensor = torch.tensor([1000.5, 1.5])
    actual = failure_message(expect_close, "v", actual_tensor, expected_tensor, rtol=1e-3, atol=0)
    assert "1 of its 2 values" in actual, f"only the small entry is outside rtol=1e-3: {actual!r}"


def test_expect_close_shape_mismatch():
    actual = failure_message(
        expect_close, "v", torch.zeros(2, 3), torch.zeros(3, 2), rtol=0, atol=0
    )
    expected = "`v` has shape (2, 3), but it should have shape (3, 2)."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_equal_counts_wrong_elements():
    expected_tensor = torch.tensor([5, 6, 7, 8])
    actual = failure_message(expect_equal, "order", torch.tensor([5, 6, 8, 7]), expected_tensor)
    expected = "`order` has the right shape and dtype, but 2 of its 4 values are wrong."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_expect_equal_checks_the_tensor_layers_first():
    actual = failure_message(expect_equal, "order", [5, 6, 7, 8], torch.tensor([5, 6, 7, 8]))
    assert "should be a torch tensor" in actual, f"a list should fail the type layer: {actual!r}"
    actual = failure_message(expect_equal, "order", torch.tensor([5.0, 6.0]), torch.tensor([5, 6]))
    assert "has dtype torch.float32, but it should have dtype torch.int64" in actual, (
        f"a float tensor should fail the dtype layer: {actual!r}"
    )


def test_expect_equal_passes_equal_values_and_rejects_others():
    assert expect_equal("t", torch.tensor([1, 2]), torch.tensor([1, 2])) is None, (
        "equal tensors should pass"
    )
    assert expect_equal("p", (1, 2), (1, 2)) is None, "equal tuples should pass"
    actual = failure_message(expect_equal, "p", (1, 2), (2, 1))
    assert actual == "`p` has the wrong value.", (
        f"unexpected message for unequal tuples: {actual!r}"
    )


def test_expect_sequence_checks_type_and_length():
    actual = failure_message(expect_sequence, "pair", {1, 2}, 2)
    expected = "`pair` should be a list or tuple, but it is a set."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"
    actual = failure_message(expect_sequence, "pair", [1, 2, 3], 2)
    expected = "`pair` has 3 items, but it should have 2."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"
    value = (1, 2)
    assert expect_sequence("pair", value, 2) is value, "a good sequence should be returned as it is"


# ---------------------------------------------------------------- call_student


def test_keys_shown_lists_a_few_keys_each_cut_short():
    """The message that lists a dict's keys shows ten keys at most, each cut short: a key can be a
    tuple of 1,000 references to one string of a megabyte, whose repr is a gigabyte of text."""
    assert keys_shown({"weight": 1, "bias": 2}) == "['bias', 'weight']", (
        "an honest dict's keys, sorted"
    )
    huge = ("x" * 2**20,) * 1000
    actual = keys_shown({huge: 1, "bias": 2})
    assert len(actual) < 200 and actual.startswith("['bias', ('xxx"), (
        f"a huge key cut short: {actual[:300]!r}"
    )
    assert short_repr("x" * 2**20) == "'" + "x" * 17 + "..." + "x" * 18 + "'", (
        "a long string cut to 40 characters"
    )
    actual = keys_shown({f"k{i:02d}": i for i in range(25)})
    expected = (
        "['k00', 'k01', 'k02', 'k03', 'k04', 'k05', 'k06', 'k07', 'k08', 'k09', ... and 15 more]"
    )
    assert actual == expected, f"ten keys, then how many more: {actual!r}"


def test_inductive_bias_reads_a_returned_list_as_numbers_only():
    """A returned list is read as numbers only: one string of a million characters and 399 empty
    ones is 1 MB to send, and ``np.asarray`` pads every string to the longest, 1.6 GB."""
    from autograder.checks.inductive_bias import _numbers

    actual = failure_message(_numbers, "crops(1, rng)", ["x" * 10, "", ""])
    assert (
        actual == "`crops(1, rng)` returned text, not numbers: return a NumPy array of floats."
    ), actual
    actual = _numbers("crops(1, rng)", [[0.5, 1.0], (0.25, np.float64(2.0))])
    assert actual.dtype == np.float64 and actual.tolist() == [[0.5, 1.0], [0.25, 2.0]], (
        f"numbers are read: {actual}"
    )


class _Returned:
    """What a student's function returned (weakly referenceable, unlike a tensor's Python wrapper's
    stand-ins)."""


def test_a_propertys_failing_examples_keep_nothing_the_function_returned():
    """A property's failing examples keep nothing the student's function returned: a function can
    return 252 MB on all but the smallest inputs, and the exceptions of the failing examples that
    Hypothesis keeps while it searches and shrinks would hold, with their frames, 11 returns
    (8.3 GB)."""
    import gc
    import weakref

    from autograder.checks.properties import given, run_property, st

    alive, most = weakref.WeakSet(), []

    # right on small inputs only: Hypothesis searches, then shrinks
    def student(n):
        if n <= 100:
            return n
        gc.collect()
        most.append(len(alive))
        returned = _Returned()
        alive.add(returned)
        return returned

    @given(st.integers(0, 1000))
    def never_right(n):
        got = call_student("f", student, n)
        try:
            expect_type(f"f({n})", got, int)
        # raised again while handling it: the first one's frames are kept too
        except CheckFailure as err:
            raise CheckFailure(f"{err} (n = {n})") from None

    with pytest.raises(CheckFailure):
        run_property(never_right)
    assert len(most) > 5 and max(most) == 0, f"returns alive at each call: {most}"


def test_a_property_whose_failure_does_not_replay_shows_the_first_failure_not_hypothesis_report():
    """A function that fails an input once and passes it when Hypothesis replays it (a call stopped
    by a limit, then answered) fails with its first failure's message: Hypothesis's own report of a
    ``FlakyFailure`` holds file paths and line numbers, which students must not see."""
    from autograder.checks.properties import INCONSISTENT, given, run_property, st

    calls = []

    @given(st.integers(0, 10))
    def fails_once(n):
        calls.append(n)
        if len(calls) == 1:
            raise CheckFailure("`f` was stopped: it used more than its 30 CPU seconds.")

    with pytest.raises(CheckFailure) as raised:
        run_property(fails_once)
    assert str(raised.value) == "`f` was stopped: it used more than its 30 CPU seconds."

    seen = []

    @given(st.integers(0, 10))
    def raises_once_then_passes(n):
        seen.append(n)
        if len(seen) == 1:
            raise ValueError("not a check's failure")

    with pytest.raises(CheckFailure) as raised:
        run_property(raises_once_then_passes)
    assert str(raised.value) == INCONSISTENT


def test_once_keeps_a_failures_message_not_what_its_frames_held():
    """``once`` keeps each verdict's message only: the CheckFailure, its traceback and the exception
    it is raised while handling hold in their frames what the student's functions returned (about
    250 MB a kind), which would stay alive for the rest of the grading."""
    import gc
    import weakref

    from autograder.checks import once

    made = []

    def check():
        returned = _Returned()
        made.append(weakref.ref(returned))
        try:
            raise ValueError("the student's function raised")
        except ValueError:
            raise CheckFailure("`f(x)` is wrong.")  # noqa: B904 - a check's failure while the student's error is handled

    funcs = (_Returned(),)  # a key of its own for this test's verdict
    actual = [once("a test's own kind", funcs, check) for _ in range(2)]
    gc.collect()
    assert [str(a) for a in actual] == ["`f(x)` is wrong."] * 2 and len(made) == 1, (
        "one verdict, decided once"
    )
    assert made[0]() is None, "nothing the check's frames held is kept with its verdict"


def test_call_student_returns_the_result():
    actual = call_student("double", lambda x: 2 * x, 21)
    assert actual == 42, f"call_student should return the function's result, got {actual!r}"


def test_call_student_wraps_an_exception_with_argument_shapes():
    def slide(x, pixels):
        raise IndexError("too many indices")

    x = torch.full((2, 1, 28, 28), 0.123456)
    actual = failure_message(call_student, "slide", slide, x, 2)
    expected = "`slide(<tensor (2, 1, 28, 28) float32>, 2)` raised IndexError: too many indices"
    assert actual == expected, f"expected {expected!r}, got {actual!r}"
    assert "0.1234" not in actual, f"the message shows a tensor's values: {actual!r}"


def test_call_student_shows_keyword_arguments_and_other_types():
    def window_sum(image, kernel, bias, row, col):
        raise RuntimeError("shape mismatch")

    actual = failure_message(
        call_student,
        "window_sum",
        window_sum,
        torch.zeros(5, 5),
        [[1, 0]],
        bias=0.5,
        row=1,
        col=None,
    )
    expected = (
        "`window_sum(<tensor (5, 5) float32>, <list>, bias=0.5, row=1, col=None)` raised "
        "RuntimeError: shape mismatch"
    )
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_call_student_does_not_chain_the_student_traceback():
    with pytest.raises(CheckFailure) as info:
        call_student("f", lambda: 1 / 0)
    actual = info.value.__suppress_context__
    assert actual is True, "the student's exception should be suppressed (raise ... from None)"


@pytest.mark.parametrize("returned", [None, ...], ids=["None", "Ellipsis"])
def test_call_student_reports_a_missing_return(returned):
    actual = failure_message(call_student, "peak", lambda m: returned, torch.zeros(1, 1, 3, 3))
    expected = (
        f"`peak(<tensor (1, 1, 3, 3) float32>)` returned {returned!r}: does `peak` end with a "
        "`return`?")
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def test_call_student_lets_a_check_failure_through_unchanged():
    def nested():
        raise CheckFailure("inner message")

    actual = failure_message(call_student, "f", nested)
    assert actual == "inner message", (
        f"a CheckFailure from inside should pass through unchanged, got {actual!r}"
    )


def test_call_student_rejects_a_non_function():
    actual = failure_message(call_student, "slide", 3)
    expected = "`slide` should be a function, but it is a"
    assert actual.startswith(expected) and actual.endswith("int."), (
        f"expected {expected!r} ... 'int.', got {actual!r}"
    )


# ---------------------------------------------------------------- figure_parts.grid_cells


@pytest.mark.parametrize(
    "layout, expected_shape",
    [
        ("subplots_4x4", (4, 4)),
        ("subplots_with_colour_bars", (4, 4)),
        ("add_axes_4x4", (4, 4)),
        ("row_of_16", (1, 16)),
        ("one_place", (1, 1)),
    ],
)
def test_grid_cells_reads_rows_and_columns_from_where_the_axes_are_drawn(layout, expected_shape):
    import matplotlib.pyplot as plt

    from autograder import figure_parts

    fig = plt.figure()
    if layout.startswith("subplots"):
        axes = list(fig.subplots(4, 4).flat)
        if layout == "subplots_with_colour_bars":  # each colour bar steals width from its Axes
            for ax in axes:
                fig.colorbar(ax.imshow(np.zeros((28, 28))), ax=ax)
    elif layout == "add_axes_4x4":  # made down the columns, drawn in four rows of four
        axes = [
            fig.add_axes((0.05 + 0.23 * (k // 4), 0.74 - 0.23 * (k % 4), 0.2, 0.2))
            for k in range(16)
        ]
    elif layout == "row_of_16":
        axes = list(fig.subplots(1, 16).flat)
    else:
        axes = [fig.add_axes((0.1, 0.1, 0.5, 0.5)) for _ in range(16)]
    try:
        rows, columns, cells = figure_parts.grid_cells(axes)
    finally:
        plt.close(fig)
    assert (rows, columns) == expected_shape, (
        f"{layout}: read as {rows} by {columns}, expected {expected_shape}"
    )
    if layout == "add_axes_4x4":
        # the k-th Axes: row k % 4 from the top
        expected_cells = [(k % 4, k // 4) for k in range(16)]
    elif layout == "one_place":
        expected_cells = [(0, 0)] * 16
    else:
        expected_cells = [divmod(k, expected_shape[1]) for k in range(16)]
    assert cells == expected_cells, f"{layout}: cells {cells}, expected {expected_cells}"


def test_grid_cells_refuses_no_axes():
    from autograder import figure_parts

    with pytest.raises(ValueError, match="at least one Axes"):
        figure_parts.grid_cells([])


# ---------------------------------------------------------------- figure_drawing.drawn_mismatch


def _gradient_image():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 3))
    return fig, ax, ax.imshow(np.arange(28 * 28, dtype=float).reshape(28, 28), cmap="viridis")


def test_drawn_mismatch_is_zero_for_a_plain_image_and_sees_later_changes_outside_a_block():
    import matplotlib.pyplot as plt

    from autograder import figure_drawing

    fig, ax, image = _gradient_image()
    try:
        before = figure_drawing.drawn_mismatch(image)
        # the whole Axes drawn white
        ax.set_agg_filter(lambda pixels, dpi: (np.ones_like(pixels), 0, 0))
        after = figure_drawing.drawn_mismatch(image)
    finally:
        plt.close(fig)
    assert before == 0.0, (
        f"an image drawn by imshow alone shows every cell in its own colour: {before}"
    )
    assert after > 0.9, (
        f"an Axes filtered white hides (nearly) every cell of a viridis gradient: {after}"
    )


def _beside_an_image(kind: str):
    """An image, and beside it an Axes holding an honest plot of ``kind``."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3))
    image = left.imshow(np.arange(28 * 28, dtype=float).reshape(28, 28), cmap="viridis")
    if kind == "scatter":
        right.scatter([1, 2, 3], [1, 2, 3], label="points")
        right.legend()
    elif kind == "quiver":
        right.quiver([0, 1], [0, 1], [1, 1], [1, -1])
    elif kind == "boxplot":
        right.boxplot([[1.0, 2.0, 3.0, 4.0]])  # no outliers: its fliers line holds no points
    elif kind == "annotation":
        right.plot([0, 1], [0, 1])
        right.annotate(
            "peak",
            xy=(0.5, 0.5),
            xytext=(10, 10),
            textcoords="offset points",
            arrowprops=dict(arrowstyle="->"),
        )
    return fig, image


@pytest.mark.parametrize("kind", ["scatter", "quiver", "boxplot", "annotation"])
def test_honest_plots_beside_an_image_are_not_placed_in_pixels(kind):
    """A scatter's or a quiver's markers (paths drawn around each offset), a box plot's empty fliers
    line and an annotation beside an image are not placed in screen pixels and hide nothing: counted
    as placed in pixels, they would fail every image of an honest figure."""
    import matplotlib.pyplot as plt

    from autograder import figure_drawing

    fig, image = _beside_an_image(kind)
    try:
        actual = (figure_drawing.pixel_placed(image), figure_drawing.drawn_mismatch(image))
    finally:
        plt.close(fig)
    assert actual == (0, 0.0), (
        f"an honest {kind} beside an image moves nothing and hides nothing: {actual}"
    )


def test_text_that_wraps_is_refused_on_the_figure():
    """Text that wraps (wrap=True) on the figure is refused: white block characters in a fig.text,
    one line a row above the images on the full canvas, wrap anew on the cropped canvas and run down
    over the images."""
    import matplotlib.pyplot as plt

    from autograder import figures

    fig, ax, image = _gradient_image()
    fig.text(0.1, 0.99, "long words " * 40, wrap=True, va="top")
    try:
        actual = figures.figure_problems(fig)
    finally:
        plt.close(fig)
    assert actual == ["has text that wraps (wrap=True) on it, which can cover its Axes"], (
        f"a wrapped text on the figure is named: {actual}"
    )


def test_drawn_mismatch_draws_each_figure_once_inside_a_block(monkeypatch):
    import matplotlib.pyplot as plt

    from autograder import figure_drawing

    draws = []
    real = figure_drawing.draw_and_compare
    monkeypatch.setattr(
        figure_drawing, "draw_and_compare", lambda fig: draws.append(fig) or real(fig)
    )
    fig, (ax, other) = plt.subplots(1, 2, figsize=(6, 3))
    image = ax.imshow(np.arange(28 * 28, dtype=float).reshape(28, 28), cmap="viridis")
    second = other.imshow(np.eye(4))
    try:
        with figure_drawing.one_draw_per_figure():
            actual = (figure_drawing.drawn_mismatch(image), figure_drawing.drawn_mismatch(second))
        figure_drawing.drawn_mismatch(image)
    finally:
        plt.close(fig)
    assert actual == (0.0, 0.0), f"both images show their values: {actual}"
    assert len(draws) == 2, (
        f"one draw for the block's two images, one for the call after it: {len(draws)}"
    )


def test_figure_and_axes_problems_are_read_once_per_figure_inside_a_block(monkeypatch):
    import matplotlib.pyplot as plt

    from autograder import figure_drawing, figures

    measured = []
    real = figures._overhang_inches
    monkeypatch.setattr(figures, "_overhang_inches", lambda fig: measured.append(fig) or real(fig))
    fig, (ax, other) = plt.subplots(1, 2, figsize=(6, 3))
    ax.imshow(np.eye(4))
    other.set_xscale("log")
    try:
        with figure_drawing.one_draw_per_figure():
            inside = [figures.figure_problems(fig), figures.figure_problems(fig)]
            axes = [
                figures.axes_problems(other),
                figures.axes_problems(other),
                figures.axes_problems(ax),
            ]
            inside[0].append("changed by the caller")
        # changed after the block: read anew
        fig.text(0.1, 0.99, "long words " * 40, wrap=True, va="top")
        after = figures.figure_problems(fig)
    finally:
        plt.close(fig)
    assert inside[1] == [], (
        f"the figure has no problem, and a caller's change to a list is its own: {inside}"
    )
    assert (
        axes[0]
        == axes[1]
        == ["is drawn on a non-linear axis scale (set_xscale or set_yscale): keep the linear one"]
        and axes[2] == []
    ), f"each Axes' own problems: {axes}"
    assert after == ["has text that wraps (wrap=True) on it, which can cover its Axes"], after
    assert len(measured) == 2, (
        f"one measure of the figure in the block, one for the call after it: {len(measured)}"
    )


def test_drawn_mismatch_leaves_the_figure_as_it_was():
    import matplotlib.pyplot as plt

    from autograder import figure_drawing

    fig, ax, image = _gradient_image()
    image.set_interpolation("bilinear")
    dpi = fig.dpi
    canvas = fig.canvas
    try:
        figure_drawing.drawn_mismatch(image)
        actual = (image.get_interpolation(), fig.dpi, fig.canvas)
    finally:
        plt.close(fig)
    assert actual == ("bilinear", dpi, canvas), f"interpolation, dpi and canvas restored: {actual}"
