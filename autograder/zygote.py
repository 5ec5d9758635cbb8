"""A warm start for the student process: a template that has imported the libraries forks it.

Each judge has one **template**, which has imported torch, torchvision, NumPy,
matplotlib (pyplot, its fonts loaded) and IPython with one thread, and then
only forks on the judge's request. A judge started by :mod:`autograder.warm_judge`
forks it from itself after those imports and before it reads anything of its
own (:meth:`Template.forked_here`), so both share one import; any other judge
starts one (``python -m autograder.zygote FD``, a fresh interpreter with the
student process's environment). Either way the template reads nothing secret:
it never opens the autograder's files, and it imports no module of
:data:`autograder.judge.PRIVATE_DIRS` (not even :mod:`autograder.judge`, which
imports ``autograder.checks``).

For each student process the judge sends, over a ``SOCK_SEQPACKET`` socket
pair, what the cold start passes to ``subprocess.Popen`` (user, working
folder, environment, resource limits) and the student's end of the channel
(``SCM_RIGHTS``). The template forks an intermediate process, which forks the
student process and exits: the student process is re-parented to the judge,
a child subreaper (``PR_SET_CHILD_SUBREAPER``), so the judge waits for it and
reads its exit code as for a process it started, and its orphans come to the
judge. The student process then sets up what the cold start's ``Popen`` and
``preexec_fn`` set up, in the same order: its own session and process group,
no descriptor but the channel, the working folder, the environment, no
supplementary groups, the sandbox group and user, then (as that user) the
parent-death signal, ``PR_SET_NO_NEW_PRIVS`` and the resource limits; and it
runs :func:`autograder.worker.main`. The judge joins it to the CPU group and
sets its ``oom_score_adj`` as for a cold start, before any cell runs.

In namespaces (:mod:`autograder.namespaces`) the intermediate calls
``unshare`` before it forks, so the student process is the first of its own
PID namespace (it reads its parent from the judge's ``/proc``, where
``getppid`` says 0), and it mounts its private folders as root before it
drops privileges.

The judge falls back to the cold start (``python -m autograder.worker``; in
namespaces, :func:`spawn_cold`: a template that imports nothing first forks it
the same way), and says so on its standard error, whenever the template
cannot start, is not ready within the startup limit, has died, or answers
anything else.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: What the template imports before it forks: the libraries a notebook and the worker load.
PRELOADED = ("numpy", "torch", "torchvision", "matplotlib", "matplotlib.pyplot", "IPython",
             "IPython.core.interactiveshell", "autograder.channel", "autograder.encoding",
             "autograder.tensor_payload", "autograder.kinds", "autograder.worker",
             "autograder.namespaces")
#: Largest message between the judge and the template (the student's environment is the largest).
MAX_MESSAGE = 1 << 16
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
#: Set to ``1``, student processes start cold (to measure what the warm start saves).
COLD_START_ENV = "VISION_AUTOGRADER_COLD_START"
#: The student environment's variables the template leaves out (set in each student process).
PER_STUDENT_ENV = ("HOME", "TMPDIR", "VISION_AUTOGRADER_CACHE", "FASHION_MNIST_DIR", "MNIST_NPZ")


# -- the judge's side
class Forked:
    """The student process forked by the template, re-parented to the judge: the part of
    ``subprocess.Popen`` that :class:`autograder.student_process.StudentProcess` uses."""

    def __init__(self, pid: int, warm: bool = True):
        #: ``warm``: forked by the template that imported the libraries (not :func:`spawn_cold`)
        self.pid, self.returncode, self.warm = pid, None, warm

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: ended, its code unknown
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"student process {self.pid}", timeout)
            time.sleep(0.005)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Template:
    """The template process and the judge's end of its socket; with ``preload`` false, a template
    that imports nothing first (:func:`spawn_cold`)."""

    def __init__(self, env: dict[str, str], preload: bool = True):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)  # before the fork: preexec_fn imports nothing
        judge_end, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock, self.env = judge_end, env
        self.ready = False
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autograder.zygote", str(template_end.fileno()),
                 *([] if preload else ["--cold"])],
                cwd="/", env=env, pass_fds=(template_end.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=lambda: libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0))
        finally:
            template_end.close()

    @classmethod
    def forked_here(cls, env: dict[str, str]) -> Template:
        """A template forked from this process, which has imported :data:`PRELOADED` here first and
        must have read nothing secret (:mod:`autograder.warm_judge`): the judge then shares the
        template's imported pages instead of importing torch a second time. ``env``: this
        process's environment as it started, the template environment, which the template keeps.
        """
        import ctypes

        _preload()
        libc = ctypes.CDLL(None, use_errno=True)
        judge_end, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the template: what Popen(start_new_session=True, cwd="/") sets up; serve
            try:
                judge_end.close()
                libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
                if os.getppid() != parent:
                    os._exit(1)
                os.setsid()
                os.chdir("/")
                _keep_only(template_end.fileno())
                os.environ.clear()
                os.environ.update(env)
                _serve(template_end.fileno())
            finally:
                os._exit(0)
        template_end.close()
        template = cls.__new__(cls)
        template.sock, template.env, template.ready = judge_end, dict(env), False
        template.proc = Forked(pid)
        return template

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _receive(self, timeout: float) -> dict:
        self.sock.settimeout(timeout)
        data = self.sock.recv(MAX_MESSAGE)
        if not data:
            raise ConnectionError("the template ended")
        return json.loads(data)

    def spawn(self, channel_end: socket.socket, spec: dict, startup_seconds: float) -> Forked:
        """Fork a student process set up as ``spec`` says (:func:`_become_student`), talking on
        ``channel_end``. Raises ``OSError`` or ``ValueError`` when the template cannot."""
        if not self.ready:
            if self._receive(startup_seconds).get("op") != "ready":
                raise ValueError("the template did not say it was ready")
            self.ready = True
        socket.send_fds(self.sock, [json.dumps(spec).encode()], [channel_end.fileno()])
        reply = self._receive(30.0)
        if "pid" not in reply:
            raise ValueError(reply.get("error", "no pid in the template's reply"))
        return Forked(int(reply["pid"]))

    def stop(self) -> None:
        self.sock.close()
        if self.alive():
            self.proc.kill()
        self.proc.wait()


_TEMPLATE: Template | None = None
#: why the warm start is not used in this process (``None``: it is, or has not been tried)
_COLD_BECAUSE: str | None = None


@atexit.register
def _stop_at_exit() -> None:
    """The template stopped and reaped as this process exits (it would die with it anyway, by its
    parent-death signal): its CPU time then counts among this process's children's."""
    if _TEMPLATE is not None:
        _TEMPLATE.stop()


def start_template(env: dict[str, str]) -> None:
    """Start this process's template now, in the background, with the student process's
    environment ``env`` (its imports then overlap the judge's own work); nothing if one runs."""
    global _TEMPLATE
    wanted = template_env(env)
    if os.environ.get(COLD_START_ENV) == "1" or _COLD_BECAUSE is not None:
        return
    if _TEMPLATE is not None and _TEMPLATE.alive() and _TEMPLATE.env == wanted:
        return
    if _TEMPLATE is not None:  # ended, or started with other settings
        _TEMPLATE.stop()
    try:
        _TEMPLATE = Template(wanted)
    except OSError as err:
        go_cold(f"it could not be started ({err})")


def spawn(channel_end: socket.socket, spec: dict, env: dict[str, str],
          startup_seconds: float) -> Forked | None:
    """A student process forked from the template (started now if it is not running), or ``None``
    when the warm start is not available: the caller starts it cold."""
    if _COLD_BECAUSE is not None or os.environ.get(COLD_START_ENV) == "1":
        return None
    start_template(env)
    if _TEMPLATE is None:
        return None
    try:
        return _TEMPLATE.spawn(channel_end, spec, startup_seconds)
    except (OSError, ValueError) as err:
        go_cold(f"{type(err).__name__}: {err}" if str(err) else type(err).__name__)
        return None


def spawn_cold(channel_end: socket.socket, spec: dict, env: dict[str, str],
               startup_seconds: float) -> Forked:
    """A student process started cold in namespaces of its own: forked, as :func:`spawn` does, by
    a template of its own that imports nothing first (the student process imports what it needs,
    as a cold start does) and ends once it has forked. Raises ``OSError`` or ``ValueError`` when
    it cannot."""
    template = Template(template_env(env), preload=False)
    try:
        forked = template.spawn(channel_end, spec, startup_seconds)
    finally:
        template.stop()
    forked.warm = False
    return forked


def go_cold(reason: str) -> None:
    """Stop the template and start student processes cold from now on, saying why on stderr."""
    global _TEMPLATE, _COLD_BECAUSE
    _COLD_BECAUSE = reason
    print(f"autograder: the warm student-process template is not available ({reason}); "
          "student processes start cold (slower, graded the same)", file=sys.stderr, flush=True)
    if _TEMPLATE is not None:
        _TEMPLATE.stop()
        _TEMPLATE = None


def try_warm_again() -> None:
    """Forget why the warm start failed, so that the next student process tries it again (a judge
    that grades one submission after another: one failure, perhaps of a loaded moment, must not
    make every later submission start cold)."""
    global _COLD_BECAUSE
    _COLD_BECAUSE = None


def reset() -> None:
    """Stop the template and forget why the warm start failed (tests)."""
    global _TEMPLATE, _COLD_BECAUSE
    if _TEMPLATE is not None:
        _TEMPLATE.stop()
    _TEMPLATE, _COLD_BECAUSE = None, None


def template_env(env: dict[str, str], judge_env: Any = None) -> dict[str, str]:
    """The student's environment ``env`` without its scratch folder and data folders, which the
    template does not know and no import reads: what the interpreter reads as it starts
    (``PYTHONHASHSEED``) and the libraries read as they load (threads, backend) is the student
    process's; ``HOME`` (matplotlib's font cache) is the judge's (``judge_env``, default this
    process's environment)."""
    judge_env = os.environ if judge_env is None else judge_env
    return {**{k: v for k, v in env.items() if k not in PER_STUDENT_ENV},
            "HOME": judge_env.get("HOME", "/")}


def fork_template_here(env: dict[str, str]) -> None:
    """Import :data:`PRELOADED` in this process and fork its template from it
    (:meth:`Template.forked_here`), in a process that has read nothing secret and runs with the
    template environment ``env`` (:mod:`autograder.warm_judge`). Where the fork fails, the judge
    starts a template of its own when it needs one, as without this."""
    global _TEMPLATE
    try:
        _TEMPLATE = Template.forked_here(env)
    except OSError:
        _TEMPLATE = None


def student_rlimits(sandboxed: bool, max_files: int) -> list[tuple[int, int]]:
    """The resource limits of the student process, warm or cold (:func:`set_rlimits`): no core
    dumps, files of at most 512 MB, ``max_files`` open files, and when ``sandboxed`` at most 256
    processes of the sandbox user (no fork bombs; where a process-count group bounds the student's
    own, :data:`autograder.control_groups.MAX_PROCESSES`, it is not set)."""
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 512 * 1024 * 1024),
              (resource.RLIMIT_NOFILE, max_files)]
    return limits + [(resource.RLIMIT_NPROC, 256)] if sandboxed else limits


def set_rlimits(rlimits: list[tuple[int, int]]) -> None:
    """Set each ``(limit, value)`` as both soft and hard limit, never above the hard limit this
    process already has (raising it would fail, and the lower limit is the stricter one)."""
    for limit, value in rlimits:
        try:
            hard = resource.getrlimit(limit)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass


# -- the template's side
def main(fd: int, preload: bool = True) -> None:
    """The template: import (with ``preload``), say ready, then fork one student process per
    request until the judge closes the socket."""
    if preload:
        _preload()
    _serve(fd)


def _preload() -> None:
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)


def _serve(fd: int) -> None:
    """Say ready on the socket ``fd``, then fork one student process per request until the judge
    closes it."""
    import gc

    gc.collect()
    gc.freeze()  # the collector then leaves the imported objects' pages shared with the children
    sock = socket.socket(fileno=fd)
    sock.send(json.dumps({"op": "ready"}).encode())
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 1)
        except OSError:
            return
        if not data:
            return
        try:
            if len(fds) != 1:
                raise ValueError(f"expected one descriptor, got {len(fds)}")
            threads = len(os.listdir("/proc/self/task"))
            if threads != 1:  # a fork copies only the calling thread: others' locks stay held
                raise ValueError(f"the template runs {threads} threads; it forks only with one")
            pid = _fork_student(json.loads(data), fds[0], sock.fileno())
            reply = {"pid": pid}
        except Exception as err:  # noqa: BLE001 - the judge then starts the student process cold
            reply = {"error": f"{type(err).__name__}: {err}"}
        finally:
            for extra in fds:
                os.close(extra)
        sock.send(json.dumps(reply).encode())


def _fork_student(spec: dict, channel_fd: int, control_fd: int) -> int:
    """Fork an intermediate that forks the student process and exits; the student's pid."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(read_end)
            if spec.get("namespaces"):  # its next child is the first process of a PID namespace
                from autograder import namespaces

                namespaces.unshare()
            spec = {**spec, "middle_pid": os.getpid()}  # as the judge sees it
            student = os.fork()
            if student == 0:
                os.close(write_end)
                _become_student(spec, channel_fd, control_fd)  # never returns
            os.write(write_end, str(student).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read()
    os.waitpid(middle, 0)  # once it has exited, the student process is the judge's
    if not text.isdigit():
        raise OSError("the intermediate process did not fork the student process")
    return int(text)


def _become_student(spec: dict, channel_fd: int, control_fd: int) -> None:
    """In the forked student process: set up as the cold start does, then run the worker."""
    try:
        _set_up(spec, channel_fd, control_fd)
        from autograder import worker

        sys.argv = [worker.__file__, str(channel_fd)]
        worker.main(channel_fd)
    except BaseException:  # noqa: BLE001 - nothing may return into the template's loop
        os._exit(1)
    os._exit(0)


def _set_up(spec: dict, channel_fd: int, control_fd: int) -> None:
    import ctypes
    import importlib
    import tempfile

    import matplotlib

    os.close(control_fd)  # the template's socket: the student never talks to the template
    isolated = bool(spec.get("namespaces"))
    judge, middle = int(spec["judge_pid"]), int(spec["middle_pid"])
    while _parent_pid(isolated) == middle:  # until the intermediate has exited
        time.sleep(0.001)
    if _parent_pid(isolated) != judge:
        os._exit(1)  # the judge is not a subreaper, or has died
    os.setsid()
    _keep_only(channel_fd)
    os.chdir(spec["cwd"])
    os.environ.clear()
    os.environ.update(spec["env"])
    tempfile.tempdir = None  # from the new TMPDIR
    sys.path[0] = spec["cwd"]  # as ``python -m`` started there: the notebook imports its files
    importlib.invalidate_caches()
    for name in ("get_configdir", "get_cachedir"):  # memoized: found again from the new HOME
        found = getattr(matplotlib, name)
        if hasattr(found, "__wrapped__") and hasattr(matplotlib, "_logged_cached"):
            setattr(matplotlib, name, matplotlib._logged_cached(f"{name}=%s", found.__wrapped__))
    # as root, before any cell runs (the judge does both again, as for a cold start): its processes
    # count in the groups, and are the first the out-of-memory killer stops
    for path, text in [*((procs, str(os.getpid())) for procs in spec.get("groups", [])),
                       ("/proc/self/oom_score_adj", "1000")]:
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError:
            pass
    status_fd = None
    if isolated:  # the judge's /proc, kept to read the parent's pid once /proc is the namespace's
        from autograder import namespaces

        status_fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        namespaces.enter(spec["cwd"], spec["read_only"], int(spec["private_mb"]))
        os.chdir(spec["cwd"])  # the folder as bound: its ``..`` is the private /tmp's
    if spec.get("uid") is not None:
        os.setgroups([])
        os.setgid(int(spec["gid"]))
        os.setuid(int(spec["uid"]))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)  # after setuid, which clears it
    if _parent_pid(isolated, status_fd) != judge:
        os._exit(1)  # the judge died before the signal was set
    if status_fd is not None:
        os.close(status_fd)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    set_rlimits(spec["rlimits"])


def _keep_only(fd: int) -> None:
    """Standard input, output and error on ``/dev/null``, and no other descriptor open but ``fd``
    (the judge's socket or the channel): nothing of the judge's reaches the process."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(devnull, std)
    os.closerange(3, fd)
    most = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    os.closerange(fd + 1, most if most != resource.RLIM_INFINITY else 1 << 20)


def _parent_pid(isolated: bool, status_fd: int | None = None) -> int:
    """The student process's parent as the judge sees it: in its own PID namespace (``isolated``,
    where ``getppid`` says 0) read from the judge's ``/proc`` (``status_fd`` once that is
    hidden)."""
    if not isolated:
        return os.getppid()
    from autograder.namespaces import host_parent_pid

    if status_fd is not None:
        return host_parent_pid(status_fd)
    fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return host_parent_pid(fd)
    finally:
        os.close(fd)


def student_spec(workdir: Path, env: dict[str, str], user: Any, max_files: int,
                 groups: list[Path], isolated: dict | None = None,
                 processes_counted: bool = False) -> dict:
    """The request for one student process (:func:`_set_up`) from what the cold start passes to
    ``Popen``: ``user`` a passwd entry or ``None`` (same user as the judge), ``groups`` the control
    groups it joins, ``isolated`` (in its own namespaces) the paths bound read-only into its
    private folders (``read_only``) and their size (``private_mb``); ``processes_counted``: one of
    the groups bounds its processes, so the sandbox user's process limit is not set."""
    return {"judge_pid": os.getpid(), "cwd": str(workdir), "env": env,
            "namespaces": isolated is not None, **(isolated or {}),
            "groups": [str(group / "cgroup.procs") for group in groups],
            "uid": None if user is None else user.pw_uid,
            "gid": None if user is None else user.pw_gid,
            "rlimits": student_rlimits(user is not None and not processes_counted, max_files)}


if __name__ == "__main__":
    main(int(sys.argv[1]), preload="--cold" not in sys.argv[2:])
