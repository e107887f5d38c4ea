"""plan(): build the space, solve lexicographically, extract, re-check with the analytic models.

The tie-break chain makes the answer unique and deterministic (one worker, fixed seed):
cost -> step time (throughput model) -> fewer GPUs -> fuller-fidelity strategy (full > LoRA >
DoRA > QLoRA, no offload, no recomputation: the order of ``space.Strategy`` enumeration) ->
catalog order of the offer -> smaller tp, pp -> larger micro-batch -> fewer hosts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from ortools.sat.python import cp_model

from planner import efficiency as eff
from planner.api import workload_throughput
from planner.catalog import Catalog, load_catalog
from planner.cost import job_cost
from planner.encoding import NO_TIME, Encoding, add_step_time, build, hint_cheapest
from planner.errors import PlannerError
from planner.frameworks import DEFAULT_FRAMEWORK, auto_candidates
from planner.memory import GIB, estimate_memory
from planner.request import PlanRequest, TrainConfig, validate_config
from planner.result import Plan, PlanResult
from planner.search import (
    ROUNDING,
    job_hours_at,
    job_steps,
    needs_timing,
    plan_usd,
    request_job,
    timed_search,
)
from planner.space import (
    PlanSpace,
    Row,
    build_space,
    layout_config,
    pareto_rows,
)

SEED = 0
PARETO_STEP = 0.01  # each Pareto point is at least 1 % faster than the previous one


@dataclass(frozen=True)
class Solved:
    """Raw values of one solve."""

    status: str  # optimal | feasible
    values: dict[str, int]
    offer: int
    strategy: int


def cp_solver(time_limit: float) -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.random_seed = SEED
    s.parameters.max_time_in_seconds = time_limit
    # Measured (benchmarks/solver.py, 2026-11-21): presolve costs more than it saves on these
    # one-hot row models: the cost stage of 405b/7b/70b/8b took 0.33/0.18/0.25/0.15 s with it,
    # 0.11/0.09/0.15/0.09 s without, same optima (and tests/test_solve*.py == enumeration).
    s.parameters.cp_model_presolve = False
    # Probing at the start of the search took 20 of the 36 ms of the 70B cost stage; with it off
    # and the cheapest pair as a hint (encoding.hint_cheapest) the stage takes 4 ms.
    s.parameters.cp_model_probing_level = 0
    return s


Stage = tuple[str, cp_model.LinearExpr, tuple[int, int] | None]


def tie_break_stages(enc: Encoding, times: dict[tuple[int, int], int]) -> list[Stage]:
    """(name, expression to minimize, its (lowest, highest) value over the model's rows and
    offers, None when not known) after the objective, in order; hosts span their variable's
    domain (Encoding.max_hosts), step time the ``times`` given to add_step_time (without the
    sentinel of pairs that break a rule: no solution takes it)."""
    v, rows = enc.var, enc.rows
    real = [t for t in times.values() if t < NO_TIME]

    def span(values) -> tuple[int, int]:
        values = list(values)
        return min(values), max(values)

    return [
        ("time", v["step_time_us"], (min(real), max(real)) if real else None),
        ("num_gpus", v["num_gpus"], span(r.num_gpus for r in rows)),
        ("strategy", v["strategy"], span(r.strategy for r in rows)),
        ("offer", v["offer_idx"], span(enc.offers)),
        ("tp", v["tp"], span(r.tp for r in rows)),
        ("pp", v["pp"], span(r.pp for r in rows)),
        ("micro_batch", -v["micro_batch"], span(-r.micro_batch for r in rows)),
        ("hosts", v["hosts"], (1, enc.max_hosts)),
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


def _min_hosts_cost(space: PlanSpace, oi: int, n: int) -> int:
    return space.offers[oi].purchase_usd(n)


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
    fastest, so the stage's optimum and its ties (all that later stages see) are the same."""
    from planner.space import RowArrays

    arr = RowArrays(space, rows)
    out, pending = {}, []
    for k, oi in enumerate(offers):
        cap = space.offers[oi].capacity_mib
        bounds = arr.bounds(oi)
        for r, row in enumerate(rows):
            out[(k, r)] = NO_TIME
            if row.gpu_need_mib <= cap:
                pending.append((float(bounds[r]) - ROUNDING, k, r))
    pending.sort()
    best = None
    for low, k, r in pending:
        if best is not None and low > best:
            out[(k, r)] = max(best + 1, math.ceil(low))
            continue
        t = space.timing.step_us(offers[k], rows[r])
        out[(k, r)] = t
        best = t if best is None else min(best, t)
    return out


def _solve_timed(space: PlanSpace, time_limit: float, allowed: list[int], rows: list[Row],
                 *, objective: str | None = None, max_hours: float | None = None,
                 strategies: frozenset[int] | None = None) -> Solved | None:
    """The best pairs of ``timed_search``, then the tie-break chain by CP-SAT over them."""
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
    stages = tie_break_stages(enc, times)
    if (objective or space.request.objective) == "time":
        stages = [("cost", enc.var["cost_usd"], None), *stages]
    return _chain(enc, cp_solver(time_limit), "optimal", stages, "the timed tie-break model")


def solve_lexicographic(
    space: PlanSpace, time_limit: float, *, methods: set[str] | None = None,
    offers: set[int] | None = None,
) -> Solved | None:
    """Cost first on the Pareto-minimal rows (enough to decide cost), then the tie-break chain
    on every row and offer that can reach that cost. ``methods`` / ``offers`` restrict the
    space (for alternatives). None = infeasible; a stage stopped by the time limit returns the
    best plan so far with status 'feasible'."""
    rows, front = space.rows, space.front
    allowed = sorted(offers) if offers is not None else list(range(len(space.offers)))
    if needs_timing(space.request):
        strategies = None if methods is None else frozenset(
            i for i, s in enumerate(space.strategies) if s.method in methods)
        if not rows or not allowed or strategies == frozenset():
            return None
        return _solve_timed(space, time_limit, allowed, rows, strategies=strategies)
    if methods is not None:
        rows = [r for r in rows if space.strategies[r.strategy].method in methods]
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
    return _chain(enc, solver, status, tie_break_stages(enc, times), "the cost tie-break model")


def _fits(space: PlanSpace, oi: int, row: Row) -> bool:
    o = space.offers[oi]
    return bool(o.holds(row.gpu_need_mib, row.tp,
                        row.host_need_mib[space.host_sizes.index(o.gpus_per_host)]))


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
    v = solved.values
    return layout_config(space, solved.strategy, num_gpus=v["num_gpus"], tp=v["tp"], pp=v["pp"],
                         micro_batch=v["micro_batch"], grad_accum=v["grad_accum"])


def make_plan(space: PlanSpace, offer_idx: int, cfg: TrainConfig, hosts: int) -> Plan:
    """Evaluate one candidate with the pure models: memory, throughput, job time and cost."""
    req, offer = space.request, space.offers[offer_idx]
    roles = space.roles
    est = estimate_memory(space.model, offer.gpu, cfg, gpus_per_node=offer.gpus_per_host,
                          critic=roles.critic, reward=roles.reward)
    tput = workload_throughput(space.model, offer.gpu, cfg, platform=offer.platform,
                               stack=req.stack, critic=roles.critic, reward=roles.reward,
                               gpus_per_node=offer.gpus_per_host)
    cost = job_cost(offer.gpu, cfg.num_gpus, tokens_per_s=tput.tokens_per_s,
                    job=request_job(req), pricing=req.pricing, platform=offer.platform,
                    price_kind=req.price_kind)
    return Plan(
        model=space.model.id, gpu=offer.gpu.id,
        platform=offer.platform.id if offer.platform else None,
        num_gpus=cfg.num_gpus, num_hosts=hosts, config=cfg, memory=est, throughput=tput,
        cost=cost,
    )


def check_plan(space: PlanSpace, plan: Plan) -> list[str]:
    """Every rule re-checked with the analytic models; returns the violations (none expected)."""
    req, cfg = space.request, plan.config
    problems = []
    try:
        validate_config(cfg, space.model)
    except PlannerError as exc:
        problems.append(str(exc))
    limit = plan.memory.capacity * (1 - req.memory_margin)
    if plan.memory.blocked:
        problems.append("the rollout engine cannot hold one sequence")
    if plan.memory.device > limit:
        problems.append(f"memory {plan.memory.device / GIB:.2f} GiB > {limit / GIB:.2f} GiB")
    if cfg.global_batch_size != req.global_batch_size:
        problems.append(f"global batch {cfg.global_batch_size} != {req.global_batch_size}")
    if req.budget_usd is not None and plan.cost_usd > req.budget_usd * (1 + RECHECK_TOLERANCE):
        problems.append(f"cost ${plan.cost_usd:,.2f} > budget ${req.budget_usd:,.0f}")
    if req.max_hours is not None and plan.time_hours > req.max_hours * (1 + RECHECK_TOLERANCE):
        problems.append(f"{plan.time_hours:,.3f} h > max-hours {req.max_hours:g}")
    rate = plan.throughput.tokens_per_s
    if req.min_tokens_per_s is not None and rate < req.min_tokens_per_s * (1 - RECHECK_TOLERANCE):
        problems.append(f"{rate:,.0f} tokens/s < min-tokens-per-s {req.min_tokens_per_s:g}")
    offer = next(o for o in space.offers if o.gpu.id == plan.gpu
                 and (o.platform.id if o.platform else None) == plan.platform)
    if offer.host_ram_mib is not None and plan.memory.host_ram > offer.host_ram_mib * 2**20:
        problems.append(f"host RAM {plan.memory.host_ram / GIB:.1f} GiB > "
                        f"{offer.host_ram_mib / 1024:.0f} GiB")
    offer_per_host = next(o.gpus_per_host for o in space.offers if o.gpu.id == plan.gpu
                          and (o.platform.id if o.platform else None) == plan.platform)
    if plan.num_hosts * offer_per_host < plan.num_gpus or cfg.tp > offer_per_host:
        problems.append("GPUs do not fit the hosts")
    return problems


def _plan_any_framework(request: PlanRequest, catalog: Catalog) -> PlanResult:
    """The best plan over the candidate frameworks of the workload, by the request's objective
    (cost, then time; or time, then cost), with a note naming the choice and the runners-up."""
    results = []
    for fid in auto_candidates(catalog, request.workload):
        try:
            results.append((fid, plan(request.model_copy(update={"framework": fid}), catalog)))
        except PlannerError:
            continue  # the framework runs none of the requested layouts
    found = [(fid, r) for fid, r in results if r.plan is not None]
    if not found:
        default = DEFAULT_FRAMEWORK[request.workload]
        result = plan(request.model_copy(update={"framework": default}), catalog)
        return replace(result, notes=(*result.notes, "framework auto: no candidate framework "
                                      f"({', '.join(f for f, _ in results)}) has a plan; the "
                                      f"default's ({default}) conflicts shown"))

    def key(item: tuple[str, PlanResult]) -> tuple[float, float]:
        p = item[1].plan
        return (p.time_hours, p.cost_usd) if request.objective == "time" else (p.cost_usd,
                                                                              p.time_hours)

    found.sort(key=key)
    best_id, best = found[0]
    others = ", ".join(f"{fid} ${r.plan.cost_usd:,.0f} / {r.plan.time_hours:,.1f} h"
                       for fid, r in found[1:4])
    best_of = "fastest" if request.objective == "time" else "cheapest"
    why = (f"framework auto: {best_id}, the {best_of} of {len(found)} candidate framework(s) "
           "with a plan" + (f" (next: {others})" if others else ""))
    return replace(best, notes=(*best.notes, why))


def plan(request: PlanRequest, catalog: Catalog | None = None) -> PlanResult:
    """The optimal plan for ``request``, re-checked, with the rules that bind; infeasible
    requests get their conflicting requirements and the smallest fixes. ``--framework auto``
    plans on every candidate framework (frameworks.auto_candidates) and keeps the best."""
    from planner.explain import binding_rules, conflicts, timed_conflicts

    if request.framework == "auto":
        return _plan_any_framework(request, catalog or load_catalog())
    if request.objective == "time" and request.budget_usd is None and request.num_gpus is None:
        raise PlannerError("--objective time needs --budget (or --num-gpus): without a limit "
                           "the fastest plan uses every GPU allowed")
    catalog = catalog or load_catalog()
    space = build_space(request, catalog)
    try:
        solved = solve_lexicographic(space, request.time_limit_s)
    except SolveTimeout:
        return PlanResult(status="unknown", plan=None, notes=(
            f"time limit {request.time_limit_s:g} s reached before any plan was found: no plan "
            "and no proof that none exists; raise --time-limit",))
    if solved is None:
        found = (timed_conflicts(space, catalog) if needs_timing(request)
                 else conflicts(space, catalog))
        notes = ("not offered: " + "; ".join(space.unoffered),) if space.unoffered else ()
        return PlanResult(status="infeasible", plan=None, conflicts=tuple(found), notes=notes)
    result = _checked(space, solved)
    notes = []
    if solved.status != "optimal":
        notes.append("time limit reached: best plan found, not proven optimal")
    if result.config.offload != "none" and request.offload == "auto":
        notes.append(_offload_note(request, catalog, result))
    return PlanResult(status=solved.status, plan=result,
                      binding=tuple(binding_rules(space, result)),
                      alternatives=tuple(alternatives(space, result)), notes=tuple(notes))


def _offload_note(request: PlanRequest, catalog: Catalog, best: Plan) -> str:
    """Why a plan offloads: what the offload costs in its step (PCIe copies hidden behind
    compute at the stack's assumed overlap, efficiency.OVERLAP pcie; no validation case
    measures it), and the best plan that keeps the states on the GPU."""
    t = best.throughput
    terms = getattr(t, "terms", None) or getattr(t, "phases", {})  # RL: the iteration's phases
    share = sum(v for k, v in terms.items() if "offload" in k or k == "cpu_optimizer") / \
        t.step_time_s
    overlap = eff.OVERLAP[t.stack]["pcie"]
    on_gpu = plan(request.model_copy(update={"offload": "none"}), catalog).plan
    if on_gpu is None:
        other = "no plan keeps the states on the GPU within the request"
    else:
        c = on_gpu.config
        other = (f"keeping them on the GPU the best plan is {on_gpu.num_gpus} x {on_gpu.gpu} "
                 f"({c.method}, checkpointing {c.checkpointing}, micro-batch "
                 f"{c.micro_batch_size}), ${on_gpu.cost_usd:,.0f}, {on_gpu.time_hours:,.1f} h "
                 f"against {best.time_hours:,.1f} h")
    return (f"offload {best.config.offload}: the freed GPU memory holds "
            f"{best.config.micro_batch_size} sequence(s) per micro-step with checkpointing "
            f"{best.config.checkpointing}; its host copies and CPU optimizer add "
            f"{share:.1%} to the step, with the PCIe copies assumed {overlap:.0%} hidden behind "
            f"compute (efficiency.OVERLAP; no validation case measures an offloaded run); "
            f"{other}")


def alternatives(space: PlanSpace, best: Plan) -> list[Plan]:
    """The best plan for each other method and on the two next-cheapest other GPU types, so
    the user sees the trade-offs (each solved on the same space, re-checked)."""
    out: list[Plan] = []
    limit = space.request.time_limit_s
    methods = sorted({s.method for s in space.strategies} - {best.config.method})
    for method in methods:
        found = _or_none(lambda m=method: solve_lexicographic(space, limit, methods={m}))
        if found is not None:
            out.append(_checked(space, found))
    others = [i for i, o in enumerate(space.offers) if o.gpu.id != best.gpu]
    for _ in range(2):
        found = _or_none(lambda o=others: solve_lexicographic(space, limit, offers=set(o)))
        if found is None:
            break
        plan_ = _checked(space, found)
        out.append(plan_)
        others = [i for i in others if space.offers[i].gpu.id != plan_.gpu]
    return out


def _or_none(solve: Callable[[], Solved | None]) -> Solved | None:
    """An optional solve (alternatives, further Pareto points): a time-out just ends it."""
    try:
        return solve()
    except SolveTimeout:
        return None


class PlanCheckError(RuntimeError):
    """A solver plan that the analytic models reject: a bug in the encoding, never bad input
    (the CLI reports it on one line with exit code 3)."""


RECHECK_TOLERANCE = 1e-6  # the solver's whole microseconds: limits hold to a millionth


def solver_agrees(space: PlanSpace, solved: Solved, plan: Plan) -> list[str]:
    """The solver's numbers against the plan the analytic models evaluate: its step time (when
    the model had one) and its cost (purchase in whole dollars, each price rounded; a rental's
    hourly rate). Returns the differences (none expected)."""
    v, offer = solved.values, space.offers[solved.offer]
    problems = []
    step_us = plan.throughput.step_time_s * 1e6
    if "step_time_us" in v and abs(v["step_time_us"] - step_us) > 0.5 + 1e-6 * step_us:
        problems.append(f"step time {step_us:,.0f} us, the solver's {v['step_time_us']:,} us")
    if space.request.pricing == "rent":
        hours = job_hours_at(v["step_time_us"], job_steps(space)) if "step_time_us" in v \
            else plan.time_hours
        want, unit = plan_usd(space, solved.offer, plan.num_gpus, hours), "rental"
    else:
        want, unit = offer.purchase_usd(plan.num_gpus), "purchase"
    if abs(plan.cost_usd - want) > 0.5 * (plan.num_gpus + plan.num_hosts) + 1e-6 * want:
        problems.append(f"{unit} ${plan.cost_usd:,.2f}, the solver's ${want:,.2f}")
    return problems


def _checked(space: PlanSpace, solved: Solved) -> Plan:
    result = make_plan(space, solved.offer, config_of(space, solved), solved.values["hosts"])
    problems = check_plan(space, result) + solver_agrees(space, solved, result)
    if problems:
        raise PlanCheckError("solver plan failed the analytic re-check: " + "; ".join(problems))
    return result


def pareto(request: PlanRequest, catalog: Catalog | None = None, *, max_points: int = 12
           ) -> list[Plan]:
    """Cost-vs-time Pareto-optimal plans by an epsilon-constraint sweep: the cheapest plan, then
    repeatedly the cheapest plan at least PARETO_STEP faster than the last one (each re-checked),
    until none is within the request's limits or ``max_points`` are found. Every point is
    non-dominated: no plan is both cheaper and faster by the step. A point whose tie-break
    chain the time limit stopped has ``proven_optimal`` False (its cost is still the optimum:
    the timed search is exact)."""
    space = build_space(request, catalog or load_catalog())
    allowed = list(range(len(space.offers)))
    points: list[Plan] = []
    deadline = request.max_hours
    while len(points) < max_points and space.rows:
        solved = _or_none(lambda d=deadline: _solve_timed(
            space, request.time_limit_s, allowed, space.rows, objective="cost", max_hours=d))
        if solved is None:
            break
        found = _checked(space, solved)
        if solved.status != "optimal":
            found = replace(found, proven_optimal=False)
        points.append(found)
        deadline = found.time_hours * (1 - PARETO_STEP)
    return points
