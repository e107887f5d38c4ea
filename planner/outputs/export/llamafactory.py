"""LLaMA-Factory YAML (``export_llamafactory``).

Semantics followed: stages pt/sft/rm/dpo/ppo (no GRPO), gradient checkpointing on unless
disable_gradient_checkpointing, data parallel only (no tensor/pipeline parallel).

Version targeted (LLAMAFACTORY_VERSIONS): LLaMA-Factory 0.9 (checked with 0.9.5's
get_train_args).
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    RL_HINT,
    ExportResult,
    Job,
    _checkpointing_warning,
    _ds_offload_name,
    _fp8,
    _fsdp_offload_warning,
    _hf_optim,
    _lora_targets,
    _need_data_parallel,
    _offload_optimizer,
    _Out,
    _precision_note,
)

LLAMAFACTORY_VERSIONS = "LLaMA-Factory 0.9.x (checked with 0.9.5's get_train_args)"
# LLaMA-Factory's shipped DeepSpeed configs (examples/deepspeed/), by (stage, offload).
LLAMAFACTORY_DS = {(0, "none"): "ds_z0_config.json", (2, "none"): "ds_z2_config.json",
                   (2, "optimizer"): "ds_z2_offload_config.json", (3, "none"): "ds_z3_config.json",
                   (3, "optimizer+params"): "ds_z3_offload_config.json"}


LLAMAFACTORY_STAGES = {"pretrain": "pt", "sft": "sft", "rm": "rm", "dpo": "dpo", "ppo": "ppo"}
LLAMAFACTORY_DATA = {"pt": "c4_demo", "sft": "alpaca_en_demo", "rm": "dpo_en_demo",
                     "dpo": "dpo_en_demo", "ppo": "alpaca_en_demo"}
TEMPLATES = (("qwen", "qwen"), ("llama-3", "llama3"), ("llama-2", "llama2"),
             ("mistral", "mistral"), ("mixtral", "mistral"), ("gemma", "gemma"),
             ("deepseek", "deepseek3"))


def _llamafactory_tuning(job: Job, out: _Out) -> tuple[dict[str, Any], dict[str, Any]]:
    """(model keys, method keys) of the fine-tuning method: LoRA/DoRA's rank and targets,
    QLoRA's bitsandbytes quantization, freeze tuning's trainable layers."""
    cfg = job.cfg
    model: dict[str, Any] = {}
    method: dict[str, Any] = {}
    if cfg.is_peft:
        targets = _lora_targets(cfg)
        method.update({"lora_rank": cfg.rank, "lora_alpha": cfg.lora_alpha,
                       "lora_target": "all" if targets is None else ",".join(targets)})
        if cfg.method == "dora":
            method["use_dora"] = True
        if cfg.method == "qlora":
            if cfg.quant_format == "nf4":
                model.update({"quantization_bit": 4, "quantization_method": "bnb",
                              "quantization_type": "nf4", "double_quantization": True})
            else:
                out.note("QLoRA on GPTQ: point model_name_or_path at a 4-bit GPTQ checkpoint "
                         "(LLaMA-Factory reads its quantization config)")
    if cfg.method == "freeze":
        method.update({"freeze_trainable_layers": cfg.freeze_trainable_layers,
                       "freeze_trainable_modules": "all"})
    return model, method


def _llamafactory_train(job: Job, out: _Out) -> dict[str, Any]:
    """The train section: batch, clipping, optimizer, checkpointing, kernels, precision and
    PPO's keys."""
    cfg = job.cfg
    train: dict[str, Any] = {
        "per_device_train_batch_size": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "max_grad_norm": GRADIENT_CLIPPING,
        "optim": _hf_optim(cfg, out),
        "disable_gradient_checkpointing": cfg.checkpointing == "none",
        "flash_attn": "fa2" if cfg.flash_attention else "disabled",
    }
    train.update(_llamafactory_precision(job, out))
    if cfg.chunked_loss:
        train["enable_liger_kernel"] = True
    if cfg.compiled:
        train["torch_compile"] = True
    if cfg.workload == "ppo":
        train.update(_llamafactory_ppo(job, out))
    return train


def export_llamafactory(job: Job, out: _Out) -> ExportResult:
    """A LLaMA-Factory training config (YAML) for the job."""
    cfg = job.cfg
    if cfg.workload == "grpo":
        out.refuse("GRPO (LLaMA-Factory stages: pt, sft, rm, dpo, ppo, kto)", RL_HINT)
    _need_data_parallel(job, out, "LLaMA-Factory trains data parallel only; use --format "
                                  "torchrun (Megatron-LM arguments)")
    _offload_optimizer(job, out)
    stage = LLAMAFACTORY_STAGES[cfg.workload]
    model: dict[str, Any] = {"model_name_or_path": job.model_path, "trust_remote_code": True}
    method: dict[str, Any] = {"stage": stage, "do_train": True,
                              "finetuning_type": "lora" if cfg.is_peft else cfg.method}
    quant, tuned = _llamafactory_tuning(job, out)
    model.update(quant)
    method.update(tuned)
    if cfg.workload == "dpo":
        method.update(_llamafactory_dpo(job, out))
    ds = _llamafactory_deepspeed(job, out)
    if ds:
        method["deepspeed"] = ds
    dataset: dict[str, Any] = {"dataset": LLAMAFACTORY_DATA[stage], "template": _template(job),
                               "cutoff_len": cfg.prompt_len if cfg.is_rl else cfg.seq_len}
    output = {"output_dir": f"saves/{job.model}/{method['finetuning_type']}/{stage}"}
    train = _llamafactory_train(job, out)
    _checkpointing_warning(job, out, "gradient checkpointing (LLaMA-Factory's default)")
    if cfg.fsdp:
        _fsdp_offload_warning(job, out)
        out.note("FSDP is not a LLaMA-Factory YAML key: launch with Accelerate, its config from "
                 "planner export --format accelerate --out accelerate_config.yaml PLAN.json")
    _precision_note(job, out)
    sections = (("model", model), ("method", method), ("dataset", dataset),
                ("output", output), ("train", train))
    launch = (f"FORCE_TORCHRUN=1 NNODES={job.num_hosts} NPROC_PER_NODE={job.per_node}"
              + (" NODE_RANK=<0..n-1> MASTER_ADDR=<first node> MASTER_PORT=29500"
                 if job.num_hosts > 1 else "") + " llamafactory-cli train llamafactory.yaml")
    if cfg.fsdp:
        launch = ("accelerate launch --config_file accelerate_config.yaml src/train.py "
                  "llamafactory.yaml")
    lines = [*out.title(job),
             f"# micro-batch {cfg.micro_batch_size} x accumulation {cfg.grad_accum} x dp "
             f"{cfg.dp} = {cfg.global_batch_size}", f"# launch: {launch}"]
    for name, section in sections:
        lines += ["", f"### {name}", yaml.safe_dump(section, sort_keys=False).rstrip()]
    return out.result("\n".join(lines) + "\n", "llamafactory.yaml")


def _template(job: Job) -> str:
    return next((t for prefix, t in TEMPLATES if job.model.startswith(prefix)), "default")


def _llamafactory_dpo(job: Job, out: _Out) -> dict[str, Any]:
    cfg = job.cfg
    if not cfg.reference:
        out.warn("reference-free preference training: pref_loss simpo (SimPO) stands in for "
                 "DPO without a reference")
        return {"pref_beta": 2.0, "pref_loss": "simpo"}
    if cfg.precompute_ref and not cfg.is_peft:
        out.refuse("precomputed reference log-probs (LLaMA-Factory keeps the full reference "
                   "model in GPU memory)", "re-plan without --precompute-ref, or use --format "
                   "torchrun (TRL --precompute_ref_log_probs)")
    return {"pref_beta": 0.1, "pref_loss": "sigmoid"}


def _llamafactory_deepspeed(job: Job, out: _Out) -> str | None:
    cfg = job.cfg
    if cfg.fsdp or (cfg.zero_stage == 0 and cfg.offload == "none"):
        return None
    shipped = LLAMAFACTORY_DS.get((cfg.zero_stage, cfg.offload))
    if shipped:
        return f"examples/deepspeed/{shipped}"
    name = f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}_config.json"
    if cfg.is_rl:  # export --format deepspeed writes supervised configs only
        out.refuse(f"{cfg.workload} with ZeRO-{cfg.zero_stage} and offload {cfg.offload} "
                   "(LLaMA-Factory ships no such DeepSpeed config and planner exports DeepSpeed "
                   "files for supervised training only)",
                   "re-plan without offload, or use --format verl or openrlhf")
    out.note(f"LLaMA-Factory ships no ZeRO-{cfg.zero_stage} config with offload "
             f"{cfg.offload}: write {name} with planner export --format deepspeed --out {name} "
             "PLAN.json")
    return name


def _llamafactory_precision(job: Job, out: _Out) -> dict[str, Any]:
    if job.cfg.pure_16bit:
        return {"pure_bf16": True}
    _fp8(job, out)
    return {"bf16": job.precision in ("bf16", "fp8"), "fp16": job.precision == "fp16"}


def _llamafactory_ppo(job: Job, out: _Out) -> dict[str, Any]:
    cfg = job.cfg
    if cfg.placement != "colocate":
        out.refuse(f"{cfg.placement} rollout GPUs (LLaMA-Factory's PPO generates with the "
                   "policy on the training GPUs)", "use --format openrlhf")
    if cfg.samples_per_prompt > 1:
        out.refuse(f"{cfg.samples_per_prompt} samples per prompt (LLaMA-Factory's PPO samples "
                   "one)", "use --format verl or openrlhf")
    out.warn("LLaMA-Factory's PPO generates with the policy (HF generate, no vLLM engine): "
             f"rollout TP {cfg.rollout_tp}, the engine memory fraction and engine sleep do not "
             "apply; its value head shares the policy (no separate critic)")
    if cfg.offload_idle:
        out.refuse("offload of idle roles (LLaMA-Factory's PPO keeps every role on the GPUs)",
                   "re-plan with --no-offload-idle, or use --format verl")
    if cfg.mean_seq_len:
        out.refuse(f"padding-free passes (mean {cfg.mean_seq_len} tokens per sequence)",
                   "use --format verl or openrlhf")
    if cfg.rollout_batch != cfg.global_batch_size:
        out.warn(f"LLaMA-Factory's PPO collects one optimizer batch ({cfg.global_batch_size} "
                 f"prompts) per update, not the plan's {cfg.rollout_batch}")
    if cfg.reward_function:
        out.refuse("a reward function (LLaMA-Factory's PPO scores with a reward model, or a "
                   "reward API, reward_model_type api)", "re-plan without --reward-function, "
                   "or use --format verl or openrlhf")
    out.note("PPO: set reward_model to a trained reward model (LLaMA-Factory stage rm)")
    return {"reward_model": "saves/reward_model", "reward_model_type":
            "lora" if cfg.is_peft else "full", "max_new_tokens": cfg.response_len,
            "ppo_score_norm": False}
