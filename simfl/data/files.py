"""Helpers shared by the file-based loaders: locating files, clear errors, idx parsing, caches."""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

from simfl.errors import InputError

IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8), 0x09: np.dtype(np.int8), 0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}
"""idx type codes and their big-endian element types."""


DATA_ENV = "SIMFL_DATA"
"""Environment variable naming the default data folder (used when a scenario sets no ``data.root``)."""


def default_root() -> Path:
    """The data folder used when ``data.root`` is not set: ``$SIMFL_DATA`` if set, else ``~/.cache/simfl``.

    A relative ``$SIMFL_DATA`` is taken from the current directory, as shells do.
    """
    env = os.environ.get(DATA_ENV, "").strip()
    return Path(env).expanduser().absolute() if env else Path.home() / ".cache" / "simfl"


def data_root(root: Path | None) -> Path:
    """The folder a loader reads: the scenario's ``data.root`` (already made absolute), else ``default_root()``."""
    return Path(root) if root is not None else default_root()


def fetch_command(dataset: str, root: Path) -> str:
    """The one command that downloads ``dataset`` into ``root`` (``--root`` only when not the default)."""
    command = f"simfl data fetch {dataset}"
    return command if Path(root) == default_root() else f"{command} --root '{root}'"


def find_first(candidates: list[Path]) -> Path | None:
    """The first existing path among ``candidates``."""
    for c in candidates:
        if c.exists():
            return c
    return None


def missing(path: Path | str, how: str, fetch: tuple[str, Path] | None = None) -> InputError:
    """The error for a missing data file: the path expected, how to obtain it and, with ``fetch = (dataset,
    root)``, the folder searched and the command that downloads it."""
    if fetch is None:
        return InputError(str(path), f"file not found; {how}")
    dataset, root = fetch
    return InputError(str(path), f"file not found (data folder {root}); {how}; or run: {fetch_command(dataset, root)}")


MAX_FILE_BYTES = 4 << 30
"""Largest data file read (after gunzip): 4 GiB, so a small gzip bomb cannot fill the memory."""


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, gunzipped when it ends in .gz; a corrupt gzip is an InputError."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        else:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise InputError(str(path), f"over {MAX_FILE_BYTES >> 30} GiB: not a dataset file simfl reads")
            data = path.read_bytes()
        if len(data) > MAX_FILE_BYTES:
            raise InputError(str(path), f"over {MAX_FILE_BYTES >> 30} GiB once unpacked: not a dataset file simfl reads")
        return data
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(str(path), f"cannot read: {exc}") from exc


def parse_idx(path: Path, ndim: int) -> np.ndarray:
    """Parse an idx file (optionally .gz) with ``ndim`` dimensions, checking magic and length."""
    data = read_bytes(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in IDX_DTYPES or data[3] != ndim:
        got = data[:4].hex() if len(data) >= 4 else f"{len(data)} bytes"
        raise InputError(
            str(path), f"not an idx file with {ndim} dimension(s): bad magic number {got} "
            f"(expected 0000xx{ndim:02x}, xx a type code)"
        )
    dtype = IDX_DTYPES[data[2]]
    head = 4 + 4 * ndim
    if len(data) < head:
        raise InputError(str(path), f"truncated idx header: {len(data)} bytes, need {head}")
    shape = tuple(int(v) for v in np.frombuffer(data, ">u4", count=ndim, offset=4))
    want = head + math.prod(shape) * dtype.itemsize  # Python integers: a huge header cannot wrap around
    if len(data) != want:
        raise InputError(str(path), f"idx size mismatch: header {shape} needs {want} bytes, file has {len(data)}")
    return np.frombuffer(data, dtype, offset=head).reshape(shape).astype(dtype.newbyteorder("="))


def default_cache_dir(root: Path) -> Path:
    """Where derived files (token caches) go: ``<root>/.simfl-cache`` when writable, else a user cache dir."""
    candidate = root / ".simfl-cache"
    try:
        candidate.mkdir(parents=True, exist_ok=True)
        if os.access(candidate, os.W_OK):
            return candidate
    except OSError:
        pass
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "simfl"
