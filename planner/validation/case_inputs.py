"""A validation case as the planner's inputs: ``case_config`` maps a training case (memory or
throughput schema) to a TrainConfig and its framework profile, ``rl_case`` an rm/dpo/ppo/grpo
case to the planner's RL inputs, with what each mapping assumed."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from planner.catalog.frameworks import Profile, built_model, config_fields, resolve
from planner.catalog.load import Catalog
from planner.catalog.request import TrainConfig, zero_stage_of
from planner.catalog.request_checks import validate_config
from planner.catalog.specs import ModelSpec, tensor_parallel_options
from planner.errors import PlannerError, UnknownNameError
from planner.models.attention import KERNEL_NAMES
from planner.validation.case_releases import (
    bnb_keeps_inputs,
    fused_optimizer_of,
    qlora_fp32_norms_of,
    vllm_v0_of,
)
from planner.validation.validation_input import case_sharding

SFT_WORKLOADS = ("sft", "pretrain")

_TARGET_NAMES = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "output_proj": "o",
    "gate_proj": "gate", "up_proj": "up", "down_proj": "down", "q": "q", "k": "k", "v": "v",
    "o": "o", "gate": "gate", "up": "up", "down": "down", "c_attn": "all-linear",
    "all": "all-linear", "all-linear": "all-linear",
}


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


# A case's yes/no statements, extra key -> TrainConfig field (activation_offload: the shared key)
CASE_FLAGS = {"offloaded_checkpointing": "offload_checkpoints", "activation_offload":
              "offload_activations", "trainable_embeddings": "peft_trains_embeddings"}


def _fp32_weights(case: dict[str, Any]) -> bool:
    """The case holds its trained (and, with adapters, frozen base) weights in fp32:
    extra.master_weights_dtype / extra.frozen_base_weights_dtype name fp32."""
    extra = case.get("extra") or {}
    full = (case.get("method") or "full") == "full"
    key = "master_weights_dtype" if full else "frozen_base_weights_dtype"
    return str(extra.get(key) or "").startswith("fp32")


def _vocab_chunk(case: dict[str, Any]) -> int | None:
    """extra.fused_lm_head_chunk_size: the LM head and loss over slices of that many vocabulary
    rows (prime-rl's fused head)."""
    chunk = (case.get("extra") or {}).get("fused_lm_head_chunk_size")
    return int(chunk) if chunk else None


def _fsdp(case: dict[str, Any], profile: Profile) -> bool:
    """FSDP as the case states it, or on one GPU where the framework always wraps in FSDP."""
    return case.get("sharding") == "fsdp" or (
        bool(profile.value("fsdp_on_one_gpu")) and (case.get("sharding") or "none") == "none")


def _dp_shard(case: dict[str, Any], catalog: Catalog) -> int | None:
    """Hybrid sharding a case states (extra.sharding_strategy hsdp / hybrid_shard: FSDP shards
    within each host and replicates across hosts): the data-parallel ranks of one host,
    extra.gpus_per_node or the GPU's catalog max_gpus_per_node over tp x cp; None otherwise."""
    extra = case.get("extra") or {}
    if str(extra.get("sharding_strategy", "")).lower() not in ("hsdp", "hybrid_shard"):
        return None
    node = extra.get("gpus_per_node") or catalog.gpu(case["gpu"]).max_gpus_per_node or 1
    return max(1, min(node, case["num_gpus"]) // ((case.get("tp") or 1) * (case.get("cp") or 1)))


def case_profile(case: dict[str, Any], catalog: Catalog) -> Profile:
    """The profile of the framework a case names (PlannerError: none, or no profile)."""
    slug = str(case.get("framework") or "").strip()
    if not slug:
        raise PlannerError("the case names no framework")
    try:
        return resolve(catalog, slug)
    except UnknownNameError:
        raise PlannerError(f"framework {slug!r} has no profile (catalog/frameworks)") from None


def run_profile(case: dict[str, Any], profile: Profile, catalog: Catalog) -> Profile:
    """The profile whose kernels a case ran: a backend of ``profile`` that its location names
    (a backend switch, e.g. LLaMA-Factory's use_unsloth rows), else ``profile``."""
    location = str(case.get("location", "")).lower()
    for backend in profile.value("backends") or ():
        if backend in location:
            return resolve(catalog, backend)
    return profile


def _double_quant(text: object) -> bool | None:
    """What an extra.weight_quant says of NF4 double quantisation: False for "no double
    quantization", True for a -dq recipe or "double quant" (bitsandbytes nf4-dq), None when
    it says neither."""
    text = str(text or "").lower()
    if "no double" in text:
        return False
    return True if "-dq" in text or "double quant" in text else None


def _semantics(case: dict[str, Any], profile: Profile, *, sharded: bool) -> dict[str, Any]:
    """The TrainConfig fields a case takes from its framework's profile, the case's own
    statements winning: extra.chunked_ce (false: whole logits, no fused head), extra.loss_dtype
    (16bit / fp32), extra.offloaded_checkpointing, extra.activation_offload, extra.fused_lm_head_
    chunk_size, weight dtypes (extra.master_weights_dtype / frozen_base_weights_dtype), pure
    16-bit training (extra.pure_bf16: bf16 weights and optimizer states, no fp32 master, as
    LitGPT's --precision bf16-true), QLoRA's unquantized parts (extra.qlora_unquantized_dtype),
    the attention it ran (extra.attention: attention.KERNEL_NAMES, or eager: the probabilities
    materialised), its LoRA dropout (extra.lora_dropout), the NF4 recipe (extra.weight_quant:
    _double_quant), whether its loop holds the previous micro-batch's outputs
    (extra.holds_previous_outputs), torch.compile (extra.compile, else the framework's
    compiled_workloads), fused norms (extra.norm_type) and the engine's (extra.rollout_*)."""
    sem = config_fields(profile, workload=str(case.get("workload")), sharded=sharded)
    sem.pop("lora_targets", None)  # the case's, else the framework's: _lora_defaults
    extra = case.get("extra") or {}
    sem["chunked_loss"] = bool(extra.get("chunked_ce", sem.get("chunked_loss", False)))
    sem["fused_optimizer"] = fused_optimizer_of(case, profile)
    if extra.get("loss_dtype") in ("16bit", "fp32"):  # the dtype the case's loss ran in
        sem["loss_in_fp32"] = extra["loss_dtype"] == "fp32"
    if "chunked_ce" in extra and not extra["chunked_ce"]:
        sem["lm_head_vocab_chunk"] = sem["loss_token_chunk_gib"] = None
    for key, field in CASE_FLAGS.items():
        if extra.get(key) is not None:
            sem[field] = bool(extra[key])
    if _vocab_chunk(case):
        sem["lm_head_vocab_chunk"] = _vocab_chunk(case)
    if extra.get("master_weights_dtype") or extra.get("frozen_base_weights_dtype"):
        sem["fp32_trained_weights"] = _fp32_weights(case)
    if KERNEL_NAMES.get(str(extra.get("attention"))):
        sem["attention_kernel"] = KERNEL_NAMES[str(extra["attention"])]
    if str(extra.get("attention")) == "eager":
        sem["flash_attention"] = False
    if extra.get("pure_bf16") is not None:
        sem["pure_bf16"] = bool(extra["pure_bf16"])
    if extra.get("qlora_unquantized_dtype") in ("16bit", "fp32"):  # norms, embeddings, head
        sem["qlora_16bit_rest"] = extra["qlora_unquantized_dtype"] == "16bit"
        sem["qlora_fp32_norms"] = not sem["qlora_16bit_rest"]
    elif (norms := qlora_fp32_norms_of(case, profile)) is not None:
        sem["qlora_fp32_norms"] = norms
    if extra.get("lora_dropout") is not None:
        sem["lora_dropout"] = float(extra["lora_dropout"])
    if extra.get("bitsandbytes_version") is not None:
        sem["quant_keeps_inputs"] = bnb_keeps_inputs(extra["bitsandbytes_version"])
    double = _double_quant(extra.get("weight_quant"))
    if double is not None:
        sem["nf4_double_quant"] = double
    sem["compiled"] = bool(extra["compile"] if "compile" in extra else sem.get("compiled"))
    # extra.norm_type (the validation schema's e.g. fused_rmsnorm): norms as one kernel each
    if "fused" in str(extra.get("norm_type") or "").lower():
        sem["fused_norms"] = True
    if extra.get("holds_previous_outputs") is not None:
        sem["holds_previous_outputs"] = bool(extra["holds_previous_outputs"])
    # the engine's enforce_eager, max_num_seqs (as the case ran them, else the profile's), V0
    eager = extra.get("rollout_enforce_eager")
    sem["rollout_eager"] = bool(profile.value("rollout_enforce_eager") if eager is None
                                else eager)
    sem["rollout_max_seqs"] = extra.get("rollout_max_num_seqs") or profile.value(
        "rollout_max_num_seqs")
    sem["rollout_v0"] = vllm_v0_of(case)
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
    resolved = replace(resolved, spec=built_model(profile, resolved.spec))
    method = case.get("method") or "full"
    sharding = case_sharding(case)
    quant = "gptq" if "gptq" in str(extra.get("weight_quant", "")).lower() else "nf4"
    if resolved.weight_bits and method != "qlora":
        raise PlannerError("quantized checkpoint trained without a QLoRA-style adapter")
    zero = zero_stage_of("zero1" if sharding == "megatron" else sharding)
    fsdp = _fsdp(case, profile)
    lora = _lora_defaults(case, profile)
    # the memory and kernel semantics of what ran: a backend the run switched to (run_profile)
    semantics = _semantics(case, run_profile(case, profile, catalog),
                           sharded=bool(zero) or fsdp)
    cfg = TrainConfig(
        **semantics,
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
        ep=int(case.get("ep") or extra.get("ep") or 1),
        dp_shard=_dp_shard(case, catalog),
        offload=case.get("offload") or "none",
        checkpointing=case.get("grad_checkpointing")
        or profile.value("checkpointing_default", "none"),
        micro_batch_size=case.get("micro_batch_size") or 1,
        grad_accum=_grad_accum(case),
        seq_len=case.get("seq_len") or 2048,
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

def _generated_prompts(case: dict[str, Any], per_device: int, batches: int) -> int:
    """Prompts an iteration generates: ``batches`` x ``per_device`` per GPU, at most the GBS."""
    prompts = per_device * case["num_gpus"] * batches
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
    * extra.generation_batches (DeepSpeed-Chat's --generation_batches, else the profile's): an
      iteration generates that many per-device batches on every GPU, at most global_batch_size
      prompts; extra.critic_reward_model names the critic and reward model together.
    * A framework whose engine keeps its memory through training by default (the profile's
      engine_sleep false: DeepSpeed-Chat without --release_inference_cache) runs so.
    The settings of a published run (batch, inference TP, sharding, method) are the case's
    own fields (or the project's additions to it, validation/case_additions.yaml).
    """
    workload = str(case.get("workload"))
    if not case.get("model"):
        raise PlannerError("no public checkpoint: architecture unknown")
    resolved = catalog.model(case["model"])
    extra = case.get("extra") or {}
    profile = case_profile(case, catalog)
    resolved = replace(resolved, spec=built_model(profile, resolved.spec))
    assumed: list[str] = []
    if extra.get("roles"):
        # OpenRLHF without --colocate: each role on GPUs of its own (e.g. actor 4, critic 2,
        # reference 1, reward 1) is --placement split, but this run generates with HF
        # generate on the actor's GPUs: no engine GPUs, and a generation batch the case lacks
        raise PlannerError(f"per-role GPU groups ({extra['roles']}) with generation on the "
                           "actor's GPUs (HF generate, no vLLM engines): split placement "
                           "needs engine GPUs of its own")
    if (case.get("sharding") or "none") == "megatron" and not for_time:
        raise PlannerError("RL trainer with Megatron TP/PP: the RL trainer model is data "
                           "parallel only")
    common = _rl_common(case, profile, assumed=assumed)
    offload = case.get("offload") or "none"
    critic = reward = None
    if workload in ("rm", "dpo"):
        cfg = _pairwise_config(case, common, offload=offload, assumed=assumed)
    elif trainer_only_reading(case):
        # The reading is of trainer GPUs alone (disaggregated RL: the engines run elsewhere, no
        # reference model on them): the actor's training step over the case's packed
        # sequences, the same phases as a training job of that batch.
        # (an RL actor's update: its loss counted with the recompute, as workloads._base sets)
        cfg = TrainConfig(**{**common, "workload": "sft"}, loss_alive_with_recompute=True,
                          micro_batch_size=int(case.get("micro_batch_size") or 1), offload=offload,
            seq_len=int(case.get("seq_len") or 2048),
            grad_accum=int(extra.get("grad_accum") or 1))
        assumed.append("trainer-only GPUs: the actor's training step (no engine, no reference)")
    else:
        cfg, critic, reward = _rl_config(case, catalog, resolved.spec, profile, common=common,
                                         offload=offload, assumed=assumed)
    validate_config(cfg, resolved.spec)
    return RLCase(cfg, resolved, critic, reward, tuple(assumed),
                  engine_outside_counter=bool(profile.value("engine_outside_torch")))


def _pairwise_config(case: dict[str, Any], common: dict[str, Any], *, offload: str,
                     assumed: list[str]) -> TrainConfig:
    """The TrainConfig of an rm/dpo case (rl_case): its micro-batch in pairs (_pairs); what it
    assumes is appended to ``assumed``."""
    extra = case.get("extra") or {}
    cfg = TrainConfig(**common, micro_batch_size=_pairs(case), offload=offload,
                      seq_len=case.get("seq_len") or 2048,
                      grad_accum=int(extra.get("grad_accum") or 1))
    if case.get("workload") == "rm" and not extra.get("pairs_per_micro_batch") \
            and extra.get("per_device_batch_examples"):
        assumed.append("each example taken as one pair (ranked replies: more sequences)")
    return cfg


def _rl_common(case: dict[str, Any], profile: Profile, *, assumed: list[str]) -> dict[str, Any]:
    """The TrainConfig fields every rm/dpo/ppo/grpo case sets alike (rl_case): workload,
    optimizer, precision, sharding, checkpointing (the profile's default, appended to
    ``assumed``), the framework's semantics and the method."""
    extra = case.get("extra") or {}
    sharding = case_sharding(case)
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
        "workload": str(case.get("workload")), "optimizer": case.get("optimizer") or "adamw",
        "precision": case.get("precision") or "bf16",
        "num_gpus": case["num_gpus"], "zero_stage": zero, "fsdp": fsdp,
        "checkpointing": ckpt,
        "paged_optimizer": bool(extra.get("paged_optimizer", False)),
        "optimizer_in_backward": bool(extra.get("optimizer_in_bwd", False)),
        "ema_copy": bool(extra.get("ema_copy", False)) and case.get("workload") in ("ppo", "grpo"),
        # no KL term: no reference (verl); a PPO run scored by a function: no reward model
        "reference": bool(extra.get("reference", True)),
        "reward_function": bool(extra.get("reward_function")) and case.get("workload") == "ppo",
    }
    _set_method(case, profile, common)
    return common


def _set_method(case: dict[str, Any], profile: Profile, common: dict[str, Any]) -> None:
    """The case's method (and LoRA rank and targets) into ``common`` (rl_case)."""
    method = case.get("method") or "full"
    common["method"] = method
    if method in ("lora", "dora", "qlora"):
        lora = _lora_defaults(case, profile)
        common["lora_rank"] = lora["lora_rank"]
        common["lora_targets"] = lora["lora_targets"]


def _rl_config(case: dict[str, Any], catalog: Catalog, spec: ModelSpec, profile: Profile, *,
               common: dict[str, Any], offload: str, assumed: list[str]
               ) -> tuple[TrainConfig, Any, Any]:
    """The TrainConfig and (critic, reward) models of a PPO/GRPO case (rl_case); what it
    assumes is appended to ``assumed``."""
    extra = case.get("extra") or {}
    workload = str(case.get("workload"))
    critic = reward = None
    rl_opts = _rollout_opts(case.get("rl") or {}, spec, assumed=assumed)
    seq = rl_opts["prompt_len"] + rl_opts["response_len"]
    sp = int(extra.get("ulysses_sp") or case.get("cp") or 1)
    if profile.value("idle_offload"):
        # the framework's offload moves states to the host between phases
        rl_opts["offload_idle"] = offload == "optimizer+params"
        offload = "none"
    mb = case.get("micro_batch_size")
    if mb is None and extra.get("ppo_max_token_len_per_gpu"):
        mb = max(1, int(extra["ppo_max_token_len_per_gpu"]) // seq)
        assumed.append(f"dynamic batching: {mb} sequences per micro-step")
    mb = mb or extra.get("script_micro_batch")
    if mb is None:
        mb = 1
        assumed.append("micro-batch 1 (not stated)")
    batches = extra.get("generation_batches") or profile.value("generation_batches")
    if batches:
        rl_opts["rollout_batch"] = _generated_prompts(case, int(mb), int(batches))
    if profile.value("engine_sleep") is False:
        # the run kept the engine's memory through training (the framework's default)
        rl_opts["engine_sleep"] = False
    if extra.get("critic_reward_model"):
        critic = reward = _role_model(extra["critic_reward_model"], catalog)
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
    # passes that keep padding (verl use_remove_padding off) see extra.role_seq_lens {role: n}
    padded = tuple(sorted((str(k), int(v)) for k, v in (extra.get("role_seq_lens") or {}).items()))
    cfg = TrainConfig(**common, **rl_opts, micro_batch_size=int(mb), offload=offload,
                      seq_len=seq, role_seq_lens=padded)
    return cfg, critic, reward


def _rollout_opts(rl: dict[str, Any], spec: ModelSpec, *, assumed: list[str]) -> dict[str, Any]:
    """A PPO/GRPO case's rollout fields (lengths, samples, engine TP and memory share) for
    _rl_config; an engine TP that does not divide the kv heads is lowered (appended to
    ``assumed``)."""
    if not (rl.get("prompt_len") and rl.get("response_len")):
        raise PlannerError("rollout lengths unknown")
    prompt, response = int(rl["prompt_len"]), int(rl["response_len"])
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
    return rl_opts
