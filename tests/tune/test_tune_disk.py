"""The disk a tune needs: its trials' result folders (one per rung reached) and the rung states kept for the trials
that go on, counted by hand from the estimate, stated by ``simfl validate``, bounding what a tune writes, and refused
in one line before anything is written where the free space is short."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from simfl.cli import main
from simfl.launch.tune import disk_needs, plan_of, tune
from simfl.schema import estimate
from simfl.schema.costs import whole
from simfl.schema.scenario import validate
from tests.tune.test_halving import halving_scenario

pytest.importorskip("optuna")


def test_the_tunes_disk_by_hand(tmp_path: Path) -> None:
    """Two entries of 6 trials in one batch each, eta 3, rungs at 10, 30, 90 s: per entry 6 folders to 10 s, 2 to
    30 s, 1 to 90 s; each folder its own files and its run's files with the rows of a run to 90 s scaled by the
    rung's share; 12 rung states kept at once (both batches, until the cut), each at most a checkpoint of the run to
    the budget. What the tune then writes
    stays within the stated trials' results."""
    raw = halving_scenario()
    plan = plan_of(validate(raw))
    est = estimate.estimate(plan.scn)
    folder, files = whole("FOLDER_BYTES"), whole("RUN_FILES_BYTES")
    rows = (est.results_bytes - folder) / est.runs - files
    results, kept = disk_needs(plan, tmp_path / "out")
    expected = 2 * sum(n * (folder + files + rows * t / 90.0) for n, t in ((6, 10.0), (2, 30.0), (1, 90.0)))
    assert results.store == "trials' results" and results.bytes == int(expected)
    assert kept.store == "kept rung states" and kept.bytes == 12 * est.checkpoint_bytes > 0
    out = tune(raw, tmp_path / "out", workers=1, quiet=True, base=tmp_path).out
    written = sum(p.stat().st_size for p in (out / "trials").rglob("*") if p.is_file())
    assert 0 < written <= results.bytes


def test_without_halving_no_rung_state_is_kept(tmp_path: Path) -> None:
    raw = halving_scenario(halving=False)
    needs = disk_needs(plan_of(validate(raw)), tmp_path)
    assert [n.store for n in needs] == ["trials' results"]


def test_validate_states_it_and_a_short_disk_is_refused_before_anything_is_written(
        tmp_path: Path, write_scenario, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    raw = halving_scenario()
    path = write_scenario(raw)
    out = tmp_path / "tuned"
    assert main(["validate", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "#   tune disk:     " in printed and "needed (trials' results, kept rung states)" in printed
    results, kept = disk_needs(plan_of(validate(raw)), out)
    usage = type("Usage", (), {"total": 1 << 50, "used": 0, "free": results.bytes + kept.bytes // 2})
    monkeypatch.setattr(shutil, "disk_usage", lambda where: usage)
    for argv in (["validate", str(path), "--out", str(out)], ["tune", str(path), "--out", str(out), "--quiet"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert "is free there" in err and "trials' results" in err and "kept rung states" in err, err
        assert not out.exists()
