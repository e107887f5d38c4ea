"""verl (``export_verl``): ``python3 -m verl.trainer.main_ppo`` with Hydra overrides.

Semantics followed (main_ppo, hybrid engine): ppo_mini_batch_size counts prompts and is multiplied
by rollout.n, then divided over the GPUs; the micro-batch must divide the per-GPU mini-batch; the
actor, reference and engine always share the GPUs (colocated); FSDP shards everything.

Version targeted (VERL_VERSIONS): verl 0.9 (checked with 0.9.1's ppo_trainer.yaml composed by
Hydra and its validate_config).
"""

from __future__ import annotations

from typing import Any

from planner.outputs.export._common import (
    GRADIENT_CLIPPING,
    ExportResult,
    Job,
    _checkpointing_warning,
    _command,
    _fp8,
    _lora_targets,
    _Out,
    _script,
)

VERL_VERSIONS = "verl 0.9.x (checked with 0.9.1: ppo_trainer.yaml composed, validate_config)"


def _verl_mini_batch(job: Job, out: _Out) -> int:
    """ppo_mini_batch_size (prompts): verl multiplies it by rollout.n and divides it over the
    GPUs; the micro-batch must divide that per-GPU share. The plan's optimizer step is
    global_batch_size sequences."""
    cfg = job.cfg
    n, dp, mb, prompts = cfg.samples_per_prompt, cfg.dp, cfg.micro_batch_size, cfg.rollout_batch
    g = cfg.global_batch_size

    def ok(p: int) -> bool:
        return p <= prompts and (p * n) % dp == 0 and (p * n // dp) % mb == 0

    if g % n == 0 and ok(g // n):
        return g // n
    fits = [p for p in range(1, prompts + 1) if ok(p)]
    if not fits:
        out.refuse(f"micro-batch {mb} on {dp} GPUs with {prompts} prompts x {n} samples (no "
                   "ppo_mini_batch_size gives whole micro-steps)",
                   "re-plan with a rollout batch that is a multiple of dp x micro-batch")
    # whole mini-batches per iteration first, then the step closest to the plan's
    best = min(fits, key=lambda p: (prompts % p != 0, abs(p * n - g), -p))
    out.warn(f"an optimizer step of {g} sequences is not a whole number of {n}-sample prompt "
             f"groups: ppo_mini_batch_size {best} prompts = {best * n} sequences per step "
             f"({best * n // dp // mb} micro-steps per GPU, planned {cfg.grad_accum})")
    return best


def export_verl(job: Job, out: _Out) -> ExportResult:
    """verl command-line overrides for the RL job."""
    cfg = job.cfg
    _verl_refusals(job, out)
    o = [*_verl_actor(job, out), *_verl_rollout(job, out), *_verl_precision(job, out)]
    if cfg.workload == "ppo":
        o += _verl_critic(job)
    o += [("algorithm.use_kl_in_reward", cfg.workload == "ppo" and cfg.reference)]
    o += _verl_reward(job, out)
    o += [("trainer.n_gpus_per_node", job.per_node), ("trainer.nnodes", job.num_hosts)]
    _verl_warnings(job, out)
    env = ["TRAIN_FILES", "VAL_FILES"] + (["REWARD_MODEL"] if job.reward_model else [])
    groups = [[f"{k}={_hydra(v)}"] for k, v in o]
    comments = ("Multi-node: start a Ray cluster over the nodes first; run this on the head.",) \
        if job.num_hosts > 1 else ()
    text = _script(job, out, _command(["python3", "-m", "verl.trainer.main_ppo"], groups),
                   env=tuple(env), comments=comments)
    return out.result(text, "run_verl.sh")


def _verl_refusals(job: Job, out: _Out) -> None:
    """What verl's main_ppo cannot run: one-line refusals naming the format to use instead."""
    cfg = job.cfg
    if not cfg.is_rl:
        out.refuse(f"{cfg.workload} (verl's main_ppo trains PPO/GRPO)",
                   "use --format deepspeed, accelerate, torchrun or llamafactory")
    if cfg.placement != "colocate":
        out.refuse(f"{cfg.placement} rollout GPUs (verl's hybrid engine colocates actor, "
                   "reference and engine)", "use --format openrlhf, or re-plan with "
                   "--placement colocate")
    if cfg.method in ("qlora", "freeze"):
        out.refuse(f"method {cfg.method} (verl trains full or LoRA)", "re-plan with --method "
                   "lora or full")
    if cfg.optimizer not in ("adamw", "adamw-8bit", "paged-adamw-8bit"):
        out.refuse(f"optimizer {cfg.optimizer} (verl builds Adam-style optimizers)",
                   "re-plan with --optimizer adamw")
    if (cfg.rollout_batch * cfg.samples_per_prompt) % job.num_gpus:
        out.refuse(f"{cfg.rollout_batch} prompts x {cfg.samples_per_prompt} samples over "
                   f"{job.num_gpus} GPUs (verl needs a whole number per GPU)",
                   "re-plan with a rollout batch that divides evenly")
    if job.num_gpus % job.num_hosts:
        out.refuse(f"{job.num_gpus} GPUs on {job.num_hosts} nodes (verl needs the same GPUs per "
                   "node)", "re-plan with --num-gpus a multiple of the nodes")


def _verl_actor(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """Data, model and actor overrides: batches, checkpointing, LoRA, KL loss, optimizer and
    offload."""
    cfg = job.cfg
    a, m = "actor_rollout_ref.actor", "actor_rollout_ref.model"
    grpo = cfg.workload == "grpo"
    mini = _verl_mini_batch(job, out)
    ckpt = cfg.checkpointing != "none"
    idle = cfg.offload_idle
    o: list[tuple[str, Any]] = [
        ("algorithm.adv_estimator", "grpo" if grpo else "gae"),
        ("data.train_files", "$TRAIN_FILES"), ("data.val_files", "$VAL_FILES"),
        ("data.train_batch_size", cfg.rollout_batch),
        ("data.max_prompt_length", cfg.prompt_len),
        ("data.max_response_length", cfg.response_len),
        (f"{m}.path", job.model_path),
        (f"{m}.enable_gradient_checkpointing", ckpt),
        (f"{m}.use_remove_padding", cfg.mean_seq_len is not None),
        (f"{m}.lora_rank", cfg.rank if cfg.is_peft else 0),
    ]
    if cfg.is_peft:
        targets = _lora_targets(cfg)
        o += [(f"{m}.lora_alpha", cfg.lora_alpha),
              (f"{m}.target_modules", "all-linear" if targets is None
               else "[" + ",".join(targets) + "]")]
    o += [
        (f"{a}.ppo_mini_batch_size", mini),
        (f"{a}.ppo_micro_batch_size_per_gpu", cfg.micro_batch_size),
        (f"{a}.grad_clip", GRADIENT_CLIPPING),
        (f"{a}.use_kl_loss", grpo and cfg.reference),
    ]
    if grpo and cfg.reference:
        o += [(f"{a}.kl_loss_coef", 0.001), (f"{a}.kl_loss_type", "low_var_kl")]
    o += [(f"{a}.fsdp_config.param_offload", idle), (f"{a}.fsdp_config.optimizer_offload", idle)]
    if cfg.dp_shard:  # hybrid sharding: a (ddp, fsdp) mesh of world / fsdp_size replicas
        o += [(f"{a}.fsdp_config.fsdp_size", cfg.dp_shard)]
    if cfg.optimizer != "adamw":
        o += [(f"{a}.optim.optimizer", "PagedAdamW8bit" if cfg.paged or
               cfg.optimizer == "paged-adamw-8bit" else "AdamW8bit"),
              (f"{a}.optim.optimizer_impl", "bitsandbytes.optim")]
        out.note("8-bit AdamW: verl's optim.optimizer/optimizer_impl (verl >= 0.5)")
    if cfg.offload != "none":
        o += [(f"{a}.strategy", "fsdp2"), (f"{a}.fsdp_config.offload_policy", True)]
        if cfg.offload == "optimizer":
            out.warn("verl's FSDP2 CPU offload (offload_policy) also moves parameters and "
                     "gradients (no optimizer-only offload): less GPU memory, slower than planned")
    return o


def _verl_rollout(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """Reference and vLLM rollout overrides: log-prob batches, engine TP, samples, memory."""
    cfg = job.cfg
    r = "actor_rollout_ref.rollout"
    idle = cfg.offload_idle
    o: list[tuple[str, Any]] = [
        ("actor_rollout_ref.ref.fsdp_config.param_offload", idle),
        *([("actor_rollout_ref.ref.fsdp_config.fsdp_size", cfg.dp_shard)] if cfg.dp_shard
          else []),
        ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", cfg.logprob_batch),
        (f"{r}.name", "vllm"),
        (f"{r}.tensor_model_parallel_size", cfg.rollout_tp),
        (f"{r}.n", cfg.samples_per_prompt),
        (f"{r}.log_prob_micro_batch_size_per_gpu", cfg.logprob_batch),
        (f"{r}.free_cache_engine", cfg.engine_sleep),
    ]
    if cfg.is_peft:  # vLLM loads the base weights itself; verl syncs the adapters (LoRA docs)
        o.append((f"{r}.load_format", "safetensors"))
    if job.engine_utilization is not None:
        o.append((f"{r}.gpu_memory_utilization", job.engine_utilization))
    else:
        out.warn("the plan has no engine memory fraction: verl's default "
                 "gpu_memory_utilization (0.5) is left in place")
    return o


def _verl_reward(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """The reward model's overrides, where the plan has one."""
    if not job.reward_model:
        return []
    rm = "reward.reward_model"  # verl 0.9 scores with the reward model on an inference engine
    out.warn("verl 0.9 scores with the reward model on a vLLM engine of its own (reward."
             "reward_model.rollout), not the FSDP forward the plan sized: set its "
             "gpu_memory_utilization to what the GPUs have left")
    return [(f"{rm}.enable", True), (f"{rm}.model_path", "$REWARD_MODEL"),
            (f"{rm}.rollout.name", "vllm"),
            (f"{rm}.rollout.tensor_model_parallel_size", job.cfg.rollout_tp)]


def _hydra(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def _verl_precision(job: Job, out: _Out) -> list[tuple[str, Any]]:
    r, a = "actor_rollout_ref.rollout", "actor_rollout_ref.actor"
    if job.precision == "fp16":
        out.warn(f"fp16 on {job.gpu}: verl's FSDP mixed precision set to fp16 params, which has "
                 "no loss scaling in verl")
        return [(f"{r}.dtype", "float16"), (f"++{a}.fsdp_config.mixed_precision.param_dtype",
                                            "fp16")]
    if job.precision == "fp32":
        return [(f"{r}.dtype", "float32"), (f"++{a}.fsdp_config.mixed_precision.param_dtype",
                                            "fp32")]
    _fp8(job, out)
    return []


def _verl_critic(job: Job) -> list[tuple[str, Any]]:
    cfg, idle = job.cfg, job.cfg.offload_idle
    o: list[tuple[str, Any]] = [
        ("critic.model.path", job.model_path),
        ("critic.ppo_micro_batch_size_per_gpu", cfg.micro_batch_size),
        ("critic.forward_micro_batch_size_per_gpu", cfg.logprob_batch),
        ("critic.model.enable_gradient_checkpointing", cfg.checkpointing != "none"),
        ("critic.model.use_remove_padding", cfg.mean_seq_len is not None),
        ("critic.fsdp.param_offload", idle),  # verl 0.9: the critic's engine config
        ("critic.fsdp.optimizer_offload", idle),
        ("critic.model.lora_rank", cfg.rank if cfg.is_peft else 0),
        *([("critic.fsdp.fsdp_size", cfg.dp_shard)] if cfg.dp_shard else []),
    ]
    if cfg.offload != "none":
        o += [("critic.strategy", "fsdp2"), ("critic.fsdp.offload_policy", True)]
    return o


def _verl_warnings(job: Job, out: _Out) -> None:
    cfg = job.cfg
    if cfg.dp > 1 and not cfg.shards_weights:
        out.warn(f"verl shards every role with FSDP (FULL_SHARD, like ZeRO-3); the plan used "
                 f"ZeRO-{cfg.zero_stage}: less memory, more communication than planned")
    if cfg.is_peft and not cfg.fp32_trained_weights:
        out.warn("verl builds the actor in fp32 under FSDP, the LoRA base included: 4 B per "
                 "frozen parameter (sharded), the plan counted 2 B; re-check with planner check "
                 "--fsdp")
    if cfg.method == "dora":
        out.warn("verl has no DoRA: plain LoRA of the same rank (less memory and time)")
    _checkpointing_warning(job, out, "enable_gradient_checkpointing")
    if cfg.workload == "ppo":
        out.note("PPO critic initialised from the policy (the plan sized it with the policy's "
                 "architecture); change critic.model.path for another critic")
    if not job.reward_model:
        out.note(f"{cfg.workload.upper()} reward: a rule-based reward function (reward."
                 "custom_reward_function.path), no reward model")
    if cfg.pure_16bit or cfg.paged_optimizer or cfg.compiled or cfg.chunked_loss:
        out.warn("pure_bf16/paged optimizer/torch.compile/chunked loss are not verl options "
                 "(verl's own fused kernels and torch.compile defaults apply)")
