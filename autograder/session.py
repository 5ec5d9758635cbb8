"""A grading's conversation with the student process: the notebook's cells run one at a time; a
cell that crashed the process, ran past its limit or used too much memory is recorded, the process
is started again and the cells before it are replayed. The hidden tests read the student's values
through :class:`StudentEnvironment` and call the student's functions through
:class:`RemoteCallable` handles, so that property tests and their shrinking run in the judge while
the student's code runs only in the student process. Errors the student's code raised in a call
are :class:`StudentError`.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder import channel, encoding, tensor_payload
from autograder.judge_interface import Limits
from autograder.rebound import KindWatch, NotebookMap
from autograder.student_process import (
    ERROR_NOT_KEPT,
    MAX_CELL_ERRORS_NOTED,
    NOT_RUN,
    CellRecord,
    StudentFailure,
    StudentProcess,
    first_line,
)

#: At most this many torch settings are remembered (a notebook that changes the thread count in
#: every cell does not multiply the judge's retrainings).
MAX_TORCH_STATES = 3


class Session:
    """A student process that can be rebuilt: it remembers which cells ran and which were
    stopped."""

    def __init__(
        self,
        workdir: Path,
        cells: list[str],
        limits: Limits,
        user,
        deadline_at: float,
        seed: int | None = None,
    ):
        self.process = StudentProcess(workdir, limits, user)
        self.process.deadline_at = deadline_at
        self.cells, self.limits, self.deadline_at = cells, limits, deadline_at
        #: Otter's ``seed``: numpy's and ``random``'s generators are seeded with it before every
        #: cell
        self.seed = seed if type(seed) is int else None
        self.records: list[CellRecord] = []
        self.skipped: set[int] = set()
        # why the last call stopped the process, for the calls after it
        self.last_failure: str | None = None
        # why the process was restarted after the notebook ran, for the output
        self.restarts: list[str] = []
        #: bytes the student's functions returned since the judge last collected its garbage
        #: (RemoteCallable)
        self.returned_bytes = 0
        #: the torch settings (``[threads, default dtype]``) each cell left, distinct, in order; the
        #: last is the one the judge's calls run in unless a call asks for another
        #: (:meth:`RemoteCallable.in_torch_state`)
        self.torch_states: list[list] = []
        #: the cells' names as a student finds them (:func:`autograder.rebound.map_notebook`), when
        #: known
        self.notebook: NotebookMap | None = None
        #: the graded names' kinds after each cell, when set before :meth:`run_all`
        self.watch: KindWatch | None = None

    def label(self, index: int) -> str:
        """Cell ``index`` (of :attr:`cells`) named as the student finds it: "the 2nd code cell under
        q1_4's text" when the notebook's map is known, else "code cell 5" (code cells counted from
        the top)."""
        return self.notebook.label(index) if self.notebook is not None else f"code cell {index + 1}"

    def remaining(self) -> float:
        return self.deadline_at - time.monotonic()

    def _exec(self, index: int) -> CellRecord:
        header, _ = self.process.request(
            {"op": "exec", "source": self.cells[index], "seed": self.seed},
            b"",
            self.limits.cell_seconds,
            what=f"running {self.label(index)}",
            interrupt=True,
            limit="cell",
        )
        error = header.get("error")
        self._note_torch_state(header.get("torch_state"))
        return CellRecord(index, first_line(error))

    def _note_torch_state(self, state: Any) -> None:
        """Keep a cell's torch settings (:data:`MAX_TORCH_STATES` distinct at most), the latest
        last."""
        from autograder.worker import valid_torch_state

        if not valid_torch_state(state):
            return
        if state in self.torch_states:
            self.torch_states.remove(state)
        elif len(self.torch_states) >= MAX_TORCH_STATES:
            self.torch_states.pop(0)
        self.torch_states.append(state)

    def run_all(self) -> None:
        """Execute every cell once, in order, until the deadline."""
        self.process.start()
        raised = 0
        for index in range(len(self.cells)):
            if self.remaining() <= 0:
                if not self.records or self.records[-1].problem != NOT_RUN:
                    self.process.note_limit(
                        "deadline", f"the grading deadline passed before {self.label(index)} ran"
                    )
                self.records.append(CellRecord(index, None, NOT_RUN))
                continue
            record = self._run_guarded(index)
            if record.error and not record.problem:
                raised += 1
                if raised > MAX_CELL_ERRORS_NOTED:
                    record.error = ERROR_NOT_KEPT
            self.records.append(record)
            self._watch_kinds(index)

    def _watch_kinds(self, index: int) -> None:
        """Tell :attr:`watch` the graded names' kinds after cell ``index``. The student process
        computes them without running the student's code; if it cannot answer, watching stops (the
        process, if that stopped it, is rebuilt with the cells so far) and no rebound is
        reported."""
        if (
            self.watch is None
            or not self.watch.names
            or self.remaining() <= 0
            or not self.process.alive
        ):
            return
        try:
            header, _ = self.process.request(
                {"op": "kinds", "names": self.watch.names},
                b"",
                self.call_timeout("reading the answers' kinds"),
                what="reading the answers' kinds",
            )
        except StudentFailure:
            self.watch = None
            if not self.process.alive:
                self.rebuild(upto=index + 1)
            return
        kinds = header.get("kinds")
        self.watch.after_cell(index, kinds if isinstance(kinds, dict) else {})

    def _run_guarded(self, index: int) -> CellRecord:
        try:
            record = self._exec(index)
            # it stopped when interrupted, or caught the KeyboardInterrupt
            if self.process.interrupted_for:
                record.problem = f"interrupted: it {self.process.interrupted_for}"
                self.process.note_limit(
                    self.process.interrupted_by or "cell",
                    f"it {self.process.interrupted_for} while running {self.label(index)}, "
                    "and was interrupted",
                )
            return record
        except StudentFailure as failure:
            self.skipped.add(index)
            self.rebuild(upto=index)
            return CellRecord(index, None, f"stopped: {failure}")

    def rebuild(self, upto: int | None = None) -> None:
        """Start a fresh student process and replay the cells before ``upto`` that did not stop it.

        A cell that stops the process during the replay (a limit passed under
        load, a notebook that behaves otherwise when replayed) is skipped from
        then on, and the replay starts again from the first cell in a fresh
        process: the cells after it need the state of the cells before it
        (imports, data), which a process started in the middle would lack.
        Each round skips one more cell, so this ends.
        """
        self.process.stop()
        end = len(self.records) if upto is None else upto
        while self.remaining() > 0:
            self.process.start()
            for index in range(end):
                if index in self.skipped:
                    continue
                if self.remaining() <= 0:
                    return
                try:
                    self._exec(index)
                except StudentFailure:
                    self.skipped.add(index)
                    self.process.stop()
                    break
            else:
                return

    def ensure_alive(self) -> None:
        if not self.process.alive and self.remaining() > 0:
            self.restarts.append(self.last_failure or "the student process had stopped")
            self.rebuild()

    # -- the judge's questions
    def values(
        self, names: list[str], whole: bool = False, budget: encoding.Budget | None = None
    ) -> dict[str, Any]:
        """The student's values of ``names``, as the judge rebuilds them, within ``budget`` (shared
        by the names of a snapshot read one by one, each in a payload of its own; else one for this
        payload, whose items and figures its names share, and whose data each name may reference up
        to
        :data:`channel.MAX_FRAME`).

        A payload the judge cannot read makes every name opaque, or with
        ``whole`` (several names read at once) raises :class:`StudentFailure`,
        so that the caller can read them one by one and lose only the bad one.
        """
        self.ensure_alive()
        what = "reading " + ", ".join(names)
        header, payload = self.process.request(
            {"op": "get", "names": names}, b"", self.call_timeout(what), what=what
        )
        if header.get("op") != "values":
            raise StudentFailure("the student process answered out of turn")
        try:
            encoded = tensor_payload.load(payload)
        except Exception as err:  # noqa: BLE001 - whatever the student process sent
            if whole:
                raise StudentFailure(f"the values could not be read together ({err})") from None
            return {
                name: encoding.Opaque(f"value the judge could not read ({err})") for name in names
            }
        if not isinstance(encoded, dict):
            raise StudentFailure("the student process sent something that is not a table of values")
        generation = self.process.generation
        shared = budget is not None
        # one for the payload: a figure referenced under many names is rebuilt once
        if budget is None:
            budget = encoding.Budget()
        values = {}
        for name in names:
            # one frame's data, referenced by each name within its own allowance, so that one
            # name's data cannot use it up for every later name
            if not shared:
                budget.bytes = channel.MAX_FRAME
            values[name] = _decoded(
                encoded.get(name, {channel.KIND: "missing"}),
                lambda handle, label, kind: RemoteCallable(self, handle, label, kind, generation),
                budget,
            )
        return values

    def call_timeout(self, what: str) -> float:
        """CPU seconds a request may use: the call limit (the process's wait also ends at the
        whole-run deadline, :meth:`StudentProcess._wait`).

        Raises:
            StudentFailure: the deadline has passed.
        """
        if self.remaining() <= 0:
            raise self.process.stopped_by("deadline", f"the grading deadline passed before {what}")
        return self.limits.call_seconds


class StudentError(Exception):
    """The student's function raised; ``str()`` is ``Type: message`` as the student would see it."""


class RemoteCallable(encoding.Handle):
    """A student's function (or model) living in the student process, called through the channel.

    For a model, ``parameters`` holds the copies of its parameters that
    crossed with it (:class:`autograder.encoding.Handle`). After each call,
    ``mutated_arguments`` lists the tensor and array arguments (positions,
    keyword names) the function changed in place in the student process,
    which the judge's own arguments never show (:func:`autograder.checks.changed_in_place`).
    """

    def __init__(self, session: Session, handle: int, name: str, kind: str, generation: int):
        self._session, self._handle, self.__name__, self._kind, self._generation = (
            session,
            handle,
            name,
            kind,
            generation,
        )
        self.type_name, self.key = kind, (generation, handle)
        self.mutated_arguments: list[int | str] = []

    def __repr__(self) -> str:
        return f"<student {self._kind or 'function'} {self.__name__}>"

    def other_torch_states(self) -> list[list]:
        """The torch settings (``[threads, default dtype]``) the notebook's cells ran in besides the
        one its last cell left, which is the one calls run in: a network trained in an earlier cell
        may only be reproduced in the settings of that cell (``torch.set_num_threads(1)`` in the
        last cell changes a float32 training's last bits)."""
        states = getattr(self._session, "torch_states", None) or []
        return [list(s) for s in states[:-1]]

    def in_torch_state(self, state: list) -> Callable:
        """This function, called under the torch settings ``state`` (one of
        :meth:`other_torch_states`), which the student process restores after the call."""

        def call(*args, **kwargs):
            return self._call(args, kwargs, state)

        call.__name__ = self.__name__
        return call

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs, None)

    def keeping(self, label: str, *args) -> tuple[Any, KeptValue | None]:
        """``self(*args)``, and the student process keeps the result: ``(result, kept)``, ``kept``
        being what later calls of this process may take as an argument in its place, without the
        value crossing again (``None`` when the student process did not keep it). ``label`` names
        it in messages (``"neigh(X_test)"``)."""
        return self._call(args, {}, None, keep=label)

    def _call(self, args: tuple, kwargs: dict, torch_state: list | None, keep: str | None = None):
        process = self._session.process
        if process.generation != self._generation or not process.alive:
            why = f" ({self._session.last_failure})" if self._session.last_failure else ""
            raise StudentFailure(
                f"{self.__name__} is gone: the student process was stopped earlier{why}"
            )
        payload = tensor_payload.dump(
            ([_outgoing(a) for a in args], {k: _outgoing(v) for k, v in kwargs.items()})
        )
        self.mutated_arguments = []
        what = f"calling {self.__name__}"
        try:
            request = {"op": "call", "handle": self._handle}
            if torch_state is not None:
                request["torch_state"] = list(torch_state)
            if keep is not None:
                request["keep"] = True
            header, body = process.request(
                request, payload, self._session.call_timeout(what), what=what
            )
        except StudentFailure as failure:
            self._session.last_failure = str(failure)
            raise
        if header.get("op") == "raised":
            # an honest reply has none; the exception's traceback would keep this frame, and the
            # body with it
            del body
            raise StudentError(
                f"{str(header.get('type', 'Exception'))[:200]}: "
                f"{str(header.get('message', ''))[:2000]}"
            )
        if header.get("op") != "result":
            raise StudentFailure("the student process answered out of turn")
        mutated = header.get("mutated")
        if isinstance(mutated, list):
            self.mutated_arguments = [m for m in mutated if isinstance(m, (int, str))][:64]
        # a failing example's exception keeps the frames that hold what the function returned, in
        # reference cycles that only the garbage collector frees: functions that return hundreds
        # of MB on every input but the smallest would have Hypothesis's search and shrinking keep
        # many of them
        self._session.returned_bytes += len(body)
        if self._session.returned_bytes > channel.MAX_FRAME:
            gc.collect()
            self._session.returned_bytes = len(body)
        try:
            result = tensor_payload.load(body, channel.MAX_REPLY_HEADER, channel.MAX_REPLY_TENSORS)
        except Exception as err:  # noqa: BLE001 - whatever the student process sent
            result = encoding.Opaque(f"value the judge could not read ({err})")
        else:
            result = _decoded(
                result,
                lambda h, label, kind: RemoteCallable(
                    self._session, h, label, kind, process.generation
                ),
            )
        if keep is None:
            return result
        kept = header.get("kept")
        if type(kept) is not int:
            return result, None
        return result, KeptValue(self._session, kept, keep, process.generation)


class KeptValue:
    """A value a call returned that the student process keeps (:meth:`RemoteCallable.keeping`):
    passed as an argument, it is that process's own object, which does not cross again. Valid only
    in the student process that computed it: after a restart, using it raises ``StudentFailure``.

    The judge checks what a kept value was when it crossed, but not that the student's code left it
    so: a call that is given it grades on what it returns, as any call does.
    """

    def __init__(self, session: Session, handle: int, label: str, generation: int):
        self._session, self._handle, self._generation = session, handle, generation
        self.label = label

    def __repr__(self) -> str:
        return f"<kept {self.label}>"

    @property
    def alive(self) -> bool:
        """Whether the student process that keeps it is still the one running."""
        process = self._session.process
        return process.generation == self._generation and process.alive


def _decoded(value: Any, call, budget: encoding.Budget | None = None) -> Any:
    """:func:`encoding.decode`, where a value the judge cannot rebuild becomes opaque instead of an
    error, and what it took of ``budget`` is given back (it is not kept: the other names of the
    payload are read as if it were not there)."""
    budget = encoding.Budget() if budget is None else budget
    nodes, data = budget.nodes, budget.bytes
    try:
        return encoding.decode(value, call, budget)
    except Exception as err:  # noqa: BLE001 - a crafted payload may fail anywhere in the rebuild
        budget.nodes, budget.bytes = nodes, data
        return encoding.Opaque(
            f"value the judge could not read ({type(err).__name__}: {str(err)[:200]})"
        )


def _outgoing(value: Any) -> Any:
    """Judge-side arguments: data as is, a student's callable as its handle."""
    if isinstance(value, RemoteCallable):
        return {"__handle__": value._handle}
    if isinstance(value, KeptValue):
        if not value.alive:
            raise StudentFailure(
                f"{value.label}, which the student process kept, is gone: it was stopped earlier"
            )
        return {"__handle__": value._handle}
    if isinstance(value, (list, tuple)):
        return type(value)(_outgoing(v) for v in value)
    return value


class StudentEnvironment(dict):
    """What Otter's test functions read names from: one snapshot of the student's values.

    Every name any question reads (``names``, the test cases' parameters) is
    fetched at once, after the notebook ran and before the judge calls any
    student function, and all questions read that snapshot. So a student
    function the judge calls in one question cannot rebind a name another
    question reads (swap ``net`` between questions); a model's parameters are
    copied when it crosses, so they are fixed at the snapshot too. After the
    student process was restarted (a crash, a limit), only the functions'
    handles are taken from the replayed notebook: every other value, and every
    name that was missing or unreadable, stays as first read (see
    :meth:`_keep_first`). A name outside ``names`` (read through ``env``) is
    fetched when first read, and kept the same way.
    """

    def __init__(self, session: Session, names: list[str]):
        super().__init__()
        self._session, self._names, self._generation = session, sorted(set(names)), None
        self._first: dict[str, Any] | None = None

    def refresh(self) -> None:
        """Take the snapshot, unless it is of the student process that is running now."""
        process = self._session.process
        if self._generation == process.generation and process.alive:
            return
        unreadable: set[str] = set()
        for _ in range(3):
            self.clear()
            wanted = [n for n in self._names if n not in unreadable]
            try:
                self.update(self._session.values(wanted, whole=True) if wanted else {})
            except StudentFailure:
                # a value too large to cross or unreadable, or the process stopped while sending:
                # name by name, still before any student function is called (a name that cannot be
                # read is missing), all within one budget (names too large together are not kept by
                # reading each alone)
                budget = encoding.Budget()
                for name in wanted:
                    try:
                        self.update(self._session.values([name], budget=budget))
                    except StudentFailure:
                        unreadable.add(name)
            self.update(dict.fromkeys(unreadable))
            self._generation = self._session.process.generation
            stale = any(
                isinstance(v, RemoteCallable) and v._generation != self._generation
                for v in dict.values(self)
            )
            if not stale or not self._session.process.alive:
                # else an unreadable name restarted the process after earlier names were read: again
                break
        for name in self._names:
            if isinstance(dict.get(self, name), RemoteCallable):
                dict.get(self, name).variable = name
        if self._first is None:
            self._first = dict(self)
        else:
            self._keep_first()

    def _keep_first(self) -> None:
        """After a restart: the first snapshot's data, and its networks' parameters, stand.

        Only the handles of functions are new (the old ones died with the old
        process), and only where the first read held one too, also inside a
        container: a dict holding a function keeps its first data (else a
        replay could rebuild it from targets the judge's calls had shown). A notebook that
        gives other values when it is replayed (it looks for a file its first
        run wrote, a clock, a random draw, values the judge sent to its
        functions before the restart) cannot change what later questions read:
        a name missing or unreadable at first stays so (else a notebook could
        leave a name undefined, capture the reference's targets through a
        function the judge calls, stop the process, and compute the name from
        them in the replay); a network that is not the one first read fails its
        forward check against the first parameters.
        """
        for name, first in self._first.items():
            now = dict.get(self, name)
            # read through `env`: its new handle is fetched now
            if _holds_handle(first) and name not in self:
                now = self._fetch(name)
            if _holds_handle(first) and _holds_handle(now):
                self[name] = _with_new_handles(first, now)
                continue
            self[name] = None if _holds_handle(first) else first

    def _fetch(self, name: str) -> Any:
        """The value of ``name`` in the running student process, ``None`` when missing or
        unreadable."""
        try:
            return self._session.values([name])[name]
        except StudentFailure:
            return None

    def get(self, name, default=None):
        self.refresh()
        # read through `env` for the first time: kept like the snapshot's names
        if name not in self:
            self[name] = self._first[name] = self._fetch(name)
        value = dict.get(self, name)
        return default if value is None else value


def _with_new_handles(first: Any, now: Any, depth: int = 0) -> Any:
    """``first`` (a value read before a restart), with each function handle in it replaced by the
    one at the same place in ``now`` (read after it), and everything else as first read; a handle
    with none in its place in ``now`` stays, dead (calling it says the process was stopped). A
    network keeps its first parameters."""
    if isinstance(first, RemoteCallable):
        if not isinstance(now, RemoteCallable):
            return first
        now.is_module, now.parameters = first.is_module, first.parameters
        return now
    if depth > channel.MAX_DEPTH:
        return first
    if isinstance(first, (list, tuple)) and type(now) is type(first) and len(now) == len(first):
        return type(first)(_with_new_handles(f, n, depth + 1) for f, n in zip(first, now))
    if isinstance(first, dict) and isinstance(now, dict):
        return {
            key: _with_new_handles(value, now.get(key), depth + 1) for key, value in first.items()
        }
    return first


def _holds_handle(value: Any, depth: int = 0) -> bool:
    """Whether a rebuilt value is, or contains, a handle of the student process (which dies with
    it)."""
    if isinstance(value, RemoteCallable):
        return True
    if depth > channel.MAX_DEPTH:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds_handle(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_holds_handle(v, depth + 1) for v in value.values())
    return False
