"""plan(): build the space, solve lexicographically, extract, re-check with the analytic models.

The tie-break chain makes the answer unique and deterministic (one worker, fixed seed):
cost -> step time (throughput model) -> fewer GPUs -> fuller-fidelity strategy (full > LoRA >
DoRA > QLoRA, no offload, no recomputation: the order of ``space.Strategy`` enumeration) ->
catalog order of the offer -> smaller tp, pp -> larger micro-batch -> fewer hosts.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from planner.catalog import Catalog, load_catalog
from planner.cost import Job, define_job, job_cost
from planner.encoding import Encoding, add_step_time, build
from planner.errors import PlannerError
from planner.memory import GIB, estimate_memory
from planner.request import PlanRequest, TrainConfig, validate_config
from planner.result import Plan, PlanResult
from planner.space import (
    PlanSpace,
    Row,
    build_space,
    pareto_rows,
    step_time_bounds,
    step_time_us,
)
from planner.throughput import estimate_throughput

SEED = 0


@dataclass(frozen=True)
class Solved:
    """Raw values of one solve."""

    status: str  # optimal | feasible
    values: dict[str, int]
    offer: int
    strategy: int


def _solver(time_limit: float) -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.random_seed = SEED
    s.parameters.max_time_in_seconds = time_limit
    return s


def tie_break_stages(enc: Encoding) -> list[tuple[str, cp_model.LinearExpr]]:
    """(name, expression to minimize) after the objective, in order."""
    v = enc.var
    return [
        ("time", v["step_time_us"]),
        ("num_gpus", v["num_gpus"]),
        ("strategy", v["strategy"]),
        ("offer", v["offer_idx"]),
        ("tp", v["tp"]),
        ("pp", v["pp"]),
        ("micro_batch", -v["micro_batch"]),
        ("hosts", v["hosts"]),
    ]


def _status(code: int) -> str | None:
    return {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible"}.get(code)


def _min_hosts_cost(space: PlanSpace, oi: int, n: int) -> int:
    o = space.offers[oi]
    return round(o.gpu_price_usd) * n + round(o.host_price_usd) * -(-n // o.gpus_per_host)


def _times(space: PlanSpace, offers: list[int], rows: list[Row]) -> dict[tuple[int, int], int]:
    """Step time of every (offer, row) pair that fits that offer's GPU; others get a large
    sentinel (the memory rule excludes them anyway)."""
    out = {}
    for k, oi in enumerate(offers):
        cap = space.offers[oi].capacity_mib
        for r, row in enumerate(rows):
            out[(k, r)] = step_time_us(space, oi, row) if row.gpu_need_mib <= cap else 10**11
    return out


def fits_offer(space: PlanSpace, oi: int) -> Callable[[Row], bool]:
    """A test of a row's needs against one offer: GPU memory, tp in a host, host RAM, budget
    (GPUs + hosts), the accumulation pin."""
    o, req = space.offers[oi], space.request
    j = space.host_sizes.index(o.gpus_per_host)
    affordable = {n for n in {r.num_gpus for r in space.rows}
                  if req.budget_usd is None or _min_hosts_cost(space, oi, n) <= req.budget_usd}

    def fits(row: Row) -> bool:
        return (row.gpu_need_mib <= o.capacity_mib and row.tp <= o.gpus_per_host
                and (o.host_ram_mib is None or row.host_need_mib[j] <= o.host_ram_mib)
                and row.num_gpus in affordable
                and (req.grad_accum is None or row.grad_accum == req.grad_accum))

    return fits


def fastest_pairs(space: PlanSpace, allowed: list[int], rows: list[Row]
                  ) -> tuple[int, list[tuple[int, Row]]] | None:
    """(best step time in us, every (offer, row) reaching it): best-first over the feasible
    pairs in order of a lower bound on step time, evaluating the throughput model only while
    the bound can still beat the best time found (exact: the bound never exceeds the time)."""
    bound = step_time_bounds(space)
    by_need = sorted(rows, key=lambda r: r.gpu_need_mib)
    needs = [r.gpu_need_mib for r in by_need]
    scored = []
    for oi in allowed:
        fits = fits_offer(space, oi)
        below = by_need[:bisect.bisect_right(needs, space.offers[oi].capacity_mib)]
        scored += [(bound(oi, r), oi, r) for r in below if fits(r)]
    if not scored:
        return None
    scored.sort(key=lambda t: t[0])
    best, exact = None, []
    for lower, oi, r in scored:
        if best is not None and lower > best:
            break
        t = step_time_us(space, oi, r)
        exact.append((t, oi, r))
        best = t if best is None else min(best, t)
    return best, [(oi, r) for t, oi, r in exact if t == best]


def solve_lexicographic(
    space: PlanSpace, time_limit: float, *, methods: set[str] | None = None,
    offers: set[int] | None = None,
) -> Solved | None:
    """Cost first on the Pareto-minimal rows (enough to decide cost), then the tie-break chain
    on every row and offer that can reach that cost. ``methods`` / ``offers`` restrict the
    space (for alternatives). None = infeasible; a stage stopped by the time limit returns the
    best plan so far with status 'feasible'."""
    rows, front = space.rows, space.front
    if methods is not None:
        rows = [r for r in rows if space.strategies[r.strategy].method in methods]
        front = pareto_rows(rows)
    allowed = sorted(offers) if offers is not None else list(range(len(space.offers)))
    if not rows or not allowed:
        return None
    if space.request.objective == "time":
        return _solve_time(space, time_limit, allowed, rows)
    solver = _solver(time_limit)
    first = build(space, front, allowed)
    first.model.add_assumptions(list(first.literal.values()))
    first.model.minimize(first.var["cost_usd"])
    status = _status(solver.solve(first.model))
    if status is None:
        return None
    best_cost = int(round(solver.objective_value))
    reach = {(oi, n) for oi in allowed for n in {r.num_gpus for r in rows}
             if _min_hosts_cost(space, oi, n) == best_cost}
    reaching = sorted({oi for oi, _ in reach})
    gpu_counts = {n for _, n in reach}
    second = [r for r in rows if r.num_gpus in gpu_counts]
    enc = build(space, second, reaching)
    add_step_time(enc, _times(space, reaching, second))
    enc.model.add(enc.var["cost_usd"] == best_cost)
    return _chain(enc, solver, status, tie_break_stages(enc))


def _solve_time(space: PlanSpace, time_limit: float, allowed: list[int], rows: list[Row]
                ) -> Solved | None:
    """Objective time: the fastest pairs found best-first, then the chain (cost, GPUs, ...) by
    CP-SAT over those pairs."""
    fastest = fastest_pairs(space, allowed, rows)
    if fastest is None:
        return None
    best, ties = fastest
    tied_rows = list(dict.fromkeys(r for _, r in ties))
    tied_offers = sorted({oi for oi, _ in ties})
    enc = build(space, tied_rows, tied_offers)
    times = {(k, j): (best if (oi, r) in ties else 10**11)
             for k, oi in enumerate(tied_offers) for j, r in enumerate(tied_rows)}
    add_step_time(enc, times)
    enc.model.add(enc.var["step_time_us"] == best)
    stages = [("cost", enc.var["cost_usd"])] + tie_break_stages(enc)[1:]
    return _chain(enc, _solver(time_limit), "optimal", stages)


def _chain(enc: Encoding, solver: cp_model.CpSolver, status: str,
           stages: list[tuple[str, cp_model.LinearExpr]]) -> Solved | None:
    """Minimize each stage in turn, fixing the optimum of the previous ones."""
    m = enc.model
    m.add_assumptions(list(enc.literal.values()))
    found: Solved | None = None
    for _name, expr in stages:
        m.minimize(expr)
        code = solver.solve(m)
        stage = _status(code)
        if stage is None:
            return found
        values = {name: int(solver.value(var)) for name, var in enc.var.items()}
        offer = enc.offers[next(i for i, x in enumerate(enc.offer) if solver.value(x))]
        found = Solved("optimal" if status == stage == "optimal" else "feasible", values, offer,
                       values["strategy"])
        if stage != "optimal":
            return found
        m.add(expr == int(round(solver.objective_value)))
    return found


def config_of(space: PlanSpace, solved: Solved) -> TrainConfig:
    v = solved.values
    strategy = space.strategies[solved.strategy]
    return space.base.model_copy(update={
        **strategy.config_fields(),
        "num_gpus": v["num_gpus"], "tp": v["tp"], "pp": v["pp"],
        "micro_batch_size": v["micro_batch"], "grad_accum": v["grad_accum"],
    })


def request_job(req: PlanRequest) -> Job:
    return define_job(tokens=req.tokens, epochs=req.epochs, dataset_tokens=req.dataset_tokens,
                      steps=req.steps, global_batch=req.global_batch_size, seq_len=req.seq_len)


def make_plan(space: PlanSpace, offer_idx: int, cfg: TrainConfig, hosts: int) -> Plan:
    """Evaluate one candidate with the pure models: memory, throughput, job time and cost."""
    req, offer = space.request, space.offers[offer_idx]
    est = estimate_memory(space.model, offer.gpu, cfg, gpus_per_node=offer.gpus_per_host)
    tput = estimate_throughput(space.model, offer.gpu, cfg, platform=offer.platform,
                               stack=req.stack, gpus_per_node=offer.gpus_per_host)
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
    if plan.memory.device > limit:
        problems.append(f"memory {plan.memory.device / GIB:.2f} GiB > {limit / GIB:.2f} GiB")
    if cfg.global_batch_size != req.global_batch_size:
        problems.append(f"global batch {cfg.global_batch_size} != {req.global_batch_size}")
    if req.budget_usd is not None and plan.cost_usd > req.budget_usd:
        problems.append(f"cost ${plan.cost_usd:,.0f} > budget ${req.budget_usd:,.0f}")
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


def plan(request: PlanRequest, catalog: Catalog | None = None) -> PlanResult:
    """The optimal plan for ``request``, re-checked, with the rules that bind; infeasible
    requests get their conflicting requirements and the smallest fixes."""
    from planner.explain import binding_rules, conflicts

    if request.pricing == "rent":
        raise PlannerError(
            "planner plan supports --pricing buy so far; for rental, compare candidates with "
            "'planner check --pricing rent'"
        )
    if request.objective == "time" and request.budget_usd is None and request.num_gpus is None:
        raise PlannerError("--objective time needs --budget (or --num-gpus): without a limit "
                           "the fastest plan uses every GPU allowed")
    space = build_space(request, catalog or load_catalog())
    solved = solve_lexicographic(space, request.time_limit_s)
    if solved is None:
        return PlanResult(status="infeasible", plan=None, conflicts=tuple(conflicts(space)),
                          notes=tuple(f"not offered: {u}" for u in space.unoffered))
    result = _checked(space, solved)
    notes = []
    if solved.status != "optimal":
        notes.append("time limit reached: best plan found, not proven optimal")
    return PlanResult(status=solved.status, plan=result,
                      binding=tuple(binding_rules(space, result)),
                      alternatives=tuple(alternatives(space, result)), notes=tuple(notes))


def alternatives(space: PlanSpace, best: Plan) -> list[Plan]:
    """The best plan for each other method and on the two next-cheapest other GPU types, so
    the user sees the trade-offs (each solved on the same space, re-checked)."""
    out: list[Plan] = []
    methods = sorted({s.method for s in space.strategies} - {best.config.method})
    for method in methods:
        found = solve_lexicographic(space, space.request.time_limit_s, methods={method})
        if found is not None:
            out.append(_checked(space, found))
    others = [i for i, o in enumerate(space.offers) if o.gpu.id != best.gpu]
    for _ in range(2):
        found = solve_lexicographic(space, space.request.time_limit_s, offers=set(others))
        if found is None:
            break
        plan_ = _checked(space, found)
        out.append(plan_)
        others = [i for i in others if space.offers[i].gpu.id != plan_.gpu]
    return out


def _checked(space: PlanSpace, solved: Solved) -> Plan:
    result = make_plan(space, solved.offer, config_of(space, solved), solved.values["hosts"])
    problems = check_plan(space, result)
    if problems:
        raise AssertionError("solver plan failed the analytic re-check: " + "; ".join(problems))
    return result
