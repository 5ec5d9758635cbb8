"""A student's value as data that crosses the wire (:func:`encode`, in the student process) and
rebuilt by the judge (:func:`decode`): tensors, arrays, numbers, strings and containers as they
are; a callable as a :class:`Handle` the judge calls back through the student process (a module
with copies of its parameters); a figure through :mod:`autograder.figure_wire`; anything else as
an :class:`Opaque` naming its type. Decoding is bounded by a :class:`Budget` shared by every value
of one payload.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from autograder import channel, tensor_payload
from autograder.channel import (
    KIND,
    TooComplex,
    text_field,
)
from autograder.figure_wire import encode_figure, rebuild_figure


def encode(value: Any, handles: dict[int, Any], depth: int = 0) -> Any:
    """Turn a student's value into data :func:`autograder.tensor_payload.dump` writes.

    Callables are stored in ``handles`` and sent as ``{"__kind__": "callable",
    "handle": id}``. Runs in the student process.
    """
    import numpy as np

    if depth > channel.MAX_DEPTH:
        return {KIND: "opaque", "type": "too deeply nested"}
    if value is None or isinstance(value, (torch.dtype, torch.Size)):
        return value
    # plain types only: subclasses (numpy.float64 is a float, an IntEnum an int) cross as the
    # plain value they hold
    for plain_type in (bool, int, float, complex, str):
        if isinstance(value, plain_type):
            return plain_type(value)
    if value is Ellipsis:
        return {KIND: "ellipsis"}
    if isinstance(value, torch.Tensor):
        if (
            value.layout != torch.strided
            or value.device.type != "cpu"
            or value.is_quantized
            or value.is_nested
        ):
            # what the payload does not hold, named, instead of a payload that cannot be written
            return {
                KIND: "opaque",
                "type": f"torch.Tensor ({str(value.layout).replace('torch.', '')} layout on "
                f"{value.device.type}{', quantized' if value.is_quantized else ''}"
                f"{', nested' if value.is_nested else ''})",
            }
        if value.dtype not in tensor_payload.CARRIED_DTYPES:
            return {KIND: "opaque", "type": f"torch.Tensor of {str(value.dtype)[6:]}"}
        tensor = value.detach().clone()
        # a subclass (torchvision's tv_tensors.Image): its data, plainly
        if type(tensor) is not torch.Tensor:
            tensor = tensor.as_subclass(torch.Tensor)
        return {KIND: "tensor", "data": tensor, "requires_grad": bool(value.requires_grad)}
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return {KIND: "opaque", "type": "numpy.ndarray of objects"}
        if value.dtype.kind not in "biufc":  # strings, datetimes: torch holds no such tensor
            return {KIND: "opaque", "type": f"numpy.ndarray of {value.dtype.name}"}
        # np.array, not np.ascontiguousarray, which makes a 0-d array (x.numpy() of a 0-d tensor)
        # 1-d
        try:
            # torch holds native byte order only (">f4" raised before)
            native = value.dtype.newbyteorder("=")
            return {
                KIND: "ndarray",
                "data": torch.from_numpy(np.array(value, dtype=native, order="C", copy=True)),
            }
        except TypeError:  # a dtype torch holds no tensor of
            return {KIND: "opaque", "type": f"numpy.ndarray of {value.dtype.name}"}
    if isinstance(value, np.generic):
        # datetimes, strings, voids: not numbers the judge reads
        if value.dtype.kind not in "biufc":
            return {KIND: "opaque", "type": f"numpy.{type(value).__name__}"}
        number = value.item()
        # np.longdouble's item() is an np.longdouble
        if not isinstance(number, (bool, int, float, complex)):
            number = complex(number) if value.dtype.kind == "c" else float(number)
        return {KIND: "npscalar", "value": number, "dtype": str(value.dtype)}
    # containers, subclasses too (defaultdict, Counter, a namedtuple, torch.return_types.max are
    # honest answers, which must not cross as opaque and fail "should be a dict"), sent as the
    # plain container they are, their contents read through the base type (not a
    # subclass's own items() or __iter__)
    for base in (list, tuple, set, frozenset):
        if isinstance(value, base):
            return {
                KIND: base.__name__,
                "items": [encode(v, handles, depth + 1) for v in base.__iter__(value)],
            }
    if isinstance(value, dict):
        items = OrderedDict.items(value) if isinstance(value, OrderedDict) else dict.items(value)
        return {
            KIND: "dict",
            "items": [
                (encode(k, handles, depth + 1), encode(v, handles, depth + 1)) for k, v in items
            ],
        }
    figure = encode_figure(value)
    if figure is not None:
        return figure
    if callable(value) and not isinstance(value, type):
        handles[id(value)] = value
        entry = {
            KIND: "callable",
            "handle": id(value),
            "type": type(value).__name__,
            "name": getattr(value, "__name__", type(value).__name__),
        }
        if isinstance(value, torch.nn.Module):
            entry["module"] = True
            entry["parameters"] = _module_parameters(value)
        return entry
    return {KIND: "opaque", "type": type(value).__name__}


def _module_parameters(module: torch.nn.Module) -> list[torch.Tensor] | None:
    """Detached copies of ``module``'s parameters in ``parameters()`` order, or ``None`` when too
    many or unreadable."""
    try:
        params = list(torch.nn.Module.parameters(module))
        if (
            len(params) > channel.MAX_PARAMETER_TENSORS
            or sum(p.numel() for p in params) > channel.MAX_PARAMETERS
        ):
            return None
        return [p.detach().clone() for p in params]
    except Exception:  # noqa: BLE001 - a student's module may fail anywhere
        return None


class Opaque:
    """A student value that is not data; only its type name crossed."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


class Handle:
    """The judge's view of a student's callable, which lives in the student process.

    Attributes:
        type_name: the callable's type name, as the student process reported it.
        key: which student object it is (the same object read twice has the same key).
        variable: the student's name it was read under, when the judge read it by name (the same
            name after the student process was restarted and the notebook replayed).
        is_module: whether the student process reported a ``torch.nn.Module``.
        parameters: for a ``torch.nn.Module``, copies of its parameter tensors
            in ``parameters()`` order, taken when the value crossed; ``None``
            for anything else (or a module with more than
            :data:`channel.MAX_PARAMETERS` numbers). They are the student's claim of
            what the network holds: a check that rebuilds the network from them
            grades the weights, whatever the student's ``forward`` does.
    """

    type_name: str = ""
    key: tuple = ()
    variable: str | None = None
    is_module: bool = False
    parameters: tuple[torch.Tensor, ...] | None = None


def _parameters_sent(value: Any) -> tuple[torch.Tensor, ...] | None:
    if (
        isinstance(value, list)
        and len(value) <= channel.MAX_PARAMETER_TENSORS
        and all(isinstance(p, torch.Tensor) for p in value)
        and sum(p.numel() for p in value) <= channel.MAX_PARAMETERS
    ):
        return tuple(value)
    return None


class Budget:
    """What is left to rebuild of one payload, shared by every value decoded from it (all the names
    one request reads, or every name of a snapshot read one by one): items
    (:data:`channel.MAX_NODES`), bytes of data (:data:`channel.MAX_FRAME`: a tensor's or array's
    elements and :data:`STR_BYTES` a character of a string, counted each time they are referenced)
    and figures (:data:`channel.MAX_FIGURES`), each figure description rebuilt once however often
    it is referenced."""

    def __init__(self) -> None:
        self.nodes = channel.MAX_NODES
        self.bytes = channel.MAX_FRAME
        # id(description): (description, its rebuilt Figure)
        self.figures: dict[int, tuple[Any, Any]] = {}

    def charge(self, data: Any) -> None:
        """Count a tensor's elements or a string's characters against :attr:`bytes`.

        Raises:
            TooComplex: more than :data:`channel.MAX_FRAME` bytes referenced in all.
        """
        if isinstance(data, torch.Tensor):
            self.bytes -= data.numel() * data.element_size()
        elif isinstance(data, str):
            self.bytes -= STR_BYTES * len(data)
        if self.bytes < 0:
            raise TooComplex(
                f"values that reference more than {channel.MAX_FRAME // 2**20} MB of data in all "
                "(the same tensor or string counted each time it is referenced)"
            )


#: Bytes a string's character is counted as (:meth:`Budget.charge`): as NumPy holds it
#: (``np.asarray`` of a list of strings). The frame keeps one copy of a string or tensor referenced
#: many times, and a check that converts the value copies each reference: 400 references to one
#: string of a million characters make a NumPy array of 1.6 GB.
STR_BYTES = 4


def decode(value: Any, call: Any, budget: Budget | None = None, _depth: int = 0) -> Any:
    """Rebuild a value on the judge's side; ``call(handle, name, type_name)`` makes a remote
    callable.

    A callable's :class:`Handle` gets the parameters a module sent with it.
    Values decoded from one payload share its ``budget``.

    Raises:
        TooComplex: deeper than :data:`channel.MAX_DEPTH` containers, more than
            :data:`channel.MAX_NODES` of them (shared references counted each time),
            more data referenced than :meth:`Budget.charge` allows, or more
            figures or parts of one than :data:`channel.MAX_FIGURES`,
            :data:`channel.MAX_AXES` and :data:`channel.MAX_IMAGE_NUMBERS` allow, or a set or
            dict with more than :data:`MAX_SHARED_HASH` keys of one hash.
    """
    budget = Budget() if budget is None else budget
    budget.nodes -= 1
    if budget.nodes < 0:
        raise TooComplex(f"a value holding more than {channel.MAX_NODES} items")
    if _depth > channel.MAX_DEPTH + 1:
        raise TooComplex(f"a value nested more than {channel.MAX_DEPTH} deep")

    if isinstance(value, dict) and KIND in value:
        kind = value[KIND]
        if kind == "tensor":
            tensor = value.get("data")
            if type(tensor) is not torch.Tensor:
                return Opaque("tensor")
            budget.charge(tensor)
            if value.get("requires_grad") and (tensor.is_floating_point() or tensor.is_complex()):
                tensor.requires_grad_(True)
            return tensor
        if kind == "ndarray":
            if type(value.get("data")) is not torch.Tensor:
                return Opaque("numpy.ndarray")
            budget.charge(value["data"])
            return value["data"].numpy()
        # numbers only: np.void(2_000_000_000) would be 2 GB
        if kind == "npscalar":
            import numpy as np

            try:
                dtype = np.dtype(text_field(value.get("dtype"), "", 20))
            except TypeError:
                dtype = None
            number = value.get("value")
            if (
                dtype is None
                or dtype.kind not in "biufc"
                or type(number) not in (bool, int, float, complex)
            ):
                return Opaque("numpy scalar")
            try:
                return dtype.type(number)
            except (OverflowError, TypeError, ValueError):
                return Opaque("numpy scalar")
        if kind in ("list", "tuple", "set", "frozenset"):
            items = [decode(v, call, budget, _depth + 1) for v in value["items"]]
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[kind](
                items if kind in ("list", "tuple") else _distinct_hashes(_hashables(items))
            )
        if kind == "dict":
            pairs = []
            for index, (k, v) in enumerate(value["items"]):
                key = decode(k, call, budget, _depth + 1)
                # named without repr(key): an unhashable key's repr may cost
                if not _is_hashable(key):
                    # the judge many megabytes and minutes
                    key = f"<key {index}: {type(key).__name__}>"
                pairs.append((key, decode(v, call, budget, _depth + 1)))
            _distinct_hashes([key for key, _ in pairs])
            return dict(pairs)
        if kind == "figure":
            if id(value) not in budget.figures:
                if len(budget.figures) >= channel.MAX_FIGURES:
                    raise TooComplex(f"more than {channel.MAX_FIGURES} figures")
                budget.figures[id(value)] = (value, rebuild_figure(value))
            return budget.figures[id(value)][1]
        if kind == "callable":
            handle = call(
                int(value["handle"]),
                text_field(value.get("name"), "function"),
                text_field(value.get("type"), ""),
            )
            if isinstance(handle, Handle):
                handle.is_module = value.get("module") is True
                handle.parameters = _parameters_sent(value.get("parameters"))
                for parameter in handle.parameters or ():
                    budget.charge(parameter)
            return handle
        if kind == "ellipsis":
            return Ellipsis
        if kind == "missing":
            return None
        return Opaque(text_field(value.get("type"), "object"))
    if value is None or type(value) in _PLAIN:
        budget.charge(value)
        return value
    # what the encoding never sends as it is: a container not described by a kind (a dict key of
    # tuples 200,000 deep crashes the judge when hashed), or anything else
    return Opaque(type(value).__name__)


#: The values :func:`encode` sends as they are, which :func:`decode` takes as they are.
_PLAIN = (bool, int, float, complex, str, torch.dtype, torch.Size)
#: Most keys of one set or dict (or items of a set) that may share a hash. Ints, floats and tuples
#: of them hash alike in every process, and each key inserted is compared with every earlier one of
#: its hash: a set of 80,000 ints of one hash (multiples of 2**61 - 1) takes the judge 76 s to
#: rebuild.
MAX_SHARED_HASH = 16


def _distinct_hashes(keys: list) -> list:
    """``keys``, unless more than :data:`MAX_SHARED_HASH` of them share a hash (found by sorting the
    hashes, not by hashing them again: a set of hashes can be flooded too).

    Raises:
        TooComplex: too many keys share a hash.
    """
    hashes = sorted(hash(key) for key in keys)
    run = 1
    for before, after in zip(hashes, hashes[1:]):
        run = run + 1 if after == before else 1
        if run > MAX_SHARED_HASH:
            raise TooComplex(f"a set or dict with more than {MAX_SHARED_HASH} keys of one hash")
    return keys


def _hashables(items: list) -> list:
    return [i for i in items if _is_hashable(i)]


def _is_hashable(item: Any) -> bool:
    try:
        hash(item)
        return True
    except TypeError:
        return False
