"""The parts of a matplotlib figure that decide what it shows, read without drawing it: what lies
over an image (patches, lines, collections, boxed text, legends), whether a norm is linear and
plain, each cell's colour, where an Axes is drawn, its inset Axes, its texts and tick lines, the
figure's size and the resolution it is drawn at. The checks of :mod:`autograder.figures` and the
drawing of :mod:`autograder.figure_drawing` are built on these.
"""

from __future__ import annotations

import warnings
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


#: Path effects (``set_path_effects``) a decoration may have: a plain draw, or a stroke around it no
#: wider than this (points) and not moved off it. ``plt.xkcd()`` outlines every text, spine and tick
#: in white, 4 points wide; a spine stroked 400 points wide in white blanks every template.
MAX_STROKE_WIDTH = 4.0
#: Layout engines that only place Axes (matplotlib's own); another can move them anywhere when the
#: figure is drawn.
LAYOUT_ENGINES = ("ConstrainedLayoutEngine", "TightLayoutEngine", "PlaceHolderLayoutEngine")
#: A figure drawn at fewer dots per inch than this shows nothing (:func:`figure_problems`).
MIN_FIGURE_DPI = 30
#: ...and at most this many pixels in all (80 MB of RGBA: a figure of 20 by 20 inches is drawn at
#: 220 dpi).
MAX_RENDER_PIXELS = 20e6


def size_inches(fig: Any) -> tuple[float, float]:
    """``fig``'s size in inches, ``(width, height)``, each at least 0.01."""
    width, height = (float(v) for v in fig.get_size_inches())
    return max(width, 0.01), max(height, 0.01)


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


#: The most padding (inches) around a figure's contents that Jupyter's display may add
#: (``savefig.pad_inches``). Every matplotlib style sheet keeps its default, 0.1; an inch leaves
#: room for a student's own choice.
MAX_PAD_INCHES = 1.0


def cropped_dpi(fig: Any, dpi: float) -> float | None:
    """``dpi``, or less, so that ``fig`` cropped to its contents (``bbox_inches="tight"``, with its
    pad) is at most
    :data:`MAX_RENDER_PIXELS`; ``None`` when its contents cannot be measured, or reach so far that
    not even one dot per inch fits (an inset 40 figure widths away would make that draw
    gigabytes)."""
    import math

    try:
        box = fig.get_tightbbox(figure_renderer(fig))
    except Exception:  # noqa: BLE001 - a figure that cannot be measured is not drawn cropped
        return None
    if box is None:
        return dpi
    area = (box.width + 2 * MAX_PAD_INCHES) * (box.height + 2 * MAX_PAD_INCHES)
    if not math.isfinite(area):
        return None
    capped = min(dpi, (MAX_RENDER_PIXELS / max(area, 1e-6)) ** 0.5)
    return capped if capped >= 1.0 else None


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


def drawn_position(ax: Any) -> Any:
    """Where ``ax`` is drawn (a ``Bbox`` in figure fraction): its position with its aspect applied
    and, for an Axes placed by a locator (an inset, ``make_axes_locatable``'s colour bars), where
    the locator puts it, which ``get_position`` tells only after a draw."""
    locator = ax.get_axes_locator()
    if locator is not None:
        ax.apply_aspect(locator(ax, figure_renderer(root_figure(ax))))
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


def figure_renderer(fig: Any) -> Any:
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
        t.get_markersize() * t.get_markeredgewidth() for t in tick_lines(ax) if t.get_visible()
    )
    return covered / max(width * height, 1e-9)


#: What a line without markers has as its marker (matplotlib's grid lines have none).
NO_MARKER = ("", " ", "None", "none", None)
#: The markers matplotlib draws tick marks with (TICKLEFT, TICKRIGHT, TICKUP, TICKDOWN; "|" and "_"
#: for ticks drawn in and out), and none.
TICK_MARKERS = (0, 1, 2, 3, "|", "_", *NO_MARKER)


def plain_tick_marker(tick: Any) -> bool:
    """Whether a tick mark is drawn with one of :data:`TICK_MARKERS`, unscaled: a square scaled 100
    times (``MarkerStyle("s", transform=...)``) keeps a marker size of 3.5."""
    marker = tick.get_marker()
    style = getattr(tick, "_marker", None)
    return (
        isinstance(marker, (int, str, type(None)))
        and marker in TICK_MARKERS
        and (style is None or style.get_user_transform() is None)
    )


def axes_texts(ax: Any) -> list[Any]:
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


def tick_lines(ax: Any) -> list[Any]:
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
    renderer = figure_renderer(fig)
    texts = [*fig.texts, *(ax.figure.texts if ax.figure is not fig else []), *axes_texts(ax)]
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
