"""Per-GPU peak memory and host RAM of one concrete training configuration (pure functions).

The peak is the larger of two phases:

* forward/backward: resident model states + the gathered ZeRO-3/FSDP working set + saved
  activations + the loss (logits) buffers (under recomputation the larger of these and the
  recomputed layer's working set: forward_activation_bytes), plus accumulated gradients when
  grad_accum > 1;
* optimizer step: resident model states + all gradients + optimizer temporaries.

Each term is one function returning bytes on the most loaded GPU, with its formula and source.
Byte counts per parameter follow Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models" (SC'20): mixed-precision Adam keeps 2 B weights + 2 B gradients +
4 B fp32 master + 8 B fp32 moments = 16 B per trainable parameter. Activations follow
Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022),
recomputed for SwiGLU MLPs, GQA and flash attention. Calibrated constants are in calibration.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.catalog.params import layer_linears
from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models import calibration as cal
from planner.models.flops import recomputed_share
from planner.models.held_outputs import forward_end_phases, head_transient, held_bytes_per_token
from planner.models.lora_dropout import lora_dropout_bytes_per_token as dropout_bytes
from planner.models.loss_buffers import (
    logit_columns,
    logits_bytes,
    loss_bytes_held_through_backward,
    tokens_per_gpu,
)
from planner.models.moe_activations import routed_copies_bytes_per_token, score_grad_bytes_per_token
from planner.models.states import (
    _adapted_names,
    adapted_linears,
    adapter_bytes,
    comm_buffer_bytes,
    gathered_bytes,
    gradient_bytes,
    master_weight_bytes,
    mlp_width,
    optimizer_state_bytes,
    optimizer_step_bytes,
    qlora_norms_fp32,
    stage_layers,
    weight_bytes,
)
from planner.models.trained_copies import trained_copy_bytes

GIB = cal.GIB
TRANSIENT_TERMS = ("activations", "logits_and_loss", "optimizer_step", "held_outputs",
                   "dequantized_head")

# ---------------------------------------------------------------------------------------------
# Activations and loss
# ---------------------------------------------------------------------------------------------
def usable_capacity(capacity: float, margin: float) -> float:
    """GPU memory a plan may use: the capacity (any unit) less the planning margin."""
    return capacity * (1.0 - margin)


def usable_mib(memory_gib: float, margin: float) -> int:
    """usable_capacity of a GPU of ``memory_gib`` in whole MiB (the solver's unit)."""
    return int(usable_capacity(memory_gib * 1024, margin))


NORM_READERS = {"attention": ("q", "k", "v", "q_a", "kv_a"), "mlp": ("gate", "up")}


def _inputs_kept(cfg: TrainConfig, trained: frozenset[str] | None) -> frozenset[str] | None:
    """Matrices whose inputs are saved: those that train (None: all; none under LoRA dropout), or
    all when the 4-bit base keeps them (cfg.quant_keeps_inputs: bitsandbytes < 0.43.2)."""
    dropped = frozenset() if trained is not None and cfg.lora_dropout else trained
    return None if cfg.method == "qlora" and cfg.quant_keeps_inputs else dropped


def _norm_saved_bytes(model: ModelSpec, cfg: TrainConfig, trained: frozenset[str] | None) -> float:
    """Bytes per token the layer's two norms keep (layer_activation_bytes_per_token): their
    inputs, the normalised inputs when the norm weights train (``trained`` None: everything
    trains) and their outputs when a matrix reading them keeps its input (_inputs_kept)."""
    h, b = model.hidden_size, 2
    reads = {part: (kept := _inputs_kept(cfg, trained)) is None or any(n in kept for n in names)
             for part, names in NORM_READERS.items()}
    outputs = h * b * (reads["attention"] + reads["mlp"])
    if cfg.fuses_elementwise or cfg.fused_norms:
        # compiled, or a fused norm kernel: its 16-bit input and a per-row rstd (the layer
        # input, o's output); the normalised parts are recomputed in its backward
        return 2 * h * b + outputs
    if model.norm == "rmsnorm":
        return 2 * h * 4 + (2 * h * b if trained is None else 0) + outputs
    return 2 * h * b + outputs


def residual_bytes(model: ModelSpec, cfg: TrainConfig) -> int:
    """Bytes per element of the residual stream and of what the layer's matrices return: 4
    where QLoRA keeps its norm weights in fp32 (states.qlora_norms_fp32: PEFT's
    prepare_model_for_kbit_training casts every parameter not 4-bit to fp32, huggingface/
    peft@5d602fdb src/peft/utils/other.py; TRL before 0.26 keeps the norms fp32) and a
    Llama-style RMSNorm multiplies its 16-bit output by that weight (weight *
    x.to(input_dtype): fp32; not model.norm_casts_back), while bitsandbytes'
    Linear4bit returns its input's dtype (0.43.3 nn/modules.py l. 472-479): every projection
    after the first norm and every residual add is fp32. Measured: fms-acceleration's plain
    PEFT QLoRA of Mistral-7B holds 4.0 / 8.0 GiB more at 16k / 32k tokens than its plugin's
    load without the casts (32 layers x 4096 x 2 B more per checkpointed input: 4.0 / 8.0
    GiB; validation/project_cases_fmsacc_memory.yaml). 2 otherwise (a fused norm kernel
    returns its input's dtype)."""
    fp32 = qlora_norms_fp32(cfg) and model.norm == "rmsnorm" and not model.norm_casts_back \
        and not (cfg.fuses_elementwise or cfg.fused_norms)
    return 4 if fp32 else 2


def _mlp_saved_bytes(model: ModelSpec, cfg: TrainConfig, trained: frozenset[str] | None) -> float:
    """Bytes per token the layer's MLP keeps (layer_activation_bytes_per_token), with an MoE
    layer's router logits and routed copies."""
    down = (kept := _inputs_kept(cfg, trained)) is None or "down" in kept
    # gated: gate out, up out (+ act(gate) unless compiled or a fused activation kernel, which
    # saves its inputs and recomputes act(gate)); plain: the activation's input; in the
    # residual stream's dtype (the matrices return their input's)
    kept = (2 if cfg.fuses_elementwise else 3) if model.activation in ("swiglu", "geglu") else 1
    # + the down projection's (16-bit) input when it trains
    mlp = (kept * residual_bytes(model, cfg) + down * 2) * mlp_width(model)
    if model.moe is not None:
        mlp += model.moe.num_experts * 4  # fp32 router logits
        mlp += routed_copies_bytes_per_token(model)
    return mlp


def layer_activation_bytes_per_token(model: ModelSpec, cfg: TrainConfig) -> float:
    """16-bit activations one layer saves for backward, per token, without recomputation.

    A tensor is saved only if some backward needs it: an input is kept for the gradient of a
    weight that trains (or of its LoRA A), an activation's input for its own derivative. With
    h hidden, g = kv/heads, f the MLP width and b = 2 bytes, a Llama-style layer keeps
      attention: q, k, v (read by flash attention) and its output   (2h + 2hg) b
      each RMSNorm: its input upcast to fp32 (4h bytes); the normalised input before the
        weight (h b) if the norm weight trains; its output (h b) if a matrix reading it trains
        (LayerNorm keeps its 16-bit input instead of the fp32 copy and nothing normalised)
      SwiGLU: gate out, act(gate), up out (3f b) + the product (f b) if down trains
        (GELU/ReLU MLP: its input f b + its output f b if down trains)
    Full fine-tuning keeps all: (10h + 2hg + 4f) b + 8h for a Llama layer, 131 kB per token
    for Llama-3.2-3B; LoRA on every matrix drops the two normalised inputs, LoRA on q, v also
    the second norm's output and the product. MoE layers keep the MLP tensors of the k routed
    experts (+ shared) per token. Under torch.compile the min-cut partitioner keeps the 16-bit
    layer input and the attention output projection's result instead of fp32 norm copies
    (the norms are recomputed: 4h b with both norm outputs) and recomputes act(gate); fused
    norm and activation kernels keep the same (cfg.fuses_elementwise, cfg.fused_norms: their
    autograd functions save the kernel inputs and the per-row rstd: linkedin/Liger-Kernel@ead96b6
    ops/rms_norm.py save_for_backward(X, RSTD), ops/swiglu.py (a, b); unslothai/unsloth@015bdef
    kernels/rms_layernorm.py (X, W, r); NVIDIA/TransformerEngine@d0067d0 ops/basic/rmsnorm.py
    (x, rstdevs), activation.py (x); NVIDIA/Megatron-LM@d98e8a6 fusions/fused_bias_swiglu.py).
    Without flash attention (eager attention) the fp32 softmax output and its 16-bit copy add
    6*a*s bytes per token (Korthikanti's 5as/h term, without dropout and with the fp32 softmax)
    and k, v are saved after their expansion to every query head (2h each instead of 2hg), as
    they are where the framework copies them before the attention kernel (cfg.expand_kv_heads:
    torchtune, Hugging Face sdpa before native GQA). DoRA adds the base output of each adapted
    matrix (d_out) and LoRA the A-projection output (r) per adapted matrix (with LoRA dropout
    each dropout's output and mask: lora_dropout). Divided by tp (sequence parallel).
    All of it is measured: tools/saved_activations.py sums the tensors autograd saves in a
    Hugging Face Llama layer and in torchtune's (eager and AOT-partitioned, full and LoRA;
    torch 2.14 on CPU), recorded in tests/data/saved_activations.json.
    """
    b = 2
    g = model.num_kv_heads / model.num_attention_heads
    q_dim = model.num_attention_heads * model.head_dim
    trained = _trained_matrices(model, cfg)
    attn = q_dim * (2 + 2 * g) * b
    if _fused_lora(model, cfg):
        total = attn + _fused_lora_saved_bytes(model)
    else:
        total = attn + _norm_saved_bytes(model, cfg, trained) \
            + _mlp_saved_bytes(model, cfg, trained)
    if not cfg.flash_attention:
        total += eager_softmax_bytes_per_token(model, cfg) * cfg.tp
    if cfg.expand_kv_heads or not cfg.flash_attention:
        total += 2 * q_dim * (1 - g) * b
    if cfg.is_peft and not _fused_lora(model, cfg):
        adapted = adapted_linears(model, cfg)
        total += sum(cnt * cfg.rank * b for _, _, cnt in adapted) + dropout_bytes(model, cfg)
        if cfg.method == "dora":
            total += sum(cnt * d_out * b for _, d_out, cnt in adapted)
    return total / cfg.tp


FUSED_LORA_MATRICES = frozenset({"q", "k", "v", "o", "gate", "up", "down"})


def _fused_lora(model: ModelSpec, cfg: TrainConfig) -> bool:
    """The layer runs as fused LoRA kernels (cfg.fused_lora_kernels): a dense gated-MLP layer
    with adapters on all seven matrices, the case in which Unsloth swaps its autograd functions
    in (unslothai/unsloth@015bdef unsloth/models/llama.py FastLlamaModel.patch_peft_model: MLP,
    QKV and O paths when every matrix of the group has a LoRA, without dropout or bias)."""
    if not (cfg.fused_lora_kernels and cfg.is_peft) or cfg.lora_dropout or model.moe \
            or model.activation not in ("swiglu", "geglu") or model.norm != "rmsnorm":
        return False
    return FUSED_LORA_MATRICES.issubset(_trained_matrices(model, cfg) or ())


def _fused_lora_saved_bytes(model: ModelSpec) -> float:
    """What a layer of fused LoRA kernels saves per token besides attention's q, k, v and
    output (unslothai/unsloth@015bdef unsloth/kernels): each fast RMSNorm its 16-bit input and
    fp32 inverse RMS (rms_layernorm.py Fast_RMS_Layernorm: save_for_backward(X, W, r)), LoRA_QKV
    and LoRA_MLP their 16-bit input (the normalised input; fast_lora.py), LoRA_MLP the gate and
    up outputs e and g; LoRA_W (o) saves the attention output, counted with attention. The
    A-projections are recomputed in backward, never saved: 2 x (2h + 4) + 2 x 2h + 2 x 2f."""
    h, f = model.hidden_size, mlp_width(model)
    return 2 * (2 * h + 4) + 2 * 2 * h + 2 * 2 * f


def _trained_matrices(model: ModelSpec, cfg: TrainConfig) -> frozenset[str] | None:
    """Names of the layer matrices whose adapters train (PEFT); None: every weight trains."""
    return _adapted_names(model, tuple(cfg.lora_targets)) if cfg.is_peft else None


def _layer_input_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """One layer's input for one micro-batch (16-bit, or the fp32 residual stream:
    residual_bytes), the tensor full checkpointing keeps."""
    return residual_bytes(model, cfg) * model.hidden_size * tokens_per_gpu(cfg) / cfg.tp


def backward_working_set_bytes_per_token(model: ModelSpec, cfg: TrainConfig) -> float:
    """Activation bytes alive at the peak of one layer's backward, per token: its saved tensors
    (recomputed first under checkpointing) plus the f-wide gradients of the MLP backward, alive
    together: of the product, act(gate) and up output for a gated MLP (3 x 2f bytes), of the
    activation's output and input for a plain one (2 x 2f), less the down projection's input
    (2f), freed once its weight gradient is taken when down trains. Measured exactly by
    tools/saved_activations.py (full, LoRA and LoRA-on-q,v layers; tests/test_memory.py):
    1.25 x the saved tensors for a fully trained Llama-3.2-3B layer, 1.51 x with LoRA on q, v.
    An MoE layer's fp32 routing-score multiply peaks before its experts' backward starts: the
    larger of the two (moe_activations.score_grad_bytes_per_token)."""
    f_bytes = residual_bytes(model, cfg) * mlp_width(model)  # gradients in their tensors' dtype
    grads = 3 if model.activation in ("swiglu", "geglu") else 2
    trained = _trained_matrices(model, cfg)
    down = trained is None or "down" in trained
    extra = (grads - down) * f_bytes / cfg.tp
    if _fused_lora(model, cfg):
        # LoRA_MLP.backward: DW = dY @ down^T (f-wide) is new; the activation's backward
        # writes h, df, de over DW, e, g and dX over X (unsloth/kernels/fast_lora.py)
        extra = f_bytes / cfg.tp
    return layer_activation_bytes_per_token(model, cfg) + max(
        extra, score_grad_bytes_per_token(model, cfg))


def activation_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """Saved activations of the most loaded pipeline stage for the micro-batches in flight.

    none: every layer's saved tensors. selective, core-attention (Megatron): the same without
    eager attention's s^2 softmax term (flash attention never keeps it, so there it equals none).
    full: only each layer's 16-bit input (2h bytes/token, Korthikanti et al. section 4.1) plus
    the working set of recomputing and back-propagating one layer
    (backward_working_set_bytes_per_token); on a share of the layers (cfg.checkpoint_fraction)
    the others keep every saved tensor. selective, op: each layer's input and what the
    policy keeps (op_sac_bytes_per_token) plus the same working set. Pipeline 1F1B keeps
    min(pp, grad_accum) micro-batches in flight on the first stage (Narayanan et al. 2021).
    """
    tokens = tokens_per_gpu(cfg)
    layers = stage_layers(model, cfg)
    in_flight = min(cfg.pp, cfg.grad_accum) if cfg.pp > 1 else 1
    op_sac = cfg.checkpointing == "selective" and cfg.selective_checkpointing == "op"
    if cfg.checkpointing == "full" or op_sac:
        per_layer = _layer_input_bytes(model, cfg)
        if op_sac:
            per_layer += op_sac_bytes_per_token(model, cfg) * tokens
        wrapped = layers * (recomputed_share(cfg) if cfg.checkpointing == "full" else 1.0)
        on_gpu = min(wrapped, OFFLOADED_INPUTS_ON_GPU) if offloads_saved(cfg) else wrapped
        kept = on_gpu * per_layer * in_flight
        rest = (layers - wrapped) * layer_activation_bytes_per_token(model, cfg) * tokens
        return kept + rest * in_flight + backward_working_set_bytes_per_token(model, cfg) * tokens
    saved = layer_activation_bytes_per_token(model, cfg)
    if cfg.checkpointing == "selective" and not cfg.flash_attention:
        saved -= eager_softmax_bytes_per_token(model, cfg)
    if offloads_saved(cfg) and layers > OFFLOADED_INPUTS_ON_GPU:  # one of them back-propagated
        working = backward_working_set_bytes_per_token(model, cfg)
        return ((OFFLOADED_INPUTS_ON_GPU - 1) * saved + working) * tokens * in_flight
    return layers * saved * tokens * in_flight


# Layers whose saved tensors the GPU holds when they are offloaded (offloads_saved): the one
# reloaded for its backward and the next one copied in behind it (unslothai/unsloth-zoo@ce232d6
# unsloth_zoo/gradient_checkpointing.py Unsloth_Offloaded_Gradient_Checkpointer; double-buffered
# reloads: DOUBLE_BUFFER_HEADROOM; pytorch/torchtune@30b8519e8 training/_activation_offloading.py
# OffloadActivations: every saved tensor over 1 KiB, the layers' inputs under full checkpointing,
# all they save without it).
OFFLOADED_INPUTS_ON_GPU = 2


def offloads_saved(cfg: TrainConfig) -> bool:
    """The layers' saved tensors wait in host RAM (Unsloth's and torchtune's offloading)."""
    return (cfg.checkpointing == "full" and (cfg.offload_checkpoints or cfg.offload_activations)
            ) or (cfg.checkpointing == "none" and cfg.offload_activations)


def eager_softmax_bytes_per_token(model: ModelSpec, cfg: TrainConfig) -> float:
    """Eager attention's fp32 softmax output and its 16-bit copy, per token and GPU: 6*a*s
    bytes (Korthikanti's 5as/h term without dropout, with the fp32 softmax), split over tp and
    the sequence over cp."""
    return 6 * model.num_attention_heads * cfg.seq_len / cfg.cp / cfg.tp


def op_sac_bytes_per_token(model: ModelSpec, cfg: TrainConfig) -> float:
    """What op-level selective checkpointing keeps of one layer, per token, besides its input.

    torchtitan's policy (models/llama3/parallelize.py, _apply_ac_to_transformer_block) saves
    the output of every aten.mm except every second one, counted in execution order, and the
    attention kernel's outputs; everything else is recomputed. The matmuls of a layer run in
    the order of params.layer_linears (q, k, v, o, gate, up, down), a PEFT-adapted matrix as
    three (base, A, B: widths d_out, r, d_out); routed experts run as grouped GEMMs outside
    the save list. Kept: the odd-numbered matmul outputs (16-bit) + the attention output
    (heads x v width, 16-bit) and its fp32 log-sum-exp (4 bytes per head). Measured exactly by
    tools/saved_activations.py --op-sac (tests/data/saved_activations_op_sac.json)."""
    adapted = _trained_matrices(model, cfg) if cfg.is_peft else frozenset()
    widths: list[int] = []
    for lin in layer_linears(model, model.num_layers - 1):
        if lin.group == "expert":
            continue
        widths.append(lin.d_out)
        if adapted and lin.name in adapted and lin.group != "router":
            widths += [cfg.rank, lin.d_out]
    heads = model.num_attention_heads
    v_width = model.mla.v_head_dim if model.mla else model.head_dim
    kept = 2 * sum(widths[0::2]) + 2 * heads * v_width + 4 * heads
    return kept / cfg.tp


# ---------------------------------------------------------------------------------------------
# Totals
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryEstimate:
    """Per-GPU peak (bytes) with its named terms, the phase that sets it, and host RAM."""

    terms: dict[str, float]
    phase: str
    allocated: float
    reserved: float
    device: float
    host_ram: float
    capacity: float
    precision: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    phases: dict[str, float] = field(default_factory=dict)  # device-level bytes per phase
    groups: dict[str, str] = field(default_factory=dict)  # phase -> GPUs that run it
    engine_utilization: float | None = None  # RL: engine bytes / capacity (vLLM's u)
    blocked: bool = False  # RL: the engine's fixed pool cannot hold one sequence

    def gib(self, name: str) -> float:
        """The term ``name`` in GiB."""
        return getattr(self, name) / GIB

    def device_terms(self) -> dict[str, float]:
        """The device-level peak by part (bytes; they sum to ``device``): the model's terms,
        the allocator's cache (reserved - allocated) and the CUDA context and NCCL (device -
        reserved)."""
        return {**self.terms, "allocator_cache": self.reserved - self.allocated,
                "cuda_context_and_nccl": self.device - self.reserved}

    def fits(self, margin: float = 0.0) -> bool:
        """Device-level use (reserved + CUDA context + NCCL) within capacity less a margin."""
        return not self.blocked and self.device <= usable_capacity(self.capacity, margin)


def engine_utilization_to_set(cfg: TrainConfig, est: MemoryEstimate | None) -> float | None:
    """The vLLM gpu_memory_utilization an RL launch sets: the config's where given, else the
    engine's share of memory rounded up to a whole percent (never below what it needs); none
    for an engine on the actor's weights, which has no such setting."""
    u = est.engine_utilization if est is not None else None
    if cfg.engine_on_actor_weights:
        return None
    if cfg.gpu_memory_utilization is not None or not cfg.is_rl or u is None:
        return cfg.gpu_memory_utilization
    return math.ceil(u * 100) / 100


FWD_PHASE = "forward/backward"
BWD_END_PHASE = "end of backward"
STEP_PHASE = "optimizer step"


def backward_end_activation_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """Activations alive while the first layer's backward runs, when every other gradient
    already exists: the working set of one layer's backward (its saved tensors, recomputed
    under full checkpointing, and the MLP's gradients) plus, under full checkpointing, that
    layer's kept input. One micro-batch of the first pipeline stage."""
    kept = _layer_input_bytes(model, cfg) if cfg.checkpointing == "full" else 0.0
    return backward_working_set_bytes_per_token(model, cfg) * tokens_per_gpu(cfg) + kept


def forward_activation_bytes(model: ModelSpec, cfg: TrainConfig, loss: float) -> float:
    """The activations of the forward/backward phase next to ``loss`` bytes of loss buffers.

    Where backward recomputes layers (full or op-level selective checkpointing), the loss
    buffers are alive at the end of forward and in the loss backward, the working set of the
    first recomputed layer only after it, next to what of the loss the loop still holds
    (loss_buffers.loss_bytes_held_through_backward: the held fp32 logits, else nothing; a
    token-fused loss, Unsloth's or Liger's linear-fused, frees its chunks before the forward
    returns): the phase holds the kept inputs and the larger of loss and working set + held
    part, i.e. activation_bytes - min(working set, loss - held), ``loss`` added by the caller.
    Measured on transformers' Trainer (validation/project_cases_hfmeasured.yaml: every
    checkpointed row within 1 %, the 16-bit-loss rows at the analytic 6 B per logit). An RL
    actor's update (cfg.loss_alive_with_recompute, set by workloads._base) keeps the loss
    counted with the whole working set, as verl's logged peaks hold it. Without recomputation
    every saved activation is alive with the loss buffers."""
    acts = activation_bytes(model, cfg)
    recomputes = cfg.checkpointing == "full" or (
        cfg.checkpointing == "selective" and cfg.selective_checkpointing == "op")
    if not recomputes:
        return acts
    if cfg.loss_alive_with_recompute and not (cfg.loss_token_chunk_gib or cfg.loss_linear_fused):
        return acts
    working = backward_working_set_bytes_per_token(model, cfg) * tokens_per_gpu(cfg)
    return acts - min(working, max(0.0, loss - loss_bytes_held_through_backward(model, cfg)))


def activation_phase_terms(model: ModelSpec, cfg: TrainConfig) -> dict[str, dict[str, float]]:
    """The activation and loss-buffer terms of each phase of phase_terms (no dp dependence); a
    loop that holds its outputs adds them to the end of backward and the step, and its own
    phases (held_outputs.forward_end_phases)."""
    loss = logits_bytes(model, cfg)
    out = {
        FWD_PHASE: {"activations": forward_activation_bytes(model, cfg, loss),
                    "logits_and_loss": loss},
        BWD_END_PHASE: {"activations": backward_end_activation_bytes(model, cfg)},
        STEP_PHASE: {},
    }
    if cfg.holds_previous_outputs:
        tokens, columns = tokens_per_gpu(cfg), logit_columns(model, cfg)
        held = held_bytes_per_token(model, cfg, columns) * tokens
        out[BWD_END_PHASE]["held_outputs"] = out[STEP_PHASE]["held_outputs"] = held
        out.update(forward_end_phases(model, cfg, activations=activation_bytes(model, cfg),
                                      held=held, tokens=tokens, columns=columns))
    return out


def phase_terms(model: ModelSpec, cfg: TrainConfig, precision: str) -> dict[str, dict[str, float]]:
    """The allocated bytes of each term at the three moments that can set the peak: the start
    of backward (every activation and the loss buffers; gradients only where they persist), the
    end of backward (every gradient, one layer's working set) and the optimizer step. Activations
    shrink and gradients grow layer by layer in between, so the backward peaks at one of its two
    ends; the end binds where gradients do not persist and the step needs no large temporaries
    (fused or pure-bf16 optimizers: torchtune-llama3.2-3b-full-packed-ac). A loop that holds
    its outputs adds the end of the forward before them (activation_phase_terms)."""
    copies = trained_copy_bytes(model, cfg, precision)
    states = {k: v + copies.get(k, 0.0) for k, v in {
        "weights": weight_bytes(model, cfg, precision),
        "adapters": adapter_bytes(model, cfg),
        "master_weights": master_weight_bytes(model, cfg, precision),
        "optimizer_states": optimizer_state_bytes(model, cfg),
        "comm_buffers": comm_buffer_bytes(model, cfg, precision)}.items()}
    grads = gradient_bytes(model, cfg, precision) + copies.get("gradients", 0.0)
    gathered = gathered_bytes(model, cfg, precision)
    # Gradients exist during forward when they accumulate over micro-batches, or when ZeRO-2/3
    # keep their persistent gradient partition buffers. FSDP keeps none: each unit's sharded
    # gradient is allocated by its post-backward hook, and zero_grad(set_to_none=True), torch's
    # default that the loops call after the step, frees it before the next forward (pytorch/
    # pytorch@cf30153c torch/distributed/fsdp/_runtime_utils.py _accumulate_sharded_grad, _flat_
    # param.py FlatParamHandle._reset_flat_param_grad_info_if_needed; huggingface/transformers@
    # 000945a9 src/transformers/trainer.py: model.zero_grad()).
    keeps_grads = cfg.grad_accum > 1 or cfg.zero_stage >= 2
    acts = activation_phase_terms(model, cfg)
    forward = {**states, "gradients": grads if keeps_grads else 0.0, "gathered_params": gathered}
    out = {
        FWD_PHASE: {**forward, **acts[FWD_PHASE]},
        BWD_END_PHASE: {**states, "gradients": grads, "gathered_params": gathered,
                        **acts[BWD_END_PHASE]},
        STEP_PHASE: {**states, "gradients": grads,
                     "optimizer_step": optimizer_step_bytes(model, cfg)
                     + copies.get("optimizer_step", 0.0), **acts[STEP_PHASE]},
    }
    for name in [n for n in acts if n not in out]:  # held_outputs.forward_end_phases
        out[name] = {**forward, **acts[name],
                     **head_transient(name, model, cfg, precision=precision)}
    return out


def reserved_weight(term: str) -> float:
    """Reserved per allocated byte of ``term``: transients leave cache (FRAGMENTATION_FRACTION)."""
    return 1.0 + (cal.FRAGMENTATION_FRACTION if term in TRANSIENT_TERMS else 0.0)


def reserved_bytes(terms: dict[str, float]) -> float:
    """reserved = allocated + FRAGMENTATION_FRACTION x transient + FRAGMENTATION_FLOOR_GIB."""
    return sum(reserved_weight(k) * v for k, v in terms.items()) + cal.FRAGMENTATION_FLOOR_GIB * GIB


def device_overhead_bytes(num_gpus: int) -> float:
    """Memory outside torch's counters: CUDA context and workspaces, NCCL buffers if > 1 GPU."""
    return (cal.CUDA_CONTEXT_GIB + (cal.NCCL_BUFFERS_GIB if num_gpus > 1 else 0.0)) * GIB


def kv_bytes_per_token(model: ModelSpec, kv_bytes: float = 2.0) -> float:
    """KV cache per token, whole model: 2 (K and V) x layers x kv_heads x head_dim x bytes
    (DESIGN.md s.4); MLA caches the compressed latent and the rope key:
    layers x (kv_lora_rank + rope dim) x bytes (DeepSeek-V2 report)."""
    if model.mla is not None:
        return model.num_layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * kv_bytes
    return 2 * model.num_layers * model.num_kv_heads * model.head_dim * kv_bytes
