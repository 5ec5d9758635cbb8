"""What the results say besides points: under each question that lost points, which cells that set
the names its hidden tests read raised, were stopped by a limit or were not run; restarts of the
student process; names bound to another kind of value later in the notebook; and which names each
question's hidden tests read (:func:`names_read_by`).
"""

from __future__ import annotations

from collections.abc import Callable

from autograder.rebound import KindWatch
from autograder.student_process import MAX_CELL_ERRORS_NOTED, NOT_RUN, CellRecord, first_line


def names_by_question(test_files: list) -> dict[str, list[str]]:
    """``{question: the student names its test cases take as parameters}`` (:func:`names_read_by`
    per file)."""
    return {test_file.name: names_read_by([test_file]) for test_file in test_files}


def note_rebound(test_files: list, watch: KindWatch | None) -> list[str]:
    """For each question that lost points, one sentence per graded name a later cell rebound
    (:meth:`KindWatch.messages`), added to the message of its first failed test case; returns them
    all."""
    notes = []
    for test_file in test_files if watch is not None else ():
        failed = [result for result in test_file.test_case_results if not result.passed]
        messages = watch.messages(test_file.name) if failed else []
        # the first failed case: a question's later cases often fail for the same name
        if failed and messages:
            failed[0].message = "\n".join([(failed[0].message or "").rstrip(), *messages]).strip()
        notes += [f"{test_file.name}: {message}" for message in messages]
    return notes


def names_read_by(test_files: list) -> list[str]:
    """The student names Otter's test cases take as parameters (``env`` aside), and those their
    checks carry forward (:func:`autograder.checks.carried_names`)."""
    import inspect

    from autograder.checks import carried_names

    names = []
    for test_file in test_files:
        for case in test_file.test_cases:
            names += [n for n in inspect.signature(case.body.test_func).parameters if n != "env"]
            names += carried_names(case.body.test_func)
    return names


def restart_notes(restarts: list[str]) -> list[str]:
    """One line per distinct reason the student process was restarted while the questions were
    graded."""
    if not restarts:
        return []
    counts: dict[str, int] = {}
    for reason in restarts:
        counts[reason] = counts.get(reason, 0) + 1
    return [
        f"the student process was restarted {n} time(s) while the questions were graded (the "
        f"notebook "
        f"replayed, the values read before kept): {reason[:300]}"
        for reason, n in counts.items()
    ]


def cell_notes(records: list[CellRecord], label: Callable[[int], str] | None = None) -> list[str]:
    """One line per cell that was stopped and per cell that raised (the first
    :data:`MAX_CELL_ERRORS_NOTED` of each, the error's first line; the rest counted), and one for
    the cells the deadline left no time for: a question that then finds its answer missing is
    explained. Cells are named by ``label`` (a cell's index to its name, :meth:`Session.label`);
    without it they are numbered, and
    :data:`CELLS_COUNTED` says how."""

    def name(index: int) -> str:
        text = label(index) if label is not None else f"code cell {index + 1}"
        return text[:1].upper() + text[1:]

    notes, raised, stopped = [], 0, 0
    not_run = [record.index for record in records if record.problem == NOT_RUN]
    for record in records:
        if record.problem == NOT_RUN:
            continue
        if record.problem:
            stopped += 1
            if stopped <= MAX_CELL_ERRORS_NOTED:
                notes.append(f"{name(record.index)} {record.problem}; grading went on without it.")
        elif record.error:
            raised += 1
            if raised <= MAX_CELL_ERRORS_NOTED:
                notes.append(
                    f"{name(record.index)} raised {first_line(record.error)}; grading went on "
                    f"after it."
                )
    if stopped > MAX_CELL_ERRORS_NOTED:
        notes.append(f"{stopped - MAX_CELL_ERRORS_NOTED} more code cell(s) were stopped.")
    if raised > MAX_CELL_ERRORS_NOTED:
        notes.append(f"{raised - MAX_CELL_ERRORS_NOTED} more code cell(s) raised errors.")
    if len(not_run) == 1:
        notes.append(f"{name(not_run[0])} {NOT_RUN}.")
    elif not_run and label is None:  # the cells after the deadline: the last ones
        notes.append(f"Code cells {not_run[0] + 1} to {not_run[-1] + 1} were {NOT_RUN}.")
    elif not_run:
        notes.append(
            f"{name(not_run[0])} and the {len(not_run) - 1} code cell(s) after it were {NOT_RUN}."
        )
    if notes and label is None:  # Jupyter numbers cells by when they ran ([5]), not where they are
        notes.append(CELLS_COUNTED)
    return notes


#: At most this many stopped cells are named under one question, the first this many stopped cells
#: are looked into for the names they set, and a cell longer than this (characters) is not.
MAX_STOPPED_NOTED, MAX_STOPPED_READ, MAX_SOURCE_LOOKED_AT = 3, 50, 100_000


def note_stopped_cells(
    test_files: list,
    records: list[CellRecord],
    cells: list[str],
    label: Callable[[int], str] | None = None,
) -> None:
    """Under each question that lost points, why the cells that set names it reads were stopped (a
    limit, memory, a crash) or raised: a width sweep cut by its cell's CPU limit showed as "the key
    1000 is missing", and a name whose cell raised before defining it as "not defined", not why.
    Cells are named by ``label`` (:meth:`Session.label`), else numbered. Only failed test cases'
    messages change."""
    # the cells the deadline left no time for are left out: every question after them says the
    # deadline passed
    stopped = [
        record
        for record in records
        if (record.problem and record.problem != NOT_RUN) or (record.error and not record.problem)
    ]
    stopped = stopped[:MAX_STOPPED_READ]
    stopped = [(record, _names_set_by(cells[record.index])) for record in stopped]
    for test_file in test_files:
        read = set(names_read_by([test_file]))
        lines = []
        for record, names in stopped:
            shared = sorted(names & read)
            if shared and len(lines) < MAX_STOPPED_NOTED:
                named = ", ".join(f"`{name}`" for name in shared[:5])
                cell = label(record.index) if label is not None else f"code cell {record.index + 1}"
                what = (
                    f"was {record.problem}"
                    if record.problem
                    else f"raised {first_line(record.error)}"
                )
                lines.append(
                    f"{named} may be missing or incomplete: {cell}, which sets "
                    f"{'it' if len(shared) == 1 else 'them'}, {what}."
                )
        if lines:
            for result in getattr(test_file, "test_case_results", []):
                if not result.passed:
                    result.message = "\n".join([(result.message or "").rstrip(), *lines])


def _names_set_by(source: str) -> set[str]:
    """The names a cell's code binds or may change in place (assigned, their items or attributes
    assigned, their methods called, defined, imported); none if it cannot be parsed. Read, never
    run."""
    import ast

    if len(source) > MAX_SOURCE_LOOKED_AT:
        return set()
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        lines = source.split("\n")
        # a cell magic (%%time, %%capture): its body is Python
        if lines and lines[0].lstrip().startswith("%%"):
            lines = lines[1:]
        tree = ast.parse(TransformerManager().transform_cell("\n".join(lines)))
    except Exception:  # noqa: BLE001 - whatever the cell holds (a syntax error, nesting too deep)
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif (
            isinstance(node, (ast.Subscript, ast.Attribute))
            and isinstance(node.ctx, (ast.Store, ast.Del))
            or isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
        ):
            target = node.func.value if isinstance(node, ast.Call) else node.value
            while isinstance(target, (ast.Subscript, ast.Attribute)):
                target = target.value
            if isinstance(target, ast.Name):
                names.add(target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


#: How the cell notes count cells, said beside them so that "Code cell 5" needs no guessing.
CELLS_COUNTED = (
    "(Code cells are counted from the top of the notebook, 1 for the first; markdown cells are not "
    "counted.)"
)
