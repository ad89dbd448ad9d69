"""simfl report: the committed example tables rebuild exactly; a hand-computed Table 2; bad input."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from simfl.cli import main
from simfl.output.report import group_table, load_groups

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


def committed_reports() -> dict[str, list[str]]:
    """Report folder -> its `simfl report` arguments, read from the report step of results/reproduce.sh."""
    reports = {}
    for line in (RESULTS / "reproduce.sh").read_text().splitlines():
        if line.strip().startswith("$SIMFL report "):
            args = shlex.split(line)[2:]
            reports[Path(args[args.index("--out") + 1]).name] = args
    return reports


COMMITTED_REPORTS = committed_reports()


def test_every_committed_report_is_rebuilt_by_reproduce_sh() -> None:
    assert set(COMMITTED_REPORTS) == {p.name for p in RESULTS.glob("report*") if p.is_dir()}


@pytest.mark.parametrize("report", sorted(COMMITTED_REPORTS))
def test_report_rebuilds_the_committed_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: str) -> None:
    out = tmp_path / "report"
    args = list(COMMITTED_REPORTS[report])
    args[args.index("--out") + 1] = str(out)
    monkeypatch.chdir(ROOT)  # the script's paths are relative to the repository root
    assert main(["report", *args]) == 0
    for name in ("table.md", "table.tex", "table.csv"):
        assert (out / name).read_text() == (RESULTS / report / name).read_text(), name
    assert (out / "accuracy.png").read_bytes()[:4] == b"\x89PNG"


def fake_run(folder: Path, name: str, curves: dict[tuple[str, int], list[tuple[float, float]]]) -> Path:
    """A result folder with scenario.yaml, summary.csv and one metrics.csv per (algorithm, seed)."""
    folder.mkdir(parents=True)
    (folder / "scenario.yaml").write_text(yaml.safe_dump({"name": name}))
    rows = []
    for (algo, seed), points in curves.items():
        run = folder / algo / f"seed{seed}"
        run.mkdir(parents=True)
        pd.DataFrame({"virtual_time": [t for t, _ in points], "updates": range(len(points)),
                      "accuracy": [a for _, a in points], "loss": 0.0}).to_csv(run / "metrics.csv", index=False)
        rows.append({"algorithm": algo, "seed": seed, "final_accuracy": points[-1][1]})
    pd.DataFrame(rows).to_csv(folder / "summary.csv", index=False)
    return folder


CURVES = {
    ("orthofl", 0): [(0, 0.1), (10, 0.7), (20, 0.9)],
    ("orthofl", 1): [(0, 0.1), (10, 0.9), (20, 0.9), (30, 0.2)],  # ran longer: read at the common 20 s
    ("fedavg", 0): [(0, 0.1), (10, 0.5), (20, 0.6)],
    ("fedavg", 1): [(0, 0.1), (10, 0.4), (20, 0.8)],
}


def test_hand_computed_table(tmp_path: Path) -> None:
    # at 20 s: FedAvg 0.6, 0.8 -> 70.0 ± 10.0; OrthoFL 0.9, 0.9 -> 90.0 ± 0.0; target 0.95 * 0.7 = 0.665
    # FedAvg reaches it only in seed 1 at 20 s; OrthoFL at 10 s in both seeds; paired by seed (the comparison's ratio)
    # 10 / 20 in seed 1 and 10 / at least 20 (FedAvg's end) in seed 0 -> at most 0.50x
    fake_run(tmp_path / "runs" / "a", "toy", CURVES)
    (table,) = [group_table(g) for g in load_groups([tmp_path / "runs" / "a"])]
    assert table["algorithm"].tolist() == ["fedavg", "orthofl"]  # the paper's row order
    assert table["target"].iloc[0] == pytest.approx(0.665) and table["budget_time"].iloc[0] == 20
    assert table["accuracy_mean"].tolist() == pytest.approx([0.7, 0.9])
    assert table["accuracy_std"].tolist() == pytest.approx([0.1, 0.0])
    assert table["reached"].tolist() == [1, 2] and table["relative_time"].tolist() == pytest.approx([1.0, 0.5])
    assert table["relative_bound"].tolist() == ["", "upper"]

    out = tmp_path / "rep"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out)]) == 0
    md = (out / "table.md").read_text().splitlines()
    assert md[0] == "| Method | toy Accuracy | toy Time |"
    assert md[2] == "| FedAvg | 70.0±10.0 | 1× (1/2) |"
    assert md[3] == "| OrthoFL | **90.0±0.0** | **≤0.50×** |"
    tex = (out / "table.tex").read_text()
    assert r"OrthoFL & \textbf{90.0$\pm$0.0} & \textbf{$\leq$0.50$\times$} \\" in tex
    csv = pd.read_csv(out / "table.csv")
    assert csv["time_to_target"].tolist() == [20.0, 10.0]


def test_seeds_from_several_folders_are_pooled_and_other_baselines(tmp_path: Path) -> None:
    fake_run(tmp_path / "s0", "toy", {k: v for k, v in CURVES.items() if k[1] == 0})
    fake_run(tmp_path / "s1", "toy", {k: v for k, v in CURVES.items() if k[1] == 1})
    (table,) = [group_table(g, baseline="orthofl") for g in load_groups([tmp_path / "s0", tmp_path / "s1"])]
    assert table["accuracy_mean"].tolist() == pytest.approx([0.7, 0.9])
    assert table["relative_time"].tolist() == pytest.approx([2.0, 1.0])
    # a baseline the group lacks: the group's comparison takes its own default (FedAvg), and the table reads it
    (no_base,) = [group_table(g, baseline="fedadam") for g in load_groups([tmp_path / "s0", tmp_path / "s1"])]
    assert no_base.attrs["baseline"] == "fedavg" and no_base["relative_time"].tolist() == pytest.approx([1.0, 0.5])


def test_runs_whose_loss_was_not_finite_are_noted(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # OrthoFL seed 1's loss is not finite at two evaluations and finite again (its weights were finite); seed 0's
    # from 20 s to its end (its model broke); FedAvg's is finite throughout; the table's numbers are not changed
    fake_run(tmp_path / "runs", "toy", CURVES)
    for seed, losses in ((0, [2.3, 0.9, "nan"]), (1, [2.3, "nan", "inf", 0.4])):
        path = tmp_path / "runs" / "orthofl" / f"seed{seed}" / "metrics.csv"
        metrics = pd.read_csv(path)
        metrics["loss"] = [float(x) for x in losses]
        metrics.to_csv(path, index=False)
    out = tmp_path / "rep"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out)]) == 0
    notes = ["toy: OrthoFL seed 0: the model broke, its loss is not finite from 20 s to the end",
             "toy: OrthoFL seed 1: the loss is not finite at 2 of 4 evaluations (10-20 s)"]
    assert (out / "table.md").read_text().splitlines()[-2:] == [f"- {n}" for n in notes]
    assert [line for line in (out / "table.tex").read_text().splitlines() if line.startswith("% toy: ")][-2:] == \
        [f"% {n}" for n in notes]
    assert [f"- {n}" for n in notes] == [line for line in capsys.readouterr().out.splitlines() if "finite" in line]
    assert pd.read_csv(out / "table.csv")["accuracy_mean"].tolist() == pytest.approx([0.7, 0.9])


def test_bad_report_input_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty").mkdir()
    fake_run(tmp_path / "x" / "a", "toy", CURVES)
    fake_run(tmp_path / "x" / "b", "toy", {("fedavg", 0): CURVES[("fedavg", 0)]})
    for dirs, expected in ([tmp_path / "nope"], "no such folder"), ([tmp_path / "empty"], "no summary.csv found"), \
            ([tmp_path / "x"], "fedavg seed 0 of 'toy' is also in"):
        assert main(["report", *map(str, dirs), "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and expected in err, err


def test_a_reader_leaving_early_is_no_traceback(tmp_path: Path) -> None:
    """`simfl report ... | head -1`: stdout closed before the table is printed gives no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "simfl", "report", str(RESULTS / "quickstart-300s"), "--out", str(tmp_path / "r")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait() == 141, err
    assert "Traceback" not in err
    assert (tmp_path / "r" / "table.md").exists()


SEARCH_NAMES = {"fedavg": "FedAvg", "fedprox": "FedProx", "fedadam": "FedAdam", "fedasync": "FedAsync",
                "fedbuff": "FedBuff", "ca2fl": "CA2FL", "orthofl_global": "`global`", "orthofl_chain": "`chain`"}
OWN_WORDS = {"mu": "mu", "lr": "server lr", "beta": "beta"}
"""How the search tables of results/README.md name an entry's own values in a row's label."""


def readme_table(heading: str) -> list[list[str]]:
    """The header and rows (cells without bold marks) of the first table after the line starting with ``heading``."""
    lines = (RESULTS / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append([cell.strip().replace("**", "") for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return [rows[0], *rows[2:]]


@pytest.mark.parametrize(("part", "heading"), [("sync", "**The search**"), ("orthofl", "**OrthoFL's search**"),
                                               ("async", "**The asynchronous search**")])
def test_results_readme_search_tables_are_the_committed_trials(part: str, heading: str) -> None:
    # every trial of the committed search is in its README table, with its client lr and its score as trials.csv has
    # them; the synchronous and OrthoFL tables have a row per entry and own values, a column per client lr
    trials = pd.read_csv(RESULTS / f"tune-mnist-e5-{part}" / "trials.csv")
    header, *rows = readme_table(heading)
    cells: dict[tuple[str, str], str] = {}
    if part == "async":  # entry (on its first row), trial, client lr, own values, accuracy
        entry = ""
        for row in rows:
            entry = row[0] or entry
            cells[(entry, row[1])] = f"{row[2]} {row[4]}"
    else:
        lrs = [re.findall(r"\d+(?:\.\d+)?", cell)[0] for cell in header[1:]]
        cells = {(row[0], lr): value for row in rows for lr, value in zip(lrs, row[1:], strict=True)}
    own = [c for c in trials.columns if c in OWN_WORDS]
    assert len(trials) == len(cells)
    for t in trials.to_dict("records"):  # a score is shown to 0.1 points (a tie such as 86.95 either way)
        if part == "async":
            lr, shown = cells[(SEARCH_NAMES[t["entry"]], str(t["trial"]))].split()
            assert lr == f"{t['train.lr']:g}", t
        else:
            label = ", ".join([SEARCH_NAMES[t["entry"]]] + [f"{OWN_WORDS[c]} {t[c]:g}" for c in own if not pd.isna(t[c])])
            shown = cells[(label, f"{t['train.lr']:g}")]
        assert float(shown) == pytest.approx(100 * t["score"], abs=0.05 + 1e-9), t


def test_results_readme_quotes_what_derived_py_prints() -> None:
    """The extra figures of results/README.md come from `python results/derived.py`, not by hand."""
    out = subprocess.run([sys.executable, str(RESULTS / "derived.py")], capture_output=True, text=True, check=True).stdout
    lines = dict(re.fullmatch(r"(\w+(?:\[[^\]]*\])?)=(.*)", line).groups() for line in out.splitlines())
    readme = " ".join((RESULTS / "README.md").read_text().replace("**", "").split())  # line breaks as spaces
    tuned = {entry for folder in RESULTS.glob("paper-mnist-e5-tuned-*/summary.csv")
             for entry in pd.read_csv(folder)["algorithm"].unique()}
    readings = {entry for entry in tuned if entry.startswith("orthofl")}
    for entry in tuned:  # every tuned entry has its line; every baseline its lead lines, untuned and tuned OrthoFL's
        assert f"tuned_e5[{entry}]" in lines, entry
        if entry not in readings:
            assert f"tuned_e5_lead[orthofl_chain-{entry}]" in lines, entry
            assert all(f"tuned_e5_tuned_lead[{reading}-{entry}]" in lines for reading in readings), entry
    labels = {"fedavg": "FedAvg", "fedprox": "FedProx", "fedadam": "FedAdam", "fedasync": "FedAsync", "fedbuff": "FedBuff",
              "ca2fl": "CA2FL", "orthofl_chain": "`chain`", "orthofl_global": "`global`"}
    for key, value in lines.items():
        numbers = re.findall(r"\d+(?:\.\d+)?", value)
        if key.startswith(("second_half[", "e5_second_half[")):  # "mean 87.7, min 81.8 (...)" -> "87.7 / 81.8"
            assert f"{numbers[0]} / {numbers[1]}" in readme, key
        if key.startswith("delays["):  # "mean 229 s, max 742 s, 253 updates" -> "229 / 742, 253"
            assert f"{numbers[0]} / {int(numbers[1]):,}, {numbers[2]}" in readme, key
        if key.startswith(("e5_seeds[", "e5_updates[")):  # "92.5 / 90.8 / 94.1", quoted as it is
            assert value in readme, key
        if key.startswith("e5_seed1_cost["):  # "12.9" -> "FedBuff 12.9"
            assert f"{labels[key.split('/')[1].rstrip(']')]} {value}" in readme, key
        if key.startswith("e5_seed1_lead["):
            assert f"leads CA2FL by {value} points" in readme, key
        if key.startswith("e5_straggler["):  # "client 4: 12 updates, the others 30-117"
            assert f"client {numbers[0]} the slowest device: {numbers[1]} updates" in readme, key
            assert f"the others {numbers[2]}-{numbers[3]}" in readme, key
        if key.startswith("halving_replay_total["):  # "keeps 6 of 8 best; pruned 35 of 45; wall 9.2 of 23.3 h (0.39)"
            assert f"{numbers[0]} of {numbers[1]} | {numbers[2]} of {numbers[3]} | {numbers[4]} of {numbers[5]} h " \
                   f"({numbers[6]})" in readme, key
        if key.startswith("halving_replay_differs["):  # "... 600 s 85.33, 2000 s 93.45, 6000 s 95.65; halving's ..."
            full, halved = (re.findall(r"\d+ s (\d+\.\d+)", part) for part in value.split("; halving's "))
            assert " / ".join(full) in readme and " / ".join(halved) in readme, key
        if key.startswith("run_minutes["):  # "async 20-61, sync 7-12"
            assert f"{numbers[0]}-{numbers[1]} " in readme and f"{numbers[2]}-{numbers[3]} " in readme, key
        if key.startswith("ca2fl_repeats["):  # "50/50 buffers, 131 of 500 arrivals"
            assert f"{numbers[0]}/{numbers[1]}" in readme, key
            if "mnist" in key:
                assert f"{numbers[2]} of {numbers[3]}" in readme, key
        if key.startswith("sensitivity_time[") and key.endswith("seed0]"):  # "1600 s, final 97.8"
            when, final = value.split(", final ")
            assert final in readme, key
            if when != "never":
                assert f"{int(when.split()[0]):,} s" in readme, key
        if key.startswith("tuned_e5["):  # "97.6 / 95.5 / 97.5; 96.9±1.0; untuned ...; gain +10.7 [+4.6, +16.8]; time to ..."
            finals, mean, _, gain, time = value.split("; ")
            assert finals in readme and mean in readme and gain.removeprefix("gain ") in readme, key
            assert time.split("% ")[1].split(" of ")[0] in readme, key  # "0.30x [0.15, 0.61]"
        if key.startswith(("tuned_e5_lead[", "tuned_e5_tuned_lead[")):
            # "-0.9 [-6.5, +4.7]; time to 81.9% 0.75x [0.46, 1.22] of the tuned entry's"
            lead, time = value.split("; ")
            assert lead in readme and time.split("% ")[1].split(" of ")[0] in readme, key
        if key.startswith("tune_trial["):  # "lr 0.1, beta 0.8: 97.3" -> "trial 1 (lr 0.1, beta 0.8): 97.3"
            values, score = value.rsplit(": ", 1)
            assert f"trial {key.rstrip(']').rsplit('trial', 1)[1]} ({values}): {score}" in readme, key
        if key.startswith("sensitivity_lead["):  # "17.4"
            epochs, seed = re.fullmatch(r"sensitivity_lead\[e(\d+)-seed(\d)\]", key).groups()  # type: ignore[union-attr]
            assert f"{value} at E = {epochs} (seed {seed})" in readme, key
    assert f"from {int(lines['har_orthofl_leads_from']):,} s on" in readme
    assert f"{int(lines['sensitivity_fedavg_mean_time']):,} s" in readme
    assert f"The runs took {lines['cross_device_cpu_hours']} core-hours" in readme
    assert f"from {lines['cross_device_clients_seen[seed0]']} distinct clients in seed 0" in readme
    own, fedasync = re.findall(r"\d+", lines["cross_device_staleness[seed0]"])
    assert f"mean staleness {own} updates under `own`, against {fedasync} for FedAsync" in readme
    equal, seeds, gap = re.findall(r"\d+(?:\.\d+)?", lines["cross_device_global_server_vs_fedasync"])
    assert f"events.csv equal in {equal} of {seeds} seeds), and accuracies within {gap} points" in readme
    assert f"about {round(float(lines['cpu_hours_total']))} hours of one core" in readme
    assert f"{lines['cpu_hours_e5']} hours of one\ncore with the FedAdam search" in (RESULTS / "README.md").read_text()
