"""Hidden and public checks for the assignment ``inductive_bias``.

Specification: the article "Inductive Bias", section "Weight sharing and
locality, measured in closed form" (course text 003_ec9da5774b5ae29e.txt).
Each ``check_q*`` grades one question of the master notebook; the graded
names are listed in ``assignments/inductive_bias/answers.md`` and the expected
values come from ``reference.inductive_bias``, computed in the grading
environment.

How the student's functions are called.  The hardened judge sends a
function's arguments to the student process as tensors (NumPy arrays do not
cross the channel in that direction), so every call goes through the
notebook's ``call_with_arrays`` (support file ``ib_support.py``), which turns
them back into NumPy arrays, and ``{"rng_seed": s}`` into
``np.random.default_rng(s)``, in the student's process.

Errors carried forward.  A function's own question accepts it when it is
right on the student's own earlier functions where those failed their own
questions (one that passed is the reference's: called again, it could answer
as it likes), checked on the property tests' random inputs and on the
lesson's own crops: the targets on the student's ``neigh``, the vignetted
target on the student's ``equivariant_target``, the conv and local models on
the student's ``neigh`` features.  The later answers computed on the lesson's own
inputs (the gaps of q3 and q4 on ``X_test[:50]``, ``SIGMA``, ``noise_free``
and the learning curves) are by default (``carry_forward=False``) graded
against the reference's: to carry an error forward there the judge would
have to call the student's function again on those inputs, which it can
recognise and answer as it likes (a ``rel_err`` written to fail q6 that
returns made-up learning-curve cells in the order the judge asks for them).
With ``carry_forward=True`` (an instructor's choice, open to that attack)
they are graded, when they differ from the reference, on the student's own
gap, and on cells recomputed in the judge with the student's own ``fit``,
``predict``, targets and ``rel_err``, so one mistake costs one question.
Only sensible earlier results are carried forward
(a degenerate one would make every later answer trivial): a ``neigh`` whose
values are the crop's own pixels (or zero padding) in 25 independent columns,
targets that are not (nearly) zero, and for the learning curves a ``rel_err``
that is 0 for a perfect prediction and grows with the error, with
predictions that are not all zero and follow the targets they were fitted
to; a carried-forward ``err`` is then checked on every cell of every seed.

Tolerances, and why:

* ``EXACT``: crops and neighbourhoods are copies of pixels; nothing is
  summed, so they must equal the reference exactly.
* ``SUM_TOL = 1e-12`` (relative to the array's largest entry): the targets
  are sums of 25 products of values below 1; another summation order (FFT,
  einsum, a loop) moves them by a few 1e-16.
* ``GAP_EXACT_TOL = 1e-12``: the equivariant target commutes with a
  circular shift exactly when computed by shifting (the article prints
  0.0e+00); an FFT implementation leaves rounding of about 1e-16.
* ``GAP_TOL = 0.005``: the vignetted gap is printed as 3.4e-01; half a unit
  of the printed digit.
* ``FIT_TOL = 1e-6`` (relative error between predictions, squared norms):
  the test systems below have condition numbers under about 1e3, so two
  correct solvers (lstsq, pinv, the Fourier closed form against an explicit
  circulant solve) agree to about cond * eps ~ 1e-13; any real mistake
  (another cutoff, no minimum norm, a flipped layout) is above 1e-2.
* Learning-curve cells: the reference repeats the article's arithmetic, and
  a correct solution computes the same cells to ~1e-11 relative even at the
  interpolation peaks (measured; see tests/reference).  Well-conditioned
  cells are therefore checked to ``CELL_RTOL = 1e-6`` relative.  The cells at
  the interpolation thresholds (``PEAK_CELLS``: local 5x5 at 16 crops, 25
  unknowns per pixel; fully connected at 256, 256 unknowns; shared 16x16 at
  one crop, 256 equations for 256 unknowns) are governed by the smallest
  singular values of the training design, where a different but legitimate
  cutoff (rcond) changes the result; the article's own min-max spans a
  factor of ten there, so they are checked to within a factor of ten.
* Noise-free errors are rounding-level (1e-27 and the like, machine
  dependent) where the model's class contains the target: checked below the
  article's threshold 1e-20.  The shared models' floors on the vignetted
  target (0.436, 0.435) are checked to ``CELL_RTOL``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autograder.checks import (
    CheckFailure,
    _identity,
    describe_type,
    expect_array,
    expect_callable,
    expect_int,
    expect_number,
    expect_type,
    once,
    per_grading,
)
from autograder.checks.properties import given, run_property, st

SUM_TOL = 1e-12
GAP_EXACT_TOL = 1e-12
GAP_TOL = 0.005
FIT_TOL = 1e-6
CELL_RTOL = 1e-6
PEAK_FACTOR = 10.0
ROUNDING_LEVEL = 1e-20
#: A carried-forward output (a target, predictions) must hold at least this
#: share of the reference output's energy: all zeros (which makes every later
#: answer 0, or every error exactly 1) is refused; any honest variant (zero
#: padding, a flipped kernel, another layout) is far above it.
MIN_ENERGY = 1e-2
#: A carried-forward ``rel_err`` is probed on Y + t D, D the error of a real
#: prediction (the full model fitted to 16 crops, scored on the test crops, as
#: the learning curves score it): it must grow strictly with t and stay below
#: 1e-2 at the first (the reference gives c t**2, c the prediction's own
#: relative error, 0.55 here; normalised by the prediction instead, it grows
#: while <Y, Y + t D> > 0, true for t <= 0.5 unless the predictions point
#: against the targets). A residual of the experiments' kind, not noise of a
#: round size: a ``rel_err`` that answers made-up values except on the probes
#: cannot tell them from the experiments' own predictions by their values.
REL_ERR_STEPS = (1e-3, 1e-2, 1e-1, 0.5)
MODELS = ("conv", "shared16", "local5", "full")
PEAK_CELLS = {("shared16", 1), ("local5", 16), ("full", 256)}


def _ref():
    from reference import inductive_bias

    return inductive_bias


# ---------------------------------------------------------------- helpers

def _short(value: Any) -> str:
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return f"<array {tuple(value.shape)}>"
    if isinstance(value, dict) and "rng_seed" in value:
        return f"np.random.default_rng({value['rng_seed']})"
    return repr(value)


def _wire(value: Any) -> Any:
    # a copy of a read-only array (the cached test crops): torch wants to write
    if isinstance(value, np.ndarray):
        value = np.ascontiguousarray(value)
        return torch.from_numpy(value if value.flags.writeable else value.copy())
    return value


def call(name: str, adapter: Any, func: Any, *args: Any) -> Any:
    """Call the student's ``func`` (named ``name``) through ``call_with_arrays``; any error is a
    CheckFailure."""
    expect_callable(name, func)
    if adapter is None or adapter is Ellipsis or not callable(adapter):
        raise CheckFailure(
            "`call_with_arrays` is not defined: keep the first code cell's line "
            "`from ib_support import call_with_arrays` (the grader calls your functions through "
            "it)."
        )
    shown = f"{name}({', '.join(_short(a) for a in args)})"
    try:
        result = adapter(func, *[_wire(a) for a in args])
    except CheckFailure:
        raise
    except Exception as err:  # the student's code may raise anything
        raise CheckFailure(f"`{shown}` raised {str(err)[:500]}") from None
    if result is None or result is Ellipsis:
        raise CheckFailure(f"`{shown}` returned {result!r}: does `{name}` end with a `return`?")
    return result


def call_keeping(name: str, label: str, adapter: Any, func: Any, *args: Any) -> tuple[Any, Any]:
    """:func:`call`, and the student process keeps the result: ``(result, kept)``, ``kept`` being
    what later calls take in its place (:meth:`autograder.session.RemoteCallable.keeping`, named
    ``label``), or the result itself when ``adapter`` runs here (the checks' own tests)."""
    keeping = getattr(adapter, "keeping", None)
    if keeping is None:
        result = call(name, adapter, func, *args)
        return result, result
    kept = None

    def adapter_keeping(func, *args):
        nonlocal kept
        result, kept = keeping(label, func, *args)
        return result

    return call(name, adapter_keeping, func, *args), kept


def _close(actual: np.ndarray, expected: np.ndarray, tol: float) -> bool:
    scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
    return bool(np.all(np.abs(actual - expected) <= tol * scale))


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """Squared-norm relative difference of ``a`` from ``b``."""
    return float(((a - b) ** 2).sum() / max((b**2).sum(), 1e-300))


def _reference_targets() -> list[tuple[str, Callable]]:
    """``(name, reference target function)`` in the order of ``TARGETS`` (the first axis of the
    learning curves)."""
    ib = _ref()
    functions = {"equivariant": ib.equivariant_target, "vignetted": ib.vignetted_target}
    return [(t, functions[t]) for t in ib.TARGETS]


def _lesson_inputs() -> list[tuple[str, np.ndarray]]:
    """The crops the article's experiments call the student's functions on: ``X_test`` and seed 0's
    pool.

    Every function is also checked on these exact arrays, not only on the property tests' random
    ones: a function could tell random arrays (standard normal, not multiples of 1/255, at most a
    few crops) from the lesson's and be right on the first only.
    """
    ib = _ref()
    return [
        ("X_test", ib.test_crops()),
        ("crops(1024, np.random.default_rng(0))", ib.crops(ib.POOL_SIZE, np.random.default_rng(0))),
    ]


def _numbers(shown: str, value: Any) -> np.ndarray:
    """``np.asarray(value)`` of what a student's function returned, refusing text first: NumPy pads
    every string of a list to the longest one, so a list of one string of a million characters and
    399 empty ones (1 MB sent) would become an array of 1.6 GB.

    Raises:
        CheckFailure: naming ``shown``, when ``value`` holds strings or bytes.
    """
    stack = [value]
    while stack:  # at most the items the judge decoded (autograder.channel.MAX_NODES)
        item = stack.pop()
        if isinstance(item, (str, bytes)) or (
            isinstance(item, np.ndarray) and item.dtype.kind in "USO"
        ):
            raise CheckFailure(
                f"`{shown}` returned text, not numbers: return a NumPy array of floats."
            )
        if isinstance(item, (list, tuple)):
            stack.extend(item)
    return np.asarray(value)


# ---------------------------------------------------------------- q1: crops


def check_q1(crops: Callable, X_test: Any, call_with_arrays: Any) -> None:
    """``crops(n, rng)``: shape, range, the article's draw order (so determinism), and
    ``X_test``."""
    ib = _ref()
    expect_callable("crops", crops)

    # n from 1: the lesson never asks for no crops, and np.stack of an empty list raises
    @given(st.integers(1, 6), st.integers(0, 2**31 - 1))
    def matches_reference(n, seed):
        got = call("crops", call_with_arrays, crops, n, {"rng_seed": seed})
        shown = f"crops({n}, np.random.default_rng({seed}))"
        expect_array(shown, got, (n, 16, 16))
        _expect_float64(shown, got)
        if got.size and (got.min() < 0 or got.max() > 1):
            raise CheckFailure(f"`{shown}` has values outside [0, 1]: scale the images to [0, 1].")
        again = call("crops", call_with_arrays, crops, n, {"rng_seed": seed})
        if not np.array_equal(_numbers(shown, again), got):
            raise CheckFailure(
                f"`{shown}` gives different crops on two calls with fresh generators of the same "
                "seed: draw only from `rng`."
            )
        if not np.array_equal(got, ib.crops(n, np.random.default_rng(seed))):
            raise CheckFailure(
                f"`{shown}` does not draw the article's crops: for each crop draw the image index, "
                "then the top row, then the left column, from `rng`."
            )

    run_property(matches_reference)
    x = expect_array("X_test", X_test, (ib.N_TEST, 16, 16))
    _expect_float64("X_test", x)
    if not np.array_equal(x, ib.test_crops()):
        raise CheckFailure("`X_test` is not crops(2000, np.random.default_rng(1000)).")


def _expect_float64(name: str, array: np.ndarray) -> None:
    """Crops are float64 (NumPy's default float): in float32 every later answer computed from them
    (``SIGMA``, the errors) moves by more than its tolerance (2e-8 to 1e-4 of the value)."""
    if array.dtype != np.float64:
        raise CheckFailure(
            f"`{name}` has dtype {array.dtype}, but it should be float64 (NumPy's default float): "
            "the later answers are computed from the crops in float64."
        )


# ---------------------------------------------------------------- q2: neigh


def check_q2(neigh: Callable, call_with_arrays: Any) -> None:
    """``neigh`` against the reference on random arrays (property test): exact, wrap-around,
    layout."""
    _raise(_neigh_failure(neigh, call_with_arrays))


def _raise(failure: CheckFailure | None) -> None:
    if failure is not None:
        raise CheckFailure(str(failure))


#: ``neigh(X_test)`` as the student's ``neigh`` computed it when q2 checked it, kept by the student
#: process (:func:`call_keeping`), by the identities of ``neigh`` and ``call_with_arrays``: q5 gives
#: it to ``predict`` as the notebook's learning curves give ``nb_test``.
_NB_TEST: dict[tuple, Any] = per_grading({})


def _neigh_failure(neigh: Any, call_with_arrays: Any) -> CheckFailure | None:
    """q2's verdict on ``neigh``, decided once per grading (:func:`autograder.checks.once`)."""
    return once(
        "neigh", (neigh, call_with_arrays), lambda: _neigh_property(neigh, call_with_arrays)
    )


def _neigh_property(neigh: Any, call_with_arrays: Any) -> None:
    ib = _ref()
    expect_callable("neigh", neigh)

    @given(st.integers(1, 3), st.integers(0, 2**31 - 1))
    def matches_reference(n, seed):
        x = np.random.default_rng(seed).standard_normal((n, 16, 16))
        got = call("neigh", call_with_arrays, neigh, x)
        shown = f"neigh(x) for x of shape {x.shape}"
        expect_array(shown, got, (n, 256, 25))
        expected = ib.neigh(x)
        if not np.array_equal(got, expected):
            inner = np.array_equal(
                got.reshape(n, 16, 16, 25)[:, 2:-2, 2:-2],
                expected.reshape(n, 16, 16, 25)[:, 2:-2, 2:-2],
            )
            hint = (
                " It is right away from the borders: the borders must wrap around (np.roll), not "
                "be padded."
                if inner
                else " Check the order: out[i, 16*r + c, 5*(a+2) + (b+2)] = x[i, (r+a) % 16, (c+b) "
                     "% 16]."
            )
            raise CheckFailure(
                f"`{shown}` has the right shape, but {int((got != expected).sum())} of its "
                f"{got.size} values are wrong.{hint}"
            )

    run_property(matches_reference)
    for shown, x in _lesson_inputs():
        got, kept = call_keeping("neigh", f"neigh({shown})", call_with_arrays, neigh, x)
        got = expect_array(f"neigh({shown})", got, (len(x), 256, 25))
        if not np.array_equal(got, ib.neigh(x)):
            raise CheckFailure(
                f"`neigh({shown})` is wrong on the lesson's own crops (the property test's random "
                "arrays are not the only inputs it is checked on)."
            )
        if shown == "X_test":
            _NB_TEST[_identity(neigh), _identity(call_with_arrays)] = kept


# ---------------------------------------------------------------- q3: equivariant target


def _target_property(name: str, func: Callable, adapter: Any, expected_options: Callable) -> None:
    expect_callable(name, func)

    @given(st.integers(1, 3), st.integers(0, 2**31 - 1))
    def matches(n, seed):
        x = np.random.default_rng(seed).random((n, 16, 16))
        got = call(name, adapter, func, x)
        shown = f"{name}(x) for x of shape {x.shape}"
        expect_array(shown, got, x.shape)
        if not any(e is not None and _close(got, e, SUM_TOL) for e in expected_options(x)):
            raise CheckFailure(f"`{shown}` has the right shape but the wrong values.")

    run_property(matches)
    for shown, x in _lesson_inputs():
        got = expect_array(f"{name}({shown})", call(name, adapter, func, x), x.shape)
        if not any(e is not None and _close(got, e, SUM_TOL) for e in expected_options(x)):
            raise CheckFailure(
                f"`{name}({shown})` is wrong on the lesson's own crops (the property test's random "
                "arrays are not the only inputs it is checked on)."
            )


def _substantial(own: Any, expected: np.ndarray) -> np.ndarray | None:
    """``own`` when it is a finite array shaped like ``expected`` holding :data:`MIN_ENERGY` of its
    energy, else ``None``."""
    if not (
        isinstance(own, np.ndarray)
        and own.shape == expected.shape
        and own.dtype.kind in "biuf"
        and np.isfinite(own).all()
    ):
        return None
    return own if (own.astype(float) ** 2).sum() >= MIN_ENERGY * (expected**2).sum() else None


def _student_neigh_or_none(neigh: Any, adapter: Any, x: np.ndarray):
    """The student's own ``neigh(x)`` when sensible (errors carried forward), else ``None``.

    Sensible: it runs, has the right shape, and holds neighbourhoods: every
    value is one of the crop's pixels or 0 (zero padding), in 25 linearly
    independent columns. Zeros, or the pixel itself 25 times (whose product
    with the zero-sum kernel is 0), would make the target's check trivial.
    """
    try:
        nb = call("neigh", adapter, neigh, x)
    except CheckFailure:
        return None
    if not (
        isinstance(nb, np.ndarray)
        and nb.shape == (len(x), 256, 25)
        and nb.dtype.kind in "biuf"
        and np.isfinite(nb).all()
    ):
        return None
    # float32: a copy the student cast is a copy too
    pixels = np.append(x.ravel(), 0.0).astype(np.float32)
    if (
        not np.isin(nb.astype(np.float32), pixels).all()
        or np.linalg.matrix_rank(nb.reshape(-1, 25)) < 25
    ):
        return None
    return nb


def check_q3(
    K: Any,
    equivariant_target: Callable,
    gap_equivariant: Any,
    neigh: Any,
    call_with_arrays: Any,
    *,
    carry_forward: bool = False,
) -> None:
    """The kernel, the circular cross-correlation (on the student's own ``neigh`` too), and the gap
    0.

    ``carry_forward``: the gap of a target built on a wrong ``neigh`` may be its own (module
    docstring)."""
    ib = _ref()
    k = expect_array("K", K, (5, 5))
    if not _close(k, ib.edge_kernel(), SUM_TOL):
        flipped = _close(k, ib.edge_kernel()[::-1, ::-1], SUM_TOL)
        raise CheckFailure(
            "`K` has the right shape but the wrong values."
            + (
                " It is the kernel flipped: the target is a cross-correlation, K[u, v] = -v "
                "exp(...)"
                " with u the row offset and v the column offset."
                if flipped
                else ""
            )
        )
    _raise(_equivariant_failure(equivariant_target, neigh, call_with_arrays))
    gap = expect_number("gap_equivariant", gap_equivariant)
    # the student's own gap only for a target that is not the reference's (built on a wrong `neigh`)
    reference = _equivariant_is_reference(equivariant_target, neigh, call_with_arrays)
    if abs(gap) > GAP_EXACT_TOL and (
        reference
        or not carry_forward
        or not _own_gap_agrees(gap, equivariant_target, call_with_arrays, GAP_EXACT_TOL)
    ):
        raise CheckFailure(
            "`gap_equivariant` is not 0: compare T(shift(x)) with shift(T(x)) on X_test[:50], "
            "shift = np.roll by (3, 5) on the last two axes."
            + _not_carried([] if reference else ["neigh"])
        )


def _equivariant_failure(target: Any, neigh: Any, adapter: Any) -> CheckFailure | None:
    """q3's verdict on ``equivariant_target`` (the reference's values, or, for a ``neigh`` that
    failed q2, the student's own ``neigh``'s with the reference kernel), decided once per grading.

    A ``neigh`` that passed q2 is the reference's here: called again, it could answer the target's
    inputs with whatever makes a wrong target match.
    """
    ib = _ref()
    kflat = ib.edge_kernel().ravel()
    own_neigh = _neigh_failure(neigh, adapter) is not None

    def options(x):
        nb = _student_neigh_or_none(neigh, adapter, x) if own_neigh else None
        expected = ib.equivariant_target(x)
        own = None if nb is None else _substantial((nb @ kflat).reshape(x.shape), expected)
        return [expected, own]

    return once(
        "equivariant_target",
        (target, neigh, adapter),
        lambda: _target_property("equivariant_target", target, adapter, options),
    )


def _equivariant_is_reference(target: Any, neigh: Any, adapter: Any) -> bool:
    """Whether ``equivariant_target`` is graded as the reference's: it passed q3 on a ``neigh`` that
    passed q2."""
    return (
        _neigh_failure(neigh, adapter) is None
        and _equivariant_failure(target, neigh, adapter) is None
    )


def _vignetted_failure(
    target: Any, equivariant_target: Any, adapter: Any, neigh: Any = None
) -> CheckFailure | None:
    """q4's verdict on ``vignetted_target`` (the reference's values, or, for an
    ``equivariant_target`` not graded as the reference's, the student's own
    ``equivariant_target(gain * x)``), decided once per grading."""
    ib = _ref()
    ref_gain = ib.vignette_gain()
    own_target = not _equivariant_is_reference(equivariant_target, neigh, adapter)

    def options(x):
        expected = ib.vignetted_target(x)
        try:
            own = (
                _substantial(
                    call("equivariant_target", adapter, equivariant_target, ref_gain * x), expected
                )
                if own_target
                else None
            )
        except CheckFailure:
            own = None
        return [expected, own]

    return once(
        "vignetted_target",
        (target, equivariant_target, adapter, neigh),
        lambda: _target_property("vignetted_target", target, adapter, options),
    )


def _vignetted_is_reference(target: Any, equivariant_target: Any, neigh: Any, adapter: Any) -> bool:
    """Whether ``vignetted_target`` is graded as the reference's: it passed q4 on an equivariant
    target that is."""
    return (
        _equivariant_is_reference(equivariant_target, neigh, adapter)
        and _vignetted_failure(target, equivariant_target, adapter, neigh) is None
    )


# ---------------------------------------------------------------- q4: vignetted target


def check_q4(
    gain: Any,
    vignetted_target: Callable,
    gap_vignetted: Any,
    equivariant_target: Any,
    call_with_arrays: Any,
    neigh: Any = None,
    *,
    carry_forward: bool = False,
) -> None:
    """The vignette, the vignetted target (on the student's own equivariant target too), the gap
    0.34.

    ``carry_forward``: the gap of a target built on a wrong ``equivariant_target`` may be its own
    (module docstring)."""
    ib = _ref()
    g = expect_array("gain", gain, (16, 16))
    if not _close(g, ib.vignette_gain(), SUM_TOL):
        raise CheckFailure(
            "`gain` has the right shape but the wrong values (1 at the centre (7.5, 7.5), "
            "0.3 at the corners)."
        )
    _raise(_vignetted_failure(vignetted_target, equivariant_target, call_with_arrays, neigh))
    gap = expect_number("gap_vignetted", gap_vignetted)
    # the student's own gap only for a target that is not the reference's
    reference = _vignetted_is_reference(
        vignetted_target, equivariant_target, neigh, call_with_arrays
    )
    if abs(gap - ib.equivariance_gap("vignetted", ib.test_crops()[:50])) > GAP_TOL and (
        reference
        or not carry_forward
        or not _own_gap_agrees(gap, vignetted_target, call_with_arrays, GAP_TOL)
    ):
        raise CheckFailure(
            "`gap_vignetted` has the right type but the wrong value: the largest "
            "|T(shift(x)) - shift(T(x))| over X_test[:50]."
            + _not_carried(
                []
                if reference
                else [
                    "neigh"
                    if _neigh_failure(neigh, call_with_arrays) is not None
                    else "equivariant_target"
                ]
            )
        )


def _not_carried(wrong: list[str] | set[str]) -> str:
    """A failure's second sentence when earlier functions ``wrong`` failed their own questions and
    errors are not carried forward (``carry_forward=False``): the answer is graded against the
    reference's."""
    if not wrong:
        return ""
    names = ", ".join(f"`{n}`" for n in sorted(wrong))
    return (
        f" Your {names} failed its own question, and errors are not carried forward through "
        f"functions here: "
        "this answer is graded against the reference's."
    )


def _own_gap_agrees(gap: float, target: Any, adapter: Any, tol: float) -> bool:
    """Errors carried forward: the gap of the student's own target (it failed its own check
    already)."""
    ib = _ref()
    x = ib.test_crops()[:50]
    try:
        a = _numbers("target(shifted crops)", call("target", adapter, target, ib.shift_image(x)))
        b = ib.shift_image(_numbers("target(crops)", call("target", adapter, target, x)))
    except CheckFailure:
        return False
    return a.shape == b.shape == x.shape and abs(gap - float(np.abs(a - b).max())) <= max(
        tol, 1e-9 * abs(gap)
    )


# ---------------------------------------------------------------- q5: fit and predict


def _fit_predict(fit, predict, adapter, model, X, Y, Xnew, nb=None):
    """``predict(model, fit(model, X, Y), Xnew)``, with ``nb`` (``neigh(Xnew)``) as predict's
    fourth argument when given."""
    params = call(f"fit('{model}', X, Y)", adapter, fit, model, X, Y)
    if not isinstance(params, np.ndarray):
        raise CheckFailure(
            f"`fit('{model}', X, Y)` should return a NumPy array, but it returns "
            f"{describe_type(params)}."
        )
    # finite numbers (complex for shared16's spectrum): a fit that returns NaN and keeps the real
    # parameters in a global for its predict makes every comparison with a NaN difference false
    params = expect_array(f"fit('{model}', X, Y)", params, complex_ok=True)
    if nb is None:
        got = call(f"predict('{model}', params, X)", adapter, predict, model, params, Xnew)
    else:
        got = call(f"predict('{model}', params, X, nb)", adapter, predict, model, params, Xnew, nb)
    shown = f"predict('{model}', fit('{model}', X, Y), X_new) with X of shape {X.shape}"
    return expect_array(shown, got, Xnew.shape), shown, params


def _expected_predictions(model, X, Y, Xnew, nb=None, nb_new=None):
    """Minimum-norm least-squares predictions; conv and local from the given neighbourhoods."""
    ib = _ref()
    if model in ("conv", "local5") and nb is not None:
        n = len(X)
        if model == "conv":
            p = np.linalg.lstsq(nb.reshape(-1, 25), Y.reshape(-1), rcond=None)[0]
            return (nb_new @ p).reshape(Xnew.shape)
        p = np.stack(
            [np.linalg.lstsq(nb[:, j], Y.reshape(n, 256)[:, j], rcond=None)[0] for j in range(256)]
        )
        return np.einsum("ndk,dk->nd", nb_new, p).reshape(Xnew.shape)
    return ib.predict(model, ib.fit(model, X, Y), Xnew)


def _expect_layout(model: str, params: Any, expected: np.ndarray) -> None:
    """``fit``'s parameters laid out as the question says (``ib.fit``'s shapes), and the
    minimum-norm ones."""
    shown = f"fit('{model}', X, Y)"
    layout = {
        "conv": "(25,), laid out like neigh's last axis",
        "shared16": "(16, 16), the kernel's 2-D DFT",
        "local5": "(256, 25), one 5x5 kernel per output pixel",
        "full": "(256, 256), with y = x_flat @ p",
    }[model]
    params = _numbers(shown, params)
    if np.shape(params) != expected.shape:
        raise CheckFailure(
            f"`{shown}` returns parameters of shape {np.shape(params)}; the question asks for "
            f"{layout}."
        )
    difference = float((np.abs(params - expected) ** 2).sum())
    # NaN fails too
    if not difference <= FIT_TOL * max(float((np.abs(expected) ** 2).sum()), 1e-300):
        raise CheckFailure(
            f"`{shown}` predicts right, but its parameters are not the minimum-norm least-squares "
            f"ones laid out as the question says: {layout}."
        )


def check_q5(
    N_PARAMS: Any, fit: Callable, predict: Callable, neigh: Any, call_with_arrays: Any
) -> None:
    """Parameter counts, and each model's predictions equal the minimum-norm least-squares ones.

    Cases: overdetermined and underdetermined training sets of random crops
    with targets from random linear maps of each class, and for 'shared16' a
    structured input (crops constant down each column) whose spectrum is zero
    off the first frequency row, where only lstsq's cutoff gives the
    minimum-norm solution.
    """
    ib = _ref()
    expect_type("N_PARAMS", N_PARAMS, dict, what="a dict")
    for m in MODELS:
        if m not in N_PARAMS:
            raise CheckFailure(f"`N_PARAMS` has no entry for the model {m!r}.")
        expect_int(f"N_PARAMS[{m!r}]", N_PARAMS[m], ib.parameter_count(m))
    _raise(_fit_predict_failure(fit, predict, neigh, call_with_arrays))


def _fit_predict_failure(fit: Any, predict: Any, neigh: Any, adapter: Any) -> CheckFailure | None:
    """q5's verdict on ``fit`` and ``predict``, decided once per grading."""
    return once(
        "fit_predict",
        (fit, predict, neigh, adapter),
        lambda: _least_squares_property(fit, predict, adapter, neigh),
    )


def _prediction_options(
    model: str, X: np.ndarray, Y: np.ndarray, Xnew: np.ndarray, neigh: Any, adapter: Any
) -> list[np.ndarray]:
    """The least-squares predictions q5 accepts: the reference's, and for conv and local5 also those
    built on the student's own ``neigh`` when it failed q2 (one that passed is the reference's)."""
    options = [_expected_predictions(model, X, Y, Xnew)]
    if model in ("conv", "local5") and _neigh_failure(neigh, adapter) is not None:
        nb, nb_new = (_student_neigh_or_none(neigh, adapter, a) for a in (X, Xnew))
        if nb is not None and nb_new is not None:
            options.append(_expected_predictions(model, X, Y, Xnew, nb, nb_new))
    return options


def _least_squares_property(
    fit: Callable, predict: Callable, call_with_arrays: Any, neigh: Any
) -> None:
    """q5's test of ``fit`` and ``predict``: each model's predictions are the minimum-norm
    least-squares ones.

    The conv and local models may also be right on the student's own
    neighbourhoods (``neigh``, when sensible).
    """
    ib = _ref()
    expect_callable("fit", fit)
    expect_callable("predict", predict)
    cases = {"conv": (1, 3), "shared16": (1, 2), "local5": (4, 40), "full": (3, 300)}

    # crops also a thousand times fainter: lstsq's cutoff is relative to the largest singular value,
    # and an absolute cutoff (pw > 1e-6) is right on crops in [0, 1] only
    @given(
        st.sampled_from(MODELS),
        st.integers(0, 1),
        st.integers(0, 2**31 - 1),
        st.sampled_from([1.0, 1e-3]),
    )
    def matches_least_squares(model, which, seed, scale):
        n = cases[model][which]
        rng = np.random.default_rng(seed)
        X, Xnew = scale * rng.random((n, 16, 16)), scale * rng.random((5, 16, 16))
        Y = ib.vignetted_target(X) + 0.01 * scale * rng.standard_normal(X.shape)
        got, shown, params = _fit_predict(fit, predict, call_with_arrays, model, X, Y, Xnew)
        options = _prediction_options(model, X, Y, Xnew, neigh, call_with_arrays)
        if not any(_rel(got, e) <= FIT_TOL for e in options):
            under = {"conv": False, "shared16": False, "local5": n < 25, "full": n < 256}[model]
            raise CheckFailure(
                f"`{shown}` differs from the least-squares predictions"
                + (
                    " (this training set is underdetermined: return the minimum-norm solution, "
                    "as np.linalg.lstsq does)."
                    if under
                    else "."
                )
            )
        # on the reference's neighbourhoods: the question's layout, and nb (conv and local5 are laid
        # out like the student's own neigh when it failed q2, so they keep their layout then: errors
        # carried forward)
        own_layout = (
            model in ("conv", "local5") and _neigh_failure(neigh, call_with_arrays) is not None
        )
        if _rel(got, options[0]) <= FIT_TOL and not own_layout:
            _expect_layout(model, params, ib.fit(model, X, Y))
            if model in ("conv", "local5"):
                other = rng.random(Xnew.shape)
                given_nb = call(
                    f"predict('{model}', params, X, nb)",
                    call_with_arrays,
                    predict,
                    model,
                    params,
                    Xnew,
                    ib.neigh(other),
                )
                shown_nb = (
                    f"predict('{model}', params, X, nb) with nb = neigh(X2), the neighbourhoods of "
                    f"other "
                    "crops X2"
                )
                if (
                    not _rel(
                        expect_array(shown_nb, given_nb, Xnew.shape),
                        ib.predict(model, params, other),
                    )
                    <= FIT_TOL
                ):
                    raise CheckFailure(
                        f"`{shown_nb}` does not predict from `nb`: when `nb` is given it is the "
                        "precomputed neigh(X), used instead of computing neigh(X) again."
                    )

    run_property(matches_least_squares)

    # Faint texture: crops 0.8 plus 1e-6 or 1e-8 of random contrast, whose singular values
    # (frequencies) lie far below the largest yet far above lstsq's cutoff (rcond=None: about 1e-13
    # of it). A fit with rcond=1e-4 (conv), or a shared16 cutoff of 1e-5, is right on every other
    # input, and 100 % wrong here; np.linalg.pinv agrees with lstsq to
    # 5e-13 (FIT_TOL is 1e-6).
    rng = np.random.default_rng(11)
    for contrast in (1e-6, 1e-8):
        for model in MODELS:
            for n in cases[model]:
                X, Xnew = 0.8 + contrast * rng.random((n, 16, 16)), rng.random((5, 16, 16))
                Y = ib.vignetted_target(X) + 0.01 * rng.standard_normal(X.shape)
                got, shown, _ = _fit_predict(fit, predict, call_with_arrays, model, X, Y, Xnew)
                options = _prediction_options(model, X, Y, Xnew, neigh, call_with_arrays)
                if not any(_rel(got, e) <= FIT_TOL for e in options):
                    raise CheckFailure(
                        f"`{shown}` is wrong on crops of faint texture (0.8 plus {contrast:g} of "
                        "random contrast): keep every singular value (frequency) above lstsq's own "
                        "cutoff (rcond=None), not a larger one."
                    )

    # The structured input: every crop constant down each column, so fft2(X) is zero (up to
    # rounding) off row 0 of the frequencies; the minimum-norm solution sets those frequencies to
    # zero.
    rng = np.random.default_rng(5)
    X = np.repeat(rng.random((3, 1, 16)), 16, axis=1)
    Y = ib.equivariant_target(X)
    Xnew = rng.random((4, 16, 16))
    got, shown, _ = _fit_predict(fit, predict, call_with_arrays, "shared16", X, Y, Xnew)
    if not _rel(got, _expected_predictions("shared16", X, Y, Xnew)) <= FIT_TOL:
        raise CheckFailure(
            f"`{shown}` is wrong on crops that are constant down each column: frequencies that "
            "the training crops do not excite must be set to 0 (lstsq's cutoff), not divided "
            "by their rounding-level power."
        )
    _lesson_cells(fit, predict, call_with_arrays, neigh)


def _lesson_cells(fit: Callable, predict: Callable, adapter: Any, neigh: Any) -> None:
    """q5 on the learning curves' own inputs: seed 0's cells from the student's ``fit`` and
    ``predict``.

    The exact arrays the article's loop fits (the first n of seed 0's 1,024 crops, each target plus
    seed 0's noise) and predicts (``X_test``, with ``nb_test``), scored with the reference's
    relative error against the reference's cells (:func:`_cells_agree`). The conv and local models
    only when ``neigh`` passed q2 (built on the student's own ``neigh``, they are graded on the
    property tests alone); they then predict as the notebook's loop does, from ``nb_test``: the
    ``neigh(X_test)`` q2 checked, which the student process kept (:data:`_NB_TEST`), so that 24
    calls do not each compute 100 MB of neighbourhoods again. The property tests check ``predict``
    without ``nb``, and that it uses a given one.
    """
    ib = _ref()
    rng = np.random.default_rng(0)
    x_tr = ib.crops(ib.POOL_SIZE, rng)
    noise = ib.noise_sd() * rng.standard_normal(x_tr.shape)
    x_test = ib.test_crops()
    expected = ib.learning_curves(seeds=(0,)).errors
    neigh_passed = _neigh_failure(neigh, adapter) is None
    models = MODELS if neigh_passed else ("shared16", "full")
    nb_test = _NB_TEST.get((_identity(neigh), _identity(adapter))) if neigh_passed else None
    if getattr(nb_test, "alive", True) is False:  # the student process was restarted since
        nb_test = None
    for t_i, (t, target) in enumerate(_reference_targets()):
        y_tr, y_test = target(x_tr) + noise, target(x_test)
        for m in models:
            m_i = MODELS.index(m)
            nb = nb_test if m in ("conv", "local5") else None
            for k, n in enumerate(ib.SIZES):
                got, shown, _ = _fit_predict(
                    fit, predict, adapter, m, x_tr[:n], y_tr[:n], x_test, nb
                )
                cell = np.full((1, 1, 1, 1), ib.relative_error(got, y_test))
                if _cells_agree(
                    cell, expected[t_i : t_i + 1, m_i : m_i + 1, k : k + 1], (n,), models=(m,)
                ):
                    given = "" if nb is None else ", nb_test"
                    raise CheckFailure(
                        f"`predict('{m}', fit('{m}', X, Y), X_test{given})` is not the "
                        "least-squares prediction on the learning curves' own inputs (X the first "
                        f"{n} of crops(1024, np.random.default_rng(0)), Y its {t} target plus seed "
                        "0's noise); the property test's random crops are not the only inputs it "
                        "is checked on."
                    )


# ---------------------------------------------------------------- q6: relative error


def check_q6(rel_err: Callable, call_with_arrays: Any) -> None:
    """``rel_err(Y_hat, Y)`` against the reference on random arrays."""
    _raise(_rel_err_failure(rel_err, call_with_arrays))


def _rel_err_failure(rel_err: Any, adapter: Any) -> CheckFailure | None:
    """q6's verdict on ``rel_err``, decided once per grading."""
    return once("rel_err", (rel_err, adapter), lambda: _rel_err_property(rel_err, adapter))


def _rel_err_property(rel_err: Callable, call_with_arrays: Any) -> None:
    ib = _ref()
    expect_callable("rel_err", rel_err)

    @given(st.integers(1, 3), st.integers(0, 2**31 - 1))
    def matches(n, seed):
        rng = np.random.default_rng(seed)
        y = rng.standard_normal((n, 16, 16))
        y_hat = y + rng.standard_normal((n, 16, 16)) * rng.random()
        got = expect_number(
            f"rel_err(Y_hat, Y) for arrays of shape {y.shape}",
            call("rel_err", call_with_arrays, rel_err, y_hat, y),
        )
        if not math.isclose(got, ib.relative_error(y_hat, y), rel_tol=1e-9, abs_tol=1e-15):
            raise CheckFailure(
                "`rel_err(Y_hat, Y)` is wrong: the squared error summed over all entries, "
                "divided by the true targets' energy sum(Y**2)."
            )

    run_property(matches)
    # the learning curves' own arrays: each target on X_test, against real predictions (each model
    # fitted to the first 16 of seed 0's crops) and against itself
    x_fit, x_test = ib.crops(16, np.random.default_rng(0)), ib.test_crops()
    for t, target in _reference_targets():
        y_test = target(x_test)
        for y_hat in [y_test] + [
            ib.predict(m, ib.fit(m, x_fit, target(x_fit)), x_test) for m in MODELS
        ]:
            got = expect_number(
                "rel_err(Y_hat, Y) on the learning curves' own arrays",
                call("rel_err", call_with_arrays, rel_err, y_hat, y_test),
            )
            if not math.isclose(got, ib.relative_error(y_hat, y_test), rel_tol=1e-9, abs_tol=1e-15):
                raise CheckFailure(
                    f"`rel_err(Y_hat, Y)` is wrong on the learning curves' own arrays (Y the {t} "
                    "target of X_test); the property test's random arrays are not the only inputs "
                    "it is checked on."
                )


# ---------------------------------------------------------------- q7, q8: experiments


class _Own:
    """The student's own pipeline, called from the judge (errors carried forward).

    A function graded as the reference's in its own question (the targets of
    q3 and q4 on a ``neigh`` that passed q2, ``fit`` and ``predict`` of q5 on
    such a ``neigh``, ``rel_err`` of q6; each verdict decided once per
    grading, :func:`autograder.checks.once`) is replaced by the reference's
    here: a function that is right on the property tests' inputs but answers
    the experiments' own inputs another way (it recognises the crops or the
    targets it is given, or what was called before) cannot carry made-up
    learning curves. Only a function already wrong in its own question is
    called as the student's (``own`` names them).
    """

    def __init__(
        self, adapter, fit, predict, rel_err, equivariant_target, vignetted_target, neigh=None
    ):
        ib = _ref()
        self.adapter = adapter
        self.own = set()

        def student(name, func):
            self.own.add(name)
            return lambda *args: call(name, adapter, func, *args)

        self.targets = {
            "equivariant": (
                ib.equivariant_target
                if _equivariant_is_reference(equivariant_target, neigh, adapter)
                else student("equivariant_target", equivariant_target)
            ),
            "vignetted": (
                ib.vignetted_target
                if _vignetted_is_reference(vignetted_target, equivariant_target, neigh, adapter)
                else student("vignetted_target", vignetted_target)
            ),
        }
        if (
            _neigh_failure(neigh, adapter) is None
            and _fit_predict_failure(fit, predict, neigh, adapter) is None
        ):
            self.fit, self.predict = ib.fit, ib.predict
        else:
            self.fit, self.predict = student("fit", fit), student("predict", predict)
        self.rel_err = (
            ib.relative_error
            if _rel_err_failure(rel_err, adapter) is None
            else student("rel_err", rel_err)
        )

    def target(self, t, x):
        return _numbers(f"{t}_target(x)", self.targets[t](x))

    def error(self, model, X, Y, Y_test):
        params = self.fit(model, X, Y)
        pred = self.predict(model, params, _ref().test_crops())
        return float(self.rel_err(_numbers(f"predict('{model}', ...)", pred), Y_test))

    def degenerate(self) -> str | None:
        """Why the student's pipeline cannot carry errors forward (it would make the answers
        trivial), or ``None``.

        Probes: each target on 20 test crops is not (nearly) zero;
        ``rel_err(Y, Y)`` is 0, ``rel_err(Y / 2, Y)`` clearly positive, and
        ``rel_err(Y + t D, Y)`` grows with t (:data:`REL_ERR_STEPS`); each
        model fitted to 16 crops predicts something other than zeros, and
        twice as much when fitted to twice the targets.
        """
        ib = _ref()
        x, x_fit = ib.test_crops()[:20], ib.crops(16, np.random.default_rng(7))
        try:
            for t, reference in _reference_targets():
                if _substantial(self.target(t, x), reference(x)) is None:
                    return f"`{t}_target` gives (nearly) zeros"
            y = ib.equivariant_target(x)
            perfect = float(self.rel_err(y, y))
            half = float(self.rel_err(0.5 * y, y))
            if not (
                math.isfinite(perfect)
                and abs(perfect) <= 1e-9
                and math.isfinite(half)
                and half >= 1e-3
            ):
                return "`rel_err` is not 0 for a perfect prediction and positive for a wrong one"
            # ...and grows with the error: a step (0 when equal, else 1) passes the two probes above
            # but makes every learning-curve cell 1 (the reference gives 0.55 times 1e-6, 1e-4,
            # 1e-2, 0.25 here)
            y_all = ib.equivariant_target(ib.test_crops())  # the shape the experiments score
            d = (
                ib.predict(
                    "full", ib.fit("full", x_fit, ib.equivariant_target(x_fit)), ib.test_crops()
                )
                - y_all
            )
            growth = [float(self.rel_err(y_all + t * d, y_all)) for t in REL_ERR_STEPS]
            if not (
                all(math.isfinite(r) for r in growth)
                and growth[0] < 1e-2
                and all(a < b for a, b in zip(growth, growth[1:]))
            ):
                return "`rel_err` does not grow with the error of the prediction"
            y_fit = ib.equivariant_target(x_fit)
            for m in MODELS:
                params = self.fit(m, x_fit, y_fit)
                pred = _numbers(f"predict('{m}', ...)", self.predict(m, params, x))
                if _substantial(pred, y) is None:
                    return f"`predict('{m}', ...)` gives (nearly) zeros"
                # least squares is linear in the targets: a prediction that ignores them (a
                # constant, the input crops) passes the probe above but makes every cell trivial
                params2 = self.fit(m, x_fit, 2 * y_fit)
                pred2 = _numbers(f"predict('{m}', ...)", self.predict(m, params2, x))
                if pred2.shape != pred.shape or not np.allclose(
                    pred2, 2 * pred, rtol=1e-6, atol=1e-6 * float(np.abs(pred).max())
                ):
                    return (
                        f"`predict('{m}', ...)` does not follow the targets `fit` was given "
                        "(fitted to twice the targets, it should predict twice as much)"
                    )
        except (CheckFailure, TypeError, ValueError) as err:
            return f"your functions could not be called ({str(err)[:200]})"
        return None


def check_q7(
    SIGMA: Any,
    noise_free: Any,
    fit,
    predict,
    rel_err,
    equivariant_target,
    vignetted_target,
    call_with_arrays,
    neigh=None,
    *,
    carry_forward: bool = False,
) -> None:
    """The noise sd and the noise-free errors (1,024 crops of seed 0).

    ``carry_forward``: graded on the student's own functions when they differ (module docstring)."""
    ib = _ref()
    sigma = expect_number("SIGMA", SIGMA)
    expect_type("noise_free", noise_free, dict, what="a dict keyed by (target, model)")
    keys = [(t, m) for t in ib.TARGETS for m in MODELS]
    for key in keys:
        if key not in noise_free:
            raise CheckFailure(f"`noise_free` has no entry for {key}.")
        expect_number(f"noise_free[{key}]", noise_free[key])
    ref_free = ib.noise_free_errors()

    def agrees(values, expected):
        for key in keys:
            v, e = float(values[key]), expected[key]
            if e < ROUNDING_LEVEL:
                if not 0 <= v < ROUNDING_LEVEL:
                    return False
            elif not math.isclose(v, e, rel_tol=CELL_RTOL):
                return False
        return True

    right_sigma = math.isclose(sigma, ib.noise_sd(), rel_tol=1e-9)
    if right_sigma and agrees(noise_free, ref_free):
        return
    # Errors carried forward: the same quantities from the student's own functions (by default only
    # from functions graded as the reference's, which _Own replaces by the reference's: then nothing
    # but values is carried)
    own = _Own(call_with_arrays, fit, predict, rel_err, equivariant_target, vignetted_target, neigh)
    if not carry_forward and own.own:
        if not right_sigma:
            raise CheckFailure(
                "`SIGMA` is wrong: 0.1 times the root mean square of the equivariant target on "
                "X_test." + _not_carried(own.own)
            )
        raise CheckFailure(
            "`noise_free` is wrong: fit each model to the clean targets of crops(1024, "
            "np.random.default_rng(0)) and score it on X_test." + _not_carried(own.own)
        )
    why = own.degenerate()
    if why is not None:
        raise CheckFailure(
            f"`SIGMA` or `noise_free` differs from the reference, and cannot be graded on your own "
            f"functions instead: {why}."
        )
    x_test = ib.test_crops()
    own_sigma = 0.1 * float(np.sqrt((own.target("equivariant", x_test) ** 2).mean()))
    if not math.isclose(sigma, own_sigma, rel_tol=1e-9):
        raise CheckFailure(
            "`SIGMA` is wrong: 0.1 times the root mean square of the equivariant target on X_test."
        )
    x_pool = ib.crops(ib.POOL_SIZE, np.random.default_rng(0))
    own_free = {}
    for t in ib.TARGETS:
        y_pool, y_test = own.target(t, x_pool), own.target(t, x_test)
        for m in MODELS:
            own_free[t, m] = own.error(m, x_pool, y_pool, y_test)
    fixed = {k: (0.0 if v < 1e-15 else v) for k, v in own_free.items()}
    if not agrees(noise_free, fixed):
        raise CheckFailure(
            "`noise_free` is wrong: fit each model to the clean targets of "
            "crops(1024, np.random.default_rng(0)) and score it on X_test."
        )


def _cells_agree(err: np.ndarray, expected: np.ndarray, sizes, models=MODELS) -> int:
    """How many cells of ``err`` (targets, models, sizes, seeds) are outside their tolerance."""
    bad = 0
    for m_i, m in enumerate(models):
        for k, n in enumerate(sizes):
            a, e = err[:, m_i, k], expected[:, m_i, k]
            if (m, n) in PEAK_CELLS:
                ok = (a > 0) & (a <= e * PEAK_FACTOR) & (a >= e / PEAK_FACTOR)
            else:
                ok = np.abs(a - e) <= CELL_RTOL * np.abs(e)
            bad += int((~ok).sum())
    return bad


def check_q8(
    err: Any,
    median: Any,
    err_min: Any,
    err_max: Any,
    fit,
    predict,
    rel_err,
    equivariant_target,
    vignetted_target,
    SIGMA,
    call_with_arrays,
    neigh=None,
    *,
    carry_forward: bool = False,
) -> None:
    """The learning-curve errors, cell by cell, and the median and min-max tables over seeds.

    ``carry_forward``: graded on cells recomputed with the student's own functions when they differ
    (module docstring)."""
    ib = _ref()
    sizes = ib.SIZES
    e = expect_array("err", err)
    if e.ndim != 4 or e.shape[:3] != (2, 4, len(sizes)) or not 1 <= e.shape[3] <= 5:
        raise CheckFailure(
            f"`err` has shape {e.shape}, but it should have shape (2, 4, 6, number of seeds)."
        )
    seeds = tuple(range(e.shape[3]))
    for name, value, stat in (
        ("median", median, np.median),
        ("err_min", err_min, np.min),
        ("err_max", err_max, np.max),
    ):
        v = expect_array(name, value, (2, 4, len(sizes)))
        if not np.allclose(v, stat(e, axis=-1), rtol=1e-12, atol=0):
            raise CheckFailure(
                f"`{name}` is not the {name.replace('err_', '')} of `err` over the seeds (last "
                f"axis)."
            )
    expected = ib.learning_curves(seeds=seeds).errors
    bad = _cells_agree(e, expected, sizes)
    if bad == 0:
        return
    # Errors carried forward: recompute every cell of every seed with the student's own functions
    # (only when they differ from the reference's: a right pipeline has no error to carry forward).
    # (by default only on functions graded as the reference's, which _Own replaces by the
    # reference's: then only the student's SIGMA, a value, is carried forward)
    own = _Own(call_with_arrays, fit, predict, rel_err, equivariant_target, vignetted_target, neigh)
    if not carry_forward and own.own:
        raise CheckFailure(
            f"`err` has {bad} of its {e.size} cells wrong (tolerances: relative 1e-6, a factor of "
            f"10 "
            "at the interpolation peaks)." + _not_carried(own.own)
        )
    why = own.degenerate()
    if why is not None:
        raise CheckFailure(
            f"`err` has {bad} of its {e.size} cells wrong, and cannot be graded on your own "
            f"functions "
            f"instead: {why}."
        )
    x_test = ib.test_crops()
    sigma = expect_number("SIGMA", SIGMA)
    message = (
        f"`err` has {bad} of its {e.size} cells wrong (tolerances: relative 1e-6, a factor of 10 "
        f"at the "
        "interpolation peaks)"
    )
    # every cell of every seed (not a few, nor seed 0 alone: the others could be made up, or come
    # from a broken loop over seeds), on the student's own functions; seed 0 first, and one seed at
    # a time
    targets = {t: own.target(t, x_test) for t in ib.TARGETS}
    for s in seeds:
        rng = np.random.default_rng(s)
        x_tr = ib.crops(ib.POOL_SIZE, rng)
        noise = sigma * rng.standard_normal(x_tr.shape)
        own_cells = np.empty((len(ib.TARGETS), len(MODELS), len(sizes), 1))
        for t_i, t in enumerate(ib.TARGETS):
            y_tr = own.target(t, x_tr) + noise
            for m_i, m in enumerate(MODELS):
                for k, n in enumerate(sizes):
                    own_cells[t_i, m_i, k, 0] = own.error(m, x_tr[:n], y_tr[:n], targets[t])
        if s == 0 and _cells_agree(own_cells, expected[..., :1], sizes) == 0:
            # the student's functions and SIGMA give the reference's cells: there is no error to
            # carry forward
            raise CheckFailure(
                f"{message}: your functions give the right cells, so the loop over seeds, "
                "models and sizes, or the crops it draws (float64, q1), is where they go wrong."
            )
        for t_i, t in enumerate(ib.TARGETS):
            for m_i, m in enumerate(MODELS):
                for k, n in enumerate(sizes):
                    cell = (
                        slice(t_i, t_i + 1),
                        slice(m_i, m_i + 1),
                        slice(k, k + 1),
                        slice(s, s + 1),
                    )
                    mine = (slice(t_i, t_i + 1), slice(m_i, m_i + 1), slice(k, k + 1), slice(0, 1))
                    if _cells_agree(e[cell], own_cells[mine], (n,), models=(m,)):
                        raise CheckFailure(
                            f"{message}; e.g. seed {s}, target {t!r}, model {m!r}, n = {n}."
                        )
