"""Liger's kernels as its code keeps them (linkedin/Liger-Kernel@ead96b6): the fused linear
cross-entropy (loss kind linear-fused, loss_buffers.linear_fused_loss_bytes) and fused norm /
SwiGLU kernels that save only their inputs (fused_elementwise). Checked by hand here and against
the H200 measurements of validation/project_cases_hfmeasured.yaml (set 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import tiny_config

from planner.catalog.frameworks import config_fields, resolve
from planner.catalog.load import load_catalog
from planner.models import memory as mem
from planner.models.loss_buffers import linear_fused_loss_bytes, logits_bytes
from planner.validation.validate import load_cases, predict_case

CAT = load_catalog()
MODEL = CAT.model("llama-3.1-8b").spec  # h 4096, vocab 128256
ROOT = Path(__file__).resolve().parents[1]


def test_the_chunk_rule_and_the_buffers_by_hand():
    # 8192 tokens: ceil(128256 / 4096) = 32 -> ceil(8192 / 32) = 256 rows a chunk (a power of 2)
    cfg = tiny_config(method="lora", seq_len=8192, loss_linear_fused=True)
    chunk_logits = 256 * 128256 * 2
    grad_input_and_norm_out = 2 * 8192 * 4096 * 2
    assert linear_fused_loss_bytes(MODEL, cfg) == chunk_logits + grad_input_and_norm_out + 8192 * 4
    assert logits_bytes(MODEL, cfg) == linear_fused_loss_bytes(MODEL, cfg)
    # 6000 tokens: ceil(6000 / 32) = 188 -> 256; full training adds the head's 16-bit gradient
    full = tiny_config(method="full", seq_len=6000, loss_linear_fused=True)
    assert linear_fused_loss_bytes(MODEL, full) == (256 * 128256 * 2 + 2 * 6000 * 4096 * 2
                                                    + 6000 * 4 + 128256 * 4096 * 2)
    # a loss over the whole logits holds 12 B per logit instead
    assert logits_bytes(MODEL, cfg) < 0.1 * logits_bytes(
        MODEL, cfg.model_copy(update={"loss_linear_fused": False}))


def test_fused_kernels_save_their_inputs_only():
    # RMSNorm: its 16-bit input and rstd (not the fp32 upcast), SwiGLU: gate and up (not act)
    eager = tiny_config(method="full")
    fused = eager.model_copy(update={"fused_elementwise": True})
    h, f = MODEL.hidden_size, MODEL.ffn_hidden_size
    saved = mem.layer_activation_bytes_per_token
    # full training: two fp32 norm inputs (8h) and two normalised copies (4h) become two 16-bit
    # inputs (4h); act(gate) (2f) is recomputed
    assert saved(MODEL, eager) - saved(MODEL, fused) == (8 * h + 4 * h - 4 * h) + 2 * f


def test_the_liger_profile_runs_the_fused_loss_and_kernels():
    fields = config_fields(resolve(CAT, "hf-trainer-liger"), workload="sft", sharded=False)
    assert fields["loss_linear_fused"] and fields["fused_elementwise"]
    assert not config_fields(resolve(CAT, "hf-trainer"), workload="sft",
                             sharded=False)["loss_linear_fused"]


@pytest.mark.parametrize("run", ["llama32_1b_full_bf16_gc_mb4_s4096",
                                 "llama32_1b_full_bf16_nogc_mb8_s2048",
                                 "llama31_8b_lora_gc_mb4_s4096",
                                 "llama31_8b_full_bf16_gc_mb4_s4096"])
def test_measured_liger_peaks_within_ten_percent(run):
    cases = {c["id"]: c for c in load_cases(ROOT / "validation/project_cases_hfmeasured.yaml")}
    assert abs(predict_case(cases[f"hfmeasured_liger_{run}_mem"], CAT).rel_err) < 0.10
