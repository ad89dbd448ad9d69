"""A ClientApp's torch training in the thread that simulates against one in a thread of its own: wall and CPU.

``simfl flwr run`` calls each ClientApp in a daemon thread of its own (:func:`simfl.errors.user_call`, so that
``client.timeout`` can end a call that never returns, even one blocked in C), while the simulating thread runs
simfl's and the ServerApp's torch work. torch's OpenMP runtime (GNU libgomp) keeps a pool of worker threads for
each thread that has run a parallel region; once two such pools exist on a machine of few cores, the parallel
regions of both run far slower (their workers stop spinning and sleep between regions: ``gomp_throttled_spin``,
taken when the runtime's threads outnumber the CPUs). This benchmark times one training loop of custom-mods'
CNN (Flower's example: CIFAR-10's shape, batch 32, SGD with momentum, ``--steps`` steps) on ``--threads`` torch
threads, in fresh processes, each case alternating over ``--repeat`` rounds, medians:

- ``main``: in the main thread (as Flower's engine runs a ClientApp: one thread computes in its Ray actor);
- ``thread_alone``: in a new thread, the main thread never having computed;
- ``thread_beside``: in a new thread after the main thread has computed (simfl's ClientApp calls before
  :mod:`simfl.openmp`);
- ``thread_released``: the same, the main thread having released its pool first (:func:`simfl.openmp.release`, as
  simfl's calls now run).

Prints ``case_wall_seconds=`` and ``case_cpu_seconds=`` lines, then ``beside_vs_main`` and ``released_vs_main``, the
wall ratios.

    python -m benchmarks.call_thread [--steps 300] [--threads 2] [--repeat 3] [--env NAME=VALUE ...]

``--env``: variables for every process (``OMP_WAIT_POLICY=PASSIVE``, say: whether a setting of the OpenMP runtime
removes the cost).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CASES = ("main", "thread_alone", "thread_beside", "thread_released")

_CHILD = """
import threading, time, torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads({threads})
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.pool, self.conv2 = nn.Conv2d(3, 6, 5), nn.MaxPool2d(2, 2), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)
    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x))).flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))
def train(steps):
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
case, steps = {case!r}, {steps}
if case in ("thread_beside", "thread_released"):
    train(20)  # the main thread computes first (its pool exists), as the simulating thread has
if case == "thread_released":
    import ctypes  # what simfl.openmp.release does, without importing simfl (which pins the numerics' variables)
    gomp = next(line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line.split()[-1])
    ctypes.CDLL(gomp).omp_pause_resource_all(1)  # omp_pause_soft: the main thread's pool ends
def timed():
    train(20)  # the computing thread's own first steps (allocations, its pool) are not timed
    wall, cpu = time.perf_counter(), time.process_time()
    train(steps)
    print(time.perf_counter() - wall, time.process_time() - cpu)
if case == "main":
    timed()
else:
    worker = threading.Thread(target=timed)
    worker.start()
    worker.join()
"""


def one(case: str, steps: int, threads: int, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of the training loop of ``case`` in a fresh process with ``env`` added."""
    done = subprocess.run([sys.executable, "-c", _CHILD.format(case=case, steps=steps, threads=threads)],
                          capture_output=True, text=True, check=True, timeout=600, env={**os.environ, **env})
    wall, cpu = map(float, done.stdout.split())
    return wall, cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps of each loop")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (a ClientApp's num-cpus)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the three cases (medians)")
    parser.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE", help="variables for every process")
    args = parser.parse_args(argv)
    env = dict(pair.split("=", 1) for pair in args.env)
    taken: dict[str, list[tuple[float, float]]] = {case: [] for case in CASES}
    for _ in range(args.repeat):
        for case in CASES:
            taken[case].append(one(case, args.steps, args.threads, env))
    walls = {case: statistics.median(w for w, _ in runs) for case, runs in taken.items()}
    for case, runs in taken.items():
        print(f"{case}_wall_seconds={walls[case]:.3f}")
        print(f"{case}_cpu_seconds={statistics.median(c for _, c in runs):.3f}")
    print(f"beside_vs_main={walls['thread_beside'] / walls['main']:.2f}")
    print(f"released_vs_main={walls['thread_released'] / walls['main']:.2f}")


if __name__ == "__main__":
    main()
