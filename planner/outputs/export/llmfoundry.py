"""LLM Foundry train YAML (``export_llmfoundry``): the config of ``composer
scripts/train/train.py llmfoundry.yaml`` (Composer's launcher starting LLM Foundry's train
script), a Hugging Face model through LLM Foundry's ``hf_causal_lm``.

Version targeted (LLMFOUNDRY_VERSIONS): llm-foundry 0.22.0 on Composer (mosaicml) 0.32.1, read
at mosaicml/llm-foundry@8c8dd48 (main after v0.21.0, the commit its profile cites; 0.22.0's wheel
holds the same files):
* github.com/mosaicml/llm-foundry/blob/8c8dd48/llmfoundry/utils/config_utils.py ``TrainConfig``
  (the keys a train YAML may hold, each typed; unknown keys are errors), ``update_batch_size_info``
  (device batch = global_train_batch_size / world size, accumulation = device batch /
  device_train_microbatch_size) and ``process_init_device`` (init_device mixed needs FSDP;
  tp_config needs strategy and tensor_parallel_degree).
* .../llmfoundry/command_utils/train.py: with one GPU ``fsdp_config`` and ``tp_config`` are
  dropped ("not applicable for single-GPU training. Reverting to DDP"), and with them activation
  checkpointing and CPU offload, which Composer applies through FSDP only.
* .../llmfoundry/optim/__init__.py: the registered optimizers (decoupled_adamw, decoupled_lionw,
  clip_lion, adalr_lion, no_op): no 8-bit, paged, SGD or Adafactor optimizer.
* .../llmfoundry/tp/ffn_tp_strategy.py: the one tensor-parallel strategy ("ffn") splits MPT's
  ``ffn.up_proj``/``ffn.down_proj`` only; Hugging Face models have no such layers.
* .../scripts/train/yamls/finetune/dbrx-lora-ft.yaml: the layout of a LoRA finetuning YAML
  (model.peft_config passed to PEFT's LoraConfig, fsdp_config mixed_precision PURE).
* Composer 0.32.1 composer/utils/parallelism.py ``FSDPConfig`` (sharding_strategy FULL_SHARD /
  NO_SHARD, cpu_offload: parameters and gradients on the CPU, activation_checkpointing).
"""

from __future__ import annotations

from typing import Any

from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    ExportResult,
    Job,
    _checkpointing_warning,
    _fp8,
    _fsdp_offload_warning,
    _lora_targets,
    _need_data_parallel,
    _need_pretrain_or_sft,
    _Out,
    _precision_note,
    _yaml_config,
)

LLMFOUNDRY_VERSIONS = ("llm-foundry 0.22.0 on Composer 0.32.1 (checked with its TrainConfig "
                       "and batch-size rules, and Composer's FSDPConfig)")
LEARNING_RATE = 1e-5  # a placeholder (llm-foundry's finetune YAMLs use 5e-6 to 1e-4)
# Placeholders for the data: LLM Foundry's own example sets (its finetune and pretrain YAMLs).
SFT_DATASET = "mosaicml/dolly_hhrlhf"
TEXT_DATA = "./my-copy-c4"
_PRECISION = {"bf16": "amp_bf16", "fp8": "amp_bf16", "fp16": "amp_fp16", "fp32": "fp32"}


def _refusals(job: Job, out: _Out) -> None:
    """Plan settings LLM Foundry cannot run, each a one-line refusal."""
    cfg = job.cfg
    _need_pretrain_or_sft(job, out, "LLM Foundry")
    if cfg.method not in ("full", "lora"):
        out.refuse(f"method {cfg.method} (LLM Foundry: full or LoRA through PEFT)",
                   "re-plan with --method lora or full, or use --format llamafactory")
    if cfg.tp > 1:
        out.refuse(f"tensor parallel {cfg.tp} (LLM Foundry's one TP strategy, ffn, splits MPT's "
                   "ffn layers only; Hugging Face models have none)", "re-plan with --tp 1")
    _need_data_parallel(job, out, "LLM Foundry trains data parallel only (FSDP); use --format "
                                  "torchrun (Megatron-LM arguments)")
    if cfg.zero_stage:
        out.refuse(f"ZeRO-{cfg.zero_stage} (LLM Foundry shards with FSDP, not DeepSpeed)",
                   "re-plan with --sharding fsdp")
    if cfg.optimizer != "adamw" or cfg.paged_optimizer:
        out.refuse(f"optimizer {cfg.optimizer}{' (paged)' if cfg.paged_optimizer else ''} "
                   "(LLM Foundry registers decoupled_adamw and Lion variants only)",
                   "re-plan with --optimizer adamw")
    if cfg.pure_16bit:
        out.refuse("pure bf16 (Composer keeps fp32 parameters and optimizer states under "
                   "amp_bf16)", "re-plan without pure bf16")
    if cfg.offload_checkpoints:
        out.refuse("activation offloading (fsdp_config.activation_cpu_offload is not in the "
                   "planner's model of LLM Foundry)", "re-plan without it")
    if job.num_gpus == 1 and (cfg.checkpointing != "none" or cfg.offload != "none"):
        what = f"offload {cfg.offload}" if cfg.offload != "none" \
            else f"activation checkpointing ({cfg.checkpointing})"
        out.refuse(f"{what} on one GPU (LLM Foundry drops fsdp_config on one GPU, and Composer "
                   "checkpoints and offloads through FSDP only)",
                   "re-plan with --checkpointing none --offload none, or on several GPUs")
    if not cfg.fsdp and cfg.offload != "none":
        out.refuse(f"offload {cfg.offload} without FSDP (Composer offloads through FSDP only)",
                   "re-plan with --sharding fsdp")


def _fsdp_config(job: Job, out: _Out) -> dict[str, Any] | None:
    """Composer's fsdp_config: FULL_SHARD for an FSDP plan, NO_SHARD (DDP's memory) for a
    data-parallel plan that recomputes activations; None for plain DDP or one GPU."""
    cfg = job.cfg
    if job.num_gpus == 1:
        if cfg.fsdp:
            out.note("FSDP on one GPU: LLM Foundry drops fsdp_config there (plain training, "
                     "as the plan's memory assumes with one rank)")
        return None
    if not cfg.fsdp and cfg.checkpointing == "none":
        return None
    _checkpointing_warning(job, out, "fsdp_config.activation_checkpointing")
    _fsdp_offload_warning(job, out)
    if not cfg.fsdp:
        out.note("fsdp_config with sharding_strategy NO_SHARD: data parallel as planned, with "
                 "Composer's activation checkpointing (it checkpoints through FSDP only)")
    return {"sharding_strategy": "FULL_SHARD" if cfg.fsdp else "NO_SHARD",
            "mixed_precision": "PURE", "activation_checkpointing": cfg.checkpointing != "none",
            "activation_checkpointing_reentrant": False, "activation_cpu_offload": False,
            "cpu_offload": cfg.offload != "none", "limit_all_gathers": True,
            "state_dict_type": "full"}


def _model(job: Job, out: _Out, *, fsdp: bool) -> dict[str, Any]:
    """The model section: hf_causal_lm, its checkpoint, attention and PEFT config."""
    cfg = job.cfg
    pretrained = cfg.workload != "pretrain"
    model: dict[str, Any] = {"name": "hf_causal_lm",
                             "pretrained_model_name_or_path": job.model_path,
                             "pretrained": pretrained,
                             "init_device": "mixed" if fsdp and pretrained else "cpu",
                             "use_flash_attention_2": cfg.flash_attention}
    if not cfg.flash_attention:
        out.note("attention: without use_flash_attention_2 transformers picks SDPA (no eager "
                 "softmax matrix): less memory than planned")
    if not pretrained:
        out.note("pretrain: hf_causal_lm with pretrained false builds the model from "
                 f"{job.model_path}'s config with fresh weights")
    if cfg.is_peft:
        targets = _lora_targets(cfg)
        model["peft_config"] = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": cfg.rank,
                                "lora_alpha": cfg.lora_alpha, "lora_dropout": 0.05,
                                "target_modules": "all-linear" if targets is None else targets}
    return model


def _loader(job: Job, out: _Out) -> dict[str, Any]:
    """The train_loader: LLM Foundry's finetuning loader (SFT) or text loader (pretrain)."""
    seq = job.cfg.seq_len
    if job.cfg.workload == "pretrain":
        out.note(f"train_loader: the text loader over streaming (MDS) shards in {TEXT_DATA}: "
                 "convert your corpus with scripts/data_prep/convert_dataset_hf.py")
        dataset: dict[str, Any] = {"local": TEXT_DATA, "split": "train", "shuffle": True,
                                   "max_seq_len": seq}
        return {"name": "text", "dataset": dataset, "drop_last": True, "num_workers": 8}
    out.note(f"train_loader: {SFT_DATASET} (LLM Foundry's example set) stands for your data "
             "(hf_name, or local files)")
    dataset = {"hf_name": SFT_DATASET, "split": "train", "max_seq_len": seq,
               "shuffle": True, "decoder_only_format": True}
    return {"name": "finetuning", "dataset": dataset, "drop_last": True, "num_workers": 8}


def _kernel_messages(job: Job, out: _Out) -> None:
    """Loss, compilation and the fields with no switch in an LLM Foundry YAML."""
    cfg = job.cfg
    if cfg.chunked_loss:
        out.warn("chunked loss: hf_causal_lm computes transformers' own cross-entropy over the "
                 "whole logits: more memory than planned")
    if cfg.fused_optimizer:
        out.note("fused optimizer: decoupled_adamw has no fused switch (same memory)")
    if cfg.shard_embeddings and cfg.fsdp:
        out.warn("embedding/head as FSDP units of their own: LLM Foundry wraps the decoder "
                 "blocks only: more memory than planned")
    out.note("no effect here: fsdp_no_sync, expand_kv_heads, lm_head_vocab_chunk, "
             "loss_holds_logits, fp32_trained_weights, fused_lora_kernels and "
             "loss_token_chunk_gib describe LLM Foundry's own behaviour (its profile), not "
             "settings")


def _launch(job: Job) -> str:
    head = f"composer -n {job.per_node}"
    if job.num_hosts > 1:
        head += (f" --world_size {job.num_gpus} --node_rank <0..n-1> --master_addr "
                 "<first node> --master_port 29500")
    return f"{head} scripts/train/train.py llmfoundry.yaml"


def export_llmfoundry(job: Job, out: _Out) -> ExportResult:
    """An LLM Foundry train YAML for ``composer scripts/train/train.py llmfoundry.yaml``."""
    cfg = job.cfg
    _refusals(job, out)
    fsdp = _fsdp_config(job, out)
    _fp8(job, out)
    doc: dict[str, Any] = {
        "max_seq_len": cfg.seq_len,
        "model": _model(job, out, fsdp=fsdp is not None),
        "tokenizer": {"name": job.model_path, "kwargs": {"model_max_length": cfg.seq_len}},
        "train_loader": _loader(job, out),
        "optimizer": {"name": "decoupled_adamw", "lr": LEARNING_RATE, "betas": [0.9, 0.95],
                      "eps": 1e-8, "weight_decay": 0.0},
        "scheduler": {"name": "cosine_with_warmup", "t_warmup": "100ba", "alpha_f": 0.1},
        "algorithms": {"gradient_clipping": {"clipping_type": "norm",
                                             "clipping_threshold": GRADIENT_CLIPPING}},
        "max_duration": "1ep",
        "global_train_batch_size": cfg.global_batch_size,
        "device_train_microbatch_size": cfg.micro_batch_size,
        "device_eval_batch_size": cfg.micro_batch_size,
        "precision": _PRECISION[job.precision],
        "seed": 17,
    }
    if fsdp is not None:
        doc["fsdp_config"] = fsdp
    if cfg.compiled:
        doc["compile_config"] = {}
    _kernel_messages(job, out)
    _precision_note(job, out)
    out.note(f"optimizer.lr {LEARNING_RATE} and max_duration 1ep: placeholders, set yours")
    out.note("composer is Composer's launcher; scripts/train/train.py is in the llm-foundry "
             "repository")
    text = _yaml_config(job, out, doc, launch=_launch(job), batch_key="global_train_batch_size")
    return out.result(text, "llmfoundry.yaml")
