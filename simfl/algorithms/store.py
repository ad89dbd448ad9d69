"""Per-client vectors (a model-sized float32 vector per client) in RAM or in a memory-mapped file.

Algorithms keep state per client that grows with the population: OrthoFL's anchors and each
client's kept model under cross-device serving, CA2FL's cached deltas, SCAFFOLD's control
variates. A :class:`ClientVectors` holds such rows, ``None`` for a client that has none yet
(the owner supplies the default: zero, ``W^(0)``, ...), and visits only rows that were set, so
nothing costs in proportion to the population.

- :class:`RamVectors` keeps references: rows that are one tensor (OrthoFL's anchors that point
  to the same global version) stay one tensor, in memory and in checkpoints.
- :class:`DiskVectors` copies each row into a memory-mapped file of ``clients x length``
  float32 values. The file is anonymous (``tempfile.TemporaryFile``: it has no name and vanishes
  with the process, even one killed), sparse (only rows set take disk), and its pages are the
  kernel's page cache, not the process's private memory. It lives on the machine that runs the
  simulation, in ``dir`` (default: the system's temporary folder), not in the result folder: a
  run sends its results to the launching process and never writes there (docs/architecture.md),
  and the file is scratch, not a result. ``get`` returns a copy, so later writes never change a
  row already handed out.

Both store float32 exactly and give the same values, so a run's files do not depend on the store
(``tests/algorithms/test_store.py``). :meth:`ClientVectors.state` gives the set rows as plain
tensors for checkpoints and :meth:`ClientVectors.load_state` puts them back.
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from simfl.algorithms.configs import StoreSpec
from simfl.errors import no_space


class ClientVectors(ABC):
    """Row ``i`` is client ``i``'s vector of ``length`` float32 values, or None until set."""

    def __init__(self, clients: int, length: int) -> None:
        self.clients = clients
        self.length = length

    @abstractmethod
    def get(self, client: int) -> torch.Tensor | None:
        """Client ``client``'s row, or None when it has none (not to be modified)."""

    @abstractmethod
    def put(self, client: int, vector: torch.Tensor) -> None:
        """Set client ``client``'s row to ``vector`` (the caller does not change it afterwards)."""

    @abstractmethod
    def rows(self) -> list[int]:
        """The clients that have a row, in index order."""

    def items(self) -> Iterator[tuple[int, torch.Tensor]]:
        """(client, row) for every client with a row, in index order."""
        for i in self.rows():
            row = self.get(i)
            assert row is not None
            yield i, row

    def state(self) -> dict[str, Any]:
        """The set rows as plain data: ``{"length": n, "rows": {client: tensor}}``."""
        return {"length": self.length, "rows": dict(self.items())}

    def load_state(self, state: dict[str, Any]) -> None:
        """Put back :meth:`state` output (into an empty store of the same shape)."""
        if int(state["length"]) != self.length:
            raise ValueError(f"saved rows have {state['length']} values, this store {self.length}")
        for i, row in state["rows"].items():
            if not 0 <= int(i) < self.clients:
                raise ValueError(f"saved row of client {i}, but there are {self.clients} clients")
            self.put(int(i), row)

    def _check(self, client: int, vector: torch.Tensor) -> None:
        if vector.dtype != torch.float32 or vector.shape != (self.length,):
            raise ValueError(f"a row is {self.length} float32 values, got {tuple(vector.shape)} {vector.dtype}")


class RamVectors(ClientVectors):
    """Rows as references in a dict (shared tensors stay shared)."""

    def __init__(self, clients: int, length: int) -> None:
        super().__init__(clients, length)
        self._rows: dict[int, torch.Tensor] = {}

    def get(self, client: int) -> torch.Tensor | None:
        return self._rows.get(client)

    def put(self, client: int, vector: torch.Tensor) -> None:
        self._check(client, vector)
        self._rows[client] = vector

    def rows(self) -> list[int]:
        return sorted(self._rows)


class DiskVectors(ClientVectors):
    """Rows copied into an anonymous, sparse, memory-mapped file of ``clients x length`` float32 values."""

    def __init__(self, clients: int, length: int, dir: str | None = None) -> None:
        """Make the file at its full (sparse) size; a disk, quota or file-size limit that refuses it is
        :class:`~simfl.errors.NoSpace` naming the store's folder, with the file already dropped."""
        super().__init__(clients, length)
        self._file = tempfile.TemporaryFile(prefix="simfl-client-state-", dir=dir)
        try:
            self._file.truncate(max(clients * length * 4, 1))
            self._map = np.memmap(self._file, dtype=np.float32, mode="r+", shape=(clients, length))
        except OSError as exc:
            self._file.close()
            full = no_space(exc, f"the client-state store's file in {dir or tempfile.gettempdir()} (client_state.dir)")
            if full is None:
                raise
            raise full from None
        self._set = np.zeros(clients, dtype=bool)

    def get(self, client: int) -> torch.Tensor | None:
        if not self._set[client]:
            return None
        return torch.from_numpy(np.array(self._map[client]))

    def put(self, client: int, vector: torch.Tensor) -> None:
        self._check(client, vector)
        self._map[client] = vector.detach().numpy()
        self._set[client] = True

    def rows(self) -> list[int]:
        return [int(i) for i in np.flatnonzero(self._set)]

    def close(self) -> None:
        """Unmap and drop the file (its space is freed at once); a store whose making failed half-way too."""
        mapped = getattr(self.__dict__.pop("_map", None), "_mmap", None)
        if mapped is not None:
            mapped.close()
        self._file.close()

    def __del__(self) -> None:
        """Close at collection; never a word on stderr (a finalizer's error would print a traceback)."""
        file = getattr(self, "_file", None)
        if file is not None and not file.closed:
            try:
                self.close()
            except Exception:  # pragma: no cover - interpreter shutdown
                pass


def vectors(spec: StoreSpec, clients: int, length: int) -> ClientVectors:
    """A store of ``clients`` rows of ``length`` values as ``spec`` says."""
    if spec.kind == "disk":
        return DiskVectors(clients, length, spec.dir)
    return RamVectors(clients, length)
