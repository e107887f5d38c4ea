"""Achieved rate of the routed experts' matmuls of a Mixture-of-Experts layer (kernel facts, pure).

A dense layer's matmuls are a few large GEMMs; a routed-expert layer splits the same tokens over
E experts, so each expert's GEMM has only tokens x top_k / E rows (Qwen3-30B-A3B: 16k tokens x
8 / 128 = 1,024 rows of a 2048 x 768 matrix). Small GEMMs reach a smaller share of the dense
matmul rate (tile and wave quantisation, fixed per-GEMM costs), and fine-grained MoE blocks
add the token permutation and combine around them. throughput.compute_seconds times the routed
experts' share of the matmul FLOPs at ``expert_gemm_fraction`` x the GPU's measured achievable
matmul rate (MAMF) instead of the full MAMF. Every anchor below is a published benchmark on an
H100 SXM (bf16), divided by the H100's MAMF (794.5 TFLOPS, catalog/gpus/h100-sxm.yaml); a GEMM
is sized by its FLOPs (2 x rows x d_in x d_out of one expert's gate or up projection).
"""

from __future__ import annotations

import math
from functools import lru_cache

from planner.catalog.params import layer_linears
from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models.flops import linear_matmul_params, matmul_params

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


def gemm_fraction(flops: float) -> float:
    """Share of the MAMF rate that an expert GEMM of ``flops`` reaches: EXPERT_GEMM_POINTS
    interpolated linearly in log(FLOPs), the end values beyond them."""
    pts = EXPERT_GEMM_POINTS
    if flops <= pts[0][0]:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if flops <= x1:
            return y0 + (y1 - y0) * math.log(flops / x0) / math.log(x1 / x0)
    return pts[-1][1]


def expert_gemm_flops(model: ModelSpec, cfg: TrainConfig, micro_batch: int | None = None
                      ) -> float:
    """FLOPs of one routed expert's gate (or up) GEMM in one micro-batch (``micro_batch``
    sequences, else the config's) on one GPU: 2 x rows x hidden x expert width / tp, rows = the
    micro-batch's tokens (/ cp) x top_k / experts x ep, balanced routing: with expert
    parallelism each GPU holds experts / ep of them and receives the tokens routed to them from
    the ep ranks of its group (Megatron-Core MoEAlltoAllTokenDispatcher), so each local expert
    sees ep times the rows (the FLOPs per GPU stay those of its own tokens)."""
    moe = model.moe
    sequences = (micro_batch or cfg.micro_batch_size) * cfg.sequences_per_example
    tokens = sequences * cfg.seq_len / cfg.cp
    rows = tokens * moe.experts_per_token / moe.num_experts * cfg.ep
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


def linear_time_scale(model: ModelSpec, cfg: TrainConfig, micro_batch: int | None = None
                      ) -> float:
    """Factor on the time of a step's matmul FLOPs at the MAMF rate: 1 + s (1 / f - 1), s the
    routed experts' share of them (expert_matmul_share) and f their GEMMs' fraction
    (gemm_fraction of expert_gemm_flops); 1 for a dense model. The backward and recomputed
    GEMMs of the experts (input and weight gradients) are taken at the forward's fraction."""
    share = expert_matmul_share(model)
    if not share:
        return 1.0
    size = expert_gemm_flops(model, cfg, micro_batch)
    return 1.0 + share * (1.0 / gemm_fraction(size) - 1.0)
