"""Measure what LitGPT's LoRA/QLoRA loop keeps alive between micro-batches (CPU, no GPU needed).

    python tools/held_outputs.py PATH/TO/litgpt > tests/data/held_outputs.json

PATH/TO/litgpt: the ``litgpt`` package folder of a Lightning-AI/litgpt checkout at 5895df1
(``git archive 5895df1 litgpt | tar -x``), the code the config-hub memory table ran; its own
model, LoRA and chunked_cross_entropy run here. Needs torch and PyYAML; the planner does not.

Two pieces cannot run on a CPU and are written out from their sources instead:

- bitsandbytes 0.42.0's MatMul4Bit (bitsandbytes/autograd/_functions.py), with the same
  autograd structure: forward runs ``F.linear(A, dequantize_4bit(B).to(A.dtype))`` and keeps
  ``ctx.tensors = (A, B)`` (``(None, B)`` for 0.43.2 and later, 9e753741) as an attribute of the
  ctx, not through save_for_backward; backward dequantises again for the input gradient. The
  dequantisation allocates the fp16 weight (the dtype Lightning quantized from) and copies it
  from a hidden fp16 copy; packed codes and absmax are stored as bitsandbytes does.
- Lightning Fabric's _FabricModule.forward with a 16-bit precision plugin: the default dtype
  bf16 inside the forward, every floating output cast to the default dtype (fp32) after it.

The loop is fit()'s at 5895df1: ``logits = model(input_ids, lm_head_chunk_size=128)``, the last
chunk sliced, chunked_cross_entropy, backward, the loss rebound to a float, gradients dropped.
tools/saved_activations.py's dispatch mode sums the storages created under it while some tensor
references them (parameters, buffers and the inputs excluded). Per row, for the second
micro-batch:

- held: bytes alive after the first micro-batch's step, before the second forward;
- after_forward: bytes alive when the second forward has returned and ``logits`` is rebound;
- forward_peak: the peak during the second forward (the first one's outputs still bound);
- backward_peak: the peak during its loss and backward.

tests/test_held_outputs.py compares them with planner/models/held_outputs.py.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from saved_activations import _LiveBytes  # noqa: E402  (the live-storage counter)

ROWS = (  # (method, bitsandbytes keeps A, LoRA targets, layers, hidden, heads, kv groups, ffn,
    #        vocab, micro-batch, seq): logits-bound shapes and one where the 4-bit head binds
    ("lora", False, "all", 2, 256, 8, 2, 704, 4096, 2, 512),
    ("lora", False, "qv", 2, 256, 8, 2, 704, 4096, 2, 512),
    ("qlora", True, "all", 2, 256, 8, 2, 704, 4096, 2, 512),
    ("qlora", True, "qv", 2, 256, 8, 2, 704, 4096, 2, 512),
    ("qlora", False, "qv", 2, 256, 8, 2, 704, 4096, 2, 512),
    ("qlora", True, "qv", 2, 1024, 8, 2, 2816, 8192, 1, 256),
)


class MatMul4Bit(torch.autograd.Function):
    """bitsandbytes 0.42.0 MatMul4Bit (keeps=True) or 0.43.2 (keeps=False), dequantisation
    emulated (module docstring)."""

    @staticmethod
    def forward(ctx, A, B, layer):
        output = F.linear(A, layer.dequantize().to(A.dtype))
        ctx.layer = layer
        if any(ctx.needs_input_grad[:2]):
            ctx.tensors = (A, B) if layer.keeps else (None, B)
        else:
            ctx.tensors = (None, None)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        grad_a = None
        if ctx.needs_input_grad[0]:
            grad_a = torch.matmul(grad_output, ctx.layer.dequantize().to(grad_output.dtype))
        return grad_a, None, None


class Linear4bit(torch.nn.Module):
    """A frozen nn.Linear stored as bitsandbytes NF4 (packed codes, fp32 absmax per 64)."""

    def __init__(self, linear: torch.nn.Linear, keeps: bool):
        super().__init__()
        n = linear.weight.numel()
        self.shape, self.keeps = tuple(linear.weight.shape), keeps
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed = torch.nn.Parameter(torch.zeros(n // 2, 1, dtype=torch.uint8),
                                         requires_grad=False)
        self.register_buffer("absmax", torch.zeros(n // 64, dtype=torch.float32))
        self.hidden = linear.weight.detach().to(torch.float16)  # stands in for the kernel

    def dequantize(self) -> torch.Tensor:
        out = torch.empty(self.shape, dtype=torch.float16)
        return out.copy_(self.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return MatMul4Bit.apply(x, self.packed, self)


def fabric_forward(model, *args, **kwargs):
    """_FabricModule.forward: forward_context (default dtype bf16), then convert_output."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        output = model(*args, **kwargs)
    finally:
        torch.set_default_dtype(previous)
    return [t.to(torch.get_default_dtype()) for t in output]


def _import_litgpt(folder: Path):
    """LitGPT's lora module and chunked_cross_entropy from a checkout, without the package's
    __init__ (tokenizer, prompts) or Lightning (utils imports it for other functions)."""
    def stub(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return type(attr, (), {"__init__": lambda self, *a, **k: None})
    for name in ("lightning", "lightning.fabric", "lightning.fabric.loggers",
                 "lightning.fabric.strategies", "lightning.fabric.utilities",
                 "lightning.fabric.utilities.load", "lightning.pytorch",
                 "lightning.pytorch.loggers"):
        mod = types.ModuleType(name)
        mod.__getattr__ = stub
        sys.modules.setdefault(name, mod)
    package = types.ModuleType("litgpt")
    package.__path__ = [str(folder)]
    sys.modules["litgpt"] = package
    import litgpt.model  # noqa: F401  (config imports it first, as litgpt/__init__ does)
    from litgpt.lora import GPT, Config, LoRALinear, mark_only_lora_as_trainable
    from litgpt.utils import chunked_cross_entropy
    return GPT, Config, LoRALinear, mark_only_lora_as_trainable, chunked_cross_entropy


def measure(litgpt, row) -> dict:
    GPT, Config, LoRALinear, mark_only_lora_as_trainable, chunked_cross_entropy = litgpt
    method, keeps, targets, layers, hidden, heads, groups, ffn, vocab, mb, seq = row
    every = targets == "all"
    config = Config(
        name="probe", block_size=seq, vocab_size=vocab, padded_vocab_size=vocab, n_layer=layers,
        n_head=heads, n_query_groups=groups, n_embd=hidden, rotary_percentage=1.0,
        parallel_residual=False, bias=False, norm_class_name="RMSNorm",
        mlp_class_name="LLaMAMLP", intermediate_size=ffn, lora_r=8, lora_alpha=16,
        lora_dropout=0.05, lora_query=True, lora_key=every, lora_value=True,
        lora_projection=every, lora_mlp=every, lora_head=every)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)  # Fabric's init_module under bf16-true
    model = GPT(config)
    torch.set_default_dtype(torch.float32)
    mark_only_lora_as_trainable(model)
    if method == "qlora":
        for module in list(model.modules()):
            if isinstance(module, LoRALinear):
                module.linear = Linear4bit(module.linear, keeps)
    model.max_seq_length = seq
    ignore = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    ignore |= {m.hidden.untyped_storage().data_ptr() for m in model.modules()
               if isinstance(m, Linear4bit)}
    batches = [torch.randint(0, vocab, (mb, seq)) for _ in range(2)]
    ignore |= {b.untyped_storage().data_ptr() for b in batches}
    mode = _LiveBytes(ignore, set())
    out: dict = {}
    with mode:
        for step, input_ids in enumerate(batches):
            mode.peak = mode.now
            logits = fabric_forward(model, input_ids, lm_head_chunk_size=128)
            out[f"after_forward {step}"], out[f"forward_peak {step}"] = mode.now, mode.peak
            logits[-1] = logits[-1][..., :-1, :]
            mode.peak = mode.now
            loss = chunked_cross_entropy(logits, input_ids[..., 1:])
            loss.backward()
            out[f"backward_peak {step}"] = mode.peak
            loss = loss.item()
            for p in model.parameters():
                p.grad = None
            out[f"held {step}"] = mode.now
    return {
        "method": method, "bitsandbytes_keeps_inputs": keeps, "targets": targets,
        "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": groups, "ffn": ffn,
        "vocab": vocab, "micro_batch": mb, "seq": seq,
        "held": out["held 0"], "after_forward": out["after_forward 1"],
        "forward_peak": out["forward_peak 1"], "backward_peak": out["backward_peak 1"],
    }


def main() -> None:
    folder = Path(sys.argv[1]).resolve()
    litgpt = _import_litgpt(folder)
    rows = [measure(litgpt, row) for row in ROWS]
    print(json.dumps({"measured_with": {"torch": torch.__version__,
                                        "litgpt": "Lightning-AI/litgpt@5895df1",
                                        "bitsandbytes": "0.42.0 MatMul4Bit, written out"},
                      "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
