"""Live tracking: a run's metrics sent to TensorBoard, MLflow or Weights & Biases while it goes.

Scenario key ``tracking:`` (off by default) names the trackers, each optional::

    tracking:
      tensorboard: {}                       # or {dir: logs/tb}
      mlflow: {experiment: mnist-async}     # a local SQLite store by default
      wandb: {project: mnist, mode: offline}

Every (algorithm, seed) run becomes one tracker run named ``<algorithm>-seed<k>`` (grouped
under the scenario name), fed from the engine's callbacks:

- after each evaluation (``progress``), against **virtual seconds**, so that runs with different
  evaluation grids lie on one axis: ``eval/accuracy``, ``eval/loss`` and any further score,
  ``eval/virtual_time`` (exact), ``eval/updates`` and ``eval/wall_seconds`` (real seconds since
  the run started, resumed runs included). TensorBoard and MLflow take an integer step: the
  virtual time rounded to the second (:func:`virtual_step`); W&B plots them against
  ``eval/virtual_time`` itself;
- after each aggregation (``on_update``), at step = the update count t (the ``update`` column
  of events.csv): ``update/staleness``, ``update/in_flight`` (clients still training when
  the update is aggregated) and ``update/weight`` (the mixing weight, asynchronous algorithms).

When a result folder is complete, its comparison (:mod:`simfl.output.comparison`) goes to each
tracker as one more run named ``comparison``: per entry ``comparison/<entry>/<column>`` (final
accuracy, time to target, the ratio to the baseline and their interval bounds), the target and
baseline as parameters, the verdict in its summary, and comparison.md and comparison.csv as
artifacts (TensorBoard: text).

Per-update values are buffered and sent at each evaluation, so a tracker costs one write
per evaluation rather than one per update. The flattened scenario (with this run's
algorithm as ``algorithm.*`` and its ``seed``) is logged as the run's parameters, and
``scenario.yaml`` and the run's summary row as artifacts (W&B: the run summary).

Trackers write beside the results folder, not inside it: the folder is staged as
``<out>.partial`` and renamed when it is complete, which would move files a tracker still
points at (MLflow's file store records absolute artifact paths), and one store beside all
result folders lets one TensorBoard or MLflow view compare scenarios. Defaults, for
``--out runs/<name>``: ``runs/tensorboard/<name>/``, MLflow's local store ``runs/mlflow.db``
(with the runs' files in ``runs/mlartifacts/``) and ``runs/wandb/``. MLflow's local store is
its SQLite file: MLflow 3 keeps the older ``mlruns/`` file store in maintenance mode and refuses
it unless ``MLFLOW_ALLOW_FILE_STORE=true`` is set (a ``file:`` URI then works as given).
Relative folders given in the scenario are taken from the scenario file's folder, like data paths.

The backends' packages are optional extras (``pip install 'simfl[tb]'``, ``[mlflow]``,
``[wandb]``), imported only when a scenario asks for them; a missing one is reported in one
line before any run starts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import netrc
import os
import re
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import yaml
from pydantic import Field

from simfl.errors import InputError
from simfl.fields import Section
from simfl.network import CONNECT_TIMEOUT, check_reachable

if TYPE_CHECKING:
    from simfl.output.comparison import Comparison
    from simfl.sim.state import SimState

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: parallel cells creating one new store may collide
    fcntl = None  # type: ignore[assignment]

# -- the scenario section ---------------------------------------------------------


class TensorBoardConfig(Section):
    """TensorBoard event files (`torch.utils.tensorboard`); needs `pip install 'simfl[tb]'`."""

    dir: str | None = Field(
        None, min_length=1,
        description="Folder of the event files, one subfolder <algorithm>/seed<k> per run (default: "
        "tensorboard/<output folder name> beside the output folder; watch with `tensorboard --logdir` on it "
        "or on its parent).",
    )


class MlflowConfig(Section):
    """MLflow runs; needs `pip install 'simfl[mlflow]'`."""

    uri: str | None = Field(
        None, min_length=1,
        description="Tracking URI, e.g. a server's http://host:5000 or sqlite:///path/mlflow.db (default: the "
        "local store sqlite:///<beside the output folder>/mlflow.db, run files in mlartifacts/ beside it; browse "
        "with `mlflow ui --backend-store-uri sqlite:///runs/mlflow.db`). MLflow 3 refuses file: stores unless "
        "MLFLOW_ALLOW_FILE_STORE=true is set.",
    )
    experiment: str | None = Field(None, min_length=1, description="Experiment name (default: the scenario name).")


class WandbConfig(Section):
    """Weights & Biases runs; needs `pip install 'simfl[wandb]'`."""

    project: str | None = Field(None, min_length=1, description="Project name (default: the scenario name).")
    entity: str | None = Field(None, min_length=1, description="Team or user (default: the account's default).")
    mode: Literal["offline", "online"] = Field(
        "offline", description="offline (default): write the run to disk only, upload later with `wandb sync`; "
        "online: send it as it goes (needs a login).",
    )
    dir: str | None = Field(
        None, min_length=1,
        description="Folder under which W&B writes its wandb/ folder (default: beside the output folder).",
    )


class TrackingConfig(Section):
    """Live trackers fed while each run goes (default: none); each key switches one on."""

    tensorboard: TensorBoardConfig | None = Field(None, description="Log to TensorBoard event files.")
    mlflow: MlflowConfig | None = Field(None, description="Log to MLflow.")
    wandb: WandbConfig | None = Field(None, description="Log to Weights & Biases.")


EXTRAS = {"tensorboard": ("tensorboard", "tb"), "mlflow": ("mlflow", "mlflow"), "wandb": ("wandb", "wandb")}
"""Scenario key -> (package to import, extra that installs it)."""


def check_installed(config: TrackingConfig | None) -> None:
    """Refuse, in one line, a tracker whose package is not installed (called before any run starts)."""
    if config is None:
        return
    for key, (package, extra) in EXTRAS.items():
        if getattr(config, key) is not None and importlib.util.find_spec(package) is None:
            raise InputError(f"tracking.{key}", f"needs the {package} package: pip install 'simfl[{extra}]'")


# -- backends ---------------------------------------------------------------------

Point = tuple[str, float, int]
"""One logged value: (name, value, step)."""


class Tracker(Protocol):
    """One tracker run: created with its name and parameters, then fed values and files, then finished."""

    def log(self, points: list[Point]) -> None:
        """Log values (name, value, step), in the order given."""

    def artifact(self, name: str, text: str) -> None:
        """Attach a text file to the run."""

    def finish(self, summary: Mapping[str, Any], failed: bool = False) -> None:
        """Record the run's summary row and close the run (``failed``: it ended by an error, no summary)."""


class TensorBoardBackend:
    """A ``SummaryWriter`` writing into ``<dir>/<algorithm>/seed<k>``; parameters, artifacts and summary as text."""

    def __init__(self, log_dir: Path, params: Mapping[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step=0: TensorBoard shows this run in place of any earlier one in the folder (a stopped run
        # that was resumed, or a run done again); every run logs its whole history from step 0.
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=0)
        self.writer.add_text("parameters", _table(params), 0)

    def log(self, points: list[Point]) -> None:
        for name, value, step in points:
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def artifact(self, name: str, text: str) -> None:
        self.writer.add_text(name, "```\n" + text + "\n```", 0)

    def finish(self, summary: Mapping[str, Any], failed: bool = False) -> None:
        self.writer.add_text("summary", "failed" if failed else _table(summary), 0)
        self.writer.close()


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive lock on ``<db>.lock`` beside a local SQLite store while a run opens it (POSIX only).

    MLflow creates a new store's schema on first use; two processes doing so at once fail
    (alembic finds the version row changed under it), so sweep cells serialise that step.
    """
    if not uri.startswith("sqlite:///") or fcntl is None:
        yield
        return
    lock = Path(uri.removeprefix("sqlite:///") + ".lock")
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "30", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2"}
"""MLflow's request timeout and retries unless the user set them (MLflow's own defaults wait minutes)."""


def _sqlite_problem(uri: str) -> str | None:
    """Why the file of a ``sqlite:///`` store is not an SQLite database (None when it is, or is absent)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri.removeprefix("sqlite:///"))
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if head and head != b"SQLite format 3\x00":
        return "exists and is not an SQLite database (an MLflow store)"
    return None


class MlflowBackend:
    """One MLflow run, through an ``MlflowClient`` (no global active run)."""

    BATCH = 100
    """Values and parameters per request (the limits of MLflow's REST API)."""

    def __init__(self, uri: str, artifacts: Path | None, experiment: str, name: str, params: Mapping[str, Any],
                 tags: Mapping[str, str]) -> None:
        """``artifacts``: where a new experiment keeps its runs' files (None: the tracking server decides)."""
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        problem = _sqlite_problem(uri)
        if problem is not None:
            raise InputError("tracking.mlflow.uri", f"{uri.removeprefix('sqlite:///')} {problem}: move it away, or "
                             "set tracking.mlflow.uri to another store")
        check_reachable(uri, "tracking.mlflow.uri", "start the tracking server or correct the address")
        for key, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(key, value)
        with _store_lock(uri):  # parallel sweep workers would each create the schema of a new store
            try:
                self.client = MlflowClient(tracking_uri=uri)
                found = self.client.get_experiment_by_name(experiment)
            except MlflowException as exc:  # e.g. a file: store, which MLflow 3 refuses unless told otherwise
                raise InputError("tracking.mlflow.uri", f"MLflow refuses {uri}: {exc.message.split('. ')[0]}") from None
            if found is not None:
                experiment_id = found.experiment_id
            else:
                location = None if artifacts is None else (artifacts / re.sub(r"[^\w.-]", "_", experiment)).as_uri()
                experiment_id = self.client.create_experiment(experiment, artifact_location=location)
        self.run_id: str = self.client.create_run(experiment_id, run_name=name, tags=dict(tags)).info.run_id
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), self.BATCH):
            self.client.log_batch(self.run_id, params=items[i : i + self.BATCH])

    def log(self, points: list[Point]) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics = [Metric(name, value, stamp, step) for name, value, step in points]
        for i in range(0, len(metrics), self.BATCH * 10):
            self.client.log_batch(self.run_id, metrics=metrics[i : i + self.BATCH * 10])

    def artifact(self, name: str, text: str) -> None:
        self.client.log_text(self.run_id, text, name)

    def finish(self, summary: Mapping[str, Any], failed: bool = False) -> None:
        if not failed:
            self.client.log_text(self.run_id, json.dumps(dict(summary), indent=1, default=str) + "\n", "summary.json")
        self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")


def _wandb_key() -> bool:
    """Whether a W&B API key is at hand: WANDB_API_KEY, or a login saved in ~/.netrc (``wandb login``)."""
    if os.environ.get("WANDB_API_KEY", "").strip():
        return True
    host = urllib.parse.urlsplit(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


class WandbBackend:
    """One W&B run (offline by default); evaluation and update values on their own step axes."""

    def __init__(self, config: WandbConfig, project: str, group: str, name: str, root: Path,
                 params: Mapping[str, Any]) -> None:
        import wandb

        if config.mode == "online" and not _wandb_key():
            raise InputError("tracking.wandb.mode", "online needs a W&B login: run `wandb login` or set WANDB_API_KEY, "
                             "or use mode: offline and `wandb sync` later")
        root.mkdir(parents=True, exist_ok=True)
        try:
            self.run = wandb.init(
                project=project, entity=config.entity, group=group, name=name, dir=str(root), mode=config.mode,
                config=dict(params), reinit="create_new", settings=wandb.Settings(console="off", quiet=True,
                                                                                  init_timeout=6 * CONNECT_TIMEOUT),
            )
        except wandb.errors.Error as exc:  # no network, a rejected key, an unknown entity: the user's setting
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise InputError("tracking.wandb", f"W&B refused to start the run ({detail})") from None
        self.run.define_metric("eval/virtual_time")
        self.run.define_metric("eval/*", step_metric="eval/virtual_time")
        self.run.define_metric("update/t")
        self.run.define_metric("update/*", step_metric="update/t")

    def log(self, points: list[Point]) -> None:
        rows: list[dict[str, float]] = []  # one per evaluation: its own eval/virtual_time is the axis of eval/*
        updates: dict[int, dict[str, float]] = {}
        for name, value, step in points:
            if name.startswith("update/"):
                updates.setdefault(step, {"update/t": step})[name] = value
                continue
            if not rows or name in rows[-1]:
                rows.append({})
            rows[-1][name] = value
        for row in [*rows, *updates.values()]:
            self.run.log(row)

    def artifact(self, name: str, text: str) -> None:
        import wandb

        item = wandb.Artifact(f"{self.run.name}-{Path(name).stem}", type=Path(name).stem)
        with item.new_file(name) as fh:
            fh.write(text)
        self.run.log_artifact(item)

    def finish(self, summary: Mapping[str, Any], failed: bool = False) -> None:
        self.run.summary.update({k: v for k, v in summary.items() if v is not None})
        self.run.finish(exit_code=1 if failed else 0)


# -- parameters -----------------------------------------------------------------


def flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted keys of nested mappings and lists (``data.partition.alpha``, ``train.lr``), leaves as they are."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            yield from flatten(value, f"{prefix}{key}.")
    elif isinstance(data, list) and any(isinstance(v, Mapping | list) for v in data):
        for i, value in enumerate(data):
            yield from flatten(value, f"{prefix}{i}.")
    else:
        yield prefix.rstrip("."), data


def run_params(scenario: Mapping[str, Any], algorithm_index: int, seed: int) -> dict[str, Any]:
    """The parameters of one run: the scenario (as ``scenario.dump`` gives it) with only this run's algorithm."""
    data = {k: v for k, v in scenario.items() if k not in ("algorithms", "seeds", "sweep", "tracking")}
    data["algorithm"] = scenario["algorithms"][algorithm_index]
    data["seed"] = seed
    return {k: ("null" if v is None else v) for k, v in flatten(data)}


def _table(values: Mapping[str, Any]) -> str:
    return "\n".join(f"    {k}: {v}" for k, v in values.items())


def virtual_step(virtual_time: float) -> int:
    """The integer step TensorBoard and MLflow log an evaluation at: its virtual time, rounded to the second."""
    return int(round(virtual_time))


COMPARED = ("final_accuracy", "final_accuracy_low", "final_accuracy_high", "best_accuracy", "reached",
            "time_to_target", "time_to_target_low", "time_to_target_high", "ratio", "ratio_low", "ratio_high")
"""The comparison.csv columns logged per entry (numbers; an empty interval bound is not logged)."""


def comparison_points(comparison: Comparison) -> list[Point]:
    """Each entry's numbers of a comparison as tracker values ``comparison/<entry>/<column>`` at step 0."""
    points: list[Point] = []
    for row in comparison.table.to_dict("records"):
        for column in COMPARED:
            value = float(row[column])
            if math.isfinite(value):
                points.append((f"comparison/{row['entry']}/{column}", value, 0))
    return points


# -- one run's feed ---------------------------------------------------------------


@dataclass
class RunFeed:
    """Feeds the trackers of one (algorithm, seed) run from the engine's callbacks.

    ``progress`` is the engine's per-evaluation callback, ``on_update`` its per-aggregation one.
    A resumed run's tracker run starts with the whole history so far: ``history`` counts the events
    already in the state when the run resumes; they are logged without an in-flight count (it was
    not kept).
    """

    backends: list[Tracker]
    prior_wall: float = 0.0
    history: int = 0
    seen_events: int = 0
    seen_metrics: int = 0
    started: float = field(default_factory=time.perf_counter)
    pending: list[Point] = field(default_factory=list)

    def on_update(self, state: SimState) -> None:
        """After an aggregation: staleness, in-flight count and mixing weight of the new arrivals."""
        self._events(state, state.in_flight())

    def progress(self, state: SimState) -> None:
        """After an evaluation: its scores, then everything buffered since the last one, sent."""
        self._events(state, None)
        wall = self.prior_wall + time.perf_counter() - self.started
        for index in range(self.seen_metrics, len(state.metrics)):
            metric = state.metrics[index]
            values = {"accuracy": metric.accuracy, "loss": metric.loss, **metric.extra,
                      "virtual_time": metric.virtual_time, "updates": float(metric.updates), "wall_seconds": wall}
            step = virtual_step(metric.virtual_time)
            self.pending.extend((f"eval/{k}", float(v), step) for k, v in values.items())
        self.seen_metrics = len(state.metrics)
        self.flush()

    def _events(self, state: SimState, in_flight: int | None) -> None:
        events = state.events
        for index in range(self.seen_events, len(events)):
            event = events[index]
            if event.event != "arrival" or event.update is None:
                continue
            step = event.update
            if event.staleness is not None:
                self.pending.append(("update/staleness", float(event.staleness), step))
            if in_flight is not None and index >= self.history:
                self.pending.append(("update/in_flight", float(in_flight), step))
            if event.weight is not None and math.isfinite(event.weight):
                self.pending.append(("update/weight", float(event.weight), step))
        self.seen_events = len(events)

    def flush(self) -> None:
        """Send the buffered values to every tracker."""
        if self.pending:
            points, self.pending = self.pending, []
            for backend in self.backends:
                backend.log(points)

    def finish(self, summary: Mapping[str, Any], failed: bool = False) -> None:
        """Send what is buffered and close every tracker run, with the run's summary row."""
        self.flush()
        for backend in self.backends:
            backend.finish(summary, failed)


class Tracking:
    """The trackers of one scenario run: opens one :class:`RunFeed` per (algorithm, seed)."""

    def __init__(self, config: TrackingConfig, scenario_name: str, scenario_yaml: str, out: Path) -> None:
        """``scenario_yaml``: the scenario as ``scenario.dump`` gives it (the artifact; the parameters are read from it)."""
        check_installed(config)
        self.config = config
        self.scenario_name = scenario_name
        self.scenario_yaml = scenario_yaml
        self.scenario: Mapping[str, Any] = yaml.safe_load(scenario_yaml)
        self.out = out

    def paths(self) -> dict[str, str]:
        """Where each switched-on tracker writes (defaults beside the output folder)."""
        beside = self.out.absolute().parent
        paths: dict[str, str] = {}
        if self.config.tensorboard is not None:
            given = self.config.tensorboard.dir
            paths["tensorboard"] = str(Path(given).absolute() if given else beside / "tensorboard" / self.out.name)
        if self.config.mlflow is not None:
            paths["mlflow"] = self.config.mlflow.uri or f"sqlite:///{beside / 'mlflow.db'}"
            if self.config.mlflow.uri is None:
                paths["mlflow artifacts"] = str(beside / "mlartifacts")
        if self.config.wandb is not None:
            given = self.config.wandb.dir
            paths["wandb"] = str(Path(given).absolute() if given else beside)
        return paths

    def open(self, algorithm: str, algorithm_index: int, seed: int, prior_wall: float = 0.0,
             history: int = 0) -> RunFeed:
        """Start the tracker runs of one (algorithm, seed) and log its parameters and scenario.

        A resumed run passes the wall seconds and the number of events it had before (:class:`RunFeed`).
        """
        backends = self._backends(f"{algorithm}-seed{seed}", Path(algorithm) / f"seed{seed}",
                                  run_params(self.scenario, algorithm_index, seed),
                                  {"simfl.algorithm": algorithm, "simfl.seed": str(seed)})
        return RunFeed(backends, prior_wall, history)

    def log_comparison(self, comparison: Comparison, files: Mapping[str, str]) -> None:
        """Log a complete folder's comparison as one more tracker run, ``comparison`` (``files``: comparison.md and
        comparison.csv by name, attached as artifacts)."""
        params = {"target": comparison.target, "target_rule": comparison.target_rule, "baseline": comparison.baseline,
                  "horizon": comparison.horizon, "seeds": comparison.seeds}
        backends = self._backends("comparison", Path("comparison"), params, {"simfl.comparison": "true"})
        for backend in backends:
            backend.log(comparison_points(comparison))
            for name, text in files.items():
                backend.artifact(name, text)
            backend.finish({"verdict": comparison.verdict, "fastest": comparison.fastest,
                            "most_accurate": comparison.most_accurate})

    def _backends(self, name: str, folder: Path, params: Mapping[str, Any], tags: Mapping[str, str]) -> list[Tracker]:
        """Open one tracker run called ``name`` (TensorBoard: in ``folder`` under its directory) in every tracker,
        with its parameters and the scenario."""
        paths = self.paths()
        backends: list[Tracker] = []
        if "tensorboard" in paths:
            backends.append(TensorBoardBackend(Path(paths["tensorboard"]) / folder, params))
        if self.config.mlflow is not None:
            artifacts = paths.get("mlflow artifacts")
            backends.append(MlflowBackend(paths["mlflow"], None if artifacts is None else Path(artifacts),
                                          self.config.mlflow.experiment or self.scenario_name, name,
                                          params, {**tags, "simfl.output": str(self.out.absolute())}))
        if self.config.wandb is not None:
            backends.append(WandbBackend(self.config.wandb, self.config.wandb.project or self.scenario_name,
                                         self.scenario_name, name, Path(paths["wandb"]), params))
        for backend in backends:
            backend.artifact("scenario.yaml", self.scenario_yaml)
        return backends

