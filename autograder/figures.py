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
:func:`autograder.figure_drawing.drawn_mismatch` draws the figure once and compares each image's
cells with their own colours. What the checks read of a figure without drawing it is
:mod:`autograder.figure_parts`.
"""

from __future__ import annotations

from typing import Any

from autograder.figure_drawing import (
    MAX_DRAWN_MISMATCH,
    drawn_mismatch,
    once_per_block,
    pipeline_mismatch,
    pixel_placed,
)
from autograder.figure_parts import (
    LAYOUT_ENGINES,
    MAX_PAD_INCHES,
    MIN_FIGURE_DPI,
    NO_MARKER,
    axes_overlays,
    axes_texts,
    cell_colours,
    descendant_axes,
    drawn_position,
    draws_background,
    figure_renderer,
    lines_over,
    own_methods,
    plain_path_effects,
    plain_tick_marker,
    root_figure,
    size_inches,
    text_over,
    tick_lines,
)

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
#: An Axes has four spines (left, right, bottom, top); more, each under the width limit, could lie
#: side by side over the image.
MAX_SPINES = 4
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


@once_per_block
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
    ticks = [t for t in tick_lines(ax) if t.get_visible()]
    if any(
        t.get_markersize() > MAX_TICK_LENGTH or t.get_markeredgewidth() > MAX_TICK_WIDTH
        for t in ticks
    ):
        decorations.append(
            f"tick marks longer than {MAX_TICK_LENGTH:g} or wider than {MAX_TICK_WIDTH:g} points"
        )
    if not all(map(plain_tick_marker, ticks)):
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
    decorations += sorted({p for p in map(_text_problem, axes_texts(ax)) if p})
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


#: The farthest (inches) a figure's contents may reach beyond its edge. Jupyter shows a figure
#: cropped to its contents (``bbox_inches="tight"``) and fits the picture to the page's width: a dot
#: 40 figure widths to the right shrinks 16 templates to 22 pixels tall. An honest title of 107
#: characters over a 12-inch figure reaches 1.7 inches past its edge, hence 2.
MAX_OVERHANG_INCHES = 2.0


def _overhang_inches(fig: Any) -> float:
    """How far (inches) ``fig``'s contents, as ``bbox_inches="tight"`` measures them, reach beyond
    its edge on the farthest side; 0 when they stay on it (or cannot be measured)."""
    import math

    try:
        box = fig.get_tightbbox(figure_renderer(fig))
    except Exception:  # noqa: BLE001 - a figure that cannot be measured is judged by its draws
        return 0.0
    if box is None:
        return 0.0
    width, height = size_inches(fig)
    overhang = max(-box.x0, -box.y0, box.x1 - width, box.y1 - height, 0.0)
    return overhang if math.isfinite(overhang) else math.inf


@once_per_block
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
    # a figure's own filter runs after its draw event: the third draw of draw_and_compare reads
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
