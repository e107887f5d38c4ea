"""The open choices of a plan request as strategies: method, rank, optimizer, sharding, offload,
checkpointing and the RL placement, rollout TP and idle offload, each a candidate the space
tabulates (one per combination the frameworks offer)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog.frameworks import Profile, unsupported
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import (
    DEFAULT_LORA_RANK,
    LORA_RANKS,
    OFFLOADS,
    PLACEMENTS,
    SHARDING_FIELDS,
    TrainConfig,
    split_role_names,
)
from planner.catalog.request_checks import validate_engine
from planner.catalog.specs import (
    ModelSpec,
    divisors,
    tensor_parallel_options,
)


def placement_groups(placement: str, roles: int) -> int:
    """GPU groups of dp GPUs each in the planner's layouts: 1 colocated, 2 separate (trainer
    and engines), split one per role plus the engines (OpenRLHF's equal groups)."""
    return {"colocate": 1, "separate": 2}.get(placement, roles + 1)


# ---------------------------------------------------------------------------------------------
# The discrete options
# ---------------------------------------------------------------------------------------------
AUTO_METHODS = ("full", "lora", "dora", "qlora")


MICRO_BATCHES = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Strategy:
    """The non-numeric choices of one plan (everything but GPU type, counts and batch)."""

    method: str
    lora_rank: int | None
    optimizer: str
    sharding: str  # none | zero1 | zero2 | zero3 | fsdp
    offload: str
    checkpointing: str
    placement: str = "colocate"  # RL: colocate | separate | split
    rollout_tp: int = 1
    offload_idle: bool = False
    role_names: tuple[str, ...] = ()  # split: the roles with GPUs of their own

    @property
    def groups(self) -> int:
        """The GPU groups of the strategy's placement."""
        return placement_groups(self.placement, len(self.role_names))

    def config_fields(self) -> dict[str, object]:
        """The TrainConfig fields the strategy fixes."""
        return {
            "placement": self.placement,
            "role_gpus": tuple((n, 1) for n in self.role_names)
            if self.placement == "split" else None,
            "rollout_tp": self.rollout_tp,
            "offload_idle": self.offload_idle,
            "method": self.method,
            "lora_rank": self.lora_rank,
            "optimizer": self.optimizer,
            "zero_stage": SHARDING_FIELDS[self.sharding][0],
            "fsdp": SHARDING_FIELDS[self.sharding][1],
            "offload": self.offload,
            "checkpointing": self.checkpointing,
        }


def valid_strategy(s: Strategy) -> bool:
    """Combinations the frameworks offer: offload needs ZeRO/FSDP, parameter offload needs
    ZeRO-3/FSDP; a LoRA rank only with an adapter method."""
    if (s.lora_rank is not None) != (s.method in ("lora", "dora", "qlora")):
        return False
    if s.offload != "none" and s.sharding == "none":
        return False
    return not (s.offload == "optimizer+params" and s.sharding not in ("zero3", "fsdp"))


def pipeline_parallel_options(model: ModelSpec, *, at_most: int = 16) -> tuple[int, ...]:
    """pp divides the layers (equal stages)."""
    return divisors(model.num_layers, at_most=at_most)


def engine_layout(s: Strategy) -> tuple[str, int, tuple[str, ...]]:
    """What the rollout engine reads of a strategy (rollout.engine, space.engine_at):
    placement, rollout TP and the split roles' groups."""
    return (s.placement, s.rollout_tp, s.role_names)


def _rl_choices(request: PlanRequest, model: ModelSpec, per_node: int,
                base: TrainConfig | None = None) -> list[tuple[str, int, bool]]:
    """(placement, rollout TP, offload_idle) choices of an RL request; one neutral choice
    otherwise, and for the trainer's own generate (it runs colocated, at the trainer's
    layout, nothing parked: request_checks.validate_engine says so of a pin that differs)."""
    if not request.is_rl:
        return [("colocate", 1, False)]
    if base is not None and base.generates_in_trainer:
        validate_engine(base.model_copy(update={
            "placement": request.placement or "colocate", "rollout_tp": request.rollout_tp or 1,
            "offload_idle": bool(request.offload_idle)}))
        return [("colocate", 1, False)]
    placements = (request.placement,) if request.placement else PLACEMENTS
    rtps = (request.rollout_tp,) if request.rollout_tp else tensor_parallel_options(
        model, per_node)
    idles = (request.offload_idle,) if request.offload_idle is not None else (False, True)
    # split: no role shares a GPU, so there is nothing idle to move (request_checks._validate_split)
    return [(p, t, i) for p in placements for t in rtps for i in idles
            if not (p == "split" and i)]


def _strategies(request: PlanRequest, rl: list[tuple[str, int, bool]] | None = None,
                shardings: tuple[str, ...] = ("none", "zero1", "zero2", "zero3")
                ) -> tuple[Strategy, ...]:
    methods = (("full",) if request.workload == "pretrain" else AUTO_METHODS) \
        if request.method == "auto" else (request.method,)  # pretraining trains every weight
    optimizers = ("adamw", "adamw-8bit") if request.optimizer == "auto" else (request.optimizer,)
    shardings = (request.sharding,) if request.sharding else shardings
    offloads = (OFFLOADS if request.offload == "auto" else (request.offload,))
    ckpts = ("none", "full") if request.checkpointing == "auto" else (request.checkpointing,)
    out = []
    if request.lora_rank == "auto":
        ranks: tuple[int | None, ...] = LORA_RANKS
    else:
        ranks = (request.lora_rank or DEFAULT_LORA_RANK,)
    for method, rank in ((m, r if m in ("lora", "dora", "qlora") else None)
                         for m in methods for r in ranks):
        if rank is None and method in [s.method for s in out]:
            continue  # full / freeze: one pass, no rank
        for opt in optimizers:
            for shard in shardings:
                for off in offloads:
                    for ck in ckpts:
                        for place, rtp, idle in rl or [("colocate", 1, False)]:
                            names = split_role_names(
                                request.workload, reference=request.reference,
                                has_reward=request.reward_model is not None,
                            ) if place == "split" else ()
                            s = Strategy(method, rank, opt, shard, off, ck, place, rtp, idle,
                                         names)
                            if valid_strategy(s):
                                out.append(s)
    return tuple(out)


def runs_strategy(profile: Profile, base: TrainConfig, s: Strategy) -> bool:
    """The framework runs this strategy (on several GPUs, its sharding as a multi-GPU job)."""
    cfg = base.model_copy(update={**s.config_fields(), "num_gpus": 2})
    return not unsupported(profile, cfg)
