"""planner tune: the search equals a brute force over the same candidates, rules and pins hold,
memory targets are kept, and the CLI's exit codes and JSON keys."""

from __future__ import annotations

import json

import pytest

from planner import check, tune
from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.errors import PlannerError
from planner.models.memory import GIB
from planner.solver.tune import ranking
from planner.solver.tune_space import Pins, candidate_configs
from tests.test_cli import run

# Small spaces keep the brute force quick; memory binds inside them on these GPUs.
RL_SPACE = {"micro_batch_size": (1, 2, 4, 8, 16, 32), "rollout_batch": (8, 16, 32),
            "rollout_n": (2, 4, 8), "logprob_micro_batch": (1, 4, 16, 64)}
SFT_SPACE = {"micro_batch_size": (1, 2, 3, 4, 6, 8, 12, 16), "grad_accum": (1, 2, 4, 8)}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def grpo(**kw) -> TrainConfig:
    base = {"workload": "grpo", "prompt_len": 256, "response_len": 768, "seq_len": 1024}
    return TrainConfig(**{**base, **kw})


def brute_force(kw: dict, pins, space: dict, catalog, memory_target=None):
    """Evaluate every candidate of the unpruned set with the same pure models."""
    from planner.solver.tune import _problem

    problem = _problem(model=kw["model"], gpu=kw["gpu"], config=kw["config"], catalog=catalog,
                       margin=0.02, memory_target=memory_target, stack=None, platform=None,
                       critic_model=None, reward_model=None)
    return [problem.evaluate(c) for c in candidate_configs(problem.base, pins, space)]


CASES = [
    # (name, tune kwargs, pins, space)
    ("grpo 0.5b v100-16gb", {"model": "qwen2.5-0.5b", "gpu": "v100-16gb", "config": grpo()},
     Pins(), RL_SPACE),
    ("grpo 1.5b 2 gpus fsdp", {"model": "qwen2.5-1.5b", "gpu": "rtx-4090",
                               "config": grpo(num_gpus=2, fsdp=True)}, Pins(), RL_SPACE),
    ("ppo 0.5b global pinned", {"model": "qwen2.5-0.5b", "gpu": "v100-32gb",
                                "config": TrainConfig(workload="ppo", prompt_len=256,
                                                      response_len=256, seq_len=512)},
     {"global_batch_size": 16}, RL_SPACE),
    ("sft 0.5b full open global", {"model": "qwen2.5-0.5b", "gpu": "v100-16gb",
                                   "config": TrainConfig(seq_len=2048)}, {}, SFT_SPACE),
    ("sft 1.5b 4 gpus zero2 global 48", {"model": "qwen2.5-1.5b", "gpu": "rtx-4090",
                                         "config": TrainConfig(num_gpus=4, zero_stage=2,
                                                               seq_len=4096)},
     Pins(global_batch=48), SFT_SPACE),
    ("dpo 0.5b lora", {"model": "qwen2.5-0.5b", "gpu": "v100-16gb",
                       "config": TrainConfig(workload="dpo", method="lora", seq_len=2048)},
     Pins(), SFT_SPACE),
]


@pytest.mark.parametrize(("name", "kw", "pins", "space"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize(("objective", "target", "tol"),
                         [("throughput", None, 0.0), ("throughput", None, 0.01),
                          ("memory", 0.8, 0.01)])
def test_search_equals_brute_force(catalog, name, kw, pins, space, objective, target, tol):
    res = tune(catalog=catalog, pins=pins, space=space, objective=objective,
               memory_target=target, tie_tolerance=tol, **kw)
    every = brute_force(kw, pins, space, catalog, memory_target=target)
    fitting = [c for c in every if c.fits]
    assert res.status == "found" and fitting
    assert len(fitting) < len(every), "memory should bind inside the test space"
    best = sorted(fitting, key=ranking(fitting, objective, tol))[0]
    assert res.best.config == best.config
    assert res.evaluated < len(every)
    fastest = max(c.tokens_per_s for c in fitting)
    if objective == "throughput":
        # no fitting candidate is faster (beyond the stated tie tolerance)
        assert res.best.tokens_per_s >= fastest * (1 - tol) - 1e-9
        if tol == 0:
            assert res.best.tokens_per_s == pytest.approx(fastest, rel=1e-12)
    else:
        fullest = max(c.memory.device for c in fitting)
        assert res.best.memory.device >= fullest - tol * res.best.memory.capacity
        assert res.best.memory.device <= target * res.best.memory.capacity


def rules_hold(cfg: TrainConfig) -> None:
    dp = cfg.dp
    assert cfg.global_batch_size == cfg.micro_batch_size * cfg.grad_accum * dp
    assert cfg.global_batch_size % (cfg.micro_batch_size * dp) == 0
    if cfg.is_rl:
        seqs = cfg.rollout_batch * cfg.samples_per_prompt
        assert seqs % cfg.num_gpus == 0
        assert seqs % (cfg.micro_batch_size * dp) == 0
        assert seqs % cfg.global_batch_size == 0
        assert seqs % (cfg.logprob_batch * dp) == 0


def test_divisibility_rules_hold(catalog):
    kw = {"model": "qwen2.5-1.5b", "gpu": "rtx-4090", "config": grpo(num_gpus=4, fsdp=True)}
    res = tune(catalog=catalog, **kw)
    assert res.status == "found"
    for c in (res.best, *res.runners_up):
        rules_hold(c.config)
    for cfg in candidate_configs(kw["config"], Pins(), RL_SPACE):
        rules_hold(cfg)
    for cfg in candidate_configs(TrainConfig(num_gpus=4, zero_stage=1), Pins(global_batch=96),
                                 SFT_SPACE):
        rules_hold(cfg)
        assert cfg.global_batch_size == 96


def test_pins_respected(catalog):
    pins = Pins(micro_batch=2, rollout_batch=32, rollout_n=8, logprob_micro_batch=4,
                checkpointing="selective", global_batch=128)
    res = tune(model="qwen2.5-0.5b", gpu="v100-32gb", config=grpo(), catalog=catalog, pins=pins)
    s = res.best.settings
    assert (s["micro_batch_size"], s["rollout_batch"], s["rollout_n"], s["logprob_micro_batch"],
            s["checkpointing"], s["global_batch_size"]) == (2, 32, 8, 4, "selective", 128)
    assert s["grad_accum"] == 64
    res = tune(model="qwen2.5-0.5b", gpu="v100-16gb", config=TrainConfig(), catalog=catalog,
               pins=Pins(grad_accum=4, checkpointing="full"))
    assert all(c.config.grad_accum == 4 and c.config.checkpointing == "full"
               for c in (res.best, *res.runners_up))


def test_best_rechecks_with_check(catalog):
    """The chosen settings fit and check() reports the same memory and speed."""
    res = tune(model="qwen2.5-0.5b", gpu="v100-16gb", config=grpo(), catalog=catalog)
    doc = check(model="qwen2.5-0.5b", gpu="v100-16gb", config=res.best.config, catalog=catalog)
    assert doc["fits"] is True
    assert doc["memory"]["per_gpu_gib"] == pytest.approx(res.best.per_gpu_gib, abs=1e-3)
    assert doc["throughput"]["tokens_per_s"] == pytest.approx(res.best.tokens_per_s)


def test_memory_target_caps_and_fills(catalog):
    kw = {"model": "qwen2.5-0.5b", "gpu": "v100-32gb", "config": grpo(), "catalog": catalog}
    free = tune(**kw)
    capped = tune(memory_target=0.6, **kw)
    filled = tune(memory_target=0.6, objective="memory", **kw)
    cap = 32 * GIB
    for r in (capped, filled):
        assert r.best.memory.device <= 0.6 * cap
        assert all(c.memory.device <= 0.6 * cap for c in r.runners_up)
        assert r.limit_gib == pytest.approx(19.2)
    assert free.best.memory.device > 0.6 * cap
    assert filled.best.memory.device >= capped.best.memory.device - 0.01 * cap


def test_infeasible_reports_the_closest(catalog):
    res = tune(model="70b", gpu="rtx-4090", config=TrainConfig(), catalog=catalog)
    assert res.status == "infeasible" and res.best is None and res.runners_up == ()
    assert res.smallest.per_gpu_gib > 24
    assert res.smallest.config.micro_batch_size == 1


def test_cli_infeasible_exit_1(capsys):
    code, out, _ = run(capsys, "tune", "--model", "70b", "--gpu", "rtx-4090")
    assert code == 1
    assert "infeasible" in out and "closest" in out and "GiB per GPU" in out


def test_cli_memory_target_unreachable_exit_1(capsys):
    code, out, _ = run(capsys, "tune", "--model", "0.5b", "--gpu", "v100-16gb",
                       "--memory-target", "0.2", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "infeasible" and doc["settings"] is None
    assert doc["smallest"]["per_gpu_gib"] > doc["memory_limit_gib"] == pytest.approx(3.2)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--micro-batch", "0"], "--micro-batch 0"),
        (["--rollout-n", "4"], "--rollout-n 4 applies to --workload ppo or grpo"),
        (["--memory-target", "1.5"], "--memory-target 1.5"),
        (["--objective", "speed"], "speed"),
        (["--num-gpus", "2", "--global-batch", "7"], "--global-batch 7 must be a multiple of dp"),
        (["--micro-batch", "4", "--global-batch", "6"], "--global-batch 6"),
        (["--workload", "grpo", "--prompt-len", "64", "--response-len", "64", "--num-gpus", "2",
          "--rollout-batch", "3", "--rollout-n", "3"], "must be a multiple of --num-gpus"),
        (["--gpu", "a100"], "GPU 'a100' is one of a100-40gb-pcie"),
        (["--tie-tolerance", "0.7"], "--tie-tolerance 0.7"),
    ],
)
def test_cli_bad_input_exit_2_one_line(capsys, args, needle):
    # a repeated option takes its last value: "--gpu a100" replaces the base GPU
    code, out, err = run(capsys, "tune", "--model", "0.5b", "--gpu", "v100-16gb", *args)
    assert code == 2 and not out
    assert needle in err and err.count("\n") == 1


def test_cli_json_keys_and_determinism(capsys):
    # point estimates (--confidence 0): at the default p90 band nothing of this fits 16 GB
    args = ("tune", "--model", "0.5b", "--gpu", "v100-16gb", "--workload", "grpo",
            "--prompt-len", "256", "--response-len", "256", "--confidence", "0", "--json")
    code, out, _ = run(capsys, *args)
    assert code == 0
    doc = json.loads(out)
    for key in ("settings", "memory", "throughput", "runners_up", "status", "smallest"):
        assert key in doc
    for key in ("micro_batch_size", "grad_accum", "global_batch_size", "checkpointing",
                "rollout_batch", "rollout_n", "logprob_micro_batch", "rollout_engine"):
        assert key in doc["settings"]
    # a vLLM fraction to set only where an engine reserves one (not the trainer's generate)
    assert ("gpu_memory_utilization" in doc["settings"]) == (
        doc["settings"]["rollout_engine"] != "hf-generate")
    for key in ("per_gpu_gib", "breakdown_gib", "peak_phase", "phases_gib", "capacity_gib"):
        assert key in doc["memory"]
    for key in ("tokens_per_s", "step_time_s", "limited_by"):
        assert key in doc["throughput"]
    assert 1 <= len(doc["runners_up"]) <= 5
    for r in doc["runners_up"]:
        assert set(r) >= {"settings", "per_gpu_gib", "tokens_per_s"}
        assert r["per_gpu_gib"] <= doc["memory_limit_gib"]
    assert sum(doc["memory"]["breakdown_gib"].values()) == pytest.approx(
        doc["memory"]["per_gpu_gib"], abs=0.02)
    _, again, _ = run(capsys, *args)
    assert again == out


def test_cli_text(capsys):
    code, out, _ = run(capsys, "tune", "--model", "0.5b", "--gpu", "v100-16gb",
                       "--checkpointing", "full", "--confidence", "0")
    assert code == 0
    for word in ("settings", "memory", "tokens/s", "runners-up", "checkpointing full"):
        assert word in out


SEED_001_RULES = ("rollout_n % micro_batch == 0", "rollout_batch % num_gpus == 0",
                  "micro_batch <= 16")


def test_required_rules_are_kept_and_the_search_still_equals_brute_force(catalog):
    """tune --require (issue 19 item 3): seed 001's rules hold on the answer, which is the
    best of the whole candidate set filtered by the rules."""
    from planner.solver.requirements import all_hold, parse
    from planner.solver.tune import _problem

    kw = {"model": "qwen2.5-0.5b", "gpu": "v100-32gb", "config": grpo(num_gpus=2, fsdp=True)}
    pins = {"rollout_n": 8}
    res = tune(catalog=catalog, pins=pins, space=RL_SPACE, requires=SEED_001_RULES, **kw)
    rules = tuple(parse(r) for r in SEED_001_RULES)
    assert res.status == "found" and all_hold(rules, res.best.config)
    assert res.best.config.samples_per_prompt == 8  # the pin is kept
    problem = _problem(model=kw["model"], gpu=kw["gpu"], config=kw["config"], catalog=catalog,
                       margin=0.02, memory_target=None, stack=None, platform=None,
                       critic_model=None, reward_model=None)
    every = [problem.evaluate(c)
             for c in candidate_configs(problem.base, pins, RL_SPACE, rules=rules)]
    fitting = [c for c in every if c.fits]
    best = sorted(fitting, key=ranking(fitting, "throughput", 0.01))[0]
    assert res.best.config == best.config
    assert any(n.startswith("--require rollout_n % micro_batch == 0") for n in res.notes)


@pytest.mark.parametrize(("rule", "needle"), [
    ("__import__('os')", "'Call' is not allowed"),
    ("micro_batch ** 2 > 4", "'Pow' is not allowed"),
    ("batch % 2 == 0", "'batch' is not allowed"),
    ("micro_batch", "must be a comparison"),
    ("micro_batch <", "is not an expression"),
])
def test_bad_rules_are_one_line_errors(rule, needle):
    from planner.errors import PlannerError
    from planner.solver.requirements import parse

    with pytest.raises(PlannerError, match=needle.replace("*", r"\*")):
        parse(rule)


def test_tune_uses_the_frameworks_rollout_engine(capsys):
    """TRL's GRPOTrainer generates with the model itself unless use_vllm (profile default
    hf-generate); verl with its vLLM engine. --rollout-engine picks one the profile offers."""
    args = ("tune", "--model", "0.5b", "--gpu", "h100-sxm", "--workload", "grpo",
            "--prompt-len", "256", "--response-len", "256", "--rollout-batch", "16",
            "--rollout-n", "4", "--json")
    _, out, _ = run(capsys, *args, "--framework", "trl")
    trl = json.loads(out)
    assert trl["settings"]["rollout_engine"] == "hf-generate"
    assert "gpu_memory_utilization" not in trl["settings"]
    _, out, _ = run(capsys, *args, "--framework", "trl", "--rollout-engine", "vllm")
    vllm = json.loads(out)
    assert vllm["settings"]["rollout_engine"] == "vllm"
    # the engine's own 16-bit copy of the weights and its workspace show in the rollout phase
    assert vllm["memory"]["phases_gib"]["rollout"] > trl["memory"]["phases_gib"]["rollout"]
    _, out, _ = run(capsys, *args, "--framework", "verl", "--fsdp")
    assert json.loads(out)["settings"]["rollout_engine"] == "vllm"


@pytest.mark.parametrize("extra, needle", [
    (("--rollout-engine", "vlm"), "--rollout-engine"),
    (("--framework", "verl", "--fsdp", "--rollout-engine", "hf-generate"),
     "rollout engine hf-generate (it runs vllm, sglang)"),
    (("--framework", "trl", "--rollout-engine", "hf-generate", "--gpu-memory-utilization",
      "0.5"),
     "--gpu-memory-utilization 0.5 does not apply to --rollout-engine hf-generate"),
])
def test_rollout_engine_bad_input_exit_2(capsys, extra, needle):
    code, out, err = run(capsys, "tune", "--model", "0.5b", "--gpu", "h100-sxm", "--workload",
                         "grpo", "--prompt-len", "256", "--response-len", "256", *extra)
    assert code == 2 and not out
    assert needle in err and err.count("\n") == 1


def test_cli_infeasible_lists_checked_fixes_outside_the_searched_settings(capsys):
    """Nothing fits: tune ranks the changes that make its closest setting fit (issue 19: fixes
    wherever something does not fit), none of them to what tune itself searched."""
    args = ("tune", "--model", "8b", "--gpu", "h100-sxm", "--num-gpus", "8")
    code, out, _ = run(capsys, *args, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "infeasible"
    assert doc["smallest"]["per_gpu_gib"] > doc["capacity_gib"]
    changes = [" ".join(f["changes"]) for f in doc["fixes"]]
    assert "--zero 3" in changes and "--method lora" in changes
    assert all(f["fits"] and f["per_gpu_gib"] <= doc["memory_limit_gib"] for f in doc["fixes"])
    assert not any("--micro-batch" in c or "--checkpointing" in c for c in changes)
    hours = [f["hours"] for f in doc["fixes"]]
    assert hours == sorted(hours)
    # the fix works: tune with it finds settings
    code, out, _ = run(capsys, *args, "--zero", "3", "--json")
    assert code == 0 and json.loads(out)["status"] == "found"
    code, out, _ = run(capsys, *args)
    assert code == 1 and "changes that make a setting fit" in out


def test_cli_memory_target_unreachable_lists_no_fixes(capsys):
    """Over a --memory-target but within the GPU: there is nothing to fix."""
    code, out, _ = run(capsys, "tune", "--model", "0.5b", "--gpu", "v100-16gb",
                       "--memory-target", "0.2", "--json")
    assert code == 1 and json.loads(out)["fixes"] is None


def test_pins_by_field_name_equal_the_compatible_pins(catalog):
    """Pins (the CLI's names) and a mapping of TrainConfig fields are one pin set: the same
    candidates and the same answer; the searched domains show each pin as its one value."""
    base = TrainConfig(num_gpus=2, zero_stage=1)
    old = Pins(micro_batch=2, global_batch=32, checkpointing="full")
    new = {"micro_batch_size": 2, "global_batch_size": 32, "checkpointing": "full"}
    assert candidate_configs(base, old, SFT_SPACE) == candidate_configs(base, new, SFT_SPACE)
    assert [c.micro_batch_size for c in candidate_configs(base, new, SFT_SPACE)] == [2]
    kw = {"model": "qwen2.5-0.5b", "gpu": "v100-16gb", "config": base, "catalog": catalog}
    a, b = tune(pins=old, **kw), tune(pins=new, **kw)
    assert a.best.config == b.best.config and a.space == b.space
    assert b.space["micro_batch_size"] == (2,) and b.space["global_batch_size"] == (32,)
    assert "grad_accum" not in b.space  # the accumulation follows from the pinned total


@pytest.mark.parametrize(("pins", "space", "needle"), [
    ({"micro_batch": 2}, None, "pin 'micro_batch' is not one of micro_batch_size"),
    ({"grad_accum": 0}, None, "--grad-accum 0 must be a positive integer"),
    ({"checkpointing": "some"}, None, "--checkpointing 'some' is not one of auto"),
    ({}, {"micro_batches": (1,)}, "space field 'micro_batches' is not one of"),
])
def test_bad_pins_and_domains_are_one_line_errors(catalog, pins, space, needle):
    with pytest.raises(PlannerError, match=needle):
        tune(model="qwen2.5-0.5b", gpu="v100-16gb", config=TrainConfig(), catalog=catalog,
             pins=pins, space=space)


def test_accumulation_pin_with_the_optimizer_in_the_backward_is_check_s_error(catalog):
    cfg = TrainConfig(optimizer_in_backward=True)
    with pytest.raises(PlannerError) as err:
        tune(model="qwen2.5-0.5b", gpu="v100-16gb", config=cfg, catalog=catalog,
             pins={"grad_accum": 4})
    with pytest.raises(PlannerError) as same:
        check(model="qwen2.5-0.5b", gpu="v100-16gb", config=cfg.model_copy(
            update={"grad_accum": 4}), catalog=catalog)
    assert str(err.value) == str(same.value)
    assert "--optimizer-in-backward needs --grad-accum 1 (got 4)" in str(err.value)
