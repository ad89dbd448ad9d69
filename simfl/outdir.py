"""Rules for the files and folders simfl writes: never lose a file simfl did not write.

Every folder simfl creates for results (a run's ``<out>``, its staging
``<out>.partial``, a sweep folder, a report folder) holds a marker file
``.simfl``. Once the folder is complete the marker lists, one per line, the
files simfl put there. ``--force`` replaces an existing folder only when it
carries that marker, and only the files the marker lists are removed: a file
a user added to the folder (before or during a run) is kept. A folder without
the marker is never removed; the message names it.

In a staging folder (``<out>.partial``) simfl writes only names of its own
layout (:func:`simfl_name`: ``scenario.yaml``, ``<algorithm>/seed<k>/metrics.csv``,
``running/<algorithm>/seed<k>.pt``, ...); any other file there is a user's, which
``--force`` keeps and the published marker never lists. A marker entry that is
absolute, climbs out with ``..`` or passes through a symbolic link is refused:
the marker was tampered with.

One command at a time owns an output folder (:func:`hold`): an OS file lock on
``<out>.lock`` beside it, naming the holder (pid, command, start time). The OS
releases it when the process ends, so a crash leaves no stale lock.

Output paths are checked before anything is written (:func:`check_path`): no
NUL bytes, no component over 255 bytes, not the current folder or one of its
parents, not under ``/proc``, ``/sys`` or ``/dev``, not under a file, not a
symbolic link. A scenario ``name`` must be one safe path component
(:func:`name_problem`).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import shlex
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from simfl.errors import InputError, no_space

MARKER = ".simfl"
"""Marker file of a folder simfl wrote; in a complete folder it lists the files simfl put there."""
MARKER_HEAD = "# written by simfl; `--force` may replace the files listed below (and only these)"
MAX_COMPONENT = 255
"""Bytes in one file or folder name (the limit of common file systems)."""
MAX_PATH = 4095
"""Bytes in a whole path (Linux PATH_MAX less the terminating NUL)."""
SYSTEM_TREES = (Path("/proc"), Path("/sys"), Path("/dev"))
LOCK_SUFFIX = ".lock"
"""Suffix of the lock file beside an output folder (``<out>.lock``)."""
SWEEP_FILE = "sweep.yaml"
"""A sweep folder's scenario as it was started (:mod:`simfl.launch.grid`), beside its cells' folders."""
CELLS_FILE = "cells.csv"
"""A sweep folder's index of its cells (with sequential seeds, those of every point's looks)."""
_OWN_NAMES = re.compile(
    r"(?:scenario\.yaml|summary\.csv|comparison\.(?:csv|md)|(?:accuracy|sensitivity|sweep)(?:\.png\.tmp)?\.png|FAILED|INCOMPLETE|checkpoint\.pt|crash\.txt|table\.(?:csv|md|tex)"
    r"|running/[^/]+/seed[0-9]+\.pt"
    r"|[^/]+/seed[0-9]+/(?:metrics\.csv|events\.csv|federated\.csv|train\.csv|server\.csv|layer_changes\.npy|numerics\.json))(?:\.tmp)?")
"""Every name simfl writes in a run or report folder (see :mod:`simfl.output.results`), and its temporary file."""


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


def default_out(name: str, sweep: bool = False) -> Path:
    """Where ``simfl run`` (``runs/<name>``) or ``simfl sweep`` (``runs/<name>-sweep``) writes without ``--out``."""
    return Path("runs") / (f"{name}-sweep" if sweep else name)


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


def simfl_name(rel: str) -> bool:
    """Whether ``rel`` (a relative POSIX path) is a name simfl writes in a run or report folder."""
    return _OWN_NAMES.fullmatch(rel) is not None


def _entry_problem(folder: Path, rel: str) -> str | None:
    """Why the marker entry ``rel`` does not name a file inside ``folder`` (None when it does)."""
    if not rel or "\x00" in rel or "\\" in rel or rel.startswith("/") or Path(rel).is_absolute():
        return "is not a relative name"
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "climbs out of the folder or is not a plain name"
    here = folder
    for part in parts:
        here = here / part
        if here.is_symlink():
            return "is or passes through a symbolic link"
    return None


def listed(folder: Path) -> set[str]:
    """The files the marker of ``folder`` lists (relative POSIX paths); empty without a marker.

    An entry that is absolute, climbs out with ``..`` or passes through a symbolic link is
    refused in one line: such a marker was not written by simfl, and trusting it could remove
    a file outside the folder.
    """
    if not is_ours(folder):
        return set()
    try:
        lines = (folder / MARKER).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return set()
    entries = {ln for ln in lines if ln and not ln.startswith("#")}
    for rel in sorted(entries):
        problem = _entry_problem(folder, rel)
        if problem is not None:
            raise InputError(str(folder / MARKER), f"lists {rel[:80]!r}, which {problem}; simfl does not write such "
                             "entries, so the marker was edited: check the folder and remove it yourself")
    return entries


def mark(folder: Path, files: Iterable[str] = ()) -> None:
    """Write the marker of ``folder`` listing ``files`` (relative POSIX paths)."""
    body = "\n".join([MARKER_HEAD, *sorted(files)]) + "\n"
    tmp = folder / (MARKER + ".tmp")
    with room(folder / MARKER, tmp):
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
    """Write the marker of a complete folder, listing the files of simfl's layout now in it (not a user's)."""
    mark(folder, [f for f in files_under(folder) if simfl_name(f) and not (folder / f).is_symlink()])


def not_ours(folder: Path, what: str = "--force") -> InputError:
    """The refusal to remove a folder without simfl's marker."""
    return InputError(str(folder), f"was not written by simfl (no {MARKER} file in it); {what} only replaces folders "
                      "simfl wrote: move it away yourself or choose another --out")


def _prune(folder: Path, root: bool = True) -> bool:
    """Remove the empty folders below (and, with ``root``, including) ``folder``; whether ``folder`` is gone."""
    for here, _dirs, _files in sorted(os.walk(folder, topdown=False), key=lambda t: -len(t[0])):
        if root or Path(here) != folder:
            with contextlib.suppress(OSError):
                os.rmdir(here)
    return not folder.exists()


def remove_own(folder: Path, names: Iterable[str], root: bool = False) -> None:
    """Remove the files ``names`` of ``folder`` (relative paths simfl wrote) and the folders they leave empty
    (``folder`` itself too with ``root``). A name that is a symbolic link loses the link, never its target;
    a name reached through a linked folder is left alone."""
    for rel in names:
        parent = rel.rpartition("/")[0]
        if not parent or _entry_problem(folder, parent) is None:
            with contextlib.suppress(FileNotFoundError):
                (folder / rel).unlink()
    _prune(folder, root)


def writable(folder: Path, rel: str) -> Path:
    """``folder / rel`` after refusing a path through or onto a symbolic link (simfl never writes through
    one: a link planted in a result folder must not redirect a write to a file elsewhere)."""
    problem = _entry_problem(folder, rel)
    if problem is not None:
        raise InputError(str(folder / rel), f"{problem}; simfl writes its results only to plain files inside "
                         f"{folder}: remove the link")
    return folder / rel


def remove(folder: Path) -> bool:
    """Remove the staging folder ``folder``, which simfl wrote, except the files in it that are not simfl's.

    simfl writes only names of its layout there (:func:`simfl_name`); anything else, a user's file
    dropped in during a run, stays with the folders holding it. Returns whether the folder is gone.
    """
    if folder.is_symlink() or not folder.exists():
        raise not_ours(folder)
    if not is_ours(folder):
        raise not_ours(folder)
    remove_own(folder, [f for f in files_under(folder)  # simfl's names, and every link (the link, not its target)
                        if simfl_name(f) or f in (MARKER, MARKER + ".tmp") or (folder / f).is_symlink()], root=True)
    return not folder.exists()


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
        if p.is_file() and not p.is_symlink():
            p.unlink()
    if not _prune(old):
        raise InputError(str(old), f"gained files during the run that simfl did not write; they are kept and the new "
                         f"results are in {new}")
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


def make_dir(folder: Path, exist_ok: bool = False) -> None:
    """Create ``folder`` (and its parents) with simfl's marker; OS errors become one-line InputErrors.

    ``exist_ok`` takes over a folder that :func:`remove` had to keep for a user's files.
    """
    try:
        folder.mkdir(parents=True, exist_ok=exist_ok)
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


@contextlib.contextmanager
def room(path: Path, tmp: Path | None = None, size: int | None = None) -> Iterator[None]:
    """Within the block, a write to ``path`` that fails for want of room (disk, quota, ``ulimit -f``) is undone
    and raised as one-line :class:`~simfl.errors.NoSpace`: ``tmp`` is removed, or ``path`` cut back to ``size``
    bytes (removed when ``size`` is None and no ``tmp`` is given). A link planted at ``tmp`` is removed
    first, so the write cannot follow it elsewhere."""
    if tmp is not None and tmp.is_symlink():
        tmp.unlink()
    try:
        yield
    except OSError as exc:
        full = no_space(exc, path)
        if full is None:
            raise
        with contextlib.suppress(OSError):
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            elif size is None:
                path.unlink(missing_ok=True)
            else:
                os.truncate(path, size)
        raise full from None


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


# -- one owner per output folder ------------------------------------------------------------


def lock_path(out: Path) -> Path:
    """The lock file of the output folder ``out``: ``<out>.lock`` beside it."""
    return out.with_name(out.name + LOCK_SUFFIX)


def _holder_line() -> str:
    command = shlex.join([Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]])
    since = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return f"pid {os.getpid()}, `{command[:200]}`, since {since}"


HELD: list[Path] = []
"""Every output folder this process took (:func:`hold`), in order: what an interrupted command tells of
(:func:`simfl.cli.main` reads those its command took)."""


@contextlib.contextmanager
def hold(out: Path) -> Iterator[None]:
    """Own the output folder ``out`` for the block: a second command on it is refused in one line.

    An exclusive ``flock`` on ``<out>.lock`` (created beside ``out``, with its parents), holding
    the holder's pid, command and start time. The OS drops the lock when the process ends, so
    after a crash the next command takes it over; the file is removed on release. ``out`` is added to
    :data:`HELD` once the lock is taken.
    """
    check_path(out)
    path = lock_path(out)
    check_path(path, str(out))
    made = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(out), f"cannot create the folder that holds it ({exc.strerror or exc})") from None
    try:
        with _locked(path, out):
            HELD.append(out)
            yield
    finally:
        for folder in made:  # deepest first: the folders made for the lock alone go again
            with contextlib.suppress(OSError):
                folder.rmdir()


def _not_a_file(mode: int) -> str:
    """What a file of ``mode`` is when it is not a regular file (a FIFO, a socket, a device, a folder, a link),
    else ''."""
    if stat.S_ISREG(mode):
        return ""
    kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISLNK, "a symbolic link"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def _not_a_lock(path: Path, out: Path, kind: str) -> InputError:
    """The one line for something other than a regular file at ``out``'s lock path."""
    return InputError(str(path), f"is {kind}, not a regular file: simfl keeps the lock of {out} in a file of that "
                      "name; remove it, or choose another --out")


def _foreign(fd: int) -> str:
    """Why the open lock file ``fd`` is not one simfl may overwrite, or '': one with other names (a hard link: writing
    would change the file it shares), or holding anything but a holder line (a user's file of that name)."""
    links = os.fstat(fd).st_nlink
    if links > 1:
        return f"has {links - 1} other name{'s' if links > 2 else ''} (a hard link to another file)"
    head = os.pread(fd, 64, 0)
    if head and not head.startswith(b"pid "):
        return "is not a lock file simfl wrote (those read 'pid N, `command`, since T')"
    return ""


@contextlib.contextmanager
def _locked(path: Path, out: Path) -> Iterator[None]:
    """Hold the flock on ``path`` (the lock file of ``out``) for the block; see :func:`hold`."""
    import fcntl

    # O_NONBLOCK: opening a FIFO put there returns at once instead of waiting for a writer (no effect on a file)
    flags = (os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
    for _attempt in range(20):
        try:
            kind = _not_a_file(os.lstat(path).st_mode)
        except OSError:  # not there (or not readable: the open below says why)
            kind = ""
        if kind:  # a socket or a folder would fail to open with a cryptic errno, a FIFO could block
            raise _not_a_lock(path, out, kind)
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise InputError(str(path), f"cannot open the folder's lock file ({exc.strerror or exc})") from None
        kind = _not_a_file(os.fstat(fd).st_mode)
        if kind:
            os.close(fd)
            raise _not_a_lock(path, out, kind)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 1024, 0).decode("utf-8", "replace").strip() or "another process"
            finally:
                os.close(fd)
            raise InputError(str(out), f"is in use by another simfl command ({holder}); wait for it to end or stop "
                             "it, or choose another --out") from None
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file as we opened it: take the new one
    else:
        raise InputError(str(path), "the lock file keeps changing; is another simfl command starting on it?")
    foreign = _foreign(fd)
    if foreign:
        os.close(fd)
        raise InputError(str(path), f"{foreign}: simfl keeps the lock of {out} in a file of that name and would "
                         "overwrite it; remove it, or choose another --out")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, (_holder_line() + "\n").encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                path.unlink()
        os.close(fd)
