"""Properties of the memory model over many configurations (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.models import states
from planner.models.workloads import estimate_memory

CAT = load_catalog()
MODEL = CAT.model("llama-3.1-8b").spec  # 32 layers, 32 heads, 8 kv heads
GPU = CAT.gpu("h100-sxm")

configs = st.builds(
    TrainConfig,
    method=st.sampled_from(["full", "lora", "dora", "qlora", "freeze"]),
    optimizer=st.sampled_from(["adamw", "adamw-8bit", "sgd", "sgd-momentum", "adafactor"]),
    num_gpus=st.sampled_from([1, 2, 4, 8]),
    checkpointing=st.sampled_from(["none", "selective", "full"]),
    micro_batch_size=st.integers(1, 8),
    grad_accum=st.integers(1, 4),
    seq_len=st.sampled_from([256, 1024, 4096]),
    flash_attention=st.booleans(),
    pure_bf16=st.booleans(),
    chunked_loss=st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(configs)
def test_estimate_is_ordered_and_non_negative(cfg):
    est = estimate_memory(MODEL, GPU, cfg)
    assert all(v >= 0 for v in est.terms.values())
    assert 0 < est.allocated < est.reserved < est.device
    assert est.host_ram > 0


@settings(max_examples=40, deadline=None)
@given(configs)
def test_more_tokens_never_need_less_memory(cfg):
    small = estimate_memory(MODEL, GPU, cfg)
    more = cfg.model_copy(update={"micro_batch_size": cfg.micro_batch_size + 1})
    longer = cfg.model_copy(update={"seq_len": cfg.seq_len * 2})
    # the peak (the phase with the larger reserved memory) never shrinks
    assert estimate_memory(MODEL, GPU, more).reserved >= small.reserved
    assert estimate_memory(MODEL, GPU, longer).reserved >= small.reserved


@settings(max_examples=40, deadline=None)
@given(configs)
def test_higher_zero_stage_never_holds_more_model_states(cfg):
    cfg = cfg.model_copy(update={"num_gpus": 8})
    held = []
    for stage in range(4):
        c = cfg.model_copy(update={"zero_stage": stage})
        held.append(
            states.weight_bytes(MODEL, c, "bf16") + states.master_weight_bytes(MODEL, c, "bf16")
            + states.optimizer_state_bytes(MODEL, c) + states.gradient_bytes(MODEL, c, "bf16")
        )
    assert held == sorted(held, reverse=True)
    assert held[3] < held[0] or cfg.method != "full"
