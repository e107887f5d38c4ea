"""plan(): build the space, solve lexicographically (stages.py), extract, re-check with the
analytic models; pareto(): the cost-vs-time front.

The tie-break chain makes the answer unique and deterministic (one worker, fixed seed):
cost -> step time (throughput model) -> fewer GPUs -> fuller-fidelity strategy (full > LoRA >
DoRA > QLoRA, no offload, no recomputation: the domains' preference order, PlanRequest.domains) ->
catalog order of the offer -> smaller tp, pp -> larger micro-batch -> fewer hosts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from planner.catalog.frameworks import DEFAULT_FRAMEWORK, auto_candidates, resolve
from planner.catalog.hybrid import hybrid_relatives
from planner.catalog.load import Catalog, load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.catalog.specs import gpus_per_host
from planner.errors import PlannerError
from planner.models import efficiency as eff
from planner.models.memory import GIB
from planner.models.network import host_span_notes, resolve_links
from planner.models.rltime import workload_throughput
from planner.models.workloads import estimate_memory
from planner.solver.explain import binding_rules, conflicts, timed_conflicts
from planner.solver.hardware import unoffered_text
from planner.solver.result import Plan, PlanResult
from planner.solver.search import (
    job_hours_at,
    job_steps,
    needs_timing,
    plan_usd,
)
from planner.solver.space import PlanSpace, build_space
from planner.solver.stages import (
    Solved,
    SolveTimeout,
    check_plan,
    config_of,
    make_plan,
    solve_lexicographic,
    solve_timed,
)
from planner.solver.steptime import MAX_STEP_US

PARETO_STEP = 0.01  # each Pareto point is at least 1 % faster than the previous one


@dataclass(frozen=True)
class _Solved:
    """A request's optimum before its explanations: the space, the solver's answer (None:
    infeasible) and the re-checked plan."""

    space: PlanSpace
    solved: Solved | None
    plan: Plan | None


def _solve(request: PlanRequest, catalog: Catalog) -> _Solved | PlanResult:
    """The optimum, re-checked; a PlanResult when the time limit stops the search first."""
    space = build_space(request, catalog)
    try:
        solved = solve_lexicographic(space, request.time_limit_s)
    except SolveTimeout:
        return PlanResult(status="unknown", plan=None, notes=(
            f"time limit {request.time_limit_s:g} s reached before any plan was found: no plan "
            "and no proof that none exists; raise --time-limit",))
    return _Solved(space, solved, None if solved is None else _checked(space, solved))


def _explained(request: PlanRequest, catalog: Catalog, found: _Solved | PlanResult
               ) -> PlanResult:
    """The answer with what the output shows: the rules that bind, the alternatives and the
    notes of a plan; the conflicts and smallest fixes of an infeasible request."""
    if isinstance(found, PlanResult):
        return found
    space, solved, result = found.space, found.solved, found.plan
    if solved is None or result is None:
        conflicting = (timed_conflicts(space, catalog) if needs_timing(request)
                       else conflicts(space, catalog))
        notes = ("not offered: " + unoffered_text(space.unoffered),) if space.unoffered else ()
        return PlanResult(status="infeasible", plan=None, conflicts=tuple(conflicting),
                          notes=notes)
    notes = []
    if solved.status != "optimal":
        notes.append("time limit reached: best plan found, not proven optimal")
    if result.config.offload != "none" and request.offload == "auto":
        notes.append(_offload_note(request, space, result))
    elif request.offload == "auto" and not needs_timing(request):
        notes += _offload_declined_note(space, result)
    if result.config.dp_shard:
        notes.append(_hybrid_note(space, result))
    elif result.num_hosts > 1 and not request.is_rl:
        notes += _hybrid_elsewhere_note(request, catalog, space, result)
    if result.num_hosts > 1:  # which traffic crosses hosts, and at what bandwidth
        offer = space.offer_of(result)
        notes += host_span_notes(result.config, resolve_links(
            offer.gpu, platform=offer.links_platform, gpus_per_node=offer.gpus_per_host))
    flag = getattr(result.throughput, "low_mfu", None)  # training estimates carry it
    if flag:  # issue 18: a plan below the MFU floor is flagged, naming what the GPUs wait on
        notes.append(flag)
    if result.config.pp > 1 and result.num_hosts > 1:
        notes.append(_pipeline_note(request, catalog, result))
    if result.num_hosts > 1 and request.pricing == "buy":
        notes += _one_host_note(request, catalog, result)
    return PlanResult(status=solved.status, plan=result,
                      binding=tuple(binding_rules(space, result)),
                      alternatives=tuple(alternatives(space, result)), notes=tuple(notes))


def _plan_any_framework(request: PlanRequest, catalog: Catalog) -> PlanResult:
    """The best plan over the candidate frameworks of the workload, by the request's objective
    (cost, then time; or time, then cost), with a note naming the choice and the runners-up.
    Only the chosen framework's plan is explained (binding rules, alternatives, notes), and
    with no plan anywhere only the default framework's conflicts: the output shows no other."""
    results: dict[str, _Solved | PlanResult] = {}
    for fid in auto_candidates(catalog, request.workload):
        try:
            results[fid] = _solve(request.model_copy(update={"framework": fid}), catalog)
        except PlannerError:
            continue  # the framework runs none of the requested layouts
    found = [(fid, r) for fid, r in results.items()
             if isinstance(r, _Solved) and r.plan is not None]
    if not found:
        default = DEFAULT_FRAMEWORK[request.workload]
        asked = request.model_copy(update={"framework": default})
        result = _explained(asked, catalog, results.get(default) or _solve(asked, catalog))
        return replace(result, notes=(*result.notes, "framework auto: no candidate framework "
                                      f"({', '.join(results)}) has a plan; the "
                                      f"default's ({default}) conflicts shown"))

    def key(item: tuple[str, _Solved]) -> tuple[float, float]:
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
    result = _explained(request.model_copy(update={"framework": best_id}), catalog, best)
    return replace(result, notes=(*result.notes, why))


def plan(request: PlanRequest, catalog: Catalog | None = None) -> PlanResult:
    """The optimal plan for ``request``, re-checked, with the rules that bind; infeasible
    requests get their conflicting requirements and the smallest fixes. ``--framework auto``
    plans on every candidate framework (frameworks.auto_candidates) and keeps the best."""
    if request.objective == "time" and request.budget_usd is None and request.num_gpus is None:
        raise PlannerError("--objective time needs --budget (or --num-gpus): without a limit "
                           "the fastest plan uses every GPU allowed")
    catalog = catalog or load_catalog()
    if request.framework == "auto":
        return _plan_any_framework(request, catalog)
    return _explained(request, catalog, _solve(request, catalog))


def offload_basis(space: PlanSpace, other: Plan) -> str:
    """What an offloaded plan's timing assumed and what checks it: the PCIe rate per GPU and
    the share hidden behind compute (efficiency.OVERLAP pcie), the CPU optimizer's bytes per
    parameter and host-memory rate (network.resolve_links), and the published offloaded runs
    of the same offload kind (efficiency.OFFLOAD_CASES; all of them where none is)."""
    offer = space.offer_of(other)
    links = resolve_links(offer.gpu, platform=offer.links_platform,
                          gpus_per_node=offer.gpus_per_host)
    overlap = eff.OVERLAP[other.throughput.stack]["pcie"]
    kind = other.config.offload
    cases = [f"{cid} ({what})" for cid, (k, what) in eff.OFFLOAD_CASES.items() if k == kind] \
        or [f"{cid} ({what})" for cid, (_k, what) in eff.OFFLOAD_CASES.items()]
    return (f"PCIe copies at {links.host_link_gbps:.1f} GB/s per GPU, assumed {overlap:.0%} "
            f"hidden behind compute (efficiency.OVERLAP), CPU optimizer "
            f"{eff.CPU_ADAM_BYTES_PER_PARAM:g} B per parameter at {links.host_memory_gbps:.0f} "
            f"GB/s of host memory per GPU; checked, not fitted, on {'; '.join(cases)}")


def _offload_note(request: PlanRequest, space: PlanSpace, best: Plan) -> str:
    """Why a plan offloads: what the offload costs in its step, the rates it was timed at and
    the published runs that check them (offload_basis), and the best plan that keeps the
    states on the GPU."""
    t = best.throughput
    terms = getattr(t, "terms", None) or getattr(t, "phases", {})  # RL: the iteration's phases
    share = sum(v for k, v in terms.items() if "offload" in k or k == "cpu_optimizer") / \
        t.step_time_s
    # the optimum of the same request with --offload none: its explanations are not shown, so
    # not computed, and its space is this one's strategies that keep the states on the GPU
    solved = _or_none(lambda: solve_lexicographic(space, request.time_limit_s,
                                                  offloads={"none"}))
    on_gpu = None if solved is None else _checked(space, solved)
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
            f"{share:.1%} to the step, timed with {offload_basis(space, best)}; {other}")


def _hybrid_note(space: PlanSpace, best: Plan) -> str:
    """Why a plan shards hybrid: the same layout sharded over every rank, timed and sized by
    the same models on the same hosts."""
    offer, c = space.offer_of(best), best.config
    full = c.model_copy(update={"dp_shard": None})
    tput = workload_throughput(space.model, offer.gpu, full, platform=offer.links_platform,
                               stack=space.request.stack, gpus_per_node=offer.gpus_per_host)
    mem = estimate_memory(space.model, offer.gpu, full, gpus_per_node=offer.gpus_per_host)
    return (f"hybrid sharding: the states are sharded over each host's {c.dp_shard} GPUs and "
            f"replicated over the {c.dp // c.dp_shard} hosts, so only a gradient all-reduce "
            f"crosses the network; sharded over all {c.dp} GPUs the same layout runs "
            f"{tput.tokens_per_s:,.0f} tokens/s against {best.throughput.tokens_per_s:,.0f} "
            f"(every layer's weights gathered over the network in each forward and backward) "
            f"in {mem.device / GIB:.1f} GiB per GPU against {best.memory.device / GIB:.1f}")


def _hybrid_elsewhere_note(request: PlanRequest, catalog: Catalog, space: PlanSpace,
                           best: Plan) -> list[str]:
    """A plan over hosts on a framework whose launch writes no hybrid shard group, when a
    profile built on it does and plans better with it (hybrid_relatives; the same request on
    that framework): the other plan and what it beats."""
    profile = resolve(catalog, space.request.framework)
    for other_profile in hybrid_relatives(catalog, profile, request.workload):
        other = _best_plan(request.model_copy(update={"framework": other_profile.id}), catalog)
        if other is None or not other.config.dp_shard or \
                _better_by(request, other, best) in ("no slower", "no worse"):
            continue
        return [f"hybrid sharding: {profile.id}'s launch writes no hybrid shard group; on "
                f"{other_profile.id} (--framework {other_profile.id}) FSDP shards within each "
                f"host and replicates across them: {other.num_gpus} x {other.gpu} "
                f"({other.sharding_label}), {other.throughput.tokens_per_s:,.0f} tokens/s, "
                f"{other.time_hours:,.1f} h, ${other.cost_usd:,.0f} against "
                f"{best.throughput.tokens_per_s:,.0f} tokens/s, {best.time_hours:,.1f} h, "
                f"${best.cost_usd:,.0f}"]
    return []


def _offload_declined_note(space: PlanSpace, best: Plan) -> list[str]:
    """A plan as cheap that offloads model states to the CPU and is faster, when there is one:
    the tie-break prefers no offload (stages.tie_break_stages), and the note says what that
    preference costs and the rates and runs the offloaded timing rests on (offload_basis)."""
    solved = _or_none(lambda: solve_lexicographic(space, space.request.time_limit_s,
                                                  offload_first=False))
    if solved is None:
        return []
    other = _checked(space, solved)
    if other.config.offload == "none" or other.time_hours >= best.time_hours:
        return []
    c = other.config
    return [f"kept on the GPU: a plan as cheap offloads {c.offload} to the CPU and is faster "
            f"({other.num_gpus} x {other.gpu}, {c.method}, checkpointing {c.checkpointing}, "
            f"micro-batch {c.micro_batch_size}: {other.time_hours:,.1f} h against "
            f"{best.time_hours:,.1f} h), but its timing rests on {offload_basis(space, other)}; "
            f"--offload {c.offload} plans it"]


PIPELINE_TRIES = 8  # smaller GPU counts tried for a pinned count that no flat layout splits


def _pipeline_note(request: PlanRequest, catalog: Catalog, best: Plan) -> str:
    """Why a plan pipelines across hosts. Only tp must stay inside a host (encoding's
    gpus_per_host rule); pp and dp may span hosts, and the objective chooses between them with
    the inter-host transfers priced by the throughput model (a tie goes to the smaller pp).
    The note names the best plan without pipelining: the same request with --pp 1, or, when a
    pinned GPU count cannot be split without stages, the largest smaller count that can."""
    c = best.config
    flat = _best_plan(request.model_copy(update={"pp": 1}), catalog)
    fewer = ""
    if flat is None and request.num_gpus is not None:
        for k in range(request.num_gpus - 1, max(0, request.num_gpus - 1 - PIPELINE_TRIES), -1):
            flat = _best_plan(request.model_copy(update={"pp": 1, "num_gpus": k}), catalog)
            if flat is not None:
                fewer = (f"; {request.num_gpus} GPUs have no plan without pipelining "
                         f"within the request, {k} is the most that have one")
                break
    head = (f"pipeline: pp={c.pp} spans {best.num_hosts} hosts, its stages passing "
            "activations between hosts (tp stays inside a host; pp and dp may cross hosts, "
            "the objective picks, a tie goes to the smaller pp)")
    if flat is None:
        return head + "; no plan without pipelining fits the request"
    owned = request.pricing == "owned"
    cost = "" if owned else f"${flat.cost_usd:,.0f}, "
    return (f"{head}; it is {_better_by(request, best, flat)} than the best plan without "
            f"pipelining: {flat.num_gpus} x {flat.gpu} (dp={flat.config.dp} tp="
            f"{flat.config.tp}), {cost}{flat.time_hours:,.1f} h against "
            f"{best.time_hours:,.1f} h{fewer}")


def _one_host_note(request: PlanRequest, catalog: Catalog, best: Plan) -> list[str]:
    """A purchase split over hosts while a priced platform of the catalog holds all its GPUs
    (issue 19 item 5, hosts sized to the GPU count): the best plan on such one host, the same
    request with the GPU type and count pinned, its price and time against the plan's."""
    gpu = catalog.gpu(best.gpu)
    roomy = {k: p for k, p in catalog.platforms.items()
             if gpu.form_factor in p.form_factors and p.price_usd is not None
             and gpus_per_host(gpu, p) >= best.num_gpus}
    if not roomy:
        return []
    hold = f"{', '.join(roomy)} hold{'s' if len(roomy) == 1 else ''} all {best.num_gpus} GPUs"
    one = _best_plan(request.model_copy(update={"num_gpus": best.num_gpus, "gpus": (best.gpu,)}),
                     replace(catalog, platforms=roomy))
    if one is None:
        return [f"one host: {hold}, but no plan on one fits the request"]
    return [f"one host: {hold}; the best plan on one is {one.num_gpus} x {one.gpu} in 1 x "
            f"{one.platform}, ${one.cost_usd:,.0f}, {one.time_hours:,.1f} h against "
            f"${best.cost_usd:,.0f}, {best.time_hours:,.1f} h on {best.num_hosts} hosts"]


def _better_by(request: PlanRequest, best: Plan, other: Plan) -> str:
    """How ``best`` beats ``other`` under the request's objective (owned hardware costs
    nothing: time decides), in words."""
    if request.objective == "time" or request.pricing == "owned":
        return "faster" if best.time_hours < other.time_hours else "no slower"
    if best.cost_usd < other.cost_usd:
        return "cheaper"
    return "as cheap as and faster" if best.time_hours < other.time_hours else "no worse"


def _best_plan(request: PlanRequest, catalog: Catalog) -> Plan | None:
    """The optimum of a request, re-checked, without its explanations (None: no plan)."""
    try:
        space = build_space(request, catalog)
        solved = _or_none(lambda: solve_lexicographic(space, request.time_limit_s))
    except PlannerError:
        return None
    return None if solved is None else _checked(space, solved)


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


def solver_agrees(space: PlanSpace, solved: Solved, plan: Plan) -> list[str]:
    """The solver's numbers against the plan the analytic models evaluate: its step time (when
    the model had one) and its cost (purchase in whole dollars, each price rounded; a rental's
    hourly rate). Returns the differences (none expected)."""
    v, offer = solved.values, space.offers[solved.offer]
    problems = []
    step_us = plan.throughput.step_time_s * 1e6
    # A chain stopped before proving its stage (status feasible) may stand on a pair whose
    # time the stage took from its lower bound (stages._times evaluates only the pairs that can
    # reach the best); the plan's own time is the models', re-checked below.
    # a step at steptime.MAX_STEP_US is one the solver capped (its time is the models')
    timed = solved.status == "optimal" and "step_time_us" in v and not (
        v["step_time_us"] == MAX_STEP_US <= step_us)
    if timed and abs(v["step_time_us"] - step_us) > 0.5 + 1e-6 * step_us:
        problems.append(f"step time {step_us:,.0f} us, the solver's {v['step_time_us']:,} us")
    if space.request.pricing == "rent":
        hours = job_hours_at(v["step_time_us"], job_steps(space)) if timed else plan.time_hours
        want, unit = plan_usd(space, solved.offer, plan.num_gpus, hours=hours), "rental"
    else:
        want, unit = offer.purchase_usd(plan.num_gpus), "purchase"
    if abs(plan.cost_usd - want) > 0.5 * (plan.num_gpus + plan.num_hosts) + 1e-6 * want:
        problems.append(f"{unit} ${plan.cost_usd:,.2f}, the solver's ${want:,.2f}")
    return problems


def _checked(space: PlanSpace, solved: Solved) -> Plan:
    result = make_plan(space, solved.offer, config_of(space, solved), hosts=solved.values["hosts"])
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
        solved = _or_none(lambda d=deadline: solve_timed(
            space, request.time_limit_s, allowed, rows=space.rows, objective="cost", max_hours=d,
            offload_first=False))
        if solved is None:
            break
        found = _checked(space, solved)
        if solved.status != "optimal":
            found = replace(found, proven_optimal=False)
        points.append(found)
        deadline = found.time_hours * (1 - PARETO_STEP)
    return points
