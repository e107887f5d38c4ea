"""planner: a constraint-solver hardware planner for training large language models.

Library API: ``check``, ``plan``, ``pareto``, ``load_catalog``, with ``TrainConfig`` (one
configuration) and ``PlanRequest`` (what to plan). ``plan`` and ``pareto`` load OR-Tools on
first use.
"""

from typing import Any

from planner.api import check
from planner.catalog import load_catalog
from planner.request import PlanRequest, TrainConfig

__all__ = ["check", "load_catalog", "pareto", "plan", "PlanRequest", "TrainConfig"]


def __getattr__(name: str) -> Any:
    if name in ("plan", "pareto"):
        from planner import solve

        return getattr(solve, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
