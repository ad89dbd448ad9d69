"""Hostile input, part six: a rare-success run that can reach its budget is not stopped by chance, the speed cache
never blocks or is trusted when damaged, an estimate resting on cached speeds names the cache, every notation of a
number is a number, and an interrupted command says only what exists.

- ``no progress``: the streak of fruitless rounds that stops a run with only an update budget comes from the
  scenario's own failure probability (:func:`simfl.sim.world.dry_limit`), and the stop says how sure it is.
- ``speed cache``: a FIFO, a device, a link or a huge file at the cache's path is neither waited on, read through
  nor replaced (one line on stderr names it); an entry of impossible figures is ignored.
- ``cached estimate``: a wall-time refusal that rests on cached speeds names the cache and how to measure again.
- ``numbers``: ``eval.target: 8e-1`` (text to YAML 1.1) is the accuracy 0.8, as ``train.lr: 5e-2`` is a number.
- ``interrupted``: SIGTERM or Ctrl-C points to a .partial folder (or the sweep's or tune's) only where the command
  left one; else it says no results were written.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from simfl import speeds
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import estimate
from simfl.schema import scenario as scenario_mod
from simfl.sim import world
from simfl.sim.verify import RunStopped
from tests.conftest import tiny_scenario
from tests.reliability.hostile import bounded, cli

# -- no progress -----------------------------------------------------------------------------------------------------


def _rare(p: float, seed: int, updates: int = 10) -> dict[str, Any]:
    """Two clients (1 s and 1.5 s rounds), each round failing with probability ``p``, an update budget only."""
    return tiny_scenario(executor={"kind": "none"}, eval={"every": 1e6}, seeds=[seed],
                         data={"dataset": "synthetic", "train_size": 40, "test_size": 10, "features": 4, "classes": 2,
                               "partition": {"kind": "iid", "clients": 2}},
                         latency={"model": "constant", "seconds": [1.0, 1.5]}, availability={"p": p},
                         budget={"updates": updates})


def _run(raw: dict[str, Any]) -> Any:
    scn = scenario_mod.validate(raw)
    return run_one(scn, federation(scn, load_dataset(scn), scn.seeds[0]), 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_run_failing_most_rounds_reaches_its_budget(seed: int) -> None:
    """At p = 0.9995 a streak of 2,000 failures has probability 0.37: the 1,000-per-client rule stopped these runs
    (seed 0 after 1 update, seed 1 after 1); they reach their 10 updates after about 20,000 rounds."""
    st = _run(_rare(0.9995, seed)).state
    assert st.updates == 10 and st.stopped and len(st.events) > 2 * world.DRY_ROUNDS


def test_the_streak_is_beyond_chance_at_the_scenarios_failure_probability() -> None:
    assert world.dry_limit(2, 0.9995, 10) == 46231  # the least n with 11 * 0.9995 ** n below 1e-9
    for clients, p, updates in [(2, 0.9995, 10), (1, 0.99, 1), (5, 0.999, 1000), (1, 0.96, 10**6), (3, 0.5, 60)]:
        n = world.dry_limit(clients, p, updates)
        rule = min(world.DRY_ROUNDS * clients, world.DRY_MOST)
        assert world.streak_chance(p, n, updates) < world.DRY_CHANCE
        assert n == rule or world.streak_chance(p, n - 1, updates) >= world.DRY_CHANCE
    # where the per-client rule already was beyond chance it stands: the same stops, the same files
    kept = [world.dry_limit(c, p, 10**6) for c, p in [(1, 0.96), (3, 0.9), (200, 0.99), (2, 0.0)]]
    assert kept == [1000, 3000, world.DRY_MOST, 2000]
    assert world.dry_limit(1, 1 - 1e-9, 10) == world.DRY_CHANCE_MOST  # and a run ends, whatever its failure rate


def test_a_stop_after_failures_says_how_sure_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the bound raised to 0.5 (and the per-client rule lowered) a streak of failures stops a run by chance:
    the line gives the failure probability and the bound, and how to lift the stop."""
    monkeypatch.setattr(world, "DRY_CHANCE", 0.5)
    monkeypatch.setattr(world, "DRY_ROUNDS", 1)
    n = world.dry_limit(2, 0.99, 10)
    assert n == 308
    with pytest.raises(RunStopped) as caught:
        _run(_rare(0.99, 5))
    message = caught.value.message
    assert message.startswith(f"no update in the last {n} client rounds in a row ({n} failed): at this scenario's "
                              f"failure probability of 0.99 per round, {n} failures in a row come by chance with "
                              "probability below 0.5, so the update budget of 10 is taken to be out of reach "
                              "(stopped at "), message
    assert message.endswith("; with budget.time such a run goes on to its time)")
    monkeypatch.setattr(world, "DRY_CHANCE_MOST", 50)
    with pytest.raises(RunStopped) as caught:
        _run(_rare(0.9995, 0))
    assert ("50 failures in a row may well come by chance (probability up to 1), but no run waits for more than 50 "
            "fruitless rounds in a row, so the update budget of 10 is taken to be out of reach") in caught.value.message


# -- speed cache -----------------------------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of this test's own (what was said of other files stays said)."""
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv(speeds.ENV, str(folder))
    monkeypatch.setattr(speeds, "_TOLD", set())
    return folder


def _plain(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario(executor={"kind": "none"})))
    return path


ENGINE = {"arrival": 5e-5}


@pytest.mark.parametrize("kind", ["fifo", "zero", "link", "huge"])
def test_what_is_no_cache_file_is_never_waited_on_read_through_or_replaced(
        kind: str, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO blocked ``open`` for ever (validate hung), a link to /dev/zero was read without end (run past 400 s), a
    link elsewhere was read (and written through by a rename's follower); now each is ignored with one line."""
    target = cache / speeds.FILE
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"layout": speeds.LAYOUT, "entries": {}}))
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "zero":
        target.symlink_to("/dev/zero")
    elif kind == "link":
        target.symlink_to(elsewhere)
    else:
        target.write_bytes(b" " * (speeds.MAX_BYTES + 1))
    with bounded(10):
        assert speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS) is None
        speeds.store(speeds.ENGINE, speeds.ENGINE_FACTS, ENGINE)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"simfl: the speed cache {target} is "), err
    assert [p.name for p in cache.iterdir()] == [speeds.FILE]  # no temporary file left
    if kind == "huge":  # a regular file of simfl's own name: replaced by the measurement, atomically
        assert "replaced by the next measurement" in err
        assert speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS) == ENGINE
        return
    assert "left as it is; remove it, or set $SIMFL_CACHE to another folder" in err
    assert target.is_fifo() if kind == "fifo" else target.is_symlink()
    assert json.loads(elsewhere.read_text())["entries"] == {}  # never written through


def test_validate_with_a_fifo_for_its_cache_answers(cache: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(cache / speeds.FILE)
    _, err = cli(capsys, ["validate", _plain(tmp_path)], "speed cache", expect=0)
    assert err.startswith(f"simfl: the speed cache {cache / speeds.FILE} is a FIFO: ignored and left as it is"), err
    assert (cache / speeds.FILE).is_fifo()


@pytest.mark.parametrize("figure", [1e300, 1e7, -1.0])
def test_an_entry_no_machine_gives_is_damaged(figure: float, cache: Path) -> None:
    speeds.store(speeds.ENGINE, speeds.ENGINE_FACTS, ENGINE)
    data = json.loads((cache / speeds.FILE).read_text())
    (entry,) = data["entries"].values()
    entry["arrival"] = figure
    (cache / speeds.FILE).write_text(json.dumps(data))
    assert speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS) is None


# -- cached estimate -------------------------------------------------------------------------------------------------


def _cache_training(raw: dict[str, Any], step: float) -> None:
    """Cache a measured training speed of ``step`` seconds per step for the scenario's model, data and batch."""
    scn = scenario_mod.validate(raw)
    facts = estimate.data_facts(scn.data)
    assert facts is not None
    speeds.store(speeds.TRAINING, speeds.training(scn.model, facts.shape, facts.classes, scn.train.batch_size),
                 {"job": 0.0, "step": step, "sample": 0.0, "eval": 0.0, "eval_sample": 0.0})


def test_cached_speeds_of_1e300_do_not_refuse_a_valid_run(cache: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """They were read as measured: "one run would take about 7.8e297 h"; no machine gives them, so they are no
    measurement and the estimate is the reference machine's."""
    raw = tiny_scenario()
    _cache_training(raw, 1.0)
    data = json.loads((cache / speeds.FILE).read_text())
    for entry in data["entries"].values():
        entry.update({k: 1e300 for k in entry})
    (cache / speeds.FILE).write_text(json.dumps(data))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    cli(capsys, ["validate", tmp_path / "s.yaml"], "cached estimate", expect=0)


def test_a_refusal_resting_on_cached_speeds_names_the_cache(cache: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A day per step, as if measured here: 13 updates of 3 steps are far past the 168 h limit."""
    raw = tiny_scenario()
    _cache_training(raw, 86_400.0)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    _, err = cli(capsys, ["validate", tmp_path / "s.yaml"], "cached estimate", expect=2)
    assert "one run would take about" in err and "lower train.epochs or the budget, or raise the limit; " in err, err
    assert err.endswith(f"this estimate rests on the training speed measured here, cached in {cache / speeds.FILE}: "
                        "if that cache is wrong, delete it and the next `simfl run` measures this machine again"), err
    (cache / speeds.FILE).unlink()
    cli(capsys, ["validate", tmp_path / "s.yaml"], "cached estimate", expect=0)  # the reference machine's: fine


# -- numbers ---------------------------------------------------------------------------------------------------------


def _with_target(written: str) -> str:
    """The tiny scenario's YAML with ``eval.target`` written as given (YAML text, not a value dumped)."""
    text = yaml.safe_dump(tiny_scenario())
    assert "eval:\n  every: 2.0\n" in text and "lr: 0.1" in text
    return text.replace("eval:\n  every: 2.0\n", f"eval:\n  every: 2.0\n  target: {written}\n")


@pytest.mark.parametrize("written", ["8e-1", "8E-1", ".8", "0.8", "'8e-1'", "{accuracy: 8e-1}", "{accuracy: .8}"])
def test_every_notation_of_an_accuracy_is_one(written: str, tmp_path: Path) -> None:
    """``8e-1`` was refused as "must be an accuracy (0.8)" while ``{accuracy: 8e-1}`` and ``train.lr: 5e-2`` were
    read as numbers: the target is read by the float fields' own reading (:func:`simfl.fields.number`)."""
    path = tmp_path / "s.yaml"
    path.write_text(_with_target(written).replace("lr: 0.1", "lr: 5e-2"))
    scn = scenario_mod.load(path)
    target = scn.eval.target
    assert (target if isinstance(target, float) else target.accuracy) == 0.8 and scn.train.lr == 0.05


@pytest.mark.parametrize(("written", "says"), [
    ("8e-1x", "eval.target: must be an accuracy (0.8), {accuracy: 0.8} or {relative: 0.95, of: lowest|baseline}, "
              "got '8e-1x'"),
    ("8e1", "eval.target: an accuracy must be in (0, 1], got 80"),
    ("true", "eval: target: must be a number, got true"),
    ("{accuracy: 8e-1x}", "eval.target: accuracy: input should be a valid number, unable to parse string as a number"),
])
def test_what_is_no_accuracy_is_one_line(written: str, says: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(_with_target(written))
    _, err = cli(capsys, ["validate", path], "numbers", expect=2)
    assert says in err, err


# -- interrupted -----------------------------------------------------------------------------------------------------


def _signalled(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, how: str) -> None:
    """Make ``module.name`` stop the command on its first call: SIGTERM sent to this process (the CLI's handler
    raises there, as for a ``kill``), or Ctrl-C."""
    real = getattr(module, name)

    def stop(*args: Any, **kwargs: Any) -> Any:
        if how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs at the next bytecode of the main thread
                pass
            raise AssertionError("SIGTERM was not raised")
        raise KeyboardInterrupt

    assert callable(real)
    monkeypatch.setattr(module, name, stop)


def _stopped(capsys: pytest.CaptureFixture[str], argv: list[Any], how: str) -> str:
    from simfl.cli import main

    with bounded(60):
        code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == (143 if how == "sigterm" else 130), (code, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_validate_interrupted_says_nothing_was_written(how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """It said "what finished is in the .partial folder (see its INCOMPLETE file)": validate writes none."""
    from simfl.schema import limits

    _signalled(monkeypatch, limits, "check_cells", how)
    said = "terminated by SIGTERM" if how == "sigterm" else "interrupted"
    assert _stopped(capsys, ["validate", _plain(tmp_path)], how) == f"simfl: {said}; no results were written"
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"]


def test_a_tune_stopped_before_its_folder_exists_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("optuna")
    from simfl.schema import limits

    raw = tiny_scenario(tune={"trials": 2, "params": {"train.lr": [0.01, 0.1]}})
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(raw))
    _signalled(monkeypatch, limits, "check", "sigterm")
    err = _stopped(capsys, ["tune", tmp_path / "t.yaml", "--out", tmp_path / "tuned", "--quiet"], "sigterm")
    assert err == "simfl: terminated by SIGTERM; no results were written" and not (tmp_path / "tuned").exists()


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_launch_stopped_with_its_folder_points_to_it(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Stopped in its first run: the run's staging folder, with its INCOMPLETE file, as before; the sweep's folder."""
    from simfl.launch import units

    _signalled(monkeypatch, units, "run_one", "sigterm")
    path, out = _plain(tmp_path), tmp_path / "o"
    extra = ["--set", "sweep={train.lr: [0.1]}"] if command == "sweep" else []
    err = _stopped(capsys, [command, path, "--out", out, "--quiet", "--workers", "1", *extra], "sigterm")
    if command == "run":
        assert err == "simfl: terminated by SIGTERM; what finished is in the .partial folder (see its INCOMPLETE file)"
        assert (tmp_path / "o.partial" / "INCOMPLETE").is_file()
    else:
        assert err == f"simfl: terminated by SIGTERM; what finished is in {out}: the same `simfl sweep` command continues"
        assert out.is_dir()
