"""A rented instance's network to other instances (issue 18 part 2: jobs that span hosts use
their real network): an offer that states it (OfferSpec.network_gbit_s, with its source) times
multi-instance jobs at that rate in plan, check and the independent reference alike; one that
does not keeps the stated default (network.DEFAULT_INTER_NODE_GBPS_PER_GPU) and says so."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner.api import check
from planner.catalog.load import load_catalog
from planner.catalog.offers import OfferSpec, load_offers, offer_id
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import TrainConfig
from planner.models.network import DEFAULT_INTER_NODE_GBPS_PER_GPU, instance_platform
from planner.solver.hardware import _dominates, rental_offer
from planner.solver.solve import plan
from planner.validation.reference import reference_optimum
from tests.test_offers import entry, write_overlay

CAT = load_catalog()
SOURCE = "https://example.com/acme-network: 8 x 400 Gb/s InfiniBand per instance"


def _spec(**kw) -> OfferSpec:
    return OfferSpec(**{**entry(host_vcpus=160, host_ram_gib=1792.0), **kw})


def test_an_instance_with_a_stated_network_is_a_host_the_links_read():
    gpu = CAT.gpu("h100-sxm")
    assert instance_platform(_spec(), gpu) is None  # no network stated: the models' default
    host = instance_platform(_spec(network_gbit_s=3200, network_source=SOURCE), gpu)
    assert host is not None
    assert host.inter_node_bandwidth_gbps == 400.0  # 3,200 Gbit/s = 400 GB/s per instance
    assert (host.max_gpus, host.cpu_cores) == (8, 80)  # 160 vCPUs, two threads a core
    assert host.source_urls == (SOURCE,)


def test_a_network_needs_its_source():
    with pytest.raises(ValidationError, match="network_gbit_s needs network_source"):
        _spec(network_gbit_s=3200)


def _overlay(tmp_path, **network):
    """acme's 8 x H100 instance, with the network ``network`` states (or none)."""
    write_overlay(tmp_path, "acme", [entry(host_vcpus=160, host_ram_gib=1792.0, **network)])
    return load_catalog([tmp_path])


CFG = TrainConfig(workload="pretrain", method="full", num_gpus=16, zero_stage=3,
                  micro_batch_size=2, grad_accum=2, seq_len=2048, checkpointing="full")


@pytest.mark.parametrize("gbit", [800, 3200])
def test_check_times_a_multi_instance_job_at_the_offers_network(tmp_path, gbit):
    """16 GPUs on two 8-GPU instances: ZeRO-3's gathers cross the instances' network, so a
    stated 3,200 Gbit/s (50 GB/s per GPU) beats the assumed 200 Gbit/s per GPU and 800 Gbit/s
    (12.5 GB/s per GPU) falls behind it."""
    plain = _overlay(tmp_path / "plain")
    fast = _overlay(tmp_path / "stated", network_gbit_s=gbit, network_source=SOURCE)
    kw = dict(model="llama-3.1-8b", gpu="h100-sxm", config=CFG, pricing="rent",
              offer="acme/gpu-8x")
    assumed = check(catalog=plain, **kw)
    stated = check(catalog=fast, **kw)
    notes = " ".join(stated["throughput"]["notes"])
    assert "the network is assumed" in " ".join(assumed["throughput"]["notes"])
    assert "the network is assumed" not in notes
    faster = gbit / 8 / 8 > DEFAULT_INTER_NODE_GBPS_PER_GPU
    assert (stated["throughput"]["tokens_per_s"] > assumed["throughput"]["tokens_per_s"]) \
        == faster
    assert stated["cost"]["offer"]["network_gbit_s"] == gbit


def test_plan_and_reference_agree_on_a_rental_with_a_stated_network(tmp_path):
    """The independent enumeration times the offer's instances at their stated network too,
    and reaches the planner's optimum on a multi-instance rental by time."""
    cat = _overlay(tmp_path, network_gbit_s=3200, network_source=SOURCE)
    req = PlanRequest(model="llama-3.1-8b", workload="pretrain", pricing="rent",
                      gpus=("h100-sxm",), tokens=2e9, objective="time", budget_usd=5000.0,
                      max_gpus=32, global_batch_size=64)
    got = plan(req, cat)
    ref = reference_optimum(req, cat)
    assert got.plan is not None and ref is not None
    assert got.plan.time_hours == pytest.approx(ref.value, rel=1e-5)


def test_a_cheaper_offer_without_a_network_does_not_hide_one_with_it():
    """Dominance (hardware._dominates) weighs the stated network: the dearer instance with
    3,200 Gbit/s stays a candidate next to a cheaper one whose network nobody states."""
    gpu = CAT.gpu("h100-sxm")
    cheap = rental_offer(_spec(usd_per_hour=15.0), gpu, capacity_mib=1, most=64)
    fast = rental_offer(_spec(instance_type="gpu-8x-ib", network_gbit_s=3200,
                              network_source=SOURCE), gpu, capacity_mib=1, most=64)
    assert cheap is not None and fast is not None
    assert not _dominates(cheap, fast) and not _dominates(fast, cheap)
    slow = rental_offer(_spec(instance_type="gpu-8x-slow", network_gbit_s=800,
                              network_source=SOURCE), gpu, capacity_mib=1, most=64)
    assert slow is not None and _dominates(fast, slow) and not _dominates(slow, fast)


def test_the_shipped_networks_name_their_source():
    stated = [o for o in load_offers() if o.network_gbit_s is not None]
    assert stated, "no shipped offer states its network"
    for o in stated:
        assert o.network_source and "http" in o.network_source, offer_id(o)


def test_the_shipped_networks_are_the_import_tools():
    """catalog/offers is generated by tools/import_offers.py: every stated network is its
    NETWORKS table's, and every entry of the table names a shipped offer."""
    from tests.test_offers import load_tool

    tool = load_tool("import_offers")
    shipped = {(o.provider, o.instance_type): o for o in load_offers()}
    assert set(tool.NETWORKS) <= set(shipped)
    for key, o in shipped.items():
        net = tool.NETWORKS.get(key)
        assert (o.network_gbit_s, o.network_source) == \
            ((net.gbit_s, net.source) if net else (None, None)), key


def test_a_plan_says_when_it_assumes_the_network_and_flags_a_low_mfu():
    """A plan across instances whose network no offer states says it assumed one, and a plan
    below the MFU floor is flagged in the plan's own notes (issue 18 part 2), not only in
    check's: 32 H100s on Nebius's 8-GPU preset (no network stated) with ZeRO-3 and one
    sequence per GPU wait on the network."""
    req = PlanRequest(model="llama-3.1-8b", workload="pretrain", pricing="rent",
                      gpus=("h100-sxm",), num_gpus=32, sharding="zero3", global_batch_size=32,
                      micro_batch_size=1, tokens=1e8)
    got = plan(req, CAT)
    assert got.plan is not None and got.plan.num_hosts > 1
    notes = " ".join(got.notes)
    assert got.plan.cost.rental.offers[0].network_gbit_s is None
    assert "the network is assumed" in notes
    assert got.plan.throughput.mfu < 0.10 and "below the 10% floor" in notes
