"""Hybrid sharding (HSDP) in the plan search: searched only where the framework's launch writes
it, with the shard group one host's GPUs; the memory decomposition stays exact; the solver agrees
with exhaustive enumeration and with the independent reference; plans that take it export it."""

from __future__ import annotations

import pytest
import yaml
from conftest import assert_decomposition_exact, assert_solver_matches_enumeration

from planner.api import check
from planner.catalog.frameworks import HYBRID_SHARD_LAUNCHES, resolve, unlaunchable
from planner.catalog.load import load_catalog
from planner.catalog.offers import offer_id
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import TrainConfig
from planner.errors import PlannerError
from planner.outputs.export import export_plan
from planner.solver.oracle import enumerate_best
from planner.solver.rules import GPUS_PER_HOST, Need
from planner.solver.solve import plan
from planner.solver.space import build_space
from planner.solver.stages import solve_lexicographic
from planner.validation.reference import differential

CAT = load_catalog()


def _shards(space) -> set:
    return {s.dp_shard for s in space.strategies}


def test_hybrid_is_searched_where_the_launch_writes_it_over_several_hosts():
    space = build_space(PlanRequest(model="qwen2.5-7b", framework="accelerate-fsdp",
                                    method="full", gpus=("h100-sxm", "rtx-4090"), max_gpus=32,
                                    pricing="rent"), CAT)
    sizes = {o.gpus_per_host for o in space.offers}
    assert _shards(space) - {None} == {s for s in sizes if 2 <= s <= 16}
    assert all(s.fsdp for s in space.strategies if s.dp_shard)
    hybrid = [r for r in space.rows if space.strategies[r.strategy].dp_shard]
    assert hybrid
    for r in hybrid:  # several hosts' worth of ranks, whole groups, no model parallel
        g = space.strategies[r.strategy].dp_shard
        assert r.tp == r.pp == 1 and r.dp > g and r.dp % g == 0
    # DeepSpeed's ZeRO (the HF Trainer's default), an RL trainer whose launch writes none
    # (OpenRLHF), one host: none; verl's RL trainer (fsdp_size): one host's GPUs
    assert _shards(build_space(PlanRequest(model="qwen2.5-7b", max_gpus=32), CAT)) == {None}
    rl = dict(model="qwen2.5-7b", workload="grpo", max_gpus=32, prompt_len=256,
              response_len=256, gpus=("h100-sxm",), pricing="rent")
    assert _shards(build_space(PlanRequest(**rl, framework="openrlhf"), CAT)) == {None}
    verl = build_space(PlanRequest(**rl, framework="verl"), CAT)
    assert _shards(verl) - {None} == {o.gpus_per_host for o in verl.offers if
                                      2 <= o.gpus_per_host <= 16}
    assert all(s.placement == "colocate" for s in verl.strategies if s.dp_shard)
    one = build_space(PlanRequest(model="qwen2.5-7b", framework="accelerate-fsdp",
                                  gpus=("h100-sxm",), max_gpus=8), CAT)
    assert _shards(one) == {None}


def test_launches_that_do_not_write_it_name_it():
    cfg = TrainConfig(num_gpus=16, fsdp=True, dp_shard=8)
    assert unlaunchable(resolve(CAT, "torchtitan"), cfg) == []
    assert unlaunchable(resolve(CAT, "accelerate-fsdp"), cfg) == []
    assert "does not write it" in " ".join(unlaunchable(resolve(CAT, "llm-foundry"), cfg))
    zero = cfg.model_copy(update={"fsdp": False, "zero_stage": 3})
    assert "FSDP's hybrid sharding only" in " ".join(unlaunchable(resolve(CAT, "torchtitan"),
                                                                  zero))
    assert set(HYBRID_SHARD_LAUNCHES) == {"accelerate", "torchrun", "torchtitan"}


def test_the_group_is_one_hosts_gpus():
    space = build_space(PlanRequest(model="qwen2.5-7b", framework="accelerate-fsdp",
                                    gpus=("h100-sxm",), max_gpus=32, pricing="rent"), CAT)
    for o in space.offers:
        for g in (0, 2, 4, 8):
            held = bool(GPUS_PER_HOST.mask(o, Need(0, 1, 0, 16, g)))
            assert held == (g in (0, o.gpus_per_host))


@pytest.mark.parametrize("shard, mult", [(2, 2), (4, 2), (8, 4)])
@pytest.mark.parametrize("offload", ["none", "optimizer", "optimizer+params"])
def test_decomposition_is_exact_with_hybrid_sharding(shard, mult, offload):
    model = CAT.model("qwen2.5-7b").spec
    dp = shard * mult
    cfg = TrainConfig(method="full", num_gpus=dp, fsdp=True, dp_shard=shard, offload=offload,
                      seq_len=2048)
    assert_decomposition_exact(model, CAT.gpu("h100-sxm"), cfg, dp)


SMALL = [
    dict(model="qwen2.5-7b", framework="accelerate-fsdp", method="full",
         gpus=("h100-sxm", "rtx-4090"), max_gpus=16, global_batch_size=16, pricing="rent",
         objective="time", tokens=1e8, budget_usd=2000.0),
    dict(model="llama-3.1-8b", framework="torchtitan", workload="pretrain",
         gpus=("h100-sxm", "a100-80gb-sxm"), max_gpus=32, global_batch_size=32,
         objective="time", budget_usd=2_000_000, tokens=1e8),
    dict(model="qwen2.5-1.5b", framework="accelerate-fsdp", method="full",
         gpus=("rtx-4090", "l40s"), max_gpus=16, global_batch_size=16, tokens=1e8),
]


@pytest.mark.parametrize("kw", SMALL, ids=lambda kw: f"{kw['model']}-{kw['framework']}")
def test_solver_matches_enumeration_with_hybrid_sharding(kw):
    space = build_space(PlanRequest(**kw), CAT)
    assert _shards(space) - {None}
    best = enumerate_best(space)
    assert_solver_matches_enumeration(solve_lexicographic(space, 30), best, kw)


@pytest.mark.parametrize("kw", SMALL[:2], ids=lambda kw: kw["framework"])
def test_hybrid_plans_agree_with_the_reference(kw):
    verdict = differential(PlanRequest(**kw), CAT)
    assert verdict.agree, verdict.detail


def test_a_multi_host_fsdp_plan_takes_hybrid_sharding_and_exports_it():
    """70B full fine-tuning, fastest on rented GPUs: the shards stay in an instance (NVLink)
    and only the gradient all-reduce crosses the network; full sharding over 64 GPUs would
    all-gather every layer's weights over it in each forward and backward."""
    req = PlanRequest(model="llama-3.1-70b", framework="accelerate-fsdp", method="full",
                      pricing="rent", objective="time", budget_usd=20000, tokens=2e9)
    got = plan(req, CAT)
    p = got.plan
    assert p.num_hosts > 1 and p.config.fsdp and p.config.dp_shard == p.num_gpus // p.num_hosts
    assert p.sharding_label == f"hsdp{p.config.dp_shard}"
    # check's own evaluation on the same instances: sharded over all 64 ranks it is slower
    billed = offer_id(p.cost.rental.offers[0])
    same = check(model=p.model, gpu=p.gpu, config=p.config, pricing="rent", offer=billed)
    full = check(model=p.model, gpu=p.gpu, config=p.config.model_copy(update={"dp_shard": None}),
                 pricing="rent", offer=billed)
    assert same["throughput"]["tokens_per_s"] == pytest.approx(p.throughput.tokens_per_s)
    assert full["throughput"]["tokens_per_s"] < 0.5 * same["throughput"]["tokens_per_s"]
    why = [n for n in got.notes if n.startswith("hybrid sharding:")]  # and the plan says so
    assert len(why) == 1 and f"sharded over all {p.num_gpus} GPUs" in why[0]
    assert f"{full['throughput']['tokens_per_s']:,.0f} tokens/s" in why[0]
    text = export_plan(got, "accelerate").text
    doc = yaml.safe_load(text.split("\n", 1)[1] if text.startswith("#") else text)
    assert doc["fsdp_config"]["fsdp_sharding_strategy"] == "HYBRID_SHARD"
    assert doc["num_machines"] == p.num_hosts
    assert "hybrid_shard auto_wrap" in export_plan(got, "torchrun").text


def test_torchtitan_writes_the_replicas_and_the_shards():
    req = PlanRequest(model="llama-3.1-70b", framework="torchtitan", method="full",
                      pricing="rent", objective="time", budget_usd=20000, tokens=2e9,
                      tp=1, pp=1)
    got = plan(req, CAT)
    c = got.plan.config
    assert c.dp_shard and c.dp > c.dp_shard
    text = export_plan(got, "torchtitan").text
    assert f"data_parallel_shard_degree = {c.dp_shard}" in text
    assert f"data_parallel_replicate_degree = {c.dp // c.dp_shard}" in text


def test_a_plan_over_hosts_without_it_names_the_framework_that_has_it():
    """The HF Trainer's DeepSpeed writes no hybrid group; its FSDP profile (accelerate-fsdp,
    built on it) does: the default framework's plan over hosts says what that one plans."""
    req = PlanRequest(model="70b", method="full", pricing="rent", objective="time",
                      budget_usd=20000, tokens=2e9)
    got = plan(req, CAT)
    assert got.plan.num_hosts > 1 and got.plan.config.dp_shard is None
    other = plan(req.model_copy(update={"framework": "accelerate-fsdp"}), CAT).plan
    why = [n for n in got.notes if n.startswith("hybrid sharding:")]
    assert len(why) == 1 and "--framework accelerate-fsdp" in why[0]
    assert f"{other.throughput.tokens_per_s:,.0f} tokens/s" in why[0]
    assert other.time_hours < got.plan.time_hours
    # one host: nothing to say
    small = plan(PlanRequest(model="7b", budget_usd=3000), CAT)
    assert not [n for n in small.notes if n.startswith("hybrid sharding")]


def test_hybrid_sharding_of_an_rl_trainer_is_modelled_colocated():
    """An RL trainer sharded within each host (verl's fsdp_size): its forward passes gather the
    weights and its weight sync gathers them into the engines within a host, over NVLink,
    where full sharding gathers over the network; each GPU holds a host's share of the
    states. A hybrid RL trainer apart from its engines is not modelled: bad input."""
    from planner.catalog.request_checks import validate_config
    from planner.errors import PlannerError
    from planner.models.rltime import estimate_rl_step
    from planner.models.workloads import estimate_memory

    model, gpu = CAT.model("qwen2.5-7b").spec, CAT.gpu("h100-sxm")
    platform = CAT.platform("hgx-8gpu-sxm")
    full = TrainConfig(workload="grpo", num_gpus=16, fsdp=True, prompt_len=256,
                       response_len=256, seq_len=512, micro_batch_size=4, rollout_batch=128)
    hsdp = full.model_copy(update={"dp_shard": 8})
    validate_config(hsdp, model)
    a, b = (estimate_rl_step(model, gpu, c, platform=platform, stack="hf") for c in (full, hsdp))
    assert b.phases["actor forward"] < a.phases["actor forward"]
    assert b.phases["weight sync"] < a.phases["weight sync"]
    assert b.step_time_s < a.step_time_s
    mem_full, mem_hsdp = (estimate_memory(model, gpu, c) for c in (full, hsdp))
    assert mem_hsdp.device > mem_full.device  # a host's share, not a 16th
    with pytest.raises(PlannerError, match="modelled colocated"):
        validate_config(hsdp.model_copy(update={"placement": "separate", "rollout_gpus": 8}),
                        model)


RL_SMALL = dict(model="qwen2.5-1.5b", workload="grpo", method="full", framework="verl",
                gpus=("rtx-4090", "l40s"), max_gpus=16, global_batch_size=16, prompt_len=256,
                response_len=256, rollout_batch=16, pricing="rent", objective="time",
                tokens=1e7, budget_usd=500.0)


def test_solver_matches_enumeration_with_a_hybrid_rl_trainer():
    space = build_space(PlanRequest(**RL_SMALL), CAT)
    assert _shards(space) - {None}
    best = enumerate_best(space)
    assert_solver_matches_enumeration(solve_lexicographic(space, 30), best, RL_SMALL)


def test_a_hybrid_rl_plan_exports_verls_fsdp_size():
    got = plan(PlanRequest(**{**RL_SMALL, "sharding": "hsdp"}), CAT).plan
    g = got.config.dp_shard
    assert g == got.num_gpus // got.num_hosts
    text = export_plan(got, "verl").text
    for key in ("actor_rollout_ref.actor.fsdp_config.fsdp_size",
                "actor_rollout_ref.ref.fsdp_config.fsdp_size"):
        assert f"{key}={g}" in text
    with pytest.raises(PlannerError, match="no hybrid shard group for RL"):
        export_plan(got, "openrlhf")


def test_the_sharding_pin_chooses_full_or_hybrid():
    from planner.errors import PlannerError

    kw = dict(SMALL[0])
    full = build_space(PlanRequest(**kw, sharding="fsdp"), CAT)
    assert _shards(full) == {None}
    hybrid = build_space(PlanRequest(**kw, sharding="hsdp"), CAT)
    assert None not in _shards(hybrid) and all(s.fsdp for s in hybrid.strategies)
    got = plan(PlanRequest(**kw, sharding="hsdp"), CAT).plan
    assert got.config.dp_shard == got.num_gpus // got.num_hosts
    assert differential(PlanRequest(**kw, sharding="hsdp"), CAT).agree
    assert differential(PlanRequest(**kw, sharding="fsdp"), CAT).agree
    with pytest.raises(PlannerError, match="--sharding hsdp: no hybrid shard group"):
        plan(PlanRequest(model="7b", sharding="hsdp", budget_usd=100000), CAT)


@pytest.mark.parametrize("dp", [8, 16, 32])
def test_rl_memory_tables_match_the_model_with_hybrid_sharding(dp):
    """The solver's per-GPU need of a hybrid RL strategy (states a + b/dp read at the shard
    group) equals the memory model's device peak at every dp of whole groups."""
    import math

    from planner.models.workloads import estimate_memory
    from planner.solver.steptime import layout_config

    space = build_space(PlanRequest(**{**RL_SMALL, "gpus": ("h100-sxm",), "max_gpus": 32,
                                       "global_batch_size": 32}), CAT)
    hybrid = [i for i, s in enumerate(space.strategies) if s.dp_shard]
    assert hybrid
    for si in hybrid:
        cfg = layout_config(space, si, num_gpus=space.num_gpus(si, 1, 1, dp=dp), tp=1, pp=1,
                            micro_batch=1, grad_accum=32 // dp)
        need = space.gpu_need_mib(si, 1, 1, dp=dp, mb=1)
        est = estimate_memory(space.model, CAT.gpu("h100-sxm"), cfg)
        assert need == pytest.approx(math.ceil(est.device / 2**20), abs=40), si
