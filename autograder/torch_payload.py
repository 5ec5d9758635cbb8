"""A frame's payload: an encoded value (:mod:`autograder.encoding`) written with ``torch.save``
(:func:`dump`) and read back with ``torch.load(weights_only=True)`` (:func:`load`) only after the
archive's records and its pickle program were read and checked here: records by name and count,
no two sharing bytes, the pickle's opcodes and globals those :func:`dump` writes, its size within
:data:`channel.MAX_PICKLE`; and the tensors it rebuilds dense, on the CPU, within
:data:`channel.MAX_FRAME` bytes.
"""

from __future__ import annotations

import io
import re
from typing import Any

import torch

from autograder import channel
from autograder.channel import (
    TooComplex,
)


def dump(value: Any) -> bytes:
    """``torch.save`` of an already encoded value."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def load(
    payload: bytes, max_pickle: int = channel.MAX_PICKLE, max_records: int = channel.MAX_RECORDS
) -> Any:
    """``torch.load(weights_only=True)``: tensors and plain data only, never code.

    ``max_pickle`` (bytes) and ``max_records`` bound the payload's pickle
    and its records (:func:`_records`): a function's return is read with
    :data:`channel.MAX_REPLY_PICKLE` and :data:`channel.MAX_REPLY_RECORDS`.

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
_RECORD_NAMES = re.compile(
    r"archive/(data\.pkl|data/[0-9]{1,9}|version|byteorder|\.format_version|"
    r"\.storage_alignment|\.data/serialization_id)"
)


PICKLE_RECORD = "archive/data.pkl"


def _records(
    payload: bytes, max_pickle: int = channel.MAX_PICKLE, max_records: int = channel.MAX_RECORDS
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
    """Refuse tensors other than dense CPU ones, and more than :data:`channel.MAX_FRAME` bytes of
    elements in all.

    A payload keeps whatever strides its sender chose: a view of 130 KB of
    storage whose shape counts 4 GB of elements would be copied whole by the
    judge (root, with no memory limit). The student process's own encoding copies every
    tensor dense, so honest values never hold more elements than the frame's
    bytes. Containers are walked iteratively, at most :data:`channel.MAX_NODES` items.

    Raises:
        ValueError: naming the tensor's layout, device or size.
    """
    stack, items, elements = [value], 0, 0
    while stack:
        item = stack.pop()
        items += 1
        if items > channel.MAX_NODES:
            raise TooComplex(f"a value holding more than {channel.MAX_NODES} items")
        if isinstance(item, torch.Tensor):
            if item.layout != torch.strided or item.device.type != "cpu" or item.is_quantized:
                raise ValueError(
                    f"a tensor of layout {item.layout} on {item.device.type}"
                    f"{' (quantized)' if item.is_quantized else ''}: only dense CPU tensors are "
                    f"read"
                )
            elements += item.numel() * item.element_size()
            if elements > channel.MAX_FRAME:
                raise ValueError(
                    f"tensors whose shapes hold more than {channel.MAX_FRAME // 2**20} MB "
                    "of elements"
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
