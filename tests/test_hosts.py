"""Hosts sized to the GPU count (issue 19 item 5): a purchase of 5-8 PCIe cards can buy one 8-slot
host instead of two 4-GPU workstations, a chassis bought for one module says so, and every host
price is the arithmetic its notes show."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from planner.catalog.load import load_catalog
from planner.catalog.specs import PCIE_CARD_FORM_FACTORS, gpus_per_host
from tests.test_cli import run

RIG = "rig-8gpu-epyc-romed8"
PLATFORMS = Path(__file__).resolve().parents[1] / "catalog" / "platforms"
_SUM = re.compile(r"((?:[\d,]+(?:\.\d+)?\s*\+\s*)+[\d,]+(?:\.\d+)?)\s*=\s*\$([\d,]+(?:\.\d+)?)")


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _plan(capsys, *args: str) -> dict:
    code, out, _ = run(capsys, "plan", *args, "--json")
    assert code == 0, out
    return json.loads(out)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def test_a_pcie_card_fills_every_slot_a_module_keeps_its_baseboard(cat):
    # the RTX cards' node size (4) is what a rented node or an unnamed host holds; a host with
    # more slots holds more of them. An SXM/OAM module keeps the fewer of slots and node size
    for gpu in cat.gpus.values():
        assert gpus_per_host(gpu, None) == gpu.max_gpus_per_node
        for plat in cat.platforms.values():
            if gpu.form_factor not in plat.form_factors:
                continue
            expect = plat.max_gpus if gpu.form_factor in PCIE_CARD_FORM_FACTORS else \
                min(plat.max_gpus, gpu.max_gpus_per_node)
            assert gpus_per_host(gpu, plat) == expect, (gpu.id, plat.id)
    rtx = cat.gpu("rtx-4090")
    assert rtx.max_gpus_per_node < cat.platforms[RIG].max_gpus == gpus_per_host(
        rtx, cat.platforms[RIG])


def test_host_prices_are_the_arithmetic_of_their_notes(cat):
    # every priced host states its price in its notes, and every "a + b + ... = $s" there adds up
    chains = 0
    for plat in cat.platforms.values():
        if plat.price_usd is None:
            continue
        assert plat.price_as_of and plat.price_source_urls, plat.id
        assert f"{plat.price_usd:,.0f}" in plat.notes, plat.id
        for terms, total in _SUM.findall(plat.notes):
            chains += 1
            assert sum(_num(t) for t in terms.split("+")) == pytest.approx(_num(total), abs=0.005)
    rig = cat.platforms[RIG]
    _, total = _SUM.findall(rig.notes)[-1]  # the host: the build's rows other than its GPUs
    assert round(_num(total)) == rig.price_usd and chains >= 1


def _unpriced_rig(tmp_path: Path) -> Path:
    doc = yaml.safe_load((PLATFORMS / f"{RIG}.yaml").read_text())
    doc.pop("price_usd")
    doc.pop("price_as_of")
    (tmp_path / "platforms").mkdir()
    (tmp_path / "platforms" / f"{RIG}.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_seven_cards_buy_one_rig_not_two_workstations(capsys, tmp_path):
    # issue 19: 7 RTX 3090s were split over two 4-GPU workstations, their data-parallel traffic
    # on 10 GbE. With the priced 8-slot rig the fastest plan holds them in one host; without
    # its price (the catalog before) the same request buys two hosts and says so
    # (a full fine-tune, whose gradient all-reduce the 10 GbE link cannot hide; a LoRA job's
    # adapters all-reduce under the backward on either host count, so only memory separated them)
    args = ("--model", "qwen2.5-0.5b", "--gpus", "rtx-3090", "--num-gpus", "7", "--global-batch",
            "63", "--method", "full", "--tokens", "1e8", "--price-kind", "used", "--objective",
            "time")
    after = _plan(capsys, *args)
    before = _plan(capsys, *args, "--catalog", str(_unpriced_rig(tmp_path)))
    assert after["plan"]["platform"] == RIG and after["plan"]["num_hosts"] == 1
    assert not any("hosts of" in n for n in after["notes"])
    assert before["plan"]["platform"] != RIG and before["plan"]["num_hosts"] == 2
    assert any(n.startswith("7 GPUs on 2 hosts of 4") for n in before["notes"])
    assert after["plan"]["time_hours"] < before["plan"]["time_hours"]
    items = after["plan"]["cost"]["items"]
    assert items[f"1 x {RIG} host ($5,242 each, without GPUs)"] == 5242


@pytest.mark.parametrize("n", [5, 6, 8])
def test_five_to_eight_cards_fit_one_host_when_time_counts(capsys, n):
    doc = _plan(capsys, "--model", "7b", "--gpus", "rtx-3090", "--num-gpus", str(n),
                "--global-batch", str(8 * n), "--method", "lora", "--tokens", "1e8",
                "--price-kind", "used", "--objective", "time")
    assert doc["plan"]["num_hosts"] == 1 and doc["plan"]["platform"] == RIG


def test_cost_buys_two_workstations_a_deadline_buys_the_rig(capsys):
    # two budget workstations cost less than the rig; the rig is the faster. The objective picks,
    # and a deadline between the two times makes the cheapest plan that meets it the rig
    args = ("--model", "qwen2.5-0.5b", "--gpus", "rtx-4090", "--num-gpus", "8", "--method",
            "full", "--tokens", "1e8")
    cheap_doc, fast_doc = _plan(capsys, *args), _plan(capsys, *args, "--objective", "time")
    cheap, fast = cheap_doc["plan"], fast_doc["plan"]
    assert cheap["num_hosts"] == 2 and fast["num_hosts"] == 1 and fast["platform"] == RIG
    assert cheap["cost"]["usd"] < fast["cost"]["usd"]
    assert fast["time_hours"] < cheap["time_hours"]
    # the two-host plan names the one-host plan and its figures (those of the fastest plan)
    note = next(n for n in cheap_doc["notes"] if n.startswith("one host: "))
    assert note.startswith(f"one host: {RIG} holds all 8 GPUs; the best plan on one is 8 x "
                           f"rtx-4090 in 1 x {RIG}, ${fast['cost']['usd']:,.0f}, "
                           f"{fast['time_hours']:,.1f} h against ${cheap['cost']['usd']:,.0f}, "
                           f"{cheap['time_hours']:,.1f} h on 2 hosts")
    assert not any(n.startswith("one host: ") for n in fast_doc["notes"])
    deadline = (fast["time_hours"] + cheap["time_hours"]) / 2
    met = _plan(capsys, *args, "--max-hours", f"{deadline:.4f}")["plan"]
    assert met["platform"] == RIG and met["cost"]["usd"] == fast["cost"]["usd"]


def test_one_module_in_an_eight_gpu_chassis_says_so(capsys):
    code, out, _ = run(capsys, "plan", "--model", "7b", "--gpus", "a100-80gb-sxm", "--num-gpus",
                       "1", "--method", "lora", "--tokens", "1e7", "--price-kind", "used")
    assert code == 0 and "buy        1 x a100-80gb-sxm in 1 x hgx-8gpu-sxm" in out
    assert ("note: the hgx-8gpu-sxm host bought holds 8 GPUs for the 1 planned: a chassis "
            "mostly empty, its price counted in full") in out


def test_owned_cards_are_planned_in_one_host(capsys):
    # seed 003's 6 RTX 4090s were planned in three 2-GPU desktops; an 8-slot host holds them
    doc = _plan(capsys, "--model", "7b", "--pricing", "owned", "--gpus", "rtx-4090",
                "--num-gpus", "6", "--global-batch", "66", "--tokens", "1e8")
    assert doc["plan"]["num_hosts"] == 1
    assert not any("hosts of" in n for n in doc["notes"])


def test_check_on_owned_cards_assumes_one_host_that_holds_them(capsys):
    """Cards the user owns sit in their machine: check runs 6 RTX 4090s on the platform that
    holds all 6 in one host (no uneven split over a network); a purchase is priced as plan
    prices it, on the hosts that cost least for the 6 (two 4-GPU workstations)."""
    from tests.test_cli import run

    args = ("check", "--model", "llama-3.1-8b", "--workload", "rm", "--gpu", "rtx-4090",
            "--num-gpus", "6", "--method", "lora", "--json")
    _, out, _ = run(capsys, *args, "--pricing", "owned")
    owned = json.loads(out)
    assert owned["platform"] == "rig-8gpu-epyc-romed8"
    assert not any("hosts of" in n for n in owned["throughput"]["notes"])
    _, out, _ = run(capsys, *args)
    bought = json.loads(out)
    assert bought["platform"] == "workstation-4gpu-epyc-rome"
    assert any("6 GPUs on 2 hosts of 4" in n for n in bought["throughput"]["notes"])
