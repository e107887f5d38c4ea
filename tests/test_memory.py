"""Memory terms against hand-computed values (arithmetic in the comments)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import tiny_config

from planner import memory as mem

DATA = Path(__file__).parent / "data"
N = 202_048  # tiny-llama parameters (see test_catalog.py)





cfg = tiny_config


def test_full_adamw_single_gpu_is_16_bytes_plus_step(tiny, gpu):
    # 2 B weights + 4 B master + 8 B Adam moments = 14N resident; the optimizer step adds
    # 2 B gradients + 4 B fp32 temporary = 20N = 4,040,960 B.
    est = mem.estimate_memory(tiny, gpu, cfg())
    assert est.terms["weights"] == 2 * N
    assert est.terms["master_weights"] == 4 * N
    assert est.terms["optimizer_states"] == 8 * N
    assert est.phase == "optimizer step"
    assert est.allocated == 20 * N


def test_activation_and_logit_terms(tiny):
    # per token per layer: attention q,o 2*64 + k,v 2*32 -> 192 elements * 2 B = 384;
    # two norms (input + output) 4*64*2 B = 512; SwiGLU 4*128*2 B = 1024 -> 1920 B.
    c = cfg()
    assert mem.layer_activation_bytes_per_token(tiny, c) == 1920
    # 2 layers * 8 tokens * 1920 = 30,720
    assert mem.activation_bytes(tiny, c) == 30_720
    # logits 8 tokens * 1000 vocab * 12 B (fp32 loss) + final norm output 8 * 64 * 2 B = 97,024
    assert mem.logits_bytes(tiny, c) == 97_024
    # 16-bit loss: 8 * 1000 * 6 + 1024 = 49,024; chunked: 8 * 1000 * 3 + 1024 = 25,024
    assert mem.logits_bytes(tiny, cfg(loss_in_fp32=False)) == 49_024
    assert mem.logits_bytes(tiny, cfg(chunked_loss=True)) == 25_024


def test_full_recompute_keeps_layer_inputs(tiny):
    # kept: 2 layers * 8 tokens * 64 * 2 B = 2048; recompute working set 1.25 x one layer's
    # activations: 1.25 * 8 * 1920 = 19,200
    c = cfg(checkpointing="full")
    assert mem.activation_bytes(tiny, c) == 2048 + 19_200


def test_compile_saves_two_mlp_tensors(tiny):
    # SwiGLU under torch.compile saves 2f instead of 4f: 1920 - 2*128*2 B = 1408
    assert mem.layer_activation_bytes_per_token(tiny, cfg(compiled=True)) == 1408


def test_zero_stages_shard_states(tiny, gpu):
    # dp = 4: ZeRO-1 shards master + moments (12N/4), ZeRO-2 also gradients, ZeRO-3 weights.
    z1 = mem.estimate_memory(tiny, gpu, cfg(num_gpus=4, zero_stage=1)).terms
    z3 = mem.estimate_memory(tiny, gpu, cfg(num_gpus=4, zero_stage=3)).terms
    assert z1["master_weights"] == pytest.approx(4 * N / 4)
    assert z1["optimizer_states"] == pytest.approx(8 * N / 4)
    assert z1["weights"] == 2 * N
    assert z3["weights"] == pytest.approx(2 * N / 4)
    assert z3["gradients"] == pytest.approx(2 * N / 4)
    assert z3["gathered_params"] > 0


def test_lora_trains_only_adapters(tiny, gpu):
    # rank 4 on q and v: per layer 4*(64+64) + 4*(64+32) = 512 + 384 = 896; 2 layers = 1792
    c = cfg(method="lora", lora_rank=4, lora_targets=("q", "v"))
    assert mem.trainable_params(tiny, c) == 1792
    est = mem.estimate_memory(tiny, gpu, c)
    assert est.terms["adapters"] == 1792 * 4  # fp32 adapters
    assert est.terms["optimizer_states"] == 1792 * 8
    assert est.terms["master_weights"] == 0
    assert est.terms["weights"] == 2 * N


def test_qlora_quantizes_layer_matrices(tiny):
    # layer matrices: 2 * (4096 + 2048 + 2048 + 4096 + 24,576) = 73,728 at 0.5159 B;
    # the rest (202,048 - 73,728 = 128,320: embeddings, head, norms) in fp32 (PEFT's
    # prepare_model_for_kbit_training), in 16 bit for GPTQ and pure bf16.
    c = cfg(method="qlora", lora_rank=4)
    expected = 73_728 * mem.NF4_BYTES_PER_PARAM + 128_320 * 4
    assert mem.weight_bytes(tiny, c, "bf16") == pytest.approx(expected)
    gptq = cfg(method="qlora", lora_rank=4, quant_format="gptq")
    expected = 73_728 * mem.GPTQ_BYTES_PER_PARAM + 128_320 * 2
    assert mem.weight_bytes(tiny, gptq, "bf16") == pytest.approx(expected)


def test_dora_adds_magnitude_and_activations(tiny):
    lora = cfg(method="lora", lora_rank=4, lora_targets=("q", "v"))
    dora = cfg(method="dora", lora_rank=4, lora_targets=("q", "v"))
    # magnitude vectors: d_out of q (64) + v (32) per layer, 2 layers = 192
    assert mem.trainable_params(tiny, dora) - mem.trainable_params(tiny, lora) == 192
    assert mem.layer_activation_bytes_per_token(tiny, dora) > mem.layer_activation_bytes_per_token(
        tiny, lora
    )


def test_optimizers(tiny):
    # bytes of optimizer state per trainable parameter
    per = {o: mem.optimizer_state_bytes_per_param(tiny, cfg(optimizer=o))
           for o in ("adamw", "adamw-8bit", "sgd", "sgd-momentum", "adafactor")}
    assert per == {"adamw": 8, "adamw-8bit": 2, "sgd": 0, "sgd-momentum": 4,
                   "adafactor": 8 / 64}
    assert mem.optimizer_state_bytes_per_param(tiny, cfg(pure_bf16=True)) == 4


def test_offload_moves_states_to_host(tiny, gpu):
    on = mem.estimate_memory(tiny, gpu, cfg(num_gpus=2, zero_stage=2))
    off = mem.estimate_memory(tiny, gpu, cfg(num_gpus=2, zero_stage=2, offload="optimizer"))
    assert off.terms["optimizer_states"] == 0 and off.terms["master_weights"] == 0
    assert off.host_ram > on.host_ram
    assert off.allocated < on.allocated


def test_fp16_on_gpu_without_bf16(tiny, gpu):
    old = gpu.model_copy(update={"supports_bf16": False})
    est = mem.estimate_memory(tiny, old, cfg())
    assert est.precision == "fp16"
    assert any("loss scaling" in n for n in est.notes)


def test_tensor_and_pipeline_parallel_split(tiny, gpu):
    one = mem.estimate_memory(tiny, gpu, cfg())
    tp2 = mem.estimate_memory(tiny, gpu, cfg(num_gpus=2, tp=2))
    assert tp2.terms["weights"] == pytest.approx(one.terms["weights"] / 2)
    # pp = 2, grad_accum 4: the first stage keeps min(2, 4) = 2 micro-batches of its layer
    pp2 = cfg(num_gpus=2, pp=2, grad_accum=4)
    assert mem.activation_bytes(tiny, pp2) == 1 * 8 * 1920 * 2


def test_reserved_and_device_ordering(tiny, gpu):
    est = mem.estimate_memory(tiny, gpu, cfg(num_gpus=2, zero_stage=2))
    assert est.allocated < est.reserved < est.device
