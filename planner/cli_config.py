"""The command line's options as a TrainConfig or PlanRequest (flag spellings in the errors),
and the options `tune` takes besides check's."""

from __future__ import annotations

import click

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import (
    CHECKPOINTINGS,
    TrainConfig,
)
from planner.catalog.role_gpus import parse_role_gpus
from planner.cli_options import (
    CONFIG_FLAGS,
    FLOAT,
    INT,
    _choice,
    _fixed_of,
    config_field,
)
from planner.errors import PlannerError
from planner.inputs import (
    FieldErrors,
    capped,
    short,
)

# Flags whose default means "as the framework does" (its profile's memory semantics): when
# the user does not give them, TrainConfig leaves the field to the profile (frameworks.apply).
SEMANTIC_FLAGS = ("pure_bf16", "fused_optimizer", "chunked_loss", "no_flash_attention",
                  "lora_dropout", "checkpointing", "lora_targets")


def _config(opts: dict[str, object]) -> TrainConfig:
    ctx = click.get_current_context(silent=True)
    for name in SEMANTIC_FLAGS:
        if ctx is not None and name in opts and \
                ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT:
            del opts[name]
    if opts.get("lora_rank") is None:
        opts.pop("lora_rank", None)  # the framework's (frameworks.apply)
    fields = dict(config_field(n, opts.pop(n)) for n in CONFIG_FLAGS if n in opts)
    data = {("micro_batch_size" if k == "micro_batch" else k): v for k, v in opts.items()}
    data.update(fields)
    kl = data.pop("kl", None)
    if kl is not None:
        _check_kl(kl, str(data.get("workload")))
        data["reference"] = kl > 0
    data["engine_sleep"] = not data.pop("no_engine_sleep", False)
    if data.get("rollout_engine") is None:
        data.pop("rollout_engine", None)  # the framework's default (frameworks.apply)
    role_gpus = data.pop("role_gpus", None)
    if role_gpus is not None:
        data["role_gpus"] = parse_role_gpus(str(role_gpus))
    seq_len_given = data.get("seq_len") is not None
    if not seq_len_given:
        prompt, response = data.get("prompt_len"), data.get("response_len")
        data["seq_len"] = prompt + response if prompt and response else 2048
    try:
        return TrainConfig.model_validate(data)
    except FieldErrors as exc:
        raise _flag_error(exc, seq_len_given=seq_len_given) from None


def _check_kl(kl: float, workload: str) -> None:
    """--kl weighs a reference model: DPO, PPO and GRPO have one; other workloads reject it."""
    if kl < 0:
        raise PlannerError(f"--kl {kl} must be >= 0 (0 drops the reference model)")
    if workload not in ("dpo", "ppo", "grpo"):
        raise PlannerError(f"--kl {kl} applies to --workload dpo, ppo or grpo (got {workload})")


# `tune` takes check's options that describe the job (model, GPUs, layout, method, workload),
# minus the batch settings it searches (own options below, None = searched) and the cost ones.
_TUNE_SEARCHED = {"checkpointing", "micro_batch", "grad_accum", "rollout_batch", "rollout_n",
                  "logprob_micro_batch"}


_TUNE_FROM_CHECK = {"model", "gpu", "memory_margin", "confidence", "stack", "platform",
                    "critic_model", "reward_model", "catalogs", "as_json",
                    "no_flash_attention", "kl",
                    "no_engine_sleep"}


TUNE_OPTIONS = [
    click.Option(["--objective"], type=_choice(("throughput", "memory")), default="throughput",
                 show_default=True,
                 help="Maximise tokens/s, or fill per-GPU memory up to --memory-target."),
    click.Option(["--memory-target"], type=FLOAT, default=None,
                 help="Fraction of GPU memory not to exceed, e.g. 0.875 [default: 1 - margin]."),
    click.Option(["--checkpointing"], type=_choice(("auto", *CHECKPOINTINGS)), default="auto",
                 show_default=True, help="Pin activation checkpointing, or search it (auto)."),
    click.Option(["--micro-batch"], type=INT, default=None, help="Pin the micro-batch."),
    click.Option(["--grad-accum"], type=INT, default=None, help="Pin gradient accumulation."),
    click.Option(["--global-batch"], type=INT, default=None,
                 help="Pin the global batch [RL default: all rollout sequences]."),
    click.Option(["--rollout-batch"], type=INT, default=None, help="Pin prompts per RL iteration."),
    click.Option(["--rollout-n"], type=INT, default=None,
                 help="Pin responses per prompt [searched for GRPO; PPO 1]."),
    click.Option(["--logprob-micro-batch"], type=INT, default=None,
                 help="Pin sequences per forward-only micro-step."),
    click.Option(["--tie-tolerance"], type=FLOAT, default=0.01, show_default=True,
                 help="Relative gap under which settings tie (then larger micro-batches win)."),
    click.Option(["--require", "requires"], multiple=True, metavar="EXPR",
                 help="A rule every candidate keeps, over micro_batch, grad_accum, "
                      "global_batch, rollout_batch, rollout_n, logprob_micro_batch, num_gpus, "
                      "dp: e.g. 'rollout_n % micro_batch == 0' (repeatable)."),
]


def _model_file(opts: dict[str, object]) -> list[str]:
    """The --model argument when it names a file (config.json): an input outputs must spare."""
    model = str(opts.get("model") or "")
    return [model] if model.endswith(".json") else []


# TrainConfig / PlanRequest fields whose option is spelled otherwise.
_FLAG_OF = {"budget_usd": "budget", "time_limit_s": "time-limit", "micro_batch_size": "micro-batch",
            "global_batch_size": "global-batch", "zero_stage": "zero"}


def _flag_error(exc: FieldErrors, *, seq_len_given: bool) -> PlannerError:
    """A request's field errors as one line naming the flags the user gave, all of them up to
    inputs.MAX_ERRORS (an RL sequence length the user did not give is --prompt-len +
    --response-len)."""
    problems = []
    for err in exc.errors:
        field = str(err["loc"][0]) if err["loc"] else "request"
        name = "--" + _FLAG_OF.get(field, field).replace("_", "-")
        if field == "seq_len" and not seq_len_given:
            name = "--prompt-len + --response-len"
        problems.append(f"{name} {short(err.get('input'))}: {err['msg'].lower()}")
    return PlannerError(capped(problems))


def _plan_request(catalogs: tuple[str, ...], gpus: str | None, opts: dict[str, object]
                  ) -> tuple[PlanRequest, object]:
    fixed = _fixed_of(opts)
    data = {k: v for k, v in opts.items() if v is not None}
    if fixed:
        data["fixed"] = fixed
    kl = data.pop("kl", None)
    if kl is not None:
        _check_kl(kl, str(data.get("workload")))
        data["reference"] = kl > 0
    if gpus:
        data["gpus"] = tuple(g.strip() for g in gpus.split(",") if g.strip())
    try:
        request = PlanRequest.model_validate(data)
    except FieldErrors as exc:
        raise _flag_error(exc, seq_len_given="seq_len" in data) from None
    catalog = load_catalog(catalogs)
    for g in request.gpus:
        catalog.gpu(g)
    return request, catalog
