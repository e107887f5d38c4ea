"""Catalog loading, overlays, lookups and error reporting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.params import count_params
from planner.errors import CatalogError, PlannerError, UnknownNameError

DATA = Path(__file__).parent / "data"



def test_overlay_adds_entries(cat):
    assert "tiny-llama" in cat.models
    assert "test-gpu" in cat.gpus
    assert cat.gpu("TEST-GPU").memory_gib == 10


def test_tiny_model_hand_count(cat):
    # embedding 1000*64 = 64,000; head 64,000 (untied)
    # per layer: q 64*64 = 4096, k 64*32 = 2048, v 2048, o 4096, gate/up/down 3*64*128 = 24,576,
    #   two RMSNorms 2*64 = 128 -> 36,992; two layers 73,984; final norm 64
    # total 64,000 + 64,000 + 73,984 + 64 = 202,048
    assert count_params(cat.model("tiny-llama").spec).total == 202_048


def test_all_errors_reported_at_once():
    with pytest.raises(CatalogError) as exc:
        load_catalog([DATA / "bad_catalog"])
    msg = str(exc.value)
    assert "broken.yaml" in msg and "memory_gib" in msg
    assert "colour" in msg  # unknown field rejected
    assert "garbled.yaml" in msg and "not readable YAML" in msg
    assert "\n" not in msg


def test_missing_overlay_folder():
    with pytest.raises(CatalogError, match="not found"):
        load_catalog([DATA / "no-such-folder"])


def test_unknown_gpu_suggests(cat):
    with pytest.raises(UnknownNameError, match="did you mean: test-gpu"):
        cat.gpu("test-gpo")


def test_size_alias_and_hf_ids():
    cat = load_catalog()
    seven = cat.model("7b")
    assert seven.spec.id == cat.size_aliases["7b"]
    assert cat.model("Qwen/Qwen2.5-7B-Instruct").spec.id == "qwen2.5-7b"
    assert cat.model("meta-llama/Llama-3.1-8B").spec.id == "llama-3.1-8b"
    q = cat.model("Qwen/Qwen-7B-Chat-Int4")
    assert q.spec.id == "qwen-7b" and q.weight_bits == 4


def test_unknown_model_suggests():
    with pytest.raises(UnknownNameError, match="did you mean"):
        load_catalog().model("qwen2.5-7")


def test_hf_config_json(tmp_path):
    cfg = {
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128,
        "vocab_size": 1000, "tie_word_embeddings": False, "max_position_embeddings": 512,
        "hidden_act": "silu",
    }
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    spec = load_catalog().model(str(folder / "config.json")).spec
    assert count_params(spec).total == 202_048  # same shape as tiny-llama
    assert spec.activation == "swiglu"


def test_bad_config_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{not json")
    with pytest.raises(PlannerError, match="not valid JSON"):
        load_catalog().model(str(p))
    p.write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(PlannerError, match="lacks hidden_size"):
        load_catalog().model(str(p))


def test_hf_config_moe_with_interleaved_dense_layers_is_refused(tmp_path):
    cfg = {
        "model_type": "qwen2_moe", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 4, "intermediate_size": 128, "moe_intermediate_size": 32,
        "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 1000,
    }
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**cfg, "mlp_only_layers": [1, 3]}))
    with pytest.raises(PlannerError, match="dense prefix"):
        load_catalog().model(str(p))
    p.write_text(json.dumps({**cfg, "mlp_only_layers": [0, 1]}))
    assert load_catalog().model(str(p)).spec.moe.first_dense_layers == 2
