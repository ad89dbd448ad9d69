"""CPython's cyclic garbage collector around simfl's bulk work: paused while a population is built, and kept off
the population's objects while a run goes on.

The collector makes a pass each time enough new container objects have survived. Building a population
makes millions of them at once (a client record per client, the clients' shards, latency and selection
state), and the collector's passes over them cost about as much as the building itself: at 10^6 clients,
about 3 of 8 CPU seconds of a run's setup (benchmarks/README.md, "population setup"). simfl's builders make
no reference cycles that need collecting, so the collector is paused while they run
(:func:`paused`). Reference counting still frees everything as usual, and any cyclic garbage made meanwhile
is collected at the collector's next pass.

While a run goes on (:func:`running`), the objects that exist when it starts live as long as it does, so the
collector's passes leave them alone (``gc.freeze``, undone at the end); in pure-latency mode the collector is
paused for the whole run, whose rules make no reference cycles per event.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block (as it was before, after it: a nested pause changes nothing)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def running(pause: bool) -> Iterator[None]:
    """A run's loop: what exists now is frozen out of the collector's passes, and with ``pause`` the collector is off."""
    gc.freeze()
    try:
        if pause:
            with paused():
                yield
        else:
            yield
    finally:
        gc.unfreeze()
