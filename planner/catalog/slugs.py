"""Framework slugs as users and case files write them, matched to a profile (the one home of
the forgiving lookup behind ``Catalog.framework``).

The documented rules, applied in this order:
1. Case, surrounding space, ``_`` and inner spaces do not matter: ``HF_Trainer`` and
   ``hf trainer`` are ``hf-trainer`` (spaces around ``+`` are dropped: ``trl + peft``);
   ``ZeRO-3`` is ``zero3``.
2. A trailing version is stripped and kept: ``verl==0.4.1``, ``verl=0.4.1``, ``trl 0.19``,
   ``trl v0.19``, ``deepspeed@0.15`` (after ``@`` any token, e.g. a commit). A trailing
   remark in parentheses is dropped, and kept as the version where it is one and no other
   was written: ``verl (v0.4.1)`` is verl 0.4.1, ``Megatron-LM (core 0.8)`` megatron-lm,
   ``transformers (bitsandbytes)`` hf-trainer.
3. The name is looked up among the profiles' ids and aliases (ids win).
4. A combined slug ``X+B`` with B a backend (``deepspeed``, ``fsdp`` / ``fsdp1`` / ``fsdp2``,
   ``megatron``, ``peft`` / ``lora`` / ``qlora`` / ``dora``, the rollout engines ``vllm`` and
   ``sglang``; either order, several backends allowed) resolves to the profile that runs X on
   B: the profile named ``N+B`` for a name N of X's profile (``hf+deepspeed`` is
   hf-deepspeed, named ``transformers+deepspeed``), else X's own profile when it runs B
   (DeepSpeed: a ZeRO stage among its sharding kinds; FSDP: fsdp1 or fsdp2; Megatron: the
   megatron sharding kind; PEFT: an adapter method; an engine: among its rollout engines),
   else an error saying X does not run B.
5. A combined slug of two frameworks where one profile derives from the other
   (``llama-factory+transformers``, ``nemo-rl+megatron-core``) is the derived one, on the
   backends the slug also names.
6. In a name that is no id or alias, a trailing ``-B`` with B a backend word is ``+B``
   (``trl-deepspeed`` is ``trl+deepspeed``, ``torchtune-lora`` is ``torchtune+lora``; the
   words ``zero``, ``zero1``-``zero3`` also name DeepSpeed), and a trailing workload or
   ``full`` (``-sft``, ``-rm``, ``-dpo``, ``-ppo``, ``-grpo``, ``-pretrain``) is dropped, as
   is such a word standing alone between ``+`` (``verl-grpo`` and ``verl+grpo`` are verl), as
   is a trailing word that names the same profile as the rest (``TRL GRPOTrainer`` is trl).
7. A name (or ``+`` part) that is still no id or alias loses a GitHub owner (``owner/``:
   ``huggingface/trl``, ``meta-pytorch/torchforge``) and then one leading vendor or
   organisation word (VENDORS: ``Hugging Face``, ``HuggingFace``, ``HF``, ``NVIDIA``,
   ``Microsoft``, ``Meta``, ``PyTorch``, ``MosaicML``, ``Mosaic``, ``Alibaba``,
   ``ByteDance``, ``Lightning AI``, ...) when what is left is an id or alias by rules 1-6
   (``Hugging Face TRL`` is trl, ``Mosaic llm-foundry`` llm-foundry, ``NVIDIA NeMo RL``
   nemo-rl). The word is dropped only in front of a known name: a vendor word alone
   (``NVIDIA``, ``Meta``) or in front of an unknown one stays unknown, and a name that is an
   id or alias itself keeps its meaning (``PyTorch FSDP`` is pytorch-fsdp; ``HF_Trainer-
   DeepSpeed`` is hf-deepspeed by rule 6, not ``trainer``).
8. Ray Train orchestrates another framework's training loop and imposes no memory
   semantics of its own: ``ray train + X`` (or ``ray + X``) is X, and ``ray train`` alone is
   refused in one line asking for the framework it runs.
9. bitsandbytes is a quantization library (the 4-bit base of QLoRA, 8-bit optimizers), not a
   framework: ``bitsandbytes`` and ``bnb`` are backend words of rule 4 that X runs when it
   offers QLoRA (``peft+bitsandbytes`` and ``transformers+peft+bitsandbytes`` are hf-trainer,
   ``trl+bnb`` trl); alone they are refused in one line asking for the framework.
10. An inference engine (catalog.engines: TensorRT-LLM, vLLM, TGI, SGLang, LMDeploy, by any
   of their spellings, versions, owners or vendor words) is not a training framework: named
   alone it is refused in one line saying so (``verl+vllm`` stays verl by rule 4).
Anything else is an unknown framework: one line naming the nearest profile ids.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from planner.catalog.engines import Engine, engine_named
from planner.catalog.specs import FrameworkSpec
from planner.errors import UnknownNameError

# Backend words of a combined slug and the backend each names.
BACKENDS: dict[str, str] = {"deepspeed": "deepspeed", "fsdp": "fsdp", "fsdp1": "fsdp",
                            "fsdp2": "fsdp", "megatron": "megatron", "peft": "peft",
                            "lora": "peft", "qlora": "peft", "dora": "peft", "vllm": "vllm",
                            "sglang": "sglang", "zero": "deepspeed", "zero1": "deepspeed",
                            "zero2": "deepspeed", "zero3": "deepspeed",
                            "bitsandbytes": "bitsandbytes", "bnb": "bitsandbytes"}
# Words of a slug that name the job rather than the framework (rule 6): dropped.
DROPPED = frozenset({"pretrain", "sft", "rm", "dpo", "ppo", "grpo", "full"})
# Rule 7: vendor and organisation words written in front of a framework's name (normalised,
# several words joined by ``-``), dropped only where the rest is a known name.
VENDORS = ("hugging-face", "huggingface", "hf", "nvidia", "microsoft", "meta", "meta-ai",
           "facebook", "facebookresearch", "pytorch", "mosaicml", "mosaic", "databricks",
           "alibaba", "modelscope", "bytedance", "bytedance-seed", "lightning-ai", "lightning",
           "google", "ibm", "allenai", "ai2", "eleutherai", "snowflake", "linkedin")
# Rule 8: orchestrators that run another framework's training loop (a ``+`` part of its own
# is dropped; alone, refused).
ORCHESTRATORS = frozenset({"ray", "ray-train", "raytrain", "ray-torchtrainer"})
# What a profile must offer to run a backend: (fact, any of these values), in the order
# combined backends are applied (sharding first, so that X+peft+deepspeed finds X on DeepSpeed).
_RUNS: dict[str, tuple[str, frozenset[str]]] = {
    "deepspeed": ("sharding", frozenset({"zero1", "zero2", "zero3"})),
    "fsdp": ("sharding", frozenset({"fsdp1", "fsdp2"})),
    "megatron": ("sharding", frozenset({"megatron"})),
    "peft": ("methods", frozenset({"lora", "dora", "qlora"})),
    "bitsandbytes": ("methods", frozenset({"qlora"})),
    "vllm": ("rollout_engines", frozenset({"vllm"})),
    "sglang": ("rollout_engines", frozenset({"sglang"})),
}
_REMARK = re.compile(r"^(?P<name>[^()]*?)\s*\((?P<remark>[^()]*)\)$")
_VERSION = re.compile(r"^(?P<name>.*?)\s*(?:@\s*(?P<ref>[\w.+-]+)"
                      r"|(?:==?|\s)\s*(?P<num>v?\d[\w.+-]*))$")


@dataclass(frozen=True)
class SlugMatch:
    """A framework slug matched: the profile, the version the slug carried (None when none)
    and the rule that matched it ("id or alias", "K (rules 6 to 8)" for the name K they
    left, or "X on B")."""

    spec: FrameworkSpec
    version: str | None
    rule: str


def normalise(name: str) -> str:
    """Rule 1: lower case; ``_`` and runs of spaces or hyphens as one ``-``; no space or
    hyphen next to ``+``; DeepSpeed's stages written ``ZeRO-3`` as ``zero3``."""
    key = re.sub(r"[\s_\-]+", "-", name.strip().lower())
    key = re.sub(r"\bzero-([0-3])\b", r"zero\1", key)
    return re.sub(r"-*\+-*", "+", key).strip("-")


def split_version(name: str) -> tuple[str, str | None]:
    """Rule 2: (the name without a trailing version or remark, the version or None)."""
    bare, remark = name.strip(), None
    found = _REMARK.match(bare)
    if found and found.group("name").strip():
        bare = found.group("name").strip()
        number = re.fullmatch(r"v?(\d[\w.+-]*)", found.group("remark").strip())
        remark = number.group(1) if number else None
    found = _VERSION.match(bare)
    if not found or not found.group("name").strip():
        return bare, remark
    version = found.group("ref") or found.group("num").removeprefix("v")
    return found.group("name").strip(), version


@lru_cache(maxsize=8)
def _index(specs: tuple[FrameworkSpec, ...]) -> dict[str, FrameworkSpec]:
    """Every profile by its normalised id and aliases."""
    index = {normalise(alias): f for f in specs for alias in f.aliases}
    index.update({normalise(f.id): f for f in specs})  # ids win over aliases of other entries
    return index


def _lineage(spec: FrameworkSpec,
             frameworks: Mapping[str, FrameworkSpec]) -> list[FrameworkSpec]:
    """A profile and its bases, nearest first."""
    chain: list[FrameworkSpec] = []
    current: FrameworkSpec | None = spec
    while current is not None and current.id not in {c.id for c in chain}:
        chain.append(current)
        current = frameworks.get(current.base) if current.base else None
    return chain


def _fact(spec: FrameworkSpec, name: str, frameworks: Mapping[str, FrameworkSpec]) -> Any:
    """A fact's value on ``spec`` or the nearest base that states it (None: none does)."""
    stated = (getattr(s.facts, name) for s in _lineage(spec, frameworks))
    return next((fact.value for fact in stated if fact is not None), None)


def runs(spec: FrameworkSpec, backend: str, frameworks: Mapping[str, FrameworkSpec]) -> bool:
    """Whether a profile runs a backend (a fact no profile of its chain states restricts
    nothing, as in frameworks.unsupported)."""
    fact, wanted = _RUNS[backend]
    offered = _fact(spec, fact, frameworks)
    return offered is None or bool(wanted & set(offered))


def _on_backend(spec: FrameworkSpec, backend: str, index: dict[str, FrameworkSpec],
                frameworks: Mapping[str, FrameworkSpec]) -> FrameworkSpec:
    """Rule 4 for one backend: the profile running ``spec``'s framework on it."""
    words = [w for w, b in BACKENDS.items() if b == backend]
    for name in (spec.id, *spec.aliases):
        for word in words:
            named = index.get(f"{normalise(name)}+{word}")
            if named is not None:
                return named
    if runs(spec, backend, frameworks):
        return spec
    fact, _ = _RUNS[backend]
    offered = _fact(spec, fact, frameworks)
    raise UnknownNameError(f"{spec.id} does not run on {backend} (its {fact}: "
                           f"{', '.join(offered) or 'none'}) and no profile runs it there")


def _head(heads: list[str], index: dict[str, FrameworkSpec],
          frameworks: Mapping[str, FrameworkSpec]) -> FrameworkSpec | None:
    """The framework a combined slug names: its one non-backend part, or of two the one whose
    profile derives from the other's (rule 5); None otherwise."""
    specs = [index[h] for h in heads if h in index]
    if len(specs) != len(heads) or not 1 <= len(specs) <= 2:
        return None
    if len(specs) == 1:
        return specs[0]
    first, second = specs
    if first.id in {s.id for s in _lineage(second, frameworks)}:
        return second
    if second.id in {s.id for s in _lineage(first, frameworks)}:
        return first
    return None


def _combined(key: str, index: dict[str, FrameworkSpec],
              frameworks: Mapping[str, FrameworkSpec]) -> FrameworkSpec | None:
    """Rules 4 and 5: a combined slug's profile, None when the slug is not one."""
    parts = [p for p in key.split("+") if p]
    if len(parts) < 2:
        return None
    heads = [p for p in parts if p not in BACKENDS] or parts[:1]
    spec = _head(heads, index, frameworks)
    if spec is None:
        return None
    backends = {BACKENDS[p] for p in parts if p not in heads}
    for backend in sorted(backends, key=list(_RUNS).index):
        spec = _on_backend(spec, backend, index, frameworks)
    return spec


def nearest_ids(key: str, frameworks: Iterable[FrameworkSpec], *, limit: int = 3) -> list[str]:
    """The ids of the profiles whose id or alias is closest to ``key`` (the head of a
    combined slug compared too)."""
    index = _index(tuple(frameworks))
    ids: list[str] = []
    for probe in dict.fromkeys((key, key.split("+")[0])):
        for close in difflib.get_close_matches(probe, list(index), n=limit * 2, cutoff=0.6):
            if index[close].id not in ids:
                ids.append(index[close].id)
    return ids[:limit]


def _trim(part: str, index: dict[str, FrameworkSpec]) -> tuple[str, list[str]]:
    """Rule 6 on one ``+`` part: (the part without its trailing backend and workload words,
    the backend words it lost)."""
    tail: list[str] = []
    while part not in index and "-" in part:
        head, word = part.rsplit("-", 1)
        if head in index and index.get(word) is index[head]:
            return head, tail  # a trailing word naming the same profile ('trl-grpotrainer')
        if word not in BACKENDS and word not in DROPPED:
            break
        part = head
        if word in BACKENDS:
            tail.insert(0, word)
    return part, tail


def _unvendored(part: str) -> list[str]:
    """Rule 7: the forms of ``part`` without its GitHub owner and then without one leading
    vendor word (longest first), nearest first; empty when it has neither."""
    forms: list[str] = []
    if "/" in part and part.split("/", 1)[1]:
        part = part.split("/", 1)[1]
        forms.append(part)
    for vendor in sorted(VENDORS, key=len, reverse=True):
        if part.startswith(vendor + "-") and len(part) > len(vendor) + 1:
            forms.append(part[len(vendor) + 1:])
            break
    return forms


def _split_words(key: str, index: dict[str, FrameworkSpec]) -> str:
    """Rules 6 to 8: each ``+`` part that is no id or alias loses its trailing workload words
    and has its trailing backend words made parts of their own, else loses its owner or a
    vendor word where that leaves a known name; a part that is only a workload word or an
    orchestrator is dropped (a backend word kept)."""
    parts: list[str] = []
    for original in key.split("+"):
        part, tail = _trim(original, index)
        for form in ([] if part in index else _unvendored(original)):
            trimmed, more = _trim(form, index)
            if trimmed in index:
                part, tail = trimmed, more
                break
        if part in index or (part not in DROPPED and part not in ORCHESTRATORS):
            parts.append(part)
        parts.extend(tail)
    return "+".join(p for p in parts if p)


def inference_engine(name: str) -> Engine | None:
    """Rule 10: the serving engine ``name`` names (as written, without a trailing version, an
    owner or a vendor word), None when it names none."""
    bare, _ = split_version(name)
    key = normalise(bare)
    return engine_named((name, bare, key, *_unvendored(key)))


def _not_a_framework(name: str, key: str) -> str | None:
    """Rules 9 and 10: the one-line refusal of a quantization library or an inference engine
    named as the framework, None for any other name."""
    if key in BACKENDS and BACKENDS[key] == "bitsandbytes":
        return (f"framework {name.strip()!r} is bitsandbytes, a quantization library (QLoRA's "
                "4-bit base, 8-bit optimizers), not a framework: name the framework that trains "
                "with it ('trl+bitsandbytes', 'peft+bitsandbytes' for the Trainer with PEFT) and "
                "pass --method qlora or --optimizer adamw-8bit")
    engine = inference_engine(name)
    if engine is None:
        return None
    return (f"framework {name.strip()!r} is {engine.name}, an inference engine, not a training "
            "framework: name the framework that trains (an RL framework generating with it, "
            "e.g. 'verl+vllm'); validation decode cases name it as their framework")


def match(name: str, frameworks: Mapping[str, FrameworkSpec]) -> SlugMatch:
    """The profile a framework slug names by the module's rules (UnknownNameError: none, in
    one line with the nearest ids)."""
    bare, version = split_version(name)
    index = _index(tuple(frameworks.values()))
    key = normalise(bare)
    if key not in index and ORCHESTRATORS & {key, *_unvendored(key)}:
        raise UnknownNameError(
            f"framework {name.strip()!r} is Ray Train, which runs another framework's training "
            "loop: name that framework ('ray train + trl', or e.g. trl, deepspeed, "
            "pytorch-fsdp for a TorchTrainer loop that prepare_model wraps in DDP or FSDP)")
    if key in index:
        return SlugMatch(index[key], version, "id or alias")
    refusal = _not_a_framework(name, key)
    if refusal is not None:
        raise UnknownNameError(refusal)
    key = _split_words(key, index)
    if key in index:
        return SlugMatch(index[key], version, f"{key} (rules 6 to 8)")
    try:
        spec = _combined(key, index, frameworks)
    except UnknownNameError as err:
        raise UnknownNameError(f"framework {name.strip()!r}: {err}") from None
    if spec is not None:
        return SlugMatch(spec, version, f"{key} on {spec.id}")
    near = nearest_ids(key, frameworks.values())
    hint = f" (did you mean: {', '.join(near)}?)" if near else ""
    raise UnknownNameError(f"unknown framework {name.strip()!r}{hint}; "
                           "see 'planner catalog frameworks' for the ids")
