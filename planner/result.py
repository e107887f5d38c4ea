"""Typed results of the planner. Infeasible and time-limited are statuses, never exceptions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from planner.memory import MemoryEstimate
from planner.request import TrainConfig

Status = Literal["optimal", "feasible", "infeasible", "unknown"]


@dataclass(frozen=True)
class Plan:
    """One concrete answer: what to get and how to run it, re-checked by the analytic models."""

    model: str
    gpu: str
    platform: str | None
    num_gpus: int
    num_hosts: int
    config: TrainConfig
    memory: MemoryEstimate
    cost_usd: float
    cost_items: dict[str, float]
    cost_basis: str  # "buy" | "rent"

    @property
    def method_label(self) -> str:
        c = self.config
        return f"{c.method} r{c.rank}" if c.is_peft else c.method


@dataclass(frozen=True)
class Binding:
    """A rule at the plan: how much of its limit the plan uses."""

    name: str
    used: float
    limit: float
    unit: str
    slack: float
    binding: bool
    relaxed: str | None = None  # what the plan would become with this rule relaxed one step


@dataclass(frozen=True)
class Conflict:
    name: str
    detail: str
    fix: str


@dataclass(frozen=True)
class PlanResult:
    status: Status
    plan: Plan | None
    binding: tuple[Binding, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    alternatives: tuple[Plan, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
