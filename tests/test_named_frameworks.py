"""Profiles for frameworks that users and unseen validation files name and the catalog lacked
(torchforge, verifiers, oat, AutoTrain Advanced, EasyDeL, fairseq2, Modalities): each loads
with a base and facts read from its code at a pinned commit, the names people write resolve to
it, `planner check` predicts a typical job on it with its semantics, and `planner plan`
refuses it in one line where the planner writes no launch of it."""

from __future__ import annotations

import json

import pytest

from planner.catalog.frameworks import efficiency_of, resolve
from planner.catalog.launches import launch_format_of
from planner.catalog.load import load_catalog
from tests.test_cli import run
from tests.test_unseen_frameworks import sourced_profile

CAT = load_catalog()

# profile -> its base
NEW = {"torchforge": "torchtitan", "verifiers": "hf-trainer-liger",
       "oat": "deepspeed", "autotrain": "trl", "easydel": "maxtext",
       "fairseq2": "pytorch-fsdp", "modalities": "pytorch-fsdp"}
JAX: tuple[str, ...] = ("easydel",)


@pytest.mark.parametrize(("fid", "base"), sorted(NEW.items()))
def test_profile_has_its_base_and_a_pinned_source_for_every_fact_it_states(fid, base):
    profile = sourced_profile(fid, base)
    key, why = efficiency_of(profile)
    if fid in JAX:
        assert key is None and "JAX/XLA" in profile.spec.notes
    else:
        assert key is not None and f"inherited from {profile.inherited('efficiency')}" in why


# (profile, fact, value) as read from the framework's code at the commit in its profile
FACTS = [
    ("torchforge", "workloads", ("sft", "grpo")),
    ("torchforge", "methods", ("full",)),
    ("torchforge", "parallelism", ("tp", "ep")),
    ("torchforge", "rl_placements", ("split",)),
    ("torchforge", "rollout_engines", ("vllm",)),
    ("torchforge", "loss", "fp32"),
    ("torchforge", "logprobs", "fp32"),
    ("torchforge", "batch_counts_prompts", False),
    ("torchforge", "sharding", ("ddp", "fsdp2")),  # torchtitan's, inherited
    ("verifiers", "workloads", ("grpo",)),
    ("verifiers", "lora_rank", 8),
    ("verifiers", "rl_placements", ("separate",)),
    ("verifiers", "loss", "16bit"),  # not Liger's fused loss: the logits are taken whole
    ("verifiers", "fused_elementwise", True),  # Liger's kernels, inherited
    ("verifiers", "checkpointing_default", "none"),
    ("verifiers", "batch_counts_prompts", False),
    ("oat", "workloads", ("sft", "dpo", "ppo", "grpo")),
    ("oat", "rl_placements", ("separate", "colocate")),
    ("oat", "rollout_memory_utilization", 0.25),
    ("oat", "loss", "chunked"),
    ("oat", "parallelism", ()),
    ("oat", "off_policy_placement", "separate"),
    ("oat", "sharding", ("none", "ddp", "zero1", "zero2", "zero3")),  # DeepSpeed's, inherited
    ("autotrain", "workloads", ("pretrain", "sft", "rm", "dpo")),
    ("autotrain", "sharding", ("none", "ddp", "zero3")),
    ("autotrain", "offload", ()),
    ("autotrain", "checkpointing_default", "full"),
    ("autotrain", "lora_dropout", 0.05),
    ("autotrain", "nf4_double_quant", False),
    ("autotrain", "logprobs", "16bit"),  # TRL's, inherited
    ("easydel", "workloads", ("pretrain", "sft", "rm", "dpo")),
    ("easydel", "methods", ("full", "lora")),
    ("easydel", "sharding", ("ddp", "fsdp2")),
    ("easydel", "parallelism", ("tp", "ep")),
    ("easydel", "offload", ()),
    ("easydel", "checkpointing_default", "none"),
    ("easydel", "master_weights", "none"),  # from_pretrained's bf16 parameters, no fp32 copy
    ("easydel", "fused_elementwise", True),
    ("easydel", "launch_format", None),
    ("fairseq2", "workloads", ("pretrain", "sft")),
    ("fairseq2", "methods", ("full",)),
    ("fairseq2", "sharding", ("none", "ddp", "fsdp1", "fsdp2")),
    ("fairseq2", "parallelism", ("tp",)),
    ("fairseq2", "checkpointing", ("none", "full")),
    ("fairseq2", "loss", "fp32"),
    ("fairseq2", "grad_reduce_dtype", "fp32"),
    ("fairseq2", "compiled_workloads", ("pretrain",)),
    ("fairseq2", "attention", None),  # per recipe: flash2 pretraining, torch_math SFT
    ("modalities", "workloads", ("pretrain", "sft")),
    ("modalities", "sharding", ("ddp", "fsdp1", "fsdp2")),
    ("modalities", "parallelism", ("tp", "pp")),
    ("modalities", "selective_checkpointing", "op"),
    ("modalities", "loss", "16bit"),
    ("modalities", "grad_reduce_dtype", "16bit"),
    ("modalities", "launch_format", "torchrun"),  # pytorch-fsdp's, inherited; no writer of it
]


@pytest.mark.parametrize(("fid", "fact", "value"), FACTS)
def test_fact_read_from_the_source(fid, fact, value):
    assert resolve(CAT, fid).value(fact) == value, (fid, fact)


RL = ["--prompt-len", "512", "--response-len", "1024"]
# a typical job of each: (profile, model, check arguments)
LAYOUTS = [
    ("torchforge", "qwen3-4b", ["--num-gpus", "8", "--fsdp"]),
    ("torchforge", "qwen3-0.6b", ["--workload", "grpo", "--num-gpus", "6", "--fsdp",
                                "--placement", "split", *RL]),
    ("verifiers", "qwen2.5-1.5b", ["--workload", "grpo", "--method", "lora", "--num-gpus", "8",
                                   "--zero", "3", "--placement", "separate", "--rollout-gpus",
                                   "2", *RL]),
    ("oat", "qwen2.5-1.5b", ["--method", "lora", "--num-gpus", "2", "--zero", "2"]),
    ("oat", "qwen2.5-1.5b", ["--workload", "grpo", "--num-gpus", "8", "--zero", "2",
                             "--placement", "separate", "--rollout-gpus", "4", *RL]),
    ("autotrain", "qwen2.5-1.5b", ["--method", "qlora"]),
    ("autotrain", "qwen2.5-1.5b", ["--num-gpus", "4", "--zero", "3"]),
    ("easydel", "qwen2.5-1.5b", ["--num-gpus", "8", "--fsdp"]),
    ("easydel", "qwen2.5-1.5b", ["--method", "lora"]),
    ("fairseq2", "llama-3.2-1b", ["--num-gpus", "8", "--fsdp", "--no-flash-attention"]),
    ("fairseq2", "llama-3.2-1b", ["--workload", "pretrain", "--num-gpus", "8", "--fsdp",
                                  "--tp", "2"]),
    ("modalities", "qwen2.5-0.5b", ["--num-gpus", "4", "--fsdp"]),
    ("modalities", "qwen2.5-0.5b", ["--workload", "pretrain", "--num-gpus", "8", "--fsdp",
                                    "--pp", "2"]),
]


def test_every_new_profile_has_a_layout_here():
    assert sorted({fid for fid, _, _ in LAYOUTS}) == sorted(NEW)


@pytest.mark.parametrize(("fid", "model", "args"), LAYOUTS)
def test_check_predicts_a_typical_job_with_the_profiles_semantics(capsys, fid, model, args):
    code, out, err = run(capsys, "check", "--model", model, "--gpu", "h100-sxm",
                         "--framework", fid, *args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["framework"]["id"] == fid and doc["framework"]["reason"] == "named"
    assert doc["memory"]["per_gpu_gib"] > 0
    profile = resolve(CAT, fid)
    if profile.value("loss") is not None and "--workload" not in args:
        assert doc["config"]["loss_in_fp32"] == (profile.value("loss") != "16bit")
        assert doc["config"]["chunked_loss"] == (profile.value("loss") == "chunked")


@pytest.mark.parametrize("fid", sorted(NEW))
def test_plan_refuses_them_in_one_line_naming_check(capsys, fid):
    profile = resolve(CAT, fid)
    workload = profile.value("workloads")[0]
    assert launch_format_of(profile, workload) is None
    extra = RL if workload in ("ppo", "grpo") else []
    model = next(m for f, m, _ in LAYOUTS if f == fid)
    code, _, err = run(capsys, "plan", "--model", model, "--workload", workload,
                       "--framework", fid, "--budget", "100000", *extra)
    assert code != 0 and err.count("\n") == 1
    assert "writes no launch" in err and f"planner check --framework {fid}" in err


@pytest.mark.parametrize(("slug", "fid"), [
    ("torchforge", "torchforge"), ("meta-pytorch/torchforge", "torchforge"),
    ("Meta torchforge", "torchforge"), ("PyTorch torchforge", "torchforge"),
    ("torchforge-grpo", "torchforge"), ("torchforge+vllm", "torchforge"),
    ("verifiers", "verifiers"), ("willccbb/verifiers", "verifiers"),
    ("PrimeIntellect-ai/verifiers", "verifiers"), ("verifiers+lora", "verifiers"),
    ("verifiers-rl==0.1.3", "verifiers"),
    ("oat", "oat"), ("sail-sg/oat", "oat"), ("oat+deepspeed", "oat"), ("oat-grpo", "oat"),
    ("AutoTrain Advanced", "autotrain"), ("autotrain", "autotrain"),
    ("Hugging Face AutoTrain", "autotrain"), ("huggingface/autotrain-advanced", "autotrain"),
    ("autotrain-advanced==0.8.36", "autotrain"), ("autotrain+deepspeed", "autotrain"),
    ("EasyDeL", "easydel"), ("erfanzar/EasyDeL", "easydel"), ("easydel==0.2.0", "easydel"),
    ("EasyDeL+LoRA", "easydel"), ("easydel-sft", "easydel"),
    ("fairseq2", "fairseq2"), ("facebookresearch/fairseq2", "fairseq2"),
    ("Meta fairseq2", "fairseq2"), ("fairseq2 v0.5", "fairseq2"), ("fairseq2+fsdp", "fairseq2"),
    ("Modalities", "modalities"), ("Modalities/modalities", "modalities"),
    ("modalities==0.5.0", "modalities"), ("modalities-pretrain", "modalities"),
    # Marin trains through Levanter (an alias, no profile of its own)
    ("Marin", "levanter"), ("marin-community/marin", "levanter"),
])
def test_the_names_people_write_resolve(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize("fid", sorted(NEW))
def test_export_of_a_plan_on_them_refuses_in_one_line(capsys, tmp_path, fid):
    code, out, _ = run(capsys, "plan", "--model", "qwen2.5-0.5b", "--gpus", "h100-sxm",
                       "--framework", "trl", "--budget", "100000", "--json")
    assert code == 0
    doc = json.loads(out)
    doc["plan"]["config"]["framework"] = fid
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    code, _, err = run(capsys, "export", str(path))
    assert code == 2 and err.count("\n") == 1
    assert f"no launch config for framework {fid}" in err
