"""What a case's stated releases change in how it ran: the behaviours that moved between
releases of the software a case names (bitsandbytes' saved inputs, Trainer's default AdamW,
TRL's QLoRA norm dtype)."""

from __future__ import annotations

import re
from typing import Any

from planner.catalog.frameworks import Profile
from planner.catalog.releases import before_release, release, since_bounds

# The first bitsandbytes release whose MatMul4Bit keeps only the packed weight for backward
# (memory._inputs_kept): 0.43.2 holds 9e753741 (#1270); 0.41.0 and 0.42.0 keep the input too.
BNB_KEEPS_ONLY_WEIGHT = (0, 43, 2)


def bnb_keeps_inputs(version: object) -> bool:
    """bitsandbytes ``version`` keeps the 4-bit layer's input for backward (before 0.43.2)."""
    return release(version, what="extra.bitsandbytes_version") < BNB_KEEPS_ONLY_WEIGHT


def _release(text: str, package: str) -> tuple[int, ...] | None:
    """The release of ``package`` a case's version text names ("transformers 4.48.1, torch
    2.4.1" -> (4, 48, 1) for transformers), None where it names none."""
    found = re.search(rf"\b{re.escape(package)}[ =v]*(\d+\.\d+(?:\.\d+)?)", text.lower())
    return release(found.group(1)) if found else None


# vLLM's V1 engine is the default from 0.8.0 (vllm-project/vllm v0.8.0 release notes: "V1 engine
# enabled by default"); earlier releases run V0 only (decode.VLLM_V0_HOST_S_PER_SEQ).
VLLM_V1_DEFAULT = (0, 8, 0)


def vllm_v0_of(case: dict[str, Any]) -> bool:
    """The case's RL engine ran vLLM's V0: its extra.rollout_vllm_v0 where stated, else a vLLM
    release before VLLM_V1_DEFAULT named in its framework_version ("verl 0.2, vLLM 0.6.3")."""
    stated = (case.get("extra") or {}).get("rollout_vllm_v0")
    if stated is not None:
        return bool(stated)
    named = _release(_version_text(case), "vllm")
    return named is not None and named < VLLM_V1_DEFAULT


def _version_text(case: dict[str, Any]) -> str:
    """The releases a case names: its framework_version and extra.framework_version."""
    extra = case.get("extra") or {}
    return f"{case.get('framework_version') or ''} {extra.get('framework_version') or ''}"


def before_since(case: dict[str, Any], since: str | None) -> bool:
    """The case names a release older than one that ``since`` names (the first releases a
    fact holds from, specs.Fact.since: "transformers 4.54.0, torch 2.8.0") in its
    framework_version or extra.framework_version."""
    text = _version_text(case)
    named = [(_release(text, pkg), first) for pkg, first in since_bounds(since)]
    return any(rel is not None and rel < first for rel, first in named)


def fused_optimizer_of(case: dict[str, Any], profile: Profile) -> bool:
    """Whether the case's AdamW is PyTorch's fused kernel: its extra.optimizer_impl where it
    names one (adamw_torch_fused: yes; adamw_torch: no), else the profile's fused_optimizer
    fact, the opposite for a case naming a release older than the fact holds from (e.g.
    Trainer's fused default from transformers 4.54 with torch 2.8: hf-trainer's fact)."""
    extra = case.get("extra") or {}
    if extra.get("optimizer_impl"):
        return "fused" in str(extra["optimizer_impl"]).lower()
    fact = profile.facts.get("fused_optimizer")
    if fact is None:
        return False
    older = before_since(case, fact.since) or profile.older_than(fact)
    return bool(before_release(fact) if older else fact.value)


def qlora_fp32_norms_of(case: dict[str, Any], profile: Profile) -> bool | None:
    """Whether the case's QLoRA norm weights were fp32: the profile's qlora_norm_dtype, the
    other dtype for a case naming a release older than the fact holds from (TRL keeps them in
    the load dtype from 0.26: trl's fact); None where the profile states none."""
    fact = profile.facts.get("qlora_norm_dtype")
    if fact is None:
        return None
    older = before_since(case, fact.since) or profile.older_than(fact)
    return (before_release(fact) if older else fact.value) == "fp32"
