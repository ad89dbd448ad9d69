"""A Flower ServerApp run as written, its messages delivered in virtual time, as they are.

``algorithms: [{name: serverapp, app: "my_app.server_app:app"}]`` (what ``simfl flwr run APP_DIR`` writes) calls
the app's ``main(grid, context)`` once per run, in a thread of the simulating process, with a simfl Grid
(:func:`sim_grid`). The app and the simulation take turns, never both at once (:class:`Handoff`):

1. The app's first turn starts ``main`` at time 0; ``grid.get_node_ids()`` answers the clients it may message
   (node id = client + 1): the present ones, a node still working on a message whose call timed out aside.
2. The app runs (Flower's ``Strategy.start``, a workflow such as ``DefaultWorkflow`` with ``SecAggPlusWorkflow``,
   or a loop of its own) until it waits on the grid. ``push_messages`` does not wait: its messages leave when the
   app next waits, at the same virtual time. Every message, of any type (``train``, ``evaluate``, ``query``, a
   custom ``train.x``), with or without arrays, is one client round of its node, and a node works its messages first
   come, first served (several may wait for it): :class:`simfl.sim.messages.MessageServer` times them (each its
   node's next latency draw, from the client's own stream, so the same seed gives the same times), with deadlines,
   failures and departures, and hands each ClientApp the message exactly as the app sent it (Flower's own
   serialisation: float64 arrays stay float64, integer arrays integer, lists lists; :data:`simfl.train.flower.SENT`).
   A turn's messages leave in node order, a node's own in the order pushed.
3. ``send_and_receive`` returns when every one of its messages was replied to, failed or was lost, or when its
   ``timeout`` (virtual seconds; the scenario's ``rounds.deadline`` when smaller) passed: the replies in the order
   they arrived; a reply later than that is dropped (events.csv ``late``), as Flower's would be. ``pull_messages``
   returns the replies to its ids that arrived by now (the current virtual time), in the order they arrived; when
   none has and some are under way, the app waits in virtual time until the next of them arrives, so a loop that
   polls (sleeping between pulls, as Flower's apps do) gets a reply per pull and its numbers never depend on the
   wall clock; with none under way it returns nothing at once.
4. When ``main`` returns, no round opens again and the run ends there (:attr:`ServerAppRounds.finished`), whatever
   is left of the budget; the app's code after its rounds (saving its model) has run.

``main`` starts once per run: what simfl needs from the app is taken as the run goes. The app's model is the app's:
simfl never reads it as weights (its flat state is the version of the model the app sent last,
:func:`simfl.models.arrays.held`); simfl's evaluation grid (``metrics.csv``) scores the arrays of the app's latest
train message with the ``evaluate_fn`` the app gave ``Strategy.start`` (or its legacy strategy's ``evaluate``; NaN
without either), or, when the scenario names a model of its own, those arrays as that model on simfl's test set.

Records, however the app is written: a :class:`Watch` (a trace function in the app's thread only: no class of
Flower's is changed) sees each ``Strategy.start`` the app calls, an override's included (its ``evaluate_fn``, the
``Result`` it returns) and each ``DefaultWorkflow`` it runs (its ``History``). ``train.csv``, ``federated.csv`` and
``server.csv`` are the last Result's per-round metrics (a workflow's History), values as Flower keeps them (lists
as lists); an app with a loop of its own, which returns neither, gets ``train.csv`` and ``federated.csv`` from the
replies of its train and evaluate messages, each round's MetricRecords aggregated as Flower's FedAvg aggregates
them (weighted by ``num-examples``, Flower's own ``aggregate_metricrecords``).

Same seed, same files: each turn of the app runs with the global generators (Python's, NumPy's, torch's) seeded
from ``(seed, "serverapp", turn)`` and put back after (:func:`simfl.rng.global_generators`), and each ClientApp call
from its client's and message's stream, so Flower's node sampling, an app's ``Net()`` and a ClientApp's unseeded
``DataLoader`` shuffle alike in every run of the seed, on any number of workers. Each run has its own run id
(``context.run_id`` and its messages'), drawn from the seed and the run's name.

Bounded and loud: a turn of the app (from the grid's answer to its next call, or to ``main``'s end) may last
``timeout`` wall-clock seconds; a turn still running then ends the run in one line with the app's stack in
``crash.txt``. Only the thread that runs ``main`` may send: a thread of the app's own calling ``push_messages``,
``pull_messages`` or ``send_and_receive`` ends the run in one line, its thread ended without a traceback (its
``get_node_ids`` is answered with the nodes the app's thread was last given, as the legacy client manager's
registration thread asks). A worker of a thread pool ``main`` waits on is not a thread of the app's own: Flower's
legacy ``Server`` runs each client's fit and evaluate in one, and :mod:`simfl.algorithms.legacy_server` sends
their messages as one round from the app's thread, its results read in the order they arrived. ``main`` has ended when it
returned and the threads it started without ``daemon=True`` ended (Python's own end waits for them; the wait is part
of its last turn), so such a thread sending once ``main`` returned ends the run in that line too; an exception ending
a thread ``main`` started is one line naming the app and the thread, its traceback in ``crash.txt``, not printed
(:func:`_app_threads_hook`). Flower's log lines from the app's thread (its ``[ROUND 1/3]``,
aggregation and final summary lines) are said with the virtual time (:attr:`Setup.say`, not under ``--quiet``).

The app's ``main`` raising, or a message to a node the grid does not list, is one line naming the app, exit 2
(:func:`simfl.errors.user_call`). The app's thread holds Python
state that no checkpoint can carry, so such a run is not checkpointed; resumed, it starts again, with the same
numbers.

simfl's own algorithms over the app's ClientApp need the app's model as weights before they start: :func:`probe`
runs ``main`` until its first train message (the one start of ``main`` in such a run) and keeps its arrays and
config, and the ``evaluate_fn`` it gave ``Strategy.start``, which :class:`AppEvaluation` scores the grid with.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from simfl import openmp, rng
from simfl.algorithms import legacy_server
from simfl.algorithms.base import Arrival, Setup, SyncAlgorithm
from simfl.algorithms.configs import ServerAppConfig, run_name
from simfl.algorithms.flower_strategies import load_server_app
from simfl.algorithms.messaging import Messaging, Request, WaitKind
from simfl.errors import InputError, UserCodeFailed, overran, user_call
from simfl.models.arrays import HELD
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
APP_THREAD = "simfl-serverapp"
"""The name of the thread that runs an app's ``main``."""
_WAITS = frozenset({"wait", "as_completed", "result"})
"""The names of ``concurrent.futures``' waits, which :class:`Watch` looks at further."""
_THREAD_INIT = threading.Thread.__init__.__code__
"""What :class:`Watch` sees the app make a thread by."""
_DAEMON_SET = threading.Thread.daemon.fset.__code__  # type: ignore[attr-defined]  # a property, typed as bool
"""What :class:`Watch` sees the app make a thread a daemon by (``thread.daemon = True``, ``setDaemon``)."""


class _Ended(SystemExit):
    """The run ended while the app waited on the grid: unwinds the app's thread (a SystemExit, which a thread ends
    on without a traceback)."""


class _Refused(SystemExit):
    """Ends a thread of the app's own that called the grid (the run ends in one line, in the simulation's thread).
    Python's own ``threading.excepthook`` stays silent only for SystemExit itself, so :func:`_app_threads_hook` keeps
    this one from printing a traceback."""


_LIVE: weakref.WeakSet[Handoff] = weakref.WeakSet()
"""Every app whose threads the process may still run (a Handoff lives as long as its algorithm or its threads)."""
_CHAINED: list[Callable[[threading.ExceptHookArgs], object]] = []
"""The ``threading.excepthook`` that was there before :func:`_app_threads_hook` (the one it hands other threads to)."""
_IN_HOOK = threading.local()


def _app_threads_hook(args: threading.ExceptHookArgs) -> None:
    """``threading.excepthook`` while simfl runs ServerApps: a refusal (:class:`_Refused`, whose one line is already
    on its way to the run) ends its thread silently, as ``sys.exit()`` does any thread; an exception ending a thread
    an app's ``main`` started ends that app's run in one line (:meth:`Handoff.thread_failed`) rather than printing a
    traceback; any other thread's goes to the hook that was there before."""
    if args.exc_type is SystemExit or (args.exc_type is not None and issubclass(args.exc_type, _Refused | _Ended)):
        return  # SystemExit itself ends a thread silently, as Python's own hook has it
    for handoff in list(_LIVE):
        if args.thread is not None and handoff.owns(args.thread):
            handoff.thread_failed(args)
            return
    if getattr(_IN_HOOK, "on", False) or not _CHAINED:  # a hook installed after ours that calls ours back
        threading.__excepthook__(args)
        return
    _IN_HOOK.on = True
    try:
        _CHAINED[-1](args)
    finally:
        _IN_HOOK.on = False


def _hook_app_threads() -> None:
    """Put :func:`_app_threads_hook` in front of the process's ``threading.excepthook`` (once: it stays, since an
    app's threads may outlive its run; it changes nothing for other threads)."""
    if threading.excepthook is not _app_threads_hook:
        _CHAINED[:] = [threading.excepthook]
        threading.excepthook = _app_threads_hook


def _pool_worker(thread: threading.Thread) -> bool:
    """Whether ``thread`` is a worker of a ``concurrent.futures.ThreadPoolExecutor`` (idle until its pool shuts down,
    which Python's own exit does for it)."""
    return legacy_server.pool_task(thread)


# -- what the app's main does, seen from its thread --------------------------------------------------------------


class Watch:
    """What the app's ``main`` does that simfl records, seen by a trace function in the app's thread only (Python's
    ``sys.settrace``, chained to one already there, a debugger's or coverage's): each ``start`` of a Flower strategy
    it calls, Flower's own or an override, gives its ``evaluate_fn`` and, when it returns, its ``Result``; each
    ``DefaultWorkflow`` it runs gives its context's ``History`` when it returns."""

    def __init__(self) -> None:
        from flwr.server import ClientManager
        from flwr.server import Server as LegacyServer
        from flwr.server.strategy import Strategy as LegacyStrategy
        from flwr.serverapp.strategy import Result, Strategy

        self.evaluate_fn: Callable[[int, Any], Any] | None = None
        """The ``evaluate_fn`` the app gave a strategy's ``start`` last, if any."""
        self.results: list[Any] = []
        """What the app's ``start`` calls returned (Flower's ``Result``), in order."""
        self.histories: list[Any] = []
        """The ``History`` of each ``DefaultWorkflow`` the app ran, in order."""
        self.legacy: Any = None
        """The legacy strategy of the ``DefaultWorkflow`` or legacy ``Server`` the app ran last (its ``evaluate``
        scores a model)."""
        self.final: Any = None
        """The parameters (an ArrayRecord) the ``DefaultWorkflow`` or legacy ``Server.fit`` the app ran last ended
        with."""
        self.threads: dict[threading.Thread, None] = {}
        """The threads ``main`` started (``Thread.start`` called in its thread, a pool's workers too), in order."""
        self.lasting: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        """The threads ``main`` made without ``daemon=True`` (nor made daemons later): under Flower, whose ``main``
        runs in the main thread, they are not daemons and the app's process waits for them (here they would inherit
        the daemon flag of the thread that runs ``main``)."""
        self._strategy, self._result = Strategy, Result
        self._server, self._legacy, self._manager = LegacyServer, LegacyStrategy, ClientManager
        self.pool = legacy_server.PoolRound()
        """The messages the app's pool workers send (a legacy Server's fit and evaluate rounds)."""
        self.serving: Callable[[list[Any], bool], None] | None = None
        """Serves :attr:`pool` while the app's thread waits for futures (set with the app's grid)."""
        self.waiting: Callable[[Any, int], None] | None = None
        """Waits in virtual time until a legacy client manager holds a number of nodes (set with the grid)."""
        self._workflow: type | None = None
        try:
            from flwr.server.workflow import DefaultWorkflow

            self._workflow = DefaultWorkflow
        except ImportError:  # pragma: no cover - a Flower without the legacy workflows
            pass
        self._previous: Any = None

    def install(self) -> None:
        """Watch the calling thread (the app's)."""
        self._previous = sys.gettrace()
        sys.settrace(self._call)

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        local = self._previous(frame, event, arg) if self._previous is not None else None
        name = frame.f_code.co_name
        if name == "start":
            owner = frame.f_locals.get("self")
            if isinstance(owner, self._strategy):
                if "evaluate_fn" in frame.f_locals:
                    self.evaluate_fn = frame.f_locals["evaluate_fn"]
                return self._returning(frame, local, self._started)
            if isinstance(owner, threading.Thread):
                self.threads[owner] = None
        elif name == "__init__" and frame.f_code is _THREAD_INIT:
            made = frame.f_locals.get("self")
            if isinstance(made, threading.Thread) and frame.f_locals.get("daemon") is not True:
                self.lasting.add(made)
        elif name == "daemon" and frame.f_code is _DAEMON_SET:
            made = frame.f_locals.get("self")
            if isinstance(made, threading.Thread) and frame.f_locals.get("daemonic"):
                self.lasting.discard(made)
        elif name == "__call__" and self._workflow is not None:
            if isinstance(frame.f_locals.get("self"), self._workflow):
                self.legacy = getattr(frame.f_locals.get("context"), "strategy", None)
                return self._returning(frame, local, lambda _: self._ran(frame))
        elif name in _WAITS:
            waits = legacy_server.waited(frame)
            if waits is not None and self.serving is not None:
                self.serving(*waits)
        elif name in ("aggregate_fit", "aggregate_evaluate"):
            if self.pool.ranks and isinstance(frame.f_locals.get("self"), self._legacy):
                legacy_server.in_arrival_order(frame, self.pool.ranks)
        elif name == "fit":
            owner = frame.f_locals.get("self")
            if isinstance(owner, self._server):
                self.legacy = owner.strategy
                if owner.max_workers is None:
                    owner.set_max_workers(legacy_server.WIDTH)
                return self._returning(frame, local, lambda value: self._fitted(owner, value))
        elif name == "wait_for":
            owner = frame.f_locals.get("self")
            if isinstance(owner, self._manager) and self.waiting is not None:
                self.waiting(owner, int(frame.f_locals.get("num_clients") or 0))
        return local

    def _fitted(self, server: Any, value: Any) -> None:
        """A legacy ``Server.fit`` returned: its History and its final model are what the app ran last."""
        found = legacy_server.history(value)
        if found is not None:
            self.histories.append(found)
        self.final = legacy_server.final_arrays(server)

    def _returning(self, frame: FrameType, local: Any, then: Callable[[Any], None]) -> Any:
        """A local trace function for ``frame`` that calls ``then`` with its return value."""
        if local is None:
            frame.f_trace_lines = False

        def trace(f: FrameType, event: str, arg: Any) -> Any:
            nonlocal local
            if local is not None:
                local = local(f, event, arg)
            if event == "return":
                then(arg)
            return trace

        return trace

    def scorer(self) -> Callable[[int, Any], Mapping[str, Any] | None] | None:
        """What scores a model the app sent (an ArrayRecord) in a server round, as the app's own server-side
        evaluation would: the ``evaluate_fn`` it gave ``Strategy.start`` (its MetricRecord), else its legacy
        strategy's ``evaluate`` (its loss as ``loss``, and its metrics); None: neither."""
        if self.evaluate_fn is not None:
            return self.evaluate_fn
        legacy = self.legacy
        if legacy is None:
            return None

        def evaluate(server_round: int, arrays: Any) -> Mapping[str, Any] | None:
            from flwr.compat.common.recorddict_compat import arrayrecord_to_parameters

            found = legacy.evaluate(server_round, arrayrecord_to_parameters(arrays, keep_input=True))
            if found is None:
                return None
            if not (isinstance(found, tuple) and len(found) == 2 and isinstance(found[1], Mapping)):
                return found  # type: ignore[no-any-return]  # refused by the caller, in one line
            return {**found[1], "loss": found[0]}

        return evaluate

    def _started(self, value: Any) -> None:
        if isinstance(value, self._result):
            self.results.append(value)

    def _ran(self, frame: FrameType) -> None:
        from flwr.server.workflow.constant import MAIN_PARAMS_RECORD

        context = frame.f_locals.get("context")
        history = getattr(context, "history", None)
        if history is not None:
            self.histories.append(history)
        state = getattr(context, "state", None)
        if state is not None and MAIN_PARAMS_RECORD in state.array_records:
            self.final = state.array_records[MAIN_PARAMS_RECORD]

    def final_arrays(self) -> Any:
        """The final model of what the app ran last: its last Result's arrays, or its workflow's last parameters;
        None: neither."""
        if self.results and self.results[-1].arrays is not None and len(self.results[-1].arrays):
            return self.results[-1].arrays
        return self.final


# -- the two threads ------------------------------------------------------------------------------------------------


@dataclass
class _Turn:
    """What the app hands the simulation: messages to deliver, or the end of ``main``."""

    kind: Literal["messages", "wait", "done", "failed"]
    messages: list[Any] = field(default_factory=list)
    """The messages pushed since the app's last turn, in order (their ids set)."""
    error: BaseException | None = None
    wait: WaitKind = "all"
    """A ``messages`` turn: what the app waits for (``all``: every one of ``keys`` ended, ``any``: a reply to one)."""
    keys: frozenset[int] = frozenset()
    timeout: float | None = None
    """The app's ``send_and_receive`` timeout (virtual seconds; None: none)."""


class Handoff:
    """The app's thread and the simulation's, taking turns through two queues; a turn of the app lasts at most
    ``limit`` wall-clock seconds (None: no limit)."""

    def __init__(self, main: Callable[[], Any], what: str, limit: float | None) -> None:
        self.what = what
        self.limit = limit
        self.to_sim: queue.Queue[_Turn] = queue.Queue()
        self.to_app: queue.Queue[Any] = queue.Queue()
        self.ended = False
        """The run is over (or gave up on the app): nothing the app does reaches it any more."""
        self.returned = False
        """``main`` returned."""
        self.failure: BaseException | None = None
        """The first failure of the app's threads (a refusal, an exception ending one), also handed to the run as a
        ``failed`` turn while the run waits for the app."""
        self.watch = Watch()
        self.heard = threading.Event()
        """Set once the app's log lines have somewhere to go: ``main`` starts only then, so none is lost."""
        self.thread = threading.Thread(target=self._run, args=(main,), name=APP_THREAD, daemon=True)
        _LIVE.add(self)
        _hook_app_threads()

    def _run(self, main: Callable[[], Any]) -> None:
        self.heard.wait()
        self.watch.install()
        try:
            user_call(WHERE, self.what, main)
        except (UserCodeFailed, InputError, KeyboardInterrupt) as exc:
            if not self.ended:
                self.to_sim.put(_Turn("failed", error=exc))
            return
        finally:
            sys.settrace(None)
        self.returned = True
        self._wait_threads()
        self.to_sim.put(_Turn("done"))

    def _wait_threads(self) -> None:
        """``main`` returned: wait for the threads it started that are not daemons (made without ``daemon=True``; a
        pool's idle workers aside), as Python's own end waits for them, so that whatever they do to the grid belongs
        to this run (a refusal then reaches it before ``main``'s end). The wait is part of the app's last turn, bounded
        by its limit."""
        for started in self.watch.threads:
            if started in self.watch.lasting and started is not threading.current_thread() \
                    and not _pool_worker(started):
                started.join()

    def owns(self, thread: threading.Thread) -> bool:
        """Whether ``thread`` is one that this app's ``main`` started."""
        return thread in self.watch.threads

    def _fail(self, error: BaseException) -> None:
        """The app's threads failed with ``error``: kept (the first only) and, while the run lasts, handed to it."""
        if self.failure is not None:
            return
        self.failure = error
        if not self.ended:
            self.to_sim.put(_Turn("failed", error=error))

    def thread_failed(self, args: threading.ExceptHookArgs) -> None:
        """An exception ended ``args.thread``, a thread of the app's ``main``: the run ends in one line naming the app
        and the thread, the traceback in ``crash.txt`` (nothing printed)."""
        name = args.thread.name if args.thread is not None else "?"
        kind = args.exc_type.__name__ if args.exc_type is not None else "an exception"
        text = " ".join(str(args.exc_value).split()) if args.exc_value is not None else ""
        details = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        self._fail(UserCodeFailed(WHERE, f"{self.what}'s thread {name!r} raised {kind}{': ' + text if text else ''}",
                                  details))

    def in_app(self) -> bool:
        """Whether the calling thread runs the app's ``main``."""
        return threading.get_ident() == self.thread.ident

    def ask(self, turn: _Turn) -> None:
        """In the app's thread: hand the simulation ``turn`` (messages pushed and what the app waits for, or a wait
        for more nodes) and wait until it is there (the replies are then in the grid's mailbox)."""
        openmp.release()  # the app waits while the simulation (and its ClientApp calls) computes
        self.to_sim.put(turn)
        if self.to_app.get() is _Ended:
            raise _Ended()

    def refuse(self, method: str) -> None:
        """A thread of the app's own called the grid's ``method``: the run ends in one line, that thread here (it ends
        without a traceback, :func:`_app_threads_hook`)."""
        name = threading.current_thread().name
        after = " after main returned" if self.returned else ""
        self._fail(InputError(WHERE, f"{self.what} called grid.{method} from a thread of its own ({name!r}){after}; "
                              "simfl delivers the messages of the thread that runs main, while it runs: send them "
                              "from there"))
        raise _Refused()

    def turn(self, answer: list[Any] | None, say: Callable[[str], None] | None = None) -> _Turn:
        """In the simulation's thread: give the app ``answer`` (None: start it) and wait for its next turn, at most
        :attr:`limit` seconds; the app's Flower log lines go to ``say`` meanwhile."""
        openmp.release()  # the simulation waits while the app computes
        if answer is None:
            self.thread.start()
        else:
            self.to_app.put(answer)
        try:
            with flower.saying(self.thread, say):
                self.heard.set()
                return self.to_sim.get(timeout=self.limit)
        except queue.Empty:
            error = overran(WHERE, self.what, self.thread, float(self.limit or 0.0),
                            "algorithms.timeout (a turn of the ServerApp: until it calls the grid or returns)")
            self.ended = True  # Python cannot stop the thread: it unwinds if it ever asks the grid again
            self.to_app.put(_Ended)
            raise error from None

    def end(self) -> None:
        """The run is over: unwind an app still waiting on the grid (its thread raises :class:`_Ended` there, and so
        do its pool workers waiting for replies)."""
        waiting = self.thread.is_alive() and not self.ended
        self.ended = True
        self.watch.pool.close()
        if waiting:
            self.to_app.put(_Ended)
            self.thread.join(10.0)


@dataclass
class Mailbox:
    """The SuperLink's store between the app's grid and the simulation: what the app pushed since its last turn, the
    messages under way, and the replies arrived (in the order they arrived) that the app has not pulled yet."""

    outbox: list[Any] = field(default_factory=list)
    open: set[int] = field(default_factory=set)
    """Pushed, neither replied nor ended."""
    arrived: dict[int, Any] = field(default_factory=dict)
    count: int = 0

    def take(self, keys: set[int]) -> list[Any]:
        """The arrived replies to ``keys``, in the order they arrived, taken out of the store."""
        found = [k for k in self.arrived if k in keys]
        return [self.arrived.pop(k) for k in found]


def _keys(message_ids: Iterable[str]) -> set[int]:
    """The mailbox keys of ``message_ids`` (ids simfl gave: decimal counts; any other id matches nothing)."""
    return {int(i) for i in map(str, message_ids) if i.isdigit()}


def sim_grid(handoff: Handoff, nodes: list[int], run_id: int, mailbox: Mailbox) -> Any:
    """A Flower Grid whose messages the simulation delivers: ``get_node_ids()`` is ``nodes`` (kept up to date by the
    caller), ``push_messages`` leaves messages in ``mailbox`` without waiting (the simulation sends them at the app's
    next turn, at the same virtual time), ``pull_messages`` takes the replies arrived by now, waiting in virtual time
    for the next one when none has and some are under way; ``send_and_receive`` waits for all, or its timeout in
    virtual time."""
    from flwr.app import Message as FlowerMessage
    from flwr.serverapp import Grid
    from flwr.supercore.run import Run

    class SimGrid(Grid):
        def __init__(self) -> None:
            self._run = Run.create_empty(run_id)
            self.polls = 0
            """get_node_ids() calls since the app last sent messages: a second one waits for more nodes."""
            self.seen: list[int] | None = None
            """The nodes the app's thread was last told (what the app's other threads are told)."""

        def set_run(self, run: Any) -> None:
            self._run = run

        @property
        def run(self) -> Any:
            return self._run

        def create_message(self, content: Any, message_type: str, dst_node_id: int, group_id: str,
                           ttl: float | None = None) -> Any:
            return FlowerMessage(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

        def _ask(self, wait: WaitKind, keys: set[int], timeout: float | None = None) -> None:
            sent, mailbox.outbox = mailbox.outbox, []
            handoff.ask(_Turn("messages", sent, wait=wait, keys=frozenset(keys), timeout=timeout))

        def get_node_ids(self) -> list[int]:
            if not handoff.in_app():  # another thread (the legacy client manager's registration, every 5 s of wall
                return list(nodes if self.seen is None else self.seen)  # time): what the app saw, whenever it asks
            if not legacy_server.registering(sys._getframe(1)):  # a legacy client manager's update: bookkeeping
                self.polls += 1
                if self.polls > 1:  # asked again without sending: the app waits for nodes to connect
                    handoff.ask(_Turn("wait", []))
            self.seen = list(nodes)
            return list(nodes)

        def serve(self, futures: list[Any], every: bool) -> None:
            """The app's thread waits for ``futures``: send its pool workers' messages, a round at a time."""
            handoff.watch.pool.serve(futures, every, self.send_and_receive, lambda: handoff.ended)
            if handoff.ended:
                raise _Ended()

        def wait_nodes(self, manager: Any, count: int) -> None:
            """A legacy client manager waits for ``count`` nodes: wait in virtual time until it holds them (its
            ``num_available`` registers the nodes the grid lists)."""
            while manager.num_available() < count:
                handoff.ask(_Turn("wait", []))

        def push_messages(self, messages: Iterable[Any]) -> list[str]:
            if not handoff.in_app():
                handoff.refuse("push_messages")
            ids: list[str] = []
            self.polls = 0
            for message in messages:
                if not isinstance(message, FlowerMessage):
                    raise InputError(WHERE, f"{handoff.what} pushed a {type(message).__name__}, not a "
                                     "flwr.app.Message")
                mailbox.count += 1
                message.metadata.__dict__["_message_id"] = str(mailbox.count)
                mailbox.outbox.append(message)
                mailbox.open.add(mailbox.count)
                ids.append(str(mailbox.count))
            return ids

        def pull_messages(self, message_ids: Iterable[str]) -> list[Any]:
            """The replies to ``message_ids`` that arrived by now, in the order they arrived; when none has and some
            are under way, the app waits in virtual time until the next of them arrives (or all ended without one):
            a loop that polls gets a reply per pull, whatever it sleeps between pulls."""
            if not handoff.in_app():
                handoff.refuse("pull_messages")
            wanted = _keys(message_ids)
            found = mailbox.take(wanted)
            if not found and wanted & mailbox.open:
                self._ask("any", wanted & mailbox.open)
                found = mailbox.take(wanted)
            return found

        def send_and_receive(self, messages: Iterable[Any], *, timeout: float | None = None) -> list[Any]:
            """Push ``messages`` and wait until each one's reply arrived or its node failed or left, or ``timeout``
            virtual seconds passed (the replies later than that are dropped, as Flower's would be)."""
            if not handoff.in_app():
                if handoff.owns(threading.current_thread()) and _pool_worker(threading.current_thread()):
                    return handoff.watch.pool.send(list(messages), _Ended)  # a legacy Server's fit_clients worker
                handoff.refuse("send_and_receive")
            keys = _keys(self.push_messages(messages))
            if not keys:
                return []
            if timeout is not None and not timeout >= 0:
                raise InputError(WHERE, f"{handoff.what} called grid.send_and_receive with timeout={timeout!r}; "
                                 "a timeout is a number of seconds, at least 0, or None")
            self._ask("all", keys, None if timeout is None else float(timeout))
            return mailbox.take(keys)

    grid = SimGrid()
    handoff.watch.serving, handoff.watch.waiting = grid.serve, grid.wait_nodes
    return grid


def launch(path: str, run_config: Mapping[str, Any], nodes: list[int], run_id: int,
           limit: float | None, mailbox: Mailbox | None = None) -> Handoff:
    """The ServerApp at ``path``, ready to start on a grid listing ``nodes`` (kept up to date by the caller), with a
    server context of run ``run_id`` holding ``run_config``."""
    require(WHERE)
    from flwr.app import Context, RecordDict

    flower.prepare()
    app = load_server_app(path, WHERE)
    context = Context(run_id=run_id, node_id=flower.SERVER_NODE, node_config={}, state=RecordDict(),
                      run_config=dict(run_config))
    grid: Any = None
    handoff = Handoff(lambda: app(grid, context), f"the ServerApp {path}", limit)
    grid = sim_grid(handoff, nodes, run_id, Mailbox() if mailbox is None else mailbox)
    return handoff


@contextmanager
def app_turn(seed: int, run_id: int, turn: int | str) -> Iterator[None]:
    """The global generators seeded for the app's turn ``turn`` (restored after), and Flower's process-wide run id
    (what the messages the app makes carry) set to the run's."""
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.run_id = run_id
    with rng.global_generators(seed, "serverapp", turn):
        yield


# -- values as Flower keeps them ----------------------------------------------------------------------------------


def cell(value: Any) -> Any:
    """A metric value as a table cell: a number as it is, a list as JSON text (``[0.5, 0.25]``)."""
    if isinstance(value, list | tuple):
        return json.dumps(list(value))
    return value


def result_rows(metrics: Mapping[int, Any]) -> list[dict[str, Any]]:
    """A Result's per-round MetricRecords as rows: ``round``, then every value as Flower keeps it."""
    return [{"round": int(r), **{k: cell(v) for k, v in m.items()}} for r, m in sorted(metrics.items())]


def history_rows(losses: Iterable[tuple[int, float]], metrics: Mapping[str, Iterable[tuple[int, Any]]]
                 ) -> list[dict[str, Any]]:
    """A legacy ``History``'s per-round losses (as ``loss``) and metrics as rows: ``round``, then the values."""
    rows: dict[int, dict[str, Any]] = {}
    for r, loss in losses:
        rows.setdefault(int(r), {"round": int(r)})["loss"] = loss
    for key, values in metrics.items():
        for r, value in values:
            rows.setdefault(int(r), {"round": int(r)})[key] = cell(value)
    return [rows[r] for r in sorted(rows)]


def aggregated(replies: list[Any]) -> dict[str, Any]:
    """The replies' MetricRecords aggregated as Flower's FedAvg aggregates them (weighted by ``num-examples``, which
    is left out), when each reply holds one MetricRecord with a number ``num-examples``; otherwise nothing."""
    from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords

    contents = [r.content for r in replies if r.has_content()]
    if not contents or len(contents) < len(replies):
        return {}
    for content in contents:
        records = content.metric_records
        count = next(iter(records.values())).get("num-examples") if len(records) == 1 else None
        if not isinstance(count, int | float) or isinstance(count, bool) or count <= 0:
            return {}
    try:
        return {k: cell(v) for k, v in aggregate_metricrecords(contents, "num-examples").items()}
    except (TypeError, ValueError):  # lists of other lengths: nothing Flower's rule can average
        return {}


# -- the algorithm ------------------------------------------------------------------------------------------------


class ServerAppRounds(SyncAlgorithm[ServerAppConfig], Messaging):
    """A Flower ServerApp's messages, nodes and replies, served by :class:`simfl.sim.messages.MessageServer`
    (module docstring)."""

    Config = ServerAppConfig

    def __init__(self, config: ServerAppConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.what = f"the ServerApp {config.app}"
        self.nodes: list[int] = []
        """The node ids the app's grid lists: the clients it may message at its latest turn, + 1."""
        self.run_id = flower.run_id(setup.seed, run_name(config))
        self.mailbox = Mailbox()
        self.handoff = launch(config.app, config.run_config, self.nodes, self.run_id, config.timeout, self.mailbox)
        self.own_model = setup.layout.names == [HELD]
        """The model is the app's own: simfl holds only its version (:func:`simfl.models.arrays.held`)."""
        self.w = setup.init.clone()
        self.version = 0
        """How many models the app has sent (its own model: the flat state)."""
        self.latest: torch.Tensor | None = None
        """The app's own model: the message (packed) whose arrays are the model of version :attr:`version`."""
        self.final: Any = None
        """The app's own model, once main returned: the last Result's arrays."""
        self.turns = 0
        self.told = False
        """The app was said to train on data of its own (:meth:`_own_data`)."""
        self.rounds = 0
        """Calls for replies made (a round: the messages sent at one turn and the wait that follows)."""
        self.offered = 0
        """Nodes the app saw at its latest call."""
        self.started_app = False
        self.finished = False
        """``main`` returned: no turn comes again."""
        self.sent: dict[int, tuple[Any, torch.Tensor]] = {}
        """Each message under way (by key): as the app sent it, and its bytes."""
        self.working: dict[int, int] = {}
        """The message each node works on (what its client round is sent)."""
        self.call: list[int] = []
        """The nodes of the latest call's messages (one entry a message), for its closing line."""
        self.kinds: list[Any] = []
        """The latest call's messages (their types, for its closing line)."""
        self.fresh: list[tuple[Any, Arrival]] = []
        """The replies arrived since the app's last turn, with their arrivals, in order."""
        self.counted: dict[str, int] = {}
        """Rounds of each message type (train, evaluate) recorded from the replies."""
        self.from_replies: dict[str, list[dict[str, Any]]] = {"train": [], "federated": []}
        """train.csv and federated.csv from the replies, for an app that returns no Result."""

    @property
    def clients_per_round(self) -> int:  # pragma: no cover - the message server times the app's messages
        return 1

    def turn(self, listed: list[int]) -> Request:
        """The app's turn: the replies since its last are in its mailbox; run it until it waits again."""
        if self.finished:
            return Request("done")
        self.nodes[:] = [c + 1 for c in listed]
        self._recorded()
        answer: list[Any] | None = [] if self.started_app else None
        self.started_app = True
        polls = 0
        while True:
            self.turns += 1
            with app_turn(self.setup.seed, self.run_id, self.turns):
                turn = self.handoff.turn(answer, self.setup.say)
            if turn.kind == "done":
                self._finish()
                return Request("done")
            if turn.kind == "wait":
                if len(listed) < self.setup.num_clients:
                    return Request("nodes")  # the app waits in virtual time until a node's work ends or one returns
                polls += 1
                if polls >= MAX_POLLS:
                    raise InputError(WHERE, f"{self.what} asked for the nodes {polls} times without sending a message "
                                     f"while all {len(listed)} clients were free: it waits for more nodes than the "
                                     "federation has (its strategy's min_available_nodes or sample size?)")
                answer = []
                continue
            if turn.kind == "failed":
                assert turn.error is not None
                raise turn.error
            return self._open(turn, listed)

    def _recorded(self) -> None:
        """The replies since the app's last turn: its closing line, and train.csv and federated.csv rows."""
        fresh, self.fresh = self.fresh, []
        if self.call and self.setup.say is not None:
            nodes = len(set(self.call))
            kinds = ", ".join(sorted({str(m.metadata.message_type) for m in self.kinds}))
            self.setup.say(f"round {self.rounds} ({kinds}) closed: {len(self.call)} messages to {nodes} of the "
                           f"{self.offered} free nodes, {len(fresh)} replies, {max(0, len(self.call) - len(fresh))} "
                           "lost")
        self.call = []
        replies = [r for r, _ in fresh]
        for kind, table in (("train", "train"), ("evaluate", "federated")):
            of_kind = [r for r in replies if flower.message_kind(r) == kind]
            if of_kind:
                self.counted[kind] = self.counted.get(kind, 0) + 1
                self.from_replies[table].append({"round": self.counted[kind], "update": fresh[-1][1].update,
                                                 "nodes": len(of_kind), **aggregated(of_kind)})

    def _finish(self) -> None:
        """``main`` returned: its last Result's arrays (its workflow's last parameters) are the final model."""
        self.finished = True
        arrays = self.handoff.watch.final_arrays()
        if arrays is not None:
            self._model(arrays, None)

    def _client(self, message: FlowerMessage, listed: list[int]) -> int:
        client = int(message.metadata.dst_node_id) - 1
        if client not in listed:
            raise InputError(WHERE, f"{self.what} sent a message to node {client + 1}, which is not one of the "
                             f"nodes grid.get_node_ids() listed ({len(listed)} of them); ask it each round")
        return client

    def _open(self, turn: _Turn, listed: list[int]) -> Request:
        """The app's pushed messages, each to its node's queue as it is, and what it waits for."""
        self.rounds += 1
        self.offered = len(listed)
        model = None
        sends = []
        self.kinds = list(turn.messages)
        for message in turn.messages:
            client = self._client(message, listed)
            key = int(message.metadata.message_id)
            packed = flower.pack_message(message)
            self.sent[key] = (message, packed)
            sends.append((client, key))
            self.call.append(client)
            if model is None and flower.message_kind(message) == "train" and message.has_content() \
                    and len(message.content.array_records) == 1:
                model = (next(iter(message.content.array_records.values())), packed)
        if model is not None:
            self._model(*model)
        sends.sort(key=lambda send: send[0])  # a turn's messages leave in node order, a node's own as pushed
        return Request(turn.wait, sends, turn.keys, turn.timeout)

    def started(self, client: int, key: int) -> None:
        self.working[client] = key

    def replied(self, key: int, arrival: Arrival) -> None:
        """A reply arrived: into the mailbox (the app pulls it), in arrival order."""
        self._own_data(arrival)
        packed = arrival.arrays.get(flower.REPLY)
        reply = flower.unpack_message(packed) if packed is not None else self._echo(key, arrival)
        self.sent.pop(key, None)
        self.mailbox.open.discard(key)
        self.mailbox.arrived[key] = reply
        self.fresh.append((reply, arrival))

    def ended(self, key: int) -> None:
        self.sent.pop(key, None)
        self.mailbox.open.discard(key)

    def _model(self, record: Any, packed: torch.Tensor | None) -> None:
        """The app sent the model ``record`` (in the message ``packed``; None: its Result's arrays): the model simfl
        evaluates from now on."""
        self.version += 1
        if self.own_model:
            self.w = torch.tensor([float(self.version)])
            self.latest, self.final = packed, (record if packed is None else None)
        else:
            fixed = {k: None for k in record if k not in set(self.setup.layout.names)
                     and not np.issubdtype(record[k].numpy().dtype, np.floating)}
            self.w = flower.from_record(self.setup.layout, record, f"{WHERE} ({self.what}'s model)", fixed)

    def scoring(self) -> Callable[[torch.Tensor], Scores] | None:
        """The app's own model is scored by its ``evaluate_fn`` (NaN without one); a model of the scenario's, by
        simfl on its test set."""
        return self._scores if self.own_model else None

    def _scores(self, weights: torch.Tensor) -> Scores:
        """The latest model the app sent (version ``weights[0]``) scored by the ``evaluate_fn`` it gave
        ``Strategy.start``, with the server round Flower would give it (the rounds it trained)."""
        evaluate_fn = self.handoff.watch.scorer()
        if evaluate_fn is None or (self.latest is None and self.final is None):
            return Scores(float("nan"), float("nan"))
        if self.final is not None:
            arrays = self.final
        else:
            assert self.latest is not None
            (arrays,) = flower.unpack_message(self.latest).content.array_records.values()
        return app_scores(evaluate_fn, arrays, self.version - 1, self.setup.seed, self.version)

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """The last Result's per-round metrics (a workflow's History), else those taken from the replies."""
        watch = self.handoff.watch
        if watch.results:
            result = watch.results[-1]
            return {"train": result_rows(result.train_metrics_clientapp),
                    "federated": result_rows(result.evaluate_metrics_clientapp),
                    "server": result_rows(result.evaluate_metrics_serverapp)}
        if watch.histories:
            history = watch.histories[-1]
            return {"train": history_rows([], history.metrics_distributed_fit),
                    "federated": history_rows(history.losses_distributed, history.metrics_distributed),
                    "server": history_rows(history.losses_centralized, history.metrics_centralized)}
        return {name: list(rows) for name, rows in self.from_replies.items()}

    def round_weights(self) -> torch.Tensor:
        return self.w

    def message(self, client: int, round: int) -> Message:
        return Message(arrays={flower.SENT: self.sent[self.working[client]][1]})

    def aggregate(self, arrivals: list[Arrival]) -> None:  # pragma: no cover - replies come one by one (replied)
        raise NotImplementedError

    def _echo(self, key: int, arrival: Arrival) -> Any:
        """The reply of a client in pure-latency mode (no ClientApp runs): the arrays it was sent, and its sample
        count as ``num-examples``."""
        from flwr.app import Message as FlowerMessage
        from flwr.app import MetricRecord, RecordDict

        sent = self.sent[key][0]
        records = dict(sent.content.array_records) if sent.has_content() else {}
        content = RecordDict({**records, "metrics": MetricRecord({"num-examples": int(arrival.num_samples)})})
        return FlowerMessage(content, reply_to=sent)

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
        """The model the app sent last (its version, when the model is the app's own)."""
        return self.w

    def close(self) -> None:
        """Unwind the app; a run that ended well (``main`` returned) after which a thread of the app's failed (a
        daemon sending once ``main`` returned) is refused here, before its files are published."""
        self.handoff.end()
        failure = self.handoff.failure
        if self.finished and failure is not None and sys.exc_info()[1] is None:  # not while another error unwinds
            raise failure

    def state(self) -> dict[str, Any]:
        raise InputError("--checkpoint-every", f"a run of {self.what} cannot be checkpointed: the app's main is "
                         "Python code under way, which no file can carry; run it without --checkpoint-every")

    def load_state(self, state: Mapping[str, Any]) -> None:  # pragma: no cover - state() never returns
        raise InputError("--resume", f"a run of {self.what} cannot be resumed")


def app_scores(evaluate_fn: Callable[[int, Any], Any], arrays: Any, server_round: int, seed: int,
               call: int) -> Scores:
    """``evaluate_fn(server_round, arrays)`` (its ``call``-th call, seeded from ``(seed, "serverapp-evaluate",
    call)``): its MetricRecord's ``accuracy`` (or ``acc``) and ``loss``, NaN where it gives no number."""
    with rng.global_generators(seed, "serverapp-evaluate", call):
        record = user_call(WHERE, "the ServerApp's evaluate_fn", lambda: evaluate_fn(server_round, arrays),
                           lambda v: v is None or isinstance(v, Mapping),
                           "a MetricRecord or None (a legacy strategy's evaluate: a pair (loss, metrics) or None)")
    scores = flower.scalar_metrics(record) if record is not None else {}
    accuracy = scores.get("accuracy", scores.get("acc", float("nan")))
    return Scores(accuracy=float(accuracy), loss=float(scores.get("loss", float("nan"))))


# -- simfl's own algorithms over the app's ClientApp ---------------------------------------------------------------


@dataclass
class AppStart:
    """What a ServerApp's ``main`` does before its first round (:func:`probe`)."""

    config: dict[str, Any]
    """The config of its first train message (``server-round`` left out): what a train message of simfl's own
    algorithms carries to the same ClientApp; {} when ``main`` sends none."""
    arrays: dict[str, np.ndarray] | None
    """The arrays of its first train message, by name (the app's initial model); None when it sends none."""
    evaluate_fn: Callable[[int, Any], Any] | None
    """The ``evaluate_fn`` it gave ``Strategy.start`` (its server-side evaluation); None: none."""


def probe(path: str, run_config: Mapping[str, Any], nodes: int, seed: int, limit: float | None) -> AppStart:
    """Run the ServerApp at ``path`` on a grid of ``nodes`` free nodes until its first train message, seeded as a run
    of ``seed``'s first turn, then unwind it: the one start of ``main`` in a run of simfl's own algorithms."""
    run_id = flower.run_id(seed, "probe")
    handoff = launch(path, run_config, list(range(1, nodes + 1)), run_id, limit)
    try:
        with app_turn(seed, run_id, 1):
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
            if flower.message_kind(message) == "train" and message.has_content():
                config = flower.message_config(message)
                config.pop("server-round", None)
                records = list(message.content.array_records.values())
                arrays = {k: np.array(v.numpy(), copy=True) for k, v in records[0].items()} if len(records) == 1 else None
                return AppStart(config, arrays, handoff.watch.evaluate_fn)
        return AppStart({}, None, handoff.watch.evaluate_fn)
    finally:
        handoff.end()


class AppEvaluation:
    """simfl's evaluation grid scored by the app's own server-side ``evaluate_fn`` (its model is the app's, which
    simfl cannot run): the k-th call is the app's round k - 1 (the first scores the initial model, as Flower's
    round 0) (:func:`app_scores`)."""

    def __init__(self, layout: Layout, start: AppStart, seed: int) -> None:
        from flwr.app import Array

        assert start.evaluate_fn is not None and start.arrays is not None
        self.layout, self.evaluate_fn, self.seed = layout, start.evaluate_fn, seed
        self.template = {k: Array(v) for k, v in start.arrays.items()}
        self.calls = 0

    def __call__(self, weights: torch.Tensor) -> Scores:
        from flwr.app import ArrayRecord

        trained = flower.to_record(self.layout, weights)
        arrays = ArrayRecord({k: trained[k] if k in trained else self.template[k] for k in self.template})
        self.calls += 1
        return app_scores(self.evaluate_fn, arrays, self.calls - 1, self.seed, self.calls)
