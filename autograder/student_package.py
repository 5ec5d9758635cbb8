"""The student package: what a student's notebook imports, without hidden tests or reference
solutions.

Student notebooks import the public tests (:mod:`autograder.public`), the
layered checks they use (:mod:`autograder.checks`, the package's
``__init__`` only) and the data loaders (:mod:`autograder.data`,
:mod:`autograder.mnist_data`). The full package also holds ``reference/``
(the reference solutions) and ``autograder/checks/<assignment>.py`` (the
hidden tests): a course hub that installs it for the public tests lets
students read both. ``python -m autograder student-package`` builds a wheel,
``vision-autograder-student``, of :data:`STUDENT_MODULES` only; install that
wherever students run their notebooks. Gradescope's image installs the full
package (``docker/install.sh``); the two provide the same ``autograder``
import and are not meant to be installed side by side.

The wheel is built by pip and setuptools from a staged copy of those files
with a ``pyproject.toml`` of its own (same version and requirements as the
full package), so nothing else of the repository can slip in.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DIST_NAME = "vision-autograder-student"
#: The repository's files that the student package holds, relative to the repository: nothing of
#: ``reference/`` and no ``autograder/checks/<assignment>.py`` (hidden tests). ``channel`` (its
#: limits on a network's parameters) and the figure modules are there because ``autograder.checks``
#: imports them inside some of its functions; the wire's other modules are not: no value in a
#: student's kernel has crossed it.
STUDENT_MODULES = (
    "autograder/__init__.py",
    "autograder/checks/__init__.py",
    "autograder/public/*.py",
    "autograder/data.py",
    "autograder/mnist_data.py",
    "autograder/mnist_files.py",
    "autograder/channel.py",
    "autograder/figures.py",
    "autograder/figure_parts.py",
    "autograder/figure_drawing.py",
)


def student_modules() -> list[str]:
    """The modules and packages of :data:`STUDENT_MODULES` by their import names, sorted
    (``autograder.public`` for its folder of files)."""
    names = set()
    for pattern in STUDENT_MODULES:
        parts = Path(pattern).with_suffix("").parts
        if parts[-1] in ("__init__", "*"):
            parts = parts[:-1]
        if len(parts) > 1:
            names.add(".".join(parts))
    return sorted(names)


class StudentPackageError(RuntimeError):
    """The wheel could not be built (pip's output says why) or holds something it must not."""


def student_files(repo: Path = REPO) -> list[Path]:
    """The files of :data:`STUDENT_MODULES` in ``repo``, relative to it, sorted.

    Raises:
        StudentPackageError: a listed file (or every file of a pattern) is missing.
    """
    found: list[Path] = []
    for pattern in STUDENT_MODULES:
        matches = sorted(p.relative_to(repo) for p in repo.glob(pattern) if p.is_file())
        if not matches:
            raise StudentPackageError(
                f"{pattern} is missing from {repo}: the student package needs it"
            )
        found.extend(matches)
    return sorted(found)


def _pyproject(repo: Path) -> str:
    """The staged ``pyproject.toml``: the full package's version and requirements, the student
    name."""
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    requirements = ",\n    ".join(f'"{r}"' for r in project["dependencies"])
    return f'''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{DIST_NAME}"
version = "{project["version"]}"
description = "What students' notebooks import for the vision labs: public tests, layered checks, \
data loaders. No hidden tests, no reference solutions."
requires-python = "{project["requires-python"]}"
dependencies = [
    {requirements},
]

[tool.setuptools.packages.find]
include = ["autograder*"]
'''


def forbidden(names: list[str]) -> list[str]:
    """The paths of a wheel's file list that must never reach students: anything of ``reference/``,
    any hidden-test module ``autograder/checks/<name>.py`` other than the layered checks'
    ``__init__.py``."""
    return [
        n
        for n in names
        if n.startswith("reference/")
        or (n.startswith("autograder/checks/") and n != "autograder/checks/__init__.py")
    ]


def build_student_package(out: Path, repo: Path = REPO, quiet: bool = True) -> Path:
    """Build the student wheel into ``out`` and return its path.

    Args:
        out: folder the wheel is written to (created if missing); an older
            wheel of the same name there is replaced.
        repo: the repository to take :data:`STUDENT_MODULES` from.
        quiet: hide pip's output unless the build fails.

    Returns:
        ``out/vision_autograder_student-<version>-py3-none-any.whl``.

    Raises:
        StudentPackageError: a file is missing, pip fails (its output is in
            the message), or the wheel holds a forbidden path.
    """
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="student-package-") as tmp:
        stage = Path(tmp) / "src"
        for rel in student_files(repo):
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / rel, stage / rel)
        (stage / "pyproject.toml").write_text(_pyproject(repo))
        wheels = Path(tmp) / "wheels"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--disable-pip-version-check",
                "--quiet",
                "--wheel-dir",
                str(wheels),
                str(stage),
            ],
            capture_output=True,
            text=True,
        )
        built = sorted(wheels.glob("*.whl"))
        if proc.returncode != 0 or len(built) != 1:
            raise StudentPackageError(
                f"pip wheel failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
            )
        if not quiet:
            print(proc.stdout + proc.stderr, end="")
        with zipfile.ZipFile(built[0]) as wheel:
            leaked = forbidden(wheel.namelist())
        if leaked:
            raise StudentPackageError(f"the student wheel holds {', '.join(leaked)}; it must not")
        target = out / built[0].name
        target.unlink(missing_ok=True)
        shutil.move(str(built[0]), target)
    return target
