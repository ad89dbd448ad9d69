"""A model given as named arrays (``model: flower_app``): the same layout and state as the network it came from."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from simfl.errors import InputError
from simfl.models import Layout
from simfl.models.arrays import ArraysNet


def test_arrays_give_the_networks_layout_state_and_buffers() -> None:
    """A network with batch norm, as a ServerApp's ArrayRecord carries it (numpy arrays by state-dict name): the
    same flat layout (parameters, then float buffers; batch norm marked; num_batches_tracked left out), the same
    flat weights and a state dict the network loads strictly."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    net.train()(torch.randn(5, 1, 8, 8))  # running statistics and num_batches_tracked move
    arrays = {k: v.numpy() for k, v in net.state_dict().items()}
    model = ArraysNet(arrays)
    assert Layout.of(model) == Layout.of(net)
    assert torch.equal(Layout.of(model).flatten(model), Layout.of(net).flatten(net))
    other = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    other.load_state_dict(model.state_dict(), strict=True)
    assert int(other[1].num_batches_tracked) == 1
    arrays["0.weight"][0, 0, 0, 0] = 7.0  # the model holds its own copy
    assert float(model.state_dict()["0.weight"][0, 0, 0, 0]) != 7.0


def test_arrays_cannot_run() -> None:
    with pytest.raises(InputError, match="flower_app is the Flower app's model as arrays; simfl cannot run it"):
        ArraysNet({"w": torch.zeros(2).numpy()})(torch.zeros(1))
