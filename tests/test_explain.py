"""Explanations: binding rules at a plan, minimal conflicts and their solved fixes."""

from __future__ import annotations

import json
import re

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.solver.explain import _solve_without, binding_rules, conflicts, cost_stage
from planner.solver.solve import plan
from planner.solver.space import build_space
from tests.test_cli import run

CAT = load_catalog()
SMALL = dict(model="qwen2.5-1.5b", gpus=("v100-16gb", "rtx-3090"), max_gpus=16,
             global_batch_size=16, method="full", checkpointing="none", seq_len=8192,
             framework="nemo-automodel")  # FSDP with tensor/pipeline parallel layouts


def test_budget_at_the_optimum_is_tight_not_binding():
    # a cost limit never binds a cheapest-plan request: with more money the cheapest plan is
    # still the same one, so the rule is only tight (zero slack), never binding on slack alone
    free = plan(PlanRequest(**SMALL), CAT).plan
    req = PlanRequest(**SMALL, budget_usd=free.cost_usd)
    result = plan(req, CAT)
    budget = next(b for b in result.binding if b.name == "budget")
    assert budget.used == free.cost_usd and budget.slack == 0
    assert not budget.binding and budget.tight and budget.relaxed is None


def test_max_gpus_at_its_limit_binds_only_when_more_gpus_help():
    free = plan(PlanRequest(**SMALL), CAT).plan
    # the cheapest plan uses exactly max-gpus: more GPUs would not make it cheaper (tight)
    at = plan(PlanRequest(**{**SMALL, "max_gpus": free.num_gpus}), CAT)
    rule = next(b for b in at.binding if b.name == "max_gpus")
    assert rule.used == rule.limit == free.num_gpus and not rule.binding and rule.tight
    # the fastest plan within a budget uses every GPU allowed: twice as many are faster
    req = PlanRequest(**{**SMALL, "max_gpus": 2, "budget_usd": 20000, "objective": "time"})
    capped = plan(req, CAT)
    rule = next(b for b in capped.binding if b.name == "max_gpus")
    loose = plan(req.model_copy(update={"max_gpus": 4}), CAT).plan
    assert rule.binding == (loose.time_hours < capped.plan.time_hours) is True
    assert rule.relaxed.startswith("with max-gpus 4: ")


def test_every_binding_rule_is_one_whose_relaxation_is_better():
    # a timed request: the budget binds exactly when 10 % more money buys a faster plan
    seen = set()
    for budget in (3000, 6000):
        req = PlanRequest(model="7b", budget_usd=budget, objective="time")
        result = plan(req, CAT)
        rule = next(b for b in result.binding if b.name == "budget")
        loose = plan(req.model_copy(update={"budget_usd": budget * 1.1}), CAT).plan
        faster = loose.throughput.step_time_s < result.plan.throughput.step_time_s - 1e-6
        assert rule.binding == faster
        seen.add(faster)
    assert seen == {True, False}  # both answers occur: the test can tell them apart


def test_minimal_conflict_and_fix_are_solved():
    free = plan(PlanRequest(**SMALL), CAT).plan
    space = build_space(PlanRequest(**SMALL, budget_usd=free.cost_usd - 1), CAT)
    found = {c.name: c for c in conflicts(space)}
    # budget conflicts with what the cheaper hosts lack (here their RAM): a minimal core
    assert "budget" in found and len(found) <= 2
    assert found["budget"].fix == f"budget >= ${free.cost_usd:,.0f}"
    enc = cost_stage(space)
    assert not _solve_without(enc, set(), None)[0]
    for name in found:  # minimal: giving up any one rule of the core makes it feasible
        assert _solve_without(enc, {name}, None)[0]


def test_binding_rules_use_the_analytic_numbers():
    result = plan(PlanRequest(**SMALL), CAT)
    rows = {b.name: b for b in binding_rules(build_space(PlanRequest(**SMALL), CAT),
                                             result.plan)}
    mem = rows["gpu_memory"]
    assert mem.used == round(result.plan.memory.device / 2**30, 3)
    assert 0 <= mem.slack < 1


def test_gpu_memory_relaxed_one_step_is_the_next_larger_memory():
    # Full fine-tuning of Qwen2.5-1.5B (16 B/param = 24.7 GB of states) does not fit one 24 GB
    # RTX 3090 but fits 32 GB: with the 3090's memory raised to the next larger offered size
    # (the RTX 5090's 32 GB) one card would do, which is what the explanation says. Tensor
    # parallel on two 3090s needs a framework that runs it (Megatron-LM).
    r = plan(PlanRequest(model="qwen2.5-1.5b", gpus=("rtx-3090", "rtx-5090"), method="full",
                         offload="none", checkpointing="full", seq_len=1024, global_batch_size=8,
                         max_gpus=4, sharding="none", micro_batch_size=1,
                         framework="megatron-lm"))
    assert (r.plan.num_gpus, r.plan.gpu) == (2, "rtx-3090")
    mem = next(b for b in r.binding if b.name == "gpu_memory")
    assert mem.binding and mem.relaxed.startswith("with rtx-3090 with 32 GiB: 1 x rtx-3090")


def test_budget_held_up_by_memory_names_the_setting_that_lowers_it(capsys):
    """A 32k-token 7B job within $3,000: the budget conflict names, beside the budget the
    request needs as it is, the smaller budget under a memory-saving setting the planner does
    not search (a chunked loss), solved, and that budget then plans."""
    code, out, _ = run(capsys, "plan", "--model", "7b", "--budget", "3000", "--seq-len", "32768",
                       "--json")
    doc = json.loads(out)
    assert code == 1
    fix = next(c["fix"] for c in doc["conflicts"] if c["name"] == "budget")
    found = re.search(r"or budget >= \$([\d,]+) with --chunked-loss", fix)
    assert found, fix
    needed = int(found.group(1).replace(",", ""))
    as_is = int(re.match(r"budget >= \$([\d,]+)", fix).group(1).replace(",", ""))
    assert needed < as_is
    code, out, _ = run(capsys, "plan", "--model", "7b", "--budget", str(needed), "--seq-len",
                       "32768", "--chunked-loss", "--json")
    plan = json.loads(out)["plan"]
    assert code == 0 and plan["cost"]["usd"] == pytest.approx(needed, abs=1)
