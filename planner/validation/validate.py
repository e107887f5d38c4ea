"""Predict published validation cases and summarise the error (``planner validate``).

A case file follows the schema of validation/ (``{schema_version, units, cases}``). Each memory
case is turned into a TrainConfig: the case's own fields, and for what it leaves out the profile
of the framework it names (catalog/frameworks, planner.catalog.frameworks). A case naming a
framework with no profile, or that the models cannot express yet, gets ``predicted: None`` and a
reason, never a guess.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.catalog.frameworks import Profile, config_fields, default_engine, resolve
from planner.catalog.load import Catalog, shipped_validation_dir
from planner.catalog.request import TrainConfig, zero_stage_of
from planner.catalog.request_checks import validate_config
from planner.catalog.specs import ModelSpec, tensor_parallel_options
from planner.errors import PlannerError, UnknownNameError
from planner.inputs import load_file
from planner.models.memory import GIB, MemoryEstimate
from planner.models.workloads import ROLLOUT_PHASE, estimate_memory, workload_phases
from planner.validation.validation_input import (
    CaseAdditions,
    check_cases,
    parse_additions,
    with_additions,
)

SFT_WORKLOADS = ("sft", "pretrain")
EMULATING_GPU = "h100-sxm"
SFT_METHODS = ("full", "lora", "qlora", "dora", "freeze")

_TARGET_NAMES = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "output_proj": "o",
    "gate_proj": "gate", "up_proj": "up", "down_proj": "down", "q": "q", "k": "k", "v": "v",
    "o": "o", "gate": "gate", "up": "up", "down": "down", "c_attn": "all-linear",
    "all": "all-linear", "all-linear": "all-linear",
}


@dataclass(frozen=True)
class CaseResult:
    """One validation case: what was measured and what the planner predicts."""
    id: str
    kind: str  # peak | fits | oom | throughput
    workload: str
    method: str
    framework: str
    usable: bool
    measured_gib: float | None
    measured_as: str | None
    capacity_gib: float | None
    predicted_gib: float | None
    # For readings whose counter is unknown: the allocated .. device-level (nvidia-smi) range.
    predicted_range_gib: tuple[float, float] | None
    predicted_fits: bool | None
    reason: str | None
    assumptions: tuple[str, ...] = ()  # RL/preference mapping choices (validate.rl_case)
    framework_version: str | None = None  # the release or commit the measurement ran

    @property
    def rel_err(self) -> float | None:
        """(predicted - measured) / measured. For a reading whose counter is unknown the
        prediction is the range from torch-allocated to device level, and the error is the
        distance to that range (0 inside it): the 'wider tolerance' the validation README asks
        for unknown readings. ``strict_rel_err`` compares with the reserved figure instead."""
        if self.predicted_gib is None or not self.measured_gib:
            return None
        if self.predicted_range_gib is not None:
            lo, hi = self.predicted_range_gib
            nearest = min(max(self.measured_gib, lo), hi)
            return (nearest - self.measured_gib) / self.measured_gib
        return self.strict_rel_err

    @property
    def strict_rel_err(self) -> float | None:
        """(predicted - measured) / measured peak; None without both."""
        if self.predicted_gib is None or not self.measured_gib:
            return None
        return (self.predicted_gib - self.measured_gib) / self.measured_gib


ADDITIONS_FILE = "case_additions.yaml"


def case_additions() -> CaseAdditions:
    """The project's additions to published cases (validation/case_additions.yaml): settings
    and framework versions their sources state that the shared case files do not carry."""
    path = shipped_validation_dir() / ADDITIONS_FILE
    data = load_file(path, what="validation additions", kind="yaml")
    return parse_additions(data, what=f"validation additions {str(path)!r}")


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a validation file, read through the input boundary, with the project's
    additions for their ids (validation_input.with_additions), checked against
    validation_input's case schema."""
    data = load_file(path, what="validation file", kind="yaml")
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise PlannerError(f"validation file {str(path)!r} has no 'cases' list")
    what = f"validation file {str(path)!r}"
    cases = check_cases(cases, what=what)
    return check_cases(with_additions(cases, case_additions()), what=what)


def _targets(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if not text:
        return default
    names: list[str] = []
    for part in re.split(r"[,+ ]+", str(text).lower()):
        if part == "mlp":
            names += ["gate", "up", "down"]
        elif part in _TARGET_NAMES:
            names.append(_TARGET_NAMES[part])
    return tuple(dict.fromkeys(names)) or default


def _grad_accum(case: dict[str, Any]) -> int:
    extra = case.get("extra") or {}
    if extra.get("grad_accum"):
        return int(extra["grad_accum"])
    found = re.search(r"\bGA (\d+)", f"{case.get('note', '')} {case.get('location', '')}")
    return int(found.group(1)) if found else 1


def _chunked_loss(case: dict[str, Any], default: bool) -> bool:
    """The case's explicit extra.chunked_ce, else its framework profile's default."""
    extra = case.get("extra") or {}
    return bool(extra["chunked_ce"]) if "chunked_ce" in extra else default


def _fp32_weights(case: dict[str, Any]) -> bool:
    """The case holds its trained (and, with adapters, frozen base) weights in fp32:
    extra.master_weights_dtype / extra.frozen_base_weights_dtype name fp32."""
    extra = case.get("extra") or {}
    frozen = str(extra.get("frozen_base_weights_dtype") or "")
    master = str(extra.get("master_weights_dtype") or "")
    if (case.get("method") or "full") == "full":
        return master.startswith("fp32")
    return frozen.startswith("fp32")


def _vocab_chunk(case: dict[str, Any]) -> int | None:
    """extra.fused_lm_head_chunk_size: the LM head and loss over slices of that many vocabulary
    rows (prime-rl's fused head)."""
    chunk = (case.get("extra") or {}).get("fused_lm_head_chunk_size")
    return int(chunk) if chunk else None


def _fsdp(case: dict[str, Any], profile: Profile) -> bool:
    """FSDP as the case states it, or on one GPU where the framework always wraps in FSDP."""
    return case.get("sharding") == "fsdp" or (
        bool(profile.value("fsdp_on_one_gpu")) and (case.get("sharding") or "none") == "none")


def case_profile(case: dict[str, Any], catalog: Catalog) -> Profile:
    """The profile of the framework a case names (PlannerError: none, or no profile)."""
    slug = str(case.get("framework") or "").strip()
    if not slug:
        raise PlannerError("the case names no framework")
    try:
        return resolve(catalog, slug)
    except UnknownNameError:
        raise PlannerError(f"framework {slug!r} has no profile (catalog/frameworks)") from None


def _semantics(case: dict[str, Any], profile: Profile, *, sharded: bool) -> dict[str, Any]:
    """The TrainConfig fields a case takes from its framework's profile, with the case's own
    statements winning: extra.chunked_ce, extra.fused_lm_head_chunk_size and the weight dtypes
    (extra.master_weights_dtype / frozen_base_weights_dtype)."""
    sem = config_fields(profile, workload=str(case.get("workload")), sharded=sharded)
    extra = case.get("extra") or {}
    sem["chunked_loss"] = _chunked_loss(case, bool(sem.get("chunked_loss", False)))
    if "chunked_ce" in extra and not extra["chunked_ce"]:
        sem["lm_head_vocab_chunk"] = None
    if _vocab_chunk(case):
        sem["lm_head_vocab_chunk"] = _vocab_chunk(case)
    if extra.get("master_weights_dtype") or extra.get("frozen_base_weights_dtype"):
        sem["fp32_trained_weights"] = _fp32_weights(case)
    return sem


def _lora_defaults(case: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """LoRA rank and targets: the case's, else the framework's defaults (PEFT's r 16 on every
    linear layer where no profile says)."""
    extra = case.get("extra") or {}
    return {"lora_rank": case.get("lora_rank") or profile.value("lora_rank", 16),
            "lora_targets": _targets(extra.get("target_modules"),
                                     tuple(profile.value("lora_targets", ("all-linear",))))}


def trainer_only_reading(case: dict[str, Any]) -> bool:
    """An RL reading of trainer GPUs alone (extra.trainer_only, or no rollout engine memory on
    them: rl.gpu_memory_utilization 0)."""
    extra = case.get("extra") or {}
    rl = case.get("rl") or {}
    return bool(extra.get("trainer_only")) or rl.get("gpu_memory_utilization") == 0


def case_config(case: dict[str, Any], catalog: Catalog) -> tuple[TrainConfig, Any]:
    """(TrainConfig, resolved model) for one memory case; PlannerError when not expressible.
    Reward-model, DPO, PPO and GRPO cases go through ``rl_case`` (critic/reward models and the
    framework's RL options); this returns its config and policy model."""
    workload = case.get("workload")
    if workload in RL_CASE_WORKLOADS:
        rc = rl_case(case, catalog)
        return rc.cfg, rc.resolved
    if workload not in SFT_WORKLOADS:
        raise PlannerError(f"workload {workload!r} is not a training workload")
    if not case.get("model"):
        raise PlannerError("no public checkpoint: architecture unknown")
    resolved = catalog.model(case["model"])
    extra = case.get("extra") or {}
    profile = case_profile(case, catalog)
    method = case.get("method") or "full"
    sharding = case.get("sharding") or "none"
    quant = "gptq" if "gptq" in str(extra.get("weight_quant", "")).lower() else "nf4"
    if resolved.weight_bits and method != "qlora":
        raise PlannerError("quantized checkpoint trained without a QLoRA-style adapter")
    zero = zero_stage_of("zero1" if sharding == "megatron" else sharding)
    fsdp = _fsdp(case, profile)
    lora = _lora_defaults(case, profile)
    cfg = TrainConfig(
        **_semantics(case, profile, sharded=bool(zero) or fsdp),
        workload=workload,
        method=method,
        lora_rank=lora["lora_rank"] if method in ("lora", "dora", "qlora") else None,
        lora_targets=lora["lora_targets"],
        quant_format=quant,
        optimizer=case.get("optimizer") or "adamw",
        precision=case.get("precision") or "bf16",
        num_gpus=case["num_gpus"],
        zero_stage=zero,
        fsdp=fsdp,
        tp=case.get("tp") or 1,
        pp=case.get("pp") or 1,
        cp=case.get("cp") or 1,
        offload=case.get("offload") or "none",
        checkpointing=case.get("grad_checkpointing")
        or profile.value("checkpointing_default", "none"),
        micro_batch_size=case.get("micro_batch_size") or 1,
        grad_accum=_grad_accum(case),
        seq_len=case.get("seq_len") or 2048,
        compiled=bool(extra.get("compile", False)),
        paged_optimizer=bool(extra.get("paged_optimizer", False)),
        optimizer_in_backward=bool(extra.get("optimizer_in_bwd", False)),
    )
    validate_config(cfg, resolved.spec)
    return cfg, resolved


# ---------------------------------------------------------------------------------------------
# Reward-model, DPO, PPO and GRPO cases
# ---------------------------------------------------------------------------------------------
RL_CASE_WORKLOADS = ("rm", "dpo", "ppo", "grpo")

# Critic / reward checkpoints named by cases that are fine-tunes of a catalog architecture:
# weqweasdas/RM-Mistral-7B is a MistralForSequenceClassification of Mistral-7B-Instruct-v0.2
# (its config.json: 32 layers, hidden 4096, 8 kv heads, vocab 32000).
ROLE_ARCHITECTURE = {"weqweasdas/RM-Mistral-7B": "mistralai/Mistral-7B-Instruct-v0.2"}

# The rollout engine that generates with the actor's own weights (DeepSpeed-Chat's hybrid
# engine, the deepspeed-chat profile's rollout_engines).
ACTOR_WEIGHT_ENGINE = "deepspeed-hybrid"


def _generated_prompts(case: dict[str, Any], per_device: int) -> int:
    """Prompts an iteration generates under extra.generation_batches: that many batches of
    ``per_device`` prompts on every GPU, at most the case's global_batch_size."""
    prompts = per_device * case["num_gpus"] * int(case["extra"]["generation_batches"])
    cap = case.get("global_batch_size")
    return min(int(cap), prompts) if cap else prompts


@dataclass(frozen=True)
class RLCase:
    """A reward-model/DPO/PPO/GRPO case as the planner's inputs, with what was assumed."""

    cfg: TrainConfig
    resolved: Any
    critic: Any = None  # ModelSpec or None
    reward: Any = None
    assumptions: tuple[str, ...] = ()
    # torch counters do not see the rollout engine's pool (vLLM >= 0.7 sleep mode allocates
    # through its CuMem allocator, outside torch's caching allocator).
    engine_outside_counter: bool = False


def _role_model(name: str | None, catalog: Catalog) -> Any:
    """The ModelSpec of a critic/reward model named by a case: its Hugging Face id, the first
    word of the field (a description in parentheses may follow)."""
    if not name:
        return None
    repo = str(name).split()[0]
    return catalog.model(ROLE_ARCHITECTURE.get(repo, repo)).spec


def _pairs(case: dict[str, Any]) -> int:
    """Pairs (rm, dpo examples) per micro-batch: extra.pairs_per_micro_batch, else the case's
    sequences / 2 (the schema counts 2 sequences per pair), else per-device examples."""
    extra = case.get("extra") or {}
    if extra.get("pairs_per_micro_batch"):
        return int(extra["pairs_per_micro_batch"])
    if case.get("micro_batch_size"):
        return max(1, int(case["micro_batch_size"]) // 2)
    if extra.get("per_device_batch_examples"):
        return int(extra["per_device_batch_examples"])
    raise PlannerError("micro-batch unknown")


def rl_case(case: dict[str, Any], catalog: Catalog, *, for_time: bool = False) -> RLCase:
    """Map one rm/dpo/ppo/grpo case (memory or throughput schema) to the planner's inputs.

    * rm/dpo: micro_batch_size counts pairs (TrainConfig) where the case counts sequences.
    * verl (FSDP + vLLM hybrid engine): ``offload: optimizer+params`` is verl's
      param_offload/optimizer_offload, which moves the actor's states to the host between
      phases and back for the update: offload_idle, not ZeRO-style offload during compute.
      Ulysses SP (extra.ulysses_sp / cp): the trainer model is data parallel only, so a DP
      rank's micro-batch split over sp GPUs is mapped to micro_batch / sp sequences per GPU
      (the same tokens per GPU; the all-to-all buffers are not modelled). Dynamic batching
      (ppo_max_token_len_per_gpu) becomes that many tokens per micro-step.
    * extra.generation_batches (DeepSpeed-Chat's --generation_batches): an iteration generates
      that many batches of the per-device batch on every GPU, at most global_batch_size
      prompts; extra.critic_reward_model names the critic and reward model together.
    * A rollout engine that generates with the actor's own weights (the profile's
      deepspeed-hybrid engine) moves no engine weights between phases.
    The settings of a published run (batch, inference TP, sharding, method) are the case's
    own fields (or the project's additions to it, validation/case_additions.yaml).
    """
    workload = str(case.get("workload"))
    if not case.get("model"):
        raise PlannerError("no public checkpoint: architecture unknown")
    resolved = catalog.model(case["model"])
    extra = case.get("extra") or {}
    profile = case_profile(case, catalog)
    assumed: list[str] = []
    if extra.get("roles"):
        # OpenRLHF without --colocate: each role on GPUs of its own (e.g. actor 4, critic 2,
        # reference 1, reward 1) is --placement split, but this run generates with HF
        # generate on the actor's GPUs: no engine GPUs, and a generation batch the case lacks
        raise PlannerError(f"per-role GPU groups ({extra['roles']}) with generation on the "
                           "actor's GPUs (HF generate, no vLLM engines): split placement "
                           "needs engine GPUs of its own")
    sharding = case.get("sharding") or "none"
    if sharding == "megatron" and not for_time:
        raise PlannerError("RL trainer with Megatron TP/PP: the RL trainer model is data "
                           "parallel only")
    # Megatron's distributed optimizer shards the optimizer states like ZeRO-1 (time only:
    # the caller sets the trainer's tp/pp after validation).
    zero = zero_stage_of("zero1" if sharding == "megatron" else sharding)
    ckpt = case.get("grad_checkpointing")
    if ckpt is None:
        ckpt = profile.value("checkpointing_default", "none")
        assumed.append(f"checkpointing {ckpt} ({profile.id} default)")
    fsdp = _fsdp(case, profile)
    common: dict[str, Any] = {
        **_semantics(case, profile, sharded=bool(zero) or fsdp),
        "workload": workload, "optimizer": case.get("optimizer") or "adamw",
        "precision": case.get("precision") or "bf16",
        "num_gpus": case["num_gpus"], "zero_stage": zero, "fsdp": fsdp,
        "checkpointing": ckpt,
        "paged_optimizer": bool(extra.get("paged_optimizer", False)),
        "optimizer_in_backward": bool(extra.get("optimizer_in_bwd", False)),
        "compiled": bool(extra.get("compile", False)),
    }
    offload = case.get("offload") or "none"
    _set_method(case, profile, common)
    critic = reward = None
    if workload in ("rm", "dpo"):
        cfg = TrainConfig(**common, micro_batch_size=_pairs(case), offload=offload,
                          seq_len=case.get("seq_len") or 2048,
                          grad_accum=int(extra.get("grad_accum") or 1))
        if workload == "rm" and not extra.get("pairs_per_micro_batch") \
                and extra.get("per_device_batch_examples"):
            assumed.append("each example taken as one pair (ranked replies: more sequences)")
    elif trainer_only_reading(case):
        # The reading is of trainer GPUs alone (disaggregated RL: the engines run elsewhere, no
        # reference model on them): the actor's training step over the case's packed
        # sequences, the same phases as a training job of that batch.
        cfg = TrainConfig(**{**common, "workload": "sft"}, micro_batch_size=int(
            case.get("micro_batch_size") or 1), offload=offload,
            seq_len=int(case.get("seq_len") or 2048),
            grad_accum=int(extra.get("grad_accum") or 1))
        assumed.append("trainer-only GPUs: the actor's training step (no engine, no reference)")
    else:
        cfg, critic, reward = _rl_config(case, catalog, resolved.spec, profile, common=common,
                                         offload=offload, assumed=assumed, for_time=for_time)
    validate_config(cfg, resolved.spec)
    return RLCase(cfg, resolved, critic, reward, tuple(assumed),
                  engine_outside_counter=bool(profile.value("engine_outside_torch")))


def _set_method(case: dict[str, Any], profile: Profile, common: dict[str, Any]) -> None:
    """The case's method (and LoRA rank and targets) into ``common`` (rl_case)."""
    method = case.get("method") or "full"
    common["method"] = method
    if method in ("lora", "dora", "qlora"):
        lora = _lora_defaults(case, profile)
        common["lora_rank"] = lora["lora_rank"]
        common["lora_targets"] = lora["lora_targets"]


def _rl_config(case: dict[str, Any], catalog: Catalog, spec: ModelSpec, profile: Profile, *,
               common: dict[str, Any], offload: str, assumed: list[str], for_time: bool
               ) -> tuple[TrainConfig, Any, Any]:
    """The TrainConfig and (critic, reward) models of a PPO/GRPO case (rl_case); what it
    assumes is appended to ``assumed``."""
    extra = case.get("extra") or {}
    workload = str(case.get("workload"))
    critic = reward = None
    rl = case.get("rl") or {}
    if not (rl.get("prompt_len") and rl.get("response_len")):
        raise PlannerError("rollout lengths unknown")
    prompt, response = int(rl["prompt_len"]), int(rl["response_len"])
    seq = prompt + response
    sp = int(extra.get("ulysses_sp") or case.get("cp") or 1)
    rl_opts: dict[str, Any] = {
        "prompt_len": prompt, "response_len": response, "rollout_n": rl.get("rollout_n"),
        "rollout_tp": int(rl.get("rollout_tp") or 1),
        "gpu_memory_utilization": rl.get("gpu_memory_utilization"),
    }
    if not spec.splits_heads(rl_opts["rollout_tp"]):
        # vLLM replicates KV heads when its TP exceeds them; the planner's engine needs a
        # divisor: the largest one below (more weight per GPU: conservative)
        tp = tensor_parallel_options(spec, rl_opts["rollout_tp"] - 1)[-1]
        assumed.append(f"rollout TP {rl_opts['rollout_tp']} over {spec.num_kv_heads} kv "
                       f"heads -> {tp}")
        rl_opts["rollout_tp"] = tp
    if profile.value("idle_offload"):
        # the framework's offload moves states to the host between phases
        rl_opts["offload_idle"] = offload == "optimizer+params"
        offload = "none"
    mb = case.get("micro_batch_size")
    if mb is None and extra.get("ppo_max_token_len_per_gpu"):
        mb = max(1, int(extra["ppo_max_token_len_per_gpu"]) // seq)
        assumed.append(f"dynamic batching: {mb} sequences per micro-step")
    mb = mb or extra.get("script_micro_batch")
    if mb and extra.get("generation_batches"):
        rl_opts["rollout_batch"] = _generated_prompts(case, int(mb))
    if for_time and default_engine(profile) == ACTOR_WEIGHT_ENGINE:
        # the engine generates with the actor's own (gathered) weights and drops them after
        # generation: no engine weights cross PCIe (no vLLM sleep traffic)
        rl_opts["engine_sleep"] = False
    if extra.get("critic_reward_model"):
        critic = reward = _role_model(extra["critic_reward_model"], catalog)
    if mb is None:
        mb = 1
        assumed.append("micro-batch 1 (not stated)")
    if sp > 1:
        assumed.append(f"Ulysses SP {sp}: {mb} sequences per DP rank -> "
                       f"{math.ceil(mb / sp)} per GPU")
        mb = math.ceil(mb / sp)
    if extra.get("reward_model"):
        reward = _role_model(extra["reward_model"], catalog)
        critic = reward if workload == "ppo" else None
    if extra.get("critic_model") and workload == "ppo":
        critic = _role_model(extra["critic_model"], catalog)
    prompts = (extra.get("train_batch_size_prompts") or extra.get("batch_size_prompts")
               or extra.get("train_batch_size"))
    if prompts and "rollout_batch" not in rl_opts:
        rl_opts["rollout_batch"] = int(prompts)
    cfg = TrainConfig(**common, **rl_opts, micro_batch_size=int(mb), offload=offload,
                      seq_len=seq)
    return cfg, critic, reward


def _predicted_gib(est: MemoryEstimate, measured_as: str | None) -> float:
    if measured_as == "allocated":
        return est.allocated / GIB
    if measured_as == "nvidia-smi":
        return est.device / GIB
    return est.reserved / GIB  # reserved, unknown, estimate


def predict_case(case: dict[str, Any], catalog: Catalog) -> CaseResult:
    """The planner's prediction for one validation case."""
    outcome = case.get("outcome") or {}
    kind = outcome.get("kind", "throughput" if "metric" in case else "peak")
    base = {
        "id": str(case.get("id")),
        "kind": kind,
        "workload": str(case.get("workload")),
        "method": str(case.get("method") or "full"),
        "framework": str(case.get("framework")),
        "usable": bool(case.get("usable_for_accuracy")),
        "measured_gib": outcome.get("peak_gib"),
        "measured_as": outcome.get("measured_as"),
        "capacity_gib": case.get("gpu_memory_gib"),
        "framework_version": case.get("framework_version"),
    }
    if kind == "throughput":
        return CaseResult(**base, predicted_gib=None, predicted_range_gib=None,
                          predicted_fits=None,
                          reason="throughput cases are predicted by the throughput model")
    if base["workload"] in RL_CASE_WORKLOADS:
        return _predict_rl_case(case, catalog, base)
    try:
        cfg, resolved = case_config(case, catalog)
        # Without a GPU model (memory budgets emulated on one large GPU, or not stated) the
        # peak is predicted on a bf16-capable datacenter GPU; with no capacity, no verdict.
        gpu = catalog.gpu(case.get("gpu") or EMULATING_GPU)
    except PlannerError as exc:
        return CaseResult(**base, predicted_gib=None, predicted_range_gib=None,
                          predicted_fits=None, reason=str(exc))
    capacity = case.get("gpu_memory_gib") or (gpu.memory_gib if case.get("gpu") else None)
    if capacity:
        gpu = gpu.model_copy(update={"memory_gib": capacity})
    est = estimate_memory(resolved.spec, gpu, cfg)
    return CaseResult(
        **{**base, "capacity_gib": capacity},
        predicted_gib=round(_predicted_gib(est, base["measured_as"]), 3),
        predicted_range_gib=(round(est.allocated / GIB, 3), round(est.device / GIB, 3))
        if base["measured_as"] == "unknown" else None,
        predicted_fits=est.fits() if capacity else None,
        reason=None,
    )


# GPU memory assumed where an RL log does not name its GPU (verl-log-*: reserved peaks of
# 80.5-92.4 GiB imply >= 94 GB cards, H100 NVL / H20 class). It sizes only the vLLM pool
# (gpu_memory_utilization x capacity), which those torch-allocated readings do not contain.
ASSUMED_RL_CAPACITY_GIB = 94.0


def rl_allocated_without_engine(rc: RLCase, gpu: Any) -> float:
    """Peak torch-allocated bytes over the phases a torch counter sees when the engine's pool
    is outside it: every phase but the rollout, without engine terms."""
    phases = workload_phases(rc.resolved.spec, rc.cfg, rc.cfg.effective_precision(gpu),
                             capacity=gpu.memory_gib * GIB, critic=rc.critic, reward=rc.reward)
    return max(sum(v for k, v in terms.items() if not k.startswith("engine "))
               for name, terms in phases.items() if name != ROLLOUT_PHASE)


def _predict_rl_case(case: dict[str, Any], catalog: Catalog, base: dict[str, Any]) -> CaseResult:
    try:
        rc = rl_case(case, catalog)
        gpu = catalog.gpu(case.get("gpu") or EMULATING_GPU)
    except PlannerError as exc:
        return CaseResult(**base, predicted_gib=None, predicted_range_gib=None,
                          predicted_fits=None, reason=f"{base['workload']}: {exc}")
    capacity = case.get("gpu_memory_gib") or (gpu.memory_gib if case.get("gpu") else None)
    gpu = gpu.model_copy(update={"memory_gib": capacity or ASSUMED_RL_CAPACITY_GIB})
    est = estimate_memory(rc.resolved.spec, gpu, rc.cfg, critic=rc.critic, reward=rc.reward)
    measured_as = base["measured_as"]
    if measured_as == "allocated" and rc.engine_outside_counter and rc.cfg.is_rl:
        predicted = rl_allocated_without_engine(rc, gpu) / GIB
    else:
        predicted = _predicted_gib(est, measured_as)
    return CaseResult(
        **{**base, "capacity_gib": capacity, "method": rc.cfg.method},
        predicted_gib=round(predicted, 3) if base["kind"] == "peak" else round(
            est.device / GIB, 3),
        predicted_range_gib=(round(est.allocated / GIB, 3), round(est.device / GIB, 3))
        if measured_as == "unknown" else None,
        predicted_fits=est.fits() if capacity else None,
        reason=None,
        assumptions=rc.assumptions,
    )


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 1])."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def error_stats(results: list[CaseResult]) -> dict[str, Any]:
    """Median/p90 |relative error|, bias and shares within 10/20% of peak cases; fits accuracy."""
    errs = [r.rel_err for r in results if r.kind == "peak" and r.rel_err is not None]
    # A measured peak means the run fitted its GPU: it counts as a "fits" verdict too.
    verdicts = [r for r in results if r.kind in ("fits", "oom", "peak")
                and r.predicted_fits is not None]
    strict = [abs(r.strict_rel_err) for r in results
              if r.kind == "peak" and r.strict_rel_err is not None]
    out: dict[str, Any] = {
        "peak_cases": len(errs),
        "fits_cases": len(verdicts),
        "not_modelled": sum(1 for r in results if r.reason),
    }
    if errs:
        abs_errs = [abs(e) for e in errs]
        out.update(
            median_abs_err=statistics.median(abs_errs),
            p90_abs_err=percentile(abs_errs, 0.9),
            bias=statistics.fmean(errs),
            within_10=sum(e <= 0.10 for e in abs_errs) / len(errs),
            within_20=sum(e <= 0.20 for e in abs_errs) / len(errs),
            strict_median_abs_err=statistics.median(strict),
            strict_p90_abs_err=percentile(strict, 0.9),
        )
    if verdicts:
        right = sum(r.predicted_fits == (r.kind != "oom") for r in verdicts)
        out["fits_accuracy"] = right / len(verdicts)
        out["fits_predicted_for_oom"] = sum(
            1 for r in verdicts if r.kind == "oom" and r.predicted_fits
        )
    return out


def confusion(results: list[CaseResult]) -> dict[str, int]:
    """Published fits/oom against the predicted verdict (cases with a capacity)."""
    out = {"fits_predicted_fits": 0, "fits_predicted_oom": 0, "oom_predicted_fits": 0,
           "oom_predicted_oom": 0, "no_verdict": 0}
    for r in results:
        if r.kind not in ("fits", "oom"):
            continue
        if r.predicted_fits is None:
            out["no_verdict"] += 1
            continue
        out[f"{r.kind}_predicted_{'fits' if r.predicted_fits else 'oom'}"] += 1
    return out


def rl_summary(results: list[CaseResult]) -> dict[str, Any]:
    """Reward-model, DPO, PPO and GRPO cases apart from the SFT acceptance set: peaks (none is
    usable_for_accuracy: GPU unknown or a secondary source) and the fits/oom confusion counts,
    overall and per workload."""
    rl = [r for r in results if r.workload in RL_CASE_WORKLOADS]
    peaks = [r for r in rl if r.kind == "peak"]
    verdicts = [r for r in rl if r.kind in ("fits", "oom")]
    return {
        "peaks": error_stats(peaks),
        "peaks_by_workload": {w: error_stats([r for r in peaks if r.workload == w])
                              for w in RL_CASE_WORKLOADS},
        "verdicts": confusion(verdicts),
        "verdicts_by_workload": {w: confusion([r for r in verdicts if r.workload == w])
                                 for w in RL_CASE_WORKLOADS},
    }


def by_framework(results: list[CaseResult]) -> dict[str, dict[str, Any]]:
    """Per framework the cases are of: the error statistics and the framework versions the
    measurements ran (those the cases state, sorted; ``unstated``: cases that state none)."""
    groups: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        groups[r.framework].append(r)
    return {fw: {**error_stats(rs),
                 "versions": sorted({r.framework_version for r in rs if r.framework_version}),
                 "unstated": sum(1 for r in rs if not r.framework_version)}
            for fw, rs in sorted(groups.items())}


def summarise(results: list[CaseResult]) -> dict[str, Any]:
    """Overall, per workload/method, the SFT-family acceptance set, and unmodelled reasons."""
    usable = [r for r in results if r.usable]
    groups: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        groups[f"{r.workload}/{r.method}"].append(r)
    reasons: dict[str, int] = defaultdict(int)
    for r in results:
        if r.reason:
            reasons[r.reason] += 1
    sft_usable = [r for r in usable if r.workload in SFT_WORKLOADS and r.method in SFT_METHODS]
    return {
        "cases": len(results),
        "usable": error_stats(usable),
        "sft_acceptance": error_stats(sft_usable),
        # verdicts: the usable SFT peaks (they ran, so "fits") plus every SFT fits/oom case
        "sft_verdicts": error_stats(sft_usable + [
            r for r in results if r.kind in ("fits", "oom") and r.workload in SFT_WORKLOADS]),
        "all_cases": error_stats(results),
        "by_workload_method": {k: error_stats(v) for k, v in sorted(groups.items())},
        "rl": rl_summary(results),
        "by_framework": by_framework(results),
        "not_modelled_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
    }


def validate_file(path: Path, catalog: Catalog) -> tuple[list[CaseResult], dict[str, Any]]:
    """The results of every case in ``path`` and their summary."""
    results = [predict_case(c, catalog) for c in load_cases(path)]
    return results, summarise(results)
