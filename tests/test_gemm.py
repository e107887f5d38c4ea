"""Routed experts' and dense linears' GEMMs at their size's measured share of the MAMF rate
(models/gemm.py)."""

from __future__ import annotations

import math

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.models import gemm
from planner.models.flops import matmul_params


@pytest.fixture(scope="module")
def real():
    return load_catalog()


def _cfg(**kw) -> TrainConfig:
    base = {"checkpointing": "full", "seq_len": 16384, "micro_batch_size": 1}
    return TrainConfig(**{**base, **kw})


def test_fraction_is_the_benchmarks_share_of_the_h100_mamf():
    # VeOmni PR 460: 180.67 and 242.12 TFLOP/s of the H100's 794.5 MAMF
    assert gemm.gemm_fraction(1.34e9) == pytest.approx(180.67 / 794.5, abs=1e-3)
    assert gemm.gemm_fraction(6.44e9) == pytest.approx(242.12 / 794.5, abs=1e-3)
    # torchao PR 2490: 2 x 8192 x 5120 x 8192 FLOPs in 1.31 and 1.26 ms, mean share of 794.5
    mean = (2 * 8192 * 5120 * 8192 / 1.31e-3 + 2 * 8192 * 5120 * 8192 / 1.26e-3) / 2
    assert gemm.gemm_fraction(4.29e10) == pytest.approx(mean / 794.5e12, abs=2e-3)
    # halfway in log between the two VeOmni rows: (0.227 + 0.305) / 2
    assert gemm.gemm_fraction(math.sqrt(1.34e9 * 6.44e9)) == pytest.approx(0.266)
    # the ends hold beyond the anchors; larger GEMMs never run slower
    assert gemm.gemm_fraction(1e6) == 0.227 and gemm.gemm_fraction(1e13) == 1.0
    sizes = [10 ** (8 + i / 4) for i in range(20)]
    fractions = [gemm.gemm_fraction(s) for s in sizes]
    assert fractions == sorted(fractions)


def test_qwen3_30b_a3b_expert_gemm_and_share(real):
    m = real.model("qwen3-30b-a3b").spec
    # 16384 tokens x 8 / 128 experts = 1024 rows of a 2048 x 768 gate: 2 x 1024 x 2048 x 768
    assert gemm.expert_gemm_flops(m, _cfg()) == pytest.approx(2 * 1024 * 2048 * 768)
    # two sequences per micro-batch: twice the rows
    assert gemm.expert_gemm_flops(m, _cfg(), micro_batch=2) == pytest.approx(
        2 * 2048 * 2048 * 768)
    # routed: 48 layers x 8 x 3 x 2048 x 768 = 1.812e9 of N = 3.042e9
    # (per layer attention 18.874M + router 0.262M + experts 37.749M; head 151936 x 2048)
    routed = 48 * 8 * 3 * 2048 * 768
    assert gemm.expert_matmul_share(m) == pytest.approx(routed / matmul_params(m))
    assert matmul_params(m) == pytest.approx(48 * (18_874_368 + 262_144 + 37_748_736)
                                             + 151936 * 2048)
    # the routed share at f, between the VeOmni rows (3.2 GFLOP per expert GEMM), the rest of
    # the matmuls at their dense GEMMs' fractions (dense_gemm_shapes)
    f = gemm.gemm_fraction(2 * 1024 * 2048 * 768)
    assert 0.227 < f < 0.305
    s = routed / matmul_params(m)
    dense = sum(share / gemm.dense_gemm_fraction(2 * 16384 * size)
                for size, share in gemm.dense_gemm_shapes(m))
    assert gemm.linear_time_scale(m, _cfg()) == pytest.approx(s / f + dense)
    assert sum(share for _, share in gemm.dense_gemm_shapes(m)) == pytest.approx(1 - s)


def test_large_dense_gemms_and_large_experts_keep_the_mamf_rate(real):
    # Qwen3-4B at 16k tokens: every GEMM >= 2 x 16384 x 2560 x 1024 = 8.6e10 FLOPs (k, v)
    assert gemm.linear_time_scale(real.model("qwen3-4b").spec, _cfg()) == pytest.approx(
        1.0, abs=0.01)
    # Mixtral 8x7B, 2 x 4096 tokens: 2048 rows of 4096 x 14336 = 2.4e11 FLOPs, on the plateau;
    # its k and v (8192 x 4096 x 1024 = 6.9e10 FLOPs) are 2 % of the matmuls
    mixtral = real.model("mixtral-8x7b").spec
    cfg = _cfg(seq_len=4096, micro_batch_size=2)
    assert gemm.expert_gemm_flops(mixtral, cfg) == pytest.approx(2 * 2048 * 4096 * 14336)
    assert gemm.linear_time_scale(mixtral, cfg) == pytest.approx(1.0, abs=0.01)


def test_dense_fraction_is_the_xla_sm90_table_share_of_the_h100_mamf():
    # XLA kDefaultMatmulPTable sm_90 bf16: b 2 x m 4096 rows, k 1024: n 1024 598.2, n 2048
    # 680.9, n 4096 693.0 TFLOP/s; the points are group medians, these rows sit near them
    assert gemm.dense_gemm_fraction(2 * 8192 * 1024 * 1024) == pytest.approx(598.2 / 794.5,
                                                                              abs=0.02)
    assert gemm.dense_gemm_fraction(2 * 8192 * 2048 * 1024) == pytest.approx(680.9 / 794.5,
                                                                              abs=0.01)
    assert gemm.dense_gemm_fraction(2 * 8192 * 4096 * 1024) == pytest.approx(693.0 / 794.5,
                                                                              abs=0.05)
    # halfway in log between two points: their mean; the ends hold beyond the anchors
    assert gemm.dense_gemm_fraction(math.sqrt(1.72e10 * 3.44e10)) == pytest.approx(
        (0.741 + 0.855) / 2)
    assert gemm.dense_gemm_fraction(1e6) == 0.173 and gemm.dense_gemm_fraction(1e13) == 1.0
    sizes = [10 ** (8 + i / 4) for i in range(20)]
    fractions = [gemm.dense_gemm_fraction(s) for s in sizes]
    assert fractions == sorted(fractions)
    # over the measured grouped-GEMM sizes (1.34e9 ... 4.29e10: VeOmni, torchao) a dense GEMM
    # reaches more of the plateau than the routed experts of the same FLOPs
    assert all(gemm.dense_gemm_fraction(s) > gemm.gemm_fraction(s)
               for s in sizes if 1.34e9 <= s <= 4.29e10)


def test_qwen3_0_6b_dense_gemms(real):
    # hidden 1024, 16 q heads and 8 kv heads of 128, MLP 3072, vocab 151936, 28 layers
    m = real.model("qwen3-0.6b").spec
    shapes = dict(gemm.dense_gemm_shapes(m))
    n = matmul_params(m)
    per_layer = {1024 * 2048: 2 * 1024 * 2048,  # q and o
                 1024 * 1024: 2 * 1024 * 1024,  # k and v
                 1024 * 3072: 3 * 1024 * 3072}  # gate, up, down
    for size, params in per_layer.items():
        assert shapes[size] == pytest.approx(28 * params / n)
    assert shapes[151936 * 1024] == pytest.approx(151936 * 1024 / n)
    cfg = _cfg(seq_len=8192)
    expected = sum(share / gemm.dense_gemm_fraction(2 * 8192 * size)
                   for size, share in shapes.items())
    assert gemm.linear_time_scale(m, cfg) == pytest.approx(expected)
    # 8k tokens: k, v at 0.74, q, o at 0.86 of MAMF; the head (2.5e12 FLOPs) on the plateau
    assert 1.10 < gemm.linear_time_scale(m, cfg) < 1.15
    # twice the rows (two sequences, or 16k tokens) run closer to the plateau; tp and cp
    # shrink the GEMMs again
    two = gemm.linear_time_scale(m, cfg, micro_batch=2)
    assert two == pytest.approx(gemm.linear_time_scale(m, _cfg(seq_len=16384)))
    assert 1.0 < two < gemm.linear_time_scale(m, cfg)
    assert gemm.linear_time_scale(m, _cfg(seq_len=16384, tp=2, num_gpus=2)) == \
        pytest.approx(gemm.linear_time_scale(m, cfg))
    assert gemm.linear_time_scale(m, _cfg(seq_len=16384, cp=2, num_gpus=2)) == \
        pytest.approx(gemm.linear_time_scale(m, cfg))


def test_smaller_micro_batches_make_moe_steps_slower_per_token(real):
    from planner.models.throughput import estimate_throughput

    m, gpu = real.model("qwen3-30b-a3b").spec, real.gpu("h200-sxm")
    one = estimate_throughput(m, gpu, _cfg(seq_len=2048, grad_accum=8), stack="fsdp")
    eight = estimate_throughput(m, gpu, _cfg(seq_len=2048, micro_batch_size=8), stack="fsdp")
    # same tokens per step; 256 rows per expert GEMM (0.227 of MAMF) against 2048 (0.305): the
    # routed experts' time grows 0.305 / 0.227 = 1.34x, diluted by attention and dense layers
    assert one.tokens_per_step == eight.tokens_per_step
    assert one.terms["compute"] > 1.1 * eight.terms["compute"]


def test_fp8_expert_share_is_the_measured_mxfp8_speedup_over_the_fp8_rate():
    # torchao PR 3271: MXFP8 over bf16 grouped GEMM fwd+bwd 1.115x at 2 x 2048 x 8192 x 5120
    # FLOPs per group; a GPU whose fp8 rate is 1.95x its 16-bit rate keeps 1.115 / 1.95
    assert gemm.fp8_expert_share(2 * 2048 * 8192 * 5120, 1.95) == pytest.approx(1.115 / 1.95)
    # below the smallest group the end value holds; never faster than the fp8 rate
    assert gemm.fp8_expert_share(1e9, 1.95) == pytest.approx(1.115 / 1.95)
    assert gemm.fp8_expert_share(1.07e13, 1.5) == 1.0


def test_fp8_routed_experts_take_longer_than_at_the_fp8_rate(real):
    m = real.model("qwen3-30b-a3b").spec
    cfg = _cfg()
    plain = gemm.linear_time_scale(m, cfg)
    fp8 = gemm.linear_time_scale(m, cfg, fp8_over_16bit=1.95)
    share = gemm.expert_matmul_share(m)
    part = share / gemm.gemm_fraction(gemm.expert_gemm_flops(m, cfg))
    # only the routed part changes: it is divided by 1.115 / 1.95
    assert fp8 - plain == pytest.approx(part * (1.95 / 1.115 - 1))
    # a dense model has no routed part
    dense = real.model("qwen3-4b").spec
    assert gemm.linear_time_scale(dense, cfg, fp8_over_16bit=1.95) == pytest.approx(
        gemm.linear_time_scale(dense, cfg))
