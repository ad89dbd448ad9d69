"""Client state that does not fit in memory: OrthoFL with MobileNetV2 over 2,000 MNIST clients, concurrency 50.

The scenario (``benchmarks/cross_device_mobilenet.yaml``) keeps two model-sized vectors per client
under OrthoFL's paper reading (each client's anchor ``W^(tau+)`` and, under ``server:``, its kept
model): 2,000 x 2 x 8.8 MiB, about 35 GiB. Before the client-state store ``simfl validate``
refused it; now ``store: auto`` puts them in a memory-mapped file. The run is ``simfl run`` in a
child process (inline training, one worker) for 200 updates; every 0.2 s the child's
``/proc/<pid>/status`` is read, and the peaks printed are its private memory (``RssAnon``:
tensors, the dataset, Python), the file pages it maps (``RssFile``, the page cache, which the
kernel reclaims) and ``VmHWM``. ``--store ram`` runs the same with the vectors in RAM (only the
rows of clients seen are ever allocated, so 200 updates would fit either way; the point is the
private peak with state on disk).

    python -m benchmarks.client_state [--store disk|ram] [--updates 200]

Prints ``name=value`` lines.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = Path(__file__).with_name("cross_device_mobilenet.yaml")
FIELDS = ("RssAnon", "RssFile", "VmHWM")


def _status(pid: int) -> dict[str, int]:
    """The ``FIELDS`` of ``/proc/<pid>/status`` in bytes ({} once the process is gone)."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in FIELDS:
            out[key] = int(value.split()[0]) * 1024
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("disk", "ram", "auto"), default="auto")
    parser.add_argument("--updates", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "simfl", "run", str(SCENARIO), "--out", str(out), "--quiet", "--workers", "1",
               "--set", f"client_state.store={args.store}", "--set", f"budget.updates={args.updates}"]
        start = time.perf_counter()
        child = subprocess.Popen(cmd)
        peak = dict.fromkeys(FIELDS, 0)
        while child.poll() is None:
            for key, value in _status(child.pid).items():
                peak[key] = max(peak[key], value)
            time.sleep(0.2)
        wall = time.perf_counter() - start
        if child.returncode != 0:
            raise SystemExit(f"simfl run exited with {child.returncode}")
        summary = (out / "summary.csv").read_text().splitlines()
    print(f"store={args.store}")
    print(f"updates={summary[1].split(',')[4]}")
    print(f"wall_seconds={wall:.1f}")
    for key in FIELDS:
        print(f"peak_{key}_GiB={peak[key] / 2**30:.2f}")


if __name__ == "__main__":
    main()
