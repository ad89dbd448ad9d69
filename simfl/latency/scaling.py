"""Scale measured compute and communication latency to a scenario's own workload.

The Raspberry Pi logs were measured while training on MNIST non-IID with SGD
for 5 local epochs (run folder ``..._mnist_noniid_..._ds600_sgd_0.01_e5_...``).
A scenario with a different model or data size rescales the two parts apart:

* compute x ``compute`` factor, or with ``compute: workload`` x the ratio of the
  client's local work ``flops_per_sample * samples[m] * epochs`` to the
  reference's (a FLOP ratio, standing in for the paper's measured-time ratio);
* communication x ``comm`` factor, or with ``comm: workload`` x
  ``model_bytes / reference.model_bytes``.

The default reference is LeNet-5 as the paper describes it (44,190 float32
parameters = 176,760 bytes; 1,517,040 training FLOPs per sample, forward and
backward, as :mod:`simfl.models.cost` counts them with PyTorch's FlopCounterMode) on
600 samples per client (our reading of ``ds600`` in the run name) for 5 epochs.
The network actually used on the devices is not recorded with the logs; this
reference is a documented choice, and every number can be overridden.
Defaults (1 and 1) leave the measured round latency unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from simfl.errors import InputError
from simfl.fields import PositiveFloat, PositiveInt, Section
from simfl.latency.base import FlopsUse, Workload


class ReferenceWorkload(Section):
    """The workload the measured latencies correspond to."""

    model_bytes: PositiveInt = Field(176_760, description="Exchanged bytes of the reference model (LeNet-5, float32).")
    flops_per_sample: PositiveInt = Field(1_517_040, description="Training FLOPs per sample of the reference model.")
    samples: PositiveInt = Field(600, description="Training samples per client in the measured runs.")
    epochs: PositiveInt = Field(5, description="Local epochs per round in the measured runs.")


class ScalingConfig(Section):
    """How to scale the measured compute and communication parts (default: unscaled)."""

    compute: PositiveFloat | Literal["workload"] = Field(
        1.0, description="Compute factor, or 'workload' for the client's local work over the reference's."
    )
    comm: PositiveFloat | Literal["workload"] = Field(
        1.0, description="Communication factor, or 'workload' for model_bytes over the reference's."
    )
    reference: ReferenceWorkload = Field(
        default_factory=lambda: ReferenceWorkload.model_validate({}), description="The measured workload."
    )


def factors(config: ScalingConfig, workload: Workload, num_clients: int) -> tuple[list[float], list[float]]:
    """Per-client (compute, comm) multipliers."""
    ref = config.reference
    if config.compute == "workload":
        ref_work = ref.flops_per_sample * ref.samples * ref.epochs
        comp = [workload.flops_per_sample * workload.samples[m] * workload.epochs / ref_work for m in range(num_clients)]
    else:
        comp = [float(config.compute)] * num_clients
    comm_f = workload.model_bytes / ref.model_bytes if config.comm == "workload" else float(config.comm)
    return comp, [comm_f] * num_clients


WORKLOAD_FLOPS: FlopsUse = ("latency.scaling.compute", "workload", "a factor")
"""Where compute scaled by the workload reads the model's training FLOPs."""


def check_workload(config: ScalingConfig, workload: Workload, num_clients: int) -> None:
    """Workload-based compute scaling needs a sample count for every client."""
    if config.compute == "workload" and len(workload.samples) < num_clients:
        raise InputError(
            "latency.scaling.compute", f"workload has {len(workload.samples)} client sample counts, needs {num_clients}"
        )
    if config.compute == "workload":
        workload.training_flops(WORKLOAD_FLOPS)


class Scaled:
    """Mixin of the delay models scaled to the workload (their ``scaling:`` section, :class:`TraceOptions`)."""

    @classmethod
    def flops_use(cls, config: Any) -> FlopsUse | None:
        return WORKLOAD_FLOPS if config.scaling.compute == "workload" else None


class TraceOptions(Section):
    """Options shared by the models built on the measured traces."""

    traces: str | None = Field(
        None, description="Folder with devices.csv, pooled.json, uploads.csv; default: the copy shipped with simfl."
    )
    scaling: ScalingConfig = Field(
        default_factory=lambda: ScalingConfig.model_validate({}), description="Compute/communication scaling."
    )
