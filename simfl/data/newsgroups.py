"""20 Newsgroups (bydate split) as token ids, tokenized once with the text model's tokenizer and cached.

Reads ``20news-bydate.tar.gz`` or the extracted ``20news-bydate-train/`` and
``20news-bydate-test/`` folders in the data folder (``data.root``). Documents become
``max_length`` token ids (padded with the tokenizer's pad id, truncated).
The cache file name is a hash of the tokenizer, the max length, the
categories, header handling and the source file's size and mtime; it lives
in ``cache_dir`` (default ``<root>/.simfl-cache`` when writable, else the
user cache dir), never beside read-only data.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import torch

from simfl.data.base import Dataset
from simfl.data.configs import NewsgroupsConfig
from simfl.data.files import data_root, default_cache_dir, missing
from simfl.errors import InputError

ARCHIVE = "20news-bydate.tar.gz"
SPLITS = ("20news-bydate-train", "20news-bydate-test")
HOW = f"put {ARCHIVE} or its extracted folders in the data folder (http://qwone.com/~jason/20Newsgroups/)"
CACHE_VERSION = 1


def _read_texts(root: Path) -> tuple[dict[str, list[tuple[str, bytes]]], Path]:
    """Per split, (group, raw bytes) of every post in sorted order, and the source path."""
    out: dict[str, list[tuple[str, bytes]]] = {s: [] for s in SPLITS}
    if all((root / s).is_dir() for s in SPLITS):
        for s in SPLITS:
            for f in sorted((root / s).glob("*/*")):
                if f.is_file():
                    out[s].append((f.parent.name, f.read_bytes()))
        return out, root / SPLITS[0]
    archive = root / ARCHIVE
    if not archive.is_file():
        raise missing(archive, HOW, ("newsgroups", root))
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for m in sorted(tar.getmembers(), key=lambda m: m.name):
                parts = m.name.strip("./").split("/")
                if m.isfile() and len(parts) == 3 and parts[0] in out:
                    fh = tar.extractfile(m)
                    if fh is not None:
                        out[parts[0]].append((parts[1], fh.read()))
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise InputError(str(archive), f"cannot read archive: {exc}") from exc
    if not out[SPLITS[0]] or not out[SPLITS[1]]:
        raise InputError(str(archive), f"archive lacks {SPLITS[0]}/<group>/<post> or {SPLITS[1]}/...")
    return out, archive


def _text(raw: bytes, remove_headers: bool) -> str:
    text = raw.decode("latin-1")
    if remove_headers:
        head, sep, body = text.partition("\n\n")
        text = body if sep else head
    return " ".join(text.split())


def _cache_path(config: NewsgroupsConfig, root: Path, source: Path) -> Path:
    stat = source.stat()
    key = json.dumps([CACHE_VERSION, config.tokenizer, config.max_length, config.categories,
                      config.remove_headers, str(source.resolve()), stat.st_size, int(stat.st_mtime)])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    folder = config.cache_dir if config.cache_dir is not None else default_cache_dir(root)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in config.tokenizer)[-40:]
    return Path(folder) / f"newsgroups-{safe}-{config.max_length}-{digest}.npz"


def _tokenize(config: NewsgroupsConfig, root: Path) -> dict[str, np.ndarray]:
    from simfl.models.text import load_tokenizer

    posts, _ = _read_texts(root)
    groups = sorted({g for g, _ in posts[SPLITS[0]]})
    if config.categories is not None:
        unknown = sorted(set(config.categories) - set(groups))
        if unknown:
            raise InputError("data.categories", f"unknown newsgroups {unknown}; known: {', '.join(groups)}")
        groups = sorted(config.categories)
    index = {g: i for i, g in enumerate(groups)}
    tok = load_tokenizer(config.tokenizer)
    arrays: dict[str, np.ndarray] = {"groups": np.array(groups)}
    for split, short in zip(SPLITS, ("train", "test"), strict=True):
        kept = [(g, raw) for g, raw in posts[split] if g in index]
        enc = tok([_text(raw, config.remove_headers) for _, raw in kept], padding="max_length", truncation=True,
                  max_length=config.max_length, return_attention_mask=False)
        arrays[f"x_{short}"] = np.asarray(enc["input_ids"], dtype=np.int32)
        arrays[f"y_{short}"] = np.array([index[g] for g, _ in kept], dtype=np.int64)
    return arrays


class Newsgroups:
    """Loader of 20 Newsgroups as token ids."""

    Config = NewsgroupsConfig

    @staticmethod
    def load(config: NewsgroupsConfig) -> Dataset:
        root = data_root(config.root)
        if config.download and not (root / SPLITS[0]).is_dir() and not (root / ARCHIVE).is_file():
            from simfl.data.download import fetch

            fetch("newsgroups", root, progress=True)
        source = root / SPLITS[0] if (root / SPLITS[0]).is_dir() else root / ARCHIVE
        if not source.exists():
            raise missing(root / ARCHIVE, HOW, ("newsgroups", root))
        cache = _cache_path(config, root, source)
        arrays: dict[str, np.ndarray] | None = None
        if cache.is_file():
            try:
                with np.load(cache, allow_pickle=False) as z:
                    arrays = {k: z[k] for k in z.files}
            except (OSError, ValueError, EOFError, zipfile.BadZipFile):
                arrays = None  # a broken cache is rebuilt
        if arrays is None:
            arrays = _tokenize(config, root)
            try:
                cache.parent.mkdir(parents=True, exist_ok=True)
                tmp = cache.with_suffix(".tmp.npz")
                np.savez(tmp, **arrays)  # type: ignore[arg-type]
                tmp.replace(cache)
            except OSError as exc:
                raise InputError("data.cache_dir", f"cannot write token cache {cache}: {exc}") from exc
        return Dataset(
            "newsgroups",
            torch.from_numpy(arrays["x_train"].astype(np.int64)), torch.from_numpy(arrays["y_train"]),
            torch.from_numpy(arrays["x_test"].astype(np.int64)), torch.from_numpy(arrays["y_test"]),
            num_classes=len(arrays["groups"]),
        )
