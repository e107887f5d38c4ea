"""Acceptance: the memory model against the published cases in ../shared/validation.

Bar (issue 2): on the usable SFT-family peak cases, median |relative error| <= 8 %, p90 <= 20 %;
fits/OOM verdicts (measured peaks count as "fits") >= 90 % right.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_catalog
from planner.validate import validate_file

CASES = Path(__file__).resolve().parents[1].parent / "shared" / "validation" / "memory_cases.yaml"

pytestmark = pytest.mark.skipif(
    not CASES.is_file(), reason=f"validation data not found at {CASES} (CI has it beside the repo)"
)


@pytest.fixture(scope="module")
def summary():
    return validate_file(CASES, load_catalog())[1]


def test_sft_family_peak_error(summary):
    s = summary["sft_acceptance"]
    assert s["peak_cases"] >= 25, s
    assert s["median_abs_err"] <= 0.08, s
    assert s["p90_abs_err"] <= 0.20, s


def test_sft_family_verdicts(summary):
    s = summary["sft_verdicts"]
    assert s["fits_cases"] >= 35, s
    assert s["fits_accuracy"] >= 0.90, s
    assert s["fits_predicted_for_oom"] <= 1, s


def test_every_usable_sft_case_is_modelled(summary):
    assert summary["sft_acceptance"]["not_modelled"] == 0, summary["not_modelled_reasons"]
