"""Time of one PPO/GRPO iteration, phase by phase (pure functions).

An iteration generates rollout_batch x rollout_n responses, scores them (reference, reward and
critic forward passes, and the actor's old log-probs), updates the actor (and the critic) over
all sequences, and moves the new weights into the engine:

* generation: each engine (rollout_tp GPUs) decodes its share in waves of ``concurrency``
  sequences; one wave is throughput.estimate_decode (prefill + bandwidth-bound decoding, vLLM
  efficiency). Responses are decoded to their mean (cfg.decoded_lengths); a cap above it adds
  the generation tail;
* forward passes: 2 N FLOPs per token plus attention, on the trainer GPUs at the stack's
  achievable matmul rate;
* updates: throughput.estimate_throughput of the role's SFT-shaped config, one optimizer step
  per global batch of sequences;
* weight sync: colocated, the trainer's 16-bit shards are all-gathered into the engine's
  layout on the same GPUs; separate, the 16-bit weights are broadcast to the engines;
* offload traffic: with offload_idle every role's states cross PCIe twice per iteration; a
  sleeping engine moves its weights out and back.

Colocated phases run one after another; separate placement pipelines generation of the next
batch with training on this one (OpenRLHF async / verl one-step-off-policy), so an iteration
takes the slower side plus the weight sync. Split placement (every role on GPUs of its own)
pipelines the same way, and its roles work side by side: the forward passes take as long as
the busiest group's, then the actor and critic updates as long as the slower one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from planner.catalog.request import TrainConfig
from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec
from planner.models import decode
from planner.models import efficiency as eff
from planner.models.decode import eager_host_floor_s, estimate_decode
from planner.models.memory import GIB
from planner.models.network import (
    Links,
    params_per_gpu,
    resolve_links,
    ring_factor,
    stored_bytes_per_param,
)
from planner.models.rollout import (
    Engine,
    engine,
    engine_weight_bytes,
    on_trainer_model,
    weights_sleep_on_host,
)
from planner.models.throughput import (
    elementwise_seconds,
    estimate_throughput,
    exposed,
    forward_time_flops_per_token,
    host_launch_seconds,
    matmul_fraction_rate,
)
from planner.models.workloads import (
    Role,
    phase_group,
    resident_terms,
    roles,
    trainer_gpus,
)


def split_training_seconds(phases: dict[str, float], cfg: TrainConfig) -> float:
    """Training side of a split-placement iteration: the forward passes of every group side
    by side, then the updates (actor and critic on their own GPUs, side by side)."""
    busy: dict[str, float] = {}
    for k, v in phases.items():
        if k.endswith(" forward"):
            group = phase_group(cfg, k)
            busy[group] = busy.get(group, 0.0) + v
    updates = [v for k, v in phases.items() if k.endswith(" update")]
    return max(busy.values(), default=0.0) + max(updates, default=0.0)


@dataclass(frozen=True)
class RLStepEstimate:
    """Seconds of each phase of one iteration, and the rates they give."""

    step_time_s: float
    phases: dict[str, float]
    tokens_per_step: float  # prompt + response tokens of all sampled sequences
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    limited_by: str  # the longest phase
    concurrency: int  # sequences one engine decodes at once
    waves: int
    placement: str
    stack: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def shares(self) -> dict[str, float]:
        """Each phase's fraction of the summed phase times."""
        busy = sum(self.phases.values()) or 1.0
        return {k: v / busy for k, v in self.phases.items()}

    def summary(self) -> dict[str, object]:
        """The estimate as a JSON-ready dict."""
        return {
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "step_time_s": self.step_time_s,
            "limited_by": self.limited_by,
            "stack": self.stack,
            "phases_s": dict(self.phases),
            "phase_shares": self.shares,
            "rollout_concurrency": self.concurrency,
            "rollout_waves": self.waves,
            "placement": self.placement,
        }


def forward_seconds(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *, tokens: float,
                    gpus: int, stack: str, links: Links | None = None,
                    batch: int | None = None) -> float:
    """A forward-only pass over ``tokens`` split over ``gpus``: (2 N + attention) FLOPs per
    token at the 16-bit matmul rate x the stack's utilisation. With ZeRO-3/FSDP every
    micro-step of ``batch`` sequences all-gathers the weight shards once ((d-1)/d x stored
    weights, network.dp_bytes_per_step without the backward half and the gradients), hidden
    behind compute up to the stack's data-parallel overlap; with hybrid sharding (cfg.dp_shard)
    within each shard group, over its links. Unfused elementwise ops add their
    forward traffic (throughput.elementwise_seconds); an eager stack takes at least its host's
    launches of each micro-step's forward kernels (throughput.host_launch_seconds)."""
    steps = math.ceil(tokens / gpus / ((batch or cfg.micro_batch_size) * cfg.seq_len))
    compute = tokens / gpus * forward_time_flops_per_token(model, gpu, cfg, micro_batch=batch) / \
        matmul_fraction_rate(gpu, cfg, stack) + elementwise_seconds(
            model, gpu, cfg, tokens=tokens / gpus, backward=False)
    # an eager stack's host launches each micro-step's forward kernels (host_launch_seconds)
    compute = max(compute, host_launch_seconds(model, cfg, micro_batches=steps, backward=False))
    if links is None or gpus == 1 or not cfg.shards_weights:
        return compute
    sharded = cfg if cfg.num_gpus == gpus else cfg.model_copy(update={"num_gpus": gpus})
    group = cfg.dp_shard or gpus  # the ranks one gather spans
    gathered = steps * ring_factor(group, "all-gather") * gathered_weight_bytes(model, sharded)
    raw = gathered / (links.collective_gbps(group, group > links.gpus_per_node) * 1e9)
    return compute + exposed(raw, eff.OVERLAP[stack]["dp"], compute)


def gathered_weight_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """Stored weight bytes of the shard that each ZeRO-3/FSDP forward micro-step all-gathers
    (before the ring factor; forward_seconds); 0 without weight sharding. The planner's step
    time bound reads it per strategy (steptime.RowArrays)."""
    if not cfg.shards_weights:
        return 0.0
    return params_per_gpu(model, cfg) * stored_bytes_per_param(cfg)


def update_seconds(role: Role, gpu: GpuSpec, sequences: int, *, platform: PlatformSpec | None,
                   stack: str) -> float:
    """Optimizer steps over ``sequences``: one step per global batch of the role's config. An
    iteration with fewer sequences than a global batch makes one step over just those (the
    accumulation is shortened): timing a whole global batch would count sequences that were
    never sampled."""
    cfg = role.cfg
    steps, accum = update_steps(sequences, cfg.micro_batch_size, max(1, cfg.dp),
                                grad_accum=cfg.grad_accum)
    if accum < cfg.grad_accum:
        cfg = cfg.model_copy(update={"grad_accum": int(accum)})
    return _step_seconds(role.model, gpu, cfg, platform, stack) * steps


def update_steps(sequences, micro_batch, dp, *, grad_accum):
    """(optimizer steps, accumulation of each) of an update over ``sequences`` (update_seconds):
    one step per global batch (micro_batch x grad_accum x dp), a shortened accumulation when
    the sequences do not fill them (rounded to nearest, at least 1). Integers or numpy arrays
    (the planner's step-time bound: steptime.RowArrays)."""
    # integers (an estimate) take Python's min/max/round (half to even, as numpy's): numpy's
    # scalar overhead showed in the planner's RL searches; one formula for both
    scalar = isinstance(sequences, int) and isinstance(micro_batch, int)
    lo, hi, rnd = (min, max, round) if scalar else (np.minimum, np.maximum, np.round)
    steps = -(-sequences // (micro_batch * grad_accum * dp))
    return steps, lo(grad_accum, hi(1, rnd(sequences / steps / (micro_batch * dp))))


# The planner times thousands of layouts that share their parts (the same engine batch on the
# same GPU, the same update on the same GPUs): the pure sub-estimates are memoised.
@lru_cache(maxsize=8192)
def _step_seconds(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig,
                  platform: PlatformSpec | None, stack: str) -> float:
    return estimate_throughput(model, gpu, cfg, platform=platform, stack=stack).step_time_s


@lru_cache(maxsize=8192)
def tail_seconds(model: ModelSpec, gpu: GpuSpec, context: int, *, steps: int, tp: int,
                 platform: PlatformSpec | None, efficiency: float | None = None,
                 precision: str = "bf16", host_floor_s: float = 0.0,
                 host_per_seq_s: float = 0.0) -> float:
    """Decoding ``steps`` more tokens of one sequence from ``context`` tokens on: each step
    bandwidth bound on the engine's weights (/tp) and that sequence's KV cache, or by an eager
    engine's host (decode.estimate_decode at batch 1, no prefill)."""
    dec = estimate_decode(model, gpu, prompt_len=context, response_len=steps, tp=tp, batch=1,
                          platform=platform, efficiency=efficiency, precision=precision,
                          host_floor_s=host_floor_s, host_per_seq_s=host_per_seq_s)
    return dec.decode_s


@lru_cache(maxsize=8192)
def _wave_seconds(model: ModelSpec, gpu: GpuSpec, prompt_len: int, response_len: int, tp: int,
                  batch: int, platform: PlatformSpec | None,
                  efficiency: float | None = None, precision: str = "bf16",
                  host_floor_s: float = 0.0, context_offset: float = 0.0,
                  host_per_seq_s: float = 0.0) -> float:
    dec = estimate_decode(model, gpu, prompt_len=prompt_len, response_len=response_len, tp=tp,
                          batch=batch, platform=platform, efficiency=efficiency,
                          precision=precision, host_floor_s=host_floor_s,
                          context_offset=context_offset, host_per_seq_s=host_per_seq_s)
    return dec.prefill_s + dec.decode_s


def _truncated_exponential(u: float) -> tuple[float, float]:
    """(E[X], E[X^2]) of the density proportional to exp(-u x) on [0, 1]; u < 0 rises (the
    mirror image of -u); near u = 0 its first-order series (the closed form cancels there)."""
    if abs(u) < 1e-2:
        return 0.5 - u / 12, 1 / 3 - u / 12
    if u < 0:
        m1, m2 = _truncated_exponential(-u)
        return 1 - m1, 1 - 2 * m1 + m2
    e = math.exp(-u)
    return 1 / u - e / (1 - e), (2 / u**2 - e * (1 + 2 / u + 2 / u**2)) / (1 - e)


def length_second_moment(mean: float, cap: float) -> float:
    """E[L^2] of response lengths whose mean and cap are all that is known: the maximum-entropy
    distribution on [0, cap] with that mean (density proportional to exp(-a x): falling where
    mean < cap / 2, rising above; Jaynes 1957, "Information Theory and Statistical Mechanics",
    Phys. Rev. 106, s.2), a found by bisection (the mean falls as a grows)."""
    if mean >= cap:
        return float(cap) ** 2
    lo, hi = -1e7, 1e7
    for _ in range(120):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _truncated_exponential(mid)[0] * cap > mean else (lo, mid)
    return _truncated_exponential((lo + hi) / 2)[1] * cap * cap


def length_context_offset(mean: float, cap: int | None) -> float:
    """Tokens to add to the mean context of a continuous-batching engine's decoding steps when
    the responses vary in length (mean ``mean``, none longer than ``cap``): a response of L
    tokens reads its KV cache over L steps at contexts up to L, so the steps' KV reads grow
    with E[L^2] / 2, not mean^2 / 2: the average context of a decoded token is
    E[L^2] / (2 mean) = mean / 2 + Var(L) / (2 mean). 0 when every response has the mean
    length (no cap above it)."""
    if not cap or cap <= mean or mean <= 0:
        return 0.0
    return max(0.0, (length_second_moment(mean, cap) - mean * mean) / (2 * mean))


def tail_waves(cfg: TrainConfig, waves: int) -> int:
    """How many generation tails an engine's ``waves`` pay. A continuous-batching engine
    (vLLM, SGLang) admits a waiting sequence as soon as one finishes, so its long responses
    overlap the next wave's and only the last wave ends in a tail (iteration-level scheduling:
    Yu et al. 2022, "Orca", OSDI, s.3.1, which vLLM's scheduler implements); the trainer's own
    generate, and an engine on the actor's weights (DeepSpeed's hybrid engine runs the model's
    generate), run each batch until its longest response ends, one tail per wave."""
    return waves if on_trainer_model(cfg) else min(waves, 1)


def rollout_decode_efficiency(cfg: TrainConfig) -> float:
    """The generator's share of the decode roofline inside an RL iteration: the trainer's own
    generate (efficiency.HF_GENERATE_DECODE_EFFICIENCY), else any engine's, vLLM, SGLang or
    DeepSpeed-Chat's hybrid engine alike (efficiency.RL_ROLLOUT_DECODE_EFFICIENCY, fitted on
    the RL iterations of every framework measured)."""
    if cfg.generates_in_trainer:
        return eff.HF_GENERATE_DECODE_EFFICIENCY
    return eff.RL_ROLLOUT_DECODE_EFFICIENCY


# Engines that decode without CUDA graphs whatever the framework sets: DeepSpeed's hybrid engine
# generates through the actor module's own generate with its inference kernels injected, no
# graph capture (deepspeed/runtime/hybrid_engine.py @ deepspeedai/DeepSpeed b4876b7; CUDA-graph
# decode for it is first proposed in deepspeedai/DeepSpeed#8352), and Hugging Face generate
# runs eager PyTorch unless compiled (transformers generation/utils.py: the dynamic cache).
EAGER_ENGINES = ("deepspeed-hybrid", "hf-generate")


def rollout_host_floor_s(model: ModelSpec, cfg: TrainConfig) -> float:
    """The shortest decoding step of the iteration's generator: an eager engine's host floor
    (decode.eager_host_floor_s) for EAGER_ENGINES and for a vLLM-style engine its framework
    runs with enforce_eager (cfg.rollout_eager); 0 with CUDA graphs."""
    if cfg.rollout_engine in EAGER_ENGINES or cfg.rollout_eager:
        return eager_host_floor_s(model)
    return 0.0


def rollout_host_per_seq_s(cfg: TrainConfig) -> float:
    """Host seconds per running sequence between the generator's decoding steps: vLLM's V0
    engine loop (cfg.rollout_v0: decode.VLLM_V0_HOST_S_PER_SEQ); 0 for V1 and other engines."""
    return decode.VLLM_V0_HOST_S_PER_SEQ if cfg.rollout_v0 and cfg.rollout_engine == "vllm" \
        else 0.0


class EngineSide(NamedTuple):
    """The phases of an iteration that only the engine layout sets (engine_side)."""

    engine: Engine
    waves: int
    generation_s: float
    weight_sync_s: float
    sleep_bytes: float  # a sleeping colocated engine's weights, out and back
    sleep_s: float  # those bytes over the host link


def engine_side(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *,
                platform: PlatformSpec | None, decode_efficiency: float | None = None,
                rollout_precision: str = "bf16", max_response_len: int | None = None
                ) -> EngineSide:
    """Generation (each engine decodes its share at its concurrency, share / concurrency waves
    of one prefill + decoding each: throughput.estimate_decode; whole waves for the trainer's
    own generate, whose batches run to their end), the weight sync into the engines, and a sleeping
    engine's PCIe traffic. Reads of ``cfg`` only the engine layout (rollout.engine:
    placement, GPU groups, rollout TP, batch, lengths, gpu_memory_utilization, engine_sleep;
    an engine on the actor's weights its generation batch too, cfg.logprob_batch), so the
    planner times it once per such layout and GPU (steptime.Timing.engine_side). The
    trainer's own generate (hf-generate) decodes its batches at
    efficiency.HF_GENERATE_DECODE_EFFICIENCY and has no engine to sync or put to sleep."""
    if decode_efficiency is None:
        decode_efficiency = rollout_decode_efficiency(cfg)
    eng = engine(model, cfg, gpu.memory_gib * GIB)
    conc = max(1, eng.concurrency)
    waves = math.ceil(eng.sequences_per_engine / conc)
    floor = rollout_host_floor_s(model, cfg)
    mean, cap = cfg.decoded_lengths
    # responses of unequal length (a cap above the mean) read more KV per decoded token in a
    # continuous-batching engine; the trainer's generate keeps whole batches (tail_waves)
    offset = 0.0 if on_trainer_model(cfg) else length_context_offset(
        mean, max_response_len or cap)
    wave = _wave_seconds(model, gpu, cfg.prompt_len or 1, mean,
                         cfg.rollout_tp, conc, platform, decode_efficiency, rollout_precision,
                         floor, offset, rollout_host_per_seq_s(cfg))
    links = resolve_links(gpu, platform=platform)
    weights16 = engine_weight_bytes(model, cfg) * cfg.rollout_tp
    if cfg.generates_in_trainer:
        return EngineSide(eng, waves, waves * wave, 0.0, 0.0, 0.0)
    # a continuous-batching engine keeps ``conc`` sequences in flight until its share is done
    # (iteration-level scheduling, tail_waves): share / conc waves' worth of steps, not whole
    # waves
    busy = waves if on_trainer_model(cfg) else eng.sequences_per_engine / conc
    if cfg.placement == "colocate":
        # the trainer's shards gathered into the engines' layout: within each shard group under
        # hybrid sharding (every group holds a whole replica), else over every trainer rank
        group = cfg.dp_shard or trainer_gpus(cfg)
        sync = weights16 / (links.collective_gbps(group, group > links.gpus_per_node) * 1e9)
    else:
        sync = weights16 / (links.collective_gbps(cfg.num_gpus, True) * 1e9)
    sleep = 2 * eng.weights if weights_sleep_on_host(cfg) else 0.0
    return EngineSide(eng, waves, busy * wave, sync, sleep,
                      sleep / (links.host_link_gbps * 1e9))


def placed_step_seconds(phases: dict[str, float], cfg: TrainConfig, notes: list[str]) -> float:
    """One iteration from its phases by placement: colocated roles run one after another;
    otherwise generation of the next batch overlaps training (split: the roles' passes side by
    side, split_training_seconds), and the weight sync follows both. Appends what it assumed
    to ``notes``."""
    if cfg.placement == "colocate":
        return sum(phases.values())
    gen_keys = ("generation", "generation tail", "weight sync")
    if cfg.placement == "split":
        train = split_training_seconds(phases, cfg) + phases.get("offload traffic", 0.0)
        notes.append("split placement: each role on GPUs of its own; forward passes and "
                     "updates of different roles run side by side")
    else:
        train = sum(v for k, v in phases.items() if k not in gen_keys)
    generation = phases["generation"] + phases.get("generation tail", 0.0)
    notes.append(f"{cfg.placement} placement: generation of the next batch overlaps "
                 "training (one step off-policy)")
    return max(generation, train) + phases["weight sync"]


def _role_phases(rs: tuple[Role, ...], gpu: GpuSpec, cfg: TrainConfig, *, sequences: int,
                 stack: str, links: Links, platform: PlatformSpec | None) -> dict[str, float]:
    """Seconds of every role's forward pass over the rollout's ``sequences``, then of every
    trained role's update."""
    phases = {}
    n_train = trainer_gpus(cfg)
    for r in (r for r in rs if r.runs):
        # Padding-free passes (mean_seq_len) see the role config's tokens per sequence; with
        # split placement each role's pass runs on its own group's GPUs.
        gpus = r.cfg.num_gpus if cfg.placement == "split" else n_train
        phases[f"{r.name} forward"] = forward_seconds(
            r.model, gpu, r.cfg, tokens=sequences * r.cfg.seq_len, gpus=gpus, stack=stack,
            links=links, batch=cfg.logprob_batch)
    for r in rs:
        if r.trained:
            phases[f"{r.name} update"] = update_seconds(r, gpu, sequences, platform=platform,
                                                        stack=stack)
    return phases


def _offload_bytes(rs: tuple[Role, ...], cfg: TrainConfig, side: EngineSide) -> float:
    """Bytes moved over the host link per iteration: the idle roles' 16-bit state out and back
    (cfg.offload_idle) and the engine's sleep/wake traffic."""
    moved = 0.0
    if cfg.offload_idle:
        moved += 2 * sum(sum(resident_terms(r, "bf16").values()) for r in rs)
    return moved + side.sleep_bytes


def generation_notes(model: ModelSpec, cfg: TrainConfig, eng: Engine, *, waves: int) -> list[str]:
    """What the generation phase assumed: an eager engine's host floor
    (rollout_host_floor_s) and the waves of an engine that cannot hold its whole share."""
    notes = []
    floor = rollout_host_floor_s(model, cfg)
    if floor:
        notes.append(f"{cfg.rollout_engine} decodes without CUDA graphs"
                     f"{' (enforce_eager)' if cfg.rollout_eager else ''}: each decoding step "
                     f"takes at least {floor * 1e3:.1f} ms, the host launching {model.num_layers} "
                     "layers' kernels")
    if rollout_host_per_seq_s(cfg):
        notes.append(f"vLLM V0 engine: {rollout_host_per_seq_s(cfg) * 1e3:.3f} ms of host work per "
                     "running sequence between decoding steps (scheduling, inputs, outputs)")
    if eng.concurrency < eng.sequences_per_engine:
        notes.append(f"each engine decodes {eng.sequences_per_engine} sequences in {waves} "
                     f"wave(s) of {max(1, eng.concurrency)}")
    return notes


def estimate_rl_step(
    model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *, platform: PlatformSpec | None = None,
    stack: str = "hf", critic: ModelSpec | None = None, reward: ModelSpec | None = None,
    max_response_len: int | None = None, decode_efficiency: float | None = None,
    rollout_precision: str = "bf16", side: EngineSide | None = None,
) -> RLStepEstimate:
    """Seconds per PPO/GRPO iteration of ``cfg`` on ``cfg.num_gpus`` GPUs of type ``gpu``.

    ``max_response_len``: the cap responses run up to above their mean (free-length generation,
    e.g. NeMo-RL's max_total_sequence_length; default cfg.decoded_lengths): the wave ends with
    its longest response, the last decoding alone (generation tail, tail_seconds; tail_waves).
    ``decode_efficiency``: the engine's share of the decode roofline; default
    efficiency.RL_ROLLOUT_DECODE_EFFICIENCY (a vLLM engine inside an RL iteration, set by the
    NeMo-RL cases; offline serving reaches more, efficiency.DECODE_EFFICIENCY).
    ``rollout_precision``: "fp8" when the engine serves fp8 weights and KV cache (NeMo-RL's
    FP8 recipes generate in FP8); the engine's memory (rollout.engine) stays 16-bit.
    ``side``: engine_side of this cfg, GPU, platform, decode efficiency and precision, when the
    caller already has it (the planner memoises it per engine layout: steptime.Timing)."""
    if decode_efficiency is None:
        decode_efficiency = rollout_decode_efficiency(cfg)
    rs = roles(model, cfg, critic=critic, reward=reward)
    seqs = cfg.rollout_batch * cfg.samples_per_prompt
    tokens = seqs * (cfg.mean_seq_len or cfg.seq_len)  # real tokens: padding-free passes' mean
    if side is None:
        side = engine_side(model, gpu, cfg, platform=platform, decode_efficiency=decode_efficiency,
                           rollout_precision=rollout_precision, max_response_len=max_response_len)
    eng, waves = side.engine, side.waves
    notes = []
    conc = max(1, eng.concurrency)
    phases = {"generation": side.generation_s}
    links = resolve_links(gpu, platform=platform)
    mean, cap = cfg.decoded_lengths[0], max_response_len or cfg.decoded_lengths[1]
    if cap and cfg.response_len and cap > mean:
        phases["generation tail"] = tail_waves(cfg, waves) * tail_seconds(
            model, gpu, cfg.prompt_len + mean, tp=cfg.rollout_tp, platform=platform,
            steps=cap - mean, efficiency=decode_efficiency,
            precision=rollout_precision, host_floor_s=rollout_host_floor_s(model, cfg),
            host_per_seq_s=rollout_host_per_seq_s(cfg))
    phases.update(_role_phases(rs, gpu, cfg, sequences=seqs, stack=stack, links=links,
                               platform=platform))
    phases["weight sync"] = side.weight_sync_s
    moved = _offload_bytes(rs, cfg, side)
    if moved:
        phases["offload traffic"] = moved / (links.host_link_gbps * 1e9)
    step = placed_step_seconds(phases, cfg, notes)
    notes += generation_notes(model, cfg, eng, waves=waves)
    return RLStepEstimate(
        step_time_s=step,
        phases=phases,
        tokens_per_step=tokens,
        tokens_per_s=tokens / step,
        tokens_per_s_per_gpu=tokens / step / cfg.num_gpus,
        limited_by=max(phases, key=phases.get),
        concurrency=conc,
        waves=waves,
        placement=cfg.placement,
        stack=stack,
        notes=tuple(notes),
    )


def workload_throughput(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *,
                        platform: PlatformSpec | None, stack: str,
                        critic: ModelSpec | None = None, reward: ModelSpec | None = None,
                        gpus_per_node: int | None = None, side: EngineSide | None = None):
    """Per-iteration estimate for PPO/GRPO (rltime), per-step estimate otherwise: the one
    dispatch check, tune, the planner's step times and its plans use. ``side``: RL only, the
    engine's phases already timed (estimate_rl_step)."""
    if cfg.is_rl:
        return estimate_rl_step(model, gpu, cfg, platform=platform, stack=stack, critic=critic,
                                reward=reward, side=side)
    return estimate_throughput(model, gpu, cfg, platform=platform, stack=stack,
                               gpus_per_node=gpus_per_node)
