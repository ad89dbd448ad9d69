"""Hostile input, part five: no code from a scenario under ``simfl flwr run``, no run without an end, user files and
values untouched, one line for every mistake.

Classes (counted in :data:`tests.reliability.hostile.COUNTS`):

- ``flwr imports``: an import path that a ``--scenario`` file or a ``--set`` names under ``simfl flwr run`` (a module
  beside the scenario, or inside the app's folder but not one of its components) is refused without
  ``--allow-imports``, before its code runs; with it, it is imported.
- ``run config``: ``--run-config`` values reach the app as Flower's parser gives them (NaN, infinities, 30-digit
  integers), or are refused in one line; ``--federation-config`` likewise.
- ``pyproject``: a ``pyproject.toml`` with a value of the wrong kind where ``flwr run`` reads one, nested too deeply, or
  not TOML at all: one line naming the file and the key.
- ``flwr resume``: ``--resume`` of an app whose code or config changed since its runs began is refused.
- ``no end``: a run that cannot make progress stops in one line, what it did kept (FAILED), by ``simfl run``, the API
  and ``simfl sweep``.
- ``lock``: the folder lock never overwrites a file it does not own (a hard link, a user's file of that name).
- ``workers``: what a worker process raises (the user's own code failing, a full disk) comes back as it is.
"""

from __future__ import annotations

import itertools
import math
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import simfl
from simfl.errors import InputError, NoSpace, UserCodeFailed
from simfl.launch.checkpoint import FAILED_FILE
from simfl.launch.parallel import _portable
from simfl.launch.units import Unit
from tests.conftest import tiny_scenario
from tests.reliability.hostile import COUNTS, cli

flwr = pytest.importorskip("flwr")

EVIL = 'open({marker!r}, "w").write("ran")\nclass Net: pass\nclass Algo: pass\nclass Data: pass\nclass Lat: pass\n'
"""A module whose import leaves a marker file: the proof that its code ran."""

PYPROJECT = """\
[project]
name = "hostile-app"
version = "1.0.0"

[tool.flwr.app.components]
serverapp = "PACKAGE.server:app"
clientapp = "tests.flower.apps:sgd_app"

[tool.flwr.app.config]
lr = 0.1
pinf = 1.0
ninf = 1.0
tiny = 1.0
huge = 1
nhuge = 1
name = "x"
out = "/dev/null"

[tool.flwr.federations]
default = "local"

[tool.flwr.federations.local]
options.num-supernodes = 3
"""

SERVER = """\
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = dict(context.run_config)
    with open(str(config["out"]), "w") as f:
        f.write(repr(sorted((k, type(v).__name__, repr(v)) for k, v in config.items())))
"""
"""A ServerApp that writes the run config it was given and ends (its run ends at time 0)."""

SCENARIO = {"data": {"dataset": "synthetic", "train_size": 60, "test_size": 10, "features": 8, "classes": 3,
                     "partition": {"kind": "iid", "clients": 3}},
            "model": {"name": "mlp", "hidden": [8]}, "latency": {"model": "constant", "seconds": [1.0, 1.0, 1.0]}}


APPS = itertools.count()


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """A Flower App folder (its own package, a ClientApp of the tests) and a scenario file beside it. Each test's app
    has a package name of its own: Python keeps an imported package for the process."""
    folder = tmp_path / "app"
    package = folder / f"hostileapp{next(APPS)}"
    package.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(pyproject(folder))
    (package / "__init__.py").write_text("")
    (package / "server.py").write_text(SERVER)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    return folder


def package(app: Path) -> Path:
    return next(app.glob("hostileapp*"))


def pyproject(app: Path, text: str = PYPROJECT) -> str:
    return text.replace("PACKAGE", next(app.glob("hostileapp*")).name)


def flwr_run(app: Path, *args: Any) -> list[str]:
    return ["flwr", "run", str(app), "--scenario", str(app.parent / "s.yaml"), "--out", str(app.parent / "o"),
            "--quiet", "--workers", "1", *map(str, args)]


# -- flwr imports ----------------------------------------------------------------------------------------------------

IMPORTS = [
    ("model", ["--set", "model={name: 'evil{n}:Net'}"], "model.name: 'evil{n}:Net' is an import path"),
    ("latency", ["--set", "latency={model: 'evil{n}:Lat'}"], "latency.model: 'evil{n}:Lat' is an import path"),
    ("data", ["--set", "data={dataset: 'evil{n}:Data', partition: {kind: iid, clients: 3}}"],
     "'evil{n}:Data' is an import path"),
    ("algorithm", ["--set", "algorithms=[{name: 'evil{n}:Algo'}]"], "algorithms[0].name: 'evil{n}:Algo' is an import"),
    ("strategy", ["--set", "algorithms=[{name: flower, strategy: 'evil{n}:Algo'}]"], "'evil{n}:Algo' is an import path"),
]


@pytest.mark.parametrize(("n", "case"), list(enumerate(IMPORTS)), ids=[c[0] for c in IMPORTS])
def test_an_import_path_of_the_scenario_runs_no_code_under_flwr_run(
        app: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, n: int, case: Any) -> None:
    """The issue's case and its kin: a module beside the scenario, named by it or a --set, is not the app's."""
    _, argv, words = case
    monkeypatch.chdir(app.parent)  # where the module is found once imports are allowed
    marker = app.parent / "ran"
    (app.parent / f"evil{n}.py").write_text(EVIL.format(marker=str(marker)))
    _, err = cli(capsys, flwr_run(app, *(a.replace("{n}", str(n)) for a in argv)), "flwr imports", expect=2)
    assert words.replace("{n}", str(n)) in err and "--allow-imports" in err, err
    assert not marker.exists() and not (app.parent / "o").exists()


def test_a_module_of_the_app_that_is_not_a_component_needs_the_permission(
        app: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the components pyproject.toml names are the app's code to run: another module in its folder is not."""
    marker = app.parent / "ran"
    (package(app) / "extra.py").write_text(EVIL.format(marker=str(marker)))
    model = f"model={{name: '{package(app).name}.extra:Net'}}"
    _, err = cli(capsys, flwr_run(app, "--set", model), "flwr imports", expect=2)
    assert f"'{package(app).name}.extra:Net' is an import path" in err and not marker.exists()
    _, err = cli(capsys, flwr_run(app, "--set", model, "--allow-imports"), "flwr imports", expect=2)
    assert marker.exists() and "is not a valid model plugin" in err  # imported once allowed: then checked


# -- run config values -----------------------------------------------------------------------------------------------


def seen(app: Path) -> dict[str, tuple[str, str]]:
    import ast

    return {k: (t, v) for k, t, v in ast.literal_eval((app.parent / "seen.txt").read_text())}


def test_run_config_values_reach_the_app_as_flowers_parser_gives_them(app: Path, capsys: pytest.CaptureFixture[str]
                                                                      ) -> None:
    """The issue: NaN and infinities reached the app as None. The app's own components run without --allow-imports."""
    from flwr.common.config import parse_config_args

    text = (f"lr=nan pinf=inf ninf=-1e400 tiny=1e-400 huge=123456789012345678901234567890 "
            f"nhuge=-99999999999999999999999 name='nan' out='{app.parent / 'seen.txt'}'")
    cli(capsys, flwr_run(app, "--run-config", text), "run config", expect=0)
    expected = {k: (type(v).__name__, repr(v)) for k, v in parse_config_args([text]).items()}
    assert seen(app) == expected
    assert expected["lr"] == ("float", "nan") and expected["ninf"] == ("float", "-inf")
    assert expected["huge"] == ("int", "123456789012345678901234567890") and expected["name"] == ("str", "'nan'")
    saved = yaml.safe_load((app.parent / "o" / "scenario.yaml").read_text())
    assert math.isnan(saved["algorithms"][0]["run_config"]["lr"]) and math.isnan(saved["client"]["run_config"]["lr"])


def test_a_run_config_file_keeps_its_values_too(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = app.parent / "config.toml"
    config.write_text(f"lr = nan\npinf = inf\nout = '{app.parent / 'seen.txt'}'\n")
    cli(capsys, flwr_run(app, "--run-config", config), "run config", expect=0)
    assert seen(app)["lr"] == ("float", "nan") and seen(app)["pinf"] == ("float", "inf")


@pytest.mark.parametrize(("option", "text", "words"), [
    ("--run-config", "lr=[1,2]", "--run-config: The value for key lr needs to be of type"),
    ("--run-config", "lr=1979-05-27", "--run-config: The value for key lr needs to be of type"),
    ("--run-config", "lr=1 lr=2", "--run-config: The provided configuration string is in an invalid format"),
    ("--run-config", "lr={a=[{}]}", "--run-config: The value for key a needs to be of type"),
    ("--federation-config", "num-supernodes=nan", "num-supernodes: must be a whole number of at least 1, got nan"),
    ("--federation-config", "num-supernodes=1e30", "num-supernodes: must be a whole number of at least 1, got 1e+30"),
    ("--federation-config", "num-supernodes=123456789012345678901234567890",
     "num-supernodes: is 123456789012345678901234567890, but the scenario's data.partition.clients is 3"),
    ("--federation-config", "backend.client-resources.num-cpus=inf", "num-cpus: must be a whole number of at least 1"),
])
def test_config_values_flower_refuses_are_one_line(app: Path, capsys: pytest.CaptureFixture[str], option: str,
                                                   text: str, words: str) -> None:
    _, err = cli(capsys, flwr_run(app, option, text), "run config", expect=2)
    assert words in err, err
    assert not (app.parent / "o").exists()


# -- pyproject.toml ---------------------------------------------------------------------------------------------------

HEAD, FEDERATIONS = PYPROJECT.split("[tool.flwr.federations]\n")
PYPROJECTS = {
    "tool": ("tool = 3\n", "tool: must be a table (a [tool] section), got an integer 3"),
    "flwr": ("[tool]\nflwr = 3\n", "tool.flwr: must be a table"),
    "app": ('[tool.flwr]\napp = "x"\n', "tool.flwr.app: must be a table (a [tool.flwr.app] section), got text 'x'"),
    "components": ("[tool.flwr.app]\ncomponents = 5\n", "tool.flwr.app.components: must be a table"),
    "component": (PYPROJECT.replace('"PACKAGE.server:app"', "7"),
                  "tool.flwr.app.components.serverapp: must be an import path package.module:attribute, got 7"),
    "config": (PYPROJECT.replace("[tool.flwr.app.config]\n", "[tool.flwr.app.configs]\n").replace(
        "[tool.flwr.app.components]", "[tool.flwr.app]\nconfig = 7\n[tool.flwr.app.components]"),
        "tool.flwr.app.config: must be a table"),
    "federations": (HEAD + "[tool.flwr]\nfederations = 1\n", "tool.flwr.federations: must be a table"),
    "federation": (HEAD + '[tool.flwr.federations]\ndefault = "local"\nlocal = "x"\n',
                   "tool.flwr.federations.local: must be a table"),
    "default": (HEAD + "[tool.flwr.federations]\ndefault = 3\n",
                "tool.flwr.federations.default: must be the name of a federation, got an integer 3"),
    "missing federation": (HEAD + '[tool.flwr.federations]\ndefault = "gone"\n',
                           "names the federation 'gone', which has no [tool.flwr.federations.gone] table"),
    "options": (HEAD + '[tool.flwr.federations]\ndefault = "local"\n[tool.flwr.federations.local]\noptions = 4\n',
                "tool.flwr.federations.local.options: must be a table"),
    "option value": (PYPROJECT.replace("options.num-supernodes = 3", "options.num-supernodes = [3]"),
                     "tool.flwr.federations.local.options.num-supernodes: must be a boolean, a number or text"),
    "project": (PYPROJECT.replace('[project]\nname = "hostile-app"\nversion = "1.0.0"\n', "project = 5\n"),
                "project: must be a table (a [project] section), got an integer 5"),
    "project name": (PYPROJECT.replace('name = "hostile-app"', "name = 5"),
                     "project.name: must be the app's name (text), got an integer 5"),
    "array value": (PYPROJECT.replace("lr = 0.1", "lr = [1, 2]"),
                    "tool.flwr.app.config.lr: must be a boolean, a number or text (a Flower config value), got an array"),
    "date value": (PYPROJECT.replace("lr = 0.1", "lr = 1979-05-27T07:32:00Z"), "tool.flwr.app.config.lr: must be"),
    "500-deep array": (PYPROJECT.replace("lr = 0.1", "lr = " + "[" * 500 + "]" * 500),
                       "is nested too deeply (arrays or inline tables more than 64 levels inside each other)"),
    "300-deep table": (PYPROJECT.replace("lr = 0.1", "lr = " + "{a=" * 300 + "1" + "}" * 300),
                       "nested deeper than 64 levels"),
    "500-deep header": (PYPROJECT + "[x" + ".x" * 500 + "]\n", "nested deeper than 64 levels"),
    "repeated key": (PYPROJECT.replace("lr = 0.1", "lr = 0.1\nlr = 0.2"), "is not valid TOML (Cannot overwrite a value"),
    "binary": ("\x00\x01\x02", "is not valid TOML"),
    "empty": ("", "tool.flwr.app.components.serverapp: must be an import path package.module:attribute, got None"),
}


@pytest.mark.parametrize("case", list(PYPROJECTS))
def test_a_malformed_pyproject_is_one_line_naming_the_key(app: Path, capsys: pytest.CaptureFixture[str],
                                                          case: str) -> None:
    """The issue: an int or text where a table belongs was an internal error, a 500-deep array a RecursionError."""
    text, words = PYPROJECTS[case]
    (app / "pyproject.toml").write_text(pyproject(app, text))
    _, err = cli(capsys, flwr_run(app), "pyproject", expect=2)
    assert f"{app / 'pyproject.toml'}: " in err and words in err, err


def test_a_pyproject_that_is_not_utf8_or_a_file_is_one_line(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (app / "pyproject.toml").write_bytes(b"\xff\xfe" + pyproject(app).encode("utf-16-le"))
    _, err = cli(capsys, flwr_run(app), "pyproject", expect=2)
    assert "pyproject.toml: is not valid TOML" in err
    (app / "pyproject.toml").unlink()
    (app / "pyproject.toml").mkdir()
    _, err = cli(capsys, flwr_run(app), "pyproject", expect=2)
    assert "is not a Flower App folder: it has no pyproject.toml" in err


# -- --resume of a changed app -----------------------------------------------------------------------------------------


def _cut(app: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The app's two seeds, stopped (as by Ctrl-C) once the first finished."""
    from simfl.launch.checkpoint import Session

    original = Session.finish

    def finish_then_stop(self: Session, *args: Any) -> None:
        original(self, *args)
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "finish", finish_then_stop)
    out = app.parent / "seen.txt"
    assert simfl.cli.main(flwr_run(app, "--seeds", "0,1", "--run-config", f"out='{out}'")) == 130
    monkeypatch.setattr(Session, "finish", original)
    capsys.readouterr()
    return app.parent / "o"


@pytest.mark.parametrize("change", ["code", "config", "new module"])
def test_resume_of_an_app_changed_since_is_refused(app: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """Continuing would put runs of two versions of the app in one folder; the app as it was resumes."""
    out = _cut(app, capsys, monkeypatch)
    files = {p: p.read_bytes() for p in (app / "pyproject.toml", package(app) / "server.py")}
    if change == "code":
        (package(app) / "server.py").write_text(SERVER.replace("sorted(", "sorted(  "))
    elif change == "config":
        (app / "pyproject.toml").write_text(pyproject(app, PYPROJECT.replace("lr = 0.1", "lr = 0.2")))
    else:
        (package(app) / "helper.py").write_text("X = 1\n")
    resume = ["flwr", "run", str(app), "--resume", str(out), "--quiet", "--workers", "1"]
    _, err = cli(capsys, resume, "flwr resume", expect=2)
    assert f"the app in {app} changed since {out}'s runs began" in err, err
    for path, content in files.items():
        path.write_bytes(content)
    (package(app) / "helper.py").unlink(missing_ok=True)
    (app / "pyproject.toml").write_text(pyproject(app, PYPROJECT.replace("num-supernodes = 3", "num-supernodes = 5")))
    # federations are not bundled: a change there is not the app's
    cli(capsys, resume, "flwr resume", expect=0)
    assert (out / "summary.csv").is_file()


# -- no end ----------------------------------------------------------------------------------------------------------


def _no_end(budget: dict[str, Any] | None = None) -> dict[str, Any]:
    """Rounds of both clients closed by a 1 s deadline: client 0 (0.5 s) leaves for good at 0.1 s, during the first
    round, and client 1 takes 2 s, so no synchronous update ever arrives. Nothing before the run can tell (client 0
    makes the deadline while it is there), so the check is the run's own; FedAsync, which has no deadline, ends."""
    return tiny_scenario(executor={"kind": "none"}, latency={"model": "constant", "seconds": [0.5, 2.0]},
                         data={"dataset": "synthetic", "train_size": 40, "test_size": 10, "features": 4, "classes": 2,
                               "partition": {"kind": "iid", "clients": 2}},
                         algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}],
                         rounds={"deadline": 1.0}, availability={"departures": [{"client": 0, "leave": 0.1}]},
                         budget=budget or {"updates": 3}, eval={"every": 50.0})


def test_a_run_without_an_end_stops_in_one_line_with_what_it_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                 ) -> None:
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_no_end()))
    _, err = cli(capsys, ["run", tmp_path / "s.yaml", "--out", tmp_path / "o", "--quiet"], "no end", expect=2)
    assert err.startswith("simfl: fedavg seed0: no update in the last 2000 client rounds in a row (1999 late for their "
                          "round's close, 1 cut short by a departure): the update budget of 3 cannot be reached "
                          "(stopped at "), err
    assert err.endswith(f"results so far in {tmp_path / 'o'} (marked FAILED)")
    failed = (tmp_path / "o" / FAILED_FILE).read_text()
    assert "status: failed (no progress)\nrun: fedavg seed0\nwhy: no update in the last 2000" in failed
    assert (tmp_path / "o" / "fedasync" / "seed0" / "events.csv").is_file()  # finished before: kept
    events = (tmp_path / "o" / "fedavg" / "seed0" / "events.csv").read_text().splitlines()
    assert len(events) == 2001 and events[1].endswith(",leave") and all(e.endswith(",late") for e in events[2:])
    assert "fedasync" in (tmp_path / "o" / "summary.csv").read_text()


def test_the_api_and_a_sweep_stop_it_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match=r"fedavg seed0: no update in the last 2000 client rounds in a row") as caught:
        simfl.run(_no_end(), tmp_path / "api", workers=1)
    assert "(marked FAILED)" in str(caught.value) and (tmp_path / "api" / FAILED_FILE).is_file()
    COUNTS[("no end", "api raised")] += 1
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_no_end()))
    _, err = cli(capsys, ["sweep", tmp_path / "s.yaml", "--out", tmp_path / "sw", "--set", "sweep={train.lr: [0.1]}",
                          "--quiet", "--workers", "1"], "no end", expect=2)
    assert "fedavg seed0: no update in the last 2000 client rounds" in err and "(marked FAILED)" in err, err


def test_a_time_budget_keeps_such_a_run_going_to_its_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_no_end(budget={"updates": 3, "time": 100.0})))
    cli(capsys, ["run", tmp_path / "s.yaml", "--out", tmp_path / "o", "--quiet"], "no end", expect=0)
    assert not (tmp_path / "o" / FAILED_FILE).exists()


# -- the folder lock ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["hard link", "user file"])
def test_the_lock_never_overwrites_a_file_it_does_not_own(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          planted: str) -> None:
    """A hard link named o.lock to a user's file was truncated and overwritten with the holder's line."""
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario(executor={"kind": "none"})))
    thesis = tmp_path / "thesis.txt"
    thesis.write_text("my thesis")
    lock = tmp_path / "o.lock"
    if planted == "hard link":
        lock.hardlink_to(thesis)
    else:
        lock.write_text("my notes")
    for argv in (["run", tmp_path / "s.yaml", "--out", tmp_path / "o", "--quiet"], ["run", "--resume", tmp_path / "o"]):
        _, err = cli(capsys, argv, "lock", expect=2)
        assert err.startswith(f"simfl: {lock}: ") and "would overwrite it; remove it, or choose another --out" in err
    assert thesis.read_text() == "my thesis" and lock.exists() and not (tmp_path / "o").exists()
    assert (thesis.read_text() if planted == "hard link" else lock.read_text()) in ("my thesis", "my notes")


# -- what worker processes raise ----------------------------------------------------------------------------------------


def test_what_a_worker_raises_comes_back_as_it_is() -> None:
    """Through a pickle, as worker processes and Ray tasks send it: a full disk stays a full disk (what finished is
    kept), the user's own code failing stays that (one line, its traceback in crash.txt), not an internal error."""
    unit = Unit(0, 0, "fedasync", 0, "", "", 1, None)
    for exc in (NoSpace("store", "cannot be written"), UserCodeFailed("client.flower_app", "raised", "Traceback ..."),
                InputError("data", "missing")):
        back = pickle.loads(pickle.dumps(_portable(unit, exc)))
        assert type(back) is type(exc) and back.args == exc.args
    COUNTS[("workers", "kept its kind")] += 3


def test_a_clientapp_failing_in_a_worker_process_is_the_users_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                   ) -> None:
    """Two seeds in two worker processes, a ClientApp that raises: one line naming it (was: an internal error)."""
    raw = tiny_scenario(seeds=[0, 1], client={"flower_app": "tests.flower.apps:raising_app"},
                        budget={"updates": 3}, latency={"model": "constant", "seconds": [1.0, 2.0, 3.0]})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    # not bounded as the other cases: two worker processes start torch, slow on a loaded machine
    code = simfl.cli.main([str(a) for a in ["run", tmp_path / "s.yaml", "--out", tmp_path / "o", "--quiet",
                                            "--workers", "2", "--allow-imports"]])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "the ClientApp tests.flower.apps:raising_app raised" in err and "internal error" not in err, err
    assert "its traceback is in" in err
    COUNTS[("workers", "exit2")] += 1


def test_a_disk_store_over_the_file_size_limit(tmp_path: Path) -> None:
    """A client-state store larger than ``ulimit -f``: one line, the folder resumable (from a worker process too:
    :func:`test_what_a_worker_raises_comes_back_as_it_is`)."""
    raw = tiny_scenario(executor={"kind": "none"}, client_state={"store": "disk", "dir": str(tmp_path)},
                        data={"dataset": "synthetic", "train_size": 2000, "test_size": 20, "features": 64,
                              "classes": 4, "partition": {"kind": "iid", "clients": 1000}},
                        model={"name": "mlp", "hidden": [64]}, algorithms=[{"name": "orthofl"}],
                        latency={"model": "exponential", "mean": 1.0}, budget={"updates": 20})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    done = subprocess.run(["bash", "-c", 'ulimit -f 2000; exec "$@"', "simfl", sys.executable, "-m", "simfl", "run",
                           "s.yaml", "--out", "o", "--quiet", "--workers", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    err = done.stderr.strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1, err
    assert "the client-state store's file in" in err and "`simfl run --resume o` continues" in err, err
    assert (tmp_path / "o.partial" / "scenario.yaml").is_file()
    COUNTS[("disk limit", "exit2")] += 1
    shutil.rmtree(tmp_path / "o.partial")
