"""Every Python block of docs/plugins.md runs as the page says, and the check it documents finds wrong statements.

The page's blocks are marked by an HTML comment on the line before them (invisible on the site):

- ``<!-- file: mylab/rules.py -->``: part of a module a reader saves (the blocks of one file, in page order);
- ``<!-- run -->``: a script run once those modules are importable, in a scratch folder;
- ``<!-- output -->`` (a ``text`` block after a script): what the script prints, exactly;
  ``<!-- output: measured -->``: the same with every number and every verdict (``agrees``, ``differs``) read as any
  (a measurement of this machine's speed);
- ``<!-- scenario -->`` (a ``yaml`` block): scenario keys that validate over a tiny scenario.

A Python block without a mark fails the test, so no example on the page goes unrun.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from pydantic import Field

from simfl.algorithms.base import AlgorithmConfig, Arrival, Setup, SingleModel, SyncAlgorithm
from simfl.data import DataConfigBase, Dataset
from simfl.data.configs import DataFacts
from simfl.fields import Section
from simfl.latency import LatencyModel, Workload
from simfl.latency.base import RoundTimes
from simfl.launch.plugin_check import check_algorithm, check_dataset, check_latency, check_model
from simfl.models.measured import ModelCost
from simfl.schema.scenario import validate
from tests.conftest import tiny_scenario

PAGE = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
MARK = re.compile(r"<!-- (file: (?P<file>\S+)|(?P<run>run)|(?P<output>output)(?P<vary>: measured)?|"
                  r"(?P<scenario>scenario)) -->\n\s*\Z")
MEASURED = re.compile(r"\d+(\.\d+)?| *\b(agrees|differs)\b")
"""What a measured check prints that varies from run to run: its numbers and its verdict, with the verdict's
padding (the column is right-aligned, so ``agrees`` and ``differs`` are padded differently)."""


def blocks() -> list[tuple[str, str, re.Match[str] | None]]:
    """Each fenced block of the page: its language, its text and the mark before it (None: none)."""
    text = PAGE.read_text()
    found = []
    for fence in FENCE.finditer(text):
        before = text[max(0, fence.start() - 200):fence.start()]
        mark = MARK.search(before)
        found.append((fence.group(1), fence.group(2), mark))
    return found


def test_every_python_block_is_marked() -> None:
    unmarked = [body.splitlines()[0] for lang, body, mark in blocks() if lang == "python" and mark is None]
    assert not unmarked, f"python blocks of docs/plugins.md without a test mark: {unmarked}"


@pytest.fixture
def mylab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The page's modules saved under a scratch folder that is the working folder and on sys.path."""
    files: dict[str, str] = {}
    for lang, body, mark in blocks():
        if mark is not None and mark.group("file"):
            assert lang == "python"
            files[mark.group("file")] = files.get(mark.group("file"), "") + body + "\n"
    assert set(files) == {"mylab/rules.py", "mylab/delays.py", "mylab/data.py", "mylab/nets.py"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "mylab" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in [m for m in sys.modules if m == "mylab" or m.startswith("mylab.")]:
        monkeypatch.delitem(sys.modules, module)
    yield tmp_path
    for module in [m for m in sys.modules if m == "mylab" or m.startswith("mylab.")]:
        del sys.modules[module]


def test_the_pages_scripts_run_and_print_what_it_shows(mylab: Path) -> None:
    found = blocks()
    ran = 0
    for i, (_lang, body, mark) in enumerate(found):
        if mark is None or not mark.group("run"):
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(body, f"docs/plugins.md block {i}", "exec"), {"__name__": f"plugin_docs_{i}"})
        ran += 1
        after = found[i + 1] if i + 1 < len(found) else None
        if after is not None and after[2] is not None and after[2].group("output"):
            printed, shown = out.getvalue(), after[1]
            if after[2].group("vary"):
                printed, shown = MEASURED.sub("_", printed), MEASURED.sub("_", shown)
            assert printed == shown, f"block {i} printed:\n{out.getvalue()}"
    assert ran >= 6


def test_the_pages_scenario_keys_validate_over_a_tiny_scenario(mylab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMFL_ALLOW_IMPORTS", "1")
    parts = [yaml.safe_load(body) for lang, body, mark in blocks() if mark is not None and mark.group("scenario")]
    assert parts
    for part in parts:
        scenario = validate(tiny_scenario(**part), "docs/plugins.md")
        assert scenario.algorithms


# -- the check the page documents, on plugins whose statements are wrong ------------------------------------------


class _BaseConfig(Section):
    """Client m's rounds last base * (m + 1) seconds."""

    base: float = Field(1.0, description="Round latency of client 0.")


class _Global(LatencyModel[_BaseConfig]):
    """Draws from NumPy's global generator instead of its client's stream."""

    Config = _BaseConfig

    def draw(self, client: int, gen: np.random.Generator) -> float:
        return self.config.base * (client + 1) * (0.5 + np.random.random())  # noqa: NPY002 - the mistake checked


class _Counting(LatencyModel[_BaseConfig]):
    """Alternates short and long rounds by a counter kept in self, which state() does not carry."""

    Config = _BaseConfig

    def __init__(self, config: _BaseConfig, num_clients: int, seed: int, workload: Workload) -> None:
        super().__init__(config, num_clients, seed, workload)
        self.count = [0] * num_clients

    def draw(self, client: int, gen: np.random.Generator) -> float:
        self.count[client] += 1
        return self.config.base * (1 + self.count[client] % 3) * gen.uniform(0.9, 1.1)


class _Wrong(LatencyModel[_BaseConfig]):
    """Its rounds last base * (m + 1); it states twice that, and reads the FLOPs without saying so."""

    Config = _BaseConfig

    def __init__(self, config: _BaseConfig, num_clients: int, seed: int, workload: Workload) -> None:
        super().__init__(config, num_clients, seed, workload)
        self.flops = workload.flops_per_sample

    def draw(self, client: int, gen: np.random.Generator) -> float:
        return self.config.base * (client + 1)

    @classmethod
    def round_times(cls, config: _BaseConfig, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        seconds = [2 * config.base * (m + 1) for m in range(num_clients)]
        return RoundTimes.of(seconds, 0.0, seconds)


def test_the_latency_check_finds_each_broken_statement() -> None:
    assert check_latency(_Global, {}).line("a client's k-th draw").verdict == "differs"
    counting = check_latency(_Counting, {})
    assert counting.line("draws after state()").verdict == "differs"
    assert counting.line("round_times").verdict == "not stated" and not counting.problems[1:]
    wrong = check_latency(_Wrong, {"base": 0.5}, clients=4, draws=8)
    assert {line.what for line in wrong.lines if line.verdict == "differs"} == {
        "mean round time", "updates per second, every client in flight", "each client's mean round time",
        "each client's shortest round", "flops_use (reads the model's training FLOPs)"}
    assert not wrong.ok and len(wrong.problems) == 5 and "0.5" in str(wrong)


class _RoundsConfig(AlgorithmConfig):
    """Rounds of two clients, whose size the config does not state (no clients_per_round field)."""


class _Rounds(SingleModel, SyncAlgorithm[_RoundsConfig]):
    Config = _RoundsConfig

    def __init__(self, config: _RoundsConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()

    @property
    def clients_per_round(self) -> int:
        return 2

    def round_weights(self) -> torch.Tensor:
        return self.w

    def aggregate(self, arrivals: list[Arrival]) -> None:
        self.w = torch.stack([a.weights for a in arrivals]).mean(dim=0)


def test_the_algorithm_check_finds_an_unstated_round_size() -> None:
    report = check_algorithm({"name": _Rounds}, updates=400, warm=100)
    line = report.line("round_clients")
    assert line.verdict == "differs" and line.observed == "2 updates a round over 200 rounds"
    assert report.line("arrival_passes").verdict == "not stated"


def test_the_dataset_and_model_checks_find_wrong_facts_and_costs() -> None:
    class WrongFacts(DataConfigBase):
        def facts(self) -> DataFacts:
            return DataFacts((5,), 2, 90, 45)

    class Data:
        Config = WrongFacts

        @staticmethod
        def load(config: WrongFacts) -> Dataset:
            x = torch.zeros(135, 4)
            return Dataset("d", x[:90], torch.zeros(90, dtype=torch.long), x[90:], torch.zeros(45, dtype=torch.long), 2)

    report = check_dataset(Data, {"partition": {"kind": "iid", "clients": 3}})
    assert report.problems == ["data.dataset Data: sample shape: stated (5,), observed (4,)"]

    class WrongCost(Section):
        def cost(self, shape: tuple[int, ...], classes: int) -> ModelCost:
            return ModelCost(11, 44, 32, {"1.weight": 8, "1.bias": 2})

    class Net:
        Config = WrongCost

        @staticmethod
        def build(config: WrongCost, input_shape: tuple[int, ...], num_classes: int) -> torch.nn.Module:
            return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, num_classes))

    report = check_model(Net, {}, (4,), 2)
    assert [line.what for line in report.lines if line.verdict == "differs"] == ["parameters", "bytes"]
