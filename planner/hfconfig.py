"""Read a local Hugging Face ``config.json`` into a ModelSpec (no network).

Covers the decoder families in the catalog: Llama/Mistral/Qwen2/Qwen3/Gemma2 (SwiGLU/GeGLU,
rotary), Mixtral/Qwen-MoE (MoE), OPT, GPT-NeoX, Falcon, BLOOM and MPT. The parameter count is
computed from the architecture, so ``published_params_b`` is that count and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.errors import PlannerError
from planner.inputs import capped, load_file, short
from planner.params import count_params
from planner.specs import ModelSpec

_GELU_FAMILIES = {"gpt_neox", "falcon", "bloom", "mpt", "gpt2", "gptj"}
# Every key read as an integer (bools are not integers here); ModelSpec bounds the values.
_INT_KEYS = (
    "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head", "n_heads",
    "num_hidden_layers", "n_layer", "n_layers", "num_key_value_heads", "num_kv_heads",
    "intermediate_size", "ffn_dim", "n_inner", "head_dim", "vocab_size", "padded_vocab_size",
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "num_local_experts",
    "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_topk", "moe_intermediate_size",
    "n_shared_experts", "first_k_dense_replace", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
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
    """The MoeSpec fields (validated with the ModelSpec), None for a dense model."""
    experts = _first(cfg, "num_local_experts", "num_experts", "n_routed_experts")
    if not experts or experts <= 1:
        return None
    return {
        "num_experts": experts,
        "experts_per_token": _first(cfg, "num_experts_per_tok", "moe_topk", default=2),
        "expert_ffn_hidden_size": _first(cfg, "moe_intermediate_size", "intermediate_size"),
        "num_shared_experts": _first(cfg, "n_shared_experts", default=0),
        "first_dense_layers": _first(cfg, "first_k_dense_replace", default=0),
    }


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
        "norm": "layernorm" if family in {"opt", "gpt_neox", "falcon", "bloom", "mpt"}
        else "rmsnorm",
        "attention_bias": bool(
            _first(cfg, "attention_bias", default=family in {"opt", "gpt_neox", "bloom", "qwen2"})
        ),
        "attention_out_bias": False if family == "qwen2" else None,
        "mlp_bias": bool(_first(cfg, "mlp_bias", default=family in {"opt", "gpt_neox", "bloom"})),
        "parallel_attention_mlp": bool(
            _first(cfg, "use_parallel_residual", "parallel_attn", default=family == "falcon")
        ),
        "embedding_norm": family == "bloom",
        "moe": _moe(cfg),
        "mla": mla,
        "published_params_b": 1.0,
        "params_source": "computed from the architecture in config.json",
        "source_urls": [f"file:{name}"],
    }
    try:
        spec = ModelSpec.model_validate(data)
    except ValidationError as exc:
        problems = [f"field {'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                    for err in exc.errors()]
        raise PlannerError(f"config.json {name!r}: {capped(problems)}") from None
    return spec.model_copy(update={"published_params_b": count_params(spec).total / 1e9})


def model_from_hf_config(path: Path) -> ModelSpec:
    """Read ``path`` (a config.json or a folder holding one) into a ModelSpec."""
    file = path / "config.json" if path.is_dir() else path
    cfg = load_file(file, what="model config", kind="json")
    if not isinstance(cfg, dict):
        raise PlannerError(f"model config {str(file)!r} must hold a JSON object")
    name = file.parent.name if file.name == "config.json" else file.stem
    return spec_from_hf_dict(cfg, name=name or "custom")
