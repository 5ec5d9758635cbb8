"""What the judge keeps of a student's values after the student process was restarted
(``judge._keep_first``): the first read's data, with only the function handles taken from the
replay."""

from __future__ import annotations

import torch

from autograder.session import RemoteCallable, _with_new_handles


def _handle(number: int, generation: int) -> RemoteCallable:
    handle = RemoteCallable(
        session=None, handle=number, name=f"f{number}", kind="function", generation=generation
    )
    handle.is_module, handle.parameters = False, None
    return handle


def test_a_container_keeps_its_first_data_and_takes_only_the_new_handle():
    # a dict rebuilt in the replay from what the judge's calls showed (`noise_free`), with a
    # function added, keeps its first data: only the function's handle is taken from the replay
    old, new = _handle(1, generation=0), _handle(7, generation=1)
    first = {"vignetted": torch.tensor([0.5, 0.25]), "_": old}
    now = {"vignetted": torch.tensor([0.0, 0.0]), "_": new, "extra": 3}

    actual = _with_new_handles(first, now)

    assert torch.equal(actual["vignetted"], torch.tensor([0.5, 0.25])), (
        "the replay's data must not replace the first"
    )
    assert actual["_"] is new, (
        "the function's handle must be the replay's (the first one died with its process)"
    )
    assert set(actual) == {"vignetted", "_"}, (
        f"keys the first read did not have must not appear: {sorted(actual)}"
    )


def test_a_handle_missing_from_the_replay_stays_dead_and_a_network_keeps_its_first_parameters():
    old_f, old_net, new_net = _handle(1, 0), _handle(2, 0), _handle(9, 1)
    old_net.is_module, old_net.parameters = True, [torch.ones(2)]
    first = [old_f, old_net, (torch.zeros(1), 2.5)]
    now = [3, new_net, (torch.ones(1), 2.5)]

    actual = _with_new_handles(first, now)

    assert actual[0] is old_f, (
        "a function the replay no longer defines keeps its dead handle (calling it fails)"
    )
    assert (
        actual[1] is new_net
        and new_net.is_module
        and torch.equal(new_net.parameters[0], torch.ones(2))
    ), "a network takes the replay's handle with the first read's parameters"
    assert torch.equal(actual[2][0], torch.zeros(1)), "nested data stays as first read"
