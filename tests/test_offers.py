"""Rental offers: schema and loading (planner.catalog.offers), billing per increment, cheapest
covers, the SkyPilot importer (tools/import_offers.py) and the shipped catalog/offers data."""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from planner.catalog.load import load_catalog
from planner.catalog.offers import OfferSpec, load_offers, offer_rows, offers_for
from planner.errors import CatalogError, PlannerError
from planner.models.rental import Cover, billed_hours, cheapest_cover, rental_cost
from tests.conftest import TOOLS

SECOND, MINUTE, HOUR = 1 / 3600, 1 / 60, 1.0


def load_tool(name: str) -> ModuleType:
    """tools/<name>.py as a module, registered in sys.modules (its dataclasses need that)."""
    spec = importlib.util.spec_from_file_location(f"tools_{name}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def offer(provider="p", gpus=8, usd=8.0, gpu="h100-sxm", *, inc=SECOND, minimum=0.0,
          spot=False, name=None, region=None) -> OfferSpec:
    return OfferSpec(
        provider=provider, instance_type=name or f"{gpu}-{gpus}x", gpu=gpu,
        gpus_per_instance=gpus, usd_per_hour=usd, billing_increment_hours=inc,
        minimum_hours=minimum, region=region, spot=spot, price_as_of="2026-01-01",
        source="https://example.com/prices",
    )


def entry(**changes) -> dict[str, object]:
    base = {
        "provider": "acme", "instance_type": "gpu-8x", "gpu": "h100-sxm", "gpus_per_instance": 8,
        "usd_per_hour": 20.0, "billing_increment_hours": 1 / 60, "minimum_hours": 0,
        "region": "r1", "spot": False, "price_as_of": "2026-01-01",
        "source": "https://example.com/acme-prices",
    }
    base.update(changes)
    return base


def write_overlay(root: Path, provider: str, offers: list[dict[str, object]], **top) -> Path:
    (root / "offers").mkdir(parents=True, exist_ok=True)
    data = {"provider": provider, "offers": offers, **top}
    (root / "offers" / f"{provider}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return root


# ----- schema and loading --------------------------------------------------------------------


def test_overlay_offers_load_and_replace_a_provider(tmp_path):
    shipped = load_offers()
    assert any(o.provider == "lambda" for o in shipped)
    write_overlay(tmp_path, "lambda", [entry(provider="lambda", usd_per_hour=1.0)])
    write_overlay(tmp_path, "acme", [entry()])
    loaded = load_offers([tmp_path])
    lambda_offers = [o for o in loaded if o.provider == "lambda"]
    assert [o.usd_per_hour for o in lambda_offers] == [1.0]  # the overlay file replaced it
    assert [o.instance_type for o in loaded if o.provider == "acme"] == ["gpu-8x"]


def test_unknown_key_is_rejected_with_the_file_name(tmp_path):
    write_overlay(tmp_path, "acme", [entry(hourly=3)])
    with pytest.raises(CatalogError, match=r"acme\.yaml: field offers\.0\.hourly: Extra inputs"):
        load_offers([tmp_path])


def test_unknown_gpu_is_rejected_with_the_nearest_ids(tmp_path):
    write_overlay(tmp_path, "acme", [entry(gpu="h100-sxm5")])
    with pytest.raises(CatalogError, match=r"unknown GPU 'h100-sxm5' \(did you mean: h100-sxm"):
        load_offers([tmp_path])


@pytest.mark.parametrize("field, value", [("usd_per_hour", 0), ("usd_per_hour", -1.5),
                                          ("billing_increment_hours", 0),
                                          ("gpus_per_instance", 0), ("minimum_hours", -1)])
def test_non_positive_numbers_are_rejected(tmp_path, field, value):
    write_overlay(tmp_path, "acme", [entry(**{field: value})])
    with pytest.raises(CatalogError, match=rf"field offers\.0\.{field}: Input should be greater"):
        load_offers([tmp_path])


def test_every_error_is_reported_at_once(tmp_path):
    write_overlay(tmp_path, "acme", [entry(usd_per_hour=0), entry(instance_type="b", color=1),
                                     entry(instance_type="c", price_as_of="May 2025")])
    write_overlay(tmp_path, "other", [entry(provider="other", gpu="h1000")])
    (tmp_path / "offers" / "wrong.yaml").write_text(
        yaml.safe_dump({"provider": "right", "offers": [entry(provider="right")]}))
    with pytest.raises(CatalogError) as exc:
        load_offers([tmp_path])
    text = str(exc.value)
    assert text.startswith("5 offer error(s)")
    for part in ("offers.0.usd_per_hour", "offers.1.color", "offers.2.price_as_of",
                 "unknown GPU 'h1000'", "provider 'right' differs from the file name"):
        assert part in text


def test_a_duplicate_and_a_foreign_provider_are_rejected(tmp_path):
    write_overlay(tmp_path, "acme", [entry(), entry(), entry(instance_type="x", provider="zeta")])
    with pytest.raises(CatalogError) as exc:
        load_offers([tmp_path])
    assert "listed twice" in str(exc.value)
    assert "offers.2.provider 'zeta' is not the file's 'acme'" in str(exc.value)


def test_missing_overlay_folder_is_an_error(tmp_path):
    with pytest.raises(CatalogError, match="catalog folder not found"):
        load_offers([tmp_path / "nope"])


def test_overlay_gpu_from_the_same_overlay_is_accepted(tmp_path):
    # A GPU added by the overlay's gpus/ may be rented through the overlay's offers/.
    gpu = load_catalog().gpus["h100-sxm"].model_dump()
    gpu["id"] = "my-gpu"
    (tmp_path / "gpus").mkdir()
    (tmp_path / "gpus" / "my-gpu.yaml").write_text(yaml.safe_dump(gpu))
    write_overlay(tmp_path, "acme", [entry(gpu="my-gpu")])
    assert [o.gpu for o in load_offers([tmp_path]) if o.provider == "acme"] == ["my-gpu"]


# ----- billing -------------------------------------------------------------------------------


@pytest.mark.parametrize("seconds, increment, minimum, billed_seconds", [
    (61, SECOND, 0, 61),            # per second: exact
    (60.4, SECOND, 0, 61),          # per second: a started second counts
    (61, MINUTE, 0, 120),           # per minute: 1 min 1 s bills 2 minutes
    (3600, MINUTE, 0, 3600),        # exactly one hour stays one hour (no rounding error)
    (3601, HOUR, 0, 7200),          # hourly: 1 h 1 s bills 2 hours
    (30, SECOND, 60, 60),           # AWS-style minimum: 30 s bills 60 s
    (90, SECOND, 60, 90),           # past the minimum, per second again
    (600, HOUR, 0, 3600),           # a 10-minute job at an hourly increment pays the hour
])
def test_billed_hours(seconds, increment, minimum, billed_seconds):
    got = billed_hours(seconds / 3600, increment, minimum / 3600)
    assert got * 3600 == pytest.approx(billed_seconds, abs=1e-6)


def test_rental_cost_names_the_offer_and_bills_every_instance():
    o = offer(gpus=4, usd=10.0, inc=MINUTE, name="gpu_4x")
    cover = Cover("p", cheapest_cover([o], 8).uses, 8)
    cost = rental_cost(cover, 1 + 61 / 3600)  # 1 h 1 min 1 s: 62 minutes billed
    assert cost.gpus == 8
    assert cost.usd == pytest.approx(2 * 10.0 * 62 / 60)
    assert not cost.shorter_than_minimum
    summary = cost.offers[0].summary()
    assert {k: summary[k] for k in ("provider", "gpus_per_instance", "usd_per_hour",
                                    "billing_increment_hours", "price_as_of")} == {
        "provider": "p", "gpus_per_instance": 4, "usd_per_hour": 10.0,
        "billing_increment_hours": MINUTE, "price_as_of": "2026-01-01"}
    assert summary["instances"] == 2 and summary["instance_type"] == "gpu_4x"


def test_rental_shorter_than_the_minimum_is_flagged_and_billed_the_minimum():
    o = offer(gpus=1, usd=3.6, inc=SECOND, minimum=MINUTE)
    cost = rental_cost(o, 20 / 3600)  # 20 s
    assert cost.shorter_than_minimum
    assert cost.usd == pytest.approx(3.6 / 60)  # one minute
    assert "shorter than the minimum of 1 min" in cost.notes[0]
    assert not rental_cost(o, 2 * MINUTE).shorter_than_minimum


def test_hourly_rounding_is_noted():
    cost = rental_cost(offer(gpus=1, usd=2.0, inc=HOUR), 1.25)
    assert cost.usd == pytest.approx(4.0)
    assert "billed 2 h for 1.25 h (increment hourly)" in cost.notes[0]


def test_rental_needs_positive_hours():
    with pytest.raises(PlannerError):
        rental_cost(offer(), 0)


# ----- cheapest cover ------------------------------------------------------------------------


def test_two_four_gpu_instances_beat_one_eight_when_cheaper():
    eight, four = offer(gpus=8, usd=20.0, name="8x"), offer(gpus=4, usd=9.0, name="4x")
    cover = cheapest_cover([eight, four], 8)
    assert [(u.offer.instance_type, u.instances) for u in cover.uses] == [("4x", 2)]
    assert cover.usd_per_hour == pytest.approx(18.0) and cover.gpus == 8


def test_one_eight_gpu_instance_when_it_is_cheaper():
    eight, four = offer(gpus=8, usd=16.0, name="8x"), offer(gpus=4, usd=9.0, name="4x")
    cover = cheapest_cover([eight, four], 8)
    assert [(u.offer.instance_type, u.instances) for u in cover.uses] == [("8x", 1)]


def test_max_gpus_per_offer_caps_each_offer():
    eight, four = offer(gpus=8, usd=16.0, name="8x"), offer(gpus=4, usd=9.0, name="4x")
    # 16 GPUs with at most 8 from one offer: one 8x and two 4x, not two 8x.
    cover = cheapest_cover([eight, four], 16, max_gpus_per_offer=8)
    assert sorted((u.offer.instance_type, u.instances) for u in cover.uses) == [("4x", 2),
                                                                                ("8x", 1)]
    assert all(u.gpus <= 8 for u in cover.uses)
    # A cap below an instance's GPUs rules that offer out.
    cover = cheapest_cover([eight, four], 8, max_gpus_per_offer=4)
    assert cover is None  # one 4x offer, capped at 4 GPUs, cannot give 8
    cover = cheapest_cover([eight, four, offer(gpus=4, usd=9.5, name="4x-b")], 8,
                           max_gpus_per_offer=4)
    assert sorted(u.offer.instance_type for u in cover.uses) == ["4x", "4x-b"]


def test_a_cover_stays_on_one_provider_and_one_pricing():
    a = [offer("a", gpus=4, usd=4.0)]                      # 4 GPUs at most (cap 4)
    b = [offer("b", gpus=4, usd=6.0)]
    assert cheapest_cover(a + b, 8, max_gpus_per_offer=4) is None  # no mixing a with b
    cover = cheapest_cover(a + b, 4, max_gpus_per_offer=4)
    assert cover.provider == "a"
    spot = offer("a", gpus=4, usd=1.0, spot=True, name="spot")
    cover = cheapest_cover([*a, spot], 8)
    assert {u.offer.spot for u in cover.uses} == {True}  # spot and on demand are not mixed


def test_cover_for_a_short_job_ranks_by_the_bill():
    hourly = offer("cheap-hourly", gpus=8, usd=16.0, inc=HOUR)
    per_second = offer("per-second", gpus=8, usd=20.0, inc=SECOND)
    assert cheapest_cover([hourly, per_second], 8).provider == "cheap-hourly"  # by rate
    # 30 minutes: the hourly offer bills $16, the per-second one $10.
    assert cheapest_cover([hourly, per_second], 8, hours=0.5).provider == "per-second"
    # 10 hours: $160 against $200.
    assert cheapest_cover([hourly, per_second], 8, hours=10).provider == "cheap-hourly"
    with pytest.raises(PlannerError):
        cheapest_cover([hourly], 8, hours=0)


def test_cover_rounds_up_to_whole_instances():
    cover = cheapest_cover([offer(gpus=8, usd=10.0)], 3)
    assert cover.gpus == 8 and cover.gpus_needed == 3 and cover.instances == 1


def test_cover_rejects_bad_requests():
    with pytest.raises(PlannerError):
        cheapest_cover([offer()], 0)
    with pytest.raises(PlannerError):
        cheapest_cover([offer()], 8, max_gpus_per_offer=0)
    assert cheapest_cover([], 8) is None


def _brute_force(offers, need, cap):
    best = math.inf
    ranges = []
    for o in offers:
        most = math.ceil(need / o.gpus_per_instance)
        if cap is not None:
            most = min(most, cap // o.gpus_per_instance)
        ranges.append(range(most + 1))
    for counts in itertools.product(*ranges):
        if sum(c * o.gpus_per_instance for c, o in zip(counts, offers, strict=True)) >= need:
            best = min(best, sum(c * o.usd_per_hour for c, o in zip(counts, offers, strict=True)))
    return best


@pytest.mark.parametrize("need", [1, 3, 7, 8, 12, 16, 23, 40])
@pytest.mark.parametrize("cap", [None, 8, 16])
def test_cover_is_the_exact_minimum(need, cap):
    offers = [offer(gpus=1, usd=1.3, name="1x"), offer(gpus=2, usd=2.5, name="2x"),
              offer(gpus=4, usd=4.9, name="4x"), offer(gpus=8, usd=9.0, name="8x")]
    cover = cheapest_cover(offers, need, cap)
    expected = _brute_force(offers, need, cap)
    if expected == math.inf:
        assert cover is None
    else:
        assert cover.usd_per_hour == pytest.approx(expected)
        assert cover.gpus >= need
        assert cap is None or all(u.gpus <= cap for u in cover.uses)


# ----- offers_for and rows -------------------------------------------------------------------


def test_offers_for_filters_and_sorts_by_gpu_hour():
    offers = [offer("a", gpus=8, usd=24.0), offer("b", gpus=1, usd=2.5),
              offer("c", gpus=1, usd=1.0, spot=True), offer("d", gpus=1, usd=1.0, gpu="l4")]
    assert [o.provider for o in offers_for("H100-SXM", offers)] == ["b", "a"]
    assert [o.provider for o in offers_for("h100-sxm", offers, spot=True)] == ["c"]
    assert [o.provider for o in offers_for("h100-sxm", offers, provider="a")] == ["a"]


def test_offer_rows_cover_every_offer():
    offers = load_offers()
    rows = offer_rows(offers)
    assert len(rows) == len(offers)
    assert {"gpu", "provider", "gpus_per_instance", "usd_per_hour", "billing",
            "price_as_of"} <= set(rows[0])


# ----- the importer --------------------------------------------------------------------------

CSV = """\
InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice
cpu_4x,,,4.0,16.0,0.2,r1,,
gpu_1x_h100_pcie,H100,1.0,26.0,200.0,3.29,r1,,
gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,31.92,r2,,
gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,30.00,r1,,12.0
gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,32.00,r3,,11.0
gpu_8x_a100,A100,8.0,124.0,1800.0,15.92,r1,,
gpu_1x_gh200,GH200,1.0,64.0,432.0,2.29,r1,,
gpu_1x_rtx6000,RTX6000,1.0,14.0,46.0,0.69,r1,,
"""


def test_importer_keeps_the_cheapest_region_and_spot_and_counts_skips():
    tool = load_tool("import_offers")
    picks, skipped = tool.pick_offers(tool.parse_rows(CSV), set(load_catalog().gpus))
    got = {(p.gpu, p.count, p.spot): (p.row.region, p.price) for p in picks}
    assert got == {
        ("h100-pcie", 1, False): ("r1", 3.29),
        ("h100-sxm", 8, False): ("r1", 30.0),
        ("h100-sxm", 8, True): ("r3", 11.0),
        ("a100-40gb-sxm", 8, False): ("r1", 15.92),
    }
    assert skipped == {"GH200": 1, "RTX6000": 1}
    a100 = next(p for p in picks if p.gpu == "a100-40gb-sxm")
    assert a100.guess and "does not say PCIe or SXM" in a100.guess


def test_importer_maps_form_factor_from_the_instance_name():
    tool = load_tool("import_offers")
    assert tool.map_gpu("H100", "gpu_1x_h100_pcie") == ("h100-pcie", None)
    assert tool.map_gpu("H100", "gpu-h100-sxm_8gpu") == ("h100-sxm", None)
    assert tool.map_gpu("A100-80GB", "a2-ultragpu-8g")[0] == "a100-80gb-sxm"
    assert tool.map_gpu("A100-80GB", "a2-ultragpu-8g")[1] is not None  # a guess, said so
    assert tool.map_gpu("GH200", "gpu_1x_gh200") == (None, None)
    # Cudo names its A100 80GB PCIe cards "A100" ("a100-pci"): GpuInfo's memory decides.
    assert tool.map_gpu("A100", "intel-ice-lake-a100-pci_1x2v4gb", 81920) == ("a100-80gb-pcie",
                                                                             None)
    assert tool.map_gpu("A100", "gpu_1x_a100_sxm4", 40960) == ("a100-40gb-sxm", None)
    gpu, guess = tool.map_gpu("H100-NVLINK", "H100_NVLINK_80GB::8")
    assert gpu == "h100-sxm" and "not H100 NVL" in guess


def test_importer_reads_host_and_gpu_memory():
    tool = load_tool("import_offers")
    text = CSV.splitlines()[0] + "\n" + (
        'intel-ice-lake-a100-pci_8x64v128gb,A100,8.0,64,128,11.5488,us-carlsbad-1,"{\'Gpus\': '
        "[{'Name': 'A100', 'Count': '8.0', 'MemoryInfo': {'SizeInMiB': 81920}}]}\",\n")
    (row,) = tool.parse_rows(text)
    assert (row.gpu_mib, row.vcpus, row.memory_gib, row.count) == (81920, 64, 128, 8)
    picks, _ = tool.pick_offers([row], set(load_catalog().gpus))
    data = tool.offers_yaml("cudo", picks, price_as_of="2026-01-02", source="https://x",
                            as_of_note="as-of note")
    (entry_,) = data["offers"]
    assert entry_["gpu"] == "a100-80gb-pcie" and entry_["host_ram_gib"] == 128
    assert entry_["billing_increment_hours"] == 1.0  # Cudo's rule is not verified
    assert "not verified" in entry_["notes"] and "as-of note" in entry_["notes"]


def test_importer_writes_files_that_load(tmp_path):
    tool = load_tool("import_offers")
    picks, _ = tool.pick_offers(tool.parse_rows(CSV), set(load_catalog().gpus))
    data = tool.offers_yaml("lambda", picks, price_as_of="2026-01-02",
                            source="https://example.com/x.csv", as_of_note=None)
    (tmp_path / "offers").mkdir()
    (tmp_path / "offers" / "lambda.yaml").write_text(yaml.safe_dump(data))
    loaded = [o for o in load_offers([tmp_path]) if o.provider == "lambda"]
    assert len(loaded) == 4
    assert all(o.billing_increment_hours == pytest.approx(MINUTE) for o in loaded)


# ----- the shipped data ----------------------------------------------------------------------

COMMIT_URL = re.compile(
    r"^https://github\.com/skypilot-org/skypilot-catalog/blob/[0-9a-f]{40}/catalogs/v\d+/"
    r"(?P<cloud>[a-z]+)/vms\.csv$")


def test_shipped_offers_load_and_name_catalog_gpus():
    offers = load_offers()
    gpus = load_catalog().gpus
    assert 10 <= len(offers) <= 400
    for o in offers:
        assert o.gpu in gpus
        match = COMMIT_URL.match(o.source)
        assert match and match["cloud"] == o.provider, o.source
        assert o.billing_source or "not verified" in o.notes
        assert "Mapping uncertain" in o.notes or not any(
            g in o.notes for g in ("taken as SXM", "taken as the catalog"))


def test_shipped_offers_have_one_cheapest_entry_per_shape():
    offers = load_offers()
    keys = [(o.provider, o.gpu, o.gpus_per_instance, o.spot) for o in offers]
    assert len(keys) == len(set(keys))


def test_shipped_h100_cover_prefers_the_cheaper_provider():
    # 16 H100 SXM on demand. By price alone: sixteen of Cudo's 1-GPU instances ($1.8214/h).
    h100 = offers_for("h100-sxm", load_offers())
    cover = cheapest_cover(h100, 16)
    assert cover.provider == "cudo" and cover.instances == 16
    assert cover.usd_per_hour == pytest.approx(16 * 1.8214)
    # Whole 8-GPU nodes: Cudo's ($15.3248/h) beats Nebius's ($23.60/h) and Lambda's ($31.92/h).
    cover = cheapest_cover(h100, 16, min_gpus_per_instance=8)
    assert cover.provider == "cudo" and cover.usd_per_hour == pytest.approx(2 * 15.3248)
    cover = cheapest_cover([o for o in h100 if o.provider in ("nebius", "lambda")], 16,
                           min_gpus_per_instance=8)
    assert cover.provider == "nebius" and cover.usd_per_hour == pytest.approx(2 * 23.60)


def test_catalog_offers_lists_one_row_per_offer(capsys):
    import json

    from planner.cli import main

    with pytest.raises(SystemExit):
        main(["catalog", "offers", "--json"])
    rows = [r for r in json.loads(capsys.readouterr().out) if r["gpu"] == "b200"]
    assert len(rows) == len(offers_for("b200", load_offers())) + len(
        offers_for("b200", load_offers(), spot=True))
    with pytest.raises(SystemExit):
        main(["catalog", "offers"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:2] == ["gpu", "offer"]
    assert sum(line.startswith("b200 ") for line in lines) == len(rows)


def test_unoffered_gpus_are_grouped_by_reason():
    from planner.solver.hardware import unoffered_text

    text = unoffered_text(["a10: no price", "l40s: no priced host platform takes pcie GPUs",
                           "t4: no price"])
    assert text == "no price: a10, t4; no priced host platform takes pcie GPUs: l40s"
    assert unoffered_text([]) == ""
