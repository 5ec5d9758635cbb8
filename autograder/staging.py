"""A batch's files on the way in and out: each submission's label (its outputs' folder and its row,
unique in the batch), the file graded for it (a notebook, an export zip, or the one notebook in a
folder), its private staged copy, the modes that keep its inputs and outputs from the sandbox user
while grading runs as root (given back after), and the judge's outputs copied to the submission's
folder.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

#: The private copy of a submission is named this plus the original suffix, in lower case.
STAGED_STEM = "staged-submission"
#: names in a batch's output folder that no submission's folder may take (:func:`batch_labels`)
RESERVED_LABELS = frozenset({"scores.csv", "report.html", "compare.csv"})


def submission_label(path: Path) -> str:
    """A folder name for a submission's outputs: its file name without the extension.

    A name of dots only, or none (``...ipynb``, ``.ipynb``), would name the
    output folder itself or its parent (``...ipynb``'s results would be
    written beside the batch's folder); its dots become underscores.
    """
    label = path.name.rsplit(".", 1)[0] if "." in path.name else path.name
    return label if label.strip(".") else label.replace(".", "_") or "_"


def batch_labels(submissions: list[Path]) -> list[str]:
    """One distinct label per submission (:func:`submission_label`), in order: a label already taken
    gets the first free ``-2``, ``-3``... suffix (``a/x``, ``b/x`` and ``c/x-2`` are x, x-2 and
    x-2-2: counting only repeats of a file name would give two "x-2", and one would overwrite the
    other's results). The batch's own table is taken from the start (:data:`RESERVED_LABELS`: a
    submission's folder named ``scores.csv`` would stop the table being written)."""
    labels: list[str] = []
    taken: set[str] = set(RESERVED_LABELS)
    for sub in submissions:
        base = label = submission_label(Path(sub))
        n = 1
        while label in taken:
            n += 1
            label = f"{base}-{n}"
        taken.add(label)
        labels.append(label)
    return labels


def protect_inputs(submissions: list[Path], out_dir: Path) -> dict[str, int]:
    """When grading runs as root: make the submissions, their folders and ``out_dir`` unreadable to
    other users.

    Student code runs as another, unprivileged user (``autograder.judge``),
    who could otherwise read the other submissions of a batch (or list their
    file names, which may name students) and the results written so far.
    Files and folders lose every permission of "group" and "other"; a folder
    with the sticky bit (``/tmp``) or ``/`` is left as it is (its files are
    still locked), as is a symbolic link. A folder the sandbox user must pass
    through to run Python (one leading to the interpreter, this package or
    the temporary folder, :func:`_on_the_sandbox_users_way`) keeps "x" for
    group and other: a notebook kept in the repository's root would
    otherwise make the root 0700, and every later grading would fail ("user
    'nobody' cannot run ..."). ``out_dir`` is created if missing.

    Returns:
        ``{path: its mode before}`` for each path whose mode changed (empty
        when not running as root): :func:`restore_modes` puts them back.
    """
    if os.geteuid() != 0:
        return {}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = (
        [out_dir]
        + [Path(s) for s in submissions]
        + sorted({Path(s).absolute().parent for s in submissions})
    )
    changed = {}
    for path in dict.fromkeys(paths):
        try:
            info = path.lstat()
        except OSError:
            continue  # a missing submission gets its own "does not exist" results
        if (
            stat.S_ISLNK(info.st_mode)
            or str(path) == "/"
            or (stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX)
        ):
            continue
        mode = stat.S_IMODE(info.st_mode)
        kept = 0o011 if stat.S_ISDIR(info.st_mode) and _on_the_sandbox_users_way(path) else 0
        locked = mode & ~(0o077 & ~kept)
        if locked != mode:
            path.chmod(locked)
            changed[str(path)] = mode
    return changed


def _on_the_sandbox_users_way(folder: Path) -> bool:
    """Whether ``folder`` leads to (or is) the interpreter's, this package's or the temporary
    folder, which the sandbox user must pass through (``bin/install`` gives them ``o+x``)."""
    ways = {
        Path(sys.executable).absolute(),
        Path(sys.executable).resolve(),
        Path(sys.prefix).resolve(),
        Path(__file__).resolve().parent,
        Path(tempfile.gettempdir()).resolve(),
    }
    folder = folder.absolute()
    resolved = folder.resolve()
    return any(f == way or f in way.parents for way in ways for f in (folder, resolved))


def restore_modes(changed: Mapping[str, int], out_dir: Path | None = None) -> None:
    """Give the paths :func:`protect_inputs` changed (``{path: mode}``) their modes back, once no
    student code runs: the instructor's notebooks and folders (the committed student versions,
    graded by ``bin/demo``) are left as they were. ``out_dir`` keeps its locked mode: it holds the
    scores."""
    for path, mode in changed.items():
        if out_dir is not None and Path(path) == Path(out_dir):
            continue
        try:
            os.chmod(path, mode, follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass


#: A submission's folder is searched this many levels down for its notebook (Gradescope unpacks an
#: uploaded zip, which may hold a folder), and at most this many entries of it are looked at.
FOLDER_LEVELS, MAX_FOLDER_ENTRIES = 3, 1000


def file_to_grade(submission: Path) -> tuple[Path | None, str | None]:
    """The file to grade for ``submission`` and ``None``, or ``None`` and why there is none.

    A file is graded as it is (the judge refuses a symbolic link, with a reason). A folder, as
    Gradescope's "Export Submissions" gives one per student, is graded by the one notebook
    (``.ipynb``) in it or in its folders (:data:`FOLDER_LEVELS` deep, as Gradescope unpacks an
    uploaded zip), or if it holds none, by the one zip (Otter's export); hidden files and folders
    (``.ipynb_checkpoints``), ``__MACOSX`` and symbolic links are not looked at.
    """
    if submission.is_symlink() or submission.is_file():
        return submission, None
    if not submission.exists():
        return None, f"{submission} does not exist."
    if not submission.is_dir():
        return None, f"{submission} is not a file or a folder."
    files: list[Path] = []
    looked = 0
    for folder, dirs, names in os.walk(submission, onerror=None, followlinks=False):
        depth = len(Path(folder).relative_to(submission).parts)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d != "__MACOSX"
            and depth + 1 < FOLDER_LEVELS
            and not os.path.islink(os.path.join(folder, d))
        )
        for name in sorted(names):
            path = Path(folder) / name
            looked += 1
            if not name.startswith(".") and not path.is_symlink() and path.is_file():
                files.append(path)
        if looked > MAX_FOLDER_ENTRIES:
            break
    for suffix, what in ((".ipynb", "notebooks"), (".zip", "zips")):
        found = [p for p in files if p.suffix.lower() == suffix]  # Windows may save "Lab.IPYNB"
        if len(found) == 1:
            return found[0], None
        if found:
            names = ", ".join(str(p.relative_to(submission)) for p in found)
            return None, (
                f"{submission} is a folder holding {len(found)} {what} ({names}): "
                "a submission's folder should hold one."
            )
    return None, f"{submission} is a folder with no notebook (.ipynb) or export zip in it."


def stage_submission(submission: Path, folder: Path) -> Path:
    """A private copy of ``submission`` to grade: ``folder/staged-submission<suffix>``.

    ``folder`` is created with mode 0700 (only the grading user may enter
    it). The copy's name holds neither the original folder nor the file name
    (both may name students), so neither shows in the judge's command line
    (``ps``) nor can the student process learn them from it. A symbolic link
    is copied as a link, so the judge still refuses it.
    """
    folder = Path(folder)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    staged = folder / f"{STAGED_STEM}{Path(submission).suffix.lower()}"
    shutil.copyfile(submission, staged, follow_symlinks=False)
    if not staged.is_symlink():
        staged.chmod(0o600)
    return staged


def collect_outputs(produced: Path, out_dir: Path, staged_name: str, original_name: str) -> None:
    """Copy the grading's output files into ``out_dir``; a failure's reason names the original file
    again."""
    for path in produced.iterdir():
        if path.name.startswith(".") or path.is_symlink() or not path.is_file():
            continue
        if path.name == "results.json":
            try:
                results = json.loads(path.read_text())
            except (OSError, ValueError):
                results = None
            if (
                isinstance(results, dict)
                and not results.get("tests")
                and isinstance(results.get("output"), str)
            ):
                results["output"] = results["output"].replace(staged_name, original_name)
                (out_dir / path.name).write_text(json.dumps(results, indent=2))
                continue
        shutil.copyfile(path, out_dir / path.name)
