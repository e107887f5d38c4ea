"""Import rental offers from SkyPilot's public catalog CSVs into catalog/offers/<provider>.yaml.

Source: https://github.com/skypilot-org/skypilot-catalog, files catalogs/<version>/<cloud>/vms.csv
(columns InstanceType, AcceleratorName, AcceleratorCount, Price, SpotPrice, Region, ...; one row
per instance type and region or zone; Price and SpotPrice in USD per instance-hour).

Two ways to read them, both pinned to one commit:
  python tools/import_offers.py --git-dir MIRROR.git --commit SHA --clouds lambda nebius
      reads `git show SHA:catalogs/<version>/<cloud>/vms.csv`; price_as_of = the commit date.
  python tools/import_offers.py --csv-root DIR --commit SHA --as-of YYYY-MM-DD --clouds lambda
      reads DIR/<cloud>/vms.csv, which must hold that commit's rows (all of them, or every
      accelerator row); price_as_of = --as-of, which the notes mark as not the commit date.

What it keeps, per provider: for every (catalog GPU, GPUs per instance) the cheapest on-demand
row over all regions (ties: region name), and the cheapest spot row where SpotPrice is given.
AcceleratorName is mapped to a catalog GPU id by ACCELERATORS, refined by the instance type's
name (``pci``/``pcie`` or ``sxm`` in it decide the form factor); mappings that guess the form
factor carry the guess in the offer's notes. Rows whose accelerator has no catalog GPU are
skipped and counted (printed). Billing increments and minimums come from BILLING, each with the
provider's page; a provider not in BILLING gets 1 hour (conservative) and a note saying so.
An instance's network to other instances comes from NETWORKS (the provider's own figure, with
its source); an instance not in it states none, and the speed models assume one and say so.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO_URL = "https://github.com/skypilot-org/skypilot-catalog"
DEFAULT_VERSION = "v9"
ROOT = Path(__file__).resolve().parents[1]

# AcceleratorName -> (catalog id when the instance name says PCIe, id when it says SXM/NVLink,
# id when it says neither, the guess behind the last one or None when there is no guess).
ACCELERATORS: dict[str, tuple[str, str, str, str | None]] = {
    "A100": ("a100-40gb-pcie", "a100-40gb-sxm", "a100-40gb-sxm",
             "SkyPilot's A100 (40 GB) does not say PCIe or SXM; taken as SXM (8-GPU clouds "
             "instances are HGX boards)"),
    "A100-80GB": ("a100-80gb-pcie", "a100-80gb-sxm", "a100-80gb-sxm",
                  "SkyPilot's A100-80GB does not say PCIe or SXM; taken as SXM"),
    "A100-80GB-SXM": ("a100-80gb-sxm", "a100-80gb-sxm", "a100-80gb-sxm", None),
    "H100": ("h100-pcie", "h100-sxm", "h100-sxm",
             "SkyPilot's H100 does not say PCIe or SXM; taken as SXM"),
    "H100-SXM": ("h100-sxm", "h100-sxm", "h100-sxm", None),
    "H100-MEGA": ("h100-sxm", "h100-sxm", "h100-sxm", None),  # GCP a3-megagpu: H100 SXM
    "H100-NVLINK": ("h100-sxm", "h100-sxm", "h100-sxm",
                    "H100 'NVLink' instances taken as H100 SXM (HGX NVLink), not H100 NVL"),
    "H100-NVL": ("h100-nvl", "h100-nvl", "h100-nvl", None),
    "H200": ("h200-sxm", "h200-sxm", "h200-sxm",
             "SkyPilot's H200 does not say SXM or NVL; taken as SXM"),
    "H200-SXM": ("h200-sxm", "h200-sxm", "h200-sxm", None),
    "B200": ("b200", "b200", "b200", None),
    "L4": ("l4", "l4", "l4", None),
    "L40S": ("l40s", "l40s", "l40s", None),
    "A10": ("a10", "a10", "a10", None),
    "A10G": ("a10g", "a10g", "a10g", None),
    "T4": ("t4", "t4", "t4", None),
    "V100": ("v100-16gb", "v100-16gb", "v100-16gb", None),
    "V100-32GB": ("v100-32gb", "v100-32gb", "v100-32gb", None),
    "A6000": ("rtx-a6000", "rtx-a6000", "rtx-a6000", None),
    "RTXA6000": ("rtx-a6000", "rtx-a6000", "rtx-a6000", None),
    "RTX6000-Ada": ("rtx-6000-ada", "rtx-6000-ada", "rtx-6000-ada", None),
    "RTX6000Ada": ("rtx-6000-ada", "rtx-6000-ada", "rtx-6000-ada", None),
    "RTX3090": ("rtx-3090", "rtx-3090", "rtx-3090", None),
    "RTX4090": ("rtx-4090", "rtx-4090", "rtx-4090", None),
    "RTX5090": ("rtx-5090", "rtx-5090", "rtx-5090", None),
    "MI300X": ("mi300x", "mi300x", "mi300x", None),
    "RTXPRO6000": ("rtx-pro-6000-blackwell", "rtx-pro-6000-blackwell",
                   "rtx-pro-6000-blackwell",
                   "RTXPRO6000 taken as the catalog's RTX PRO 6000 Blackwell (server and "
                   "workstation editions are not told apart)"),
}
# Not mapped on purpose (no catalog GPU): RTX6000 is the Turing Quadro RTX 6000, not the RTX 6000
# Ada; GH200 is a Grace-Hopper superchip (the catalog has GB200); Gaudi HL-205 is first-generation
# Gaudi; A800 rows are PCIe cards (Cudo) while the catalog's a800-80gb is the SXM4 module; A40, L40,
# A4000/A5000, RTX 2000/4000 Ada, Inferentia/Trainium, TPUs.


@dataclass(frozen=True)
class Billing:
    increment_hours: float
    minimum_hours: float
    source: str | None
    note: str


BILLING: dict[str, Billing] = {
    "lambda": Billing(
        1 / 60, 0.0, "https://docs.lambda.ai/public-cloud/billing",
        "Lambda On-Demand Cloud prices instances by hourly usage and bills in one-minute "
        "increments, from launch (after health checks) to termination; no minimum is stated, so "
        "the least charge is one increment."),
    "nebius": Billing(
        1 / 3600, 0.0, "https://docs.nebius.com/object-storage/resources/pricing",
        "Nebius pricing docs: for GPUs on running VMs the billing unit is 1 second and the "
        "pricing unit 1 hour (read on the Object Storage pricing page, which states the Compute "
        "rule as its example); no minimum is stated."),
    "aws": Billing(
        1 / 3600, 1 / 60,
        "https://aws.amazon.com/about-aws/whats-new/2017/10/announcing-amazon-ec2-per-second-billing/",
        "EC2 Linux On-Demand, Reserved and Spot instances are billed in one-second increments "
        "with a minimum of 60 seconds (not for Linux distributions with a separate hourly "
        "charge)."),
    "gcp": Billing(
        1 / 3600, 1 / 60,
        "https://packtpub.com/en-mt/product/google-cloud-platform-for-developers-9781788837675/"
        "chapter/google-compute-engine-7/section/pricing-on-gce-ch07lvl1sec55",
        "Compute Engine machines are charged per second with a minimum of one minute (read in a "
        "book on GCP, not on Google's own page: unverified against cloud.google.com)."),
}
UNVERIFIED = Billing(1.0, 0.0, None, "The provider's billing increment was not verified; 1 hour "
                     "is used as the conservative increment.")


@dataclass(frozen=True)
class Network:
    """An instance's network to other instances, Gbit/s, as its provider states it (the
    catalog's OfferSpec.network_gbit_s), and where, with the setup it needs."""
    gbit_s: float
    source: str


# (provider, instance type) -> its stated network; an instance not listed states none (the
# models then assume network.DEFAULT_INTER_NODE_GBPS_PER_GPU and say so).
# Read 2026-11-27. Not stated anywhere found: Lambda's on-demand instances (InfiniBand only in
# its 1-Click Clusters), Cudo, Fluidstack, Nebius's 1-GPU and L40S presets, and Nebius's 8-GPU
# H100 preset (3.2 Tbit/s only in secondary summaries).
_AWS = "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html#ac_network"
_AWS_SETUP = ("EFA interfaces on every network card "
              "(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html); a "
              "cluster placement group recommended, one subnet and Availability Zone "
              "(https://docs.aws.amazon.com/parallelcluster/latest/ug/efa-v3.html)")
_MLPERF = "https://github.com/mlcommons/training_results_v5"
_NEBIUS_IB = ("host_networking '8x ConnectX-7 IB NDR 400Gb/s + 200Gb/s Ethernet NIC'. "
              "InfiniBand only for VMs placed in a Nebius GPU cluster "
              "(https://docs.nebius.com/compute/clusters/gpu)")


def _aws(instance: str, gbit: int, stated: str) -> tuple[tuple[str, str], Network]:
    return ("aws", instance), Network(gbit, f"{_AWS}: {instance} '{stated}', EFA yes. "
                                            f"{_AWS_SETUP}.")


NETWORKS: dict[tuple[str, str], Network] = dict([
    _aws("p4d.24xlarge", 400, "4x 100 Gigabit"),
    _aws("p4de.24xlarge", 400, "4x 100 Gigabit"),
    _aws("p5.48xlarge", 3200, "3200 Gigabit"),
    _aws("p5.4xlarge", 100, "100 Gigabit"),
    _aws("p5en.48xlarge", 3200, "3200 Gigabit"),
    _aws("p6-b200.48xlarge", 3200, "3200 Gigabit"),
    (("nebius", "gpu-b200-sxm-a_8gpu-160vcpu-1792gb"), Network(
        3200, f"{_MLPERF}.1/blob/main/Nebius/systems/nebius_b200_n2.json (Nebius's MLPerf "
        f"Training v5.1 system; it names no Nebius preset, taken for the 8-GPU B200 VM): "
        f"{_NEBIUS_IB}.")),
    (("nebius", "gpu-h200-sxm_8gpu-128vcpu-1600gb"), Network(
        3200, f"{_MLPERF}.0/blob/main/Nebius/systems/"
        f"nebius_soperator_8xH200_n128_ngc25.01_nemo.json (Nebius's MLPerf Training v5.0 "
        f"system): {_NEBIUS_IB}.")),
])


@dataclass(frozen=True)
class Row:
    instance_type: str
    accelerator: str
    count: int
    price: float | None
    spot_price: float | None
    region: str | None
    vcpus: float | None = None
    memory_gib: float | None = None
    gpu_mib: int | None = None  # one GPU's memory from GpuInfo, where given


def parse_rows(text: str) -> list[Row]:
    """The accelerator rows of a vms.csv (rows without AcceleratorName or count are CPU-only)."""
    rows = []
    for rec in csv.DictReader(io.StringIO(text)):
        name = (rec.get("AcceleratorName") or "").strip()
        count = _number(rec.get("AcceleratorCount"))
        if not name or not count:
            continue
        rows.append(Row(
            instance_type=(rec.get("InstanceType") or "").strip(), accelerator=name,
            count=int(round(count)), price=_number(rec.get("Price")),
            spot_price=_number(rec.get("SpotPrice")),
            region=(rec.get("Region") or "").strip() or None,
            vcpus=_number(rec.get("vCPUs")), memory_gib=_number(rec.get("MemoryGiB")),
            gpu_mib=_gpu_mib(rec.get("GpuInfo")),
        ))
    return rows


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def _gpu_mib(info: str | None) -> int | None:
    match = re.search(r"'SizeInMiB':\s*'?(\d+)", info or "")
    return int(match[1]) if match and int(match[1]) > 0 else None


# An accelerator name that hides a memory size: SkyPilot's Cudo rows name A100 80GB PCIe cards
# "A100" with 81920 MiB in GpuInfo; the memory decides.
BY_MEMORY = {("A100", 81920): "A100-80GB", ("V100", 32768): "V100-32GB"}


def map_gpu(accelerator: str, instance_type: str,
            gpu_mib: int | None = None) -> tuple[str | None, str | None]:
    """(catalog GPU id or None, the guess behind the mapping or None). The instance name
    decides the form factor where it says ``pci``/``pcie`` or ``sxm``; GpuInfo's
    memory decides 40 vs 80 GB A100 and 16 vs 32 GB V100."""
    accelerator = BY_MEMORY.get((accelerator, gpu_mib), accelerator)
    entry = ACCELERATORS.get(accelerator)
    if entry is None:
        return None, None
    pcie, sxm, neither, guess = entry
    name = instance_type.lower()
    if "pci" in name:  # pcie, and Cudo's "a100-pci"
        return pcie, None
    if "sxm" in name:
        return sxm, None
    return neither, guess


@dataclass(frozen=True)
class Pick:
    gpu: str
    count: int
    spot: bool
    row: Row
    price: float
    guess: str | None
    regions_at_price: int = 1


def pick_offers(rows: list[Row], known_gpus: set[str]) -> tuple[list[Pick], Counter[str]]:
    """Cheapest on-demand (and spot) row per (GPU, GPUs per instance); skipped accelerators
    counted by name."""
    best: dict[tuple[str, int, bool], Pick] = {}
    skipped: Counter[str] = Counter()
    for row in rows:
        gpu, guess = map_gpu(row.accelerator, row.instance_type, row.gpu_mib)
        if gpu is None or gpu not in known_gpus:
            skipped[row.accelerator] += 1
            continue
        for spot, price in ((False, row.price), (True, row.spot_price)):
            if price is None:
                continue
            key = (gpu, row.count, spot)
            cand = Pick(gpu, row.count, spot, row, price, guess)
            old = best.get(key)
            # Ties: a row whose name states the form factor, then region, instance type.
            if old is None or (price, guess is not None, row.region or "", row.instance_type) < (
                    old.price, old.guess is not None, old.row.region or "",
                    old.row.instance_type):
                best[key] = cand
    picks = []
    for (gpu, count, spot), p in sorted(best.items()):
        same = {r.region for r in rows if r.instance_type == p.row.instance_type
                and (r.spot_price if spot else r.price) == p.price}
        picks.append(Pick(gpu, count, spot, p.row, p.price, p.guess, len(same)))
    return picks, skipped


def offers_yaml(provider: str, picks: list[Pick], *, price_as_of: str, source: str,
                as_of_note: str | None) -> dict[str, object]:
    billing = BILLING.get(provider, UNVERIFIED)
    offers = []
    for p in picks:
        host = ""
        if p.row.vcpus and p.row.memory_gib:
            host = f", host {p.row.vcpus:g} vCPUs and {p.row.memory_gib:g} GiB RAM"
        where = (f"; the same price in {p.regions_at_price} regions"
                 if p.regions_at_price > 1 else "")
        notes = [f"Cheapest {'spot' if p.spot else 'on-demand'} instance of this shape in the "
                 f"SkyPilot catalog ({p.row.accelerator} x {p.count}{host}{where}).",
                 billing.note]
        if p.guess:
            notes.append(f"Mapping uncertain: {p.guess}.")
        if as_of_note:
            notes.append(as_of_note)
        entry: dict[str, object] = {
            "provider": provider, "instance_type": p.row.instance_type, "gpu": p.gpu,
            "gpus_per_instance": p.count, "usd_per_hour": round(p.price, 6),
            "billing_increment_hours": billing.increment_hours,
            "minimum_hours": billing.minimum_hours, "region": p.row.region, "spot": p.spot,
        }
        if p.row.vcpus:
            entry["host_vcpus"] = int(round(p.row.vcpus))
        if p.row.memory_gib:
            entry["host_ram_gib"] = p.row.memory_gib
        entry["price_as_of"] = price_as_of
        entry["source"] = source
        if billing.source:
            entry["billing_source"] = billing.source
        network = NETWORKS.get((provider, p.row.instance_type))
        if network is not None:
            entry["network_gbit_s"] = network.gbit_s
            entry["network_source"] = network.source
        entry["notes"] = " ".join(notes)
        offers.append(entry)
    return {"provider": provider, "offers": offers}


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", help="a git directory of skypilot-org/skypilot-catalog")
    src.add_argument("--csv-root", help="a folder with <cloud>/vms.csv of the commit")
    ap.add_argument("--commit", required=True, help="the skypilot-catalog commit (40 hex)")
    ap.add_argument("--as-of", help="YYYY-MM-DD for --csv-root (the commit date if known)")
    ap.add_argument("--as-of-note", help="what --as-of stands for, kept in every offer's notes")
    ap.add_argument("--version", default=DEFAULT_VERSION, help="catalog schema folder (v9)")
    ap.add_argument("--clouds", nargs="+", required=True, help="SkyPilot cloud names")
    ap.add_argument("--out", default=str(ROOT / "catalog" / "offers"))
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from planner.catalog.load import load_catalog

    known = set(load_catalog().gpus)
    if args.git_dir:
        as_of = _git(args.git_dir, "log", "-1", "--format=%cs", args.commit).strip()
        as_of_note = None
    else:
        if not args.as_of:
            ap.error("--csv-root needs --as-of")
        as_of, as_of_note = args.as_of, args.as_of_note
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for cloud in args.clouds:
        path = f"catalogs/{args.version}/{cloud}/vms.csv"
        if args.git_dir:
            text = _git(args.git_dir, "show", f"{args.commit}:{path}")
        else:
            text = (Path(args.csv_root) / cloud / "vms.csv").read_text(encoding="utf-8")
        picks, skipped = pick_offers(parse_rows(text), known)
        source = f"{REPO_URL}/blob/{args.commit}/{path}"
        data = offers_yaml(cloud, picks, price_as_of=as_of, source=source,
                           as_of_note=as_of_note)
        target = out / f"{cloud}.yaml"
        header = (f"# Generated by tools/import_offers.py from {source}\n"
                  f"# price_as_of {as_of}. Do not edit by hand: rerun the tool.\n")
        target.write_text(header + yaml.safe_dump(data, sort_keys=False, width=100),
                          encoding="utf-8")
        skipped_text = ", ".join(f"{k} ({v} rows)" for k, v in sorted(skipped.items()))
        print(f"{cloud}: {len(picks)} offers -> {target}; skipped accelerators without a "
              f"catalog GPU: {sum(skipped.values())} rows{': ' + skipped_text if skipped else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
