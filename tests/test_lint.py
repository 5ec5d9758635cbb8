"""ruff finds nothing in the repository, with the rules of pyproject.toml's ``[tool.ruff]``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _ruff() -> str | None:
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError:
        beside = Path(sys.executable).with_name("ruff")
        return str(beside) if beside.exists() else shutil.which("ruff")
    return str(find_ruff_bin())


@pytest.mark.skipif(_ruff() is None, reason="ruff is not installed (pip install -e .[dev])")
def test_the_repository_passes_ruff():
    proc = subprocess.run(
        [_ruff(), "check", "--no-cache", "--output-format", "concise", "."],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
