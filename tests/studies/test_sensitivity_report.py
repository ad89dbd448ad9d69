"""``simfl report --by KEY``: runs grouped by one setting across folders (the paper's Figure 8), hand-computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simfl.cli import main
from simfl.output.sensitivity import Setting, cell_tables, load_cells
from tests.studies.test_report import fake_run

UP = [(0, 0.1), (10, 0.9), (20, 0.9)]
SLOW = [(0, 0.1), (10, 0.5), (20, 0.7)]


def study(folder: Path, name: str, entries: list[dict[str, Any]], curves: dict[tuple[str, int], list[Any]],
          epochs: int = 5, lr: float = 0.01) -> Path:
    """A fake result folder whose scenario.yaml holds ``entries`` and the training settings."""
    fake_run(folder, name, curves)
    (folder / "scenario.yaml").write_text(yaml.safe_dump(
        {"name": name, "train": {"epochs": epochs, "lr": lr}, "budget": {"time": 20.0}, "algorithms": entries}))
    return folder


def beta_runs(root: Path, lr: float = 0.01) -> list[Path]:
    """OrthoFL at beta 0.2 (its own study) and the main table's chain entry at 0.6 beside FedAvg."""
    return [
        study(root / "b02", "sensitivity-beta", [{"name": "orthofl", "beta": 0.2}],
              {("orthofl", 0): [(0, 0.1), (10, 0.8), (20, 0.9)]}, lr=lr),
        study(root / "main", "paper", [{"name": "orthofl", "label": "orthofl_chain", "beta": 0.6},
                                       {"name": "fedavg", "clients_per_round": 10}],
              {("orthofl_chain", 0): [(0, 0.1), (10, 0.9), (20, 0.95)], ("fedavg", 0): SLOW}),
    ]


def test_an_entry_option_groups_runs_and_entries_without_it_join_every_cell(tmp_path: Path) -> None:
    # beta 0.2: OrthoFL 0.9, FedAvg 0.7 (shared); target 0.95 * 0.7 = 0.665, FedAvg reaches it at 20 s, OrthoFL at
    # 10 s: 0.50x. beta 0.6: OrthoFL 0.95 (the renamed chain entry), reaches it at 10 s: 0.50x.
    setting = Setting("beta", {"orthofl_chain": "orthofl"})
    cells, setting = load_cells(beta_runs(tmp_path), setting)
    assert [c.name for c in cells] == ["beta=0.2", "beta=0.6"]
    tables = cell_tables(cells, setting, "fedavg")
    for table, accuracy in zip(tables, [0.9, 0.95], strict=True):
        assert table["algorithm"].tolist() == ["fedavg", "orthofl"]
        assert table["accuracy_mean"].tolist() == pytest.approx([0.7, accuracy])
        assert table["target"].tolist() == pytest.approx([0.665, 0.665])
        assert table["relative_time"].tolist() == pytest.approx([1.0, 0.5])


def test_target_from_one_cell_for_every_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # E = 5: FedAvg 0.8 (reaches 0.95 * 0.8 = 0.76 at 20 s), OrthoFL 0.9 at 10 s. E = 1: FedAvg 0.6 never reaches
    # 0.76; OrthoFL reaches it at 20 s: 20 / 20 (FedAvg at E = 5) = 1.00x. E = 10: OrthoFL at 10 s, FedAvg at 20 s.
    fast, base = [(0, 0.1), (10, 0.9), (20, 0.9)], [(0, 0.1), (10, 0.5), (20, 0.8)]
    entries = [{"name": "orthofl", "beta": 0.6}, {"name": "fedavg", "clients_per_round": 10}]
    runs = tmp_path / "runs"
    study(runs / "e5", "main", entries, {("orthofl", 0): fast, ("fedavg", 0): base}, epochs=5)
    study(runs / "e1", "epochs", entries, {("orthofl", 0): [(0, 0.1), (10, 0.5), (20, 0.8)],
                                           ("fedavg", 0): [(0, 0.1), (10, 0.5), (20, 0.6)]}, epochs=1)
    study(runs / "e10", "epochs", entries, {("orthofl", 0): fast, ("fedavg", 0): base}, epochs=10)
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--by", "train.epochs", "--target-from", "5", "--out", str(out)]) == 0
    md = (out / "table.md").read_text().splitlines()
    assert md[0] == ("| Method | train.epochs=1 Accuracy | train.epochs=1 Time | train.epochs=5 Accuracy | "
                     "train.epochs=5 Time | train.epochs=10 Accuracy | train.epochs=10 Time |")
    assert md[2] == "| FedAvg | 60.0±0.0 | n/r | 80.0±0.0 | 1× | 80.0±0.0 | 1× |"
    assert md[3] == "| OrthoFL | **80.0±0.0** | **1.00×** | **90.0±0.0** | **0.50×** | **90.0±0.0** | **0.50×** |"
    assert "at train.epochs=5, for every setting" in md[5]
    assert pd.read_csv(out / "table.csv")["target"].tolist() == pytest.approx([0.76] * 6)
    assert (out / "sensitivity.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["report", str(runs), "--by", "train.epochs", "--out", str(out), "--force"]) == 0
    md = (out / "table.md").read_text().splitlines()  # each cell's own target: E = 1's is 0.95 * 0.6 = 0.57,
    assert md[2].startswith("| FedAvg | 60.0±0.0 | **1×** |")  # which both reach at 20 s
    assert md[3].startswith("| OrthoFL | **80.0±0.0** | **1.00×** | **90.0±0.0** | **0.50×** |")


DIFFERS = {"its settings differ"}
"""The refusals that need a third folder whose settings differ (train.lr) beside the two of :func:`beta_runs`."""


@pytest.mark.parametrize(("argv", "words"), [
    (["--by", "beta"], "its settings differ"),
    (["--by", "beta", "--as", "orthofl_chain=orthofl"], "its settings differ"),
    (["--by", "momentum"], "no run's entry sets momentum"),
    (["--by", "train.momentum"], "no run's scenario sets train.momentum"),
    (["--by", "a..b"], "is not a scenario path"),
    (["--by", "beta", "--target-from", "0.4"], "is not a value of beta here (0.2, 0.6)"),
    (["--by", "beta", "--as", "orthofl_chain"], "is not OLD=NEW"),
    (["--by", "beta", "--as", "a=b/c"], "single folder name"),
    (["--as", "a=b"], "applies only with --by"),
    (["--target-from", "5"], "applies only with --by"),
    (["--by", "beta", "--apart"], "does not apply with --by"),
])
def test_bad_sensitivity_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                            words: str) -> None:
    runs = tmp_path / "runs"
    beta_runs(runs)
    if words in DIFFERS:
        study(runs / "other", "paper", [{"name": "fedavg", "clients_per_round": 10}], {("fedavg", 1): SLOW},
              lr=0.1)
    assert main(["report", str(runs), "--out", str(tmp_path / "rep"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert not (tmp_path / "rep").exists()


def latency_runs(root: Path) -> list[Path]:
    """Three folders of OrthoFL and FedAsync (no FedAvg) that differ only in their latency section."""
    entries = [{"name": "orthofl", "beta": 0.6}, {"name": "fedasync", "alpha": 0.6}]
    curves = {("orthofl", 0): UP, ("fedasync", 0): SLOW}
    folders = []
    for name, latency in (("a", {"model": "constant", "seconds": [1, 2]}), ("b", {"model": "constant", "seconds": [1, 5]}),
                          ("c", {"model": "uniform", "low": 1, "high": 2})):
        folder = study(root / name, "lat", entries, curves)
        scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
        (folder / "scenario.yaml").write_text(yaml.safe_dump({**scenario, "latency": latency}))
        folders.append(folder)
    return folders


def test_a_list_value_and_a_whole_section_group_runs(tmp_path: Path) -> None:
    # orthofl reaches 0.95 * 0.7 = 0.665 at 10 s, fedasync at 20 s; without FedAvg the baseline is the first entry in
    # the order the folders list them (as their own comparison.csv has it), OrthoFL: FedAsync 2.00x in every cell
    a, b, c = latency_runs(tmp_path)
    out = tmp_path / "rep"
    assert main(["report", str(a), str(b), "--by", "latency.seconds", "--out", str(out)]) == 0
    md = (out / "table.md").read_text().splitlines()
    assert md[0].startswith("| Method | latency.seconds=[1, 2] Accuracy | latency.seconds=[1, 2] Time | "
                            "latency.seconds=[1, 5] Accuracy |")
    assert md[2:4] == ["| FedAsync | 70.0±0.0 | 2.00× | 70.0±0.0 | 2.00× |",
                       "| OrthoFL | **90.0±0.0** | **1×** | **90.0±0.0** | **1×** |"]
    assert pd.read_csv(out / "comparison.csv")["latency.seconds"].tolist() == ["[1, 2]", "[1, 2]", "[1, 5]", "[1, 5]"]
    assert main(["report", str(tmp_path), "--by", "latency", "--out", str(out), "--force"]) == 0
    md = (out / "table.md").read_text().splitlines()
    assert md[0].count("Accuracy") == 3 and "latency={high: 2, low: 1, model: uniform} Time" in md[0]
    assert md[3] == "| OrthoFL | **90.0±0.0** | **1×** | **90.0±0.0** | **1×** | **90.0±0.0** | **1×** |"


def test_time_bars_without_fedavg_are_drawn(tmp_path: Path) -> None:
    from simfl.output.sensitivity import sensitivity_figure

    setting = Setting("latency.seconds", {})
    cells, setting = load_cells(latency_runs(tmp_path)[:2], setting)
    fig = sensitivity_figure(cell_tables(cells, setting), setting)
    bottom = fig.axes[1]
    assert sorted(round(p.get_height(), 6) for p in bottom.patches) == [1.0, 1.0, 2.0, 2.0]
    assert not [t for t in bottom.texts if t.get_text() in ("n/r", "n/a")]
    assert bottom.get_ylabel() == "time to target / OrthoFL"


@pytest.mark.parametrize("by", [None, "beta"])
def test_a_foreign_yaml_tag_is_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         by: str | None) -> None:
    folder, _ = beta_runs(tmp_path / "runs")
    (folder / "scenario.yaml").write_text("name: !!python/object/apply:os.getcwd []\nalgorithms: []\n")
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "rep"), *(["--by", by] if by else [])]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"simfl: {folder / 'scenario.yaml'}: malformed YAML at line 1, column 7: could not determine a "
                   "constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.getcwd'")
    assert not (tmp_path / "rep").exists()
