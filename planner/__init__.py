"""planner: a constraint-solver hardware planner for training large language models."""

from planner.api import check
from planner.catalog import load_catalog
from planner.request import TrainConfig

__all__ = ["check", "load_catalog", "TrainConfig"]
