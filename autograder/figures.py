"""What a matplotlib figure draws besides its images' arrays: read alike in the student process (which describes
a figure to the judge, :mod:`autograder.channel`) and by the checks (on the judge's rebuild of that description, or
on the student's own figure when the checks run in the student's kernel).

Hostile reviews ten to thirteen drew a graded image so that it showed something else than its array and colour
limits say: under a second image, see-through, through a non-linear norm, in a grey map named "RdBu_r", upside
down with ``invert_yaxis``, zoomed with ``set_xlim``, squashed with ``set_aspect``, rotated with ``set_transform``,
masked, clipped, covered by a white ``Rectangle``, an inset Axes or another Axes, or drawn 0.01 inches wide.
Inset Axes and other Axes count only where they overlap the image (a colour bar beside it is fine).
The functions here name each of those, so that a check can refuse them.
"""

from __future__ import annotations

from typing import Any

#: What may sit on an image's Axes besides the image without covering it: titles, axis labels and ticks are not
#: artists of these lists, and plain text (no box behind it) covers nothing. Everything else does, or can.
OVERLAY_KINDS = ("patch", "line", "collection", "table", "artist", "boxed text", "legend")
#: Each kind in messages, more than one of it (the figure's own kinds too).
PLURALS = {"patch": "patches", "line": "lines", "collection": "collections", "table": "tables", "artist": "artists",
           "boxed text": "boxed texts", "inset Axes": "inset Axes", "legend": "legends",
           "image (figimage)": "images (figimage)", "subfigure": "subfigures"}


def axes_overlays(ax: Any) -> list[str]:
    """The kinds (:data:`OVERLAY_KINDS`) of what ``ax`` draws besides its images, one entry per artist."""
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
    """The kinds of what ``fig`` draws over its Axes (figure-level artists, which are drawn after the Axes)."""
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
    """A generic artist's kind: the judge's rebuild labels its stand-ins with the kind the student process saw."""
    label = artist.get_label() if hasattr(artist, "get_label") else None
    return label if isinstance(label, str) and label in OVERLAY_KINDS + ("image (figimage)", "subfigure") else "artist"


def norm_is_linear(image: Any) -> bool:
    """Whether ``image``'s norm maps its colour limits' range linearly onto [0, 1] (nine points, within 1e-6):
    ``Normalize``, and ``CenteredNorm`` or ``TwoSlopeNorm`` centred between the limits, are; ``LogNorm``, a
    ``TwoSlopeNorm`` centred elsewhere, ``BoundaryNorm`` are not. Limits that are not finite and increasing are not."""
    import numpy as np

    low, high = (float(c) for c in image.get_clim())
    if not (np.isfinite(low) and np.isfinite(high) and high > low):
        return False
    mapped = np.ma.filled(np.ma.asarray(image.norm(np.linspace(low, high, 9)), dtype=np.float64), np.nan)
    return bool(np.allclose(mapped, np.linspace(0.0, 1.0, 9), rtol=0.0, atol=1e-6))


def default_clip(image: Any, ax: Any) -> bool:
    """Whether ``image`` is clipped only as ``imshow`` clips it: to its Axes' box (``imshow`` turns the Axes'
    rectangle into a clip box of the Axes' bounds), with no clip path or smaller box of its own."""
    import numpy as np

    path, box = image.get_clip_path(), image.get_clip_box()
    return ((path is None or getattr(path, "_patch", None) is ax.patch)
            and (box is None or bool(np.allclose(box.bounds, ax.bbox.bounds))))


def draws_background(ax: Any) -> bool:
    """Whether ``ax`` paints its background (an opaque or partly opaque face), which hides what is under it."""
    return bool(ax.get_visible() and ax.axison and ax.get_frame_on() and ax.patch.get_visible()
                and ax.patch.get_facecolor()[3] > 0)


def paints(ax: Any) -> bool:
    """Whether ``ax`` draws anything that hides what is under it: a background, images, or other artists."""
    return bool(ax.get_visible() and (draws_background(ax) or ax.images or axes_overlays(ax)))


def drawn_position(ax: Any) -> Any:
    """Where ``ax`` is drawn (a ``Bbox`` in figure fraction): its position with its aspect applied and, for an
    Axes placed by a locator (an inset, ``make_axes_locatable``'s colour bars), where the locator puts it, which
    ``get_position`` tells only after a draw."""
    locator = ax.get_axes_locator()
    if locator is not None:
        canvas = ax.figure.canvas
        renderer = canvas.get_renderer() if hasattr(canvas, "get_renderer") else ax.figure._get_renderer()
        ax.apply_aspect(locator(ax, renderer))
    return ax.get_position()


def covering_axes(ax: Any) -> list[Any]:
    """The Axes drawn over more than 5 % of ``ax`` that paint something there (:func:`paints`): the other Axes
    of its figure drawn after it (a higher zorder, or the same and later in ``fig.axes``) and the inset Axes of
    ``ax`` and of those."""
    fig = ax.figure
    order = list(fig.axes)
    mine = (ax.get_zorder(), order.index(ax) if ax in order else -1)
    above = list(ax.child_axes)
    for index, other in enumerate(order):
        if other is not ax and (other.get_zorder(), index) > mine:
            above += [other, *other.child_axes]
    box = drawn_position(ax)
    area = box.width * box.height
    out = []
    for other in above:
        if not paints(other):
            continue
        theirs = drawn_position(other)
        width = min(box.x1, theirs.x1) - max(box.x0, theirs.x0)
        height = min(box.y1, theirs.y1) - max(box.y0, theirs.y0)
        if width > 0 and height > 0 and width * height > 0.05 * area:
            out.append(other)
    return out
