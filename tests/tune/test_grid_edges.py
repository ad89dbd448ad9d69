"""Grid edge extension in ``simfl tune`` (``tune.extend``): the step beyond an edge by hand (geometric, arithmetic,
integers, none), the points a wider grid adds, the same rule for every entry on hand-built scores, the refusals, and
a tiny digits tune whose best learning rate lies at the top of its grid, carried two steps further alike with one
worker, two, and after a stop and a resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simfl.cli import main
from simfl.errors import InputError
from simfl.launch.tune import (
    BEST_FILE,
    TRIALS_FILE,
    Trial,
    estimate_line,
    extension,
    extension_bound,
    extension_notes,
    new_points,
    plan_of,
    step_beyond,
    tune,
)
from simfl.schema.scenario import load, validate
from simfl.schema.tuning import Space, grid_step, spacing
from tests.tune.test_halving import halving_scenario, rows

pytest.importorskip("optuna")


def grid(*values: Any) -> Space:
    return Space("categorical", tuple(values))


@pytest.mark.parametrize(("values", "kind", "below", "above"), [
    # mean ratio (0.1 / 0.01)^(1/2) = 3.162: 0.1 x 3.162 = 0.316, 0.1 x 3.162^2 = 1.0, 0.1 x 3.162^3 = 3.16, each
    # rounded to the fewest digits within a twentieth of a step in log terms (0.316 -> 0.3: |ln(0.3/0.316)| = 0.053
    # <= 0.058); below 0.01 / 3.162 = 0.00316 -> 0.003, 0.001, 0.000316 -> 0.0003
    ((0.01, 0.03, 0.1), "geometric", [0.003, 0.001, 0.0003], [0.3, 1.0, 3.0]),
    ((0.1, 0.01, 0.03), "geometric", [0.003, 0.001, 0.0003], [0.3, 1.0, 3.0]),  # the order written is no matter
    # ratio 2 exactly: 3.2 stays 3.2 (|ln(3/3.2)| = 0.065 is over a twentieth of ln 2, 0.035)
    ((0.2, 0.4, 0.8), "geometric", [0.1, 0.05, 0.025], [1.6, 3.2, 6.4]),
    # differences 0.2: 0.2 - 0.2 is 0, not the float 2.8e-17; above 1.0, 1.2 (whether alpha takes them is the entry's)
    ((0.2, 0.4, 0.6), "arithmetic", [0.0, -0.2, -0.4], [0.8, 1.0, 1.2]),
    ((16, 32, 64), "geometric", [8, 4, 2], [128, 256, 512]),  # integers stay integers
    ((5, 10, 15), "arithmetic", [0, -5, -10], [20, 25, 30]),
    ((0, 0.5, 1.0), "arithmetic", [-0.5, -1.0, -1.5], [1.5, 2.0, 2.5]),  # a grid holding 0 is arithmetic
])
def test_the_step_beyond_an_edge_follows_the_grids_spacing(values: tuple[Any, ...], kind: str, below: list[Any],
                                                           above: list[Any]) -> None:
    assert spacing(values) == kind
    space = grid(*values)
    assert [grid_step(space, "lowest", k)[0] for k in (1, 2, 3)] == below
    assert [grid_step(space, "highest", k)[0] for k in (1, 2, 3)] == above
    if all(isinstance(v, int) for v in values):
        assert all(isinstance(v, int) for v in below + above)


def test_no_step_where_the_grid_says_none() -> None:
    # 1, 2, 4 is geometric (ratio 2): 0.5 below is no integer, and 0 would end the ratio
    assert grid_step(grid(1, 2, 4), "lowest") == (None, "no integer below 1 continues its ratio without reaching 0")
    assert grid_step(grid(1, 2, 4), "highest") == (8, "")
    two, why = grid_step(grid(0.01, 0.1), "highest")
    assert two is None and "do not say how it is spaced: list three or more" in why
    # gaps 0.499 and 0.4 linear (1.25 apart: arithmetic); 10 ratios in log: spaced evenly enough, by differences
    assert spacing((0.001, 0.5, 0.9)) == "arithmetic"
    # gaps 1 and 98 (98x), ratios 2 and 50 (log gaps 0.69 and 3.9, 5.6x): neither
    assert spacing((1, 2, 100)) is None
    assert "spaced neither evenly nor by a constant ratio" in grid_step(grid(1, 2, 100), "highest")[1]
    assert grid_step(grid("sgd", "adam", "lion"), "highest") == (None, "its values are not a grid of numbers")
    assert grid_step(Space("float", low=0.1, high=0.5), "high")[0] is None  # a range is no grid


def _plan(**tune_changes: Any) -> Any:
    """fedasync searches 3 learning rates x 3 alphas (9 points), fedavg 3 learning rates; halving off."""
    section: dict[str, Any] = {"trials": 9, "batch": 9, "halving": False, "extend": {"limit": 2},
                               "params": {"train.lr": [0.01, 0.03, 0.1], "algorithms[fedasync].alpha": [0.2, 0.4, 0.6]}}
    section.update(tune_changes)
    return plan_of(validate(halving_scenario(**section)))


def test_a_step_the_entry_does_not_take_is_not_taken() -> None:
    plan = _plan(params={"train.lr": [0.1, 0.2, 0.3], "algorithms[fedasync].alpha": [0.4, 0.6, 0.8]})
    fedasync = plan.entries[0]
    # 0.8 + 0.2 = 1.0: alpha is a share in (0, 1); 0.1 - 0.1 = 0: a learning rate must be above 0
    assert step_beyond(plan, fedasync, "alpha", "highest", 1) == (
        None, "1.0 does not fit entry fedasync: alpha: must be in (0, 1), got 1")
    assert step_beyond(plan, fedasync, "train.lr", "lowest", 1) == (
        None, "0.0 does not fit entry fedasync: train.lr: must be in (0, inf), got 0")
    assert step_beyond(plan, fedasync, "train.lr", "highest", 2) == (0.5, "")


def test_the_wider_grid_adds_its_missing_points_in_product_order() -> None:
    before = {"lr": grid(0.01, 0.03, 0.1), "alpha": grid(0.2, 0.4)}
    after = {"lr": grid(0.01, 0.03, 0.1, 0.3), "alpha": grid(0.2, 0.4, 0.6)}
    # 4 x 3 = 12 points, 3 x 2 = 6 of them run: the 6 new ones, the product of the wider axes in order
    assert new_points(before, after) == [
        {"lr": 0.01, "alpha": 0.6}, {"lr": 0.03, "alpha": 0.6}, {"lr": 0.1, "alpha": 0.6},
        {"lr": 0.3, "alpha": 0.2}, {"lr": 0.3, "alpha": 0.4}, {"lr": 0.3, "alpha": 0.6}]


def _scored(plan: Any, best: dict[str, dict[str, Any]]) -> list[Trial]:
    """Every grid point of every entry as a trial run, the one given per entry scoring 0.9 and the rest 0.5."""
    import itertools

    trials = []
    for entry in plan.entries:
        keys = list(entry.spaces)
        for number, combo in enumerate(itertools.product(*(entry.spaces[k].choices for k in keys))):
            params = dict(zip(keys, combo, strict=True))
            trials.append(Trial(entry, number, params, scores=[0.9 if params == best[entry.name] else 0.5]))
    return trials


def test_the_same_rule_for_every_entry_on_hand_built_scores(tmp_path: Path) -> None:
    plan = _plan()
    # fedasync's best at the top learning rate and the top alpha: both axes one step wider, lr 0.3 (ratio 3.162,
    # rounded) and alpha 0.8 (difference 0.2); its grid 4 x 4 = 16 points, 9 run: 7 more, numbered 9 to 15. fedavg's
    # best is inside its grid (0.03 of 0.01, 0.03, 0.1): nothing more
    found = extension(plan, tmp_path, _scored(plan, {"fedasync": {"train.lr": 0.1, "alpha": 0.6},
                                                     "fedavg": {"train.lr": 0.03}}))
    assert [(s.entry, s.key, s.edge, s.value) for s in found.steps] == [
        ("fedasync", "train.lr", "highest", 0.3), ("fedasync", "alpha", "highest", 0.8)]
    assert [(t.entry.name, t.number, t.extension) for t in found.pending] == [("fedasync", n, 1) for n in range(9, 16)]
    assert [t.values() for t in found.pending][:2] == [{"train.lr": 0.01, "alpha": 0.8},
                                                       {"train.lr": 0.03, "alpha": 0.8}]
    assert found.trials == []  # none of the round has run
    assert found.entries["fedavg"] == plan.entries[1]
    assert extension_notes(plan, found) == [
        "fedasync: train.lr added 0.3 (round 1); alpha added 0.8 (round 1) (7 more trials)",
        "fedavg: nothing, its best is inside its grid"]
    # the same case with fedavg's best at the bottom: its axis one step down too, in the same round (0.003)
    found = extension(plan, tmp_path, _scored(plan, {"fedasync": {"train.lr": 0.1, "alpha": 0.6},
                                                     "fedavg": {"train.lr": 0.01}}))
    assert [(t.entry.name, t.values()) for t in found.pending if t.entry.name == "fedavg"] == [
        ("fedavg", {"train.lr": 0.003})]
    # before every grid point has run, no round begins
    assert extension(plan, tmp_path, _scored(plan, {"fedasync": {}, "fedavg": {}})[:-1]).steps == []
    # the most a limit of 2 can add: fedasync (3 + 2) x (3 + 2) - 9 = 16, fedavg 5 - 3 = 2
    assert extension_bound(plan) == 18
    assert "tune.extend adds up to 18 trials where a best is at an edge of its grid" in estimate_line(plan, None)


def test_extend_is_refused_where_an_edge_says_little(write_scenario, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match=r"tune\.extend: needs every entry's whole grid searched: entry fedasync runs "
                       r"4 of its grid's 9 points; raise tune\.trials to 9"):
        _plan(trials=4)
    with pytest.raises(InputError, match=r"tune\.extend: extends a grid, and sampler tpe does not search one"):
        _plan(sampler="tpe", batch=4, params={"train.lr": {"log": [0.001, 0.3]}})
    # simfl validate says the same in one line, exit 2
    assert main(["validate", str(write_scenario(halving_scenario(extend={"limit": 0})))]) == 2
    assert "tune.extend.limit: input should be greater than or equal to 1, got 0" in capsys.readouterr().err
    raw = halving_scenario(trials=4, extend={"limit": 1})
    assert main(["validate", str(write_scenario(raw))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "entry fedasync runs 4 of its grid's 6 points; raise tune.trials to 6" in err


EXTENDED = {"trials": 3, "batch": 3, "params": {"train.lr": [0.001, 0.003, 0.01]}, "extend": {"limit": 2}}
"""Learning rates too small for 90 s of digits: each entry's best is the top one, 0.01, and the next steps up,
0.03 and 0.1 (mean ratio 3.162, rounded), learn better still; halving on (rungs 10, 30, 90 s)."""


def _tune(tmp_path: Path, out: str, workers: int = 1, **kw: Any) -> Path:
    return tune(halving_scenario(**EXTENDED), tmp_path / out, workers=workers, quiet=True, base=tmp_path, **kw).out


@pytest.fixture(scope="module")
def extended(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny extended tune, one worker, without a stop."""
    return _tune(tmp_path_factory.mktemp("extended"), "one")


def test_a_best_at_the_top_of_its_grid_is_carried_two_steps_further(extended: Path) -> None:
    table = rows(extended / TRIALS_FILE)
    for entry in ("fedasync", "fedavg"):
        mine = [r for r in table if r["entry"] == entry]
        # the grid's 3 trials, halved at 10, 30, 90 s, then one trial per round, each straight to the budget (a
        # bracket of one, under eta 3: halving would prune none of it)
        assert [(r["trial"], r["extension"], float(r["train.lr"])) for r in mine[3:]] == [("3", "1", 0.03),
                                                                                          ("4", "2", 0.1)]
        assert [r["extension"] for r in mine[:3]] == ["0"] * 3
        assert [(r["state"], r["rung"], r["virtual_seconds"]) for r in mine[3:]] == [("scored", "90.0", "90.0")] * 2
        assert sorted(float(r["train.lr"]) for r in mine[:3] if r["state"] == "scored") == [0.01]
        scores = {float(r["train.lr"]): float(r["score"]) for r in mine if r["state"] == "scored"}
        assert scores[0.1] > scores[0.03] > scores[0.01]  # each step up learned more: the grid stopped short
    best = load(extended / BEST_FILE)
    assert [a.train.lr for a in best.algorithms] == [0.1, 0.1]
    header = (extended / BEST_FILE).read_text().splitlines()
    assert "# Extended (tune.extend, limit 2): fedavg: train.lr added 0.03 (round 1), 0.1 (round 2) (2 more trials)." \
        in header
    assert any(line.startswith("#   fedasync: trial 4 (best of 5: 3 of its grid, 2 of its extension), train.lr=0.1")
               for line in header)
    # still at the top after two rounds: the edge line says so, and why the grid went no further
    assert ("# At an edge: fedasync: train.lr=0.1 is the highest of its grid; a wider search may score higher "
            "(train.lr: tune.extend.limit 2 reached).") in header


def test_two_workers_give_the_extended_table_of_one(extended: Path, tmp_path: Path) -> None:
    two = _tune(tmp_path, "two", workers=2)
    assert (two / TRIALS_FILE).read_bytes() == (extended / TRIALS_FILE).read_bytes()
    assert (two / BEST_FILE).read_bytes() == (extended / BEST_FILE).read_bytes()


@pytest.mark.parametrize("stop_at", [4, 5])
def test_a_tune_stopped_in_its_extension_resumes_to_the_same_trials(stop_at: int, extended: Path,
                                                                    tmp_path: Path) -> None:
    lines: list[str] = []

    def stop(line: str) -> None:  # Ctrl-C as the first (4) or second (5) extension round is about to run
        lines.append(line)
        if len([x for x in lines if x.startswith("tune:")]) == stop_at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _tune(tmp_path, "cut", log=stop)
    assert lines[-1].startswith(f"tune: 2 trials (fedasync trial {stop_at - 1}, fedavg trial {stop_at - 1})")
    assert main(["tune", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    assert (tmp_path / "cut" / TRIALS_FILE).read_bytes() == (extended / TRIALS_FILE).read_bytes()
    assert (tmp_path / "cut" / BEST_FILE).read_bytes() == (extended / BEST_FILE).read_bytes()
