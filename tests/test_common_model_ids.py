"""Commonly trained open models, named by their Hugging Face ids, resolve to a catalog
architecture of the right shape (a measured case naming one can be planned at all)."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.params import count_params

# HF id -> (catalog id, total parameters in billions, rounded to 2 decimals)
COMMON_IDS: dict[str, tuple[str, float]] = {
    "meta-llama/Llama-2-7b-chat-hf": ("llama-2-7b", 6.74),
    "meta-llama/Llama-2-13b-chat-hf": ("llama-2-13b", 13.02),
    "meta-llama/Llama-2-70b-chat-hf": ("llama-2-70b", 68.98),
    "meta-llama/Meta-Llama-3-8B-Instruct": ("llama-3-8b", 8.03),
    "meta-llama/Meta-Llama-3.1-8B-Instruct": ("llama-3.1-8b", 8.03),
    "meta-llama/Llama-3.2-1B-Instruct": ("llama-3.2-1b", 1.24),
    "meta-llama/Llama-3.2-3B-Instruct": ("llama-3.2-3b", 3.21),
    "mistralai/Mistral-7B-Instruct-v0.3": ("mistral-7b-v0.3", 7.25),
    "mistralai/Mistral-Nemo-Instruct-2407": ("mistral-nemo-12b", 12.25),
    "mistralai/Mistral-7B-Instruct-v0.2": ("mistral-7b-v0.2", 7.24),
    "mistralai/Mistral-Large-Instruct-2407": ("mistral-large-2407", 122.61),
    "mistralai/Codestral-22B-v0.1": ("codestral-22b", 22.25),
    "mistralai/Ministral-8B-Instruct-2410": ("ministral-8b", 8.02),
    "mistralai/Mixtral-8x22B-Instruct-v0.1": ("mixtral-8x22b", 140.63),
    "microsoft/Phi-3-mini-4k-instruct": ("phi-3-mini-4k", 3.82),
    "microsoft/Phi-3-mini-128k-instruct": ("phi-3-mini-128k", 3.82),
    "microsoft/Phi-3.5-mini-instruct": ("phi-3.5-mini", 3.82),
    "microsoft/phi-4": ("phi-4", 14.66),
    "google/gemma-2b": ("gemma-2b", 2.51),
    "google/gemma-7b-it": ("gemma-7b", 8.54),
    "google/gemma-2-2b-it": ("gemma-2-2b", 2.61),
    "google/gemma-2-27b": ("gemma-2-27b", 27.23),
    "google/gemma-3-1b-pt": ("gemma-3-1b", 1.00),
    "google/gemma-3-1b-it": ("gemma-3-1b", 1.00),
    "Qwen/Qwen2-0.5B-Instruct": ("qwen2.5-0.5b", 0.49),
    "Qwen/Qwen2-1.5B": ("qwen2.5-1.5b", 1.54),
    "Qwen/Qwen2.5-Coder-7B-Instruct": ("qwen2.5-coder-7b", 7.62),
    "Qwen/Qwen2.5-Coder-1.5B": ("qwen2.5-coder-1.5b", 1.54),
    "Qwen/Qwen2.5-Coder-14B-Instruct": ("qwen2.5-coder-14b", 14.77),
    "Qwen/Qwen2.5-Coder-32B-Instruct": ("qwen2.5-coder-32b", 32.76),
    "Qwen/Qwen2.5-Coder-3B-Instruct": ("qwen2.5-3b", 3.09),
    "Qwen/Qwen3-1.7B": ("qwen3-1.7b", 1.72),
    "Qwen/Qwen3-14B": ("qwen3-14b", 14.77),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": ("deepseek-r1-distill-qwen-7b", 7.62),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": ("deepseek-r1-distill-qwen-1.5b", 1.78),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": ("qwen2.5-14b", 14.77),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": ("qwen2.5-32b", 32.76),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": ("llama-3.1-8b", 8.03),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": ("llama-3.3-70b", 70.55),
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": ("tinyllama-1.1b", 1.10),
    "EleutherAI/pythia-160m": ("pythia-160m", 0.16),
    "EleutherAI/pythia-1b-deduped": ("pythia-1b", 1.01),
    "EleutherAI/pythia-12b": ("pythia-12b", 11.85),
    "EleutherAI/gpt-neox-20b": ("gpt-neox-20b", 20.55),
    "huggyllama/llama-7b": ("llama-7b", 6.74),
    "huggyllama/llama-13b": ("llama-13b", 13.02),
    "huggyllama/llama-30b": ("llama-30b", 32.53),
    "huggyllama/llama-65b": ("llama-65b", 65.29),
    "01-ai/Yi-6B": ("yi-6b", 6.06),
    "01-ai/Yi-34B-Chat": ("yi-34b", 34.39),
    "HuggingFaceTB/SmolLM2-135M": ("smollm2-135m", 0.13),
    "HuggingFaceTB/SmolLM2-360M-Instruct": ("smollm2-360m", 0.36),
    "HuggingFaceTB/SmolLM2-1.7B-Instruct": ("smollm2-1.7b", 1.71),
    "codellama/CodeLlama-7b-hf": ("codellama-7b", 6.74),
    "codellama/CodeLlama-13b-Instruct-hf": ("codellama-13b", 13.02),
    "mistralai/Mistral-Small-24B-Instruct-2501": ("mistral-small-24b", 23.57),
    "openai-community/gpt2": ("gpt2", 0.12),
    "openai-community/gpt2-xl": ("gpt2-xl", 1.56),
    "allenai/OLMo-2-1124-7B": ("olmo-2-7b", 7.30),
    "allenai/OLMo-2-1124-13B": ("olmo-2-13b", 13.72),
    "microsoft/Phi-3-medium-4k-instruct": ("phi-3-medium-4k", 13.96),
    "microsoft/Phi-3-medium-128k-instruct": ("phi-3-medium-128k", 13.96),
    "ibm-granite/granite-3.1-8b-base": ("granite-3.1-8b", 8.17),
    "ibm-granite/granite-3.1-8b-instruct": ("granite-3.1-8b", 8.17),
    "ibm-granite/granite-3.1-2b-base": ("granite-3.1-2b", 2.53),
    "ibm-granite/granite-3.1-2b-instruct": ("granite-3.1-2b", 2.53),
    "openai/gpt-oss-20b": ("gpt-oss-20b", 20.91),
    "openai/gpt-oss-120b": ("gpt-oss-120b", 116.83),
    "Qwen/QwQ-32B": ("qwq-32b", 32.76),
    "Qwen/Qwen2.5-Math-7B": ("qwen2.5-math-7b", 7.62),
    "Qwen/Qwen2.5-Math-7B-Instruct": ("qwen2.5-math-7b", 7.62),
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": ("qwen3-coder-30b-a3b", 30.53),
    "deepseek-ai/DeepSeek-V2-Lite": ("deepseek-v2-lite", 15.71),
    "deepseek-ai/DeepSeek-V2-Lite-Chat": ("deepseek-v2-lite", 15.71),
    "Qwen/Qwen1.5-MoE-A2.7B-Chat": ("qwen1.5-moe-a2.7b", 14.32),
    "deepseek-ai/deepseek-moe-16b-base": ("deepseek-moe-16b", 16.38),
    "moonshotai/Moonlight-16B-A3B-Instruct": ("moonlight-16b-a3b", 15.96),
    "zai-org/GLM-4.5": ("glm-4.5", 352.80),
    "ibm-granite/granite-3.3-8b-instruct": ("granite-3.3-8b", 8.17),
    "ibm-granite/granite-3.3-2b-base": ("granite-3.3-2b", 2.53),
    "tiiuae/falcon-180B-chat": ("falcon-180b", 178.56),
    "moonshotai/Kimi-K2-Instruct": ("kimi-k2", 1026.41),
    "internlm/internlm2_5-7b": ("internlm2.5-7b", 7.74),
    "baichuan-inc/Baichuan2-7B-Base": ("baichuan2-7b", 7.51),
    "baichuan-inc/Baichuan2-13B-Base": ("baichuan2-13b", 13.90),
    "HuggingFaceTB/SmolLM3-3B": ("smollm3-3b", 3.08),
}


@pytest.mark.parametrize("hf_id", sorted(COMMON_IDS))
def test_common_hf_id_resolves(hf_id: str) -> None:
    model_id, billions = COMMON_IDS[hf_id]
    spec = load_catalog().model(hf_id).spec
    assert spec.id == model_id
    assert round(count_params(spec).total / 1e9, 2) == pytest.approx(billions)
