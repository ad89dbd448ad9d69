"""Fleet traces: simfl's fleet CSV and FedScale's pickles drive compute x work + bytes / bandwidth and presence."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from simfl.cli import main
from simfl.errors import InputError
from simfl.latency import LATENCY_MODELS, Workload
from simfl.latency.availability import Availability
from simfl.latency.fedscale import FedScale, FedScaleConfig, read_fedscale
from simfl.latency.fleet import Device, absences, round_seconds
from simfl.latency.fleet_csv import FleetCsv, FleetCsvConfig, read_fleet_csv
from tests.conftest import tiny_scenario

WORK = Workload(model_bytes=1000, flops=2_000_000, samples=(10, 20, 30), epochs=2)


def write_csv(tmp_path: Path, text: str, name: str = "fleet.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_csv_latency_is_compute_times_work_plus_bytes_over_bandwidth(tmp_path: Path) -> None:
    path = write_csv(tmp_path, "client,seconds_per_sample,flops,bandwidth\na,0.5,,100\nb,,1e6,2000\n")
    model = FleetCsv(FleetCsvConfig(path=path), 3, 0, WORK)
    assert model.sample(0) == pytest.approx(0.5 * 10 * 2 + 2 * 1000 / 100)  # 10 s compute + 20 s transfers
    assert model.sample(1) == pytest.approx(2_000_000 / 1e6 * 20 * 2 + 2 * 1000 / 2000)  # FLOPs / (FLOP/s)
    assert model.sample(2) == pytest.approx(0.5 * 30 * 2 + 2 * 1000 / 100)  # client 2 plays row 0 again
    assert model.sample(0) == model.sample(0)  # every round of a client lasts the same
    one_way = FleetCsv(FleetCsvConfig(path=path, transfers=1, compute_scale=2.0), 3, 0, WORK)
    assert one_way.sample(0) == pytest.approx(2 * 0.5 * 10 * 2 + 1000 / 100)
    assert model.absences() is None
    assert LATENCY_MODELS["fleet_csv"] is FleetCsv and LATENCY_MODELS["fedscale"] is FedScale


def test_windows_become_absences_and_repeat_with_period() -> None:
    once = Device(0.1, None, 1.0, windows=((10.0, 20.0), (30.0, 40.0)))
    assert absences(once, None, "latency") == [(0.0, 10.0), (20.0, 30.0), (40.0, None)]
    from_zero = Device(0.1, None, 1.0, windows=((0.0, 5.0),))
    assert absences(from_zero, None, "latency") == [(5.0, None)]
    daily = Device(0.1, None, 1.0, windows=((2.0, 4.0),), period=10.0)
    assert absences(daily, 25.0, "latency") == [(0.0, 2.0), (4.0, 12.0), (14.0, 22.0), (24.0, 32.0), (34.0, None)]
    with pytest.raises(InputError, match="latency.horizon: the trace's windows repeat"):
        absences(daily, None, "latency")
    av = Availability(None, 2, 0, [[(0.0, 2.0), (4.0, None)], []])
    assert not av.present(0, 1.0) and av.present(0, 3.0) and not av.present(0, 100.0) and av.present(1, 1.0)
    assert av.back_at(0, 1.0) == 2.0 and av.back_at(0, 5.0) is None


def test_periodic_windows_need_a_horizon_before_the_run(tmp_path: Path) -> None:
    path = write_csv(tmp_path, "client,seconds_per_sample,bandwidth,windows,period\na,0.1,1e6,0-5,50\n")
    with pytest.raises(InputError, match="latency.horizon: the trace's windows repeat"):
        FleetCsv.check(FleetCsvConfig(path=path), 2)
    FleetCsv.check(FleetCsvConfig(path=path, availability=False), 2)
    FleetCsv.check(FleetCsvConfig(path=path, horizon=10.0), 2)


def test_csv_windows_and_period(tmp_path: Path) -> None:
    path = write_csv(tmp_path, "client,seconds_per_sample,bandwidth,windows,period\na,0.1,1e6,10-20;30-40,\nb,0.1,1e6,,\n"
                     "c,0.1,1e6,0-5,50\n")
    devices = read_fleet_csv(path)
    assert devices[0].windows == ((10.0, 20.0), (30.0, 40.0)) and devices[0].period is None
    assert devices[2].period == 50.0
    model = FleetCsv(FleetCsvConfig(path=path, horizon=100.0), 4, 0, WORK)
    got = model.absences()
    assert got is not None
    assert got[0] == [(0.0, 10.0), (20.0, 30.0), (40.0, None)] and got[1] == []
    assert got[2] == [(5.0, 50.0), (55.0, 100.0), (105.0, None)] and got[3] == got[0]
    assert FleetCsv(FleetCsvConfig(path=path, horizon=100.0, availability=False), 4, 0, WORK).absences() is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("client,bandwidth\na,1\n", "needs a seconds_per_sample or a flops column"),
        ("client,seconds_per_sample\na,1\n", "missing column(s) bandwidth"),
        ("client,seconds_per_sample,bandwidth,speed\na,1,1,1\n", "unknown column(s) speed"),
        ("client,seconds_per_sample,bandwidth\na,fast,1\n", ":2: seconds_per_sample: must be a number, got 'fast'"),
        ("client,seconds_per_sample,bandwidth\na,1,0\n", ":2: bandwidth: must be a finite number > 0"),
        ("client,seconds_per_sample,flops,bandwidth\na,1,1,1\n", ":2: give exactly one of seconds_per_sample and flops"),
        ("client,seconds_per_sample,bandwidth,windows\na,1,1,5-3\n", "window must be start-end with 0 <= start < end"),
        ("client,seconds_per_sample,bandwidth,windows\na,1,1,5-9;1-3\n", "windows must be sorted and disjoint"),
        ("client,seconds_per_sample,bandwidth\n", "no device rows"),
    ],
)
def test_csv_mistakes_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = write_csv(tmp_path, text)
    with pytest.raises(InputError) as err:
        read_fleet_csv(path)
    assert expected in str(err.value) and "\n" not in str(err.value)


def fedscale_files(tmp_path: Path) -> tuple[str, str]:
    capacity = {2: {"computation": 40.0, "communication": 800.0}, 1: {"computation": 10.0, "communication": 1600.0}}
    behave = {7: {"duration": 100, "active": [10, 60], "inactive": [30, 90], "finish_time": 100, "model": "x"}}
    (tmp_path / "capacity").write_bytes(pickle.dumps(capacity))
    (tmp_path / "behave").write_bytes(pickle.dumps(behave))
    return str(tmp_path / "capacity"), str(tmp_path / "behave")


def test_fedscale_formats(tmp_path: Path) -> None:
    capacity, behave = fedscale_files(tmp_path)
    model = FedScale(FedScaleConfig(path=capacity, behavior=behave, horizon=150.0), 3, 0, WORK)
    # FedScale: computation = 3 x samples x ms / 1000; communication = size in kbit (bytes / 1024 x 8) / kbit/s, x2.
    kbits = 1000 / 1024 * 8
    assert model.sample(0) == pytest.approx(3 * 10 * 2 * 10.0 / 1000 + 2 * kbits / 1600)  # id 1 first (sorted)
    assert model.sample(1) == pytest.approx(3 * 20 * 2 * 40.0 / 1000 + 2 * kbits / 800)
    assert model.sample(2) == pytest.approx(3 * 30 * 2 * 10.0 / 1000 + 2 * kbits / 1600)
    got = model.absences()
    assert got is not None
    assert got[0] == [(0.0, 10.0), (30.0, 60.0), (90.0, 110.0), (130.0, 160.0), (190.0, None)]
    assert FedScale(FedScaleConfig(path=capacity), 3, 0, WORK).absences() is None
    assert read_fedscale(capacity, None, 3.0)[0].windows == ()


def test_fedscale_refuses_code_and_bad_entries(tmp_path: Path) -> None:
    evil = tmp_path / "evil"
    evil.write_bytes(pickle.dumps({1: os.system}))
    with pytest.raises(InputError, match="not a FedScale trace pickle of plain data"):
        read_fedscale(str(evil), None, 3.0)
    bad = tmp_path / "bad"
    bad.write_bytes(pickle.dumps({1: {"computation": -1.0, "communication": 5.0}}))
    with pytest.raises(InputError, match=r"bad\[1\]\.computation: must be a finite number > 0"):
        read_fedscale(str(bad), None, 3.0)
    with pytest.raises(InputError, match="trace file not found"):
        read_fedscale(str(tmp_path / "nope"), None, 3.0)


def test_fleet_scenario_runs_with_windows_and_missing_file_is_one_line(tmp_path: Path, write_scenario, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "fleet.csv").write_text("client,seconds_per_sample,bandwidth,windows\na,0.01,1e6,\nb,0.02,1e6,3-6\n")
    raw = tiny_scenario(latency={"model": "fleet_csv", "path": "fleet.csv"}, executor={"kind": "none"})
    out = tmp_path / "out"
    assert main(["run", str(write_scenario(raw)), "--out", str(out)]) == 0
    events = (out / "fedasync" / "seed0" / "events.csv").read_text().splitlines()[1:]
    clients = [(float(e.split(",")[0]), int(e.split(",")[2])) for e in events if e.endswith("arrival")]
    assert {c for _, c in clients} >= {0, 1, 2}
    assert all(3.0 <= t < 6.0 + 1.0 for t, c in clients if c == 1)  # client 1 only delivers around its window
    raw["latency"]["path"] = "missing.csv"
    capsys.readouterr()
    assert main(["run", str(write_scenario(raw)), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing.csv: fleet trace file not found" in err


def test_committed_fleet_is_the_generator_output_and_the_scenario_loads(tmp_path: Path) -> None:
    import runpy

    from simfl.schema.scenario import load

    root = Path(__file__).resolve().parents[2] / "scenarios" / "fleet"
    runpy.run_path(str(root / "generate_fleet.py"), run_name="generate")["main"](["--out", str(tmp_path / "f.csv")])
    assert (tmp_path / "f.csv").read_bytes() == (root / "fleet10k.csv").read_bytes()
    scn = load(root / "fleet10k.yaml")
    assert scn.executor.kind == "none" and scn.data.partition.clients == 10_000
    assert len(read_fleet_csv(scn.latency.path)) == 10_000


def test_delays_scaled_by_flops_refuse_a_model_without_them() -> None:
    """A Flower app's model has no FLOPs simfl can count (0): a device given in FLOP/s and workload compute scaling
    are each one line naming the field and what to give instead; seconds per sample and factors run."""
    from simfl.latency.scaling import ScalingConfig, check_workload

    unknown = Workload(model_bytes=1000, flops=0, samples=(10, 20), epochs=1)
    with pytest.raises(InputError, match=r"latency.model: fleet.*FLOP/s.*give seconds_per_sample"):
        round_seconds(Device(None, 1e9, 1e6), unknown, 0, 2, 1.0)
    assert round_seconds(Device(0.01, None, 1e6), unknown, 0, 2, 1.0) == pytest.approx(0.1 + 2 * 1000 / 1e6)
    with pytest.raises(InputError, match=r"latency.scaling.compute.*workload needs.*give a factor"):
        check_workload(ScalingConfig(compute="workload"), unknown, 2)
    check_workload(ScalingConfig(compute=2.0), unknown, 2)
    counted = Workload(model_bytes=1000, flops=lambda: 2_000_000, samples=(10, 20), epochs=1)
    assert round_seconds(Device(None, 1e9, 1e6), counted, 0, 2, 1.0) == pytest.approx(10 * 2e-3 + 2e-3)
