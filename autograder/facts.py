"""An assignment's facts, declared once: ``assignments/NAME/questions.yaml``.

The declaration gives, for every question of the master notebook, its points,
the names it grades (in the order its ``check_<question>`` takes them), the
earlier names its hidden test also reads (``uses``), the body of its public
test, and the rows of its answers table. Everything that repeats them is made
from it:

* the test cells of each question in Otter's master-notebook format (raw
  ``# BEGIN TESTS``, the public test, the hidden test calling
  ``autograder.checks.NAME.check_<question>``, raw ``# END TESTS``), and the
  points of each raw ``# BEGIN QUESTION`` cell (:func:`apply_to_notebook`, run
  by :mod:`autograder.build` on its scratch copy);
* the answers tables of ``assignments/NAME/answers.md``
  (:func:`render_answers`, written by the build);
* the points the catalogue's tests expect (:func:`autograded_points`).

The build fails with a :class:`FactsError` naming the question when the master
notebook and the declaration disagree: a question in one and not the other,
points or test cells written in the notebook that differ from the declared
ones, a ``check_<question>`` whose parameters are not the declared names, or an
answers table without a row for a graded name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jsonschema
import nbformat
import yaml

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENTS = REPO / "assignments"
FACTS_FILE = "questions.yaml"
ANSWERS_FILE = "answers.md"

BEGIN_QUESTION = "# BEGIN QUESTION"
END_QUESTION = "# END QUESTION"
BEGIN_TESTS = "# BEGIN TESTS"
END_TESTS = "# END TESTS"

#: Opens a generated answers table in ``answers.md``; the questions it holds follow on the line.
TABLE_START = "<!-- answers table:"
TABLE_END = "<!-- end of answers table -->"
TABLE_NOTE = "generated from questions.yaml by `python -m autograder build`; edit that file"


class FactsError(ValueError):
    """The declaration is malformed, or the master notebook, the checks or ``answers.md`` disagree
    with it. The message names the assignment, the question and what was expected."""


@dataclass(frozen=True)
class Question:
    """One question as declared: ``graded`` are the names it grades, ``uses`` the earlier names its
    hidden test also reads (errors carried forward, support functions); ``check_<name>`` takes
    ``graded + uses`` in that order, and ``options`` as keywords (e.g. ``carry_forward=True``).
    ``answers`` are its rows of the answers table."""

    name: str
    points: int
    manual: bool
    graded: tuple[str, ...]
    uses: tuple[str, ...]
    public: str
    answers: tuple[dict, ...]
    options: tuple[tuple[str, object], ...] = ()

    @property
    def parameters(self) -> tuple[str, ...]:
        """What the hidden test takes from the notebook and passes to ``check_<name>``."""
        return self.graded + self.uses

    @property
    def public_parameters(self) -> tuple[str, ...]:
        """What the public test takes: the graded names, and those of ``uses`` its body reads."""
        read = set(re.findall(r"[A-Za-z_]\w*", self.public))
        return self.graded + tuple(n for n in self.uses if n in read)


@dataclass(frozen=True)
class Facts:
    """Every question of one assignment, in the master notebook's order."""

    assignment: str
    questions: tuple[Question, ...]
    answer_columns: tuple[str, ...]

    def question(self, name: str) -> Question:
        for q in self.questions:
            if q.name == name:
                return q
        raise FactsError(
            f"{self.assignment}: question {name!r} is in the master notebook but not in "
            f"assignments/{self.assignment}/{FACTS_FILE}; declared: "
            f"{', '.join(q.name for q in self.questions)}"
        )


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(
        resources.files("autograder.schemas").joinpath("questions.schema.json").read_text()
    )


def load(assignment: str, folder: Path = ASSIGNMENTS) -> Facts:
    """The declaration of ``assignment`` (``assignments/NAME/questions.yaml``), checked.

    Raises:
        FactsError: the file is missing, is not YAML, or does not follow
            ``autograder/schemas/questions.schema.json`` (the message gives the
            field, e.g. ``questions.q1_2.points``).
    """
    path = Path(folder) / assignment / FACTS_FILE
    if not path.is_file():
        raise FactsError(
            f"{assignment}: no declaration {path}; every assignment declares its questions' points "
            f"and graded names there (docs/adding_an_assignment.md)"
        )
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise FactsError(f"{path} is not valid YAML: {err}") from None
    problems = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(raw), key=str)
    if problems:
        where = ".".join(str(p) for p in problems[0].absolute_path) or "<top>"
        raise FactsError(f"{path}: {where}: {problems[0].message}")
    questions = []
    for name, q in raw["questions"].items():
        manual = bool(q.get("manual", False))
        graded = tuple(q.get("graded", ()))
        if not manual and not graded:
            raise FactsError(f"{path}: {name} is autograded (no `manual: true`) but grades no name")
        questions.append(
            Question(
                name=name,
                points=q["points"],
                manual=manual,
                graded=graded,
                uses=tuple(q.get("uses", ())),
                public=q.get("public", "").rstrip("\n"),
                answers=tuple(q.get("answers", ())),
                options=tuple(q.get("options", {}).items()),
            )
        )
    return Facts(assignment, tuple(questions), tuple(raw.get("answer_columns", ("type", "value"))))


def answer_rows(assignment: str, folder: Path = ASSIGNMENTS) -> list[tuple[tuple[str, ...], dict]]:
    """Every declared answers row as ``(names, row)``: the names written in backticks in its
    ``name`` (``"`fit(model, X, Y)`"`` gives ``fit``), and the row's columns."""
    return [
        (tuple(re.findall(r"`([A-Za-z_]\w*)", row["name"])), row)
        for q in load(assignment, folder).questions
        for row in q.answers
    ]


def autograded_points(assignment: str, folder: Path = ASSIGNMENTS) -> dict[str, int]:
    """``{question: points}`` of every autograded question: what a full-marks grading shows."""
    return {q.name: q.points for q in load(assignment, folder).questions if not q.manual}


# -- the master notebook's test cells ------------------------------------------------------------


def default_public(q: Question) -> str:
    """The public test of a question that declares none: every graded name defined."""
    names = ", ".join(f"{n}={n}" for n in q.graded)
    return f"from autograder.public import public_defined\npublic_defined({names})"


def test_cells(assignment: str, q: Question) -> list[nbformat.NotebookNode]:
    """The cells between a question's solution and its raw ``# END QUESTION``: raw
    ``# BEGIN TESTS``, the public test, the hidden test worth all its points, raw
    ``# END TESTS``."""
    public_body = q.public or default_public(q)
    public = f"def test_{q.name}_public({', '.join(q.public_parameters)}):\n" + "\n".join(
        f"    {line}" if line else "" for line in public_body.split("\n")
    )
    args = ", ".join(q.parameters)
    call = ", ".join([*q.parameters, *(f"{k}={v!r}" for k, v in q.options)])
    hidden = (
        f'""" # BEGIN TEST CONFIG\npoints: {q.points}\nhidden: true\n""" # END TEST CONFIG\n'
        f"def test_{q.name}_hidden({args}):\n"
        f"    from autograder.checks.{assignment} import check_{q.name}\n"
        f"    check_{q.name}({call})"
    )
    return [
        nbformat.v4.new_raw_cell(BEGIN_TESTS),
        nbformat.v4.new_code_cell(public),
        nbformat.v4.new_code_cell(hidden),
        nbformat.v4.new_raw_cell(END_TESTS),
    ]


def _raw(cell, mark: str) -> bool:
    return cell.cell_type == "raw" and cell.source.lstrip().startswith(mark)


def apply_to_notebook(nb: nbformat.NotebookNode, facts: Facts) -> nbformat.NotebookNode:
    """Write the declared points into every raw ``# BEGIN QUESTION`` cell of ``nb`` and the declared
    test cells before its ``# END QUESTION`` (in place; returns ``nb``). A question that already
    has points or test cells must have the declared ones.

    Raises:
        FactsError: a question of ``nb`` is not declared, or a declared one is missing from ``nb``;
            written points or test cells differ from the declaration; ``manual`` disagrees.
    """
    cells, seen, current, tests_at = [], [], None, None
    where = f"{facts.assignment}: the master notebook"
    for cell in nb.cells:
        if _raw(cell, BEGIN_QUESTION):
            settings = yaml.safe_load(cell.source.split("\n", 1)[1]) or {}
            current = facts.question(settings.get("name"))
            if "points" in settings and settings["points"] != current.points:
                raise FactsError(
                    f"{where} gives {current.name} {settings['points']} points, "
                    f"{FACTS_FILE} {current.points}; write them in {FACTS_FILE} only"
                )
            if bool(settings.get("manual", False)) != current.manual:
                raise FactsError(
                    f"{where} and {FACTS_FILE} disagree on whether {current.name} is graded by "
                    f"hand (manual: true)"
                )
            settings = {"name": current.name, "points": current.points, **settings}
            cell.source = BEGIN_QUESTION + "\n" + yaml.safe_dump(settings, sort_keys=False)
            seen.append(current.name)
            tests_at = None
        elif _raw(cell, BEGIN_TESTS) and current is not None:
            tests_at = len(cells)
        elif _raw(cell, END_QUESTION) and current is not None:
            if not current.manual:
                wanted = test_cells(facts.assignment, current)
                if tests_at is None:
                    cells.extend(wanted)
                else:
                    written = [(c.cell_type, c.source.strip()) for c in cells[tests_at:]]
                    if written != [(c.cell_type, c.source.strip()) for c in wanted]:
                        raise FactsError(
                            f"{where} writes test cells for {current.name} that differ from those "
                            f"{FACTS_FILE} declares; delete them from the notebook (the build "
                            f"writes them) or declare what they do"
                        )
            elif tests_at is not None:
                raise FactsError(f"{where} has tests for {current.name}, which is graded by hand")
            current = None
        cells.append(cell)
    missing = [q.name for q in facts.questions if q.name not in seen]
    if missing:
        raise FactsError(
            f"{facts.assignment}: {FACTS_FILE} declares {', '.join(missing)}, which the master "
            f"notebook has no raw `{BEGIN_QUESTION}` cell for"
        )
    if seen != [q.name for q in facts.questions]:
        raise FactsError(
            f"{facts.assignment}: {FACTS_FILE} declares the questions in another order than the "
            f"master notebook asks them ({', '.join(seen)})"
        )
    nb.cells = cells
    return nb


def check_signatures(facts: Facts) -> None:
    """Every autograded question's ``autograder.checks.NAME.check_<question>`` takes the declared
    ``graded + uses`` as its first positional parameters, in that order; any further positional
    parameter has a default.

    Raises:
        FactsError: naming the question, the parameters it takes and the declared names.
    """
    import importlib
    import inspect

    module = importlib.import_module(f"autograder.checks.{facts.assignment}")
    for q in facts.questions:
        if q.manual:
            continue
        check = getattr(module, f"check_{q.name}", None)
        if check is None:
            raise FactsError(f"autograder/checks/{facts.assignment}.py has no check_{q.name}")
        positional = [
            p
            for p in inspect.signature(check).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        taken = tuple(p.name for p in positional[: len(q.parameters)])
        rest_required = [p.name for p in positional[len(q.parameters) :] if p.default is p.empty]
        if taken != q.parameters or rest_required:
            raise FactsError(
                f"check_{q.name} in autograder/checks/{facts.assignment}.py takes "
                f"({', '.join(p.name for p in positional)}), but {FACTS_FILE} declares "
                f"{q.name}'s graded names and uses as ({', '.join(q.parameters)})"
            )


# -- the answers tables ----------------------------------------------------------------------------


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def answers_table(facts: Facts, questions: list[str]) -> str:
    """The Markdown table of ``questions``' declared rows: question, points, name and the declared
    columns; the question and its points on its first row.

    Raises:
        FactsError: a graded name of one of ``questions`` has no row (the name in backticks).
    """
    columns = ("question", "points", "name", *facts.answer_columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for name in questions:
        q = facts.question(name)
        shown = " ".join(row["name"] for row in q.answers)
        unlisted = [n for n in q.graded if not re.search(rf"`{re.escape(n)}\b", shown)]
        if unlisted:
            raise FactsError(
                f"{facts.assignment}: {FACTS_FILE} gives {name} no answers row for "
                f"{', '.join(unlisted)} (its `name` in backticks)"
            )
        points = f"{q.points} (manual)" if q.manual else str(q.points)
        for i, row in enumerate(q.answers or ({"name": ""},)):
            first = (name, points) if i == 0 else ("", "")
            values = [row.get(c, "") for c in facts.answer_columns]
            lines.append("| " + " | ".join(_cell(v) for v in (*first, row["name"], *values)) + " |")
    return "\n".join(lines)


def render_answers(facts: Facts, text: str) -> str:
    """``text`` (an ``answers.md``) with every generated table made again from ``facts``. Each
    table sits between a ``<!-- answers table: q1 q2 ... -->`` line, which names its questions, and
    :data:`TABLE_END`; every autograded question appears in exactly one table, a question graded by
    hand in one or none.

    Raises:
        FactsError: a table is not closed, a question is in no table or in two.
    """
    out, placed, lines = [], [], iter(text.split("\n"))
    for line in lines:
        if not line.startswith(TABLE_START):
            out.append(line)
            continue
        names = line[len(TABLE_START) :].split("(")[0].replace("-->", "").split()
        placed.extend(names)
        out.append(f"{TABLE_START} {' '.join(names)} ({TABLE_NOTE}) -->")
        out.append(answers_table(facts, names))
        for rest in lines:
            if rest == TABLE_END:
                break
        else:
            raise FactsError(f"{facts.assignment}: {ANSWERS_FILE} opens a table it never closes")
        out.append(TABLE_END)
    declared = {q.name for q in facts.questions}
    autograded = [q.name for q in facts.questions if not q.manual]
    unplaced = [n for n in autograded if n not in placed]
    twice = sorted({n for n in placed if placed.count(n) > 1})
    if unplaced or twice or not set(placed) <= declared:
        raise FactsError(
            f"{facts.assignment}: the tables of {ANSWERS_FILE} should hold every autograded "
            f"question once ({', '.join(autograded)}); they hold {', '.join(placed) or 'none'}"
        )
    return "\n".join(out)


def write_answers(facts: Facts, folder: Path = ASSIGNMENTS) -> Path:
    """Rewrite the generated tables of ``assignments/NAME/answers.md``; returns its path."""
    path = Path(folder) / facts.assignment / ANSWERS_FILE
    if not path.is_file():
        raise FactsError(
            f"{facts.assignment}: no {path}; write its prose and one `{TABLE_START} q1 q2 -->` "
            f"line followed by `{TABLE_END}` where the table goes"
        )
    text = path.read_text()
    rendered = render_answers(facts, text)
    if rendered != text:
        path.write_text(rendered)
    return path
