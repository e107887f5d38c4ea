"""Framework profiles: what a training framework runs and the memory and speed semantics it
imposes, read from catalog/frameworks/<id>.yaml (specs.FrameworkSpec) with inheritance.

A profile states facts with their sources; ``resolve`` follows ``base`` links so a derived
profile (e.g. LLaMA-Factory on the Hugging Face Trainer) holds every fact of its base unless it
overrides it, and says which profile each fact came from. ``config_fields`` turns the memory
semantics into the TrainConfig fields the models read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.catalog import Catalog
from planner.specs import Fact, FrameworkFacts, FrameworkSpec

# The framework a command assumes when none is named, per workload.
DEFAULT_FRAMEWORK: dict[str, str] = {
    "pretrain": "hf-trainer", "sft": "hf-trainer", "rm": "hf-trainer", "dpo": "hf-trainer",
    "ppo": "verl", "grpo": "verl",
}


@dataclass(frozen=True)
class Profile:
    """A framework profile with its inheritance resolved: every fact and the id of the profile
    that stated it."""

    spec: FrameworkSpec
    facts: dict[str, Fact[Any]]
    origin: dict[str, str]

    @property
    def id(self) -> str:
        return self.spec.id

    def value(self, name: str, default: Any = None) -> Any:
        fact = self.facts.get(name)
        return default if fact is None else fact.value

    def source(self, name: str) -> str | None:
        fact = self.facts.get(name)
        return None if fact is None else fact.source

    def inherited(self, name: str) -> str | None:
        """The id of the base profile a fact comes from, None when the profile states it (or
        no profile does)."""
        origin = self.origin.get(name)
        return origin if origin not in (None, self.spec.id) else None


def resolve(catalog: Catalog, name: str) -> Profile:
    """The profile named ``name`` (id or alias) with its base chain merged, nearest first."""
    spec = catalog.framework(name)
    facts: dict[str, Fact[Any]] = {}
    origin: dict[str, str] = {}
    current: FrameworkSpec | None = spec
    while current is not None:
        for key in FrameworkFacts.model_fields:
            fact = getattr(current.facts, key)
            if fact is not None and key not in facts:
                facts[key] = fact
                origin[key] = current.id
        current = catalog.frameworks.get(current.base) if current.base else None
    return Profile(spec, facts, origin)


def config_fields(profile: Profile, *, workload: str, sharded: bool) -> dict[str, Any]:
    """TrainConfig fields set by a profile's memory semantics (facts it does not state leave
    the planner's defaults). ``sharded``: the job shards its model states (ZeRO/FSDP), which
    decides a loss computed in fp32 only under autocast."""
    out: dict[str, Any] = {}
    attention = profile.value("attention")
    if attention is not None:
        out["flash_attention"] = attention != "eager"
        out["expand_kv_heads"] = attention == "sdpa-expanded-kv"
    loss = profile.value("loss")
    if loss is not None:
        out["chunked_loss"] = loss == "chunked"
        out["loss_in_fp32"] = loss in ("fp32", "chunked", "vocab-fused") or (
            loss == "fp32-under-autocast" and not sharded)
        out["lm_head_vocab_chunk"] = (profile.value("loss_vocab_chunk")
                                      if loss == "vocab-fused" else None)
    if workload in ("dpo", "ppo", "grpo") and profile.value("logprobs") is not None:
        # the log-prob passes set the loss buffers of preference and RL training
        out["loss_in_fp32"] = profile.value("logprobs") == "fp32"
    if profile.value("master_weights") is not None:
        out["pure_bf16"] = profile.value("master_weights") == "none"
    if profile.value("frozen_base_dtype") is not None:
        out["fp32_trained_weights"] = profile.value("frozen_base_dtype") == "fp32"
    if profile.value("selective_checkpointing") is not None:
        out["selective_checkpointing"] = profile.value("selective_checkpointing")
    for key in ("fused_optimizer", "shard_embeddings", "fsdp_no_sync"):
        if profile.value(key) is not None:
            out[key] = bool(profile.value(key))
    return out


def efficiency_of(profile: Profile) -> tuple[str | None, str]:
    """(efficiency key, a line saying where it comes from): the profile's own measured
    efficiency, one inherited from its base, or none."""
    key = profile.value("efficiency")
    if key is None:
        return None, f"{profile.id}: no measured efficiency in its profile or its bases"
    base = profile.inherited("efficiency")
    if base:
        return key, f"efficiency inherited from {base}: no measured case of {profile.id}"
    return key, f"efficiency of {profile.id} ({profile.source('efficiency')})"
