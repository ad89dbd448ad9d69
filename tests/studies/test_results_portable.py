"""The committed results name no path of the machine that made them: every text file under results/ is free of
absolute paths, no YAML value there starts with ``/`` or ``~``, and no result file is one git leaves out."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
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


LEFT_OUT = re.compile(r".*(\.pt|\.partial/.*|\.lock|/INCOMPLETE)")
"""What may sit under results/ without being committed: model weights and the state of an unfinished run."""


def test_no_result_file_is_ignored_by_git() -> None:
    """A file under results/ that .gitignore leaves out is missing from every clone, so what reads it
    (`derived.py`, a report) would pass here and fail there."""
    root = RESULTS.parent
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git work tree")
    listed = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--", "results"],
                            cwd=root, capture_output=True, text=True, check=True).stdout.split()
    left_out = [path for path in listed if not LEFT_OUT.fullmatch(path)]
    assert not left_out, left_out[:10]
