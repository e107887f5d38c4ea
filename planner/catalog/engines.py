"""Inference (serving) engines as case files and users spell them, matched to the decode stack
the decode model knows (efficiency.DECODE_STACKS), and told apart from training frameworks:
a training framework lookup of an engine's name is refused in one line saying what it is
(slugs.match), and a decode case names its engine by any of these spellings (stack_of).

Each engine: its canonical name, the decode stack whose calibrated roofline share it takes
(efficiency.DECODE_EFFICIENCY), and the names it goes by, each with where that name is the
engine's own (its repository, package or command). An engine with no calibrated share of its
own takes vLLM's, stated here as an assumption, as TGI's already is (efficiency.decode_table).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    """A serving engine: its name, the decode stack it is predicted with (vLLM's where it has
    no calibrated share of its own, as ``source`` says), its names and their source."""

    name: str
    stack: str
    names: tuple[str, ...]
    source: str


ENGINES: tuple[Engine, ...] = (
    Engine("TensorRT-LLM", "tensorrt-llm",
           ("tensorrt-llm", "tensorrt_llm", "trtllm", "trt-llm", "trt_llm", "tensorrtllm",
            "nvidia/tensorrt-llm"),
           "https://github.com/NVIDIA/TensorRT-LLM (Python package tensorrt_llm; commands "
           "trtllm-build, trtllm-serve, trtllm-bench)"),
    Engine("vLLM", "vllm", ("vllm", "vllm-project/vllm"),
           "https://github.com/vllm-project/vllm"),
    Engine("Text Generation Inference", "tgi",
           ("tgi", "text-generation-inference", "huggingface/text-generation-inference",
            "hf-tgi", "text-generation-launcher"),
           "https://github.com/huggingface/text-generation-inference (README: \"Text Generation "
           "Inference (TGI)\"; its launcher text-generation-launcher); no usable case: vLLM's "
           "share (efficiency.decode_table)"),
    Engine("SGLang", "vllm", ("sglang", "sgl-project/sglang"),
           "https://github.com/sgl-project/sglang; no case in validation/: vLLM's share "
           "assumed (a continuous-batching server with a paged KV cache and CUDA graphs)"),
    Engine("LMDeploy", "vllm", ("lmdeploy", "internlm/lmdeploy", "turbomind"),
           "https://github.com/InternLM/lmdeploy (its engine TurboMind); no case in "
           "validation/: vLLM's share assumed"),
)


def _key(name: str) -> str:
    """Case, ``_`` and spaces do not matter (slugs rule 1 for these names)."""
    return "-".join(name.strip().lower().replace("_", "-").split())


_BY_NAME: dict[str, Engine] = {_key(n): e for e in ENGINES for n in (e.name, *e.names)}


def engine_named(forms: tuple[str, ...]) -> Engine | None:
    """The engine the first of ``forms`` (a name as written, then without its version, owner
    or vendor word) that is an engine's name names; None when none is."""
    for form in forms:
        found = _BY_NAME.get(_key(form))
        if found is not None:
            return found
    return None
