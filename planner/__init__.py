"""planner: a constraint-solver hardware planner for training large language models.

Library API: ``check``, ``plan``, ``pareto``, ``tune``, ``load_catalog``, with ``TrainConfig``
(one configuration) and ``PlanRequest`` (what to plan). ``plan`` and ``pareto`` load OR-Tools on
first use.
"""

from typing import Any

from planner.api import check
from planner.catalog import load_catalog
from planner.request import PlanRequest, TrainConfig
from planner.tune import tune

__all__ = ["check", "load_catalog", "pareto", "plan", "tune", "PlanRequest", "TrainConfig"]


def __getattr__(name: str) -> Any:
    if name in ("plan", "pareto"):  # behind api's argument checks; OR-Tools loads on first call
        from planner import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
