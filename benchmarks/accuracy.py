"""Print the accuracy tables of the planner's models against validation/ (the project copy
of ../shared/validation).

Usage: python benchmarks/accuracy.py [VALIDATION_DIR]
Prints, per file, each case's prediction and the summary (median / p90 |relative error|,
bias, share within 20 %, fits/OOM verdicts), exactly as `planner validate` does, then the
reward-model / DPO / PPO / GRPO figures per workload (memory peaks, fits/oom confusion counts,
time) from the same summaries (`planner validate --json`: keys "rl" and "rl_by_workload").
"""

from __future__ import annotations

import sys
from pathlib import Path

from planner.catalog.load import load_catalog
from planner.outputs import listings
from planner.validation.validate import validate_file
from planner.validation.validate_throughput import validate_throughput_file

DEFAULT = Path(__file__).resolve().parents[1] / "validation"


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    catalog = load_catalog()
    for name in ("memory_cases.yaml",):
        results, summary = validate_file(folder / name, catalog)
        print(f"== {name} ==")
        print(listings.validate_text(results, summary))
        print()
    t_results, t_summary = validate_throughput_file(folder / "throughput_cases.yaml", catalog)
    print("== throughput_cases.yaml ==")
    print(listings.throughput_validate_text(t_results, t_summary))
    print()
    print("== RL and preference workloads (rm, dpo, ppo, grpo) ==")
    print(rl_text(summary, t_summary))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def rl_text(memory: dict, throughput: dict) -> str:
    """Per workload: memory peaks (none usable: reported as their own group), fits/oom
    confusion counts, and the usable time cases, with issue 5's bars."""
    rl = memory["rl"]
    lines = ["bars: memory median <= 8 %, p90 <= 20 %; time median <= 20 %, p90 <= 50 %", "",
             f"{'workload':9} {'mem peaks':>9} {'median':>7} {'p90':>7} | "
             f"{'fits->fits':>10} {'fits->oom':>9} {'oom->fits':>9} {'oom->oom':>8} "
             f"{'no verdict':>10} | {'time cases':>10} {'median':>7} {'p90':>7}"]
    rows = list(rl["peaks_by_workload"]) + ["all"]
    for w in rows:
        m = rl["peaks"] if w == "all" else rl["peaks_by_workload"][w]
        v = rl["verdicts"] if w == "all" else rl["verdicts_by_workload"][w]
        t = throughput["rl"] if w == "all" else throughput["rl_by_workload"].get(w, {})
        lines.append(
            f"{w:9} {m['peak_cases']:>9} {_pct(m.get('median_abs_err')):>7} "
            f"{_pct(m.get('p90_abs_err')):>7} | {v['fits_predicted_fits']:>10} "
            f"{v['fits_predicted_oom']:>9} {v['oom_predicted_fits']:>9} "
            f"{v['oom_predicted_oom']:>8} {v['no_verdict']:>10} | {t.get('predicted', 0):>10} "
            f"{_pct(t.get('median_abs_err')):>7} {_pct(t.get('p90_abs_err')):>7}")
    lines.append("")
    lines.append("time by framework (usable): " + ", ".join(
        f"{k} {v['predicted']} cases median {_pct(v.get('median_abs_err'))} "
        f"p90 {_pct(v.get('p90_abs_err'))}" for k, v in throughput["rl_by_framework"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
