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


def test_the_portable_relu_backward_gives_atens_bits() -> None:
    """The portable mode's ``threshold_backward`` selects exactly what ATen's does: NaN, -0.0, infinities, subnormals,
    other thresholds, strided and channels-last tensors, other float types, mixed types, broadcasting."""
    import torch

    gen = torch.Generator().manual_seed(0)
    special = torch.tensor([float("nan"), -0.0, 0.0, float("inf"), -float("inf"), 1e-45, -1e-45, 0.5, 0.25])

    def case(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        t = torch.randn(shape, generator=gen).to(dtype)
        t.view(-1)[: len(special)] = special.to(dtype)
        return t

    grad, x = case((8, 6, 5, 5)), case((8, 6, 5, 5))
    cases = [(grad, x, 0.0), (grad, x, 0.5), (grad, x, -1), (grad.flip(0), x, 0.0),
             (grad.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last), 0.0),
             (grad.transpose(1, 3), x.transpose(1, 3), 0.0), (grad[:, ::2], x[:, ::2], 0.0),
             (case((40,), torch.float64), case((40,), torch.float64), 0.0),
             (case((40,), torch.bfloat16), case((40,), torch.bfloat16), 0.0),
             (case((40,), torch.float16), case((40,), torch.float16), 0.0),
             (case((40,), torch.float64), case((40,)), 0.0), (case((4, 40)), case((40,)), 0.0)]
    before = numerics._fast_kernels is not None
    try:
        numerics._register_fast_kernels(False)
        expected = [torch.ops.aten.threshold_backward(g, s, t) for g, s, t in cases]
        numerics._register_fast_kernels(True)
        got = [torch.ops.aten.threshold_backward(g, s, t) for g, s, t in cases]
    finally:
        numerics._register_fast_kernels(before)
    for (g, _, t), want, have in zip(cases, expected, got, strict=True):
        assert have.dtype == want.dtype and have.shape == want.shape and have.stride() == want.stride(), (g.dtype, t)
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[want.element_size()]
        assert torch.equal(have.view(width), want.view(width)), (g.dtype, g.shape, t)


def test_the_portable_kernels_follow_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """``apply`` registers them in the portable mode and withdraws them in the native one; ``applied`` restores."""
    before, switches = numerics._fast_kernels is not None, numerics._switches()
    try:
        monkeypatch.setenv(numerics.ENV, "portable")
        numerics.apply()
        assert numerics._fast_kernels is not None
        monkeypatch.setenv(numerics.ENV, "native")
        with numerics.applied():
            assert numerics._fast_kernels is None
        assert numerics._fast_kernels is not None
        numerics.apply()
        assert numerics._fast_kernels is None
    finally:
        numerics._register_fast_kernels(before)
        numerics._set_switches(*switches)


def test_the_unpinned_environment_is_the_users_own() -> None:
    """Another engine timed beside simfl gets the environment as the user gave it: a variable simfl set is gone,
    one the user had set is the user's again, while simfl's own process keeps its pins."""
    script = ("import os, simfl; from simfl import numerics; env = numerics.unpinned_environment(); "
              "print(os.environ['ATEN_CPU_CAPABILITY'], os.environ['MKL_CBWR'], "
              "env.get('ATEN_CPU_CAPABILITY', '-'), env.get('MKL_CBWR', '-'))")
    base = {k: v for k, v in os.environ.items() if k not in (*numerics.PORTABLE_ENV, numerics.ENV)}
    done = subprocess.run([sys.executable, "-c", script], env={**base, "MKL_CBWR": "AVX2"}, capture_output=True,
                          text=True, timeout=120, cwd=ROOT, check=True)
    assert done.stdout.split() == ["default", "COMPATIBLE", "-", "AVX2"]
