"""torchtune recipe YAML and its ``tune run`` launch (``export_torchtune``).

Version targeted (TORCHTUNE_VERSIONS): torchtune 0.6.1, git tag v0.6.1 (commit a6290a5b). The keys
written are the ones its recipes read (github.com/pytorch/torchtune/blob/v0.6.1/recipes/
full_finetune_distributed.py, lora_finetune_distributed.py, full_finetune_single_device.py,
lora_finetune_single_device.py, full_dpo_distributed.py, lora_dpo_distributed.py,
lora_dpo_single_device.py: ``cfg.batch_size``, ``cfg.gradient_accumulation_steps``,
``cfg.get("fsdp_cpu_offload")``, ``cfg.get("custom_sharded_layers")``,
``cfg.get("tensor_parallel_dim")``, ...), laid out as its shipped configs are
(recipes/configs/qwen2_5/7B_lora.yaml, llama3_1/70B_full.yaml at v0.6.1); the model, tokenizer
and checkpointer components are the builders of torchtune/models/<family>/__init__.py at v0.6.1.

Semantics followed:
* One GPU without FSDP or offload: the single-device recipe; otherwise the distributed recipe
  (FSDP2 over every rank, ``tune run --nproc_per_node``), which is also what offloads
  (``fsdp_cpu_offload``: FSDP2's CPUOffloadPolicy moves parameters, gradients and the optimizer
  step). Tensor parallel: full_finetune_distributed only (``tensor_parallel_dim``).
* ``dtype`` bf16 or fp32 (torchtune has no fp16 or master-weight mixed precision: bf16 keeps
  weights and optimizer states in bf16). LoRA: ``lora_attn_modules`` (q/k/v/output_proj),
  ``apply_lora_to_mlp`` (all three MLP projections at once); QLoRA: the LoRA builder with
  ``quantize_base`` (NF4); DoRA: ``use_dora``.
* Attention is PyTorch SDPA with k and v expanded to every head (no switch); torchtune's chunked
  loss is CEWithChunkedOutputLoss.

Each TrainConfig field is written, warned about, refused or stated to have no effect; PPO (the
single-device ppo_full_finetune recipe with four model components) is not written here.
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.catalog.launches import WRITES_FOR
from planner.outputs.export._common import (
    ExportResult,
    Job,
    _checkpointing_warning,
    _command,
    _offload_optimizer,
    _Out,
    _precision_note,
)

TORCHTUNE_VERSIONS = "torchtune 0.6.1 (recipes and configs at git tag v0.6.1)"
TORCHTUNE_WORKLOADS = WRITES_FOR["torchtune"][1]  # the workloads its recipes cover
# Catalog model -> (torchtune.models module, builder, checkpointer model_type); builders listed
# in torchtune/models/<module>/__init__.py at v0.6.1.
TORCHTUNE_MODELS: dict[str, tuple[str, str, str]] = {
    "llama-2-7b": ("llama2", "llama2_7b", "LLAMA2"),
    "llama-2-13b": ("llama2", "llama2_13b", "LLAMA2"),
    "llama-2-70b": ("llama2", "llama2_70b", "LLAMA2"),
    "llama-3-8b": ("llama3", "llama3_8b", "LLAMA3"),
    "llama-3-70b": ("llama3", "llama3_70b", "LLAMA3"),
    "llama-3.1-8b": ("llama3_1", "llama3_1_8b", "LLAMA3"),
    "llama-3.1-70b": ("llama3_1", "llama3_1_70b", "LLAMA3"),
    "llama-3.1-405b": ("llama3_1", "llama3_1_405b", "LLAMA3"),
    "llama-3.2-1b": ("llama3_2", "llama3_2_1b", "LLAMA3_2"),
    "llama-3.2-3b": ("llama3_2", "llama3_2_3b", "LLAMA3_2"),
    "llama-3.3-70b": ("llama3_3", "llama3_3_70b", "LLAMA3"),
    "mistral-7b": ("mistral", "mistral_7b", "MISTRAL"),
    "gemma-2-9b": ("gemma2", "gemma2_9b", "GEMMA2"),
    "qwen2-7b": ("qwen2", "qwen2_7b", "QWEN2"),
    "qwen2.5-0.5b": ("qwen2_5", "qwen2_5_0_5b", "QWEN2"),
    "qwen2.5-1.5b": ("qwen2_5", "qwen2_5_1_5b_base", "QWEN2"),
    "qwen2.5-3b": ("qwen2_5", "qwen2_5_3b", "QWEN2"),
    "qwen2.5-7b": ("qwen2_5", "qwen2_5_7b_base", "QWEN2"),
    "qwen2.5-14b": ("qwen2_5", "qwen2_5_14b_base", "QWEN2"),
    "qwen2.5-32b": ("qwen2_5", "qwen2_5_32b_base", "QWEN2"),
    "qwen2.5-72b": ("qwen2_5", "qwen2_5_72b_base", "QWEN2"),
}
# Tokenizer builder and the files it reads, by model module (torchtune/models/*/_tokenizer.py
# at v0.6.1: Llama 3 reads original/tokenizer.model, Qwen vocab.json and merges.txt).
_TOKENIZERS: dict[str, tuple[str, dict[str, str]]] = {
    "llama2": ("llama2.llama2_tokenizer", {"path": "tokenizer.model"}),
    "llama3": ("llama3.llama3_tokenizer", {"path": "original/tokenizer.model"}),
    "mistral": ("mistral.mistral_tokenizer", {"path": "tokenizer.model"}),
    "gemma2": ("gemma.gemma_tokenizer", {"path": "tokenizer.model"}),
    "qwen2": ("qwen2.qwen2_tokenizer", {"path": "vocab.json", "merges_file": "merges.txt"}),
    "qwen2_5": ("qwen2_5.qwen2_5_tokenizer",
                {"path": "vocab.json", "merges_file": "merges.txt"}),
}
_TOKENIZER_OF = {"llama3_1": "llama3", "llama3_2": "llama3", "llama3_3": "llama3"}
# LoRA builders without use_dora (torchtune/models/llama3_1/_model_builders.py at v0.6.1).
_NO_DORA = ("llama-3.1-405b",)
_ATTN = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "output_proj"}
_MLP = ("gate", "up", "down")
# Learning-rate placeholders, as torchtune's shipped configs set them (llama3_1/8B_full.yaml
# lr 2e-5, 8B_lora.yaml lr 3e-4 at v0.6.1): tune them for the data.
_LR = {"full": 2e-5, "peft": 3e-4}
_OPTIMIZERS = {"adamw": "torch.optim.AdamW", "adamw-8bit": "bitsandbytes.optim.AdamW8bit",
               "paged-adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit",
               "sgd": "torch.optim.SGD", "sgd-momentum": "torch.optim.SGD",
               "adafactor": "torch.optim.Adafactor"}


def recipe_of(job: Job) -> tuple[str, bool]:
    """(recipe name, distributed) of the job: single-device without FSDP/offload on one GPU."""
    cfg = job.cfg
    distributed = job.num_gpus > 1 or cfg.fsdp or cfg.offload != "none"
    kind = "lora" if cfg.is_peft else "full"
    if cfg.workload == "dpo":
        if kind == "full":
            return "full_dpo_distributed", True
        return f"lora_dpo_{'distributed' if distributed else 'single_device'}", distributed
    return f"{kind}_finetune_{'distributed' if distributed else 'single_device'}", distributed


def _check(job: Job, out: _Out) -> None:
    """The plan settings torchtune 0.6.1's recipes cannot run (one-line refusals)."""
    cfg = job.cfg
    if cfg.workload not in TORCHTUNE_WORKLOADS:
        out.refuse(f"{cfg.workload} in a torchtune recipe config (written: sft, dpo)",
                   "use --format torchrun or another framework's format")
    if job.model not in TORCHTUNE_MODELS:
        out.refuse(f"model {job.model} (torchtune 0.6.1 has no builder for it)",
                   f"use one of {', '.join(TORCHTUNE_MODELS)}, or another format")
    if cfg.method == "freeze":
        out.refuse("method freeze (torchtune trains full or adapter weights)",
                   "use --format llamafactory")
    if cfg.method == "dora" and job.model in _NO_DORA:
        out.refuse(f"DoRA on {job.model} (torchtune 0.6.1's "
                   f"lora_{TORCHTUNE_MODELS[job.model][1]} has no use_dora)",
                   "re-plan with --method lora")
    if cfg.method == "qlora" and cfg.quant_format != "nf4":
        out.refuse(f"QLoRA on a {cfg.quant_format} base (torchtune quantizes to NF4)",
                   "re-plan with an nf4 base")
    if cfg.pp > 1 or cfg.cp > 1:
        out.refuse(f"pipeline/context parallel (pp {cfg.pp}, cp {cfg.cp})",
                   "re-plan with --pp 1 --cp 1, or use --format torchtitan")
    if cfg.tp > 1 and recipe_of(job)[0] != "full_finetune_distributed":
        out.refuse(f"tp {cfg.tp} in {recipe_of(job)[0]} (tensor parallel: "
                   "full_finetune_distributed only)", "re-plan with --tp 1")
    if cfg.zero_stage:
        out.refuse(f"ZeRO-{cfg.zero_stage} (torchtune shards with FSDP2)",
                   "re-plan with --sharding fsdp2")
    if job.precision == "fp16":
        out.refuse(f"fp16 on {job.gpu} (torchtune's dtype is bf16 or fp32)",
                   "re-plan with --precision fp32 or a GPU with bf16")
    if cfg.optimizer_in_backward and cfg.is_peft:
        out.refuse("optimizer-in-backward with LoRA (torchtune's full recipes only)",
                   "re-plan without it")
    if cfg.workload == "dpo" and (not cfg.reference or cfg.precompute_ref):
        out.refuse("DPO without a live reference model (torchtune's DPO recipes run the "
                   "reference each step)", "re-plan with a reference and no --precompute-ref")
    _offload_optimizer(job, out)


def _model(job: Job, out: _Out) -> dict[str, Any]:
    """The model component: the base builder, or its lora_ builder with the adapter keys."""
    cfg = job.cfg
    module, builder, _ = TORCHTUNE_MODELS[job.model]
    if not cfg.is_peft:
        return {"_component_": f"torchtune.models.{module}.{builder}"}
    targets = set(_ATTN) | set(_MLP) if "all-linear" in cfg.lora_targets else \
        set(cfg.lora_targets)
    mlp = targets & set(_MLP)
    if mlp and mlp != set(_MLP):
        out.warn(f"LoRA on {', '.join(sorted(mlp))} only: torchtune's apply_lora_to_mlp adapts "
                 "all three MLP projections (more trainable parameters than planned)")
    model: dict[str, Any] = {
        "_component_": f"torchtune.models.{module}.lora_{builder}",
        "lora_attn_modules": [_ATTN[t] for t in ("q", "k", "v", "o") if t in targets],
        "apply_lora_to_mlp": bool(mlp), "apply_lora_to_output": False,
        "lora_rank": cfg.rank, "lora_alpha": cfg.lora_alpha, "lora_dropout": 0.0,
    }
    if cfg.method == "dora":
        model["use_dora"] = True
    if cfg.method == "qlora":
        model["quantize_base"] = True
    return model


def _files(job: Job) -> dict[str, Any]:
    """tokenizer and checkpointer of the model's Hugging Face download."""
    cfg = job.cfg
    module, _, model_type = TORCHTUNE_MODELS[job.model]
    folder = f"models/{job.model_path.rsplit('/', 1)[-1]}"
    builder, files = _TOKENIZERS[_TOKENIZER_OF.get(module, module)]
    tokenizer = {"_component_": f"torchtune.models.{builder}",
                 **{k: f"{folder}/{v}" for k, v in files.items()}, "max_seq_len": cfg.seq_len}
    checkpointer = {
        "_component_": "torchtune.training.FullModelHFCheckpointer", "checkpoint_dir": folder,
        "checkpoint_files": {"filename_format": "model-{}-of-{}.safetensors",
                             "max_filename": "SET_ME"},
        "recipe_checkpoint": None, "output_dir": "${output_dir}", "model_type": model_type}
    doc = {"tokenizer": tokenizer, "checkpointer": checkpointer}
    if recipe_of(job)[0] == "full_dpo_distributed":  # the frozen reference's own weights
        doc["ref_checkpointer"] = {**checkpointer}
    return doc


def _optimizer(job: Job, out: _Out) -> dict[str, Any]:
    """The optimizer component (lr a placeholder from torchtune's configs)."""
    cfg = job.cfg
    opt: dict[str, Any] = {"_component_": _OPTIMIZERS[cfg.optimizer],
                           "lr": _LR["peft" if cfg.is_peft else "full"]}
    if cfg.optimizer == "adamw":
        opt["fused"] = cfg.fused_optimizer
        opt["weight_decay"] = 0.01
    if cfg.optimizer == "adamw-8bit" and cfg.paged_optimizer:
        opt["_component_"] = _OPTIMIZERS["paged-adamw-8bit"]
    if cfg.optimizer == "adamw" and cfg.paged_optimizer:
        out.warn("paged fp32 AdamW: bitsandbytes' PagedAdamW32bit is not in torchtune's "
                 "configs; torch.optim.AdamW set (states in GPU memory)")
    if cfg.optimizer == "sgd-momentum":
        opt["momentum"] = 0.9
    out.note(f"optimizer.lr {opt['lr']} is a placeholder (torchtune's shipped value): tune it")
    return opt


def _training(job: Job, out: _Out, distributed: bool) -> dict[str, Any]:
    """batch, accumulation, precision, checkpointing, compile, loss and the FSDP keys."""
    cfg = job.cfg
    doc: dict[str, Any] = {
        "loss": {"_component_": "torchtune.modules.loss.CEWithChunkedOutputLoss"
                 if cfg.chunked_loss else "torch.nn.CrossEntropyLoss"},
        "batch_size": cfg.micro_batch_size, "gradient_accumulation_steps": cfg.grad_accum,
        "epochs": 1, "max_steps_per_epoch": None, "clip_grad_norm": None,
        "compile": cfg.compiled, "device": "cuda",
        "dtype": "fp32" if job.precision == "fp32" else "bf16",
        "enable_activation_checkpointing": cfg.checkpointing != "none",
        # the saved activations in host RAM (torchtune's OffloadActivations); Unsloth-style
        # offloaded checkpoints are the same tensors under checkpointing
        "enable_activation_offloading": cfg.offload_activations or (
            cfg.offload_checkpoints and cfg.checkpointing != "none"),
    }
    if cfg.offload_activations and cfg.checkpointing == "none":  # the recipes raise
        out.refuse("activation offloading without checkpointing (torchtune 0.6.1's recipes "
                   "require enable_activation_checkpointing)", "re-plan with --checkpointing full")
    if cfg.workload == "dpo":
        doc["loss"] = {"_component_": "torchtune.rlhf.loss.DPOLoss", "beta": 0.1}
    if job.precision == "fp8":
        out.warn("fp8 has no switch in torchtune 0.6.1's fine-tuning recipes: bf16 set; "
                 "slower than planned")
    if job.precision != "fp32" and not cfg.pure_16bit:
        out.warn("torchtune's bf16 keeps weights and optimizer states in bf16 (no fp32 master "
                 "weights): less memory than planned")
    _checkpointing_warning(job, out, "enable_activation_checkpointing")
    if distributed and not cfg.fsdp:
        out.warn(f"{job.num_gpus} GPUs without FSDP: torchtune's distributed recipes shard "
                 "with FSDP2 (no DDP): less memory, more communication than planned")
    if distributed:
        doc["fsdp_cpu_offload"] = cfg.offload != "none"
        if cfg.shard_embeddings:
            doc["custom_sharded_layers"] = ["tok_embeddings", "output"]
        _fsdp_offload_warning_tt(job, out)
    elif cfg.shard_embeddings:
        out.note("shard_embeddings: no effect on one device without FSDP")
    if cfg.tp > 1:
        out.note("tensor_parallel_plan: torchtune's Llama plan (base_llama_tp_plan), which "
                 "names the projections every torchtune decoder shares")
        doc["tensor_parallel_dim"] = cfg.tp
        doc["tensor_parallel_plan"] = {"_component_": "torchtune.models.llama3.base_llama_tp_plan"}
    return doc


def _fsdp_offload_warning_tt(job: Job, out: _Out) -> None:
    if job.cfg.offload == "optimizer":
        out.warn("fsdp_cpu_offload also moves the parameters and gradients (no optimizer-only "
                 "offload): less GPU memory, slower than planned")


def _no_effect(job: Job, out: _Out) -> None:
    """Plan settings with no switch in torchtune's configs, stated."""
    cfg = job.cfg
    out.note("attention: PyTorch SDPA with k and v expanded to every head (torchtune's "
             "attention; flash_attention and expand_kv_heads are not config keys)")
    if cfg.fsdp_no_sync and cfg.grad_accum > 1:
        out.warn("FSDP2 in torchtune reduce-scatters every micro-batch (no no_sync): less "
                 "memory, more communication than planned")
    if cfg.lm_head_vocab_chunk or cfg.loss_token_chunk_gib or cfg.fused_lora_kernels:
        out.warn("fused head/loss kernels and fused LoRA kernels are not torchtune options: "
                 "more memory than planned")


def export_torchtune(job: Job, out: _Out) -> ExportResult:
    """A torchtune recipe config (YAML) and its ``tune run`` line for the job."""
    _check(job, out)
    cfg = job.cfg
    recipe, distributed = recipe_of(job)
    doc: dict[str, Any] = {"output_dir": f"output/{job.model}/{recipe}",
                           "model": _model(job, out), **_files(job)}
    doc["dataset"] = {"_component_": "torchtune.datasets.stack_exchange_paired_dataset"
                      if cfg.workload == "dpo" else "torchtune.datasets.alpaca_cleaned_dataset",
                      "packed": False}
    doc.update({"resume_from_checkpoint": False, "seed": None, "shuffle": True,
                "optimizer": _optimizer(job, out)})
    if not cfg.is_peft:  # the full recipes read it (full_finetune_single_device as an attribute)
        doc["optimizer_in_bwd"] = cfg.optimizer_in_backward
    doc["lr_scheduler"] = {"_component_": "torchtune.training.lr_schedulers."
                           "get_cosine_schedule_with_warmup", "num_warmup_steps": 100}
    doc.update(_training(job, out, distributed))
    doc["metric_logger"] = {"_component_": "torchtune.training.metric_logging.DiskLogger",
                            "log_dir": "${output_dir}/logs"}
    _no_effect(job, out)
    _precision_note(job, out)
    launch = launch_line(job, recipe, distributed)
    out.note("epochs 1, max_steps_per_epoch null: set the length of the run for your data")
    out.note("checkpointer.checkpoint_files: set max_filename to the last shard number of the "
             f"download (tune download {job.model_path} --output-dir "
             f"{doc['checkpointer']['checkpoint_dir']})")
    header = [*out.title(job),
              f"# micro-batch {cfg.micro_batch_size} x accumulation {cfg.grad_accum} x dp "
              f"{cfg.dp} = {cfg.global_batch_size}, seq_len {cfg.seq_len}", "# launch:"]
    header += ["#   " + line for line in launch.split("\n")]
    text = "\n".join(header) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    return out.result(text, "torchtune.yaml")


def launch_line(job: Job, recipe: str, distributed: bool) -> str:
    """The ``tune run`` command (torchrun's node and process options for a distributed
    recipe)."""
    head = ["tune", "run"]
    if distributed:
        head += ["--nnodes", str(job.num_hosts), "--nproc_per_node", str(job.per_node)]
        if job.num_hosts > 1:
            head += ["--rdzv_backend", "c10d", "--rdzv_endpoint",
                     "${MASTER_ADDR:-localhost}:29500"]
    return _command([*head, recipe], [["--config", "torchtune.yaml"]])
