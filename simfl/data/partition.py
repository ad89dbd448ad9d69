"""How a training set is split over clients: Dirichlet label skew, IID, by subject, by column (natural
clients such as LEAF's writers), explicit classes, explicit per-client label counts, explicit
per-client sample indices read from a file, or a Flower Datasets partitioner (``flwr``,
:mod:`simfl.data.flwr`).

A partition draws from the stream ``(seed, "partition")`` only, so every
algorithm of a seed sees the same client datasets. ``counts`` and ``indices``
replay another implementation's exact set-up: the first fixes how many samples
of each class each client holds (which ones is drawn), the second fixes the samples.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, overload

import numpy as np
from pydantic import Field, model_validator

from simfl.data.flwr import FlwrConfig, flwr_split
from simfl.errors import InputError
from simfl.fields import NonNegInt, PositiveFloat, PositiveInt, Section


class DirichletConfig(Section):
    """Label skew: each client's class mix is drawn from Dirichlet(alpha)."""

    kind: Literal["dirichlet"] = Field("dirichlet", description="Partition kind.")
    clients: PositiveInt = Field(description="Number of clients.")
    alpha: PositiveFloat = Field(0.1, description="Dirichlet concentration; smaller = more skew.")
    sizes: Literal["equal", "draw"] = Field(
        "equal",
        description="equal: every client holds n/clients samples, its class mix drawn from Dir(alpha) "
        "(the paper's code); draw: each class is split over clients by a Dir(alpha) draw, sizes follow.",
    )


class IIDConfig(Section):
    """Uniform random split into equal shares."""

    kind: Literal["iid"] = Field("iid", description="Partition kind.")
    clients: PositiveInt = Field(description="Number of clients.")


class BySubjectConfig(Section):
    """One client per training group (e.g. the HAR subject), in ascending group order."""

    kind: Literal["by_subject"] = Field("by_subject", description="Partition kind.")
    clients: PositiveInt | None = Field(
        None, description="Expected number of clients (= groups); checked when given, e.g. 21 for HAR.",
    )


class ByColumnConfig(Section):
    """LEAF-style natural clients: one client per distinct value of a column (e.g. the writer), in ascending order."""

    kind: Literal["by_column", "by_writer"] = Field("by_column", description="Partition kind (by_writer: the same).")
    column: str | None = Field(
        None, description="The column whose values are the clients (hf datasets; default: data.group)."
    )
    min_samples: PositiveInt = Field(1, description="Drop values with fewer training samples (LEAF drops small writers).")
    clients: PositiveInt | None = Field(
        None, description="Expected number of clients (= values kept); checked when given."
    )


class ClassesConfig(Section):
    """Explicit class lists: client m holds every training sample (or its share) of ``classes[m]``."""

    kind: Literal["classes"] = Field("classes", description="Partition kind.")
    classes: list[list[NonNegInt]] = Field(
        description="One class list per client, e.g. [[0,1,2,3,4],[5,6,7,8,9]]; a class on several "
        "clients is split evenly between them.",
        min_length=1,
    )

    @property
    def clients(self) -> int:
        """Number of clients (one per class list)."""
        return len(self.classes)


class CountsConfig(Section):
    """Explicit label counts: client m holds ``counts[m][c]`` samples of class c, drawn within each class."""

    kind: Literal["counts"] = Field("counts", description="Partition kind.")
    counts: list[list[NonNegInt]] = Field(
        description="One row per client, one count per class (e.g. 10 numbers for MNIST); the samples of "
        "each class are drawn without replacement from the partition stream, so no sample is on two clients.",
        min_length=1,
    )
    clients: PositiveInt | None = Field(None, description="Expected number of clients (= rows); checked when given.")

    @model_validator(mode="after")
    def _rows(self) -> CountsConfig:
        widths = {len(row) for row in self.counts}
        if len(widths) != 1:
            raise ValueError(f"every row needs the same number of classes, got row lengths {sorted(widths)}")
        for m, row in enumerate(self.counts):
            if sum(row) == 0:
                raise ValueError(f"client {m} holds no sample (row {m} is all zeros)")
        if self.clients is not None and self.clients != len(self.counts):
            raise ValueError(f"clients is {self.clients} but counts has {len(self.counts)} rows (one per client)")
        return self


class IndicesConfig(Section):
    """Explicit samples: client m holds the training samples at the indices listed for it in a file."""

    kind: Literal["indices"] = Field("indices", description="Partition kind.")
    path: Path = Field(
        description="JSON file with one list of training-set indices per client ([[3, 17, ...], ...] or "
        "{\"0\": [...], \"1\": [...]}), or CSV with columns client,index (one row per sample); relative "
        "to the scenario file. Indices are 0-based and may not repeat."
    )
    clients: PositiveInt | None = Field(None, description="Expected number of clients; checked when given.")


PartitionConfig = Annotated[
    DirichletConfig | IIDConfig | BySubjectConfig | ByColumnConfig | ClassesConfig | CountsConfig | IndicesConfig
    | FlwrConfig,
    Field(discriminator="kind"),
]
AnyPartition = (
    DirichletConfig | IIDConfig | BySubjectConfig | ByColumnConfig | ClassesConfig | CountsConfig | IndicesConfig
    | FlwrConfig
)


class Parts(Sequence[np.ndarray]):
    """Each client's sorted row indices: one array of every client's rows in client order, and where each starts.

    One array and the offsets instead of an array per client: at 10^6 clients, splitting into 10^6 arrays
    costs seconds before the first arrival, while a run reads only the clients it trains. ``parts[m]`` is a
    view of client m's rows.
    """

    def __init__(self, rows: np.ndarray, sizes: np.ndarray) -> None:
        self.rows = rows
        self.counts = np.asarray(sizes, dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.counts))).tolist()

    @classmethod
    def of(cls, arrays: Sequence[np.ndarray]) -> Parts:
        """The parts of a list of index arrays."""
        rows = np.concatenate(arrays) if len(arrays) else np.zeros(0, dtype=np.int64)
        return cls(rows, np.array([len(a) for a in arrays], dtype=np.int64))

    def __len__(self) -> int:
        return len(self.counts)

    @overload
    def __getitem__(self, m: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, m: slice) -> list[np.ndarray]: ...

    def __getitem__(self, m: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(m, slice):
            return [self[i] for i in range(len(self))[m]]
        if not -len(self) <= m < len(self):
            raise IndexError(f"client {m} of {len(self)}")
        m %= len(self)
        return self.rows[self.starts[m] : self.starts[m + 1]]

    def sizes(self) -> tuple[int, ...]:
        """Samples per client."""
        return tuple(self.counts.tolist())


def split(
    config: AnyPartition, labels: np.ndarray, gen: np.random.Generator,
    groups: np.ndarray | None = None,
) -> Parts:
    """Sorted index arrays, one per client, that together cover at most every training sample once."""
    n = len(labels)
    if isinstance(config, IIDConfig | DirichletConfig) and config.clients > n:
        raise InputError("data.partition.clients", f"must be at most the {n} training samples, got {config.clients}")
    if isinstance(config, IIDConfig):
        return _iid(gen.permutation(n), config.clients)
    return Parts.of(_split(config, labels, gen, groups))


def hold_out(parts: Parts, fraction: float, gen: np.random.Generator) -> tuple[Parts, np.ndarray]:
    """``parts`` less a validation set: ``floor(fraction * n_m)`` of each client's ``n_m`` rows, drawn at random.

    Returns the clients' remaining rows (each client keeps at least one row of any it had, as ``fraction < 1``)
    and the held-out rows, sorted. Per client rather than from the whole training set, so the split works on
    every partition kind (explicit indices, subjects, Flower partitioners) and the clients keep the class mix
    the partition gave them: the tuned run's clients hold a subset of what the same seed's run without a
    validation set gives them. One uniform draw per row from ``gen``, whatever the number of clients.
    """
    counts = parts.counts
    held = np.floor(counts * fraction + 1e-9).astype(np.int64)  # 0.7 * 10 is 7.000000000000001
    owner = np.repeat(np.arange(len(counts)), counts)
    order = np.lexsort((gen.random(len(parts.rows)), owner))  # each client's rows in a random order
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - np.repeat(np.asarray(parts.starts[:-1], dtype=np.int64), counts)
    out = rank < held[owner]
    return Parts(parts.rows[~out], counts - held), np.sort(parts.rows[out])


def _split(
    config: AnyPartition, labels: np.ndarray, gen: np.random.Generator,
    groups: np.ndarray | None = None,
) -> list[np.ndarray]:
    """:func:`split` of the partitions made client by client (every kind but IID)."""
    n = len(labels)
    if isinstance(config, BySubjectConfig):
        return _by_group(config, groups, n)
    if isinstance(config, ByColumnConfig):
        return _by_column(config, groups, n)
    if isinstance(config, ClassesConfig):
        return _by_classes(config, labels, gen)
    if isinstance(config, CountsConfig):
        return _by_counts(config, labels, gen)
    if isinstance(config, IndicesConfig):
        return _from_file(config, n)
    if isinstance(config, FlwrConfig):
        return flwr_split(config, labels, gen, groups)
    assert isinstance(config, DirichletConfig), "split takes the IID partition"
    if config.sizes == "equal":
        return _dirichlet_equal(labels, config.clients, config.alpha, gen)
    return _dirichlet_draw(labels, config.clients, config.alpha, gen)


def _iid(perm: np.ndarray, clients: int) -> Parts:
    """``[np.sort(p) for p in np.array_split(perm, clients)]``, sorted in one pass (10^6 clients in a second)."""
    q, r = divmod(len(perm), clients)
    sizes = np.full(clients, q, dtype=np.int64)
    sizes[:r] += 1  # array_split: the first len % clients parts hold one more
    group = np.repeat(np.arange(clients), sizes)
    return Parts(perm[np.lexsort((perm, group))], sizes)


def _class_pools(labels: np.ndarray, gen: np.random.Generator) -> list[list[int]]:
    classes = int(labels.max()) + 1
    return [list(gen.permutation(np.flatnonzero(labels == c))) for c in range(classes)]


def _dirichlet_equal(labels: np.ndarray, clients: int, alpha: float, gen: np.random.Generator) -> list[np.ndarray]:
    """Equal shares; client m's class mix ~ Dir(alpha), clipped to what is left of each class."""
    pools = _class_pools(labels, gen)
    classes = len(pools)
    share = len(labels) // clients
    out: list[np.ndarray] = []
    for _ in range(clients):
        want = gen.dirichlet(np.full(classes, alpha)) * share
        counts = np.floor(want).astype(int)
        left = np.array([len(p) for p in pools])
        counts = np.minimum(counts, left)
        # Hand out the remainder to the classes with the largest unmet wish that still have samples.
        while counts.sum() < share and (left - counts).sum() > 0:
            room = left - counts
            wish = np.where(room > 0, want - counts, -np.inf)
            counts[int(np.argmax(wish))] += 1
        taken = [pools[c][: counts[c]] for c in range(classes)]
        pools = [pools[c][counts[c] :] for c in range(classes)]
        out.append(np.sort(np.concatenate([np.asarray(t, dtype=np.int64) for t in taken])))
    return out


def _dirichlet_draw(labels: np.ndarray, clients: int, alpha: float, gen: np.random.Generator) -> list[np.ndarray]:
    """Each class split over clients by q ~ Dir(alpha); client sizes follow the draws."""
    parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
    for pool in _class_pools(labels, gen):
        q = gen.dirichlet(np.full(clients, alpha))
        cuts = (np.cumsum(q)[:-1] * len(pool)).astype(int)
        for m, chunk in enumerate(np.split(np.asarray(pool, dtype=np.int64), cuts)):
            parts[m].append(chunk)
    return [np.sort(np.concatenate(p)) for p in parts]


def _by_group(config: BySubjectConfig, groups: np.ndarray | None, n: int) -> list[np.ndarray]:
    """One client per distinct group id, ordered by id."""
    if groups is None:
        raise InputError("data.partition.kind", "by_subject needs a dataset with subject ids (har, hapt)")
    if len(groups) != n:
        raise InputError("data.partition.kind", f"got {len(groups)} subject ids for {n} training samples")
    ids = np.unique(groups)
    if config.clients is not None and config.clients != len(ids):
        raise InputError(
            "data.partition.clients", f"by_subject gives one client per subject: {len(ids)}, got {config.clients}"
        )
    return [np.flatnonzero(groups == g).astype(np.int64) for g in ids]


def _by_column(config: ByColumnConfig, groups: np.ndarray | None, n: int) -> list[np.ndarray]:
    """One client per distinct column value with at least ``min_samples`` samples, ordered by value."""
    if groups is None:
        raise InputError(
            "data.partition.kind", f"{config.kind} needs a dataset with a client column (hf with data.group or "
            "partition.column; har and hapt give their subjects)"
        )
    if len(groups) != n:
        raise InputError("data.partition.kind", f"got {len(groups)} column values for {n} training samples")
    ids, counts = np.unique(groups, return_counts=True)
    kept = ids[counts >= config.min_samples]
    if len(kept) == 0:
        raise InputError("data.partition.min_samples", f"no value has {config.min_samples} samples (largest: {counts.max()})")
    if config.clients is not None and config.clients != len(kept):
        raise InputError(
            "data.partition.clients", f"{config.kind} gives one client per value: {len(kept)}, got {config.clients}"
        )
    return [np.flatnonzero(groups == g).astype(np.int64) for g in kept]


def _by_classes(config: ClassesConfig, labels: np.ndarray, gen: np.random.Generator) -> list[np.ndarray]:
    """Client m gets the samples of its listed classes; shared classes are split evenly at random."""
    num_classes = int(labels.max()) + 1
    holders: dict[int, list[int]] = {}
    for m, cls in enumerate(config.classes):
        if not cls:
            raise InputError(f"data.partition.classes[{m}]", "must list at least one class")
        for c in cls:
            if c >= num_classes:
                raise InputError(f"data.partition.classes[{m}]", f"class {c} not in [0, {num_classes - 1}]")
            if m not in holders.setdefault(c, []):
                holders[c].append(m)
    parts: list[list[np.ndarray]] = [[] for _ in config.classes]
    for c in sorted(holders):
        pool = gen.permutation(np.flatnonzero(labels == c))
        for m, chunk in zip(holders[c], np.array_split(pool, len(holders[c])), strict=True):
            parts[m].append(chunk.astype(np.int64))
    return [np.sort(np.concatenate(p)) for p in parts]


def _by_counts(config: CountsConfig, labels: np.ndarray, gen: np.random.Generator) -> list[np.ndarray]:
    """Client m takes ``counts[m][c]`` samples of class c from a random permutation of that class, in client order."""
    pools = _class_pools(labels, gen)
    width = len(config.counts[0])
    if width != len(pools):
        raise InputError("data.partition.counts", f"rows need one count per class ({len(pools)}), got {width}")
    need = np.sum(np.asarray(config.counts, dtype=np.int64), axis=0)
    for c, (wanted, pool) in enumerate(zip(need, pools, strict=True)):
        if wanted > len(pool):
            raise InputError(
                "data.partition.counts",
                f"class {c}: the clients ask for {int(wanted)} samples, the training set holds {len(pool)}",
            )
    taken = [0] * len(pools)
    out: list[np.ndarray] = []
    for row in config.counts:
        parts = []
        for c, k in enumerate(row):
            parts.append(np.asarray(pools[c][taken[c] : taken[c] + k], dtype=np.int64))
            taken[c] += k
        out.append(np.sort(np.concatenate(parts)))
    return out


def _from_file(config: IndicesConfig, n: int) -> list[np.ndarray]:
    """Per-client index lists from JSON or CSV, each index in [0, n) and on one client only."""
    where = f"data.partition.path ({config.path})"
    try:
        text = Path(config.path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(where, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(where, f"cannot read: {exc}") from None
    if Path(config.path).suffix.lower() == ".csv":
        lists = _csv_lists(text, where)
    else:
        lists = _json_lists(text, where)
    if not lists:
        raise InputError(where, "lists no client")
    if config.clients is not None and config.clients != len(lists):
        raise InputError(where, f"has {len(lists)} clients but data.partition.clients is {config.clients}")
    owner: dict[int, int] = {}
    out: list[np.ndarray] = []
    for m, items in enumerate(lists):
        if not items:
            raise InputError(where, f"client {m} holds no sample")
        for i in items:
            if not 0 <= i < n:
                raise InputError(where, f"client {m}: index {i} is outside the training set [0, {n - 1}]")
            if i in owner:
                where_else = "twice" if owner[i] == m else f"on clients {owner[i]} and {m}"
                raise InputError(where, f"index {i} is listed {where_else}; each sample may be on one client once")
            owner[i] = m
        out.append(np.sort(np.asarray(items, dtype=np.int64)))
    return out


def _json_lists(text: str, where: str) -> list[list[int]]:
    """``[[...], ...]`` or ``{"0": [...], ...}`` (client ids 0..N-1) as a list of int lists."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(where, f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if isinstance(data, dict):
        keys = sorted(data, key=lambda k: int(k) if str(k).isdigit() else -1)
        if [str(k) for k in keys] != [str(i) for i in range(len(keys))]:
            raise InputError(where, f"client keys must be 0..{len(keys) - 1}, got {sorted(map(str, data))[:5]}")
        data = [data[k] for k in keys]
    if not isinstance(data, list) or not all(isinstance(x, list) for x in data):
        raise InputError(where, "must hold a list of index lists, one per client, or a mapping client -> list")
    lists: list[list[int]] = []
    for m, items in enumerate(data):
        bad = next((x for x in items if not isinstance(x, int) or isinstance(x, bool)), None)
        if bad is not None:
            raise InputError(where, f"client {m}: indices must be integers, got {bad!r}")
        lists.append(list(items))
    return lists


def _csv_lists(text: str, where: str) -> list[list[int]]:
    """Rows ``client,index`` (a header line ``client,index`` is optional); clients 0..N-1."""
    rows = [r for r in csv.reader(text.splitlines()) if r and any(cell.strip() for cell in r)]
    if rows and [c.strip().lower() for c in rows[0]] == ["client", "index"]:
        rows = rows[1:]
        first_line = 2
    else:
        first_line = 1
    by_client: dict[int, list[int]] = {}
    for line, row in enumerate(rows, start=first_line):
        if len(row) != 2:
            raise InputError(where, f"line {line}: expected two columns client,index, got {len(row)}")
        try:
            client, index = int(row[0]), int(row[1])
        except ValueError:
            raise InputError(where, f"line {line}: client and index must be integers, got {row}") from None
        if client < 0:
            raise InputError(where, f"line {line}: client must be >= 0, got {client}")
        by_client.setdefault(client, []).append(index)
    missing = [m for m in range(max(by_client, default=-1) + 1) if m not in by_client]
    if missing:
        raise InputError(where, f"clients must be numbered 0..N-1; no row for client {missing[0]}")
    return [by_client[m] for m in range(len(by_client))]
