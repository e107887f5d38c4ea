"""DeepSpeed-Chat (``export_deepspeed_chat``): the ``deepspeed ... main.py`` launch of the step the
workload is (step1_supervised_finetuning for SFT, step2_reward_model_finetuning for RM,
step2_dpo_finetuning for DPO, step3_rlhf_finetuning for PPO), run from that step's folder.

Read at deepspeedai/DeepSpeedExamples@3d83278f2b27c79339a36e5974537c8a2833a176 (2025-07-07, the
last change to applications/DeepSpeed-Chat): training/step*/main.py (the argparse flags written
here; ``--dtype`` choices fp16 / bf16; step3: ``--inference_tp_size`` > 1 needs
``--actor_zero_stage 3``, and actor and critic ZeRO-2 with the hybrid engine, ``--offload`` and no
LoRA is rejected), dschat/utils/ds_utils.py get_train_ds_config (``--offload`` puts both the
parameters and the optimizer states on the CPU; the train batch is per-device micro-batch x
accumulation x world size) and dschat/utils/module/lora.py (LoRA on every nn.Linear whose name
contains ``--lora_module_name``, scaled by 1/rank: no alpha flag).

Semantics followed: one answer per prompt in step3 (``--per_device_generation_batch_size``
prompts per GPU, trained in ``--per_device_training_batch_size`` micro-batches); actor, critic,
reference and reward model on the same GPUs; DeepSpeed's FusedAdam, or its CPU Adam with
``--offload``; no FSDP, tensor or pipeline parallelism in training.
"""

from __future__ import annotations

from typing import Any

from planner.outputs.export._common import (
    ExportResult,
    Job,
    _checkpointing_warning,
    _command,
    _flags,
    _need_data_parallel,
    _Out,
    _precision_note,
    _script,
)

DEEPSPEED_CHAT_VERSIONS = ("DeepSpeed-Chat at deepspeedai/DeepSpeedExamples@3d83278 (flags "
                           "checked against training/step*/main.py at that commit)")
DEEPSPEED_CHAT_STEPS = {"sft": "step1_supervised_finetuning",
                        "rm": "step2_reward_model_finetuning",
                        "dpo": "step2_dpo_finetuning", "ppo": "step3_rlhf_finetuning"}
_HINT = "use --format deepspeed or openrlhf"


def export_deepspeed_chat(job: Job, out: _Out) -> ExportResult:
    """The DeepSpeed-Chat launch of the job's step; refuses what its main.py cannot run."""
    cfg = job.cfg
    _deepspeed_chat_refusals(job, out)
    step = DEEPSPEED_CHAT_STEPS[cfg.workload]
    flags = _deepspeed_chat_ppo(job, out) if cfg.workload == "ppo" else \
        _deepspeed_chat_supervised(job, out)
    _deepspeed_chat_notes(job, out)
    head = ["deepspeed", "--num_nodes", str(job.num_hosts), "--num_gpus", str(job.per_node),
            "main.py"]
    env = ("DATA_PATH",) + (("REWARD_MODEL",) if cfg.workload == "ppo" else ())
    comments = (f"Run from applications/DeepSpeed-Chat/training/{step}/.",)
    if job.num_hosts > 1:
        comments += ("Multi-node: add --hostfile with the nodes.",)
    text = _script(job, out, _command(head, _flags(flags)), env=env, comments=comments)
    return out.result(text, f"run_dschat_{step.split('_')[0]}.sh")


def _deepspeed_chat_refusals(job: Job, out: _Out) -> None:
    cfg = job.cfg
    if cfg.workload not in DEEPSPEED_CHAT_STEPS:
        out.refuse(f"{cfg.workload} (DeepSpeed-Chat's steps are SFT, RM, DPO and PPO)",
                   "use --format verl or openrlhf for GRPO, torchrun for pretraining")
    _need_data_parallel(job, out, _HINT)
    if cfg.fsdp:
        out.refuse("FSDP (DeepSpeed-Chat shards with ZeRO)", "re-plan with --zero-stage")
    if cfg.method not in ("full", "lora"):
        out.refuse(f"method {cfg.method} (DeepSpeed-Chat trains full or LoRA)", _HINT)
    if cfg.optimizer != "adamw":
        out.refuse(f"optimizer {cfg.optimizer} (DeepSpeed-Chat steps with DeepSpeed's Adam)",
                   _HINT)
    if job.precision == "fp32":
        out.refuse(f"fp32 training on {job.gpu} (--dtype is fp16 or bf16)", _HINT)
    if cfg.pure_16bit:
        out.refuse("pure bf16 (DeepSpeed keeps fp32 master weights)", _HINT)


def _deepspeed_chat_common(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """Flags every step shares: dtype, offload, LoRA, learning-rate placeholder."""
    cfg = job.cfg
    if cfg.offload == "optimizer":
        out.warn("--offload also moves the parameters to the CPU (no optimizer-only offload in "
                 "DeepSpeed-Chat): less GPU memory, slower than planned")
    return [("--data_path", "$DATA_PATH"),
            ("--dtype", "fp16" if job.precision == "fp16" else "bf16"),
            ("--offload", cfg.offload != "none"),
            ("--compute_fp32_loss", cfg.loss_in_fp32),
            ("--output_dir", "./output")]


def _lora(job: Job, out: _Out, prefix: str = "") -> list[tuple[str, Any]]:
    """LoRA flags (``prefix`` actor_ / critic_ in step3): rank and the module name filter."""
    cfg = job.cfg
    if not cfg.is_peft:
        return []
    if "all-linear" not in cfg.lora_targets:
        out.warn(f"LoRA targets {', '.join(cfg.lora_targets)}: DeepSpeed-Chat adapts every "
                 "linear layer under --lora_module_name (more adapter memory than planned)")
    if cfg.lora_alpha != 1:
        out.warn(f"lora alpha {cfg.lora_alpha}: DeepSpeed-Chat scales the update by 1/rank "
                 "(alpha 1; same memory, another update size)")
    return [(f"--{prefix}lora_dim", cfg.rank), (f"--{prefix}lora_module_name", "layers.")]


def _deepspeed_chat_supervised(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """step1/step2 flags: model, batch, sequence length, ZeRO, checkpointing, LoRA."""
    cfg = job.cfg
    _checkpointing_warning(job, out, "--gradient_checkpointing")
    flags = [("--model_name_or_path", job.model_path),
             ("--per_device_train_batch_size", cfg.micro_batch_size),
             ("--gradient_accumulation_steps", cfg.grad_accum),
             ("--max_seq_len", cfg.seq_len),
             ("--zero_stage", cfg.zero_stage),
             ("--gradient_checkpointing", cfg.checkpointing != "none"),
             ("--learning_rate", 1e-5),
             *_deepspeed_chat_common(job, out), *_lora(job, out)]
    if cfg.is_peft:
        flags.append(("--only_optimize_lora", True))
    if cfg.workload == "dpo":
        if not cfg.reference:
            out.refuse("reference-free DPO (step2_dpo_finetuning always loads the reference)",
                       "use --format llamafactory (pref_loss simpo)")
        flags.append(("--beta", 0.1))
        if cfg.precompute_ref:
            out.warn("DeepSpeed-Chat has no precomputed reference log-probs: the reference "
                     "model is loaded and run every step (more memory and time than planned)")
    if cfg.workload == "rm":
        out.note("--num_padding_at_beginning: 1 for OPT (DeepSpeed-Chat's default), 0 for "
                 "most other models")
    return flags


def _deepspeed_chat_ppo(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """step3 flags: actor and critic, generation and training batches, hybrid engine."""
    cfg = job.cfg
    _deepspeed_chat_ppo_checks(job, out)
    hybrid = cfg.rollout_engine == "deepspeed-hybrid"
    _checkpointing_warning(job, out, "--actor_gradient_checkpointing")
    flags: list[tuple[str, Any]] = [
        ("--actor_model_name_or_path", job.model_path),
        ("--critic_model_name_or_path", "$REWARD_MODEL"),
        # one generate call and one pass of each experience model per generation batch: the
        # plan's log-prob batch (rollout.engine); the iteration's prompts in that many batches
        ("--per_device_generation_batch_size", cfg.logprob_batch),
        ("--per_device_training_batch_size", cfg.micro_batch_size),
        ("--gradient_accumulation_steps", cfg.grad_accum),
        ("--generation_batches", cfg.rollout_batch // (cfg.dp * cfg.logprob_batch)),
        ("--ppo_epochs", 1),
        ("--max_prompt_seq_len", cfg.prompt_len),
        ("--max_answer_seq_len", cfg.response_len),
        ("--actor_zero_stage", cfg.zero_stage), ("--critic_zero_stage", cfg.zero_stage),
        ("--actor_gradient_checkpointing", cfg.checkpointing != "none"),
        ("--critic_gradient_checkpointing", cfg.checkpointing != "none"),
        ("--enable_hybrid_engine", hybrid),
        # the plan frees the engine's cache while training (engine_sleep); DeepSpeed keeps its
        # inference workspace unless told (deepspeed-chat profile: engine_sleep)
        ("--release_inference_cache", hybrid and cfg.engine_sleep),
        ("--enable_ema", cfg.ema_copy),
        ("--inference_tp_size", cfg.rollout_tp if hybrid else None),
        ("--actor_learning_rate", 1e-6), ("--critic_learning_rate", 5e-6),
        *_deepspeed_chat_common(job, out),
        *_lora(job, out, "actor_"), *_lora(job, out, "critic_"),
    ]
    if cfg.is_peft:
        flags.append(("--only_optimize_lora", True))
    out.note("the critic and the reward model both load $REWARD_MODEL (DeepSpeed-Chat "
             "initialises the critic from the step2 reward model)")
    return flags


def _deepspeed_chat_ppo_checks(job: Job, out: _Out) -> None:
    """What step3's main.py rejects or cannot place."""
    cfg = job.cfg
    if cfg.reward_function:
        out.refuse("a reward function (step3 scores with the step2 reward model, "
                   "--critic_model_name_or_path)", "re-plan without --reward-function")
    if cfg.placement != "colocate":
        out.refuse(f"{cfg.placement} placement (step3 puts actor, critic, reference and reward "
                   "on the same GPUs)", "re-plan with --placement colocate")
    if cfg.rollout_engine not in ("deepspeed-hybrid", "hf-generate"):
        out.refuse(f"rollout engine {cfg.rollout_engine} (step3 generates with the hybrid "
                   "engine or the actor's own generate)", "re-plan with --rollout-engine "
                   "deepspeed-hybrid")
    if cfg.samples_per_prompt != 1:
        out.refuse(f"{cfg.samples_per_prompt} samples per prompt (step3 generates one answer "
                   "per prompt)", "re-plan with --rollout-n 1")
    if cfg.rollout_batch % (cfg.dp * cfg.logprob_batch):
        out.refuse(f"{cfg.rollout_batch} prompts over {cfg.dp} GPUs in generation batches of "
                   f"{cfg.logprob_batch} (step3 generates whole per-device batches)",
                   f"re-plan with a rollout batch that is a multiple of "
                   f"{cfg.dp * cfg.logprob_batch}")
    if not cfg.reference:
        out.refuse("PPO without a reference model (step3 always loads it for the KL penalty)",
                   "use --format openrlhf or verl")
    if cfg.rollout_tp > 1 and cfg.zero_stage != 3:
        out.refuse(f"hybrid-engine tensor parallel {cfg.rollout_tp} with ZeRO stage "
                   f"{cfg.zero_stage} (main.py asserts --actor_zero_stage 3)",
                   "re-plan with --zero-stage 3 or rollout tp 1")
    if cfg.zero_stage == 2 and cfg.offload != "none" and not cfg.is_peft and \
            cfg.rollout_engine == "deepspeed-hybrid":
        out.refuse("ZeRO-2 with --offload, the hybrid engine and no LoRA (main.py rejects the "
                   "combination)", "re-plan with --zero-stage 3 or --offload none")


def _deepspeed_chat_notes(job: Job, out: _Out) -> None:
    """Plan settings with no DeepSpeed-Chat flag, and what the launch still needs."""
    cfg = job.cfg
    _precision_note(job, out)
    if job.precision == "fp8":
        out.warn("fp8 (Transformer Engine) has no DeepSpeed-Chat flag: bf16 set; slower than "
                 "planned")
    if cfg.flash_attention:
        out.warn("DeepSpeed-Chat sets no attention kernel: the model's transformers default "
                 "runs (the plan assumed flash attention)")
    if cfg.compiled or cfg.chunked_loss or cfg.paged_optimizer or cfg.mean_seq_len:
        out.warn("torch.compile / chunked loss / paged optimizer / packing have no "
                 "DeepSpeed-Chat flag: left out")
    out.note("learning rates are placeholders; --data_path takes DeepSpeed-Chat's data set "
             "names (e.g. Dahoas/rm-static)")
