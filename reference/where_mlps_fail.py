"""Reference solution for the assignment ``where_mlps_fail``.

Specification: Lesson 4.5.3 "Where MLPs Fail - the Case for Convolution"
(course text ``002_f489b58c2689217a.txt``): Lab Exercise 1 ("The Linear
Model, Read by Column and Moved"), Lab Exercise 2 ("A Sneaker Moved Down, and
Sixteen Filters"), the assignment "An Edge Filter Written by Hand"
(``edges.py``) and the computation of Answer 4. The graded names, their types
and values are listed in ``assignments/where_mlps_fail/answers.md`` (the contract).

What is here:

- the student functions, with the lesson's semantics: :func:`slide`,
  :func:`peak`, :func:`window_sum`, :func:`compare_shared`;
- the lesson's models: :func:`mlp` (Lesson 4.5.2's constructor) and
  :func:`load_models`, which loads the committed weight files
  ``assignments/where_mlps_fail/fashion_mlp.pt`` and ``fashion_linear.pt``;
- :func:`load_test_images`, the 10,000 Fashion-MNIST test images in memory, and
  :func:`accuracy`, the lesson's ``accuracy`` over batches of 1,000;
- :func:`answers`, a dict with the reference value of every *value* name of
  the contract, computed the way the lesson's solution code computes it
  (one function per exercise: :func:`lab1`, :func:`lab2`,
  :func:`edges_assignment`, :func:`answer4`);
- :func:`edges_values`, the edges.py quantities computed from any given
  ``x``, ``vertical`` and ``horizontal``, for grading later q3 parts with
  errors carried forward.

Rounding: a value is rounded where the task or the contract's type column says
so, and nowhere else: ``trouser_weight_peak`` and ``peak`` (4 decimals),
``sneaker_moved`` (3), ``trouser_verdicts`` (4), ``absolute_sums`` (2, "to
two decimals"). Accuracies, logits, hand-computed sums and single map values
(``trouser_logit``, ``filter3_by_hand``, ``at_272`` ...) are the full Python
float of the float32 result, so a check can compare a student's value at a
tolerance of its own choosing. The lesson's printed literal is what
``round(value, 4)`` (or ``f"{value:.4f}"``) of these floats gives. Compare
at a tolerance rather than after rounding: ``filter3_by_hand`` is
-0.26405003..., 4e-8 from where 4-decimal rounding flips to -0.2640, so a
correct sum in another order or precision may round either way.

Data and speed: the test images come from
``autograder.data.as_tensors(fashion_mnist(train=False))``, the same values
``ToTensor`` gives (byte / 255), held in memory. Where the lesson scores
through ``test_loader`` (ten unshuffled batches of 1,000) the models here see
the same ten batches of 1,000, split from the tensor in memory, so every
matrix product has the shape the lesson's had; where the lesson runs all
10,000 images at once (Lab Exercise 2), so does this module.

Side effects: none on the caller. :func:`answers` seeds torch where the
lesson seeds it, inside ``torch.random.fork_rng``, so the caller's global
random state is the same before and after; it computes on :data:`THREADS`
thread(s) and restores the caller's thread count; it trains nothing and
writes no file. Nothing is loaded at import time.
"""

from __future__ import annotations

import copy
import functools
import operator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ASSIGNMENT_DIR", "NETWORK_FILE", "LINEAR_FILE", "BATCH_SIZE", "THREADS",
    "slide", "peak", "window_sum", "compare_shared",
    "mlp", "linear_model", "load_models", "load_test_images", "accuracy",
    "lab1", "lab2", "edges_values", "edges_assignment", "answer4", "answers",
]

#: The folder of the lesson's support modules and committed weight files.
ASSIGNMENT_DIR = Path(__file__).resolve().parents[1] / "assignments" / "where_mlps_fail"
#: Lesson 4.5.2's network and linear model, as committed (the weights are the truth).
NETWORK_FILE = ASSIGNMENT_DIR / "fashion_mlp.pt"
LINEAR_FILE = ASSIGNMENT_DIR / "fashion_linear.pt"
#: ``fashion.test_loader``'s batch size (unshuffled).
BATCH_SIZE = 1000


# ---------------------------------------------------------------------------
# The student functions
# ---------------------------------------------------------------------------

def _shift_count(pixels, width: int, name: str = "pixels") -> int:
    """``pixels`` as an int in ``1 .. width - 1``, else a TypeError / ValueError."""
    if isinstance(pixels, bool):
        raise TypeError(f"{name} must be an integer, not a bool")
    try:
        pixels = operator.index(pixels)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(pixels).__name__}") from None
    if not 1 <= pixels <= width - 1:
        raise ValueError(
            f"{name} must be between 1 and {width - 1} (the last axis is {width} wide), "
            f"got {pixels}"
        )
    return pixels


def slide(x: torch.Tensor, pixels: int) -> torch.Tensor:
    """``x`` moved ``pixels`` columns to the right, black (zero) coming in on the left.

    Lesson 4.5.3, "Shifting the Image by a Few Pixels" (and Lab Exercise 1):
    the shift that brings in the background instead of ``torch.roll``'s
    wrap-around::

        out = torch.zeros_like(x); out[..., pixels:] = x[..., :-pixels]

    Args:
        x: a tensor of any shape ``(..., W)``, for instance a batch
            ``(N, 1, 28, 28)``; the last axis is the one moved along.
        pixels: an integer, ``1 <= pixels <= W - 1``.

    Returns:
        A new tensor of ``x``'s shape, dtype and device: column ``j + pixels``
        holds column ``j`` of ``x``, columns ``0 .. pixels - 1`` are zero. It
        equals ``torch.roll(x, shifts=pixels, dims=-1)`` exactly when the last
        ``pixels`` columns of ``x`` are zero, and differs from it where they
        are not. ``x`` is not modified.

    Raises:
        TypeError: ``x`` is not a tensor, or ``pixels`` is not an integer.
        ValueError: ``x`` has no axis, or ``pixels`` is outside ``1 .. W - 1``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError("x must have at least one axis to slide along")
    pixels = _shift_count(pixels, x.shape[-1])
    out = torch.zeros_like(x)  # a black image, same shape
    out[..., pixels:] = x[..., :-pixels]
    return out


def peak(m: torch.Tensor) -> tuple[tuple[int, int], float, tuple[int, int], float]:
    """Where a map is largest and smallest, and the two values rounded to 4 decimals.

    The edges.py assignment's helper (Lesson 4.5.3, "Assignment: An Edge
    Filter Written by Hand")::

        width = m.shape[-1]
        divmod(int(m.argmax()), width), round(m.max().item(), 4),
        divmod(int(m.argmin()), width), round(m.min().item(), 4)

    Args:
        m: a tensor ``(..., H, W)``, typically one map ``(1, 1, H, W)``.
            ``argmax`` / ``argmin`` run over the flattened tensor, so with more
            than one map the "row" counts the rows of all maps in order.

    Returns:
        ``((row, col), max, (row, col), min)``: Python ints, and Python
        floats rounded to 4 decimals. Ties go to the first entry in reading
        order (``argmax``'s rule), so a map whose largest value occurs six
        times reports the first of the six.

    Raises:
        TypeError: ``m`` is not a tensor.
        ValueError: ``m`` is 0-dimensional or empty.
    """
    if not isinstance(m, torch.Tensor):
        raise TypeError(f"m must be a torch.Tensor, got {type(m).__name__}")
    if m.dim() == 0 or m.numel() == 0:
        raise ValueError(
            f"m must be a non-empty tensor with at least one axis, got shape {tuple(m.shape)}"
        )
    width = m.shape[-1]
    high, low = int(m.argmax()), int(m.argmin())
    return (
        divmod(high, width),
        round(m.max().item(), 4),
        divmod(low, width),
        round(m.min().item(), 4),
    )


def window_sum(image: torch.Tensor, kernel: torch.Tensor, bias, row: int, col: int) -> float:
    """One output of a convolution layer, computed by hand: a cross-correlation.

    Lesson 4.5.3, "What Convolution Does Differently" (filter 0 at row 10,
    column 12 of the shirt: 0.7487) and Lab Exercise 2 (filter 3 at row 12,
    column 9 of the sneaker: -0.2641)::

        (kernel * image[row:row + k, col:col + k]).sum() + bias

    The kernel is laid on the window as it is, not flipped, which is what
    ``nn.Conv2d`` and ``F.conv2d`` compute: entry ``(row, col)`` of their
    output (no padding, stride 1) is this sum.

    Args:
        image: one image ``(H, W)``, for instance ``x[0, 0]``.
        kernel: one filter's weights ``(k, k)``, for instance ``conv.weight[3, 0]``.
        bias: the filter's bias, a number or a one-element tensor.
        row, col: the window's top-left pixel, ``0 <= row <= H - k`` and
            ``0 <= col <= W - k`` (so ``(row, col)`` indexes the output map).

    Returns:
        The sum as a Python float (the float32 result, exactly).

    Raises:
        TypeError: ``image`` or ``kernel`` is not a tensor, ``row`` / ``col``
            not integers.
        ValueError: ``image`` is not 2-D, ``kernel`` not 2-D and square,
            ``bias`` not one number, or the window does not fit in the image.
    """
    for name, t in (("image", image), ("kernel", kernel)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if image.dim() != 2:
        raise ValueError(f"image must be 2-D (H, W), got shape {tuple(image.shape)}")
    if kernel.dim() != 2 or kernel.shape[0] != kernel.shape[1] or kernel.shape[0] == 0:
        raise ValueError(
            f"kernel must be a square 2-D (k, k) tensor, got shape {tuple(kernel.shape)}"
        )
    if isinstance(bias, torch.Tensor) and bias.numel() != 1:
        raise ValueError(f"bias must be one number, got a tensor of shape {tuple(bias.shape)}")
    k = kernel.shape[0]
    height, width = image.shape
    coords = []
    for name, value, size in (("row", row, height), ("col", col, width)):
        if isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, not a bool")
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
        if not 0 <= value <= size - k:
            raise ValueError(
                f"a {k} by {k} window at {name} {value} does not fit in an image "
                f"{size} wide along that axis (0 <= {name} <= {size - k})"
            )
        coords.append(value)
    row, col = coords
    window = image[row : row + k, col : col + k]
    with torch.no_grad():
        total = (kernel * window).sum() + bias
    return total.item()


def compare_shared(maps_moved: torch.Tensor, maps: torch.Tensor, pixels: int) -> bool:
    """Whether the maps of an image moved right equal its maps moved, on the columns both hold.

    Lesson 4.5.3, "What Convolution Does Differently" and the edges.py
    assignment::

        torch.allclose(maps_moved[..., pixels:], maps[..., :-pixels])

    Columns ``pixels ..`` of the moved image's maps against columns
    ``.. W - 1 - pixels`` of the maps in place: the columns both maps hold,
    leaving out the ``pixels`` columns that came in on the left (wrapped or
    black) and the ``pixels`` columns that left on the right.

    Args:
        maps_moved: the maps of the moved image, ``(..., W)``.
        maps: the maps of the image in place, the same shape.
        pixels: how far the image moved right, ``1 <= pixels <= W - 1``.

    Returns:
        A Python bool (``torch.allclose`` at its default tolerances).

    Raises:
        TypeError: the maps are not tensors, or ``pixels`` is not an integer.
        ValueError: the two shapes differ, the maps have no axis, or
            ``pixels`` is outside ``1 .. W - 1``.
    """
    for name, t in (("maps_moved", maps_moved), ("maps", maps)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if maps_moved.shape != maps.shape:
        raise ValueError(
            f"maps_moved {tuple(maps_moved.shape)} and maps {tuple(maps.shape)} "
            "must have the same shape"
        )
    if maps.dim() == 0:
        raise ValueError("the maps must have at least one axis")
    pixels = _shift_count(pixels, maps.shape[-1])
    return bool(torch.allclose(maps_moved[..., pixels:], maps[..., :-pixels]))


# ---------------------------------------------------------------------------
# The lesson's models and data
# ---------------------------------------------------------------------------


def mlp() -> nn.Sequential:
    """Lesson 4.5.2's network before its first step (``image_loop.mlp``).

    Seeds torch's global generator with 42, as the lesson's constructor does,
    and builds Flatten, Linear(784, 128), ReLU, Linear(128, 10). Untrained, it
    scores 0.1173 on the test images (Lesson 4.5.3, "A Weight per Pixel").
    """
    torch.manual_seed(42)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def linear_model() -> nn.Sequential:
    """Lesson 4.5.2's linear model, built bare: Flatten, Linear(784, 10)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 10))


def load_models() -> tuple[nn.Sequential, nn.Sequential]:
    """``(network, linear)`` with the committed weights loaded, in eval mode.

    Lesson 4.5.3, "A Weight per Pixel" (``trained.py``): ``mlp()`` with
    ``fashion_mlp.pt`` loaded, and Flatten, Linear(784, 10) with
    ``fashion_linear.pt`` loaded, both from :data:`ASSIGNMENT_DIR`. Fresh
    models on every call. The caller's global random state is left as it was
    (``mlp()`` seeds it, inside ``torch.random.fork_rng``).

    Raises:
        FileNotFoundError: a weight file is not in :data:`ASSIGNMENT_DIR`
            (``python -c "from autograder.training import train_where_mlps_fail as t;
            t(DIR)"`` writes both).
    """
    for path in (NETWORK_FILE, LINEAR_FILE):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} is missing: it is committed with the assignment, and "
                "autograder.training.train_where_mlps_fail(folder) rewrites it"
            )
    with torch.random.fork_rng(devices=[]):
        network = mlp()
        linear = linear_model()
    network.load_state_dict(torch.load(NETWORK_FILE, weights_only=True))
    linear.load_state_dict(torch.load(LINEAR_FILE, weights_only=True))
    return network.eval(), linear.eval()


@functools.cache
def _test_data() -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
    from autograder.data import as_tensors, fashion_mnist

    dataset = fashion_mnist(train=False)
    images, labels = as_tensors(dataset)
    return images, labels, tuple(dataset.classes)


def load_test_images() -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
    """The 10,000 Fashion-MNIST test images, in memory (``fashion.test_set``'s values).

    Returns:
        ``(images, labels, classes)``: float32 ``(10000, 1, 28, 28)`` in
        [0, 1] (byte / 255, what ``ToTensor`` gives), int64 ``(10000,)``, and
        the ten class names (``test_set.classes``). The tensors are copies, so
        the caller may change them.
    """
    images, labels, classes = _test_data()
    return images.clone(), labels.clone(), classes


def accuracy(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = BATCH_SIZE
) -> float:
    """Lesson 4.5.2's ``accuracy`` on tensors in memory, in the loader's batches.

    Puts ``model`` in eval mode and returns ``correct / total`` (a Python
    float) over ``images`` ``(N, 1, 28, 28)`` split into batches of
    ``batch_size`` in order, the batches ``test_loader`` serves, so the result
    is the one ``accuracy(model, test_loader)`` prints.
    """
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in zip(images.split(batch_size), labels.split(batch_size)):
            correct += (model(x).argmax(dim=1) == y).sum().item()
    return correct / len(labels)


# ---------------------------------------------------------------------------
# The lesson's computations, one function per exercise
# ---------------------------------------------------------------------------


def lab1(
    network: nn.Module, linear: nn.Module, images: torch.Tensor, labels: torch.Tensor, classes
) -> dict:
    """Lab Exercise 1, "The Linear Model, Read by Column and Moved" (Solution 1).

    Returns the contract's q1 names: ``weight_shape``, ``bias_shape``,
    ``true_class``, ``predicted_class``, ``trouser_logit_by_hand``,
    ``trouser_logit``, ``trouser_weight_peak``, ``order``,
    ``scrambled_accuracy``, ``saved_accuracy_on_mixed``, ``shift_accuracies``,
    ``slide_accuracy``, ``trouser_classes_moved``, ``falls_further``. The
    order has its own generator; building the reordered model draws from
    torch's global one (call it inside ``fork_rng``).
    """
    weight, bias = linear[1].weight.detach(), linear[1].bias.detach()
    trouser, label = images[2], int(labels[2])
    flat = trouser.flatten()
    with torch.no_grad():
        logits = linear(trouser.unsqueeze(0))
        by_hand = weight[1] @ flat + bias[1]
    row = weight[1]
    out = {
        "weight_shape": weight.shape,
        "bias_shape": bias.shape,
        "true_class": classes[label],
        "predicted_class": classes[logits.argmax().item()],
        "trouser_logit_by_hand": by_hand.item(),
        "trouser_logit": logits[0, 1].item(),
        "trouser_weight_peak": (divmod(int(row.argmax()), 28), round(row.max().item(), 4)),
    }

    order = torch.randperm(784, generator=torch.Generator().manual_seed(7))
    scrambled = linear_model()
    scrambled.load_state_dict(linear.state_dict())
    with torch.no_grad():
        scrambled[1].weight.copy_(weight[:, order])
    mixed = images.flatten(1)[:, order].view(-1, 1, 28, 28)
    out["order"] = order
    out["scrambled_accuracy"] = accuracy(scrambled, mixed, labels)
    out["saved_accuracy_on_mixed"] = accuracy(linear, mixed, labels)

    out["shift_accuracies"] = {
        (dims, pixels): accuracy(linear, torch.roll(images, shifts=pixels, dims=dims), labels)
        for dims, shifts in ((3, (0, 1, 2, 4, 8)), (2, (1, 2, 4)))
        for pixels in shifts
    }
    out["slide_accuracy"] = accuracy(linear, slide(images, 2), labels)
    with torch.no_grad():
        out["trouser_classes_moved"] = [
            classes[linear(torch.roll(trouser.unsqueeze(0), shifts=pixels, dims=3)).argmax().item()]
            for pixels in range(4)
        ]
    # The comment the lab asks for, computed: which model falls further at two
    # pixels right (roll), from both models' scores in place and moved.
    moved = torch.roll(images, shifts=2, dims=3)
    network_fall = accuracy(network, images, labels) - accuracy(network, moved, labels)
    linear_fall = out["shift_accuracies"][(3, 0)] - out["shift_accuracies"][(3, 2)]
    out["falls_further"] = "network" if network_fall > linear_fall else "linear"
    return out


def lab2(network: nn.Module, images: torch.Tensor, labels: torch.Tensor, classes) -> dict:
    """Lab Exercise 2, "A Sneaker Moved Down, and Sixteen Filters" (Solution 2).

    Returns the contract's q2 names: ``sneaker_moved``, ``class_accuracy``,
    ``sneaker_landing``, ``conv_parameters``, ``maps_shape``,
    ``filter3_by_hand``, ``filter3_layer``, ``down_rows_both_hold``,
    ``down_whole_height``, ``sneaker_edge_rows_lit``, ``cost_table``. Seeds
    torch's global generator with 42 (call it inside ``fork_rng``).
    """
    sneaker = images[9:10]
    out = {}
    with torch.no_grad():
        moved_down = []
        for pixels in range(4):
            probs = torch.softmax(network(torch.roll(sneaker, shifts=pixels, dims=2)), dim=1)
            moved_down.append((classes[probs.argmax().item()], round(probs.max().item(), 3)))
        out["sneaker_moved"] = moved_down
        # all 10,000 at once, as the solution does
        pred = network(images).argmax(dim=1)
        pred_moved = network(torch.roll(images, shifts=3, dims=2)).argmax(dim=1)
    class_accuracy = {}
    for c in (5, 7, 9):
        rows = labels == c
        before = (pred[rows] == c).float().mean().item()
        after = (pred_moved[rows] == c).float().mean().item()
        class_accuracy[classes[c]] = (before, after)
    out["class_accuracy"] = class_accuracy
    out["sneaker_landing"] = torch.bincount(pred_moved[labels == 7], minlength=10)

    torch.manual_seed(42)
    conv = nn.Conv2d(1, 16, kernel_size=5)
    out["conv_parameters"] = {
        name: (tuple(p.shape), p.numel()) for name, p in conv.named_parameters()
    }
    moved = torch.roll(sneaker, shifts=2, dims=2)
    with torch.no_grad():
        maps = conv(sneaker)
        maps_moved = conv(moved)
    out["maps_shape"] = tuple(maps.shape)
    # q2_4 compares them, or the student's maps (carried)
    out["maps"], out["maps_moved"] = maps, maps_moved
    out["filter3_by_hand"] = window_sum(sneaker[0, 0], conv.weight[3, 0], conv.bias[3], 12, 9)
    out["filter3_layer"] = maps[0, 3, 12, 9].item()
    out["down_rows_both_hold"] = bool(torch.allclose(maps_moved[:, :, 2:], maps[:, :, :-2]))
    out["down_whole_height"] = bool(torch.allclose(maps_moved, torch.roll(maps, shifts=2, dims=2)))
    out["sneaker_edge_rows_lit"] = (
        (sneaker[0, 0, :2] > 0).any().item(),
        (sneaker[0, 0, -2:] > 0).any().item(),
    )
    params = sum(p.numel() for p in conv.parameters())
    # side, a 128-unit first layer's weights (nn.Linear(side * side, 128).weight.numel()),
    # the convolution's parameters, its multiplications per image
    out["cost_table"] = [
        (side, side * side * 128, params, (side - 4) * (side - 4) * 16 * 25)
        for side in (28, 56, 112)
    ]
    return out


def edges_values(
    x: torch.Tensor,
    vertical: torch.Tensor,
    horizontal: torch.Tensor,
    *,
    network: nn.Module | None = None,
    classes=None,
) -> dict:
    """The edges.py assignment's quantities, computed from a given ``x``, ``vertical``,
    ``horizontal``.

    Lesson 4.5.3, "Assignment: An Edge Filter Written by Hand" (its
    Solution), from the line ``edges = F.conv2d(x, vertical)`` on. The
    contract grades the later q3 parts against this computation applied to
    the reference ``x`` and the student's own ``vertical`` and ``horizontal``
    when they are sensible filters ("errors carried forward",
    ``autograder.checks.where_mlps_fail._edge_inputs``), so a wrong filter
    costs its own part once.

    Args:
        x: the image batch ``(1, 1, 28, 28)``.
        vertical, horizontal: filters ``(1, 1, 3, 3)``.
        network: if given, ``trouser_verdicts`` is computed with it (the
            network's class and probability, 4 decimals, for ``x`` in place
            and rolled 3 right).
        classes: the class names for ``trouser_verdicts``; default the test
            set's.

    Returns:
        A dict with ``edges``, ``edges_peak``, ``edges_moved``,
        ``edges_moved_peak``, ``edges_move_with``, ``padded_shape``,
        ``padded_inside_equal``, ``layer_matches``, ``flat_edges``,
        ``flat_edges_peak``, ``absolute_sums`` (2 decimals), ``fig`` (the
        figure's facts, ``{"n_axes": ..., "image_shapes": [...]}``, from a
        figure drawn as the Solution draws it) and, with ``network``,
        ``trouser_verdicts``. The caller's global random state is left as it
        was (the ``nn.Conv2d`` is built inside ``fork_rng``).

    Raises:
        TypeError: an argument is not a tensor.
        ValueError: a shape is not the one above.
    """
    from matplotlib.figure import Figure  # no pyplot: the caller's backend is untouched

    for name, t, shape in (
        ("x", x, (1, 1, 28, 28)),
        ("vertical", vertical, (1, 1, 3, 3)),
        ("horizontal", horizontal, (1, 1, 3, 3)),
    ):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
    out = {}
    with torch.no_grad():
        edges = F.conv2d(x, vertical)
        out["edges"] = edges
        out["edges_peak"] = peak(edges)
        edges_moved = F.conv2d(torch.roll(x, shifts=3, dims=3), vertical)
        out["edges_moved"] = edges_moved
        out["edges_moved_peak"] = peak(edges_moved)
        out["edges_move_with"] = compare_shared(edges_moved, edges, 3)
        padded = F.conv2d(x, vertical, padding=1)
        out["padded_shape"] = tuple(padded.shape)
        out["padded_inside_equal"] = bool(torch.allclose(padded[..., 1:-1, 1:-1], edges))
        with torch.random.fork_rng(devices=[]):
            layer = nn.Conv2d(1, 1, kernel_size=3, bias=False)
        layer.weight.copy_(vertical)
        out["layer_matches"] = bool(torch.allclose(layer(x), edges))
        flat_edges = F.conv2d(x, horizontal)
        out["flat_edges"] = flat_edges
        out["flat_edges_peak"] = peak(flat_edges)
        out["absolute_sums"] = (
            round(edges.abs().sum().item(), 2),
            round(flat_edges.abs().sum().item(), 2),
        )

    fig = Figure(figsize=(12, 4))
    axes = fig.subplots(1, 3)
    axes[0].imshow(x[0, 0].detach().cpu().numpy(), cmap="gray")
    limit = edges.abs().max().item()
    for ax, m in ((axes[1], edges), (axes[2], flat_edges)):
        ax.imshow(m[0, 0].cpu().numpy(), cmap="coolwarm", vmin=-limit, vmax=limit)
    out["fig"] = {
        "n_axes": len(fig.axes),
        "image_shapes": [tuple(ax.images[0].get_array().shape) for ax in axes],
    }

    if network is not None:
        classes = _test_data()[2] if classes is None else classes
        verdicts = []
        with torch.no_grad():
            for pixels in (0, 3):
                probs = torch.softmax(network(torch.roll(x, shifts=pixels, dims=3)), dim=1)
                verdicts.append((classes[probs.argmax().item()], round(probs.max().item(), 4)))
        out["trouser_verdicts"] = verdicts
    return out


def edges_assignment(
    network: nn.Module, images: torch.Tensor, labels: torch.Tensor, classes
) -> dict:
    """The assignment "An Edge Filter Written by Hand" (edges.py, its Solution).

    Returns the contract's q3 names: ``x``, ``trouser_class``, ``vertical``,
    ``horizontal``, and everything :func:`edges_values` computes from them
    (``edges`` ... ``fig``, ``trouser_verdicts``).
    """
    x = images[2:3].clone()
    rows = [[-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]]
    vertical = torch.tensor(rows).view(1, 1, 3, 3)
    horizontal = vertical.transpose(2, 3)
    out = {
        "x": x,
        "trouser_class": classes[int(labels[2])],
        "vertical": vertical,
        "horizontal": horizontal,
    }
    out.update(edges_values(x, vertical, horizontal, network=network, classes=classes))
    return out


def answer4(network: nn.Module, linear: nn.Module, images: torch.Tensor) -> dict:
    """Answer 4's computation: a filter in front of a flattened layer.

    Returns the contract's q5 names: ``counts``, ``total_count``,
    ``row_shape``, ``changed``, ``at_272``, ``at_274``, ``model_counts``.
    Seeds torch's global generator with 42 (call it inside ``fork_rng``).
    """
    shirt = images[7:8]
    moved = torch.roll(shirt, shifts=2, dims=3)
    torch.manual_seed(42)
    model = nn.Sequential(nn.Conv2d(1, 8, kernel_size=3), nn.Flatten(), nn.Linear(8 * 26 * 26, 10))
    counts = [p.numel() for p in model.parameters()]
    with torch.no_grad():
        row = model[1](model[0](shirt))
        row_moved = model[1](model[0](moved))
    return {
        "counts": counts,
        "total_count": sum(counts),
        "row_shape": tuple(row.shape),
        "changed": ((row_moved - row).abs() > 1e-4).sum().item(),
        "at_272": row[0, 272].item(),
        "at_274": row_moved[0, 274].item(),
        "model_counts": (
            sum(p.numel() for p in network.parameters()),
            sum(p.numel() for p in linear.parameters()),
        ),
    }


def _compute() -> dict:
    """Every value of the contract, at the caller's thread count, the global RNG kept."""
    network, linear = load_models()
    images, labels, classes = _test_data()
    with torch.random.fork_rng(devices=[]):
        result = {}
        result.update(lab1(network, linear, images, labels, classes))
        result.update(lab2(network, images, labels, classes))
        result.update(edges_assignment(network, images, labels, classes))
        result.update(answer4(network, linear, images))
    return result


#: Threads :func:`answers` computes on. On this machine kind (2 cores) the
#: values are bitwise the same at one thread as at two (a test checks it),
#: and one thread is 3 to 8 times faster when other processes compete for the
#: cores, as they do when several submissions are graded at once.
THREADS = 1


def _compute_at_threads() -> dict:
    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        return _compute()
    finally:
        torch.set_num_threads(previous)


@functools.cache
def _answers() -> dict:
    # once per batch of gradings when the grader names a cache folder (autograder.answers_cache)
    from autograder.answers_cache import cached

    return cached(
        "where_mlps_fail.answers",
        _compute_at_threads,
        sources=(__file__, NETWORK_FILE, LINEAR_FILE),
    )


def answers() -> dict:
    """The reference value of every value name of the contract (not the functions).

    Lesson 4.5.3's Lab Exercise 1 (q1), Lab Exercise 2 (q2), the edges.py
    assignment (q3) and Answer 4's computation (q5), as listed in
    ``assignments/where_mlps_fail/answers.md``, computed with the committed weights
    on the test images of this machine. Computed once per process (cached;
    once per batch of gradings, :mod:`autograder.answers_cache`);
    each call returns a deep copy, so a caller that changes a value does not
    change what the next caller gets. ``answers()["fig"]`` is the figure's
    facts, ``{"n_axes": 3, "image_shapes": [(28, 28), (26, 26), (26, 26)]}``.
    """
    return copy.deepcopy(_answers())


def fill_answers_cache() -> None:
    """Compute into the answers cache (:mod:`autograder.answers_cache`, the folder its variable
    names) every reference value a grading of a correct notebook reads: :func:`answers`. Run where
    the grading environment is built (``docker/install.sh``), so that no grading computes it."""
    answers()
