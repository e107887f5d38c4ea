"""The framework on every command: check, tune, plan and pareto name it, follow its profile
(what it runs, its memory semantics, its efficiency) and refuse what it cannot run."""

from __future__ import annotations

import json

import pytest

from planner import PlanRequest, TrainConfig, check, load_catalog
from planner.catalog.frameworks import choose
from planner.errors import PlannerError
from planner.solver.solve import plan
from tests.test_cli import run

CAT = load_catalog()


def test_check_names_the_default_framework_and_why(capsys):
    code, out, _ = run(capsys, "check", "--model", "7b", "--gpu", "a100-80gb-sxm", "--method",
                       "lora", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["framework"]["id"] == "hf-trainer"
    assert doc["framework"]["reason"] == "the default for sft"
    assert doc["throughput"]["stack"] == doc["framework"]["efficiency"] == "hf"
    code, out, _ = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--num-gpus", "4",
                       "--tp", "2", "--zero", "1")
    assert code == 0 and "framework  megatron-lm (hf-trainer (the default for sft) does not " \
                          "run parallelism tp" in out


@pytest.mark.parametrize(("args", "needle"), [
    (["--framework", "torchtunes"], "unknown framework 'torchtunes' (did you mean: torchtune"),
    (["--framework", "torchtune", "--num-gpus", "2", "--tp", "2"],
     "--framework torchtune does not run this job: sharding ddp"),
    (["--framework", "megatron-lm", "--method", "lora"],
     "--framework megatron-lm does not run this job: method lora"),
])
def test_check_refuses_what_the_framework_cannot_run(capsys, args, needle):
    code, _, err = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", *args)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_the_profile_sets_the_memory_semantics_unless_the_user_does():
    kw = dict(model="llama-3.1-8b", gpu="h100-sxm", catalog=CAT)
    tt = check(**kw, config=TrainConfig(framework="torchtune", method="lora"))
    hf = check(**kw, config=TrainConfig(method="lora"))
    assert tt["config"]["chunked_loss"] and tt["config"]["pure_bf16"]
    assert not hf["config"]["chunked_loss"] and not hf["config"]["pure_bf16"]
    assert tt["memory"]["per_gpu_gib"] < hf["memory"]["per_gpu_gib"]
    mine = check(**kw, config=TrainConfig(framework="torchtune", method="lora",
                                          chunked_loss=False))
    assert not mine["config"]["chunked_loss"]  # the user's setting wins


def test_zero1_differs_from_ddp_only_by_its_step_and_gather():
    """The efficiency belongs to the framework, not to the sharding label: on one framework
    ZeRO-1 computes exactly as DDP does; it steps the optimizer on its shard and then
    all-gathers the updated weights, exposed (DeepSpeed). Over PCIe the gather outweighs the
    sharded step, so ZeRO-1 is slower than DDP; on one GPU they are the same job."""
    for fw in ("hf-trainer", "hf-deepspeed", "deepspeed"):
        for gpu in ("a100-80gb-sxm", "rtx-4090"):
            kw = dict(model="qwen2.5-1.5b", gpu=gpu, catalog=CAT)
            ddp = check(**kw, config=TrainConfig(framework=fw, num_gpus=4))["throughput"]
            z1 = check(**kw, config=TrainConfig(framework=fw, num_gpus=4,
                                                zero_stage=1))["throughput"]
            assert z1["stack"] == ddp["stack"]
            assert z1["terms_s"]["compute"] == pytest.approx(ddp["terms_s"]["compute"])
            assert z1["terms_s"]["dp_comm"] > ddp["terms_s"]["dp_comm"]
            assert z1["terms_s"]["optimizer_step"] == pytest.approx(
                ddp["terms_s"]["optimizer_step"] / 4)
            if gpu == "rtx-4090":
                assert z1["tokens_per_s"] < ddp["tokens_per_s"], fw
        one = [check(model="qwen2.5-1.5b", gpu="a100-80gb-sxm", catalog=CAT,
                     config=TrainConfig(framework=fw, zero_stage=z))["throughput"]
               ["tokens_per_s"] for z in (0, 1)]
        assert one[0] == pytest.approx(one[1])


def test_check_and_plan_agree_on_a_layout_and_framework():
    req = PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-4090",), num_gpus=2, method="lora",
                      sharding="zero2", offload="none", checkpointing="full",
                      micro_batch_size=4, framework="hf-deepspeed")
    p = plan(req, CAT).plan
    assert p.config.framework == "hf-deepspeed"
    doc = check(model=req.model, gpu=p.gpu, config=p.config, catalog=CAT,
                margin=req.memory_margin)
    assert doc["throughput"]["tokens_per_s"] == pytest.approx(p.throughput.tokens_per_s)
    assert doc["memory"]["per_gpu_gib"] * 2**30 == pytest.approx(p.memory.device, rel=1e-3)


def test_plan_holds_only_layouts_its_framework_runs(capsys):
    code, _, err = run(capsys, "plan", "--model", "7b", "--budget", "50000", "--tp", "2")
    assert code == 2 and "--framework hf-trainer does not run tensor parallelism" in err
    verl = plan(PlanRequest(model="qwen2.5-0.5b", workload="grpo", gpus=("h100-sxm",),
                            max_gpus=2, prompt_len=256, response_len=256, rollout_batch=32,
                            global_batch_size=32, budget_usd=200000), CAT).plan
    assert verl.config.framework == "verl" and verl.config.fsdp  # verl trains with FSDP
    assert verl.config.placement == "colocate"


def test_plan_framework_auto_says_which_and_why(capsys):
    code, out, _ = run(capsys, "plan", "--model", "7b", "--budget", "3000", "--framework",
                       "auto", "--json")
    doc = json.loads(out)
    assert code == 0
    chosen = doc["plan"]["config"]["framework"]
    note = next(n for n in doc["notes"] if n.startswith("framework auto:"))
    assert note.startswith(f"framework auto: {chosen}, the cheapest of ")
    code, _, err = run(capsys, "pareto", "--model", "7b", "--budget", "3000", "--framework",
                       "auto")
    assert code == 2 and "only" in err


def test_plan_framework_auto_explains_only_the_chosen_plan(monkeypatch):
    """Issue 15: explanations only where the output shows them. --framework auto solves every
    candidate framework but explains (binding rules, alternatives) the chosen plan alone, and
    gives the same answer as planning on that framework."""
    from planner.solver import solve

    calls = []
    real = solve.binding_rules
    monkeypatch.setattr(solve, "binding_rules",
                        lambda space, p: calls.append(space.request.framework) or real(space, p))
    auto = plan(PlanRequest(model="7b", budget_usd=3000, framework="auto"), CAT)
    chosen = auto.plan.config.framework
    assert calls == [chosen]
    alone = plan(PlanRequest(model="7b", budget_usd=3000, framework=chosen), CAT)
    assert alone.plan == auto.plan and alone.binding == auto.binding
    assert alone.alternatives == auto.alternatives


def test_choose_prefers_frameworks_with_their_own_measured_efficiency():
    tp = choose(CAT, TrainConfig(num_gpus=8, tp=2, pp=2))
    assert tp.profile.id == "megatron-lm" and tp.stack == "megatron"
    with pytest.raises(PlannerError, match="no framework profile runs"):
        choose(CAT, TrainConfig(num_gpus=8, tp=2, pp=2, method="dora", offload="optimizer",
                                zero_stage=2))


def test_sanity_refusals_and_notes(capsys):
    """Issue 19 item 6: pretraining is full training; --price-kind prices purchases only; a
    job shorter than one step or longer than a month is said; fp16 on a GPU with fp16 tensor
    cores is not called missing."""
    code, _, err = run(capsys, "plan", "--model", "7b", "--workload", "pretrain", "--method",
                       "lora", "--budget", "10000")
    assert code == 2 and "pretrain trains every weight" in err
    code, out, _ = run(capsys, "plan", "--model", "7b", "--workload", "pretrain", "--budget",
                       "10000", "--json")
    assert code == 0 and json.loads(out)["plan"]["config"]["method"] == "full"
    code, _, err = run(capsys, "plan", "--model", "7b", "--pricing", "rent", "--price-kind",
                       "used")
    assert code == 2 and "--price-kind used prices a purchase" in err
    code, out, _ = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--method",
                       "lora", "--tokens", "100", "--precision", "fp16", "--json")
    doc = json.loads(out)
    assert any("shorter than one optimizer step" in n for n in doc["cost"]["notes"])
    assert not any("no fp16" in n for n in doc["throughput"]["notes"])
    code, out, _ = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--method",
                       "lora", "--tokens", "1e12", "--json")
    assert any("days (over 30)" in n for n in json.loads(out)["cost"]["notes"])


def test_owned_hardware_is_planned_for_time_on_any_gpu(capsys):
    """Issue 19 item 1: hardware the user has (seeds 002-004): any catalog GPU, priced or not;
    nothing to buy, the fastest plan; budget and missing hardware are one-line errors."""
    code, out, _ = run(capsys, "plan", "--model", "mistral-7b", "--workload", "rm", "--gpus",
                       "ascend-910b", "--num-gpus", "8", "--pricing", "owned", "--seq-len",
                       "384", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["plan"]["gpu"] == "ascend-910b" and doc["plan"]["num_gpus"] == 8
    assert doc["plan"]["cost"]["basis"] == "owned" and doc["plan"]["cost"]["usd"] == 0
    for args, needle in ((("--gpus", "h800"), "give --gpus TYPE and --num-gpus N"),
                         (("--gpus", "h800", "--num-gpus", "8", "--budget", "5"),
                          "does not apply to --pricing owned")):
        code, _, err = run(capsys, "plan", "--model", "7b", "--pricing", "owned", *args)
        assert code == 2 and needle in err
    code, out, _ = run(capsys, "check", "--model", "mistral-7b", "--workload", "rm", "--gpu",
                       "ascend-910b", "--num-gpus", "8", "--seq-len", "384", "--pricing",
                       "owned", "--json")
    assert json.loads(out)["cost"]["basis"] == "owned"


def test_pareto_says_when_the_front_goes_on(capsys):
    code, out, _ = run(capsys, "pareto", "--model", "7b", "--budget", "20000", "--max-points",
                       "2", "--json")
    doc = json.loads(out)
    assert code == 0 and len(doc["points"]) == 2 and doc["more"] is True
    code, out, _ = run(capsys, "pareto", "--model", "7b", "--budget", "20000", "--max-points",
                       "2")
    assert "the front goes on" in out


def test_a_pinned_gpu_count_gets_the_nearest_global_batch_it_divides(capsys):
    """Issue 19 item 7: the fix keeps what the user pinned where it can (--global-batch 66 for
    6 GPUs) before telling them to drop the pin."""
    code, out, _ = run(capsys, "plan", "--model", "8b", "--workload", "rm", "--gpus",
                       "rtx-4090", "--num-gpus", "6", "--budget", "50000")
    assert code == 1
    fix = next(line for line in out.splitlines() if "smallest fix: " in line)
    options = fix.split("smallest fix: ")[1].split(" or ")
    # the pin kept first, a new value of it next, dropping it last
    assert options[0] == "--global-batch 66 (keeps --num-gpus 6)"
    assert options[-1].startswith("leave --num-gpus open")
    assert all(o.startswith("--num-gpus ") for o in options[1:-1])
