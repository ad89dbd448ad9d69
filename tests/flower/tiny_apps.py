"""Tiny NumPy Flower apps (a model of four numbers, no data, no torch in the apps) for fast runs under simfl, and
ServerApps whose own threads call the grid or fail."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg


def initial() -> ArrayRecord:
    """The tiny model: four float32 numbers."""
    return ArrayRecord({"w": Array(np.zeros(4, dtype=np.float32))})


server_app = ServerApp()
"""Flower's FedAvg over every node for ``num-server-rounds`` (default 2), scored by the norm of the model."""


@server_app.main()
def server_main(grid: Grid, context: Context) -> None:
    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        norm = float(np.linalg.norm(arrays["w"].numpy()))
        return MetricRecord({"accuracy": min(1.0, norm / 10.0), "loss": norm})

    FedAvg(fraction_evaluate=0.0).start(grid=grid, initial_arrays=initial(),
                                        num_rounds=int(context.run_config.get("num-server-rounds", 2)),
                                        train_config=ConfigRecord({"lr": 0.1}), evaluate_fn=evaluate)


client_app = ClientApp()
"""Adds the config's ``lr`` to each number of the model it was sent; 10 examples."""


@client_app.train()
def client_train(msg: Message, context: Context) -> Message:
    record = msg.content.array_records
    (arrays,) = record.values()
    lr = float(msg.content["config"].get("lr", 0.1))
    trained = ArrayRecord({k: Array(v.numpy() + np.float32(lr)) for k, v in arrays.items()})
    return Message(RecordDict({"arrays": trained, "metrics": MetricRecord({"num-examples": 10})}), reply_to=msg)


def app_folder(folder: Path, config: str = "num-server-rounds = 2\n", serverapp: str = "server_app") -> Path:
    """A Flower App folder in ``folder`` whose components are this module's (``serverapp`` names its ServerApp), with
    ``config`` as its ``[tool.flwr.app.config]`` and a federation of 3 supernodes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "tiny"\nversion = "1.0.0"\n\n[tool.flwr.app.components]\n'
        f'serverapp = "tests.flower.tiny_apps:{serverapp}"\nclientapp = "tests.flower.tiny_apps:client_app"\n\n'
        f'[tool.flwr.app.config]\n{config}\n[tool.flwr.federations]\ndefault = "local"\n\n'
        '[tool.flwr.federations.local]\noptions.num-supernodes = 3\n')
    return folder


def _train(grid: Grid) -> list[Message]:
    """A train message of the tiny model to every node the grid lists."""
    return [Message(RecordDict({"arrays": initial(), "config": ConfigRecord({"lr": 0.1})}), dst_node_id=n,
                    message_type=MessageType.TRAIN) for n in grid.get_node_ids()]


late_app = ServerApp()
"""Starts a thread (not a daemon) that sends once ``main`` has returned, then returns."""


@late_app.main()
def late_main(grid: Grid, context: Context) -> None:
    messages = _train(grid)
    returned = threading.Event()

    def send() -> None:
        returned.wait()
        time.sleep(0.05)
        grid.send_and_receive(messages)

    threading.Thread(target=send, name="late-sender").start()
    returned.set()


pushing_app = ServerApp()
"""Pushes its messages from a thread of its own, which ``main`` waits for."""


@pushing_app.main()
def pushing_main(grid: Grid, context: Context) -> None:
    messages = _train(grid)
    worker = threading.Thread(target=lambda: grid.push_messages(messages), name="pusher")
    worker.start()
    worker.join()


failing_thread_app = ServerApp()
"""A thread of its own raises (Flower's own kind of error, from Flower's own code: a record of a wrong value)."""


@failing_thread_app.main()
def failing_thread_main(grid: Grid, context: Context) -> None:
    messages = _train(grid)
    worker = threading.Thread(target=lambda: ConfigRecord({"bad": object()}), name="helper")  # type: ignore[dict-item]
    worker.start()
    worker.join()
    grid.send_and_receive(messages)
