"""Shared pieces of every exporter: the Job each one reads, its result and the warnings, notes
and refusals of one export, parsing of a plan or plan document into a Job, and the helpers several
formats use (checks, precision/checkpointing/offload messages, flags and shell-script builders).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from planner.catalog.frameworks import EP_LAUNCHES, hybrid_shard_writers
from planner.catalog.load import load_catalog
from planner.catalog.request import PRECISIONS, TrainConfig
from planner.catalog.request_checks import validate_config
from planner.catalog.specs import ModelSpec
from planner.errors import PlannerError
from planner.inputs import FieldErrors, check_tree, short
from planner.models.memory import engine_utilization_to_set
from planner.models.workloads import trainer_gpus
from planner.outputs.schema import SCHEMA_VERSION
from planner.solver.result import Plan, PlanResult

RL_HINT = "use --format verl or --format openrlhf for PPO/GRPO"
# HF module names of the planner's LoRA targets (Llama/Qwen/Mistral naming).
HF_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj",
              "up": "up_proj", "down": "down_proj"}
GRADIENT_CLIPPING = 1.0


@dataclass(frozen=True)
class ExportResult:
    """One export: its format, text, a file name and the warnings and notes."""
    format: str
    text: str
    filename_suggestion: str
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Job:
    """What every exporter reads: the plan's hardware and configuration."""

    model: str  # catalog id
    model_path: str  # what the launch loads (HF repo id where the catalog has one)
    gpu: str
    num_gpus: int
    num_hosts: int
    cfg: TrainConfig
    precision: str  # effective on this GPU (bf16 becomes fp16 on GPUs without bf16)
    engine_utilization: float | None = None  # RL: vLLM gpu_memory_utilization to set
    reward_model: bool = False  # RL: a reward model is one of the plan's roles
    # a Mixture-of-Experts model: launches that take ep write it even at 1, as their defaults
    # differ (prime-rl's ModelConfig.ep "auto" = min(world, 8) at 559b447; Megatron-Bridge's
    # Qwen3-MoE recipes set 4 or more)
    moe: bool = False

    @property
    def writes_ep(self) -> bool:
        """Whether a launch that has an expert-parallel setting writes it: every MoE plan."""
        return self.moe or self.cfg.ep > 1

    @property
    def per_node(self) -> int:
        """GPUs per node (ceiling of GPUs over hosts)."""
        return math.ceil(self.num_gpus / self.num_hosts)

    @property
    def label(self) -> str:
        """A one-line description of the job for the file's header."""
        c = self.cfg
        return (f"{self.model} {c.workload} ({c.method_label}) on {self.num_gpus} x {self.gpu}, "
                f"{self.num_hosts} node(s)")


@dataclass
class _Out:
    """Warnings and notes of one export, and its refusals (one-line PlannerErrors)."""

    fmt: str
    targets: str = ""  # the framework versions the format's text is written for
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:  # one line per fact (a format's roles may share one)
            self.warnings.append(msg)

    def note(self, msg: str) -> None:
        self.notes.append(msg)

    def refuse(self, what: str, hint: str) -> NoReturn:
        raise PlannerError(f"export {self.fmt}: cannot express {what}; {hint}")

    def title(self, job: Job) -> list[str]:
        """The header comment lines every commented format starts with."""
        return [f"# planner export --format {self.fmt}: {job.label}",
                f"# Targets {self.targets}."]

    def result(self, text: str, filename: str) -> ExportResult:
        notes = (*self.notes, f"targets {self.targets}") if self.targets else tuple(self.notes)
        return ExportResult(self.fmt, text, filename, tuple(self.warnings), notes)


# ---------------------------------------------------------------------------------------------
# Plan documents
# ---------------------------------------------------------------------------------------------
def job_of(plan: Any, *, model_path: str | None = None, catalog: Any = None) -> Job:
    """The Job of a Plan, PlanResult, Job or plan JSON document (a saved `planner plan --json`,
    parsed here once); bad documents are one-line errors."""
    if isinstance(plan, Job):
        return plan
    if isinstance(plan, PlanResult):
        if plan.plan is None:
            raise PlannerError(f"the plan result has no plan (status {plan.status}): "
                               "nothing to export")
        plan = plan.plan
    if isinstance(plan, Plan):
        return _job_of_plan(plan, model_path=model_path, catalog=catalog)
    if not isinstance(plan, Mapping):
        raise PlannerError(f"cannot export a {type(plan).__name__}: give a Plan, a PlanResult "
                           "or a `planner plan --json` document")
    return _job_of_doc(plan, model_path=model_path, catalog=catalog)


def _job_of_plan(plan: Plan, *, model_path: str | None, catalog: Any) -> Job:
    """The Job of a typed Plan: its values as the models computed them (no rendering)."""
    cfg = plan.config
    _consistent(plan.num_gpus, cfg)
    spec = _model_spec(plan.model, catalog)
    if spec is not None:  # a Plan built or edited by hand: the same structural checks as `check`
        validate_config(cfg, spec)
    return Job(
        model=plan.model, model_path=_model_path(plan.model, spec, model_path or plan.checkpoint),
        gpu=plan.gpu,
        num_gpus=plan.num_gpus, num_hosts=plan.num_hosts, cfg=cfg,
        precision=plan.memory.precision or cfg.precision,
        engine_utilization=engine_utilization_to_set(cfg, plan.memory),
        reward_model=_has_reward_model(cfg, plan.memory.phases),
        moe=spec is not None and spec.moe is not None,
    )


def _job_of_doc(plan: Mapping, *, model_path: str | None, catalog: Any) -> Job:
    """The Job of a plan JSON document, checked field by field."""
    doc = check_tree(plan, what="plan document")  # the file boundary's bounds, from any caller
    version = doc.get("schema_version", SCHEMA_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or \
            not 1 <= version <= SCHEMA_VERSION:
        raise PlannerError(f"plan document schema_version {short(version)}: this planner reads "
                           f"versions 1 to {SCHEMA_VERSION}")
    if "points" in doc and "plan" not in doc:
        points = doc["points"]
        count = len(points) if isinstance(points, list) else 0
        raise PlannerError(f"a `planner pareto --json` document ({count} point(s)): choose one "
                           "with planner export --point I")
    if "plan" in doc and "config" not in doc:
        if doc["plan"] is None:
            raise PlannerError(f"the plan document has no plan (status {doc.get('status')}): "
                               "nothing to export")
        doc = doc["plan"]
    if not isinstance(doc, Mapping):
        raise PlannerError("not a `planner plan --json` document: 'plan' is not an object")
    missing = [k for k in ("model", "gpu", "num_gpus", "num_hosts", "config") if k not in doc]
    if missing:
        raise PlannerError(f"not a `planner plan --json` document: missing {', '.join(missing)}")
    try:
        cfg = TrainConfig.model_validate(doc["config"])
    except FieldErrors as exc:
        err = exc.errors[0]
        loc = "".join(f".{p}" for p in err["loc"])
        raise PlannerError(f"plan config{loc} {short(err.get('input'))}: {err['msg'].lower()}"
                           ) from None
    num_gpus, num_hosts = _positive(doc, "num_gpus"), _positive(doc, "num_hosts")
    _consistent(num_gpus, cfg)
    memory, rl = _member(doc, "memory"), _member(doc, "rl")
    precision = memory.get("precision") or cfg.precision
    if precision not in PRECISIONS:
        raise PlannerError(f"plan memory.precision {precision!r} is not one of "
                           f"{', '.join(PRECISIONS)}")
    u = rl.get("gpu_memory_utilization", cfg.gpu_memory_utilization)
    if u is not None and (isinstance(u, bool) or not isinstance(u, int | float)
                          or not 0 < u < 1):
        raise PlannerError(f"plan rl.gpu_memory_utilization {u!r} must be a fraction in (0, 1)")
    phases = _member(memory, "phases_gib", where="plan memory.")
    spec = _model_spec(str(doc["model"]), catalog)
    if spec is not None:  # a hand-edited document: the same structural checks as `check`
        validate_config(cfg, spec)
    return Job(
        model=str(doc["model"]), model_path=_model_path(
            str(doc["model"]), spec, model_path or _checkpoint(doc)),
        gpu=str(doc["gpu"]), num_gpus=num_gpus, num_hosts=num_hosts, cfg=cfg,
        precision=precision,
        engine_utilization=None if u is None else float(u),
        reward_model=_has_reward_model(cfg, phases),
        moe=spec is not None and spec.moe is not None,
    )


def _consistent(num_gpus: int, cfg: TrainConfig) -> None:
    if num_gpus != cfg.num_gpus:
        raise PlannerError(f"plan num_gpus {num_gpus} differs from its config's "
                           f"{cfg.num_gpus}: the document was edited inconsistently")


def _checkpoint(doc: Mapping) -> str | None:
    """A plan document's checkpoint (what its launch loads), None in documents without one."""
    value = doc.get("checkpoint")
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise PlannerError(f"plan checkpoint {value!r} must be a non-empty string (a Hugging "
                           "Face repo id or a folder)")
    return value


def _model_path(model: str, spec: ModelSpec | None, given: str | None) -> str:
    """What the launch loads: the path given, else the model's HF repo, else its catalog id."""
    return given or (spec.hf_repo if spec and spec.hf_repo else model)


def _has_reward_model(cfg: TrainConfig, phases: Mapping) -> bool:
    """A reward model is one of the plan's roles: PPO's unless a function scores, or a reward
    phase in its memory."""
    return (cfg.workload == "ppo" and not cfg.reward_function) or \
        any(str(k).startswith("reward") for k in phases)


def _member(doc: Mapping, key: str, *, where: str = "plan ") -> Mapping:
    value = doc.get(key) or {}
    if not isinstance(value, Mapping):
        raise PlannerError(f"{where}{key} must be an object (got {type(value).__name__})")
    return value


def _positive(doc: Mapping, key: str) -> int:
    value = doc[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlannerError(f"plan {key} {value!r} must be a positive integer")
    return value


def _model_spec(model_id: str, catalog: Any) -> ModelSpec | None:
    """The plan's model in the catalog (the shipped one by default), None if not there."""
    try:
        return (catalog or load_catalog()).model(model_id).spec
    except PlannerError:
        return None


# Formats whose preference/RL trainers are TRL's, computing log-probs row by row on the 16-bit
# logits (selective_log_softmax): the 16-bit loss buffers a plan assumes there are what runs.
TRL_LOGPROB_FORMATS = ("axolotl", "ms-swift")


def _trl_16bit_logprobs(fmt: str, cfg: TrainConfig) -> bool:
    return fmt in TRL_LOGPROB_FORMATS and cfg.workload in ("dpo", "ppo", "grpo")


def _every_format(job: Job, out: _Out) -> None:
    """Settings that no format expresses, and plan facts every launch needs."""
    cfg = job.cfg
    if cfg.optimizer_in_backward and out.fmt != "torchtune":  # torchtune: optimizer_in_bwd
        out.refuse("optimizer-in-backward (the plan holds no full gradient)",
                   "re-plan without it")
    if not cfg.loss_in_fp32 and out.fmt != "verl" and not _trl_16bit_logprobs(out.fmt, cfg):
        # verl's log-probs stay in 16 bit
        out.warn("the plan assumed 16-bit loss buffers (no fp32 upcast of the logits); stock "
                 "Hugging Face models upcast: more memory than planned")
    if cfg.ep > 1 and out.fmt.split("@")[0] not in EP_LAUNCHES:
        out.refuse(f"expert parallelism (ep {cfg.ep}: this launch has no expert parallel "
                   "degree)", f"re-plan on a framework whose launch writes it ("
                   f"{', '.join(EP_LAUNCHES)}), or check with --ep 1")
    _hybrid_shard(job, out)
    if job.num_gpus % job.num_hosts:  # launchers start the same process count on every node
        out.refuse(f"{job.num_gpus} GPUs on {job.num_hosts} nodes (launchers start "
                   f"{job.per_node} processes on every node: {job.per_node * job.num_hosts} "
                   f"ranks against a batch for {job.num_gpus})",
                   f"re-plan with --num-gpus a multiple of {job.num_hosts}")


def _hybrid_shard(job: Job, out: _Out) -> None:
    """Hybrid sharding is written by frameworks.hybrid_shard_writers with FSDP; Accelerate's and
    the HF Trainer's HYBRID_SHARD shard over one node's GPUs, so the plan's group must be that."""
    cfg, fmt = job.cfg, out.fmt.split("@")[0]
    if cfg.dp_shard is None:
        return
    writers = hybrid_shard_writers(cfg.is_rl)
    if fmt not in writers or not cfg.fsdp:
        out.refuse(f"hybrid sharding (dp_shard {cfg.dp_shard}{'' if cfg.fsdp else ' with ZeRO'}"
                   f": this launch writes no hybrid shard group{' for RL' if cfg.is_rl else ''})",
                   f"export FSDP plans with --format {' / '.join(writers)}, or re-plan "
                   "without it")
    elif fmt not in ("torchtitan", "verl") and cfg.dp_shard != job.per_node:
        out.refuse(f"a hybrid shard group of {cfg.dp_shard} GPUs on nodes of {job.per_node} "
                   "(FSDP's HYBRID_SHARD shards over one node's GPUs)",
                   "use --format torchtitan (data_parallel_shard_degree), or re-plan")


# ---------------------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------------------
def _need_data_parallel(job: Job, out: _Out, fmt_hint: str) -> None:
    c = job.cfg
    if c.tp > 1 or c.pp > 1 or c.cp > 1 or c.ep > 1:
        out.refuse(f"tensor/pipeline/context/expert parallel training (tp {c.tp}, pp {c.pp}, "
                   f"cp {c.cp}, ep {c.ep})", fmt_hint)


def _need_not_rl(job: Job, out: _Out) -> None:
    if job.cfg.is_rl:
        out.refuse(f"{job.cfg.workload} (rollout engines, actor/critic/reference roles)", RL_HINT)


def _need_pretrain_or_sft(job: Job, out: _Out, framework: str) -> None:
    """Refuse every workload but pretraining and supervised finetuning (``framework`` trains
    language models only)."""
    workload = job.cfg.workload
    if workload not in ("pretrain", "sft"):
        out.refuse(f"{workload} ({framework} pretrains and finetunes only)",
                   RL_HINT if job.cfg.is_rl else "use --format torchrun (TRL) or llamafactory")


def _yaml_config(job: Job, out: _Out, doc: Mapping[str, Any], *, launch: str,
                 batch_key: str) -> str:
    """A YAML config file: the title, the batch arithmetic (the framework derives the
    accumulation from ``batch_key``), the launch line as a comment, then ``doc``."""
    import yaml  # deferred: only the YAML formats need it

    c = job.cfg
    lines = [*out.title(job),
             f"# micro-batch {c.micro_batch_size} x accumulation {c.grad_accum} x dp {c.dp} = "
             f"{c.global_batch_size} (the accumulation follows from {batch_key})",
             f"# launch: {launch}", yaml.safe_dump(dict(doc), sort_keys=False).rstrip()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    """A TOML value: booleans, numbers, lists of them, or a basic string (JSON's quoting and
    escapes, ASCII only, are valid TOML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=True)


def _ds_offload_name(cfg: TrainConfig) -> str:
    return {"none": "", "optimizer": "_offload", "optimizer+params": "_offload_all"}[cfg.offload]


def _precision_note(job: Job, out: _Out) -> None:
    if job.precision != job.cfg.precision:
        out.note(f"precision {job.precision}: {job.gpu} has no {job.cfg.precision}")


def _fp8(job: Job, out: _Out, instead: str = "bf16") -> None:
    if job.precision == "fp8":
        out.warn(f"fp8 (Transformer Engine) has no switch in this format: {instead} set; "
                 "slower than planned")


def _checkpointing_warning(job: Job, out: _Out, what: str) -> None:
    if job.cfg.checkpointing == "selective":
        out.warn(f"selective recomputation has no switch here: {what} (full recomputation) "
                 "set: less memory, ~1/3 more compute than planned")


def _lora_targets(cfg: TrainConfig) -> list[str] | None:
    """HF module names of the LoRA targets, None for all linear layers."""
    if "all-linear" in cfg.lora_targets:
        return None
    return [HF_MODULES[t] for t in cfg.lora_targets]  # TrainConfig allows only these names


def _hf_optim(cfg: TrainConfig, out: _Out) -> str:
    """The Hugging Face TrainingArguments ``optim`` of the plan's optimizer."""
    if cfg.optimizer == "adamw":
        if cfg.paged_optimizer:
            return "paged_adamw_32bit"
        return "adamw_torch_fused" if cfg.fused_optimizer else "adamw_torch"
    if cfg.optimizer == "sgd-momentum":
        out.warn("HF optim 'sgd' runs without momentum (the plan counted a momentum buffer)")
    names = {"adamw-8bit": "paged_adamw_8bit" if cfg.paged_optimizer else "adamw_bnb_8bit",
             "paged-adamw-8bit": "paged_adamw_8bit", "sgd": "sgd", "sgd-momentum": "sgd",
             "adafactor": "adafactor"}
    return names[cfg.optimizer]


def _nodes(job: Job, gpus: int | None = None) -> tuple[int, int]:
    """(nodes, GPUs per node) of ``gpus`` (default all) packed on the plan's node size."""
    gpus = job.num_gpus if gpus is None else gpus
    nodes = math.ceil(gpus / job.per_node)
    return nodes, math.ceil(gpus / nodes)


def _q(token: str) -> str:
    """Shell-quote a token; $VARS stay expandable inside double quotes."""
    if "$" in token and not any(ch in token for ch in "\"'\\`"):
        return f'"{token}"'
    return shlex.quote(token)


def _command(head: list[str], groups: list[list[str]]) -> str:
    """One shell command, one option (with its value) per continued line."""
    lines = [" ".join(_q(t) for t in head)]
    lines += ["  " + " ".join(_q(t) for t in g) for g in groups]
    return " \\\n".join(lines)


def _script(job: Job, out: _Out, command: str, *, env: tuple[str, ...] = (),
            comments: tuple[str, ...] = (), exports: tuple[tuple[str, str], ...] = ()) -> str:
    head = ["#!/usr/bin/env bash", *out.title(job)]
    head += [f"# {c}" for c in comments]
    if env:
        head.append(f"# Set before running: {', '.join(env)}")
    lines = [f"export {name}={_q(value)}" for name, value in exports]
    return "\n".join([*head, "set -euo pipefail", *lines, command]) + "\n"


def _flags(pairs: list[tuple[str, Any]]) -> list[list[str]]:
    """[--flag value] groups; True gives a bare flag, False/None drops the flag, a list gives
    one token per item (nargs)."""
    groups = []
    for flag, value in pairs:
        if value is None or value is False:
            continue
        if isinstance(value, list):
            groups.append([flag, *map(str, value)])
        else:
            groups.append([flag] if value is True else [flag, str(value)])
    return groups


def _offload_optimizer(job: Job, out: _Out) -> None:
    """The optimizer must step on the CPU: ZeRO-Offload with DeepSpeed's fp32 CPU Adam only,
    FSDP offload with any torch optimizer but not bitsandbytes' CUDA-only 8-bit ones."""
    cfg = job.cfg
    if cfg.offload == "none":
        return
    if not cfg.fsdp and cfg.optimizer != "adamw":
        out.refuse(f"{cfg.optimizer} with ZeRO-Offload (DeepSpeed steps offloaded states with "
                   "its fp32 CPU Adam: more host RAM than planned)",
                   "re-plan with --optimizer adamw or --offload none")
    if cfg.fsdp and (cfg.paged or cfg.optimizer == "adamw-8bit"):
        out.refuse(f"{cfg.optimizer} with FSDP CPU offload (bitsandbytes optimizers step on the "
                   "GPU only)", "re-plan with --optimizer adamw or --offload none")


def _fsdp_offload_warning(job: Job, out: _Out) -> None:
    if job.cfg.fsdp and job.cfg.offload == "optimizer":
        out.warn("FSDP CPU offload also moves the parameters and gradients (no optimizer-only "
                 "offload): less GPU memory, slower than planned")
    if job.cfg.shard_embeddings:
        out.warn("embedding/head as FSDP units of their own: set your auto-wrap policy to wrap "
                 "them (not a launcher option)")


def _bf16_load_warning(job: Job, out: _Out, how: str) -> None:
    """Trainers that load the model in bf16 (``how``): under plain DDP they keep no fp32 master
    copy (the plan counts one, states.master_weight_bytes, unless pure bf16); under DeepSpeed or
    FSDP a pure-bf16 plan still gets fp32 master copies."""
    cfg = job.cfg
    if job.precision != "bf16" or cfg.is_peft:
        return
    sharded = cfg.fsdp or cfg.zero_stage > 0 or cfg.offload != "none"
    if not sharded and not cfg.pure_16bit:
        out.warn(f"{how} loads the weights in bf16 and, without DeepSpeed or FSDP, keeps no fp32 "
                 "master copy (AdamW states in bf16): less memory than planned, bf16 updates")
    if sharded and cfg.pure_16bit:
        out.warn(f"pure bf16 under DeepSpeed/FSDP: {how} loads bf16 weights, but ZeRO and FSDP "
                 "keep fp32 master copies: more memory than planned")


def _trl_generation_batch(job: Job, out: _Out) -> int:
    """TRL GRPO's generation_batch_size: the plan's sequences per iteration (rollout_batch x
    samples per prompt), rounded up to a multiple of one micro-batch on every trainer rank and
    of the samples per prompt, as GRPOConfig.__post_init__ requires (trl 1.16.0,
    trl/trainer/grpo_config.py: "must be divisible by the global batch size", "... by
    num_generations"; at least 2 generations)."""
    c = job.cfg
    if c.samples_per_prompt < 2:
        out.refuse(f"GRPO with {c.samples_per_prompt} sample per prompt (TRL's GRPO needs 2 or "
                   "more: the advantage is relative to the group)", "re-plan with --rollout-n 2 "
                   "or more")
    want = c.rollout_batch * c.samples_per_prompt
    unit = math.lcm(c.micro_batch_size * trainer_gpus(c), c.samples_per_prompt)
    got = math.ceil(want / unit) * unit
    if got != want:
        out.warn(f"generation_batch_size {got}, not the plan's {want} sequences per iteration "
                 f"(TRL: a multiple of {unit}, micro-batch x ranks and samples per prompt)")
    return got
