"""What ``simfl data fetch`` checks before it calls a dataset ready: the files are the source's, unaltered.

Three checks, each where it applies:

1. A downloaded archive still in the folder matches the checksum its source publishes
   (:data:`simfl.data.download.SOURCES`).
2. The files unpacked from it are byte for byte the archive's members (a tar's or zip's files,
   zips inside the zip included, or the content of a ``.gz``): an edited batch file is found even
   though the archive is intact.
3. The content is what simfl's own loader accepts (shapes, label ranges, pickles read as plain
   data only): the check where no checksum is published or the archive is gone.

Any failure is one :class:`~simfl.errors.InputError` naming the file and the way to start over
(``simfl data fetch NAME --force``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from simfl.data import DATASETS
from simfl.data.download import SOURCES, Remote, gunzip_beside, untar, unzip
from simfl.errors import InputError

CHUNK = 1 << 20
UNPACKED_DIGESTS: dict[str, dict[str, str]] = {
    "mnist": {
        "train-images-idx3-ubyte": "md5:6bbc9ace898e44ae57da46a324031adb",
        "train-labels-idx1-ubyte": "md5:a25bea736e30d166cdddb491f175f624",
        "t10k-images-idx3-ubyte": "md5:2646ac647ad5339dbf082846283269ea",
        "t10k-labels-idx1-ubyte": "md5:27ae3e4e09519cfbb04c329615203637",
    },
}
"""Published checksums of unpacked files (MNIST's uncompressed idx files): a re-compressed ``.gz`` whose
content is the official one passes, and an unpacked file is checked even without its archive."""


def _digest(stream: IO[bytes], kind: str = "sha256") -> str:
    h = hashlib.md5(usedforsecurity=False) if kind == "md5" else hashlib.sha256()
    while chunk := stream.read(CHUNK):
        h.update(chunk)
    return h.hexdigest()


def _file_digest(path: Path, kind: str = "sha256") -> str:
    try:
        with path.open("rb") as fh:
            return _digest(fh, kind)
    except OSError as exc:
        raise InputError(str(path), f"cannot be read ({exc.strerror or exc})") from None


def _refetch(dataset: str) -> str:
    return f"remove it, or run `simfl data fetch {dataset} --force`"


def check_archive(archive: Path, remote: Remote, dataset: str) -> str:
    """Refuse ``archive`` unless it (or, for a ``.gz``, its content) matches the published checksum; what was
    checked, in words."""
    if remote.digest is None:
        return f"{archive.name}: the source publishes no checksum"
    kind, want = remote.digest.split(":", 1)
    got = _file_digest(archive, kind)
    if got == want.lower():
        return f"{archive.name}: {kind} matches the published checksum"
    inner = UNPACKED_DIGESTS.get(dataset, {}).get(archive.name.removesuffix(".gz"))
    if inner is not None and archive.name.endswith(".gz"):
        inner_kind, inner_want = inner.split(":", 1)
        try:
            with gzip.open(archive, "rb") as fh:
                same = _digest(fh, inner_kind) == inner_want  # type: ignore[arg-type]
        except (OSError, EOFError) as exc:
            raise InputError(str(archive), f"cannot be decompressed ({exc}); {_refetch(dataset)}") from None
        if same:
            return f"{archive.name}: recompressed, its content matches the published checksum"
    raise InputError(str(archive), f"{kind} is {got}, not the published {want}: the file was altered, corrupted or "
                     f"repacked; {_refetch(dataset)}")


def check_published(folder: Path, dataset: str) -> list[str]:
    """Refuse an unpacked file whose published checksum it does not match; what was checked."""
    done = []
    for name, digest in UNPACKED_DIGESTS.get(dataset, {}).items():
        path = folder / name
        if path.is_file():
            kind, want = digest.split(":", 1)
            got = _file_digest(path, kind)
            if got != want:
                raise InputError(str(path), f"{kind} is {got}, not the published {want}: the file was altered or "
                                 f"corrupted; {_refetch(dataset)}")
            done.append(f"{name}: {kind} matches the published checksum")
    return done


def _members(archive: Path) -> Iterator[tuple[str, IO[bytes]]]:
    """(relative name, content stream) of every file an archive unpacks to, as :mod:`simfl.data.download` does."""
    name = archive.name
    if name.endswith(".gz") and not name.endswith(".tar.gz"):
        with gzip.open(archive, "rb") as fh:
            yield name[: -len(".gz")], fh  # type: ignore[misc]
    elif name.endswith(".tar.gz"):
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                if member.isfile():
                    stream = tar.extractfile(member)
                    if stream is not None:
                        yield member.name, stream
    elif name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            yield from _zip_members(z)


def _zip_members(z: zipfile.ZipFile, prefix: str = "") -> Iterator[tuple[str, IO[bytes]]]:
    for info in z.infolist():
        if info.filename.startswith("__MACOSX/") or info.is_dir():
            continue
        if info.filename.endswith(".zip"):  # the download unpacks an inner zip into the folder it lies in
            parent = str(Path(info.filename).parent)
            inner = zipfile.ZipFile(io.BytesIO(z.read(info)))
            yield from _zip_members(inner, prefix if parent == "." else f"{prefix}{parent}/")
            continue
        with z.open(info) as stream:
            yield prefix + info.filename, stream


def check_unpacked(archive: Path, folder: Path, dataset: str) -> str:
    """Refuse an unpacked file of ``folder`` that differs from its member of ``archive``; what was checked."""
    compared = 0
    try:
        for rel, stream in _members(archive):
            target = folder / rel
            if not target.is_file():
                continue  # a file the loader does not need may be removed; the loader check finds a missing one
            if _digest(stream) != _file_digest(target):
                raise InputError(str(target), f"differs from its copy in {archive.name}: it was altered after "
                                 f"unpacking; {_refetch(dataset)}")
            compared += 1
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise InputError(str(archive), f"cannot be read ({exc}); {_refetch(dataset)}") from None
    return f"{compared} unpacked files match {archive.name}"


def check_content(dataset: str, root: Path) -> str:
    """Refuse a dataset simfl's own loader refuses (shapes, labels, plain-data pickles); what was checked."""
    loader = DATASETS[dataset]
    try:
        config = loader.Config.model_validate({"dataset": dataset, "root": root, "partition": {"kind": "iid", "clients": 1}})
        data = loader.load(config)
    except InputError as exc:
        raise InputError(exc.where, f"{exc.message}; {_refetch(dataset)}") from None
    return f"content read by simfl's loader: {len(data.y_train):,} training and {len(data.y_test):,} test samples"


def verify(dataset: str, root: Path) -> list[str]:
    """Every check of the module docstring that applies to ``dataset`` in ``root``; what was checked, in words."""
    source = SOURCES[dataset]
    folder = root / source.folder
    done: list[str] = []
    for remote in source.files:
        archive = folder / remote.name
        if archive.is_file():
            done.append(check_archive(archive, remote, dataset))
            if source.unpack in (gunzip_beside, untar, unzip):  # members kept as files (HAPT's zip becomes an npz)
                done.append(check_unpacked(archive, folder, dataset))
    done += check_published(folder, dataset)
    if dataset != "newsgroups" or not done:  # the newsgroups loader reads the checked archive itself
        done.append(check_content(dataset, root))
    return done
