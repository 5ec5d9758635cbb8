"""The model and the loop of Lesson 4.5.2, imported by Lesson 4.5.3.

``mlp()`` seeds torch with 42 and builds Flatten, Linear(784, 128), ReLU,
Linear(128, 10): the network as it stood before its first step.
``accuracy(model, batches)`` takes a ``DataLoader`` or any iterable of
``(images, labels)`` pairs, images ``(N, 1, 28, 28)``, and returns the
fraction of labels the model's largest logit names, a float in [0, 1].
``loss_fn`` is the cross-entropy both models were trained with.
"""

import torch
from torch import nn

loss_fn = nn.CrossEntropyLoss()


def mlp():
    """The lesson's network, freshly seeded (42): untrained it scores 0.1173."""
    torch.manual_seed(42)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def accuracy(model, batches):
    """Fraction of correct predictions over ``batches`` of ``(images, labels)``."""
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in batches:
            correct += (model(x).argmax(dim=1) == y).sum().item()
            total += len(y)
    return correct / total
