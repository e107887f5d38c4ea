"""Memory coefficients of the planner's decision space, read off the memory model.

The solver cannot call Python functions, so the per-GPU memory of a configuration must become
integer coefficients. The memory model has a fixed shape in the data-parallel degree dp: in each
phase (forward/backward, optimizer step) the reserved bytes are

    states(dp) = a + b / dp + c * [dp > 1]     model states, buffers, gathered parameters
    + min(e / dp, k)                             DeepSpeed ZeRO-3 step temporaries (one sub-group)
    + activations                                activations and loss buffers (no dp)
    + overhead(num_gpus)                         CUDA context, NCCL

with a, b, c, e, k depending on the other choices only. ``states_coefficients`` reads a, b and c
off ``memory.phase_terms`` at dp = 1, 2 and 4 (e and k off the step term at dp = 1 and a very
large dp); no physics is re-derived here, and a test checks that the decomposition reproduces
``estimate_memory`` exactly at other dp values."""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.catalog.domains import Choice, placement_groups
from planner.catalog.request import TrainConfig
from planner.catalog.specs import (
    ModelSpec,
)
from planner.models.calibration import MIB
from planner.models.memory import (
    BWD_END_PHASE,
    FWD_PHASE,
    STEP_PHASE,
    activation_phase_terms,
    device_overhead_bytes,
    reserved_bytes,
    reserved_weight,
)
from planner.models.rollout import engine_parts, on_trainer_model
from planner.models.states import steps_by_sub_group
from planner.models.workloads import (
    workload_host_ram,
    workload_phases,
)

ACTIVATION_TERMS = ("activations", "logits_and_loss", "held_outputs")


ROLLOUT_PHASE = "rollout"  # workloads.ROLLOUT_PHASE


PHASES = (FWD_PHASE, BWD_END_PHASE, STEP_PHASE)


@dataclass(frozen=True)
class StatesCoefficients:
    """Reserved bytes of the dp-dependent terms of one phase:
    a + b/dp + c*[dp > 1] + min(e/dp, k)."""

    a: float
    b: float
    c: float
    e: float = 0.0
    k: float = 0.0

    def at(self, dp: int) -> float:
        """Reserved bytes of the phase at data-parallel degree ``dp``."""
        return self.a + self.b / dp + (self.c if dp > 1 else 0.0) + min(self.e / dp, self.k)


def _with_dp(cfg: TrainConfig, dp: int) -> TrainConfig:
    """``cfg`` with data-parallel degree dp: apart from the trainer, every RL group gets dp GPUs
    (placement_groups)."""
    if cfg.is_rl and cfg.placement != "colocate":
        names = [n for n, _ in cfg.role_gpus or ()]
        gpus = placement_groups(cfg.placement, len(names)) * dp
        if cfg.placement == "separate":
            return cfg.model_copy(update={"num_gpus": gpus, "rollout_gpus": dp})
        return cfg.model_copy(update={"num_gpus": gpus,
                                      "role_gpus": tuple((n, dp) for n in names)})
    return cfg.model_copy(update={"num_gpus": cfg.tp * cfg.pp * cfg.cp * dp})


def _phases(model: ModelSpec, cfg: TrainConfig, precision: str, roles: RoleModels
            ) -> dict[str, dict[str, float]]:
    """workload_phases without the rollout engine's terms: the engine depends on the GPU count
    in a way a + b/dp cannot express (its batch is capped), so gpu_need_mib adds it exactly."""
    phases = workload_phases(model, cfg, precision, critic=roles.critic, reward=roles.reward)
    if not cfg.is_rl:
        return phases
    return {p: {k: v for k, v in t.items() if not k.startswith("engine ")}
            for p, t in phases.items()}


def _reserved_part(terms: dict[str, float], *, activations: bool) -> float:
    """Reserved bytes of the activation terms (activations=True) or of all other terms."""
    return sum(
        reserved_weight(k) * v for k, v in terms.items() if (k in ACTIVATION_TERMS) == activations
    )


@dataclass(frozen=True)
class RoleModels:
    """The critic and reward models of a PPO/GRPO request (None: the policy's architecture)."""

    critic: ModelSpec | None = None
    reward: ModelSpec | None = None


NO_ROLES = RoleModels()


def states_coefficients(
    model: ModelSpec, cfg: TrainConfig, precision: str, *, roles: RoleModels = NO_ROLES,
) -> dict[str, StatesCoefficients]:
    """a, b, c (and e, k) of every phase for the choices in ``cfg`` (its num_gpus is ignored).

    ZeRO-3's step temporaries are min(e/dp, k) (states.steps_by_sub_group): k is their value
    at dp = 1, e their value at dp = CAP_FREE_DP (far below any cap) times that dp.

    With expert parallelism (ep > 1) a layout's dp is a multiple of d = first_dp(cfg) > 1:
    the terms are read at dp = d, 2d and 4d, where every dp is above 1, so c is 0 and a + b/dp
    holds exactly for every dp of the rows (k at dp = d bounds e/dp from there on)."""
    d = first_dp(cfg)
    m1, m2, m4 = (
        _phases(model, _with_dp(cfg, dp), precision, roles) for dp in (d, 2 * d, 4 * d)
    )
    free = (_phases(model, _with_dp(cfg, CAP_FREE_DP), precision, roles)
            if steps_by_sub_group(cfg) else None)
    w = reserved_weight(STEP_TERM)
    out = {}
    for phase in m1:
        s1, s2, s4 = (_reserved_part(m[phase], activations=False) for m in (m1, m2, m4))
        e = k = 0.0
        if free is not None and STEP_TERM in m1[phase]:
            k = w * m1[phase][STEP_TERM]
            e = w * free[phase][STEP_TERM] * CAP_FREE_DP
            s1, s2, s4 = (s - w * m[phase][STEP_TERM]
                          for s, m in ((s1, m1), (s2, m2), (s4, m4)))
        b = 4 * d * (s2 - s4)
        out[phase] = StatesCoefficients(a=s1 - b, b=b, c=s2 - s1 + b / 2, e=e, k=k) if d == 1 \
            else StatesCoefficients(a=s2 - b / (2 * d), b=b, c=0.0, e=e, k=k)
    return out


def first_dp(cfg: TrainConfig) -> int:
    """The smallest data-parallel degree of a layout with cfg's ep and cp: ep divides dp x cp
    (request_checks.ep_error), so dp is a multiple of ep / gcd(ep, cp); 1 without EP. Hybrid
    sharding: dp a multiple of the shard group (dp_shard_error; ep is then 1)."""
    return cfg.dp_shard or cfg.ep // math.gcd(cfg.ep, cfg.cp)


STEP_TERM = "optimizer_step"


CAP_FREE_DP = 2**20  # a data-parallel degree at which no ZeRO-3 sub-group cap binds


def host_coefficients(model: ModelSpec, cfg: TrainConfig, roles: RoleModels = NO_ROLES,
                      *, precision: str = "bf16") -> tuple[int, int]:
    """Host RAM of one training process in MiB as a + b/dp (offloaded shards + the process),
    read off workloads.workload_host_ram at dp = 1 and 2 (with EP at dp = d and 2d, d =
    first_dp: the layouts' smallest dp)."""
    d = first_dp(cfg)
    r1, r2 = (workload_host_ram(model, _with_dp(cfg, dp), 1, precision=precision,
                                critic=roles.critic, reward=roles.reward) for dp in (d, 2 * d))
    b = 2 * d * (r1 - r2)
    return _ceil_mib(r1 - b / d), _ceil_mib(b)


def activation_reserved_bytes(
    model: ModelSpec, cfg: TrainConfig, precision: str, *, roles: RoleModels = NO_ROLES,
) -> dict[str, float]:
    """Reserved bytes of activations and loss buffers in every phase (independent of dp)."""
    if cfg.workload in ("sft", "pretrain"):  # the common case without building every term
        phases = activation_phase_terms(model, cfg)
    else:
        phases = _phases(model, cfg, precision, roles)
    return {p: _reserved_part(t, activations=True) for p, t in phases.items()}


def _ceil_mib(x: float) -> int:
    """Requirements round up to whole MiB (DESIGN.md section 6)."""
    return max(0, -(-int(round(x)) // MIB)) if x > 0 else 0


@dataclass(frozen=True)
class MemoryTables:
    """Integer MiB coefficients per phase, keyed by choice indices.

    states[phase][(s, tp, pp, accumulates)] = (a, b, c, e, k):
        a + ceil(b/dp) + c*[dp > 1] + min(ceil(e/dp), k)
    acts[phase][(s, tp, pp, in_flight)] = MiB per sequence of the micro-batch
    """

    states: dict[str, dict[tuple[int, int, int, bool], tuple[int, int, int, int, int]]]
    acts: dict[str, dict[tuple[int, int, int, int], int]]
    host: dict[tuple[int, int, int], tuple[int, int]]  # (s, tp, pp) -> per-rank host RAM (a, b)
    floor_mib: int  # allocator cache floor
    overhead_mib: int  # CUDA context per process
    multi_gpu_mib: int  # NCCL buffers when more than one GPU
    engine: dict[int, tuple[int, int, int]]  # RL: s -> engine (weights, KV per sequence,


def memory_tables(
    model: ModelSpec,
    base: TrainConfig,
    strategies: tuple[Choice, ...],
    *, tps: tuple[int, ...],
    pps: tuple[int, ...],
    precision: str = "bf16",
    roles: RoleModels = NO_ROLES,
) -> MemoryTables:
    """Evaluate the memory model once per key (states at dp = 1, 2, 4; activations at mb = 1)."""
    engine: dict[int, tuple[int, int, int]] = {}

    states: dict[str, dict] = {}
    acts: dict[str, dict] = {}
    host: dict[tuple[int, int, int], tuple[int, int]] = {}
    # Model states do not depend on checkpointing: strategies that differ only there share them.
    shared: dict[tuple, tuple] = {}
    for si, s in enumerate(strategies):
        if base.is_rl:
            engine[si] = _engine_entry(model, base, s, si=si, shared=shared)
        for tp in tps:
            for pp in pps:
                for acc in (False, True):
                    host_co, per_phase = _states_entry(model, base, s, tp=tp, pp=pp, acc=acc,
                                                       precision=precision, roles=roles,
                                                       shared=shared)
                    if not acc:
                        host[(si, tp, pp)] = host_co
                    for phase, abc in per_phase.items():
                        states.setdefault(phase, {})[(si, tp, pp, acc)] = abc
                for in_flight in range(1, pp + 1):
                    for phase, v in _acts_entry(model, base, s, tp=tp, pp=pp,
                                                in_flight=in_flight, precision=precision,
                                                roles=roles, shared=shared).items():
                        acts.setdefault(phase, {})[(si, tp, pp, in_flight)] = v
    one, two = device_overhead_bytes(1), device_overhead_bytes(2)
    return MemoryTables(
        states=states, acts=acts, host=host, floor_mib=_ceil_mib(reserved_bytes({})),
        overhead_mib=_ceil_mib(one), multi_gpu_mib=_ceil_mib(two - one), engine=engine,
    )


def _engine_entry(model: ModelSpec, base: TrainConfig, s: Choice, *, si: int,
                  shared: dict) -> tuple[int, int, int]:
    """An RL strategy's engine (weights, KV per sequence, workspace) MiB, memoised in
    ``shared``: a vLLM-style engine's parts depend on its TP only; the trainer's own
    generate's and an engine's on the actor's parameters on the strategy (sharding: gathered
    weights; method: prefill)."""
    own = on_trainer_model(base)
    ekey = ("engine", si if own else s.rollout_tp)
    if ekey not in shared:
        c = base.model_copy(update={"rollout_tp": s.rollout_tp, **(s._asdict() if own else {})})
        weights, work, per_seq = engine_parts(model, c)
        shared[ekey] = (_ceil_mib(weights), _ceil_mib(per_seq), _ceil_mib(work))
    return shared[ekey]


def _states_entry(model: ModelSpec, base: TrainConfig, s: Choice, *, tp: int, pp: int,
                  acc: bool, precision: str, roles: RoleModels, shared: dict) -> tuple:
    """(host coefficients, or None when accumulating; per phase the states coefficients
    (a, b, c, e, k) in MiB) of a strategy on (tp, pp), memoised in ``shared`` by what model
    states depend on (not checkpointing)."""
    states_key = (s.method, s.lora_rank, s.optimizer, s.zero_stage, s.fsdp, s.offload,
                  s.placement, s.offload_idle, s.ep, s.dp_shard)
    key = (states_key, tp, pp, acc)
    if key not in shared:
        cfg = base.model_copy(update={
            **s._asdict(), "tp": tp, "pp": pp, "grad_accum": 2 if acc else 1,
            "micro_batch_size": 1})
        coeffs = states_coefficients(model, cfg, precision, roles=roles)
        shared[key] = (
            None if acc else host_coefficients(model, cfg, roles, precision=precision),
            {phase: (_ceil_mib(co.a), _ceil_mib(co.b), _ceil_mib(co.c),
                     _ceil_mib(co.e), _ceil_mib(co.k))
             for phase, co in coeffs.items()},
        )
    return shared[key]


def _acts_entry(model: ModelSpec, base: TrainConfig, s: Choice, *, tp: int, pp: int,
                in_flight: int, precision: str, roles: RoleModels,
                shared: dict) -> dict[str, int]:
    """Per phase the activation MiB of one micro-batch of a strategy on (tp, pp) with
    ``in_flight`` micro-batches in flight, memoised in ``shared``; the engine's terms are left
    out (_phases): rollout TP changes nothing."""
    key = (s._replace(rollout_tp=1), tp, pp, in_flight)
    if key not in shared:
        cfg = _with_dp(base.model_copy(update={
            **s._asdict(), "tp": tp, "pp": pp, "micro_batch_size": 1,
            "grad_accum": in_flight,
        }), 1)
        shared[key] = {
            phase: _ceil_mib(v) for phase, v in activation_reserved_bytes(
                model, cfg, precision, roles=roles).items()}
    return shared[key]
