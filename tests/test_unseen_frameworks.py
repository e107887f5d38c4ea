"""Profiles for training frameworks that published throughput or memory measurements name
and the catalog lacked (issue 18: a case naming a framework without a profile would fall back
to a default one). Each profile loads with sourced facts, `planner check` predicts a typical
layout on it, the spellings those sources use resolve to it, and the JAX/XLA stacks say that
no efficiency of the planner is theirs."""

from __future__ import annotations

import json

import pytest

from planner import TrainConfig
from planner.catalog.frameworks import efficiency_of, resolve, unsupported
from planner.catalog.launches import launch_format_of
from planner.catalog.load import load_catalog
from tests.test_cli import run

CAT = load_catalog()

# profile -> its base (None: no PyTorch stack of the planner is its own)
NEW = {
    "fms-fsdp": "pytorch-fsdp", "picotron": "pytorch-fsdp", "lingua": "pytorch-fsdp",
    "veomni": "pytorch-fsdp", "lmflow": "hf-deepspeed", "internevo": "megatron-lm",
    "arctic-training": "deepspeed", "mindspeed-llm": "megatron-lm",
    "maxtext": None, "levanter": None,
}
JAX = ("maxtext", "levanter")


def sourced_profile(fid: str, base: str | None):
    """The profile ``fid``, checked: its base is ``base``, it states at least three facts of its
    own, each with a pinned source (a commit or a URL), and it names workloads and methods."""
    profile = resolve(CAT, fid)
    assert profile.spec.base == base
    stated = [name for name in profile.facts if profile.inherited(name) is None]
    assert len(stated) >= 3, fid
    for name in stated:
        source = profile.source(name)
        assert "@" in source or "http" in source, (fid, name, source)
    assert profile.value("workloads") and profile.value("methods")
    return profile


@pytest.mark.parametrize(("fid", "base"), sorted(NEW.items()))
def test_profile_loads_with_a_source_for_every_fact_it_states(fid, base):
    sourced_profile(fid, base)


@pytest.mark.parametrize("fid", sorted(set(NEW) - set(JAX)))
def test_pytorch_profiles_inherit_their_efficiency_and_say_so(fid):
    profile = resolve(CAT, fid)
    key, why = efficiency_of(profile)
    assert key is not None and profile.inherited("efficiency") is not None
    assert f"inherited from {profile.inherited('efficiency')}" in why


@pytest.mark.parametrize("fid", JAX)
def test_jax_profiles_state_no_efficiency_and_say_why_in_their_notes(fid):
    profile = resolve(CAT, fid)
    assert efficiency_of(profile)[0] is None
    assert "JAX/XLA" in profile.spec.notes and "preallocates" in profile.spec.notes


@pytest.mark.parametrize("fid", sorted(NEW))
def test_no_launch_is_written_for_them(fid):
    profile = resolve(CAT, fid)
    for workload in profile.value("workloads"):
        assert launch_format_of(profile, workload) is None, (fid, workload)


# (profile, fact, value) as read from the framework's source at the commit in its profile
FACTS = [
    ("fms-fsdp", "sharding", ("ddp", "fsdp1")),
    ("fms-fsdp", "loss", "16bit"),
    ("fms-fsdp", "attention", "sdpa-expanded-kv"),
    ("fms-fsdp", "checkpointing_default", "none"),
    ("picotron", "master_weights", "none"),
    ("picotron", "parallelism", ("tp", "pp", "cp")),
    ("picotron", "checkpointing", ("none",)),
    ("lingua", "selective_checkpointing", "op"),
    ("lingua", "loss", "fp32"),
    ("veomni", "checkpointing_default", "full"),
    ("veomni", "loss", "chunked"),
    ("veomni", "sharding", ("ddp", "fsdp2")),
    ("lmflow", "lora_rank", 8),
    ("lmflow", "methods", ("full", "lora", "qlora")),
    ("internevo", "sharding", ("ddp", "zero1", "fsdp1")),
    ("arctic-training", "parallelism", ("cp", "ep")),
    ("arctic-training", "checkpointing_default", "full"),
    ("mindspeed-llm", "lora_rank", 16),
    ("mindspeed-llm", "workloads", ("pretrain", "sft", "dpo")),
    ("maxtext", "checkpointing_default", "full"),
    ("maxtext", "master_weights", "fp32"),
    ("levanter", "parallelism", ("tp",)),
]


@pytest.mark.parametrize(("fid", "fact", "value"), FACTS)
def test_fact_read_from_the_source(fid, fact, value):
    assert resolve(CAT, fid).value(fact) == value, (fid, fact)


LAYOUTS = [
    ("fms-fsdp", ["--workload", "pretrain", "--num-gpus", "8", "--fsdp",
                  "--checkpointing", "none"]),
    ("picotron", ["--workload", "pretrain", "--num-gpus", "8", "--tp", "2", "--pp", "2",
                  "--checkpointing", "none"]),
    ("lingua", ["--workload", "pretrain", "--num-gpus", "8", "--fsdp", "--checkpointing",
                "none"]),
    ("veomni", ["--num-gpus", "8", "--fsdp"]),
    ("lmflow", ["--method", "lora", "--num-gpus", "2", "--zero", "2"]),
    ("internevo", ["--workload", "pretrain", "--num-gpus", "8", "--tp", "2", "--zero", "1"]),
    ("arctic-training", ["--num-gpus", "8", "--zero", "3"]),
    ("mindspeed-llm", ["--num-gpus", "8", "--tp", "2", "--zero", "1"]),
    ("maxtext", ["--workload", "pretrain", "--num-gpus", "8", "--fsdp"]),
    ("levanter", ["--workload", "pretrain", "--num-gpus", "8", "--fsdp"]),
]


def test_every_new_profile_has_a_layout_here():
    assert sorted(fid for fid, _ in LAYOUTS) == sorted(NEW)


@pytest.mark.parametrize(("fid", "args"), LAYOUTS)
def test_check_predicts_a_typical_layout_of_each(capsys, fid, args):
    code, out, err = run(capsys, "check", "--model", "llama-3.2-1b", "--gpu", "h100-sxm",
                         "--framework", fid, *args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["framework"]["id"] == fid and doc["framework"]["reason"] == "named"
    note = doc["framework"]["efficiency_note"]
    assert ("no measured efficiency" in note) if fid in JAX else ("inherited from" in note)
    assert doc["memory"]["per_gpu_gib"] > 0


@pytest.mark.parametrize("fid", ["fms-fsdp", "maxtext"])
def test_plan_refuses_them_in_one_line_naming_check(capsys, fid):
    code, _, err = run(capsys, "plan", "--model", "7b", "--workload", "pretrain",
                       "--framework", fid, "--budget", "100000")
    assert code != 0 and err.count("\n") == 1
    assert "writes no launch" in err and f"planner check --framework {fid}" in err


@pytest.mark.parametrize(("fid", "config", "missing"), [
    ("fms-fsdp", TrainConfig(num_gpus=8, zero_stage=2), "sharding zero2"),
    ("picotron", TrainConfig(num_gpus=8, fsdp=True), "sharding fsdp"),
    ("lingua", TrainConfig(method="lora"), "method lora"),
    ("mindspeed-llm", TrainConfig(workload="grpo"), "workload grpo"),
])
def test_they_refuse_what_their_framework_cannot_run(fid, config, missing):
    assert any(missing in m for m in unsupported(resolve(CAT, fid), config))


@pytest.mark.parametrize(("slug", "fid"), [
    # spellings of the sources that publish measurements
    ("fms_fsdp", "fms-fsdp"), ("ibm fms", "fms-fsdp"), ("IBM-FMS-FSDP", "fms-fsdp"),
    ("foundation-model-stack/fms-fsdp", "fms-fsdp"), ("Picotron", "picotron"),
    ("Meta Lingua", "lingua"), ("VeOmni", "veomni"), ("ByteDance-Seed/VeOmni", "veomni"),
    ("LMFlow", "lmflow"), ("InternEvo", "internevo"), ("ArcticTraining", "arctic-training"),
    ("arctic_training", "arctic-training"), ("ALST", "arctic-training"),
    ("MindSpeed-LLM", "mindspeed-llm"), ("ModelLink", "mindspeed-llm"),
    ("MaxText", "maxtext"), ("Levanter", "levanter"),
    # the Hugging Face stack as people write it
    ("hf transformers", "hf-trainer"), ("transformers", "hf-trainer"),
    ("huggingface", "hf-trainer"), ("peft", "hf-trainer"), ("HF PEFT", "hf-trainer"),
    ("huggingface transformers", "hf-trainer"), ("SFT Trainer", "trl"),
    ("SFTTrainer", "trl"), ("GRPOTrainer", "trl"), ("hf trl", "trl"),
    # the slug rules apply to them as to the others
    ("fms-fsdp==0.1", "fms-fsdp"), ("veomni+fsdp2", "veomni"), ("lmflow+deepspeed", "lmflow"),
    ("lmflow-lora", "lmflow"), ("mindspeed-llm+megatron", "mindspeed-llm"),
    ("maxtext-sft", "maxtext"), ("arctic-training+deepspeed", "arctic-training"),
])
def test_slugs_resolve(slug, fid):
    assert CAT.framework(slug).id == fid
