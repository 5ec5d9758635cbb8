"""Hidden and public checks for the assignment ``where_mlps_fail`` (Lesson 4.5.3).

Each ``check_q*`` function grades one question of the master notebook and is
called by that question's hidden test with the student's names as
arguments. The answers and their types are listed in
``assignments/where_mlps_fail/answers.md``; the expected values come from
``reference.where_mlps_fail`` computed in the grading environment.

Tolerances, and why they are what they are:

* ``ACCURACY_TOL = 2e-4``: an accuracy over the 10,000 test images moves in
  steps of 1e-4. A student who batches differently sums the same float32
  products in another order, which can flip the argmax of an image whose two
  largest logits tie to the last bit; two such images are allowed.
* ``LOGIT_TOL = 1e-4``: a logit is a sum of 784 float32 products; summed in
  another order (``@`` against the layer's ``addmm``) it differs by about
  1e-6, and the lesson prints it to four decimals.
* ``ROUNDED_TOL = 1e-4``: values the lesson prints rounded to four decimals
  may be given rounded or not; one unit in the last place either way.
* ``PROBABILITY_TOL = 1e-3``: probabilities the lesson prints to three
  decimals, the same argument.
* Counts, shapes, classes, seeded permutations and the hand-chosen edge
  filters are exact: nothing about them depends on summation order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from autograder.checks import (
    MISSING,
    CheckFailure,
    call_student,
    carries_forward,
    changed_in_place,
    drawing_each_figure_once,
    expect_bool,
    expect_callable,
    expect_close,
    expect_equal,
    expect_int,
    expect_number,
    expect_plain_image,
    expect_sequence,
    expect_shape,
    expect_tensor,
    expect_type,
    keys_shown,
    short_repr,
)
from autograder.checks.properties import given, run_property, seeded_images, st

ACCURACY_TOL = 2e-4
LOGIT_TOL = 1e-4
ROUNDED_TOL = 1e-4
PROBABILITY_TOL = 1e-3
#: Float32 sums of at most 25 products of values in [-1, 1]: rounding error
#: is about 25 * 2**-24 * 25 < 1e-4, far below any real mistake (the missing
#: bias alone is at least 1e-3 in these tests).
WINDOW_TOL = 1e-4


def _reference():
    from reference import where_mlps_fail

    return where_mlps_fail


def _answers() -> dict[str, Any]:
    return _reference().answers()


# ---------------------------------------------------------------- value kinds


def check_class_name(name: str, value: Any, expected: str) -> None:
    """A Fashion-MNIST class name such as "Trouser" (``test_set.classes[i]``)."""
    expect_type(name, value, str, what="a class name (str), e.g. test_set.classes[label]")
    if value != expected:
        raise CheckFailure(
            f"`{name}` is the class name {short_repr(value)}, which is not the right class."
        )


def check_peak_value(name: str, value: Any, expected: tuple) -> None:
    """A peak: ``((row, col), largest, (row, col), smallest)``; values within ``ROUNDED_TOL``."""
    actual = tuple(expect_sequence(name, value, 4))
    for i, part in ((0, "largest entry's"), (2, "smallest entry's")):
        position = tuple(expect_sequence(f"{name}[{i}]", actual[i], 2))
        if tuple(int(expect_int(f"{name}[{i}][{j}]", p)) for j, p in enumerate(position)) != tuple(
            expected[i]
        ):
            raise CheckFailure(f"`{name}`: the {part} (row, column) is wrong.")
    for i, part in ((1, "largest value"), (3, "smallest value")):
        expect_number(f"{name}[{i}]", actual[i])
        if abs(float(actual[i]) - expected[i]) > ROUNDED_TOL:
            raise CheckFailure(f"`{name}`: the {part} is wrong.")


def check_class_probabilities(
    name: str, value: Any, expected: list[tuple[str, float]], tol: float
) -> None:
    """A list of ``(class name, probability)`` pairs, one per shift."""
    actual = expect_sequence(name, value, len(expected))
    for i, (item, (cls, prob)) in enumerate(zip(actual, expected)):
        pair = tuple(expect_sequence(f"{name}[{i}]", item, 2))
        check_class_name(f"{name}[{i}][0]", pair[0], cls)
        p = expect_number(f"{name}[{i}][1]", pair[1])
        if not 0.0 <= p <= 1.0:
            raise CheckFailure(
                f"`{name}[{i}][1]` is {p}, not a probability in [0, 1]: "
                "take the softmax over the classes, dim=1."
            )
        if abs(p - prob) > tol:
            raise CheckFailure(
                f"`{name}[{i}][1]` is a probability, but not the one the network gives its class."
            )


# ---------------------------------------------------------------- q1: Lab 1


def check_q1_1(
    weight_shape,
    bias_shape,
    true_class,
    predicted_class,
    trouser_logit_by_hand,
    trouser_logit,
    trouser_weight_peak,
) -> None:
    """The linear model read by column: shapes, test image 2's classes and Trouser logit, the peak
    weight."""
    a = _answers()
    expect_shape("weight_shape", weight_shape, a["weight_shape"])
    expect_shape("bias_shape", bias_shape, a["bias_shape"])
    check_class_name("true_class", true_class, a["true_class"])
    check_class_name("predicted_class", predicted_class, a["predicted_class"])
    for name, value in (
        ("trouser_logit_by_hand", trouser_logit_by_hand),
        ("trouser_logit", trouser_logit),
    ):
        expect_number(name, value, a[name], abs_tol=LOGIT_TOL)
    pair = tuple(expect_sequence("trouser_weight_peak", trouser_weight_peak, 2))
    position = tuple(expect_sequence("trouser_weight_peak[0]", pair[0], 2))
    if tuple(
        expect_int(f"trouser_weight_peak[0][{i}]", p) for i, p in enumerate(position)
    ) != tuple(a["trouser_weight_peak"][0]):
        raise CheckFailure(
            "`trouser_weight_peak`: the (row, column) of the largest Trouser weight is wrong."
        )
    expect_number(
        "trouser_weight_peak[1]", pair[1], a["trouser_weight_peak"][1], abs_tol=ROUNDED_TOL
    )


def check_q1_2(order, scrambled_accuracy, saved_accuracy_on_mixed) -> None:
    """The reorder test: one order (seed 7) for the weight's columns and the images' pixels."""
    a = _answers()
    expect_equal("order", order, a["order"])
    expect_number(
        "scrambled_accuracy", scrambled_accuracy, a["scrambled_accuracy"], abs_tol=ACCURACY_TOL
    )
    expect_number(
        "saved_accuracy_on_mixed",
        saved_accuracy_on_mixed,
        a["saved_accuracy_on_mixed"],
        abs_tol=ACCURACY_TOL,
    )


def _check_accuracy_table(name: str, value: Any, expected: dict) -> None:
    expect_type(name, value, dict, what="a dict")
    missing = [k for k in expected if k not in value]
    if missing:
        raise CheckFailure(f"`{name}` has no entry for the key(s) {missing}.")
    extra = [k for k in value if k not in expected]
    if extra:
        raise CheckFailure(f"`{name}` has unexpected key(s) {keys_shown(extra)}.")
    for key in expected:
        expect_number(f"{name}[{key!r}]", value[key], expected[key], abs_tol=ACCURACY_TOL)


def check_q1_3(shift_accuracies) -> None:
    """The linear model's accuracy under torch.roll: right (dims=3) and down (dims=2)."""
    _check_accuracy_table("shift_accuracies", shift_accuracies, _answers()["shift_accuracies"])


def check_slide_function(slide: Callable) -> None:
    """``slide(x, pixels)`` against the reference, by property (Hypothesis, derandomized).

    Properties: equal to the reference black-filled shift for batches of
    any shape ``(..., W)`` and every shift from 1 to width - 1; equal to
    ``torch.roll`` exactly when the last ``pixels`` columns are dark and
    different when they are lit; input left unchanged; and a convolution of
    the slid batch equals the slid convolution on the columns both hold
    (translation equivariance).
    """
    expect_callable("slide", slide)
    reference_slide = _reference().slide

    @given(st.data())
    def matches_reference(data):
        n = data.draw(st.integers(1, 3), label="batch")
        h = data.draw(st.integers(1, 6), label="height")
        w = data.draw(st.integers(2, 12), label="width")
        pixels = data.draw(st.integers(1, w - 1), label="pixels")
        # any batch shape (..., W), as the question says (a slide written as x[:, :, :, p:] works
        # on 4-dimensional batches only); the lesson's (N, 1, H, W) drawn most often
        lead = data.draw(
            st.sampled_from([(n, 1, h), (n, 1, h), (n, 1, h), (n, 2, h), (h,), (), (n, 1, 2, h)]),
            label="leading dimensions",
        )
        x = seeded_images(data.draw, (*lead, w))
        before = x.clone()
        shown = f"slide(x, {pixels}) for x of shape {tuple(x.shape)}"
        actual = call_student("slide", slide, x, pixels)
        if changed_in_place(slide, (x, before)):
            raise CheckFailure(
                f"`slide` changed its input x in place ({shown}): write into a new tensor."
            )
        expect_tensor(shown, actual, shape=x.shape, dtype=x.dtype, requires_grad=None)
        expected = reference_slide(x, pixels)
        if not torch.equal(actual, expected):
            raise CheckFailure(
                f"`{shown}` is not x moved {pixels} column(s) right with black "
                "filled in on the left."
            )

    @given(st.data())
    def agrees_with_roll_only_on_dark_edges(data):
        w = data.draw(st.integers(3, 12), label="width")
        pixels = data.draw(st.integers(1, w - 1), label="pixels")
        x = seeded_images(data.draw, (2, 1, 4, w), lit_fraction=1.0)
        dark = x.clone()
        dark[..., -pixels:] = 0
        rolled = torch.roll(dark, shifts=pixels, dims=3)
        if not torch.equal(call_student("slide", slide, dark, pixels), rolled):
            raise CheckFailure(
                f"`slide(x, {pixels})` differs from torch.roll(x, {pixels}, dims=3) on a batch "
                f"whose last {pixels} column(s) are black, where the two must agree."
            )
        if torch.equal(
            call_student("slide", slide, x, pixels), torch.roll(x, shifts=pixels, dims=3)
        ):
            raise CheckFailure(
                f"`slide(x, {pixels})` equals torch.roll on a batch whose last columns are lit: "
                "it wraps the right edge around instead of filling in black."
            )

    @given(st.data())
    def convolution_is_equivariant(data):
        pixels = data.draw(st.integers(1, 4), label="pixels")
        x = seeded_images(data.draw, (1, 1, 8, 10))
        kernel = seeded_images(data.draw, (2, 1, 3, 3)) - 0.5
        maps = F.conv2d(x, kernel)
        moved = F.conv2d(call_student("slide", slide, x, pixels), kernel)
        if not torch.allclose(moved[..., pixels:], maps[..., :-pixels], atol=1e-5):
            raise CheckFailure(
                f"a convolution of slide(x, {pixels}) is not the convolution of x moved "
                f"{pixels} column(s), on the columns both hold."
            )

    for prop in (
        matches_reference,
        agrees_with_roll_only_on_dark_edges,
        convolution_is_equivariant,
    ):
        run_property(prop)


def check_q1_4(slide, slide_accuracy) -> None:
    """The black-filled shift: the function by property, and its accuracy at two pixels."""
    check_slide_function(slide)
    expect_number(
        "slide_accuracy", slide_accuracy, _answers()["slide_accuracy"], abs_tol=ACCURACY_TOL
    )


def check_q1_5(trouser_classes_moved, falls_further) -> None:
    """Test image 2's class under the linear model as it moves, and which model falls further."""
    a = _answers()
    classes = expect_sequence("trouser_classes_moved", trouser_classes_moved, 4)
    for i, (actual, expected) in enumerate(zip(classes, a["trouser_classes_moved"])):
        check_class_name(f"trouser_classes_moved[{i}]", actual, expected)
    expect_type("falls_further", falls_further, str, what='"network" or "linear"')
    if falls_further not in ("network", "linear"):
        raise CheckFailure(
            f'`falls_further` should be "network" or "linear", not {short_repr(falls_further)}.'
        )
    if falls_further != a["falls_further"]:
        raise CheckFailure("`falls_further` names the wrong model.")


# ---------------------------------------------------------------- q2: Lab 2


def check_q2_1(sneaker_moved, class_accuracy, sneaker_landing) -> None:
    """The sneaker moved down: its verdicts, three classes' accuracy, where moved sneakers land."""
    a = _answers()
    check_class_probabilities("sneaker_moved", sneaker_moved, a["sneaker_moved"], PROBABILITY_TOL)
    expect_type("class_accuracy", class_accuracy, dict, what="a dict")
    for cls, (before, after) in a["class_accuracy"].items():
        if cls not in class_accuracy:
            raise CheckFailure(f"`class_accuracy` has no entry for {cls!r}.")
        pair = tuple(expect_sequence(f"class_accuracy[{cls!r}]", class_accuracy[cls], 2))
        expect_number(f"class_accuracy[{cls!r}][0]", pair[0], before, abs_tol=PROBABILITY_TOL)
        expect_number(f"class_accuracy[{cls!r}][1]", pair[1], after, abs_tol=PROBABILITY_TOL)
    expected_landing = a["sneaker_landing"]
    expect_tensor("sneaker_landing", sneaker_landing, shape=expected_landing.shape, finite=False)
    if sneaker_landing.is_floating_point() or sneaker_landing.dtype == torch.bool:
        raise CheckFailure(
            f"`sneaker_landing` has dtype {sneaker_landing.dtype}, but it should hold integer "
            f"counts "
            "(torch.bincount gives int64)."
        )
    if not torch.equal(sneaker_landing.long(), expected_landing):
        raise CheckFailure("`sneaker_landing` has the right shape, but the wrong counts.")


def check_q2_2(conv_parameters, maps_shape) -> None:
    """nn.Conv2d(1, 16, kernel_size=5): its parameters by name, shape and count; its output's
    shape."""
    expected = _answers()["conv_parameters"]
    expect_type("conv_parameters", conv_parameters, dict, what="a dict {name: (shape, count)}")
    if set(conv_parameters) != set(expected):
        raise CheckFailure(
            f"`conv_parameters` should have the keys {sorted(expected)}, "
            f"but it has {keys_shown(conv_parameters)}."
        )
    for key, (shape, count) in expected.items():
        pair = tuple(expect_sequence(f"conv_parameters[{key!r}]", conv_parameters[key], 2))
        expect_shape(f"conv_parameters[{key!r}][0]", pair[0], shape)
        expect_int(f"conv_parameters[{key!r}][1]", pair[1], count)
    expect_shape("maps_shape", maps_shape, _answers()["maps_shape"])


def check_window_sum_function(window_sum: Callable) -> None:
    """``window_sum(image, kernel, bias, row, col)`` against ``F.conv2d``, by property.

    The cross-correlation: the kernel laid on the window as it is (not
    flipped), nine (k * k) products summed, plus the bias.
    """
    expect_callable("window_sum", window_sum)

    @given(st.data())
    def matches_conv2d(data):
        k = data.draw(st.sampled_from([2, 3, 5]), label="kernel size")
        h = data.draw(st.integers(k, k + 5), label="height")
        w = data.draw(st.integers(k, k + 5), label="width")
        row = data.draw(st.integers(0, h - k), label="row")
        col = data.draw(st.integers(0, w - k), label="col")
        image = seeded_images(data.draw, (h, w), lit_fraction=1.0)
        kernel = seeded_images(data.draw, (k, k), lit_fraction=1.0) - 0.5
        bias = data.draw(st.sampled_from([-0.25, 0.125, 0.5]), label="bias")
        shown = (
            f"window_sum(image of shape {(h, w)}, kernel of shape {(k, k)}, bias={bias}, "
            f"row={row}, col={col})"
        )
        actual = expect_number(
            shown, call_student("window_sum", window_sum, image, kernel, bias, row, col)
        )
        expected = F.conv2d(image[None, None], kernel[None, None], torch.tensor([bias]))[
            0, 0, row, col
        ].item()
        if abs(actual - expected) > WINDOW_TOL:
            raise CheckFailure(
                f"`{shown}` is not the window's cross-correlation: the kernel laid on the "
                "window as it is (not flipped), the products summed, plus the bias."
            )

    run_property(matches_conv2d)


def check_q2_3(window_sum, filter3_by_hand, filter3_layer) -> None:
    """Filter 3's output at row 12, column 9 by hand and from the layer."""
    check_window_sum_function(window_sum)
    a = _answers()
    expect_number("filter3_by_hand", filter3_by_hand, a["filter3_by_hand"], abs_tol=ROUNDED_TOL)
    expect_number("filter3_layer", filter3_layer, a["filter3_layer"], abs_tol=ROUNDED_TOL)


@carries_forward("maps")
def check_q2_4(
    down_rows_both_hold, down_whole_height, sneaker_edge_rows_lit, *, maps=MISSING
) -> None:
    """The sixteen maps moved down two rows: on the rows both hold, over the whole height, why.

    Both comparisons are made against the student's own ``maps`` (q2_2's layer on the sneaker) when
    it is a sensible map (:func:`_carried_map`), so maps computed wrongly (without the bias) cost
    the question that reads their values (q2_3's ``filter3_layer``) and not this one too.
    """
    a = _answers()
    maps = _carried_map(maps, a["maps"])
    maps_moved = a["maps_moved"]
    expect_bool(
        "down_rows_both_hold",
        down_rows_both_hold,
        bool(torch.allclose(maps_moved[:, :, 2:], maps[:, :, :-2])),
    )
    expect_bool(
        "down_whole_height",
        down_whole_height,
        bool(torch.allclose(maps_moved, torch.roll(maps, shifts=2, dims=2))),
    )
    pair = tuple(expect_sequence("sneaker_edge_rows_lit", sneaker_edge_rows_lit, 2))
    for i, expected in enumerate(a["sneaker_edge_rows_lit"]):
        expect_bool(f"sneaker_edge_rows_lit[{i}]", pair[i], expected)


def check_q2_5(cost_table) -> None:
    """Side, first-layer weights, convolution parameters and multiplications at 28, 56 and 112."""
    expected = _answers()["cost_table"]
    rows = expect_sequence("cost_table", cost_table, len(expected))
    columns = (
        "side",
        "first-layer weights",
        "convolution parameters",
        "convolution multiplications",
    )
    for i, (row, want) in enumerate(zip(rows, expected)):
        actual = tuple(expect_sequence(f"cost_table[{i}]", row, 4))
        for j, (value, target) in enumerate(zip(actual, want)):
            expect_int(f"cost_table[{i}][{j}]", value)
            if int(value) != target:
                raise CheckFailure(f"`cost_table[{i}]`: the {columns[j]} column is wrong.")


# ---------------------------------------------------------------- q3: edges.py

#: A student's filter is carried forward into the later edges questions only
#: when its map of the test image has a largest absolute value of at least
#: this fraction of the reference filter's map's (3.0 vertical, 1.36
#: horizontal): far above the maps' tolerance (1e-5), so no answer near zero
#: passes, and far below any edge filter a student writes (a transposed,
#: sign-flipped, swapped, Sobel or rescaled one).
MIN_RESPONSE = 0.01
#: ...and at most this multiple of it: a map near float32's largest values
#: (3e38) would overflow the checks' own sums.
MAX_RESPONSE = 1e4


def _sensible_filter(value: Any, reference: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
    """``value`` as a float32 filter when later answers built on it cannot be trivial, else
    ``None``.

    Sensible: a real floating tensor of shape (1, 1, 3, 3) (dense, on the CPU),
    every weight finite, not constant (a constant filter is a blur, not an edge
    filter; all zeros included), whose map of the test image ``x`` is finite
    and responds: largest absolute value between :data:`MIN_RESPONSE` and
    :data:`MAX_RESPONSE` times the ``reference`` filter's. So an all-zero,
    constant, epsilon-sized, NaN or overflowing filter never makes the
    carried-forward maps zero or equal.
    """
    if not (
        isinstance(value, torch.Tensor)
        and tuple(value.shape) == (1, 1, 3, 3)
        and value.is_floating_point()
        and value.layout == torch.strided
        and value.device.type == "cpu"
    ):
        return None
    f = value.detach().float()
    if not bool(torch.isfinite(f).all()):
        return None
    spread, size = float(f.max() - f.min()), float(f.abs().max())
    if spread <= 1e-3 * size:  # constant, all zeros included
        return None
    response = F.conv2d(x, f)
    if not bool(torch.isfinite(response).all()):
        return None
    largest, expected = float(response.abs().max()), float(F.conv2d(x, reference).abs().max())
    if not MIN_RESPONSE * expected <= largest <= MAX_RESPONSE * expected:
        return None
    return f


def _carried_map(value: Any, reference: torch.Tensor) -> torch.Tensor:
    """The student's map ``value`` (``edges``, ``flat_edges``, ``maps``) as float32 when a later
    answer may be computed from it, else ``reference`` (the map the reference, or the student's
    carried filter, gives).

    Sensible, as for the filters (:func:`_sensible_filter`): a real floating tensor (dense, on the
    CPU) of the reference map's shape, every value finite, not constant (all zeros included), whose
    largest absolute value is between :data:`MIN_RESPONSE` and :data:`MAX_RESPONSE` times the
    reference map's. So a map computed wrongly (a flipped filter, a missing bias) is carried forward
    into the answers computed from it, while a degenerate one cannot make them trivial; the answers
    are still computed by the judge from it.
    """
    if not (
        isinstance(value, torch.Tensor)
        and tuple(value.shape) == tuple(reference.shape)
        and value.is_floating_point()
        and value.layout == torch.strided
        and value.device.type == "cpu"
    ):
        return reference
    m = value.detach().float()
    if not bool(torch.isfinite(m).all()):
        return reference
    spread, largest = float(m.max() - m.min()), float(m.abs().max())
    expected = float(reference.abs().max())
    if (
        spread <= 1e-3 * largest
        or not MIN_RESPONSE * expected <= largest <= MAX_RESPONSE * expected
    ):
        return reference
    return m


def _edge_inputs(vertical, horizontal) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The reference ``x``, and the student's ``vertical`` and ``horizontal`` when sensible, else
    the reference's.

    Later edges questions are graded on the student's own filters (errors
    carried forward), so a wrong filter costs q3_1 and nothing else; each
    filter must pass :func:`_sensible_filter`, so that a degenerate one
    (zeros, a constant, NaN, 1e-9 times an edge filter) cannot make every
    later answer trivially zero. The image is always the reference's test
    image 2: ``x`` is fixed by the lesson (q3_1 grades it), and a
    student-chosen image (all black) would make every map zero.
    """
    a = _answers()
    x = a["x"]
    vertical = _sensible_filter(vertical, a["vertical"], x)
    horizontal = _sensible_filter(horizontal, a["horizontal"], x)
    return (
        x,
        a["vertical"] if vertical is None else vertical,
        a["horizontal"] if horizontal is None else horizontal,
    )


def check_q3_1(x, trouser_class, vertical, horizontal) -> None:
    """Test image 2 as a batch of one, and the two hand-written 3 by 3 filters."""
    a = _answers()
    expect_tensor("x", x, shape=(1, 1, 28, 28), dtype=torch.float32)
    expect_close("x", x, a["x"], rtol=0, atol=0)
    check_class_name("trouser_class", trouser_class, a["trouser_class"])
    for name, value in (("vertical", vertical), ("horizontal", horizontal)):
        expect_tensor(name, value, shape=(1, 1, 3, 3), dtype=torch.float32)
        if not torch.equal(value, a[name]):
            raise CheckFailure(
                f"`{name}` has the right shape and dtype, but the wrong nine weights."
            )


def check_peak_function(peak: Callable) -> None:
    """``peak(m)`` against the reference on random maps with ties, by property."""
    expect_callable("peak", peak)
    reference_peak = _reference().peak

    @given(st.data())
    def matches_reference(data):
        h = data.draw(st.integers(1, 6), label="height")
        w = data.draw(st.integers(2, 9), label="width")
        levels = data.draw(st.integers(2, 7), label="levels")
        gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
        # few distinct values, so the largest and smallest entries tie and
        # "the first in reading order" is tested too
        # one map shaped (..., H, W), as the question says (a peak that reads m[0, 0] works on
        # 4-dimensional maps only)
        lead = data.draw(
            st.sampled_from([(1, 1), (1, 1), (), (1,), (1, 1, 1)]), label="leading dimensions"
        )
        # (+ 0.00037: every value has a fourth decimal, so rounding to 3 decimals is told from
        # rounding to 4, which values on multiples of 1/4 cannot tell apart)
        m = (
            torch.randint(0, levels, (*lead, h, w), generator=gen).float() - levels / 2
        ) / 4 + 0.00037
        shown = f"peak(m) for m of shape {tuple(m.shape)}"
        actual = call_student("peak", peak, m)
        try:
            check_peak_value(shown, actual, reference_peak(m))
        except CheckFailure as failure:
            raise CheckFailure(
                f"{failure} (Row and column come from divmod of the flat index by the width; "
                "ties go to the first entry in reading order.)"
            ) from None

    run_property(matches_reference)


def check_q3_2(peak, edges, edges_peak, x, vertical, horizontal) -> None:
    """The vertical filter's map without padding, and ``peak``."""
    check_peak_function(peak)
    x, vertical, _ = _edge_inputs(vertical, horizontal)
    expected = F.conv2d(x, vertical)
    expect_tensor("edges", edges, shape=expected.shape, dtype=torch.float32)
    expect_close("edges", edges, expected, rtol=1e-5, atol=1e-5)
    check_peak_value("edges_peak", edges_peak, _reference().peak(expected))


def check_compare_shared_function(compare_shared: Callable) -> None:
    """``compare_shared(maps_moved, maps, pixels)``: True on the columns both hold, by property."""
    expect_callable("compare_shared", compare_shared)
    reference_slide = _reference().slide

    reference_compare = _reference().compare_shared

    @given(st.data())
    def compares_the_shared_columns(data):
        pixels = data.draw(st.integers(1, 5), label="pixels")
        x = seeded_images(data.draw, (1, 1, 10, 12), lit_fraction=0.8)
        kernel = seeded_images(data.draw, (3, 1, 3, 3), lit_fraction=1.0) - 0.5
        maps = F.conv2d(x, kernel)
        moved = F.conv2d(reference_slide(x, pixels), kernel)
        # every entry of the shared columns counts, with allclose's tolerance, so that comparing
        # only the last column, sums, or with a looser atol or rtol fails. The maps' entries are at
        # most 4.5 in size, so allclose's default tolerance (1e-8 + 1e-5 of the entry) is below
        # 5e-5: a change of 1e-4 is a difference, and torch.equal agrees with allclose on every
        # case. "tight" changes an entry by 2 times allclose's tolerance at it: a difference for
        # allclose, by 1e-5 of the entry, and none for atol 6e-5 or rtol 3e-5, by as much (the
        # entries are under 6), margins far above float32's rounding at every entry; "within"
        # changes it by 0.3 times that tolerance, where allclose still says
        # True and torch.equal (or allclose with no tolerance), which the question's
        # torch.allclose is not, does not.
        size = data.draw(
            st.sampled_from(["within", "tight", 1e-4, 1e-3, 0.01, 0.1, 1.0]), label="change"
        )
        where = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="where"))

        def changed(first: int, last: int, *signs: float) -> torch.Tensor:
            out = moved.clone()
            for sign in signs:  # one random entry of columns first..last-1 per sign
                c, r, k = (
                    int(torch.randint(n, (1,), generator=where))
                    for n in (out.shape[1], out.shape[2], last - first)
                )
                column = first + k
                against = (
                    float(maps[0, c, r, column - pixels])
                    if column >= pixels
                    else float(out[0, c, r, column])
                )
                factor = {"tight": 2.0, "within": 0.3}.get(size) if isinstance(size, str) else None
                step = size if factor is None else factor * (1e-8 + 1e-5 * abs(against))
                out[0, c, r, column] += sign * step
            return out

        width = moved.shape[-1]
        shown_size = (
            {
                "tight": "2 times allclose's default tolerance",
                "within": "0.3 times allclose's default tolerance",
            }.get(size, size)
            if isinstance(size, str)
            else size
        )
        cases = [
            (moved, f"a convolution of an image moved {pixels} column(s) with black filled in"),
            (
                changed(pixels, width, 1.0),
                f"that moved map with one entry of the shared columns changed by {shown_size}",
            ),
            (
                changed(pixels, width, 1.0, -1.0),
                f"that moved map with two entries of the shared columns "
                f"changed by +{shown_size} and -{shown_size}",
            ),
            (
                changed(0, pixels, 1.0),
                f"that moved map with one entry of the {pixels} column(s) that came in "
                "on the left changed",
            ),
        ]
        shown = f"compare_shared(maps_moved, maps, {pixels})"
        for maps_moved, what in cases:
            answer = expect_bool(
                shown, call_student("compare_shared", compare_shared, maps_moved, maps, pixels)
            )
            if answer is not reference_compare(maps_moved, maps, pixels):
                raise CheckFailure(
                    f"`{shown}` is {answer} for {what}: compare, with torch.allclose, every entry "
                    f"of "
                    f"the columns both maps hold (columns {pixels} and after of the moved map "
                    f"against "
                    f"all but the last {pixels} of the map in place), and only those."
                )

    run_property(compares_the_shared_columns)


@carries_forward("edges")
def check_q3_3(
    edges_moved, compare_shared, edges_move_with, x, vertical, horizontal, *, edges=MISSING
) -> None:
    """The trousers moved 3 pixels right: the moved map, and whether the map moved with them (the
    moved map against the student's own ``edges`` of q3_2 when sensible, :func:`_carried_map`)."""
    x, vertical, _ = _edge_inputs(vertical, horizontal)
    expected = F.conv2d(torch.roll(x, shifts=3, dims=3), vertical)
    expect_tensor("edges_moved", edges_moved, shape=expected.shape, dtype=torch.float32)
    expect_close("edges_moved", edges_moved, expected, rtol=1e-5, atol=1e-5)
    check_compare_shared_function(compare_shared)
    # the student's edges_moved, which passed above, against the student's edges: the comparison the
    # question asks for, made on the values the student's own comparison reads
    maps = _carried_map(edges, F.conv2d(x, vertical))
    moved = edges_moved.detach().float()
    expect_bool(
        "edges_move_with", edges_move_with, bool(torch.allclose(moved[..., 3:], maps[..., :-3]))
    )


@carries_forward("vertical", "edges")
def check_q3_4(
    padded_shape, padded_inside_equal, layer_matches, *, vertical=MISSING, edges=MISSING
) -> None:
    """padding=1: the shape, its inside against the unpadded map; nn.Conv2d against F.conv2d. The
    student's own ``vertical`` (q3_1) and ``edges`` (q3_2) are carried forward when sensible."""
    a = _answers()
    x, vertical, _ = _edge_inputs(vertical, MISSING)
    maps = _carried_map(edges, F.conv2d(x, vertical))
    expect_shape("padded_shape", padded_shape, a["padded_shape"])
    padded = F.conv2d(x, vertical, padding=1)
    expect_bool(
        "padded_inside_equal",
        padded_inside_equal,
        bool(torch.allclose(padded[..., 1:-1, 1:-1], maps)),
    )
    # nn.Conv2d(1, 1, 3, bias=False) holding vertical computes F.conv2d(x, vertical)
    expect_bool("layer_matches", layer_matches, bool(torch.allclose(F.conv2d(x, vertical), maps)))


@carries_forward("edges")
def check_q3_5(flat_edges, absolute_sums, x, vertical, horizontal, *, edges=MISSING) -> None:
    """The horizontal filter's map and the absolute response of each map (``edges``'s, the student's
    own of q3_2 when sensible)."""
    x, vertical, horizontal = _edge_inputs(vertical, horizontal)
    expected = F.conv2d(x, horizontal)
    expect_tensor("flat_edges", flat_edges, shape=expected.shape, dtype=torch.float32)
    expect_close("flat_edges", flat_edges, expected, rtol=1e-5, atol=1e-5)
    sums = tuple(expect_sequence("absolute_sums", absolute_sums, 2))
    for i, m in enumerate((_carried_map(edges, F.conv2d(x, vertical)), expected)):
        # two decimals printed; a float32 sum over 676 entries differs by
        # far less than 0.01 between summation orders
        expect_number(
            f"absolute_sums[{i}]", sums[i], round(m.abs().sum().item(), 2), abs_tol=0.0051
        )


@carries_forward("edges", "flat_edges")
@drawing_each_figure_once
def check_q3_6(fig, x, vertical, horizontal, *, edges=MISSING, flat_edges=MISSING) -> None:
    """edges.png: three Axes (trousers, vertical map, horizontal map), maps on one scale centred on
    zero. The maps are the student's own ``edges`` (q3_2) and ``flat_edges`` (q3_5) when sensible
    (:func:`_carried_map`): the figure is graded on what it is drawn from."""
    from matplotlib.figure import Figure

    expect_type("fig", fig, Figure, what="a matplotlib Figure (fig, axes = plt.subplots(1, 3))")
    x, vertical, horizontal = _edge_inputs(vertical, horizontal)
    # a hidden Axes that holds no image draws nothing (ImageGrid makes one per grid cell for colour
    # bars it may never show); a hidden one with an image is read, and refused as hidden
    axes = [ax for ax in fig.axes if ax.get_visible() or ax.images]
    if len(axes) != 3:
        raise CheckFailure(
            f"`fig` holds {len(axes)} Axes, but it should hold 3: the trousers and the two maps "
            "(a colorbar is an Axes of its own: leave it out of this figure)."
        )
    images = []
    for i, ax in enumerate(axes):
        if not ax.images:
            raise CheckFailure(f"`fig.axes[{i}]` shows no image: draw it with imshow.")
        expect_plain_image(f"`fig.axes[{i}]`", ax, ax.images[0])
        images.append(ax.images[0])
    wanted = [
        x[0, 0],
        _carried_map(edges, F.conv2d(x, vertical))[0, 0],
        _carried_map(flat_edges, F.conv2d(x, horizontal))[0, 0],
    ]
    names = ["the trousers", "the vertical map", "the horizontal map"]
    for i, (image, expected, what) in enumerate(zip(images, wanted, names)):
        array = torch.as_tensor(
            image.get_array().data if hasattr(image.get_array(), "mask") else image.get_array(),
            dtype=torch.float32,
        )
        if tuple(array.shape) != tuple(expected.shape):
            raise CheckFailure(
                f"`fig.axes[{i}]` shows an image of shape {tuple(array.shape)}, but {what} "
                f"has shape {tuple(expected.shape)}."
            )
        if not torch.allclose(array, expected, atol=1e-5):
            raise CheckFailure(f"`fig.axes[{i}]` should show {what}, but shows other values.")
    # the trousers on colour limits that show them: over the limits' range the image spans at least
    # half the colour map (imshow's default limits span all of it; vmin=5, vmax=6 draws them
    # black) and at most 5 % of the pixels lie outside them (0.97 to 1 draws them black but for a
    # few)
    low, high = images[0].get_clim()
    shown = ((wanted[0] - low) / (high - low)).clamp(0, 1) if high > low else torch.zeros(1)
    # drawn saturated
    outside = float(((wanted[0] < low - 1e-6) | (wanted[0] > high + 1e-6)).float().mean())
    if float(shown.max() - shown.min()) < 0.5 or outside > 0.05:
        raise CheckFailure(
            "`fig.axes[0]` draws the trousers on colour limits far from their values, which "
            "flattens them: leave vmin and vmax out (or use 0 and 1)."
        )
    (low1, high1), (low2, high2) = images[1].get_clim(), images[2].get_clim()
    if abs(low1 - low2) > 1e-6 or abs(high1 - high2) > 1e-6:
        raise CheckFailure(
            "`fig`: the two maps are drawn on different colour scales; pass the same vmin "
            "and vmax to both imshow calls."
        )
    if abs(low1 + high1) > 1e-6 * max(1.0, abs(high1)):
        raise CheckFailure(
            "`fig`: the maps' colour scale is not centred on zero; use vmin=-limit, vmax=limit."
        )
    if high1 + 1e-6 < float(wanted[1].abs().max()):
        raise CheckFailure(
            "`fig`: the colour scale is narrower than the vertical map's largest absolute value."
        )
    # ...and no wider than the larger map's: a limit of 1e6 draws both maps flat grey
    if high1 > (1 + 1e-5) * max(float(wanted[1].abs().max()), float(wanted[2].abs().max())) + 1e-6:
        raise CheckFailure(
            "`fig`: the colour scale is wider than the maps' values, which flattens them; take "
            "the limit from the vertical map's largest absolute value."
        )


def check_q3_7(trouser_verdicts) -> None:
    """The network's class and probability for the trousers in place and moved 3 pixels right."""
    check_class_probabilities(
        "trouser_verdicts", trouser_verdicts, _answers()["trouser_verdicts"], ROUNDED_TOL
    )


# ---------------------------------------------------------------- q5: Answer 4


def check_q5(counts, total_count, model_counts, row_shape, changed, at_272, at_274) -> None:
    """A filter in front of a flattened layer: parameter counts, the flattened row, what moved."""
    a = _answers()
    actual = expect_sequence("counts", counts, len(a["counts"]))
    for i, (value, expected) in enumerate(zip(actual, a["counts"])):
        expect_int(f"counts[{i}]", value, expected)
    expect_int("total_count", total_count, a["total_count"])
    pair = tuple(expect_sequence("model_counts", model_counts, 2))
    for i, expected in enumerate(a["model_counts"]):
        expect_int(f"model_counts[{i}]", pair[i], expected)
    expect_shape("row_shape", row_shape, a["row_shape"])
    expect_int("changed", changed, a["changed"])
    expect_number("at_272", at_272, a["at_272"], abs_tol=ROUNDED_TOL)
    expect_number("at_274", at_274, a["at_274"], abs_tol=ROUNDED_TOL)
