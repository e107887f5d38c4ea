"""The rules of a plan as objects: each rule's knowledge in one place (issue 16).

A rule is what a request or its hardware limits: GPU memory, GPUs per host, host RAM, the GPU
count, an offer's supply, the budget, the deadline, the minimum throughput, and each pin. Its
object holds:

* ``encode(enc)``: the CP-SAT constraints under its enforcement literal (``Encoding.rule``);
  None for the limits that need step times (the exact search, search.timed_search, holds them);
* ``usage(space, plan, offer)``: what the plan uses of it and the limit, from the analytic
  models (None where it does not apply);
* ``loosen(space, plan)``: the space with the rule one step looser, for "would relaxing it give
  a better plan?" (None where no such step exists);
* ``describe(req)`` and ``relax(req)``: its name and how to relax it, in the user's words.

explain.py asks these objects; encoding.build encodes them in RULE_ORDER.
"""

from __future__ import annotations

import dataclasses as dc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from planner.catalog.offers import DEFAULT_MAX_GPUS_PER_OFFER
from planner.catalog.plan_request import PlanRequest
from planner.models.bands import request_margin
from planner.models.memory import GIB, usable_capacity, usable_mib
from planner.solver.hardware import Offer
from planner.solver.result import Plan
from planner.solver.rows import row_shards
from planner.solver.space import PlanSpace, host_sizes


class Encoding(Protocol):
    """What a rule's ``encode`` uses of encoding.Encoding (which imports this module)."""

    space: PlanSpace
    rows: Any
    offers: Any
    offer: list[Any]
    model: Any
    var: dict[str, Any]

    def rule(self, name: str) -> Any:
        """Register rule ``name`` and return its enforcement literal."""

    def row_sum(self, values: Any) -> Any:
        """The sum over the rows of the chosen row's value in ``values``."""

    def offer_sum(self, values: Any) -> Any:
        """The sum over the offers of the chosen offer's value in ``values``."""


Usage = tuple[float, float]  # (used, limit) at the plan
RECHECK_TOLERANCE = 1e-6  # the solver's whole microseconds: time limits hold to a millionth


@dataclass(frozen=True)
class Need:
    """What candidates need of an offer, as scalars (one row) or numpy columns (many rows):
    MiB per GPU, tp, host RAM MiB per host at the offer's GPUs per host, GPUs, and the hybrid
    shard group (0: none)."""

    gpu_mib: Any
    tp: Any
    host_mib: Any
    num_gpus: Any
    dp_shard: Any = 0


@dataclass(frozen=True)
class Rule:
    """One rule of a plan: its description, relaxation, usage, encoding and mask."""
    name: str
    unit: str  # of the usage shown at the plan
    describe: Callable[[PlanRequest], str]
    relax: Callable[[PlanRequest], str]
    usage: Callable[[PlanSpace, Plan, Offer], Usage | None]
    encode: Callable[[Encoding], None] | None = None
    loosen: Callable[[PlanSpace, Plan], tuple[PlanSpace, str] | None] | None = None
    # which candidates an offer holds under this rule (elementwise on Need's columns); the rules
    # of one (offer, row) pair only (FIT_RULES)
    mask: Callable[[Offer, Need], Any] | None = None
    at_least: bool = False  # the usage must reach the limit (a minimum), not stay below it
    tolerance: float = 0.0  # the re-check's relative slack (the search's integer units)


def chosen(enc: Encoding) -> list[tuple[Offer, Any]]:
    """(offer, its literal) for the offers of an encoding."""
    return [(enc.space.offers[i], x) for i, x in zip(enc.offers, enc.offer, strict=True)]


# ----- GPU count --------------------------------------------------------------------------------

def _encode_max_gpus(enc: Encoding) -> None:
    lit = enc.rule("max_gpus")
    enc.model.add(enc.var["num_gpus"] <= enc.space.request.max_gpus).only_enforce_if(lit)


def _loosen_max_gpus(space: PlanSpace, plan: Plan) -> tuple[PlanSpace, str] | None:
    req = space.request
    if req.num_gpus is not None:
        return None
    loose = req.model_copy(update={"max_gpus": 2 * req.max_gpus})
    return dc.replace(space, request=loose), f"max-gpus {2 * req.max_gpus}"


MAX_GPUS = Rule(
    "max_gpus", "GPUs", describe=lambda req: f"max-gpus {req.max_gpus}",
    relax=lambda req: f"raise --max-gpus above {req.max_gpus}",
    usage=lambda space, plan, offer: (float(plan.num_gpus), float(space.request.max_gpus)),
    encode=_encode_max_gpus, loosen=_loosen_max_gpus)


# ----- an offer's supply (rent) -----------------------------------------------------------------

def _encode_supply(enc: Encoding) -> None:
    """Rent: an offer supplies at most its max_gpus GPUs (--max-gpus-per-offer, whole
    instances)."""
    capped = [(o, x) for o, x in chosen(enc) if o.max_gpus is not None]
    if not capped:
        return
    lit = enc.rule("max_gpus_per_offer")
    for o, x in capped:
        enc.model.add(enc.var["num_gpus"] <= o.max_gpus).only_enforce_if([lit, x])


def _loosen_supply(space: PlanSpace, plan: Plan) -> tuple[PlanSpace, str]:
    offers = tuple(dc.replace(o, max_gpus=2 * o.max_gpus) if o.max_gpus else o
                   for o in space.offers)
    return space.with_offers(offers), "offers supplying twice the GPUs"


def _supply_cap(req: PlanRequest) -> int:
    return req.max_gpus_per_offer or DEFAULT_MAX_GPUS_PER_OFFER


MAX_GPUS_PER_OFFER = Rule(
    "max_gpus_per_offer", "GPUs",
    describe=lambda req: f"max-gpus-per-offer {_supply_cap(req)}",
    relax=lambda req: f"raise --max-gpus-per-offer above {_supply_cap(req)}",
    usage=lambda space, plan, offer: None if offer.max_gpus is None else (
        float(plan.num_gpus), float(offer.max_gpus)),
    encode=_encode_supply, loosen=_loosen_supply,
    mask=lambda offer, need: True if offer.max_gpus is None else
    need.num_gpus <= offer.max_gpus)


# ----- GPU memory -------------------------------------------------------------------------------

def _encode_gpu_memory(enc: Encoding) -> None:
    """Per-GPU memory of the worse phase <= capacity x (1 - margin) of the chosen GPU (MiB)."""
    m = enc.model
    lit = enc.rule("gpu_memory")
    needs = [r.gpu_need_mib for r in enc.rows]
    need = m.new_int_var(min(needs), max(needs), "gpu_need_mib")
    m.add(need == enc.row_sum(needs))
    caps = [enc.space.offers[i].capacity_mib for i in enc.offers]
    capacity = m.new_int_var(min(caps), max(caps), "capacity_mib")
    m.add(capacity == enc.offer_sum(caps))
    m.add(need <= capacity).only_enforce_if(lit)
    enc.var.update(gpu_need_mib=need, capacity_mib=capacity)


def _loosen_gpu_memory(space: PlanSpace, plan: Plan) -> tuple[PlanSpace, str] | None:
    """The plan's GPU type with the next larger memory among the offered types."""
    mine = next(o.gpu.memory_gib for o in space.offers if o.gpu.id == plan.gpu)
    larger = sorted({o.gpu.memory_gib for o in space.offers if o.gpu.memory_gib > mine})
    if not larger:
        return None
    cap = usable_mib(larger[0], request_margin(space.request))
    offers = tuple(dc.replace(o, capacity_mib=cap) if o.gpu.id == plan.gpu else o
                   for o in space.offers)
    return space.with_offers(offers), f"{plan.gpu} with {larger[0]:g} GiB"


GPU_MEMORY = Rule(
    "gpu_memory", "GiB per GPU", describe=lambda req: "GPU memory",
    relax=lambda req: ("a GPU with more memory, more GPUs (sharding), LoRA/QLoRA, "
                       "checkpointing, a smaller micro-batch or a shorter sequence"),
    usage=lambda space, plan, offer: (
        plan.memory.device / GIB,
        usable_capacity(plan.memory.capacity,
                        request_margin(space.request, plan.config.method)) / GIB),
    encode=_encode_gpu_memory, loosen=_loosen_gpu_memory,
    mask=lambda offer, need: need.gpu_mib <= offer.capacity_mib)


# ----- GPUs per host ----------------------------------------------------------------------------

def _encode_hosts(enc: Encoding) -> None:
    """Hosts hold the GPUs (hosts x GPUs per host >= GPUs); tp stays inside one host, and a
    hybrid shard group is one host's GPUs (frameworks.HYBRID_SHARD_LAUNCHES)."""
    m, v = enc.model, enc.var
    lit = enc.rule("gpus_per_host")
    shards = set(row_shards(enc.space.strategies, enc.rows).tolist()) - {0}
    for o, x in chosen(enc):
        m.add(v["hosts"] * o.gpus_per_host >= v["num_gpus"]).only_enforce_if(x)
        m.add(v["tp"] <= o.gpus_per_host).only_enforce_if([lit, x])
        for s in shards - {o.gpus_per_host}:
            m.add(v["dp_shard"] != s).only_enforce_if([lit, x])


def _host_usage(space: PlanSpace, plan: Plan, offer: Offer) -> Usage:
    """tp, or the hybrid shard group, against the offer's GPUs per host."""
    return (float(max(plan.config.tp, plan.config.dp_shard or 0)), float(offer.gpus_per_host))


GPUS_PER_HOST = Rule(
    "gpus_per_host", "GPUs (tp or hybrid group)", describe=lambda req: "GPUs per host",
    relax=lambda req: "a platform with more GPU slots, or less tp",
    usage=_host_usage, encode=_encode_hosts,
    mask=lambda offer, need: (need.tp <= offer.gpus_per_host) & (
        (need.dp_shard == 0) | (need.dp_shard == offer.gpus_per_host)))


# ----- host RAM ---------------------------------------------------------------------------------

def _encode_host_ram(enc: Encoding) -> None:
    """Host RAM of one host (its ranks' offloaded states and processes) <= the platform's or
    instance's RAM, for the offers whose RAM is known (a per-GPU catalog rate: not known)."""
    sp, m = enc.space, enc.model
    if all(o.host_ram_mib is None for o, _ in chosen(enc)):
        return
    lit = enc.rule("host_ram")
    for j, size in enumerate(host_sizes(sp)):
        need = enc.row_sum([r.host_need_mib[j] for r in enc.rows])
        for o, x in chosen(enc):
            if o.gpus_per_host == size and o.host_ram_mib is not None:
                m.add(need <= o.host_ram_mib).only_enforce_if([lit, x])


def _loosen_host_ram(space: PlanSpace, plan: Plan) -> tuple[PlanSpace, str]:
    offers = tuple(dc.replace(o, host_ram_mib=2 * o.host_ram_mib)
                   if o.host_ram_mib is not None else o for o in space.offers)
    return space.with_offers(offers), "hosts with twice the RAM"


HOST_RAM = Rule(
    "host_ram", "GiB per host", describe=lambda req: "host RAM",
    relax=lambda req: "a host with more RAM, no CPU offload, or more GPUs to shard the states",
    usage=lambda space, plan, offer: None if offer.host_ram_mib is None else (
        plan.memory.host_ram / GIB, offer.host_ram_mib / 1024),
    encode=_encode_host_ram, loosen=_loosen_host_ram,
    mask=lambda offer, need: True if offer.host_ram_mib is None else
    need.host_mib <= offer.host_ram_mib)


# ----- budget, deadline, throughput -------------------------------------------------------------

def _encode_budget(enc: Encoding) -> None:
    """A purchase's budget on the cost variable (whole dollars); a rental's budget is on the
    job's cost, which needs step times (the exact search holds it)."""
    req = enc.space.request
    if req.budget_usd is not None and req.pricing == "buy":
        lit = enc.rule("budget")
        enc.model.add(enc.var["cost_usd"] <= int(req.budget_usd)).only_enforce_if(lit)


BUDGET = Rule(
    "budget", "USD", tolerance=RECHECK_TOLERANCE,
    describe=lambda req: f"budget ${req.budget_usd:,.0f}" if req.budget_usd else "budget",
    relax=lambda req: f"raise --budget above ${req.budget_usd:,.0f}",
    usage=lambda space, plan, offer: None if space.request.budget_usd is None else (
        plan.cost_usd, space.request.budget_usd),
    encode=_encode_budget)

MAX_HOURS = Rule(
    "max_hours", "hours", tolerance=RECHECK_TOLERANCE,
    describe=lambda req: f"max-hours {req.max_hours}",
    relax=lambda req: f"raise --max-hours above {req.max_hours}",
    usage=lambda space, plan, offer: None if space.request.max_hours is None else (
        plan.time_hours, space.request.max_hours))

MIN_TOKENS_PER_S = Rule(
    "min_tokens_per_s", "tokens/s", describe=lambda req: f"min-tokens-per-s "
                                                         f"{req.min_tokens_per_s}",
    relax=lambda req: f"lower --min-tokens-per-s below {req.min_tokens_per_s}",
    usage=lambda space, plan, offer: None if space.request.min_tokens_per_s is None else (
        plan.throughput.tokens_per_s, space.request.min_tokens_per_s),
    at_least=True, tolerance=RECHECK_TOLERANCE)


# ----- pins -------------------------------------------------------------------------------------

def pin_rule(field: str) -> Rule:
    """The rule of a value the user fixed (--num-gpus, --grad-accum, ...): named pin:FIELD."""
    flag = field.replace("_", "-")
    return Rule(f"pin:{field}", "", describe=lambda req: f"{flag} {getattr(req, field)}",
                relax=lambda req: f"leave --{flag} open",
                usage=lambda space, plan, offer: None)


# The rules in the order the CP-SAT model adds them (the cost variable comes between HOST_RAM
# and BUDGET: encoding.build), and then the time limits of the exact search.
RULE_ORDER = (MAX_GPUS, MAX_GPUS_PER_OFFER, GPU_MEMORY, GPUS_PER_HOST, HOST_RAM, BUDGET,
              MAX_HOURS, MIN_TOKENS_PER_S)
RULES = {r.name: r for r in RULE_ORDER}


# the rules of one (offer, candidate) pair: an offer holds a candidate when each mask holds
FIT_RULES = (GPU_MEMORY, GPUS_PER_HOST, HOST_RAM, MAX_GPUS_PER_OFFER)


def fit_masks(offer: Offer, need: Need, names: Any = None) -> dict[str, Any]:
    """{rule: which candidates ``offer`` holds under it} for the FIT_RULES (or those named)."""
    return {r.name: r.mask(offer, need) for r in FIT_RULES if names is None or r.name in names}


def holds(offer: Offer, need: Need) -> Any:
    """``offer`` holds the candidates under every fit rule (elementwise)."""
    ok: Any = True
    for m in fit_masks(offer, need).values():
        ok = ok & m
    return ok


def violations(space: PlanSpace, plan: Plan) -> list[str]:
    """Every rule whose usage at the plan breaks its limit (beyond the rule's re-check
    tolerance): the analytic re-check of stages.check_plan, rule by rule."""
    offer = space.offer_of(plan)
    out = []
    for r in RULE_ORDER:
        used = r.usage(space, plan, offer)
        if used is None:
            continue
        value, limit = used
        broken = value < limit * (1 - r.tolerance) if r.at_least else \
            value > limit * (1 + r.tolerance)
        if broken:
            out.append(f"{r.describe(space.request)}: {value:,.4g} {r.unit} "
                       f"{'<' if r.at_least else '>'} {limit:,.4g}")
    return out


def rule(name: str) -> Rule:
    """The rule named ``name`` (a pin: pin:FIELD)."""
    return pin_rule(name.split(":", 1)[1]) if name.startswith("pin:") else RULES[name]


def usage_at(space: PlanSpace, plan: Plan) -> dict[str, tuple[float, float, str]]:
    """(used, limit, unit) of every rule that applies at the plan, from the analytic models,
    in the order the constraint table shows them."""
    offer = space.offer_of(plan)
    out = {}
    for r in SHOWN_ORDER:
        used = r.usage(space, plan, offer)
        if used is not None:
            out[r.name] = (*used, r.unit)
    return out


# the constraint table's order at a plan
SHOWN_ORDER = (GPU_MEMORY, GPUS_PER_HOST, MAX_GPUS, MAX_GPUS_PER_OFFER, BUDGET, HOST_RAM,
               MAX_HOURS)
