"""A frame's payload: an encoded value (:mod:`autograder.encoding`) as a safetensors file.

The value's tensors are the file's entries (named ``"0"``, ``"1"``, ...); the rest of the value is
JSON in the file's metadata (key :data:`VALUE_KEY`), where a tensor stands as ``{"__wire__":
"tensor", "key": "0"}`` and what JSON has no form for is tagged likewise: tuples, complex numbers,
torch dtypes and sizes. Dicts are the encoding's own, keyed by strings (a student's dict crosses
as its list of items): a dict the judge builds never has keys that share a hash.

Reading runs no code of the sender's: safetensors checks each entry's dtype, shape and byte range
(inside the payload, in order, none overlapping) and builds dense CPU tensors; JSON builds only
dicts, lists, strings, numbers, booleans and ``None``; and :func:`load` turns the tags back into
those few types only. What is read is bounded before it is parsed: the header's size
(:data:`channel.MAX_HEADER`, :data:`channel.MAX_REPLY_HEADER` for a function's return), the number
of entries (:data:`channel.MAX_TENSORS`, :data:`channel.MAX_REPLY_TENSORS`) and of items
(:data:`channel.MAX_NODES`).
"""

from __future__ import annotations

import json
import struct
from typing import Any

import torch
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save

from autograder import channel
from autograder.channel import TooComplex

#: The metadata key that holds the value's JSON.
VALUE_KEY = "value"
#: The key of a tag: an object holding it stands for a tensor or a value JSON has no form for.
TAG = "__wire__"
#: The tags :func:`dump` writes, with the keys each holds besides :data:`TAG`.
TAGS = {
    "tensor": {"key", "complex", "grad"},
    "tuple": {"items"},
    "complex": {"re", "im"},
    "dtype": {"name"},
    "size": {"dims"},
}
#: The dtypes a value may name (``torch.dtype`` values cross by name, read back from this table
#: only).
DTYPES = {
    str(dtype): dtype
    for dtype in vars(torch).values()
    if isinstance(dtype, torch.dtype)
}
#: The dtypes of the tensors a payload holds: safetensors' own, and complex128 as its real and
#: imaginary parts (:func:`dump`). The encoding names a tensor of another dtype instead of sending
#: it.
CARRIED_DTYPES = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.uint16,
        torch.int16,
        torch.uint32,
        torch.int32,
        torch.uint64,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.float8_e4m3fn,
        torch.float8_e4m3fnuz,
        torch.float8_e5m2,
        torch.float8_e5m2fnuz,
        torch.complex64,
        torch.complex128,
    }
)
#: Most dimensions of a ``torch.Size`` or a tensor (NumPy's limit too): torch's own operations take
#: time that grows with the square of a tensor's dimensions, and ``tolist`` of 60,000 of them
#: overflows the C stack.
MAX_DIMS = 64


def dump(value: Any) -> bytes:
    """The safetensors payload of an encoded value: its tensors as entries (each tensor object
    once, however often it is referenced; complex128, which safetensors does not hold, as its real
    and imaginary parts), the rest as JSON.

    Raises:
        TypeError: a value the encoding never produces (a dict keyed by other than strings too).
        TooComplex: more than :data:`channel.MAX_NODES` items, counting each reference (so that
            the sender, not the judge, pays for a value that references itself many times).
    """
    tensors: dict[str, torch.Tensor] = {}
    keys: dict[int, str] = {}
    storages: set[int] = set()
    nodes = 0

    def tensor_key(tensor: torch.Tensor) -> dict:
        is_complex = tensor.dtype == torch.complex128
        key = keys.get(id(tensor))
        if key is None:
            data = tensor.detach()
            if is_complex:
                data = torch.view_as_real(data)
            data = data.contiguous()
            # safetensors refuses entries that share memory: the same storage twice is copied
            if data.numel() and data.untyped_storage().data_ptr() in storages:
                data = data.clone()
            if data.numel():
                storages.add(data.untyped_storage().data_ptr())
            key = keys[id(tensor)] = str(len(tensors))
            tensors[key] = data
        return {TAG: "tensor", "key": key, "complex": is_complex, "grad": tensor.requires_grad}

    def to_json(item: Any) -> Any:
        nonlocal nodes
        nodes += 1
        if nodes > channel.MAX_NODES:
            raise TooComplex(f"a value holding more than {channel.MAX_NODES} items")
        if item is None or isinstance(item, (bool, int, float, str)):
            return item
        if isinstance(item, complex):
            return {TAG: "complex", "re": item.real, "im": item.imag}
        if isinstance(item, torch.dtype):
            return {TAG: "dtype", "name": str(item)}
        if isinstance(item, torch.Size):
            return {TAG: "size", "dims": list(item)}
        if isinstance(item, torch.Tensor):
            return tensor_key(item)
        if isinstance(item, list):
            return [to_json(v) for v in item]
        if isinstance(item, tuple):
            return {TAG: "tuple", "items": [to_json(v) for v in item]}
        if isinstance(item, dict) and all(type(k) is str for k in item) and TAG not in item:
            return {k: to_json(v) for k, v in item.items()}
        raise TypeError(f"{type(item).__name__} is not sent over the channel")

    text = json.dumps(to_json(value), separators=(",", ":"))
    return safetensors_save(tensors, metadata={VALUE_KEY: text})


def load(
    payload: bytes,
    max_header: int = channel.MAX_HEADER,
    max_tensors: int = channel.MAX_TENSORS,
) -> Any:
    """The encoded value :func:`dump` wrote, or ``None`` for an empty payload.

    Raises:
        ValueError: not a safetensors payload, a header over ``max_header`` bytes, more than
            ``max_tensors`` entries, metadata that is not JSON or holds a tag :func:`dump` never
            writes, or a reference to an entry the payload does not hold.
        TooComplex: more than :data:`channel.MAX_NODES` items.
    """
    if not payload:
        return None
    header = _header(payload, max_header)
    entries = [key for key in header if key != "__metadata__"]
    if len(entries) > max_tensors:
        raise ValueError(f"a payload of more than {max_tensors} tensors")
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict) or not isinstance(metadata.get(VALUE_KEY), str):
        raise ValueError("a payload without its value")
    try:
        tensors = safetensors_load(bytes(payload))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # noqa: BLE001 - SafetensorError, or a panic of its reader
        raise ValueError(f"not a safetensors payload ({type(err).__name__})") from None
    if len(tensors) > max_tensors:
        raise ValueError(f"a payload of more than {max_tensors} tensors")
    try:
        tree = json.loads(metadata[VALUE_KEY])
    except RecursionError:
        raise TooComplex("a value nested deeper than the judge reads") from None
    except ValueError as err:
        raise ValueError(f"a value that is not JSON ({type(err).__name__})") from None
    return _from_json(tree, tensors)


def _header(payload: bytes, max_header: int) -> dict:
    """The safetensors header (its first 8 bytes give its length), read only when it is at most
    ``max_header`` bytes. Read here as well as by safetensors, whose reader builds the tensors but
    does not return the metadata, where the value's JSON is; the number of entries is checked
    again on what safetensors built."""
    if len(payload) < 8:
        raise ValueError("not a safetensors payload (shorter than its header's length)")
    (length,) = struct.unpack("<Q", payload[:8])
    if length > max_header or length > len(payload) - 8:
        raise ValueError(
            f"a payload header of {length} bytes (at most {max_header} are read)"
        )
    try:
        header = json.loads(bytes(payload[8 : 8 + length]))
    except (ValueError, RecursionError) as err:
        raise ValueError(f"not a safetensors payload ({type(err).__name__})") from None
    if not isinstance(header, dict):
        raise ValueError("not a safetensors payload (its header is not an object)")
    return header


def _from_json(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """``tree`` with its tags read back: tensors from ``tensors``, tuples, complex numbers, dtypes,
    sizes and dicts; at most :data:`channel.MAX_NODES` items.

    Raises:
        ValueError: a tag :func:`dump` never writes, or one that does not hold what it should.
        TooComplex: too many items, or nested deeper than the judge's recursion.
    """
    nodes = 0
    referenced: dict[Any, tuple[Any, Any]] = {}  # a tensor's key: how it was first referenced

    def read(item: Any) -> Any:
        nonlocal nodes
        nodes += 1
        if nodes > channel.MAX_NODES:
            raise TooComplex(f"a value holding more than {channel.MAX_NODES} items")
        if isinstance(item, list):
            return [read(v) for v in item]
        if not isinstance(item, dict):
            return item  # None, a bool, a number or a string
        if TAG not in item:
            return {k: read(v) for k, v in item.items()}
        kind = item[TAG]
        if not isinstance(kind, str) or kind not in TAGS or set(item) != TAGS[kind] | {TAG}:
            raise ValueError(f"a tag the encoding never writes ({str(kind)[:40]!r})")
        if kind == "tensor":
            flags = (item["complex"], item["grad"])
            if referenced.setdefault(str(item["key"]), flags) != flags:
                raise ValueError("a tensor referenced as two different tensors")
            return _tensor(item, tensors)
        if kind == "complex":
            if not all(type(item[k]) is float for k in ("re", "im")):
                raise ValueError("a complex number of parts that are not numbers")
            return complex(item["re"], item["im"])
        if kind == "dtype":
            if not isinstance(item["name"], str) or item["name"] not in DTYPES:
                raise ValueError("a dtype torch does not have")
            return DTYPES[item["name"]]
        if kind == "size":
            dims = item["dims"]
            if (
                not isinstance(dims, list)
                or len(dims) > MAX_DIMS
                or not all(type(d) is int and 0 <= d < 2**63 for d in dims)
            ):
                raise ValueError("a torch.Size of other than dimensions")
            return torch.Size(dims)
        if not isinstance(item["items"], list):
            raise ValueError("a tuple whose items are not a list")
        return tuple(read(v) for v in item["items"])

    try:
        return read(tree)
    except RecursionError:
        raise TooComplex("a value nested deeper than the judge reads") from None


def _tensor(item: dict, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """The tensor a ``tensor`` tag names: a complex128 one rebuilt from its parts, and one that
    required gradients (an argument the judge sends) requiring them again."""
    key = item["key"]
    if (
        not isinstance(key, str)
        or key not in tensors
        or not isinstance(item["complex"], bool)
        or not isinstance(item["grad"], bool)
    ):
        raise ValueError("a reference to a tensor the payload does not hold")
    tensor = tensors[key]
    if tensor.dim() > MAX_DIMS:
        raise ValueError(f"a tensor of more than {MAX_DIMS} dimensions")
    if item["complex"]:
        if tensor.dtype != torch.float64 or tensor.dim() == 0 or tensor.shape[-1] != 2:
            raise ValueError("a complex tensor whose parts are not float64 pairs")
        tensor = torch.view_as_complex(tensor)
    if item["grad"] and (tensor.is_floating_point() or tensor.is_complex()):
        tensor = tensor.requires_grad_(True)
    return tensor
