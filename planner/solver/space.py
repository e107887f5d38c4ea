"""The planner's decision space: a request resolved against the catalog.

``build_space`` turns a PlanRequest into a PlanSpace: the offers (hardware.py), the request's
domains (PlanRequest.domains: every searched TrainConfig field pinned or open), the candidates of
the searched fields they span (``strategies``: domains.Choice, the product filtered by the
combination rules and by what the framework runs), the tp / pp / micro-batch axes and the memory
tables (tables.py). The space gives the candidate rows (one per strategy x layout x micro-batch
that completes the global batch), their memory need per GPU and per host, the pins as one mask
over them (``allows``), and the step times of the throughput model per (offer, row), memoised
(``Timing``, with the vectorised lower bounds of ``RowArrays`` that the exact search orders by:
steptime.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import combinations

import numpy as np

from planner.catalog.domains import Choice, Domains, choices
from planner.catalog.frameworks import (
    Profile,
    apply,
    built_model,
    for_request,
    gpu_count_lacks,
    lacks_model,
    lacks_precision,
    launch_parallelism,
    plan_shardings,
    unlaunchable,
    unsupported,
)
from planner.catalog.hybrid import plan_hybrid_shards
from planner.catalog.launches import launch_format_of, written_for
from planner.catalog.load import Catalog
from planner.catalog.plan_request import PlanRequest, validate_plan_request
from planner.catalog.request import TrainConfig
from planner.catalog.request_checks import validate_engine
from planner.catalog.specs import (
    ModelSpec,
)
from planner.errors import PlannerError
from planner.models.bands import need_scale, request_margin
from planner.models.rollout import (
    Engine,
    engine,
)
from planner.solver.hardware import (
    Offer,
    _offers,
    _timing_key,
)
from planner.solver.rows import Row, pareto_rows, strategy_shards
from planner.solver.steptime import Timing, engine_batch, engine_code
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
    strategies: tuple[Choice, ...]  # the candidates of the searched fields (domains.Choice)
    tps: tuple[int, ...]
    pps: tuple[int, ...]
    micro_batches: tuple[int, ...]
    base: TrainConfig
    memory: MemoryTables
    roles: RoleModels = NO_ROLES
    # (tp, on several GPUs) -> per strategy: the framework runs it and its launch expresses it
    # there (frameworks.gpu_count_lacks, unlaunchable; _launchable); empty: every row runs
    launchable: dict[tuple[int, bool], tuple[bool, ...]] = field(default_factory=dict)
    checkpoint: str | None = None  # what a launch loads (catalog.load.checkpoint_of), once

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
        """GPUs of a layout: tp x pp x dp; RL placements apart: dp per group (Choice.groups).
        Elementwise on numpy arrays of strategies and dp."""
        apart = self._strategy_arrays["apart"][si]
        n = np.where(apart > 0, apart * dp, tp * pp * dp)
        return int(n) if np.ndim(n) == 0 else n

    @cached_property
    def _strategy_arrays(self) -> dict[str, np.ndarray]:
        """Per strategy: GPU groups when placed apart (0: colocated), engine layout index
        (engine_layout), engine weights, KV MiB per sequence and workspace (MemoryTables)."""
        layouts = [s.engine_layout for s in self.strategies]
        names = sorted(set(layouts))
        engine = np.array([self.memory.engine.get(i, (0, 0, 0))
                           for i in range(len(self.strategies))], dtype=np.int64).reshape(-1, 3)
        return {
            # need_scale of each strategy's method: its own memory band within the offers'
            # usable memory, which is stated at the request's widest band
            "scale": np.array([need_scale(self.request, s.method) for s in self.strategies]),
            "apart": np.array([s.groups if s.placement != "colocate" else 0
                               for s in self.strategies], dtype=np.int64),
            "layout": np.array([names.index(k) for k in layouts], dtype=np.int64),
            "engine": engine,
        }

    @cached_property
    def _engines(self) -> dict[tuple[object, ...], Engine]:
        return {}

    def engine_at(self, si: int, dp: int, mb: int = 1) -> Engine:
        """rollout.engine of strategy ``si`` with data-parallel degree dp, sized to its
        batch (no capacity: a fixed gpu_memory_utilization is handled by _with_engine); an
        engine on the actor's weights generates micro-batch ``mb`` per call (its log-prob
        batch, unless the request pins one)."""
        s = self.strategies[si]
        mb = engine_batch(self.base, mb)
        key = (*s.engine_layout, dp, mb)
        if key not in self._engines:
            cfg = _with_dp(self.base.model_copy(update={
                "rollout_tp": s.rollout_tp, "placement": s.placement, "role_gpus": s.role_gpus,
                "micro_batch_size": mb}), dp)
            self._engines[key] = engine(self.model, cfg, None)
        return self._engines[key]

    def gpu_need_mib(self, si, tp: int, pp: int, *, dp, mb):
        """Per-GPU MiB of the worst phase, from the tables (the encoding's and the oracle's);
        elementwise on numpy arrays of strategies, dp and micro-batch (candidate_rows). Each
        strategy's need is scaled by its method's need_scale, so one usable capacity per offer
        (at the request's widest memory band) holds each method to its own band.

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
                need = self._with_engine(si, dp, mb, need, fixed)
            worst = np.maximum(worst, need)
        scale = self._strategy_arrays["scale"][si]
        out = np.where(scale == 1.0, worst + fixed,
                       np.ceil((worst + fixed) * scale).astype(np.int64))
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

    def _with_engine(self, si, dp, mb, resident, fixed):
        weights, per_seq, work = np.moveaxis(self._strategy_arrays["engine"][si], -1, 0)
        u = self.base.gpu_memory_utilization
        if u is None:
            return resident + weights + work + self._concurrency(si, dp, mb) * per_seq
        # the share kept at the strategy's own band (the result is scaled to the widest after)
        keep = (1 - request_margin(self.request)) / self._strategy_arrays["scale"][si]
        room = np.maximum(keep - u, 1e-12)
        scaled = np.ceil((resident + fixed) * keep / room).astype(np.int64) - fixed
        engine_min = np.ceil((weights + work + per_seq + fixed) * keep / u).astype(np.int64) \
            - fixed
        # keep <= u: nothing is left for training states
        return np.where(keep - u <= 0, 2**40, np.maximum(scaled, engine_min))

    def _concurrency(self, si, dp, mb):
        """engine_at(si, dp, mb).concurrency elementwise, once per engine layout, dp (and
        micro-batch for an engine on the actor's weights)."""
        mb = np.broadcast_to(engine_batch(self.base, mb), np.shape(dp))
        key = engine_code(self._strategy_arrays["layout"][si], dp, mb)
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        conc = np.array([self.engine_at(int(si.flat[i]), int(dp.flat[i]),
                                        int(mb.flat[i])).concurrency
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
    resolved = catalog.model(request.model)
    model = resolved.spec
    validate_plan_request(request, model)
    framework = for_request(catalog, request)
    model = built_model(framework.profile, model)
    missing = lacks_model(framework.profile, model.id) or _unwritten(framework.profile,
                                                                  request.workload)
    if missing:
        raise PlannerError(missing)
    request = request.model_copy(update={
        "stack": framework.stack, "framework": framework.profile.id,
        # owned hardware costs nothing to get: the plan is the fastest
        **({"objective": "time"} if request.pricing == "owned" else {}),
        **(request.prompt_group_step() if framework.profile.value("batch_counts_prompts") else {})})
    roles = RoleModels(
        critic=catalog.model(request.critic_model).spec if request.critic_model else None,
        reward=catalog.model(request.reward_model).spec if request.reward_model else None,
    )
    offers, unoffered = _offers(request, catalog)
    base = _base_config(request, framework.profile)
    wrong = {o.gpu.id: why for o in offers
             if (why := lacks_precision(framework.profile, base, o.gpu))}
    offers = [o for o in offers if o.gpu.id not in wrong]
    unoffered += [f"{gpu}: {why}" for gpu, why in wrong.items()]
    domains = _domains(request, model, framework.profile, base=base, offers=offers)
    strategies = _choices(domains, framework.profile, base=base)
    tps, pps, mbs = domains["tp"], domains["pp"], domains["micro_batch_size"]
    if not strategies:
        raise PlannerError(f"--framework {framework.profile.id} runs none of the requested "
                           f"layouts: {_why_none(domains, framework.profile, base=base)}; name "
                           "a framework that does ('planner catalog frameworks')")
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
        launchable=_launchable(strategies, framework.profile, base=base, tps=tps),
        checkpoint=resolved.checkpoint,
    )


def _why_none(domains: Domains, profile: Profile, *, base: TrainConfig) -> str:
    """What rules out every candidate on this framework: the distinct reasons (unsupported,
    unlaunchable) of the requested combinations, the most common first."""
    seen: dict[str, int] = {}
    for c in (c for c in choices(domains) if c.dp_shard is None):  # hybrid: FSDP variants
        cfg = base.model_copy(update={**c._asdict(), "num_gpus": 2})
        for why in (*unsupported(profile, cfg), *unlaunchable(profile, cfg)):
            seen[why] = seen.get(why, 0) + 1
    ranked = sorted(seen, key=lambda w: -seen[w])
    return "; ".join(ranked[:3]) or "; ".join(unsupported(profile, base))


def _unwritten(profile: Profile, workload: str) -> str | None:
    """Why no plan is made on ``profile`` for ``workload``: the planner writes no launch for it
    (catalog.launches), and a plan its own exporter refuses is no plan; None when it does."""
    if launch_format_of(profile, workload) is not None:
        return None
    return (f"--framework {profile.id}: the planner writes no launch of its {workload} runs, "
            f"so it plans none ('planner check --framework {profile.id}' predicts a layout's "
            f"memory and speed); plan on one it launches: {', '.join(written_for(workload))}")


def _launchable(strategies: tuple[Choice, ...], profile: Profile, *, base: TrainConfig,
                tps: tuple[int, ...]) -> dict[tuple[int, bool], tuple[bool, ...]]:
    """PlanSpace.launchable: for one GPU (tp 1) and for several GPUs at each tp, which
    strategies the framework runs at that GPU count (gpu_count_lacks) and its launch format
    expresses at that tp (unlaunchable)."""
    def runs(c: Choice, tp: int, n: int) -> bool:
        cfg = base.model_copy(update={**c._asdict(), "tp": tp, "num_gpus": n})
        return not gpu_count_lacks(profile, cfg) and not unlaunchable(profile, cfg)
    keys = [(1, False), *((tp, True) for tp in tps)]
    return {(tp, many): tuple(runs(c, tp, max(tp, 2) if many else 1) for c in strategies)
            for tp, many in keys}


def _domains(request: PlanRequest, model: ModelSpec, profile: Profile, *, base: TrainConfig,
             offers: list[Offer]) -> Domains:
    """The request's domains on this framework (PlanRequest.domains): its sharding labels and
    parallel axes; a pin of an axis it does not run is a PlannerError, and RL pins are checked
    as the engine's options when the trainer generates (validate_engine). The offers' hosts
    bound tp and are the hybrid shard groups (hybrid_shard_sizes; tp = pp = cp = 1)."""
    sizes = tuple(sorted({o.gpus_per_host for o in offers}))
    hybrid = plan_hybrid_shards(request, profile, sizes, cp=base.cp)
    parallel = launch_parallelism(profile)
    names = {"tp": "tensor", "pp": "pipeline", "ep": "expert"}
    for axis in ("tp", "pp", "ep"):
        if (getattr(request, axis) or 1) > 1 and axis not in parallel:
            raise PlannerError(
                f"--{axis} {getattr(request, axis)}: --framework {profile.id} does not "
                f"run {names[axis]} parallelism (or its launch format does not express it); "
                "name one that does ('planner catalog frameworks', column parallel)")
    if request.is_rl and base.generates_in_trainer:
        validate_engine(base.model_copy(update={
            "placement": request.placement or "colocate", "rollout_tp": request.rollout_tp or 1,
            "offload_idle": bool(request.offload_idle)}))
    return request.domains(model=model, per_node=max(sizes, default=8),
                           shardings=plan_shardings(profile),
                           parallel=parallel, trainer_generates=base.generates_in_trainer,
                           default_rank=profile.value("lora_rank"), hybrid_shards=hybrid)


def _choices(domains: Domains, profile: Profile, *, base: TrainConfig) -> tuple[Choice, ...]:
    """The candidates of the searched fields (domains.choices) that the framework runs (on
    several GPUs, its sharding as a multi-GPU job) and its launch format expresses."""
    def runs(cfg: TrainConfig) -> bool:  # GPU-count limits are the rows' (_launchable)
        return not unsupported(profile, cfg, at_gpu_count=False) \
            and not unlaunchable(profile, cfg)
    return tuple(c for c in choices(domains)
                 if runs(base.model_copy(update={**c._asdict(), "num_gpus": 2})))


def _base_config(request: PlanRequest, profile: Profile) -> TrainConfig:
    """The TrainConfig every row shares: the request's workload and fixed fields, with the
    framework profile's settings applied."""
    base = TrainConfig(**request.job_fields(), framework=profile.id, **request.fixed)
    return apply(base, profile)


def host_sizes(space: PlanSpace) -> tuple[int, ...]:
    """The distinct GPUs-per-host counts of the offers (host RAM depends on ranks per host)."""
    return tuple(sorted({o.gpus_per_host for o in space.offers}))


def candidate_rows(space: PlanSpace) -> list[Row]:
    """Every (strategy, tp, pp, dp, micro-batch) that completes the global batch, respects the
    GPU-count limit, carves the strategy's expert parallel group out of dp x cp, spans hosts
    of its hybrid shard group (tp = pp = 1) and fits the largest offered GPU; needs from the
    memory tables (numpy over every strategy, dp and micro-batch of one tp and pp at once)."""
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
    # ep divides dp x cp (request_checks.ep_error): the expert grid is carved from them
    eps = np.array([s.ep for s in space.strategies], dtype=np.int64)
    shard, cp = strategy_shards(space.strategies), space.base.cp
    # every (strategy, dp, micro-batch) of one (tp, pp) at once, in the order rows are listed
    si = np.repeat(np.arange(len(space.strategies), dtype=np.int64), len(dps))
    dp, mb = np.tile(dps, len(space.strategies)), np.tile(mbs, len(space.strategies))
    order = []
    for tp in space.tps:
        for pp in space.pps:
            ok = (space.num_gpus(si, tp, pp, dp=dp) <= max_gpus) & (dp % rtp[si] == 0) & (
                (dp * cp) % eps[si] == 0) & ((shard[si] == 0) | (
                    (tp * pp == 1) & (dp > shard[si]) & (dp % np.maximum(shard[si], 1) == 0)))
            s_, d_, m_ = si[ok], dp[ok], mb[ok]
            need = space.gpu_need_mib(s_, tp, pp, dp=d_, mb=m_)
            keep = need <= largest
            s_, d_, m_, need = s_[keep], d_[keep], m_[keep], need[keep]
            n = space.num_gpus(s_, tp, pp, dp=d_)
            if space.launchable:  # the framework runs and launches it at this count and tp
                one = np.array(space.launchable.get((1, False), ()), dtype=bool)
                many = np.array(space.launchable[(tp, True)], dtype=bool)
                runs = np.where(n == 1, one[s_] if len(one) else False, many[s_])
                s_, d_, m_, need, n = s_[runs], d_[runs], m_[runs], need[runs], n[runs]
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
