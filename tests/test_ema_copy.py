"""DeepSpeed-Chat's --enable_ema: an exponential-moving-average copy of the actor's 16-bit
weights stays on the GPUs (DeepSpeedExamples@3d83278 dschat/rlhf/rlhf_engine.py _init_ema),
held in every phase and never run in the iteration."""

from __future__ import annotations

import pytest

from planner import PlannerError
from planner.catalog.frameworks import resolve, unsupported
from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.models.rltime import estimate_rl_step
from planner.models.states import weight_bytes
from planner.models.workloads import roles, workload_phases

CAT = load_catalog()
OPT = CAT.model("opt-1.3b").spec


def ppo(**kw) -> TrainConfig:
    base = {"workload": "ppo", "prompt_len": 256, "response_len": 256, "num_gpus": 8,
            "zero_stage": 2, "micro_batch_size": 4, "rollout_engine": "deepspeed-hybrid"}
    return TrainConfig(**{**base, **kw})


def test_the_ema_copy_is_held_in_every_phase_and_never_run():
    held, plain = ppo(ema_copy=True), ppo()
    ema = next(r for r in roles(OPT, held) if r.name == "ema")
    assert not ema.runs and not ema.trained
    copy = weight_bytes(OPT, ema.cfg, "bf16")  # 16-bit, unsharded under a ZeRO-2 actor
    assert copy == pytest.approx(2 * 1.3e9, rel=0.05)
    with_ema, without = (workload_phases(OPT, c, "bf16") for c in (held, plain))
    assert set(with_ema) == set(without)  # no phase of its own
    for phase, terms in with_ema.items():
        assert sum(terms.values()) == pytest.approx(sum(without[phase].values()) + copy)
    gpu = CAT.gpu("a100-80gb-sxm")
    assert estimate_rl_step(OPT, gpu, held).phases == estimate_rl_step(OPT, gpu, plain).phases


def test_only_deepspeed_chat_keeps_one_and_only_in_rl():
    assert not unsupported(resolve(CAT, "deepspeed-chat"), ppo(ema_copy=True))
    assert any("EMA" in m for m in unsupported(resolve(CAT, "verl"), ppo(ema_copy=True)))
    from planner.catalog.request_checks import validate_workload

    with pytest.raises(PlannerError, match="ema_copy"):
        validate_workload(TrainConfig(ema_copy=True), OPT)
