"""Reading a submission: a notebook, or Otter's export zip holding exactly one, of at most
:data:`MAX_NOTEBOOK_BYTES`; the code cells the student process runs, with Otter's own calls dropped
(:func:`without_otter_calls`); and the notebook in Gradescope's submission folder. What cannot be
graded at all raises :class:`SubmissionError`, whose message tells the student what to submit.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from pathlib import Path

OTTER_LINE = re.compile(
    r"^(\s*+)(import\s++otter(\.\w+)*+(\s++as\s++\w++)?|from\s++otter\b.*|grader\s*+=\s*+otter\.Notebook\(.*\)"
    r"|grader\.(check|check_all|export)\(.*\))(?>\s*;)?(?>\s*#.*)?$"
)


#: ``import a, otter, b``: an import list that names Otter among other modules.
IMPORT_LIST = re.compile(
    r"^(\s*+)import\s++([\w.]++(\s++as\s++\w++)?(\s*+,\s*+[\w.]++(\s++as\s++\w++)?)++)(?>\s*;)?(?>\s*#.*)?$"
)


#: Lines longer than this (characters) are not looked at for Otter calls: none is, and patterns on a
#: long line can take long (100,000 spaces take minutes, and no deadline runs yet).
MAX_OTTER_LINE = 1000


def without_otter_calls(source: str) -> str:
    """``source`` without the lines that import Otter, make its ``grader`` or call ``grader.check``,
    ``check_all`` or ``export`` (each becomes ``pass``, so a block it was alone in stays a block);
    Otter leaves an import list (``import otter, torch``) importing the rest. A trailing ``;`` or
    comment does not keep such a line (``grader.check("q1_1");`` left in place would raise a
    ``NameError`` and lose the rest of its cell)."""
    lines = []
    # as Python splits a cell (str.splitlines also splits at U+2028 and others)
    for line in source.split("\n"):
        stripped = line.rstrip()
        if len(stripped) > MAX_OTTER_LINE:
            lines.append(line)
            continue
        match = OTTER_LINE.match(stripped)
        listed = IMPORT_LIST.match(stripped) if match is None else None
        if match is not None:
            line = f"{match.group(1)}pass"
        elif listed is not None:
            names = [name.strip() for name in listed.group(2).split(",")]
            kept = [
                name
                for name in names
                if name.split()[0] != "otter" and not name.startswith("otter.")
            ]
            if len(kept) < len(names):
                line = (
                    f"{listed.group(1)}import {', '.join(kept)}"
                    if kept
                    else f"{listed.group(1)}pass"
                )
        lines.append(line)
    return "\n".join(lines)


class SubmissionError(Exception):
    """The submission cannot be graded at all (not a notebook, empty, two notebooks...)."""


#: The largest notebook the judge reads (bytes, unzipped): the assignments' notebooks with every
#: output are a few MB; a zip of 153 KB can unpack to hundreds of MB, read by a judge that runs as
#: root without a memory limit.
MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024


def _expect_readable_size(name: str, size: int) -> None:
    if size > MAX_NOTEBOOK_BYTES:
        raise SubmissionError(
            f"{name} is {size / 2**20:.0f} MB, more than the {MAX_NOTEBOOK_BYTES // 2**20} MB the "
            "grader reads: clear its cells' outputs (Jupyter's \"Clear All Outputs\"), save, and "
            "submit again."
        )


def load_submission(path: Path, expected_name: str | None = None):
    """Read a submission: a ``.ipynb`` notebook, or Otter's export zip holding exactly one.

    ``expected_name``: the assignment being graded (``assignment_name`` of the autograder's
    ``otter_config.json``); a notebook whose metadata (``otter.assignment_name``, which ``otter
    assign`` writes into the student notebook) names another is refused. A notebook that names none
    is read.

    Raises:
        SubmissionError: with a student-facing reason (not a file, empty, not
            JSON, not a notebook, a zip with no or several notebooks, a
            ``.py`` file, another assignment's notebook...).
    """
    import nbformat

    path = Path(path)
    # read as root, it could be any file on the grading machine (the master notebook...)
    if path.is_symlink():
        raise SubmissionError(
            f"{path.name} is a symbolic link, not a file: submit the notebook itself."
        )
    if not path.is_file():
        raise SubmissionError(f"{path.name} is not a file.")
    if path.stat().st_size == 0:
        raise SubmissionError(f"{path.name} is empty.")
    suffix = path.suffix.lower()  # a suffix's case does not matter (Windows may save "Lab.IPYNB")
    if suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as archive:
                notebooks = [
                    n
                    for n in archive.namelist()
                    if n.lower().endswith(".ipynb") and "/." not in "/" + n and "__MACOSX" not in n
                ]
                if len(notebooks) != 1:
                    raise SubmissionError(
                        f"the zip holds {len(notebooks)} notebooks "
                        f"({', '.join(notebooks) or 'none'}); "
                        "submit the zip grader.export() writes, with exactly one notebook."
                    )
                _expect_readable_size(notebooks[0], archive.getinfo(notebooks[0]).file_size)
                # reads at most the size its entry declares
                with archive.open(notebooks[0]) as member:
                    text = member.read(MAX_NOTEBOOK_BYTES + 1).decode("utf-8", errors="replace")
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            NotImplementedError,
            EOFError,
            zlib.error,
        ):
            raise SubmissionError(
                f"{path.name} is not a valid zip file (or one this grader cannot read)."
            ) from None
    elif suffix == ".ipynb":
        _expect_readable_size(path.name, path.stat().st_size)
        text = path.read_text(encoding="utf-8", errors="replace")
    else:
        raise SubmissionError(
            f"{path.name} is not a notebook: submit the .ipynb file (or the zip grader.export() "
            f"writes), "
            f"not a {path.suffix or 'file without extension'}."
        )
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as err:  # nbformat raises several types for bad JSON
        raise SubmissionError(
            f"{path.name} is not a valid notebook (JSON could not be read: {str(err)[:200]})."
        ) from None
    if not any(c.get("cell_type") == "code" for c in nb.cells):
        raise SubmissionError(f"{path.name} has no code cells.")
    language = (nb.metadata.get("kernelspec") or {}).get("language") or (
        nb.metadata.get("language_info") or {}
    ).get("name")
    if language and str(language).lower() != "python":
        raise SubmissionError(
            f"{path.name} is a {language} notebook; this assignment is graded in Python."
        )
    otter_metadata = nb.metadata.get("otter")
    named = otter_metadata.get("assignment_name") if isinstance(otter_metadata, dict) else None
    if expected_name and named and str(named) != expected_name:
        raise SubmissionError(
            f"{path.name} is the notebook of the assignment {str(named)[:100]!r} (its metadata "
            f"says "
            f"so), not of {expected_name!r}, the assignment it was submitted to: submit your "
            f"{expected_name} notebook."
        )
    return nb


def cells_to_run(nb) -> list[str]:
    """The code cells to execute, as Otter would: ignored cells dropped, Otter calls removed. (Otter
    also puts its seeding lines at the top of each cell, which breaks a cell that starts with a cell
    magic such as ``%%time``; the student process seeds before each cell instead,
    :class:`Session`.)"""
    sources = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {})
        if "otter_ignore" in meta.get("tags", []) or meta.get("otter", {}).get("ignore", False):
            continue
        source = "".join(cell.source) if isinstance(cell.source, list) else cell.source
        sources.append(without_otter_calls(source))
    return sources


def find_gradescope_submission(folder: Path) -> Path:
    """The notebook (or export zip) in Gradescope's ``submission/`` folder.

    Raises:
        SubmissionError: no notebook, or several, with the names found.
    """
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and "__MACOSX" not in p.parts)
    notebooks = [
        p for p in files if p.suffix.lower() == ".ipynb" and ".ipynb_checkpoints" not in p.parts
    ]
    zips = [p for p in files if p.suffix.lower() == ".zip"]
    if len(notebooks) == 1:
        return notebooks[0]
    if len(notebooks) > 1:
        raise SubmissionError(
            f"the submission holds {len(notebooks)} notebooks "
            f"({', '.join(p.name for p in notebooks)}); submit exactly one."
        )
    if len(zips) == 1:
        return zips[0]
    names = ", ".join(p.name for p in files) or "nothing"
    raise SubmissionError(
        f"the submission holds no notebook (found: {names}); submit the .ipynb file."
    )
