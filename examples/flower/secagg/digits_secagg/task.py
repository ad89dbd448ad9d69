"""The model, data and training of the SecAgg+ example: multinomial logistic regression on scikit-learn's digits,
its weights as NumPy arrays for a NumPyClient."""

from __future__ import annotations

import functools

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def model() -> nn.Module:
    """Logistic regression from 64 pixels to 10 digits."""
    return nn.Linear(64, 10)


def get_weights(net: nn.Module) -> list[np.ndarray]:
    return [v.cpu().numpy() for v in net.state_dict().values()]


def set_weights(net: nn.Module, weights: list[np.ndarray]) -> None:
    net.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in zip(net.state_dict(), weights, strict=True)})


@functools.cache
def digits() -> tuple[torch.Tensor, torch.Tensor]:
    """All 1,797 digits, pixels scaled to [0, 1]."""
    x, y = load_digits(return_X_y=True)
    return torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)


def load_data(partition_id: int, num_partitions: int) -> DataLoader:
    """The partition's rows of the first 1,500 digits, in a shuffling DataLoader (torch's global generator)."""
    x, y = digits()
    rows = torch.from_numpy(np.array_split(np.arange(1500), num_partitions)[partition_id])
    return DataLoader(TensorDataset(x[rows], y[rows]), batch_size=32, shuffle=True)


def fit(net: nn.Module, loader: DataLoader, lr: float) -> float:
    """One epoch of SGD with momentum; the loss of the last batch."""
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    last = float("nan")
    for xb, yb in loader:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        opt.step()
        last = float(loss)
    return last


def held_out(net: nn.Module) -> tuple[float, float]:
    """Loss and accuracy on the 297 digits no node holds."""
    x, y = digits()
    with torch.no_grad():
        logits = net(x[1500:])
    return float(nn.functional.cross_entropy(logits, y[1500:])), float((logits.argmax(1) == y[1500:]).double().mean())
