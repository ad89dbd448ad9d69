"""The committed results name no path of the machine that made them: every text file under results/ is free of
absolute paths, and no YAML value there starts with ``/`` or ``~``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

RESULTS = Path(__file__).resolve().parents[2] / "results"
ABSOLUTE = re.compile(r"(?<![\w:/.~-])/(?:work|home|root|tmp|Users|mnt|opt|srv|scratch|var|data)/")
"""An absolute path under a folder where machines keep users' files (not part of a URL or a relative path)."""


def _texts() -> Iterator[tuple[Path, str]]:
    for path in sorted(RESULTS.rglob("*")):
        if path.is_file():
            try:
                yield path, path.read_text(encoding="utf-8")
            except UnicodeDecodeError:  # figures
                continue


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_results_hold_no_absolute_path() -> None:
    texts = list(_texts())
    assert len(texts) > 100  # the walk saw the committed files
    found = [f"{path.relative_to(RESULTS)}: {match.group(0)}" for path, text in texts
             for match in [ABSOLUTE.search(text)] if match]
    assert not found, found[:10]
    for path, text in texts:
        if path.suffix in (".yaml", ".yml"):
            rooted = [v for v in _strings(yaml.safe_load(text)) if v.startswith(("/", "~"))]
            assert not rooted, f"{path.relative_to(RESULTS)}: {rooted}"
