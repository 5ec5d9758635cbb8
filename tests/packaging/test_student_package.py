"""The student package (``python -m autograder student-package``): what student notebooks import,
nothing more.

The wheel must hold the public tests, the layered checks and the data
loaders, and none of the hidden tests or reference solutions; and the
student versions' imports must work from it alone (a Python that sees the
wheel's files and the third-party packages, not this repository).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import autograder
from autograder import cli
from autograder.build import REPO, STUDENT_TEMPLATE, available
from autograder.student_package import (
    DIST_NAME,
    StudentPackageError,
    build_student_package,
    forbidden,
    student_files,
    student_modules,
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_student_package(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def unpacked(wheel, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(root)
    return root


def _modules(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return sorted(n for n in zf.namelist() if ".dist-info/" not in n)


def test_wheel_holds_the_public_tests_and_no_hidden_test_or_reference(wheel):
    actual = _modules(wheel)
    assert actual == sorted(p.as_posix() for p in student_files()), (
        "the wheel holds other files than STUDENT_MODULES"
    )
    assert "autograder/public/__init__.py" in actual, "the generic public tests are missing"
    for name in available():
        if (REPO / "autograder" / "public" / f"{name}.py").is_file():
            assert f"autograder/public/{name}.py" in actual, (
                f"the public tests of {name} are missing"
            )
        assert f"autograder/checks/{name}.py" not in actual, (
            f"the hidden tests of {name} are in the student wheel"
        )
    assert not [n for n in actual if n.startswith("reference/")], (
        "reference solutions are in the student wheel"
    )
    judge_side = ["judge", "session", "student_process", "scratch_folder", "sandbox_user", "notes"]
    in_wheel = [n for n in judge_side if f"autograder/{n}.py" in actual]
    assert not in_wheel, f"the judge's modules are in the student wheel: {in_wheel}"


def test_wheel_metadata_names_the_student_distribution_with_the_full_package_requirements(wheel):
    with zipfile.ZipFile(wheel) as zf:
        [metadata_name] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        lines = zf.read(metadata_name).decode().splitlines()
    assert f"Name: {DIST_NAME}" in lines
    assert f"Version: {autograder.__version__}" in lines
    assert "Requires-Dist: torch==2.14.1" in lines
    assert "Requires-Dist: otter-grader==7.0.0" in lines
    assert wheel.name == f"vision_autograder_student-{autograder.__version__}-py3-none-any.whl"


def test_forbidden_names_reference_files_and_hidden_test_modules():
    names = [
        "reference/__init__.py",
        "reference/where_mlps_fail.py",
        "autograder/checks/__init__.py",
        "autograder/checks/where_mlps_fail.py",
        "autograder/checks/properties.py",
        "autograder/public/where_mlps_fail.py",
        "autograder/data.py",
    ]
    assert forbidden(names) == [
        "reference/__init__.py",
        "reference/where_mlps_fail.py",
        "autograder/checks/where_mlps_fail.py",
        "autograder/checks/properties.py",
    ]


def _imported_modules(source: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in ``source`` may load, anywhere in it
    (functions too): ``from autograder import figures`` gives ``autograder`` and
    ``autograder.figures``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _is_module(root: Path, dotted: str) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_every_module_of_this_package_the_wheel_imports_is_in_the_wheel(unpacked):
    """Imports inside functions too: ``autograder.checks`` loads ``figures`` and ``channel``
    lazily."""
    missing = {}
    for path in sorted((unpacked / "autograder").rglob("*.py")):
        for dotted in _imported_modules(path.read_text()):
            if (
                dotted.split(".")[0] in ("autograder", "reference")
                and _is_module(REPO, dotted)
                and not _is_module(unpacked, dotted)
            ):
                missing.setdefault(path.relative_to(unpacked).as_posix(), []).append(dotted)
    assert missing == {}, f"modules imported from the student wheel but not in it: {missing}"


def _student_imports(name: str) -> list[str]:
    """The ``autograder`` import statements of the student version of ``name``: its code cells, the
    public tests Otter keeps in its metadata, and its support files."""
    folder = STUDENT_TEMPLATE / name
    nb = json.loads((folder / f"{name}.ipynb").read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    sources += list(nb["metadata"]["otter"]["tests"].values())
    sources += [p.read_text() for p in sorted(folder.glob("*.py"))]
    statements = set()
    for source in sources:
        python = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
        )
        for node in ast.walk(ast.parse(python)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograder"):
                statements.add(f"from {node.module} import {', '.join(a.name for a in node.names)}")
            elif isinstance(node, ast.Import) and any(
                a.name.startswith("autograder") for a in node.names
            ):
                statements.add(f"import {', '.join(a.name for a in node.names)}")
    return sorted(statements)


#: Run by a Python that sees only the standard library, the unpacked wheel and the venv's
#: site-packages (``-I -S``: no .pth file runs, so the editable install of this repository is not on
#: the path).
ONLY_THE_WHEEL = r'''
import importlib, json, sys
wheel, site_packages, names, statements = json.loads(sys.argv[1])
sys.path[:0] = [wheel]
sys.path.append(site_packages)
report = {}
import autograder
report["autograder_file"] = autograder.__file__
for module in ["reference"] + [f"autograder.checks.{n}" for n in names]:
    try:
        importlib.import_module(module)
        report[module] = "imported"
    except ModuleNotFoundError as err:
        report[module] = f"ModuleNotFoundError: {err.name}"
failed = {}
for statement in statements:
    try:
        exec(statement, {})
    except Exception as err:
        failed[statement] = f"{type(err).__name__}: {err}"
report["failed_statements"] = failed
import torch
from autograder.checks import CheckFailure
from autograder.public.where_mlps_fail import public_tensor
public_tensor("x", torch.zeros(1, 1, 28, 28), (1, 1, 28, 28))
try:
    public_tensor("x", [[0.0] * 28] * 28, (1, 1, 28, 28))
    report["list_for_tensor"] = "passed"
except CheckFailure as failure:
    report["list_for_tensor"] = str(failure)
print(json.dumps(report))
'''


def test_student_versions_import_from_the_wheel_alone(unpacked):
    names = available()
    statements = sorted({s for name in names for s in _student_imports(name)})
    assert "from autograder.public.where_mlps_fail import public_defined" in statements
    site_packages = sysconfig.get_paths()["purelib"]
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            ONLY_THE_WHEEL,
            json.dumps([str(unpacked), site_packages, names, statements]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(report["autograder_file"]).is_relative_to(unpacked), (
        "autograder was imported from the repository"
    )
    assert report["reference"] == "ModuleNotFoundError: reference"
    for name in names:
        assert (
            report[f"autograder.checks.{name}"] == f"ModuleNotFoundError: autograder.checks.{name}"
        )
    assert report["failed_statements"] == {}
    assert report["list_for_tensor"].startswith("`x` should be"), report["list_for_tensor"]


def test_student_files_says_which_file_is_missing(tmp_path):
    (tmp_path / "autograder").mkdir()
    (tmp_path / "autograder" / "__init__.py").write_text("")
    with pytest.raises(StudentPackageError, match=r"autograder/checks/__init__\.py is missing"):
        student_files(tmp_path)


def test_cli_builds_the_wheel_into_the_folder_given(tmp_path, capsys):
    assert cli.main(["student-package", "--out", str(tmp_path)]) == 0
    [built] = tmp_path.glob("*.whl")
    printed = capsys.readouterr().out
    assert f"student package: {built}" in printed
    assert forbidden(zipfile.ZipFile(built).namelist()) == []
    # a newcomer's walkthrough: the summary left out channel and figures, which the wheel holds, and
    # its pip line pulled PyPI's 6 GB CUDA torch (and a later one's left Jupyter out, which the
    # README's line installs)
    packaged = {
        name.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        for name in zipfile.ZipFile(built).namelist()
        if name.startswith("autograder/") and name.endswith(".py")
    }
    listed = printed.split("  holds ", 1)[1].split(" (", 1)[0].split(", ")
    assert listed == student_modules() and all(
        any(p == m or p.startswith(m + ".") for p in packaged) for m in listed
    ), f"the summary's modules {listed} should be the wheel's: {sorted(packaged)}"
    assert (
        f"pip install notebook {built.name} --extra-index-url https://download.pytorch.org/whl/cpu"
        in printed
    ), printed
