"""Split placement: the roles that get GPUs of their own, their equal default groups, and
--role-gpus as text ("actor=4,critic=2,..." <-> ((role, gpus), ...))."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.errors import PlannerError

if TYPE_CHECKING:
    from planner.catalog.request import TrainConfig


def format_role_gpus(role_gpus: tuple[tuple[str, int], ...]) -> str:
    """((role, gpus), ...) -> "role=gpus,..." (the inverse of parse_role_gpus)."""
    return ",".join(f"{n}={g}" for n, g in role_gpus)


def parse_role_gpus(text: str) -> tuple[tuple[str, int], ...]:
    """--role-gpus actor=4,critic=2,reference=1,reward=1 -> (('actor', 4), ...)."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, count = part.partition("=")
        if not (count.strip().isascii() and count.strip().isdigit()):
            raise PlannerError(f"--role-gpus {part!r}: write role=GPUs, e.g. "
                               "actor=4,critic=2,reference=1,reward=1")
        out.append((name.strip(), int(count)))
    if not out:
        raise PlannerError(f"--role-gpus {text!r}: write role=GPUs, e.g. actor=4,critic=2")
    return tuple(out)


SPLIT_ROLES = ("actor", "critic", "reference", "reward")


def split_role_names(workload: str, *, reference: bool, has_reward: bool,
                     reward_function: bool = False) -> tuple[str, ...]:
    """Roles that get GPUs of their own with split placement (OpenRLHF without
    --colocate_*): the actor, PPO's critic and reward model (none where a function scores),
    GRPO's reward model when one is given, and the reference (OpenRLHF loads it as a model of
    its own on its own GPUs, also when the actor trains adapters)."""
    names = ["actor"]
    if workload == "ppo":
        names.append("critic")
    if reference:
        names.append("reference")
    if (workload == "ppo" and not reward_function) or has_reward:
        names.append("reward")
    return tuple(names)


def fill_role_gpus(cfg: TrainConfig, *, has_reward: bool) -> TrainConfig:
    """Split placement without --role-gpus: the roles and the engines take equal groups of
    the GPUs (OpenRLHF's examples give every role and the vLLM engines the same count)."""
    if not cfg.is_rl or cfg.placement != "split" or cfg.role_gpus is not None:
        return cfg
    names = split_role_names(cfg.workload, reference=cfg.reference, has_reward=has_reward,
                             reward_function=cfg.reward_function)
    groups = len(names) + 1
    if cfg.num_gpus % groups:
        raise PlannerError(
            f"--placement split on {cfg.num_gpus} GPUs: the {len(names)} roles "
            f"({', '.join(names)}) and the engines take equal groups, so --num-gpus must be a "
            f"multiple of {groups}; or give --role-gpus")
    g = cfg.num_gpus // groups
    return cfg.model_copy(update={"role_gpus": tuple((n, g) for n in names)})
