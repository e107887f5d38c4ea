"""prime-rl (``export_prime_rl``): one TOML config for ``uv run sft @ sft.toml`` (SFT) or
``uv run rl @ rl.toml`` (GRPO: the ``[trainer]``, ``[orchestrator]`` and ``[inference]`` sections
of one file, which the ``rl`` entry point starts as three processes on disjoint GPUs).

Read at PrimeIntellect-ai/prime-rl@559b44772e471d1538537b8805cc77f3824a5e64 (2026-08-21,
prime-rl 0.8.0, prime-rl-configs 0.4.0): packages/prime-rl-configs/src/prime_rl/configs/
sft.py (SFTConfig: ``model``, ``data.batch_size`` global, ``data.micro_batch_size``,
``data.seq_len``, ``optim``, ``deployment`` single_node / multi_node with ``slurm``), rl.py
(RLConfig: shared ``model``, ``seq_len``, ``deployment.num_train_gpus`` / ``num_infer_gpus``),
trainer.py (ModelConfig: ``ac`` with mode full/selective, ``compile``, ``ac_offloading``,
``optim_cpu_offload`` on by default, ``fsdp_cpu_offload``, ``cp``, ``optimization_dtype``,
``reduce_dtype``, ``attn`` flash_attention_2/3/4/auto only, ``lora``: rank, alpha,
target_modules; optimizers adamw, sgd, muon, sign_sgd), orchestrator.py (``batch_size``:
samples per step, ``group_size``: samples per prompt, ``train.sampling.max_completion_tokens``)
and inference.py (``vllm.tensor_parallel_size``, ``data_parallel_size``,
``gpu_memory_utilization``, ``enforce_eager``); configs/basic/reverse-text/{sft,rl}.toml for the
layout. A table set to the string "None" turns an optional section off (configs/debug/fake/
sft.toml: ``compile = "None"``).

Semantics followed: every trainer is FSDP2 (fully_shard on any GPU count), bf16 compute with
fp32 master weights unless optimization_dtype is bfloat16; no tensor or pipeline parallelism;
the RL trainer packs samples into seq_len-token micro-batches and takes one optimizer step per
orchestrator batch.
"""

from __future__ import annotations

from typing import Any

from planner.catalog.request import rollout_gpu_count
from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    HF_MODULES,
    ExportResult,
    Job,
    _checkpointing_warning,
    _lora_targets,
    _Out,
    _precision_note,
    _toml_value,
)

PRIME_RL_VERSIONS = ("prime-rl 0.8.0 (prime-rl-configs 0.4.0 at PrimeIntellect-ai/prime-rl@"
                     "559b447; keys checked against its pydantic config classes)")
_OFF = "None"  # prime-rl's TOML spelling of an optional section left out


def export_prime_rl(job: Job, out: _Out) -> ExportResult:
    """The prime-rl TOML of the job (SFT or GRPO); refuses what prime-rl cannot run."""
    cfg = job.cfg
    _prime_rl_refusals(job, out)
    model = _prime_rl_model(job, out)
    optim = _prime_rl_optim(job, out)
    if cfg.workload == "sft":
        doc = _prime_rl_sft(job, out, model, optim)
        entry = "sft"
    else:
        doc = _prime_rl_grpo(job, out, model, optim)
        entry = "rl"
    _precision_note(job, out)
    out.note("learning rate 1e-6 is a placeholder; data set / environment, checkpointing and "
             "monitors are left to the user")
    header = [*out.title(job), f"# Run: uv run {entry} @ {entry}.toml"]
    return out.result("\n".join(header) + "\n\n" + _toml(doc), f"{entry}.toml")


def _prime_rl_refusals(job: Job, out: _Out) -> None:
    cfg = job.cfg
    if cfg.workload not in ("sft", "grpo"):
        out.refuse(f"{cfg.workload} (prime-rl's entry points are sft and rl: SFT and GRPO)",
                   "use --format verl or openrlhf for PPO, llamafactory for DPO/RM")
    if cfg.tp > 1 or cfg.pp > 1:
        out.refuse(f"tensor/pipeline parallel training (tp {cfg.tp}, pp {cfg.pp}: prime-rl "
                   "shards with FSDP2 and splits sequences with cp only)", "re-plan with "
                   "--tp 1 --pp 1")
    if cfg.method not in ("full", "lora"):
        out.refuse(f"method {cfg.method} (prime-rl trains full or LoRA)",
                   "re-plan with --method full or lora")
    if cfg.optimizer not in ("adamw", "sgd", "sgd-momentum"):
        out.refuse(f"optimizer {cfg.optimizer} (prime-rl offers adamw, sgd, muon, sign_sgd)",
                   "re-plan with --optimizer adamw")
    if job.precision in ("fp16", "fp32"):
        out.refuse(f"{job.precision} training on {job.gpu} (prime-rl computes in bf16)",
                   "re-plan on a GPU with bf16")
    if job.precision == "fp8":
        out.warn("fp8 matmuls: prime-rl's fp8 path is for MoE grouped GEMMs; bf16 set, "
                 "slower than planned")
    if not cfg.fsdp and cfg.zero_stage < 3 and job.num_gpus > 1:
        out.warn(f"ZeRO stage {cfg.zero_stage} / unsharded weights expressed as FSDP2 (prime-rl "
                 "shards everything): less memory than planned")


def _prime_rl_model(job: Job, out: _Out) -> dict[str, Any]:
    """The trainer's ModelConfig: checkpointing, compile, offload, cp, dtypes, LoRA."""
    cfg = job.cfg
    _checkpointing_warning(job, out, "ac mode full")
    model: dict[str, Any] = {
        "ac": _OFF if cfg.checkpointing == "none" else {"mode": "full"},
        "ac_offloading": _OFF,
        "compile": {} if cfg.compiled else _OFF,
        "optim_cpu_offload": cfg.offload == "optimizer",
        "fsdp_cpu_offload": cfg.offload == "optimizer+params",
        "cp": cfg.cp,
        # ModelConfig.ep (packages/prime-rl-configs .../trainer.py at 559b447; default "auto")
        **({"ep": cfg.ep} if job.writes_ep else {}),
        "optimization_dtype": "bfloat16" if cfg.pure_16bit else "float32",
        "reduce_dtype": "bfloat16" if cfg.pure_16bit else "float32",
    }
    if not cfg.flash_attention:
        out.warn("prime-rl has no eager/SDPA attention switch: flash attention runs (less "
                 "memory than planned)")
    if cfg.is_peft:
        targets = _lora_targets(cfg) or list(HF_MODULES.values())
        model["lora"] = {"rank": cfg.rank, "alpha": float(cfg.lora_alpha),
                         "target_modules": targets}
    if cfg.paged_optimizer:
        out.warn("paged optimizer states have no prime-rl key: left out")
    return model


def _prime_rl_optim(job: Job, out: _Out) -> dict[str, Any]:
    cfg = job.cfg
    optim: dict[str, Any] = {"lr": 1e-6, "max_norm": GRADIENT_CLIPPING}
    if cfg.optimizer == "adamw":
        return {"type": "adamw", **optim}
    return {"type": "sgd", **optim, "momentum": 0.9 if cfg.optimizer == "sgd-momentum" else 0.0,
            "nesterov": False}


def _prime_rl_sft(job: Job, out: _Out, model: dict[str, Any],
                  optim: dict[str, Any]) -> dict[str, Any]:
    """sft.toml: deployment, model (name + trainer ModelConfig), data, optim."""
    cfg = job.cfg
    if cfg.chunked_loss:
        out.warn("prime-rl's SFT loss holds the whole logits (its config rejects the fused "
                 "head for SFT): more memory than planned")
    if cfg.mean_seq_len is not None:
        out.note("prime-rl's SFT data loader packs samples to data.seq_len")
    doc: dict[str, Any] = {"deployment": _prime_rl_deployment(job, out, job.num_gpus, 0),
                           "model": {"name": job.model_path, **model},
                           "data": {"name": "$DATASET", "batch_size": cfg.global_batch_size,
                                    "micro_batch_size": cfg.micro_batch_size,
                                    "seq_len": cfg.seq_len},
                           "optim": optim}
    if job.num_hosts > 1:
        doc["slurm"] = {"job_name": "prime-rl"}
        out.note("multi-node runs go through SLURM: set [slurm] partition/account")
    out.note("data.name: replace $DATASET with a Hugging Face SFT data set")
    return doc


def _prime_rl_grpo(job: Job, out: _Out, model: dict[str, Any],
                   optim: dict[str, Any]) -> dict[str, Any]:
    """rl.toml: shared model and seq_len, deployment, trainer, orchestrator, inference."""
    cfg = job.cfg
    if cfg.placement != "split" and cfg.placement != "separate":
        out.refuse(f"{cfg.placement} placement (prime-rl runs the trainer and the vLLM server "
                   "on disjoint GPUs)", "re-plan with --placement split or separate")
    if cfg.rollout_engine != "vllm":
        out.refuse(f"rollout engine {cfg.rollout_engine} (prime-rl's inference server is "
                   "vLLM)", "re-plan with --rollout-engine vllm")
    infer = rollout_gpu_count(cfg)
    train = job.num_gpus - infer
    samples = cfg.rollout_batch * cfg.samples_per_prompt
    if cfg.global_batch_size != samples:
        out.warn(f"prime-rl takes one optimizer step per orchestrator batch: {samples} samples "
                 f"({cfg.rollout_batch} prompts x {cfg.samples_per_prompt}), planned "
                 f"{cfg.global_batch_size} per step")
    out.note(f"the trainer packs samples into {cfg.seq_len}-token micro-batches: micro-batch "
             f"{cfg.micro_batch_size} and accumulation {cfg.grad_accum} follow from the tokens")
    vllm: dict[str, Any] = {"tensor_parallel_size": cfg.rollout_tp,
                            "data_parallel_size": max(1, infer // cfg.rollout_tp),
                            "enforce_eager": cfg.rollout_eager}
    if job.engine_utilization is not None:
        vllm["gpu_memory_utilization"] = job.engine_utilization
    doc: dict[str, Any] = {
        "seq_len": cfg.seq_len,
        "deployment": _prime_rl_deployment(job, out, train, infer),
        "model": {"name": job.model_path},
        "trainer": {"model": model, "optim": optim},
        "orchestrator": {"batch_size": samples, "group_size": cfg.samples_per_prompt,
                         "train": {"sampling": {"max_completion_tokens": cfg.response_len}}},
        "inference": {"vllm": vllm},
    }
    if job.num_hosts > 1:
        doc["slurm"] = {"job_name": "prime-rl"}
    if cfg.reference:
        out.warn("prime-rl has no reference model (its loss weighs the inference policy's "
                 "log-probs): the GPUs the plan gave the reference train as trainer ranks")
    out.note("add an [[orchestrator.train.source]] environment (configs/basic/*/rl.toml)")
    return doc


def _prime_rl_deployment(job: Job, out: _Out, train: int, infer: int) -> dict[str, Any]:
    """[deployment]: GPUs on one node, or whole nodes per role (multi_node, with SLURM)."""
    if job.num_hosts == 1:
        d: dict[str, Any] = {"type": "single_node", "gpus_per_node": job.per_node,
                             "num_train_gpus": train}
        if infer:
            d["num_infer_gpus"] = infer
        return d
    if train % job.per_node or infer % job.per_node:
        out.refuse(f"{train} trainer + {infer} inference GPUs on {job.per_node}-GPU nodes "
                   "(prime-rl's multi-node deployment gives each role whole nodes)",
                   f"re-plan with role GPU counts that are multiples of {job.per_node}")
    d = {"type": "multi_node", "gpus_per_node": job.per_node,
         "num_train_nodes": train // job.per_node}
    if infer:
        d["num_infer_nodes"] = infer // job.per_node
    return d


# ---------------------------------------------------------------------------------------------
# TOML (the subset written here: tables of strings, numbers, booleans and lists of scalars)
# ---------------------------------------------------------------------------------------------
def _toml(doc: dict[str, Any], prefix: str = "") -> str:
    """TOML of a nested dict: scalars first, then one [table] per nested dict."""
    scalars = [f"{k} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in doc.items() if isinstance(v, dict)]
    parts = ["\n".join(scalars) + "\n"] if scalars else []
    for key, value in tables:
        name = f"{prefix}{key}"
        has_scalars = any(not isinstance(v, dict) for v in value.values()) or not value
        body = _toml(value, f"{name}.")
        parts.append((f"[{name}]\n" if has_scalars else "") + body)
    return "\n".join(p for p in parts if p)
