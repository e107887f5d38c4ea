"""Memory-bound traffic of a training step that the matmul FLOPs do not count (pure): the
elementwise ops eager model code runs as separate kernels, and LoRA's low-rank matmuls on every
stack. Each streams its bytes at HBM_EFFICIENCY of the peak bandwidth (efficiency.py has the
byte counts and their sources)."""

from __future__ import annotations

from functools import lru_cache

from planner.catalog.params import is_adapted, layer_linears
from planner.catalog.request import TrainConfig
from planner.catalog.specs import GpuSpec, ModelSpec
from planner.models import efficiency as eff
from planner.models.flops import backward_layers, recomputed_share


def eager_layer_bytes(model: ModelSpec, cfg: TrainConfig, layer: int) -> float:
    """HBM bytes per token that the elementwise ops of one layer's forward move when each runs
    as its own kernel (eager Hugging Face modeling code: efficiency.ELEMENTWISE_BYTES). Widths:
    h hidden, q = heads x head_dim, k = kv heads x head_dim, f the MLP width a token passes
    (routed experts: experts_per_token of them, and the shared ones). A fused norm kernel
    (TrainConfig.fused_norms: torchtitan's fused_rmsnorm, apex FusedRMSNorm) moves an RMSNorm's
    bytes as one kernel, as nn.LayerNorm does (ELEMENTWISE_BYTES["layernorm"])."""
    return _eager_layer_bytes(model, cfg.is_peft, tuple(cfg.lora_targets), layer,
                              cfg.fused_norms)


@lru_cache(maxsize=4096)
def _eager_layer_bytes(model: ModelSpec, peft: bool, targets: tuple[str, ...],
                       layer: int, fused_norms: bool = False) -> float:
    """eager_layer_bytes by what it reads of the config (whether and where adapters sit,
    whether norms run as one kernel)."""
    b = eff.ELEMENTWISE_BYTES
    h = model.hidden_size
    q, k = model.num_attention_heads * model.head_dim, model.num_kv_heads * model.head_dim
    rms = b["layernorm"] if fused_norms else b["rmsnorm"]
    norm = rms if model.norm == "rmsnorm" else b["layernorm"]
    total = model.norms_per_layer * norm * h + 2 * b["residual_add"] * h
    if model.position_embedding == "rotary":
        total += b["rotary"] * (q + k)
    if model.qk_norm:  # per head (Qwen3) or over the whole projection (OLMo-2): q + k elements
        total += rms * (q + k)
    act = b["gated_act"] if model.activation in ("swiglu", "geglu") else b["act"]
    for lin in layer_linears(model, layer):
        per = model.moe.experts_per_token if lin.group == "expert" and model.moe else lin.count
        if lin.name == "up":  # every MLP (gated or plain) has one "up" output of width f
            total += act * lin.d_out * per
        if peft and is_adapted(lin, targets):
            total += b["lora_out"] * lin.d_out * per
    return total


@lru_cache(maxsize=4096)
def _eager_bytes(model: ModelSpec, peft: bool, targets: tuple[str, ...], start: int,
                 stop: int, fused_norms: bool = False) -> float:
    """Sum of eager_layer_bytes over layers start .. stop - 1 (in layer order)."""
    return sum(_eager_layer_bytes(model, peft, targets, i, fused_norms)
               for i in range(start, stop))


def elementwise_seconds(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *,
                        tokens: float, backward: bool = True) -> float:
    """Unfused elementwise traffic (norms, rotary, activation, residual adds, LoRA scale-add)
    of ``tokens`` on one GPU: forward, recomputed forward (full checkpointing) and backward
    (efficiency.ELEMENTWISE_BACKWARD_RATIO x forward) at the streaming HBM rate. Zero where
    the framework's model code fuses them (TrainConfig.fuses_elementwise: its profile's fact
    fused_elementwise, or torch.compile)."""
    if cfg.fuses_elementwise:
        return 0.0
    peft, targets, fused = cfg.is_peft, tuple(cfg.lora_targets), cfg.fused_norms
    fwd = _eager_bytes(model, peft, targets, 0, model.num_layers, fused)
    if backward:
        top = _eager_bytes(model, peft, targets, model.num_layers - backward_layers(model, cfg),
                           model.num_layers, fused)
        passes = fwd + eff.ELEMENTWISE_BACKWARD_RATIO * top
        passes += top * recomputed_share(cfg)
    else:
        passes = fwd
    return tokens * passes / (cfg.tp * cfg.pp) / (
        gpu.memory_bandwidth_gbps * 1e9 * eff.HBM_EFFICIENCY)


def _hbm_seconds(gpu: GpuSpec, traffic: float) -> float:
    return traffic / (gpu.memory_bandwidth_gbps * 1e9 * eff.HBM_EFFICIENCY)


@lru_cache(maxsize=4096)
def _adapter_layer_bytes(model: ModelSpec, targets: tuple[str, ...], layer: int,
                         fused_combine: bool) -> tuple[float, float]:
    """(forward, backward) HBM bytes per token of one layer's LoRA matmuls
    (efficiency.LORA_GEMM_BYTES) and, where the model code fuses elementwise ops, the fused
    scale-add into the frozen output (LORA_FUSED_COMBINE_BYTES); routed experts count
    experts_per_token of them."""
    g, c = eff.LORA_GEMM_BYTES, eff.LORA_FUSED_COMBINE_BYTES
    fwd = bwd = 0.0
    for lin in layer_linears(model, layer):
        if not is_adapted(lin, targets):
            continue
        per = model.moe.experts_per_token if lin.group == "expert" and model.moe else lin.count
        fwd += per * (g["forward"][0] * lin.d_in + g["forward"][1] * lin.d_out
                      + (c["forward"] * lin.d_out if fused_combine else 0.0))
        bwd += per * (g["backward"][0] * lin.d_in + g["backward"][1] * lin.d_out
                      + (c["backward"] * lin.d_out if fused_combine else 0.0))
    return fwd, bwd


def adapter_seconds(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *,
                    tokens: float) -> float:
    """LoRA-family adapters' memory-bound traffic for ``tokens`` on one GPU: forward, the
    recomputed forward (full checkpointing) and backward of every adapted matrix
    (_adapter_layer_bytes) at the streaming HBM rate; zero without adapters."""
    if not cfg.is_peft:
        return 0.0
    fused = cfg.fuses_elementwise
    targets = tuple(cfg.lora_targets)
    first = model.num_layers - backward_layers(model, cfg)
    per = [_adapter_layer_bytes(model, targets, i, fused) for i in range(model.num_layers)]
    fwd = sum(f for f, _ in per)
    top = sum(f for f, _ in per[first:])
    traffic = fwd + sum(b for _, b in per[first:]) + top * recomputed_share(cfg)
    return _hbm_seconds(gpu, tokens * traffic / (cfg.tp * cfg.pp))
