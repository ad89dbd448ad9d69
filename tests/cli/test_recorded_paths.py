"""The scenario.yaml a run writes names files relative to itself where one folder below the top level holds both,
so a result folder moves with its checkout; resuming and reporting read it back as the same scenario."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from simfl.cli import main
from simfl.schema import scenario as scenario_mod
from tests.conftest import tiny_scenario

FLEET = "client,seconds_per_sample,bandwidth,windows\na,0.01,1e6,\nb,0.02,1e6,3-6\nc,0.015,2e6,\n"


def runs(out: Path) -> dict[str, bytes]:
    """A result folder's scenario.yaml and every run's files."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and (p.name == "scenario.yaml" or "seed" in p.parent.name)}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A checkout-like folder: a fleet file beside the scenario's folder, as scenarios/fleet and scenarios/studies."""
    root = tmp_path / "project"
    (root / "scenarios" / "fleet").mkdir(parents=True)
    (root / "scenarios" / "studies").mkdir()
    (root / "scenarios" / "fleet" / "fleet.csv").write_text(FLEET)
    raw = tiny_scenario(seeds=[0, 1], latency={"model": "fleet_csv", "path": "../fleet/fleet.csv"}, executor={"kind": "none"})
    (root / "scenarios" / "studies" / "s.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return root


def test_a_fleet_file_beside_the_scenario_is_written_relative_and_read_back(project: Path) -> None:
    whole = project / "results" / "whole"
    assert main(["run", str(project / "scenarios" / "studies" / "s.yaml"), "--out", str(whole), "--quiet"]) == 0
    written = yaml.safe_load((whole / "scenario.yaml").read_text())
    assert written["latency"]["path"] == "../../scenarios/fleet/fleet.csv" and written["data"].get("root") is None
    fleet = str((project / "scenarios" / "fleet" / "fleet.csv").resolve())
    assert scenario_mod.load(whole / "scenario.yaml").latency.path == fleet

    # resumed from its staging folder (a sibling of the published one) it gives the same files
    from simfl.launch.checkpoint import Session

    stage = project / "results" / "o.partial"
    shutil.copytree(whole, stage)
    for name in ("summary.csv", "accuracy.png"):
        (stage / name).unlink()
    shutil.rmtree(stage / "fedasync" / "seed1")
    Session(stage, None, False).finish("fedasync", 0, {"algorithm": "fedasync", "seed": 0})
    assert main(["run", "--resume", str(project / "results" / "o"), "--quiet"]) == 0
    assert runs(project / "results" / "o") == runs(whole)

    # a run written one folder deeper names the same file by another relative path; the report pools them
    deeper = project / "results" / "more" / "seed2"
    assert main(["run", str(project / "scenarios" / "studies" / "s.yaml"), "--out", str(deeper), "--seeds", "2",
                 "--quiet"]) == 0
    assert yaml.safe_load((deeper / "scenario.yaml").read_text())["latency"]["path"] == "../../../scenarios/fleet/fleet.csv"
    assert main(["report", str(whole), str(deeper), "--out", str(project / "report")]) == 0


def test_paths_are_relative_only_inside_one_folder_below_the_top_level() -> None:
    assert scenario_mod.relative_path("/work/repo/scenarios/f.csv", Path("/work/repo/results/x")) == "../../scenarios/f.csv"
    assert scenario_mod.relative_path("/work/shared/datasets", Path("/work/repo/results/x")) == "/work/shared/datasets"
    assert scenario_mod.relative_path("/opt/data", Path("/tmp/run/out")) == "/opt/data"
    assert scenario_mod.relative_path("data/mnist", Path("/tmp/run/out")) == "data/mnist"  # already relative


def test_data_root_from_the_data_folder_is_not_written(tmp_path: Path, write_scenario) -> None:  # type: ignore[no-untyped-def]
    """Without data.root, the data folder ($SIMFL_DATA) is the machine's: scenario.yaml keeps root null."""
    from tests.data.helpers import write_mnist

    write_mnist(tmp_path / "data" / "mnist", n_train=60, n_test=20)
    raw = tiny_scenario(data={"dataset": "mnist", "partition": {"kind": "iid", "clients": 3}},
                        model={"name": "mlp", "hidden": [8]})
    scn = scenario_mod.validate(raw)
    assert "root: null" in scenario_mod.dump(scn, tmp_path)
    raw["data"]["root"] = "data"  # given by the scenario: written relative to the result folder
    out = tmp_path / "out"
    assert main(["run", str(write_scenario(raw)), "--out", str(out), "--quiet"]) == 0
    assert yaml.safe_load((out / "scenario.yaml").read_text())["data"]["root"] == "../data"


def test_a_traces_folder_is_read_relative_to_the_scenario_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # latency.traces names a folder as latency.path names a file: relative to the scenario file, whatever the
    # working folder, and written relative to the result folder's scenario.yaml
    from simfl.latency.profiles import DATA_DIR

    root = tmp_path / "project"
    (root / "scenarios" / "studies").mkdir(parents=True)
    shutil.copytree(DATA_DIR, root / "scenarios" / "traces")
    raw = tiny_scenario(latency={"model": "rpi_gaussian", "traces": "../traces"}, executor={"kind": "none"})
    path = root / "scenarios" / "studies" / "s.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert scenario_mod.load(path).latency.traces == str((root / "scenarios" / "traces").resolve())
    out = root / "results" / "r"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert yaml.safe_load((out / "scenario.yaml").read_text())["latency"]["traces"] == "../../scenarios/traces"
