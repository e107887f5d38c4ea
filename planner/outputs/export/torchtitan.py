"""torchtitan TOML job config and its ``torchrun -m torchtitan.train --job.config_file`` launch
(``export_torchtitan``).

Version targeted (TORCHTITAN_VERSIONS): torchtitan 0.2.2, git tag v0.2.2 (commit 73a0e697), the
last release read from a TOML file: main after it (b5bcd76) takes ``--module``/``--config`` from
a Python config_registry instead (github.com/pytorch/torchtitan/blob/b5bcd76/torchtitan/config/
manager.py). Every key written is a field of v0.2.2's JobConfig
(github.com/pytorch/torchtitan/blob/v0.2.2/torchtitan/config/job_config.py: Model, Optimizer,
Training, Parallelism, Checkpoint, ActivationCheckpoint, Compile), laid out as its shipped
torchtitan/models/llama3/train_configs/llama3_8b.toml; the launch is run_train.sh's torchrun
line at v0.2.2.

Semantics followed (job_config.py at v0.2.2):
* Training.local_batch_size is one data-parallel rank's batch per step, global_batch_size the
  step's batch (global / (local x dp) is the gradient accumulation); with pipeline parallel the
  local batch is cut into pipeline_parallel_microbatch_size micro-batches.
* data_parallel_shard_degree shards (FSDP2), data_parallel_replicate_degree replicates (DDP);
  both above 1 are HSDP (the plan's dp_shard and dp / dp_shard);
  Training.enable_cpu_offload moves parameters, gradients and optimizer states (FSDP2).
* Training.dtype bfloat16 keeps no fp32 weights; float32 with mixed_precision_param bfloat16 is
  the FSDP2 mixed precision; fp8 is the quantize.linear.float8 model converter.
* ActivationCheckpoint.mode none/full/selective, selective_ac_option "op" (per-op SAC).
* Optimizer.name Adam or AdamW (torchtitan/components/optimizer.py at v0.2.2), implementation
  fused/foreach.
* Models: llama3 (8B, 70B, 405B), qwen3, deepseek_v3 flavors (torchtitan/models/*/__init__.py at
  v0.2.2); LoRA and SFT datasets came after v0.2.2 (refused / warned).
"""

from __future__ import annotations

from typing import Any

from planner.outputs.export._common import (
    ExportResult,
    Job,
    _command,
    _Out,
    _precision_note,
    _toml_value,
)

TORCHTITAN_VERSIONS = "torchtitan 0.2.2 (JobConfig at git tag v0.2.2)"
# Catalog model -> (Model.name, Model.flavor) of torchtitan v0.2.2's model registry.
TORCHTITAN_MODELS: dict[str, tuple[str, str]] = {
    "llama-3-8b": ("llama3", "8B"), "llama-3.1-8b": ("llama3", "8B"),
    "llama-3-70b": ("llama3", "70B"), "llama-3.1-70b": ("llama3", "70B"),
    "llama-3.3-70b": ("llama3", "70B"), "llama-3.1-405b": ("llama3", "405B"),
    "qwen3-0.6b": ("qwen3", "0.6B"), "qwen3-4b": ("qwen3", "4B"), "qwen3-8b": ("qwen3", "8B"),
    "qwen3-32b": ("qwen3", "32B"), "qwen3-30b-a3b": ("qwen3", "30B-A3B"),
    "qwen3-235b-a22b": ("qwen3", "235B-A22B"), "deepseek-v3": ("deepseek_v3", "671B"),
}
# Learning-rate placeholder: llama3_8b.toml's optimizer.lr at v0.2.2 (tune it).
_LR = 3e-4


def _check(job: Job, out: _Out) -> None:
    """What torchtitan 0.2.2 cannot run (one-line refusals)."""
    cfg = job.cfg
    if cfg.workload not in ("pretrain", "sft"):
        out.refuse(f"{cfg.workload} in torchtitan (language-model training only)",
                   "use another framework's format")
    if job.model not in TORCHTITAN_MODELS:
        out.refuse(f"model {job.model} (torchtitan 0.2.2 has no model definition for it)",
                   f"use one of {', '.join(TORCHTITAN_MODELS)}, or another format")
    if cfg.method != "full":
        out.refuse(f"method {cfg.method} (torchtitan 0.2.2 trains full weights; its LoRA came "
                   "later, with Python configs instead of TOML)", "re-plan with --method full")
    if cfg.zero_stage:
        out.refuse(f"ZeRO-{cfg.zero_stage} (torchtitan shards with FSDP2)",
                   "re-plan with --sharding fsdp2")
    if job.precision == "fp16":
        out.refuse(f"fp16 on {job.gpu} (torchtitan trains in bfloat16 or float32)",
                   "re-plan with --precision fp32 or a GPU with bf16")
    if cfg.optimizer not in ("adamw",):
        out.refuse(f"optimizer {cfg.optimizer} (torchtitan 0.2.2 builds Adam or AdamW)",
                   "re-plan with --optimizer adamw")
    if cfg.paged_optimizer:
        out.refuse("a paged optimizer (torch AdamW only)", "re-plan without it")


def _parallelism(job: Job) -> dict[str, Any]:
    """The [parallelism] table: FSDP2 shard or DDP replicate degree, tp, pp, cp, and with
    expert parallelism expert_parallel_degree and expert_tensor_parallel_degree (= tp)."""
    cfg = job.cfg
    doc: dict[str, Any] = {
        "data_parallel_replicate_degree": cfg.dp // (cfg.dp_shard or cfg.dp) if cfg.fsdp
        else cfg.dp,
        "data_parallel_shard_degree": (cfg.dp_shard or cfg.dp) if cfg.fsdp else 1,
        "tensor_parallel_degree": cfg.tp, "pipeline_parallel_degree": cfg.pp,
        "context_parallel_degree": cfg.cp,
    }
    if cfg.ep > 1:  # ParallelismConfig at v0.2.2: etp is 1 or tp; the planner's experts split by tp
        doc["expert_parallel_degree"] = cfg.ep
        doc["expert_tensor_parallel_degree"] = cfg.tp
    if cfg.pp > 1:
        doc["pipeline_parallel_microbatch_size"] = cfg.micro_batch_size
        doc["pipeline_parallel_schedule"] = "1F1B"
    return doc


def _training(job: Job, out: _Out) -> dict[str, Any]:
    """The [training] table: batch, sequence, precision, offload."""
    cfg = job.cfg
    local = cfg.micro_batch_size * (cfg.grad_accum if cfg.pp > 1 else 1)
    doc: dict[str, Any] = {
        "local_batch_size": local, "global_batch_size": cfg.global_batch_size,
        "seq_len": cfg.seq_len, "max_norm": 1.0, "steps": 1000,
        "dataset": "c4" if cfg.workload == "pretrain" else "$DATASET",
        "enable_cpu_offload": cfg.offload != "none",
        "dtype": "bfloat16" if cfg.pure_16bit and job.precision != "fp32" else "float32",
        "mixed_precision_param": "float32" if job.precision == "fp32" else "bfloat16",
    }
    if cfg.offload == "optimizer":
        out.warn("enable_cpu_offload also moves the parameters and gradients (no "
                 "optimizer-only offload): less GPU memory, slower than planned")
    if cfg.workload == "sft":
        out.warn("sft: torchtitan 0.2.2 trains on text datasets (no chat template or prompt "
                 "masking); register your SFT set as a dataset and name it in training.dataset")
    if not cfg.fsdp and not cfg.pure_16bit and job.precision != "fp32":
        out.note("mixed_precision_param under DDP or one GPU: torch.autocast (job_config.py)")
    return doc


def _checkpointing(job: Job, out: _Out) -> dict[str, Any]:
    """The [activation_checkpoint] table."""
    cfg = job.cfg
    doc: dict[str, Any] = {"mode": cfg.checkpointing}
    if cfg.checkpointing == "selective":
        doc["selective_ac_option"] = "op"
        if cfg.selective_checkpointing != "op":
            out.warn("torchtitan's selective checkpointing is per-op SAC (selective_ac_option "
                     "op), not the plan's recomputation of the attention core only")
    return doc


def _no_effect(job: Job, out: _Out) -> None:
    """Plan settings with no torchtitan 0.2.2 key, stated."""
    cfg = job.cfg
    if cfg.chunked_loss or cfg.lm_head_vocab_chunk or cfg.loss_token_chunk_gib:
        out.warn("torchtitan 0.2.2 computes the fp32 cross-entropy over the whole sequence "
                 "(chunked loss came later): more memory than planned")
    if not cfg.flash_attention:
        out.note("attention: torchtitan 0.2.2 runs SDPA (its kernel choice is not a config key)")
    if cfg.fsdp_no_sync and cfg.grad_accum > 1:
        out.warn("FSDP2 in torchtitan reduce-scatters every micro-batch (no no_sync): more "
                 "communication, less memory than planned")
    if cfg.shard_embeddings or cfg.expand_kv_heads or cfg.fp32_trained_weights:
        out.note("embedding/head FSDP units, the k/v layout and fp32 sharded weights follow "
                 "torchtitan's own code (not config keys)")
    if cfg.offload_checkpoints or cfg.fused_lora_kernels:
        out.warn("offloaded checkpoints and fused LoRA kernels are not torchtitan options")


def export_torchtitan(job: Job, out: _Out) -> ExportResult:
    """A torchtitan job config (TOML) and its torchrun line for the job."""
    _check(job, out)
    cfg = job.cfg
    name, flavor = TORCHTITAN_MODELS[job.model]
    assets = f"./assets/hf/{job.model_path.rsplit('/', 1)[-1]}"
    model: dict[str, Any] = {"name": name, "flavor": flavor, "hf_assets_path": assets}
    if job.precision == "fp8":
        model["converters"] = ["quantize.linear.float8"]
    optimizer = {"name": "AdamW", "lr": _LR, "eps": 1e-8,
                 "implementation": "fused" if cfg.fused_optimizer else "foreach"}
    checkpoint: dict[str, Any] = {"enable": True, "folder": "checkpoint", "interval": 500}
    if cfg.workload == "sft":
        checkpoint.update({"initial_load_path": assets, "initial_load_in_hf": True,
                           "initial_load_model_only": True})
    tables = {"job": {"dump_folder": "./outputs", "description": job.label}, "model": model,
              "optimizer": optimizer, "training": _training(job, out),
              "parallelism": _parallelism(job), "checkpoint": checkpoint,
              "activation_checkpoint": _checkpointing(job, out),
              "compile": {"enable": cfg.compiled, "components": ["model", "loss"]}}
    _no_effect(job, out)
    _precision_note(job, out)
    out.note(f"optimizer.lr {_LR} and training.steps 1000 are placeholders (llama3_8b.toml's "
             "values): set them for your data")
    out.note(f"download the tokenizer{' and weights' if cfg.workload == 'sft' else ''}: "
             f"python scripts/download_hf_assets.py --repo_id {job.model_path} --assets "
             + ("tokenizer safetensors" if cfg.workload == "sft" else "tokenizer"))
    launch = launch_line(job)
    header = [*out.title(job),
              f"# micro-batch {cfg.micro_batch_size} x accumulation {cfg.grad_accum} x dp "
              f"{cfg.dp} = {cfg.global_batch_size}, seq_len {cfg.seq_len}", "# launch:"]
    header += ["#   " + line for line in launch.split("\n")]
    return out.result("\n".join(header) + "\n\n" + to_toml(tables), "torchtitan.toml")


def launch_line(job: Job) -> str:
    """run_train.sh's torchrun line (v0.2.2) for the plan's nodes and GPUs."""
    head = ["torchrun", "--nnodes", str(job.num_hosts), "--nproc_per_node", str(job.per_node),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", "${MASTER_ADDR:-localhost}:29500",
            "-m", "torchtitan.train"]
    return _command(head, [["--job.config_file", "torchtitan.toml"]])


def to_toml(tables: dict[str, dict[str, Any]]) -> str:
    """TOML of one level of tables holding strings, numbers, booleans and lists of them (JSON
    quoting of strings is valid TOML for the characters written here)."""
    lines: list[str] = []
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
        lines.append("")
    return "\n".join(lines)
