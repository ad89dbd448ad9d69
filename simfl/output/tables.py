"""Reading the CSV files simfl wrote back in (summary.csv, metrics.csv), checked like scenarios are.

Result folders are user input to ``simfl report`` and ``simfl run --resume``:
they may be edited, truncated or replaced by anything. :func:`read_table`
accepts only UTF-8 text with the expected columns, at least one row, and
values of the expected kind, and otherwise raises one
:class:`simfl.errors.InputError` naming the file, the line and the column.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import pandas as pd

from simfl.errors import InputError

Kind = Literal["text", "seed", "number", "finite"]
"""``text``: non-empty; ``seed``: a whole number >= 0; ``number``: a number or empty (NaN); ``finite``: a finite number."""

MAX_BYTES = 1 << 30
"""Largest CSV file read back (1 GiB)."""

_ALLOWED = {"text": "non-empty text", "seed": "a whole number >= 0", "number": "a number (or empty)",
            "finite": "a finite number"}


def read_table(path: Path, columns: Mapping[str, Kind], what: str = "rows") -> pd.DataFrame:
    """The CSV file at ``path`` as a DataFrame, after checking its bytes, columns and values."""
    where = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError(where, f"is {size} bytes; at most {MAX_BYTES} are read")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(where, "missing") from None
    except IsADirectoryError:
        raise InputError(where, "is a folder, not a CSV file") from None
    except OSError as exc:
        raise InputError(where, f"cannot read ({exc.strerror or exc})") from None
    if b"\x00" in raw:
        raise InputError(where, "holds binary data (NUL bytes), not CSV text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(where, f"line {line}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(where, f"is empty; expected a header with {', '.join(columns)} and {what}")
    try:
        table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        first = (str(exc).splitlines() or ["malformed"])[0]
        raise InputError(where, f"not a readable CSV table ({first})") from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(where, f"missing columns {missing}; it has {list(table.columns)[:12]}")
    if table.empty:
        raise InputError(where, f"has a header but no {what}")
    checked = {name: _column(where, name, kind, table[name]) for name, kind in columns.items()}
    parsed = pd.read_csv(io.StringIO(text))  # pandas' own number parsing, as the files were always read
    for name, kind in columns.items():
        if kind in ("text", "seed"):
            parsed[name] = checked[name]
    return parsed


def _column(where: str, name: str, kind: Kind, values: pd.Series) -> pd.Series:
    out: list[object] = []
    for i, text in enumerate(values.tolist()):
        cell = str(text).strip()
        value = _value(cell, kind)
        if value is None:
            shown = cell if len(cell) <= 40 else cell[:37] + "..."
            raise InputError(where, f"line {i + 2}: {name}={shown!r} must be {_ALLOWED[kind]}")
        out.append(value)
    return pd.Series(out, index=values.index, dtype=object if kind == "text" else "int64" if kind == "seed" else float)


def _value(cell: str, kind: Kind) -> object | None:
    """The parsed cell, or None when it is not of ``kind``."""
    if kind == "text":
        return cell or None
    if kind == "number" and cell == "":
        return float("nan")
    try:
        number = float(cell)
    except ValueError:
        return None
    if kind == "number":
        return number
    if not math.isfinite(number):
        return None
    if kind == "seed":
        if not number.is_integer() or number < 0 or number >= 2**63:
            return None
        return int(number)
    return number
