"""Fashion-MNIST for the lesson (Lesson 4.5.1's module).

``test_set``: the 10,000 test images, items ``(image, label)`` with
``image`` a float32 tensor ``(1, 28, 28)`` in [0, 1]. ``test_loader``: the
test set in ten unshuffled batches of 1,000, ``(N, 1, 28, 28)`` images.
``train_set`` / ``validation_set``: Lesson 4.5.2's 50,000 / 10,000 split of
the training images, read from disk the first time either name is used
(Lesson 4.5.3 never does). Where the files come from: ``autograder.data``.
"""

from torch.utils.data import DataLoader

from autograder.data import fashion_mnist, train_validation_split

test_set = fashion_mnist(train=False)
test_loader = DataLoader(test_set, batch_size=1000, shuffle=False)


def __getattr__(name):
    if name in ("train_set", "validation_set"):
        globals()["train_set"], globals()["validation_set"] = train_validation_split(
            fashion_mnist(train=True)
        )
        return globals()[name]
    raise AttributeError(f"module 'fashion' has no attribute {name!r}")
