"""``python -m simfl.schema.measure_models FILE...``: measure the models of the given scenarios and add them to
the table of :mod:`simfl.models.measured` (run it when a shipped scenario gains a model or a sample shape)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from simfl.latency.base import counted
from simfl.models.measured import TABLE, activations_of, key, measure, stated
from simfl.schema import plugins
from simfl.schema.estimate import data_facts
from simfl.schema.scenario import load


def measured(paths: Sequence[str]) -> dict[str, list[Any]]:
    """Entries for the built-in models of the scenarios at ``paths``, measured now."""
    out: dict[str, list[Any]] = {}
    for path in paths:
        scenario = load(path)
        data = data_facts(scenario.data)
        if data is None or plugins.is_plugin("model", scenario.model.name):
            continue  # data of unknown shape, a plugin: nothing to list
        said = stated(scenario.model, data.shape, data.classes)
        if said is not None and said.params is None:
            continue  # sized only when the run starts (a model read from files)
        cost = measure(plugins.lookup("model", scenario.model.name).build, scenario.model, data.shape, data.classes)
        acts = activations_of(cost)
        out[key(scenario.model, data.shape, data.classes)] = [cost.params, cost.bytes, counted(cost.flops or 0),
                                                               cost.tensors, list(acts or (0, 0))]
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
