"""The tracking: section: validation, one-line refusals, parameters, and scenario.yaml without it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from simfl.cli import main
from simfl.output.tracking import run_params
from simfl.schema import scenario as scenario_mod
from simfl.schema.reference import reference
from tests.conftest import tiny_scenario


def test_unknown_keys_rejected_in_one_line(write_scenario, capsys) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario(tracking={"tensorboard": {"folder": "x"}}))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tracking.tensorboard.folder" in err[0]
    path = write_scenario(tiny_scenario(tracking={"wandb": {"mode": "online-ish"}}))
    assert main(["validate", str(path)]) == 2
    assert "tracking.wandb.mode" in capsys.readouterr().err


def test_missing_package_is_one_line_before_any_run(write_scenario, tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    path = write_scenario(tiny_scenario(tracking={"mlflow": {}}))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["simfl: tracking.mlflow: needs the mlflow package: pip install 'simfl[mlflow]'"]
    assert not out.exists() and not (tmp_path / "out.partial").exists()
    assert main(["validate", str(path)]) == 2  # validate says so too
    assert capsys.readouterr().err.strip().splitlines() == err


def test_scenario_yaml_unchanged_without_tracking_and_params_flat() -> None:
    scn = scenario_mod.validate(tiny_scenario())
    assert "tracking" not in scenario_mod.dump(scn)
    tracked = scenario_mod.validate(tiny_scenario(tracking={"tensorboard": {}}))
    text = scenario_mod.dump(tracked)
    assert "tracking:" in text and scenario_mod.dump(scenario_mod.validate(__import__("yaml").safe_load(text))) == text
    params = run_params(__import__("yaml").safe_load(text), 0, 7)
    assert params["algorithm.name"] == "fedasync" and params["algorithm.alpha"] == 0.6 and params["seed"] == 7
    assert params["data.partition.kind"] == "iid" and params["model.hidden"] == [8]
    assert not any(k.startswith(("tracking", "algorithms", "seeds")) for k in params)


def test_reference_documents_tracking() -> None:
    text = reference()
    assert "tracking" in text and "simfl[tb]" in text and "offline" in text


def test_a_per_update_observer_runs_on_either_clock() -> None:
    from simfl.launch.experiment import federation, load_dataset, run_one

    scn = scenario_mod.validate(tiny_scenario(executor={"kind": "none"}))
    fed = federation(scn, load_dataset(scn), 0)
    for engine in ("auto", "heap", "simpy"):
        seen: list[int] = []
        run_one(scn, fed, 0, engine=engine, on_update=lambda state, seen=seen: seen.append(state.updates))
        assert seen == list(range(1, len(seen) + 1)) and len(seen) > 5
