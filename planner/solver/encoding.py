"""The only place that builds the CP-SAT model: decisions, named rules, objectives.

Every business rule is added by one ``_add_<rule>`` function and registered with a name, an
enforcement literal (so that explanations can switch it off or use it as an assumption), a unit
and a hint on how to relax it. Coefficients come from ``space`` (read off the analytic models);
nothing here re-derives physics.

Formulation, chosen by measurement (benchmarks/README.md): the decision is one offer (GPU type
in a host platform) and one candidate row (strategy, tp, pp, dp, micro-batch; space.Row), each a
one-hot vector. Every per-row number (GPUs, tp, GPU and host memory) is then a linear sum over
the row literals, and every product with a per-offer constant (cost, hosts, capacities) a
linear constraint enforced by the offer literal. Three earlier forms that kept tp, pp, dp and
micro-batch as integer variables with element tables, products and ceil divisions were 10-100x
slower than exhaustive enumeration; this one, on the rows that are Pareto-minimal in their
needs, proves the cost optimum of the full catalog in tens of milliseconds.

Units (DESIGN.md section 6): memory in MiB (requirements rounded up, capacities down), money in
whole dollars.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from ortools.sat.python import cp_model

from planner.solver.rows import Row, row_shards
from planner.solver.rules import (
    BUDGET,
    GPU_MEMORY,
    GPUS_PER_HOST,
    HOST_RAM,
    MAX_GPUS,
    MAX_GPUS_PER_OFFER,
    Need,
    Rule,
    chosen,
    fit_masks,
    rule,
)
from planner.solver.rules import FIT_RULES as RULE_FITS
from planner.solver.space import PlanSpace, host_sizes, pins
from planner.solver.steptime import NO_TIME

SEED = 0


def cp_solver(time_limit: float) -> cp_model.CpSolver:
    """A single-worker CP-SAT solver with the fixed seed and ``time_limit`` seconds."""
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




@dataclass
class Encoding:
    """The CP-SAT model of one request over a list of candidate rows."""

    space: PlanSpace
    rows: Sequence[Row]
    offers: Sequence[int]  # indices into space.offers that this model may choose
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    var: dict[str, cp_model.IntVar] = field(default_factory=dict)
    offer: list[cp_model.IntVar] = field(default_factory=list)  # one-hot over ``offers``
    row: list[cp_model.IntVar] = field(default_factory=list)  # one-hot over ``rows``
    rules: dict[str, Rule] = field(default_factory=dict)  # the rules of this model, by name
    literal: dict[str, cp_model.IntVar] = field(default_factory=dict)
    max_hosts: int = 1  # the hosts variable's upper bound
    fit_checks: list | None = None  # _fit_checks, once per model

    def rule(self, name: str) -> cp_model.IntVar:
        """Register the rule ``name`` (rules.rule) and return its enforcement literal."""
        lit = self.model.new_bool_var(f"rule:{name}")
        self.rules[name] = rule(name)
        self.literal[name] = lit
        return lit

    def row_sum(self, values: Sequence[int]) -> cp_model.LinearExpr:
        """The sum over the rows of the chosen row's value in ``values``."""
        return cp_model.LinearExpr.weighted_sum(self.row, [int(v) for v in values])

    def offer_sum(self, values: Sequence[int]) -> cp_model.LinearExpr:
        """The sum over the offers of the chosen offer's value in ``values``."""
        return cp_model.LinearExpr.weighted_sum(self.offer, [int(v) for v in values])


def _one_hot(m: cp_model.CpModel, n: int, name: str) -> list[cp_model.IntVar]:
    xs = [m.new_bool_var(f"{name}[{i}]") for i in range(n)]
    m.add_exactly_one(xs)
    return xs


def build(space: PlanSpace, rows: Sequence[Row], offers: Sequence[int] | None = None, *,
          every_subset: bool = True) -> Encoding:
    """Decision variables over ``rows`` x ``offers`` and every rule; objectives are set by
    ``solve``. ``every_subset`` False: the implied per-offer bounds only for every fit rule
    on (_add_offer_bounds), for models solved with all rules kept."""
    offers = list(range(len(space.offers))) if offers is None else list(offers)
    enc = Encoding(space, rows, offers)
    m = enc.model
    enc.offer = _one_hot(m, len(offers), "offer")
    enc.row = _one_hot(m, len(rows), "row")
    v = enc.var
    for name in ("num_gpus", "tp", "pp", "dp", "micro_batch", "grad_accum", "strategy"):
        values = [getattr(r, name) for r in rows]
        v[name] = m.new_int_var(min(values), max(values), name)
        m.add(v[name] == enc.row_sum(values))
    shards = row_shards(space.strategies, rows)  # the hybrid group (rules.GPUS_PER_HOST)
    v["dp_shard"] = m.new_int_var(int(shards.min(initial=0)), int(shards.max(initial=0)),
                                  "dp_shard")
    m.add(v["dp_shard"] == enc.row_sum(shards))
    offloaded = [offloads(space, r) for r in rows]  # a tie-break stage (stages.py)
    v["offloaded"] = m.new_int_var(min(offloaded), max(offloaded), "offloaded")
    m.add(v["offloaded"] == enc.row_sum(offloaded))
    v["offer_idx"] = m.new_int_var(min(offers), max(offers), "offer_idx")
    m.add(v["offer_idx"] == enc.offer_sum(offers))
    # No plan needs more hosts than some offer needs for the most GPUs of a row.
    most = max((r.num_gpus for r in rows), default=1)
    enc.max_hosts = max((space.offers[i].hosts(most) for i in offers), default=1)
    v["hosts"] = m.new_int_var(1, enc.max_hosts, "hosts")
    for r in (MAX_GPUS, MAX_GPUS_PER_OFFER, GPU_MEMORY, GPUS_PER_HOST, HOST_RAM):
        r.encode(enc)
    _add_cost(enc)  # the cost variable, which the budget rule limits
    BUDGET.encode(enc)
    _add_offer_bounds(enc, every_subset)
    _add_pins(enc)
    return enc


def offloads(space: PlanSpace, row: Row) -> int:
    """1 when the row's strategy offloads model states to the CPU, else 0."""
    return int(space.strategies[row.strategy].offload != "none")


def _add_cost(enc: Encoding) -> None:
    """The cost variable: purchase, GPUs x price + hosts x host price (whole dollars; the budget
    rule limits it); rental, the hourly rate (milli-dollars per hour), which orders plans of
    equal job time by cost (the rental budget is on the job's cost: search.timed_search)."""
    m, v = enc.model, enc.var
    gpus = [r.num_gpus for r in enc.rows]
    ends = [_cost(enc, o, n) for o, _ in chosen(enc) for n in (min(gpus), max(gpus))]
    cost = m.new_int_var(min(ends), max(ends), "cost_usd")  # monotone in the GPU count
    for o, x in chosen(enc):
        price, host_price = _prices(enc, o)
        m.add(cost == price * v["num_gpus"] + host_price * v["hosts"]).only_enforce_if(x)
    v["cost_usd"] = cost


def _prices(enc: Encoding, o) -> tuple[int, int]:
    """(per GPU, per host) in the cost variable's unit: whole dollars (buy) or milli-dollars
    per hour (rent: per instance, or per GPU at a per-GPU rate)."""
    if enc.space.request.pricing == "rent":
        return o.hourly_milli_usd()
    return round(o.gpu_price_usd), round(o.host_price_usd)


def _cost(enc: Encoding, o, num_gpus):
    """The cost variable's value for ``num_gpus`` GPUs of offer ``o`` (as _add_cost constrains
    it; elementwise on numpy arrays)."""
    price, host_price = _prices(enc, o)
    return price * num_gpus + host_price * o.hosts(num_gpus)


def _add_offer_bounds(enc: Encoding, every_subset: bool = True) -> None:
    """Implied constraints (redundant, no rule of their own): with the GPU-memory, tp-in-host
    and host-RAM rules on, an offer can only take rows that fit it, so its GPU count and cost
    are at least those of the smallest such row; an offer no row fits is excluded. One such
    bound per non-empty subset of those rules, enforced by their literals, so that the re-solves
    of the explanations (a rule switched off) keep a bound too. They give the search each
    offer's cost bound at once. Measured (benchmarks/scale.py catalog, 70B cost stage over 41
    offers x 249 rows): 0.085 s -> 0.034 s, same optimum. A model solved with every rule on
    needs only the bound with all of them (``every_subset`` False: 7B on $3,000, 1-1.5 ms
    less per solve)."""
    m, v = enc.model, enc.var
    gpus = np.array([r.num_gpus for r in enc.rows])
    names = [k for k in FIT_RULES if k in enc.literal]
    subsets = [c for k in range(1, len(names) + 1) for c in combinations(names, k)
               if every_subset or k == len(names)]
    for o, x, checks in _fit_checks(enc):
        for subset in subsets:
            fits = np.logical_and.reduce([checks[k] for k in subset])
            on = [x, *(enc.literal[k] for k in subset)]
            if not fits.any():
                m.add_bool_or([lit.Not() for lit in on])
                continue
            n = int(gpus[fits].min())
            m.add(v["num_gpus"] >= n).only_enforce_if(on)
            m.add(v["cost_usd"] >= _cost(enc, o, n)).only_enforce_if(on)


# rules of one (offer, row) pair (rules.FIT_RULES)
FIT_RULES = tuple(r.name for r in RULE_FITS)


def _fit_checks(enc: Encoding) -> list[tuple[object, cp_model.IntVar, dict[str, np.ndarray]]]:
    """Per offer of the model: (offer, its literal, {rule: numpy mask of the rows that satisfy
    it}) for the FIT_RULES the model has (computed once per model)."""
    if enc.fit_checks is None:
        gpus = np.array([r.num_gpus for r in enc.rows])
        need = np.array([r.gpu_need_mib for r in enc.rows])
        tp = np.array([r.tp for r in enc.rows])
        host = np.array([r.host_need_mib for r in enc.rows]).reshape(len(enc.rows), -1)
        sizes = host_sizes(enc.space)
        shards = row_shards(enc.space.strategies, enc.rows)
        ones = np.ones(len(enc.rows), dtype=bool)
        enc.fit_checks = []
        for o, x in chosen(enc):
            need_o = Need(need, tp, host[:, sizes.index(o.gpus_per_host)], gpus, shards)
            names = [n for n in FIT_RULES if n in ("gpu_memory", "gpus_per_host")
                     or n in enc.literal]
            checks = {k: ones & m for k, m in fit_masks(o, need_o, names).items()}
            enc.fit_checks.append((o, x, checks))
    return enc.fit_checks


def hint_cheapest(enc: Encoding, dropped: frozenset[str] = frozenset()) -> None:
    """Hint a cost-minimizing solve with the cheapest (offer, row) pair under the FIT_RULES not
    ``dropped`` (numpy, below a millisecond). CP-SAT's hint search takes it as its first
    solution, so the search is left with proving the bound. The budget and pins are not
    checked: a hint that breaks one only starts the search elsewhere; the optimum found does
    not depend on the hint. Replaces earlier hints of the model. Measured with probing off
    (encoding.cp_solver): the 70B cost stage 36 ms -> 4 ms, same optimum."""
    m = enc.model
    m.clear_hints()
    gpus = np.array([r.num_gpus for r in enc.rows])
    best = None
    for k, (o, _x, checks) in enumerate(_fit_checks(enc)):
        fits = np.logical_and.reduce([checks[n] for n in checks if n not in dropped]
                                     + [np.ones(len(gpus), dtype=bool)])
        idx = np.flatnonzero(fits)
        if not len(idx):
            continue
        cost = _cost(enc, o, gpus[idx])
        j = int(np.argmin(cost))
        if best is None or cost[j] < best[0]:
            best = (int(cost[j]), k, int(idx[j]))
    if best is None:
        return
    _, k, j = best
    for i, x in enumerate(enc.offer):
        m.add_hint(x, i == k)
    for i, x in enumerate(enc.row):
        m.add_hint(x, i == j)
    m.add_hint(enc.var["hosts"], enc.space.offers[enc.offers[k]].hosts(enc.rows[j].num_gpus))


def add_step_time(enc: Encoding, times: dict[tuple[int, int], int]) -> None:
    """step_time_us of the chosen (offer, row): times[(offer position, row position)], linear in
    the row literals under each offer's literal."""
    m = enc.model
    real = [v for v in times.values() if v < NO_TIME] or [0]
    # the real bounds (an objective weight times a looser domain could overflow int64): pairs
    # at NO_TIME (breaking a rule, or not among the pairs searched) fall outside it
    t = m.new_int_var(min(real), max(real), "step_time_us")
    for k, x in enumerate(enc.offer):
        m.add(t == enc.row_sum([times[(k, r)] for r in range(len(enc.rows))])).only_enforce_if(x)
    enc.var["step_time_us"] = t


def _add_pins(enc: Encoding) -> None:
    """Values the user fixed: each pin is a rule, so a conflict can name it."""
    m, v = enc.model, enc.var
    for name, value in pins(enc.space.request).items():
        lit = enc.rule(f"pin:{name}")
        m.add(v[name] == value).only_enforce_if(lit)
