"""Rentals planned on real offers (issue 19 item 4): instances of a provider's shape, billed by
increment and minimum, a cap on the GPUs one offer supplies, the offer named in the JSON, and
check / the independent reference pricing a rental as plan does."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from planner.api import check
from planner.catalog.load import load_catalog
from planner.catalog.offers import DEFAULT_MAX_GPUS_PER_OFFER, OfferSpec, offer_id, rental_offers
from planner.catalog.plan_request import PlanRequest
from planner.models.rental import bill_usd, billed_hours
from planner.solver.search import request_job
from planner.solver.solve import plan
from planner.solver.space import build_space
from planner.validation.reference import reference_optimum
from tests.test_cli import run

CAT = load_catalog()
OFFER_KEYS = {"provider", "gpus_per_instance", "usd_per_hour", "billing_increment_hours",
              "price_as_of"}


def _offer(**kw) -> OfferSpec:
    base = dict(provider="acme", instance_type="x8", gpu="h100-sxm", gpus_per_instance=8,
                usd_per_hour=16.0, billing_increment_hours=1.0, price_as_of="2026-11-01",
                source="https://example.com/prices")
    return OfferSpec(**{**base, **kw})


def test_bill_is_whole_instances_times_billed_increments():
    hourly = _offer()
    # 9 GPUs need 2 instances of 8; 1.5 h bills 2 hours each: 2 x 16 x 2 = 64
    assert bill_usd(hourly, 9, 1.5) == pytest.approx(64.0)
    assert bill_usd(hourly, 8, 1.0) == pytest.approx(16.0)  # exactly one increment
    minute = _offer(billing_increment_hours=1 / 60, minimum_hours=0.25)
    assert bill_usd(minute, 1, 0.1) == pytest.approx(16.0 * 0.25)  # the minimum
    # elementwise, as the search scores many pairs, and the same as the scalar rule
    n, h = np.array([1, 8, 9, 17]), np.array([0.01, 0.5, 1.01, 3.0])
    got = bill_usd(minute, n, h)
    want = [math.ceil(k / 8) * 16.0 * billed_hours(x, 1 / 60, 0.25)
            for k, x in zip(n, h, strict=True)]
    assert got == pytest.approx(want)


def test_plan_cost_names_its_offer_and_is_its_bill(capsys):
    code, out, _ = run(capsys, "plan", "--model", "7b", "--pricing", "rent", "--gpus",
                       "h100-sxm", "--tokens", "2e8", "--json")
    assert code == 0
    p = json.loads(out)["plan"]
    o = p["cost"]["offer"]
    assert set(o) >= OFFER_KEYS
    assert o["instances"] == math.ceil(p["num_gpus"] / o["gpus_per_instance"])
    billed = billed_hours(p["time_hours"], o["billing_increment_hours"], o["minimum_hours"])
    assert o["billed_hours"] == pytest.approx(billed)
    assert p["cost"]["usd"] == pytest.approx(o["instances"] * o["usd_per_hour"] * billed)
    # the offer is one of the GPU's listed offers, as `planner catalog offers` shows it
    assert f"{o['provider']}/{o['instance_type']}" in {offer_id(x) for x in
                                                        rental_offers(CAT, ("h100-sxm",))}


def test_short_jobs_prefer_fine_billing_and_long_jobs_the_lower_rate():
    """On H100-SXM the cheapest rate per GPU-hour is billed hourly; a job of minutes pays a
    whole hour there, so a per-second offer at a higher rate is cheaper for it."""
    short = plan(PlanRequest(model="qwen2.5-0.5b", pricing="rent", gpus=("h100-sxm",),
                             tokens=2e6, method="lora"), CAT).plan
    long = plan(PlanRequest(model="qwen2.5-0.5b", pricing="rent", gpus=("h100-sxm",),
                            tokens=5e9, method="lora"), CAT).plan
    s, g = short.cost.rental.offers[0], long.cost.rental.offers[0]
    assert short.time_hours < 0.5 and long.time_hours > 1
    assert s.billing_increment_hours < g.billing_increment_hours
    assert s.usd_per_hour / s.gpus_per_instance > g.usd_per_hour / g.gpus_per_instance
    # each is the cheapest bill, for its own job's hours, of every offer of that GPU with its
    # instance size (the same nodes, so the same speed)
    for p in (short, long):
        size = p.cost.rental.offers[0].gpus_per_instance
        bills = [bill_usd(o, p.num_gpus, p.time_hours) for o in rental_offers(CAT, ("h100-sxm",))
                 if o.gpus_per_instance == size]
        assert p.cost_usd == pytest.approx(min(bills), rel=1e-9)


def test_supply_per_offer_is_capped_and_the_cap_is_a_flag(capsys):
    """Before: one price per GPU type and unlimited supply gave 1,024 GB200s (issue 19). Now
    one offer supplies at most DEFAULT_MAX_GPUS_PER_OFFER GPUs unless the user says more."""
    args = ["plan", "--model", "7b", "--pricing", "rent", "--tokens", "1e9", "--objective",
            "time", "--budget", "3000", "--global-batch", "1024", "--json"]
    code, out, _ = run(capsys, *args)
    capped = json.loads(out)["plan"]
    assert code == 0 and capped["num_gpus"] <= DEFAULT_MAX_GPUS_PER_OFFER
    rules = {b["name"]: b for b in json.loads(out)["binding"]}
    assert rules["max_gpus_per_offer"]["limit"] == DEFAULT_MAX_GPUS_PER_OFFER
    code, out, _ = run(capsys, *args, "--max-gpus-per-offer", "256")
    wider = json.loads(out)["plan"]
    assert code == 0 and DEFAULT_MAX_GPUS_PER_OFFER < wider["num_gpus"] <= 256
    assert wider["time_hours"] < capped["time_hours"]


def test_idle_gpus_of_an_instance_are_billed_and_said(capsys):
    code, out, _ = run(capsys, "plan", "--model", "7b", "--pricing", "rent", "--gpus",
                       "b200", "--num-gpus", "6", "--global-batch", "60", "--tokens", "1e9",
                       "--method", "lora")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("rent"))
    # six B200s from 8-GPU instances leave 2 idle, from 2-GPU ones none
    assert "6 x b200" in line and ("idle" in line or "2 GPUs each" in line)


def test_rental_flags_on_a_purchase_are_bad_input(capsys):
    for flag in (["--max-gpus-per-offer", "8"], ["--spot"]):
        code, _, err = run(capsys, "plan", "--model", "7b", *flag)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "--pricing rent" in err


def test_spot_plans_use_spot_offers_only():
    p = plan(PlanRequest(model="7b", pricing="rent", spot=True, tokens=1e8), CAT).plan
    assert p.cost.rental.offers[0].spot


def test_instance_host_ram_is_a_rule():
    """An instance's RAM holds what the plan keeps on its host: cudo's 1-GPU A100 PCIe instance
    has 4 GiB, which no plan with more host RAM may take."""
    req = PlanRequest(model="7b", pricing="rent", gpus=("a100-80gb-pcie",), tokens=1e8,
                      offload="optimizer+params", sharding="zero3")
    p = plan(req, CAT).plan
    o = p.cost.rental.offers[0]
    assert o.host_ram_gib is not None
    assert p.memory.host_ram / 2**30 <= o.host_ram_gib


def test_check_prices_on_a_named_offer(capsys):
    req = PlanRequest(model="qwen2.5-0.5b", pricing="rent", gpus=("h100-sxm",), tokens=1e8,
                      method="lora")
    p = plan(req, CAT).plan
    billed = p.cost.rental.offers[0]
    doc = check(model=req.model, gpu=p.gpu, config=p.config, catalog=CAT, pricing="rent",
                job=request_job(req), offer=offer_id(billed))
    assert doc["cost"]["usd"] == pytest.approx(p.cost_usd, rel=1e-12)
    assert doc["cost"]["offer"]["instance_type"] == billed.instance_type
    code, _, err = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--pricing",
                       "rent", "--offer", "nobody/none")
    assert code == 2 and "is not an offer of h100-sxm" in err and len(err.splitlines()) == 1
    code, _, err = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--offer",
                       offer_id(billed))
    assert code == 2 and "--pricing rent" in err


def test_short_jobs_say_minimum_and_startup(capsys):
    code, out, _ = run(capsys, "plan", "--model", "qwen2.5-0.5b", "--pricing", "rent",
                       "--gpus", "b200", "--spot", "--tokens", "1e5", "--json")
    assert code == 0
    notes = " ".join(json.loads(out)["plan"]["cost"]["notes"])
    assert "start-up" in notes
    o = json.loads(out)["plan"]["cost"]["offer"]
    if o["minimum_hours"] > json.loads(out)["plan"]["time_hours"]:
        assert "shorter than the minimum" in notes


def test_catalog_offers_lists_ids(capsys):
    code, out, _ = run(capsys, "catalog", "offers", "--json")
    rows = json.loads(out)
    assert code == 0 and rows and all({"id", "gpu", "usd_per_hour"} <= set(r) for r in rows)
    assert any(r["spot"] for r in rows) and any(r["provider"] == "catalog" for r in rows)


@pytest.mark.parametrize("kw", [
    dict(model="qwen2.5-0.5b", gpus=("h100-sxm", "b200"), tokens=1e7, method="lora"),
    dict(model="qwen2.5-0.5b", gpus=("a100-80gb-pcie", "l40s"), tokens=3e8, method="full",
         objective="time", budget_usd=50.0),
    dict(model="llama-3.2-1b", gpus=("rtx-4090", "v100-16gb"), tokens=1e8, method="lora",
         max_gpus_per_offer=4),
], ids=["short", "time", "capped"])
def test_reference_agrees_on_offer_rentals(kw):
    """The independent enumeration (planner.validation.reference: every offer as a host, check's
    cost) reaches the planner's optimum on rentals that mix billing, shapes and the cap."""
    req = PlanRequest(pricing="rent", max_gpus=16, global_batch_size=16, **kw)
    ref = reference_optimum(req, CAT)
    got = plan(req, CAT)
    assert ref is not None and got.plan is not None
    value = got.plan.time_hours if req.objective == "time" else got.plan.cost_usd
    assert value == pytest.approx(ref.value, rel=1e-5, abs=1e-3)


def test_dominated_offers_are_dropped_exactly():
    """The space keeps, per GPU and instance size, only offers no other beats on rate, billing,
    minimum and known host RAM; the optimum is the same with every offer kept."""
    req = PlanRequest(model="qwen2.5-0.5b", pricing="rent", gpus=("h100-sxm",), tokens=1e8,
                      method="lora")
    space = build_space(req, CAT)
    listed = rental_offers(CAT, ("h100-sxm",))
    assert 0 < len(space.offers) < len(listed)
    kept = {offer_id(o.rental) for o in space.offers}
    for o in listed:  # every dropped offer has a kept one of its size that is no worse
        if offer_id(o) in kept:
            continue
        assert any(k.rental.gpus_per_instance == o.gpus_per_instance
                   and k.rental.usd_per_hour <= o.usd_per_hour
                   and k.rental.billing_increment_hours <= o.billing_increment_hours
                   for k in space.offers)
