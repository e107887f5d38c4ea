"""Each business rule of the CP-SAT encoding on a tiny space: feasible as built, infeasible
once its limit is tightened below every candidate, and feasible again with only that rule's
enforcement literal dropped (so the rule, and nothing else, is what binds)."""

from __future__ import annotations

import dataclasses as dc

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.solver.encoding import build
from planner.solver.explain import _solve_without
from planner.solver.space import build_space

CAT = load_catalog()
BASE = dict(model="qwen2.5-0.5b", gpus=("rtx-3090",), max_gpus=4, global_batch_size=8,
            method="lora", offload="none")


def _space(**kw):
    return build_space(PlanRequest(**(BASE | kw)), CAT)


def _tightened(rule: str):
    """(space, rows) where ``rule`` alone excludes every candidate."""
    if rule == "gpu_memory":
        sp = _space()
        rows = sp.rows  # the candidates before the tightening (it would filter them all)
        low = min(r.gpu_need_mib for r in rows) - 1
        return dc.replace(sp, offers=tuple(dc.replace(o, capacity_mib=low)
                                           for o in sp.offers)), rows
    if rule == "host_ram":
        sp = _space()
        low = min(min(r.host_need_mib) for r in sp.rows) - 1
        return dc.replace(sp, offers=tuple(dc.replace(o, host_ram_mib=low)
                                           for o in sp.offers)), None
    if rule == "gpus_per_host":
        sp = _space(tp=2, framework="nemo-automodel")  # a framework that runs tensor parallel
        return dc.replace(sp, offers=tuple(dc.replace(o, gpus_per_host=1)
                                           for o in sp.offers)), None
    if rule == "budget":
        return _space(budget_usd=100), None
    if rule == "max_gpus":
        sp = _space()
        rows = [r for r in sp.rows if r.num_gpus >= 2]
        return dc.replace(sp, request=sp.request.model_copy(update={"max_gpus": 1})), rows
    if rule == "pin:grad_accum":
        sp = _space()
        return dc.replace(sp, request=sp.request.model_copy(update={"grad_accum": 3})), None
    raise AssertionError(rule)


RULES = ["gpu_memory", "host_ram", "gpus_per_host", "budget", "max_gpus", "pin:grad_accum"]


def test_tiny_space_is_feasible_with_every_rule():
    enc = build(_space(), _space().rows)
    assert _solve_without(enc, set(), None)[0]


@pytest.mark.parametrize("rule", RULES)
def test_rule_alone_makes_the_tiny_space_infeasible(rule):
    sp, rows = _tightened(rule)
    enc = build(sp, rows if rows is not None else sp.rows)
    assert rule in enc.literal, f"{rule} not registered"
    assert not _solve_without(enc, set(), None)[0]
    assert _solve_without(enc, {rule}, None)[0]
