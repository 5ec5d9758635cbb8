"""Unit tests for the hidden-test helpers in ``autograder/checks/where_mlps_fail.py``.

The check functions are called directly, without Otter: with the reference
answers and functions they must pass; with one realistic mistake each they
must raise :class:`CheckFailure` naming the student's variable and never
showing the expected value. The property checks (Hypothesis, derandomized)
must catch the classic wrong functions and report the same message on every
run.
"""

from __future__ import annotations

import inspect

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from autograder.checks import CheckFailure  # noqa: E402
from autograder.checks import where_mlps_fail as checks  # noqa: E402
from autograder.checks.properties import GRADING  # noqa: E402
from reference import where_mlps_fail as ref  # noqa: E402
from tests.checks.common import failures  # noqa: E402

REFERENCE_FUNCTIONS = {
    "slide": ref.slide,
    "peak": ref.peak,
    "window_sum": ref.window_sum,
    "compare_shared": ref.compare_shared,
}

QUESTION_CHECKS = sorted(name for name in dir(checks) if name.startswith("check_q"))

#: The property checks a question check runs on the student's function. They
#: are tested directly below; the question-level tests replace them by a
#: recorder (each costs seconds), and check that the student's function is
#: what the question hands on.
PROPERTY_CHECKS = {
    "check_slide_function": "slide",
    "check_window_sum_function": "window_sum",
    "check_peak_function": "peak",
    "check_compare_shared_function": "compare_shared",
}


@pytest.fixture(scope="module")
def answers() -> dict:
    """The reference answers (loads the data and the models once per process)."""
    return ref.answers()


def lesson_figure(x, vertical, horizontal, *, shared_scale=True, n_axes=3, limit=None):
    """edges.png drawn as the lesson's solution draws it (pyplot, Agg backend).

    ``shared_scale=False`` gives each map its own symmetric scale; ``n_axes``
    other than 3 adds empty Axes (the trousers shown again in the extras);
    ``limit`` replaces the shared scale's limit (the vertical map's largest
    absolute value).
    """
    edges, flat_edges = F.conv2d(x, vertical), F.conv2d(x, horizontal)
    fig, axes = plt.subplots(1, n_axes, figsize=(4 * n_axes, 4))
    axes[0].imshow(x[0, 0].numpy(), cmap="gray")
    limit = edges.abs().max().item() if limit is None else limit
    for ax, m in ((axes[1], edges), (axes[2], flat_edges)):
        own = m.abs().max().item()
        scale = limit if shared_scale else own
        ax.imshow(m[0, 0].numpy(), cmap="coolwarm", vmin=-scale, vmax=scale)
    for ax in axes[3:]:
        ax.imshow(x[0, 0].numpy(), cmap="gray")
    return fig


@pytest.fixture
def property_calls(monkeypatch) -> dict:
    """Replace the property checks by recorders: ``{function name: the function passed}``."""
    calls = {}
    for check_name, function_name in PROPERTY_CHECKS.items():
        def record(func, _name=function_name):
            calls[_name] = func

        monkeypatch.setattr(checks, check_name, record)
    return calls


@pytest.fixture
def figure_factory():
    """Build lesson figures and close every one of them after the test."""
    made = []

    def make(*args, **kwargs):
        fig = lesson_figure(*args, **kwargs)
        made.append(fig)
        return fig

    yield make
    for fig in made:
        plt.close(fig)


def reference_arguments(check, answers, figure_factory) -> dict:
    """The keyword arguments of ``check`` filled from the reference solution."""
    kwargs = {}
    for name in inspect.signature(check).parameters:
        if name in REFERENCE_FUNCTIONS:
            kwargs[name] = REFERENCE_FUNCTIONS[name]
        elif name == "fig":
            kwargs[name] = figure_factory(answers["x"], answers["vertical"], answers["horizontal"])
        else:
            assert name in answers, (
                f"{check.__name__} takes `{name}`, which the reference answers lack")
            kwargs[name] = answers[name]
    return kwargs


def failure_message(func, *args, **kwargs) -> str:
    with pytest.raises(CheckFailure) as info:
        func(*args, **kwargs)
    return str(info.value)


def assert_reveals_nothing(message: str, *values) -> None:
    """Fail if ``message`` shows any of ``values`` (as repr, or a float to 4 or 3 decimals)."""
    for value in values:
        shown = {repr(value)}
        if isinstance(value, float):
            shown |= {f"{value:.4f}", f"{value:.3f}"}
        for text in shown:
            assert text not in message, (
                f"the message reveals the expected value {text}: {message!r}"
            )


# ---------------------------------------------------------------- the reference passes


def test_every_question_check_is_covered():
    actual = set(QUESTION_CHECKS)
    expected = {
        f"check_{q}"
        for q in (
            "q1_1",
            "q1_2",
            "q1_3",
            "q1_4",
            "q1_5",
            "q2_1",
            "q2_2",
            "q2_3",
            "q2_4",
            "q2_5",
            "q3_1",
            "q3_2",
            "q3_3",
            "q3_4",
            "q3_5",
            "q3_6",
            "q3_7",
            "q5",
        )
    }
    assert actual == expected, (
        f"question checks changed: extra {actual - expected}, missing {expected - actual}"
    )


@pytest.mark.parametrize("check_name", QUESTION_CHECKS)
def test_reference_answers_pass(check_name, answers, figure_factory, property_calls):
    check = getattr(checks, check_name)
    kwargs = reference_arguments(check, answers, figure_factory)
    actual = check(**kwargs)
    assert actual is None, (
        f"{check_name} should pass the reference solution silently, returned {actual!r}"
    )
    expected_calls = {name: kwargs[name] for name in REFERENCE_FUNCTIONS if name in kwargs}
    assert property_calls == expected_calls, (
        f"{check_name} should run the property check on each function it takes: ran "
        f"{sorted(property_calls)}"
    )


@pytest.mark.parametrize(
    "check, function",
    [
        (checks.check_slide_function, ref.slide),
        (checks.check_window_sum_function, ref.window_sum),
        (checks.check_peak_function, ref.peak),
        (checks.check_compare_shared_function, ref.compare_shared),
    ],
    ids=["slide", "window_sum", "peak", "compare_shared"],
)
def test_reference_functions_pass_the_property_checks(check, function):
    actual = check(function)
    assert actual is None, (
        f"{check.__name__} should pass the reference function, returned {actual!r}"
    )


def test_answers_with_a_plain_list_for_a_shape_pass(answers):
    # torch.Size, tuple or list: all are shapes (the contract accepts each)
    actual = checks.check_q2_2(answers["conv_parameters"], list(answers["maps_shape"]))
    assert actual is None, "a list shape should pass like a tuple"


# ---------------------------------------------------------------- one realistic mistake per
# question


def _filter3_without_bias(answers) -> float:
    """Filter 3 at row 12, column 9 of the sneaker, summed by hand but without the bias."""
    from autograder.data import as_tensors, fashion_mnist

    images, _ = as_tensors(fashion_mnist(train=False))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(42)
        conv = nn.Conv2d(1, 16, kernel_size=5)
    value = (conv.weight[3, 0] * images[9, 0, 12:17, 9:14]).sum().item()
    assert abs(value - answers["filter3_by_hand"]) > 1e-3, (
        "precondition: the bias should change the sum"
    )
    return value


def _percent(table: dict) -> dict:
    return {k: tuple(100 * v for v in pair) for k, pair in table.items()}


# (check, the argument made wrong, how the wrong value is made from the answers,
#  the name the message must contain, the expected values it must not show)
MISTAKES = [
    (
        "check_q1_1",
        "trouser_weight_peak",
        lambda a: (
            (a["trouser_weight_peak"][0][1], a["trouser_weight_peak"][0][0]),
            a["trouser_weight_peak"][1],
        ),
        "trouser_weight_peak",
        lambda a: [a["trouser_weight_peak"][0]],
    ),
    (
        "check_q1_2",
        "scrambled_accuracy",
        lambda a: a["saved_accuracy_on_mixed"],
        "scrambled_accuracy",
        lambda a: [a["scrambled_accuracy"]],
    ),
    (
        "check_q1_3",
        "shift_accuracies",
        lambda a: {k: 100 * v for k, v in a["shift_accuracies"].items()},
        "shift_accuracies",
        lambda a: list(a["shift_accuracies"].values()),
    ),
    (
        "check_q1_4",
        "slide_accuracy",
        lambda a: a["shift_accuracies"][(3, 2)],
        "slide_accuracy",
        lambda a: [a["slide_accuracy"]],
    ),
    (
        "check_q1_5",
        "falls_further",
        lambda a: "linear" if a["falls_further"] == "network" else "network",
        "falls_further",
        lambda a: [a["falls_further"]],
    ),
    (
        "check_q2_1",
        "class_accuracy",
        lambda a: _percent(a["class_accuracy"]),
        "class_accuracy",
        lambda a: [v for pair in a["class_accuracy"].values() for v in pair],
    ),
    (
        "check_q2_2",
        "maps_shape",
        lambda a: (1, 16, 28, 28),
        "maps_shape",
        lambda a: [tuple(a["maps_shape"])],
    ),
    (
        "check_q2_3",
        "filter3_by_hand",
        _filter3_without_bias,
        "filter3_by_hand",
        lambda a: [a["filter3_by_hand"]],
    ),
    (
        "check_q2_4",
        "down_whole_height",
        lambda a: not a["down_whole_height"],
        "down_whole_height",
        lambda a: [],
    ),
    (
        "check_q2_5",
        "cost_table",
        lambda a: [(s, s * s * 10, p, m) for s, _, p, m in a["cost_table"]],
        "cost_table",
        lambda a: [a["cost_table"][0][1], a["cost_table"][0]],
    ),
    ("check_q3_1", "vertical", lambda a: -a["vertical"], "vertical", lambda a: []),
    (
        "check_q3_2",
        "edges",
        lambda a: F.conv2d(a["x"], a["vertical"], padding=1),
        "edges",
        lambda a: [a["edges_peak"][1], a["edges_peak"][3]],
    ),
    (
        "check_q3_3",
        "edges_move_with",
        lambda a: not a["edges_move_with"],
        "edges_move_with",
        lambda a: [],
    ),
    (
        "check_q3_4",
        "padded_shape",
        lambda a: (1, 1, 26, 26),
        "padded_shape",
        lambda a: [tuple(a["padded_shape"])],
    ),
    (
        "check_q3_5",
        "absolute_sums",
        lambda a: tuple(reversed(a["absolute_sums"])),
        # the swapped pair holds the expected numbers; the message shows neither
        "absolute_sums",
        lambda a: [],
    ),
    # rounded to 2 decimals, not 4 (to 3, the lesson's 0.9999 and 0.8560 give 1.0 and 0.856, within
    # the 1e-4 that values printed to 4 decimals are allowed)
    (
        "check_q3_7",
        "trouser_verdicts",
        lambda a: [(c, round(p, 2)) for c, p in a["trouser_verdicts"]],
        "trouser_verdicts",
        lambda a: [p for _, p in a["trouser_verdicts"]],
    ),
    (
        "check_q5",
        "counts",
        lambda a: a["counts"][::2],
        "counts",
        lambda a: [a["counts"], a["total_count"]],
    ),
]


def test_every_question_has_a_mistake():
    actual = {m[0] for m in MISTAKES} | {"check_q3_6"}  # q3_6 has its own tests below
    expected = set(QUESTION_CHECKS)
    assert actual == expected, f"questions without a mistake test: {expected - actual}"


@pytest.mark.parametrize(
    "check_name, argument, make_wrong, named, hidden",
    MISTAKES,
    ids=[f"{m[0]}-{m[1]}" for m in MISTAKES],
)
def test_a_realistic_mistake_fails_naming_the_variable(
    check_name, argument, make_wrong, named, hidden, answers, figure_factory, property_calls
):
    check = getattr(checks, check_name)
    kwargs = reference_arguments(check, answers, figure_factory)
    kwargs[argument] = make_wrong(answers)
    actual = failure_message(check, **kwargs)
    assert f"`{named}" in actual, (
        f"{check_name} with a wrong `{argument}`: the message should name it: {actual!r}"
    )
    assert "tensor(" not in actual, f"the message prints a tensor: {actual!r}"
    expected_hidden = [v for v in hidden(answers) if not isinstance(v, bool)]
    assert_reveals_nothing(actual, *expected_hidden)


def test_q3_later_parts_carry_a_wrong_filter_forward(answers, property_calls):
    # a sign-flipped vertical costs q3_1 only: edges computed from it pass q3_2
    vertical = -answers["vertical"]
    edges = F.conv2d(answers["x"], vertical)
    actual = checks.check_q3_2(
        ref.peak, edges, ref.peak(edges), answers["x"], vertical, answers["horizontal"]
    )
    assert actual is None, "q3_2 should grade the student's edges against the student's own filter"
    expected_message = failure_message(
        checks.check_q3_2,
        ref.peak,
        edges,
        ref.peak(edges),
        answers["x"],
        answers["vertical"],
        answers["horizontal"],
    )
    assert "`edges`" in expected_message, (
        f"the same edges against the reference filter must fail: {expected_message!r}"
    )


def _edge_answers(x, vertical, horizontal) -> dict:
    """The later edges answers a student computes from ``x`` and the two filters, as the lesson
    does."""
    edges, flat_edges = F.conv2d(x, vertical), F.conv2d(x, horizontal)
    return {
        "edges": edges,
        "edges_peak": ref.peak(edges),
        "edges_moved": F.conv2d(torch.roll(x, 3, 3), vertical),
        "edges_move_with": True,
        "flat_edges": flat_edges,
        "absolute_sums": (
            round(edges.abs().sum().item(), 2),
            round(flat_edges.abs().sum().item(), 2),
        ),
    }


def _later_edges_failures(
    x, vertical, horizontal, given: dict, figure_factory
) -> dict[str, str | None]:
    """Each later edges check (q3_2, q3_3, q3_5, q3_6) on ``given`` answers: ``{check: failure
    message or None}``."""
    # drawn as the student would, from float32
    fig = figure_factory(x, vertical.float(), horizontal.float())
    calls = {
        "q3_2": lambda: checks.check_q3_2(
            ref.peak, given["edges"], given["edges_peak"], x, vertical, horizontal
        ),
        "q3_3": lambda: checks.check_q3_3(
            given["edges_moved"],
            ref.compare_shared,
            given["edges_move_with"],
            x,
            vertical,
            horizontal,
        ),
        "q3_5": lambda: checks.check_q3_5(
            given["flat_edges"], given["absolute_sums"], x, vertical, horizontal
        ),
        "q3_6": lambda: checks.check_q3_6(fig, x, vertical, horizontal),
    }
    return failures(calls)


#: Filters a student may write by mistake: each must be carried forward (it costs q3_1 only).
SENSIBLE_FILTERS = {
    "sign_flipped": lambda v, h: (-v, -h),
    "swapped": lambda v, h: (h, v),
    "sobel": lambda v, h: (
        v * torch.tensor([1.0, 2.0, 1.0]).view(1, 1, 3, 1),
        h * torch.tensor([1.0, 2.0, 1.0]).view(1, 1, 1, 3),
    ),
    "divided_by_6": lambda v, h: (v / 6, h / 6),
    "float64": lambda v, h: (v.double(), h.double()),
    "same_filter_twice": lambda v, h: (v, v),
}


@pytest.mark.parametrize("make", SENSIBLE_FILTERS.values(), ids=SENSIBLE_FILTERS.keys())
def test_q3_a_sensible_wrong_filter_costs_q3_1_only(make, answers, figure_factory, property_calls):
    x = answers["x"]
    vertical, horizontal = make(answers["vertical"], answers["horizontal"])
    used = checks._edge_inputs(vertical, horizontal)
    assert torch.equal(used[1], vertical.float()) and torch.equal(used[2], horizontal.float()), (
        "a sensible student filter should be carried forward into the later edges questions"
    )
    own = _edge_answers(x, vertical.float(), horizontal.float())
    actual = _later_edges_failures(x, vertical, horizontal, own, figure_factory)
    expected = {"q3_2": None, "q3_3": None, "q3_5": None, "q3_6": None}
    assert actual == expected, (
        f"answers computed from the student's own filter should pass: {actual}"
    )
    message = failure_message(checks.check_q3_1, x, answers["trouser_class"], vertical, horizontal)
    assert "`vertical`" in message or "`horizontal`" in message, (
        f"the wrong filter should still cost q3_1: {message!r}"
    )


#: Filters a cheater may write so that every later answer is trivially zero (or NaN, or
#: overflowing).
DEGENERATE_FILTERS = {
    "zeros": lambda v: torch.zeros(1, 1, 3, 3),
    "constant": lambda v: torch.full((1, 1, 3, 3), 0.5),
    "constant_plus_noise": lambda v: 1.0 + 1e-6 * v,
    "epsilon": lambda v: 1e-9 * v,
    "below_one_percent": lambda v: 0.009 * v,
    "nan": lambda v: torch.where(v > 0, torch.tensor(float("nan")), v),
    "inf": lambda v: torch.where(v > 0, torch.tensor(float("inf")), v),
    "overflowing_map": lambda v: 1e38 * v,
    "integer": lambda v: v.long(),
    "wrong_shape": lambda v: v[0],
    "not_a_tensor": lambda v: v.tolist(),
    "requires_grad_zeros": lambda v: torch.zeros(1, 1, 3, 3, requires_grad=True),
}


@pytest.mark.parametrize("make", DEGENERATE_FILTERS.values(), ids=DEGENERATE_FILTERS.keys())
def test_q3_a_degenerate_filter_is_replaced_by_the_reference(make, answers):
    x, vertical, horizontal = checks._edge_inputs(
        make(answers["vertical"]), make(answers["horizontal"])
    )
    actual = (
        torch.equal(x, answers["x"]),
        torch.equal(vertical, answers["vertical"]),
        torch.equal(horizontal, answers["horizontal"]),
    )
    assert actual == (True, True, True), (
        f"(x, vertical, horizontal) should be the reference's, got {actual}"
    )


def test_q3_one_degenerate_filter_keeps_the_other_sensible_one(answers):
    _, vertical, horizontal = checks._edge_inputs(-answers["vertical"], torch.zeros(1, 1, 3, 3))
    actual = (
        torch.equal(vertical, -answers["vertical"]),
        torch.equal(horizontal, answers["horizontal"]),
    )
    assert actual == (True, True), f"(own vertical kept, reference horizontal used): got {actual}"


@pytest.mark.parametrize("name", ["zeros", "epsilon", "constant"])
def test_q3_degenerate_chain_loses_every_later_edges_question(
    name, answers, figure_factory, property_calls
):
    """The hostile submission: degenerate x and filters, later answers computed from them: all four
    checks fail."""
    x = torch.zeros(1, 1, 28, 28) if name == "zeros" else answers["x"]
    make = DEGENERATE_FILTERS[name]
    vertical, horizontal = make(answers["vertical"]), make(answers["horizontal"])
    own = _edge_answers(x, vertical, horizontal)
    actual = _later_edges_failures(x, vertical, horizontal, own, figure_factory)
    passed = [q for q, message in actual.items() if message is None]
    assert passed == [], (
        f"{name}: answers built on degenerate inputs should not pass {passed}: {actual}"
    )
    expected_names = {
        "q3_2": "`edges`",
        "q3_3": "`edges_moved`",
        "q3_5": "`flat_edges`",
        "q3_6": "`fig.axes[",
    }
    for q, part in expected_names.items():
        assert part in actual[q], f"{name}: the {q} message should name {part}: {actual[q]!r}"


def test_q3_the_students_image_is_never_carried_forward(answers, figure_factory, property_calls):
    # an image that is not test image 2 costs q3_1; later parts use the reference image
    x = answers["x"].flip(3)
    actual = torch.equal(
        checks._edge_inputs(answers["vertical"], answers["horizontal"])[0], answers["x"]
    )
    assert actual, "_edge_inputs should always give the reference x"
    own = _edge_answers(x, answers["vertical"], answers["horizontal"])
    message = failure_message(
        checks.check_q3_2,
        ref.peak,
        own["edges"],
        own["edges_peak"],
        x,
        answers["vertical"],
        answers["horizontal"],
    )
    assert "`edges`" in message, (
        f"edges of another image should fail q3_2, naming edges: {message!r}"
    )


# ---------------------------------------------------------------- errors carried forward through
# the maps


def figure_of(x, edges, flat_edges):
    """edges.png drawn as the lesson draws it, from the student's own maps (the limit from
    ``edges``)."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    axes[0].imshow(x[0, 0].numpy(), cmap="gray")
    limit = edges.abs().max().item()
    for ax, m in ((axes[1], edges), (axes[2], flat_edges)):
        ax.imshow(m[0, 0].numpy(), cmap="coolwarm", vmin=-limit, vmax=limit)
    return fig


def _own_map_answers(x, vertical, horizontal, edges, flat_edges) -> dict:
    """The answers of q3_2 to q3_6 a student computes, as the solution does, from their own
    ``edges`` and ``flat_edges`` (the filters right or their own)."""
    edges_moved = F.conv2d(torch.roll(x, 3, 3), vertical)
    padded = F.conv2d(x, vertical, padding=1)
    return {
        "edges": edges,
        "edges_peak": ref.peak(edges),
        "edges_moved": edges_moved,
        "edges_move_with": ref.compare_shared(edges_moved, edges, 3),
        "padded_shape": tuple(padded.shape),
        "padded_inside_equal": bool(torch.allclose(padded[..., 1:-1, 1:-1], edges)),
        "layer_matches": bool(torch.allclose(F.conv2d(x, vertical), edges)),
        "flat_edges": flat_edges,
        "absolute_sums": (
            round(edges.abs().sum().item(), 2),
            round(flat_edges.abs().sum().item(), 2),
        ),
    }


def _edges_chain_failures(answers, own: dict, fig, carried: dict) -> dict[str, str | None]:
    """q3_2 to q3_6 on the reference ``x`` and filters and the student's ``own`` answers, with the
    names of ``carried`` passed as the judge passes them from its snapshot: ``{question: failure
    message or None}``."""
    x, v, h = answers["x"], answers["vertical"], answers["horizontal"]
    pick = lambda *names: {n: carried[n] for n in names if n in carried}  # noqa: E731
    return failures(
        {
            "q3_2": lambda: checks.check_q3_2(ref.peak, own["edges"], own["edges_peak"], x, v, h),
            "q3_3": lambda: checks.check_q3_3(
                own["edges_moved"],
                ref.compare_shared,
                own["edges_move_with"],
                x,
                v,
                h,
                **pick("edges"),
            ),
            "q3_4": lambda: checks.check_q3_4(
                own["padded_shape"],
                own["padded_inside_equal"],
                own["layer_matches"],
                **pick("vertical", "edges"),
            ),
            "q3_5": lambda: checks.check_q3_5(
                own["flat_edges"], own["absolute_sums"], x, v, h, **pick("edges")
            ),
            "q3_6": lambda: checks.check_q3_6(fig, x, v, h, **pick("edges", "flat_edges")),
        }
    )


def test_q3_flipped_edges_cost_q3_2_only(answers, property_calls):
    """A filter flipped by mistake, `edges = F.conv2d(x, vertical.flip(-1))`, costs q3_2 only: the
    later answers computed from it (the moved map compared with it, the padded map's inside, the
    layer, the figure) are right for the student's edges."""
    x, v, h = answers["x"], answers["vertical"], answers["horizontal"]
    edges = F.conv2d(x, v.flip(-1))
    own = _own_map_answers(x, v, h, edges, F.conv2d(x, h))
    fig = figure_of(x, edges, own["flat_edges"])
    try:
        carried = _edges_chain_failures(answers, own, fig, {"vertical": v, "edges": edges})
        not_carried = _edges_chain_failures(answers, own, fig, {})
    finally:
        plt.close(fig)
    lost = [q for q, message in carried.items() if message is not None]
    assert lost == ["q3_2"], f"the flipped edges should cost q3_2 only: {carried}"
    assert "`edges`" in carried["q3_2"], carried["q3_2"]
    lost = [q for q, message in not_carried.items() if message is not None]
    assert lost == ["q3_2", "q3_3", "q3_4", "q3_6"], f"against the reference's edges: {not_carried}"


def test_q3_flipped_flat_edges_cost_q3_5_only(answers, property_calls):
    """flat_edges by a true convolution (the horizontal filter turned over, a negated map): the
    figure drawn from it is right for the student's flat_edges."""
    x, v, h = answers["x"], answers["vertical"], answers["horizontal"]
    flat_edges = F.conv2d(x, h.flip(2, 3))
    own = _own_map_answers(x, v, h, F.conv2d(x, v), flat_edges)
    fig = figure_of(x, own["edges"], flat_edges)
    try:
        carried = _edges_chain_failures(
            answers, own, fig, {"edges": own["edges"], "flat_edges": flat_edges}
        )
        not_carried = _edges_chain_failures(answers, own, fig, {"edges": own["edges"]})
    finally:
        plt.close(fig)
    assert [q for q, m in carried.items() if m is not None] == ["q3_5"], carried
    assert "`flat_edges`" in carried["q3_5"], carried["q3_5"]
    assert [q for q, m in not_carried.items() if m is not None] == ["q3_5", "q3_6"], not_carried


#: Maps a cheater may store as `edges` so that the answers computed from it are trivial: each is
#: graded as the reference's map (the later answers built on it fail).
DEGENERATE_MAPS = {
    "zeros": lambda e: torch.zeros_like(e),
    "constant": lambda e: torch.full_like(e, 0.5),
    "epsilon": lambda e: 1e-9 * e,
    "nan": lambda e: torch.where(e > 0, torch.tensor(float("nan")), e),
    "overflowing": lambda e: 1e38 * e,
    "integer": lambda e: e.long(),
    "wrong_shape": lambda e: e[0],
    "padded": lambda e: F.pad(e, (1, 1, 1, 1)),
    "not_a_tensor": lambda e: e.tolist(),
}


@pytest.mark.parametrize("make", DEGENERATE_MAPS.values(), ids=DEGENERATE_MAPS.keys())
def test_q3_a_degenerate_edges_is_not_carried_forward(make, answers):
    reference = F.conv2d(answers["x"], answers["vertical"])
    actual = checks._carried_map(make(answers["edges"]), reference)
    assert actual is reference, "a degenerate map should be replaced by the reference's"


@pytest.mark.parametrize("name", ["zeros", "constant", "epsilon"])
def test_q3_answers_built_on_degenerate_edges_fail(name, answers, property_calls):
    x, v, h = answers["x"], answers["vertical"], answers["horizontal"]
    edges = DEGENERATE_MAPS[name](answers["edges"])
    own = _own_map_answers(x, v, h, edges, F.conv2d(x, h))
    # True for zeros anyway
    own["edges_move_with"] = True if name == "constant" else own["edges_move_with"]
    fig = figure_of(x, edges, own["flat_edges"])
    try:
        actual = _edges_chain_failures(answers, own, fig, {"vertical": v, "edges": edges})
    finally:
        plt.close(fig)
    lost = {q for q, message in actual.items() if message is not None}
    assert {"q3_2", "q3_4", "q3_6"} <= lost, (
        f"{name}: answers built on degenerate edges should fail: {actual}"
    )


@pytest.mark.parametrize("maps_kind, passes", [("without_bias", True), ("reference", False)])
def test_q2_4_compares_against_the_students_own_maps(maps_kind, passes, answers):
    """`maps = F.conv2d(sneaker, conv.weight)` (no bias) costs q2_3 (`filter3_layer` reads it);
    q2_4's comparisons, made against those maps, are right for them."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(42)
        conv = nn.Conv2d(1, 16, kernel_size=5)
    sneaker = ref._test_data()[0][9:10]
    with torch.no_grad():
        maps = F.conv2d(sneaker, conv.weight)
        maps_moved = conv(torch.roll(sneaker, shifts=2, dims=2))
    assert torch.allclose(maps_moved, answers["maps_moved"]), (
        "the test's sneaker and conv are the lesson's"
    )
    own = (
        bool(torch.allclose(maps_moved[:, :, 2:], maps[:, :, :-2])),
        bool(torch.allclose(maps_moved, torch.roll(maps, shifts=2, dims=2))),
    )
    carried = {"maps": maps} if maps_kind == "without_bias" else {}
    call = lambda: checks.check_q2_4(*own, answers["sneaker_edge_rows_lit"], **carried)  # noqa: E731
    actual = failures({"q2_4": call})["q2_4"]
    assert (actual is None) == passes, f"{maps_kind}: {actual!r}"


@pytest.mark.parametrize("crossed", [False, True], ids=["in_process", "crossed"])
@pytest.mark.parametrize(
    "how, expected",
    [
        (
            "constant_map",
            "`fig.axes[1]` shows an image whose values are all the same, so its colour limits are "
            "equal",
        ),
        ("equal_limits", "`fig.axes[2]` is drawn with vmin equal to vmax"),
    ],
)
def test_q3_6_equal_colour_limits_are_named_as_such_not_as_a_norm(answers, crossed, how, expected):
    """An all-zero edges drawn as the lesson draws it (limit 0): the message names the equal limits
    and the constant image, not a Normalize the student never passed."""
    x, edges, flat_edges = answers["x"], answers["edges"], answers["flat_edges"]
    if how == "constant_map":
        edges = torch.zeros_like(edges)
    fig = figure_of(x, edges, flat_edges)
    if how == "equal_limits":
        fig.axes[2].images[0].set_clim(0.5, 0.5)
    try:
        judged = _crossed(fig) if crossed else fig
        actual = failures(
            {
                "q3_6": lambda: checks.check_q3_6(
                    judged,
                    x,
                    answers["vertical"],
                    answers["horizontal"],
                    edges=edges,
                    flat_edges=flat_edges,
                )
            }
        )["q3_6"]
    finally:
        plt.close(fig)
    assert actual is not None and expected in actual, actual
    assert "Normalize" not in actual, actual


def test_a_check_reads_the_names_it_carries_forward_from_the_judges_snapshot(
    answers, property_calls
):
    """Outside the judge a carried name is MISSING (the reference stands in); in the judge it is
    read from the snapshot, and a name the test passes wins."""
    from autograder.checks import reading_snapshot

    x, v, h = answers["x"], answers["vertical"], answers["horizontal"]
    edges = F.conv2d(x, v.flip(-1))
    moved = F.conv2d(torch.roll(x, 3, 3), v)
    call = lambda **kw: failures(  # noqa: E731 - the checks with their arguments, called per case
        {
            "q3_3": lambda: checks.check_q3_3(
                moved,
                ref.compare_shared,
                False,
                x,
                v,
                h,  # noqa: E731
                **kw,
            )
        }
    )["q3_3"]
    assert "`edges_move_with`" in call(), "outside the judge, edges is the reference's"
    with reading_snapshot({"edges": edges}):
        assert call() is None, "in the judge, the snapshot's edges is carried forward"
        assert "`edges_move_with`" in call(edges=answers["edges"]), (
            "a name passed wins over the snapshot"
        )
    with reading_snapshot({"edges": None}):
        assert "`edges_move_with`" in call(), "a name missing from the snapshot is the reference's"


def test_the_judge_reads_the_carried_names_before_any_student_function():
    """names_read_by (the judge's one snapshot) holds the names the hidden tests' checks carry
    forward."""
    from autograder.checks import carried_names
    from autograder.notes import names_read_by

    source = (
        "def test_q3_4_hidden(padded_shape, padded_inside_equal, layer_matches):\n"
        "    from autograder.checks.where_mlps_fail import check_q3_4\n"
        "    check_q3_4(padded_shape, padded_inside_equal, layer_matches)\n"
    )
    namespace: dict = {}
    exec(compile(source, "q3_4.py", "exec"), namespace)
    test = namespace["test_q3_4_hidden"]
    assert carried_names(test) == ["vertical", "edges"]

    class Case:
        class body:
            test_func = test

    class File:
        test_cases = [Case]

    assert names_read_by([File]) == [
        "padded_shape",
        "padded_inside_equal",
        "layer_matches",
        "vertical",
        "edges",
    ]


# ---------------------------------------------------------------- property checks against wrong
# functions


class Recorder:
    """A student's function that remembers the arguments of its last call."""

    def __init__(self, func):
        self.func = func
        self.last = None

    def __call__(self, *args):
        self.last = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        return self.func(*args)


def rolled(x, pixels):
    return torch.roll(x, shifts=pixels, dims=3)


def slid_in_place(x, pixels):
    x[..., pixels:] = x[..., :-pixels].clone()
    x[..., :pixels] = 0
    return x


def window_sum_flipped(image, kernel, bias, row, col):
    k = kernel.shape[0]
    return ((kernel.flip(0, 1) * image[row : row + k, col : col + k]).sum() + bias).item()


def window_sum_without_bias(image, kernel, bias, row, col):
    k = kernel.shape[0]
    return (kernel * image[row : row + k, col : col + k]).sum().item()


def peak_swapped(m):
    (r1, c1), high, (r2, c2), low = ref.peak(m)
    return (c1, r1), high, (c2, r2), low


def compare_whole_width(maps_moved, maps, pixels):
    return bool(torch.allclose(maps_moved, maps))


def test_slide_with_torch_roll_fails():
    student = Recorder(rolled)
    actual = failure_message(checks.check_slide_function, student)
    assert actual.startswith("`slide(x, "), (
        f"the message should name slide and its call: {actual!r}"
    )
    assert "black" in actual, f"the message should say the left columns must be black: {actual!r}"
    x, pixels = student.last
    expected = ref.slide(x, pixels)
    assert f"slide(x, {pixels})" in actual and f"{tuple(x.shape)}" in actual, (
        f"the message should show the failing call, slide(x, {pixels}) for x of shape "
        f"{tuple(x.shape)}: {actual!r}"
    )
    assert "tensor(" not in actual, f"the message prints a tensor: {actual!r}"
    assert_reveals_nothing(actual, *[float(v) for v in expected.flatten() if v != 0])


def test_slide_that_changes_its_input_fails():
    actual = failure_message(checks.check_slide_function, slid_in_place)
    expected = "`slide` changed its input x in place"
    assert actual.startswith(expected), f"expected {expected!r}, got {actual!r}"


@pytest.mark.parametrize(
    "wrong", [window_sum_flipped, window_sum_without_bias], ids=["flipped kernel", "no bias"]
)
def test_window_sum_mistakes_fail(wrong):
    student = Recorder(wrong)
    actual = failure_message(checks.check_window_sum_function, student)
    assert actual.startswith("`window_sum(image of shape"), (
        f"the message should name window_sum: {actual!r}"
    )
    assert "not flipped" in actual and "plus the bias" in actual, (
        f"the message should say what is summed: {actual!r}"
    )
    image, kernel, bias, row, col = student.last
    assert f"bias={bias}, row={row}, col={col}" in actual, (
        f"the message should show the failing call's bias, row and col ({bias}, {row}, {col}): "
        f"{actual!r}"
    )
    expected = ref.window_sum(image, kernel, bias, row, col)
    assert abs(wrong(image, kernel, bias, row, col) - expected) > checks.WINDOW_TOL, (
        "the recorded call should be the failing example"
    )
    assert_reveals_nothing(actual, expected, round(expected, 4))


def test_peak_with_row_and_column_swapped_fails():
    student = Recorder(peak_swapped)
    actual = failure_message(checks.check_peak_function, student)
    assert actual.startswith("`peak(m) for m of shape"), f"the message should name peak: {actual!r}"
    assert "(row, column) is wrong" in actual, f"the message should blame the position: {actual!r}"
    (m,) = student.last
    expected = ref.peak(m)
    assert peak_swapped(m) != expected, "the recorded call should be the failing example"
    assert_reveals_nothing(actual, expected, expected[0], expected[2], expected[1], expected[3])


def test_compare_shared_over_the_whole_width_fails():
    student = Recorder(compare_whole_width)
    actual = failure_message(checks.check_compare_shared_function, student)
    assert actual.startswith("`compare_shared(maps_moved, maps, "), (
        f"the message should name compare_shared: {actual!r}"
    )
    assert "columns both maps hold" in actual, (
        f"the message should say which columns to compare: {actual!r}"
    )
    maps_moved, maps, pixels = student.last
    assert f"compare_shared(maps_moved, maps, {pixels})" in actual, (
        f"the message should show the failing call's pixels ({pixels}): {actual!r}"
    )
    assert "tensor(" not in actual, f"the message prints a tensor: {actual!r}"


def test_compare_shared_that_is_always_true_fails():
    actual = failure_message(
        checks.check_compare_shared_function, lambda maps_moved, maps, pixels: True
    )
    expected = "is True for that moved map with one entry of the shared columns changed by"
    assert expected in actual, f"expected {expected!r} in the message, got {actual!r}"


#: compare_shared variants that do not compare every shared entry with allclose's default
#: tolerance: each passes a property test that changes one entry of the last column only, and each
#: must fail.
COMPARE_SHARED_WRONG = {
    "last_column_only": lambda mm, m, p: torch.allclose(mm[..., -1], m[..., -1 - p]),
    "first_shared_column_dropped": lambda mm, m, p: torch.allclose(mm[..., p + 1 :], m[..., 1:-p]),
    "sums": lambda mm, m, p: torch.allclose(mm[..., p:].sum(), m[..., :-p].sum()),
    "loose_atol": lambda mm, m, p: torch.allclose(mm[..., p:], m[..., :-p], atol=0.5),
    "last_two_columns": lambda mm, m, p: torch.allclose(mm[..., -2:], m[..., -2 - p : -p]),
    # tolerances looser than allclose's default, under 0.01: a change of 0.01 does not catch them
    "atol_9e-3": lambda mm, m, p: torch.allclose(mm[..., p:], m[..., :-p], atol=9e-3),
    "rtol_1e-2": lambda mm, m, p: torch.allclose(mm[..., p:], m[..., :-p], rtol=1e-2),
    "max_difference_below_0.0099": lambda mm, m, p: bool(
        (mm[..., p:] - m[..., :-p]).abs().max() < 0.0099
    ),
    # a few times allclose's default tolerance, under 1e-4: a change of 1e-4 does not catch them
    "atol_6e-5": lambda mm, m, p: torch.allclose(mm[..., p:], m[..., :-p], atol=6e-5),
    "rtol_3e-5": lambda mm, m, p: torch.allclose(mm[..., p:], m[..., :-p], rtol=3e-5),
    "max_difference_below_9e-5": lambda mm, m, p: bool(
        (mm[..., p:] - m[..., :-p]).abs().max() < 9e-5
    ),
    # stricter than the question's torch.allclose, which accepts a difference inside its tolerance
    "torch_equal": lambda mm, m, p: torch.equal(mm[..., p:], m[..., :-p]),
    "allclose_without_tolerance": lambda mm, m, p: torch.allclose(
        mm[..., p:], m[..., :-p], rtol=0.0, atol=0.0
    ),
    "max_difference_below_1e-6": lambda mm, m, p: bool(
        (mm[..., p:] - m[..., :-p]).abs().max() <= 1e-6
    ),
}


@pytest.mark.parametrize("wrong", list(COMPARE_SHARED_WRONG), ids=list(COMPARE_SHARED_WRONG))
def test_compare_shared_must_compare_every_shared_entry_with_allcloses_tolerance(wrong):
    actual = failure_message(checks.check_compare_shared_function, COMPARE_SHARED_WRONG[wrong])
    assert (
        actual.startswith("`compare_shared(maps_moved, maps, ")
        and "every entry of the columns both maps hold" in actual
    ), (
        f"compare_shared variant {wrong!r} should fail its property test, naming the columns: "
        f"{actual!r}"
    )


#: Other ways to write the question's comparison: NumPy's allclose has the same default tolerance,
#: isclose().all() is allclose, and swapping the arguments moves allclose's relative tolerance by a
#: rounding error at most.
COMPARE_SHARED_RIGHT = {
    "numpy_allclose": lambda mm, m, p: bool(np.allclose(mm[..., p:].numpy(), m[..., :-p].numpy())),
    "isclose_all": lambda mm, m, p: bool(torch.isclose(mm[..., p:], m[..., :-p]).all()),
    "arguments_swapped": lambda mm, m, p: torch.allclose(m[..., :-p], mm[..., p:]),
    "narrow": lambda mm, m, p: torch.allclose(
        mm.narrow(-1, p, mm.shape[-1] - p), m.narrow(-1, 0, m.shape[-1] - p)
    ),
}


@pytest.mark.parametrize("right", list(COMPARE_SHARED_RIGHT), ids=list(COMPARE_SHARED_RIGHT))
def test_compare_shared_written_another_way_with_allcloses_tolerance_passes(right):
    actual = checks.check_compare_shared_function(COMPARE_SHARED_RIGHT[right])
    assert actual is None, f"compare_shared written as {right!r} should pass"


@pytest.mark.parametrize(
    "check, wrong",
    [
        (checks.check_window_sum_function, window_sum_flipped),
        (checks.check_peak_function, peak_swapped),
        (checks.check_slide_function, rolled),
    ],
    ids=["window_sum", "peak", "slide"],
)
def test_a_failing_property_check_gives_the_same_message_twice(check, wrong):
    assert GRADING.derandomize and GRADING.database is None, (
        "property checks must be derandomized and keep no example database, or a regrade may differ"
    )
    expected = failure_message(check, wrong)
    actual = failure_message(check, wrong)
    assert actual == expected, (
        f"a regrade should give the same message: first {expected!r}, then {actual!r}"
    )


def _slide_4d_only(x, pixels):
    out = torch.zeros_like(x)
    out[:, :, :, pixels:] = x[:, :, :, :-pixels]  # right for (N, C, H, W) only
    return out


def _peak_of_the_first_map(m):
    first = m[0, 0]  # right for (1, 1, H, W) only
    width = first.shape[-1]
    return (
        divmod(int(first.argmax()), width),
        round(first.max().item(), 4),
        divmod(int(first.argmin()), width),
        round(first.min().item(), 4),
    )


def test_peak_rounded_to_three_decimals_fails():
    """A peak rounded to 3 decimals, not 4, fails: on maps of multiples of 1/4 the two roundings
    agree, so every value the property draws has a fourth decimal."""

    def peak(m):
        width = m.shape[-1]
        return (
            divmod(int(m.argmax()), width),
            round(m.max().item(), 3),
            divmod(int(m.argmin()), width),
            round(m.min().item(), 3),
        )

    actual = failure_message(checks.check_peak_function, peak)
    assert actual.startswith("`peak(m) for m of shape") and "value is wrong" in actual, (
        f"a peak rounded to 3 decimals should fail: {actual!r}"
    )


@pytest.mark.parametrize(
    "check, wrong",
    [
        (checks.check_slide_function, _slide_4d_only),
        (checks.check_peak_function, _peak_of_the_first_map),
    ],
    ids=["slide", "peak"],
)
def test_functions_must_take_any_leading_shape_the_question_allows(check, wrong):
    """Functions right on (N, 1, H, W) only fail: the questions say (..., W) and (..., H, W), and
    the properties draw other leading shapes."""
    actual = failure_message(check, wrong)
    name = "slide" if check is checks.check_slide_function else "peak"
    assert actual.startswith(f"`{name}(") and ("tensor (" in actual or "of shape (" in actual), (
        f"{wrong.__name__} should fail on another shape, showing the call: {actual!r}"
    )


def test_slide_returning_a_narrower_tensor_fails_the_shape_layer():
    def slide(x, pixels):
        return x[..., pixels:]  # drops columns instead of filling them

    actual = failure_message(checks.check_slide_function, slide)
    assert actual.startswith("`slide(x, ") and "has shape" in actual, (
        f"a wrong-shaped result should fail the shape layer, naming the call: {actual!r}"
    )


def test_a_crashing_student_function_is_a_check_failure_not_an_error():
    def slide(x, pixels):
        black = torch.zeros(*x.shape[:-1], pixels)
        # a typo for dim=3: IndexError on every call
        return torch.cat([black, x[..., :-pixels]], dim=4)

    actual = failure_message(checks.check_slide_function, slide)
    expected = "raised IndexError: Dimension out of range"
    assert actual.startswith("`slide(<tensor (") and expected in actual, (
        f"the student's exception should become a CheckFailure showing the call's shapes: "
        f"{actual!r}"
    )


def test_a_function_failing_in_two_ways_gives_one_check_failure():
    def slide(x, pixels):
        # wrong values when it broadcasts (width 2), RuntimeError otherwise
        return x[..., pixels:] + x

    actual = failure_message(checks.check_slide_function, slide)
    assert actual.startswith("`slide("), (
        f"one student-facing message naming slide expected, got {actual!r}"
    )


# ---------------------------------------------------------------- q3_6: the figure


def test_q3_6_lesson_figure_passes(answers, figure_factory):
    fig = figure_factory(answers["x"], answers["vertical"], answers["horizontal"])
    actual = checks.check_q3_6(fig, answers["x"], answers["vertical"], answers["horizontal"])
    assert actual is None, "the lesson's figure should pass q3_6"


def test_q3_6_maps_on_separate_scales_fail(answers, figure_factory):
    fig = figure_factory(
        answers["x"], answers["vertical"], answers["horizontal"], shared_scale=False
    )
    actual = failure_message(
        checks.check_q3_6, fig, answers["x"], answers["vertical"], answers["horizontal"]
    )
    expected = "`fig`: the two maps are drawn on different colour scales"
    assert actual.startswith(expected), f"expected {expected!r}, got {actual!r}"


@pytest.mark.parametrize("limit, passes", [(1e6, False), (0.5, False), ("horizontal", True)])
def test_q3_6_colour_limit_is_the_maps_own(answers, figure_factory, limit, passes):
    """The colour limit is the maps' own: vmax = 1e6 draws both maps flat grey and fails, a limit
    below the vertical map's largest absolute value fails, and one taken from the larger of the two
    maps is accepted."""
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    if limit == "horizontal":
        limit = max(
            F.conv2d(x, vertical).abs().max().item(), F.conv2d(x, horizontal).abs().max().item()
        )
    fig = figure_factory(x, vertical, horizontal, limit=limit)
    actual = (
        failure_message(checks.check_q3_6, fig, x, vertical, horizontal)
        if not passes
        else checks.check_q3_6(fig, x, vertical, horizontal)
    )
    if passes:
        assert actual is None, (
            f"a limit of {limit} (the larger map's largest absolute value) should pass q3_6"
        )
    else:
        assert actual.startswith("`fig`: the colour scale is"), (
            f"a limit of {limit} should fail q3_6: {actual!r}"
        )


def test_q3_6_four_axes_fail(answers, figure_factory):
    fig = figure_factory(answers["x"], answers["vertical"], answers["horizontal"], n_axes=4)
    actual = failure_message(
        checks.check_q3_6, fig, answers["x"], answers["vertical"], answers["horizontal"]
    )
    expected = "`fig` holds 4 Axes, but it should hold 3"
    assert actual.startswith(expected), f"expected {expected!r}, got {actual!r}"


def _laid_out(x, vertical, horizontal, how: str):
    """The lesson's three images in a layout of the student's choosing: the maps in a nested
    gridspec (``subgridspec``), or in ``fig.subfigures``, which the checks do not read."""
    edges, flat_edges = F.conv2d(x, vertical), F.conv2d(x, horizontal)
    fig = plt.figure(figsize=(12, 4))
    if how == "subfigures":
        left, right = fig.subfigures(1, 2, width_ratios=[1, 2])
        axes = [left.subplots(1, 1), *right.subplots(1, 2)]
    elif how == "ImageGrid":  # it also makes a hidden colour-bar Axes per cell, with cbar_mode=None
        from mpl_toolkits.axes_grid1 import ImageGrid

        axes = list(ImageGrid(fig, 111, nrows_ncols=(1, 3), axes_pad=0.3))
    elif how in ("hidden_empty_axes", "hidden_axes_with_an_image"):
        axes = list(fig.subplots(1, 3))
        extra = fig.add_axes((0.1, 0.1, 0.2, 0.2))
        extra.set_visible(False)
        if how == "hidden_axes_with_an_image":
            extra.imshow(x[0, 0].numpy(), cmap="gray")
    else:
        outer = fig.add_gridspec(1, 2, width_ratios=[1, 2])
        inner = outer[1].subgridspec(1, 2)
        axes = [fig.add_subplot(outer[0]), fig.add_subplot(inner[0]), fig.add_subplot(inner[1])]
    axes[0].imshow(x[0, 0].numpy(), cmap="gray")
    limit = edges.abs().max().item()
    for ax, m in ((axes[1], edges), (axes[2], flat_edges)):
        ax.imshow(m[0, 0].numpy(), cmap="coolwarm", vmin=-limit, vmax=limit)
    return fig


@pytest.mark.parametrize("crossed", [False, True], ids=["in_process", "crossed"])
def test_q3_6_subfigures_fail_saying_so_and_nested_gridspecs_pass(answers, crossed):
    """Subfigures are refused with a message of their own: an Axes of ``fig.subfigures`` has the
    subfigure as its ``.figure``, which has no size, and reading it as the figure would raise
    AttributeError. The same layout as a nested gridspec passes."""
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    subfigures, nested = (
        _laid_out(x, vertical, horizontal, "subfigures"),
        _laid_out(x, vertical, horizontal, "nested"),
    )
    try:
        judged = (_crossed(subfigures), _crossed(nested)) if crossed else (subfigures, nested)
        actual = failure_message(checks.check_q3_6, judged[0], x, vertical, horizontal)
        nested_actual = checks.check_q3_6(judged[1], x, vertical, horizontal)
    finally:
        plt.close(subfigures)
        plt.close(nested)
    expected = "the figure holding `fig.axes[0]` is split into subfigures (fig.subfigures)"
    assert actual.startswith(expected), f"expected {expected!r}, got {actual!r}"
    assert nested_actual is None, "the lesson's three images in a nested gridspec should pass q3_6"


@pytest.mark.parametrize("crossed", [False, True], ids=["in_process", "crossed"])
@pytest.mark.parametrize(
    "how, expected",
    [
        # its rows share y: the trousers, cropped to 26
        ("ImageGrid", "`fig.axes[0]` shows only part of the image"),
        ("hidden_empty_axes", None),
        ("hidden_axes_with_an_image", "`fig` holds 4 Axes, but it should hold 3"),
    ],
)
def test_q3_6_hidden_axes_count_only_with_an_image(answers, crossed, how, expected):
    """A hidden Axes that holds no image draws nothing and is not counted; one that holds an image
    is. So ``ImageGrid``'s hidden colour-bar Axes do not make "`fig` holds 6 Axes"; an ImageGrid's
    row shares its y axis, which crops the 28-pixel trousers to the maps' 26, and is refused for
    that."""
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    fig = _laid_out(x, vertical, horizontal, how)
    try:
        judged = _crossed(fig) if crossed else fig
        actual = (
            checks.check_q3_6(judged, x, vertical, horizontal)
            if expected is None
            else failure_message(checks.check_q3_6, judged, x, vertical, horizontal)
        )
    finally:
        plt.close(fig)
    if expected is None:
        assert actual is None, f"the lesson's three images laid out as {how} should pass q3_6"
    else:
        assert actual.startswith(expected), f"expected {expected!r} for {how}, got {actual!r}"


def test_q3_6_maps_in_the_wrong_order_fail(answers):
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    fig = lesson_figure(x, horizontal, vertical)  # horizontal map drawn where the vertical belongs
    try:
        actual = failure_message(checks.check_q3_6, fig, x, vertical, horizontal)
    finally:
        plt.close(fig)
    expected = "`fig.axes[1]` should show the vertical map, but shows other values."
    assert actual == expected, f"expected {expected!r}, got {actual!r}"


def _tampered(fig, how: str):
    """edges.png right by its arrays and colour limits, wrong on the page."""
    from matplotlib.colors import TwoSlopeNorm

    vertical_map, horizontal_map = fig.axes[1].images[0], fig.axes[2].images[0]
    if how == "centred_off_zero":
        low, high = vertical_map.get_clim()
        vertical_map.set_norm(TwoSlopeNorm(vmin=low, vcenter=0.9 * high, vmax=high))
    elif how == "covered":
        fig.axes[2].imshow(abs(horizontal_map.get_array()), cmap="gray")
    elif how == "transparent":
        horizontal_map.set_alpha(0.0)
    return fig


@pytest.mark.parametrize(
    "how, expected",
    [
        ("centred_off_zero", "`fig.axes[1]` is drawn with TwoSlopeNorm, not a linear colour scale"),
        ("covered", "`fig.axes[2]` holds 2 images"),
        ("transparent", "`fig.axes[2]` is drawn transparent"),
    ],
)
def test_q3_6_maps_drawn_otherwise_than_their_limits_say_fail(
    answers, figure_factory, how, expected
):
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    fig = _tampered(figure_factory(x, vertical, horizontal), how)
    actual = failure_message(checks.check_q3_6, fig, x, vertical, horizontal)
    assert actual.startswith(expected), f"{how}: expected {expected!r}, got {actual!r}"


def _crossed(fig):
    """``fig`` as the judge sees it: described by the student process, through the wire format,
    rebuilt."""
    from autograder import encoding, tensor_payload

    crossed = tensor_payload.load(tensor_payload.dump(encoding.encode(fig, {})))
    return encoding.decode(crossed, lambda *a: None)


def _drawn_otherwise(fig, how: str):
    """edges.png drawn otherwise (and honest variants): each changes how the figure draws its
    images, never their arrays."""
    import numpy as np
    from matplotlib.colors import CenteredNorm, ListedColormap, TwoSlopeNorm
    from matplotlib.patches import Rectangle

    trousers, vertical_map, horizontal_map = (ax.images[0] for ax in fig.axes)
    low, high = vertical_map.get_clim()
    if how == "trousers_black":
        trousers.set_clim(5, 6)
    elif how == "trousers_black_above_half":
        trousers.set_cmap(plt.get_cmap("gray").with_extremes(over="black"))
        trousers.set_clim(0, 0.5)
    elif how == "trousers_saturated":
        trousers.set_clim(0.97, 1.0)
    elif how == "white_map_of_your_own":
        vertical_map.set_cmap(ListedColormap(["white"]))
    # black, and navy at 0.16 for the top 11 % of values
    elif how == "dim_map_of_your_own":
        values = np.asarray(trousers.get_array())
        top = float(np.quantile(values, 0.89))
        trousers.set_cmap(
            ListedColormap(
                [(0, 0, 0.16) if (j + 0.5) / 1024 >= top else (0, 0, 0) for j in range(1024)],
                name="mine",
            )
        )
        trousers.set_clim(0, 1)
    elif how == "covered_by_a_rectangle":
        fig.axes[2].add_patch(Rectangle((-1, -1), 30, 30, color="white", zorder=10))
    elif how == "panned_away":
        fig.axes[2].set_xlim(1000, 2000)
    elif how == "masked":
        horizontal_map.set_data(np.ma.masked_array(horizontal_map.get_array(), mask=True))
    elif how == "squashed":
        fig.axes[2].set_aspect(0.001)
    elif how == "upside_down":
        fig.axes[2].invert_yaxis()
    elif how == "covered_by_an_axes":
        fig.add_axes(fig.axes[2].get_position().bounds)
    elif how == "tiny":
        fig.set_size_inches(0.3, 0.3)
    elif how in ("centred_norm", "two_slope_norm_at_zero"):
        for shown in (vertical_map, horizontal_map):
            shown.set_norm(
                CenteredNorm(0.0, high) if how == "centred_norm" else TwoSlopeNorm(0.0, low, high)
            )
    elif how == "axis_off":
        for ax in fig.axes:
            ax.axis("off")
    elif how == "RdBu_r_colours_of_your_own":
        for shown in (vertical_map, horizontal_map):
            shown.set_cmap(
                ListedColormap(plt.get_cmap("RdBu_r")(np.linspace(0, 1, 256)), name="mine")
            )
    # caught only by drawing the figure
    elif how == "figure_filtered_white":
        fig.set_agg_filter(lambda image, dpi: (np.ones_like(image), 0, 0))
    elif how == "maps_axes_animated":
        fig.axes[2].set_animated(True)
    elif how == "minor_grid_wide_and_white":
        fig.axes[1].minorticks_on()
        fig.axes[1].grid(True, which="minor", lw=100, color="w")
    elif how == "style_of_ones_own":  # honest: a style sheet, titles, a grid
        for ax, title in zip(fig.axes, ("trousers", "vertical", "horizontal")):
            ax.set_title(title)
            ax.grid(True, color="0.8", lw=0.5)
    else:
        raise ValueError(how)
    return fig


@pytest.mark.parametrize(
    "how, expected",
    [
        (
            "trousers_black",
            "`fig.axes[0]` draws the trousers on colour limits far from their values",
        ),
        (
            "trousers_saturated",
            "`fig.axes[0]` draws the trousers on colour limits far from their values",
        ),
        (
            "trousers_black_above_half",
            "`fig.axes[0]` is drawn with a colour map named 'gray' whose colours are not",
        ),
        (
            "white_map_of_your_own",
            "`fig.axes[1]` is drawn with a colour map of your own that draws its low and high "
            "values alike",
        ),
        (
            "dim_map_of_your_own",
            "`fig.axes[0]` is drawn with a colour map of your own that draws its low and high "
            "values alike",
        ),
        (
            "covered_by_a_rectangle",
            "`fig.axes[2]`'s Axes also draws 1 patch, which can hide the image",
        ),
        ("panned_away", "`fig.axes[2]` shows only part of the image"),
        ("masked", "`fig.axes[2]` has masked entries"),
        ("squashed", "`fig.axes[2]` is stretched"),
        ("upside_down", "`fig.axes[2]` is drawn mirrored or upside down"),
        ("covered_by_an_axes", "`fig` holds 4 Axes, but it should hold 3"),
        ("tiny", "`fig.axes[0]` is drawn only"),
        ("centred_norm", None),
        ("two_slope_norm_at_zero", None),
        ("axis_off", None),
        ("RdBu_r_colours_of_your_own", None),
        (
            "figure_filtered_white",
            "the figure holding `fig.axes[0]` draws 1 of its artists through a filter",
        ),
        ("maps_axes_animated", "`fig.axes[2]` does not show its values when the figure is drawn"),
        (
            "minor_grid_wide_and_white",
            "`fig.axes[1]` does not show its values when the figure is drawn",
        ),
        ("style_of_ones_own", None),
    ],
)
def test_q3_6_drawn_so_that_it_shows_something_else_fails_in_the_notebook_and_crossed(
    answers, figure_factory, how, expected
):
    """The figure in the notebook (the checks in the student's kernel) and as it crosses to the
    judge."""
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    fig = _drawn_otherwise(figure_factory(x, vertical, horizontal), how)
    crossed = _crossed(fig)
    for where, figure in (("notebook", fig), ("crossed", crossed)):
        if expected is None:
            assert checks.check_q3_6(figure, x, vertical, horizontal) is None, (
                f"{how} should pass q3_6 ({where})"
            )
        else:
            actual = failure_message(checks.check_q3_6, figure, x, vertical, horizontal)
            assert actual.startswith(expected), (
                f"{how} ({where}): expected {expected!r}, got {actual!r}"
            )


def _faint(fig):
    """After every draw, each pixel keeps its colour and is made 1/255 opaque."""

    def faint(event):
        np.asarray(event.renderer.buffer_rgba())[..., 3] = 1

    fig.canvas.mpl_connect("draw_event", faint)
    return fig


@pytest.mark.parametrize(
    "how, expected",
    [
        (
            "see_through_filter",
            "the figure holding `fig.axes[0]` draws 1 of its artists through a filter",
        ),
        (
            "see_through_at_each_draw",
            "the figure holding `fig.axes[0]` runs code of its own after each draw",
        ),
        (
            "cropped_by_a_negative_pad",
            "the figure holding `fig.axes[0]` is shown with -1.45 inches around its contents",
        ),
        (
            "padded_by_30_inches",
            "the figure holding `fig.axes[0]` is shown with 30 inches around its contents",
        ),
        # a white dot 40 figure widths away: Jupyter's display, cropped to the contents and fitted
        # to the page, shows the images 6 pixels tall
        ("a_dot_40_figure_widths_away", "the figure holding `fig.axes[0]` has contents reaching 4"),
        ("a_title_of_110_characters", None),  # honest: it reaches 1.7 inches past the edge
    ],
)
def test_q3_6_a_figure_shown_see_through_or_cropped_fails(answers, figure_factory, how, expected):
    """A figure shown see-through or cropped fails, in the notebook and crossed: a filter on the
    figure, or a draw event's code, that keeps every pixel's colour and makes it 1/255 opaque
    (Jupyter shows the page behind it), and ``savefig.pad_inches`` of -1.45, which crops Jupyter's
    display to a strip 7 pixels tall, leave the arrays and limits right and show nothing."""
    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    fig = figure_factory(x, vertical, horizontal)
    pad = {"cropped_by_a_negative_pad": -1.45, "padded_by_30_inches": 30}.get(how, 0.1)
    if how == "see_through_filter":
        fig.set_agg_filter(
            lambda rgba, dpi: (
                np.concatenate([rgba[..., :3], rgba[..., 3:] * 0 + 1 / 255], -1),
                0,
                0,
            )
        )
    elif how == "see_through_at_each_draw":
        _faint(fig)
    elif how == "a_dot_40_figure_widths_away":
        fig.text(40, 0.5, ".", color="white")
    elif how == "a_title_of_110_characters":
        fig.axes[0].set_title(
            "the trousers, as the lesson shows them, before the vertical and horizontal edge "
            "filters are applied to them"
        )
    with matplotlib.rc_context({"savefig.pad_inches": pad}):
        crossed = _crossed(fig)
        for where, figure in (("notebook", fig), ("crossed", crossed)):
            if expected is None:
                assert checks.check_q3_6(figure, x, vertical, horizontal) is None, (
                    f"{how} should pass ({where})"
                )
                continue
            actual = failure_message(checks.check_q3_6, figure, x, vertical, horizontal)
            assert actual.startswith(expected), (
                f"{how} ({where}): expected {expected!r}, got {actual!r}"
            )


@pytest.mark.parametrize("how", ["see_through_at_each_draw", "cropped_by_a_negative_pad"])
def test_the_draws_read_each_pixels_alpha_and_count_cells_cut_away(answers, figure_factory, how):
    """The draws themselves, whatever other check refuses these figures first: each pixel is read
    with its alpha, so one 1/255 opaque shows no colour, and a cell cropped off Jupyter's canvas
    counts as not shown."""
    from autograder import figure_drawing

    fig = figure_factory(answers["x"], answers["vertical"], answers["horizontal"])
    pad = -1.45 if how == "cropped_by_a_negative_pad" else 0.1
    if how == "see_through_at_each_draw":
        _faint(fig)
    with matplotlib.rc_context({"savefig.pad_inches": pad}):
        actual = [figure_drawing.drawn_mismatch(ax.images[0]) for ax in fig.axes]
    assert min(actual) > 0.9, (
        f"{how}: the share of each image's cells not shown should be near 1: {actual}"
    )
    honest = figure_factory(answers["x"], answers["vertical"], answers["horizontal"])
    actual = [figure_drawing.drawn_mismatch(ax.images[0]) for ax in honest.axes]
    assert max(actual) == 0.0, f"the lesson's figure shows every cell: {actual}"


@pytest.mark.parametrize("left_out", ["missing", "not_a_list", "too_many"])
def test_q3_6_an_image_whose_problems_did_not_cross_fails_and_the_judge_never_draws(
    answers, figure_factory, monkeypatch, left_out
):
    """An image whose problems did not cross is not shown, and the judge draws nothing: a
    description that leaves its images' problems out (or sends them as anything but a short list of
    sentences) would otherwise have the judge draw the rebuild itself, on images a submission can
    choose so that each draw costs 12 s and 2 GB."""
    from autograder import encoding, figure_drawing, figure_wire, tensor_payload

    x, vertical, horizontal = answers["x"], answers["vertical"], answers["horizontal"]
    # drawn by the student process
    honest = tensor_payload.dump(encoding.encode(figure_factory(x, vertical, horizontal), {}))
    described = tensor_payload.load(honest)
    forged = {"missing": None, "not_a_list": "none", "too_many": [""] * 21}[left_out]
    for ax in described["axes"]:
        for image in ax["images"]:
            image.pop("problems")
            if forged is not None:
                image["problems"] = forged

    def never(*args):
        raise AssertionError("the judge drew the rebuilt figure")

    monkeypatch.setattr(figure_drawing, "draw_and_compare", never)
    rebuilt = encoding.decode(described, lambda *a: None)
    actual = failure_message(checks.check_q3_6, rebuilt, x, vertical, horizontal)
    expected = f"`fig.axes[0]` {figure_wire.UNREPORTED}."
    assert actual == expected, f"{left_out}: expected {expected!r}, got {actual!r}"
    rebuilt = encoding.decode(tensor_payload.load(honest), lambda *a: None)
    assert checks.check_q3_6(rebuilt, x, vertical, horizontal) is None, (
        "the honest figure crosses and passes undrawn"
    )


def test_q3_6_axes_array_instead_of_figure_fails(answers, figure_factory):
    fig = figure_factory(answers["x"], answers["vertical"], answers["horizontal"])
    actual = failure_message(
        checks.check_q3_6, fig.axes, answers["x"], answers["vertical"], answers["horizontal"]
    )
    expected = "`fig` should be a matplotlib Figure"
    assert actual.startswith(expected), f"expected {expected!r}, got {actual!r}"
