"""Parameter counts of a decoder-only transformer, from its architecture alone (no I/O).

Conventions (matching the Hugging Face implementations of the catalog's families):
- attention: q = h x (heads*head_dim), k and v = h x (kv_heads*head_dim), o = (heads*head_dim) x h;
  MLA (DeepSeek-V2/V3) replaces q/k/v by low-rank q_a/q_b and kv_a/kv_b (DeepSeek-V3 report, 2024).
- MLP: gated (SwiGLU/GeGLU: gate, up, down) or plain (GELU/ReLU: up, down), each h x ffn.
- MoE: router h x num_experts (gpt-oss: with a bias, ``router_bias``), every routed and shared
  expert is a gated MLP of its own size; Qwen2-MoE gates its shared expert with a sigmoid of a
  h x 1 linear (``shared_expert_gate``).
- attention sinks (gpt-oss, ``attention_sinks``): one learned logit per attention head per layer.
- norms: ``norms_per_layer`` per layer (RMSNorm h, LayerNorm 2h with bias or h without), Qwen3's
  q/k norms (head_dim each; OLMo-2's span heads*head_dim and kv_heads*head_dim), MLA's q_a/kv_a
  norms, one final norm unless ``final_norm`` is false, one after the embedding when
  ``embedding_norm``.
- learned positions: ``max_position_embeddings`` rows of h; OPT (the only ReLU family) allocates
  2 more rows (HF ``OPTLearnedPositionalEmbedding`` offset 2).

Every catalog architecture's total equals ``sum(p.numel() for p in model.parameters())`` of
transformers' ``AutoModelForCausalLM.from_config`` on the meta device: tools/param_counts.py records
those counts in tests/data/param_counts.yaml and tests/test_param_counts.py checks them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from planner.catalog.specs import ModelSpec, MoeSpec

ALL_LINEAR = "all-linear"
_OPT_POSITION_OFFSET = 2


@dataclass(frozen=True)
class Linear:
    """One weight-matrix shape in a layer, repeated ``count`` times (e.g. once per expert)."""

    name: str
    d_in: int
    d_out: int
    count: int
    bias: bool
    group: str  # "attention" | "mlp" | "expert" | "shared_expert" | "router"

    @property
    def weight_params(self) -> int:
        """Weight parameters of the projection(s), biases aside."""
        return self.d_in * self.d_out * self.count

    @property
    def params(self) -> int:
        """Parameters of the projection(s), biases included."""
        return (self.d_in + int(self.bias)) * self.d_out * self.count


@dataclass(frozen=True)
class ParamCounts:
    """A model's parameter counts by part."""
    total: int  # all parameters (MoE: all experts)
    active: int  # used per token (MoE: top-k + shared experts, dense parts, embeddings and head)
    embedding: int  # token embedding, learned positions, OPT project_in/out, embedding norm
    lm_head: int  # 0 when tied
    layers: int  # all transformer-layer params (weights + biases + norms)
    layer_linear: int  # layer weight matrices only (what QLoRA quantizes), no biases
    final_norm: int
    largest_layer: int  # params of the largest single layer (ZeRO-3 gather sizing)


def _norm_params(m: ModelSpec, dim: int) -> int:
    """RMSNorm has a weight of ``dim``; LayerNorm a weight and a bias (2*dim), or only the weight
    when ``layernorm_bias`` is false (MPT: transformers models/mpt/modeling_mpt.py sets
    ``norm_1.bias = norm_2.bias = norm_f.bias = None``, as MPT's no_bias checkpoints hold none)."""
    return 2 * dim if m.norm == "layernorm" and m.layernorm_bias else dim


def _moe_of_layer(m: ModelSpec, layer: int) -> MoeSpec | None:
    """The MoE block of ``layer``, or None for a dense layer (dense model or first_dense_layers)."""
    return m.moe if m.moe is not None and layer >= m.moe.first_dense_layers else None


def _mlp(m: ModelSpec, ffn: int, count: int, group: str, bias: bool) -> list[Linear]:
    """Gated MLP: gate, up (h x ffn) and down (ffn x h); plain MLP: up and down."""
    h = m.hidden_size
    ins = ["gate", "up"] if m.activation in ("swiglu", "geglu") else ["up"]
    return [Linear(n, h, ffn, count, bias, group) for n in ins] + [
        Linear("down", ffn, h, count, bias, group)
    ]


def _attention(m: ModelSpec) -> list[Linear]:
    """q, k, v, o (GQA/MQA via num_kv_heads), or MLA's q_a, q_b, kv_a, kv_b, o."""
    h, g = m.hidden_size, "attention"
    out_bias = m.attention_bias if m.attention_out_bias is None else m.attention_out_bias
    if m.mla is None:
        q, kv = m.num_attention_heads * m.head_dim, m.num_kv_heads * m.head_dim
        return [
            Linear("q", h, q, 1, m.attention_bias, g),
            Linear("k", h, kv, 1, m.attention_bias, g),
            Linear("v", h, kv, 1, m.attention_bias, g),
            Linear("o", q, h, 1, out_bias, g),
        ]
    a, heads = m.mla, m.num_attention_heads
    q_out = heads * (a.qk_nope_head_dim + a.qk_rope_head_dim)
    if a.q_lora_rank is None:
        qs = [Linear("q", h, q_out, 1, False, g)]
    else:
        qs = [
            Linear("q_a", h, a.q_lora_rank, 1, False, g),
            Linear("q_b", a.q_lora_rank, q_out, 1, False, g),
        ]
    return qs + [
        Linear("kv_a", h, a.kv_lora_rank + a.qk_rope_head_dim, 1, False, g),
        Linear("kv_b", a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim), 1, False, g),
        Linear("o", heads * a.v_head_dim, h, 1, out_bias, g),
    ]


@lru_cache(maxsize=4096)
def layer_linears(m: ModelSpec, layer: int) -> tuple[Linear, ...]:
    """Weight-matrix shapes of layer ``layer`` (0-based): attention, then the MLP or the MoE block.

    MoE layers (index >= ``first_dense_layers``) hold a router (h x E; a bias of E with
    ``router_bias``: gpt-oss, transformers models/gpt_oss/modeling_gpt_oss.py GptOssTopKRouter), E
    routed experts and the shared experts, each a gated MLP, and Qwen2-MoE's shared-expert gate
    (h x 1, no bias:
    transformers models/qwen2_moe/modeling_qwen2_moe.py ``shared_expert_gate``, grouped with the
    router: LoRA's all-linear skips both); earlier layers hold a dense MLP of ffn_hidden_size.
    """
    linears = _attention(m)
    moe = _moe_of_layer(m, layer)
    if moe is None:
        return tuple(linears + _mlp(m, m.ffn_hidden_size, 1, "mlp", m.mlp_bias))
    linears.append(Linear("router", m.hidden_size, moe.num_experts, 1, moe.router_bias, "router"))
    linears += _mlp(m, moe.expert_ffn_hidden_size, moe.num_experts, "expert", m.mlp_bias)
    if moe.num_shared_experts:
        shared = moe.shared_expert_ffn_hidden_size or moe.expert_ffn_hidden_size
        linears += _mlp(m, shared, moe.num_shared_experts, "shared_expert", m.mlp_bias)
    if moe.shared_expert_gate:
        linears.append(Linear("shared_expert_gate", m.hidden_size, 1, 1, False, "router"))
    return tuple(linears)


def layer_params(m: ModelSpec, layer: int) -> int:
    """sum(weights + biases of layer_linears) + norms_per_layer norms of h + the attention's norms.

    norms_per_layer: 2 (input and post-attention), 1 for Falcon-7B's parallel block with one
    ``input_layernorm`` (transformers models/falcon/modeling_falcon.py, parallel_attn without
    new_decoder_architecture), 4 for Gemma-2 (input, post-attention, pre- and post-feedforward:
    models/gemma2/modeling_gemma2.py). Attention norms: Qwen3's q_norm and k_norm, RMSNorm of
    head_dim each (models/qwen3/modeling_qwen3.py), OLMo-2's over the whole q and k projections
    (``qk_norm_full_width``: heads*head_dim and kv_heads*head_dim, models/olmo2/modeling_olmo2.py
    Olmo2Attention), and MLA's q_a and kv_a RMSNorms. gpt-oss's attention sinks: one parameter
    per attention head (models/gpt_oss/modeling_gpt_oss.py GptOssAttention ``sinks``).
    """
    params = sum(lin.params for lin in layer_linears(m, layer))
    params += m.norms_per_layer * _norm_params(m, m.hidden_size)
    if m.qk_norm_full_width:
        params += (m.num_attention_heads + m.num_kv_heads) * m.head_dim
    elif m.qk_norm:
        params += 2 * m.head_dim
    if m.mla is not None:
        params += m.mla.kv_lora_rank + (m.mla.q_lora_rank or 0)
    if m.attention_sinks:
        params += m.num_attention_heads
    return params


def vocab_matrix_params(m: ModelSpec) -> int:
    """vocab x e of the token embedding and of the LM head (e = word_embed_proj_dim or h: OPT-350m
    embeds at 512 and projects to h)."""
    return m.vocab_size * (m.word_embed_proj_dim or m.hidden_size)


def _embedding_params(m: ModelSpec) -> int:
    """vocab*e (e = word_embed_proj_dim or h) + learned positions + OPT project_in/out + norm."""
    h = m.hidden_size
    e = m.word_embed_proj_dim or h
    params = vocab_matrix_params(m)
    if m.position_embedding == "learned":
        offset = _OPT_POSITION_OFFSET if m.activation == "relu" else 0
        params += (m.max_position_embeddings + offset) * h
    if e != h:
        params += 2 * e * h  # project_in (e x h) and project_out (h x e), no bias
    if m.embedding_norm:
        params += _norm_params(m, h)
    return params


def _inactive_expert_params(m: ModelSpec, layer: int) -> int:
    """Routed experts a token skips in one MoE layer: (E - top_k) experts' weights and biases."""
    moe = _moe_of_layer(m, layer)
    if moe is None:
        return 0
    per_expert = sum(
        lin.params // lin.count for lin in layer_linears(m, layer) if lin.group == "expert"
    )
    return (moe.num_experts - moe.experts_per_token) * per_expert


@lru_cache(maxsize=256)
def count_params(m: ModelSpec) -> ParamCounts:
    """total = embedding + lm_head + sum(layer_params) + final_norm; lm_head = vocab*e untied.

    final_norm is 0 without one (OPT-350m's post-LN: transformers models/opt/modeling_opt.py
    builds ``final_layer_norm`` only when ``do_layer_norm_before``).

    active = total - sum over MoE layers of (E - top_k) * params of one routed expert
    (compute counts active experts, memory counts all: DESIGN.md section 4).
    """
    per_layer = [layer_params(m, i) for i in range(m.num_layers)]
    embedding = _embedding_params(m)
    lm_head = 0 if m.tied_embeddings else vocab_matrix_params(m)
    final_norm = _norm_params(m, m.hidden_size) if m.final_norm else 0
    total = embedding + lm_head + sum(per_layer) + final_norm
    inactive = sum(_inactive_expert_params(m, i) for i in range(m.num_layers))
    return ParamCounts(
        total=total,
        active=total - inactive,
        embedding=embedding,
        lm_head=lm_head,
        layers=sum(per_layer),
        layer_linear=sum(
            lin.weight_params for i in range(m.num_layers) for lin in layer_linears(m, i)
        ),
        final_norm=final_norm,
        largest_layer=max(per_layer),
    )


def is_adapted(lin: Linear, targets: Sequence[str]) -> bool:
    """Whether LoRA ``targets`` put an adapter on ``lin``: a Linear named in them, or with
    "all-linear" every attention, MLP and expert linear except the router (PEFT's
    ``target_modules="all-linear"``; the output head is no layer linear). The one home of the
    rule for the adapter counts, states and traffic."""
    return lin.group != "router" and (ALL_LINEAR in targets or lin.name in targets)


def lora_params(m: ModelSpec, rank: int, targets: Sequence[str]) -> int:
    """sum over layers and target Linears of rank * (d_in + d_out) * count.

    A LoRA adapter on a d_in x d_out matrix adds A (r x d_in) and B (d_out x r).

    ``targets`` are Linear names ("q", "v", "gate", ...) or "all-linear": every attention, MLP and
    expert linear except the router (PEFT's ``target_modules="all-linear"`` skips the output head).
    """
    return _lora_params(m, rank, tuple(targets))


@lru_cache(maxsize=1024)
def _lora_params(m: ModelSpec, rank: int, targets: tuple[str, ...]) -> int:
    return sum(
        rank * (lin.d_in + lin.d_out) * lin.count
        for i in range(m.num_layers)
        for lin in layer_linears(m, i)
        if is_adapted(lin, targets)
    )
