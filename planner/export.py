"""Launch configs from a plan: DeepSpeed JSON, Accelerate YAML, torchrun, verl, OpenRLHF and
LLaMA-Factory (pure conversion: a plan or a saved ``planner plan --json`` in, text out).

``export_plan(plan, fmt)`` returns an ExportResult: the text, a file name to suggest, the
*warnings* (a plan setting the format can only approximate: it runs, but differs from the plan
in a stated way) and *notes* (what the launch still needs from the user: data paths, the
script that reads the flags). A setting the format cannot express at all is a one-line
PlannerError naming it and the format to use instead. Nothing the plan decides is dropped
silently: each TrainConfig field is either written, warned about, refused, or has no effect in
that format (the optimizer of a DeepSpeed JSON lives in the training script: a note says so).

Semantics followed (the flags each framework documents):
* DeepSpeed: train_batch_size = micro x accumulation x data-parallel ranks; ZeRO offload of the
  optimizer runs DeepSpeed's CPU Adam; bf16/fp16 sections; no FSDP.
* Accelerate: distributed_type NO/MULTI_GPU/DEEPSPEED/FSDP; FSDP CPU offload moves parameters,
  gradients and the optimizer step (there is no optimizer-only offload).
* verl (main_ppo, hybrid engine): ppo_mini_batch_size counts prompts and is multiplied by
  rollout.n, then divided over the GPUs; the micro-batch must divide the per-GPU mini-batch;
  the actor, reference and engine always share the GPUs (colocated); FSDP shards everything.
* OpenRLHF: --train_batch_size and --micro_train_batch_size count samples; colocation with the
  engines needs --colocate_all_models and engines x TP = actor GPUs; DeepSpeed only (no FSDP,
  no parameter offload flag, no 8-bit Adam).
* LLaMA-Factory: stages pt/sft/rm/dpo/ppo (no GRPO), gradient checkpointing on unless
  disable_gradient_checkpointing, data parallel only (no tensor/pipeline parallel).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from planner.errors import PlannerError, did_you_mean
from planner.request import PRECISIONS, TrainConfig, rollout_gpu_count, validate_config
from planner.specs import ModelSpec

FORMATS: tuple[str, ...] = (
    "deepspeed", "accelerate", "torchrun", "verl", "openrlhf", "llamafactory",
)
RL_HINT = "use --format verl or --format openrlhf for PPO/GRPO"
# HF module names of the planner's LoRA targets (Llama/Qwen/Mistral naming).
HF_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj",
              "up": "up_proj", "down": "down_proj"}
# LLaMA-Factory's shipped DeepSpeed configs (examples/deepspeed/), by (stage, offload).
LLAMAFACTORY_DS = {(0, "none"): "ds_z0_config.json", (2, "none"): "ds_z2_config.json",
                   (2, "optimizer"): "ds_z2_offload_config.json", (3, "none"): "ds_z3_config.json",
                   (3, "optimizer+params"): "ds_z3_offload_config.json"}
GRADIENT_CLIPPING = 1.0


@dataclass(frozen=True)
class ExportResult:
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

    @property
    def per_node(self) -> int:
        return math.ceil(self.num_gpus / self.num_hosts)

    @property
    def label(self) -> str:
        c = self.cfg
        method = f"{c.method} r{c.rank}" if c.is_peft else c.method
        return (f"{self.model} {c.workload} ({method}) on {self.num_gpus} x {self.gpu}, "
                f"{self.num_hosts} node(s)")


@dataclass
class _Out:
    """Warnings and notes of one export, and its refusals (one-line PlannerErrors)."""

    fmt: str
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)

    def note(self, msg: str) -> None:
        self.notes.append(msg)

    def refuse(self, what: str, hint: str) -> NoReturn:
        raise PlannerError(f"export {self.fmt}: cannot express {what}; {hint}")

    def result(self, text: str, filename: str) -> ExportResult:
        return ExportResult(self.fmt, text, filename, tuple(self.warnings), tuple(self.notes))


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------
def export_plan(plan: Any, fmt: str, *, model_path: str | None = None,
                catalog: Any = None) -> ExportResult:
    """Convert a Plan, PlanResult or `planner plan --json` document (or its "plan" member)
    into launch config text of format ``fmt`` (one of FORMATS).

    ``model_path`` is what the launch loads; by default the model's Hugging Face repo from
    ``catalog`` (the shipped one if None), else the catalog id."""
    key = check_format(fmt)
    job = job_of(plan, model_path=model_path, catalog=catalog)
    out = _Out(key)
    _common(job, out)
    return EXPORTERS[key](job, out)


def check_format(fmt: str) -> str:
    """The format name, lower-cased, or a one-line error with the known ones."""
    key = str(fmt).strip().lower()
    if key not in EXPORTERS:
        raise PlannerError(f"unknown export format {fmt!r}{did_you_mean(key, FORMATS)}; "
                           f"known: {', '.join(FORMATS)}")
    return key


def job_of(plan: Any, *, model_path: str | None = None, catalog: Any = None) -> Job:
    """The Job of a Plan, PlanResult or plan JSON document; bad documents are one-line errors."""
    from planner.result import Plan, PlanResult

    if isinstance(plan, PlanResult):
        if plan.plan is None:
            raise PlannerError(f"the plan result has no plan (status {plan.status}): "
                               "nothing to export")
        plan = plan.plan
    if isinstance(plan, Plan):
        from planner.render import plan_doc

        plan = plan_doc(PlanResult(status="optimal", plan=plan))["plan"]
    if not isinstance(plan, Mapping):
        raise PlannerError(f"cannot export a {type(plan).__name__}: give a Plan, a PlanResult "
                           "or a `planner plan --json` document")
    doc = plan
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
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = "".join(f".{p}" for p in err["loc"])
        raise PlannerError(f"plan config{loc} {err.get('input')!r}: {err['msg'].lower()}"
                           ) from None
    num_gpus, num_hosts = _positive(doc, "num_gpus"), _positive(doc, "num_hosts")
    if num_gpus != cfg.num_gpus:
        raise PlannerError(f"plan num_gpus {num_gpus} differs from its config's "
                           f"{cfg.num_gpus}: the document was edited inconsistently")
    memory, rl = _member(doc, "memory"), _member(doc, "rl")
    precision = memory.get("precision") or cfg.precision
    if precision not in PRECISIONS:
        raise PlannerError(f"plan memory.precision {precision!r} is not one of "
                           f"{', '.join(PRECISIONS)}")
    u = rl.get("gpu_memory_utilization", cfg.gpu_memory_utilization)
    if u is not None and (isinstance(u, bool) or not isinstance(u, int | float)
                          or not 0 < u < 1):
        raise PlannerError(f"plan rl.gpu_memory_utilization {u!r} must be a fraction in (0, 1)")
    phases = memory.get("phases_gib") or {}
    spec = _model_spec(str(doc["model"]), catalog)
    if spec is not None:  # a hand-edited document: the same structural checks as `check`
        validate_config(cfg, spec)
    return Job(
        model=str(doc["model"]),
        model_path=model_path or (spec.hf_repo if spec and spec.hf_repo else str(doc["model"])),
        gpu=str(doc["gpu"]), num_gpus=num_gpus, num_hosts=num_hosts, cfg=cfg,
        precision=precision,
        engine_utilization=None if u is None else float(u),
        reward_model=cfg.workload == "ppo" or any(str(k).startswith("reward") for k in phases),
    )


def _member(doc: Mapping, key: str) -> Mapping:
    value = doc.get(key) or {}
    if not isinstance(value, Mapping):
        raise PlannerError(f"plan {key} must be an object (got {type(value).__name__})")
    return value


def _positive(doc: Mapping, key: str) -> int:
    value = doc[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlannerError(f"plan {key} {value!r} must be a positive integer")
    return value


def _model_spec(model_id: str, catalog: Any) -> ModelSpec | None:
    """The plan's model in the catalog (the shipped one by default), None if not there."""
    from planner.catalog import load_catalog

    try:
        return (catalog or load_catalog()).model(model_id).spec
    except PlannerError:
        return None


def _common(job: Job, out: _Out) -> None:
    """Settings that no format expresses, and plan facts every launch needs."""
    cfg = job.cfg
    if cfg.optimizer_in_backward:
        out.refuse("optimizer-in-backward (the plan holds no full gradient)",
                   "re-plan without it")
    if not cfg.loss_in_fp32 and out.fmt != "verl":  # verl's log-probs stay in 16 bit
        out.warn("the plan assumed 16-bit loss buffers (no fp32 upcast of the logits); stock "
                 "Hugging Face models upcast: more memory than planned")
    if job.num_gpus % job.num_hosts:
        out.warn(f"{job.num_gpus} GPUs do not split evenly over {job.num_hosts} nodes: "
                 f"{job.per_node} per node, fewer on the last")


# ---------------------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------------------
def _need_data_parallel(job: Job, out: _Out, fmt_hint: str) -> None:
    c = job.cfg
    if c.tp > 1 or c.pp > 1 or c.cp > 1:
        out.refuse(f"tensor/pipeline/context parallel training (tp {c.tp}, pp {c.pp}, cp {c.cp})",
                   fmt_hint)


def _need_not_rl(job: Job, out: _Out) -> None:
    if job.cfg.is_rl:
        out.refuse(f"{job.cfg.workload} (rollout engines, actor/critic/reference roles)", RL_HINT)


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
    return [HF_MODULES[t] for t in cfg.lora_targets]


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


def _script(job: Job, fmt: str, command: str, *, env: tuple[str, ...] = (),
            comments: tuple[str, ...] = ()) -> str:
    head = ["#!/usr/bin/env bash", f"# planner export --format {fmt}: {job.label}"]
    head += [f"# {c}" for c in comments]
    if env:
        head.append(f"# Set before running: {', '.join(env)}")
    return "\n".join([*head, "set -euo pipefail", command]) + "\n"


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


# ---------------------------------------------------------------------------------------------
# DeepSpeed JSON
# ---------------------------------------------------------------------------------------------
def _deepspeed_dict(job: Job, out: _Out) -> dict[str, Any]:
    """The DeepSpeed config of a data-parallel (ZeRO) plan."""
    cfg = job.cfg
    zero: dict[str, Any] = {"stage": cfg.zero_stage, "overlap_comm": True,
                            "contiguous_gradients": True}
    if cfg.offload != "none":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if cfg.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    if cfg.zero_stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    doc: dict[str, Any] = {
        "train_batch_size": cfg.micro_batch_size * cfg.grad_accum * cfg.dp,
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "gradient_clipping": GRADIENT_CLIPPING,
        "bf16": {"enabled": job.precision in ("bf16", "fp8")},
        "fp16": {"enabled": job.precision == "fp16", "loss_scale": 0, "loss_scale_window": 1000,
                 "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
        "zero_optimization": zero,
    }
    if cfg.optimizer != "adamw":
        doc["zero_allow_untested_optimizer"] = True
    if cfg.offload != "none":
        # ZeRO-Offload steps on the CPU with DeepSpeed's CPU Adam; "auto" takes the script's
        # hyper-parameters (HF Trainer / Accelerate integration).
        doc["optimizer"] = {"type": "AdamW", "params": {
            "lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}}
        out.note("optimizer: DeepSpeed CPU AdamW for the offloaded step; its 'auto' values come "
                 "from the HF Trainer/Accelerate script (replace them for a plain "
                 "deepspeed.initialize)")
    return doc


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


def export_deepspeed(job: Job, out: _Out) -> ExportResult:
    cfg = job.cfg
    _need_not_rl(job, out)
    _offload_optimizer(job, out)
    if cfg.fsdp:
        out.refuse("FSDP (a PyTorch wrapper, not a DeepSpeed option)",
                   "use --format accelerate (distributed_type FSDP) or torchrun")
    if cfg.pure_bf16:
        out.refuse("pure bf16 (DeepSpeed's bf16 optimizer keeps fp32 master weights)",
                   "use --format llamafactory (pure_bf16) or re-plan without it")
    if cfg.tp > 1 or cfg.pp > 1 or cfg.cp > 1:
        out.warn(f"tp {cfg.tp}, pp {cfg.pp}, cp {cfg.cp} are not DeepSpeed JSON fields: set them "
                 f"in Megatron-DeepSpeed's arguments; train_batch_size counts the {cfg.dp} "
                 "data-parallel ranks")
    doc = _deepspeed_dict(job, out)
    _fp8(job, out)
    _precision_note(job, out)
    if cfg.checkpointing == "none":
        out.note("activation checkpointing: off (do not enable gradient checkpointing in the "
                 "script)")
    else:
        out.note(f"activation checkpointing ({cfg.checkpointing}): enable it in the training "
                 "script (HF: gradient_checkpointing=True); DeepSpeed's activation_checkpointing "
                 "section only drives deepspeed.checkpointing in Megatron-style models")
        _checkpointing_warning(job, out, "HF gradient checkpointing")
    if cfg.optimizer != "adamw" or cfg.offload == "none":
        out.note(f"optimizer {cfg.optimizer}: created by the training script (HF optim "
                 f"{_hf_optim(cfg, out)!r}), not by this file")
    attn = "flash attention" if cfg.flash_attention else "eager attention"
    method = f"{cfg.method} r{cfg.rank}" if cfg.is_peft else cfg.method
    out.note(f"set in the training script, not in this file: method {method}, sequence length "
             f"{cfg.seq_len}, {attn}"
             + (", chunked loss" if cfg.chunked_loss else "")
             + (", torch.compile" if cfg.compiled else "")
             + (", precomputed reference log-probs" if cfg.precompute_ref else ""))
    out.note(f"launch on {job.num_gpus} GPUs: deepspeed --num_nodes {job.num_hosts} "
             f"--num_gpus {job.per_node} <script> --deepspeed ds_config.json")
    stage = f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}_config.json"
    return out.result(json.dumps(doc, indent=2) + "\n", stage)


# ---------------------------------------------------------------------------------------------
# Hugging Face / TRL script arguments (torchrun and accelerate launches)
# ---------------------------------------------------------------------------------------------
TRL_SCRIPTS = {"sft": "sft.py", "pretrain": "sft.py", "dpo": "dpo.py",
               "rm": "reward_modeling.py"}


def _hf_script_args(job: Job, out: _Out, *, sharding: bool) -> tuple[str, list[list[str]]]:
    """TRL example script and its arguments (HfArgumentParser: TrainingArguments, TRL
    ModelConfig and the workload's config). ``sharding``: add --deepspeed/--fsdp."""
    cfg = job.cfg
    _offload_optimizer(job, out)
    if cfg.method == "freeze":
        out.refuse("method freeze (train only the last layers) in TRL scripts",
                   "use --format llamafactory (finetuning_type freeze)")
    if cfg.method == "qlora" and cfg.quant_format != "nf4":
        out.refuse(f"QLoRA on a {cfg.quant_format} base in TRL's --load_in_4bit (bitsandbytes NF4)",
                   "use --format llamafactory with a GPTQ checkpoint")
    if cfg.workload == "dpo" and not cfg.reference:
        out.refuse("reference-free DPO (--kl 0) in TRL's dpo.py",
                   "use --format llamafactory (pref_loss simpo)")
    pairs: list[tuple[str, Any]] = [
        ("--model_name_or_path", job.model_path),
        ("--dataset_name", "$DATASET"),
        ("--output_dir", "output"),
        ("--per_device_train_batch_size", cfg.micro_batch_size),
        ("--gradient_accumulation_steps", cfg.grad_accum),
        ("--max_length", cfg.seq_len),
        ("--gradient_checkpointing", str(cfg.checkpointing != "none")),
        ("--bf16", "True" if job.precision in ("bf16", "fp8") else None),
        ("--fp16", "True" if job.precision == "fp16" else None),
        ("--torch_dtype", "bfloat16" if cfg.pure_bf16 else None),
        ("--optim", _hf_optim(cfg, out)),
        ("--max_grad_norm", GRADIENT_CLIPPING),
        ("--attn_implementation", "flash_attention_2" if cfg.flash_attention else "eager"),
        ("--torch_compile", "True" if cfg.compiled else None),
        ("--use_liger_kernel", "True" if cfg.chunked_loss else None),
    ]
    if cfg.is_peft:
        targets = _lora_targets(cfg)
        pairs += [("--use_peft", "True"), ("--lora_r", cfg.rank), ("--lora_alpha", 2 * cfg.rank),
                  ("--lora_target_modules", targets or ["all-linear"]),
                  ("--use_dora", "True" if cfg.method == "dora" else None)]
        if cfg.method == "qlora":
            pairs += [("--load_in_4bit", "True"), ("--bnb_4bit_quant_type", "nf4"),
                      ("--use_bnb_nested_quant", "True")]
    if cfg.workload == "dpo":
        pairs += [("--beta", 0.1),
                  ("--precompute_ref_log_probs", "True" if cfg.precompute_ref else None)]
    if sharding:
        if cfg.fsdp:
            fsdp = "full_shard auto_wrap" + (" offload" if cfg.offload != "none" else "")
            pairs.append(("--fsdp", fsdp))
        elif cfg.zero_stage or cfg.offload != "none":
            pairs.append(("--deepspeed", f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}"
                                         "_config.json"))
    groups = _flags(pairs)
    _fp8(job, out)
    _checkpointing_warning(job, out, "gradient_checkpointing")
    if cfg.workload == "pretrain":
        out.note("pretrain: sft.py on a plain-text dataset (its 'text' column), no chat template")
    out.note(f"{TRL_SCRIPTS[cfg.workload]}: TRL's example script (github.com/huggingface/trl, "
             "trl/scripts or examples/scripts); any HF Trainer script with these arguments works")
    return TRL_SCRIPTS[cfg.workload], groups


def _fsdp_offload_warning(job: Job, out: _Out) -> None:
    if job.cfg.fsdp and job.cfg.offload == "optimizer":
        out.warn("FSDP CPU offload also moves the parameters and gradients (no optimizer-only "
                 "offload): less GPU memory, slower than planned")
    if job.cfg.shard_embeddings:
        out.warn("embedding/head as FSDP units of their own: set your auto-wrap policy to wrap "
                 "them (not a launcher option)")


# ---------------------------------------------------------------------------------------------
# torchrun
# ---------------------------------------------------------------------------------------------
def export_torchrun(job: Job, out: _Out) -> ExportResult:
    cfg = job.cfg
    _need_not_rl(job, out)
    megatron = cfg.tp * cfg.pp * cfg.cp > 1
    script, groups = (_megatron_args(job, out) if megatron
                      else _hf_script_args(job, out, sharding=True))
    if not megatron:
        _fsdp_offload_warning(job, out)
        if cfg.zero_stage or (cfg.offload != "none" and not cfg.fsdp):
            out.note(f"write the DeepSpeed config: planner export --format deepspeed --out "
                     f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}_config.json PLAN.json")
    _precision_note(job, out)
    head = ["torchrun", "--nnodes", str(job.num_hosts), "--nproc_per_node", str(job.per_node),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", "${MASTER_ADDR:-localhost}:29500",
            "--rdzv_id", "planner"]
    comments = ("Run on every node (MASTER_ADDR = the first node's address).",) \
        if job.num_hosts > 1 else ()
    env = ("DATASET",) if not megatron else ("DATA_PATH", "TOKENIZER")
    text = _script(job, "torchrun", _command(head, [[script], *groups]), env=env,
                   comments=comments)
    return out.result(text, "launch_torchrun.sh")


def _megatron_args(job: Job, out: _Out) -> tuple[str, list[list[str]]]:
    """Megatron-LM pretrain_gpt.py arguments of a tensor/pipeline-parallel plan."""
    cfg = job.cfg
    hint = "re-plan with --tp 1 --pp 1 for a DeepSpeed/FSDP launch"
    if cfg.workload not in ("pretrain", "sft"):
        out.refuse(f"{cfg.workload} with tp {cfg.tp}/pp {cfg.pp} (Megatron-LM trains "
                   "language models only)", hint)
    if cfg.method != "full":
        out.refuse(f"method {cfg.method} in Megatron-LM (full fine-tuning only)",
                   "use NeMo's PEFT recipes, or " + hint)
    if cfg.fsdp or cfg.zero_stage > 1:
        out.refuse(f"{'FSDP' if cfg.fsdp else f'ZeRO-{cfg.zero_stage}'} with tensor/pipeline "
                   "parallel (Megatron's distributed optimizer shards optimizer states only)",
                   hint)
    if cfg.offload != "none":
        out.refuse(f"offload {cfg.offload} with tensor/pipeline parallel", hint)
    if cfg.optimizer not in ("adamw", "sgd", "sgd-momentum"):
        out.refuse(f"optimizer {cfg.optimizer} in Megatron-LM (adam or sgd)", hint)
    recompute = {"none": [], "selective": [["--recompute-granularity", "selective"]],
                 "full": [["--recompute-granularity", "full"], ["--recompute-method", "uniform"],
                          ["--recompute-num-layers", "1"]]}[cfg.checkpointing]
    groups = _flags([
        ("--tensor-model-parallel-size", cfg.tp),
        ("--pipeline-model-parallel-size", cfg.pp),
        ("--context-parallel-size", cfg.cp if cfg.cp > 1 else None),
        ("--sequence-parallel", cfg.tp > 1),
        ("--micro-batch-size", cfg.micro_batch_size),
        ("--global-batch-size", cfg.global_batch_size),
        ("--seq-length", cfg.seq_len),
        ("--bf16", job.precision in ("bf16", "fp8")),
        ("--fp16", job.precision == "fp16"),
        ("--fp8-format", "hybrid" if job.precision == "fp8" else None),
        ("--use-distributed-optimizer", cfg.zero_stage == 1),
        ("--use-flash-attn", cfg.flash_attention),
        ("--optimizer", "adam" if cfg.optimizer == "adamw" else "sgd"),
        ("--sgd-momentum", 0.9 if cfg.optimizer == "sgd-momentum" else None),
        ("--clip-grad", GRADIENT_CLIPPING),
        ("--data-path", "$DATA_PATH"),
        ("--tokenizer-type", "HuggingFaceTokenizer"),
        ("--tokenizer-model", "$TOKENIZER"),
    ]) + recompute
    if cfg.workload == "sft":
        out.warn("sft with tp/pp: Megatron-LM's pretrain_gpt.py trains on packed token data; "
                 "prepare the SFT set as such (or use NeMo's fine-tuning recipe with the same "
                 "parallel sizes)")
    out.note(f"Megatron-LM: add {job.model}'s architecture flags (--num-layers, --hidden-size, "
             "--num-attention-heads, --group-query-attention, --ffn-hidden-size, "
             "--max-position-embeddings, ...) and --load for a checkpoint in Megatron format")
    return "pretrain_gpt.py", groups


# ---------------------------------------------------------------------------------------------
# Accelerate
# ---------------------------------------------------------------------------------------------
def export_accelerate(job: Job, out: _Out) -> ExportResult:
    cfg = job.cfg
    _need_not_rl(job, out)
    _need_data_parallel(job, out, "use --format torchrun (Megatron-LM arguments)")
    doc: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    if cfg.fsdp:
        doc["distributed_type"] = "FSDP"
        doc["fsdp_config"] = {
            "fsdp_sharding_strategy": "FULL_SHARD",
            "fsdp_offload_params": cfg.offload != "none",
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": True,
            "fsdp_activation_checkpointing": cfg.checkpointing != "none",
        }
        _fsdp_offload_warning(job, out)
        _checkpointing_warning(job, out, "fsdp_activation_checkpointing")
    elif cfg.zero_stage or cfg.offload != "none":
        doc["distributed_type"] = "DEEPSPEED"
        doc["deepspeed_config"] = {
            "zero_stage": cfg.zero_stage,
            "offload_optimizer_device": "cpu" if cfg.offload != "none" else "none",
            "offload_param_device": "cpu" if cfg.offload == "optimizer+params" else "none",
            "gradient_accumulation_steps": cfg.grad_accum,
            "gradient_clipping": GRADIENT_CLIPPING,
            "zero3_init_flag": cfg.zero_stage == 3,
            "zero3_save_16bit_model": cfg.zero_stage == 3,
        }
    else:
        doc["distributed_type"] = "MULTI_GPU" if job.num_gpus > 1 else "NO"
    if cfg.pure_bf16:
        out.warn("pure bf16 is not an Accelerate setting: the script loads the model in bf16 "
                 "(--torch_dtype bfloat16 below)")
    mixed = {"bf16": "bf16", "fp16": "fp16", "fp32": "no", "fp8": "fp8"}[job.precision]
    doc.update({
        "machine_rank": 0,
        "main_training_function": "main",
        "mixed_precision": mixed,
        "num_machines": job.num_hosts,
        "num_processes": job.num_gpus,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    })
    if job.num_hosts > 1:
        doc.update({"main_process_ip": "FIRST_NODE_IP", "main_process_port": 29500})
        out.note("multi-node: set main_process_ip to the first node's address and "
                 "machine_rank to 0..num_machines-1 on each node")
    _precision_note(job, out)
    script, groups = _hf_script_args(job, out, sharding=False)
    if cfg.checkpointing != "none" and cfg.fsdp:
        groups = [g for g in groups if g[0] != "--gradient_checkpointing"]
        groups.append(["--gradient_checkpointing", "False"])
        out.note("FSDP recomputes through fsdp_activation_checkpointing, so the script's "
                 "gradient_checkpointing is False")
    launch = _command(["accelerate", "launch", "--config_file", "accelerate_config.yaml", script],
                      groups)
    header = [f"# planner export --format accelerate: {job.label}",
              f"# micro-batch {cfg.micro_batch_size} x accumulation {cfg.grad_accum} x dp "
              f"{cfg.dp} = {cfg.global_batch_size}, seq_len {cfg.seq_len}: the script's "
              "arguments below carry them", "# launch (DATASET set):"]
    header += ["#   " + line for line in launch.split("\n")]
    text = "\n".join(header) + "\n" + yaml.safe_dump(doc, sort_keys=False)
    return out.result(text, "accelerate_config.yaml")


# ---------------------------------------------------------------------------------------------
# verl
# ---------------------------------------------------------------------------------------------
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
    cfg = job.cfg
    if not cfg.is_rl:
        out.refuse(f"{cfg.workload} (verl's main_ppo trains PPO/GRPO)",
                   "use --format deepspeed, accelerate, torchrun or llamafactory")
    if cfg.placement == "separate":
        out.refuse("separate rollout GPUs (verl's hybrid engine colocates actor, reference and "
                   "engine)", "use --format openrlhf, or re-plan with --placement colocate")
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
    a, r, m = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.model"
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
        o += [(f"{m}.lora_alpha", 2 * cfg.rank),
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
    o += [
        ("actor_rollout_ref.ref.fsdp_config.param_offload", idle),
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
    o += _verl_precision(job, out)
    if cfg.workload == "ppo":
        o += _verl_critic(job)
    o += [("algorithm.use_kl_in_reward", cfg.workload == "ppo" and cfg.reference)]
    if job.reward_model:
        o += [("reward_model.enable", True), ("reward_model.model.path", "$REWARD_MODEL"),
              ("reward_model.micro_batch_size_per_gpu", cfg.logprob_batch),
              ("reward_model.model.fsdp_config.param_offload", idle)]
    o += [("trainer.n_gpus_per_node", job.per_node), ("trainer.nnodes", job.num_hosts)]
    _verl_warnings(job, out)
    env = ["TRAIN_FILES", "VAL_FILES"] + (["REWARD_MODEL"] if job.reward_model else [])
    groups = [[f"{k}={_hydra(v)}"] for k, v in o]
    comments = ("Multi-node: start a Ray cluster over the nodes first; run this on the head.",) \
        if job.num_hosts > 1 else ()
    text = _script(job, "verl", _command(["python3", "-m", "verl.trainer.main_ppo"], groups),
                   env=tuple(env), comments=comments)
    return out.result(text, "run_verl.sh")


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
        ("critic.model.fsdp_config.param_offload", idle),
        ("critic.model.fsdp_config.optimizer_offload", idle),
        ("critic.model.lora_rank", cfg.rank if cfg.is_peft else 0),
    ]
    if cfg.offload != "none":
        o += [("critic.strategy", "fsdp2"), ("critic.model.fsdp_config.offload_policy", True)]
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
    if cfg.workload == "grpo" and not job.reward_model:
        out.note("GRPO reward: a rule-based reward function (custom_reward_function.path), no "
                 "reward model")
    if cfg.pure_bf16 or cfg.paged_optimizer or cfg.compiled or cfg.chunked_loss:
        out.warn("pure_bf16/paged optimizer/torch.compile/chunked loss are not verl options "
                 "(verl's own fused kernels and torch.compile defaults apply)")


# ---------------------------------------------------------------------------------------------
# OpenRLHF
# ---------------------------------------------------------------------------------------------
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
        out.refuse(f"fp16 mixed precision on {job.gpu} (OpenRLHF trains in bf16 or fp32)",
                   "use --format verl or a GPU with bf16")
    if cfg.pure_bf16:
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
        flags += [("--lora_rank", cfg.rank), ("--lora_alpha", 2 * cfg.rank),
                  ("--target_modules", targets or ["all-linear"]),
                  ("--load_in_4bit", cfg.method == "qlora")]
        if cfg.method == "dora":
            out.warn("OpenRLHF has no DoRA: plain LoRA of the same rank (less memory and time)")
    if cfg.compiled or cfg.paged_optimizer:
        out.warn("torch.compile/paged optimizer are not OpenRLHF flags: left out")
    if cfg.flash_attention:
        out.note("--flash_attn: OpenRLHF <= 0.8; newer versions take --attn_implementation "
                 "flash_attention_2")
    return flags


def export_openrlhf(job: Job, out: _Out) -> ExportResult:
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
    groups = _flags(common + flags)
    text = _script(job, "openrlhf", _command(head, groups), env=env, comments=comments)
    return out.result(text, "run_openrlhf.sh")


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


def _openrlhf_rl(job: Job, out: _Out) -> tuple[list[tuple[str, Any]], tuple[str, ...],
                                                tuple[str, ...]]:
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
    else:
        if ppo:
            out.refuse("PPO with separate rollout GPUs (OpenRLHF puts actor+reference and "
                       "critic+reward on different GPUs unless --colocate_all_models, which "
                       "also takes the engines)", "re-plan with --placement colocate")
        if cfg.offload_idle:
            out.refuse("offload of idle states with separate rollout GPUs (DeepSpeed sleep "
                       "needs --colocate_all_models)", "re-plan with --no-offload-idle")
        if job.reward_model:
            out.refuse("a reward model with separate rollout GPUs (OpenRLHF gives it GPUs of "
                       "its own unless --colocate_all_models)", "re-plan with --placement "
                       "colocate")
        engine_gpus = rollout_gpu_count(cfg)
        trainer = job.num_gpus - engine_gpus
        engines = engine_gpus // tp
        place = [("--colocate_actor_ref", cfg.reference)]
    nodes, per_node = _nodes(job, trainer)
    if nodes * per_node != trainer:
        out.refuse(f"{trainer} trainer GPUs on {nodes} nodes (OpenRLHF needs the same GPUs per "
                   "node)", "re-plan with another GPU count")
    roles = ["actor"] + (["ref"] if cfg.reference else []) + (["critic"] if ppo else []) + \
        (["reward"] if job.reward_model else [])
    res: list[tuple[str, Any]] = []
    for role in roles:
        res += [(f"--{role}_num_nodes", nodes), (f"--{role}_num_gpus_per_node", per_node)]
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
        out.note("GRPO reward: a rule-based reward function file or server (--remote_rm_url)")
    comments = ("Start a Ray cluster over the nodes first (ray start --head ...).",)
    return flags, tuple(env), comments


# ---------------------------------------------------------------------------------------------
# LLaMA-Factory
# ---------------------------------------------------------------------------------------------
LLAMAFACTORY_STAGES = {"pretrain": "pt", "sft": "sft", "rm": "rm", "dpo": "dpo", "ppo": "ppo"}
LLAMAFACTORY_DATA = {"pt": "c4_demo", "sft": "alpaca_en_demo", "rm": "dpo_en_demo",
                     "dpo": "dpo_en_demo", "ppo": "alpaca_en_demo"}
TEMPLATES = (("qwen", "qwen"), ("llama-3", "llama3"), ("llama-2", "llama2"),
             ("mistral", "mistral"), ("mixtral", "mistral"), ("gemma", "gemma"),
             ("deepseek", "deepseek3"))


def export_llamafactory(job: Job, out: _Out) -> ExportResult:
    cfg = job.cfg
    if cfg.workload == "grpo":
        out.refuse("GRPO (LLaMA-Factory stages: pt, sft, rm, dpo, ppo, kto)", RL_HINT)
    _need_data_parallel(job, out, "LLaMA-Factory trains data parallel only; use --format "
                                  "torchrun (Megatron-LM arguments)")
    _offload_optimizer(job, out)
    stage = LLAMAFACTORY_STAGES[cfg.workload]
    model: dict[str, Any] = {"model_name_or_path": job.model_path, "trust_remote_code": True}
    method: dict[str, Any] = {"stage": stage, "do_train": True,
                              "finetuning_type": "lora" if cfg.is_peft else cfg.method}
    if cfg.is_peft:
        targets = _lora_targets(cfg)
        method.update({"lora_rank": cfg.rank, "lora_alpha": 2 * cfg.rank,
                       "lora_target": "all" if targets is None else ",".join(targets)})
        if cfg.method == "dora":
            method["use_dora"] = True
        if cfg.method == "qlora":
            if cfg.quant_format == "nf4":
                model.update({"quantization_bit": 4, "quantization_method": "bnb",
                              "quantization_type": "nf4", "double_quantization": True})
            else:
                out.note("QLoRA on GPTQ: point model_name_or_path at a 4-bit GPTQ checkpoint "
                         "(LLaMA-Factory reads its quantization config)")
    if cfg.method == "freeze":
        method.update({"freeze_trainable_layers": cfg.freeze_trainable_layers,
                       "freeze_trainable_modules": "all"})
    if cfg.workload == "dpo":
        method.update(_llamafactory_dpo(job, out))
    ds = _llamafactory_deepspeed(job, out)
    if ds:
        method["deepspeed"] = ds
    dataset: dict[str, Any] = {"dataset": LLAMAFACTORY_DATA[stage], "template": _template(job),
                               "cutoff_len": cfg.prompt_len if cfg.is_rl else cfg.seq_len}
    output = {"output_dir": f"saves/{job.model}/{method['finetuning_type']}/{stage}"}
    train: dict[str, Any] = {
        "per_device_train_batch_size": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "max_grad_norm": GRADIENT_CLIPPING,
        "optim": _hf_optim(cfg, out),
        "disable_gradient_checkpointing": cfg.checkpointing == "none",
        "flash_attn": "fa2" if cfg.flash_attention else "disabled",
    }
    train.update(_llamafactory_precision(job, out))
    if cfg.chunked_loss:
        train["enable_liger_kernel"] = True
    if cfg.compiled:
        train["torch_compile"] = True
    if cfg.workload == "ppo":
        train.update(_llamafactory_ppo(job, out))
    _checkpointing_warning(job, out, "gradient checkpointing (LLaMA-Factory's default)")
    if cfg.fsdp:
        _fsdp_offload_warning(job, out)
        out.note("FSDP is not a LLaMA-Factory YAML key: launch with Accelerate, its config from "
                 "planner export --format accelerate --out accelerate_config.yaml PLAN.json")
    _precision_note(job, out)
    sections = (("model", model), ("method", method), ("dataset", dataset),
                ("output", output), ("train", train))
    launch = (f"FORCE_TORCHRUN=1 NNODES={job.num_hosts} NPROC_PER_NODE={job.per_node}"
              + (" NODE_RANK=<0..n-1> MASTER_ADDR=<first node> MASTER_PORT=29500"
                 if job.num_hosts > 1 else "") + " llamafactory-cli train llamafactory.yaml")
    if cfg.fsdp:
        launch = ("accelerate launch --config_file accelerate_config.yaml src/train.py "
                  "llamafactory.yaml")
    lines = [f"# planner export --format llamafactory: {job.label}",
             f"# micro-batch {cfg.micro_batch_size} x accumulation {cfg.grad_accum} x dp "
             f"{cfg.dp} = {cfg.global_batch_size}", f"# launch: {launch}"]
    for name, section in sections:
        lines += ["", f"### {name}", yaml.safe_dump(section, sort_keys=False).rstrip()]
    return out.result("\n".join(lines) + "\n", "llamafactory.yaml")


def _template(job: Job) -> str:
    return next((t for prefix, t in TEMPLATES if job.model.startswith(prefix)), "default")


def _llamafactory_dpo(job: Job, out: _Out) -> dict[str, Any]:
    cfg = job.cfg
    if not cfg.reference:
        out.warn("reference-free preference training: pref_loss simpo (SimPO) stands in for "
                 "DPO without a reference")
        return {"pref_beta": 2.0, "pref_loss": "simpo"}
    if cfg.precompute_ref and not cfg.is_peft:
        out.refuse("precomputed reference log-probs (LLaMA-Factory keeps the full reference "
                   "model in GPU memory)", "re-plan without --precompute-ref, or use --format "
                   "torchrun (TRL --precompute_ref_log_probs)")
    return {"pref_beta": 0.1, "pref_loss": "sigmoid"}


def _llamafactory_deepspeed(job: Job, out: _Out) -> str | None:
    cfg = job.cfg
    if cfg.fsdp or (cfg.zero_stage == 0 and cfg.offload == "none"):
        return None
    shipped = LLAMAFACTORY_DS.get((cfg.zero_stage, cfg.offload))
    if shipped:
        return f"examples/deepspeed/{shipped}"
    name = f"ds_z{cfg.zero_stage}{_ds_offload_name(cfg)}_config.json"
    out.note(f"LLaMA-Factory ships no ZeRO-{cfg.zero_stage} config with offload "
             f"{cfg.offload}: write {name} with planner export --format deepspeed --out {name} "
             "PLAN.json")
    return name


def _llamafactory_precision(job: Job, out: _Out) -> dict[str, Any]:
    if job.cfg.pure_bf16:
        return {"pure_bf16": True}
    _fp8(job, out)
    return {"bf16": job.precision in ("bf16", "fp8"), "fp16": job.precision == "fp16"}


def _llamafactory_ppo(job: Job, out: _Out) -> dict[str, Any]:
    cfg = job.cfg
    if cfg.placement == "separate":
        out.refuse("separate rollout GPUs (LLaMA-Factory's PPO generates with the policy on "
                   "the training GPUs)", "use --format openrlhf")
    if cfg.samples_per_prompt > 1:
        out.refuse(f"{cfg.samples_per_prompt} samples per prompt (LLaMA-Factory's PPO samples "
                   "one)", "use --format verl or openrlhf")
    out.warn("LLaMA-Factory's PPO generates with the policy (HF generate, no vLLM engine): "
             f"rollout TP {cfg.rollout_tp}, the engine memory fraction and engine sleep do not "
             "apply; its value head shares the policy (no separate critic)")
    if cfg.offload_idle:
        out.refuse("offload of idle roles (LLaMA-Factory's PPO keeps every role on the GPUs)",
                   "re-plan with --no-offload-idle, or use --format verl")
    if cfg.mean_seq_len:
        out.refuse(f"padding-free passes (mean {cfg.mean_seq_len} tokens per sequence)",
                   "use --format verl or openrlhf")
    if cfg.rollout_batch != cfg.global_batch_size:
        out.warn(f"LLaMA-Factory's PPO collects one optimizer batch ({cfg.global_batch_size} "
                 f"prompts) per update, not the plan's {cfg.rollout_batch}")
    out.note("PPO: set reward_model to a trained reward model (LLaMA-Factory stage rm)")
    return {"reward_model": "saves/reward_model", "reward_model_type":
            "lora" if cfg.is_peft else "full", "max_new_tokens": cfg.response_len,
            "ppo_score_norm": False}


EXPORTERS: dict[str, Callable[[Job, _Out], ExportResult]] = {
    "deepspeed": export_deepspeed,
    "accelerate": export_accelerate,
    "torchrun": export_torchrun,
    "verl": export_verl,
    "openrlhf": export_openrlhf,
    "llamafactory": export_llamafactory,
}
