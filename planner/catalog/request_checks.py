"""The checks of a TrainConfig against its model (``validate_config``): layout, workload and
RL placement, each a PlannerError with a one-line message naming the bad value and what is
allowed."""

from __future__ import annotations

from typing import Any

from planner.catalog.request import (
    DEFAULT_ROLLOUT_BATCH,
    DEFAULT_ROLLOUT_ENGINE,
    PEFT_METHODS,
    TRAINER_ENGINES,
    TrainConfig,
    rollout_gpu_count,
)
from planner.catalog.role_gpus import SPLIT_ROLES, format_role_gpus
from planner.catalog.specs import ModelSpec, tensor_parallel_options
from planner.errors import PlannerError, did_you_mean


def validate_config(cfg: TrainConfig, model: ModelSpec) -> None:
    """Structural checks that need the model; raises PlannerError on the first violation."""
    error = layout_error(cfg) or accumulation_error(cfg)
    if error:
        raise PlannerError(error)
    error = model_parallel_error(tp=cfg.tp, pp=cfg.pp, cp=cfg.cp, num_gpus=cfg.num_gpus) or \
        tp_error(cfg.tp, model)
    if error:
        raise PlannerError(error)
    if cfg.pp > model.num_layers:
        raise PlannerError(
            f"--pp {cfg.pp} exceeds the {model.num_layers} layers of {model.id}; at most "
            f"{model.num_layers} (stages of unequal size are allowed: the largest sets the peak)"
        )
    if cfg.seq_len % cfg.cp:
        raise PlannerError(f"--seq-len {cfg.seq_len} must be a multiple of cp {cfg.cp}")
    error = ep_error(cfg, model) or dp_shard_error(cfg) or check_only_setting_error(cfg)
    if error:
        raise PlannerError(error)
    validate_workload(cfg, model)


def check_only_setting_error(cfg: TrainConfig) -> str | None:
    """The layout inputs of check and tune that plans never choose, each where it means
    something: a share of the layers (checkpoint_fraction) is checkpointed only under full
    checkpointing; activations are offloaded with full checkpointing or none; embedding copies
    train beside adapters."""
    if cfg.checkpoint_fraction < 1 and cfg.checkpointing != "full":
        return (f"--checkpoint-fraction {cfg.checkpoint_fraction:g} needs --checkpointing full "
                f"(got {cfg.checkpointing}): it is the share of the layers checkpointed")
    if cfg.offload_activations and cfg.checkpointing not in ("full", "none"):
        return (f"--offload-activations needs --checkpointing full or none (got "
                f"{cfg.checkpointing}): it moves the layers' saved tensors to host RAM")
    if cfg.peft_trains_embeddings and not cfg.is_peft:
        return (f"--train-embeddings trains copies of the embedding and head beside adapters: "
                f"give --method lora, qlora or dora (--method {cfg.method} trains them already)")
    return None


def dp_shard_error(cfg: TrainConfig) -> str | None:
    """Hybrid sharding splits the data-parallel ranks into shard groups of dp_shard (FSDP
    HYBRID_SHARD: a 2-D device mesh of replicas x shards, torch.distributed.fsdp
    ShardingStrategy.HYBRID_SHARD; torchtitan dp_replicate x dp_shard = dp): the weights must
    be sharded (FSDP or ZeRO-3: layout_error, as the plan space's candidates are filtered) and
    dp_shard divide dp."""
    if cfg.dp_shard is None:
        return None
    if cfg.is_rl and cfg.placement != "colocate":  # rltime: the colocated trainer's roles
        return (f"--dp-shard {cfg.dp_shard} with --placement {cfg.placement}: hybrid sharding "
                "of an RL trainer is modelled colocated (verl's fsdp_size); leave --dp-shard out "
                "or use --placement colocate")
    if cfg.dp % cfg.dp_shard:
        return (f"--dp-shard {cfg.dp_shard} must divide the data-parallel degree {cfg.dp} "
                "(replicas x shard groups)")
    return None


def accumulation_error(c: Any) -> str | None:
    """The optimizer stepped in the backward pass consumes each gradient as it is produced:
    no accumulation (a TrainConfig, or any object with its optimizer_in_backward and
    grad_accum)."""
    if c.optimizer_in_backward and c.grad_accum > 1:
        return (f"--optimizer-in-backward needs --grad-accum 1 (got {c.grad_accum}): gradients "
                "are consumed as they are produced")
    return None


def model_parallel_error(*, tp: int, pp: int, cp: int = 1, num_gpus: int) -> str | None:
    """The model-parallel GPUs of one replica (tp x pp x cp) divide the GPU count."""
    mp = tp * pp * cp
    if num_gpus % mp == 0:
        return None
    shown = f" x cp {cp}" if cp != 1 else ""
    return (f"--tp {tp} x --pp {pp}{shown} = {mp} does not divide --num-gpus {num_gpus}; use a "
            f"GPU count that is a multiple of {mp}")


def ep_error(cfg: TrainConfig, model: ModelSpec) -> str | None:
    """Expert parallelism splits the routed experts of an MoE model over ep GPUs carved out of
    the data x context parallel ones. Megatron-Core (NVIDIA/Megatron-LM @ 00caa53af309,
    megatron/core/parallel_state.py, initialize_model_parallel) builds the expert grid as
    expert_data_parallel_size = world_size // (expert tp x ep x pp), expert tp = tp by
    default: with world = tp x cp x dp x pp, ep divides dp x cp and the expert data parallel
    group is dp x cp / ep. torchtitan (pytorch/torchtitan @ 0119de156de5,
    torchtitan/distributed/parallel_dims.py, ParallelDims._validate) asserts
    ``(dp_shard * cp) % ep == 0`` with etp = tp and shards the experts over
    dp_shard_in_ep = dp_shard x cp / ep. Megatron's validate_args also asserts "Number of
    experts should be a multiple of expert model parallel_size" (megatron/training/arguments.py).
    """
    if cfg.ep == 1:
        return None
    if model.moe is None:
        return f"--ep {cfg.ep} needs a Mixture-of-Experts model; {model.id} is dense (use --ep 1)"
    group = cfg.dp * cfg.cp
    if group % cfg.ep:
        return (f"--ep {cfg.ep} must divide the data x context parallel GPUs (dp {cfg.dp} x cp "
                f"{cfg.cp} = {group}), out of which the expert groups are carved")
    if model.moe.num_experts % cfg.ep:
        return (f"--ep {cfg.ep} must divide the {model.moe.num_experts} routed experts of "
                f"{model.id}")
    return None


def tp_error(tp: int, model: ModelSpec) -> str | None:
    """A tensor-parallel degree splits every attention and kv head of the model evenly."""
    if model.splits_heads(tp):
        return None
    allowed = list(tensor_parallel_options(model, model.num_kv_heads))
    return (f"--tp {tp} must divide the attention heads ({model.num_attention_heads}) and kv "
            f"heads ({model.num_kv_heads}) of {model.id}; allowed: {allowed}")


def layout_error(c: Any) -> str | None:
    """The rules between method, rank, sharding and offload of one configuration (a TrainConfig
    or a domains.Choice: the same field names), as the message of the first that fails."""
    if c.lora_rank is not None and c.method not in PEFT_METHODS:
        return f"--lora-rank {c.lora_rank} needs --method lora, dora or qlora (got {c.method})"
    if c.fsdp and c.zero_stage:
        return f"--fsdp and --zero {c.zero_stage} exclude each other; pick one"
    if c.offload == "optimizer+params" and not (c.fsdp or c.zero_stage == 3):
        return "--offload optimizer+params needs the weights sharded: ZeRO-3 or FSDP"
    if c.offload != "none" and not (c.zero_stage or c.fsdp):
        return f"--offload {c.offload} needs ZeRO (stage 1, 2 or 3) or FSDP sharding"
    if c.dp_shard is not None and not (c.fsdp or c.zero_stage == 3):
        return (f"--dp-shard {c.dp_shard} needs the weights sharded (FSDP or ZeRO-3): hybrid "
                "sharding shards them within each group")
    if c.dp_shard is not None and c.ep > 1:
        return f"--dp-shard {c.dp_shard} with --ep {c.ep}: not modelled (use one of them)"
    return None


def idle_error(c: Any) -> str | None:
    """Split placement parks nothing: every role has GPUs of its own (a TrainConfig or a
    domains.Choice)."""
    if c.placement == "split" and c.offload_idle:
        return ("--offload-idle moves idle roles off shared GPUs; with --placement split every "
                "role has GPUs of its own")
    return None


def choice_error(c: Any) -> str | None:
    """The combination rules of the searched fields (layout_error, idle_error): the message of
    the first that fails, None when all hold. The one home of these rules: validate_config
    raises them, the plan space filters its candidates by them."""
    return layout_error(c) or idle_error(c)


def validate_workload(cfg: TrainConfig, model: ModelSpec) -> None:
    """Checks of the preference/RL options (one line each, naming the bad value)."""
    if cfg.reward_function and cfg.workload != "ppo":
        raise PlannerError(f"--reward-function applies to --workload ppo (got {cfg.workload}; "
                           "GRPO scores with a function unless --reward-model is given)")
    for name, _n in cfg.role_seq_lens:  # padded passes per role (validation cases)
        if not cfg.is_rl or name not in SPLIT_ROLES:
            raise PlannerError(f"role_seq_lens {name}: the roles of a PPO/GRPO job are "
                               f"{', '.join(SPLIT_ROLES)}")
    if not cfg.is_rl:
        _validate_not_rl(cfg)
        return
    if cfg.mean_seq_len is not None and cfg.prompt_len and cfg.response_len and \
            cfg.mean_seq_len > cfg.prompt_len + cfg.response_len:
        raise PlannerError(f"--mean-seq-len {cfg.mean_seq_len} exceeds prompt + response "
                           f"({cfg.prompt_len + cfg.response_len})")
    if cfg.prompt_len is None or cfg.response_len is None:
        raise PlannerError(f"--workload {cfg.workload} needs --prompt-len and --response-len "
                           "(they replace --seq-len)")
    if cfg.mean_response_len is not None and cfg.mean_response_len > cfg.response_len:
        raise PlannerError(f"--mean-response-len {cfg.mean_response_len} exceeds "
                           f"--response-len {cfg.response_len} (the longest a response runs)")
    if cfg.seq_len != cfg.prompt_len + cfg.response_len:
        raise PlannerError(f"--seq-len {cfg.seq_len} must equal prompt + response "
                           f"({cfg.prompt_len} + {cfg.response_len}) for {cfg.workload}")
    validate_engine(cfg)
    if cfg.tp != 1 or cfg.pp != 1 or cfg.cp != 1 or cfg.ep != 1:
        shown = f", ep {cfg.ep}" if cfg.ep != 1 else ""
        raise PlannerError(f"{cfg.workload}: the trainer is data parallel (verl FSDP, OpenRLHF "
                           f"DeepSpeed); tensor/pipeline/context/expert parallel training is "
                           f"not modelled (got tp {cfg.tp}, pp {cfg.pp}, cp {cfg.cp}{shown})")
    if not model.splits_heads(cfg.rollout_tp):
        allowed = list(tensor_parallel_options(model, model.num_kv_heads))
        raise PlannerError(f"--rollout-tp {cfg.rollout_tp} must divide the attention and kv heads "
                           f"of {model.id}; allowed: {allowed}")
    _validate_placement(cfg)


def reward_conflict(reward_model: str) -> str:
    """The one line for a reward model and --reward-function together."""
    return (f"--reward-model {reward_model} and --reward-function exclude each other: a function "
            "scores the responses, or the reward model does")


def _validate_not_rl(cfg: TrainConfig) -> None:
    """A workload other than PPO/GRPO: no RL option is set (and --precompute-ref only for
    DPO)."""
    rl_only = {"--prompt-len": cfg.prompt_len, "--response-len": cfg.response_len,
               "--mean-seq-len": cfg.mean_seq_len, "--mean-response-len": cfg.mean_response_len,
               "--rollout-n": cfg.rollout_n, "--gpu-memory-utilization": cfg.gpu_memory_utilization,
               "--generate-micro-batch": cfg.generate_micro_batch,
               "--rollout-engine": (cfg.rollout_engine
                                    if cfg.rollout_engine != DEFAULT_ROLLOUT_ENGINE else None),
               "--rollout-gpus": cfg.rollout_gpus,
               "--role-gpus": format_role_gpus(cfg.role_gpus) if cfg.role_gpus else None,
               "ema_copy": True if cfg.ema_copy else None}
    for flag, value in rl_only.items():
        if value is not None:
            raise PlannerError(f"{flag} {value} applies to --workload ppo or grpo only "
                               f"(got {cfg.workload})")
    if cfg.placement != "colocate" or cfg.rollout_tp != 1:
        raise PlannerError(f"--placement/--rollout-tp apply to --workload ppo or grpo only "
                           f"(got {cfg.workload})")
    rl_flags = {"--logprob-micro-batch": cfg.logprob_micro_batch,
                "--offload-idle": cfg.offload_idle or None,
                "--no-engine-sleep": (not cfg.engine_sleep) or None,
                "--rollout-batch": (cfg.rollout_batch
                                    if cfg.rollout_batch != DEFAULT_ROLLOUT_BATCH else None)}
    for flag, value in rl_flags.items():
        if value is not None:
            shown = "" if value is True else f" {value}"
            raise PlannerError(f"{flag}{shown} applies to --workload ppo or grpo only "
                               f"(got {cfg.workload})")
    if cfg.precompute_ref and cfg.workload != "dpo":
        raise PlannerError(f"--precompute-ref applies to --workload dpo only "
                           f"(got {cfg.workload})")


def _validate_placement(cfg: TrainConfig) -> None:
    """An RL workload's placement: the rollout TP divides the rollout GPUs, --role-gpus only
    split, --rollout-gpus only apart, and a separate placement leaves GPUs for training."""
    gen_gpus = rollout_gpu_count(cfg)
    if gen_gpus % cfg.rollout_tp:
        raise PlannerError(f"--rollout-tp {cfg.rollout_tp} must divide the {gen_gpus} rollout "
                           "GPUs")
    if cfg.role_gpus is not None and cfg.placement != "split":
        raise PlannerError(f"--role-gpus {format_role_gpus(cfg.role_gpus)} needs --placement "
                           "split")
    if cfg.placement == "split":
        _validate_split(cfg)
    elif cfg.placement == "separate":
        if cfg.num_gpus < 2:
            raise PlannerError("--placement separate needs at least 2 GPUs (engines and trainer)")
        if cfg.rollout_gpus is not None and cfg.rollout_gpus >= cfg.num_gpus:
            raise PlannerError(f"--rollout-gpus {cfg.rollout_gpus} must leave GPUs for training "
                               f"(--num-gpus {cfg.num_gpus})")
    elif cfg.rollout_gpus is not None:
        raise PlannerError(f"--rollout-gpus {cfg.rollout_gpus} needs --placement separate or "
                           "split")


def validate_engine(cfg: TrainConfig) -> None:
    """The rollout engine's options: the trainer's own generate (hf-generate) runs on the
    training GPUs with the trainer's layout, so the vLLM engine's knobs do not apply to it."""
    if not cfg.generates_in_trainer:
        if cfg.generate_micro_batch is not None:
            raise PlannerError(f"--generate-micro-batch {cfg.generate_micro_batch} applies to "
                               f"--rollout-engine {', '.join(TRAINER_ENGINES)} (got "
                               f"{cfg.rollout_engine}: its batch is what its memory holds)")
        if cfg.engine_on_actor_weights and (cfg.gpu_memory_utilization is not None
                                            or cfg.placement != "colocate"):
            knob = (f"--gpu-memory-utilization {cfg.gpu_memory_utilization}"
                    if cfg.gpu_memory_utilization is not None else f"--placement {cfg.placement}")
            raise PlannerError(f"{knob} does not apply to --rollout-engine {cfg.rollout_engine}: "
                               "it generates with the actor's own weights on the actor's GPUs "
                               "(colocate) and sizes its cache to the generation batch")
        return
    knobs = {"--placement": cfg.placement if cfg.placement != "colocate" else None,
             "--rollout-tp": cfg.rollout_tp if cfg.rollout_tp != 1 else None,
             "--gpu-memory-utilization": cfg.gpu_memory_utilization,
             "--offload-idle": cfg.offload_idle or None}
    for flag, value in knobs.items():
        if value is not None:
            shown = "" if value is True else f" {value}"
            raise PlannerError(f"{flag}{shown} does not apply to --rollout-engine "
                               f"{cfg.rollout_engine}: the trainer generates with its own "
                               "weights on its own GPUs (colocated, no engine TP or memory "
                               "fraction, nothing parked on the host)")


def _validate_split(cfg: TrainConfig) -> None:
    """Split placement: every role named once with at least one GPU, the engines the rest."""
    if cfg.role_gpus is None:
        raise PlannerError("--placement split needs the GPUs of each role (--role-gpus "
                           "actor=N,critic=N,...; the CLI and the planner default to equal "
                           "groups)")
    names = [n for n, _ in cfg.role_gpus]
    for name, gpus in cfg.role_gpus:
        if name not in SPLIT_ROLES:
            raise PlannerError(f"--role-gpus: {name!r} is not a role"
                               f"{did_you_mean(name, SPLIT_ROLES)}; roles: "
                               f"{', '.join(SPLIT_ROLES)}")
        if gpus < 1:
            raise PlannerError(f"--role-gpus {name}={gpus}: every role needs at least 1 GPU")
    if len(set(names)) != len(names) or "actor" not in names:
        raise PlannerError(f"--role-gpus {format_role_gpus(cfg.role_gpus)}: name each role once, "
                           "the actor included")
    engines = cfg.num_gpus - sum(g for _, g in cfg.role_gpus)
    if engines < 1:
        raise PlannerError(f"--role-gpus {format_role_gpus(cfg.role_gpus)} take all "
                           f"{cfg.num_gpus} GPUs: the rollout engines need GPUs of their own")
    if cfg.rollout_gpus is not None and cfg.rollout_gpus != engines:
        raise PlannerError(f"--rollout-gpus {cfg.rollout_gpus} must be the GPUs --role-gpus "
                           f"leaves ({engines} of {cfg.num_gpus})")
    error = idle_error(cfg)
    if error:
        raise PlannerError(error)
