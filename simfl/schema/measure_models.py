"""``python -m simfl.schema.measure_models FILE...``: measure the models of the given scenarios and add them to
:mod:`simfl.schema.model_costs`' table (run it when a shipped scenario gains a model or a sample shape)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from simfl.latency.base import counted
from simfl.schema import estimate
from simfl.schema.model_costs import TABLE, key
from simfl.schema.scenario import load


def measured(paths: Sequence[str]) -> dict[str, list[Any]]:
    """Entries for the models of the scenarios at ``paths``, measured now."""
    out: dict[str, list[Any]] = {}
    for path in paths:
        scenario = load(path)
        data = estimate.data_shape(scenario.data)
        params, size, flops, tensors = estimate.measure_model(scenario, data)
        if params is None or tensors is None:
            continue  # read from files, or data of unknown shape: nothing to list
        out[key(scenario.model, data.shape, data.classes)] = [params, size, counted(flops), tensors]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Add the models of the scenario files given and rewrite the table (sorted, one entry per line)."""
    paths = list(sys.argv[1:] if argv is None else argv)
    table = {**json.loads(TABLE.read_text()), **measured(paths)} if TABLE.exists() else measured(paths)
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(table.items())]
    TABLE.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"{TABLE}: {len(table)} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
