"""The wire between the judge and the student process: framed JSON plus tensor payloads.

Nothing that crosses is ever unpickled: headers are JSON, values are
safetensors files whose metadata holds the rest of the value as JSON
(:mod:`autograder.tensor_payload`), which rebuild only tensors, numbers,
strings, ``None`` and the standard containers. Values that are not data (functions, models,
figures, anything else) cross as tagged descriptions: a callable becomes a
*handle* the judge can call back through the student process, a matplotlib
figure becomes its Axes' image arrays and colour limits, anything else only
its type name. A callable that is a ``torch.nn.Module`` also sends copies of
its parameters (``Module.parameters()``, in order), so the judge can evaluate
a student's network in its own copy of the architecture instead of trusting
the network's forward pass (:class:`Handle`).

This module holds the frames (:func:`send`, :func:`recv`) and the limits both
sides keep; a value is encoded and decoded by :mod:`autograder.encoding`, a
figure by :mod:`autograder.figure_wire`, and the payload written and read by
:mod:`autograder.tensor_payload`. All four are imported by the student process, so
they must not import the references or the checks.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

#: Largest frame accepted from the other side (bytes). A student value over
#: this is reported as too large instead of exhausting the judge's memory.
MAX_FRAME = 256 * 1024 * 1024
#: Deepest nesting of containers that is encoded; deeper is "too deeply nested".
MAX_DEPTH = 32
#: Largest header (bytes) of a payload the judge parses: the tensors' entries and the value's JSON
#: (everything but the tensors' bytes). Parsing costs the judge about 10 ms a MB; a list of
#: 400,000 Python floats is 8 MB of JSON (arrays and tensors cross as tensors, not JSON).
MAX_HEADER = 8 * 1024 * 1024
#: Most tensors (and arrays) one payload may hold: each costs an entry of about 60 bytes of header
#: and a tensor the judge builds.
MAX_TENSORS = 65_536
#: Largest header, and most tensors, of what one call of a student's function returns. The four
#: assignments' solutions return a few tensors, and a list of 2,000 one-number arrays (an honest
#: ``target(X_test)`` written as a loop, which ``np.asarray`` accepts) 2,000. Capped so that a right
#: return padded with tiny tensors costs the judge little per reply, of the 40 a check makes; the
#: values the judge reads once (a notebook's names) keep :data:`MAX_HEADER` and
#: :data:`MAX_TENSORS`.
MAX_REPLY_HEADER = 2 * 1024 * 1024
MAX_REPLY_TENSORS = 4096
#: Most containers and values one decoded value may hold, counting shared references each time
#: they are reached (the same tensor, or a figure description, referenced many times).
MAX_NODES = 1_000_000
#: Most Axes a figure may have, and inset Axes in all, to be rebuilt by the judge; four times as
#: many images in all, and as many stand-ins for what else an Axes draws as it has Axes. Rebuilt, an
#: Axes costs the judge about 0.2 MB and 10 ms, an image or a stand-in about 20 KB: a figure at most
#: about 100 MB and 3 seconds.
MAX_AXES = 64
#: Largest figure (square inches) the judge rebuilds: matplotlib's renderer allocates every pixel of
#: a figure when it measures one, and 600 by 600 inches at its 100 dots per inch took 13.8 GB; 2,000
#: square inches are 20 million pixels at 100 dots per inch
#: (:data:`autograder.figure_parts.MAX_RENDER_PIXELS`), 45 by 45 inches.
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


def send(
    sock: socket.socket,
    header: dict,
    payload: bytes = b"",
    deadline: float | None = None,
    tick: Callable[[], None] | None = None,
) -> None:
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
                sent += sock.send(data[sent : sent + CHUNK])
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


def _recv_exact(
    sock: socket.socket,
    n: int,
    deadline: float | None = None,
    tick: Callable[[], None] | None = None,
) -> bytes:
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


def recv(
    sock: socket.socket, deadline: float | None = None, tick: Callable[[], None] | None = None
) -> tuple[dict, bytes]:
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


class TooComplex(ValueError):
    """A value nested deeper than :data:`MAX_DEPTH`, holding more than :data:`MAX_NODES` items, or
    more figures or parts of a figure than the judge rebuilds (:data:`MAX_FIGURES`,
    :data:`MAX_AXES`,
    :data:`MAX_IMAGE_NUMBERS`)."""


def text_field(value: Any, default: str, limit: int = 200) -> str:
    """A string field of a description, cut to ``limit`` characters; ``default`` when it is not a
    string (never ``str()`` of what was sent: a list of one string of 1 MB referenced 1,500 times
    is 1.5 GB of text)."""
    return value[:limit] if isinstance(value, str) else default
