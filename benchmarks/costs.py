"""The estimate's measured constants, written: the one writer of ``simfl/schema/costs.json``.

A refit is a data commit. ``python -m benchmarks.costs NAME=VALUE ... --by "COMMAND"`` sets each named constant's
value and where it came from (``--when``: today by default; ``--machine``: this one's CPU, cores and system by
default; ``--notes``: the figures it was read from) and rewrites the file in its one layout, so that a diff shows
the values and their provenance changed and nothing else. A benchmark that measures a constant directly writes it
through :func:`refit` (``python -m benchmarks.train_step --write``, ``python -m benchmarks.trainer_phases
--write``). ``--show`` prints the table. The estimate reads the file (:mod:`simfl.schema.costs`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simfl.schema.costs import FIELDS, TABLE

PROVENANCE = ("measured_by", "when", "machine")
"""The fields a refit sets beside the value."""


def text(table: Mapping[str, Mapping[str, Any]]) -> str:
    """The file's one layout: one entry per constant in the table's order, its fields in :data:`FIELDS`' order."""
    entries = {name: {f: entry[f] for f in FIELDS if f in entry} for name, entry in table.items()}
    return json.dumps(entries, indent=2, ensure_ascii=False) + "\n"


def read(path: Path = TABLE) -> dict[str, dict[str, Any]]:
    """The table as written."""
    loaded: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return loaded


def machine() -> str:
    """This machine in a few words: its CPU, cores and system."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def significant(value: float, digits: int = 2) -> float:
    """``value`` rounded to ``digits`` significant digits (a fitted constant is no more precise than that)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def refit(values: Mapping[str, float], by: str, notes: str | None = None, when: str | None = None,
          where: str | None = None, path: Path = TABLE) -> list[str]:
    """Set each named constant to its value, measured by ``by`` (a command) ``when`` (default today) on ``where``
    (default :func:`machine`), with ``notes`` (default: the entry's are dropped, as they described the old value),
    and rewrite the file. A name the table does not hold is refused: a new constant is added by hand, with the
    formula that reads it. Returns one line per change."""
    table = read(path)
    unknown = sorted(set(values) - set(table))
    if unknown:
        raise SystemExit(f"{path}: no constant {', '.join(unknown)}; the table holds {', '.join(table)}")
    lines = []
    for name, value in values.items():
        entry = table[name]
        if isinstance(entry["value"], int) and not float(value).is_integer():
            raise SystemExit(f"{name}: a whole number of {entry['unit']}, got {value}")
        new = int(value) if isinstance(entry["value"], int) else float(value)
        lines.append(f"{name}: {entry['value']} -> {new} {entry['unit']}")
        entry.update(value=new, measured_by=by, when=when or datetime.date.today().isoformat(),
                     machine=where or machine(), notes=notes or "")
    path.write_text(text(table))
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("values", nargs="*", metavar="NAME=VALUE", help="the constants to set")
    parser.add_argument("--by", help="what measured them: the benchmark and its command")
    parser.add_argument("--notes", default=None, help="the figures they were read from")
    parser.add_argument("--when", default=None, help="when they were measured (default today, YYYY-MM-DD)")
    parser.add_argument("--machine", default=None, help="where they were measured (default this machine)")
    parser.add_argument("--show", action="store_true", help="print the table")
    args = parser.parse_args(argv)
    if args.show or not args.values:
        for name, entry in read().items():
            print(f"{name}={entry['value']} {entry['unit']}  ({entry['measured_by']}; {entry['when']}; "
                  f"{entry['machine']})")
        return
    if not args.by:
        parser.error("--by: say what measured the values (the benchmark and its command)")
    values = {}
    for item in args.values:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"expected NAME=VALUE, got {item!r}")
        values[name] = float(value)
    for line in refit(values, args.by, args.notes, args.when, args.machine):
        print(line)


if __name__ == "__main__":
    main()
