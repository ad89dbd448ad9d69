"""What a scenario will cost, computed before anything is allocated, and the limits simfl enforces.

:func:`estimate` reads only the scenario: the dataset's sample shape and size
(from its config, without loading it), the model built on PyTorch's ``meta``
device (no memory) and run forward on one batch of that shape, which also
proves that model and data fit together, and a few latency draws per client
(from a private copy of the delay model) to know how many updates arrive per
virtual second. From these it counts every store a run fills, each as a count
of things times bytes per thing (the docstrings of :class:`Estimate` and of the
constants below give each model):

- memory of one run's process: the runtime (interpreter and libraries), the
  dataset (and a record per client), the model's copies, the client state
  (weights dispatched to the clients in flight; the per-client vectors of the
  algorithms' stores, :func:`store_rows`, for the clients a run can reach, in RAM
  or on disk as :func:`store_spec` decides), the events and metrics rows, the
  ``record:`` copies (one per aggregation) and, with ``--checkpoint-every``, the
  checkpoint being written;
- disk: the result folder (events.csv and metrics.csv of every run, each run's
  recording, the folder's own files), the checkpoints kept while runs go
  (``--checkpoint-every``) and the disk store's scratch file, each on the
  filesystem of the folder it is written to (:func:`disk_needs`);
- time: the virtual horizon of one run, the expected arrivals in the budget,
  the number of evaluations (and of checkpoints for ``--checkpoint-every``),
  runs (algorithms x seeds) and sweep cells, and a rough wall time.

:func:`check` refuses a scenario whose memory exceeds ``--max-memory``
(default: :func:`default_max_memory`, 80% of the machine's RAM) or whose
counts exceed the fixed limits below, and :func:`check_disk` one whose disk
exceeds the free space where it is written, each in one line that names the
largest store, gives the estimate and the limit, and says how to lower it.
``simfl validate`` prints the estimate; ``simfl run`` and ``simfl sweep`` check
it before they start (``run`` checks the disk before anything is written).
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simfl.algorithms.configs import StoreKind, StoreSpec
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
RUNTIME_BYTES = 1 << 30
"""Memory of the process before the scenario's own stores: Python with PyTorch, pandas, matplotlib and simfl
loaded (a run of the tiny quickstart, ``budget.time: 30``, peaked at 0.96-1.0 GiB on Linux x86-64 with
PyTorch's CPU build)."""
EVENT_BYTES = 256
"""Memory of one events row in ``SimState.events`` (a slotted object of eight fields and its floats: 256 bytes
measured with tracemalloc)."""
METRIC_BYTES = 512
"""Memory of one metrics row in ``SimState.metrics`` (a frozen object, its floats and its dict of extra scores)."""
EVENT_CSV_BYTES = 96
"""Bytes of one events.csv line (90 measured on the quickstart: full-precision floats)."""
METRIC_CSV_BYTES = 96
"""Bytes of one metrics.csv line (90 measured on the quickstart, with its extra scores)."""
CSV_COPIES = 2
"""Copies of a run's CSV text in memory when its files are made at the end (the text, then its bytes)."""
RECORD_COPIES = 4
"""Copies of a run's recording in memory at its peak: the rows kept per aggregation, the stacked array, the
``.npy`` buffer and its bytes handed to the writer (a 300 MiB recording raised the peak by 987 MiB, 3.3x; a
1000 MiB one by 3.5 GiB, 3.5x). One more when runs follow each other in one process: the previous run's rows
stay until the cyclic garbage collector frees its state (two 500 MiB recordings in turn: 5.1x)."""
NPY_HEADER_BYTES = 128
"""Header of a ``.npy`` file."""
RUN_FILES_BYTES = 16 << 10
"""Disk of a run's small files (numerics.json, the folder, and the block each file starts)."""
FOLDER_BYTES = 256 << 10
"""Disk of a result folder's own files: scenario.yaml, summary.csv, accuracy.png, the marker."""
CHECKPOINT_BASE_BYTES = 16 << 10
"""A run's checkpoint without its tensors and rows (the zip container, the latency and random-stream states)."""
CHECKPOINT_TENSOR_BYTES = 256
"""What a checkpoint adds to each model-sized tensor it holds (its record in the zip file and pickle)."""
CHECKPOINT_EVENT_BYTES = 64
"""One event in a checkpoint (a pickled tuple; 51 measured on the quickstart)."""
CHECKPOINT_METRIC_BYTES = 160
"""One metric in a checkpoint (a pickled dict)."""
CHECKPOINT_CLIENT_BYTES = 512
"""One client's record in a checkpoint without its weights (phase, times, counters)."""
CHECKPOINT_TUPLE_BYTES = 120
"""Memory of one event turned into a tuple while a checkpoint is made."""
CPU_CHECK_PARAMETERS = 20_000_000
"""A model of at most this many parameters is checked against the data by a forward pass on the CPU (80 MB of
weights); a larger one on the meta device, whose kernels import about 1.5 s of PyTorch's compiler on first use."""
SAMPLE_CLIENTS = 64
"""Clients whose latencies are drawn to estimate the arrival rate."""
SAMPLE_DRAWS = 16
"""Latency draws per sampled client."""
CPU_FLOPS = 7e9
"""Training FLOPs per second of one thread under the portable kernels (``SIMFL_NUMERICS``'s default) for a model
of :data:`REFERENCE_FLOPS` per sample: LeNet5 on MNIST, batches of 128, ran at 5.5e9 and 7.4e9 in two runs of
``python -m benchmarks.train_step`` with nothing else running."""
REFERENCE_FLOPS = 1.5e6
"""Training FLOPs per sample of the model :data:`CPU_FLOPS` was measured on (LeNet5 on MNIST)."""
FLOPS_EXPONENT = 0.25
"""How the speed grows with a model's FLOPs per sample (larger layers keep the vector units busier):
``CPU_FLOPS * (flops / REFERENCE_FLOPS) ** FLOPS_EXPONENT``, fitted to LeNet5 (7.4e9), VGG11 on CIFAR-10
(913 MFLOP per sample, batch 32: 3.75e10) and MobileNetV2 on CIFAR-100 (3.9 GFLOP as FlopCounterMode counts
it: 9.0e10), by ``python -m benchmarks.train_step`` with nothing else running."""


def flops_per_second(flops: float) -> float:
    """Training FLOPs per second of one thread for a model of ``flops`` per sample."""
    return CPU_FLOPS * (max(flops, 1.0) / REFERENCE_FLOPS) ** FLOPS_EXPONENT


STEP_SECONDS = 0.6e-3
"""The fixed cost of one optimizer step beside its FLOPs (forward, backward and update calls): the quickstart's small
CNN on one sample per batch took 0.7 ms a step under load and 0.9 ms with nothing else running
(``python -m benchmarks.train_step``: ``smallcnn_b1_ms``)."""
EVAL_BATCH = 1024
"""Test samples per evaluation batch (:class:`simfl.train.evaluate.Evaluator`)."""
NULL_ARRIVAL_SECONDS = 35e-6
"""Wall time of one arrival without training (``executor: {kind: none}``): the rules, the latency draw, the
event row. ``python -m benchmarks.population_setup``: 29,900 arrivals per CPU second with lognormal latencies
at 10^5 clients and 22,500 at 10^6 (a client's first draw builds its stream: 33-44 us), 42,300 and 41,000
with uniform ones (24 us); ``simfl run`` also writes the rows as it goes. This sits between."""
STORE_ARRIVAL_SECONDS = 45e-6
"""Added per arrival without training by an algorithm with per-client vectors (OrthoFL's calibration), beside
:data:`STORE_SECONDS_PER_BYTE` per byte of those vectors."""
STORE_SECONDS_PER_BYTE = 2.7e-10
"""Per arrival and byte of a client's vectors: reading and writing its rows."""
DISK_STORE_FACTOR = 1.4
"""The disk store's arrivals against the RAM store's. With the two constants above, fitted to the OrthoFL
cases of ``python -m benchmarks.estimate`` (3,010 and 19,210 parameters, 10^3 and 10^4 clients, RAM and
disk): measured over estimated wall 0.74-1.15."""
LAUNCH_SECONDS = 2.5
"""What a launch adds once beyond its runs: the result folder's tables and plots (pandas and matplotlib
loaded) and its summary. The rest of the smallest case of ``python -m benchmarks.estimate`` (FedAsync, 10^3
clients: 5.6 s measured beyond ``simfl validate``, 3.5 s of them arrivals)."""
CLIENT_SECONDS = 10e-6
"""Setup time per client of the population: its partition, state, latency stream and selection entry.
``python -m benchmarks.population_setup`` at 10^6 clients: 7.5 s of CPU before the first arrival with
lognormal latencies, 11.8 s with uniform ones (their first draws are made for every client at once); 4.0 s
with lognormal latencies since the collector is paused while a population is built. The constant still fits
the grid of ``python -m benchmarks.estimate`` (FedAsync at 10^6 clients: measured over estimated wall 0.93)."""
CLIENT_BYTES = 768
"""Memory per client of the population beside its data: the same records. ``python -m benchmarks.estimate``,
FedAsync from 10^3 to 10^6 clients: peak resident memory 1.02 to 2.26 GiB, measured over estimated
0.97-1.02."""


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
    """What a scenario needs: memory of one run's process, disk of its result folder and scratch files, time.

    Each ``*_bytes`` field is one store, a count times bytes per item as its docstring says. Counts come from
    the expected arrivals in the budget (``arrivals``), the aggregations they make (one per arrival for an
    asynchronous entry, one per round of K for a synchronous one) and the evaluations on the time grid.
    """

    data: DataShape
    clients: int
    model_params: int | None
    dataset_bytes: int
    """Training and test data (clients gather their rows from it, :class:`simfl.data.base.Shards`), plus 16
    bytes of labels and indices per sample, and :data:`CLIENT_BYTES` per client."""
    model_bytes: int
    """One model: 4 bytes per parameter and floating-point buffer; a run holds four (global, evaluated, in
    training, its gradients)."""
    client_state_bytes: int
    """In RAM: the weights dispatched to each client in flight (one model each) and, when the store is in RAM,
    the per-client vectors (``store_rows`` models per client reached)."""
    rows_bytes: int
    """Events and metrics of one run in RAM: :data:`EVENT_BYTES` per event and :data:`METRIC_BYTES` per
    evaluation, plus :data:`CSV_COPIES` of their CSV text when the files are made."""
    mean_latency: float | None
    horizon: float | None
    arrivals: float | None
    evaluations: float | None
    runs: int
    cells: int
    wall_seconds: float | None
    disk_bytes: int = 0
    """The per-client vectors when stored on disk: ``store_rows`` models per client reached, per run under way,
    in the store's folder (:mod:`simfl.algorithms.store`)."""
    reached: int = 0
    """Clients a run can reach: all of them, or under ``server:`` at most ``concurrency`` plus one per arrival."""
    in_flight: int = 0
    """Clients training at once: all of them, or ``server.concurrency``."""
    events: float = 0.0
    """Rows of one run's events.csv: one per arrival, and one per failed, lost or late round."""
    aggregations: float = 0.0
    """Aggregations of one run of the most demanding entry (what ``record:`` keeps a copy of each)."""
    record_layer: str | None = None
    """The tensor ``record:`` keeps after each aggregation, and its number of values (None: not known ahead)."""
    record_values: int | None = None
    recording_bytes: int = 0
    """One run's recording (the most demanding entry): 4 bytes per value of the layer per aggregation, plus the
    ``.npy`` header; in RAM :data:`RECORD_COPIES` times while the run ends (:attr:`record_ram`), on disk once."""
    results_bytes: int = 0
    """Disk of the result folder (per sweep cell): per run (algorithm x seed) its events.csv
    (:data:`EVENT_CSV_BYTES` per event), metrics.csv (:data:`METRIC_CSV_BYTES` per evaluation), recording and
    small files (:data:`RUN_FILES_BYTES`), plus one run's events.csv again (a file is replaced through a
    temporary copy) and the folder's own files (:data:`FOLDER_BYTES`)."""
    record_disk_bytes: int = 0
    """The recordings' share of ``results_bytes`` (every run's)."""
    checkpoint_bytes: int = 0
    """One run's checkpoint file (``running/<algorithm>/seed<k>.pt``) at the end of its budget: each model-sized
    tensor (global, last evaluated, kept, one per client in flight, ``store_rows`` per client reached) plus
    :data:`CHECKPOINT_TENSOR_BYTES`, :data:`CHECKPOINT_EVENT_BYTES` per event, :data:`CHECKPOINT_METRIC_BYTES`
    per evaluation, :data:`CHECKPOINT_CLIENT_BYTES` per client and :data:`CHECKPOINT_BASE_BYTES`. An upper bound
    where rows share a tensor (OrthoFL's anchors of one global version are saved once): 239 KB estimated for
    122 KB measured on the quickstart, 12.6 MB for 4.2 MB with 400 clients at concurrency 20."""
    checkpoints: bool = False
    """Whether the run writes checkpoints (``--checkpoint-every``)."""
    store_dir: str | None = None
    """Folder of the disk store's scratch file (None: the system's temporary folder)."""
    runtime_bytes: int = RUNTIME_BYTES
    """The process before the scenario's stores (:data:`RUNTIME_BYTES`)."""

    @property
    def checkpoint_ram(self) -> int:
        """Memory a checkpoint takes while it is made: the events as tuples, the saved bytes and their copy."""
        return int(self.events * CHECKPOINT_TUPLE_BYTES) + 2 * self.checkpoint_bytes if self.checkpoints else 0

    @property
    def record_ram(self) -> int:
        """Memory of the recordings at a run's end: :data:`RECORD_COPIES`, one more after an earlier run."""
        return (RECORD_COPIES + (self.runs > 1)) * self.recording_bytes

    @property
    def memory(self) -> int:
        """Bytes one run's process holds at its peak: runtime, dataset and client records, four model copies, client state,
        events and metrics, the recording's copies and a checkpoint being made."""
        return (self.runtime_bytes + self.dataset_bytes + 4 * self.model_bytes + self.client_state_bytes
                + self.rows_bytes + self.record_ram + self.checkpoint_ram)

    def kept_checkpoints(self, workers: int = 1) -> int:
        """Checkpoint files on disk at once: one per run under way, and one more while one is replaced."""
        return min(self.runs, max(1, workers)) + 1 if self.checkpoints else 0

    def lines(self, workers: int = 1, free: list[str] | None = None) -> list[str]:
        """The estimate as ``# ``-comment lines (``simfl validate`` output); ``workers``: runs side by side;
        ``free``: lines on the free space where the disk stores go (:func:`free_lines`)."""
        shape = "x".join(map(str, self.data.shape))
        params = "unknown (not built ahead)" if self.model_params is None else f"{self.model_params:,} parameters"
        data = (f"{_bytes(self.dataset_bytes)} ({self.data.train:,} train + {self.data.test:,} test samples of "
                f"{shape}, and {self.clients:,} clients' records)" if self.data.shape
                else "unknown until loaded (a plugin dataset without shape(config))")
        store = (f", {_bytes(self.disk_bytes)} on disk per run under way in "
                 f"{self.store_dir or 'the temporary folder'} (mapped: its pages count as resident while in the "
                 f"page cache, which the system reclaims)" if self.disk_bytes else "")
        out = [
            "# estimate (a rough guide, not a promise):",
            f"#   dataset:       {data}",
            f"#   model:         {params}, {_bytes(self.model_bytes)}",
            f"#   client state:  {_bytes(self.client_state_bytes)} in RAM{store} ({self.clients:,} clients, "
            f"{self.in_flight:,} in flight, {self.reached:,} reached)",
            f"#   events:        {_bytes(self.rows_bytes)} in RAM ({_num(self.events)} events and "
            f"{_num(self.evaluations)} metrics rows)",
        ]
        if self.record_layer is not None:
            values = "unknown size" if self.record_values is None else f"{self.record_values:,} values"
            out.append(f"#   record:        {_bytes(self.record_ram)} in RAM at the end of a run "
                       f"(layer '{self.record_layer}', {values} x {_num(self.aggregations)} aggregations; "
                       f"{_bytes(self.recording_bytes)} written)")
        if self.checkpoints:
            out.append(f"#   checkpoint:    {_bytes(self.checkpoint_ram)} in RAM while one is made")
        out += [
            f"#   runtime:       {_bytes(self.runtime_bytes)} (Python, PyTorch and simfl loaded)",
            f"#   memory:        {_bytes(self.memory)} in all per run (--max-memory)",
        ]
        cells = f" x {self.cells} sweep cells" if self.cells > 1 else ""
        records = f"; records {_bytes(self.record_disk_bytes * self.cells)}" if self.record_disk_bytes else ""
        disk = (f"#   disk:          {_bytes(self.results_bytes * self.cells)} of results ({_runs(self.runs)}{cells}"
                f"{records})")
        if self.checkpoints:
            disk += f", checkpoints {_bytes(self.checkpoint_bytes)} each, {self.kept_checkpoints(workers)} kept"
        out.append(disk)
        out += free or []
        if self.horizon is not None and self.arrivals is not None and self.evaluations is not None:
            out += [
                f"#   mean latency:  {_num(self.mean_latency)} s per round; virtual horizon {_num(self.horizon)} s",
                f"#   arrivals:      {_num(self.arrivals)} client updates; {_num(self.evaluations)} evaluations",
            ]
        out.append(f"#   runs:          {self.runs} (algorithms x seeds)" + (f", {self.cells} sweep cells"
                                                                            if self.cells > 1 else ""))
        if self.wall_seconds is not None:
            units = self.runs * self.cells
            out.append(f"#   wall time:     about {_duration(self.wall_seconds * units + LAUNCH_SECONDS)} in all with 1 "
                       "worker")
            if workers > 1:
                out.append(f"#                  about {_duration(spread(self.wall_seconds, units, workers) + LAUNCH_SECONDS)} "
                           "with "
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


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


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
    if name == "flower_app":  # one placeholder row per sample counted (simfl.data.app)
        return DataShape((1,), 1, int(data.partition.clients) * int(data.samples), 0)
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


ModelCost = tuple[int | None, int, "int | Callable[[], int]", dict[str, int] | None]
"""(parameters, bytes, training FLOPs per sample, values per exchanged tensor by name) of a model; the FLOPs may be
a function that counts them (:func:`simfl.latency.base.counted`), called only where an estimate needs them."""


def dry_model(scenario: Any, data: DataShape) -> ModelCost:
    """The :data:`ModelCost` of the scenario's model on its data (None for unknowns: a model read from files,
    data of unknown shape): a built-in model on a shape :mod:`simfl.schema.model_costs` lists is read from
    there, without torch; any other is built and checked by :func:`measure_model`."""
    from simfl.schema import model_costs, plugins

    if scenario.model.name == "flower_app":
        return None, 0, 0, None  # the arrays the app sends when the run starts
    if not plugins.is_plugin("model", scenario.model.name):
        known = model_costs.known(scenario.model, data.shape, data.classes)
        if known is not None:
            return known
    return measure_model(scenario, data)


def measure_model(scenario: Any, data: DataShape) -> ModelCost:
    """The :data:`ModelCost` of the scenario's model, sized on the meta device.

    Runs one forward pass of a batch of the data's sample shape (on the CPU up to
    :data:`CPU_CHECK_PARAMETERS`, else on the meta device), so that a model that does not fit the data
    fails here, naming both keys, instead of deep in training. The FLOPs are a function, counted on call.
    """
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
        return None, 0, 0, None  # the encoder is read from files when the run starts; a plugin dataset's shape is unknown
    import torch

    build = plugins.lookup("model", name).build
    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = build(scenario.model, data.shape, data.classes)
        params = sum(p.numel() for p in model.parameters())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if params <= CPU_CHECK_PARAMETERS:  # PyTorch's meta kernels import seconds of its compiler on first use
                with torch.random.fork_rng(devices=[]):
                    built = build(scenario.model, data.shape, data.classes)
                out = built.eval()(torch.zeros((2, *data.shape)))
            else:
                with torch.device("meta"):
                    out = model.eval()(torch.zeros((2, *data.shape)))
    except InputError:
        raise
    except (RuntimeError, ValueError, TypeError, IndexError, ZeroDivisionError, AssertionError) as exc:
        raise misfit() from exc
    if tuple(out.shape) != (2, data.classes):
        raise misfit(f" (the model's output is {_shape_text(tuple(out.shape[1:]))}, not {data.classes} classes)")
    buffers = sum(b.numel() for b in model.buffers() if b.is_floating_point())
    tensors = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}  # as models.flat.Layout
    tensors.update((n, b.numel()) for n, b in model.named_buffers() if b.is_floating_point())

    @functools.cache  # counted once, however many parts of an estimate read it
    def flops() -> int:
        from simfl.models.cost import training_flops_per_sample

        try:
            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return int(training_flops_per_sample(model, torch.zeros(data.shape)))
        except (RuntimeError, ValueError, TypeError):
            return 6 * params

    return params, 4 * (params + buffers), flops, tensors


# -- arrivals ---------------------------------------------------------------------------------------


def mean_latency(scenario: Any, clients: int, model_bytes: int, flops: int | Callable[[], int], samples: int) -> float:
    """Mean round latency over a sample of clients, from a private copy of the delay model (seed 0; the FLOPs are
    counted if it reads them)."""
    from simfl.latency import Workload
    from simfl.latency.base import counted
    from simfl.schema import plugins

    cls = plugins.lookup("latency", scenario.latency.model)
    cls.check(scenario.latency, clients)
    workload = Workload(model_bytes=max(model_bytes, 1), flops=lambda: max(counted(flops), 1),
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
    the algorithm's own (its config's ``client_vectors``) and, under ``server:``, each client's kept model."""
    serving = getattr(scenario, "server", None) is not None
    return max((int(algo.client_vectors) + (serving and bool(algo.keeps_client_models)) for algo in scenario.algorithms),
               default=0)


def store_spec(scenario: Any, stored_bytes: int) -> StoreSpec:
    """Where a run keeps ``stored_bytes`` of per-client vectors: the scenario's ``client_state.store``, or under
    ``auto`` on disk when they would take more than a quarter of this machine's RAM."""
    config = getattr(scenario, "client_state", None)
    kind: StoreKind = "disk" if stored_bytes > default_max_memory() / 0.8 / 4 else "ram"
    if config is not None and config.store != "auto":
        kind = config.store
    return StoreSpec(kind, None if config is None else config.dir)


def aggregations(scenario: Any, arrivals: float) -> list[float]:
    """Aggregations of one run of each entry: one per round of ``clients_per_round`` arrivals where the entry's
    config has it (the synchronous rules), else one per arrival."""
    out = []
    for algo in scenario.algorithms:
        k = getattr(algo, "clients_per_round", None)
        out.append(arrivals / k if isinstance(k, int) and k > 0 else arrivals)
    return out


def event_rows(scenario: Any, arrivals: float) -> float:
    """Rows of one run's events.csv: one per arrival, one per failed round (``availability.p``: a round fails
    with probability p, so 1 / (1 - p) rounds per arrival), one per late round under over-selection (at most
    one per arrival) and two per scheduled departure."""
    availability = getattr(scenario, "availability", None)
    p = 0.0 if availability is None else min(float(availability.p), 0.99)
    rows = arrivals / (1.0 - p)
    rounds = getattr(scenario, "rounds", None)
    if rounds is not None and rounds.over_select > 0:
        rows += arrivals
    if availability is not None:
        rows += 2 * len(availability.departures)
    return rows


def app_rounds(scenario: Any) -> int | None:
    """The rounds a run of every entry lasts when every entry is a Flower ServerApp whose run config says how many
    (``num-server-rounds``, the key of Flower's app templates): the app's ``main`` ends the run then, whatever the
    budget (``simfl flwr run`` sets one no app reaches). None otherwise: the budget bounds the run. A hint for the
    estimate only; the run goes as the app decides."""
    counts = []
    for algo in scenario.algorithms:
        value = getattr(algo, "run_config", {}).get("num-server-rounds") if algo.name == "serverapp" else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return None
        counts.append(value)
    return max(counts) if counts else None


def estimate(scenario: Any, cells: int = 1, checkpoints: bool = False) -> Estimate:
    """The estimate of ``scenario`` (a validated :class:`simfl.schema.scenario.Scenario`); ``checkpoints``:
    the runs write checkpoints (``--checkpoint-every``)."""
    from simfl.latency.base import counted

    data = data_shape(scenario.data)
    clients = client_count(scenario)
    if clients > MAX_CLIENTS:
        raise InputError("data.partition.clients", f"{clients:,} clients; the limit is {MAX_CLIENTS:,}")
    if data.train and clients > data.train:
        raise InputError("data.partition.clients", f"must be at most the {data.train:,} training samples of "
                         f"data.dataset {scenario.data.dataset}, got {clients:,}")
    params, model_bytes, flops_of, tensors = dry_model(scenario, data)
    record = getattr(scenario, "record", None)
    layer = None if record is None else record.layer
    if layer is not None and tensors is not None and layer not in tensors:  # as the run's LayerRecorder says
        raise InputError("record.layer", f"unknown layer '{layer}'; the model has: {', '.join(tensors)}")
    per_sample = math.prod(data.shape) * data.item_bytes
    dataset_bytes = (data.train + data.test) * per_sample + 16 * (data.train + data.test) + CLIENT_BYTES * clients
    server = getattr(scenario, "server", None)
    in_flight = clients if server is None else min(clients, server.concurrency)
    rows = store_rows(scenario)
    stored = clients * model_bytes * rows  # where the run puts them depends on the whole population
    store = store_spec(scenario, stored)
    on_disk = store.kind == "disk"
    samples = data.train // max(clients, 1)
    lat = mean_latency(scenario, clients, model_bytes, flops_of, samples)
    rate = in_flight / lat
    budget = scenario.budget
    horizon = budget.time if budget.time is not None else budget.updates / rate
    arrivals = horizon * rate if budget.updates is None else min(float(budget.updates), horizon * rate)
    rounds = app_rounds(scenario)
    if rounds is not None:  # the ServerApps end their runs after their rounds, long before an open budget
        arrivals = min(arrivals, float(rounds) * in_flight)
        horizon = min(horizon, arrivals / rate)
    reached = clients if server is None else int(min(float(clients), in_flight + arrivals))
    vectors = reached * model_bytes * rows
    client_state = in_flight * model_bytes + (0 if on_disk else vectors)
    aggs = aggregations(scenario, arrivals)
    grid = horizon / scenario.eval.every
    evals = [grid + (a if scenario.eval.after_each_update else 0.0) for a in aggs]
    evaluations = max(evals)
    events = event_rows(scenario, arrivals)
    csv = [_count(events) * EVENT_CSV_BYTES + _count(e) * METRIC_CSV_BYTES for e in evals]
    rows_bytes = _count(events) * EVENT_BYTES + _count(evaluations) * METRIC_BYTES + CSV_COPIES * max(csv)
    values = None if layer is None or tensors is None else tensors[layer]
    recordings = [0 if values is None else _count(a) * values * 4 + NPY_HEADER_BYTES for a in aggs]
    seeds = len(scenario.seeds)
    record_disk = seeds * sum(recordings)
    results = (seeds * sum(csv) + record_disk + seeds * len(aggs) * RUN_FILES_BYTES + _count(events) * EVENT_CSV_BYTES
               + FOLDER_BYTES)
    tensors_kept = 3 + in_flight + reached * rows
    checkpoint = (tensors_kept * (model_bytes + CHECKPOINT_TENSOR_BYTES) + _count(events) * CHECKPOINT_EVENT_BYTES
                  + _count(evaluations) * CHECKPOINT_METRIC_BYTES + clients * CHECKPOINT_CLIENT_BYTES
                  + CHECKPOINT_BASE_BYTES)
    null = scenario.executor.kind == "none"
    flops = 0 if null else counted(flops_of)  # nothing trains or is evaluated in pure-latency mode
    if null:
        stored_arrival = (STORE_ARRIVAL_SECONDS + rows * model_bytes * STORE_SECONDS_PER_BYTE) if rows else 0.0
        per_update = NULL_ARRIVAL_SECONDS + stored_arrival * (DISK_STORE_FACTOR if on_disk else 1.0)
    else:
        steps = scenario.train.epochs * math.ceil(max(samples, 1) / scenario.train.batch_size)
        per_update = flops * samples * scenario.train.epochs / flops_per_second(flops) + steps * STEP_SECONDS + 1e-4
    eval_cost = 0.0 if null else (2 * flops / 6 * data.test / flops_per_second(flops)
                                  + math.ceil(data.test / EVAL_BATCH) * STEP_SECONDS)
    wall = arrivals * per_update + evaluations * eval_cost + clients * CLIENT_SECONDS
    return Estimate(data, clients, params, dataset_bytes, model_bytes, client_state, rows_bytes, lat, horizon,
                    arrivals, evaluations, len(scenario.algorithms) * seeds, cells, wall,
                    disk_bytes=vectors if on_disk else 0, reached=reached, in_flight=in_flight, events=events,
                    aggregations=max(aggs), record_layer=layer, record_values=values, recording_bytes=max(recordings),
                    results_bytes=results, record_disk_bytes=record_disk, checkpoint_bytes=checkpoint,
                    checkpoints=checkpoints, store_dir=store.dir)


def _count(x: float) -> int:
    """A count of items as an integer that stays finite (at most 10^18)."""
    return int(min(max(x, 0.0), 1e18))


_MEMORY_HOW = {
    "record": "record a smaller layer (record.layer), lower the budget or drop record:",
    "events and metrics": "lower the budget or raise eval.every",
    "dataset": "use a smaller dataset",
    "model and client state": "use a smaller model or fewer clients (server.concurrency), or client_state.store: disk",
    "checkpoint": "checkpoint a smaller run",
    "runtime": "raise the limit",
}


def check(est: Estimate, max_memory: int, where: str = "estimate", max_hours: float | None = None) -> None:
    """Refuse a scenario over a limit, in one line giving the estimate, the limit and how to lower it.

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
        parts = {"runtime": est.runtime_bytes, "dataset": est.dataset_bytes,
                 "model and client state": 4 * est.model_bytes + est.client_state_bytes,
                 "events and metrics": est.rows_bytes, "record": est.record_ram,
                 "checkpoint": est.checkpoint_ram}
        largest = max(parts, key=lambda k: parts[k])
        shown = ", ".join(f"{k} {_bytes(v)}" for k, v in parts.items() if v or k != "record" and k != "checkpoint")
        raise InputError(where, f"needs about {_bytes(est.memory)} of memory per run ({shown}); the limit is "
                         f"{_bytes(max_memory)} (--max-memory): {_MEMORY_HOW[largest]}")
    hours = DEFAULT_MAX_HOURS if max_hours is None else max_hours
    if est.wall_seconds is not None and est.wall_seconds > hours * 3600:
        raise InputError(where, f"one run would take about {_duration(est.wall_seconds)} of wall time; the limit is "
                         f"{_duration(hours * 3600)} (--max-hours): lower train.epochs or the budget, or raise the "
                         "limit")


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
                      f"{_num(est.events)} events and {_num(est.evaluations)} evaluations per run x {_runs(est.runs)}",
                      "lower the budget or raise eval.every, or give an --out on a larger disk")]
    if est.record_disk_bytes:
        needs.append(DiskNeed("records", est.record_disk_bytes * cells, out,
                              f"layer '{est.record_layer}' of {est.record_values or 0:,} values x "
                              f"{_num(est.aggregations)} aggregations x {_runs(est.runs)}",
                              "record a smaller layer (record.layer), lower the budget or drop record:, or give an "
                              "--out on a larger disk"))
    kept = est.kept_checkpoints(workers)
    if kept:
        needs.append(DiskNeed("checkpoints", kept * est.checkpoint_bytes, out,
                              f"{_bytes(est.checkpoint_bytes)} each, {kept} kept at once",
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
    lines = []
    for free, needs in _by_device(disk_needs(est, out, workers)).values():
        total = sum(n.bytes for n in needs)
        folders = ", ".join(dict.fromkeys(str(existing(n.folder)) for n in needs))
        lines.append(f"#   free disk:     {_bytes(free)} in {folders}, {_bytes(total)} needed "
                     f"({', '.join(n.store for n in needs)})")
    return lines


def check_disk(est: Estimate, out: Path, where: str = "estimate", workers: int = 1) -> None:
    """Refuse a scenario whose stores on a filesystem exceed its free space, in one line naming the largest
    store there, how much it needs, what is free and how to lower it."""
    for free, needs in _by_device(disk_needs(est, out, workers)).values():
        total = sum(n.bytes for n in needs)
        if total > free:
            big = max(needs, key=lambda n: n.bytes)
            others = "".join(f", {n.store} {_bytes(n.bytes)}" for n in needs if n is not big and n.bytes)
            raise InputError(where, f"would write about {_bytes(total)} to {existing(big.folder)}: {big.store} "
                             f"{_bytes(big.bytes)} ({big.detail}){others}; {_bytes(free)} is free there: {big.how}")


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
