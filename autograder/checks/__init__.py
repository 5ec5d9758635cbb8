"""Layered checks for students' answers, shared by every hidden and public test.

A check walks the layers in order and stops at the first that fails:
defined, type, shape, dtype, finite values, then values. Each layer raises
:class:`CheckFailure` (an ``AssertionError``) with a message that names the
student's variable and what is wrong with it. Messages never contain the
expected value: a hidden test may report *that* an answer is off and by how
many elements, never *what* it should have been.

Value comparisons follow ``torch.testing.assert_close``: ``|actual - expected|
<= atol + rtol * |expected|`` elementwise, NaN never equal.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from numbers import Real
from typing import Any

import numpy as np
import torch

__all__ = [
    "CheckFailure",
    "MISSING",
    "expect_defined",
    "expect_type",
    "expect_callable",
    "expect_tensor",
    "expect_number",
    "expect_int",
    "expect_bool",
    "expect_close",
    "expect_equal",
    "expect_sequence",
    "expect_module_parameters",
    "quoted",
    "once",
    "carries_forward",
    "carried_names",
    "reading_snapshot",
    "call_student",
    "plain",
]


class CheckFailure(AssertionError):
    """A student's answer failed one layer of a check. The message is student-facing."""


class _Missing:
    def __repr__(self) -> str:  # pragma: no cover - cosmetic
        return "MISSING"


#: Stands for "the notebook never defined this name". Otter passes ``None``
#: for an undefined name, so ``None`` is treated as missing as well.
MISSING = _Missing()


#: Matplotlib's diverging colour maps (its "Diverging" and the three "Multi-Sequential" diverging
#: ones), each also reversed (``_r``): a colour scale centred on zero reads positive and negative
#: values alike only with one of these.
DIVERGING_CMAPS = frozenset(
    {
        "PiYG",
        "PRGn",
        "BrBG",
        "PuOr",
        "RdGy",
        "RdBu",
        "RdYlBu",
        "RdYlGn",
        "Spectral",
        "coolwarm",
        "bwr",
        "seismic",
        "berlin",
        "managua",
        "vanimo",
    }
)


def is_diverging(cmap_name: Any) -> bool:
    """Whether ``cmap_name`` (a colour map's ``.name``) is one of :data:`DIVERGING_CMAPS`, or one
    reversed."""
    if not isinstance(cmap_name, str):
        return False
    return cmap_name.removesuffix("_r") in DIVERGING_CMAPS


def is_diverging_map(cmap: Any) -> bool:
    """Whether a colour map of the student's own reads as a diverging one, by its colours (64
    samples): its lightness (CIE L*, 0 to 1) rises to the middle and falls after it (or falls and
    rises: a dark middle), by at least 0.25 on each side, and its two sides differ in hue (a colour
    at t and at 1
    - t, for t of 0, 0.1, 0.2 or 0.3, by at least 0.3 in some RGB channel). Blue-white-red,
    cyan-white-magenta, blue-black-red and seaborn's icefire-like maps are; grey, viridis and a
    black-white-black map are not."""
    import numpy as np

    colours = np.asarray(cmap(np.linspace(0.0, 1.0, 64)), dtype=np.float64)[:, :3]
    linear = np.where(colours <= 0.04045, colours / 12.92, ((colours + 0.055) / 1.055) ** 2.4)
    luminance = linear @ np.array([0.2126, 0.7152, 0.0722])
    # CIE L*/100
    lightness = np.where(luminance > 0.008856, 1.16 * np.cbrt(luminance) - 0.16, 9.033 * luminance)
    first, second = np.diff(lightness[:32]), np.diff(lightness[32:])
    light_middle = bool((first >= -0.01).all() and (second <= 0.01).all())
    dark_middle = bool((first <= 0.01).all() and (second >= -0.01).all())
    middle = float(lightness[31:33].mean())
    swing = min(abs(middle - lightness[0]), abs(middle - lightness[-1]))
    # t and 1 - t
    sides = max(float(np.abs(colours[k] - colours[63 - k]).max()) for k in (0, 6, 13, 19))
    return (light_middle or dark_middle) and swing >= 0.25 and sides >= 0.3


#: An image's colours (its own values through its norm and map) against a matplotlib map's on the
#: same values: the mean absolute difference of their RGB channels. Measured on 16 templates at the
#: row's own limit: the same map resampled to 11 levels (``plt.get_cmap("RdBu_r", 11)``) is 0.049
#: away, coolwarm from RdBu_r 0.105, a white map from the nearest (Pastel1) 0.14, a grey map named
#: "RdBu_r" 0.38.
CMAP_COLOUR_TOL = 0.08
#: ...and at most this share of the values (1 %) drawn more than this far (in one RGB channel) from
#: the map's colour: 11 levels are at most 0.27 off anywhere, 5 levels more than 0.35 on 12 % of
#: them; a map black above the limit, or white between its sample points, is 0.5 or more off
#: wherever that shows.
CELL_COLOUR_TOL, CELL_COLOUR_SHARE = 0.35, 0.01


def drawing_each_figure_once(check: Callable) -> Callable:
    """``check``, a figure question's check, with each figure it reads drawn once however many of
    its images it checks (:func:`autograder.figure_drawing.one_draw_per_figure`;
    :func:`expect_plain_image` compares each image with a draw of its figure)."""

    @functools.wraps(check)
    def wrapped(*args, **kwargs):
        from autograder import figure_drawing

        with figure_drawing.one_draw_per_figure():
            return check(*args, **kwargs)

    return wrapped


def expect_plain_image(where: str, ax: Any, image: Any) -> str | None:
    """Fail unless ``image`` is the only image of ``ax`` and is drawn as it is: visible, opaque,
    whole, on a linear colour scale between its limits (imshow's ``vmin`` and ``vmax``), upright,
    unstretched, uncovered, at least :data:`MIN_IMAGE_INCHES` on each side, in the colours of one of
    matplotlib's colour maps or of a map of the student's own that tells its values apart. Returns
    the name of the matplotlib map (the one it is named after, or for a map of the student's own,
    the registered map whose colours it has), or ``None`` for a map of the student's own like none
    of them.

    ``where`` names the image in messages ("`fig.axes[1]`"). A template drawn under a second
    image, upside down, transparent, with a ``TwoSlopeNorm`` centred off zero, with a grey map
    named "RdBu_r", zoomed, squashed, rotated, masked, covered, or in a white map of its own passes
    any check that reads only the array and the colour limits, so each is read here
    (:mod:`autograder.figures`). A linear norm other than ``Normalize`` (``CenteredNorm``) is fine.
    """
    import numpy as np

    from autograder import figure_parts, figures

    fig = figure_parts.root_figure(ax)
    if "subfigure" in figure_parts.figure_overlays(fig):
        raise CheckFailure(
            f"the figure holding {where} is split into subfigures (fig.subfigures), which the "
            f"grader "
            "does not read: draw the Axes on the figure itself (plt.subplots, or a gridspec, "
            "nested "
            "ones too)."
        )
    figure_parts.settle(fig)
    if len(ax.images) != 1:
        raise CheckFailure(
            f"{where} holds {len(ax.images)} images: draw one (an image drawn over another hides "
            f"it)."
        )
    if not (image.get_visible() and ax.get_visible()):
        raise CheckFailure(f"{where} is hidden (set_visible(False)): draw it visible.")
    alpha = image.get_alpha()
    if alpha is not None and not (np.ndim(alpha) == 0 and float(alpha) >= 0.999):
        raise CheckFailure(f"{where} is drawn transparent (alpha): draw it opaque, without alpha.")
    _expect_increasing_limits(where, image)
    if not figure_parts.norm_is_linear(image):
        raise CheckFailure(
            f"{where} is drawn with {type(image.norm).__name__}, not a linear colour scale from "
            f"vmin "
            "to vmax: pass vmin and vmax to imshow, without norm."
        )
    height, width = np.shape(image.get_array())[:2]
    upright = (-0.5, width - 0.5, height - 0.5, -0.5)
    if image.origin != "upper" or not np.allclose(image.get_extent(), upright):
        raise CheckFailure(
            f"{where} is drawn flipped or stretched (origin='{image.origin}', extent "
            f"{tuple(round(float(e), 2) for e in image.get_extent())}): draw it with imshow's "
            f"default "
            "origin and extent, row 0 at the top."
        )
    if np.ma.is_masked(image.get_array()):
        raise CheckFailure(
            f"{where} has masked entries, which are drawn blank: draw the array itself."
        )
    if image.get_transform() is not ax.transData:
        raise CheckFailure(
            f"{where} is drawn through a transform of its own (set_transform): draw it as imshow "
            f"does."
        )
    if not figure_parts.default_clip(image, ax):
        raise CheckFailure(
            f"{where} is clipped to a shape of its own (set_clip_path or set_clip_box): draw it "
            f"whole."
        )
    _expect_whole_view(where, ax, width, height)
    extra = figure_parts.axes_overlays(ax)
    if extra:
        raise CheckFailure(
            f"{where}'s Axes also draws {_kinds(extra)}, which can hide the image: draw the image "
            "alone (a title, axis labels, plain text and a colour bar beside it are fine)."
        )
    covering = figures.covering_axes(ax)
    if covering:
        raise CheckFailure(
            f"{where} is covered by {len(covering)} other Axes drawn over it: place nothing over "
            "the image (a colour bar beside it is fine)."
        )
    extra = figure_parts.figure_overlays(fig)
    if extra:
        raise CheckFailure(
            f"the figure holding {where} draws {_kinds(extra)} over its Axes, which can hide the "
            "images: draw nothing on the figure itself (fig.suptitle and fig.text are fine)."
        )
    box = figure_parts.drawn_position(ax)
    inches = (box.width * fig.get_figwidth(), box.height * fig.get_figheight())
    if min(inches) < MIN_IMAGE_INCHES:
        raise CheckFailure(
            f"{where} is drawn only {inches[0]:.2g} by {inches[1]:.2g} inches: draw it at least "
            f"{MIN_IMAGE_INCHES} inches on each side (the figure's default size is fine)."
        )
    found = _problems(image, figures.image_problems)
    # the draw's verdict: after the others
    not_shown = [p for p in found if p.startswith(figures.NOT_SHOWN)]
    for problem in [p for p in found if p not in not_shown] + _problems(ax, figures.axes_problems):
        raise CheckFailure(f"{where} {problem}.")
    for problem in _problems(fig, figures.figure_problems):
        raise CheckFailure(f"the figure holding {where} {problem}.")
    name = _colour_map_name(where, image)
    for problem in not_shown:
        raise CheckFailure(f"{where} {problem}.")
    return name


def _expect_increasing_limits(where: str, image: Any) -> None:
    """Fail, saying why, unless ``image``'s colour limits are finite with vmin below vmax: equal
    limits draw every value in one colour, and they are what imshow gives an image whose values are
    all the same."""
    import numpy as np

    low, high = (float(c) for c in image.get_clim())
    if not (math.isfinite(low) and math.isfinite(high)):
        raise CheckFailure(
            f"{where} is drawn with colour limits that are not finite numbers: pass finite vmin "
            "and vmax, or leave them out."
        )
    if high > low:
        return
    data = np.asarray(np.ma.getdata(image.get_array()), dtype=np.float64)
    if high == low and data.size and bool(np.isfinite(data).all()) and float(np.ptp(data)) == 0.0:
        raise CheckFailure(
            f"{where} shows an image whose values are all the same, so its colour limits are equal "
            "(vmin = vmax) and every cell is drawn in one colour: is it the array the question "
            "asks "
            "for?"
        )
    raise CheckFailure(
        f"{where} is drawn with vmin {'equal to' if high == low else 'above'} vmax, which draws "
        "every value in one colour: pass a vmin below vmax."
    )


def _problems(artist: Any, find: Callable[[Any], list[str]]) -> list[str]:
    """What the student process reported wrong with ``artist`` (on the judge's rebuild), else what
    ``find`` finds."""
    reported = getattr(artist, "reported_problems", None)
    return list(reported) if isinstance(reported, list) else find(artist)


#: An image drawn smaller than this (inches, on each side of its Axes' box) shows nothing: a 4 by 4
#: grid of templates on a figure of 2 by 2 inches is 0.3 inches a cell.
MIN_IMAGE_INCHES = 0.2


def _kinds(kinds: list[str]) -> str:
    """``["patch", "patch", "line"]`` as "2 patches, 1 line"."""
    from autograder.figure_parts import PLURALS

    counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
    return ", ".join(
        f"{n} {PLURALS.get(kind, kind) if n > 1 else kind}" for kind, n in counts.items()
    )


def _expect_whole_view(where: str, ax: Any, width: int, height: int) -> None:
    """The Axes shows the whole image, upright, filling at least half of it each way, at an aspect
    within 4x."""
    from autograder import figure_parts

    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    if not (x0 < x1 and y0 > y1):
        raise CheckFailure(
            f"{where} is drawn mirrored or upside down (an inverted x or y axis): keep imshow's "
            "orientation, row 0 at the top, column 0 on the left."
        )
    slack = 1e-6 * max(width, height, 1)
    if (
        x0 > -0.5 + slack
        or x1 < width - 0.5 - slack
        or y1 > -0.5 + slack
        or y0 < height - 0.5 - slack
    ):
        raise CheckFailure(
            f"{where} shows only part of the image (set_xlim or set_ylim, or sharex or sharey with "
            "a smaller image): show it whole."
        )
    if x1 - x0 > 2 * width or y0 - y1 > 2 * height:
        raise CheckFailure(
            f"{where} fills less than half of its Axes (view limits far wider than the image): "
            f"keep "
            "imshow's limits."
        )
    # the pixels as drawn: at most 4 times taller than wide or wider than tall (aspect="auto" in a
    # 40 by 1.6 inch figure smears them 70 to 1; set_aspect(5) stretches them 5 to 1)
    box, fig = figure_parts.drawn_position(ax), figure_parts.root_figure(ax)
    pixel = (box.height * fig.get_figheight() / (y0 - y1)) / max(
        box.width * fig.get_figwidth() / (x1 - x0), 1e-12
    )
    if not 0.25 <= pixel <= 4.0:
        raise CheckFailure(
            f"{where} is stretched: its pixels are drawn {pixel:.2g} times as tall as wide "
            f"(set_aspect "
            "or aspect='auto' in a long, flat Axes): keep imshow's aspect."
        )


def _colour_map_name(where: str, image: Any) -> str | None:
    """The registered colour map whose colours ``image``'s own values are drawn in (through its
    norm, with its colours for too low and too high values): the one its map is named after (or that
    map in 2 to 32 levels, ``plt.get_cmap(name, levels)``), else the nearest within
    :data:`CMAP_COLOUR_TOL`; ``None`` for a map of the student's own that is none of them but tells
    the image's values apart (:func:`_expect_values_told_apart`).

    Each of these passes a check by name or by a few sample points: a grey map named "RdBu_r", a
    white map of one's own, a map right at 16 sample points but white between them, or black above
    the limit.
    """
    import matplotlib
    import numpy as np
    from matplotlib.colors import Normalize

    from autograder import figure_parts

    cmap = image.get_cmap()
    actual = getattr(image, "reported_cell_colours", None)
    actual = (
        np.asarray(figure_parts.cell_colours(image) if actual is None else actual, dtype=np.float64)
        / 255.0
    )
    data = np.asarray(np.ma.getdata(image.get_array()), dtype=np.float64)
    if data.ndim != 2 or actual.shape != (*data.shape, 4):
        raise CheckFailure(f"{where}'s colours could not be read: draw a 2-D array with imshow.")
    if float((actual[..., 3] < 0.99).mean()) > CELL_COLOUR_SHARE:
        raise CheckFailure(
            f"{where} is drawn see-through (a colour map with alpha): draw it opaque."
        )
    low, high = (float(c) for c in image.get_clim())
    scaled = np.asarray(Normalize(low, high)(data), dtype=np.float64)

    def off(colour_map: Any) -> tuple[float, float]:
        """Mean absolute difference of the RGB channels, and the share of values drawn clearly
        otherwise."""
        difference = np.abs(np.asarray(colour_map(scaled))[..., :3] - actual[..., :3])
        return float(difference.mean()), float((difference.max(axis=-1) > CELL_COLOUR_TOL).mean())

    def fits(colour_map: Any) -> bool:
        mean, share = off(colour_map)
        return mean <= CMAP_COLOUR_TOL and share <= CELL_COLOUR_SHARE

    if cmap.name in matplotlib.colormaps:
        named = matplotlib.colormaps[cmap.name]
        if not any(fits(m) for m in (named, *(named.resampled(levels) for levels in range(2, 33)))):
            raise CheckFailure(
                f"{where} is drawn with a colour map named {cmap.name!r} whose colours are not "
                f"{cmap.name}'s: pass cmap=\"{cmap.name}\" (matplotlib's own), with no colours of "
                "your own for values outside the limits."
            )
        return cmap.name
    nearest = min(matplotlib.colormaps, key=lambda name: off(matplotlib.colormaps[name])[0])
    if fits(matplotlib.colormaps[nearest]):
        return nearest
    _expect_values_told_apart(where, scaled, actual)
    return None


#: How far apart (0 to 1, in one RGB channel) a map of one's own must draw an image's low and high
#: values: more than :data:`TOLD_APART`, and more than :data:`TOLD_APART_PER_SCALE` times how far
#: apart they are on the colour scale: a map drawing the trousers black, and navy at 0.16 for the
#: brightest tenth, 0.9 of the scale apart, is a black square to the eye. matplotlib's gray,
#: coolwarm and RdBu_r draw their two ends 1.0, 0.6 and 0.38 apart; an honest dark cyan, white and
#: dark magenta map draws weights 0.4 of the scale apart 0.3 apart.
TOLD_APART, TOLD_APART_PER_SCALE = 0.15, 0.3


def _expect_values_told_apart(where: str, scaled: Any, colours: Any) -> None:
    """A colour map of the student's own must draw the image's low and high values in different
    colours: the tenth of its values lowest on the colour scale against the tenth highest, paired in
    order, where they are at least 0.2 of the scale apart, differ in some RGB channel by more than
    :data:`TOLD_APART` and than
    :data:`TOLD_APART_PER_SCALE` times their distance on the scale, in 90 % of the pairs (a white
    map of one's own, one white between a few colours, or one that draws most values black and the
    rest barely otherwise, does not)."""
    import numpy as np

    values = np.clip(scaled.ravel(), 0.0, 1.0)
    order = np.argsort(values, kind="stable")
    k = max(1, len(values) // 10)
    low, high = order[:k], order[::-1][:k]
    apart = values[high] - values[low] >= 0.2
    if not apart.any():
        return
    flat = colours.reshape(-1, 4)[:, :3]
    needed = np.maximum(TOLD_APART, TOLD_APART_PER_SCALE * (values[high] - values[low]))
    told = np.abs(flat[high] - flat[low]).max(axis=-1) > needed
    if told[apart].mean() < 0.9:
        raise CheckFailure(
            f"{where} is drawn with a colour map of your own that draws its low and high values "
            "alike: pass one of matplotlib's by name, e.g. cmap=\"gray\"."
        )


def relative_distance(actual: Any, expected: Any) -> float:
    """``|actual - expected| / |expected|`` over matching sequences of tensors (a network's
    parameters), as one Euclidean norm in float64."""
    difference = sum(
        float(((a.detach().double() - e.double()) ** 2).sum()) for a, e in zip(actual, expected)
    )
    return (difference / max(sum(float((e.double() ** 2).sum()) for e in expected), 1e-300)) ** 0.5


def describe_type(value: Any) -> str:
    """``value``'s kind for a message, never its value: "a tensor of shape (2, 3) and dtype
    torch.float32", "a list"."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.ndarray):
        return f"a NumPy array of shape {value.shape} and dtype {value.dtype}"
    kind = type(value).__name__
    if kind == "Opaque" and isinstance(getattr(value, "type_name", None), str):
        # autograder.encoding.Opaque: what the judge received of a value that is not data, or could
        # not read
        return f"something the grader could not read as data ({value.type_name})"
    return f"{'an' if kind[0].lower() in 'aeiou' else 'a'} {kind}"


def expect_defined(name: str, value: Any) -> Any:
    """Fail when ``value`` is missing (``None`` or :data:`MISSING`); else return it."""
    if value is None or value is MISSING:
        raise CheckFailure(
            f"`{name}` is not defined once the whole notebook has run: run the cell that defines "
            f"it, "
            f"keep the name `{name}`, and do not delete or reuse it in a later cell."
        )
    if value is Ellipsis:
        raise CheckFailure(f"`{name}` is still `...`: replace the placeholder with your answer.")
    return value


def expect_type(
    name: str, value: Any, types: type | tuple[type, ...], what: str | None = None
) -> Any:
    """Fail unless ``value`` is defined and an instance of ``types``.

    ``what`` is how the message names the expected type ("a tensor").
    ``bool`` is never accepted where a number is asked for.
    """
    expect_defined(name, value)
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types))
    if not ok:
        wanted = what or " or ".join(t.__name__ for t in _as_tuple(types))
        raise CheckFailure(f"`{name}` should be {wanted}, but it is {describe_type(value)}.")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def expect_array(
    name: str, value: Any, shape: tuple | None = None, complex_ok: bool = False, finite: bool = True
) -> np.ndarray:
    """A NumPy array answer, layer by layer: defined, type, shape, real (or complex) numeric dtype,
    finite.

    Raises :class:`CheckFailure` naming ``name`` at the first layer that fails
    (a torch tensor is refused: the assignment asks for NumPy).
    """
    expect_defined(name, value)
    if isinstance(value, torch.Tensor):
        raise CheckFailure(
            f"`{name}` should be a NumPy array, but it is a torch tensor: use NumPy only."
        )
    if not isinstance(value, np.ndarray):
        raise CheckFailure(f"`{name}` should be a NumPy array, but it is {describe_type(value)}.")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise CheckFailure(
            f"`{name}` has shape {value.shape}, but it should have shape {tuple(shape)}."
        )
    kinds = "biufc" if complex_ok else "biuf"
    if value.dtype.kind not in kinds:
        raise CheckFailure(
            f"`{name}` has dtype {value.dtype}, but it should hold real numbers (float64)."
        )
    if finite and not np.isfinite(value).all():
        bad = int((~np.isfinite(value)).sum())
        raise CheckFailure(f"`{name}` holds {bad} NaN or infinite value(s).")
    return value


def expect_callable(name: str, value: Any) -> Callable:
    """Fail unless ``value`` is a function (anything callable)."""
    expect_defined(name, value)
    if not callable(value):
        raise CheckFailure(f"`{name}` should be a function, but it is {describe_type(value)}.")
    return value


def expect_tensor(
    name: str,
    value: Any,
    shape: Iterable[int] | None = None,
    dtype: torch.dtype | None = None,
    finite: bool = True,
    requires_grad: bool | None = False,
) -> torch.Tensor:
    """Check a tensor answer layer by layer: defined, type, shape, dtype, finite, grad.

    Args:
        name: the student's variable name, as the message shows it.
        value: the student's answer.
        shape: the expected shape, e.g. ``(1, 1, 26, 26)``; ``None`` skips.
        dtype: the expected dtype, e.g. ``torch.float32``; ``None`` skips.
        finite: fail on NaN or infinite entries (floating tensors only).
        requires_grad: ``False`` asks for a tensor cut from autograd
            (``.detach()`` or ``torch.no_grad()``); ``None`` skips.

    Raises:
        CheckFailure: the first layer that fails, naming ``name``.
    """
    expect_defined(name, value)
    if not isinstance(value, torch.Tensor):
        hint = (
            " Convert it with torch.tensor(...) or torch.from_numpy(...)."
            if isinstance(value, (list, tuple, np.ndarray))
            else ""
        )
        raise CheckFailure(
            f"`{name}` should be a torch tensor, but it is {describe_type(value)}.{hint}"
        )
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise CheckFailure(
            f"`{name}` has shape {tuple(value.shape)}, but it should have shape {tuple(shape)}."
        )
    if dtype is not None and value.dtype != dtype:
        raise CheckFailure(f"`{name}` has dtype {value.dtype}, but it should have dtype {dtype}.")
    if finite and value.is_floating_point() and not bool(torch.isfinite(value).all()):
        bad = int((~torch.isfinite(value)).sum())
        raise CheckFailure(f"`{name}` holds {bad} NaN or infinite value(s).")
    if requires_grad is False and value.requires_grad:
        raise CheckFailure(
            f"`{name}` still requires grad: compute it under torch.no_grad() or call .detach()."
        )
    return value


def expect_number(
    name: str, value: Any, expected: float | None = None, abs_tol: float = 0.0, rel_tol: float = 0.0
) -> float:
    """Check a real-number answer (int, float, NumPy scalar or one-element tensor).

    With ``expected`` given, fail unless ``|value - expected| <= max(abs_tol,
    rel_tol * |expected|)``. The message says the value is off, not by how much.
    """
    number = plain(name, value)
    if isinstance(number, bool) or not isinstance(number, Real):
        raise CheckFailure(f"`{name}` should be a number, but it is {describe_type(value)}.")
    number = float(number)
    if not math.isfinite(number):
        raise CheckFailure(f"`{name}` is {number}, not a finite number.")
    if expected is not None and abs(number - expected) > max(abs_tol, rel_tol * abs(expected)):
        raise CheckFailure(f"`{name}` has the right type but the wrong value.")
    return number


def expect_int(name: str, value: Any, expected: int | None = None) -> int:
    """Check a whole-number answer; with ``expected``, it must equal it exactly."""
    number = plain(name, value)
    if isinstance(number, bool) or not isinstance(number, (int, np.integer)):
        if isinstance(number, float) and number.is_integer():
            number = int(number)
        else:
            raise CheckFailure(
                f"`{name}` should be a whole number (int), but it is {describe_type(value)}."
            )
    number = int(number)
    if expected is not None and number != expected:
        raise CheckFailure(f"`{name}` has the right type but the wrong value.")
    return number


def expect_bool(name: str, value: Any, expected: bool | None = None) -> bool:
    """Check a True/False answer (``bool``, NumPy bool or one-element bool tensor)."""
    flag = plain(name, value)
    if not isinstance(flag, (bool, np.bool_)):
        raise CheckFailure(f"`{name}` should be True or False, but it is {describe_type(value)}.")
    if expected is not None and bool(flag) != expected:
        raise CheckFailure(f"`{name}` has the right type but the wrong value.")
    return bool(flag)


def plain(name: str, value: Any) -> Any:
    """A one-element tensor, 0-d NumPy array (``np.asarray(x)`` of a number) or NumPy scalar as a
    Python scalar; other values unchanged (a one-element 1-d array is not a number: NumPy 2 will not
    convert it)."""
    expect_defined(name, value)
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise CheckFailure(
                f"`{name}` should be a single number, but it is {describe_type(value)}."
            )
        return value.item()
    if isinstance(value, np.generic) or (
        isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype != object
    ):
        return value.item()
    return value


def expect_close(
    name: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    where: str = "",
) -> None:
    """Compare values with ``torch.testing.assert_close`` semantics, message without values.

    ``actual`` must already have passed :func:`expect_tensor`; ``expected`` is
    cast to its dtype. ``where`` narrows the message ("on the columns both
    maps hold"). Raises :class:`CheckFailure` naming how many elements differ.
    """
    expected = expected.to(actual.dtype) if expected.dtype != actual.dtype else expected
    if actual.shape != expected.shape:
        raise CheckFailure(
            f"`{name}` has shape {tuple(actual.shape)}, but it should have shape "
            f"{tuple(expected.shape)}."
        )
    close = torch.isclose(actual.detach(), expected.detach(), rtol=rtol, atol=atol)
    if not bool(close.all()):
        bad, total = int((~close).sum()), close.numel()
        place = f" {where}" if where else ""
        raise CheckFailure(
            f"`{name}` has the right shape and dtype, but {bad} of its {total} values{place} "
            f"are wrong (tolerance atol={atol:g}, rtol={rtol:g})."
        )


def expect_equal(name: str, actual: Any, expected: Any) -> None:
    """Exact equality for tensors (``torch.equal``), tuples, lists and scalars."""
    if isinstance(expected, torch.Tensor):
        expect_tensor(
            name,
            actual,
            shape=expected.shape,
            dtype=expected.dtype,
            finite=False,
            requires_grad=None,
        )
        if not torch.equal(actual, expected):
            bad = int((actual != expected).sum())
            raise CheckFailure(
                f"`{name}` has the right shape and dtype, but {bad} of its {actual.numel()} values "
                f"are wrong."
            )
        return
    if actual != expected:
        raise CheckFailure(f"`{name}` has the wrong value.")


def expect_sequence(
    name: str, value: Any, length: int, kinds: type | tuple[type, ...] = (list, tuple)
) -> Any:
    """Fail unless ``value`` is a list or tuple (or ``kinds``) of ``length`` items."""
    expect_type(name, value, kinds, what="a " + " or ".join(k.__name__ for k in _as_tuple(kinds)))
    if len(value) != length:
        raise CheckFailure(f"`{name}` has {len(value)} items, but it should have {length}.")
    return value


#: What the checks keep for the grading under way only, each a dict registered by
#: :func:`per_grading`: emptied as each grading begins and ends (:func:`forget_grading`), since a
#: judge grades one submission after another and these are keyed by the student's names.
_PER_GRADING: list[dict] = []


def expect_shape(name: str, value: Any, expected: tuple[int, ...]) -> None:
    """A shape: ``torch.Size`` or a tuple/list of ints, equal to ``expected``; never says which
    sizes are expected."""
    actual = tuple(expect_sequence(name, value, len(expected)))
    sizes = tuple(expect_int(f"{name}[{i}]", v) for i, v in enumerate(actual))
    if sizes != tuple(expected):
        raise CheckFailure(f"`{name}` has {len(expected)} dimensions, but the wrong sizes.")


def per_grading(store: dict) -> dict:
    """``store``, registered to be emptied by :func:`forget_grading`."""
    _PER_GRADING.append(store)
    return store


def forget_grading() -> None:
    """Empty what the checks kept for one grading (:func:`per_grading`): a verdict or a network of
    one submission must never stand for the next one's."""
    for store in _PER_GRADING:
        store.clear()


#: Outcomes of :func:`once`, for the grading under way.
_OUTCOMES: dict[tuple, tuple[tuple, CheckFailure | None]] = per_grading({})


def _is_handle(value: Any) -> bool:
    """Whether ``value`` is a student's callable as the judge holds it
    (:class:`autograder.encoding.Handle`). Only the judge and the student process load the wire's
    modules, which the students' wheel does not hold: in a student's kernel nothing is a handle."""
    encoding = sys.modules.get("autograder.encoding")
    return encoding is not None and isinstance(value, encoding.Handle)


def _identity(value: Any) -> tuple:
    if _is_handle(value):
        # by the name it was read under: the same after a restart, so a verdict cannot be decided
        # again in a replayed notebook that behaves otherwise
        return ("student", value.variable) if value.variable else ("student", value.key)
    return ("object", id(value))


def once(kind: str, funcs: tuple, check: Callable[[], None]) -> CheckFailure | None:
    """The outcome of ``check`` for the student's functions ``funcs``: ``None`` (passed) or its
    CheckFailure.

    Decided the first time it is asked for and kept for the rest of the
    grading, so the question that grades a function and every later question
    that relies on it (errors carried forward, or the reference standing in
    for a function that passed) see one verdict: a function whose behaviour
    depends on what was called before cannot pass its own question and be
    trusted as wrong in another.

    Args:
        kind: which check (``"rel_err"``, ``"shift_right"``, ...).
        funcs: the student's objects the outcome depends on (kept alive with it).
        check: raises :class:`CheckFailure` when the functions fail.
    """
    key = (kind, *(_identity(f) for f in funcs))
    if key not in _OUTCOMES:
        try:
            check()
            outcome = None
        except CheckFailure as failure:
            # kept as its message only: its traceback, and the exceptions it was raised while
            # handling, hold the frames, and with them what the student's functions returned, for
            # the rest of the grading (hundreds of MB a kind)
            outcome = CheckFailure(str(failure))
        _OUTCOMES[key] = (funcs, outcome)
    return _OUTCOMES[key][1]


#: The snapshot of the student's names the judge grades from
#: (:class:`autograder.session.StudentEnvironment`), while it runs one question's hidden test
#: (:func:`reading_snapshot`); ``None`` outside the judge.
_SNAPSHOT: contextvars.ContextVar[Any] = contextvars.ContextVar("student_snapshot", default=None)


@contextlib.contextmanager
def reading_snapshot(snapshot: Any) -> Iterator[None]:
    """While the judge runs a question's hidden test: the checks that carry names forward read them
    from ``snapshot`` (a mapping whose ``get(name)`` is ``None`` for a name missing or
    unreadable)."""
    token = _SNAPSHOT.set(snapshot)
    try:
        yield
    finally:
        _SNAPSHOT.reset(token)


def carries_forward(*names: str) -> Callable[[Callable], Callable]:
    """Decorates a question's check that also reads the student's ``names``: earlier values its
    answers are computed from (errors carried forward), which its hidden test does not pass. The
    check takes them as keyword arguments, ``MISSING`` by default; a keyword not passed is read from
    the judge's snapshot.

    The judge takes these names into the snapshot it reads before it calls any student function
    (:func:`carried_names`, read by :func:`autograder.notes.names_read_by`), as it does the hidden
    tests' parameters, so a student function called in an earlier question cannot rebind them.
    Outside the judge (Otter's own run of the tests while building) they stay ``MISSING`` and the
    check grades against the reference. The check decides itself whether a value is sensible enough
    to carry forward.
    """

    def decorate(check: Callable) -> Callable:
        @functools.wraps(check)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            snapshot = _SNAPSHOT.get()
            for name in names:
                if name not in kwargs:
                    value = snapshot.get(name) if snapshot is not None else None
                    kwargs[name] = MISSING if value is None else value
            return check(*args, **kwargs)

        wrapped.carried_names = names
        return wrapped

    return decorate


def carried_names(test_func: Callable) -> list[str]:
    """The names the checks that ``test_func`` (a hidden test) imports from ``autograder.checks.*``
    carry forward (:func:`carries_forward`): the names its import statements mention, looked up in
    the modules it imports. A module that cannot be imported adds none (the test itself then fails
    saying so)."""
    import importlib

    code = getattr(test_func, "__code__", None)
    if code is None:
        return []
    names: list[str] = []
    for module_name in [n for n in code.co_names if n.startswith("autograder.checks.")]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for attribute in code.co_names:
            names += [
                n
                for n in getattr(getattr(module, attribute, None), "carried_names", ())
                if n not in names
            ]
    return names


def quoted(name: str) -> str:
    """A student's variable as messages show it (`` `net` ``); a description ("the network ...
    returned") as is."""
    return f"`{name}`" if name.isidentifier() else name


def expect_module_parameters(name: str, value: Any) -> list[torch.Tensor]:
    """The parameters of the student's network ``value``, detached, in ``parameters()`` order.

    ``value`` is a ``torch.nn.Module`` (in the judge, the
    :class:`autograder.encoding.Handle` a module crossed as, with the copies
    of its parameters that crossed with it). A check that rebuilds the
    network from these tensors grades the weights the network holds, not
    what its ``forward`` chooses to return.

    Raises:
        CheckFailure: ``value`` is missing, or not a network whose parameters
            can be read (a plain function, a lambda, a module with more than
            :data:`autograder.channel.MAX_PARAMETERS` numbers).
    """
    from autograder import channel

    expect_defined(name, value)
    if _is_handle(value):
        if value.parameters is not None:
            return [p.detach() for p in value.parameters]
        module, kind = value.is_module, value.type_name or "function"
    elif isinstance(value, torch.nn.Module):
        params = list(torch.nn.Module.parameters(value))
        if (
            len(params) <= channel.MAX_PARAMETER_TENSORS
            and sum(p.numel() for p in params) <= channel.MAX_PARAMETERS
        ):
            return [p.detach().clone() for p in params]
        module, kind = True, type(value).__name__
    else:
        module, kind = False, type(value).__name__
    if module:
        raise CheckFailure(
            f"{quoted(name)} is a network whose parameters the grader cannot read: more than "
            f"{channel.MAX_PARAMETER_TENSORS} parameter tensors or {channel.MAX_PARAMETERS:,} "
            f"numbers."
        )
    raise CheckFailure(
        f"{quoted(name)} should be a PyTorch network (an nn.Module such as nn.Sequential) whose "
        f"parameters "
        f"the grader can read, but it is {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}."
    )


def call_student(name: str, func: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call the student's function ``name``; turn any exception into a :class:`CheckFailure`.

    The message shows the call's argument shapes (not values) and the
    student's exception, so the student can reproduce it.
    """
    expect_callable(name, func)
    shown = ", ".join([_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()])
    try:
        result = func(*args, **kwargs)
    except CheckFailure:
        raise
    except Exception as err:  # the student's code may raise anything
        raise CheckFailure(f"`{name}({shown})` raised {type(err).__name__}: {err}") from None
    if result is None or result is Ellipsis:
        raise CheckFailure(
            f"`{name}({shown})` returned {result!r}: does `{name}` end with a `return`?"
        )
    return result


def changed_in_place(func: Callable, *pairs: tuple[Any, Any]) -> bool:
    """Whether the last call of ``func`` changed an argument in place: one of the ``(argument, copy
    taken before the call)`` pairs differs (a function called in this process), or the student
    process reported that the call changed a tensor or array argument (``func`` called through it,
    which receives copies of the judge's arguments: :class:`autograder.session.RemoteCallable`)."""
    return any(not torch.equal(actual, before) for actual, before in pairs) or bool(
        getattr(func, "mutated_arguments", None)
    )


#: Most keys of a student's dict a message lists (:func:`keys_shown`).
MAX_KEYS_SHOWN = 10


def short_repr(value: Any) -> str:
    """``repr(value)`` cut short (``reprlib``: strings to 40 characters, containers to 4 items, 2
    levels deep), for a student's value in a message: a dict key that is a tuple of many references
    to one string of megabytes has a ``str`` of gigabytes."""
    import reprlib

    short = reprlib.Repr()  # its limits as attributes: Python 3.11's takes no arguments
    short.maxlevel, short.maxstring, short.maxother, short.maxlong = 2, 40, 40, 40
    short.maxtuple = short.maxlist = short.maxset = short.maxfrozenset = short.maxdict = 4
    return short.repr(value)


def keys_shown(mapping: Any) -> str:
    """The keys of a student's dict as a message lists them, ``['bias', 'weight']``: sorted, at most
    :data:`MAX_KEYS_SHOWN` (the first ones, then how many more), each cut short
    (:func:`short_repr`)."""
    keys = list(mapping)
    shown = sorted(short_repr(key) for key in keys[:MAX_KEYS_SHOWN])
    more = [f"... and {len(keys) - MAX_KEYS_SHOWN:,} more"] if len(keys) > MAX_KEYS_SHOWN else []
    return f"[{', '.join(shown + more)}]"


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"<tensor {tuple(value.shape)} {str(value.dtype).replace('torch.', '')}>"
    if isinstance(value, (int, float, bool, str)) or value is None:
        return repr(value)
    return f"<{type(value).__name__}>"
