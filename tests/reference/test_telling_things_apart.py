"""The reference of ``telling_things_apart`` against the chapter "Telling Things Apart".

Three kinds of assertion:

- *chapter*: the chapter prints the number and it depends on no trained
  weight (the split's sizes, pixels 215 and 243, the list "0.00, 0.00, 0.31,
  0.89, 0.94", the four losses, the hundred thousand parameters). The
  reference must reproduce the literal.
- *training-dependent*: the chapter gives no number, only claims ("the gap
  stays small", "the training loss nearly cannot help falling", "the verdict
  flips, often to a confident wrong answer"). Each is asserted as the claim,
  or as a band whose reason is written beside it.
- the student functions and the checks: the reference functions pass every
  check, and the classic mistakes fail it (checks called directly, without
  the grader).

``answers()`` is cached per process, so the model is trained once for this module.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.checks import CheckFailure
from autograder.checks import telling_things_apart as checks
from autograder.facts import answer_rows
from reference import telling_things_apart as ref

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "assignments" / "telling_things_apart" / "questions.yaml"
STUDENT_FUNCTIONS = {"softmax", "cross_entropy", "recenter", "saliency", "fgsm", "model", "weights"}
PROPERTY = settings(max_examples=40, derandomize=True, deadline=None, database=None)


@functools.cache
def _test_images() -> torch.Tensor:
    return ref.load_split()[2]


@pytest.fixture(scope="module")
def answers() -> dict:
    return ref.answers()


@pytest.fixture(scope="module")
def split():
    """(train_images, train_labels, test_images, test_labels)."""
    return ref.load_split()


@pytest.fixture(scope="module")
def model():
    return ref.reference_model()


@pytest.fixture(scope="module")
def digits_module():
    """The support module shipped to students, ``assignments/telling_things_apart/digits.py``."""
    path = ROOT / "assignments" / "telling_things_apart" / "digits.py"
    spec = importlib.util.spec_from_file_location("tta_digits", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------


def contract_names() -> set[str]:
    """Every name of the answers rows the declaration gives (CONTRACT, the tables of
    assignments/telling_things_apart/answers.md)."""
    return {name for names, _ in answer_rows("telling_things_apart") for name in names}


def test_contract_lists_every_answer_and_nothing_else(answers):
    documented = contract_names() - STUDENT_FUNCTIONS
    computed = set(answers) - {"scores", "chapter_hits"}
    assert documented == computed, (
        f"only in the doc: {documented - computed}; only in answers(): {computed - documented}"
    )


# ---------------------------------------------------------------------------
# Chapter numbers, reproduced exactly
# ---------------------------------------------------------------------------


def test_ten_thousand_digits_split_eight_thousand_two_thousand(answers, split):
    # "Of the ten thousand digits below, 8,000 form the training set ... and 2,000 form the test
    # set"
    assert (answers["n_train"], answers["n_test"]) == (8000, 2000)
    train_images, train_labels, test_images, test_labels = split
    assert train_images.shape == (8000, 1, 28, 28) and test_images.shape == (2000, 1, 28, 28)
    assert answers["test_counts"].tolist() == [200, 225, 198, 206, 196, 173, 203, 214, 189, 196]
    assert int(answers["test_counts"].sum()) == 2000


def test_pixel_215_sits_directly_above_pixel_243(answers):
    # "It is not told that pixel 215 sits directly above pixel 243"
    (r1, c1), (r2, c2) = answers["pixel_215"], answers["pixel_243"]
    assert (r1, c1) == (7, 19) and (r2, c2) == (8, 19), "same column, the next row down"


def test_points_are_the_digits_read_row_by_row(answers, split):
    # "Read the grid row by row and the picture becomes a list of 784 brightnesses"
    points, images = answers["points"], split[0]
    assert points.shape == (8000, 784)
    assert torch.equal(points[17, 28 * 11 + 5 : 28 * 11 + 9], images[17, 0, 11, 5:9])


def test_the_chapters_list_of_brightnesses_is_one_training_seven(answers, split):
    # "It receives a list: 0.00, 0.00, 0.31, 0.89, 0.94, ..." -- and "You see a 7"
    assert answers["chapter_hits"] == [(6218, 513)], "exactly one place in the 8,000 lists"
    index, label, position = answers["chapter_digit"]
    assert (index, label, position) == (6218, 7, 513)
    values = answers["points"][index, position : position + 5]
    # printed to two decimals: the stored values are 0, 0, 0.306, 0.89, 0.945 (0.945 in float32
    # is 0.94499999, which rounds to the printed 0.94)
    assert [f"{v:.2f}" for v in values.tolist()] == ["0.00", "0.00", "0.31", "0.89", "0.94"]


def test_the_list_is_found_nowhere_when_the_grid_is_read_by_columns(split):
    columns = split[0].transpose(2, 3).reshape(8000, 784)
    assert ref.find_chapter_list(columns) == [], (
        "reading column by column must not find the chapter's list"
    )


def test_the_four_losses_the_chapter_prints(answers):
    # "-log 0.1 ~ 2.30; a tepid but correct 0.6 costs 0.51; a confident 0.99 costs 0.01; ... 0.01
    # costs 4.61"
    assert [round(v, 2) for v in answers["chapter_losses"]] == list(ref.CHAPTER_LOSSES)
    for value, p in zip(answers["chapter_losses"], ref.CHAPTER_PROBABILITIES):
        assert value == pytest.approx(-math.log(p), abs=1e-6)


def test_a_hundred_thousand_parameters(answers):
    # "A network with a hundred thousand parameters can memorize thousands of examples"
    assert answers["n_parameters"] == ref.N_PARAMETERS == 784 * 128 + 128 + 128 * 10 + 10 == 101_770


def test_the_untrained_network_starts_near_one_part_in_ten(answers):
    # "One part in ten, which is where an untrained model spreading its belief evenly ... starts,
    # costs -log 0.1 ~ 2.30". Measured 2.2972: the seeded initial logits are small but not zero.
    assert abs(answers["untrained_loss"] - math.log(10)) < 0.02


def test_every_digit_has_its_centre_of_mass_within_half_a_pixel_of_14_14():
    # "MNIST digits are centered by their center of mass": the reason CENTRE is (14, 14).
    from autograder.mnist_data import MNISTDigits

    images = MNISTDigits().data[:, 0].double()
    positions = torch.arange(28, dtype=torch.float64)
    mass = images.sum((1, 2))
    rows = (images.sum(2) * positions).sum(1) / mass
    cols = (images.sum(1) * positions).sum(1) / mass
    # 0.5 plus the package's three-decimal rounding of the grey levels (largest excess measured:
    # 1.2e-4)
    assert float((rows - 14).abs().max()) <= 0.5 + 2e-4
    assert float((cols - 14).abs().max()) <= 0.5 + 2e-4


# ---------------------------------------------------------------------------
# The softmax and cross-entropy, as the chapter describes them
# ---------------------------------------------------------------------------


@PROPERTY
@given(
    st.integers(0, 2**31 - 1), st.sampled_from([0.25, 1.0, 3.0]), st.sampled_from([0.5, 1.0, 2.0])
)
def test_softmax_matches_torch_and_the_chapters_properties(seed, spread, temperature):
    logits = torch.randn(3, 10, generator=torch.Generator().manual_seed(seed)) * spread
    probs = ref.softmax(logits, temperature)
    assert torch.allclose(probs, torch.softmax(logits / temperature, dim=-1), atol=1e-6)
    assert bool((probs > 0).all()) and torch.allclose(probs.sum(-1), torch.ones(3))
    assert torch.allclose(ref.softmax(logits + 7.0, temperature), probs, atol=1e-6)
    assert bool((probs.max(-1).values < 1).all()), "the biggest score takes most -- never all"


def test_wider_spread_and_lower_temperature_let_the_winner_run_away(answers):
    # "widen the spread sigma and the winner runs away with it"
    shares = [answers["winner_share"][s] for s in ref.SPREADS]
    assert shares == sorted(shares) and shares[-1] > 0.9
    # "dividing the logits by a temperature ... sharpens or flattens the verdict"
    cooled = [answers["temperature_share"][t] for t in ref.TEMPERATURES]
    assert cooled == sorted(cooled, reverse=True) and cooled[-1] < 0.15
    assert answers["temperature_share"][2.0] == pytest.approx(
        answers["winner_share"][0.5], abs=1e-6
    )


def test_softmax_survives_scores_in_the_thousands():
    logits = torch.tensor([[1000.0, 999.0, -1000.0]])
    assert torch.allclose(ref.softmax(logits), torch.softmax(logits, dim=-1))


def test_cross_entropy_of_softmax_is_torchs_cross_entropy(split):
    logits = torch.randn(32, 10, generator=torch.Generator().manual_seed(3)) * 3
    labels = split[1][:32]
    assert ref.cross_entropy(ref.softmax(logits), labels).item() == pytest.approx(
        F.cross_entropy(logits, labels).item(), abs=1e-5
    )


# ---------------------------------------------------------------------------
# Training and the test set (training-dependent: claims and bands)
# ---------------------------------------------------------------------------


def test_training_is_deterministic(answers, split):
    # a second run of the recipe gives the same losses and weights, bit for bit
    again = ref.mlp()
    previous = torch.get_num_threads()
    torch.set_num_threads(ref.THREADS)
    try:
        losses = ref.train(again, split[0], split[1])
    finally:
        torch.set_num_threads(previous)
    assert losses == answers["train_losses"]
    assert all(
        torch.equal(a, b) for a, b in zip(again.parameters(), ref.reference_model().parameters())
    )


def test_the_training_loss_nearly_cannot_help_falling(answers):
    # "The training loss nearly cannot help falling": every epoch's mean below the one before.
    losses = answers["train_losses"]
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < losses[0] / 5


def test_the_gap_stays_small_and_only_the_test_number_is_about_handwriting(answers):
    # "Here that gap stays small": measured 0.9739 / 0.9435, gap 0.0304. Over shuffle seeds 0..7
    # the test accuracy spans 0.9375-0.9435 and the gap 0.030-0.041; these bounds are twice that.
    assert 0.93 <= answers["test_accuracy"] <= 0.96
    assert answers["train_accuracy"] > answers["test_accuracy"]
    assert 0.01 <= answers["gap"] <= 0.06
    assert answers["gap"] == pytest.approx(answers["train_accuracy"] - answers["test_accuracy"])


def test_a_digit_hiding_in_a_corner_fails_and_recentring_rescues_it(answers):
    # "without that shift it would fail for reasons that have nothing to do with shape"
    assert answers["corner_accuracy"] < 0.2
    # re-centring brings most of it back; ink cut off by the move to the corner stays lost
    assert answers["recentred_accuracy"] > 0.85
    assert answers["recentred_accuracy"] < answers["test_accuracy"]


# ---------------------------------------------------------------------------
# The student functions
# ---------------------------------------------------------------------------


@PROPERTY
@given(st.integers(0, 1999), st.integers(-6, 6), st.integers(-6, 6))
def test_recenter_puts_the_centre_of_mass_at_14_14(i, dr, dc):
    image = ref.shift(_test_images()[i, 0], dr, dc)
    out = ref.recenter(image)
    if torch.isclose(out.sum(), image.sum()):  # nothing was pushed out of the field
        row, col = ref.centre_of_mass(out)
        assert abs(row - 14) <= 0.5 + 1e-6 and abs(col - 14) <= 0.5 + 1e-6


def test_saliency_is_the_winning_scores_gradient(model, split):
    image = split[2][5]
    grad = ref.saliency(model, image)
    x = image.unsqueeze(0).clone().requires_grad_(True)
    logits = model(x)
    logits[0, logits.argmax()].backward()
    assert torch.equal(grad, x.grad[0, 0])
    # "brighten this pixel a little, and the score for the model's answer goes up by this much":
    # the network is piecewise linear, so a step of 1e-3 stays on one linear piece for most pixels
    winner = int(logits.argmax())
    flat = grad.flatten()
    for pixel in flat.abs().topk(5).indices.tolist():
        bright = image.clone().flatten()
        bright[pixel] += 1e-3
        with torch.no_grad():
            change = (
                model(bright.view(1, 1, 28, 28))[0, winner] - model(image.unsqueeze(0))[0, winner]
            ).item()
        assert change == pytest.approx(1e-3 * flat[pixel].item(), rel=0.05, abs=2e-6)


def test_fgsm_flips_most_confident_digits_often_to_a_confident_wrong_answer(answers, model, split):
    _, _, images, labels = split
    confident = answers["confident"]
    assert len(confident) == ref.N_CONFIDENT
    flipped, confidently_wrong = 0, 0
    for i in confident.tolist():
        adversarial = ref.fgsm(model, images[i], int(labels[i]), ref.EPSILON)
        assert float((adversarial - images[i]).abs().max()) <= ref.EPSILON + 1e-6
        assert float(adversarial.min()) >= 0 and float(adversarial.max()) <= 1
        with torch.no_grad():
            probs = torch.softmax(model(adversarial.unsqueeze(0)), dim=1)[0]
        if int(probs.argmax()) != int(labels[i]):
            flipped += 1
            confidently_wrong += float(probs.max()) > 0.5
    assert flipped / len(confident) == answers["flip_rate"] > 0.5, "the verdict flips on most"
    assert confidently_wrong > flipped / 2, "often to a confident wrong answer"
    # "a nudge too small to see in any single pixel is a large step overall"
    assert answers["adversarial_l2"] > 20 * ref.EPSILON


def test_opening_the_box(answers, model):
    weight = model[1].weight.detach()
    assert torch.equal(answers["units"], weight.reshape(128, 28, 28))
    assert torch.equal(answers["units"][3].flatten(), weight[3]), (
        "unit 3 is row 3 of the weight, row by row"
    )
    confusion = answers["confusion"]
    assert int(confusion.sum()) == 2000
    assert int(confusion.diagonal().sum()) == round(answers["test_accuracy"] * 2000)
    # the digits that drive score d hardest look like a d: each average is closest to its own class
    # mean
    _, _, images, labels = ref.load_split()
    means = torch.stack([images[labels == d, 0].mean(0) for d in range(10)])
    nearest = [int(((means - answers["drivers"][d]) ** 2).sum((1, 2)).argmin()) for d in range(10)]
    assert nearest == list(range(10))
    for true, predicted in answers["most_confused"]:
        assert true != predicted and int(confusion[true, predicted]) >= 5


# ---------------------------------------------------------------------------
# The support module shipped to students
# ---------------------------------------------------------------------------


def test_digits_module_serves_the_reference_split(digits_module, split):
    assert torch.equal(digits_module.train_images, split[0]) and torch.equal(
        digits_module.train_labels, split[1]
    )
    assert torch.equal(digits_module.test_images, split[2]) and torch.equal(
        digits_module.test_labels, split[3]
    )
    assert len(digits_module.train_set) == 8000 and len(digits_module.test_set) == 2000
    image, label = digits_module.test_set[0]
    assert torch.equal(image, split[2][0]) and label == int(split[3][0])


@pytest.mark.parametrize("rows, cols", [(0, 0), (3, -2), (-6, -6), (27, 0), (-28, 5), (5, 30)])
def test_digits_shift_is_the_reference_shift(digits_module, split, rows, cols):
    images = split[2][:4]
    assert torch.equal(digits_module.shift(images, rows, cols), ref.shift(images, rows, cols))


def test_digits_mlp_and_accuracy_are_the_references(digits_module, model, split):
    with torch.random.fork_rng(devices=[]):
        a, b = digits_module.mlp(), ref.mlp()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert digits_module.accuracy(model, split[2], split[3]) == ref.accuracy(
        model, split[2], split[3]
    )


# ---------------------------------------------------------------------------
# The checks: the reference passes, the classic mistakes fail
# ---------------------------------------------------------------------------


def test_reference_answers_pass_every_check(answers, model):
    a, w = answers, model.state_dict()
    checks.check_q1(
        a["n_train"],
        a["n_test"],
        a["test_counts"],
        a["pixel_215"],
        a["pixel_243"],
        a["points"],
        a["chapter_digit"],
    )
    checks.check_q2(ref.softmax, a["winner_share"], a["temperature_share"])
    checks.check_q3(ref.cross_entropy, a["chapter_losses"], a["untrained_loss"])
    checks.check_q4(
        model,
        w,
        a["n_parameters"],
        a["train_losses"],
        a["train_accuracy"],
        a["test_accuracy"],
        a["gap"],
    )
    checks.check_q5(ref.recenter, a["corner_accuracy"], a["recentred_accuracy"], model, w)
    checks.check_q6(ref.saliency, a["evidence"], a["evidence_class"], model, w, ref.mlp)
    checks.check_q7(a["units"], a["drivers"], a["confusion"], a["most_confused"], model, w)
    checks.check_q8(
        ref.fgsm, a["confident"], a["flip_rate"], a["adversarial_l2"], model, w, ref.mlp
    )


def test_untrained_loss_with_the_test_digits_in_fails(answers, split):
    # The untrained loss over all 10,000 digits is 3.6e-5 from the 8,000's, which a tolerance of
    # 1e-4 would pass; the honest ways agree within 1.3e-6 (UNTRAINED_TOL's comment).
    with torch.random.fork_rng(devices=[]):
        untrained = ref.mlp()
    with torch.no_grad():
        every_digit = ref.cross_entropy(
            ref.softmax(untrained(torch.cat([split[0], split[2]]))), torch.cat([split[1], split[3]])
        ).item()
        one_at_a_time = torch.zeros(())
        for p, y in zip(ref.softmax(untrained(split[0])), split[1]):
            one_at_a_time = one_at_a_time - torch.log(p[y])
    assert 2e-5 < abs(every_digit - answers["untrained_loss"]) < 1e-4
    checks.check_q3(
        ref.cross_entropy, answers["chapter_losses"], one_at_a_time.item() / len(split[1])
    )
    # as printed
    checks.check_q3(
        ref.cross_entropy, answers["chapter_losses"], round(answers["untrained_loss"], 4)
    )
    with pytest.raises(
        CheckFailure, match=r"^`untrained_loss` has the right type but the wrong value\.$"
    ):
        checks.check_q3(ref.cross_entropy, answers["chapter_losses"], every_digit)


def test_shares_rounded_as_printed_pass_and_shares_off_by_more_fail(answers):
    # The solution prints the shares to 4 decimals (0.6425 for 0.64252...: 2.5e-5 away, beyond
    # SHARE_TOL); a student who stores them as printed, to 3 to 6 decimals, is right. Off by 1e-3
    # more is not rounding.
    for digits in (3, 4, 6):
        rounded = {
            name: {k: round(v, digits) for k, v in answers[name].items()}
            for name in ("winner_share", "temperature_share")
        }
        checks.check_q2(ref.softmax, rounded["winner_share"], rounded["temperature_share"])
    assert any(
        abs(round(v, 4) - v) > checks.SHARE_TOL for v in answers["temperature_share"].values()
    )
    off = {k: round(v, 4) + 1e-3 for k, v in answers["temperature_share"].items()}
    with pytest.raises(
        CheckFailure, match=r"^`temperature_share\[0\.5\]` has the right type but the wrong value"
    ):
        checks.check_q2(ref.softmax, answers["winner_share"], off)


def _softmax_global_max(logits, temperature=1.0):
    scaled = logits / temperature
    exps = torch.exp(scaled - scaled.max())
    return exps / exps.sum(-1, keepdim=True)


def _softmax_logsumexp(logits, temperature=1.0):
    scaled = logits / temperature
    return torch.exp(scaled - torch.logsumexp(scaled, dim=-1, keepdim=True))


@pytest.mark.parametrize("alternative", [_softmax_logsumexp], ids=["logsumexp"])
def test_other_stable_softmaxes_pass(alternative):
    # exp(z - logsumexp(z)) is correct, a few float32 spacings off for scores in the thousands
    checks.check_softmax_function(alternative)


def test_a_softmax_subtracting_the_batchs_largest_score_fails():
    """Subtracting the batch's largest score instead of each vector's (as the question asks) fails:
    right for a batch of similar scores, it underflows to 0 / 0 for a row a thousand below the
    batch's largest score."""
    with pytest.raises(CheckFailure, match="scores in the hundreds or thousands"):
        checks.check_softmax_function(_softmax_global_max)


WRONG_SOFTMAX = {
    "over dim 0": lambda x, temperature=1.0: torch.softmax(x / temperature, dim=0),
    "overflows": lambda x, temperature=1.0: (
        torch.exp(x / temperature) / torch.exp(x / temperature).sum(-1, keepdim=True)
    ),
    "temperature multiplied": lambda x, temperature=1.0: torch.softmax(x * temperature, dim=-1),
    # the last axis of (C,) and (N, C) only
    "over dim 1 for any batch": lambda x, temperature=1.0: torch.softmax(
        x / temperature, dim=1 if x.dim() > 1 else 0
    ),
}


@pytest.mark.parametrize("wrong", WRONG_SOFTMAX.values(), ids=WRONG_SOFTMAX.keys())
def test_softmax_mistakes_fail(wrong):
    with pytest.raises(CheckFailure, match="softmax"):
        checks.check_softmax_function(wrong)


def test_cross_entropy_of_the_tallest_bar_fails():
    with pytest.raises(CheckFailure, match="cross_entropy"):
        checks.check_cross_entropy_function(lambda p, y: -torch.log(p.max(dim=1).values).mean())


def _bounding_box(image):
    ink = image.nonzero()
    rows, cols = ink[:, 0], ink[:, 1]
    return ref.shift(
        image,
        round(14 - (rows.min() + rows.max()).item() / 2),
        round(14 - (cols.min() + cols.max()).item() / 2),
    )


def _rolled(image):
    row, col = ref.centre_of_mass(image)
    return torch.roll(image, (round(14 - row), round(14 - col)), (0, 1))


def _centre_13_5(image):
    row, col = ref.centre_of_mass(image)
    return ref.shift(image, round(13.5 - row), round(13.5 - col))


@pytest.mark.parametrize(
    "wrong, named",
    [
        (_bounding_box, "centre of mass"),
        (_rolled, "torch.roll"),
        (_centre_13_5, "row 14, column 14"),
    ],
)
def test_recenter_mistakes_fail(wrong, named):
    with pytest.raises(CheckFailure, match=named):
        checks.check_recenter_function(wrong)


def _saliency_of_loss(model, image):
    x = image.clone().unsqueeze(0).requires_grad_(True)
    logits = model(x)
    F.cross_entropy(logits, logits.argmax(1)).backward()
    return x.grad.reshape(28, 28)


def _saliency_of_truth(model, image):
    """The true label's score: right for digits the model reads right, wrong for the others."""
    images, labels = _test_images(), ref.load_split()[3]
    label = int(labels[(images == image).flatten(1).all(1)].flatten()[0])
    x = image.clone().unsqueeze(0).requires_grad_(True)
    model(x)[0, label].backward()
    return x.grad.reshape(28, 28)


@pytest.mark.parametrize(
    "wrong", [_saliency_of_loss, _saliency_of_truth], ids=["loss", "true label"]
)
def test_saliency_mistakes_fail(wrong, model):
    with pytest.raises(CheckFailure, match="winning score"):
        checks.check_saliency_function(wrong, model, model)


def _fgsm(step):
    def fgsm(model, image, label, epsilon):
        x = image.clone().unsqueeze(0).requires_grad_(True)
        F.cross_entropy(model(x), torch.tensor([label])).backward()
        return step(x.detach(), x.grad, epsilon)[0]

    return fgsm


def _fgsm_against_the_prediction(model, image, label, epsilon):
    x = image.clone().unsqueeze(0).requires_grad_(True)
    logits = model(x)
    F.cross_entropy(logits, logits.argmax(1)).backward()
    return (x.detach() + epsilon * x.grad.sign()).clamp(0, 1)[0]


WRONG_FGSM = {
    "no sign": (_fgsm(lambda x, g, e: (x + e * g).clamp(0, 1)), "sign"),
    "no clamp": (_fgsm(lambda x, g, e: x + e * g.sign()), r"\[0, 1\]"),
    "downhill": (_fgsm(lambda x, g, e: (x - e * g.sign()).clamp(0, 1)), "other way"),
    # the loss against the predicted class, `label` ignored
    "prediction for label": (
        _fgsm_against_the_prediction,
        "not against the class the model predicts",
    ),
}


@pytest.mark.parametrize("wrong, named", WRONG_FGSM.values(), ids=WRONG_FGSM.keys())
def test_fgsm_mistakes_fail(wrong, named, model):
    with pytest.raises(CheckFailure, match=named):
        checks.check_fgsm_function(wrong, model, model, True)


def test_training_on_the_test_digits_fails_q4(answers, split):
    leaky = ref.mlp()
    previous = torch.get_num_threads()
    torch.set_num_threads(ref.THREADS)
    try:
        losses = ref.train(leaky, torch.cat([split[0], split[2]]), torch.cat([split[1], split[3]]))
    finally:
        torch.set_num_threads(previous)
    train, test = ref.accuracy(leaky, split[0], split[1]), ref.accuracy(leaky, split[2], split[3])
    with pytest.raises(CheckFailure, match="test accuracy") as failure:
        checks.check_q4(leaky, leaky.state_dict(), 101770, losses, train, test, train - test)
    assert f"{answers['test_accuracy']:.3f}" not in str(failure.value), (
        "the message must not show the expected value"
    )


def _trained_otherwise(split, kind: str, threads: int = 1):
    """``mlp()`` trained by the recipe with one change: ``"recipe"`` (none), ``"loader"`` (a
    shuffling DataLoader with generator=order, accepted), ``"momentum"`` (SGD at 0.01 with momentum
    0.9), ``"test_leak"`` (500 test digits added to the training set), ``"weight_decay"`` (5e-4),
    ``"batches_of_33"``. Returns ``(model, train_losses)``."""
    images, labels = split[0], split[1]
    if kind == "test_leak":
        images, labels = torch.cat([images, split[2][:500]]), torch.cat([labels, split[3][:500]])
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model = ref.mlp()
        optimizer = torch.optim.SGD(
            model.parameters(),
            lr=0.01 if kind == "momentum" else ref.LEARNING_RATE,
            momentum=0.9 if kind == "momentum" else 0.0,
            weight_decay=5e-4 if kind == "weight_decay" else 0.0,
        )
        order = torch.Generator().manual_seed(ref.SHUFFLE_SEED)
        size = 33 if kind == "batches_of_33" else ref.BATCH_SIZE
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(images, labels),
            batch_size=size,
            shuffle=True,
            generator=order,
        )
        losses = []
        model.train()
        for _ in range(ref.EPOCHS):
            if kind == "loader":
                batches = list(loader)
            else:
                perm = torch.randperm(len(images), generator=order)
                batches = [(images[b], labels[b]) for b in perm.split(size)]
            total = 0.0
            for x, y in batches:
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                total += loss.item() * len(y)
            losses.append(total / len(images))
        return model.eval(), losses
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize(
    "kind, threads, failure",
    [
        ("recipe", 2, None),
        ("loader", 1, None),
        ("momentum", 1, "`model` is not the network the recipe trains"),
        ("test_leak", 1, "`model` is not the network the recipe trains"),
        ("weight_decay", 1, "`model` is not the network the recipe trains"),
        ("batches_of_33", 1, "`model` is not the network the recipe trains"),
    ],
)
def test_q4_takes_the_recipes_network_at_any_thread_count_and_nothing_else(
    split, kind, threads, failure
):
    """q4 takes the recipe's network by its weights: SGD with momentum, and 500 test digits leaked
    into the training set, stay within the bands, but not within the weights."""
    model, losses = _trained_otherwise(split, kind, threads)
    train, test = ref.accuracy(model, split[0], split[1]), ref.accuracy(model, split[2], split[3])
    try:
        checks.check_q4(model, model.state_dict(), 101770, losses, train, test, train - test)
        actual = None
    except CheckFailure as err:
        actual = str(err)
    if failure is None:
        assert actual is None, (
            f"{kind} at {threads} thread(s) is the recipe and should pass q4: {actual!r}"
        )
    else:
        assert actual is not None and actual.startswith(failure), (
            f"{kind} should fail q4: {actual!r}"
        )


def test_q4_train_losses_must_be_the_runs_own(answers, model):
    losses = [x * 1.01 for x in answers["train_losses"]]  # inside the 10 % band, not the run's
    with pytest.raises(
        CheckFailure, match=r"`train_losses\[0\]` is not the mean of the batch losses of epoch 1"
    ):
        checks.check_q4(
            model,
            model.state_dict(),
            101770,
            losses,
            answers["train_accuracy"],
            answers["test_accuracy"],
            answers["gap"],
        )


def test_weights_of_another_model_fail_q4(answers, model):
    with torch.random.fork_rng(devices=[]):
        other = ref.mlp()
    with pytest.raises(CheckFailure, match="`weights` are not the weights of `model`"):
        checks.check_q4(
            model,
            other.state_dict(),
            101770,
            answers["train_losses"],
            answers["train_accuracy"],
            answers["test_accuracy"],
            answers["gap"],
        )


def test_later_questions_are_graded_on_the_students_own_model(split):
    # a model trained with another batch order: its own confusion matrix passes, the reference's
    # does not
    other = ref.mlp()
    previous = torch.get_num_threads()
    torch.set_num_threads(ref.THREADS)
    try:
        ref.train(other, split[0], split[1], seed=3)
    finally:
        torch.set_num_threads(previous)
    own = ref.model_values(other)
    checks.check_q7(
        own["units"],
        own["drivers"],
        own["confusion"],
        own["most_confused"],
        other,
        other.state_dict(),
    )
    with pytest.raises(CheckFailure, match="units"):
        checks.check_q7(
            ref.answers()["units"],
            own["drivers"],
            own["confusion"],
            own["most_confused"],
            other,
            other.state_dict(),
        )
