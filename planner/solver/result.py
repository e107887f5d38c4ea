"""Typed results of the planner. Infeasible and time-limited are statuses, never exceptions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from planner.catalog.request import TrainConfig
from planner.models.cost import CostEstimate
from planner.models.memory import MemoryEstimate
from planner.models.throughput import ThroughputEstimate

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
    throughput: ThroughputEstimate
    cost: CostEstimate  # the job's cost; for purchases the hardware (+ power if asked)
    # False when a solver time limit stopped the tie-break chain: the objective value is the
    # optimum, the layout among the plans reaching it may not be the preferred one
    proven_optimal: bool = True
    # what its launch loads: the repo id as the request named it, else the catalog entry's
    # (catalog.load.checkpoint_of); None where neither names one
    checkpoint: str | None = None

    @property
    def cost_usd(self) -> float:
        """The plan's cost, USD (0 when not priced)."""
        return self.cost.usd or 0.0

    @property
    def time_hours(self) -> float:
        """The job's time, hours."""
        return self.cost.hours

    @property
    def method_label(self) -> str:
        """The training method's label."""
        return self.config.method_label

    @property
    def sharding_label(self) -> str:
        """The sharding as plan tables name it: zero0-3 (zero0: plain data parallel), fsdp, or
        hsdp<group>: FSDP's hybrid sharding over groups of that many GPUs (one host each)."""
        c = self.config
        return (f"hsdp{c.dp_shard}" if c.dp_shard else "fsdp") if c.fsdp else f"zero{c.zero_stage}"


SLACK_TIGHT = 0.05  # a rule under 5 % slack that does not bind is reported as tight


@dataclass(frozen=True)
class Binding:
    """A rule at the plan: how much of its limit the plan uses."""

    name: str
    used: float
    limit: float
    unit: str
    slack: float
    binding: bool  # relaxing it one step gives a strictly better plan (re-solved)
    relaxed: str | None = None  # what the plan would become with this rule relaxed one step
    tight: bool = False  # under SLACK_TIGHT slack, and relaxing it does not help


@dataclass(frozen=True)
class Conflict:
    """A rule no plan satisfies: its name, why, and the smallest fix."""
    name: str
    detail: str
    fix: str


@dataclass(frozen=True)
class PlanResult:
    """The solve's status, plan, binding rules, conflicts and alternatives."""
    status: Status
    plan: Plan | None
    binding: tuple[Binding, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    alternatives: tuple[Plan, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
