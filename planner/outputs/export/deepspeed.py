"""DeepSpeed JSON (``export_deepspeed``).

Semantics followed (the flags DeepSpeed documents): train_batch_size = micro x accumulation x
data-parallel ranks; ZeRO offload of the optimizer runs DeepSpeed's CPU Adam; bf16/fp16 sections;
no FSDP.

Version targeted (DEEPSPEED_VERSIONS): DeepSpeed 0.19 (the config checked by 0.19.8's
DeepSpeedConfig).
"""

from __future__ import annotations

import json
from typing import Any

from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    ExportResult,
    Job,
    _checkpointing_warning,
    _ds_offload_name,
    _fp8,
    _hf_optim,
    _need_not_rl,
    _offload_optimizer,
    _Out,
    _precision_note,
)

DEEPSPEED_VERSIONS = "DeepSpeed 0.19.x (config checked with 0.19.8's DeepSpeedConfig)"


def _deepspeed_dict(job: Job, out: _Out) -> dict[str, Any]:
    """The DeepSpeed config of a data-parallel (ZeRO) plan."""
    cfg = job.cfg
    zero: dict[str, Any] = {"stage": cfg.zero_stage, "overlap_comm": True,
                            "contiguous_gradients": True}
    if cfg.offload != "none":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if cfg.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    if cfg.zero_stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    doc: dict[str, Any] = {
        "train_batch_size": cfg.micro_batch_size * cfg.grad_accum * cfg.dp,
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "gradient_clipping": GRADIENT_CLIPPING,
        "bf16": {"enabled": job.precision in ("bf16", "fp8")},
        "fp16": {"enabled": job.precision == "fp16", "loss_scale": 0, "loss_scale_window": 1000,
                 "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
        "zero_optimization": zero,
    }
    if cfg.optimizer != "adamw":
        doc["zero_allow_untested_optimizer"] = True
    if cfg.offload != "none":
        # ZeRO-Offload steps on the CPU with DeepSpeed's CPU Adam; "auto" takes the script's
        # hyper-parameters (HF Trainer / Accelerate integration).
        doc["optimizer"] = {"type": "AdamW", "params": {
            "lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}}
        out.note("optimizer: DeepSpeed CPU AdamW for the offloaded step; its 'auto' values come "
                 "from the HF Trainer/Accelerate script (replace them for a plain "
                 "deepspeed.initialize)")
    return doc


def export_deepspeed(job: Job, out: _Out) -> ExportResult:
    """A DeepSpeed config (JSON) for the job; refuses what DeepSpeed cannot express."""
    cfg = job.cfg
    _need_not_rl(job, out)
    _offload_optimizer(job, out)
    if cfg.fsdp:
        out.refuse("FSDP (a PyTorch wrapper, not a DeepSpeed option)",
                   "use --format accelerate (distributed_type FSDP) or torchrun")
    if cfg.pure_16bit:
        out.refuse("pure bf16 (DeepSpeed's bf16 optimizer keeps fp32 master weights)",
                   "use --format llamafactory (pure_bf16) or re-plan without it")
    if cfg.tp > 1 or cfg.pp > 1 or cfg.cp > 1:
        out.warn(f"tp {cfg.tp}, pp {cfg.pp}, cp {cfg.cp} are not DeepSpeed JSON fields: set them "
                 f"in Megatron-DeepSpeed's arguments; train_batch_size counts the {cfg.dp} "
                 "data-parallel ranks")
    doc = _deepspeed_dict(job, out)
    _fp8(job, out)
    _precision_note(job, out)
    if cfg.checkpointing == "none":
        out.note("activation checkpointing: off (do not enable gradient checkpointing in the "
                 "script)")
    else:
        out.note(f"activation checkpointing ({cfg.checkpointing}): enable it in the training "
                 "script (HF: gradient_checkpointing=True); DeepSpeed's activation_checkpointing "
                 "section only drives deepspeed.checkpointing in Megatron-style models")
        _checkpointing_warning(job, out, "HF gradient checkpointing")
    if cfg.optimizer != "adamw" or cfg.offload == "none":
        out.note(f"optimizer {cfg.optimizer}: created by the training script (HF optim "
                 f"{_hf_optim(cfg, out)!r}), not by this file")
    attn = "flash attention" if cfg.flash_attention else "eager attention"
    out.note(f"set in the training script, not in this file: method {cfg.method_label}, "
             f"sequence length {cfg.seq_len}, {attn}"
             + (", chunked loss" if cfg.chunked_loss else "")
             + (", torch.compile" if cfg.compiled else "")
             + (", precomputed reference log-probs" if cfg.precompute_ref else ""))
    out.note(f"launch on {job.num_gpus} GPUs: deepspeed --num_nodes {job.num_hosts} "
             f"--num_gpus {job.per_node} <script> --deepspeed ds_config.json")
    stage = f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}_config.json"
    return out.result(json.dumps(doc, indent=2) + "\n", stage)
