"""Axolotl YAML (``export_axolotl``): the config ``axolotl train axolotl.yaml`` reads, launched by
Accelerate (``accelerate launch -m axolotl.cli.train axolotl.yaml`` across nodes).

Version targeted (AXOLOTL_VERSIONS): Axolotl 0.18 (git tag v0.18.0, commit 2f5cb9da). The keys
are those of its config schema at that commit, github.com/axolotl-ai-cloud/axolotl/blob/
2f5cb9da62a0fe763a1ddeb7798fc9acb2f4a417/src/axolotl/utils/schemas/: config.py
(AxolotlInputConfig: base_model, sequence_len, bf16/fp16, gradient_checkpointing,
activation_offloading, attn_implementation, deepspeed, fsdp_version/fsdp_config,
tensor_parallel_size, context_parallel_size, dp_shard_size/dp_replicate_size, rl, rl_beta,
reward_model, precompute_ref_log_probs, unfrozen_parameters), training.py
(micro_batch_size, gradient_accumulation_steps, optimizer, learning_rate, max_grad_norm),
peft.py (adapter lora/qlora, lora_r, lora_alpha, lora_target_linear/lora_target_modules,
peft_use_dora, gptq), fsdp.py (FSDPConfig) and trl.py (TRLConfig: beta, use_vllm, vllm_mode,
num_generations, max_completion_length, reward_funcs, vllm_enable_sleep_mode); the validators in
validation.py (FSDP2 refuses bitsandbytes' adamw_bnb_8bit: ``adamw_torch_8bit`` is written
instead; FSDP2 refuses a 4-bit base in RL: FSDP1 is written then).

Semantics followed: micro_batch_size x gradient_accumulation_steps x the data-parallel ranks is
the batch (utils/config/__init__.py divides the world size by context and tensor parallel);
tensor parallel is transformers' tp_plan through Accelerate's ParallelismConfig (utils/
distributed.py: the ranks tp and cp leave are FSDP shards unless dp_replicate_size is set);
DeepSpeed configs are files (the schema's tensor-parallel validator opens the path), those it
ships in deepspeed_configs/ (``axolotl fetch deepspeed_configs``) where one matches the plan.
Axolotl has no PPO and no pipeline parallel.
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.models.workloads import trainer_gpus
from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    RL_HINT,
    ExportResult,
    Job,
    _bf16_load_warning,
    _checkpointing_warning,
    _ds_offload_name,
    _fp8,
    _fsdp_offload_warning,
    _hf_optim,
    _lora_targets,
    _model_spec,
    _nodes,
    _offload_optimizer,
    _Out,
    _precision_note,
    _trl_generation_batch,
)

AXOLOTL_VERSIONS = "Axolotl 0.18.x (config checked with 0.18.0's validate_config)"
# Axolotl's shipped DeepSpeed configs (deepspeed_configs/ at v0.18.0), by (stage, offload,
# bf16 only): zero2.json offloads the optimizer; the *_bf16* files hard-code bf16.
AXOLOTL_DS = {(1, "none"): ("zero1.json", False), (2, "optimizer"): ("zero2.json", False),
              (3, "none"): ("zero3.json", False),
              (3, "optimizer+params"): ("zero3_bf16_cpuoffload_all.json", True)}
# Dataset type of each workload (Axolotl prompt strategies); the path is the user's.
AXOLOTL_DATA = {"sft": "chat_template", "pretrain": "completion", "dpo": "chat_template.default",
                "rm": "bradley_terry.chat_template", "grpo": None}
LEARNING_RATE = {True: 2e-4, False: 2e-5}  # a placeholder per adapter/full, stated in a note


def export_axolotl(job: Job, out: _Out) -> ExportResult:
    """An Axolotl training config (YAML) and its launch line for the job."""
    cfg = job.cfg
    _axolotl_refusals(job, out)
    doc: dict[str, Any] = {"base_model": job.model_path, **_axolotl_task(job, out)}
    doc.update(_axolotl_method(job, out))
    doc.update({
        "sequence_len": cfg.seq_len,
        "sample_packing": False,
        "micro_batch_size": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "num_epochs": 1,
        "optimizer": _axolotl_optimizer(job, out),
        "learning_rate": LEARNING_RATE[cfg.is_peft],
        "max_grad_norm": GRADIENT_CLIPPING,
        "attn_implementation": "flash_attention_2" if cfg.flash_attention else "eager",
        **_axolotl_precision(job, out),
        **_axolotl_memory(job, out),
        **_axolotl_parallel(job, out),
        "output_dir": f"./outputs/{job.model}",
    })
    if cfg.compiled:
        doc["torch_compile"] = True
    if cfg.chunked_loss:
        doc.update({"plugins": ["axolotl.integrations.liger.LigerPlugin"],
                    "liger_fused_linear_cross_entropy": True})
    if cfg.workload == "grpo":
        doc.update(_axolotl_grpo(job, out))
    _precision_note(job, out)
    out.note(f"learning_rate {doc['learning_rate']}: a placeholder, not planned; set yours")
    out.note("datasets: replace the path placeholder with your data set (Hugging Face id or "
             "local file)")
    lines = [*out.title(job),
             f"# micro-batch {cfg.micro_batch_size} x accumulation {cfg.grad_accum} x dp "
             f"{cfg.dp} = {cfg.global_batch_size}", *_axolotl_launch(job)]
    text = "\n".join(lines) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    return out.result(text, "axolotl.yaml")


def _axolotl_refusals(job: Job, out: _Out) -> None:
    cfg = job.cfg
    if cfg.workload == "ppo":
        out.refuse("PPO (Axolotl's rl types: dpo, ipo, orpo, kto, simpo, grpo, gdpo, ebft)",
                   RL_HINT)
    if cfg.pp > 1:
        out.refuse(f"pipeline parallel (pp {cfg.pp}; Axolotl splits by tensor, context and data "
                   "parallel only)", "re-plan with --pp 1, or use --format torchrun "
                   "(Megatron-LM arguments)")
    if cfg.tp > 1 and cfg.offload != "none":
        out.refuse(f"offload {cfg.offload} with tensor parallel (tp {cfg.tp})",
                   "re-plan with --offload none")
    _offload_optimizer(job, out)


def _axolotl_task(job: Job, out: _Out) -> dict[str, Any]:
    """The workload: datasets, rl type, reward model head."""
    cfg = job.cfg
    doc: dict[str, Any] = {}
    if cfg.workload == "rm":
        doc.update({"model_type": "AutoModelForSequenceClassification", "num_labels": 1,
                    "reward_model": True})
    if cfg.workload == "dpo":
        if cfg.reference:
            doc.update({"rl": "dpo", "rl_beta": 0.1})
            if cfg.precompute_ref:
                doc["precompute_ref_log_probs"] = True
        else:
            out.warn("reference-free preference training: rl simpo (SimPO) stands in for DPO "
                     "without a reference")
            doc.update({"rl": "simpo", "rl_beta": 2.0})
    if cfg.workload == "grpo":
        doc["rl"] = "grpo"
    kind = AXOLOTL_DATA[cfg.workload]
    doc["datasets"] = [{"path": "DATASET_PATH", **({"type": kind} if kind else {})}]
    return doc


def _axolotl_method(job: Job, out: _Out) -> dict[str, Any]:
    """Adapter keys (LoRA/DoRA/QLoRA) or the trainable layers of method freeze."""
    cfg = job.cfg
    if cfg.method == "freeze":
        spec = _model_spec(job.model, None)
        if spec is None:
            out.refuse(f"method freeze on {job.model} (its layer count is not in the shipped "
                       "catalog: unfrozen_parameters names layers by index)",
                       "re-plan with --method full or lora")
        first = spec.num_layers - cfg.freeze_trainable_layers
        layers = "|".join(str(i) for i in range(first, spec.num_layers))
        return {"unfrozen_parameters": [rf"^model\.layers\.({layers})\."]}
    if not cfg.is_peft:
        return {}
    doc: dict[str, Any] = {"adapter": "qlora" if cfg.method == "qlora" else "lora"}
    if cfg.method == "qlora":
        if cfg.quant_format == "nf4":
            doc["load_in_4bit"] = True  # bitsandbytes NF4 with double quantization (loaders)
        else:
            doc.update({"adapter": "lora", "gptq": True})
            out.note("QLoRA on GPTQ: point base_model at a 4-bit GPTQ checkpoint")
    targets = _lora_targets(cfg)
    doc.update({"lora_r": cfg.rank, "lora_alpha": cfg.lora_alpha, "lora_dropout": 0.0})
    doc.update({"lora_target_linear": True} if targets is None
               else {"lora_target_modules": targets})
    if cfg.method == "dora":
        doc["peft_use_dora"] = True
    if cfg.fused_lora_kernels:
        doc.update({"lora_mlp_kernel": True, "lora_qkv_kernel": True, "lora_o_kernel": True})
    return doc


def _axolotl_optimizer(job: Job, out: _Out) -> str:
    """The optimizer name: Hugging Face's, with torchao's 8-bit AdamW under FSDP2."""
    name = _hf_optim(job.cfg, out)
    if _writes_fsdp(job) and name == "adamw_bnb_8bit" and _fsdp_version(job) == 2:
        out.note("adamw-8bit under FSDP2: adamw_torch_8bit (torchao's 8-bit AdamW; Axolotl "
                 "refuses bitsandbytes' adamw_bnb_8bit with FSDP2)")
        return "adamw_torch_8bit"
    return name


def _axolotl_precision(job: Job, out: _Out) -> dict[str, Any]:
    _fp8(job, out)
    _bf16_load_warning(job, out, "Axolotl (bf16: true sets torch_dtype)")
    return {"bf16": job.precision in ("bf16", "fp8"), "fp16": job.precision == "fp16"}


def _axolotl_memory(job: Job, out: _Out) -> dict[str, Any]:
    """Recomputation and activation offloading (FSDP recomputes in fsdp_config instead)."""
    cfg = job.cfg
    fsdp = _writes_fsdp(job)
    doc: dict[str, Any] = {"gradient_checkpointing": cfg.checkpointing != "none" and not fsdp}
    _checkpointing_warning(job, out, "gradient_checkpointing")
    if cfg.offload_checkpoints:
        if cfg.checkpointing == "none" or fsdp:
            out.refuse("offloaded checkpoints without gradient_checkpointing (Axolotl's "
                       "activation_offloading requires it)", "re-plan with --checkpointing full")
        doc["activation_offloading"] = True
    if cfg.loss_token_chunk_gib:
        out.warn("the head and loss fused over token chunks (Unsloth) are not an Axolotl "
                 "setting: the logits of a whole micro-batch are materialised")
    return doc


def _uses_deepspeed(job: Job) -> bool:
    return not job.cfg.fsdp and bool(job.cfg.zero_stage or job.cfg.offload != "none")


def _writes_fsdp(job: Job) -> bool:
    """FSDP is written: the plan's, or under tensor/context parallel with data-parallel
    replicas and no DeepSpeed (Axolotl blocks DDP x TP/CP)."""
    c = job.cfg
    return c.fsdp or (not _uses_deepspeed(job) and c.tp * c.cp > 1 and c.dp > 1)


def _fsdp_version(job: Job) -> int:
    """FSDP2, but FSDP1 for a 4-bit base in RL (Axolotl's check_fsdp2_base_model_quant_rl)."""
    rl = job.cfg.workload in ("dpo", "grpo")
    return 1 if rl and job.cfg.method == "qlora" else 2


def _axolotl_parallel(job: Job, out: _Out) -> dict[str, Any]:
    """FSDP, DeepSpeed and the tensor/context/data parallel sizes."""
    cfg = job.cfg
    doc: dict[str, Any] = {}
    if _uses_deepspeed(job):
        if cfg.cp > 1:
            out.refuse(f"context parallel (cp {cfg.cp}) with DeepSpeed (Axolotl pairs DeepSpeed "
                       "with tensor parallel only, docs/support-matrix.qmd)",
                       "re-plan with --sharding fsdp or --cp 1")
        if cfg.tp > 1 and cfg.zero_stage == 3:
            out.refuse(f"tensor parallel (tp {cfg.tp}) with ZeRO-3 (DeepSpeed AutoTP trains "
                       "with ZeRO 0 to 2; ms-swift v4.5.2 sft_args.py says the same of it)",
                       "re-plan with --sharding fsdp, zero1 or zero2")
        doc["deepspeed"] = _axolotl_deepspeed(job, out)
    elif _writes_fsdp(job):
        if not cfg.fsdp:
            out.warn(f"tp {cfg.tp} x cp {cfg.cp} with {cfg.dp} data-parallel replicas: Axolotl "
                     "blocks DDP x TP/CP (docs/support-matrix.qmd), so the replicas are FSDP2 "
                     "shards (dp_shard_size): less memory, more communication than planned")
        doc.update(_axolotl_fsdp(job, out))
    if cfg.tp > 1:
        doc["tensor_parallel_size"] = cfg.tp
    if cfg.cp > 1:
        doc["context_parallel_size"] = cfg.cp
    if cfg.tp * cfg.cp > 1 and cfg.dp > 1 and not _uses_deepspeed(job):
        doc["dp_shard_size"] = cfg.dp
    return doc


def _axolotl_fsdp(job: Job, out: _Out) -> dict[str, Any]:
    cfg = job.cfg
    _fsdp_offload_warning(job, out)
    return {"fsdp_version": _fsdp_version(job), "fsdp_config": {
        "offload_params": cfg.offload != "none",
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "state_dict_type": "SHARDED_STATE_DICT",
        "reshard_after_forward": True,
        "cpu_ram_efficient_loading": True,
        "activation_checkpointing": cfg.checkpointing != "none",
    }}


def _axolotl_deepspeed(job: Job, out: _Out) -> str:
    cfg = job.cfg
    shipped, bf16_only = AXOLOTL_DS.get((cfg.zero_stage, cfg.offload), (None, False))
    if shipped and (job.precision == "bf16" or not bf16_only):
        out.note(f"deepspeed_configs/{shipped}: Axolotl's own file (axolotl fetch "
                 "deepspeed_configs writes them into the working directory)")
        return f"deepspeed_configs/{shipped}"
    name = f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}_config.json"
    out.note(f"Axolotl ships no ZeRO-{cfg.zero_stage} config with offload {cfg.offload} for "
             f"{job.precision}: write {name} with planner export --format deepspeed --out "
             f"{name} PLAN.json")
    return name


def _axolotl_grpo(job: Job, out: _Out) -> dict[str, Any]:
    """GRPO's trl section (TRL's GRPOTrainer) and the vLLM engine."""
    cfg = job.cfg
    if cfg.offload_idle:
        out.refuse("offload of idle roles (TRL's GRPOTrainer keeps the policy on the GPUs)",
                   "re-plan with --no-offload-idle, or use --format verl")
    if cfg.placement == "split":
        out.refuse("split placement (roles on GPUs of their own)", "use --format openrlhf")
    trl: dict[str, Any] = {"beta": 0.04 if cfg.reference else 0.0,
                           "num_generations": cfg.samples_per_prompt,
                           "max_completion_length": cfg.response_len,
                           "generation_batch_size": _trl_generation_batch(job, out),
                           "reward_funcs": ["rewards.reward_fn"],
                           "use_vllm": not cfg.generates_in_trainer}
    out.note("trl.reward_funcs: a placeholder module.function name; write your reward function")
    if cfg.generates_in_trainer:
        return {"trl": trl}
    vllm: dict[str, Any] = {"tensor_parallel_size": cfg.rollout_tp}
    if job.engine_utilization is not None:
        vllm["gpu_memory_utilization"] = round(job.engine_utilization, 4)
    if cfg.placement == "colocate":
        trl.update({"vllm_mode": "colocate", "vllm_enable_sleep_mode": cfg.engine_sleep})
    else:
        trl["vllm_mode"] = "server"
        out.note("vLLM server on the rollout GPUs first: axolotl vllm-serve axolotl.yaml")
    return {"trl": trl, "vllm": vllm}


def _axolotl_launch(job: Job) -> list[str]:
    """The launch lines of the header: axolotl train, or accelerate launch across nodes; the
    trainer's GPUs only (a separate vLLM server holds the rest)."""
    gpus = trainer_gpus(job.cfg)
    nodes, per_node = _nodes(job, gpus)
    if nodes == 1:
        return [f"# launch: axolotl train axolotl.yaml --launcher accelerate -- "
                f"--num_processes {per_node}",
                f"#   (or: accelerate launch --num_processes {per_node} -m "
                "axolotl.cli.train axolotl.yaml)"]
    return [f"# launch on each of the {nodes} nodes (NODE_RANK 0..{nodes - 1}, "
            "MASTER_ADDR the first node):",
            f"#   accelerate launch --num_machines {nodes} --num_processes "
            f"{gpus} --machine_rank $NODE_RANK --main_process_ip $MASTER_ADDR "
            "--main_process_port 29500 -m axolotl.cli.train axolotl.yaml"]
