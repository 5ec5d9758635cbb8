"""The student process: executes a submission's cells and answers the judge's questions.

Started by :mod:`autograder.judge` as ``python -m autograder.worker FD``, as an
unprivileged user when grading runs as root, in a scratch folder holding the
notebook's support files. It talks to the judge only through the socket
``FD``; its standard output and error go nowhere. Requests:

* ``exec``: run one cell's source in an IPython shell, after seeding numpy's
  and ``random``'s generators with the request's ``seed`` as Otter does
  before every cell; reply whether it raised, and the first few kilobytes of
  what it printed;
* ``get``: the encoded values of some global names (missing names say so);
* ``kinds``: the kind of value (:func:`autograder.kinds.kind_of`) each of some global names holds;
* ``call``: call a callable the judge holds a handle to, with arguments the
  judge sent as data (or as handles), and reply with the encoded result or the
  exception; with ``keep``, this process also keeps the result and replies with
  its handle, which later calls may name as an argument instead of sending the
  value again (the lesson's ``nb_test = neigh(X_test)``, 100 MB, computed once
  and reused by every ``predict``, as the notebook does).

Nothing here decides a score: whatever the student's code does to this
process (replacing ``torch.allclose``, hiding tracebacks, exiting), the judge
only ever receives data from it.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any

# bound before any cell runs: a notebook that replaces zlib.crc32 changes nothing here
from zlib import crc32 as _crc32


class Discarded(io.TextIOBase):
    """Where a cell's printed output goes: nowhere. The judge shows none of it, so it keeps none
    (every cell printing 256 KB would otherwise stay in the judge's memory for the grading)."""

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        return len(str(text))


def _shell():
    """The IPython shell cells run in: a plain ``InteractiveShell`` whose ``%matplotlib`` and
    ``%pylab`` keep the Agg backend (a plain shell has no event loop, and raised
    ``NotImplementedError`` for ``%matplotlib inline``, so the rest of the cell never ran)."""
    import IPython.core.interactiveshell as ish

    class Shell(ish.InteractiveShell):
        def enable_gui(self, gui=None):
            return None

        def enable_matplotlib(self, gui=None):
            import matplotlib

            return gui, matplotlib.get_backend()

    return Shell.instance()


def _seed(seed) -> None:
    """Seed numpy's and ``random``'s global generators as Otter's seeding lines do before each
    cell."""
    if type(seed) is not int:
        return
    import random

    import numpy as np

    np.random.seed(seed)
    random.seed(seed)


#: The most names one ``kinds`` request is answered for.
MAX_KIND_NAMES = 1024


def main(fd: int) -> None:
    from autograder import channel, encoding, tensor_payload
    from autograder.kinds import kinds_of

    # SIGINT raises KeyboardInterrupt in the running cell, which is how the judge stops a cell past
    # its limit; a process started with SIGINT ignored (a background job, pytest-xdist's workers)
    # passes the ignore on to its children, so it is set here, whoever started this process.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sock = socket.socket(fileno=fd)
    shell = _shell()
    handles: dict[int, object] = {}
    real_stdout, real_stderr = sys.stdout, sys.stderr
    channel.send(sock, {"op": "ready", "pid": os.getpid()})
    while True:
        try:
            request, payload = channel.recv(sock)
        except channel.ChannelClosed:
            return
        op = request.get("op")
        if op == "exec":
            sys.stdout = sys.stderr = Discarded()
            try:
                _seed(request.get("seed"))
                result = shell.run_cell(request["source"], store_history=False, silent=False)
                error = result.error_in_exec or result.error_before_exec
                reply = {
                    "op": "done",
                    "error": f"{type(error).__name__}: {error}" if error else None,
                }
            except BaseException as err:  # noqa: BLE001 - a cell may raise anything, SystemExit included
                reply = {"op": "done", "error": f"{type(err).__name__}: {err}"}
            finally:
                sys.stdout, sys.stderr = real_stdout, real_stderr
            reply["torch_state"] = _torch_state()
            channel.send(sock, reply)
        elif op == "get":
            encoded = {}
            for name in request["names"]:
                if name in shell.user_ns:
                    try:
                        encoded[name] = encoding.encode(shell.user_ns[name], handles)
                    except Exception as err:  # noqa: BLE001 - a student object may fail to encode
                        encoded[name] = {
                            channel.KIND: "opaque",
                            "type": f"unreadable ({type(err).__name__})",
                        }
                else:
                    encoded[name] = {channel.KIND: "missing"}
            channel.send(sock, {"op": "values"}, _written(encoded, tensor_payload.dump))
        elif op == "kinds":
            names = request.get("names")
            kinds = kinds_of(
                shell.user_ns, names[:MAX_KIND_NAMES] if isinstance(names, list) else []
            )
            channel.send(sock, {"op": "kinds", "kinds": kinds})
        elif op == "call":
            func = handles.get(int(request["handle"]))
            try:
                args, kwargs = tensor_payload.load(payload)
                # only what the judge sent as data is fingerprinted: it holds its own copy of that,
                # and no copy of what this process keeps
                sent = {i for i, a in enumerate(args) if not _is_reference(a)}
                args = [_resolve(a, handles) for a in args]
                before = _fingerprints(args, kwargs, sent)
                with _in_torch_state(request.get("torch_state")):
                    result = func(*args, **kwargs)
                changed = [
                    key
                    for key, print_ in _fingerprints(args, kwargs, sent).items()
                    if before.get(key) != print_
                ]
                reply = {"op": "result", "mutated": changed}
                if request.get("keep") is True:
                    handles[id(result)] = result
                    reply["kept"] = id(result)
                channel.send(sock, reply, tensor_payload.dump(encoding.encode(result, handles)))
            except BaseException as err:  # noqa: BLE001 - the student's function may raise anything
                message = str(err)[:2000]
                channel.send(
                    sock,
                    {
                        "op": "raised",
                        "type": type(err).__name__,
                        "message": message,
                        "where": traceback.format_exc(limit=-3)[-4000:],
                    },
                )
        elif op == "bye":
            return


def _written(encoded: dict, dump: Callable[[Any], bytes]) -> bytes:
    """The payload of ``encoded`` (name: encoded value); a value that cannot be written (an
    encoding replaced by the notebook, a value of more items than the judge reads) crosses as
    unreadable, and the others as they are."""
    from autograder.channel import KIND

    try:
        return dump(encoded)
    except Exception:  # noqa: BLE001 - written name by name below
        pass
    kept = {}
    for name, value in encoded.items():
        try:
            dump({name: value})
            kept[name] = value
        except Exception as err:  # noqa: BLE001 - the value alone is lost
            kept[name] = {KIND: "opaque", "type": f"unreadable ({type(err).__name__})"}
    return dump(kept)


#: The default dtypes a call may be asked to run under (``torch.set_default_dtype`` takes floating
#: types only).
DEFAULT_DTYPES = ("torch.float32", "torch.float64", "torch.float16", "torch.bfloat16")


def _torch_state() -> list | None:
    """``[threads, default dtype]``: the torch settings the cells left, which change a float32
    training's last bits (the judge may retrain a network in each setting the notebook's cells ran
    in)."""
    import torch

    try:
        return [torch.get_num_threads(), str(torch.get_default_dtype())]
    except Exception:  # noqa: BLE001 - a student may have replaced these functions
        return None


def valid_torch_state(state) -> bool:
    """Whether ``state`` is ``[threads, default dtype]`` as :func:`_torch_state` gives it: 1 to 256
    threads, one of :data:`DEFAULT_DTYPES` (the judge keeps, and the student process applies,
    nothing else)."""
    return (
        isinstance(state, list)
        and len(state) == 2
        and type(state[0]) is int
        and 1 <= state[0] <= 256
        and state[1] in DEFAULT_DTYPES
    )


@contextlib.contextmanager
def _in_torch_state(state):
    """Run a call under ``state`` (``[threads, default dtype]`` as :func:`_torch_state` gave it),
    the settings restored afterwards; ``None`` (or anything else) runs it as things stand."""
    import torch

    if not valid_torch_state(state):
        yield
        return
    threads, dtype = torch.get_num_threads(), torch.get_default_dtype()
    torch.set_num_threads(state[0])
    torch.set_default_dtype(getattr(torch, state[1].removeprefix("torch.")))
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.set_default_dtype(dtype)


def _fingerprints(args, kwargs, positions=None) -> dict:
    """A checksum of each tensor or array argument (by position, or by name for a keyword), its
    shape, dtype and bytes (CRC-32: tens of milliseconds for a training set of 150 MB): which of
    them the call changed in place is told back to the judge, whose own copies the call never
    touches, so a function that writes into its input cannot pass a check that compares the
    input with itself). ``positions``: the positional arguments to fingerprint (default all)."""
    import numpy as np
    import torch

    prints = {}
    for key, value in [*enumerate(args), *kwargs.items()]:
        if positions is not None and isinstance(key, int) and key not in positions:
            continue
        try:
            if isinstance(value, torch.Tensor):
                data = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
            elif isinstance(value, np.ndarray) and value.dtype != object:
                data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
            else:
                continue
            prints[key] = (tuple(value.shape), str(value.dtype), _crc32(data.data))
        except Exception:  # noqa: BLE001 - an argument the call left unreadable counts as changed
            prints[key] = None
    return prints


def _is_reference(arg) -> bool:
    return isinstance(arg, dict) and arg.get("__handle__") is not None


def _resolve(arg, handles):
    """An argument the judge sent as a handle reference becomes the student's own callable, or the
    value this process kept."""
    if _is_reference(arg):
        return handles[int(arg["__handle__"])]
    return arg


if __name__ == "__main__":
    main(int(sys.argv[1]))
