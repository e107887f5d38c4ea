"""Exact best-first search over (offer, row) pairs for requests that need step times.

CP-SAT cannot hold the throughput model, so requests whose objective or limits depend on step
time (time objective, rental, deadline, minimum throughput) are searched here: every feasible
pair is scored by a lower bound on its objective (steptime.RowArrays.bounds), and the throughput
model runs only while a bound can still reach the best value found. A lower bound per offer
(``offer_lower_bounds``, from a few hundred row groups at once) orders the offers, and an
offer's pairs are scored only when its bound comes up in the best-first order: on large
catalogs nearly every offer is bounded above the optimum and never scored. Nothing that could
reach or tie the optimum is skipped, so the result is the exact optimum and every pair tying it;
stages.solve_timed then runs the tie-break chain over those pairs with CP-SAT.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from planner.catalog.plan_request import PlanRequest
from planner.models.cost import Job, define_job
from planner.solver.rows import Row
from planner.solver.rules import Need, holds
from planner.solver.space import PlanSpace
from planner.solver.steptime import RowArrays

ROUNDING = 0.5  # objective values are rounded to integers: a bound may exceed one by this


def request_job(req: PlanRequest) -> Job:
    """The job in tokens; --steps counts optimizer steps (RL: iterations) of
    sequences_per_step sequences."""
    return define_job(tokens=req.tokens, epochs=req.epochs, dataset_tokens=req.dataset_tokens,
                      steps=req.steps, global_batch=req.sequences_per_step,
                      seq_len=req.tokens_per_sequence)


def job_steps(space: PlanSpace) -> float:
    """Optimizer steps of the job: its tokens over global batch x sequence length."""
    req = space.request
    return request_job(req).tokens / (req.sequences_per_step * req.tokens_per_sequence)


def needs_timing(req: PlanRequest) -> bool:
    """Requests whose objective or limits depend on step time: time objective, rental (cost is
    GPU-hours), deadline, minimum throughput."""
    return (req.objective == "time" or req.pricing in ("rent", "owned")
            or req.max_hours is not None
            or req.min_tokens_per_s is not None)


def job_hours_at(t_us, steps: float):
    """Hours of a job of ``steps`` optimizer steps at a step time in microseconds."""
    return t_us * steps / 3.6e9


def plan_usd(space: PlanSpace, oi: int, num_gpus: int, *, hours: float) -> float:
    """Dollars of a plan on offer ``oi``: the rental for the job, or the purchase."""
    o = space.offers[oi]
    if space.request.pricing == "rent":
        return o.rental_usd(num_gpus, hours)
    return o.purchase_usd(num_gpus)


def fits_mask(space: PlanSpace, oi: int, arr: RowArrays, *, budget: float | None):
    """Which rows of a RowArrays fit one offer (a numpy boolean mask): every fit rule
    (rules.holds), purchase ``budget`` (GPUs + hosts; None = no limit). The pins are in
    timed_search's ``keep``."""
    o = space.offers[oi]
    j = space.host_sizes.index(o.gpus_per_host)
    mask = holds(o, Need(arr.gpu_need, arr.tp, arr.host_need[:, j], arr.num_gpus,
                         arr.dp_shard))
    if budget is not None:
        mask &= o.purchase_usd(arr.num_gpus) <= budget
    return mask


def offer_lower_bounds(space: PlanSpace, arr: RowArrays, allowed: list[int], *, keep,
                       objective: str, steps: float, budget: float | None) -> np.ndarray:
    """A lower bound, per offer of ``allowed``, on the objective value of every pair
    ``timed_search`` would score for it (inf: no row can fit it); the same units as its values.

    Relaxation: a row counts for an offer when its GPU need fits the offer's memory, its tp
    fits a host and (``budget``, a purchase) its GPU count is affordable; host RAM is ignored.
    A rental is bounded by its floor (Offer.rental_floor_usd: no idle instance GPU, no
    billing round-up). Rows are grouped by (GPU count, tp); within a group, sorted by need,
    running minima give
    for every offer the least of each term of RowArrays.bounds over the rows it can hold,
    and the sum of those minima bounds every row's step time from below (each term >= 0).
    ``keep`` masks the rows searched (strategies, the accumulation pin)."""
    req = space.request
    idx = np.nonzero(keep)[0]
    out = np.full(len(allowed), np.inf)
    if not len(idx):
        return out
    n, tp, need = arr.num_gpus[idx], arr.tp[idx], arr.gpu_need[idx]
    rent = objective != "time" and req.pricing == "rent"
    scale = n if rent else np.ones(len(idx))  # rental pays GPUs x time
    # terms of the time bound in seconds, divided per offer by: matmul rate, 16-bit rate, 1
    cols = np.stack([scale * (arr.lin[idx] + arr.fwd[idx]), scale * arr.s16[idx],
                     scale * (arr.fixed[idx] - ROUNDING / 1e6), arr.gen[idx]])
    offers = [space.offers[oi] for oi in allowed]
    caps = np.array([o.capacity_mib for o in offers], dtype=float)
    per_host = np.array([o.gpus_per_host for o in offers], dtype=float)
    rates = np.array([space.timing.rates(oi) for oi in allowed])  # (offers, 3)
    # job milli-dollars per GPU and microsecond of step
    rent_rate = np.array([1000 * o.rental_floor_usd(1, job_hours_at(1, steps)) for o in offers])
    key = n * 1024 + tp.astype(np.int64)
    order = np.lexsort((need, key))  # by group, then by need (stable)
    key, n, tp, need, cols = key[order], n[order], tp[order], need[order], cols[:, order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], len(key)]
    purchase = objective != "time" and not rent
    counts = np.unique(n)  # purchase price of every offer at every GPU count: (offers, counts)
    prices = (np.array([o.purchase_usd(counts) for o in offers]).reshape(len(offers), -1)
              if budget is not None or purchase else None)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        at = np.searchsorted(need[s:e], caps, side="right") - 1  # last row each offer holds
        ok = (at >= 0) & (tp[s] <= per_host)
        price = None if prices is None else prices[:, np.searchsorted(counts, n[s])]
        if budget is not None:
            ok &= price <= budget
        if not ok.any():
            continue
        if purchase:  # the price of the GPU count
            value = price.astype(float)
        else:
            low = np.minimum.accumulate(cols[:, s:e], axis=1)[:, np.maximum(at, 0)]
            train = low[0] / rates[:, 0] + low[1] / rates[:, 1] + low[2]
            value = train * 1e6
            if not rent:
                value = np.maximum(value, low[3] / rates[:, 2] * 1e6 - ROUNDING)
            else:
                value *= rent_rate
        out = np.where(ok, np.minimum(out, value), out)
    return out


@dataclass(frozen=True)
class _Goal:
    """What one timed search minimises and the limits its step times must meet: the request's
    objective and limits with timed_search's ``drop`` and overrides applied."""
    space: PlanSpace
    objective: str
    steps: float  # optimizer steps of the job (job_steps)
    budget: float | None
    deadline: float | None  # hours
    min_rate: float | None  # tokens per second

    @property
    def buy_budget(self) -> float | None:
        """The purchase budget that fits_mask checks (a rental budget is on the job's cost)."""
        return self.budget if self.space.request.pricing == "buy" else None

    def value(self, oi: int, row: Row, t_us: float) -> float:
        """The objective value of a pair at step time ``t_us``: step us, whole dollars of a
        purchase, or milli-dollars of the job's rental."""
        if self.objective == "time":
            return t_us
        usd = plan_usd(self.space, oi, row.num_gpus, hours=job_hours_at(t_us, self.steps))
        return 1000 * usd if self.space.request.pricing == "rent" else usd

    def time_ok(self, oi: int, num_gpus, t_us):
        """Whether pairs at step time ``t_us`` meet the deadline, the minimum throughput and
        a rental budget: a bool for one pair, elementwise on numpy arrays of GPU counts and
        step times (scored drops the pairs whose bound already breaks a limit at once)."""
        req = self.space.request
        ok = True
        if self.deadline is not None:
            ok = ok & (job_hours_at(t_us, self.steps) <= self.deadline)
        if self.min_rate is not None:
            ok = ok & (req.sequences_per_step * req.tokens_per_sequence / (t_us / 1e6)
                       >= self.min_rate)
        if req.pricing == "rent" and self.budget is not None:
            usd = self.space.offers[oi].rental_usd(num_gpus, job_hours_at(t_us, self.steps))
            ok = ok & (1000 * usd <= self.budget * 1000)
        return ok

    def scored(self, oi: int, arr: RowArrays, keep):
        """(values, step-time bounds, row indices) of the offer's feasible pairs. The bound is
        lowered by ROUNDING: step times are whole microseconds, rounded to nearest."""
        space = self.space
        idx = np.nonzero(fits_mask(space, oi, arr, budget=self.buy_budget) & keep)[0]
        b = arr.bounds(oi)[idx] - ROUNDING
        within = self.time_ok(oi, arr.num_gpus[idx], b)  # the bound already breaks a limit
        if within is not True:
            idx, b = idx[within], b[within]
        if self.objective == "time":
            v = b
        elif space.request.pricing == "rent":
            v = 1000 * space.offers[oi].rental_usd(arr.num_gpus[idx], job_hours_at(b, self.steps))
        else:
            v = space.offers[oi].purchase_usd(arr.num_gpus[idx]).astype(float)
        return v, b, idx


def _goal(space: PlanSpace, *, drop: frozenset[str], objective: str | None,
          max_hours: float | None, budget_usd: float | None) -> _Goal:
    """timed_search's goal: the request's objective and limits less ``drop``, with the
    overrides applied (the tighter of two deadlines)."""
    req = space.request
    deadline = None if "max_hours" in drop else req.max_hours
    if max_hours is not None:
        deadline = max_hours if deadline is None else min(deadline, max_hours)
    return _Goal(space=space, objective=objective or req.objective, steps=job_steps(space),
                 budget=None if "budget" in drop else (budget_usd or req.budget_usd),
                 deadline=deadline,
                 min_rate=None if "min_tokens_per_s" in drop else req.min_tokens_per_s)


def timed_search(space: PlanSpace, allowed: list[int], rows: list[Row], *,
                 drop: frozenset[str] = frozenset(), objective: str | None = None,
                 max_hours: float | None = None, budget_usd: float | None = None,
                 strategies: frozenset[int] | None = None
                 ) -> tuple[int, list[tuple[int, Row, int]]] | None:
    """Exact best-first search for requests that need step times: feasible (offer, row) pairs
    in order of a lower bound on the objective, the throughput model evaluated only while the
    bound can still reach the best value found. Returns (best objective value, every (offer,
    row, step us) reaching it). Objective: step us (time), whole dollars (buy), or milli-dollars
    of rental for the job. ``drop`` names limits to ignore (budget, max_hours,
    min_tokens_per_s); ``objective``, ``max_hours`` and ``budget_usd`` override the request's
    (explanations, the Pareto sweep); ``strategies`` keeps only rows of those strategy indices
    (the alternatives per method)."""
    goal = _goal(space, drop=drop, objective=objective, max_hours=max_hours,
                 budget_usd=budget_usd)
    by_need, arr = space.timing.by_need(rows)
    keep = np.ones(len(by_need), dtype=bool) & space.allows(arr, drop)
    if strategies is not None:
        keep &= np.isin(arr.strategy, list(strategies))
    low = offer_lower_bounds(space, arr, allowed, keep=keep, objective=goal.objective,
                             steps=goal.steps, budget=goal.buy_budget)
    found = _best_first(goal, allowed, low, opener=lambda oi: goal.scored(oi, arr, keep),
                        by_need=by_need)
    if not found:
        return None
    best = min(val for val, _, _, _ in found)
    return best, [(oi, r, t) for val, oi, r, t in found if val == best]


def _best_first(goal: _Goal, allowed: list[int], low: np.ndarray, *, opener,
                by_need: list[Row]) -> list[tuple[int, int, Row, int]]:
    """(value, offer, row, step us) of every pair the throughput model timed within the
    limits, best-first, until no pair left can reach the best value.

    Every offer's pairs are merged lazily: an offer's pairs are scored (``opener``) and sorted
    only once its lower bound (``low``) is below every pair already queued (a heap holds each
    open offer's next pair). Ties of the bound are visited in catalog order, as one stable
    sort of all pairs would."""
    ranked = [k for k in np.argsort(low, kind="stable").tolist() if np.isfinite(low[k])]
    heap: list[tuple[float, int, int]] = []  # (bound value, offer position, rank in offer)
    opened: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    best, found, nxt = None, [], 0
    while heap or nxt < len(ranked):
        if nxt < len(ranked) and (not heap or low[ranked[nxt]] <= heap[0][0]):
            k = ranked[nxt]
            nxt += 1
            if best is not None and low[k] > best + ROUNDING:
                nxt = len(ranked)  # every later offer is bounded above the optimum
                continue
            v, b, idx = opener(allowed[k])
            if len(idx):
                o = np.argsort(v, kind="stable")
                opened[k] = (v[o], b[o], idx[o])
                heapq.heappush(heap, (float(opened[k][0][0]), k, 0))
            continue
        lower, k, j = heapq.heappop(heap)
        if best is not None and lower > best + ROUNDING:
            break
        v, b, idx = opened[k]
        if j + 1 < len(v):
            heapq.heappush(heap, (float(v[j + 1]), k, j + 1))
        oi, r = allowed[k], by_need[int(idx[j])]
        t = goal.space.timing.step_us(oi, r)
        if not goal.time_ok(oi, r.num_gpus, t):
            continue
        val = round(goal.value(oi, r, t))
        found.append((val, oi, r, t))
        best = val if best is None else min(best, val)
    return found
