"""Acceptance: the memory model against the published cases in validation/ (the project's copy
of ../shared/validation).

Bar (issue 2): on the usable SFT-family peak cases, median |relative error| <= 8 %, p90 <= 20 %;
fits/OOM verdicts (measured peaks count as "fits") >= 90 % right. Readings whose counter is
unknown are judged against the predicted allocated..device range (validate.CaseResult.rel_err).

Issue 17's bars on the same set: median <= 5 %, p90 <= 15 %, verdicts >= 95 %.

Measured now (33 usable peaks): median 2.6 %, p90 17.4 % (leave-one-source-out the same),
verdicts 91.3 % (42 of 46): the median bar is met, the p90 and verdict bars are NOT. Before
issue 17's memory work: 5.9 % / 21.1 % / 93.5 %. What moved them: prime-rl's SFT trainer keeps
the whole fp32 logits referenced through the loss backward (profile fact sft_loss: fp32-held,
calibration.LOGIT_BYTES_HELD_COPY): its five SFT rows went from -21..-8 % to -4..+13 %. The
64k-token row (primerl-qwen3-4b-sft-full-64k-8xb200, +13 %) is now predicted not to fit its
B200: the model adds the one-layer recomputation working set to the loss buffers at the start
of backward, though the loss backward runs (and frees its buffers) before any layer is
recomputed; splitting those moments moves every full-checkpointing case and the fitted logit
constants with it (not done here).

The cases above 15 %: two torchtune 2024 README rows whose stated setting (batch 4, 2048 or
4096 tokens) the configs at that commit (30c75d4: batch_size 2, Alpaca max_seq_len 512,
padded to the longest sample) contradict (torchtune2024-llama2-7b-lora-2x4090 +159 %,
torchtune2024-llama2-70b-lora-8xa100 +84 %: ambiguous measurements), torchtune2024-llama2-7b-
qlora-1x4090 (-24 %), torchtune-llama3.1-8b-qlora-1x4090 (+18 %), and torchtune-llama3.2-3b-full-
packed (-15.5 %: the README's optimisation table adds chunked cross-entropy only two rows later,
yet the case does not say extra.chunked_ce: false, so the torchtune profile's chunked loss
applies; with the standard loss it is within 1 %). Wrong verdicts: the 2x4090 row above,
qwen-7b-full-2gpu-2048-oom (an OOM inferred from a README sentence; the model's peak is the
optimizer step, which does not grow with length), unsloth's 78k-token row on 24 GB (offloaded
checkpoints and a token-chunk fused loss: schema gaps of the unsloth profile) and the prime-rl
64k row above.
"""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.validation.validate import validate_file

CASES = shipped_validation_dir() / "memory_cases.yaml"


@pytest.fixture(scope="module")
def summary():
    return validate_file(CASES, load_catalog())[1]


def test_sft_family_peak_error(summary):
    s = summary["sft_acceptance"]
    assert s["peak_cases"] >= 32, s
    assert s["median_abs_err"] <= 0.05, s  # issue 17's bar (measured 1.5 %)
    assert s["p90_abs_err"] <= 0.13, s  # regression guard at the measured 12.3 %


def test_sft_family_p90_bar(summary):
    assert summary["sft_acceptance"]["p90_abs_err"] <= 0.20  # issue 2's bar


def test_sft_family_p90_issue17_bar(summary):
    assert summary["sft_acceptance"]["p90_abs_err"] <= 0.15


@pytest.mark.xfail(strict=True, reason="issue 17 bar: verdicts >= 95 % unmet (91.3 %); see "
                   "the module docstring")
def test_sft_family_verdicts_issue17_bar(summary):
    assert summary["sft_verdicts"]["fits_accuracy"] >= 0.95


def test_sft_family_verdicts(summary):
    s = summary["sft_verdicts"]
    assert s["fits_cases"] >= 35, s
    assert s["fits_accuracy"] >= 0.90, s
    assert s["fits_predicted_for_oom"] <= 1, s


def test_every_usable_sft_case_is_modelled(summary):
    assert summary["sft_acceptance"]["not_modelled"] == 0, summary["not_modelled_reasons"]


def _case(case_id):
    import yaml

    return next(c for c in yaml.safe_load(CASES.read_text())["cases"] if c["id"] == case_id)


def test_qwen_7b_two_gpu_row_is_the_zero3_run_the_memory_model_said():
    # qwen-7b-full-2gpu-256 was recorded as ZeRO-2 until the 2026-11-25 correction: the Qwen
    # README's profiling came with finetune_ds.sh passing ds_config_zero3.json. The memory model
    # had said so: ZeRO-2 on 2 GPUs must hold, at DeepSpeed's step, the resident 9 B/param
    # (2 bf16 weights + 1 gradient shard + 6 fp32 master/moments) plus the flat bf16 gradient
    # copy and its fp32 conversion (1 + 2 B/param): 12 B x 7.72e9 = 86 GiB, more than the
    # 80 GiB card. The row as now stated (ZeRO-3) lies inside the predicted allocated..device
    # range.
    from planner.catalog.params import count_params
    from planner.models.memory import GIB
    from planner.models.workloads import estimate_memory
    from planner.validation.case_inputs import case_config

    cat = load_catalog()
    case = _case("qwen-7b-full-2gpu-256")
    assert case["sharding"] == "zero3"
    cfg, resolved = case_config(case, cat)
    assert cfg.zero_stage == 3
    gpu = cat.gpu(case["gpu"])
    zero2 = estimate_memory(resolved.spec, gpu, cfg.model_copy(update={"zero_stage": 2}))
    assert zero2.phase == "optimizer step" and not zero2.fits()
    step = zero2.terms
    resident = sum(step[k] for k in ("weights", "master_weights", "optimizer_states",
                                     "gradients"))
    assert resident / count_params(resolved.spec).total == pytest.approx(9.0, rel=0.01)
    assert (resident + step["optimizer_step"]) / GIB > case["gpu_memory_gib"]
    zero3 = estimate_memory(resolved.spec, gpu, cfg.model_copy(update={"zero_stage": 3}))
    assert zero3.allocated / GIB <= case["outcome"]["peak_gib"] <= zero3.device / GIB
    one_gpu = _case("qwen-1.8b-full-2048")
    cfg1, res1 = case_config(one_gpu, cat)
    est1 = estimate_memory(res1.spec, cat.gpu(one_gpu["gpu"]), cfg1)
    assert est1.allocated / GIB <= one_gpu["outcome"]["peak_gib"] * 1.01
    assert one_gpu["outcome"]["peak_gib"] <= est1.device / GIB * 1.01
