"""Catalog freshness (issue 6, section 4): a price older than PRICE_MAX_AGE_DAYS gives a warning
in the cost notes of every check and plan that uses it; today is injectable (PLANNER_TODAY)."""

from __future__ import annotations

import contextlib
import io
import json
from datetime import date

import pytest

from planner.catalog import freshness
from planner.catalog.freshness import (
    PRICE_MAX_AGE_DAYS,
    price_age_days,
    price_date,
    stale_price_notes,
    today,
)
from planner.catalog.load import load_catalog
from planner.cli import main
from planner.errors import PlannerError
from planner.models.cost import define_job, job_cost


@pytest.mark.parametrize(("text", "expected"), [
    ("2025-08", date(2025, 8, 1)),  # a month counts from its first day
    ("2026-05-18", date(2026, 5, 18)),
    (" 2024-06 ", date(2024, 6, 1)),
    ("2025-13", None), ("2025-02-30", None), ("soon", None), ("2025", None), (None, None),
])
def test_price_date(text, expected):
    assert price_date(text) == expected


def test_age_in_days():
    # 2025-08-01 -> 2026-11-21: 365 (to 2026-08-01) + 31 + 30 + 31 (Aug, Sep, Oct) + 20 = 477
    assert price_age_days("2025-08", on=date(2026, 11, 21)) == 477
    assert price_age_days("2027-01", on=date(2026, 11, 21)) < 0  # a date ahead of today
    assert price_age_days("n/a", on=date(2026, 11, 21)) is None


def test_warning_only_past_the_stated_age():
    on = date(2026, 1, 1)
    assert PRICE_MAX_AGE_DAYS == 365
    # 2025-01-01 -> 2026-01-01 is 365 days: at the limit, no warning; a day more warns
    assert stale_price_notes([("GPU a", "2025-01-01")], on=on) == []
    notes = stale_price_notes([("GPU a", "2024-12-31"), ("GPU b", "2025-06"),
                               ("GPU c", "2027-01")], on=on)
    assert notes == ["warning: price of GPU a as of 2024-12-31 is 366 days old (more than 365): "
                     "check current prices"]
    assert stale_price_notes([("GPU a", "2025-06")], on=on, max_age_days=30) != []


def test_unreadable_date_is_a_warning_too():
    (note,) = stale_price_notes([("host platform x", "spring 2025")], on=date(2026, 1, 1))
    assert "host platform x" in note and "'spring 2025'" in note and "unknown" in note


def test_today_is_injectable(monkeypatch):
    monkeypatch.setenv(freshness.TODAY_ENV, "2030-02-03")
    assert today() == date(2030, 2, 3)
    assert price_age_days("2030-02") == 2
    monkeypatch.setenv(freshness.TODAY_ENV, "tomorrow")
    with pytest.raises(PlannerError, match="PLANNER_TODAY='tomorrow'"):
        today()
    monkeypatch.delenv(freshness.TODAY_ENV)
    assert today() == date.today()


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _cost(cat, gpu: str, pricing: str, platform: str | None = None):
    return job_cost(cat.gpu(gpu), 8, tokens_per_s=1e4, job=define_job(tokens=1e8),
                    pricing=pricing, platform=cat.platform(platform) if platform else None)


def test_cost_notes_warn_on_stale_gpu_and_host_prices(cat, monkeypatch):
    # h100-sxm prices as of 2026-05-18, hgx-8gpu-sxm host price as of 2023-05
    monkeypatch.setenv(freshness.TODAY_ENV, "2026-06-01")
    notes = _cost(cat, "h100-sxm", "buy", "hgx-8gpu-sxm").notes
    assert not any("price of GPU h100-sxm" in n for n in notes)
    # 2023-05-01 -> 2026-06-01: 365 * 3 + 1 (Feb 2024) + 31 = 1,127 days
    assert ("warning: price of host platform hgx-8gpu-sxm as of 2023-05 is 1,127 days old "
            "(more than 365): check current prices") in notes
    monkeypatch.setenv(freshness.TODAY_ENV, "2027-05-19")  # 366 days after 2026-05-18
    for pricing in ("buy", "rent"):
        notes = _cost(cat, "h100-sxm", pricing).notes
        assert ("warning: price of GPU h100-sxm as of 2026-05-18 is 366 days old (more than "
                "365): check current prices") in notes
        assert _cost(cat, "h100-sxm", pricing).summary()["notes"] == list(notes)


def _run(argv: list[str]) -> tuple[object, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit as exc:
            return exc.code, out.getvalue()
    return None, out.getvalue()


def test_check_and_plan_carry_the_warning(monkeypatch):
    monkeypatch.setenv(freshness.TODAY_ENV, "2026-06-01")  # rtx-4090 priced as of 2026-05
    plan_argv = ["plan", "--model", "0.5b", "--gpus", "rtx-4090", "--max-gpus", "4", "--json"]
    code, out = _run(plan_argv)
    assert code == 0 and not any("warning" in n for n in json.loads(out)["plan"]["cost"]["notes"])
    monkeypatch.setenv(freshness.TODAY_ENV, "2029-01-01")
    code, out = _run(plan_argv)
    notes = json.loads(out)["plan"]["cost"]["notes"]
    assert code == 0 and any(n.startswith("warning: price of GPU rtx-4090 as of 2026-05 is ")
                             for n in notes)
    code, out = _run(["check", "--model", "0.5b", "--gpu", "rtx-4090"])
    assert code == 0 and "note: warning: price of GPU rtx-4090 as of 2026-05 is " in out


def test_catalog_gpus_shows_price_dates(cat):
    code, out = _run(["catalog", "gpus"])
    assert code == 0 and "prices as of" in out
    assert all(g.price_as_of in out for g in cat.gpus.values() if g.price_as_of)
