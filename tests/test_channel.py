"""What crosses the wire for a student's network: its parameters, as data, and nothing it can fake later.

The judge grades a network by the weights it holds, in its own copy of the
architecture (``autograder.checks.when_it_fails.MLP``), so the copies that
cross with a module must be the module's parameters, in ``parameters()``
order, taken when the value crossed.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autograder import channel
from autograder.checks import CheckFailure, expect_module_parameters


class _Handle(channel.Handle):
    def __init__(self, handle: int, name: str, kind: str):
        self.handle, self.name, self.type_name = handle, name, kind


def _cross(value):
    """``value`` encoded by the student process, through the wire format, decoded by the judge."""
    handles: dict[int, object] = {}
    payload = channel.dump(channel.encode(value, handles))
    return channel.decode(channel.load(payload), _Handle), handles


def _mlp(hidden: int = 8) -> nn.Sequential:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def test_a_network_crosses_with_copies_of_its_parameters_in_order():
    net = _mlp()
    expected = [p.detach().clone() for p in net.parameters()]
    actual, handles = _cross(net)
    with torch.no_grad():
        net[0].weight.zero_()  # a change after crossing does not reach the judge's copies
    assert isinstance(actual, _Handle) and handles[actual.handle] is net
    assert actual.is_module and actual.type_name == "Sequential"
    assert [tuple(p.shape) for p in actual.parameters] == [(8, 784), (8,), (10, 8), (10,)]
    for i, (a, e) in enumerate(zip(actual.parameters, expected)):
        torch.testing.assert_close(a, e, rtol=0, atol=0, msg=f"parameter {i} changed on the wire")
    assert not any(p.requires_grad for p in actual.parameters), "the judge's copies are data, not autograd leaves"


def test_a_function_crosses_without_parameters():
    actual, _ = _cross(lambda x: x)
    assert isinstance(actual, _Handle)
    assert (actual.is_module, actual.parameters) == (False, None)


def test_a_network_nested_in_a_container_keeps_its_parameters():
    actual, _ = _cross({"nets": [_mlp(4)]})
    assert [tuple(p.shape) for p in actual["nets"][0].parameters] == [(4, 784), (4,), (10, 4), (10,)]


def test_a_network_too_large_crosses_without_parameters(monkeypatch):
    monkeypatch.setattr(channel, "MAX_PARAMETERS", 1000)  # the 8-unit MLP has 6,370
    actual, _ = _cross(_mlp())
    assert (actual.is_module, actual.parameters) == (True, None)
    with pytest.raises(CheckFailure, match=r"^`net_memo` is a network whose parameters the grader cannot read"):
        expect_module_parameters("net_memo", actual)


def test_an_overridden_parameters_method_does_not_choose_what_crosses():
    class Liar(nn.Sequential):
        def parameters(self, recurse=True):  # what a student could write to show other weights
            return iter([torch.zeros(8, 784)])

    net = Liar(nn.Linear(784, 8), nn.ReLU(), nn.Linear(8, 10))
    actual, _ = _cross(net)
    assert [tuple(p.shape) for p in actual.parameters] == [(8, 784), (8,), (10, 8), (10,)]
    torch.testing.assert_close(actual.parameters[0], net[0].weight.detach(), rtol=0, atol=0)


@pytest.mark.parametrize("forged", ["not a list", [1.0, 2.0], [torch.zeros(2)] * (channel.MAX_PARAMETER_TENSORS + 1)])
def test_forged_parameters_are_not_taken(forged):
    entry = {channel.KIND: "callable", "handle": 1, "type": "Sequential", "name": "net", "module": True,
             "parameters": forged}
    actual = channel.decode(channel.load(channel.dump(entry)), _Handle)
    assert (actual.is_module, actual.parameters) == (True, None)


@pytest.mark.parametrize("value, message", [
    (lambda x: x, r"^`net` should be a PyTorch network \(an nn.Module such as nn.Sequential\) whose parameters the "
                  r"grader can read, but it is a function\.$"),
    (torch.zeros(3), r"^`net` should be a PyTorch network .* but it is a Tensor\.$"),
    (None, r"^`net` is not defined"),
])
def test_expect_module_parameters_names_the_variable_and_what_it_is(value, message):
    crossed = _cross(value)[0] if callable(value) else value
    with pytest.raises(CheckFailure, match=message):
        expect_module_parameters("net", crossed)


def test_expect_module_parameters_reads_a_network_in_process_and_through_the_wire_alike():
    net = _mlp()
    in_process = expect_module_parameters("net", net)
    crossed = expect_module_parameters("net", _cross(net)[0])
    assert len(in_process) == len(crossed) == 4
    for i, (a, e) in enumerate(zip(crossed, in_process)):
        torch.testing.assert_close(a, e, rtol=0, atol=0, msg=f"parameter {i} differs between the two ways")
