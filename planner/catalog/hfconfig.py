"""Read a local Hugging Face ``config.json`` into a ModelSpec (no network).

Covers the decoder families in the catalog: Llama/Mistral/Qwen2/Qwen3/Gemma2/Gemma3 text/OLMo-2/
Granite (SwiGLU/GeGLU, rotary), Mixtral/Qwen2-MoE/Qwen3-MoE/GLM-4-MoE/DeepSeek-V3/gpt-oss (MoE),
OPT, GPT-NeoX, Falcon, BLOOM and MPT. The parameter count is computed from the architecture, so
``published_params_b`` is that count and says so; tests/test_param_counts.py reads the configs
transformers built for every catalog architecture (and Qwen2MoeConfig's defaults) through this
module and compares the counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.catalog.params import count_params
from planner.catalog.specs import ModelSpec
from planner.errors import PlannerError
from planner.inputs import capped, load_file, short

_GELU_FAMILIES = {"gpt_neox", "falcon", "bloom", "mpt", "gpt2", "gptj"}
_QKV_BIAS_ONLY = {"qwen2", "qwen2_moe", "glm4_moe"}
_NORM_CASTS_BACK = {"gemma", "gemma2", "gemma3_text", "olmo2", "gpt_oss"}
# Every key read as an integer (bools are not integers here); ModelSpec bounds the values.
_INT_KEYS = (
    "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head", "n_heads",
    "num_hidden_layers", "n_layer", "n_layers", "num_key_value_heads", "num_kv_heads",
    "intermediate_size", "ffn_dim", "n_inner", "head_dim", "vocab_size", "padded_vocab_size",
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "num_local_experts",
    "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_topk", "moe_intermediate_size",
    "n_shared_experts", "first_k_dense_replace", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "shared_expert_intermediate_size",
    "decoder_sparse_step",
)
_MLA_KEYS = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _first(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return default


def _activation(cfg: dict[str, Any], family: str) -> str:
    act = str(_first(cfg, "hidden_act", "activation_function", default="")).lower()
    if family == "opt" or act == "relu":
        return "relu"
    if family.startswith("gemma"):
        return "geglu"
    if family in _GELU_FAMILIES or (act.startswith("gelu") and family not in {"gemma", "gemma2"}):
        return "gelu"
    return "swiglu"


def _moe(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """The MoeSpec fields (validated with the ModelSpec), None for a dense model. Shared
    experts: n_shared_experts of the expert size (DeepSeek, GLM-4-MoE) or Qwen2-MoE's one shared
    expert of shared_expert_intermediate_size with its sigmoid gate. gpt-oss's router has a bias
    (transformers models/gpt_oss/modeling_gpt_oss.py GptOssTopKRouter)."""
    experts = _first(cfg, "num_local_experts", "num_experts", "n_routed_experts")
    if not experts or experts <= 1:
        return None
    qwen_shared = _first(cfg, "shared_expert_intermediate_size", default=0)
    return {
        "num_experts": experts,
        "experts_per_token": _first(cfg, "num_experts_per_tok", "moe_topk", default=2),
        "expert_ffn_hidden_size": _first(cfg, "moe_intermediate_size", "intermediate_size"),
        "num_shared_experts": 1 if qwen_shared else _first(cfg, "n_shared_experts", default=0),
        "shared_expert_ffn_hidden_size": qwen_shared or None,
        "shared_expert_gate": bool(qwen_shared),
        "first_dense_layers": _first_dense_layers(cfg),
        "router_bias": str(cfg.get("model_type", "")).lower() == "gpt_oss",
    }


def _first_dense_layers(cfg: dict[str, Any]) -> int:
    """Leading dense layers: DeepSeek/GLM first_k_dense_replace, or Qwen-MoE mlp_only_layers when
    they are 0..k-1 with decoder_sparse_step 1; other dense/sparse patterns are not modelled."""
    listed = cfg.get("mlp_only_layers") or []
    if not isinstance(listed, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in listed):
        raise PlannerError(f"mlp_only_layers {short(listed)} is not a list of layer indices")
    dense = sorted(listed)
    if _first(cfg, "decoder_sparse_step", default=1) != 1 or dense != list(range(len(dense))):
        raise PlannerError(
            f"MoE layers other than a dense prefix are not modelled (mlp_only_layers {dense}, "
            f"decoder_sparse_step {cfg.get('decoder_sparse_step')})"
        )
    return _first(cfg, "first_k_dense_replace", default=len(dense))


def _norms_per_layer(cfg: dict[str, Any], family: str) -> int:
    """Gemma-2 and Gemma-3 (text): 4 (sandwich); Falcon's parallel block: 1 unless the new
    architecture's ln_attn + ln_mlp (num_ln_in_parallel_attn 2, its default there); else 2."""
    if family in {"gemma2", "gemma3_text"}:
        return 4
    if family == "falcon" and cfg.get("parallel_attn", True):
        new = cfg.get("new_decoder_architecture")
        return 2 if new and cfg.get("num_ln_in_parallel_attn") in (None, 2) else 1
    return 2


def _mla(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """DeepSeek-V2/V3 multi-head latent attention (MlaSpec fields), when the config has
    kv_lora_rank."""
    if not cfg.get("kv_lora_rank"):
        return None
    return {"q_lora_rank": cfg.get("q_lora_rank"), "kv_lora_rank": cfg["kv_lora_rank"],
            "qk_nope_head_dim": cfg["qk_nope_head_dim"],
            "qk_rope_head_dim": cfg["qk_rope_head_dim"], "v_head_dim": cfg["v_head_dim"]}


def _typed(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """``cfg`` with its integer keys as ints (a whole float such as 4096.0 is taken); an MLA
    config (kv_lora_rank) has all its head sizes. PlannerError listing the problems else."""
    out, problems = dict(cfg), []
    for key in _INT_KEYS:
        value = cfg.get(key)
        if isinstance(value, float) and value.is_integer():
            out[key] = int(value)
        elif value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            problems.append(f"{key} {short(value)} is not an integer")
    missing = [key for key in _MLA_KEYS if cfg.get(key) is None]
    if cfg.get("kv_lora_rank") and missing:
        problems.append(f"kv_lora_rank (multi-head latent attention) needs {', '.join(missing)}")
    if problems:
        raise PlannerError(f"config.json {name!r}: {capped(problems)}")
    return out


def _block_fields(cfg: dict[str, Any], family: str, *, hidden: int) -> dict[str, Any]:
    """The ModelSpec fields of a layer's norms, biases and wiring, from config.json keys and
    the family's known defaults."""
    return {
        "norm": "layernorm" if family in {"opt", "gpt_neox", "falcon", "bloom", "mpt", "gpt2"}
        else "rmsnorm",
        "attention_bias": bool(_first(
            cfg, "attention_bias", "qkv_bias",
            default=family in {"opt", "gpt_neox", "bloom", "qwen2", "qwen2_moe", "gpt2"},
        )),
        # q, k and v only: o_proj has no bias in Qwen2, Qwen2-MoE and GLM-4-MoE
        "attention_out_bias": False if family in _QKV_BIAS_ONLY else None,
        # GPT-2's Conv1D projections (c_attn, c_proj, c_fc) all carry a bias (transformers
        # models/gpt2/modeling_gpt2.py: Conv1D defines bias for every projection); gpt-oss's
        # experts carry gate_up_proj_bias and down_proj_bias (modeling_gpt_oss.py GptOssExperts)
        "mlp_bias": bool(_first(cfg, "mlp_bias",
                                default=family in {"opt", "gpt_neox", "bloom", "gpt2", "gpt_oss"})),
        "parallel_attention_mlp": bool(
            _first(cfg, "use_parallel_residual", "parallel_attn", default=family == "falcon")
        ),
        "embedding_norm": family == "bloom",
        "word_embed_proj_dim": cfg.get("word_embed_proj_dim")
        if cfg.get("word_embed_proj_dim") not in (None, hidden) else None,
        "norms_per_layer": _norms_per_layer(cfg, family),
        # transformers' MPT drops every LayerNorm bias whatever no_bias says (modeling_mpt.py)
        "layernorm_bias": family != "mpt",
        # q_norm and k_norm of head_dim: Qwen3 (models/qwen3/modeling_qwen3.py), Gemma-3
        # (models/gemma3/modeling_gemma3.py Gemma3Attention), GLM-4-MoE with use_qk_norm
        "qk_norm": family in {"qwen3", "qwen3_moe", "gemma3_text", "olmo2"}
        or bool(cfg.get("use_qk_norm")),
        # OLMo-2 normalises the whole q and k projections (models/olmo2/modeling_olmo2.py)
        "qk_norm_full_width": family == "olmo2",
        # one learned sink logit per attention head (modeling_gpt_oss.py GptOssAttention.sinks)
        "attention_sinks": family == "gpt_oss",
        # (weight * x).to(input_dtype) or output.type_as(x): an fp32 norm weight gives the
        # input's dtype (models/gemma/modeling_gemma.py GemmaRMSNorm, huggingface/transformers
        # #29402; models/olmo2/modeling_olmo2.py @000c33fd; models/gpt_oss GptOssRMSNorm), where
        # LlamaRMSNorm's weight * x.to(input_dtype) promotes to the weight's
        "norm_casts_back": family in _NORM_CASTS_BACK,
        "final_norm": not (family == "opt" and (
            not cfg.get("do_layer_norm_before", True) or cfg.get("_remove_final_layer_norm"))),
    }


def _validated(data: dict[str, Any], name: str) -> ModelSpec:
    """ModelSpec of ``data``; PlannerError listing pydantic's problems else."""
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        problems = [f"field {'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                    for err in exc.errors()]
        raise PlannerError(f"config.json {name!r}: {capped(problems)}") from None


def spec_from_hf_dict(cfg: dict[str, Any], *, name: str) -> ModelSpec:
    """Map config.json keys to ModelSpec fields; raises PlannerError naming what is missing."""
    cfg = _typed(cfg, name)
    family = str(cfg.get("model_type", "")).lower()
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
    heads = _first(cfg, "num_attention_heads", "n_head", "n_heads")
    layers = _first(cfg, "num_hidden_layers", "n_layer", "n_layers")
    if not (hidden and heads and layers):
        raise PlannerError(
            f"config.json {name!r} lacks hidden_size/num_attention_heads/num_hidden_layers; "
            "a decoder-only transformer config is required"
        )
    kv = _first(cfg, "num_key_value_heads", "num_kv_heads", default=heads)
    if cfg.get("multi_query") and not cfg.get("new_decoder_architecture"):
        kv = 1
    ffn = _first(cfg, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden)
    if family == "qwen":  # Qwen-1 states w1 + w2 together: each matrix is half
        ffn //= 2
    mla = _mla(cfg)
    alibi = bool(cfg.get("alibi") or family in {"bloom", "mpt"})
    learned = family in {"opt", "gpt2"}
    data = {
        "id": name.lower(),
        "name": name,
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": kv,
        "head_dim": _first(cfg, "head_dim", default=hidden // heads)
        if mla is None else mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"],
        "ffn_hidden_size": ffn,
        "activation": _activation(cfg, family),
        "vocab_size": _first(cfg, "vocab_size", "padded_vocab_size"),
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", family in {"opt", "bloom", "mpt"})),
        "max_position_embeddings": _first(
            cfg, "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", default=2048
        ),
        "position_embedding": "alibi" if alibi else "learned" if learned else "rotary",
        **_block_fields(cfg, family, hidden=hidden),
        "moe": _moe(cfg),
        "mla": mla,
        "published_params_b": 1.0,
        "params_source": "computed from the architecture in config.json",
        "source_urls": [f"file:{name}"],
    }
    spec = _validated(data, name)
    return spec.model_copy(update={"published_params_b": count_params(spec).total / 1e9})


def model_from_hf_config(path: Path) -> ModelSpec:
    """Read ``path`` (a config.json or a folder holding one) into a ModelSpec."""
    file = path / "config.json" if path.is_dir() else path
    cfg = load_file(file, what="model config", kind="json")
    if not isinstance(cfg, dict):
        raise PlannerError(f"model config {str(file)!r} must hold a JSON object")
    name = file.parent.name if file.name == "config.json" else file.stem
    return spec_from_hf_dict(cfg, name=name or "custom")
