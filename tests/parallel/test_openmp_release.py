"""A thread that waits on another's computation leaves no idle OpenMP pool behind it (``simfl.openmp``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

_CHILD = """
import os, threading, torch
from simfl import errors, openmp
torch.set_num_threads(2)
x = torch.arange(4_000_000, dtype=torch.float64)
def tasks():
    return len(os.listdir("/proc/self/task"))
first = float((x * 1.5).sum())  # a parallel region in this thread: its pool (one worker) runs
pooled = tasks()
openmp.release()
released = tasks()
float((x * 1.5).sum())  # the pool again
assert openmp._runtimes(), "no libgomp found in a process that imported torch"
seen = {}
def call():
    seen["during"] = tasks()  # this call's thread and whatever the caller left running
    return float((x * 1.5).sum())
in_call = errors.user_call("test", "the call", call, seconds=60.0, limit="test")
again = float((x * 1.5).sum())  # this thread's next region starts a pool again
print(pooled, released, seen["during"], first == in_call == again, torch.get_num_threads())
"""


@pytest.mark.skipif(sys.platform != "linux", reason="libgomp and /proc/self/task are Linux's")
def test_a_timed_user_call_runs_beside_no_idle_pool_of_its_caller() -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300, check=True)
    pooled, released, during, same, threads = map(int, done.stdout.replace("True", "1").replace("False", "0").split())
    assert released == pooled - 1  # the pool's one worker ended
    assert during == pooled  # the call's own thread is there, the caller's worker is not
    assert same == 1 and threads == 2  # the numbers and the thread count as before

