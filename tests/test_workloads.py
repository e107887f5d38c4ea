"""Preference and RL workloads: roles, phases and their memory, against hand arithmetic."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.params import count_params
from planner.catalog.request import TrainConfig
from planner.catalog.request_checks import validate_config
from planner.errors import PlannerError
from planner.models.memory import GIB, phase_terms
from planner.models.rollout import engine, kv_bytes_per_sequence
from planner.models.workloads import (
    ROLLOUT_PHASE,
    estimate_memory,
    roles,
    value_model,
    workload_phases,
)

CAT = load_catalog()
QWEN7 = CAT.model("qwen2.5-7b").spec
H100 = CAT.gpu("h100-sxm")


def grpo(**kw) -> TrainConfig:
    base = dict(workload="grpo", method="lora", num_gpus=8, fsdp=True, prompt_len=512,
                response_len=1024, micro_batch_size=4, rollout_batch=64)
    return TrainConfig(**(base | kw))


def test_rl_seq_len_is_prompt_plus_response():
    assert grpo().seq_len == 1536
    with pytest.raises(PlannerError, match="prompt"):
        validate_config(TrainConfig(workload="ppo", seq_len=100, prompt_len=40,
                                    response_len=50), QWEN7)


def test_roles_per_workload():
    names = lambda cfg: [r.name for r in roles(QWEN7, cfg)]  # noqa: E731
    assert names(TrainConfig(workload="rm")) == ["reward"]
    assert names(TrainConfig(workload="dpo")) == ["policy", "reference"]
    assert names(TrainConfig(workload="dpo", precompute_ref=True)) == ["policy"]
    assert names(grpo()) == ["actor", "reference"]
    assert names(grpo(reference=False)) == ["actor"]
    ppo = TrainConfig(workload="ppo", prompt_len=512, response_len=512, num_gpus=8)
    assert names(ppo) == ["actor", "critic", "reference", "reward"]


def test_value_model_drops_the_vocabulary_head():
    # Qwen2.5-7B has an untied 152,064 x 3,584 head (545 M parameters).
    head = count_params(QWEN7).total - count_params(value_model(QWEN7)).total
    assert head == 152064 * 3584


def test_reward_model_has_no_vocabulary_logits_and_doubles_sequences():
    fwd = "forward/backward"
    sft = workload_phases(QWEN7, TrainConfig(micro_batch_size=2, seq_len=1024), "bf16")[fwd]
    rm = workload_phases(QWEN7, TrainConfig(workload="rm", micro_batch_size=1, seq_len=1024),
                         "bf16")[fwd]
    # 2 x 1024 tokens either way; the RM's output is 2 x 1024 x 3584 x 2 B, the SFT loss
    # 2048 tokens x 152,064 x 12 B = 3.5 GiB.
    assert rm["logits_and_loss"] == pytest.approx(2048 * 3584 * 2)
    assert sft["logits_and_loss"] > 3.4 * GIB
    assert rm["activations"] == pytest.approx(sft["activations"])


def test_dpo_full_keeps_a_16bit_reference_lora_shares_the_base():
    full = workload_phases(QWEN7, TrainConfig(workload="dpo", num_gpus=1), "bf16")
    ref = full["forward/backward"]["reference weights"]
    assert ref == pytest.approx(count_params(QWEN7).total * 2)
    lora = workload_phases(QWEN7, TrainConfig(workload="dpo", method="lora"), "bf16")
    assert not any(k.startswith("reference") for k in lora["forward/backward"])
    assert "reference forward" in lora


def test_engine_kv_cache_arithmetic():
    # KV per token of Qwen2.5-7B: 2 x 28 layers x 4 kv heads x 128 x 2 B = 57,344 B.
    cfg = grpo(rollout_tp=2)
    assert kv_bytes_per_sequence(QWEN7, cfg) == pytest.approx(57344 * 1536 / 2)
    eng = engine(QWEN7, cfg, None)
    # 64 prompts x 5 samples over 8 / 2 = 4 engines: 80 sequences each, all at once.
    assert (eng.sequences_per_engine, eng.concurrency, eng.engines) == (80, 80, 4)
    assert eng.kv_cache == pytest.approx(80 * 57344 * 1536 / 2)
    fixed = engine(QWEN7, grpo(gpu_memory_utilization=0.5), 80 * GIB)
    assert fixed.total == pytest.approx(0.5 * 80 * GIB)


def test_colocated_engine_sleeps_during_training():
    phases = workload_phases(QWEN7, grpo(), "bf16")
    assert any(k.startswith("engine") for k in phases[ROLLOUT_PHASE])
    assert not any(k.startswith("engine") for k in phases["actor update"])
    awake = workload_phases(QWEN7, grpo(engine_sleep=False), "bf16")
    assert any(k.startswith("engine") for k in awake["actor update"])


def test_offload_idle_empties_the_rollout_phase_of_training_states():
    kept = workload_phases(QWEN7, grpo(), "bf16")[ROLLOUT_PHASE]
    parked = workload_phases(QWEN7, grpo(offload_idle=True), "bf16")[ROLLOUT_PHASE]
    assert any(k.startswith("actor") for k in kept)
    assert not any(k.startswith("actor") for k in parked)
    assert sum(parked.values()) < sum(kept.values())


def test_update_phase_is_the_sft_phase_plus_idle_roles():
    cfg = grpo(method="full", reference=False, offload_idle=True)
    phases = workload_phases(QWEN7, cfg, "bf16")
    sft = TrainConfig(method="full", num_gpus=8, fsdp=True, micro_batch_size=4, seq_len=1536)
    held = phase_terms(QWEN7, sft.model_copy(update={"loss_alive_with_recompute": True}), "bf16")
    assert sum(phases["actor update"].values()) == pytest.approx(
        sum(held["forward/backward"].values()))
    # the actor's loss buffers stay counted with the first recomputed layer (an RL role's rule,
    # workloads._base); an SFT loop frees them first (memory.forward_activation_bytes)
    freed = phase_terms(QWEN7, sft, "bf16")
    assert sum(freed["forward/backward"].values()) < sum(held["forward/backward"].values())


def test_separate_placement_moves_the_engine_off_the_trainer():
    sep = estimate_memory(QWEN7, H100, grpo(placement="separate", rollout_gpus=4))
    assert sep.groups[ROLLOUT_PHASE] == "engine GPUs"
    assert sep.groups["actor update"] == "trainer GPUs"
    with pytest.raises(PlannerError, match="rollout-gpus"):
        validate_config(grpo(placement="separate", rollout_gpus=8), QWEN7)


def ppo(**kw) -> TrainConfig:
    base = dict(workload="ppo", method="full", zero_stage=3, prompt_len=512, response_len=512,
                micro_batch_size=2, rollout_batch=64)
    return TrainConfig(**(base | kw))


def test_split_placement_gives_each_role_only_its_own_states():
    """Split (OpenRLHF without --colocate_*): on 4-GPU groups the actor's update holds the
    actor alone. The same roles time-sharing 4 trainer GPUs (separate) add the idle critic,
    reference and reward states: their ZeRO-3 shards over 4 GPUs, exactly."""
    split = ppo(num_gpus=20, placement="split",
                role_gpus=(("actor", 4), ("critic", 4), ("reference", 4), ("reward", 4)))
    sep = ppo(num_gpus=8, placement="separate", rollout_gpus=4)
    ps, pp = workload_phases(QWEN7, split, "bf16"), workload_phases(QWEN7, sep, "bf16")
    idle = {k: v for k, v in pp["actor update"].items()
            if k.split()[0] in ("critic", "reference", "reward")}
    assert idle and not any(k.split()[0] in ("critic", "reference", "reward")
                            for k in ps["actor update"])
    assert sum(ps["actor update"].values()) == pytest.approx(
        sum(pp["actor update"].values()) - sum(idle.values()))
    est = estimate_memory(QWEN7, H100, split)
    assert est.groups["critic update"] == "critic GPUs"
    assert est.groups["reward forward"] == "reward GPUs"
    assert est.groups[ROLLOUT_PHASE] == "engine GPUs"
    assert est.device < estimate_memory(QWEN7, H100, sep).device


def test_split_groups_of_other_sizes_keep_the_global_batch():
    """A critic on half the actor's GPUs accumulates twice as many micro-batches (OpenRLHF's
    train_batch_size is global). Beside a LoRA actor the reference is a 16-bit model on GPUs of
    its own (OpenRLHF loads it apart), not the actor's base with adapters off."""
    cfg = ppo(num_gpus=8, placement="split", grad_accum=2,
              role_gpus=(("actor", 4), ("critic", 2), ("reference", 1), ("reward", 1)))
    with pytest.raises(PlannerError, match="engines need GPUs"):
        validate_config(cfg, QWEN7)
    cfg = cfg.model_copy(update={"num_gpus": 10})
    validate_config(cfg, QWEN7)
    by = {r.name: r.cfg for r in roles(QWEN7, cfg)}
    assert by["actor"].num_gpus == 4 and by["critic"].num_gpus == 2
    assert by["actor"].global_batch_size == by["critic"].global_batch_size == 16
    assert by["reward"].num_gpus == 1
    lora = grpo(num_gpus=8, placement="split", role_gpus=(("actor", 4), ("reference", 2)))
    ref = next(r for r in roles(QWEN7, lora) if r.name == "reference")
    assert not ref.shares_base and ref.cfg.num_gpus == 2
    phases = workload_phases(QWEN7, lora, "bf16")
    assert phases["reference forward"]["reference weights"] == pytest.approx(
        count_params(QWEN7).total * 2 / 2)  # 16-bit weights sharded over its 2 GPUs
    assert estimate_memory(QWEN7, H100, lora).groups["reference forward"] == "reference GPUs"
    with pytest.raises(PlannerError, match="gives no GPUs to the reference"):
        roles(QWEN7, lora.model_copy(update={"role_gpus": (("actor", 6),)}))
    with pytest.raises(PlannerError, match="no critic model of its own"):
        roles(QWEN7, lora.model_copy(update={"role_gpus": (("actor", 4), ("critic", 2))}))


def test_full_ppo_7b_needs_more_than_one_80gb_gpu():
    # Actor and critic states alone: 2 x 7.6e9 x 16 B = 243 GB > 80 GB.
    cfg = TrainConfig(workload="ppo", prompt_len=512, response_len=512, num_gpus=1)
    assert not estimate_memory(QWEN7, CAT.gpu("a100-80gb-sxm"), cfg).fits()


def test_fixed_engine_fraction_too_small_is_blocked():
    est = estimate_memory(QWEN7, CAT.gpu("rtx-4090"), grpo(gpu_memory_utilization=0.1,
                                                             num_gpus=1, fsdp=False))
    assert est.blocked and not est.fits()


# ---------------------------------------------------------------------------------------------
# The trainer's own generate (hf-generate)
# ---------------------------------------------------------------------------------------------
def hf(**kw) -> TrainConfig:
    base = dict(workload="grpo", method="full", num_gpus=1, prompt_len=512, response_len=1024,
                micro_batch_size=4, rollout_batch=16, rollout_n=4, reference=False,
                checkpointing="none", rollout_engine="hf-generate")
    return TrainConfig(**(base | kw))


def test_hf_generate_holds_kv_of_its_batch_and_no_engine_copy():
    """Qwen2.5-7B: 28 layers x 4 kv heads x 128 head dim -> KV 2 x 28 x 4 x 128 x 2 B =
    57,344 B per token; 1,536 tokens per sequence -> 88,080,384 B (84 MiB) per sequence. With
    --generate-micro-batch 8 one call holds 8 sequences: 704,643,072 B (672 MiB). Transients
    per sequence: the prefill's one-layer working set over 512 prompt tokens, or the last
    token's logits, 152,064 x 14 B = 2,128,896 B, whichever is larger. No engine weights: the
    rollout phase is the actor's resident states plus those."""
    cfg = hf(generate_micro_batch=8)
    eng = engine(QWEN7, cfg, H100.memory_gib * GIB)
    assert eng.weights == 0.0 and eng.concurrency == 8 and eng.sequences_per_engine == 64
    assert eng.kv_cache == 8 * 2 * 28 * 4 * 128 * 2 * 1536 == 704_643_072
    assert eng.workspace >= 8 * 152_064 * 14
    phases = workload_phases(QWEN7, cfg, "bf16", capacity=H100.memory_gib * GIB)
    rollout = phases[ROLLOUT_PHASE]
    assert "engine weights" not in rollout
    states = {k: v for k, v in rollout.items() if not k.startswith("engine ")}
    actor = next(r for r in roles(QWEN7, cfg) if r.name == "actor")
    n = count_params(QWEN7).total
    # weights 2 B + fp32 master 4 B + two fp32 moments 8 B per parameter, nothing else resident
    assert sum(states.values()) == pytest.approx(14 * n, rel=1e-9)
    assert actor.trained
    assert rollout["engine kv_cache"] == eng.kv_cache


def test_hf_generate_default_batch_is_the_whole_share_and_gathers_sharded_weights():
    """Without --generate-micro-batch one call generates the GPU's whole share (TRL): 16
    prompts x 4 samples over 2 GPUs = 32 sequences. Under FSDP the weights are gathered whole
    for generation: 2 B x N beside the shards."""
    cfg = hf(num_gpus=2, fsdp=True)
    eng = engine(QWEN7, cfg, None)
    assert eng.concurrency == eng.sequences_per_engine == 32
    assert eng.weights == 2 * count_params(QWEN7).total
    assert engine(QWEN7, hf(num_gpus=2), None).weights == 0.0


def test_hf_generate_sets_no_engine_fraction_and_parks_nothing_on_the_host():
    cfg = hf()
    est = estimate_memory(QWEN7, H100, cfg)
    assert est.engine_utilization is None and not est.blocked
    vllm = estimate_memory(QWEN7, H100, cfg.model_copy(update={"rollout_engine": "vllm"}))
    # the vLLM engine sleeps with its 16-bit weights in host RAM: 2 B x N more on the host
    assert vllm.host_ram - est.host_ram == pytest.approx(2 * count_params(QWEN7).total)


@pytest.mark.parametrize("kw, flag", [
    (dict(placement="separate", num_gpus=2), "--placement separate"),
    (dict(rollout_tp=2, num_gpus=2), "--rollout-tp 2"),
    (dict(gpu_memory_utilization=0.5), "--gpu-memory-utilization 0.5"),
    (dict(offload_idle=True), "--offload-idle"),
])
def test_hf_generate_rejects_engine_knobs(kw, flag):
    with pytest.raises(PlannerError, match=f"{flag} does not apply to --rollout-engine"):
        validate_config(hf(**kw), QWEN7)


def test_generate_micro_batch_needs_hf_generate():
    with pytest.raises(PlannerError, match="--generate-micro-batch 4 applies to"):
        validate_config(hf(rollout_engine="vllm", generate_micro_batch=4), QWEN7)
    with pytest.raises(PlannerError, match="--rollout-engine hf-generate applies to"):
        validate_config(TrainConfig(rollout_engine="hf-generate"), QWEN7)
