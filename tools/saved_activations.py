"""Measure the bytes one transformer layer saves for backward, per token (CPU, no GPU needed).

    python tools/saved_activations.py > tests/data/saved_activations.json
    python tools/saved_activations.py --op-sac > tests/data/saved_activations_op_sac.json
    python tools/saved_activations.py --peft > tests/data/saved_activations_peft.json
    python tools/saved_activations.py --moe > tests/data/saved_activations_moe.json

Needs torch and transformers (optionally torchtune 0.3 and peft) in the environment; the planner
does not. For each implementation it builds one Llama-style decoder layer in bf16, runs a forward
pass over a batch of tokens and sums the distinct storages autograd keeps for backward
(parameters and buffers excluded), the quantity ``memory.layer_activation_bytes_per_token``
predicts:

- eager: ``torch.autograd.graph.saved_tensors_hooks`` sees every saved tensor.
- compiled: the layer goes through AOTAutograd with the min-cut rematerialisation partitioner
  (the partitioner torch.compile uses); the activations the forward graph returns for backward,
  at run time, are the saved set.
- working set (eager): the layer runs under activation checkpointing and a dispatch mode
  tracks every live storage; the peak during backward above what the forward left (the layer's
  output), weight gradients excluded, is what recomputing and back-propagating one layer needs
  (``memory.backward_working_set_bytes_per_token``).

- op-level selective checkpointing (--op-sac): the layer runs under
  torch.utils.checkpoint with torchtitan's selective policy (torchtitan
  torchtitan/models/llama3/parallelize.py _apply_ac_to_transformer_block: save the outputs of
  aten.mm except every second one, and of the attention kernel; recompute the rest), with the
  CPU flash-attention op in the save list in place of its CUDA twins; the bytes still
  referenced after the forward, the layer's input and output excluded, are what it keeps.

Methods: full (every weight trains), lora (rank-32 adapters on every matrix, base weights and
norms frozen) and lora-qv (adapters on q and v only).

- PEFT LoRA dropout (--peft, needs peft): the same layer with PEFT's own
  LoRA layers (peft.inject_adapter_in_model, r 32) at lora_dropout 0 and 0.05, on q, v and on
  every matrix. nn.Dropout runs torch's fused native_dropout (output + bool mask) on CUDA but
  a bernoulli mask in the input's dtype on the CPU (aten/src/ATen/native/Dropout.cpp
  is_fused_kernel_acceptable); the rows route F.dropout through torch.native_dropout, the op
  CUDA runs, and also give the CPU path's bytes ("cpu_dropout_bytes_per_token").

- token-choice MoE block (--moe): torchtitan's MoE layer as prime-rl runs it
  (PrimeIntellect-ai/prime-rl@d8f290ef src/prime_rl/trainer/models/layers/moe.py MoE.forward,
  pytorch/torchtitan@003edbe torchtitan/models/moe/moe.py): fp32 softmax router, top-k, tokens
  sorted by expert and gathered, the experts' SwiGLU, the routing scores multiplied into the
  expert outputs in fp32 (score_before_experts False, as its Qwen3-MoE and GLM-4-MoE models
  set), scatter_add back; experts trained and frozen. The bytes it saves (its input
  included) and the peak of its checkpointed backward above what the forward left, its input
  excluded (``moe_activations.score_grad_bytes_per_token``).

tests/test_memory.py compares the model with the recorded output.
"""

from __future__ import annotations

import json
import sys
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import checkpoint

SHAPES = (  # (hidden, ffn, heads, kv heads): Llama-3.2-3B and a multi-head shape
    (3072, 8192, 24, 8),
    (2048, 5632, 16, 16),
)
TOKENS = 256
# (implementation, attention kernel, method, compiled)
VARIANTS = (
    ("hf", "sdpa", "full", False), ("hf", "sdpa", "full", True), ("hf", "eager", "full", False),
    ("hf", "sdpa", "lora", False), ("hf", "sdpa", "lora-qv", False),
    ("torchtune", "sdpa", "full", False), ("torchtune", "sdpa", "full", True),
)


def _storages(tensors, exclude):
    seen = {}
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.dim() == 0:
            continue
        ptr = t.untyped_storage().data_ptr()
        if ptr not in exclude:
            seen[ptr] = t.untyped_storage().nbytes()
    return sum(seen.values())


def _constants(layer, extra):
    """Storages that are not activations: parameters, buffers, rotary tables."""
    return {t.untyped_storage().data_ptr()
            for t in (*layer.parameters(), *layer.buffers(), *extra)}


def _eager(layer, run, x, extra):
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        run(x, *extra)
    return _storages(saved, _constants(layer, extra))


def _compiled(layer, run, x, extra):
    from functorch.compile import (
        aot_module,
        make_boxed_func,
        min_cut_rematerialization_partition,
    )

    exclude = _constants(layer, extra)
    got = {}

    def fw(gm, _inputs):
        def call(*args):
            outs = gm(*args)
            # the outputs after the layer's own output are what backward reads
            got["bytes"] = _storages(outs[1:], exclude)
            return outs
        return make_boxed_func(call)

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x, *extra):
            return run(x, *extra)

    compiled = aot_module(Wrapped(), fw_compiler=fw,
                          bw_compiler=lambda gm, _i: make_boxed_func(gm.forward),
                          partition_fn=min_cut_rematerialization_partition)
    compiled(x, *extra)
    return got["bytes"]


class _LiveBytes(TorchDispatchMode):
    """Bytes of the storages created under the mode and still referenced by some tensor."""

    def __init__(self, ignore_ptrs, ignore_shapes):
        super().__init__()
        self.live, self.now, self.peak = {}, 0, 0
        self.ignore_ptrs, self.ignore_shapes = ignore_ptrs, ignore_shapes

    def _drop(self, key):
        entry = self.live.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                self.now -= entry[0]
                del self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in self.ignore_ptrs or not storage.nbytes() or tuple(t.shape) in \
                    self.ignore_shapes:
                continue
            if key not in self.live:
                self.live[key] = [storage.nbytes(), 0]
                self.now += storage.nbytes()
                self.peak = max(self.peak, self.now)
            self.live[key][1] += 1
            weakref.finalize(t, self._drop, key)
        return out


def _working_set(layer, run, x, extra, extra_shapes=frozenset()):
    """Peak live bytes while one checkpointed layer is recomputed and back-propagated."""
    shapes = set()  # weight gradients are the gradients term, not activations
    for shape in (*(tuple(p.shape) for p in layer.parameters()), *extra_shapes):
        shapes |= {shape, shape[::-1]}
    grad = torch.randn_like(x)
    mode = _LiveBytes(_constants(layer, (*extra, x, grad)), shapes)
    with mode:
        y = checkpoint(run, x, *extra, use_reentrant=False)
        after_forward = mode.now
        mode.peak = mode.now
        y.backward(grad)
    return mode.peak - after_forward


class _Lora(torch.nn.Module):
    """base(x) + B(A(x)) with a frozen base, as PEFT and torchtune add adapters."""

    def __init__(self, base, rank=32):
        super().__init__()
        self.base = base
        self.A = torch.nn.Linear(base.in_features, rank, bias=False, dtype=base.weight.dtype)
        self.B = torch.nn.Linear(rank, base.out_features, bias=False, dtype=base.weight.dtype)

    def forward(self, x):
        return self.base(x) + self.B(self.A(x))


LORA_TARGETS = {"lora": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                         "down_proj"), "lora-qv": ("q_proj", "v_proj")}


def _with_method(layer, method):
    if method == "full":
        return layer
    for p in layer.parameters():
        p.requires_grad_(False)
    for block in (layer.self_attn, layer.mlp):
        for name, child in list(block.named_children()):
            if name in LORA_TARGETS[method]:
                setattr(block, name, _Lora(child))
    return layer


def hf_layer(hidden, ffn, heads, kv, attention):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=ffn, num_attention_heads=heads,
                      num_key_value_heads=kv, head_dim=hidden // heads, num_hidden_layers=1,
                      vocab_size=128)
    cfg._attn_implementation = attention
    layer = LlamaDecoderLayer(cfg, 0).to(torch.bfloat16)
    pos = torch.arange(TOKENS)[None]
    probe = torch.zeros(1, TOKENS, hidden, dtype=torch.bfloat16)
    cos, sin = LlamaRotaryEmbedding(cfg)(probe, pos)

    def run(x, cos, sin):
        out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=(cos, sin))
        return out[0] if isinstance(out, tuple) else out
    return layer, run, (cos, sin)


def torchtune_layer(hidden, ffn, heads, kv):
    from torchtune.models.llama3_2._component_builders import llama3_2

    model = llama3_2(vocab_size=128, num_layers=1, num_heads=heads, num_kv_heads=kv,
                     embed_dim=hidden, max_seq_len=4096, intermediate_dim=ffn,
                     rope_base=500000, norm_eps=1e-5, scale_factor=32).to(torch.bfloat16)
    layer = model.layers[0]
    return layer, lambda x: layer(x), ()


def peft_layer(hidden, ffn, heads, kv, method, dropout):
    """An HF Llama layer with PEFT LoRA (r 32) on ``method``'s matrices, base frozen."""
    from peft import LoraConfig, inject_adapter_in_model

    layer, run, extra = hf_layer(hidden, ffn, heads, kv, "sdpa")
    for p in layer.parameters():
        p.requires_grad_(False)
    config = LoraConfig(r=32, lora_alpha=16, lora_dropout=dropout,
                        target_modules=list(LORA_TARGETS[method]))
    layer = inject_adapter_in_model(config, layer).to(torch.bfloat16).train()
    return layer, run, extra


def _native_dropout(x, p=0.5, training=True, inplace=False):
    """F.dropout as CUDA runs it: the fused native_dropout (saves a bool mask)."""
    if not training or p == 0:
        return x
    return torch.native_dropout(x, p, True)[0]


def peft_rows() -> list[dict]:
    rows = []
    functional = torch.nn.functional
    cpu_dropout = functional.dropout
    for hidden, ffn, heads, kv in SHAPES:
        for method in ("lora", "lora-qv"):
            for dropout in (0.0, 0.05):
                saved = {}
                for path, fn in (("cuda", _native_dropout), ("cpu", cpu_dropout)):
                    torch.manual_seed(0)
                    functional.dropout = fn
                    try:
                        layer, run, extra = peft_layer(hidden, ffn, heads, kv, method, dropout)
                        x = torch.randn(1, TOKENS, hidden, dtype=torch.bfloat16,
                                        requires_grad=True)
                        saved[path] = _eager(layer, run, x, extra)
                    finally:
                        functional.dropout = cpu_dropout
                rows.append({"implementation": "peft", "attention": "sdpa", "method": method,
                             "lora_dropout": dropout, "compiled": False, "hidden": hidden,
                             "ffn": ffn, "heads": heads, "kv_heads": kv, "tokens": TOKENS,
                             "lora_rank": 32, "bytes_per_token": saved["cuda"] / TOKENS,
                             "cpu_dropout_bytes_per_token": saved["cpu"] / TOKENS})
    return rows


# torchtitan's op-level save list (aten.mm and the attention kernels), with the CPU kernel.
SAC_SAVE = (
    "mm.default", "_scaled_dot_product_efficient_attention.default",
    "_scaled_dot_product_flash_attention.default",
    "_scaled_dot_product_flash_attention_for_cpu.default", "max.default",
)


def _op_sac_context():
    from collections import defaultdict

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = {getattr(torch.ops.aten, name.split(".")[0]).default for name in SAC_SAVE}
    counts = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            counts[key] += 1
        keep = func in save and not (func == torch.ops.aten.mm.default and counts[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def _op_sac_kept(layer, run, x, extra):
    """Bytes a layer keeps after its forward under op-level selective checkpointing."""
    mode = _LiveBytes(_constants(layer, (*extra, x)), set())
    with mode:
        y = checkpoint(run, x, *extra, use_reentrant=False, context_fn=_op_sac_context)
        kept = mode.now - y.untyped_storage().nbytes()
    y.sum().backward()  # the policy recomputes what it did not keep
    return kept


def op_sac_rows() -> list[dict]:
    rows = []
    for hidden, ffn, heads, kv in SHAPES:
        for method in ("full", "lora", "lora-qv"):
            torch.manual_seed(0)
            layer, run, extra = hf_layer(hidden, ffn, heads, kv, "sdpa")
            layer = _with_method(layer, method)
            x = torch.randn(1, TOKENS, hidden, dtype=torch.bfloat16, requires_grad=True)
            rows.append({"implementation": "hf", "attention": "sdpa", "method": method,
                         "policy": "op", "hidden": hidden, "ffn": ffn, "heads": heads,
                         "kv_heads": kv, "tokens": TOKENS, "lora_rank": 32,
                         "bytes_per_token": _op_sac_kept(layer, run, x, extra) / TOKENS})
    return rows


# (hidden, expert ffn, experts, experts per token): Qwen3-30B-A3B's MoE block and a small one
MOE_SHAPES = ((2048, 768, 128, 8), (1024, 512, 16, 4))


class _MoE(torch.nn.Module):
    """A token-choice MoE block in torchtitan's op sequence (module docstring, --moe); the
    experts run one after another, as its for-loop path (the grouped GEMM is CUDA only)."""

    def __init__(self, hidden, ffn, experts, top_k, train_experts):
        super().__init__()
        self.top_k = top_k
        self.router = torch.nn.Linear(hidden, experts, bias=False, dtype=torch.bfloat16)

        def weight(*shape):
            w = torch.empty(*shape, dtype=torch.bfloat16).normal_(0, 0.02)
            return torch.nn.Parameter(w, requires_grad=train_experts)
        self.w1, self.w3 = weight(experts, ffn, hidden), weight(experts, ffn, hidden)
        self.w2 = weight(experts, hidden, ffn)

    def forward(self, x):
        scores = torch.softmax(self.router(x).to(torch.float32), dim=1)
        top, idx = torch.topk(scores, self.top_k, dim=1)
        order = torch.argsort(idx.reshape(-1), stable=True)
        counts = torch.bincount(idx.reshape(-1), minlength=self.w1.shape[0]).tolist()
        tokens = (order // self.top_k).reshape(-1, 1).expand(-1, x.shape[1])
        routed = torch.gather(x, 0, tokens)
        outs, start = [], 0
        for e, n in enumerate(counts):
            r = routed[start:start + n]
            h = torch.nn.functional.silu(r @ self.w1[e].t()) * (r @ self.w3[e].t())
            outs.append(h @ self.w2[e].t())
            start += n
        out = (torch.cat(outs).to(torch.float32) * top.reshape(-1)[order].reshape(-1, 1))
        return torch.zeros_like(x).scatter_add(0, tokens, out.to(x.dtype))


def moe_rows() -> list[dict]:
    rows = []
    for hidden, ffn, experts, top_k in MOE_SHAPES:
        for train in (True, False):
            torch.manual_seed(0)
            block = _MoE(hidden, ffn, experts, top_k, train)
            x = torch.randn(TOKENS, hidden, dtype=torch.bfloat16, requires_grad=True)
            # the stacked expert weights' per-expert slices are weights too, not activations
            slices = {tuple(p.shape[1:]) for p in block.parameters() if p.dim() == 3}
            saved = _eager(block, block, x, ())
            working = _working_set(block, block, x, (), extra_shapes=slices)
            rows.append({"implementation": "torchtitan-moe", "hidden": hidden,
                         "expert_ffn": ffn, "experts": experts, "top_k": top_k,
                         "experts_train": train, "tokens": TOKENS,
                         "bytes_per_token": saved / TOKENS,
                         "working_set_bytes_per_token": working / TOKENS})
    return rows


def main() -> None:
    import transformers

    versions = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    try:
        import torchtune
        versions["torchtune"] = torchtune.__version__.split("+")[0]
    except ImportError:
        pass
    try:
        import peft
        versions["peft"] = peft.__version__
    except ImportError:
        pass
    if "--peft" in sys.argv[1:]:
        json.dump({"measured_with": versions, "rows": peft_rows()}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    for flag, measure in (("--op-sac", op_sac_rows), ("--moe", moe_rows)):
        if flag in sys.argv[1:]:
            json.dump({"measured_with": versions, "rows": measure()}, sys.stdout, indent=1)
            sys.stdout.write("\n")
            return
    rows = []
    for hidden, ffn, heads, kv in SHAPES:
        for impl, attention, method, compiled in VARIANTS:
            if impl == "torchtune" and "torchtune" not in versions:
                continue
            torch.manual_seed(0)
            layer, run, extra = (hf_layer(hidden, ffn, heads, kv, attention) if impl == "hf"
                                 else torchtune_layer(hidden, ffn, heads, kv))
            layer = _with_method(layer, method)
            x = torch.randn(1, TOKENS, hidden, dtype=torch.bfloat16, requires_grad=True)
            saved = (_compiled if compiled else _eager)(layer, run, x, extra)
            row = {"implementation": impl, "attention": attention, "method": method,
                   "compiled": compiled, "hidden": hidden, "ffn": ffn, "heads": heads,
                   "kv_heads": kv, "tokens": TOKENS, "bytes_per_token": saved / TOKENS}
            if not compiled and attention == "sdpa":
                row["working_set_bytes_per_token"] = _working_set(layer, run, x, extra) / TOKENS
            rows.append(row)
    json.dump({"measured_with": versions, "rows": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
