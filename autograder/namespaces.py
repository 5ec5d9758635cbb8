"""Isolation from the kernel: the student process in its own PID, IPC, mount and network
namespaces, with private temporary folders.

When grading runs as root and the kernel lets it make namespaces (this is :data:`NAMESPACES` mode:
a Linux machine, CI, an instructor's workstation), the process that forks the student process
calls ``unshare(2)`` for new PID, IPC, mount and network namespaces (:func:`unshare`), and the
student process, the first process of its PID namespace, mounts as root before it drops
privileges (:func:`enter`):

- one tmpfs of its own holding each of :data:`PRIVATE_FOLDERS`, of at most the memory limit (the
  judge counts what it holds as the student's memory, :func:`private_folders_kb`). The paths it
  must reach there (its scratch folder, the interpreter, the data) are bound through at the same
  path, the scratch folder writable and the rest read-only;
- a ``/proc`` of its PID namespace, where it sees only its own processes, and its IPC
  namespace's message queues at ``/dev/mqueue`` where the machine mounts them there.

Nothing it leaves in those folders, no System V object or POSIX message queue, and no process it
started outlives it: the kernel removes them with the namespaces when the student process (their
first process) ends. It cannot reach the network, and no two gradings see each other's processes,
files or shared memory.

Where namespaces are refused (root in a container without ``CAP_SYS_ADMIN``, as on Gradescope,
which grades one submission per container) the student process runs as the sandbox user
(:data:`SANDBOX_USER_MODE`); not as root, as the judge's own user (:data:`SAME_USER`).
:func:`isolation_mode` says which, for the results and the terminal.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x8000000, 0x20000000, 0x40000000
#: The namespaces a student process gets: its processes, System V objects and message queues,
#: mounts and network are its own.
FLAGS = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
#: The folders every user may write in, each a private tmpfs in the student's mount namespace.
PRIVATE_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
#: Files and folders a private tmpfs holds at most (the student's own scratch folder, on disk, is
#: counted by the judge as before).
MAX_PRIVATE_INODES = 4096

#: The isolation modes :func:`isolation_mode` names.
NAMESPACES = "namespaces"
SANDBOX_USER_MODE = "sandbox user"
SAME_USER = "same user"
#: What each mode means, as the terminal says it.
DESCRIPTIONS = {
    NAMESPACES: "student code ran as an unprivileged user in PID, IPC, mount and network "
    "namespaces of its own, with private temporary folders",
    SANDBOX_USER_MODE: "student code ran as an unprivileged user, without namespaces (the kernel "
    "refused them here); grade one submission per machine or container",
    SAME_USER: "not running as root: student code ran as this user, in its own process, and "
    "could read what this user reads; grade as root to isolate it",
}
#: Set to ``0``, grading as root does not use namespaces (as where the kernel refuses them).
NAMESPACES_ENV = "VISION_AUTOGRADER_NAMESPACES"

_available: bool | None = None


def isolation_mode() -> str:
    """How student processes are isolated here: :data:`NAMESPACES` (root, and the kernel makes
    them), :data:`SANDBOX_USER_MODE` (root, without namespaces) or :data:`SAME_USER` (not
    root)."""
    if os.geteuid() != 0:
        return SAME_USER
    return NAMESPACES if available() else SANDBOX_USER_MODE


def available() -> bool:
    """Whether a process of this judge can make the namespaces and mounts of :func:`enter`: probed
    once, in a separate interpreter (a refusal costs nothing but the probe)."""
    global _available
    if os.environ.get(NAMESPACES_ENV) == "0" or os.geteuid() != 0:
        return False
    if _available is None:
        try:
            probe = subprocess.run(
                [sys.executable, "-S", "-c", _PROBE], capture_output=True, timeout=30,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
            _available = probe.returncode == 0 and probe.stdout.strip() == b"1"
        except (OSError, subprocess.SubprocessError):
            _available = False
    return _available


#: The probe: unshare, fork the first process of the new PID namespace, which mounts as
#: :func:`enter` does; prints ``1`` when all of it worked.
_PROBE = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare({FLAGS}) != 0:
    raise SystemExit(1)
pid = os.fork()
if pid == 0:
    ok = (os.getpid() == 1
          and libc.mount(None, b"/", None, {MS_REC | MS_PRIVATE}, None) == 0
          and libc.mount(b"tmpfs", b"/tmp", b"tmpfs", {MS_NOSUID | MS_NODEV}, b"size=1m") == 0
          and libc.mount(b"proc", b"/proc", b"proc", {MS_NOSUID | MS_NODEV | MS_NOEXEC}, None) == 0)
    try:
        with open("/proc/sys/kernel/shmmni", "w") as f:
            f.write("64")
    except OSError:
        ok = False
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print(1 if status == 0 else 0)
"""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def unshare() -> None:
    """In the process that forks the student process: new namespaces (:data:`FLAGS`) for its next
    child, which is the first process of the new PID namespace."""
    _check(_libc().unshare(FLAGS), "unshare")


def host_parent_pid(status_fd: int) -> int:
    """The parent's pid as the judge sees it, read from ``status_fd``, this process's
    ``/proc/self/status`` opened in the judge's ``/proc`` (the first process of a PID namespace
    sees its parent as pid 0)."""
    text = os.pread(status_fd, 4096, 0).decode()
    for line in text.splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise OSError("no PPid in /proc/self/status")


def enter(workdir: str, read_only: list[str], size_mb: int) -> None:
    """In the student process, as root: mounts private to its namespace (none reaches the
    judge's), one tmpfs of at most ``size_mb`` holding each of :data:`PRIVATE_FOLDERS` (so that
    one count, :func:`private_folders_kb`, is all they hold), ``workdir`` bound through writable
    and each path of ``read_only`` read-only where one of them hides it, and a ``/proc`` of its
    own (it is the first process of a new PID namespace). The System V objects of
    its IPC namespace are limited to ``size_mb`` of shared memory (:data:`SYSTEM_V_LIMITS`)."""
    libc = _libc()
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    through = [(os.path.realpath(workdir), False)] + [(path, True) for path in read_only]
    # opened before the folders are hidden: bound from these descriptors afterwards
    kept = {}
    for path, ro in through:
        if _under(path, PRIVATE_FOLDERS) and os.path.exists(path) and path not in kept:
            kept[path] = (os.open(path, os.O_PATH | os.O_CLOEXEC), ro)
    first = PRIVATE_FOLDERS[0]
    options = f"size={size_mb}m,nr_inodes={MAX_PRIVATE_INODES},mode=0700".encode()
    _check(libc.mount(b"tmpfs", first.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options),
           f"mounting a tmpfs on {first}")
    # a folder of the tmpfs for each, bound where it belongs; the tmpfs's own root, which lists
    # them all, stays hidden under the first
    for index, folder in reversed(list(enumerate(PRIVATE_FOLDERS))):
        if index and (not os.path.isdir(folder) or os.path.islink(folder)):
            continue
        inside = f"{first}/{index}"
        os.mkdir(inside)
        os.chmod(inside, 0o1777)
        _check(libc.mount(inside.encode(), folder.encode(), None, MS_BIND, None),
               f"binding {folder}")
    for path, (fd, ro) in sorted(kept.items(), key=lambda item: len(item[0])):
        _bind(libc, fd, path, ro)
        os.close(fd)
    _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
           "mounting /proc")
    if os.path.isdir("/dev/mqueue"):  # the machine's message queues there: its namespace's instead
        _check(libc.mount(b"mqueue", b"/dev/mqueue", b"mqueue",
                          MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mounting /dev/mqueue")
    for name, value in SYSTEM_V_LIMITS.items():
        with open(f"/proc/sys/kernel/{name}", "w") as f:  # its IPC namespace's, not the machine's
            f.write(str(value(size_mb)))


#: The System V limits of a student's IPC namespace, from its memory limit in MB: shared memory
#: (pages, and bytes per segment) at most the memory limit, and few segments and message queues
#: (each queue holds at most 16 kB).
SYSTEM_V_LIMITS = {
    "shmall": lambda mb: mb * 256,
    "shmmax": lambda mb: mb << 20,
    "shmmni": lambda mb: 64,
    "msgmni": lambda mb: 16,
}


def _bind(libc: ctypes.CDLL, fd: int, path: str, read_only: bool) -> None:
    """Bind what ``fd`` opened at ``path``, in a private tmpfs now (the folders above it made
    root's, mode 0755: they hold nothing but what is bound there)."""
    target = Path(path)
    is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
    os.makedirs(target if is_dir else target.parent, mode=0o755, exist_ok=True)
    if not is_dir and not target.exists():
        target.touch(mode=0o600)
    source = f"/proc/self/fd/{fd}".encode()
    _check(libc.mount(source, path.encode(), None, MS_BIND | MS_REC, None), f"binding {path}")
    if read_only:
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
        _check(libc.mount(None, path.encode(), None, flags, None), f"making {path} read-only")


def _under(path: str, folders: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    return any(real == f or real.startswith(f + "/") for f in folders)


def read_only_paths(env: dict[str, str]) -> list[str]:
    """What a student process reads and a private folder may hide (below one, not one itself):
    the interpreter and the paths it imports from, and the data folders its environment names."""
    paths = [sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(sys.executable)]
    paths += [p for p in sys.path if p and os.path.isabs(p)]
    paths += [env[k] for k in ("VISION_AUTOGRADER_CACHE", "FASHION_MNIST_DIR", "MNIST_NPZ")
              if env.get(k)]
    return [os.path.realpath(p) for p in dict.fromkeys(paths)
            if _under(p, PRIVATE_FOLDERS) and os.path.realpath(p) not in PRIVATE_FOLDERS
            and os.path.exists(p)]


def private_folders_kb(pid: int) -> int:
    """What the private folders of the student process ``pid`` hold, in kB, read through its root
    (``/proc/PID/root``, which the judge's root may read); 0 when that cannot be read (the process
    has ended)."""
    try:
        info = os.statvfs(f"/proc/{pid}/root{PRIVATE_FOLDERS[0]}")
    except OSError:
        return 0
    return (info.f_blocks - info.f_bfree) * info.f_frsize // 1024
