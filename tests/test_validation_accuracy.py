"""Acceptance: the memory model against the published cases in validation/ (the project's copy
of ../shared/validation).

Bar (issue 2): on the usable SFT-family peak cases, median |relative error| <= 8 %, p90 <= 20 %;
fits/OOM verdicts (measured peaks count as "fits") >= 90 % right. Readings whose counter is
unknown are judged against the predicted allocated..device range (validate.CaseResult.rel_err).

Issue 17's bars on the same set: median <= 5 %, p90 <= 15 %, verdicts >= 95 %.

Measured now (32 usable peaks): median 1.5 %, p90 12.3 % (leave-one-source-out the same),
verdicts 95.6 % (43 of 45): all three bars are met. Before issue 17's memory work: 5.9 % /
21.1 % / 93.5 %; before this round 2.2 % / 17.0 % / 91.3 % (33 peaks, 46 verdicts). What moved
them:
- prime-rl's SFT trainer keeps the whole fp32 logits referenced through the loss backward
  (profile fact sft_loss: fp32-held): its five SFT rows went from -21..-8 % to -4..+13 %.
- torchtune's May 2024 README rows (torchtune2024-*) are decimal GB (get_memory_stats divided
  by 1e9 until pytorch/torchtune d0b89e2) and ran the unchunked loss of that date; the 2x4090
  LoRA row could not have run without checkpointing (28 GiB of saved tensors on a 24 GB card)
  and the 70B LoRA row's stated batch cannot fit its reading, so it is not usable: corrections
  in validation/case_additions.yaml with their evidence. The 7B rows: -24 / -13.5 / +159 % ->
  inside their predicted ranges.
- Unsloth's profile states its offloaded checkpoints, fused LoRA kernels and token-fused loss
  (tests/test_unsloth_memory.py): its 78k-token row on 24 GB is predicted to fit, as measured.

Above 10 % now: torchtune-llama3.1-8b-qlora-1x4090 (+18 %), torchtune-llama3.1-405b-qlora-8xa100
(+14 %), primerl-qwen3-4b-sft-full-64k-8xb200 (+13 %), torchtune-llama3.1-8b-lora-1x4090 (+13 %),
qwen-1.8b-full-8192 (-10 %). Wrong verdicts: the prime-rl 64k row (predicted over its 178 GiB
B200: the model adds one layer's recomputation working set to the loss buffers, which the loss
backward frees first; splitting those moments for every loss lowers prime-rl's RL peaks by 5-10
% and breaks the RL/preference bars, so it is done only for the token-fused loss, which takes
its gradient in forward) and qwen-7b-full-2gpu-2048-oom (an OOM inferred from a README
sentence; the model's peak is the optimizer step, which does not grow with length).
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
