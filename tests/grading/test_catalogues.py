"""Every assignment's autograder grades: full marks, zero, and exactly the points a mistake costs.

Found, not listed: each assignment of ``assignments/`` with a catalogue
``tests/fixtures/NAME/catalogue.py`` is tested here, its points read from its
declaration (``assignments/NAME/questions.yaml``, :mod:`autograder.facts`).
Every submission goes through the real autograder zip with the hardened judge
(``autograder.grade``), as Gradescope would run it: the solution (three
times), the blank student notebook, every ``WRONG``, ``ALTERNATIVE`` and
``LOSING`` variant and the bundled examples, in one batch per assignment
(:func:`tests.grading.common.graded_catalogue`); each test reads its own row.
An assignment's tests are one work unit of pytest-xdist (``tests/conftest.py``), so one worker
grades its batch.
"""

from __future__ import annotations

import pytest

from autograder.facts import autograded_points
from tests.grading import common

pytestmark = pytest.mark.grading

ASSIGNMENTS = common.with_catalogue()


def each(name: str, values=None, ids=None):
    """Parameters of one assignment's tests, their ids starting with ``name`` (which
    ``tests/conftest.py``'s ``work_unit`` reads to run them on one worker): ``(name,)`` alone, or
    ``(name, value)`` for each of ``values``."""
    if values is None:
        return [pytest.param(name, id=name)]
    return [
        pytest.param(name, *(v if isinstance(v, tuple) else (v,)), id=f"{name}-{ids(v)}")
        for v in values
    ]


def every(attribute: str, ids=lambda v: v.name):
    return [
        p
        for name in ASSIGNMENTS
        for p in each(name, getattr(common.catalogue(name), attribute, []), ids)
    ]


def first_name(pair) -> str:
    return pair[0].name


@pytest.fixture
def graded(request, tmp_path_factory, answers_folder):
    """The batch of the test's assignment (its first parameter)."""
    name = request.node.callspec.params["name"]
    return common.graded_catalogue(name, tmp_path_factory, answers_folder)


ALL = [p for name in ASSIGNMENTS for p in each(name)]


def test_every_master_notebook_has_a_catalogue():
    from autograder.build import available

    assert ASSIGNMENTS == available(), (
        "assignments without tests/fixtures/NAME/catalogue.py: "
        f"{sorted(set(available()) - set(ASSIGNMENTS))}"
    )


@pytest.mark.parametrize("name", ALL)
def test_the_solutions_gradings_load_every_reference_value_install_computes(name, graded):
    common.assert_solution_computes_no_reference_value(graded)


@pytest.mark.parametrize("name", ALL)
def test_solution_scores_full_marks(name, graded):
    common.assert_solution_scores_full_marks(graded["solution"], autograded_points(name))


@pytest.mark.parametrize("name", ALL)
def test_the_solution_graded_three_times_shows_the_same_scores_and_messages(name, graded):
    common.assert_regrades_identical(graded)


@pytest.mark.parametrize("name", ALL)
def test_blank_student_notebook_scores_zero_without_crashing(name, graded):
    common.assert_blank_scores_zero(graded["blank"], autograded_points(name))


@pytest.mark.parametrize("name, variant", every("WRONG"))
def test_wrong_submission_loses_exactly_its_question(name, variant, graded):
    common.assert_loses_exactly(
        graded[variant.name],
        autograded_points(name),
        (variant.loses,) + variant.also_loses,
        variant.why,
    )


@pytest.mark.parametrize("name, variant", every("ALTERNATIVE"))
def test_alternative_correct_submission_scores_full_marks(name, variant, graded):
    common.assert_full_marks(graded[variant.name], autograded_points(name), variant.why)


@pytest.mark.parametrize("name, variant, losing", every("LOSING", first_name))
def test_a_mistake_costs_exactly_the_questions_it_names(name, variant, losing, graded):
    """Errors carried forward (a wrong value costs its own question only) and special-cased or
    made-up functions (they gain nothing): each loses exactly ``losing``."""
    common.assert_loses_exactly(graded[variant.name], autograded_points(name), losing, variant.why)


@pytest.mark.parametrize("name, example", every("EXAMPLES", ids=str))
def test_bundled_examples_lose_the_points_of_their_mistakes(name, example, graded):
    """The demo's partly wrong notebooks lose exactly their mistakes' questions."""
    module = common.catalogue(name)
    losing = {v.loses for v in module.WRONG if v.name in module.EXAMPLES[example]}
    common.assert_loses_exactly(
        graded[example], autograded_points(name), sorted(losing), f"the bundled example {example}"
    )


@pytest.mark.parametrize("name", ALL)
def test_committed_student_version_is_up_to_date(name, tmp_path_factory, answers_folder, repo):
    built = common.build_once(name, tmp_path_factory, answers_folder)
    common.assert_student_version_up_to_date(name, built.student_dir, repo)
