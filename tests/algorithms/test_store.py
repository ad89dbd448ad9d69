"""Per-client vectors in RAM and on disk: exact float32, copies out, no file left, the same results either way."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from simfl.algorithms.store import DiskVectors, RamVectors, StoreSpec, vectors
from simfl.cli import main
from simfl.schema import costs, estimate
from simfl.schema import scenario as scenario_mod
from tests.conftest import tiny_scenario


@pytest.mark.parametrize("kind", ["ram", "disk"])
def test_rows_are_exact_and_only_set_rows_are_visited(kind: str, tmp_path: Path) -> None:
    store = vectors(StoreSpec(kind, str(tmp_path)), 5, 3)  # type: ignore[arg-type]
    assert store.get(0) is None and store.rows() == []
    odd = torch.tensor([1e-45, -0.0, 3.4028235e38])  # a subnormal, negative zero, the largest float32
    store.put(3, odd)
    store.put(1, torch.tensor([1.0, 2.0, 3.0]))
    got = store.get(3)
    assert got is not None and got.dtype == torch.float32
    assert got.numpy().tobytes() == odd.numpy().tobytes()
    assert store.rows() == [1, 3] and [i for i, _ in store.items()] == [1, 3]
    with pytest.raises(ValueError, match="3 float32 values"):
        store.put(0, torch.zeros(4))
    with pytest.raises(ValueError, match="3 float32 values"):
        store.put(0, torch.zeros(3, dtype=torch.float64))
    back = vectors(StoreSpec(kind, str(tmp_path)), 5, 3)  # type: ignore[arg-type]
    back.load_state(store.state())
    assert back.rows() == [1, 3]
    assert all(torch.equal(back.get(i), store.get(i)) for i in (1, 3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="3 values, this store 4"):
        vectors(StoreSpec(kind), 5, 4).load_state(store.state())  # type: ignore[arg-type]


def test_ram_keeps_references_disk_hands_out_copies(tmp_path: Path) -> None:
    shared = torch.ones(2)
    ram = RamVectors(3, 2)
    ram.put(0, shared)
    ram.put(2, shared)
    assert ram.get(0) is shared and ram.get(2) is shared  # OrthoFL's anchors on one global version stay one tensor
    disk = DiskVectors(3, 2, str(tmp_path))
    disk.put(0, shared)
    row = disk.get(0)
    assert row is not None
    disk.put(0, torch.zeros(2))
    assert torch.equal(row, torch.ones(2))  # a row handed out does not change with a later write
    row.add_(5)
    assert torch.equal(disk.get(0), torch.zeros(2))  # type: ignore[arg-type]


def test_the_disk_file_has_no_name_is_sparse_and_is_freed(tmp_path: Path) -> None:
    store = DiskVectors(100_000, 1_000, str(tmp_path))  # 400 MB addressable
    store.put(99_999, torch.ones(1_000))
    assert list(tmp_path.iterdir()) == []  # anonymous: nothing to leave behind, even if the process is killed
    fd = store._file.fileno()
    stat = os.fstat(fd)
    assert stat.st_size == 100_000 * 1_000 * 4 and stat.st_blocks * 512 < 1 << 20  # only the set row takes disk
    store.close()
    with pytest.raises(OSError):
        os.fstat(fd)


def _mnist_like(store: str | None, **changes: Any) -> dict[str, Any]:
    raw = tiny_scenario(
        data={"dataset": "synthetic", "train_size": 240, "test_size": 60, "features": 8, "classes": 3,
              "partition": {"kind": "dirichlet", "clients": 12, "alpha": 0.3}},
        latency={"model": "exponential", "mean": 1.5},
        server={"concurrency": 4},
        budget={"time": 20.0},
        algorithms=[{"name": "orthofl", "shift_source": "global", "label": "orthofl_global"},
                    {"name": "orthofl", "label": "orthofl_chain"}, {"name": "ca2fl", "buffer": 3},
                    {"name": "orthofl_pairwise"}, {"name": "scaffold", "clients_per_round": 3},
                    {"name": "fedbuff", "buffer": 3}],
    )
    if store is not None:
        raw["client_state"] = {"store": store}
    raw.update(changes)
    return raw


def test_disk_and_ram_stores_give_byte_identical_files(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every algorithm with per-client vectors, trained for real, cross-device: the same metrics and events."""
    files = {}
    for store in ("ram", "disk"):
        out = tmp_path / store
        assert main(["run", str(write_scenario(_mnist_like(store), f"{store}.yaml")), "--out", str(out), "--quiet"]) == 0
        files[store] = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.csv"))
                        if p.name != "summary.csv"}
    assert len(files["ram"]) == 13 and "comparison.csv" in files["ram"] and files["ram"] == files["disk"]


def test_auto_chooses_disk_when_the_rows_would_take_a_quarter_of_ram(monkeypatch: pytest.MonkeyPatch) -> None:
    scn = scenario_mod.validate(_mnist_like(None))
    assert costs.store_rows(scn) == 3  # OrthoFL-Pairwise: anchors, latest updates and its kept models
    monkeypatch.setattr(costs, "machine_memory", lambda: 4000)
    assert costs.store_spec(scn, 999).kind == "ram"
    assert costs.store_spec(scn, 1001).kind == "disk"
    ram = scenario_mod.validate(_mnist_like("ram"))
    assert costs.store_spec(ram, 10**15).kind == "ram"
    est = estimate.estimate(scenario_mod.validate(_mnist_like("disk")))
    assert est.disk_bytes == 12 * est.model_bytes * 3 and est.client_state_bytes == 4 * est.model_bytes
    assert any("on disk" in line for line in est.lines())


def test_a_missing_store_folder_is_one_line(write_scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # type: ignore[no-untyped-def]
                                            ) -> None:
    raw = _mnist_like(None, client_state={"store": "disk", "dir": str(tmp_path / "nowhere")})
    assert main(["run", str(write_scenario(raw)), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "client_state.dir" in err and "not a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scenario.yaml"]  # nothing half-written
