"""The scenario schema, YAML loading and ``--set a.b=c`` overrides.

A scenario names a dataset and partition, a model, local training, a delay
model, the algorithms to compare, the seeds, the budget and the evaluation
grid. Each section's parameters are validated by the component it selects
(the ``Config`` of the chosen dataset, model, delay model, algorithm), with
unknown keys rejected everywhere. Every mistake becomes an
:class:`simfl.errors.InputError` whose text names the YAML path, e.g.
``algorithms[1].beta: must be in (0, 1), got 1.5``.
"""

from __future__ import annotations

import copy
import functools
import itertools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

import yaml
from pydantic import BaseModel, Field, ValidationError, ValidationInfo, create_model, field_validator, model_validator

from simfl import yamlsafe
from simfl.algorithms.configs import run_name
from simfl.errors import InputError
from simfl.fields import PATH_KEYS, NonNegFloat, NonNegInt, PositiveFloat, PositiveInt, Section
from simfl.latency.availability import Availability, AvailabilityConfig
from simfl.latency.base import unknown_flops
from simfl.latency.stragglers import StragglersConfig
from simfl.outdir import name_problem
from simfl.output.sequential import Looks
from simfl.output.target import TargetConfig, target_config
from simfl.output.tracking import TrackingConfig
from simfl.schema import plugins, tuning
from simfl.schema.tuning import TuneConfig
from simfl.sim.configs import NetworkConfig, Selection
from simfl.train.configs import CLIENT_APP_HOOKS, ClientConfig, ExecutorConfig, TrainConfig
from simfl.yamlsafe import short_value as short_value  # re-exported: sweeps and messages show values with it


def _union(configs: Iterable[type[BaseModel]], key: str) -> Any:
    """A discriminated union of component configs on ``key`` (a single config stays itself)."""
    types = tuple(configs)
    if len(types) == 1:
        return types[0]
    return Annotated[Union[types], Field(discriminator=key)]  # noqa: UP007 - runtime tuple of types


_BUILTIN_CONFIGS: dict[str, tuple[tuple[type[BaseModel], ...], str]] = {
    field: (tuple(plugins.KINDS[kind].configs().values()), plugins.KINDS[kind].discriminator)
    for field, kind in (("algorithms", "algorithm"), ("data", "dataset"), ("model", "model"), ("latency", "latency"))
}
"""The built-in configs of each component field and their discriminator."""

if TYPE_CHECKING:  # the unions are built from the registries at import time
    AlgorithmConfig: TypeAlias = Any
    DataConfig: TypeAlias = Any
    ModelConfig: TypeAlias = Any
    LatencyConfig: TypeAlias = Any
else:
    AlgorithmConfig, DataConfig, ModelConfig, LatencyConfig = (
        _union(*_BUILTIN_CONFIGS[field]) for field in ("algorithms", "data", "model", "latency"))


def schema_for(raw: Mapping[str, Any], where: str = "scenario") -> type[Scenario]:
    """The model that validates ``raw``: :class:`Scenario`, or where ``raw`` names plugins
    (:mod:`simfl.schema.plugins`), a subclass whose unions also hold those plugins' configs."""
    found = plugins.scenario_plugins(raw, where)
    if not found:
        return Scenario
    return _with_plugins(tuple(sorted(found.items())))


@functools.cache
def _with_plugins(extra: tuple[tuple[str, tuple[type[BaseModel], ...]], ...]) -> type[Scenario]:
    """``Scenario`` with plugin configs added to the unions of the given fields (built once per set)."""
    fields: dict[str, Any] = {}
    for field, configs in extra:
        builtin, key = _BUILTIN_CONFIGS[field]
        union = _union((*builtin, *configs), key)
        info = copy.copy(Scenario.model_fields[field])
        fields[field] = (list[union] if field == "algorithms" else union, info)  # type: ignore[valid-type]
    model: type[Scenario] = create_model("Scenario", __base__=Scenario, __module__=__name__, **fields)
    return model


class BudgetConfig(Section):
    """When each run stops (whichever comes first)."""

    time: PositiveFloat | None = Field(None, description="Virtual-time budget in seconds.")
    updates: PositiveInt | None = Field(None, description="Number of processed client updates.")

    @model_validator(mode="after")
    def _one_needed(self) -> BudgetConfig:
        if self.time is None and self.updates is None:
            raise ValueError("set at least one of time, updates")
        return self


class EvalConfig(Section):
    """When the global model is evaluated on the test set."""

    every: PositiveFloat = Field(description="Evaluation period in virtual seconds (a fixed grid from 0).")
    target: float | TargetConfig | None = Field(
        None, description="Target accuracy of time to target (comparison.csv, summary.csv): an accuracy (0.8 or "
        "{accuracy: 0.8}), or a fraction of a mean final accuracy, {relative: 0.9, of: lowest|baseline} (default: "
        "95% of the lowest mean final accuracy among the entries, the paper's rule)."
    )
    baseline: str | None = Field(
        None, min_length=1, description="The entry (its label, else its algorithm name) whose time to target the "
        "others are divided by (default: the first synchronous entry, else the first entry)."
    )
    after_each_update: bool = Field(
        False, description="Also evaluate after every aggregation (each async update, each sync round), as the "
        "authors' released code does; metrics.csv then has one more row per aggregation."
    )

    @field_validator("target", mode="before")
    @classmethod
    def _target(cls, value: Any) -> Any:
        return target_config(value)


SWEEP_KEY = re.compile(r"^[A-Za-z_]\w*(\[\d+\])*(\.[A-Za-z_]\w*(\[\d+\])*)*$")
"""A dotted scenario path as ``--set`` takes it: ``latency``, ``data.partition.alpha``, ``algorithms[0].beta``."""

_NOT_SWEPT = ("name", "seeds", "sweep")


class RecordConfig(Section):
    """Optional extra recordings of each run (off by default; they cost memory and disk)."""

    layer: str = Field(
        description="Name of one exchanged tensor of the model (e.g. '9.weight' for LeNet5's last hidden layer). "
        "After every aggregation the change of the global value of this tensor is kept and written to "
        "<algorithm>/seed<k>/layer_changes.npy, one row per aggregation.",
        min_length=1,
    )


class RoundsConfig(Section):
    """How synchronous rounds end (FedAvg, FedProx, FedAdam), as deployed systems run them."""

    deadline: PositiveFloat | None = Field(
        None, description="Virtual seconds after which a round closes with the updates it has (null: no deadline)."
    )
    over_select: NonNegFloat = Field(
        0.0, le=10.0, description="Select ceil(K * (1 + over_select)) clients; the round closes once K delivered. "
        "Later updates are discarded and logged as 'late' in events.csv."
    )


class ServerConfig(Section):
    """Cross-device serving: a population of clients, at most ``concurrency`` of them training at once.

    FedBuff's protocol (Nguyen et al., AISTATS 2022): at time 0 the server samples C clients
    from those idle and present; after each aggregation it samples one more (a failed or
    lost round's slot too), so at most C train at once. Synchronous rounds draw their
    clients the same way, at most C at a time. Without this section every client is
    always in flight (asynchronous) or sampled uniformly per round (synchronous).
    """

    concurrency: PositiveInt = Field(description="C: the most clients training at once.")
    selection: Selection = Field(
        "uniform", description="How the next client is drawn from the idle, present ones: 'uniform', or "
        "'by_data' (probability proportional to its number of training samples among the idle, present clients, "
        "at each draw). Clients in flight are not drawn, and a large client is in flight more often, so over a "
        "run by_data dispatches the largest clients less often per sample than their share of the samples: "
        "the largest tenth of 1,000 fleet clients at concurrency 50 got 11.7% fewer arrivals than proportional "
        "(python -m benchmarks.selection). An algorithm that selects its clients itself (pisces) replaces this draw."
    )


class ClientStateConfig(Section):
    """Where per-client vectors live: OrthoFL's anchors and, under ``server:``, each client's kept model;
    CA2FL's cached deltas; SCAFFOLD's control variates (:mod:`simfl.algorithms.store`). Either store gives
    the same results, float32 exactly; the disk store holds them in a memory-mapped scratch file, so they
    need not fit in memory."""

    store: Literal["auto", "ram", "disk"] = Field(
        "auto", description="'ram', 'disk' (a memory-mapped file, in the page cache rather than the run's "
        "private memory), or 'auto': disk when the vectors, one row per client, would take more than a quarter "
        "of the machine's RAM (simfl validate shows the choice)."
    )
    dir: str | None = Field(
        None, description="Folder of the disk store's scratch file on the machine that runs the simulation "
        "(relative to the scenario file; default: the system's temporary folder). The file has no name and is "
        "gone when the run ends."
    )

    def check_dir(self) -> None:
        """The disk store's folder is one on this machine (``simfl validate`` and every run storing on disk check it)."""
        if self.dir is not None and not os.path.isdir(self.dir):
            raise InputError("client_state.dir", f"{self.dir} is not a folder on this machine; give an existing folder "
                             "or leave it out (the system's temporary folder)")


MOST_SEEDS = 1000
"""The most seeds a plan of sequential seeds may run."""

SEED_FORMS = "seeds takes a list, or a plan {first: 3, most: 10, until: settled} with optional step, width and start"


class SeedPlan(Section):
    """Sequential seeds: batches of seeds until each entry's time ratio to the baseline is settled, or the most.

    ``simfl run`` runs the first batch, compares the entries (``output.comparison``) and asks
    :mod:`simfl.output.sequential` whether every entry's comparison with the baseline is settled; while one is not,
    every entry runs the next batch. The looks are planned (at first, first + step, ..., most seeds) and the time
    ratio's intervals are adjusted for them, so the error rate stays 5% (docs/sequential-seeds.md)."""

    first: int = Field(ge=3, le=MOST_SEEDS, description="Seeds of the first batch (at least 3: a t interval from 2 "
                       "degrees of freedom).")
    most: int = Field(ge=3, le=MOST_SEEDS, description=f"The most seeds any entry runs (at most {MOST_SEEDS}).")
    step: PositiveInt | None = Field(None, description="Seeds of each later batch (default: first).")
    until: Literal["settled"] = Field(
        "settled", description="When to stop adding seeds: settled, once every entry's time ratio to the baseline "
        "has an interval that excludes 1x or, with width, is narrower than +-width; else at most.")
    width: float | None = Field(
        None, gt=0, lt=1, description="Also settled when the ratio's interval lies within ratio/(1 + width) and "
        "ratio*(1 + width) (0.1: +-10%); default: only an interval that excludes 1x settles.")
    start: NonNegInt = Field(0, description="The first seed; the seeds are start, start + 1, ... (in batches).")

    @model_validator(mode="after")
    def _most_covers_first(self) -> SeedPlan:
        if self.most < self.first:
            raise ValueError(f"most ({self.most}) must be at least first ({self.first})")
        return self

    def looks(self) -> Looks:
        """The planned looks, as :mod:`simfl.output.sequential` takes them."""
        return Looks(self.first, self.most, self.step or self.first, self.width)

    def seeds(self, n: int) -> list[int]:
        """The first ``n`` seeds of the plan."""
        return list(range(self.start, self.start + n))


class Scenario(Section):
    """A whole experiment: every listed algorithm run for every seed on the same data and delays."""

    name: str = Field(description="Scenario name (default output folder runs/<name>).", min_length=1)
    if TYPE_CHECKING:  # once validated, always the list of seeds (a plan's: those of the batches so far)
        seeds: list[NonNegInt] = Field(default_factory=lambda: [0])
    else:
        seeds: list[NonNegInt] | SeedPlan = Field(
            default_factory=lambda: [0], description="Seeds; each gives one run per algorithm. Or a plan of sequential "
            "seeds, {first: 3, most: 10, until: settled}: seeds in batches until every entry's comparison with the "
            "baseline is settled, or the most (simfl run, and simfl sweep for each grid point; not simfl tune; the "
            "scenario's seeds are then its first batch).")
    data: DataConfig = Field(description="Dataset and how it is split over clients.")
    model: ModelConfig = Field(description="Model architecture.")
    train: TrainConfig = Field(default_factory=TrainConfig, description="Local training on each client.")
    latency: LatencyConfig = Field(description="Client round-latency model.")
    budget: BudgetConfig = Field(description="When each run stops.")
    eval: EvalConfig = Field(description="Evaluation grid.")
    algorithms: list[AlgorithmConfig] = Field(description="Algorithms to compare.", min_length=1)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig, description="Where local training runs.")
    client: ClientConfig | None = Field(
        None, description="Who trains a client (default: simfl's local SGD as `train:` says): e.g. a Flower "
        "ClientApp, {flower_app: package.module:app}."
    )
    server_time: NonNegFloat = Field(0.0, description="Virtual seconds the server spends per aggregation.")
    rounds: RoundsConfig | None = Field(
        None, description="Round deadline and over-selection of synchronous algorithms (default: wait for all K)."
    )
    server: ServerConfig | None = Field(
        None, description="Cross-device serving: at most `concurrency` clients in flight, each new one sampled "
        "from the idle, present clients (default: all clients always in flight, or per-round sampling)."
    )
    client_state: ClientStateConfig | None = Field(
        None, description="Where per-client vectors live (default: store 'auto'). Changes no result."
    )
    availability: AvailabilityConfig | None = Field(
        None, description="Client failures per round and scheduled departures/returns (default: always available)."
    )
    stragglers: StragglersConfig | None = Field(
        None, description="A share of slow clients over any latency model: {share: 0.2, slowdown: 10} makes a fifth "
        "of the clients (drawn per seed) ten times slower in every round; {clients: [0, 3], slowdown: 10} names them "
        "(default: every client as the latency model draws it)."
    )
    network: NetworkConfig | None = Field(
        None, description="A round as download, compute and upload: the compute lasts the latency model's draw, "
        "each transfer moves the model's exchanged bytes over the client's link and the server's, shared by the "
        "transfers in progress (docs/contention.md). Default: a round is the latency model's one draw."
    )
    record: RecordConfig | None = Field(None, description="Extra per-run recordings (default: none).")
    tracking: TrackingConfig | None = Field(
        None, description="Live trackers (TensorBoard, MLflow, W&B) fed while each run goes (default: none). "
        "They write beside the output folder, never into it, and change no result file."
    )
    sweep: dict[str, list[Any]] | None = Field(
        None,
        description="A grid for `simfl sweep`: dotted keys (as for --set) to lists of values; a value may be a "
        "mapping that replaces a whole section. Every combination is run for every seed. `simfl run` ignores "
        "this key and runs the scenario as written.",
    )

    tune: TuneConfig | None = Field(
        None,
        description="What `simfl tune` searches for each entry, with the same number of trials and the same budget "
        "for every entry, scored on a validation split of the clients' training data. `simfl run` and `simfl sweep` "
        "ignore this key.",
    )

    @field_validator("tune")
    @classmethod
    def _tune_fits_the_entries(cls, tune: TuneConfig | None, info: ValidationInfo) -> TuneConfig | None:
        algorithms = info.data.get("algorithms")
        if tune is None or algorithms is None:
            return tune
        if isinstance(info.data.get("seeds"), SeedPlan):
            raise ValueError("simfl tune needs a list of seeds; a plan {first: ..., most: ...} is for simfl run and "
                             "simfl sweep")
        try:
            spaces = tuning.entry_spaces(tune, algorithms)
        except ValueError as exc:  # entries replaced (--set algorithms=...) leave a search of entries no longer there
            raise ValueError(f"{exc}; the tune: section must fit the entries even for simfl run, which ignores it: "
                             "fix it, or drop it with --set tune=null") from None
        if tune.sampler == "grid" and not all(s.grid for entry in spaces for s in entry.values()):
            raise ValueError("sampler grid needs every key's values as a list; ranges need tpe or random")
        return tune

    @field_validator("sweep")
    @classmethod
    def _sweep_keys(cls, sweep: dict[str, list[Any]] | None) -> dict[str, list[Any]] | None:
        if sweep is None:
            return None
        if not sweep:
            raise ValueError("needs at least one key (or leave sweep out)")
        for key, values in sweep.items():
            if not SWEEP_KEY.match(key):
                raise ValueError(f"key '{key}' is not a dotted path such as data.partition.alpha or algorithms[0].beta")
            if key.split(".")[0].split("[")[0] in _NOT_SWEPT:
                raise ValueError(f"key '{key}': {', '.join(_NOT_SWEPT)} cannot be swept (seeds are always crossed)")
            if not values:
                raise ValueError(f"key '{key}' needs at least one value")
        return sweep

    @model_validator(mode="after")
    def _tokenizer_matches_encoder(self) -> Scenario:
        tokenizer = getattr(self.data, "tokenizer", None)
        encoder = getattr(self.model, "encoder", None)
        if tokenizer is not None and encoder is not None and tokenizer != encoder:
            raise ValueError(
                f"data.tokenizer ({tokenizer!r}) must name the same encoder as model.encoder ({encoder!r})"
            )
        return self

    @model_validator(mode="after")
    def _clients_chosen_by_the_algorithm(self) -> Scenario:
        for i, algo in enumerate(self.algorithms):
            if not algo.chooses_clients:
                continue
            if self.server is not None:
                raise ValueError(f"algorithms[{i}] ({algo.name}) picks its own clients each round, so it cannot run "
                                 "under server (cross-device serving); leave server out")
            if self.rounds is not None and self.rounds.over_select > 0:
                raise ValueError(f"algorithms[{i}] ({algo.name}) picks its own clients each round; "
                                 "rounds.over_select does not apply (a deadline does)")
        if self.client is not None and self.client.flower_app is not None:
            for i, algo in enumerate(self.algorithms):
                hooks = sorted(algo.hooks_sent() - CLIENT_APP_HOOKS)
                if hooks:
                    raise ValueError(f"algorithms[{i}]: {algo.name} changes simfl's own local training (its hook "
                                     f"{', '.join(hooks)}), which a Flower ClientApp (client.flower_app) replaces: "
                                     "the app's own code trains")
        return self

    @model_validator(mode="after")
    def _the_apps_own_data_and_model(self) -> Scenario:
        """The Flower app's data and model (what ``simfl flwr run`` writes without data: or model:) are trained only
        by its ClientApp: simfl's own training has no data or network to run there."""
        app = self.client is not None and self.client.flower_app is not None
        for key, name in (("data.dataset", self.data.dataset), ("model.name", self.model.name)):
            if name == "flower_app" and not app and self.executor.trains:
                raise ValueError(f"{key} flower_app is a Flower app's own; it needs the app's ClientApp "
                                 "(client.flower_app) to train, or executor: {kind: none}")
        return self

    @model_validator(mode="after")
    def _an_update_budget_it_can_reach(self) -> Scenario:
        """Every round failing (``availability.p`` 1) counts no update, so a run with only an update budget would go
        on for ever in virtual time."""
        if self.availability is not None and self.availability.p >= 1.0 and self.budget.time is None:
            raise ValueError("availability.p 1.0 fails every round, so budget.updates is never reached; "
                             "set budget.time")
        return self

    @model_validator(mode="after")
    def _a_time_budget_where_updates_do_not_stop(self) -> Scenario:
        """An entry that budget.updates does not stop (a ServerApp's ``budget_updates: false``) ends at its own end or
        at budget.time: without one, a run that never ends its main would have no end."""
        for i, algo in enumerate(self.algorithms):
            if not algo.stopped_by_updates() and self.budget.time is None:
                raise ValueError(f"algorithms[{i}] ({algo.name}) has budget_updates: false, so budget.updates does not "
                                 "stop its runs; set budget.time too")
        return self

    @field_validator("name")
    @classmethod
    def _name_is_one_folder_name(cls, name: str) -> str:
        problem = name_problem(name)
        if problem is not None:
            raise ValueError(problem)
        return name

    _seed_plan: SeedPlan | None = None  # a private attribute (the leading underscore): not a key of the scenario

    @property
    def seed_plan(self) -> SeedPlan | None:
        """The plan of sequential seeds (``seeds: {first: ...}``), None for a list of seeds."""
        return self._seed_plan

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds_planned(cls, seeds: Any) -> Any:
        """A mapping is a plan: its first error is one line naming its key and the forms seeds takes."""
        if not isinstance(seeds, Mapping):
            return seeds
        try:
            return SeedPlan.model_validate(seeds)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = "".join(f"{part}: " for part in first["loc"])  # a check of the whole plan names its key itself
            raise ValueError(f"{key}{_message(first)}; {SEED_FORMS}") from None

    @model_validator(mode="after")
    def _plan_runs_its_first_batch(self) -> Scenario:
        """A plan's scenario holds the plan apart and, as its seeds, the first batch (what every reader of seeds sees)."""
        seeds: Any = self.seeds
        if isinstance(seeds, SeedPlan):
            self._seed_plan = seeds
            self.__dict__["seeds"] = seeds.seeds(seeds.first)  # not an assignment: no second validation
        return self

    def look_at(self, n: int) -> None:
        """Run the first ``n`` seeds of the plan (the runner's next batch); a scenario without a plan refuses."""
        plan = self._seed_plan
        if plan is None or not plan.first <= n <= plan.most:
            raise ValueError(f"no look at {n} seeds in the plan {plan}")
        self.__dict__["seeds"] = plan.seeds(n)

    @field_validator("seeds")
    @classmethod
    def _seeds_unique(cls, seeds: Any) -> Any:
        if isinstance(seeds, SeedPlan):
            return seeds
        if not seeds:
            raise ValueError("needs at least one seed")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {seeds}")
        return seeds

    @field_validator("algorithms")
    @classmethod
    def _names_unique(cls, algos: list[Any]) -> list[Any]:
        names = [run_name(a) for a in algos]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise ValueError(
                    f"'{n}' names two entries; give each entry of one algorithm a distinct label "
                    f"(e.g. label: {n}_2)"
                )
        return algos

    def stated_clients(self) -> int | None:
        """The number of clients where the scenario states it before the data is split (the partition's ``clients``
        or its ``counts`` rows); None where the data decides (by subject, by column, an index file)."""
        part = self.data.partition
        clients = getattr(part, "clients", None)
        counts = getattr(part, "counts", None)
        return int(clients) if clients is not None else len(counts) if counts else None

    def checkpointable(self, index: int) -> bool:
        """Whether the runs of entry ``index`` can be checkpointed: its algorithm's state is data (its config's
        ``checkpointable``) and the scenario records nothing outside the simulation's data (no ``record:``)."""
        return self.record is None and bool(type(self.algorithms[index]).checkpointable)

    @model_validator(mode="after")
    def _baseline_is_an_entry(self) -> Scenario:
        names = [run_name(a) for a in self.algorithms]
        if self.eval.baseline is not None and self.eval.baseline not in names:
            raise ValueError(f"eval.baseline {self.eval.baseline!r} names no entry; the entries are {', '.join(names)}")
        return self

    def absences(self, num_clients: int, seed: int) -> list[Sequence[tuple[float, float | None]]]:
        """Per client, the absences a run of ``seed`` follows: its departures and its latency model's trace (the
        same :class:`~simfl.latency.availability.Availability` the run builds)."""
        latency = plugins.lookup("latency", self.latency.model)
        trace = latency.absences_of(self.latency, num_clients)
        return list(Availability(self.availability, num_clients, seed, trace, latency.absence_source(self.latency))
                    .absences)

    def check_clients(self, num_clients: int) -> None:
        """Checks that need the number of clients (known once the partition is made; ``simfl validate`` makes them
        where the scenario states it, :meth:`stated_clients`), the same for validation and every run: what a run
        refuses here, validate refuses with the same line."""
        latency = plugins.lookup("latency", self.latency.model)
        latency.check(self.latency, num_clients)
        use = None if getattr(type(self.model), "flops_known", True) else latency.flops_use(self.latency)
        if use is not None:
            raise unknown_flops(use)
        if self.stragglers is not None:
            self.stragglers.check(num_clients)
        if self.network is not None and self.network.fleet() and not hasattr(latency, "read"):
            raise InputError("network", f"bandwidth 'fleet' reads a fleet trace's bandwidth column, but latency.model "
                             f"{self.latency.model} has no fleet trace: give a number of bytes/s or {{mean, std}}")
        if self.availability is not None:
            trace = latency.absences_of(self.latency, num_clients) if self.availability.departures else None
            Availability.check(self.availability, num_clients, trace, latency.absence_source(self.latency))
        server = self.server
        if server is not None and server.concurrency > num_clients:
            raise InputError("server.concurrency", f"must be at most the {num_clients} clients, got {server.concurrency}")
        client_app = self.client is not None and self.client.flower_app is not None
        for i, algo in enumerate(self.algorithms):
            algo.check_federation(num_clients, client_app, f"algorithms[{i}]")
            k = getattr(algo, "clients_per_round", None)
            if k is not None and k > num_clients:
                raise InputError(
                    f"algorithms[{i}].clients_per_round", f"must be at most the {num_clients} clients, got {k}"
                )
            if k is not None and server is not None and k > server.concurrency:
                raise InputError(f"algorithms[{i}].clients_per_round",
                                 f"must be at most server.concurrency ({server.concurrency}), got {k}")


# -- loading -----------------------------------------------------------------


def load(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read, override and validate a scenario file; relative paths in it are made relative to the file.

    A ``sweep:`` block is checked too: every cell of its grid must give a valid scenario.
    """
    path = Path(path)
    raw = read_yaml(path)
    for text in overrides:
        apply_override(raw, text)
    scenario = validate(raw, where=str(path))
    sweep_cells(raw, where=str(path))
    return resolve_paths(scenario, path.parent)


def _path_settings(scenario: Scenario) -> Iterable[tuple[Any, str]]:
    """``(section, attribute)`` of every setting of :data:`~simfl.fields.PATH_KEYS` the scenario gives."""
    for key in PATH_KEYS:
        *parents, attr = key.split(".")
        section: Any = scenario
        for part in parents:
            section = getattr(section, part, None)
        if isinstance(getattr(section, attr, None), str | Path):
            yield section, attr


def resolve_paths(scenario: Scenario, base: Path) -> Scenario:
    """Make the scenario's relative data paths (and tracking folders) relative to ``base`` (the scenario file's folder)."""
    for section, attr in _path_settings(scenario):
        value = getattr(section, attr)
        if not Path(value).is_absolute():
            resolved = (base / value).resolve()
            setattr(section, attr, resolved if isinstance(value, Path) else str(resolved))
    return scenario


def relative_path(value: str, folder: Path) -> str:
    """``value`` (an absolute path) relative to ``folder``, where one folder below the top level of the file
    system holds both (a checkout, a home folder: ``/work/repo/...``), else as it is: a path from one top-level
    folder to another (``/tmp/...`` to ``/home/...``) would be neither shorter nor more portable."""
    path, folder = Path(value), folder.resolve()
    if not path.is_absolute() or len(Path(os.path.commonpath([path, folder])).parts) < 3:
        return value
    return os.path.relpath(path, folder)


def sweep_cells(raw: Mapping[str, Any], where: str = "scenario") -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every point of the raw scenario's sweep grid as ``(values by key, raw scenario of the cell)``.

    The cells are in grid order (the last key varies fastest) and carry no ``sweep`` key.
    The first cell that does not validate raises one InputError naming the cell.
    """
    sweep = raw.get("sweep")
    if not sweep:
        return []
    from simfl.schema.limits import check_cells

    check_cells(sweep if isinstance(sweep, dict) else None, where)
    keys = list(sweep)
    cells: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for combo in itertools.product(*(sweep[k] for k in keys)):
        values = dict(zip(keys, combo, strict=True))
        cell = {k: copy.deepcopy(v) for k, v in raw.items() if k != "sweep"}
        label = ", ".join(f"{k}={short_value(v)}" for k, v in values.items())
        for key, value in values.items():
            set_path(cell, key, copy.deepcopy(value), where=f"sweep cell [{label}]")
        validate(cell, where=f"{where}: sweep cell [{label}]")
        cells.append((values, cell))
    return cells


def parse_path(key: str) -> list[str]:
    """The parts of a dotted path: ``algorithms[0].beta`` -> ``["algorithms", "0", "beta"]`` (the one parser of
    ``--set`` keys, sweep keys and their labels); an empty part means a malformed key."""
    return key.strip().replace("[", ".").replace("]", "").split(".")


def set_path(raw: dict[str, Any], key: str, value: Any, where: str, create: bool = False) -> None:
    """Set ``key`` (``a.b``, ``algorithms[0].beta``) in ``raw`` to ``value``: the one dotted-path setter.

    ``create``: missing sections are created (``--set``); otherwise every parent must exist
    (sweep keys). Errors are one-line InputErrors at ``where`` naming the part that does not fit.
    """
    parts = parse_path(key)
    if any(not p for p in parts):
        raise InputError(where, f"malformed key '{key}'")
    node: Any = raw
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        here = ".".join(parts[:depth]) or "the scenario"
        if isinstance(node, list):
            if not part.isdigit():
                raise InputError(where, f"{here} is a list: use an index, got '{part}'")
            if int(part) >= len(node):
                raise InputError(where, f"index {part} out of range: {here} has {len(node)} entries")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            elif part in node:
                node = node[part]
            elif create:
                node = node.setdefault(part, {})
            else:
                raise InputError(where, f"{key}: the scenario has no '{'.'.join(parts[: depth + 1])}' to set a value in")
        else:
            raise InputError(where, f"{here} is a value ({node!r}), not a section")


def read_yaml(path: Path) -> dict[str, Any]:
    """The top-level mapping of a YAML file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read: {exc}") from None
    data = yamlsafe.load_file(text, str(path))
    if not isinstance(data, dict):
        raise InputError(str(path), f"must hold a mapping of scenario keys, got {type(data).__name__}")
    return data


def validate(raw: Mapping[str, Any], where: str = "scenario") -> Scenario:
    """Validate a raw mapping; the first error becomes an InputError naming its YAML path.

    Plugin entries (:mod:`simfl.schema.plugins`) are resolved first: one that does not import or is
    not a valid component is an InputError naming the key of its name.
    """
    raw = plugins.normalize(raw)
    try:
        return schema_for(raw, where).model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        path = _yaml_path(raw, first["loc"])
        message = _message(first)
        if first["type"] == "union_tag_invalid":  # pydantic stops at the section; name the key itself
            field = re.sub(r"\[\d+\]$", "", path)
            path += "." + str((first.get("ctx") or {}).get("discriminator", "")).strip("'")
            if field in _BUILTIN_CONFIGS:  # a component: it may also be a plugin
                installed = plugins.installed_names(field)
                message += (f", {', '.join(installed)} (installed plugins)" if installed else "") + (
                    " or an import path package.module:Class")
        raise InputError(where, f"{path}: {message}{more}") from None


def apply_override(raw: dict[str, Any], text: str) -> None:
    """Apply one ``a.b.c=value`` (or ``algorithms[0].beta=value``) override in place; value is YAML."""
    key, sep, value_text = text.partition("=")
    where = f"--set {text}"
    if not sep or not key.strip():
        raise InputError(where, "expected KEY=VALUE, e.g. train.lr=0.05")
    try:
        value = yamlsafe.load(value_text) if value_text.strip() else None
    except yamlsafe.LimitError as exc:
        raise InputError(where, f"value refused: {exc.problem}") from None
    except yaml.YAMLError:
        value = value_text
    set_path(raw, key, value, where, create=True)


# -- error messages ------------------------------------------------------------


def _yaml_path(raw: Any, loc: tuple[Any, ...]) -> str:
    """``algorithms[1].beta`` from a pydantic location, dropping union tags pydantic inserts."""
    out = ""
    node: Any = raw
    for item in loc:
        if isinstance(node, list) and isinstance(item, int):
            out += f"[{item}]"
            node = node[item] if item < len(node) else None
        elif isinstance(node, dict) and item in node:
            out += f".{item}" if out else str(item)
            node = node[item]
        elif isinstance(node, dict) and isinstance(item, str) and item in (str(v) for v in node.values()):
            continue  # a discriminator tag
        elif isinstance(node, dict):
            out += f".{item}" if out else str(item)
            node = None
        # anything below a scalar is pydantic's own bookkeeping (e.g. union member names)
    return out or "(top level)"


def _message(err: Mapping[str, Any]) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = err.get("input")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing required key"
    if kind == "union_tag_invalid":
        allowed = ", ".join(t.strip("'") for t in str(ctx.get("expected_tags", "")).split(", "))
        return f"unknown {str(ctx.get('discriminator', 'name')).strip(chr(39))} '{ctx.get('tag')}'; allowed: {allowed}"
    if kind == "literal_error":
        allowed = str(ctx.get("expected", "")).replace("'", "")
        return f"unknown {err['loc'][-1]} {got!r}; allowed: {allowed}"
    if kind == "union_tag_not_found":
        return f"missing key {ctx.get('discriminator')}"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    text = str(err["msg"]).rstrip(".")
    text = text[0].lower() + text[1:] if text else text
    shown = repr(got)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{text}, got {shown}"


def dump(scenario: Scenario, folder: Path | None = None) -> str:
    """The resolved scenario as YAML (defaults filled in; ``tracking`` only when set).

    Paths are absolute (what a unit runs with), or with ``folder``, the folder the text is written to as
    scenario.yaml, relative to it where :func:`relative_path` can: a result folder then names a fleet file or a
    data folder of the same checkout relative to itself, and moves with it. Reading it back
    (:func:`load`, as ``simfl run --resume`` does) resolves them against that folder, giving the same
    scenario; a run's staging folder and its published folder are siblings, so the text holds for both, and the
    digest ``--resume`` compares is of this text. A ``data.root`` the scenario does not set stays null: the data
    folder then comes from ``$SIMFL_DATA`` (or the default) where the run runs, which is the machine's business,
    not the scenario's, and is never written.
    """
    data = copy.deepcopy(scenario.model_dump(mode="json"))
    if folder is not None:
        for key in PATH_KEYS:
            *parents, attr = key.split(".")
            section: Any = data
            for part in parents:
                section = section.get(part) if isinstance(section, dict) else None
            if isinstance(section, dict) and isinstance(section.get(attr), str):
                section[attr] = relative_path(section[attr], folder)
    plan = scenario.seed_plan
    if plan is not None:  # the plan as written (its batches so far are the runner's, not the scenario's)
        data["seeds"] = plan.model_dump(mode="json", exclude_none=True)
    for key in ("tracking", "tune"):  # scenarios without trackers or a tune read as they always have
        if data.get(key) is None:
            data.pop(key, None)
    if isinstance(data.get("data"), dict) and data["data"].get("validation") is None:  # likewise
        data["data"].pop("validation", None)
    # each algorithm entry reads name first, its label (shared by every config) after it; an entry's own train:
    # only when set, so scenarios without one read as they always have
    data["algorithms"] = [{"name": a["name"], "label": a.get("label"),
                           **{k: v for k, v in a.items() if k not in ("name", "label", "train")},
                           **({"train": {k: v for k, v in a["train"].items() if v is not None}} if a.get("train") else {})}
                          for a in data["algorithms"]]
    return yaml.safe_dump(data, sort_keys=False)
