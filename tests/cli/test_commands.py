"""The other subcommands: validate on every shipped scenario, models, traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from simfl.cli import main
from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").rglob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_scenario_validates(path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    if path.name == "cifar100.yaml":  # the paper's CIFAR-100 run is estimated at months on one CPU core
        assert main(["validate", str(path)]) == 2
        assert "--max-hours" in capsys.readouterr().err
        assert main(["validate", str(path), "--max-hours", "10000"]) == 0
    else:
        assert main(["validate", str(path)]) == 0
    assert "name:" in capsys.readouterr().out


def test_paper_scenarios_cover_all_five_datasets() -> None:
    names = {p.stem for p in (ROOT / "scenarios" / "paper").glob("*.yaml")}
    assert {"mnist", "cifar10", "cifar100", "newsgroups", "har"} <= names


def test_models_prints_parameter_counts(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["models", "lenet5", "resnet18_1d"]) == 0
    out = capsys.readouterr().out
    assert "44,190" in out and "117,410" in out


def test_models_unknown_name(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["models", "alexnet"]) == 2
    assert "unknown model 'alexnet'" in capsys.readouterr().err


@pytest.mark.data
def test_traces_import_writes_the_derived_files(tmp_path: Path) -> None:
    raw = SHARED / "latency_traces_raw"
    if not raw.is_dir():
        pytest.skip(f"raw latency logs not found at {raw}")
    assert main(["traces", "import", str(raw), "--out", str(tmp_path)]) == 0
    for name in ("devices.csv", "pooled.json", "uploads.csv"):
        assert (tmp_path / name).read_bytes() == (ROOT / "latency_traces" / name).read_bytes()


def test_traces_import_bad_folder(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["traces", "import", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing" in err


def test_traces_show_writes_png(tmp_path: Path) -> None:
    out = tmp_path / "d.png"
    assert main(["traces", "show", "--out", str(out), "--clients", "5", "--rounds", "50"]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_committed_reference_matches_the_schema(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["reference"]) == 0
    generated = capsys.readouterr().out
    committed = (ROOT / "scenarios" / "REFERENCE.md").read_text()
    assert generated == committed, "scenarios/REFERENCE.md is stale: run `make reference`"
    assert "`algorithms[i].beta`" in generated and "`latency.seconds`" in generated
