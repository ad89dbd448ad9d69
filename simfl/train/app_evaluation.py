"""The global model of simfl's own rules scored through a Flower ClientApp's ``evaluate`` handler, as Flower would.

When simfl's own algorithms (FedBuff, OrthoFL, ...) train over a Flower ClientApp and simfl cannot score the
model itself (the model is the app's and its ServerApp defines no server-side ``evaluate_fn``, or simfl holds no
test set: ``data: {dataset: flower_app}``), the metric rows on simfl's evaluation grid (``eval.every``) come from a
federated evaluation, the one Flower's strategies run after each round:

- every node (client ``m`` is node ``m + 1``, present or not: the score is the model's, not a round's) gets the
  message Flower's ``configure_evaluate`` sends, type ``evaluate``, the global weights under the model's
  state-dict names and the config ``{"server-round": U}``, U the updates the model has had (simfl's update
  count, the clock of an asynchronous server), with its context as in training (``context.state`` what its
  last round left there, read only) (:class:`~simfl.train.flower.ClientAppEvaluator`);
- the replies' metrics are aggregated as Flower's ``aggregate_evaluate`` does (:func:`weighted`): each metric's
  sum over the replies of ``value * num-examples / total num-examples``, in node order, the total over the
  replies that hold the metric; a legacy client whose ``evaluate`` is not implemented is left out;
- the row's ``accuracy`` is the first of :data:`ACCURACY_KEYS` the aggregate holds and its ``loss`` the first of
  :data:`LOSS_KEYS` (a legacy client's ``loss`` is its ``eval_loss``); an app that reports neither leaves that
  column NaN, said once per process on stderr (:func:`told_missing`).

Every call is seeded from ``(seed, "clientapp-evaluate", client, "<client>.evaluate.<U>")``
(:func:`simfl.rng.global_generators`) and costs no virtual time (the latency model times training rounds only,
as for simfl's own evaluation on its test set); the engine's recorder re-uses the scores while the weights do
not change, and keeps them in checkpoints, so a resumed run scores as one that never stopped.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence

import torch

from simfl.train.client_eval import ClientEvaluator
from simfl.train.evaluate import Scores
from simfl.train.flower import ClientAppEvaluator

ACCURACY_KEYS = ("accuracy", "acc", "eval_accuracy", "eval_acc", "test_accuracy", "test_acc")
"""The metric that fills ``metrics.csv``'s accuracy, the first found: Flower's legacy templates' ``accuracy``,
its PyTorch templates' ``eval_acc``, and their kin."""
LOSS_KEYS = ("loss", "eval_loss", "test_loss")
"""The metric that fills ``metrics.csv``'s loss, the first found (a legacy client's loss arrives as ``eval_loss``)."""
WEIGHT = "num-examples"
"""What each reply is weighted by, as Flower's strategies weight (``weighted_by_key``'s default)."""


def weighted(replies: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The replies' metrics aggregated as Flower's ``aggregate_metricrecords`` does: per metric, the sum in reply
    order of ``value * (examples / total)``, the total over the replies holding that metric; the weight left out."""
    keys: list[str] = []
    for reply in replies:
        keys.extend(k for k in reply if k != WEIGHT and k not in keys)
    out = {}
    for key in keys:
        holding = [r for r in replies if key in r]
        total = sum(float(r[WEIGHT]) for r in holding)
        value = 0.0
        for r in holding:
            value += float(r[key]) * (float(r[WEIGHT]) / total)
        out[key] = value
    return out


def pick(metrics: Mapping[str, float], keys: Sequence[str]) -> tuple[str | None, float]:
    """The first of ``keys`` in ``metrics`` and its value (None and NaN when none is there)."""
    for key in keys:
        if key in metrics:
            return key, float(metrics[key])
    return None, math.nan


_TOLD: set[str] = set()
"""The apps this process has said report no accuracy or no loss (once each)."""


def told_missing(what: str, metrics: Mapping[str, float]) -> None:
    """Say once per process, on stderr, that ``what``'s evaluate replies hold no accuracy or no loss by the names
    simfl reads, so that column of ``metrics.csv`` stays empty (NaN) and the verdict, which reads accuracy, has
    nothing to compare."""
    lacking = [(column, keys) for column, keys in (("accuracy", ACCURACY_KEYS), ("loss", LOSS_KEYS))
               if pick(metrics, keys)[0] is None]
    if not lacking or what in _TOLD:
        return
    _TOLD.add(what)
    held = ", ".join(repr(k) for k in metrics) or "no metric but num-examples"
    said = "; ".join(f"no {column} (none of {', '.join(repr(k) for k in keys)})" for column, keys in lacking)
    print(f"simfl: client.flower_app: the evaluate replies of {what} hold {said}, only {held}: metrics.csv's "
          f"{' and '.join(c for c, _ in lacking)} {'stay' if len(lacking) > 1 else 'stays'} empty (NaN)",
          file=sys.stderr, flush=True)


class FederatedScores:
    """Scores flat weights by a federated evaluation over every node through the ClientApp's evaluate handler."""

    def __init__(self, app: ClientAppEvaluator, clients: int, updates: Callable[[], int]) -> None:
        self.app = app
        self.clients = clients
        self.updates = updates
        """The global model's update count when it is scored (the run's state, read as each row is made)."""

    def __call__(self, weights: torch.Tensor) -> Scores:
        updates = int(self.updates())
        config = {"server-round": updates}
        replies = []
        for client in range(self.clients):
            reply = self.app(client, weights, config, f"evaluation of the global model after {updates} updates")
            if reply is not None:
                replies.append({k: float(v) for k, v in reply.items()})
        if not replies:
            return Scores(math.nan, math.nan)
        metrics = weighted(replies)
        told_missing(self.app.what, metrics)
        return Scores(accuracy=pick(metrics, ACCURACY_KEYS)[1], loss=pick(metrics, LOSS_KEYS)[1])


def federated(evaluator: ClientEvaluator, updates: Callable[[], int]) -> FederatedScores | None:
    """The federated evaluation of the run's ClientApp (``evaluator``'s, over all its clients), or None when the
    scenario names no ClientApp or its app has no evaluate handler."""
    app = evaluator.app
    return None if app is None else FederatedScores(app, len(evaluator.shards), updates)
