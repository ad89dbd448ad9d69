"""What a scenario will cost, before anything is allocated: the sum of what its components state of themselves.

Each component states its own facts and costs where its code lives, and this module names none of them:

- the dataset its sample shape, classes and sizes (``data.facts()``, :class:`simfl.data.configs.DataFacts`);
- the model what it takes, its parameters, bytes, FLOPs and exchanged tensors (:mod:`simfl.models.measured`:
  stated by its config, read from the table of measured built-ins, or measured by building it);
- the latency model each client's mean and spread of round time and its shortest round
  (:meth:`simfl.latency.base.LatencyModel.round_times`, under each seed, since devices and speeds are drawn);
- each algorithm entry its round size and bound on rounds, its per-client vectors and whether it replaces local
  training (:class:`simfl.algorithms.configs.AlgorithmConfig`);
- the executor whether it trains, its parallel jobs and threads (:class:`simfl.train.configs.ExecutorConfig`).

From these, :mod:`simfl.schema.bounds` gives what bounds each run (its horizon, updates, rounds, late updates and
empty rounds, events), :mod:`simfl.schema.costs` what each part costs, and :func:`estimate` adds them up: memory
of one run's process (the runtime, the dataset and a record per client, the model's copies, the client state,
events and metrics, the ``record:`` copies, a checkpoint being written), disk (results, checkpoints, the disk
store's scratch file) and time. Where a component states nothing, the estimate says so (:attr:`Estimate.unstated`)
and counts nothing for it rather than guessing. :mod:`simfl.schema.limits` refuses what exceeds a limit;
``simfl validate`` prints :meth:`Estimate.lines`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from simfl.algorithms.configs import run_name
from simfl.data.configs import DataFacts
from simfl.errors import InputError
from simfl.latency import stragglers
from simfl.latency.base import RoundTimes, Workload, counted
from simfl.models import measured
from simfl.models.measured import ModelCost
from simfl.schema import bounds, costs
from simfl.schema.bounds import EntryBudget, Extent, StatedWorld
from simfl.schema.costs import EVAL_BATCH, NPY_HEADER_BYTES, Speeds, count, whole
from simfl.sim import link

MAX_CLIENTS = 1_000_000
"""Clients of one scenario."""
STATED_SEEDS = 3
"""Seeds whose round times are stated and averaged (devices and speeds are drawn per seed); the others run alike."""
DEFAULT_CLIENTS = 30
"""Clients assumed where the scenario leaves their number to the data (by subject, an index file) and no
per-client latency list gives it: a typical federation."""


@dataclass(frozen=True)
class Run:
    """One entry's run, estimated: what bounds it and its wall time (None: not known ahead)."""

    name: str
    extent: Extent | None
    wall_seconds: float | None
    events: float
    evaluations: float | None
    setup_seconds: float = 0.0
    """The part of :attr:`wall_seconds` before the run's own clock starts: its population set up and its delay
    model's stated setup (a finished run's measured wall, :attr:`simfl.launch.experiment.RunResult.wall_seconds`,
    is timed from there)."""


@dataclass
class Estimate:
    """What a scenario needs: memory of one run's process, disk of its result folder and scratch files, time.

    Each ``*_bytes`` field is one store, a count times bytes per item (:mod:`simfl.schema.costs`). Counts come from
    what bounds each run (:mod:`simfl.schema.bounds`): the expected updates in the budget (``arrivals``), the
    aggregations they make, the evaluations on the time grid and at the run's end, the events (updates, failed,
    late and lost rounds). Per-run figures are those of the most demanding entry; times are per entry (:attr:`entries`).
    """

    data: DataFacts
    clients: int
    model_params: int | None
    dataset_bytes: int
    """Training and test data and a record per client (:func:`simfl.schema.costs.dataset_bytes`)."""
    model_bytes: int
    """One model: 4 bytes per parameter and floating-point buffer; a run holds four (global, evaluated, in
    training, its gradients)."""
    client_state_bytes: int
    """In RAM: the weights the clients in flight hold (:func:`held_models`: the global versions they started from,
    shared, and the trained weights of an executor that trains ahead) and, when the store is in RAM, the
    per-client vectors (``store_rows`` models per client reached)."""
    rows_bytes: int
    """Events and metrics of one run in RAM (:func:`simfl.schema.costs.rows_bytes`)."""
    mean_latency: float | None
    """Mean round time over the clients, as the latency model states it (None: it states nothing)."""
    horizon: float | None
    arrivals: float | None
    evaluations: float | None
    runs: int
    cells: int
    wall_seconds: float | None
    """Wall seconds of the longest run (None: not known ahead); :attr:`wall_total` adds up every run."""
    disk_bytes: int = 0
    """The per-client vectors when stored on disk: ``store_rows`` models per client reached, per run under way,
    in the store's folder (:mod:`simfl.algorithms.store`)."""
    reached: int = 0
    """Clients a run can reach: all of them, or under ``server:`` at most ``concurrency`` plus one per arrival."""
    in_flight: int = 0
    """Clients training at once: all of them, or ``server.concurrency``."""
    events: float = 0.0
    """Rows of one run's events.csv: one per update, and one per failed, lost or late round and per return."""
    aggregations: float = 0.0
    """Aggregations of one run of the most demanding entry (what ``record:`` keeps a copy of each)."""
    record_layer: str | None = None
    """The tensor ``record:`` keeps after each aggregation, and its number of values (None: not known ahead)."""
    record_values: int | None = None
    recording_bytes: int = 0
    """One run's recording (the most demanding entry): 4 bytes per value of the layer per aggregation, plus the
    ``.npy`` header; in RAM ``RECORD_COPIES`` (:mod:`simfl.schema.costs`) times while the run ends
    (:attr:`record_ram`), on disk once."""
    results_bytes: int = 0
    """Disk of the result folder (per sweep cell): per run its events.csv, metrics.csv, recording and small files
    (``RUN_FILES_BYTES``), plus the largest events.csv again (a file is replaced through a
    temporary copy) and the folder's own files (``FOLDER_BYTES``)."""
    record_disk_bytes: int = 0
    """The recordings' share of ``results_bytes`` (every run's)."""
    checkpoint_bytes: int = 0
    """One run's checkpoint file at the end of its budget (:func:`simfl.schema.costs.checkpoint_bytes`): each
    model-sized tensor (global, last evaluated, kept, those held for the clients in flight, ``store_rows`` per
    client reached),
    the events, evaluations and clients. An upper bound where rows share a tensor (OrthoFL's anchors of one global
    version are saved once): 239 KB estimated for 122 KB measured on the quickstart, 12.6 MB for 4.2 MB with 400
    clients at concurrency 20."""
    checkpoints: bool = False
    """Whether the run writes checkpoints (``--checkpoint-every``)."""
    store_dir: str | None = None
    """Folder of the disk store's scratch file (None: the system's temporary folder)."""
    runtime_bytes: int = field(default_factory=lambda: whole("RUNTIME_BYTES"))
    """The process before the scenario's stores (:func:`~simfl.schema.costs.runtime_bytes`)."""
    executor_bytes: int = 0
    """The executor's worker processes (:func:`simfl.schema.costs.executor_bytes`)."""
    activation_bytes: int = 0
    """The model's activations at their peak: a training batch per job at once and an evaluation batch
    (:func:`simfl.schema.costs.activation_bytes`)."""
    activation_batches: tuple[int, int] = (0, 0)
    """The samples whose activations are counted: training (a batch per job at once), evaluation (one batch)."""
    workers: int = 0
    """The executor's worker processes, as it states them."""
    entries: list[Run] = field(default_factory=list)
    """Each algorithm entry's run (the same for every seed: the stated seeds' average)."""
    seeds: int = 1
    unstated: list[str] = field(default_factory=list)
    """What a component does not state, so that the estimate does not count it (one phrase each)."""
    late: float = 0.0
    """Updates discarded late in one run of the most demanding entry (synchronous rounds past their close)."""
    empty: float = 0.0
    """Rounds closed with no update in that run."""
    endless: str | None = None
    """Why some run never reaches its budget, and what to change (None: every run does)."""
    speeds: Speeds = field(default_factory=lambda: Speeds.reference(0.0))
    """The speeds the wall time is counted at: measured on this machine, or the reference machine's."""
    timed: tuple[str, ...] = ()
    """The parts whose speed the wall time depends on (``training``, ``engine``)."""
    tracker_start: float = 0.0
    """What the live trackers add once to a launch (:func:`simfl.schema.costs.tracking_start_seconds`)."""

    @property
    def launch_seconds(self) -> float:
        """What a launch adds once beyond its runs, at :attr:`speeds`, and the trackers' start."""
        return costs.launch_seconds(self.speeds, "training" in self.timed) + self.tracker_start

    def speeds_text(self) -> str:
        """Which speeds the wall time is counted at, in a short clause."""
        measured = [p for p in self.timed if p in self.speeds.measured]
        missing = [p for p in self.timed if p not in self.speeds.measured]
        if self.speeds.runs:
            runs = "run" if self.speeds.runs == 1 else "runs"
            learned = f", x{self.speeds.learned:.2f} as {self.speeds.runs} finished {runs} here compared"
        else:
            learned = ""
        if not missing:
            return f"speeds: {', '.join(measured)} measured on this machine{learned}"
        if not measured:
            return f"speeds: reference machine{learned}; `simfl run` measures this one"
        return (f"speeds: {', '.join(measured)} measured on this machine, {', '.join(missing)} the reference "
                f"machine's{learned}; `simfl run` measures this one")

    @property
    def wall_total(self) -> float | None:
        """Wall seconds of every run of one sweep cell, one after another (None: not known ahead)."""
        walls = [r.wall_seconds for r in self.entries]
        if not walls or any(w is None for w in walls):
            return None
        return self.seeds * sum(w for w in walls if w is not None)

    @property
    def checkpoint_ram(self) -> int:
        """Memory a checkpoint takes while it is made: the events as tuples, the saved bytes and their copy."""
        return int(self.events * whole("CHECKPOINT_TUPLE_BYTES")) + 2 * self.checkpoint_bytes if self.checkpoints else 0

    @property
    def record_ram(self) -> int:
        """Memory of the recordings at a run's end: ``RECORD_COPIES``, one more after an earlier run."""
        return (whole("RECORD_COPIES") + (self.runs > 1)) * self.recording_bytes

    @property
    def memory(self) -> int:
        """Bytes one run's processes hold at their peak: runtime, dataset and client records, four model copies,
        the model's activations, client state, events and metrics, the recording's copies and a checkpoint being
        made, and the executor's worker processes."""
        return (self.runtime_bytes + self.dataset_bytes + 4 * self.model_bytes + self.activation_bytes
                + self.client_state_bytes + self.rows_bytes + self.record_ram + self.checkpoint_ram
                + self.executor_bytes)

    def kept_checkpoints(self, workers: int = 1) -> int:
        """Checkpoint files on disk at once: one per run under way, and one more while one is replaced."""
        return min(self.runs, max(1, workers)) + 1 if self.checkpoints else 0

    def lines(self, workers: int = 1, free: list[str] | None = None) -> list[str]:
        """The estimate as ``# ``-comment lines (``simfl validate`` output); ``workers``: runs side by side;
        ``free``: lines on the free space where the disk stores go (:func:`simfl.schema.limits.free_lines`)."""
        params = "unknown (not built ahead)" if self.model_params is None else f"{self.model_params:,} parameters"
        data = (f"{bytes_text(self.dataset_bytes)} ({self.data.train:,} train + {self.data.test:,} test samples of "
                f"{'x'.join(map(str, self.data.shape))}, and {self.clients:,} clients' records)" if self.data.shape
                else "unknown until loaded (the dataset states no shape)")
        store = (f", {bytes_text(self.disk_bytes)} on disk per run under way in "
                 f"{self.store_dir or 'the temporary folder'} (mapped: its pages count as resident while in the "
                 f"page cache, which the system reclaims)" if self.disk_bytes else "")
        out = [
            "# estimate (a rough guide, not a promise):",
            f"#   dataset:       {data}",
            f"#   model:         {params}, {bytes_text(self.model_bytes)}",
            f"#   client state:  {bytes_text(self.client_state_bytes)} in RAM{store} ({self.clients:,} clients, "
            f"{self.in_flight:,} in flight, {self.reached:,} reached)",
            f"#   events:        {bytes_text(self.rows_bytes)} in RAM ({count_text(self.events)} events and "
            f"{count_text(self.evaluations)} metrics rows)",
        ]
        if self.activation_bytes:
            trained, evaluated = self.activation_batches
            out.insert(3, f"#   activations:   {bytes_text(self.activation_bytes)} at their peak ({trained:,} samples "
                          f"in training at once, {evaluated:,} in an evaluation batch)")
        if self.record_layer is not None:
            values = "unknown size" if self.record_values is None else f"{self.record_values:,} values"
            out.append(f"#   record:        {bytes_text(self.record_ram)} in RAM at the end of a run "
                       f"(layer '{self.record_layer}', {values} x {count_text(self.aggregations)} aggregations; "
                       f"{bytes_text(self.recording_bytes)} written)")
        if self.checkpoints:
            out.append(f"#   checkpoint:    {bytes_text(self.checkpoint_ram)} in RAM while one is made")
        if self.executor_bytes:
            out.append(f"#   executor:      {bytes_text(self.executor_bytes)} in {self.workers} worker processes")
        out += [
            f"#   runtime:       {bytes_text(self.runtime_bytes)} (Python, PyTorch and simfl loaded)",
            f"#   memory:        {bytes_text(self.memory)} in all per run (--max-memory)",
        ]
        cells = f" x {self.cells} grid points" if self.cells > 1 else ""
        records = f"; records {bytes_text(self.record_disk_bytes * self.cells)}" if self.record_disk_bytes else ""
        disk = (f"#   disk:          {bytes_text(self.results_bytes * self.cells)} of results ({runs_text(self.runs)}"
                f"{cells}{records})")
        if self.checkpoints:
            disk += f", checkpoints {bytes_text(self.checkpoint_bytes)} each, {self.kept_checkpoints(workers)} kept"
        out.append(disk)
        out += free or []
        if self.mean_latency is not None and self.horizon is not None:
            out.append(f"#   mean latency:  {count_text(self.mean_latency)} s per round; virtual horizon "
                       f"{count_text(self.horizon)} s")
        if self.arrivals is not None:
            out.append(f"#   arrivals:      {count_text(self.arrivals)} client updates; {count_text(self.evaluations)} "
                       "evaluations")
        if self.late or self.empty:
            out.append(f"#   rounds:        {count_text(self.late)} late updates discarded, {count_text(self.empty)} "
                       "rounds closed empty (rounds.deadline)")
        if len(self.entries) > 1 and any(r.extent is not None for r in self.entries):
            out.append("#   per entry:     " + "; ".join(
                f"{r.name} {count_text(r.extent.arrivals)} updates" + (
                    f", {duration_text(r.wall_seconds)}" if r.wall_seconds is not None else "")
                for r in self.entries if r.extent is not None))
        out.append(f"#   runs:          {self.runs} (algorithms x seeds)" + (f", {self.cells} grid points of the sweep"
                                                                            if self.cells > 1 else ""))
        total = self.wall_total
        if total is not None:
            per_run = self.wall_seconds or 0.0
            out.append(f"#   wall time:     about {duration_text(total * self.cells + self.launch_seconds)} in all "
                       f"with 1 worker ({self.speeds_text()})")
            if workers > 1:
                spreaded = max(total * self.cells / workers, per_run) + self.launch_seconds
                out.append(f"#                  about {duration_text(spreaded)} with {workers} workers (the default here; "
                           "--workers, --ray)")
        out += [f"#   not stated:    {what}" for what in self.unstated]
        return out


def spread(seconds: float, runs: int, workers: int) -> float:
    """Wall time of ``runs`` runs of ``seconds`` each over ``workers`` side by side (the longest worker's share)."""
    return seconds * math.ceil(runs / max(1, workers))


def bytes_text(n: float) -> str:
    """``n`` bytes as a message shows them (``1.5 GiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def runs_text(n: int) -> str:
    """``1 run``, ``3 runs``."""
    return f"{n} run" if n == 1 else f"{n} runs"


def count_text(x: float | None) -> str:
    """A count as a message shows it (``?``: not known)."""
    if x is None:
        return "?"
    return f"{x:,.0f}" if abs(x) < 1e12 else f"{x:.3g}"


def duration_text(seconds: float) -> str:
    """Seconds as a message shows them (``forever`` when infinite)."""
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# -- what the components state ------------------------------------------------------------------------------------


def client_count(scenario: Any) -> int:
    """The number of clients as far as the scenario states it before the data is split.

    The partition's ``clients`` (or its count rows); where the partition leaves it to the data (by
    subject, an index file), the length of a per-client latency list; else :data:`DEFAULT_CLIENTS`.
    """
    part = scenario.data.partition
    n = getattr(part, "clients", None)
    if n is None and getattr(part, "counts", None):
        n = len(part.counts)
    for key in ("seconds", "devices"):  # a per-client list of a latency config
        values = getattr(scenario.latency, key, None)
        if n is None and isinstance(values, list) and values:
            n = len(values)
    return int(n or DEFAULT_CLIENTS)


def data_facts(data: Any) -> DataFacts | None:
    """What the scenario's dataset states of itself (None: nothing until loaded)."""
    facts = getattr(data, "facts", None)
    return facts() if callable(facts) else None


def model_cost(scenario: Any, data: DataFacts | None) -> ModelCost:
    """The :class:`ModelCost` of the scenario's model on its data: as its config states it, else measured by
    building it (which also checks that model and data fit, naming both keys when they do not)."""
    from simfl.schema import plugins

    config = scenario.model
    name = config.name
    if data is None:
        return ModelCost.not_ahead("the dataset states no shape")

    def misfit(detail: str = "") -> InputError:
        return InputError("model.name", f"{name} needs {measured.needs(config)}; data.dataset "
                          f"{scenario.data.dataset} gives {data.described}{detail}")

    if measured.takes(config) != data.kind:
        raise misfit()
    stated = measured.stated(config, data.shape, data.classes)
    if stated is not None:
        return stated
    build = plugins.lookup("model", name).build
    try:
        return measured.measure(build, config, data.shape, data.classes)
    except measured.Misfit as exc:
        raise misfit(exc.detail) from exc


class _Unknown(Exception):
    """A latency model asked for the model's FLOPs, which are known only once the run starts."""


def round_times(scenario: Any, clients: int, seed: int, workload: Workload) -> RoundTimes | str:
    """What the scenario's latency model states of its clients' round times under ``seed``, or why it states
    nothing."""
    from simfl.schema import plugins

    name = scenario.latency.model
    cls = plugins.lookup("latency", name)
    cls.check(scenario.latency, clients)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stated = cls.round_times(scenario.latency, clients, seed, workload)
            if stated is None:  # counted from the model's own draws
                stated = cls.drawn_round_times(scenario.latency, clients, seed, workload)
    except _Unknown:
        return "it scales with the model's FLOPs, known once the run starts"
    except InputError:  # the model's own refusal, as the run gives it
        raise
    except (OverflowError, ZeroDivisionError, ValueError, FloatingPointError) as exc:
        raise InputError(f"latency.model {name}", "its parameters overflow or state no usable round times "
                         f"({type(exc).__name__}: {exc}); use values of a sane size") from None
    if not isinstance(stated, RoundTimes):
        raise InputError(f"latency.model {name}", f"round_times returned a {type(stated).__name__}, not "
                         "simfl.latency.base.RoundTimes (or None)")
    return stragglers.round_times(stated, scenario.stragglers, clients, seed)


def _flops(cost: ModelCost) -> int | Callable[[], int]:
    """The model's FLOPs as a latency model's workload reads them: counted when asked; 0 where no run can know them
    (a Flower app's arrays: a delay that scales with them fails as the run would); where they are known only once
    the run starts, a latency model that asks states nothing."""
    if cost.flops is not None:
        return cost.flops

    def unknown() -> int:
        raise _Unknown

    return unknown


# -- the sum ------------------------------------------------------------------------------------------------------


def phased(scenario: Any, times: RoundTimes, clients: int, seed: int, k: int | None, size: int) -> RoundTimes:
    """``times`` with each round's transfers added where its rounds run in phases (``network:``), for an entry of
    round size ``k`` (None: asynchronous, its rounds in flight the server's concurrency or every client)."""
    network = getattr(scenario, "network", None)
    if network is None:
        return times
    server = getattr(scenario, "server", None)
    at_once = k if k is not None else clients if server is None else min(int(server.concurrency), clients)
    return link.round_times(times, network, float(size), clients, seed, max(at_once, 1), together=k is not None)


def world_of(scenario: Any, times: RoundTimes, clients: int) -> StatedWorld:
    """The world of :mod:`simfl.schema.bounds` the scenario's sections describe, with the latency statement."""
    availability = getattr(scenario, "availability", None)
    server = getattr(scenario, "server", None)
    rounds = getattr(scenario, "rounds", None)
    return StatedWorld(
        times, clients,
        concurrency=None if server is None else int(server.concurrency),
        p=0.0 if availability is None else float(availability.p),
        rejoin_delay=0.0 if availability is None else float(availability.rejoin_delay),
        departures=() if availability is None else tuple((d.leave, d.rejoin) for d in availability.departures),
        server_time=float(scenario.server_time),
        deadline=None if rounds is None else rounds.deadline,
        over_select=0.0 if rounds is None else float(rounds.over_select),
        model=str(scenario.latency.model),
    )


def _mean(extents: list[Extent]) -> Extent:
    """The average of one entry's extents over the stated seeds (endless if any is)."""
    endless = next((e for e in extents if e.endless is not None), None)
    if endless is not None:
        return endless
    n = len(extents)
    values = {f: sum(getattr(e, f) for e in extents) / n for f in ("horizon", "arrivals", "aggregations", "rounds",
                                                                   "failed", "late", "empty", "absences", "in_flight")}
    return Extent(**values)


def held_models(in_flight: int, aggregations: float | None, ahead: bool) -> int:
    """Model-sized tensors held for the clients in flight: the global versions they started from (each dispatch
    hands out the current global tensor itself, so at most one per aggregation and the initial one; all
    ``in_flight`` where the aggregations are not known), and where the executor trains ahead (``ahead``) each
    one's trained weights until its arrival."""
    versions = in_flight if aggregations is None else min(in_flight, count(aggregations) + 1)
    return versions + (in_flight if ahead else 0)


def estimate(scenario: Any, cells: int = 1, checkpoints: bool = False, learned: bool = True) -> Estimate:
    """The estimate of ``scenario`` (a validated :class:`simfl.schema.scenario.Scenario`); ``checkpoints``:
    the runs write checkpoints (``--checkpoint-every``); ``learned``: wall times scaled by how this machine's
    finished runs compared with their estimates (:attr:`simfl.schema.costs.Speeds.learned`)."""
    clients = client_count(scenario)
    if clients > MAX_CLIENTS:
        raise InputError("data.partition.clients", f"{clients:,} clients; the limit is {MAX_CLIENTS:,}")
    unstated: list[str] = []
    facts = data_facts(scenario.data)
    if facts is None:
        unstated.append(f"data.dataset {scenario.data.dataset} states no shape or sizes: its memory and the "
                        "model's are counted once loaded")
    elif facts.train and clients > facts.train:
        raise InputError("data.partition.clients", f"must be at most the {facts.train:,} training samples of "
                         f"data.dataset {scenario.data.dataset}, got {clients:,}")
    data = facts if facts is not None else DataFacts((), 0, 0, 0)
    model = model_cost(scenario, facts)
    if model.unknown is not None and facts is not None:
        unstated.append(f"model {scenario.model.name}: sized only when the run starts ({model.unknown})")
    record = getattr(scenario, "record", None)
    layer = None if record is None else record.layer
    if layer is not None and model.tensors is not None and layer not in model.tensors:  # as the run's LayerRecorder
        raise InputError("record.layer", f"unknown layer '{layer}'; the model has: {', '.join(model.tensors)}")
    dataset_bytes = costs.dataset_bytes(data, clients)
    samples = data.train // max(clients, 1)
    workload = Workload(model_bytes=max(model.bytes, 1), flops=_flops(model), samples=(max(samples, 1),) * clients,
                        epochs=scenario.train.epochs)
    seeds = list(scenario.seeds)[:STATED_SEEDS]
    stated = [round_times(scenario, clients, seed, workload) for seed in seeds]
    times = [t for t in stated if isinstance(t, RoundTimes)]
    why = next((t for t in stated if isinstance(t, str)), None)
    if why is not None:
        times = []
        unstated.append(f"latency.model {scenario.latency.model}: {why}; the updates within "
                        "budget.time, the horizon of budget.updates and the wall time are not counted")
    budget = scenario.budget
    entries = []
    for algo in scenario.algorithms:
        k = algo.round_clients(clients)
        bound = EntryBudget(budget.time, budget.updates, algo.max_rounds)
        worlds = [world_of(scenario, phased(scenario, t, clients, seed, k, max(model.bytes, 1)), clients)
                  for t, seed in zip(times, seeds, strict=False)]
        extent = _mean([bounds.extent(w, k, bound) for w in worlds]) if worlds else None
        entries.append((run_name(algo), algo, extent))
    server = getattr(scenario, "server", None)
    null = not scenario.executor.trains
    rows = costs.store_rows(scenario)
    store = costs.store_spec(scenario, clients * model.bytes * rows)  # the run decides on the whole population
    on_disk = store.kind == "disk"
    every = scenario.eval.every
    runs: list[Run] = []
    per_run: list[tuple[float, float, float, float, int]] = []  # arrivals, aggregations, events, evaluations, csv
    def flops() -> float:  # counted only where no training speed was measured (costs.speeds_of)
        return 0 if null or model.params is None or model.flops is None else counted(model.flops)

    threads = scenario.executor.cpu_threads()
    client = getattr(scenario, "client", None)
    trains = not null and model.params is not None and threads is not None
    speed = costs.speeds_of(scenario.model, data.shape, data.classes, scenario.train.batch_size, flops, trains,
                            learned)
    stated_setup = sum(t.setup for t in times) / max(len(times), 1) * speed.factor  # the latency model's own
    setup = costs.setup_seconds(clients, speed) + stated_setup  # before a run's clock starts
    draws = [t.draw for t in times]
    draw = None if not draws or None in draws else sum(d for d in draws if d is not None) / len(draws)
    passes = {name: algo.arrival_work(clients) for name, algo, _ in entries}
    tracking = getattr(scenario, "tracking", None)
    trackers = () if tracking is None else tuple(t for t in costs.TRACKERS_TIMED if getattr(tracking, t) is not None)
    if tracking is not None and getattr(tracking, "wandb", None) is not None:
        unstated.append("tracking.wandb: its cost is not measured: the wall time leaves it out")
    for name, algo, ext in entries:
        done = ext.arrivals if ext is not None else None if budget.updates is None else float(budget.updates)
        horizon = ext.horizon if ext is not None else budget.time
        aggs = (ext.aggregations if ext is not None else done) or 0.0
        points = None if horizon is None or not math.isfinite(horizon) else horizon / every
        # the grid's points from 0, and the run's last row where it ends between two of them
        grid = None if points is None else math.ceil(points) + 1.0 if math.isfinite(points) else math.inf
        evals = None if grid is None else grid + (aggs if scenario.eval.after_each_update else 0.0)
        events = (done or 0.0) if ext is None else ext.arrivals + ext.failed + ext.late + ext.absences
        wall = None
        trained = not (algo.replaces_training or client is not None and client.replaces_training)
        if ext is not None and math.isfinite(ext.horizon):
            if null:
                wall = costs.null_run_seconds(ext.arrivals + ext.failed + ext.late, ext.arrivals, rows, model.bytes,
                                              on_disk, speed, served=server is not None, draw=draw,
                                              passes=passes[name] or 0.0, clients=clients)
            elif trains and trained:
                wall = costs.training_run_seconds(ext.arrivals * algo.update_cost(), evals or 0.0, samples,
                                                  scenario.train.epochs, scenario.train.batch_size, data.test,
                                                  min(float(scenario.executor.jobs()), ext.in_flight), speed)
            if wall is not None:
                wall = ((wall + costs.rounds_seconds(ext.rounds, speed) + setup) * speed.learned
                        + costs.tracking_seconds(trackers, evals or 0.0))  # I/O: not the engine's to learn
        runs.append(Run(name, ext, wall, events, evals, setup * speed.learned))
        per_run.append((done or 0.0, aggs, events, evals or 0.0, costs.csv_bytes(events, evals or 0.0)))
    silent = [name for name, stated in passes.items() if stated is None]
    if null and silent and model.bytes > whole("ARRIVAL_BYTES_COUNTED"):
        unstated.append(f"{', '.join(silent)}: its work on the model's {bytes_text(model.bytes)} at each arrival "
                        f"without training: counted as on the engine's probe's model of {costs.PROBE_MODEL_BYTES} B, "
                        "so the wall time is low, the more so the larger the model (python -m benchmarks.arrival_bytes)")
        speed = replace(speed, lesson=None)  # such a run's wall would teach the engine's estimate what it omits
    acts = measured.activations_of(model) if trains else None
    if trains and acts is None:
        unstated.append(f"model {scenario.model.name}: states no activations: the memory counts none")
    batches = (scenario.executor.jobs() * min(scenario.train.batch_size, max(data.train, 1)),
               min(EVAL_BATCH, max(data.test, 1)))
    activation = 0 if acts is None else costs.activation_bytes(acts, batches[0], batches[1])
    if not null and model.params is not None and threads is None:
        unstated.append(f"executor {scenario.executor.kind}: its training speed (a GPU's) is not stated: no "
                        "wall time")
    for name, algo, _ in entries:
        if not null and algo.replaces_training:
            unstated.append(f"{name}: its clients' training replaces simfl's and states no cost: no wall time")
    if not null and client is not None and client.replaces_training:
        unstated.append("client.flower_app: the ClientApp's training states no cost: no wall time")
    known = [r.extent for r in runs if r.extent is not None]
    arrivals: float | None = max(p[0] for p in per_run) if known or budget.updates is not None else None
    horizon = max((e.horizon for e in known), default=budget.time)
    evaluations = max((r.evaluations for r in runs if r.evaluations is not None), default=None)
    events = max(p[2] for p in per_run)
    aggregations = max(p[1] for p in per_run)
    top = max(known, key=lambda e: e.arrivals + e.late, default=None)
    endless = next((e.endless for e in known if e.endless is not None), None)
    in_flight = clients if server is None else min(clients, server.concurrency)
    reached = clients if server is None else int(min(float(clients), in_flight + (arrivals or 0.0)))
    vectors = reached * model.bytes * rows
    held = held_models(in_flight, None if arrivals is None else aggregations, scenario.executor.trains_ahead())
    client_state = held * model.bytes + (0 if on_disk else vectors)
    largest_csv = max(p[4] for p in per_run)
    rows_bytes = costs.rows_bytes(events, evaluations or 0.0, largest_csv)
    values = None if layer is None or model.tensors is None else model.tensors[layer]
    recordings = [0 if values is None else count(p[1]) * values * 4 + NPY_HEADER_BYTES for p in per_run]
    n_seeds = len(scenario.seeds)
    record_disk = n_seeds * sum(recordings)
    results = (n_seeds * sum(p[4] for p in per_run) + record_disk + n_seeds * len(per_run) * whole("RUN_FILES_BYTES")
               + count(events) * whole("EVENT_CSV_BYTES") + whole("FOLDER_BYTES"))
    checkpoint = costs.checkpoint_bytes(3 + held + reached * rows, model.bytes, events, evaluations or 0.0, clients)
    walls = [r.wall_seconds for r in runs]
    wall = None if any(w is None for w in walls) else max(w for w in walls if w is not None)
    mean_latency = None
    if times:
        mean_latency = sum(float((t.weight / t.weight.sum() * t.mean).sum()) for t in times) / len(times)
    return Estimate(data, clients, model.params, dataset_bytes, model.bytes, client_state, rows_bytes, mean_latency,
                    horizon, arrivals, evaluations, len(scenario.algorithms) * n_seeds, cells, wall,
                    disk_bytes=vectors if on_disk else 0, reached=reached, in_flight=in_flight, events=events,
                    aggregations=aggregations, record_layer=layer, record_values=values,
                    recording_bytes=max(recordings), results_bytes=results, record_disk_bytes=record_disk,
                    checkpoint_bytes=checkpoint, checkpoints=checkpoints, store_dir=store.dir, entries=runs,
                    seeds=n_seeds, unstated=unstated, late=0.0 if top is None else top.late,
                    empty=0.0 if top is None else top.empty, endless=endless,
                    executor_bytes=costs.executor_bytes(scenario.executor.processes(), model.bytes),
                    workers=scenario.executor.processes(), speeds=speed, activation_bytes=activation,
                    runtime_bytes=costs.runtime_bytes(not null),
                    activation_batches=batches if activation else (0, 0),
                    timed=("training", "engine") if trains else ("engine",),
                    tracker_start=costs.tracking_start_seconds(trackers))
