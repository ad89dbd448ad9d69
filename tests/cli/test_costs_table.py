"""The estimate's measured constants live in ``simfl/schema/costs.json``: every one the code reads is there, with
where it came from, and the file holds nothing the code does not read."""

from __future__ import annotations

import ast
from pathlib import Path

from benchmarks import costs as writer
from simfl.schema import costs

PACKAGE = Path(costs.__file__).resolve().parents[1]
READERS = ("number", "whole")
"""The functions of :mod:`simfl.schema.costs` that read a constant by name."""


def names_read() -> dict[str, list[str]]:
    """Each constant of the table that the package's code reads (by :data:`READERS`, as ``costs.NAME`` or imported
    by name), with where."""
    code = {n for n in vars(costs) if n.isupper()}
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        where = str(path.relative_to(PACKAGE.parent))
        imported = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "simfl.schema.costs" for a in node.names}
        readers = {r for r in READERS if r in imported or path.samefile(costs.__file__)}
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Call):
                func = node.func
                called = (func.id if isinstance(func, ast.Name) and func.id in readers else
                          func.attr if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                          and func.value.id == "costs" and func.attr in READERS else None)
                if called is not None:
                    arg = node.args[0] if node.args else None
                    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), (
                        f"{where}:{node.lineno}: {called}() takes the constant's name as a literal string")
                    name = arg.value
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "costs":
                name = node.attr if node.attr.isupper() and node.attr not in code else None
            elif isinstance(node, ast.ImportFrom) and node.module == "simfl.schema.costs":
                for alias in node.names:
                    if alias.name.isupper() and alias.name not in code:
                        found.setdefault(alias.name, []).append(f"{where}:{node.lineno}")
            if name is not None:
                found.setdefault(name, []).append(f"{where}:{node.lineno}")
    return found


def test_every_constant_read_is_in_the_table_with_its_provenance_and_none_is_unused() -> None:
    table = costs.table()
    read = names_read()
    missing = {n: w for n, w in read.items() if n not in table}
    assert not missing, f"read but not in {costs.TABLE.name}: {missing}"
    unused = sorted(set(table) - set(read))
    assert not unused, f"in {costs.TABLE.name} but read nowhere in simfl/: {unused}"
    for name, entry in table.items():
        for what in ("unit", "what", "measured_by", "when", "machine"):
            assert getattr(entry, what).strip(), f"{name}: {what} is empty (write 'not recorded' where it is not known)"
    both = sorted(n for n in vars(costs) if n.isupper() and n in table)
    assert not both, f"defined in the code and in the table: {both}"


def test_the_table_is_in_its_writers_layout() -> None:
    """A refit through ``python -m benchmarks.costs`` changes the values and their provenance, nothing else."""
    assert costs.TABLE.read_text() == writer.text(writer.read())
    assert costs.whole("RUNTIME_BYTES") == costs.RUNTIME_BYTES == 1 << 30
    assert costs.number("SUSTAINED") == costs.table()["SUSTAINED"].value


def test_a_refit_writes_the_values_and_their_provenance(tmp_path: Path) -> None:
    path = tmp_path / "costs.json"
    path.write_text(costs.TABLE.read_text())
    lines = writer.refit({"STEP_SECONDS": 0.7e-3, "CLIENT_BYTES": 800}, "python -m benchmarks.train_step",
                         when="2027-01-02", where="a test machine", path=path)
    assert lines == ["STEP_SECONDS: 0.0006 -> 0.0007 seconds", "CLIENT_BYTES: 768 -> 800 bytes"]
    table = writer.read(path)
    assert table["STEP_SECONDS"]["value"] == 0.7e-3 and isinstance(table["CLIENT_BYTES"]["value"], int)
    assert table["STEP_SECONDS"]["when"] == "2027-01-02" and table["STEP_SECONDS"]["machine"] == "a test machine"
    assert list(table) == list(writer.read()) and path.read_text() == writer.text(table)
