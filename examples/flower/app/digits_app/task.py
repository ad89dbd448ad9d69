"""The model, data and training of a small Flower App: scikit-learn's digits, loaded and partitioned by the app."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn


class Net(nn.Module):
    """A small MLP on 8x8 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = load_digits(return_X_y=True)
    return torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)


def load_data(partition_id: int, num_partitions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The partition's training rows: the first 1,500 digits, shuffled once, split evenly."""
    x, y = _digits()
    order = np.random.default_rng(42).permutation(1500)
    rows = torch.from_numpy(np.array_split(order, num_partitions)[partition_id])
    return x[rows], y[rows]


def test_data() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _digits()
    return x[1500:], y[1500:]


def train(net: Net, x: torch.Tensor, y: torch.Tensor, epochs: int, batch: int, lr: float, seed: int) -> float:
    """Local SGD; the mean training loss. Batches are shuffled from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    net.train()
    total, steps = 0.0, 0
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), batch):
            idx = order[i : i + batch]
            loss = loss_fn(net(x[idx]), y[idx])
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
