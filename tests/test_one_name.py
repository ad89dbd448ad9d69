"""One name, one class: no class name is defined twice in the package, so that a name in a message, a traceback
or the docs means one thing."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "simfl"
PENDING: dict[str, int] = {}
"""Names still defined twice (none): a name that must be defined twice for a while is listed here with its count, and
the test fails once it is renamed, so that it leaves this list too."""

pytestmark = pytest.mark.fast


def classes(root: Path) -> dict[str, list[str]]:
    """Every class defined under ``root`` (at any depth of a module), by name, with where."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def twice(root: Path) -> dict[str, list[str]]:
    """The class names defined more than once under ``root``."""
    return {name: where for name, where in classes(root).items() if len(where) > 1}


def test_no_class_name_is_defined_twice_in_the_package() -> None:
    found = twice(PACKAGE)
    new = {name: where for name, where in found.items() if len(where) != PENDING.get(name)}
    assert not new, f"class names defined more than once (rename one of each): {new}"
    renamed = sorted(set(PENDING) - set(found))
    assert not renamed, f"no longer defined twice: remove {renamed} from PENDING"


def test_the_check_finds_a_name_defined_twice(tmp_path: Path) -> None:
    """A class nested in a function counts as one at a module's top."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("class World:\n    pass\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    class World:\n        pass\n")
    assert twice(tmp_path / "pkg") == {"World": ["pkg/a.py:1", "pkg/b.py:2"]}
