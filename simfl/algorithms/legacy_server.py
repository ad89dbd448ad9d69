"""Flower's legacy server (``ServerApp(server_fn=...)``: ``start_grid``, a ``Server``, a legacy ``Strategy``) in
virtual time, as :mod:`simfl.algorithms.serverapp` runs it.

Flower's ``Server.fit_round`` and ``evaluate_round`` hand each sampled client's instruction to a worker of a
``concurrent.futures.ThreadPoolExecutor`` (``fit_clients``), whose ``GridClientProxy`` sends one message and waits
for its reply (``grid.send_and_receive``), while the app's thread waits for the pool's futures. Those workers are the
app's framework working on the app's behalf, not threads of the app's own: a worker is known by what it is (a thread
whose target is the pool's ``_worker``, started from the app's thread, running a ``_WorkItem`` whose future the app
waits on), never by its name. Their messages are one round (:class:`PoolRound`):

1. each worker's ``send_and_receive`` leaves its messages here and waits (:meth:`PoolRound.send`);
2. the app's thread, entering a wait on its futures (``concurrent.futures.wait``, ``as_completed``,
   ``Future.result``; seen by the app's trace function), serves the pool (:meth:`PoolRound.serve`): as soon as no future it
   waits on can progress without a reply (each is done, or its worker waits here, or it is queued behind workers that
   all wait here), it sends every waiting message from its own thread as one call, sorted by node id (so the message
   ids and the round's order do not depend on which worker ran first), and hands each worker its replies;
3. the replies' order as Flower's server reads them comes from a set of futures (its order follows memory
   addresses): :func:`in_arrival_order` sorts a legacy strategy's ``results`` and ``failures`` in place by the
   order the replies arrived in virtual time before ``aggregate_fit``/``aggregate_evaluate`` reads them, so the
   aggregate's float sums, and the files, are the same for the same seed.

A legacy ``Server`` without ``set_max_workers`` gets a pool of :data:`WIDTH` workers (Python's default,
``min(32, cpus + 4)``, would split a larger round into batches whose number depends on the machine); a width the app
set is kept, its rounds then sent in batches of that many (a batch waits for the previous one's replies, as Flower's
pool does). The client manager's registration (its ``get_node_ids`` calls, from its own thread every 5 s and before
each ``sample``) is Flower's bookkeeping, not a wait for nodes: :func:`registering` tells it apart; the manager's
``wait_for`` (too few nodes registered for ``min_available_clients``) is the wait, in virtual time.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import thread as pool_thread
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

WIDTH = 1024
"""The pool of a legacy ``Server`` that sets no width: every client of a round up to this many at once."""
_SLICE = 0.5
"""Seconds between looks of a serving app at its futures when nothing told it of a change (a safety net: every
change that can make a round ready notifies it)."""
_RUN = pool_thread._WorkItem.run.__code__
_WORKER = pool_thread._worker.__code__


def _registration_code() -> CodeType | None:
    """The code of Flower's client-manager update (``update_registered_nodes`` inside ``_update_client_manager``)."""
    try:
        from flwr.server.compat import app_utils
    except ImportError:  # pragma: no cover - a Flower without the legacy server
        return None
    for const in app_utils._update_client_manager.__code__.co_consts:
        if isinstance(const, CodeType) and const.co_name == "update_registered_nodes":
            return const
    return None  # pragma: no cover - another Flower's layout


_REGISTRATION = _registration_code()


def registering(frame: FrameType | None) -> bool:
    """Whether ``frame`` (the caller of ``get_node_ids``) is Flower's client-manager update, which asks for the nodes
    before every ``num_available``, ``all`` and ``sample``: bookkeeping, not a wait for more nodes."""
    return frame is not None and _REGISTRATION is not None and frame.f_code is _REGISTRATION


@dataclass
class _Call:
    """A worker's ``send_and_receive``: its messages, the future it works for, its pool, and its answer."""

    messages: list[Any]
    future: Future[Any] | None
    executor: Any
    answered: threading.Event = field(default_factory=threading.Event)
    answer: list[Any] | None = None
    """The replies to :attr:`messages`; None once answered: the run ended."""


def _work(frame: FrameType | None) -> tuple[Future[Any] | None, Any]:
    """The future and the executor of the pool task whose stack holds ``frame`` (None, None: no pool task)."""
    future, executor = None, None
    while frame is not None:
        if frame.f_code is _RUN and future is None:
            future = getattr(frame.f_locals.get("self"), "future", None)
        elif frame.f_code is _WORKER:
            ref = frame.f_locals.get("executor_reference")
            executor = ref() if callable(ref) else None
            break
        frame = frame.f_back
    return future, executor


def pool_task(thread: threading.Thread) -> bool:
    """Whether ``thread`` is a worker of a ``concurrent.futures.ThreadPoolExecutor``."""
    return getattr(thread, "_target", None) is pool_thread._worker


class PoolRound:
    """The messages that the app's pool workers send, gathered into rounds the app's thread sends (module docstring)."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.pending: dict[threading.Thread, _Call] = {}
        """Each waiting worker's call."""
        self.closed = False
        self.ranks: dict[int, int] = {}
        """Each node's latest reply's place in the order of arrival (counted over the run)."""
        self.count = 0

    def send(self, messages: list[Any], ended: Callable[[], BaseException]) -> list[Any]:
        """In a pool worker: leave ``messages`` for the app's thread to send, and wait for their replies (``ended``:
        what to raise when the run ended meanwhile)."""
        future, executor = _work(sys._getframe(1))
        call = _Call(list(messages), future, executor)
        with self.cv:
            if self.closed:
                raise ended()
            self.pending[threading.current_thread()] = call
            self.cv.notify_all()
        call.answered.wait()
        if call.answer is None:
            raise ended()
        return call.answer

    def _poke(self, _: Any = None) -> None:
        with self.cv:
            self.cv.notify_all()

    def _ready(self, futures: list[Future[Any]]) -> list[_Call] | None:
        """The calls to send now: none of ``futures`` can progress without a reply (under :attr:`cv`)."""
        if not self.pending:
            return None
        waiting = {id(c.future) for c in self.pending.values() if c.future is not None}
        pools = {id(c.executor): c.executor for c in self.pending.values() if c.executor is not None}
        full = all(all(t in self.pending for t in list(getattr(e, "_threads", ())) if t.is_alive())
                   for e in pools.values())
        for f in futures:
            if f.done() or id(f) in waiting:
                continue
            if f.running() or not full:  # a worker is on it (not at the grid yet), or one is free to take it
                return None
        return list(self.pending.values())

    def serve(self, futures: list[Future[Any]], every: bool, deliver: Callable[[list[Any]], list[Any]],
              stop: Callable[[], bool]) -> None:
        """In the app's thread, waiting for ``futures`` (``every``: all of them, else the first): send each round of
        its workers' messages through ``deliver`` (the app's own ``send_and_receive``) and hand out the replies, until
        the wait would end; return early when ``stop()`` (the run ended)."""
        for f in futures:
            f.add_done_callback(self._poke)
        while True:
            with self.cv:
                while True:
                    done = [f.done() for f in futures]
                    if stop() or (all(done) if every else any(done)) or not futures:
                        return
                    calls = self._ready(futures)
                    if calls is not None:
                        break
                    self.cv.wait(_SLICE)
            self._deliver(calls, deliver)

    def _deliver(self, calls: list[_Call], deliver: Callable[[list[Any]], list[Any]]) -> None:
        """Send ``calls``' messages as one, sorted by node id, and answer each call with its replies in the order they
        arrived (each worker's in the order of its own messages' arrival)."""
        calls = sorted(calls, key=lambda c: min((int(m.metadata.dst_node_id) for m in c.messages), default=0))
        try:
            replies = deliver([m for c in calls for m in c.messages])
        except BaseException:
            self.close()
            raise
        for reply in replies:
            self.ranks[int(reply.metadata.src_node_id)] = self.count
            self.count += 1
        with self.cv:
            for call in calls:
                ids = {str(m.metadata.message_id) for m in call.messages}
                call.answer = [r for r in replies if str(r.metadata.reply_to_message_id) in ids]
                call.answered.set()
                self.pending = {t: c for t, c in self.pending.items() if c is not call}

    def close(self) -> None:
        """The run ended: every waiting worker raises (its future fails), none waits again."""
        with self.cv:
            self.closed = True
            for call in self.pending.values():
                call.answered.set()
            self.pending.clear()
            self.cv.notify_all()


def waited(frame: FrameType) -> tuple[list[Future[Any]], bool] | None:
    """What a call in the app's thread waits for, when ``frame`` is one of ``concurrent.futures``' waits: its futures
    and whether it waits for every one (else the first); None: not such a wait."""
    from concurrent.futures import _base

    code = frame.f_code
    if code is _base.wait.__code__:
        fs = frame.f_locals.get("fs") or ()
        return [f for f in fs if isinstance(f, Future)], frame.f_locals.get("return_when") != FIRST_COMPLETED
    if code is _base.as_completed.__code__:
        fs = frame.f_locals.get("fs") or ()
        return [f for f in fs if isinstance(f, Future)], True
    if code is _base.Future.result.__code__:
        owner = frame.f_locals.get("self")
        return ([owner], True) if isinstance(owner, Future) else None
    return None


def in_arrival_order(frame: FrameType, ranks: dict[int, int]) -> None:
    """Sort the ``results`` (and ``failures``) a legacy strategy's ``aggregate_fit``/``aggregate_evaluate`` is about
    to read, in place, by the order their replies arrived (``ranks``: each node's); exceptions last, by their text."""
    def node(proxy: Any) -> int | None:
        value = getattr(proxy, "node_id", None)
        if value is None:
            cid = str(getattr(proxy, "cid", ""))
            value = int(cid) if cid.isdigit() else None
        return int(value) if value is not None else None

    def key(item: Any) -> tuple[int, int, str]:
        if isinstance(item, tuple) and item:
            found = node(item[0])
            rank = ranks.get(found, len(ranks)) if found is not None else len(ranks)
            return 0, rank, str(found)
        return 1, 0, f"{type(item).__name__}: {item}"

    for name in ("results", "failures"):
        items = frame.f_locals.get(name)
        if isinstance(items, list):
            items.sort(key=key)


def history(value: Any) -> Any:
    """The ``History`` a legacy ``Server.fit`` returned (its ``(history, elapsed)``), or None."""
    from flwr.server.history import History

    if isinstance(value, tuple) and value and isinstance(value[0], History):
        return value[0]
    return None


def final_arrays(server: Any) -> Any:
    """A legacy ``Server``'s model once its ``fit`` returned, as an ArrayRecord (None: it holds none)."""
    from flwr.compat.common.recorddict_compat import parameters_to_arrayrecord

    parameters = getattr(server, "parameters", None)
    if parameters is None or not getattr(parameters, "tensors", None):
        return None
    return parameters_to_arrayrecord(parameters, keep_input=True)
