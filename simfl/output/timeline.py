"""A run as a schedule: what each client did over virtual time, and when the server aggregated.

Everything comes from a run's ``events.csv``, which has every processed arrival with its dispatch time and latency
and every failure, departure, return and late update (:class:`simfl.sim.state.Event`). :func:`spans` turns those
rows into intervals, one state each:

- ``compute``: a round from its dispatch to ``dispatch + latency`` (the client computing and transferring; the
  one-draw latency models do not tell the two apart); with ``network:`` (rounds in phases, docs/contention.md) the
  round's ``download``, ``compute`` and ``upload`` apart, and ``queued`` where a transfer waited for a connection;
- ``waiting``: from the end of a round to the time its update was processed, where that is later (a busy server,
  ``server_time``; zero-length otherwise, and then not listed);
- ``late``: a round whose update came after its synchronous round had closed (discarded);
- ``failed``: a round that delivered nothing (``availability.p``);
- ``cut``: a round cut short by the client's departure;
- ``absent``: from a departure to the client's return (or the run's end).

A client is idle in the gaps (between a round's end and its next dispatch: waiting for a synchronous round to close,
for a serving slot, or after a failed round's ``rejoin_delay``). A round still in flight when the run ended has no
row in events.csv, so the time after a client's last event is drawn idle too. :func:`timeline_figure` draws one row per client
for up to :data:`ROWS` clients, and beyond that the number of clients in each state over time; with rounds in
phases, under it the server's links (:func:`transfers`: the downloads in progress over its egress and the uploads
over its ingress, which share each link's bandwidth); last, the updates over time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from simfl.errors import InputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STATES = ("download", "compute", "upload", "queued", "waiting", "late", "failed", "cut", "absent")
"""The states of :func:`spans`, in the legend's order."""
COLORS = {"download": "#64b5cd", "compute": "#4c72b0", "upload": "#55a868", "queued": "#ccb974",
          "waiting": "#dd8452", "late": "#8172b3", "failed": "#c44e52", "cut": "#937860", "absent": "#c7c7c7"}
ROUND_STATES = {"arrival": "compute", "late": "late", "failure": "failed"}
"""The state of a round's compute by how the round ended."""
ROWS = 100
"""Clients drawn one row each at most; a larger population is drawn as counts of clients per state."""


def spans(events: pd.DataFrame, end: float | None = None,
          absences: Sequence[Sequence[tuple[float, float | None]]] | None = None) -> pd.DataFrame:
    """The intervals ``(client, state, start, end)`` of one run's events (see the module's documentation), sorted by
    client and start; ``end``: the run's end, where an absence without a return ends (default: the last event's time).

    ``absences``: per client, its absences as the run followed them (the scenario's departures and its latency
    trace's windows, :attr:`simfl.latency.availability.Availability.absences`); without them the absences are read
    from the events, which log a departure only where it cuts a round (a return always)."""
    horizon = (float(events["time"].max()) if len(events) else 0.0) if end is None else float(end)
    rows: list[tuple[int, str, float, float]] = []
    away: dict[int, float] = {}
    phased = all(c in events.columns for c in PHASE_COLUMNS)
    phases = events[list(PHASE_COLUMNS)].to_numpy(dtype=float) if phased else np.full((len(events), 6), np.nan)
    for kind, time, client, latency, dispatch, marks in zip(events["event"], events["time"], events["client"],
                                                            events["latency"], events["dispatch_time"], phases,
                                                            strict=True):
        m, t = int(client), float(time)
        if kind in ("arrival", "late", "failure") and not np.isnan(marks[0]):
            rows.extend(_phases(m, kind, float(dispatch), t, marks))
        elif kind in ("arrival", "late", "failure"):
            done = float(dispatch) + float(latency)
            state = ROUND_STATES[kind]
            rows.append((m, state, float(dispatch), min(done, t)))
            if kind == "arrival" and t > done:
                rows.append((m, "waiting", done, t))
        elif kind == "leave":
            if not np.isnan(dispatch):  # a round in flight, cut short
                rows.append((m, "cut", float(dispatch), t))
            away[m] = t
        elif kind == "join" and m in away:
            rows.append((m, "absent", away.pop(m), t))
    if absences is None:
        rows.extend((m, "absent", t, max(t, horizon)) for m, t in away.items())
    else:
        rows = [r for r in rows if r[1] != "absent"]
        rows.extend((m, "absent", leave, horizon if back is None else min(back, horizon))
                    for m, client_absences in enumerate(absences) for leave, back in client_absences if leave < horizon)
    table = pd.DataFrame(rows, columns=["client", "state", "start", "end"])
    return table.sort_values(["client", "start", "state"], kind="stable", ignore_index=True)


PHASE_COLUMNS = ("download_start", "download_end", "compute_start", "compute_end", "upload_start", "upload_end")
"""The columns events.csv has when rounds run in phases (docs/contention.md)."""


def _phases(client: int, kind: str, dispatch: float, time: float, marks: np.ndarray) -> list[tuple[int, str, float,
                                                                                                    float]]:
    """The intervals of one round run in phases: a wait for a connection, the download, the compute (failed or late
    where the round was), a wait for a connection, the upload, and the wait in the server's queue."""
    down0, down1, comp0, comp1, up0, up1 = marks.tolist()
    compute = ROUND_STATES[kind]
    spans = [("queued", dispatch, down0), ("download", down0, down1), (compute, comp0, comp1)]
    if not np.isnan(up0):
        spans += [("queued", comp1, up0), ("upload", up0, up1)]
        if kind == "arrival":
            spans.append(("waiting", up1, time))
    return [(client, state, a, b) for state, a, b in spans if b > a]


@dataclass(frozen=True)
class Timeline:
    """One run's schedule: its :func:`spans`, its events, which run it is and when it ended."""

    spans: pd.DataFrame
    events: pd.DataFrame
    entry: str
    seed: int
    end: float


Absences = Sequence[Sequence[tuple[float, float | None]]]
"""Per client, its absences ``(leave, rejoin)`` (rejoin None: for good)."""


def read_spans(folder: Path, entry: str | None = None, seed: int | None = None,
               absences: Callable[[int], Absences | None] | None = None) -> Timeline:
    """The :class:`Timeline` of one run of the result folder ``folder`` (default: its first entry and first seed, as
    summary.csv lists them); one line naming what is missing otherwise. ``absences``: given the seed, the absences the
    run followed (see :func:`spans`; the caller reads them from the folder's scenario, which this layer does not
    know)."""
    summary_path = folder / "summary.csv"
    if not summary_path.is_file():
        raise InputError(str(folder), "is not a finished result folder (no summary.csv); give the --out of a run")
    summary = _table(summary_path, ("algorithm", "seed"))
    names = list(dict.fromkeys(str(a) for a in summary["algorithm"]))
    entry = names[0] if entry is None else entry
    if entry not in names:
        raise InputError("--entry", f"names no entry of {folder}; its entries are {', '.join(names)}")
    seeds = [int(s) for s in summary.loc[summary["algorithm"].astype(str) == entry, "seed"]]
    seed = seeds[0] if seed is None else seed
    if seed not in seeds:
        raise InputError("--seed", f"{entry} has no run of seed {seed} in {folder}; its seeds are "
                         f"{', '.join(map(str, seeds))}")
    path = folder / entry / f"seed{seed}" / "events.csv"
    if not path.is_file():
        raise InputError(str(path), "is missing; the folder holds no events of this run")
    events = _table(path, EVENT_COLUMNS)
    row = summary[(summary["algorithm"].astype(str) == entry) & (summary["seed"] == seed)].iloc[0]
    end = float(row["virtual_time"]) if "virtual_time" in summary.columns else float(events["time"].max())
    return Timeline(spans(events, end, None if absences is None else absences(seed)), events, entry, seed, end)


EVENT_COLUMNS = ("time", "update", "client", "latency", "dispatch_time", "event")
"""The columns of events.csv a timeline reads."""


def _table(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """A CSV file of the result folder with ``columns``, numbers where numbers belong; one line naming the file if it
    is damaged."""
    try:
        table = pd.read_csv(path)
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise ValueError(f"it has no column {missing[0]}")
        for c in columns:
            if c in ("time", "update", "client", "latency", "dispatch_time", "seed"):
                table[c] = pd.to_numeric(table[c], errors="raise")
        if "event" in table.columns and not table["event"].isin(("arrival", "failure", "leave", "join", "late")).all():
            raise ValueError("an event is none of arrival, failure, leave, join, late")
        if "client" in columns and ((table["client"] < 0) | (table["client"] % 1 != 0)).any():
            raise ValueError("a client is not an index")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, TypeError) as exc:
        raise InputError(str(path), f"is damaged ({exc}); rerun the run to rebuild it") from None
    return table


def _counts(table: pd.DataFrame, grid: np.ndarray) -> dict[str, np.ndarray]:
    """Per state, how many clients are in it at each time of ``grid``."""
    out = {}
    for state in STATES:
        part = table[table["state"] == state]
        starts, ends = np.sort(part["start"].to_numpy()), np.sort(part["end"].to_numpy())
        out[state] = np.searchsorted(starts, grid, side="right") - np.searchsorted(ends, grid, side="right")
    return out


LINKS = {"download": "egress (downloads)", "upload": "ingress (uploads)"}
"""The server's link each transfer state uses, as the figure labels it."""


def transfers(table: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per transfer state of :data:`LINKS` that ``table`` has, the transfers in progress over the server's link
    as a step function: the times where the count changes and the count from each on (a transfer is in progress
    over [start, end); every transfer in progress shares the link, so the count is how far it is divided)."""
    out = {}
    for state in LINKS:
        part = table[table["state"] == state]
        if not len(part):
            continue
        starts, ends = np.sort(part["start"].to_numpy()), np.sort(part["end"].to_numpy())
        times = np.unique(np.concatenate([starts, ends]))
        out[state] = (times, np.searchsorted(starts, times, side="right") - np.searchsorted(ends, times, side="right"))
    return out


def timeline_figure(table: pd.DataFrame, events: pd.DataFrame, clients: int, title: str,
                    end: float | None = None) -> Figure:
    """The figure of :func:`spans`: a row per client (or counts per state beyond :data:`ROWS` clients) over the
    updates and aggregations in virtual time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    horizon = float(end if end is not None else max(table["end"].max() if len(table) else 0.0,
                                                    events["time"].max() if len(events) else 0.0))
    rows = clients <= ROWS
    links = transfers(table)
    ratios = [4 if rows else 3, *([1] if links else []), 1]
    fig, axes = plt.subplots(len(ratios), 1, sharex=True, squeeze=False,
                             figsize=(10, 2.8 + (0.12 * clients if rows else 3.0) + (1.6 if links else 0.0)),
                             gridspec_kw={"height_ratios": ratios})
    top, bottom = axes[0, 0], axes[-1, 0]
    present = [s for s in STATES if (table["state"] == s).any()]
    if rows:
        for state in present:
            part = table[table["state"] == state]
            for m, frame in part.groupby("client"):
                top.broken_barh(list(zip(frame["start"], frame["end"] - frame["start"], strict=True)),
                                (int(m) - 0.4, 0.8), facecolors=COLORS[state], edgecolors="white",
                                linewidth=0.4 if clients <= 30 else 0.2)  # an edge between one round and the next
        top.set_ylim(clients - 0.5, -0.5)
        top.yaxis.set_major_locator(MaxNLocator(integer=True))
        top.set_ylabel("client")
    else:
        grid = np.linspace(0.0, horizon, 600)
        counts = _counts(table, grid)
        top.stackplot(grid, [counts[s] for s in present], colors=[COLORS[s] for s in present], linewidth=0)
        top.set_ylabel(f"clients (of {clients:,})")
    handles = [Patch(color=COLORS[s], label=s) for s in present] + [Patch(fc="white", ec="0.6", label="idle")]
    fig.suptitle(title, y=0.995)
    fig.legend(handles=handles, ncol=len(handles), frameon=False, loc="upper center",
               bbox_to_anchor=(0.5, 1.0 - 0.35 / fig.get_figheight()), fontsize=8)
    if links:
        middle = axes[1, 0]
        for state, (times, level) in links.items():
            middle.step(np.concatenate([[0.0], times, [horizon]]), np.concatenate([[0], level, [level[-1]]]),
                        where="post", color=COLORS[state], linewidth=1, label=LINKS[state])
        middle.set_ylabel("transfers")
        middle.legend(frameon=False, fontsize=7, loc="upper right")
    arrivals = events[events["event"] == "arrival"]
    updates = arrivals["update"].dropna().to_numpy()
    bottom.step(np.concatenate([[0.0], arrivals["time"].to_numpy(), [horizon]]),
                np.concatenate([[0.0], updates, [updates[-1] if len(updates) else 0.0]]), where="post", color="k",
                linewidth=1)
    bottom.set_ylabel("updates")
    bottom.set_xlabel("virtual time (s)")
    bottom.set_xlim(0.0, horizon if horizon > 0 else 1.0)
    fig.align_ylabels(axes[:, 0])
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - 0.6 / fig.get_figheight()))
    return fig


def write_timeline(run: Timeline, out: Path, title: str, population: int | None = None) -> Path:
    """Draw ``run`` into ``out`` (a PNG file) for ``population`` clients (None: as many as its events name); returns
    ``out``."""
    from simfl.output.plots import save

    table, events = run.spans, run.events
    clients = int(max(events["client"].max() + 1 if len(events) else 0, table["client"].max() + 1 if len(table) else 0))
    clients = max(clients, population or 0)
    fig = timeline_figure(table, events, clients, title, run.end)
    save(fig, out)
    return out


def busy_share(table: pd.DataFrame, clients: int, horizon: float, states: Sequence[str] = ("compute",)) -> float:
    """The share of the clients' time in ``states`` up to ``horizon`` (1: every client always busy)."""
    if clients <= 0 or horizon <= 0:
        return 0.0
    part = table[table["state"].isin(states)]
    return float((part["end"].clip(upper=horizon) - part["start"].clip(upper=horizon)).sum()) / (clients * horizon)
