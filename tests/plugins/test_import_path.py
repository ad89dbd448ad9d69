"""Components named by import path (a user's own module) and given as class objects through the API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import simfl
from simfl.cli import main
from simfl.errors import InputError
from simfl.schema import scenario as scenario_mod
from tests.conftest import tiny_scenario
from tests.plugins.rules import FedFoo

RULES = "tests.plugins.rules"


@pytest.fixture(autouse=True)
def _imports_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests name plugins by import path, which simfl imports only when allowed."""
    monkeypatch.setenv("SIMFL_ALLOW_IMPORTS", "1")


def plugin_scenario(**changes: Any) -> dict[str, Any]:
    """The tiny scenario with a plugin of every kind next to a built-in algorithm."""
    raw = tiny_scenario(
        data={"dataset": f"{RULES}:Line", "size": 60, "partition": {"kind": "iid", "clients": 3}},
        model={"name": f"{RULES}:Tiny"},
        latency={"model": f"{RULES}:Steps", "base": 0.7},
        algorithms=[{"name": f"{RULES}:FedFoo", "eta": 0.3}, {"name": "fedasync", "alpha": 0.6}],
        budget={"time": 6.0},
    )
    raw.update(changes)
    return raw


def test_import_path_plugins_run_from_yaml_and_resume_from_their_dump(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(plugin_scenario(), sort_keys=False))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--verify"]) == 0
    assert (out / "FedFoo" / "seed0" / "metrics.csv").is_file()  # the run is named after the class
    events = (out / "FedFoo" / "seed0" / "events.csv").read_text().splitlines()
    assert len(events) > 5 and ",0.3" in events[1]  # FedFoo's mixing weight
    # the published scenario names the plugins as written and validates again
    again = scenario_mod.load(out / "scenario.yaml")
    assert again.algorithms[0].name == f"{RULES}:FedFoo" and again.latency.base == 0.7


def test_python_api_takes_import_paths_and_class_objects(tmp_path: Path) -> None:
    by_path = simfl.run(plugin_scenario(), tmp_path / "a")
    raw = plugin_scenario(algorithms=[{"name": FedFoo, "eta": 0.3, "label": "foo"}])
    by_class = simfl.run(raw, tmp_path / "b")
    assert raw["algorithms"][0]["name"] is FedFoo  # the caller's mapping is left alone
    assert list(by_path.summary["algorithm"]) == ["FedFoo", "fedasync"]
    assert list(by_class.summary["algorithm"]) == ["foo"]
    a = by_path.metrics[by_path.metrics["algorithm"] == "FedFoo"]["accuracy"].to_list()
    assert a == by_class.metrics["accuracy"].to_list()


def test_a_class_defined_in_a_function_is_found_without_import(tmp_path: Path) -> None:
    class Local(FedFoo):
        """A notebook-style class that no import path can reach."""

    res = simfl.run(plugin_scenario(algorithms=[{"name": Local}]), tmp_path / "c")
    assert list(res.summary["algorithm"]) == ["Local"]


def test_sweeps_and_overrides_reach_plugin_parameters(tmp_path: Path) -> None:
    res = simfl.sweep(plugin_scenario(algorithms=[{"name": f"{RULES}:FedFoo"}]), {"algorithms[0].eta": [0.2, 0.4]},
                      tmp_path / "sw")
    assert sorted(res.summary["algorithms[0].eta"]) == [0.2, 0.4]
    with pytest.raises(InputError, match=r"algorithms\[0\]\.eta: must be in \(0, 1\), got 2"):
        simfl.run(plugin_scenario(), tmp_path / "d", overrides=["algorithms[0].eta=2"])


def test_the_estimate_uses_a_plugin_datasets_shape_when_it_states_one(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(plugin_scenario()))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "dataset:       unknown until loaded" in out and "states no shape or sizes" in out
    data = {"dataset": f"{RULES}:SizedLine", "size": 60, "partition": {"kind": "iid", "clients": 3}}
    path.write_text(yaml.safe_dump(plugin_scenario(data=data)))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "60 train + 30 test samples of 4" in out and "model:         10 parameters" in out


def test_the_simfl_command_finds_modules_under_the_working_folder(tmp_path: Path) -> None:
    (tmp_path / "mylab").mkdir()
    (tmp_path / "mylab" / "__init__.py").write_text("")
    (tmp_path / "mylab" / "rules.py").write_text(
        "from simfl.algorithms.fedasync import FedAsync\n\n\nclass Mine(FedAsync):\n    pass\n")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario(algorithms=[{"name": "mylab.rules:Mine"}])))
    command = Path(sys.executable).with_name("simfl")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SIMFL_ALLOW_IMPORTS")}
    done = subprocess.run([str(command), "validate", "s.yaml", "--allow-imports"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "name: mylab.rules:Mine" in done.stdout


def _one_line(capsys: Any, path: Path) -> str:
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"name": "mylab_missing.rules:FedFoo"},
         "algorithms[0].name: cannot import module 'mylab_missing.rules' of 'mylab_missing.rules:FedFoo': "
         "No module named 'mylab_missing'"),
        ({"name": f"{RULES}:FedBar"}, f"algorithms[0].name: module '{RULES}' has no attribute 'FedBar'"),
        ({"name": f"{RULES}:NotAComponent"},
         f"algorithms[0].name: '{RULES}:NotAComponent' (NotAComponent) is not a valid algorithm plugin: expected a "
         "subclass of simfl.algorithms.AsyncAlgorithm or SyncAlgorithm"),
        ({"name": f"{RULES}:not_a_class"}, "(int object) is not a valid algorithm plugin"),
        ({"name": f"{RULES}:Steps"}, "is not a valid algorithm plugin"),
        ({"name": f"{RULES}:FedFoo", "etta": 0.3}, "algorithms[0].etta: unknown key"),
        ({"name": f"{RULES}:FedFoo", "eta": 1.5}, "algorithms[0].eta: must be in (0, 1), got 1.5"),
        ({"name": "fedfoo"}, "algorithms[0].name: unknown name 'fedfoo'; allowed: "),
    ],
)
def test_bad_plugins_are_one_line(tmp_path: Path, capsys: Any, entry: dict[str, Any], expected: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(plugin_scenario(algorithms=[entry])))
    err = _one_line(capsys, path)
    assert err.startswith(f"simfl: {path}: ") and expected in err, err


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"latency": {"model": f"{RULES}:Steps", "bse": 1}}, "latency.bse: unknown key"),
        ({"latency": {"model": f"{RULES}:FedFoo"}}, "latency.model: '" + RULES + ":FedFoo' (FedFoo) is not a valid "
         "latency plugin: expected a subclass of simfl.latency.LatencyModel"),
        ({"model": {"name": f"{RULES}:Line"}}, "model.name: '" + RULES + ":Line' (Line) is not a valid model plugin"),
        ({"data": {"dataset": f"{RULES}:Line", "partition": {"kind": "iid", "clients": 3}, "size": 0}},
         "data.size: must be in (0, inf), got 0"),
        ({"data": {"dataset": f"{RULES}:Tiny", "partition": {"kind": "iid", "clients": 3}}},
         "data.dataset: '" + RULES + ":Tiny' (Tiny) is not a valid dataset plugin"),
    ],
)
def test_bad_plugin_sections_are_one_line(tmp_path: Path, capsys: Any, change: dict[str, Any], expected: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(plugin_scenario(**change)))
    err = _one_line(capsys, path)
    assert expected in err, err


def test_a_plugin_changes_local_training_through_its_own_hook(tmp_path: Path) -> None:
    """A local-training hook named by import path trains exactly as the built-in hook it restates."""
    sync = {"clients_per_round": 2}
    raw = tiny_scenario(algorithms=[{"name": "fedprox", "mu": 0.5, **sync},
                                    {"name": f"{RULES}:ProxByPath", "mu": 0.5, **sync},
                                    {"name": "fedavg", **sync}],
                        budget={"time": 6.0})
    metrics = simfl.run(raw, tmp_path / "out").metrics
    loss = {name: frame["loss"].to_list() for name, frame in metrics.groupby("algorithm")}
    assert loss["ProxByPath"] == loss["fedprox"]
    assert loss["fedavg"] != loss["fedprox"]  # the hook did change training


def test_an_unknown_hook_is_named() -> None:
    from simfl.train.hooks import hook

    with pytest.raises(KeyError, match="cannot be imported"):
        hook("tests.plugins.no_such_module:term")
    with pytest.raises(KeyError, match="no local-training hook 'nonsense'"):
        hook("nonsense")
