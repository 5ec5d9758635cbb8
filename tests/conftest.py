"""Shared fixtures: one build of each assignment per test session, into a scratch folder, and one private
folder of reference values (:mod:`autograder.answers_cache`) for the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.answers_cache import ENV_DIR
from autograder.build import BuiltAssignment, build_assignment


@pytest.fixture(scope="session")
def answers_folder(tmp_path_factory) -> Path:
    """The session's answers cache folder (mode 0700): each reference value the checks, builds and batches of
    gradings need is computed once per session by the reference's own code, then loaded (the cache's
    fingerprints tie every file to that code). Tests of the cache itself and of the references' computation
    use folders of their own, or none."""
    folder = tmp_path_factory.mktemp("answers")
    folder.chmod(0o700)
    return folder


@pytest.fixture(scope="session")
def built_where_mlps_fail(tmp_path_factory, answers_folder) -> BuiltAssignment:
    """``where_mlps_fail`` built once (otter assign, its own tests run), outside the committed tree."""
    root = tmp_path_factory.mktemp("build")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_DIR, str(answers_folder))
        return build_assignment("where_mlps_fail", run_tests=True, build_root=root / "build",
                                student_root=root / "student_template")


@pytest.fixture(scope="session")
def repo() -> Path:
    return Path(__file__).resolve().parents[1]
