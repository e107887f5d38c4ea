"""Megatron-Core settings shared by the NeMo 2 (``nemo``) and Megatron-Bridge
(``megatron-bridge``) launches: both build a Megatron-Core GPT model (TransformerConfig), its
DistributedDataParallel and its OptimizerConfig, and differ only in where a field sits (NeMo 2:
``model.config.*``, ``trainer.strategy.*``, ``optim.config.*``; Megatron-Bridge:
``model.*``, ``optimizer.*``) and how the launch is started.

Field names and rules read from Megatron-Core 0.17.1 (github.com/NVIDIA/Megatron-LM/blob/
core_v0.17.1/): megatron/core/optimizer/optimizer_config.py (optimizer 'adam' | 'sgd',
sgd_momentum, use_distributed_optimizer, optimizer_cpu_offload, optimizer_offload_fraction,
use_precision_aware_optimizer, clip_grad), megatron/core/transformer/transformer_config.py
(recompute_granularity 'full' | 'selective', recompute_method 'uniform' | 'block',
recompute_num_layers) and megatron/training/arguments.py validate_args (optimizer CPU offload
must be used with the precision-aware optimizer, which asserts adam and the distributed
optimizer). LoRA module names: Megatron-Core's fused linear_qkv (q, k, v), linear_proj (o),
linear_fc1 (gate and up) and linear_fc2 (down), the targets of NeMo 2's LoRA
(NVIDIA/NeMo@v2.4.0 nemo/collections/llm/peft/lora.py) and Megatron-Bridge's
(NVIDIA-NeMo/Megatron-Bridge@v0.6.0 src/megatron/bridge/peft/lora.py).
"""

from __future__ import annotations

from typing import Any

from planner.outputs.export._common import GRADIENT_CLIPPING, Job, _Out, _precision_note


def expert_parallel(job: Any) -> dict[str, int]:
    """Megatron-Core's expert parallel fields of an MoE plan (Job.writes_ep; none otherwise):
    ModelParallelConfig.expert_model_parallel_size and expert_tensor_parallel_size, set to tp
    as the planner splits the experts (core_v0.17.1 model_parallel_config.py: None becomes tp,
    but Megatron-Bridge's MoE recipes set 1, e.g. recipes/qwen/h100/qwen3_moe.py at v0.6.0);
    NeMo 2's MegatronStrategy takes both (NVIDIA/NeMo@v2.4.0 megatron_strategy.py)."""
    if not job.writes_ep:
        return {}
    return {"expert_model_parallel_size": job.cfg.ep, "expert_tensor_parallel_size": job.cfg.tp}


# Megatron-Core module of each planner LoRA target (q, k, v share one fused projection; so do a
# gated MLP's gate and up).
MCORE_MODULES = {"q": "linear_qkv", "k": "linear_qkv", "v": "linear_qkv", "o": "linear_proj",
                 "gate": "linear_fc1", "up": "linear_fc1", "down": "linear_fc2"}
ALL_LINEAR = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
# The planner's fused groups: a target list covering part of one adapts the whole projection.
_FUSED = {"linear_qkv": {"q", "k", "v"}, "linear_fc1": {"gate", "up"}}
# Recipe stems shared by NeMo 2.4.0 (nemo/collections/llm/recipes/<stem>.py) and
# Megatron-Bridge 0.6.0 (src/megatron/bridge/recipes/*: <stem>_{pretrain,sft,peft}_config),
# by planner catalog id.
RECIPE_STEMS = {
    "llama-2-7b": "llama2_7b", "llama-3-8b": "llama3_8b", "llama-3-70b": "llama3_70b",
    "llama-3.1-8b": "llama31_8b", "llama-3.1-70b": "llama31_70b",
    "llama-3.1-405b": "llama31_405b", "llama-3.2-1b": "llama32_1b",
    "llama-3.2-3b": "llama32_3b", "gemma-2-9b": "gemma2_9b", "qwen2-7b": "qwen2_7b",
    "qwen2-72b": "qwen2_72b", "qwen2.5-0.5b": "qwen25_500m", "qwen2.5-1.5b": "qwen25_1p5b",
    "qwen2.5-7b": "qwen25_7b", "qwen2.5-14b": "qwen25_14b", "qwen2.5-32b": "qwen25_32b",
    "qwen2.5-72b": "qwen25_72b", "qwen3-0.6b": "qwen3_600m", "qwen3-4b": "qwen3_4b",
    "qwen3-8b": "qwen3_8b", "qwen3-32b": "qwen3_32b", "qwen3-30b-a3b": "qwen3_30b_a3b",
    "qwen3-235b-a22b": "qwen3_235b_a22b", "deepseek-v3": "deepseek_v3",
}


def recipe_stem(job: Job, out: _Out, stems: dict[str, str], *, where: str) -> str:
    """The framework's recipe stem of the job's model; a model without one is refused."""
    stem = stems.get(job.model)
    if stem is None:
        out.refuse(f"model {job.model} ({where} ships no recipe for it)",
                   "use --format torchrun (Megatron-LM arguments) or a model with a recipe: "
                   + ", ".join(sorted(stems)))
    return stem


def check_mcore(job: Job, out: _Out, *, methods: tuple[str, ...]) -> None:
    """Refuse what a Megatron-Core recipe cannot run: workloads other than pretraining and SFT,
    methods outside ``methods``, ZeRO-2/3 or FSDP, optimizers Megatron-Core does not build (or
    offload with one other than Adam), and fp32 training (the recipes train with 16-bit mixed
    precision)."""
    cfg = job.cfg
    if cfg.workload not in ("pretrain", "sft"):
        out.refuse(f"workload {cfg.workload} (the recipe launches pretraining and SFT only)",
                   "use --format torchrun, verl or openrlhf")
    if cfg.method not in methods:
        out.refuse(f"method {cfg.method} (its recipes train {', '.join(methods)})",
                   "re-plan with --method " + " or ".join(methods))
    if cfg.fsdp or cfg.zero_stage > 1:
        out.refuse(f"{'FSDP' if cfg.fsdp else f'ZeRO-{cfg.zero_stage}'} (Megatron-Core's "
                   "distributed optimizer shards optimizer states only)",
                   "re-plan with --sharding zero1 or none")
    if cfg.optimizer not in ("adamw", "sgd", "sgd-momentum") or cfg.paged_optimizer:
        out.refuse(f"optimizer {cfg.optimizer}{' (paged)' if cfg.paged_optimizer else ''} "
                   "(Megatron-Core builds adam or sgd)", "re-plan with --optimizer adamw")
    # offload passed the config checks: optimizer states only, on ZeRO-1 (the distributed
    # optimizer) after the refusals above
    if cfg.offload != "none" and cfg.optimizer != "adamw":
        out.refuse(f"optimizer offload with {cfg.optimizer} (Megatron-Core's "
                   "optimizer_cpu_offload needs use_precision_aware_optimizer, which asserts "
                   "adam)", "re-plan with --optimizer adamw, or --offload none")
    if job.precision == "fp32":
        out.refuse("fp32 training (the recipes train in bf16 or fp16 mixed precision)",
                   "re-plan with --precision bf16")


def lora_modules(job: Job, out: _Out) -> list[str]:
    """Megatron-Core module names of the plan's LoRA targets, in Megatron's order; a target
    set covering part of a fused projection is warned about (the whole projection is adapted)."""
    targets = set(job.cfg.lora_targets)
    if "all-linear" in targets:
        return list(ALL_LINEAR)
    modules = [m for m in ALL_LINEAR if any(MCORE_MODULES[t] == m for t in targets)]
    for module, parts in _FUSED.items():
        if module in modules and not parts <= targets:
            out.warn(f"LoRA on {', '.join(sorted(parts & targets))} adapts Megatron's fused "
                     f"{module} ({', '.join(sorted(parts))}): more adapter parameters than "
                     "planned")
    return modules


def recompute(job: Job, out: _Out) -> dict[str, Any]:
    """TransformerConfig recompute fields of the plan's checkpointing."""
    cfg = job.cfg
    if cfg.checkpointing == "none":
        return {"recompute_granularity": None}
    if cfg.checkpointing == "selective":
        if cfg.selective_checkpointing == "op":
            out.warn("op-level selective checkpointing has no Megatron switch: Megatron's "
                     "selective recomputation (the attention core) set: more activation "
                     "memory than planned")
        return {"recompute_granularity": "selective"}
    return {"recompute_granularity": "full", "recompute_method": "uniform",
            "recompute_num_layers": 1}


def optimizer_fields(job: Job) -> dict[str, Any]:
    """OptimizerConfig fields of the plan's optimizer, sharding and offload."""
    cfg = job.cfg
    fields: dict[str, Any] = {
        "optimizer": "adam" if cfg.optimizer == "adamw" else "sgd",
        "use_distributed_optimizer": cfg.zero_stage == 1,
        "clip_grad": GRADIENT_CLIPPING,
    }
    if cfg.optimizer == "sgd":
        fields["sgd_momentum"] = 0.0
    if cfg.offload == "optimizer":
        fields.update({"optimizer_cpu_offload": True, "optimizer_offload_fraction": 1.0,
                       "use_precision_aware_optimizer": True})
    return fields


def kernel_notes(job: Job, out: _Out) -> None:
    """What the plan's framework semantics set that a Megatron-Core recipe decides itself."""
    cfg = job.cfg
    _precision_note(job, out)
    if cfg.pure_16bit:
        out.warn("pure bf16 has no recipe switch: Megatron-Core keeps fp32 main weights and "
                 "optimizer states in the (distributed) optimizer: more memory than planned")
    if not cfg.flash_attention:
        out.warn("the plan assumed attention without flash kernels: Megatron-Core uses "
                 "Transformer Engine's fused attention (less memory than planned)")
    if cfg.compiled or cfg.chunked_loss:
        out.note("torch.compile and chunked loss are not recipe settings: no effect here "
                 "(Megatron-Core fuses its own kernels)")
    if cfg.optimizer == "sgd-momentum":
        out.note("sgd-momentum: Megatron's sgd with sgd_momentum 0.9 (its default)")
    out.note("the optimizer's learning rate is a placeholder (the recipe's own schedule): set "
             "it for your run")


def batch_comment(job: Job) -> str:
    """The header line stating how the global batch is made."""
    c = job.cfg
    return (f"# micro-batch {c.micro_batch_size} x accumulation {c.grad_accum} x dp {c.dp} = "
            f"global batch {c.global_batch_size} (Megatron derives the accumulation), "
            f"seq_len {c.seq_len}")
