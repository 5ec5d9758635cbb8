"""Reference solution for the assignment ``when_it_fails``.

Specification: Chapter 6 "When It Fails: Generalization in Pictures, and
Inductive Bias" (course text ``000_2f4f6a405644238c.txt``) and issue 5. The
graded names, their types and values are listed in
``assignments/when_it_fails/answers.md`` (the contract).

What is here:

- the data: :func:`make_split` (the seeded split fixed before any experiment:
  1,000 fitting and 200 validation images drawn from Fashion-MNIST's 60,000
  training images, 600 sealed test images drawn from its 10,000 test images)
  and :func:`load_split`, the six tensors, images flattened to 784 numbers;
- the student functions, with the chapter's semantics: :func:`train_mlp`,
  :func:`shift_right`, :func:`weight_for_permuted`, :func:`random_shifts`,
  plus :func:`accuracy` (what the notebook's ``fashion.accuracy`` computes),
  :func:`shift` (either direction) and :func:`distance_ratio`;
- :func:`answers`, the reference value of every value name of the contract
  that does not depend on training (split, pixel shuffle, parameter counts,
  distance concentration, Exercise 5), exact on every machine;
- :func:`trained_answers`, the two trained models the checks compare with
  (the chapter's MLP on the fitting images, and on all 1,200 development
  images for the sealed test), computed on whichever data the student's
  notebook holds (errors carried forward) and cached per data;
- :func:`chapter_run`, everything the chapter trains (shuffled pixels, the
  width sweep, augmentation, random labels) for ``tests/reference``.

Training is deterministic for a given thread count: ``train_mlp`` seeds
torch's global generator (the initial weights) and a generator of its own
(the batch order). The sums inside a matrix product are split differently at
one thread than at two, so a model trained at two threads differs in the last
bits and, after 300 Adam steps, in a handful of validation predictions. The
reference therefore trains at :data:`THREADS` thread(s) and the checks grade
every training-dependent answer in a band, with the reason next to it.

Side effects: none on the caller. Everything seeds torch inside
``torch.random.fork_rng``, computes at :data:`THREADS` thread(s) and
restores the caller's thread count. Nothing is loaded at import time.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import operator

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "SPLIT_SEED",
    "N_TRAIN_IMAGES",
    "N_TEST_IMAGES",
    "N_FIT",
    "N_VALIDATION",
    "N_DEV",
    "N_TEST",
    "HIDDEN",
    "EPOCHS",
    "LEARNING_RATE",
    "BATCH_SIZE",
    "SHIFTS",
    "PERM_SEED",
    "WIDTHS",
    "SWEEP_SIZES",
    "SWEEP_EPOCHS",
    "DIMS",
    "N_POINTS",
    "POINT_SEED",
    "AUG_MAX_SHIFT",
    "AUG_SEEDS",
    "AUG_EPOCHS",
    "MEMO_HIDDEN",
    "MEMO_EPOCHS",
    "LABEL_SEED",
    "THREADS",
    "make_split",
    "select",
    "load_split",
    "mlp",
    "train_mlp",
    "train_mlp_with_a_loader",
    "accuracy",
    "shift_right",
    "shift",
    "random_shifts",
    "weight_for_permuted",
    "distance_ratio",
    "distance_ratios",
    "exercise5",
    "answers",
    "trained_answers",
    "chapter_run",
]

# ------------------------------------------------------------------ the recipe

#: The split (Section 6.1): drawn once, by a generator seeded 0.
SPLIT_SEED = 0
N_TRAIN_IMAGES, N_TEST_IMAGES = 60_000, 10_000
N_FIT, N_VALIDATION, N_TEST = 1_000, 200, 600
N_DEV = N_FIT + N_VALIDATION
#: The chapter's MLP and its training (Chapters 3 and 4): 784 -> HIDDEN -> 10,
#: Adam at 1e-3, minibatches of 100 in an order drawn by a seeded generator.
HIDDEN, EPOCHS, LEARNING_RATE, BATCH_SIZE = 256, 30, 1e-3, 100
#: The accuracy-against-shift table: 0 to 4 pixels right.
SHIFTS = (0, 1, 2, 3, 4)
#: ``torch.manual_seed(0); pixel_perm = torch.randperm(784)`` (Section 6.2).
PERM_SEED = 0
#: The width sweep (Figure 6.3).
WIDTHS, SWEEP_SIZES, SWEEP_EPOCHS = (2, 4, 8, 16, 64, 256), (300, 1000), 60
#: Distance concentration (Figure 6.4): 300 uniform points, seed 0 for every d.
DIMS, N_POINTS, POINT_SEED = (2, 4, 8, 16, 32, 64, 128, 256, 784), 300, 0
#: Exercise 2: three shifted copies of the fitting set, shifts drawn in
#: -3 .. 3 by generators seeded 1, 2, 3; 15 epochs over the 4,000 images.
AUG_MAX_SHIFT, AUG_SEEDS, AUG_EPOCHS = 3, (1, 2, 3), 15
#: Exercise 4: labels permuted by a generator seeded 0; a 512-unit MLP, 60 epochs.
MEMO_HIDDEN, MEMO_EPOCHS, LABEL_SEED = 512, 60, 0

#: Threads the reference trains on (see the module docstring).
THREADS = 1


# ------------------------------------------------------------------ data


def make_split(seed: int = SPLIT_SEED) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The seeded split: ``(fit, validation, test)`` index tensors (int64).

    One generator seeded ``seed`` draws a permutation of the 60,000 training
    images, whose first 1,200 are the development set (the first 1,000 fit,
    the next 200 validate), then a permutation of the 10,000 test images,
    whose first 600 are the sealed test set::

        g = torch.Generator().manual_seed(seed)
        dev = torch.randperm(60000, generator=g)[:1200]
        test = torch.randperm(10000, generator=g)[:600]
        return dev[:1000], dev[1000:], test

    Fit and validation are disjoint (one permutation), and the test images
    come from the other file, so nothing is shared.
    """
    if isinstance(seed, bool):
        raise TypeError("seed must be an integer, not a bool")
    seed = operator.index(seed)
    g = torch.Generator().manual_seed(seed)
    dev = torch.randperm(N_TRAIN_IMAGES, generator=g)[:N_DEV]
    test = torch.randperm(N_TEST_IMAGES, generator=g)[:N_TEST]
    return dev[:N_FIT], dev[N_FIT:], test


@functools.cache
def _raw() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fashion-MNIST's bytes: train images (60000, 784) uint8, labels, test images, labels."""
    from autograder.data import fashion_mnist

    train, test = fashion_mnist(train=True), fashion_mnist(train=False)
    return (
        train.data.reshape(N_TRAIN_IMAGES, 784),
        train.targets.clone(),
        test.data.reshape(N_TEST_IMAGES, 784),
        test.targets.clone(),
    )


def select(train: bool, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``idx`` of the training (or test) file: float32 ``(n, 784)`` in [0, 1] (byte / 255),
    int64 labels."""
    images, labels, test_images, test_labels = _raw()
    if not train:
        images, labels = test_images, test_labels
    return images[idx].to(torch.float32).div_(255), labels[idx].clone()


def unseen_test_images(X_test: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The test file's images that are not rows of ``X_test``: float32 ``(m, 784)`` (byte / 255),
    int64 labels.

    ``X_test`` ``(n, 784)`` holds test-file images (byte / 255), as a split's
    sealed test set does; the rest of the file (9,400 images beside the
    reference's 600) is what a network that never saw ``X_test`` must find
    exactly as hard (the sealed test check of Section 6.5, graded in q9).
    """
    _, _, test_images, _ = _raw()
    taken = {row.tobytes() for row in torch.round(X_test.detach() * 255).to(torch.uint8).numpy()}
    keep = torch.tensor([row.tobytes() not in taken for row in test_images.numpy()])
    return select(False, torch.nonzero(keep).flatten())


def load_split(seed: int = SPLIT_SEED) -> dict[str, torch.Tensor]:
    """The six tensors of the split and the development set, images flattened to 784.

    Returns ``X_tr, y_tr`` (1,000), ``X_val, y_val`` (200), ``X_dev, y_dev``
    (the 1,200 development images: fit then validation) and ``X_test, y_test``
    (600). Values are what ``ToTensor`` gives (byte / 255).
    """
    fit, val, test = make_split(seed)
    X_tr, y_tr = select(True, fit)
    X_val, y_val = select(True, val)
    X_test, y_test = select(False, test)
    return {
        "X_tr": X_tr,
        "y_tr": y_tr,
        "X_val": X_val,
        "y_val": y_val,
        "X_dev": torch.cat([X_tr, X_val]),
        "y_dev": torch.cat([y_tr, y_val]),
        "X_test": X_test,
        "y_test": y_test,
    }


# ------------------------------------------------------------------ the student functions


def mlp(hidden: int = HIDDEN) -> nn.Sequential:
    """The chapter's MLP: Linear(784, hidden), ReLU, Linear(hidden, 10). 203,530 parameters at
    256."""
    return nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def train_mlp(
    X: torch.Tensor, y: torch.Tensor, hidden: int = HIDDEN, epochs: int = EPOCHS, seed: int = 0
) -> nn.Sequential:
    """The chapter's MLP trained as in Chapter 4: Adam (lr 1e-3), cross-entropy, minibatches of 100.

    ``torch.manual_seed(seed)`` before the model is built (its initial
    weights), and the batch order of every epoch from
    ``torch.randperm(len(X), generator=g)`` with ``g`` seeded ``seed`` (a
    ``DataLoader(..., shuffle=True, generator=g)`` draws another order from
    the same generator: another seed of the same recipe). The same seed
    gives the same weights at a given thread count.

    Args:
        X: float32 images ``(n, 784)``; y: int64 labels ``(n,)``.
        hidden: the hidden layer's width; epochs: passes over ``X``.

    Returns:
        The trained ``nn.Sequential`` in eval mode. Seeds torch's global
        generator, as the notebook's version does (call it inside
        ``fork_rng`` to keep yours).
    """
    torch.manual_seed(seed)
    net = mlp(hidden)
    optimizer = torch.optim.Adam(net.parameters(), lr=LEARNING_RATE)
    order_gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(X), generator=order_gen)
        for start in range(0, len(X), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            loss = F.cross_entropy(net(X[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return net.eval()


def train_mlp_with_a_loader(
    X: torch.Tensor, y: torch.Tensor, hidden: int = HIDDEN, epochs: int = EPOCHS, seed: int = 0
) -> nn.Sequential:
    """:func:`train_mlp` with its batches from ``DataLoader(TensorDataset(X, y), batch_size=100,
    shuffle=True, generator=g)``, ``g`` seeded ``seed``: the loader draws a base seed from ``g``
    before each epoch's ``randperm``, so another order from the same generator. The checks accept it
    as the recipe written with a loader. Same arguments and result as :func:`train_mlp`.
    """
    torch.manual_seed(seed)
    net = mlp(hidden)
    optimizer = torch.optim.Adam(net.parameters(), lr=LEARNING_RATE)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X, y),
        batch_size=BATCH_SIZE,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    for _ in range(epochs):
        for images, labels in loader:
            loss = F.cross_entropy(net(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return net.eval()


def accuracy(net, X: torch.Tensor, y: torch.Tensor) -> float:
    """The fraction of ``X`` whose largest logit is at ``y`` (the notebook's
    ``fashion.accuracy``)."""
    with torch.no_grad():
        return (net(X).argmax(dim=1) == y).float().mean().item()


def shift(x: torch.Tensor, s: int) -> torch.Tensor:
    """Flattened 28 by 28 images moved ``s`` columns right (``s < 0``: left), black coming in.

    ``x`` is ``(..., 784)``; ``|s| <= 28`` (28 leaves a black image). Returns
    a new tensor of ``x``'s shape and dtype; ``x`` is not modified.
    """
    if isinstance(s, bool):
        raise TypeError("s must be an integer, not a bool")
    s = operator.index(s)
    if not isinstance(x, torch.Tensor) or x.shape[-1:] != (784,):
        raise ValueError("x must be a tensor of flattened 28 by 28 images, shape (..., 784)")
    if not -28 <= s <= 28:
        raise ValueError(f"s must be between -28 and 28, got {s}")
    images = x.reshape(*x.shape[:-1], 28, 28)
    out = torch.zeros_like(images)
    if s > 0:
        out[..., s:] = images[..., : 28 - s]
    elif s < 0:
        out[..., : 28 + s] = images[..., -s:]
    else:
        out.copy_(images)
    return out.reshape(x.shape)


def shift_right(x: torch.Tensor, s: int) -> torch.Tensor:
    """Flattened images ``(N, 784)`` moved ``s`` pixels right, black (zero) filled in on the left.

    ``0 <= s <= 27``; ``shift_right(x, 0)`` equals ``x``. Each image is
    reshaped to 28 by 28, moved along its columns (not along the flat
    vector, which would carry pixels into the next row, and not with
    ``torch.roll``, which wraps the right edge around) and flattened back.
    """
    if isinstance(s, bool):
        raise TypeError("s must be an integer, not a bool")
    s = operator.index(s)
    if not 0 <= s <= 27:
        raise ValueError(f"s must be between 0 and 27, got {s}")
    return shift(x, s)


def weight_for_permuted(W: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """Exercise 1: the first-layer weight that makes the network on ``P x`` the network on ``x``.

    ``(W P^T)(P x) = W (P^T P) x = W x``, since a permutation matrix is
    orthogonal. For ``P = torch.eye(784)[pixel_perm]`` (so that ``P x`` is
    ``x[pixel_perm]``), ``W P^T`` is ``W[:, pixel_perm]``: the columns
    permuted the way the pixels were.
    """
    return W @ P.T


def random_shifts(X: torch.Tensor, max_shift: int, seed: int) -> torch.Tensor:
    """Exercise 2: every image of ``X`` (``(N, 784)``) moved by its own random shift in ``-max_shift
    .. max_shift``.

    The shifts are ``torch.randint(-max_shift, max_shift + 1, (N,),
    generator=torch.Generator().manual_seed(seed))``, black filled in.
    """
    g = torch.Generator().manual_seed(seed)
    amounts = torch.randint(-max_shift, max_shift + 1, (len(X),), generator=g)
    out = torch.empty_like(X)
    for s in range(-max_shift, max_shift + 1):
        rows = amounts == s
        out[rows] = shift(X[rows], s)
    return out


def distance_ratio(points: torch.Tensor) -> float:
    """The mean over points of (distance to the nearest other point) / (distance to the
    farthest)."""
    d = torch.cdist(points, points)
    d.fill_diagonal_(float("inf"))
    nearest = d.min(dim=1).values
    d.fill_diagonal_(0.0)
    farthest = d.max(dim=1).values
    return (nearest / farthest).mean().item()


def distance_ratios(dims=DIMS, n_points: int = N_POINTS, seed: int = POINT_SEED) -> list[float]:
    """Figure 6.4: for each ``d``, ``torch.manual_seed(seed); torch.rand(n_points, d)`` and its
    ratio.

    Seeds torch's global generator (call inside ``fork_rng``). About 0.89 at
    ``d = 784``, as the chapter prints.
    """
    ratios = []
    for d in dims:
        torch.manual_seed(seed)
        ratios.append(distance_ratio(torch.rand(n_points, d)))
    return ratios


def exercise5(hidden: int = 1000) -> dict[str, float | int]:
    """Exercise 5: first-layer weights on a 224x224x3 input, their float32 megabytes, and with 7x7x3
    patches."""
    full = 224 * 224 * 3 * hidden
    return {
        "first_layer_params": full,
        "first_layer_mb": full * 4 / 1e6,
        "patch_params": 7 * 7 * 3 * hidden,
    }


# ------------------------------------------------------------------ answers


def _compute_exact() -> dict:
    data = load_split(SPLIT_SEED)
    fit, val, test = make_split(SPLIT_SEED)
    out = {"split": (fit, val, test)}
    out.update(data)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(PERM_SEED)
        out["pixel_perm"] = torch.randperm(784)
        out["ratios"] = distance_ratios()
    out["n_params"] = sum(p.numel() for p in mlp(HIDDEN).parameters())
    out["P"] = torch.eye(784)[out["pixel_perm"]]
    out.update(exercise5())
    return out


def _compute_exact_at_threads() -> dict:
    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        with torch.random.fork_rng(devices=[]):  # building mlp() for n_params draws initial weights
            return _compute_exact()
    finally:
        torch.set_num_threads(previous)


@functools.cache
def _exact() -> dict:
    # once per batch of gradings when the grader names a cache folder (autograder.answers_cache)
    from autograder.answers_cache import cached

    return cached("when_it_fails.answers", _compute_exact_at_threads, sources=(__file__,))


def answers() -> dict:
    """The reference value of every value name that does not depend on training (a deep copy).

    ``split`` (the three index tensors of ``make_split(0)``), ``X_tr`` ...
    ``y_test``, ``pixel_perm``, ``P``, ``n_params`` (203,530), ``ratios``
    (one per :data:`DIMS`), ``first_layer_params``, ``first_layer_mb``,
    ``patch_params``. Computed once per process, or once per batch of
    gradings (:mod:`autograder.answers_cache`).
    """
    return copy.deepcopy(_exact())


def _digest(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().contiguous().cpu()
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


_TRAINED: dict[str, dict] = {}


def trained_answers(X_tr=None, y_tr=None, X_val=None, y_val=None, X_test=None, y_test=None) -> dict:
    """The reference's trained results on the given data (default: the reference split).

    Trains the chapter's MLP on ``X_tr`` (``val_acc`` on ``X_val``; the shift
    table ``shift_accs`` on it) and on ``X_tr`` then ``X_val`` together
    (``test_clean``, ``test_shift2`` on ``X_test``; ``final_weights``, that
    network's four parameters, to compare a student's with; ``net_weights``
    and ``loader_net_weights``, the first network's and the same recipe's with a
    shuffling ``DataLoader``, :func:`train_mlp_with_a_loader`), at :data:`THREADS`
    thread(s), with the caller's random state kept. Cached per data, so the
    checks of several questions train once; about 2 s of CPU.
    """
    ref = _exact()
    given = (X_tr, y_tr, X_val, y_val, X_test, y_test)
    if any(t is None for t in given):
        given = tuple(ref[k] for k in ("X_tr", "y_tr", "X_val", "y_val", "X_test", "y_test"))
    key = _digest(*given)
    if key not in _TRAINED:
        from autograder.answers_cache import cached

        # once per batch of gradings (per data) when the grader names a cache folder
        _TRAINED[key] = cached(
            f"when_it_fails.trained.{key[:32]}", lambda: _train_on(*given), sources=(__file__,)
        )
    return copy.deepcopy(_TRAINED[key])


def _train_on(X_tr, y_tr, X_val, y_val, X_test, y_test) -> dict:
    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        with torch.random.fork_rng(devices=[]):
            net = train_mlp(X_tr, y_tr)
            net_final = train_mlp(torch.cat([X_tr, X_val]), torch.cat([y_tr, y_val]))
            loader_net = train_mlp_with_a_loader(X_tr, y_tr)
        return {
            "net_weights": [p.detach().clone() for p in net.parameters()],
            "loader_net_weights": [p.detach().clone() for p in loader_net.parameters()],
            "val_acc": accuracy(net, X_val, y_val),
            "shift_accs": [accuracy(net, shift_right(X_val, s), y_val) for s in SHIFTS],
            "test_clean": accuracy(net_final, X_test, y_test),
            "test_shift2": accuracy(net_final, shift_right(X_test, 2), y_test),
            "final_weights": [p.detach().clone() for p in net_final.parameters()],
        }
    finally:
        torch.set_num_threads(previous)


def chapter_run(sweep: bool = True) -> dict:
    """Everything the chapter trains, on the reference split, for ``tests/reference`` (about 15 s).

    Returns ``val_acc``, ``shift_accs``, ``shuffled_acc``, ``test_clean``,
    ``test_shift2``, ``aug_accs``, ``memo_train_acc``, ``memo_val_acc`` and,
    with ``sweep``, ``sweep_errors`` ``{n: [error per width]}``.
    """
    d = _exact()
    X_tr, y_tr, X_val, y_val = d["X_tr"], d["y_tr"], d["X_val"], d["y_val"]
    perm = d["pixel_perm"]
    previous = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        with torch.random.fork_rng(devices=[]):
            out = dict(trained_answers())
            net_shuffled = train_mlp(X_tr[:, perm], y_tr)
            out["shuffled_acc"] = accuracy(net_shuffled, X_val[:, perm], y_val)
            X_aug = torch.cat([X_tr] + [random_shifts(X_tr, AUG_MAX_SHIFT, s) for s in AUG_SEEDS])
            y_aug = y_tr.repeat(1 + len(AUG_SEEDS))
            net_aug = train_mlp(X_aug, y_aug, epochs=AUG_EPOCHS)
            out["aug_accs"] = [accuracy(net_aug, shift_right(X_val, s), y_val) for s in SHIFTS]
            y_random = y_tr[
                torch.randperm(N_FIT, generator=torch.Generator().manual_seed(LABEL_SEED))
            ]
            net_memo = train_mlp(X_tr, y_random, hidden=MEMO_HIDDEN, epochs=MEMO_EPOCHS)
            out["memo_train_acc"] = accuracy(net_memo, X_tr, y_random)
            out["memo_val_acc"] = accuracy(net_memo, X_val, y_val)
            if sweep:
                out["sweep_errors"] = {
                    n: [
                        1
                        - accuracy(
                            train_mlp(X_tr[:n], y_tr[:n], hidden=h, epochs=SWEEP_EPOCHS),
                            X_val,
                            y_val,
                        )
                        for h in WIDTHS
                    ]
                    for n in SWEEP_SIZES
                }
    finally:
        torch.set_num_threads(previous)
    return out


def fill_answers_cache() -> None:
    """Compute into the answers cache (:mod:`autograder.answers_cache`, the folder its variable
    names) every reference value a grading of a correct notebook reads: :func:`answers` and the
    trainings on the reference split (:func:`trained_answers`). Run where the grading environment
    is built (``docker/install.sh``), so that no grading computes them."""
    answers()
    trained_answers()
