"""What the portable numerics cost: a local SGD step of LeNet5 and of the quickstart's CNN, portable vs native.

``SIMFL_NUMERICS=portable`` (the default, :mod:`simfl.numerics`) pins torch's kernels so that every
x86-64 CPU gives the same numbers; ``native`` lets the machine choose. The mode must be set before
torch first computes, so each measurement is a fresh process; the two modes alternate ``--repeat``
times. One thread, batch 128, CPU milliseconds per step (median). The models train in the memory layout
``--layout`` says: ``trainer`` (the default) as simfl's trainer does (channels-last where oneDNN is on,
:func:`simfl.train.local.channels_last_helps`), or ``contiguous`` or ``channels_last`` in both modes
(the trainer trained channels-last in both before the portable mode went contiguous). Prints
``name=value`` lines and ``<model>_portable_vs_native`` (the cost factor of pinning).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

STEPS = r"""
from simfl.models.lenet import LeNet5, LeNet5Config
from simfl.models.small import SmallCNN, SmallCNNConfig
def training_steps(channels_last):
    # each model's name and one SGD step of it on a fixed batch of 128, after 5 warm-up steps; the model
    # channels-last where channels_last(model) says
    for name, model, shape in (("lenet5", LeNet5.build(LeNet5Config(), (1, 28, 28), 10), (1, 28, 28)),
                               ("smallcnn", SmallCNN.build(SmallCNNConfig(channels=8), (1, 8, 8), 10), (1, 8, 8))):
        if channels_last(model):
            model.to(memory_format=torch.channels_last)
        gen = torch.Generator().manual_seed(0)
        x, y = torch.randn(128, *shape, generator=gen), torch.randint(0, 10, (128,), generator=gen)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        def step(model=model, opt=opt, x=x, y=y):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        for _ in range(5):
            step()
        yield name, step
"""
"""The probes' models and training step (source run in each probe's fresh process), shared by
:mod:`benchmarks.numerics_breakdown`."""

PROBE = r"""
import json, sys, time
import torch
from simfl import numerics
from simfl.train.local import channels_last_helps
torch.set_num_threads(1)
numerics.apply()
layout = sys.argv[1]
""" + STEPS + r"""
out = {}
for name, step in training_steps(lambda m: layout == "channels_last" or (layout == "trainer" and channels_last_helps(m))):
    start, n = time.process_time(), 40
    for _ in range(n):
        step()
    out[name] = 1e3 * (time.process_time() - start) / n
print(json.dumps(out))
"""


def probe(mode: str, layout: str = "trainer") -> dict[str, float]:
    """CPU ms per step of each model in a fresh process under ``SIMFL_NUMERICS=mode``."""
    env = {**os.environ, "SIMFL_NUMERICS": mode}
    env.pop("ATEN_CPU_CAPABILITY", None)
    env.pop("MKL_CBWR", None)
    done = subprocess.run([sys.executable, "-c", PROBE, layout], env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="processes per mode")
    parser.add_argument("--layout", choices=("trainer", "contiguous", "channels_last"), default="trainer",
                        help="the models' memory layout (trainer: as simfl's trainer picks it in each mode)")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"portable": [], "native": []}
    for _ in range(args.repeat):
        for mode in runs:
            runs[mode].append(probe(mode, args.layout))
    for model in ("lenet5", "smallcnn"):
        ms = {mode: statistics.median(r[model] for r in rs) for mode, rs in runs.items()}
        for mode, value in ms.items():
            print(f"{model}_{mode}_cpu_ms_per_step={value:.2f}")
        print(f"{model}_portable_vs_native={ms['portable'] / ms['native']:.2f}")


if __name__ == "__main__":
    main()
