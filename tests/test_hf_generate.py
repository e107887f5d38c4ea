"""The one measured Hugging Face generate point against the assumption that generate decodes
each step as efficiently as a vLLM engine (efficiency.HF_GENERATE_DECODE_EFFICIENCY =
RL_ROLLOUT_DECODE_EFFICIENCY, the vLLM engine's in-iteration share).

Source: fxmarty/accelerated-pytorch-transformers-generation, README "Results" at commit
cd00bdbf4f549dbc1c25d834822aafa3718cefb8
(https://github.com/fxmarty/accelerated-pytorch-transformers-generation/blob/cd00bdbf4f549dbc1c25d834822aafa3718cefb8/README.md):
default transformers generate of LLaMA-7B in fp16 on one A10G (g5.2xlarge), batch 1, a
1,000-token prompt and 200 new tokens, 23.150 tokens/s, counted as new tokens over the whole
generate call (scripts/run_llama.py: tok_per_s = max_new_tokens x batch_size /
time_per_generation), the same definition as decode.estimate_decode's output rate.

The decode model reaches that rate at a bandwidth share within a few per cent of the vLLM
engine's calibrated offline share: per step, at batch 1, generate is about as efficient as the
engine, as assumed. The point says nothing of RL batch sizes (no paged or continuous batching
there: the padding to the longest response is modelled apart, rltime)."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.models import efficiency as eff
from planner.models.decode import estimate_decode

MEASURED_TOKENS_PER_S = 23.150
SAME_AS_VLLM = 0.10  # the assumption holds if the implied share is within 10 % of vLLM's


def _implied_share(rate: float) -> float:
    """The bandwidth share at which the decode model gives ``rate`` (bisection: the rate rises
    with the share)."""
    cat = load_catalog()
    model, gpu = cat.model("llama-2-7b").spec, cat.gpu("a10g")
    lo, hi = 0.05, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        got = estimate_decode(model, gpu, prompt_len=1000, response_len=200, batch=1,
                              stack="vllm", efficiency=mid).output_tokens_per_s
        lo, hi = (mid, hi) if got < rate else (lo, mid)
    return (lo + hi) / 2


def test_measured_hf_generate_is_about_as_efficient_per_step_as_vllm():
    share = _implied_share(MEASURED_TOKENS_PER_S)
    vllm = eff.DECODE_EFFICIENCY["vllm"]
    assert share == pytest.approx(vllm, rel=SAME_AS_VLLM)
    # the constant the RL model uses follows the vLLM engine's in-iteration share
    assert eff.HF_GENERATE_DECODE_EFFICIENCY == eff.RL_ROLLOUT_DECODE_EFFICIENCY
