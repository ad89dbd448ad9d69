"""Runs a scenario into a result folder: the body shared by ``simfl run`` and every sweep cell.

It runs each (algorithm, seed) not yet finished, grows its metrics.csv and
events.csv in the staging folder at each evaluation (``tail -f`` them), feeds
the scenario's live trackers (:mod:`simfl.tracking`), writes its files as soon as
it ends, keeps the checkpoint session up to date, and finally writes
summary.csv and accuracy.png and publishes the folder. A run stopped by
``--verify`` is published with a FAILED marker and reported as
:class:`VerifyFailed`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from simfl import scenario as scenario_mod
from simfl.algorithms.base import run_name
from simfl.checkpoint import CHECKPOINT_FILE, FAILED_FILE, FRESH, Session
from simfl.errors import InputError
from simfl.experiment import RunOptions, chain, federation, load_dataset, run_one
from simfl.plots import accuracy_vs_time
from simfl.report import add_time_to_target
from simfl.results import SUMMARY_COLUMNS, GrowingRun, OutputFolder, read_metrics, summary_row, write_csv, write_run
from simfl.scenario import Scenario
from simfl.sim.engine import Progress
from simfl.sim.verify import RunStopped
from simfl.tracking import Tracking


@dataclass(frozen=True)
class Completed:
    """A published result folder and its comparison data."""

    out: Path
    summary: pd.DataFrame
    target: float


class VerifyFailed(Exception):
    """``--verify`` stopped a run; the folder is published with a FAILED marker."""

    def __init__(self, out: Path, line: str) -> None:
        super().__init__(line)
        self.out = out
        self.line = line


def run_into(
    scn: Scenario,
    folder: OutputFolder,
    session: Session,
    progress_factory: Callable[[str, int], Progress | None] | None = None,
    keep_on_input_error: bool = False,
) -> Completed:
    """Run every unfinished (algorithm, seed) of ``scn`` into ``folder`` and publish it.

    For each seed: one federation (data shards, initial model) shared by its algorithms;
    each run's files are written as soon as it ends.
    """
    session.mark_incomplete()
    summary_rows: list[dict[str, object]] = [f["row"] for f in session.finished]
    metrics: dict[tuple[str, int], pd.DataFrame] = {
        (f["algorithm"], f["seed"]): read_metrics(folder.stage, f["algorithm"], f["seed"]) for f in session.finished
    }
    try:
        tracker = None if scn.tracking is None else Tracking(scn.tracking, scn.name, scenario_mod.dump(scn), folder.out)
        dataset = load_dataset(scn)
        for seed in scn.seeds:
            fed = federation(scn, dataset, seed)
            for index, config in enumerate(scn.algorithms):
                name = run_name(config)
                if session.is_finished(name, seed):
                    continue
                resume, prior_wall = session.resume_data(name, seed)
                growing = GrowingRun(folder.stage / name / f"seed{seed}")
                feed = None if tracker is None else tracker.open(
                    name, index, seed, prior_wall, len(resume["state"]["events"]) if resume is not None else 0)
                shown = progress_factory(name, seed) if progress_factory else None
                watchers: list[Progress] = [growing] if feed is None else [growing, feed.progress]
                progress = chain(watchers + ([shown] if shown is not None else []))
                options = RunOptions(progress, session.verify, session.checkpointing(name, seed, prior_wall), resume,
                                     on_update=None if feed is None else feed.on_update)
                try:
                    result = run_one(scn, fed, index, options)
                except BaseException as exc:
                    growing.close()
                    if feed is not None:
                        feed.finish({}, failed=True)
                    if isinstance(exc, InputError) and resume is not None and exc.where == "checkpoint":
                        raise InputError(str(session.stage / CHECKPOINT_FILE), f"{exc.message}; {FRESH}") from None
                    raise
                growing.close()
                wall = result.wall_seconds + prior_wall
                write_run(folder, name, seed, result.state)
                row = summary_row(name, seed, result.state, wall)
                if feed is not None:
                    feed.finish(row)
                summary_rows.append(row)
                metrics[(name, seed)] = pd.DataFrame([m.row() for m in result.state.metrics])
                session.finish(name, seed, row)
    except InputError:
        if not keep_on_input_error:
            folder.discard()
        raise
    except RunStopped as exc:
        write_run(folder, exc.algorithm, exc.seed, exc.state)
        write_csv(folder.path("summary.csv"), SUMMARY_COLUMNS, summary_rows)
        folder.path(FAILED_FILE).write_text(
            f"status: failed (--verify)\nrun: {exc.algorithm} seed{exc.seed}\ninvariant: {exc.message}\n"
        )
        session.close()
        raise VerifyFailed(folder.publish(), f"{exc.algorithm} seed{exc.seed}: {exc.message}") from None
    except KeyboardInterrupt:
        session.remove_tmp()
        session.mark_incomplete("interrupted by SIGINT")
        raise
    summary, target = add_time_to_target(pd.DataFrame(summary_rows, columns=SUMMARY_COLUMNS), metrics,
                                         scn.eval.target)
    write_csv(folder.path("summary.csv"), SUMMARY_COLUMNS, summary.to_dict("records"))
    accuracy_vs_time(metrics, folder.path("accuracy.png"), title=scn.name)
    session.close()
    return Completed(folder.publish(), summary, target)
