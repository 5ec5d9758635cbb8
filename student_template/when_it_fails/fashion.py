"""Fashion-MNIST for Chapter 6 ("When It Fails"), flattened and in memory.

``images(train, idx)``: the images ``idx`` of the 60,000 training images
(``train=True``) or of the 10,000 test images (``train=False``), as
``(X, y)``: ``X`` float32 ``(len(idx), 784)``, each 28 by 28 image flattened
row by row, grey levels byte / 255 in [0, 1] (what ``ToTensor`` gives);
``y`` int64 labels 0..9. ``classes``: the ten class names.
``accuracy(net, X, y)``: the fraction of ``X`` whose largest logit is at
``y``, as a Python float. Where the files come from: ``autograder.data``.
"""

import torch

from autograder.data import fashion_mnist

_train, _test = fashion_mnist(train=True), fashion_mnist(train=False)
classes = tuple(_test.classes)
N_TRAIN, N_TEST = len(_train.targets), len(_test.targets)  # 60,000 and 10,000


def images(train, idx):
    """``(X, y)`` for the images ``idx`` of the training (``train=True``) or test file."""
    source = _train if train else _test
    idx = torch.as_tensor(idx, dtype=torch.int64)
    X = source.data[idx].reshape(len(idx), 784).to(torch.float32) / 255
    return X, source.targets[idx].clone()


def accuracy(net, X, y):
    """The fraction of the images ``X`` (``(n, 784)``) that ``net`` gives its largest logit at the
    label ``y``."""
    with torch.no_grad():
        return (net(X).argmax(dim=1) == y).float().mean().item()
