"""The planner's memory decomposition reproduces the memory model exactly."""

from __future__ import annotations

import pytest
from conftest import assert_decomposition_exact
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog.load import load_catalog
from planner.models.memory import phase_terms, reserved_bytes
from planner.solver.tables import activation_reserved_bytes, states_coefficients

CAT = load_catalog()
MODELS = [CAT.model(m).spec for m in ("qwen2.5-7b", "mixtral-8x7b", "llama-3.1-70b")]
GPU = CAT.gpu("h100-sxm")
FLOOR = reserved_bytes({})  # the constant allocator floor

choices = st.fixed_dictionaries({
    "method": st.sampled_from(["full", "lora", "dora", "qlora", "freeze"]),
    "optimizer": st.sampled_from(["adamw", "adamw-8bit", "sgd"]),
    "shard": st.sampled_from(["none", "zero1", "zero2", "zero3", "fsdp"]),
    "offload": st.sampled_from(["none", "optimizer", "optimizer+params"]),
    "checkpointing": st.sampled_from(["none", "full"]),
    "micro_batch_size": st.sampled_from([1, 2, 8]),
    "grad_accum": st.sampled_from([1, 4]),
    "tp": st.sampled_from([1, 2, 8]),
    "pp": st.sampled_from([1, 2, 4]),
    "model": st.integers(0, len(MODELS) - 1),
})


def _config(c: dict, dp: int):
    from planner.catalog.request import TrainConfig

    shard = c["shard"]
    offload = c["offload"]
    if shard == "none" or (offload == "optimizer+params" and shard not in ("zero3", "fsdp")):
        offload = "none"
    return TrainConfig(
        method=c["method"], optimizer=c["optimizer"], checkpointing=c["checkpointing"],
        micro_batch_size=c["micro_batch_size"], grad_accum=c["grad_accum"], tp=c["tp"],
        pp=c["pp"], zero_stage={"zero1": 1, "zero2": 2, "zero3": 3}.get(shard, 0),
        fsdp=shard == "fsdp", offload=offload, num_gpus=c["tp"] * c["pp"] * dp,
        seq_len=2048,
    )


@settings(max_examples=60, deadline=None)
@given(choices, st.sampled_from([1, 3, 8, 16, 128]))
def test_decomposition_is_exact(c, dp):
    model = MODELS[c["model"]]
    cfg = _config(c, dp)
    assert_decomposition_exact(model, GPU, cfg, dp)


@pytest.mark.parametrize("dp", [1, 2, 3, 8, 9, 16, 128])
@pytest.mark.parametrize("tp", [1, 8])
def test_zero3_sub_group_cap_is_exact(dp, tp):
    """DeepSpeed ZeRO-3 converts one sub-group (<= 1e9 elements) of the gradient partition to
    fp32 at a time: 6 B x min(partition, 1e9). The decomposition's min(e/dp, k) reproduces it
    on both sides of the cap (70B: capped below dp = 70 / tp)."""
    from planner.models.calibration import ZERO3_SUB_GROUP_ELEMENTS
    from planner.models.memory import STEP_PHASE
    from planner.models.states import optimizer_step_bytes, trainable_on_gpu

    model = CAT.model("llama-3.1-70b").spec
    c = {"method": "full", "optimizer": "adamw", "shard": "zero3", "offload": "none",
         "checkpointing": "full", "micro_batch_size": 1, "grad_accum": 1, "tp": tp, "pp": 1}
    cfg = _config(c, dp)
    partition = trainable_on_gpu(model, cfg) / dp
    assert optimizer_step_bytes(model, cfg) == 6 * min(partition, ZERO3_SUB_GROUP_ELEMENTS)
    coeffs = states_coefficients(model, cfg, "bf16")
    acts = activation_reserved_bytes(model, cfg, "bf16")
    direct = reserved_bytes(phase_terms(model, cfg, "bf16")[STEP_PHASE]) - FLOOR
    assert coeffs[STEP_PHASE].at(dp) + acts[STEP_PHASE] == pytest.approx(direct, rel=1e-9)
