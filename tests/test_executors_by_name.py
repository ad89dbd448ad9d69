"""Executors by name, as the other components: each ``executor.kind`` is listed once with its class
(``simfl.train.configs.EXECUTORS``), which builds itself from the ``executor:`` section, and what runs a scenario
chooses none by comparing kinds."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from simfl import registry
from simfl.train.configs import EXECUTORS, ExecutorKind
from simfl.train.executor import Executor

PACKAGE = Path(__file__).resolve().parents[1] / "simfl"
PENDING: set[str] = set()
"""Modules outside ``train/`` that still compare an executor's kind (none): one listed here fails the test once it no
longer does, so that it leaves this list too."""

pytestmark = pytest.mark.fast


def test_every_kind_is_listed_with_a_class_that_builds_itself() -> None:
    assert set(EXECUTORS) == set(get_args(ExecutorKind))
    for kind in ("inline", "none", "process", "adaptive"):  # ray and cuda import their own packages only when built
        cls = registry.load(EXECUTORS[kind])
        assert issubclass(cls, Executor) and cls.of.__func__ is not Executor.of.__func__, kind


def kind_comparisons(root: Path) -> dict[str, list[int]]:
    """Per module outside ``train/``, the lines that compare a string with an executor kind's name."""
    kinds = set(get_args(ExecutorKind))
    found: dict[str, list[int]] = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root.parent).as_posix()
        if where.startswith("simfl/train/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), where)):
            if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in kinds
                                                     for c in ast.walk(node)):
                found.setdefault(where, []).append(node.lineno)
    return found


def test_no_module_outside_train_chooses_by_the_executors_kind() -> None:
    found = kind_comparisons(PACKAGE)
    new = {where: lines for where, lines in found.items() if where not in PENDING}
    assert not new, f"compared with an executor kind outside simfl/train/ (ask ExecutorConfig instead): {new}"
    done = sorted(PENDING - set(found))
    assert not done, f"no longer compare an executor kind: remove {done} from PENDING"
    assert "simfl/launch/experiment.py" not in found
