"""Axolotl YAML and ms-swift launch exports (planner/outputs/export/axolotl.py, ms_swift.py):
each writer's mapping of the plan's fields and its refusals, and `planner export PLAN.json`
without --format on plans made with --framework axolotl / ms-swift (the profile's
launch_format), the written config read back and checked against the plan."""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml

from planner import load_catalog
from planner.catalog.frameworks import resolve
from planner.catalog.request import TrainConfig
from planner.errors import PlannerError
from planner.outputs.export import WRITES_FOR, Job, export_plan, launch_format_of
from tests.test_hardening import run_cli as cli

CAT = load_catalog()


def job(num_gpus: int = 1, num_hosts: int = 1, precision: str = "bf16", **cfg) -> Job:
    config = TrainConfig(num_gpus=num_gpus, **cfg)
    return Job(model="qwen2.5-7b", model_path="Qwen/Qwen2.5-7B", gpu="h100", num_gpus=num_gpus,
               num_hosts=num_hosts, cfg=config, precision=precision)


def axolotl(j: Job) -> tuple[dict, object]:
    result = export_plan(j, "axolotl")
    return yaml.safe_load(result.text), result


def swift_flags(text: str) -> tuple[list[str], dict[str, str | list[str]], dict[str, str]]:
    """(swift subcommand words, --flag values, exported variables) of an ms-swift script."""
    lines = [ln for ln in text.replace("\\\n", " ").splitlines()
             if ln.strip() and not ln.startswith("#")]
    exports = dict(ln.removeprefix("export ").split("=", 1) for ln in lines
                   if ln.startswith("export "))
    tokens = shlex.split(lines[-1])
    head = tokens[:tokens.index(next(t for t in tokens if t.startswith("--")))]
    flags: dict[str, str | list[str]] = {}
    for tok in tokens[len(head):]:
        if tok.startswith("--"):
            key = tok[2:]
            flags[key] = []
        else:
            flags[key].append(tok)  # type: ignore[union-attr]
    return head, {k: v[0] if len(v) == 1 else v for k, v in flags.items()}, exports


def swift(j: Job):
    result = export_plan(j, "ms-swift")
    return (*swift_flags(result.text), result)


# ---------------------------------------------------------------------------------------------
# Axolotl writer
# ---------------------------------------------------------------------------------------------
def test_axolotl_lora_fields():
    doc, res = axolotl(job(method="lora", lora_rank=32, lora_targets=("q", "v"),
                           micro_batch_size=4, grad_accum=8, seq_len=4096))
    assert doc["base_model"] == "Qwen/Qwen2.5-7B"
    assert (doc["adapter"], doc["lora_r"], doc["lora_alpha"]) == ("lora", 32, 64)
    assert doc["lora_target_modules"] == ["q_proj", "v_proj"]
    assert "lora_target_linear" not in doc and "load_in_4bit" not in doc
    assert (doc["micro_batch_size"], doc["gradient_accumulation_steps"]) == (4, 8)
    assert doc["sequence_len"] == 4096 and doc["gradient_checkpointing"] is True
    assert doc["bf16"] is True and doc["fp16"] is False
    assert doc["datasets"][0]["type"] == "chat_template"
    assert "deepspeed" not in doc and "fsdp_config" not in doc
    assert "axolotl train axolotl.yaml" in res.text and res.filename_suggestion == "axolotl.yaml"


def test_axolotl_qlora_and_all_linear():
    doc, _ = axolotl(job(method="qlora", optimizer="adamw-8bit", checkpointing="none"))
    assert doc["adapter"] == "qlora" and doc["load_in_4bit"] is True
    assert doc["lora_target_linear"] is True and doc["gradient_checkpointing"] is False
    assert doc["optimizer"] == "adamw_bnb_8bit"


def test_axolotl_fsdp_recomputes_in_fsdp_config():
    doc, res = axolotl(job(num_gpus=8, fsdp=True, offload="optimizer+params"))
    assert doc["fsdp_version"] == 2
    assert doc["fsdp_config"]["activation_checkpointing"] is True
    assert doc["fsdp_config"]["offload_params"] is True
    assert doc["gradient_checkpointing"] is False
    assert "--num_processes 8" in res.text


def test_axolotl_fsdp2_takes_torchao_8bit_adam():
    doc, res = axolotl(job(num_gpus=8, fsdp=True, optimizer="adamw-8bit"))
    assert doc["optimizer"] == "adamw_torch_8bit"
    assert any("adamw_torch_8bit" in n for n in res.notes)


@pytest.mark.parametrize(("stage", "offload", "path"), [
    (1, "none", "deepspeed_configs/zero1.json"),
    (2, "optimizer", "deepspeed_configs/zero2.json"),
    (3, "none", "deepspeed_configs/zero3.json"),
    (3, "optimizer+params", "deepspeed_configs/zero3_bf16_cpuoffload_all.json"),
    (2, "none", "ds_z2_config.json"),
])
def test_axolotl_deepspeed_files(stage, offload, path):
    doc, res = axolotl(job(num_gpus=4, zero_stage=stage, offload=offload))
    assert doc["deepspeed"] == path
    if not path.startswith("deepspeed_configs/"):
        assert any("planner export --format deepspeed" in n for n in res.notes)


def test_axolotl_tensor_parallel_replicas_are_fsdp_shards():
    doc, res = axolotl(job(num_gpus=16, num_hosts=2, method="qlora", tp=4))
    assert doc["tensor_parallel_size"] == 4 and doc["dp_shard_size"] == 4
    assert doc["fsdp_version"] == 2 and any("DDP x TP" in w for w in res.warnings)
    assert "--num_machines 2 --num_processes 16" in res.text


def test_axolotl_tp_alone_and_with_zero():
    doc, res = axolotl(job(num_gpus=4, tp=4))
    assert doc["tensor_parallel_size"] == 4 and "dp_shard_size" not in doc
    assert "fsdp_config" not in doc and not any("DDP x TP" in w for w in res.warnings)
    doc, _ = axolotl(job(num_gpus=8, tp=2, zero_stage=1))
    assert doc["deepspeed"] == "deepspeed_configs/zero1.json" and "dp_shard_size" not in doc


def test_axolotl_preference_and_reward():
    doc, _ = axolotl(job(workload="dpo", method="lora", precompute_ref=True))
    assert (doc["rl"], doc["rl_beta"], doc["precompute_ref_log_probs"]) == ("dpo", 0.1, True)
    doc, res = axolotl(job(workload="dpo", method="lora", reference=False))
    assert doc["rl"] == "simpo" and any("SimPO" in w for w in res.warnings)
    doc, _ = axolotl(job(workload="rm", method="lora"))
    assert doc["reward_model"] is True and doc["num_labels"] == 1
    assert doc["datasets"][0]["type"] == "bradley_terry.chat_template"


def test_axolotl_grpo():
    rl = dict(workload="grpo", method="lora", prompt_len=256, response_len=512, rollout_n=8,
              rollout_batch=16)
    doc, _ = axolotl(job(rollout_engine="hf-generate", **rl))
    trl = doc["trl"]
    assert trl["use_vllm"] is False and trl["num_generations"] == 8
    assert trl["generation_batch_size"] == 128 and trl["max_completion_length"] == 512
    assert doc["sequence_len"] == 768 and "vllm" not in doc
    doc, _ = axolotl(job(num_gpus=4, rollout_tp=2, **rl))
    assert doc["trl"]["vllm_mode"] == "colocate" and doc["vllm"]["tensor_parallel_size"] == 2


def test_axolotl_freeze_unfreezes_the_last_layers():
    spec = CAT.model("qwen2.5-7b").spec
    doc, _ = axolotl(job(method="freeze", freeze_trainable_layers=2))
    (pattern,) = doc["unfrozen_parameters"]
    last = spec.num_layers - 1
    assert re.search(pattern, f"model.layers.{last}.mlp.up_proj.weight")
    assert re.search(pattern, f"model.layers.{last - 1}.self_attn.q_proj.weight")
    assert not re.search(pattern, f"model.layers.{last - 2}.mlp.up_proj.weight")


@pytest.mark.parametrize(("cfg", "what"), [
    (dict(workload="ppo", prompt_len=128, response_len=128), "PPO"),
    (dict(num_gpus=4, pp=2), "pipeline parallel"),
    (dict(num_gpus=8, tp=2, zero_stage=3), "ZeRO-3"),
    (dict(num_gpus=4, cp=2, zero_stage=2), "context parallel"),
    (dict(optimizer_in_backward=True), "optimizer-in-backward"),
])
def test_axolotl_refusals(cfg, what):
    with pytest.raises(PlannerError, match=what) as exc:
        export_plan(job(**cfg), "axolotl")
    assert "\n" not in str(exc.value) and "export axolotl" in str(exc.value)


# ---------------------------------------------------------------------------------------------
# ms-swift writer
# ---------------------------------------------------------------------------------------------
def test_swift_sft_lora():
    head, flags, env, res = swift(job(method="lora", lora_rank=8, micro_batch_size=2,
                                      grad_accum=16, seq_len=8192))
    assert head == ["swift", "sft"] and env["NPROC_PER_NODE"] == "1"
    assert (flags["tuner_type"], flags["lora_rank"], flags["lora_alpha"]) == ("lora", "8", "16")
    assert flags["target_modules"] == "all-linear" and flags["model"] == "Qwen/Qwen2.5-7B"
    assert (flags["per_device_train_batch_size"], flags["gradient_accumulation_steps"],
            flags["max_length"]) == ("2", "16", "8192")
    assert flags["gradient_checkpointing"] == "true" and flags["bf16"] == "true"
    assert "deepspeed" not in flags and "quant_bits" not in flags
    assert res.filename_suggestion == "launch_swift.sh" and "set -euo pipefail" in res.text


def test_swift_qlora_targets_and_pretrain():
    _, flags, _, _ = swift(job(method="qlora", lora_targets=("q", "k", "v")))
    assert (flags["quant_method"], flags["quant_bits"]) == ("bnb", "4")
    assert flags["target_modules"] == ["q_proj", "k_proj", "v_proj"]
    head, flags, _, _ = swift(job(workload="pretrain", precision="fp16"))
    assert head == ["swift", "pt"] and flags["tuner_type"] == "full"
    assert flags["fp16"] == "true" and flags["torch_dtype"] == "float16" and "bf16" not in flags


@pytest.mark.parametrize(("stage", "offload", "value"), [
    (0, "none", None), (2, "none", "zero2"), (2, "optimizer", "zero2_offload"),
    (3, "optimizer+params", "zero3_offload"), (1, "optimizer", "ds_z1_offload_config.json"),
])
def test_swift_deepspeed_presets(stage, offload, value):
    _, flags, env, res = swift(job(num_gpus=8, zero_stage=stage, offload=offload))
    assert flags.get("deepspeed") == value and env["NPROC_PER_NODE"] == "8"
    if value and value.endswith(".json"):
        assert any("planner export --format deepspeed" in n for n in res.notes)


def test_swift_fsdp():
    _, flags, _, _ = swift(job(num_gpus=8, fsdp=True))
    assert flags["fsdp"] == "fsdp2" and flags["gradient_checkpointing"] == "false"
    _, flags, _, res = swift(job(num_gpus=8, fsdp=True, offload="optimizer+params"))
    fsdp = json.loads(flags["fsdp"])
    assert "offload" in fsdp["fsdp"] and fsdp["fsdp_config"]["fsdp_version"] == 2
    assert fsdp["fsdp_config"]["activation_checkpointing"] is True


def test_swift_multi_node_and_sequence_parallel():
    _, flags, env, res = swift(job(num_gpus=16, num_hosts=2, cp=2, zero_stage=2))
    assert (env["NPROC_PER_NODE"], env["NNODES"]) == ("8", "2")
    assert "NODE_RANK" in env and "MASTER_ADDR" in env
    assert flags["sequence_parallel_size"] == "2"


def test_swift_rlhf():
    head, flags, _, _ = swift(job(workload="dpo", method="lora"))
    assert head == ["swift", "rlhf"] and (flags["rlhf_type"], flags["beta"]) == ("dpo", "0.1")
    _, flags, _, _ = swift(job(workload="rm", method="lora"))
    assert flags["rlhf_type"] == "rm"
    rl = dict(workload="grpo", method="lora", prompt_len=256, response_len=512, rollout_n=8,
              rollout_batch=16)
    _, flags, _, _ = swift(job(num_gpus=4, rollout_tp=2, offload_idle=True, **rl))
    assert (flags["use_vllm"], flags["vllm_mode"], flags["sleep_level"]) == (
        "true", "colocate", "1")
    assert (flags["num_generations"], flags["generation_batch_size"],
            flags["max_completion_length"], flags["max_length"]) == ("8", "128", "512", "256")
    assert flags["offload_model"] == "true" and flags["vllm_tensor_parallel_size"] == "2"
    _, flags, _, _ = swift(job(workload="ppo", method="lora", prompt_len=128, response_len=128,
                               rollout_engine="hf-generate"))
    assert flags["rlhf_type"] == "ppo" and flags["reward_model"] == "$REWARD_MODEL"


@pytest.mark.parametrize(("cfg", "what"), [
    (dict(num_gpus=4, tp=2), "tensor/pipeline parallel"),
    (dict(method="freeze"), "method freeze"),
    (dict(workload="dpo", reference=False), "reference-free DPO"),
    (dict(workload="ppo", prompt_len=128, response_len=128), "PPO with a vllm engine"),
    (dict(num_gpus=2, zero_stage=2, offload="optimizer", optimizer="adamw-8bit"),
     "ZeRO-Offload"),
])
def test_swift_refusals(cfg, what):
    with pytest.raises(PlannerError, match=what) as exc:
        export_plan(job(**cfg), "ms-swift")
    assert "\n" not in str(exc.value)


def test_the_profiles_name_the_formats():
    for fid, fmt in (("axolotl", "axolotl"), ("ms-swift", "ms-swift")):
        profile = resolve(CAT, fid)
        assert profile.value("launch_format") == fmt
        for workload in WRITES_FOR[fmt][1]:
            assert launch_format_of(profile, workload) == fmt


# ---------------------------------------------------------------------------------------------
# CLI: plan --framework ID, then export without --format
# ---------------------------------------------------------------------------------------------
REQUESTS = {
    "lora-1gpu": ["--model", "1.5b", "--method", "lora", "--budget", "3000"],
    "full-fsdp": ["--model", "8b", "--method", "full", "--sharding", "fsdp", "--budget",
                  "50000", "--objective", "time", "--tokens", "1e8"],
    "qlora": ["--model", "8b", "--method", "qlora", "--budget", "3000"],
    "70b-multinode": ["--model", "70b", "--budget", "60000", "--objective", "time",
                      "--tokens", "5e8"],
    "dpo": ["--model", "1.5b", "--workload", "dpo", "--budget", "10000"],
}


def planned(tmp_path, framework: str, name: str) -> tuple[dict, str]:
    """The plan document of REQUESTS[name] on ``framework`` and the text of its export."""
    code, out, err = cli(["plan", *REQUESTS[name], "--framework", framework, "--json"])
    assert code in (None, 0), err
    doc = json.loads(out)
    saved, written = tmp_path / "plan.json", tmp_path / "launch"
    saved.write_text(out)
    code, _, err = cli(["export", "--out", str(written), str(saved)])
    assert code in (None, 0), err
    return doc["plan"], written.read_text()


@pytest.mark.parametrize("name", list(REQUESTS))
def test_cli_exports_axolotl_plans_without_format(tmp_path, name):
    p, text = planned(tmp_path, "axolotl", name)
    c = p["config"]
    assert c["framework"] == "axolotl"
    doc = yaml.safe_load(text)
    assert (doc["micro_batch_size"], doc["gradient_accumulation_steps"], doc["sequence_len"]) \
        == (c["micro_batch_size"], c["grad_accum"], c["seq_len"])
    assert doc.get("lora_r") == (c["lora_rank"] if c["method"] in ("lora", "qlora") else None)
    assert doc.get("load_in_4bit", False) == (c["method"] == "qlora")
    assert doc.get("tensor_parallel_size", 1) == c["tp"]
    assert ("fsdp_config" in doc) >= c["fsdp"] and ("deepspeed" in doc) == bool(c["zero_stage"])
    assert doc.get("rl") == ("dpo" if c["workload"] == "dpo" else None)
    nodes = p["num_hosts"]
    assert (f"--num_machines {nodes}" in text) == (nodes > 1)


@pytest.mark.parametrize("name", list(REQUESTS))
def test_cli_exports_ms_swift_plans_without_format(tmp_path, name):
    p, text = planned(tmp_path, "ms-swift", name)
    c = p["config"]
    head, flags, env = swift_flags(text)
    assert head == ["swift", "rlhf" if c["workload"] == "dpo" else "sft"]
    assert int(env["NPROC_PER_NODE"]) * int(env.get("NNODES", 1)) == p["num_gpus"]
    assert (int(flags["per_device_train_batch_size"]), int(flags["gradient_accumulation_steps"]),
            int(flags["max_length"])) == (c["micro_batch_size"], c["grad_accum"], c["seq_len"])
    assert flags["tuner_type"] == ("full" if c["method"] == "full" else "lora")
    if c["method"] != "full":
        assert int(flags["lora_rank"]) == c["lora_rank"]
    assert ("quant_bits" in flags) == (c["method"] == "qlora")
    assert ("fsdp" in flags) == c["fsdp"]
    assert ("deepspeed" in flags) == (not c["fsdp"] and bool(c["zero_stage"]
                                                             or c["offload"] != "none"))


def test_cli_refusal_is_one_line(tmp_path):
    """A tp plan exported to ms-swift (whose Trainer runs no tensor parallel): exit 2, one
    line naming the framework that does."""
    code, out, _ = cli(["plan", *REQUESTS["70b-multinode"], "--framework", "axolotl", "--json"])
    assert code in (None, 0) and json.loads(out)["plan"]["config"]["tp"] > 1
    saved = tmp_path / "plan.json"
    saved.write_text(out)
    code, _, err = cli(["export", "--format", "ms-swift", str(saved)])
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "ms-swift-megatron" in err


@pytest.mark.parametrize("fmt", ["axolotl", "ms-swift"])
def test_bf16_loading_without_sharding_is_a_warning(fmt):
    """Both load the model in bf16: plain DDP full training keeps no fp32 master copy."""
    warned = export_plan(job(num_gpus=2), fmt).warnings
    assert any("no fp32 master copy" in w for w in warned)
    for quiet in (job(num_gpus=2, zero_stage=2), job(num_gpus=2, pure_bf16=True),
                  job(num_gpus=2, method="lora"), job(num_gpus=2, precision="fp16")):
        assert not any("master" in w for w in export_plan(quiet, fmt).warnings)


def test_separate_rollout_gpus_are_not_trainer_processes():
    """GRPO with a separate vLLM server on 2 of 8 GPUs: the launch starts 6 trainer ranks."""
    j = job(num_gpus=8, workload="grpo", method="lora", prompt_len=128, response_len=128,
            rollout_n=4, rollout_batch=12, placement="separate", rollout_gpus=2)
    doc, res = axolotl(j)
    assert doc["trl"]["vllm_mode"] == "server" and "--num_processes 6" in res.text
    assert any("axolotl vllm-serve" in n for n in res.notes)
    _, flags, env, res = swift(j)
    assert env["NPROC_PER_NODE"] == "6" and flags["vllm_mode"] == "server"
    assert flags["vllm_server_host"] == "$VLLM_HOST"
    assert "# Set before running: DATASET, VLLM_HOST" in res.text


@pytest.mark.parametrize("fmt", ["axolotl", "ms-swift"])
def test_pure_bf16_under_zero_is_a_warning(fmt):
    warned = export_plan(job(num_gpus=4, zero_stage=2, pure_bf16=True), fmt).warnings
    assert any("keep fp32 master copies" in w for w in warned)


def test_swift_warns_of_unsloth_memory_savings():
    warned = export_plan(job(method="lora", offload_checkpoints=True), "ms-swift").warnings
    assert any("Unsloth" in w for w in warned)
    doc, _ = axolotl(job(method="lora", offload_checkpoints=True))
    assert doc["activation_offloading"] is True and doc["gradient_checkpointing"] is True


@pytest.mark.parametrize("fmt", ["axolotl", "ms-swift"])
def test_grpo_generation_batch_is_a_multiple_trl_accepts(fmt):
    """TRL's GRPOConfig: generation_batch_size divisible by micro-batch x ranks and by the
    samples per prompt; the plan's 10 prompts x 3 samples = 30 on 4 ranks of 4 becomes 48."""
    rl = dict(workload="grpo", method="lora", prompt_len=128, response_len=128,
              micro_batch_size=4, rollout_n=3, rollout_batch=10)
    res = export_plan(job(num_gpus=4, **rl), fmt)
    value = (yaml.safe_load(res.text)["trl"]["generation_batch_size"] if fmt == "axolotl"
             else int(swift_flags(res.text)[1]["generation_batch_size"]))
    assert value == 48 and any("not the plan's 30" in w for w in res.warnings)
    with pytest.raises(PlannerError, match="sample per prompt"):
        export_plan(job(num_gpus=4, **{**rl, "rollout_n": 1}), fmt)
