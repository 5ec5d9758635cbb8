"""What crosses the wire for a student's network: its parameters, as data, and nothing it can fake
later.

The judge grades a network by the weights it holds, in its own copy of the
architecture (``autograder.checks.when_it_fails.MLP``), so the copies that
cross with a module must be the module's parameters, in ``parameters()``
order, taken when the value crossed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from autograder import channel, encoding, tensor_payload
from autograder.checks import CheckFailure, expect_module_parameters


class _Handle(encoding.Handle):
    def __init__(self, handle: int, name: str, kind: str):
        self.handle, self.name, self.type_name = handle, name, kind


def _cross(value):
    """``value`` encoded by the student process, through the wire format, decoded by the judge."""
    handles: dict[int, object] = {}
    payload = tensor_payload.dump(encoding.encode(value, handles))
    return encoding.decode(tensor_payload.load(payload), _Handle), handles


def _mlp(hidden: int = 8) -> nn.Sequential:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def test_a_network_crosses_with_copies_of_its_parameters_in_order():
    net = _mlp()
    expected = [p.detach().clone() for p in net.parameters()]
    actual, handles = _cross(net)
    with torch.no_grad():
        net[0].weight.zero_()  # a change after crossing does not reach the judge's copies
    assert isinstance(actual, _Handle) and handles[actual.handle] is net
    assert actual.is_module and actual.type_name == "Sequential"
    assert [tuple(p.shape) for p in actual.parameters] == [(8, 784), (8,), (10, 8), (10,)]
    for i, (a, e) in enumerate(zip(actual.parameters, expected)):
        torch.testing.assert_close(a, e, rtol=0, atol=0, msg=f"parameter {i} changed on the wire")
    assert not any(p.requires_grad for p in actual.parameters), (
        "the judge's copies are data, not autograd leaves"
    )


def test_a_function_crosses_without_parameters():
    actual, _ = _cross(lambda x: x)
    assert isinstance(actual, _Handle)
    assert (actual.is_module, actual.parameters) == (False, None)


def test_a_network_nested_in_a_container_keeps_its_parameters():
    actual, _ = _cross({"nets": [_mlp(4)]})
    assert [tuple(p.shape) for p in actual["nets"][0].parameters] == [
        (4, 784),
        (4,),
        (10, 4),
        (10,),
    ]


def test_a_network_too_large_crosses_without_parameters(monkeypatch):
    monkeypatch.setattr(channel, "MAX_PARAMETERS", 1000)  # the 8-unit MLP has 6,370
    actual, _ = _cross(_mlp())
    assert (actual.is_module, actual.parameters) == (True, None)
    with pytest.raises(
        CheckFailure, match=r"^`net_memo` is a network whose parameters the grader cannot read"
    ):
        expect_module_parameters("net_memo", actual)


def test_an_overridden_parameters_method_does_not_choose_what_crosses():
    class Liar(nn.Sequential):
        def parameters(self, recurse=True):  # what a student could write to show other weights
            return iter([torch.zeros(8, 784)])

    net = Liar(nn.Linear(784, 8), nn.ReLU(), nn.Linear(8, 10))
    actual, _ = _cross(net)
    assert [tuple(p.shape) for p in actual.parameters] == [(8, 784), (8,), (10, 8), (10,)]
    torch.testing.assert_close(actual.parameters[0], net[0].weight.detach(), rtol=0, atol=0)


@pytest.mark.parametrize(
    "forged", ["not a list", [1.0, 2.0], [torch.zeros(2)] * (channel.MAX_PARAMETER_TENSORS + 1)]
)
def test_forged_parameters_are_not_taken(forged):
    entry = {
        channel.KIND: "callable",
        "handle": 1,
        "type": "Sequential",
        "name": "net",
        "module": True,
        "parameters": forged,
    }
    actual = encoding.decode(tensor_payload.load(tensor_payload.dump(entry)), _Handle)
    assert (actual.is_module, actual.parameters) == (True, None)


@pytest.mark.parametrize(
    "value, message",
    [
        (
            lambda x: x,
            r"^`net` should be a PyTorch network \(an nn.Module such as nn.Sequential\) whose "
            r"parameters the "
            r"grader can read, but it is a function\.$",
        ),
        (torch.zeros(3), r"^`net` should be a PyTorch network .* but it is a Tensor\.$"),
        (None, r"^`net` is not defined"),
    ],
)
def test_expect_module_parameters_names_the_variable_and_what_it_is(value, message):
    crossed = _cross(value)[0] if callable(value) else value
    with pytest.raises(CheckFailure, match=message):
        expect_module_parameters("net", crossed)


def test_expect_module_parameters_reads_a_network_in_process_and_through_the_wire_alike():
    net = _mlp()
    in_process = expect_module_parameters("net", net)
    crossed = expect_module_parameters("net", _cross(net)[0])
    assert len(in_process) == len(crossed) == 4
    for i, (a, e) in enumerate(zip(crossed, in_process)):
        torch.testing.assert_close(
            a, e, rtol=0, atol=0, msg=f"parameter {i} differs between the two ways"
        )


def test_a_figure_crosses_with_its_grid_of_axes_and_colour_maps():
    """q6 reads where each template sits (a 4 by 4 grid, reading order) and its colour map from the
    judge's copy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3)
    try:
        for i, ax in enumerate(axes.flat):
            shown = ax.imshow(
                torch.full((2, 2), float(i)).numpy(), cmap="RdBu_r" if i % 2 else "gray"
            )
            fig.colorbar(shown, ax=ax)  # moves the Axes into a grid of its own inside its cell
        by_hand = fig.add_axes((0.1, 0.1, 0.2, 0.2))
        by_hand.imshow(torch.zeros(2, 2).numpy())
        actual, _ = _cross(fig)
    finally:
        plt.close(fig)
    drawn = [ax for ax in actual.axes if ax.images]
    assert len(drawn) == 7, f"six templates and the hand-placed image should cross: {len(drawn)}"
    for i, ax in enumerate(drawn[:6]):
        actual_grid = tuple(ax.get_subplotspec().get_geometry())
        assert actual_grid == (2, 3, i, i), (
            f"Axes {i} should cross in cell {i} of a 2 by 3 grid: {actual_grid}"
        )
        expected_cmap = "RdBu_r" if i % 2 else "gray"
        assert ax.images[0].get_cmap().name == expected_cmap, (
            f"Axes {i}'s colour map: {ax.images[0].get_cmap().name}"
        )
    assert tuple(drawn[6].get_subplotspec().get_geometry())[:2] == (1, 13), (
        "an Axes placed by hand has no grid position and crosses side by side with the others (1 "
        "by 13)"
    )


@pytest.mark.parametrize(
    "grid", [[4, 4, 16, 16], [4, 4, 3, 2], [100, 100, 0, 0], [4, 4, 0, "1"], [4, 4, 0], None]
)
def test_a_figure_with_a_forged_grid_position_is_placed_side_by_side(grid):
    """The student process sends the grid; the judge places an Axes there only when it is a real
    cell."""
    encoded = {channel.KIND: "figure", "axes": [{"images": [], "title": "", "grid": grid}]}
    actual = encoding.decode(encoded, _Handle)
    assert tuple(actual.axes[0].get_subplotspec().get_geometry()) == (1, 1, 0, 0), (
        f"grid {grid!r} should be refused"
    )


def test_a_figure_referenced_many_times_is_rebuilt_once_and_only_two_figures_per_payload():
    """One figure's description referenced many times, under many names, is rebuilt once, and a
    payload holds at most two figures: rebuilt for each reference, with 4,160 Axes each, it would
    take 7 GB and the judge past its deadline."""
    described = {channel.KIND: "figure", "axes": [{"images": [], "title": "t"}]}
    budget = encoding.Budget()
    many = {channel.KIND: "list", "items": [described] * 100}
    actual = [encoding.decode(many, None, budget), encoding.decode(described, None, budget)]
    assert len({id(fig) for fig in actual[0]} | {id(actual[1])}) == 1, (
        "one description is one rebuilt figure"
    )
    other = {channel.KIND: "figure", "axes": []}
    assert encoding.decode(other, None, budget) is not actual[1], (
        "a second description is a figure of its own"
    )
    with pytest.raises(channel.TooComplex, match="more than 2 figures"):
        encoding.decode(dict(other), None, budget)


@pytest.mark.parametrize(
    "axes, message",
    [
        (
            [{"images": [], "title": "", "insets": [{"position": [0.1, 0.1, 0.2, 0.2]}] * 64}] * 2,
            "more than 64 inset Axes",
        ),
        (
            [{"images": [{"array": torch.zeros(1, 1), "clim": (0.0, 1.0)}] * 64, "title": ""}] * 5,
            "more than 256 images",
        ),
        ([{"images": [], "title": ""}] * 65, "more than 64 Axes"),
    ],
    ids=["insets", "images", "axes"],
)
def test_a_figure_is_refused_by_the_parts_it_holds_in_all(axes, message):
    """A figure is refused by the parts it holds in all, not by those of each Axes: 64 Axes each
    with 64 insets and 64 images are 4,160 Axes and 4,096 images for one figure."""
    with pytest.raises(channel.TooComplex, match=message):
        encoding.decode({channel.KIND: "figure", "axes": axes}, None)
    fewer = {channel.KIND: "figure", "axes": axes[:1]}
    assert len(encoding.decode(fewer, None).axes) >= 1, "one of those Axes is rebuilt"


@pytest.mark.parametrize(
    "arrays, refused",
    [
        # one byte of storage, 256 million cells
        ([torch.zeros(1, dtype=torch.uint8).expand(16_000, 16_000)], True),
        ([torch.zeros(300, 300, 3)], True),
        ([torch.zeros(256, 256)] * 4, False),
        ([torch.zeros(256, 256)] * 4 + [torch.zeros(1, 1)], True),
    ],
    ids=["a_stride_0_view", "colours_count", "at_the_bound", "one_past_it"],
)
def test_a_figure_is_refused_by_the_numbers_its_images_hold_in_all(arrays, refused):
    """A figure is refused by the numbers its images hold in all, whatever their storage: an image
    of 16,000 by 16,000 cells can be sent as a view of one byte, matplotlib copies an image's array
    when it is shown, and the checks hold its colours in float64, gigabytes."""
    described = {
        channel.KIND: "figure",
        "axes": [{"images": [{"array": a, "clim": (0.0, 1.0)} for a in arrays], "title": ""}],
    }
    if refused:
        with pytest.raises(channel.TooComplex, match="images hold more than 262,144 numbers"):
            encoding.decode(described, None)
    else:
        actual = encoding.decode(described, None)
        assert len(actual.axes[0].images) == len(arrays), (
            "every image of a figure at the bound is rebuilt"
        )


#: Ints of one hash: hash(k * (2**61 - 1)) is 0 for every k.
_ONE_HASH = [(k + 1) * (2**61 - 1) for k in range(17)]


@pytest.mark.parametrize("kind", ["set", "frozenset", "dict"])
def test_a_set_or_dict_of_keys_sharing_a_hash_is_refused_before_it_is_built(kind):
    """Keys sharing a hash are refused before the set or dict is built: sent as a set, 80,000 ints
    of one hash (0.9 MB) make each insert compare the key with every earlier one, 76 s for the
    judge."""

    def described(keys):
        items = [(k, 0.5) for k in keys] if kind == "dict" else list(keys)
        return {channel.KIND: kind, "items": items}

    assert len({hash(k) for k in _ONE_HASH}) == 1, "the keys share one hash"
    with pytest.raises(channel.TooComplex, match="more than 16 keys of one hash"):
        encoding.decode(described(_ONE_HASH), None)
    actual = encoding.decode(described(_ONE_HASH[:16]), None)
    assert len(actual) == 16, f"16 keys of one hash are rebuilt: {len(actual)}"
    honest = encoding.decode(described(range(100_000)), None)
    assert len(honest) == 100_000 and (kind == "dict" or 99_999 in honest), (
        "100,000 ints of their own hashes"
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.zeros(2**20, dtype=torch.uint8),  # 1 MB
        lambda: torch.zeros(2**20, dtype=torch.uint8).numpy(),
    ],
    ids=["tensor", "ndarray"],
)
def test_data_referenced_many_times_is_counted_each_time(make):
    """400 references to 1 MB of data, held once in the frame, are 400 MB to the checks that convert
    them (``np.asarray`` of 400 references to one string is 1.6 GB): decoding counts each reference
    against :data:`channel.MAX_FRAME`. (A string cannot be referenced: the payload's JSON holds each
    copy, :mod:`tests.test_tensor_payload`.)"""
    # the student process's encoding copies a tensor each time: a forged one
    one = encoding.encode(make(), {})

    def sent(n: int) -> bytes:  # references n times
        return tensor_payload.dump({"x": {channel.KIND: "list", "items": [one] * n}})

    assert len(sent(257)) < 3 * 2**20, f"the frame holds the data once: {len(sent(257))} bytes"
    with pytest.raises(ValueError, match="more than 256 MB of data in all"):
        encoding.decode(tensor_payload.load(sent(257))["x"], None)
    actual = encoding.decode(tensor_payload.load(sent(256))["x"], None)
    assert len(actual) == 256, "256 references of 1 MB are within the budget"


class _LyingDict(dict):
    def items(self):
        return [("forged", 1.0)]


class _LyingList(list):
    def __iter__(self):
        return iter([0.0])


def test_container_subclasses_cross_as_the_plain_containers_they_are():
    """Container subclasses cross as the plain containers they are: crossed as opaque, a
    ``defaultdict(float)`` would cost honest answers q1_3 and q2_1 ("should be a dict, but it is an
    Opaque") though ``grader.check`` passes them in the student's kernel."""
    from collections import Counter, OrderedDict, defaultdict, namedtuple

    accuracies = defaultdict(float)
    accuracies[(3, 1)] = 0.75
    Pair = namedtuple("Pair", "before after")
    values = torch.tensor([[1.0, 5.0], [7.0, 2.0]])
    cases = [
        (accuracies, {(3, 1): 0.75}),
        (Counter("aab"), {"a": 2, "b": 1}),
        (OrderedDict([("b", 1), ("a", 2)]), {"b": 1, "a": 2}),
        (Pair(0.9, 0.3), (0.9, 0.3)),
        (_LyingDict(real=2.0), {"real": 2.0}),
        (_LyingList([1.0, 2.0]), [1.0, 2.0]),
    ]
    for value, expected in cases:
        actual, _ = _cross(value)
        assert type(actual) is type(expected) and actual == expected, (
            f"{type(value).__name__} should cross as {expected!r}, got {actual!r}"
        )
        if isinstance(expected, dict):
            assert list(actual) == list(expected), (
                f"{type(value).__name__}: the keys' order changed: {list(actual)}"
            )
    actual, _ = _cross(values.max(dim=1))  # torch.return_types.max: a tuple of (values, indices)
    assert (
        type(actual) is tuple
        and torch.equal(actual[0], torch.tensor([5.0, 7.0]))
        and torch.equal(actual[1], torch.tensor([1, 0]))
    ), f"torch.return_types.max crossed as {actual!r}"


def _crossed_value(value):
    crossed = tensor_payload.load(tensor_payload.dump(encoding.encode(value, {})))
    return encoding.decode(crossed, lambda *a: None)


@pytest.mark.parametrize(
    "make",
    [
        lambda np: np.asarray(3.5),
        lambda np: torch.tensor(2.0).numpy(),
        lambda np: np.array(np.float32(1.5)),
    ],
    ids=["asarray_of_a_number", "numpy_of_a_0_d_tensor", "array_of_a_numpy_scalar"],
)
def test_a_0_d_numpy_array_crosses_as_0_d_and_reads_as_a_number(make):
    """A 0-d NumPy array crosses as 0-d: made 1-d (as ``np.ascontiguousarray`` makes it), an honest
    ``by_hand.numpy()`` would be refused as "a NumPy array of shape (1,)"."""
    import numpy as np

    from autograder.checks import plain

    value = make(np)
    actual = _crossed_value(value)
    assert isinstance(actual, np.ndarray) and actual.shape == () and actual.dtype == value.dtype, (
        f"crossed as {type(actual).__name__} {getattr(actual, 'shape', None)}, expected a 0-d "
        f"{value.dtype} array"
    )
    assert plain("x", actual) == value.item(), "a 0-d array reads as its number"


def test_non_contiguous_and_fortran_arrays_cross_with_their_values():
    import numpy as np

    for value in (
        np.arange(6).reshape(2, 3)[:, ::-1],
        np.asfortranarray(np.ones((2, 3))),
        np.arange(10)[::3],
    ):
        actual = _crossed_value(value)
        assert actual.shape == value.shape and np.array_equal(actual, value), (
            f"{value!r} crossed as {actual!r}"
        )


def _sent_as_is(value) -> bytes:
    """A payload as a student process that replaced ``encoding.encode`` sends it: the tensor as it
    is."""
    encoded = {channel.KIND: "tensor", "data": value, "requires_grad": False}
    return tensor_payload.dump({"x": encoded})


def test_numpy_scalars_cross_as_numbers_only():
    """NumPy scalars cross as numbers only: ``{"__kind__": "npscalar", "dtype": "V", "value":
    2_000_000_000}`` would have the judge build a 2 GB ``np.void``. Honest datetimes and strings,
    which torch cannot hold, cross as opaque values, and a ``datetime64`` leaves the rest of the
    reply readable."""
    import numpy as np

    forged = encoding.decode({channel.KIND: "npscalar", "dtype": "V", "value": 2**20}, None)
    assert isinstance(forged, encoding.Opaque), (
        f"a void scalar should not be built: {type(forged).__name__}"
    )
    assert encoding.decode(
        {channel.KIND: "npscalar", "dtype": "float32", "value": 1.5}, None
    ) == np.float32(1.5)
    for value in (np.datetime64("2020-01-01"), np.array(["a", "b"]), np.array(["2020"], "M8[D]")):
        actual = _crossed_value(value)
        assert isinstance(actual, encoding.Opaque), f"{value!r} should cross as opaque: {actual!r}"


def test_unhashable_dict_keys_are_named_without_their_repr():
    """Unhashable dict keys are named by their place and kind, not by their repr: naming each of
    2,000 keys of 50 MB ``np.void``s by ``repr(key)`` would hold the judge past its deadline. Honest
    keys are hashable in the student process and cross so."""
    key = {channel.KIND: "ndarray", "data": torch.zeros(2)}
    actual = encoding.decode({channel.KIND: "dict", "items": [(key, 1), (key, 2), ("b", 3)]}, None)
    assert actual == {"<key 0: ndarray>": 1, "<key 1: ndarray>": 2, "b": 3}, f"decoded {actual!r}"


def test_the_students_own_encoding_copies_a_view_dense():
    expanded = torch.ones(3).expand(4, 3)
    crossed = tensor_payload.load(tensor_payload.dump({"x": encoding.encode(expanded, {})}))
    actual = crossed["x"]["data"]
    assert torch.equal(actual, expanded) and actual.is_contiguous(), (
        "the student's encoding copies a view dense"
    )


def test_an_honest_payload_of_shared_tensors_sizes_and_complex_numbers_is_read():
    """Shared tensors, an empty size, a complex number and an empty transposed tensor, as the
    student process's encoding writes them."""
    shared = torch.ones(3)
    value = {
        "a": encoding.encode([shared, shared, shared[1:]], {}),
        "b": encoding.encode(torch.Size([]), {}),
        "c": encoding.encode(complex(1, -2), {}),
        "d": encoding.encode(torch.zeros(0, 4).t(), {}),
    }
    actual = {
        name: encoding.decode(v, None)
        for name, v in tensor_payload.load(tensor_payload.dump(value)).items()
    }
    assert [t.tolist() for t in actual["a"]] == [[1.0] * 3, [1.0] * 3, [1.0] * 2], (
        f"decoded {actual['a']!r}"
    )
    assert (actual["b"], actual["c"], tuple(actual["d"].shape)) == (
        torch.Size([]),
        1 - 2j,
        (4, 0),
    ), f"decoded {actual!r}"


def test_a_container_the_encoding_never_sends_as_it_is_decodes_as_opaque():
    """Only what a kind describes is rebuilt: a bare tuple as a dict key, 200,000 deep, would crash
    the judge when decoding hashed it."""
    actual = encoding.decode(
        {channel.KIND: "dict", "items": [(((1,),), 1), ("b", [2])]}, None
    )
    assert [repr(k) for k in actual] == ["<tuple>", "'b'"], f"decoded {actual!r}"
    assert repr(actual["b"]) == "<list>", f"a bare list decodes as opaque: {actual['b']!r}"


def test_a_type_name_that_is_not_a_string_is_not_read():
    """A type name that is not a string is not read: 1,500 references to 1 MB of text are 1.5 GB to
    str()."""
    named = encoding.decode({channel.KIND: "unknown", "type": ["x" * 1000] * 1000}, None)
    assert repr(named) == "<object>", (
        f"a type name that is not a string should not be read: {named!r}"
    )


def test_tensors_the_judge_does_not_read_cross_as_named_opaque_values_and_subclasses_as_tensors():
    """Encoded by the student process, a sparse tensor crosses as an opaque value named by its
    layout, and a torchvision ``tv_tensors.Image`` as a tensor: neither makes the judge refuse the
    whole payload, naming a global."""
    from torchvision import tv_tensors

    actual = _crossed_value(torch.eye(2).to_sparse())
    assert repr(actual) == "<torch.Tensor (sparse_coo layout on cpu)>", f"crossed as {actual!r}"
    actual = _crossed_value(tv_tensors.Image(torch.ones(1, 2, 2)))
    assert type(actual) is torch.Tensor and torch.equal(actual, torch.ones(1, 2, 2)), (
        f"crossed as {actual!r}"
    )


def test_a_figure_too_large_to_draw_is_refused_before_it_is_measured():
    """Matplotlib's renderer allocates every pixel of a figure when it measures one: 600 by 600
    inches, 13.8 GB."""
    described = {channel.KIND: "figure", "axes": [], "size": [600.0, 600.0]}
    with pytest.raises(channel.TooComplex, match="a figure of 600 by 600 inches"):
        encoding.decode(described, None)
    honest = encoding.decode({channel.KIND: "figure", "axes": [], "size": [40.0, 30.0]}, None)
    assert tuple(honest.get_size_inches()) == (40.0, 30.0), (
        "a figure of 1,200 square inches is rebuilt as it is"
    )


def test_big_endian_arrays_cross_with_their_values():
    import numpy as np

    value = np.arange(6, dtype=">f4").reshape(2, 3)
    actual = _crossed_value(value)
    assert actual.dtype == np.float32 and np.array_equal(actual, value), f"crossed as {actual!r}"


def test_the_cropped_draw_of_a_figure_whose_contents_reach_far_stays_within_the_pixel_budget():
    """A figure whose contents reach far is drawn cropped at a dpi that keeps the canvas within the
    pixel budget: an inset 40 figure widths away makes ``bbox_inches="tight"`` draw a canvas
    reaching it, 9.4 GB, before the contents are found to reach too far."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from autograder import figure_parts

    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.imshow(np.zeros((4, 4)))
    actual = figure_parts.cropped_dpi(fig, 100.0)
    assert actual == 100.0, "an honest figure is drawn at the dpi asked"
    far = Axes(fig, (1.5, 1.5, 40.0, 40.0))
    ax.add_child_axes(far)
    actual = figure_parts.cropped_dpi(fig, 100.0)
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    pad = 2 * figure_parts.MAX_PAD_INCHES
    assert actual is not None and actual < 100.0, f"the far inset should lower the dpi: {actual}"
    # 1.0001: the dpi is a square root of the budget over the area, so squaring it back rounds
    # either way
    assert (box.width + pad) * (
        box.height + pad
    ) * actual**2 <= figure_parts.MAX_RENDER_PIXELS * 1.0001, (
        f"the cropped canvas at {actual:.3g} dpi is over the pixel budget"
    )
    ax.add_child_axes(Axes(fig, (1e6, 1e6, 1.0, 1.0)))
    assert figure_parts.cropped_dpi(fig, 100.0) is None, (
        "contents a million figure widths away are not drawn cropped"
    )


@pytest.fixture
def sockets():
    """Two connected sockets, closed after the test."""
    import socket

    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


def test_a_frame_begun_and_not_finished_times_out_calling_tick_meanwhile(sockets):
    import struct
    import time

    left, right = sockets
    left.sendall(struct.pack("!II", 20, 0) + b'{"op": ')  # 7 of the header's 20 bytes
    ticks = []
    started = time.monotonic()
    with pytest.raises(channel.ChannelTimeout):
        channel.recv(right, deadline=time.monotonic() + 0.5, tick=lambda: ticks.append(1))
    seconds = time.monotonic() - started
    assert 0.4 < seconds < 5, f"recv gave up after {seconds:.2f} s, for a deadline 0.5 s away"
    assert len(ticks) >= 2, f"tick is called while waiting: {len(ticks)} calls"
    assert right.gettimeout() is None, "the socket is blocking again afterwards"


def test_a_frame_sent_to_a_side_that_never_reads_times_out(sockets):
    import time

    left, _ = sockets
    with pytest.raises(channel.ChannelTimeout):
        channel.send(left, {"op": "x"}, b"\0" * (64 << 20), deadline=time.monotonic() + 0.5)


def test_a_whole_frame_arrives_before_its_deadline(sockets):
    import time

    left, right = sockets
    channel.send(left, {"op": "values"}, b"payload", deadline=time.monotonic() + 5)
    actual = channel.recv(right, deadline=time.monotonic() + 5)
    assert actual == ({"op": "values"}, b"payload"), f"the frame as sent: {actual}"


def test_a_value_that_crossed_as_opaque_is_named_by_what_crossed_in_messages():
    """A value that crossed as opaque is named in messages by what crossed: "`order` should be a
    torch tensor, but it is an Opaque" says nothing of why."""
    from autograder.checks import expect_tensor

    actual = _crossed_value(torch.eye(2).to_sparse())
    with pytest.raises(
        CheckFailure,
        match=r"`order` should be a torch tensor, but it is something the grader could "
        r"not read as data \(torch.Tensor \(sparse_coo layout on cpu\)\)",
    ):
        expect_tensor("order", actual, (2, 2), torch.float32)


def test_long_double_scalars_cross_as_numbers():
    """Long double scalars cross as numbers: ``np.longdouble(1.5).item()`` is an ``np.longdouble``,
    and refused, it would take the whole payload with it ("a value built by 'numpy._core.multiarray
    scalar'")."""
    import numpy as np

    for value in (np.longdouble(1.5), np.clongdouble(1.5 - 2j)):
        actual = _crossed_value(value)
        assert actual == value and not isinstance(actual, encoding.Opaque), (
            f"{value!r} crossed as {actual!r}"
        )


def _reply(value) -> bytes:
    """``value`` as the student process sends it."""
    return tensor_payload.dump(encoding.encode(value, {}))


def test_what_a_function_returns_is_read_with_a_smaller_allowance_than_a_notebook_value():
    """What a function returns is read with a smaller allowance than a notebook value: a right
    return padded with 55,000 one-element tensors would cost 9 seconds of the judge's time to read
    each reply, 40 replies to a check. A notebook's values are read once and keep the larger
    allowance."""
    padded = _reply([torch.zeros(1) for _ in range(channel.MAX_REPLY_TENSORS + 1)])
    assert len(encoding.decode(tensor_payload.load(padded), None)) == 4097, (
        "a notebook value of 4,097 tensors is read"
    )
    with pytest.raises(ValueError, match="a payload of more than 4096 tensors"):
        tensor_payload.load(padded, channel.MAX_REPLY_HEADER, channel.MAX_REPLY_TENSORS)
    numbers = _reply(list(range(600_000)))  # 4.2 MB of JSON
    assert encoding.decode(tensor_payload.load(numbers), None)[-1] == 599_999, (
        "a notebook value of 4.2 MB of JSON is read"
    )
    with pytest.raises(ValueError, match=rf"\(at most {channel.MAX_REPLY_HEADER} are read\)"):
        tensor_payload.load(numbers, channel.MAX_REPLY_HEADER, channel.MAX_REPLY_TENSORS)


def test_a_loop_written_return_of_one_array_per_crop_is_still_read():
    """``target(X_test)`` written as a loop returns 2,000 one-number arrays, which the checks accept
    (``np.asarray``): the allowance for replies must not refuse honest work."""
    expected = np.arange(2000, dtype=np.float64)
    reply = _reply([np.array([v]) for v in expected])
    actual = encoding.decode(
        tensor_payload.load(reply, channel.MAX_REPLY_HEADER, channel.MAX_REPLY_TENSORS), None
    )
    np.testing.assert_array_equal(np.asarray(actual).ravel(), expected)
