"""Issues 17 and 18's accuracy bars, leave-one-source-out on the project's validation copy
(benchmarks/loso.py: every fitted constant refitted without each source). Met bars are plain
assertions; unmet ones are strict xfails naming the gap, so meeting one fails the run until its
mark goes. Slow tier (one LOSO pass, ~10 s)."""

from __future__ import annotations

import pytest

from tests.test_fit import fit, loso

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report():
    from planner.catalog.load import load_catalog

    return loso.loso(fit.load(), load_catalog())


@pytest.fixture(scope="module")
def table(report):
    # the bars are on the shared validation cases; the project's own cases are fitted on only
    shared = loso.shared_ids(fit.DEFAULT_DIR)
    return loso.rows(loso.only(report["loso"], shared), report["fallback_ids"])


@pytest.fixture(scope="module")
def every_source(report):
    return loso.rows(report["loso"], report["fallback_ids"])


def _row(table, name):
    cases, median, p90, share = table[name]
    return cases, median, p90, share


def test_memory_bars_met(table):
    _, median, p90, _ = _row(table, "memory: SFT-family peaks (usable)")
    assert median <= 0.05 and p90 <= 0.15
    assert _row(table, "memory: SFT fits/OOM verdicts right")[3] >= 0.95
    _, median, p90, _ = _row(table, "memory: RL/preference peaks")
    assert median <= 0.10 and p90 <= 0.25


def test_training_throughput_median_met(table):
    assert _row(table, "throughput: training (usable)")[1] <= 0.15


def test_training_throughput_median_over_every_source(every_source):
    """The training median held out by source over every usable case, the project's own
    cases included (ten sources, 86 cases): a guard on what the fits do out of sample, set
    just above the 14.0 % measured when attention was timed at its kernel's rate (16.3 %
    before, 20.9 % before the hf pool)."""
    assert every_source["throughput: training (usable)"][1] <= 0.15


def test_training_throughput_p90(table):
    """Met since the RTX 4090's (and nine other GPUs') matmul fraction is measured, not the
    0.80 default (tools/gpus_from_csv.py SQUARE_MATMUL): 35.3 -> 32.9 %. The torchtune RTX
    A6000 rows (the LoRA one needs more than the card's dense peak) and MLPerf v4.0's PEFT +
    DeepSpeed 8 x H100 row are still the largest errors."""
    assert _row(table, "throughput: training (usable)")[2] <= 0.35


@pytest.mark.xfail(strict=True, reason="issue 18: DeepSpeed-Chat's OPT-30B row (no engine speed "
                   "matches it at the batch its memory allows) and its single-GPU rows (their "
                   "LoRA run as method full: +41.6 and +33.2 %) set the PPO p90 on the shared "
                   "rows (39.1 %; the median, 13.9 %, is met since vLLM V0's host loop is "
                   "modelled: verl's MI300X rows -51.7 -> -28.7 %)")
def test_ppo_step_time_bars(table):
    _, median, p90, _ = _row(table, "RL step time: ppo (usable)")
    assert median <= 0.15
    assert p90 <= 0.35


def test_ppo_step_time_median_met(table):
    """The median bar alone, met since vLLM V0's per-sequence host loop is timed (the shared
    verl MI300X rows ran V0) and PPO may be scored by a function (18.6 -> 13.9 %)."""
    assert _row(table, "RL step time: ppo (usable)")[1] <= 0.15


def test_grpo_step_time_bars_met(table):
    """Met since the rollout factor pools every RL framework's iterations (NeMo-RL's held out
    run at DeepSpeed-Chat's and verl's, not at the serving vLLM factor), and since
    DeepSpeed-Chat's log-probs are taken on its 16-bit logits as its code does (the pooled
    factor 0.296 -> 0.278): median 7.0 -> 14.5 %, p90 35.7 -> 32.1 %."""
    _, median, p90, _ = _row(table, "RL step time: grpo (usable)")
    assert median <= 0.15 and p90 <= 0.35
