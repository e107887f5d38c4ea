"""SFT, reward-model, DPO, PPO and GRPO as sets of model roles (pure functions).

Every workload is a sum of the same memory terms (memory.py) over its roles, phase by phase:

* a **trained** role (SFT model, reward model, DPO policy, PPO/GRPO actor, PPO critic) has the
  states, activations and loss buffers of ``memory.phase_terms``;
* a **frozen** role (DPO/PPO reference, PPO reward model) has 16-bit weights and, in its own
  forward pass, one layer's working set and its output buffers; with a LoRA/DoRA/QLoRA policy
  the reference is the base model with the adapters switched off, so it adds no weights
  (PEFT's ``disable_adapter``; TRL, verl and OpenRLHF all do this);
* the **rollout engine** (vLLM-style; the trainer's own generate, hf-generate, holds no weights
  of its own: rollout.generate_parts) holds 16-bit weights / rollout TP and a KV cache of
  2 x layers x kv_heads x head_dim x 2 B per token (DESIGN.md s.4); with
  ``gpu_memory_utilization`` set it takes that fraction of total memory (vLLM >= 0.7: a
  per-instance budget of weights, activations and KV cache), else just what its share of the
  rollout batch needs.

Placement (PPO/GRPO): *colocate* time-shares every GPU among all roles and the engine (verl's
hybrid engine): the engine sleeps (frees its KV cache, offloads weights) while training runs,
and with ``offload_idle`` the states of roles not in use wait in host RAM. *separate* puts the
engines on their own GPUs (OpenRLHF with vLLM engines) and the trained and frozen roles
time-share the other GPUs (OpenRLHF ``--colocate_all_models``). *split* gives the engines and
every model role GPUs of their own (OpenRLHF without ``--colocate_*``: actor, critic, reference
and reward model each on ``--<role>_num_gpus_per_node`` GPUs, ``cfg.role_gpus``); the reference
is a model of its own there, also beside a LoRA actor. A group holds only its own role, so no
idle states wait beside the active one. The per-GPU peak is the largest phase on any group.
Reward and value heads output one number per token: no vocabulary logits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from planner.catalog.request import TrainConfig, rollout_gpu_count
from planner.catalog.role_gpus import format_role_gpus, split_role_names
from planner.catalog.specs import GpuSpec, ModelSpec, gpus_per_host
from planner.errors import PlannerError
from planner.models import calibration as cal
from planner.models.host_ram import host_ram_bytes
from planner.models.memory import (
    BWD_END_PHASE,
    FWD_PHASE,
    GIB,
    STEP_PHASE,
    MemoryEstimate,
    device_overhead_bytes,
    layer_activation_bytes_per_token,
    logit_columns,
    phase_terms,
    reserved_bytes,
    residual_bytes,
)
from planner.models.rollout import Engine, engine, engine_weight_bytes, weights_sleep_on_host
from planner.models.states import (
    adapter_bytes,
    gathered_bytes,
    master_weight_bytes,
    optimizer_state_bytes,
    weight_bytes,
)

ROLLOUT_PHASE = "rollout"
ENGINE_GROUP = "engine GPUs"


# ---------------------------------------------------------------------------------------------
# Roles
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Role:
    """One model of a workload and how it is held."""

    name: str  # policy | actor | critic | reference | reward
    model: ModelSpec
    cfg: TrainConfig  # the role's own SFT-shaped config (its GPUs, batch, method)
    trained: bool
    value_head: bool = False
    shares_base: bool = False  # reference = the policy's base with adapters off
    runs: bool = True  # False: held, never run in the iteration (an EMA copy)


def value_model(model: ModelSpec) -> ModelSpec:
    """A reward/value model: the same transformer with a scalar head instead of the vocabulary
    head (an h x 1 linear, negligible); tied_embeddings drops the separate head from the count."""
    if model.tied_embeddings:
        return model
    return model.model_copy(update={"id": f"{model.id}-value", "tied_embeddings": True})


def trainer_gpus(cfg: TrainConfig) -> int:
    """GPUs that hold the trained and frozen roles (split placement: the actor's)."""
    if cfg.is_rl and cfg.placement == "separate":
        return cfg.num_gpus - rollout_gpu_count(cfg)
    if cfg.is_rl and cfg.placement == "split":
        return role_group_gpus(cfg, "actor")
    return cfg.num_gpus


def role_group_gpus(cfg: TrainConfig, name: str) -> int:
    """GPUs of one role's group with split placement."""
    groups = dict(cfg.role_gpus or ())
    if name not in groups:
        raise PlannerError(f"--role-gpus {format_role_gpus(cfg.role_gpus or ())} gives no GPUs "
                           f"to the {name}")
    return groups[name]


def _split_check(cfg: TrainConfig, names: tuple[str, ...]) -> None:
    """Every group of --role-gpus belongs to a role of the workload."""
    extra = [n for n, _ in cfg.role_gpus or () if n not in names]
    if extra:
        hint = {"reward": "; GRPO scores with a reward function unless --reward-model is "
                          "given",
                "reference": "; --kl 0 drops it", "critic": "; only PPO has a critic"
                }.get(extra[0], "")
        raise PlannerError(f"--role-gpus {extra[0]}=...: this {cfg.workload} job has no "
                           f"{extra[0]} model of its own (roles: {', '.join(names)}){hint}")


def _base(cfg: TrainConfig, **update: object) -> TrainConfig:
    """An SFT-shaped config for one role: the workload's options removed. RL passes over
    padding-free batches see mean_seq_len real tokens per sequence. An RL role's loss buffers
    stay counted with the first recomputed layer (loss_alive_with_recompute): verl's logged
    actor peaks hold them (tests/test_validation_rl.py), and prime-rl's trainer readings (5-16
    points under without), though which references do is not identified; an SFT,
    reward-model or DPO loop frees them first (memory.forward_activation_bytes, measured on
    transformers' Trainer)."""
    fields: dict[str, object] = {
        "workload": "sft", "prompt_len": None, "response_len": None, "rollout_n": None,
        "gpu_memory_utilization": None, "rollout_gpus": None, "placement": "colocate",
        "rollout_tp": 1, "precompute_ref": False, "mean_seq_len": None,
        "mean_response_len": None,
        "seq_len": cfg.mean_seq_len or cfg.seq_len,
        "loss_alive_with_recompute": cfg.loss_alive_with_recompute or cfg.is_rl,
    }
    fields.update(update)
    return cfg.model_copy(update=fields)


def _frozen_cfg(cfg: TrainConfig, gpus: int, **update: object) -> TrainConfig:
    """Frozen models keep 16-bit weights (no master copy), sharded like the trainer's weights
    (verl's FSDP reference, OpenRLHF's ZeRO-3 inference engine), never offloaded by ZeRO;
    ``update``: more fields of the role's config."""
    return _base(cfg, method="full", lora_rank=None, pure_bf16=True, offload="none",
                 num_gpus=gpus, grad_accum=1, fp32_trained_weights=False, **update)


def roles(model: ModelSpec, cfg: TrainConfig, *, critic: ModelSpec | None = None,
          reward: ModelSpec | None = None) -> tuple[Role, ...]:
    """The roles of ``cfg.workload``; critic and reward default to the policy's architecture
    (PPO); GRPO has a reward model only when one is given (rule-based rewards otherwise)."""
    n = trainer_gpus(cfg)
    peft = cfg.is_peft
    if cfg.workload in ("sft", "pretrain"):
        return (Role("policy", model, cfg, True),)
    if cfg.workload == "rm":
        mb = cfg.micro_batch_size * 2
        return (Role("reward", value_model(model), _base(cfg, micro_batch_size=mb), True, True),)
    if cfg.workload == "dpo":
        mb = cfg.micro_batch_size * 2
        out = [Role("policy", model, _base(cfg, micro_batch_size=mb), True)]
        if cfg.reference and not cfg.precompute_ref:
            out.append(Role("reference", model, _frozen_cfg(cfg, n, micro_batch_size=mb), False,
                            shares_base=peft and not cfg.separate_lora_reference))
        return tuple(out)
    split = cfg.placement == "split"
    if split:
        _split_check(cfg, _rl_role_names(cfg, reward is not None))
    gpus = (lambda name: role_group_gpus(cfg, name)) if split else (lambda name: n)
    lp = cfg.logprob_batch

    def fwd(name: str) -> TrainConfig:
        return _frozen_cfg(cfg, gpus(name), micro_batch_size=lp)

    out = [Role("actor", model, _base(cfg, num_gpus=n), True)]
    if cfg.workload == "ppo":
        out.append(Role("critic", value_model(critic or model), _trained_cfg(cfg, gpus("critic")),
                        True, True))
    if cfg.reference:
        out.append(Role("reference", model, fwd("reference"), False,
                        shares_base=peft and not split and not cfg.separate_lora_reference))
    if (cfg.workload == "ppo" and not cfg.reward_function) or reward is not None:
        out.append(Role("reward", value_model(reward or model), fwd("reward"), False, True))
    if cfg.ema_copy:
        # DeepSpeedExamples@3d83278 dschat/rlhf/rlhf_engine.py _init_ema: the actor's model in
        # the eval config the reference gets (ZeRO-3 with a ZeRO-3 actor, else unsharded),
        # updated by moving_average after each step (its traffic is not timed)
        out.append(Role("ema", model, _frozen_cfg(cfg, gpus("actor")), False, runs=False))
    lens = dict(cfg.role_seq_lens)
    # a role whose passes keep the padding the others drop sees its own tokens per sequence
    return tuple(replace(r, cfg=r.cfg.model_copy(update={"seq_len": lens[r.name]}))
                 if r.name in lens else r for r in out)


def _rl_role_names(cfg: TrainConfig, has_reward: bool) -> tuple[str, ...]:
    return split_role_names(cfg.workload, reference=cfg.reference, has_reward=has_reward,
                            reward_function=cfg.reward_function)


def _trained_cfg(cfg: TrainConfig, gpus: int) -> TrainConfig:
    """A trained role on ``gpus`` GPUs with the actor's global batch: on a group of another
    size (split placement) the accumulation makes up the difference (OpenRLHF's
    train_batch_size is global), rounded up."""
    actor_batch = cfg.micro_batch_size * cfg.grad_accum * cfg.dp
    accum = max(1, -(-actor_batch // (cfg.micro_batch_size * gpus)))
    return _base(cfg, num_gpus=gpus, grad_accum=accum)


# ---------------------------------------------------------------------------------------------
# Terms of one role
# ---------------------------------------------------------------------------------------------
def _prefixed(role: Role, terms: dict[str, float]) -> dict[str, float]:
    return {f"{role.name} {k}": v for k, v in terms.items() if v}


def resident_terms(role: Role, precision: str) -> dict[str, float]:
    """What a role keeps on its GPUs between its own passes: weights, adapters, master copy
    and optimizer states (gradients are freed after each optimizer step). A reference that
    shares the policy's base holds nothing of its own. (A fresh dict of _resident_terms: every
    phase of an RL iteration reads each role's residents, and the planner's tables read them
    for thousands of layouts that share their roles.)"""
    return dict(_resident_terms(role, precision))


@lru_cache(maxsize=16384)
def _resident_terms(role: Role, precision: str) -> dict[str, float]:
    if role.shares_base:
        return {}
    cfg = role.cfg
    if not role.trained:
        return {"weights": weight_bytes(role.model, cfg, precision)}
    return {
        "weights": weight_bytes(role.model, cfg, precision),
        "adapters": adapter_bytes(role.model, cfg),
        "master_weights": master_weight_bytes(role.model, cfg, precision),
        "optimizer_states": optimizer_state_bytes(role.model, cfg),
    }


def forward_terms(role: Role, precision: str, batch: int) -> dict[str, float]:
    """A forward-only pass (log-probs, values, rewards) of ``batch`` sequences, no gradients.

    Saved activations are not kept: the working set is one layer's tensors
    (memory.layer_activation_bytes_per_token) for the batch. Outputs: a vocabulary head
    materialises its logits in 16 bit, their fp32 upcast and the fp32 log-softmax before the
    token log-probs are gathered (LOGIT_BYTES_FORWARD per element); a value head outputs the
    final hidden states (2h bytes per token). (A fresh dict of a memoised one.)"""
    return dict(_forward_terms(role, precision, batch))


@lru_cache(maxsize=16384)
def _forward_terms(role: Role, precision: str, batch: int) -> dict[str, float]:
    cfg = role.cfg.model_copy(update={"micro_batch_size": batch, "checkpointing": "none"})
    tokens = batch * cfg.seq_len
    m = role.model
    acts = layer_activation_bytes_per_token(m, cfg) * tokens
    if role.value_head:
        out = tokens * m.hidden_size * 2
    else:
        out = (tokens * logit_columns(m, cfg) * forward_logit_bytes(cfg)
               + tokens * m.hidden_size * 2)
    return {
        "gathered_params": gathered_bytes(m, cfg, precision, backward=False),
        "activations": acts,
        "logits_and_loss": out,
    }


def forward_logit_bytes(cfg: TrainConfig) -> float:
    """Bytes per logit element of a forward-only log-prob pass: fp32 log-softmax
    (LOGIT_BYTES_FORWARD), 16-bit logits and log-softmax without the upcast
    (LOGIT_BYTES_FORWARD_16BIT: verl's flash-attn cross-entropy on bf16 logits, TRL's
    selective_log_softmax), or chunked (LOGIT_BYTES_CHUNKED)."""
    if cfg.lm_head_vocab_chunk:
        return cal.LOGIT_BYTES_FORWARD
    if cfg.chunked_loss:
        return cal.LOGIT_BYTES_CHUNKED
    return cal.LOGIT_BYTES_FORWARD if cfg.loss_in_fp32 else cal.LOGIT_BYTES_FORWARD_16BIT


def value_head_phases(role: Role, precision: str) -> dict[str, dict[str, float]]:
    """memory.phase_terms of a trained role; a value head replaces the vocabulary logits and
    loss by the final hidden states (2h bytes per token). (Fresh dicts of memoised ones.)"""
    return {k: dict(v) for k, v in _value_head_phases(role, precision).items()}


@lru_cache(maxsize=16384)
def _value_head_phases(role: Role, precision: str) -> dict[str, dict[str, float]]:
    phases = phase_terms(role.model, role.cfg, precision)
    if role.value_head:
        tokens = role.cfg.micro_batch_size * role.cfg.seq_len // role.cfg.cp
        phases[FWD_PHASE]["logits_and_loss"] = tokens * role.model.hidden_size * 2 / role.cfg.tp
    return phases


# ---------------------------------------------------------------------------------------------
# Phases of a workload
# ---------------------------------------------------------------------------------------------
def _idle(role: Role, cfg: TrainConfig, precision: str) -> dict[str, float]:
    """A role's states while another role runs on its GPUs: none when idle states go to the
    host, or when no other role shares its GPUs (split placement)."""
    if cfg.offload_idle or cfg.placement == "split":
        return {}
    return _prefixed(role, resident_terms(role, precision))


def _sum(*parts: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0.0) + v
    return out


def _others_idle(idle: dict[str, dict[str, float]], active: Role) -> dict[str, float]:
    """Idle residents (``idle``: _idle of every role, by name) of every role except the active
    one (and a reference that shares the active policy's base)."""
    return _sum(*(terms for name, terms in idle.items() if name != active.name))


def _active_forward(rs: tuple[Role, ...], role: Role, cfg: TrainConfig,
                    precision: str) -> dict[str, float]:
    """The resident states of the role running a forward pass: its weights (and, unless idle
    states are offloaded, the rest of its states); a base-sharing reference runs on the
    policy's weights."""
    owner = next(r for r in rs if r.trained) if role.shares_base else role
    res = resident_terms(owner, precision)
    if cfg.offload_idle:
        res = {k: v for k, v in res.items() if k in ("weights", "adapters")}
    return _prefixed(owner, res)


def rl_phases(rs: tuple[Role, ...], cfg: TrainConfig, precision: str,
              *, eng: Engine) -> dict[str, dict[str, float]]:
    """PPO/GRPO phases; each maps term -> bytes on one GPU of the group that runs it."""
    colocated = cfg.placement == "colocate"
    # an engine that does not sleep keeps its pool through training (Engine.awake_terms);
    # generate's cache and buffers are freed when the call returns
    engine_idle = eng.awake_terms() if colocated and not cfg.engine_sleep \
        and not cfg.generates_in_trainer else {}
    phases: dict[str, dict[str, float]] = {}
    idle = {r.name: _idle(r, cfg, precision) for r in rs}
    everyone = _sum(*idle.values())
    phases[ROLLOUT_PHASE] = _sum(everyone, eng.terms()) if colocated else eng.terms()
    for role in rs:
        if (role.name == "critic" and not role.trained) or not role.runs:
            continue
        owner = next(r for r in rs if r.trained) if role.shares_base else role
        others = _others_idle(idle, owner)
        fwd = forward_terms(role, precision, cfg.logprob_batch)
        phases[f"{role.name} forward"] = _sum(
            others, engine_idle, _active_forward(rs, role, cfg, precision), fwd)
    for role in (r for r in rs if r.trained):
        others = _sum(_others_idle(idle, role), engine_idle)
        for phase, terms in value_head_phases(role, precision).items():
            own = {(f"{role.name} {k}" if k not in _ACTIVE_TERMS else k): v
                   for k, v in terms.items() if v}
            phases[f"{role.name} {_ROLE_PHASE[phase]}"] = \
                _sum(others, own)
    return phases


_ROLE_PHASE = {FWD_PHASE: "update", BWD_END_PHASE: "update end", STEP_PHASE: "step"}
_ACTIVE_TERMS = ("activations", "logits_and_loss", "optimizer_step", "gathered_params",
                 "gradients", "comm_buffers")


def dpo_phases(rs: tuple[Role, ...], precision: str) -> dict[str, dict[str, float]]:
    """DPO: the policy's forward/backward and step with the reference's weights resident, and
    the reference forward pass over the same pairs (TRL computes reference log-probs inside
    each step unless precomputed) with the policy's states resident."""
    policy = rs[0]
    phases = {k: dict(v) for k, v in value_head_phases(policy, precision).items()}
    if len(rs) == 1:
        return phases
    ref = rs[1]
    ref_weights = _prefixed(ref, resident_terms(ref, precision))
    for terms in phases.values():
        terms.update(ref_weights)
    states = {k: v for k, v in phases[STEP_PHASE].items()
              if k not in ("optimizer_step", "gradients")}
    if policy.cfg.grad_accum > 1 or policy.cfg.zero_stage >= 2 or policy.cfg.fsdp:
        states["gradients"] = phases[FWD_PHASE].get("gradients", 0.0)
    phases["reference forward"] = _sum(states, forward_terms(ref, precision,
                                                             policy.cfg.micro_batch_size))
    return phases


def workload_phases(model: ModelSpec, cfg: TrainConfig, precision: str, *,
                    capacity: float | None = None, critic: ModelSpec | None = None,
                    reward: ModelSpec | None = None) -> dict[str, dict[str, float]]:
    """Every phase of ``cfg.workload`` with its terms (bytes on one GPU of the group that runs
    the phase); the peak is the phase with the most reserved memory."""
    if cfg.workload in ("sft", "pretrain"):
        return phase_terms(model, cfg, precision)
    rs = roles(model, cfg, critic=critic, reward=reward)
    if cfg.workload == "rm":
        return value_head_phases(rs[0], precision)
    if cfg.workload == "dpo":
        return dpo_phases(rs, precision)
    return rl_phases(rs, cfg, precision, eng=engine(model, cfg, capacity))


def phase_group(cfg: TrainConfig, phase: str) -> str:
    """Which GPUs run ``phase``: all GPUs; with separate placement the engine or trainer
    GPUs; split, the engine GPUs or the GPUs of the role the phase belongs to."""
    if not (cfg.is_rl and cfg.placement in ("separate", "split")):
        return "all GPUs"
    if phase == ROLLOUT_PHASE:
        return ENGINE_GROUP
    if cfg.placement == "separate":
        return "trainer GPUs"
    return f"{phase.split()[0]} GPUs"


def workload_host_ram(model: ModelSpec, cfg: TrainConfig, gpus_per_node: int, *, precision: str,
                      critic: ModelSpec | None = None, reward: ModelSpec | None = None) -> float:
    """Host RAM of one node, every workload (SFT: host_ram.host_ram_bytes of its one role): the
    roles' ZeRO/FSDP offload (host_ram.host_ram_bytes), the idle
    states parked on the host with offload_idle, and the sleeping engine's weights (vLLM sleep
    level 1 keeps them in pinned host memory), per GPU on the node."""
    rs = roles(model, cfg, critic=critic, reward=reward)
    ranks = min(gpus_per_node, cfg.num_gpus)
    per_rank = cal.HOST_RAM_PER_PROCESS_GIB * cal.GIB
    total = 0.0
    for r in rs:
        if r.trained:
            one = host_ram_bytes(r.model, r.cfg, 1) - per_rank
            # split: a rank serves one role, so a node holds at most the largest role's
            # share per GPU (its groups may sit on any node)
            total = max(total, one) if cfg.placement == "split" else total + one
        if cfg.is_rl and cfg.offload_idle:
            total += sum(resident_terms(r, precision).values())
    if weights_sleep_on_host(cfg):
        total += engine_weight_bytes(model, cfg)
    return ranks * (total + per_rank)


def estimate_memory(
    model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *, gpus_per_node: int | None = None,
    critic: ModelSpec | None = None, reward: ModelSpec | None = None,
) -> MemoryEstimate:
    """The per-GPU peak of ``cfg`` on ``gpu``: allocated, reserved and device-level (nvidia-smi).

    The phases come from workload_phases (SFT: forward/backward and optimizer step;
    reward model, DPO, PPO and GRPO: the phases of their roles); the peak phase is the one with
    the larger reserved memory (what must fit)."""
    precision = cfg.effective_precision(gpu)
    capacity = gpu.memory_gib * GIB
    phases = workload_phases(model, cfg, precision, capacity=capacity, critic=critic,
                             reward=reward)
    phase = max(phases, key=lambda name: reserved_bytes(phases[name]))
    terms = phases[phase]
    allocated = sum(terms.values())
    reserved = reserved_bytes(terms)
    device = reserved + device_overhead_bytes(cfg.num_gpus)
    notes = []
    if precision != cfg.precision:
        notes.append(
            f"{gpu.id} has no {cfg.precision} support: trains in {precision} mixed precision"
            + (" with loss scaling" if precision == "fp16" else "")
        )
    if residual_bytes(model, cfg) == 4:
        notes.append("QLoRA with fp32 norm weights (the framework's kbit preparation): the "
                     "residual stream and the MLP's tensors are fp32")
    utilization = None
    blocked = False
    if cfg.is_rl and not cfg.generates_in_trainer:
        eng = engine(model, cfg, capacity)
        utilization = eng.total / capacity
        if eng.concurrency < 1:
            blocked = True
            notes.append(f"the rollout engine's {cfg.gpu_memory_utilization:.0%} of memory "
                         "does not hold its weights and one full-length sequence")
    if cfg.workload in ("sft", "pretrain"):
        names = dict.fromkeys(k for t in phases.values() for k in t)  # forward/backward's first
        full_terms = {k: terms.get(k, 0.0) for k in names}
    else:
        full_terms = dict(terms)
    host = workload_host_ram(model, cfg, gpus_per_node or gpus_per_host(gpu, None),
                             precision=precision, critic=critic, reward=reward)
    per_phase = {name: reserved_bytes(t) + device_overhead_bytes(cfg.num_gpus)
                 for name, t in phases.items()}
    return MemoryEstimate(
        terms=full_terms,
        phase=phase,
        allocated=allocated,
        reserved=reserved,
        device=device,
        host_ram=host,
        capacity=capacity,
        precision=precision,
        notes=tuple(notes),
        phases=per_phase,
        groups={name: phase_group(cfg, name) for name in phases},
        engine_utilization=utilization,
        blocked=blocked,
    )
