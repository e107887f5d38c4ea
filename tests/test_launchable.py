"""Every answer is launchable: each plan of a fixed set of 30 varied requests (SFT, pretrain,
RM, DPO, PPO, GRPO; buy and rent; cost and time; 1 to 1,024 GPUs; default and named
frameworks) exports to its framework's own launch format (export.launch_format_of) without a
refusal, and every plan runs on a framework that runs its layout."""

from __future__ import annotations

import pytest

from planner import PlanRequest, load_catalog
from planner.catalog.frameworks import resolve, unsupported
from planner.outputs.export import export_plan, launch_format_of
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
]


@pytest.mark.parametrize("kw", REQUESTS, ids=lambda kw: "-".join(
    str(kw.get(k, "")) for k in ("model", "workload", "framework", "pricing", "objective")))
def test_every_plan_exports_to_its_framework_format(kw):
    result = plan(PlanRequest(**kw), CAT)
    assert result.plan is not None, (result.status, [c.detail for c in result.conflicts])
    cfg = result.plan.config
    profile = resolve(CAT, cfg.framework)
    assert unsupported(profile, cfg) == []
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


def test_a_framework_without_a_writer_says_so(tmp_path, capsys):
    """TRL's GRPO (the Trainer with a vLLM server) has no writer here: export names it instead
    of writing another framework's launch."""
    import json

    from planner.cli import main
    from planner.outputs.render import plan_doc, to_json

    result = plan(PlanRequest(model="0.5b", workload="grpo", framework="hf-trainer",
                              budget_usd=20000, **RL), CAT)
    assert result.plan is not None
    assert launch_format_of(resolve(CAT, "hf-trainer"), "grpo") is None
    saved = tmp_path / "plan.json"
    saved.write_text(to_json(plan_doc(result)))
    with pytest.raises(SystemExit) as exc:
        main(["export", str(saved)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "no launch config for framework hf-trainer" in err
    assert json.loads(saved.read_text())["plan"]["config"]["framework"] == "hf-trainer"
