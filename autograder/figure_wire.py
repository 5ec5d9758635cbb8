"""A matplotlib figure across the wire: described in the student process
(:func:`encode_figure`: each Axes' images as arrays with their colour limits, colour map, norm and
placement, and what else each Axes draws, as stand-ins), and rebuilt by the judge
(:func:`rebuild_figure`) as a new figure the checks read as they would the student's own, within
:data:`channel.MAX_FIGURE_AREA`, :data:`channel.MAX_AXES` and :data:`channel.MAX_IMAGE_NUMBERS`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from autograder import channel, figure_drawing, figure_parts, figures
from autograder.channel import (
    KIND,
    TooComplex,
    text_field,
)


def encode_figure(value: Any) -> dict | None:
    """The description of ``value`` if it is a matplotlib Figure (its Axes, their images and what
    else they draw, and what the student process found wrong by drawing it), else ``None``."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        return None
    if not isinstance(value, Figure):
        return None
    try:
        figure_parts.settle(value)
    except Exception:  # noqa: BLE001 - a student's figure may be anything
        pass
    axes = []
    # the images' drawn_mismatch: one draw of the figure for all of them
    with figure_drawing.one_draw_per_figure():
        for ax in value.axes:
            images = []
            for image in ax.images:
                array = image.get_array()
                data = (
                    torch.as_tensor(getattr(array, "data", array)).clone()
                    if array is not None
                    else None
                )
                images.append(
                    {
                        "array": data,
                        "clim": tuple(float(c) for c in image.get_clim()),
                        "cmap": image.get_cmap().name,
                        **_drawing(image, ax),
                    }
                )
            axes.append(
                {
                    "images": images,
                    "title": ax.get_title(),
                    "grid": _grid_position(ax),
                    **_axes_drawing(ax),
                }
            )
    return {
        KIND: "figure",
        "axes": axes,
        **_readable(
            (
                ("size", lambda: [float(v) for v in value.get_size_inches()]),
                ("overlays", lambda: figure_parts.figure_overlays(value)),
                ("problems", lambda: figures.figure_problems(value)),
            )
        ),
    }


def _readable(reads) -> dict:
    """``{key: read()}`` for each ``(key, read)`` that does not raise: a student's figure may be
    anything."""
    out: dict = {}
    for key, read in reads:
        try:
            out[key] = read()
        except Exception:  # noqa: BLE001 - a student's figure may be anything
            continue
    return out


def _drawing(image: Any, ax: Any) -> dict:
    """How ``image`` is drawn, beyond its array and colour limits: its colour map's colours (16
    samples), its norm's type name and whether it is linear between the limits, origin, extent,
    alpha, visibility, masked entries, whether its transform and clipping are imshow's, the colours
    its own values are drawn in, and what else keeps it from showing them
    (:mod:`autograder.figures`); whatever cannot be read is left out."""
    import numpy as np

    def mask():
        masked = np.ma.getmaskarray(image.get_array())
        return torch.as_tensor(masked.copy()) if masked.any() else None

    return _readable(
        (
            (
                "cmap_colors",
                lambda: torch.as_tensor(
                    np.asarray(image.get_cmap()(np.linspace(0, 1, 16)), dtype=np.float64)
                ),
            ),
            ("norm", lambda: type(image.norm).__name__),
            ("norm_linear", lambda: figure_parts.norm_is_linear(image)),
            ("origin", lambda: str(image.origin)),
            ("extent", lambda: [float(e) for e in image.get_extent()]),
            ("alpha", lambda: _alpha(image.get_alpha())),
            ("visible", lambda: bool(image.get_visible()) and bool(ax.get_visible())),
            ("mask", mask),
            ("own_transform", lambda: image.get_transform() is not ax.transData),
            ("own_clip", lambda: not figure_parts.default_clip(image, ax)),
            ("cell_colours", lambda: torch.as_tensor(figure_parts.cell_colours(image).copy())),
            ("problems", lambda: figures.image_problems(image)),
        )
    )


def _axes_drawing(ax: Any) -> dict:
    """How ``ax`` shows its images: whether it is drawn at all, view limits, aspect, position in the
    figure (figure fraction, where it is drawn), zorder, whether it paints a background, what else
    it draws, and where its inset Axes are and whether they paint anything
    (:mod:`autograder.figures`)."""
    return _readable(
        (
            ("visible", lambda: bool(ax.get_visible())),
            ("view", lambda: [float(v) for v in (*ax.get_xlim(), *ax.get_ylim())]),
            ("aspect", lambda: "auto" if ax.get_aspect() == "auto" else float(ax.get_aspect())),
            ("position", lambda: _bounds(ax)),
            ("zorder", lambda: float(ax.get_zorder())),
            ("background", lambda: figure_parts.draws_background(ax)),
            ("overlays", lambda: figure_parts.axes_overlays(ax)),
            ("problems", lambda: figures.axes_problems(ax)),
            (
                "insets",
                lambda: [
                    {"position": _bounds(child), "paints": figures.paints(child)}
                    for child in figure_parts.descendant_axes(ax)[: channel.MAX_AXES]
                ],
            ),
        )
    )


def _bounds(ax: Any) -> list[float]:
    return [float(v) for v in figure_parts.drawn_position(ax).bounds]


def _alpha(alpha: Any) -> float | str | None:
    """An image's alpha as it crosses: ``None`` (opaque), a number, or ``"per-pixel"`` for an
    array."""
    import numpy as np

    if alpha is None:
        return None
    return float(alpha) if np.ndim(alpha) == 0 else "per-pixel"


def _grid_position(ax: Any) -> list[int] | None:
    """Where ``ax`` sits in its figure's grid: ``[rows, columns, first cell, last cell]`` of the
    outermost grid (cells numbered in reading order from 0), or ``None`` for an Axes placed by
    hand."""
    try:
        spec = ax.get_subplotspec()
        return (
            None
            if spec is None
            else [int(v) for v in spec.get_topmost_subplotspec().get_geometry()]
        )
    except Exception:  # noqa: BLE001 - a student's Axes may be anything
        return None


def _valid_grid(grid: Any) -> bool:
    """``[rows, columns, first, last]``: ints, at most :data:`channel.MAX_AXES` cells,
    ``0 <= first <= last < cells``."""
    if not (isinstance(grid, list) and len(grid) == 4 and all(type(v) is int for v in grid)):
        return False
    rows, columns, first, last = grid
    return (
        1 <= rows
        and 1 <= columns
        and rows * columns <= channel.MAX_AXES
        and 0 <= first <= last < rows * columns
    )


def rebuild_figure(value: dict):
    """A matplotlib Figure with the student's Axes, images and colour limits, each image carrying
    what the student process found wrong with it by drawing the student's figure (an image whose
    description leaves that out carries :data:`UNREPORTED`: the judge never draws a rebuild)."""
    from matplotlib.figure import Figure

    axes = value["axes"]
    parts = {
        "Axes": (len(axes), channel.MAX_AXES),
        "inset Axes": (sum(len(_listed(ax.get("insets"))) for ax in axes), channel.MAX_AXES),
        "images": (sum(len(ax["images"]) for ax in axes), 4 * channel.MAX_AXES),
    }
    for part, (count, most) in parts.items():
        if count > most:
            raise TooComplex(f"a figure with more than {most} {part}")
    numbers = sum(
        image["array"].numel()
        for ax in axes
        for image in ax["images"]
        if isinstance(image, dict) and isinstance(image.get("array"), torch.Tensor)
    )
    if numbers > channel.MAX_IMAGE_NUMBERS:
        raise TooComplex(
            f"a figure whose images hold more than {channel.MAX_IMAGE_NUMBERS:,} numbers in all"
        )
    fig = Figure()
    size = value.get("size")
    if _floats(size, 2) and all(0.0 < v <= 1000.0 for v in size):
        if size[0] * size[1] > channel.MAX_FIGURE_AREA:
            raise TooComplex(
                f"a figure of {size[0]:.4g} by {size[1]:.4g} inches "
                f"(at most {channel.MAX_FIGURE_AREA} square inches are drawn)"
            )
        fig.set_size_inches(size)
    n = max(1, len(value["axes"]))
    for i, ax_data in enumerate(value["axes"]):
        grid = ax_data.get("grid")
        if _valid_grid(grid):  # the student's grid position, as ``ax.get_subplotspec()`` reports it
            rows, columns, first, last = grid
            ax = fig.add_subplot(
                rows, columns, first + 1 if first == last else (first + 1, last + 1)
            )
        else:  # placed by hand (or nothing sensible sent): side by side, in order
            ax = fig.add_subplot(1, n, i + 1)
        ax.set_title(text_field(ax_data.get("title"), "", 1000))
        for image in ax_data["images"]:
            array = image["array"]
            if array is None:
                continue
            low, high = image["clim"]
            if not (math.isfinite(low) and math.isfinite(high)):
                low = high = None
            _draw(ax, array, image, low, high)
        _arrange(ax, ax_data)
    _stand_ins(fig, value.get("overlays"), figure=True)
    _report_problems(fig, value.get("problems"))
    return fig


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else []


def _report_problems(artist: Any, problems: Any) -> None:
    """Attach what the student process found wrong with a figure, Axes or image
    (:mod:`autograder.figures`'s sentences) to its rebuild, where the checks read it; anything but a
    short list of strings is left out."""
    if (
        isinstance(problems, list)
        and len(problems) <= 20
        and all(isinstance(p, str) for p in problems)
    ):
        artist.reported_problems = [p[:300] for p in problems]


def _floats(value: Any, n: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == n
        and all(isinstance(v, float) and math.isfinite(v) for v in value)
    )


def _arrange(ax: Any, ax_data: dict) -> None:
    """Give the rebuilt ``ax`` the student's view limits, aspect, position, zorder, background,
    stand-ins for what else it draws and its insets (:func:`_axes_drawing`); a field missing or out
    of range is left as rebuilt."""
    from matplotlib.axes import Axes

    _stand_ins(ax, ax_data.get("overlays"), figure=False)
    if ax_data.get("visible") is False:
        ax.set_visible(False)
    view = ax_data.get("view")
    if _floats(view, 4) and view[0] != view[1] and view[2] != view[3]:
        ax.set_xlim(view[0], view[1])
        ax.set_ylim(view[2], view[3])
    aspect = ax_data.get("aspect")
    if aspect == "auto" or (isinstance(aspect, float) and math.isfinite(aspect) and aspect > 0):
        ax.set_aspect(aspect)
    position = ax_data.get("position")
    if _floats(position, 4) and position[2] >= 0 and position[3] >= 0:
        ax.set_position(position)
    zorder = ax_data.get("zorder")
    if isinstance(zorder, float) and math.isfinite(zorder):
        ax.set_zorder(zorder)
    if ax_data.get("background") is False:
        ax.patch.set_visible(False)
    _report_problems(ax, ax_data.get("problems"))
    insets = ax_data.get("insets")
    for inset in insets[: channel.MAX_AXES] if isinstance(insets, list) else []:
        bounds = inset.get("position") if isinstance(inset, dict) else None
        if _floats(bounds, 4) and bounds[2] >= 0 and bounds[3] >= 0:
            child = Axes(ax.figure, bounds)  # placed where the student's inset is drawn, no locator
            child.patch.set_visible(inset.get("paints") is not False)
            if inset.get("paints") is False:
                child.axis("off")
            ax.add_child_axes(child)


def _stand_ins(owner: Any, kinds: Any, figure: bool) -> None:
    """One stand-in artist per kind the student process reported (:mod:`autograder.figures`) on
    ``owner``, an Axes or the figure, so that the checks read the rebuild as they would the
    student's figure."""
    from matplotlib.artist import Artist
    from matplotlib.collections import PatchCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    if not isinstance(kinds, list):
        return
    for kind in kinds[: channel.MAX_AXES]:
        if not isinstance(kind, str):
            continue
        if kind == "patch" and not figure:
            owner.add_patch(Rectangle((0, 0), 0, 0))
        elif kind == "line" and not figure:
            owner.add_line(Line2D([], []))
        elif kind == "collection" and not figure:
            owner.add_collection(PatchCollection([]), autolim=False)
        elif kind == "boxed text":
            owner.text(0, 0, "", bbox={})
        else:
            stand_in = Artist()
            stand_in.set_label(kind[:40])
            owner.add_artist(stand_in)


def _draw(ax: Any, array: torch.Tensor, image: dict, low: float | None, high: float | None) -> None:
    """``imshow`` the student's image as the student process reported it was drawn
    (:func:`_drawing`); a field missing or out of range is drawn as imshow's default."""
    import numpy as np
    from matplotlib.colors import ListedColormap, Normalize
    from matplotlib.patches import Circle
    from matplotlib.transforms import Affine2D

    name = image.get("cmap") if isinstance(image.get("cmap"), str) else None
    cmap: Any = name
    colours = image.get("cmap_colors")
    if (
        isinstance(colours, torch.Tensor)
        and tuple(colours.shape) == (16, 4)
        and bool(torch.isfinite(colours).all())
        and float(colours.min()) >= 0.0
        and float(colours.max()) <= 1.0
    ):
        cmap = ListedColormap(colours.numpy(), name=name or "reported")
    origin = image.get("origin") if image.get("origin") in ("upper", "lower") else None
    extent = image.get("extent") if _floats(image.get("extent"), 4) else None
    shown = ax.imshow(array.numpy(), cmap=cmap, vmin=low, vmax=high, origin=origin, extent=extent)
    alpha = image.get("alpha")
    if isinstance(alpha, float) and 0.0 <= alpha <= 1.0:
        shown.set_alpha(alpha)
    elif alpha == "per-pixel":  # an array of alphas: drawn see-through here, whatever its values
        shown.set_alpha(0.5)
    norm, linear = image.get("norm"), image.get("norm_linear")
    if linear is False or (isinstance(norm, str) and norm != "Normalize" and linear is not True):
        # not linear between the limits: a stand-in of the student's norm's name that is not linear
        # either
        name = norm[:100] if isinstance(norm, str) and norm.isidentifier() else "ReportedNorm"
        shown.set_norm(type(name, (Normalize,), {"__call__": _squared})(low, high))
    mask = image.get("mask")
    if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.shape == array.shape:
        shown.set_data(np.ma.masked_array(array.numpy(), mask=mask.numpy()))
    if image.get("own_transform") is True:
        shown.set_transform(Affine2D() + ax.transData)
    if image.get("own_clip") is True:
        shown.set_clip_path(Circle((0.5, 0.5), 0.5, transform=ax.transAxes))
    if image.get("visible") is False:
        shown.set_visible(False)
    colours = image.get("cell_colours")
    if (
        isinstance(colours, torch.Tensor)
        and colours.dtype == torch.uint8
        and colours.dim() == 3
        and tuple(colours.shape) == (*array.shape[:2], 4)
    ):
        shown.reported_cell_colours = colours.numpy()
    _report_problems(shown, image.get("problems"))
    if getattr(shown, "reported_problems", None) is None:
        # the judge does not draw the rebuild in place of the student's figure: images can be
        # chosen so that their draws cost the judge gigabytes and minutes (and a rebuild shows
        # only what crossed, not what the student's figure draws over it)
        shown.reported_problems = [UNREPORTED]


#: What an image is reported to have wrong when its description leaves out what the student process
#: found by drawing its figure (:func:`autograder.figures.image_problems`): honestly, only when that
#: draw failed there.
UNREPORTED = (
    f"{figures.NOT_SHOWN} as far as the grader can tell (drawing its figure in your notebook "
    f"failed): "
    "draw it with imshow and nothing set by hand"
)


def _squared(self: Any, value: Any, clip: Any = None) -> Any:
    """A stand-in norm's mapping: linear's squared, so that it is not linear between the limits."""
    from matplotlib.colors import Normalize

    return Normalize.__call__(self, value, clip) ** 2
