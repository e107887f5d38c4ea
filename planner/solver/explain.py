"""Why a plan is what it is, and why a request has none: each answer found by solving.

* Binding rules: a rule binds exactly when relaxing it gives a strictly better optimum, found by
  re-solving (purchases by cost: the cost stage with the rule's enforcement literal left out of
  the assumptions; timed requests: the limit or resource loosened one step). Slack alone never
  makes a rule binding; a rule with little slack that does not bind is "tight". The used / limit
  / slack figures come from the plan's analytic re-check, not from the solver's integers.
* Conflicts: the cost-stage model without objective and with every rule as an assumption gives
  an infeasible core; it is shrunk by deletion to a minimal one, and for each rule in it the
  smallest change that makes the request feasible is found by solving without that rule.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from planner.catalog.load import Catalog, load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.errors import PlannerError
from planner.models.bands import request_margin
from planner.solver.encoding import Encoding, build, cp_solver, hint_cheapest
from planner.solver.hardware import unoffered_text
from planner.solver.result import SLACK_TIGHT, Binding, Conflict, Plan
from planner.solver.rules import RULES, rule, usage_at
from planner.solver.search import job_hours_at, job_steps, needs_timing, plan_usd, timed_search
from planner.solver.space import PlanSpace, build_space
from planner.solver.stages import (
    Solved,
    SolveTimeout,
    config_of,
    make_plan,
    purchase_front,
    run_solver,
    solve_lexicographic,
)


def _solver() -> cp_model.CpSolver:
    return cp_solver(10)


def cost_stage(space: PlanSpace) -> Encoding | None:
    """The cost-stage model over the Pareto-minimal rows and the undominated offers."""
    rows = space.rows
    if not rows or not space.offers:
        return None
    return build(space, space.front, purchase_front(space, list(range(len(space.offers)))))


def _solve_without(enc: Encoding, dropped: set[str], objective) -> tuple[bool, int | None, dict]:
    """Solve with every rule but ``dropped`` as assumptions, minimizing ``objective``."""
    m = enc.model
    m.clear_assumptions()
    m.add_assumptions([lit for name, lit in enc.literal.items() if name not in dropped])
    if objective is None:
        m.clear_objective()
    else:
        m.minimize(objective)
    if objective is enc.var["cost_usd"]:
        hint_cheapest(enc, frozenset(dropped))
    else:
        m.clear_hints()
    s = _solver()
    code = run_solver(s, m, f"the explanation model without {sorted(dropped) or 'nothing'}")
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return False, None, {}
    values = {k: int(s.value(v)) for k, v in enc.var.items()}
    offer = enc.offers[next(i for i, x in enumerate(enc.offer) if s.value(x))]
    values["offer"] = offer
    return True, (int(round(s.objective_value)) if objective is not None else None), values


def binding_rules(space: PlanSpace, plan: Plan) -> list[Binding]:
    """Every rule at the plan with its slack. A rule binds exactly when relaxing it one step
    gives a strictly better optimum under the request's objective, found by re-solving both:
    purchases by cost drop the rule (cheaper?); timed requests (time objective, rental,
    deadline) loosen the budget or the deadline by RELAX_STEP, or a resource one step
    (_relaxed_space). A rule under SLACK_TIGHT slack that does not bind is only tight."""
    enc = None if needs_timing(space.request) else cost_stage(space)
    if enc is None:
        return [_rule(name, usage, _one_step(space, name) or _resource_step(space, plan, name))
                for name, usage in usage_at(space, plan).items()]
    _, base_cost, _ = _solve_without(enc, set(), enc.var["cost_usd"])
    out = []
    for name, usage in usage_at(space, plan).items():
        relaxed = None
        if name in enc.literal:
            ok, cost, values = _solve_without(enc, {name}, enc.var["cost_usd"])
            if ok and base_cost is not None and cost is not None and cost < base_cost:
                o = space.offers[values["offer"]]
                relaxed = (f"without it: ${cost:,} for {values['num_gpus']} x {o.gpu.id} "
                           f"({space.strategies[values['strategy']].method})")
                relaxed = _resource_step(space, plan, name) or relaxed
        out.append(_rule(name, usage, relaxed))
    return out


def _rule(name: str, usage: tuple[float, float, str], relaxed: str | None) -> Binding:
    """A rule's row: binding when its relaxation (found by solving) improves the plan."""
    used, limit, unit = usage
    slack = (limit - used) / limit if limit else 0.0
    return Binding(name, round(used, 3), round(limit, 3), unit, round(slack, 4),
                   relaxed is not None, relaxed,
                   tight=relaxed is None and slack < SLACK_TIGHT)


RELAX_STEP = 0.10  # "one step": a limit loosened by 10 %


def _relaxed_space(space: PlanSpace, plan: Plan, name: str) -> tuple[PlanSpace, str] | None:
    """The space with one resource rule loosened one step (the rule's own ``loosen``: the
    plan's GPU type with the next larger memory, hosts with twice the RAM, offers supplying
    twice the GPUs, twice --max-gpus)."""
    loosen = RULES[name].loosen if name in RULES else None
    return None if loosen is None else loosen(space, plan)


def _resource_step(space: PlanSpace, plan: Plan, name: str) -> str | None:
    """What the plan becomes with a resource rule (GPU memory, host RAM, GPU count) loosened one
    step, when that improves the objective (found by solving; None otherwise)."""
    relaxed = _relaxed_space(space, plan, name)
    if relaxed is None:
        return None
    trial, label = relaxed
    try:
        solved = solve_lexicographic(trial, space.request.time_limit_s)
    except SolveTimeout:
        return None
    if solved is None:
        return None
    better = make_plan(trial, solved.offer, config_of(trial, solved), hosts=solved.values["hosts"])
    if space.request.objective == "time":
        # the solver ranks whole microseconds of step time: less is no improvement
        if better.throughput.step_time_s < plan.throughput.step_time_s - 1e-6:
            return f"with {label}: {better.num_gpus} x {better.gpu}, {better.time_hours:,.2f} h"
        return None
    if better.cost_usd < plan.cost_usd * (1 - 1e-9):
        return (f"with {label}: {better.num_gpus} x {better.gpu} "
                f"({better.config.method}), ${better.cost_usd:,.0f}")
    return None


def _one_step(space: PlanSpace, name: str) -> str | None:
    """Timed requests: what the plan becomes with the budget or the deadline RELAX_STEP looser,
    when that improves the objective. Both optima come from the same exact search, so a plan
    that only differs by the rounding of its step time is no improvement (None)."""
    req = space.request
    if name == "budget" and req.budget_usd is not None:
        loose = {"budget_usd": req.budget_usd * (1 + RELAX_STEP)}
        label = f"budget ${loose['budget_usd']:,.0f}"
    elif name == "max_hours" and req.max_hours is not None:
        loose = {"max_hours": req.max_hours * (1 + RELAX_STEP)}
        label = f"max-hours {loose['max_hours']:,.3g}"
    else:
        return None
    offers = list(range(len(space.offers)))
    base = timed_search(space, offers, space.rows)
    found = timed_search(space, offers, space.rows, drop=frozenset(loose) & {"max_hours"},
                         **loose)
    if found is None or (base is not None and found[0] >= base[0] * (1 - 1e-9)):
        return None
    _, ties = found
    oi, row, t_us = min(ties, key=lambda t: (t[2], t[1].num_gpus))
    hours = job_hours_at(t_us, job_steps(space))
    gpu = space.offers[oi].gpu.id
    if req.objective == "time":
        return f"with {label}: {row.num_gpus} x {gpu}, {hours:,.2f} h"
    usd = plan_usd(space, oi, row.num_gpus, hours=hours)
    return f"with {label}: {row.num_gpus} x {gpu}, ${usd:,.0f}"


def _fix(space: PlanSpace, enc: Encoding, name: str, catalog: Catalog | None = None) -> str:
    """The smallest change that satisfies the request when ``name`` alone is given up."""
    dropped = {name}
    v = enc.var
    # a pin left open: the value of the cheapest plan (any feasible one would be arbitrary)
    target = {"budget": v["cost_usd"], "max_gpus": v["num_gpus"],
              "gpu_memory": v["gpu_need_mib"]}.get(
        name, v["cost_usd"] if name.startswith("pin:") else None)
    ok, best, values = _solve_without(enc, dropped, target)
    if not ok:
        return enc.rules[name].relax(space.request)
    if name == "budget":
        return f"budget >= ${best:,}"
    if name == "max_gpus":
        return f"max-gpus >= {best}"
    if name == "gpu_memory":
        gib = best / 1024 / (1 - request_margin(space.request))
        return f"a GPU with at least {gib:.1f} GiB"
    if name.startswith("pin:"):
        field = name.split(":", 1)[1]
        leave = f"leave --{field.replace('_', '-')} open ({values[field]} works)"
        cat = catalog or load_catalog()
        kept = [f for f in (_batch_keeping_pin(space, field, cat),
                            _nearest_pin(space, field, cat)) if f]
        return " or ".join([*kept, leave])
    return enc.rules[name].relax(space.request)


def _batch_keeping_pin(space: PlanSpace, field: str, catalog: Catalog) -> str | None:
    """The smallest change in the user's terms that keeps a pinned GPU count or accumulation:
    the global batch nearest the requested one that the pins divide evenly (the next multiple
    of num-gpus x grad-accum down and up, nearer first), tried by solving. When that batch has
    a plan only with more money, the budget it needs comes with it."""
    req = space.request
    if field not in ("num_gpus", "grad_accum") or getattr(req, field) is None:
        return None
    n, g0 = (req.num_gpus or 1) * (req.grad_accum or 1), req.global_batch_size
    tried = sorted({g for g in (g0 - g0 % n, g0 - g0 % n + n) if 0 < g != g0},
                   key=lambda g: (abs(g - g0), g))
    keeps = f"keeps --{field.replace('_', '-')} {getattr(req, field)}"
    cat = catalog
    for g in tried:
        if _plan_of(req, {"global_batch_size": g}, cat) is not None:
            return f"--global-batch {g} ({keeps})"
    if req.budget_usd is None:
        return None
    for g in tried:
        found = _plan_of(req, {"global_batch_size": g, "budget_usd": None, "objective": "cost"},
                         cat)
        if found is not None:
            trial, best = found
            usd = make_plan(trial, best.offer, config_of(trial, best), hosts=best.values["hosts"])
            return f"--global-batch {g} with budget >= ${usd.cost_usd:,.0f} ({keeps})"
    return None


PIN_TRIES = 6  # new values tried for a pinned count (each a solve of ~0.1-0.5 s)


def _nearest_pin(space: PlanSpace, field: str, catalog: Catalog) -> str | None:
    """A new value for a pinned GPU count or accumulation, the rest of the request kept: the
    values nearest the pinned one (nearer first, then smaller) that divide the global batch
    per GPU, up to PIN_TRIES of them tried by solving."""
    req = space.request
    if field not in ("num_gpus", "grad_accum") or getattr(req, field) is None:
        return None
    pinned = getattr(req, field)
    other = (req.grad_accum if field == "num_gpus" else req.num_gpus) or 1
    per = req.global_batch_size // other if req.global_batch_size % other == 0 else 0
    top = req.max_gpus if field == "num_gpus" else per
    near = sorted((k for k in range(1, top + 1) if k != pinned and per % k == 0),
                  key=lambda k: (abs(k - pinned), k))
    flag = f"--{field.replace('_', '-')}"
    for k in near[:PIN_TRIES]:
        if _plan_of(req, {field: k}, catalog) is not None:
            return f"{flag} {k}"
    return None


STRONGER_SHARDING = ("zero2", "zero3", "fsdp")  # each holds less per GPU than the one before


def memory_relaxations(req: PlanRequest) -> list[tuple[str, dict[str, object]]]:
    """Single changes of the request that lower per-GPU memory, in the user's terms: first a
    new value for something the user pinned (the rest kept: a smaller micro-batch, full
    checkpointing, stronger sharding, a lighter method, a chunked loss), then a pin dropped or a
    limit raised,
    then a shorter sequence. Each is tried by solving (memory_fixes), never assumed to work;
    the micro-batches are tried largest first, so the first that works is the smallest change."""
    kept: list[tuple[str, dict[str, object]]] = []
    if req.micro_batch_size not in (None, 1):
        kept += [(f"--micro-batch {m}", {"micro_batch_size": m})
                 for m in range(req.micro_batch_size - 1, 0, -1)
                 if req.global_batch_size % m == 0]
    if req.checkpointing not in ("auto", "full"):
        kept.append(("--checkpointing full", {"checkpointing": "full"}))
    if req.sharding is not None:
        later = STRONGER_SHARDING[STRONGER_SHARDING.index(req.sharding) + 1:] \
            if req.sharding in STRONGER_SHARDING else STRONGER_SHARDING
        kept += [(f"--sharding {z}", {"sharding": z}) for z in later]
    if req.is_rl and req.offload_idle is False:
        kept.append(("--offload-idle", {"offload_idle": True}))
    if req.method not in ("auto", "qlora"):
        kept += [(f"--method {m}", {"method": m}) for m in ("lora", "qlora") if m != req.method]
    if not req.fixed.get("chunked_loss"):
        kept.append(("--chunked-loss", {"fixed": {**req.fixed, "chunked_loss": True}}))
    dropped: list[tuple[str, dict[str, object]]] = []
    if req.offload not in ("auto",):
        dropped.append(("--offload auto", {"offload": "auto"}))
    if req.sharding is not None:
        dropped.append(("leave --sharding open", {"sharding": None}))
    if req.is_rl and req.gpu_memory_utilization is not None:
        dropped.append(("leave --gpu-memory-utilization open", {"gpu_memory_utilization": None}))
    if req.num_gpus is None and req.max_gpus < 1024:
        dropped.append((f"--max-gpus {req.max_gpus * 2}", {"max_gpus": req.max_gpus * 2}))
    if req.gpus:
        dropped.append(("allow every GPU type (drop --gpus)", {"gpus": ()}))
    if req.is_rl and req.response_len and req.response_len > 1:
        r = req.response_len // 2
        change: dict[str, object] = {"response_len": r, "seq_len": None}
        if req.mean_response_len and req.mean_response_len > r:  # the mean stays below the cap
            change["mean_response_len"] = r
        dropped.append((f"--response-len {r}", change))
    elif not req.is_rl and req.seq_len > 256:
        dropped.append((f"--seq-len {req.seq_len // 2}", {"seq_len": req.seq_len // 2}))
    return kept + dropped


def memory_fixes(space: PlanSpace, catalog: Catalog | None, *, limit: int = 3) -> list[str]:
    """The first ``limit`` single changes (memory_relaxations' order) under which the request
    has a plan, each found by rebuilding the space (memory tables) and solving it: a change
    that fits the memory but breaks the budget is no fix. One micro-batch at most (the
    largest that works) and one GPU list; dropping --gpus names the type that then plans."""
    cat = catalog or load_catalog()
    found: list[str] = []
    for wording, change in memory_relaxations(space.request):
        if wording.startswith("--micro-batch") and any(f.startswith("--micro-batch")
                                                       for f in found):
            continue
        solved = _plan_of(space.request, change, cat)
        if solved is None:
            continue
        trial, best = solved
        if "gpus" in change:
            wording = (f"--gpus {trial.offers[best.offer].gpu.id} (instead of "
                       f"{','.join(space.request.gpus)})")
        found.append(wording)
        if len(found) == limit:
            break
    return found


def _plan_of(req: PlanRequest, change: dict[str, object], catalog: Catalog
             ) -> tuple[PlanSpace, Solved] | None:
    """The request with ``change`` and its optimum, or None when it has no plan (or is not a
    valid request, or the time limit stops the solve)."""
    data = req.model_dump() | change
    if data.get("seq_len") is None:
        data.pop("seq_len", None)
    try:
        trial = build_space(PlanRequest.model_validate(data), catalog)
        best = solve_lexicographic(trial, req.time_limit_s) if trial.offers else None
    except (PlannerError, SolveTimeout, ValueError):
        return None
    return None if best is None else (trial, best)


def conflicts(space: PlanSpace, catalog: Catalog | None = None) -> list[Conflict]:
    """A minimal set of the request's rules that cannot hold together, each with its fix."""
    if not space.offers:
        fix = (f"name GPUs that --platform {space.request.platform} takes (--gpus), or another "
               "platform" if space.request.platform else
               "allow GPU types with a price (--gpus), or add prices with --catalog")
        return [Conflict("gpus", "no GPU type can be offered: " + unoffered_text(space.unoffered),
                         fix)]
    enc = cost_stage(space)
    if enc is None:
        fixes = memory_fixes(space, catalog)
        return [Conflict("gpu_memory", "no layout of the allowed choices fits even the largest "
                         "allowed GPU", " or ".join(fixes) if fixes else
                         "no single change tried (micro-batch, checkpointing, sharding, offload, "
                         "method, more GPUs, other GPU types, shorter sequences) gives a plan "
                         "within the request's other limits")]
    core = set(enc.literal)
    ok, _, _ = _solve_without(enc, set(), None)
    if ok:
        return []
    for name in sorted(enc.literal):  # deletion: keep only the rules the conflict needs
        trial = core - {name}
        if not _solve_without(enc, set(enc.literal) - trial, None)[0]:
            core = trial
    out = []
    for name in sorted(core):
        others = sorted(core - {name})
        detail = (f"{_describe(space, name)} conflicts with " + ", ".join(others) if others else
                  f"{_describe(space, name)} cannot be met by any allowed layout (global batch "
                  f"{space.request.global_batch_size}, tp {list(space.tps)}, pp "
                  f"{list(space.pps)})")
        fix = _fix(space, enc, name, catalog)
        if name == "budget" and "gpu_memory" in core:
            fix = _with_memory_change(space, fix, catalog or load_catalog())
        out.append(Conflict(name, detail, fix))
    return out


def _with_memory_change(space: PlanSpace, fix: str, catalog: Catalog) -> str:
    """A budget that memory holds up: ``fix`` (the budget the request needs as it is) and,
    when one of memory_relaxations' changes makes the cheapest plan cheaper, the budget with
    that change (each solved with the budget left open, never assumed; changes that keep the
    job as asked before a shorter sequence)."""
    req = space.request
    if req.objective != "cost":
        return fix
    best: tuple[tuple[bool, int], str] | None = None
    for wording, change in memory_relaxations(req):
        if "gpus" in change:  # other GPU types: the budget fix already prices every type
            continue
        solved = _plan_of(req, {**change, "budget_usd": None}, catalog)
        if solved is None:
            continue
        key = ("seq_len" in change or "response_len" in change, solved[1].values["cost_usd"])
        if best is None or key < best[0]:  # the job as asked first, then the cheapest
            best = (key, wording)
    if best is None or f"${best[0][1]:,}" in fix:
        return fix
    return f"{fix}, or budget >= ${best[0][1]:,} with {best[1]}"


def _describe(space: PlanSpace, name: str) -> str:
    """The rule in the user's words (rules.Rule.describe)."""
    return rule(name).describe(space.request)


def timed_conflicts(space: PlanSpace, catalog: Catalog | None = None) -> list[Conflict]:
    """Conflicts of requests whose limits need step times (rental budget, --max-hours,
    --min-tokens-per-s): each such limit that, given up alone, makes the request feasible is in
    conflict; its fix is the best value reachable without it (found by solving)."""
    req = space.request
    rows = space.rows
    offers = list(range(len(space.offers)))
    limits = {"budget": req.budget_usd, "max_hours": req.max_hours,
              "min_tokens_per_s": req.min_tokens_per_s}
    out = []
    steps = job_steps(space)
    tokens_step = req.sequences_per_step * req.tokens_per_sequence
    for name, value in limits.items():
        if value is None:
            continue
        found = timed_search(space, offers, rows, drop=frozenset({name}),
                             objective="cost" if name == "budget" else "time")
        if found is None:
            continue
        _, ties = found
        oi, row, t_us = ties[0]
        hours = job_hours_at(t_us, steps)
        if name == "budget":
            fix = f"budget >= ${plan_usd(space, oi, row.num_gpus, hours=hours):,.0f}"
        elif name == "max_hours":
            fix = f"max-hours >= {hours:,.2f}"
        else:
            fix = f"min-tokens-per-s <= {tokens_step / (t_us / 1e6):,.0f}"
        out.append(Conflict(name, f"{_describe(space, name)} cannot hold together with the "
                            "other limits", fix))
    if not out:
        out = conflicts(space, catalog)
    return out
