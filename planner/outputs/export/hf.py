"""Hugging Face launches: torchrun (a TRL example script, or Megatron-LM's pretrain_gpt.py for a
tensor/pipeline-parallel plan) and Accelerate YAML, and the TRL/Megatron argument builders they
share (``export_torchrun``, ``export_accelerate``).

Versions targeted: TRL >= 0.27 (``--dtype``; TRL 0.26 and older call it ``--torch_dtype``),
Megatron-LM core_r0.8 and later: every flag written is in core_r0.8.0's
megatron/training/arguments.py, and the launches are checked with megatron-core 0.17.1's
``parse_args``/``validate_args`` (that file equals git tag core_v0.17.1, commit 266f1c97), whose
``validate_args`` asserts CUDA_DEVICE_MAX_CONNECTIONS=1 for tensor or context parallel runs on
GPUs before Blackwell (github.com/NVIDIA/Megatron-LM/blob/core_v0.17.1/megatron/training/
arguments.py, "require setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1"), so
the script exports it.

Semantics followed (the flags each framework documents):
* Accelerate: distributed_type NO/MULTI_GPU/DEEPSPEED/FSDP; FSDP CPU offload moves parameters,
  gradients and the optimizer step (there is no optimizer-only offload).
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.catalog.request import TrainConfig
from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    ExportResult,
    Job,
    _checkpointing_warning,
    _command,
    _ds_offload_name,
    _flags,
    _fp8,
    _fsdp_offload_warning,
    _hf_optim,
    _lora_targets,
    _need_data_parallel,
    _need_not_rl,
    _offload_optimizer,
    _Out,
    _precision_note,
    _script,
)

# ---------------------------------------------------------------------------------------------
# Hugging Face / TRL script arguments (torchrun and accelerate launches)
# ---------------------------------------------------------------------------------------------
TRL_SCRIPTS = {"sft": "sft.py", "pretrain": "sft.py", "dpo": "dpo.py",
               "rm": "reward_modeling.py"}
# The profile whose launch is the Trainer with Liger's kernels: TrainingArguments.use_liger_kernel
# (https://huggingface.co/docs/transformers/v5.12.0/kernels, read by TRL's scripts too:
# https://huggingface.co/docs/trl/v1.14.0/liger_kernel_integration).
LIGER = "hf-trainer-liger"
TRL_VERSIONS = ">=0.27"  # ModelConfig.dtype (renamed from torch_dtype in 0.27)
MEGATRON_VERSIONS = "core_r0.8 and later (checked with megatron-core 0.17.1's parse_args)"
TORCHRUN_VERSIONS = (f"TRL {TRL_VERSIONS} (checked with 1.16.0's TrlParser) or Megatron-LM "
                     f"{MEGATRON_VERSIONS}")
ACCELERATE_VERSIONS = ("Accelerate 1.x (checked with 1.15.0's ClusterConfig) launching "
                       f"TRL {TRL_VERSIONS}")


def _hf_method_pairs(cfg: TrainConfig, *, sharding: bool) -> list[tuple[str, Any]]:
    """The TRL script's PEFT, DPO and (``sharding``) --fsdp/--deepspeed arguments."""
    pairs: list[tuple[str, Any]] = []
    if cfg.is_peft:
        targets = _lora_targets(cfg)
        pairs += [("--use_peft", "True"), ("--lora_r", cfg.rank), ("--lora_alpha", cfg.lora_alpha),
                  ("--lora_target_modules", targets or ["all-linear"]),
                  ("--use_dora", "True" if cfg.method == "dora" else None)]
        if cfg.method == "qlora":
            pairs += [("--load_in_4bit", "True"), ("--bnb_4bit_quant_type", "nf4"),
                      ("--use_bnb_nested_quant", "True")]
    if cfg.workload == "dpo":
        pairs += [("--beta", 0.1),
                  ("--precompute_ref_log_probs", "True" if cfg.precompute_ref else None)]
    if sharding:
        if cfg.fsdp:
            # TrainingArguments.fsdp's FSDPOption "hybrid_shard": HYBRID_SHARD over a node, an
            # FSDP1 strategy (transformers 5.24 _apply_legacy_fsdp_to_config raises it under
            # the default fsdp_config version 2), so the config asks for version 1
            shard = "hybrid_shard" if cfg.dp_shard else "full_shard"
            fsdp = f"{shard} auto_wrap" + (" offload" if cfg.offload != "none" else "")
            pairs.append(("--fsdp", fsdp))
            if cfg.dp_shard:
                pairs.append(("--fsdp_config", '{"version": 1}'))
        elif cfg.zero_stage or cfg.offload != "none":
            pairs.append(("--deepspeed", f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}"
                                         "_config.json"))
    return pairs


def _hf_script_args(job: Job, out: _Out, *, sharding: bool) -> tuple[str, list[list[str]]]:
    """TRL example script and its arguments (HfArgumentParser: TrainingArguments, TRL
    ModelConfig and the workload's config). ``sharding``: add --deepspeed/--fsdp."""
    cfg = job.cfg
    _offload_optimizer(job, out)
    if cfg.method == "freeze":
        out.refuse("method freeze (train only the last layers) in TRL scripts",
                   "use --format llamafactory (finetuning_type freeze)")
    if cfg.method == "qlora" and cfg.quant_format != "nf4":
        out.refuse(f"QLoRA on a {cfg.quant_format} base in TRL's --load_in_4bit (bitsandbytes NF4)",
                   "use --format llamafactory with a GPTQ checkpoint")
    if cfg.workload == "dpo" and not cfg.reference:
        out.refuse("reference-free DPO (--kl 0) in TRL's dpo.py",
                   "use --format llamafactory (pref_loss simpo)")
    pairs: list[tuple[str, Any]] = [
        ("--model_name_or_path", job.model_path),
        ("--dataset_name", "$DATASET"),
        ("--output_dir", "output"),
        ("--per_device_train_batch_size", cfg.micro_batch_size),
        ("--gradient_accumulation_steps", cfg.grad_accum),
        ("--max_length", cfg.seq_len),
        # transformers 5.24 renames it --activation_checkpointing (the old name is a deprecated
        # alias until v6, with a FutureWarning); 5.6.0 has no such field, and TRL 1.16 allows
        # transformers >= 4.56.2, so the old name is the one every targeted version reads
        ("--gradient_checkpointing", str(cfg.checkpointing != "none")),
        ("--bf16", "True" if job.precision in ("bf16", "fp8") else None),
        ("--fp16", "True" if job.precision == "fp16" else None),
        ("--dtype", "bfloat16" if cfg.pure_16bit else None),
        ("--optim", _hf_optim(cfg, out)),
        ("--max_grad_norm", GRADIENT_CLIPPING),
        ("--attn_implementation", "flash_attention_2" if cfg.flash_attention else "eager"),
        ("--torch_compile", "True" if cfg.compiled else None),
        ("--use_liger_kernel", "True" if cfg.chunked_loss or cfg.framework == LIGER else None),
    ]
    groups = _flags(pairs + _hf_method_pairs(cfg, sharding=sharding))
    _fp8(job, out)
    _checkpointing_warning(job, out, "gradient_checkpointing")
    if cfg.workload == "pretrain":
        out.note("pretrain: sft.py on a plain-text dataset (its 'text' column), no chat template")
    out.note(f"{TRL_SCRIPTS[cfg.workload]}: TRL's example script (github.com/huggingface/trl, "
             "trl/scripts or examples/scripts); any HF Trainer script with these arguments works")
    if cfg.pure_16bit:
        out.note(f"--dtype: TRL {TRL_VERSIONS}; older TRL versions take --torch_dtype")
    return TRL_SCRIPTS[cfg.workload], groups


# ---------------------------------------------------------------------------------------------
# torchrun
# ---------------------------------------------------------------------------------------------
def export_torchrun(job: Job, out: _Out) -> ExportResult:
    """A torchrun launch script for the job (HF Trainer or Megatron-LM arguments)."""
    cfg = job.cfg
    _need_not_rl(job, out)
    megatron = cfg.tp * cfg.pp * cfg.cp * cfg.ep > 1
    script, groups = (_megatron_args(job, out) if megatron
                      else _hf_script_args(job, out, sharding=True))
    if not megatron:
        _fsdp_offload_warning(job, out)
        if cfg.fsdp and cfg.dp_shard:
            out.note(f"--fsdp hybrid_shard: each node's {cfg.dp_shard} GPUs shard the states, the "
                     f"{cfg.dp // cfg.dp_shard} nodes replicate them; it is FSDP1's strategy "
                     "(fsdp_config version 1, which transformers marks deprecated)")
        if cfg.zero_stage or (cfg.offload != "none" and not cfg.fsdp):
            out.note(f"write the DeepSpeed config: planner export --format deepspeed --out "
                     f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}_config.json PLAN.json")
    _precision_note(job, out)
    head = ["torchrun", "--nnodes", str(job.num_hosts), "--nproc_per_node", str(job.per_node),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", "${MASTER_ADDR:-localhost}:29500",
            "--rdzv_id", "planner"]
    comments = ("Run on every node (MASTER_ADDR = the first node's address).",) \
        if job.num_hosts > 1 else ()
    env = ("DATASET",) if not megatron else ("DATA_PATH", "TOKENIZER")
    exports = (("CUDA_DEVICE_MAX_CONNECTIONS", "1"),) if megatron and cfg.tp * cfg.cp > 1 \
        else ()  # Megatron's validate_args asserts it for TP/CP (overlap of comm and compute)
    text = _script(job, out, _command(head, [[script], *groups]), env=env,
                   comments=comments, exports=exports)
    return out.result(text, "launch_torchrun.sh")


def _megatron_args(job: Job, out: _Out) -> tuple[str, list[list[str]]]:
    """Megatron-LM pretrain_gpt.py arguments of a tensor/pipeline-parallel plan."""
    cfg = job.cfg
    hint = "re-plan with --tp 1 --pp 1 for a DeepSpeed/FSDP launch"
    if cfg.workload not in ("pretrain", "sft"):
        out.refuse(f"{cfg.workload} with tp {cfg.tp}/pp {cfg.pp} (Megatron-LM trains "
                   "language models only)", hint)
    if cfg.method != "full":
        out.refuse(f"method {cfg.method} in Megatron-LM (full fine-tuning only)",
                   "use NeMo's PEFT recipes, or " + hint)
    if cfg.fsdp or cfg.zero_stage > 1:
        out.refuse(f"{'FSDP' if cfg.fsdp else f'ZeRO-{cfg.zero_stage}'} with tensor/pipeline "
                   "parallel (Megatron's distributed optimizer shards optimizer states only)",
                   hint)
    if cfg.offload != "none":
        out.refuse(f"offload {cfg.offload} with tensor/pipeline parallel", hint)
    if cfg.optimizer not in ("adamw", "sgd", "sgd-momentum"):
        out.refuse(f"optimizer {cfg.optimizer} in Megatron-LM (adam or sgd)", hint)
    recompute = {"none": [], "selective": [["--recompute-granularity", "selective"]],
                 "full": [["--recompute-granularity", "full"], ["--recompute-method", "uniform"],
                          ["--recompute-num-layers", "1"]]}[cfg.checkpointing]
    groups = _flags([
        ("--tensor-model-parallel-size", cfg.tp),
        ("--pipeline-model-parallel-size", cfg.pp),
        ("--context-parallel-size", cfg.cp if cfg.cp > 1 else None),
        # ModelParallelConfig.expert_model_parallel_size, an argument through
        # ArgumentGroupFactory (core_v0.17.1 argument_utils.py); expert tp defaults to tp
        ("--expert-model-parallel-size", cfg.ep if cfg.ep > 1 else None),
        ("--sequence-parallel", cfg.tp > 1),
        ("--micro-batch-size", cfg.micro_batch_size),
        ("--global-batch-size", cfg.global_batch_size),
        ("--seq-length", cfg.seq_len),
        ("--bf16", job.precision in ("bf16", "fp8")),
        ("--fp16", job.precision == "fp16"),
        ("--fp8-format", "hybrid" if job.precision == "fp8" else None),
        ("--use-distributed-optimizer", cfg.zero_stage == 1),
        ("--use-flash-attn", cfg.flash_attention),
        ("--optimizer", "adam" if cfg.optimizer == "adamw" else "sgd"),
        ("--sgd-momentum", 0.9 if cfg.optimizer == "sgd-momentum" else None),
        ("--clip-grad", GRADIENT_CLIPPING),
        ("--data-path", "$DATA_PATH"),
        ("--tokenizer-type", "HuggingFaceTokenizer"),
        ("--tokenizer-model", "$TOKENIZER"),
    ]) + recompute
    if cfg.workload == "sft":
        out.warn("sft with tp/pp: Megatron-LM's pretrain_gpt.py trains on packed token data; "
                 "prepare the SFT set as such (or use NeMo's fine-tuning recipe with the same "
                 "parallel sizes)")
    out.note(f"Megatron-LM: add {job.model}'s architecture flags (--num-layers, --hidden-size, "
             "--num-attention-heads, --group-query-attention, --ffn-hidden-size, "
             "--max-position-embeddings, ...) and --load for a checkpoint in Megatron format")
    return "pretrain_gpt.py", groups


# ---------------------------------------------------------------------------------------------
# Accelerate
# ---------------------------------------------------------------------------------------------
def _accelerate_sharding(job: Job, out: _Out) -> dict[str, Any]:
    """The Accelerate config's distributed_type and its FSDP or DeepSpeed section."""
    cfg = job.cfg
    if cfg.fsdp:
        _fsdp_offload_warning(job, out)
        _checkpointing_warning(job, out, "fsdp_activation_checkpointing")
        if cfg.dp_shard:
            out.note(f"HYBRID_SHARD: the states are sharded over each node's {cfg.dp_shard} GPUs "
                     f"and replicated over the {cfg.dp // cfg.dp_shard} nodes (as planned)")
        return {"distributed_type": "FSDP", "fsdp_config": {
            "fsdp_sharding_strategy": "HYBRID_SHARD" if cfg.dp_shard else "FULL_SHARD",
            "fsdp_offload_params": cfg.offload != "none",
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": True,
            "fsdp_activation_checkpointing": cfg.checkpointing != "none",
            # HYBRID_SHARD is FSDP1's ShardingStrategy; FSDP2 has none of that name
            **({"fsdp_version": 1} if cfg.dp_shard else {}),
        }}
    if cfg.zero_stage or cfg.offload != "none":
        return {"distributed_type": "DEEPSPEED", "deepspeed_config": {
            "zero_stage": cfg.zero_stage,
            "offload_optimizer_device": "cpu" if cfg.offload != "none" else "none",
            "offload_param_device": "cpu" if cfg.offload == "optimizer+params" else "none",
            "gradient_accumulation_steps": cfg.grad_accum,
            "gradient_clipping": GRADIENT_CLIPPING,
            "zero3_init_flag": cfg.zero_stage == 3,
            "zero3_save_16bit_model": cfg.zero_stage == 3,
        }}
    return {"distributed_type": "MULTI_GPU" if job.num_gpus > 1 else "NO"}


def export_accelerate(job: Job, out: _Out) -> ExportResult:
    """An Accelerate config (YAML) and launch line for the job."""
    cfg = job.cfg
    _need_not_rl(job, out)
    _need_data_parallel(job, out, "use --format torchrun (Megatron-LM arguments)")
    doc: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False,
                           **_accelerate_sharding(job, out)}
    if cfg.pure_16bit:
        out.warn("pure bf16 is not an Accelerate setting: the script loads the model in bf16 "
                 "(--dtype bfloat16 below)")
    mixed = {"bf16": "bf16", "fp16": "fp16", "fp32": "no", "fp8": "fp8"}[job.precision]
    doc.update({
        "machine_rank": 0,
        "main_training_function": "main",
        "mixed_precision": mixed,
        "num_machines": job.num_hosts,
        "num_processes": job.num_gpus,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    })
    if job.num_hosts > 1:
        doc.update({"main_process_ip": "FIRST_NODE_IP", "main_process_port": 29500})
        out.note("multi-node: set main_process_ip to the first node's address and "
                 "machine_rank to 0..num_machines-1 on each node")
    _precision_note(job, out)
    script, groups = _hf_script_args(job, out, sharding=False)
    if cfg.checkpointing != "none" and cfg.fsdp:
        groups = [g for g in groups if g[0] != "--gradient_checkpointing"]
        groups.append(["--gradient_checkpointing", "False"])
        out.note("FSDP recomputes through fsdp_activation_checkpointing, so the script's "
                 "gradient_checkpointing is False")
    launch = _command(["accelerate", "launch", "--config_file", "accelerate_config.yaml", script],
                      groups)
    header = [*out.title(job),
              f"# micro-batch {cfg.micro_batch_size} x accumulation {cfg.grad_accum} x dp "
              f"{cfg.dp} = {cfg.global_batch_size}, seq_len {cfg.seq_len}: the script's "
              "arguments below carry them", "# launch (DATASET set):"]
    header += ["#   " + line for line in launch.split("\n")]
    text = "\n".join(header) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    return out.result(text, "accelerate_config.yaml")
