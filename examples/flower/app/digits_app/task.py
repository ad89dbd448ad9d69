"""The model, data and training of a small Flower App: scikit-learn's digits, loaded and partitioned by the app.

Written as Flower's PyTorch quickstart writes its task: the data cached once per process (the quickstart caches its
FederatedDataset), a DataLoader that shuffles with torch's global generator, plain SGD. With ``app-seed`` at -1 (the
default) nothing here is seeded, as in the quickstart: under ``simfl flwr run`` each call still gives the same
numbers for the same seed, since simfl seeds the global generators around it. With ``app-seed`` >= 0 the app seeds
its initial model and each round's shuffle itself, so that any engine (Flower's own too) gives the same numbers.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    """A small MLP on 8x8 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


@functools.cache
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = load_digits(return_X_y=True)
    return torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)


def load_data(partition_id: int, num_partitions: int, batch_size: int, seed: int | None = None) -> DataLoader:
    """The partition's training rows (the first 1,500 digits, shuffled once, split evenly) in a shuffling
    DataLoader: from torch's global generator, or from ``seed`` when given."""
    x, y = _digits()
    order = np.random.default_rng(42).permutation(1500)
    rows = torch.from_numpy(np.array_split(order, num_partitions)[partition_id])
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(x[rows], y[rows]), batch_size=batch_size, shuffle=True, generator=generator)


def test_data() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _digits()
    return x[1500:], y[1500:]


def train(net: Net, loader: DataLoader, epochs: int, lr: float) -> float:
    """Local SGD over the loader's batches; the mean training loss."""
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    net.train()
    total, steps = 0.0, 0
    for _ in range(epochs):
        for xb, yb in loader:
            loss = loss_fn(net(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, steps = total + loss.item(), steps + 1
    return total / steps


def test(net: Net, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Loss and accuracy."""
    net.eval()
    with torch.no_grad():
        out = net(x)
        return float(nn.functional.cross_entropy(out, y)), float((out.argmax(1) == y).float().mean())
