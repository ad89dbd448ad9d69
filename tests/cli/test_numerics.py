"""The same numbers whatever vector width the CPU offers: the quickstart under three ATen capabilities.

``ATEN_CPU_CAPABILITY`` is how a machine's vector width reaches torch's kernels; setting it here
stands for running on CPUs of three generations. simfl's ``portable`` mode (the default) pins the
kernels, so every file is the same; the ``native`` mode shows the test can fail: on a CPU with AVX2
its numbers differ between ``default`` and ``avx2``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simfl import numerics

ROOT = Path(__file__).resolve().parents[2]


def _cpu_has(flag: str) -> bool:
    try:
        return f" {flag} " in Path("/proc/cpuinfo").read_text().replace("\n", " ")
    except OSError:
        return False


CAPABILITIES = ("default", "avx2") + (("avx512",) if _cpu_has("avx512f") else ())
"""The widths to run under: AVX-512 only where the CPU has it (elsewhere torch falls back to AVX2, a repeat)."""


def quickstart(out: Path, capability: str, mode: str) -> dict[str, bytes]:
    """Run the quickstart (seed 0, 60 virtual s) in a fresh process; its files by relative name."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, numerics.ENV: mode, "SIMFL_WORKERS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "simfl", "run", str(ROOT / "scenarios" / "quickstart.yaml"), "--seeds", "0",
         "--set", "budget.time=60", "--out", str(out), "--quiet"],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    files.pop("summary.csv")  # its wall_seconds time the machine
    files.pop("accuracy.png")
    return files


def test_portable_numerics_give_the_same_files_under_every_capability(tmp_path: Path) -> None:
    runs = {cap: quickstart(tmp_path / cap, cap, "portable") for cap in CAPABILITIES}
    first = runs["default"]
    assert any(name.endswith("metrics.csv") for name in first)
    for cap in CAPABILITIES[1:]:
        assert runs[cap].keys() == first.keys()
        for name, data in first.items():
            assert runs[cap][name] == data, f"{name} differs under ATEN_CPU_CAPABILITY={cap}"
    record = json.loads(next(v for k, v in first.items() if k.endswith(numerics.FILE)))
    assert record["mode"] == "portable" and record["cpu_capability"] == "DEFAULT" and record["mkl_cbwr"] == "COMPATIBLE"
    assert record["onednn"] is False and record["nnpack"] is False and record["threads"] >= 1


@pytest.mark.skipif(not _cpu_has("avx2"), reason="the native kernels differ only where the CPU has AVX2")
def test_native_numerics_follow_the_cpu(tmp_path: Path) -> None:
    plain, wide = (quickstart(tmp_path / cap, cap, "native") for cap in ("default", "avx2"))
    metrics = [name for name in plain if name.endswith("metrics.csv")]
    assert any(plain[name] != wide[name] for name in metrics)
    assert json.loads(next(v for k, v in wide.items() if k.endswith(numerics.FILE)))["cpu_capability"] == "AVX2"


def test_an_unknown_mode_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, numerics.ENV: "fastest"}
    done = subprocess.run([sys.executable, "-m", "simfl", "run", str(ROOT / "scenarios" / "quickstart.yaml"),
                           "--out", str(tmp_path / "x"), "--quiet"], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "SIMFL_NUMERICS" in done.stderr and "portable" in done.stderr
    assert not (tmp_path / "x").exists()


def test_cpu_convolutions_train_channels_last_only_where_onednn_computes_them() -> None:
    """ATen's own convolutions (oneDNN off: the portable mode) run slower channels-last, oneDNN's faster."""
    import torch

    from simfl.models.lenet import LeNet5, LeNet5Config
    from simfl.train.local import channels_last_helps

    model = LeNet5.build(LeNet5Config(), (1, 28, 28), 10)
    mlp = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
    before = torch.backends.mkldnn.enabled
    try:
        torch.backends.mkldnn.enabled = False  # type: ignore[assignment]  # a module property
        assert not channels_last_helps(model)
        torch.backends.mkldnn.enabled = True  # type: ignore[assignment]
        assert channels_last_helps(model) == torch.backends.mkldnn.is_available()
        assert not channels_last_helps(mlp)
    finally:
        torch.backends.mkldnn.enabled = before  # type: ignore[assignment]
