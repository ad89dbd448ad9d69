"""The import graph of ``simfl`` matches the layers of docs/architecture.md.

Every module belongs to one layer; an import (at module level, inside a function or under
``TYPE_CHECKING``: all are read from the source) may reach only its own layer or a lower one,
and the graph has no cycle. A fresh interpreter then imports every module lowest first and
checks that none pulls in a module of a higher layer as it loads (its parent packages aside,
which Python always loads first; ``simfl/__init__.py`` itself imports nothing at run time).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "simfl"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("simfl.errors", "simfl.rng", "simfl.fields", "simfl.names", "simfl.yamlsafe", "simfl.outdir",
                    "simfl.network", "simfl.numerics", "simfl.openmp", "simfl.registry", "simfl.collector",
                    "simfl.hashing", "simfl.jit", "simfl.unpickle", "simfl.speeds",
                    "simfl.scenarios")),
    ("models", ("simfl.models",)),
    ("data", ("simfl.data",)),
    ("latency", ("simfl.latency",)),
    ("train", ("simfl.train",)),
    ("algorithms", ("simfl.algorithms",)),
    ("sim", ("simfl.sim",)),
    ("output", ("simfl.output",)),
    ("schema", ("simfl.schema",)),
    ("launch", ("simfl.launch", "simfl.studies")),
    ("entry", ("simfl", "simfl.__main__", "simfl.cli", "simfl.crash")),
]
"""Lowest first: a module's layer is the one naming the longest prefix of its dotted name."""


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def layer_of(module: str) -> int:
    best = (-1, -1)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                best = max(best, (len(prefix), index))
    assert best[1] >= 0, f"{module} is in no layer: add it to LAYERS and to docs/architecture.md"
    return best[1]


def imports(module: str, path: Path, known: Iterable[str]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its source."""
    known = set(known)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def nearest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(head + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found.update(t for t in map(nearest, targets) if t is not None and t != module)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, p, mods) for m, p in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            child = next(it, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def problems(edges: dict[str, set[str]]) -> list[str]:
    """Each cycle and each import reaching a higher layer, one line each."""
    lines = [f"cycle: {' <-> '.join(c)}" for c in cycles(edges)]
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            if layer_of(target) > layer_of(module):
                lines.append(f"upward: {module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                             f"({LAYERS[layer_of(target)][0]})")
    return lines


def test_the_import_graph_has_no_cycle_and_no_upward_import() -> None:
    assert problems(graph()) == []


def test_the_check_fails_on_a_cycle_and_on_an_upward_import() -> None:
    edges = graph()
    edges["simfl.algorithms.base"].add("simfl.schema.plugins")  # the circle this layering removed
    edges["simfl.sim.schedulers"].add("simfl.launch.runner")
    found = problems(edges)
    assert any(line.startswith("cycle: ") and "simfl.schema.plugins" in line for line in found)
    assert "upward: simfl.sim.schedulers (sim) imports simfl.launch.runner (launch)" in found


def test_a_function_level_import_counts(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from simfl.launch import runner\n    import simfl.output.report\n")
    assert imports("simfl.sim.m", source, modules()) == {"simfl.launch.runner", "simfl.output.report"}


def test_a_fresh_interpreter_imports_each_layer_without_a_higher_one() -> None:
    order = sorted((m for m in modules() if m != "simfl.__main__"), key=lambda m: (layer_of(m), m))  # it runs the CLI
    layers = {m: layer_of(m) for m in order}
    script = f"""
import importlib, json, sys
layers = json.loads({json.dumps(json.dumps(layers))})
for name in {order!r}:
    importlib.import_module(name)
    ancestors = {{name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)}}  # Python loads these first
    above = sorted(m for m in sys.modules if layers.get(m, -1) > layers[name] and m not in ancestors)
    if above:
        print(json.dumps([name, above]))
        sys.exit(1)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
