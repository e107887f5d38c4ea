"""bitsandbytes before 0.43.2 kept every 4-bit matmul's input for backward (MatMul4Bit
ctx.tensors = (A, B) at 0.41.0 / 0.42.0; 9e753741, #1270, keeps only the packed weight): QLoRA
then saves the inputs of the frozen matrices too (memory._inputs_kept, cfg.quant_keeps_inputs)."""

from __future__ import annotations

import pytest
from conftest import tiny_config

from planner.catalog.load import load_catalog
from planner.catalog.releases import release
from planner.errors import PlannerError
from planner.models import memory as mem
from planner.validation.case_releases import BNB_KEEPS_ONLY_WEIGHT, bnb_keeps_inputs

CAT = load_catalog()
MODEL = CAT.model("llama-3.1-8b").spec


def test_legacy_bitsandbytes_keeps_the_second_norms_output_and_the_down_input():
    # LoRA on q, v: the first norm's output is saved for the adapters already; the 4-bit gate/up
    # and down matmuls add the second norm's output (h) and the product (f), 2 bytes each
    new = tiny_config(method="qlora", lora_rank=8, lora_targets=("q", "v"))
    old = new.model_copy(update={"quant_keeps_inputs": True})
    extra = (mem.layer_activation_bytes_per_token(MODEL, old)
             - mem.layer_activation_bytes_per_token(MODEL, new))
    assert extra == pytest.approx(2 * (MODEL.hidden_size + MODEL.ffn_hidden_size))


def test_only_a_quantized_base_keeps_its_inputs():
    lora = tiny_config(method="lora", lora_rank=8, lora_targets=("q", "v"))
    flagged = lora.model_copy(update={"quant_keeps_inputs": True})
    assert mem.layer_activation_bytes_per_token(MODEL, flagged) == \
        mem.layer_activation_bytes_per_token(MODEL, lora)


def test_a_case_states_its_bitsandbytes_release():
    assert release("0.42.0") < BNB_KEEPS_ONLY_WEIGHT <= release("0.43.2")
    assert release("0.41") < BNB_KEEPS_ONLY_WEIGHT < release("0.45.2+cu121")
    with pytest.raises(PlannerError, match="bitsandbytes_version"):
        bnb_keeps_inputs("latest")
