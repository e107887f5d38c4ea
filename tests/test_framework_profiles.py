"""Facts read from each framework's source (issue 17, part 1): a later edit of a profile must
not silently flip them. Every value here is stated, with its file and commit, in
catalog/frameworks/<id>.yaml."""

from __future__ import annotations

import pytest

from planner.catalog.frameworks import config_fields, efficiency_of, resolve
from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig

CAT = load_catalog()

# (profile id, fact, value) as read from the framework's source
FACTS = [
    # torchtitan main b5bcd76
    ("torchtitan", "sharding", ("ddp", "fsdp2")),
    ("torchtitan", "parallelism", ("tp", "pp", "cp", "ep")),
    ("torchtitan", "master_weights", "fp32"),
    ("torchtitan", "checkpointing_default", "selective"),
    ("torchtitan", "attention", "flash"),
    ("torchtitan", "loss", "chunked"),
    ("torchtitan", "fsdp_on_one_gpu", True),
    ("torchtitan", "shard_embeddings", True),
    ("torchtitan", "fused_optimizer", True),
    ("torchtitan", "lora_rank", 8),
    # torchtitan v0.2.2 (the last release read from TOML): its job config, launched by torchrun
    ("torchtitan", "launch_format", "torchtitan"),
    # torchtune v0.6.1: recipe YAML launched by tune run
    ("torchtune", "launch_format", "torchtune"),
    # LitGPT v0.5.13: the code default precision is bf16-mixed (fp32 weights and states)
    ("litgpt", "master_weights", "fp32"),
    ("litgpt", "frozen_base_dtype", "fp32"),
    ("litgpt", "attention", "sdpa-expanded-kv"),
    ("litgpt", "loss", "fp32-held-chunked"),
    ("litgpt", "loss_seq_chunk", 128),
    ("litgpt", "holds_previous_outputs", True),
    ("litgpt", "nf4_double_quant", False),
    ("litgpt", "sharding", ("none", "fsdp1", "fsdp2")),
    ("litgpt", "fsdp_on_one_gpu", False),
    ("litgpt", "shard_embeddings", False),
    ("litgpt", "lora_rank", 8),
    ("litgpt", "lora_targets", ("q", "v")),
    ("litgpt", "offload", ()),
    # Accelerate v1.14.0 FSDP (the Trainer's --fsdp and plain Accelerate loops)
    ("accelerate-fsdp", "sharding", ("fsdp1", "fsdp2")),
    ("accelerate-fsdp", "master_weights", "fp32"),
    ("accelerate-fsdp", "frozen_base_dtype", "16bit"),
    ("accelerate-fsdp", "launch_format", "accelerate"),
    ("accelerate-fsdp", "parallelism", ("tp", "cp")),
    # Axolotl v0.18.0
    ("axolotl", "launch_format", "axolotl"),
    ("axolotl", "workloads", ("pretrain", "sft", "rm", "dpo", "grpo")),
    ("axolotl", "parallelism", ("tp", "cp")),
    ("axolotl", "logprobs", "16bit"),
    ("axolotl", "checkpointing_default", "full"),
    ("axolotl", "lora_targets", ("all-linear",)),
    # ms-swift v4.5.2
    ("ms-swift", "checkpointing_default", "full"),
    ("ms-swift", "lora_rank", 8),
    ("ms-swift", "lora_targets", ("all-linear",)),
    ("ms-swift", "logprobs", "16bit"),
    ("ms-swift", "launch_format", "ms-swift"),
    ("ms-swift", "parallelism", ("cp",)),
    # Megatron-SWIFT (ms-swift v4.5.2, Megatron-Core backend)
    ("ms-swift-megatron", "checkpointing_default", "selective"),
    ("ms-swift-megatron", "methods", ("full", "lora", "freeze")),
    ("ms-swift-megatron", "master_weights", "fp32"),
    ("ms-swift-megatron", "parallelism", ("tp", "pp", "cp", "ep")),
    # llm-foundry 8c8dd48 (Composer)
    ("llm-foundry", "sharding", ("ddp", "fsdp1")),
    ("llm-foundry", "master_weights", "fp32"),
    ("llm-foundry", "attention", "flash"),
    ("llm-foundry", "loss", "16bit"),
    ("llm-foundry", "fsdp_on_one_gpu", False),
    ("llm-foundry", "parallelism", ()),
    # Megatron-Bridge v0.6.0
    ("megatron-bridge", "methods", ("full", "lora", "dora")),
    ("megatron-bridge", "lora_rank", 32),
    ("megatron-bridge", "lora_targets", ("all-linear",)),
    ("megatron-bridge", "checkpointing_default", "none"),
    ("megatron-bridge", "sharding", ("ddp", "megatron")),
    # NeMo AutoModel v0.5.0: no fp32 master weights yet
    ("nemo-automodel", "master_weights", "none"),
    ("nemo-automodel", "loss", "fp32"),
    ("nemo-automodel", "sharding", ("ddp", "fsdp2")),
    ("nemo-automodel", "lora_rank", 8),
    # checked profiles
    ("unsloth", "checkpointing_default", "full"),
    ("unsloth", "sharding", ("none", "ddp")),
    ("unsloth", "lora_rank", 16),
    ("openrlhf", "logprobs", "fp32"),
    ("openrlhf", "attention", "flash"),
    ("openrlhf", "parallelism", ("tp", "cp")),
    ("openrlhf", "idle_offload", False),
    ("nemo-rl", "sharding", ("fsdp2", "megatron")),
    ("nemo-rl", "logprobs", "fp32"),
    ("nemo-rl", "master_weights", "fp32"),
    ("nemo-rl", "engine_outside_torch", True),
    ("nemo-rl", "idle_offload", True),
    ("verl", "rl_placements", ("colocate", "split")),
    ("verl", "attention", "flash"),
    ("verl", "master_weights", "fp32"),
    ("lit-llama", "pure_16bit_methods", ("lora",)),
    ("lit-llama", "lora_targets", ("q", "v")),
]


@pytest.mark.parametrize(("fid", "fact", "value"), FACTS)
def test_fact_read_from_the_source(fid, fact, value):
    profile = resolve(CAT, fid)
    assert profile.value(fact) == value, (fid, fact)
    assert profile.source(fact), (fid, fact)


NEW = ["torchtitan", "litgpt", "accelerate-fsdp", "axolotl", "ms-swift", "ms-swift-megatron",
       "llm-foundry", "megatron-bridge", "nemo-automodel", "lit-llama"]
# frameworks with measured rows in validation/project_cases*.yaml, pooled in their stack's fit
MEASURED = {"torchtitan", "accelerate-fsdp", "ms-swift", "llm-foundry"}


@pytest.mark.parametrize("fid", NEW)
def test_new_profiles_cite_a_commit_and_inherit_their_efficiency(fid):
    profile = resolve(CAT, fid)
    spec = profile.spec
    assert spec.base is not None
    # every fact the profile states itself names the file it was read from
    for name in profile.facts:
        if profile.inherited(name) is None:
            assert "@" in profile.source(name) or "http" in profile.source(name), (fid, name)
    key, why = efficiency_of(profile)
    if fid in MEASURED:
        # rows of their own sit in their stack's pool: stated with the source of those rows
        assert profile.inherited("efficiency") is None and "of its rows" in why
    else:
        # no measured case of these frameworks: the efficiency is the base's, and said so
        assert profile.inherited("efficiency") is not None
        assert key is not None and "inherited from" in why


@pytest.mark.parametrize(("alias", "fid"), [
    ("axolotl", "axolotl"), ("swift", "ms-swift"), ("ms-swift", "ms-swift"),
    ("litgpt", "litgpt"), ("lit-gpt", "litgpt"), ("torchtitan", "torchtitan"),
    ("llm-foundry", "llm-foundry"), ("composer", "llm-foundry"),
    ("megatron-bridge", "megatron-bridge"), ("megatron-core", "megatron-lm"),
    ("hf-fsdp", "accelerate-fsdp"), ("transformers+fsdp", "accelerate-fsdp"),
    ("automodel", "nemo-automodel"), ("megatron-swift", "ms-swift-megatron"),
    ("lit-llama", "lit-llama"), ("Lightning-AI/lit-llama", "lit-llama"),
])
def test_names_a_user_or_a_data_file_may_write(alias, fid):
    assert resolve(CAT, alias).id == fid


def test_memory_semantics_reach_the_train_config():
    litgpt = config_fields(resolve(CAT, "litgpt"), workload="sft", sharded=True)
    assert litgpt["expand_kv_heads"] and litgpt["chunked_loss"] and not litgpt["pure_bf16"]
    titan = config_fields(resolve(CAT, "torchtitan"), workload="pretrain", sharded=True)
    assert titan["shard_embeddings"] and titan["fused_optimizer"] and not titan["pure_bf16"]
    automodel = config_fields(resolve(CAT, "nemo-automodel"), workload="sft", sharded=True)
    assert automodel["pure_bf16"] and automodel["loss_in_fp32"]
    fsdp = config_fields(resolve(CAT, "accelerate-fsdp"), workload="sft", sharded=True)
    assert not fsdp["pure_bf16"] and not fsdp["fp32_trained_weights"]
    openrlhf = config_fields(resolve(CAT, "openrlhf"), workload="grpo", sharded=True)
    assert openrlhf["loss_in_fp32"]


def test_prime_rl_sft_loss_holds_fp32_logits_while_rl_fuses_the_head():
    # prime-rl@d8f290ef: the SFT trainer rejects the fused head and keeps out["logits"] (fp32)
    # referenced through backward; the RL trainer computes log-probs over vocabulary slices
    profile = resolve(CAT, "prime-rl")
    sft = config_fields(profile, workload="sft", sharded=True)
    assert sft["loss_holds_logits"] and sft["loss_in_fp32"]
    assert sft["lm_head_vocab_chunk"] is None and not sft["chunked_loss"]
    rl = config_fields(profile, workload="grpo", sharded=True)
    assert not rl["loss_holds_logits"] and rl["lm_head_vocab_chunk"] == 2048
    hf = config_fields(resolve(CAT, "hf-trainer"), workload="sft", sharded=True)
    assert not hf["loss_holds_logits"]


@pytest.mark.parametrize("fid, fp32_scores", [
    ("torchtitan", True), ("torchforge", True), ("prime-rl", True),
    ("hf-trainer", False), ("verl", False), ("megatron-lm", False)])
def test_torchtitans_moe_layer_reaches_the_working_set(fid, fp32_scores):
    """torchtitan's MoE layer (and prime-rl's copy, and torchforge through its base) multiplies
    the routing scores in fp32 over every routed token: the planned MoE model's backward working
    set grows by 12 x k x h bytes per token less its f-wide gradients; other stacks keep it."""
    from planner.models import memory as mem
    from planner.models.moe_activations import score_grad_bytes_per_token

    fields = config_fields(resolve(CAT, fid), workload="sft", sharded=True)
    assert fields.get("moe_fp32_scores", False) is fp32_scores
    model = CAT.model("qwen3-30b-a3b").spec
    cfg = TrainConfig(seq_len=4096, checkpointing="full", **fields)
    k, h = model.moe.experts_per_token, model.hidden_size
    assert score_grad_bytes_per_token(model, cfg) == (12 * k * h if fp32_scores else 0)
    above = (mem.backward_working_set_bytes_per_token(model, cfg)
             - mem.layer_activation_bytes_per_token(model, cfg))
    assert (above == 12 * k * h) is fp32_scores
