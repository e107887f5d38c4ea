"""Differential test of the planner: random requests, its optimum against an independent
enumeration built with `check`'s own functions (planner.validation.reference), not from PlanSpace.

Usage: python benchmarks/differential.py [N] [SEED]     # default 300 requests, seed 2026
Prints one line per disagreement and a summary: requests, how many carry pins (num-gpus,
grad-accum, micro-batch, tp, pp, sharding, method, rank; every request also names 1-3 GPU
types), feasible / infeasible, disagreements by kind (false infeasible, costlier or slower
plan, plan where the reference finds none, re-check differences), bad input skipped, seconds.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter

from planner.catalog.load import load_catalog
from planner.errors import PlannerError
from planner.validation.reference import differential, pinned, random_request


def kind(v) -> str:
    if v.agree:
        return "agree"
    if v.planner is None:
        return "false infeasible"
    if v.reference is None:
        return "plan where the reference finds none"
    if v.planner > v.reference:
        return "costlier/slower than the reference"
    if v.planner < v.reference:
        return "better than the reference (reference wrong, or a rule broken)"
    return "re-check differs"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 2026
    cat = load_catalog()
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    with_pins = feasible = bad = 0
    objectives: Counter[str] = Counter()
    per_pin: Counter[str] = Counter()
    start = time.perf_counter()
    done = 0
    while done < n:
        req = random_request(rng, cat)
        try:
            v = differential(req, cat)
        except PlannerError as exc:  # bad input: the planner refuses it (exit 2), not compared
            bad += 1
            print(f"bad input skipped: {exc}")
            continue
        done += 1
        with_pins += bool(pinned(req))
        per_pin.update(pinned(req))
        feasible += v.reference is not None
        objectives[f"{req.pricing}/{req.objective}"] += 1
        counts[kind(v)] += 1
        if not v.agree:
            print(f"DISAGREE {kind(v)}: planner {v.planner} reference {v.reference}: {v.detail}\n"
                  f"    {req.model_dump(exclude_defaults=True)}")
    seconds = time.perf_counter() - start
    print(f"\n{done} requests (seed {seed}), {with_pins} with pins, {feasible} feasible, "
          f"{done - feasible} infeasible for the reference; {bad} bad inputs skipped")
    print("pins: " + ", ".join(f"{k} {v}" for k, v in sorted(per_pin.items())))
    print("pricing/objective: " + ", ".join(f"{k} {v}" for k, v in sorted(objectives.items())))
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"{seconds:.0f} s")


if __name__ == "__main__":
    main()
