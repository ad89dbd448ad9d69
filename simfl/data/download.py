"""Downloads of the file-based datasets from their official sources (``simfl data fetch NAME``, ``download: true``).

Nothing is ever downloaded unless a scenario sets ``data.download: true`` or the
user runs ``simfl data fetch``. Each file is streamed to a temporary file beside
its destination while its checksum is computed, checked against the figure
recorded in ``SOURCES``, and only then renamed into place, so an interrupted or
corrupt download leaves nothing half-written. Mirrors are tried in order; a
network failure or a checksum mismatch on every mirror is one ``InputError``
naming the URLs. Archives are unpacked into a temporary folder and moved into
place the same way, into the layout the loaders read (and torchvision reads).

Checksums: MNIST and CIFAR are the MD5s torchvision publishes for the official
files; 20 Newsgroups is the SHA-256 scikit-learn publishes for the official
``20news-bydate.tar.gz``. The UCI repository publishes no checksum for UCI HAR
or HAPT; those downloads are checked by their unpacked contents only
(``digest=None``), and their SHA-256 is printed so a user can record it.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simfl.data.hapt_raw import write_hapt_npz
from simfl.errors import InputError

CHUNK = 1 << 20
TIMEOUT_S = 60.0
"""Seconds without data before a download counts as failed."""


@dataclass(frozen=True)
class Remote:
    """One file to download: its name in the target folder, its URLs (mirrors, in order) and its checksum."""

    name: str
    urls: tuple[str, ...]
    digest: str | None
    """``"md5:<hex>"`` or ``"sha256:<hex>"``; None where the source publishes none (see the module docstring)."""


@dataclass(frozen=True)
class Source:
    """Where one dataset comes from and how its downloaded files become the layout its loader reads."""

    dataset: str
    page: str
    folder: str
    """Folder under the data root that receives the downloaded files."""
    files: tuple[Remote, ...]
    unpack: Callable[[Path, Path], None] | None = None
    """``unpack(downloaded_file, root)``: turn one downloaded file into the loader's layout."""
    ready: Callable[[Path], bool] = field(default=lambda root: False)
    """Whether ``root`` already holds the dataset (then nothing is fetched)."""


# -- unpacking ---------------------------------------------------------------------------------------------------------


def _inside(base: Path, name: str) -> Path:
    """``base / name`` after refusing absolute names and ``..`` (an archive cannot write outside ``base``)."""
    target = (base / name).resolve()
    if not target.is_relative_to(base.resolve()):
        raise InputError(name, "archive member points outside the target folder")
    return target


def _move_into(staging: Path, root: Path) -> None:
    """Move every top-level entry of ``staging`` into ``root``, replacing what an earlier unpack left."""
    for entry in sorted(staging.iterdir()):
        dest = root / entry.name
        if dest.is_dir():
            shutil.rmtree(dest)
        elif dest.exists():
            dest.unlink()
        os.replace(entry, dest)


def gunzip_beside(path: Path, root: Path) -> None:
    """``x.gz`` -> ``x`` in the same folder (torchvision reads MNIST's idx files uncompressed)."""
    out = path.with_suffix("")
    tmp = out.with_name(out.name + ".part")
    try:
        with gzip.open(path, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
        os.replace(tmp, out)
    except (OSError, EOFError) as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(str(path), f"cannot unpack: {exc}") from exc


def untar(path: Path, root: Path) -> None:
    """Unpack a .tar.gz into ``root`` (its top-level folders replace earlier copies)."""
    with tempfile.TemporaryDirectory(dir=root, prefix=".unpack-") as tmp:
        try:
            with tarfile.open(path, "r:*") as tar:
                _extract_safely(tar, Path(tmp))
        except (OSError, EOFError, tarfile.TarError) as exc:
            raise InputError(str(path), f"cannot unpack: {exc}") from exc
        _move_into(Path(tmp), root)


def _extract_safely(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract ``tar`` into ``dest`` with the ``data`` filter (no paths outside ``dest``, no devices or links out,
    no permission bits beyond the user's); where the filter is missing (Python 3.11 before 3.11.4), only regular
    files and folders whose paths stay inside ``dest``, and anything else refused."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    inside = dest.resolve()
    members = tar.getmembers()
    for member in members:
        target = (inside / member.name).resolve()
        if not (member.isfile() or member.isdir()) or not target.is_relative_to(inside):
            raise tarfile.TarError(f"refused member {member.name!r} (only files and folders inside the archive)")
    tar.extractall(dest, members=members)


def _unzip_into(path: Path, dest: Path) -> None:
    """Unpack a zip into ``dest``, skipping macOS metadata and unpacking zips found inside it too."""
    try:
        with zipfile.ZipFile(path) as z:
            inner: list[Path] = []
            for info in z.infolist():
                if info.filename.startswith("__MACOSX/") or info.is_dir():
                    continue
                target = _inside(dest, info.filename)
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
                if target.suffix == ".zip":
                    inner.append(target)
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(str(path), f"cannot unpack: {exc}") from exc
    for z_path in inner:
        _unzip_into(z_path, z_path.parent)
        z_path.unlink()


def unzip(path: Path, root: Path) -> None:
    """Unpack a zip (and the zips inside it, as UCI ships them) into ``root``."""
    with tempfile.TemporaryDirectory(dir=root, prefix=".unpack-") as tmp:
        _unzip_into(path, Path(tmp))
        _move_into(Path(tmp), root)


def hapt_from_zip(path: Path, root: Path) -> None:
    """Unpack the UCI HAPT zip in a temporary folder and build ``root/hapt_raw.npz`` from its RawData."""
    with tempfile.TemporaryDirectory(dir=root, prefix=".unpack-") as tmp:
        _unzip_into(path, Path(tmp))
        raw = sorted(p.parent for p in Path(tmp).rglob("labels.txt") if p.parent.name == "RawData")
        if not raw:
            raise InputError(str(path), "the zip holds no RawData/labels.txt (not the UCI HAPT archive)")
        write_hapt_npz(raw[0], root / "hapt_raw.npz")


# -- the sources -------------------------------------------------------------------------------------------------------

MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
MNIST_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/"
NEWS_SHA256 = "8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610"
HAR_URL = "https://archive.ics.uci.edu/static/public/240/human+activity+recognition+using+smartphones.zip"
HAPT_URL = ("https://archive.ics.uci.edu/static/public/341/"
            "smartphone+based+recognition+of+human+activities+and+postural+transitions.zip")


def _mnist_ready(root: Path) -> bool:
    return all((root / "MNIST" / "raw" / n[:-3]).is_file() for n in MNIST_MD5)


SOURCES: dict[str, Source] = {
    "mnist": Source(
        "mnist", "https://yann.lecun.com/exdb/mnist/", "MNIST/raw",
        tuple(Remote(n, tuple(m + n for m in MNIST_MIRRORS), f"md5:{h}") for n, h in MNIST_MD5.items()),
        gunzip_beside, _mnist_ready,
    ),
    "cifar10": Source(
        "cifar10", "https://www.cs.toronto.edu/~kriz/cifar.html", ".",
        (Remote("cifar-10-python.tar.gz", (CIFAR_URL + "cifar-10-python.tar.gz",),
                "md5:c58f30108f718f92721af3b95e74349a"),),
        untar, lambda root: (root / "cifar-10-batches-py" / "test_batch").is_file(),
    ),
    "cifar100": Source(
        "cifar100", "https://www.cs.toronto.edu/~kriz/cifar.html", ".",
        (Remote("cifar-100-python.tar.gz", (CIFAR_URL + "cifar-100-python.tar.gz",),
                "md5:eb9058c3a382ffc7106e4002c42a8d85"),),
        untar, lambda root: (root / "cifar-100-python" / "test").is_file(),
    ),
    "newsgroups": Source(
        "newsgroups", "http://qwone.com/~jason/20Newsgroups/", ".",
        (Remote("20news-bydate.tar.gz", ("http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz",
                                         "https://ndownloader.figshare.com/files/5975967"), f"sha256:{NEWS_SHA256}"),),
        None, lambda root: (root / "20news-bydate.tar.gz").is_file(),
    ),
    "har": Source(
        "har", "https://archive.ics.uci.edu/dataset/240", ".",
        (Remote("human+activity+recognition+using+smartphones.zip", (HAR_URL,), None),),
        unzip, lambda root: (root / "UCI HAR Dataset" / "test" / "y_test.txt").is_file(),
    ),
    "hapt": Source(
        "hapt", "https://archive.ics.uci.edu/dataset/341", ".",
        (Remote("smartphone+based+recognition+of+human+activities+and+postural+transitions.zip", (HAPT_URL,), None),),
        hapt_from_zip, lambda root: (root / "hapt_raw.npz").is_file(),
    ),
}
"""Every dataset simfl can download, by its ``data.dataset`` name."""


# -- downloading -------------------------------------------------------------------------------------------------------


def _hasher(digest: str | None) -> Any:
    kind = digest.split(":", 1)[0] if digest else "sha256"
    return hashlib.md5(usedforsecurity=False) if kind == "md5" else hashlib.sha256()


def _stream(url: str, tmp: Path, digest: str | None, progress: bool, label: str) -> str:
    """Write ``url`` to ``tmp``; the hex digest of what was written (of the kind ``digest`` names)."""
    from tqdm import tqdm

    h = _hasher(digest)
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # noqa: S310 - URLs come from SOURCES
        total = response.headers.get("Content-Length")
        with open(tmp, "wb") as out, tqdm(total=int(total) if total and total.isdigit() else None, unit="B",
                                           unit_scale=True, unit_divisor=1024, desc=label,
                                           file=sys.stderr, disable=not progress, leave=False) as bar:
            written = 0
            while chunk := response.read(CHUNK):
                out.write(chunk)
                h.update(chunk)
                bar.update(len(chunk))
                written += len(chunk)
    if total and total.isdigit() and written != int(total):
        raise ValueError(f"connection closed after {written} of {total} bytes")
    return h.hexdigest()


def download(remote: Remote, folder: Path, progress: bool = True) -> Path:
    """Download ``remote`` into ``folder`` (mirrors in order), checking its checksum; the file written.

    The file appears under its final name only once complete and verified.
    """
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / remote.name
    failures: list[str] = []
    for url in remote.urls:
        tmp = folder / f"{remote.name}.part{os.getpid()}"
        try:
            got = _stream(url, tmp, remote.digest, progress, remote.name)
        except InputError:
            tmp.unlink(missing_ok=True)
            raise
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            tmp.unlink(missing_ok=True)
            reason = getattr(exc, "reason", None) or exc
            failures.append(f"{url}: download failed ({reason})")
            continue
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if remote.digest is not None:
            kind, want = remote.digest.split(":", 1)
            if got != want.lower():
                tmp.unlink(missing_ok=True)
                failures.append(f"{url}: {kind} checksum mismatch (expected {want}, got {got}); nothing kept")
                continue
        elif progress:
            print(f"{remote.name}: sha256 {got} (the source publishes no checksum)", file=sys.stderr)
        os.replace(tmp, dest)
        return dest
    raise InputError("download", "; ".join(failures))


def fetch(dataset: str, root: Path, progress: bool = True, force: bool = False) -> Path:
    """Download ``dataset`` from its official source into ``root`` and unpack it where its loader looks.

    Does nothing when ``root`` already holds the dataset (unless ``force``); returns ``root``.
    """
    source = SOURCES.get(dataset)
    if source is None:
        raise InputError("dataset", f"simfl cannot download '{dataset}'; it downloads: {', '.join(SOURCES)}")
    root = Path(root)
    if not force and source.ready(root):
        return root
    folder = root / source.folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(folder), f"cannot create the data folder: {exc.strerror or exc}") from exc
    for remote in source.files:
        path = download(remote, folder, progress)
        if source.unpack is not None:
            source.unpack(path, folder)
    if not source.ready(root):
        raise InputError(dataset, f"downloaded from {source.page}, but the files are not where simfl reads them "
                                  f"in {root}")
    return root
