"""Step times of a plan space: the throughput model per (offer, row), memoised (``Timing``),
and the vectorised lower bounds on them that the exact search orders by (``RowArrays``).

This module sits below space.py (whose PlanSpace.timing builds a Timing): it reads the space
through ``TimedSpace``, the part of PlanSpace that step times depend on.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from planner.catalog.domains import Choice
from planner.catalog.plan_request import MAX_GLOBAL_BATCH, PlanRequest
from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models import efficiency as eff
from planner.models.attention import SEQ_POINTS, attention_rate
from planner.models.flops import matmul_precision, training_flops
from planner.models.network import resolve_links, ring_factor
from planner.models.rltime import (
    engine_side,
    gathered_weight_bytes,
    update_steps,
    workload_throughput,
)
from planner.models.rollout import Engine, on_trainer_model, policy_bytes_per_engine_gpu
from planner.models.throughput import (
    forward_flops_per_token,
    matmul_rate,
    pipeline_bubble_fraction,
)
from planner.models.workloads import roles
from planner.solver.hardware import Offer
from planner.solver.rows import Row, strategy_shards
from planner.solver.tables import RoleModels


class TimedSpace(Protocol):
    """What step times read of space.PlanSpace (which imports this module)."""

    model: ModelSpec
    request: PlanRequest
    offers: tuple[Offer, ...]
    strategies: tuple[Choice, ...]
    base: TrainConfig
    roles: RoleModels
    host_sizes: tuple[int, ...]
    timing: Timing

    def engine_at(self, si: int, dp: int, mb: int = 1) -> Engine:
        """rollout.engine of strategy ``si`` with data-parallel degree ``dp`` (and generation
        batch ``mb``, engine_batch)."""


def engine_batch(base: TrainConfig, mb: Any) -> Any:
    """What an engine is keyed by besides its layout and dp: the micro-batch (scalar or array)
    for an engine on the actor's weights (its generation batch: rollout.engine), else 1."""
    return mb if base.engine_on_actor_weights else 1


def engine_code(layout: Any, dp: Any, batch: Any) -> Any:
    """One integer per (engine layout index, dp, engine_batch): the engines' memo key."""
    return (layout * (MAX_GLOBAL_BATCH + 1) + dp) * (MAX_GLOBAL_BATCH + 1) + batch


def _column(rows: list[Row], name: str) -> np.ndarray:
    """One integer field of every row, as a numpy column."""
    return np.fromiter((getattr(r, name) for r in rows), dtype=np.int64, count=len(rows))


def _per_value(rows: list[Row], values: np.ndarray, of: Any) -> np.ndarray:
    """of(first row with each value) for every row: a table over the distinct values, taken by
    their first row (the memoised parts are per strategy or layout)."""
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    table = np.array([of(rows[i]) for i in first.tolist()], dtype=float)
    return table[inverse.reshape(-1)] if len(uniq) else np.zeros((0, *table.shape[1:]))


class Timing:
    """step_time_us memoised per (offer, row), and the parts of its lower bounds (RowArrays),
    of a space."""

    def __init__(self, space: TimedSpace) -> None:
        self._space = space
        self._steps: dict[tuple[int, Row], int] = {}
        self._flops: dict[Choice, tuple[float, float, float, int]] = {}
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
            key = self._space.strategies[row.strategy]._replace(rollout_tp=1)
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
            # 16-bit work is adapters (matmul rate) and attention (its kernel's rate,
            # throughput.compute_seconds): the faster of the two, the kernel's at the longest
            # benchmarked sequence (its fastest; RL roles' lengths differ), keeps it a bound
            longest = space.base.model_copy(update={"seq_len": SEQ_POINTS[-1]})
            attention = attention_rate(gpu, longest) * eff.attention_utilisation(util)
            self._rates[offer_idx] = (
                matmul_rate(gpu, prec, util),
                max(matmul_rate(gpu, sixteen, util), attention),
                gpu.memory_bandwidth_gbps * 1e9 * eff.DECODE_EFFICIENCY["vllm"],
            )
        return self._rates[offer_idx]

    def engine_key(self, row: Row) -> tuple[object, ...]:
        """What the generation phase reads of a row (rltime.generation_seconds): the engine
        layout of its strategy, its data-parallel degree (GPUs per group) and, for an engine
        on the actor's weights, its micro-batch (rollout.engine: the generation batch)."""
        space = self._space
        return (*space.strategies[row.strategy].engine_layout, row.dp,
                engine_batch(space.base, row.micro_batch))

    def engine_side(self, offer_idx: int, row: Row):
        """rltime.engine_side of ``row``'s engine layout on the offer's GPUs, memoised per
        layout (engine_key) and offer."""
        key = (offer_idx, self.engine_key(row))
        if key not in self._generation:
            space, offer = self._space, self._space.offers[offer_idx]
            self._generation[key] = engine_side(space.model, offer.gpu, config_for(space, row),
                                                platform=offer.links_platform)
        return self._generation[key]

    def step_us(self, offer_idx: int, row: Row) -> int:
        """step_time_us of ``row`` on offer ``offer_idx``, memoised."""
        key = (offer_idx, row)
        if key not in self._steps:
            self._steps[key] = step_time_us(self._space, offer_idx, row)
        return self._steps[key]


# Step time (us) of a pair that is not a candidate (encoding.add_step_time leaves it out). A
# real step is capped just below it: steps over ~28 hours (a GPU of a few GFLOP/s) tie on
# time in the solver, which could otherwise lose every pair of a plan it had found; the plan
# reports the analytic model's time, not this integer.
NO_TIME = 10**11
MAX_STEP_US = NO_TIME - 1


def step_time_us(space: TimedSpace, offer_idx: int, row: Row) -> int:
    """Optimizer-step time of ``row`` on the offer's GPUs in microseconds, from the throughput
    model with the request's stack (the job time is proportional: fixed tokens per step)."""
    offer = space.offers[offer_idx]
    side = space.timing.engine_side(offer_idx, row) if space.base.is_rl else None
    est = workload_throughput(space.model, offer.gpu, config_for(space, row),
                              platform=offer.links_platform, stack=space.request.stack,
                              critic=space.roles.critic, reward=space.roles.reward,
                              gpus_per_node=offer.gpus_per_host, side=side)
    return min(MAX_STEP_US, max(1, round(est.step_time_s * 1e6)))


def config_for(space: TimedSpace, row: Row) -> TrainConfig:
    """The concrete TrainConfig of one row."""
    return layout_config(space, row.strategy, num_gpus=row.num_gpus, tp=row.tp, pp=row.pp,
                         micro_batch=row.micro_batch, grad_accum=row.grad_accum)


def layout_config(space: TimedSpace, si: int, *, num_gpus: int, tp: int, pp: int,
                  micro_batch: int, grad_accum: int) -> TrainConfig:
    """The concrete TrainConfig of strategy ``si`` on a layout (separate RL placement: half the
    GPUs run the engines; split: every role and the engines an equal group)."""
    s = space.strategies[si]
    group = num_gpus // s.groups
    return space.base.model_copy(update={
        **s._asdict(),
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

    def __init__(self, space: TimedSpace, rows: list[Row]) -> None:
        self.space, self.rows = space, rows
        self._bounds: dict[int, np.ndarray] = {}
        n_rows = len(rows)
        st, tp, pp, dp, ga = (_column(rows, k) for k in ("strategy", "tp", "pp", "dp",
                                                         "grad_accum"))
        self.num_gpus = _column(rows, "num_gpus")  # Offer.purchase_usd
        self.strategy = st.astype(float)
        self.gpu_need = _column(rows, "gpu_need_mib").astype(float)
        self.tp = tp.astype(float)
        self.dp_shard = strategy_shards(space.strategies)[st]  # rules.Need.dp_shard
        self.grad_accum = ga.astype(float)
        self.host_need = np.array([r.host_need_mib for r in rows], dtype=float).reshape(
            n_rows, len(space.host_sizes))
        trainers = (dp * tp * pp).astype(float)
        bubble = _per_value(rows, pp * (MAX_GLOBAL_BATCH + 1) + ga,
                            lambda r: pipeline_bubble_fraction(r.pp, r.grad_accum))
        req = space.request
        tokens = req.sequences_per_step * req.tokens_per_sequence
        flops = _per_value(rows, st, space.timing.strategy_flops).reshape(n_rows, 4)
        share = tokens / trainers
        self.lin = share * flops[:, 0] * (1 + bubble)
        self.s16 = share * flops[:, 1] * (1 + bubble)
        self.fixed = np.full(n_rows, eff.step_overhead(req.stack))
        self.fwd = np.zeros(n_rows)
        self.gen = np.zeros(n_rows)
        self.separate = np.zeros(n_rows, dtype=bool)
        self.groups = np.ones(n_rows)
        self.trainers = trainers
        self.fwd_gather = np.zeros(n_rows)
        if space.base.is_rl:
            self._add_rl(st=st, tp=tp, pp=pp, dp=dp, ga=ga, share=share, flops=flops)
            self._add_engines(st, dp)

    def _add_rl(self, *, st, tp, pp, dp, ga, share, flops) -> None:
        """The RL columns of the training side: every role's forward compute, the updates'
        share of the sampled sequences, the forward passes' weight all-gathers and the per-step
        overhead of every trained role."""
        space, rows = self.space, self.rows
        req = space.request
        steps = -(-req.sequences_per_step // req.global_batch_size)
        self.fwd = share * flops[:, 2]
        # the updates train steps x accumulation x micro-batch x dp sequences (the
        # accumulation shortened and rounded when the sequences do not fill the global
        # batches: rltime.update_steps), not always the sampled ones
        seqs = space.base.rollout_batch * space.base.samples_per_prompt
        mb = _column(rows, "micro_batch")
        n_steps, accum = update_steps(seqs, mb, dp, grad_accum=ga)
        trained = n_steps * accum * mb * dp / req.sequences_per_step
        self.lin, self.s16 = self.lin * trained, self.s16 * trained
        # ZeRO-3/FSDP forward passes all-gather the roles' weights every log-prob
        # micro-step (rltime.forward_seconds): bytes per trainer GPU before the ring factor,
        # with at least ceil(sequences / (GPUs x batch)) micro-steps
        base = space.base
        seqs = base.rollout_batch * base.samples_per_prompt
        batch = base.logprob_micro_batch or _column(rows, "micro_batch")
        micro_steps = -(-seqs // (dp * tp * pp * batch))
        self.fwd_gather = micro_steps * _per_value(
            rows, (st * 4096 + tp) * 4096 + pp, space.timing.gathered_bytes)
        self.fixed = flops[:, 3] * steps * eff.step_overhead(req.stack)

    def _add_engines(self, st: np.ndarray, dp: np.ndarray) -> None:
        """The RL columns of the engines: a row of each engine layout and dp, the generation
        bound, whether the engines run apart and how many groups share the training."""
        space, rows = self.space, self.rows
        layouts = [s.engine_layout for s in space.strategies]
        names = sorted(set(layouts))
        layout = np.array([names.index(k) for k in layouts], dtype=np.int64)[st]
        # a row of each engine layout and dp (Timing.engine_key): the engine's phases are
        # timed per layout and offer, exactly (rltime.engine_side)
        batch = engine_batch(space.base, _column(rows, "micro_batch"))
        _, first, self.engine_idx = np.unique(engine_code(layout, dp, batch),
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
        # as rltime.estimate_rl_step
        links = resolve_links(offer.gpu, platform=offer.links_platform)
        # one gather spans the row's hybrid shard group, else every trainer rank
        group = np.where(self.dp_shard > 0, self.dp_shard, self.trainers)
        gpus, inverse = np.unique(group, return_inverse=True)
        per_byte = np.array([ring_factor(int(g), "all-gather") / (
            links.collective_gbps(int(g), g > links.gpus_per_node) * 1e9)
            for g in gpus.tolist()])[inverse.reshape(-1)]
        overlap = eff.OVERLAP[space.request.stack]["dp"]
        return np.maximum(0.0, self.fwd_gather * per_byte - overlap * fwd)


def _strategy_flops(space: TimedSpace, row: Row) -> tuple[float, float, float, int]:
    """Per token: (matmul-precision, 16-bit) training FLOPs summed over the trained roles,
    forward FLOPs summed over every role's forward pass, and the number of trained roles."""
    cfg = config_for(space, row)
    if not cfg.is_rl:
        f = training_flops(space.model, cfg)
        return f.linear, f.sixteen_bit, 0.0, 1
    rs = roles(space.model, cfg, critic=space.roles.critic, reward=space.roles.reward)
    lin = sixteen = fwd = 0.0
    for r in (r for r in rs if r.runs):
        fwd += forward_flops_per_token(r.model, r.cfg.seq_len)  # as rltime.forward_seconds
        if r.trained:
            f = training_flops(r.model, r.cfg)
            lin, sixteen = lin + f.linear, sixteen + f.sixteen_bit
    return lin, sixteen, fwd, sum(r.trained for r in rs)


def _generation_bytes(space: TimedSpace, row: Row) -> float:
    """Bytes each engine GPU reads while generating, at least: every decoding step of every wave
    reads the engine's weights once (throughput._decode_step; prefill, KV reads and
    communication only add time). Divided by the vLLM share of HBM bandwidth: a time bound."""
    eng = space.engine_at(row.strategy, row.dp, row.micro_batch)
    # with a fixed gpu_memory_utilization the waves depend on the GPU: one wave at least; a
    # continuous-batching engine decodes share / concurrency waves' worth (rltime.engine_side)
    if space.base.gpu_memory_utilization is not None:
        waves = 1.0
    elif on_trainer_model(space.base):
        waves = -(-eng.sequences_per_engine // eng.concurrency)
    else:
        waves = eng.sequences_per_engine / eng.concurrency
    # an engine on the actor's weights reads the actor's 16-bit weights (no copy of its own)
    read = policy_bytes_per_engine_gpu(space.model, space.strategies[row.strategy].rollout_tp) \
        if space.base.engine_on_actor_weights else eng.weights
    # the mean response (a cap above it adds the generation tail: still a lower bound)
    return waves * space.base.decoded_lengths[0] * read
