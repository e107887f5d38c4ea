"""Achievable rate of the fused attention kernels in training (vendor and kernel facts, pure).

The attention core (scores, softmax, weighted sum; forward, backward and recomputed forward) is
not a GEMM of the stack's linear layers: a fused kernel runs it, and the share of the dense
16-bit peak that kernel reaches depends on the GPU, the kernel and the sequence length (short
causal sequences spend more of their tiles on the diagonal). throughput.compute_seconds times
attention FLOPs at ``attention_fraction`` x the 16-bit peak instead of at the stack's matmul
rate. Every number below is a published kernel benchmark, not a fit.

FLOPs are counted as the benchmarks count them (flash_attn/utils/benchmark.py and the papers):
forward 4 x seq^2 x heads x head_dim per sequence, halved under a causal mask, backward 2.5x
the forward, i.e. exactly flops.attention_fwd_flops_per_layer with causal_skip and flops.py's
2.5x backward; a forward+backward rate is 3.5 forward-FLOP units over the two passes' time.
"""

from __future__ import annotations

import math
from typing import Literal

from planner.catalog.request import TrainConfig
from planner.catalog.specs import GpuSpec
from planner.models.flops import matmul_precision, peak_tflops

# fa2: FlashAttention-2 (also PyTorch SDPA's flash backend); fa3: FlashAttention-3 (Hopper);
# cudnn: cuDNN fused attention (TransformerEngine's FusedAttention); eager: no fused kernel.
AttentionKernel = Literal["fa2", "fa3", "cudnn", "eager"]

# Sequence lengths of the published kernel benchmarks (batch x seq = 16k tokens, 2048 wide:
# 16 heads of head dim 128, bf16/fp16).
SEQ_POINTS: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)

# Forward+backward TFLOPS/s, causal mask, head dim 128, at SEQ_POINTS (bar labels).
#   FlashAttention-2 (Dao 2023, arXiv 2307.08691, s.4.1 figures "Attention forward + backward
#   speed", panel (d) "With causal mask, head dimension 128"; the same figures are
#   Dao-AILab/flash-attention@0251105 assets/flash2_a100_fwd_bwd_benchmark.png and
#   assets/flash2_h100_fwd_bwd_benchmark.png): "FlashAttention-2" and "Pytorch" (standard
#   attention: the s x s scores materialised, softmax, a second matmul) bars. "Pytorch"
#   ran out of memory at 16k; its 8k rate stands for 16k.
FWD_BWD_CAUSAL_TFLOPS: dict[tuple[str, str], tuple[float, ...]] = {
    ("a100-80gb-sxm", "fa2"): (99, 133, 155, 173, 182, 189),
    ("a100-80gb-sxm", "eager"): (23, 28, 32, 32, 34, 34),
    ("h100-sxm", "fa2"): (163, 221, 265, 294, 308, 328),
    ("h100-sxm", "eager"): (40, 50, 57, 61, 63, 63),
}
# The Hopper kernels, H100 SXM5, head dim 128 (Shah et al. 2024, FlashAttention-3, arXiv
# 2407.08608): forward with causal mask (Fig. 5 panel (d); Dao-AILab/flash-attention@0251105
# assets/flash3_fp16_fwd.png) and backward (Fig. 6, head dim 128: the paper's only backward
# panel, without causal mask), TFLOPS/s of FlashAttention-2, cuDNN and FlashAttention-3.
HOPPER_FWD_CAUSAL_TFLOPS: dict[str, tuple[float, ...]] = {
    "fa2": (191, 260, 298, 319, 333, 335),
    "cudnn": (315, 410, 484, 518, 529, 539),
    "fa3": (292, 423, 521, 579, 602, 616),
}
HOPPER_BWD_TFLOPS: dict[str, tuple[float, ...]] = {
    "fa2": (214, 260, 291, 310, 318, 322),
    "cudnn": (305, 408, 465, 499, 518, 516),
    "fa3": (316, 424, 501, 542, 559, 561),
}
# Dense 16-bit peaks the benchmark GPUs are measured against (catalog/gpus: A100 312, H100
# SXM 989 TFLOPS), so that a rate becomes a share of a GPU's own peak.
BENCHMARK_PEAK_TFLOPS = {"a100-80gb-sxm": 312.0, "h100-sxm": 989.0}

# Which benchmark row a GPU takes, by its catalog architecture (GpuSpec.architecture,
# tools/gpus_from_csv.py): the measured row of its architecture's datacenter part as a share of
# its own peak. Ampere and Ada the A100's (FlashAttention-2 and cuDNN run the same sm80 code
# paths there; TransformerEngine picks FlashAttention-2 below Hopper, see kernel_on), Hopper
# the H100's. Assumed, no measurement: Blackwell takes the Hopper row; AMD, Gaudi and Ascend
# (their own fused kernels) and a GPU without an architecture the A100 row. Volta and Turing
# cannot run FlashAttention-2 or -3 (Dao-AILab/flash-attention README, "Requirements": Ampere,
# Ada or Hopper; Turing "coming soon") nor TransformerEngine's fused kernels: a flash request
# runs unfused there, timed at the eager row (PRE_AMPERE).
BENCHMARK_ROW = {"hopper": "h100-sxm", "blackwell": "h100-sxm"}
# Kernels without code for an architecture, which run there at the benchmark GPU's absolute rate
# (TFLOPS) rather than at its share of the newer GPU's larger peak: FlashAttention-2 has no
# Blackwell (sm100) kernel, its sm80 mma.sync code runs there at about the H100's rate.
# Measured on B200: meta-pytorch/tritonbench pull request 171 (2025-03-04, description:
# flash_v2, batch 8, 16 heads, head dim 128, forward): 315 / 352 / 354 / 362 / 331 TFLOPS at
# seq 1k / 2k / 4k / 8k / 16k; Dao-AILab/flash-attention issue 1589 (2025-04-13, flash_attn
# 2.7.4.post1, benchmarks/benchmark_flash_attention.py, head dim 64, no causal mask): forward +
# backward 259 / 299 / 321 / 312 / 333 / 346 TFLOPS at 512 .. 16k. The H100 FlashAttention-2
# row above (forward + backward, causal, head dim 128) is 163-328 TFLOPS, its forward without a
# mask about 335 (FA2 paper, same figures): the same rates within about 10 %, where the H100's
# share of peak would put a B200 (2,250 TFLOPS dense bf16) at 370-750.
ABSOLUTE_RATE_ON = {("blackwell", "fa2"): "h100-sxm"}
PRE_AMPERE = frozenset(("volta", "turing"))
HOPPER_OR_NEWER = frozenset(("hopper", "blackwell"))

# Names frameworks and case files give their attention implementation -> kernel. Hugging Face
# attn_implementation "sdpa" and PyTorch's scaled_dot_product_attention run the flash backend,
# FlashAttention-2 since PyTorch 2.2 (release notes: "FlashAttention-2 in
# torch.nn.functional.scaled_dot_product_attention").
KERNEL_NAMES: dict[str, str] = {
    "flash_attention_2": "fa2", "fa2": "fa2", "sdpa": "fa2", "flash": "fa2",
    "flash_attention_3": "fa3", "fa3": "fa3", "cudnn": "cudnn", "te-fused": "cudnn",
}


def kernel_on(gpu: GpuSpec, cfg: TrainConfig) -> AttentionKernel:
    """The kernel that runs a config's attention on ``gpu``: eager without flash attention or
    on a GPU older than Ampere (PRE_AMPERE), else the config's kernel (FlashAttention-2 by
    default). FlashAttention-3 needs Hopper (flash-attention README: "Requirements: H100 /
    H800 GPU") and TransformerEngine selects
    cuDNN's fused attention only from Hopper on (NVIDIA/TransformerEngine@d0067d0
    transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend:
    "give FusedAttention preference on Hopper+"); below, both run FlashAttention-2."""
    if not cfg.flash_attention or gpu.architecture in PRE_AMPERE:
        return "eager"
    kernel = cfg.attention_kernel or "fa2"
    if (kernel == "fa3" and gpu.architecture != "hopper") or (
            kernel == "cudnn" and gpu.architecture not in HOPPER_OR_NEWER):
        return "fa2"
    return kernel


def _hopper_row(kernel: str) -> tuple[float, ...]:
    """Forward+backward causal rate of a Hopper kernel: FlashAttention-2's measured rate
    times the kernel's speed-up over it in FlashAttention-3's forward and backward panels,
    the two passes weighted by their FLOPs (1 : 2.5): 3.5 / (1 / s_fwd + 2.5 / s_bwd)."""
    if kernel == "fa2":
        return FWD_BWD_CAUSAL_TFLOPS[("h100-sxm", "fa2")]
    return tuple(
        base * 3.5 / (f2 / f + 2.5 * b2 / b)
        for base, f, f2, b, b2 in zip(
            FWD_BWD_CAUSAL_TFLOPS[("h100-sxm", "fa2")], HOPPER_FWD_CAUSAL_TFLOPS[kernel],
            HOPPER_FWD_CAUSAL_TFLOPS["fa2"], HOPPER_BWD_TFLOPS[kernel],
            HOPPER_BWD_TFLOPS["fa2"], strict=True))


def _interpolate(row: tuple[float, ...], seq_len: int) -> float:
    """The row's rate at ``seq_len``: linear in log2(seq) between SEQ_POINTS, the end values
    beyond them."""
    x = min(max(math.log2(seq_len), math.log2(SEQ_POINTS[0])), math.log2(SEQ_POINTS[-1]))
    i = min(int(x - math.log2(SEQ_POINTS[0])), len(SEQ_POINTS) - 2)
    t = x - math.log2(SEQ_POINTS[i])
    return row[i] + t * (row[i + 1] - row[i])


def attention_fraction(gpu: GpuSpec, kernel: AttentionKernel, seq_len: int) -> float:
    """Share of ``gpu``'s dense 16-bit peak that ``kernel`` reaches on forward+backward causal
    attention over sequences of ``seq_len`` (head dim 128): the measured rate of the GPU's
    architecture row over that benchmark GPU's peak; a kernel without code for the GPU's
    architecture (ABSOLUTE_RATE_ON) at most at the benchmark GPU's rate."""
    ref = BENCHMARK_ROW.get(gpu.architecture or "", "a100-80gb-sxm")
    if ref == "h100-sxm" and kernel != "eager":
        row = _hopper_row(kernel)
    else:
        row = FWD_BWD_CAUSAL_TFLOPS[(ref, "eager" if kernel == "eager" else "fa2")]
    share = _interpolate(row, seq_len) / BENCHMARK_PEAK_TFLOPS[ref]
    absolute = ABSOLUTE_RATE_ON.get((gpu.architecture or "", kernel))
    if absolute is None:
        return share
    # at most the benchmark GPU's TFLOPS (a smaller part of the architecture keeps its share)
    rate = _interpolate(FWD_BWD_CAUSAL_TFLOPS[(absolute, kernel)], seq_len)
    return min(share, rate / peak_tflops(gpu, "bf16"))


# Eager attention computes the full s x s square: flops.training_flops counts it in full with a
# 2x backward (3 x 2 causal-half units per forward unit) where the benchmark counted 3.5 causal
# halves in the same time, so its rate in flops.py's FLOPs is 12/7 of the benchmark's.
EAGER_COUNT_SCALE = 6.0 / 3.5


def attention_rate(gpu: GpuSpec, cfg: TrainConfig) -> float:
    """FLOP/s of a config's attention on ``gpu``: attention_fraction x the 16-bit peak of its
    precision (flops.peak_tflops: TF32 for fp32 training), in flops.py's FLOP count."""
    kernel = kernel_on(gpu, cfg)
    prec = "fp32" if matmul_precision(gpu, cfg.effective_precision(gpu)) == "fp32" else "bf16"
    scale = EAGER_COUNT_SCALE if kernel == "eager" else 1.0
    return peak_tflops(gpu, prec) * 1e12 * attention_fraction(gpu, kernel, cfg.seq_len) * scale
