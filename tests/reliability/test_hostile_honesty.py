"""Hostile input, part three (honesty): no silent choice among what a user wrote; the API speaks Python.

Classes: duplicate keys (a key repeated in any mapping of a scenario or a sweep, at any depth,
in block or flow style, refused in one line naming the key and its lines), and the Python API's
exceptions (a bad scenario is a ``ValueError``). Counts per class go to
:data:`tests.reliability.hostile.COUNTS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import simfl
from simfl.errors import InputError
from tests.conftest import tiny_scenario
from tests.reliability.hostile import cli, fuzz

# -- duplicate keys ------------------------------------------------------------------------------------------

PATHS = [["name"], ["seeds"], ["data", "dataset"], ["data", "partition", "kind"], ["model", "name"],
         ["train", "lr"], ["latency", "model"], ["budget", "time"], ["eval", "every"], ["sweep", "train.lr"],
         ["sweep", "budget.time"], ["executor", "kind"], ["train", "epochs"], ["data", "partition", "clients"]]


def _with_duplicate(path: list[str], flow: bool, first: Any, second: Any) -> tuple[str, int]:
    """A tiny scenario's YAML text with ``path``'s last key written twice; the line of the second one."""
    raw = tiny_scenario(sweep={"train.lr": [0.1], "budget.time": [8.0]}, executor={"kind": "inline"})
    text = yaml.safe_dump(raw, sort_keys=False, default_flow_style=False)
    lines = text.splitlines()
    # find the line of the key: walk the path by indentation
    start, indent = 0, 0
    for depth, key in enumerate(path):
        for i in range(start, len(lines)):
            line = lines[i]
            if line.startswith(" " * indent + f"{key}:") and not line.startswith(" " * (indent + 1)):
                start, indent = i, 2 * (depth + 1)
                break
        else:
            raise AssertionError(f"{key} not found")
    prefix = " " * (2 * (len(path) - 1))
    value = yaml.safe_dump(second, default_flow_style=True).strip().removesuffix("...").strip()
    if flow and len(path) > 1:  # the parent as a flow mapping holding the key twice
        parent = prefix[:-2]
        inline = f"{parent}{path[-2]}: {{{path[-1]}: {value}, {path[-1]}: {value}}}"
        # drop the parent's block body and put the flow mapping in its place
        head = start - 1
        while not lines[head].startswith(parent + f"{path[-2]}:"):
            head -= 1
        end = head + 1
        while end < len(lines) and lines[end].startswith(parent + "  "):
            end += 1
        lines[head:end] = [inline]
        return "\n".join(lines) + "\n", head + 1
    lines.insert(start, f"{prefix}{path[-1]}: {value}")  # before the key's own line: its body stays whole
    return "\n".join(lines) + "\n", start + 1


@fuzz(60)
@given(path=st.sampled_from(PATHS), flow=st.booleans(),
       second=st.one_of(st.integers(-5, 5), st.floats(0.01, 10), st.sampled_from(["x", "mnist", [1, 2], [0.5]])))
def test_a_key_written_twice_is_refused_by_name(tmp_path_factory: pytest.TempPathFactory, capsys: Any,
                                                path: list[str], flow: bool, second: Any) -> None:
    folder = tmp_path_factory.mktemp("dup")
    text, _line = _with_duplicate(path, flow, None, second)
    scenario = folder / "s.yaml"
    scenario.write_text(text)
    command = "sweep" if path[0] == "sweep" else "validate"
    args = [command, scenario, "--out", folder / "out"] if command == "sweep" else [command, scenario]
    _code, err = cli(capsys, args, "duplicate keys", expect=2)
    assert f"key '{path[-1]}' appears twice in one mapping" in err, err
    assert scenario.read_text() == text and not (folder / "out").exists()


def test_the_issue_sweep_listing_train_lr_twice(tmp_path: Path, capsys: Any) -> None:
    """`sweep:` listing train.lr twice ran only the second list; now it is one line naming both lines."""
    raw = yaml.safe_dump(tiny_scenario(), sort_keys=False)
    text = raw + "sweep:\n  train.lr: [0.1, 0.2]\n  train.lr: [0.05]\n"
    path = tmp_path / "s.yaml"
    path.write_text(text)
    n = len(raw.splitlines())
    _code, err = cli(capsys, ["sweep", path, "--out", tmp_path / "o"], "duplicate keys", expect=2)
    assert f"YAML refused: key 'train.lr' appears twice in one mapping (lines {n + 2} and {n + 3}); give it once" in err
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()


def test_a_repeated_key_in_a_set_value_is_refused(tmp_path: Path, capsys: Any, write_scenario: Any) -> None:
    path = write_scenario(tiny_scenario())
    _code, err = cli(capsys, ["validate", path, "--set", "train={lr: 0.1, lr: 0.2}"], "duplicate keys", expect=2)
    assert "--set train={lr: 0.1, lr: 0.2}" in err and "appears twice" in err


# -- the Python API ------------------------------------------------------------------------------------------


def test_a_bad_scenario_is_a_value_error_in_the_api(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="train.lr") as err:
        simfl.run(tiny_scenario(train={"lr": -1.0}), out=tmp_path / "o")
    assert isinstance(err.value, InputError) and not (tmp_path / "o").exists()
