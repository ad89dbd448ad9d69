"""One training step of the built-in models on one thread, as the estimate's speed constants assume.

Builds LeNet5 (MNIST shape, batch 128), VGG11 (CIFAR-10, batch 32), MobileNetV2 (CIFAR-100, batch 32) and the
quickstart's small CNN (8x8 digits, batches of 32 and of 1), runs SGD steps on random data under simfl's
numerics pin and prints ``<model>_b<batch>_ms`` (CPU milliseconds per step) and, for each,
``_flops_per_s`` (FlopCounterMode's training FLOPs per sample times the batch, over that time). These gave
the reference values :data:`simfl.schema.costs.CPU_FLOPS`, ``FLOPS_EXPONENT`` and ``STEP_SECONDS``, which the
estimate counts where ``simfl run`` has not yet timed the scenario's own model on the machine at hand
(:mod:`simfl.launch.measure_speeds`).
"""

from __future__ import annotations

import time

import torch

import simfl  # noqa: F401 - pins the floating-point kernels before torch computes
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


def main() -> None:
    torch.set_num_threads(1)
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


if __name__ == "__main__":
    main()
