"""Activation bytes of a token-choice MoE layer beyond its experts' f-wide tensors (pure
functions, per token, read by memory.py).

Both follow the op sequence of torchtitan's MoE layer (pytorch/torchtitan@003edbe
torchtitan/models/moe/moe.py MoE.forward), which PrimeIntellect-ai/prime-rl@d8f290ef
src/prime_rl/trainer/models/layers/moe.py copies: fp32 router softmax, top-k, the tokens sorted
by expert and gathered (k copies each), the experts, the routing scores multiplied into the k
expert outputs in fp32, scatter_add back. tools/saved_activations.py --moe measures the block
(tests/data/saved_activations_moe.json).
"""

from __future__ import annotations

from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec


def routed_copies_bytes_per_token(model: ModelSpec) -> float:
    """What a token-choice MoE layer saves per token besides the experts' f-wide tensors: the
    k routed copies of the token (16-bit, the input the experts' first matrices need for their
    weight gradients) and the k expert outputs upcast to fp32 for the routing-score multiply
    (saved for the scores' gradient): k x h x (2 + 4) bytes (routed_input = torch.gather(x,
    ...); routed_output.to(torch.float32) * top_scores)."""
    return model.moe.experts_per_token * model.hidden_size * (2 + 4)


def score_grad_bytes_per_token(model: ModelSpec, cfg: TrainConfig) -> float:
    """The peak an MoE layer's routing-score multiply adds in backward, per token, where it runs
    over all routed tokens at once in fp32 (cfg.moe_fp32_scores, the profile fact of
    torchtitan's MoE layer): its incoming gradient upcast to fp32, the fp32 gradient it returns
    for the expert outputs and the fp32 product it sums into the scores' gradient, alive
    together: 3 x 4 x k x h bytes (measured exactly, experts trained or frozen). 0 for a
    dense layer, or an MoE whose multiply runs per expert in 16 bit (Hugging Face's Mixtral
    and Qwen-MoE blocks in transformers 4.x: routing_weights.to(hidden_states.dtype))."""
    if model.moe is None or not cfg.moe_fp32_scores:
        return 0.0
    return 3 * 4 * model.moe.experts_per_token * model.hidden_size / cfg.tp
