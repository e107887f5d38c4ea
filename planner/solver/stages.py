"""Staged (lexicographic) CP-SAT solving of a plan space, and the analytic re-check of a plan.

solve_lexicographic runs the tie-break chain on the space's rows and offers; make_plan turns the
solver's row into a Plan evaluated by the analytic models; check_plan re-checks every rule at
that plan. solve.plan and solve.pareto, and the explanations (explain.py), build on these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from ortools.sat.python import cp_model

from planner.catalog.request import TrainConfig
from planner.catalog.request_checks import validate_config
from planner.errors import PlannerError
from planner.models.cost import job_cost
from planner.models.rltime import workload_throughput
from planner.models.workloads import estimate_memory
from planner.solver.encoding import (
    NO_TIME,
    Encoding,
    add_step_time,
    build,
    cp_solver,
    hint_cheapest,
    offloads,
)
from planner.solver.result import Plan
from planner.solver.rows import Row, pareto_rows
from planner.solver.rules import Need, holds, violations
from planner.solver.search import ROUNDING, needs_timing, request_job, timed_search
from planner.solver.space import PlanSpace
from planner.solver.steptime import MAX_STEP_US, RowArrays, layout_config


@dataclass(frozen=True)
class Solved:
    """Raw values of one solve."""

    status: str  # optimal | feasible
    values: dict[str, int]
    offer: int
    strategy: int


Stage = tuple[str, cp_model.LinearExpr, tuple[int, int] | None]


def tie_break_stages(enc: Encoding, times: dict[tuple[int, int], int], *,
                     offload_first: bool = True) -> list[Stage]:
    """(name, expression to minimize, its (lowest, highest) value over the model's rows and
    offers, None when not known) after the objective, in order: no CPU offload, step time,
    fewer GPUs, the preferred strategy, fewer hosts (owned cards, free either way, in one
    machine rather than three), offer, tp, pp, larger micro-batch; hosts
    span their variable's domain (Encoding.max_hosts), step time the ``times`` given to
    add_step_time (without the sentinel of pairs that break a rule: no solution takes it).
    ``offload_first`` False leaves the offload stage out (the Pareto sweep: cost against time
    alone, so no point is slower at the same cost)."""
    v, rows = enc.var, enc.rows
    real = [t for t in times.values() if t < NO_TIME]

    def span(values) -> tuple[int, int]:
        values = list(values)
        return min(values), max(values)

    # no validation case measures an offloaded run (efficiency.OVERLAP is assumed): at the
    # objective's optimum a layout without CPU offload comes first (issue 18)
    first = [("offload", v["offloaded"], span(offloads(enc.space, r) for r in rows))] \
        if offload_first else []
    return [
        *first,
        ("time", v["step_time_us"], (min(real), max(real)) if real else None),
        ("num_gpus", v["num_gpus"], span(r.num_gpus for r in rows)),
        ("strategy", v["strategy"], span(r.strategy for r in rows)),
        ("hosts", v["hosts"], (1, enc.max_hosts)),
        ("offer", v["offer_idx"], span(enc.offers)),
        ("tp", v["tp"], span(r.tp for r in rows)),
        ("pp", v["pp"], span(r.pp for r in rows)),
        ("micro_batch", -v["micro_batch"], span(-r.micro_batch for r in rows)),
    ]


EXACT_WEIGHTS = 2**53  # merged objectives stay below this: exact in a double as well


def merge_stages(stages: list[Stage]) -> list[list[Stage]]:
    """Groups of consecutive stages solved as one: minimizing sum w_i (e_i - lo_i), with w_last
    = 1 and w_i = w_(i+1) x (hi_(i+1) - lo_(i+1) + 1), gives exactly the lexicographic optimum
    of the group when every e_i stays within its span (the spans are the variables' domains).
    A stage of unknown span is alone; a group grows while the merged objective's magnitude
    (objective_magnitude: every coefficient times the larger bound of its variable, which
    CP-SAT checks against int64) stays under EXACT_WEIGHTS. Measured (7B, $3,000): the eight
    tie-break solves of ~2 ms each become two."""
    groups: list[list[Stage]] = []
    for stage in stages:
        if stage[2] is not None and groups and groups[-1][-1][2] is not None and \
                objective_magnitude([*groups[-1], stage]) < EXACT_WEIGHTS:
            groups[-1].append(stage)
        else:
            groups.append([stage])
    return groups


def objective_magnitude(group: list[Stage]) -> int:
    """sum |w_i| x (max(|lo_i|, |hi_i|) + |lo_i|) of _group_objective: a bound on every partial
    sum CP-SAT forms while it checks or evaluates the objective."""
    total, weight = 0, 1
    for _name, _expr, (lo, hi) in reversed(group):
        total += weight * (max(abs(lo), abs(hi)) + abs(lo))
        weight *= hi - lo + 1
    return total


def _group_objective(group: list[Stage]) -> cp_model.LinearExpr:
    if len(group) == 1:
        return group[0][1]
    total, weight = 0, 1
    for _name, expr, (lo, hi) in reversed(group):
        total += weight * (expr - lo)
        weight *= hi - lo + 1
    return total


class SolverError(RuntimeError):
    """CP-SAT answered neither a solution, nor a proof of infeasibility where one can be, nor a
    time-out (MODEL_INVALID, or an infeasible tie-break stage): a bug in the encoding, never a
    plan (the CLI reports it on one line with exit code 3)."""


def run_solver(solver: cp_model.CpSolver, model: cp_model.CpModel, what: str) -> int:
    """solver.solve(model); a status other than OPTIMAL, FEASIBLE, INFEASIBLE or UNKNOWN (time
    limit) raises SolverError naming ``what`` (the model and stage) and CP-SAT's reason."""
    code = solver.solve(model)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE, cp_model.UNKNOWN):
        return code
    raise SolverError(f"CP-SAT answered {solver.status_name(code)} for {what}: "
                      f"{model.validate() or 'no reason given'}")


def _status(code: int) -> str | None:
    return {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible"}.get(code)


class SolveTimeout(Exception):
    """The time limit ended a solve before any solution: neither a plan nor a proof that none
    exists (status "unknown")."""


def purchase_front(space: PlanSpace, allowed: list[int]) -> list[int]:
    """The offers of ``allowed`` that no other offer dominates for a purchase: offer B
    dominates A when B has the same GPUs per host, at least A's usable memory and host RAM, and
    at most A's GPU and host prices (whole dollars), so every row A can hold B holds for no
    more money, with every rule on or off. Exact for the cost stage (its optimum value is the
    same); of equal offers the first in catalog order stays. Measured (benchmarks/scale.py, 333
    GPU types): 328 offers -> 41, the 70B cost stage 0.39 s -> 0.09 s."""
    offers = [space.offers[i] for i in allowed]
    k = np.array([(o.gpus_per_host, o.capacity_mib,
                   o.host_ram_mib if o.host_ram_mib is not None else np.inf,
                   -round(o.gpu_price_usd), -round(o.host_price_usd)) for o in offers])
    no_worse = (k[:, None, 0] == k[None, :, 0]) & (k[:, None, 1:] >= k[None, :, 1:]).all(axis=2)
    equal = (k[:, None, :] == k[None, :, :]).all(axis=2)
    earlier = np.arange(len(k))[:, None] < np.arange(len(k))[None, :]
    # dominated[a]: some b (row) no worse than a (column), and better somewhere or earlier
    beats = no_worse & (~equal | earlier)
    return [i for i, hit in zip(allowed, beats.any(axis=0), strict=True) if not hit]


def _times(space: PlanSpace, offers: list[int], rows: list[Row]) -> dict[tuple[int, int], int]:
    """Step time of the (offer, row) pairs for the step-time stage; pairs that break the GPU
    memory rule get NO_TIME (the rule excludes them). Evaluated best-first by the lower bound
    of RowArrays.bounds: once a pair's bound exceeds the fastest time found, it and every later
    pair get their bound (rounded up) instead, which is below their true time but above the
    fastest, so the stage's optimum and its ties (all that later stages see) are the same. The
    fastest is kept per value of the stage before time (CPU offload or not), which decides
    among the pairs first."""
    arr = RowArrays(space, rows)
    out, pending = {}, []
    offloaded = [offloads(space, row) for row in rows]
    for k, oi in enumerate(offers):
        cap = space.offers[oi].capacity_mib
        bounds = arr.bounds(oi)
        for r, row in enumerate(rows):
            out[(k, r)] = NO_TIME
            if row.gpu_need_mib <= cap:
                pending.append((float(bounds[r]) - ROUNDING, k, r))
    pending.sort()
    best: dict[int, int] = {}  # the fastest per value of the stage before time (offload)
    for low, k, r in pending:
        fastest = best.get(offloaded[r])
        if fastest is not None and low > fastest:
            out[(k, r)] = min(MAX_STEP_US, max(fastest + 1, math.ceil(low)))
            continue
        t = space.timing.step_us(offers[k], rows[r])
        out[(k, r)] = t
        best[offloaded[r]] = t if fastest is None else min(fastest, t)
    return out


def solve_timed(space: PlanSpace, time_limit: float, allowed: list[int], *, rows: list[Row],
                 objective: str | None = None, max_hours: float | None = None,
                 strategies: frozenset[int] | None = None, offload_first: bool = True
                 ) -> Solved | None:
    """The best pairs of ``timed_search``, then the tie-break chain by CP-SAT over them
    (``offload_first``: tie_break_stages)."""
    result = timed_search(space, allowed, rows, objective=objective, max_hours=max_hours,
                          strategies=strategies)
    if result is None:
        return None
    _, ties = result
    tied_rows = list(dict.fromkeys(r for _, r, _ in ties))
    tied_offers = sorted({oi for oi, _, _ in ties})
    times = dict.fromkeys(((k, j) for k in range(len(tied_offers))
                           for j in range(len(tied_rows))), NO_TIME)
    for oi, r, t in ties:
        times[(tied_offers.index(oi), tied_rows.index(r))] = t
    enc = build(space, tied_rows, tied_offers, every_subset=False)
    add_step_time(enc, times)  # its domain leaves out NO_TIME: only the pairs the search found
    stages = tie_break_stages(enc, times, offload_first=offload_first)
    if (objective or space.request.objective) == "time":
        stages = [("cost", enc.var["cost_usd"], None), *stages]
    return _chain(enc, cp_solver(time_limit), "optimal", stages, "the timed tie-break model")


def solve_lexicographic(
    space: PlanSpace, time_limit: float, *, methods: set[str] | None = None,
    offloads: set[str] | None = None, offers: set[int] | None = None,
    offload_first: bool = True,
) -> Solved | None:
    """Cost first on the Pareto-minimal rows (enough to decide cost), then the tie-break chain
    on every row and offer that can reach that cost. ``methods`` / ``offloads`` / ``offers``
    restrict the space (alternatives, the offload note): the optimum of the same request with
    those pins, without building its space again; ``offload_first``: tie_break_stages. None =
    infeasible; a stage stopped by the time limit returns the best plan so far with status
    'feasible'."""
    rows, front = space.rows, space.front
    allowed = sorted(offers) if offers is not None else list(range(len(space.offers)))
    strategies = None if methods is None and offloads is None else frozenset(
        i for i, s in enumerate(space.strategies)
        if (methods is None or s.method in methods)
        and (offloads is None or s.offload in offloads))
    if needs_timing(space.request):
        if not rows or not allowed or strategies == frozenset():
            return None
        return solve_timed(space, time_limit, allowed, rows=rows, strategies=strategies,
                           offload_first=offload_first)
    if strategies is not None:
        rows = [r for r in rows if r.strategy in strategies]
        front = pareto_rows([r for r in rows if space.allows(r)])
    if not rows or not front or not allowed:  # no row of these methods keeps the pins
        return None
    solver = cp_solver(time_limit)
    first = build(space, front, purchase_front(space, allowed), every_subset=False)
    first.model.add_assumptions(list(first.literal.values()))
    first.model.minimize(first.var["cost_usd"])
    hint_cheapest(first)
    code = run_solver(solver, first.model, "the cost-stage model")
    if code == cp_model.UNKNOWN:
        raise SolveTimeout
    status = _status(code)
    if status is None:
        return None
    best_cost = int(round(solver.objective_value))
    # the tie-break chain runs over the (offer, row) pairs that reach the optimal cost and fit
    counts = np.arange(1, (space.request.num_gpus or space.request.max_gpus) + 1)
    by_count: dict[int, list[int]] = {}
    for oi in allowed:
        for n in np.flatnonzero(space.offers[oi].purchase_usd(counts) == best_cost) + 1:
            by_count.setdefault(int(n), []).append(oi)
    second, reaching = [], set()
    for r in rows:
        if r.num_gpus in by_count and space.allows(r):
            fit = [oi for oi in by_count[r.num_gpus] if _fits(space, oi, r)]
            if fit:
                second.append(r)
                reaching.update(fit)
    enc = build(space, second, sorted(reaching), every_subset=False)
    times = _times(space, enc.offers, second)
    add_step_time(enc, times)
    enc.model.add(enc.var["cost_usd"] == best_cost)
    return _chain(enc, solver, status, tie_break_stages(enc, times, offload_first=offload_first),
                  "the cost tie-break model")


def _fits(space: PlanSpace, oi: int, row: Row) -> bool:
    o = space.offers[oi]
    return bool(holds(o, Need(row.gpu_need_mib, row.tp,
                              row.host_need_mib[space.host_sizes.index(o.gpus_per_host)],
                              row.num_gpus, space.strategies[row.strategy].dp_shard or 0)))


def _chain(enc: Encoding, solver: cp_model.CpSolver, status: str, stages: list[Stage],
           what: str) -> Solved:
    """Minimize each stage in turn (consecutive stages of known span merged, merge_stages),
    fixing the optimum of the previous ones. The model has a solution (the earlier search
    found it): any stage without one is a SolverError, a time-out ends the chain with the
    best plan so far (SolveTimeout before the first)."""
    m = enc.model
    m.add_assumptions(list(enc.literal.values()))
    found: Solved | None = None
    for group in merge_stages(stages):
        m.minimize(_group_objective(group))
        names = "+".join(name for name, _, _ in group)
        code = run_solver(solver, m, f"{what}, tie-break stage {names}")
        if code == cp_model.UNKNOWN:
            if found is None:
                raise SolveTimeout
            return replace(found, status="feasible")
        if code == cp_model.INFEASIBLE:
            raise SolverError(f"CP-SAT found {what}, tie-break stage {names} infeasible, "
                              "though a plan was found before it")
        stage = _status(code)
        values = {name: int(solver.value(var)) for name, var in enc.var.items()}
        offer = enc.offers[next(i for i, x in enumerate(enc.offer) if solver.value(x))]
        found = Solved("optimal" if status == stage == "optimal" else "feasible", values, offer,
                       values["strategy"])
        if stage != "optimal":
            return found
        for _name, expr, _span in group:
            m.add(expr == int(solver.value(expr)))
    if found is None:
        raise SolverError(f"{what} had no tie-break stage")
    return found


def config_of(space: PlanSpace, solved: Solved) -> TrainConfig:
    """The training config of a solved plan."""
    v = solved.values
    return layout_config(space, solved.strategy, num_gpus=v["num_gpus"], tp=v["tp"], pp=v["pp"],
                         micro_batch=v["micro_batch"], grad_accum=v["grad_accum"])


def make_plan(space: PlanSpace, offer_idx: int, cfg: TrainConfig, *, hosts: int) -> Plan:
    """Evaluate one candidate with the pure models: memory, throughput, job time and cost."""
    req, offer = space.request, space.offers[offer_idx]
    roles = space.roles
    est = estimate_memory(space.model, offer.gpu, cfg, gpus_per_node=offer.gpus_per_host,
                          critic=roles.critic, reward=roles.reward)
    tput = workload_throughput(space.model, offer.gpu, cfg, platform=offer.links_platform,
                               stack=req.stack, critic=roles.critic, reward=roles.reward,
                               gpus_per_node=offer.gpus_per_host)
    cost = job_cost(offer.gpu, cfg.num_gpus, tokens_per_s=tput.tokens_per_s,
                    job=request_job(req), pricing=req.pricing, platform=offer.platform,
                    price_kind=req.price_kind, offer=offer.rental)
    return Plan(
        model=space.model.id, gpu=offer.gpu.id,
        platform=offer.platform.id if offer.platform else None,
        num_gpus=cfg.num_gpus, num_hosts=hosts, config=cfg, memory=est, throughput=tput,
        cost=cost, checkpoint=space.checkpoint,
    )


def check_plan(space: PlanSpace, plan: Plan) -> list[str]:
    """Every rule re-checked with the analytic models (rules.violations, rule by rule), with
    the configuration's validity, the global batch, the rollout engine and the hosts holding
    the GPUs; returns the violations (none expected)."""
    req, cfg = space.request, plan.config
    problems = []
    try:
        validate_config(cfg, space.model)
    except PlannerError as exc:
        problems.append(str(exc))
    if plan.memory.blocked:
        problems.append("the rollout engine cannot hold one sequence")
    if cfg.global_batch_size != req.global_batch_size:
        problems.append(f"global batch {cfg.global_batch_size} != {req.global_batch_size}")
    offer = space.offer_of(plan)
    if plan.num_hosts * offer.gpus_per_host < plan.num_gpus:
        problems.append("GPUs do not fit the hosts")
    if cfg.dp_shard not in (None, offer.gpus_per_host):
        problems.append(f"hybrid shard group {cfg.dp_shard} is not one host's "
                        f"{offer.gpus_per_host} GPUs")
    return problems + violations(space, plan)
