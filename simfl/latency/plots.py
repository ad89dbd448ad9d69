"""The paper's delay-pattern figure: simulated latency histograms next to the measured ones.

``show`` draws ``rounds`` latencies for each of ``clients`` clients under
``rpi_gaussian`` (paper9 profiles), ``lognormal``, ``halfnormal`` and
``uniform`` (per-round mode, unscaled), and plots their histograms beside the
histogram of the measured RPi round latencies, on a shared axis.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from simfl.latency import LATENCY_MODELS, Workload
from simfl.latency.profiles import load_uploads

PANELS = ("rpi_gaussian", "lognormal", "halfnormal", "uniform")


def simulate(model: str, clients: int, rounds: int, seed: int) -> np.ndarray:
    """All latencies of ``clients`` clients over ``rounds`` rounds under ``model`` (defaults, unscaled)."""
    cls = LATENCY_MODELS[model]
    workload = Workload(model_bytes=1, flops=1, samples=(1,) * clients, epochs=1)
    lat = cls(cls.Config.model_validate({"model": model}), clients, seed, workload)
    return np.array([[lat.sample(m) for _ in range(rounds)] for m in range(clients)]).ravel()


SOFTWARE = b"simfl delay patterns"
"""The PNG ``Software`` text of the figure: how ``--force`` recognises a file simfl wrote."""


def show(out_png: Path, clients: int = 100, rounds: int = 10000, seed: int = 0, force: bool = False) -> None:
    """Write the delay-pattern figure (measured + four simulated histograms) to ``out_png``.

    An existing file is replaced only with ``force``, and only a figure simfl wrote.
    """
    from simfl import outdir
    from simfl.errors import InputError

    out_png = Path(out_png)
    if out_png.suffix.lower() != ".png":
        raise InputError("--out", f"unsupported figure format {out_png.suffix or '(none)'!r}; allowed: .png")
    outdir.claim_files({out_png: lambda head: head.startswith(b"\x89PNG") and SOFTWARE in head}, force)
    measured = np.array([r for seq in load_uploads().values() for _, r in seq])
    series = {"measured (RPi)": measured} | {m: simulate(m, clients, rounds, seed) for m in PANELS}
    top = float(max(np.percentile(v, 99.5) for v in series.values()))
    bins = np.linspace(0.0, top, 80)
    fig = Figure(figsize=(4 * len(series), 3.4))
    axes = fig.subplots(1, len(series), sharex=True)
    for ax, (name, values) in zip(axes, series.items(), strict=True):
        ax.hist(np.clip(values, 0, top), bins=bins, density=True, color="tab:gray" if name.startswith("measured") else "tab:blue")
        ax.set_title(f"{name}\nmean {values.mean():.0f} s, std {values.std():.0f} s", fontsize=9)
        ax.set_xlabel("round latency (s)")
    axes[0].set_ylabel("density")
    fig.suptitle(f"Delay patterns: {clients} clients x {rounds} rounds, seed {seed} (last bin: >= {top:.0f} s)", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=110, format="png", metadata={"Software": SOFTWARE.decode()})
    outdir.write_file(out_png, buffer.getvalue())
