"""What to buy to fine-tune a 7B model on $1,500, $3,000 and $10,000: cheapest, then fastest.

With the cost objective the cheapest purchase that fits wins, so a larger budget only matters
when a smaller one is infeasible (then the conflict and its smallest fix are printed). With
``objective="time"`` the planner spends the budget on speed.

Run: python examples/buy_on_budget.py
"""

from planner import PlanRequest, plan


def show(budget: float, objective: str) -> None:
    result = plan(PlanRequest(model="7b", budget_usd=budget, tokens=2e8, objective=objective))
    if result.plan is None:
        print(f"${budget:,.0f} {objective}: infeasible; "
              + "; ".join(c.fix for c in result.conflicts))
        return
    p = result.plan
    c = p.config
    print(f"${budget:,.0f} {objective}: {p.num_gpus} x {p.gpu} in {p.platform}, "
          f"{p.method_label}, zero{c.zero_stage}/{c.offload}, "
          f"{p.throughput.tokens_per_s:,.0f} tokens/s, {p.time_hours:,.1f} h for 2e8 tokens, "
          f"${p.cost_usd:,.0f}")


def main() -> None:
    for budget in (1500, 3000, 10000):
        show(budget, "cost")
    for budget in (3000, 10000):
        show(budget, "time")


if __name__ == "__main__":
    main()
