"""Renting GPUs for a token budget with a deadline: what does 2e9 tokens of a 7B cost by when?

The job is stated in tokens (here 2e9: e.g. two epochs over a 1e9-token instruction set); the
rental cost is $/GPU-hour x GPUs x the job's hours, so the cheapest plan is the one with the
fewest GPU-hours, and a deadline (``max_hours``) forces more or faster GPUs at a higher price.
Too tight a deadline is infeasible: the planner names the conflict and the smallest fix. A rental
budget (``budget_usd`` with ``pricing="rent"``) caps the job's cost the same way.

The offer is limited to six GPU types common at cloud providers and 64 GPUs, to keep the script
fast; drop ``gpus`` to search the whole catalog.

CLI equivalent of one line:
  planner plan --model 7b --pricing rent --tokens 2e9 --max-hours 4 \
    --gpus h100-sxm,h200-sxm,a100-80gb-sxm,l40s,rtx-4090,mi300x --max-gpus 64

Run: python examples/rent_for_token_budget.py
"""

from planner import PlanRequest, load_catalog, plan

TOKENS = 2e9
CLOUD_GPUS = ("h100-sxm", "h200-sxm", "a100-80gb-sxm", "l40s", "rtx-4090", "mi300x")


def show(cat, label: str, **kw) -> None:
    request = PlanRequest(model="7b", pricing="rent", tokens=TOKENS, gpus=CLOUD_GPUS,
                          max_gpus=64, **kw)
    result = plan(request, cat)
    if result.plan is None:
        fixes = "; ".join(f"{c.detail} -> {c.fix}" for c in result.conflicts)
        print(f"{label:28s} infeasible: {fixes}")
        return
    p = result.plan
    c = p.config
    print(f"{label:28s} {p.num_gpus:2d} x {p.gpu:14s} {p.method_label:9s} "
          f"zero{c.zero_stage} tp{c.tp} {p.throughput.tokens_per_s:9,.0f} tokens/s "
          f"{p.time_hours:6.1f} h  ${p.cost_usd:8,.0f}")


def main() -> None:
    cat = load_catalog()
    print(f"Renting for {TOKENS:.0e} training tokens of a 7B model (qwen2.5-7b), cheapest "
          "plan per limit:")
    show(cat, "no deadline")
    for hours in (24, 4, 0.25):
        show(cat, f"deadline {hours:g} h", max_hours=hours)
    show(cat, "full fine-tuning, 4 h", max_hours=4, method="full")
    show(cat, "full fine-tuning, $100", method="full", budget_usd=100)


if __name__ == "__main__":
    main()
