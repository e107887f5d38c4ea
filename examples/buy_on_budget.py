"""What to buy to fine-tune a 7B model on $1,500, $3,000 and $10,000.

The objective is cost: the cheapest purchase that fits wins, so a larger budget only matters
when a smaller one is infeasible (then the conflict and its smallest fix are printed). Spending
a larger budget on speed needs the time objective, which the planner does not have yet.

Run: python examples/buy_on_budget.py
"""

from planner.request import PlanRequest
from planner.solve import plan


def show(budget: float) -> None:
    result = plan(PlanRequest(model="7b", budget_usd=budget, tokens=2e8))
    if result.plan is None:
        print(f"${budget:,.0f}: infeasible; " + "; ".join(c.fix for c in result.conflicts))
        return
    p = result.plan
    c = p.config
    print(f"${budget:,.0f}: {p.num_gpus} x {p.gpu} in {p.platform}, {p.method_label}, "
          f"zero{c.zero_stage}/{c.offload}, {p.throughput.tokens_per_s:,.0f} tokens/s, "
          f"{p.time_hours:,.1f} h for 2e8 tokens, ${p.cost_usd:,.0f}")


def main() -> None:
    for budget in (1500, 3000, 10000):
        show(budget)


if __name__ == "__main__":
    main()
