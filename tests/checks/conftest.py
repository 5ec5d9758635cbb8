"""The check-level tests compute at one torch thread and read the reference values from the
session's cache."""

from __future__ import annotations

import pytest
import torch

from autograder.answers_cache import ENV_DIR


@pytest.fixture(scope="package", autouse=True)
def one_thread_and_the_sessions_answers(answers_folder):
    """One torch thread (the thread count the references are computed and graded at; two threads on
    two busy cores spin against each other), and ``$VISION_AUTOGRADER_ANSWERS_DIR`` naming the
    session's folder, so a reference value these tests need (``learning_curves()``,
    ``noise_free_errors()``, the trained networks) is computed once by its own code instead of at
    every check that reads it. Both are put back afterwards: ``tests/reference`` checks the
    computations themselves."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_DIR, str(answers_folder))
        yield
    torch.set_num_threads(threads)
