"""ruff finds nothing in the product folders, with the rules of pyproject.toml's ``[tool.ruff]``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: The folders whose Python is the product: grading, reference solutions, benchmarks, the
#: assignments' support modules, the deployment and the scripts.
PRODUCT = ["autograder", "reference", "benchmarks", "assignments", "docker", "bin"]

#: Files not yet held to the rules: their sandbox sections (``StudentProcess``, the resource
#: limits, the sandbox claim, the worker) are being rewritten apart from this change.
NOT_YET_CLEAN = ["autograder/judge.py", "autograder/worker.py"]


def _ruff() -> str | None:
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError:
        beside = Path(sys.executable).with_name("ruff")
        return str(beside) if beside.exists() else shutil.which("ruff")
    return str(find_ruff_bin())


@pytest.mark.skipif(_ruff() is None, reason="ruff is not installed (pip install -e .[dev])")
def test_product_folders_pass_ruff():
    proc = subprocess.run(
        [_ruff(), "check", "--no-cache", "--output-format", "concise",
         "--extend-exclude", ",".join(NOT_YET_CLEAN), *PRODUCT],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
