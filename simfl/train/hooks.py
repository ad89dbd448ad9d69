"""Changes an algorithm makes to local training, applied by the local trainer through one small seam.

An algorithm asks for them in the :class:`~simfl.train.message.Message` it sends each
client (:meth:`simfl.algorithms.base.Algorithm.message`; the plain
:meth:`~simfl.algorithms.base.Algorithm.local_options` fills its ``hooks``). For each
hook key, :func:`hook` finds what implements it, and the trainer builds it once per job:

- a :class:`LocalHook` subclass is built as ``cls(round, value)`` with the job's
  :class:`Round`; per batch it may add a term to the loss (:meth:`LocalHook.loss`, from the
  parameters; :meth:`LocalHook.batch_loss`, from the :class:`Batch`: its inputs, labels, the
  model's outputs and representation of them) and change the gradients before the optimizer
  step (:meth:`LocalHook.correct`), and after training it may send arrays back in the reply
  (:meth:`LocalHook.reply`). A batch hook may compare the representation with that of the model
  at other weights, frozen (:meth:`Round.features_at`: the round's start, an array sent);
- a plain function ``hook(params, value)`` returns a penalty, a term added to every
  batch's loss (the original, smaller seam, kept for plugins written against it).

Built in: FedProx's proximal term (``prox_mu``), SCAFFOLD's control-variate correction
(``control_variate``), a linear term ``<v, w>`` with ``v`` sent in the message (``linear_term``,
FedDyn's) and MOON's model-contrastive term (``contrastive``). The trainer calls only what a hook
overrides, and reads the representation only when some hook overrides ``batch_loss``: a job without
one trains exactly as before the seam existed. An algorithm that changes local training adds its hook here, or names a plugin's
by import path ``package.module:name`` (worker processes and Ray actors import it too, so the
module must be importable there), and touches no executor (docs/architecture.md, "Adding an
algorithm").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from simfl.errors import InputError
from simfl.models.flat import Layout
from simfl.models.representation import Features
from simfl.names import import_object, is_import_path
from simfl.train.message import Message

Penalty = Callable[[], torch.Tensor]
"""A term added to each batch's loss (it may read the parameters as they train)."""
Hook = Callable[[list[nn.Parameter], Any], Penalty]
"""A plain-function hook: ``(trainable parameters at the round's start, value) -> penalty``."""


@dataclass(frozen=True)
class Round:
    """What a hook sees of the round it changes."""

    params: list[nn.Parameter]
    """The trainable parameters, in the layout's order, at the round's start weights."""
    layout: Layout
    start: torch.Tensor
    """The flat weights the round starts from."""
    message: Message
    lr: float
    """The local SGD learning rate."""
    frozen: Callable[[torch.Tensor], Features] | None = None
    """The trainer's way to the model at other weights (:meth:`features_at`); None where nothing can give it."""

    def features_at(self, flat: torch.Tensor) -> Features:
        """The model at the flat weights ``flat`` (the round's :attr:`start`, an array of the message), frozen: a
        function of a batch's inputs giving that model's representation of them, ``(batch, d)``, in evaluation mode and
        without gradient (:mod:`simfl.models.representation`: the input of the output layer). Build it once, in the
        hook's ``__init__``; each call is one forward pass."""
        if self.frozen is None:
            raise ValueError("this round's trainer gives no frozen models (Round.frozen is None)")
        return self.frozen(flat)

    def param_views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Views of ``flat`` shaped like :attr:`params`, in their order (buffers left out)."""
        views = [flat[s.offset : s.stop].view(s.shape) for s in self.layout.segments if s.kind == "param"]
        if len(views) != len(self.params):
            raise ValueError(f"layout has {len(views)} trainable tensors, the model {len(self.params)}")
        return views


@dataclass(frozen=True, slots=True)
class Batch:
    """What :meth:`LocalHook.batch_loss` sees of one batch (the tensors on the model's device)."""

    inputs: torch.Tensor
    labels: torch.Tensor
    outputs: torch.Tensor
    """The model's outputs (logits) on :attr:`inputs`, in the autograd graph (the cross-entropy's input)."""
    features: torch.Tensor
    """The model's representation of :attr:`inputs`, ``(batch, d)``, in the autograd graph: the input of its output
    layer, from the same forward pass (:mod:`simfl.models.representation`)."""


class LocalHook:
    """A change to one job's local training with a view of the whole round (override what it changes)."""

    def __init__(self, round: Round, value: Any) -> None:
        self.round = round
        self.value = value

    def loss(self) -> torch.Tensor | None:
        """A term added to each batch's loss (None: none)."""
        return None

    def batch_loss(self, batch: Batch) -> torch.Tensor | None:
        """A term added to the loss of ``batch``, computed from it (its inputs, labels, the model's outputs and
        representation), after the cross-entropy and every hook's :meth:`loss` (None: none). Only a hook that
        overrides it makes the trainer read representations."""
        return None

    def correct(self) -> None:
        """Change the parameters' gradients after each backward pass, before the optimizer step."""

    def reply(self, trained: torch.Tensor, steps: int) -> dict[str, torch.Tensor]:
        """Arrays to send back with the trained flat weights after ``steps`` optimizer steps."""
        return {}


class _Penalty(LocalHook):
    """A plain-function hook as a :class:`LocalHook`: its penalty is the loss term."""

    def __init__(self, round: Round, value: Any, function: Hook) -> None:
        super().__init__(round, value)
        self.penalty = function(round.params, value)

    def loss(self) -> torch.Tensor | None:
        return self.penalty()


def proximal(params: list[nn.Parameter], mu: Any) -> Penalty:
    """FedProx: ``mu/2 ||w - w_start||^2`` over the trainable parameters."""
    anchor = [p.detach().clone() for p in params]
    weight = float(mu)

    def penalty() -> torch.Tensor:
        prox = sum(((p - a) ** 2).sum() for p, a in zip(params, anchor, strict=True))
        return 0.5 * weight * prox  # type: ignore[return-value]

    return penalty


class ControlVariate(LocalHook):
    """SCAFFOLD's client side (Karimireddy et al., ICML 2020, Algorithm 1, lines 9-12, option II).

    The message carries the server variate ``c`` and this client's ``c_i`` (flat, laid out
    like the weights). Each step descends ``g_i(y) - c_i + c`` instead of ``g_i(y)``: the
    correction is added to the gradients after the backward pass, so momentum and weight
    decay, if set, act on the corrected gradient. The reply carries the updated variate,
    option II: ``c_i+ = c_i - c + (x - y_i) / (K lr)`` with ``K`` the steps taken; on buffer
    entries (batch-norm statistics, which have no gradient) it is 0.
    """

    def __init__(self, round: Round, value: Any) -> None:
        super().__init__(round, value)
        arrays = round.message.arrays
        self.shift = arrays["c_i"] - arrays["c"]
        """c_i - c: the correction is ``g <- g - shift``."""
        self.views = [v.to(p.device) for v, p in zip(round.param_views(self.shift), round.params, strict=True)]

    def correct(self) -> None:
        for p, v in zip(self.round.params, self.views, strict=True):
            if p.grad is not None:
                p.grad.sub_(v)

    def reply(self, trained: torch.Tensor, steps: int) -> dict[str, torch.Tensor]:
        if steps == 0:  # nothing trained: the variate stays as it was
            return {"c_i": self.round.message.arrays["c_i"].clone()}
        drift = (self.round.start - trained.to(self.round.start.device)) / (steps * self.round.lr)
        new = drift + self.shift.to(drift.device)
        new[~self.round.layout.mask("param").to(new.device)] = 0.0
        return {"c_i": new.cpu()}


class LinearTerm(LocalHook):
    """A linear term ``<v, w>`` in each batch's loss over the trainable parameters, ``v`` the message's array named by
    the hook's value (flat, laid out like the weights; its buffer entries are not read). Its gradient is ``v`` whatever
    the batch, so it is added to the gradients after the backward pass (momentum and weight decay then act on the sum,
    as on any loss term's gradient); the round's reported loss leaves it out, as it leaves out every hook's term.
    FedDyn's ``-<grad L_k(theta_k^(t-1)), theta>`` is ``v = -grad L_k(theta_k^(t-1))``."""

    def __init__(self, round: Round, value: Any) -> None:
        super().__init__(round, value)
        v = round.message.arrays[str(value)]
        self.views = [x.to(p.device) for x, p in zip(round.param_views(v), round.params, strict=True)]

    def correct(self) -> None:
        for p, v in zip(self.round.params, self.views, strict=True):
            if p.grad is None:  # a parameter the batch's loss does not reach: the term's gradient alone
                p.grad = v.clone()
            else:
                p.grad.add_(v)


class Contrastive(LocalHook):
    """MOON's model-contrastive term (Li, He, Song, CVPR 2021, Algorithm 1 and Eq. 3), weighted by ``mu``.

    The hook's value is ``{"mu": mu, "tau": tau, "negative": key}``: ``key`` names the message's array of the
    client's previous local model (flat, laid out like the weights). For a batch with representation ``z`` (the model
    being trained), ``z_glob`` (the global model: the round's start weights, frozen) and ``z_prev`` (the previous
    local model, frozen), each sample adds ``-log(exp(sim(z, z_glob)/tau) / (exp(sim(z, z_glob)/tau) +
    exp(sim(z, z_prev)/tau)))``, ``sim`` the cosine similarity; the term is ``mu`` times its mean over the batch."""

    def __init__(self, round: Round, value: Any) -> None:
        super().__init__(round, value)
        self.mu = float(value["mu"])
        self.tau = float(value["tau"])
        self.positive = round.features_at(round.start)
        self.negative = round.features_at(round.message.arrays[str(value["negative"])])

    def batch_loss(self, batch: Batch) -> torch.Tensor | None:
        z = batch.features
        sims = torch.stack([functional.cosine_similarity(z, self.positive(batch.inputs), dim=-1),
                            functional.cosine_similarity(z, self.negative(batch.inputs), dim=-1)], dim=1) / self.tau
        positive = torch.zeros(len(z), dtype=torch.long, device=z.device)
        return self.mu * functional.cross_entropy(sims, positive)


HOOKS: dict[str, Hook | type[LocalHook]] = {"prox_mu": proximal, "control_variate": ControlVariate,
                                            "linear_term": LinearTerm, "contrastive": Contrastive}


@functools.cache
def hook(key: str) -> Hook | type[LocalHook]:
    """The hook of key ``key``: a built-in name of :data:`HOOKS` or an import path ``module:name``."""
    if key in HOOKS:
        return HOOKS[key]
    if is_import_path(key):
        try:
            obj = import_object(key, "local training")
        except InputError as exc:
            raise KeyError(f"local-training hook '{key}' cannot be imported: {exc.message}") from None
        if callable(obj):
            return obj  # type: ignore[no-any-return]
    raise KeyError(f"no local-training hook '{key}'; known: {sorted(HOOKS)} or an import path module:name")


def build(round: Round, hooks: Mapping[str, Any]) -> list[LocalHook]:
    """The hooks of one job, built for its round, in the message's order."""
    built: list[LocalHook] = []
    for key, value in hooks.items():
        found = hook(key)
        if isinstance(found, type) and issubclass(found, LocalHook):
            built.append(found(round, value))
        else:
            built.append(_Penalty(round, value, found))  # type: ignore[arg-type]
    return built


def overrides(hooks: list[LocalHook], method: str) -> list[LocalHook]:
    """The hooks whose class overrides ``method`` of :class:`LocalHook` (the trainer calls only those)."""
    base = getattr(LocalHook, method)
    return [h for h in hooks if getattr(type(h), method) is not base]
