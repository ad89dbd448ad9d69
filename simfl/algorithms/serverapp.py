"""A Flower ServerApp run as written, its messages delivered in virtual time.

``algorithms: [{name: serverapp, app: "my_app.server_app:app"}]`` (what ``simfl flwr run APP_DIR``
writes) calls the app's ``main(grid, context)`` once per run, in a thread of the simulating process,
with a simfl :class:`SimGrid`. The app and the simulation take turns, never both at once:

1. The simulation opens a round when clients are free (:meth:`ServerAppRounds.choose`) and hands over
   to the app, whose ``grid.get_node_ids()`` answers those clients (node id = client + 1), as the
   :mod:`simfl.algorithms.flower` bridge's grid does.
2. The app runs (Flower's ``Strategy.start`` or a loop of its own: ``configure_train``, the server-side
   ``evaluate_fn``, logging) until it asks the grid for replies (``send_and_receive``, or
   ``push_messages`` then ``pull_messages``). Its ``train`` messages open the round on their nodes;
   simfl dispatches those clients with their latencies, deadlines and failures, each trained by the
   scenario's ClientApp from the message's arrays with the message's config.
3. When the round closes, the replies of the clients that delivered (their trained arrays and a
   MetricRecord, as :mod:`simfl.algorithms.flower` builds them) are what the app's call returns, at the
   next opening. ``evaluate`` messages are answered at once, costing no virtual time (the latency
   model times training rounds), by the ClientApp's ``evaluate`` handler
   (:mod:`simfl.train.client_eval`).
4. When ``main`` returns, no round opens again and the run ends there (:attr:`ServerAppRounds.finished`),
   whatever is left of the budget; the app's code after its rounds (saving its model) has run.

What the app's ``Strategy.start`` returns (Flower's ``Result``) is kept: its final arrays are the
run's final model (the evaluation of the last row), and its per-round metrics are three
tables beside ``metrics.csv``: ``train.csv`` (``train_metrics_clientapp``), ``federated.csv``
(``evaluate_metrics_clientapp``) and ``server.csv`` (``evaluate_metrics_serverapp``), each a row per round
(Flower's numbering, from 1; the server's round 0 is its evaluation of the initial model). Between
rounds simfl's evaluation grid scores the model the app sent last. An app with a loop of its own
(no ``Strategy.start``) writes none of the three.

Same seed, same numbers: while the app runs, Python's, NumPy's and torch's global generators are seeded
from ``(seed, "serverapp", r)`` for its r-th turn and put back after, so Flower's node sampling and an
app's ``Net()`` are the same each time. A ``pull_messages`` returns when the round of its messages
closed (the replies of the clients that delivered by then), not as soon as any reply is in: simfl has
no wall-clock polling, and this is what ``send_and_receive`` does.

The app's ``main`` raising, or its messages going where they cannot (a node that is not free, arrays
other than the model's), is one line naming the app, exit 2 (:func:`simfl.errors.user_call`). The app's
thread holds Python state that no checkpoint can carry, so such a run is not checkpointed.

The app's own model and evaluation (``model: flower_app``): :func:`probe` runs ``main`` until its first
train message, as the run's first turn does, and returns that message's config and arrays and the
``evaluate_fn`` the app gave ``Strategy.start`` (:func:`_tap`); :class:`AppEvaluation` scores simfl's
evaluation grid with that ``evaluate_fn``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import queue
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from simfl import rng
from simfl.algorithms.base import Arrival, Setup, SyncAlgorithm
from simfl.algorithms.configs import ServerAppConfig
from simfl.algorithms.flower import train_metrics
from simfl.algorithms.flower_strategies import load_server_app
from simfl.errors import InputError, UserCodeFailed, user_call
from simfl.models.flat import Layout
from simfl.train import flower
from simfl.train.configs import require
from simfl.train.evaluate import Scores
from simfl.train.message import Message

if TYPE_CHECKING:
    from flwr.app import Message as FlowerMessage

WHERE = "algorithms.app"
MAX_POLLS = 5
"""Asks for the nodes in a row, with every client free, after which an app waiting for more nodes is refused (each
costs the app's own wait between asks: Flower's sample_nodes sleeps 1 s)."""


class _Ended(BaseException):
    """The run ended while the app waited on the grid: unwinds the app's thread."""


_RUN: contextvars.ContextVar[Handoff | None] = contextvars.ContextVar("simfl_serverapp_run", default=None)
"""The ServerApp's run whose thread this is: where ``Strategy.start`` puts its Result and evaluate_fn (:func:`_tap`)."""


def _tap() -> None:
    """Make ``flwr.serverapp.strategy.Strategy.start`` hand its ``evaluate_fn`` and its Result to the ServerApp's run
    that called it (once per process; elsewhere it behaves as before)."""
    from flwr.serverapp.strategy import Strategy

    original = Strategy.start
    if getattr(original, "_simfl_tap", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        run = _RUN.get()
        if run is not None:
            with contextlib.suppress(TypeError):  # a call Flower refuses is Flower's to report
                run.evaluate_fn = signature.bind(self, *args, **kwargs).arguments.get("evaluate_fn")
        result = original(self, *args, **kwargs)
        if run is not None:
            run.results.append(result)
        return result

    start._simfl_tap = True  # type: ignore[attr-defined]
    Strategy.start = start  # type: ignore[method-assign]


def result_rows(metrics: Mapping[int, Any]) -> list[dict[str, Any]]:
    """A Result's per-round MetricRecords as rows: ``round``, then the numbers."""
    return [{"round": int(r), **flower.scalar_metrics(m)} for r, m in sorted(metrics.items())]


@dataclass
class _Turn:
    """What the app hands the simulation: messages to deliver, or the end of ``main``."""

    kind: Literal["messages", "wait", "done", "failed"]
    messages: list[Any] = field(default_factory=list)
    error: BaseException | None = None


@contextlib.contextmanager
def seeded(seed: int, *key: int | str) -> Iterator[None]:
    """Python's, NumPy's and torch's global generators seeded from ``(seed, "serverapp", *key)`` (``key``: the app's
    turn), restored after."""
    py_state, np_state, torch_state = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    draw = rng.stream(seed, "serverapp", *key)
    random.seed(int(draw.integers(2**63)))
    np.random.seed(int(draw.integers(2**32)))
    torch.manual_seed(int(draw.integers(2**63)))
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        torch.random.set_rng_state(torch_state)


class Handoff:
    """The app's thread and the simulation's, taking turns through two queues."""

    def __init__(self, main: Any, what: str) -> None:
        self.to_sim: queue.Queue[_Turn] = queue.Queue()
        self.to_app: queue.Queue[Any] = queue.Queue()
        self.ended = False
        self.results: list[Any] = []
        """What the app's ``Strategy.start`` calls returned, in order."""
        self.evaluate_fn: Callable[[int, Any], Any] | None = None
        """The ``evaluate_fn`` the app gave ``Strategy.start`` last (its server-side evaluation), if any."""
        self.thread = threading.Thread(target=self._run, args=(main, what), name="simfl-serverapp", daemon=True)

    def _run(self, main: Any, what: str) -> None:
        _RUN.set(self)
        try:
            user_call(WHERE, what, main)
        except (UserCodeFailed, InputError, KeyboardInterrupt) as exc:
            if not self.ended:
                self.to_sim.put(_Turn("failed", error=exc))
            return
        self.to_sim.put(_Turn("done"))

    def ask(self, messages: list[Any], kind: Literal["messages", "wait"] = "messages") -> list[Any]:
        """In the app's thread: hand ``messages`` over and wait for their replies (``wait``: for more nodes)."""
        self.to_sim.put(_Turn(kind, messages))
        answer = self.to_app.get()
        if answer is _Ended:
            raise _Ended()
        return answer  # type: ignore[no-any-return]

    def turn(self, answer: list[Any] | None) -> _Turn:
        """In the simulation's thread: give the app ``answer`` (None: start it) and wait for its next turn."""
        if answer is None:
            self.thread.start()
        else:
            self.to_app.put(answer)
        return self.to_sim.get()

    def end(self) -> None:
        """Unwind an app still waiting on the grid (its thread raises :class:`_Ended` there)."""
        if self.thread.is_alive() and not self.ended:
            self.ended = True
            self.to_app.put(_Ended)
            self.thread.join(10.0)


def sim_grid(handoff: Handoff, nodes: list[int]) -> Any:
    """A Flower Grid whose messages the simulation delivers: ``get_node_ids()`` is ``nodes`` (kept up to date
    by the caller), ``push_messages`` queues, ``pull_messages`` hands the queue over and waits for the round."""
    from flwr.app import Message as FlowerMessage
    from flwr.serverapp import Grid
    from flwr.supercore.run import Run

    class SimGrid(Grid):
        def __init__(self) -> None:
            self._run = Run.create_empty(1)
            self.pushed: dict[str, Any] = {}
            self.replies: dict[str, Any] = {}
            self.count = 0
            self.polls = 0
            """get_node_ids() calls since the app last sent messages: a second one waits for more nodes."""

        def set_run(self, run: Any) -> None:
            self._run = run

        @property
        def run(self) -> Any:
            return self._run

        def create_message(self, content: Any, message_type: str, dst_node_id: int, group_id: str,
                           ttl: float | None = None) -> Any:
            return FlowerMessage(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

        def get_node_ids(self) -> list[int]:
            self.polls += 1
            if self.polls > 1:  # asked again without sending: the app waits for nodes to connect
                handoff.ask([], "wait")
            return list(nodes)

        def push_messages(self, messages: Iterable[Any]) -> list[str]:
            ids: list[str] = []
            self.polls = 0
            for message in messages:
                if not isinstance(message, FlowerMessage):
                    raise InputError(WHERE, f"the ServerApp pushed a {type(message).__name__}, not a flwr.app.Message")
                self.count += 1
                message.metadata.__dict__["_message_id"] = str(self.count)
                self.pushed[str(self.count)] = message
                ids.append(str(self.count))
            return ids

        def pull_messages(self, message_ids: Iterable[str]) -> list[Any]:
            """The replies to ``message_ids`` in the order they arrived (virtual time, then dispatch order)."""
            wanted = {str(i) for i in message_ids}
            if wanted & set(self.pushed):
                sent, self.pushed = list(self.pushed.values()), {}
                for reply in handoff.ask(sent):
                    self.replies[reply.metadata.reply_to_message_id] = reply
            found = [i for i in self.replies if i in wanted]
            return [self.replies.pop(i) for i in found]

        def send_and_receive(self, messages: Iterable[Any], *, timeout: float | None = None) -> list[Any]:
            ids = self.push_messages(messages)
            return self.pull_messages(ids) if ids else []

    return SimGrid()


def with_weights(layout: Layout, weights: torch.Tensor, original: Mapping[str, Any]) -> Any:
    """The ArrayRecord of ``original``'s entries (Arrays, in its order), the layout's tensors taken from ``weights``:
    what simfl hands the app, keeping the entries it does not train (integer buffers)."""
    from flwr.app import ArrayRecord

    trained = flower.to_record(layout, weights)
    return ArrayRecord({k: trained[k] if k in trained else original[k] for k in original})


def launch(path: str, run_config: Mapping[str, Any], nodes: list[int]) -> Handoff:
    """The ServerApp at ``path``, ready to start on a grid listing ``nodes`` (kept up to date by the caller), with a
    server context holding ``run_config``; its ``Strategy.start`` results go to the handoff's ``results``."""
    require(WHERE)
    from flwr.app import Context, RecordDict

    flower.prepare()
    _tap()
    app = load_server_app(path, WHERE)
    context = Context(run_id=1, node_id=flower.SERVER_NODE, node_config={}, state=RecordDict(),
                      run_config=dict(run_config))
    grid: Any = None
    handoff = Handoff(lambda: app(grid, context), f"the ServerApp {path}")
    grid = sim_grid(handoff, nodes)
    return handoff


class ServerAppRounds(SyncAlgorithm[ServerAppConfig]):
    """Rounds whose nodes, messages and aggregation are a Flower ServerApp's (module docstring)."""

    Config = ServerAppConfig

    def __init__(self, config: ServerAppConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.what = f"the ServerApp {config.app}"
        self.nodes: list[int] = []
        """The node ids the app's grid lists: the clients free at the latest opening, + 1."""
        self.handoff = launch(config.app, config.run_config, self.nodes)
        self.exchanged = set(setup.layout.names)
        self.w = setup.init.clone()
        self.turns = 0
        self.told = False
        """The app was said to train on data of its own (:meth:`_own_data`)."""
        self.rounds = 0
        """Train rounds opened (Flower's numbering: the first is round 1)."""
        self.offered = 0
        """Nodes the open round's app saw free."""
        self.started = False
        self.finished = False
        """``main`` returned: no round opens again."""
        self.sent: dict[int, Any] = {}
        """The open round's train message to each client."""
        self.answer: list[Any] | None = None
        """The replies of the round that closed last, for the app's next turn."""

    @property
    def clients_per_round(self) -> int:
        """Every node the app sent a message waits for it (a round closes earlier only at a deadline)."""
        return max(1, len(self.sent))

    def choose(self, round_index: int, free: list[int]) -> list[int]:
        if self.finished:
            return []
        self.nodes[:] = [c + 1 for c in free]
        answer = (self.answer or []) if self.started else None  # [] after a round with no delivery
        if self.sent and self.setup.say is not None:
            results = len(answer or [])
            self.setup.say(f"[ROUND {self.rounds}] sampled {len(self.sent)} nodes (out of {self.offered}), received "
                           f"{results} results and {len(self.sent) - results} failures")
        self.answer, self.started = None, True
        polls = 0
        while True:
            self.turns += 1
            with seeded(self.setup.seed, self.turns):
                turn = self.handoff.turn(answer)
            if turn.kind == "done":
                self._finish()
                return []
            if turn.kind == "wait":
                if len(free) < self.setup.num_clients:
                    return []  # the round waits in virtual time until a client is free, then lists the nodes again
                polls += 1
                if polls >= MAX_POLLS:
                    raise InputError(WHERE, f"{self.what} asked for the nodes {polls} times without sending a message "
                                     f"while all {len(free)} clients were free: it waits for more nodes than the "
                                     "federation has (its strategy's min_available_nodes or sample size?)")
                answer = []
                continue
            if turn.kind == "failed":
                assert turn.error is not None
                raise turn.error
            kinds = {flower.message_kind(m) for m in turn.messages}
            if kinds == {"evaluate"}:
                answer = [self._evaluated(m, free) for m in turn.messages]
                continue
            if kinds != {"train"}:
                raise InputError(WHERE, f"{self.what} sent messages of type {sorted(kinds)} together; simfl delivers "
                                 "train messages (a round of training) and evaluate messages (answered at once), "
                                 "each sent on their own")
            return self._open(turn.messages, free)

    def _finish(self) -> None:
        """``main`` returned: its last Result's arrays are the final model."""
        self.finished = True
        if self.handoff.results and self.handoff.results[-1].arrays is not None:
            self.w = self._flat(self.handoff.results[-1].arrays)

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """The last Result's per-round metrics (module docstring); none before ``main`` returned one."""
        if not self.handoff.results:
            return {}
        result = self.handoff.results[-1]
        return {"train": result_rows(result.train_metrics_clientapp),
                "federated": result_rows(result.evaluate_metrics_clientapp),
                "server": result_rows(result.evaluate_metrics_serverapp)}

    def _client(self, message: FlowerMessage, free: list[int]) -> int:
        client = int(message.metadata.dst_node_id) - 1
        if client not in free:
            raise InputError(WHERE, f"{self.what} sent a message to node {client + 1}, which is not one of the free "
                             f"nodes grid.get_node_ids() listed ({len(free)} of them); ask it each round")
        return client

    def _weights(self, message: FlowerMessage) -> tuple[torch.Tensor, dict[str, Any]]:
        """The message's model arrays as flat weights, and its config (every ConfigRecord's entries)."""
        records = message.content.array_records
        if len(records) != 1:
            raise InputError(WHERE, f"{self.what} sent node {message.metadata.dst_node_id} {len(records)} "
                             "ArrayRecords; simfl carries one, the model's")
        (record,) = records.values()
        return self._flat(record), flower.message_config(message)

    def _flat(self, record: Any) -> torch.Tensor:
        """An app's ArrayRecord as flat weights: the model's tensors, its integer entries (buffers simfl does not
        exchange) ignored."""
        fixed = {k: None for k in record if k not in self.exchanged
                 and not np.issubdtype(record[k].numpy().dtype, np.floating)}
        return flower.from_record(self.setup.layout, record, WHERE, fixed)

    def _open(self, messages: list[Any], free: list[int]) -> list[int]:
        """The round of the app's train ``messages``: every node is sent the same model."""
        self.sent = {}
        self.rounds += 1
        self.offered = len(free)
        for message in messages:
            client = self._client(message, free)
            if client in self.sent:
                raise InputError(WHERE, f"{self.what} sent node {client + 1} two train messages in one round")
            weights, config = self._weights(message)
            if self.sent and not torch.equal(weights, self.w):
                raise InputError(WHERE, f"{self.what} sent node {client + 1} other arrays than the round's other "
                                 "nodes; simfl sends one model per round")
            self.w = weights
            self.sent[client] = (message, config)
        return sorted(self.sent)

    def _evaluated(self, message: FlowerMessage, free: list[int]) -> Any:
        """The reply of an evaluate message, at once (no virtual time)."""
        from flwr.app import Message as FlowerMessage
        from flwr.app import MetricRecord, RecordDict

        evaluate = self.setup.evaluate_client
        if evaluate is None:
            raise InputError(WHERE, f"{self.what} sent an evaluate message in pure-latency mode (executor: none), "
                             "where no client evaluates")
        client = self._client(message, free)
        weights, config = self._weights(message)
        metrics = evaluate(client, weights, config)
        return FlowerMessage(RecordDict({"metrics": MetricRecord(dict(metrics))}), reply_to=message)  # type: ignore[arg-type]

    def round_weights(self) -> torch.Tensor:
        return self.w

    def message(self, client: int, round: int) -> Message:
        return Message(config=dict(self.sent[client][1]))

    def aggregate(self, arrivals: list[Arrival]) -> None:
        """The round's replies wait for the app's next turn (the next opening)."""
        from flwr.app import Message as FlowerMessage
        from flwr.app import MetricRecord, RecordDict

        replies = []
        for a in arrivals:
            self._own_data(a)
            sent = self.sent[a.client][0]
            (original,) = sent.content.array_records.values()
            arrays = with_weights(self.setup.layout, a.weights, original)
            content = RecordDict({"arrays": arrays, "metrics": MetricRecord(dict(train_metrics(a)))})  # type: ignore[arg-type]
            replies.append(FlowerMessage(content, reply_to=sent))
        self.answer = replies

    def _own_data(self, arrival: Arrival) -> None:
        """Say once when a reply's ``num-examples`` is not the client's partition size: the app trains on data of
        its own, not on the scenario's partition (which still sets the sample counts latencies may scale with)."""
        examples = arrival.metrics.get("num-examples")
        if (self.told or not self.setup.data_held or examples is None or int(examples) == arrival.num_samples
                or self.setup.say is None):
            return
        self.told = True
        self.setup.say(f"the ClientApp reports {int(examples)} examples for node {arrival.client + 1}, whose partition "
                       f"in data.partition holds {arrival.num_samples}: the app trains on data of its own, and "
                       "data.partition sets only the sample counts that workload-scaled latencies and by_data "
                       "selection read")

    def global_weights(self) -> torch.Tensor:
        """The model the app sent last (its aggregate once it opens the next round)."""
        return self.w

    def close(self) -> None:
        self.handoff.end()

    def state(self) -> dict[str, Any]:
        raise InputError("--checkpoint-every", f"a run of {self.what} cannot be checkpointed: the app's main is "
                         "Python code under way, which no file can carry; run it without --checkpoint-every")

    def load_state(self, state: Mapping[str, Any]) -> None:  # pragma: no cover - state() never returns
        raise InputError("--resume", f"a run of {self.what} cannot be resumed")


@dataclass
class AppStart:
    """What a ServerApp's ``main`` does before its first round (:func:`probe`)."""

    config: dict[str, Any]
    """The config of its first train message (``server-round`` left out): what a train message of simfl's own
    algorithms carries to the same ClientApp (``client.train_config``); {} when ``main`` sends none."""
    arrays: dict[str, np.ndarray] | None
    """The arrays of its first train message, by name (the app's initial model); None when it sends none."""
    evaluate_fn: Callable[[int, Any], Any] | None
    """The ``evaluate_fn`` it gave ``Strategy.start`` (its server-side evaluation); None: none."""


def probe(path: str, run_config: Mapping[str, Any], nodes: int, seed: int) -> AppStart:
    """Run the ServerApp at ``path`` on a grid of ``nodes`` free nodes until its first train message, as the
    run's first turn does (seeded alike, so its initial model is the one a ServerApp run of ``seed`` starts from),
    then unwind it."""
    handoff = launch(path, run_config, list(range(1, nodes + 1)))
    try:
        with seeded(seed, 1):
            turn = handoff.turn(None)
            for _ in range(MAX_POLLS):
                if turn.kind != "wait":
                    break
                turn = handoff.turn([])
        if turn.kind == "wait":
            raise InputError(WHERE, f"the ServerApp {path} waits for more nodes than the federation's {nodes}")
        if turn.kind == "failed":
            assert turn.error is not None
            raise turn.error
        for message in turn.messages:
            if flower.message_kind(message) == "train":
                config = flower.message_config(message)
                config.pop("server-round", None)
                records = list(message.content.array_records.values())
                arrays = {k: np.array(v.numpy(), copy=True) for k, v in records[0].items()} if len(records) == 1 else None
                return AppStart(config, arrays, handoff.evaluate_fn)
        return AppStart({}, None, handoff.evaluate_fn)
    finally:
        handoff.end()


class AppEvaluation:
    """simfl's evaluation grid scored by the app's own server-side ``evaluate_fn`` (its model is the app's, which
    simfl cannot run): its MetricRecord's ``accuracy`` (or ``acc``) and ``loss`` are the row's scores, NaN where it
    gives none. The k-th call is the app's round k - 1 (the first scores the initial model, as Flower's round 0),
    its global generators seeded from ``(seed, "serverapp", "evaluate", k)``."""

    def __init__(self, layout: Layout, start: AppStart, seed: int) -> None:
        from flwr.app import Array

        assert start.evaluate_fn is not None and start.arrays is not None
        self.layout, self.evaluate_fn, self.seed = layout, start.evaluate_fn, seed
        self.template = {k: Array(v) for k, v in start.arrays.items()}
        self.calls = 0

    def __call__(self, weights: torch.Tensor) -> Scores:
        arrays = with_weights(self.layout, weights, self.template)
        self.calls += 1
        with seeded(self.seed, "evaluate", self.calls):
            record = user_call(WHERE, "the ServerApp's evaluate_fn", lambda: self.evaluate_fn(self.calls - 1, arrays))
        scores = flower.scalar_metrics(record) if record is not None else {}
        accuracy = scores.get("accuracy", scores.get("acc", float("nan")))
        return Scores(accuracy=float(accuracy), loss=float(scores.get("loss", float("nan"))))
