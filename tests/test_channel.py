"""What crosses the wire for a student's network: its parameters, as data, and nothing it can fake
later.

The judge grades a network by the weights it holds, in its own copy of the
architecture (``autograder.checks.when_it_fails.MLP``), so the copies that
cross with a module must be the module's parameters, in ``parameters()``
order, taken when the value crossed.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import torch
from torch import nn

from autograder import channel, encoding, torch_payload
from autograder.checks import CheckFailure, expect_module_parameters


class _Handle(encoding.Handle):
    def __init__(self, handle: int, name: str, kind: str):
        self.handle, self.name, self.type_name = handle, name, kind


def _cross(value):
    """``value`` encoded by the student process, through the wire format, decoded by the judge."""
    handles: dict[int, object] = {}
    payload = torch_payload.dump(encoding.encode(value, handles))
    return encoding.decode(torch_payload.load(payload), _Handle), handles


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
    actual = encoding.decode(torch_payload.load(torch_payload.dump(entry)), _Handle)
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
    """A thirtieth hostile review referenced one figure's description many times, under many names,
    each rebuilt with 4,160 Axes (7 GB, and past the judge's deadline)."""
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
    """At most 64 Axes each with 64 insets and 64 images was 4,160 Axes and 4,096 images for one
    figure."""
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
    """A thirty-third hostile review sent an image of 16,000 by 16,000 cells as a view of one byte:
    matplotlib copies an image's array when it is shown, and the checks hold its colours in float64,
    gigabytes."""
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
    """A thirty-fourth hostile review sent 80,000 ints of one hash as a set (0.9 MB): each insert
    compared the key with every earlier one, 76 s for the judge."""

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
    "make, references",
    [
        (lambda: torch.zeros(2**20, dtype=torch.uint8), 257),  # 1 MB
        (lambda: torch.zeros(2**20, dtype=torch.uint8).numpy(), 257),
        (lambda: "x" * 2**18, 257),  # 2**18 characters, 1 MB as NumPy holds them
    ],
    ids=["tensor", "ndarray", "string"],
)
def test_data_referenced_many_times_is_counted_each_time(make, references):
    """A thirty-fourth hostile review sent a list of 400 references to one string of a million
    characters (1 MB in the frame): ``np.asarray`` of it in a check was 1.6 GB, and a key of 600
    references, a 629 MB message."""
    # the student process's encoding copies a tensor each time: a forged one
    one = encoding.encode(make(), {})

    def sent(n: int) -> bytes:  # references n times
        return torch_payload.dump({"x": {channel.KIND: "list", "items": [one] * n}})

    assert len(sent(references)) < 3 * 2**20, (
        f"the frame holds the data once: {len(sent(references))} bytes"
    )
    # a tensor's references are counted already by load's walk of the payload (ValueError), a
    # string's by decode's
    with pytest.raises(ValueError, match="more than 256 MB of (elements|data in all)"):
        encoding.decode(torch_payload.load(sent(references))["x"], None)
    actual = encoding.decode(torch_payload.load(sent(256))["x"], None)
    assert len(actual) == 256, "256 references of 1 MB are within the budget"


class _LyingDict(dict):
    def items(self):
        return [("forged", 1.0)]


class _LyingList(list):
    def __iter__(self):
        return iter([0.0])


def test_container_subclasses_cross_as_the_plain_containers_they_are():
    """A sixteenth hostile review: ``defaultdict(float)`` crossed as opaque, and honest answers lost
    q1_3 and q2_1 ("should be a dict, but it is an Opaque") though ``grader.check`` had passed them
    in the student's kernel."""
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
    crossed = torch_payload.load(torch_payload.dump(encoding.encode(value, {})))
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
    """A nineteenth hostile review: ``np.ascontiguousarray`` made it 1-d, and an honest
    ``by_hand.numpy()`` was refused as "a NumPy array of shape (1,)"."""
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
    return torch_payload.dump({"x": encoded})


@pytest.mark.parametrize(
    "make, message",
    [
        # 128 KB of storage whose shape counts 4 GB of elements: the judge copied it whole (5.1 GB
        # at its peak)
        (
            lambda: torch.arange(2**14).as_strided((2**14, 2**15), (1, 0)),
            "more than 256 MB of elements",
        ),
        (
            lambda: [torch.arange(2**10).as_strided((2**10, 2**15), (1, 0))] * 2,
            "more than 256 MB of elements",
        ),
        # refused by its global, before torch.load
        (lambda: torch.eye(3).to_sparse(), "_rebuild_sparse_tensor"),
    ],
    ids=["a_view_of_4_GB", "two_views_of_128_MB", "sparse"],
)
def test_tensors_the_judge_does_not_read_are_refused_before_they_are_used(make, message):
    """A twenty-seventh hostile review: the channel kept whatever strides its sender chose."""
    with pytest.raises(ValueError, match=message):
        torch_payload.load(_sent_as_is(make()))


class _Allocates:
    """Pickles as ``bytearray(size)``: a global ``torch.load(weights_only=True)`` allows, which
    allocates."""

    def __init__(self, size: int):
        self.size = size

    def __reduce__(self):
        return (bytearray, (self.size,))


def test_a_global_the_encoding_never_writes_is_refused_before_it_allocates():
    """A twenty-ninth hostile review: ``bytearray(3_000_000_000)`` in a pickle of 1.3 KB made the
    judge (root, with no memory limit) allocate 3.8 GB; weights_only loading allows
    ``bytearray``."""
    payload = torch_payload.dump({"x": _Allocates(2**30)})
    with pytest.raises(ValueError, match="built by '__builtin__ bytearray'"):
        torch_payload.load(payload)


def test_a_compressed_payload_is_refused_before_it_is_inflated():
    """``torch.load`` inflates deflated records: 4 MB of payload could hold 4 GB of zeros for the
    judge."""
    import zipfile

    payload = torch_payload.dump(
        {"x": {channel.KIND: "tensor", "data": torch.zeros(2**20), "requires_grad": False}}
    )
    source, packed = zipfile.ZipFile(io.BytesIO(payload)), io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        for info in source.infolist():
            archive.writestr(info.filename, source.read(info), compress_type=zipfile.ZIP_DEFLATED)
    assert len(packed.getvalue()) < len(payload) // 100, "4 MB of zeros deflate to a few KB"
    with pytest.raises(ValueError, match="a compressed torch.save payload"):
        torch_payload.load(packed.getvalue())


def test_every_global_the_students_encoding_writes_is_read():
    """The globals :func:`channel._check_pickle_globals` allows are those honest values pickle with:
    tensors of every dtype (their typed storages), sizes, dtypes, ordered dicts, complex numbers."""
    import numpy as np

    dtypes = [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.complex64,
        torch.complex128,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
        # the last three pickle as _rebuild_tensor_v3
        torch.uint16,
        torch.uint32,
        torch.uint64,
    ]
    values = [torch.zeros(2, dtype=d) for d in dtypes] + [
        torch.ones(2, requires_grad=True),
        torch.Size([2, 3]),
        torch.float64,
        2 + 1j,
        np.complex64(1j),
        np.zeros((2, 2), dtype=np.float32),
        np.int64(3),
        {"a": [1, (2.5, "s")]},
        torch.nn.Linear(2, 3),
    ]
    for value in values:
        encoded = {"x": encoding.encode(value, {})}
        actual = torch_payload.load(torch_payload.dump(encoded))
        assert actual.keys() == {"x"}, f"{value!r} should load"


def test_numpy_scalars_cross_as_numbers_only():
    """A twenty-ninth hostile review: ``{"__kind__": "npscalar", "dtype": "V", "value":
    2_000_000_000}`` made the judge build a 2 GB ``np.void``. Honest datetimes and strings, which
    torch cannot hold, cross as opaque values (a ``datetime64`` made the whole reply unreadable
    before)."""
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
    """A twenty-ninth hostile review sent 2,000 keys of 50 MB ``np.void``s each; naming each by
    ``repr(key)`` held the judge past its deadline. Honest keys are hashable in the student process
    and cross so."""
    key = {channel.KIND: "ndarray", "data": torch.zeros(2)}
    actual = encoding.decode({channel.KIND: "dict", "items": [(key, 1), (key, 2), ("b", 3)]}, None)
    assert actual == {"<key 0: ndarray>": 1, "<key 1: ndarray>": 2, "b": 3}, f"decoded {actual!r}"


def test_a_view_of_honest_size_and_the_students_own_encoding_load():
    # 8 MB of elements, 8 KB of storage
    view = torch.arange(2**10).as_strided((2**10, 2**10), (1, 0))
    actual = torch_payload.load(_sent_as_is(view))["x"]["data"]
    assert torch.equal(actual, view), "a view under the bound is read as it was sent"
    expanded = torch.ones(3).expand(4, 3)
    crossed = torch_payload.load(torch_payload.dump({"x": encoding.encode(expanded, {})}))
    actual = crossed["x"]["data"]
    assert torch.equal(actual, expanded) and actual.is_contiguous(), (
        "the student's encoding copies a view dense"
    )


class _Reduces:
    """Pickles as ``reduction`` (``__reduce__``'s tuple): a call ``torch.save`` never writes for an
    honest value."""

    def __init__(self, *reduction):
        self.reduction = reduction

    def __reduce__(self):
        return self.reduction


def _row_view() -> torch.Tensor:
    """2 million rows of 8 KB of storage: 16 MB of elements, under the bound on what the tensors
    hold."""
    return torch.arange(2**10).as_strided((2**21, 1), (0, 1))


@pytest.mark.parametrize(
    "reduction, message",
    [
        # a thirtieth hostile review: torch.load built 6.9 GB of row tensors iterating the view into
        # an OrderedDict
        ((OrderedDict, (_row_view(),)), "built by 'collections OrderedDict' from arguments"),
        ((torch.Size, (_row_view().flatten(),)), "built by 'torch Size' from arguments"),
        ((complex, (_row_view(),)), "built by '__builtin__ complex' from arguments"),
        (
            (
                torch._utils._rebuild_tensor_v2,
                (torch.UntypedStorage(8), 0, _row_view(), (1,), False, OrderedDict()),
            ),
            "built by 'torch._utils _rebuild_tensor_v2' from arguments",
        ),
        (
            (OrderedDict, (), None, None, iter([("a", _row_view())])),
            "fills a value built by 'collections OrderedDict'",
        ),
        ((OrderedDict, (), {"a": 1}), "the pickle opcode BUILD"),
    ],
    ids=[
        "ordered_dict_of_a_view",
        "size_of_a_tensor",
        "complex_of_a_tensor",
        "rebuild_with_a_tensor_for_size",
        "filled_ordered_dict",
        "build",
    ],
)
def test_a_global_called_as_the_encoding_never_calls_it_is_refused_before_it_runs(
    reduction, message
):
    """The globals honest values pickle with are safe only called as ``torch.save`` calls them."""
    payload = torch_payload.dump({"x": _Reduces(*reduction)})
    with pytest.raises(ValueError, match=message):
        torch_payload.load(payload)


def test_the_calls_an_honest_payload_makes_all_pass_the_check():
    """Shared references (the memo) and a reused ``OrderedDict`` global, as ``torch.save`` writes
    them."""
    shared = torch.ones(3)
    value = {
        "a": encoding.encode([shared, shared, shared[1:]], {}),
        "b": encoding.encode(torch.Size([]), {}),
        "c": encoding.encode(complex(1, -2), {}),
        "d": encoding.encode(torch.zeros(0, 4).t(), {}),
    }
    actual = {
        name: encoding.decode(v, None)
        for name, v in torch_payload.load(torch_payload.dump(value)).items()
    }
    assert [t.tolist() for t in actual["a"]] == [[1.0] * 3, [1.0] * 3, [1.0] * 2], (
        f"decoded {actual['a']!r}"
    )
    assert (actual["b"], actual["c"], tuple(actual["d"].shape)) == (
        torch.Size([]),
        1 - 2j,
        (4, 0),
    ), f"decoded {actual!r}"


# ------------------------------------------------------------- archives the two zip readers read
# differently


def _bin_unicode(text: str) -> bytes:
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def _archive(pickle_bytes: bytes, **records: bytes) -> bytes:
    """A stored zip of ``archive/data.pkl`` and ``records`` (``data_0`` names ``archive/data/0``),
    as Python writes it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pickle_bytes)
        for name, data in {"byteorder": b"little", "version": b"3\n", **records}.items():
            archive.writestr("archive/" + name.replace("_", "/"), data)
    return buffer.getvalue()


def _directory(raw: bytes) -> tuple[int, list[bytes]]:
    """The offset of a zip's central directory and its entries."""
    end = raw.rfind(b"PK\x05\x06")
    size, offset = struct.unpack("<II", raw[end + 12 : end + 20])
    entries, i = [], offset
    while i < offset + size:
        name, extra, comment = struct.unpack("<HHH", raw[i + 28 : i + 34])
        entries.append(raw[i : i + 46 + name + extra + comment])
        i += 46 + name + extra + comment
    return offset, entries


def _with_directory(raw: bytes, offset: int, entries: list[bytes], local: bytes = b"") -> bytes:
    """``raw``'s records up to ``offset``, then ``local``, then ``entries`` as its central
    directory."""
    directory = b"".join(entries)
    return (
        raw[:offset]
        + local
        + directory
        + b"PK\x05\x06"
        + struct.pack(
            "<HHHHIIH", 0, 0, len(entries), len(entries), len(directory), offset + len(local), 0
        )
    )


def _padded(entries: list[bytes], size: int) -> bytes:
    """A central directory of ``entries`` grown to ``size`` bytes by its last entry's comment."""
    last = bytearray(entries[-1])
    extra = size - len(b"".join(entries))
    last[32:34] = struct.pack("<H", struct.unpack("<H", last[32:34])[0] + extra)
    return b"".join(entries[:-1]) + bytes(last) + b"\0" * extra


_ALLOCATES = b"\x80\x02c__builtin__\nbytearray\nJ\x00\x00\x00\x40\x85R."  # bytearray(2**30)


def test_a_record_named_as_torch_save_does_not_is_refused():
    """A thirty-first hostile review named the pickle ``data.PKL``: torch.load's reader (miniz)
    finds it, a check of records ending in ``.pkl`` found no pickle to check, and ``bytearray(N)``
    was back (5.7 GB)."""
    payload = _archive(_ALLOCATES).replace(b"archive/data.pkl", b"archive/data.PKL")
    with pytest.raises(ValueError, match="a record named 'archive/data.PKL'"):
        torch_payload.load(payload)


def test_torch_load_reads_the_records_that_were_checked_not_a_second_directory():
    """A thirty-first hostile review gave a payload two central directories: Python's zipfile read
    the one before the end record (an honest value), torch.load the one at the offset the end record
    states (bytearray(N))."""
    honest = torch_payload.dump({"x": encoding.encode(torch.arange(3), {})})
    # records longer than honest's: offsets stay positive
    evil = _archive(_ALLOCATES, data_0=b"\0" * 4096)
    (evil_offset, evil_entries), (honest_offset, honest_entries) = (
        _directory(evil),
        _directory(honest),
    )
    size = max(len(b"".join(evil_entries)), len(b"".join(honest_entries)))
    evil_directory, honest_directory = _padded(evil_entries, size), _padded(honest_entries, size)
    # [evil's records][evil's directory][honest's records][honest's directory][end record: evil's
    # directory]. zipfile takes the directory just before the end record and shifts every offset by
    # where it finds it (minus the offset stated): honest's entries are written so that, shifted,
    # they find honest's records.
    honest_start = evil_offset + size
    found_shift = honest_start + honest_offset - evil_offset
    shifted = []
    for entry in _directory(
        honest[:honest_offset]
        + honest_directory
        + b"PK\x05\x06"
        + struct.pack(
            "<HHHHIIH", 0, 0, len(honest_entries), len(honest_entries), size, honest_offset, 0
        )
    )[1]:
        entry = bytearray(entry)
        entry[42:46] = struct.pack(
            "<I", struct.unpack("<I", entry[42:46])[0] + honest_start - found_shift
        )
        shifted.append(bytes(entry))
    two_faced = (
        evil[:evil_offset]
        + evil_directory
        + honest[:honest_offset]
        + b"".join(shifted)
        + b"PK\x05\x06"
        + struct.pack("<HHHHIIH", 0, 0, len(evil_entries), len(evil_entries), size, evil_offset, 0)
    )
    assert [i.filename for i in zipfile.ZipFile(io.BytesIO(two_faced)).infolist()][:1] == [
        "archive/data.pkl"
    ]
    actual = encoding.decode(torch_payload.load(two_faced)["x"], None)
    assert torch.equal(actual, torch.arange(3)), (
        f"the value checked should be the value read: {actual!r}"
    )


def test_records_that_share_bytes_are_refused():
    """A thirty-first hostile review pointed 120 directory entries at one stored record of 25 MB:
    torch.load copied each as a storage, tensors of 0 elements kept them, and the judge held 3.8
    GB."""
    storage = b"\x07" * 4096
    calls = b"".join(
        b"ctorch._utils\n_rebuild_tensor_v2\n(("
        + _bin_unicode("storage")
        + b"ctorch\nByteStorage\n"
        + _bin_unicode(str(k))
        + _bin_unicode("cpu")
        + b"M\x00\x10tQK\x00K\x00\x85K\x01\x85\x89"
        + b"ccollections\nOrderedDict\n)RtR"
        for k in range(8)
    )
    raw = _archive(b"\x80\x02](" + calls + b"e.", data_0=storage)
    offset, entries = _directory(raw)
    record = next(
        e for e in entries if e[46 : 46 + struct.unpack("<H", e[28:30])[0]] == b"archive/data/0"
    )
    for k in range(1, 8):  # the same local header as data/0, another name
        name = f"archive/data/{k}".encode()
        entries.append(record[:28] + struct.pack("<HHH", len(name), 0, 0) + record[34:46] + name)
    with pytest.raises(ValueError, match="records share bytes"):
        torch_payload.load(_with_directory(raw, offset, entries))


def test_a_dict_keyed_by_other_than_strings_is_refused_before_it_is_filled():
    """A thirty-first hostile review: 100,000 int keys of one hash (multiples of 2**61 - 1) cost the
    judge two minutes inside torch.load, which no deadline interrupts. The encoding keys its dicts
    by strings."""

    def long1(n: int) -> bytes:
        data = n.to_bytes(n.bit_length() // 8 + 1, "little", signed=True)
        return b"\x8a" + bytes([len(data)]) + data

    keys = b"".join(long1((k + 1) * (2**61 - 1)) + b"N" for k in range(100))
    with pytest.raises(ValueError, match="a dict keyed by something other than strings"):
        torch_payload.load(_archive(b"\x80\x02}(" + keys + b"u."))


def test_a_container_the_encoding_never_sends_as_it_is_decodes_as_opaque():
    """A thirty-first hostile review made a dict key a tuple 200,000 deep, sent as it is: decoding
    hashed it and the judge crashed (a C recursion). And a type name of 1,500 references to 1 MB of
    text was 1.5 GB to str()."""
    deep = b"K\x00" + b"\x85" * 300_000
    pickle_bytes = (
        b"\x80\x02}("
        + _bin_unicode("__kind__")
        + _bin_unicode("dict")
        + _bin_unicode("items")
        + b"]"
        + deep
        + b"K\x01\x86au."
    )
    actual = encoding.decode(torch_payload.load(_archive(pickle_bytes)), None)
    ((key, value),) = actual.items()
    assert isinstance(key, encoding.Opaque) and value == 1, (
        f"the deep tuple should be an opaque key: {actual!r}"
    )
    named = encoding.decode({channel.KIND: "unknown", "type": ["x" * 1000] * 1000}, None)
    assert repr(named) == "<object>", (
        f"a type name that is not a string should not be read: {named!r}"
    )


def test_tensors_the_judge_does_not_read_cross_as_named_opaque_values_and_subclasses_as_tensors():
    """Encoded by the student process: a sparse tensor made the judge refuse the whole payload,
    naming a global; a torchvision ``tv_tensors.Image`` was refused as a global too."""
    from torchvision import tv_tensors

    actual = _crossed_value(torch.eye(2).to_sparse())
    assert repr(actual) == "<torch.Tensor (sparse_coo layout on cpu)>", f"crossed as {actual!r}"
    actual = _crossed_value(tv_tensors.Image(torch.ones(1, 2, 2)))
    assert type(actual) is torch.Tensor and torch.equal(actual, torch.ones(1, 2, 2)), (
        f"crossed as {actual!r}"
    )


def test_a_size_of_a_long_tuple_in_the_memo_is_refused_at_once():
    """A thirty-second hostile review called ``torch.Size`` 1,500 times on one memoized tuple of a
    million ints: the check scanned the tuple at each call (70 s for 2 MB), and left on the stack
    each Size was 8 MB."""
    ints = b"".join(b"K\x01" for _ in range(100_000))
    pickle_bytes = (
        b"\x80\x02ctorch\nSize\nq\x00(" + ints + b"tq\x01" + b"h\x00h\x01\x85R0" * 2000 + b"N."
    )
    # at the first call
    with pytest.raises(ValueError, match="built by 'torch Size' from arguments"):
        torch_payload.load(_archive(pickle_bytes))


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
    """A thirty-second hostile review placed an inset 40 figure widths away: ``bbox_inches="tight"``
    drew a canvas reaching it, 9.4 GB, before the figure's contents were found to reach too far."""
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
    """A thirty-second hostile review's refused payload read "`order` should be a torch tensor, but
    it is an Opaque", which says nothing of why."""
    from autograder.checks import expect_tensor

    actual = _crossed_value(torch.eye(2).to_sparse())
    with pytest.raises(
        CheckFailure,
        match=r"`order` should be a torch tensor, but it is something the grader could "
        r"not read as data \(torch.Tensor \(sparse_coo layout on cpu\)\)",
    ):
        expect_tensor("order", actual, (2, 2), torch.float32)


def test_long_double_scalars_cross_as_numbers():
    """A thirty-third hostile review: ``np.longdouble(1.5).item()`` is an ``np.longdouble``, which
    the judge refused with the whole payload ("a value built by 'numpy._core.multiarray
    scalar'")."""
    import numpy as np

    for value in (np.longdouble(1.5), np.clongdouble(1.5 - 2j)):
        actual = _crossed_value(value)
        assert actual == value and not isinstance(actual, encoding.Opaque), (
            f"{value!r} crossed as {actual!r}"
        )


def _reply(value) -> bytes:
    """``value`` as the student process sends it."""
    return torch_payload.dump(encoding.encode(value, {}))


def test_what_a_function_returns_is_read_with_a_smaller_allowance_than_a_notebook_value():
    """A thirty-sixth hostile review padded a right return with 55,000 one-element tensors: 9
    seconds of the judge's time to read each reply, 40 replies to a check. A notebook's values are
    read once and keep the larger allowance."""
    padded = _reply([torch.zeros(1) for _ in range(channel.MAX_REPLY_RECORDS)])
    assert len(encoding.decode(torch_payload.load(padded), None)) == 4096, (
        "a notebook value of 4,096 tensors is read"
    )
    with pytest.raises(ValueError, match="more than 4,090 tensors and arrays"):
        torch_payload.load(padded, channel.MAX_REPLY_PICKLE, channel.MAX_REPLY_RECORDS)
    numbers = _reply(list(range(300_000)))  # 5 bytes of pickle a number past 65,535
    assert encoding.decode(torch_payload.load(numbers), None)[-1] == 299_999, (
        "a notebook value of 1.4 MB of pickle is read"
    )
    with pytest.raises(ValueError, match="more than 1 MB of non-tensor data"):
        torch_payload.load(numbers, channel.MAX_REPLY_PICKLE, channel.MAX_REPLY_RECORDS)


def test_a_loop_written_return_of_one_array_per_crop_is_still_read():
    """``target(X_test)`` written as a loop returns 2,000 one-number arrays, which the checks accept
    (``np.asarray``): the allowance for replies must not refuse honest work."""
    expected = np.arange(2000, dtype=np.float64)
    reply = _reply([np.array([v]) for v in expected])
    actual = encoding.decode(
        torch_payload.load(reply, channel.MAX_REPLY_PICKLE, channel.MAX_REPLY_RECORDS), None
    )
    np.testing.assert_array_equal(np.asarray(actual).ravel(), expected)
