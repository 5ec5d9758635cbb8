"""What the end-to-end grading tests share.

``tests/grading/test_catalogues.py`` finds every assignment with a catalogue
(``tests/fixtures/NAME/catalogue.py``), builds it once into a scratch folder,
grades the solution, the blank student notebook and the catalogue in one batch
through the hardened judge (two at a time, :func:`graded_catalogue`), then
reads one row per test. ``tests/grading/test_NAME.py`` adds what is particular
to one assignment, on the same batch (one work unit of pytest-xdist with it,
``tests/conftest.py``: the same worker). The assertions live here, each with its own message.
"""

from __future__ import annotations

import filecmp
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.build import BuiltAssignment
from autograder.grade import grade_many
from autograder.scores import GradeResult
from tests.fixtures.submissions import Variant, apply
from tests.session_builds import build_once

REPO = Path(__file__).resolve().parents[2]

#: The solution is graded this many more times in every catalogue batch, under these labels: three
#: gradings of the same notebook must give the same scores and the same messages
#: (:func:`assert_regrades_identical`).
REGRADES = ("solution_regrade_1", "solution_regrade_2")


def grade_catalogue(
    built: BuiltAssignment,
    variants: list[Variant],
    tmp_path_factory,
    extra: dict[str, Path] | None = None,
) -> dict[str, GradeResult]:
    """The solution (``"solution"``, and again as each of :data:`REGRADES`), the blank student
    notebook (``"blank"``), every variant (by its name) and ``extra`` submissions, graded in one
    batch: ``{label: GradeResult}``. The judges share an answers folder that
    ``python -m autograder.answers_cache fill`` filled first, as ``docker/install.sh`` fills
    Gradescope's (:func:`assert_solution_computes_no_reference_value` checks that it holds what the
    solution's gradings read)."""
    work = tmp_path_factory.mktemp(f"{built.name}_submissions")
    answers_folder = work / "answers"
    # as docker/install.sh fills it: in a process of its own (this one may hold the values in
    # memory already, and would then not write them)
    subprocess.run(
        [sys.executable, "-m", "autograder.answers_cache", "fill", built.name, str(answers_folder)],
        check=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        timeout=900,
    )
    subs = {"solution": built.solution, "blank": built.student_dir / f"{built.name}.ipynb"}
    for label in REGRADES:  # under its own name: a batch grades each file once
        subs[label] = work / f"{label}.ipynb"
        shutil.copyfile(built.solution, subs[label])
    for variant in variants:
        subs[variant.name] = apply(built.solution, variant, work / f"{variant.name}.ipynb")
    subs.update(extra or {})
    results = grade_many(
        built.autograder_zip,
        list(subs.values()),
        work / "graded",
        jobs=2,
        progress=False,
        answers_dir=answers_folder,
    )
    return dict(zip(subs, results))


def with_catalogue() -> list[str]:
    """Every assignment of ``assignments/`` that has ``tests/fixtures/NAME/catalogue.py``."""
    from autograder.build import available

    return [n for n in available() if (REPO / "tests" / "fixtures" / n / "catalogue.py").is_file()]


def catalogue(name: str):
    """``tests.fixtures.NAME.catalogue``: ``WRONG`` and ``ALTERNATIVE`` (lists of
    :class:`Variant`), and optionally ``LOSING`` (``(variant, questions it loses)`` pairs),
    ``EXAMPLES`` (``{bundled example: names of the WRONG variants it combines}``, notebooks in
    ``assignments/NAME/examples/``) and ``grading_environment`` (a context manager the batch is
    graded in)."""
    return importlib.import_module(f"tests.fixtures.{name}.catalogue")


def group(name: str) -> str:
    """The pytest-xdist work unit of ``name``'s gradings (``tests/conftest.py``): its tests run on
    one worker, which grades its catalogue once."""
    return f"grading_{name}"


#: The catalogue batches this process graded, by assignment.
_GRADED: dict[str, dict[str, GradeResult]] = {}


def graded_catalogue(name: str, tmp_path_factory, answers_folder: Path) -> dict[str, GradeResult]:
    """``name``'s catalogue graded once per worker (:func:`grade_catalogue`), with its bundled
    examples under their own names."""
    if name not in _GRADED:
        from contextlib import nullcontext

        module = catalogue(name)
        built = build_once(name, tmp_path_factory, answers_folder)
        losing = getattr(module, "LOSING", [])
        examples = {
            example: REPO / "assignments" / name / "examples" / f"{example}.ipynb"
            for example in getattr(module, "EXAMPLES", {})
        }
        with getattr(module, "grading_environment", nullcontext)():
            _GRADED[name] = grade_catalogue(
                built,
                module.WRONG + module.ALTERNATIVE + [v for v, _ in losing],
                tmp_path_factory,
                extra=examples,
            )
    return _GRADED[name]


def shown(result: GradeResult) -> dict[str, tuple[float | None, str]]:
    """Every test's score and output in ``result``'s results file, as the student sees them."""
    results = json.loads(Path(result.results_path).read_text())
    return {test["name"]: (test.get("score"), test.get("output", "")) for test in results["tests"]}


def assert_regrades_identical(graded: dict[str, GradeResult]) -> None:
    """The solution's gradings in one batch (``"solution"`` and :data:`REGRADES`) show the same
    scores and messages for every test: a score depends on the notebook alone."""
    first = shown(graded["solution"])
    for label in REGRADES:
        assert shown(graded[label]) == first, f"{label} differs from the solution's first grading"


def assert_solution_computes_no_reference_value(graded: dict[str, GradeResult]) -> None:
    """Each grading of the solution loaded every reference value it read from the folder
    :func:`autograder.answers_cache.fill` filled (its log notes each value loaded or computed):
    what ``docker/install.sh`` computes is all that a correct notebook's grading needs. The
    solution is its judge's first submission, so its log notes every value; a regrade by a judge
    that holds them already in memory notes none."""
    for label in ("solution", *REGRADES):
        log = (Path(graded[label].results_path).parent / "grading.log").read_text()
        notes = [line for line in log.splitlines() if line.startswith("answers cache:")]
        computed = [line for line in notes if not line.startswith("answers cache: loaded ")]
        assert (notes or label != "solution") and not computed, (
            f"{label}: the grading should only load reference values, but its log says {notes}"
        )


def expected_scores(
    points: dict[str, int], losing: tuple[str, ...] | set[str] = ()
) -> dict[str, tuple[float, float]]:
    """Every question's ``(score, possible)``: nothing for the questions in ``losing``, full points
    elsewhere."""
    return {q: (0.0 if q in losing else float(p), float(p)) for q, p in points.items()}


def test_output(actual: GradeResult, question: str) -> str:
    """What the results file shows the student for ``question`` (the test whose name starts with
    it)."""
    results = json.loads(actual.results_path.read_text())
    return next(t for t in results["tests"] if t["name"].startswith(question)).get("output", "")


test_output.__test__ = False  # a helper, not a pytest test


def assert_solution_scores_full_marks(actual: GradeResult, points: dict[str, int]) -> None:
    assert actual.error is None, actual.error
    assert actual.scores == expected_scores(points), f"solution lost points: {actual.scores}"
    results = json.loads(actual.results_path.read_text())
    public = next(t for t in results["tests"] if t["name"] == "Public Tests")
    assert public.get("status") == "passed", (
        f"the solution fails a public test: {public.get('output')}"
    )


def assert_blank_scores_zero(
    actual: GradeResult, points: dict[str, int], says_placeholder: bool = True
) -> None:
    """The blank student notebook: graded without crashing, every question present, 0 points; with
    ``says_placeholder``, the messages name the unfilled ``...``."""
    assert actual.error is None, f"the blank notebook crashed the grader: {actual.error}"
    assert set(actual.scores) == set(points), "every question should appear in the blank's results"
    assert actual.total == 0.0, f"the blank notebook earned points: {actual.scores}"
    if says_placeholder:
        results = json.loads(actual.results_path.read_text())
        messages = " ".join(t.get("output", "") for t in results["tests"])
        assert "still `...`" in messages, (
            "a blank answer should be reported as the unfilled placeholder"
        )


def assert_loses_exactly(actual: GradeResult, points: dict[str, int], losing, why: str) -> None:
    """``actual`` loses every point of the questions in ``losing`` and keeps all the others."""
    losing = (losing,) if isinstance(losing, str) else tuple(losing)
    assert actual.error is None, actual.error
    assert actual.scores == expected_scores(points, losing), (
        f"{why}: expected to lose {list(losing)} only, got {actual.scores}"
    )


def assert_full_marks(actual: GradeResult, points: dict[str, int], why: str) -> None:
    assert actual.error is None, actual.error
    assert actual.total == sum(points.values()), f"{why}: lost {actual.scores}"


def assert_student_version_up_to_date(name: str, fresh: Path, repo: Path) -> None:
    """``student_template/NAME/`` is what building the master notebook writes now."""
    committed = repo / "student_template" / name
    compared = filecmp.dircmp(committed, fresh)
    assert not compared.left_only and not compared.right_only, (
        f"files differ: {compared.left_only} / {compared.right_only}; run `python -m autograder "
        f"build {name}`"
    )
    _, mismatch, errors = filecmp.cmpfiles(committed, fresh, compared.common_files, shallow=False)
    assert not mismatch and not errors, (
        f"out of date: {mismatch}; run `python -m autograder build {name}` and commit "
        f"student_template/"
    )
