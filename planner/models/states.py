"""Parameters on one GPU and the model states they hold (pure functions): weights, gradients,
fp32 master weights, optimizer states and their step temporaries, communication buffers and
the ZeRO-3/FSDP gathered working set, in bytes on the most loaded GPU. memory.py sums them
with the activations into phases (ZeRO paper byte counts: see memory.py)."""

from __future__ import annotations

from functools import lru_cache

from planner.catalog.params import (
    Linear,
    count_params,
    is_adapted,
    layer_linears,
    layer_params,
    lora_params,
)
from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models import calibration as cal

# bitsandbytes NF4: 4-bit codes (0.5 B) + double-quantised block constants, 0.127 bit/param
# (Dettmers et al., "QLoRA", 2023, section 3) = 0.5159 B/param.
NF4_BYTES_PER_PARAM = 0.5 + 0.127 / 8
# The same without double quantisation: one fp32 absmax per block of 64 weights (bitsandbytes
# 0.42.0 functional.quantize_4bit: absmax = torch.zeros(blocks, dtype=torch.float32), blocksize
# 64, kept as is when compress_statistics is False) = 0.5625 B/param.
NF4_FP32_ABSMAX_BYTES_PER_PARAM = 0.5 + 4 / 64
# GPTQ int4 (group size 128): 0.5 B codes + one fp16 scale and a packed 4-bit zero per group
# of 128 weights = 0.5 + (2 + 0.5)/128 B/param (Frantar et al., "GPTQ", 2023; AutoGPTQ packing).
GPTQ_BYTES_PER_PARAM = 0.5 + 2.5 / 128


def nf4_bytes_per_param(cfg: TrainConfig) -> float:
    """Bytes of one NF4 weight with its block constants: double-quantised (cfg.nf4_double_quant,
    the QLoRA recipe) or fp32 absmax (LitGPT's bnb.nf4: Lightning's _NF4Linear sets
    compress_statistics=False)."""
    return NF4_BYTES_PER_PARAM if cfg.nf4_double_quant else NF4_FP32_ABSMAX_BYTES_PER_PARAM


def dtype_bytes(precision: str) -> int:
    """Bytes of one weight/activation element in the compute precision (fp8 keeps bf16 copies)."""
    return 4 if precision == "fp32" else 2


# ---------------------------------------------------------------------------------------------
# Parameters on one GPU
# ---------------------------------------------------------------------------------------------
def params_on_gpu(model: ModelSpec, cfg: TrainConfig) -> float:
    """Parameters held by the most loaded model-parallel rank before ZeRO/FSDP sharding.

    Layers are split over pp stages (the largest holds stage_layers of them) and every matrix
    over tp (Megatron-style TP shards attention, MLP, embedding and head). With pp > 1 the first
    stage holds the embedding and the last the head; the larger of the two bounds the most
    loaded stage.

    With expert parallelism (ep > 1) the rank holds 1/ep of each MoE layer's routed experts
    (Megatron-Core: num_local_experts = num_moe_experts / ep; the shared experts, router and
    attention are replicated over the ep group): routed_on_gpu x (1 - 1/ep) fewer.
    """
    c = count_params(model)
    per_stage_layers = c.layers * stage_layers(model, cfg) / model.num_layers
    ends = c.embedding + c.lm_head if cfg.pp == 1 else max(c.embedding, c.lm_head)
    n = (per_stage_layers + ends + c.final_norm) / cfg.tp
    if cfg.ep > 1:
        n -= routed_on_gpu(model, cfg) * (1 - 1 / cfg.ep)
    return n


@lru_cache(maxsize=1024)
def routed_params(model: ModelSpec) -> int:
    """Parameters of every routed expert of every MoE layer (weights and biases); 0 dense."""
    return sum(lin.params for i in range(model.num_layers) for lin in layer_linears(model, i)
               if lin.group == "expert")


def routed_on_gpu(model: ModelSpec, cfg: TrainConfig) -> float:
    """Routed-expert parameters of the most loaded tp x pp shard before expert parallelism."""
    return _routed_shard(model, cfg, routed_params(model))


def _routed_shard(model: ModelSpec, cfg: TrainConfig, n_routed: float) -> float:
    """``n_routed`` (routed-expert parameters of the whole model) in the most loaded tp x pp
    shard: their share of the largest stage's layers (as params_on_gpu takes the layers), / tp
    (Megatron's expert tensor parallel size defaults to tp)."""
    return n_routed * stage_layers(model, cfg) / model.num_layers / cfg.tp


def local_routed(model: ModelSpec, cfg: TrainConfig, n_routed: float) -> float:
    """``n_routed`` as held by one GPU: its tp x pp shard (_routed_shard), then 1/ep of it."""
    return _routed_shard(model, cfg, n_routed) / cfg.ep


def spread(n_local: float, routed_local: float, shards: int, *, ep: int) -> float:
    """What one GPU keeps of ``n_local`` (the rank's unsharded holding, of which
    ``routed_local`` are routed-expert parameters already divided by ep) when ZeRO/FSDP shard
    it over ``shards`` ranks (1: unsharded). Non-expert parameters are sharded over the data x
    context parallel group (shard_group), the routed experts over the expert data parallel
    group of shards / ep ranks that hold the same experts (Megatron-Core's distributed
    optimizer shards expert parameters over the expert data parallel group,
    parallel_state.get_expert_data_parallel_group; torchtitan FSDP-shards the experts over
    dp_shard_in_ep = dp_shard x cp / ep: ParallelDims at pytorch/torchtitan @ 0119de156de5).
    Fully sharded, a GPU thus keeps the same share as without EP; unsharded, 1/ep of the
    experts."""
    if shards == 1 or ep == 1 or not routed_local:
        return n_local / shards
    return (n_local - routed_local) / shards + routed_local * ep / shards


def stage_layers(model: ModelSpec, cfg: TrainConfig) -> int:
    """Layers of the largest pipeline stage: ceil(layers / pp). When pp does not divide the
    layers (Llama-3.1-405B's 126 over 8 stages) some stages hold one layer more (Megatron
    --decoder-first/last-pipeline-num-layers, torch.distributed.pipelining splits), and the
    largest sets the peak."""
    return -(-model.num_layers // cfg.pp)


def mlp_width(model: ModelSpec) -> int:
    """f-wide MLP units a token passes through: ffn_hidden_size, or for MoE the k routed experts'
    and the shared experts' widths."""
    moe = model.moe
    if moe is None:
        return model.ffn_hidden_size
    shared_f = moe.shared_expert_ffn_hidden_size or moe.expert_ffn_hidden_size
    return moe.experts_per_token * moe.expert_ffn_hidden_size + moe.num_shared_experts * shared_f


def adapted_linears(model: ModelSpec, cfg: TrainConfig) -> list[tuple[int, int, int]]:
    """(d_in, d_out, count) of every LoRA-adapted matrix in one layer (layer 0 shape)."""
    return list(_adapted(model, tuple(cfg.lora_targets)))


def adapted_linear_specs(model: ModelSpec, cfg: TrainConfig) -> tuple[Linear, ...]:
    """The LoRA-adapted matrices of one layer (layer 0 shape), as params.Linear."""
    return _adapted_linears(model, tuple(cfg.lora_targets))


@lru_cache(maxsize=1024)
def _adapted_linears(model: ModelSpec, targets: tuple[str, ...]) -> tuple[Linear, ...]:
    return tuple(lin for lin in layer_linears(model, model.num_layers - 1)
                 if is_adapted(lin, targets))


@lru_cache(maxsize=1024)
def _adapted(model: ModelSpec, targets: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
    return tuple((lin.d_in, lin.d_out, lin.count) for lin in _adapted_linears(model, targets))


@lru_cache(maxsize=1024)
def _adapted_names(model: ModelSpec, targets: tuple[str, ...]) -> frozenset[str]:
    return frozenset(lin.name for lin in _adapted_linears(model, targets))


def trainable_params(model: ModelSpec, cfg: TrainConfig) -> float:
    """Trainable parameters of the whole model.

    full: all; freeze: the last k layers (LLaMA-Factory 'freeze' tuning); LoRA/QLoRA:
    r*(d_in+d_out) per adapted matrix (Hu et al., "LoRA", 2021); DoRA adds a magnitude vector of
    d_out per adapted matrix (Liu et al., "DoRA", 2024).
    """
    return _trainable_params(model, cfg.method, cfg.rank, tuple(cfg.lora_targets),
                             cfg.freeze_trainable_layers)


@lru_cache(maxsize=1024)
def _trainable_params(model: ModelSpec, method: str, rank: int, targets: tuple[str, ...],
                      freeze_layers: int) -> float:
    """trainable_params from the fields it reads (memoised: the planner's tables call it for
    every layout of every strategy)."""
    if method == "full":
        return float(count_params(model).total)
    if method == "freeze":
        k = min(freeze_layers, model.num_layers)
        last = range(model.num_layers - k, model.num_layers)
        return float(sum(layer_params(model, i) for i in last))
    n = float(lora_params(model, rank, targets))
    if method == "dora":
        n += model.num_layers * sum(d_out * cnt for _, d_out, cnt in _adapted(model, targets))
    return n


def trainable_on_gpu(model: ModelSpec, cfg: TrainConfig) -> float:
    """Trainable parameters on the most loaded model-parallel rank (before ZeRO sharding): the
    rank's share of the parameters, less the trainable routed experts other ep ranks hold."""
    total = count_params(model).total
    if cfg.ep == 1:
        return trainable_params(model, cfg) * params_on_gpu(model, cfg) / total
    whole = params_on_gpu(model, cfg) + routed_on_gpu(model, cfg) * (1 - 1 / cfg.ep)
    routed = trainable_routed(model, cfg)
    return trainable_params(model, cfg) * whole / total \
        - local_routed(model, cfg, routed) * (cfg.ep - 1)


def trainable_routed(model: ModelSpec, cfg: TrainConfig) -> float:
    """Trainable routed-expert parameters of the whole model: all of them (full), those of
    the last k layers (freeze), the adapters on expert matrices (LoRA-family: r x (d_in +
    d_out) each, DoRA + d_out)."""
    return _trainable_routed(model, cfg.method, cfg.rank, tuple(cfg.lora_targets),
                             cfg.freeze_trainable_layers)


@lru_cache(maxsize=1024)
def _trainable_routed(model: ModelSpec, method: str, rank: int, targets: tuple[str, ...],
                      freeze_layers: int) -> float:
    if model.moe is None:
        return 0.0
    if method == "full":
        return float(routed_params(model))
    first = model.num_layers - min(freeze_layers, model.num_layers) if method == "freeze" else 0
    total = 0.0
    for i in range(first, model.num_layers):
        for lin in layer_linears(model, i):
            if lin.group != "expert":
                continue
            if method == "freeze":
                total += lin.params
            elif is_adapted(lin, targets):
                total += (rank * (lin.d_in + lin.d_out)
                          + (lin.d_out if method == "dora" else 0)) * lin.count
    return total


def trainable_shard(model: ModelSpec, cfg: TrainConfig, shards: int) -> float:
    """Trainable parameters one GPU keeps states of when they are sharded over ``shards``
    ranks (1: unsharded), the routed experts over the expert data parallel group (spread)."""
    n = trainable_on_gpu(model, cfg)
    if cfg.ep == 1:
        return n / shards
    return spread(n, local_routed(model, cfg, trainable_routed(model, cfg)), shards, ep=cfg.ep)


def shard_group(cfg: TrainConfig) -> int:
    """Ranks over which ZeRO/FSDP shard model states: the data-parallel ranks times the context
    parallel ones, which hold the same weights (Megatron-Core's distributed optimizer uses the
    data-parallel group with context parallel; torchtitan shards FSDP over its dp_shard_cp
    mesh; DeepSpeed-Ulysses partitions ZeRO over the sequence-data-parallel group); with hybrid
    sharding (cfg.dp_shard) its shard group's dp_shard x cp ranks."""
    return (cfg.dp_shard or cfg.dp) * cfg.cp


def state_shards(cfg: TrainConfig) -> int:
    """Ranks that share optimizer states (ZeRO >= 1 or FSDP)."""
    return shard_group(cfg) if (cfg.zero_stage >= 1 or cfg.fsdp) else 1


def _grad_shards(cfg: TrainConfig) -> int:
    return shard_group(cfg) if (cfg.zero_stage >= 2 or cfg.fsdp) else 1


def _weight_shards(cfg: TrainConfig) -> int:
    return shard_group(cfg) if cfg.shards_weights else 1


# ---------------------------------------------------------------------------------------------
# Model states
# ---------------------------------------------------------------------------------------------
def _state_bytes(model: ModelSpec, cfg: TrainConfig, per: float, shards: int) -> float:
    """``per`` bytes of each trainable parameter one GPU keeps over ``shards`` ranks
    (trainable_shard; without EP in the arithmetic order the planner always used)."""
    if cfg.ep == 1:
        return trainable_on_gpu(model, cfg) * per / shards
    return trainable_shard(model, cfg, shards) * per


def weight_bytes(model: ModelSpec, cfg: TrainConfig, precision: str) -> float:
    """Stored model weights on one GPU (base weights; adapters are separate).

    16-bit: 2 B/param (4 B in fp32). QLoRA: transformer-layer matrices in NF4 or GPTQ int4 (the
    untied head too where cfg.quantized_head); embeddings, head, norms and biases at
    qlora_unquantized_bytes. ZeRO-3/FSDP divide by dp.
    FSDP without pure bf16 keeps the sharded flat parameters in fp32 for full training (PyTorch FSDP
    MixedPrecision: param_dtype casts only the gathered copy), i.e. 4 B/param / dp; so does
    any method with fp32_trained_weights (verl loads its actor in fp32, LoRA base included).
    Parameter offload moves them to host RAM.
    """
    if cfg.offload == "optimizer+params":
        return 0.0
    n = params_on_gpu(model, cfg)
    routed = local_routed(model, cfg, routed_params(model)) if cfg.ep > 1 else 0.0
    if cfg.method == "qlora":
        linear = quantized_params(model, cfg) - routed * (cfg.ep - 1)
        per = GPTQ_BYTES_PER_PARAM if cfg.quant_format == "gptq" else nf4_bytes_per_param(cfg)
        stored = linear * per + (n - linear) * qlora_unquantized_bytes(cfg)
    else:
        per = 4 if cfg.fsdp and not cfg.pure_16bit and (
            cfg.method == "full" or cfg.fp32_trained_weights) else dtype_bytes(precision)
        stored = n * per
    return spread(stored, routed * per, _weight_shards(cfg), ep=cfg.ep)


def head_quantized(cfg: TrainConfig) -> bool:
    """QLoRA with the LM head stored 4-bit (cfg.quantized_head) on this GPU: the one home of
    that condition (weights, dequantisation, the held inputs and the head's transients); pp 1
    only, one pipeline stage holds the head."""
    return cfg.method == "qlora" and cfg.quantized_head and cfg.pp == 1


def quantized_params(model: ModelSpec, cfg: TrainConfig) -> float:
    """QLoRA: the 4-bit parameters of one GPU's tp x pp shard (before expert parallelism): the
    layers' linears, and the untied head where head_quantized."""
    c = count_params(model)
    head = c.lm_head / cfg.tp if head_quantized(cfg) else 0.0
    return c.layer_linear / (cfg.pp * cfg.tp) + head


def qlora_unquantized_bytes(cfg: TrainConfig) -> int:
    """Bytes per parameter of the parts QLoRA leaves unquantized (embeddings, head, norms):
    PEFT's prepare_model_for_kbit_training (the Hugging Face QLoRA recipe) casts every
    non-quantized 16-bit parameter of a bitsandbytes model to fp32 "for stability": 4 B; 2 B
    where the framework keeps or casts the rest back (cfg.qlora_16bit_rest, e.g. OpenRLHF) or
    no such cast runs (_no_kbit_cast)."""
    return 2 if _no_kbit_cast(cfg) or cfg.qlora_16bit_rest else 4


def _no_kbit_cast(cfg: TrainConfig) -> bool:
    """No fp32 cast of QLoRA's unquantized parts runs: pure 16 bit, GPTQ, sharded QLoRA (FSDP
    flattens its 16-bit quant_storage with the rest; trl v0.13.0 sft_trainer.py l. 182-201)."""
    return cfg.pure_16bit or cfg.fsdp or cfg.quant_format == "gptq"


def qlora_norms_fp32(cfg: TrainConfig) -> bool:
    """QLoRA's norm weights are fp32: as the framework states (cfg.qlora_fp32_norms: TRL before
    0.26, OpenRLHF), else with the rest (PEFT's kbit prep casts both), never by _no_kbit_cast."""
    if cfg.method != "qlora" or _no_kbit_cast(cfg):
        return False
    fp32 = cfg.qlora_fp32_norms
    return qlora_unquantized_bytes(cfg) == 4 if fp32 is None else fp32


def adapter_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """LoRA/DoRA adapter weights: fp32 (PEFT upcasts adapters under mixed precision), 2 B if
    pure bf16; sharded with ZeRO-3/FSDP."""
    if not cfg.is_peft:
        return 0.0
    per = 2 if cfg.pure_16bit else 4
    return _state_bytes(model, cfg, per, _weight_shards(cfg))


def gradient_bytes(model: ModelSpec, cfg: TrainConfig, precision: str) -> float:
    """Gradients of the trainable parameters: same dtype as the trained weights (16-bit for full
    training, fp32 for PEFT adapters and FSDP fp32 flat params); ZeRO-2/3 and FSDP keep only the
    dp shard (ZeRO paper, stage P_os+g). With CPU offload the reduced gradient shards live on the
    host (ZeRO-Offload, FSDP CPUOffload); only buckets stay on the GPU (comm/gathered terms).
    With the optimizer step in backward (torchtune optimizer_in_bwd) each gradient is consumed
    as soon as it is produced: no gradient buffer. FSDP under gradient accumulation with its
    reduce-scatter skipped on all but the last micro-batch (cfg.fsdp_no_sync: the Hugging Face
    Trainer's accelerator.no_sync) holds every gradient unsharded until the step."""
    if cfg.offload != "none" or cfg.optimizer_in_backward:
        return 0.0
    if cfg.is_peft:
        per = 2 if cfg.pure_16bit else 4
    elif cfg.fsdp and not cfg.pure_16bit:
        per = 4
    else:
        per = dtype_bytes(precision)
    unsharded = cfg.fsdp and cfg.fsdp_no_sync and cfg.grad_accum > 1
    return _state_bytes(model, cfg, per, 1 if unsharded else _grad_shards(cfg))


def master_weight_bytes(model: ModelSpec, cfg: TrainConfig, precision: str) -> float:
    """fp32 master copy of 16-bit trained weights: 4 B/param, sharded by ZeRO>=1 (ZeRO paper).

    None for PEFT (adapters are already fp32), pure bf16, fp32 training, FSDP (its fp32 flat
    parameters are the master, counted in weight_bytes), or optimizer offload (on the host).
    """
    if cfg.is_peft or cfg.pure_16bit or precision == "fp32" or cfg.fsdp:
        return 0.0
    if cfg.offload != "none":
        return 0.0
    return _state_bytes(model, cfg, 4, state_shards(cfg))


def optimizer_state_bytes_per_param(model: ModelSpec, cfg: TrainConfig) -> float:
    """Optimizer state bytes per trainable parameter.

    AdamW: momentum + variance in fp32 = 8 B (2 B each if pure bf16). 8-bit AdamW and paged
    8-bit AdamW: 1 B each = 2 B (Dettmers et al., "8-bit Optimizers via Block-wise
    Quantization", 2022). SGD: none; with momentum 4 B. Adafactor (no momentum, factored second
    moment): a row and a column vector per matrix, ~ 4*(d_in+d_out)/(d_in*d_out) ~ 8/h B/param
    (Shazeer & Stern, "Adafactor", 2018).
    """
    half = cfg.pure_16bit
    return {
        "adamw": 4.0 if half else 8.0,
        "adamw-8bit": 2.0,
        "paged-adamw-8bit": 2.0,
        "sgd": 0.0,
        "sgd-momentum": 2.0 if half else 4.0,
        "adafactor": 8.0 / model.hidden_size,
    }[cfg.optimizer]


def optimizer_state_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """Optimizer states on the GPU: per-param bytes x trainable / ZeRO shards.

    0 if offloaded, and 0 for paged optimizers: bitsandbytes allocates paged states in CUDA
    managed memory, which torch's allocator counters do not see and the driver evicts to host
    RAM under memory pressure (Dettmers et al., QLoRA 2023, "paged optimizers"); they are
    counted in host RAM instead.
    """
    if cfg.offload != "none" or cfg.paged:
        return 0.0
    per = optimizer_state_bytes_per_param(model, cfg)
    return _state_bytes(model, cfg, per, state_shards(cfg))


def optimizer_step_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """Temporaries of the optimizer step, per trainable parameter shard.

    DeepSpeed ZeRO-1/2 flattens the 16-bit gradient partition (2 B) and converts it to an fp32
    gradient for the fp32 master partition (4 B) while the 16-bit gradients are still alive
    (stage_1_and_2.py, step()). ZeRO-3 does the same one sub-group at a time
    (stage3.py, _prepare_fp32_grad_for_sub_group, then the sub-group's step, then its fp32
    gradient is freed): the temporaries of at most ZERO3_SUB_GROUP_ELEMENTS elements
    (``steps_by_sub_group``). PyTorch's multi-tensor (foreach) AdamW allocates a full-size
    temporary for sqrt(v) in the state dtype (4 B; 2 B pure bf16); the fused AdamW kernel works
    in place. 8-bit optimizers update block-wise in place; SGD needs no temporary. Offloaded
    optimizers step on the host; an optimizer step in backward updates one parameter at a time.
    """
    per = _step_bytes_per_element(cfg)
    if not per:
        return 0.0
    n = trainable_shard(model, cfg, state_shards(cfg))
    if steps_by_sub_group(cfg):
        n = min(n, cal.ZERO3_SUB_GROUP_ELEMENTS)
    return n * per


def _step_bytes_per_element(cfg: TrainConfig) -> float:
    """Bytes of optimizer-step temporaries per element of the trainable shard (see
    optimizer_step_bytes)."""
    if cfg.offload != "none" or cfg.optimizer_in_backward:
        return 0.0
    if cfg.optimizer in ("sgd", "adamw-8bit", "paged-adamw-8bit"):
        return 0.0
    if cfg.zero_stage >= 1 and not cfg.is_peft:  # DeepSpeed ZeRO (FSDP has no zero_stage)
        return 2 + 4
    if cfg.fused_optimizer:
        return 0.0
    return 2 if cfg.pure_16bit else 4


def steps_by_sub_group(cfg: TrainConfig) -> bool:
    """DeepSpeed ZeRO-3 steps the optimizer one sub-group at a time, so its step temporaries
    stop growing with the shard at ZERO3_SUB_GROUP_ELEMENTS (space.MemoryTables keeps this term
    apart: min(e/dp, k) is not a + b/dp)."""
    return cfg.zero_stage == 3


def comm_buffer_bytes(model: ModelSpec, cfg: TrainConfig, precision: str) -> float:
    """Gradient communication buffers.

    DDP (dp > 1, no ZeRO/FSDP): PyTorch DDP buckets hold a second 16-bit copy of all gradients
    unless gradient_as_bucket_view (HF Trainer leaves it off). DeepSpeed ZeRO-1/2: two reduce
    buckets of ZERO_BUCKET_ELEMENTS 16-bit elements (overlap_comm), capped at the gradients.
    """
    n = trainable_on_gpu(model, cfg)
    b = dtype_bytes(precision)
    if shard_group(cfg) > 1 and cfg.zero_stage == 0 and not cfg.fsdp:
        return n * b
    if cfg.zero_stage in (1, 2):
        return min(2 * cal.ZERO_BUCKET_ELEMENTS, n) * b
    return 0.0


def gathered_bytes(model: ModelSpec, cfg: TrainConfig, precision: str, *,
                   backward: bool = True) -> float:
    """ZeRO-3/FSDP working set of gathered (unsharded) parameters and one unit's gradient.

    Layers are gathered as stored (4-bit for QLoRA), the layer in use plus one prefetched
    (GATHERED_UNITS). PyTorch FSDP with transformer-layer auto-wrap leaves embedding and head in
    the root unit, which stays gathered from forward to backward: + (embedding + head). Where
    they are units of their own (DeepSpeed ZeRO-3 gathers per module; torchtune's
    custom_sharded_layers), the peak at the loss holds the head plus one prefetched layer.
    A trainable layer's unsharded 16-bit gradient lives until its reduce-scatter (not in a
    forward-only pass, ``backward=False``).
    """
    if not cfg.shards_weights or shard_group(cfg) == 1:
        return 0.0
    c = count_params(model)
    b16 = qlora_unquantized_bytes(cfg) if cfg.method == "qlora" else dtype_bytes(precision)
    per = nf4_bytes_per_param(cfg) if cfg.method == "qlora" else dtype_bytes(precision)
    largest = c.largest_layer - _routed_per_layer(model) * (1 - 1 / cfg.ep)
    layer = largest / cfg.tp * per
    head = (c.lm_head or c.embedding) / cfg.tp * b16
    if cfg.fsdp and not cfg.shard_embeddings:
        params = (c.embedding + c.lm_head) / cfg.tp * b16 + cal.GATHERED_UNITS * layer
    else:
        params = max(cal.GATHERED_UNITS * layer, head + layer)
    trains_layers = backward and cfg.method in ("full", "freeze")
    grads = largest / cfg.tp * dtype_bytes(precision) if trains_layers else 0.0
    return params + grads


def _routed_per_layer(model: ModelSpec) -> float:
    """Routed-expert parameters of one MoE layer (expert parallelism gathers only the
    rank's 1/ep of them); 0 for a dense model."""
    if model.moe is None:
        return 0.0
    return routed_params(model) / (model.num_layers - model.moe.first_dense_layers)
