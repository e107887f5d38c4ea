"""planner.fixes: candidate changes evaluated with check, ranked, minimal sets, bisection.

The tiny test catalog: tiny-llama (vocabulary 1,000) on the 10 GiB test GPU. At 128 sequences
of 8192 tokens the fp32 logits (12 B x 1,000 per token) and activations take ~18 GiB; the
micro-batch's tokens set the memory, so halving tokens roughly halves it.
"""

from __future__ import annotations

import math

import pytest

from planner import check
from planner.catalog.request import TrainConfig
from planner.fixes import (
    Change,
    apply,
    evaluate,
    evaluate_all,
    largest_fitting,
    rank,
    smallest_fixes,
)
from planner.models.cost import Job

BIG = TrainConfig(checkpointing="none", seq_len=8192, micro_batch_size=128)
SHORTER = Change("seq 4608", {"seq_len": 4608})  # 0.5625 x tokens: ~10.6 GiB, still too big
FEWER = Change("micro 72", {"micro_batch_size": 72})  # 0.5625 x tokens: the same
CHUNKED = Change("chunked loss", {"chunked_loss": True})  # 12 -> 3 B per logit: fits alone
ONE = Change("micro 1", {"micro_batch_size": 1})


def ev(cat, cfg, **kw):
    return evaluate("tiny-llama", "test-gpu", cfg, catalog=cat, **kw)


def test_evaluate_reports_what_check_reports(cat):
    doc = check(model="tiny-llama", gpu="test-gpu", config=BIG, catalog=cat)
    r = ev(cat, BIG)
    # the typed values (api.evaluate), of which the check document shows the rounded figures
    assert (r.fits, r.peak_phase) == (doc["fits"], doc["memory"]["peak_phase"])
    assert round(r.per_gpu_gib, 3) == doc["memory"]["per_gpu_gib"]
    assert r.step_time_s == doc["throughput"]["step_time_s"]
    assert r.valid and not r.fits
    assert r.top_terms(1)[0][0] == "logits_and_loss"


def test_check_renders_the_typed_evaluation(cat):
    """api.evaluate is the one evaluation (issue 16: typed results, not rounded JSON read
    back); check's document is its rendering, and the fixes read its typed values."""
    from planner import Evaluation, evaluate
    from planner.api import check_document

    got = evaluate(model="tiny-llama", gpu="test-gpu", config=BIG, catalog=cat)
    assert isinstance(got, Evaluation) and got.fits is False
    assert check_document(got) == check(model="tiny-llama", gpu="test-gpu", config=BIG,
                                        catalog=cat)
    assert sum(got.memory.device_terms().values()) == pytest.approx(got.memory.device)


def test_an_invalid_combination_is_a_result_with_its_error(cat):
    r = ev(cat, BIG.model_copy(update={"offload": "optimizer"}))  # offload needs ZeRO/FSDP
    assert not r.valid and not r.fits and "offload" in r.error
    assert math.isnan(r.per_gpu_gib)


def test_apply_refuses_two_changes_of_one_field():
    assert apply(BIG, [FEWER, ONE]) is None
    cfg = apply(BIG, [SHORTER, FEWER])
    assert (cfg.seq_len, cfg.micro_batch_size) == (4608, 72)


def test_job_may_depend_on_the_configuration(cat):
    # tokens = 1000 sequences at the candidate's own length: half the length, half the tokens
    def job(cfg):
        return Job(1000 * cfg.seq_len, "1000 sequences")
    short = BIG.model_copy(update={"seq_len": 4096, "micro_batch_size": 1})
    long = short.model_copy(update={"seq_len": 8192})
    a, b = ev(cat, short, job=job), ev(cat, long, job=job)
    assert a.hours == pytest.approx(1000 * 4096 / a.tokens_per_s / 3600)
    assert b.hours == pytest.approx(1000 * 8192 / b.tokens_per_s / 3600)


def test_rank_keeps_what_fits_fastest_first(cat):
    results = evaluate_all("tiny-llama", "test-gpu", BIG, candidates=[SHORTER, CHUNKED, ONE],
                           catalog=cat)
    assert [r.fits for r in results] == [False, True, True]
    ranked = rank(results)
    assert {r.name for r in ranked} == {"chunked loss", "micro 1"}
    assert ranked[0].hours <= ranked[1].hours


def test_smallest_fixes_are_minimal(cat):
    # neither SHORTER nor FEWER fits alone, together they do (0.32 x tokens); CHUNKED fits alone,
    # so no pair containing it is minimal; FEWER + ONE set one field twice.
    found = smallest_fixes("tiny-llama", "test-gpu", BIG, changes=[SHORTER, FEWER, CHUNKED, ONE],
                           catalog=cat)
    assert sorted(f.name for f in found) == ["chunked loss", "micro 1", "seq 4608 + micro 72"]
    assert all(f.fits for f in found)
    assert found == rank(found)


def test_largest_fitting_is_the_boundary(cat):
    best = largest_fitting("tiny-llama", "test-gpu", BIG, field_name="micro_batch_size", lo=1,
                           hi=128, catalog=cat)
    assert best is not None and 1 <= best < 128
    assert ev(cat, BIG.model_copy(update={"micro_batch_size": best})).fits
    assert not ev(cat, BIG.model_copy(update={"micro_batch_size": best + 1})).fits
    step = largest_fitting("tiny-llama", "test-gpu", BIG, field_name="micro_batch_size", lo=1,
                           hi=128, step=8, catalog=cat)
    assert step == best // 8 * 8


def test_largest_fitting_none_when_the_smallest_value_does_not_fit(cat):
    assert largest_fitting("tiny-llama", "test-gpu", BIG, field_name="micro_batch_size", lo=100,
                           hi=128, catalog=cat) is None


def test_check_lists_ranked_fixes_when_it_does_not_fit():
    """Seed 004's question: a configuration that runs out of memory gets the changes that make
    it fit, each checked by the models, fastest job first, with its speed against the
    original; a configuration that fits gets none."""
    import json

    from planner.cli import main

    def run(*args):
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        return exc.value.code

    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = run("check", "--model", "mistral-7b", "--gpu", "a100-80gb-sxm", "--num-gpus",
                   "8", "--micro-batch", "4", "--seq-len", "4096", "--checkpointing", "none",
                   "--json")
    doc = json.loads(buf.getvalue())
    assert code == 1 and not doc["fits"]
    fixes = doc["fixes"]
    assert fixes and all(f["fits"] and f["per_gpu_gib"] <= 80 for f in fixes)
    hours = [f["hours"] for f in fixes if not f["changes"][0].startswith("--seq-len")]
    assert hours == sorted(hours)
    first = fixes[0]
    assert first["speed_vs_original"] == pytest.approx(
        first["tokens_per_s"] / doc["throughput"]["tokens_per_s"])
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert run("check", "--model", "0.5b", "--gpu", "a100-80gb-sxm", "--json") == 0
    assert "fixes" not in json.loads(buf.getvalue())
