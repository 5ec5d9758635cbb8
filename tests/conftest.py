"""Shared fixtures: one build of each assignment per test session, into a scratch folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.build import BuiltAssignment, build_assignment


@pytest.fixture(scope="session")
def built_where_mlps_fail(tmp_path_factory) -> BuiltAssignment:
    """``where_mlps_fail`` built once (otter assign, its own tests run), outside the committed tree."""
    root = tmp_path_factory.mktemp("build")
    return build_assignment("where_mlps_fail", run_tests=True, build_root=root / "build",
                            student_root=root / "student_template")


@pytest.fixture(scope="session")
def repo() -> Path:
    return Path(__file__).resolve().parents[1]
