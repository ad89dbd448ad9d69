"""Standard normals derived from the streams' first outputs (simfl.latency.normals) are NumPy's ziggurat draws, bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simfl import rng
from simfl.latency import LATENCY_MODELS, LatencyModel, Workload, normals
from simfl.latency.pooled import TINY
from tests.latency.test_streams import same_samples_and_resume

_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_MULT_INV = pow(_PCG_MULT, -1, 1 << 128)


def generator_giving(word: int) -> np.random.Generator:
    """A PCG64 generator whose next raw output is ``word``: the state one step before the state ``word`` (high half
    0, so XSL-RR gives the low half unrotated), with increment 1."""
    bitgen = np.random.PCG64()
    bitgen.state = {"bit_generator": "PCG64", "state": {"state": (word - 1) * _MULT_INV % (1 << 128), "inc": 1},
                    "has_uint32": 0, "uinteger": 0}
    return np.random.Generator(bitgen)


def outputs_read(gen: np.random.Generator, word: int) -> bool:
    """Whether ``gen`` (from :func:`generator_giving`) read that one output and no more."""
    return gen.bit_generator.state["state"]["state"] == word


def test_tables_are_the_installed_numpys() -> None:
    """For every layer idx: rabs = ki[idx] - 1 is a one-output draw of +-rabs * wi[idx] (so is rabs = 1, giving wi[idx]
    itself), rabs = ki[idx] reads more: the threshold and the factor are exactly NumPy's."""
    assert normals.KI.shape == normals.WI.shape == (256,)
    checked = 0
    for idx in range(256):
        ki, wi = int(normals.KI[idx]), float(normals.WI[idx])
        for rabs, sign in ([(1, 0), (ki - 1, 1)] if ki > 1 else []):
            word = rabs << 9 | sign << 8 | idx
            gen = generator_giving(word)
            assert gen.standard_normal() == (-1.0 if sign else 1.0) * (rabs * wi)
            assert outputs_read(gen, word)
            z, fast = normals.standard_normals(np.array([word], dtype=np.uint64))
            assert fast[0] and z[0] == (-1.0 if sign else 1.0) * (rabs * wi)
            checked += 1
        if ki < 2**52:
            word = ki << 9 | idx
            gen = generator_giving(word)
            gen.standard_normal()
            assert not outputs_read(gen, word)
            assert not normals.standard_normals(np.array([word], dtype=np.uint64))[1][0]
    assert checked == 2 * 255  # every layer but idx 1 (ki = 0: always the slow path)


@pytest.mark.parametrize("n", [1, 4, 16])
def test_first_normals_are_numpys_draws_and_the_slow_lanes_are_numpys_too(n: int) -> None:
    count = 3000
    z, lanes = normals.first_normals(rng.Streams(21, "latency", count=count), n)
    assert z.shape == (count, n) and lanes.shape == (count,)
    for m in range(count):
        gen = rng.stream(21, "latency", m)
        expected = gen.standard_normal(n).tolist()
        after = rng.stream(21, "latency", m).bit_generator
        after.advance(n)
        if lanes[m]:  # n outputs read, the values NumPy's
            assert z[m].tolist() == expected
            assert gen.bit_generator.state == after.state
        else:  # NumPy read more than n outputs: a slow draw among them
            assert gen.bit_generator.state != after.state
    slow = count - int(lanes.sum())
    assert slow > {1: 20, 4: 100, 16: 400}[n]  # about 1.5% of draws take the slow path


@pytest.mark.parametrize(("mean", "sigma"), [(0.0, 1.0), (1.2, 0.35), (-3.7, 2.5), (0.0, 300.0), (705.0, 1.0)])
def test_lognormals_are_numpys_exactly(mean: float, sigma: float) -> None:
    """Including overflow to inf and underflow to subnormals and 0 (the last two pairs)."""
    count, n = 2000, 4
    z, lanes = normals.first_normals(rng.Streams(3, "latency", count=count), n)
    got = normals.lognormals(z, mean, sigma)
    assert lanes.sum() > 0.9 * count
    for m in np.flatnonzero(lanes).tolist():
        assert got[m].tolist() == rng.stream(3, "latency", m).lognormal(mean, sigma, n).tolist()
    if sigma == 300.0:
        assert np.isinf(got).any() and (got == 0).any()


SPECS = [{"model": "lognormal"},
         {"model": "lognormal", "mean": 5.0, "std": 2.0, "scaling": {"compute": "workload", "comm": 0.7}},
         {"model": "halfnormal"},
         {"model": "halfnormal", "fit": "folded", "scaling": {"compute": 1.9, "comm": 0.7}}]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_derived_first_blocks_of_normal_models_keep_values_and_checkpoints(spec: dict[str, Any]) -> None:
    """Clients whose first block was derived, clients left to their generator (a slow draw in it), a generator
    built after its first block was claimed, checkpoints (generator states and drawn-ahead values) and a
    resumed run: all as when every block is drawn from the generators."""
    clients = 17000
    work = Workload(model_bytes=100, flops=10, samples=tuple(range(1, clients + 1)), epochs=1)
    cls = LATENCY_MODELS[spec["model"]]

    def make() -> LatencyModel:  # type: ignore[type-arg]
        return cls(cls.Config(**spec), clients, 11, work)

    derived, drawn = make(), make()
    drawn.firsts, drawn.width = [], 0  # every block drawn from the generators
    w = derived.width
    assert w == derived.ahead_n == 4
    slow = [m for m in range(clients) if derived.taken[m] == w]
    assert 300 < len(slow) < 2000  # about 6% of clients have a slow draw among their first four
    plan = {0: 1, 1: 2, 2: w, 3: w + 3, clients - 1: 2 * w + 1, **{m: k for m, k in zip(slow[:8], range(1, 9), strict=True)}}
    same_samples_and_resume(derived, drawn, make, plan)
    for m in sorted(set(range(400)) - set(plan)):  # untouched clients, first block derived or not, against NumPy's
        gen = rng.stream(11, "latency", m)
        x = gen.lognormal(derived.mu, derived.sigma, w) if spec["model"] == "lognormal" else np.abs(
            gen.normal(derived.loc, derived.scale_, w))  # own lognormal / normal
        assert [derived.sample(m) for _ in range(w)] == [max(derived.scale[m] * v, TINY) for v in x.tolist()]


@pytest.mark.parametrize("model", ["lognormal", "halfnormal", "uniform", "pareto"])
def test_per_client_speeds_and_first_blocks_are_the_drawn_ones(model: str) -> None:
    """per_client mode: speeds derived from the speed streams' first values (Pareto's drawn), each client's first
    jittered rounds from its first normals; the same values and checkpoints as drawing them all."""
    clients = 17000
    work = Workload(model_bytes=100, flops=10, samples=(600,) * clients, epochs=1)
    cls = LATENCY_MODELS[model]

    def make() -> LatencyModel:  # type: ignore[type-arg]
        return cls(cls.Config(model=model, mode="per_client", jitter=0.3, scaling={"compute": 1.3}), clients, 5, work)

    derived, drawn = make(), make()
    speed_streams = [rng.stream(5, "latency-speed", m) for m in range(2000)]
    assert derived.speeds[:2000] == [derived.base_draw(g) for g in speed_streams]  # type: ignore[attr-defined]
    drawn.firsts, drawn.width = [], 0
    w = derived.width
    assert w == 4
    slow = [m for m in range(clients) if derived.taken[m] == w]
    assert 300 < len(slow) < 2000
    plan = {0: 1, 1: w, 2: w + 3, **{m: k for m, k in zip(slow[:6], range(1, 7), strict=True)}}
    for m, k in plan.items():
        assert [derived.sample(m) for _ in range(k)] == [drawn.sample(m) for _ in range(k)]
    for m in range(1000, 1400):
        assert [derived.sample(m) for _ in range(w + 1)] == [drawn.sample(m) for _ in range(w + 1)]
    assert derived.state() == drawn.state()
