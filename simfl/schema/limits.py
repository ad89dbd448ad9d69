"""The limits simfl enforces on a scenario's estimate, and their checks: each refusal is one line giving the
estimate, the limit, the largest store and how to lower it.

:func:`check` refuses a scenario whose memory exceeds ``--max-memory`` (default: :func:`default_max_memory`,
80% of the machine's RAM), whose longest run exceeds ``--max-hours``, whose runs never reach their budget, or
whose counts exceed the fixed limits below; :func:`check_disk` one whose disk exceeds the free space where it is
written (:func:`disk_needs`, each store on the filesystem of its folder). ``simfl validate`` prints the estimate;
``simfl run`` and ``simfl sweep`` check it before they start (``run`` checks the disk before anything is written).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simfl import speeds
from simfl.errors import InputError
from simfl.schema.costs import machine_memory
from simfl.schema.estimate import Estimate, bytes_text, count_text, duration_text, runs_text

DEFAULT_MAX_HOURS = 168.0
"""Default of ``--max-hours``: the longest estimated wall time of one run that is started (a week)."""
MAX_EVALUATIONS = 1_000_000
"""Evaluations of the global model in one run."""
MAX_CHECKPOINTS = 100_000
"""Checkpoints written in one run."""
MAX_ARRIVALS = 100_000_000
"""Client updates processed in one run."""
MAX_CELLS = 10_000
"""Cells of a sweep grid (grid points, before seeds)."""
MAX_DRAWS = 50_000_000
"""Latencies drawn by ``simfl traces show`` (clients x rounds, per delay model)."""


def default_max_memory() -> int:
    """80% of the machine's RAM (4 GiB where it cannot be read)."""
    return int(0.8 * machine_memory())


_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``8G``, ``512M``, ``1.5GiB`` or a number of bytes."""
    m = _SIZE_RE.match(text)
    if m is None:
        raise InputError("--max-memory", f"expected a size such as 8G, 512M or 1.5GiB, got {text!r}")
    value = float(m.group(1)) * 1024 ** " kmgt".index((m.group(2) or " ").lower())
    if not 1 <= value < 2**62:
        raise InputError("--max-memory", f"must be between 1 byte and 4 EiB, got {text!r}")
    return int(value)


_MEMORY_HOW = {
    "record": "record a smaller layer (record.layer), lower the budget or drop record:",
    "events and metrics": "lower the budget or raise eval.every",
    "dataset": "use a smaller dataset",
    "model and client state": "use a smaller model or fewer clients (server.concurrency), or client_state.store: disk",
    "checkpoint": "checkpoint a smaller run",
    "runtime": "raise the limit",
    "executor workers": "use fewer executor.workers",
}


def check(est: Estimate, max_memory: int, where: str = "estimate", max_hours: float | None = None) -> None:
    """Refuse a scenario over a limit, in one line giving the estimate, the limit and how to lower it.

    ``max_hours`` bounds the estimated wall time of one run (default :data:`DEFAULT_MAX_HOURS`): a
    run that would never end in practice (``train.epochs: 1e12``) is refused as memory is, and so is one whose
    budget no update is expected to meet (:attr:`Estimate.endless`).
    """
    if est.endless is not None:
        raise InputError(where, est.endless)
    if est.evaluations is not None and est.evaluations > MAX_EVALUATIONS:
        raise InputError(where, f"would evaluate about {count_text(est.evaluations)} times per run (horizon "
                         f"{count_text(est.horizon)} s of virtual time); the limit is {MAX_EVALUATIONS:,}: raise eval.every "
                         "or lower the budget")
    if est.arrivals is not None and est.arrivals > MAX_ARRIVALS:
        raise InputError(where, f"would process about {count_text(est.arrivals)} client updates per run; the limit is "
                         f"{MAX_ARRIVALS:,}: lower the budget")
    if est.memory > max_memory:
        parts = {"runtime": est.runtime_bytes, "dataset": est.dataset_bytes,
                 "model and client state": 4 * est.model_bytes + est.client_state_bytes,
                 "events and metrics": est.rows_bytes, "record": est.record_ram,
                 "checkpoint": est.checkpoint_ram, "executor workers": est.executor_bytes}
        largest = max(parts, key=lambda k: parts[k])
        shown = ", ".join(f"{k} {bytes_text(v)}" for k, v in parts.items()
                          if v or k not in ("record", "checkpoint", "executor workers"))
        raise InputError(where, f"needs about {bytes_text(est.memory)} of memory per run ({shown}); the limit is "
                         f"{bytes_text(max_memory)} (--max-memory): {_MEMORY_HOW[largest]}")
    hours = DEFAULT_MAX_HOURS if max_hours is None else max_hours
    if est.wall_seconds is not None and est.wall_seconds > hours * 3600:
        raise InputError(where, f"one run would take about {duration_text(est.wall_seconds)} of wall time; the limit is "
                         f"{duration_text(hours * 3600)} (--max-hours): lower train.epochs or the budget, or raise the "
                         f"limit{cached_speeds(est)}")


def cached_speeds(est: Estimate) -> str:
    """Where a wall time rests on speeds cached on this machine (measured, or learned from finished runs), a clause
    naming the cache and how to measure again, for a refusal that a wrong cache would explain (else empty)."""
    measured = [part for part in est.timed if part in est.speeds.measured]
    rests = [f"the {' and '.join(measured)} speed{'s' if len(measured) > 1 else ''} measured here"] if measured else []
    if est.speeds.runs:
        rests.append("1 finished run's wall time" if est.speeds.runs == 1 else
                     f"{est.speeds.runs} finished runs' wall times")
    if not rests:
        return ""
    return (f"; this estimate rests on {' and '.join(rests)}, cached in {speeds.path()}: if that cache is wrong, "
            "delete it and the next `simfl run` measures this machine again")


@dataclass(frozen=True)
class DiskNeed:
    """One store on disk: what it is, its bytes, the folder it is written to, and how to make it smaller."""

    store: str
    bytes: int
    folder: Path
    detail: str
    how: str


def disk_needs(est: Estimate, out: Path, workers: int = 1) -> list[DiskNeed]:
    """The stores a run (or each run of a sweep's cells) writes, with where: the results (events and metrics,
    recordings) and checkpoints in ``out``; the disk store's scratch file in its own folder."""
    cells = max(1, est.cells)
    rows = est.results_bytes - est.record_disk_bytes
    needs = [DiskNeed("events and metrics", rows * cells, out,
                      f"{count_text(est.events)} events and {count_text(est.evaluations)} evaluations per run x "
                      f"{runs_text(est.runs)}",
                      "lower the budget or raise eval.every, or give an --out on a larger disk")]
    if est.record_disk_bytes:
        needs.append(DiskNeed("records", est.record_disk_bytes * cells, out,
                              f"layer '{est.record_layer}' of {est.record_values or 0:,} values x "
                              f"{count_text(est.aggregations)} aggregations x {runs_text(est.runs)}",
                              "record a smaller layer (record.layer), lower the budget or drop record:, or give an "
                              "--out on a larger disk"))
    kept = est.kept_checkpoints(workers)
    if kept:
        needs.append(DiskNeed("checkpoints", kept * est.checkpoint_bytes, out,
                              f"{bytes_text(est.checkpoint_bytes)} each, {kept} kept at once",
                              "run fewer side by side (--workers) or give an --out on a larger disk"))
    if est.disk_bytes:
        under_way = min(est.runs * cells, max(1, workers))
        needs.append(DiskNeed("client state", under_way * est.disk_bytes,
                              Path(est.store_dir) if est.store_dir else Path(tempfile.gettempdir()),
                              f"{est.reached:,} clients reached x {under_way} runs under way",
                              "set client_state.dir to a larger disk, or lower server.concurrency or the budget"))
    return needs


def existing(path: Path) -> Path:
    """The nearest existing folder at or above ``path`` (where a folder about to be made will be)."""
    path = Path(os.path.abspath(path))
    while path != path.parent:
        try:
            if path.is_dir():
                break
        except OSError:  # a name too long, a folder that cannot be read: look further up
            pass
        path = path.parent
    return path


def free_space(path: Path) -> tuple[int, int]:
    """(device, free bytes) of the filesystem that ``path`` (or its nearest existing parent) is on."""
    where = existing(path)
    return os.stat(where).st_dev, shutil.disk_usage(where).free


def _by_device(needs: list[DiskNeed]) -> dict[int, tuple[int, list[DiskNeed]]]:
    groups: dict[int, tuple[int, list[DiskNeed]]] = {}
    for need in needs:
        device, free = free_space(need.folder)
        groups.setdefault(device, (free, []))[1].append(need)
    return groups


def free_lines(est: Estimate, out: Path, workers: int = 1) -> list[str]:
    """``# ``-comment lines: the disk each filesystem gets and its free space (``simfl validate``)."""
    return needs_lines(disk_needs(est, out, workers))


def needs_lines(stores: list[DiskNeed], label: str = "free disk") -> list[str]:
    """``# ``-comment lines headed ``label``: the disk each filesystem gets of ``stores`` and its free space."""
    head = f"#   {label + ':':<15}"
    lines = []
    for free, needs in _by_device(stores).values():
        total = sum(n.bytes for n in needs)
        folders = ", ".join(dict.fromkeys(str(existing(n.folder)) for n in needs))
        lines.append(f"{head}{bytes_text(free)} in {folders}, {bytes_text(total)} needed "
                     f"({', '.join(n.store for n in needs)})")
    return lines


def check_disk(est: Estimate, out: Path, where: str = "estimate", workers: int = 1) -> None:
    """Refuse a scenario whose stores on a filesystem exceed its free space, in one line naming the largest
    store there, how much it needs, what is free and how to lower it."""
    check_needs(disk_needs(est, out, workers), where)


def check_needs(stores: list[DiskNeed], where: str) -> None:
    """Refuse ``stores`` where they exceed a filesystem's free space (:func:`check_disk`'s one line)."""
    for free, needs in _by_device(stores).values():
        total = sum(n.bytes for n in needs)
        if total > free:
            big = max(needs, key=lambda n: n.bytes)
            others = "".join(f", {n.store} {bytes_text(n.bytes)}" for n in needs if n is not big and n.bytes)
            raise InputError(where, f"would write about {bytes_text(total)} to {existing(big.folder)}: {big.store} "
                             f"{bytes_text(big.bytes)} ({big.detail}){others}; {bytes_text(free)} is free there: {big.how}")


def check_checkpoints(est: Estimate, updates: int | None, seconds: float | None) -> None:
    """Refuse a ``--checkpoint-every`` that would write more than :data:`MAX_CHECKPOINTS` checkpoints."""
    if est.arrivals is None or est.horizon is None:
        return
    count = est.arrivals / updates if updates is not None else est.horizon / (seconds or math.inf)
    if count > MAX_CHECKPOINTS:
        raise InputError("--checkpoint-every", f"would write about {count_text(count)} checkpoints per run; the limit is "
                         f"{MAX_CHECKPOINTS:,}: checkpoint less often")


def check_cells(sweep: dict[str, list[Any]] | None, where: str) -> int:
    """The number of grid points of a ``sweep:`` block, refused above :data:`MAX_CELLS` before any is built."""
    if not sweep:
        return 1
    count = math.prod(len(v) if isinstance(v, list) else 1 for v in sweep.values())
    if count > MAX_CELLS:
        raise InputError(where, f"sweep: the grid has {count:,} cells; the limit is {MAX_CELLS:,}")
    return count


def check_draws(clients: int, rounds: int, max_memory: int) -> None:
    """Refuse a ``simfl traces show`` that would draw more latencies than fit the limits."""
    draws = clients * rounds
    need = draws * 4 * 40  # four models, a Python float in a list then an array
    if draws > MAX_DRAWS or need > max_memory:
        raise InputError("--clients x --rounds", f"{clients:,} x {rounds:,} = {draws:,} latencies per model need about "
                         f"{bytes_text(need)}; the limits are {MAX_DRAWS:,} draws and {bytes_text(max_memory)} (--max-memory)")
