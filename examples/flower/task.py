"""The model and training code of a Flower PyTorch quickstart-style app, for MNIST.

`Net` is the app's model. `NetModel` tells simfl to build the same `Net` as the scenario's model
(a model plugin: `model: {name: "task:NetModel"}`), so the arrays simfl and the app exchange have
the same names and shapes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import BaseModel
from torch import nn


class Net(nn.Module):
    """A small CNN (the shape of Flower's PyTorch quickstart model), for 1x28x28 inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class NetModel:
    """simfl model plugin: the scenario's model is the app's `Net`."""

    class Config(BaseModel):
        """The app's Net (no options)."""

    @staticmethod
    def build(config: BaseModel, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        return Net()


def train(net: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float, batch_size: int) -> float:
    """Plain SGD epochs over the client's tensors; the mean training loss."""
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    net.train()
    total, steps = 0.0, 0
    for _ in range(epochs):
        order = torch.randperm(len(y))
        for i in range(0, len(y), batch_size):
            idx = order[i : i + batch_size]
            opt.zero_grad()
            loss = loss_fn(net(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
    return total / max(steps, 1)


def test(net: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1024) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``net`` on the given tensors."""
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    net.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(y), batch_size):
            out = net(x[i : i + batch_size])
            loss += float(loss_fn(out, y[i : i + batch_size]))
            correct += int((out.argmax(1) == y[i : i + batch_size]).sum())
    return loss / max(len(y), 1), correct / max(len(y), 1)
