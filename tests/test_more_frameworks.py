"""Profiles for widely used training software the catalog lacked (issue 17, part 1), and the
forgiving slug lookup a user's case file goes through (catalog/slugs.py): every new profile
resolves with sourced facts and an inherited efficiency, `planner check` runs a typical layout
on each, and each documented slug rule maps the names people write to the profile meant."""

from __future__ import annotations

import json
import re

import pytest

from planner import TrainConfig, check
from planner.catalog.frameworks import efficiency_of, resolve, unsupported
from planner.catalog.load import load_catalog
from planner.catalog.slugs import normalise, split_version
from planner.errors import UnknownNameError
from planner.validation.case_inputs import case_profile
from tests.test_cli import run

CAT = load_catalog()

# new profile -> the base it states (the nearest existing framework it runs on)
NEW = {
    "colossalai": "deepspeed", "nanotron": "megatron-lm", "megatron-deepspeed": "deepspeed",
    "gpt-neox": "megatron-deepspeed", "olmo-core": "pytorch-fsdp",
    "open-instruct": "hf-deepspeed", "hf-trainer-liger": "hf-trainer",
    "nanochat": "pytorch-fsdp", "nanogpt": "pytorch-fsdp", "slime": "megatron-lm",
    "roll": "megatron-lm", "areal": "pytorch-fsdp", "skyrl": "pytorch-fsdp",
    "xtuner": "hf-deepspeed", "oumi": "trl", "alignment-handbook": "trl",
    "nemo-aligner": "nemo", "pytorch-lightning": "pytorch-fsdp",
    "h2o-llmstudio": "hf-trainer",
    # issue 18: forks and recipes built on a profiled framework, each read at its own commit
    "easyr1": "verl", "simplerl-reason": "verl", "openrlhf-m": "openrlhf",
    "open-reasoner-zero": "openrlhf", "safe-rlhf": "deepspeed", "trlx": "hf-deepspeed",
    "megatron-llama": "megatron-lm", "longlora": "hf-deepspeed",
}


@pytest.mark.parametrize(("fid", "base"), sorted(NEW.items()))
def test_new_profile_sources_every_fact_and_inherits_its_efficiency(fid, base):
    profile = resolve(CAT, fid)
    assert profile.spec.base == base
    stated = [name for name in profile.facts if profile.inherited(name) is None]
    assert stated, fid  # a profile that only renames its base would be an alias
    for name in stated:
        source = profile.source(name)
        assert "@" in source or "http" in source, (fid, name, source)
    # no measured case of these frameworks: the efficiency is a base's, and said so
    assert profile.inherited("efficiency") is not None
    key, why = efficiency_of(profile)
    assert key is not None and f"inherited from {profile.inherited('efficiency')}" in why


# (profile, fact, value) as read from the framework's source at the commit in its profile
FACTS = [
    ("colossalai", "sharding", ("none", "ddp", "zero1", "zero2", "zero3", "fsdp1")),
    ("colossalai", "parallelism", ("tp", "pp", "cp", "ep")),
    ("colossalai", "rollout_engine_default", "hf-generate"),
    ("colossalai", "logprobs", "16bit"),
    ("colossalai", "master_weights", None),  # DeepSpeed-style fp32 master: not restated
    ("nanotron", "sharding", ("ddp", "zero1")),
    ("nanotron", "loss", "fp32"),
    ("nanotron", "methods", ("full",)),
    ("megatron-deepspeed", "launch_format", "deepspeed"),
    ("megatron-deepspeed", "selective_checkpointing", "core-attention"),
    ("gpt-neox", "parallelism", ("tp", "pp")),
    ("gpt-neox", "launch_format", "deepspeed"),
    ("olmo-core", "sharding", ("ddp", "fsdp2")),
    ("olmo-core", "selective_checkpointing", "op"),
    ("olmo-core", "shard_embeddings", True),
    ("open-instruct", "lora_rank", 64),
    ("open-instruct", "launch_format", "accelerate"),
    ("open-instruct", "rollout_engines", ("vllm",)),
    ("hf-trainer-liger", "loss", "linear-fused"),
    ("hf-trainer-liger", "lora_rank", 8),  # the Trainer's own PEFT default, inherited
    ("nanochat", "sharding", ("none", "zero2")),
    ("nanochat", "master_weights", "fp32"),
    ("nanogpt", "sharding", ("none", "ddp")),
    ("nanogpt", "loss", "fp32-under-autocast"),
    ("slime", "rollout_engines", ("sglang",)),
    ("slime", "rl_placements", ("separate", "colocate")),
    ("roll", "rollout_engine_default", "vllm"),
    ("roll", "sharding", ("ddp", "megatron", "fsdp2")),
    ("areal", "rollout_engine_default", "sglang"),
    ("areal", "lora_rank", 32),
    ("skyrl", "checkpointing_default", "full"),
    ("skyrl", "idle_offload", True),
    ("skyrl", "rollout_memory_utilization", 0.8),
    ("skyrl", "batch_counts_prompts", True),
    ("skyrl", "off_policy_placement", "separate"),
    ("open-instruct", "rollout_memory_utilization", 0.9),
    ("open-instruct", "batch_counts_prompts", True),
    ("slime", "batch_counts_prompts", False),  # its global batch counts samples
    ("slime", "off_policy_placement", "separate"),
    ("roll", "batch_counts_prompts", True),
    ("areal", "off_policy_placement", "separate"),
    ("xtuner", "lora_rank", 64),
    ("xtuner", "checkpointing_default", "full"),
    ("oumi", "lora_rank", 8),
    ("oumi", "logprobs", "16bit"),  # TRL's, inherited
    ("alignment-handbook", "lora_rank", 128),
    ("alignment-handbook", "launch_format", "accelerate"),
    ("nemo-aligner", "rollout_engines", ("megatron",)),
    ("nemo-aligner", "workloads", ("sft", "rm", "dpo", "ppo")),
    ("h2o-llmstudio", "lora_rank", 4),
    ("h2o-llmstudio", "sharding", ("none", "ddp", "zero2", "zero3")),
    ("pytorch-lightning", "sharding",
     ("none", "ddp", "zero1", "zero2", "zero3", "fsdp1", "fsdp2")),
    ("easyr1", "rollout_memory_utilization", 0.6),
    ("easyr1", "sharding", ("fsdp1",)),
    ("easyr1", "frozen_base_dtype", "16bit"),
    ("simplerl-reason", "rollout_enforce_eager", True),
    ("simplerl-reason", "engine_outside_torch", False),  # vLLM 0.6.3: no sleep mode
    ("openrlhf-m", "rollout_memory_utilization", 0.9),
    ("openrlhf-m", "parallelism", ("cp",)),
    ("open-reasoner-zero", "rollout_enforce_eager", True),
    ("open-reasoner-zero", "logprobs", "16bit"),
    ("safe-rlhf", "rollout_engines", ("hf-generate",)),
    ("safe-rlhf", "methods", ("full",)),
    ("trlx", "checkpointing", ("none",)),
    ("trlx", "methods", ("full", "lora", "freeze")),
    ("megatron-llama", "loss", "16bit"),
    ("megatron-llama", "parallelism", ("tp", "pp")),
    ("longlora", "lora_targets", ("q", "k", "v", "o")),
    ("longlora", "attention", "sdpa-expanded-kv"),
]


@pytest.mark.parametrize(("fid", "fact", "value"), FACTS)
def test_fact_read_from_the_source(fid, fact, value):
    assert resolve(CAT, fid).value(fact) == value, (fid, fact)


def test_liger_profile_holds_less_loss_memory_than_the_plain_trainer():
    kw = dict(model="llama-3.1-8b", gpu="h100-sxm", catalog=CAT)
    plain = check(**kw, config=TrainConfig(framework="hf-trainer", method="lora", seq_len=8192))
    liger = check(**kw, config=TrainConfig(framework="liger", method="lora", seq_len=8192))
    assert liger["config"]["loss_linear_fused"] and not plain["config"]["loss_linear_fused"]
    assert liger["memory"]["per_gpu_gib"] < plain["memory"]["per_gpu_gib"]


# a typical layout of each new profile: (profile, check arguments)
RL = ["--prompt-len", "512", "--response-len", "1024"]
LAYOUTS = [
    ("colossalai", ["--num-gpus", "8", "--zero", "2", "--method", "lora"]),
    ("nanotron", ["--workload", "pretrain", "--num-gpus", "8", "--tp", "2", "--pp", "2",
                  "--zero", "1"]),
    ("megatron-deepspeed", ["--workload", "pretrain", "--num-gpus", "8", "--tp", "2",
                            "--pp", "2", "--zero", "1"]),
    ("gpt-neox", ["--workload", "pretrain", "--num-gpus", "8", "--tp", "2", "--zero", "1"]),
    ("olmo-core", ["--workload", "pretrain", "--num-gpus", "8", "--fsdp"]),
    ("open-instruct", ["--num-gpus", "8", "--zero", "3"]),
    ("hf-trainer-liger", ["--method", "lora"]),
    # nanochat and nanoGPT have no activation checkpointing (check's default is full)
    ("nanochat", ["--workload", "pretrain", "--num-gpus", "8", "--zero", "2",
                  "--checkpointing", "none"]),
    ("nanogpt", ["--workload", "pretrain", "--num-gpus", "8", "--checkpointing", "none"]),
    ("slime", ["--workload", "grpo", "--num-gpus", "8", "--placement", "colocate", *RL]),
    ("roll", ["--workload", "grpo", "--num-gpus", "8", *RL]),
    ("areal", ["--workload", "grpo", "--num-gpus", "8", "--fsdp", "--placement", "separate",
               "--rollout-gpus", "4", *RL]),
    ("skyrl", ["--workload", "grpo", "--num-gpus", "8", "--fsdp", *RL]),
    ("xtuner", ["--method", "qlora"]),
    ("oumi", ["--num-gpus", "2", "--fsdp", "--method", "lora"]),
    ("alignment-handbook", ["--workload", "dpo", "--num-gpus", "8", "--zero", "3"]),
    ("nemo-aligner", ["--num-gpus", "8", "--tp", "2"]),
    ("pytorch-lightning", ["--num-gpus", "8", "--zero", "2"]),
    ("h2o-llmstudio", ["--method", "qlora", "--num-gpus", "2"]),
    ("easyr1", ["--workload", "grpo", "--num-gpus", "8", "--fsdp", *RL]),
    ("simplerl-reason", ["--workload", "grpo", "--num-gpus", "8", "--fsdp", *RL]),
    ("openrlhf-m", ["--workload", "grpo", "--num-gpus", "8", "--zero", "3", *RL]),
    ("open-reasoner-zero", ["--workload", "ppo", "--num-gpus", "8", "--zero", "3", *RL]),
    ("safe-rlhf", ["--workload", "ppo", "--num-gpus", "8", "--zero", "3", *RL]),
    # trlx has no activation checkpointing (check's default is full)
    ("trlx", ["--workload", "ppo", "--num-gpus", "8", "--zero", "2", "--checkpointing", "none",
              "--reward-function", *RL]),
    ("megatron-llama", ["--workload", "pretrain", "--num-gpus", "8", "--tp", "2", "--pp", "2"]),
    ("longlora", ["--method", "lora", "--num-gpus", "8", "--zero", "2"]),
]


def test_every_new_profile_has_a_layout_here():
    assert sorted(fid for fid, _ in LAYOUTS) == sorted(NEW)


@pytest.mark.parametrize(("fid", "args"), LAYOUTS)
def test_check_runs_a_typical_layout_of_each_new_profile(capsys, fid, args):
    code, out, err = run(capsys, "check", "--model", "llama-3.2-1b", "--gpu", "h100-sxm",
                         "--framework", fid, *args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["framework"]["id"] == fid and doc["framework"]["reason"] == "named"
    assert "inherited from" in doc["framework"]["efficiency_note"]
    assert doc["memory"]["per_gpu_gib"] > 0


@pytest.mark.parametrize(("fid", "config", "missing"), [
    ("nanogpt", TrainConfig(num_gpus=8, zero_stage=3), "sharding zero3"),
    ("nanotron", TrainConfig(method="lora"), "method lora"),
    ("slime", TrainConfig(workload="grpo", rollout_engine="vllm"), "rollout engine vllm"),
    ("gpt-neox", TrainConfig(num_gpus=8, fsdp=True), "sharding fsdp"),
    ("easyr1", TrainConfig(workload="sft"), "workload sft"),
    ("simplerl-reason", TrainConfig(workload="grpo", method="lora"), "method lora"),
    ("safe-rlhf", TrainConfig(method="lora"), "method lora"),
    ("megatron-llama", TrainConfig(workload="sft"), "workload sft"),
])
def test_new_profiles_refuse_what_their_framework_cannot_run(fid, config, missing):
    assert any(missing in m for m in unsupported(resolve(CAT, fid), config))


def test_catalog_frameworks_lists_the_new_profiles(capsys):
    code, out, _ = run(capsys, "catalog", "frameworks", "--json")
    assert code == 0
    listed = json.dumps(json.loads(out))
    for fid in NEW:
        assert f'"{fid}"' in listed, fid


# --- slug rules (catalog/slugs.py) ---------------------------------------------------------
@pytest.mark.parametrize(("slug", "fid"), [
    ("HF_Trainer", "hf-trainer"), ("hf trainer", "hf-trainer"), ("  Megatron_LM ", "megatron-lm"),
    ("Colossal_AI", "colossalai"), ("GPT NeoX", "gpt-neox"), ("trl + peft", "trl"),
    ("nemo__aligner", "nemo-aligner"), ("DeepSpeed ZeRO-3", "deepspeed"),
    ("deepspeed-zero-2", "deepspeed"), ("transformers + DeepSpeed ZeRO-3", "hf-deepspeed"),
    ("NeMo 2.0", "nemo"), ("nemo-2", "nemo"), ("UnslothAI", "unsloth"),
])
def test_rule_1_case_underscores_and_spaces_do_not_matter(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize(("slug", "fid", "version"), [
    ("verl==0.4.1", "verl", "0.4.1"), ("verl=0.4.1", "verl", "0.4.1"),
    ("trl 0.19", "trl", "0.19"), ("TRL v0.19.1", "trl", "0.19.1"),
    ("deepspeed@0.15", "deepspeed", "0.15"), ("torchtune@bd2a0fc", "torchtune", "bd2a0fc"),
    ("colossalai==0.4.9", "colossalai", "0.4.9"), ("verl", "verl", None),
])
def test_rule_2_a_trailing_version_is_stripped_and_kept(slug, fid, version):
    found = CAT.framework_match(slug)
    assert (found.spec.id, found.version) == (fid, version)


@pytest.mark.parametrize(("slug", "fid"), [
    ("PrimeRL", "prime-rl"), ("NeMoRL", "nemo-rl"), ("MegatronLM", "megatron-lm"),
    ("volcengine/verl", "verl"), ("OpenRLHF/OpenRLHF", "openrlhf"),
    ("DeepSpeedChat", "deepspeed-chat"),
    ("HuggingFace", "hf-trainer"), ("huggingface+deepspeed", "hf-deepspeed"),
    ("microsoft/DeepSpeed==0.15.4", "deepspeed"),
    # plain PyTorch loops and other common names
    ("fsdp2", "pytorch-fsdp"), ("DDP", "pytorch-fsdp"), ("torchrun", "pytorch-fsdp"),
    ("nemo2", "nemo"), ("NeMo 2.0", "nemo"), ("mcore", "megatron-lm"),
    ("huggingface-trainer", "hf-trainer"),
    # forks and recipes (issue 18), as their READMEs and repositories spell them
    ("EasyR1", "easyr1"), ("hiyouga/EasyR1", "easyr1"), ("SimpleRL-Zoo", "simplerl-reason"),
    ("hkust-nlp/simpleRL-reason", "simplerl-reason"), ("OpenRLHF-M", "openrlhf-m"),
    ("OpenRLHF/OpenRLHF-M", "openrlhf-m"), ("ORZ", "open-reasoner-zero"),
    ("Open-Reasoner-Zero", "open-reasoner-zero"), ("Safe-RLHF", "safe-rlhf"),
    ("PKU-Alignment/safe-rlhf", "safe-rlhf"), ("beaver", "safe-rlhf"), ("trlX", "trlx"),
    ("CarperAI/trlx", "trlx"), ("Megatron-LLaMA", "megatron-llama"),
    ("alibaba/Megatron-LLaMA", "megatron-llama"), ("LongLoRA", "longlora"),
    ("dvlab-research/LongLoRA", "longlora"), ("HybridFlow", "verl"),
])
def test_aliases_added_for_common_names_and_repositories(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize(("slug", "fid"), [
    ("trl-deepspeed", "hf-deepspeed"), ("HF_Trainer-DeepSpeed", "hf-deepspeed"),
    ("accelerate-deepspeed", "hf-deepspeed"), ("torchtune-lora", "torchtune"),
    ("transformers-peft", "hf-trainer"), ("deepspeed-zero3", "deepspeed"),
    ("colossalai-zero2", "colossalai"), ("verl-megatron", "verl"),
    ("verl-grpo", "verl"), ("verl+grpo", "verl"), ("OpenRLHF-PPO==0.8", "openrlhf"),
    ("trl-grpo+deepspeed", "hf-deepspeed"), ("prime-rl-sft", "prime-rl"),
    # ids that end in such words stay themselves
    ("megatron-deepspeed", "megatron-deepspeed"), ("ms-swift-megatron", "ms-swift-megatron"),
    ("hf-deepspeed", "hf-deepspeed"), ("accelerate-fsdp", "accelerate-fsdp"),
])
def test_rule_6_trailing_backend_and_workload_words(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize("slug", ["sft", "grpo+sft", "lora", "torchtunes-lora"])
def test_rule_6_words_alone_name_no_framework(slug):
    with pytest.raises(UnknownNameError, match=f"unknown framework '{re.escape(slug)}'"):
        CAT.framework(slug)


def test_rule_2_leaves_names_that_end_in_digits_alone():
    assert split_version("fsdp2") == ("fsdp2", None)
    assert split_version("qwen finetune") == ("qwen finetune", None)
    assert normalise("Qwen_Finetune") == "qwen-finetune"


@pytest.mark.parametrize(("slug", "fid"), [
    # an alias N+B of a name N of X's profile
    ("hf+deepspeed", "hf-deepspeed"), ("hf-trainer+deepspeed", "hf-deepspeed"),
    ("accelerate+fsdp2", "accelerate-fsdp"), ("deepspeed+trl", "hf-deepspeed"),
    ("trl+peft+deepspeed", "hf-deepspeed"), ("megatron+deepspeed", "megatron-deepspeed"),
    # X itself where it runs the backend
    ("llama-factory+deepspeed", "llama-factory"), ("axolotl+fsdp", "axolotl"),
    ("unsloth+peft", "unsloth"), ("verl+fsdp", "verl"), ("openrlhf+deepspeed", "openrlhf"),
    ("colossalai+lora", "colossalai"), ("alignment-handbook+deepspeed", "alignment-handbook"),
    ("XTuner + DeepSpeed==0.15", "xtuner"), ("torchtune+qlora", "torchtune"),
    ("verl+megatron", "verl"), ("megatron-lm+deepspeed", "megatron-deepspeed"),
    # a rollout engine the framework offers
    ("verl+vllm", "verl"), ("slime+sglang", "slime"), ("openrlhf+vllm", "openrlhf"),
    ("verl+sglang+fsdp", "verl"),
    # rule 5: of two frameworks, the one deriving from the other
    ("llama-factory+transformers", "llama-factory"),
    ("Transformers+LLaMA-Factory", "llama-factory"),
    ("nemo-rl+megatron-core", "nemo-rl"), ("gpt-neox+deepspeed", "gpt-neox"),
    ("unsloth+trl", "unsloth"),  # an alias: Unsloth runs TRL's trainers
])
def test_rule_4_combined_slugs_resolve_to_the_profile_running_x_on_b(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize(("slug", "needle"), [
    ("unsloth+deepspeed", "unsloth does not run on deepspeed (its sharding: none, ddp)"),
    ("nanotron+peft", "nanotron does not run on peft (its methods: full)"),
    ("nanogpt+fsdp", "nanogpt does not run on fsdp"),
    ("openrlhf+sglang", "openrlhf does not run on sglang (its rollout_engines: vllm)"),
    ("torchtune+megatron", "torchtune does not run on megatron"),
])
def test_rule_4_a_backend_the_framework_lacks_is_an_error_not_a_fallback(slug, needle):
    with pytest.raises(UnknownNameError) as err:
        CAT.framework(slug)
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("slug", "nearest"), [
    ("colosal", "colossalai"), ("nanotorn", "nanotron"), ("torchtunes", "torchtune"),
    ("skyrll==0.2", "skyrl"), ("foo+deepspeed", None), ("flashinfer", None),
    ("verl+openrlhf", None),  # two frameworks, neither derived from the other
])  # an inference engine (tensorrt-llm) is refused as one: test_framework_names.py, rule 10
def test_an_unknown_slug_is_one_line_naming_the_nearest_ids(capsys, slug, nearest):
    with pytest.raises(UnknownNameError) as err:
        CAT.framework(slug)
    text = str(err.value)
    assert text.startswith(f"unknown framework {slug!r}") and "\n" not in text
    if nearest:
        assert f"(did you mean: {nearest}" in text
    code, _, out = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--framework", slug)
    assert code == 2 and out.count("\n") == 1 and "unknown framework" in out


def test_a_case_file_slug_goes_through_the_same_rules():
    case = {"framework": "OpenRLHF==0.8.5"}
    assert case_profile(case, CAT).id == "openrlhf"
    assert case_profile({"framework": "colossalai+deepspeed"}, CAT).id == "colossalai"


def test_the_version_a_name_carries_is_kept_in_the_output(capsys):
    code, out, _ = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--method", "lora",
                       "--framework", "TorchTune==0.3", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["config"]["framework"] == "torchtune"
    assert doc["framework"]["id"] == "torchtune" and doc["framework"]["requested_version"] == "0.3"
    code, out, _ = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--method", "lora",
                       "--framework", "torchtune", "--json")
    assert code == 0 and "requested_version" not in json.loads(out)["framework"]


def test_case_framework_spellings_take_the_same_stack():
    """A user's case file may spell a framework or serving stack its own way: the validation
    reader reads it as the catalog's lookup does (case, '_' vs '-')."""
    from planner.validation.throughput_cases import stack_of

    for spelled, canonical in (("TensorRT_LLM", "tensorrt-llm"), ("vLLM", "vllm"),
                               ("TorchTune", "torchtune"), ("LLaMA-Factory", "llama-factory")):
        workload = "decode" if canonical in ("tensorrt-llm", "vllm") else "sft"
        assert stack_of({"framework": spelled, "workload": workload}) == \
            stack_of({"framework": canonical, "workload": workload})
