"""The attention kernels' measured rates (models/attention.py) and who runs which kernel."""

from __future__ import annotations

import pytest
from conftest import tiny_config

from planner.catalog.frameworks import config_fields, resolve
from planner.models import attention as att


def test_measured_rows_are_shares_of_the_benchmark_gpus_peak(cat):
    h100, a100 = cat.gpu("h100-sxm"), cat.gpu("a100-80gb-sxm")
    # FA2 paper, causal, head dim 128: H100 308 TFLOPS/s at 8k of 989; A100 155 at 2k of 312
    assert att.attention_fraction(h100, "fa2", 8192) == pytest.approx(308 / 989)
    assert att.attention_fraction(a100, "fa2", 2048) == pytest.approx(155 / 312)
    # halfway (in log2) between 2k and 4k: (155 + 173) / 2
    assert att.attention_fraction(a100, "fa2", 2896) == pytest.approx(164 / 312, rel=1e-3)
    # beyond the benchmarked lengths the end values: 512 -> 99, 64k -> 189
    assert att.attention_fraction(a100, "fa2", 128) == pytest.approx(99 / 312)
    assert att.attention_fraction(a100, "fa2", 65536) == pytest.approx(189 / 312)


def test_hopper_kernels_scale_fa2_by_their_forward_and_backward_speedups(cat):
    h100 = cat.gpu("h100-sxm")
    # FA3 at 8k: 308 x 3.5 / (333 / 602 + 2.5 x 318 / 559) = 546.0 TFLOPS/s
    fa3 = 308 * 3.5 / (333 / 602 + 2.5 * 318 / 559)
    assert att.attention_fraction(h100, "fa3", 8192) == pytest.approx(fa3 / 989)
    assert 540 < fa3 < 550


def test_kernel_falls_back_where_it_does_not_run(cat):
    a100, l40s = cat.gpu("a100-80gb-sxm"), cat.gpu("l40s")
    h100, b200 = cat.gpu("h100-sxm"), cat.gpu("b200")
    assert att.kernel_on(a100, tiny_config(attention_kernel="fa3")) == "fa2"
    assert att.kernel_on(l40s, tiny_config(attention_kernel="cudnn")) == "fa2"
    assert att.kernel_on(h100, tiny_config(attention_kernel="cudnn")) == "cudnn"
    assert att.kernel_on(b200, tiny_config(attention_kernel="cudnn")) == "cudnn"
    assert att.kernel_on(b200, tiny_config(attention_kernel="fa3")) == "fa2"
    assert att.kernel_on(h100, tiny_config(flash_attention=False)) == "eager"
    assert att.kernel_on(h100, tiny_config()) == "fa2"


def test_eager_rate_counts_the_full_square(cat):
    a100 = cat.gpu("a100-80gb-sxm")
    # "Pytorch" bar at 2k: 32 TFLOPS/s of causal halves = 32 x 6 / 3.5 of full-square FLOPs
    rate = att.attention_rate(a100, tiny_config(flash_attention=False, seq_len=2048))
    assert rate == pytest.approx(32 * 6 / 3.5 * 1e12)


def test_profiles_name_their_kernel(cat):
    def kernel(fw):
        return config_fields(resolve(cat, fw), workload="sft", sharded=True).get(
            "attention_kernel")
    assert kernel("nemo") == "cudnn"  # Megatron-Core on TransformerEngine
    assert kernel("nanotron") == "fa2"  # flash_attn itself, not its base's TE
    assert kernel("torchtune") == "fa2"  # SDPA's flash backend
    assert kernel("prime-rl") == "fa2"  # model.attn default


def test_a_case_names_the_kernel_it_ran(cat):
    from planner.validation.case_inputs import case_config
    case = {"framework": "prime-rl", "model": "Qwen/Qwen3-0.6B", "workload": "sft",
            "precision": "bf16", "gpu": "h100-sxm", "num_gpus": 1, "seq_len": 8192,
            "extra": {"attention": "flash_attention_3"}}
    assert case_config(case, cat)[0].attention_kernel == "fa3"
    assert case_config({**case, "extra": {}}, cat)[0].attention_kernel == "fa2"


def test_a_case_states_eager_attention_and_pure_bf16_over_its_profile(cat):
    """LitGPT runs Gemma 2 (attention softcapping) unfused and its config_hub YAMLs set
    bf16-true: the case's extra.attention eager and extra.pure_bf16 win over the profile's
    SDPA and bf16-mixed defaults (litgpt.yaml)."""
    from planner.validation.case_inputs import case_config
    case = {"framework": "litgpt", "model": "google/gemma-2-2b", "workload": "sft",
            "method": "full", "precision": "bf16", "gpu": "a10g", "num_gpus": 1, "seq_len": 512}
    plain = case_config(case, cat)[0]
    assert plain.flash_attention and not plain.pure_bf16
    stated = case_config({**case, "extra": {"attention": "eager", "pure_bf16": True}}, cat)[0]
    assert not stated.flash_attention and stated.pure_bf16


def test_gpus_older_than_ampere_run_attention_unfused(cat):
    """FlashAttention-2/3 and TransformerEngine's fused kernels need Ampere or newer: a flash
    request on a V100 or T4 is timed at the eager row; on an A100 it runs FlashAttention-2."""
    cfg = tiny_config().model_copy(update={"flash_attention": True, "attention_kernel": "fa2"})
    for gid in ("v100-32gb", "v100-16gb", "t4"):
        assert att.kernel_on(cat.gpu(gid), cfg) == "eager"
    assert att.kernel_on(cat.gpu("a100-80gb-sxm"), cfg) == "fa2"
    assert att.kernel_on(cat.gpu("a100-80gb-sxm"),
                         cfg.model_copy(update={"attention_kernel": "fa3"})) == "fa2"


def test_flash_attention_2_on_datacenter_blackwell_runs_at_the_h100_rate(cat):
    """FlashAttention-2 has no sm100 kernel: on a B200 it reaches the H100's measured TFLOPS
    (tritonbench #171, flash-attention #1589), not the H100's share of the larger peak; a
    smaller Blackwell part keeps the share, and kernels with Blackwell code keep the share."""
    b200, h100, rtx = cat.gpu("b200"), cat.gpu("h100-sxm"), cat.gpu("rtx-5090")
    for seq in (1024, 4096, 16384):
        h100_tflops = att.attention_fraction(h100, "fa2", seq) * 989.0
        b200_tflops = att.attention_fraction(b200, "fa2", seq) * att.peak_tflops(b200, "bf16")
        assert b200_tflops == pytest.approx(h100_tflops, rel=1e-9)
        assert att.attention_fraction(rtx, "fa2", seq) == att.attention_fraction(h100, "fa2", seq)
        assert att.attention_fraction(b200, "cudnn", seq) == att.attention_fraction(
            h100, "cudnn", seq)
