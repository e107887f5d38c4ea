"""The `planner pareto` document and its text table (the cost-vs-time front)."""

from __future__ import annotations

from typing import Any

from planner.models.bands import DEFAULT_CONFIDENCE
from planner.outputs.render import _alternative, plan_body, text_table
from planner.outputs.schema import SCHEMA_VERSION


def pareto_doc(points: list[Any], *, more: bool = False) -> dict[str, Any]:
    """The `planner pareto --json` document (schema.ParetoDocument): each point's table line
    and its whole plan, so that a point can be exported; ``more``: the front goes on past the
    points shown."""
    return {"schema_version": SCHEMA_VERSION, "points": [_alternative(p) | {
        "job": p.cost.job.definition, "basis": p.cost.basis,
        "status": "optimal" if p.proven_optimal else "feasible",
        "plan": plan_body(p)} for p in points], "more": more}


def pareto_text(doc: dict[str, Any]) -> str:
    """The ``pareto`` document as text."""
    if not doc["points"]:
        return "no plan satisfies the request (run planner plan for the conflicts)"
    rows = [[f"{a['num_gpus']} x {a['gpu']}" + ("" if a["status"] == "optimal" else " *"),
             a["platform"] or "rented",
             a["method"], f"{a['sharding']}/{a['offload']}", f"tp{a['tp']} pp{a['pp']}",
             *_banded_cells(a)] for a in doc["points"]]
    head = f"cost-vs-time Pareto-optimal plans ({doc['points'][0]['job']}, " \
           f"{doc['points'][0]['basis']}):"
    table = text_table(rows, ["GPUs", "host", "method", "sharding/offload", "layout", "GiB/GPU",
                          "tokens/s", "hours", "cost"])
    table += (f"\n(in brackets: the p{round(100 * DEFAULT_CONFIDENCE)} band of each prediction, "
              "from leave-one-source-out errors of jobs like it; a purchase has none)")
    if any(a["status"] != "optimal" for a in doc["points"]):
        table += ("\n* feasible, not proven optimal: the solver time limit (--time-limit) "
                  "stopped the tie-break among plans of this cost and time")
    if doc.get("more"):
        table += (f"\nthe front goes on: {len(doc['points'])} points shown (--max-points); "
                  "faster and costlier plans follow")
    return head + "\n" + table


def _banded_cells(point: dict[str, Any]) -> list[str]:
    """A Pareto row's GiB/GPU, tokens/s, hours and cost, each with its band in brackets."""
    plan = point["plan"]
    cells = ((point["per_gpu_gib"], plan["memory"].get("band"), "{:.1f}"),
             (point["tokens_per_s"], plan["throughput"].get("band"), "{:,.0f}"),
             (point["time_hours"], plan.get("time_hours_band"), "{:,.2f}"),
             (point["cost_usd"], plan["cost"].get("band"), "${:,.0f}"))
    return [fmt.format(v) + (f" ({fmt.format(b['lo'])}-{fmt.format(b['hi'])})" if b else "")
            for v, b, fmt in cells]
