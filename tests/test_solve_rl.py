"""The planner on preference and RL workloads: solver == enumeration, exact memory tables,
re-checked plans."""

from __future__ import annotations

import math

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.models.workloads import estimate_memory
from planner.solver.oracle import enumerate_best
from planner.solver.solve import plan
from planner.solver.space import build_space
from planner.solver.stages import check_plan, config_of, make_plan, solve_lexicographic
from planner.solver.steptime import layout_config

CAT = load_catalog()
RL = dict(prompt_len=256, response_len=256, rollout_batch=16)

SMALL = [
    dict(model="qwen2.5-0.5b", workload="grpo", method="lora", gpus=("rtx-3090", "rtx-4090"),
         max_gpus=4, global_batch_size=8, offload="none", **RL),
    dict(model="qwen2.5-0.5b", workload="ppo", method="full", gpus=("rtx-3090", "h100-sxm"),
         max_gpus=4, global_batch_size=8, checkpointing="full", **RL),
    dict(model="qwen2.5-1.5b", workload="grpo", method="full", gpus=("rtx-4090", "h100-sxm"),
         max_gpus=8, global_batch_size=8, gpu_memory_utilization=0.4, sharding="zero3",
         framework="openrlhf", **RL),
    dict(model="qwen2.5-0.5b", workload="grpo", method="lora", gpus=("rtx-4090", "h100-sxm"),
         max_gpus=4, global_batch_size=8, offload="none", pricing="rent", tokens=1e7,
         objective="time", budget_usd=50, **RL),
    dict(model="qwen2.5-0.5b", workload="grpo", method="lora", gpus=("rtx-4090", "h100-sxm"),
         max_gpus=4, global_batch_size=8, offload="none", pricing="rent", tokens=1e7,
         objective="time", budget_usd=50, mean_seq_len=200, **RL),
    dict(model="qwen2.5-0.5b", workload="grpo", method="lora", gpus=("rtx-4090", "h100-sxm"),
         max_gpus=4, global_batch_size=8, offload="none", pricing="rent", tokens=1e7,
         objective="time", budget_usd=50, mean_seq_len=200, mean_response_len=80, **RL),
    dict(model="qwen2.5-0.5b", workload="ppo", method="full", gpus=("rtx-3090", "h100-sxm"),
         max_gpus=10, global_batch_size=8, checkpointing="full", placement="split",
         framework="openrlhf", **RL),
    dict(model="qwen2.5-0.5b", workload="grpo", method="full", gpus=("rtx-4090", "h100-sxm"),
         max_gpus=6, global_batch_size=8, offload="none", pricing="rent", tokens=1e7,
         objective="time", budget_usd=50, placement="split", framework="openrlhf", **RL),
    dict(model="qwen2.5-1.5b", workload="rm", gpus=("rtx-3090", "rtx-4090"), max_gpus=4,
         global_batch_size=8, seq_len=1024, method="full"),
    dict(model="qwen2.5-1.5b", workload="dpo", gpus=("rtx-3090", "rtx-4090"), max_gpus=4,
         global_batch_size=8, seq_len=1024, method="lora", offload="none"),
]


@pytest.mark.parametrize("kw", SMALL, ids=lambda kw: f"{kw['workload']}-{kw['model']}"
                         f"{'-' + kw['placement'] if 'placement' in kw else ''}")
def test_solver_matches_enumeration(kw):
    space = build_space(PlanRequest(**kw), CAT)
    solved = solve_lexicographic(space, 30)
    best = enumerate_best(space)
    assert (solved is None) == (best is None)
    if best is None:
        return
    v = solved.values
    cost = best.cost if kw.get("pricing") == "rent" else v["cost_usd"]
    assert (cost, v["num_gpus"], solved.strategy, solved.offer, -v["micro_batch"], v["dp"]) == \
        (best.cost, best.num_gpus, best.strategy, best.offer, best.neg_micro_batch, best.dp)
    result = make_plan(space, solved.offer, config_of(space, solved), hosts=v["hosts"])
    assert check_plan(space, result) == []


@pytest.mark.parametrize("placement", ["colocate", "separate", "split"])
@pytest.mark.parametrize("util", [None, 0.5])
@pytest.mark.parametrize("dp", [1, 2, 3, 8])
def test_rl_memory_tables_match_the_model(placement, util, dp):
    """gpu_need_mib (the solver's number) equals estimate_memory's device peak, rounded up,
    for every RL strategy; with a fixed engine fraction the scaled need decides fit exactly
    like the model."""
    req = PlanRequest(model="qwen2.5-1.5b", workload="grpo", gpus=("h100-sxm", "rtx-4090"),
                      global_batch_size=24, placement=placement, gpu_memory_utilization=util,
                      rollout_tp=1, framework="openrlhf", **RL)
    space = build_space(req, CAT)
    for si, s in enumerate(space.strategies[::7]):
        si = space.strategies.index(s)
        cfg = layout_config(space, si, num_gpus=space.num_gpus(si, 1, 1, dp=dp), tp=1, pp=1,
                            micro_batch=1, grad_accum=24 // dp)
        need = space.gpu_need_mib(si, 1, 1, dp=dp, mb=1)
        for offer in space.offers:
            est = estimate_memory(space.model, offer.gpu, cfg)
            if util is None:
                assert need == pytest.approx(math.ceil(est.device / 2**20), abs=40)
            fits = est.fits(req.memory_margin)
            if abs(est.device / (est.capacity * (1 - req.memory_margin)) - 1) > 0.01:
                assert fits == (need <= offer.capacity_mib), (s, offer.gpu.id)


def test_rl_plan_reports_engine_settings_and_phases():
    req = PlanRequest(model="qwen2.5-1.5b", workload="grpo", method="lora", gpus=("rtx-4090",),
                      max_gpus=4, budget_usd=20000, **RL)
    res = plan(req, CAT)
    assert res.status == "optimal"
    p = res.plan
    assert p.config.workload == "grpo" and p.config.rollout_batch == 16
    assert p.memory.engine_utilization is not None and 0 < p.memory.engine_utilization < 1
    assert set(p.throughput.phases) >= {"generation", "actor forward", "actor update"}
    assert check_plan(build_space(req, CAT), p) == []


def test_rl_without_enough_memory_is_infeasible_with_a_fix():
    res = plan(PlanRequest(model="qwen2.5-7b", workload="ppo", method="full",
                           gpus=("rtx-3090",), max_gpus=2, offload="none", **RL), CAT)
    assert res.status == "infeasible" and res.conflicts


def test_rl_timed_search_matches_every_pair():
    """GRPO on rental: every pair's bound is below its step time (engine generation included),
    every offer's bound below its pairs' values, and timed_search returns the best value of all
    pairs with every pair tying it (brute force over ~20,000 pairs of 10 offers)."""
    import numpy as np

    from planner.solver.search import (
        ROUNDING,
        fits_mask,
        job_steps,
        offer_lower_bounds,
        timed_search,
    )

    req = PlanRequest(model="qwen2.5-1.5b", workload="grpo", prompt_len=256, response_len=512,
                      max_gpus=8, method="lora", pricing="rent", budget_usd=3000)
    space = build_space(req, CAT)
    allowed = list(range(0, len(space.offers), max(1, len(space.offers) // 10)))
    by_need, arr = space.timing.by_need(space.rows)
    steps = job_steps(space)
    low = offer_lower_bounds(space, arr, allowed, keep=np.ones(len(by_need), dtype=bool),
                             objective="cost", steps=steps, budget=None)
    pairs = {}
    for k, oi in enumerate(allowed):
        offer = space.offers[oi]
        bounds = arr.bounds(oi)
        for j in np.nonzero(fits_mask(space, oi, arr, budget=None))[0].tolist():
            row = by_need[j]
            t = space.timing.step_us(oi, row)
            assert bounds[j] <= t + ROUNDING
            rent = 1000 * offer.rental_usd(row.num_gpus, t * steps / 3.6e9)  # the offer's bill
            assert low[k] <= rent + ROUNDING
            if rent <= req.budget_usd * 1000:
                pairs[(oi, row)] = round(rent)
    best = min(pairs.values())
    found = timed_search(space, allowed, space.rows)
    assert found is not None and found[0] == best
    assert {(oi, r) for oi, r, _ in found[1]} == {p for p, v in pairs.items() if v == best}


@pytest.mark.parametrize("kw", [
    dict(model="qwen2.5-1.5b", workload="grpo", sharding="fsdp", max_gpus=16),
    dict(model="qwen2.5-1.5b", workload="ppo", sharding="zero3", framework="openrlhf",
         placement="separate", max_gpus=16),
    dict(model="qwen2.5-0.5b", workload="ppo", placement="split", framework="openrlhf",
         max_gpus=24),
], ids=["grpo-fsdp", "ppo-zero3-separate", "ppo-split"])
def test_rl_bound_with_weight_gathers_stays_below_every_step_time(kw):
    """The step-time bound counts the ZeRO-3/FSDP weight all-gathers of the forward passes
    (RowArrays._forward_gather_exposed): still at most every pair's step time (which is
    rounded to whole microseconds: ROUNDING), and above the compute-only bound on some pairs
    (the term is there)."""
    import numpy as np

    from planner.solver.search import ROUNDING

    space = build_space(PlanRequest(gpus=("h100-sxm", "rtx-4090", "l40s"), **RL, **kw), CAT)
    rows, arr = space.timing.by_need(space.rows)
    raised = 0
    for oi, offer in enumerate(space.offers):
        bounds = arr.bounds(oi)
        fwd = arr.fwd / space.timing.rates(oi)[0]
        raised += int(np.count_nonzero(arr._forward_gather_exposed(oi, fwd) > 0))
        for j in range(0, len(rows), 3):
            if rows[j].gpu_need_mib <= offer.capacity_mib:
                assert bounds[j] <= space.timing.step_us(oi, rows[j]) + ROUNDING
    assert raised > 0
