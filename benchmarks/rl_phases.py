"""Phase by phase: the RL iteration model (rltime.estimate_rl_step) against the phase times a
case logs (issue 18: which phase of an RL iteration the model gets wrong).

    PYTHONPATH=. python benchmarks/rl_phases.py [VALIDATION_DIR]

For every usable PPO/GRPO case, prints the measured and predicted value of its metric (step
time, tokens/s, time to train), the predicted iteration and each modelled phase; where the
case logs phase times (extra.timing_gen_s, timing_update_actor_s, timing_update_critic_s:
verl's timing_s/gen, timing_s/update_actor, timing_s/update_critic), the logged time beside the
phases it covers (gen: generation + generation tail; verl times the engine's wake-up and
weight sync inside gen as well, so the weight sync joins it) and their ratio.
In-sample: the fitted constants as planner/models/fitted.yaml holds them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit import GENERATION_PHASES, folder_args, load  # noqa: E402

from planner.catalog.load import Catalog, load_catalog  # noqa: E402
from planner.errors import PlannerError  # noqa: E402
from planner.validation.validate_throughput import rl_estimate, rl_metric  # noqa: E402

# logged phase time (extra key) -> the modelled phases it covers
LOGGED_PHASES: dict[str, tuple[str, ...]] = {
    "timing_gen_s": GENERATION_PHASES,
    "timing_update_actor_s": ("actor update",),
    "timing_update_critic_s": ("critic update",),
}


def phase_rows(case: dict[str, Any], catalog: Catalog) -> list[tuple[str, float, float | None]]:
    """(phase, predicted s, logged s or None) of one RL case: the modelled phases, then each
    logged phase against the sum of the phases it covers (LOGGED_PHASES)."""
    est = rl_estimate(case, catalog)
    extra = case.get("extra") or {}
    rows: list[tuple[str, float, float | None]] = [
        (case["metric"], rl_metric(case, est), float(case["value"]))]
    if case["metric"] != "step_time_s":
        rows.append(("step_time_s", est.step_time_s, None))
    rows += [(k, v, None) for k, v in est.phases.items()]
    for key, covered in LOGGED_PHASES.items():
        if extra.get(key) is not None:
            rows.append((f"logged {key}", sum(est.phases.get(p, 0.0) for p in covered),
                         float(extra[key])))
    return rows


def main(argv: list[str] | None = None) -> None:
    """Print phase_rows of every usable PPO/GRPO case."""
    args = folder_args(__doc__, None, argv=argv)
    cases = load(args.folder)
    catalog = load_catalog()
    for cid, case in cases.throughput.items():
        if case.get("workload") not in ("ppo", "grpo") or not case.get("usable_for_accuracy"):
            continue
        try:
            rows = phase_rows(case, catalog)
        except PlannerError as exc:
            print(f"{cid}: not predicted ({exc})")
            continue
        print(f"{cid} ({case.get('framework')}, {case.get('gpu')} x{case.get('num_gpus')})")
        for name, pred, logged in rows:
            ratio = f"  predicted/logged {pred / logged:5.2f}" if logged else ""
            shown = f"{logged:9.2f}" if logged is not None else " " * 9
            print(f"    {name:30s} predicted {pred:9.2f}  logged {shown}{ratio}")


if __name__ == "__main__":
    main()
