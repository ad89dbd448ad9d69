"""What simfl says when a Flower user's app fails or exchanges no model: the user's error, in its own words.

A ClientApp that raises is the app's error (one line naming the app and the exception, exit 2, never "internal
error", and its folder's INCOMPLETE tells to fix the code, not to resume, which would run the same code again). An
app that exchanges no model (a vertical or analytics app) under a rule that trains one is told so: the rule needs the
ClientApp to reply with the model's weights as one ArrayRecord, what this app sends instead, and what runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("flwr")

import yaml  # noqa: E402

from simfl.cli import main  # noqa: E402
from tests.flower.eval_apps import app_folder  # noqa: E402

LATENCY = ("--set", "latency={model: constant, seconds: [10, 12, 20]}", "--set", "eval.every=20")
FEDBUFF = ("--set", "algorithms=[{name: fedbuff, buffer: 2}]")
APPS = "tests.flower.eval_apps"
NEEDS = ("the algorithm trains a model, so it needs the ClientApp to reply to each train message with the model's "
         "weights as one ArrayRecord; ")
RUN_IT = ("this app exchanges no model (as a vertical or analytics app does), so run it under its own ServerApp (the "
          "entry {name: serverapp}: simfl flwr run APP_DIR without algorithms), a rule that needs no model of simfl's")


def flwr(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    """``simfl flwr run`` in this process: its exit code and the lines it wrote to stderr."""
    capfd.readouterr()
    code = main(["flwr", "run", *argv, "--quiet", "--workers", "1", *LATENCY])
    return code, capfd.readouterr().err.strip().splitlines()


def users_error(code: int, lines: list[str], out: Path) -> None:
    """One line, exit 2, the app and its exception named as the app's error; INCOMPLETE says the same, no resume."""
    assert code == 2 and len(lines) == 1, lines
    line = lines[0]
    assert f"the ClientApp {APPS}:raising_app raised ValueError: the app's own training failed (an error in that " \
           "code, not in simfl); its traceback is in " in line, line
    assert "(client 1, node 2, its " in line and "internal error" not in line and "--resume" not in line, line
    crash = Path(line.rsplit(" ", 1)[-1])
    assert "raising_train" in crash.read_text()
    incomplete = (out.with_name(out.name + ".partial") / "INCOMPLETE").read_text()
    assert "internal error" not in incomplete and "--resume" not in incomplete, incomplete
    assert "raising_app raised ValueError: the app's own training failed (an error in that code, not in simfl)" in \
        incomplete and "continue with: fix that code, then run the command again with --force" in incomplete


@pytest.mark.parametrize("entry", ["fedbuff", "serverapp"])
def test_a_raising_clientapp_is_the_apps_error(tmp_path: Path, capfd: pytest.CaptureFixture[str], entry: str) -> None:
    """Node 2's training raises, under simfl's FedBuff and under the app's own ServerApp."""
    folder = app_folder(tmp_path / "app", "raising_app")
    out = tmp_path / "o"
    code, lines = flwr(capfd, str(folder), "--out", str(out), *(FEDBUFF if entry == "fedbuff" else ()))
    users_error(code, lines, out)


def test_a_raising_clientapp_of_a_scenario_is_the_apps_error(tmp_path: Path, capfd: pytest.CaptureFixture[str]
                                                            ) -> None:
    """The same ClientApp named by a scenario (``client.flower_app``, the app's data, its own model) under
    ``simfl run``."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "name": "raising", "seeds": [0], "data": {"dataset": "flower_app", "partition": {"kind": "iid", "clients": 3}},
        "model": {"name": "flower_app", "app": f"{APPS}:server_app"}, "budget": {"updates": 4},
        "latency": {"model": "constant", "seconds": [10, 12, 20]}, "eval": {"every": 20},
        "algorithms": [{"name": "fedbuff", "buffer": 2}],
        "client": {"flower_app": f"{APPS}:raising_app"}}))
    out = tmp_path / "o"
    capfd.readouterr()
    code = main(["run", str(path), "--out", str(out), "--quiet", "--workers", "1", "--allow-imports"])
    users_error(code, capfd.readouterr().err.strip().splitlines(), out)


@pytest.mark.parametrize(("clientapp", "serverapp", "found"), [
    ("modelless_app", "server_app",
     f"the ClientApp {APPS}:modelless_app replied with no ArrayRecord (MetricRecord 'metrics'): "),
    ("embedding_app", "server_app",
     f"the ClientApp {APPS}:embedding_app replied with the ArrayRecord 'embedding' of 'embedding' 3x2 float32, none "
     "of the model's tensors ('w'): "),
    ("modelless_app", "query_server_app",
     "simfl's algorithms take the model from the ServerApp's first train message, and the ServerApp "
     f"{APPS}:query_server_app sends none with one ArrayRecord of the model's weights: "),
])
def test_an_app_without_a_model_under_a_rule_that_trains_one(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                              clientapp: str, serverapp: str, found: str) -> None:
    """A ClientApp replying with metrics only, or with arrays that are not the model, or a ServerApp that sends no
    model: one line, exit 2, in the app's terms."""
    folder = app_folder(tmp_path / "app", clientapp, serverapp)
    code, lines = flwr(capfd, str(folder), "--out", str(tmp_path / "o"), *FEDBUFF)
    assert code == 2 and len(lines) == 1, lines
    assert NEEDS + found + RUN_IT in lines[0], lines[0]
    assert "name a model" not in lines[0] and "sent none with one ArrayRecord" not in lines[0]
