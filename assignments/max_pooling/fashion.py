"""Fashion-MNIST's test images for max_pooling (Lesson 4.5.1's module, the test set only).

``test_set``: the 10,000 test images, items ``(image, label)`` with ``image`` a float32 tensor
``(1, 28, 28)`` in [0, 1] (byte / 255, what ``ToTensor`` gives); ``test_set.classes`` names the ten
classes. Nothing is downloaded: where the files come from is ``autograder.data``'s business.
"""

from autograder.data import fashion_mnist

test_set = fashion_mnist(train=False)
