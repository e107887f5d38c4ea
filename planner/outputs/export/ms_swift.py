"""ms-swift (``export_ms_swift``): a shell script running ``swift sft`` / ``swift pt`` /
``swift rlhf --rlhf_type dpo|rm|ppo|grpo``, started on every GPU of a node by NPROC_PER_NODE
(and across nodes by NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT).

Version targeted (MS_SWIFT_VERSIONS): ms-swift 4.5 (git tag v4.5.2, commit ff512877). The flags
are the fields of its argument dataclasses at that commit, github.com/modelscope/ms-swift/blob/
ff5128777dd3dc5538f1a95fbcc29442c327d7d2/swift/: arguments/base_args/base_args.py (tuner_type),
model_args.py (model, torch_dtype, attn_impl), quant_args.py (quant_method bnb, quant_bits 4,
bnb_4bit_quant_type, bnb_4bit_use_double_quant), template_args.py (max_length,
sequence_parallel_size), tuner_args.py (lora_rank, lora_alpha, target_modules, use_dora),
sft_args.py (deepspeed presets zero0-zero3, zero2_offload, zero3_offload in swift/config/, or
a JSON file; fsdp: the fsdp2 preset or a JSON with "fsdp" and "fsdp_config"), rlhf_args.py
(rlhf_type, beta, max_completion_length, num_generations, reward_model) and
rlhf_trainers/args_mixin.py (use_vllm, vllm_mode, vllm_gpu_memory_utilization,
vllm_tensor_parallel_size, sleep_level, offload_model, offload_optimizer,
generation_batch_size), on the Hugging Face TrainingArguments (per_device_train_batch_size,
gradient_accumulation_steps, gradient_checkpointing, optim, max_grad_norm, bf16/fp16).

Semantics followed: cli/main.py re-executes ``swift sft`` under torchrun when NPROC_PER_NODE or
NNODES is set; FSDP2 recomputes through fsdp_config.activation_checkpointing and
--gradient_checkpointing stays off (swift/config/fsdp2.json's note). ms-swift's own trainers run
data parallel with ZeRO or FSDP2 and Ulysses/ring sequence parallel: tensor and pipeline
parallel are Megatron-SWIFT's (``megatron sft``), a different stack.
"""

from __future__ import annotations

import json
from typing import Any

from planner.models.workloads import trainer_gpus
from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    ExportResult,
    Job,
    _bf16_load_warning,
    _checkpointing_warning,
    _command,
    _ds_offload_name,
    _flags,
    _fp8,
    _fsdp_offload_warning,
    _hf_optim,
    _lora_targets,
    _nodes,
    _offload_optimizer,
    _Out,
    _precision_note,
    _script,
    _trl_generation_batch,
)

MS_SWIFT_VERSIONS = "ms-swift 4.5.x (flags checked with 4.5.2's argument parser)"
# `swift` subcommand and --rlhf_type of each workload (cli/main.py ROUTE_MAPPING).
MS_SWIFT_COMMANDS = {"pretrain": ("pt", None), "sft": ("sft", None), "rm": ("rlhf", "rm"),
                     "dpo": ("rlhf", "dpo"), "ppo": ("rlhf", "ppo"), "grpo": ("rlhf", "grpo")}
# ms-swift's DeepSpeed presets (swift/config/<name>.json), by (stage, offload).
MS_SWIFT_DS = {(1, "none"): "zero1", (2, "none"): "zero2",
               (3, "none"): "zero3", (2, "optimizer"): "zero2_offload",
               (3, "optimizer+params"): "zero3_offload"}
LEARNING_RATE = {True: 1e-4, False: 1e-5}  # sft_args.py _init_override's defaults
TORCH_DTYPES = {"bf16": "bfloat16", "fp8": "bfloat16", "fp16": "float16", "fp32": "float32"}


def export_ms_swift(job: Job, out: _Out) -> ExportResult:
    """A shell script launching the job with ms-swift's ``swift`` command line."""
    cfg = job.cfg
    _ms_swift_refusals(job, out)
    command, rlhf_type = MS_SWIFT_COMMANDS[cfg.workload]
    pairs: list[tuple[str, Any]] = [
        ("--rlhf_type", rlhf_type),
        ("--model", job.model_path),
        ("--dataset", "$DATASET"),
        ("--tuner_type", "full" if cfg.method == "full" else "lora"),
        *_ms_swift_tuner(job, out),
        ("--torch_dtype", TORCH_DTYPES[job.precision]),
        ("--bf16", "true" if job.precision in ("bf16", "fp8") else None),
        ("--fp16", "true" if job.precision == "fp16" else None),
        ("--max_length", cfg.prompt_len if cfg.is_rl else cfg.seq_len),
        ("--per_device_train_batch_size", cfg.micro_batch_size),
        ("--gradient_accumulation_steps", cfg.grad_accum),
        ("--num_train_epochs", 1),
        ("--learning_rate", LEARNING_RATE[cfg.is_peft]),
        ("--optim", _hf_optim(cfg, out)),
        ("--max_grad_norm", GRADIENT_CLIPPING),
        ("--gradient_checkpointing", str(cfg.checkpointing != "none" and not cfg.fsdp).lower()),
        ("--attn_impl", "flash_attn" if cfg.flash_attention else "eager"),
        *_ms_swift_sharding(job, out),
        ("--sequence_parallel_size", cfg.cp if cfg.cp > 1 else None),
        ("--torch_compile", "true" if cfg.compiled else None),
        ("--use_liger_kernel", "true" if cfg.chunked_loss else None),
        *_ms_swift_rlhf(job, out),
        ("--output_dir", "output"),
    ]
    _fp8(job, out)
    _bf16_load_warning(job, out, "ms-swift (--torch_dtype bfloat16)")
    _checkpointing_warning(job, out, "gradient_checkpointing")
    _precision_note(job, out)
    if cfg.offload_checkpoints or cfg.loss_token_chunk_gib:
        out.warn("Unsloth's offloaded checkpoints and token-chunked fused loss are not ms-swift "
                 "flags (--tuner_backend unsloth is not set): more memory than planned")
    out.note(f"--learning_rate {LEARNING_RATE[cfg.is_peft]}: ms-swift's default for "
             f"{'adapters' if cfg.is_peft else 'full training'}, a placeholder, not planned")
    env = [v[1:] for _, v in pairs if isinstance(v, str) and v.startswith("$")]
    comments = []
    nodes, per_node = _nodes(job, trainer_gpus(cfg))  # a separate vLLM server holds the rest
    exports = [("NPROC_PER_NODE", str(per_node))]
    if nodes > 1:
        exports += [("NNODES", str(nodes)), ("NODE_RANK", "${NODE_RANK:?0..n-1}"),
                    ("MASTER_ADDR", "${MASTER_ADDR:?first node}"), ("MASTER_PORT", "29500")]
        comments.append("Run on every node with NODE_RANK (0 on the first) and MASTER_ADDR set.")
        env += ["NODE_RANK", "MASTER_ADDR"]
    text = _script(job, out, _command(["swift", command], _flags(pairs)), env=tuple(env),
                   comments=tuple(comments), exports=tuple(exports))
    return out.result(text, "launch_swift.sh")


def _ms_swift_refusals(job: Job, out: _Out) -> None:
    cfg = job.cfg
    if cfg.tp > 1 or cfg.pp > 1:
        out.refuse(f"tensor/pipeline parallel (tp {cfg.tp}, pp {cfg.pp}) in ms-swift's "
                   "Trainer (Megatron-SWIFT's `megatron sft` runs them)",
                   "re-plan with --framework ms-swift-megatron, or with --tp 1 --pp 1")
    if cfg.method == "freeze":
        out.refuse("method freeze (last k layers) as a ms-swift tuner",
                   "use --format llamafactory (finetuning_type freeze)")
    if cfg.workload == "dpo" and not cfg.reference:
        out.refuse("reference-free DPO", "re-plan with a reference, or use --format "
                                         "llamafactory (pref_loss simpo)")
    _offload_optimizer(job, out)


def _ms_swift_tuner(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """LoRA/DoRA/QLoRA flags (tuner_args.py, quant_args.py)."""
    cfg = job.cfg
    if not cfg.is_peft:
        return []
    targets = _lora_targets(cfg)
    pairs: list[tuple[str, Any]] = [
        ("--lora_rank", cfg.rank), ("--lora_alpha", cfg.lora_alpha),
        ("--target_modules", targets or ["all-linear"]),
        ("--use_dora", "true" if cfg.method == "dora" else None)]
    if cfg.method == "qlora":
        if cfg.quant_format != "nf4":
            out.note("QLoRA on GPTQ: point --model at a 4-bit GPTQ checkpoint (ms-swift reads "
                     "its quantization config)")
            return pairs
        pairs += [("--quant_method", "bnb"), ("--quant_bits", 4),
                  ("--bnb_4bit_quant_type", "nf4"), ("--bnb_4bit_use_double_quant", "true")]
    if cfg.fused_lora_kernels:
        out.warn("fused LoRA kernels (Unsloth's) need --tuner_backend unsloth, which this "
                 "launch does not set: more activation memory than planned")
    return pairs


def _ms_swift_sharding(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """--deepspeed (a preset name or a file) or --fsdp (the fsdp2 preset or inline JSON)."""
    cfg = job.cfg
    if cfg.fsdp:
        _fsdp_offload_warning(job, out)
        if cfg.offload == "none" and cfg.checkpointing != "none":
            return [("--fsdp", "fsdp2")]
        fsdp = {"fsdp": "full_shard auto_wrap" + (" offload" if cfg.offload != "none" else ""),
                "fsdp_config": {"fsdp_version": 2, "reshard_after_forward": True,
                                "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                                "cpu_ram_efficient_loading": True,
                                "state_dict_type": "SHARDED_STATE_DICT",
                                "activation_checkpointing": cfg.checkpointing != "none"}}
        return [("--fsdp", json.dumps(fsdp, separators=(",", ":")))]
    if cfg.zero_stage == 0 and cfg.offload == "none":
        return []  # plain DDP under torchrun
    preset = MS_SWIFT_DS.get((cfg.zero_stage, cfg.offload))
    if preset:
        return [("--deepspeed", preset)]
    name = f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}_config.json"
    out.note(f"ms-swift ships no ZeRO-{cfg.zero_stage} preset with offload {cfg.offload}: "
             f"write {name} with planner export --format deepspeed --out {name} PLAN.json")
    return [("--deepspeed", name)]


def _ms_swift_rlhf(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """DPO's beta, PPO's reward model and GRPO's generation and vLLM flags."""
    cfg = job.cfg
    if cfg.workload == "dpo":
        if cfg.precompute_ref:
            out.warn("precomputed reference log-probs are not a ms-swift flag: the reference "
                     "model runs every step (more memory and time than planned)")
        return [("--beta", 0.1)]
    if cfg.workload == "ppo":
        return _ms_swift_ppo(job, out)
    if cfg.workload == "grpo":
        return _ms_swift_grpo(job, out)
    return []


def _ms_swift_ppo(job: Job, out: _Out) -> list[tuple[str, Any]]:
    cfg = job.cfg
    if not cfg.generates_in_trainer or cfg.placement != "colocate":
        out.refuse(f"PPO with a {cfg.rollout_engine} engine ({cfg.placement}; ms-swift's PPO is "
                   "TRL's PPOTrainer, generating with the policy)", "use --format verl or "
                   "openrlhf")
    if cfg.offload_idle:
        out.refuse("offload of idle roles in PPO", "re-plan with --no-offload-idle")
    if cfg.reward_function:
        out.refuse("a reward function (ms-swift's PPO, TRL's PPOTrainer, scores with a reward "
                   "model)", "re-plan without --reward-function, or use --format verl or openrlhf")
    out.note("PPO: set --reward_model to a trained reward model (swift rlhf --rlhf_type rm)")
    return [("--reward_model", "$REWARD_MODEL"), ("--max_completion_length", cfg.response_len)]


def _ms_swift_grpo(job: Job, out: _Out) -> list[tuple[str, Any]]:
    cfg = job.cfg
    if cfg.placement == "split":
        out.refuse("split placement (roles on GPUs of their own)", "use --format openrlhf")
    pairs: list[tuple[str, Any]] = [
        ("--beta", 0.04 if cfg.reference else 0.0),
        ("--num_generations", cfg.samples_per_prompt),
        ("--max_completion_length", cfg.response_len),
        ("--generation_batch_size", _trl_generation_batch(job, out)),
        ("--reward_funcs", "accuracy"),
        ("--use_vllm", str(not cfg.generates_in_trainer).lower())]
    out.note("--reward_funcs accuracy: a placeholder (ms-swift's built-in); name yours")
    if cfg.offload_idle and (cfg.generates_in_trainer or cfg.placement != "colocate"):
        out.refuse("offload of idle roles without a colocated vLLM engine (ms-swift offloads "
                   "the policy only while its colocated engine generates)",
                   "re-plan with --no-offload-idle")
    if cfg.generates_in_trainer:
        return pairs
    pairs += [("--vllm_tensor_parallel_size", cfg.rollout_tp)]
    if job.engine_utilization is not None:
        pairs.append(("--vllm_gpu_memory_utilization", round(job.engine_utilization, 4)))
    if cfg.placement == "colocate":
        pairs += [("--vllm_mode", "colocate"), ("--sleep_level", 1 if cfg.engine_sleep else 0),
                  ("--offload_model", "true" if cfg.offload_idle else None),
                  ("--offload_optimizer", "true" if cfg.offload_idle else None)]
        return pairs
    out.note("vLLM server on the rollout GPUs first: swift rollout --model MODEL; give its "
             "address with --vllm_server_host")
    return [*pairs, ("--vllm_mode", "server"), ("--vllm_server_host", "$VLLM_HOST")]
