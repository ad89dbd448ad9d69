"""What a scenario will cost, computed before anything is allocated, and the limits simfl enforces.

:func:`estimate` reads only the scenario: the dataset's sample shape and size
(from its config, without loading it), the model built on PyTorch's ``meta``
device (no memory) and run forward on one batch of that shape, which also
proves that model and data fit together, and a few latency draws per client
(from a private copy of the delay model) to know how many updates arrive per
virtual second. From these it derives:

- memory: dataset (plus its client shards), model, per-client state
  (dispatched weights in RAM; the per-client vectors of the algorithms'
  stores, :func:`store_rows`, in RAM or on disk as :func:`store_spec` decides),
  and the events and metrics one run records;
- time: the virtual horizon of one run, the expected arrivals in the budget,
  the number of evaluations (and of checkpoints for ``--checkpoint-every``),
  runs (algorithms x seeds) and sweep cells, and a rough wall time.

:func:`check` refuses a scenario whose memory exceeds ``--max-memory``
(default: :func:`default_max_memory`, 80% of the machine's RAM) or whose
counts exceed the fixed limits below, in one line that gives the estimate and
the limit. ``simfl validate`` prints the estimate; ``simfl run`` and
``simfl sweep`` check it before they start.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass, replace
from typing import Any

from simfl.algorithms.store import StoreKind, StoreSpec
from simfl.errors import InputError

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
MAX_CLIENTS = 1_000_000
"""Clients of one scenario."""
MAX_DRAWS = 50_000_000
"""Latencies drawn by ``simfl traces show`` (clients x rounds, per delay model)."""
EVENT_BYTES = 400
"""Memory of one recorded event or metric row (Python objects, then CSV)."""
SAMPLE_CLIENTS = 64
"""Clients whose latencies are drawn to estimate the arrival rate."""
SAMPLE_DRAWS = 16
"""Latency draws per sampled client."""
CPU_FLOPS = 2e10
"""Assumed training speed of the CPU, for the rough wall time."""


DATA_SHAPES: dict[str, tuple[tuple[int, ...], int, int, int]] = {
    "digits": ((1, 8, 8), 10, 1500, 297),
    "mnist": ((1, 28, 28), 10, 60_000, 10_000),
    "cifar10": ((3, 32, 32), 10, 50_000, 10_000),
    "cifar100": ((3, 32, 32), 100, 50_000, 10_000),
    "har": ((9, 128), 6, 7352, 2947),
}
"""Sample shape, classes, training and test samples of the fixed datasets."""

MODEL_NEEDS = {
    "lenet5": "28x28 (or 32x32) images (C x H x W)",
    "vgg11": "images of at least 32x32 (C x H x W)",
    "smallcnn": "images (C x H x W)",
    "mobilenetv2": "images (C x H x W)",
    "resnet18_1d": "multichannel series (channels x length, e.g. har 9x128)",
    "mlp": "samples of any shape",
    "text": "token ids (data.dataset newsgroups)",
}
"""What each model takes, for the message when model and data do not fit."""


@dataclass(frozen=True)
class DataShape:
    """What the estimate needs to know of a dataset without loading it."""

    shape: tuple[int, ...]
    classes: int
    train: int
    test: int
    item_bytes: int = 4


@dataclass
class Estimate:
    """The memory and time a scenario needs (per run unless said otherwise)."""

    data: DataShape
    clients: int
    model_params: int | None
    dataset_bytes: int
    model_bytes: int
    client_state_bytes: int
    """In RAM: the weights dispatched to clients, and the per-client vectors when stored in RAM."""
    record_bytes: int
    mean_latency: float | None
    horizon: float | None
    arrivals: float | None
    evaluations: float | None
    runs: int
    cells: int
    wall_seconds: float | None
    disk_bytes: int = 0
    """The per-client vectors when stored on disk (:mod:`simfl.algorithms.store`)."""

    @property
    def memory(self) -> int:
        """Bytes one process holds at its peak (dataset, shards, model copies, client state, records)."""
        return self.dataset_bytes + 4 * self.model_bytes + self.client_state_bytes + self.record_bytes

    def lines(self, workers: int = 1) -> list[str]:
        """The estimate as ``# ``-comment lines (``simfl validate`` output); ``workers``: runs side by side."""
        shape = "x".join(map(str, self.data.shape))
        params = "unknown (not built ahead)" if self.model_params is None else f"{self.model_params:,} parameters"
        data = (f"{_bytes(self.dataset_bytes)} ({self.data.train:,} train + {self.data.test:,} test samples of "
                f"{shape}, with the client shards)" if self.data.shape
                else "unknown until loaded (a plugin dataset without shape(config))")
        out = [
            "# estimate (per run; a rough guide, not a promise):",
            f"#   dataset:       {data}",
            f"#   model:         {params}, {_bytes(self.model_bytes)}",
            f"#   client state:  {_bytes(self.client_state_bytes)} in RAM, {_bytes(self.disk_bytes)} on disk "
            f"({self.clients} clients)",
            f"#   records:       {_bytes(self.record_bytes)} (events and metrics)",
            f"#   memory:        {_bytes(self.memory)} in all",
        ]
        if self.horizon is not None and self.arrivals is not None and self.evaluations is not None:
            out += [
                f"#   mean latency:  {_num(self.mean_latency)} s per round; virtual horizon {_num(self.horizon)} s",
                f"#   arrivals:      {_num(self.arrivals)} client updates; {_num(self.evaluations)} evaluations",
            ]
        out.append(f"#   runs:          {self.runs} (algorithms x seeds)" + (f", {self.cells} sweep cells"
                                                                            if self.cells > 1 else ""))
        if self.wall_seconds is not None:
            units = self.runs * self.cells
            out.append(f"#   wall time:     about {_duration(self.wall_seconds * units)} in all with 1 worker")
            if workers > 1:
                out.append(f"#                  about {_duration(spread(self.wall_seconds, units, workers))} with "
                           f"{workers} workers (the default here; --workers, --ray)")
        return out


def spread(seconds: float, runs: int, workers: int) -> float:
    """Wall time of ``runs`` runs of ``seconds`` each over ``workers`` side by side (the longest worker's share)."""
    return seconds * math.ceil(runs / max(1, workers))


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def _num(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:,.0f}" if abs(x) < 1e12 else f"{x:.3g}"


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def default_max_memory() -> int:
    """80% of the machine's RAM (4 GiB where it cannot be read)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 5 << 30
    return int(0.8 * total)


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


# -- the dataset and the model ----------------------------------------------------------------


def data_shape(data: Any) -> DataShape:
    """Sample shape, classes and sizes of the scenario's dataset, from its config alone."""
    name = data.dataset
    if name in DATA_SHAPES:
        shape, classes, train, test = DATA_SHAPES[name]
        return DataShape(shape, classes, train, test)
    if name == "synthetic":
        return DataShape((int(data.features),), int(data.classes), int(data.train_size), int(data.test_size))
    if name == "hapt":
        windows = 1_200_000 // max(1, int(data.step))  # about 20 h at 50 Hz in the raw recordings
        return DataShape((6, int(data.window)), 6, int(0.7 * windows), int(0.3 * windows))
    if name == "newsgroups":
        classes = len(data.categories) if data.categories else 20
        frac = classes / 20
        return DataShape((int(data.max_length),), classes, int(11_314 * frac), int(7_532 * frac), item_bytes=8)
    from simfl.schema import plugins

    loader = plugins.lookup("dataset", name)
    if callable(getattr(loader, "shape", None)):  # a plugin dataset may state its shape ahead (docs/plugins.md)
        shape, classes, train, test = loader.shape(data)
        return DataShape(tuple(int(s) for s in shape), int(classes), int(train), int(test))
    return DataShape((), 0, 0, 0)  # unknown until loaded: the model is not built ahead


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def dry_model(scenario: Any, data: DataShape) -> tuple[int | None, int, int]:
    """(parameters, bytes, training FLOPs per sample) of the scenario's model, built on the meta device.

    Runs one forward pass of a batch of the data's sample shape, so that a model that does not
    fit the data fails here, naming both keys, instead of deep in training.
    """
    import torch

    from simfl.models.cost import training_flops_per_sample
    from simfl.schema import plugins

    name = scenario.model.name
    dataset = scenario.data.dataset

    def misfit(detail: str = "") -> InputError:
        gives = f"{'token ids of length ' if dataset == 'newsgroups' else ''}{_shape_text(data.shape)}"
        return InputError("model.name", f"{name} needs {MODEL_NEEDS.get(name, 'other samples')}; data.dataset "
                          f"{dataset} gives {gives}{detail}")

    if (name == "text") != (dataset == "newsgroups"):
        raise misfit()
    if name == "text" or not data.shape:
        return None, 0, 0  # the encoder is read from files when the run starts; a plugin dataset's shape is unknown
    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = plugins.lookup("model", name).build(scenario.model, data.shape, data.classes)
            model.eval()
            out = model(torch.zeros((2, *data.shape)))
    except InputError:
        raise
    except (RuntimeError, ValueError, TypeError, IndexError, ZeroDivisionError, AssertionError) as exc:
        raise misfit() from exc
    if tuple(out.shape) != (2, data.classes):
        raise misfit(f" (the model's output is {_shape_text(tuple(out.shape[1:]))}, not {data.classes} classes)")
    params = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() for b in model.buffers() if b.is_floating_point())
    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            flops = training_flops_per_sample(model, torch.zeros(data.shape))
    except (RuntimeError, ValueError, TypeError):
        flops = 6 * params
    return params, 4 * (params + buffers), int(flops)


# -- arrivals ---------------------------------------------------------------------------------------


def mean_latency(scenario: Any, clients: int, model_bytes: int, flops: int, samples: int) -> float:
    """Mean round latency over a sample of clients, from a private copy of the delay model (seed 0)."""
    from simfl.latency import Workload
    from simfl.schema import plugins

    cls = plugins.lookup("latency", scenario.latency.model)
    cls.check(scenario.latency, clients)
    workload = Workload(model_bytes=max(model_bytes, 1), flops_per_sample=max(flops, 1),
                        samples=(max(samples, 1),) * clients, epochs=scenario.train.epochs)
    try:
        try:  # a sample of the clients is enough where the model is not configured per client
            n = min(clients, SAMPLE_CLIENTS)
            latency = cls(scenario.latency, n, 0, replace(workload, samples=workload.samples[:n]))
        except InputError:
            n = clients
            latency = cls(scenario.latency, clients, 0, workload)
        draws = [latency.sample(m) for m in range(n) for _ in range(SAMPLE_DRAWS)]
    except InputError:
        raise
    except (OverflowError, ZeroDivisionError, ValueError, FloatingPointError) as exc:
        raise InputError(f"latency.model {scenario.latency.model}", "its parameters overflow or give no usable "
                         f"latencies ({type(exc).__name__}); use values of a sane size") from None
    bad = [d for d in draws if not (math.isfinite(d) and d > 0)]
    if bad:
        raise InputError(f"latency.model {scenario.latency.model}", f"draws latencies such as {bad[0]!r}; every "
                         "latency must be a finite number > 0: check its parameters")
    return sum(draws) / len(draws)


# -- the estimate and its limits ------------------------------------------------------------------


def client_count(scenario: Any) -> int:
    """The number of clients as far as the scenario states it before the data is split.

    The partition's ``clients`` (or its count rows); where the partition leaves it to the data (by
    subject, an index file), the length of a per-client latency list; else 30, a typical federation.
    """
    part = scenario.data.partition
    n = getattr(part, "clients", None)
    if n is None and getattr(part, "counts", None):
        n = len(part.counts)
    for key in ("seconds", "devices"):
        values = getattr(scenario.latency, key, None)
        if n is None and isinstance(values, list) and values:
            n = len(values)
    return int(n or 30)


def store_rows(scenario: Any) -> int:
    """Model-sized vectors per client that a run of the scenario's most demanding entry keeps in its stores:
    the algorithm's own (``client_vectors``) and, under ``server:``, each client's kept model."""
    from simfl.schema import plugins

    rows = 0
    for algo in scenario.algorithms:
        cls = plugins.lookup("algorithm", algo.name)
        kept = getattr(scenario, "server", None) is not None and bool(getattr(cls, "keeps_client_models", False))
        rows = max(rows, int(getattr(cls, "client_vectors", 0)) + kept)
    return rows


def store_spec(scenario: Any, stored_bytes: int) -> StoreSpec:
    """Where a run keeps ``stored_bytes`` of per-client vectors: the scenario's ``client_state.store``, or under
    ``auto`` on disk when they would take more than a quarter of this machine's RAM."""
    config = getattr(scenario, "client_state", None)
    kind: StoreKind = "disk" if stored_bytes > default_max_memory() / 0.8 / 4 else "ram"
    if config is not None and config.store != "auto":
        kind = config.store
    return StoreSpec(kind, None if config is None else config.dir)


def estimate(scenario: Any, cells: int = 1) -> Estimate:
    """The estimate of ``scenario`` (a validated :class:`simfl.schema.scenario.Scenario`)."""
    data = data_shape(scenario.data)
    clients = client_count(scenario)
    if clients > MAX_CLIENTS:
        raise InputError("data.partition.clients", f"{clients:,} clients; the limit is {MAX_CLIENTS:,}")
    if data.train and clients > data.train:
        raise InputError("data.partition.clients", f"must be at most the {data.train:,} training samples of "
                         f"data.dataset {scenario.data.dataset}, got {clients:,}")
    params, model_bytes, flops = dry_model(scenario, data)
    per_sample = math.prod(data.shape) * data.item_bytes
    dataset_bytes = (2 * data.train + data.test) * per_sample + 16 * (data.train + data.test)
    server = getattr(scenario, "server", None)
    in_flight = clients if server is None else min(clients, server.concurrency)
    stored = clients * model_bytes * store_rows(scenario)
    on_disk = store_spec(scenario, stored).kind == "disk"
    client_state = in_flight * model_bytes + (0 if on_disk else stored)
    samples = data.train // max(clients, 1)
    lat = mean_latency(scenario, clients, model_bytes, flops, samples)
    rate = in_flight / lat
    budget = scenario.budget
    horizon = budget.time if budget.time is not None else budget.updates / rate
    arrivals = horizon * rate if budget.updates is None else min(float(budget.updates), horizon * rate)
    evaluations = horizon / scenario.eval.every + (arrivals if scenario.eval.after_each_update else 0.0)
    record_bytes = int(min(arrivals + evaluations, 1e18)) * EVENT_BYTES
    null = scenario.executor.kind == "none"
    per_update = 2e-6 if null else flops * samples * scenario.train.epochs / CPU_FLOPS + 1e-4
    eval_cost = 0.0 if null else 2 * flops / 6 * data.test / CPU_FLOPS
    wall = arrivals * per_update + evaluations * eval_cost
    return Estimate(data, clients, params, dataset_bytes, model_bytes, client_state, record_bytes, lat, horizon,
                    arrivals, evaluations, len(scenario.algorithms) * len(scenario.seeds), cells, wall,
                    stored if on_disk else 0)


def check(est: Estimate, max_memory: int, where: str = "estimate", max_hours: float | None = None) -> None:
    """Refuse a scenario over a limit, in one line giving the estimate and the limit.

    ``max_hours`` bounds the estimated wall time of one run (default :data:`DEFAULT_MAX_HOURS`): a
    run that would never end in practice (``train.epochs: 1e12``) is refused as memory is.
    """
    if est.evaluations is not None and est.evaluations > MAX_EVALUATIONS:
        raise InputError(where, f"would evaluate about {_num(est.evaluations)} times per run (horizon "
                         f"{_num(est.horizon)} s of virtual time); the limit is {MAX_EVALUATIONS:,}: raise eval.every "
                         "or lower the budget")
    if est.arrivals is not None and est.arrivals > MAX_ARRIVALS:
        raise InputError(where, f"would process about {_num(est.arrivals)} client updates per run; the limit is "
                         f"{MAX_ARRIVALS:,}: lower the budget")
    if est.memory > max_memory:
        raise InputError(where, f"needs about {_bytes(est.memory)} of memory (dataset {_bytes(est.dataset_bytes)}, "
                         f"model and client state {_bytes(4 * est.model_bytes + est.client_state_bytes)}, records "
                         f"{_bytes(est.record_bytes)}); the limit is {_bytes(max_memory)} (--max-memory)")
    hours = DEFAULT_MAX_HOURS if max_hours is None else max_hours
    if est.wall_seconds is not None and est.wall_seconds > hours * 3600:
        raise InputError(where, f"one run would take about {_duration(est.wall_seconds)} of wall time; the limit is "
                         f"{_duration(hours * 3600)} (--max-hours): lower train.epochs or the budget, or raise the "
                         "limit")


def check_checkpoints(est: Estimate, updates: int | None, seconds: float | None) -> None:
    """Refuse a ``--checkpoint-every`` that would write more than :data:`MAX_CHECKPOINTS` checkpoints."""
    if est.arrivals is None or est.horizon is None:
        return
    count = est.arrivals / updates if updates is not None else est.horizon / (seconds or math.inf)
    if count > MAX_CHECKPOINTS:
        raise InputError("--checkpoint-every", f"would write about {_num(count)} checkpoints per run; the limit is "
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
                         f"{_bytes(need)}; the limits are {MAX_DRAWS:,} draws and {_bytes(max_memory)} (--max-memory)")
