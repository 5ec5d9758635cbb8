"""The torch settings (thread count, default dtype) each cell leaves, and judge calls made in an
earlier one.

A float32 training's last bits depend on the thread count, and the judge
retrains a student's network through the student's ``train_mlp`` after the
whole notebook ran: run in the last cell's settings, the retraining would cost
honest work that calls ``torch.set_num_threads(1)`` in its last cell 12 points
of ``when_it_fails``.
"""

from __future__ import annotations

import time

import pytest
import torch

from autograder.checks import when_it_fails as wif
from autograder.judge_interface import Limits
from autograder.session import Session

CELLS = [
    "import torch",
    "def settings(x):\n    return torch.tensor([float(torch.get_num_threads()), "
    "float(torch.ones(1).dtype == torch.float64)]) + x",
    "torch.set_default_dtype(torch.float64)",
    "torch.set_num_threads(1)",
]


@pytest.fixture
def session(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    session = Session(workdir, CELLS, Limits(), None, time.monotonic() + 120)
    session.run_all()
    yield session
    session.process.stop()


def test_each_cell_leaves_its_settings_and_calls_run_in_the_last_unless_asked(session):
    assert [r.error for r in session.records] == [None] * len(CELLS)
    start = session.torch_states[0]
    assert start[1] == "torch.float32", (
        f"the first cells ran in the default dtype: {session.torch_states}"
    )
    assert session.torch_states[-1] == [1, "torch.float64"], (
        f"the last cell's settings last: {session.torch_states}"
    )
    settings = session.values(["settings"])["settings"]
    zero = torch.zeros(2)

    actual_now = settings(zero)
    assert torch.equal(actual_now, torch.tensor([1.0, 1.0])), (
        f"a plain call runs as the last cell left: {actual_now}"
    )
    assert settings.other_torch_states() == session.torch_states[:-1]
    actual_then = settings.in_torch_state(start)(zero)
    assert torch.equal(actual_then, torch.tensor([float(start[0]), 0.0])), (
        f"a call in the first cells' settings sees them: {actual_then}"
    )
    actual_after = settings(zero)
    assert torch.equal(actual_after, torch.tensor([1.0, 1.0])), (
        f"the settings are restored after the call: {actual_after}"
    )


def test_settings_the_judge_cannot_use_are_not_kept(tmp_path):
    session = Session(tmp_path, [], Limits(), None, time.monotonic() + 10)
    for state in (
        [0, "torch.float32"],
        [2, "torch.int64"],
        [True, "torch.float32"],
        "2",
        [2, "torch.float32", 1],
        None,
        [100000, "torch.float32"],
    ):
        session._note_torch_state(state)
    assert session.torch_states == []
    for state in (
        [2, "torch.float32"],
        [1, "torch.float32"],
        [2, "torch.float32"],
        [3, "torch.float64"],
        [4, "torch.float32"],
    ):
        session._note_torch_state(state)
    assert session.torch_states == [
        [2, "torch.float32"],
        [3, "torch.float64"],
        [4, "torch.float32"],
    ], "distinct, the latest last, at most three"


class _Trainer:
    """A student ``train_mlp`` as the judge holds it: trained networks differ with the settings it
    runs in."""

    def __init__(self, states):
        self.states, self.calls = states, []

    def _network(self, state, X, y, **kwargs):
        self.calls.append(state)
        gen = torch.Generator().manual_seed(0 if state is None else 1)
        return (
            torch.nn.Sequential(
                torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
            )
            .requires_grad_(False)
            .apply(lambda m: [p.copy_(torch.randn(p.shape, generator=gen)) for p in m.parameters()])
        )

    def __call__(self, X, y, **kwargs):
        return self._network(None, X, y, **kwargs)

    def other_torch_states(self):
        return self.states

    def in_torch_state(self, state):
        return lambda X, y, **kwargs: self._network(state, X, y, **kwargs)


def test_a_network_trained_in_an_earlier_setting_is_reproduced_in_it():
    X, y = torch.zeros(4, 784), torch.zeros(4, dtype=torch.long)
    trainer = _Trainer([[2, "torch.float32"]])
    earlier = wif._mlp("net", trainer.in_torch_state([2, "torch.float32"])(X, y))
    assert wif._reproduces(earlier, trainer, X, y), (
        "the earlier setting's network should be reproduced"
    )
    assert trainer.calls == [[2, "torch.float32"], None, [2, "torch.float32"]], trainer.calls

    stranger = wif.MLP("net", [w + 1 for w in earlier.weights])
    assert not wif._reproduces(stranger, trainer, X, y), (
        "a network no setting gives is not reproduced"
    )
    assert not wif._reproduces(earlier, _Trainer([]), X, y), (
        "with no other setting, only the current one counts"
    )
