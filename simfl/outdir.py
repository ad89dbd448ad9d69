"""Rules for the files and folders simfl writes: never lose a file simfl did not write.

Every folder simfl creates for results (a run's ``<out>``, its staging
``<out>.partial``, a sweep folder, a report folder) holds a marker file
``.simfl``. Once the folder is complete the marker lists, one per line, the
files simfl put there. ``--force`` replaces an existing folder only when it
carries that marker, and only the files the marker lists are removed: a file
a user added to the folder (before or during a run) is kept. A folder without
the marker is never removed; the message names it.

Output paths are checked before anything is written (:func:`check_path`): no
NUL bytes, no component over 255 bytes, not the current folder or one of its
parents, not under ``/proc``, ``/sys`` or ``/dev``, not under a file, not a
symbolic link. A scenario ``name`` must be one safe path component
(:func:`name_problem`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from simfl.errors import InputError

MARKER = ".simfl"
"""Marker file of a folder simfl wrote; in a complete folder it lists the files simfl put there."""
MARKER_HEAD = "# written by simfl; `--force` may replace the files listed below (and only these)"
MAX_COMPONENT = 255
"""Bytes in one file or folder name (the limit of common file systems)."""
MAX_PATH = 4095
"""Bytes in a whole path (Linux PATH_MAX less the terminating NUL)."""
SYSTEM_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))


def name_problem(name: str) -> str | None:
    """Why ``name`` is not one safe path component (None when it is)."""
    if not name:
        return "must not be empty"
    if "\x00" in name:
        return "must not contain a NUL byte"
    if "/" in name or "\\" in name:
        return f"must be a single folder name without '/' or '\\', got {name!r}"
    if name in (".", ".."):
        return f"must be a folder name, not {name!r}"
    if len(name.encode("utf-8", "surrogateescape")) > MAX_COMPONENT - len(".partial"):
        return f"must be at most {MAX_COMPONENT - len('.partial')} bytes (a folder name), got {len(name.encode())}"
    if any(not c.isprintable() for c in name):
        return f"must hold printable characters only, got {name!r}"
    return None


def check_path(path: Path, where: str | None = None) -> Path:
    """Refuse an output path that cannot or must not be written; returns ``path``."""
    where = where or str(path)
    text = str(path)
    if "\x00" in text:
        raise InputError(where, "contains a NUL byte")
    raw = os.fsencode(text) if "\udcff" not in text else text.encode("utf-8", "surrogateescape")
    if len(raw) > MAX_PATH:
        raise InputError(where, f"path is {len(raw)} bytes long; at most {MAX_PATH} are allowed")
    for part in path.parts:
        if len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT:
            raise InputError(where, f"a name in the path is over {MAX_COMPONENT} bytes ({part[:20]}...)")
    if path.name in ("", ".", ".."):
        raise InputError(where, "must name a new or simfl-written folder, not '.', '..' or '/'")
    try:
        resolved = path.resolve()
        cwd = Path.cwd().resolve()
    except (OSError, RuntimeError) as exc:
        raise InputError(where, f"cannot resolve the path ({exc})") from None
    if resolved == cwd or resolved in cwd.parents:
        raise InputError(where, "is the current folder or one of its parents; name a folder below it")
    for tree in SYSTEM_TREES:
        if resolved == tree or tree in resolved.parents:
            raise InputError(where, f"is under {tree}: not a place for results")
    if path.is_symlink():
        raise InputError(where, "is a symbolic link; give the folder it points to, or another path")
    parent = path.parent
    while True:
        if parent.is_symlink() and not parent.exists():
            raise InputError(where, f"{parent} is a broken symbolic link")
        if parent.exists():
            if not parent.is_dir():
                raise InputError(where, f"{parent} is a file, not a folder")
            break
        if parent == parent.parent:
            break
        parent = parent.parent
    return path


def is_ours(folder: Path) -> bool:
    """True when ``folder`` is a real folder that carries simfl's marker."""
    marker = folder / MARKER
    return folder.is_dir() and not folder.is_symlink() and marker.is_file() and not marker.is_symlink()


def listed(folder: Path) -> set[str]:
    """The files the marker of ``folder`` lists (relative POSIX paths); empty without a marker."""
    if not is_ours(folder):
        return set()
    try:
        lines = (folder / MARKER).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return set()
    return {ln for ln in lines if ln and not ln.startswith("#") and ".." not in ln.split("/")}


def mark(folder: Path, files: Iterable[str] = ()) -> None:
    """Write the marker of ``folder`` listing ``files`` (relative POSIX paths)."""
    body = "\n".join([MARKER_HEAD, *sorted(files)]) + "\n"
    tmp = folder / (MARKER + ".tmp")
    tmp.write_text(body, encoding="utf-8")
    os.replace(tmp, folder / MARKER)


def files_under(folder: Path) -> list[str]:
    """Every file (or symbolic link) below ``folder`` as a relative POSIX path; links are not followed."""
    out: list[str] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        rel = Path(root).relative_to(folder)
        for name in files + [d for d in dirs if (Path(root) / d).is_symlink()]:
            out.append((rel / name).as_posix())
    return sorted(out)


def mark_complete(folder: Path) -> None:
    """Write the marker of a complete folder, listing every file now in it."""
    mark(folder, [f for f in files_under(folder) if f not in (MARKER, MARKER + ".tmp")])


def not_ours(folder: Path, what: str = "--force") -> InputError:
    """The refusal to remove a folder without simfl's marker."""
    return InputError(str(folder), f"was not written by simfl (no {MARKER} file in it); {what} only replaces folders "
                      "simfl wrote: move it away yourself or choose another --out")


def remove(folder: Path) -> None:
    """Remove ``folder``, which simfl wrote, keeping it if anything in it is not listed by its marker.

    A staging folder's marker lists nothing yet; everything in it is simfl's own.
    """
    if folder.is_symlink() or not folder.exists():
        raise not_ours(folder)
    if not is_ours(folder):
        raise not_ours(folder)
    shutil.rmtree(folder)


def replace(new: Path, old: Path) -> None:
    """Move the complete folder ``new`` to ``old``'s place, keeping every file in ``old`` simfl did not write.

    Files of ``old`` its marker does not list (all of them when it has none) move into
    ``new`` first, at the same relative paths; the rest of ``old`` (simfl's own files)
    is removed. A kept file whose path a new result takes stops the move: nothing is lost
    and the new results stay in ``new``.
    """
    if old.is_symlink():
        raise InputError(str(old), f"became a symbolic link during the run; the new results are kept in {new}")
    if not old.exists():
        os.replace(new, old)
        return
    ours = listed(old)
    keep = [f for f in files_under(old) if f not in ours and f != MARKER]
    clash = [f for f in keep if (new / f).exists() or (new / f).is_symlink()]
    if clash:
        raise InputError(str(old / clash[0]), f"a file simfl did not write has the name of a new result; "
                         f"move it away: the new results are kept in {new}")
    for rel in keep:
        target = new / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(old / rel, target)
    for rel in ours | {MARKER}:
        p = old / rel
        if p.is_symlink() or p.is_file():
            p.unlink()
    for root, _dirs, _files in sorted(os.walk(old, topdown=False), key=lambda t: -len(t[0])):
        try:
            os.rmdir(root)
        except OSError:
            raise InputError(root, f"gained files during the run that simfl did not write; they are kept and the new "
                             f"results are in {new}") from None
    os.replace(new, old)


def claim(out: Path, force: bool, where: str | None = None) -> None:
    """Check that ``out`` may receive new results: absent, empty, or (with ``force``) a folder simfl wrote."""
    check_path(out, where)
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a folder")
    try:
        empty = not out.exists() or not any(out.iterdir())
    except OSError as exc:
        raise InputError(str(out), f"cannot read the folder ({exc.strerror})") from None
    if not empty:
        if not force:
            raise InputError(str(out), "output folder exists and is not empty; pass --force to replace it")
        if not is_ours(out):
            raise not_ours(out)


def make_dir(folder: Path) -> None:
    """Create ``folder`` (and its parents) with simfl's marker; OS errors become one-line InputErrors."""
    try:
        folder.mkdir(parents=True)
        mark(folder)
    except FileExistsError:
        raise InputError(str(folder), "appeared while simfl was preparing it; try again") from None
    except OSError as exc:
        raise InputError(str(folder), f"cannot create the folder ({exc.strerror or exc})") from None


def claim_files(files: dict[Path, Callable[[bytes], bool]], force: bool) -> None:
    """Check that each file may be written: absent, or (with ``force``) recognisably written by simfl.

    ``files`` maps each path to a test of the file's first 4 KiB that says whether simfl wrote it.
    """
    for path, simfls in files.items():
        check_path(path)
        if not (path.exists() or path.is_symlink()):
            continue
        if not force:
            raise InputError(str(path), "exists; pass --force to replace it")
        if path.is_symlink() or not path.is_file():
            raise InputError(str(path), "is not a regular file; --force only replaces files simfl wrote")
        try:
            with path.open("rb") as fh:
                head = fh.read(4096)
        except OSError as exc:
            raise InputError(str(path), f"cannot read it ({exc.strerror})") from None
        if not simfls(head):
            raise InputError(str(path), "was not written by simfl; --force only replaces files simfl wrote: "
                             "move it away yourself or choose another --out")


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename; OS errors become InputErrors."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise InputError(str(path), f"cannot write ({exc.strerror or exc})") from None
