"""Scale (issue 6, section 4), fast version of benchmarks/scale.py: a synthetic catalog of 60 GPU
types (shipped entries with perturbed memory, compute and prices) plans to proven optimality with
up to 1024 GPUs, re-checked; on a subset small enough to enumerate, CP-SAT equals the oracle."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.solver.oracle import enumerate_best
from planner.solver.solve import plan
from planner.solver.space import build_space
from planner.solver.stages import check_plan, config_of, make_plan, solve_lexicographic

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("scale_bench", ROOT / "benchmarks" / "scale.py")
scale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scale)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synthetic-catalog")
    ids = scale.write_synthetic_catalog(folder, 60)
    return load_catalog([folder]), ids


def test_synthetic_catalog_loads_perturbed_entries(synthetic):
    cat, ids = synthetic
    assert len(ids) == 60 and all(i in cat.gpus for i in ids)
    base = cat.gpu("rtx-4090")
    twins = [cat.gpus[i] for i in ids if i.endswith("-rtx-4090")]
    assert twins and all(0.7 * base.bf16_dense_tflops <= g.bf16_dense_tflops
                         <= 1.3 * base.bf16_dense_tflops for g in twins)


def test_plans_to_optimality_over_60_types_and_1024_gpus(synthetic):
    cat, _ = synthetic
    request = PlanRequest(model="8b", budget_usd=20_000, max_gpus=1024)
    result = plan(request, cat)
    assert result.status == "optimal" and result.plan is not None
    space = build_space(request, cat)
    assert len(space.offers) > 60
    for p in (result.plan, *result.alternatives):
        assert check_plan(space, p) == []


def test_time_objective_over_60_types_is_optimal(synthetic):
    cat, _ = synthetic
    request = PlanRequest(model="8b", objective="time", budget_usd=200_000, max_gpus=1024)
    space = build_space(request, cat)
    solved = solve_lexicographic(space, 30)
    assert solved is not None and solved.status == "optimal"
    result = make_plan(space, solved.offer, config_of(space, solved), hosts=solved.values["hosts"])
    assert check_plan(space, result) == []


SUBSET_BASES = ("rtx-3090", "rtx-4090", "l40s", "a10g", "rtx-5090")


@pytest.mark.parametrize("kw", [
    dict(method="full", offload="none"),
    dict(method="lora", objective="time", budget_usd=30_000),
], ids=["cost", "time"])
def test_equals_enumeration_on_a_subset(synthetic, kw):
    cat, ids = synthetic
    gpus = tuple(i for i in ids if i.endswith(SUBSET_BASES))
    request = PlanRequest(model="qwen2.5-1.5b", gpus=gpus, max_gpus=64, global_batch_size=32,
                          **kw)
    space = build_space(request, cat)
    assert len(gpus) >= 10
    solved = solve_lexicographic(space, 30)
    best = enumerate_best(space)
    assert best is not None and solved is not None and solved.status == "optimal"
    v = solved.values
    assert (v["cost_usd"], v["num_gpus"], solved.strategy, solved.offer, v["tp"], v["pp"],
            -v["micro_batch"], v["hosts"]) == (best.cost, best.num_gpus, best.strategy,
                                               best.offer, best.tp, best.pp,
                                               best.neg_micro_batch, best.hosts)
    if kw.get("objective") == "time":
        assert v["step_time_us"] == best.step_time_us
    result = make_plan(space, solved.offer, config_of(space, solved), hosts=v["hosts"])
    assert check_plan(space, result) == []


def test_purchase_front_keeps_a_dominating_offer_and_the_cost_optimum(synthetic):
    """Every offer purchase_front drops has a kept offer with the same host size, no less
    memory and host RAM and no higher prices; the cost stage over all offers and over the front
    reaches the same optimum."""
    from ortools.sat.python import cp_model

    from planner.solver.encoding import build, cp_solver
    from planner.solver.stages import purchase_front

    cat, _ = synthetic
    space = build_space(PlanRequest(model="8b", budget_usd=20_000, max_gpus=1024), cat)
    every = list(range(len(space.offers)))
    kept = purchase_front(space, every)
    assert 0 < len(kept) < len(every)

    def no_worse(b, a) -> bool:
        ram = lambda o: float("inf") if o.host_ram_mib is None else o.host_ram_mib  # noqa: E731
        return (b.gpus_per_host == a.gpus_per_host and b.capacity_mib >= a.capacity_mib
                and ram(b) >= ram(a) and round(b.gpu_price_usd) <= round(a.gpu_price_usd)
                and round(b.host_price_usd) <= round(a.host_price_usd))

    for i in set(every) - set(kept):
        assert any(no_worse(space.offers[j], space.offers[i]) for j in kept)
    optima = []
    for offers in (every, kept):
        enc = build(space, space.front, offers)
        enc.model.minimize(enc.var["cost_usd"])
        solver = cp_solver(30)
        assert solver.solve(enc.model) == cp_model.OPTIMAL
        optima.append(solver.objective_value)
    assert optima[0] == optima[1]


@pytest.mark.parametrize("kind", [
    dict(objective="time", budget_usd=300_000),
    dict(pricing="rent", budget_usd=5_000),
    dict(objective="time", pricing="rent"),
    dict(budget_usd=80_000, max_hours=40),
])
def test_offer_bounds_and_search_match_every_pair(synthetic, kind):
    """offer_lower_bounds is below every pair the search scores, and timed_search returns the
    best value of all (offer, row) pairs with every pair that ties it (brute force: the
    throughput model on every feasible pair of 12 offers)."""
    import numpy as np

    from planner.solver.search import (
        ROUNDING,
        fits_mask,
        job_steps,
        offer_lower_bounds,
        timed_search,
    )

    cat, _ = synthetic
    req = PlanRequest(model="8b", max_gpus=16, method="lora", time_limit_s=30, **kind)
    space = build_space(req, cat)
    allowed = list(range(0, len(space.offers), max(1, len(space.offers) // 12)))
    by_need, arr = space.timing.by_need(space.rows)
    objective, steps = req.objective, job_steps(space)
    buy = req.budget_usd if req.pricing == "buy" else None
    low = offer_lower_bounds(space, arr, allowed, keep=np.ones(len(by_need), dtype=bool),
                             objective=objective, steps=steps, budget=buy)
    pairs = {}
    for k, oi in enumerate(allowed):
        o = space.offers[oi]
        for j in np.nonzero(fits_mask(space, oi, arr, budget=buy))[0].tolist():
            row, t = by_need[j], space.timing.step_us(oi, by_need[j])
            hours = t * steps / 3.6e9
            rent = 1000 * o.rental_usd(row.num_gpus, t * steps / 3.6e9)  # the offer's bill
            value = (t if objective == "time" else
                     rent if req.pricing == "rent" else o.purchase_usd(row.num_gpus))
            assert low[k] <= value + ROUNDING
            if req.max_hours is not None and hours > req.max_hours:
                continue
            if req.pricing == "rent" and req.budget_usd and rent > req.budget_usd * 1000:
                continue
            pairs[(oi, row)] = round(value)
    best = min(pairs.values())
    found = timed_search(space, allowed, space.rows)
    assert found is not None and found[0] == best
    assert {(oi, r) for oi, r, _ in found[1]} == {p for p, v in pairs.items() if v == best}


def test_merged_stages_respect_the_exact_weight_bound():
    from planner.solver.stages import EXACT_WEIGHTS, merge_stages

    stages = [("time", None, None), ("a", None, (0, 9)), ("b", None, (1, 2**30)),
              ("c", None, (0, 2**30)), ("d", None, (5, 5))]
    groups = merge_stages(stages)
    assert [[s[0] for s in g] for g in groups] == [["time"], ["a", "b"], ["c", "d"]]
    for g in groups[1:]:
        size = 1
        for _, _, (lo, hi) in g:
            size *= hi - lo + 1
        assert size < EXACT_WEIGHTS
