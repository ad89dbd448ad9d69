"""Time per OrthoFL arrival at real model sizes: ours, a naive per-tensor loop, the memory-bandwidth bound.

For each model (real layouts from ``simfl.models.MODELS`` and ``Layout.of``):

- ``ours``: :meth:`simfl.algorithms.orthofl.OrthoFL.on_arrival` (flat vectors,
  on CPU the fused kernel of :mod:`simfl.algorithms.fused`, batch norm kept
  local as by default);
- ``naive``: the same update written as a Python loop over a per-tensor state
  dict (float64 dot products per tensor), as an FL framework typically does;
- ``bound``: the time to copy the bytes an arrival must at least read and
  write (client weights, start weights, global model and the client's anchor
  read; calibrated weights and new global written: 6 float32 vectors), i.e.
  one ``copy_`` of 3 vectors' worth, measured on the same machine in the same run.

Each figure is the best of repeated timings (on a shared machine the best
is the least disturbed by other load; medians are printed too). Prints ``name=value`` lines;
the last is ``orthofl_mobilenetv2_vs_bound``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from simfl import rng
from simfl.algorithms.base import Arrival, Setup
from simfl.algorithms.orthofl import OrthoFL, OrthoFLConfig
from simfl.models import MODELS, Layout

SHAPES: dict[str, tuple[tuple[int, ...], int]] = {
    "lenet5": ((1, 28, 28), 10),
    "resnet18_1d": ((9, 128), 6),
    "vgg11": ((3, 32, 32), 10),
    "mobilenetv2": ((3, 32, 32), 10),
}


def best_seconds(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Best and median wall time of ``fn`` over ``repeats`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def naive_arrival(
    w: dict[str, torch.Tensor], anchor: dict[str, torch.Tensor], weights: dict[str, torch.Tensor],
    start: dict[str, torch.Tensor], bn: set[str], beta_t: float,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """OrthoFL's arrival as a loop over named tensors: calibrated client model and new global."""
    calibrated, new_w = {}, {}
    for name, wm in weights.items():
        update = wm - start[name]
        shift = w[name] - anchor[name]
        if name in bn:
            calibrated[name] = wm.clone()
        else:
            u64, s64 = update.double(), shift.double()
            uu = float((u64 * u64).sum())
            coef = float((s64 * u64).sum()) / uu if uu > 0 else 0.0
            calibrated[name] = (s64 - coef * u64).float() + wm
        new_w[name] = (1 - beta_t) * w[name] + beta_t * wm
    return calibrated, new_w


def measure(name: str, repeats: int) -> dict[str, tuple[float, float]]:
    """Seconds per arrival (best, median) of ours, naive and the bound for model ``name``."""
    builder = MODELS[name]
    shape, classes = SHAPES[name]
    model = builder.build(builder.Config(), shape, classes)
    layout = Layout.of(model)
    gen = rng.torch_generator(0, "bench-aggregation", name)
    init = torch.randn(layout.size, generator=gen)
    algo = OrthoFL(OrthoFLConfig(), Setup(layout, init, 2, (1, 1), 0))
    starts = [init + 0.01 * torch.randn(layout.size, generator=gen) for _ in range(2)]
    trained = [s + 0.01 * torch.randn(layout.size, generator=gen) for s in starts]
    algo.on_arrival(Arrival(1, trained[1], starts[1], 1, 1, 1))  # the global has moved: a non-zero shift
    arrival = Arrival(0, trained[0], starts[0], 2, 2, 1)
    ours = best_seconds(lambda: algo.on_arrival(arrival), repeats)

    split = layout.split
    bn = {s.name for s in layout.segments if s.bn}
    args = (split(algo.w.clone()), split(init.clone()), split(trained[0]), split(starts[0]), bn, 0.5)
    naive = best_seconds(lambda: naive_arrival(*args), repeats)

    src = torch.randn(3 * layout.size, generator=gen)
    dst = torch.empty_like(src)
    bound = best_seconds(lambda: dst.copy_(src), repeats * 4)
    return {"params": (float(layout.size), 0.0), "ours": ours, "naive": naive, "bound": bound}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per figure")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a busy machine a thread pool waits on descheduled threads)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch_threads={torch.get_num_threads()}")
    ratio = 0.0
    for name in SHAPES:
        r = measure(name, args.repeats)
        print(f"{name}_params={int(r['params'][0])}")
        for key in ("ours", "naive", "bound"):
            print(f"orthofl_{name}_{key}_us={r[key][0] * 1e6:.1f}")
            print(f"orthofl_{name}_{key}_median_us={r[key][1] * 1e6:.1f}")
        print(f"orthofl_{name}_naive_vs_ours={r['naive'][0] / r['ours'][0]:.2f}")
        ratio = r["ours"][0] / r["bound"][0]
        print(f"orthofl_{name}_vs_bound={ratio:.2f}")
    print(f"orthofl_mobilenetv2_vs_bound={ratio:.2f}")


if __name__ == "__main__":
    main()
