"""Solver speed: CP-SAT plan vs the exhaustive enumerator on the shipped catalog.

Usage: python benchmarks/solver.py
For representative requests prints, measured in this one run: space building (memory tables
and candidate rows), the CP-SAT solve (cost stage + tie-break chain), the exhaustive
enumeration of the same space (planner.oracle), their ratio, agreement of the optimum, and the
whole `planner plan` process time.
"""

from __future__ import annotations

import subprocess
import sys
import time

from planner.catalog import load_catalog
from planner.oracle import enumerate_best
from planner.request import PlanRequest
from planner.solve import solve_lexicographic
from planner.space import build_space

REQUESTS = [
    dict(model="7b", budget_usd=3000),
    dict(model="8b", method="full"),
    dict(model="70b", budget_usd=60000),
    dict(model="mixtral-8x7b", budget_usd=200000),
    dict(model="405b"),
]


def _cli_seconds(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "planner.cli", *args], capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> None:
    catalog = load_catalog()
    print(f"{'request':38s} {'space s':>8s} {'solve s':>8s} {'enum s':>8s} {'enum/solve':>10s} "
          f"{'same optimum':>12s}")
    for kw in REQUESTS:
        t0 = time.perf_counter()
        space = build_space(PlanRequest(**kw), catalog)
        _ = space.front
        t1 = time.perf_counter()
        solved = solve_lexicographic(space, 30)
        t2 = time.perf_counter()
        best = enumerate_best(space)
        t3 = time.perf_counter()
        same = (solved is None and best is None) or (
            solved is not None and best is not None
            and (solved.values["cost_usd"], solved.offer, solved.strategy)
            == (best.cost, best.offer, best.strategy))
        label = ", ".join(f"{k}={v}" for k, v in kw.items())
        print(f"{label:38s} {t1 - t0:8.2f} {t2 - t1:8.2f} {t3 - t2:8.2f} "
              f"{(t3 - t2) / (t2 - t1):10.1f} {str(same):>12s}")
    print()
    whole = _cli_seconds(["plan", "--budget", "3000", "--model", "7b"])
    print(f"whole process `planner plan --budget 3000 --model 7b`: {whole:.2f} s")


if __name__ == "__main__":
    main()
