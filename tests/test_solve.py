"""The CP-SAT planner against exhaustive enumeration, and its re-checked plans."""

from __future__ import annotations

import pytest
from conftest import assert_solver_matches_enumeration
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.solver.oracle import enumerate_best
from planner.solver.solve import plan
from planner.solver.space import build_space
from planner.solver.stages import check_plan, config_of, make_plan, solve_lexicographic

CAT = load_catalog()

SMALL = [
    dict(model="qwen2.5-0.5b", gpus=("rtx-3090", "rtx-4090"), max_gpus=8, global_batch_size=8,
         method="lora", offload="none"),
    dict(model="llama-3.2-1b", gpus=("rtx-3090", "rtx-5090"), max_gpus=8, global_batch_size=16,
         method="full", seq_len=4096),
    dict(model="qwen2.5-1.5b", gpus=("v100-16gb", "rtx-3090"), max_gpus=16,
         global_batch_size=16, method="full", checkpointing="none", seq_len=8192),
    dict(model="qwen2.5-3b", gpus=("rtx-4090", "h100-sxm"), max_gpus=16, global_batch_size=32,
         method="full", budget_usd=40000, price_kind="new"),
    dict(model="qwen2.5-0.5b", gpus=("rtx-3090",), max_gpus=4, global_batch_size=4,
         budget_usd=100),
    dict(model="qwen2.5-1.5b", gpus=("rtx-3090", "rtx-4090"), max_gpus=8, global_batch_size=16,
         method="lora", offload="none", objective="time", budget_usd=12000),
    dict(model="llama-3.2-1b", gpus=("rtx-3090", "rtx-5090", "h100-sxm"), max_gpus=8,
         global_batch_size=16, method="full", objective="time", budget_usd=60000,
         checkpointing="full", offload="none"),
    dict(model="qwen2.5-1.5b", gpus=("rtx-4090", "l40s", "h100-sxm"), max_gpus=8,
         global_batch_size=16, method="lora", offload="none", pricing="rent", tokens=1e8),
    dict(model="qwen2.5-1.5b", gpus=("rtx-4090", "h100-sxm"), max_gpus=8, global_batch_size=16,
         method="full", offload="none", pricing="rent", tokens=1e8, objective="time",
         budget_usd=20),
    dict(model="qwen2.5-1.5b", gpus=("rtx-3090", "rtx-4090"), max_gpus=8, global_batch_size=16,
         method="lora", offload="none", budget_usd=12000, max_hours=40),
    dict(model="qwen2.5-3b", gpus=("rtx-3090", "rtx-4090"), max_gpus=4, global_batch_size=8,
         method="auto", lora_rank="auto", offload="none", seq_len=4096),
    dict(model="qwen2.5-1.5b", gpus=("rtx-4090", "h100-sxm"), max_gpus=4, global_batch_size=8,
         method="lora", lora_rank="auto", offload="none", pricing="rent", tokens=1e8),
]


@pytest.mark.parametrize("kw", SMALL, ids=lambda kw: f"{kw['model']}-{kw['gpus'][0]}")
def test_solver_matches_enumeration(kw):
    space = build_space(PlanRequest(**kw), CAT)
    solved = solve_lexicographic(space, 30)
    best = enumerate_best(space)
    if best is None:
        assert solved is None
        return
    assert_solver_matches_enumeration(solved, best, kw)
    v = solved.values
    result = make_plan(space, solved.offer, config_of(space, solved), hosts=v["hosts"])
    assert check_plan(space, result) == []


def test_plan_is_deterministic_and_rechecked():
    # FSDP with tensor/pipeline parallel layouts: a framework that runs them
    req = PlanRequest(model="qwen2.5-1.5b", gpus=("v100-16gb", "rtx-3090"), max_gpus=16,
                      global_batch_size=16, method="full", checkpointing="none", seq_len=8192,
                      framework="nemo-automodel")
    first, second = plan(req, CAT), plan(req, CAT)
    assert first.status == "optimal" and first.plan == second.plan
    space = build_space(req, CAT)
    assert check_plan(space, first.plan) == []


def test_budget_below_cheapest_is_infeasible():
    req = PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-3090",), max_gpus=4,
                      global_batch_size=4, budget_usd=100)
    assert plan(req, CAT).status == "infeasible"


def test_pareto_points_are_non_dominated_and_rechecked():
    from planner.solver.solve import PARETO_STEP, pareto

    req = PlanRequest(model="qwen2.5-1.5b", gpus=("rtx-3090", "rtx-4090"), max_gpus=8,
                      global_batch_size=16, method="lora", offload="none", budget_usd=20000)
    points = pareto(req, CAT, max_points=6)
    assert len(points) >= 3
    space = build_space(req, CAT)
    for p in points:
        assert check_plan(space, p) == []
    for a, b in zip(points, points[1:], strict=False):
        assert b.cost_usd >= a.cost_usd
        assert b.time_hours <= a.time_hours * (1 - PARETO_STEP)
    # the first point is the cost optimum of plan()
    assert points[0].cost_usd == plan(req, CAT).plan.cost_usd


@settings(max_examples=8, deadline=None)
@given(
    model=st.sampled_from(["qwen2.5-0.5b", "llama-3.2-1b", "qwen2.5-1.5b"]),
    gpus=st.sampled_from([("rtx-3090", "rtx-4090"), ("rtx-4090", "h100-sxm"),
                          ("v100-16gb", "rtx-5090")]),
    method=st.sampled_from(["full", "lora", "qlora"]),
    objective=st.sampled_from(["cost", "time"]),
    budget=st.sampled_from([3000, 12000, 80000]),
    seq_len=st.sampled_from([1024, 4096]),
)
def test_solver_matches_enumeration_on_random_spaces(model, gpus, method, objective, budget,
                                                     seq_len):
    kw = dict(model=model, gpus=gpus, method=method, objective=objective, budget_usd=budget,
              seq_len=seq_len, max_gpus=8, global_batch_size=8, offload="none")
    test_solver_matches_enumeration(kw)


def test_pareto_matches_an_enumerated_sweep():
    import dataclasses

    from planner.solver.search import job_steps
    from planner.solver.solve import PARETO_STEP, pareto

    req = PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-3090", "rtx-4090"), max_gpus=8,
                      global_batch_size=8, method="lora", offload="none", budget_usd=12000)
    space = build_space(req, CAT)
    expected, deadline = [], None
    while len(expected) < 5:
        sub = dataclasses.replace(space, request=req.model_copy(update={"max_hours": deadline}))
        best = enumerate_best(sub)
        if best is None:
            break
        expected.append((best.cost, best.num_gpus, best.offer, best.strategy))
        deadline = best.step_time_us * job_steps(space) / 3.6e9 * (1 - PARETO_STEP)
    points = pareto(req, CAT, max_points=5)
    offers = {(o.gpu.id, o.platform.id if o.platform else None): i
              for i, o in enumerate(space.offers)}
    got = [(round(p.cost_usd), p.num_gpus, offers[(p.gpu, p.platform)],
            space.strategies.index(next(s for s in space.strategies
                                        if s._asdict() == {k: getattr(p.config, k) for k
                                                           in s._fields})))
           for p in points]
    assert len(expected) >= 3 and got == expected


@pytest.mark.parametrize("kw", [dict(model="7b", budget_usd=3000), dict(model="70b"),
                                dict(model="8b", method="full"), dict(model="7b", budget_usd=100)])
def test_cost_stage_hint_is_the_cheapest_fitting_pair_and_changes_no_optimum(kw):
    """encoding.hint_cheapest: the hinted pair fits, no fitting pair is cheaper, and the cost
    stage reaches the same status and optimum with and without it."""
    from ortools.sat.python import cp_model

    from planner.solver.encoding import build, cp_solver, hint_cheapest
    from planner.solver.stages import _fits, purchase_front

    space = build_space(PlanRequest(**kw), CAT)
    results = []
    for hinted in (False, True):
        enc = build(space, space.front, purchase_front(space, list(range(len(space.offers)))))
        enc.model.add_assumptions(list(enc.literal.values()))
        enc.model.minimize(enc.var["cost_usd"])
        if hinted:
            hint_cheapest(enc)
            hints = enc.model.proto.solution_hint
            on = {v for v, x in zip(hints.vars, hints.values, strict=True) if x == 1}
            k = next(i for i, x in enumerate(enc.offer) if x.index in on)
            j = next(i for i, x in enumerate(enc.row) if x.index in on)
            oi, row = enc.offers[k], enc.rows[j]
            assert _fits(space, oi, row)
            cheapest = min(space.offers[o].purchase_usd(r.num_gpus) for o in enc.offers
                           for r in enc.rows if _fits(space, o, r))
            assert space.offers[oi].purchase_usd(row.num_gpus) == cheapest
        solver = cp_solver(30)
        code = solver.solve(enc.model)
        results.append((code, solver.objective_value if code == cp_model.OPTIMAL else None))
    assert results[0] == results[1]


@pytest.mark.parametrize("kw", [dict(model="7b", budget_usd=3000), dict(model="8b", method="full"),
                                dict(model="qwen2.5-1.5b", gpus=("rtx-3090", "rtx-4090"),
                                     max_gpus=8)])
def test_chain_step_times_skip_only_pairs_that_cannot_be_fastest(kw):
    """solve._times evaluates pairs best-first by their bound: every pair it does not evaluate
    is truly slower than the fastest, and its stand-in is below its true time but above the
    fastest, so the step-time stage keeps its optimum and its ties."""
    from planner.solver.encoding import NO_TIME
    from planner.solver.stages import _times

    space = build_space(PlanRequest(**kw), CAT)
    rows = space.front[:60]
    offers = list(range(min(6, len(space.offers))))
    got = _times(space, offers, rows)
    true = {(k, r): space.timing.step_us(oi, row) for k, oi in enumerate(offers)
            for r, row in enumerate(rows) if row.gpu_need_mib <= space.offers[oi].capacity_mib}
    assert {p for p, t in got.items() if t < NO_TIME} == set(true)
    fastest = min(true.values())
    assert min(got[p] for p in true) == fastest
    for p, t in true.items():
        assert got[p] == t or fastest < got[p] <= t
    assert {p for p in true if got[p] == fastest} == {p for p in true if true[p] == fastest}
    assert sum(got[p] != t for p, t in true.items()) > len(true) // 2  # most are skipped


def test_the_recheck_runs_every_rule_object():
    """check_plan asks each rule (rules.violations): a plan whose memory, host RAM, cost, time
    or throughput breaks a limit is named by that rule, in the user's words."""
    import dataclasses

    from planner.catalog.load import load_catalog
    from planner.catalog.plan_request import PlanRequest
    from planner.solver.solve import plan
    from planner.solver.space import build_space
    from planner.solver.stages import check_plan

    cat = load_catalog()
    req = PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-4090",), budget_usd=5000, max_hours=100,
                      min_tokens_per_s=100.0)
    p = plan(req, cat).plan
    space = build_space(req, cat)
    assert check_plan(space, p) == []
    big = dataclasses.replace(p, memory=dataclasses.replace(p.memory,
                                                            device=p.memory.capacity * 2))
    assert any(v.startswith("GPU memory:") for v in check_plan(space, big))
    slow = dataclasses.replace(p, throughput=dataclasses.replace(p.throughput,
                                                                 tokens_per_s=1.0))
    assert any(v.startswith("min-tokens-per-s 100.0: 1 tokens/s <") for v in
               check_plan(space, slow))
    dear = dataclasses.replace(p, cost=dataclasses.replace(p.cost, usd=10000.0))
    assert any(v.startswith("budget $5,000: 1e+04 USD >") for v in check_plan(space, dear))


def test_design_card_keeps_weights_on_the_gpu_and_says_what_offload_would_give(capsys):
    """Issue 18: a plan without CPU offload comes first at the same cost; the note names the
    faster offload plan as cheap, the PCIe and CPU-optimizer rates and the overlap its timing
    assumed, the published offloaded run of its kind that checks them
    (efficiency.OFFLOAD_CASES), and the flag that plans it, which does."""
    import json
    import re

    from tests.test_cli import run

    code, out, _ = run(capsys, "plan", "--budget", "3000", "--model", "7b", "--json")
    doc = json.loads(out)
    body = doc["plan"]
    assert code == 0 and body["config"]["offload"] == "none"
    note = next(n for n in doc["notes"] if n.startswith("kept on the GPU"))
    found = re.search(r"offloads (\S+) to the CPU.*: ([\d.]+) h against ([\d.]+) h", note)
    kind, faster, kept = found.group(1), float(found.group(2)), float(found.group(3))
    assert faster < kept == pytest.approx(body["time_hours"], abs=0.05)
    assert "50% hidden" in note and "checked, not fitted" in note
    assert re.search(r"PCIe copies at [\d.]+ GB/s per GPU", note)
    assert re.search(r"CPU optimizer 30 B per parameter at \d+ GB/s of host memory", note)
    from planner.models.efficiency import OFFLOAD_CASES
    assert any(cid in note for cid, (k, _) in OFFLOAD_CASES.items() if k == kind)
    code, out, _ = run(capsys, "plan", "--budget", "3000", "--model", "7b", "--offload", kind,
                       "--json")
    offloaded = json.loads(out)["plan"]
    assert offloaded["cost"]["usd"] == body["cost"]["usd"]
    assert offloaded["time_hours"] == pytest.approx(faster, abs=0.05)


def test_offload_note_names_the_plan_that_offload_none_gets():
    """A plan that offloads says what keeping the states on the GPU gives: that plan, solved on
    the request's own space restricted to strategies without offload (no second space), is the
    plan of the same request with --offload none, which builds its own."""
    import re

    request = PlanRequest(model="70b", budget_usd=20000)
    result = plan(request, CAT)
    assert result.plan.config.offload != "none"
    note = next(n for n in result.notes if n.startswith("offload "))
    kept = plan(request.model_copy(update={"offload": "none"}), CAT).plan
    assert kept.config.offload == "none"
    found = re.search(r"keeping them on the GPU the best plan is (\d+) x (\S+) \((\w+), "
                      r"checkpointing (\w+), micro-batch (\d+)\), \$([\d,]+), ([\d.,]+) h", note)
    assert found.groups() == (
        str(kept.num_gpus), kept.gpu, kept.config.method, kept.config.checkpointing,
        str(kept.config.micro_batch_size), f"{kept.cost_usd:,.0f}", f"{kept.time_hours:,.1f}")


@pytest.mark.parametrize("framework", ["hf-trainer", "deepspeed"])
def test_step_time_bound_takes_the_stacks_own_overhead(framework):
    """The solver's per-step constant is the analytic model's (efficiency.step_overhead: the
    Trainer's measured 3.4 ms on stack hf, the fitted one elsewhere), so its step-time bound
    stays at or below every pair's step time."""
    from planner.models import efficiency as eff
    from planner.solver.search import ROUNDING

    space = build_space(PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-4090", "h100-sxm"),
                                    max_gpus=4, framework=framework), CAT)
    rows, arr = space.timing.by_need(space.rows)
    assert set(arr.fixed) == {eff.step_overhead(space.request.stack)}
    for oi, offer in enumerate(space.offers):
        bounds = arr.bounds(oi)
        for j in range(0, len(rows), 2):
            if rows[j].gpu_need_mib <= offer.capacity_mib:
                assert bounds[j] <= space.timing.step_us(oi, rows[j]) + ROUNDING


def test_a_step_past_the_solvers_time_cap_still_plans(tmp_path):
    """A GPU of 10 GFLOP/s makes steps of days: the solver caps their microseconds just below
    steptime.NO_TIME (its mark for a pair that is not a candidate) instead of losing every
    pair of the plan its cost stage found (the fuzz tier's catalog extremes found this), and
    the re-check takes the analytic time."""
    import yaml

    from planner.solver.steptime import NO_TIME

    gpu = CAT.gpu("rtx-4090").model_dump(mode="json", exclude_none=True)
    (tmp_path / "gpus").mkdir()
    (tmp_path / "gpus" / "slow-gpu.yaml").write_text(yaml.safe_dump(
        {**gpu, "id": "slow-gpu", "bf16_dense_tflops": 0.01}))
    cat = load_catalog([tmp_path])
    for pricing in ("buy", "rent"):
        result = plan(PlanRequest(model="qwen2.5-3b", gpus=("slow-gpu",), max_gpus=8,
                                  pricing=pricing), cat)
        assert result.plan is not None and result.plan.gpu == "slow-gpu"
        assert result.plan.throughput.step_time_s * 1e6 > NO_TIME
