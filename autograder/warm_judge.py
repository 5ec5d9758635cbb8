"""A judge that shares the student template's imports: ``python -m autograder.warm_judge``.

A judge and the warm start's template (:mod:`autograder.zygote`) that each
import torch pay for it twice: about 3 CPU seconds and 300 to 400 MB per
grading. Here one process imports once, then becomes both:

1. It starts in ``/``, with the template's environment (:func:`launch`
   computes it from the judge's) and a command line that names only this
   module: nothing secret in its arguments, its environment, its working
   folder's listing (which the import system caches) or its memory.
2. It imports :data:`autograder.zygote.PRELOADED` and forks the template
   (:meth:`autograder.zygote.Template.forked_here`), which from then on only
   forks student processes, as a template started on its own does.
3. Only then it reads its request, the first line of its standard input:
   ``{"module": M, "argv": [...], "env": {...}, "cwd": FOLDER}``, takes that
   environment and working folder and runs ``python -m M ARGV...`` in this
   process (:data:`MODULES`: the one-off judge, the batch's judge server,
   Gradescope's entry point), with installed modules only on its module path:
   not the folder it was asked to work in, which on Gradescope a student
   might write. What follows on standard input is the module's.

The template and every student process it forks are therefore copies of a
process that had read nothing but the template's environment: not the
judge's environment or arguments, the hidden tests or the references.

What the judge cannot change once started, it shares with the student
process: the interpreter's hash seed (``PYTHONHASHSEED=0``, so that a
notebook's set and dict order is the same in every grading) and how the
libraries loaded (one thread, the Agg backend: what the judge sets for itself
anyway). ``docs/threat_model.md`` says what the known hash seed means for the
judge. With ``$VISION_AUTOGRADER_COLD_START=1`` (measuring what the warm start
saves) :func:`launch` runs the module itself, as before there was a warm start.

This module imports neither torch nor the judge: the ``grade`` command only
orchestrates.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The modules a warm judge runs.
MODULES = ("autograder.judge", "autograder.judge_server", "autograder.gradescope_entry")
#: The longest request :func:`exec_warm` writes ahead (a pipe holds 64 KiB before a writer waits).
MAX_REQUEST = 60_000


def template_env(judge_env: Mapping[str, str]) -> dict[str, str]:
    """The template's environment for a judge that runs with ``judge_env``: the one
    :func:`autograder.zygote.start_template` asks for, so the judge uses the template it forked."""
    from autograder.student_process import student_env
    from autograder.zygote import template_env as from_student_env

    return from_student_env(student_env(Path("/"), judge_env), judge_env)


def launch(
    module: str, argv: Sequence[str], env: Mapping[str, str], cwd: str | Path
) -> tuple[list[str], dict[str, str], str | None, str]:
    """``(command, environment, first line of standard input, working folder)`` that run
    ``python -m module argv...`` in ``cwd`` with environment ``env`` as a warm judge; the line is
    ``None`` when the module runs by itself (a cold start was asked for)."""
    if module not in MODULES:
        raise ValueError(f"a warm judge runs one of {MODULES}, not {module!r}")
    from autograder.zygote import COLD_START_ENV

    if env.get(COLD_START_ENV) == "1":
        return [sys.executable, "-m", module, *argv], dict(env), None, str(cwd)
    request = {"module": module, "argv": list(argv), "env": dict(env), "cwd": str(cwd)}
    command = [sys.executable, "-m", "autograder.warm_judge"]
    return command, template_env(env), json.dumps(request) + "\n", "/"


def exec_warm(module: str, argv: Sequence[str]) -> None:
    """Become a warm judge running ``python -m module argv...`` with this process's environment:
    the request goes into a pipe that becomes standard input, then this process executes the warm
    judge. Returns (having changed nothing) only when the request is too long for the pipe."""
    command, env, request, cwd = launch(module, argv, os.environ, os.getcwd())
    data = b"" if request is None else request.encode()
    if len(data) > MAX_REQUEST:
        return
    os.chdir(cwd)
    if request is None:
        os.execve(command[0], command, env)
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    os.dup2(read_end, 0)
    os.close(read_end)
    os.execve(command[0], command, env)


def _request(line: str) -> dict:
    """The request on the first line of standard input, checked."""
    try:
        request = json.loads(line)
    except json.JSONDecodeError as err:
        raise SystemExit(f"autograder.warm_judge: the first line is not JSON ({err})") from None
    if (
        not isinstance(request, dict)
        or request.get("module") not in MODULES
        or not isinstance(request.get("argv"), list)
        or not all(isinstance(a, str) for a in request["argv"])
        or not isinstance(request.get("env"), dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in request["env"].items())
        or not isinstance(request.get("cwd"), str)
    ):
        raise SystemExit(
            "autograder.warm_judge: the first line should be "
            f'{{"module": one of {list(MODULES)}, "argv": [strings], "env": {{names: strings}}, '
            '"cwd": a folder}'
        )
    return request


def main() -> None:
    from autograder import zygote

    started_in = os.getcwd()
    zygote.fork_template_here(dict(os.environ))  # before anything secret is read
    request = _request(sys.stdin.readline())
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # found again from the judge's TMPDIR (the imports cached /tmp)
    # the judge imports installed modules only: ``python -m`` put the folder it started in first on
    # the module path, and the folder asked for may be one a student can write (Gradescope's)
    if sys.path and sys.path[0] == started_in:
        del sys.path[0]
    os.chdir(request["cwd"])
    sys.argv = [request["module"], *request["argv"]]
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as end:
        code = end.code
    _exit_now(code)


def _exit_now(code: object) -> None:
    """Exit as ``SystemExit(code)`` does, without the interpreter's teardown of torch and every
    other module, which costs about a CPU second and does nothing for a process that is ending: the
    exit handlers (the template stopped and reaped) run, and the output is flushed, first."""
    import atexit

    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    main()
