"""Hidden and public checks for the assignment ``telling_things_apart`` (chapter "Telling Things
Apart").

Each ``check_q*`` function grades one question of the master notebook and is
called by that question's hidden test with the student's names as arguments.
The answers and their types are listed in ``assignments/telling_things_apart/answers.md``;
expected values come from ``reference.telling_things_apart`` computed in the
grading environment.

Errors carried forward: q5 to q8 read the student's trained network. The
hardened judge sees the student's ``model`` only as a function it can call
(values cross between the processes as data), so the notebook also stores
``weights = model.state_dict()``; the checks rebuild ``mlp()`` from it, make
sure the rebuilt network gives ``model``'s logits on 64 test digits, and
compute every expected value with the reference code *on that network*. A
submission whose ``model`` / ``weights`` are unusable, or whose network is
near chance on the test digits (``MIN_CARRIED_ACCURACY``: all-zero weights
would make every later answer trivial) or whose softmax is saturated or flat
(``MIN_RESPONSIVE_DIGITS``: FGSM then has nothing to move), is graded against the reference
model instead. So a model trained the wrong way costs q4 and
nothing else. The student's functions that take a model (``saliency``,
``fgsm``) are called with the student's own ``model`` and compared with the
reference functions on its rebuilt copy (or, when there is none, with a fresh
``mlp()`` built by the student's ``mlp``, seeded 42 and checked against the
reference's).

Tolerances, and why they are what they are:

* ``PROB_ATOL = 1e-6``, ``PROB_RTOL = 1e-5``: a softmax is a few float32
  operations (max, subtract, exp, sum, divide) in some order; two correct
  implementations differ by a few units in the last place (about 6e-8
  relative), far below any real mistake (a softmax over the wrong axis or
  with the temperature multiplied is off by more than 1e-2 on these inputs).
* ``LARGE_SCORE_TOL = 2e-3``: scores in the thousands (1000 + noise, or
  logits divided by a temperature of 1e-3). float32 numbers are 6e-5 apart
  at 1,000 and 5e-4 apart at 5,000, so a correct softmax that subtracts a
  ``logsumexp`` instead of the maximum is off by a few of those spacings; one
  that overflows gives NaN, and a wrong one is off by far more than 1e-2.
* ``SHARE_TOL = 1e-5``: the winner's share of ten probabilities, the same
  argument with a little room for ``softmax(s * scores)`` against
  ``softmax(scores / (1 / s))``. The share rounded to 3 to 6 decimals passes
  too (the solution prints 4); a wrong softmax is off by more than 1e-2.
* ``LOSS_TOL = 1e-5``: the mean of at most 32 float32 logarithms.
* ``CHAPTER_LOSS_TOL = 0.0051``: the chapter prints the four losses to two
  decimals (4.605 as 4.61); either the printed or the full value passes.
* ``UNTRAINED_TOL = 1e-5``: a mean over 8,000 float32 log-probabilities. The
  honest ways (one batch, 250 batches, own softmax, float64, two threads)
  agree within 8e-8, and adding the 8,000 losses one at a time in float32
  drifts by 1.3e-6. Wrong digits: all 10,000 (the test digits in) are 3.6e-5
  away (so a tolerance of 1e-4 would pass them), the test digits
  alone 1.8e-4; a wrong model more than 1e-2. The value rounded to 3 to 6
  decimals passes too (the solution prints it to 4).
* Training bands (``TRAIN_BAND``, ``TEST_BAND``, ``GAP_BAND``, ``LOSS_BAND``):
  the recipe (``mlp()``, SGD lr 0.1, batches of 32, 10 epochs, shuffled by a
  generator seeded 0) gives 0.9739 / 0.9435 / 0.0304 on the 8,000 / 2,000.
  Another batch order (shuffle seeds 1..7, a ``DataLoader``) is an equally
  correct run of the same recipe; measured, those land 0.001-0.007 from the
  reference's train accuracy, 0.0005-0.006 from its test accuracy, up to
  0.0105 from its gap, and every epoch's mean loss within 3 % of its loss.
  The bands (0.012, 0.012, 0.015 and 10 %) hold all of them with room and
  exclude the classic mistakes with a message that names them: training on
  all 10,000 digits (test accuracy 0.980, 0.037 above; gap 0.001), a
  learning rate of 0.01 (test 0.898) or 5 epochs instead of 10 (test 0.926).
  Inside the bands the recipe itself is checked: the weights must be one of
  its two accepted runs (the question's ``randperm`` order, or a shuffling
  ``DataLoader`` with ``generator=order``) within ``RECIPE_WEIGHT_TOL``, and
  ``train_losses`` that run's within ``RECIPE_LOSS_TOL``, since SGD with
  momentum, or 500 test digits added to the training set, land in every
  band.
* ``REPORTED_TOL``: the student's reported accuracy against the accuracy the
  checker measures on the student's own model: two digits' worth (an argmax
  whose two largest logits tie to the last bit can flip between batchings).
* ``RECENTRED_TOL = 0.0025``: five test digits. A digit whose centre of mass
  sits exactly half-way between two pixels may go either way
  (``round`` half-to-even or half-up); six of the 2,000 corner digits come
  within 1e-3 of such a tie on one axis.
* ``COM_TOL = 1e-4``: a centre of mass computed in float32 (the student's)
  or float64 (the check's) differs by about 1e-5 pixels; the tolerance lets a
  digit sitting within 1e-4 of a half-pixel tie round either way.
* ``GRADIENT_ATOL = 1e-5``, ``GRADIENT_RTOL = 1e-4``: the same gradient by
  ``backward``, ``autograd.grad`` or a one-hot dot product differs by float32
  rounding (about 1e-7 relative); the gradient of the loss or of the
  probability instead of the winning score differs by 1e-2 or more.
* ``DRIVER_TOL = 1e-5``: a mean of 20 float32 images in [0, 1].
* ``FLIP_TOL = 0.02``: two of the 100 digits. FGSM's step is the *sign* of a
  gradient; a loss written another way (sum, own softmax) rounds differently
  and a pixel whose gradient is within rounding of zero may step the other
  way, which can, rarely, flip one digit's verdict.
* ``L2_TOL = 0.01`` (about 0.3 % of the 3.24 the reference gives): the same
  argument for the perturbation's length.
* ``STEP_TOL = 1e-6``: an FGSM pixel is ``clamp(x + s * epsilon, 0, 1)``,
  one float32 addition. ``SIGN_AGREEMENT = 0.95``: of the pixels the
  reference step moves, the student's must move the same way on 95 % (see
  ``FLIP_TOL`` for why not all). ``MOST = 0.5``: "the verdict flips" on most
  of the confident digits whenever the reference step flips most: the
  reference model flips 82 of 100 at epsilon 0.15, a step without the sign
  or downhill flips none.
* ``CONSISTENT_TOL = 1e-4``: ``model``'s logits (computed in the student
  process) against the network rebuilt from ``weights`` (computed here):
  the same float32 operations, possibly at another thread count, agree to
  about 1e-6; weights of another network differ by more than 1e-1.
* Counts, shapes, indices, pixel positions, the flattening, the units and the
  confusion matrix are exact.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import (
    CheckFailure,
    call_student,
    changed_in_place,
    expect_callable,
    expect_close,
    expect_defined,
    expect_int,
    expect_number,
    expect_sequence,
    expect_tensor,
    expect_type,
    keys_shown,
    per_grading,
    relative_distance,
)
from autograder.checks.properties import given, run_property, seeded_images, st
from autograder.public.telling_things_apart import weight_tensors

PROB_ATOL, PROB_RTOL = 1e-6, 1e-5
SHARE_TOL = 1e-5
LARGE_SCORE_TOL = 2e-3
LOSS_TOL = 1e-5
CHAPTER_LOSS_TOL = 0.0051
UNTRAINED_TOL = 1e-5
TRAIN_BAND = 0.012
TEST_BAND = 0.012
GAP_BAND = 0.015
LOSS_BAND = 0.10  # relative, per epoch
#: The student's weights against one of the recipe's two accepted runs (``reference.recipe_runs``),
#: relative Euclidean distance over all four tensors: the same run at two threads instead of one
#: ends 9.6e-4 apart (2,500 SGD steps amplify the rounding of summing in another order); weight
#: decay 1e-5 ends 2.7e-2 apart, batches of 33 7e-2, momentum 0.02 5e-2, the DataLoader's order
#: against randperm's 0.18, 500 test digits added far more.
RECIPE_WEIGHT_TOL = 1e-2
#: ...and its ``train_losses`` against that run's, relative per epoch: 2.7e-5 apart at two threads.
RECIPE_LOSS_TOL = 1e-3
REPORTED_TOL = {"train": 2 / 8000 + 1e-9, "test": 2 / 2000 + 1e-9}
RECENTRED_TOL = 0.0025
COM_TOL = 1e-4
GRADIENT_ATOL, GRADIENT_RTOL = 1e-5, 1e-4
DRIVER_TOL = 1e-5
FLIP_TOL = 0.02
L2_TOL = 0.01
STEP_TOL = 1e-6
MOST = 0.5
#: Fraction of the pixels FGSM moves that must move the reference's way (see FLIP_TOL).
SIGN_AGREEMENT = 0.95


def _reference():
    from reference import telling_things_apart

    return telling_things_apart


def _answers() -> dict[str, Any]:
    return _reference().answers()



def _int_pair(name: str, value: Any) -> tuple[int, int]:
    pair = tuple(expect_sequence(name, value, 2))
    return tuple(expect_int(f"{name}[{i}]", v) for i, v in enumerate(pair))


def _float_dict(name: str, value: Any, expected: dict) -> None:
    expect_type(name, value, dict, what="a dict")
    missing = [k for k in expected if k not in value]
    if missing:
        raise CheckFailure(f"`{name}` has no entry for the key(s) {missing}.")
    extra = [k for k in value if k not in expected]
    if extra:
        raise CheckFailure(f"`{name}` has unexpected key(s) {keys_shown(extra)}.")
    for key, want in expected.items():
        number = expect_number(f"{name}[{key!r}]", value[key])
        # the value, or it as printed: rounded to 3 to 6 decimals (the solution prints 4). The
        # rounded forms match to rel_tol 1e-7: a float32 share rounded by the student and our
        # float64 one rounded here differ only in the last bits of the decimal they both round to
        as_printed = any(math.isclose(number, round(want, d), rel_tol=1e-7) for d in range(3, 7))
        if abs(number - want) > SHARE_TOL and not as_printed:
            raise CheckFailure(f"`{name}[{key!r}]` has the right type but the wrong value.")


def _data():
    """``(train_images, train_labels, test_images, test_labels)``, fresh copies."""
    return _reference().load_split()


#: Logits of the student's ``model`` (run in the student process) against the
#: network rebuilt from ``weights`` (run here): the same float32 operations on
#: another process, possibly at another thread count; they agree to about 1e-6.
CONSISTENT_TOL = 1e-4
#: The student's network is carried forward into q5 to q8 only when it reads
#: at least this share of the 2,000 test digits right (the recipe gives 0.94;
#: a network trained another way still far above). At chance (an untrained
#: ``mlp()``, all-zero weights: 0.1) every later answer is trivial: all-zero
#: weights give zero saliency, no confident digit and an FGSM that moves
#: nothing, so a submission could keep q5 to q8 with answers that test nothing.
MIN_CARRIED_ACCURACY = 0.5
#: ...and only when the loss gradient moves the pixels of at least this many
#: of its confident digits (``reference.confident_digits``, at most 100).
#: Multiplying a trained network's last layer by 1e4 keeps every accuracy
#: (argmax is unchanged) but saturates the softmax: the cross-entropy's
#: gradient is then exactly zero, the reference FGSM moves nothing, and an
#: ``fgsm`` that returns the image unchanged (flip rate 0, length 0) passed
#: q8; dividing it by 1e4 instead leaves no digit above 0.9, so no digit to
#: test ``fgsm`` on. A network trained by the recipe, or another way, has 100
#: confident digits, all with a gradient.
MIN_RESPONSIVE_DIGITS = 50


def _rebuild(tensors: list[torch.Tensor]) -> nn.Module:
    """``mlp()`` with the given four tensors as its parameters (the caller's random state kept)."""
    with torch.random.fork_rng(devices=[]):
        net = _reference().mlp()
    with torch.no_grad():
        for parameter, tensor in zip(net.parameters(), tensors):
            parameter.copy_(tensor)
    return net.eval()


def _agrees(model: Any, net: nn.Module) -> bool:
    """Whether ``model`` (the student's, perhaps remote) gives ``net``'s logits on 64 test
    digits."""
    sample = _data()[2][:64]
    try:
        out = model(sample)
    except Exception:  # the student's model may raise anything
        return False
    if (
        not isinstance(out, torch.Tensor)
        or tuple(out.shape) != (64, 10)
        or not out.is_floating_point()
    ):
        return False
    with torch.no_grad():
        expected = net(sample)
    return bool(
        torch.allclose(out.detach().float(), expected, atol=CONSISTENT_TOL, rtol=CONSISTENT_TOL)
    )


def _student_net(model: Any, weights: Any) -> nn.Module | None:
    """The student's trained network rebuilt here from ``weights``, when they are ``model``'s; else
    ``None``.

    The hardened judge sees the student's ``model`` only as a function it can
    call; ``weights`` (``model.state_dict()``) is the same network as data.
    ``None`` too for a network later answers cannot be fairly graded on:
    weights that are not finite, that read fewer than
    :data:`MIN_CARRIED_ACCURACY` of the test digits right, or whose loss
    gradient moves fewer than :data:`MIN_RESPONSIVE_DIGITS` confident digits
    (a saturated or flattened softmax, which leaves FGSM nothing to test).
    """
    tensors = weight_tensors(weights)
    if (
        tensors is None
        or not callable(model)
        or not all(bool(torch.isfinite(t).all()) for t in tensors)
    ):
        return None
    net = _rebuild(tensors)
    if not _agrees(model, net):
        return None
    _, _, images, labels = _data()
    with torch.no_grad():
        accuracy = (net(images).argmax(dim=1) == labels).float().mean().item()
    if (
        accuracy < MIN_CARRIED_ACCURACY
        or _responsive_digits(net, images, labels) < MIN_RESPONSIVE_DIGITS
    ):
        return None
    return net


def _responsive_digits(net: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> int:
    """How many of ``net``'s confident test digits have a cross-entropy gradient that is not all
    zero."""
    digits = _reference().confident_digits(net, images, labels)
    if len(digits) == 0:
        return 0
    x = images[digits].clone().requires_grad_(True)
    # summed, each digit's gradient is its own loss's (the reference fgsm's, for a batch of one)
    loss = F.cross_entropy(net(x), labels[digits], reduction="sum")
    (grad,) = torch.autograd.grad(loss, x)
    return int((grad.flatten(1) != 0).any(dim=1).sum())


def _graded_net(model: Any, weights: Any) -> nn.Module:
    """The network later answers are graded on: the student's own (errors carried forward), else the
    reference."""
    net = _student_net(model, weights)
    return net if net is not None else _reference().reference_model()


def _property_model(model: Any, weights: Any, mlp: Any) -> tuple[Any, nn.Module, bool]:
    """A model living where the student's functions run, its copy here, and whether it is trained.

    The student's functions are called with the student's own trained
    ``model`` when ``weights`` rebuild it; otherwise with a fresh ``mlp()``
    (seeded 42, untrained) built by the student's ``mlp``, checked against the
    reference's.
    """
    net = _student_net(model, weights)
    if net is not None:
        return model, net, True
    with torch.random.fork_rng(devices=[]):
        local = _reference().mlp().eval()
        try:
            fresh = mlp() if callable(mlp) else None
        except Exception:  # the student's mlp may raise anything
            fresh = None
    if fresh is None or not _agrees(fresh, local):
        raise CheckFailure(
            "your functions could not be tested: `model` and `weights` (q4) do not rebuild your "
            "trained "
            "network, and `mlp()` is not the network of digits.py. Keep q4's names and run it."
        )
    return fresh, local, False


#: The reference's values of each network the checks were given, by its weights' digest.
_MODEL_VALUES: dict[str, dict] = per_grading({})


def _fingerprint(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _model_values(net: nn.Module) -> dict:
    """``reference.model_values`` of a local network, once per set of weights."""
    ref = _reference()
    key = _fingerprint(net)
    if key not in _MODEL_VALUES:
        previous = torch.get_num_threads()
        torch.set_num_threads(ref.THREADS)
        try:
            _MODEL_VALUES[key] = ref.model_values(copy.deepcopy(net))
        finally:
            torch.set_num_threads(previous)
    return copy.deepcopy(_MODEL_VALUES[key])


# ---------------------------------------------------------------- q1: the raw material


def check_q1(n_train, n_test, test_counts, pixel_215, pixel_243, points, chapter_digit) -> None:
    """The split's sizes and class counts, the row-by-row flattening, the chapter's list of
    brightnesses."""
    a = _answers()
    expect_int("n_train", n_train, a["n_train"])
    expect_int("n_test", n_test, a["n_test"])
    expect_tensor("test_counts", test_counts, shape=(10,), finite=False, requires_grad=None)
    if test_counts.is_floating_point() or test_counts.dtype == torch.bool:
        raise CheckFailure(
            f"`test_counts` has dtype {test_counts.dtype}, but it should hold integer counts "
            "(torch.bincount gives int64)."
        )
    if not torch.equal(test_counts.long(), a["test_counts"]):
        raise CheckFailure(
            "`test_counts` has the right shape, but the wrong counts: count the 2,000 test labels."
        )
    for name, value in (("pixel_215", pixel_215), ("pixel_243", pixel_243)):
        if _int_pair(name, value) != tuple(a[name]):
            raise CheckFailure(
                f"`{name}` is not the (row, column) of that pixel in the 28 by 28 grid."
            )
    expect_tensor("points", points, shape=(8000, 784), dtype=torch.float32, requires_grad=None)
    if not torch.equal(points.detach(), a["points"]):
        raise CheckFailure(
            "`points` has the right shape and dtype, but its values are not the 8,000 training "
            "digits read row by row (pixel (r, c) at position 28 * r + c)."
        )
    triple = tuple(expect_sequence("chapter_digit", chapter_digit, 3))
    values = tuple(expect_int(f"chapter_digit[{i}]", v) for i, v in enumerate(triple))
    for i, what in ((0, "index in the training set"), (1, "label"), (2, "position in the list")):
        if values[i] != a["chapter_digit"][i]:
            raise CheckFailure(f"`chapter_digit`: the {what} is wrong.")


# ---------------------------------------------------------------- q2: the softmax


def _softmax_call(
    softmax: Callable, logits: torch.Tensor, temperature: float | None = None
) -> torch.Tensor:
    args = (logits,) if temperature is None else (logits, temperature)
    shown = (
        f"softmax(logits of shape {tuple(logits.shape)}"
        + ("" if temperature is None else f", {temperature}")
        + ")"
    )
    before = logits.clone()
    out = call_student("softmax", softmax, *args)
    if changed_in_place(softmax, (logits, before)):
        raise CheckFailure(f"`{shown}` changed its input in place: return a new tensor.")
    expect_tensor(
        shown, out, shape=logits.shape, dtype=logits.dtype, finite=True, requires_grad=None
    )
    return out.detach()


def _logits(data, scale_choices=(0.5, 1.0, 2.0)) -> torch.Tensor:
    n = data.draw(st.integers(0, 4), label="batch (0: one vector)")
    c = data.draw(st.integers(2, 12), label="classes")
    scale = data.draw(st.sampled_from(scale_choices), label="spread")
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    shape = (c,) if n == 0 else (n, c)
    return torch.randn(shape, generator=gen) * scale


def check_softmax_function(softmax: Callable) -> None:
    """``softmax(logits, temperature=1.0)`` over the last axis, by property (Hypothesis,
    derandomized)."""
    expect_callable("softmax", softmax)

    @given(st.data())
    def matches_torch(data):
        logits = _logits(data, (0.5, 1.0, 3.0))
        # "over the last axis": also with one more leading axis (dim 1 is the last axis only of
        # (N, C))
        if data.draw(st.booleans(), label="one more leading axis"):
            logits = torch.stack([logits, logits.flip(-1) * 0.5])
        t = data.draw(st.sampled_from([None, 0.25, 0.5, 2.0, 5.0]), label="temperature")
        out = _softmax_call(softmax, logits, t)
        expected = torch.softmax(logits / (1.0 if t is None else t), dim=-1)
        if not torch.allclose(out, expected, atol=PROB_ATOL, rtol=PROB_RTOL):
            sums = out.sum(dim=-1)
            if logits.dim() == 2 and not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
                raise CheckFailure(
                    f"`softmax` on a batch of shape {tuple(logits.shape)}: the rows do not sum "
                    "to one. Normalise over the last axis (the classes), dim=-1."
                )
            raise CheckFailure(
                f"`softmax(logits of shape {tuple(logits.shape)}"
                + ("" if t is None else f", temperature={t}")
                + ")` is not exp(logits / temperature) normalised over the last axis."
            )

    @given(st.data())
    def positive_sums_to_one_shift_invariant(data):
        logits = _logits(data)
        out = _softmax_call(softmax, logits)
        if not bool((out > 0).all()):
            raise CheckFailure(
                "`softmax` gave a probability that is not positive: every exp(score) is > 0."
            )
        sums = out.sum(dim=-1)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
            raise CheckFailure(
                f"`softmax` on shape {tuple(logits.shape)}: the probabilities over the last axis "
                "do not sum to one."
            )
        constant = data.draw(st.sampled_from([-30.0, -1.0, 2.5, 30.0]), label="constant")
        moved = _softmax_call(softmax, logits + constant)
        if not torch.allclose(moved, out, atol=1e-5, rtol=1e-4):
            raise CheckFailure(
                f"`softmax(logits + {constant})` differs from `softmax(logits)`: adding the same "
                "number to every score must not change the probabilities."
            )

    @given(st.data())
    def winner_takes_most_never_all(data):
        logits = _logits(data)
        out = _softmax_call(softmax, logits)
        if not torch.equal(out.argmax(dim=-1), logits.argmax(dim=-1)):
            raise CheckFailure(
                "`softmax` gave the largest probability to a class other than the largest score."
            )
        if bool((out.max(dim=-1).values >= 1.0).any()):
            raise CheckFailure(
                "`softmax` gave the largest score all of the probability; it takes most, never all."
            )

    @given(st.data())
    def temperature_flattens_and_limits(data):
        logits = _logits(data)
        low, high = sorted(
            data.draw(
                st.lists(
                    st.sampled_from([0.2, 0.5, 1.0, 2.0, 4.0]), min_size=2, max_size=2, unique=True
                ),
                label="two temperatures",
            )
        )
        sharp, flat = _softmax_call(softmax, logits, low), _softmax_call(softmax, logits, high)
        if bool((flat.max(dim=-1).values > sharp.max(dim=-1).values + 1e-6).any()):
            raise CheckFailure(
                f"`softmax` at temperature {high} gives the winner more than at {low}: a higher "
                "temperature must flatten the verdict (divide the logits by it)."
            )
        uniform = _softmax_call(softmax, logits, 1e4)
        if not torch.allclose(uniform, torch.full_like(uniform, 1.0 / logits.shape[-1]), atol=1e-3):
            raise CheckFailure(
                "`softmax` at temperature 1e4 is not close to uniform: as the temperature grows, "
                "every class should approach 1 / (number of classes)."
            )
        for row in logits.reshape(-1, logits.shape[-1]):  # one score vector at a time
            ordered = row.sort().values
            if float(ordered[-1] - ordered[-2]) > 0.05:
                cold = _softmax_call(softmax, row.clone(), 1e-3)
                onehot = F.one_hot(row.argmax(), row.shape[-1]).to(cold.dtype)
                if not torch.allclose(cold, onehot, atol=LARGE_SCORE_TOL):
                    raise CheckFailure(
                        "`softmax` at temperature 1e-3 is not close to one-hot on the largest "
                        "score: subtract the largest score before exp, so nothing overflows."
                    )

    @given(st.data())
    def large_scores_stay_finite(data):
        offset = data.draw(st.sampled_from([100.0, 1000.0, -1000.0]), label="offset")
        logits = _logits(data, (1.0, 10.0))
        if logits.dim() == 2 and len(logits) > 1:
            # each vector's own largest score, not the batch's (subtracting the batch's maximum
            # leaves a row far below it all zeros): the offset on every other row
            logits = (
                logits + offset * (torch.arange(len(logits)) % 2 == 0).to(logits.dtype)[:, None]
            )
        else:
            logits = logits + offset
        out = _softmax_call(softmax, logits)
        if not torch.allclose(out, torch.softmax(logits, dim=-1), atol=LARGE_SCORE_TOL):
            raise CheckFailure(
                "`softmax` is wrong for scores in the hundreds or thousands (exp overflows): "
                "subtract the largest score before exp; the result does not change."
            )

    for prop in (
        matches_torch,
        positive_sums_to_one_shift_invariant,
        winner_takes_most_never_all,
        temperature_flattens_and_limits,
        large_scores_stay_finite,
    ):
        run_property(prop)


def check_q2(softmax, winner_share, temperature_share) -> None:
    """The softmax by property; the winner's share as the spread widens and the temperature
    rises."""
    check_softmax_function(softmax)
    a = _answers()
    _float_dict("winner_share", winner_share, a["winner_share"])
    _float_dict("temperature_share", temperature_share, a["temperature_share"])


# ---------------------------------------------------------------- q3: cross-entropy


def check_cross_entropy_function(cross_entropy: Callable) -> None:
    """``cross_entropy(probs, y)``: the batch mean of -log probs[i, y_i], by property."""
    expect_callable("cross_entropy", cross_entropy)

    @given(st.data())
    def matches_nll(data):
        n = data.draw(st.integers(1, 6), label="batch")
        c = data.draw(st.integers(2, 10), label="classes")
        gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
        probs = torch.softmax(torch.randn(n, c, generator=gen) * 2, dim=1)
        y = torch.randint(0, c, (n,), generator=gen)
        before = probs.clone()
        shown = f"cross_entropy(probs of shape {(n, c)}, y of shape {(n,)})"
        out = call_student("cross_entropy", cross_entropy, probs, y)
        if changed_in_place(cross_entropy, (probs, before)):
            raise CheckFailure(f"`{shown}` changed probs or y in place.")
        if isinstance(out, torch.Tensor) and out.numel() != 1:
            raise CheckFailure(
                f"`{shown}` returned a tensor of shape {tuple(out.shape)}: return the average "
                "over the batch, a single number."
            )
        value = expect_number(shown, out)
        expected = F.nll_loss(torch.log(probs), y).item()
        if abs(value - expected) > LOSS_TOL + 1e-5 * abs(expected):
            raise CheckFailure(
                f"`{shown}` is not the average of -log of the probability each row places on "
                "its true label y."
            )

    run_property(matches_nll)


def check_q3(cross_entropy, chapter_losses, untrained_loss) -> None:
    """cross_entropy by property; the chapter's four losses; where the untrained network starts."""
    check_cross_entropy_function(cross_entropy)
    ref = _reference()
    losses = expect_sequence("chapter_losses", chapter_losses, len(ref.CHAPTER_PROBABILITIES))
    for i, (value, p) in enumerate(zip(losses, ref.CHAPTER_PROBABILITIES)):
        number = expect_number(f"chapter_losses[{i}]", value)
        if abs(number - (-math.log(p))) > CHAPTER_LOSS_TOL:
            raise CheckFailure(
                f"`chapter_losses[{i}]` is not the loss for a probability of {p} on the truth."
            )
    loss, expected = expect_number("untrained_loss", untrained_loss), _answers()["untrained_loss"]
    # the value, or it as printed: rounded to 3 to 6 decimals (the solution prints 4: 2.2972, 2e-5
    # away)
    if abs(loss - expected) > UNTRAINED_TOL and not any(
        math.isclose(loss, round(expected, d), rel_tol=1e-7) for d in range(3, 7)
    ):
        raise CheckFailure("`untrained_loss` has the right type but the wrong value.")


# ---------------------------------------------------------------- q4: training


def check_q4(
    model, weights, n_parameters, train_losses, train_accuracy, test_accuracy, gap
) -> None:
    """The trained network: its weights, its size, its loss curve, its scores on the 8,000 and the
    2,000, the gap."""
    a = _answers()
    expect_callable("model", model)
    out = call_student("model", model, torch.zeros(2, 1, 28, 28))
    expect_tensor("model(a batch of 2 digits)", out, shape=(2, 10), requires_grad=None)
    expect_defined("weights", weights)
    tensors = weight_tensors(weights)
    if tensors is None:
        raise CheckFailure(
            "`weights` should be `model.state_dict()`: the four tensors of mlp(), shaped "
            "(128, 784), (128,), (10, 128) and (10,)."
        )
    net = _rebuild(tensors)
    if not _agrees(model, net):
        raise CheckFailure(
            "`weights` are not the weights of `model`: store `model.state_dict()` after training."
        )
    expect_int("n_parameters", n_parameters, a["n_parameters"])

    measured = _model_values(net)
    reported = {}
    for name, value, key, what in (
        ("train_accuracy", train_accuracy, "train", "8,000 training digits"),
        ("test_accuracy", test_accuracy, "test", "2,000 test digits"),
    ):
        reported[name] = expect_number(name, value)
        if abs(reported[name] - measured[name]) > REPORTED_TOL[key]:
            raise CheckFailure(f"`{name}` is not the accuracy of `model` on the {what}.")
    if (
        abs(expect_number("gap", gap) - (reported["train_accuracy"] - reported["test_accuracy"]))
        > 1e-6
    ):
        raise CheckFailure("`gap` is not train_accuracy - test_accuracy.")
    for name, band in (
        ("train_accuracy", TRAIN_BAND),
        ("test_accuracy", TEST_BAND),
        ("gap", GAP_BAND),
    ):
        if abs(measured[name] - a[name]) > band:
            raise CheckFailure(
                f"`model`'s {name.replace('_', ' ')} is outside the range this recipe gives; "
                "train on the 8,000 training digits only, with the recipe as given."
            )
    losses = expect_sequence("train_losses", train_losses, len(a["train_losses"]))
    for i, (value, want) in enumerate(zip(losses, a["train_losses"])):
        number = expect_number(f"train_losses[{i}]", value)
        if abs(number - want) > LOSS_BAND * want:
            raise CheckFailure(
                f"`train_losses[{i}]` is far from the loss this recipe gives in epoch {i + 1}: "
                "record the mean of the epoch's batch losses, and check the recipe."
            )
    # the recipe itself (SGD with momentum, test digits added to the training set, weight decay,
    # Nesterov, batches of 30 to 34 land in every band): the weights of one of its two accepted
    # runs, within what another thread count makes of
    # 2,500 SGD steps (RECIPE_WEIGHT_TOL)
    runs = [
        run
        for run in _reference().recipe_runs()
        if relative_distance(tensors, list(run[0].values())) <= RECIPE_WEIGHT_TOL
    ]
    if not runs:
        raise CheckFailure(
            "`model` is not the network the recipe trains: mlp() as given, plain SGD at learning "
            "rate "
            "0.1 (no momentum, no weight decay), nn.CrossEntropyLoss(), 10 epochs over the 8,000 "
            "training digits only, each in the order torch.randperm(8000, generator=order) with "
            "`order` created once, in consecutive batches of 32 (a shuffling DataLoader with "
            "generator=order is accepted too)."
        )
    for i, (value, want) in enumerate(zip(losses, runs[0][1])):
        if abs(float(value) - want) > RECIPE_LOSS_TOL * want:
            raise CheckFailure(
                f"`train_losses[{i}]` is not the mean of the batch losses of epoch {i + 1} of the "
                "training that gave `model`."
            )


# ---------------------------------------------------------------- q5: re-centring


def _candidates(com: float, centre: float) -> list[int]:
    """Whole-pixel moves that put ``com`` within half a pixel (plus COM_TOL) of ``centre``."""
    low, high = centre - com - 0.5 - COM_TOL, centre - com + 0.5 + COM_TOL
    return list(range(math.ceil(low), math.floor(high) + 1))


def _check_recentred(recenter: Callable, image: torch.Tensor, shown: str) -> None:
    ref = _reference()
    before = image.clone()
    out = call_student("recenter", recenter, image)
    if changed_in_place(recenter, (image, before)):
        raise CheckFailure(f"`recenter` changed its input in place ({shown}): return a new tensor.")
    expect_tensor(
        f"recenter({shown})", out, shape=(28, 28), dtype=torch.float32, requires_grad=None
    )
    row, col = ref.centre_of_mass(image)
    out = out.detach()
    for dr in _candidates(row, ref.CENTRE[0]):
        for dc in _candidates(col, ref.CENTRE[1]):
            if torch.equal(out, ref.shift(image, dr, dc)):
                return
    mass = float(image.sum())
    if abs(float(out.sum()) - mass) > 1e-4 * max(1.0, mass):
        raise CheckFailure(
            f"`recenter({shown})` changed the total brightness: move the pixels by whole rows and "
            "columns, without scaling, blurring or wrapping around."
        )
    raise CheckFailure(
        f"`recenter({shown})` is not the digit moved by whole pixels (black filling in) so that "
        "its centre of mass, brightness-weighted, lands within half a pixel of row 14, column 14."
    )


def check_recenter_function(recenter: Callable) -> None:
    """``recenter(image)`` by property: a whole-pixel move putting the centre of mass at (14,
    14)."""
    expect_callable("recenter", recenter)
    ref = _reference()
    test_images = _data()[2]

    @given(st.data())
    def blobs_land_centred(data):
        h = data.draw(st.integers(1, 14), label="ink height")
        w = data.draw(st.integers(1, 14), label="ink width")
        top = data.draw(st.integers(0, 28 - h), label="top")
        left = data.draw(st.integers(0, 28 - w), label="left")
        ink = seeded_images(data.draw, (h, w), lit_fraction=0.7)
        skew = data.draw(st.sampled_from(["none", "rows", "cols"]), label="skew")
        if skew == "rows":
            ink = ink * torch.linspace(0.05, 1.0, h).unsqueeze(1) ** 3
        elif skew == "cols":
            ink = ink * torch.linspace(1.0, 0.05, w) ** 3
        if float(ink.sum()) == 0:
            ink[0, 0] = 1.0
        image = torch.zeros(28, 28)
        image[top : top + h, left : left + w] = ink
        _check_recentred(
            recenter,
            image,
            f"an image with ink in rows {top}..{top + h - 1}, columns {left}..{left + w - 1}",
        )

    @given(st.data())
    def moved_digits_come_back(data):
        i = data.draw(st.integers(0, 39), label="test digit")
        dr = data.draw(st.integers(-6, 6), label="rows moved")
        dc = data.draw(st.integers(-6, 6), label="columns moved")
        image = ref.shift(test_images[i, 0], dr, dc)
        _check_recentred(recenter, image, f"test digit {i} moved {dr} rows and {dc} columns")

    run_property(blobs_land_centred)
    run_property(moved_digits_come_back)

    # A heavy dot at the left edge and a faint stroke to the right edge: the
    # centre of mass is near column 3, so the move right pushes the end of the
    # stroke out of the field, where it is lost (torch.roll would wrap it around).
    image = torch.zeros(28, 28)
    image[12:16, 0:2] = 1.0
    image[13, 2:] = 0.05
    shown = "a heavy dot at the left edge with a faint stroke to the right edge"
    out = call_student("recenter", recenter, image.clone())
    if isinstance(out, torch.Tensor) and tuple(out.shape) == (28, 28):
        row, col = ref.centre_of_mass(image)
        rolled = [
            torch.roll(image, (dr, dc), (0, 1))
            for dr in _candidates(row, ref.CENTRE[0])
            for dc in _candidates(col, ref.CENTRE[1])
        ]
        if any(torch.equal(out.detach(), r) for r in rolled):
            raise CheckFailure(
                f"`recenter({shown})` wraps the ink pushed past the right edge around to the left "
                "(torch.roll): fill in black, and let ink that leaves the field go."
            )
    _check_recentred(recenter, image, shown)


def check_q5(recenter, corner_accuracy, recentred_accuracy, model, weights) -> None:
    """recenter by property; the model's accuracy on digits in the corner, before and after
    re-centring."""
    check_recenter_function(recenter)
    values = _model_values(_graded_net(model, weights))
    expect_number(
        "corner_accuracy", corner_accuracy, values["corner_accuracy"], abs_tol=REPORTED_TOL["test"]
    )
    expect_number(
        "recentred_accuracy",
        recentred_accuracy,
        values["recentred_accuracy"],
        abs_tol=RECENTRED_TOL,
    )


# ---------------------------------------------------------------- q6: saliency


def _saliency_digits(net: nn.Module) -> list[int]:
    """Test digits 0 to 3 and the first two the network misreads (where winner and truth differ)."""
    _, _, images, labels = _data()
    with torch.no_grad():
        wrong = (net(images).argmax(dim=1) != labels).nonzero().flatten()[:2].tolist()
    return [0, 1, 2, 3] + wrong


def check_saliency_function(saliency: Callable, model: Any, net: nn.Module) -> None:
    """``saliency(model, image)`` against autograd on ``net`` (``model``'s copy), digits read right
    and wrong."""
    expect_callable("saliency", saliency)
    ref = _reference()
    _, _, images, _ = _data()
    for i in _saliency_digits(net):
        image = images[i].clone()
        shown = f"saliency(model, test digit {i})"
        out = call_student("saliency", saliency, model, image)
        if changed_in_place(saliency, (image, images[i])):
            raise CheckFailure(f"`{shown}` changed the image in place.")
        expect_tensor(shown, out, shape=(28, 28), dtype=torch.float32, requires_grad=None)
        expected = ref.saliency(net, images[i])
        if not torch.allclose(out.detach(), expected, atol=GRADIENT_ATOL, rtol=GRADIENT_RTOL):
            raise CheckFailure(
                f"`{shown}` is not the gradient of the winning score (the largest logit) with "
                "respect to the pixels (not of the loss, a probability, or the true label's score)."
            )


def check_q6(saliency, evidence, evidence_class, model, weights, mlp) -> None:
    """saliency against autograd; the evidence square for test digit 0 and the class it supports."""
    handle, net, _ = _property_model(model, weights, mlp)
    check_saliency_function(saliency, handle, net)
    values = _model_values(_graded_net(model, weights))
    expect_tensor("evidence", evidence, shape=(28, 28), dtype=torch.float32, requires_grad=None)
    expect_close(
        "evidence", evidence.detach(), values["evidence"], rtol=GRADIENT_RTOL, atol=GRADIENT_ATOL
    )
    expect_int("evidence_class", evidence_class, values["evidence_class"])


# ---------------------------------------------------------------- q7: opening the box


def check_q7(units, drivers, confusion, most_confused, model, weights) -> None:
    """The first layer's 128 units as images, the digits that drive each score, the confusion
    matrix."""
    values = _model_values(_graded_net(model, weights))
    expect_tensor(
        "units", units, shape=tuple(values["units"].shape), dtype=torch.float32, requires_grad=None
    )
    if not torch.equal(units.detach(), values["units"]):
        raise CheckFailure(
            "`units` has the right shape, but unit k is not row k of the first layer's weight "
            "laid out as a 28 by 28 image (row by row)."
        )
    expect_tensor("drivers", drivers, shape=(10, 28, 28), dtype=torch.float32, requires_grad=None)
    expect_close("drivers", drivers.detach(), values["drivers"], rtol=0, atol=DRIVER_TOL)
    expect_tensor("confusion", confusion, shape=(10, 10), finite=False, requires_grad=None)
    if confusion.is_floating_point() or confusion.dtype == torch.bool:
        raise CheckFailure(
            f"`confusion` has dtype {confusion.dtype}, but it should hold integer counts."
        )
    expected = values["confusion"]
    if not torch.equal(confusion.long(), expected):
        if torch.equal(confusion.long().T, expected):
            raise CheckFailure(
                "`confusion` is transposed: row = true digit, column = predicted digit."
            )
        raise CheckFailure("`confusion` has the right shape, but the wrong counts.")
    pairs = expect_sequence("most_confused", most_confused, 3)
    off = expected.clone()
    off.fill_diagonal_(-1)
    top = sorted(off.flatten().tolist(), reverse=True)[:3]
    seen = set()
    counts = []
    for i, pair in enumerate(pairs):
        true, predicted = _int_pair(f"most_confused[{i}]", pair)
        if (
            not (0 <= true <= 9 and 0 <= predicted <= 9)
            or true == predicted
            or (true, predicted) in seen
        ):
            raise CheckFailure(
                f"`most_confused[{i}]` should be a (true, predicted) pair of two different digits, "
                "each pair once."
            )
        seen.add((true, predicted))
        counts.append(int(expected[true, predicted]))
    if counts != top:
        raise CheckFailure(
            "`most_confused` does not list the three (true, predicted) pairs with the largest "
            "counts "
            "off the diagonal, largest first."
        )


# ---------------------------------------------------------------- q8: adversarial examples


def _check_step(out: torch.Tensor, image: torch.Tensor, epsilon: float, shown: str) -> None:
    if bool(((out < 0) | (out > 1)).any()):
        raise CheckFailure(f"`{shown}` has pixels outside [0, 1]: clamp the stepped image.")
    if bool(((out - image).abs() > epsilon + STEP_TOL).any()):
        raise CheckFailure(f"`{shown}` changes a pixel by more than epsilon.")
    up = (image + epsilon).clamp(0, 1)
    down = (image - epsilon).clamp(0, 1)
    ok = (
        ((out - up).abs() <= STEP_TOL)
        | ((out - down).abs() <= STEP_TOL)
        | ((out - image).abs() <= STEP_TOL)
    )
    if not bool(ok.all()):
        raise CheckFailure(
            f"`{shown}`: every pixel should move by exactly epsilon, up or down (then be clamped "
            "to [0, 1]): step along the *sign* of the gradient."
        )


def check_fgsm_function(fgsm: Callable, model: Any, net: nn.Module, trained: bool) -> None:
    """``fgsm(model, image, label, epsilon)`` by property; ``net`` is ``model``'s copy here.

    On random images: shape, pixels in [0, 1], every pixel moved by exactly
    epsilon up or down (then clamped). On the first 100 test digits ``net``
    reads right with probability above 0.9 (when ``trained``): the same steps,
    the pixels moved the reference's way, and the verdict flipped on most of
    them whenever the reference step flips most. On the same digits given
    the next label (``(label + 1) % 10``): the pixels moved the reference's
    way too, so the step follows the ``label`` it is given (on a confident
    digit the true label is the predicted class, so an ``fgsm`` attacking
    the prediction would pass the rest).
    """
    expect_callable("fgsm", fgsm)
    ref = _reference()
    _, _, images, labels = _data()

    @given(st.data())
    def bounded_signed_steps(data):
        image = seeded_images(
            data.draw, (1, 28, 28), lit_fraction=data.draw(st.sampled_from([0.2, 0.6]))
        )
        label = data.draw(st.integers(0, 9), label="label")
        epsilon = data.draw(st.sampled_from([0.01, 0.05, 0.15, 0.3]), label="epsilon")
        before = image.clone()
        shown = f"fgsm(model, image, {label}, {epsilon})"
        out = call_student("fgsm", fgsm, model, image, label, epsilon)
        if changed_in_place(fgsm, (image, before)):
            raise CheckFailure(f"`{shown}` changed the image in place.")
        out = expect_tensor(
            shown, out, shape=(1, 28, 28), dtype=torch.float32, requires_grad=None
        ).detach()
        _check_step(out, image, epsilon, shown)

    run_property(bounded_signed_steps)

    digits = ref.confident_digits(net, images, labels) if trained else torch.arange(20)
    flips, reference_flips, agree, moved = 0, 0, 0, 0
    other_agree, other_moved = 0, 0  # the same digits, given the next label
    for i in digits.tolist():
        for label in (int(labels[i]), (int(labels[i]) + 1) % 10):
            shown = f"fgsm(model, test digit {i}, {label}, {ref.EPSILON})"
            out = call_student("fgsm", fgsm, model, images[i].clone(), label, ref.EPSILON)
            out = expect_tensor(
                shown, out, shape=(1, 28, 28), dtype=torch.float32, requires_grad=None
            ).detach()
            _check_step(out, images[i], ref.EPSILON, shown)
            expected = ref.fgsm(net, images[i], label, ref.EPSILON)
            changed = (expected - images[i]).abs() > STEP_TOL
            same_way = int(((out - expected).abs() <= STEP_TOL)[changed].sum())
            if label != int(labels[i]):
                other_agree, other_moved = other_agree + same_way, other_moved + int(changed.sum())
                continue
            moved, agree = moved + int(changed.sum()), agree + same_way
            with torch.no_grad():
                flips += int(net(out.unsqueeze(0)).argmax()) != int(labels[i])
                reference_flips += int(net(expected.unsqueeze(0)).argmax()) != int(labels[i])
    if moved and agree < SIGN_AGREEMENT * moved:
        raise CheckFailure(
            "`fgsm` steps many pixels the other way: step along the sign of the gradient of the "
            "loss (cross-entropy against the true label), which *raises* the loss."
        )
    if other_moved and other_agree < SIGN_AGREEMENT * other_moved:
        raise CheckFailure(
            "`fgsm` given another label than the digit's steps many pixels the other way: the step "
            "must follow the gradient of the loss against the `label` it is given, not against the "
            "class the model predicts."
        )
    if trained and reference_flips > MOST * len(digits) and flips <= MOST * len(digits):
        raise CheckFailure(
            f"`fgsm` at epsilon {ref.EPSILON} flips the verdict on {flips} of {len(digits)} "
            "confidently right test digits, not most of them: step so as to raise the loss."
        )


def check_q8(fgsm, confident, flip_rate, adversarial_l2, model, weights, mlp) -> None:
    """fgsm by property; on the student's model: the confident digits, how many flip, how far they
    moved."""
    handle, net, trained = _property_model(model, weights, mlp)
    check_fgsm_function(fgsm, handle, net, trained)
    values = _model_values(_graded_net(model, weights))
    expect_tensor("confident", confident, finite=False, requires_grad=None)
    if confident.is_floating_point() or confident.dtype == torch.bool:
        raise CheckFailure(
            f"`confident` has dtype {confident.dtype}, but it should hold test-set indices (int64)."
        )
    # the count first: .long() of a uint8 tensor of 256 MB would be 2 GB
    if confident.numel() != values["confident"].numel() or not torch.equal(
        confident.long().flatten(), values["confident"]
    ):
        raise CheckFailure(
            "`confident` is not the indices of the first 100 test digits the model reads right "
            "with probability above 0.9, in test-set order."
        )
    expect_number("flip_rate", flip_rate, values["flip_rate"], abs_tol=FLIP_TOL)
    expect_number("adversarial_l2", adversarial_l2, values["adversarial_l2"], abs_tol=L2_TOL)
