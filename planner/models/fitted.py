"""The fitted constants, as ``python benchmarks/fit.py --write`` computed them from their cases.

planner/models/fitted.yaml is generated: efficiency.py and calibration.py read their fitted values
from it and keep the names, the case lists and the explanations. Never edit a number in it by hand:
tests/test_fit.py checks that it equals what benchmarks/fit.py computes from the validation cases.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

FILE = "fitted.yaml"


@cache
def fitted() -> dict[str, Any]:
    """The generated file: {"efficiency": {...}, "calibration": {...}}."""
    text = resources.files("planner.models").joinpath(FILE).read_text(encoding="utf-8")
    return yaml.safe_load(text)
