"""Hugging Face ids as cases and users write them: a repo re-uploaded under another
organisation keeps its name (and its quantized variants their suffix), and fine-tunes with the
base model's config.json are aliases of its catalog entry."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.errors import UnknownNameError


@pytest.mark.parametrize("name, model, bits", [
    ("NousResearch/Llama-2-7b-hf", "llama-2-7b", None),
    ("unsloth/Qwen2.5-7B-Instruct", "qwen2.5-7b", None),
    ("unsloth/llama-3-8b-bnb-4bit", "llama-3-8b", 4),
    ("unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit", "llama-3.1-8b", 4),
    ("TheBloke/Llama-2-7B-GPTQ", "llama-2-7b", 4),
    ("lmsys/vicuna-7b-v1.5", "llama-2-7b", None),
    ("HuggingFaceH4/zephyr-7b-beta", "mistral-7b", None),
    ("nvidia/Llama-3.1-Nemotron-70B-Instruct-HF", "llama-3.1-70b", None),
    ("Qwen/Qwen1.5-7B-Chat", "qwen-7b", None), ("Qwen/Qwen1.5-72B", "qwen-72b", None),
    # as papers and case files write them: spaces or underscores for the id's hyphens
    ("Llama 3.1 8B", "llama-3.1-8b", None), ("Mistral 7B", "mistral-7b", None),
    ("Llama 2 70B", "llama-2-70b", None), ("qwen2.5_7b", "qwen2.5-7b", None),
    ("Qwen2.5 7B Instruct", "qwen2.5-7b", None),
])
def test_reuploads_and_fine_tunes_resolve(name, model, bits):
    resolved = load_catalog().model(name)
    assert (resolved.spec.id, resolved.weight_bits) == (model, bits)


def test_an_unknown_repo_is_still_refused_by_name():
    with pytest.raises(UnknownNameError, match="unknown model 'someorg/no-such-model'"):
        load_catalog().model("someorg/no-such-model")
