"""Fixed hardware, fixed job: the batch settings that maximise throughput, or fill GPU memory up
to a target (``planner tune``).

The search enumerates a bounded candidate set (tune_space.TUNE_DOMAINS: a domain of values per
open TrainConfig field, a pin's domain its one value) filtered by divisibility rules and
evaluates every candidate with the pure models exactly as ``planner check`` does
(workloads.estimate_memory, rltime.workload_throughput). Settings searched: micro-batch, gradient
accumulation (global batch = micro x accumulation x dp), checkpointing when left open, and for
PPO/GRPO the prompts per iteration (rollout_batch), samples per prompt (rollout_n, GRPO only: PPO
samples one response per prompt unless pinned) and the forward-only (log-prob) micro-batch.

Rules every candidate keeps:

* global batch = micro x accumulation x dp, so it is a multiple of micro x dp;
* PPO/GRPO: the rollout sequences of an iteration (prompts x samples) are a multiple of the GPU
  count (an even split over the engines), of micro x dp (every update micro-step full), of the
  global batch (every optimizer step full; left open, the global batch is all of them: one
  optimizer step per iteration) and of logprob micro x dp (every forward micro-step full);
* pins (micro-batch, accumulation, global batch, prompts, samples, logprob micro-batch,
  checkpointing) are kept; pins that break a rule are bad input (PlannerError).

Ranking, a total order (same input, same answer):

* ``throughput``: candidates within ``tie_tolerance`` (default 1 %) of the best tokens/s tie
  (the model is not finer than that, and without it every open total would grow to the edge of
  the candidate set for a fraction of a percent); ties go to fewer, larger micro-batches (update,
  then log-prob: the speed model has no per-micro-step efficiency term, real kernels run faster
  on larger batches), then to lower memory, then to less recomputation and smaller totals
  (sequences per iteration; for one sequence count, samples per prompt nearest the workload's
  default, GRPO 5, as the split does not change the prediction; then the global batch);
* ``memory``: candidates within ``tie_tolerance`` of capacity of the fullest one under the target
  tie; ties go to higher throughput (banded the same way), then as above (fuller memory before
  the totals).

Pruning: with everything but the micro-batches fixed ("an outer setting"), memory grows with the
update micro-batch (for a fixed gradient-accumulation regime: accumulation 1 drops the
accumulated-gradient buffer and is searched on its own) and with the log-prob micro-batch, and
throughput never falls as micro-batches grow (fewer micro-steps for the same global batch). So
the largest fitting micro-batch, then the largest fitting log-prob micro-batch, of each outer
setting dominates the smaller ones under both rankings; they are found by bisection.
``tune_space.candidate_configs`` lists the whole unpruned set (the test oracle).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from planner.catalog.frameworks import built_model
from planner.catalog.load import Catalog
from planner.catalog.request import (
    DEFAULT_ROLLOUT_N,
    TrainConfig,
)
from planner.catalog.resolve import (
    catalog_or_default,
    job_framework,
    job_platform,
    resolve_job,
    role_models,
)
from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec, gpus_per_host
from planner.errors import PlannerError
from planner.inputs import check_choice, check_confidence, check_margin, check_range, check_type
from planner.models.bands import memory_headroom, planning_margin
from planner.models.calibration import MIB
from planner.models.memory import GIB, MemoryEstimate, engine_utilization_to_set
from planner.models.rltime import workload_throughput
from planner.models.rollout import on_trainer_model
from planner.models.workloads import estimate_memory
from planner.solver.requirements import Requirement, all_hold, parse
from planner.solver.tune_space import (
    CHECKPOINT_ORDER,
    TUNE_DOMAINS,
    Pins,
    _check_pins,
    _config,
    _gpu_unit,
    _Outer,
    outer_settings,
    pinned_fields,
    tune_domains,
)

Objective = Literal["throughput", "memory"]
OBJECTIVES: tuple[str, ...] = ("throughput", "memory")
DEFAULT_TIE_TOLERANCE = 0.01
RUNNERS_UP = 5
@dataclass(frozen=True)
class Candidate:
    """One evaluated setting: its config, memory, and (if it fits) throughput."""

    config: TrainConfig
    memory: MemoryEstimate
    fits: bool
    throughput: Any = None  # ThroughputEstimate or rltime.RLStepEstimate; None when not fitting

    @property
    def per_gpu_gib(self) -> float:
        """The device peak per GPU, GiB."""
        return self.memory.device / GIB

    @property
    def tokens_per_s(self) -> float | None:
        """Training tokens per second, None when not estimated."""
        return None if self.throughput is None else self.throughput.tokens_per_s

    @property
    def settings(self) -> dict[str, Any]:
        """The candidate's settings for the tune document."""
        return settings_of(self.config, self.memory)


@dataclass(frozen=True)
class TuneResult:
    """``found`` with the best setting and runners-up, or ``infeasible`` with the setting that
    came closest (least memory)."""

    status: Literal["found", "infeasible"]
    objective: str
    model: str
    asked_as: str
    gpu: str
    num_gpus: int
    platform: str | None
    margin: float
    memory_target: float | None
    limit_gib: float
    capacity_gib: float
    tie_tolerance: float
    best: Candidate | None
    runners_up: tuple[Candidate, ...]
    smallest: Candidate | None
    evaluated: int
    space: dict[str, tuple[Any, ...]]
    notes: tuple[str, ...] = field(default_factory=tuple)
    confidence: float = 0.0  # the memory band's upper edge at this confidence is held
    memory_headroom: float = 1.0  # that edge / the predicted peak (planner.models.bands)


def settings_of(cfg: TrainConfig, est: MemoryEstimate | None = None) -> dict[str, Any]:
    """The batch settings of ``cfg`` by TrainConfig field name (RL: the rollout engine, and a
    vLLM-style engine's memory fraction to set, rounded up to a percent, when it was left
    open)."""
    out: dict[str, Any] = {
        "micro_batch_size": cfg.micro_batch_size, "grad_accum": cfg.grad_accum,
        "global_batch_size": cfg.global_batch_size, "checkpointing": cfg.checkpointing,
    }
    if cfg.is_rl:
        out |= {"rollout_batch": cfg.rollout_batch, "rollout_n": cfg.samples_per_prompt,
                "logprob_micro_batch": cfg.logprob_batch, "rollout_engine": cfg.rollout_engine}
        if not on_trainer_model(cfg):  # a generator on the trainer's model sets no fraction
            out["gpu_memory_utilization"] = engine_utilization_to_set(cfg, est)
    return out


# ---------------------------------------------------------------------------------------------
# The problem: fixed model, GPU and layout
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Problem:
    model: ModelSpec
    asked_as: str
    gpu: GpuSpec
    platform: PlatformSpec | None
    per_node: int | None
    critic: ModelSpec | None
    reward: ModelSpec | None
    base: TrainConfig
    stack: str
    margin: float  # the share of capacity kept free: margin and band (bands.planning_margin)
    limit: float  # device-level bytes a candidate may use
    headroom: float = 1.0  # the memory band's upper edge / the predicted peak

    def evaluate(self, cfg: TrainConfig) -> Candidate:
        est = estimate_memory(self.model, self.gpu, cfg, gpus_per_node=self.per_node,
                              critic=self.critic, reward=self.reward)
        fits = est.fits(self.margin) and est.device <= self.limit
        tput = None
        if fits:
            tput = workload_throughput(self.model, self.gpu, cfg, platform=self.platform,
                                       stack=self.stack, critic=self.critic, reward=self.reward)
        return Candidate(cfg, est, fits, tput)


def _problem(*, model: str, gpu: str, config: TrainConfig, catalog: Catalog | None,
             margin: float, memory_target: float | None,
             stack: str | None, platform: str | None, critic_model: str | None,
             reward_model: str | None, confidence: float = 0.0) -> _Problem:
    """Resolve names and validate the fixed part of the job, as api.check does; the memory
    limit is capacity x (1 - margin) / headroom at ``confidence``, or the target if lower."""
    check_margin(margin)
    check_confidence(confidence)
    if memory_target is not None:
        check_range(memory_target, name="--memory-target", lo=0, hi=1, lo_open=True,
                    hint=" (a fraction of capacity, e.g. 0.875)")
    cat = catalog_or_default(catalog)
    resolved, gpu_spec, cfg = resolve_job(cat, model, gpu, config=config, reward_model=reward_model)
    cfg, framework, stack = job_framework(cat, cfg, stack)
    resolved = replace(resolved, spec=built_model(framework.profile, resolved.spec))
    headroom = memory_headroom(framework=framework.profile.id, workload=cfg.workload,
                               methods=(cfg.method,), p=confidence)
    margin = planning_margin(margin, headroom)
    # the GPUs tune fills are the user's: the host that holds them on the fewest hosts
    plat = job_platform(gpu_spec, cat, pricing="owned", platform=platform,
                        num_gpus=cfg.num_gpus)
    per_node = gpus_per_host(gpu_spec, plat) if plat else None
    critic, reward = role_models(cat, cfg, critic_model, reward_model=reward_model)
    fraction = min(1.0 - margin, memory_target if memory_target is not None else 1.0)
    return _Problem(resolved.spec, model, gpu_spec, plat, per_node, critic, reward, cfg,
                    stack, margin, fraction * gpu_spec.memory_gib * GIB, headroom)


# ---------------------------------------------------------------------------------------------
# Candidate settings under the divisibility rules
# ---------------------------------------------------------------------------------------------
def _tail(c: Candidate) -> tuple[Any, ...]:
    cfg = c.config
    return (-cfg.micro_batch_size, -(cfg.logprob_batch if cfg.is_rl else 0))


def _totals(c: Candidate) -> tuple[Any, ...]:
    cfg = c.config
    seqs = cfg.rollout_batch * cfg.samples_per_prompt if cfg.is_rl else 0
    n = cfg.samples_per_prompt
    default_n = DEFAULT_ROLLOUT_N.get(cfg.workload, 1)
    return (CHECKPOINT_ORDER.index(cfg.checkpointing), seqs, abs(n - default_n), n,
            cfg.global_batch_size, cfg.micro_batch_size, cfg.logprob_batch)


def _band(best: float, value: float, unit: float) -> float:
    """0 for values within ``unit`` of the best, 1 for the next ``unit``, ...; the negated
    value itself when unit is 0 (exact ranking)."""
    return math.floor((best - value) / unit) if unit > 0 else -value


def ranking(candidates: list[Candidate], objective: str,
            tie_tolerance: float) -> Callable[[Candidate], tuple[Any, ...]]:
    """The sort key of fitting ``candidates`` under ``objective`` (module docstring)."""
    fastest = max(c.tokens_per_s for c in candidates)

    def speed(c: Candidate) -> float:
        return _band(fastest, c.tokens_per_s, tie_tolerance * fastest)

    if objective == "memory":
        fullest = max(c.memory.device for c in candidates)
        unit = tie_tolerance * candidates[0].memory.capacity
        return lambda c: (_band(fullest, c.memory.device, unit), speed(c), *_tail(c),
                          -round(c.memory.device), *_totals(c))
    return lambda c: (speed(c), *_tail(c), round(c.memory.device), *_totals(c))


# ---------------------------------------------------------------------------------------------
# Search
# ---------------------------------------------------------------------------------------------
def _largest(items: tuple[Any, ...], ok: Callable[[Any], bool]) -> int:
    """Index of the last item with ok(item) when ok holds on a prefix (-1 if none): the first
    item is probed first, then bisection."""
    if not items or not ok(items[0]):
        return -1
    lo, hi, best = 1, len(items) - 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(items[mid]):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


class _Search:
    def __init__(self, problem: _Problem):
        self.problem = problem
        self.cache: dict[TrainConfig, Candidate] = {}

    def evaluate(self, cfg: TrainConfig) -> Candidate:
        if cfg not in self.cache:
            self.cache[cfg] = self.problem.evaluate(cfg)
        return self.cache[cfg]

    def outer_bests(self, outer: _Outer, rules: tuple[Requirement, ...] = ()
                    ) -> list[Candidate]:
        """The dominant candidates of one outer setting: per accumulation regime (1, or more),
        the largest fitting micro-batch with the largest fitting log-prob micro-batch, among the
        settings that keep the user's rules (a subset keeps the dominance: memory still grows
        with the micro-batches)."""
        base = self.problem.base
        out = []
        low_lp = outer.logprobs[0]
        for regime in (False, True):
            pairs = tuple(p for p in outer.inner if (p[1] > 1) == regime and any(
                all_hold(rules, _config(base, outer, p[0], p[1], lp)) for lp in outer.logprobs))
            i = _largest(pairs, lambda p: self.evaluate(
                _config(base, outer, p[0], p[1], low_lp)).fits)
            if i < 0:
                continue
            m, a = pairs[i]
            lps = tuple(lp for lp in outer.logprobs
                        if all_hold(rules, _config(base, outer, m, a, lp)))
            j = _largest(lps, lambda lp, m=m, a=a: self.evaluate(
                _config(base, outer, m, a, lp)).fits)
            if j < 0:
                continue
            out.append(self.evaluate(_config(base, outer, m, a, lps[j])))
        return out


def tune(
    *, model: str, gpu: str, config: TrainConfig, catalog: Catalog | None = None,
    objective: str = "throughput", memory_target: float | None = None,
    margin: float = 0.02, confidence: float = 0.0,
    stack: str | None = None, platform: str | None = None, critic_model: str | None = None,
    reward_model: str | None = None, pins: Mapping[str, Any] | Pins | None = None,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    space: Mapping[str, tuple[Any, ...]] | None = None,
    requires: tuple[str, ...] = (),
) -> TuneResult:
    """Best batch settings of ``config`` (its layout, method and workload fixed; its batch fields
    replaced) on ``config.num_gpus`` x ``gpu``.

    ``objective`` "throughput" maximises tokens/s; "memory" the per-GPU memory (device level)
    up to ``memory_target`` x capacity. ``memory_target`` caps memory under either objective
    (default: capacity less ``margin``, over the memory band's upper edge at ``confidence``:
    _problem). ``pins`` fixes settings, by TrainConfig field (tune_space.PIN_FLAGS; Pins
    names them as the CLI does); the rest are searched over their domains (TUNE_DOMAINS, each
    replaced by ``space``'s values for that field). ``requires`` are rules over the batch
    settings every candidate keeps (requirements.parse: e.g. "rollout_batch % num_gpus ==
    0"). Bad input raises PlannerError; nothing fitting is status "infeasible"."""
    check_type(config, TrainConfig, name="config")
    check_choice(objective, OBJECTIVES, name="--objective")
    check_range(tie_tolerance, name="--tie-tolerance", lo=0, hi=0.5, hi_open=True)
    rules = tuple(parse(r) for r in requires)
    tried = _tried(space)
    problem = _problem(model=model, gpu=gpu, config=config, catalog=catalog, margin=margin,
                       confidence=confidence,
                       memory_target=memory_target, stack=stack, platform=platform,
                       critic_model=critic_model, reward_model=reward_model)
    base = problem.base
    pins = pinned_fields(pins)
    if base.checkpoint_fraction < 1:  # a share of the layers under full checkpointing
        pins = {"checkpointing": "full", **pins}
    _check_pins(base, pins)
    domains = tune_domains(base, pins, tried)
    outers = outer_settings(base, domains, pins)
    if not outers:
        raise PlannerError(_no_candidates(base))
    search = _Search(problem)
    bests = [c for o in outers for c in search.outer_bests(o, rules)]
    evaluated = list(search.cache.values())
    smallest = min(evaluated, key=lambda c: (c.memory.device, *_totals(c)))
    cap = problem.gpu.memory_gib
    common = dict(
        objective=objective, model=problem.model.id, asked_as=model, gpu=problem.gpu.id,
        num_gpus=base.num_gpus, platform=problem.platform.id if problem.platform else None,
        margin=margin, memory_target=memory_target, limit_gib=problem.limit / GIB,
        capacity_gib=cap, tie_tolerance=tie_tolerance, evaluated=len(evaluated),
        space=_space_doc(base, domains), smallest=smallest, confidence=confidence,
        memory_headroom=problem.headroom,
    )
    kept = tuple(f"--require {r.text}: kept" for r in rules)
    if not bests:
        why = ("no candidate keeps every --require rule and fits: "
               + "; ".join(r.text for r in rules),) if rules else ()
        return TuneResult(status="infeasible", best=None, runners_up=(), notes=why, **common)
    bests.sort(key=ranking(bests, objective, tie_tolerance))
    return TuneResult(status="found", best=bests[0], runners_up=_distinct(bests)[1:1 + RUNNERS_UP],
                      notes=(*_notes(bests[0], pins), *kept), **common)


def _distinct(ranked: list[Candidate]) -> tuple[Candidate, ...]:
    """``ranked`` without candidates whose predicted memory (MiB) and speed (4 digits) equal an
    earlier one's: e.g. the same sequences split into other prompts x samples, or selective
    recomputation where flash attention leaves nothing to recompute."""
    seen, out = set(), []
    for c in ranked:
        sig = (round(c.memory.device / MIB), f"{c.tokens_per_s:.4g}")
        if sig not in seen:
            seen.add(sig)
            out.append(c)
    return tuple(out)


def _tried(space: Mapping[str, tuple[Any, ...]] | None) -> dict[str, tuple[Any, ...]]:
    """TUNE_DOMAINS with ``space``'s values for the fields it names (bad input: another
    field)."""
    space = check_type(space or {}, Mapping, name="space")
    unknown = sorted(set(space) - set(TUNE_DOMAINS))
    if unknown:
        raise PlannerError(f"space field {unknown[0]!r} is not one of {', '.join(TUNE_DOMAINS)}")
    return {**TUNE_DOMAINS, **{k: tuple(v) for k, v in space.items()}}


def _space_doc(base: TrainConfig, domains: Mapping[str, tuple[Any, ...]]
               ) -> dict[str, tuple[Any, ...]]:
    """What was searched per setting (a pin shows as its one value); the accumulation where
    it is searched on its own (not RL, no pinned global batch)."""
    shown = not base.is_rl and "global_batch_size" not in domains
    return {k: v for k, v in domains.items() if k != "grad_accum" or shown}


def _notes(best: Candidate, pins: Mapping[str, Any]) -> tuple[str, ...]:
    cfg = best.config
    notes = []
    if cfg.is_rl and "global_batch_size" not in pins:
        notes.append("global batch left open: all rollout sequences of an iteration make one "
                     "optimizer step (pin --global-batch for several mini-batches)")
    if cfg.is_rl and cfg.gpu_memory_utilization is None and best.memory.engine_utilization \
            and "gpu_memory_utilization" in best.settings:
        notes.append("the rollout engine is sized to the batch: set vLLM gpu_memory_utilization "
                     f">= {best.settings['gpu_memory_utilization']:.2f}")
    return tuple(notes)


def _no_candidates(base: TrainConfig) -> str:
    """Why the divisibility rules leave nothing to evaluate (one line)."""
    if base.is_rl:
        return (f"no batch settings meet the divisibility rules on {base.num_gpus} GPU(s) "
                f"(dp {base.dp}): rollout sequences (prompts x samples) must be a multiple of "
                f"{_gpu_unit(base)[1]}, of micro-batch x dp, of the global batch and of logprob "
                "micro-batch x dp; relax --rollout-batch/--rollout-n/--global-batch/"
                "--micro-batch/--grad-accum")
    return (f"no batch settings meet the divisibility rules (dp {base.dp}): the global batch "
            "must be micro-batch x accumulation x dp; relax --global-batch, --micro-batch or "
            "--grad-accum")
