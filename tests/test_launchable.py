"""Every answer is launchable: each plan of a fixed set of 30 varied requests (SFT, pretrain,
RM, DPO, PPO, GRPO; buy and rent; cost and time; 1 to 1,024 GPUs; default and named
frameworks) exports to its framework's own launch format (export.launch_format_of) without a
refusal, and every plan runs on a framework that runs its layout."""

from __future__ import annotations

import pytest

from planner import PlanRequest, load_catalog
from planner.catalog.frameworks import resolve, unlaunchable, unsupported
from planner.errors import PlannerError
from planner.outputs.export import SUPERVISED, WRITES_FOR, export_plan, launch_format_of
from planner.solver.solve import plan

CAT = load_catalog()
RL = dict(prompt_len=256, response_len=256, rollout_batch=32)
REQUESTS = [
    dict(model="7b", budget_usd=3000),
    dict(model="0.5b", gpus=("rtx-4090",)),
    dict(model="8b", pricing="rent", tokens=1e8, max_hours=24),
    dict(model="70b", budget_usd=60000, objective="time", tokens=5e8),
    dict(model="7b", budget_usd=20000, objective="time", tokens=1e8),
    dict(model="1.5b", workload="rm", budget_usd=10000),
    dict(model="1.5b", workload="dpo", budget_usd=10000),
    dict(model="7b", workload="dpo", pricing="rent", tokens=1e8, budget_usd=500),
    dict(model="0.5b", workload="grpo", budget_usd=50000, **RL),
    dict(model="1.5b", workload="ppo", budget_usd=100000, **RL),
    dict(model="7b", workload="grpo", pricing="rent", steps=100, budget_usd=2000, **RL),
    dict(model="7b", workload="ppo", pricing="rent", steps=50, objective="time", budget_usd=3000,
         **RL),
    dict(model="7b", framework="megatron-lm", budget_usd=200000, objective="time", tokens=1e9),
    dict(model="70b", framework="megatron-lm", pricing="rent", tokens=1e9, objective="time",
         budget_usd=50000),
    dict(model="8b", framework="llama-factory", budget_usd=5000),
    dict(model="8b", framework="hf-deepspeed", pricing="rent", tokens=1e8),
    dict(model="8b", framework="unsloth", budget_usd=3000),
    dict(model="0.5b", workload="grpo", framework="openrlhf", budget_usd=50000, **RL),
    dict(model="1.5b", workload="ppo", framework="openrlhf", pricing="rent", steps=20,
         budget_usd=1000, **RL),
    dict(model="7b", workload="pretrain", method="full", pricing="rent", tokens=1e9,
         objective="time", budget_usd=20000),
    dict(model="405b", framework="megatron-lm", pricing="rent", tokens=1e10, objective="time",
         budget_usd=5000000, max_gpus=1024),
    dict(model="7b", framework="accelerate-fsdp", budget_usd=20000),
    dict(model="1.5b", workload="dpo", framework="trl", pricing="rent", tokens=1e7,
         budget_usd=100),
    dict(model="1.5b", workload="rm", framework="llama-factory", pricing="rent", tokens=1e7,
         budget_usd=100),
    dict(model="3b", framework="deepspeed", budget_usd=10000),
    dict(model="8b", workload="grpo", pricing="rent", steps=50, budget_usd=5000, **RL),
    dict(model="0.5b", workload="dpo", framework="hf-deepspeed", pricing="rent", tokens=1e7,
         objective="time", budget_usd=100, max_gpus=16),
    dict(model="1.5b", framework="trl", pricing="rent", tokens=1e8, objective="time",
         budget_usd=200),
    dict(model="8b", method="qlora", budget_usd=3000),
    dict(model="14b", framework="hf-deepspeed", budget_usd=40000, objective="time", tokens=1e8),
    # fp16 / fp32 plans (PlanRequest.fixed, the flags check takes): the exports' precision keys
    dict(model="1.5b", framework="hf-deepspeed", budget_usd=10000, fixed={"precision": "fp16"}),
    dict(model="0.5b", framework="llama-factory", budget_usd=5000, fixed={"precision": "fp32"}),
    dict(model="7b", framework="megatron-lm", budget_usd=200000, objective="time", tokens=1e9,
         fixed={"precision": "fp16"}),
    dict(model="1.5b", framework="trl", pricing="rent", tokens=1e8,
         fixed={"precision": "fp16", "flash_attention": False}),
    # Axolotl's YAML (tensor parallel over 4 nodes) and ms-swift's swift rlhf (GRPO)
    dict(model="70b", framework="axolotl", budget_usd=60000, objective="time", tokens=5e8),
    dict(model="0.5b", workload="grpo", framework="ms-swift", budget_usd=50000, num_gpus=8, **RL),
    # DeepSpeed-Chat's step 3 (hybrid engine: no memory fraction, no parked roles)
    dict(model="opt-1.3b", workload="ppo", framework="deepspeed-chat", budget_usd=4000, **RL),
    # PPO scored by a reward function (verl without a reward model, OpenRLHF --remote_rm_url)
    dict(model="1.5b", workload="ppo", budget_usd=100000, reward_function=True, **RL),
    dict(model="1.5b", workload="ppo", framework="openrlhf", pricing="rent", steps=20,
         budget_usd=1000, reward_function=True, **RL),
    # an RL trainer sharded within each host (verl's fsdp_size: actor, reference, critic)
    dict(model="1.5b", workload="ppo", framework="verl", gpus=("rtx-4090", "l40s"), max_gpus=16,
         pricing="rent", objective="time", tokens=1e7, budget_usd=500, sharding="hsdp",
         reward_function=True, **RL),
    # hybrid sharding over rented 8-GPU instances (Accelerate HYBRID_SHARD)
    dict(model="70b", framework="accelerate-fsdp", method="full", pricing="rent",
         objective="time", budget_usd=20000, tokens=2e9),
]


@pytest.mark.parametrize("kw", REQUESTS, ids=lambda kw: "-".join(
    str(kw.get(k, "")) for k in ("model", "workload", "framework", "pricing", "objective")))
def test_every_plan_exports_to_its_framework_format(kw):
    result = plan(PlanRequest(**kw), CAT)
    assert result.plan is not None, (result.status, [c.detail for c in result.conflicts])
    cfg = result.plan.config
    profile = resolve(CAT, cfg.framework)
    assert unsupported(profile, cfg) == [] and unlaunchable(profile, cfg) == []
    fmt = launch_format_of(profile, cfg.workload)
    assert fmt is not None, f"{cfg.framework} has no writer"
    exported = export_plan(result, fmt, catalog=CAT)
    assert exported.text.strip()


def test_the_set_spans_what_the_issue_asks():
    workloads = {kw.get("workload", "sft") for kw in REQUESTS}
    assert workloads == {"sft", "pretrain", "rm", "dpo", "ppo", "grpo"}
    assert {kw.get("pricing", "buy") for kw in REQUESTS} == {"buy", "rent"}
    assert {kw.get("objective", "cost") for kw in REQUESTS} == {"cost", "time"}
    assert len(REQUESTS) >= 30


def test_a_framework_without_a_writer_is_not_planned_on_but_checked(capsys):
    """TRL's GRPO (the Trainer with a vLLM server) and ColossalAI have no writer here: plan
    makes no plan on them (a plan its exporter refuses is no plan) and names the frameworks it
    launches; check still predicts their memory and speed."""
    import json

    from planner.cli import main

    assert launch_format_of(resolve(CAT, "hf-trainer"), "grpo") is None
    with pytest.raises(PlannerError, match="writes no launch of its grpo runs.*verl"):
        plan(PlanRequest(model="0.5b", workload="grpo", framework="hf-trainer",
                         budget_usd=20000, **RL), CAT)
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "7b", "--budget", "5000", "--framework", "colossalai"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "plan on one it launches: " in err and "hf-trainer" in err
    with pytest.raises(SystemExit) as exc:
        main(["check", "--model", "7b", "--gpu", "h100-sxm", "--framework", "colossalai",
              "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert exc.value.code in (0, 1) and doc["framework"]["id"] == "colossalai"


# Every profile a writer launches: varied requests planned on it export in its own format
# (issue 17 section 4), from 1 GPU to hundreds, cheapest and fastest, bought and owned.
WRITTEN = sorted({fid for fids, _ in WRITES_FOR.values() for fid in fids})
VARIED = [
    dict(model="llama-3.1-8b", budget_usd=3000),
    dict(model="llama-3.1-8b", budget_usd=30000),
    dict(model="llama-3.1-8b", budget_usd=300000, objective="time"),
    dict(model="llama-3.1-8b", method="full", budget_usd=20000),
    dict(model="llama-3.1-8b", gpus=("h100-sxm",), num_gpus=8, pricing="owned"),
    dict(model="llama-3.1-70b", budget_usd=400000),
]


@pytest.mark.parametrize("fid", WRITTEN)
def test_every_plan_on_a_written_framework_exports_without_refusal(fid):
    profile = resolve(CAT, fid)
    exported = 0
    for req in VARIED:
        fmt = profile.value("launch_format")
        workload = next(w for w in ("sft", "pretrain", "rm", "dpo", "ppo", "grpo")
                        if w in WRITES_FOR[fmt][1]
                        and w in profile.value("workloads", SUPERVISED))
        req = {**req, "workload": workload, **(RL if workload in ("ppo", "grpo") else {})}
        try:
            result = plan(PlanRequest(framework=fid, **req), CAT)
        except PlannerError:
            continue  # a request the framework cannot take at all: bad input, never a plan
        if result.plan is None:
            continue
        fmt = launch_format_of(profile, result.plan.config.workload)
        assert fmt is not None, (fid, req)
        export_plan(result, fmt, catalog=CAT)  # a refusal raises PlannerError: the test fails
        exported += 1
    assert exported >= 1, fid


def test_what_a_framework_cannot_launch_is_profile_data():
    """The model tables of the torchtune / torchtitan writers are the profiles' models facts,
    and a layout the profile rules out is never planned: LitGPT checkpoints and llm-foundry
    checkpoints or offloads only on several GPUs, LitGPT's QLoRA runs on one GPU, torchtune
    and torchtitan do not train in fp16 (a V100 is left out)."""
    from planner.catalog.frameworks import gpu_count_lacks, lacks_model, lacks_precision
    from planner.catalog.request import TrainConfig
    from planner.outputs.export.torchtitan import TORCHTITAN_MODELS
    from planner.outputs.export.torchtune import TORCHTUNE_MODELS

    tune, titan = resolve(CAT, "torchtune"), resolve(CAT, "torchtitan")
    assert set(tune.value("models")) == set(TORCHTUNE_MODELS)
    assert set(titan.value("models")) == set(TORCHTITAN_MODELS)
    assert lacks_model(titan, "qwen2.5-7b") and lacks_model(titan, "llama-3.1-8b") is None
    lit, foundry = resolve(CAT, "litgpt"), resolve(CAT, "llm-foundry")
    one = TrainConfig(num_gpus=1, checkpointing="full")
    assert gpu_count_lacks(lit, one) and gpu_count_lacks(foundry, one)
    assert not gpu_count_lacks(lit, one.model_copy(update={"num_gpus": 2}))
    assert gpu_count_lacks(lit, TrainConfig(num_gpus=2, method="qlora", lora_rank=16,
                                            checkpointing="none"))
    v100 = CAT.gpu("v100-32gb")
    assert lacks_precision(titan, TrainConfig(), v100) and lacks_precision(
        tune, TrainConfig(), CAT.gpu("h100-sxm")) is None
    with pytest.raises(PlannerError, match="no model definition"):
        plan(PlanRequest(model="qwen2.5-7b", framework="torchtitan", budget_usd=5000), CAT)
    res = plan(PlanRequest(model="llama-3.1-8b", framework="torchtitan", gpus=("v100-32gb",),
                           budget_usd=100000), CAT)
    assert res.plan is None and any("v100-32gb" in n and "not fp16" in n for n in res.notes)
