"""planner: a constraint-solver hardware planner for training large language models.

Library API: ``check``, ``evaluate``, ``plan``, ``pareto``, ``tune``, ``load_catalog``, with
``TrainConfig`` (one configuration) and ``PlanRequest`` (what to plan); typed results
``Evaluation`` (what ``check`` renders), ``PlanResult``, ``Plan``, ``TuneResult``;
``json_schema(kind)`` for the ``--json`` documents. ``plan`` and ``pareto`` load OR-Tools on
first use.
"""

from typing import Any

from planner.api import Evaluation, check, evaluate
from planner.catalog.load import Catalog, load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import TrainConfig
from planner.errors import CatalogError, PlannerError, UnknownNameError
from planner.inputs import FieldErrors, InputError
from planner.outputs.schema import SCHEMA_VERSION, json_schema
from planner.solver.result import Binding, Conflict, Plan, PlanResult
from planner.solver.tune import TuneResult, tune
from planner.solver.tune_space import Pins

__all__ = [
    # calls
    "check", "evaluate", "load_catalog", "pareto", "plan", "tune", "json_schema",
    # requests
    "PlanRequest", "TrainConfig", "Pins",
    # typed results
    "Catalog", "Evaluation", "Plan", "PlanResult", "Binding", "Conflict", "TuneResult",
    "SCHEMA_VERSION",
    # errors (every bad input raises a PlannerError)
    "PlannerError", "CatalogError", "UnknownNameError", "InputError", "FieldErrors",
]


def __getattr__(name: str) -> Any:
    if name in ("plan", "pareto"):  # behind api's argument checks; OR-Tools loads on first call
        from planner import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
