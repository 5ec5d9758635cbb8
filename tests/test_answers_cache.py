"""Tests for ``autograder/answers_cache.py``: reference values computed once per batch, and trusted.

Unit tests first (a toy value, a folder under ``tmp_path``): a cache hit
equals what was computed, a file that was tampered with, is owned by another
user, is writable by others or is a symbolic link is refused and recomputed,
an open folder is not used, two processes starting together compute once,
and the student process never receives the folder's name. Then every
assignment's reference values through the cache, and (marked ``grading``) a
real batch of ``where_mlps_fail`` submissions: computed once, scores the same
on regrading.
"""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder import answers_cache
from autograder.answers_cache import ENV_DIR, CacheRefused, cached

REPO = Path(__file__).resolve().parents[1]


def assert_same(actual, expected, where="value"):
    """Equal types and values all the way down (tensors: dtype, shape and every element, NaN =
    NaN)."""
    assert type(actual) is type(expected), (
        f"{where}: type {type(actual).__name__}, expected {type(expected).__name__}"
    )
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
            f"{where}: {actual.dtype} {tuple(actual.shape)}, expected {expected.dtype} "
            f"{tuple(expected.shape)}"
        )
        if expected.is_floating_point():
            same = torch.equal(actual.isnan(), expected.isnan()) and torch.equal(
                actual.nan_to_num(), expected.nan_to_num()
            )
        else:
            same = torch.equal(actual, expected)
        assert same, f"{where}: tensor values differ"
    elif isinstance(expected, np.ndarray):
        assert actual.dtype == expected.dtype and np.array_equal(
            actual, expected, equal_nan=True
        ), f"{where}: arrays differ"
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), (
            f"{where}: keys {list(actual)}, expected {list(expected)}"
        )
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), (
            f"{where}: length {len(actual)}, expected {len(expected)}"
        )
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), f"{where}: {actual!r}, expected nan"
    else:
        assert actual == expected, f"{where}: {actual!r}, expected {expected!r}"


def toy_value() -> dict:
    """Every kind of value the references hold: tensors, Size, tuples, dicts with tuple keys,
    floats, str, bool."""
    return {
        "t": torch.arange(6, dtype=torch.float64).reshape(2, 3) / 7,
        "i": torch.tensor([3, 1], dtype=torch.int64),
        "size": torch.Size([784, 10]),
        "peak": (3, 4, 0.5),
        "nan": float("nan"),
        "name": "Trouser",
        "flag": True,
        ("equivariant", "conv"): 1e-25,
        "nested": [{"a": 1}, (2, "b")],
    }


class Counter:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return toy_value()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "answers"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)  # whatever the umask
    monkeypatch.setenv(ENV_DIR, str(folder))
    return folder


# ------------------------------------------------------------------ hits and misses


def test_without_a_folder_every_call_computes(monkeypatch):
    monkeypatch.delenv(ENV_DIR, raising=False)
    compute = Counter()
    cached("toy", compute)
    cached("toy", compute)
    assert compute.calls == 2, (
        f"with no cache folder each call should compute, computed {compute.calls} times"
    )


def test_a_hit_returns_what_was_computed_and_computes_once(cache_dir, capfd):
    compute = Counter()
    first = cached("toy", compute)
    second = cached("toy", compute)
    assert compute.calls == 1, (
        f"the second call should load the stored value, but computed {compute.calls} times"
    )
    assert_same(second, first)
    assert_same(second, toy_value())
    path = cache_dir / "toy.pt"
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == 0o600, f"the cache file should be private to its owner (0600), has {mode:o}"
    err = capfd.readouterr().err
    assert "answers cache: computed toy" in err and "answers cache: loaded toy" in err, (
        f"each compute and load should be noted on stderr, got {err!r}"
    )


def test_a_changed_source_file_is_recomputed(cache_dir, tmp_path):
    source = tmp_path / "reference.py"
    source.write_text("A = 1\n")
    compute = Counter()
    cached("toy", compute, sources=(source,))
    source.write_text("A = 2\n")
    cached("toy", compute, sources=(source,))
    assert compute.calls == 2, "a value stored for other reference code should be recomputed"


# ------------------------------------------------------------------ refused files


def _stored(cache_dir: Path) -> Path:
    cached("toy", toy_value)
    path = cache_dir / "toy.pt"
    assert path.is_file(), "the first call should have written the cache file"
    return path


def _assert_refused_and_recomputed(path: Path, capfd, reason_part: str) -> str:
    """Returns what was printed on stdout meanwhile."""
    capfd.readouterr()
    compute = Counter()
    value = cached("toy", compute)
    assert compute.calls == 1, (
        f"a refused cache file should be recomputed, computed {compute.calls} times"
    )
    assert_same(value, toy_value())
    out, err = capfd.readouterr()
    assert "refused" in err and reason_part in err, (
        f"the refusal should say {reason_part!r}, stderr: {err!r}"
    )
    return out


def test_a_tampered_payload_is_refused(cache_dir, capfd):
    path = _stored(cache_dir)
    data = bytearray(path.read_bytes())
    data[-40] ^= 0xFF  # one byte of the pickled payload
    path.write_bytes(bytes(data))
    _assert_refused_and_recomputed(path, capfd, "SHA-256")
    # rewritten
    assert_same(answers_cache.load(path, "toy", answers_cache.fingerprint("toy")), toy_value())


class Smuggled:
    """Unpickled by plain pickle, this calls ``print``: code, not data."""

    def __reduce__(self):
        return (print, ("smuggled code ran",))


def test_a_payload_that_would_run_code_is_refused_even_with_a_matching_digest(cache_dir, capfd):
    import hashlib
    import io

    path = _stored(cache_dir)
    header = json.loads(path.read_bytes().split(b"\n", 1)[0])
    buffer = io.BytesIO()
    torch.save({"x": Smuggled()}, buffer)
    payload = buffer.getvalue()
    header["sha256"] = hashlib.sha256(payload).hexdigest()
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)
    out = _assert_refused_and_recomputed(path, capfd, "not plain data")
    assert "smuggled code ran" not in out, "the payload's code should never run"


def test_a_file_without_a_header_is_refused(cache_dir, capfd):
    path = _stored(cache_dir)
    path.write_bytes(b"garbage")
    _assert_refused_and_recomputed(path, capfd, "no valid header")


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666], ids=oct)
def test_a_file_writable_by_group_or_others_is_refused(cache_dir, capfd, mode):
    path = _stored(cache_dir)
    path.chmod(mode)
    _assert_refused_and_recomputed(path, capfd, "writable by group or others")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, (
        "the recomputed value should replace the file, mode 0600"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_owned_by_another_user_is_refused(cache_dir, capfd):
    path = _stored(cache_dir)
    os.chown(path, 65534, 65534)
    _assert_refused_and_recomputed(path, capfd, "owned by user id 65534")
    assert path.stat().st_uid == os.geteuid(), (
        "the recomputed value should replace the foreign file"
    )


def test_a_symbolic_link_is_refused(cache_dir, capfd, tmp_path):
    elsewhere = tmp_path / "elsewhere.pt"
    os.replace(_stored(cache_dir), elsewhere)
    (cache_dir / "toy.pt").symlink_to(elsewhere)
    _assert_refused_and_recomputed(cache_dir / "toy.pt", capfd, "symbolic link")


def test_load_raises_for_each_refusal(cache_dir):
    path = _stored(cache_dir)
    fp = answers_cache.fingerprint("toy")
    with pytest.raises(CacheRefused, match="other code"):
        answers_cache.load(path, "toy", fp[::-1])
    with pytest.raises(CacheRefused, match="other code"):
        answers_cache.load(path, "other", fp)
    with pytest.raises(FileNotFoundError):
        answers_cache.load(cache_dir / "missing.pt", "missing", fp)


@pytest.mark.parametrize("mode", [0o750, 0o705, 0o777], ids=oct)
def test_a_folder_open_to_group_or_others_is_not_used(cache_dir, capfd, mode):
    cache_dir.chmod(mode)
    compute = Counter()
    cached("toy", compute)
    cached("toy", compute)
    assert compute.calls == 2, "an open folder should not be used: every call computes"
    assert not (cache_dir / "toy.pt").exists(), "nothing should be written to an open folder"
    assert "not used" in capfd.readouterr().err, "an open folder should be reported on stderr"


def test_a_value_that_is_not_plain_data_is_returned_but_not_stored(cache_dir, capfd):
    value = cached("array", lambda: np.arange(3))
    assert np.array_equal(value, np.arange(3)), (
        "the computed value should be returned even if it cannot be stored"
    )
    assert not (cache_dir / "array.pt").exists(), (
        "a value weights_only cannot read back should not be stored"
    )
    assert "could not store" in capfd.readouterr().err


def test_a_lock_that_cannot_be_taken_means_computing_without_the_cache(cache_dir, capfd, tmp_path):
    (cache_dir / ".toy.lock").symlink_to(tmp_path / "elsewhere.lock")
    compute = Counter()
    assert_same(cached("toy", compute), toy_value())
    assert compute.calls == 1 and not (cache_dir / "toy.pt").exists(), (
        "with its lock unavailable the value should be computed and not stored"
    )
    assert not (tmp_path / "elsewhere.lock").exists(), (
        "the lock's symbolic link should not be followed"
    )
    assert "without the cache" in capfd.readouterr().err


def test_names_are_file_names_only(cache_dir):
    with pytest.raises(ValueError, match="letters, digits"):
        cached("../escape", toy_value)


# ------------------------------------------------------------------ concurrency and the batch
# folder

RACER = """
import sys, time
from autograder.answers_cache import cached
def compute():
    with open(sys.argv[1], "a") as f:
        f.write("computed\\n")
    time.sleep(1.0)
    return {"x": 1}
print(cached("race", compute))
"""


def test_two_processes_starting_together_compute_once(cache_dir, tmp_path):
    log = tmp_path / "computations.txt"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(log)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, f"a racing process failed: {err}"
        assert out.strip() == "{'x': 1}", f"every process should get the value, got {out!r}"
    assert log.read_text().count("computed") == 1, (
        f"the value should be computed once, log: {log.read_text()!r}"
    )


def test_batch_folder_is_private_set_for_the_batch_and_removed(monkeypatch):
    monkeypatch.setenv(ENV_DIR, "/previous")
    with answers_cache.batch_folder() as folder:
        assert os.environ[ENV_DIR] == str(folder), (
            "the batch folder should be named in the environment"
        )
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, "the batch folder should be mode 0700"
        assert answers_cache.folder() == folder, "the batch folder should be trusted"
    assert not folder.exists(), "a temporary batch folder should be removed at the end"
    assert os.environ[ENV_DIR] == "/previous", "the previous value should be restored"


def test_batch_folder_refuses_an_open_folder(tmp_path):
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o755)
    with pytest.raises(ValueError, match="mode 0700"):
        with answers_cache.batch_folder(open_folder):
            pass


def test_without_folder_hides_the_variable(monkeypatch):
    monkeypatch.setenv(ENV_DIR, "/somewhere")
    with answers_cache.without_folder():
        assert ENV_DIR not in os.environ, "the variable should be unset inside without_folder()"
    assert os.environ[ENV_DIR] == "/somewhere", (
        "the variable should be restored after without_folder()"
    )


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_the_student_process_does_not_receive_the_folder(monkeypatch, tmp_path, start):
    """The judge starts the student process with an explicit environment that leaves the variable
    out, forked from the template (warm) or started anew (cold). Each route is intercepted where
    the environment is handed over, so the test does not depend on whether an earlier test in the
    same process left a template running."""
    from autograder import student_process
    from autograder.judge_interface import Limits

    seen = {}

    class Stop(Exception):
        pass

    def fake_spawn(channel_end, spec, env, startup_seconds):
        seen.update(env=env, spec_env=spec["env"])
        raise Stop

    def fake_popen(command, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    if start == "warm":
        monkeypatch.setattr(student_process.zygote, "spawn", fake_spawn)
    else:
        monkeypatch.setattr(student_process.zygote, "spawn", lambda *args: None)
        monkeypatch.setattr(student_process.subprocess, "Popen", fake_popen)
    process = student_process.StudentProcess(tmp_path, Limits(), user=None)
    with pytest.raises(Stop):
        process.start()
    assert seen.get("env") is not None, "the student process should get an explicit environment"
    assert seen["env"].get("OMP_NUM_THREADS") == "1", (
        "sanity: the passed-through variables should reach the student"
    )
    for name in ("env", "spec_env"):
        leaked = [k for k in seen.get(name) or {} if "ANSWERS" in k]
        assert not leaked, (
            f"the student process should not learn where the cache is, but its {name} has {leaked}"
        )


def test_the_template_does_not_receive_the_folder(monkeypatch, tmp_path):
    """The warm start's template gets the student's environment less the per-student folders, so
    the cache's folder (left out of the student's) cannot reach it either."""
    from autograder import student_process, zygote

    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    template_env = zygote.template_env(student_process.student_env(tmp_path))
    leaked = [k for k in template_env if "ANSWERS" in k]
    assert not leaked, f"the template should not learn where the cache is, but got {leaked}"
    assert template_env["HOME"] == os.environ.get("HOME", "/")


# ------------------------------------------------------------------ every assignment's reference
# values


def _round_trip(clear, call):
    """``call()`` computed (and stored), then loaded after ``clear()``; both returned."""
    clear()
    computed = call()
    clear()
    loaded = call()
    clear()
    return computed, loaded


def test_where_mlps_fail_answers_through_the_cache(cache_dir, capfd):
    from reference import where_mlps_fail as ref

    computed, loaded = _round_trip(ref._answers.cache_clear, ref.answers)
    assert "loaded where_mlps_fail.answers" in capfd.readouterr().err, "the second call should load"
    assert_same(loaded, computed, "where_mlps_fail.answers()")


def test_telling_things_apart_answers_and_model_through_the_cache(cache_dir, capfd):
    from reference import telling_things_apart as ref

    def clear():
        ref._answers.cache_clear()
        ref._trained.cache_clear()

    computed, loaded = _round_trip(
        clear, lambda: (ref.answers(), ref.reference_model().state_dict())
    )
    err = capfd.readouterr().err
    assert (
        "loaded telling_things_apart.answers" in err
        and "loaded telling_things_apart.trained" in err
    ), err
    assert_same(loaded[0], computed[0], "telling_things_apart.answers()")
    assert_same(dict(loaded[1]), dict(computed[1]), "telling_things_apart.reference_model()")


def test_when_it_fails_answers_and_training_through_the_cache(cache_dir, capfd):
    from reference import when_it_fails as ref

    def clear():
        ref._exact.cache_clear()
        ref._TRAINED.clear()

    computed, loaded = _round_trip(clear, lambda: (ref.answers(), ref.trained_answers()))
    err = capfd.readouterr().err
    assert "loaded when_it_fails.answers" in err and "loaded when_it_fails.trained." in err, err
    assert_same(loaded, computed, "when_it_fails (answers(), trained_answers())")


def test_inductive_bias_experiments_through_the_cache(cache_dir, capfd):
    from reference import inductive_bias as ref

    computed, loaded = _round_trip(
        lambda: None, lambda: (ref.noise_free_errors(), ref.learning_curves(seeds=(0,)))
    )
    err = capfd.readouterr().err
    assert (
        "loaded inductive_bias.noise_free_errors" in err
        and "loaded inductive_bias.learning_curves." in err
    ), err
    assert_same(loaded[0], computed[0], "noise_free_errors()")
    for field in ("targets", "models", "sizes", "seeds", "noise_sd", "errors"):
        assert_same(
            getattr(loaded[1], field), getattr(computed[1], field), f"learning_curves().{field}"
        )


# ------------------------------------------------------------------ a real batch


@pytest.mark.grading
def test_a_batch_computes_the_answers_once_and_regrading_gives_the_same_scores(tmp_path):
    from autograder.build import build_assignment
    from autograder.grade import grade_many
    from tests.fixtures.submissions import apply
    from tests.fixtures.where_mlps_fail.catalogue import WRONG

    built = build_assignment(
        "where_mlps_fail",
        run_tests=False,
        build_root=tmp_path / "build",
        student_root=tmp_path / "student",
    )
    wrong = WRONG[0]
    subs = [
        built.solution,
        apply(built.solution, wrong, tmp_path / "subs" / f"{wrong.name}.ipynb"),
        built.solution,
    ]
    answers_dir = tmp_path / "answers"

    first = grade_many(
        built.autograder_zip,
        subs,
        tmp_path / "first",
        jobs=2,
        progress=False,
        answers_dir=answers_dir,
    )
    stored = answers_dir / "where_mlps_fail.answers.pt"
    assert stored.is_file(), f"the batch should have stored the reference values at {stored}"
    written = stored.stat().st_mtime_ns
    logs = [
        (tmp_path / "first" / label / "grading.log").read_text()
        for label in ("solution", wrong.name, "solution-2")
    ]
    computed = sum(log.count("answers cache: computed where_mlps_fail.answers") for log in logs)
    loaded = sum(log.count("answers cache: loaded where_mlps_fail.answers") for log in logs)
    # two workers, each with one judge for the batch: the first grading computes the values, the
    # other worker's judge loads them, and a judge that has them already in memory reads neither
    assert computed == 1 and loaded in (1, 2), (
        f"one judge should compute the values and the other load them: {computed}, {loaded}"
    )
    assert all(r.error is None for r in first), [r.error for r in first]
    assert first[0].total == first[0].possible, (
        f"the solution should score full marks, got {first[0].scores}"
    )
    assert first[0].scores == first[2].scores, (
        "the same notebook should get the same scores in one batch"
    )
    assert first[1].scores[wrong.loses][0] == 0, (
        f"{wrong.name} should lose {wrong.loses}: {first[1].scores}"
    )

    # the regrade: the two notebooks again (the solution's second copy above already showed one
    # notebook's scores repeat within a batch)
    again = grade_many(
        built.autograder_zip,
        subs[:2],
        tmp_path / "again",
        jobs=2,
        progress=False,
        answers_dir=answers_dir,
    )
    assert [r.scores for r in again] == [r.scores for r in first[:2]], (
        "regrading should give identical scores"
    )
    assert stored.stat().st_mtime_ns == written, (
        "regrading with the same folder should not rewrite the values"
    )
    logs = [
        (tmp_path / "again" / label / "grading.log").read_text()
        for label in ("solution", wrong.name)
    ]
    assert all("answers cache: loaded where_mlps_fail.answers" in log for log in logs), (
        "every judge of the second batch should load the stored values"
    )


# ------------------------------------------------------------------ filled where grading is built


@pytest.mark.parametrize("name", ["no_such_assignment", "../where_mlps_fail", "Where_MLPs"])
def test_fill_refuses_what_is_not_an_assignment(tmp_path, name):
    with pytest.raises(ValueError) as info:
        answers_cache.fill(name, tmp_path / "answers")
    assert repr(name) in str(info.value) or f"reference.{name}" in str(info.value), info.value
    assert not (tmp_path / "answers").exists(), "nothing should be made for a refused name"


def test_the_fill_command_computes_the_values_into_a_private_folder(tmp_path):
    folder = tmp_path / "answers"
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.answers_cache", "fill", "where_mlps_fail", str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != ENV_DIR},
    )
    assert proc.returncode == 0, proc.stderr
    actual = (stat.S_IMODE(folder.stat().st_mode), sorted(p.name for p in folder.glob("*.pt")))
    assert actual == (0o700, ["where_mlps_fail.answers.pt"]), actual
    assert "answers cache: computed where_mlps_fail.answers" in proc.stderr, proc.stderr


def test_the_fill_command_names_a_bad_assignment_and_exits_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.answers_cache", "fill", "nope", str(tmp_path / "a")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "reference.nope" in proc.stderr, (proc.returncode, proc.stderr)


def test_grade_keeps_the_answers_in_the_build_folder_when_it_is_private(tmp_path, monkeypatch):
    from autograder import build as build_mod
    from autograder import cli

    monkeypatch.setattr(build_mod, "BUILD", tmp_path)
    (tmp_path / "where_mlps_fail").mkdir()
    actual = cli.kept_answers("where_mlps_fail")
    expected = tmp_path / "where_mlps_fail" / "answers"
    assert actual == expected and stat.S_IMODE(expected.stat().st_mode) == 0o700, actual
    expected.chmod(0o755)  # made open by someone: not trusted, each batch computes its own
    assert cli.kept_answers("where_mlps_fail") is None
