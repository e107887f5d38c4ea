"""Job definitions and costs against hand-computed values (arithmetic in the comments)."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.errors import PlannerError
from planner.models import cost


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_job_definitions():
    assert cost.define_job(tokens=2e8).tokens == 2e8
    # 3 epochs x 5e7 dataset tokens = 1.5e8
    job = cost.define_job(epochs=3, dataset_tokens=5e7)
    assert job.tokens == 1.5e8 and "epoch" in job.definition
    # 1000 steps x 64 sequences x 2048 tokens = 131,072,000
    assert cost.define_job(steps=1000, global_batch=64, seq_len=2048).tokens == 131_072_000


def test_default_job_is_named():
    job = cost.define_job()
    assert job.is_default and job.tokens == cost.DEFAULT_JOB_TOKENS
    assert "default" in job.definition and "no job given" in job.definition


@pytest.mark.parametrize("kw", [
    {"tokens": 1e8, "steps": 10, "global_batch": 8, "seq_len": 512},
    {"epochs": 2},
    {"steps": 10},
    {"tokens": -1},
])
def test_bad_job_definitions(kw):
    with pytest.raises(PlannerError):
        cost.define_job(**kw)


def test_job_hours():
    # 3.6e7 tokens at 1000 tokens/s = 36,000 s = 10 h
    assert cost.job_hours(cost.define_job(tokens=3.6e7), 1000) == pytest.approx(10)


def test_buy_gpus_and_hosts(cat):
    gpu, host = cat.gpu("h100-sxm"), cat.platform("hgx-8gpu-sxm")
    job = cost.define_job(tokens=3.6e7)
    est = cost.job_cost(gpu, 16, tokens_per_s=1000, job=job, platform=host)
    # 16 x $30,000 new + ceil(16 / 8) = 2 hosts x $32,010 = 480,000 + 64,020 = 544,020
    assert est.status == "ok" and est.basis == "buy"
    assert est.usd == pytest.approx(544_020)
    assert est.hours == pytest.approx(10)
    assert any("2 x hgx-8gpu-sxm" in k for k in est.items)
    assert "2 hgx-8gpu-sxm hosts" in est.covers


def test_buy_used_with_power(cat):
    gpu = cat.gpu("h100-sxm")
    job = cost.define_job(tokens=3.6e7)
    est = cost.job_cost(gpu, 2, tokens_per_s=1000, job=job, price_kind="used",
                        power_usd_per_kwh=0.2)
    # 2 x $23,500 used + power 700 W x 2 x 10 h / 1000 x $0.2 = 47,000 + 2.8
    assert est.usd == pytest.approx(47_002.8)
    assert "GPUs only" in est.covers and "power" in est.covers


def test_default_price_kind_falls_back_to_used(cat):
    # the A100 80GB SXM has no new price in the catalog, only a used one
    gpu = cat.gpu("a100-80gb-sxm")
    est = cost.job_cost(gpu, 1, tokens_per_s=1e4)
    assert est.status == "ok" and "(used" in next(iter(est.items))
    assert est.job.is_default


def test_rent(cat):
    gpu = cat.gpu("h100-sxm")
    est = cost.job_cost(gpu, 8, tokens_per_s=1000, pricing="rent",
                        job=cost.define_job(tokens=3.6e7))
    # $2.99/GPU-hour x 8 GPUs x 10 h = $239.20
    assert est.usd == pytest.approx(239.2)
    assert est.basis == "rent" and "rental" in est.covers


def test_missing_prices_are_not_offered(cat):
    no_gpu_price = cost.job_cost(cat.gpu("a100-40gb-pcie"), 1, tokens_per_s=1e3)
    assert no_gpu_price.status == "not offered" and no_gpu_price.usd is None
    assert "purchase price" in no_gpu_price.reason
    no_rent = cost.job_cost(cat.gpu("a800-80gb"), 1, tokens_per_s=1e3, pricing="rent")
    assert no_rent.status == "not offered" and "rental price" in no_rent.reason
    no_host_price = cost.job_cost(cat.gpu("mi300x"), 8, tokens_per_s=1e3,
                                  platform=cat.platform("oam-8gpu-server"))
    assert no_host_price.status == "not offered" and "oam-8gpu-server" in no_host_price.reason


def test_platform_must_take_the_gpu(cat):
    with pytest.raises(PlannerError, match="takes"):
        cost.job_cost(cat.gpu("h100-sxm"), 8, tokens_per_s=1e3,
                      platform=cat.platform("consumer-2gpu-am5"))


def test_power_with_rent_is_bad_input(cat):
    with pytest.raises(PlannerError, match="power"):
        cost.job_cost(cat.gpu("h100-sxm"), 1, tokens_per_s=1e3, pricing="rent",
                      power_usd_per_kwh=0.1)


def test_summary_has_the_check_json_keys(cat):
    est = cost.job_cost(cat.gpu("h100-sxm"), 8, tokens_per_s=1000, pricing="rent")
    doc = est.summary()
    assert {"usd", "basis", "items"} <= set(doc)
    assert doc["job"].startswith("default job")
