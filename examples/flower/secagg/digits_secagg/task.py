"""The model, data and training of the SecAgg+ example: scikit-learn's digits, as NumPy arrays for a NumPyClient."""

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
        return self.fc2(torch.relu(self.fc1(x)))


def get_weights(net: Net) -> list[np.ndarray]:
    return [v.cpu().numpy() for v in net.state_dict().values()]


def set_weights(net: Net, weights: list[np.ndarray]) -> None:
    net.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in zip(net.state_dict(), weights, strict=True)})


@functools.cache
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = load_digits(return_X_y=True)
    return torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)


def load_data(partition_id: int, num_partitions: int) -> DataLoader:
    """The partition's rows of the first 1,500 digits, in a shuffling DataLoader (torch's global generator)."""
    x, y = _digits()
    rows = torch.from_numpy(np.array_split(np.arange(1500), num_partitions)[partition_id])
    return DataLoader(TensorDataset(x[rows], y[rows]), batch_size=32, shuffle=True)


def test_data() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _digits()
    return x[1500:], y[1500:]


def train(net: Net, loader: DataLoader, lr: float) -> float:
    """One epoch of SGD; the mean training loss."""
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    net.train()
    total, steps = 0.0, 0
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(net(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total, steps = total + loss.item(), steps + 1
    return total / steps


def test(net: Net, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    net.eval()
    with torch.no_grad():
        out = net(x)
        return float(nn.functional.cross_entropy(out, y)), float((out.argmax(1) == y).float().mean())
