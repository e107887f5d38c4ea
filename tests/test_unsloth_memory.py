"""Unsloth's memory semantics (issue 17: profile facts offload_checkpoints, fused_lora_kernels,
loss token-fused with loss_token_chunk_gib), against byte counts written out from the kernels
the unsloth profile cites, and the 24 GB row of Unsloth's context-length table they decide."""

from __future__ import annotations

import math

import pytest
from conftest import tiny_config

from planner.catalog.frameworks import config_fields, resolve
from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.catalog.request import TrainConfig
from planner.models import memory as mem
from planner.models.host_ram import offloaded_checkpoint_bytes
from planner.models.loss_buffers import loss_token_chunks
from planner.models.workloads import estimate_memory
from planner.validation.validate import load_cases, predict_case

ALL_LINEAR = ("all-linear",)


@pytest.fixture(scope="module")
def shipped():
    return load_catalog()


@pytest.fixture(scope="module")
def llama8b(shipped):
    return shipped.model("llama-3.1-8b").spec


def lora(**kw) -> TrainConfig:
    base = {"method": "lora", "lora_rank": 16, "lora_targets": ALL_LINEAR,
            "checkpointing": "full", "seq_len": 4096}
    return TrainConfig(**{**base, **kw})


def test_fused_lora_layer_saves_inputs_norm_stats_and_gate_up(tiny):
    # tiny-llama: h = 64, f = 128, q width 64, k/v width 32 (g = 1/2).
    # attention q, k, v, o: (64 + 32 + 32 + 64) x 2 B = 384; two fast RMSNorms: 16-bit input
    # (128 B) + fp32 inverse RMS (4 B) each = 264; LoRA_QKV and LoRA_MLP inputs 2 x 128 = 256;
    # LoRA_MLP e, g: 2 x 128 x 2 B = 512 -> 1,416 B per token (no A-projection outputs)
    fused = tiny_config(method="lora", lora_targets=ALL_LINEAR, fused_lora_kernels=True)
    plain = fused.model_copy(update={"fused_lora_kernels": False})
    assert mem.layer_activation_bytes_per_token(tiny, fused) == 1416
    assert mem.layer_activation_bytes_per_token(tiny, plain) > 1416
    # backward: DW = dY @ down^T is the one new f-wide tensor (128 x 2 B); the rest in place
    assert mem.backward_working_set_bytes_per_token(tiny, fused) == 1416 + 256


def test_fused_kernels_need_adapters_on_all_seven_matrices(tiny):
    qv = tiny_config(method="lora", lora_targets=("q", "v"), fused_lora_kernels=True)
    assert mem.layer_activation_bytes_per_token(tiny, qv) == \
        mem.layer_activation_bytes_per_token(tiny, qv.model_copy(
            update={"fused_lora_kernels": False}))
    full = tiny_config(fused_lora_kernels=True)  # full fine-tuning: no LoRA kernels
    assert mem.layer_activation_bytes_per_token(tiny, full) == 2432


def test_offloaded_checkpoints_keep_two_layer_inputs_on_the_gpu(llama8b):
    on_gpu = lora(offload_checkpoints=True)
    plain = lora()
    layer_input = 2 * 4096 * 4096  # 16-bit h x tokens
    working = mem.backward_working_set_bytes_per_token(llama8b, plain) * 4096
    assert mem.activation_bytes(llama8b, plain) == 32 * layer_input + working
    assert mem.activation_bytes(llama8b, on_gpu) == 2 * layer_input + working
    # the host holds every layer's input; nothing without offloading or recomputation
    # (Unsloth's offload is part of its checkpointing)
    assert offloaded_checkpoint_bytes(llama8b, on_gpu) == 32 * layer_input
    assert offloaded_checkpoint_bytes(llama8b, plain) == 0
    no_ac = on_gpu.model_copy(update={"checkpointing": "none"})
    assert offloaded_checkpoint_bytes(llama8b, no_ac) == 0
    assert mem.activation_bytes(llama8b, no_ac) == mem.activation_bytes(
        llama8b, plain.model_copy(update={"checkpointing": "none"}))


def test_offloaded_activations_without_checkpointing_keep_two_layers_on_the_gpu(llama8b):
    """torchtune's activation offloading without recomputation (and prime-rl's): every saved
    tensor of a layer goes to the host; backward has the layer it runs (its working set) and
    the next one reloaded."""
    plain = lora(checkpointing="none")
    off = plain.model_copy(update={"offload_activations": True})
    saved = mem.layer_activation_bytes_per_token(llama8b, plain) * 4096
    working = mem.backward_working_set_bytes_per_token(llama8b, plain) * 4096
    assert mem.activation_bytes(llama8b, plain) == 32 * saved
    assert mem.activation_bytes(llama8b, off) == saved + working
    assert offloaded_checkpoint_bytes(llama8b, off) == 32 * saved
    # selective checkpointing keeps its own: no offload modelled there
    sel = lora(checkpointing="selective")
    assert mem.activation_bytes(llama8b, sel.model_copy(update={"offload_activations": True})) \
        == mem.activation_bytes(llama8b, sel)
    # under full checkpointing the saved tensors are the layers' inputs: Unsloth's offload
    full = lora()
    assert mem.activation_bytes(llama8b, full.model_copy(update={"offload_activations": True})) \
        == mem.activation_bytes(llama8b, full.model_copy(update={"offload_checkpoints": True}))


def test_shared_schema_activation_offload_saves_what_torchtunes_table_says(shipped):
    """extra.activation_offload (../shared/validation's key) offloads the saved activations
    (TrainConfig.offload_activations).
    torchtune's README optimisation table (Llama 3.2 3B, batch 2, 4,096 tokens, A100,
    cumulative) measures '+ Activation Offloading' at 23.1 -> 21.8 GiB: 1.3 GiB saved by
    offloading the checkpointed layer inputs; the memory model, never fitted on it, gives the
    same within 0.2 GiB."""
    case = next(c for c in load_cases(shipped_validation_dir() / "memory_cases.yaml")
                if c["id"] == "torchtune-llama3.2-3b-full-8bitadam-actoffload")
    assert case["extra"]["activation_offload"] is True
    kept = {**case, "extra": {**case["extra"], "activation_offload": False}}
    saved = predict_case(kept, shipped).predicted_gib - predict_case(case, shipped).predicted_gib
    assert saved == pytest.approx(23.1 - 21.8, abs=0.2)


@pytest.mark.parametrize(("tokens", "chunks"), [(1000, 1), (8192, 1), (9000, 4), (78_475, 12)])
def test_token_chunks_keep_each_chunk_under_the_target(llama8b, tokens, chunks):
    # whole fp32 logits: tokens x 128,256 x 4 B; chunks: that / 4 GiB, up to a multiple of 4
    # (1,000 tokens: 0.48 GiB and 8,192: 3.91 GiB, one chunk; 9,000: 4.3 GiB -> 4;
    # 78,475: 37.5 GiB -> 12)
    c = lora(seq_len=tokens, loss_token_chunk_gib=4.0)
    assert loss_token_chunks(llama8b, c) == chunks
    per_chunk = math.ceil(tokens / chunks) * llama8b.vocab_size * 4 / mem.GIB
    assert per_chunk <= 4.0
    # one chunk's buffers (12 B per logit) + grad of the hidden states + final-norm output
    assert mem.logits_bytes(llama8b, c) == pytest.approx(
        math.ceil(tokens / chunks) * llama8b.vocab_size * mem.cal.LOGIT_BYTES_UNCHUNKED
        + 2 * tokens * 4096 * 2)


def test_a_token_fused_loss_is_never_alive_with_the_recompute_working_set(llama8b):
    c = lora(seq_len=32_768, loss_token_chunk_gib=4.0)
    acts = mem.activation_phase_terms(llama8b, c)[mem.FWD_PHASE]
    kept = 32 * 2 * 4096 * 32_768
    working = mem.backward_working_set_bytes_per_token(llama8b, c) * 32_768
    assert acts["activations"] + acts["logits_and_loss"] == pytest.approx(
        kept + max(working, mem.logits_bytes(llama8b, c)))
    # a whole-vocabulary loss the loop does not hold is freed before the recompute too
    # (tests/test_loss_liveness.py); one held through backward keeps its fp32 logits alive
    held = c.model_copy(update={"loss_token_chunk_gib": None, "loss_holds_logits": True})
    acts = mem.activation_phase_terms(llama8b, held)[mem.FWD_PHASE]
    assert acts["activations"] + acts["logits_and_loss"] == pytest.approx(kept + max(
        mem.logits_bytes(llama8b, held), working + 32_768 * llama8b.vocab_size * 4.0))


def test_only_the_unsloth_profile_sets_them(shipped):
    fields = config_fields(resolve(shipped, "unsloth"), workload="sft", sharded=False)
    assert fields["offload_checkpoints"] and fields["fused_lora_kernels"]
    assert fields["loss_token_chunk_gib"] == 4.0 and not fields["chunked_loss"]
    for other in ("hf-trainer", "torchtune", "prime-rl", "llama-factory"):
        f = config_fields(resolve(shipped, other), workload="sft", sharded=False)
        assert not f.get("offload_checkpoints") and not f.get("fused_lora_kernels")
        assert f.get("loss_token_chunk_gib") is None


def test_unsloths_78k_token_row_fits_24_gb_and_hf_does_not(shipped):
    """Unsloth's context-length table: Llama 3.1 8B QLoRA r32 on all linear layers, batch 1,
    78,475 tokens fit 24 GB with Unsloth. Each of its three mechanisms is needed: without any
    one the same job is predicted not to fit."""
    cases = {c["id"]: c for c in load_cases(shipped_validation_dir() / "memory_cases.yaml")}
    case = cases["unsloth-bench-llama3.1-8b-qlora-unsloth-24gb"]
    r = predict_case(case, shipped)
    assert r.predicted_fits is True and r.predicted_gib <= 24
    from planner.validation.case_inputs import case_config

    cfg, resolved = case_config(case, shipped)
    gpu = shipped.gpu("h100-sxm").model_copy(update={"memory_gib": 24})
    for off in ({"offload_checkpoints": False}, {"fused_lora_kernels": False},
                {"loss_token_chunk_gib": None, "chunked_loss": True}):
        est = estimate_memory(resolved.spec, gpu, cfg.model_copy(update=off))
        assert not est.fits(), off


def test_a_case_stating_plain_checkpointing_or_whole_logits_gets_them(shipped):
    """The case's own statements win over the profile: extra.offloaded_checkpointing false keeps
    every layer input on the GPU, extra.chunked_ce false computes the whole logits."""
    from planner.validation.case_inputs import case_config

    cases = {c["id"]: c for c in load_cases(shipped_validation_dir() / "memory_cases.yaml")}
    case = cases["unsloth-bench-llama3.1-8b-qlora-unsloth-24gb"]
    cfg, _ = case_config(case, shipped)
    assert cfg.offload_checkpoints and cfg.loss_token_chunk_gib == 4.0
    plain = {**case, "extra": {**case["extra"], "offloaded_checkpointing": False,
                               "chunked_ce": False}}
    cfg, _ = case_config(plain, shipped)
    assert not cfg.offload_checkpoints and cfg.loss_token_chunk_gib is None
    assert not cfg.chunked_loss and cfg.lm_head_vocab_chunk is None
    assert predict_case(plain, shipped).predicted_fits is False
