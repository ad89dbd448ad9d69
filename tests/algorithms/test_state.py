"""Checkpoint round trip: state() -> torch.save -> torch.load -> load_state() continues identically."""

from __future__ import annotations

import io
from typing import Any

import pytest
import torch

from simfl.algorithms import ALGORITHMS
from simfl.algorithms.base import Algorithm, AsyncAlgorithm, SyncAlgorithm
from tests.algorithms.algo_helpers import arrival, bn_layout, make_setup

CLIENTS = 4
CASES: list[tuple[str, dict[str, Any]]] = [
    ("orthofl", {}),
    ("orthofl", {"shift_source": "global"}),
    ("orthofl", {"shift_source": "chain"}),
    ("orthofl", {"bn": "project", "granularity": "model"}),
    ("orthofl_no_calib", {}),
    ("orthofl_no_ma", {}),
    ("orthofl_pairwise", {}),
    ("fedasync", {"staleness": {"kind": "hinge", "a": 1.0, "b": 2.0}}),
    ("fedbuff", {"buffer": 3}),
    ("ca2fl", {"buffer": 3}),
    ("fedavg", {"clients_per_round": 2}),
    ("fedprox", {"clients_per_round": 2, "mu": 0.1}),
    ("fedadam", {"clients_per_round": 2}),
    ("scaffold", {"clients_per_round": 2}),
    ("fednova", {"clients_per_round": 2}),
    ("feddyn", {"clients_per_round": 2}),
    ("feddyn", {"clients_per_round": 2, "alpha_scaling": "samples", "evaluated": "active_mean"}),
    ("mifa", {}),
    ("mifa", {"clients_per_round": 2, "start": "zero", "weighting": "samples"}),
    ("moon", {"clients_per_round": 2}),
    ("fedac", {"buffer": 3}),
    ("fedac", {"buffer": 2, "direction": "last_step", "bn_stats": "mean"}),
    ("fadas", {"buffer": 3, "delay_threshold": 0, "bn_stats": "mean"}),
    ("asyncfeded", {"lam": 0.5, "eps": 0.5}),
    ("delay_adaptive", {"workers": 2}),
    ("delay_adaptive", {"form": "koloskova", "delay_threshold": 1, "delay_scale": 0.5}),
    ("fedstaleweight", {"buffer": 3, "offset": 1, "bn_stats": "mean"}),
    ("fedstaleweight", {"buffer": 2, "window": 2}),
    ("pisces", {}),
    ("pisces", {"aggregation": "mean", "min_buffer": 2, "window": 2, "bn_stats": "mean"}),
    ("port", {}), ("port", {"buffer": 2, "omega": 1, "aggregation": "models", "bn_stats": "mean"}),
]


def _build(name: str, kwargs: dict[str, Any]) -> Algorithm:  # type: ignore[type-arg]
    cls = ALGORITHMS[name]
    layout = bn_layout()
    init = torch.randn(layout.size, generator=torch.Generator().manual_seed(0)).tolist()
    return cls(cls.Config(name=name, **kwargs), make_setup(layout, init, CLIENTS, sizes=(1, 2, 3, 4)))


class AsyncDriver:
    """The engine's bookkeeping for async algorithms: start weights, tau, t; training = random deltas."""

    def __init__(self, alg: AsyncAlgorithm, seed: int) -> None:  # type: ignore[type-arg]
        self.start = {c: alg.initial_weights(c) for c in range(CLIENTS)}
        self.tau = [0] * CLIENTS
        self.t = 0
        self.gen = torch.Generator().manual_seed(seed)

    def step(self, alg: AsyncAlgorithm) -> tuple[torch.Tensor, float | None, torch.Tensor]:  # type: ignore[type-arg]
        c = int(torch.randint(CLIENTS, (1,), generator=self.gen))
        self.t += 1
        trained = self.start[c] + 0.1 * torch.randn(self.start[c].shape, generator=self.gen)
        sent, weight = alg.on_arrival(arrival(c, trained, self.start[c], self.t - self.tau[c], self.t, n=c + 1))
        self.start[c], self.tau[c] = sent, self.t
        return sent, weight, alg.global_weights()


def _sync_round(alg: SyncAlgorithm, gen: torch.Generator, r: int) -> torch.Tensor:  # type: ignore[type-arg]
    picked = torch.randperm(CLIENTS, generator=gen)[: alg.clients_per_round].tolist()
    w = alg.round_weights()
    arrivals = []
    for c in picked:
        a = arrival(c, w + 0.1 * torch.randn(w.shape, generator=gen), w, 1, r, n=c + 1)
        a.arrays = {"c_i": torch.randn(w.shape, generator=gen)}  # what SCAFFOLD's clients send back; others ignore it
        a.metrics = {"steps": float(c + 1), "loss": 0.0}  # unequal local steps (FedNova reads them)
        arrivals.append(a)
    alg.aggregate(arrivals)
    return alg.global_weights()


def _checkpoint(alg: Algorithm) -> dict[str, Any]:  # type: ignore[type-arg]
    buf = io.BytesIO()
    torch.save(alg.state(), buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_restore_continues_identically(name: str, kwargs: dict[str, Any]) -> None:
    original = _build(name, kwargs)
    if isinstance(original, AsyncAlgorithm):
        driver = AsyncDriver(original, seed=1)
        for _ in range(9):
            driver.step(original)
        restored = _build(name, kwargs)
        restored.load_state(_checkpoint(original))
        twin = AsyncDriver(restored, seed=1)  # same engine state as `driver`, restored alongside
        twin.start, twin.tau, twin.t = dict(driver.start), list(driver.tau), driver.t
        twin.gen.set_state(driver.gen.get_state())
        for _ in range(12):
            a, b = driver.step(original), twin.step(restored)  # type: ignore[arg-type]
            assert torch.equal(a[0], b[0]) and a[1] == b[1] and torch.equal(a[2], b[2])
    else:
        assert isinstance(original, SyncAlgorithm)
        gen = torch.Generator().manual_seed(1)
        for r in range(1, 4):
            _sync_round(original, gen, r)
        restored = _build(name, kwargs)
        restored.load_state(_checkpoint(original))
        gen_twin = torch.Generator().manual_seed(0)
        gen_twin.set_state(gen.get_state())
        for r in range(4, 8):
            assert torch.equal(_sync_round(original, gen, r), _sync_round(restored, gen_twin, r))  # type: ignore[arg-type]


def test_orthofl_checkpoint_keeps_shared_anchors_shared() -> None:
    alg = _build("orthofl", {"shift_source": "global"})  # the anchors are the 'global' reading's state
    assert isinstance(alg, AsyncAlgorithm)
    w0 = alg.initial_weights(0)
    alg.on_arrival(arrival(0, w0 + 1, w0, 1, 1))
    state = _checkpoint(alg)
    # clients 1..3 have not arrived: no row, W^(0) is their anchor; client 0's anchor is the current global itself
    assert sorted(state["anchors"]["rows"]) == [0]
    assert state["anchors"]["rows"][0] is state["w"]
