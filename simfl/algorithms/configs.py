"""The options of every built-in algorithm, and what the engine must know of an entry before it runs.

Light to import (no torch): validating a scenario, printing its reference and estimating a run need
these configs and nothing of the implementations, which :data:`BUILTINS` names by import path
(:mod:`simfl.registry`). An entry's facts that validation and the estimate read live on its config
too: ``client_vectors`` (model-sized vectors kept per client), ``keeps_client_models`` (under
cross-device serving a client trains again from the model its last arrival returned),
``arrival_passes`` (its server's work on the model at an arrival without training, in passes over the model's
bytes), ``chooses_clients`` (the algorithm picks each round's clients), ``selects_clients`` (an asynchronous one
picks the clients of free slots under cross-device serving), ``recalls_clients`` (an asynchronous one may cut
rounds in flight short at an epoch boundary), ``client_hooks`` (the hooks its messages ask the client's
training for), ``checkpointable`` (its runs can be checkpointed), ``holds_model`` (its own code holds the model)
and :meth:`AlgorithmConfig.check_federation` (refusals that need the number of clients). A plugin's config
derives from :class:`AlgorithmConfig` and sets them alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator

from simfl.errors import InputError, as_field_error
from simfl.fields import NonNegFloat, NonNegInt, PositiveFloat, PositiveInt, Section, UnitHalfOpen, UnitOpen
from simfl.names import is_import_path, short_name
from simfl.registry import Builtin
from simfl.train.configs import DEFAULT_TIMEOUT, EntryTrainConfig, wall_limit

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _check_label(value: str) -> str:
    if not _LABEL.match(value):
        raise ValueError(
            f"must be 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit, got {value!r}"
        )
    return value


Label = Annotated[str, AfterValidator(_check_label)]
"""A run label: it names a folder, so one safe path component."""


class AlgorithmConfig(Section):
    """Base of every algorithm's config: the optional ``label`` that names its runs, and the entry's facts."""

    client_vectors: ClassVar[int] = 0
    """How many model-sized vectors the algorithm keeps per client (its stores), for the memory estimate."""
    arrival_passes: ClassVar[float | None] = None
    """For the estimate of a run without training: the passes over the model's bytes that an arrival costs the
    server (the rule's work on the update, its stores in RAM and the engine's handling of the weights), each as long
    as one elementwise operation over the model's vector (:data:`simfl.schema.costs.PASS_SECONDS_PER_BYTE`). None:
    not stated, and the estimate says so for a model over :data:`simfl.schema.costs.ARRIVAL_BYTES_COUNTED`. The
    built-in rules' figures are read off ``python -m benchmarks.arrival_bytes`` at 10 clients (the per-byte cost
    over that of one ``a + b``, rounded; the growth with the clients is :data:`simfl.schema.costs.PASS_GROWTH`'s)."""
    train_cost: ClassVar[float] = 1.0
    """For the estimate of a run with training: a client update's training cost over plain local SGD's (its clients'
    hook's work per step: MOON's two more forward passes), read off ``python -m benchmarks.local_cost`` (LeNet5 on
    MNIST, batch 128). FedProx's, SCAFFOLD's, FedDyn's and FedAC's hooks measured within 4% of 1 there: 1."""
    chooses_clients: ClassVar[bool] = False
    """True when the algorithm's ``choose`` picks each round's clients (a Flower strategy samples its own nodes)."""
    selects_clients: ClassVar[bool] = False
    """True when an asynchronous algorithm picks, under cross-device serving (``server.concurrency``), the idle,
    present clients sent into free slots itself (``AsyncAlgorithm.select``, Pisces), in place of the
    ``server.selection`` draw."""
    checkpointable: ClassVar[bool] = True
    """False when a run of it cannot be checkpointed (its state is more than data: a ServerApp's ``main`` under
    way); such runs take no default checkpoints and refuse ``--checkpoint-every``."""
    replaces_training: ClassVar[bool] = False
    """True when the entry's clients do not run simfl's local training (``train:``): the estimate then states no
    training cost for its updates, and says so."""
    holds_model: ClassVar[bool] = False
    """True when the entry's own code holds the model (a ServerApp's ``main`` sends it): a Flower app's model
    (``model: flower_app``) is then not built as weights before the run (:func:`simfl.launch.experiment.federation`)."""
    synchronous: ClassVar[bool] = False
    """True for a synchronous rule (its implementation a ``SyncAlgorithm``): a comparison's default baseline is the
    first synchronous entry (:mod:`simfl.output.comparison`). A plugin's config gets it from its class."""
    recalls_clients: ClassVar[bool] = False
    """True when an asynchronous algorithm may cut clients' rounds in flight short after an arrival
    (``AsyncAlgorithm.recall``, PORT's urgent report at the next epoch boundary); the simulation asks it only
    then."""
    client_hooks: ClassVar[frozenset[str]] = frozenset()
    """The hook keys (:mod:`simfl.train.hooks`) its messages may carry, i.e. how it changes the clients' local
    training: a Flower ClientApp, which trains as its own code says, can take only FedProx's term (as Flower's
    ``proximal-mu``), so validation refuses the others under ``client.flower_app``
    (:data:`simfl.train.configs.CLIENT_APP_HOOKS`)."""

    label: Label | None = Field(
        None,
        description="Name of this entry's runs in folders, summary and reports (default: the algorithm name). "
        "Lets one algorithm appear several times, e.g. {name: orthofl, shift_source: chain, label: orthofl_chain}.",
    )

    train: EntryTrainConfig | None = Field(
        None, description="This entry's own local training options (lr, batch_size, momentum, weight_decay), over "
        "the scenario's train: section, e.g. {lr: 0.03} (default: the scenario's). Epochs are the scenario's.",
    )

    def hooks_sent(self) -> frozenset[str]:
        """The hook keys this entry's messages may carry, as its options set them (validation's, under a ClientApp):
        :attr:`client_hooks` unless an option turns a hook off."""
        return self.client_hooks

    def stopped_by_updates(self) -> bool:
        """Whether ``budget.updates`` ends this entry's runs (a run's budget): True unless an option says the entry runs
        to its own end or ``budget.time`` instead (a ServerApp's ``budget_updates: false``)."""
        return True

    def vectors_kept(self) -> int:
        """Model-sized vectors this entry keeps per client it reaches, as its options set them (the estimate's
        per-client state): :attr:`client_vectors` unless an option changes what the algorithm keeps."""
        return self.client_vectors

    def arrival_work(self, num_clients: int) -> float | None:
        """Passes over the model's bytes an arrival without training costs on ``num_clients`` clients (the
        estimate's): :attr:`arrival_passes` unless the work grows with the clients."""
        return self.arrival_passes

    def update_cost(self) -> float:
        """A client update's training cost over plain local SGD's, as its options set it (the estimate's):
        :attr:`train_cost` unless an option turns the hook off."""
        return self.train_cost

    @property
    def keeps_client_models(self) -> bool:
        """Under cross-device serving (scenario ``server:``): True when the weights an asynchronous
        ``on_arrival`` returns are the client's own model, which it keeps and trains from when sampled
        again (see :attr:`simfl.algorithms.base.AsyncAlgorithm.keeps_client_models`). Default: False."""
        return False

    def check_federation(self, num_clients: int, client_app: bool, where: str) -> None:
        """Refuse, in one InputError naming ``where`` (the entry's YAML path), an entry that cannot run on
        ``num_clients`` clients (trained by a Flower ClientApp when ``client_app``). ``simfl validate`` and
        every run call it before any training (``Scenario.check_clients``). Default: no such rule."""

    def round_clients(self, num_clients: int) -> int | None:
        """For the estimate: K, the clients whose updates each round of a synchronous entry waits for, on
        ``num_clients`` clients; None: asynchronous (each arrival is aggregated on its own). Default: the config's
        ``clients_per_round`` where it has one (the built-in synchronous rules), else None."""
        k = getattr(self, "clients_per_round", None)
        return k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None

    @property
    def max_rounds(self) -> int | None:
        """For the estimate: the rounds after which the entry ends its run whatever is left of the budget (None:
        the budget bounds it). Default: None."""
        return None


def run_name(config: Section) -> str:
    """What an algorithm entry's runs are called: its ``label``, else its algorithm ``name`` (for an import path
    ``package.module:Class``, the class name ``Class``)."""
    label = getattr(config, "label", None)
    if label is not None:
        return str(label)
    default = getattr(config, "default_run_name", None)  # e.g. a Flower entry: its strategy's class name
    if isinstance(default, str):
        return default
    return short_name(str(config.name))  # type: ignore[attr-defined]


StoreKind = Literal["ram", "disk"]


@dataclass(frozen=True)
class StoreSpec:
    """Where a run keeps its per-client vectors: ``ram``, or ``disk`` (a memory-mapped file in ``dir``)."""

    kind: StoreKind = "ram"
    dir: str | None = None
    """Folder of the disk store's file (None: the system's temporary folder)."""


def polynomial_staleness(staleness: int, a: float) -> float:
    """S(s) = s^(-a): the FedAsync / OrthoFL staleness discount."""
    return float(staleness) ** (-a)


def hinge_staleness(staleness: int, a: float, b: float) -> float:
    """FedAsync's hinge discount of staleness ``s >= 1``: 1 while ``s - 1 <= b``, else ``1 / (a (s - 1 - b) + 1)``.

    Xie et al. (2019) write it of ``t - tau``, which is 0 for an update with no other
    update in between (their polynomial ``(t - tau + 1)^(-a)`` gives such an update
    weight 1), i.e. ``t - tau = s - 1`` in simfl's convention.
    """
    lag = staleness - 1
    if lag <= b:
        return 1.0
    return 1.0 / (a * (lag - b) + 1.0)


BnPolicy = Literal["local", "project"]
"""Batch norm in the projection: kept by the client and left out ('local'), or like any layer ('project')."""


Granularity = Literal["tensor", "model"]
"""What a layer of the projection is: each exchanged tensor, or the whole model."""


BN_DESCRIPTION = (
    "Batch-norm tensors: 'local' keeps the client's own values and leaves them out of the "
    "projection (the global average still mixes them); 'project' treats them as ordinary layers."
)


GRANULARITY_DESCRIPTION = "What a 'layer' of the projection is: each exchanged 'tensor', or the whole 'model'."


class ConstantStaleness(Section):
    """S(s) = 1: every update is mixed at alpha."""

    kind: Literal["constant"] = Field("constant", description="Staleness function name.")

    def discount(self, staleness: int) -> float:
        """S(s)."""
        return 1.0


class PolynomialStaleness(Section):
    """S(s) = s^(-a)."""

    kind: Literal["polynomial"] = Field("polynomial", description="Staleness function name.")
    a: NonNegFloat = Field(0.5, description="Exponent a of s^(-a).")

    def discount(self, staleness: int) -> float:
        """S(s)."""
        return polynomial_staleness(staleness, self.a)


class HingeStaleness(Section):
    """S(s) = 1 while s - 1 <= b, else 1 / (a (s - 1 - b) + 1) (the paper's t - tau is s - 1)."""

    kind: Literal["hinge"] = Field("hinge", description="Staleness function name.")
    a: NonNegFloat = Field(10.0, description="Slope a of the decay once s exceeds b.")
    b: NonNegFloat = Field(4.0, description="Staleness b up to which updates are not discounted.")

    def discount(self, staleness: int) -> float:
        """S(s)."""
        return hinge_staleness(staleness, self.a, self.b)


Staleness = Annotated[
    ConstantStaleness | PolynomialStaleness | HingeStaleness, Field(discriminator="kind")
]
"""A staleness function S(s), chosen by its ``kind``."""


class FedAsyncConfig(AlgorithmConfig):
    """Parameters of FedAsync."""

    arrival_passes: ClassVar[float | None] = 9.0

    name: Literal["fedasync"] = Field("fedasync", description="Algorithm name.")
    alpha: UnitOpen = Field(0.6, description="Base mixing weight alpha in (0, 1).")
    staleness: Staleness = Field(
        default_factory=lambda: PolynomialStaleness(kind="polynomial", a=0.5),
        description="Staleness function S(s): kind constant, polynomial (a) or hinge (a, b).",
    )
    first_weight: UnitHalfOpen | None = Field(
        None,
        description="Mixing weight in (0, 1] of the very first update; null = alpha_t as for every update "
        "(paper); 1 = the OrthoFL authors' released code.",
    )


BnStats = Literal["step", "mean"]
"""The buffered rules' readings of batch-norm running statistics (:mod:`simfl.algorithms.bn_stats`)."""


def bn_stats_field() -> Any:
    """The ``bn_stats`` option of the buffered rules (:mod:`simfl.algorithms.bn_stats`)."""
    return Field("step", description="Batch-norm running statistics of the global model: take the rule's step like "
                 "every other entry (step), or at each flush the mean of those the buffer's arrivals sent (mean; a "
                 "running variance then stays above zero). See simfl/algorithms/bn_stats.py.")


class FedBuffConfig(AlgorithmConfig):
    """Parameters of FedBuff."""

    arrival_passes: ClassVar[float | None] = 7.0

    name: Literal["fedbuff"] = Field("fedbuff", description="Algorithm name.")
    buffer: PositiveInt = Field(10, description="K >= 1: arrivals aggregated per global update.")
    server_lr: PositiveFloat = Field(1.0, description="Server learning rate applied to the buffer's mean.")
    bn_stats: BnStats = bn_stats_field()


class CA2FLConfig(AlgorithmConfig):
    """Parameters of CA2FL."""

    client_vectors: ClassVar[int] = 1
    arrival_passes: ClassVar[float | None] = 5.0

    name: Literal["ca2fl"] = Field("ca2fl", description="Algorithm name.")
    buffer: PositiveInt = Field(10, description="K >= 1: arrivals aggregated per global update.")
    server_lr: PositiveFloat = Field(1.0, description="Server learning rate of the calibrated step.")
    calibrate_with: Literal["round_start", "latest"] = Field(
        "round_start",
        description="Cache subtracted from an arrival: the client's cache as of the start of the buffer round "
        "(paper's h_t^i) or its latest, updated within the round (differs when a client arrives twice in one buffer).",
    )
    bn_stats: BnStats = bn_stats_field()

    def arrival_work(self, num_clients: int) -> float | None:
        """Five passes, and at each buffer's end the mean of every client's cache taken again (``_mean`` of
        :mod:`simfl.algorithms.ca2fl`): ``num_clients / buffer`` passes more an arrival."""
        return (self.arrival_passes or 0.0) + num_clients / self.buffer


class FADASConfig(AlgorithmConfig):
    """Parameters of FADAS (Wang et al., ICML 2024): an AMSGrad server step over buffered asynchronous updates."""

    arrival_passes: ClassVar[float | None] = 6.0

    name: Literal["fadas"] = Field("fadas", description="Algorithm name.")
    buffer: PositiveInt = Field(10, description="M >= 1: client updates aggregated per global update.")
    server_lr: PositiveFloat = Field(0.01, description="eta > 0: the server learning rate of the AMSGrad step.")
    beta1: UnitOpen = Field(0.9, description="Decay beta1 in (0, 1) of the first moment m.")
    beta2: UnitOpen = Field(0.99, description="Decay beta2 in (0, 1) of the second moment v.")
    eps: PositiveFloat = Field(1e-8, description="epsilon > 0 added to sqrt(vhat) in the step's denominator.")
    delay_threshold: NonNegInt | None = Field(
        None, description="tau_c: when the largest delay in a buffer (in global models since dispatch) exceeds it, "
        "the step is delay-adapted (delay_step); null: plain FADAS, no delay adaptation (paper's Algorithm 1)."
    )
    delay_step: Literal["inverse", "scaled"] = Field(
        "inverse", description="The delay-adapted step: 'inverse' min(eta, 1/tau_max) (the paper), 'scaled' "
        "eta/tau_max (AFL-Lib's alg/fadas.py); they differ when 1 < tau_max < 1/eta."
    )
    bn_stats: BnStats = bn_stats_field()


class FedACConfig(AlgorithmConfig):
    """Parameters of FedAC (Zang et al., AAAI 2024): buffered updates weighted by their agreement with the server's
    direction, a look-ahead momentum step with an adaptive rate, and each client's steps corrected by control
    variates (the server keeps each client's c_i)."""

    client_vectors: ClassVar[int] = 1
    arrival_passes: ClassVar[float | None] = 12.0
    client_hooks: ClassVar[frozenset[str]] = frozenset({"control_variate"})

    name: Literal["fedac"] = Field("fedac", description="Algorithm name.")
    buffer: PositiveInt = Field(5, description="K >= 1: client updates aggregated per global update (AFL-Lib's 5).")
    server_lr: PositiveFloat = Field(0.001, description="eta_g > 0: the server learning rate of the adaptive step "
                                     "(AFL-Lib's 0.001).")
    beta1: UnitOpen = Field(0.6, description="Decay beta1 in (0, 1) of the momentum m and of its look-ahead "
                            "(AFL-Lib's 0.6).")
    beta2: UnitOpen = Field(0.9, description="Decay beta2 in (0, 1) of the second moment v (AFL-Lib's 0.9).")
    eps: PositiveFloat = Field(1e-8, description="epsilon > 0 added to sqrt(v) in the step's denominator.")
    min_weight: UnitHalfOpen = Field(
        0.1, description="r_min in (0, 1]: an update's similarity weight is max(cos, r_min) before the buffer's "
        "weights are normalised (AFL-Lib's 0.1)."
    )
    direction: Literal["since_dispatch", "last_step"] = Field(
        "since_dispatch", description="The server direction an update is compared with: since_dispatch, how far the "
        "global model moved since the update's client was dispatched (AFL-Lib's alg/fedac.py; 0 for a fresh update, "
        "which then weighs r_min); last_step, the latest global step (0 before the first)."
    )
    correction: bool = Field(
        True, description="Correct each local step by the control variates, g - c_i + c (false: plain local SGD, "
        "c and c_i stay zero: the server rule alone)."
    )
    bn_stats: BnStats = bn_stats_field()


class AsyncFedEDConfig(AlgorithmConfig):
    """Parameters of AsyncFedED (Wang et al., 2022): each arrival's step from its relative Euclidean staleness."""

    arrival_passes: ClassVar[float | None] = 9.0

    name: Literal["asyncfeded"] = Field("asyncfeded", description="Algorithm name.")
    lam: PositiveFloat = Field(1.0, description="lambda > 0: the step is lambda / (gamma + eps), gamma = ||W - W_start|| "
                               "/ ||W_i - W_start|| (the paper's staleness).")
    eps: PositiveFloat = Field(1.0, description="epsilon > 0 of the step; a fresh update (gamma = 0) is added with step "
                               "lambda / epsilon.")


class DelayAdaptiveConfig(AlgorithmConfig):
    """Parameters of asynchronous SGD with delay-adaptive steps (Mishchenko et al.; Koloskova et al., NeurIPS 2022)."""

    arrival_passes: ClassVar[float | None] = 5.0

    name: Literal["delay_adaptive"] = Field("delay_adaptive", description="Algorithm name.")
    form: Literal["mishchenko", "koloskova"] = Field(
        "mishchenko", description="The step of an update of delay tau (server updates since its dispatch): "
        "'mishchenko' eta min(1, M / tau) (Mishchenko, Bach, Even, Woodworth); 'koloskova' eta while tau <= tau_C, "
        "else min(eta, c / tau) (Koloskova, Stich, Jaggi)."
    )
    server_lr: PositiveFloat = Field(1.0, description="eta > 0: the step of an undelayed update (the client's update "
                                     "is added times eta).")
    workers: PositiveInt | None = Field(
        None, description="M of form mishchenko: the workers computing at once; null: the number of clients (every "
        "client in flight; set the server's concurrency C under server:)."
    )
    delay_threshold: NonNegInt | None = Field(
        None, description="tau_C of form koloskova: delays up to it take the full step; null: the number of clients."
    )
    delay_scale: PositiveFloat | None = Field(
        None, description="c of form koloskova: above tau_C the step is min(eta, c / tau); null: eta * tau_C (the "
        "full step at tau_C, then the Mishchenko shape with tau_C for M)."
    )


class FedStaleWeightConfig(AlgorithmConfig):
    """Parameters of FedStaleWeight (Ma et al., 2024): buffered aggregation weighted by average staleness."""

    arrival_passes: ClassVar[float | None] = 4.0

    name: Literal["fedstaleweight"] = Field("fedstaleweight", description="Algorithm name.")
    buffer: PositiveInt = Field(5, description="K >= 1: arrivals aggregated per global update (the authors' "
                                "experiment scripts: 5).")
    server_lr: PositiveFloat = Field(1.0, description="Server learning rate applied to the buffer's weighted mean.")
    window: PositiveInt | None = Field(
        None, description="A client's average staleness over its latest `window` updates; null: over all of them "
        "(the authors' test bench: 5)."
    )
    offset: NonNegInt = Field(
        0, description="Added to each update's staleness (global versions since its dispatch): 0 counts a fresh "
        "update as 0, weight 0 (the authors' test bench); 1 gives every update weight."
    )
    bn_stats: BnStats = bn_stats_field()


class PiscesConfig(AlgorithmConfig):
    """Parameters of Pisces (Jiang, Wang, Li, Li, SoCC 2022): utility-guided selection, an adaptive aggregation pace."""

    selects_clients: ClassVar[bool] = True
    arrival_passes: ClassVar[float | None] = 4.0

    name: Literal["pisces"] = Field("pisces", description="Algorithm name.")
    beta: NonNegFloat = Field(
        0.5, description="Staleness penalty: a client's utility is its data quality over (1 + its mean staleness)^beta, "
        "and its buffered update's discount is 1 / (1 + mean staleness)^beta (AFL-Lib's and the authors' Plato "
        "example's 0.5).")
    b: PositiveFloat = Field(
        10.0, description="Pace: the buffer is aggregated at an arrival once the time since the last aggregation "
        "exceeds the slowest profiled client latency / b, which bounds any update's staleness near b (AFL-Lib's "
        "default 10, which it clamps to [5, 15]; the authors' Plato example's staleness bound 10).")
    min_buffer: PositiveInt = Field(
        1, description="Updates the buffer must hold before the pace may aggregate it (AFL-Lib: 3).")
    window: PositiveInt | None = Field(
        None, description="A client's mean staleness over its latest `window` updates; null: over all of them "
        "(AFL-Lib; the authors' Plato code: 5).")
    aggregation: Literal["discounted", "mean"] = Field(
        "discounted", description="'discounted' (the authors' Plato code): W += sum_i (n_i / sum n) Delta_i / (1 + "
        "mean staleness of client i)^beta over the buffer; 'mean' (AFL-Lib): W = the mean of the buffered models.")
    bn_stats: BnStats = bn_stats_field()


class PORTConfig(AlgorithmConfig):
    """Parameters of PORT (Su and Li, IWQoS 2022): buffered updates weighted by staleness and by their agreement with
    the last global step, and stale clients recalled to report at their next epoch boundary."""

    recalls_clients: ClassVar[bool] = True
    arrival_passes: ClassVar[float | None] = 7.0

    name: Literal["port"] = Field("port", description="Algorithm name.")
    buffer: PositiveInt = Field(10, description="Updates the buffer holds before it is aggregated (AFL-Lib's "
                                "min_clients, 10; the authors' Plato example: 15).")
    alpha: NonNegFloat = Field(3.0, description="Weight of the staleness term omega / (s + omega) of an update s "
                               "global versions old (AFL-Lib's alpha and the Plato example's staleness_weight: 3).")
    beta: NonNegFloat = Field(1.0, description="Weight of the interference term (cos + 1) / 2, cos the cosine of the "
                              "update with the last global step (AFL-Lib's beta and the Plato example's "
                              "similarity_weight: 1).")
    omega: PositiveInt = Field(10, description="The staleness bound: the staleness term's scale, and a client in "
                               "flight more than omega versions old is recalled to report at its next epoch boundary "
                               "(AFL-Lib's omega and the Plato example's staleness_bound: 10).")
    aggregation: Literal["deltas", "models"] = Field(
        "deltas", description="'deltas' (the authors' Plato example): W += sum_i p_i (W_i - W_start,i); 'models' "
        "(AFL-Lib): W = sum_i p_i W_i, the buffered models' weighted mean (p_i: the normalised weights).")
    similarity: Literal["last_step", "constant"] = Field(
        "last_step", description="The interference term's cosine: 'last_step' (the Plato example), of the update's "
        "delta with the last global step, for an update 2 or more versions old (a fresher one, or before a second "
        "version, counts cos 1); 'constant' (AFL-Lib as it runs: its previous model is the aggregate just made, so "
        "its global change is zero), cos 1 before the first aggregation and 0 after.")
    recall: bool = Field(True, description="Recall clients in flight past the staleness bound after each "
                         "aggregation (the paper's bound; false: the weights alone).")
    bn_stats: BnStats = bn_stats_field()

    def check_federation(self, num_clients: int, client_app: bool, where: str) -> None:
        if client_app and self.recall:
            raise InputError(where, "port recalls stale clients to report at their next epoch boundary, which a "
                             "Flower ClientApp's training (its epochs are the app's) cannot do; set recall: false")


class OrthoFLConfig(AlgorithmConfig):
    """Parameters of OrthoFL."""

    client_vectors: ClassVar[int] = 1
    arrival_passes: ClassVar[float | None] = 7.0

    name: Literal["orthofl"] = Field("orthofl", description="Algorithm name.")
    beta: UnitOpen = Field(0.6, description="Base mixing weight beta in (0, 1) of the global moving average.")
    a: NonNegFloat = Field(0.5, description="Staleness exponent: beta_t = beta * s^(-a).")
    shift_source: Literal["global", "chain"] = Field(
        "chain",
        description=(
            "'chain' (default): shift = last calibrated model sent to any client minus the model this "
            "client was sent (the authors' released code, which made the paper's numbers); the moving "
            "average is then only evaluated. 'global': shift = moving average now minus right after the "
            "client's previous arrival (the paper's equations)."
        ),
    )
    bn: BnPolicy = Field("local", description=BN_DESCRIPTION)
    granularity: Granularity = Field("tensor", description=GRANULARITY_DESCRIPTION)
    returning: Literal["own", "server"] = Field(
        "own",
        description=(
            "Cross-device serving (server:): what a client sampled again trains from. 'own': the calibrated "
            "model the server sent at its last arrival (the paper's protocol; staleness from that arrival). "
            "'server': what a joining client gets now (stateless clients; staleness from this dispatch)."
        ),
    )
    first_weight: UnitHalfOpen | None = Field(
        None,
        description=(
            "Mixing weight in (0, 1] of the very first update into the moving average; "
            "null = beta_t under shift_source 'global' (paper), 1 under 'chain' (released code)."
        ),
    )

    def vectors_kept(self) -> int:
        """An anchor per client (``W^(tau+)``) under ``shift_source: global``; none under ``chain``, whose shift is
        measured from the model the client was sent (held while it trains, not kept per client)."""
        return self.client_vectors if self.shift_source == "global" else 0

    @property
    def keeps_client_models(self) -> bool:
        """A client sampled again trains from its own calibrated model under ``returning: own``."""
        return self.returning == "own"


PAIRWISE_MAX_CLIENTS = 100
"""The most clients ``orthofl_pairwise`` runs over (see the module docstring)."""


class OrthoFLNoCalibConfig(AlgorithmConfig):
    """Parameters of OrthoFL without calibration (= FedAsync, polynomial staleness)."""

    arrival_passes: ClassVar[float | None] = 9.0

    name: Literal["orthofl_no_calib"] = Field("orthofl_no_calib", description="Algorithm name.")
    beta: UnitOpen = Field(0.6, description="Base mixing weight beta in (0, 1).")
    a: NonNegFloat = Field(0.5, description="Staleness exponent: beta_t = beta * s^(-a).")


class OrthoFLNoMAConfig(AlgorithmConfig):
    """Parameters of OrthoFL without the moving average."""

    arrival_passes: ClassVar[float | None] = 24.0

    name: Literal["orthofl_no_ma"] = Field("orthofl_no_ma", description="Algorithm name.")
    bn: BnPolicy = Field("local", description=BN_DESCRIPTION)
    granularity: Granularity = Field("tensor", description=GRANULARITY_DESCRIPTION)


class OrthoFLPairwiseConfig(AlgorithmConfig):
    """Parameters of OrthoFL with pairwise projection (incoming update orthogonal to other clients' latest).

    At most 100 clients: each arrival orthogonalises the latest updates of every client seen, work that grows with
    the square of their number (about 2 s per arrival at 100 LeNet5 clients)."""

    client_vectors: ClassVar[int] = 2

    name: Literal["orthofl_pairwise"] = Field("orthofl_pairwise", description="Algorithm name.")
    beta: UnitOpen = Field(0.6, description="Base mixing weight beta in (0, 1) of the global moving average.")
    a: NonNegFloat = Field(0.5, description="Staleness exponent: beta_t = beta * s^(-a).")
    bn: BnPolicy = Field("local", description=BN_DESCRIPTION)
    granularity: Granularity = Field("tensor", description=GRANULARITY_DESCRIPTION)

    @property
    def keeps_client_models(self) -> bool:
        return True

    def check_federation(self, num_clients: int, client_app: bool, where: str) -> None:
        if num_clients > PAIRWISE_MAX_CLIENTS:
            raise InputError(where, f"orthofl_pairwise runs over at most {PAIRWISE_MAX_CLIENTS} clients and the "
                             f"partition makes {num_clients:,}: each arrival is made orthogonal to the latest update of "
                             "every other client seen, work that grows with the square of their number (about 2 s per "
                             "arrival at 100 LeNet5 clients, 18 s at 300)")


class FedAvgConfig(AlgorithmConfig):
    """Parameters of FedAvg."""

    synchronous: ClassVar[bool] = True
    arrival_passes: ClassVar[float | None] = 3.0

    name: Literal["fedavg"] = Field("fedavg", description="Algorithm name.")
    clients_per_round: PositiveInt = Field(
        10, description="K >= 1 clients sampled per round; must not exceed the number of clients."
    )


class FedProxConfig(FedAvgConfig):
    """Parameters of FedProx (FedAvg's, plus mu)."""

    client_hooks: ClassVar[frozenset[str]] = frozenset({"prox_mu"})

    def hooks_sent(self) -> frozenset[str]:
        """``mu: 0`` sends no hook."""
        return self.client_hooks if self.mu > 0 else frozenset()

    name: Literal["fedprox"] = Field("fedprox", description="Algorithm name.")  # type: ignore[assignment]
    mu: NonNegFloat = Field(0.01, description="Weight mu >= 0 of the proximal term mu/2 ||w - w_global||^2.")


class FedAdamConfig(AlgorithmConfig):
    """Parameters of FedAdam."""

    synchronous: ClassVar[bool] = True
    arrival_passes: ClassVar[float | None] = 5.0

    name: Literal["fedadam"] = Field("fedadam", description="Algorithm name.")
    clients_per_round: PositiveInt = Field(
        10, description="K >= 1 clients sampled per round; must not exceed the number of clients."
    )
    lr: PositiveFloat = Field(0.01, description="Server learning rate eta > 0.")
    beta1: UnitOpen = Field(0.9, description="First-moment decay beta1 in (0, 1).")
    beta2: UnitOpen = Field(0.99, description="Second-moment decay beta2 in (0, 1).")
    tau: PositiveFloat = Field(1e-3, description="Adaptivity tau > 0 added to sqrt(v); v starts at tau^2.")


class ScaffoldConfig(AlgorithmConfig):
    """Parameters of SCAFFOLD."""

    synchronous: ClassVar[bool] = True

    client_vectors: ClassVar[int] = 1
    arrival_passes: ClassVar[float | None] = 6.0
    client_hooks: ClassVar[frozenset[str]] = frozenset({"control_variate"})

    name: Literal["scaffold"] = Field("scaffold", description="Algorithm name.")
    clients_per_round: PositiveInt = Field(
        10, description="|S| clients sampled per round; must not exceed the number of clients."
    )
    server_lr: PositiveFloat = Field(1.0, description="Global step size eta_g (Algorithm 1's x <- x + eta_g Dx).")
    weighting: Literal["uniform", "samples"] = Field(
        "uniform", description="uniform: the paper's plain means over the round's clients; samples: weighted by "
        "the clients' sample counts, as FedAvg weighs them."
    )


class FedNovaConfig(FedAvgConfig):
    """Parameters of FedNova: FedAvg's; it is FedAvg when every client takes the same steps (data.partition.sizes: equal).

    Each client's steps are those its training took. An arrival without training costs FedAvg's (a reply without a
    step count weighs one step: FedAvg's mean)."""

    name: Literal["fednova"] = Field("fednova", description="Algorithm name.")  # type: ignore[assignment]


class FedDynConfig(AlgorithmConfig):
    """Parameters of FedDyn (the server keeps each client's gradient state g_k)."""

    synchronous: ClassVar[bool] = True

    client_vectors: ClassVar[int] = 1
    arrival_passes: ClassVar[float | None] = 8.0
    client_hooks: ClassVar[frozenset[str]] = frozenset({"prox_mu", "linear_term"})

    name: Literal["feddyn"] = Field("feddyn", description="Algorithm name.")
    clients_per_round: PositiveInt = Field(
        10, description="|P_t| clients sampled per round; must not exceed the number of clients."
    )
    alpha: PositiveFloat = Field(
        0.01, description="alpha > 0 of the devices' regulariser -<g_k, theta> + alpha/2 ||theta - theta_server||^2 "
        "and of the server's h (0.01: the authors' CIFAR-10 example, example_cifar_10.py)."
    )
    alpha_scaling: Literal["none", "samples"] = Field(
        "none", description="none: every device's alpha is alpha (Algorithm 1); samples: alpha / (n_k / mean n) for "
        "device k, as the authors' code adapts it (the same with equal shards)."
    )
    evaluated: Literal["server", "active_mean"] = Field(
        "server", description="The model scored: server, theta^t, the model the devices train from (Algorithm 1); "
        "active_mean, the plain mean of the round's device models, which the authors' code scores beside it."
    )


class MOONConfig(FedAvgConfig):
    """Parameters of MOON (FedAvg's rounds, plus the model-contrastive term's mu and tau; the server keeps each
    client's previous local model, which the client's term compares with)."""

    client_vectors: ClassVar[int] = 1
    arrival_passes: ClassVar[float | None] = 4.0
    client_hooks: ClassVar[frozenset[str]] = frozenset({"contrastive"})
    train_cost: ClassVar[float] = 1.9  # python -m benchmarks.local_cost: 1.887 (LeNet5 on MNIST, shared machine)

    name: Literal["moon"] = Field("moon", description="Algorithm name.")  # type: ignore[assignment]
    mu: NonNegFloat = Field(
        1.0, description="Weight mu >= 0 of the model-contrastive term in CE + mu l_con (the paper tunes it over "
        "{0.1, 1, 5, 10}: 5 best on CIFAR-10, 1 on CIFAR-100 and Tiny-ImageNet; 1: the authors' code's default); "
        "0 is FedAvg."
    )
    tau: PositiveFloat = Field(0.5, description="Temperature tau > 0 of the cosine similarities (the paper's 0.5).")

    def update_cost(self) -> float:
        """``mu: 0`` sends no hook: plain local SGD's cost."""
        return self.train_cost if self.mu > 0 else 1.0

    def hooks_sent(self) -> frozenset[str]:
        """``mu: 0`` sends no hook."""
        return self.client_hooks if self.mu > 0 else frozenset()


class MIFAConfig(AlgorithmConfig):
    """Parameters of MIFA (the server keeps each client's latest update)."""

    synchronous: ClassVar[bool] = True

    client_vectors: ClassVar[int] = 1
    arrival_passes: ClassVar[float | None] = 9.0

    name: Literal["mifa"] = Field("mifa", description="Algorithm name.")
    clients_per_round: PositiveInt | None = Field(
        None, description="Clients per round; null: every free, present client (the paper's active devices, which "
        "availability: decides); a number samples that many, at most the number of clients."
    )
    start: Literal["wait", "zero"] = Field(
        "wait", description="wait: the model stays at W^(0) until every client has delivered once (the authors' "
        "experiments, fdu.py); zero: the rule from the first round, a client not heard from counting a zero update "
        "(their fdu_no_wait.py)."
    )
    weighting: Literal["uniform", "samples"] = Field(
        "uniform", description="uniform: the mean of every client's latest update, 1/N each (the paper); samples: "
        "weighted by the clients' sample counts over all clients."
    )

    def round_clients(self, num_clients: int) -> int:
        """``clients_per_round``, or every client with ``null`` (each round takes all the free, present ones)."""
        return num_clients if self.clients_per_round is None else self.clients_per_round


class FlowerConfig(AlgorithmConfig):
    """A Flower strategy (flwr.serverapp.strategy or the legacy flwr.server.strategy) in virtual time.

    Validation makes the strategy as the run will (:mod:`simfl.algorithms.flower_strategies`, imported only for a
    Flower entry), so that ``simfl validate`` refuses what the run would."""

    synchronous: ClassVar[bool] = True

    chooses_clients: ClassVar[bool] = True

    name: Literal["flower"] = Field("flower", description="Algorithm name.")
    strategy: str = Field(
        description="A strategy of Flower's Message API by class name (FedAvg, FedProx, FedYogi, FedTrimmedAvg, "
        "Krum, ...), a legacy one as flwr.server.strategy:FedAvg, or the import path package.module:Class of "
        "the user's own (needs --allow-imports; a class object through the Python API). The entry's runs "
        "are named after the class unless it has a label."
    )
    options: dict[str, Any] = Field(
        default_factory=dict, validate_default=True, description="Keyword arguments of the strategy's constructor, "
        "e.g. {fraction_train: 0.5, min_train_nodes: 5} or {eta: 0.01} for FedYogi."
    )
    train_config: dict[str, Any] = Field(
        default_factory=dict, description="The ConfigRecord of every round (Strategy.start's train_config), "
        "e.g. {lr: 0.05} for a ClientApp that reads it; strategies add their own keys (server-round, ...)."
    )
    evaluate_config: dict[str, Any] = Field(
        default_factory=dict, description="The ConfigRecord of every round's federated evaluation "
        "(Strategy.start's evaluate_config); strategies add server-round. Turn the evaluation off with "
        "options: {fraction_evaluate: 0} (legacy strategies: fraction_evaluate: 0)."
    )

    @property
    def default_run_name(self) -> str:
        """The strategy's class name (``FedYogi``)."""
        return short_name(self.strategy if is_import_path(self.strategy) else f"x:{self.strategy}")

    @field_validator("strategy")
    @classmethod
    def _a_strategy(cls, name: str) -> str:
        from simfl.algorithms.flower_strategies import strategy_class

        with as_field_error():
            strategy_class(name)
        return name

    @field_validator("options")
    @classmethod
    def _options_build_it(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from simfl.algorithms.flower_strategies import build, never_opens, quiet, strategy_class

        name = info.data.get("strategy")
        if name is None:  # the strategy's own error is reported
            return options
        found, _ = strategy_class(name)
        with as_field_error(), quiet():
            never_opens(build(found, options, name), name, None)
        return options

    @field_validator("train_config", "evaluate_config")
    @classmethod
    def _a_config_record(cls, config: dict[str, Any]) -> dict[str, Any]:
        from simfl.algorithms.flower_strategies import config_record

        with as_field_error():
            config_record(config)
        return config

    def round_clients(self, num_clients: int) -> int:
        """Flower's sample size with every client free (the strategy decides each round)."""
        from simfl.algorithms.flower_strategies import build, quiet, round_size, strategy_class

        found, _ = strategy_class(self.strategy)
        with quiet():
            strategy = build(found, self.options, self.strategy)
        return round_size(strategy, num_clients, self.strategy)

    def check_federation(self, num_clients: int, client_app: bool, where: str) -> None:
        """The strategy made as the run makes it, on ``num_clients`` clients: refused when no round could ever
        open, or when simfl's own clients (no ``client_app``) would not reply its ``weighted_by_key``."""
        from simfl.algorithms.flower_strategies import build, never_opens, quiet, simfl_replies_carry, strategy_class

        found, _ = strategy_class(self.strategy)
        try:
            with quiet():
                strategy = build(found, self.options, self.strategy)
            never_opens(strategy, self.strategy, num_clients)
            if not client_app:
                simfl_replies_carry(strategy, self.strategy)
        except InputError as exc:
            raise InputError(f"{where}.options", exc.message) from None


class ServerAppConfig(AlgorithmConfig):
    """A Flower ServerApp run as written: its ``main(grid, context)`` sends its messages through a grid that
    delivers them in virtual time (:mod:`simfl.algorithms.serverapp`). ``simfl flwr run APP_DIR`` writes this
    entry from the app's ``pyproject.toml``."""

    synchronous: ClassVar[bool] = True

    chooses_clients: ClassVar[bool] = True
    checkpointable: ClassVar[bool] = False
    holds_model: ClassVar[bool] = True

    name: Literal["serverapp"] = Field("serverapp", description="Algorithm name.")
    app: str = Field(
        description="The import path package.module:attribute of a flwr.serverapp.ServerApp (needs "
        "--allow-imports), e.g. my_app.server_app:app."
    )
    run_config: dict[str, Any] = Field(
        default_factory=dict, description="The ServerApp's context.run_config ([tool.flwr.app.config] of the app's "
        "pyproject.toml, with --run-config applied)."
    )
    timeout: float | None = Field(
        DEFAULT_TIMEOUT, description="Wall-clock seconds one turn of the ServerApp may run (from the grid's answer to "
        "its next call of the grid, or to main's end: its strategy, its evaluate_fn, its own code), at most 1e6; a "
        "turn still running then ends the run in one line naming the app and this limit (exit 2). null: no limit."
    )

    budget_updates: bool = Field(
        True, description="Whether budget.updates ends its runs too (each message it sends counts as an update, "
        "evaluate and query messages included). false: only its main's end and budget.time do, so that simfl's own "
        "rules beside it run to budget.updates while the app runs all its rounds (what simfl flwr run --compare "
        "writes); needs budget.time."
    )

    def stopped_by_updates(self) -> bool:
        return self.budget_updates

    @field_validator("timeout")
    @classmethod
    def _seconds(cls, value: float | None) -> float | None:
        return wall_limit(value)

    def round_clients(self, num_clients: int) -> int:
        """At most every client: the app sends each round to the nodes it picks among the free ones."""
        return num_clients

    @property
    def max_rounds(self) -> int | None:
        """The app's ``num-server-rounds`` (the key of Flower's app templates) where its run config gives one: its
        ``main`` ends the run then, whatever the budget (``simfl flwr run`` sets one no app reaches)."""
        value = self.run_config.get("num-server-rounds")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None

    @field_validator("app")
    @classmethod
    def _a_server_app(cls, path: str) -> str:
        """The app is loaded as the run loads it, so that ``simfl validate`` refuses what the run would."""
        from simfl.algorithms.flower_strategies import load_server_app

        if not is_import_path(path):
            raise ValueError(f"must be an import path package.module:attribute, got {path!r}")
        with as_field_error():
            load_server_app(path)
        return path


def _builtin(config: type[AlgorithmConfig], target: str) -> Builtin:
    return Builtin(config, f"simfl.algorithms.{target}")


BUILTINS: dict[str, Builtin] = {
    "orthofl": _builtin(OrthoFLConfig, "orthofl:OrthoFL"),
    "orthofl_no_calib": _builtin(OrthoFLNoCalibConfig, "orthofl_ablations:OrthoFLNoCalib"),
    "orthofl_no_ma": _builtin(OrthoFLNoMAConfig, "orthofl_ablations:OrthoFLNoMA"),
    "orthofl_pairwise": _builtin(OrthoFLPairwiseConfig, "orthofl_ablations:OrthoFLPairwise"),
    "fedasync": _builtin(FedAsyncConfig, "fedasync:FedAsync"),
    "fedbuff": _builtin(FedBuffConfig, "fedbuff:FedBuff"),
    "ca2fl": _builtin(CA2FLConfig, "ca2fl:CA2FL"),
    "fadas": _builtin(FADASConfig, "fadas:FADAS"),
    "fedac": _builtin(FedACConfig, "fedac:FedAC"),
    "asyncfeded": _builtin(AsyncFedEDConfig, "asyncfeded:AsyncFedED"),
    "delay_adaptive": _builtin(DelayAdaptiveConfig, "delay_adaptive:DelayAdaptive"),
    "fedstaleweight": _builtin(FedStaleWeightConfig, "fedstaleweight:FedStaleWeight"),
    "pisces": _builtin(PiscesConfig, "pisces:Pisces"),
    "port": _builtin(PORTConfig, "port:PORT"),
    "fedavg": _builtin(FedAvgConfig, "fedavg:FedAvg"),
    "fedprox": _builtin(FedProxConfig, "fedprox:FedProx"),
    "fednova": _builtin(FedNovaConfig, "fednova:FedNova"),
    "feddyn": _builtin(FedDynConfig, "feddyn:FedDyn"),
    "mifa": _builtin(MIFAConfig, "mifa:MIFA"),
    "moon": _builtin(MOONConfig, "moon:MOON"),
    "fedadam": _builtin(FedAdamConfig, "fedadam:FedAdam"),
    "scaffold": _builtin(ScaffoldConfig, "scaffold:Scaffold"),
    "flower": _builtin(FlowerConfig, "flower:FlowerStrategy"),
    "serverapp": _builtin(ServerAppConfig, "serverapp:ServerAppRounds"),
}
"""Every built-in algorithm by the name a scenario's ``algorithms[i].name`` gives it."""
