"""Parameter counts: every catalog model against its published count, and hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.catalog.params import count_params, layer_linears, layer_params, lora_params
from planner.catalog.specs import ModelSpec

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
    "qwen3-0.6b",
    "qwen3-4b",
    "qwen2-57b-a14b",
    "glm-4.5-air",
    "deepseek-llm-7b",
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


def test_deepseek_v2_lite_mla_without_q_lora_by_hand() -> None:
    # h=2048, 16 heads; MLA with q_lora_rank null: q 2048*16*192 = 6,291,456; kv_a 2048*(512+64)
    # = 1,179,648; kv_a norm 512; kv_b 512*16*(128+128) = 2,097,152; o 16*128*2048 = 4,194,304
    # -> 13,763,072; two layer norms 4,096.
    m = _model("deepseek-v2-lite")
    attn = 6_291_456 + 1_179_648 + 512 + 2_097_152 + 4_194_304
    assert {lin.name for lin in layer_linears(m, 0)} == {"q", "kv_a", "kv_b", "o", "gate", "up",
                                                         "down"}
    # layer 0 dense: 3*2048*10944 = 67,239,936
    assert layer_params(m, 0) == attn + 4_096 + 67_239_936 == 81_007_104
    # layers 1-26: router 64*2048; 64 experts of 3*2048*1408; 2 shared experts 3*2048*2816
    moe = 131_072 + 64 * 3 * 2048 * 1408 + 3 * 2048 * 2816
    assert layer_params(m, 1) == attn + 4_096 + moe == 584_847_872
    # untied embedding and lm_head 2*102400*2048, final norm 2048
    c = count_params(m)
    assert c.total == 81_007_104 + 26 * 584_847_872 + 2 * 102_400 * 2048 + 2048 == 15_706_484_224
    # the authors' 2.4B activated counts the lm_head, not the input embedding
    assert abs(c.active - 102_400 * 2048 - 2.4e9) / 2.4e9 < 0.03


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


def test_qwen2_moe_shared_expert_and_gate_by_hand() -> None:
    # Qwen2-57B-A14B: h=3584, q 28x128=3584 wide, kv 4x128=512, 64 experts of 2560, top-8, one
    # shared expert of 20480 gated by sigmoid(h x 1), vocab 151936 untied, 28 layers.
    # attention: q 3584*3584+3584 = 12,848,640; k, v 3584*512+512 = 1,835,520 each;
    #            o 3584*3584 = 12,845,056 (no bias)                      -> 29,364,736
    # router 3584*64 = 229,376; experts 64*3*3584*2560 = 1,761,607,680;
    # shared 3*3584*20480 = 220,200,960; gate 3,584; norms 2*3584 = 7,168 -> 2,011,413,504
    # total = 28*2,011,413,504 + 2*151936*3584 + 3584 = 57,408,658,944
    m = _model("qwen2-57b-a14b")
    c = count_params(m)
    assert layer_params(m, 0) == 2_011_413_504
    assert c.total == 57_408_658_944
    gate = {lin.name: lin for lin in layer_linears(m, 0)}["shared_expert_gate"]
    assert (gate.d_in, gate.d_out, gate.group) == (3584, 1, "router")
    # active: the shared expert and its gate run for every token; 56 of 64 experts do not
    assert c.total - c.active == 28 * 56 * 3 * 3584 * 2560


def test_norm_variants_by_hand() -> None:
    # Qwen3-0.6B (qk_norm): attention 1024*2048*2 + 1024*1024*2 = 6,291,456; MLP 3*1024*3072 =
    # 9,437,184; norms 2*1024 + q/k norms 2*128 = 2,304 -> 15,730,944
    assert layer_params(_model("qwen3-0.6b"), 0) == 15_730_944
    # Falcon-7B (one LayerNorm): attention 2*4544^2 + 2*4544*64 = 41,877,504;
    # MLP 2*4544*18176 = 165,183,488; one LayerNorm 2*4544 = 9,088 -> 207,070,080
    assert layer_params(_model("falcon-7b"), 0) == 207_070_080
    # MPT-7B (LayerNorms without bias): 4*4096^2 + 2*4096*16384 + 2*4096 = 201,334,784
    mpt = _model("mpt-7b")
    assert layer_params(mpt, 0) == 201_334_784
    assert count_params(mpt).final_norm == 4096
    # Gemma-2-9B (4 norms): attention 2*3584*4096 + 2*3584*2048 = 44,040,192;
    # MLP 3*3584*14336 = 154,140,672; norms 4*3584 = 14,336 -> 198,195,200
    assert layer_params(_model("gemma-2-9b"), 0) == 198_195_200
    # OPT-350m (post-LN): no final LayerNorm; the HF checkpoint holds 331,196,416
    opt = count_params(_model("opt-350m"))
    assert (opt.final_norm, opt.total) == (0, 331_196_416)
    # Gemma-3-1B (4 norms + q/k norms of head_dim): attention 2*1152*1024 + 2*1152*256 =
    # 2,949,120; MLP 3*1152*6912 = 23,887,872; norms 4*1152 + 2*256 = 5,120 -> 26,842,112
    assert layer_params(_model("gemma-3-1b"), 0) == 26_842_112
    # OLMo-2-7B (q/k norms over the whole projections): 4*4096^2 + 3*4096*11008 = 202,375,168;
    # post-norms 2*4096 + q_norm 32*128 + k_norm 32*128 = 16,384 -> 202,391,552
    olmo = _model("olmo-2-7b")
    assert layer_params(olmo, 0) == 202_391_552
    # with 8 kv heads k_norm spans 8*128 = 1,024 (q_norm 4,096), not head_dim
    gqa = olmo.model_copy(update={"num_kv_heads": 8})
    assert layer_params(gqa, 0) - layer_params(gqa.model_copy(update={
        "qk_norm_full_width": False}), 0) == (32 + 8) * 128 - 2 * 128


def test_qk_norm_full_width_needs_qk_norm() -> None:
    data = _model("olmo-2-7b").model_dump()
    with pytest.raises(ValueError, match="qk_norm_full_width needs qk_norm"):
        ModelSpec.model_validate({**data, "qk_norm": False})


def test_gpt_oss_sinks_router_and_expert_biases_by_hand() -> None:
    # gpt-oss-20b: h=2880, 64 heads and 8 kv heads of 64, 32 experts of 2880 (top-4), biases on
    # q/k/v/o, router and experts, a sink logit per head, vocab 201088 untied, 24 layers.
    # attention: q 2880*4096+4096 = 11,800,576; k, v 2880*512+512 = 1,475,072 each;
    #            o 4096*2880+2880 = 11,799,360                              -> 26,550,080
    # sinks 64; router 2880*32 + 32 = 92,192; experts 32*(2880*5760+5760 + 2880*2880+2880) =
    # 796,538,880; norms 2*2880 = 5,760                                     -> 823,186,976
    # total = 24*823,186,976 + 2*201088*2880 + 2880 = 20,914,757,184 (transformers 5.24 too)
    m = _model("gpt-oss-20b")
    assert layer_params(m, 0) == 823_186_976
    assert count_params(m).total == 20_914_757_184
    router = {lin.name: lin for lin in layer_linears(m, 0)}["router"]
    assert (router.bias, router.params) == (True, 92_192)
    no_sinks = m.model_copy(update={"attention_sinks": False})
    assert layer_params(m, 0) - layer_params(no_sinks, 0) == 64
    no_bias = m.model_copy(update={"moe": m.moe.model_copy(update={"router_bias": False})})
    assert layer_params(m, 0) - layer_params(no_bias, 0) == 32
    # active: 28 of 32 experts idle per token (each 24,891,840 with its biases); the authors'
    # 3.61B active leaves out the 579,133,440 embedding table
    c = count_params(m)
    assert c.total - c.active == 24 * 28 * 24_891_840
    assert round((c.active - 201_088 * 2880) / 1e9, 2) == 3.61
    # gpt-oss-120b: 36 layers of 128 experts; the authors' 116.83B total, 5.13B active
    big = count_params(_model("gpt-oss-120b"))
    assert big.total == 116_829_156_672
    assert round((big.active - 201_088 * 2880) / 1e9, 2) == 5.13


def test_hfconfig_reads_gpt_oss_sinks_router_and_expert_biases() -> None:
    from planner.catalog.hfconfig import spec_from_hf_dict

    data = yaml.safe_load((Path(__file__).parent / "data" / "param_counts.yaml").read_text(
        encoding="utf-8"))["catalog"]["gpt-oss-20b"]["config"]
    spec = spec_from_hf_dict(data, name="gpt-oss-20b")
    assert (spec.attention_sinks, spec.moe.router_bias, spec.mlp_bias, spec.attention_bias) == (
        True, True, True, True)
    llama = spec_from_hf_dict({**data, "model_type": "llama"}, name="x")
    assert not llama.attention_sinks and not llama.moe.router_bias


def test_norm_casts_back_follows_the_model_type_for_every_catalog_model() -> None:
    # RMSNorms that return their input's dtype whatever their weight's (hfconfig._NORM_CASTS_BACK):
    # the catalog's YAML states what transformers' modeling code of its model type does
    from planner.catalog.hfconfig import _NORM_CASTS_BACK
    from planner.catalog.load import load_catalog
    from tools.param_counts import MODEL_TYPES

    for model_id, entry in load_catalog().models.items():
        assert entry.norm_casts_back == (MODEL_TYPES[model_id] in _NORM_CASTS_BACK), model_id
