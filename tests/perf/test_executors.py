"""Executors: inline and process give the same bytes; configuration and fallbacks fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from simfl.cli import main
from simfl.errors import InputError
from simfl.launch.experiment import federation, load_dataset, make_executor
from simfl.schema import scenario as scenario_mod
from simfl.train.executor import ExecutorConfig, cores
from simfl.train.local import Job
from simfl.train.message import Message
from tests.conftest import tiny_scenario

ALGORITHMS = [{"name": "orthofl"}, {"name": "fedavg", "clients_per_round": 2}, {"name": "scaffold", "clients_per_round": 2}]


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.csv")) if p.name != "summary.csv"}


def test_inline_and_process_write_identical_metrics_and_events(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Same seed, same workers/threads: metrics.csv and events.csv are byte for byte the same."""
    path = write_scenario(tiny_scenario(algorithms=ALGORITHMS, budget={"time": 12.0}))
    outs = {}
    for kind in ("inline", "process"):
        out = tmp_path / kind
        args = ["run", str(path), "--out", str(out), "--quiet", "--set", f"executor.kind={kind}",
                "--set", "executor.workers=2"]
        assert main(args) == 0
        outs[kind] = _files(out)
    runs = {f"{a['name']}/seed0/{f}" for a in ALGORITHMS for f in ("metrics.csv", "events.csv")}
    assert set(outs["inline"]) == runs | {"comparison.csv"}
    assert outs["inline"] == outs["process"]


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_process_pool_trains_out_of_order_and_discards(start_method: str) -> None:
    """Jobs collected in any order equal inline results; discarded and pending jobs do not block."""
    scn = scenario_mod.validate(
        tiny_scenario(executor={"kind": "process", "workers": 2, "threads": 1, "start_method": start_method})
    )
    fed = federation(scn, load_dataset(scn), 0)
    ref_scn = scenario_mod.validate(tiny_scenario(executor={"kind": "inline", "threads": 1}))
    ref = make_executor(ref_scn, fed)
    pool = make_executor(scn, fed)
    try:
        size = fed.init.numel()
        variates = Message({"control_variate": None}, {"c": torch.full((size,), 0.01), "c_i": torch.zeros(size)})
        jobs = [Job(m % 3, m // 3, fed.init + 0.01 * m, variates if m % 2 else Message()) for m in range(7)]
        handles = [pool.submit(j) for j in jobs]
        pool.discard(handles[1])
        for i in (6, 0, 3, 2, 5, 4):
            want = ref.collect(ref.submit(jobs[i]))
            got = pool.collect(handles[i])
            assert torch.equal(got.weights, want.weights) and got.metrics == want.metrics
            assert got.arrays.keys() == want.arrays.keys() == ({"c_i"} if i % 2 else set())
            assert all(torch.equal(got.arrays[k], want.arrays[k]) for k in want.arrays)
    finally:
        pool.close()


def test_thread_rule_is_the_same_for_every_cpu_executor() -> None:
    n = cores()
    assert ExecutorConfig(kind="inline").train_threads() == max(1, n // n)
    assert ExecutorConfig(kind="process", workers=1).train_threads() == n
    assert ExecutorConfig(kind="inline", threads=3).train_threads() == 3


def test_executor_kind_set_from_the_command_line() -> None:
    raw = tiny_scenario()
    scenario_mod.apply_override(raw, "executor.kind=process")
    assert scenario_mod.validate(raw).executor.kind == "process"
    raw["executor"]["kind"] = "gpu"
    with pytest.raises(InputError, match=r"executor\.kind: unknown kind 'gpu'; allowed: inline, process"):
        scenario_mod.validate(raw)


def test_address_only_for_ray() -> None:
    with pytest.raises(InputError, match="address only applies to kind ray"):
        scenario_mod.validate(tiny_scenario(executor={"kind": "process", "address": "auto"}))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback on a machine without CUDA")
def test_cuda_executor_without_cuda_is_one_clear_input_error() -> None:
    scn = scenario_mod.validate(tiny_scenario(executor={"kind": "cuda"}))
    fed = federation(scn, load_dataset(scn), 0)
    with pytest.raises(InputError, match=r"^executor\.kind: cuda needs a CUDA GPU") as err:
        make_executor(scn, fed)
    assert "\n" not in str(err.value)


def test_adaptive_trains_inline_until_switch_after_then_in_its_pool() -> None:
    """Below ``switch_after`` no pool starts; past it, the jobs submitted once the pool is ready train there, and so
    do those submitted inline before and not yet trained; every result, on either side of the switch, equals
    inline's."""
    from simfl.train.adaptive import AdaptiveExecutor

    ref_scn = scenario_mod.validate(tiny_scenario(executor={"kind": "inline", "threads": 1}))
    fed = federation(ref_scn, load_dataset(ref_scn), 0)
    ref = make_executor(ref_scn, fed)
    jobs = [Job(m % 3, m // 3, fed.init + 0.01 * m) for m in range(6)]
    lazy = make_executor(scenario_mod.validate(tiny_scenario(executor={"kind": "adaptive", "workers": 2, "threads": 1,
                                                                        "switch_after": 1000.0})), fed)
    eager = make_executor(scenario_mod.validate(tiny_scenario(executor={"kind": "adaptive", "workers": 2, "threads": 1,
                                                                         "switch_after": 1e-9})), fed)
    assert isinstance(lazy, AdaptiveExecutor) and isinstance(eager, AdaptiveExecutor)
    try:
        for executor in (lazy, eager):
            first = executor.collect(executor.submit(jobs[0]))  # inline: the pool, if any, starts after it
            assert torch.equal(first.weights, ref.collect(ref.submit(jobs[0])).weights)
        assert lazy.pool is None and eager.pool is not None
        lazy_trained = lazy.trained
        while not eager.pooled:
            eager.pool.ready(block=True)
        handles = [eager.submit(job) for job in jobs[1:]]
        assert all(eager.handles[h][0] is eager.pool for h in handles)
        waiting = lazy.submit(jobs[1])  # inline, not trained yet: moved once a pool is ready
        lazy.pool = eager.pool
        assert torch.equal(lazy.collect(waiting).weights, ref.collect(ref.submit(jobs[1])).weights)
        assert lazy.trained == lazy_trained and not lazy.inline.pending
        lazy.pool = None
        eager.discard(handles[0])
        for job, handle in list(zip(jobs[1:], handles, strict=True))[::-1][:-1]:
            assert torch.equal(eager.collect(handle).weights, ref.collect(ref.submit(job)).weights)
        assert not lazy.pooled and lazy.trained > 0
    finally:
        lazy.close()
        eager.close()


def test_adaptive_writes_the_same_files_as_inline(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A run that starts its pool after its first job (the jobs submitted once the pool is ready train there; a
    pool still starting at the run's end is stopped) writes inline's files byte for byte."""
    path = write_scenario(tiny_scenario(algorithms=ALGORITHMS[:2], budget={"time": 12.0}))
    outs = {}
    for kind, extra in (("inline", []), ("adaptive", ["--set", "executor.switch_after=1e-9"])):
        out = tmp_path / kind
        assert main(["run", str(path), "--out", str(out), "--quiet", "--set", f"executor.kind={kind}",
                     "--set", "executor.workers=2", *extra]) == 0
        outs[kind] = _files(out)
    assert outs["inline"] == outs["adaptive"] and outs["inline"]
