"""Parameter counts of every catalog architecture as transformers builds it, kept as test data.

For each catalog model, ``hf_overrides`` writes the config.json keys of its transformers
``model_type`` from the entry's facts; ``transformers_count`` builds
``AutoModelForCausalLM.from_config`` on the meta device (no weights allocated, nothing
downloaded) and sums ``p.numel()`` over ``model.parameters()``. ``HF_CONFIGS`` adds configs given
as transformers defaults plus overrides (``Qwen2MoeConfig()``'s defaults) that have no catalog
entry. Every record keeps the config transformers built (``config.to_dict()``, scalar keys)
so the default tests read it back through ``planner.catalog.hfconfig`` without transformers.

    pip install torch transformers
    python tools/param_counts.py            # writes tests/data/param_counts.yaml
    python tools/param_counts.py --check    # compares with the file and planner; 1 on a difference
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from planner.catalog.hfconfig import spec_from_hf_dict
from planner.catalog.load import Catalog, load_catalog
from planner.catalog.params import count_params
from planner.catalog.specs import ModelSpec

REPO = Path(__file__).resolve().parents[1]

DATA_FILE = REPO / "tests" / "data" / "param_counts.yaml"

# Catalog id -> transformers model_type (the "model_type" of the entry's config.json). Qwen (v1)
# is remote code (QWenLMHeadModel), not in transformers: it is built as qwen2, which has its shapes
# (c_attn = q, k, v with bias; c_proj, w1, w2 and mlp.c_proj without; RMSNorm; untied lm_head).
MODEL_TYPES: dict[str, str] = {
    **dict.fromkeys(
        ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-8b",
         "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "llama-3.3-70b",
         "codellama-34b", "open-llama-3b", "open-llama-7b", "open-llama-13b", "deepseek-llm-7b"],
        "llama"),
    **dict.fromkeys(
        ["llama-7b", "llama-13b", "llama-30b", "llama-65b", "yi-6b", "yi-34b", "smollm2-135m",
         "smollm2-360m", "smollm2-1.7b", "codellama-7b", "codellama-13b"], "llama"),
    "tinyllama-1.1b": "llama",
    "smollm3-3b": "smollm3",
    # Remote code with llama's parameter shapes: InternLM2.5 (wqkv fuses q, k, v; w1/w3/w2 SwiGLU;
    # RMSNorms; no bias; untied) and Baichuan 2 (W_pack fuses q, k, v; NormHead is a vocab x h
    # matrix; 13B's ALiBi has no parameters).
    "internlm2.5-7b": "llama",
    **dict.fromkeys(["baichuan2-7b", "baichuan2-13b"], "llama"),
    **dict.fromkeys(["mistral-7b", "mistral-7b-v0.3", "mistral-nemo-12b", "mistral-small-24b",
                     "mistral-7b-v0.2", "mistral-large-2407", "codestral-22b", "ministral-8b"],
                    "mistral"),
    **dict.fromkeys(["mixtral-8x7b", "mixtral-8x22b"], "mixtral"),
    **dict.fromkeys(["phi-3-mini-4k", "phi-3-mini-128k", "phi-3.5-mini", "phi-4", "phi-3-medium-4k",
                     "phi-3-medium-128k"], "phi3"),
    **dict.fromkeys(["granite-3.1-2b", "granite-3.1-8b", "granite-3.3-2b", "granite-3.3-8b"],
                    "granite"),
    **dict.fromkeys(["gpt-oss-20b", "gpt-oss-120b"], "gpt_oss"),
    **dict.fromkeys(["gemma-2b", "gemma-7b"], "gemma"),
    **dict.fromkeys(["qwen-1.8b", "qwen-7b", "qwen-14b", "qwen-72b"], "qwen2"),
    **dict.fromkeys(
        ["qwen2-7b", "qwen2-72b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b",
         "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "qwq-32b", "qwen2.5-math-7b"], "qwen2"),
    **dict.fromkeys(
        ["deepseek-r1-distill-qwen-1.5b", "deepseek-r1-distill-qwen-7b", "qwen2.5-coder-1.5b",
         "qwen2.5-coder-7b", "qwen2.5-coder-14b", "qwen2.5-coder-32b"], "qwen2"),
    **dict.fromkeys(["qwen2-57b-a14b", "qwen1.5-moe-a2.7b"], "qwen2_moe"),
    **dict.fromkeys(["qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b"],
                    "qwen3"),
    **dict.fromkeys(["qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-30b-a3b"], "qwen3_moe"),
    "glm-4.5-air": "glm4_moe",
    "glm-4.5": "glm4_moe",
    # DeepSeekMoE 16B is remote code (DeepseekForCausalLM): built as glm4_moe, whose parameter
    # shapes equal it without attention bias and qk-norm (dense first layer, E x h router, shared
    # experts).
    "deepseek-moe-16b": "glm4_moe",
    # Kimi K2 is remote code (model_type kimi_k2) with DeepseekV3ForCausalLM's shapes.
    **dict.fromkeys(["deepseek-v3", "moonlight-16b-a3b", "kimi-k2"], "deepseek_v3"),
    "deepseek-v2-lite": "deepseek_v2",
    **dict.fromkeys(["gemma-2-2b", "gemma-2-9b", "gemma-2-27b"], "gemma2"),
    "gemma-3-1b": "gemma3_text",
    **dict.fromkeys(["olmo-2-7b", "olmo-2-13b"], "olmo2"),
    **dict.fromkeys(
        ["opt-350m", "opt-1.3b", "opt-2.7b", "opt-6.7b", "opt-13b", "opt-30b", "opt-66b"], "opt"),
    "bloom-7b1": "bloom",
    **dict.fromkeys(["mpt-7b", "mpt-30b"], "mpt"),
    **dict.fromkeys(["falcon-7b", "falcon-40b", "falcon-180b"], "falcon"),
    **dict.fromkeys(["gpt2", "gpt2-xl"], "gpt2"),
    **dict.fromkeys(["pythia-160m", "pythia-410m", "pythia-1b", "pythia-1.4b", "pythia-2.8b",
                     "pythia-6.9b", "pythia-12b", "gpt-neox-20b"], "gpt_neox"),
}

# Configs without a catalog entry: name -> (model_type, overrides of transformers' defaults).
HF_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    # transformers' Qwen2MoeConfig() defaults (the Qwen1.5-MoE-A2.7B shape).
    "qwen2_moe-defaults": ("qwen2_moe", {}),
    # Qwen3-MoE with a dense first layer (mlp_only_layers), read as first_dense_layers.
    "qwen3_moe-dense-first-layer": ("qwen3_moe", {"mlp_only_layers": [0]}),
    # GLM-4.5 (355B) normalises q and k per head: Glm4MoeConfig() defaults with use_qk_norm.
    "glm4_moe-qk-norm": ("glm4_moe", {"use_qk_norm": True}),
    # OLMo-2 with grouped-query attention (as OLMo-2 32B: 8 kv heads): k_norm spans
    # kv_heads*head_dim, narrower than q_norm's heads*head_dim (Olmo2Config() defaults otherwise).
    "olmo2-gqa": ("olmo2", {"num_key_value_heads": 8}),
}

# to_dict() keys that describe no shape (generation, dropout, output flags, bookkeeping).
_NOT_SHAPE = {"transformers_version", "architectures", "_name_or_path", "dtype", "problem_type",
              "return_dict", "output_hidden_states", "output_attentions", "use_cache",
              "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder", "initializer_range",
              "init_std", "bos_token_id", "eos_token_id", "pad_token_id", "output_router_logits"}


def _decoder(m: ModelSpec) -> dict[str, Any]:
    """Keys shared by the Llama-like configs (llama, mistral, qwen2/3, mixtral, gemma2, ...)."""
    return {
        "vocab_size": m.vocab_size, "hidden_size": m.hidden_size,
        "intermediate_size": m.ffn_hidden_size, "num_hidden_layers": m.num_layers,
        "num_attention_heads": m.num_attention_heads, "num_key_value_heads": m.num_kv_heads,
        "head_dim": m.head_dim, "max_position_embeddings": m.max_position_embeddings,
        "tie_word_embeddings": m.tied_embeddings,
    }


def hf_overrides(m: ModelSpec, model_type: str) -> dict[str, Any]:
    """config.json keys of ``model_type`` giving ``m``'s shapes (the rest: its defaults)."""
    moe = m.moe
    if model_type in {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
                      "phi3", "olmo2", "granite", "smollm3"}:
        extra = {"attention_bias": m.attention_bias, "mlp_bias": m.mlp_bias} \
            if model_type in {"llama", "granite", "smollm3"} else {}
        return {**_decoder(m), **extra}
    if model_type == "gpt_oss":  # experts, router and q/k/v/o all biased; sinks per head
        return {**_decoder(m), "intermediate_size": moe.expert_ffn_hidden_size,
                "num_local_experts": moe.num_experts, "num_experts_per_tok": moe.experts_per_token,
                "attention_bias": m.attention_bias}
    if model_type == "mixtral":
        return {**_decoder(m), "num_local_experts": moe.num_experts,
                "num_experts_per_tok": moe.experts_per_token}
    if model_type in {"qwen3_moe", "qwen2_moe"}:
        out = {**_decoder(m), "num_experts": moe.num_experts,
               "num_experts_per_tok": moe.experts_per_token,
               "moe_intermediate_size": moe.expert_ffn_hidden_size, "decoder_sparse_step": 1,
               "mlp_only_layers": []}
        if model_type == "qwen2_moe":
            out["shared_expert_intermediate_size"] = moe.shared_expert_ffn_hidden_size
        return out
    if model_type in {"glm4_moe", "deepseek_v3", "deepseek_v2"}:
        out = {**_decoder(m), "n_routed_experts": moe.num_experts,
               "n_shared_experts": moe.num_shared_experts,
               "num_experts_per_tok": moe.experts_per_token,
               "moe_intermediate_size": moe.expert_ffn_hidden_size,
               "first_k_dense_replace": moe.first_dense_layers}
        if model_type == "glm4_moe":
            return {**out, "attention_bias": m.attention_bias, "use_qk_norm": m.qk_norm}
        a = m.mla
        return {**out, "q_lora_rank": a.q_lora_rank, "kv_lora_rank": a.kv_lora_rank,
                "qk_nope_head_dim": a.qk_nope_head_dim, "qk_rope_head_dim": a.qk_rope_head_dim,
                "v_head_dim": a.v_head_dim, "head_dim": a.qk_rope_head_dim}
    if model_type == "opt":
        return {"vocab_size": m.vocab_size, "hidden_size": m.hidden_size,
                "ffn_dim": m.ffn_hidden_size, "num_hidden_layers": m.num_layers,
                "num_attention_heads": m.num_attention_heads,
                "max_position_embeddings": m.max_position_embeddings,
                "word_embed_proj_dim": m.word_embed_proj_dim or m.hidden_size,
                "do_layer_norm_before": m.final_norm, "enable_bias": m.mlp_bias}
    if model_type == "bloom":
        return {"vocab_size": m.vocab_size, "hidden_size": m.hidden_size,
                "n_layer": m.num_layers, "n_head": m.num_attention_heads}
    if model_type == "mpt":
        return {"vocab_size": m.vocab_size, "d_model": m.hidden_size, "n_layers": m.num_layers,
                "n_heads": m.num_attention_heads,
                "expansion_ratio": m.ffn_hidden_size // m.hidden_size,
                "max_seq_len": m.max_position_embeddings, "no_bias": not m.attention_bias}
    if model_type == "falcon":
        new = m.num_kv_heads > 1
        return {"vocab_size": m.vocab_size, "hidden_size": m.hidden_size,
                "num_hidden_layers": m.num_layers, "num_attention_heads": m.num_attention_heads,
                "num_kv_heads": m.num_kv_heads, "new_decoder_architecture": new,
                "multi_query": not new, "parallel_attn": m.parallel_attention_mlp,
                "bias": m.attention_bias, "alibi": m.position_embedding == "alibi",
                "ffn_hidden_size": m.ffn_hidden_size,
                "max_position_embeddings": m.max_position_embeddings}
    if model_type == "gpt2":
        return {"vocab_size": m.vocab_size, "n_embd": m.hidden_size, "n_layer": m.num_layers,
                "n_head": m.num_attention_heads, "n_inner": m.ffn_hidden_size,
                "n_positions": m.max_position_embeddings,
                "tie_word_embeddings": m.tied_embeddings}
    if model_type == "gpt_neox":
        return {**_decoder(m), "use_parallel_residual": m.parallel_attention_mlp}
    raise ValueError(f"no config mapping for model_type {model_type!r}")


def transformers_count(model_type: str, overrides: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(sum of p.numel() over the model's parameters, the config's scalar keys), meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, **overrides)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    kept = {k: v for k, v in config.to_dict().items()
            if k not in _NOT_SHAPE and (not isinstance(v, dict | list) or k == "mlp_only_layers")}
    return params, kept


def records() -> dict[str, Any]:
    """Every catalog model and every HF_CONFIGS entry, counted by transformers."""
    import torch
    import transformers

    catalog = load_catalog()
    models = {}
    for model_id, spec in sorted(catalog.models.items()):
        model_type = MODEL_TYPES[model_id]
        params, config = transformers_count(model_type, hf_overrides(spec, model_type))
        models[model_id] = {"model_type": model_type, "params": params, "config": config}
    configs = {}
    for name, (model_type, overrides) in HF_CONFIGS.items():
        params, config = transformers_count(model_type, overrides)
        configs[name] = {"model_type": model_type, "overrides": overrides, "params": params,
                         "config": config}
    return {"transformers_version": transformers.__version__,
            "torch_version": str(torch.__version__), "catalog": models, "hf_configs": configs}


def planner_counts(name: str, rec: dict[str, Any], catalog: Catalog) -> dict[str, int]:
    """Planner's totals for one record: from the catalog entry (catalog records) and from the
    config transformers built, read by planner.catalog.hfconfig."""
    out = {"hfconfig": count_params(spec_from_hf_dict(rec["config"], name=name)).total}
    if name in catalog.models and "overrides" not in rec:
        out["catalog"] = count_params(catalog.models[name]).total
    return out


def differences(data: dict[str, Any]) -> list[str]:
    """Every record where a planner count differs from transformers'."""
    catalog = load_catalog()
    out = []
    for name, rec in [*data["catalog"].items(), *data["hf_configs"].items()]:
        for how, got in planner_counts(name, rec, catalog).items():
            if got != rec["params"]:
                out.append(f"{name} ({how}): planner {got:,} vs transformers {rec['params']:,} "
                           f"({got / rec['params'] - 1:+.4%})")
    return out


def main(argv: list[str]) -> int:
    data = records()
    diffs = differences(data)
    print("\n".join(diffs) or "planner's counts equal transformers' for every record")
    if "--check" in argv:
        stored = yaml.safe_load(DATA_FILE.read_text(encoding="utf-8"))
        stale = [k for k in ("catalog", "hf_configs") if stored.get(k) != data[k]]
        if stale:
            print(f"{DATA_FILE} differs from transformers in: {', '.join(stale)}")
        return 1 if diffs or stale else 0
    header = ("# Generated by tools/param_counts.py: transformers' parameter count of every\n"
              "# catalog architecture (meta device) and the config it built. Not edited by hand.\n")
    DATA_FILE.write_text(header + yaml.safe_dump(data, sort_keys=False, width=100),
                         encoding="utf-8")
    print(f"wrote {DATA_FILE}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
