"""One vocabulary for what is open: every searched TrainConfig field is pinned (a domain of one
value) or left open (a domain of values in preference order), and the candidates are the product
of the domains filtered by the combination rules (request_checks.choice_error).

A domain is keyed by a TrainConfig field, or by a tuple of fields that one choice sets together:
(method, lora_rank) since a rank exists only with an adapter method, (zero_stage, fsdp) since a
sharding is one of ZeRO or FSDP, (placement, role_gpus) since split placement gives each role a
group. A candidate is a ``Choice``: those fields by their TrainConfig names, a tuple (hashable
and cheap to compare, as the space memoises per candidate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from planner.catalog.request import (
    DEFAULT_LORA_RANK,
    LORA_RANKS,
    PEFT_METHODS,
    SHARDING_FIELDS,
)
from planner.catalog.request_checks import choice_error
from planner.catalog.role_gpus import split_role_names
from planner.catalog.specs import ModelSpec, divisors

# Default domains in preference order (a tie in cost and time goes to the earlier value):
# fuller fidelity first, then less memory traffic and recomputation.
AUTO_METHODS = ("full", "lora", "dora", "qlora")
AUTO_OPTIMIZERS = ("adamw", "adamw-8bit")
AUTO_CHECKPOINTINGS = ("none", "full")
ZERO_SHARDINGS = ("none", "zero1", "zero2", "zero3")
MICRO_BATCHES = (1, 2, 4, 8, 16, 32)
# Largest expert parallel degree a plan searches: DeepSeek-V3 trained with 64-way EP over 8
# nodes (DeepSeek-V3 technical report, section 3.2.1); wider groups only add all-to-all hops.
MAX_EP = 64

Key = str | tuple[str, ...]
Domains = dict[Key, tuple[Any, ...]]


class Choice(NamedTuple):
    """One candidate of the searched fields, each by its TrainConfig name and value (a partial
    TrainConfig: ``base.model_copy(update=choice._asdict())``)."""

    method: str
    lora_rank: int | None
    optimizer: str
    zero_stage: int
    fsdp: bool
    offload: str
    checkpointing: str
    placement: str = "colocate"
    role_gpus: tuple[tuple[str, int], ...] | None = None
    rollout_tp: int = 1
    offload_idle: bool = False
    ep: int = 1  # expert parallel degree (MoE models on a framework that runs it)
    # hybrid sharding (HSDP): the states sharded over the GPUs of one host, replicated across
    # hosts (TrainConfig.dp_shard; catalog.hybrid.plan_hybrid_shards); None: over every rank
    dp_shard: int | None = None

    @property
    def role_names(self) -> tuple[str, ...]:
        """Split placement: the roles with GPUs of their own; otherwise none."""
        return () if self.role_gpus is None else tuple(n for n, _ in self.role_gpus)

    @property
    def groups(self) -> int:
        """The GPU groups of the placement (placement_groups)."""
        return placement_groups(self.placement, len(self.role_names))

    @property
    def engine_layout(self) -> tuple[str, int, tuple[str, ...], bool, int]:
        """What the rollout engine reads of a candidate: placement, rollout TP, the split roles,
        whether the actor's weights are sharded (an engine on the actor's parameters gathers
        them: rollout.engine_weight_bytes) and the hybrid shard group (0: none; the weight
        sync gathers within it: rltime.engine_side)."""
        return (self.placement, self.rollout_tp, self.role_names,
                self.fsdp or self.zero_stage == 3, self.dp_shard or 0)


def placement_groups(placement: str, roles: int) -> int:
    """GPU groups of dp GPUs each in the planner's layouts: 1 colocated, 2 separate (trainer
    and engines), split one per role plus the engines (OpenRLHF's equal groups)."""
    return {"colocate": 1, "separate": 2}.get(placement, roles + 1)


def method_rank_domain(methods: Iterable[str], ranks: Iterable[int]) -> tuple[Any, ...]:
    """(method, lora_rank) pairs: every rank of each adapter method, None for the others."""
    ranks = tuple(ranks)
    return tuple((m, r) for m in methods for r in (ranks if m in PEFT_METHODS else (None,)))


def rank_domain(lora_rank: int | str | None) -> tuple[int, ...]:
    """The ranks tried: LORA_RANKS for 'auto', else the pin or DEFAULT_LORA_RANK."""
    return LORA_RANKS if lora_rank == "auto" else (lora_rank or DEFAULT_LORA_RANK,)


def sharding_domain(labels: Iterable[str]) -> tuple[tuple[int, bool], ...]:
    """(zero_stage, fsdp) of each sharding label, in the labels' order."""
    return tuple(SHARDING_FIELDS[s] for s in labels)


def placement_domain(placements: Iterable[str], *, workload: str, reference: bool,
                     has_reward: bool, reward_function: bool = False
                     ) -> tuple[tuple[str, Any], ...]:
    """(placement, role_gpus) pairs: split gives each role a group (one GPU here; the layout
    sizes the groups), the others no role groups."""
    names = split_role_names(workload, reference=reference, has_reward=has_reward,
                             reward_function=reward_function)
    return tuple((p, tuple((n, 1) for n in names) if p == "split" else None)
                 for p in placements)


def pinned_or(value: Any, open_values: tuple[Any, ...], *, open_marks: tuple[Any, ...] = (
        None, "auto")) -> tuple[Any, ...]:
    """A domain: the pinned value alone, or ``open_values`` when the value marks it open."""
    return open_values if value in open_marks else (value,)


def pipeline_parallel_options(model: ModelSpec, *, at_most: int = 16) -> tuple[int, ...]:
    """pp divides the layers (equal stages)."""
    return divisors(model.num_layers, at_most=at_most)


def expert_parallel_options(model: ModelSpec, *, at_most: int) -> tuple[int, ...]:
    """ep degrees of an MoE model: the divisors of its routed experts (each rank holds
    experts / ep of them: Megatron-Core asserts num_experts % ep == 0) up to ``at_most``
    (MAX_EP and the GPU limit); (1,) for a dense model."""
    if model.moe is None:
        return (1,)
    return divisors(model.moe.num_experts, at_most=at_most)


def choices(domains: Mapping[Key, tuple[Any, ...]]) -> tuple[Choice, ...]:
    """Every combination of the domains of Choice fields (the first key outermost, so earlier
    values of earlier keys come first) that the combination rules accept; the other domains
    (the layout's tp, pp and micro-batch) are the space's own axes."""
    names: list[str] = []
    parts: list[tuple[tuple[Any, ...], ...]] = []  # per key, its values as tuples of fields
    for key, values in domains.items():
        fields = (key,) if isinstance(key, str) else key
        if set(fields) <= set(Choice._fields):
            names += fields
            parts.append(tuple((v,) for v in values) if isinstance(key, str) else values)
    # in Choice's field order (PlanRequest.domains keeps it) a combination is the tuple itself
    make = Choice._make if names == list(Choice._fields) else \
        (lambda flat: Choice(**dict(zip(names, flat, strict=True))))
    half = len(parts) // 2
    heads, tails = _flat_product(parts[:half]), _flat_product(parts[half:])
    # joined one at a time: a rejected combination is dropped as it is made
    return tuple(c for c in (make(h + t) for h in heads for t in tails)
                 if choice_error(c) is None)


def _flat_product(parts: list[tuple[tuple[Any, ...], ...]]) -> list[tuple[Any, ...]]:
    """The product of ``parts``, each combination one flat tuple, the first part outermost."""
    out: list[tuple[Any, ...]] = [()]
    for values in parts:
        out = [c + v for c in out for v in values]
    return out
