"""A run as a schedule: the spans of hand-made events, of a tiny run with every state, and the command's refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simfl.output.timeline import busy_share, spans
from tests.conftest import tiny_scenario

NAN = float("nan")


def events(*rows: tuple[Any, ...]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["time", "update", "client", "staleness", "latency", "dispatch_time", "weight",
                                       "event"])


def test_spans_of_hand_made_events() -> None:
    """Client 0: a round 0-2 s processed at 3 s (1 s waiting for the server), then a failed round 3-4 s. Client 1: a
    round 0-2.5 s, then a round from 2.5 s cut by its departure at 4 s, away until 9 s; then a late round 9-10 s."""
    table = spans(events(
        (2.5, 1, 1, 1, 2.5, 0.0, 1.0, "arrival"), (3.0, 2, 0, 2, 2.0, 0.0, 1.0, "arrival"),
        (4.0, NAN, 0, NAN, 1.0, 3.0, NAN, "failure"), (4.0, NAN, 1, NAN, 1.5, 2.5, NAN, "leave"),
        (9.0, NAN, 1, NAN, NAN, NAN, NAN, "join"), (10.0, NAN, 1, NAN, 1.0, 9.0, NAN, "late"),
    ), end=12.0)
    assert [tuple(r) for r in table.itertuples(index=False)] == [
        (0, "compute", 0.0, 2.0), (0, "waiting", 2.0, 3.0), (0, "failed", 3.0, 4.0),
        (1, "compute", 0.0, 2.5), (1, "cut", 2.5, 4.0), (1, "absent", 4.0, 9.0), (1, "late", 9.0, 10.0)]
    assert busy_share(table, 2, 12.0) == pytest.approx(4.5 / 24)


def test_absences_the_run_followed_replace_those_of_the_events() -> None:
    """An idle client's departure is not an event (only its return is): the scenario's absences give it, and one
    without a return lasts to the run's end."""
    table = spans(events((5.0, NAN, 0, NAN, NAN, NAN, NAN, "join")), end=20.0, absences=[[(2.0, 5.0)], [(15.0, None)]])
    assert [tuple(r) for r in table.itertuples(index=False)] == [(0, "absent", 2.0, 5.0), (1, "absent", 15.0, 20.0)]


def test_the_command_draws_a_run_and_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from simfl.cli import main
    from simfl.launch.api import run

    raw = tiny_scenario(executor={"kind": "none"}, server_time=0.5, budget={"time": 20.0},
                        availability={"p": 0.3, "departures": [{"client": 2, "leave": 5.0, "rejoin": 12.0}]},
                        algorithms=[{"name": "fedasync"}, {"name": "fedavg", "clients_per_round": 3}])
    res = run(raw, out=tmp_path / "run", quiet=True)
    rows = res.timeline("fedavg")
    assert set(rows["state"]) | set(res.timeline()["state"]) >= {"compute", "waiting", "failed", "absent"}
    assert ((rows["end"] >= rows["start"]) & (rows["end"] <= 20.0)).all()
    assert rows[rows["state"] == "absent"][["client", "start", "end"]].values.tolist() == [[2, 5.0, 12.0]]
    capsys.readouterr()
    assert main(["timeline", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "timeline-fedasync-seed0.png").stat().st_size > 10_000
    for argv, line in ((["--entry", "nope"], "simfl: --entry: names no entry of"),
                       (["--seed", "7"], "simfl: --seed: fedasync has no run of seed 7")):
        assert main(["timeline", str(tmp_path / "run"), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(line), err
    (tmp_path / "run" / "fedavg" / "seed0" / "events.csv").write_bytes(b"\xff\xfe garbage")
    assert main(["timeline", str(tmp_path / "run"), "--entry", "fedavg"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "events.csv: is damaged" in err[0] and "Traceback" not in err[0]


def test_rounds_in_phases_are_drawn_phase_by_phase(tmp_path: Path) -> None:
    """With network: events.csv has the six phase columns, and the timeline shows each round's waits, download,
    compute and upload: a round dispatched at 0, waiting for a connection to 0.5, downloading to 1, computing to 3,
    waiting to 3.5, uploading to 4, taken by the server at 4.25."""
    row = (4.25, 1, 0, 1, 4.0, 0.0, 1.0, "arrival", 0.5, 1.0, 1.0, 3.0, 3.5, 4.0)
    frame = pd.DataFrame([row], columns=["time", "update", "client", "staleness", "latency", "dispatch_time",
                                         "weight", "event", "download_start", "download_end", "compute_start",
                                         "compute_end", "upload_start", "upload_end"])
    assert [tuple(r) for r in spans(frame).itertuples(index=False)] == [
        (0, "queued", 0.0, 0.5), (0, "download", 0.5, 1.0), (0, "compute", 1.0, 3.0), (0, "queued", 3.0, 3.5),
        (0, "upload", 3.5, 4.0), (0, "waiting", 4.0, 4.25)]
    from simfl.launch.api import run

    raw = tiny_scenario(executor={"kind": "none"}, network={"download": {"bandwidth": 2000}, "upload": {"bandwidth":
                        1000}, "server": {"ingress": 1500, "connections": 2}})
    res = run(raw, out=tmp_path / "run", quiet=True)
    header = (tmp_path / "run" / "fedasync" / "seed0" / "events.csv").read_text().splitlines()[0]
    assert header.endswith(",event,download_start,download_end,compute_start,compute_end,upload_start,upload_end")
    assert {"download", "compute", "upload"} <= set(res.timeline()["state"])
    plain = run(tiny_scenario(executor={"kind": "none"}), out=tmp_path / "plain", quiet=True)
    assert (tmp_path / "plain" / "fedasync" / "seed0" / "events.csv").read_text().splitlines()[0] == (
        "time,update,client,staleness,latency,dispatch_time,weight,event")
    assert set(plain.timeline()["state"]) == {"compute"}


def test_the_server_links_count_the_transfers_in_progress() -> None:
    """Two uploads over [1, 3) and [2, 4) and one download over [0, 1): the ingress carries 1 from 1, 2 from 2
    (each gets half), 1 from 3 and none from 4; the egress 1 over [0, 1). The figure gains the links' panel only
    where rounds ran in phases."""
    from simfl.output.timeline import timeline_figure, transfers

    table = pd.DataFrame([(0, "download", 0.0, 1.0), (0, "upload", 1.0, 3.0), (1, "upload", 2.0, 4.0),
                          (1, "compute", 0.0, 2.0)], columns=["client", "state", "start", "end"])
    links = transfers(table)
    assert [list(a) for a in links["upload"]] == [[1.0, 2.0, 3.0, 4.0], [1, 2, 1, 0]]
    assert [list(a) for a in links["download"]] == [[0.0, 1.0], [1, 0]]
    assert set(transfers(table[table["state"] == "compute"])) == set()
    none = events()
    assert len(timeline_figure(table, none, 2, "phases").axes) == 3
    assert len(timeline_figure(table[table["state"] == "compute"], none, 2, "plain").axes) == 2


def test_run_draws_each_entrys_timeline_on_request(tmp_path: Path, write_scenario,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`simfl run --timeline` draws each entry's first run into the folder, as `simfl timeline` does, and names the
    files in its last line; without it none is drawn."""
    from simfl.cli import main

    raw = tiny_scenario(executor={"kind": "none"}, seeds=[3, 4],
                        algorithms=[{"name": "fedasync"}, {"name": "fedavg", "clients_per_round": 3}])
    path = write_scenario(raw)
    assert main(["run", str(path), "--out", str(tmp_path / "on"), "--quiet", "--timeline"]) == 0
    drawn = sorted(p.name for p in (tmp_path / "on").glob("timeline-*.png"))
    assert drawn == ["timeline-fedasync-seed3.png", "timeline-fedavg-seed3.png"]
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith(
        "accuracy.png, timeline-fedasync-seed3.png, timeline-fedavg-seed3.png)")
    assert main(["run", str(path), "--out", str(tmp_path / "off"), "--quiet"]) == 0
    assert not list((tmp_path / "off").glob("timeline-*.png"))
