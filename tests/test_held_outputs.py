"""LitGPT's loop holds the previous micro-batch's outputs (planner/models/held_outputs.py):
``logits = model(...)`` keeps the fp32 logits (Fabric's convert_output) and, through their
grad_fn, the graph, whose bitsandbytes < 0.43.2 MatMul4Bit ctx still holds every 4-bit matmul's
input; its chunked loss keeps every chunk's log-softmax; its 4-bit head is dequantised to fp16
and cast to bf16; its bnb.nf4 keeps fp32 absmax. Byte counts by hand, and the CPU measurement of
LitGPT 5895df1's own model and loss code (tools/held_outputs.py, tests/data/held_outputs.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import tiny_config

from planner.catalog.frameworks import config_fields, resolve
from planner.catalog.load import load_catalog
from planner.catalog.params import count_params
from planner.models import held_outputs as ho
from planner.models import memory as mem
from planner.models import states
from planner.models.loss_buffers import held_chunked_loss_bytes
from planner.validation.case_inputs import _double_quant

DATA = Path(__file__).parent / "data"
MEASURED = json.loads((DATA / "held_outputs.json").read_text())
CAT = load_catalog()
LITGPT = config_fields(resolve(CAT, "litgpt"), workload="sft", sharded=False)


def litgpt_cfg(**kw):
    """A single-GPU LitGPT job with the profile's semantics (loss, held outputs, 4-bit head)."""
    return tiny_config(**{**LITGPT, "pure_bf16": True, **kw})


def test_the_litgpt_profile_states_its_loop():
    assert LITGPT["holds_previous_outputs"] and LITGPT["loss_seq_chunk"] == 128
    assert LITGPT["chunked_loss"] and LITGPT["loss_holds_logits"] and LITGPT["loss_in_fp32"]
    assert LITGPT["quantized_head"] and LITGPT["nf4_double_quant"] is False
    # a profile without the facts leaves the planner's defaults
    fsdp = config_fields(resolve(CAT, "pytorch-fsdp"), workload="sft", sharded=False)
    assert "holds_previous_outputs" not in fsdp and fsdp.get("loss_seq_chunk") is None


def test_held_chunked_loss_bytes():
    # 4 held fp32 logits + 4 saved log-softmax + 8 / n: seq 512 in 4 chunks of 128 -> 10 B;
    # one chunk -> 16 B (the whole-logits fp32-held loss, 12 + 4); seq 1304 in 11 -> 8.73 B
    assert held_chunked_loss_bytes(litgpt_cfg(seq_len=512)) == 10.0
    assert held_chunked_loss_bytes(litgpt_cfg(seq_len=128)) == 16.0
    assert held_chunked_loss_bytes(litgpt_cfg(seq_len=1304)) == pytest.approx(8 + 8 / 11)


def test_logits_bytes_of_the_litgpt_loss(tiny):
    # 8 tokens (one chunk of 128) x 1000 vocab x 16 B + the final norm output 8 x 64 x 2
    assert mem.logits_bytes(tiny, litgpt_cfg()) == 8 * 1000 * 16 + 8 * 64 * 2
    # without the chunk size it is the fitted chunked loss, as before
    plain = litgpt_cfg(loss_seq_chunk=None)
    assert mem.logits_bytes(tiny, plain) == 8 * 1000 * mem.cal.LOGIT_BYTES_CHUNKED + 1024


def test_quant_inputs_held_by_legacy_bitsandbytes(tiny):
    # per layer (2h + heads x head_dim + f) x 2 = (128 + 64 + 128) x 2 = 640 B, two layers, less
    # the first layer's attention input (2h = 128 B), plus the 4-bit head's input (128 B)
    old = litgpt_cfg(method="qlora", lora_rank=8, quant_keeps_inputs=True)
    assert ho.quant_input_bytes_per_token(tiny, old) == 2 * 640 - 128 + 128
    assert ho.quant_input_bytes_per_token(
        tiny, old.model_copy(update={"quantized_head": False})) == 2 * 640 - 128
    # bitsandbytes >= 0.43.2 keeps no input; LoRA has no 4-bit matmul
    assert ho.quant_input_bytes_per_token(
        tiny, old.model_copy(update={"quant_keeps_inputs": False})) == 0.0
    assert ho.quant_input_bytes_per_token(
        tiny, old.model_copy(update={"method": "lora"})) == 0.0
    # held per token: fp32 logits (1000 x 4) + those inputs; nothing where the loop lets go
    assert ho.held_bytes_per_token(tiny, old, 1000) == 4000 + 1280
    assert ho.held_bytes_per_token(
        tiny, old.model_copy(update={"holds_previous_outputs": False}), 1000) == 0.0


def test_dequantized_head_bytes(tiny):
    qlora = litgpt_cfg(method="qlora", lora_rank=8)
    head = count_params(tiny).lm_head  # 64,000
    # fp16 dequantised + its bf16 copy; computing in fp16 the cast is free
    assert ho.dequantized_head_bytes(tiny, qlora, "bf16") == head * 4
    assert ho.dequantized_head_bytes(tiny, qlora, "fp16") == head * 2
    assert ho.dequantized_head_bytes(tiny, qlora.model_copy(
        update={"quantized_head": False}), "bf16") == 0.0
    assert ho.dequantized_head_bytes(tiny, litgpt_cfg(method="lora", lora_rank=8), "bf16") == 0


def test_nf4_without_double_quantization_keeps_fp32_absmax(tiny):
    dq = tiny_config(method="qlora", lora_rank=8, pure_bf16=True, quantized_head=True)
    plain = dq.model_copy(update={"nf4_double_quant": False})
    c = count_params(tiny)
    # 0.5 B codes + 4 B absmax / 64 weights = 0.5625 B, against 0.5 + 0.127 / 8
    assert states.nf4_bytes_per_param(plain) == 0.5625
    assert states.weight_bytes(tiny, plain, "bf16") - states.weight_bytes(tiny, dq, "bf16") == \
        pytest.approx((c.layer_linear + c.lm_head) * (0.5625 - states.NF4_BYTES_PER_PARAM))


def test_case_weight_quant_names_the_nf4_recipe():
    assert _double_quant("bnb.nf4 (no double quantization)") is False
    assert _double_quant("bnb.nf4-dq") is True
    assert _double_quant("bnb-nf4") is None and _double_quant(None) is None


def test_phases_of_a_loop_that_holds_its_outputs(tiny):
    qlora = litgpt_cfg(method="qlora", lora_rank=8, quant_keeps_inputs=True)
    phases = mem.phase_terms(tiny, qlora, "bf16")
    held = ho.held_bytes_per_token(tiny, qlora, 1000) * 8
    acts = mem.activation_bytes(tiny, qlora)
    assert phases[ho.FWD_END_PHASE]["held_outputs"] == held
    assert phases[ho.FWD_END_PHASE]["activations"] == acts
    # the 16-bit logits and their fp32 copy, and the final norm's output
    assert phases[ho.FWD_END_PHASE]["logits_and_loss"] == 8 * 1000 * 6 + 8 * 64 * 2
    head = phases[ho.HEAD_PHASE]
    assert head["logits_and_loss"] == 8 * 1000 * 2 + 8 * 64 * 2
    assert head["dequantized_head"] == 64_000 * 4 and head["held_outputs"] == held
    assert phases[mem.BWD_END_PHASE]["held_outputs"] == phases[mem.STEP_PHASE]["held_outputs"] \
        == held
    # the start of backward holds the current logits in its loss buffers, not a second copy
    assert "held_outputs" not in phases[mem.FWD_PHASE]
    # a loop that lets its outputs go has the three phases and terms it had
    plain = mem.phase_terms(tiny, qlora.model_copy(update={"holds_previous_outputs": False}),
                            "bf16")
    assert set(plain) == {mem.FWD_PHASE, mem.BWD_END_PHASE, mem.STEP_PHASE}
    assert all("held_outputs" not in t and "dequantized_head" not in t for t in plain.values())


def _probe(row, tiny):
    """The measured row's model and LitGPT config."""
    model = tiny.model_copy(update={
        "num_layers": row["layers"], "hidden_size": row["hidden"], "ffn_hidden_size": row["ffn"],
        "num_attention_heads": row["heads"], "num_kv_heads": row["kv_heads"],
        "head_dim": row["hidden"] // row["heads"], "vocab_size": row["vocab"]})
    targets = ("q", "v") if row["targets"] == "qv" else ("all-linear",)
    cfg = litgpt_cfg(method=row["method"], lora_rank=8, lora_targets=targets,
                     micro_batch_size=row["micro_batch"], seq_len=row["seq"],
                     quant_keeps_inputs=row["bitsandbytes_keeps_inputs"], lora_dropout=0.05)
    return model, cfg


@pytest.mark.parametrize("row", MEASURED["rows"], ids=lambda r: "-".join(
    str(r[k]) for k in ("method", "bitsandbytes_keeps_inputs", "targets", "hidden")))
def test_measured_litgpt_loop(tiny, row):
    """Against LitGPT 5895df1's own code on the CPU: what one micro-batch leaves alive for the
    next (held), the loss buffers at the start of backward above the activations, and the end
    of the next forward above its activations and what it holds."""
    model, cfg = _probe(row, tiny)
    tokens = row["micro_batch"] * row["seq"]
    logits = tokens * row["vocab"]
    held = ho.held_bytes_per_token(model, cfg, row["vocab"]) * tokens
    assert held == row["held"]
    activations = row["after_forward"] - 4 * logits  # what the forward left besides the logits
    loss = row["backward_peak"] - activations
    head = ho.dequantized_head_bytes(model, cfg, "bf16")
    forward = row["forward_peak"] - row["held"] - activations
    if head < 4 * logits:  # logits-bound: the outputs and the chunked loss set the peaks
        # the last chunk has 127 positions, not 128: 1 - 1/512 of a chunk's gradients less
        assert loss == pytest.approx(held_chunked_loss_bytes(cfg) * logits, rel=1e-3)
        assert forward == ho.output_bytes_per_logit(cfg) * logits
    else:
        # the last chunk's dequantised head with the chunks before it; the phase counts every
        # chunk's 16-bit logits (2 B over 1/n more: its backward twin, the held fp32 logits
        # and their 16-bit gradients, 6 B, with the dequantised head)
        chunks = math.ceil(row["seq"] / 128)
        assert forward == 2 * logits * (chunks - 1) / chunks + head
        assert loss == pytest.approx(6 * logits + head, abs=64)  # + the loss scalars
        phase = mem.phase_terms(model, cfg, "bf16")[ho.HEAD_PHASE]
        assert phase["logits_and_loss"] + phase["dequantized_head"] - forward == pytest.approx(
            2 * logits / chunks + 2 * tokens * row["hidden"])
