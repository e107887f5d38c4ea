"""DeepSpeed's hybrid engine (DeepSpeed-Chat's rollout engine): it generates with the actor's own
parameters (a gathered copy only under ZeRO-3, freed when generation returns) and keeps its
inference workspace through training unless --release_inference_cache frees it."""

from __future__ import annotations

import pytest

from planner.catalog.frameworks import resolve, unlaunchable
from planner.catalog.load import load_catalog
from planner.catalog.params import count_params
from planner.catalog.request import TrainConfig
from planner.catalog.request_checks import validate_engine
from planner.errors import PlannerError
from planner.models.memory import engine_utilization_to_set
from planner.models.rltime import estimate_rl_step, tail_waves
from planner.models.rollout import engine, engine_parts, hybrid_bytes_per_sequence
from planner.models.workloads import ROLLOUT_PHASE, estimate_memory, workload_phases

CAT = load_catalog()
OPT = CAT.model("facebook/opt-1.3b").spec
A100 = CAT.gpu("a100-80gb-sxm")


def ppo(**kw) -> TrainConfig:
    base = dict(workload="ppo", method="full", num_gpus=8, zero_stage=2, prompt_len=256,
                response_len=256, micro_batch_size=4, rollout_batch=32, precision="fp16",
                rollout_engine="deepspeed-hybrid", framework="deepspeed-chat")
    return TrainConfig(**(base | kw))


def test_workspace_per_sequence_is_deepspeeds_genworkspace():
    """OPT-1.3b (24 layers, 32 heads of 64, width 2048), 512 tokens, inference TP 1 and 2:
    (10 x 2048 activations + 32 / tp x 512 scores + 2 x 24 x 2048 / tp KV) x 512 x 2 bytes."""
    assert (OPT.num_layers, OPT.num_attention_heads, OPT.head_dim) == (24, 32, 64)
    assert hybrid_bytes_per_sequence(OPT, ppo()) == (20480 + 16384 + 98304) * 512 * 2
    assert hybrid_bytes_per_sequence(OPT, ppo(zero_stage=3, rollout_tp=2)) == \
        (20480 + 8192 + 49152) * 512 * 2


def test_engine_holds_no_weights_of_its_own_unless_gathered_from_zero3():
    weights, workspace, _ = engine_parts(OPT, ppo())
    assert weights == 0.0 and workspace == 0.0
    gathered, _, _ = engine_parts(OPT, ppo(zero_stage=3, rollout_tp=2))
    assert gathered == count_params(OPT).total * 2 / 2
    vllm, vllm_work, _ = engine_parts(OPT, ppo(rollout_engine="vllm", framework=None))
    assert vllm == count_params(OPT).total * 2 and vllm_work > 0


def test_awake_engine_keeps_its_workspace_not_the_gathered_weights():
    """Without --release_inference_cache (engine_sleep False) the workspace stays through the
    training phases; the ZeRO-3 copy is freed when generate returns either way."""
    asleep = workload_phases(OPT, ppo(zero_stage=3), "fp16")
    awake = workload_phases(OPT, ppo(zero_stage=3, engine_sleep=False), "fp16")
    assert "engine weights" in asleep[ROLLOUT_PHASE]
    assert not any(k.startswith("engine") for k in asleep["actor update"])
    kept = awake["actor update"]
    assert kept["engine kv_cache"] == engine(OPT, ppo(zero_stage=3), None).kv_cache > 0
    assert "engine weights" not in kept
    assert sum(kept.values()) > sum(asleep["actor update"].values())


def test_no_weights_cross_pcie_when_the_cache_is_released():
    """A vLLM engine that sleeps offloads its weights and loads them back; the hybrid engine
    has none of its own to move, so its iteration has no offload traffic."""
    hybrid = estimate_rl_step(OPT, A100, ppo(zero_stage=3), stack="deepspeed")
    vllm = estimate_rl_step(OPT, A100, ppo(zero_stage=3, rollout_engine="vllm", framework=None),
                            stack="deepspeed")
    assert hybrid.phases.get("offload traffic", 0.0) == 0.0
    assert vllm.phases["offload traffic"] > 0


def test_no_memory_fraction_no_parked_roles_on_the_hybrid_engine():
    """The hybrid engine sizes its workspace to the generation batch: a vLLM memory fraction is
    refused, the plan's RL settings carry none, and a DeepSpeed-Chat launch cannot park idle
    roles on the host (its plans keep them on the GPUs; verl's writer offloads them)."""
    with pytest.raises(PlannerError, match="--gpu-memory-utilization 0.5 does not apply"):
        validate_engine(ppo(gpu_memory_utilization=0.5))
    with pytest.raises(PlannerError, match="--placement separate does not apply"):
        validate_engine(ppo(placement="separate", rollout_gpus=4))
    est = estimate_memory(OPT, A100, ppo())
    assert est.engine_utilization and engine_utilization_to_set(ppo(), est) is None
    parked = ppo(offload_idle=True)
    assert unlaunchable(resolve(CAT, "deepspeed-chat"), parked)
    assert not unlaunchable(resolve(CAT, "verl"), parked.model_copy(update={
        "framework": "verl", "rollout_engine": "vllm", "zero_stage": 0, "fsdp": True}))


def test_one_generate_call_per_generation_batch_run_whole():
    """DeepSpeed-Chat generates its per-device generation batch per call (the batch its
    experience passes then run whole: the plan's log-prob batch), gathered over the inference
    TP group; each call runs to its longest answer (no continuous batching)."""
    two = ppo(num_gpus=8, zero_stage=3, rollout_tp=2, rollout_batch=32, micro_batch_size=2)
    eng = engine(OPT, two, None)
    assert (eng.sequences_per_engine, eng.concurrency) == (8, 4)
    assert engine(OPT, two.model_copy(update={"micro_batch_size": 4}), None).concurrency == 8
    vllm = engine(OPT, two.model_copy(update={"rollout_engine": "vllm", "framework": None}),
                  None)
    assert vllm.concurrency == 8
    assert tail_waves(two, 3) == 3
    assert tail_waves(two.model_copy(update={"rollout_engine": "vllm", "framework": None}), 3) == 1
