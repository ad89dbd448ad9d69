"""Flower (``flwr``) in simfl: its records as simfl's flat weights, and a user's ClientApp as a client's training.

A Flower ClientApp (``flwr.clientapp.ClientApp``, the Message API: ``@app.train()``) trains
a client when the scenario says ``client: {flower_app: "package.module:app"}``:
:class:`ClientAppTrainer` takes the place of :class:`~simfl.train.local.LocalTrainer` in every
executor. Each job calls the app in this process exactly as Flower's simulation engine does,
``app(message, context)``, with

- the message Flower would send: ``RecordDict({"arrays": ArrayRecord, "config": ConfigRecord})``,
  message type ``train``, to node ``client + 1`` (node 0 is Flower's server). The arrays are the
  start weights under the model's state-dict names (integer buffers such as
  ``num_batches_tracked``, which simfl does not exchange, at their initial values, so that
  ``model.load_state_dict`` works); the config is what the server sent: a Flower strategy's
  ConfigRecord (:mod:`simfl.algorithms.flower`), or, under simfl's own algorithms, FedProx's
  ``proximal-mu`` (the key Flower's FedProx uses) and nothing else;
- a context as in Flower's simulation: ``node_config = {"partition-id": client,
  "num-partitions": N}``, the scenario's ``client.run_config`` and a ``state`` RecordDict that
  persists per client across its rounds. The state travels with the job and comes back in the
  reply (:data:`~simfl.train.message.MEMORY`), so it is the same whichever worker trains the
  round, and checkpoints carry it.

A ServerApp's messages (:mod:`simfl.algorithms.serverapp`) reach the ClientApp as the app sent them: the
job's message carries the Flower message's protobuf bytes (:data:`SENT`), whatever its type and records, and
the reply goes back the same way (:data:`REPLY`), so no value changes on the way.

Every call runs with Python's, NumPy's and torch's global generators set from the run's stream for that call
(``(seed, "clientapp", client, round)``; :func:`simfl.rng.global_generators`) and put back after, so an app that
draws from them (an unseeded ``DataLoader``, ``Net()``, dropout) gives the same numbers in any process; an app
that leaves a thread of its own running after its call is said so once per process (:func:`left_running`).

A Flower app loads its own data; offline, inside simfl, :func:`client_data` gives it the
client's partition, and :func:`batch_generator` the stream simfl's own trainer shuffles with
(``(seed, "train", client, round)``), so an app that reproduces simfl's local SGD gives its
numbers. The app's reply must hold one ArrayRecord with the model's exchanged tensors (same
names and shapes) and at most one MetricRecord (its scalars become the arrival's metrics;
Flower's strategies weight by ``num-examples``, a positive whole number when given). Its wall
time does not matter: the latency model decides virtual time; but one call may run at most
``client.timeout`` wall-clock seconds (:class:`AppCaller`), so an app that never returns ends the
run in one line instead of holding it forever. A legacy app (``ClientApp(client_fn=...)`` around a ``Client`` or
``NumPyClient``) gets and returns the legacy layout instead (``FitIns``/``FitRes``: the arrays as
NumPy arrays in state-dict order; ``EvaluateIns``/``EvaluateRes``), as Flower's legacy server
sends it.

Flower is an optional dependency (``pip install 'simfl[flower]'``): this module imports it only
inside functions.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from simfl import rng
from simfl.errors import InputError, UserCodeFailed, refused, user_call
from simfl.models.flat import Layout
from simfl.train.configs import ClientConfig, TrainConfig, load_app
from simfl.train.configs import require as require  # kept importable from here: simfl.algorithms.flower calls it
from simfl.train.local import Job
from simfl.train.message import MEMORY, Reply

if TYPE_CHECKING:
    from flwr.app import ArrayRecord, Context, RecordDict

SERVER_NODE = 0
"""Flower's node id of the server (``SUPERLINK_NODE_ID``); client ``m`` is node ``m + 1``."""
PROX_KEY = "proximal-mu"
"""The config key of Flower's FedProx, which simfl's ``prox_mu`` hook becomes for a ClientApp."""

SENT = "flower.message"
"""The array key of a Flower message relayed as the ServerApp sent it (its protobuf bytes, Flower's own
serialisation): a ClientApp gets exactly that message, whatever its type and records (:meth:`ClientAppTrainer.run`)."""
REPLY = "flower.reply"
"""The array key of the ClientApp's reply to a relayed message, as it gave it (protobuf bytes)."""

LEGACY_SCALARS = (bool, bytes, int, float, str)
"""The metric values a legacy client may return (Flower's ``common.Scalar``); simfl keeps the numbers."""


def prepare() -> None:
    """Set what Flower's Messages read and Flower's log (once per process; idempotent).

    ``Message(...)`` takes its sender from Flower's process-wide task identity, which
    Flower's own runtimes set; here this process plays the server (node 0). Flower's log
    shows its warnings and errors as before; its lines from a thread that :func:`saying`
    names (a ServerApp's) go to that thread's run instead, INFO ones included.
    """
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    from flwr.supercore.task_identity import TaskIdentity

    if TaskIdentity._run_id is None:
        TaskIdentity.task_id = 1
        TaskIdentity.run_id = 1
        TaskIdentity.node_id = SERVER_NODE
    flwr_log = logging.getLogger("flwr")
    if not any(isinstance(f, _Said) for f in flwr_log.filters):
        flwr_log.addFilter(_Said())
    flwr_log.setLevel(logging.INFO)


_SAYS: dict[int, Callable[[str], None]] = {}
"""Where Flower's log lines of a thread go, by thread id (:func:`saying`)."""
_LINE = logging.Formatter("%(levelname)s :      %(message)s")
"""Flower's console format, without its colours."""


class _Said(logging.Filter):
    """On Flower's logger: a line of a thread :func:`saying` names goes to its run, one line per line of text, as
    Flower's console shows it; other threads' lines pass from WARNING up, as Flower's log showed them before."""

    def filter(self, record: logging.LogRecord) -> bool:
        say = _SAYS.get(record.thread or -1)
        if say is None:
            return record.levelno >= logging.WARNING
        for line in record.getMessage().splitlines() or [""]:
            say(_LINE.format(logging.makeLogRecord({**record.__dict__, "msg": line, "args": None})))
        return False


@contextlib.contextmanager
def saying(thread: threading.Thread, say: Callable[[str], None] | None) -> Iterator[None]:
    """Within, Flower's log lines from ``thread`` go to ``say`` (None: nowhere)."""
    if say is None:
        yield
        return
    ident = thread.ident or -1
    _SAYS[ident] = say
    try:
        yield
    finally:
        _SAYS.pop(ident, None)


@dataclass(frozen=True)
class Names:
    """A model's tensors as Flower exchanges them: every state-dict entry, in state-dict order."""

    layout: Layout
    order: tuple[str, ...]
    """State-dict names, in order."""
    fixed: Mapping[str, np.ndarray]
    """Entries simfl does not exchange (integer buffers), at the model's initial values."""

    @staticmethod
    def of(model: nn.Module, layout: Layout) -> Names:
        state = model.state_dict()
        exchanged = set(layout.names)
        fixed = {k: v.detach().cpu().numpy().copy() for k, v in state.items() if k not in exchanged}
        return Names(layout, tuple(state), fixed)


def to_record(layout: Layout, flat: torch.Tensor, names: Names | None = None) -> ArrayRecord:
    """The ArrayRecord of flat weights: the layout's tensors (float32), plus ``names``' fixed entries, in
    state-dict order when ``names`` is given."""
    from flwr.app import Array, ArrayRecord

    layers = layout.split(flat.detach().cpu())
    if names is None:
        return ArrayRecord({k: Array(v.numpy()) for k, v in layers.items()})
    out = {}
    for key in names.order:
        out[key] = Array(layers[key].numpy()) if key in layers else Array(names.fixed[key])
    return ArrayRecord(out)


def from_record(layout: Layout, record: ArrayRecord, where: str, fixed: Mapping[str, Any] = {}) -> torch.Tensor:
    """The flat float32 weights of an ArrayRecord holding the layout's tensors (names and shapes checked;
    entries named in ``fixed`` are allowed and ignored)."""
    missing = [s.name for s in layout.segments if s.name not in record]
    if missing:
        raise InputError(where, f"the arrays lack the model's tensor '{missing[0]}' ({len(missing)} missing); "
                         f"they must hold the model's state-dict entries, e.g. {layout.names[:3]}")
    known = set(layout.names)
    extra = [k for k in record if k not in fixed and k not in known]
    if extra:
        raise InputError(where, f"the arrays hold '{extra[0]}', which is not a tensor of the model")
    layers = {}
    for s in layout.segments:
        array = record[s.name].numpy()
        if tuple(array.shape) != s.shape:
            raise InputError(where, f"tensor '{s.name}' has shape {tuple(array.shape)}, the model's is {s.shape}")
        if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
            raise InputError(where, f"tensor '{s.name}' has dtype {array.dtype}, not a number type")
        layers[s.name] = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    return layout.join(layers)


def whole_examples(metrics: Mapping[str, float]) -> dict[str, int | float]:
    """Reply metrics as Flower's strategies read them: a whole ``num-examples`` as an int (it weights)."""
    return {k: int(v) if k == "num-examples" and float(v).is_integer() else float(v) for k, v in metrics.items()}


def message_config(message: Any) -> dict[str, Any]:
    """A Flower message's config: the entries of every ConfigRecord of its content."""
    return {k: v for record in message.content.config_records.values() for k, v in record.items()}


def message_kind(message: Any) -> str:
    """A Flower message's type without its action suffix (``train``, ``evaluate``, ``query``)."""
    return str(message.metadata.message_type).split(".")[0]


def scalar_metrics(values: Mapping[str, Any]) -> dict[str, float]:
    """The int and float entries of a MetricRecord (lists left out), as floats."""
    return {k: float(v) for k, v in values.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def pack(record: RecordDict) -> torch.Tensor | None:
    """A RecordDict as bytes in a uint8 tensor (Flower's own protobuf serialisation), None when empty."""
    if not len(record):
        return None
    from flwr.common.serde import recorddict_to_proto

    data = recorddict_to_proto(record).SerializeToString()
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()


def pack_message(message: Any) -> torch.Tensor:
    """A Flower Message (metadata, content or error) as bytes in a uint8 tensor (Flower's protobuf serialisation):
    every value as it is, float64 arrays, integer arrays and lists included."""
    from flwr.common.serde import message_to_proto

    return torch.frombuffer(bytearray(message_to_proto(message).SerializeToString()), dtype=torch.uint8).clone()


def unpack_message(data: torch.Tensor) -> Any:
    """The Flower Message of :func:`pack_message` output (no code runs)."""
    from flwr.common.serde import message_from_proto
    from flwr.proto.message_pb2 import Message as ProtoMessage

    return message_from_proto(ProtoMessage.FromString(data.numpy().tobytes()))


def run_id(seed: int, *names: str | int) -> int:
    """A Flower run id (a positive 63-bit number, as Flower's are random ones) of the run ``names`` under ``seed``."""
    return int(rng.stream(seed, "flower-run", *names).integers(1, 2**63))


def unpack(data: torch.Tensor | None) -> RecordDict:
    """The RecordDict of :func:`pack` output (an empty one for None). Protobuf and np.save bytes: no code runs."""
    from flwr.app import RecordDict

    if data is None:
        return RecordDict()
    from flwr.common.serde import recorddict_from_proto
    from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

    return recorddict_from_proto(ProtoRecordDict.FromString(data.numpy().tobytes()))


@dataclass(frozen=True)
class _Current:
    shards: Sequence[tuple[torch.Tensor, torch.Tensor]]
    seed: int
    job: Job | None
    """The training job being run; None during an evaluation."""


_CURRENT: contextvars.ContextVar[_Current | None] = contextvars.ContextVar("simfl_flower_job", default=None)


def _current(what: str) -> _Current:
    current = _CURRENT.get()
    if current is None:
        raise RuntimeError(f"simfl.train.flower.{what} is for a ClientApp that simfl runs (client.flower_app)")
    return current


def client_data(context: Context) -> tuple[torch.Tensor, torch.Tensor]:
    """The training inputs and labels of the client ``context`` belongs to (its partition in the scenario)."""
    current = _current("client_data")
    return current.shards[int(context.node_config["partition-id"])]


def batch_generator() -> torch.Generator:
    """A torch generator on the stream simfl's own trainer shuffles this round's batches with (training only)."""
    current = _current("batch_generator")
    if current.job is None:
        raise RuntimeError("simfl.train.flower.batch_generator is for the train handler (an evaluation shuffles "
                           "nothing)")
    return rng.torch_generator(current.seed, "train", current.job.client, current.job.round)


class AppCaller:
    """A user's ClientApp called in this process, as Flower's simulation engine calls it: the message Flower
    would send client ``m`` (node ``m + 1``) and the client's context; the reply checked to be a message.

    Every call goes through :func:`simfl.errors.user_call` with the scenario's ``client.timeout``: whatever
    the app raises or exits with, or a call past the limit, is one line naming the app, the client and its
    round. What the app gives back is checked here and in the ``_reply``/``reply_metrics`` functions below,
    before simfl or a strategy reads it: a message, ``context.state`` still a RecordDict, a positive whole
    ``num-examples`` (:func:`check_examples`) and, from a legacy client, metrics of Flower's scalar types.
    """

    def __init__(self, client: ClientConfig, model: nn.Module, layout: Layout,
                 shards: Sequence[tuple[torch.Tensor, torch.Tensor]], seed: int) -> None:
        assert client.flower_app is not None
        prepare()
        self.app = load_app(client.flower_app)
        self.path = client.flower_app
        self.what = f"the ClientApp {self.path}"
        self.timeout = client.timeout
        self.legacy = is_legacy(self.app)
        self.run_config = dict(client.run_config)
        self.train_config = dict(client.train_config)
        self.layout = layout
        self.names = Names.of(model, layout)
        self.shards = shards
        self.seed = seed
        self.run_id = run_id(seed, "clientapp")
        """The run id of the messages simfl itself builds (a ServerApp's messages carry their run's)."""

    def call(self, kind: str, client: int, weights: torch.Tensor, config: Mapping[str, Any],
             state: torch.Tensor | None, job: Job | None, message_id: str, where: str) -> tuple[Any, Context]:
        """Send ``kind`` (``train``/``evaluate``) with ``weights`` and ``config`` to ``client``, whose context
        holds ``state``; its reply and the context after the call."""
        from flwr.app import ConfigRecord, Message, RecordDict

        arrays = to_record(self.layout, weights, self.names)
        if self.legacy:
            content = legacy_content(arrays, config, kind)
        else:
            content = RecordDict({"arrays": arrays, "config": ConfigRecord(dict(config))})
        message = Message(content, dst_node_id=client + 1, message_type=kind)
        message.metadata.__dict__["_message_id"] = message_id
        message.metadata.__dict__["_run_id"] = self.run_id
        key = ("clientapp", client, job.round) if job is not None else ("clientapp-evaluate", client, message_id)
        return self.deliver(message, client, state, job, key, where)

    def deliver(self, message: Any, client: int, state: torch.Tensor | None, job: Job | None,
                key: tuple[str | int, ...], where: str) -> tuple[Any, Context]:
        """Call the app on ``message`` to ``client``, whose context holds ``state`` (its run id the message's), with
        the global generators seeded from ``(seed, *key)`` (:func:`simfl.rng.global_generators`); its reply (checked
        to be a message without an error) and the context after the call."""
        from flwr.app import Context, Message, RecordDict

        context = Context(run_id=int(message.metadata.run_id), node_id=client + 1,
                          node_config={"partition-id": client, "num-partitions": len(self.shards)},
                          state=unpack(state), run_config=dict(self.run_config))
        grad = torch.is_grad_enabled()  # thread-local in torch: the app's thread gets the caller's

        def answer() -> Any:
            with torch.set_grad_enabled(grad):
                return self.app(message, context)

        token = _CURRENT.set(_Current(self.shards, self.seed, job))
        before = set(threading.enumerate())
        try:
            with rng.global_generators(self.seed, *key):
                reply = user_call(where, self.what, answer, seconds=self.timeout, limit="client.timeout")
        finally:
            _CURRENT.reset(token)
        left_running(before, where, self.what)
        if not isinstance(reply, Message):
            raise InputError(where, f"the ClientApp returned a {type(reply).__name__}, not a flwr.app.Message")
        if not isinstance(context.state, RecordDict):
            raise refused(where, self.what, context.state, "a flwr.app.RecordDict (the client's state)",
                          did="set context.state to")
        if reply.has_error():
            error = reply.error
            raise UserCodeFailed(where, f"the ClientApp replied with error {error.code}: {error.reason}", "")
        return reply, context


_TOLD: set[str] = set()
"""What this process has already said about an app's threads (once each)."""


def _monitor(thread: threading.Thread) -> bool:
    """Whether ``thread`` is a library's own monitor, which changes no number: tqdm's ``TMonitor`` (started by the
    first progress bar, as ``datasets`` draws one; it only refreshes bars), known by its class, not its name."""
    monitors = sys.modules.get("tqdm._monitor")
    return monitors is not None and isinstance(thread, monitors.TMonitor)


def left_running(before: set[threading.Thread], where: str, what: str) -> None:
    """Say once per process, on stderr, that ``what`` left a thread of its own running after its call: what that
    thread draws or does is not seeded per call nor bounded by a time limit, so its numbers may differ from run to
    run (simfl cannot stop it). A library's monitor thread (:func:`_monitor`) changes no number: nothing is said."""
    new = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.name.startswith("simfl-")
           and not _monitor(t)]
    if new and what not in _TOLD:
        _TOLD.add(what)
        print(f"simfl: {where}: {what} left the thread {new[0].name!r} running after its call; what it draws or "
              "does there is not seeded per call, so the same seed may give other numbers", file=sys.stderr,
              flush=True)


class ClientAppTrainer(AppCaller):
    """Trains jobs by calling a Flower ClientApp in this process (the interface of LocalTrainer)."""

    def __init__(self, client: ClientConfig, model: nn.Module, layout: Layout,
                 shards: Sequence[tuple[torch.Tensor, torch.Tensor]], config: TrainConfig, seed: int) -> None:
        super().__init__(client, model, layout, shards, seed)
        self.config = config

    def _config(self, job: Job) -> dict[str, Any]:
        """The message's config: the server's (a Flower strategy's), or with none, ``client.train_config`` and
        ``server-round`` (the client's round, from 1)."""
        config = dict(job.message.config) or {**self.train_config, "server-round": job.round + 1}
        for key, value in job.message.hooks.items():
            if key == "prox_mu":
                config.setdefault(PROX_KEY, float(value))
            else:
                raise InputError("client.flower_app", f"the algorithm changes local training with hook '{key}', "
                                 "which a Flower ClientApp cannot apply; use simfl's own training (no flower_app)")
        return config

    def run(self, job: Job) -> Reply:
        """Call the app on ``job``: its trained weights, its metrics and the client's new state."""
        from flwr.app import MessageType

        sent = job.message.arrays.get(SENT)
        if sent is not None:
            return self._relay(job, sent)
        where = f"client.flower_app (client {job.client}, node {job.client + 1}, its round {job.round + 1})"
        if job.epochs is not None:  # validation refuses a rule that recalls rounds under a ClientApp
            raise InputError(where, "the round was cut to fewer epochs, which a ClientApp's own training cannot be")
        reply, context = self.call(MessageType.TRAIN, job.client, job.start, self._config(job),
                                   job.message.arrays.get(MEMORY), job, f"{job.client}.{job.round}", where)
        return self._reply(reply, context, where)

    def _relay(self, job: Job, sent: torch.Tensor) -> Reply:
        """A ServerApp's message, delivered as it was sent (:data:`SENT`); its reply as the app gave it
        (:data:`REPLY`), the start weights unchanged, and the scalars of its MetricRecord, when it has one."""
        message = unpack_message(sent)
        where = (f"client.flower_app (client {job.client}, node {job.client + 1}, its message {job.round + 1}, "
                 f"{message.metadata.message_type})")
        reply, context = self.deliver(message, job.client, job.message.arrays.get(MEMORY), job,
                                      ("clientapp", job.client, job.round), where)
        try:
            packed = pack_message(reply)
        except Exception as exc:  # a value Flower's records took but its serialisation refuses
            raise UserCodeFailed(where, f"{self.what}'s reply cannot be sent: {type(exc).__name__}: {exc}",
                                 traceback.format_exc()) from None
        records = reply.content.metric_records if reply.has_content() else {}
        metrics = scalar_metrics(next(iter(records.values()))) if len(records) == 1 else {}
        return Reply(job.start, {REPLY: packed, **self._memory(context, where)}, metrics)

    def _memory(self, context: Context, where: str) -> dict[str, torch.Tensor]:
        """The client's ``context.state`` as the arrays its next message carries (none when empty)."""
        try:
            state = pack(context.state)
        except Exception as exc:  # a record the app put there that Flower cannot serialise
            raise UserCodeFailed(where, f"{self.what} left a context.state that cannot be kept: "
                                 f"{type(exc).__name__}: {exc}", traceback.format_exc()) from None
        return {} if state is None else {MEMORY: state}

    def _reply(self, reply: Any, context: Context, where: str) -> Reply:
        memory = self._memory(context, where)
        if self.legacy:
            from flwr.app import Array, ArrayRecord
            from flwr.common import Code, parameters_to_ndarrays
            from flwr.compat.common.recorddict_compat import recorddict_to_fitres

            fit = legacy_result(lambda c: recorddict_to_fitres(c, keep_input=False), reply, where, self.what, "fit")
            if fit.status.code != Code.OK:
                raise UserCodeFailed(where, f"the client's fit replied {fit.status.code.name}: {fit.status.message}", "")
            arrays = parameters_to_ndarrays(fit.parameters)
            if len(arrays) != len(self.names.order):
                raise InputError(where, f"fit returned {len(arrays)} arrays; the model's state dict has "
                                 f"{len(self.names.order)} ({', '.join(self.names.order[:3])}, ...), in that order")
            record = ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(self.names.order, arrays, strict=True)})
            check_examples(fit.num_examples, where, f"{self.what}'s client", "fit returned num_examples")
            metrics = {**scalar_metrics(fit.metrics), "num-examples": float(fit.num_examples)}
            return Reply(from_record(self.layout, record, where, self.names.fixed), memory, metrics)
        records = reply.content.array_records
        replied = model_less(reply.content, self.layout)
        if replied is not None:
            raise InputError(where, no_model(f"{self.what} replied with {replied}"))
        weights = from_record(self.layout, next(iter(records.values())), where, self.names.fixed)
        return Reply(weights, memory, reply_metrics(reply, where, self.what))


def no_model(found: str) -> str:
    """Why an app that exchanges no model cannot run under an algorithm that trains one, and what runs it; ``found``
    says what the app sends in the model's place."""
    return ("the algorithm trains a model, so it needs the ClientApp to reply to each train message with the model's "
            f"weights as one ArrayRecord; {found}: this app exchanges no model (as a vertical or analytics app "
            "does), so run it under its own ServerApp (the entry {name: serverapp}: simfl flwr run APP_DIR without "
            "algorithms), a rule that needs no model of simfl's")


def _records(content: RecordDict) -> str:
    """A RecordDict's records in a few words: ``MetricRecord 'metrics', ConfigRecord 'config'``."""
    shown = [f"{type(r).__name__} {k!r}" for k, r in list(content.items())[:4]]
    return ", ".join(shown) + (", ..." if len(content) > 4 else "") if shown else "no record at all"


def model_less(content: RecordDict, layout: Layout) -> str | None:
    """What a train reply holds in place of the model's weights, in a few words (for :func:`no_model`), or None
    when it holds one ArrayRecord with at least one of the model's tensors (checked further by
    :func:`from_record`)."""
    records = content.array_records
    if not records:
        return f"no ArrayRecord ({_records(content)})"
    if len(records) > 1:
        return f"{len(records)} ArrayRecords ({', '.join(repr(k) for k in list(records)[:4])})"
    (name, record), = records.items()
    if any(s.name in record for s in layout.segments):
        return None
    arrays = ", ".join(f"{k!r} {'x'.join(str(d) for d in a.shape) or 'scalar'} {a.dtype}"
                       for k, a in list(record.items())[:3])
    return (f"the ArrayRecord {name!r} of {arrays or 'no arrays'}{', ...' if len(record) > 3 else ''}, none of "
            f"the model's tensors ({', '.join(repr(n) for n in layout.names[:3])})")


def is_legacy(app: Any) -> bool:
    """Whether a ClientApp wraps a legacy client (``ClientApp(client_fn=...)``: a ``Client`` or ``NumPyClient``
    with ``fit``/``evaluate``), which reads the legacy record layout (``FitIns``/``EvaluateIns``)."""
    return getattr(app, "_call", None) is not None


def legacy_content(arrays: ArrayRecord, config: Mapping[str, Any], kind: str) -> RecordDict:
    """The content Flower's legacy server sends a client: ``FitIns`` (train) or ``EvaluateIns`` (evaluate) of
    the arrays, as NumPy arrays in state-dict order, and the config."""
    from flwr.common import EvaluateIns, FitIns, MessageType, ndarrays_to_parameters
    from flwr.compat.common.recorddict_compat import evaluateins_to_recorddict, fitins_to_recorddict

    parameters = ndarrays_to_parameters([a.numpy() for a in arrays.values()])
    if kind == MessageType.TRAIN:
        return fitins_to_recorddict(FitIns(parameters, dict(config)), keep_input=True)
    return evaluateins_to_recorddict(EvaluateIns(parameters, dict(config)), keep_input=True)


def reply_metrics(reply: Any, where: str, what: str) -> dict[str, float]:
    """The scalars of a reply's MetricRecord ({} without one; more than one is refused); its ``num-examples``, when
    there, checked (:func:`check_examples`)."""
    metric_records = reply.content.metric_records
    if len(metric_records) > 1:
        raise InputError(where, f"the reply holds {len(metric_records)} MetricRecords; Flower's strategies "
                         "take at most one")
    if not metric_records:
        return {}
    record = next(iter(metric_records.values()))
    if "num-examples" in record:
        check_examples(record["num-examples"], where, what, "replied num-examples")
    return scalar_metrics(record)


def check_examples(value: Any, where: str, what: str, did: str) -> None:
    """Refuse a reply's example count unless it is a positive whole number (an int, or a float of whole value).

    Flower's FedAvg family weights each reply by its count over the round's total: a zero count in every
    reply of a round divides by zero there, and a negative, fractional or non-finite one gives weights
    that are no average. Every simfl client holds at least one sample (partitions never leave a client
    empty), so a client that trained replies a count of at least 1; zero is refused rather than let
    through to fail later in the strategy, blamed on it.
    """
    whole = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) \
        and float(value).is_integer() and 1 <= value < 2**63
    if not whole:
        raise refused(where, what, value, "a positive whole number (the examples trained on, which Flower's "
                      "strategies weight by)", did=did)


def legacy_result(convert: Callable[[Any], Any], reply: Any, where: str, what: str, call: str) -> Any:
    """A legacy client's reply as Flower's ``FitRes``/``EvaluateRes`` (``convert``, Flower's own reader), after
    checking its metrics: each value one of Flower's scalars (:data:`LEGACY_SCALARS`), as Flower's legacy
    server requires; a list or a dict is refused in one line naming the client's ``call`` and the metric."""
    for name, record in reply.content.config_records.items():
        if name.endswith(".metrics"):
            for key, value in record.items():
                if not isinstance(value, LEGACY_SCALARS):
                    raise refused(where, f"{what}'s client", value, "a Flower scalar: int, float, bool, str or "
                                  "bytes (simfl keeps the int and float ones)", did=f"{call} returned metric '{key}' =")
    try:
        return convert(reply.content)
    except Exception as exc:  # a reply that is not of the layout the legacy client API gives
        raise UserCodeFailed(where, f"{what}'s client {call} reply cannot be read as Flower's legacy result: "
                             f"{type(exc).__name__}: {exc}", traceback.format_exc()) from None


def has_handler(app: Any, kind: str) -> bool:
    """Whether a ClientApp registered a handler for messages of ``kind`` (``train``, ``evaluate``); a legacy
    one handles both (its client may answer that it does not evaluate)."""
    if is_legacy(app):
        return True
    funcs = getattr(app, "_registered_funcs", None)
    if not isinstance(funcs, dict):  # another Flower release: assume it has (a missing one then fails loudly)
        return True
    return any(key == kind or key.startswith(kind + ".") for key in funcs)


class ClientAppEvaluator(AppCaller):
    """Calls a ClientApp's ``evaluate`` handler on the global weights (federated evaluation, in this process)."""

    def __init__(self, client: ClientConfig, model: nn.Module, layout: Layout,
                 shards: Sequence[tuple[torch.Tensor, torch.Tensor]], seed: int,
                 memory: Callable[[int], torch.Tensor | None]) -> None:
        super().__init__(client, model, layout, shards, seed)
        self.memory = memory

    def __call__(self, client: int, weights: torch.Tensor, config: Mapping[str, Any], label: str | None = None
                 ) -> dict[str, int | float] | None:
        """The client's evaluation metrics, or None when its (legacy) client does not evaluate; ``label`` names the
        evaluation in messages (default: ``evaluation of round R``, R the config's ``server-round``)."""
        from flwr.app import MessageType

        round_ = config.get("server-round", "?")
        where = f"client.flower_app (client {client}, node {client + 1}, {label or f'evaluation of round {round_}'})"
        reply, _ = self.call(MessageType.EVALUATE, client, weights, config, self.memory(client), None,
                             f"{client}.evaluate.{round_}", where)
        if self.legacy:
            return self._legacy_metrics(reply, where)
        metrics = reply_metrics(reply, where, self.what)
        if "num-examples" not in metrics:
            raise InputError(where, "the evaluate reply's MetricRecord lacks 'num-examples', which Flower's "
                             "strategies weight by")
        return whole_examples(metrics)

    def _legacy_metrics(self, reply: Any, where: str) -> dict[str, int | float] | None:
        """A legacy client's ``EvaluateRes`` as reply metrics (``eval_loss`` is its loss); None when the client
        does not implement ``evaluate``."""
        from flwr.common import Code
        from flwr.compat.common.recorddict_compat import recorddict_to_evaluateres

        result = legacy_result(recorddict_to_evaluateres, reply, where, self.what, "evaluate")
        if result.status.code == Code.EVALUATE_NOT_IMPLEMENTED:
            return None
        if result.status.code != Code.OK:
            raise UserCodeFailed(where, f"the client's evaluate replied {result.status.code.name}: "
                                 f"{result.status.message}", "")
        check_examples(result.num_examples, where, f"{self.what}'s client", "evaluate returned num_examples")
        return {"num-examples": int(result.num_examples), "eval_loss": float(result.loss),
                **scalar_metrics(result.metrics)}
