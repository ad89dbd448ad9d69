"""The simulation's state as plain data: clients, counters, pending wake-ups, the event trace and metrics.

State is data (docs/architecture.md): the world's handlers and the schedulers
keep everything they need between events in a :class:`SimState`, including
the pending wake-ups (:class:`~simfl.sim.clock.Wake`), so a run can be
inspected, checked and saved between events and rebuilt from that data alone.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from simfl.sim.clock import Wake, wake_of
from simfl.sim.link import PHASE_COLUMNS, NetState
from simfl.train.message import Message

if TYPE_CHECKING:  # annotations only: the state is plain data and loads without torch
    import torch

EventKind = Literal["arrival", "failure", "leave", "join", "late"]
"""``late``: a synchronous round had already closed (deadline or K arrivals) when the update came in; discarded."""
Phase = Literal["idle", "round", "rejoin", "absent", "gone"]
"""What a client is doing: nothing pending, a round in flight, waiting to restart after a failed round,
away until a scheduled return, away for good."""


@dataclass(slots=True)
class ClientState:
    """What the server knows about one client (slotted: a population holds one per client)."""

    index: int
    num_samples: int
    tau: int = 0
    """The update counter t when the client last talked to the server (0 at the start)."""
    rounds: int = 0
    """Rounds started so far; the current round's index is ``rounds - 1``."""
    start: torch.Tensor | None = None
    """Flat weights the current round started from."""
    message: Message | None = None
    """What the server sent with them (kept so a resumed run resubmits the same job); None: nothing in flight."""
    dispatch_time: float = 0.0
    latency: float = 0.0
    seq: int = -1
    """Dispatch sequence number: ties in arrival time are processed in this order."""
    handle: int | None = None
    """Executor handle of the current round's training job (None: nothing in flight)."""
    fails: bool = False
    """True when the current round will fail (decided at dispatch)."""
    active: bool = True
    """False while the client has left the federation."""
    phase: Phase = "idle"
    outcome: bool | None = None
    """Synchronous rounds: whether the client's round in the open round delivered (None: still running)."""
    memory: torch.Tensor | None = None
    """What the client keeps on its device between rounds (:data:`simfl.train.message.MEMORY`; None: nothing)."""
    epochs: int | None = None
    """The epochs of the round in flight once an asynchronous rule recalled it (:meth:`simfl.sim.world.World.recall`:
    its job and its end cut at an epoch boundary); None: the round trains every epoch of ``train.epochs``."""

    @property
    def arrival_time(self) -> float:
        return self.dispatch_time + self.latency


class Event(NamedTuple):
    """One row of events.csv: a processed arrival (or a failure, departure, rejoin).

    A tuple: read-only, and built on an arrival's path in one C call (``tuple.__new__(Event, values)``
    with all eight values; the named tuple's own constructor, and a dataclass's ``__init__``, are Python
    functions).
    """

    time: float
    update: int | None
    client: int
    staleness: int | None
    latency: float | None
    dispatch_time: float | None
    weight: float | None
    event: EventKind = "arrival"

    @staticmethod
    def columns() -> list[str]:
        """events.csv's columns: the fields in order (an event is its values in that order)."""
        return list(Event._fields)

    def row(self) -> dict[str, Any]:
        """The events.csv row: column name to value."""
        return dict(zip(Event._fields, self, strict=True))


@dataclass(frozen=True)
class Metric:
    """One row of metrics.csv: the evaluated global model at one virtual time."""

    virtual_time: float
    updates: int
    accuracy: float
    loss: float
    extra: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "virtual_time": self.virtual_time, "updates": self.updates,
            "accuracy": self.accuracy, "loss": self.loss,
        }
        out.update(self.extra)
        return out


@dataclass
class SimState:
    """Everything the engine tracks between events."""

    clients: list[ClientState]
    now: float = 0.0
    updates: int = 0
    """t: arrivals processed so far."""
    seq: int = 0
    """Next dispatch sequence number."""
    rounds: int = 0
    """Synchronous rounds completed."""
    events: list[Event] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    stopped: bool = False
    records: dict[str, Any] = field(default_factory=dict)
    """Optional per-run arrays filled by observers (e.g. ``layer_changes``); written as ``<name>.npy``."""
    pending: dict[int, Wake] = field(default_factory=dict)
    """The wake-ups still to come when the state was taken as data (a checkpoint, the end of a run), by creation
    order (:attr:`Wake.order`); while a run goes, its clock holds them (:meth:`~simfl.sim.clock.Clock.pending`)."""
    wakes: int = 0
    """Wake-ups created so far (the next :attr:`Wake.order`; taken with :attr:`pending`)."""
    server_phase: Literal["wait", "busy", "open", "server", "starved"] = "wait"
    """Async server: waiting for an arrival, or busy for ``server_time`` before re-dispatching
    ``server_client``. Sync rounds: a round is open, the server is aggregating, or no client is free."""
    server_client: int | None = None
    server_weights: torch.Tensor | None = None
    queue: list[int] = field(default_factory=list)
    """Async arrivals waiting for the server (only while it is busy)."""
    round_members: list[int] = field(default_factory=list)
    """Clients selected for the open synchronous round, in selection order."""
    eval_index: int = 0
    """Index i of the next evaluation, at virtual time i * every."""
    checkpoint_index: int = 1
    """Next time-based checkpoint at ``checkpoint_index * interval``."""
    next_checkpoint_update: int = 0
    """Update-based checkpoints: the next one is due once ``updates`` reaches this."""
    selections: int = 0
    """Cross-device serving (scenario ``server:``): draws taken from the selection stream so far."""
    dry: int = 0
    """Client rounds ended without an update (failed, lost, late) since the last update."""
    network: NetState | None = None
    """Rounds in phases (scenario ``network:``): the transfers over the server's links and each round's phases
    (:mod:`simfl.sim.link`); None: a round is one draw."""
    phases: list[tuple[float | None, ...]] | None = None
    """Rounds in phases: per row of :attr:`events`, when each phase of its round began and ended
    (:data:`~simfl.sim.link.PHASE_COLUMNS`; None where a phase did not happen). None: a round is one draw."""

    def in_flight(self) -> int:
        """Clients with a round under way."""
        return sum(1 for c in self.clients if c.phase == "round")

    def event_columns(self) -> list[str]:
        """events.csv's columns: :meth:`Event.columns`, and the phases' when rounds run in phases."""
        return Event.columns() if self.phases is None else [*Event.columns(), *PHASE_COLUMNS]

    def event_rows(self, start: int = 0) -> list[tuple[Any, ...]]:
        """events.csv's rows from row ``start``, in :meth:`event_columns`' order."""
        events = self.events[start:]
        if self.phases is None:
            return events  # type: ignore[return-value]  # each row is its values
        return [(*e, *p) for e, p in zip(events, self.phases[start:], strict=True)]

    def to_data(self) -> dict[str, Any]:
        """Plain data for a checkpoint: numbers, strings, lists, dicts and tensors only (no handles)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        memo: dict[int, Any] = {}  # one copy of a tensor the clients share (the global version they started from)
        data["clients"] = [_client_data(c, memo) for c in self.clients]
        data["events"] = [tuple(e) for e in self.events]
        data["metrics"] = [asdict(m) for m in self.metrics]
        data["pending"] = [(w.kind, w.order, w.time, w.target) for w in sorted(self.pending.values(), key=lambda w: w.order)]
        data["network"] = None if self.network is None else self.network.to_data()
        data["phases"] = None if self.phases is None else list(self.phases)
        return data

    @staticmethod
    def from_data(data: dict[str, Any]) -> SimState:
        """Rebuild a state from :meth:`to_data` output."""
        values = dict(data)
        values["clients"] = [_client_from_data(c) for c in data["clients"]]
        values["events"] = [Event(*e) for e in data["events"]]
        values["metrics"] = [Metric(**m) for m in data["metrics"]]
        wakes = [wake_of(*w) for w in data["pending"]]
        values["pending"] = {w.order: w for w in wakes}
        network = data.get("network")
        values["network"] = None if network is None else NetState.from_data(network)
        phases = data.get("phases")
        values["phases"] = None if phases is None else [tuple(p) for p in phases]
        return SimState(**values)


_CLIENT_FIELDS = tuple(f.name for f in fields(ClientState))
_COPIED = frozenset(("start", "message", "memory"))
"""The fields of a client that hold more than a number or a string."""


def _client_data(client: ClientState, memo: dict[int, Any]) -> dict[str, Any]:
    """What ``asdict(client)`` gives (its tensors copied, its message as dicts), without ``asdict``'s walk of every
    field of every client: a population's checkpoint is made of 10^5 or 10^6 of them. ``memo``: the copies made for
    the clients before, so that a tensor several clients hold is copied once (500 clients of VGG11 dispatched from
    the same global weights took 17 GiB when each was copied apart)."""
    data = {name: getattr(client, name) for name in _CLIENT_FIELDS}
    for name in _COPIED:
        value = data[name]
        if value is not None:
            data[name] = asdict(value) if name == "message" else copy.deepcopy(value, memo)
    return data


def _client_from_data(data: dict[str, Any]) -> ClientState:
    """The client of ``asdict`` output (checkpoints written before messages have none)."""
    values = dict(data)
    message = values.pop("message", None)
    return ClientState(**values, message=None if message is None else Message.from_data(message))
