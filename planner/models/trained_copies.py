"""PEFT's trained copies: adapters with the token embedding and the LM head trained beside them
(TrainConfig.peft_trains_embeddings).

PEFT's ``modules_to_save`` wraps each named module in a ModulesToSaveWrapper that keeps the
frozen original and trains a deep copy of it (huggingface/peft@012c0d5 src/peft/utils/other.py
ModulesToSaveWrapper: update deep-copies the original module per adapter, enable_adapters
freezes the original and trains the copy), so the copy has the dtype the base was loaded in,
and its gradient and optimizer states are a trained parameter's in that dtype: torch's AdamW
keeps its moments in the parameter's dtype (``torch.zeros_like(p)``), while DeepSpeed ZeRO keeps
an fp32 master and fp32 moments of every trained parameter and FSDP trains its fp32 flat
parameters. QwenLM/Qwen@2df8e8a finetune.py passes ``modules_to_save=["wte", "lm_head"]`` for
LoRA on a base (non-chat) checkpoint, to learn the ChatML tokens (README.md l. 674), on a model
loaded in bf16 on an A100 (README.md l. 157, automatic precision). Both modules are copied, tied
or not.

The copies' states are a fully trained model's (states.py, method full) per parameter, in the
base's dtype: pure 16-bit where the optimizer holds what the parameter holds (no ZeRO, no fp32
FSDP flat parameters), over the copied parameters of this GPU (the first pipeline stage holds
the embedding, the last the head). Their speed (the head's weight gradient, 2 x tokens x vocab
x h FLOPs) is not timed: the Qwen table shows 21.7 against 21.3 s/it at 8,192 tokens."""

from __future__ import annotations

from planner.catalog.params import count_params, vocab_matrix_params
from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models.states import (
    gradient_bytes,
    master_weight_bytes,
    optimizer_state_bytes,
    optimizer_step_bytes,
    params_on_gpu,
    weight_bytes,
)


def copied_params_on_gpu(model: ModelSpec, cfg: TrainConfig) -> float:
    """Parameters of the trained embedding and head copies on the most loaded rank: both on
    one pipeline stage, the larger at pp > 1; split over tp like the originals."""
    embedding = count_params(model).embedding
    head = vocab_matrix_params(model)
    return (embedding + head if cfg.pp == 1 else max(embedding, head)) / cfg.tp


def trained_copy_bytes(model: ModelSpec, cfg: TrainConfig, precision: str) -> dict[str, float]:
    """Bytes one GPU holds for the trained copies, by memory term (memory.phase_terms' names):
    the copies' weights (counted with the adapters), gradients, master weights, optimizer
    states and step temporaries; {} when the job trains no copies."""
    if not (cfg.is_peft and cfg.peft_trains_embeddings):
        return {}
    as_loaded = cfg.zero_stage == 0 and not (cfg.fsdp and cfg.fp32_trained_weights)
    full = cfg.model_copy(update={
        "method": "full", "lora_rank": None, "peft_trains_embeddings": False,
        "pure_bf16": cfg.pure_16bit or (as_loaded and precision != "fp32")})
    share = copied_params_on_gpu(model, cfg) / params_on_gpu(model, full)
    return {
        "adapters": weight_bytes(model, full, precision) * share,
        "gradients": gradient_bytes(model, full, precision) * share,
        "master_weights": master_weight_bytes(model, full, precision) * share,
        "optimizer_states": optimizer_state_bytes(model, full) * share,
        "optimizer_step": optimizer_step_bytes(model, full) * share,
    }
