"""Fashion-MNIST, found on this machine and served through torchvision.

Lesson 4.5.3 ("Where MLPs Fail") and Chapter 6 ("When It Fails") read
Fashion-MNIST as ``torchvision.datasets.FashionMNIST`` batches of shape
``(N, 1, 28, 28)``, float32 grey levels in [0, 1] (``ToTensor`` and nothing
else, so a pixel's value is its byte divided by 255).

The files are looked for in this order:

1. the folder named by the environment variable ``FASHION_MNIST_DIR``;
2. Debian's package ``dataset-fashion-mnist``
   (``/usr/share/datasets/fashion-mnist/``);
3. torchvision's own download, into the cache folder.

Debian ships the four ``.gz`` files; torchvision wants them unpacked under
``<root>/FashionMNIST/raw/``, so they are unpacked once into the cache
folder (``VISION_AUTOGRADER_CACHE``, default ``~/.cache/vision-autograder``).
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import torch

FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
ENV_DIR = "FASHION_MNIST_DIR"
ENV_CACHE = "VISION_AUTOGRADER_CACHE"

#: Lesson 4.5.2's split of the 60,000 training images: 50,000 to fit,
#: 10,000 to validate, drawn by a generator seeded 42.
TRAIN_SIZE, VALIDATION_SIZE, SPLIT_SEED = 50_000, 10_000, 42


class DataNotFoundError(FileNotFoundError):
    """Fashion-MNIST is in none of the places this module looks."""


def cache_dir() -> Path:
    """The folder this package writes unpacked data into (created on demand)."""
    return Path(os.environ.get(ENV_CACHE, Path.home() / ".cache" / "vision-autograder"))


def _has_files(folder: Path) -> bool:
    """True when all four IDX files are in ``folder``, plain or ``.gz``."""
    return all((folder / name).is_file() or (folder / f"{name}.gz").is_file() for name in FILES)


def _raw_folder(root: Path) -> Path:
    return root / "FashionMNIST" / "raw"


def _unpack_into(source: Path, root: Path) -> Path:
    """Unpack (or copy) the four IDX files of ``source`` to ``root/FashionMNIST/raw``.

    Writes each file to a temporary name first and renames it, so two
    processes unpacking at once never see half a file. Returns ``root``.
    """
    raw = _raw_folder(root)
    raw.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        target = raw / name
        if target.is_file():
            continue
        partial = raw / f".{name}.{os.getpid()}.partial"
        if (source / name).is_file():
            shutil.copyfile(source / name, partial)
        else:
            with gzip.open(source / f"{name}.gz", "rb") as packed, open(partial, "wb") as out:
                shutil.copyfileobj(packed, out)
        os.replace(partial, target)
    return root


def fashion_mnist_root(download: bool = True) -> Path:
    """The ``root`` to hand ``torchvision.datasets.FashionMNIST``.

    Looks in ``$FASHION_MNIST_DIR`` (a folder holding the four IDX files,
    plain or ``.gz``, or a torchvision root with ``FashionMNIST/raw/``),
    then Debian's ``/usr/share/datasets/fashion-mnist/``, then, if
    ``download`` is true, lets torchvision download into the cache folder.

    Raises:
        DataNotFoundError: none of the three places has the data; the message
            names each place and how to fill it.
    """
    tried = []
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        folder = Path(explicit)
        if _has_files(_raw_folder(folder)) and all(
            (_raw_folder(folder) / n).is_file() for n in FILES
        ):
            return folder
        if _has_files(folder):
            return _unpack_into(folder, cache_dir() / "fashion-mnist-from-env")
        tried.append(
            f"{ENV_DIR}={folder}: the four IDX files ({', '.join(FILES)}, plain or .gz) are not "
            f"all there"
        )
        import warnings

        warnings.warn(
            f"{ENV_DIR}={folder} does not hold the four Fashion-MNIST files; looking elsewhere",
            stacklevel=2,
        )
    else:
        tried.append(f"{ENV_DIR} is not set: set it to a folder holding the four IDX files")

    if _has_files(DEBIAN_DIR):
        return _unpack_into(DEBIAN_DIR, cache_dir())
    tried.append(
        f"{DEBIAN_DIR} has no data: as root, run "
        "'apt-get update && apt-get install -y dataset-fashion-mnist'"
    )

    root = cache_dir()
    if _has_files(_raw_folder(root)) and all((_raw_folder(root) / n).is_file() for n in FILES):
        return root
    if download:
        from torchvision.datasets import FashionMNIST

        try:
            FashionMNIST(root, train=False, download=True)
            FashionMNIST(root, train=True, download=True)
            return root
        except Exception as err:  # network errors come in many types
            tried.append(
                f"torchvision's download into {root} failed ({type(err).__name__}: {err}): "
                "it needs internet access"
            )
    else:
        tried.append(f"torchvision's download into {root} was not allowed (download=False)")
    raise DataNotFoundError(
        "Fashion-MNIST was not found. Tried, in order:\n  - " + "\n  - ".join(tried)
    )


def fashion_mnist(train: bool, download: bool = True):
    """``torchvision.datasets.FashionMNIST`` with ``ToTensor()``.

    Items are ``(image, label)``: ``image`` a float32 tensor ``(1, 28, 28)``
    in [0, 1], ``label`` an int in 0..9 (``dataset.classes`` names them).
    60,000 images when ``train`` is true, else the 10,000 test images.

    Raises:
        DataNotFoundError: see :func:`fashion_mnist_root`.
    """
    from torchvision import datasets, transforms

    return datasets.FashionMNIST(
        fashion_mnist_root(download), train=train, download=False, transform=transforms.ToTensor()
    )


def as_tensors(dataset) -> tuple[torch.Tensor, torch.Tensor]:
    """All of a torchvision MNIST-style dataset at once, without a loader.

    Returns ``(images, labels)``: float32 ``(N, 1, 28, 28)`` in [0, 1] (the
    same values ``ToTensor`` gives, byte / 255) and int64 ``(N,)``. Much
    faster than iterating, since it divides the stored bytes in one step.
    """
    images = dataset.data.unsqueeze(1).to(torch.float32).div_(255)
    return images, dataset.targets.clone()


def train_validation_split(dataset):
    """Lesson 4.5.2's split of the 60,000 training images.

    Returns ``(train, validation)``, ``torch.utils.data.Subset`` objects of
    50,000 and 10,000 images, drawn by ``torch.Generator().manual_seed(42)``.
    """
    from torch.utils.data import random_split

    return random_split(
        dataset, [TRAIN_SIZE, VALIDATION_SIZE], generator=torch.Generator().manual_seed(SPLIT_SEED)
    )
