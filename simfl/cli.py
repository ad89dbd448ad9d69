"""The ``simfl`` command: validate and run scenarios.

Every user mistake ends in one line ``simfl: <where>: <what>`` on stderr and
exit code 2; nothing is left half-written in the output folder.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from simfl import __version__
from simfl.errors import FULL_ERRNOS, InputError, NoSpace, Terminated, UserCodeFailed, WorkerLost
from simfl.names import allowing_imports

if TYPE_CHECKING:
    from simfl.launch.checkpoint import Every
    from simfl.launch.runner import Target
    from simfl.schema.estimate import Estimate
    from simfl.schema.scenario import Scenario

# Heavy modules (torch, pandas, matplotlib) are imported inside the commands so that
# `simfl --help` and usage errors answer at once.

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage mistake in one line (exit code 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "simfl run: ..." for a subcommand's arguments; the top level is the whole command line
        raise InputError(self.prog.removeprefix("simfl ") if self.prog != "simfl" else "command line", message)


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None
    if not seeds or any(s < 0 for s in seeds):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got '{text}'")
    return seeds


def _size(text: str) -> int:
    from simfl.schema.limits import parse_size

    try:
        return parse_size(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _max_memory(parser: argparse.ArgumentParser, hours: bool = True) -> None:
    parser.add_argument("--max-memory", type=_size, default=None, metavar="SIZE",
                        help="refuse scenarios estimated to need more memory, e.g. 8G (default: 80%% of the RAM)")
    if hours:
        parser.add_argument("--max-hours", type=_hours, default=None, metavar="H",
                            help="refuse scenarios whose runs are each estimated to take longer (default: 168, a week)")


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number of hours > 0, got {text!r}")
    return value


def _check_clients(scn: Scenario) -> None:
    """What every run checks once its data is split, where the scenario states its clients: validate and run
    both call it before the estimate reads the entries' rounds, so both refuse with the same line."""
    clients = scn.stated_clients()
    if clients is not None:
        scn.check_clients(clients)


def _check_estimate(scn: Scenario, args: argparse.Namespace, cells: int = 1) -> list[str]:
    """The scenario's estimate as comment lines, after refusing it if it exceeds a limit (memory, then the disk
    of the output folder, ``--out`` or what ``simfl run`` would use)."""
    from simfl import outdir
    from simfl.schema import limits

    _check_clients(scn)
    from simfl.launch.workers import workers_for

    est = _estimate(scn, None, _wall(args, None), cells)  # with the checkpoints a run takes by default
    if scn.client_state is not None and (scn.client_state.store == "disk" or est.disk_bytes):
        scn.client_state.check_dir()  # as every run storing on disk does
    where = f"{args.file}: estimate"
    limits.check(est, args.max_memory or limits.default_max_memory(), where, args.max_hours)
    workers = workers_for(None, [scn], est.runs * est.cells)
    out = args.out if args.out is not None else outdir.default_out(scn.name, sweep=bool(scn.sweep))
    _check_out(est, out, where, workers)
    return est.lines(workers, limits.free_lines(est, out, workers)) + _cost_lines(scn, est, workers)


RAY_NODES = 4
"""The cluster the plan's cost is also stated for: that many Ray nodes of this machine's kind."""


def _span(low: float, high: float) -> str:
    from simfl.schema.estimate import duration_text

    return duration_text(low) if low == high else f"{duration_text(low)} to {duration_text(high)}"


def _cost_text(what: str, low: float, high: float, workers: int, extra: str = "") -> str:
    """One line of a plan's cost: CPU (seconds of one core per run), wall with this machine's workers, and on
    :data:`RAY_NODES` nodes like it; a range where the seeds are not fixed."""
    return (f"#   cost:          {what}: CPU about {_span(low, high)} of one core{extra}; wall about "
            f"{_span(low / workers, high / workers)} with {workers} worker{'s' * (workers != 1)} here, "
            f"{_span(low / workers / RAY_NODES, high / workers / RAY_NODES)} on {RAY_NODES} Ray nodes like this one")


def _cost_lines(scn: Scenario, est: Estimate, workers: int) -> list[str]:
    """The cost line of a run or sweep from its estimate (with sequential seeds, from the first batch's to the
    most's)."""
    if est.wall_total is None:
        return []
    cpu = est.wall_total * est.cells + est.launch_seconds
    plan = scn.seed_plan
    high = cpu if plan is None else cpu * plan.most / len(scn.seeds)
    what = "the runs" if plan is None else f"the runs ({plan.first} to {plan.most} seeds)"
    return [_cost_text(what, cpu, high, workers)]


def _estimate(scn: Scenario, every: Every | None, wall: float | None, cells: int = 1) -> Estimate:
    """The estimate of ``scn``'s runs, with the memory and disk of their checkpoints where they take any: on the
    ``every`` schedule, or on the wall clock when a run is estimated to last longer than ``wall`` seconds."""
    import dataclasses

    from simfl.schema import estimate

    est = estimate.estimate(scn, cells)
    long = wall is not None and est.wall_seconds is not None and est.wall_seconds > wall
    if (every is not None or long) and any(scn.checkpointable(i) for i in range(len(scn.algorithms))):
        est = dataclasses.replace(est, checkpoints=True)
    return est


def _check_out(est: Estimate, out: Path, where: str, workers: int) -> None:
    """Refuse an output folder that must not be written (as such, not for its disk), then one whose filesystem
    lacks the disk the estimate needs."""
    from simfl import outdir
    from simfl.schema import limits

    outdir.check_path(out, str(out))
    limits.check_disk(est, out, where, workers)


def _checkpoint_wall(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint-wall", default=None, metavar="T|off",
                        help="checkpoint each run under way every T of wall time (e.g. 90s, 5m, 1h; default 5m; off: "
                        "never), so that Ctrl-C or a kill loses at most about that much of it and --resume (or the "
                        "same sweep again) goes on from there; the results do not depend on it")


def _baseline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", default=None, metavar="ENTRY",
                        help="the entry (label, else algorithm name) whose time to target the others are divided by "
                        "(sets eval.baseline; default: the first synchronous entry, else the first entry)")


def _baseline_override(args: argparse.Namespace) -> list[str]:
    """``--baseline NAME`` as the ``--set`` it stands for (the name quoted, so that YAML reads it as text)."""
    import json

    name = getattr(args, "baseline", None)
    return [] if name is None else [f"eval.baseline={json.dumps(name)}"]


def _parallel(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="runs (algorithm entry x seed x grid point of a sweep) side by side in N worker processes "
                        "(default: $SIMFL_WORKERS, else as many as the cores hold given each run's executor threads "
                        "and workers; 1: one after another in this process). The numbers do not depend on it")
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="run each run as a Ray task: on a local Ray instance, or on the cluster at ADDRESS "
                        "(e.g. ray://head:10001 or head:6379); the nodes need not see the output folder: results "
                        "and checkpoints come back here, and a node without the dataset gets it from here")


def _clock(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clock", choices=["simpy", "heap", "auto"], default="auto",
                        help="the clock the runs are simulated on: SimPy's or the heap clock, the same numbers on both "
                        "(default auto: the heap clock in pure-latency mode, executor kind none, else SimPy's)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="simfl", description="Discrete-event simulator for asynchronous federated learning.")
    parser.add_argument("--version", action="version", version=f"simfl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    scenario_options = _Parser(add_help=False)  # --set and --seeds of every command that reads a scenario
    scenario_options.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                                  help="override a scenario value (repeatable), e.g. --set train.lr=0.05")
    scenario_options.add_argument("--seeds", type=_seeds, default=None,
                                  help="comma-separated seeds, replacing the scenario's")
    scenario_options.add_argument("--allow-imports", action="store_true",
                                  help="let the scenario name components by import path package.module:Class "
                                  "(importing runs that module's code; also SIMFL_ALLOW_IMPORTS=1)")

    p_val = sub.add_parser("validate", help="check a scenario file and print it resolved", parents=[scenario_options])
    p_val.add_argument("file", type=Path, help="scenario YAML file")
    p_val.add_argument("--out", type=Path, default=None,
                       help="output folder whose disk the estimate is checked against (default: runs/<scenario name>, "
                       "as simfl run; runs/<scenario name>-sweep for a sweep: block)")
    _max_memory(p_val)
    p_val.set_defaults(func=cmd_validate)

    p_run = sub.add_parser("run", help="run every algorithm and seed of a scenario", parents=[scenario_options])
    p_run.add_argument("file", type=Path, nargs="?", default=None, help="scenario YAML file (not with --resume)")
    p_run.add_argument("--out", type=Path, default=None, help="output folder (default: runs/<scenario name>)")
    p_run.add_argument("--checkpoint-every", default=None, metavar="N|Ts",
                       help="also save the whole simulation every N updates (e.g. 500) or every T virtual seconds "
                       "(e.g. 300s) into <out>.partial/running/")
    _checkpoint_wall(p_run)
    p_run.add_argument("--resume", type=Path, default=None, metavar="OUT",
                       help="continue the unfinished run whose --out was OUT, from OUT.partial")
    p_run.add_argument("--verify", action="store_true",
                       help="check simulation invariants while running; stop with a message when one breaks")
    p_run.add_argument("--only", default=None, metavar="NAMES",
                       help="comma-separated entry names (label, else algorithm name): run only those entries")
    p_run.add_argument("--force", action="store_true", help="replace an existing, non-empty output folder")
    p_run.add_argument("--timeline", action="store_true",
                       help="also draw each entry's first run as a schedule into the folder (timeline-<entry>-seed<k>.png, "
                            "as simfl timeline draws it)")
    p_run.add_argument("--quiet", action="store_true", help="no progress bar and no line per finished run")
    _baseline(p_run)
    _parallel(p_run)
    _clock(p_run)
    _max_memory(p_run)
    p_run.set_defaults(func=cmd_run)

    p_flwr = sub.add_parser("flwr", help="Flower Apps in virtual time")
    flwr_sub = p_flwr.add_subparsers(dest="flwr_command", required=True, parser_class=_Parser)
    p_frun = flwr_sub.add_parser("run", help="run a Flower App folder as flwr run does, its ServerApp as written, "
                                 "under the scenario's latencies (runs the app's code)")
    p_frun.add_argument("app_dir", type=Path, help="the app's folder (with its pyproject.toml)")
    p_frun.add_argument("--scenario", type=Path, default=None, metavar="FILE",
                        help="latencies, availability, failures, budget, seeds (YAML, no client:); data and model "
                        "only to replace the app's own")
    p_frun.add_argument("--run-config", action="append", default=[], metavar="'K=V ...'",
                        help="override the app's run config, as flwr run takes it (TOML values, or a .toml file)")
    p_frun.add_argument("--federation-config", action="append", default=[], metavar="'K=V ...'",
                        help="num-supernodes=N (the clients), backend.client-resources.num-cpus=K (threads per client)")
    p_frun.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario value (repeatable), e.g. --set 'algorithms=[{name: orthofl}]'")
    p_frun.add_argument("--seeds", type=_seeds, default=None, help="comma-separated seeds, replacing the scenario's")
    p_frun.add_argument("--allow-imports", action="store_true",
                        help="let the scenario (or --set) name components by import path package.module:Class; the "
                        "app's own ServerApp and ClientApp need no permission (also SIMFL_ALLOW_IMPORTS=1)")
    p_frun.add_argument("--compare", default=None, metavar="RULES",
                        help="also run simfl's rules over the app's ClientApp beside its ServerApp (the baseline), on "
                        "the same nodes, data, latencies and seeds, and print the verdict: comma-separated names "
                        "(fedbuff,orthofl) or a YAML list of entries ('[fedbuff, {name: fedbuff, buffer: 3, label: b3}]')")
    p_frun.add_argument("--out", type=Path, default=None, help="output folder (default: runs/<app name>)")
    p_frun.add_argument("--force", action="store_true", help="replace an existing, non-empty output folder")
    p_frun.add_argument("--quiet", action="store_true", help="no progress bar and no line per finished run")
    p_frun.add_argument("--verify", action="store_true", help="check simulation invariants while running")
    p_frun.add_argument("--checkpoint-every", default=None, metavar="N|Ts",
                        help="as simfl run, for runs of simfl's own algorithms (a ServerApp's run is not checkpointed)")
    _checkpoint_wall(p_frun)
    p_frun.add_argument("--resume", type=Path, default=None, metavar="OUT",
                        help="continue OUT (its scenario as it was): finished runs kept, checkpointed runs resumed, "
                        "a ServerApp's unfinished run started again (the same numbers)")
    _parallel(p_frun)
    _clock(p_frun)
    _max_memory(p_frun)
    p_frun.set_defaults(func=cmd_flwr_run)

    p_qs = sub.add_parser("quickstart", help="run the shipped quickstart scenario (OrthoFL, FedAsync, FedAvg on "
                          "scikit-learn's digits, offline) into runs/quickstart")
    p_qs.add_argument("--out", type=Path, default=Path("runs") / "quickstart", help="output folder")
    p_qs.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a scenario value (repeatable), e.g. --set budget.time=60")
    p_qs.add_argument("--seeds", type=_seeds, default=None, help="comma-separated seeds, replacing the scenario's")
    p_qs.add_argument("--force", action="store_true", help="replace an existing, non-empty output folder")
    p_qs.add_argument("--quiet", action="store_true", help="no progress bar")
    _baseline(p_qs)
    _max_memory(p_qs)
    p_qs.set_defaults(func=cmd_quickstart)

    p_ref = sub.add_parser("reference", help="print the scenario reference (markdown) generated from the schema")
    p_ref.set_defaults(func=cmd_reference)
    p_sweep = sub.add_parser("sweep", help="run every cell of a scenario's sweep grid x seeds (resumable)",
                             parents=[scenario_options])
    p_sweep.add_argument("file", type=Path, help="scenario YAML file with a sweep: block")
    p_sweep.add_argument("--out", type=Path, default=None, help="output folder (default: runs/<scenario name>-sweep)")
    p_sweep.add_argument("--quiet", action="store_true", help="no progress bar and no line per finished run")
    _checkpoint_wall(p_sweep)
    _baseline(p_sweep)
    _parallel(p_sweep)
    _clock(p_sweep)
    _max_memory(p_sweep)
    p_sweep.set_defaults(func=cmd_sweep)

    p_tune = sub.add_parser("tune", help="tune each entry's hyperparameters (tune: section) with the same budget, "
                            "on a validation split (resumable)", parents=[scenario_options])
    p_tune.add_argument("file", type=Path, nargs="?", default=None, help="scenario YAML file with a tune: section "
                        "(not with --resume)")
    p_tune.add_argument("--out", type=Path, default=None, help="output folder (default: runs/<scenario name>-tune)")
    p_tune.add_argument("--resume", type=Path, default=None, metavar="OUT",
                        help="continue the tune in OUT as it was started: scored trials kept, the rest run")
    p_tune.add_argument("--quiet", action="store_true", help="no progress bar and no line per finished run")
    p_tune.add_argument("--halving-replay", type=Path, default=None, metavar="OUT",
                        help="say what halving would have chosen in the finished tune OUT, run without it, from its "
                        "trials' own curves (nothing is trained or written)")
    p_tune.add_argument("--eta", type=int, default=None, help="with --halving-replay: halving's eta (default 3)")
    p_tune.add_argument("--rungs", type=int, default=None, help="with --halving-replay: its rungs (default 3)")
    _parallel(p_tune)
    p_tune.set_defaults(func=cmd_tune)

    p_rep = sub.add_parser("report", help="paper-style tables (markdown, LaTeX) and figure from result folders")
    p_rep.add_argument("dirs", type=Path, nargs="+", metavar="DIR",
                       help="result folders of runs or sweeps (searched for summary.csv)")
    p_rep.add_argument("--out", type=Path, default=Path("report"), help="output folder (default: report)")
    p_rep.add_argument("--baseline", default=None,
                       help="method whose time to target is 1x (default: each group's eval.baseline, else its first "
                       "synchronous entry, else its first entry)")
    p_rep.add_argument("--force", action="store_true", help="replace an existing report folder simfl wrote")
    p_rep.add_argument("--apart", action="store_true",
                       help="report runs of one scenario name whose settings differ as separate rows labelled by "
                            "folder (without it they are refused, never pooled as seeds)")
    p_rep.add_argument("--by", metavar="KEY",
                       help="one column pair per value of KEY, a scenario path (train.epochs) or an entry option "
                            "(beta; entries without it join every column), over folders of any scenario name whose "
                            "other settings agree; also draws sensitivity.png (the paper's Figure 8)")
    p_rep.add_argument("--as", dest="renames", action="append", default=[], metavar="OLD=NEW",
                       help="with --by: read the entry labelled OLD as NEW (repeatable), e.g. orthofl_chain=orthofl")
    p_rep.add_argument("--target-from", metavar="VALUE",
                       help="with --by: the target of the column KEY=VALUE for every column (default: each "
                            "column's own, 95%% of its lowest mean accuracy)")
    p_rep.set_defaults(func=cmd_report)

    p_tl = sub.add_parser("timeline", help="one run of a result folder as a schedule: what each client did over "
                          "virtual time (computing, waiting, failed, absent) and the updates")
    p_tl.add_argument("dir", type=Path, metavar="DIR", help="a result folder (the --out of simfl run)")
    p_tl.add_argument("--entry", default=None, help="the entry (default: the folder's first)")
    p_tl.add_argument("--seed", type=int, default=None, help="the seed (default: the entry's first)")
    p_tl.add_argument("--out", type=Path, default=None,
                      help="the PNG to write (default: DIR/timeline-<entry>-seed<k>.png)")
    p_tl.set_defaults(func=cmd_timeline)

    p_models = sub.add_parser("models", help="trainable and total parameter counts and sizes of every model")
    p_models.add_argument("names", nargs="*", help="models to list (default: all)")
    p_models.set_defaults(func=cmd_models)

    p_tr = sub.add_parser("traces", help="derive latency statistics from raw device logs, draw delay figures")
    tr = p_tr.add_subparsers(dest="traces_command", required=True, parser_class=_Parser)
    p_imp = tr.add_parser("import", help="derive devices.csv, pooled.json, uploads.csv from raw gateway logs")
    p_imp.add_argument("raw", type=Path, help="folder with gw{1,2,3}_{comp,round}_delay.txt")
    p_imp.add_argument("--out", type=Path, default=Path("latency_traces"), help="output folder")
    p_imp.add_argument("--force", action="store_true", help="replace the three files there if simfl wrote them")
    p_imp.set_defaults(func=cmd_traces_import)
    p_show = tr.add_parser("show", help="histograms of measured vs simulated delay distributions (PNG)")
    p_show.add_argument("--out", type=Path, default=Path("delay_patterns.png"), help="PNG file to write")
    p_show.add_argument("--clients", type=int, default=100, help="simulated clients")
    p_show.add_argument("--rounds", type=int, default=10000, help="rounds per client")
    p_show.add_argument("--seed", type=int, default=0, help="seed of the draws")
    p_show.add_argument("--force", action="store_true", help="replace an existing figure simfl wrote")
    _max_memory(p_show, hours=False)
    p_show.set_defaults(func=cmd_traces_show)

    p_data = sub.add_parser("data", help="datasets in the data folder ($SIMFL_DATA, default ~/.cache/simfl)")
    data_sub = p_data.add_subparsers(dest="data_command", required=True, parser_class=_Parser)
    p_fetch = data_sub.add_parser("fetch", help="download a dataset from its official source (checksums checked)")
    p_fetch.add_argument("name", help="mnist, cifar10, cifar100, newsgroups, har or hapt")
    p_fetch.add_argument("--root", type=Path, default=None,
                         help="data folder to fill (default: $SIMFL_DATA if set, else ~/.cache/simfl)")
    p_fetch.add_argument("--force", action="store_true", help="download again even when the files are there")
    p_fetch.add_argument("--quiet", action="store_true", help="no progress bar")
    p_fetch.set_defaults(func=cmd_data_fetch)
    return parser


def _load(args: argparse.Namespace) -> Scenario:
    from simfl.schema import scenario as scenario_mod

    overrides = list(args.overrides) + _baseline_override(args)
    if getattr(args, "seeds", None):
        overrides.append("seeds=[" + ",".join(str(s) for s in args.seeds) + "]")
    scn = scenario_mod.load(args.file, overrides)
    if getattr(args, "only", None):
        scn.algorithms = _only(scn, args.only)
    return scn


def _only(scn: Scenario, text: str) -> list[object]:
    """The scenario's algorithm entries named in ``text`` (comma-separated labels or names), in scenario order."""
    from simfl.algorithms.configs import run_name

    wanted = [w.strip() for w in text.split(",") if w.strip()]
    names = [run_name(a) for a in scn.algorithms]
    unknown = [w for w in wanted if w not in names]
    if unknown or not wanted:
        raise InputError("--only", f"no entry named {unknown[0] if unknown else repr(text)}; the scenario has: "
                         f"{', '.join(names)}")
    if scn.eval.baseline is not None and scn.eval.baseline not in wanted:
        raise InputError("--only", f"leaves out the baseline {scn.eval.baseline} (eval.baseline); keep it, or choose "
                         "another with --baseline")
    return [a for a, n in zip(scn.algorithms, names, strict=True) if n in wanted]


def cmd_validate(args: argparse.Namespace) -> int:
    from simfl.output.tracking import check_installed
    from simfl.schema import scenario as scenario_mod
    from simfl.schema.limits import check_cells

    scn = _load(args)
    check_installed(scn.tracking)  # what run would refuse, validate refuses too
    lines = _check_estimate(scn, args, check_cells(scn.sweep, str(args.file)))
    if scn.tune is not None:
        from simfl import outdir
        from simfl.launch.tune import disk_needs, estimate_line, plan_of, tune_seconds, tune_units
        from simfl.launch.workers import workers_for
        from simfl.schema import limits

        tuning = plan_of(scn, str(args.file))
        needs = disk_needs(tuning, args.out if args.out is not None else outdir.default_out(f"{scn.name}-tune"))
        limits.check_needs(needs, f"{args.file}: estimate of the tune")
        cost = tune_seconds(tuning)
        lines.append(estimate_line(tuning, cost))
        lines += limits.needs_lines(needs, "tune disk")
        if cost is not None:
            lines.append(_cost_text("the tune", cost[0], cost[0], workers_for(None, [scn], tune_units(tuning)),
                                    "" if not tuning.rungs else f" ({_span(cost[1], cost[1])} of one core without "
                                    "halving)"))
    sys.stdout.write(scenario_mod.dump(scn))
    print("\n".join(lines))
    plan = scn.seed_plan  # sequential seeds: the estimate above is of the first batch
    seeds = f"{len(scn.seeds)} seeds" if plan is None else f"{plan.first} to {plan.most} seeds, sequential"
    print(f"# {args.file}: valid ({len(scn.algorithms)} algorithms x {seeds})", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from simfl import outdir
    from simfl.launch.checkpoint import parse_every

    every = parse_every(args.checkpoint_every) if args.checkpoint_every is not None else None
    if args.resume is not None:
        if args.file is not None or args.overrides or args.seeds or args.only or args.out is not None or \
                getattr(args, "baseline", None) is not None:
            raise InputError("--resume", "takes no scenario file, --out, --set, --seeds, --only or --baseline: it "
                             "continues OUT as it was")
        with outdir.hold(args.resume):
            return _run_resumed(args, every)
    if args.file is None:
        raise InputError("run", "needs a scenario file (or --resume OUT)")
    return _run_fresh(args, _load(args), every)


def _wall(args: argparse.Namespace, scn: Scenario | None) -> float | None:
    """``--checkpoint-wall`` in seconds (None: off; not given: the default, or with ``scn`` None the folder's own), refused
    where the scenario's runs cannot be checkpointed."""
    from simfl.launch.checkpoint import WALL_DEFAULT, parse_wall

    text = getattr(args, "checkpoint_wall", None)
    if text is None:
        return WALL_DEFAULT
    wall = parse_wall(text)
    if wall is not None and scn is not None:
        _checkpointable(scn, "--checkpoint-wall")
    return wall


def _checkpointable(scn: Scenario, option: str) -> None:
    """Refuse a checkpoint option that the scenario's runs cannot honour (a ServerApp's ``main`` under way, ``record:``)."""
    if scn.record is not None:
        raise InputError(option, "cannot be combined with record: (recordings are not checkpointed)")
    for i, config in enumerate(scn.algorithms):
        if not scn.checkpointable(i):
            raise InputError(option, f"algorithms[{i}] ({config.name}): its runs cannot be checkpointed (a ServerApp's "
                             "main is Python code under way); --resume OUT starts an unfinished one again, with the "
                             "same numbers")


def _run_fresh(args: argparse.Namespace, scn: Scenario, every: Every | None) -> int:
    """Run ``scn`` into ``--out`` (default: runs/<scenario name>), after its estimate's checks."""
    from simfl import outdir
    from simfl.launch.measure_speeds import ensure
    from simfl.launch.runner import fresh_target, workers_for

    if every is not None:
        _checkpointable(scn, "--checkpoint-every")
    wall = _wall(args, scn)
    ensure(scn, args.max_memory)  # this machine's speeds for the estimate, measured once (torch is loaded for the run anyway)
    out = args.out if args.out is not None else outdir.default_out(scn.name)
    workers = workers_for(args.workers, [scn], len(scn.algorithms) * len(scn.seeds), ray=args.ray is not None)
    spare = getattr(args, "spare", False)
    pool = _spare_pool(scn, spare, workers, args)  # estimated with the pool's processes, the most it can hold
    _check_run(scn.model_copy(update={"executor": scn.executor.spared(pool)}), args, every, wall, out, workers)
    with outdir.hold(out):
        target = fresh_target(scn, out, args.force, None if every is None else every.text, args.verify, wall, spare)
        return _launch(args, target, workers, pool)


def _run_resumed(args: argparse.Namespace, every: Every | None) -> int:
    """``simfl run --resume OUT``: the unfinished runs of OUT, as its scenario and checkpoints say (``--checkpoint-every``
    and ``--checkpoint-wall`` given again replace the folder's)."""
    from simfl.launch.checkpoint import Session, parse_wall
    from simfl.launch.measure_speeds import run_wall
    from simfl.launch.runner import Target, workers_for
    from simfl.output.results import OutputFolder
    from simfl.schema import scenario as scenario_mod

    folder = OutputFolder(args.resume, force=args.force, reopen=True)
    scn = scenario_mod.load(folder.path("scenario.yaml"))
    saved_every, saved_verify, saved = Session.reopen(folder.stage)
    given = getattr(args, "checkpoint_wall", None)
    wall = Session.saved_wall(saved) if given is None else parse_wall(given)
    session = Session(folder.stage, every or saved_every, args.verify or saved_verify, saved, wall,
                      Session.saved_spare(saved))
    target = Target(scn, folder, session, resumed=True, estimate=run_wall(scn))
    workers = workers_for(args.workers, [scn], len(scn.algorithms) * len(scn.seeds), ray=args.ray is not None)
    return _launch(args, target, workers, _spare_pool(target.scn, target.session.spare, workers, args))


def _spare_pool(scn: Scenario, spare: bool, workers: int, args: argparse.Namespace) -> int:
    """The workers of the pool each of ``workers`` runs side by side may start where its launch leaves it the cores
    (``spare``: a Flower App's ClientApp calls, once heavy; not on Ray, whose nodes hold their own cores)."""
    if not spare or args.ray is not None:
        return 0
    from simfl.launch.flwr_app import spare_pool

    return spare_pool(scn.executor.train_threads(), workers)


def _launch(args: argparse.Namespace, target: Target, workers: int, pool: int) -> int:
    """Run the target's unfinished runs (each with a spare pool of ``pool`` workers, :func:`_spare_pool`), then print
    the comparison of its entries, the verdict and its folder."""
    from simfl.launch.runner import Launch, VerifyFailed, run_targets

    try:
        done = run_targets([target], Launch(workers, args.ray, quiet=args.quiet, clock=getattr(args, "clock", "auto"),
                                            pool=pool))[0]
    except VerifyFailed as exc:
        print(one_line(f"simfl: verify: {exc.line}; results so far in {exc.out} (marked FAILED)"), file=sys.stderr)
        return 1
    print(done.comparison.text())
    drawn = _timelines(done.out, target.scn) if getattr(args, "timeline", False) else []
    print(f"results: {done.out}  (comparison.md, comparison.csv, accuracy.png{''.join(', ' + p.name for p in drawn)})")
    return 0


def _timelines(folder: Path, scn: Scenario) -> list[Path]:
    """``--timeline``: each entry's first run of ``folder`` drawn as ``simfl timeline`` draws it, into the folder."""
    from simfl.algorithms.configs import run_name
    from simfl.launch.api import followed_absences, population
    from simfl.output.timeline import read_spans, write_timeline

    drawn = []
    for config in scn.algorithms:
        run = read_spans(folder, run_name(config), None, lambda seed: followed_absences(folder, seed))
        title = f"{folder.name}: {run.entry}, seed {run.seed}"
        drawn.append(write_timeline(run, folder / f"timeline-{run.entry}-seed{run.seed}.png", title, population(folder)))
    return drawn


def _check_run(scn: Scenario, args: argparse.Namespace, every: Every | None, wall: float | None, out: Path,
               workers: int) -> None:
    """Refuse a run whose estimate exceeds a limit (memory, evaluations, checkpoints, the disk of ``out``),
    before anything is written."""
    from simfl.schema import limits

    _check_clients(scn)
    est = _estimate(scn, every, wall)
    limits.check(est, args.max_memory or limits.default_max_memory(), f"{args.file}: estimate", args.max_hours)
    if every is not None:
        limits.check_checkpoints(est, every.updates, every.seconds)
    _check_out(est, out, f"{args.file}: estimate", workers)


def cmd_flwr_run(args: argparse.Namespace) -> int:
    """``simfl flwr run APP_DIR``: a Flower App as ``flwr run`` runs it, in virtual time (:mod:`simfl.launch.flwr_app`)."""
    from simfl import names, outdir
    from simfl.launch import flwr_app
    from simfl.launch.checkpoint import parse_every
    from simfl.schema import scenario as scenario_mod
    from simfl.train.configs import require

    require("flwr run")
    app = flwr_app.read_app(args.app_dir)
    every = parse_every(args.checkpoint_every) if args.checkpoint_every is not None else None
    flwr_app.importable(args.app_dir)
    if args.resume is not None:
        if (args.scenario is not None or args.overrides or args.seeds or args.run_config or args.federation_config
                or args.out is not None or args.compare is not None):
            raise InputError("--resume", "takes no --scenario, --set, --seeds, --run-config, --federation-config, "
                             "--compare or --out: it continues OUT as it was")
        with names.trusting(app.components()), outdir.hold(args.resume):
            flwr_app.check_resumed(app, args.resume)
            return _run_resumed(args, every)
    base = scenario_mod.read_yaml(args.scenario) if args.scenario is not None else {}
    for text in args.overrides + ([f"seeds=[{','.join(map(str, args.seeds))}]"] if args.seeds else []):
        scenario_mod.apply_override(base, text)
    run_config = flwr_app.parse_pairs(args.run_config, "--run-config")
    federation = flwr_app.parse_pairs(args.federation_config, "--federation-config")
    rules = flwr_app.compared(args.compare) if args.compare is not None else None
    where = str(args.scenario) if args.scenario is not None else str(args.app_dir)
    args.file = args.scenario or args.app_dir

    def validate(raw: dict[str, object]) -> Scenario:
        scn = scenario_mod.validate(raw, where=where)
        if args.scenario is not None:
            scn = scenario_mod.resolve_paths(scn, args.scenario.parent)
        if rules is not None:  # --compare refuses what a run would, before anything runs
            _check_clients(scn)
        return scn

    # Running the app's own code is what the command is for, as with flwr run; an import path the scenario or a --set
    # names is that file's, and needs --allow-imports as under simfl run.
    with names.trusting(app.components()):
        raw = flwr_app.app_scenario(app, base, run_config, federation, rules)
        if rules is not None:
            flwr_app.check_rules(raw, validate, where)
        scn = validate(raw)
        if rules is not None:
            flwr_app.check_model(scn)
        if "latency" not in base and not args.quiet:
            print(f"simfl: {flwr_app.LATENCY_NOTE}", file=sys.stderr, flush=True)
        args.spare = flwr_app.leaves_executor(raw)
        return _run_fresh(args, scn, every)


def cmd_quickstart(args: argparse.Namespace) -> int:
    """``simfl run`` on the scenario shipped in the package (works from an installed wheel)."""
    from simfl.scenarios import shipped

    args.file, args.checkpoint_every, args.resume, args.verify, args.only = shipped("quickstart"), None, None, False, None
    args.checkpoint_wall = None
    args.workers, args.ray = None, None
    code = cmd_run(args)
    if code == 0:  # what the answer above rests on, and how to make it one that can be quoted
        print(f"entries: run as the scenario writes them, untuned; `simfl tune {args.file} --seeds 5` searches each on "
              "equal terms (its tune: section; about a minute on 2 cores), then `simfl run <tune folder>/best.yaml` "
              "compares the tuned entries (docs/fair-comparisons.md)")
    return code


def cmd_timeline(args: argparse.Namespace) -> int:
    from simfl.launch.api import followed_absences, population
    from simfl.output.timeline import read_spans, write_timeline

    folder = args.dir
    run = read_spans(folder, args.entry, args.seed, lambda seed: followed_absences(folder, seed))
    out = args.out if args.out is not None else folder / f"timeline-{run.entry}-seed{run.seed}.png"
    if out.exists() and not out.is_file():
        raise InputError(str(out), "is not a file; give --out a PNG file's path")
    print(f"wrote {write_timeline(run, out, f'{folder.name}: {run.entry}, seed {run.seed}', population(folder))}")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    from simfl.schema.reference import reference

    sys.stdout.write(reference())
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from simfl.launch.grid import run_sweep

    overrides = list(args.overrides) + _baseline_override(args)
    if args.seeds:
        overrides.append("seeds=[" + ",".join(str(s) for s in args.seeds) + "]")
    outcome = run_sweep(args.file, args.out, overrides, workers=args.workers, ray_address=args.ray,
                        max_memory=args.max_memory, quiet=args.quiet, max_hours=args.max_hours,
                        checkpoint_wall=_wall(args, None), clock=args.clock)
    print(outcome.verdicts())
    print(f"{len(outcome.cells)} cells: {len(outcome.ran)} run, {len(outcome.skipped)} already finished")
    print(f"results: {outcome.out}  (comparison.md, comparison.csv, sweep.png; paper tables: simfl report {outcome.out})")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from simfl.launch.tune import (
        BEST_FILE,
        TRIALS_FILE,
        broken_notes,
        edge_notes,
        halving_note,
        resolution_notes,
        rule_notes,
        tune,
    )

    if args.halving_replay is not None:
        return _halving_replay(args)
    if args.eta is not None or args.rungs is not None:
        raise InputError("--eta, --rungs", "go with --halving-replay; a tune's own halving is its tune.halving")
    overrides = list(args.overrides)
    if args.seeds:
        overrides.append("seeds=[" + ",".join(str(s) for s in args.seeds) + "]")
    outcome = tune(args.file, args.out, overrides, workers=args.workers, ray_address=args.ray, resume=args.resume,
                   quiet=args.quiet)
    best = outcome.best()
    for entry in outcome.plan.entries:
        trial = best.get(entry.name)
        if trial is not None:
            values = ", ".join(f"{k}={v}" for k, v in trial.values().items())
            print(f"{entry.name}: {values}  ({outcome.plan.config.score} {trial.score:.4f}, trial {trial.number})")
    halved = halving_note(outcome.plan, outcome.trials)
    print(f"halving: {halved}" if halved is not None else outcome.plan.halving_note)
    for note in edge_notes(outcome.plan, best):
        print(f"at an edge: {note}")
    for note in resolution_notes(outcome.plan, outcome.out, best, outcome.trials):
        print(f"not separated: {note}")
    for note in broken_notes(outcome.trials):
        print(f"diverged: {note}")
    for note in rule_notes(outcome.plan, outcome.out, outcome.trials, best):
        print(f"scored by {note}")
    print(f"{len(outcome.trials)} trials ({outcome.ran} run now); every trial: {outcome.out / TRIALS_FILE}")
    print(f"best configuration: {outcome.out / BEST_FILE}  (compare on the test set: simfl run {outcome.out / BEST_FILE})")
    return 0


def _halving_replay(args: argparse.Namespace) -> int:
    """``simfl tune --halving-replay OUT``: print what halving would have chosen there."""
    from pydantic import ValidationError

    from simfl.launch.tune import replay_halving
    from simfl.schema.tuning import HalvingConfig

    if args.file is not None or args.out is not None or args.resume is not None or args.overrides:
        raise InputError("--halving-replay", "takes no scenario file, --out, --resume or --set: it reads OUT's trials")
    given = {k: v for k, v in (("eta", args.eta), ("rungs", args.rungs)) if v is not None}
    try:
        halving = HalvingConfig(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(f"--{first['loc'][0]}", str(first["msg"])) from None
    for line in replay_halving(args.halving_replay, halving).lines():
        print(line)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    if args.by is None:
        if args.renames or args.target_from is not None:
            raise InputError("--as" if args.renames else "--target-from", "applies only with --by KEY")
        from simfl.output.report import write_report

        files = write_report(args.dirs, args.out, baseline=args.baseline, force=args.force, apart=args.apart).files()
    else:
        if args.apart:
            raise InputError("--apart", "does not apply with --by, which groups runs by KEY whatever their names")
        from simfl.output.sensitivity import Setting, parse_renames, write_sensitivity

        setting = Setting(args.by, parse_renames(args.renames), args.target_from)
        files = write_sensitivity(args.dirs, args.out, setting, baseline=args.baseline, force=args.force)
    print(next(p for p in files if p.name == "table.md").read_text())
    print(f"wrote {', '.join(str(p) for p in files)}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from simfl.models.summary import format_table, listed, summary

    rows = []
    for name in args.names or listed():
        try:
            rows.extend(summary([name]))
        except InputError as exc:
            if args.names:
                raise
            print(f"# {name}: skipped ({exc.message})", file=sys.stderr)
    print(format_table(rows))
    return 0


def cmd_traces_import(args: argparse.Namespace) -> int:
    from simfl.latency.traces import import_traces

    import_traces(args.raw, args.out, force=args.force)
    print(f"wrote devices.csv, pooled.json, uploads.csv to {args.out}")
    return 0


def cmd_traces_show(args: argparse.Namespace) -> int:
    from simfl.latency.plots import show
    from simfl.schema.limits import check_draws, default_max_memory

    for name in ("clients", "rounds"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name}", f"must be at least 1, got {getattr(args, name)}")
    check_draws(args.clients, args.rounds, args.max_memory or default_max_memory())
    show(args.out, clients=args.clients, rounds=args.rounds, seed=args.seed, force=args.force)
    print(f"wrote {args.out}")
    return 0


def cmd_data_fetch(args: argparse.Namespace) -> int:
    from simfl.data.download import fetch
    from simfl.data.files import data_root
    from simfl.data.verify import verify

    root = data_root(args.root.absolute() if args.root is not None else None)
    fetch(args.name, root, progress=not args.quiet, force=args.force)
    checked = verify(args.name, root)  # files already present are checked as fresh downloads are
    if not args.quiet:
        for line in checked:
            print(f"{args.name}: {line}", file=sys.stderr)
    print(f"{args.name}: ready in {root}")
    return 0


def one_line(text: str) -> str:
    """``text`` with line breaks and other unprintable characters escaped, so an error stays one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``simfl`` command; returns the exit code."""
    from simfl import outdir

    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None
    held = len(outdir.HELD)  # the output folders this command takes are those held from here on
    try:
        args = parser.parse_args(argv)
        with allowing_imports(bool(getattr(args, "allow_imports", False))), _sigterm_as_interrupt():
            code = int(args.func(args))
        sys.stdout.flush()  # a reader that left shows here, not as a second error at exit (stdout buffered in a pipe)
        return code
    except NoSpace as exc:
        print(one_line(f"simfl: {exc}; what finished is kept: free some room, then {_again(args)} continues"),
              file=sys.stderr)
        return EXIT_USAGE
    except InputError as exc:
        print(f"simfl: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except ValidationError as exc:  # a component validated its own input late
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        print(one_line(f"simfl: {where}: {first['msg']}"), file=sys.stderr)
        return EXIT_USAGE
    except UserCodeFailed as exc:  # the user's own code (a Flower ClientApp) failed: its traceback in a file
        from simfl.crash import user_code

        out = getattr(args, "resume", None) or getattr(args, "out", None)
        print(one_line(user_code(exc, argv, out if isinstance(out, Path) else None)), file=sys.stderr)
        return EXIT_USAGE
    except WorkerLost as exc:
        print(one_line(f"simfl: {exc}; what finished is kept: {_again(args)} runs the rest"), file=sys.stderr)
        return 1
    except Terminated:
        print(one_line(_interrupted("terminated by SIGTERM", args, outdir.HELD[held:])), file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(one_line(_interrupted("interrupted", args, outdir.HELD[held:])), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout left (e.g. `| head`); the files are written by then
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except MemoryError:
        print("simfl: out of memory; `simfl validate FILE` estimates what a scenario needs (see --max-memory)",
              file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        if exc.errno in FULL_ERRNOS:  # a write this module did not name: still the machine's limit, not a bug
            print(one_line(f"simfl: {exc.filename or 'a file being written'}: {exc.strerror} (the disk or quota is "
                           "full, or a file-size limit was reached)"), file=sys.stderr)
            return EXIT_USAGE
        if exc.filename is None:
            return _crash(exc, argv, args)
        print(one_line(f"simfl: {exc.filename}: {exc.strerror or exc}"), file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # the last resort: a bug, reported in one line with a crash file
        return _crash(exc, argv, args)


def _interrupted(how: str, args: argparse.Namespace | None, held: Sequence[Path]) -> str:
    """The line after Ctrl-C or SIGTERM: where what finished is, only where the command left it (``held``: the output
    folders it took): a run's staging folder, or the folder a sweep or tune writes into; else that no results were
    written (``simfl validate``, or a launch stopped before its folder was made)."""
    for out in reversed(held):
        stage = out.with_name(out.name + ".partial")
        if stage.is_dir():
            see = " (see its INCOMPLETE file)" if (stage / "INCOMPLETE").is_file() else ""
            return f"simfl: {how}; what finished is in the .partial folder{see}"
        if args is not None and getattr(args, "func", None) in (cmd_sweep, cmd_tune) and out.is_dir():
            return f"simfl: {how}; what finished is in {out}: {_again(args)} continues"
    return f"simfl: {how}; no results were written"


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread (as Ctrl-C raises KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(_signum: int, _frame: object) -> None:
        raise Terminated()

    before = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _again(args: argparse.Namespace | None) -> str:
    """The command that continues an interrupted launch."""
    if args is not None and getattr(args, "func", None) is cmd_sweep:
        return "the same `simfl sweep` command"
    if args is not None and getattr(args, "func", None) is cmd_tune:
        return f"`simfl tune --resume {args.resume or args.out or 'OUT'}`"
    out = getattr(args, "resume", None) or getattr(args, "out", None)
    if args is not None and getattr(args, "func", None) is cmd_flwr_run:
        return f"`simfl flwr run {args.app_dir} --resume {out if out is not None else 'OUT'}`"
    return f"`simfl run --resume {out if out is not None else 'OUT'}`"


def _crash(exc: BaseException, argv: Sequence[str], args: argparse.Namespace | None) -> int:
    from simfl.crash import report

    out = getattr(args, "resume", None) or getattr(args, "out", None)
    print(one_line(report(exc, argv, out if isinstance(out, Path) else None)), file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
