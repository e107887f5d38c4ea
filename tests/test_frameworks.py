"""Framework profiles: the schema, inheritance, lookups, and what the validation reader takes
from them."""

from __future__ import annotations

import pytest
import yaml

from planner.catalog.frameworks import DEFAULT_FRAMEWORK, config_fields, efficiency_of, resolve
from planner.catalog.load import load_catalog
from planner.catalog.specs import FrameworkFacts, FrameworkSpec
from planner.errors import CatalogError, PlannerError
from planner.validation.case_inputs import case_config, rl_case
from planner.validation.validate import predict_case

CAT = load_catalog()


def test_every_profile_states_its_facts_with_sources_and_resolves():
    assert len(CAT.frameworks) >= 15
    for fid in CAT.frameworks:
        profile = resolve(CAT, fid)
        assert profile.facts, fid
        for name, fact in profile.facts.items():
            assert fact.source.strip(), (fid, name)
            assert profile.origin[name] in CAT.frameworks
    for workload, fid in DEFAULT_FRAMEWORK.items():
        assert workload in resolve(CAT, fid).value("workloads"), (workload, fid)


def test_a_profile_inherits_from_its_base_and_overrides():
    trl = resolve(CAT, "trl")
    assert trl.value("logprobs") == "16bit" and trl.inherited("logprobs") is None
    assert trl.value("loss") == "fp32" and trl.inherited("loss") == "hf-trainer"
    key, why = efficiency_of(trl)  # TRL's own rows sit in the hf pool: stated, not inherited
    assert key == "hf" and trl.inherited("efficiency") is None and "TRL SFTTrainer" in why
    axolotl = resolve(CAT, "axolotl")
    key, why = efficiency_of(axolotl)
    assert key == "hf" and "inherited from hf-trainer" in why
    # a JAX framework states no efficiency the planner could honestly use
    assert efficiency_of(resolve(CAT, "maxtext"))[0] is None
    # verl states its trainer's (Hugging Face models run eagerly under FSDP), with its source
    key, why = efficiency_of(resolve(CAT, "verl"))
    assert key == "hf" and "fsdp_workers.py" in why


def test_lookup_by_alias_and_unknown_ids_name_the_nearest():
    assert resolve(CAT, "trl+peft").id == "trl"
    assert resolve(CAT, "PEFT+Transformers").id == "hf-trainer"
    with pytest.raises(PlannerError, match="unknown framework 'torchtunes'.*torchtune"):
        resolve(CAT, "torchtunes")


def test_schema_rejects_unknown_facts_and_facts_without_source():
    with pytest.raises(ValueError):
        FrameworkFacts.model_validate({"atention": {"value": "flash", "source": "x"}})
    with pytest.raises(ValueError):
        FrameworkFacts.model_validate({"attention": {"value": "flash"}})
    with pytest.raises(ValueError):
        FrameworkFacts.model_validate({"attention": {"value": "flash", "source": ""}})
    with pytest.raises(ValueError):
        FrameworkSpec.model_validate({"id": "x", "name": "x", "version": "1",
                                      "facts": {"loss": {"value": "fp64", "source": "s"}}})


def _overlay(tmp_path, entries):
    folder = tmp_path / "frameworks"
    folder.mkdir()
    for e in entries:
        (folder / f"{e['id']}.yaml").write_text(yaml.safe_dump(e))
    return load_catalog([tmp_path])


def test_overlay_profiles_and_broken_inheritance(tmp_path):
    mine = {"id": "my-trainer", "name": "Mine", "base": "torchtune", "version": "1",
            "aliases": ["mine"],
            "facts": {"loss": {"value": "fp32", "source": "my train.py"}}}
    cat = _overlay(tmp_path, [mine])
    p = resolve(cat, "mine")
    assert p.value("loss") == "fp32" and p.value("master_weights") == "none"
    loop = tmp_path / "loop"
    loop.mkdir()
    with pytest.raises(CatalogError, match="circle"):
        _overlay(loop, [{**mine, "id": "a", "base": "b", "aliases": []},
                        {**mine, "id": "b", "base": "a", "aliases": []}])
    orphan = tmp_path / "orphan"
    orphan.mkdir()
    with pytest.raises(CatalogError, match="base 'nowhere' is not a framework profile"):
        _overlay(orphan, [{**mine, "base": "nowhere"}])


def test_config_fields_follow_the_facts():
    tt = config_fields(resolve(CAT, "torchtune"), workload="sft", sharded=True)
    assert tt["chunked_loss"] and tt["pure_bf16"] and tt["expand_kv_heads"]
    assert tt["fused_optimizer"] and tt["shard_embeddings"]
    qwen = resolve(CAT, "qwen-finetune")
    assert config_fields(qwen, workload="sft", sharded=False)["loss_in_fp32"]
    assert not config_fields(qwen, workload="sft", sharded=True)["loss_in_fp32"]
    assert not config_fields(resolve(CAT, "trl"), workload="dpo", sharded=False)["loss_in_fp32"]
    assert config_fields(resolve(CAT, "trl"), workload="sft", sharded=False)["loss_in_fp32"]
    prime = config_fields(resolve(CAT, "prime-rl"), workload="grpo", sharded=True)
    assert prime["lm_head_vocab_chunk"] == 2048 and prime["fp32_trained_weights"]
    assert config_fields(resolve(CAT, "deepspeed-chat"), workload="sft",
                         sharded=True)["flash_attention"] is False


CASE = {
    "id": "c", "framework": "torchtune", "model": "meta-llama/Llama-3.1-8B", "workload": "sft",
    "method": "lora", "gpu": "rtx-4090", "gpu_memory_gib": 24, "num_gpus": 1,
    "sharding": "none", "grad_checkpointing": "full", "micro_batch_size": 2, "seq_len": 2048,
    "outcome": {"kind": "peak", "peak_gib": 16.0, "measured_as": "allocated"},
    "usable_for_accuracy": True,
}


def test_the_reader_takes_what_a_case_leaves_out_from_the_profile():
    cfg, _ = case_config(CASE, CAT)
    assert cfg.pure_bf16 and cfg.chunked_loss and cfg.lora_rank == 8
    assert cfg.lora_targets == ("q", "v")
    cfg, _ = case_config({**CASE, "lora_rank": 32, "extra": {"chunked_ce": False}}, CAT)
    assert cfg.lora_rank == 32 and not cfg.chunked_loss
    cfg, _ = case_config({**CASE, "framework": "llama-factory", "grad_checkpointing": None}, CAT)
    assert cfg.checkpointing == "full" and cfg.lora_targets == ("all-linear",)


def test_a_case_whose_framework_has_no_profile_is_not_modelled():
    r = predict_case({**CASE, "framework": "my-own-trainer"}, CAT)
    assert r.predicted_gib is None and "'my-own-trainer' has no profile" in r.reason
    r = predict_case({**CASE, "framework": None}, CAT)
    assert r.predicted_gib is None and "names no framework" in r.reason


def test_rl_semantics_come_from_the_profile():
    case = {**CASE, "framework": "verl", "workload": "grpo", "sharding": "fsdp", "num_gpus": 8,
            "gpu": "h100-sxm", "gpu_memory_gib": 80, "offload": "optimizer+params",
            "rl": {"rollout_n": 5, "prompt_len": 512, "response_len": 1024,
                   "gpu_memory_utilization": 0.6, "rollout_tp": 2}}
    rc = rl_case(case, CAT)
    assert rc.cfg.offload_idle and rc.cfg.offload == "none"
    assert rc.cfg.fp32_trained_weights and not rc.cfg.loss_in_fp32
    assert rc.engine_outside_counter
    rc = rl_case({**case, "framework": "openrlhf", "sharding": "zero3", "offload": "none"}, CAT)
    assert not rc.cfg.offload_idle and rc.cfg.loss_in_fp32 and not rc.engine_outside_counter
