"""FLOPs per token of a training step and the dense peaks they run at (pure).

FLOPs per token follow Kaplan et al. 2020 (6N: 2N forward, 4N backward) and Narayanan et al.
2021, "Efficient Large-Scale Language Model Training on GPU Clusters" (attention and logits
terms); flash attention (Dao et al. 2022) skips the masked half of causal attention and
recomputes the scores in backward (2.5x the forward). throughput.py turns them into seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from planner.catalog.params import Linear, layer_linears, lora_params, vocab_matrix_params
from planner.catalog.request import TrainConfig
from planner.catalog.specs import GpuSpec, ModelSpec


# ---------------------------------------------------------------------------------------------
# Peaks
# ---------------------------------------------------------------------------------------------
def matmul_precision(gpu: GpuSpec, cfg_precision: str) -> str:
    """fp8 where the GPU has fp8 tensor cores, fp32 as asked, otherwise 16-bit."""
    if cfg_precision == "fp8" and gpu.fp8_dense_tflops:
        return "fp8"
    return "fp32" if cfg_precision == "fp32" else "bf16"


def peak_tflops(gpu: GpuSpec, precision: str) -> float:
    """Dense peak TFLOPS: fp8 column for fp8; TF32 = half the bf16 peak for fp32 (A100/H100
    datasheets); bf16 (FP16 tensor on V100/T4, gpus_README) otherwise."""
    if precision == "fp8" and gpu.fp8_dense_tflops:
        return gpu.fp8_dense_tflops
    if precision == "fp32":
        return gpu.bf16_dense_tflops / 2
    return gpu.bf16_dense_tflops


# ---------------------------------------------------------------------------------------------
# FLOPs per token (whole model)
# ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=1024)
def layer_matmul_params(model: ModelSpec, layer: int) -> float:
    """Weight parameters a token multiplies in one layer: every linear, routed experts counted
    top_k of num_experts times (MoE compute counts active experts, DESIGN.md s.4)."""
    total = 0.0
    for lin in layer_linears(model, layer):
        total += linear_matmul_params(model, lin)
    return total


def linear_matmul_params(model: ModelSpec, lin: Linear) -> float:
    """Weight parameters a token multiplies in one layer's linear ``lin``: its
    d_in x d_out times its count, a routed expert's times top_k."""
    n = lin.d_in * lin.d_out
    if lin.group == "expert" and model.moe is not None:
        return n * model.moe.experts_per_token
    return n * lin.count


def head_matmul_params(model: ModelSpec) -> float:
    """LM head (vocab x e, tied or not: the logits are a matmul either way) plus OPT-350m's
    project_in/out (2 e h) when the embedding width differs."""
    h, e = model.hidden_size, model.word_embed_proj_dim or model.hidden_size
    return vocab_matrix_params(model) + (2 * e * h if e != h else 0)


@lru_cache(maxsize=256)
def matmul_params(model: ModelSpec) -> float:
    """N of the 6N rule: active matmul parameters of all layers plus the head."""
    return sum(layer_matmul_params(model, i) for i in range(model.num_layers)) + head_matmul_params(
        model
    )


def attention_widths(model: ModelSpec) -> tuple[int, int]:
    """(q.k width, value width) summed over heads: heads x head_dim each; MLA uses
    heads x (nope + rope) for scores and heads x v_head_dim for values."""
    if model.mla is not None:
        a = model.mla
        heads = model.num_attention_heads
        return heads * (a.qk_nope_head_dim + a.qk_rope_head_dim), heads * a.v_head_dim
    width = model.num_attention_heads * model.head_dim
    return width, width


def attention_fwd_flops_per_layer(model: ModelSpec, seq_len: int, *, causal_skip: bool) -> float:
    """Forward attention FLOPs per token and layer: 2 x keys x (qk width) for the scores plus
    2 x keys x (v width) for the weighted sum, keys = seq/2 when a causal kernel skips the
    masked half (flash attention), seq otherwise (Narayanan et al. 2021 count seq)."""
    qk, v = attention_widths(model)
    keys = seq_len / 2 if causal_skip else seq_len
    return 2 * keys * (qk + v)


def backward_layers(model: ModelSpec, cfg: TrainConfig) -> int:
    """Layers that run a backward pass: all of them, except with 'freeze' tuning (only the last
    k trainable layers; nothing below them needs a gradient)."""
    if cfg.method == "freeze":
        return min(cfg.freeze_trainable_layers, model.num_layers)
    return model.num_layers


@lru_cache(maxsize=1024)
def _layers_from_top(model: ModelSpec, count: int) -> float:
    return sum(layer_matmul_params(model, i) for i in range(model.num_layers - count,
                                                           model.num_layers))


def recomputed_share(cfg: TrainConfig) -> float:
    """Share of the layers whose forward backward repeats under full checkpointing: all of them,
    or cfg.checkpoint_fraction where the framework wraps every k-th layer only (fms-fsdp's
    selective_checkpointing, Megatron's --recompute-num-layers); 0 under any other checkpointing.
    The one home of the recomputed passes (FLOPs, launches, traffic, collectives)."""
    return cfg.checkpoint_fraction if cfg.checkpointing == "full" else 0.0


def op_sac_recomputed_fraction(model: ModelSpec) -> float:
    """Share of a layer's matmul FLOPs that op-level selective checkpointing recomputes: the
    matmuls whose outputs it does not keep (every second one in execution order; routed experts,
    grouped GEMMs outside the save list, all of theirs; memory.op_sac_bytes_per_token)."""
    done = again = 0.0
    position = 0
    for lin in layer_linears(model, model.num_layers - 1):
        if lin.group == "expert":
            flops = lin.d_in * lin.d_out * (model.moe.experts_per_token if model.moe else 1)
            again += flops
        else:
            flops = lin.d_in * lin.d_out * lin.count
            position += 1
            again += flops if position % 2 == 0 else 0.0
        done += flops
    return again / done


@dataclass(frozen=True)
class FlopsPerToken:
    """Executed FLOPs per training token for the whole model, by kind."""

    linear_fwd: float
    linear_bwd: float
    attention_fwd: float
    attention_bwd: float
    recompute_linear: float
    recompute_attention: float
    adapter: float
    model: float  # MFU numerator per token (see MFU_DEFINITION)

    @property
    def linear(self) -> float:
        """Work that runs in the matmul precision (fp8 under an fp8 recipe)."""
        return self.linear_fwd + self.linear_bwd + self.recompute_linear

    @property
    def attention(self) -> float:
        """The attention core: forward, backward and recomputed forward (a fused kernel's
        work, timed at its own rate: attention.py)."""
        return self.attention_fwd + self.attention_bwd + self.recompute_attention

    @property
    def sixteen_bit(self) -> float:
        """Work that stays in 16 bit: attention (fp8 recipes keep bf16 attention) and adapters."""
        return self.attention + self.adapter

    @property
    def total(self) -> float:
        """FLOPs per token, matmul and 16-bit elementwise together."""
        return self.linear + self.sixteen_bit


def linear_backward_flops(model: ModelSpec, cfg: TrainConfig) -> float:
    """Backward matmul FLOPs per token: input gradient (2 x weights) for every layer on the
    backward path and the head, weight gradient (2 x weights) for trained weights only. Full
    training: 4N. LoRA/QLoRA/DoRA skip frozen weight gradients: 2N (Hu et al. 2021).
    Freeze: input and weight gradients of the last k layers and the head's input gradient."""
    head = head_matmul_params(model)
    if cfg.method == "full":
        return 4 * (matmul_params(model))
    if cfg.method == "freeze":
        top = _layers_from_top(model, backward_layers(model, cfg))
        return 2 * (head + top) + 2 * top
    return 2 * matmul_params(model)


def adapter_flops(model: ModelSpec, cfg: TrainConfig) -> float:
    """LoRA A and B matmuls: forward 2 x adapter params, backward input + weight gradients
    4 x adapter params per token (Hu et al. 2021). DoRA's magnitude scaling is elementwise."""
    if not cfg.is_peft:
        return 0.0
    return 6.0 * lora_params(model, cfg.rank, cfg.lora_targets)


def training_flops(model: ModelSpec, cfg: TrainConfig) -> FlopsPerToken:
    """FLOPs per token of one training step on ``cfg.seq_len`` tokens per sequence.

    Attention: flash attention skips the masked half (causal) and its backward recomputes the
    scores: 2.5x forward (5 matmuls vs 2; Dao et al. 2022); eager attention computes the full
    square with a 2x backward. Full recomputation repeats the forward of the layers that save
    activations (Korthikanti et al. 2022); selective recomputation repeats the attention core,
    which flash attention already recomputes (no extra work then); op-level selective
    checkpointing repeats the matmuls it does not keep (op_sac_recomputed_fraction).
    """
    flash = cfg.flash_attention
    s, L = cfg.seq_len, model.num_layers
    nb = backward_layers(model, cfg)
    attn_layer = attention_fwd_flops_per_layer(model, s, causal_skip=flash)
    attn_fwd = L * attn_layer
    attn_bwd = nb * attn_layer * (2.5 if flash else 2.0)
    linear_fwd = 2 * matmul_params(model)
    rec_lin = rec_att = 0.0
    if cfg.checkpointing == "full":
        rec_lin = 2 * _layers_from_top(model, nb) * recomputed_share(cfg)
        rec_att = nb * attn_layer * recomputed_share(cfg)
    elif cfg.checkpointing == "selective" and cfg.selective_checkpointing == "op":
        rec_lin = 2 * _layers_from_top(model, nb) * op_sac_recomputed_fraction(model)
    elif cfg.checkpointing == "selective" and not flash:
        rec_att = nb * attn_layer
    adapter = adapter_flops(model, cfg)
    lin_bwd = linear_backward_flops(model, cfg)
    full_attn = attention_fwd_flops_per_layer(model, s, causal_skip=False)
    model_flops = linear_fwd + lin_bwd + adapter + (L + 2 * nb) * full_attn
    return FlopsPerToken(
        linear_fwd=linear_fwd, linear_bwd=lin_bwd, attention_fwd=attn_fwd,
        attention_bwd=attn_bwd, recompute_linear=rec_lin, recompute_attention=rec_att,
        adapter=adapter, model=model_flops,
    )
