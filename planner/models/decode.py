"""Serving decode: tokens per second of autoregressive generation (weights and KV cache read per
step at the GPU's memory bandwidth, batched up to what the KV cache holds); the RL rollout
engines and the decode validation cases use it."""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.catalog.params import count_params
from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec
from planner.errors import PlannerError
from planner.models import efficiency as eff
from planner.models import host_launches as hl
from planner.models.fitted import fitted
from planner.models.flops import attention_fwd_flops_per_layer, matmul_params, peak_tflops
from planner.models.memory import GIB, kv_bytes_per_token
from planner.models.network import Links, resolve_links, ring_factor
from planner.models.throughput import forward_flops_per_token

# ---------------------------------------------------------------------------------------------
# Decoding (generation) and prefill
# ---------------------------------------------------------------------------------------------
# Host time per layer of one decoding step of an engine that runs without CUDA graphs (eager
# PyTorch: the CPU launches every kernel of the step, one layer after another, and the GPU
# waits for it once its own work is shorter): the DeepSpeed HybridEngine row of the measured
# eager GPT-2 decode (host_launches.EAGER_GPT2_DECODE_MS), 144.0 ms / 32 / 12 = 0.375 ms per layer
# (vLLM's 0.40). One host measured: a slower host is slower still.
EAGER_HOST_S_PER_LAYER = hl.EAGER_GPT2_DECODE_MS["deepspeed-hybrid"] * 1e-3 / (
    hl.GPT2_DECODE_TOKENS * hl.GPT2_LAYERS)
# Host seconds per running sequence between two decoding steps of vLLM's V0 engine (vLLM before
# 0.8, V1 the default from 0.8.0; ROCm builds and V0 fallbacks later): LLMEngine.step schedules,
# builds the step's inputs and turns each sampled token into Python outputs sequence by
# sequence, while the GPU waits (the async output processor that overlaps part of it needs CUDA
# graphs: "Since, enforce-eager is enabled, async output processor cannot be used", the
# warning such runs log). V1 moves scheduling and output processing off the step's critical
# path (a separate engine-core process, persistent batch). Fitted by benchmarks/fit.py on the
# generation phase times (extra.timing_gen_s) of VLLM_V0_CASES, RL iterations that ran V0: the
# median of the implied values (fit.implied_v0_host_s_per_seq), with the other
# constants in place (planner/models/fitted.yaml; leave-one-source-out in benchmarks/README.md).
VLLM_V0_HOST_S_PER_SEQ: float = fitted()["efficiency"]["vllm_v0_host_s_per_seq"]
VLLM_V0_CASES: tuple[str, ...] = (
    "verl_amd_ppo_deepseek7b_8xMI300", "verl_amd_grpo_deepseek7b_8xMI300",
    "playverl_ppo_qwen2.5_0.5b_8xH100")


def eager_host_floor_s(model: ModelSpec) -> float:
    """The shortest decoding step of an eager engine (no CUDA graphs) on ``model``: its layers
    x EAGER_HOST_S_PER_LAYER."""
    return model.num_layers * EAGER_HOST_S_PER_LAYER


def weight_bytes_per_param(precision: str, weight_bits: int | None = None) -> float:
    """Stored inference weights: 4-bit checkpoints 0.5 B (+ group scales, GPTQ/AWQ 128-groups
    ~0.52 B), fp8 1 B, 16-bit 2 B."""
    if weight_bits == 4:
        return 0.5 + 2.5 / 128
    if weight_bits == 8 or precision == "fp8":
        return 1.0
    return 2.0


@dataclass(frozen=True)
class DecodeEstimate:
    """Generation of ``batch`` sequences of ``response_len`` tokens after ``prompt_len``."""

    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    batch: int
    prefill_s: float
    decode_s: float
    step_time_first_s: float
    step_time_last_s: float
    limited_by: str  # "memory bandwidth" | "compute" | "communication"
    kv_cache_gib: float
    weights_gib_per_gpu: float
    stack: str
    notes: tuple[str, ...] = field(default_factory=tuple)


def max_decode_batch(
    model: ModelSpec, gpu: GpuSpec, *, tp: int, context: int, weight_bytes: float,
    kv_bytes: float, memory_fraction: float,
) -> int:
    """Sequences whose full-length KV cache fits next to the weights in memory_fraction of the
    GPU (vLLM gpu_memory_utilization, TensorRT-LLM free-memory fraction), capped at
    MAX_DECODE_BATCH."""
    budget = gpu.memory_gib * GIB * memory_fraction - weight_bytes
    per_seq = kv_bytes_per_token(model, kv_bytes) / tp * context
    return max(1, min(eff.MAX_DECODE_BATCH, int(budget // per_seq)))


def _decode_step(
    model: ModelSpec, gpu: GpuSpec, *, tp: int, batch: int, context: float, weights: float,
    kv_bytes: float, bw_eff: float, peak_flops: float, links: Links, host_floor_s: float = 0.0,
    host_per_seq_s: float = 0.0,
) -> tuple[float, str]:
    """One decoding step: max(bytes / (bandwidth x eff), FLOPs / achievable FLOP/s) + the TP
    all-reduces, and at least ``host_floor_s`` (an eager engine's host launching the step's
    kernels ahead of the GPU: eager_host_floor_s); then the host's work between steps while the
    GPU waits, batch x ``host_per_seq_s`` (vLLM V0: VLLM_V0_HOST_S_PER_SEQ).
    Bytes = weights on the GPU + batch x context x KV per token / tp; FLOPs = batch x (2 N_active
    + attention over the context) / tp. With tp > 1, 2 all-reduces per layer of batch x h x 2 B
    at ALLREDUCE_LATENCY_S each plus their bytes."""
    kv = batch * context * kv_bytes_per_token(model, kv_bytes) / tp
    mem_t = (weights + kv) / (gpu.memory_bandwidth_gbps * 1e9 * bw_eff)
    attn = model.num_layers * attention_fwd_flops_per_layer(model, int(context) * 2,
                                                            causal_skip=True)
    flops = batch * (2 * matmul_params(model) + attn) / tp
    comp_t = flops / peak_flops
    comm_t = 0.0
    if tp > 1:
        msg = batch * model.hidden_size * 2
        per = eff.ALLREDUCE_LATENCY_S + ring_factor(tp, "all-reduce") * msg / (
            links.collective_gbps(tp, False) * 1e9)
        comm_t = 2 * model.num_layers * per
    bound = "memory bandwidth" if mem_t >= comp_t else "compute"
    if comm_t > max(mem_t, comp_t):
        bound = "communication"
    gpu_t = max(mem_t, comp_t) + comm_t
    between = batch * host_per_seq_s
    if host_floor_s > gpu_t:
        return host_floor_s + between, "host kernel launches"
    return gpu_t + between, "host between steps" if between > gpu_t else bound


def _decode_segments(model: ModelSpec, gpu: GpuSpec, *, prompt_len: float, span: float,
                     segments: int, tp: int, batch: int, weights: float, kv_bytes: float,
                     bw_eff: float, peak_flops: float, links: Links, host_floor_s: float = 0.0,
                     host_per_seq_s: float = 0.0) -> tuple[float, list[str], list[float]]:
    """(seconds, bounds, step times) of decoding ``segments`` spans of ``span`` tokens each,
    every span at its midpoint context (midpoint rule); the rest as _decode_step takes them."""
    decode = 0.0
    bounds: list[str] = []
    steps = []
    for k in range(segments):
        ctx = prompt_len + (k + 0.5) * span
        t, b = _decode_step(model, gpu, tp=tp, batch=batch, context=ctx, weights=weights,
                            kv_bytes=kv_bytes, bw_eff=bw_eff, peak_flops=peak_flops, links=links,
                            host_floor_s=host_floor_s, host_per_seq_s=host_per_seq_s)
        decode += t * span
        bounds.append(b)
        steps.append(t)
    return decode, bounds, steps


def estimate_decode(
    model: ModelSpec, gpu: GpuSpec, *, prompt_len: int, response_len: int, tp: int = 1,
    batch: int | None = None, precision: str = "bf16", weight_bits: int | None = None,
    kv_bits: int | None = None, stack: str = "vllm", memory_fraction: float = 0.9,
    platform: PlatformSpec | None = None, segments: int = 16, efficiency: float | None = None,
    host_floor_s: float = 0.0, context_offset: float = 0.0, host_per_seq_s: float = 0.0,
) -> DecodeEstimate:
    """Offline generation throughput of ``batch`` sequences (None: as many as fit).

    Time = prefill (compute bound: batch x prompt x forward FLOPs at the 16-bit or fp8 peak)
    + the sum of decoding steps, each bound by HBM bandwidth (weights/tp + KV cache reads)
    or, at large batch, by compute (DESIGN.md s.4). The sum over steps is a midpoint rule over
    ``segments`` equal spans of the response. fp8 serving stores weights (and, unless kv_bits
    says otherwise, the KV cache) in 8 bit. ``efficiency`` replaces the stack's calibrated
    roofline share (efficiency.DECODE_EFFICIENCY; used to calibrate it). ``host_floor_s``: the
    shortest decoding step an eager engine's host allows (eager_host_floor_s; 0 with CUDA graphs).
    ``host_per_seq_s``: host seconds per running sequence between steps (vLLM V0's engine loop,
    VLLM_V0_HOST_S_PER_SEQ; 0 otherwise).
    ``context_offset``: tokens added to every decoding step's context (the KV reads of responses
    of unequal length: rltime.length_context_offset); the prefill is not affected.
    """
    if stack not in eff.DECODE_STACKS:
        raise PlannerError(f"unknown decode stack {stack!r}; known: {', '.join(eff.DECODE_STACKS)}")
    links = resolve_links(gpu, platform=platform)
    prec = "fp8" if precision == "fp8" and gpu.fp8_dense_tflops else "bf16"
    wbytes = count_params(model).total * weight_bytes_per_param(prec, weight_bits) / tp
    kvb = (kv_bits / 8) if kv_bits else (1.0 if prec == "fp8" else 2.0)
    context = prompt_len + response_len
    notes = []
    if batch is None:
        batch = max_decode_batch(model, gpu, tp=tp, context=context, weight_bytes=wbytes,
                                 kv_bytes=kvb, memory_fraction=memory_fraction)
        notes.append(f"batch {batch}: as many sequences of {context} tokens as the KV cache holds "
                     f"in {memory_fraction:.0%} of memory")
    bw_eff = eff.DECODE_EFFICIENCY[stack] if efficiency is None else efficiency
    c_eff = eff.matmul_fraction(gpu, prec) * bw_eff
    peak = peak_tflops(gpu, prec)
    fwd = forward_flops_per_token(model, prompt_len)
    prefill = batch * prompt_len * fwd / tp / (peak * 1e12 * c_eff)
    decode, bounds, steps = _decode_segments(
        model, gpu, prompt_len=prompt_len + context_offset, span=response_len / segments,
        segments=segments, tp=tp, batch=batch, weights=wbytes, kv_bytes=kvb, bw_eff=bw_eff,
        peak_flops=peak * 1e12 * c_eff, links=links, host_floor_s=host_floor_s,
        host_per_seq_s=host_per_seq_s)
    total = prefill + decode
    out = batch * response_len / total
    return DecodeEstimate(
        output_tokens_per_s=out,
        output_tokens_per_s_per_gpu=out / tp,
        batch=batch,
        prefill_s=prefill,
        decode_s=decode,
        step_time_first_s=steps[0],
        step_time_last_s=steps[-1],
        limited_by=max(set(bounds), key=bounds.count),
        kv_cache_gib=batch * context * kv_bytes_per_token(model, kvb) / tp / GIB,
        weights_gib_per_gpu=wbytes / GIB,
        stack=stack,
        notes=tuple(notes),
    )
