"""Flower's own examples, as shipped, under ``simfl flwr run`` and under Flower's simulation engine: wall seconds.

Ten of the examples in Flower's repository (``examples/`` of a checkout, ``--flower``), each run with its own run
config and the node count its federation used (``num-supernodes``, :data:`EXAMPLES`). This machine has no internet,
so each example's Hugging Face dataset is staged as local Parquet files (:func:`stage_dataset`) and the one string
that names it in the example's code is replaced by that folder's path (:func:`stage_example`); nothing else in an
example changes but two imports the installed Flower has moved (:attr:`Example.edits`), Weights & Biases is off
(``WANDB_MODE=disabled``: the tutorial's strategy logs to it), and both engines run the same staged copy. The data
staged: MNIST's own rows (``$SIMFL_DATA/mnist``) for MNIST and, as a stand-in of the same shape, Fashion-MNIST;
scikit-learn's iris for both iris datasets; generated rows of the right columns, types and counts for CIFAR-10, the
adult census and the Titanic passengers. A round's work is then what it is with the real data (the same rows, shapes
and models), which is what a wall time measures.

Each side runs in a fresh process with a fresh working folder (the examples write their models there), its start
(imports, Ray, the app's set-up) included, the sides alternating, medians of ``--repeat``; before the first timed
run each dataset is loaded once so that both read it from Hugging Face's cache. Flower's engine is run as
:mod:`benchmarks.flower_engine` runs it (torch's own kernels), ``simfl flwr run`` with its defaults (portable
numerics; ``--native``: also under native numerics, a third side). Prints one line per example
(``example=... simfl_seconds=... flower_seconds=... flower_vs_simfl=...``).

    python -m benchmarks.flower_examples --flower PATH/TO/flower --repeat 3 [--only NAME,...] [--cpus N] [--native]

``--cpus 1``: one CPU per ClientApp on both sides, so that Flower's engine runs two ClientApps side by side on a
2-core machine and simfl's calls go to its worker processes once they prove heavy (``simfl flwr run``'s default).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.flower_engine import flower_engine

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "simfl" / "flower-examples"


@dataclass(frozen=True)
class Example:
    """One of Flower's examples: its folder under ``examples/``, its package, the nodes its federation ran, the CPUs
    (torch threads) per ClientApp and the datasets it loads (Hugging Face names)."""

    folder: str
    package: str
    nodes: int
    cpus: int = 2
    """CPUs (torch threads) per ClientApp: Flower's default, 2, where the example's federation named none."""
    datasets: tuple[str, ...] = ()
    run_config: dict[str, Any] = field(default_factory=dict)
    """Run-config values given to both engines (none: each example runs its own config as shipped)."""
    edits: tuple[tuple[str, str], ...] = ()
    """Text replaced in the example's code beyond its datasets' names, for both engines: where the example as
    checked out imports what the installed Flower has moved."""


EXAMPLES = {
    "quickstart-numpy": Example("quickstart-numpy", "quickstart_numpy", 10),
    "quickstart-sklearn": Example("quickstart-sklearn", "sklearnexample", 3, datasets=("hitorilabs/iris",)),
    "quickstart-pandas": Example("quickstart-pandas", "pandas_example", 4, datasets=("scikit-learn/iris",)),
    "custom-mods": Example("custom-mods", "custom_mods", 10, datasets=("uoft-cs/cifar10",),
                           edits=(("from flwr.client.typing import", "from flwr.clientapp.typing import"),)),
    "advanced-pytorch": Example("advanced-pytorch", "pytorch_example", 50, cpus=2,
                                datasets=("zalando-datasets/fashion_mnist",),
                                edits=(("from flwr.common.typing import UserConfig", "from flwr.app import UserConfig"),)),
    "fl-dp-sa": Example("fl-dp-sa", "fl_dp_sa", 100, datasets=("ylecun/mnist",)),
    "fl-tabular": Example("fl-tabular", "fltabular", 5, datasets=("scikit-learn/adult-census-income",)),
    "federated-vae": Example("federated-vae", "fedvaeexample", 10, datasets=("uoft-cs/cifar10",)),
    "step-by-step": Example("flower-simulation-step-by-step-pytorch/my-awesome-app", "my_awesome_app", 10,
                            datasets=("zalando-datasets/fashion_mnist",)),
    "vertical-fl": Example("vertical-fl", "vertical_fl", 3, datasets=("julien-c/titanic-survival",)),
}
"""The ten examples measured, each with the node count of its federation (the examples' ``pyproject.toml`` before
Flower moved federations out of it; federated-vae named none and takes Flower's default of 10)."""


def _images(rows: int, shape: tuple[int, ...], pixels: Any | None, seed: int) -> list[bytes]:
    """``rows`` PNG images of ``shape`` (height, width[, 3]): ``pixels``' rows when given, else generated noise."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for k in range(rows):
        array = pixels[k] if pixels is not None else rng.integers(0, 256, shape, dtype=np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG")
        out.append(buffer.getvalue())
    return out


def _mnist(split: str) -> tuple[Any, Any] | None:
    """MNIST's images and labels from ``$SIMFL_DATA/mnist`` (IDX files), or None where they are not here."""
    import gzip

    import numpy as np

    root = Path(os.environ.get("SIMFL_DATA", Path(__file__).resolve().parents[2] / "shared" / "datasets")) / "mnist"
    prefix = "train" if split == "train" else "t10k"
    images, labels = root / f"{prefix}-images-idx3-ubyte.gz", root / f"{prefix}-labels-idx1-ubyte.gz"
    if not images.exists():
        return None
    pixels = np.frombuffer(gzip.decompress(images.read_bytes()), np.uint8, offset=16).reshape(-1, 28, 28)
    return pixels, np.frombuffer(gzip.decompress(labels.read_bytes()), np.uint8, offset=8)


def _image_table(image_column: str, shape: tuple[int, ...], rows: dict[str, int], mnist: bool) -> Callable[
        [str], Any]:
    """A builder of an image dataset's split: MNIST's rows where ``mnist`` and present, else generated images."""
    import numpy as np

    def build(split: str) -> Any:
        import datasets

        real = _mnist(split) if mnist else None
        pixels, labels = real if real is not None else (None, np.random.default_rng(1).integers(0, 10, rows[split]))
        count = rows[split]
        features = datasets.Features({image_column: datasets.Image(),
                                      "label": datasets.ClassLabel(num_classes=10)})
        return datasets.Dataset.from_dict(
            {image_column: [{"bytes": b, "path": None} for b in _images(count, shape, pixels, seed=2)],
             "label": [int(v) for v in labels[:count]]}, features=features)

    return build


def _iris(columns: str) -> Callable[[str], Any]:
    """scikit-learn's iris under either dataset's column names and labels (``hitorilabs``: lowercase, the species
    as 0-2; ``scikit-learn``: in cm, the species as names)."""

    def build(split: str) -> Any:
        import datasets
        from sklearn.datasets import load_iris

        frame = load_iris(as_frame=True).frame
        names = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
        frame.columns = [*names, "target"]
        species = ["setosa", "versicolor", "virginica"]
        if columns == "hitorilabs":
            frame["species"] = frame.pop("target")
        else:
            frame = frame.rename(columns={"sepal_length": "SepalLengthCm", "sepal_width": "SepalWidthCm",
                                          "petal_length": "PetalLengthCm", "petal_width": "PetalWidthCm"})
            frame["Species"] = [f"Iris-{species[t]}" for t in frame.pop("target")]
            frame.insert(0, "Id", range(1, len(frame) + 1))
        return datasets.Dataset.from_pandas(frame, preserve_index=False)

    return build


def _adult(split: str) -> Any:
    """32,561 generated rows with the adult census's 15 columns and their types (income a string, as there)."""
    import datasets
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 32561

    def words(prefix: str, k: int) -> list[str]:
        return [f"{prefix}{v}" for v in rng.integers(0, k, n)]

    frame = pd.DataFrame({
        "age": rng.integers(17, 91, n), "workclass": words("w", 9), "fnlwgt": rng.integers(12285, 1484706, n),
        "education": words("e", 16), "education.num": rng.integers(1, 17, n), "marital.status": words("m", 7),
        "occupation": words("o", 15), "relationship": words("r", 6), "race": words("a", 5), "sex": words("s", 2),
        "capital.gain": rng.integers(0, 99999, n), "capital.loss": rng.integers(0, 4356, n),
        "hours.per.week": rng.integers(1, 100, n), "native.country": words("c", 42),
        "income": np.where(rng.random(n) < 0.24, ">50K", "<=50K")})
    return datasets.Dataset.from_pandas(frame, preserve_index=False)


def _titanic(split: str) -> Any:
    """887 generated passengers with the Titanic dataset's 8 columns and types (names with a title, as there)."""
    import datasets
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(4)
    n = 887
    titles = ["Mr", "Mrs", "Miss", "Master", "Dr", "Rev"]
    frame = pd.DataFrame({
        "Survived": rng.integers(0, 2, n), "Pclass": rng.integers(1, 4, n),
        "Name": [f"Name{k}, {titles[t]}. Given" for k, t in enumerate(rng.integers(0, len(titles), n))],
        "Sex": np.where(rng.random(n) < 0.65, "male", "female"), "Age": rng.uniform(0.4, 80, n).round(1),
        "Siblings/Spouses Aboard": rng.integers(0, 6, n), "Parents/Children Aboard": rng.integers(0, 6, n),
        "Fare": rng.uniform(0, 512, n).round(4)})
    return datasets.Dataset.from_pandas(frame, preserve_index=False)


DATASETS: dict[str, tuple[Callable[[str], Any], tuple[str, ...]]] = {
    "ylecun/mnist": (_image_table("image", (28, 28), {"train": 60000, "test": 10000}, mnist=True), ("train", "test")),
    "zalando-datasets/fashion_mnist": (_image_table("image", (28, 28), {"train": 60000, "test": 10000}, mnist=True),
                                       ("train", "test")),
    "uoft-cs/cifar10": (_image_table("img", (32, 32, 3), {"train": 50000, "test": 10000}, mnist=False),
                        ("train", "test")),
    "hitorilabs/iris": (_iris("hitorilabs"), ("train",)),
    "scikit-learn/iris": (_iris("scikit-learn"), ("train",)),
    "scikit-learn/adult-census-income": (_adult, ("train",)),
    "julien-c/titanic-survival": (_titanic, ("train",)),
}
"""Each dataset's builder of a split and the splits the Hub's copy has (the rows, columns and types of the Hub's)."""


def stage_dataset(name: str, cache: Path = CACHE) -> Path:
    """The local folder standing in for the Hub's dataset ``name`` (``<split>-00000-of-00001.parquet`` files, which
    ``datasets.load_dataset(folder)`` reads as those splits), built once; then loaded once so that Hugging Face's
    cache holds it before any timed run."""
    import datasets

    folder = cache / name.replace("/", "--")
    build, splits = DATASETS[name]
    if not all((folder / f"{split}-00000-of-00001.parquet").exists() for split in splits):
        folder.mkdir(parents=True, exist_ok=True)
        for split in splits:
            build(split).to_parquet(str(folder / f"{split}-00000-of-00001.parquet.part"))
            (folder / f"{split}-00000-of-00001.parquet.part").rename(folder / f"{split}-00000-of-00001.parquet")
    datasets.load_dataset(str(folder))
    return folder


def stage_example(examples: Path, example: Example, work: Path, cache: Path = CACHE) -> Path:
    """A copy of ``example`` under ``work`` with each dataset name in its code replaced by its local folder's path
    (and the example's :attr:`Example.edits` made)."""
    target = work / Path(example.folder).name
    shutil.copytree(examples / example.folder, target)
    local = {name: stage_dataset(name, cache) for name in example.datasets}
    for source in target.rglob("*.py"):
        text = source.read_text()
        for name, folder in local.items():
            text = text.replace(f'"{name}"', repr(str(folder)))
        for old, new in example.edits:
            text = text.replace(old, new)
        source.write_text(text)
    return target


def _simfl_env(numerics: str) -> dict[str, str]:
    """The environment of a ``simfl`` process under ``numerics``: the mode's own kernels (not the pins ``import
    simfl`` set in this process) and this checkout's simfl importable."""
    from simfl.numerics import unpinned_environment

    return {**unpinned_environment(), "SIMFL_NUMERICS": numerics,
            "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}


def _federation(example: Example) -> str:
    """The ``--federation-config`` of the example: its nodes and CPUs per ClientApp."""
    return f"num-supernodes={example.nodes} backend.client-resources.num-cpus={example.cpus}"


def simfl_side(app: Path, example: Example, work: Path, numerics: str = "portable") -> None:
    """``simfl flwr run`` of the staged app with its nodes and CPUs, in a fresh process and working folder, under
    ``numerics`` (``SIMFL_NUMERICS``)."""
    env, federation = _simfl_env(numerics), _federation(example)
    config = " ".join(f"{k}={v!r}" for k, v in example.run_config.items())
    command = [sys.executable, "-m", "simfl", "flwr", "run", str(app), "--out", str(work / "out"), "--force",
               "--quiet", "--workers", "1", "--federation-config", federation]
    done = subprocess.run(command + (["--run-config", config] if config else []), cwd=work, env=env,
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"simfl flwr run of {example.folder} failed:\n{done.stderr[-3000:]}")


_CALLS = """
import sys, time
import simfl.train.flower as flower
from simfl.cli import main
spent = [0.0, 0]
deliver = flower.AppCaller.deliver
def timed(self, *args, **kwargs):
    start = time.perf_counter()
    try:
        return deliver(self, *args, **kwargs)
    finally:
        spent[0] += time.perf_counter() - start
        spent[1] += 1
flower.AppCaller.deliver = timed
begun = time.perf_counter()
code = main(sys.argv[1:])
print(f"wall={{time.perf_counter() - begun:.2f}} calls={{spent[1]}} call_seconds={{spent[0]:.2f}}")
sys.exit(code)
"""


def clientapp_seconds(app: Path, example: Example, work: Path) -> dict[str, float]:
    """One ``simfl flwr run`` of the staged app with every ClientApp call inline, timed: its wall from the command's
    start (imports of simfl and torch before it aside), the calls and the wall seconds spent inside them (the app's
    own code: its training, evaluation and data loading), which no engine running that code one call at a time can
    take less than."""
    from simfl import numerics

    env, federation = _simfl_env(numerics.mode()), _federation(example)
    done = subprocess.run([sys.executable, "-c", _CALLS.format(), "flwr", "run", str(app), "--out", str(work / "out"),
                           "--force", "--quiet", "--workers", "1", "--federation-config", federation,
                           "--set", "executor.kind=inline"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"simfl flwr run of {example.folder} failed:\n{done.stderr[-3000:]}")
    line = done.stdout.strip().splitlines()[-1]
    return {key: float(value) for key, value in (pair.split("=") for pair in line.split())}


def flower_side(app: Path, example: Example) -> None:
    """Flower's simulation engine over the staged app (:func:`benchmarks.flower_engine.flower_engine`)."""
    from simfl.launch.flwr_app import read_app

    config = {**read_app(app).config, **example.run_config}
    flower_engine(config, example.nodes, cpus=example.cpus, app=app, package=example.package, saves_model=False)


def calls(examples: Path, name: str, cpus: int | None = None) -> dict[str, float]:
    """:func:`clientapp_seconds` of the example (``cpus`` as :func:`measure`'s)."""
    example = EXAMPLES[name] if cpus is None else replace(EXAMPLES[name], cpus=cpus)
    with tempfile.TemporaryDirectory() as tmp:
        app = stage_example(examples, example, Path(tmp))
        (Path(tmp) / "work").mkdir()
        return clientapp_seconds(app, example, Path(tmp) / "work")


def measure(examples: Path, name: str, repeat: int, cpus: int | None = None, native: bool = False) -> dict[
        str, float]:
    """Median wall seconds of each side over ``repeat`` runs of the example, the sides alternating; ``cpus``: the CPUs
    per ClientApp on both sides (None: the example's own); ``native``: a third side, simfl under native numerics."""
    example = EXAMPLES[name] if cpus is None else replace(EXAMPLES[name], cpus=cpus)
    sides = ("simfl", "flower", "simfl_native") if native else ("simfl", "flower")
    taken: dict[str, list[float]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory() as tmp:
        app = stage_example(examples, example, Path(tmp))
        sys.path.insert(0, str(app))
        for k in range(repeat):
            for side in sides:
                work = Path(tmp) / f"{side}{k}"
                work.mkdir()
                start = time.perf_counter()
                if side == "flower":
                    flower_side(app, example)
                else:
                    simfl_side(app, example, work, "native" if side == "simfl_native" else "portable")
                taken[side].append(time.perf_counter() - start)
        sys.path.remove(str(app))
    return {side: statistics.median(values) for side, values in taken.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flower", type=Path, required=True, help="a checkout of Flower's repository")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (medians)")
    parser.add_argument("--only", default=",".join(EXAMPLES), help="comma-separated example names")
    parser.add_argument("--cpus", type=int, default=None,
                        help="CPUs per ClientApp on both sides, for every example (default: each example's own)")
    parser.add_argument("--native", action="store_true",
                        help="also simfl under SIMFL_NUMERICS=native, a third side alternating with the two")
    parser.add_argument("--calls", action="store_true",
                        help="instead of the wall ratio: one simfl run per example, its calls one at a time, and the "
                             "wall seconds spent inside the app's ClientApp calls")
    args = parser.parse_args(argv)
    # offline, and Weights & Biases (which the tutorial's strategy logs to) a no-op on both sides
    os.environ.update({"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"})
    for name in args.only.split(","):
        if args.calls:
            spent = calls(args.flower / "examples", name, args.cpus)
            print(f"example={name} " + " ".join(f"{k}={v:g}" for k, v in spent.items()), flush=True)
            continue
        try:
            taken = measure(args.flower / "examples", name, args.repeat, args.cpus, args.native)
        except RuntimeError as failed:  # one example that does not run leaves the others measured
            print(f"example={name} failed: {str(failed).splitlines()[-1]}", flush=True)
            continue
        native = (f" simfl_native_seconds={taken['simfl_native']:.2f} "
                  f"flower_vs_simfl_native={taken['flower'] / taken['simfl_native']:.2f}") if args.native else ""
        print(f"example={name} simfl_seconds={taken['simfl']:.2f} flower_seconds={taken['flower']:.2f} "
              f"flower_vs_simfl={taken['flower'] / taken['simfl']:.2f}" + native, flush=True)


if __name__ == "__main__":
    main()
