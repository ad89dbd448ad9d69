"""Partitions made by Flower Datasets' partitioners (``partition: {kind: flwr, ...}``; extra ``flower``).

Any horizontal partitioner that ``flwr_datasets.partitioner`` exports (DirichletPartitioner,
IidPartitioner, ShardPartitioner, PathologicalPartitioner, NaturalIdPartitioner, SizePartitioner, ...)
splits the training set, so a simfl run uses the very partitioning code of a Flower study.
The partitioner sees an in-memory table of the training set with the columns ``label`` (the class),
``idx`` (the sample's position, 0..n-1) and, when the dataset has natural clients, ``group``
(``data.group`` of an hf dataset, the subject of har and hapt); ``options.partition_by`` names
``label`` or ``group``. Nothing is downloaded and no file is written: the table lives in memory.

Order: as Flower's ``FederatedDataset`` does by default, the rows are shuffled before the partitioner
sees them (``shuffle: false`` keeps the dataset's order). This matters: IidPartitioner and the
size-based partitioners (Size, Linear, Square, Exponential) cut contiguous slices, so on a training
set sorted by class or subject they would be anything but IID.

Seeds: a partitioner whose constructor takes ``seed`` gets one drawn from the scenario seed's
stream ``(seed, "partition")``, and the shuffle is drawn from the same stream, so each simfl seed
has its own partition and the same seed gives the same one. ``options.seed`` fixes the partitioner's
seed instead; with ``shuffle: false`` too, every simfl seed then gets the same partition.

Each client's indices come back sorted, as from every other kind: the partitioner's order within
a client (its ``shuffle``) does not matter, since the trainer draws its own batch order per client.

``datasets`` and ``flwr_datasets`` are imported only when a ``flwr`` partition is checked or made,
so simfl works without the extra.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import logging
import os
import sys
import uuid
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator
from typing_extensions import TypeAliasType

from simfl.errors import InputError
from simfl.fields import PositiveInt, Section

INSTALL_HINT = "needs flwr-datasets: pip install 'simfl[flower]'"
"""What a ``flwr`` partition says when the library is missing."""

COLUMNS = ("label", "group")
"""The columns ``options.partition_by`` may name."""

SET_BY_SIMFL = {"num_partitions": "clients"}
"""Constructor arguments simfl fills from another key of ``data.partition``."""

NOT_SAMPLE_SPLITS = {
    "Partitioner": "is the abstract base class",
    "IdToSizeFncPartitioner": "needs a Python function (use LinearPartitioner, SquarePartitioner, "
    "ExponentialPartitioner or SizePartitioner)",
    "VerticalEvenPartitioner": "splits the features (columns) between clients, not the samples",
    "VerticalSizePartitioner": "splits the features (columns) between clients, not the samples",
}
"""Partitioners that ``flwr_datasets.partitioner`` exports but that cannot split a simfl training set."""

Scalar = bool | int | float | str
OptionValue = TypeAliasType("OptionValue", Scalar | list[Scalar] | list[list[Scalar]])
"""An option: a number, string or boolean, a list of them, or a list of such lists (a 2-D array)."""


class FlwrConfig(Section):
    """A Flower Datasets partitioner (flwr_datasets.partitioner) splits the training set; needs the flower extra."""

    kind: Literal["flwr"] = Field("flwr", description="Partition kind.")
    partitioner: str = Field(
        description="Class name in flwr_datasets.partitioner, e.g. DirichletPartitioner, IidPartitioner, "
        "ShardPartitioner, PathologicalPartitioner, NaturalIdPartitioner, SizePartitioner, LinearPartitioner."
    )
    clients: PositiveInt | None = Field(
        None, validate_default=True,
        description="Number of clients: the partitioner's num_partitions, required where it takes one; for the "
        "others (NaturalIdPartitioner, SizePartitioner, ...) the number they give, checked when given.",
    )
    options: dict[str, OptionValue] = Field(
        default_factory=dict,
        description="Keyword arguments of the partitioner's constructor, e.g. {alpha: 0.1, partition_by: label, "
        "min_partition_size: 10}: numbers, strings, booleans, lists of them, or lists of such lists (passed as a "
        "2-D numpy array, e.g. DistributionPartitioner's distribution_array). partition_by names label (the "
        "class) or group (the natural client: data.group of hf, the subject of har/hapt). seed: by default drawn "
        "from the scenario seed's partition stream, so each seed has its own partition; set it to use one "
        "partition for every seed.",
    )
    shuffle: bool = Field(
        True,
        description="Shuffle the training set (partition stream) before the partitioner sees it, as Flower's "
        "FederatedDataset does by default; false: it sees the dataset's own order, and IidPartitioner, "
        "SizePartitioner, LinearPartitioner, ... cut contiguous slices of it. (options.shuffle is the "
        "partitioner's own, within each client.)",
    )

    @field_validator("partitioner")
    @classmethod
    def _known(cls, name: str) -> str:
        partitioner_class(name)
        return name

    @field_validator("clients")
    @classmethod
    def _clients(cls, clients: int | None, info: ValidationInfo) -> int | None:
        name = info.data.get("partitioner")
        if clients is None and name is not None and "num_partitions" in _parameters(partitioner_class(name)):
            raise ValueError(f"{name} needs the number of clients (its num_partitions)")
        return clients

    @field_validator("options", mode="before")
    @classmethod
    def _values(cls, options: Any) -> Any:
        if isinstance(options, dict):
            for key, value in options.items():
                if not _plain(value, 2):
                    raise ValueError(f"{key}: must be a number, string or boolean, a list of them or a list of such "
                                     f"lists, got {value!r} (leave an option out for its default)")
        return options

    @field_validator("options")
    @classmethod
    def _options(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        name = info.data.get("partitioner")
        if name is not None:
            _check_options(name, options)
        return options

    @model_validator(mode="after")
    def _constructed(self) -> FlwrConfig:
        """The partitioner built with these options, as the run builds it, so ``simfl validate`` refuses what its
        constructor refuses (``alpha: -1``); a split that needs the data to fail fails at the run's start."""
        built(self, seed=0)
        return self


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is a scalar option, or a list (of lists, ``depth`` deep) of scalars."""
    if isinstance(value, bool | int | float | str):
        return True
    return depth > 0 and isinstance(value, list | tuple) and all(_plain(v, depth - 1) for v in value)


def _library() -> Any:
    """``flwr_datasets.partitioner``, or the install hint as a ValueError (pydantic names the field)."""
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # the partitioners send none; nothing else may either
    try:
        return importlib.import_module("flwr_datasets.partitioner")
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0] in ("flwr_datasets", "datasets")
        raise ValueError(INSTALL_HINT + ("" if missing else f" ({_detail(exc)})")) from None


def usable_partitioners() -> dict[str, type]:
    """The partitioners a ``flwr`` partition may name: every exported subclass of ``Partitioner`` that splits samples."""
    lib = _library()
    return {
        name: obj for name, obj in sorted(vars(lib).items())
        if isinstance(obj, type) and issubclass(obj, lib.Partitioner) and name not in NOT_SAMPLE_SPLITS
        and not inspect.isabstract(obj)
    }


def partitioner_class(name: str) -> type:
    """The class ``name`` of ``flwr_datasets.partitioner``; a ValueError saying what is allowed otherwise."""
    known = usable_partitioners()
    if name in known:
        return known[name]
    why = NOT_SAMPLE_SPLITS.get(name)
    if why is not None:
        raise ValueError(f"{name} {why}; allowed: {', '.join(known)}")
    raise ValueError(f"unknown partitioner {name!r}; allowed: {', '.join(known)}")


def _parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The keyword arguments of a partitioner's constructor."""
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return {k: p for k, p in params.items() if k != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _check_options(name: str, options: dict[str, Any]) -> None:
    """Option names against the constructor of ``name``: none unknown, none missing, partition_by a known column."""
    params = _parameters(partitioner_class(name))
    allowed = [k for k in params if k not in SET_BY_SIMFL]
    for key in options:
        if key in SET_BY_SIMFL:
            raise ValueError(f"{key} is set by data.partition.{SET_BY_SIMFL[key]}, not by an option")
        if key not in params:
            raise ValueError(f"{name} has no option {key!r}; its options: {', '.join(allowed) or 'none'}")
    missing = [k for k in allowed if params[k].default is inspect.Parameter.empty and k not in options]
    if missing:
        raise ValueError(f"{name} needs option{'s' if len(missing) > 1 else ''} {', '.join(missing)}; its options: "
                         f"{', '.join(allowed)}")
    column = options.get("partition_by")
    if "partition_by" in params and column not in COLUMNS:
        raise ValueError(f"partition_by must be label (the class) or group (the natural client), got {column!r}")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No progress bars, warnings or log lines from the libraries inside the block (the outcome is what counts)."""
    datasets = importlib.import_module("datasets")
    bars = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    logger = logging.getLogger("datasets")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    patched = []  # flwr_datasets modules that draw plain tqdm bars (NaturalIdPartitioner)
    for module in list(sys.modules.values()):
        bar = getattr(module, "tqdm", None) if getattr(module, "__name__", "").startswith("flwr_datasets.") else None
        if isinstance(bar, type):
            patched.append((module, bar))
            setattr(module, "tqdm", functools.partial(bar, disable=True))  # noqa: B010
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for module, bar in patched:
            setattr(module, "tqdm", bar)  # noqa: B010
        logger.setLevel(level)
        if bars:
            datasets.enable_progress_bars()


def _detail(exc: BaseException) -> str:
    """The exception as one short line: its type and its message, whitespace collapsed, at most 300 characters."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    return f"{type(exc).__name__}{': ' + text if text else ''}"


@functools.cache
def _table_class() -> type[Any]:
    """``datasets.Dataset`` whose ``select`` gives the result a fresh fingerprint instead of hashing the indices.

    datasets fingerprints every ``select`` by pickling its arguments; a partitioner that keeps its indices
    as lists of numpy integers (PathologicalPartitioner) then spends seconds per 10,000 samples on hashes
    that only name cache files, and an in-memory table writes none.
    """
    datasets = importlib.import_module("datasets")

    class Table(datasets.Dataset):  # type: ignore[name-defined]
        """An in-memory training-set table for a partitioner."""

        def select(self, indices: Any, *args: Any, **kwargs: Any) -> Any:
            """The rows at ``indices``, under a random fingerprint unless the caller gives one."""
            if len(args) < 4:
                kwargs.setdefault("new_fingerprint", uuid.uuid4().hex)
            return super().select(indices, *args, **kwargs)

    return Table


def _text(value: Any) -> str:
    """An option value as YAML writes it (true, [1, 2])."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return f"[{', '.join(map(_text, value))}]"
    return str(value)


def _shown(options: dict[str, Any]) -> str:
    """Options as they read in YAML, e.g. ``{alpha: 0.1, partition_by: label}``."""
    return "{" + ", ".join(f"{k}: {_text(v)}" for k, v in options.items()) + "}" if options else "no options"


def _array(value: Any) -> Any:
    """A list of lists as a 2-D numpy array; anything else as given."""
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return np.asarray(value)
    return value


def flwr_split(
    config: FlwrConfig, labels: np.ndarray, gen: np.random.Generator, groups: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Sorted index arrays, one per partition of ``config.partitioner`` over the training set, in partition order.

    Drawn from ``gen``, in this order: the seed of a seeded partitioner (unless ``options.seed`` gives it),
    then, with ``shuffle``, the order of the rows the partitioner sees. Every failure (the library missing,
    options the partitioner refuses, a split it cannot make, an empty client) is an InputError naming the
    key to change.
    """
    name, n = config.partitioner, len(labels)
    try:
        cls = partitioner_class(name)
    except ValueError as exc:
        raise InputError("data.partition.partitioner", str(exc)) from None
    try:
        _check_options(name, config.options)
    except ValueError as exc:
        raise InputError("data.partition.options", str(exc)) from None
    params = _parameters(cls)
    if config.clients is not None and "num_partitions" in params and config.clients > n:
        raise InputError("data.partition.clients", f"must be at most the {n} training samples, got {config.clients}")
    seeded = "seed" in params and "seed" not in config.options
    seed = int(gen.integers(2**32)) if seeded else None
    order = gen.permutation(n) if config.shuffle else np.arange(n)
    columns: dict[str, Any] = {"label": np.asarray(labels, dtype=np.int64)[order], "idx": order.astype(np.int64)}
    if groups is not None:
        if len(groups) != n:
            raise InputError("data.partition.kind", f"got {len(groups)} group ids for {n} training samples")
        columns["group"] = np.asarray(groups)[order]
    elif config.options.get("partition_by") == "group":
        raise InputError("data.partition.options", "partition_by: group needs a dataset with natural clients "
                         "(hf with data.group; har and hapt give their subjects)")
    with _quiet():
        table = _table_class().from_dict(columns).with_format("arrow")
        # arrow format: the partitioners read a column as one array; the default (python) goes row by row.
        try:
            partitioner = built(config, seed)
        except ValueError as exc:
            raise InputError("data.partition.options", str(exc)) from None
        partitioner.dataset = table
        try:
            count = int(partitioner.num_partitions)
            parts = [np.sort(np.asarray(partitioner.load_partition(i)["idx"], dtype=np.int64)) for i in range(count)]
        except Exception as exc:  # noqa: BLE001 - whatever the library raises, its options or the data are the cause
            over = f" over {config.clients} clients" if config.clients is not None else ""
            raise InputError("data.partition.options", f"{name} cannot split the {n} training samples{over} with "
                             f"{_shown(config.options)} ({_detail(exc)})") from None
    if config.clients is not None and config.clients != len(parts):
        raise InputError("data.partition.clients", f"{name} gives {len(parts)} clients here, got {config.clients}")
    return _checked(name, parts)


def built(config: FlwrConfig, seed: int | None) -> Any:
    """The partitioner of ``config``, without its data (``seed``: a seeded one's seed unless the options give it);
    a ValueError stating what it refuses when its constructor refuses the options."""
    name = config.partitioner
    cls = partitioner_class(name)
    params = _parameters(cls)
    kwargs = {k: _array(v) for k, v in config.options.items()}
    if "num_partitions" in params:
        if config.clients is None:
            raise ValueError(f"{name} needs the number of clients (its num_partitions)")
        kwargs["num_partitions"] = config.clients
    if "seed" in params and "seed" not in kwargs and seed is not None:
        kwargs["seed"] = seed
    with _quiet():
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} refuses {_shown(config.options)}: {_detail(exc)}") from None


def _checked(name: str, parts: list[np.ndarray]) -> list[np.ndarray]:
    """``parts`` if every client holds a sample and no sample is on two clients."""
    sizes = [len(p) for p in parts]
    if not parts:
        raise InputError("data.partition.options", f"{name} gives no client")
    if min(sizes) == 0:
        empty = [m for m, s in enumerate(sizes) if s == 0]
        raise InputError("data.partition.options", f"{name} leaves {len(empty)} of {len(parts)} clients without samples "
                         f"(client {empty[0]} first); change its options (e.g. min_partition_size) or the clients")
    every = np.concatenate(parts)
    if len(np.unique(every)) != len(every):
        raise InputError("data.partition.partitioner", f"{name} puts some samples on several clients; simfl needs "
                         "each sample on at most one client")
    return parts
