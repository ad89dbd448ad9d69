"""Where the portable numerics' extra time goes: one SGD step per kernel group, under each switch alone.

:mod:`benchmarks.numerics` gives the cost factor of ``SIMFL_NUMERICS=portable`` against ``native``; this
splits it. Each configuration runs in a fresh process (the capability and MKL's code path are read once,
at torch's first computation) with ``SIMFL_NUMERICS=native`` so that simfl leaves its environment alone,
the configuration's variables set and oneDNN and NNPACK switched as it says. Per model (LeNet5 on 28x28,
the quickstart's 8-channel CNN on 8x8, batch 128, one thread, the memory layout ``--layout`` says: by
default as simfl's trainer picks it, channels-last where oneDNN is on) it
prints the CPU ms of an unprofiled step (median of ``--steps``-step blocks) and, from ``torch.profiler``
over further steps, each kernel group's self CPU ms per step (an op's children count in its group; the
profiler adds its own cost, so the groups sum to a little more than the step). Configurations alternate,
``--repeat`` rounds; figures are medians over rounds, ``<config>_vs_native`` the median of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from benchmarks.numerics import STEPS

CONFIGS: dict[str, tuple[dict[str, str], bool, bool]] = {
    "native": ({}, True, True),
    "portable": ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}, False, False),
    "portable+mkl_auto": ({"ATEN_CPU_CAPABILITY": "default"}, False, False),
    "portable+mkl_avx2_strict": ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2,STRICT"}, False, False),
    "portable+aten_avx2": ({"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"}, False, False),
    "portable+aten_avx512": ({"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "COMPATIBLE"}, False, False),
    "portable+onednn": ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}, True, False),
    "portable+nnpack": ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}, False, True),
}
"""Name: (environment, oneDNN on, NNPACK on): ``portable`` with one switch changed. ``mkl_auto`` leaves
``MKL_CBWR`` unset; ``portable+aten_avx2`` is the pin that would require AVX2 of every CPU."""

GROUPS = {
    "conv_fwd": ("aten::_slow_conv2d_forward", "aten::mkldnn_convolution", "aten::_nnpack_spatial_convolution",
                 "aten::thnn_conv2d"),
    "conv_bwd": ("aten::_slow_conv2d_backward", "aten::convolution_backward"),
    "gemm": ("aten::mm", "aten::addmm", "aten::bmm"),
    "pool": ("aten::avg_pool2d", "aten::avg_pool2d_backward", "aten::max_pool2d_with_indices",
             "aten::max_pool2d_with_indices_backward"),
    "relu": ("aten::clamp_min", "aten::relu", "aten::threshold_backward"),
    "loss": ("aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::nll_loss_forward",
             "aten::nll_loss_backward"),
}
"""Kernel groups by op name; ops under ``Optimizer.step`` or ``zero_grad`` are ``optimizer``, the rest ``other``."""

PROBE = r"""
import json, sys, time
import torch
from torch.profiler import ProfilerActivity, profile
onednn, nnpack, layout, steps, groups = json.loads(sys.argv[1])
torch.set_num_threads(1)
torch.backends.mkldnn.enabled = onednn
torch.backends.nnpack.set_flags(nnpack)
of_name = {op: g for g, ops in groups.items() for op in ops}
def group(e):
    while e is not None:
        if e.name.startswith("Optimizer."):
            return "optimizer"
        if e.name in of_name:
            return of_name[e.name]
        e = e.cpu_parent
    return "other"
""" + STEPS + r"""
out = {"capability": torch.backends.cpu.get_cpu_capability()}
for name, step in training_steps(lambda m: layout == "channels_last" or (layout == "trainer" and onednn)):
    blocks = []
    for _ in range(3):
        start = time.process_time()
        for _ in range(steps):
            step()
        blocks.append(1e3 * (time.process_time() - start) / steps)
    ms = {"step": sorted(blocks)[1]}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    for e in prof.events():
        g = group(e)
        ms[g] = ms.get(g, 0.0) + e.self_cpu_time_total / 1e3 / steps
    out[name] = ms
print(json.dumps(out))
"""


def probe(config: str, layout: str, steps: int) -> dict:
    """One fresh process under ``config``: its capability and, per model, ms per step and per kernel group."""
    env_vars, onednn, nnpack = CONFIGS[config]
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    env.update({"SIMFL_NUMERICS": "native", **env_vars})
    arg = json.dumps([onednn, nnpack, layout, steps, GROUPS])
    done = subprocess.run([sys.executable, "-c", PROBE, arg], env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (one fresh process per configuration each)")
    parser.add_argument("--steps", type=int, default=20, help="steps per timed block and profiled")
    parser.add_argument("--layout", choices=("trainer", "contiguous", "channels_last"), default="trainer",
                        help="the models' memory layout (trainer: channels-last where oneDNN is on, as simfl trains)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names of CONFIGS")
    args = parser.parse_args(argv)
    names = [c for c in args.configs.split(",") if c]
    if "native" not in names:
        names.insert(0, "native")
    runs: dict[str, list[dict]] = {c: [] for c in names}
    for _ in range(args.repeat):
        for c in names:
            runs[c].append(probe(c, args.layout, args.steps))
    print(f"layout={args.layout}")
    cols = ("step", "conv_fwd", "conv_bwd", "gemm", "pool", "relu", "loss", "optimizer", "other")
    for model in ("lenet5", "smallcnn"):
        print(f"model={model}")
        print("| config | capability | " + " | ".join(cols) + " | vs native |")
        print("|---" * (len(cols) + 3) + "|")
        for c in names:
            med = {k: statistics.median(r[model].get(k, 0.0) for r in runs[c]) for k in cols}
            ratio = statistics.median(r[model]["step"] / n[model]["step"] for r, n in zip(runs[c], runs["native"], strict=True))
            cells = " | ".join(f"{med[k]:.2f}" for k in cols)
            print(f"| {c} | {runs[c][0]['capability']} | {cells} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
