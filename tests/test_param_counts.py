"""Planner's parameter counts equal transformers' own count for every catalog architecture.

tests/data/param_counts.yaml holds, per catalog model (and per extra config such as
``Qwen2MoeConfig()``'s defaults), the count of ``AutoModelForCausalLM.from_config`` on the meta
device and the config transformers built; tools/param_counts.py writes it. The default tests compare
planner's counts with that data (no transformers needed); the integration test rebuilds every
record with transformers and compares again.
"""

from __future__ import annotations

import importlib.util

import pytest
import yaml
from conftest import load_tool

from planner.catalog.load import load_catalog

param_counts = load_tool("param_counts")

DATA = yaml.safe_load(param_counts.DATA_FILE.read_text(encoding="utf-8"))
RECORDS = {**DATA["catalog"], **DATA["hf_configs"]}


def test_every_catalog_model_has_a_record() -> None:
    assert set(DATA["catalog"]) == set(load_catalog().models)
    assert set(param_counts.MODEL_TYPES) >= set(DATA["catalog"])


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_planner_count_equals_transformers(name: str) -> None:
    rec = RECORDS[name]
    counts = param_counts.planner_counts(name, rec, load_catalog())
    assert counts == dict.fromkeys(counts, rec["params"])


def test_qwen2_moe_defaults_count_the_shared_expert_and_its_gate() -> None:
    # Qwen2MoeConfig(): h=2048, 24 layers, 60 experts of 1408, one shared expert of 5632 with a
    # sigmoid gate (2048 x 1); without them the count was 5.8 % low:
    # 24 * (3 * 2048 * 5632 + 2048) = 24 * 34,605,056 = 830,521,344 of 14,315,784,192
    rec = DATA["hf_configs"]["qwen2_moe-defaults"]
    assert rec["params"] == 14_315_784_192
    assert 24 * (3 * 2048 * 5632 + 2048) == 830_521_344


@pytest.mark.integration
def test_transformers_rebuilds_the_recorded_counts() -> None:
    """Rebuild every record with transformers (meta device); compare with the data and planner."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed: pip install torch transformers "
                    "to recompute tests/data/param_counts.yaml")
    fresh = param_counts.records()
    assert param_counts.differences(fresh) == []
    assert {k: v["params"] for k, v in fresh["catalog"].items()} == \
        {k: v["params"] for k, v in DATA["catalog"].items()}
    assert {k: v["params"] for k, v in fresh["hf_configs"].items()} == \
        {k: v["params"] for k, v in DATA["hf_configs"].items()}


def test_gpt2_config_counts_its_conv1d_biases():
    """GPT-2's projections (c_attn, c_proj, c_fc) all carry a bias: transformers builds GPT2Config()
    (GPT-2 small) with 124,439,808 parameters, and config.json reading must match it."""
    from planner.catalog.hfconfig import spec_from_hf_dict
    from planner.catalog.params import count_params

    cfg = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
           "vocab_size": 50257, "n_positions": 1024, "n_inner": None,
           "activation_function": "gelu_new", "tie_word_embeddings": True}
    spec = spec_from_hf_dict(cfg, name="gpt2")
    assert spec.attention_bias and spec.mlp_bias
    assert count_params(spec).total == 124_439_808
