"""The derived trace statistics: equal to a fresh, independent recomputation from the raw logs."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from simfl.errors import InputError
from simfl.latency import profiles
from simfl.latency.traces import import_traces
from tests.conftest import SHARED

pytestmark = pytest.mark.data  # reads the data folder or ../shared: also run without them (.ci/run)

REPO = Path(__file__).resolve().parents[2]
RAW = SHARED / "latency_traces_raw"
DERIVED = REPO / "latency_traces"
PACKAGE = REPO / "simfl" / "latency" / "data"
FILES = ("devices.csv", "pooled.json", "uploads.csv")

needs_raw = pytest.mark.skipif(not RAW.is_dir(), reason=f"raw RPi logs not found at {RAW} (../shared beside the checkout)")


def recompute() -> tuple[dict[int, dict[str, float]], np.ndarray]:
    """Per-device stats and all round latencies, straight from the raw files with loadtxt."""
    comp = np.concatenate([np.loadtxt(RAW / f"gw{g}_comp_delay.txt", delimiter=",") for g in (1, 2, 3)])
    rnd = np.concatenate([np.loadtxt(RAW / f"gw{g}_round_delay.txt", delimiter=",") for g in (1, 2, 3)])
    out: dict[int, dict[str, float]] = {}
    for dev in range(rnd.shape[1]):
        mask = rnd[:, dev] != 0
        if not mask.any():
            continue
        c, r = comp[mask, dev], rnd[mask, dev]
        out[dev] = {
            "uploads": int(mask.sum()),
            "compute_mean": c.mean(), "compute_std": c.std(ddof=0),
            "round_mean": r.mean(), "round_std": r.std(ddof=0),
            "comm_mean": (r - c).mean(), "comm_std": (r - c).std(ddof=0),
            "round_min": r.min(), "round_max": r.max(),
        }
    return out, rnd[rnd != 0]


@needs_raw
def test_devices_csv_matches_recomputation() -> None:
    expected, _ = recompute()
    with (DERIVED / "devices.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["device"]) for r in rows] == sorted(expected)
    assert len(rows) == 28
    for row in rows:
        exp = expected[int(row["device"])]
        for key, value in exp.items():
            assert float(row[key]) == pytest.approx(value, rel=1e-12, abs=1e-12), (row["device"], key)


@needs_raw
def test_pooled_json_matches_recomputation() -> None:
    _, rounds = recompute()
    pooled = json.loads((DERIVED / "pooled.json").read_text())
    assert pooled["uploads"] == rounds.size == 403
    assert pooled["mean"] == pytest.approx(rounds.mean(), rel=1e-12)
    assert pooled["std"] == pytest.approx(rounds.std(), rel=1e-12)
    for q in (5, 50, 95):
        assert pooled[f"p{q}"] == pytest.approx(np.percentile(rounds, q), rel=1e-12)
    assert 128.0 < pooled["mean"] < 129.0 and 220.0 < pooled["std"] < 221.0


@needs_raw
def test_import_reproduces_committed_files_byte_for_byte(tmp_path: Path) -> None:
    import_traces(RAW, tmp_path)
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (DERIVED / name).read_bytes(), name


def test_package_copy_equals_latency_traces() -> None:
    for name in FILES:
        assert (PACKAGE / name).read_bytes() == (DERIVED / name).read_bytes(), name


def test_loader_reads_shipped_stats() -> None:
    devices = profiles.load_devices()
    assert set(profiles.PAPER9) <= set(devices)
    assert devices[1].uploads == 4 and devices[1].round_mean == pytest.approx(904.1211, abs=1e-3)
    assert profiles.profile_set("all", devices) == sorted(d for d, s in devices.items() if s.uploads >= 3)
    assert 23 not in profiles.profile_set("all", devices)  # one upload only
    uploads = profiles.load_uploads()
    assert sum(len(s) for s in uploads.values()) == profiles.load_pooled().uploads == 403


# ---- malformed raw input -------------------------------------------------


@pytest.fixture
def raw_copy(tmp_path: Path) -> Path:
    """A writable copy of a tiny valid raw folder (two gateways, 3 devices)."""
    d = tmp_path / "raw"
    d.mkdir()
    (d / "gw1_comp_delay.txt").write_text("1.0,0,0\n0,2.0,0\n")
    (d / "gw1_round_delay.txt").write_text("3.0,0,0\n0,5.0,0\n")
    (d / "gw2_comp_delay.txt").write_text("0,0,4.0\n")
    (d / "gw2_round_delay.txt").write_text("0,0,4.5\n")
    return d


def test_tiny_raw_folder_imports(raw_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    import_traces(raw_copy, out)
    pooled = json.loads((out / "pooled.json").read_text())
    assert pooled["mean"] == pytest.approx((3.0 + 5.0 + 4.5) / 3)
    lines = (out / "devices.csv").read_text().splitlines()
    assert lines[1].startswith("0,1,1.0,0.0,3.0,0.0,2.0,0.0,3.0,3.0")
    assert (out / "uploads.csv").read_text().splitlines()[3] == "2,2,0,4.0,4.5,0.5"


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("gw1_round_delay.txt", "", "empty"),
        ("gw1_round_delay.txt", "3.0,abc,0\n0,5.0,0\n", "'abc' is not a number"),
        ("gw1_round_delay.txt", "3.0,1.0,0\n0,5.0,0\n", "2 non-zero entries"),
        ("gw1_round_delay.txt", "3.0,0\n0,5.0,0\n", "columns"),
        ("gw1_round_delay.txt", "0.5,0,0\n0,5.0,0\n", "not above compute"),
        ("gw1_comp_delay.txt", "0,1.0,0\n0,2.0,0\n", "non-zero entry not in column"),
        ("gw1_comp_delay.txt", "1.0,0,0\n", "shape"),
        ("gw2_comp_delay.txt", "0,0,-4.0\n", "negative"),
    ],
)
def test_malformed_raw_file_names_file_and_problem(
    raw_copy: Path, tmp_path: Path, name: str, content: str, fragment: str
) -> None:
    (raw_copy / name).write_text(content)
    out = tmp_path / "out"
    with pytest.raises(InputError) as err:
        import_traces(raw_copy, out)
    assert name in str(err.value) and fragment in str(err.value)
    assert not out.exists()  # nothing half-written


def test_missing_raw_files(raw_copy: Path, tmp_path: Path) -> None:
    (raw_copy / "gw2_comp_delay.txt").unlink()
    with pytest.raises(InputError, match="gw2_comp_delay.txt: file not found"):
        import_traces(raw_copy, tmp_path / "out")
    with pytest.raises(InputError, match="no gw<N>_round_delay.txt"):
        import_traces(tmp_path, tmp_path / "out")
    with pytest.raises(InputError, match="folder not found"):
        import_traces(tmp_path / "nope", tmp_path / "out")


# ---- malformed derived files ----------------------------------------------


def test_malformed_derived_files(tmp_path: Path) -> None:
    for name in FILES:
        shutil.copy(PACKAGE / name, tmp_path / name)
    (tmp_path / "devices.csv").write_text("device,uploads\n1,2\n")
    with pytest.raises(InputError, match="devices.csv: header must be"):
        profiles.load_devices(tmp_path)
    (tmp_path / "pooled.json").write_text("{not json")
    with pytest.raises(InputError, match="pooled.json: not valid JSON"):
        profiles.load_pooled(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "pooled.json").write_text('{"mean": 1.0}')
    with pytest.raises(InputError, match="missing keys: uploads, std"):
        profiles.load_pooled(empty)
    with pytest.raises(InputError, match="uploads.csv: file not found"):
        profiles.load_uploads(empty)
