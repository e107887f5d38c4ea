"""The planner's decision space: a request resolved against the catalog.

``build_space`` turns a PlanRequest into a PlanSpace: the offers (hardware.py), the strategies
(strategies.py), the tp / pp / micro-batch domains and the memory tables (tables.py). The space
gives the candidate rows (one per strategy x layout x micro-batch that completes the global
batch), their memory need per GPU and per host, the pins as one mask over them (``allows``),
and the step times of the throughput model per (offer, row), memoised (``Timing``, with the
vectorised lower bounds of ``RowArrays`` that the exact search orders by).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import combinations
from typing import NamedTuple

import numpy as np

from planner.catalog.frameworks import apply, for_request, plan_shardings, unsupported
from planner.catalog.load import Catalog
from planner.catalog.plan_request import MAX_GLOBAL_BATCH, PlanRequest, validate_plan_request
from planner.catalog.request import TrainConfig
from planner.catalog.specs import (
    ModelSpec,
    tensor_parallel_options,
)
from planner.errors import PlannerError
from planner.models import efficiency as eff
from planner.models.bands import request_margin
from planner.models.flops import matmul_precision, peak_tflops, training_flops
from planner.models.rltime import (
    engine_side,
    gathered_weight_bytes,
    update_steps,
    workload_throughput,
)
from planner.models.throughput import (
    forward_flops_per_token,
    pipeline_bubble_fraction,
    resolve_links,
    ring_factor,
)
from planner.models.workloads import (
    Engine,
    engine,
    roles,
)
from planner.solver.hardware import (
    Offer,
    _offers,
    _timing_key,
)
from planner.solver.strategies import (
    MICRO_BATCHES,
    Strategy,
    _rl_choices,
    _strategies,
    engine_layout,
    pipeline_parallel_options,
    runs_strategy,
)
from planner.solver.tables import (
    NO_ROLES,
    ROLLOUT_PHASE,
    MemoryTables,
    RoleModels,
    _with_dp,
    memory_tables,
)

    # workspace) MiB on one GPU


@dataclass(frozen=True)
class PlanSpace:
    """The candidates of one request: the model, the offers and the strategies."""
    model: ModelSpec
    request: PlanRequest
    offers: tuple[Offer, ...]
    unoffered: tuple[str, ...]  # GPU ids left out, with the reason
    strategies: tuple[Strategy, ...]
    tps: tuple[int, ...]
    pps: tuple[int, ...]
    micro_batches: tuple[int, ...]
    base: TrainConfig
    memory: MemoryTables
    roles: RoleModels = NO_ROLES

    @cached_property
    def rows(self) -> list[Row]:
        """candidate_rows(self), computed once."""
        return candidate_rows(self)

    @cached_property
    def host_sizes(self) -> tuple[int, ...]:
        """host_sizes(self), computed once."""
        return host_sizes(self)

    @cached_property
    def timing(self) -> Timing:
        """Step times and their lower bounds per (offer, row), memoised: plan() searches the
        same pairs for the plan, the binding rules and the alternatives."""
        return Timing(self)

    @cached_property
    def front(self) -> list[Row]:
        """The rows that decide feasibility and cost under every subset of the pins (so that
        explanations may leave a pin open): the union of pareto_rows over the rows each subset
        allows, computed once. A front of all rows alone can drop the only rows a pin allows."""
        names = [f"pin:{k}" for k in pins(self.request)]
        out: dict[Row, None] = {}
        for k in range(len(names) + 1):
            for dropped in combinations(names, k):
                out.update(dict.fromkeys(pareto_rows(
                    [r for r in self.rows if self.allows(r, frozenset(dropped))])))
        return list(out)

    def allows(self, rows, dropped: frozenset[str] = frozenset()):
        """The request's pins (request_pins) as a mask over candidate rows: one Row (bool) or
        the columns of many (RowArrays: a numpy mask). The one place that reads the pins for
        the search routes; encoding._add_pins states the same pins as CP-SAT rules.
        ``dropped`` names pin rules left open ("pin:num_gpus")."""
        ok = True
        for name, value in pins(self.request).items():
            if f"pin:{name}" not in dropped:
                ok = ok & (getattr(rows, name) == value)
        return ok

    def offer_of(self, plan) -> Offer:
        """The offer a plan (result.Plan) was made on: its GPU and platform, and for a rental
        the instance offer its cost bills."""
        billed = plan.cost.rental.offers[0] if plan.cost.rental else None
        for o in self.offers:
            if o.gpu.id != plan.gpu or (o.platform.id if o.platform else None) != plan.platform:
                continue
            if billed is None or o.rental is None or (
                    o.rental.provider, o.rental.instance_type, o.rental.region,
                    o.rental.spot) == (billed.provider, billed.instance_type, billed.region,
                                       billed.spot):
                return o
        raise PlannerError(f"no offer of this space holds the plan on {plan.gpu}")

    def with_offers(self, offers: tuple[Offer, ...]) -> PlanSpace:
        """This space with other offers. The candidate rows depend on the offers only through
        their GPUs-per-host counts and the largest usable memory: when those stay, the rows
        already computed are kept (explanations re-solve with one offer's memory or every
        host's RAM loosened)."""
        new = replace(self, offers=offers)
        same = host_sizes(new) == host_sizes(self) and \
            max(o.capacity_mib for o in offers) == max(o.capacity_mib for o in self.offers)
        # Step times depend on an offer's GPU, platform and GPUs per host, not on its usable
        # memory, host RAM or price: with those unchanged the memoised timing carries over.
        timed = same and [_timing_key(o) for o in offers] == [_timing_key(o) for o in self.offers]
        names = ("rows", "front", "timing") if timed else ("rows", "front") if same else ()
        for name in names:
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name]
        return new

    @cached_property
    def dps(self) -> tuple[int, ...]:
        """Data-parallel degrees: divisors of the global batch (mb x ga x dp = global batch)
        up to the GPU limit, found in O(sqrt(batch))."""
        gb, limit = self.request.global_batch_size, self.request.num_gpus or \
            self.request.max_gpus
        small = [d for d in range(1, math.isqrt(gb) + 1) if gb % d == 0]
        every = sorted(set(small) | {gb // d for d in small})
        return tuple(d for d in every if d <= limit)

    def grad_accum(self, dp: int, mb: int) -> int | None:
        """The accumulation that completes the global batch, or None if mb x dp does not
        divide it."""
        gb = self.request.global_batch_size
        return gb // (dp * mb) if gb % (dp * mb) == 0 else None

    def num_gpus(self, si, tp: int, pp: int, *, dp):
        """GPUs of a layout: tp x pp x dp; RL placements apart: dp per group (Strategy.groups).
        Elementwise on numpy arrays of strategies and dp."""
        apart = self._strategy_arrays["apart"][si]
        n = np.where(apart > 0, apart * dp, tp * pp * dp)
        return int(n) if np.ndim(n) == 0 else n

    @cached_property
    def _strategy_arrays(self) -> dict[str, np.ndarray]:
        """Per strategy: GPU groups when placed apart (0: colocated), engine layout index
        (engine_layout), engine weights, KV MiB per sequence and workspace (MemoryTables)."""
        layouts = [engine_layout(s) for s in self.strategies]
        names = sorted(set(layouts))
        engine = np.array([self.memory.engine.get(i, (0, 0, 0))
                           for i in range(len(self.strategies))], dtype=np.int64).reshape(-1, 3)
        return {
            "apart": np.array([s.groups if s.placement != "colocate" else 0
                               for s in self.strategies], dtype=np.int64),
            "layout": np.array([names.index(k) for k in layouts], dtype=np.int64),
            "engine": engine,
        }

    @cached_property
    def _engines(self) -> dict[tuple[object, ...], Engine]:
        return {}

    def engine_at(self, si: int, dp: int) -> Engine:
        """workloads.engine of strategy ``si`` with data-parallel degree dp, sized to its
        batch (no capacity: a fixed gpu_memory_utilization is handled by _with_engine)."""
        s = self.strategies[si]
        key = (*engine_layout(s), dp)
        if key not in self._engines:
            fields = s.config_fields()
            cfg = _with_dp(self.base.model_copy(update={
                k: fields[k] for k in ("rollout_tp", "placement", "role_gpus")}), dp)
            self._engines[key] = engine(self.model, cfg, None)
        return self._engines[key]

    def gpu_need_mib(self, si, tp: int, pp: int, *, dp, mb):
        """Per-GPU MiB of the worst phase, from the tables (the encoding's and the oracle's);
        elementwise on numpy arrays of strategies, dp and micro-batch (candidate_rows).

        RL rollout phase: the engine's weights, KV cache and workspace are added exactly. With
        a fixed gpu_memory_utilization u the engine takes u x capacity, which no GPU-independent
        number can hold; the equivalent need is scaled instead: resident <= C(1-m) - uC iff
        resident (1-m)/(1-m-u) <= C(1-m), and the engine must hold its weights and one
        sequence: (weights + workspace + one sequence) (1-m)/u <= C(1-m)."""
        scalar = np.ndim(si) == np.ndim(dp) == np.ndim(mb) == 0
        si, dp, mb = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (si, dp, mb)))
        gb = self.request.global_batch_size
        ga = np.where(gb % (dp * mb) == 0, gb // (dp * mb), 1)  # grad_accum(dp, mb) or 1
        mem = self.memory
        n = self.num_gpus(si, tp, pp, dp=dp)
        fixed = mem.floor_mib + mem.overhead_mib + mem.multi_gpu_mib * (n > 1)
        worst = np.zeros(si.shape, dtype=np.int64)
        acc, in_flight = (ga > 1).astype(np.int64), np.minimum(pp, ga)
        for phase, states, acts in self._need_tables(tp, pp):
            a, b, c, e, k = np.moveaxis(states[si, acc], -1, 0)
            need = a + -(-b // dp) + c * (dp > 1) + np.minimum(-(-e // dp), k) + \
                mb * acts[si, in_flight - 1]
            if phase == ROLLOUT_PHASE:
                need = self._with_engine(si, dp, need, fixed)
            worst = np.maximum(worst, need)
        out = worst + fixed
        return int(out) if scalar else out

    def _need_tables(self, tp: int, pp: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """The memory tables of (tp, pp) as arrays, once: per phase the states coefficients
        [strategy, accumulates, (a, b, c, e, k)] and the activations [strategy, in flight - 1]."""
        if (tp, pp) not in self._tables:
            mem, count = self.memory, range(len(self.strategies))
            self._tables[(tp, pp)] = [
                (phase,
                 np.array([[table[(si, tp, pp, acc)] for acc in (False, True)] for si in count],
                          dtype=np.int64).reshape(-1, 2, 5),
                 np.array([[mem.acts[phase][(si, tp, pp, f)] for f in range(1, pp + 1)]
                           for si in count], dtype=np.int64).reshape(-1, pp))
                for phase, table in mem.states.items()]
        return self._tables[(tp, pp)]

    @cached_property
    def _tables(self) -> dict[tuple[int, int], list]:
        return {}

    def _with_engine(self, si, dp, resident, fixed):
        weights, per_seq, work = np.moveaxis(self._strategy_arrays["engine"][si], -1, 0)
        u = self.base.gpu_memory_utilization
        if u is None:
            return resident + weights + work + self._concurrency(si, dp) * per_seq
        keep = 1 - request_margin(self.request)
        if keep - u <= 0:
            return np.full(np.shape(resident), 2**40)  # nothing is left for training states
        scaled = np.ceil((resident + fixed) * keep / (keep - u)).astype(np.int64) - fixed
        engine_min = np.ceil((weights + work + per_seq + fixed) * keep / u).astype(np.int64) \
            - fixed
        return np.maximum(scaled, engine_min)

    def _concurrency(self, si, dp):
        """engine_at(si, dp).concurrency elementwise, once per engine layout and dp."""
        key = self._strategy_arrays["layout"][si] * (MAX_GLOBAL_BATCH + 1) + dp
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        conc = np.array([self.engine_at(int(si.flat[i]), int(dp.flat[i])).concurrency
                         for i in first.tolist()], dtype=np.int64)
        return conc[inverse.reshape(-1)].reshape(si.shape) if len(uniq) else np.zeros(si.shape,
                                                                                       np.int64)

    def host_need_mib(self, si, tp: int, pp: int, *, dp, gpus_per_host: int):
        """Host RAM of one host: its ranks (min(GPUs, per host)) x one process's MiB;
        elementwise on numpy arrays of strategies and dp."""
        if np.ndim(si) == 0:
            a, b = self.memory.host[(si, tp, pp)]
        else:
            a, b = np.array([self.memory.host[(i, tp, pp)] for i in range(len(self.strategies))],
                            dtype=np.int64).reshape(-1, 2)[si].T
        out = np.minimum(self.num_gpus(si, tp, pp, dp=dp), gpus_per_host) * (a + -(-b // dp))
        return int(out) if np.ndim(out) == 0 else out


PINNED = ("num_gpus", "grad_accum")  # request fields kept open in the rows, pinned by rules


def pins(request: PlanRequest) -> dict[str, int]:
    """The values the user fixed that the candidate rows leave open (each a named rule, so a
    conflict can name it): GPU count and gradient accumulation. Other pins (tp, pp, micro-batch,
    method, sharding, rank, GPU list) narrow the domains in build_space."""
    return {k: getattr(request, k) for k in PINNED if getattr(request, k) is not None}


def build_space(request: PlanRequest, catalog: Catalog) -> PlanSpace:
    """Resolve the request against the catalog and tabulate memory for every open choice."""
    model = catalog.model(request.model).spec
    validate_plan_request(request, model)
    framework = for_request(catalog, request)
    request = request.model_copy(update={
        "stack": framework.stack, "framework": framework.profile.id,
        # owned hardware costs nothing to get: the plan is the fastest
        **({"objective": "time"} if request.pricing == "owned" else {})})
    roles = RoleModels(
        critic=catalog.model(request.critic_model).spec if request.critic_model else None,
        reward=catalog.model(request.reward_model).spec if request.reward_model else None,
    )
    offers, unoffered = _offers(request, catalog)
    per_node = max((o.gpus_per_host for o in offers), default=8)
    parallel = framework.profile.value("parallelism", ("tp", "pp"))
    for axis in ("tp", "pp"):
        if (getattr(request, axis) or 1) > 1 and axis not in parallel:
            raise PlannerError(
                f"--{axis} {getattr(request, axis)}: --framework {framework.profile.id} does not "
                f"run {'tensor' if axis == 'tp' else 'pipeline'} parallelism; name one that "
                "does ('planner catalog frameworks', column parallel)")
    if request.is_rl:  # the RL trainer is data parallel (request.validate_workload)
        tps, pps = (1,), (1,)
    else:
        tps = (request.tp,) if request.tp else tensor_parallel_options(model, per_node) \
            if "tp" in parallel else (1,)
        pps = (request.pp,) if request.pp else pipeline_parallel_options(model, at_most=8) \
            if "pp" in parallel else (1,)
    mbs = (request.micro_batch_size,) if request.micro_batch_size else tuple(
        m for m in MICRO_BATCHES if m <= request.global_batch_size
    )
    base = TrainConfig(
        workload=request.workload, seq_len=request.seq_len, prompt_len=request.prompt_len,
        response_len=request.response_len, rollout_n=request.rollout_n,
        rollout_batch=request.rollout_batch,
        gpu_memory_utilization=request.gpu_memory_utilization, reference=request.reference,
        precompute_ref=request.precompute_ref, mean_seq_len=request.mean_seq_len,
        framework=framework.profile.id,
        **({"rollout_engine": request.rollout_engine} if request.rollout_engine else {}),
        **request.fixed,
    )
    base = apply(base, framework.profile)
    strategies = tuple(s for s in _strategies(request, _rl_choices(request, model, per_node,
                                                                   base),
                                              plan_shardings(framework.profile))
                       if runs_strategy(framework.profile, base, s))
    if not strategies:
        raise PlannerError(f"--framework {framework.profile.id} runs none of the requested "
                           "layouts: " + "; ".join(unsupported(framework.profile, base)))
    return PlanSpace(
        model=model,
        request=request,
        offers=tuple(offers),
        unoffered=tuple(unoffered),
        strategies=strategies,
        tps=tps,
        pps=pps,
        micro_batches=mbs,
        base=base,
        memory=memory_tables(model, base, strategies, tps=tps, pps=pps, roles=roles),
        roles=roles,
    )


class Row(NamedTuple):
    """One candidate layout: strategy, tp, pp, dp, micro-batch, with its integer needs (a named
    tuple: requests build a few hundred thousand of them)."""

    strategy: int
    tp: int
    pp: int
    dp: int
    micro_batch: int
    grad_accum: int
    num_gpus: int
    gpu_need_mib: int
    host_need_mib: tuple[int, ...]  # per entry of PlanSpace.host_sizes


def host_sizes(space: PlanSpace) -> tuple[int, ...]:
    """The distinct GPUs-per-host counts of the offers (host RAM depends on ranks per host)."""
    return tuple(sorted({o.gpus_per_host for o in space.offers}))


def candidate_rows(space: PlanSpace) -> list[Row]:
    """Every (strategy, tp, pp, dp, micro-batch) that completes the global batch, respects the
    GPU-count limit and fits the largest offered GPU; needs from the memory tables (numpy over
    every strategy, dp and micro-batch of one tp and pp at once)."""
    req = space.request
    max_gpus = req.num_gpus or req.max_gpus
    largest = max((o.capacity_mib for o in space.offers), default=0)
    sizes = host_sizes(space)
    if not sizes:  # no offer: nothing fits
        return []
    gb = req.global_batch_size
    dps, mbs = np.meshgrid(np.array(space.dps, dtype=np.int64),
                           np.array(space.micro_batches, dtype=np.int64), indexing="ij")
    whole = (gb % (dps * mbs) == 0).reshape(-1)  # dp-major, micro-batch-minor
    dps, mbs = dps.reshape(-1)[whole], mbs.reshape(-1)[whole]
    rtp = np.array([s.rollout_tp for s in space.strategies], dtype=np.int64)
    # every (strategy, dp, micro-batch) of one (tp, pp) at once, in the order rows are listed
    si = np.repeat(np.arange(len(space.strategies), dtype=np.int64), len(dps))
    dp, mb = np.tile(dps, len(space.strategies)), np.tile(mbs, len(space.strategies))
    order = []
    for tp in space.tps:
        for pp in space.pps:
            ok = (space.num_gpus(si, tp, pp, dp=dp) <= max_gpus) & (dp % rtp[si] == 0)
            s_, d_, m_ = si[ok], dp[ok], mb[ok]
            need = space.gpu_need_mib(s_, tp, pp, dp=d_, mb=m_)
            keep = need <= largest
            s_, d_, m_, need = s_[keep], d_[keep], m_[keep], need[keep]
            n = space.num_gpus(s_, tp, pp, dp=d_)
            host = np.stack([space.host_need_mib(s_, tp, pp, dp=d_, gpus_per_host=h)
                             for h in sizes], axis=-1)
            order.append((tp, pp, s_, d_, m_, n, need, host))
    rows = []
    for tp, pp, s_, d_, m_, n, need, host in order:
        for k, d, m, g, q, h in zip(s_.tolist(), d_.tolist(), m_.tolist(), n.tolist(),
                                    need.tolist(), map(tuple, host.tolist()), strict=True):
            rows.append(Row(k, tp, pp, d, m, gb // (d * m), g, q, h))
    rows.sort(key=lambda r: r[0])  # strategy-major, as the rows were always listed (stable)
    return rows


def pareto_rows(rows: list[Row]) -> list[Row]:
    """Per (GPUs, tp), the rows whose needs no other row beats in every component; enough to
    decide feasibility and cost (cost depends on GPUs and the offer only). For a fixed GPU count
    every host need is min(GPUs, per host) x the same per-rank need, so the needs are ordered
    like (GPU need, first host need): a 2-D front, found by one sorted sweep."""
    groups: dict[tuple[int, int], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.num_gpus, r.tp), []).append(r)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: (r.gpu_need_mib, r.host_need_mib, r.strategy, r.pp, r.dp,
                                  -r.micro_batch))
        best_host = None
        for r in group:
            if best_host is None or r.host_need_mib < best_host:
                out.append(r)
                best_host = r.host_need_mib
    return out


class Timing:
    """step_time_us memoised per (offer, row), and the parts of its lower bounds (RowArrays),
    of a space."""

    def __init__(self, space: PlanSpace) -> None:
        self._space = space
        self._steps: dict[tuple[int, Row], int] = {}
        self._flops: dict[Strategy, tuple[float, float, float, int]] = {}
        self._flops_of: dict[int, tuple[float, float, float, int]] = {}  # by strategy index
        self._rates: dict[int, tuple[float, float, float]] = {}
        self._gen: dict[tuple[object, ...], float] = {}
        self._generation: dict[tuple[int, tuple[object, ...]], object] = {}
        self._by_need: dict[int, tuple[list[Row], list[Row], RowArrays]] = {}

    def by_need(self, rows: list[Row]) -> tuple[list[Row], RowArrays]:
        """``rows`` ordered by GPU need and their RowArrays, kept per row list (the space's own
        rows are searched repeatedly: plan, binding steps, alternatives, Pareto points)."""
        hit = self._by_need.get(id(rows))
        if hit is not None and hit[0] is rows:
            return hit[1], hit[2]
        ordered = sorted(rows, key=lambda r: r.gpu_need_mib)
        arr = RowArrays(self._space, ordered)
        self._by_need[id(rows)] = (rows, ordered, arr)
        return ordered, arr

    def strategy_flops(self, row: Row) -> tuple[float, float, float, int]:
        """_strategy_flops, memoised per strategy up to its rollout TP (the roles' configs
        drop it: workloads._base)."""
        if row.strategy not in self._flops_of:
            key = replace(self._space.strategies[row.strategy], rollout_tp=1)
            if key not in self._flops:
                self._flops[key] = _strategy_flops(self._space, row)
            self._flops_of[row.strategy] = self._flops[key]
        return self._flops_of[row.strategy]

    def gathered_bytes(self, row: Row) -> float:
        """Sum over the roles of rltime.gathered_weight_bytes (what a ZeRO-3/FSDP forward
        micro-step all-gathers), for the step-time bound; per strategy, tp and pp."""
        cfg = config_for(self._space, row)
        space = self._space
        return sum(gathered_weight_bytes(r.model, r.cfg) for r in roles(
            space.model, cfg, critic=space.roles.critic, reward=space.roles.reward))

    def generation_bytes(self, row: Row) -> float:
        """_generation_bytes, memoised per engine key."""
        key = self.engine_key(row)
        if key not in self._gen:
            self._gen[key] = _generation_bytes(self._space, row)
        return self._gen[key]

    def rates(self, offer_idx: int) -> tuple[float, float, float]:
        """Achievable FLOP/s (matmul precision, 16-bit) and decode bytes/s of an offer's GPU."""
        if offer_idx not in self._rates:
            space = self._space
            gpu = space.offers[offer_idx].gpu
            prec = matmul_precision(gpu, space.base.effective_precision(gpu))
            sixteen = "fp32" if prec == "fp32" else "bf16"
            util = eff.stack_utilisation(space.request.stack, prec)
            self._rates[offer_idx] = (
                peak_tflops(gpu, prec) * 1e12 * eff.matmul_fraction(gpu, prec) * util,
                peak_tflops(gpu, sixteen) * 1e12 * eff.matmul_fraction(gpu, sixteen) * util,
                gpu.memory_bandwidth_gbps * 1e9 * eff.DECODE_EFFICIENCY["vllm"],
            )
        return self._rates[offer_idx]

    def engine_key(self, row: Row) -> tuple[object, ...]:
        """What the generation phase reads of a row (rltime.generation_seconds): the engine
        layout of its strategy and its data-parallel degree (GPUs per group)."""
        return (*engine_layout(self._space.strategies[row.strategy]), row.dp)

    def engine_side(self, offer_idx: int, row: Row):
        """rltime.engine_side of ``row``'s engine layout on the offer's GPUs, memoised per
        layout (engine_key) and offer."""
        key = (offer_idx, self.engine_key(row))
        if key not in self._generation:
            space, offer = self._space, self._space.offers[offer_idx]
            self._generation[key] = engine_side(space.model, offer.gpu, config_for(space, row),
                                                platform=offer.platform)
        return self._generation[key]

    def step_us(self, offer_idx: int, row: Row) -> int:
        """step_time_us of ``row`` on offer ``offer_idx``, memoised."""
        key = (offer_idx, row)
        if key not in self._steps:
            self._steps[key] = step_time_us(self._space, offer_idx, row)
        return self._steps[key]


def step_time_us(space: PlanSpace, offer_idx: int, row: Row) -> int:
    """Optimizer-step time of ``row`` on the offer's GPUs in microseconds, from the throughput
    model with the request's stack (the job time is proportional: fixed tokens per step)."""
    offer = space.offers[offer_idx]
    side = space.timing.engine_side(offer_idx, row) if space.base.is_rl else None
    est = workload_throughput(space.model, offer.gpu, config_for(space, row),
                              platform=offer.platform, stack=space.request.stack,
                              critic=space.roles.critic, reward=space.roles.reward,
                              gpus_per_node=offer.gpus_per_host, side=side)
    return max(1, round(est.step_time_s * 1e6))


def config_for(space: PlanSpace, row: Row) -> TrainConfig:
    """The concrete TrainConfig of one row."""
    return layout_config(space, row.strategy, num_gpus=row.num_gpus, tp=row.tp, pp=row.pp,
                         micro_batch=row.micro_batch, grad_accum=row.grad_accum)


def layout_config(space: PlanSpace, si: int, *, num_gpus: int, tp: int, pp: int,
                  micro_batch: int, grad_accum: int) -> TrainConfig:
    """The concrete TrainConfig of strategy ``si`` on a layout (separate RL placement: half the
    GPUs run the engines; split: every role and the engines an equal group)."""
    s = space.strategies[si]
    group = num_gpus // s.groups
    return space.base.model_copy(update={
        **s.config_fields(),
        "num_gpus": num_gpus, "tp": tp, "pp": pp,
        "micro_batch_size": micro_batch, "grad_accum": grad_accum,
        "rollout_gpus": group if s.placement == "separate" else None,
        "role_gpus": tuple((n, group) for n in s.role_names) if s.placement == "split" else None,
    })


class RowArrays:
    """Columns of a list of rows (numpy) for scoring them against offers at once: what
    solve.timed_search needs per (offer, row) pair, millions of pairs on large catalogs.

    ``bounds`` is a lower bound on step_time_us: the throughput model's compute, pipeline-bubble
    and per-step-overhead terms only (its other terms are >= 0); RL adds every role's forward
    and update compute and a generation bound (_generation_bytes)."""

    def __init__(self, space: PlanSpace, rows: list[Row]) -> None:
        self.space, self.rows = space, rows
        self._bounds: dict[int, np.ndarray] = {}
        n_rows = len(rows)

        def field(name: str) -> np.ndarray:
            return np.fromiter((getattr(r, name) for r in rows), dtype=np.int64, count=n_rows)

        def per(values: np.ndarray, of) -> np.ndarray:
            """of(first row with each value) for every row: a table over the distinct values,
            taken by their first row (the memoised parts are per strategy or layout)."""
            uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
            table = np.array([of(rows[i]) for i in first.tolist()], dtype=float)
            return table[inverse.reshape(-1)] if len(uniq) else np.zeros((0, *table.shape[1:]))

        st, tp, pp, dp, ga = (field(k) for k in ("strategy", "tp", "pp", "dp", "grad_accum"))
        self.num_gpus = field("num_gpus")  # Offer.purchase_usd
        self.strategy = st.astype(float)
        self.gpu_need = field("gpu_need_mib").astype(float)
        self.tp = tp.astype(float)
        self.grad_accum = ga.astype(float)
        self.host_need = np.array([r.host_need_mib for r in rows], dtype=float).reshape(
            n_rows, len(space.host_sizes))
        trainers = (dp * tp * pp).astype(float)
        bubble = per(pp * (MAX_GLOBAL_BATCH + 1) + ga,
                     lambda r: pipeline_bubble_fraction(r.pp, r.grad_accum))
        req = space.request
        tokens = req.sequences_per_step * (space.base.mean_seq_len or req.seq_len)
        flops = per(st, space.timing.strategy_flops).reshape(n_rows, 4)
        share = tokens / trainers
        self.lin = share * flops[:, 0] * (1 + bubble)
        self.s16 = share * flops[:, 1] * (1 + bubble)
        self.fixed = np.full(n_rows, eff.STEP_OVERHEAD_S)
        self.fwd = np.zeros(n_rows)
        self.gen = np.zeros(n_rows)
        self.separate = np.zeros(n_rows, dtype=bool)
        self.groups = np.ones(n_rows)
        self.trainers = trainers
        self.fwd_gather = np.zeros(n_rows)
        if space.base.is_rl:
            steps = -(-req.sequences_per_step // req.global_batch_size)
            self.fwd = share * flops[:, 2]
            # the updates train steps x accumulation x micro-batch x dp sequences (the
            # accumulation shortened and rounded when the sequences do not fill the global
            # batches: rltime.update_steps), not always the sampled ones
            seqs = space.base.rollout_batch * space.base.samples_per_prompt
            mb = field("micro_batch")
            n_steps, accum = update_steps(seqs, mb, dp, grad_accum=ga)
            trained = n_steps * accum * mb * dp / req.sequences_per_step
            self.lin, self.s16 = self.lin * trained, self.s16 * trained
            # ZeRO-3/FSDP forward passes all-gather the roles' weights every log-prob
            # micro-step (rltime.forward_seconds): bytes per trainer GPU before the ring factor,
            # with at least ceil(sequences / (GPUs x batch)) micro-steps
            base = space.base
            seqs = base.rollout_batch * base.samples_per_prompt
            batch = base.logprob_micro_batch or field("micro_batch")
            micro_steps = -(-seqs // (dp * tp * pp * batch))
            self.fwd_gather = micro_steps * per(
                (st * 4096 + tp) * 4096 + pp, space.timing.gathered_bytes)
            self.fixed = flops[:, 3] * steps * eff.STEP_OVERHEAD_S
            layouts = [engine_layout(s) for s in space.strategies]
            names = sorted(set(layouts))
            layout = np.array([names.index(k) for k in layouts], dtype=np.int64)[st]
            # a row of each engine layout and dp (Timing.engine_key): the engine's phases are
            # timed per layout and offer, exactly (rltime.engine_side)
            _, first, self.engine_idx = np.unique(layout * (MAX_GLOBAL_BATCH + 1) + dp,
                                                  return_index=True, return_inverse=True)
            self.engine_idx = self.engine_idx.reshape(-1)
            self.engine_rows = [rows[i] for i in first.tolist()]
            self.gen = np.array([space.timing.generation_bytes(r)
                                 for r in self.engine_rows])[self.engine_idx]
            self.separate = np.array([k[0] != "colocate" for k in names], dtype=bool)[layout]
            # split: the role groups work side by side, so training takes at least the
            # average over the groups (rltime.split_training_seconds takes the busiest)
            self.groups = np.array([len(k[2]) or 1 for k in names], dtype=float)[layout]

    def bounds(self, offer_idx: int):
        """Lower bounds on step_time_us of every row on one offer; RL phases that only the
        engine layout sets (rltime.engine_side) are exact. Memoised per offer (read only): the
        timed searches of one request (plan, binding steps, alternatives) share them."""
        if offer_idx not in self._bounds:
            self._bounds[offer_idx] = self._bounds_of(offer_idx)
            self._bounds[offer_idx].flags.writeable = False
        return self._bounds[offer_idx]

    def _bounds_of(self, offer_idx: int):
        timing = self.space.timing
        r_lin, r_16, bandwidth = timing.rates(offer_idx)
        fwd = self.fwd / r_lin
        if self.space.base.is_rl:
            fwd = fwd + self._forward_gather_exposed(offer_idx, fwd)
        train = (self.lin / r_lin + self.s16 / r_16 + fwd + self.fixed) / self.groups
        if not self.space.base.is_rl:
            return train * 1e6
        sides = [timing.engine_side(offer_idx, r) for r in self.engine_rows]
        gen, sync, sleep = (np.array(col)[self.engine_idx] for col in zip(
            *((e.generation_s, e.weight_sync_s, e.sleep_s) for e in sides), strict=True))
        # rltime.estimate_rl_step: colocated phases add up (a sleeping engine's traffic
        # among them); apart, the slower of generation and training, plus the weight sync
        return (np.where(self.separate, np.maximum(train, gen), train + gen + sleep)
                + sync) * 1e6


    def _forward_gather_exposed(self, offer_idx: int, fwd: np.ndarray) -> np.ndarray:
        """At least the forward passes' weight all-gathers left after overlap, seconds per row
        (rltime.forward_seconds): summed over the roles, sum_r max(0, raw_r - ov x c_r) >=
        max(0, sum raw - ov x sum c), and c + max(0, raw - ov x c) grows with c (ov <= 1), so
        the forward compute bound ``fwd`` may stand for the exact compute."""
        space = self.space
        offer = space.offers[offer_idx]
        links = resolve_links(offer.gpu, platform=offer.platform)  # as rltime.estimate_rl_step
        gpus, inverse = np.unique(self.trainers, return_inverse=True)
        per_byte = np.array([ring_factor(int(g), "all-gather") / (
            links.collective_gbps(int(g), g > links.gpus_per_node) * 1e9)
            for g in gpus.tolist()])[inverse.reshape(-1)]
        overlap = eff.OVERLAP[space.request.stack]["dp"]
        return np.maximum(0.0, self.fwd_gather * per_byte - overlap * fwd)


def _strategy_flops(space: PlanSpace, row: Row) -> tuple[float, float, float, int]:
    """Per token: (matmul-precision, 16-bit) training FLOPs summed over the trained roles,
    forward FLOPs summed over every role's forward pass, and the number of trained roles."""
    cfg = config_for(space, row)
    if not cfg.is_rl:
        f = training_flops(space.model, cfg)
        return f.linear, f.sixteen_bit, 0.0, 1
    rs = roles(space.model, cfg, critic=space.roles.critic, reward=space.roles.reward)
    lin = sixteen = fwd = 0.0
    for r in rs:
        fwd += forward_flops_per_token(r.model, r.cfg.seq_len)  # as rltime.forward_seconds
        if r.trained:
            f = training_flops(r.model, r.cfg)
            lin, sixteen = lin + f.linear, sixteen + f.sixteen_bit
    return lin, sixteen, fwd, sum(r.trained for r in rs)


def _generation_bytes(space: PlanSpace, row: Row) -> float:
    """Bytes each engine GPU reads while generating, at least: every decoding step of every wave
    reads the engine's weights once (throughput._decode_step; prefill, KV reads and
    communication only add time). Divided by the vLLM share of HBM bandwidth: a time bound."""
    eng = space.engine_at(row.strategy, row.dp)
    # with a fixed gpu_memory_utilization the waves depend on the GPU: one wave at least; a
    # continuous-batching engine decodes share / concurrency waves' worth (rltime.engine_side)
    if space.base.gpu_memory_utilization is not None:
        waves = 1.0
    elif space.base.generates_in_trainer:
        waves = -(-eng.sequences_per_engine // eng.concurrency)
    else:
        waves = eng.sequences_per_engine / eng.concurrency
    return waves * (space.base.response_len or 0) * eng.weights
