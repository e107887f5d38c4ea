"""Megatron-Bridge launch (``export_megatron_bridge``): torchrun of Megatron-Bridge's recipe
runner with the model's recipe, a training mode and Hydra-style ``KEY=VALUE`` overrides of its
ConfigContainer.

Semantics followed (NVIDIA-NeMo/Megatron-Bridge@v0.6.0, commit 51885cf1):
scripts/training/run_recipe.py (``--model <stem> --mode pretrain|sft|lora|dora --dataset
<preset>`` loads ``<stem>_{pretrain,sft,peft}_config``; trailing overrides go through
training/utils/omegaconf_utils.py process_config_with_overrides); training/config.py
ConfigContainer (model: the Megatron-Core GPTModelProvider with tensor/pipeline/context parallel
sizes, sequence_parallel and recompute_*; train.micro_batch_size, train.global_batch_size;
dataset.seq_length; optimizer: Megatron-Core's OptimizerConfig; mixed_precision: a recipe name
from training/mixed_precision.py such as bf16_mixed; peft: peft/lora.py LoRA dim, alpha,
target_modules; checkpoint.pretrained_checkpoint: a Megatron checkpoint, imported from Hugging
Face with scripts/conversion/convert.sh import). Recipes: src/megatron/bridge/recipes/ (llama2_7b
and deepseek_v3 have pretraining recipes only). Megatron-Bridge's own parser needs megatron-core
with Transformer Engine (no CPU-only install): tests check the overrides against these files'
field names.
"""

from __future__ import annotations

from typing import Any

from planner.outputs.export._common import ExportResult, Job, _command, _Out, _script
from planner.outputs.export._mcore import (
    RECIPE_STEMS,
    batch_comment,
    check_mcore,
    expert_parallel,
    kernel_notes,
    lora_modules,
    optimizer_fields,
    recipe_stem,
    recompute,
)

MEGATRON_BRIDGE_VERSIONS = "Megatron-Bridge 0.6.0 (NVIDIA-NeMo/Megatron-Bridge@v0.6.0)"
PRETRAIN_ONLY = ("llama2_7b", "deepseek_v3")  # no sft/peft recipe in 0.6.0
BRIDGE_PRECISION = {"bf16": "bf16_mixed", "fp16": "fp16_mixed",
                    "fp8": "bf16_with_fp8_current_scaling_mixed"}


def override(key: str, value: Any) -> str:
    """One Hydra-style KEY=VALUE token (OmegaConf literals: true, null, [a,b])."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, list):
        text = "[" + ",".join(map(str, value)) + "]"
    else:
        text = str(value)
    return f"{key}={text}"


def _mode(job: Job, out: _Out, stem: str) -> str:
    cfg = job.cfg
    if cfg.workload == "pretrain":
        return "pretrain"
    if stem in PRETRAIN_ONLY:
        out.refuse(f"{cfg.workload} of {job.model} (Megatron-Bridge 0.6.0 has a pretraining "
                   f"recipe only for {stem})", "use --format torchrun or nemo")
    return cfg.method if cfg.is_peft else "sft"


def bridge_settings(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """(ConfigContainer field, value) of every plan setting, in the launch's order."""
    cfg = job.cfg
    sets: list[tuple[str, Any]] = [
        ("model.tensor_model_parallel_size", cfg.tp),
        ("model.pipeline_model_parallel_size", cfg.pp),
        ("model.context_parallel_size", cfg.cp),
        ("model.sequence_parallel", cfg.tp > 1),
    ]
    sets += [(f"model.{k}", v) for k, v in expert_parallel(job).items()]
    sets += [(f"model.{k}", v) for k, v in recompute(job, out).items()]
    sets += [("train.micro_batch_size", cfg.micro_batch_size),
             ("train.global_batch_size", cfg.global_batch_size),
             ("dataset.seq_length", cfg.seq_len),
             ("mixed_precision", BRIDGE_PRECISION[job.precision])]
    sets += [(f"optimizer.{k}", v) for k, v in optimizer_fields(job).items()]
    sets.append(("optimizer.lr", 1e-4 if cfg.is_peft else 5e-6))
    if cfg.is_peft:
        sets += [("peft.dim", cfg.rank), ("peft.alpha", cfg.lora_alpha),
                 ("peft.target_modules", lora_modules(job, out))]
    if cfg.workload != "pretrain":
        sets.append(("checkpoint.pretrained_checkpoint", "$MEGATRON_CKPT"))
    return sets


def export_megatron_bridge(job: Job, out: _Out) -> ExportResult:
    """A torchrun launch of Megatron-Bridge's recipe runner for the job."""
    cfg = job.cfg
    check_mcore(job, out, methods=("full", "lora", "dora"))
    stem = recipe_stem(job, out, RECIPE_STEMS, where="Megatron-Bridge 0.6.0")
    mode = _mode(job, out, stem)
    sets = bridge_settings(job, out)
    kernel_notes(job, out)
    dataset = "mock" if mode == "pretrain" else "squad"
    if mode == "pretrain":
        out.note("pretrain: --dataset mock generates data; use --dataset megatron-indexed "
                 "dataset.data_path=<prefix> for your tokenized corpus")
    else:
        out.note(f"import the weights once: scripts/conversion/convert.sh import --hf-model "
                 f"{job.model_path} --megatron-path $MEGATRON_CKPT; --dataset squad is a "
                 "placeholder (local-jsonl with dataset.dataset_root for your data)")
    head = ["torchrun", "--nnodes", str(job.num_hosts), "--nproc_per_node", str(job.per_node),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", "${MASTER_ADDR:-localhost}:29500",
            "--rdzv_id", "planner", "scripts/training/run_recipe.py"]
    groups = [["--model", stem], ["--mode", mode], ["--dataset", dataset]]
    groups += [[override(k, v)] for k, v in sets]
    comments = [batch_comment(job)[2:], "Run from a Megatron-Bridge checkout (v0.6.0)."]
    if job.num_hosts > 1:
        comments.append("Run on every node (MASTER_ADDR = the first node's address).")
    env = () if mode == "pretrain" else ("MEGATRON_CKPT",)
    exports = (("CUDA_DEVICE_MAX_CONNECTIONS", "1"),) if cfg.tp * cfg.cp > 1 else ()
    text = _script(job, out, _command(head, groups), env=env, comments=tuple(comments),
                   exports=exports)
    return out.result(text, "launch_megatron_bridge.sh")
