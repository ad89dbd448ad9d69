"""One training step of the built-in models on one thread, as the estimate's speed constants assume.

Builds LeNet5 (MNIST shape, batch 128), VGG11 (CIFAR-10, batch 32), MobileNetV2 (CIFAR-100, batch 32) and the
quickstart's small CNN (8x8 digits, batches of 32 and of 1), runs SGD steps on random data under simfl's
numerics pin and prints ``<model>_b<batch>_ms`` (CPU milliseconds per step) and, for each,
``_flops_per_s`` (FlopCounterMode's training FLOPs per sample times the batch, over that time). These gave
the reference values ``CPU_FLOPS``, ``REFERENCE_FLOPS``, ``FLOPS_EXPONENT`` and ``STEP_SECONDS`` of
``simfl/schema/costs.json``, which the estimate counts where ``simfl run`` has not yet timed the scenario's own model
on the machine at hand (:mod:`simfl.launch.measure_speeds`). ``--write`` refits them from this run (:func:`fit`)
and writes them to that file with this run as their provenance (:func:`benchmarks.costs.refit`): run it with
nothing else on the machine, and commit the file.
"""

from __future__ import annotations

import argparse
import math
import time

import torch

import simfl  # noqa: F401 - pins the floating-point kernels before torch computes
from benchmarks.costs import refit, significant
from simfl.models import MODELS
from simfl.models.cost import training_flops_per_sample

CASES = [("lenet5", {}, (1, 28, 28), 10, 128, 20), ("vgg11", {}, (3, 32, 32), 10, 32, 3),
         ("mobilenetv2", {}, (3, 32, 32), 100, 32, 3), ("smallcnn", {"channels": 8}, (1, 8, 8), 10, 32, 300),
         ("smallcnn", {"channels": 8}, (1, 8, 8), 10, 1, 300)]


def step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    """One SGD step on the batch ``(x, y)``."""
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


Measured = dict[tuple[str, int], tuple[float, int]]
"""Per (model, batch): CPU seconds per step and training FLOPs per sample."""


def fit(measured: Measured) -> dict[str, float]:
    """The reference speed constants from one run: LeNet5's FLOPs per second at batch 128 and its FLOPs per sample
    (``CPU_FLOPS``, ``REFERENCE_FLOPS``), the exponent through that point that fits VGG11's and MobileNetV2's
    speeds best in log space (``FLOPS_EXPONENT``), and the small CNN's step of one sample less its FLOPs' time at
    that speed (``STEP_SECONDS``), each to two significant digits."""
    seconds, reference = measured["lenet5", 128]
    cpu = significant(reference * 128 / seconds)
    ref = significant(reference)
    points = [(math.log(flops / ref), math.log(flops * batch / s / cpu))
              for (name, batch), (s, flops) in measured.items() if name in ("vgg11", "mobilenetv2")]
    exponent = round(sum(x * y for x, y in points) / sum(x * x for x, _ in points), 2)
    step, flops = measured["smallcnn", 1]
    fixed = step - flops / (cpu * (flops / ref) ** exponent)
    return {"CPU_FLOPS": cpu, "REFERENCE_FLOPS": ref, "FLOPS_EXPONENT": exponent, "STEP_SECONDS": significant(fixed)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="refit the estimate's reference speed constants from "
                        "this run and write them to simfl/schema/costs.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    measured: Measured = {}
    for name, options, shape, classes, batch, steps in CASES:
        builder = MODELS[name]
        model = builder.build(builder.Config(**options), shape, classes)
        flops = training_flops_per_sample(model, torch.zeros(shape))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(batch, *shape), torch.randint(0, classes, (batch,))

        for _ in range(2):
            step(model, opt, x, y)
        start = time.process_time()
        for _ in range(steps):
            step(model, opt, x, y)
        seconds = (time.process_time() - start) / steps
        print(f"{name}_b{batch}_ms={1e3 * seconds:.2f}", flush=True)
        print(f"{name}_b{batch}_flops_per_s={flops * batch / seconds:.3g}", flush=True)
        measured[name, batch] = (seconds, flops)
    if args.write:
        figures = ", ".join(f"{n} batch {b}: {1e3 * s:.2f} ms a step, {f * b / s:.3g} FLOP/s"
                            for (n, b), (s, f) in measured.items())
        for line in refit(fit(measured), "python -m benchmarks.train_step --write (CPU time, one thread)", figures):
            print(line)


if __name__ == "__main__":
    main()
