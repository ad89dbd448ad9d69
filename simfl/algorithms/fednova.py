"""FedNova (Wang et al., "Tackling the Objective Inconsistency Problem in Heterogeneous Federated Optimization",
NeurIPS 2020).

Update rule: each client's update is normalised by its local steps ``tau_i`` before the round's updates are averaged,
and the average is taken ``tau_eff`` steps:

    x <- x - tau_eff * sum_i p_i (x - y_i) / tau_i,     tau_eff = sum_i p_i tau_i,     p_i = n_i / sum_j n_j

over the round's arrivals ``i`` (``y_i``: the client's trained weights, ``n_i``: its samples). This is the paper's
generalised update ``x <- x - tau_eff sum_i w_i eta d_i`` with FedNova's choices ``w_i = p_i`` and
``tau_eff = sum_i p_i ||a_i||_1``, for plain local SGD: there ``a_i = [1, ..., 1]``, ``||a_i||_1 = tau_i`` and the
normalised gradient ``eta d_i = (x - y_i) / tau_i``. Plain FedAvg (``x <- sum_i p_i y_i``) weighs a client that took
more steps more, which moves the fixed point to an objective weighted by ``p_i tau_i`` (the paper's objective
inconsistency); FedNova removes that weight.

It is computed as the sample-weighted mean of ``x + (tau_eff / tau_i) (y_i - x)`` (``torch.lerp``, which gives
``y_i`` itself at ratio 1), so **when every client of a round takes the same number of steps FedNova is FedAvg, to
the bit**. With ``data.partition.sizes: equal`` (the default) every client holds ``n / clients`` samples (the first
``n % clients`` one more), so every client takes ``epochs * ceil(n_i / batch_size)`` steps and FedNova is FedAvg
unless that one extra sample opens one more batch; FedNova differs only where the clients' step counts differ
(``sizes: draw``, a partition of unequal shards, or per-entry batch sizes).

Readings where the paper leaves a choice:

- ``tau_i`` is the optimizer steps the client actually took (``arrival.metrics["steps"]``, which ``train.epochs``,
  ``train.batch_size`` and its shard size decide; the paper's ``floor(E n_i / B)`` counts full batches only, simfl's
  trainer also steps on a last partial batch). An arrival without that metric (pure-latency mode, a Flower
  ClientApp that reports none) counts as ``tau_i = 1``; a round of such arrivals is FedAvg's.
- ``||a_i||_1 = tau_i`` is the plain-SGD case. With ``train.momentum`` or a proximal term the paper's ``a_i``
  weighs the steps differently (its local-momentum and FedProx cases); simfl's FedNova normalises by the steps either
  way (the algorithm does not see the clients' optimizer).
- Partial participation: ``p_i`` are normalised over the round's arrivals (as simfl's FedAvg weighs them), so a
  round's weights sum to 1 however many clients report.
- Batch norm: running statistics are not gradient steps and take the round's sample-weighted mean, as in FedAvg.
"""

from __future__ import annotations

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, Setup
from simfl.algorithms.configs import FedNovaConfig
from simfl.algorithms.fedavg import FedAvg


def local_steps(arrival: Arrival) -> int:
    """tau_i: the optimizer steps the client took (1 when its reply says nothing of them)."""
    steps = arrival.metrics.get("steps")
    return 1 if steps is None else int(steps)


class FedNova(FedAvg):
    """Synchronous rounds; each client's update normalised by its local steps, the mean scaled by tau_eff."""

    Config = FedNovaConfig
    config: FedNovaConfig

    def __init__(self, config: FedNovaConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.buffer_index = setup.layout.mask("buffer").nonzero().flatten()
        """Where the batch-norm running statistics are (often nowhere)."""

    def aggregate(self, arrivals: list[Arrival]) -> None:
        if not arrivals:
            raise ValueError("a round needs at least one arrival")
        sizes = [a.num_samples for a in arrivals]
        taus = [local_steps(a) for a in arrivals]
        tau_eff = sum(n * tau for n, tau in zip(sizes, taus, strict=True)) / sum(sizes)  # integers: exact when equal
        buffers = self.buffer_index.to(self.w.device)
        scaled = []
        for a, tau in zip(arrivals, taus, strict=True):
            ratio = tau_eff / tau if tau > 0 else 1.0  # a client that took no step moved nothing: left as it came
            if ratio == 1.0:  # lerp at 1 would give y_i itself
                scaled.append(a.weights)
                continue
            stretched = ops.mix(a.start, a.weights, ratio)  # x + (tau_eff / tau_i) (y_i - x)
            if buffers.numel():
                stretched[buffers] = a.weights[buffers]
            scaled.append(stretched)
        self.w = ops.weighted_mean(scaled, [float(n) for n in sizes])
