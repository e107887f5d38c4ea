"""What LoRA dropout keeps for backward (memory.layer_activation_bytes_per_token)."""

from __future__ import annotations

from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models.states import adapted_linear_specs

QKV = frozenset({"q", "k", "v"})


def lora_dropout_on(cfg: TrainConfig) -> bool:
    """The adapters drop out their input (cfg.lora_dropout > 0; fused LoRA kernels run only
    without dropout, _fused_lora)."""
    return cfg.is_peft and cfg.lora_dropout > 0


def lora_dropout_bytes_per_token(model: ModelSpec, cfg: TrainConfig) -> float:
    """What LoRA dropout saves per token in one layer: each dropout's 16-bit output, the input
    lora_A's weight gradient reads, and its bool mask (torch native_dropout, the op nn.Dropout
    runs on CUDA, saves result1: 1 byte an element), 3 x d_in bytes per dropout module. PEFT
    gives every adapted matrix its own (huggingface/peft LoraLayer.update_layer: lora_dropout
    ModuleDict per adapter; q, k and v each drop out the shared input), as torchtune's
    LoRALinear does; LitGPT's fused LoRAQKVLinear drops out the shared input once
    (Lightning-AI/litgpt@2685705 litgpt/lora.py: F.linear(self.lora_dropout(x), self.lora_A),
    cfg.lora_dropout_shared_qkv). The input itself is then no longer kept for the adapters
    (_inputs_kept). A routed expert's dropout sees the k routed copies of a token. Measured:
    tools/saved_activations.py, PEFT 0.21 with lora_dropout 0.05 vs 0 on q, v and on every
    linear layer (tests/data/saved_activations_peft.json)."""
    if not lora_dropout_on(cfg):
        return 0.0
    k = model.moe.experts_per_token if model.moe is not None else 1
    inputs = 0
    shared_qkv = False
    for lin in adapted_linear_specs(model, cfg):
        if cfg.lora_dropout_shared_qkv and lin.name in QKV:
            if not shared_qkv:
                inputs += lin.d_in
            shared_qkv = True
            continue
        inputs += lin.d_in * (min(k, lin.count) if lin.group == "expert" else lin.count)
    return 3 * inputs
