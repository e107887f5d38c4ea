"""Parameter counts: every catalog model against its published count, and hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.params import count_params, layer_linears, layer_params, lora_params
from planner.specs import ModelSpec

MODELS_DIR = Path(__file__).resolve().parents[1] / "catalog" / "models"
MODEL_FILES = sorted(MODELS_DIR.glob("*.yaml"))


def _load(path: Path) -> ModelSpec:
    return ModelSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def _model(model_id: str) -> ModelSpec:
    return _load(MODELS_DIR / f"{model_id}.yaml")


REQUIRED_IDS = [
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.2-1b",
    "llama-3.2-3b",
    "llama-3.3-70b",
    "qwen-1.8b",
    "qwen-7b",
    "qwen-14b",
    "qwen-72b",
    "qwen2-7b",
    "qwen2-72b",
    "qwen2.5-0.5b",
    "qwen2.5-1.5b",
    "qwen2.5-3b",
    "qwen2.5-7b",
    "qwen2.5-14b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "mistral-7b",
    "mixtral-8x7b",
    "deepseek-v3",
    "gemma-2-9b",
    "opt-350m",
    "opt-1.3b",
    "opt-2.7b",
    "opt-6.7b",
    "opt-13b",
    "opt-30b",
    "opt-66b",
    "bloom-7b1",
    "mpt-7b",
    "mpt-30b",
    "falcon-7b",
    "falcon-40b",
    "pythia-2.8b",
    "pythia-6.9b",
    "codellama-34b",
    "open-llama-3b",
    "open-llama-7b",
    "open-llama-13b",
]


def test_catalog_has_required_models() -> None:
    assert set(REQUIRED_IDS) <= {p.stem for p in MODEL_FILES}


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_total_matches_published_count(path: Path) -> None:
    m = _load(path)
    assert m.id == path.stem
    published = m.published_params_b * 1e9
    total = count_params(m).total
    assert abs(total - published) / published < 0.01, f"{m.id}: {total:,} vs {published:,.0f}"


def test_llama2_7b_total_by_hand() -> None:
    # h=4096, ffn=11008, vocab=32000, 32 layers, untied, RMSNorm (weight only):
    # per layer: attention 4*4096*4096 = 67,108,864; MLP 3*4096*11008 = 135,266,304;
    #            norms 2*4096 = 8,192  -> 202,383,360; x32 = 6,476,267,520
    # embedding 32000*4096 = 131,072,000; lm_head 131,072,000; final norm 4,096
    # total = 6,476,267,520 + 2*131,072,000 + 4,096 = 6,738,415,616
    m = _model("llama-2-7b")
    c = count_params(m)
    assert layer_params(m, 0) == 202_383_360
    assert c.total == 6_738_415_616
    assert c.active == c.total
    assert c.layer_linear == 32 * (67_108_864 + 135_266_304)
    assert c.largest_layer == 202_383_360
    assert (c.embedding, c.lm_head, c.final_norm) == (131_072_000, 131_072_000, 4_096)


def test_llama2_7b_lora_qv_rank8() -> None:
    # 32 layers * 2 matrices (q, v) * 8 * (4096 + 4096) = 4,194,304
    assert lora_params(_model("llama-2-7b"), 8, ["q", "v"]) == 4_194_304


def test_lora_all_linear_skips_router() -> None:
    m = _model("mixtral-8x7b")
    # per layer: q 4096x4096, k and v 4096x1024, o 4096x4096 -> r*(8192+5120+5120+8192)
    # experts: 8 * (gate + up + down) each r*(4096+14336)
    per_layer = 16 * (8192 + 5120 + 5120 + 8192) + 16 * 8 * 3 * (4096 + 14336)
    assert lora_params(m, 16, ["all-linear"]) == 32 * per_layer


def test_mixtral_active_about_12_9b() -> None:
    c = count_params(_model("mixtral-8x7b"))
    # inactive: 32 layers * 6 experts * 3*4096*14336 = 33,822,867,456
    assert c.total - c.active == 32 * 6 * 3 * 4096 * 14336
    assert abs(c.active - 12.9e9) / 12.9e9 < 0.01


def test_deepseek_v3_active_about_37b() -> None:
    m = _model("deepseek-v3")
    c = count_params(m)
    assert abs(c.active - 37e9) / 37e9 < 0.03
    assert abs(c.total - 671e9) / 671e9 < 0.01
    dense = {lin.name for lin in layer_linears(m, 0)}
    moe = {lin.group for lin in layer_linears(m, 3)}
    assert {"q_a", "q_b", "kv_a", "kv_b", "o", "gate", "up", "down"} == dense
    assert {"attention", "router", "expert", "shared_expert"} == moe
    assert c.largest_layer == layer_params(m, 3)


def test_qwen3_moe_active_matches_card() -> None:
    # Qwen3-30B-A3B card: 3.3B activated; Qwen3-235B-A22B: 22B activated
    assert abs(count_params(_model("qwen3-30b-a3b")).active - 3.3e9) / 3.3e9 < 0.02
    assert abs(count_params(_model("qwen3-235b-a22b")).active - 22e9) / 22e9 < 0.02


@pytest.mark.parametrize("model_id", ["llama-3.2-1b", "qwen2.5-0.5b", "gemma-2-9b", "opt-1.3b"])
def test_tied_model_has_no_lm_head(model_id: str) -> None:
    m = _model(model_id)
    assert m.tied_embeddings
    assert count_params(m).lm_head == 0


def test_opt_350m_projections_and_positions() -> None:
    # embedding 50272*512 + positions (2048+2)*1024 + project_in/out 2*512*1024
    c = count_params(_model("opt-350m"))
    assert c.embedding == 50272 * 512 + 2050 * 1024 + 2 * 512 * 1024
    assert c.lm_head == 0


def test_qwen2_biases_on_qkv_only() -> None:
    linears = {lin.name: lin for lin in layer_linears(_model("qwen2.5-7b"), 0)}
    assert [linears[n].bias for n in ("q", "k", "v", "o", "gate")] == [True] * 3 + [False] * 2


def test_layer_linear_excludes_biases_and_norms() -> None:
    m = _model("bloom-7b1")
    c = count_params(m)
    h, f = 4096, 16384
    assert c.layer_linear == 30 * (4 * h * h + 2 * h * f)
    # biases: q, k, v, o (4h) + up (f) + down (h); 2 LayerNorms (4h)
    assert c.layers == c.layer_linear + 30 * (4 * h + f + h + 4 * h)
