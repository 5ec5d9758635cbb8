"""Tests of the reference solution ``reference/inductive_bias.py``.

Specification: the article "Inductive Bias", section "Weight sharing and
locality, measured in closed form" (course text 003_ec9da5774b5ae29e.txt).
Every number that section prints is asserted here, against values copied from
the article's output (embedded below, so the tests do not need the course
text at run time).

Tolerances, in one place (details next to each assertion):

* Numbers the article prints to k significant digits are checked to the
  printed precision: |actual - expected| <= half a unit in the k-th digit.
  The reference repeats the article's arithmetic, so any real deviation is a
  bug.  Rounding is not a risk, even at the interpolation peaks: perturbing
  the training crops by 4 ulp, or swapping lstsq for an independent pinv
  solve, moves no table cell by more than 1.4e-11 relative (measured; see
  ``test_peak_cells_are_insensitive_to_rounding``), while the closest cell
  lies 1.2e-5 relative from a rounding boundary of its printed digits.
* Rounding-level numbers (the noise-free errors, printed as 7.53e-27 and the
  like) are pure floating-point noise and differ between machines and BLAS
  thread counts; they are checked against the article's threshold, < 1e-20.
* Comparisons between two solvers use bounds that scale with the condition
  number of the system, as explained next to them.

Runtime on a 2-core machine: about 22 s idle; 45 s at load average 4.5 with
OPENBLAS_NUM_THREADS=1, but over 3 minutes at that load with OpenBLAS's
default threading (its threads spin-wait on the many small per-pixel lstsq
calls).  Most of the time is the one full ``learning_curves()`` run shared by
the table tests.
"""

import math
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from reference import inductive_bias as ib

EPS = np.finfo(float).eps

# ---------------------------------------------------------------------------
# The article's printed output (copied verbatim from the course text).
# ---------------------------------------------------------------------------

ARTICLE_EQUIVARIANT_MEDIAN = """
     1          0.00514            0.223             1.57             1.51
     4         0.000448          0.00861            0.514            0.926
    16         5.89e-05         0.000658             2.18            0.751
    64         1.83e-05         0.000167           0.0202            0.885
   256         4.05e-06         3.71e-05          0.00139              414
  1024         1.06e-06            1e-05         0.000282          0.00657
"""
ARTICLE_EQUIVARIANT_MINMAX = """
     1      0.0015-0.06        0.078-1.4            1-6.9            1-6.6
     4    9.1e-05-0.011      0.0029-0.23         0.41-1.6         0.89-1.3
    16  2.8e-05-0.00012   0.00057-0.0013         0.91-3.1          0.7-1.1
    64  8.3e-06-2.1e-05  0.00013-0.00019        0.02-0.03           0.45-1
   256    3e-06-5.4e-06  3.2e-05-4.4e-05    0.0013-0.0016  1.3e+02-1.1e+03
  1024  9.1e-07-1.6e-06  9.3e-06-1.1e-05   0.00025-0.0003    0.0059-0.0071
"""
ARTICLE_VIGNETTED_MEDIAN = """
     1            0.624              2.9            0.798            0.785
     4            0.485             1.52            0.333            0.571
    16            0.442            0.475             2.34             0.53
    64            0.437            0.443           0.0217            0.876
   256            0.436            0.436          0.00149              446
  1024            0.436            0.435         0.000303          0.00708
"""
ARTICLE_VIGNETTED_MINMAX = """
     1         0.47-1.8     0.82-3.6e+02         0.59-3.5         0.61-3.1
     4         0.44-1.9          0.52-37          0.3-1.5        0.55-0.96
    16        0.44-0.47        0.45-0.58         0.97-3.3         0.49-0.9
    64        0.44-0.44        0.44-0.46      0.021-0.032           0.42-1
   256        0.44-0.44        0.44-0.44    0.0014-0.0017  1.4e+02-1.2e+03
  1024        0.44-0.44        0.43-0.43  0.00027-0.00032    0.0064-0.0077
"""
ARTICLE_PARAMS_ROW = "params               25              256            6,400           65,536"

_NUM = r"\d+(?:\.\d+)?(?:e[+-]\d+)?"


def _parse_median(block):
    """{n: [printed string per model]} from a median table."""
    rows = {}
    for line in block.strip().splitlines():
        n, *cells = line.split()
        rows[int(n)] = cells
    return rows


def _parse_minmax(block):
    """{n: [(min string, max string) per model]} from a min-max table."""
    rows = {}
    for line in block.strip().splitlines():
        n, *cells = line.split()
        pairs = []
        for cell in cells:
            m = re.fullmatch(f"({_NUM})-({_NUM})", cell)
            assert m is not None, f"cannot parse min-max cell {cell!r}"
            pairs.append((m.group(1), m.group(2)))
        rows[int(n)] = pairs
    return rows


def _cells():
    """(target, model, n, stat, printed string, significant digits) for every table cell."""
    out = []
    for target, med, mm in (('equivariant', ARTICLE_EQUIVARIANT_MEDIAN, ARTICLE_EQUIVARIANT_MINMAX),
                            ('vignetted', ARTICLE_VIGNETTED_MEDIAN, ARTICLE_VIGNETTED_MINMAX)):
        med_rows, mm_rows = _parse_median(med), _parse_minmax(mm)
        for n in ib.SIZES:
            for m_i, model in enumerate(ib.MODELS):
                # The article prints medians with '.3g' and min-max with '.2g'.
                out.append((target, model, n, 'median', med_rows[n][m_i], 3))
                out.append((target, model, n, 'min', mm_rows[n][m_i][0], 2))
                out.append((target, model, n, 'max', mm_rows[n][m_i][1], 2))
    return out


CELLS = _cells()


def assert_matches_printed(actual, printed, sig, what):
    """Assert ``actual`` rounds to the article's ``printed`` value at ``sig`` significant digits.

    Tolerance: half a unit in the last printed digit (the article's own
    precision; '1e-05' printed with '.3g' stands for 1.00e-05).  Relative
    slack of 1e-9 only guards the boundary case of an exact tie.
    """
    expected = float(printed)
    half_unit = 0.5 * 10.0 ** (math.floor(math.log10(abs(expected))) - sig + 1)
    tol = half_unit * (1 + 1e-9)
    assert abs(actual - expected) <= tol, (
        f"{what}: actual {actual!r} does not round to the article's {printed} "
        f"({sig} significant digits, tolerance {tol:.3g})")


# ---------------------------------------------------------------------------
# Shared, expensive results
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def curves():
    """The full learning-curve experiment, seeds 0-4, all sizes and models (~20 s)."""
    return ib.learning_curves()


@pytest.fixture(scope="module")
def noise_free():
    """The article's noise-free base check on 1,024 crops (~2 s)."""
    return ib.noise_free_errors()


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def test_load_images_twelve_grayscale_in_unit_range_and_cached():
    actual = ib.load_images()
    assert len(actual) == 12, f"expected 12 images, got {len(actual)}"
    for name, im in zip(ib.IMAGE_NAMES, actual):
        assert im.ndim == 2, f"{name}: expected a 2-D grayscale array, got shape {im.shape}"
        assert im.dtype == np.float64, f"{name}: expected float64, got {im.dtype}"
        assert im.min() >= 0.0 and im.max() <= 1.0, f"{name}: values outside [0, 1]"
        assert im.shape[0] >= ib.H and im.shape[1] >= ib.W, f"{name}: smaller than a crop"
    assert ib.load_images() is actual, (
        "load_images() must be cached (same object on the second call)")
    # camera is uint8 / 255 exactly; astronaut goes through rgb2gray.
    from skimage import color, data

    np.testing.assert_array_equal(
        actual[0], data.camera() / 255.0, err_msg="camera must be divided by 255"
    )
    np.testing.assert_array_equal(
        actual[8],
        color.rgb2gray(data.astronaut()),
        err_msg="astronaut must be converted by rgb2gray",
    )


def test_crops_shape_range_determinism_and_nesting():
    actual = ib.crops(64, np.random.default_rng(7))
    assert actual.shape == (64, 16, 16), f"expected (64, 16, 16), got {actual.shape}"
    assert actual.min() >= 0.0 and actual.max() <= 1.0, "crops outside [0, 1]"
    again = ib.crops(64, np.random.default_rng(7))
    np.testing.assert_array_equal(actual, again, err_msg="same seed must give the same crops")
    # Three draws per crop, in order: the first 10 of 64 are the 10 of a fresh generator.
    expected_prefix = ib.crops(10, np.random.default_rng(7))
    np.testing.assert_array_equal(
        actual[:10], expected_prefix, err_msg="crops must be drawn sequentially"
    )
    other = ib.crops(64, np.random.default_rng(8))
    assert not np.array_equal(actual, other), "different seeds must give different crops"


def test_crops_draw_order_matches_article():
    # The article's loop: image index, then row, then column, from one generator.
    rng = np.random.default_rng(3)
    imgs = ib.load_images()
    k = rng.integers(len(imgs))
    im = imgs[k]
    r, c = rng.integers(im.shape[0] - 15), rng.integers(im.shape[1] - 15)
    expected = im[r : r + 16, c : c + 16]
    actual = ib.crops(1, np.random.default_rng(3))[0]
    np.testing.assert_array_equal(
        actual, expected, err_msg="first crop differs from the article's draw order"
    )


def test_test_crops_are_the_articles():
    actual = ib.test_crops()
    expected = ib.crops(2000, np.random.default_rng(1000))
    assert actual.shape == (2000, 16, 16), f"expected (2000, 16, 16), got {actual.shape}"
    np.testing.assert_array_equal(
        actual, expected, err_msg="test crops must be crops(2000, default_rng(1000))"
    )


@pytest.mark.parametrize("bad_n", [-1, 2.5, "3", True])
def test_crops_rejects_bad_n(bad_n):
    with pytest.raises(ValueError, match="n must be"):
        ib.crops(bad_n, np.random.default_rng(0))


def test_crops_rejects_legacy_random_state():
    with pytest.raises(ValueError, match="Generator"):
        ib.crops(2, np.random.RandomState(0))


# ---------------------------------------------------------------------------
# neigh
# ---------------------------------------------------------------------------


def neigh_loop(x):
    """Explicit-loop 5x5 wrap-around neighbourhoods, written from the definition."""
    n = x.shape[0]
    out = np.empty((n, 256, 25), dtype=x.dtype)
    for i in range(n):
        for r in range(16):
            for c in range(16):
                k = 0
                for a in range(-2, 3):  # row offset outer
                    for b in range(-2, 3):  # column offset inner
                        out[i, 16 * r + c, k] = x[i, (r + a) % 16, (c + b) % 16]
                        k += 1
    return out


@settings(derandomize=True, database=None, max_examples=40, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda n: arrays(
            np.float64, (n, 16, 16), elements=st.floats(-1e6, 1e6, allow_nan=False, width=64)
        )
    )
)
def test_neigh_agrees_with_explicit_loop(x):
    actual = ib.neigh(x)
    expected = neigh_loop(x)
    # Exact: neigh only moves values, no arithmetic.
    np.testing.assert_array_equal(actual, expected, err_msg="neigh differs from the explicit loop")


def test_neigh_centre_column_is_the_image_and_wraps():
    x = ib.test_crops()[:3]
    actual = ib.neigh(x)
    assert actual.shape == (3, 256, 25), f"expected (3, 256, 25), got {actual.shape}"
    np.testing.assert_array_equal(
        actual[:, :, 12],
        x.reshape(3, 256),
        err_msg="offset (0, 0) (column 12) must be the pixel itself",
    )
    # Pixel (0, 0), offset (-2, -2) wraps to (14, 14), not zero padding.
    expected = x[:, 14, 14]
    np.testing.assert_array_equal(actual[:, 0, 0], expected, err_msg="borders must wrap around")


@pytest.mark.parametrize("shape", [(16, 16), (2, 16, 15), (2, 8, 8), (1, 1, 16, 16)])
def test_neigh_rejects_wrong_shapes(shape):
    with pytest.raises(ValueError, match=r"shape \(n, 16, 16\)"):
        ib.neigh(np.zeros(shape))


# ---------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------


def test_edge_kernel_values_and_orientation():
    actual = ib.edge_kernel()
    u, v = np.mgrid[-2:3, -2:3]
    raw = -v * np.exp(-(u**2 + v**2) / 2.0)
    expected = raw / raw[raw > 0].sum()
    np.testing.assert_allclose(
        actual, expected, rtol=1e-15, atol=0, err_msg="kernel differs from the article's definition"
    )
    # Positive lobe sums to 1, negative to -1, zero centre column; positive on the left (v < 0).
    assert abs(actual[actual > 0].sum() - 1.0) < 1e-15, "positive lobe must sum to 1"
    assert abs(actual[actual < 0].sum() + 1.0) < 1e-15, "negative lobe must sum to -1"
    np.testing.assert_array_equal(actual[:, 2], 0.0, err_msg="centre column must be 0")
    assert actual[2, 1] > 0 > actual[2, 3], "kernel must be -v * gaussian (positive for v < 0)"


def test_equivariant_target_is_cross_correlation_not_convolution():
    # Target of a delta at (r0, c0): y[r0 - u, c0 - v] = K[u, v] for cross-correlation;
    # a flipped kernel (convolution) would give -K there.
    r0, c0 = 6, 9
    x = np.zeros((1, 16, 16))
    x[0, r0, c0] = 1.0
    y = ib.equivariant_target(x)[0]
    K = ib.edge_kernel()
    actual = np.array(
        [[y[(r0 - a) % 16, (c0 - b) % 16] for b in range(-2, 3)] for a in range(-2, 3)]
    )
    np.testing.assert_allclose(
        actual, K, rtol=0, atol=1e-15, err_msg="equivariant target must be cross-correlation with K"
    )


def test_vignette_gain_centre_and_corners():
    g = ib.vignette_gain()
    assert g.shape == (16, 16), f"expected (16, 16), got {g.shape}"
    for corner in [(0, 0), (0, 15), (15, 0), (15, 15)]:
        assert abs(g[corner] - 0.3) < 1e-15, f"gain at corner {corner} is {g[corner]}, expected 0.3"
    expected_centre = 1 - 0.7 / 225  # four central pixels are half a pixel off the centre
    np.testing.assert_allclose(
        g[7:9, 7:9], expected_centre, rtol=1e-15, err_msg="gain at the central pixels"
    )
    assert g.max() == g[7, 7] and g.min() == g[0, 0], (
        "gain must fall from the centre to the corners"
    )


def test_vignetted_target_applies_gain_before_filter():
    x = ib.test_crops()[:20]
    actual = ib.vignetted_target(x)
    expected = ib.equivariant_target(ib.vignette_gain() * x)
    np.testing.assert_array_equal(
        actual, expected, err_msg="vignetted target must be edge(gain * x)"
    )
    wrong = ib.vignette_gain() * ib.equivariant_target(x)  # vignette after the filter
    assert np.abs(actual - wrong).max() > 1e-3, "vignetted target must not be gain * edge(x)"


def test_equivariance_gaps_match_article():
    x = ib.test_crops()[:50]
    actual_eq = ib.equivariance_gap(ib.equivariant_target, x)
    # Printed 0.0e+00: circular cross-correlation commutes with a circular
    # shift exactly (same products, same summation order), so exactly 0.
    assert actual_eq == 0.0, f"equivariant gap: actual {actual_eq!r}, expected exactly 0.0"
    actual_vig = ib.equivariance_gap(ib.vignetted_target, x, shift=(3, 5))
    # Printed 3.4e-01 ('.1e', 2 significant digits): half a unit is 0.005.
    assert_matches_printed(actual_vig, "3.4e-01", 2, "vignetted equivariance gap")
    assert ib.equivariance_gap('vignetted', x) == actual_vig, (
        "target names must work like the functions"
    )


def test_equivariance_gap_rejects_bad_input():
    with pytest.raises(ValueError, match="shape"):
        ib.equivariance_gap(ib.equivariant_target, np.zeros((50, 16)))
    with pytest.raises(ValueError, match="shift"):
        ib.equivariance_gap(ib.equivariant_target, np.zeros((2, 16, 16)), shift=(3,))
    with pytest.raises(ValueError, match="unknown target"):
        ib.equivariance_gap('blurred', np.zeros((2, 16, 16)))


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, expected", [('conv', 25), ('shared16', 256), ('local5', 6400), ('full', 65536)]
)
def test_parameter_counts_match_article(model, expected):
    actual = ib.parameter_count(model)
    assert actual == expected, f"{model}: actual {actual}, expected {expected}"
    # The fitted parameters have exactly that many entries.
    X = ib.test_crops()[:4]
    actual_size = np.asarray(ib.fit(model, X, ib.equivariant_target(X))).size
    assert actual_size == expected, (
        f"{model}: fit returned {actual_size} parameters, expected {expected}"
    )


def test_params_row_matches_article():
    expected = [int(s.replace(',', '')) for s in ARTICLE_PARAMS_ROW.split()[1:]]
    actual = [ib.parameter_count(m) for m in ib.MODELS]
    assert actual == expected, f"params row: actual {actual}, expected {expected}"


@pytest.mark.parametrize(
    "alias, model",
    [('shared 16x16', 'shared16'), ('local 5x5', 'local5'), ('fully connected', 'full')],
)
def test_article_model_names_are_aliases(alias, model):
    assert ib.parameter_count(alias) == ib.parameter_count(model), f"{alias!r} must mean {model!r}"


def test_unknown_model_and_bad_shapes_raise():
    X = ib.test_crops()[:2]
    Y = ib.equivariant_target(X)
    with pytest.raises(ValueError, match="unknown model"):
        ib.fit('mlp', X, Y)
    with pytest.raises(ValueError, match="unknown model"):
        ib.parameter_count('mlp')
    with pytest.raises(ValueError, match="same number of crops"):
        ib.fit('conv', X, Y[:1])
    with pytest.raises(ValueError, match=r"shape \(n, 16, 16\)"):
        ib.fit('conv', X.reshape(2, 256), Y)
    with pytest.raises(ValueError, match="at least one"):
        ib.fit('full', X[:0], Y[:0])
    with pytest.raises(ValueError, match="finite"):
        ib.fit('conv', np.full_like(X, np.nan), Y)
    with pytest.raises(ValueError, match="must have shape"):
        ib.predict('local5', np.zeros(25), X)
    with pytest.raises(ValueError, match=r"shape \(n, 16, 16\)"):
        ib.predict('conv', np.zeros(25), X[0])


def test_noise_free_recovery_matches_article(noise_free):
    # Article: "with 1,024 images, every model recovers every target its class
    # contains, to rounding error" (printed 7.53e-27 ... 2.11e-27).  The exact
    # values are floating-point noise (they differ between machines and BLAS
    # thread counts), so the threshold is the one the assignment grades: < 1e-20.
    contains = {'equivariant': ib.MODELS, 'vignetted': ('local5', 'full')}
    for target, models in contains.items():
        for model in models:
            actual = noise_free[target, model]
            assert actual < 1e-20, (
                f"{target}/{model}: relative error {actual:.3g}, expected < 1e-20"
            )
    # The shared models cannot represent the vignetted map: floors printed
    # with '.3g', well-conditioned overdetermined fits (262,144 equations for
    # 25 or 256 unknowns), so checked to the printed precision.
    assert_matches_printed(noise_free['vignetted', 'conv'], "0.436", 3, "noise-free vignetted conv")
    assert_matches_printed(
        noise_free['vignetted', 'shared16'], "0.435", 3, "noise-free vignetted shared16"
    )


def test_minimum_norm_solution_when_underdetermined():
    # 4 crops: 'full' has 4 equations per output pixel for 256 unknowns, 'local5'
    # 4 for 25.  The minimum-norm solution lies in the row space of the design
    # and interpolates the training data.
    X = ib.test_crops()[100:104]
    Y = ib.vignetted_target(X) + 0.01 * np.random.default_rng(0).standard_normal(X.shape)
    P = ib.fit('full', X, Y)
    A = X.reshape(4, 256)
    null_proj = P - np.linalg.pinv(A) @ (A @ P)
    # Tolerance: these four crops are well separated (condition number 35 for
    # the 4x256 design, at most 260 for the per-pixel 4x25 designs), so two
    # stable solves agree to ~1e3 eps relative; 1e-10 and rtol 1e-8 leave margin.
    assert np.linalg.norm(null_proj) <= 1e-10 * np.linalg.norm(P), (
        "full: solution has a null-space component"
    )
    np.testing.assert_allclose(
        ib.predict('full', P, X),
        Y,
        rtol=0,
        atol=1e-10,
        err_msg="full: underdetermined fit must interpolate",
    )
    L = ib.fit('local5', X, Y)
    nb = ib.neigh(X)
    for j in (0, 37, 255):
        expected = np.linalg.pinv(nb[:, j]) @ Y.reshape(4, 256)[:, j]
        np.testing.assert_allclose(
            L[j],
            expected,
            rtol=1e-8,
            atol=1e-12,
            err_msg=f"local5 pixel {j}: not the minimum-norm solution",
        )
    # A constant crop excites only the DC frequency: every other Fourier
    # coefficient of the shared kernel must be exactly 0 (lstsq's cutoff).
    c = np.full((1, 16, 16), 0.5)
    p = ib.fit('shared16', c, ib.equivariant_target(c) + 0.1)
    actual_nonzero = int(np.count_nonzero(p))
    assert actual_nonzero == 1 and p[0, 0] != 0, (
        f"constant crop: {actual_nonzero} nonzero coefficients, expected 1 (DC)"
    )


def test_fourier_cutoff_drops_rounding_level_frequencies():
    # One crop holding three exact frequencies (DC and +-(2, 5)); every other
    # frequency of its FFT is rounding leakage (|Xf| up to ~2e-14, against a
    # cutoff of 128 * 256 * eps ~ 7e-12).  lstsq's cutoff must drop those, as
    # the explicit solve does; dividing by them instead blows the kernel up.
    r, c = np.mgrid[0:16, 0:16]
    X = (0.5 + 0.25 * np.cos(2 * np.pi * (2 * r + 5 * c) / 16 + 0.3))[None]
    Y = ib.equivariant_target(X) + 0.01 * np.random.default_rng(0).standard_normal(X.shape)
    p = ib.fit('shared16', X, Y)
    actual_nonzero = int(np.count_nonzero(p))
    assert actual_nonzero == 3, (
        f"{actual_nonzero} nonzero Fourier coefficients, expected 3 (DC and +-(2, 5))"
    )
    expected = np.linalg.lstsq(circulant_design(X), Y.reshape(-1), rcond=None)[0].reshape(16, 16)
    actual = np.fft.ifft2(p).real
    # Tolerance: only three singular values are kept (128, 32, 32), condition
    # number 4, so both solutions agree to a few eps times |Y| / 32 ~ 1e-17;
    # 1e-12 is loose and still 1e10 below what a missing cutoff produces.
    np.testing.assert_allclose(
        actual,
        expected,
        rtol=0,
        atol=1e-12,
        err_msg="Fourier kernel differs from the explicit minimum-norm solve",
    )


# Explicit circulant design of the shared 16x16 model: prediction is circular
# convolution y[p] = sum_q k[q] x[p - q], so A[p, q] = x[(p - q) mod 16].
_I = np.arange(16)
_RR = (_I[:, None, None, None] - _I[None, None, :, None]) % 16
_CC = (_I[None, :, None, None] - _I[None, None, None, :]) % 16


def circulant_design(X):
    """(n, 16, 16) -> (n * 256, 256): the stacked circulant least-squares design."""
    return np.concatenate([x[_RR, _CC].reshape(256, 256) for x in X])


#: Pixel-like values: 0 or at least 1e-3 in size (crops are images in [0, 1],
#: quantised far coarser than 1e-3). Hypothesis also mixes in constants it
#: finds in the loaded modules, so without the floor a draw such as every
#: pixel 1e-165 (its squared Fourier magnitudes underflow to 0) can appear
#: in one run order and not another; such crops are outside what `fit` is for.
_PIXEL = st.one_of(st.just(0.0), st.floats(1e-3, 1, width=64))
_TARGET = st.one_of(st.just(0.0), st.floats(1e-3, 1, width=64), st.floats(-1, -1e-3, width=64))


@settings(derandomize=True, database=None, max_examples=60, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda n: st.tuples(
            arrays(np.float64, (n, 16, 16), elements=_PIXEL),
            arrays(np.float64, (n, 16, 16), elements=_TARGET),
        )
    )
)
def test_fourier_solution_agrees_with_explicit_circulant_lstsq(xy):
    X, Y = xy
    sv = np.sqrt((np.abs(np.fft.fft2(X)) ** 2).sum(0))  # singular values of the design
    cutoff = sv.max() * len(X) * 256 * EPS  # lstsq's default cutoff
    # A singular value within a factor 1e3 of the cutoff can be kept by one
    # solver and dropped by the other (the two compute it with different
    # rounding); such draws have no well-defined common answer, so skip them.
    assume(not np.any((sv > cutoff * 1e-3) & (sv < cutoff * 1e3)))
    expected = np.linalg.lstsq(circulant_design(X), Y.reshape(-1), rcond=None)[0].reshape(16, 16)
    k = np.fft.ifft2(ib.fit('shared16', X, Y))
    actual = k.real
    kept = sv[sv > cutoff]
    if kept.size == 0:  # all-zero crops: both solutions must be exactly zero
        tol = 0.0
    else:
        # Least-squares perturbation bound: a backward-stable solve has
        # |dk| <~ eps * (kappa * |k| + kappa**2 * |r| / sigma_max), and both
        # terms are at most eps * kappa * |Y| / sigma_min (kappa over the kept
        # singular values).  Measured ratio <= 41 over 300 draws; factor 1e3.
        kappa = kept.max() / kept.min()
        tol = 1e3 * EPS * kappa * np.linalg.norm(Y) / kept.min()
    diff = np.linalg.norm(actual - expected)
    assert diff <= tol, (
        f"Fourier vs explicit lstsq kernel: |actual - expected| = {diff:.3g} > {tol:.3g}"
    )
    # The kernel is real: the imaginary part is rounding only.
    assert np.abs(k.imag).max() <= tol + 1e-15, f"kernel imaginary part {np.abs(k.imag).max():.3g}"


# ---------------------------------------------------------------------------
# Relative error
# ---------------------------------------------------------------------------


def test_relative_error_definition():
    y = np.array([[1.0, -2.0], [3.0, 0.0]])
    assert ib.relative_error(y, y) == 0.0, "perfect prediction must give 0"
    assert ib.relative_error(np.zeros_like(y), y) == 1.0, "predicting zero must give 1"
    # Normalised by the truth, not the prediction: 2y gives |y|^2/|y|^2 = 1 (by the prediction it
    # would be 0.25).
    actual = ib.relative_error(2 * y, y)
    assert actual == 1.0, f"relative_error(2y, y): actual {actual}, expected 1.0"
    actual = ib.relative_error(y + 1, y)  # 4 / 14
    assert abs(actual - 4 / 14) < 1e-15, (
        f"relative_error(y + 1, y): actual {actual}, expected {4 / 14}"
    )
    with pytest.raises(ValueError, match="same shape"):
        ib.relative_error(y, y[0])
    with pytest.raises(ValueError, match="all zero"):
        ib.relative_error(y, np.zeros_like(y))


def test_noise_sd_matches_article():
    actual = ib.noise_sd()
    # Printed 0.0094 with '.4f': absolute half unit 5e-5.
    expected = 0.0094
    assert abs(actual - expected) <= 0.5e-4, (
        f"noise sd: actual {actual}, expected {expected} (printed .4f)"
    )


# ---------------------------------------------------------------------------
# Learning curves
# ---------------------------------------------------------------------------


def test_learning_curves_shape_and_axes(curves):
    actual = curves.errors.shape
    expected = (2, 4, 6, 5)
    assert actual == expected, f"errors shape: actual {actual}, expected {expected}"
    assert curves.targets == ('equivariant', 'vignetted') and curves.models == ib.MODELS
    assert curves.sizes == (1, 4, 16, 64, 256, 1024) and curves.seeds == (0, 1, 2, 3, 4)
    assert curves.noise_sd == ib.noise_sd(), "the curves must use the article's noise sd"
    assert curves.median.shape == curves.minimum.shape == curves.maximum.shape == (2, 4, 6)


@pytest.mark.parametrize(
    "target, model, n, stat, printed, sig",
    CELLS,
    ids=[f"{t}-{m}-{n}-{s}" for t, m, n, s, _, _ in CELLS],
)
def test_learning_curve_cell_matches_article(curves, target, model, n, stat, printed, sig):
    actual = curves.cell(target, model, n, stat)
    # Tolerance: the printed precision (half a unit in the last printed digit).
    # Why this is safe for every cell, including the interpolation peaks
    # (local5 at n=16, full at n=256, shared16 at n=1) whose errors are noise
    # amplified by small singular values:
    #  - the reference repeats the article's arithmetic, and the run on this
    #    machine reproduces all 144 printed cells;
    #  - rounding cannot move a printed digit: 4-ulp input perturbations and
    #    an independent pinv solve change cells by at most 1.4e-11 relative
    #    (test_peak_cells_are_insensitive_to_rounding checks this), while the
    #    nearest cell is 1.2e-5 relative from a rounding boundary;
    #  - at the full model's square n=256 system the singular values the
    #    lstsq cutoff drops are below 1e-5 x cutoff and those it keeps above
    #    1e7 x cutoff, so the rank decision cannot flip between platforms.
    # An order-of-magnitude tolerance (the article's min-max spans a factor
    # of ten at the peaks) would only be needed against different data, not
    # against the same computation.
    assert_matches_printed(actual, printed, sig, f"{target} {model} n={n} {stat}")


def test_subset_of_learning_curves_gives_the_same_cells(curves):
    # 1,024 crops are always drawn, so a subset run reproduces the full run's cells exactly.
    sub = ib.learning_curves(seeds=[3], sizes=(16, 4), models=('local5', 'shared16'))
    actual = sub.errors[:, :, :, 0]
    expected = curves.errors[:, [2, 1]][:, :, [2, 1], 3]
    np.testing.assert_array_equal(actual, expected, err_msg="subset run differs from the full run")


@pytest.mark.parametrize(
    "model, n", [('conv', 1024), ('shared16', 1), ('local5', 16), ('full', 256)]
)
def test_peak_cells_are_insensitive_to_rounding(curves, model, n):
    # Premise of the printed-precision tolerance above: perturb the seed-0
    # training crops by 4 ulp and refit; the cell must move far less than the
    # 1e-5 relative margin to the nearest rounding boundary.  Measured: at
    # most 1.4e-11 (full, n=256); bound 1e-8 keeps a 1e3 factor both ways.
    rng = np.random.default_rng(0)
    X = ib.crops(ib.POOL_SIZE, rng)
    noise = curves.noise_sd * rng.standard_normal(X.shape)
    Xp = X * (1 + 4 * EPS * np.random.default_rng(123).standard_normal(X.shape))
    x_test = ib.test_crops()
    m_i, k = ib.MODELS.index(model), ib.SIZES.index(n)
    for t_i, target in enumerate(ib.TARGETS):
        T = ib.target_function(target)
        y_tr = T(Xp) + noise
        actual = ib.relative_error(
            ib.predict(model, ib.fit(model, Xp[:n], y_tr[:n]), x_test), T(x_test)
        )
        expected = curves.errors[t_i, m_i, k, 0]
        assert abs(actual / expected - 1) < 1e-8, (
            f"{target} {model} n={n}: perturbed {actual!r} vs {expected!r}"
        )


@pytest.mark.parametrize(
    "model, n",
    [
        ('conv', 1),
        ('conv', 1024),
        ('local5', 4),
        ('local5', 16),
        ('full', 16),
        ('full', 256),
        ('full', 1024),
    ],
)
def test_fit_is_the_minimum_norm_least_squares_solution(curves, model, n):
    # Independent solve with numpy.linalg.pinv and lstsq's cutoff (rcond =
    # eps * max(rows, cols)); compared through the table's quantity, the
    # relative test error, for seed 0 and the equivariant target.
    # Tolerance 1e-8 relative: measured differences are at most 2.2e-12
    # (full at n=256, the worst-conditioned system); the cutoff decision is
    # unambiguous there (see the cell test), so the two minimum-norm
    # solutions differ by rounding amplified by the kept condition number only.
    rng = np.random.default_rng(0)
    X = ib.crops(ib.POOL_SIZE, rng)
    Y = ib.equivariant_target(X) + curves.noise_sd * rng.standard_normal(X.shape)
    X, Y = X[:n], Y[:n]

    def pinv_solve(A, b):
        return np.linalg.pinv(A, rcond=EPS * max(A.shape)) @ b

    if model == 'conv':
        params = pinv_solve(ib.neigh(X).reshape(-1, 25), Y.reshape(-1))
    elif model == 'local5':
        nb = ib.neigh(X)
        params = np.stack([pinv_solve(nb[:, j], Y.reshape(n, 256)[:, j]) for j in range(256)])
    else:
        params = pinv_solve(X.reshape(n, 256), Y.reshape(n, 256))
    x_test = ib.test_crops()
    actual = ib.relative_error(ib.predict(model, params, x_test), ib.equivariant_target(x_test))
    expected = curves.errors[0, ib.MODELS.index(model), ib.SIZES.index(n), 0]
    assert abs(actual / expected - 1) < 1e-8, (
        f"{model} n={n}: pinv {actual!r} vs lstsq {expected!r}"
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(sizes=(2048,)), "at most 1024"),
        (dict(sizes=(0,)), "size must be >= 1"),
        (dict(seeds=(-1,)), "seed must be >= 0"),
        (dict(seeds=()), "non-empty"),
        (dict(models=('mlp',)), "unknown model"),
    ],
)
def test_learning_curves_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ib.learning_curves(**kwargs)
