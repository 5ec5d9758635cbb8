"""The reference of ``where_mlps_fail`` against Lesson 4.5.3's printed numbers.

Three kinds of assertion:

- *exact*: the lesson prints the number and it depends on no trained weight
  (seeded permutations and convolutions, edge peaks, counts, shapes). The
  lesson's literal is ``expected`` and the reference must reproduce it.
- *weight-dependent*: the number comes from the committed weight files,
  Lesson 4.5.2's recipe at its eight threads (``autograder.training``), which
  score the lesson's 0.8677 / 0.8372 and print its numbers on this machine.
  Each is held to a band around the lesson's literal, or to the lesson's
  qualitative claim, and a comment says why the band is what it is. The
  spreads quoted come from retraining both models with
  ``autograder.training.train_classifier`` at shuffle seeds 0 to 7 (seed 0
  is the committed run; the other seven are the same recipe with another
  batch order): how far another run of the same recipe lands.
- the student functions (``slide``, ``peak``, ``window_sum``,
  ``compare_shared``) on the lesson's images and on Hypothesis examples
  (derandomized, bounded).

``answers()`` is cached per process, so it is computed once for this module.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from autograder.facts import answer_rows
from reference import where_mlps_fail as ref

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "assignments" / "where_mlps_fail" / "questions.yaml"
STUDENT_FUNCTIONS = {"slide", "peak", "window_sum", "compare_shared"}

PROPERTY = settings(max_examples=40, derandomize=True, deadline=None, database=None)


@pytest.fixture(scope="module")
def answers() -> dict:
    return ref.answers()


@pytest.fixture(scope="module")
def data():
    """(images, labels, classes): the 10,000 test images in memory."""
    return ref.load_test_images()


@pytest.fixture(scope="module")
def models():
    """(network, linear) from the committed weight files."""
    return ref.load_models()


@pytest.fixture(scope="module")
def edge(data) -> torch.Tensor:
    """Per test image: any lit pixel in its last two columns (the lesson's ``edge``)."""
    images = data[0]
    return (images[..., -2:] > 0).flatten(1).any(dim=1)


def seeded_conv(seed: int, out_channels: int, kernel_size: int) -> nn.Conv2d:
    """``torch.manual_seed(seed); nn.Conv2d(1, out_channels, kernel_size)``, the caller's RNG
    kept."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Conv2d(1, out_channels, kernel_size=kernel_size)


# ---------------------------------------------------------------------------
# The contract: every value name, and the types it states
# ---------------------------------------------------------------------------


def contract_names() -> tuple[set[str], set[str]]:
    """(value names, function names) from the answers rows the declaration gives (CONTRACT, the
    tables of assignments/where_mlps_fail/answers.md)."""
    values, functions = set(), set()
    for names, row in answer_rows("where_mlps_fail"):
        (functions if row["type"].startswith("function") else values).update(names)
    return values, functions


def test_contract_parses_to_the_known_functions():
    values, functions = contract_names()
    expected = STUDENT_FUNCTIONS
    assert functions == expected, f"function names in the contract: {sorted(functions)}"
    # one name from each table, so a change of the table layout cannot empty the parse
    expected = {
        "weight_shape",
        "falls_further",
        "sneaker_moved",
        "cost_table",
        "edges_peak",
        "fig",
        "counts",
        "model_counts",
    }
    assert expected <= values, (
        f"value names not parsed from {CONTRACT}: {sorted(expected - values)}"
    )


def test_answers_has_exactly_the_contract_value_names(answers):
    expected, _ = contract_names()
    actual = set(answers)
    assert actual == expected, (
        f"missing from answers(): {sorted(expected - actual)}; "
        f"not in the contract: {sorted(actual - expected)}"
    )


def _is_float(v) -> bool:
    return type(v) is float


def _is_int(v) -> bool:
    return type(v) is int


def _is_str_float_pairs(n):
    return lambda v: (
        type(v) is list
        and len(v) == n
        and all(
            type(p) is tuple and len(p) == 2 and type(p[0]) is str and _is_float(p[1]) for p in v
        )
    )


def _is_tensor(dtype, shape):
    return lambda v: isinstance(v, torch.Tensor) and v.dtype == dtype and tuple(v.shape) == shape


def _is_peak(v) -> bool:
    return (
        type(v) is tuple
        and len(v) == 4
        and _is_float(v[1])
        and _is_float(v[3])
        and all(
            type(p) is tuple and len(p) == 2 and all(_is_int(i) for i in p) for p in (v[0], v[2])
        )
    )


SHIFT_KEYS = {(3, 0), (3, 1), (3, 2), (3, 4), (3, 8), (2, 1), (2, 2), (2, 4)}

CONTRACT_TYPES = {
    "weight_shape": lambda v: isinstance(v, tuple),
    "bias_shape": lambda v: isinstance(v, tuple),
    "true_class": lambda v: type(v) is str,
    "predicted_class": lambda v: type(v) is str,
    "trouser_logit_by_hand": _is_float,
    "trouser_logit": _is_float,
    "trouser_weight_peak": lambda v: (
        type(v) is tuple
        and len(v) == 2
        and type(v[0]) is tuple
        and all(_is_int(i) for i in v[0])
        and _is_float(v[1])
    ),
    "order": _is_tensor(torch.int64, (784,)),
    "scrambled_accuracy": _is_float,
    "saved_accuracy_on_mixed": _is_float,
    "shift_accuracies": lambda v: (
        type(v) is dict and set(v) == SHIFT_KEYS and all(_is_float(a) for a in v.values())
    ),
    "slide_accuracy": _is_float,
    "trouser_classes_moved": lambda v: (
        type(v) is list and len(v) == 4 and all(type(c) is str for c in v)
    ),
    "falls_further": lambda v: v in ("network", "linear"),
    "sneaker_moved": _is_str_float_pairs(4),
    "class_accuracy": lambda v: (
        type(v) is dict
        and set(v) == {"Sandal", "Sneaker", "Ankle boot"}
        and all(
            type(p) is tuple and len(p) == 2 and all(_is_float(a) for a in p) for p in v.values()
        )
    ),
    "sneaker_landing": _is_tensor(torch.int64, (10,)),
    "conv_parameters": lambda v: type(v) is dict,
    "maps_shape": lambda v: type(v) is tuple,
    "maps": _is_tensor(torch.float32, (1, 16, 24, 24)),
    "maps_moved": _is_tensor(torch.float32, (1, 16, 24, 24)),
    "filter3_by_hand": _is_float,
    "filter3_layer": _is_float,
    "down_rows_both_hold": lambda v: type(v) is bool,
    "down_whole_height": lambda v: type(v) is bool,
    "sneaker_edge_rows_lit": lambda v: (
        type(v) is tuple and len(v) == 2 and all(type(b) is bool for b in v)
    ),
    "cost_table": lambda v: (
        type(v) is list
        and len(v) == 3
        and all(type(r) is tuple and len(r) == 4 and all(_is_int(i) for i in r) for r in v)
    ),
    "x": _is_tensor(torch.float32, (1, 1, 28, 28)),
    "trouser_class": lambda v: type(v) is str,
    "vertical": _is_tensor(torch.float32, (1, 1, 3, 3)),
    "horizontal": _is_tensor(torch.float32, (1, 1, 3, 3)),
    "edges": _is_tensor(torch.float32, (1, 1, 26, 26)),
    "edges_peak": _is_peak,
    "edges_moved": _is_tensor(torch.float32, (1, 1, 26, 26)),
    "edges_moved_peak": _is_peak,
    "edges_move_with": lambda v: type(v) is bool,
    "padded_shape": lambda v: type(v) is tuple,
    "padded_inside_equal": lambda v: type(v) is bool,
    "layer_matches": lambda v: type(v) is bool,
    "flat_edges": _is_tensor(torch.float32, (1, 1, 26, 26)),
    "flat_edges_peak": _is_peak,
    "absolute_sums": lambda v: type(v) is tuple and len(v) == 2 and all(_is_float(a) for a in v),
    "fig": lambda v: type(v) is dict and set(v) == {"n_axes", "image_shapes"},
    "trouser_verdicts": _is_str_float_pairs(2),
    "counts": lambda v: type(v) is list and len(v) == 4 and all(_is_int(i) for i in v),
    "total_count": _is_int,
    "row_shape": lambda v: type(v) is tuple,
    "changed": _is_int,
    "at_272": _is_float,
    "at_274": _is_float,
    "model_counts": lambda v: type(v) is tuple and len(v) == 2 and all(_is_int(i) for i in v),
}


def test_every_contract_name_has_a_type_check():
    expected, _ = contract_names()
    actual = set(CONTRACT_TYPES)
    assert actual == expected, (
        f"type checks missing for {sorted(expected - actual)}, extra {sorted(actual - expected)}"
    )


@pytest.mark.parametrize("name", sorted(CONTRACT_TYPES))
def test_answer_has_the_contract_type(answers, name):
    actual = answers[name]
    assert CONTRACT_TYPES[name](actual), (
        f"{name}: {type(actual).__name__} {actual!r:.200} is not the contract's type"
    )


# ---------------------------------------------------------------------------
# Exact values: the lesson's literals
# ---------------------------------------------------------------------------

EXACT = {
    # Lab Exercise 1
    "weight_shape": (10, 784),
    "bias_shape": (10,),
    "true_class": "Trouser",
    # Lab Exercise 2
    "conv_parameters": {"weight": ((16, 1, 5, 5), 400), "bias": ((16,), 16)},
    "maps_shape": (1, 16, 24, 24),
    "down_rows_both_hold": True,
    "down_whole_height": True,
    "sneaker_edge_rows_lit": (False, False),
    "cost_table": [
        (28, 100352, 416, 230400),
        (56, 401408, 416, 1081600),
        (112, 1605632, 416, 4665600),
    ],
    # the edges.py assignment
    "trouser_class": "Trouser",
    "edges_peak": ((3, 8), 3.0, (1, 18), -3.0),
    "edges_moved_peak": ((3, 11), 3.0, (1, 21), -3.0),
    "edges_move_with": True,
    "padded_shape": (1, 1, 28, 28),
    "padded_inside_equal": True,
    "layer_matches": True,
    "flat_edges_peak": ((0, 10), 1.2706, (25, 11), -1.3569),
    "absolute_sums": (499.65, 74.89),
    "fig": {"n_axes": 3, "image_shapes": [(28, 28), (26, 26), (26, 26)]},
    # Answer 4
    "counts": [72, 8, 54080, 10],
    "total_count": 54170,
    "row_shape": (1, 5408),
    "changed": 4827,
    "model_counts": (101770, 7850),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_value_matches_the_lesson(answers, name):
    actual, expected = answers[name], EXACT[name]
    if isinstance(expected, bool):
        assert actual is expected, f"{name}: {actual!r}, the lesson prints {expected!r}"
    else:
        assert actual == expected, f"{name}: {actual!r}, the lesson prints {expected!r}"


# Full floats in answers(); the lesson prints them with round(..., 4).
ROUNDED_4 = {
    "filter3_by_hand": -0.2641,
    "filter3_layer": -0.2641,
    "at_272": 0.7487,
    "at_274": 0.7487,
}


@pytest.mark.parametrize("name", sorted(ROUNDED_4))
def test_exact_float_rounds_to_the_lesson_print(answers, name):
    actual, expected = round(answers[name], 4), ROUNDED_4[name]
    assert actual == expected, f"round({name}, 4) is {actual}, the lesson prints {expected}"


def test_filter3_by_hand_agrees_with_the_layer(answers):
    actual = abs(answers["filter3_by_hand"] - answers["filter3_layer"])
    # 25 float32 products summed in another order than the layer's kernel: ~1e-8 apart
    assert actual <= 1e-6, f"filter 3 by hand and from the layer differ by {actual}"


def test_order_is_the_seed_7_permutation(answers):
    actual = answers["order"]
    expected = torch.randperm(784, generator=torch.Generator().manual_seed(7))
    assert torch.equal(actual, expected), (
        "order is not torch.randperm(784) from a generator seeded 7"
    )
    assert torch.equal(actual.sort().values, torch.arange(784)), (
        "order is not a permutation of 0..783"
    )


def test_seeded_orders_42_7_and_8():
    expected = [470, 186, 370, 171, 190, 57]
    actual = torch.randperm(784, generator=torch.Generator().manual_seed(42))[:6].tolist()
    assert actual == expected, f"seed 42's first six {actual}, the lesson prints {expected}"
    seven = torch.randperm(784, generator=torch.Generator().manual_seed(7))
    eight = torch.randperm(784, generator=torch.Generator().manual_seed(8))
    actual = int((seven == eight).sum())
    assert actual < 784, "seeds 7 and 8 draw the same order"
    assert actual <= 10, (
        f"seeds 7 and 8 agree at {actual} of 784 positions (a random pair: about 1)"
    )


def test_x_is_test_image_2(answers, data):
    actual, expected = answers["x"], data[0][2:3]
    assert torch.equal(actual, expected), "x is not test image 2 as a (1, 1, 28, 28) batch"


def test_vertical_and_horizontal_filters(answers):
    expected = torch.tensor([[-1.0, 0.0, 1.0]] * 3).view(1, 1, 3, 3)
    actual = answers["vertical"]
    assert torch.equal(actual, expected), f"vertical is {actual}"
    # the grid the lesson prints for horizontal[0, 0]
    expected = torch.tensor([[-1.0, -1.0, -1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    actual = answers["horizontal"][0, 0]
    assert torch.equal(actual, expected), f"horizontal[0, 0] is {actual}"


def test_edges_is_the_unpadded_vertical_map(answers):
    expected = F.conv2d(answers["x"], answers["vertical"])
    actual = answers["edges"]
    assert torch.equal(actual, expected), "edges is not F.conv2d(x, vertical)"
    # the lesson's DON'T: six positions of this map reach the largest possible sum, 3.0
    actual = int((answers["edges"] == 3.0).sum())
    assert actual == 6, f"{actual} positions of edges hold 3.0, the lesson says six"


def test_edges_moved_and_flat_edges(answers):
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    expected = F.conv2d(torch.roll(x, shifts=3, dims=3), vertical)
    assert torch.equal(answers["edges_moved"], expected), (
        "edges_moved is not F.conv2d(x rolled 3 right, vertical)"
    )
    expected = F.conv2d(x, horizontal)
    assert torch.equal(answers["flat_edges"], expected), "flat_edges is not F.conv2d(x, horizontal)"
    for name, source in (("edges_moved_peak", "edges_moved"), ("flat_edges_peak", "flat_edges")):
        actual, expected = answers[name], ref.peak(answers[source])
        assert actual == expected, f"{name} {actual} is not peak({source}) {expected}"


def test_edges_values_carry_a_students_filters_forward(answers):
    """A student who swapped the filters: later parts are graded on their own filters."""
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    actual = ref.edges_values(x, horizontal, vertical)
    # swapped: the "vertical" map is the lesson's horizontal one, and the other way round
    assert actual["edges_peak"] == EXACT["flat_edges_peak"], f"edges_peak {actual['edges_peak']}"
    assert actual["flat_edges_peak"] == EXACT["edges_peak"], (
        f"flat_edges_peak {actual['flat_edges_peak']}"
    )
    assert actual["absolute_sums"] == (74.89, 499.65), f"absolute_sums {actual['absolute_sums']}"
    assert "trouser_verdicts" not in actual, "trouser_verdicts computed without a network"
    same = ref.edges_values(x, vertical, horizontal)
    for name in (
        "edges_peak",
        "edges_moved_peak",
        "flat_edges_peak",
        "absolute_sums",
        "fig",
        "edges_move_with",
        "padded_shape",
        "padded_inside_equal",
        "layer_matches",
    ):
        assert same[name] == answers[name], (
            f"edges_values gives {name} {same[name]!r}, answers() {answers[name]!r}"
        )


@pytest.mark.parametrize("shapes", [((1, 28, 28), (1, 1, 3, 3)), ((1, 1, 28, 28), (3, 3))])
def test_edges_values_rejects_wrong_shapes(shapes):
    x_shape, filter_shape = shapes
    with pytest.raises(ValueError):
        ref.edges_values(torch.zeros(x_shape), torch.zeros(filter_shape), torch.zeros(1, 1, 3, 3))


def test_answer4_moved_value_sits_two_places_along(answers):
    actual = answers["at_274"]
    expected = answers["at_272"]
    # the same nine pixels under the same weights, two columns along: same value
    assert abs(actual - expected) <= 1e-6, (
        f"row_moved[0, 274] {actual} against row[0, 272] {expected}"
    )


# ---------------------------------------------------------------------------
# The README's checked facts and the lesson's Theory numbers (no weights)
# ---------------------------------------------------------------------------


def test_as_tensors_gives_totensor_values():
    from autograder.data import as_tensors, fashion_mnist

    dataset = fashion_mnist(train=False)
    actual, labels = as_tensors(dataset)
    expected = torch.stack([dataset[i][0] for i in range(len(dataset))])
    assert torch.equal(actual, expected), "as_tensors differs from ToTensor on the test images"
    assert labels.tolist() == [dataset[i][1] for i in range(len(dataset))], "labels differ"


def test_test_images_are_the_test_set(data):
    images, labels, classes = data
    assert tuple(images.shape) == (10000, 1, 28, 28), f"images {tuple(images.shape)}"
    actual = torch.bincount(labels, minlength=10).tolist()
    assert actual == [1000] * 10, f"class counts {actual}"
    assert (classes[int(labels[2])], classes[int(labels[7])], classes[int(labels[9])]) == (
        "Trouser",
        "Shirt",
        "Sneaker",
    ), "test images 2, 7, 9 are not trousers, a shirt, a sneaker"


def test_4155_test_images_light_their_last_two_columns(edge):
    actual, expected = int(edge.sum()), 4155
    assert actual == expected, (
        f"{actual} images lit in their last two columns, the lesson prints {expected}"
    )
    assert not edge[7], "test image 7 lights its last two columns; the lesson prints False"


def test_seed_42_conv_on_the_shirt(data):
    """Theory, "What Convolution Does Differently": the seeded nn.Conv2d(1, 8, 3) on test image
    7."""
    conv = seeded_conv(42, 8, 3)
    actual = (round(conv.weight.min().item(), 4), round(conv.weight.max().item(), 4))
    expected = (-0.33, 0.3062)
    assert actual == expected, f"weight range {actual}, the lesson prints {expected}"
    shirt = data[0][7:8]
    with torch.no_grad():
        maps = conv(shirt)
        maps_moved = conv(torch.roll(shirt, shifts=2, dims=3))
    actual = round(maps[0, 0, 10, 12].item(), 4)
    assert actual == 0.7487, f"filter 0 at row 10, column 12: {actual}, the lesson prints 0.7487"
    actual = round(ref.window_sum(shirt[0, 0], conv.weight[0, 0], conv.bias[0], 10, 12), 4)
    assert actual == 0.7487, f"window_sum at row 10, column 12: {actual}, the lesson prints 0.7487"
    actual = round(
        ref.window_sum(shirt[0, 0], conv.weight[0, 0].flip(0, 1), conv.bias[0], 10, 12), 4
    )
    assert actual == 0.6917, f"the flipped kernel's sum: {actual}, the lesson prints 0.6917"
    actual = round(maps_moved[0, 0, 10, 14].item(), 4)
    assert actual == 0.7487, f"moved map at column 14: {actual}, the lesson prints 0.7487"
    assert ref.compare_shared(maps_moved, maps, 2) is True, (
        "the columns both maps hold do not match"
    )
    assert not torch.allclose(maps_moved, torch.roll(maps, shifts=2, dims=3)), (
        "the whole-width comparison with the rolled maps printed True; the lesson prints False"
    )
    assert torch.allclose(maps_moved[..., :2], conv.bias.view(1, 8, 1, 1)), (
        "columns 0 and 1 of the moved maps are not each filter's bias"
    )


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_other_seeds_filters_move_with_the_shirt(data, seed):
    conv = seeded_conv(seed, 8, 3)
    shirt = data[0][7:8]
    with torch.no_grad():
        actual = ref.compare_shared(conv(torch.roll(shirt, shifts=2, dims=3)), conv(shirt), 2)
    assert actual is True, (
        f"seed {seed}'s filters: compare_shared printed {actual}, the lesson prints True"
    )


def test_untrained_mlp_scores_0_1173(data):
    images, labels, _ = data
    with torch.random.fork_rng(devices=[]):
        model = ref.mlp()
    actual, expected = f"{ref.accuracy(model, images, labels):.4f}", "0.1173"
    assert actual == expected, f"untrained mlp() scores {actual}, the lesson prints {expected}"


# ---------------------------------------------------------------------------
# Weight-dependent values: bands around the lesson's print
# ---------------------------------------------------------------------------


def test_models_load_the_committed_files(models):
    network, linear = models
    for model, path in ((network, ref.NETWORK_FILE), (linear, ref.LINEAR_FILE)):
        saved = torch.load(path, weights_only=True)
        state = model.state_dict()
        assert state.keys() == saved.keys(), (
            f"{path.name}: keys {list(state)} against {list(saved)}"
        )
        for key in saved:
            assert torch.equal(state[key], saved[key]), f"{path.name}: {key} differs from the file"
        assert not model.training, f"the model of {path.name} is not in eval mode"


def test_models_score_within_0_01_of_the_lesson(models, data):
    images, labels, _ = data
    # Issue 2's target for the committed weights: within 0.01 of the lesson's test accuracies.
    for model, expected in zip(models, (0.8677, 0.8372)):
        actual = ref.accuracy(model, images, labels)
        assert abs(actual - expected) <= 0.01, (
            f"{actual:.4f} on the test set, the lesson prints {expected}"
        )


LESSON_LINEAR = {
    (3, 0): 0.8372,
    (3, 1): 0.7487,
    (3, 2): 0.4839,
    (3, 4): 0.1899,
    (3, 8): 0.1117,
    (2, 1): 0.7744,
    (2, 2): 0.6681,
    (2, 4): 0.4829,
}


@pytest.mark.parametrize("key", sorted(LESSON_LINEAR))
def test_linear_shift_accuracy_near_the_lesson(answers, key):
    # The linear model is softmax regression, one convex fit: eight reruns of the recipe
    # spread at most 0.021 at any shift here (0.026 at 2 right), so the lesson's run and
    # ours land within 0.02 of each other (measured: at most 0.0131, at 4 down).
    actual, expected = answers["shift_accuracies"][key], LESSON_LINEAR[key]
    assert abs(actual - expected) <= 0.02, (
        f"linear model at (dims, pixels) {key}: {actual}, lesson {expected}"
    )


def test_slide_accuracy_near_the_lesson(answers):
    # Same model and reasoning as the roll table: reruns spread 0.028 (0.500 to 0.528).
    actual, expected = answers["slide_accuracy"], 0.5202
    assert abs(actual - expected) <= 0.02, f"slide_accuracy {actual}, the lesson prints {expected}"


def test_reordering_both_keeps_every_prediction(answers):
    # Each weight meets the pixel it met before, so every prediction agrees: the
    # reordered model scores the saved model's own in-place score, to the image.
    actual, expected = answers["scrambled_accuracy"], answers["shift_accuracies"][(3, 0)]
    assert actual == expected, f"scrambled_accuracy {actual}, the saved model in place {expected}"
    assert abs(actual - 0.8372) <= 0.01, f"scrambled_accuracy {actual}, the lesson prints 0.8372"


def test_saved_model_on_mixed_images_guesses(answers):
    # A guess on 10 balanced classes: 0.1, binomial sd 0.003 over 10,000 images; reruns
    # gave 0.1001 to 0.1011. 0.005 is chance's band, any real reading would exceed it.
    actual, expected = answers["saved_accuracy_on_mixed"], 0.1003
    assert abs(actual - expected) <= 0.005, (
        f"saved_accuracy_on_mixed {actual}, the lesson prints {expected}"
    )


def test_orders_drawn_twice_score_a_guess(models, data):
    # The lesson's DON'T: reordered by seed 7, read on images reordered by seed 8: 0.1013.
    # Chance level again, so chance's band.
    _, linear = models
    images, labels, _ = data
    weight = linear[1].weight.detach()
    seven = torch.randperm(784, generator=torch.Generator().manual_seed(7))
    eight = torch.randperm(784, generator=torch.Generator().manual_seed(8))
    with torch.random.fork_rng(devices=[]):
        scrambled = ref.linear_model()
    scrambled.load_state_dict(linear.state_dict())
    with torch.no_grad():
        scrambled[1].weight.copy_(weight[:, seven])
    actual = ref.accuracy(scrambled, images.flatten(1)[:, eight].view(-1, 1, 28, 28), labels)
    assert abs(actual - 0.1013) <= 0.005, (
        f"seed 7's model on seed 8's images: {actual}, the lesson prints 0.1013"
    )


def test_trouser_logit_near_the_lesson(answers):
    # The logit's scale drifts with an unregularized fit: reruns gave 10.68 to 11.71 for
    # this one (1.03 wide). 0.6 is half that spread plus a little; ours is 0.137 away.
    actual, expected = answers["trouser_logit"], 11.0946
    assert abs(actual - expected) <= 0.6, f"trouser_logit {actual}, the lesson prints {expected}"
    # by hand and from the layer: one dot product of 784 float32 terms, two summation orders
    actual = abs(answers["trouser_logit_by_hand"] - answers["trouser_logit"])
    assert actual <= 1e-4, f"the Trouser logit by hand and from the model differ by {actual}"


def test_predicted_class_is_trouser(answers):
    # The lesson's print; every rerun (8 of 8) also calls test image 2 a trouser.
    actual, expected = answers["predicted_class"], "Trouser"
    assert actual == expected, f"predicted_class {actual!r}, the lesson prints {expected!r}"


def test_trouser_weight_peak_near_the_lesson(answers):
    (row, col), actual = answers["trouser_weight_peak"]
    # The position is the lesson's exactly with the committed weights (reruns: row 0 in
    # 8 of 8, column 20 in 5 of 8, the waistband). The value: reruns gave 0.643 to 0.674,
    # so 0.05 around the lesson's 0.6411 holds for this recipe; ours is 0.024 away.
    assert (row, col) == (0, 20), (
        f"largest Trouser weight at {(row, col)}, the lesson prints (0, 20)"
    )
    assert abs(actual - 0.6411) <= 0.05, (
        f"largest Trouser weight {actual}, the lesson prints 0.6411"
    )


def test_trouser_classes_moved(answers):
    # The lesson's list; reruns gave this list 8 times in 8, so it is held exactly.
    actual, expected = (
        answers["trouser_classes_moved"],
        ["Trouser", "Trouser", "Shirt", "Ankle boot"],
    )
    assert actual == expected, f"trouser_classes_moved {actual}, the lesson prints {expected}"


def test_network_falls_further(answers, models, data):
    # Reruns: the network fell 0.37 to 0.45, the linear model 0.35 to 0.37, 8 of 8 "network".
    actual = answers["falls_further"]
    assert actual == "network", (
        f"falls_further {actual!r}; the lesson: the network, 0.8677 -> 0.4554"
    )
    network, _ = models
    images, labels, _ = data
    actual = ref.accuracy(network, torch.roll(images, shifts=2, dims=3), labels)
    # The hidden layer makes the shifted score vary more: reruns gave 0.416 to 0.494 at
    # two pixels right (0.078 wide, the lesson's 0.4554 inside it). 0.05 is half that
    # spread plus a little; the committed network is 0.039 below the lesson.
    assert abs(actual - 0.4554) <= 0.05, (
        f"network two pixels right: {actual}, the lesson prints 0.4554"
    )


def test_sneaker_moved_down(answers):
    moved = answers["sneaker_moved"]
    actual = [c for c, _ in moved]
    # the lesson's point: test image 9 stays a sneaker through three pixels down (8 of 8 reruns)
    assert actual == ["Sneaker"] * 4, f"classes of the sneaker moved down 0..3: {actual}"
    probs = [p for _, p in moved]
    # 0 to 2 pixels: near-certain in the lesson (0.985 to 0.994) and in every rerun
    # (0.989 and above), so 0.02 around the lesson's.
    for pixels, expected in enumerate((0.987, 0.994, 0.985)):
        assert abs(probs[pixels] - expected) <= 0.02, (
            f"{pixels} down: {probs[pixels]}, the lesson prints {expected}"
        )
    # 3 pixels: the lesson's 0.659 lies below all eight reruns (0.731 to 0.968; ours 0.95),
    # so no band around it would be honest; held to the lesson's shape instead: the
    # confidence drops at three pixels and Sneaker keeps the majority.
    assert 0.5 < probs[3] < min(probs[:3]), f"3 down: {probs[3]}, against {probs[:3]} at 0 to 2"


def test_class_accuracy_before_and_after(answers):
    accuracy = answers["class_accuracy"]
    lesson = {"Sandal": (0.956, 0.795), "Sneaker": (0.927, 0.275), "Ankle boot": (0.959, 0.798)}
    for name, (expected_before, _expected_after) in lesson.items():
        before, after = accuracy[name]
        # In place, per class of 1,000: reruns trade accuracy among the three footwear
        # classes, up to 0.072 wide (ankle boot 0.892 to 0.964), so 0.06 (ours: 0.053 at most).
        assert abs(before - expected_before) <= 0.06, (
            f"{name} in place: {before}, the lesson prints {expected_before}"
        )
        assert after < before, f"{name}: {after} moved down 3, not below {before} in place"
    # Moved down 3 the spread is far wider (sneakers: 0.33 to 0.70 over reruns, the lesson's
    # 0.275 outside it), so the lesson's claim is held, not a band: sneakers fall furthest.
    falls = {name: b - a for name, (b, a) in accuracy.items()}
    actual = max(falls, key=falls.get)
    assert actual == "Sneaker", f"the class that falls furthest moved down 3 is {actual} ({falls})"


def test_sneaker_landing(answers):
    landing = answers["sneaker_landing"]
    actual = int(landing.sum())
    assert actual == 1000, f"sneaker_landing sums to {actual}, not the 1,000 test sneakers"
    # The lesson's moved sneakers land on Sandal, Sneaker, Bag and Ankle boot only; so do
    # all eight reruns' (the counts among the four vary by hundreds, so no band on them).
    actual = {i for i, n in enumerate(landing.tolist()) if n}
    assert actual <= {5, 7, 8, 9}, f"moved sneakers land in classes {sorted(actual)}"
    actual, expected = int(landing[7]), round(1000 * answers["class_accuracy"]["Sneaker"][1])
    assert actual == expected, f"{actual} land on Sneaker, class_accuracy says {expected}"


def test_trouser_verdicts(answers):
    verdicts = answers["trouser_verdicts"]
    actual = [c for c, _ in verdicts]
    assert actual == ["Trouser", "Ankle boot"], (
        f"trouser_verdicts classes {actual} (8 of 8 reruns agree)"
    )
    # in place the lesson prints 0.9999, every rerun 0.9999 or 1.0
    assert verdicts[0][1] >= 0.9999, f"in place: {verdicts[0][1]}, the lesson prints 0.9999"
    # moved 3: reruns gave 0.43 to 0.91 (the lesson's 0.8560 inside), too wide for a band;
    # held to the lesson's claim instead, a majority of the probability on the wrong class.
    assert verdicts[1][1] > 0.5, (
        f"moved 3: {verdicts[1][1]} on Ankle boot, the lesson prints 0.8560"
    )


# ---------------------------------------------------------------------------
# The student functions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pixels", [1, 2, 3])
def test_slide_equals_roll_on_the_shirt(data, pixels):
    # test image 7 lights columns 4 to 24: its last three columns are black
    shirt = data[0][7:8]
    actual, expected = ref.slide(shirt, pixels), torch.roll(shirt, shifts=pixels, dims=3)
    assert torch.equal(actual, expected), (
        f"slide and roll differ on test image 7 at {pixels} pixels"
    )


def test_slide_differs_from_roll_where_the_shirt_wraps(data):
    shirt = data[0][7:8]
    actual = torch.equal(ref.slide(shirt, 4), torch.roll(shirt, shifts=4, dims=3))
    assert actual is False, "slide equals roll at 4 pixels, though column 24 of test image 7 is lit"


def test_slide_differs_from_roll_on_a_lit_edge(data, edge):
    images = data[0]
    lit = int(edge.nonzero()[0])
    actual, expected = (
        ref.slide(images[lit : lit + 1], 2),
        torch.roll(images[lit : lit + 1], shifts=2, dims=3),
    )
    assert not torch.equal(actual, expected), (
        f"slide equals roll on test image {lit}, lit in its last columns"
    )
    assert torch.equal(actual[..., 2:], expected[..., 2:]), (
        "slide and roll differ beyond the two incoming columns"
    )
    assert int(actual[..., :2].count_nonzero()) == 0, "slide's incoming columns are not black"


def test_slide_equals_roll_exactly_on_the_dark_edged_images(data, edge):
    images = data[0]
    actual = (ref.slide(images, 2) == torch.roll(images, shifts=2, dims=3)).flatten(1).all(dim=1)
    expected = ~edge
    assert torch.equal(actual, expected), (
        f"slide and roll agree on {int(actual.sum())} images, "
        f"the dark-edged ones are {int(expected.sum())}"
    )


@PROPERTY
@given(batch=st.integers(1, 3), height=st.integers(1, 6), width=st.integers(2, 12), draw=st.data())
def test_slide_properties(batch, height, width, draw):
    pixels = draw.draw(st.integers(1, width - 1), label="pixels")
    seed = draw.draw(st.integers(0, 2**16), label="seed")
    x = torch.rand(batch, 1, height, width, generator=torch.Generator().manual_seed(seed))
    before = x.clone()
    actual = ref.slide(x, pixels)
    expected = torch.cat([torch.zeros(batch, 1, height, pixels), x[..., : width - pixels]], dim=-1)
    assert torch.equal(actual, expected), f"slide by {pixels} on width {width}"
    assert torch.equal(x, before), "slide changed its input"
    dark = x.clone()
    dark[..., width - pixels :] = 0
    assert torch.equal(ref.slide(dark, pixels), torch.roll(dark, shifts=pixels, dims=-1)), (
        "slide differs from roll although the last columns are black"
    )


def test_slide_any_shape_and_dtype():
    x = torch.arange(1, 6)
    actual, expected = ref.slide(x, 2), torch.tensor([0, 0, 1, 2, 3])
    assert torch.equal(actual, expected), f"slide on a 1-D tensor: {actual}"
    assert ref.slide(torch.ones(2, 3, 4, dtype=torch.float64), 1).dtype == torch.float64


@pytest.mark.parametrize(
    "pixels, error",
    [(0, ValueError), (28, ValueError), (-1, ValueError), (2.0, TypeError), (True, TypeError)],
)
def test_slide_rejects_bad_pixels(pixels, error):
    with pytest.raises(error):
        ref.slide(torch.zeros(1, 1, 28, 28), pixels)


def test_slide_rejects_a_scalar():
    with pytest.raises(ValueError):
        ref.slide(torch.tensor(1.0), 1)


def test_peak_reads_rows_and_columns():
    m = torch.zeros(1, 1, 4, 6)
    m[0, 0, 2, 5], m[0, 0, 3, 1] = 0.123456, -2.0
    actual, expected = ref.peak(m), ((2, 5), 0.1235, (3, 1), -2.0)
    assert actual == expected, f"peak {actual}"
    m[0, 0, 1, 3] = 0.123456  # a tie, earlier in reading order
    actual = ref.peak(m)[0]
    assert actual == (1, 3), f"peak with a tie reports {actual}, not the first in reading order"


def test_peak_rejects_empty_and_scalar():
    for m in (torch.tensor(1.0), torch.zeros(0, 3)):
        with pytest.raises(ValueError):
            ref.peak(m)


@PROPERTY
@given(height=st.integers(1, 8), width=st.integers(1, 8), k=st.integers(1, 4), draw=st.data())
def test_window_sum_against_conv2d(height, width, k, draw):
    k = min(k, height, width)
    row = draw.draw(st.integers(0, height - k), label="row")
    col = draw.draw(st.integers(0, width - k), label="col")
    generator = torch.Generator().manual_seed(draw.draw(st.integers(0, 2**16), label="seed"))
    image = torch.randn(height, width, generator=generator)
    kernel = torch.randn(k, k, generator=generator)
    bias = torch.randn(1, generator=generator)
    expected = F.conv2d(image.view(1, 1, height, width), kernel.view(1, 1, k, k), bias)[
        0, 0, row, col
    ].item()
    actual = ref.window_sum(image, kernel, bias, row, col)
    assert abs(actual - expected) <= 1e-5, f"window_sum {actual}, F.conv2d {expected}"


@pytest.mark.parametrize("row, col", [(26, 0), (0, 26), (-1, 0)])
def test_window_sum_rejects_a_window_outside(row, col):
    with pytest.raises(ValueError):
        ref.window_sum(torch.zeros(28, 28), torch.zeros(3, 3), 0.0, row, col)


def test_window_sum_rejects_bad_shapes():
    for image, kernel in (
        (torch.zeros(1, 28, 28), torch.zeros(3, 3)),
        (torch.zeros(28, 28), torch.zeros(3, 2)),
    ):
        with pytest.raises(ValueError):
            ref.window_sum(image, kernel, 0.0, 0, 0)


@PROPERTY
@given(width=st.integers(4, 12), k=st.integers(1, 3), draw=st.data())
def test_compare_shared_on_slid_images(width, k, draw):
    pixels = draw.draw(st.integers(1, width - k), label="pixels")
    generator = torch.Generator().manual_seed(draw.draw(st.integers(0, 2**16), label="seed"))
    x = torch.rand(2, 1, 5, width, generator=generator)
    kernel = torch.randn(3, 1, k, k, generator=generator)
    maps, maps_moved = F.conv2d(x, kernel), F.conv2d(ref.slide(x, pixels), kernel)
    assert ref.compare_shared(maps_moved, maps, pixels) is True, (
        "a convolution's maps did not move with the image"
    )


def test_compare_shared_false_at_the_wrong_shift(answers):
    x, vertical = answers["x"], answers["vertical"]
    edges, moved = F.conv2d(x, vertical), F.conv2d(torch.roll(x, shifts=3, dims=3), vertical)
    assert ref.compare_shared(moved, edges, 3) is True, (
        "trousers moved 3: the shared columns differ"
    )
    assert ref.compare_shared(moved, edges, 2) is False, (
        "trousers moved 3, compared as moved 2: True"
    )


def test_compare_shared_rejects_mismatches():
    with pytest.raises(ValueError):
        ref.compare_shared(torch.zeros(1, 1, 4, 6), torch.zeros(1, 1, 4, 5), 1)
    with pytest.raises(ValueError):
        ref.compare_shared(torch.zeros(1, 1, 4, 6), torch.zeros(1, 1, 4, 6), 6)


# ---------------------------------------------------------------------------
# answers(): cached, copied, no side effects; the weights: reproducible
# ---------------------------------------------------------------------------


def test_answers_returns_copies(answers):
    first = ref.answers()
    first["order"][0] = -1
    first["cost_table"].clear()
    second = ref.answers()
    assert int(second["order"][0]) == int(answers["order"][0]) != -1, (
        "a caller's change reached the cache"
    )
    assert len(second["cost_table"]) == 3, "a caller's change reached the cache"


def _same(actual, expected) -> bool:
    """Bitwise equality through dicts, lists and tuples of tensors and Python values."""
    if isinstance(expected, torch.Tensor):
        return (
            isinstance(actual, torch.Tensor)
            and actual.dtype == expected.dtype
            and torch.equal(actual, expected)
        )
    if isinstance(expected, dict):
        return (
            type(actual) is dict
            and actual.keys() == expected.keys()
            and all(_same(actual[k], expected[k]) for k in expected)
        )
    if isinstance(expected, (list, tuple)):
        return (
            type(actual) is type(expected)
            and len(actual) == len(expected)
            and all(_same(a, e) for a, e in zip(actual, expected))
        )
    return type(actual) is type(expected) and actual == expected


def test_answers_leave_the_generator_and_threads_alone(answers):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(20240)  # a state no seeding inside answers() produces
        before, threads = torch.get_rng_state(), torch.get_num_threads()
        actual = ref._answers.__wrapped__()  # a fresh computation, not the cached one
        after = torch.get_rng_state()
    assert torch.equal(after, before), "computing answers() moved torch's global generator"
    assert torch.get_num_threads() == threads, (
        f"answers() left {torch.get_num_threads()} threads, not {threads}"
    )
    different = [name for name in answers if not _same(actual[name], answers[name])]
    assert not different, f"a second computation gave other values for {different}"


def test_answers_at_one_thread_equal_two_threads(answers):
    # answers() computes on ref.THREADS (1) for speed; the lesson's scripts run at the
    # default thread count (2 here). Every value must be bitwise the same.
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        actual = ref._compute()
    finally:
        torch.set_num_threads(previous)
    different = [name for name in answers if not _same(actual[name], answers[name])]
    assert not different, f"values differ between 1 and 2 threads: {different}"


#: Retrained on CPU kernels other than those the committed weights were trained with (AVX-512 on
#: an Intel Xeon), the linear model lands within float32 rounding of the committed one (4e-7
#: there: a convex problem), while the network's rounding differences grow over five epochs of Adam
#: into another network of the same recipe (weights up to 0.2 apart, test accuracy 0.8711 against
#: 0.8706). So bit-for-bit reproduction is asserted where the linear model comes back bit for bit
#: (the same kernels), and otherwise the linear model to 1e-5 and both test accuracies to within
#: 0.005 of the committed ones (half the lesson's allowance,
#: ``test_models_score_within_0_01_of_the_lesson``).
LINEAR_REPRODUCED_TOL, ACCURACY_REPRODUCED_TOL = 1e-5, 0.005


def test_retraining_reproduces_the_committed_weights(tmp_path):
    from autograder.training import train_where_mlps_fail

    report = train_where_mlps_fail(tmp_path)
    expected = {
        p.name: torch.load(p, weights_only=True) for p in (ref.NETWORK_FILE, ref.LINEAR_FILE)
    }
    actual = {name: torch.load(tmp_path / name, weights_only=True) for name in expected}
    for name in expected:
        assert actual[name].keys() == expected[name].keys(), (
            f"{name}: keys {list(actual[name])} against {list(expected[name])}"
        )
    linear = ref.LINEAR_FILE.name
    same_kernels = all(
        torch.equal(actual[linear][k], expected[linear][k]) for k in expected[linear]
    )
    if same_kernels:
        for name in expected:
            for key in expected[name]:
                assert torch.equal(actual[name][key], expected[name][key]), (
                    f"{name}: retrained {key} differs from the committed one (on the same CPU "
                    f"kernels)"
                )
        assert (report["fashion_mlp.pt"], report["fashion_linear.pt"]) == (0.8677, 0.8372), (
            f"report {report}"
        )
    else:
        for key in expected[linear]:
            torch.testing.assert_close(
                actual[linear][key],
                expected[linear][key],
                rtol=0,
                atol=LINEAR_REPRODUCED_TOL,
                msg=lambda m, key=key: f"{linear}: retrained {key} is not the committed one: {m}",
            )
        for name, committed in (("fashion_mlp.pt", 0.8677), ("fashion_linear.pt", 0.8372)):
            assert abs(report[name] - committed) <= ACCURACY_REPRODUCED_TOL, (
                f"{name} retrained scores {report[name]} on the test set, the committed weights "
                f"{committed}"
            )


def test_the_committed_weights_print_the_lessons_numbers(models, data, answers):
    """Lesson 4.5.2's recipe at eight threads (``autograder.training``): the lesson's own weight
    files, so the notebook's texts can quote the lesson's numbers (other weight files can print
    0.4162 at two pixels where the lesson prints 0.4554). Exact on the CPU kernels the files were
    trained with (this project's x86 machine); a band would hide a retraining that drifted."""
    network, linear = models
    images, labels, _ = data
    right = [
        round(ref.accuracy(network, torch.roll(images, shifts=p, dims=3), labels), 4)
        for p in (0, 1, 2, 3, 5, 8)
    ]
    assert right == [0.8677, 0.7896, 0.4554, 0.2242, 0.1293, 0.1086], (
        f"the network moved right: {right}"
    )
    down = round(ref.accuracy(network, torch.roll(images, shifts=2, dims=2), labels), 4)
    assert down == 0.6438, f"the network two pixels down: {down}"
    slid = torch.zeros_like(images)
    slid[..., 2:] = images[..., :-2]
    assert round(ref.accuracy(network, slid, labels), 4) == 0.5456, (
        "the network on images slid two pixels"
    )
    assert round(ref.accuracy(linear, images, labels), 4) == 0.8372, "the linear model in place"
    assert answers["slide_accuracy"] == 0.5202 and answers["saved_accuracy_on_mixed"] == 0.1003, (
        answers
    )
    assert answers["trouser_weight_peak"] == ((0, 20), 0.6411), answers["trouser_weight_peak"]
