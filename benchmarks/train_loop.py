"""simfl's local training loop against a bare PyTorch loop of the same steps, at a small batch.

At batch 32 a LeNet5 step is short enough that Python and dispatch count. Per ``SIMFL_NUMERICS`` mode
(a fresh process each, the modes alternating ``--repeat`` times) this trains one client's job of
``--samples`` MNIST-shaped random rows for ``--epochs`` epochs at ``--batch``, one thread: simfl's
:class:`simfl.train.local.LocalTrainer` (its job set-up, batch order stream, hooks check, loss sum and flat
weights in and out) and a bare loop that does the same steps in the same layout (load the weights, the same
permutation, forward, cross-entropy, ``zero_grad``, backward, ``SGD.step``, flatten), rounds of the two
interleaved. Prints CPU ms per job (best round), ``<mode>_simfl_vs_bare`` (median of the rounds' ratios)
and whether both give the same bits.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROBE = r"""
import json, sys, time
import torch
from simfl import numerics, rng
from simfl.models.flat import Layout
from simfl.models.lenet import LeNet5, LeNet5Config
from simfl.train.configs import TrainConfig
from simfl.train.local import Job, LocalTrainer, channels_last_helps
samples, epochs, batch, rounds = json.loads(sys.argv[1])
torch.set_num_threads(1)
numerics.apply()
torch.manual_seed(0)
model = LeNet5.build(LeNet5Config(), (1, 28, 28), 10)
layout = Layout.of(model)
start = layout.flatten(model)
gen = torch.Generator().manual_seed(1)
x, y = torch.randn(samples, 1, 28, 28, generator=gen), torch.randint(0, 10, (samples,), generator=gen)
config = TrainConfig(epochs=epochs, batch_size=batch, lr=0.05)
trainer = LocalTrainer(model, layout, [(x, y)], config, 0)
bare_model = LeNet5.build(LeNet5Config(), (1, 28, 28), 10)
if channels_last_helps(bare_model):
    bare_model.to(memory_format=torch.channels_last)

def bare():
    layout.load(bare_model, start)
    opt = torch.optim.SGD(bare_model.parameters(), lr=config.lr)
    g = rng.torch_generator(0, "train", 0, 0)
    for _ in range(epochs):
        order = torch.randperm(samples, generator=g)
        for i in range(0, samples, batch):
            idx = order[i : i + batch]
            loss = torch.nn.functional.cross_entropy(bare_model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return layout.flatten(bare_model)

def ours():
    return trainer.run(Job(0, 0, start)).weights

same = bool(torch.equal(ours(), bare()))
times = {"simfl": [], "bare": []}
for r in range(rounds):
    for name, f in (("simfl", ours), ("bare", bare)) if r % 2 == 0 else (("bare", bare), ("simfl", ours)):
        t = time.process_time()
        f()
        times[name].append(1e3 * (time.process_time() - t))
print(json.dumps({"same": same, **times}))
"""


def probe(mode: str, samples: int, epochs: int, batch: int, rounds: int) -> dict:
    """One fresh process under ``SIMFL_NUMERICS=mode``: per round, CPU ms of simfl's job and of the bare loop."""
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    env["SIMFL_NUMERICS"] = mode
    arg = json.dumps([samples, epochs, batch, rounds])
    done = subprocess.run([sys.executable, "-c", PROBE, arg], env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=600, help="the client's rows")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=10, help="jobs of each loop per process")
    parser.add_argument("--repeat", type=int, default=3, help="processes per mode")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict]] = {"portable": [], "native": []}
    for _ in range(args.repeat):
        for mode in runs:
            runs[mode].append(probe(mode, args.samples, args.epochs, args.batch, args.rounds))
    steps = args.epochs * -(-args.samples // args.batch)
    print(f"steps_per_job={steps}")
    for mode, rs in runs.items():
        simfl = min(t for r in rs for t in r["simfl"])
        bare = min(t for r in rs for t in r["bare"])
        ratio = statistics.median(a / b for r in rs for a, b in zip(r["simfl"], r["bare"], strict=True))
        print(f"{mode}_simfl_ms_per_job={simfl:.1f}")
        print(f"{mode}_bare_ms_per_job={bare:.1f}")
        print(f"{mode}_same_weights={'yes' if all(r['same'] for r in rs) else 'no'}")
        print(f"{mode}_simfl_vs_bare={ratio:.3f}")


if __name__ == "__main__":
    main()
