"""mkdocs hook: the README, the scenario reference and the benchmarks' README become pages of the site.

They stay where the repository keeps them (one source each); the hook adds them
to the site's files at build time as ``index.md``, ``reference.md`` and ``benchmarks.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

PAGES = (("README.md", "index.md"), ("scenarios/REFERENCE.md", "reference.md"), ("benchmarks/README.md", "benchmarks.md"))


def on_files(files: Files, config: Any) -> Files:
    root = Path(config.config_file_path).parent
    for source, page in PAGES:
        text = (root / source).read_text(encoding="utf-8")
        for other, other_page in PAGES:  # links between these files point at their pages
            text = text.replace(f"]({other})", f"]({other_page})")
        if source == "README.md":  # the front page sits at the site's root: its links into docs/ point at their pages
            text = text.replace("](docs/", "](")
        files.append(File.generated(config, page, content=text))
    return files
