"""FSDP keeps no gradients between steps (memory.phase_terms): each unit's sharded gradient is
allocated in backward and freed by zero_grad(set_to_none=True) after the step, so the
forward/backward phase holds none at grad_accum 1; accumulation and ZeRO-2/3 keep them."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.models import memory as mem
from planner.models.states import gradient_bytes


@pytest.fixture(scope="module")
def mistral():
    return load_catalog().model("mistral-7b").spec


def full(**kw) -> TrainConfig:
    base = {"method": "full", "checkpointing": "full", "seq_len": 4096, "micro_batch_size": 2,
            "num_gpus": 2}
    return TrainConfig(**{**base, **kw})


def forward_grads(model, cfg) -> float:
    return mem.phase_terms(model, cfg, "bf16")[mem.FWD_PHASE]["gradients"]


def test_fsdp_at_one_micro_batch_holds_no_gradients_in_forward(mistral):
    c = full(fsdp=True)
    assert gradient_bytes(mistral, c, "bf16") > 0
    assert forward_grads(mistral, c) == 0.0
    # they exist at the end of backward and in the step
    phases = mem.phase_terms(mistral, c, "bf16")
    assert phases[mem.BWD_END_PHASE]["gradients"] == gradient_bytes(mistral, c, "bf16")


@pytest.mark.parametrize("kw", [{"fsdp": True, "grad_accum": 4}, {"zero_stage": 2},
                                {"zero_stage": 3}])
def test_accumulation_and_zero_buffers_keep_them(mistral, kw):
    c = full(**kw)
    assert forward_grads(mistral, c) == gradient_bytes(mistral, c, "bf16") > 0
