"""A thread that hands computing to another thread first releases its own OpenMP worker pool.

torch's OpenMP runtime (GNU libgomp on Linux) keeps a pool of worker threads for each thread that has run a
parallel region, and keeps it while that thread waits. simfl hands computing from thread to thread: the simulating
thread waits while a ClientApp call computes in a thread of its own (:func:`simfl.errors.user_call`), a ServerApp's
thread waits while the simulation delivers its messages. Once the runtime's threads outnumber the CPUs, libgomp
stops letting idle workers spin between parallel regions (its "throttled" spin count, which no setting raises), and
every region of the computing thread then pays for waking its workers: on two cores, the same training loop of a
small CNN took 2.1x as long in a thread beside the main thread's idle pool (``benchmarks.call_thread``).

:func:`release` frees the calling thread's pool (OpenMP 5's ``omp_pause_resource_all``, ``omp_pause_soft``: the
pool's threads end; its next parallel region starts a new pool). It changes no number: each thread's thread count
(its ICV, which torch's ``set_num_threads`` sets) stays, and so does the work each region splits among its threads.
Where no GNU OpenMP runtime that has the call is loaded (torch not yet imported, another platform), it does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from pathlib import Path

RUNTIME = "libgomp"
"""The file name (its start) of the OpenMP runtime whose pools are released: GNU's, in which the call frees only the
calling thread's pool (LLVM's and Intel's pause every thread of the process, one that computes too: left alone)."""
_MAPS = Path("/proc/self/maps")
_found: list[Callable[[int], int]] = []
"""Each loaded runtime's ``omp_pause_resource_all``."""
_looked_at = -1
"""``len(sys.modules)`` when the runtimes were last looked for (-1: never): a new import may load another runtime."""


def _runtimes() -> list[Callable[[int], int]]:
    """Each loaded OpenMP runtime's ``omp_pause_resource_all``, looked for again only after a new import."""
    global _looked_at
    loaded = len(sys.modules)
    if loaded == _looked_at:
        return _found
    _looked_at = loaded
    try:
        fields = [line.split(maxsplit=5) for line in _MAPS.read_text().splitlines()]
    except OSError:  # no /proc (not Linux): nothing to release
        return _found
    paths = {f[5].strip() for f in fields if len(f) == 6 and Path(f[5].strip()).name.startswith(RUNTIME)}
    found = []
    for path in sorted(paths):
        try:
            pause = getattr(ctypes.CDLL(path), "omp_pause_resource_all", None)
        except OSError:  # pragma: no cover - a mapped file that cannot be opened again
            continue
        if pause is not None:
            pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
            found.append(pause)
    _found[:] = found
    return _found


def release() -> None:
    """Free the calling thread's OpenMP worker pools before it waits on another thread's computation (module
    docstring); a thread inside a parallel region, or with no pool, is left as it is."""
    for pause in _runtimes():
        pause(1)  # omp_pause_soft
