"""Acceptance: the memory model against the published cases in validation/ (the project's copy
of ../shared/validation).

Bar (issue 2): on the usable SFT-family peak cases, median |relative error| <= 8 %, p90 <= 20 %;
fits/OOM verdicts (measured peaks count as "fits") >= 90 % right. Readings whose counter is
unknown are judged against the predicted allocated..device range (validate.CaseResult.rel_err).

Measured now (33 usable peaks, with the 2026-11-25 cases): median 5.9 %, p90 21.1 % (strictly
against reserved: 24.8 %), verdicts 93.5 %: the p90 bar is NOT met. It was met (2.6 % / 19.7 %)
only while validate.py turned chunked cross-entropy off for cases whose source named torchtune
commit 30c75d4 or its README optimisation table: a rule keyed on a case's URL, removed. The
torchtune profile's default (chunked loss) now applies to those rows unless the case says
extra.chunked_ce; expressing "torchtune before v0.3" needs a framework version on the case.
The p90 bar had become reachable when qwen-7b-full-2gpu-256 was corrected to the ZeRO-3 run
the memory model said it was (its
reading lies inside the ZeRO-3 range). The cases above 15 %: two torchtune 2024 rows at lengths
the unpacked Alpaca data does not reach (torchtune2024-llama2-7b-lora-2x4090,
torchtune2024-llama2-70b-lora-8xa100), torchtune's Llama-3.1-8B QLoRA row on one 4090 (+18 %),
and prime-rl's SFT rows (-17 % to -21 %: full fp32 logits, whose loss-time copies the 12 B/logit
constant undercounts for that trainer).
"""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog, shipped_validation_dir
from planner.validate import validate_file

CASES = shipped_validation_dir() / "memory_cases.yaml"


@pytest.fixture(scope="module")
def summary():
    return validate_file(CASES, load_catalog())[1]


def test_sft_family_peak_error(summary):
    s = summary["sft_acceptance"]
    assert s["peak_cases"] >= 33, s
    assert s["median_abs_err"] <= 0.08, s
    assert s["p90_abs_err"] <= 0.18, s  # regression guard at the measured 17.4 %


def test_sft_family_p90_bar(summary):
    assert summary["sft_acceptance"]["p90_abs_err"] <= 0.20


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
    from planner.memory import GIB
    from planner.params import count_params
    from planner.validate import case_config
    from planner.workloads import estimate_memory

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
