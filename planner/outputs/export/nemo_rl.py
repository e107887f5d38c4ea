"""NeMo-RL (``export_nemo_rl``): a YAML config that inherits the shipped recipe of the workload
(``defaults: sft.yaml``, ``dpo.yaml`` or ``grpo_math_1B.yaml``, resolved next to the file) and sets
what the plan decides, launched with ``uv run python examples/run_<workload>.py --config FILE``.

Read at NVIDIA-NeMo/RL@7ea279abfbeb698b092856d0dab61e7cf39bc909 (2026-08-22, after v0.7.0):
examples/configs/sft.yaml, dpo.yaml, grpo_math_1B.yaml (the ``policy``, ``policy.dtensor_cfg``,
``policy.dtensor_cfg.lora_cfg``, ``policy.megatron_cfg``, ``policy.generation.vllm_cfg``,
``policy.generation.colocated``, ``grpo`` and ``cluster`` keys written here) and
nemo_rl/utils/config.py ``load_config_with_inheritance`` (a ``defaults`` key names the parent
file, relative to the file's own folder). examples/run_grpo.py is the GRPO entry point at that
commit (run_grpo_math.py in older releases).

Semantics followed: ``train_global_batch_size`` counts sequences per optimizer step and
``train_micro_batch_size`` sequences per GPU micro-step (accumulation is their quotient over the
data-parallel ranks; in DPO both count chosen/rejected pairs, as the plan's do); the DTensor
path (FSDP2) shards parameters, gradients and optimizer states with tp and cp in
``dtensor_cfg``; pipeline parallelism needs the Megatron path (``megatron_cfg``); GRPO's step
is ``num_prompts_per_step`` x ``num_generations_per_prompt``.
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.catalog.request import rollout_gpu_count
from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    ExportResult,
    Job,
    _checkpointing_warning,
    _lora_targets,
    _Out,
    _precision_note,
)

NEMO_RL_VERSIONS = ("NeMo-RL at NVIDIA-NeMo/RL@7ea279a (after v0.7.0; keys checked against "
                    "examples/configs/*.yaml at that commit)")
NEMO_RL_RECIPES = {"sft": ("sft.yaml", "run_sft.py"), "dpo": ("dpo.yaml", "run_dpo.py"),
                   "grpo": ("grpo_math_1B.yaml", "run_grpo.py")}
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16"}


def export_nemo_rl(job: Job, out: _Out) -> ExportResult:
    """The NeMo-RL YAML of the job (SFT, DPO or GRPO); refuses what NeMo-RL cannot run."""
    cfg = job.cfg
    _nemo_rl_refusals(job, out)
    recipe, script = NEMO_RL_RECIPES[cfg.workload]
    policy = _nemo_rl_policy(job, out)
    doc: dict[str, Any] = {"defaults": recipe, "policy": policy}
    if cfg.workload == "grpo":
        doc["grpo"] = {"num_prompts_per_step": cfg.rollout_batch,
                       "num_generations_per_prompt": cfg.samples_per_prompt}
        doc["loss_fn"] = {"reference_policy_kl_penalty": 0.01 if cfg.reference else 0.0}
        policy["generation"] = _nemo_rl_generation(job, out)
    if cfg.workload == "dpo" and not cfg.reference:
        out.refuse("reference-free DPO (NeMo-RL's DPO loss always reads the reference policy)",
                   "re-plan with a reference, or use --format llamafactory")
    if cfg.workload == "dpo" and cfg.precompute_ref:
        out.warn("NeMo-RL has no precomputed reference log-probs: the reference forward runs "
                 "every step, slower than planned")
    doc["cluster"] = {"gpus_per_node": job.per_node, "num_nodes": job.num_hosts}
    _nemo_rl_notes(job, out, recipe, script)
    header = [*out.title(job),
              f"# Place this file in examples/configs/ (it inherits {recipe}) and run:",
              f"#   uv run python examples/{script} --config examples/configs/<this file>"]
    text = "\n".join(header) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    return out.result(text, f"nemo_rl_{cfg.workload}.yaml")


def _nemo_rl_refusals(job: Job, out: _Out) -> None:
    cfg = job.cfg
    if cfg.workload not in NEMO_RL_RECIPES:
        out.refuse(f"{cfg.workload} (NeMo-RL's examples run SFT, DPO and GRPO here)",
                   "use --format verl or openrlhf for PPO, torchrun for pretraining")
    if cfg.method not in ("full", "lora"):
        out.refuse(f"method {cfg.method} (NeMo-RL trains full or LoRA: no DoRA, QLoRA or "
                   "layer freezing)", "re-plan with --method full or lora")
    if cfg.optimizer != "adamw":
        out.refuse(f"optimizer {cfg.optimizer} (the recipes' AdamW kwargs - betas, eps - are "
                   "inherited by any policy.optimizer class; the Megatron path runs Adam)",
                   "re-plan with --optimizer adamw")
    if not cfg.fsdp and cfg.dp > 1 and cfg.pp == 1:
        out.warn(f"ZeRO stage {cfg.zero_stage} expressed as FSDP2 (dtensor_cfg shards "
                 "parameters, gradients and optimizer states): less memory than planned")
    if cfg.offload == "optimizer" and cfg.pp == 1:
        out.warn("dtensor_cfg.cpu_offload moves parameters and gradients too (no optimizer-only "
                 "offload on the DTensor path): less GPU memory, slower than planned")


def _nemo_rl_policy(job: Job, out: _Out) -> dict[str, Any]:
    """policy: model, batch, sequence length, precision, backend and optimizer."""
    cfg = job.cfg
    policy: dict[str, Any] = {
        "model_name": job.model_path,
        "train_global_batch_size": cfg.global_batch_size,
        "train_micro_batch_size": cfg.micro_batch_size,
        "max_total_sequence_length": cfg.seq_len,  # RL: prompt + response
        "precision": _DTYPES[job.precision],
        "max_grad_norm": GRADIENT_CLIPPING,
    }
    if cfg.is_rl:
        policy["logprob_batch_size"] = cfg.logprob_batch
    if cfg.mean_seq_len is not None:
        policy["sequence_packing"] = {"enabled": True}
    checkpointing = cfg.checkpointing != "none"
    if cfg.pp > 1:
        policy["dtensor_cfg"] = {"enabled": False}
        policy["megatron_cfg"] = _nemo_rl_megatron(job, out, checkpointing)
    else:
        _checkpointing_warning(job, out, "dtensor_cfg.activation_checkpointing")
        policy["dtensor_cfg"] = _nemo_rl_dtensor(job, checkpointing)
        policy["optimizer"] = {"name": "torch.optim.AdamW", "kwargs": {"lr": 5.0e-6}}
        if cfg.fused_optimizer:
            out.warn("fused AdamW is off on the DTensor path (the recipes set fused and foreach "
                     "False for DTensor): slower steps than planned")
    return policy


def _nemo_rl_dtensor(job: Job, checkpointing: bool) -> dict[str, Any]:
    cfg = job.cfg
    d: dict[str, Any] = {"enabled": True, "cpu_offload": cfg.offload != "none",
                         "activation_checkpointing": checkpointing,
                         "tensor_parallel_size": cfg.tp, "context_parallel_size": cfg.cp,
                         "sequence_parallel": False}
    if cfg.is_peft:
        targets = _lora_targets(cfg)
        d["lora_cfg"] = {"enabled": True, "dim": cfg.rank, "alpha": cfg.lora_alpha,
                         "match_all_linear": targets is None, "target_modules": targets or [],
                         "use_triton": cfg.tp == 1}
    return d


def _nemo_rl_megatron(job: Job, out: _Out, checkpointing: bool) -> dict[str, Any]:
    """megatron_cfg (pipeline-parallel plans): parallel sizes, recompute, Adam with the
    distributed optimizer (ZeRO-1 sharding of its states), CPU offload of the optimizer."""
    cfg = job.cfg
    if cfg.offload == "optimizer+params":
        out.refuse("parameter offload on the Megatron path (megatron_cfg offloads the "
                   "optimizer only)", "re-plan with --offload optimizer or --pp 1")
    return {"enabled": True, "tensor_model_parallel_size": cfg.tp,
            "pipeline_model_parallel_size": cfg.pp, "context_parallel_size": cfg.cp,
            "activation_checkpointing": checkpointing,
            "recompute_granularity": "selective" if cfg.checkpointing == "selective" else "full",
            "sequence_parallel": False,
            "optimizer": {"optimizer": "adam", "lr": 5.0e-6,
                          "bf16": job.precision in ("bf16", "fp8"),
                          "fp16": job.precision == "fp16",
                          "optimizer_cpu_offload": cfg.offload != "none",
                          "optimizer_offload_fraction": 1.0 if cfg.offload != "none" else 0.0,
                          "use_distributed_optimizer": cfg.zero_stage >= 1 or cfg.fsdp},
            "fp8_cfg": {"enabled": job.precision == "fp8"},
            **({"peft": _megatron_peft(job, out)} if cfg.is_peft else {})}


# Megatron-Core's fused linear layers holding the planner's LoRA targets (HF names): the
# module names Megatron-Bridge's LoRA matches (nemo_rl/models/megatron/setup.py at 7ea279a
# builds megatron.bridge.peft.lora.LoRA from megatron_cfg.peft).
_MEGATRON_LINEAR = {"q": "linear_qkv", "k": "linear_qkv", "v": "linear_qkv", "o": "linear_proj",
                    "gate": "linear_fc1", "up": "linear_fc1", "down": "linear_fc2"}


def _megatron_peft(job: Job, out: _Out) -> dict[str, Any]:
    """megatron_cfg.peft: LoRA on Megatron-Core's fused linear layers (q/k/v share linear_qkv,
    gate/up share linear_fc1)."""
    cfg = job.cfg
    names = list(dict.fromkeys(_MEGATRON_LINEAR.values())) if "all-linear" in cfg.lora_targets \
        else list(dict.fromkeys(_MEGATRON_LINEAR[t] for t in cfg.lora_targets))
    covered = {t for t, n in _MEGATRON_LINEAR.items() if n in names}
    extra = sorted(covered - set(cfg.lora_targets))
    if "all-linear" not in cfg.lora_targets and extra:
        out.warn(f"LoRA targets {', '.join(cfg.lora_targets)} on Megatron-Core's fused layers "
                 f"({', '.join(names)}) also adapt {', '.join(extra)}: more adapter memory "
                 "than planned")
    return {"enabled": True, "dim": cfg.rank, "alpha": cfg.lora_alpha, "target_modules": names}


def _nemo_rl_generation(job: Job, out: _Out) -> dict[str, Any]:
    """policy.generation: vLLM's TP, memory fraction and placement."""
    cfg = job.cfg
    if cfg.rollout_engine != "vllm":
        out.refuse(f"rollout engine {cfg.rollout_engine} (this export writes NeMo-RL's vLLM "
                   "backend)", "re-plan with --rollout-engine vllm")
    if cfg.placement == "split":
        out.refuse("split placement (NeMo-RL colocates generation or gives it whole GPUs of its "
                   "own)", "re-plan with --placement colocate or separate")
    vllm: dict[str, Any] = {"tensor_parallel_size": cfg.rollout_tp,
                            "enforce_eager": cfg.rollout_eager}
    if job.engine_utilization is not None:
        vllm["gpu_memory_utilization"] = job.engine_utilization
    else:
        out.warn("the plan has no engine memory fraction: the recipe's "
                 "gpu_memory_utilization (0.6) is left in place")
    gen: dict[str, Any] = {"backend": "vllm", "max_new_tokens": cfg.response_len,
                           "vllm_cfg": vllm, "colocated": {"enabled": True}}
    if cfg.placement == "separate":
        gen["colocated"] = {"enabled": False, "resources": _generation_resources(job, out)}
    return gen


def _generation_resources(job: Job, out: _Out) -> dict[str, Any]:
    """colocated.resources of dedicated generation GPUs: a GPU count on one node, whole nodes
    on several (NeMo-RL reads gpus_per_node only when the cluster has one node)."""
    rollout = rollout_gpu_count(job.cfg)
    if job.num_hosts == 1:
        return {"gpus_per_node": rollout, "num_nodes": None}
    if rollout % job.per_node:
        out.refuse(f"{rollout} generation GPUs on {job.per_node}-GPU nodes (on several nodes "
                   "NeMo-RL gives generation whole nodes)",
                   f"re-plan with --rollout-gpus a multiple of {job.per_node}")
    return {"gpus_per_node": None, "num_nodes": rollout // job.per_node}


def _nemo_rl_notes(job: Job, out: _Out, recipe: str, script: str) -> None:
    """What the YAML cannot say: the precision the GPU forces, settings with no key."""
    cfg = job.cfg
    _precision_note(job, out)
    if job.precision == "fp8" and cfg.pp == 1:
        out.warn("fp8 training needs the Megatron path (megatron_cfg.fp8_cfg): bf16 set on "
                 "the DTensor path, slower than planned")
    if cfg.compiled or cfg.paged_optimizer or cfg.chunked_loss:
        out.warn("torch.compile / paged optimizer / chunked loss have no NeMo-RL key: left out")
    if not cfg.flash_attention:
        out.note("attention: NeMo-RL picks the model's attention kernel (no eager switch)")
    if cfg.offload_idle is False and cfg.is_rl and cfg.placement == "colocate":
        out.warn("colocated generation always offloads the optimizer before refit in NeMo-RL "
                 "(the plan kept it resident): less GPU memory, slower than planned")
    out.note(f"inherits examples/configs/{recipe} (data, checkpointing, loss defaults); "
             f"learning rate 5e-6 is a placeholder; run with uv run python examples/{script}")
