"""Where units run: in this process, in local worker processes, or as Ray tasks on a cluster.

Every backend takes a list of :class:`~simfl.launch.units.Unit` and hands each message a unit
reports (:class:`~simfl.launch.units.Grown`, :class:`~simfl.launch.units.Saved`, :class:`~simfl.launch.units.Moved`)
and each outcome (:class:`~simfl.launch.units.Done`, :class:`~simfl.launch.units.Stopped`) to ``handle``, in
this process, in the order each unit produced them. ``handle`` writes files; units never do,
so a Ray node needs no access to the output folder. The first error of any unit (a user
mistake, a crash, a worker that died) stops every unit and is raised here; so is Ctrl-C.

- :class:`InProcess`: one unit after another in this process (``--workers 1``).
- :class:`LocalWorkers`: ``workers`` spawned processes taking units from one queue in plan
  order. They never import the caller's ``__main__`` (:mod:`simfl.launch.spawning`), so a script
  without ``if __name__ == "__main__":``, code on standard input and notebooks run them alike.
  They ignore SIGINT and SIGTERM (this process stops them) and die with this process (Linux's
  parent-death signal), so a killed ``simfl run`` leaves no worker writing anywhere.
- :class:`RayTasks`: one Ray task per unit, declared with the cores the unit uses, on a local
  Ray instance or the cluster at an address. A task streams its messages back (a Ray
  generator); the dataset reaches a node from that node's own data folder, or else from this
  process through Ray's object store (put once, fetched once per node).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from simfl.data import Dataset
from simfl.errors import InputError, NoSpace, UserCodeFailed, WorkerLost
from simfl.launch.spawning import context
from simfl.launch.units import Done, Key, Message, Stopped, Unit, run_unit

Outcome = Done | Stopped
Handle = Callable[[Message | Outcome], None]
POLL_SECONDS = 0.25
"""How often the launching process checks on its workers while waiting for messages."""


class UnitCrashed(Exception):
    """A unit failed with an error that is not a user mistake; carries the unit's own traceback."""

    def __init__(self, title: str, text: str) -> None:
        super().__init__(title, text)
        self.title = title
        self.text = text

    def __str__(self) -> str:
        """The run and the error's last line first (the one line a terminal shows), then the whole text."""
        last = next((ln.strip() for ln in reversed(self.text.splitlines()) if ln.strip()), "")
        return f"{self.title}: {last}\n{self.text}"


def _ended(code: int) -> str:
    """How a worker process ended, in words: a negative exit code is the signal that killed it."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the system's out-of-memory killer sends it)" if -code == signal.SIGKILL else ""
        return f"its worker process was killed by {name}{hint}"
    return f"its worker process ended with exit code {code}"


def _portable(unit: Unit, exc: BaseException) -> BaseException:
    """``exc`` as it can travel between processes: a user mistake as it is (a full disk still a full disk, so what
    finished is kept), the user's own code failing with its traceback for crash.txt, anything else (a bug) with
    its traceback."""
    if isinstance(exc, NoSpace):
        return NoSpace(exc.where, exc.message)
    if isinstance(exc, InputError):
        return InputError(exc.where, exc.message)
    if isinstance(exc, UserCodeFailed):
        return UserCodeFailed(exc.where, exc.message, exc.details)
    return UnitCrashed(unit.title, "".join(traceback.format_exception(exc)))


class Backend(Protocol):
    """Runs units; see the module docstring."""

    def run(self, units: Sequence[Unit], handle: Handle) -> None: ...


class InProcess:
    """Units one after another in this process."""

    def run(self, units: Sequence[Unit], handle: Handle) -> None:
        for unit in units:
            handle(run_unit(unit, handle))


# -- the shared wait loop ------------------------------------------------------------------------

_START = "start"
_END = "end"
_ERROR = "error"


def _wait(results: Any, keys: set[Key], handle: Handle, check: Callable[[], None],
          started: dict[int, Key] | None = None) -> None:
    """Hand on what arrives on ``results`` until every unit in ``keys`` has ended.

    ``check`` raises when a unit can no longer end (its worker died); ``started`` notes which
    worker process runs which unit (``(start, key, pid)`` items) for it.
    """
    while keys:
        try:
            item = results.get(timeout=POLL_SECONDS)
        except queue.Empty:
            check()
            continue
        if isinstance(item, tuple):
            kind = item[0]
            if kind == _ERROR:
                raise item[1]
            if kind == _START and started is not None:
                started[item[2]] = item[1]
            if kind == _END:
                outcome: Outcome = item[1]
                keys.discard(outcome.key)
                if started is not None:
                    started.pop(next((p for p, k in started.items() if k == outcome.key), -1), None)
                handle(outcome)
        elif item.key in keys:  # a message of a unit still going
            handle(item)


# -- local worker processes ------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (no effect elsewhere)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent is already gone
            os._exit(1)


def _worker(tasks: Any, results: Any) -> None:
    """A worker process: run units from ``tasks`` until the end marker, reporting on ``results``."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops its workers on Ctrl-C or SIGTERM
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        unit: Unit | None = tasks.get()
        if unit is None:
            return
        results.put((_START, unit.key, os.getpid()))
        try:
            results.put((_END, run_unit(unit, results.put)))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the launching process
            results.put((_ERROR, _portable(unit, exc)))
            return


class LocalWorkers:
    """Units in ``workers`` spawned processes on this machine, which never import the caller's ``__main__``."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def run(self, units: Sequence[Unit], handle: Handle) -> None:
        ctx = context()
        tasks, results = ctx.Queue(), ctx.Queue()
        for unit in units:
            tasks.put(unit)
        count = min(self.workers, len(units))
        for _ in range(count):
            tasks.put(None)
        procs = [ctx.Process(target=_worker, args=(tasks, results), daemon=False) for _ in range(count)]
        started: dict[int, Key] = {}
        titles = {u.key: u.title for u in units}

        def check() -> None:
            for proc in procs:
                if proc.exitcode is not None and proc.pid in started:
                    raise WorkerLost(titles[started[proc.pid]], _ended(proc.exitcode))
            if all(proc.exitcode is not None for proc in procs):  # units remain, nobody is left to run them
                codes = sorted({int(proc.exitcode or 0) for proc in procs})
                raise InputError("workers", f"every worker process ended before it ran a unit (exit code "
                                 f"{', '.join(map(str, codes))}); run with one worker (workers=1, --workers 1) to "
                                 "run the units in this process")

        try:
            for proc in procs:
                proc.start()
            _wait(results, {u.key for u in units}, handle, check, started)
        finally:
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
            for proc in procs:
                proc.join()
            for q in (tasks, results):
                q.cancel_join_thread()
                q.close()


# -- Ray tasks ---------------------------------------------------------------------------------------


def _ray_unit(unit: Unit, data: list[Any]) -> Iterator[Any]:
    """A Ray task: run ``unit`` in a thread of this worker and stream what it reports.

    ``data`` holds a reference to the launching process's copy of the dataset (or None), read
    only when this node's data folder lacks the dataset.
    """
    import ray

    box: queue.Queue[Any] = queue.Queue()
    ref = data[0] if data else None

    def fallback() -> Dataset:
        if ref is None:
            raise InputError("data", "the dataset is in neither this node's data folder nor the launching machine's")
        dataset: Dataset = ray.get(ref)
        return dataset

    def work() -> None:
        try:
            box.put((_END, run_unit(unit, box.put, fallback)))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the launching process
            box.put((_ERROR, _portable(unit, exc)))

    threading.Thread(target=work, name=f"simfl {unit.title}", daemon=True).start()
    while True:
        item = box.get()
        yield item
        if isinstance(item, tuple) and item[0] in (_END, _ERROR):
            return


@dataclass
class RayTasks:
    """Units as Ray tasks, on a local Ray instance (``address`` None, ``cpus`` cores) or the cluster at ``address``."""

    address: str | None
    cpus: int
    task_cpus: Callable[[Unit], int]
    """Cores each unit's task is declared with."""
    datasets: Callable[[], dict[str, Dataset]]
    """The datasets this process can load, by data section (see :func:`simfl.launch.units.dataset_for`)."""

    def run(self, units: Sequence[Unit], handle: Handle) -> None:
        try:
            import ray
        except ImportError:
            raise InputError("--ray", "needs the 'ray' package: pip install 'simfl[ray]'") from None
        from simfl.launch.units import data_key, unit_scenario
        from simfl.train.ray_executor import quiet_init

        owns = not ray.is_initialized()
        if owns:
            if self.address is None:
                quiet_init(ray, "--ray", num_cpus=self.cpus)
            else:
                quiet_init(ray, "--ray", address=self.address)
        results: queue.Queue[Any] = queue.Queue()
        gens: list[Any] = []
        stop = threading.Event()
        try:
            refs = {key: ray.put(dataset) for key, dataset in self.datasets().items()}
            task: Any = ray.remote(_ray_unit)

            def pump(unit: Unit, gen: Any) -> None:
                try:
                    for ref in gen:
                        if stop.is_set():
                            return
                        results.put(ray.get(ref))
                except Exception as exc:  # a Ray failure: the node or worker died, the task was cancelled
                    if not stop.is_set():
                        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
                        results.put((_ERROR, WorkerLost(unit.title, f"its Ray task failed: {first}")))

            for unit in units:
                ref = refs.get(data_key(unit_scenario(unit)))
                gen = task.options(num_cpus=self.task_cpus(unit), num_returns="streaming",
                                   max_retries=0).remote(unit, [ref])
                gens.append(gen)
                threading.Thread(target=pump, args=(unit, gen), daemon=True).start()
            _wait(results, {u.key for u in units}, handle, lambda: None)
        finally:
            stop.set()
            for gen in gens:
                with contextlib.suppress(Exception):
                    ray.cancel(gen, force=True)
            if owns:
                ray.shutdown()
