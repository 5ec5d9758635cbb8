"""The wire between the judge and the student process: framed JSON plus tensor payloads.

Nothing that crosses is ever unpickled as arbitrary Python: headers are JSON,
values are ``torch.save`` payloads read back with ``torch.load(...,
weights_only=True)``, which rebuilds only tensors, numbers, strings, ``None``
and the standard containers. Values that are not data (functions, models,
figures, anything else) cross as tagged descriptions: a callable becomes a
*handle* the judge can call back through the student process, a matplotlib
figure becomes its Axes' image arrays and colour limits, anything else only
its type name. A callable that is a ``torch.nn.Module`` also sends copies of
its parameters (``Module.parameters()``, in order), so the judge can evaluate
a student's network in its own copy of the architecture instead of trusting
the network's forward pass (:class:`Handle`).

This module is imported by the student process, so it must not import the
references or the checks.
"""

from __future__ import annotations

import io
import json
import math
import re
import socket
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch

from autograder import figures

#: Largest frame accepted from the other side (bytes). A student value over
#: this is reported as too large instead of exhausting the judge's memory.
MAX_FRAME = 256 * 1024 * 1024
#: Deepest nesting of containers that is encoded; deeper is "too deeply nested".
MAX_DEPTH = 32
#: Largest pickle (the part of a payload that is not tensor storage) the judge
#: unpickles: ``weights_only`` unpickling runs in Python, about a microsecond
#: per item, so this bounds the time a crafted payload can cost the judge.
MAX_PICKLE = 4 * 1024 * 1024
#: Most records a payload may hold (one per tensor, and six more): a record costs ``zipfile`` about
#: 0.5 KB to read, ten times its bytes in the payload.
MAX_RECORDS = 65_536
#: Largest pickle, and most records, of what one call of a student's function returns. The four
#: assignments' solutions return at most 449 bytes of pickle and 10 records, and a list of 2,000
#: one-number arrays (an honest ``target(X_test)`` written as a loop, which ``np.asarray`` accepts)
#: 172 KB and 2,006 records. Capped so that a right return padded with tiny tensors costs the
#: judge at most about 0.7 seconds a reply (4 MB of pickle cost 9 seconds, 40 replies a check); the
#: values the judge reads once (a notebook's names) keep :data:`MAX_PICKLE` and :data:`MAX_RECORDS`.
MAX_REPLY_PICKLE = 1024 * 1024
MAX_REPLY_RECORDS = 4096
#: Most containers and values one decoded value may hold, counting shared
#: references each time they are reached (a few bytes of pickle can describe
#: a tree of 2**64 nodes).
MAX_NODES = 1_000_000
#: Most Axes a figure may have, and inset Axes in all, to be rebuilt by the judge; four times as
#: many images in all, and as many stand-ins for what else an Axes draws as it has Axes. Rebuilt, an
#: Axes costs the judge about 0.2 MB and 10 ms, an image or a stand-in about 20 KB: a figure at most
#: about 100 MB and 3 seconds.
MAX_AXES = 64
#: Largest figure (square inches) the judge rebuilds: matplotlib's renderer allocates every pixel of
#: a figure when it measures one, and 600 by 600 inches at its 100 dots per inch took 13.8 GB; 2,000
#: square inches are 20 million pixels at 100 dots per inch
#: (:data:`autograder.figures.MAX_RENDER_PIXELS`), 45 by 45 inches.
MAX_FIGURE_AREA = 2000
#: Most numbers a figure's images may hold in all for the judge to rebuild it: the figures the
#: checks read hold 16 images of 28 by 28 (12,544 numbers); matplotlib copies an image's array when
#: it is shown, and the checks hold its colours in float64 (32 bytes a cell), so an image of
#: 16,000 by 16,000 cells sent as one byte of storage (a stride-0 view) would cost the judge
#: gigabytes.
MAX_IMAGE_NUMBERS = 2**18
#: Most figures one payload rebuilds; the same description sent again is the same figure, rebuilt
#: once (one description referenced many times, each rebuilt with 4,160 Axes, would cost 7 GB). An
#: assignment grades one figure.
MAX_FIGURES = 2
#: Most numbers (summed over its parameter tensors) a student's ``nn.Module``
#: may hold for its parameters to cross with it: the largest network an
#: assignment asks for has about 0.4 million; 4 million float32 are 16 MB.
MAX_PARAMETERS = 4_000_000
#: Most parameter tensors a student's ``nn.Module`` may have for them to cross.
MAX_PARAMETER_TENSORS = 64

KIND = "__kind__"


class ChannelClosed(ConnectionError):
    """The other side closed the channel or sent something that is not a frame."""


class ChannelTimeout(ChannelClosed):
    """A frame was not sent or received whole before the deadline, so that a student process that
    writes half a frame and sleeps cannot hold the judge past every limit."""


#: Bytes per ``send`` or ``recv`` call.
CHUNK = 1 << 20
#: While a frame is sent or awaited with a deadline, ``tick`` is called about this often (seconds).
TICK_SECONDS = 0.1


def send(sock: socket.socket, header: dict, payload: bytes = b"", deadline: float | None = None,
         tick: Callable[[], None] | None = None) -> None:
    """Send one frame: 8-byte lengths, a JSON header, then the payload bytes.

    ``deadline`` (``time.monotonic()`` seconds): raise :class:`ChannelTimeout` if the other side has
    not taken the whole frame by then, calling ``tick()`` (which may raise) every
    :data:`TICK_SECONDS` while it waits; ``None`` waits as long as it takes (the student process
    waiting for the judge)."""
    head = json.dumps(header).encode()
    data = memoryview(struct.pack("!II", len(head), len(payload)) + head + payload)
    if deadline is None:
        sock.sendall(data)
        return
    sent = 0
    try:
        while sent < len(data):
            sock.settimeout(min(_left(deadline), TICK_SECONDS))
            try:
                sent += sock.send(data[sent:sent + CHUNK])
            except TimeoutError:
                if tick is not None:
                    tick()
    finally:
        _blocking(sock)


def _blocking(sock: socket.socket) -> None:
    """``sock`` back to blocking, unless ``tick`` closed it (stopping the student process)."""
    if sock.fileno() != -1:
        sock.settimeout(None)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ChannelTimeout("the deadline passed before the frame was whole")
    return left


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None,
                tick: Callable[[], None] | None = None) -> bytes:
    chunks, got = [], 0
    try:
        while got < n:
            if deadline is not None:
                sock.settimeout(min(_left(deadline), TICK_SECONDS))
            try:
                chunk = sock.recv(min(n - got, CHUNK))
            except TimeoutError:
                if tick is not None:
                    tick()
                continue
            if not chunk:
                raise ChannelClosed("the other side closed the channel")
            chunks.append(chunk)
            got += len(chunk)
    finally:
        if deadline is not None:
            _blocking(sock)
    return b"".join(chunks)


def recv(sock: socket.socket, deadline: float | None = None,
         tick: Callable[[], None] | None = None) -> tuple[dict, bytes]:
    """Receive one frame; raises :class:`ChannelClosed` on EOF or a malformed frame.

    ``deadline`` (``time.monotonic()`` seconds; ``None``: wait as long as it takes): raise
    :class:`ChannelTimeout` if the frame is not whole by then, calling ``tick()`` (which may raise)
    every
    :data:`TICK_SECONDS` while waiting for more of it."""
    head_len, payload_len = struct.unpack("!II", _recv_exact(sock, 8, deadline, tick))
    if head_len > 1 << 20 or payload_len > MAX_FRAME:
        raise ChannelClosed(f"frame too large ({head_len} + {payload_len} bytes)")
    try:
        header = json.loads(_recv_exact(sock, head_len, deadline, tick))
    except (ValueError, RecursionError) as err:
        raise ChannelClosed(f"malformed header: {err}") from None
    if not isinstance(header, dict):
        raise ChannelClosed("malformed header: not an object")
    return header, _recv_exact(sock, payload_len, deadline, tick)


def dump(value: Any) -> bytes:
    """``torch.save`` of an already encoded value."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def load(payload: bytes, max_pickle: int = MAX_PICKLE, max_records: int = MAX_RECORDS) -> Any:
    """``torch.load(weights_only=True)``: tensors and plain data only, never code.

    ``max_pickle`` (bytes) and ``max_records`` bound the payload's pickle
    and its records (:func:`_records`): a function's return is read with
    :data:`MAX_REPLY_PICKLE` and :data:`MAX_REPLY_RECORDS`.

    ``torch.load`` reads the payload's records only after :func:`_records`
    has read them with Python's ``zipfile`` and written them again into an
    archive of its own: ``torch.load``'s zip reader (miniz) and ``zipfile``
    disagree on a crafted archive (a pickle named ``data.PKL``, which miniz
    finds and a check by name does not; two central directories, one for
    each reader), so
    ``torch.load`` reads exactly the bytes that were checked.

    Raises:
        ValueError: not a ``torch.save`` payload (:func:`_records`), a pickle
            that does what the encoding never does
            (:func:`_check_pickle_program`), or tensors the judge does not
            read (:func:`_check_tensors`).
    """
    import zipfile

    if not payload:
        return None
    records = _records(payload, max_pickle, max_records)
    try:
        _check_pickle_program(records[PICKLE_RECORD])
    except ValueError:
        raise
    except Exception as err:  # noqa: BLE001 - a malformed pickle
        raise ValueError(f"a malformed pickle ({type(err).__name__})") from None
    checked = io.BytesIO()
    with zipfile.ZipFile(checked, "w", zipfile.ZIP_STORED) as archive:
        for name, data in records.items():
            archive.writestr(name, data)
    del records
    value = torch.load(io.BytesIO(checked.getbuffer()), weights_only=True)
    _check_tensors(value)
    return value


#: The records ``torch.save`` writes into a payload (:func:`dump`'s archive is named ``archive``).
_RECORD_NAMES = re.compile(r"archive/(data\.pkl|data/[0-9]{1,9}|version|byteorder|\.format_version|"
                           r"\.storage_alignment|\.data/serialization_id)")
PICKLE_RECORD = "archive/data.pkl"


def _records(
    payload: bytes, max_pickle: int = MAX_PICKLE, max_records: int = MAX_RECORDS
) -> dict[str, bytes]:
    """The records of a ``torch.save`` payload, read with Python's ``zipfile``, by name.

    Refused: anything but the records ``torch.save`` writes, named exactly
    so, each once; compressed records (``torch.load`` would inflate a
    deflated one, and 4 MB could hold a storage of 4 GB of zeros); records
    that share bytes (120 records pointing at one storage of 25 MB would
    hold 3.8 GB in the judge); more than
    ``max_pickle`` bytes of pickle or ``max_records`` records.

    Raises:
        ValueError: saying which.
    """
    import zipfile

    source = io.BytesIO(payload)
    try:
        # the end of central directory record, before the directory is read
        end = zipfile._EndRecData(source)
        if end is None:
            raise zipfile.BadZipFile
        if (
            end[zipfile._ECD_ENTRIES_TOTAL] > max_records
            or end[zipfile._ECD_SIZE] > max_records * 128
        ):
            raise ValueError(
                f"a value of more than {max_records - 6:,} tensors and arrays (one record each)"
            )
        archive = zipfile.ZipFile(source)
        infos = archive.infolist()
        names = [info.filename for info in infos]
        # the end record's count may understate what its directory holds
        if len(infos) > max_records:
            raise ValueError(
                f"a value of more than {max_records - 6:,} tensors and arrays (one record each)"
            )
        # exact names: _RECORD_NAMES has no capitals for miniz to fold
        if len(set(names)) != len(names):
            raise ValueError("a torch.save payload with a record named twice")
        strange = [name for name in names if not _RECORD_NAMES.fullmatch(name)]
        if strange:
            raise ValueError(
                f"a torch.save payload with a record named {strange[0][:60]!r}, which torch.save "
                "does not write"
            )
        if PICKLE_RECORD not in names:
            raise ValueError("a torch.save payload without its pickle")
        if any(info.compress_type != zipfile.ZIP_STORED for info in infos):
            raise ValueError(
                "a compressed torch.save payload: values are sent stored, as torch.save writes them"
            )
        if sum(info.file_size for info in infos) > len(payload):
            raise ValueError("a torch.save payload whose records share bytes")
        if archive.getinfo(PICKLE_RECORD).file_size > max_pickle:
            raise ValueError(f"a value of more than {max_pickle // 2**20} MB of non-tensor data")
        return {info.filename: archive.read(info) for info in infos}
    except ValueError:
        raise
    except Exception as err:  # noqa: BLE001 - zipfile's errors on a malformed archive are of many types
        raise ValueError(f"not a torch.save payload ({type(err).__name__})") from None


def _check_tensors(value: Any) -> None:
    """Refuse tensors other than dense CPU ones, and more than :data:`MAX_FRAME` bytes of elements
    in all.

    A payload keeps whatever strides its sender chose: a view of 130 KB of
    storage whose shape counts 4 GB of elements would be copied whole by the
    judge (root, with no memory limit). The student process's own encoding copies every
    tensor dense, so honest values never hold more elements than the frame's
    bytes. Containers are walked iteratively, at most :data:`MAX_NODES` items.

    Raises:
        ValueError: naming the tensor's layout, device or size.
    """
    stack, items, elements = [value], 0, 0
    while stack:
        item = stack.pop()
        items += 1
        if items > MAX_NODES:
            raise TooComplex(f"a value holding more than {MAX_NODES} items")
        if isinstance(item, torch.Tensor):
            if item.layout != torch.strided or item.device.type != "cpu" or item.is_quantized:
                raise ValueError(
                    f"a tensor of layout {item.layout} on {item.device.type}"
                    f"{' (quantized)' if item.is_quantized else ''}: only dense CPU tensors are "
                    f"read"
                )
            elements += item.numel() * item.element_size()
            if elements > MAX_FRAME:
                raise ValueError(
                    f"tensors whose shapes hold more than {MAX_FRAME // 2**20} MB of elements"
                )
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)


#: The globals :func:`encode`'s values pickle with (``torch.save``'s protocol 2: ``GLOBAL "module
#: name"``), besides torch's dtypes and typed storages (:func:`_allowed_global`).
# v3: uint16...
_PICKLE_GLOBALS = frozenset(
    {
        "torch._utils _rebuild_tensor_v2",
        "torch._utils _rebuild_tensor_v3",
        "torch.storage UntypedStorage",
        "torch Size",
        "collections OrderedDict",
        "__builtin__ complex",
        "builtins complex",
    }
)


def _allowed_global(name: str) -> bool:
    module, _, attribute = name.partition(" ")
    if name in _PICKLE_GLOBALS:
        return True
    if module != "torch" or not attribute.isidentifier():
        return False
    found = getattr(torch, attribute, None)
    return isinstance(found, torch.dtype) or (
        attribute.endswith("Storage")
        and isinstance(found, type)
        and issubclass(found, torch.storage.TypedStorage)
    )


#: The pickle opcodes ``torch.save``'s protocol 2 writes for :func:`encode`'s values; any other is
#: refused.
_PICKLE_OPCODES = frozenset(
    {
        "PROTO",
        "STOP",
        "GLOBAL",
        "REDUCE",
        "BINPERSID",
        "MARK",
        "TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
        "EMPTY_TUPLE",
        "EMPTY_LIST",
        "APPEND",
        "APPENDS",
        "EMPTY_DICT",
        "SETITEM",
        "SETITEMS",
        "NONE",
        "NEWTRUE",
        "NEWFALSE",
        "BININT",
        "BININT1",
        "BININT2",
        "LONG1",
        "BINFLOAT",
        "BINUNICODE",
        "BINPUT",
        "LONG_BINPUT",
        "BINGET",
        "LONG_BINGET",
    }
)
# What :func:`_check_pickle_program` knows of a value on the pickle's stack: a kind, a ``("global",
# name)``, a ``("tuple", kinds, dims)`` (:func:`_tuple`) or a ``("call", name)`` (what a ``REDUCE``
# of that global made).
_INT, _FLOAT, _BOOL, _NONE, _STR, _LIST, _DICT, _STORAGE = (
    "int",
    "float",
    "bool",
    "None",
    "str",
    "list",
    "dict",
    "storage",
)
_PUSHED = {
    "BININT": _INT,
    "BININT1": _INT,
    "BININT2": _INT,
    "LONG1": _INT,
    "BINFLOAT": _FLOAT,
    "NEWTRUE": _BOOL,
    "NEWFALSE": _BOOL,
    "NONE": _NONE,
    "BINUNICODE": _STR,
    "EMPTY_LIST": _LIST,
    "EMPTY_DICT": _DICT,
}
_EMPTY_ORDERED_DICT = ("call", "collections OrderedDict")


def _check_pickle_program(data: bytes) -> None:
    """Follow a pickle's opcodes with the kind of each value on its stack instead of the value, and
    refuse an opcode, a global or a call :func:`encode`'s values never make.

    ``torch.load(weights_only=True)`` runs no code of the sender's, but some
    of the globals it allows allocate what their arguments say:
    ``bytearray(3_000_000_000)`` fits in a pickle of 1.3 KB, and the judge
    runs as root with no memory limit. The student process's own encoding names only tensor
    rebuilds, storages, dtypes, sizes, ordered dicts and complex numbers, as ``GLOBAL`` opcodes, and
    keys its dicts by strings. And the globals allowed (:func:`_allowed_global`) are safe only when
    called as ``torch.save`` calls them: ``OrderedDict`` called on a view of 2 million rows of a few
    bytes of storage makes ``torch.load`` build 6.9 GB of row tensors. So ``OrderedDict`` is only
    called with no arguments (and never filled), ``torch.Size`` with a tuple of ints, ``complex``
    with numbers, and the tensor rebuilds with a storage, an offset, a size and strides of ints, a
    flag and an empty ``OrderedDict``.

    Raises:
        ValueError: naming what is refused; an ``IndexError`` or ``KeyError``
            for a pickle that is not well formed (an empty stack, a memo never
            stored).
    """
    import pickletools

    stack: list = []
    marks: list[list] = []
    memo: dict[int, Any] = {}
    for opcode, argument, _ in pickletools.genops(data):
        name = opcode.name
        if name not in _PICKLE_OPCODES:
            raise ValueError(
                f"a value built through the pickle opcode {name}, which the judge does not read"
            )
        if name in _PUSHED:
            stack.append(_PUSHED[name])
        elif name == "GLOBAL":
            if not _allowed_global(str(argument)):
                raise ValueError(
                    f"a value built by {str(argument)[:100]!r}, which the judge does not read"
                )
            stack.append(("global", str(argument)))
        elif name == "MARK":
            marks.append(stack)
            stack = []
        elif name == "TUPLE":
            items = tuple(stack)
            stack = marks.pop()
            stack.append(_tuple(items))
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            if len(stack) < n:
                raise IndexError("a tuple of more values than the stack holds")
            items = tuple(stack[-n:])
            del stack[-n:]
            stack.append(_tuple(items))
        elif name == "EMPTY_TUPLE":
            stack.append(_tuple(()))
        elif name in ("APPEND", "APPENDS", "SETITEM", "SETITEMS"):
            if name == "APPEND":
                stack.pop()
            elif name == "SETITEM":
                keys = stack[-2:-1]
                del stack[-2:]
            else:
                keys = stack[0::2]
                stack = marks.pop()
            if name.startswith("SETITEM") and any(key != _STR for key in keys):
                # the encoding's dicts are keyed by strings: ints of equal hash would make a dict
                # of 100,000 keys cost the judge minutes inside torch.load
                raise ValueError(
                    "a pickle with a dict keyed by something other than strings, which the judge "
                    "does not read"
                )
            if stack[-1] != (_LIST if name.startswith("APPEND") else _DICT):
                raise ValueError(
                    f"a pickle that fills a {_kind_name(stack[-1])} through {name}, which the "
                    "judge does not read"
                )
        elif name in ("BINPUT", "LONG_BINPUT"):
            memo[int(argument)] = stack[-1]
        elif name in ("BINGET", "LONG_BINGET"):
            stack.append(memo[int(argument)])
        elif name == "BINPERSID":
            key = stack.pop()
            if not (
                isinstance(key, tuple)
                and key[0] == "tuple"
                and len(key[1]) == 5
                and key[1][0] == _STR
                and _is_global(key[1][1], "Storage")
                and key[1][2:] == (_STR, _STR, _INT)
            ):
                raise ValueError(
                    "a pickle that loads something other than a storage, which the judge does not "
                    "read"
                )
            stack.append(_STORAGE)
        elif name == "REDUCE":
            arguments, function = stack.pop(), stack.pop()
            stack.append(_check_call(function, arguments))


#: Most dimensions of a size or strides the judge reads: torch's own limit, 64.
MAX_DIMS = 64


def _tuple(items: tuple) -> tuple:
    """A tuple's kind: ``("tuple", kinds, dims)``, ``dims`` whether it is a size or strides (at most
    :data:`MAX_DIMS` ints), found once when it is built, so that a tuple of a million ints called
    on many times from the memo is neither scanned at each call nor copied onto the stack."""
    return ("tuple", items, len(items) <= MAX_DIMS and all(k == _INT for k in items))


def _is_global(kind: Any, ending: str = "") -> bool:
    return isinstance(kind, tuple) and kind[0] == "global" and kind[1].endswith(ending)


def _kind_name(kind: Any) -> str:
    if isinstance(kind, str):
        return kind
    return {"global": f"global {kind[1]!r}", "call": f"value built by {kind[1]!r}"}.get(
        kind[0], "tuple"
    )


def _check_call(function: Any, arguments: Any) -> tuple:
    """The kind a ``REDUCE`` of ``function`` on ``arguments`` makes, if ``torch.save`` writes such a
    call.

    Raises:
        ValueError: a call of something not a global, or with arguments ``torch.save`` never writes
        for it.
    """
    if not _is_global(function):
        raise ValueError(
            f"a pickle that calls a {_kind_name(function)}, which the judge does not read"
        )
    name = function[1]
    items = arguments[1] if isinstance(arguments, tuple) and arguments[0] == "tuple" else None

    def ints(kind: Any) -> bool:
        return isinstance(kind, tuple) and kind[0] == "tuple" and kind[2]

    if items is None:
        fits = False
    elif name == "collections OrderedDict":
        fits = items == ()
    elif name == "torch Size":
        fits = len(items) == 1 and ints(items[0])
    elif name in ("__builtin__ complex", "builtins complex"):
        fits = 1 <= len(items) <= 2 and all(k in (_INT, _FLOAT) for k in items)
    elif name.startswith("torch._utils _rebuild_tensor_v"):
        # (storage, offset, size, stride, requires_grad, backward hooks[, dtype (v3)][, metadata])
        fits = (
            6 <= len(items) <= 8
            and items[0] == _STORAGE
            and items[1] == _INT
            and ints(items[2])
            and ints(items[3])
            and items[4] == _BOOL
            and items[5] == _EMPTY_ORDERED_DICT
            and all(
                k in (_DICT, _NONE) or _is_global(k) and not _is_global(k, "Storage")
                for k in items[6:]
            )
        )
    else:
        fits = False
    if not fits:
        raise ValueError(
            f"a value built by {name[:100]!r} from arguments torch.save does not write for it, "
            f"which "
            "the judge does not read"
        )
    return ("call", name)


# ------------------------------------------------------------- student side


def encode(value: Any, handles: dict[int, Any], depth: int = 0) -> Any:
    """Turn a student's value into data ``torch.save`` can write and ``weights_only`` can read.

    Callables are stored in ``handles`` and sent as ``{"__kind__": "callable",
    "handle": id}``. Runs in the student process.
    """
    import numpy as np

    if depth > MAX_DEPTH:
        return {KIND: "opaque", "type": "too deeply nested"}
    if value is None or isinstance(value, (torch.dtype, torch.Size)):
        return value
    # plain types only: subclasses (numpy.float64 is a float, an IntEnum an
    # int) would be refused by weights_only loading on the judge's side
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
            # what the judge does not read (_check_tensors), named, instead of a payload it refuses
            # whole
            return {
                KIND: "opaque",
                "type": f"torch.Tensor ({str(value.layout).replace('torch.', '')} layout on "
                f"{value.device.type}{', quantized' if value.is_quantized else ''}"
                f"{', nested' if value.is_nested else ''})",
            }
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
    figure = _encode_figure(value)
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
        if len(params) > MAX_PARAMETER_TENSORS or sum(p.numel() for p in params) > MAX_PARAMETERS:
            return None
        return [p.detach().clone() for p in params]
    except Exception:  # noqa: BLE001 - a student's module may fail anywhere
        return None


def _encode_figure(value: Any) -> dict | None:
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        return None
    if not isinstance(value, Figure):
        return None
    try:
        figures.settle(value)
    except Exception:  # noqa: BLE001 - a student's figure may be anything
        pass
    axes = []
    # the images' drawn_mismatch: one draw of the figure for all of them
    with figures.one_draw_per_figure():
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
                ("overlays", lambda: figures.figure_overlays(value)),
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
            ("norm_linear", lambda: figures.norm_is_linear(image)),
            ("origin", lambda: str(image.origin)),
            ("extent", lambda: [float(e) for e in image.get_extent()]),
            ("alpha", lambda: _alpha(image.get_alpha())),
            ("visible", lambda: bool(image.get_visible()) and bool(ax.get_visible())),
            ("mask", mask),
            ("own_transform", lambda: image.get_transform() is not ax.transData),
            ("own_clip", lambda: not figures.default_clip(image, ax)),
            ("cell_colours", lambda: torch.as_tensor(figures.cell_colours(image).copy())),
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
            ("background", lambda: figures.draws_background(ax)),
            ("overlays", lambda: figures.axes_overlays(ax)),
            ("problems", lambda: figures.axes_problems(ax)),
            (
                "insets",
                lambda: [
                    {"position": _bounds(child), "paints": figures.paints(child)}
                    for child in figures.descendant_axes(ax)[:MAX_AXES]
                ],
            ),
        )
    )


def _bounds(ax: Any) -> list[float]:
    return [float(v) for v in figures.drawn_position(ax).bounds]


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


# --------------------------------------------------------------- judge side


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
            :data:`MAX_PARAMETERS` numbers). They are the student's claim of
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
        and len(value) <= MAX_PARAMETER_TENSORS
        and all(isinstance(p, torch.Tensor) for p in value)
        and sum(p.numel() for p in value) <= MAX_PARAMETERS
    ):
        return tuple(value)
    return None


class TooComplex(ValueError):
    """A value nested deeper than :data:`MAX_DEPTH`, holding more than :data:`MAX_NODES` items, or
    more figures or parts of a figure than the judge rebuilds (:data:`MAX_FIGURES`,
    :data:`MAX_AXES`,
    :data:`MAX_IMAGE_NUMBERS`)."""


class Budget:
    """What is left to rebuild of one payload, shared by every value decoded from it (all the names
    one request reads, or every name of a snapshot read one by one): items (:data:`MAX_NODES`),
    bytes of data (:data:`MAX_FRAME`: a tensor's or array's elements and :data:`STR_BYTES` a
    character of a string, counted each time they are referenced) and figures (:data:`MAX_FIGURES`),
    each figure description rebuilt once however often it is referenced."""

    def __init__(self) -> None:
        self.nodes = MAX_NODES
        self.bytes = MAX_FRAME
        # id(description): (description, its rebuilt Figure)
        self.figures: dict[int, tuple[Any, Any]] = {}

    def charge(self, data: Any) -> None:
        """Count a tensor's elements or a string's characters against :attr:`bytes`.

        Raises:
            TooComplex: more than :data:`MAX_FRAME` bytes referenced in all.
        """
        if isinstance(data, torch.Tensor):
            self.bytes -= data.numel() * data.element_size()
        elif isinstance(data, str):
            self.bytes -= STR_BYTES * len(data)
        if self.bytes < 0:
            raise TooComplex(
                f"values that reference more than {MAX_FRAME // 2**20} MB of data in all (the same "
                "tensor or string counted each time it is referenced)"
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
        TooComplex: deeper than :data:`MAX_DEPTH` containers, more than
            :data:`MAX_NODES` of them (shared references counted each time),
            more data referenced than :meth:`Budget.charge` allows, or more
            figures or parts of one than :data:`MAX_FIGURES`,
            :data:`MAX_AXES` and :data:`MAX_IMAGE_NUMBERS` allow, or a set or
            dict with more than :data:`MAX_SHARED_HASH` keys of one hash.
    """
    budget = Budget() if budget is None else budget
    budget.nodes -= 1
    if budget.nodes < 0:
        raise TooComplex(f"a value holding more than {MAX_NODES} items")
    if _depth > MAX_DEPTH + 1:
        raise TooComplex(f"a value nested more than {MAX_DEPTH} deep")

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
                dtype = np.dtype(_text(value.get("dtype"), "", 20))
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
                if len(budget.figures) >= MAX_FIGURES:
                    raise TooComplex(f"more than {MAX_FIGURES} figures")
                budget.figures[id(value)] = (value, _rebuild_figure(value))
            return budget.figures[id(value)][1]
        if kind == "callable":
            handle = call(
                int(value["handle"]),
                _text(value.get("name"), "function"),
                _text(value.get("type"), ""),
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
        return Opaque(_text(value.get("type"), "object"))
    if value is None or type(value) in _PLAIN:
        budget.charge(value)
        return value
    # what the encoding never sends as it is: a container not described by a kind (a dict key of
    # tuples 200,000 deep crashes the judge when hashed), or anything else
    return Opaque(type(value).__name__)


#: The values :func:`encode` sends as they are, which :func:`decode` takes as they are.
_PLAIN = (bool, int, float, complex, str, torch.dtype, torch.Size)


def _text(value: Any, default: str, limit: int = 200) -> str:
    """A string field of a description, cut to ``limit`` characters; ``default`` when it is not a
    string (never ``str()`` of what was sent: a list of one string of 1 MB referenced 1,500 times
    is 1.5 GB of text)."""
    return value[:limit] if isinstance(value, str) else default


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


def _valid_grid(grid: Any) -> bool:
    """``[rows, columns, first, last]``: ints, at most :data:`MAX_AXES` cells, ``0 <= first <= last
    < cells``."""
    if not (isinstance(grid, list) and len(grid) == 4 and all(type(v) is int for v in grid)):
        return False
    rows, columns, first, last = grid
    return (
        1 <= rows
        and 1 <= columns
        and rows * columns <= MAX_AXES
        and 0 <= first <= last < rows * columns
    )


def _rebuild_figure(value: dict):
    """A matplotlib Figure with the student's Axes, images and colour limits, each image carrying
    what the student process found wrong with it by drawing the student's figure (an image whose
    description leaves that out carries :data:`UNREPORTED`: the judge never draws a rebuild)."""
    from matplotlib.figure import Figure

    axes = value["axes"]
    parts = {
        "Axes": (len(axes), MAX_AXES),
        "inset Axes": (sum(len(_listed(ax.get("insets"))) for ax in axes), MAX_AXES),
        "images": (sum(len(ax["images"]) for ax in axes), 4 * MAX_AXES),
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
    if numbers > MAX_IMAGE_NUMBERS:
        raise TooComplex(
            f"a figure whose images hold more than {MAX_IMAGE_NUMBERS:,} numbers in all"
        )
    fig = Figure()
    size = value.get("size")
    if _floats(size, 2) and all(0.0 < v <= 1000.0 for v in size):
        if size[0] * size[1] > MAX_FIGURE_AREA:
            raise TooComplex(
                f"a figure of {size[0]:.4g} by {size[1]:.4g} inches (at most {MAX_FIGURE_AREA} "
                f"square "
                "inches are drawn)"
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
        ax.set_title(_text(ax_data.get("title"), "", 1000))
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
    for inset in insets[:MAX_AXES] if isinstance(insets, list) else []:
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
    for kind in kinds[:MAX_AXES]:
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
