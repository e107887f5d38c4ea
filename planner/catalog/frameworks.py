"""Framework profiles: what a training framework runs and the memory and speed semantics it
imposes, read from catalog/frameworks/<id>.yaml (specs.FrameworkSpec) with inheritance.

A profile states facts with their sources; ``resolve`` follows ``base`` links so a derived
profile (e.g. LLaMA-Factory on the Hugging Face Trainer) holds every fact of its base unless it
overrides it, and says which profile each fact came from. ``config_fields`` turns the memory
semantics into the TrainConfig fields the models read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.catalog.load import Catalog
from planner.catalog.releases import before_release, named_before
from planner.catalog.request import DEFAULT_ROLLOUT_ENGINE, TRAINER_ENGINES, TrainConfig
from planner.catalog.specs import Fact, FrameworkFacts, FrameworkSpec, GpuSpec, ModelSpec
from planner.errors import PlannerError

# The framework a command assumes when none is named, per workload.
DEFAULT_FRAMEWORK: dict[str, str] = {
    "pretrain": "hf-trainer", "sft": "hf-trainer", "rm": "hf-trainer", "dpo": "hf-trainer",
    "ppo": "verl", "grpo": "verl",
}

# Launch formats whose writer (planner.outputs.export: _need_data_parallel) expresses data
# parallelism only: a plan on a profile launched so stays data parallel, whatever else the
# framework runs, so that every plan exports (issue 17 s.4; tests/test_launchable.py).
DATA_PARALLEL_LAUNCHES = ("accelerate", "litgpt", "llamafactory", "llmfoundry", "openrlhf")
# Launch formats whose writer colocates an RL job's roles and engines (verl's hybrid engine).
COLOCATED_LAUNCHES = ("verl",)
# RL launch formats whose writer parks idle roles' states on the host (verl param/optimizer
# offload, OpenRLHF --deepspeed_enable_sleep, NeMo-RL's refit offload, ms-swift --offload_model).
IDLE_OFFLOAD_LAUNCHES = ("verl", "openrlhf", "nemo-rl", "ms-swift")
# Launch formats whose tensor parallelism is DeepSpeed AutoTP, which trains with ZeRO 0 to 2
# (the writers refuse tp with ZeRO-3: axolotl@2f5cb9d schemas/config.py tensor_parallel_size
# "Only supported with DeepSpeed AutoTP"; ms-swift v4.5.2 sft_args.py).
AUTOTP_LAUNCHES = ("axolotl", "ms-swift")
# Launch formats whose writer offloads to the CPU only without tensor parallel (axolotl: its
# shipped DeepSpeed offload configs, planner.outputs.export.axolotl, refuse tp > 1 with them).
NO_TP_OFFLOAD_LAUNCHES = ("axolotl",)
# Launch formats whose writer writes the expert parallel degree (the framework's own field,
# verified in its code: planner.outputs.export); a plan on any other keeps ep 1. Not NeMo-RL's:
# its DTensorConfig.expert_parallel_size (NVIDIA-NeMo/RL@7ea279a nemo_rl/models/policy/
# __init__.py) derives dp as world / (tp x cp x ep), not the planner's ep inside dp x cp.
EP_LAUNCHES = ("torchrun", "torchtitan", "nemo", "megatron-bridge", "nemo-automodel",
               "prime-rl")
# Launch formats whose writer writes hybrid sharding (HSDP) with the shard group = one host's
# GPUs: FSDP's HYBRID_SHARD as Accelerate's fsdp_sharding_strategy and the HF Trainer's
# --fsdp hybrid_shard (torchrun) pass no process group, and torch then shards over the
# node's devices (_init_process_group_state_for_hybrid_shard: device_count() ranks per
# intra-node group, pytorch/pytorch@00743e70 torch/distributed/fsdp/_init_utils.py);
# torchtitan's data_parallel_shard_degree x data_parallel_replicate_degree mesh (v0.2.2
# job_config.py Parallelism) keeps the shard dimension innermost, so a host's ranks.
# DeepSpeed's MiCS (zero_optimization.mics_shard_size) needs parameters made under deepspeed.zero.
# MiCS_Init, which the HF Trainer and Accelerate do not call ("Sharded parameters don't have the
# MiCS_CommGroups attached", huggingface/accelerate#3442): no ZeRO launch writes a hybrid group.
HYBRID_SHARD_LAUNCHES = ("accelerate", "torchrun", "torchtitan")
# RL launch formats whose writer shards the trainer hybrid: verl's fsdp_config.fsdp_size makes a
# (ddp, fsdp) mesh, FSDP HYBRID_SHARD over it, the fsdp dimension one host's consecutive ranks
# (volcengine/verl@b178a3c verl/workers/fsdp_workers.py create_device_mesh, get_sharding_strategy).
RL_HYBRID_SHARD_LAUNCHES = ("verl",)
# RL launch formats whose writer scores PPO with a function, no reward model (verl: reward_model.
# enable False; OpenRLHF: --remote_rm_url); DeepSpeed-Chat, LLaMA-Factory, ms-swift load one.
REWARD_FUNCTION_LAUNCHES = ("verl", "openrlhf")


def hybrid_shard_writers(rl: bool) -> tuple[str, ...]:
    """The launch formats whose writer expresses hybrid sharding (of an RL trainer: ``rl``)."""
    return RL_HYBRID_SHARD_LAUNCHES if rl else HYBRID_SHARD_LAUNCHES


@dataclass(frozen=True)
class Profile:
    """A framework profile with its inheritance resolved: every fact and the id of the profile
    that stated it; ``asked_version`` is the version the name carried (``verl==0.4.1``)."""

    spec: FrameworkSpec
    facts: dict[str, Fact[Any]]
    origin: dict[str, str]
    asked_version: str | None = None

    @property
    def id(self) -> str:
        """The profile's catalog id."""
        return self.spec.id

    def value(self, name: str, default: Any = None) -> Any:
        """The value of fact ``name`` as of the release the name carried (before_release), or
        ``default`` when the profile has none."""
        fact = self.facts.get(name)
        if fact is None:
            return default
        return before_release(fact) if self.older_than(fact) else fact.value

    def older_than(self, fact: Fact[Any]) -> bool:
        """The name carried a release of this framework older than the first ``fact`` holds
        from (Fact.since, where its first package is this framework: id or alias)."""
        if not (fact.since and self.asked_version):
            return False
        return named_before(self.asked_version, fact.since, {self.spec.id, *self.spec.aliases})

    def source(self, name: str) -> str | None:
        """Where fact ``name`` was read, or None when the profile has none."""
        fact = self.facts.get(name)
        return None if fact is None else fact.source

    def inherited(self, name: str) -> str | None:
        """The id of the base profile a fact comes from, None when the profile states it (or
        no profile does)."""
        origin = self.origin.get(name)
        return origin if origin not in (None, self.spec.id) else None


def release_facts(profile: Profile) -> list[str]:
    """The facts the release a name carried holds at their earlier value, as text: "fact
    value (before <since>)"."""
    return [f"{name} {profile.value(name)} (before {fact.since})"
            for name, fact in profile.facts.items() if fact.since and profile.older_than(fact)]


def unlaunchable(profile: Profile, cfg: TrainConfig) -> list[str]:
    """What of ``cfg`` the framework runs but the planner's writer of its launch format does not
    express (the *_LAUNCHES above): a plan holds none of it; check still predicts it."""
    fmt, out = profile.value("launch_format"), []
    if fmt in DATA_PARALLEL_LAUNCHES and max(cfg.tp, cfg.pp, cfg.cp, cfg.ep) > 1:
        shown = f" / ep {cfg.ep}" if cfg.ep > 1 else ""
        out.append(f"tp {cfg.tp} / pp {cfg.pp} / cp {cfg.cp}{shown} (its {fmt} launch is data "
                   "parallel)")
    if cfg.ep > 1 and fmt not in DATA_PARALLEL_LAUNCHES and fmt not in EP_LAUNCHES:
        out.append(f"ep {cfg.ep} (its {fmt} launch does not write expert parallelism)")
    if fmt in AUTOTP_LAUNCHES and cfg.tp > 1 and cfg.zero_stage == 3:
        out.append(f"tp {cfg.tp} with ZeRO-3 (its {fmt} launch's tensor parallel is DeepSpeed "
                   "AutoTP, ZeRO 0 to 2)")
    if fmt in NO_TP_OFFLOAD_LAUNCHES and cfg.tp > 1 and cfg.offload != "none":
        out.append(f"offload {cfg.offload} with tp {cfg.tp} (its {fmt} launch offloads "
                   "without tensor parallel only)")
    if fmt in COLOCATED_LAUNCHES and cfg.is_rl and cfg.placement != "colocate":
        out.append(f"RL placement {cfg.placement} (its {fmt} launch colocates)")
    if cfg.is_rl and cfg.offload_idle and fmt not in IDLE_OFFLOAD_LAUNCHES:
        out.append(f"offload of idle roles (its {fmt} launch keeps every role on the GPUs)")
    if cfg.reward_function and cfg.workload == "ppo" and fmt not in REWARD_FUNCTION_LAUNCHES:
        out.append(f"PPO scored by a reward function (its {fmt} launch scores with a reward "
                   "model)")
    writers = hybrid_shard_writers(cfg.is_rl)
    if cfg.dp_shard is not None and (fmt not in writers or not cfg.fsdp):
        out.append(f"hybrid sharding dp_shard {cfg.dp_shard} (its {fmt} launch writes "
                   "FSDP's hybrid sharding only)" if fmt in writers else
                   f"hybrid sharding dp_shard {cfg.dp_shard} (its {fmt} launch does not "
                   f"write it{' for RL' if cfg.is_rl else ''})")
    return out


def launch_parallelism(profile: Profile) -> tuple[str, ...]:
    """The parallel axes a plan on ``profile`` may use: its parallelism fact (tp and pp when it
    states none), none where its launch format's writer expresses data parallelism only, and
    ep only where it writes the expert parallel degree (EP_LAUNCHES)."""
    fmt = profile.value("launch_format")
    if fmt in DATA_PARALLEL_LAUNCHES:
        return ()
    axes = tuple(profile.value("parallelism", ("tp", "pp")))
    return axes if fmt in EP_LAUNCHES else tuple(a for a in axes if a != "ep")


def resolve(catalog: Catalog, name: str) -> Profile:
    """The profile named ``name`` (id, alias or a slug by catalog.slugs' rules) with its base
    chain merged, nearest first."""
    found = catalog.framework_match(name)
    spec = found.spec
    facts: dict[str, Fact[Any]] = {}
    origin: dict[str, str] = {}
    current: FrameworkSpec | None = spec
    while current is not None:
        for key in FrameworkFacts.model_fields:
            fact = getattr(current.facts, key)
            if fact is not None and key not in facts:
                facts[key] = fact
                origin[key] = current.id
        current = catalog.frameworks.get(current.base) if current.base else None
    return Profile(spec, facts, origin, found.version)


def config_fields(profile: Profile, *, workload: str, sharded: bool) -> dict[str, Any]:
    """TrainConfig fields set by a profile's memory semantics (facts it does not state leave
    the planner's defaults). ``sharded``: the job shards its model states (ZeRO/FSDP), which
    decides a loss computed in fp32 only under autocast."""
    out: dict[str, Any] = {}
    attention = profile.value("attention")
    if attention is not None:
        out["flash_attention"] = attention != "eager"
        out["expand_kv_heads"] = attention == "sdpa-expanded-kv"
    if profile.value("attention_kernel") is not None:
        out["attention_kernel"] = profile.value("attention_kernel")
    loss = profile.value("loss")
    if workload in ("sft", "pretrain") and profile.value("sft_loss") is not None:
        loss = profile.value("sft_loss")
    if loss is not None:
        out["chunked_loss"] = loss in ("chunked", "fp32-held-chunked")
        out["loss_holds_logits"] = loss in ("fp32-held", "fp32-held-chunked")
        out["loss_in_fp32"] = loss in ("fp32", "fp32-held", "chunked", "vocab-fused",
                                       "token-fused", "fp32-held-chunked") or (
            loss == "fp32-under-autocast" and not sharded)
        out["loss_seq_chunk"] = (profile.value("loss_seq_chunk")
                                 if loss == "fp32-held-chunked" else None)
        out["lm_head_vocab_chunk"] = (profile.value("loss_vocab_chunk")
                                      if loss == "vocab-fused" else None)
        out["loss_token_chunk_gib"] = (profile.value("loss_token_chunk_gib")
                                       if loss == "token-fused" else None)
        out["loss_linear_fused"] = loss == "linear-fused"
    if workload in ("dpo", "ppo", "grpo") and profile.value("logprobs") is not None:
        # the log-prob passes set the loss buffers of preference and RL training
        out["loss_in_fp32"] = profile.value("logprobs") == "fp32"
    if profile.value("master_weights") is not None:
        out["pure_bf16"] = profile.value("master_weights") == "none"
    if profile.value("pure_16bit_methods") is not None:
        out["pure_16bit_methods"] = tuple(profile.value("pure_16bit_methods"))
    if profile.value("frozen_base_dtype") is not None:
        out["fp32_trained_weights"] = profile.value("frozen_base_dtype") == "fp32"
    if profile.value("selective_checkpointing") is not None:
        out["selective_checkpointing"] = profile.value("selective_checkpointing")
    if profile.value("lora_dropout") is not None:
        out["lora_dropout"] = float(profile.value("lora_dropout"))
    if profile.value("lora_targets") is not None:  # read by the adapter methods only
        out["lora_targets"] = tuple(profile.value("lora_targets"))
    if profile.value("quantizes_head") is not None:
        out["quantized_head"] = bool(profile.value("quantizes_head"))
    if profile.value("qlora_unquantized_dtype") is not None:
        out["qlora_16bit_rest"] = profile.value("qlora_unquantized_dtype") == "16bit"
    if profile.value("qlora_norm_dtype") is not None:
        out["qlora_fp32_norms"] = profile.value("qlora_norm_dtype") == "fp32"
    if profile.value("grad_reduce_dtype") is not None:
        out["fp32_grad_reduce"] = profile.value("grad_reduce_dtype") == "fp32"
    out |= {"compiled": True} if workload in (profile.value("compiled_workloads") or ()) else {}
    for key in ("fused_optimizer", "shard_embeddings", "fsdp_no_sync", "offload_checkpoints",
                "fused_lora_kernels", "lora_dropout_shared_qkv", "holds_previous_outputs",
                "nf4_double_quant", "fused_elementwise", "moe_fp32_scores",
                "python_launched_fusion", "separate_lora_reference"):
        if profile.value(key) is not None:
            out[key] = bool(profile.value(key))
    return out


def built_model(profile: Profile, model: ModelSpec) -> ModelSpec:
    """``model`` as ``profile``'s framework builds it from the checkpoint: where the checkpoint
    ties the LM head to the input embedding and the framework keeps them apart (fact
    unties_embeddings), a model with a head of its own (a second vocab x hidden weight, with
    its gradient and optimizer states in full training)."""
    if model.tied_embeddings and profile.value("unties_embeddings"):
        return model.model_copy(update={"tied_embeddings": False})
    return model


def default_engine(profile: Profile, cfg: TrainConfig | None = None) -> str:
    """The rollout engine of an RL job on ``profile`` when none is named: the profile's
    rollout_engine_default, else the first engine it offers, else the planner's
    (request.DEFAULT_ROLLOUT_ENGINE). A job that sets an engine's knobs (placement apart,
    rollout TP, a memory fraction, idle offload) gets the first engine of its own the profile
    offers instead of the trainer's generate (TRL with vLLM when vllm_mode is asked for)."""
    offered = profile.value("rollout_engines") or (DEFAULT_ROLLOUT_ENGINE,)
    stated = profile.value("rollout_engine_default") or offered[0]
    knobs = cfg is not None and (cfg.placement != "colocate" or cfg.rollout_tp != 1
                                 or cfg.gpu_memory_utilization is not None or cfg.offload_idle)
    if knobs and stated in TRAINER_ENGINES:
        return next((e for e in offered if e not in TRAINER_ENGINES), stated)
    return stated


def efficiency_of(profile: Profile) -> tuple[str | None, str]:
    """(efficiency key, a line saying where it comes from): the profile's own measured
    efficiency, one inherited from its base, or none."""
    key = profile.value("efficiency")
    if key is None:
        return None, f"{profile.id}: no measured efficiency in its profile or its bases"
    base = profile.inherited("efficiency")
    if base:
        return key, f"efficiency inherited from {base}: no measured case of {profile.id}"
    return key, f"efficiency of {profile.id} ({profile.source('efficiency')})"


def sharding_kind(cfg: TrainConfig) -> str:
    """The profile's sharding kind a layout needs: fsdp (FSDP1 or FSDP2), zero1-3, ddp for
    several data-parallel ranks without sharding, none for one."""
    if cfg.fsdp:
        return "fsdp"
    if cfg.zero_stage:
        return f"zero{cfg.zero_stage}"
    return "ddp" if cfg.num_gpus > 1 else "none"


def unsupported(profile: Profile, cfg: TrainConfig, *, at_gpu_count: bool = True
                ) -> list[str]:
    """What of ``cfg`` the framework cannot run, by its profile (empty: it runs it). A fact the
    profile (and its bases) do not state restricts nothing. ``at_gpu_count`` False leaves out
    the limits of cfg.num_gpus (gpu_count_lacks), for a caller that applies them per count."""
    out = []

    def lacks(fact: str, wanted: str, label: str) -> None:
        offered = profile.value(fact)
        if offered is not None and wanted not in offered:
            out.append(f"{label} {wanted} (it runs {', '.join(offered) or 'none'})")

    lacks("workloads", cfg.workload, "workload")
    lacks("methods", cfg.method, "method")
    kind = sharding_kind(cfg)
    sharding = profile.value("sharding")
    if sharding is not None:
        names = {"fsdp1": "fsdp", "fsdp2": "fsdp", "megatron": "zero1"}
        offered = {names.get(s, s) for s in sharding} | (
            {"none"} if "ddp" in sharding else set()) | ({"ddp"} if "megatron" in sharding
                                                        else set())
        if kind not in offered:
            out.append(f"sharding {kind} (it runs {', '.join(sharding)})")
    for axis in ("tp", "pp", "cp", "ep"):
        if getattr(cfg, axis) > 1:
            lacks("parallelism", axis, "parallelism")
    if cfg.offload != "none":
        lacks("offload", cfg.offload, "offload")
    if cfg.ema_copy and profile.value("launch_format") != "deepspeed-chat":
        out.append("an EMA copy of the actor (DeepSpeed-Chat's --enable_ema keeps one)")
    if cfg.is_rl:
        lacks("rl_placements", cfg.placement, "RL placement")
        # an engine the job did not name is the profile's own default
        if "rollout_engine" in cfg.model_fields_set:
            lacks("rollout_engines", cfg.rollout_engine, "rollout engine")
    if cfg.checkpointing != "none":
        lacks("checkpointing", cfg.checkpointing, "checkpointing")
    return out + (gpu_count_lacks(profile, cfg) if at_gpu_count else [])


def gpu_count_lacks(profile: Profile, cfg: TrainConfig) -> list[str]:
    """What of ``cfg`` the framework cannot run at its GPU count (single_gpu_lacks,
    single_gpu_methods); empty when it runs it."""
    out = []
    if cfg.num_gpus == 1:
        used = {"checkpointing": cfg.checkpointing != "none", "offload": cfg.offload != "none"}
        out += [f"{what} on one GPU" for what in profile.value("single_gpu_lacks") or ()
                if used[what]]
    elif cfg.method in (profile.value("single_gpu_methods") or ()):
        out.append(f"method {cfg.method} on {cfg.num_gpus} GPUs (one GPU only)")
    return out


def lacks_precision(profile: Profile, cfg: TrainConfig, gpu: GpuSpec) -> str | None:
    """Why the framework cannot train ``cfg`` on ``gpu`` in the precision it would run in
    there (TrainConfig.effective_precision; its precisions fact), None when it can; the
    caller names the GPU."""
    offered = profile.value("precisions")
    used = cfg.effective_precision(gpu)
    if offered is None or used in offered:
        return None
    return (f"--framework {profile.id} trains in {', '.join(offered)}, not {used}"
            + (" (no bf16 on this GPU)" if cfg.precision == "bf16" else ""))


def lacks_model(profile: Profile, model_id: str) -> str | None:
    """Why the framework cannot build ``model_id`` (its models fact), None when it can."""
    models = profile.value("models")
    if models is None or model_id in models:
        return None
    return (f"--framework {profile.id} has no model definition for {model_id} (it builds "
            f"{', '.join(models)}; {profile.source('models')})")


@dataclass(frozen=True)
class FrameworkChoice:
    """The framework a job runs on, why, and the efficiency it brings."""

    profile: Profile
    reason: str
    stack: str
    efficiency_note: str

    def summary(self) -> dict[str, Any]:
        """The choice as a JSON-ready dict: profile id, name, version, reason and efficiency
        (and the version the user's name carried, where it carried one)."""
        doc = {"id": self.profile.id, "name": self.profile.spec.name,
               "version": self.profile.spec.version, "reason": self.reason,
               "efficiency": self.stack, "efficiency_note": self.efficiency_note}
        if self.profile.asked_version:
            doc["requested_version"] = self.profile.asked_version
            earlier = release_facts(self.profile)
            if earlier:
                doc["as_of_requested_version"] = earlier
        return doc


# The efficiency a framework without a measured one (itself or its bases) runs at.
FALLBACK_EFFICIENCY = "hf"


def choose(catalog: Catalog, cfg: TrainConfig, name: str | None = None) -> FrameworkChoice:
    """The framework of a job: the one named (PlannerError when it cannot run the layout,
    naming what), else the workload's default (DEFAULT_FRAMEWORK) when it runs the layout,
    else the first that does among the profiles with a measured efficiency of their own, then
    the others, by id (PlannerError when none does)."""
    if name is not None and name != "auto":
        profile = resolve(catalog, name)
        missing = unsupported(profile, unstated_checkpointing(profile, cfg))
        if missing:
            raise PlannerError(f"--framework {profile.id} does not run this job: "
                               + "; ".join(missing))
        reason = "named"
    else:
        default = resolve(catalog, DEFAULT_FRAMEWORK[cfg.workload])
        if not unsupported(default, unstated_checkpointing(default, cfg)):
            profile, reason = default, f"the default for {cfg.workload}"
        else:
            # profiles with a measured efficiency of their own first, then by id
            able = sorted((resolve(catalog, fid) for fid in catalog.frameworks),
                          key=lambda p: (p.value("efficiency") is None
                                         or p.inherited("efficiency") is not None, p.id))
            able = [p for p in able if not unsupported(p, unstated_checkpointing(p, cfg))]
            if not able:
                raise PlannerError("no framework profile runs this job: "
                                   + "; ".join(unsupported(default, cfg)))
            profile = able[0]
            reason = (f"{default.id} (the default for {cfg.workload}) does not run "
                      + "; ".join(unsupported(default, cfg)) + f"; {profile.id} does")
    stack, note = efficiency_of(profile)
    if stack is None:
        stack, note = FALLBACK_EFFICIENCY, note + f"; the {FALLBACK_EFFICIENCY} efficiency used"
    return FrameworkChoice(profile, reason, stack, note)


def unstated_checkpointing(profile: Profile, cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with the framework's default checkpointing (checkpointing_default, else none)
    where the job did not state one (TrainConfig.model_fields_set) and the framework cannot
    run the planner's default (full) at the job's GPU count (single_gpu_lacks: LitGPT
    checkpoints only through its multi-GPU strategy)."""
    if "checkpointing" in cfg.model_fields_set or not any(
            m.startswith("checkpointing") for m in gpu_count_lacks(profile, cfg)):
        return cfg
    return cfg.model_copy(update={"checkpointing": profile.value("checkpointing_default",
                                                                  "none")})


def apply(cfg: TrainConfig, profile: Profile) -> TrainConfig:
    """``cfg`` with the profile's memory semantics and LoRA rank in every field the job did not
    set itself (TrainConfig.model_fields_set), its checkpointing where the job states none and
    the framework cannot run the default (unstated_checkpointing)."""
    cfg = unstated_checkpointing(profile, cfg)
    fields = config_fields(profile, workload=cfg.workload, sharded=cfg.zero_stage > 0 or cfg.fsdp)
    rank = profile.value("lora_rank") if cfg.is_peft else None  # only an adapter has a rank
    fields |= {"lora_rank": int(rank)} if rank is not None else {}
    if cfg.is_rl:
        fields["rollout_engine"] = default_engine(profile, cfg)
        fields["rollout_eager"] = bool(profile.value("rollout_enforce_eager"))
        fields["rollout_max_seqs"] = profile.value("rollout_max_num_seqs")
    update = {k: v for k, v in fields.items() if k not in cfg.model_fields_set}
    return cfg.model_copy(update=update) if update else cfg


def for_request(catalog: Catalog, request: Any) -> FrameworkChoice:
    """The framework of a plan request (PlanRequest): the one named, else the workload's
    default; its efficiency unless the request sets a stack itself (deprecated)."""
    named = request.framework
    if named == "auto":
        raise PlannerError("--framework auto chooses among frameworks in 'planner plan' only; "
                           "name a framework id here ('planner catalog frameworks')")
    profile = resolve(catalog, named or DEFAULT_FRAMEWORK[request.workload])
    if request.workload not in profile.value("workloads", (request.workload,)):
        raise PlannerError(f"--framework {profile.id} does not run --workload "
                           f"{request.workload} (it runs {', '.join(profile.value('workloads'))})")
    reason = "named" if named else f"the default for {request.workload}"
    stack, note = efficiency_of(profile)
    if stack is None:
        stack, note = FALLBACK_EFFICIENCY, note + f"; the {FALLBACK_EFFICIENCY} efficiency used"
    if "stack" in request.model_fields_set and request.stack != stack:
        note = (f"--stack {request.stack} (deprecated) overrides the framework's efficiency "
                f"({stack}: {note})")
        stack = request.stack
    return FrameworkChoice(profile, reason, stack, note)


def plan_shardings(profile: Profile) -> tuple[str, ...]:
    """The sharding choices a plan searches on a framework: DeepSpeed ZeRO 0-3 where it runs
    them (ZeRO-3 covers FSDP's full sharding), else none and FSDP as far as it runs them; a
    profile that states no sharding, ZeRO 0-3."""
    kinds = profile.value("sharding")
    if kinds is None:
        return ("none", "zero1", "zero2", "zero3")
    mapped = {"ddp": "none", "fsdp1": "fsdp", "fsdp2": "fsdp"}
    offered = {mapped.get(k, k) for k in kinds}
    zero = tuple(k for k in ("none", "zero1", "zero2", "zero3") if k in offered)
    if any(k.startswith("zero") for k in zero):
        return zero
    return tuple(k for k in ("none", "fsdp") if k in offered)


def auto_candidates(catalog: Catalog, workload: str) -> tuple[str, ...]:
    """Frameworks ``plan --framework auto`` compares: those that run the workload with a
    measured efficiency of their own (the others would be timed at an inherited or default
    rate, no evidence for choosing them), the workload's default first."""
    ids = [DEFAULT_FRAMEWORK[workload]]
    for fid in sorted(catalog.frameworks):
        p = resolve(catalog, fid)
        own = p.value("efficiency") is not None and p.inherited("efficiency") is None
        if own and workload in p.value("workloads", ()) and fid not in ids:
            ids.append(fid)
    return tuple(ids)
