"""What a matplotlib figure draws besides its images' arrays: read alike in the student process
(which describes a figure to the judge, :mod:`autograder.channel`) and by the checks (on the judge's
rebuild of that description, or on the student's own figure when the checks run in the student's
kernel).

A graded image can be drawn so that it shows something else than its array and colour limits
say: under a second image, see-through, through a non-linear norm, in a grey map
named "RdBu_r", upside down with ``invert_yaxis``, zoomed with ``set_xlim``, squashed with
``set_aspect``, rotated with ``set_transform``, masked, clipped, covered by a white ``Rectangle``,
an inset Axes or another Axes, or drawn 0.01 inches wide. Inset Axes and other Axes count only where
they overlap the image (a colour bar beside it is fine). The functions here name each of those, so
that a check can refuse them; and since images can be hidden by means no single one of them reads
(filters on an Axes, an animated Axes, wide minor grid lines, artists of another Axes),
:func:`drawn_mismatch` draws the figure once and compares each image's cells with their own colours.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable
from typing import Any

#: What may sit on an image's Axes besides the image without covering it: titles, axis labels and
#: ticks are not artists of these lists, and plain text (no box behind it) covers nothing.
#: Everything else does, or can.
OVERLAY_KINDS = ("patch", "line", "collection", "table", "artist", "boxed text", "legend")
#: Each kind in messages, more than one of it (the figure's own kinds too).
PLURALS = {
    "patch": "patches",
    "line": "lines",
    "collection": "collections",
    "table": "tables",
    "artist": "artists",
    "boxed text": "boxed texts",
    "inset Axes": "inset Axes",
    "legend": "legends",
    "image (figimage)": "images (figimage)",
    "subfigure": "subfigures",
}


def axes_overlays(ax: Any) -> list[str]:
    """The kinds (:data:`OVERLAY_KINDS`) of what ``ax`` draws besides its images, one entry per
    artist."""
    kinds: list[str] = []
    kinds += ["patch"] * len(ax.patches)
    kinds += ["line"] * len(ax.lines)
    kinds += ["collection"] * len(ax.collections)
    kinds += ["table"] * len(ax.tables)
    kinds += [_labelled(a) for a in ax.artists]
    kinds += ["boxed text" for text in ax.texts if text.get_bbox_patch() is not None]
    if ax.get_legend() is not None:
        kinds.append("legend")
    return kinds


def figure_overlays(fig: Any) -> list[str]:
    """The kinds of what ``fig`` draws over its Axes (figure-level artists, which are drawn after
    the Axes)."""
    kinds: list[str] = []
    kinds += ["patch"] * len(fig.patches)
    kinds += ["line"] * len(fig.lines)
    kinds += ["image (figimage)"] * len(fig.images)
    kinds += [_labelled(a) for a in fig.artists]
    kinds += ["boxed text" for text in fig.texts if text.get_bbox_patch() is not None]
    kinds += ["legend"] * len(fig.legends)
    kinds += ["subfigure"] * len(getattr(fig, "subfigs", []))
    return kinds


def _labelled(artist: Any) -> str:
    """A generic artist's kind: the judge's rebuild labels its stand-ins with the kind the student
    process saw."""
    label = artist.get_label() if hasattr(artist, "get_label") else None
    return (
        label
        if isinstance(label, str) and label in OVERLAY_KINDS + ("image (figimage)", "subfigure")
        else "artist"
    )


def own_methods(obj: Any, allowed: tuple[str, ...] = ()) -> list[str]:
    """The names of functions set on ``obj`` itself (not its class), but for ``allowed``: a method
    replaced on one image, norm or colour map (a colour map or norm held as an attribute is not a
    method)."""
    from matplotlib import colors

    try:
        attributes = vars(obj)
    except TypeError:
        return []
    return sorted(
        name
        for name, value in attributes.items()
        if name not in allowed
        and callable(value)
        and not isinstance(value, (colors.Colormap, colors.Norm))
    )


def plain_norm(norm: Any) -> bool:
    """Whether ``norm`` is one of matplotlib's own norms (its exact class, no method set on it), but
    ``FuncNorm``, whose functions are the student's: such a norm can be linear at the image's own
    values and at the points :func:`norm_is_linear` tries, and map every value between them, which
    a smoothing draw (``bilinear``) feeds it, to one colour."""
    from matplotlib import colors

    kind = type(norm)
    return (
        kind is getattr(colors, kind.__name__, None)
        and issubclass(kind, colors.Norm)
        and kind is not colors.FuncNorm
        and not own_methods(norm)
    )


def norm_is_linear(image: Any) -> bool:
    """Whether ``image``'s norm maps its colour limits' range linearly onto [0, 1] (at 34 points,
    nine of them evenly spaced and 25 off that grid, within 1e-6), and is one of matplotlib's own
    (:func:`plain_norm`): ``Normalize``, and ``CenteredNorm`` or ``TwoSlopeNorm`` centred between
    the limits, are; ``LogNorm``, a ``TwoSlopeNorm`` centred elsewhere, ``BoundaryNorm``,
    ``FuncNorm`` are not. Limits that are not finite and increasing are not. (The colours an image's
    own values get are checked apart,
    :func:`cell_colours`.)"""
    import numpy as np

    if not plain_norm(image.norm):
        return False

    low, high = (float(c) for c in image.get_clim())
    if not (np.isfinite(low) and np.isfinite(high) and high > low):
        return False
    at = np.concatenate([np.linspace(0.0, 1.0, 9), np.linspace(0.0371, 0.9629, 25)])
    mapped = np.ma.filled(
        np.ma.asarray(image.norm(low + (high - low) * at), dtype=np.float64), np.nan
    )
    return bool(np.allclose(mapped, at, rtol=0.0, atol=1e-6))


def cell_colours(image: Any) -> Any:
    """The colours ``image``'s own values are drawn in, ``(H, W, 4)`` uint8: its norm and colour map
    applied, with their colours for masked, too low and too high values (``to_rgba``)."""
    import numpy as np

    return np.asarray(image.to_rgba(image.get_array(), bytes=True))


#: Sizes past which an Axes' decorations can cover its image (points): spines and tick marks drawn
#: over its edges, grid lines across it, text on it. Matplotlib's defaults: spines 0.8, ticks 3.5
#: long and 0.8 wide, grid lines 0.8, text 10 to 12.
MAX_SPINE_WIDTH, MAX_TICK_LENGTH, MAX_TICK_WIDTH, MAX_GRID_WIDTH, MAX_FONT_SIZE = (
    6.0,
    15.0,
    6.0,
    4.0,
    40.0,
)

#: An image's Axes may have at most this share of its area under text (a short label in a corner is
#: fine)...
MAX_TEXT_OVER = 0.05
#: ...and under grid lines and tick marks (:func:`lines_over`).
MAX_LINES_OVER = 0.3

#: Path effects (``set_path_effects``) a decoration may have: a plain draw, or a stroke around it no
#: wider than this (points) and not moved off it. ``plt.xkcd()`` outlines every text, spine and tick
#: in white, 4 points wide; a spine stroked 400 points wide in white blanks every template.
MAX_STROKE_WIDTH = 4.0
#: An Axes has four spines (left, right, bottom, top); more, each under the width limit, could lie
#: side by side over the image.
MAX_SPINES = 4

#: Layout engines that only place Axes (matplotlib's own); another can move them anywhere when the
#: figure is drawn.
LAYOUT_ENGINES = ("ConstrainedLayoutEngine", "TightLayoutEngine", "PlaceHolderLayoutEngine")


#: A colour map may have at most this many colours...
MAX_COLOUR_MAP_COLOURS = 65536
#: ...and its colours may change by at most this much along it: the sum, over each pair of
#: neighbouring colours, of their largest difference in red, green or blue (0 to 1). Matplotlib's
#: own maps change by at most 9.3 (``tab20``; ``gray`` 1, ``RdBu_r`` 2.5, ``nipy_spectral`` 6), but
#: for ``prism`` (45) and ``flag`` (67), whose stripes no one reads weights in. A map of a million
#: colours with ``RdBu_r``'s colours at the image's own values and one grey between them shows
#: every template flat grey in a smoothing draw (``bilinear``). Such a map changes by twice the
#: distance between its colours and the grey for every value it keeps: 4,634 for 16 templates, 133
#: for the trousers (256 grey levels); under this bound a map can keep only a few values that way.
MAX_COLOUR_MAP_CHANGE = 10.0
#: Every colour of the map must be this opaque: a map opaque only at the image's own values shows
#: the Axes' grey through it in a smoothing draw.
MIN_COLOUR_MAP_ALPHA = 0.99


def colour_problem(image: Any) -> str | None:
    """Why the colours ``image`` is drawn in may not be those of its values and of the values
    between them (a smoothing draw resamples the values before the norm and colour map see them), or
    ``None``: an image class, colorizer or colour map that is not matplotlib's own, methods set on
    them, a colour map of more than :data:`MAX_COLOUR_MAP_COLOURS` colours or changing more than
    :data:`MAX_COLOUR_MAP_CHANGE` along it. (The norm: :func:`plain_norm`.)"""
    import numpy as np
    from matplotlib import colors
    from matplotlib import image as mimage

    if type(image) is not mimage.AxesImage or own_methods(
        image, allowed=("stale_callback", "_remove_method", "_picker")
    ):
        return (
            "is drawn by code of its own (an image class of its own, or methods set on the image): "
            "draw it "
            "with imshow"
        )
    colorizer = getattr(image, "_colorizer", None)
    if colorizer is not None:
        from matplotlib import colorizer as mcolorizer

        if type(colorizer) is not mcolorizer.Colorizer or own_methods(colorizer):
            return (
                "is coloured by code of its own (a colorizer of its own, or methods set on it): "
                "draw it with imshow"
            )
    cmap = image.get_cmap()
    if type(cmap) not in (colors.ListedColormap, colors.LinearSegmentedColormap) or own_methods(
        cmap
    ):
        return (
            f"is drawn in a colour map of a class of its own ({type(cmap).__name__}): use one of "
            f"matplotlib's "
            "colour maps, or ListedColormap or LinearSegmentedColormap.from_list"
        )
    if cmap.N > MAX_COLOUR_MAP_COLOURS:
        return (
            f"is drawn in a colour map of {cmap.N:,} colours, more than "
            f"{MAX_COLOUR_MAP_COLOURS:,}: use one of "
            "matplotlib's colour maps (256 colours)"
        )
    table = np.asarray(cmap(np.arange(cmap.N)), dtype=np.float64)
    # a map opaque only at the image's own values shows the Axes through it between them
    if not np.all(table[:, 3] >= MIN_COLOUR_MAP_ALPHA):
        return (
            "is drawn in a colour map with see-through colours (alpha below 1): use one of "
            "matplotlib's colour "
            "maps, which are opaque"
        )
    cache = getattr(image, "_imcache", None)
    if cache is not None and not np.array_equal(np.asarray(cache), cell_colours(image)):
        return (
            "keeps another picture than its values' colours where vector displays (SVG, PDF) draw "
            "it from "
            "(_imcache): draw it with imshow, nothing set by hand"
        )
    change = float(np.abs(np.diff(table[:, :3], axis=0)).max(axis=1).sum())
    if not change <= MAX_COLOUR_MAP_CHANGE:
        return (
            f"is drawn in a colour map whose colours swing back and forth (they change by "
            f"{change:.0f} along "
            f"it, matplotlib's smooth maps by under {MAX_COLOUR_MAP_CHANGE:.0f}), so the values "
            f"between its "
            "cells, which a smooth draw shows, come out in other colours: use a smooth colour map "
            "such as "
            "gray or RdBu_r"
        )
    return None


def image_problems(image: Any) -> list[str]:
    """What in how ``image`` is drawn keeps it from showing its values, each as the rest of a
    sentence about it: the image's own settings first (:func:`colour_problem`), then what a draw of
    its figure shows where its cells are (:func:`drawn_mismatch`)."""
    problems = []
    if image.get_agg_filter() is not None:
        problems.append("is drawn through a filter (set_agg_filter): draw it as imshow does")
    if image.get_animated():
        problems.append(
            "is animated (set_animated(True)), so a plain draw leaves it out: draw it as imshow "
            "does"
        )
    if image.get_filterrad() > 4.0:
        problems.append("is blurred (set_filterrad above imshow's 4): draw it as imshow does")
    if not problems:
        colour = colour_problem(image)
        if colour:
            problems.append(colour)
    if not problems:
        small = shown_too_small(image)
        if small:
            problems.append(small)
    if not problems:
        share = drawn_mismatch(image)
        moved = pixel_placed(image)
        if moved:
            problems.append(
                f"{NOT_SHOWN} at another size or cropped: its figure holds {moved} artist(s) "
                f"placed "
                "in screen pixels or inches from the canvas's corner (IdentityTransform, "
                "fig.dpi_scale_trans), which land elsewhere then: place everything in data, Axes "
                "or "
                "figure coordinates"
            )
        elif share > MAX_DRAWN_MISMATCH:
            problems.append(
                f"{NOT_SHOWN}: {share:.0%} of its cells come out in other colours (something in "
                f"the "
                "figure covers, hides, filters or recolours it): draw it with imshow and nothing "
                "over it"
            )
        else:
            recoloured = pipeline_mismatch(image)
            if recoloured > MAX_DRAWN_MISMATCH:
                problems.append(
                    f"{NOT_SHOWN} as it is shown: {recoloured:.0%} of its pixels come out in other "
                    f"colours than a plain linear norm and its colour map's own colours give "
                    f"(interpolation {image.get_interpolation()!r}): draw it with imshow, with "
                    f"vmin "
                    "and vmax and one of matplotlib's colour maps, nothing set by hand"
                )
    return problems


#: A figure drawn at fewer dots per inch than this shows nothing (:func:`figure_problems`).
MIN_FIGURE_DPI = 30
#: An image needs at least this many screen pixels per cell, each way, at its figure's own dpi
#: (where Jupyter shows it), whatever the grader's own draw (4 pixels a cell) sees: 16 templates at
#: 30 dpi on a figure of 1.25 inches are 9 pixels each; the lesson's figures give 3 to 5.
MIN_SHOWN_PIXELS_PER_CELL = 1.0


def shown_too_small(image: Any) -> str | None:
    """Why ``image`` is too small to see at its figure's own dpi (fewer than
    :data:`MIN_SHOWN_PIXELS_PER_CELL` screen pixels a cell, each way), as the rest of a sentence
    about it, else ``None``."""
    import numpy as np

    fig = root_figure(image.axes) if image.axes is not None else None
    if fig is None or fig.dpi < MIN_FIGURE_DPI:  # the figure's own problem (figure_problems)
        return None
    try:
        box = image.get_window_extent()
        rows, columns = np.shape(image.get_array())[:2]
        dpi = float(fig.dpi)
    except Exception:  # noqa: BLE001 - an image whose place cannot be read is judged by the draw
        return None
    if not (np.isfinite(box.width) and np.isfinite(box.height)):
        return None
    width, height = abs(box.width), abs(box.height)
    if min(width / max(columns, 1), height / max(rows, 1)) >= MIN_SHOWN_PIXELS_PER_CELL:
        return None
    return (
        f"is shown {width:.0f} by {height:.0f} screen pixels at its figure's dpi ({dpi:g}), fewer "
        f"than one a "
        f"cell of its {rows} by {columns}: draw the figure larger or at a higher dpi "
        f"(plt.subplots' default "
        "size and dpi are fine)"
    )


#: How :func:`image_problems` begins the problem :func:`drawn_mismatch` finds (a check reports it
#: after every more specific one).
NOT_SHOWN = "does not show its values when the figure is drawn"


#: An image fails when more than this share of its cells (but its outermost ring, where spines and
#: tick marks sit) is drawn in colours other than its own (:func:`drawn_mismatch`): thin grid lines,
#: which run through cells' middles, cover a minority of a cell's pixels; a short label covers a few
#: cells (honest figures in the tests: 0 to 2 %); a cover that hides what the student drew hides
#: most of the cells (70 to 100 % in the hostile figures of tests/checks/).
MAX_DRAWN_MISMATCH = 0.1
#: A pixel is in its cell's colour when no channel is more than this far off (0 to 255); a cell is
#: drawn in other colours when fewer than :data:`MIN_CELL_PIXELS_SHOWN` of its pixels are. Resampled
#: ``nearest``, a cell's pixels have its colour to within 1 (Agg's rounding); 40 leaves room for the
#: antialiased edge pixels of thin lines drawn over it, while white over RdBu_r's or gray's mid
#: colours is 100 or more off. Half the pixels: a cover needs to hide most of a cell, so pinholes at
#: a few pixels do not pass.
DRAWN_COLOUR_TOLERANCE = 40
MIN_CELL_PIXELS_SHOWN = 0.5
#: A drawn pixel shows its colour only when at least this opaque (0 to 255): Jupyter shows a
#: figure's PNG over the notebook's own background, white or dark, so a pixel of alpha ``a`` moves
#: up to ``255 - a`` towards it, which is past :data:`DRAWN_COLOUR_TOLERANCE` below this. A pixel
#: that keeps its colour at 1/255 opacity (a filter on the figure, or a draw event's code writing
#: the canvas's alpha) shows blank, so draws are read with their alpha.
MIN_SHOWN_ALPHA = 255 - DRAWN_COLOUR_TOLERANCE
#: The colour :func:`_as_seen` gives a pixel too see-through to show one: no cell's colour is near
#: it.
_NO_COLOUR = -1000
#: The grader's draw gives each image cell at least this many pixels a side (up to
#: :data:`MAX_RENDER_DPI`): a one-pixel grid line through a cell's middle is then at most a quarter
#: of its pixels across. The draw is never coarser than 72 dpi (points and pixels alike) nor finer
#: than 400 (a 0.2-inch image of 28 cells, the smallest the checks accept, gets 4 pixels a cell at
#: 560; 400 gives it about 3).
RENDER_PIXELS_PER_CELL = 4.0
MIN_RENDER_DPI, MAX_RENDER_DPI = 72.0, 400.0
#: ...and at most this many pixels in all (80 MB of RGBA: a figure of 20 by 20 inches is drawn at
#: 220 dpi).
MAX_RENDER_PIXELS = 20e6


def drawn_mismatch(image: Any) -> float:
    """The share of ``image``'s cells that a draw of its figure shows in colours other than the
    cell's own (:func:`cell_colours`), 0 to 1: 1 when the draw leaves the image out. An image of 5
    cells or more a side is read without its outermost ring of cells, which spines and tick marks
    may overlap.

    A graded image can be hidden with matplotlib's own means, each read by no single check: filters
    on the Axes, the figure or a title (``set_agg_filter``), an animated Axes, minor grid lines or
    tick lines drawn wide and white, artists of another Axes drawn outside its box, Axes of negative
    size, and a norm that is linear on the image's own array but flat on the resampled one a draw
    feeds it. So the figure is drawn once (Agg, every image resampled ``nearest`` so that each cell
    keeps its colour, at a resolution that gives each cell
    :data:`RENDER_PIXELS_PER_CELL` pixels, at least the figure's own dpi, within
    :data:`MAX_RENDER_DPI` and :data:`MAX_RENDER_PIXELS`), and each cell counts as shown when at
    least half of its pixels have its own colour (every pixel, not a few sample points a cover could
    leave holes at). Artists placed in screen pixels or in inches from the canvas's corner, which
    land elsewhere at another dpi or on a cropped canvas (a second draw shows where), make every
    image count as not shown (:func:`pixel_placed`); a third draw, as Jupyter shows the figure (its
    own dpi, cropped to its contents, its layout engine on), is compared cell by cell too, and the
    larger share kept. The figure is left as it was. Inside
    :func:`one_draw_per_figure` one draw serves every image of a figure; elsewhere each call draws.
    An image whose figure cannot be drawn counts as not shown (1.0)."""
    drawn = _drawn(image)
    return 1.0 if drawn.get("moved") else drawn.get(id(image), 1.0)


def pixel_placed(image: Any) -> int:
    """How many artists of ``image``'s figure land elsewhere, in inches from the figure's corner,
    when the figure is drawn at another dpi on a canvas whose corner is elsewhere
    (:func:`drawn_mismatch`), as a figure saved, or shown cropped to its contents, is: artists
    placed in screen pixels or in inches from the canvas's corner: a white rectangle in
    ``IdentityTransform`` lies over the images at the figure's own dpi and beside them at the
    grader's; white text in ``fig.dpi_scale_trans`` lies below them in a plain draw and over them in
    Jupyter's cropped one."""
    return int(_drawn(image).get("moved", 0))


def pipeline_mismatch(image: Any) -> float:
    """The share of ``image``'s pixels that come out in other colours, drawn as it is shown (its own
    interpolation, at its figure's own dpi and twice it), than with a plain linear norm between its
    colour limits and a plain colour map of its map's own colours and extremes
    (:func:`_draw_and_compare`).

    The grader's other draws resample every image ``nearest``, so they feed its norm and colour map
    only its own values; a smoothing draw (``bilinear``) feeds them the values between, so code
    hidden in objects the norm and map hold (a scale's transform, a lookup table of its own array
    class) that gives the right colours at the image's own values only shows otherwise here.
    """
    return float(_drawn(image).get(("pipeline", id(image)), 0.0))


def _drawn(image: Any) -> dict:
    """:func:`_draw_and_compare` for ``image``'s figure, once per :func:`one_draw_per_figure`
    block."""
    fig = root_figure(image.axes) if image.axes is not None else None
    if fig is None:
        return {}
    drawn = _DRAWS.get(id(fig)) if _DRAWS is not None else None
    if drawn is not None:
        return drawn[1]
    try:
        drawn = _draw_and_compare(fig)
    except Exception:  # noqa: BLE001 - a figure matplotlib cannot draw shows nothing
        drawn = {}
    if _DRAWS is not None:
        _DRAWS[id(fig)] = (fig, drawn)  # the figure kept alive with its id while the block runs
    return drawn


#: The draws of :func:`one_draw_per_figure`'s block (``{id(figure): (figure, {id(image):
#: share})}``), else ``None``.
_DRAWS: dict | None = None
#: What :func:`_once_per_block`'s functions found in that block (``{(name, id(artist)): (artist,
#: found)}``).
_READS: dict | None = None


@contextlib.contextmanager
def one_draw_per_figure():
    """Within the block, :func:`drawn_mismatch` draws each figure once (a check of 16 templates, or
    the student process describing a figure), not once per image, and :func:`axes_problems` and
    :func:`figure_problems` read each Axes and figure once (each image's check asks about its figure
    and every Axes that may cover it); nothing is kept after it (a figure changed later, by the
    notebook, is drawn and read again)."""
    global _DRAWS, _READS
    outer = _DRAWS is None
    if outer:
        _DRAWS, _READS = {}, {}
    try:
        yield
    finally:
        if outer:
            _DRAWS, _READS = None, None


def _once_per_block(find: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
    """``find(artist)``, computed once per artist within a :func:`one_draw_per_figure` block (the
    checks read a figure and do not change it; a figure's layout is settled before any of it is
    read,
    :func:`settle`), and anew at every call outside one."""

    @functools.wraps(find)
    def once(artist: Any) -> list[str]:
        if _READS is None:
            return find(artist)
        key = (find.__name__, id(artist))
        if key not in _READS:
            # the artist kept alive with its id while the block runs
            _READS[key] = (artist, find(artist))
        return list(_READS[key][1])

    return once


def _draw_and_compare(fig: Any) -> dict:
    """:func:`drawn_mismatch` for every image of ``fig`` (``{id(image): share}``), the larger of two
    draws' (the grader's, and Jupyter's), and under ``"moved"`` the number of :func:`pixel_placed`
    artists, from a second draw at another dpi, on a canvas whose corner is :data:`_SHIFT_INCHES`
    away from the figure's (as a saved or shown figure is drawn)."""
    import io

    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.image import AxesImage
    from matplotlib.transforms import Bbox

    images = [im for im in fig.findobj(AxesImage) if im.axes is not None]
    if not images:
        return {}
    dpi = max(MIN_RENDER_DPI, float(fig.dpi))
    for im in images:
        box = im.axes.get_window_extent()
        rows, columns = np.shape(im.get_array())[:2]
        inches = min(box.width / max(columns, 1), box.height / max(rows, 1)) / fig.dpi
        if inches > 0:
            dpi = max(dpi, RENDER_PIXELS_PER_CELL / inches)
    width, height = _size_inches(fig)
    budget = (MAX_RENDER_PIXELS / max(width * height, 1e-6)) ** 0.5
    dpi = min(dpi, MAX_RENDER_DPI, budget)
    # the second draw: at the figure's own dpi (where the student sees it) when that is not the
    # grader's, else half as fine again (a coarser one if that is over the budget); its canvas's
    # corner is moved away from the figure's, out when the dpi is finer, in when it is coarser, so
    # that no place in screen pixels lands where it did in the first draw in both ways at once
    own = min(float(fig.dpi), budget)
    second = own if abs(own - dpi) > 0.05 * dpi else dpi * 1.5 if dpi * 1.5 <= budget else dpi / 1.5
    shift = -_SHIFT_INCHES if second > dpi else _SHIFT_INCHES
    old_canvas, old_dpi, engine = fig.canvas, fig.dpi, fig.get_layout_engine()
    interpolations = [(im, im.get_interpolation()) for im in images]
    canvas = old_canvas if isinstance(old_canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    foreign = engine is not None and type(engine).__name__ not in LAYOUT_ENGINES
    shifted: dict = {}

    # each draw of print_figure's; the last one is the shifted canvas's
    def read_places(event: Any) -> None:
        shifted.clear()
        shifted.update(_artist_places(fig, event.renderer))

    shown: dict = {}

    # each draw of print_figure's; the last one is the cropped canvas's
    def read_cells(event: Any) -> None:
        drawn = _as_seen(event.renderer.buffer_rgba())
        shown.clear()
        shown.update({id(im): _mismatch(im, drawn) for im in images})

    callback = None
    try:
        # refused apart (figure_problems); run here, it would move the Axes the other checks read
        if foreign:
            fig._layout_engine = None
        for im, _ in interpolations:
            im.set_interpolation("nearest")
        fig.dpi = dpi
        _quiet_draw(canvas)
        pixels = _as_seen(canvas.buffer_rgba())
        out: dict = {id(im): _mismatch(im, pixels) for im in images}
        here = _artist_places(fig, canvas.get_renderer())
        # the second draw keeps the first one's layout: matplotlib's tight layout engine moves the
        # Axes a little each time it runs (an honest layout="tight" figure moves many artists)
        fig._layout_engine = None
        callback = canvas.mpl_connect("draw_event", read_places)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            canvas.print_figure(
                io.BytesIO(),
                format="rgba",
                dpi=second,
                bbox_inches=Bbox.from_bounds(shift, shift, width, height),
            )
        out["moved"] = sum(
            not _same_place(place, shifted.get(key, place)) for key, place in here.items()
        )
        # the third draw, as Jupyter shows the figure and savefig(bbox_inches="tight") saves it: its
        # own dpi, on a canvas cropped to its contents, its layout engine on; each image's cells are
        # compared there too, so that what no walk of the artists places (a quiver key, an offset
        # box's frame, text in an inset wrapped anew on the cropped canvas) cannot cover the images
        # where people look
        fig._layout_engine = None if foreign else engine
        canvas.mpl_disconnect(callback)
        callback = canvas.mpl_connect("draw_event", read_cells)
        third = _cropped_dpi(fig, max(own, MIN_FIGURE_DPI))
        # else contents reaching too far to draw: the images count as not shown there
        if third is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                canvas.print_figure(io.BytesIO(), format="rgba", dpi=third, bbox_inches="tight")
        for im in images:
            out[id(im)] = max(out[id(im)], shown.get(id(im), 1.0))
        canvas.mpl_disconnect(callback)
        callback = None
        # the fourth to seventh draws: each image as it is shown (its own interpolation), at the
        # figure's own dpi and twice it (a retina display), with its own norm and colour map and
        # then with plain ones made from their limits and colours (pipeline_mismatch); the layout is
        # kept between the two
        fig._layout_engine = None
        for im, interpolation in interpolations:
            im.set_interpolation(interpolation)
        for scale in (1.0, 2.0):
            fig.dpi = min(max(own, MIN_FIGURE_DPI) * scale, budget)
            _quiet_draw(canvas)
            as_drawn = _as_seen(canvas.buffer_rgba())
            boxes = {id(im): _drawn_box(im, canvas) for im in images}
            with _plain_pipelines(images):
                _quiet_draw(canvas)
                plain = _as_seen(canvas.buffer_rgba())
            for im in images:
                share = _pixels_differing(as_drawn, plain, boxes[id(im)])
                out[("pipeline", id(im))] = max(out.get(("pipeline", id(im)), 0.0), share)
    finally:
        if callback is not None:
            canvas.mpl_disconnect(callback)
        fig._layout_engine = engine
        fig.dpi = old_dpi
        for im, interpolation in interpolations:
            im.set_interpolation(interpolation)
        if canvas is not old_canvas:
            fig.set_canvas(old_canvas)
    return out


def _as_seen(rgba: Any) -> Any:
    """A draw's pixels (``(H, W, 4)`` bytes, Agg's straight alpha) as ``(H, W, 3)`` int16 colours,
    each pixel less opaque than :data:`MIN_SHOWN_ALPHA` as :data:`_NO_COLOUR` (a copy: the canvas
    may be drawn again)."""
    import numpy as np

    rgba = np.asarray(rgba)
    seen = rgba[..., :3].astype(np.int16)
    seen[rgba[..., 3] < MIN_SHOWN_ALPHA] = _NO_COLOUR
    return seen


def _drawn_box(image: Any, canvas: Any) -> tuple[int, int, int, int] | None:
    """``(top, bottom, left, right)``: the pixels of ``canvas``'s last draw that ``image`` covers
    within its Axes, rows from the top; ``None`` if none."""
    import numpy as np
    from matplotlib.transforms import Bbox

    try:
        box = Bbox.intersection(image.get_window_extent(canvas.get_renderer()), image.axes.bbox)
    except Exception:  # noqa: BLE001 - an image with no usable extent shows nothing to compare
        return None
    if box is None or not np.all(np.isfinite(box.get_points())):
        return None
    width, height = canvas.get_width_height(physical=True)
    left, right = int(np.clip(np.ceil(box.x0), 0, width)), int(np.clip(np.floor(box.x1), 0, width))
    top, bottom = (
        int(np.clip(np.ceil(height - box.y1), 0, height)),
        int(np.clip(np.floor(height - box.y0), 0, height)),
    )
    return (top, bottom, left, right) if right > left and bottom > top else None


def _pixels_differing(a: Any, b: Any, box: tuple[int, int, int, int] | None) -> float:
    """The share of the pixels in ``box`` whose colour differs by more than
    :data:`DRAWN_COLOUR_TOLERANCE` in some channel between the draws ``a`` and ``b``; 0 for no box
    (or draws of different sizes: 1)."""
    import numpy as np

    if box is None:
        return 0.0
    if a.shape != b.shape:
        return 1.0
    top, bottom, left, right = box
    difference = np.abs(a[top:bottom, left:right] - b[top:bottom, left:right]).max(axis=-1)
    return float((difference > DRAWN_COLOUR_TOLERANCE).mean()) if difference.size else 0.0


@contextlib.contextmanager
def _plain_pipelines(images: list[Any]):
    """Within the block, each image is drawn through a plain ``Normalize`` between its colour limits
    (with its norm's clipping) and a plain ``ListedColormap`` of the colours its map gives for each
    of its entries, with its map's colours for too low, too high and masked values; its own norm and
    colour map are put back after."""
    import numpy as np
    from matplotlib import colors

    kept = []
    try:
        for im in images:
            norm, cmap = im.norm, im.get_cmap()
            low, high = (float(v) for v in im.get_clim())
            # a plain ndarray, whatever the map held
            table = np.array(cmap(np.arange(cmap.N)), dtype=np.float64)
            plain = colors.ListedColormap(table, name="plain").with_extremes(
                under=tuple(float(v) for v in cmap.get_under()),
                over=tuple(float(v) for v in cmap.get_over()),
                bad=tuple(float(v) for v in cmap.get_bad()),
            )
            kept.append((im, norm, cmap))
            im.set_norm(colors.Normalize(low, high, clip=bool(getattr(norm, "clip", False))))
            im.set_cmap(plain)
        yield
    finally:
        for im, norm, cmap in reversed(kept):
            im.set_norm(norm)
            im.set_cmap(cmap)


#: Inches between the corner of :func:`pixel_placed`'s second canvas and the figure's corner: a text
#: placed in inches from the canvas's corner (``fig.dpi_scale_trans``) below the images shows over
#: nothing in a plain draw, but Jupyter shows a figure cropped to its contents
#: (``bbox_inches="tight"``), which moves everything else down and the images under the text.
_SHIFT_INCHES = 0.5
#: Inches an artist may move between two draws at different dpi (text and layouts measured in whole
#: pixels).
_PLACE_TOLERANCE = 0.05
#: At most this many of a collection's offsets are compared.
_MAX_OFFSETS = 1000


def _quiet_draw(canvas: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        canvas.draw()


def _artist_places(fig: Any, renderer: Any) -> dict:
    """Where each visible artist of ``fig`` that draws (one without children) lands in the draw
    ``renderer`` has just made, in inches from the figure's own corner (``fig.transFigure``'s
    origin, which a cropped or shifted canvas moves): a text's anchor, a collection's offsets (those
    set: none is the origin of its offset transform, which places nothing), any other artist's drawn
    box (``get_window_extent``); ``{id(artist): points or None}``."""
    import numpy as np
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.text import Text

    origin = np.asarray(fig.transFigure.transform((0.0, 0.0)), dtype=float)
    scale = float(renderer.points_to_pixels(72.0))  # pixels per inch in this draw
    out = {}
    for key, artist in _placed_artists(fig):
        points = []
        boxes = []
        try:
            if isinstance(artist, Text):
                if artist.get_text():  # empty, it draws no text (mpl_toolkits' empty axis labels)
                    points.append(
                        artist.get_transform().transform([artist.get_unitless_position()])
                    )
                # an annotation's arrow, drawn with its text or none
                arrow = getattr(artist, "arrow_patch", None)
                if arrow is not None and arrow.get_visible():
                    boxes.append(arrow.get_window_extent(renderer))
            else:
                if isinstance(artist, Line2D) and not len(artist.get_xydata()):
                    # draws nothing (a box plot's empty fliers), though it has a box at the corner
                    continue
                if isinstance(artist, Collection):
                    # its paths where they are drawn: a collection placed otherwise than in data has
                    # no window extent (Bbox.null), yet can cover the images; with offsets
                    # (scatter's markers, quiver's arrows), its paths are drawn around each offset
                    transform = artist.get_transform()
                    paths = [
                        path.get_extents(transform) for path in artist.get_paths()[:_MAX_OFFSETS]
                    ]
                    paths = [
                        box.get_points() for box in paths if np.all(np.isfinite(box.get_points()))
                    ]
                    offsets = np.zeros((0, 2))
                    if getattr(artist, "_offsets", None) is not None:
                        offsets = np.asarray(artist.get_offsets(), dtype=float).reshape(-1, 2)[
                            :_MAX_OFFSETS
                        ]
                        offsets = (
                            artist.get_offset_transform().transform(offsets)
                            if len(offsets)
                            else offsets
                        )
                    if len(offsets):
                        points.append(offsets)
                        points += [offsets[0] + corners for corners in paths]
                    else:
                        points += paths
                # (a collection's window extent is its data limits, not where it is drawn: quiver's)
                else:
                    boxes.append(artist.get_window_extent(renderer))
        except Exception:  # noqa: BLE001 - an artist without a usable place draws nothing placeable
            pass
        for box in boxes:
            corners = np.asarray(box.get_points(), dtype=float)
            # drawn somewhere (not null, not 0 by 0)
            if np.all(np.isfinite(corners)) and np.any(corners != 0):
                points.append(corners)
        if points:
            out[key] = (np.concatenate(points) - origin) / scale
    return out


def _placed_artists(fig: Any) -> list[tuple[Any, Any]]:
    """``(key, artist)`` for each visible artist of ``fig`` that draws (one without children) but
    the figure's background (which fills any canvas), keyed by ``id``; and for each part an artist
    draws that is the child of none (a quiver key's arrow and label, an offset box's frame, a text's
    box: in an attribute of the artist that draws it), keyed by the owner's ``id`` and the
    attribute's name, which stay the same when the part is made anew in each draw: a quiver key's
    arrow placed in screen pixels over the images is found by no walk of children."""
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import FigureBase

    everything = fig.findobj(include_self=True)
    children = {id(a) for a in everything}
    out = []
    for artist in everything:
        if artist is fig or artist is fig.patch or not artist.get_visible():
            continue
        if not artist.get_children():
            out.append((id(artist), artist))
        for name, part in vars(artist).items():
            if (
                isinstance(part, Artist)
                and not isinstance(part, (Axes, FigureBase))
                and id(part) not in children
                and part.get_visible()
                and not part.get_children()
            ):
                out.append(((id(artist), name), part))
    return out


def _same_place(a: Any, b: Any) -> bool:
    import numpy as np

    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape:
        return False
    finite = np.isfinite(a) & np.isfinite(b)
    return bool(
        np.array_equal(np.isfinite(a), np.isfinite(b))
        and np.allclose(a[finite], b[finite], rtol=0.0, atol=_PLACE_TOLERANCE)
    )


def _size_inches(fig: Any) -> tuple[float, float]:
    """``fig``'s size in inches, ``(width, height)``, each at least 0.01."""
    width, height = (float(v) for v in fig.get_size_inches())
    return max(width, 0.01), max(height, 0.01)


def _mismatch(image: Any, pixels: Any) -> float:
    """The share of ``image``'s cells (:func:`drawn_mismatch`) that fewer than
    :data:`MIN_CELL_PIXELS_SHOWN` of their pixels in ``pixels`` (the drawn figure, ``(H, W, 3)``,
    rows from the top) show in their own colour, within :data:`DRAWN_COLOUR_TOLERANCE`; a cell whose
    centre is off the canvas is not shown, and other cells no pixel's centre falls in are not
    counted (1.0 if none is).

    Off the canvas: cells cut away by Jupyter's display (cropped to the figure's contents less a
    negative ``savefig.pad_inches``) count as not shown."""
    import numpy as np

    own = cell_colours(image)[..., :3].astype(np.int16)
    rows, columns = own.shape[:2]
    height, width = pixels.shape[:2]
    transform = image.get_transform()
    corners = transform.transform(
        [(-0.5, -0.5), (columns - 0.5, rows - 0.5), (-0.5, rows - 0.5), (columns - 0.5, -0.5)]
    )
    if not np.all(np.isfinite(corners)):
        return 1.0
    left, right = (
        int(np.clip(np.floor(v), 0, width)) for v in (corners[:, 0].min(), corners[:, 0].max() + 1)
    )
    top, bottom = (
        int(np.clip(np.floor(height - v), 0, height))
        for v in (corners[:, 1].max(), corners[:, 1].min() - 1)
    )
    if right <= left or bottom <= top:
        return 1.0
    px, py = np.meshgrid(np.arange(left, right), np.arange(top, bottom))
    # display coordinates
    centres = np.stack([px.ravel() + 0.5, height - (py.ravel() + 0.5)], axis=1)
    data = transform.inverted().transform(centres)
    c, r = np.floor(data[:, 0] + 0.5), np.floor(data[:, 1] + 0.5)
    inside = np.isfinite(c) & np.isfinite(r) & (c >= 0) & (c < columns) & (r >= 0) & (r < rows)
    cell = (r[inside] * columns + c[inside]).astype(np.int64)
    drawn = pixels[py.ravel()[inside], px.ravel()[inside]]
    shown = np.abs(drawn - own.reshape(-1, 3)[cell]).max(axis=1) <= DRAWN_COLOUR_TOLERANCE
    counts = np.bincount(cell, minlength=rows * columns).reshape(rows, columns)
    good = np.bincount(cell, weights=shown, minlength=rows * columns).reshape(rows, columns)
    cx, cy = np.meshgrid(np.arange(columns), np.arange(rows))
    centres = transform.transform(np.stack([cx.ravel(), cy.ravel()], axis=1)).reshape(
        rows, columns, 2
    )
    off = ~(
        (centres[..., 0] >= 0)
        & (centres[..., 0] < width)
        & (centres[..., 1] >= 0)
        & (centres[..., 1] < height)
    )
    counts[off & (counts == 0)] = 1  # cut away: judged, and not shown
    if rows >= 5 and columns >= 5:
        counts, good = counts[1:-1, 1:-1], good[1:-1, 1:-1]
    judged = counts > 0
    if not judged.any():
        return 1.0
    return float((good[judged] < MIN_CELL_PIXELS_SHOWN * counts[judged]).mean())


def _text_problem(text: Any) -> str | None:
    if not (text.get_visible() and text.get_text()):
        return None
    if text.get_fontsize() > MAX_FONT_SIZE:
        return f"text larger than {MAX_FONT_SIZE:g} points"
    if text.get_bbox_patch() is not None:
        return "text in a box"
    # wrapped anew on each canvas, it can run down over the images when cropped
    if text.get_wrap():
        return "text that wraps (wrap=True)"
    if not plain_path_effects(text):
        return "text with path effects"
    return None


def plain_path_effects(artist: Any) -> bool:
    """Whether ``artist`` is drawn with no path effects but a plain draw and thin strokes around it
    (:data:`MAX_STROKE_WIDTH`, as ``plt.xkcd()`` draws), nothing that can reach past it (a wide
    stroke, a shadow, a moved copy)."""
    from matplotlib import patheffects

    for effect in artist.get_path_effects() or ():
        if type(effect) is patheffects.Normal:
            continue
        if type(effect) not in (patheffects.Stroke, patheffects.withStroke):
            return False
        # matplotlib keeps a stroke's width and offset only in these attributes (no public getter)
        width = effect._gc.get("linewidth", effect._gc.get("lw", 1.0))
        try:
            if float(width) > MAX_STROKE_WIDTH or tuple(map(float, effect._offset)) != (0.0, 0.0):
                return False
        except (TypeError, ValueError):
            return False
    return True


@_once_per_block
def axes_problems(ax: Any) -> list[str]:
    """What about ``ax`` keeps its image from showing: another projection or scale than the plain
    linear one, a position outside the figure, a changed background patch, or decorations past their
    sizes above."""
    problems = []
    if ax.name != "rectilinear":
        problems.append(f"is drawn on {ax.name!r} Axes: draw it on plain Axes (plt.subplots)")
    if ax.get_xscale() != "linear" or ax.get_yscale() != "linear":
        problems.append(
            "is drawn on a non-linear axis scale (set_xscale or set_yscale): keep the linear one"
        )
    box = drawn_position(ax)
    if box.x0 < -0.02 or box.y0 < -0.02 or box.x1 > 1.02 or box.y1 > 1.02:
        problems.append(
            "is placed partly or wholly outside the figure: keep its Axes on the figure"
        )
    patch = ax.patch
    if hasattr(patch, "get_width") and (
        patch.get_x(),
        patch.get_y(),
        patch.get_width(),
        patch.get_height(),
    ) != (0, 0, 1, 1):
        problems.append(
            "has its Axes' background patch reshaped, which clips the image: leave ax.patch alone"
        )
    decorations = []
    spines = [spine for spine in ax.spines.values() if spine.get_visible()]
    if len(spines) > MAX_SPINES:
        decorations.append(f"{len(spines)} spines (an Axes has {MAX_SPINES})")
    if any(spine.get_linewidth() > MAX_SPINE_WIDTH for spine in spines):
        decorations.append(f"spines wider than {MAX_SPINE_WIDTH:g} points")
    ticks = [t for t in _tick_lines(ax) if t.get_visible()]
    if any(
        t.get_markersize() > MAX_TICK_LENGTH or t.get_markeredgewidth() > MAX_TICK_WIDTH
        for t in ticks
    ):
        decorations.append(
            f"tick marks longer than {MAX_TICK_LENGTH:g} or wider than {MAX_TICK_WIDTH:g} points"
        )
    if not all(map(_plain_tick_marker, ticks)):
        decorations.append("tick marks drawn with markers of their own")
    grid = [g for g in (*ax.xaxis.get_gridlines(), *ax.yaxis.get_gridlines()) if g.get_visible()]
    if any(g.get_linewidth() > MAX_GRID_WIDTH for g in grid):
        decorations.append(f"grid lines wider than {MAX_GRID_WIDTH:g} points")
    # a grid line is a Line2D: a marker at each of its ends (a white square 150 points wide) covers
    # the image
    if not all(
        isinstance(g.get_marker(), (str, type(None))) and g.get_marker() in NO_MARKER for g in grid
    ):
        decorations.append("grid lines drawn with markers")
    decorations += sorted({p for p in map(_text_problem, _axes_texts(ax)) if p})
    if not all(map(plain_path_effects, [*spines, *ticks, *grid])):
        decorations.append("spines, tick marks or grid lines with path effects")
    if any(getattr(t, "arrow_patch", None) is not None for t in ax.texts):
        decorations.append("an annotation arrow")
    if decorations:
        problems.append(
            f"has {', '.join(decorations)} on its Axes, which can cover it: keep matplotlib's sizes"
        )
    if ax.images and lines_over(ax) > MAX_LINES_OVER:
        problems.append(
            f"has grid lines or tick marks over more than {MAX_LINES_OVER:.0%} of it: keep "
            f"matplotlib's "
            "grid and ticks, or none"
        )
    if ax.images and text_over(ax) > MAX_TEXT_OVER:
        problems.append(
            "has text drawn over it (a title of the figure, fig.text, ax.text, or a title, axis "
            "label or tick labels moved onto it): keep text off the image"
        )
    return problems


#: The most padding (inches) around a figure's contents that Jupyter's display may add
#: (``savefig.pad_inches``). Every matplotlib style sheet keeps its default, 0.1; an inch leaves
#: room for a student's own choice.
MAX_PAD_INCHES = 1.0
#: The farthest (inches) a figure's contents may reach beyond its edge. Jupyter shows a figure
#: cropped to its contents (``bbox_inches="tight"``) and fits the picture to the page's width: a dot
#: 40 figure widths to the right shrinks 16 templates to 22 pixels tall. An honest title of 107
#: characters over a 12-inch figure reaches 1.7 inches past its edge, hence 2.
MAX_OVERHANG_INCHES = 2.0


def _cropped_dpi(fig: Any, dpi: float) -> float | None:
    """``dpi``, or less, so that ``fig`` cropped to its contents (``bbox_inches="tight"``, with its
    pad) is at most
    :data:`MAX_RENDER_PIXELS`; ``None`` when its contents cannot be measured, or reach so far that
    not even one dot per inch fits (an inset 40 figure widths away would make that draw
    gigabytes)."""
    import math

    try:
        box = fig.get_tightbbox(_renderer(fig))
    except Exception:  # noqa: BLE001 - a figure that cannot be measured is not drawn cropped
        return None
    if box is None:
        return dpi
    area = (box.width + 2 * MAX_PAD_INCHES) * (box.height + 2 * MAX_PAD_INCHES)
    if not math.isfinite(area):
        return None
    capped = min(dpi, (MAX_RENDER_PIXELS / max(area, 1e-6)) ** 0.5)
    return capped if capped >= 1.0 else None


def _overhang_inches(fig: Any) -> float:
    """How far (inches) ``fig``'s contents, as ``bbox_inches="tight"`` measures them, reach beyond
    its edge on the farthest side; 0 when they stay on it (or cannot be measured)."""
    import math

    try:
        box = fig.get_tightbbox(_renderer(fig))
    except Exception:  # noqa: BLE001 - a figure that cannot be measured is judged by its draws
        return 0.0
    if box is None:
        return 0.0
    width, height = _size_inches(fig)
    overhang = max(-box.x0, -box.y0, box.x1 - width, box.y1 - height, 0.0)
    return overhang if math.isfinite(overhang) else math.inf


@_once_per_block
def figure_problems(fig: Any) -> list[str]:
    """What about ``fig`` keeps its images from showing, each as the rest of a sentence about the
    figure."""
    import matplotlib
    from matplotlib.text import Text

    problems = []
    if not fig.get_visible():
        problems.append("is hidden (set_visible(False))")
    if fig.dpi < MIN_FIGURE_DPI:
        problems.append(f"is drawn at {fig.dpi:g} dots per inch (matplotlib's default is 100)")
    engine = fig.get_layout_engine()
    if engine is not None and type(engine).__name__ not in LAYOUT_ENGINES:
        problems.append(
            f"is laid out by a layout engine of its own ({type(engine).__name__}), which can move "
            f"its "
            "Axes anywhere: use matplotlib's (layout=\"constrained\" or tight_layout)"
        )
    try:
        at_draw = len(fig.canvas.callbacks.callbacks.get("draw_event") or {})
    except Exception:  # noqa: BLE001 - a canvas without matplotlib's callback registry runs none
        at_draw = 0
    filtered = [
        artist for artist in fig.findobj(include_self=True) if artist.get_agg_filter() is not None
    ]
    # a figure's own filter runs after its draw event: the third draw of _draw_and_compare reads
    # before
    if filtered:
        problems.append(
            f"draws {len(filtered)} of its artists through a filter (set_agg_filter), which can "
            "change what is shown: draw it without filters"
        )
    pad = matplotlib.rcParams["savefig.pad_inches"]
    if not (isinstance(pad, (int, float)) and 0 <= pad <= MAX_PAD_INCHES):
        # Jupyter shows a figure cropped to its contents plus this pad: -1.45 cuts the images to a
        # strip 7 pixels tall, 30 shrinks them to a corner of a picture 6,600 pixels wide
        shown = f"{pad:g}" if isinstance(pad, (int, float)) else repr(pad)
        problems.append(
            f"is shown with {shown} inches around its contents (rcParams[\"savefig.pad_inches\"]), "
            f"which crops it or shrinks it in Jupyter: keep matplotlib's 0.1 (0 to "
            f"{MAX_PAD_INCHES:g})"
        )
    overhang = _overhang_inches(fig)
    if overhang > MAX_OVERHANG_INCHES:
        problems.append(
            f"has contents reaching {overhang:.3g} inches beyond its edge (text, labels or Axes "
            f"placed "
            "outside it), so Jupyter's display, cropped to its contents and fitted to the page, "
            "shrinks "
            "the images: keep everything on the figure"
        )
    # code run after each draw can rewrite the canvas's pixels
    if at_draw:
        problems.append(
            "runs code of its own after each draw (canvas.mpl_connect(\"draw_event\", ...)), which "
            "can change what is shown: draw it without"
        )
    texts = sorted({p for p in map(_text_problem, fig.texts) if p})
    if texts:
        problems.append(f"has {', '.join(texts)} on it, which can cover its Axes")
    elif any(t.get_wrap() and t.get_visible() and t.get_text() for t in fig.findobj(Text)):
        # wherever it is (an inset, another Axes): it wraps anew on a cropped canvas, and can run
        # from a margin across the images
        problems.append("has text that wraps (wrap=True) on it, which can cover its Axes")
    return problems


def default_clip(image: Any, ax: Any) -> bool:
    """Whether ``image`` is clipped only as ``imshow`` clips it: to its Axes' box (``imshow`` turns
    the Axes' rectangle into a clip box of the Axes' bounds), with no clip path or smaller box of
    its own."""
    import numpy as np

    path, box = image.get_clip_path(), image.get_clip_box()
    return (path is None or getattr(path, "_patch", None) is ax.patch) and (
        box is None or bool(np.allclose(box.bounds, ax.bbox.bounds))
    )


def draws_background(ax: Any) -> bool:
    """Whether ``ax`` paints its background (an opaque or partly opaque face), which hides what is
    under it."""
    return bool(
        ax.get_visible()
        and ax.axison
        and ax.get_frame_on()
        and ax.patch.get_visible()
        and ax.patch.get_facecolor()[3] > 0
    )


def paints(ax: Any) -> bool:
    """Whether ``ax`` draws anything that hides what is under it: a background, images, other
    artists, or decorations past matplotlib's sizes (:func:`axes_problems`; what the student process
    reported for it, on the judge's rebuild)."""
    problems = getattr(ax, "reported_problems", None)
    if problems is None:
        problems = axes_problems(ax)
    return bool(
        ax.get_visible() and (draws_background(ax) or ax.images or axes_overlays(ax) or problems)
    )


def drawn_position(ax: Any) -> Any:
    """Where ``ax`` is drawn (a ``Bbox`` in figure fraction): its position with its aspect applied
    and, for an Axes placed by a locator (an inset, ``make_axes_locatable``'s colour bars), where
    the locator puts it, which ``get_position`` tells only after a draw."""
    locator = ax.get_axes_locator()
    if locator is not None:
        ax.apply_aspect(locator(ax, _renderer(root_figure(ax))))
    return ax.get_position()


def root_figure(artist: Any) -> Any:
    """The top-level ``Figure`` an Axes (or a ``SubFigure``) is drawn on: an Axes of
    ``fig.subfigures()`` has the subfigure as its ``.figure``, which has no size of its own
    (``get_figwidth``)."""
    from matplotlib.figure import Figure

    fig = artist.figure
    for _ in range(100):  # subfigures nest; each one's .figure is its parent (the root's is itself)
        if isinstance(fig, Figure) or fig is None:
            break
        fig = fig.figure
    return fig


def _renderer(fig: Any) -> Any:
    """A renderer that measures (text extents, locators) without drawing."""
    canvas = fig.canvas
    return canvas.get_renderer() if hasattr(canvas, "get_renderer") else fig._get_renderer()


def lines_over(ax: Any) -> float:
    """The share of ``ax``'s area that its visible grid lines and tick marks can cover, as if each
    crossed it whole (grid) or pointed into it (ticks): their widths times their lengths, in points
    squared, over the Axes' area. Matplotlib's grid (``ax.grid(True)``) on a template 1.1 inches
    wide is 10 %, 0.55 inches wide 19 %; a grid at every pixel, 4 points wide, over 100 %."""
    box = drawn_position(ax)
    fig = root_figure(ax)
    width = box.width * fig.get_figwidth() * 72.0
    height = box.height * fig.get_figheight() * 72.0
    covered = sum(g.get_linewidth() * height for g in ax.xaxis.get_gridlines() if g.get_visible())
    covered += sum(g.get_linewidth() * width for g in ax.yaxis.get_gridlines() if g.get_visible())
    covered += sum(
        t.get_markersize() * t.get_markeredgewidth() for t in _tick_lines(ax) if t.get_visible()
    )
    return covered / max(width * height, 1e-9)


#: What a line without markers has as its marker (matplotlib's grid lines have none).
NO_MARKER = ("", " ", "None", "none", None)
#: The markers matplotlib draws tick marks with (TICKLEFT, TICKRIGHT, TICKUP, TICKDOWN; "|" and "_"
#: for ticks drawn in and out), and none.
TICK_MARKERS = (0, 1, 2, 3, "|", "_", *NO_MARKER)


def _plain_tick_marker(tick: Any) -> bool:
    """Whether a tick mark is drawn with one of :data:`TICK_MARKERS`, unscaled: a square scaled 100
    times (``MarkerStyle("s", transform=...)``) keeps a marker size of 3.5."""
    marker = tick.get_marker()
    style = getattr(tick, "_marker", None)
    return (
        isinstance(marker, (int, str, type(None)))
        and marker in TICK_MARKERS
        and (style is None or style.get_user_transform() is None)
    )


def _axes_texts(ax: Any) -> list[Any]:
    """Every text of ``ax``: its three titles (centre, left, right), axis labels, tick labels (major
    and minor), the axes' offset texts (the "1e3" matplotlib puts at an axis' end) and ``ax.texts``.
    Each can cover the templates (a minor tick label or an offset text of 300 points)."""
    titles = [getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)]
    # the offset text gets its string only when drawn: set it as a draw would
    for axis in (ax.xaxis, ax.yaxis):
        try:
            axis._update_ticks()
            axis.offsetText.set_text(axis.major.formatter.get_offset())
        except Exception:  # noqa: BLE001 - a student's formatter may raise; its offset text is then read as it is
            pass
    return [
        ax.title,
        *(t for t in titles if t is not None),
        ax.xaxis.label,
        ax.yaxis.label,
        *ax.get_xticklabels(),
        *ax.get_yticklabels(),
        *ax.get_xticklabels(minor=True),
        *ax.get_yticklabels(minor=True),
        ax.xaxis.get_offset_text(),
        ax.yaxis.get_offset_text(),
        *ax.texts,
    ]


#: At most this many levels of inset Axes are followed (an inset of an inset of ...), and this many
#: in all.
MAX_INSET_DEPTH, MAX_INSETS = 8, 64


def descendant_axes(ax: Any) -> list[Any]:
    """The inset Axes of ``ax`` (``ax.inset_axes``), of those, and so on: matplotlib draws each over
    its parent, so an inset of an inset (the first painting nothing, the second a white background)
    hides the templates as well as an inset does."""
    found, level = [], list(getattr(ax, "child_axes", []))
    for _ in range(MAX_INSET_DEPTH):
        if not level or len(found) >= MAX_INSETS:
            break
        found += level
        level = [child for parent in level for child in getattr(parent, "child_axes", [])]
    return found[:MAX_INSETS]


def _tick_lines(ax: Any) -> list[Any]:
    """Every tick mark of ``ax``, major and minor, on both axes (a ``Line2D`` marker each)."""
    return [
        *ax.xaxis.get_ticklines(),
        *ax.yaxis.get_ticklines(),
        *ax.xaxis.get_ticklines(minor=True),
        *ax.yaxis.get_ticklines(minor=True),
    ]


def text_over(ax: Any) -> float:
    """The share of ``ax``'s area under text placed over it: the figure's texts (``suptitle``,
    ``fig.text``), the Axes' own (``ax.text``, ``annotate``), and its titles, axis labels and tick
    labels where moved into it (they sit outside the Axes where matplotlib puts them, but
    ``set_label_coords`` can move an axis label of white blocks onto the image)."""
    fig = root_figure(ax)
    renderer = _renderer(fig)
    texts = [*fig.texts, *(ax.figure.texts if ax.figure is not fig else []), *_axes_texts(ax)]
    box = ax.get_window_extent(renderer)
    covered = 0.0
    for text in texts:
        if not (text.get_visible() and text.get_text()):
            continue
        try:
            extent = text.get_window_extent(renderer)
        # a font matplotlib cannot size (at 2 dpi) is not drawn either
        except (RuntimeError, ValueError):
            continue
        width = min(box.x1, extent.x1) - max(box.x0, extent.x0)
        height = min(box.y1, extent.y1) - max(box.y0, extent.y0)
        covered += max(width, 0.0) * max(height, 0.0)
    return covered / max(box.width * box.height, 1e-9)


def settle(fig: Any) -> None:
    """Lay ``fig`` out as drawing it would first: run its layout engine when it is one of
    matplotlib's (a constrained layout shrinks the Axes under a title of forty lines only then).
    Done once per figure."""
    engine = fig.get_layout_engine()
    if (
        engine is None
        or getattr(fig, "_settled_by_the_grader", False)
        or type(engine).__name__ not in LAYOUT_ENGINES
    ):
        return
    fig._settled_by_the_grader = True
    try:
        # "axes sizes collapsed to zero": the check then says what covers them
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            engine.execute(fig)
    except Exception:  # noqa: BLE001 - a figure matplotlib cannot lay out is read as it stands
        pass


def covering_axes(ax: Any) -> list[Any]:
    """The Axes drawn over ``ax`` that paint something there, when together they cover more than 1 %
    of it (:func:`paints`): the other Axes of its figure drawn after it (a higher zorder, or the
    same and later in ``fig.axes``) and the inset Axes of ``ax`` and of those."""
    fig = root_figure(ax)
    order = list(fig.axes)
    mine = (ax.get_zorder(), order.index(ax) if ax in order else -1)
    above = descendant_axes(ax)
    for index, other in enumerate(order):
        if other is not ax and (other.get_zorder(), index) > mine:
            above += [other, *descendant_axes(other)]
    box = drawn_position(ax)
    area = box.width * box.height
    out, covered = [], 0.0
    for other in above:
        if not paints(other):
            continue
        theirs = drawn_position(other)
        width = min(box.x1, theirs.x1) - max(box.x0, theirs.x0)
        height = min(box.y1, theirs.y1) - max(box.y0, theirs.y0)
        if width > 0 and height > 0:
            out.append(other)
            covered += width * height
    # strips add up: many under 1 % each cover as much as one
    return out if covered > 0.01 * area else []


def grid_cells(axes: list[Any]) -> tuple[int, int, list[tuple[int, int]]]:
    """The grid ``axes`` are drawn in, read from where each is drawn (:func:`drawn_position`), not
    from how it was made: ``(rows, columns, cells)``, with ``cells[k]`` the (row, column) of
    ``axes[k]``, rows counted from the top and columns from the left. Axes whose centres are less
    than half an Axes' (median) width apart across, or height apart up and down, share a column or
    row. So ``plt.subplots(4, 4)``, ``ImageGrid`` and sixteen hand-placed ``fig.add_axes`` in four
    rows all read as 4 by 4, and a row of sixteen as 1 by 16.

    Raises ``ValueError`` for an empty ``axes``."""
    if not axes:
        raise ValueError("grid_cells needs at least one Axes")
    boxes = [drawn_position(ax) for ax in axes]

    def bands(centres: list[float], sizes: list[float]) -> tuple[int, list[int]]:
        tolerance = 0.5 * sorted(sizes)[len(sizes) // 2]
        index, band, last = [0] * len(centres), -1, None
        for k in sorted(range(len(centres)), key=centres.__getitem__):
            if last is None or centres[k] - last > tolerance:
                band += 1
            index[k], last = band, centres[k]
        return band + 1, index

    rows, row_of = bands([-(b.y0 + b.y1) / 2 for b in boxes], [b.height for b in boxes])
    columns, column_of = bands([(b.x0 + b.x1) / 2 for b in boxes], [b.width for b in boxes])
    return rows, columns, list(zip(row_of, column_of))
