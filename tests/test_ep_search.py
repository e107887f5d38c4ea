"""Expert parallelism in the plan search: the space offers ep > 1 to MoE models on frameworks
whose launch writes it, the memory decomposition stays exact on every dp a row may take, the
solver agrees with exhaustive enumeration, the step-time bounds stay bounds, and every plan
exports with its ep written."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from conftest import assert_decomposition_exact, assert_solver_matches_enumeration
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog.frameworks import launch_parallelism, resolve, unlaunchable
from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import TrainConfig
from planner.errors import PlannerError
from planner.outputs.export import export_plan, launch_format_of
from planner.solver.oracle import enumerate_best
from planner.solver.solve import plan
from planner.solver.space import build_space
from planner.solver.stages import solve_lexicographic

CAT = load_catalog()
GPU = CAT.gpu("h100-sxm")
MOE = [CAT.model(m).spec for m in ("qwen3-30b-a3b", "mixtral-8x7b")]


def test_ep_is_searched_for_moe_models_only_where_the_launch_writes_it():
    moe = build_space(PlanRequest(model="qwen3-30b-a3b", framework="torchtitan",
                                  workload="pretrain", max_gpus=64, budget_usd=10**6), CAT)
    assert {s.ep for s in moe.strategies} == {1, 2, 4, 8, 16, 32, 64}
    assert all(r.dp % moe.strategies[r.strategy].ep == 0 for r in moe.rows)
    dense = build_space(PlanRequest(model="qwen3-8b", framework="torchtitan",
                                    workload="pretrain", max_gpus=64), CAT)
    assert {s.ep for s in dense.strategies} == {1}
    # hf-trainer runs no ep; NeMo-RL's launch does not write it (its grid differs)
    hf = build_space(PlanRequest(model="qwen3-30b-a3b", max_gpus=64), CAT)
    assert {s.ep for s in hf.strategies} == {1}
    rl = resolve(CAT, "nemo-rl")
    assert "ep" not in launch_parallelism(rl)
    assert unlaunchable(rl, TrainConfig(num_gpus=8, ep=8)) != []


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["none", "zero1", "zero2", "zero3", "fsdp"]),
       st.sampled_from(["none", "optimizer"]), st.sampled_from([1, 2]),
       st.sampled_from([2, 4, 8]), st.sampled_from([1, 2, 4, 8, 32]), st.integers(0, 1),
       st.sampled_from(["full", "lora"]))
def test_decomposition_is_exact_with_ep(shard, offload, tp, ep, mult, mi, method):
    model = MOE[mi]
    ep = min(ep, model.moe.num_experts)
    dp = ep * mult
    if shard == "none":
        offload = "none"
    cfg = TrainConfig(method=method, tp=tp, ep=ep, num_gpus=tp * dp, seq_len=2048,
                      zero_stage={"zero1": 1, "zero2": 2, "zero3": 3}.get(shard, 0),
                      fsdp=shard == "fsdp", offload=offload)
    assert_decomposition_exact(model, GPU, cfg, dp)


SMALL = [
    dict(model="qwen3-30b-a3b", framework="torchtitan", workload="pretrain",
         gpus=("rtx-4090", "h100-sxm"), max_gpus=16, global_batch_size=16),
    dict(model="qwen3-30b-a3b", framework="torchtitan", workload="pretrain",
         gpus=("h100-sxm", "a100-80gb-sxm"), max_gpus=16, global_batch_size=16, objective="time",
         budget_usd=600000, tokens=1e8),
    dict(model="mixtral-8x7b", framework="megatron-lm", workload="pretrain",
         gpus=("h100-sxm",), max_gpus=16, global_batch_size=16, objective="time",
         budget_usd=800000, tokens=1e8),
    dict(model="mixtral-8x7b", framework="nemo-automodel", workload="sft", method="full",
         gpus=("h100-sxm", "l40s"), max_gpus=16, global_batch_size=16, pricing="rent",
         tokens=1e8),
]


@pytest.mark.parametrize("kw", SMALL, ids=lambda kw: f"{kw['model']}-{kw['framework']}")
def test_solver_matches_enumeration_with_ep(kw):
    space = build_space(PlanRequest(**kw), CAT)
    assert max(s.ep for s in space.strategies) > 1
    solved = solve_lexicographic(space, 30)
    best = enumerate_best(space)
    assert_solver_matches_enumeration(solved, best, kw)


def test_step_time_bounds_hold_with_ep():
    """RowArrays.bounds <= the throughput model's step time for every row, ep > 1 among them:
    the all-to-all adds time >= 0 and the expert GEMMs run at <= the MAMF rate the bound
    takes (gemm.linear_time_scale >= 1), whatever their rows x ep."""
    space = build_space(PlanRequest(model="qwen3-30b-a3b", framework="torchtitan",
                                    workload="pretrain", gpus=("h100-sxm", "rtx-4090"),
                                    max_gpus=32, global_batch_size=32), CAT)
    rows, arr = space.timing.by_need(space.rows)
    eps = np.array([space.strategies[r.strategy].ep for r in rows])
    assert (eps > 1).sum() > 50
    pick = np.random.default_rng(0).choice(len(rows), size=min(400, len(rows)), replace=False)
    for oi in range(len(space.offers)):
        bounds = arr.bounds(oi)
        for i in pick.tolist():
            assert bounds[i] <= space.timing.step_us(oi, rows[i]) + 1


@pytest.mark.parametrize("kw", [
    dict(model="qwen3-30b-a3b", framework="torchtitan", workload="pretrain",
         budget_usd=400000, objective="time", tokens=1e9),
    # (Mixtral-8x7B's fastest Megatron plan is tp 8 without ep since TE's fused kernels are
    # counted as saving their inputs only; Qwen3-30B-A3B's 128 experts take ep 8)
    dict(model="qwen3-30b-a3b", framework="megatron-lm", workload="pretrain",
         budget_usd=400000, objective="time", tokens=1e9),
    dict(model="qwen3-30b-a3b", framework="megatron-bridge", workload="pretrain",
         budget_usd=400000, objective="time", tokens=1e9),
    dict(model="qwen3-30b-a3b", framework="nemo", workload="pretrain",
         budget_usd=400000, objective="time", tokens=1e9),
    dict(model="mixtral-8x7b", framework="nemo-automodel", workload="pretrain",
         budget_usd=100000),
    dict(model="qwen3-30b-a3b", framework="prime-rl", workload="sft",
         budget_usd=400000, objective="time", tokens=1e9),
], ids=lambda kw: kw["framework"])
def test_an_ep_plan_exports_with_its_ep_written(kw):
    result = plan(PlanRequest(**kw), CAT)
    cfg = result.plan.config
    assert cfg.ep > 1, "the request should make an expert-parallel plan"
    fmt = launch_format_of(resolve(CAT, cfg.framework), cfg.workload)
    text = export_plan(result, fmt, catalog=CAT).text
    field = {"torchrun": "--expert-model-parallel-size", "torchtitan": "expert_parallel_degree",
             "megatron-bridge": "expert_model_parallel_size",
             "nemo": "expert_model_parallel_size", "nemo-automodel": "ep_size",
             "prime-rl": "ep"}[fmt]
    assert any(field in line and str(cfg.ep) in line for line in text.splitlines()), text


def test_a_format_without_ep_refuses_it_in_one_line():
    result = plan(PlanRequest(model="qwen3-30b-a3b", framework="torchtitan",
                              workload="pretrain", budget_usd=400000, objective="time",
                              tokens=1e9), CAT)
    assert result.plan.config.ep > 1
    with pytest.raises(PlannerError, match="cannot express expert parallel") as exc:
        export_plan(result, "deepspeed", catalog=CAT)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("framework, field", [
    ("prime-rl", "ep"), ("megatron-bridge", "expert_model_parallel_size"),
    ("nemo-automodel", "ep_size")])
def test_an_moe_plan_at_ep_1_still_writes_it_where_the_launch_defaults_otherwise(framework,
                                                                                 field):
    # prime-rl's ep defaults to "auto" (min(world, 8)) and Bridge's MoE recipes set their own:
    # the plan's ep 1 is written, not left to the launch
    result = plan(PlanRequest(model="qwen3-30b-a3b", framework=framework, workload="sft",
                              budget_usd=400000, objective="time", tokens=1e9, max_gpus=8), CAT)
    cfg = result.plan.config.model_copy(update={"ep": 1})
    fixed = dataclasses.replace(result.plan, config=cfg)
    fmt = launch_format_of(resolve(CAT, cfg.framework), cfg.workload)
    text = export_plan(fixed, fmt, catalog=CAT).text
    pattern = re.compile(rf"^\s*(model\.)?{field}\s*[=:]\s*1\b")
    assert any(pattern.match(line) for line in text.splitlines()), text


def test_a_pinned_ep_is_the_plans():
    result = plan(PlanRequest(model="qwen3-30b-a3b", framework="torchtitan", workload="pretrain",
                              budget_usd=400000, objective="time", tokens=1e9, ep=2), CAT)
    assert result.plan.config.ep == 2


@pytest.mark.parametrize("args, message", [
    (["--model", "7b", "--ep", "2"], "needs a Mixture-of-Experts model"),
    (["--model", "qwen3-30b-a3b", "--ep", "3"], "must divide the 128 routed experts"),
    (["--model", "qwen3-30b-a3b", "--framework", "unsloth", "--ep", "2"],
     "does not run expert parallelism"),
    (["--model", "qwen3-30b-a3b", "--workload", "grpo", "--ep", "2"], "data parallel only"),
])
def test_a_bad_ep_pin_is_one_line_and_exit_2(capsys, args, message):
    from planner.cli import run

    code = run(["plan", "--budget", "400000", *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err
