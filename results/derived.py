"""Prints the figures results/README.md quotes beyond the `simfl report` tables, from the committed CSVs.

Run from the repository root: ``python results/derived.py``. Each line is
``name=value``:

- ``cpu_minutes[FOLDER]``: the sum of ``wall_seconds`` over every run of a
  result folder (machine time; it varies from run to run); ``cpu_hours_total`` sums the folders of
  the earlier set (E = 1 and the studies), ``cpu_hours_e5`` those at the paper's E = 5 (``-e5``),
  ``cpu_hours_tune`` the tuning trials (``tune-*``), ``cpu_hours_tuned`` the tuned entries' final runs
  (``paper-mnist-e5-tuned-*``),
  ``cpu_hours_sensitivity`` the sensitivity study's (``sensitivity-*``);
- ``delays[CELL]``: OrthoFL's drawn latencies in a delay-study cell (mean and
  maximum, s) and its update count;
- ``second_half[VARIANT]``: an ablation variant's mean and minimum accuracy
  over the evaluations from half the budget on;
- ``e5_second_half[FOLDER/ENTRY]``: the same for an OrthoFL reading of the E = 5 main runs, pooled
  over the seeds finished (one result folder per entry and seed), and for each row of the E = 5
  ablation (``ablation-mnist-e5/ENTRY``, seed 0; three of its rows are main runs);
- ``e5_seeds[FOLDER/ENTRY]``: an entry's accuracy at the budget in seeds 0 / 1 / 2 of the E = 5 main
  runs (every MNIST entry, HAR's two OrthoFL readings); ``e5_seed1_cost[paper-mnist-e5/ENTRY]``: how
  many points seed 1 (the seed with a straggler) ends under the mean of seeds 0 and 2;
  ``e5_seed1_lead[...]``: `chain`'s lead over CA2FL in seed 1; ``e5_updates[...]``: updates per seed
  of a synchronous and an asynchronous MNIST entry; ``e5_straggler[...]``: seed 1's slowest client
  and the updates per client;
- ``run_minutes[FOLDER]``: the shortest and longest run of the E = 5 main runs, asynchronous and
  synchronous methods apart (machine time, as ``cpu_minutes``);
- ``ca2fl_repeats[FOLDER/seedK]``: in CA2FL's arrivals (the main runs at E = 1, and MNIST at E = 5,
  whose arrivals are the same: latencies do not depend on E), taken in buffers of 10, how many buffers hold
  a client twice and how many arrivals repeat a client already in their buffer (what decides whether
  its two readings, ``calibrate_with``, differ);
- ``har_orthofl_leads_from``: the first evaluation time from which OrthoFL's
  seed-mean accuracy stays above every other asynchronous method's;
- ``cross_device_*``: the cross-device study (``cross-device-mnist``, not in ``cpu_hours_total``): its
  core-hours, the distinct clients that delivered in seed 0, the mean staleness of OrthoFL chain under
  ``returning: own`` and of FedAsync (seed 0), and how far OrthoFL global under ``returning: server`` is
  from FedAsync (seeds whose events.csv are equal; the largest accuracy gap at any evaluation, points);
- ``sensitivity_time[RUN]``: for each run of the sensitivity study (``sensitivity-*``) and the main table's
  E = 5 OrthoFL (chain) and FedAvg runs it reuses, the first evaluation time at or above the study's
  target (95% of FedAvg's mean accuracy at E = 5, as ``simfl report`` computes it) and its final
  accuracy; ``sensitivity_fedavg_mean_time``: FedAvg's mean time to that target at E = 5 over its seeds;
  ``sensitivity_lead[eE-seedK]``: OrthoFL's final accuracy minus FedAvg's (points) at E = 1 and 10, per seed in;
- ``tuned_e5[ENTRY]``: an entry of the tuned MNIST Table 2 at E = 5 (``paper-mnist-e5-tuned-*``, the entries of each
  part's ``best.yaml``) beside its untuned runs (``paper-mnist-e5``): its accuracy at 12,000 s in seeds 0 / 1 / 2, mean
  ± std (ddof 0, as ``simfl report``), the untuned mean ± std, the gain (tuned minus untuned, paired by seed) with
  its 95% t interval, and its time to the untuned table's target over untuned FedAvg's, paired by seed
  (``simfl.output.comparison.compare`` over the untuned and tuned runs together); ``tuned_e5_lead[orthofl_chain-ENTRY]``:
  the untuned OrthoFL (`chain`, the paper's lr 0.01 and beta 0.6) minus the tuned entry, paired by seed, with its
  95% t interval, and OrthoFL's time to that target over the tuned entry's, paired by seed (for every entry but
  OrthoFL's readings); ``tuned_e5_tuned_lead[READING-ENTRY]``: the same for a tuned OrthoFL reading against each tuned
  baseline, once OrthoFL's final runs have finished;
- ``bn_variance[Ts]``: CA2FL's HAR seed 0 re-run to 400 s recording the first batch-norm layer's running variance
  (``bn-variance-har-e5``): at each arrival that changed it (a buffer's flush, at T virtual seconds), its lowest entry
  and how many of its entries are below zero (the layer starts at 1, PyTorch's initial running variance);
  ``bn_variance_first_nan``: the first evaluation time whose loss is not finite;
- ``halving_replay[FOLDER/etaE-rungsR]``: ``simfl tune --halving-replay`` on a committed MNIST search (run without
  halving): how many entries' best trials halving with that eta and rung count keeps, how many trials it prunes, the
  share of the search's virtual training it runs and its wall hours against the search's (each rung's share of a
  trial's wall taken as its share of the virtual time); ``halving_replay_total[etaE-rungsR]`` sums the three searches;
  ``halving_replay_differs[FOLDER/ENTRY]``: under the default halving, where its choice is not the full search's, both
  trials' validation accuracy (%) at each rung; ``tune_not_separated[FOLDER/ENTRY]``: an entry whose best two trials
  the validation split cannot tell apart (``simfl tune``'s own note, :func:`simfl.launch.tune.resolution_notes`);
- ``tune_trial[FOLDER/ENTRY/trialK]``: a finished trial of a search still under way (not every trial in its
  ``trials.csv`` scored by Optuna, or no ``trials.csv`` yet): the values its entry was given for the searched keys
  and its score (final validation accuracy, %, mean over the search's seeds).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simfl.algorithms.configs import run_name
from simfl.launch.tune import (
    SCORED,
    TRIALS_DIR,
    TRIALS_FILE,
    TUNE_FILE,
    best_trials,
    finished_tune,
    plan_of,
    replay_halving,
    resolution_notes,
    trial_scores,
)
from simfl.output.comparison import accuracy_at, compare, mean_interval
from simfl.output.report import RunGroup, find_result_folders, group_comparison, group_table, load_groups
from simfl.schema import scenario as scenario_mod
from simfl.schema.tuning import HalvingConfig, given_value
from simfl.yamlsafe import short_value

RESULTS = Path(__file__).resolve().parent
ASYNC = ["orthofl", "fedasync", "fedbuff", "ca2fl"]
SYNC = ["fedavg", "fedprox", "fedadam"]
CROSS_DEVICE = RESULTS / "cross-device-mnist"


def cpu_minutes(folder: Path) -> float:
    """Summed wall seconds of every run under ``folder``, in minutes."""
    return sum(pd.read_csv(p)["wall_seconds"].sum() for p in folder.rglob("summary.csv")) / 60


def seed_mean_accuracy(folder: Path, algorithm: str) -> pd.Series:
    """Accuracy at each evaluation time, mean over the algorithm's seeds."""
    runs = [pd.read_csv(p).groupby("virtual_time")["accuracy"].last() for p in (folder / algorithm).glob("seed*/metrics.csv")]
    return pd.concat(runs, axis=1).mean(axis=1)


def second_half(runs: list[pd.DataFrame]) -> str:
    """Mean and minimum accuracy (%) over the evaluations from half of each run's budget on, pooled."""
    late = pd.concat([r[r["virtual_time"] >= r["virtual_time"].max() / 2] for r in runs])["accuracy"]
    return f"mean {100 * late.mean():.1f}, min {100 * late.min():.1f}"


def main() -> None:
    folders = sorted(p for p in RESULTS.iterdir() if p.is_dir() and not p.name.startswith(("report", "quickstart"))
                     and not p.name.endswith(".partial"))
    minutes = {p.name: cpu_minutes(p) for p in folders}
    for name, value in minutes.items():
        print(f"cpu_minutes[{name}]={value:.0f}")
    tune = sum(v for k, v in minutes.items() if k.startswith("tune-"))
    tuned = sum(v for k, v in minutes.items() if "-tuned-" in k)
    e5 = sum(v for k, v in minutes.items() if "-e5" in k and not k.startswith("tune-") and "-tuned-" not in k)
    cross = minutes.get(CROSS_DEVICE.name, 0.0)
    sensitivity = sum(v for k, v in minutes.items() if k.startswith("sensitivity-"))
    later = sum(v for k, v in minutes.items()
                if k.startswith(("stragglers-", "bandwidth-", "async-rules-", "crosscheck-")))  # wall: see their sections
    print(f"cpu_hours_total={(sum(minutes.values()) - e5 - cross - sensitivity - tune - tuned - later) / 60:.1f}")
    print(f"cpu_hours_e5={e5 / 60:.1f}")
    print(f"cpu_hours_tune={tune / 60:.1f}")
    print(f"cpu_hours_tuned={tuned / 60:.1f}")
    print(f"cpu_hours_sensitivity={sensitivity / 60:.1f}")

    for cell in sorted((RESULTS / "delays-mnist-e1-6000s").glob("latency=*")):
        events = pd.read_csv(cell / "orthofl" / "seed0" / "events.csv")
        print(f"delays[{cell.name}]=mean {events['latency'].mean():.0f} s, max {events['latency'].max():.0f} s, "
              f"{len(events)} updates")

    ablation = RESULTS / "ablation-mnist-e1"
    for variant in sorted(p.name for p in ablation.iterdir() if p.is_dir()):
        acc = seed_mean_accuracy(ablation, variant)
        late = acc[acc.index >= acc.index.max() / 2]
        print(f"second_half[{variant}]=mean {100 * late.mean():.1f}, min {100 * late.min():.1f} ({len(late)} evaluations)")

    main_runs = {}
    for folder in ("paper-mnist-e5", "paper-har-e5"):
        (group,) = load_groups(find_result_folders([RESULTS / folder]))  # finished folders only
        main_runs[folder] = group
        for entry in ("orthofl_chain", "orthofl_global"):
            runs = [m for (algo, _), m in group.metrics.items() if algo == entry]
            print(f"e5_second_half[{folder}/{entry}]={second_half(runs)} ({len(runs)} seeds)")
        final = group.summary.pivot(index="algorithm", columns="seed", values="final_accuracy") * 100
        quoted = final.index if folder == "paper-mnist-e5" else ["orthofl_chain", "orthofl_global"]
        for entry in quoted:
            print(f"e5_seeds[{folder}/{entry}]={' / '.join(f'{a:.1f}' for a in final.loc[entry])}")
        wall = group.summary.assign(minutes=group.summary["wall_seconds"] / 60)
        sync = wall["algorithm"].isin(SYNC)
        print(f"run_minutes[{folder}]=async {wall[~sync]['minutes'].min():.0f}-{wall[~sync]['minutes'].max():.0f}, "
              f"sync {wall[sync]['minutes'].min():.0f}-{wall[sync]['minutes'].max():.0f}")
    mnist = main_runs["paper-mnist-e5"].summary
    updates = mnist.pivot(index="algorithm", columns="seed", values="updates")
    for entry in ("fedavg", "orthofl_chain"):  # a synchronous and an asynchronous method
        print(f"e5_updates[paper-mnist-e5/{entry}]={' / '.join(str(n) for n in updates.loc[entry])}")
    events = pd.read_csv(RESULTS / "paper-mnist-e5" / "orthofl_chain-seed1" / "orthofl_chain" / "seed1" / "events.csv")
    per_client = events.loc[events["event"] == "arrival", "client"].value_counts()
    others = per_client.drop(per_client.idxmin())
    print(f"e5_straggler[paper-mnist-e5/seed1]=client {per_client.idxmin()}: {per_client.min()} updates, "
          f"the others {others.min()}-{others.max()}")
    final = mnist.pivot(index="algorithm", columns="seed", values="final_accuracy") * 100
    for entry, cost in ((final[0] + final[2]) / 2 - final[1]).sort_values(ascending=False).items():
        print(f"e5_seed1_cost[paper-mnist-e5/{entry}]={cost:.1f}")
    print(f"e5_seed1_lead[paper-mnist-e5/orthofl_chain]={final.loc['orthofl_chain', 1] - final.loc['ca2fl', 1]:.1f}")
    tuned_table(main_runs["paper-mnist-e5"])
    for search in sorted(RESULTS.glob("tune-*")):
        unfinished_search(search)
    halving_replays()
    not_separated()

    ablation5 = RESULTS / "ablation-mnist-e5"
    if ablation5.is_dir():  # its other rows are the main runs' seed 0 (results/reproduce.sh ablation5)
        (group,) = load_groups(find_result_folders([ablation5]))
        shared = {(entry, 0): main_runs["paper-mnist-e5"].metrics[(entry, 0)]
                  for entry in ("fedasync", "orthofl_global", "orthofl_chain")}
        for (entry, _), run in sorted({**group.metrics, **shared}.items()):
            print(f"e5_second_half[ablation-mnist-e5/{entry}]={second_half([run])} (seed 0)")

    layouts = {"paper-mnist-e1": "ca2fl/seed*", "paper-har-e1": "ca2fl/seed*", "paper-mnist-e5": "ca2fl-seed*/ca2fl/seed*"}
    for folder, runs in layouts.items():
        for path in sorted((RESULTS / folder).glob(f"{runs}/events.csv")):
            events = pd.read_csv(path)
            clients = events.loc[events["event"] == "arrival", "client"].tolist()
            buffers = [clients[i:i + 10] for i in range(0, len(clients) - 9, 10)]
            repeats = [len(b) - len(set(b)) for b in buffers]
            print(f"ca2fl_repeats[{folder}/{path.parent.name}]={sum(r > 0 for r in repeats)}/{len(buffers)} buffers, "
                  f"{sum(repeats)} of {10 * len(buffers)} arrivals")

    har = pd.concat({a: seed_mean_accuracy(RESULTS / "paper-har-e1", a) for a in ASYNC}, axis=1)
    behind = har.index[har.drop(columns="orthofl").max(axis=1) >= har["orthofl"]]
    print(f"har_orthofl_leads_from={har.index[har.index > behind.max()].min():.0f}")
    if CROSS_DEVICE.is_dir():
        cross_device(cross)


def tuned_table(untuned: RunGroup) -> None:
    """The tuned MNIST Table 2's figures (``tuned_e5``, module docstring), for each part whose final runs finished."""
    folders = [p for p in sorted(RESULTS.glob("paper-mnist-e5-tuned-*")) if p.is_dir() and not p.name.endswith(".partial")]
    if not folders:
        return
    base = group_comparison(untuned)  # the untuned table's target and baseline (untuned FedAvg)
    runs = dict(untuned.metrics)
    spread = {}  # mean and std over seeds, as the report's table has them
    found = find_result_folders(folders)
    for group in load_groups(found):
        runs.update({(f"{entry}_tuned", seed): metrics for (entry, seed), metrics in group.metrics.items()})
        for kind, one in (("tuned", group), ("untuned", untuned)):
            for row in group_table(one).itertuples():
                spread[(kind, row.algorithm)] = f"{100 * row.accuracy_mean:.1f}±{100 * row.accuracy_std:.1f}"
    tuned = {entry: sorted(s for e, s in runs if e == f"{entry}_tuned") for kind, entry in spread if kind == "tuned"}
    both = compare(runs, untuned.synchronous, base.target, base.baseline)
    when = both.horizon

    def finals(entry: str, seeds: list[int]) -> list[float]:
        return [100 * accuracy_at(runs[(entry, s)], when) for s in seeds]

    def lead(first: str, second: str, seeds: list[int]) -> str:
        """``first`` minus ``second`` at the budget and ``first``'s time to the target over ``second``'s, paired by seed."""
        mean, low, high = mean_interval([a - b for a, b in zip(finals(first, seeds), finals(second, seeds), strict=True)])
        row = compare(runs, untuned.synchronous, base.target, second).row(first)
        return (f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]; time to {100 * both.target:.1f}% "
                f"{row['ratio']:.2f}x [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}] of the tuned entry's")

    readings = sorted({run_name(a) for folder in found for a in scenario_mod.load(folder / "scenario.yaml").algorithms
                       if a.name == "orthofl"})  # OrthoFL's tuned readings, as the runs' scenarios state them
    for entry, seeds in tuned.items():
        now, before = finals(f"{entry}_tuned", seeds), finals(entry, seeds)
        gain, low, high = mean_interval([a - b for a, b in zip(now, before, strict=True)])
        row = both.row(f"{entry}_tuned")
        ratio = f"{row['ratio']:.2f}x [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}]"
        print(f"tuned_e5[{entry}]={' / '.join(f'{a:.1f}' for a in now)}; {spread[('tuned', entry)]}; "
              f"untuned {spread[('untuned', entry)]}; "
              f"gain {gain:+.1f} [{low:+.1f}, {high:+.1f}]; time to {100 * both.target:.1f}% {ratio} of untuned "
              f"{both.baseline}'s")
        if entry in readings:
            continue
        print(f"tuned_e5_lead[orthofl_chain-{entry}]={lead('orthofl_chain', f'{entry}_tuned', seeds)}")
        for reading in readings:
            print(f"tuned_e5_tuned_lead[{reading}-{entry}]={lead(f'{reading}_tuned', f'{entry}_tuned', seeds)}")


def halving_replays() -> None:
    """``halving_replay`` lines: the committed MNIST searches replayed under halving (module docstring)."""
    for eta, rungs in ((3, 3), (3, 2), (2, 3)):
        replays = []
        for search in sorted(RESULTS.glob("tune-mnist-e5-*")):
            replay = replay_halving(search, HalvingConfig(eta=eta, rungs=rungs))
            replays.append(replay)
            print(f"halving_replay[{search.name}/eta{eta}-rungs{rungs}]=keeps {replay.kept} of {len(replay.best)} best; "
                  f"pruned {replay.pruned} of {replay.trials}; virtual {replay.share:.2f}; wall "
                  f"{replay.wall / 3600:.1f} of {replay.wall_full / 3600:.1f} h")
            if (eta, rungs) == (3, 3):
                differs(search, replay)
        wall, whole = sum(r.wall for r in replays), sum(r.wall_full for r in replays)
        print(f"halving_replay_total[eta{eta}-rungs{rungs}]=keeps {sum(r.kept for r in replays)} of "
              f"{sum(len(r.best) for r in replays)} best; pruned {sum(r.pruned for r in replays)} of "
              f"{sum(r.trials for r in replays)}; wall {wall / 3600:.1f} of {whole / 3600:.1f} h ({wall / whole:.2f})")


def differs(search: Path, replay: object) -> None:
    """``halving_replay_differs`` lines of one search's replay (module docstring)."""
    from simfl.launch.tune import HalvingReplay

    assert isinstance(replay, HalvingReplay)
    plan = replay.plan
    for full, halved in replay.best:
        if full.number == halved.number:
            continue
        def at(trial: object, time: float) -> float:
            assert hasattr(trial, "folder") and hasattr(trial, "entry")
            return 100 * float(np.mean(trial_scores(search / trial.folder, trial.entry.name, plan.scn.seeds,
                                                    plan.config.score, time)))

        shown = [f"trial {t.number} ({t.shown()}): " + ", ".join(f"{time:g} s {at(t, time):.2f}" for time in plan.rungs)
                 for t in (full, halved)]
        print(f"halving_replay_differs[{search.name}/{full.entry.name}]=full search's {shown[0]}; halving's {shown[1]}")


def not_separated() -> None:
    """``tune_not_separated`` lines: the committed MNIST searches (module docstring)."""
    for search in sorted(RESULTS.glob("tune-mnist-e5-*")):
        plan, trials = finished_tune(search)
        for note in resolution_notes(plan, search, best_trials(trials), trials):
            entry, text = note.split(": ", 1)
            print(f"tune_not_separated[{search.name}/{entry}]={text}")


def unfinished_search(search: Path) -> None:
    """``tune_trial`` lines: each finished trial of a search still under way (none once its trials table lists
    every trial scored), its values read as ``simfl tune`` reads an entry's given ones
    (:func:`simfl.schema.tuning.given_value`)."""
    plan = plan_of(scenario_mod.load(search / TUNE_FILE), str(search))
    if (search / TRIALS_FILE).is_file():
        table = pd.read_csv(search / TRIALS_FILE)
        if len(table) == sum(e.trials for e in plan.entries) and (table["state"] == SCORED).all():
            return
    for entry in plan.entries:
        for summary in sorted((search / TRIALS_DIR / entry.name).glob("trial*/summary.csv")):
            trial = summary.parent
            if trial.name.endswith(".partial"):
                continue
            scn = scenario_mod.load(trial / "scenario.yaml")
            values = {k: given_value(scn.algorithms[0], scn.train, k, space) for k, space in entry.spaces.items()}
            shown = ", ".join(f"{k.split('.')[-1]} {short_value(v)}" for k, v in values.items())
            score = 100 * pd.read_csv(summary)["final_accuracy"].mean()
            print(f"tune_trial[{search.name}/{entry.name}/{trial.name}]={shown}: {score:.1f}")


def cross_device(minutes: float) -> None:
    """The cross-device study's figures (module docstring)."""
    print(f"cross_device_cpu_hours={minutes / 60:.2f}")
    events = {a: pd.read_csv(CROSS_DEVICE / a / "seed0" / "events.csv") for a in ("orthofl_chain", "fedasync")}
    arrivals = {a: e[e["event"] == "arrival"] for a, e in events.items()}
    print(f"cross_device_clients_seen[seed0]={arrivals['fedasync']['client'].nunique()}")
    print(f"cross_device_staleness[seed0]=own {arrivals['orthofl_chain']['staleness'].mean():.0f}, "
          f"fedasync {arrivals['fedasync']['staleness'].mean():.0f}")
    seeds = sorted(int(p.name[4:]) for p in (CROSS_DEVICE / "fedasync").glob("seed*"))
    same = [k for k in seeds if (CROSS_DEVICE / "orthofl_global_server" / f"seed{k}" / "events.csv").read_bytes()
            == (CROSS_DEVICE / "fedasync" / f"seed{k}" / "events.csv").read_bytes()]
    gap = max((pd.read_csv(CROSS_DEVICE / "orthofl_global_server" / f"seed{k}" / "metrics.csv")["accuracy"]
               - pd.read_csv(CROSS_DEVICE / "fedasync" / f"seed{k}" / "metrics.csv")["accuracy"]).abs().max()
              for k in seeds)
    print(f"cross_device_global_server_vs_fedasync=events equal in {len(same)} of {len(seeds)} seeds, "
          f"largest accuracy gap {100 * gap:.2f} points")


def sensitivity() -> None:
    """The seed-level figures the sensitivity section of README.md quotes."""
    main_runs = {f"{e}-seed{k}": RESULTS / "paper-mnist-e5" / f"{e}-seed{k}" / e / f"seed{k}"
                 for e in ("orthofl_chain", "fedavg") for k in range(3)}
    fedavg = [pd.read_csv(main_runs[f"fedavg-seed{k}"] / "metrics.csv") for k in range(3)]
    target = 0.95 * sum(float(m["accuracy"].iloc[-1]) for m in fedavg) / len(fedavg)
    runs = dict(main_runs)
    for study in sorted(RESULTS.glob("sensitivity-*")):
        for folder in sorted(p for p in study.iterdir() if p.is_dir() and not p.name.endswith(".partial")):
            runs[folder.name] = next(folder.glob("*/seed*"))
    times = {}
    for name, run in runs.items():
        metrics = pd.read_csv(run / "metrics.csv")
        hit = metrics.loc[metrics["accuracy"] >= target, "virtual_time"]
        times[name] = float(hit.iloc[0]) if len(hit) else None
        when = f"{times[name]:.0f} s" if times[name] is not None else "never"
        print(f"sensitivity_time[{name}]={when}, final {100 * metrics['accuracy'].iloc[-1]:.1f}")
    mean = sum(times[f"fedavg-seed{k}"] or 0.0 for k in range(3)) / 3
    print(f"sensitivity_fedavg_mean_time={mean:.0f}")
    for epochs in (1, 10):
        for k in range(3):
            pair = [runs.get(f"{e}-e{epochs}-seed{k}") for e in ("orthofl", "fedavg")]
            if all(pair):
                finals = [float(pd.read_csv(run / "metrics.csv")["accuracy"].iloc[-1]) for run in pair if run]
                print(f"sensitivity_lead[e{epochs}-seed{k}]={100 * (finals[0] - finals[1]):.1f}")


def bn_variance() -> None:
    """``bn_variance``: the recorded running variance (module docstring) after each flush that changed it."""
    run = RESULTS / "bn-variance-har-e5" / "ca2fl" / "seed0"
    changes = np.load(run / "layer_changes.npy")
    times = pd.read_csv(run / "events.csv")["time"]
    assert len(times) == len(changes), "one recorded change per arrival"
    variance = 1.0 + changes.cumsum(axis=0)
    for row in np.flatnonzero(np.abs(changes).sum(axis=1) > 0):
        print(f"bn_variance[{times[row]:.0f}s]=min {variance[row].min():.2f}, "
              f"{(variance[row] < 0).sum()} of {variance.shape[1]} below zero")
    metrics = pd.read_csv(run / "metrics.csv")
    print(f"bn_variance_first_nan={metrics.loc[~np.isfinite(metrics['loss']), 'virtual_time'].min():.0f}")


if __name__ == "__main__":
    main()
    sensitivity()
    bn_variance()
