"""The payload a value crosses in (:mod:`autograder.tensor_payload`): honest values come back as
they were sent, and a payload no honest sender writes is refused before the judge builds what it
describes. Forged payloads are written here as a student process that replaced its own encoding
could write them: raw safetensors bytes."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import torch
from safetensors.torch import save as safetensors_save

from autograder import channel, encoding, tensor_payload
from autograder.tensor_payload import TAG, VALUE_KEY


def _raw(header: dict, data: bytes = b"") -> bytes:
    """A safetensors file as its format is written: the header's length, the header, the data."""
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _forged(value_json: str, tensors: dict[str, torch.Tensor] | None = None) -> bytes:
    """A well-formed safetensors file whose value is ``value_json`` as it stands."""
    return safetensors_save(tensors or {}, metadata={VALUE_KEY: value_json})


def _crossed(value):
    return tensor_payload.load(tensor_payload.dump(value))


# ------------------------------------------------------------------------------- honest values


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(2**63),
        2**100,
        2.5,
        -0.0,
        float("inf"),
        "",
        "é \ud800 \x00",
        3 - 4j,
        torch.float64,
        torch.Size([]),
        torch.Size([2, 3]),
        (1, (2.0, "three"), []),
        {"a": [1, {"b": (None,)}]},
    ],
    ids=repr,
)
def test_plain_values_come_back_as_they_were_sent(value):
    actual = _crossed({"x": value})["x"]
    assert type(actual) is type(value) and actual == value, f"sent {value!r}, read {actual!r}"


def test_nan_comes_back_as_nan():
    actual = _crossed([float("nan")])[0]
    assert isinstance(actual, float) and actual != actual


@pytest.mark.parametrize(
    "dtype",
    sorted(tensor_payload.CARRIED_DTYPES, key=str),
    ids=str,
)
def test_tensors_of_every_carried_dtype_come_back_with_their_values(dtype):
    expected = torch.arange(6).reshape(2, 3).to(dtype)
    actual = _crossed({"t": expected})["t"]
    assert actual.dtype == dtype and actual.shape == expected.shape, (
        f"{dtype}: read {actual.dtype} {tuple(actual.shape)}"
    )
    assert torch.equal(actual.view(torch.uint8), expected.contiguous().view(torch.uint8)), (
        f"{dtype}: the bytes changed"
    )


def test_views_cross_dense_and_shared_storage_is_written_once_per_tensor():
    base = torch.arange(12.0).reshape(3, 4)
    value = [base.t(), base[:, 1], base, base, torch.zeros(0, 5)]
    actual = _crossed(value)
    for sent, read in zip(value, actual, strict=True):
        assert torch.equal(read, sent) and read.is_contiguous(), f"{sent!r} read as {read!r}"
    assert actual[2] is actual[3], "one tensor referenced twice is one entry, read once"


def test_tensors_of_dtypes_the_payload_does_not_hold_are_named_by_the_encoding():
    value = torch.zeros(2, dtype=torch.complex32)
    actual = encoding.decode(_crossed(encoding.encode(value, {})), None)
    assert isinstance(actual, encoding.Opaque) and repr(actual) == "<torch.Tensor of complex32>", (
        f"crossed as {actual!r}"
    )


def test_a_tensor_that_requires_gradients_crosses_requiring_them():
    """The judge's arguments cross as they are: one it made to require gradients still does."""
    actual = _crossed([torch.ones(2, requires_grad=True), torch.ones(2)])
    assert [t.requires_grad for t in actual] == [True, False], f"read {actual!r}"


def test_an_empty_payload_is_none():
    assert tensor_payload.load(b"") is None


# -------------------------------------------------------------------- what the sender pays for


def test_a_value_the_encoding_never_produces_is_not_written():
    with pytest.raises(TypeError, match="object is not sent over the channel"):
        tensor_payload.dump({"x": object()})
    # the encoding keys its dicts by strings: a dict of int keys (which could share a hash, 100,000
    # of them minutes for the judge to build) is never written
    with pytest.raises(TypeError, match="dict is not sent"):
        tensor_payload.dump({"x": {(2**61 - 1) * k: None for k in range(1, 4)}})


def test_a_value_referencing_itself_many_times_costs_the_sender():
    """A few kilobytes describing 2**64 nodes by shared references: JSON holds no references, so
    writing it walks each node; :func:`dump` stops at :data:`channel.MAX_NODES`."""
    node: object = 0
    for _ in range(64):
        node = [node, node]
    with pytest.raises(channel.TooComplex, match="more than 1000000 items"):
        tensor_payload.dump(node)


def test_a_string_referenced_many_times_is_written_each_time():
    """JSON holds no references: 400 references to a string of a million characters (1.6 GB once
    ``np.asarray`` copies them in a check) take the sender a frame of 400 MB, over
    :data:`channel.MAX_FRAME`."""
    text = "x" * 2**18
    actual = len(tensor_payload.dump([text] * 16))
    assert actual >= 16 * 2**18, f"16 references of 256 KB wrote {actual} bytes"


# ----------------------------------------------------------------------------- forged payloads


def test_a_header_over_the_allowance_is_refused_before_it_is_parsed():
    forged = struct.pack("<Q", channel.MAX_HEADER + 1) + b"{" * 64
    with pytest.raises(ValueError, match=f"a payload header of {channel.MAX_HEADER + 1} bytes"):
        tensor_payload.load(forged)


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"\x01\x02", "shorter than its header's length"),
        (struct.pack("<Q", 100) + b"{}", "a payload header of 100 bytes"),
        (_raw([1, 2]), "its header is not an object"),
        (_raw({"__metadata__": {"other": "1"}}), "a payload without its value"),
        (b"\x05\x00\x00\x00\x00\x00\x00\x00{,,,}", "not a safetensors payload"),
    ],
    ids=["too_short", "header_past_the_end", "header_a_list", "no_value", "header_not_json"],
)
def test_a_payload_that_is_not_one_dump_writes_is_refused(payload, message):
    with pytest.raises(ValueError, match=message):
        tensor_payload.load(payload)


@pytest.mark.parametrize(
    "entries, data, name",
    [
        # 4 GB of float32 claimed, 16 bytes there
        ({"0": {"dtype": "F32", "shape": [2**30], "data_offsets": [0, 16]}}, b"\0" * 16, "short"),
        # two entries over the same 16 bytes: the judge would hold them twice
        (
            {
                "0": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                "1": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
            },
            b"\0" * 16,
            "overlapping",
        ),
        ({"0": {"dtype": "F32", "shape": [4], "data_offsets": [0, 64]}}, b"\0" * 16, "past_end"),
        ({"0": {"dtype": "PICKLE", "shape": [1], "data_offsets": [0, 1]}}, b"\0", "dtype"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_entries_safetensors_does_not_vouch_for_are_refused(entries, data, name):
    value = json.dumps({TAG: "tensor", "key": "0", "complex": False, "grad": False})
    header = {"__metadata__": {VALUE_KEY: value}}
    with pytest.raises(ValueError, match="not a safetensors payload"):
        tensor_payload.load(_raw({**header, **entries}, data))


@pytest.mark.parametrize(
    "value, message",
    [
        ({TAG: "bytearray", "size": 2**30}, "a tag the encoding never writes"),
        ({TAG: "tuple", "items": [], "extra": 1}, "a tag the encoding never writes"),
        ({TAG: ["tuple"], "items": []}, "a tag the encoding never writes"),
        ({TAG: "tuple", "items": {"a": 1}}, "a tuple whose items are not a list"),
        ({TAG: "complex", "re": [0.0] * 10, "im": 0.0}, "parts that are not numbers"),
        ({TAG: "complex", "re": 10**400, "im": 0.0}, "parts that are not numbers"),
        ({TAG: "dtype", "name": "torch.no_such"}, "a dtype torch does not have"),
        ({TAG: "size", "dims": [[1]]}, "a torch.Size of other than dimensions"),
        ({TAG: "size", "dims": [-1]}, "a torch.Size of other than dimensions"),
        ({TAG: "size", "dims": [1] * 100_000}, "a torch.Size of other than dimensions"),
        (
            {TAG: "tensor", "key": "7", "complex": False, "grad": False},
            "a tensor the payload does not hold",
        ),
        (
            {TAG: "tensor", "key": "0", "complex": True, "grad": False},
            "parts are not float64 pairs",
        ),
    ],
    ids=[
        "unknown_tag",
        "extra_key",
        "tag_not_a_string",
        "tuple_of_a_dict",
        "complex_of_a_list",
        "complex_of_a_huge_int",
        "unknown_dtype",
        "size_of_lists",
        "negative_size",
        "size_too_long",
        "missing_tensor",
        "complex_of_float32",
    ],
)
def test_a_tag_holding_what_dump_never_writes_is_refused(value, message):
    forged = _forged(json.dumps({"x": value}), {"0": torch.zeros(3)})
    with pytest.raises(ValueError, match=message):
        tensor_payload.load(forged)


def test_a_tensor_of_more_dimensions_than_the_judge_reads_is_refused():
    """60,000 dimensions of one element each: ``tolist`` overflows the C stack, and torch's own
    operations take time growing with the square of the dimensions."""
    value = json.dumps({TAG: "tensor", "key": "0", "complex": False, "grad": False})
    entry = {"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}
    forged = _raw({"__metadata__": {VALUE_KEY: value}, "0": entry}, b"\0" * 4)
    with pytest.raises(ValueError, match="a tensor of more than 64 dimensions"):
        tensor_payload.load(forged)
    entry["shape"] = [1] * 64
    honest = _raw({"__metadata__": {VALUE_KEY: value}, "0": entry}, b"\0" * 4)
    assert tensor_payload.load(honest).dim() == 64, "64 dimensions are read"


def test_one_tensor_referenced_as_two_different_tensors_is_refused():
    value = json.dumps(
        [
            {TAG: "tensor", "key": "0", "complex": False, "grad": False},
            {TAG: "tensor", "key": "0", "complex": False, "grad": True},
        ]
    )
    with pytest.raises(ValueError, match="a tensor referenced as two different tensors"):
        tensor_payload.load(_forged(value, {"0": torch.zeros(3)}))


def test_a_value_nested_deeper_than_the_judge_reads_is_refused_not_crashed():
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(ValueError, match="nested deeper than the judge reads"):
        tensor_payload.load(_forged(deep))


def test_a_value_of_more_items_than_the_judge_reads_is_refused():
    many = json.dumps([0] * (channel.MAX_NODES + 1))
    with pytest.raises(channel.TooComplex, match="more than 1000000 items"):
        tensor_payload.load(_forged(many))


def test_an_integer_of_more_digits_than_python_reads_is_refused():
    with pytest.raises(ValueError, match="a value that is not JSON"):
        tensor_payload.load(_forged("1" * 100_000))


def test_more_tensors_than_allowed_are_refused_before_they_are_built():
    tensors = {str(k): torch.zeros(1) for k in range(10)}
    forged = _forged("null", tensors)
    assert tensor_payload.load(forged, max_tensors=10) is None, "ten tensors within ten are read"
    with pytest.raises(ValueError, match="a payload of more than 9 tensors"):
        tensor_payload.load(forged, max_tensors=9)


def test_a_tensor_referenced_many_times_is_one_entry_and_counted_each_time_by_decode():
    one = encoding.encode(np.zeros(2**20, dtype=np.uint8), {})  # 1 MB
    sent = tensor_payload.dump({channel.KIND: "list", "items": [one] * 257})
    assert len(sent) < 2 * 2**20, f"the payload holds the data once: {len(sent)} bytes"
    with pytest.raises(ValueError, match="more than 256 MB of data in all"):
        encoding.decode(tensor_payload.load(sent), None)


def test_a_notebook_value_that_cannot_be_written_crosses_as_unreadable_and_the_rest_as_it_is():
    """The student process writes a request's names in one payload: one value it cannot write (its
    encoding replaced by the notebook, a self-referencing bomb) does not lose the others."""
    from autograder.worker import _written

    bomb: object = 0
    for _ in range(64):
        bomb = [bomb, bomb]
    encoded = {"good": encoding.encode(torch.arange(3), {}), "bomb": bomb, "odd": object()}
    crossed = tensor_payload.load(_written(encoded, tensor_payload.dump))
    actual = {name: encoding.decode(value, None) for name, value in crossed.items()}
    assert torch.equal(actual["good"], torch.arange(3)), f"read {actual['good']!r}"
    assert repr(actual["bomb"]) == "<unreadable (TooComplex)>", f"read {actual['bomb']!r}"
    assert repr(actual["odd"]) == "<unreadable (TypeError)>", f"read {actual['odd']!r}"
