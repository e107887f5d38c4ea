"""Free-length RL generation: responses decoded to their mean (--mean-response-len) up to the
cap (--response-len), the longest alone at the end (the generation tail); and the job's tokens
counted as the real ones of padding-free passes (--mean-seq-len) by the solver and the analytic
re-check alike."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import TrainConfig
from planner.cli import main
from planner.models.rltime import estimate_rl_step
from planner.solver.solve import plan

CAT = load_catalog()
MODEL = CAT.model("qwen2.5-1.5b").spec
GPU = CAT.gpu("h100-sxm")
GRPO = dict(workload="grpo", prompt_len=512, response_len=1024, num_gpus=8, fsdp=True,
            micro_batch_size=4, rollout_batch=64)


def _step(**kw):
    return estimate_rl_step(MODEL, GPU, TrainConfig(**GRPO, **kw), stack="hf")


def test_a_mean_below_the_cap_decodes_the_mean_and_a_tail():
    full, free = _step(), _step(mean_response_len=200)
    assert "generation tail" not in full.phases
    assert free.phases["generation tail"] > 0
    # the bulk decodes 200 tokens, not 1024; with its tail still less than every response at
    # the cap, and more than every response at the mean with no cap above it
    assert free.phases["generation"] < full.phases["generation"]
    assert free.phases["generation"] + free.phases["generation tail"] < full.phases["generation"]
    at_mean = estimate_rl_step(MODEL, GPU, TrainConfig(**{**GRPO, "response_len": 200}),
                               stack="hf")
    assert free.phases["generation"] > at_mean.phases["generation"]  # longer KV reads
    # the trainer's passes are not touched: they pad to the cap unless --mean-seq-len
    assert free.phases["actor update"] == pytest.approx(full.phases["actor update"])


def test_the_mean_at_the_cap_is_every_response_at_the_cap():
    assert _step(mean_response_len=1024).step_time_s == pytest.approx(_step().step_time_s)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    got = capsys.readouterr()
    return exc.value.code, got.out, got.err


def test_mean_response_len_is_checked_in_one_line(capsys):
    base = ("check", "--model", "qwen2.5-1.5b", "--gpu", "h100-sxm")
    code, _out, err = _run(capsys, *base, "--workload", "grpo", "--prompt-len", "256",
                           "--response-len", "512", "--mean-response-len", "600")
    assert code == 2 and "--mean-response-len 600 exceeds --response-len 512" in err
    assert len(err.strip().splitlines()) == 1
    code, _out, err = _run(capsys, *base, "--mean-response-len", "100")
    assert code == 2 and "--mean-response-len 100 applies to --workload ppo or grpo" in err


@pytest.mark.parametrize("extra", [dict(mean_seq_len=300),
                                   dict(mean_seq_len=300, mean_response_len=150)],
                         ids=["padding-free", "padding-free-free-length"])
def test_rented_rl_plans_pass_their_analytic_recheck(extra):
    """The solver's job steps count the real tokens of padding-free passes, as the analytic
    re-check does (a plan with --mean-seq-len failed its re-check: the solver counted steps of
    padded tokens)."""
    req = PlanRequest(model="qwen2.5-1.5b", workload="grpo", prompt_len=512, response_len=1024,
                      pricing="rent", budget_usd=3000, gpus=("rtx-5090", "h100-sxm"),
                      max_gpus=8, **extra)
    assert req.tokens_per_sequence == 300
    result = plan(req, CAT)
    assert result.status == "optimal"


def test_a_verl_grpo_plan_steps_on_whole_prompt_groups():
    """verl counts its mini-batch in prompts (profile fact batch_counts_prompts): a default
    optimizer step is whole groups of n samples (16 prompts x 5 = 80 sequences), which its
    export writes as is; a --global-batch the user sets stays, and the export says how it
    rounds it; OpenRLHF counts sequences and keeps 64."""
    from planner.outputs.export import export_plan

    job = dict(model="qwen2.5-0.5b", workload="grpo", prompt_len=256, response_len=256,
               budget_usd=20000, pricing="rent")
    got = plan(PlanRequest(**job), CAT).plan
    assert got.config.global_batch_size == 80
    out = export_plan(got, "verl")
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=16" in out.text and not out.warnings
    pinned = plan(PlanRequest(**job, global_batch_size=64), CAT).plan
    assert pinned.config.global_batch_size == 64
    assert any("not a whole number of 5-sample prompt groups" in w
               for w in export_plan(pinned, "verl").warnings)
    other = plan(PlanRequest(**job, framework="openrlhf"), CAT).plan
    assert other.config.global_batch_size == 64
    assert PlanRequest(**job, rollout_n=12, rollout_batch=100).prompt_group_step() == {
        "global_batch_size": 48}  # 8 prompts do not divide 100; 4 do
