"""Fills result folders with runs: the body shared by ``simfl run``, every ``simfl sweep`` and the API.

A result folder (a scenario's ``--out``, or one sweep cell) is a :class:`Target`. Its
unfinished (entry, seed) runs become units (:mod:`simfl.launch.units`) that a backend of
:mod:`simfl.launch.parallel` runs here, in worker processes or on Ray; this process alone writes
the folders: each run's metrics.csv and events.csv grow in the staging folder at each
evaluation (``tail -f`` them) and are written in whole as soon as the run ends, each run's
checkpoint is kept in the staging folder, and the folder's bookkeeping
(:class:`~simfl.launch.checkpoint.Session`) records every finished run. When a folder's last run
ends, summary.csv (rows in the scenario's order: seeds, then entries), the comparison of its entries
(comparison.csv and comparison.md, :mod:`simfl.output.comparison`) and accuracy.png are written and the
folder is published, while other folders' runs go on. So the files are the
same, byte for byte, whatever the number of workers and wherever the runs went (only
summary.csv's ``wall_seconds`` measures the machine). A scenario with sequential seeds (``seeds: {first: 3,
most: 10}``, :class:`~simfl.schema.scenario.SeedPlan`) is run a look at a time: when a folder's runs of one
look have ended, the comparison of those runs (read back from their files, as the published one is) says whether
every entry's comparison with the baseline is settled (:mod:`simfl.output.sequential`); if not, every entry runs
the next batch of seeds, else the folder is published. Decisions are made only from finished runs' files, so
``--workers`` and ``--resume`` (which replays them) give the same looks. A run stopped by ``--verify`` is
published with a FAILED marker and reported as :class:`VerifyFailed`; one that could make no
progress (:meth:`simfl.sim.world.World.note`) likewise, reported as an :class:`InputError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from simfl import numerics, outdir
from simfl.data import Dataset
from simfl.errors import InputError, NoSpace, UserCodeFailed, WorkerLost
from simfl.launch.checkpoint import CHECKPOINT_FILE, FAILED_FILE, WALL_DEFAULT, Session, keep_run, kept_run, parse_every
from simfl.launch.experiment import Engine
from simfl.launch.measure_speeds import learn, run_wall
from simfl.launch.parallel import Backend, InProcess, LocalWorkers, RayTasks
from simfl.launch.progress import Progress
from simfl.launch.units import Done, Grown, Message, Moved, Saved, Stopped, Unit, units_of
from simfl.launch.workers import WORKERS_ENV as WORKERS_ENV  # re-exported
from simfl.launch.workers import unit_cpus
from simfl.launch.workers import workers_for as workers_for  # re-exported
from simfl.output import comparison as comparing
from simfl.output.comparison import Comparison, Runs
from simfl.output.plots import accuracy_vs_time
from simfl.output.results import SUMMARY_COLUMNS, OutputFolder, append_to, read_metrics, write_csv, write_run
from simfl.output.target import percent
from simfl.schema.scenario import Scenario


@dataclass(frozen=True)
class Completed:
    """A published result folder and the comparison of its entries."""

    out: Path
    summary: pd.DataFrame
    comparison: Comparison


class VerifyFailed(Exception):
    """``--verify`` stopped a run; the folder is published with a FAILED marker."""

    def __init__(self, out: Path, line: str) -> None:
        super().__init__(line)
        self.out = out
        self.line = line


@dataclass
class Target:
    """One result folder to fill: its scenario, staging folder and bookkeeping."""

    scn: Scenario
    folder: OutputFolder
    session: Session
    label: str = ""
    """How progress lines name the folder (a sweep cell's name; empty for a single run)."""
    resumed: bool = False
    """Continued from an earlier launch: a user mistake keeps its staging folder instead of removing it."""
    estimate: float = 1.0
    """Estimated wall seconds of one of its runs."""
    left: set[tuple[str, int]] = field(default_factory=set)
    """Runs not finished yet, as (entry name, seed)."""
    published: Completed | None = None
    keep: Path | None = None
    """Where each run that can be checkpointed is kept as its time budget stops it
    (:func:`~simfl.launch.checkpoint.keep_run`), for a later budget to continue; None: not kept."""
    start_from: Path | None = None
    """Where runs kept so (at :attr:`start_at` virtual seconds) are continued from, by the runs without a checkpoint of
    their own; None: they start at time 0."""
    start_at: float = 0.0
    """The virtual time of the runs kept in ``start_from``."""


@dataclass(frozen=True)
class Launch:
    """How units are run: where, how many side by side, and what is shown."""

    workers: int = 1
    """Units side by side on this machine (1: one after another in this process)."""
    ray: str | None = None
    """Run units as Ray tasks: ``"local"`` (a local Ray instance) or a cluster's address."""
    quiet: bool = False
    say: Callable[[str], None] | None = None
    """Receives the finished-unit lines (default: stderr)."""
    clock: Engine = "auto"
    """The clock every run is simulated on (``--clock``): ``simpy``, ``heap`` or ``auto`` (:class:`RunOptions`)."""
    pool: int = 0
    """Workers of the process pool each run with an ``inline`` executor may start once its training proves heavy
    (:attr:`Unit.pool`; 0: none)."""


class _Stop(Exception):
    """A stopped run (``--verify``, no progress), carried out of the backend."""

    def __init__(self, outcome: Stopped) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


def fresh_target(scn: Scenario, out: Path, force: bool = False, every: str | None = None,
                 verify: bool = False, wall: float | None = WALL_DEFAULT, spare: bool = False) -> Target:
    """A new result folder for ``scn`` at ``out`` (staged; ``force`` replaces one simfl wrote); its runs checkpoint
    every ``wall`` seconds of wall time (None: not) and on the ``every`` schedule; ``spare``: each may start a pool on
    the cores left over (:attr:`Session.spare`)."""
    from simfl.schema import scenario as scenario_mod

    folder = OutputFolder(out, force=force)
    folder.path("scenario.yaml").write_text(scenario_mod.dump(scn, folder.stage))
    session = Session(folder.stage, None if every is None else parse_every(every), verify, wall=wall, spare=spare)
    session.write()  # the scenario's digest, from the start: --resume refuses an edited scenario.yaml
    return Target(scn, folder, session, estimate=run_wall(scn))


def staged_target(scn: Scenario, final: Path, label: str, estimated: float | None = None,
                  checkpoint_wall: float | None = WALL_DEFAULT) -> Target:
    """The result folder ``final`` of ``scn`` (a sweep cell, a tuning trial): its unfinished staging folder
    continued when it holds this scenario's runs (a run with a checkpoint goes on from it), else a fresh one (a
    killed launch's leftovers are removed, if simfl wrote them). ``estimated``: the estimated wall seconds of one
    run, when the caller has it; its runs checkpoint every ``checkpoint_wall`` seconds of wall time (None: not)."""
    from simfl.schema import scenario as scenario_mod

    stage = final.with_name(final.name + ".partial")
    text = scenario_mod.dump(scn, stage)
    saved = None
    if (stage / "scenario.yaml").is_file() and (stage / CHECKPOINT_FILE).is_file() and outdir.is_ours(stage):
        try:
            if (stage / "scenario.yaml").read_text() == text:
                saved = Session.reopen(stage)
        except (InputError, OSError, UnicodeDecodeError):
            saved = None
    if saved is not None:
        folder = OutputFolder(final, reopen=True)
        session = Session(folder.stage, None, False, saved[2], checkpoint_wall)
    else:
        folder = OutputFolder(final, force=True)  # a killed launch's leftovers go, if simfl wrote them; a user's stay
        folder.path("scenario.yaml").write_text(text)
        session = Session(folder.stage, None, False, wall=checkpoint_wall)
        session.write()
    if estimated is None:
        estimated = run_wall(scn)
    return Target(scn, folder, session, label=label, resumed=saved is not None, estimate=estimated)


def units_for(targets: Sequence[Target], cells: Collection[int] | None = None) -> list[Unit]:
    """The unfinished runs of every target (or those of ``cells``, their indices) as units, in plan order, each with
    its saved simulation if any."""
    units: list[Unit] = []
    for index, target in enumerate(targets):
        if cells is not None and index not in cells:
            continue
        session = target.session
        every = None if session.every is None else session.every.text
        for unit in units_of(index, target.scn, target.folder.out, every, session.verify, target.estimate,
                             session.wall):
            if session.is_finished(unit.name, unit.seed):
                continue
            resume, prior = session.resume_data(unit.name, unit.seed)
            if resume is None and target.start_from is not None:
                resume, prior = kept_run(target.start_from, unit.name, unit.seed, target.start_at)
            units.append(replace(unit, resume=resume, prior_wall=prior, keep=target.keep is not None and
                                 target.scn.checkpointable(unit.index), saved_as=str(session.run_path(unit.name, unit.seed))))
            target.left.add((unit.name, unit.seed))
    return units


def backend_for(launch: Launch, units: Sequence[Unit], targets: Sequence[Target]) -> Backend:
    """Where the units run (see :class:`Launch`)."""
    if launch.ray is not None:
        from simfl.train.configs import cores

        if launch.ray != "local":
            _check_tracking_on_cluster([t.scn for t in targets])
        from simfl.launch.units import data_key, dataset_for

        cells = {u.cell: targets[u.cell].scn for u in units}

        def datasets() -> dict[str, Dataset]:
            found: dict[str, Dataset] = {}
            for scn in cells.values():
                key = data_key(scn)
                if key not in found:
                    try:
                        found[key] = dataset_for(scn)
                    except InputError:
                        pass  # the nodes must have it in their own data folder
            return found

        per_unit = max(unit_cpus(t.scn) for t in targets)
        return RayTasks(None if launch.ray == "local" else launch.ray, max(cores(), launch.workers * per_unit),
                        lambda u: ray_task_cpus(targets[u.cell].scn), datasets)
    if launch.workers > 1 and len(units) > 1 and not _only_here(targets):
        return LocalWorkers(launch.workers)
    return InProcess()


def _only_here(targets: Sequence[Target]) -> bool:
    """Whether a scenario names a class that worker processes cannot import (one of the caller's ``__main__``):
    its units then run in this process, where the class was given."""
    from simfl.schema import plugins

    return any(plugins.only_here(t.scn.model_dump(mode="json")) for t in targets)


def _check_tracking_on_cluster(scenarios: Sequence[Scenario]) -> None:
    """Trackers write where each run goes; on a cluster's nodes only a tracking server reaches the user."""
    for scn in scenarios:
        tracking = scn.tracking
        if tracking is None:
            continue
        served = tracking.mlflow is not None and (tracking.mlflow.uri or "").startswith(("http://", "https://"))
        if tracking.tensorboard is not None or tracking.wandb is not None or not served:
            raise InputError("--ray", "a tracked scenario runs on a cluster only with an MLflow tracking server "
                             "(tracking.mlflow.uri: http://...): TensorBoard, W&B and local MLflow stores would be "
                             "written on the cluster's nodes; run it with --workers instead, or on a local Ray "
                             "instance (--ray without an address)")


def ray_task_cpus(scn: Scenario) -> int:
    """Cores a unit's Ray task is declared with: what it uses, less the executor's Ray actors (which hold their own)."""
    return scn.executor.train_threads() if scn.executor.in_actors() else unit_cpus(scn)


def run_targets(targets: Sequence[Target], launch: Launch,
                on_published: Callable[[Target], None] | None = None) -> list[Completed]:
    """Run every unfinished run of ``targets`` as ``launch`` says and publish each folder when complete (with sequential
    seeds, once its last look settles its comparisons or reaches the most seeds)."""
    numerics.check()
    cells: set[int] = set(range(len(targets)))
    while cells:
        cells = _run_look(targets, cells, launch, on_published)
    return [t.published for t in targets if t.published is not None]


def _run_look(targets: Sequence[Target], cells: set[int], launch: Launch,
              on_published: Callable[[Target], None] | None) -> set[int]:
    """Run the unfinished runs of the targets of ``cells`` (their seeds so far) and publish each folder they complete;
    returns the cells whose sequential seeds take another batch."""
    units = [replace(u, clock=launch.clock, pool=launch.pool) for u in units_for(targets, cells)]
    for cell in sorted(cells):
        targets[cell].session.write()
    progress = Progress(units, launch.workers, launch.quiet, sum(len(t.session.finished) for t in targets),
                        launch.say, {i: t.label for i, t in enumerate(targets) if t.label})
    more: set[int] = set()

    def complete(cell: int) -> None:
        target = targets[cell]
        if next_look(target):
            more.add(cell)
            return
        target.published = _publish(target)
        if on_published is not None:
            on_published(target)

    def handle(item: Message | Done | Stopped) -> None:
        cell, name, seed = item.key
        target = targets[cell]
        if isinstance(item, Grown):
            append_to(target.folder.stage / name / f"seed{seed}")(item.file, item.text, item.fresh)
        elif isinstance(item, Saved):
            target.session.save_run(name, seed, item.blob, item.now, item.updates)
        elif isinstance(item, Moved):
            progress.moved(item.key, item.done)
            if item.line:
                progress.said(item.key, item.line)
        elif isinstance(item, Done):
            if item.kept is not None and target.keep is not None:  # before the folder is published: a later budget needs it
                keep_run(target.keep, name, seed, item.kept)
            write_run(target.folder, name, seed, item.files)
            target.session.finish(name, seed, item.row)
            if local and item.cpu is not None:  # its CPU time is its work, whatever ran beside it
                learn(target.scn, name, item.cpu)
            elif alone:  # its wall is this machine's alone: it teaches the estimate
                learn(target.scn, name, item.wall)
            target.left.discard((name, seed))
            note = "" if item.note is None else f" ({item.note})"
            progress.finished(item.key, item.wall, f"accuracy {item.row['final_accuracy']:.4f}{note}")
            if not target.left:
                complete(cell)
        else:
            raise _Stop(item)

    for cell in sorted(cells):
        if not targets[cell].left:  # every run finished before (a resumed folder, or one look of one replayed)
            complete(cell)
    backend = backend_for(launch, units, targets)
    alone = isinstance(backend, InProcess)  # one run at a time, here (not side by side, not on a cluster's nodes)
    local = alone or isinstance(backend, LocalWorkers)  # on this machine
    try:
        backend.run(units, handle)
    except NoSpace as exc:  # the machine's limit, not the scenario's: what finished stays, and resumes
        with contextlib.suppress(OSError):
            _close_unpublished(targets, f"stopped: {exc}")
        raise
    except InputError:
        _close_unpublished(targets, None)
        for target in targets:
            if target.published is None and not target.resumed:
                target.folder.discard()
        raise
    except _Stop as stop:
        raise _failed(targets, stop.outcome) from None
    except KeyboardInterrupt as exc:
        _close_unpublished(targets, f"interrupted by {getattr(exc, 'signal_name', 'SIGINT')}")
        raise
    except WorkerLost as exc:
        _close_unpublished(targets, f"stopped: {exc}")
        raise
    except UserCodeFailed as exc:  # the user's own code (a ClientApp, a strategy): not simfl's error, and no resume helps
        _close_unpublished(targets, f"stopped: {' '.join(str(exc).split())} (an error in that code, not in simfl)",
                           then="fix that code, then run the command again with --force (a resume would run the same "
                           "code again)")
        raise
    except Exception:
        _close_unpublished(targets, "stopped by an internal error")
        raise
    finally:
        progress.close()
    return more


def next_look(target: Target) -> bool:
    """With sequential seeds, whether the folder's runs so far (its seeds' finished files) leave some entry's comparison
    with the baseline unsettled below the most seeds; if so, its scenario takes the next batch of seeds."""
    after = seeds_after(target.scn, _metrics(target)[1])
    if after is None:
        return False
    target.scn.look_at(after)
    return True


def seeds_after(scn: Scenario, runs: Runs) -> int | None:
    """The one rule of sequential seeds' looks: how many seeds the next look runs when ``runs`` (those of ``scn``'s seeds
    so far, every entry's) leave some entry's comparison with the baseline unsettled below the plan's most; None when
    the seeds stop there (settled, the most, or no plan). A folder of ``simfl run`` and a sweep's grid point (its cells'
    runs pooled, :mod:`simfl.launch.grid`) both take it."""
    plan = scn.seed_plan
    if plan is None:
        return None
    after = plan.looks().next_size(len(scn.seeds))
    if after is None or comparison_of(scn, runs).settled:
        return None
    return after


def _close_unpublished(targets: Sequence[Target], note: str | None, then: str | None = None) -> None:
    """Leave every unpublished folder resumable: no temporary files, an INCOMPLETE that says why (and ``then``, what to
    do next, when a resume cannot help)."""
    for target in targets:
        if target.published is None and target.folder.stage.is_dir():
            target.session.remove_tmp()
            target.session.mark_incomplete(note, then)


def comparison_of(scn: Scenario, runs: Runs, name: str | None = None) -> Comparison:
    """The comparison of a scenario's runs, with its target, baseline and entries (in the scenario's order) and, with
    sequential seeds, the plan's looks."""
    from simfl.algorithms.configs import run_name

    plan = scn.seed_plan
    return comparing.compare(runs, {run_name(a) for a in scn.algorithms if a.synchronous}, scn.eval.target,
                             scn.eval.baseline, scn.name if name is None else name,
                             [run_name(a) for a in scn.algorithms], None if plan is None else plan.looks())


def figure_title(scn: Scenario, comparison: Comparison) -> str:
    """The accuracy figure's title: the scenario in a few words, and the question it answers."""
    clients = getattr(scn.data.partition, "clients", None)
    setting = f"{scn.data.dataset}{f', {clients} clients' if clients else ''}, {scn.latency.model} latencies"
    return f"{scn.name} ({setting})\nwhich rule reaches {percent(comparison.target)} accuracy first?"


def _metrics(target: Target) -> tuple[list[dict[str, Any]], dict[tuple[str, int], pd.DataFrame]]:
    """The folder's finished runs in the scenario's order (seeds, then entries) and their metrics read back from the
    staging folder. With sequential seeds only those of the seeds so far: a replayed look reads what it read before."""
    order = {(u.name, u.seed): i for i, u in enumerate(units_of(0, target.scn, target.folder.out, None, False, 1.0))}
    finished = sorted(target.session.finished, key=lambda f: order.get((f["algorithm"], f["seed"]), len(order)))
    if target.scn.seed_plan is not None:
        finished = [f for f in finished if (f["algorithm"], f["seed"]) in order]
    return finished, {(f["algorithm"], f["seed"]): read_metrics(target.folder.stage, f["algorithm"], f["seed"])
                      for f in finished}


def _summary(target: Target) -> tuple[pd.DataFrame, Comparison]:
    """summary.csv, comparison.csv/.md and accuracy.png of a complete folder (summary rows in the scenario's order)."""
    finished, metrics = _metrics(target)
    comparison = comparison_of(target.scn, metrics)
    summary = pd.DataFrame([f["row"] for f in finished], columns=SUMMARY_COLUMNS)  # the columns of summary.csv only
    summary["time_to_target"] = pd.Series([comparing.time_to_target(metrics[(f["algorithm"], f["seed"])],
                                                                     comparison.target) for f in finished], dtype=object)
    write_csv(target.folder.path("summary.csv"), SUMMARY_COLUMNS, summary.to_dict("records"))
    comparing.write(target.folder.stage, [({}, comparison)])
    accuracy_vs_time(metrics, target.folder.path("accuracy.png"), figure_title(target.scn, comparison),
                     comparison.target)
    return summary, comparison


def _publish(target: Target) -> Completed:
    summary, comparison = _summary(target)
    target.session.close()
    done = Completed(target.folder.publish(), summary, comparison)
    if target.scn.tracking is not None:  # the folder is complete whatever a tracker says
        from simfl.output.tracking import Tracking

        files = {name: (done.out / name).read_text() for name in ("scenario.yaml", "comparison.md", "comparison.csv")}
        tracking = Tracking(target.scn.tracking, target.scn.name, files.pop("scenario.yaml"), target.folder.out)
        tracking.log_comparison(comparison, files)
    return done


def _failed(targets: Sequence[Target], outcome: Stopped) -> Exception:
    """Publish the folder of a stopped run with a FAILED marker; the others stay resumable. ``--verify``'s stop is a
    :class:`VerifyFailed`; a run that could make no progress, a user mistake found while running (its scenario
    cannot reach its budget): an :class:`InputError` naming the run and where its results so far are."""
    cell, name, seed = outcome.key
    target = targets[cell]
    verify = outcome.cause == "--verify"
    _close_unpublished([t for t in targets if t is not target],
                       "stopped: another run failed --verify" if verify else f"stopped: {name} seed{seed} made no progress")
    write_run(target.folder, name, seed, outcome.files)
    rows = [f["row"] for f in target.session.finished]
    write_csv(target.folder.path("summary.csv"), SUMMARY_COLUMNS, rows)
    target.folder.path(FAILED_FILE).write_text(
        f"status: failed ({outcome.cause})\nrun: {name} seed{seed}\n{'invariant' if verify else 'why'}: {outcome.message}\n"
    )
    target.session.close()
    out = target.folder.publish()
    if verify:
        return VerifyFailed(out, f"{name} seed{seed}: {outcome.message}")
    return InputError(f"{name} seed{seed}", f"{outcome.message}; results so far in {out} (marked FAILED)")
