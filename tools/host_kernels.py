"""Count the GPU kernels a Hugging Face decoder layer launches per training micro-batch (CPU).

    python tools/host_kernels.py > tests/data/host_kernels.json

Needs torch, transformers and peft in the environment; the planner does not. An eager PyTorch
training step has its host (Python, the dispatcher, autograd) launch every kernel of every
layer one after another; where the GPU's own work per kernel is shorter than the host's time
per launch, the step takes the host's time (host_launches.HOST_S_PER_KERNEL). This tool counts
the launches: it builds one Llama decoder layer (transformers' LlamaDecoderLayer, sdpa
attention) in bf16 on the CPU, runs a forward and a backward pass under a dispatch mode and
counts the ATen operators that would run a kernel on a GPU: every operator except views and
metadata-only ones (``func.is_view``, ``_unsafe_view``, ``detach``, ``alias``, ``empty*``,
``lift_fresh``). The CPU runs causal sdpa as one flash-attention operator forward and one
backward, as CUDA does. Counts do not depend on the layer's width or the token count
(checked: two shapes below), only on the code that runs.

Two layers: Llama's (RMSNorm in eager ops, rotary, SwiGLU: the modern decoder) and OPT's
(LayerNorm as one kernel, learned positions outside the layer, biases, ReLU: the GPT-2/OPT
family). Methods: full (every weight trains), lora (PEFT LoRA r 16, dropout 0, on every
matrix: peft.inject_adapter_in_model) and lora-qv (on q and v only). Backward is counted with every
gradient created fresh (the first micro-batch after ``zero_grad(set_to_none=True)``, the
Trainer's default); later micro-batches of an accumulation add one ``add_`` per trained tensor.
tests/test_host_launches.py checks host_launches.HOST_KERNELS_PER_LAYER against the recorded output.
"""

from __future__ import annotations

import json
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SHAPES = ((256, 512, 4, 2), (384, 1024, 6, 6))  # (hidden, ffn, heads, kv heads)
TOKENS = 64
# per architecture: every matrix of its layer (PEFT target names)
ARCHS = {"llama": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
         "opt": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]}
NO_KERNEL = {"_unsafe_view", "detach", "alias", "empty", "empty_like", "empty_strided",
             "lift_fresh", "new_empty", "new_empty_strided"}


class _Kernels(TorchDispatchMode):
    """Counts the operators that launch a kernel, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if not func.is_view and name not in NO_KERNEL:
            self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _layer(arch: str, shape: tuple[int, int, int, int], targets: list[str] | None):
    hidden, ffn, heads, kv = shape
    if arch == "llama":
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import (
            LlamaDecoderLayer,
            LlamaRotaryEmbedding,
        )

        cfg = LlamaConfig(hidden_size=hidden, intermediate_size=ffn, num_attention_heads=heads,
                          num_key_value_heads=kv, num_hidden_layers=1, vocab_size=128)
        cfg._attn_implementation = "sdpa"
        layer, rotary = LlamaDecoderLayer(cfg, 0), LlamaRotaryEmbedding(cfg)
    else:
        from transformers import OPTConfig
        from transformers.models.opt.modeling_opt import OPTDecoderLayer

        cfg = OPTConfig(hidden_size=hidden, ffn_dim=ffn, num_attention_heads=heads,
                        num_hidden_layers=1, vocab_size=128, dropout=0.0, attention_dropout=0.0)
        cfg._attn_implementation = "sdpa"
        layer, rotary = OPTDecoderLayer(cfg, 0), None
    layer = layer.to(torch.bfloat16)
    if targets:
        from peft import LoraConfig, inject_adapter_in_model

        layer = inject_adapter_in_model(
            LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=targets), layer)
        for name, p in layer.named_parameters():
            p.requires_grad = "lora_" in name
    return layer, rotary


def count(arch: str, shape: tuple[int, int, int, int], targets: list[str] | None
          ) -> dict[str, object]:
    """Kernels of one forward and one backward of the layer (inputs made outside the count)."""
    layer, rotary = _layer(arch, shape, targets)
    x = torch.randn(1, TOKENS, shape[0], dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(TOKENS)[None]
    kw = {"position_embeddings": rotary(x, pos)} if rotary is not None else {}
    grad = torch.randn(1, TOKENS, shape[0], dtype=torch.bfloat16)
    with _Kernels() as fwd:
        out = layer(x, attention_mask=None, position_ids=pos, **kw)
    out = out[0] if isinstance(out, tuple) else out
    with _Kernels() as bwd:
        out.backward(grad)
    return {"forward": sum(fwd.ops.values()), "backward": sum(bwd.ops.values()),
            "forward_ops": dict(sorted(fwd.ops.items())),
            "backward_ops": dict(sorted(bwd.ops.items()))}


def main() -> None:
    import peft
    import transformers

    rows: dict[str, dict[str, object]] = {}
    for arch, every in ARCHS.items():
        methods = {"full": None, "lora": every, "lora-qv": ["q_proj", "v_proj"]}
        for method, targets in methods.items():
            shapes = SHAPES if arch == "llama" else tuple((h, f, a, a) for h, f, a, _ in SHAPES)
            counts = [count(arch, s, targets) for s in shapes]
            if any((c["forward"], c["backward"]) != (counts[0]["forward"], counts[0]["backward"])
                   for c in counts):
                sys.exit(f"{arch} {method}: kernel counts differ between shapes")
            rows.setdefault(arch, {})[method] = counts[0]
    json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
               "peft": peft.__version__,
               "layers": {"llama": "LlamaDecoderLayer (sdpa)", "opt": "OPTDecoderLayer (sdpa)"},
               "archs": rows}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
