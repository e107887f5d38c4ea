"""Host RAM of a job (pure): what one node holds in its RAM (offloaded optimizer states and
weights, each process's resident memory) and how much of a host's installed RAM a plan may use."""

from __future__ import annotations

from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models import calibration as cal
from planner.models.loss_buffers import tokens_per_gpu
from planner.models.memory import (
    GIB,
    _layer_input_bytes,
    layer_activation_bytes_per_token,
    offloads_saved,
)
from planner.models.states import (
    _weight_shards,
    optimizer_state_bytes_per_param,
    stage_layers,
    state_shards,
    trainable_shard,
    weight_bytes,
)


def usable_host_ram_gib(installed_gib: float) -> float:
    """Host RAM a job may plan to use: the installed RAM less calibration.HOST_RAM_MARGIN."""
    return installed_gib * (1 - cal.HOST_RAM_MARGIN)


def host_ram_bytes(model: ModelSpec, cfg: TrainConfig, gpus_per_node: int) -> float:
    """Host RAM of one node: offloaded states of its GPUs (+ pinned staging overhead) plus the
    resident memory of one process per GPU.

    optimizer offload (DeepSpeed ZeRO-Offload / FSDP CPU offload): fp32 master (4) + moments
    (state bytes) + fp32 gradients (4) per trainable parameter shard, on the host.
    optimizer+params: also the 16-bit (QLoRA: 4-bit) weight shard.
    """
    ranks = min(gpus_per_node, cfg.num_gpus)
    offloaded = 0.0
    if cfg.offload != "none":
        n = trainable_shard(model, cfg, state_shards(cfg))
        master = 0 if cfg.is_peft or cfg.pure_16bit else 4
        offloaded += n * (master + optimizer_state_bytes_per_param(model, cfg) + 4)
    if cfg.offload == "optimizer+params":
        offloaded += _stored_weight_bytes(model, cfg) / _weight_shards(cfg)
    if cfg.paged and cfg.offload == "none":
        n = trainable_shard(model, cfg, state_shards(cfg))
        offloaded += n * optimizer_state_bytes_per_param(model, cfg)  # worst case: all paged out
    offloaded += offloaded_checkpoint_bytes(model, cfg)
    offloaded *= 1 + cal.HOST_OFFLOAD_OVERHEAD
    return ranks * (offloaded + cal.HOST_RAM_PER_PROCESS_GIB * GIB)


def offloaded_checkpoint_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """Activations offloaded to host RAM (memory.offloads_saved) for one GPU: every layer's
    16-bit input of the micro-batch under full checkpointing, every layer's saved tensors
    without it (memory.activation_bytes keeps only the reloaded ones on the GPU); 0 otherwise."""
    if not offloads_saved(cfg):
        return 0.0
    per_layer = _layer_input_bytes(model, cfg) if cfg.checkpointing == "full" else \
        layer_activation_bytes_per_token(model, cfg) * tokens_per_gpu(cfg)
    return stage_layers(model, cfg) * per_layer


def _stored_weight_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    onload = cfg.model_copy(update={"offload": "none", "fsdp": False, "zero_stage": 0})
    return weight_bytes(model, onload, "bf16")
