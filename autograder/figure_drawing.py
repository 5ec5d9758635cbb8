"""Drawing a figure once and comparing what was drawn with what its images say: each image's cells
against their own colours (:func:`drawn_mismatch`); artists placed in screen pixels, which land
elsewhere at another dpi (:func:`pixel_placed`); and colours that only the image's own drawing
pipeline gives (:func:`pipeline_mismatch`). A figure is drawn at
most once per check (:func:`one_draw_per_figure`, :func:`once_per_block`), at a resolution that
gives each cell :data:`RENDER_PIXELS_PER_CELL` pixels within :data:`MAX_RENDER_PIXELS`.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable
from typing import Any

from autograder.figure_parts import (
    LAYOUT_ENGINES,
    MAX_RENDER_PIXELS,
    MIN_FIGURE_DPI,
    cell_colours,
    cropped_dpi,
    root_figure,
    size_inches,
)

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
    (:func:`draw_and_compare`).

    The grader's other draws resample every image ``nearest``, so they feed its norm and colour map
    only its own values; a smoothing draw (``bilinear``) feeds them the values between, so code
    hidden in objects the norm and map hold (a scale's transform, a lookup table of its own array
    class) that gives the right colours at the image's own values only shows otherwise here.
    """
    return float(_drawn(image).get(("pipeline", id(image)), 0.0))


def _drawn(image: Any) -> dict:
    """:func:`draw_and_compare` for ``image``'s figure, once per :func:`one_draw_per_figure`
    block."""
    fig = root_figure(image.axes) if image.axes is not None else None
    if fig is None:
        return {}
    drawn = _DRAWS.get(id(fig)) if _DRAWS is not None else None
    if drawn is not None:
        return drawn[1]
    try:
        drawn = draw_and_compare(fig)
    except Exception:  # noqa: BLE001 - a figure matplotlib cannot draw shows nothing
        drawn = {}
    if _DRAWS is not None:
        _DRAWS[id(fig)] = (fig, drawn)  # the figure kept alive with its id while the block runs
    return drawn


#: The draws of :func:`one_draw_per_figure`'s block (``{id(figure): (figure, {id(image):
#: share})}``), else ``None``.
_DRAWS: dict | None = None
#: What :func:`once_per_block`'s functions found in that block (``{(name, id(artist)): (artist,
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


def once_per_block(find: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
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


def draw_and_compare(fig: Any) -> dict:
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
    width, height = size_inches(fig)
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
        third = cropped_dpi(fig, max(own, MIN_FIGURE_DPI))
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
