"""The comparison of a result folder, hand-computed: intervals over seeds, paired time ratios, bounds, the verdict."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from simfl.algorithms.base import AlgorithmConfig
from simfl.algorithms.fedavg import FedAvg
from simfl.cli import main
from simfl.output.comparison import compare

RUNS = Path(__file__).resolve().parent / "verdict_runs"
"""Three entries x three seeds, every 10 s to 60 s (see its scenario.yaml); FedAsync misses the target in seed 1."""

T = 4.302652729911275
"""Student's t quantile 0.975 with 2 degrees of freedom (three seeds)."""


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean ± t s / sqrt(n), written out."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, mean - T * sd / math.sqrt(n), mean + T * sd / math.sqrt(n)


def geometric(ratios: list[float]) -> tuple[float, float, float]:
    mean, low, high = interval([math.log(r) for r in ratios])
    return math.exp(mean), math.exp(low), math.exp(high)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("verdict") / "report"
    assert main(["report", str(RUNS), "--out", str(out)]) == 0
    return out


def test_intervals_and_ratios_by_hand(report: Path) -> None:
    table = pd.read_csv(report / "comparison.csv").set_index("entry")
    assert list(table.index) == ["fedavg", "fedasync", "orthofl"]  # the report's row order: FedAvg first
    # final accuracy at 60 s: fedavg .70 .68 .66, fedasync .70 .64 .69, orthofl .84 .80 .79; the lowest mean is
    # FedAsync's 0.67667, so the target is 0.95 * 0.67667 = 0.642833 (the paper's rule)
    target = 0.95 * (0.70 + 0.64 + 0.69) / 3
    assert table["target"].tolist() == pytest.approx([target] * 3)
    assert table["horizon"].tolist() == [60.0] * 3
    for entry, finals in {"fedavg": [.70, .68, .66], "fedasync": [.70, .64, .69], "orthofl": [.84, .80, .79]}.items():
        mean, low, high = interval(finals)
        assert table.loc[entry, ["final_accuracy", "final_accuracy_low", "final_accuracy_high"]].tolist() == \
            pytest.approx([mean, max(low, 0.0), min(high, 1.0)])
    # first evaluation at or above the target: fedavg 30, 40, 50 s; orthofl 20, 30, 40 s; fedasync 30 s, never (its
    # time at least the 60 s it ran: a lower bound), 40 s
    assert table["reached"].to_dict() == {"fedavg": 3, "fedasync": 2, "orthofl": 3}
    for entry, times in {"fedavg": [30, 40, 50], "orthofl": [20, 30, 40], "fedasync": [30, 60, 40]}.items():
        mean, low, high = interval(times)
        assert table.loc[entry, ["time_to_target", "time_to_target_low", "time_to_target_high"]].tolist() == \
            pytest.approx([mean, max(low, 0.0), high])
    assert table["time_bound"].fillna("").to_dict() == {"fedavg": "", "fedasync": "lower", "orthofl": ""}
    # the baseline is the first synchronous entry, fedavg; ratios paired by seed, geometric mean, t on the logs
    assert set(table["baseline"]) == {"fedavg"}
    ratio, low, high = geometric([20 / 30, 30 / 40, 40 / 50])
    assert table.loc["orthofl", ["ratio", "ratio_low", "ratio_high"]].tolist() == pytest.approx([ratio, low, high])
    assert (round(ratio, 4), round(low, 4), round(high, 4)) == (0.7368, 0.5856, 0.927)
    # fedasync's seed 1 is at least 60 / 40: its ratio is a lower bound
    ratio, low, high = geometric([30 / 30, 60 / 40, 40 / 50])
    assert table.loc["fedasync", ["ratio", "ratio_low", "ratio_high"]].tolist() == pytest.approx([ratio, low, high])
    assert table["ratio_bound"].fillna("").to_dict() == {"fedavg": "", "fedasync": "lower", "orthofl": ""}
    assert table.loc["fedavg", ["ratio", "ratio_low", "ratio_high"]].tolist() == [1.0, 1.0, 1.0]
    assert table["fastest"].to_dict() == {"fedavg": False, "fedasync": False, "orthofl": True}
    assert table["most_accurate"].to_dict() == {"fedavg": False, "fedasync": False, "orthofl": True}
    # each lead is against the runner-up, paired by seed: on time fedavg (1x, ahead of fedasync's >= 1.06x), so the
    # lead is orthofl's ratio itself; on accuracy fedavg's .70 .68 .66, differences .14 .12 .13
    assert table.loc["orthofl", ["fastest_over", "most_accurate_over"]].tolist() == ["fedavg", "fedavg"]
    assert table.loc["orthofl", ["fastest_by", "fastest_by_low", "fastest_by_high"]].tolist() == \
        pytest.approx(table.loc["orthofl", ["ratio", "ratio_low", "ratio_high"]].tolist())
    assert table.loc["orthofl", ["most_accurate_by", "most_accurate_by_low", "most_accurate_by_high"]].tolist() == \
        pytest.approx(interval([.14, .12, .13]))
    assert table["fastest_clear"].to_dict() == table["fastest"].to_dict()
    assert table["most_accurate_clear"].to_dict() == table["most_accurate"].to_dict()
    assert table["time_step"].tolist() == [10.0] * 3
    md = (report / "comparison.md").read_text()
    assert ("**orthofl reaches 64.3% in 0.74x fedavg's time [0.59, 0.93] (3 of 3 seeds reach it); it also ends most "
            "accurate, 81.0% [74.4, 87.6], +13.0 points [+10.5, +15.5] above fedavg**") in md
    assert "| fedasync | 67.7 [59.7, 75.7] | 67.7 [59.7, 75.7] | >= 43 s [5, 81] | >= 1.06x [0.48, 2.35] | 2/3 |" in md
    assert "Warning" not in md


def test_a_chosen_baseline_that_misses_the_target_gives_upper_bounds(tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["report", str(RUNS), "--baseline", "fedasync", "--out", str(out)]) == 0
    table = pd.read_csv(out / "comparison.csv").set_index("entry")
    # FedAsync misses the target in seed 1: every other entry's seed-1 ratio is at most its time over 60 s
    ratio, low, high = geometric([20 / 30, 30 / 60, 40 / 40])
    assert table.loc["orthofl", ["ratio", "ratio_low", "ratio_high"]].tolist() == pytest.approx([ratio, low, high])
    assert table["ratio_bound"].fillna("").to_dict() == {"fedavg": "upper", "fedasync": "", "orthofl": "upper"}
    assert table.loc["fedasync", ["ratio", "paired_seeds"]].tolist() == [1.0, 2]  # seed 1 tells nothing of itself
    assert "orthofl reaches 64.3% in at most 0.69x fedasync's time" in (out / "comparison.md").read_text()
    assert "| FedAsync | 67.7±2.6 | 1× (2/3) |" in (out / "table.md").read_text()


def test_a_baseline_of_no_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(RUNS), "--baseline", "fedprox", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "simfl: --baseline: 'fedprox' is a method of no folder here; they are fedavg, fedasync, orthofl"


def frame(points: list[tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame({"virtual_time": [t for t, _ in points], "accuracy": [a for _, a in points]})


def test_misses_on_both_sides_give_no_ratio_and_one_seed_no_interval() -> None:
    up, slow = [(0, 0.1), (10, 0.9), (20, 0.9)], [(0, 0.1), (10, 0.2), (20, 0.3)]
    runs = {("a", 0): frame(up), ("a", 1): frame(slow), ("b", 0): frame(slow), ("b", 1): frame(up)}
    c = compare(runs, (), 0.5, "b")
    row = c.row("a")
    assert row["ratio_bound"] == "mixed" and math.isnan(row["ratio"]) and row["paired_seeds"] == 2
    one = compare({k: v for k, v in runs.items() if k[1] == 0}, (), 0.5, "b")
    row = one.row("a")
    assert row["ratio"] == pytest.approx(10 / 20) and row["ratio_bound"] == "upper"
    assert math.isnan(row["ratio_low"]) and math.isnan(row["final_accuracy_low"])
    assert "1 paired seed, so no interval" in one.verdict and "One seed: no intervals." in one.text()


def test_early_targets_are_warned_of() -> None:
    runs = {("a", 0): frame([(0, 0.3), (10, 0.6), (20, 0.9)]), ("b", 0): frame([(0, 0.3), (10, 0.4), (20, 0.8)])}
    low_target = compare(runs, (), 0.2)
    (low,) = low_target.warnings
    assert low_target.verdict.startswith("no verdict on time: the target 20.0% is at or below an untrained model's")
    assert low.startswith("the target 20.0% is at or below an untrained model's accuracy (up to 30.0% at time 0)")
    (early,) = compare(runs, (), 0.5).warnings
    assert early.startswith("the target 50.0% is reached at the first evaluation after the start (10 s) by a (1 of 1 "
                            "seeds)")
    assert compare(runs, (), 0.7).warnings == []


ENTRIES = [{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}]


def test_a_run_prints_its_comparison_with_the_baseline_asked_for(write_scenario, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import tiny_scenario

    path = write_scenario(tiny_scenario(seeds=[0, 1], algorithms=ENTRIES))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--baseline", "fedasync"]) == 0
    printed = capsys.readouterr().out
    assert "baseline: fedasync (chosen)" in printed and "\nverdict: " in printed
    table = pd.read_csv(out / "comparison.csv")
    assert table["entry"].tolist() == ["fedasync", "fedavg"] and set(table["baseline"]) == {"fedasync"}
    summary = pd.read_csv(out / "summary.csv")
    target = float(table["target"].iloc[0])
    finals = summary.groupby("algorithm", sort=False)["final_accuracy"].mean()
    assert target == pytest.approx(0.95 * finals.min())  # read at 8 s, where every run ends
    times = {}
    for row in summary.to_dict("records"):
        metrics = pd.read_csv(out / row["algorithm"] / f"seed{row['seed']}" / "metrics.csv")
        hit = metrics.loc[metrics["accuracy"] >= target, "virtual_time"]
        assert row["time_to_target"] == pytest.approx(hit.iloc[0]) if len(hit) else math.isnan(row["time_to_target"])
        times[(row["algorithm"], row["seed"])] = float(hit.iloc[0]) if len(hit) else 8.0
    fedavg = table.set_index("entry").loc["fedavg"]
    assert fedavg["reached"] == 1 and fedavg["ratio_bound"] == "lower"  # FedAvg's seed 0 misses the target
    pairs = [times[("fedavg", s)] / times[("fedasync", s)] for s in (0, 1)]
    assert fedavg["ratio"] == pytest.approx(math.exp(sum(map(math.log, pairs)) / 2))
    assert (out / "comparison.md").read_text().splitlines()[2].strip("*") in printed
    assert "baseline: fedasync" in (out / "scenario.yaml").read_text()


def test_a_target_below_the_untrained_model_is_warned_of(write_scenario, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import tiny_scenario

    path = write_scenario(tiny_scenario(algorithms=ENTRIES, budget={"time": 4.0}))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet", "--set", "eval.target=0.05"]) == 0
    printed = capsys.readouterr().out
    assert "\nwarning: the target 5.0% is at or below an untrained model's accuracy" in printed
    assert "\nverdict: no verdict on time: the target 5.0% is at or below an untrained model's accuracy;" in printed
    assert "Warning: the target 5.0% is at or below" in (tmp_path / "o" / "comparison.md").read_text()
    assert main(["run", str(path), "--out", str(tmp_path / "p"), "--quiet", "--baseline", "fedprox"]) == 2
    assert capsys.readouterr().err.strip() == (f"simfl: {path}: (top level): eval.baseline 'fedprox' names no entry; "
                                               "the entries are fedasync, fedavg")
    assert not (tmp_path / "p").exists() and not (tmp_path / "p.partial").exists()


def test_an_entrys_kind_is_its_classs() -> None:
    """The default baseline reads ``synchronous`` from an entry's config: the built-ins state it as their class is, and
    a plugin's config gets it from its class."""
    from simfl.algorithms import ALGORITHMS
    from simfl.algorithms.base import SyncAlgorithm
    from simfl.names import allowing_imports
    from simfl.schema import scenario as scenario_mod
    from tests.conftest import tiny_scenario

    for name, cls in ALGORITHMS.items():
        assert cls.Config.synchronous == issubclass(cls, SyncAlgorithm), name
    raw = tiny_scenario(algorithms=[{"name": "fedasync"}, {"name": f"{__name__}:Rounds", "clients_per_round": 2}])
    with allowing_imports(True):
        scn = scenario_mod.validate(raw)
    assert [a.synchronous for a in scn.algorithms] == [False, True]


class RoundsConfig(AlgorithmConfig):
    """A synchronous plugin whose config says nothing of its kind."""

    clients_per_round: int = 2


class Rounds(FedAvg):
    Config = RoundsConfig  # type: ignore[assignment]


@pytest.mark.parametrize(("target", "expected"), [
    (0.8, "0.8"),
    ({"accuracy": 0.8}, "accuracy"),
    ({"relative": 0.9, "of": "baseline"}, "relative"),
    (1.5, "eval.target: an accuracy must be in (0, 1], got 1.5"),
    ({"relative": 0.9, "accuracy": 0.5}, "eval.target: set one of accuracy (the target itself) or relative"),
    ({"accuracy": 0.5, "of": "lowest"}, "eval.target: of applies only with relative"),
    ({"relative": 0.9, "of": "best"}, "eval.target: of: input should be 'lowest' or 'baseline'"),
    ({"relative": 0}, "eval.target: relative: must be in (0, 1], got 0"),
    ("high", "eval.target: must be an accuracy (0.8), {accuracy: 0.8} or {relative: 0.95, of: lowest|baseline}"),
])
def test_a_target_is_an_accuracy_or_a_fraction_and_each_mistake_one_line(target: object, expected: str) -> None:
    from simfl.errors import InputError
    from simfl.schema import scenario as scenario_mod
    from tests.conftest import tiny_scenario

    raw = tiny_scenario(eval={"every": 2.0, "target": target})
    if expected in ("0.8", "accuracy", "relative"):  # an old file's number stays valid
        found = scenario_mod.validate(raw).eval.target
        assert found == 0.8 if expected == "0.8" else getattr(found, expected) in (0.8, 0.9)
        return
    with pytest.raises(InputError) as caught:
        scenario_mod.validate(raw)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_target_relative_to_the_baseline() -> None:
    from simfl.output.target import TargetConfig

    runs = {("a", 0): frame([(0, 0.1), (10, 0.5), (20, 0.9)]), ("b", 0): frame([(0, 0.1), (10, 0.3), (20, 0.6)])}
    c = compare(runs, (), TargetConfig(relative=0.5, of="baseline"), "b")
    assert c.target == pytest.approx(0.3) and c.target_rule == "50% of the baseline's mean final accuracy (b: 60.0%)"
    assert c.row("a")["time_to_target"] == 10.0 and c.row("b")["time_to_target"] == 10.0
