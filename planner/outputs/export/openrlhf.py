"""OpenRLHF (``export_openrlhf``): a ``deepspeed`` launch of a supervised trainer, or a Ray job
of train_ppo_ray for PPO/GRPO.

Versions targeted (OPENRLHF_VERSIONS): ``--format openrlhf`` writes the current release's dotted
flags (0.11: ``--ds.zero_stage``, ``--vllm.num_engines``, ``--data.max_len`` = prompt + response);
``--format openrlhf@0.8`` writes the 0.8 layout (flat flags: ``--zero_stage``, ``--flash_attn``,
``--prompt_max_len``), which 0.8.9 is the last to parse (0.8.11 rejects ``--flash_attn``, 0.9
rejects ``--bf16 --prompt_max_len --generate_max_len``).

Semantics followed: --train_batch_size and --micro_train_batch_size count samples; colocation
with the engines needs --colocate_all_models and engines x TP = actor GPUs; DeepSpeed only (no
FSDP, no parameter offload flag, no 8-bit Adam).
"""

from __future__ import annotations

import re
from typing import Any

from planner.catalog.request import rollout_gpu_count
from planner.models.workloads import role_group_gpus, trainer_gpus
from planner.outputs.export._common import (
    ExportResult,
    Job,
    _checkpointing_warning,
    _command,
    _flags,
    _fp8,
    _lora_targets,
    _need_data_parallel,
    _nodes,
    _Out,
    _precision_note,
    _script,
)

OPENRLHF_VERSIONS = {
    "0.11": "OpenRLHF 0.11.x (dotted flags; checked with 0.11.2's argument parsers)",
    "0.8": "OpenRLHF 0.8.0 to 0.8.9 (flat flags; checked with 0.8.9's argument parsers)",
}
OPENRLHF_CURRENT = "0.11"
OPENRLHF_MODULES = {"sft": "train_sft", "pretrain": "train_sft", "rm": "train_rm",
                    "dpo": "train_dpo", "ppo": "train_ppo_ray", "grpo": "train_ppo_ray"}


def _openrlhf_common(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """Flags of every OpenRLHF trainer: model, DeepSpeed, precision, LoRA."""
    cfg = job.cfg
    hint = "re-plan for a DeepSpeed ZeRO layout, or use --format " + (
        "verl" if cfg.is_rl else "accelerate")
    _need_data_parallel(job, out, hint)
    if cfg.offload == "optimizer+params":
        out.refuse("parameter offload (OpenRLHF offloads the Adam states only: --adam_offload)",
                   hint)
    if cfg.optimizer != "adamw":
        out.refuse(f"optimizer {cfg.optimizer} (OpenRLHF uses DeepSpeed's Adam)", hint)
    if cfg.method == "freeze":
        out.refuse("method freeze (OpenRLHF trains full or LoRA)", "re-plan with --method full, "
                   "lora or qlora, or use --format llamafactory")
    if cfg.method == "qlora" and cfg.quant_format != "nf4":
        out.refuse(f"QLoRA on a {cfg.quant_format} base (--load_in_4bit is bitsandbytes NF4)",
                   "use --format llamafactory with a GPTQ checkpoint")
    if job.precision == "fp16":
        out.refuse(f"fp16 mixed precision on {job.gpu} (these launches train in bf16, or fp32 "
                   "with openrlhf@0.8)",
                   "use --format verl or a GPU with bf16")
    if cfg.pure_16bit:
        out.refuse("pure bf16 (DeepSpeed keeps fp32 master weights)", hint)
    if cfg.fsdp:
        out.warn("FSDP expressed as DeepSpeed ZeRO-3 (OpenRLHF has no FSDP): 16-bit sharded "
                 "weights instead of FSDP's fp32 ones")
    _fp8(job, out)
    _checkpointing_warning(job, out, "--gradient_checkpointing")
    flags: list[tuple[str, Any]] = [
        ("--pretrain", job.model_path),
        ("--save_path", "./ckpt"),
        ("--zero_stage", 3 if cfg.fsdp else cfg.zero_stage),
        ("--adam_offload", cfg.offload == "optimizer"),
        ("--micro_train_batch_size", cfg.micro_batch_size),
        ("--train_batch_size", cfg.global_batch_size),
        ("--gradient_checkpointing", cfg.checkpointing != "none"),
        ("--bf16", job.precision in ("bf16", "fp8")),
        ("--flash_attn", cfg.flash_attention),
        ("--packing_samples", cfg.mean_seq_len is not None),
        ("--use_liger_kernel", cfg.chunked_loss),
    ]
    if cfg.is_peft:
        targets = _lora_targets(cfg)
        flags += [("--lora_rank", cfg.rank), ("--lora_alpha", cfg.lora_alpha),
                  ("--target_modules", targets or ["all-linear"]),
                  ("--load_in_4bit", cfg.method == "qlora")]
        if cfg.method == "dora":
            out.warn("OpenRLHF has no DoRA: plain LoRA of the same rank (less memory and time)")
    if cfg.compiled or cfg.paged_optimizer:
        out.warn("torch.compile/paged optimizer are not OpenRLHF flags: left out")
    return flags


def export_openrlhf(job: Job, out: _Out, version: str = OPENRLHF_CURRENT) -> ExportResult:
    """The launch for OpenRLHF ``version`` (a key of OPENRLHF_VERSIONS): the flags are built in
    the 0.8 names and renamed for the dotted layout of 0.11 (_dotted)."""
    cfg = job.cfg
    common = _openrlhf_common(job, out)
    module = f"openrlhf.cli.{OPENRLHF_MODULES[cfg.workload]}"
    if cfg.is_rl:
        flags, env, comments = _openrlhf_rl(job, out)
        head = ["ray", "job", "submit", "--address=http://127.0.0.1:8265", "--", "python3", "-m",
                module]
    else:
        flags, env = _openrlhf_supervised(job, out), ("DATASET",)
        head = ["deepspeed", "--num_nodes", str(job.num_hosts), "--num_gpus", str(job.per_node),
                "--module", module]
        comments = ("Multi-node: add --hostfile with the nodes.",) if job.num_hosts > 1 else ()
    _precision_note(job, out)
    pairs = common + flags
    if version == "0.8":
        if cfg.flash_attention:
            out.note("--flash_attn: OpenRLHF 0.8.9 and older (0.8.11 and later reject it; "
                     "--format openrlhf writes the current layout)")
    else:
        pairs = _dotted(pairs, job, out)
        m = "actor" if cfg.is_rl else "model"
        for said in (out.warnings, out.notes):  # the messages name the flags of this layout
            said[:] = [re.sub(r"--\w+", lambda f: _DOTTED.get(f[0], f[0]).format(m=m), s)
                       for s in said]
    text = _script(job, out, _command(head, _flags(pairs)), env=env, comments=comments)
    return out.result(text, "run_openrlhf.sh")


# The 0.11 names of the 0.8 flags ({m}: the trained model's group, "model" in the supervised
# trainers and "actor" in train_ppo_ray); flags with another meaning are converted in _dotted.
_DOTTED = {
    "--pretrain": "--{m}.model_name_or_path", "--save_path": "--ckpt.output_dir",
    "--zero_stage": "--ds.zero_stage", "--adam_offload": "--ds.adam_offload",
    "--micro_train_batch_size": "--train.micro_batch_size",
    "--train_batch_size": "--train.batch_size",
    "--gradient_checkpointing": "--{m}.gradient_checkpointing_enable",
    "--packing_samples": "--ds.packing_samples", "--use_liger_kernel": "--ds.use_liger_kernel",
    "--lora_rank": "--ds.lora.rank", "--lora_alpha": "--ds.lora.alpha",
    "--target_modules": "--ds.lora.target_modules", "--load_in_4bit": "--ds.load_in_4bit",
    "--dataset": "--data.dataset", "--max_len": "--data.max_len",
    "--pretrain_mode": "--model.pretrain_mode_enable", "--beta": "--model.beta",
    "--ref_offload": "--ref.offload",
    "--colocate_all_models": "--train.colocate_all", "--colocate_actor_ref":
    "--train.colocate_actor_ref", "--vllm_enable_sleep": "--vllm.enable_sleep",
    "--deepspeed_enable_sleep": "--ds.enable_sleep", "--vllm_num_engines": "--vllm.num_engines",
    "--vllm_tensor_parallel_size": "--vllm.tensor_parallel_size",
    "--vllm_gpu_memory_utilization": "--vllm.gpu_memory_utilization",
    "--prompt_data": "--data.prompt_dataset", "--rollout_batch_size": "--rollout.batch_size",
    "--n_samples_per_prompt": "--rollout.n_samples_per_prompt",
    "--micro_rollout_batch_size": "--rollout.micro_batch_size",
    "--advantage_estimator": "--algo.advantage.estimator",
    "--critic_pretrain": "--critic.model_name_or_path", "--init_kl_coef": "--algo.kl.init_coef",
    "--use_kl_loss": "--algo.kl.use_loss", "--kl_estimator": "--algo.kl.estimator",
    "--reward_pretrain": "--reward.model_name_or_path", "--remote_rm_url": "--reward.remote_url",
}
_ROLE_GPUS = ("_num_nodes", "_num_gpus_per_node")


def _dotted(pairs: list[tuple[str, Any]], job: Job, out: _Out) -> list[tuple[str, Any]]:
    """The 0.8 flags in OpenRLHF 0.11's dotted layout: --bf16 is --ds.param_dtype (bf16 or
    fp16 only), --flash_attn is --ds.attn_implementation, and --data.max_len counts prompt and
    response together (--rollout.max_new_tokens the response)."""
    m = "actor" if job.cfg.is_rl else "model"
    given = dict(pairs)
    renamed: list[tuple[str, Any]] = []
    for name, value in pairs:
        if name == "--bf16":
            if not value:
                out.refuse(f"{job.precision} training in OpenRLHF 0.11 (--ds.param_dtype is "
                           "bf16 or fp16)", "use --format openrlhf@0.8 or a bf16 plan")
            renamed.append(("--ds.param_dtype", "bf16"))
        elif name == "--flash_attn":
            renamed.append(("--ds.attn_implementation",
                            "flash_attention_2" if value else "eager"))
        elif name == "--prompt_max_len":
            renamed.append(("--data.max_len", value + given["--generate_max_len"]))
        elif name == "--generate_max_len":
            renamed.append(("--rollout.max_new_tokens", value))
        elif name.endswith(_ROLE_GPUS):
            role, _, rest = name[2:].partition("_")
            renamed.append((f"--{role}.{rest}", value))
        else:
            renamed.append((_DOTTED[name].format(m=m), value))
    return renamed


def _openrlhf_supervised(job: Job, out: _Out) -> list[tuple[str, Any]]:
    cfg = job.cfg
    flags: list[tuple[str, Any]] = [("--dataset", "$DATASET"), ("--max_len", cfg.seq_len),
                                    ("--pretrain_mode", cfg.workload == "pretrain")]
    if cfg.workload == "dpo":
        if not cfg.reference:
            out.refuse("reference-free DPO (--kl 0)", "use --format llamafactory (pref_loss "
                       "simpo)")
        flags += [("--beta", 0.1)]
        if cfg.precompute_ref and not cfg.is_peft:
            flags += [("--ref_offload", True)]
            out.warn("OpenRLHF has no precomputed reference log-probs: the reference model is "
                     "kept in host RAM (--ref_offload), slower than planned")
    return flags


def _openrlhf_placement(job: Job, out: _Out) -> tuple[int, int, list[tuple[str, Any]]]:
    """(trainer GPUs, vLLM engines, placement flags) of the RL plan's placement; refuses what
    OpenRLHF cannot place."""
    cfg = job.cfg
    ppo = cfg.workload == "ppo"
    tp = cfg.rollout_tp
    if cfg.placement == "colocate":
        trainer = job.num_gpus
        engines = job.num_gpus // tp
        place: list[tuple[str, Any]] = [
            ("--colocate_all_models", True),
            ("--vllm_enable_sleep", cfg.engine_sleep),
            ("--deepspeed_enable_sleep", cfg.offload_idle),
        ]
    elif cfg.placement == "split":
        # OpenRLHF's default without --colocate_*: each role on GPUs of its own
        trainer = trainer_gpus(cfg)
        engines = rollout_gpu_count(cfg) // tp
        place = []
    else:
        if ppo:
            out.refuse("PPO with separate rollout GPUs (OpenRLHF puts actor+reference and "
                       "critic+reward on different GPUs unless --colocate_all_models, which "
                       "also takes the engines)", "re-plan with --placement split or colocate")
        if cfg.offload_idle:
            out.refuse("offload of idle states with separate rollout GPUs (DeepSpeed sleep "
                       "needs --colocate_all_models)", "re-plan with --no-offload-idle")
        if job.reward_model:
            out.refuse("a reward model with separate rollout GPUs (OpenRLHF gives it GPUs of "
                       "its own unless --colocate_all_models)", "re-plan with --placement "
                       "split or colocate")
        trainer = trainer_gpus(cfg)
        engines = rollout_gpu_count(cfg) // tp
        place = [("--colocate_actor_ref", cfg.reference)]
    return trainer, engines, place


def _openrlhf_role_nodes(job: Job, out: _Out, trainer: int) -> list[tuple[str, Any]]:
    """The nodes and GPUs per node of every role (split placement: the role's own group;
    otherwise the ``trainer`` GPUs)."""
    cfg = job.cfg
    ppo = cfg.workload == "ppo"
    roles = ["actor"] + (["ref"] if cfg.reference else []) + (["critic"] if ppo else []) + \
        (["reward"] if job.reward_model else [])
    res: list[tuple[str, Any]] = []
    for role in roles:
        # split: the role's own group
        name = {"ref": "reference"}.get(role, role)
        gpus = role_group_gpus(cfg, name) if cfg.placement == "split" else trainer
        nodes, per_node = _nodes(job, gpus)
        if nodes * per_node != gpus:
            out.refuse(f"{gpus} {name} GPUs on {nodes} nodes (OpenRLHF needs the same GPUs per "
                       "node)", "re-plan with another GPU count")
        res += [(f"--{role}_num_nodes", nodes), (f"--{role}_num_gpus_per_node", per_node)]
    return res


def _openrlhf_rl(job: Job, out: _Out) -> tuple[list[tuple[str, Any]], tuple[str, ...],
                                                tuple[str, ...]]:
    cfg = job.cfg
    ppo = cfg.workload == "ppo"
    tp = cfg.rollout_tp
    trainer, engines, place = _openrlhf_placement(job, out)
    res = _openrlhf_role_nodes(job, out, trainer)
    if job.engine_utilization is None:
        out.warn("the plan has no engine memory fraction: OpenRLHF's default "
                 "--vllm_gpu_memory_utilization (0.95) is left in place")
    flags = [*res, *place,
             ("--vllm_num_engines", engines),
             ("--vllm_tensor_parallel_size", tp),
             ("--vllm_gpu_memory_utilization", job.engine_utilization),
             ("--prompt_data", "$PROMPT_DATA"),
             ("--rollout_batch_size", cfg.rollout_batch),
             ("--n_samples_per_prompt", cfg.samples_per_prompt),
             ("--micro_rollout_batch_size", cfg.logprob_batch),
             ("--prompt_max_len", cfg.prompt_len),
             ("--generate_max_len", cfg.response_len),
             ("--advantage_estimator", "gae" if ppo else "group_norm")]
    if ppo:
        flags += [("--critic_pretrain", job.model_path), ("--init_kl_coef",
                                                          0.01 if cfg.reference else 0)]
        out.note("PPO critic initialised from the policy (the plan sized it with the policy's "
                 "architecture)")
    elif cfg.reference:
        flags += [("--use_kl_loss", True), ("--kl_estimator", "k3"), ("--init_kl_coef", 0.001)]
    else:
        flags += [("--init_kl_coef", 0)]
    env = ["PROMPT_DATA"]
    if job.reward_model:
        flags += [("--reward_pretrain", "$REWARD_MODEL")]
        env.append("REWARD_MODEL")
    else:
        flags += [("--remote_rm_url", "$REWARD_FUNC")]
        env.append("REWARD_FUNC")
        out.note(f"{cfg.workload.upper()} reward: a rule-based reward function file or server "
                 "(--remote_rm_url)")
    comments = ("Start a Ray cluster over the nodes first (ray start --head ...).",)
    return flags, tuple(env), comments
