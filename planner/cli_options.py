"""The command line's parameter types and shared option lists: whole numbers and finite floats
with one-line errors, the workload, configuration and plan options that several commands take
(one list each), and the flags a plan fixes (PlanRequest.fixed)."""

from __future__ import annotations

import math

import click

from planner.catalog.request import (
    CHECKPOINTINGS,
    LORA_TARGETS,
    METHODS,
    OFFLOADS,
    OPTIMIZERS,
    PLACEMENTS,
    PRECISIONS,
    ROLLOUT_ENGINES,
    WORKLOADS,
)
from planner.errors import PlannerError
from planner.inputs import (
    MAX_COUNT,
    MAX_FLOAT,
    short,
)
from planner.models.bands import DEFAULT_CONFIDENCE
from planner.models.efficiency import STACKS

# The CLI plans against the memory band's upper edge at --confidence (issue 18 item 4): no
# fixed margin on top by default (the library keeps its 5 % / 2 % margins at confidence 0).
CLI_MEMORY_MARGIN = 0.0


MARGIN_HELP = ("Fraction of GPU memory kept free, on top of the memory band's upper edge at "
               "--confidence: usable = capacity x (1 - margin) / headroom.")


MEAN_RESPONSE_HELP = ("RL: mean tokens a response runs to (generation stops at end-of-sequence; "
                      "--response-len is the longest, decoded alone at the end) [default: "
                      "every response at --response-len].")
CONFIDENCE_HELP = ("Plan against the upper edge of the memory band at this confidence: "
                   "'fits' means the measured peak of jobs like it stayed within the GPU in "
                   "this share of leave-one-source-out cases; 0: point estimates.")


CATALOG_OPTION = click.option(
    "--catalog", "catalogs", multiple=True, type=click.Path(file_okay=False),
    help="Overlay folder with gpus/, models/, platforms/ YAML (repeatable; same id replaces).",
)


JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")


def _choice(values: tuple[str, ...]) -> click.Choice:
    return click.Choice(values, case_sensitive=False)


class Count(click.ParamType):
    """An integer option: ASCII digits, at most MAX_COUNT in magnitude (exit 2 naming the
    option otherwise; int() alone takes superscripts and 400-digit numbers)."""

    name = "integer"

    def convert(self, value, param, ctx):
        """The value as an int of at most MAX_COUNT in magnitude; a usage error otherwise."""
        if isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
        else:
            text = str(value).strip()
        digits = text[1:] if text[:1] in "+-" else text
        if not (digits.isascii() and digits.isdigit()):
            self.fail(f"{short(value)} is not an integer", param, ctx)
        if len(digits) > 10 or abs(int(text)) > MAX_COUNT:
            self.fail(f"{short(value)} is beyond {MAX_COUNT:,}", param, ctx)
        return int(text)


INT = Count()


class FiniteFloat(click.ParamType):
    """A number option: nan and inf are bad input (exit 2 naming the option), as is a value
    below ``min_value`` or beyond MAX_FLOAT in magnitude."""

    name = "float"

    def __init__(self, min_value: float | None = None) -> None:
        self.min_value = min_value

    def convert(self, value, param, ctx):
        """The value as a finite float within the option's bounds; a usage error otherwise."""
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{short(value)} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{short(value)} is not a finite number", param, ctx)
        if abs(x) > MAX_FLOAT:
            self.fail(f"{short(value)} is beyond {MAX_FLOAT:g}", param, ctx)
        if self.min_value is not None and x < self.min_value:
            self.fail(f"{value!r} must be >= {self.min_value:g}", param, ctx)
        return x


FLOAT = FiniteFloat()


class LoraRank(click.ParamType):
    """A positive adapter rank, or ``auto`` (the planner chooses)."""

    name = "rank|auto"

    def convert(self, value, param, ctx):
        """The value as a positive int or "auto"; a click usage error otherwise."""
        if isinstance(value, int) or str(value).lower() == "auto":
            return value if isinstance(value, int) else "auto"
        rank = INT.convert(value, param, ctx)
        if rank <= 0:
            self.fail(f"{value!r} is not a positive integer or auto", param, ctx)
        return rank


LORA_RANK = LoraRank()


# Options of the preference and RL workloads (TrainConfig fields; see workloads.py).
WORKLOAD_OPTIONS = [
    click.option("--critic-model", default=None,
                 help="PPO critic (value) model [default: the policy's architecture]."),
    click.option("--reward-model", default=None,
                 help="Reward model [PPO default: the policy's architecture; GRPO: none]."),
    click.option("--reward-function", is_flag=True,
                 help="PPO: a function scores the responses (rule, verifier, remote service): "
                      "no reward model."),
    click.option("--prompt-len", type=INT, default=None, help="RL prompt tokens."),
    click.option("--response-len", type=INT, default=None, help="RL response tokens."),
    click.option("--rollout-n", type=INT, default=None,
                 help="Responses per prompt [default: GRPO 5, PPO 1]."),
    click.option("--rollout-batch", type=INT, default=256, show_default=True,
                 help="Prompts per RL iteration."),
    click.option("--rollout-tp", type=INT, default=1, show_default=True,
                 help="Tensor parallel size of each rollout engine."),
    click.option("--gpu-memory-utilization", type=FLOAT, default=None,
                 help="vLLM fraction of total memory for the engine [default: what it needs]."),
    click.option("--logprob-micro-batch", type=INT, default=None,
                 help="Sequences per forward-only micro-step [default: --micro-batch]."),
    click.option("--rollout-engine", type=_choice(ROLLOUT_ENGINES), default=None,
                 help="RL: what generates: a vLLM-style engine, or the trainer's own model "
                      "(hf-generate) [default: the framework's]."),
    click.option("--generate-micro-batch", type=INT, default=None,
                 help="hf-generate: sequences per generate call on a GPU [default: its whole "
                      "share]."),
    click.option("--kl", type=FLOAT, default=None,
                 help="KL coefficient; 0 drops the reference model."),
    click.option("--mean-seq-len", type=INT, default=None,
                 help="RL: mean real tokens per sequence of padding-free trainer passes."),
    click.option("--mean-response-len", type=INT, default=None,
                 help=MEAN_RESPONSE_HELP),
    click.option("--precompute-ref", is_flag=True, help="DPO: reference log-probs precomputed."),
    click.option("--placement", type=_choice(PLACEMENTS), default="colocate", show_default=True,
                 help="RL: engines share the GPUs (verl), have their own (separate), or "
                      "every role and the engines have their own (split, OpenRLHF)."),
    click.option("--rollout-gpus", type=INT, default=None,
                 help="Separate placement: GPUs for the engines [default: half]."),
    click.option("--role-gpus", default=None,
                 help="Split placement: GPUs per role, e.g. actor=4,critic=2,reference=1,"
                      "reward=1; the engines take the rest [default: equal groups]."),
    click.option("--offload-idle", is_flag=True,
                 help="RL: idle roles' states wait in host RAM between phases."),
    click.option("--no-engine-sleep", is_flag=True,
                 help="RL colocated: the engine keeps weights and KV cache during training."),
]


# Options that set TrainConfig fields the planner does not search (request.FIXED_FIELDS): the
# same flags, names and defaults for `check` (one configuration) and `plan` / `pareto` (every
# candidate computes with them).
CONFIG_OPTIONS = [
    click.option("--lora-targets", default="all-linear",
                 help="Comma list of q,k,v,o,gate,up,down or all-linear [default: the "
                 "framework's (PEFT: q,v on Llama-style models), else all-linear]."),
    click.option("--lora-dropout", type=click.FloatRange(0, 1, max_open=True), default=None,
                 help="LoRA dropout probability (default: the framework's; PEFT's 0.0). Above "
                 "0 every adapter keeps its dropout's output and mask."),
    click.option("--precision", type=_choice(PRECISIONS), default="bf16", show_default=True),
    click.option("--pure-bf16", is_flag=True, help="No fp32 master weights (torchtune-style)."),
    click.option("--paged-optimizer", is_flag=True,
                 help="Optimizer states in CUDA managed memory."),
    click.option("--fused-optimizer", is_flag=True, help="Fused AdamW step (no temporaries)."),
    click.option("--compile", "compiled", is_flag=True,
                 help="torch.compile (fewer saved tensors)."),
    click.option("--no-flash-attention", is_flag=True,
                 help="Eager attention (s^2 scores kept)."),
    click.option("--chunked-loss", is_flag=True, help="Chunked/fused cross-entropy."),
]


def config_options(command):
    """``command`` with the training-config options (CONFIG_OPTIONS) attached."""
    for option in reversed(CONFIG_OPTIONS):
        command = option(command)
    return command


def _lora_targets(value: object) -> tuple[str, ...]:
    targets = tuple(t.strip() for t in str(value).split(",") if t.strip())
    bad = [t for t in targets if t not in LORA_TARGETS]
    if bad:
        raise PlannerError(f"--lora-targets {short(bad[0])} is not one of "
                           f"{', '.join(sorted(LORA_TARGETS))}")
    return targets


# The CONFIG_OPTIONS' parameter names (config_field maps each to its TrainConfig field).
CONFIG_FLAGS = ("lora_targets", "lora_dropout", "precision", "pure_bf16", "paged_optimizer",
                "fused_optimizer", "compiled", "no_flash_attention", "chunked_loss")


def config_field(name: str, value: object) -> tuple[str, object]:
    """A CONFIG_OPTIONS parameter as its TrainConfig field and value: the LoRA targets parsed,
    --no-flash-attention as flash_attention off."""
    if name == "lora_targets":
        return name, _lora_targets(value)
    if name == "no_flash_attention":
        return "flash_attention", not value
    return name, value


def _fixed_of(opts: dict[str, object]) -> dict[str, object]:
    """The CONFIG_OPTIONS the user gave, popped from ``opts``, as TrainConfig fields
    (PlanRequest.fixed); options left at their defaults fix nothing."""
    ctx = click.get_current_context(silent=True)
    fixed: dict[str, object] = {}
    for name in CONFIG_FLAGS:
        value = opts.pop(name, None)
        if ctx is None or ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT:
            continue
        field, value = config_field(name, value)
        fixed[field] = value
    return fixed


def workload_options(command):
    """``command`` with the workload options (WORKLOAD_OPTIONS) attached."""
    for option in reversed(WORKLOAD_OPTIONS):
        command = option(command)
    return command


# check's (and so tune's) layout inputs plan does not search: the expert-parallel degree
# (TrainConfig.ep), hybrid sharding (dp_shard), checkpointing on part of the layers
# (checkpoint_fraction), LoRA's trained embedding copies and activation offloading. One
# decorator: cli.py applies it as @PARALLEL_OPTIONS.
_PARALLEL_OPTIONS = (
    click.option("--ep", type=INT, default=1, show_default=True,
                 help="Expert parallel: routed experts split over this many GPUs (MoE models "
                      "only; divides dp x cp)."),
    click.option("--dp-shard", type=INT, default=None,
                 help="Hybrid sharding (FSDP HYBRID_SHARD / HSDP): shard weights and states "
                      "over this many data-parallel ranks (one host's, usually), replicate "
                      "across the rest (needs --fsdp or --zero 3; divides dp) [default: all]."),
    click.option("--checkpoint-fraction", type=click.FloatRange(0, 1, min_open=True),
                 default=1.0, show_default=True,
                 help="With --checkpointing full: the share of the layers checkpointed, evenly "
                      "spaced (fms-fsdp selective_checkpointing, Megatron "
                      "--recompute-num-layers / layers)."),
    click.option("--train-embeddings", "peft_trains_embeddings", is_flag=True,
                 help="LoRA-family: the token embedding and the LM head train too, as PEFT "
                      "modules_to_save copies (new special tokens, a chat template on a base "
                      "model)."),
    click.option("--offload-activations", "offload_activations", is_flag=True,
                 help="Saved activations wait in host RAM, reloaded ahead of backward "
                      "(torchtune's enable_activation_offloading; with --checkpointing full "
                      "or none)."),
)


def PARALLEL_OPTIONS(command):  # noqa: N802 (used as a decorator like the click options)
    """``command`` with the options of _PARALLEL_OPTIONS attached."""
    for option in reversed(_PARALLEL_OPTIONS):
        command = option(command)
    return command

# Options shared by `plan` and `pareto` (PlanRequest fields).
PLAN_OPTIONS = [
    click.option("--model", required=True,
                  help="Catalog id, HF repo id, size alias (7b) or config.json."),
    click.option("--budget", "budget_usd", type=FLOAT, default=None,
                  help="Budget in USD: GPUs + hosts, or the rental for the job (--pricing rent)."),
    click.option("--gpus", default=None, help="Comma list of GPU ids allowed [default: all]."),
    click.option("--max-gpus", type=INT, default=1024, show_default=True),
    click.option("--num-gpus", type=INT, default=None, help="Pin the GPU count."),
    click.option("--method", type=_choice(("auto", *METHODS)), default="auto", show_default=True),
    click.option("--lora-rank", type=LORA_RANK, default=None,
                  help="Adapter rank, or auto (the solver tries 64, 32, 16, 8) [default: the "
                  "framework's; 16 where it states none]."),
    click.option("--optimizer", type=_choice(("auto", *OPTIMIZERS)), default="adamw",
                  show_default=True),
    click.option("--sharding", type=_choice(("none", "zero1", "zero2", "zero3", "fsdp", "hsdp")),
                  default=None, help="Pin ZeRO stage / FSDP over every rank / hybrid FSDP "
                                     "(shards within each host) [default: solver picks]."),
    click.option("--tp", type=INT, default=None),
    click.option("--pp", type=INT, default=None),
    click.option("--ep", type=INT, default=None,
                  help="Expert parallel degree of an MoE model [default: solver picks]."),
    click.option("--offload", type=_choice(("auto", *OFFLOADS)), default="auto", show_default=True),
    click.option("--checkpointing", type=_choice(("auto", *CHECKPOINTINGS)), default="auto",
                  show_default=True),
    click.option("--micro-batch", "micro_batch_size", type=INT, default=None),
    click.option("--grad-accum", type=INT, default=None),
    click.option("--global-batch", "global_batch_size", type=INT, default=None,
                  help="Sequences per optimizer step [default: 64; RL on a framework whose "
                       "mini-batch counts prompts (verl): whole groups of --rollout-n]."),
    click.option("--seq-len", type=INT, default=None,
                  help="Tokens per sequence [default: 2048; RL: prompt + response]."),
    click.option("--memory-margin", type=FLOAT, default=CLI_MEMORY_MARGIN,
                  show_default=True, help=MARGIN_HELP),
    click.option("--confidence", type=FLOAT, default=DEFAULT_CONFIDENCE, show_default=True,
                  help=CONFIDENCE_HELP),
    click.option("--workload", type=_choice(WORKLOADS), default="sft", show_default=True),
    click.option("--critic-model", default=None, help="PPO critic [default: policy's arch]."),
    click.option("--reward-model", default=None,
                  help="Reward model [PPO default: policy's arch; GRPO: none]."),
    click.option("--reward-function", is_flag=True,
                  help="PPO: a function scores the responses, no reward model."),
    click.option("--prompt-len", type=INT, default=None, help="RL prompt tokens."),
    click.option("--response-len", type=INT, default=None, help="RL response tokens."),
    click.option("--rollout-n", type=INT, default=None,
                  help="Responses per prompt [default: GRPO 5, PPO 1]."),
    click.option("--rollout-batch", type=INT, default=256, show_default=True,
                  help="Prompts per RL iteration (--steps counts iterations)."),
    click.option("--rollout-tp", type=INT, default=None,
                  help="Engine tensor parallel size [default: solver picks]."),
    click.option("--gpu-memory-utilization", type=FLOAT, default=None,
                  help="vLLM memory fraction [default: sized to the rollout batch]."),
    click.option("--rollout-engine", type=_choice(ROLLOUT_ENGINES), default=None,
                  help="RL: a vLLM-style engine or the trainer's own generate (hf-generate) "
                       "[default: the framework's]."),
    click.option("--kl", type=FLOAT, default=None, help="KL coefficient; 0 drops the reference."),
    click.option("--mean-seq-len", type=INT, default=None,
                  help="RL: mean real tokens per sequence of padding-free trainer passes."),
    click.option("--mean-response-len", type=INT, default=None, help=MEAN_RESPONSE_HELP),
    click.option("--precompute-ref", is_flag=True, help="DPO: reference log-probs precomputed."),
    click.option("--placement", type=_choice(PLACEMENTS), default=None,
                  help="RL placement [default: solver picks]."),
    click.option("--offload-idle/--no-offload-idle", default=None,
                  help="RL: park idle roles in host RAM [default: solver picks]."),
    click.option("--price-kind", type=_choice(("new", "used")), default=None),
    click.option("--pricing", type=_choice(("buy", "rent", "owned")), default="buy",
                 show_default=True, help="buy, rent, or owned (with --gpus and --num-gpus: "
                                         "the fastest plan on hardware you have)."),
    click.option("--platform", default=None,
                 help="Buy or owned: the host platform, e.g. your cluster's node from a "
                      "--catalog overlay (its GPUs per host, RAM, network) [default: every "
                      "platform that takes the GPU; buying, the priced ones]."),
    click.option("--max-gpus-per-offer", type=INT, default=None,
                 help="Rent: GPUs one provider offer (instance shape) may supply [default: "
                      "64, an assumption about on-demand stock: eight 8-GPU instances]."),
    click.option("--spot", is_flag=True, default=None,
                 help="Rent spot (preemptible) offers instead of on-demand ones."),
    click.option("--framework", default=None,
                 help="Framework profile id ('planner catalog frameworks') [default: the "
                      "workload's default]."),
    click.option("--stack", type=_choice(STACKS), default=None,
                 help="Deprecated: the efficiency comes from --framework; this overrides it."),
    click.option("--tokens", type=FLOAT, default=None, help="Training tokens of the job."),
    click.option("--epochs", type=FLOAT, default=None),
    click.option("--dataset-tokens", type=FLOAT, default=None),
    click.option("--steps", type=INT, default=None),
    click.option("--max-hours", type=FLOAT, default=None, help="Deadline for the job, hours."),
    click.option("--min-tokens-per-s", type=FLOAT, default=None, help="Minimum throughput."),
    click.option("--time-limit", "time_limit_s", type=FLOAT, default=10.0, show_default=True),
]


def plan_options(command):
    """Apply PLAN_OPTIONS, CONFIG_OPTIONS, the catalog and the JSON options to a command."""
    for option in reversed([*PLAN_OPTIONS, *CONFIG_OPTIONS, CATALOG_OPTION, JSON_OPTION]):
        command = option(command)
    return command
