"""LitGPT YAML (``export_litgpt``): the ``--config`` file of ``litgpt pretrain``,
``litgpt finetune_full`` or ``litgpt finetune_lora``, whose keys are the arguments of the
script's ``setup()`` (LitGPT's CLI parses them with jsonargparse).

Version targeted (LITGPT_VERSIONS): LitGPT 0.5.13, read at Lightning-AI/litgpt@2685705 (the
0.5.13 version bump):
* github.com/Lightning-AI/litgpt/blob/2685705/litgpt/finetune/lora.py ``setup`` (lora_r, lora_alpha,
  lora_query/key/value/projection/mlp/head, quantize "bnb.nf4" / "bnb.nf4-dq", precision, devices,
  num_nodes, train, optimizer); quantization with several devices raises NotImplementedError, and
  with a "-mixed" precision a ValueError; on several devices ModelParallelStrategy (FSDP2
  ``fully_shard`` per Block) with ``checkpoint_wrapper`` on every Block; ``validate_args`` refuses
  ``train.max_norm`` and needs ``train.epochs``; the model is called with lm_head_chunk_size=128.
* .../litgpt/finetune/full.py ``setup``: FSDPStrategy(auto_wrap_policy={Block},
  activation_checkpointing_policy={Block}, cpu_offload=False) on several devices, else "auto".
* .../litgpt/pretrain.py ``setup`` (model_name, tokenizer_dir, precision Literal bf16-true /
  bf16-mixed / 32-true): FSDPStrategy(sharding_strategy="HYBRID_SHARD") on several devices, no
  activation checkpointing, ``torch.compile(model)`` always, fused AdamW on CUDA;
  ``validate_args`` needs train.max_tokens and train.max_norm and refuses train.epochs.
* .../litgpt/args.py TrainArgs (global_batch_size across data-parallel ranks, micro_batch_size
  per rank: accumulation = global / (devices x num_nodes) / micro; max_seq_length).
* .../litgpt/utils.py ``instantiate_bnb_optimizer``: quantized finetuning steps bitsandbytes'
  PagedAdamW and accepts an AdamW optimizer only.
* .../config_hub/finetune/llama-2-7b/lora.yaml: the layout of a shipped config.
"""

from __future__ import annotations

from typing import Any

from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    ExportResult,
    Job,
    _checkpointing_warning,
    _fp8,
    _need_data_parallel,
    _need_pretrain_or_sft,
    _Out,
    _precision_note,
    _yaml_config,
)

LITGPT_VERSIONS = ("LitGPT 0.5.13 (Lightning-AI/litgpt@2685705; checked with its jsonargparse "
                   "parser and the scripts' validate_args)")
# The LitGPT subcommand of each (workload, method) it trains.
LITGPT_COMMANDS = {("pretrain", "full"): "pretrain", ("sft", "full"): "finetune_full",
                   ("sft", "lora"): "finetune_lora", ("sft", "qlora"): "finetune_lora"}
# LitGPT's per-projection LoRA switches (lora_mlp covers all three MLP projections).
LITGPT_LORA_FLAGS = {"q": "lora_query", "k": "lora_key", "v": "lora_value",
                     "o": "lora_projection"}
_MLP = ("gate", "up", "down")
LEARNING_RATE = 2e-4  # a placeholder (LitGPT's config_hub LoRA value); the plan sets none
PRETRAIN_TOKENS = 3 * 10**12  # pretrain.py's default train.max_tokens: a placeholder
_OPTIMIZERS = {"adamw": "torch.optim.AdamW", "adamw-8bit": "bitsandbytes.optim.AdamW8bit",
               "paged-adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit",
               "sgd": "torch.optim.SGD", "sgd-momentum": "torch.optim.SGD",
               "adafactor": "torch.optim.Adafactor"}
_PAGED = {"adamw": "bitsandbytes.optim.PagedAdamW",
          "adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit"}


def litgpt_command(job: Job, out: _Out) -> str:
    """The LitGPT subcommand that trains the job; refuses a workload or method it lacks."""
    cfg = job.cfg
    _need_pretrain_or_sft(job, out, "LitGPT")
    command = LITGPT_COMMANDS.get((cfg.workload, cfg.method))
    if command is None:
        out.refuse(f"method {cfg.method} with {cfg.workload} (LitGPT: pretrain full; finetune "
                   "full, LoRA, QLoRA)", "re-plan with --method lora or full, or use --format "
                   "llamafactory")
    return command


def _recomputes(job: Job, command: str) -> bool:
    """LitGPT's finetune scripts checkpoint every Block on several devices, nothing else."""
    return job.num_gpus > 1 and command != "pretrain"


def _refusals(job: Job, out: _Out, command: str) -> None:
    """Plan settings LitGPT's scripts cannot run, each a one-line refusal."""
    cfg = job.cfg
    _need_data_parallel(job, out, "LitGPT trains data parallel only (FSDP); use --format "
                                  "torchrun (Megatron-LM arguments)")
    if cfg.method == "qlora":
        if cfg.quant_format != "nf4":
            out.refuse(f"QLoRA on a {cfg.quant_format} base (LitGPT quantizes with "
                       "bitsandbytes, quantize bnb.nf4-dq)", "re-plan with an NF4 base")
        if job.num_gpus > 1:
            out.refuse(f"QLoRA on {job.num_gpus} GPUs (LitGPT: quantization is not supported "
                       "for multi-GPU training)", "re-plan with --num-gpus 1 or --method lora")
        if cfg.optimizer != "adamw":
            out.refuse(f"{cfg.optimizer} with QLoRA (LitGPT's quantized finetuning steps "
                       "bitsandbytes' PagedAdamW only)", "re-plan with --optimizer adamw")
    if cfg.zero_stage:
        out.refuse(f"ZeRO-{cfg.zero_stage} (LitGPT has no DeepSpeed strategy; it shards with "
                   "FSDP)", "re-plan with --sharding fsdp")
    if cfg.offload != "none" or cfg.offload_checkpoints:
        what = f"offload {cfg.offload}" if cfg.offload != "none" else "activation offloading"
        out.refuse(f"{what} (LitGPT builds its FSDP strategy with cpu_offload=False and offers "
                   "no switch)", "re-plan with --offload none")
    if cfg.checkpointing != "none" and not _recomputes(job, command):
        where = "in pretraining" if command == "pretrain" else "on one GPU"
        out.refuse(f"activation checkpointing ({cfg.checkpointing}) {where} (LitGPT "
                   "checkpoints Blocks only when finetuning on several GPUs; no switch)",
                   "re-plan with --checkpointing none")
    if command == "pretrain" and job.precision == "fp16":
        out.refuse("fp16 in litgpt pretrain (precision: bf16-true, bf16-mixed or 32-true)",
                   "re-plan on a GPU with bf16")


def _precision(job: Job, out: _Out) -> str:
    """LitGPT's (Lightning Fabric's) precision string of the plan."""
    cfg = job.cfg
    _fp8(job, out)
    half = {"bf16": "bf16", "fp8": "bf16", "fp16": "16", "fp32": "32"}[job.precision]
    if cfg.method == "qlora":
        if not cfg.pure_16bit and half != "32":
            out.warn(f"quantized training runs {half}-true (LitGPT: quantization and mixed "
                     "precision is not supported): the adapter and its AdamW states in 16 bit, "
                     "not fp32 as planned: less memory")
        return f"{half}-true"
    if half == "32":
        return "32-true"
    return f"{half}-true" if cfg.pure_16bit else f"{half}-mixed"


def _lora_keys(job: Job, out: _Out) -> dict[str, Any]:
    """lora_r, lora_alpha and the per-projection switches of the plan's targets."""
    cfg = job.cfg
    targets = set(LITGPT_LORA_FLAGS) | set(_MLP) if "all-linear" in cfg.lora_targets \
        else set(cfg.lora_targets)
    keys: dict[str, Any] = {"lora_r": cfg.rank, "lora_alpha": cfg.lora_alpha,
                            "lora_dropout": 0.05}
    keys.update({flag: t in targets for t, flag in LITGPT_LORA_FLAGS.items()})
    mlp = targets & set(_MLP)
    keys["lora_mlp"] = bool(mlp)
    keys["lora_head"] = False
    if mlp and mlp != set(_MLP):
        out.warn(f"LoRA on {', '.join(sorted(mlp))} only: LitGPT's lora_mlp adapts every MLP "
                 "projection: more trainable parameters than planned")
    if cfg.method == "qlora":  # the NF4 the memory was planned with (cfg.nf4_double_quant)
        keys["quantize"] = "bnb.nf4-dq" if cfg.nf4_double_quant else "bnb.nf4"
    return keys


def _optimizer(job: Job, out: _Out) -> dict[str, Any]:
    """The optimizer's class_path and init_args (the learning rate a placeholder)."""
    cfg = job.cfg
    path = _PAGED.get(cfg.optimizer, _OPTIMIZERS[cfg.optimizer]) if cfg.paged_optimizer \
        else _OPTIMIZERS[cfg.optimizer]
    args: dict[str, Any] = {"lr": LEARNING_RATE}
    if "AdamW" in path:
        args["weight_decay"] = 0.0
    if cfg.optimizer == "sgd-momentum":
        args["momentum"] = 0.9
    if cfg.fused_optimizer and path == "torch.optim.AdamW":
        args["fused"] = True
    if cfg.method == "qlora" and not cfg.paged_optimizer:
        out.note("QLoRA: LitGPT steps bitsandbytes' PagedAdamW (32-bit states, paged to host "
                 "memory under pressure) whatever class_path says")
    out.note(f"optimizer.init_args.lr {LEARNING_RATE}: a placeholder, set your learning rate")
    return {"class_path": path, "init_args": args}


def _train(job: Job, out: _Out, command: str) -> dict[str, Any]:
    """The train section: batch sizes, sequence length and the script's required keys."""
    cfg = job.cfg
    train: dict[str, Any] = {"global_batch_size": cfg.global_batch_size,
                             "micro_batch_size": cfg.micro_batch_size,
                             "max_seq_length": cfg.seq_len}
    if command == "pretrain":
        train.update({"max_tokens": PRETRAIN_TOKENS, "max_norm": GRADIENT_CLIPPING})
        out.note(f"train.max_tokens {PRETRAIN_TOKENS}: LitGPT's default, set your token budget")
    else:
        train["epochs"] = 1
        out.note("train.epochs 1: set your epochs; LitGPT's finetune scripts take no max_norm "
                 "(they do not clip gradients)")
    return train


def _model_keys(job: Job, out: _Out, command: str) -> dict[str, Any]:
    """What the script loads: the checkpoint (finetuning) or config name and tokenizer."""
    repo = job.model_path
    if command != "pretrain":
        out.note(f"checkpoint_dir {repo}: LitGPT downloads and converts a Hugging Face repo id "
                 "on first use (auto_download_checkpoint); a local LitGPT checkpoint works too")
        return {"checkpoint_dir": repo}
    name = repo.rsplit("/", 1)[-1]
    out.note(f"model_name {name}: LitGPT's config name of {repo} (litgpt/config.py); tokenizer: "
             f"litgpt download {repo} --tokenizer_only true; continue from its weights with "
             f"initial_checkpoint_dir: checkpoints/{repo}")
    return {"model_name": name, "tokenizer_dir": f"checkpoints/{repo}"}


def _data(command: str, out: _Out) -> dict[str, Any]:
    if command == "pretrain":
        out.note("data: litgpt.data.TextFiles over data/train (.txt files): point it at your "
                 "corpus or name another LitGPT data module")
        return {"class_path": "litgpt.data.TextFiles",
                "init_args": {"train_data_path": "data/train"}}
    out.note("data: litgpt.data.Alpaca (downloaded); use litgpt.data.JSON with json_path for "
             "your own set")
    return {"class_path": "litgpt.data.Alpaca"}


def _strategy_messages(job: Job, out: _Out, command: str) -> None:
    """What LitGPT's fixed strategy does beyond the plan: FSDP on every multi-GPU run, its
    activation checkpointing, pretraining's per-node sharding."""
    cfg = job.cfg
    if job.num_gpus == 1 and cfg.fsdp:
        out.note("FSDP on one GPU: LitGPT runs strategy auto there (plain training, as the "
                 "plan's memory assumes with one rank)")
    if job.num_gpus > 1 and not cfg.fsdp:
        out.warn("LitGPT shards with FSDP whenever devices x num_nodes > 1 (no DDP): less memory "
                 "than planned, more communication")
    if command == "pretrain" and job.num_hosts > 1:
        out.warn(f"litgpt pretrain shards within each node (FSDP HYBRID_SHARD): states over "
                 f"{job.per_node} GPUs, replicated across nodes: more memory than planned")
    if _recomputes(job, command):
        if cfg.checkpointing == "none":
            out.warn("LitGPT finetunes on several GPUs with activation checkpointing on every "
                     "Block (no switch): less memory, ~1/3 more compute than planned")
        _checkpointing_warning(job, out, "LitGPT's per-Block checkpointing")
    if cfg.shard_embeddings and job.num_gpus > 1:
        out.warn("embedding and head stay in FSDP's root unit (LitGPT wraps Blocks only): more "
                 "memory than planned")


def _kernel_messages(job: Job, out: _Out, command: str) -> None:
    """Attention, loss and compilation: LitGPT's fixed choices against the plan's."""
    cfg = job.cfg
    if not cfg.flash_attention:
        out.note("attention: LitGPT calls scaled_dot_product_attention (flash kernels where the "
                 "GPU has them; no eager switch): less memory than planned")
    if not cfg.chunked_loss:
        out.note("loss: LitGPT computes cross-entropy in 128-token chunks (no switch): less "
                 "memory than planned")
    if command == "pretrain" and not cfg.compiled:
        out.note("litgpt pretrain compiles the model (torch.compile) always: faster than planned")
    if command != "pretrain" and cfg.compiled:
        out.warn("torch.compile has no switch in LitGPT's finetune scripts: slower than planned")
    out.note("no effect here: fsdp_no_sync, expand_kv_heads, lm_head_vocab_chunk, "
             "loss_holds_logits, fp32_trained_weights, fused_lora_kernels and "
             "loss_token_chunk_gib describe LitGPT's own behaviour (its profile), not settings")


def export_litgpt(job: Job, out: _Out) -> ExportResult:
    """A LitGPT config (YAML) for ``litgpt <command> --config litgpt.yaml``."""
    cfg = job.cfg
    command = litgpt_command(job, out)
    _refusals(job, out, command)
    doc: dict[str, Any] = _model_keys(job, out, command)
    doc["out_dir"] = f"out/{command}/{job.model}"
    doc["precision"] = _precision(job, out)
    doc.update({"devices": job.per_node, "num_nodes": job.num_hosts})
    if cfg.is_peft:
        doc.update(_lora_keys(job, out))
    doc["data"] = _data(command, out)
    doc["train"] = _train(job, out, command)
    doc["optimizer"] = _optimizer(job, out)
    _strategy_messages(job, out, command)
    _kernel_messages(job, out, command)
    _precision_note(job, out)
    launch = f"litgpt {command} --config litgpt.yaml"
    if job.num_hosts > 1:
        launch = f"MASTER_ADDR=<first node> MASTER_PORT=29500 NODE_RANK=<0..n-1> {launch}"
        out.note(f"multi-node: run the launch line on each of the {job.num_hosts} nodes "
                 "(Lightning Fabric reads MASTER_ADDR, MASTER_PORT and NODE_RANK)")
    text = _yaml_config(job, out, doc, launch=launch, batch_key="train.global_batch_size")
    return out.result(text, "litgpt.yaml")
