"""Scale: planning over a synthetic catalog of 300 GPU types with up to 1024 GPUs.

Usage: python benchmarks/scale.py [--types 300] [--max-gpus 1024]

Writes a catalog overlay of synthetic GPU types to a temporary folder: each is a priced entry of
the shipped catalog with memory, bf16/fp8 TFLOPS, memory bandwidth and prices scaled by
independent factors in [0.7, 1.3] (seeded, so every run plans the same catalog; memory rounded
to whole GiB), loaded with ``load_catalog([folder])`` next to the shipped entries. Every request
runs in a fresh process (``--case``) so that its peak RSS (``resource.getrusage ru_maxrss``) is its
own; a baseline process that only imports the planner and loads the catalog gives the floor.
Prints, per request: the space (offers, candidate rows), space build, the cost/time solve
(``solve_lexicographic``: objective and tie-break chain), the whole ``plan()`` (also binding rules
by re-solving and alternatives), the status, the plan, and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from planner.catalog.load import load_catalog

SEED = 6
PERTURB = (0.7, 1.3)
REQUESTS = {
    "70b-cost": dict(model="70b"),
    "70b-time": dict(model="70b", objective="time", budget_usd=2_000_000),
    "8b-cost-budget": dict(model="8b", budget_usd=20_000),
    "8b-time": dict(model="8b", objective="time", budget_usd=200_000),
}


def write_synthetic_catalog(folder: Path, n_types: int, *, seed: int = SEED) -> list[str]:
    """Write ``n_types`` synthetic GPU YAMLs under ``folder/gpus`` (ids syn-000-<base> ...),
    each a shipped priced GPU with perturbed memory, compute, bandwidth and prices; returns
    the ids in catalog order."""
    rng = random.Random(seed)
    bases = [g for g in load_catalog().gpus.values()
             if g.price_usd_new or g.price_usd_used or g.price_usd_per_hour]
    out = folder / "gpus"
    out.mkdir(parents=True, exist_ok=True)
    ids = []
    for k in range(n_types):
        base = bases[k % len(bases)]
        doc = base.model_dump(mode="json", exclude_none=True)
        gid = f"syn-{k:03d}-{base.id}"
        doc["id"], doc["name"] = gid, f"Synthetic {k} from {base.name}"
        doc["memory_gib"] = float(max(4, round(base.memory_gib * rng.uniform(*PERTURB))))
        for key in ("bf16_dense_tflops", "fp8_dense_tflops", "memory_bandwidth_gbps",
                    "price_usd_new", "price_usd_used", "price_usd_per_hour"):
            if doc.get(key) is not None:
                doc[key] = round(doc[key] * rng.uniform(*PERTURB), 2)
        doc["notes"] = f"synthetic (benchmarks/scale.py, seed {seed}) from {base.id}"
        (out / f"{gid}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        ids.append(gid)
    return ids


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run_case(name: str, folder: Path, max_gpus: int) -> dict[str, object]:
    """One request in this process: timings, result and peak RSS."""
    from planner.catalog.plan_request import PlanRequest
    from planner.solver.solve import plan
    from planner.solver.space import build_space
    from planner.solver.stages import solve_lexicographic

    catalog = load_catalog([folder])
    doc: dict[str, object] = {"case": name, "gpu_types": len(catalog.gpus)}
    if name == "baseline":
        doc["peak_rss_mib"] = _peak_rss_mib()
        return doc
    request = PlanRequest(**REQUESTS[name], max_gpus=max_gpus, time_limit_s=60)
    t0 = time.perf_counter()
    space = build_space(request, catalog)
    _ = space.rows, space.front
    t1 = time.perf_counter()
    solved = solve_lexicographic(space, request.time_limit_s)
    t2 = time.perf_counter()
    result = plan(request, catalog)
    t3 = time.perf_counter()
    p = result.plan
    doc |= {"offers": len(space.offers), "rows": len(space.rows), "front": len(space.front),
            "space_s": t1 - t0, "solve_s": t2 - t1, "plan_s": t3 - t2,
            "solve_status": solved.status if solved else "infeasible", "status": result.status,
            "plan": f"{p.num_gpus} x {p.gpu}, {p.method_label}, ${p.cost_usd:,.0f}, "
                    f"{p.time_hours:,.1f} h" if p else None,
            "peak_rss_mib": _peak_rss_mib()}
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", type=int, default=300)
    parser.add_argument("--max-gpus", type=int, default=1024)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, Path(args.folder), args.max_gpus)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        write_synthetic_catalog(Path(tmp), args.types)
        print(f"{args.types} synthetic GPU types written in {time.perf_counter() - t:.2f} s; "
              f"max GPUs {args.max_gpus}; one process per request")
        print(f"{'request':15s} {'types':>5s} {'offers':>6s} {'rows':>6s} {'space s':>7s} "
              f"{'solve s':>7s} {'plan() s':>8s} {'status':>8s} {'RSS MiB':>7s}  plan")
        for name in ("baseline", *REQUESTS):
            proc = subprocess.run(
                [sys.executable, __file__, "--case", name, "--folder", tmp,
                 "--max-gpus", str(args.max_gpus)], capture_output=True, text=True, check=True)
            d = json.loads(proc.stdout.strip().splitlines()[-1])
            if name == "baseline":
                print(f"{'baseline':15s} {d['gpu_types']:5d} {'':>6s} {'':>6s} {'':>7s} "
                      f"{'':>7s} {'':>8s} {'':>8s} {d['peak_rss_mib']:7.0f}  (imports + catalog)")
                continue
            print(f"{name:15s} {d['gpu_types']:5d} {d['offers']:6d} {d['rows']:6d} "
                  f"{d['space_s']:7.2f} {d['solve_s']:7.2f} {d['plan_s']:8.2f} "
                  f"{d['status']:>8s} {d['peak_rss_mib']:7.0f}  {d['plan']}")


if __name__ == "__main__":
    main()
