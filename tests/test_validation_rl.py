"""Accuracy of the reward-model, DPO, PPO and GRPO predictions against validation/.

Issue 5's bars: memory median |error| <= 8 %, p90 <= 20 %; time median <= 20 %, p90 <= 50 %.
Where a bar is met it is asserted; where it is not, the measured figure is asserted with a small
tolerance (a regression guard) and the gap is stated. Figures: benchmarks/README.md, section
"RL and preference workloads".

Time (usable cases): PPO = 12 DeepSpeed-Chat step-3 epochs, GRPO = 5 NeMo-RL step times.
Memory: no RL/preference peak is usable_for_accuracy (GPU unknown or secondary source); they are
reported as their own group, not as an acceptance set.
"""

from __future__ import annotations

import statistics

import pytest

from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.models.decode import VLLM_V0_CASES
from planner.models.efficiency import RL_ROLLOUT_CASES, RL_ROLLOUT_DECODE_EFFICIENCY
from planner.validation.case_inputs import RL_CASE_WORKLOADS, rl_case
from planner.validation.validate import error_stats as memory_error_stats
from planner.validation.validate import load_cases, predict_case, rl_summary
from planner.validation.validate_throughput import (
    error_stats,
    implied_rl_decode_efficiency,
    predict_throughput_case,
)

DATA = shipped_validation_dir()


def _cases(name):
    """The cases with the project's additions (validation/case_additions.yaml)."""
    return load_cases(DATA / name)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def memory(catalog):
    cases = [c for c in _cases("memory_cases.yaml") if c["workload"] in RL_CASE_WORKLOADS]
    return {c["id"]: c for c in cases}, [predict_case(c, catalog) for c in cases]


@pytest.fixture(scope="module")
def time_cases():
    return {c["id"]: c for c in _cases("throughput_cases.yaml")
            if c["workload"] in RL_CASE_WORKLOADS}


@pytest.fixture(scope="module")
def timing(catalog, time_cases):
    return [predict_throughput_case(c, catalog) for c in time_cases.values()]


def _usable(results, workload):
    return error_stats([r for r in results if r.usable and r.workload == workload])


# --- time ----------------------------------------------------------------------------------
def test_every_usable_rl_time_case_is_predicted(timing):
    usable = [r for r in timing if r.usable]
    assert len(usable) == 21 and all(r.predicted is not None for r in usable)
    assert {r.workload for r in usable} == {"ppo", "grpo", "rm"}


# Bars (issue 5): median <= 20 %, p90 <= 50 % per workload.
# PPO (14 cases): median 21.1 % (NOT met since DeepSpeed's ZeRO-1/2 weight gather after the
# step is exposed and the deepspeed factor refitted 0.465 -> 0.491; 19.7 % before), p90 69.4 %
# (NOT met since the 2026-11-25 cases). Each
# DeepSpeed-Chat Table-1 run's per-device batch is the largest the memory model fits
# (BenckmarkSetting.md), with OPT's eager attention (2023 transformers) in that memory; OPT-30B
# on 8x A100-80GB (+150 %) keeps the script's 4 per GPU: the model fits no batch there. The
# p90 is set by that row and verl's AMD PPO log (-82 %: 47.2 s measured, of which 28.3 s
# generation of a mean 192-token response on MI300X; no AMD case calibrates the engine or the
# training rate, and verl has no stack of its own: it falls back to "hf").
# GRPO (6 cases): median 20.1 % (NOT met by 0.1 point since the verl AMD log, -68 %), p90
# 45.9 % (met). RL_ROLLOUT_DECODE_EFFICIENCY is the median over the 5 NeMo-RL cases
# (in-sample; leave-one-source-out: benchmarks/loso.py). RM (1 case, DeepSpeed-Chat's step-2
# OPT-350m log): +11.0 % since benchmarks/fit.py refitted STEP_OVERHEAD_S 0.1 -> 0.075 s and the
# deepspeed factor to 0.491 (was 0.5 %; a 350M model's step is mostly that overhead).
# Since dense linears are timed at their GEMM size's measured rate (gemm.DENSE_GEMM_POINTS) the
# deepspeed factor refits 0.624 -> 0.644 (DeepSpeed-Chat's OPT-1.3b SFT row's 4096-row GEMMs run
# slower) and the PPO median (in-sample) is 22.5 % (21.8 % before; leave-one-source-out 17.4 %
# both ways, benchmarks/loso.py).
# RM 13.2 % since the V100's matmul fraction is its measured 0.7587 (square-matmul database,
# tools/gpus_from_csv.py SQUARE_MATMUL), not the 0.80 default.
# The assertions guard these figures against regressions.
@pytest.mark.parametrize("workload, cases, median, p90", [
    ("ppo", 14, 0.23, 0.70), ("grpo", 6, 0.21, 0.50), ("rm", 1, 0.14, 0.14)])
def test_rl_time_accuracy(timing, workload, cases, median, p90):
    s = _usable(timing, workload)
    assert s["predicted"] == cases
    assert s["median_abs_err"] <= median, s
    assert s["p90_abs_err"] <= p90, s


def test_dschat_runs_use_the_largest_batch_that_fits(catalog, time_cases):
    """The benchmark batch (extra.largest_fitting_batch) is the memory model's edge: it fits
    and one more does not (or it is the case's global_batch_size per iteration); where nothing
    fits, the script's batch (extra.script_micro_batch) stays and is said."""
    from planner.models.workloads import estimate_memory
    from planner.validation.validate_throughput import rl_inputs

    def fits(case, batch):
        rc = rl_case({**case, "micro_batch_size": batch}, catalog, for_time=True)
        return estimate_memory(rc.resolved.spec, catalog.gpu(case["gpu"]), rc.cfg,
                               critic=rc.critic, reward=rc.reward).fits()

    edges = {}
    for name in ("dschat_ppo_opt6.7b_8xA100-80", "dschat_ppo_opt1.3b_1xA6000",
                 "dschat_ppo_opt66b_64xA100-80"):
        case = time_cases[name]
        rc, cfg, _gpu = rl_inputs(case, catalog)
        b = cfg.micro_batch_size
        assert case["extra"]["largest_fitting_batch"], name
        cap = case["global_batch_size"] // case["num_gpus"]
        assert fits(case, b) and (b == cap or not fits(case, b + 1)), (name, b)
        assert cfg.rollout_batch == b * case["num_gpus"]
        assert any("largest that fits" in a for a in rc.assumptions)
        edges[name] = b
    assert edges["dschat_ppo_opt66b_64xA100-80"] == 16  # the cap: 1024 / 64
    assert edges["dschat_ppo_opt6.7b_8xA100-80"] > 4  # more than the script's 4
    rc, cfg, _gpu = rl_inputs(time_cases["dschat_ppo_opt30b_8xA100-80"], catalog)
    assert cfg.micro_batch_size == 4 and any("no per-device batch fits" in a
                                             for a in rc.assumptions)


def test_rl_rollout_efficiency_is_the_median_of_its_cases(catalog, time_cases):
    """Every usable shared PPO/GRPO case, whatever its engine (vLLM, DeepSpeed-Chat's hybrid
    engine), sets the in-iteration factor: the median of the implied values at most 1; the
    runs on vLLM's V0 engine set its per-sequence host term instead (decode.VLLM_V0_CASES)."""
    usable = {i for i, c in time_cases.items()
              if c["usable_for_accuracy"] and c["workload"] in ("ppo", "grpo")}
    assert set(RL_ROLLOUT_CASES) == usable - set(VLLM_V0_CASES)
    assert usable & set(VLLM_V0_CASES)  # the shared verl MI300X rows ran V0
    implied = [implied_rl_decode_efficiency(time_cases[i], catalog) for i in RL_ROLLOUT_CASES]
    kept = [v for v in implied if v <= 1]
    assert len(kept) < len(implied)  # DS-Chat's OPT-30B and OPT-1.3B on an A100-40 set nothing
    assert statistics.median(kept) == pytest.approx(RL_ROLLOUT_DECODE_EFFICIENCY, abs=0.002)


def test_implied_rollout_efficiency_of_a_throughput_reading(catalog, time_cases):
    """A tokens/s reading of an iteration implies the engine share at which it is predicted
    exactly, as its step time does (a rate rises with the engine's speed, a time falls)."""
    case = time_cases["verl_amd_grpo_deepseek7b_8xMI300"]
    rate = {**case, "metric": "tokens_per_sec_per_gpu",
            "value": case["extra"]["tokens_per_sec_per_gpu"]}
    for c in (case, rate):
        eff = implied_rl_decode_efficiency(c, catalog)
        assert 0.02 < eff < 4.0
        predicted = predict_throughput_case(c, catalog)
        assert predicted.rel_err is not None
    # the same run read both ways implies about the same share (its tok/s is its own
    # tokens / step time; the logged and modelled tokens differ slightly)
    assert implied_rl_decode_efficiency(rate, catalog) == pytest.approx(
        implied_rl_decode_efficiency(case, catalog), rel=0.25)


# --- memory --------------------------------------------------------------------------------
def test_rl_memory_peaks(memory):
    _cases_by_id, results = memory
    s = rl_summary(results)
    # Usable RL and preference peaks (17 prime-rl trainer-only GRPO readings, DeepSpeed-Chat's
    # PPO and reward-model logs): bar (issue 17) median <= 10 %, p90 <= 25 %, in-sample: met at
    # 5.9 % / 18.5 % (21.6 % before the MoE routed copies). The dense Qwen3 trainer readings
    # are within 7.4 %; the MoE ones (Qwen3 30B-A3B, 235B-A22B, INTELLECT-3) -8 % to -22 %
    # (-10 % to -32 % without memory.routed_copies_bytes_per_token), DeepSpeed-Chat's PPO -8.9 %
    # (-18 % before its EMA copy of the actor was held, TrainConfig.ema_copy; -6.1 % with
    # fp32 log-probs). All 30 RL/preference peaks: 7.1 % / 21.9 %.
    usable = memory_error_stats([r for r in results if r.usable and r.kind == "peak"])
    assert usable["peak_cases"] == 19, usable
    assert usable["median_abs_err"] <= 0.10 and usable["p90_abs_err"] <= 0.25, usable
    assert usable["p90_abs_err"] <= 0.19, usable  # regression guard at the measured 18.5 %
    peaks = s["peaks"]
    assert peaks["median_abs_err"] <= 0.10 and peaks["p90_abs_err"] <= 0.25, peaks
    by_workload = s["peaks_by_workload"]
    assert by_workload["grpo"]["peak_cases"] == 26  # 9 verl logs + 17 prime-rl readings
    verl = memory_error_stats([r for r in results
                               if r.framework == "verl" and r.kind == "peak"])
    # verl GRPO logs (torch allocated, GPU unknown, engine pool outside the counter; none
    # usable): median 8.4 %, p90 103 %. With verl's fp32 actor (fp32_trained_weights) the
    # 7B-72B LoRA runs are within -21 %; the 0.5B/3B LoRA runs and the full-parameter run
    # (whose reading includes the vLLM pool per its note) are set by the 152k-vocab logits at
    # the configured 1536 tokens, while verl's remove-padding passes only the sampled tokens
    # (their mean lengths are not fields of these cases).
    assert verl["peak_cases"] == 9
    assert verl["median_abs_err"] == pytest.approx(0.084, abs=0.02), verl
    assert verl["p90_abs_err"] == pytest.approx(1.03, abs=0.10), verl
    dpo = by_workload["dpo"]
    # two DPO readings, neither usable: a secondary DPO-LoRA (unknown counter; +10.2 % with its
    # loss buffers freed before the recompute, +18.6 % counted with it) and DeepSpeed-Chat's
    # OPT-350m DPO log on an unstated GPU (+21.9 % with its 16-bit log-probs, +28.6 % fp32)
    assert dpo["peak_cases"] == 2 and dpo["median_abs_err"] == pytest.approx(0.142, abs=0.02)


def test_rl_fits_oom_confusion(memory):
    _cases_by_id, results = memory
    v = rl_summary(results)["verdicts"]
    # The expensive error (fits predicted for a published OOM) happens once: OpenAssistant's RM
    # without checkpointing, whose examples hold several ranked replies (sequences unknown, one
    # pair assumed).
    assert v["oom_predicted_fits"] == 1, v
    assert v["oom_predicted_oom"] == 4, v
    assert v["fits_predicted_fits"] == 8, v
    # Published fits predicted OOM: 6 verl GRPO-LoRA tuning maxima (22-128 sequences per GPU
    # per micro-batch at the configured 1536 tokens; verl's remove-padding passes only the
    # sampled tokens), 4 verl full-GRPO minimum configs (16 x 2048 tokens; 72B with 24,000
    # tokens per micro-step) and the LLaMA-Factory DPO user report on 24 GB (cutoff 1024 as
    # every pair's length).
    assert v["fits_predicted_oom"] == 11, v


# --- mapping -------------------------------------------------------------------------------
def test_dpo_counts_pairs(memory, catalog):
    by_id, _ = memory
    cfg = rl_case(by_id["openrlhf-codellama-34b-dpo-full-8xa100"], catalog).cfg
    assert cfg.workload == "dpo" and cfg.micro_batch_size == 1 and cfg.reference
    cfg = rl_case(by_id["llamafactory-issue3716-llama3-8b-lora-dpo-a10"], catalog).cfg
    assert cfg.micro_batch_size == 4 and cfg.lora_targets == ("q", "v")


def test_verl_offload_is_idle_offload_and_sp_splits_sequences(memory, catalog):
    by_id, _ = memory
    rc = rl_case(by_id["verl-tune-qwen2.5-14b-grpolora-2xh100"], catalog)
    cfg = rc.cfg
    assert cfg.offload_idle and cfg.offload == "none" and cfg.fsdp
    assert cfg.cp == 1 and cfg.micro_batch_size == 58  # 116 per DP rank over Ulysses SP 2
    assert cfg.method == "lora" and cfg.lora_rank == 32 and cfg.rollout_n == 5
    assert rc.engine_outside_counter


def test_role_models(memory, catalog, time_cases):
    by_id, _ = memory
    rc = rl_case(by_id["torchtune-mistral-7b-ppo-full-1xa100"], catalog)
    assert rc.reward.num_layers == 32 and rc.reward.vocab_size == 32000  # Mistral-7B shape
    rc = rl_case(time_cases["dschat_ppo_opt13b_8xA100-80"], catalog, for_time=True)
    assert rc.critic.id == "opt-350m" and rc.reward.id == "opt-350m"
    assert rc.cfg.method == "full" and rc.cfg.zero_stage == 3 and rc.cfg.rollout_tp == 2
    assert rc.cfg.rollout_batch == 128
