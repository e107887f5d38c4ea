"""Achieved rate of a step's matmuls by GEMM size: the routed experts of a Mixture-of-Experts
layer and the dense linears (kernel facts, pure).

MAMF (the GPU's measured achievable matmul rate, catalog/gpus) is the plateau of large GEMMs.
A smaller GEMM reaches a smaller share of it (tile and wave quantisation, prologue and
epilogue per tile, a short K loop). Two curves, GEMM FLOPs -> share of the plateau:

* routed experts: a routed-expert layer splits the tokens over E experts, so each expert's
  GEMM has only tokens x top_k / E rows (Qwen3-30B-A3B: 16k tokens x 8 / 128 = 1,024 rows of
  a 2048 x 768 matrix), and fine-grained MoE blocks add the token permutation and combine
  around them (EXPERT_GEMM_POINTS: published grouped-GEMM benchmarks);
* dense linears: M = the micro-batch's tokens (/ cp) rows times d_in x d_out (/ tp): a small
  model's projections (hidden 1024-2048, Qwen3-0.6B's k and v 1024 x 1024) are GEMMs of
  1e10-5e10 FLOPs at 8k tokens, below the plateau (DENSE_GEMM_POINTS: XLA's measured
  Hopper bf16 GEMM table).

throughput.compute_seconds times each linear's share of the matmul FLOPs at its fraction x
MAMF (linear_time_scale). Every anchor is a measurement on an H100-class GPU (sm_90, bf16),
divided by the H100's MAMF (794.5 TFLOPS, catalog/gpus/h100-sxm.yaml), and is applied by
FLOPs on every GPU (pytorch/ao PR 2427's bf16 torch.mm on a B200 gives the same shares at the
same FLOPs: 0.80 of its 4096^3 plateau at 2048^3 = 1.7e10, where the sm_90 table gives 0.74).
"""

from __future__ import annotations

import math
from functools import lru_cache

from planner.catalog.params import layer_linears, vocab_matrix_params
from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models.flops import head_matmul_params, linear_matmul_params, matmul_params

# (FLOPs of one expert's GEMM, achieved rate / H100 MAMF 794.5 TFLOPS), ascending:
#   1.34e9, 0.227: ByteDance-Seed/VeOmni pull request 460 (2026-02-06, description, "H100"),
#       torch._grouped_mm MoE forward, S=32768, H=2048, FFN=512, Experts=512, TopK=10:
#       11.411 ms, 180.67 TFLOP/s; 32768 x 10 / 512 = 640 rows per expert, 2 x 640 x 2048 x 512.
#   6.44e9, 0.305: the same table, S=32768, H=2048, FFN=768, Experts=128, TopK=8 (Qwen3-30B-A3B's
#       shape): 10.218 ms, 242.12 TFLOP/s (= 2 x 3 x 2048 x 768 x 32768 x 8 / 10.218 ms: the
#       count is forward-only); 2048 rows per expert, 2 x 2048 x 2048 x 768. Both rows time
#       the whole routed block (permutation, the three grouped GEMMs, SiLU, combine).
#   4.29e10, 0.673: pytorch/ao pull request 2490 (2025-07-03, description, "NVIDIA H100"),
#       bench_grouped_mm.py, bf16 torch._grouped_mm alone, M=8192 tokens, E=16 experts with
#       jagged offsets (512 rows on average): K=5120, N=8192 in 1.31 ms and K=8192, N=5120 in
#       1.26 ms, i.e. 2 x 8192 x 5120 x 8192 FLOPs at 525 and 545 TFLOP/s (0.660, 0.686;
#       the script's printed tops count E times the FLOPs); 2 x 512 x 5120 x 8192.
#   1.37e11, 1.0: a dense GEMM of 4096^3 sits on the plateau that MAMF measures: pytorch/ao pull
#       request 2427 (2025-06-23, bench_matmul.py, bf16 torch.mm on B200): 0.627, 0.646, 0.631
#       of peak at 4096^3, 6144^3, 8192^3 (0.672 at 3072^3); a larger GPU than the H100, so
#       the H100 reaches its plateau no later.
EXPERT_GEMM_POINTS: tuple[tuple[float, float], ...] = (
    (1.34e9, 0.227), (6.44e9, 0.305), (4.29e10, 0.673), (1.37e11, 1.0),
)


# (FLOPs of one dense GEMM, achieved rate / H100 MAMF 794.5 TFLOPS), ascending: XLA's default
# matmul performance table, tensorflow/tensorflow@372d578bb861cc5804e56d37d93aec931a59762c
# third_party/xla/xla/service/gpu/model/matmul_interpolator_data.h (kDefaultMatmulPTable,
# key "sm_90", flops key "bf16xbf16->bf16", FLOP/s per entry b, m, n, k). The entries with
# m = 4096 (b x m = 4096, 8192 and 16384 rows: the token counts of training micro-batches),
# n and k each 256 ... 4096, 75 entries, grouped by FLOPs 2 b m n k; each point is its group's
# median share (groups of 3-13 shapes; within a group the small-K shapes are lowest, e.g.
# 3.4e10: 0.63 at n 4096 x k 256, 0.93 at n 1024 x k 4096). Rows quoted (TFLOP/s):
#   b 2, m 4096, n 1024, k 1024 (1.7e10): 598.2; b 2, n 2048, k 1024 (3.4e10): 680.9;
#   b 2, n 4096, k 1024 (6.9e10): 693.0; b 1, n 4096, k 4096 (1.4e11): 783.3;
#   b 2, n 4096, k 4096 (2.7e11): 807.7 (above the 794.5 MAMF: the plateau, 1.0).
DENSE_GEMM_POINTS: tuple[tuple[float, float], ...] = (
    (1.07e9, 0.173), (2.15e9, 0.273), (4.29e9, 0.422), (8.59e9, 0.562), (1.72e10, 0.741),
    (3.44e10, 0.855), (6.87e10, 0.917), (1.37e11, 0.970), (2.75e11, 1.0),
)


# fp8 routed experts. Their grouped GEMMs do not run at the fp8 rate's share above: each
# group's inputs are quantised (and, for the backward, a transposed copy) before its GEMM,
# per group, which a small group cannot amortise. Measured: forward + backward of MXFP8
# grouped GEMMs (quantisation included, torchao _scaled_grouped_mm) over bf16
# torch._grouped_mm on the same shapes, pytorch/ao pull request 3271 (2025-10-31,
# description, benchmark table; MXFP8 runs on sm_100, a B200-class GPU), by the FLOPs of one
# group's forward GEMM, 2 x M/G x N x K (N 8192, K 5120):
#   M 16384: G 8 (1.72e11) 1.115x, G 4 (3.44e11) 1.202x, G 2 (6.87e11) 1.337x,
#   G 1 (1.37e12) 1.328x; M 128000: G 2 (5.37e12) 1.943x, G 1 (1.07e13) 2.084x.
# (FLOPs of one group, speedup over the 16-bit grouped GEMM), ascending. Applied to every fp8
# recipe (Hopper's per-tensor fp8 quantises the same tensors; no Hopper table is stored).
FP8_EXPERT_SPEEDUP_POINTS: tuple[tuple[float, float], ...] = (
    (1.72e11, 1.115), (3.44e11, 1.202), (6.87e11, 1.337), (1.37e12, 1.328), (5.37e12, 1.943),
    (1.07e13, 2.084),
)


def _interpolate(points: tuple[tuple[float, float], ...], flops: float) -> float:
    """``points`` (FLOPs, share) interpolated linearly in log(FLOPs), the end values beyond."""
    if flops <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if flops <= x1:
            return y0 + (y1 - y0) * math.log(flops / x0) / math.log(x1 / x0)
    return points[-1][1]


def gemm_fraction(flops: float) -> float:
    """Share of the MAMF rate that an expert GEMM of ``flops`` reaches: EXPERT_GEMM_POINTS
    interpolated linearly in log(FLOPs), the end values beyond them."""
    return _interpolate(EXPERT_GEMM_POINTS, flops)


def dense_gemm_fraction(flops: float) -> float:
    """Share of the MAMF rate that a dense GEMM of ``flops`` reaches: DENSE_GEMM_POINTS
    interpolated linearly in log(FLOPs), the end values beyond them."""
    return _interpolate(DENSE_GEMM_POINTS, flops)


def gemm_rows(cfg: TrainConfig, micro_batch: int | None = None) -> float:
    """Rows (M) of a dense linear's GEMM on one GPU: the micro-batch's tokens (``micro_batch``
    sequences, else the config's) / cp (context parallelism splits each sequence)."""
    sequences = (micro_batch or cfg.micro_batch_size) * cfg.sequences_per_example
    return sequences * cfg.seq_len / cfg.cp


def expert_gemm_flops(model: ModelSpec, cfg: TrainConfig, micro_batch: int | None = None
                      ) -> float:
    """FLOPs of one routed expert's gate (or up) GEMM in one micro-batch (``micro_batch``
    sequences, else the config's) on one GPU: 2 x rows x hidden x expert width / tp, rows = the
    micro-batch's tokens (/ cp) x top_k / experts x ep, balanced routing: with expert
    parallelism each GPU holds experts / ep of them and receives the tokens routed to them from
    the ep ranks of its group (Megatron-Core MoEAlltoAllTokenDispatcher), so each local expert
    sees ep times the rows (the FLOPs per GPU stay those of its own tokens)."""
    moe = model.moe
    rows = gemm_rows(cfg, micro_batch) * moe.experts_per_token / moe.num_experts * cfg.ep
    return 2 * rows * model.hidden_size * moe.expert_ffn_hidden_size / cfg.tp


@lru_cache(maxsize=1024)
def expert_matmul_share(model: ModelSpec) -> float:
    """Share of the matmul FLOPs per token (flops.matmul_params: every layer and the head) that
    the routed experts run; 0 for a dense model."""
    if model.moe is None:
        return 0.0
    routed = sum(linear_matmul_params(model, lin)
                 for i in range(model.num_layers) for lin in layer_linears(model, i)
                 if lin.group == "expert")
    return routed / matmul_params(model)


@lru_cache(maxsize=1024)
def dense_gemm_shapes(model: ModelSpec) -> tuple[tuple[float, float], ...]:
    """(d_in x d_out of one GEMM, its share of the matmul FLOPs per token) of every linear that
    is not a routed expert, summed over the layers per shape: attention and MLP projections
    (each its own GEMM, as the Hugging Face modeling code runs q, k and v), shared experts,
    routers, and the LM head (vocab x embedding width, plus OPT-350m's project_in/out: one
    shape, flops.head_matmul_params)."""
    total = matmul_params(model)
    shares: dict[float, float] = {}
    for i in range(model.num_layers):
        for lin in layer_linears(model, i):
            if lin.group != "expert":
                size = float(lin.d_in * lin.d_out)
                shares[size] = shares.get(size, 0.0) + linear_matmul_params(model, lin) / total
    head = float(vocab_matrix_params(model))
    shares[head] = shares.get(head, 0.0) + head_matmul_params(model) / total
    return tuple(sorted(shares.items()))


def fp8_expert_share(flops: float, fp8_over_16bit: float) -> float:
    """Share of the fp8 matmul rate that an fp8 routed expert's grouped GEMM of ``flops`` (one
    group's forward) keeps beside gemm_fraction: its measured speedup over 16 bit
    (FP8_EXPERT_SPEEDUP_POINTS) over the GPU's fp8 / 16-bit achievable rate
    ``fp8_over_16bit``, at most 1."""
    return min(1.0, _interpolate(FP8_EXPERT_SPEEDUP_POINTS, flops) / fp8_over_16bit)


def linear_time_scale(model: ModelSpec, cfg: TrainConfig, micro_batch: int | None = None, *,
                      fp8_over_16bit: float | None = None) -> float:
    """Factor on the time of a step's matmul FLOPs at the MAMF rate: sum over the GEMMs of
    share / fraction, the routed experts' share (expert_matmul_share) at gemm_fraction of
    expert_gemm_flops and every other linear's (dense_gemm_shapes) at dense_gemm_fraction of
    2 x rows (gemm_rows) x d_in x d_out / tp; 1 when every GEMM is on the plateau. The backward
    and recomputed GEMMs (input and weight gradients: the same FLOPs, other shapes) are taken
    at the forward's fraction. ``fp8_over_16bit`` (the GPU's fp8 / 16-bit achievable matmul
    rate, given when the matmuls run in fp8) slows the routed experts by fp8_expert_share."""
    rows = gemm_rows(cfg, micro_batch)
    scale = sum(share / dense_gemm_fraction(2 * rows * size / cfg.tp)
                for size, share in dense_gemm_shapes(model))
    share = expert_matmul_share(model)
    if share:
        flops = expert_gemm_flops(model, cfg, micro_batch)
        fp8 = fp8_expert_share(flops, fp8_over_16bit) if fp8_over_16bit else 1.0
        scale += share / (gemm_fraction(flops) * fp8)
    return scale
