"""Throughput terms against hand-computed values (arithmetic in the comments).

tiny-llama (tests/data): 2 layers, h 64, 4 heads x 16, 2 kv heads, SwiGLU ffn 128, vocab 1000,
untied. Matmul weights per layer: q 64x64 = 4,096, k 64x32 = 2,048, v 2,048, o 4,096,
gate/up/down 3 x 64x128 = 24,576 -> 36,864; two layers 73,728; head 1000 x 64 = 64,000;
N = 137,728. test-gpu: 100 TFLOPS bf16, 1000 GB/s, PCIe4 64 GB/s bidirectional, 8 per node,
no MAMF row (default 0.80).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import tiny_config

from planner.catalog.request import TrainConfig
from planner.errors import PlannerError
from planner.models import decode, flops, network
from planner.models import efficiency as eff
from planner.models import throughput as tp
from planner.models.memory import kv_bytes_per_token

DATA = Path(__file__).parent / "data"
N = 137_728
ALL_PARAMS = 202_048





cfg = tiny_config


def test_matmul_params(tiny):
    assert flops.layer_matmul_params(tiny, 0) == 36_864
    assert flops.head_matmul_params(tiny) == 64_000
    assert flops.matmul_params(tiny) == N


def test_full_training_flops(tiny):
    f = flops.training_flops(tiny, cfg())
    # forward 2N = 275,456; backward 4N (input + weight gradients) = 550,912
    assert f.linear_fwd == 2 * N
    assert f.linear_bwd == 4 * N
    # flash attention, causal: keys 8/2 = 4; 2 x 4 x (64 + 64) = 1,024 per layer, 2 layers
    assert f.attention_fwd == 2_048
    # backward recomputes the scores: 2.5 x 2,048 = 5,120
    assert f.attention_bwd == 5_120
    assert f.recompute_linear == f.recompute_attention == f.adapter == 0
    # model FLOPs: 6N + 3 passes x 2 layers x non-causal 2 x 8 x 128 = 826,368 + 12,288
    assert f.model == 6 * N + 12_288


def test_lora_skips_frozen_weight_gradients(tiny):
    f = flops.training_flops(tiny, cfg(method="lora", lora_rank=8, lora_targets=("q", "v")))
    assert f.linear_bwd == 2 * N  # input gradients only
    # adapters: q 8 x (64 + 64) = 1,024 and v 8 x (64 + 32) = 768 per layer -> 3,584;
    # forward 2 + backward 4 FLOPs per adapter parameter: 6 x 3,584 = 21,504
    assert f.adapter == 21_504


def test_full_recomputation_adds_a_forward(tiny):
    f = flops.training_flops(tiny, cfg(checkpointing="full"))
    assert f.recompute_linear == 2 * 73_728  # the layers, not the head
    assert f.recompute_attention == 2_048
    # without flash attention the square is computed: keys 8 -> 2,048 per layer, 2x backward
    g = flops.training_flops(tiny, cfg(flash_attention=False, checkpointing="selective"))
    assert g.attention_fwd == 4_096 and g.attention_bwd == 8_192
    assert g.recompute_attention == 4_096


def test_freeze_backward_covers_only_the_top_layers(tiny):
    f = flops.training_flops(tiny, cfg(method="freeze", freeze_trainable_layers=1))
    # input gradients of head + last layer 2 x (64,000 + 36,864), weight gradients 2 x 36,864
    assert f.linear_bwd == 2 * (64_000 + 36_864) + 2 * 36_864
    assert f.attention_bwd == 2.5 * 1_024


def test_moe_counts_active_experts(cat):
    m = cat.model("mixtral-8x7b").spec
    dense_like = sum(
        lin.d_in * lin.d_out * lin.count for lin in tp.layer_linears(m, 0)
        if lin.group != "expert"
    )
    expert = 3 * m.hidden_size * m.moe.expert_ffn_hidden_size  # one SwiGLU expert
    assert flops.layer_matmul_params(m, 0) == dense_like + 2 * expert  # top-2 of 8


def test_links_of_a_pcie_card(gpu):
    links = network.resolve_links(gpu)
    # PCIe gen4 x16 one way 16 x 1.969 GB/s x 0.62 (nccl-tests over PCIe) = 19.53 GB/s
    assert links.intra_node_gbps == pytest.approx(16 * 1.969 * 0.62)
    # PCIe gen4 x16: 16 x 1.969 x 0.80 = 25.2 GB/s to the host
    assert links.host_link_gbps == pytest.approx(16 * 1.969 * 0.8)
    assert links.network_assumed
    # no platform: 25 GB/s per GPU x 0.8
    assert links.inter_node_gbps == pytest.approx(20.0)


def test_communication_bytes(tiny):
    # DDP over 4 GPUs: all-reduce of 202,048 x 2 B gradients: 2 x 3/4 x 404,096 = 606,144
    assert network.dp_bytes_per_step(tiny, cfg(num_gpus=4)) == pytest.approx(606_144)
    # ZeRO-3: gather weights twice + reduce-scatter gradients: 3/4 x 3 x 404,096 = 1.5 x DDP
    assert network.dp_bytes_per_step(tiny, cfg(num_gpus=4, zero_stage=3)) == pytest.approx(909_216)
    # ZeRO-1: reduce-scatter gradients in the backward (3/4 x 404,096) + gather the updated
    # weights once after the step (3/4 x 404,096): together the DDP volume
    assert network.dp_bytes_per_step(tiny, cfg(num_gpus=4, zero_stage=1)) == pytest.approx(303_072)
    assert network.gather_bytes_per_step(tiny, cfg(num_gpus=4, zero_stage=1)) == pytest.approx(
        303_072)
    assert network.gather_bytes_per_step(tiny, cfg(num_gpus=4)) == 0.0
    # TP 2: 4 collectives x 2 layers x 2(2-1)/2 x (8 tokens x 64 x 2 B) = 8,192 per step
    assert network.tp_bytes_per_step(tiny, cfg(num_gpus=2, tp=2)) == pytest.approx(8_192)
    # full recomputation repeats the 2 forward collectives: 6 x 2 x 1,024 = 12,288
    assert network.tp_bytes_per_step(tiny, cfg(num_gpus=2, tp=2, checkpointing="full")) == 12_288


def test_pipeline_bubble():
    assert tp.pipeline_bubble_fraction(4, 12) == pytest.approx(3 / 12)
    assert tp.pipeline_bubble_fraction(4, 12, virtual_stages=2) == pytest.approx(3 / 24)
    assert tp.pipeline_bubble_fraction(1, 1) == 0


def test_step_time_adds_up(tiny, gpu):
    c = cfg()
    est = tp.estimate_throughput(tiny, gpu, c, utilisation=0.5, step_overhead_s=0.0)
    # compute: 8 tokens x 6N matmul FLOPs at 100e12 x 0.8 (MAMF default) x 0.5 x 0.173 (every
    # GEMM of 8 rows is far below the smallest measured dense GEMM: gemm.DENSE_GEMM_POINTS'
    # first share), plus the attention core's 2,048 + 5,120 FLOPs at FlashAttention-2's rate:
    # test-gpu has no architecture row, so the A100's (attention.py), at 512 tokens (the
    # shortest benchmarked length stands for 8): 99 / 312 of the peak, x 0.5 (the stack
    # utilisation)
    compute = 8 * (6 * N / (40e12 * 0.173) + 7_168 / (100e12 * 99 / 312 * 0.5))
    assert est.terms["compute"] == pytest.approx(compute)
    # AdamW step: 202,048 x 28 B at 1000 GB/s x 0.8
    opt = ALL_PARAMS * 28 / 800e9
    assert est.terms["optimizer_step"] == pytest.approx(opt)
    # eager elementwise ops (stack hf), per layer forward: 2 RMSNorms 2 x 36 x 64 = 4,608,
    # 2 residual adds 2 x 6 x 64 = 768, rotary 20 x (64 + 32) = 1,920, SwiGLU 10 x 128 =
    # 1,280 -> 8,576; 2 layers x (forward + 1.5 x backward) = 42,880 B per token x 8 tokens
    elementwise = 8 * 42_880 / 800e9
    assert est.terms["elementwise"] == pytest.approx(elementwise)
    # the host launches 2 layers x (38 forward + 71 backward) eager kernels and 91.45 outside
    # the layers at 35.55 us each (host_launches, measured): 11.0 ms, far longer than the GPU's
    # work, which runs behind them
    host = (2 * (38 + 71) + 91.45) * 35.55e-6
    assert est.raw["host_launches"] == pytest.approx(host)
    assert est.terms["host_launches"] == pytest.approx(host - (compute + opt + elementwise))
    # plus the Trainer's measured per-step host time (stack hf keeps it over the 0.0 passed)
    step = host + eff.MEASURED_STEP_OVERHEAD_S["hf"]
    assert est.step_time_s == pytest.approx(step)
    assert est.tokens_per_s == pytest.approx(8 / step)
    assert est.limited_by == "host kernel launches"  # a tiny model is all kernel launches
    assert sum(est.terms.values()) == pytest.approx(est.step_time_s)
    # compiled, the host floor is not modelled: the GPU's work is the step
    fused = tp.estimate_throughput(tiny, gpu, cfg(compiled=True), utilisation=0.5,
                                   step_overhead_s=0.0, stack="deepspeed")
    assert fused.terms["host_launches"] == 0 and fused.raw["host_launches"] == 0
    assert fused.step_time_s == pytest.approx(compute + opt)
    assert fused.limited_by == "memory bandwidth"  # then the optimizer step


def test_lora_matmul_traffic_on_every_stack(tiny, gpu):
    """LoRA's low-rank matmuls are memory-bound on every stack (efficiency.LORA_GEMM_BYTES);
    where elementwise ops are fused the scale-add into the frozen output is one kernel
    (LORA_FUSED_COMBINE_BYTES), eager model code counts it as elementwise traffic instead."""
    lora = {"method": "lora", "lora_rank": 8, "lora_targets": ("q", "v")}
    # per layer and token, q 64 -> 64 and v 64 -> 32: forward 2 x 64 + 2 x 64 + 2 x 64 + 2 x 32
    # = 448; backward 10 x 64 + 4 x 64 + 10 x 64 + 4 x 32 = 1,664; fused scale-add forward
    # 6 x 96 = 576, backward 4 x 96 = 384
    fused = tp.estimate_throughput(tiny, gpu, cfg(fused_elementwise=True, **lora),
                                   stack="megatron")
    assert fused.terms["adapters"] == pytest.approx(8 * 2 * (448 + 1_664 + 576 + 384) / 800e9)
    eager = tp.estimate_throughput(tiny, gpu, cfg(**lora), stack="hf")
    assert eager.terms["adapters"] == pytest.approx(8 * 2 * (448 + 1_664) / 800e9)
    # full checkpointing runs the forward again: + 448 + 576 per layer
    again = tp.estimate_throughput(tiny, gpu, cfg(checkpointing="full", fused_elementwise=True,
                                                  **lora), stack="megatron")
    assert again.terms["adapters"] == pytest.approx(
        8 * 2 * (2 * (448 + 576) + 1_664 + 384) / 800e9)
    assert tp.estimate_throughput(tiny, gpu, cfg(), stack="megatron").terms["adapters"] == 0


def test_elementwise_traffic_only_where_the_kernels_are_not_fused(tiny, gpu):
    """Eager model code moves every norm, rotary, activation and residual add through HBM on
    any stack; a framework whose kernels fuse them (TransformerEngine, Unsloth, Liger, XLA:
    TrainConfig.fused_elementwise from its profile) and torch.compile do not."""
    eager = tp.estimate_throughput(tiny, gpu, cfg(), stack="hf")
    assert eager.terms["elementwise"] > 0
    for stack in ("megatron", "unsloth", "fsdp", "prime-rl"):  # the stack does not decide it
        on = tp.estimate_throughput(tiny, gpu, cfg(), stack=stack)
        assert on.terms["elementwise"] == pytest.approx(eager.terms["elementwise"])
        fused = tp.estimate_throughput(tiny, gpu, cfg(fused_elementwise=True), stack=stack)
        assert fused.terms["elementwise"] == 0
    compiled = tp.estimate_throughput(tiny, gpu, cfg(compiled=True), stack="hf")
    assert compiled.terms["elementwise"] == 0
    # full checkpointing repeats the forward: (1 + 1.5 + 1) / (1 + 1.5) of the traffic
    again = tp.estimate_throughput(tiny, gpu, cfg(checkpointing="full"), stack="hf")
    assert again.terms["elementwise"] == pytest.approx(eager.terms["elementwise"] * 3.5 / 2.5)
    # LoRA on q and v adds the scale-and-add of their outputs: 10 x (64 + 32) = 960 B per
    # layer and pass on top of 8,576
    lora = tp.estimate_throughput(tiny, gpu, cfg(method="lora", lora_rank=8,
                                                 lora_targets=("q", "v")), stack="hf")
    assert lora.terms["elementwise"] == pytest.approx(
        eager.terms["elementwise"] * (8_576 + 960) / 8_576)


def test_step_overhead_default_is_the_calibrated_one(tiny, gpu):
    est = tp.estimate_throughput(tiny, gpu, cfg(), stack="deepspeed")
    assert est.terms["step_overhead"] == eff.STEP_OVERHEAD_S
    # the Trainer's (stack hf) is its measured one, whatever the calibration passes
    for overhead in (None, 0.1):
        hf = tp.estimate_throughput(tiny, gpu, cfg(), stack="hf", step_overhead_s=overhead)
        assert hf.terms["step_overhead"] == eff.MEASURED_STEP_OVERHEAD_S["hf"] < 0.01


def test_fixed_overhead_is_labelled_and_a_low_mfu_flagged(tiny, gpu):
    # the tiny model's step is 4e-8 s of compute and 7e-6 s of optimizer step: a 0.1 s
    # per-step overhead is the whole step
    est = tp.estimate_throughput(tiny, gpu, cfg(), step_overhead_s=0.1, stack="deepspeed")
    assert est.limited_by == "per-step overhead"
    assert est.mfu < tp.MFU_FLOOR
    [flag] = [n for n in est.notes if "floor" in n]
    assert "limited by per-step overhead" in flag and "step overhead is 0.1 s" in flag
    # without the overhead the same step is the host's kernel launches: still flagged
    est = tp.estimate_throughput(tiny, gpu, cfg(), step_overhead_s=0.0, stack="deepspeed")
    assert est.limited_by == "host kernel launches"
    assert any("host launches is" in n for n in est.notes)
    # compiled (no launch floor modelled), the optimizer's: named as such
    est = tp.estimate_throughput(tiny, gpu, cfg(compiled=True), step_overhead_s=0.0,
                                 stack="deepspeed")
    assert est.limited_by == "memory bandwidth"
    assert any("optimizer step is" in n for n in est.notes)


def test_mfu_floor_note_only_below_the_floor():
    terms = {"compute": 0.5, "step_overhead": 0.5}
    assert tp.low_mfu_note(tp.MFU_FLOOR, "compute", terms) is None
    note = tp.low_mfu_note(tp.MFU_FLOOR / 2, "compute", terms)
    assert note is not None and "step overhead is 0.5 s of the 1 s step (50%)" in note


def test_h100_70b_lora_is_compute_bound_with_plausible_mfu(cat):
    m = cat.model("llama-2-70b").spec
    gpu = cat.gpu("h100-sxm")
    c = TrainConfig(method="lora", num_gpus=8, tp=4, zero_stage=1, seq_len=8192,
                    checkpointing="none", precision="fp8", grad_accum=4)
    est = tp.estimate_throughput(m, gpu, c, platform=cat.platform("hgx-8gpu-sxm"),
                                 stack="megatron")
    assert est.limited_by == "compute"
    assert est.precision == "fp8"
    assert 0.2 < est.mfu < 0.6
    assert not any("floor" in n for n in est.notes)
    assert est.nodes == 1
    # tokens/s per GPU x model FLOPs = model TFLOP/s per GPU
    f = flops.training_flops(m, c)
    assert est.model_tflops_per_gpu == pytest.approx(est.tokens_per_s_per_gpu * f.model / 1e12)


def test_tensor_parallel_over_pcie_is_communication_bound(cat):
    m = cat.model("llama-2-70b").spec
    c = TrainConfig(method="lora", num_gpus=8, tp=4, zero_stage=1, seq_len=8192,
                    checkpointing="none", precision="fp8")
    est = tp.estimate_throughput(m, cat.gpu("l40s"), c, stack="megatron")
    assert est.limited_by == "communication"
    assert est.terms["tp_comm"] > 0.3 * est.step_time_s


def test_offload_and_qlora_terms(cat):
    m = cat.model("llama-3.1-8b").spec
    gpu = cat.gpu("a100-80gb-sxm")
    off = TrainConfig(num_gpus=1, zero_stage=2, offload="optimizer", seq_len=1024)
    est = tp.estimate_throughput(m, gpu, off, stack="deepspeed")
    assert est.terms["cpu_optimizer"] > 0 and est.terms["optimizer_step"] == 0
    assert any("host cores" in n for n in est.notes)
    q = tp.estimate_throughput(m, gpu, TrainConfig(method="qlora", seq_len=1024))
    assert q.terms["dequantize"] > 0


def test_unknown_stack_is_bad_input(tiny, gpu):
    with pytest.raises(PlannerError, match="unknown stack"):
        tp.estimate_throughput(tiny, gpu, cfg(), stack="jax")


def test_kv_cache_bytes(tiny, cat):
    # 2 (K, V) x 2 layers x 2 kv heads x 16 x 2 B = 256 B per token
    assert kv_bytes_per_token(tiny) == 256
    # Llama-2-7B: 2 x 32 x 32 x 128 x 2 B = 524,288 B (0.5 MiB) per token
    assert kv_bytes_per_token(cat.model("llama-2-7b").spec) == 524_288


def test_decode_is_bandwidth_bound_at_small_batch(tiny, gpu):
    est = decode.estimate_decode(tiny, gpu, prompt_len=8, response_len=8, batch=4,
                             stack="vllm", efficiency=0.5, segments=1)
    # one segment at context 8 + 4 = 12: weights 404,096 B + KV 4 x 12 x 256 = 12,288 B
    # at 1000 GB/s x 0.5 -> 8.3277e-7 s per step; compute 4 x (2N + 2 x 2 x 12 x 128)
    # = 1,126,400 FLOPs at 100e12 x 0.8 x 0.5 -> 2.8e-8 s, so bandwidth bound
    step = (404_096 + 12_288) / 500e9
    # prefill: 4 x 8 tokens x (2N + 2 layers x 2 x 4 x 128) = 32 x 277,504 FLOPs at 40e12
    prefill = 32 * (2 * N + 2_048) / 40e12
    assert est.step_time_first_s == pytest.approx(step)
    assert est.prefill_s == pytest.approx(prefill)
    assert est.output_tokens_per_s == pytest.approx(32 / (prefill + 8 * step))
    assert est.limited_by == "memory bandwidth"


def test_decode_batch_fills_memory(cat):
    m = cat.model("llama-2-7b").spec
    gpu = cat.gpu("a10g")
    est = decode.estimate_decode(m, gpu, prompt_len=256, response_len=128, stack="vllm")
    # (24 GiB x 0.9 - 13.5 GB weights) / (384 tokens x 0.5 MiB) ~ 40 sequences
    assert 30 < est.batch < 50
    big = decode.estimate_decode(m, cat.gpu("h100-sxm"), prompt_len=128, response_len=128,
                             stack="tensorrt-llm")
    assert big.batch == eff.MAX_DECODE_BATCH


def test_summary_has_the_check_json_keys(tiny, gpu):
    doc = tp.estimate_throughput(tiny, gpu, cfg()).summary()
    assert {"tokens_per_s", "step_time_s", "mfu", "limited_by"} <= set(doc)


def test_a_split_over_hosts_is_shown_with_the_link_it_is_timed_with():
    """Issue 18: 6 GPUs on 4-GPU hosts run 4 + 2, their data-parallel traffic over the
    network; the note says so with the bandwidths the estimate used, and a job inside one host
    says nothing."""
    from planner.catalog.load import load_catalog
    from planner.catalog.request import TrainConfig
    from planner.models.network import resolve_links
    from planner.models.throughput import estimate_throughput

    cat = load_catalog()
    model, gpu = cat.model("llama-3.1-8b").spec, cat.gpu("rtx-4090")
    plat = cat.platform("workstation-4gpu-epyc-rome")
    cfg = TrainConfig(num_gpus=6, method="lora", zero_stage=2, grad_accum=8)
    est = estimate_throughput(model, gpu, cfg, platform=plat)
    links = resolve_links(gpu, platform=plat)
    note = next(n for n in est.notes if n.startswith("6 GPUs on 2 hosts of 4"))
    assert "(1 x 4 + 2, an uneven split)" in note and "dp group traffic crosses hosts" in note
    assert f"{links.inter_node_gbps:.1f} GB/s per GPU" in note
    one_host = estimate_throughput(model, gpu, cfg.model_copy(update={"num_gpus": 4}),
                                   platform=plat)
    assert not any("hosts of" in n for n in one_host.notes)
