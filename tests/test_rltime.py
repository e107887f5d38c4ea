"""Time of an RL iteration by placement: how the phases compose."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.models.rltime import estimate_rl_step

CAT = load_catalog()
QWEN7 = CAT.model("qwen2.5-7b").spec
H100 = CAT.gpu("h100-sxm")
GROUPS = (("actor", 4), ("critic", 4), ("reference", 4), ("reward", 4))


def ppo(**kw) -> TrainConfig:
    base = dict(workload="ppo", method="full", zero_stage=3, prompt_len=512, response_len=512,
                micro_batch_size=4, grad_accum=4, rollout_batch=256)
    return TrainConfig(**(base | kw))


def test_split_roles_work_side_by_side():
    """Every role on 4 GPUs of its own does the same work per role as the four roles on 4
    shared trainer GPUs (separate placement), but the forward passes and the two updates
    overlap: the training side is the busiest forward plus the slower update, not the sum."""
    split = estimate_rl_step(QWEN7, H100, ppo(num_gpus=20, placement="split", role_gpus=GROUPS),
                             stack="deepspeed")
    sep = estimate_rl_step(QWEN7, H100, ppo(num_gpus=8, placement="separate", rollout_gpus=4),
                           stack="deepspeed")
    roles = [k for k in sep.phases if k.endswith((" forward", " update"))]
    assert len(roles) == 6
    for k in roles:
        assert split.phases[k] == pytest.approx(sep.phases[k])
    forwards = max(v for k, v in split.phases.items() if k.endswith(" forward"))
    updates = max(v for k, v in split.phases.items() if k.endswith(" update"))
    generation = split.phases["generation"]
    assert split.step_time_s == pytest.approx(
        max(generation, forwards + updates) + split.phases["weight sync"])
    assert sum(sep.phases[k] for k in roles) > forwards + updates
    assert split.step_time_s < sep.step_time_s


def test_split_groups_of_other_sizes_are_timed_on_their_own_gpus():
    """A reference on 1 GPU takes 4x the seconds of the same pass on the actor's 4 (same
    tokens, a quarter of the GPUs) and then sets the forward side of the iteration."""
    cfg = ppo(num_gpus=11, placement="split",
              role_gpus=(("actor", 4), ("critic", 4), ("reference", 1), ("reward", 1)))
    est = estimate_rl_step(QWEN7, H100, cfg, stack="deepspeed")
    p = est.phases
    assert p["reference forward"] == pytest.approx(4 * p["actor forward"], rel=0.02)
    train = p["reference forward"] + max(p["actor update"], p["critic update"])
    assert est.step_time_s == pytest.approx(max(p["generation"], train) + p["weight sync"])


def test_hf_generate_decodes_in_batches_with_no_sync_or_sleep():
    """The trainer's own generate: 64 sequences on one GPU, 8 per call -> 8 waves of one
    bandwidth-bound decode each; no weights move into an engine and none sleep on the host.
    The same job with all 64 in one call runs one wave: each decoding step reads the weights
    once for 64 sequences instead of 8 times, so generation is faster."""
    base = dict(workload="grpo", method="full", prompt_len=512, response_len=512,
                micro_batch_size=4, grad_accum=16, rollout_batch=16, rollout_n=4,
                reference=False, rollout_engine="hf-generate")
    eight = estimate_rl_step(QWEN7, H100, TrainConfig(**base, generate_micro_batch=8))
    whole = estimate_rl_step(QWEN7, H100, TrainConfig(**base))
    assert eight.waves == 8 and eight.concurrency == 8 and whole.waves == 1
    assert eight.phases["weight sync"] == 0.0 and "offload traffic" not in eight.phases
    assert whole.phases["generation"] < eight.phases["generation"] / 4
    vllm = estimate_rl_step(QWEN7, H100, TrainConfig(**{**base, "rollout_engine": "vllm"}))
    assert vllm.phases["weight sync"] > 0


def test_continuous_batching_pays_one_generation_tail():
    """Responses that run past their mean to a cap end each hf-generate batch in a tail; a
    vLLM engine admits waiting sequences as others finish, so only its last wave has one.
    8 calls of 8 sequences -> 8 tails; a vLLM engine with 2,048 sequences, 256 at once
    (efficiency.MAX_DECODE_BATCH) -> 8 waves, 1 tail."""
    from planner.models.rltime import tail_seconds
    base = dict(workload="grpo", method="full", prompt_len=256, response_len=256,
                micro_batch_size=4, grad_accum=16, rollout_batch=16, rollout_n=4,
                reference=False)
    hf = estimate_rl_step(QWEN7, H100, TrainConfig(**base, rollout_engine="hf-generate",
                                                   generate_micro_batch=8),
                          max_response_len=1024)
    one = tail_seconds(QWEN7, H100, 512, steps=768, tp=1, platform=None, efficiency=hf_eff(),
                       precision="bf16")
    assert hf.waves == 8
    assert hf.phases["generation tail"] == pytest.approx(8 * one)
    vllm_cfg = TrainConfig(**{**base, "rollout_batch": 512}, rollout_engine="vllm")
    vllm = estimate_rl_step(QWEN7, H100, vllm_cfg, max_response_len=1024)
    assert vllm.waves == 8
    tail = tail_seconds(QWEN7, H100, 512, steps=768, tp=1, platform=None, efficiency=vllm_eff(),
                        precision="bf16")
    assert vllm.phases["generation tail"] == pytest.approx(tail)


def hf_eff() -> float:
    from planner.models import efficiency as eff
    return eff.HF_GENERATE_DECODE_EFFICIENCY


def vllm_eff() -> float:
    from planner.models import efficiency as eff
    return eff.RL_ROLLOUT_DECODE_EFFICIENCY


def test_continuous_batching_decodes_share_over_concurrency_waves():
    """300 sequences on one vLLM engine that holds 256 at once: the engine refills freed
    slots, so generation lasts 300 / 256 waves' worth of steps, not 2 whole waves; the
    trainer's own generate with 256 per call runs 2 whole batches."""
    from planner.models.rltime import _wave_seconds, engine_side
    base = dict(workload="grpo", method="full", prompt_len=256, response_len=256,
                micro_batch_size=4, grad_accum=16, rollout_batch=75, rollout_n=4,
                reference=False)
    vllm = engine_side(QWEN7, H100, TrainConfig(**base, rollout_engine="vllm"), platform=None)
    assert vllm.engine.concurrency == 256 and vllm.waves == 2
    wave = _wave_seconds(QWEN7, H100, 256, 256, 1, 256, None, vllm_eff(), "bf16")
    assert vllm.generation_s == pytest.approx(300 / 256 * wave)
    hf = engine_side(QWEN7, H100, TrainConfig(**base, rollout_engine="hf-generate",
                                              generate_micro_batch=256), platform=None)
    hf_wave = _wave_seconds(QWEN7, H100, 256, 256, 1, 256, None, hf_eff(), "bf16")
    assert hf.waves == 2 and hf.generation_s == pytest.approx(2 * hf_wave)
