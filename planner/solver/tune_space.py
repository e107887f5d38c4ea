"""The candidates of a tune search in the planner's one vocabulary: the user's pins and the
values tried for the open settings are keyed by TrainConfig field, each open setting a domain in
preference order (``TUNE_DOMAINS``, as catalog/domains does for a plan), and every configuration
they span (``candidate_configs``: outer settings, then the micro-batch and accumulation that
complete each), for tune.py."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from planner.catalog.domains import Domains, pinned_or
from planner.catalog.request import (
    CHECKPOINTINGS,
    TrainConfig,
    rollout_gpu_count,
)
from planner.catalog.request_checks import accumulation_error
from planner.errors import PlannerError
from planner.inputs import check_type
from planner.models.workloads import trainer_gpus
from planner.solver.requirements import Requirement, all_hold

# Less recomputation first: the order of the "smaller settings" tie-break.
CHECKPOINT_ORDER = ("none", "selective", "full")


# The values tried for every setting the user leaves open, by TrainConfig field (a pin replaces
# them). Micro-batches include 1.5 x powers of two (launch scripts use 6, 12, 24); samples per
# prompt cover the GRPO group sizes in use (DeepSeekMath 64, verl examples 5-16); prompts per
# iteration run from 8 to 1024.
TUNE_DOMAINS: dict[str, tuple[Any, ...]] = {
    "micro_batch_size": (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
    "checkpointing": CHECKPOINT_ORDER,
    "grad_accum": (1, 2, 4, 8, 16, 32),
    "rollout_batch": (8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024),
    "rollout_n": (2, 4, 5, 8, 12, 16, 24, 32, 48, 64),
    "logprob_micro_batch": (1, 2, 4, 8, 16, 32, 64),
}


# What a tune pin may fix, by TrainConfig field, with the CLI flag its messages name; the
# global batch (micro x accumulation x dp) is pinned as the total it is.
PIN_FLAGS = {"micro_batch_size": "--micro-batch", "grad_accum": "--grad-accum",
             "global_batch_size": "--global-batch", "rollout_batch": "--rollout-batch",
             "rollout_n": "--rollout-n", "logprob_micro_batch": "--logprob-micro-batch",
             "checkpointing": "--checkpointing"}


@dataclass(frozen=True)
class Pins:
    """The tune pins by their CLI names (None: searched): a compatible name for callers of the
    library; ``fields`` gives them by TrainConfig field, which tune works in (a mapping of
    those may be passed instead)."""

    micro_batch: int | None = None
    grad_accum: int | None = None
    global_batch: int | None = None
    rollout_batch: int | None = None
    rollout_n: int | None = None
    logprob_micro_batch: int | None = None
    checkpointing: str | None = None

    @property
    def fields(self) -> dict[str, Any]:
        """The pinned settings by TrainConfig field (None and 'auto' are open)."""
        names = {"micro_batch": "micro_batch_size", "global_batch": "global_batch_size"}
        return pinned_fields({names.get(f.name, f.name): getattr(self, f.name)
                              for f in fields(self)})


def pinned_fields(pins: Mapping[str, Any] | Pins | None) -> dict[str, Any]:
    """Tune pins by TrainConfig field (PIN_FLAGS), open ones (None, 'auto') dropped; checked
    as bad input: a known field, a positive count, a checkpointing mode."""
    if isinstance(pins, Pins):
        return pins.fields
    pins = check_type(pins or {}, Mapping, name="pins")
    out = {k: v for k, v in pins.items() if v not in (None, "auto")}
    for name, value in out.items():
        if name not in PIN_FLAGS:
            raise PlannerError(f"pin {name!r} is not one of {', '.join(PIN_FLAGS)}")
        if name == "checkpointing" and value not in CHECKPOINTINGS:
            raise PlannerError(f"--checkpointing {value!r} is not one of auto, "
                               f"{', '.join(CHECKPOINTINGS)}")
        if name != "checkpointing" and (isinstance(value, bool) or not isinstance(value, int)
                                        or value <= 0):
            raise PlannerError(f"{PIN_FLAGS[name]} {value} must be a positive integer")
    return out


def tune_domains(base: TrainConfig, pins: Mapping[str, Any],
                 tried: Mapping[str, tuple[Any, ...]] = TUNE_DOMAINS) -> Domains:
    """Each searched setting of ``base``'s job by TrainConfig field: its pin alone, or the
    values ``tried`` (TUNE_DOMAINS by default) in preference order. No accumulation beyond 1
    with the optimizer in the backward; PPO samples one response per prompt unless pinned; no
    RL setting for another workload. A pinned global batch is the one total."""
    def domain(name: str, values: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
        return pinned_or(pins.get(name), tried[name] if values is None else values)

    out = {"micro_batch_size": domain("micro_batch_size"),
           "checkpointing": domain("checkpointing")}
    if "global_batch_size" in pins:
        out["global_batch_size"] = (pins["global_batch_size"],)
    out["grad_accum"] = (1,) if base.optimizer_in_backward else domain("grad_accum")
    if base.is_rl:
        out["rollout_batch"] = domain("rollout_batch")
        out["rollout_n"] = domain("rollout_n", None if base.workload == "grpo"
                                  else (base.samples_per_prompt,))
        out["logprob_micro_batch"] = domain("logprob_micro_batch")
    return out


@dataclass(frozen=True)
class _Outer:
    """Everything but the micro-batches: the inner (micro, accumulation) pairs ascend by micro."""

    fixed: dict[str, Any]
    inner: tuple[tuple[int, int], ...]
    logprobs: tuple[int | None, ...]


def _check_pins(base: TrainConfig, pins: Mapping[str, Any]) -> None:
    """Pins that break a rule by themselves are bad input, named with the rule (pins checked
    one by one in pinned_fields)."""
    dp = base.dp
    if not base.is_rl:
        for name in ("rollout_batch", "rollout_n", "logprob_micro_batch"):
            if name in pins:
                raise PlannerError(f"{PIN_FLAGS[name]} {pins[name]} applies to --workload ppo "
                                   f"or grpo only (got {base.workload})")
    g, m, a = (pins.get(k) for k in ("global_batch_size", "micro_batch_size", "grad_accum"))
    if g is not None and g % dp:
        raise PlannerError(f"--global-batch {g} must be a multiple of dp {dp}")
    if g is not None and m is not None and g % (m * dp):
        raise PlannerError(f"--global-batch {g} must be a multiple of micro-batch x dp = "
                           f"{m} x {dp}")
    if g is not None and m is not None and a is not None and m * a * dp != g:
        raise PlannerError(f"--micro-batch {m} x --grad-accum {a} x dp {dp} = {m * a * dp} "
                           f"is not --global-batch {g}")
    error = accumulation_error(base.model_copy(update={"grad_accum": a})) if a else None
    if error:
        raise PlannerError(error)
    if base.is_rl and "rollout_batch" in pins and "rollout_n" in pins:
        _check_rollout_pins(base, pins)


def _check_rollout_pins(base: TrainConfig, pins: Mapping[str, Any]) -> None:
    """Pinned prompts x samples split evenly over the GPUs, the update and log-prob
    micro-steps and the global batch."""
    dp, m, lp = base.dp, pins.get("micro_batch_size"), pins.get("logprob_micro_batch")
    rb, n = pins["rollout_batch"], pins["rollout_n"]
    seqs = rb * n
    rules = [_gpu_unit(base), (pins.get("global_batch_size"), "--global-batch"),
             (m * dp if m else None, f"micro-batch x dp = {m} x {dp}"),
             (lp * dp if lp else None, f"logprob micro-batch x dp = {lp} x {dp}")]
    for unit, name in rules:
        if unit and seqs % unit:
            raise PlannerError(f"rollout sequences {rb} x {n} = {seqs} must be a multiple of "
                               f"{name} ({unit})")


def _gpu_unit(base: TrainConfig) -> tuple[int, str]:
    """Rollout sequences split evenly over every GPU that handles them: all GPUs when the
    roles and engines share them; with engines (and, split, each role) on GPUs of their own,
    every group's GPU count (their least common multiple)."""
    if not base.is_rl or base.placement == "colocate":
        return base.num_gpus, "--num-gpus"
    groups = {"engines": rollout_gpu_count(base)}
    groups.update(dict(base.role_gpus or ()) if base.placement == "split"
                  else {"trainer": trainer_gpus(base)})
    unit = math.lcm(*groups.values())
    shown = ", ".join(f"{k} {v}" for k, v in groups.items())
    return unit, f"the GPU groups' counts ({shown})"


def _inner(total: int | None, accum_pin: int | None, micros: tuple[int, ...], dp: int,
           accums: tuple[int, ...]) -> Iterator[tuple[int, int] | tuple[int, int, int]]:
    """(micro, accumulation) pairs: for a fixed global batch ``total`` the accumulation follows
    from the micro-batch; otherwise every accumulation candidate."""
    if total is not None:
        if accum_pin is not None:
            micros = (total // (accum_pin * dp),) if total % (accum_pin * dp) == 0 else ()
        for m in sorted(set(micros)):
            if total % (m * dp) == 0:
                yield m, total // (m * dp)
        return
    for m in micros:
        for a in accums:
            yield m, a


def outer_settings(base: TrainConfig, domains: Domains,
                   pins: Mapping[str, Any]) -> list[_Outer]:
    """Every outer setting with its inner (micro, accumulation) pairs and log-prob
    micro-batches, under the divisibility rules (``domains``: tune_domains of ``pins``)."""
    dp, accum_pin = base.dp, pins.get("grad_accum")
    micros, accums = domains["micro_batch_size"], domains["grad_accum"]
    total = pins.get("global_batch_size")
    out: list[_Outer] = []
    for ckpt in domains["checkpointing"]:
        if not base.is_rl:
            if total is not None:
                pairs = tuple(_inner(total, accum_pin, micros, dp, accums))
                out.append(_Outer({"checkpointing": ckpt}, pairs, (None,)))
                continue
            for a in accums:
                pairs = tuple(sorted((m, a) for m in set(micros)))
                out.append(_Outer({"checkpointing": ckpt, "grad_accum": a}, pairs, (None,)))
            continue
        out += _rl_outers(base, domains, pins, ckpt=ckpt)
    return [o for o in out if o.inner]


def _rl_outers(base: TrainConfig, domains: Domains, pins: Mapping[str, Any], *,
               ckpt: str) -> list[_Outer]:
    """The RL outer settings of one checkpointing mode: prompts x samples that split evenly
    over the GPU groups, each with the pairs and log-prob micro-batches that divide them."""
    dp, unit = base.dp, _gpu_unit(base)[0]
    out = []
    for rb in domains["rollout_batch"]:
        for n in domains["rollout_n"]:
            seqs = rb * n
            total = pins.get("global_batch_size") or seqs
            if seqs % unit or seqs % total:
                continue
            pairs = tuple((m, a) for m, a in _inner(total, pins.get("grad_accum"),
                                                    domains["micro_batch_size"], dp,
                                                    domains["grad_accum"])
                          if seqs % (m * dp) == 0
                          and (not base.optimizer_in_backward or a == 1))
            lps = tuple(sorted(lp for lp in set(domains["logprob_micro_batch"])
                               if seqs % (lp * dp) == 0))
            if pairs and lps:
                out.append(_Outer({"checkpointing": ckpt, "rollout_batch": rb,
                                   "rollout_n": n}, pairs, lps))
    return out


def _config(base: TrainConfig, outer: _Outer, micro: int, accum: int,
            logprob: int | None) -> TrainConfig:
    update = {**outer.fixed, "micro_batch_size": micro, "grad_accum": accum}
    if base.is_rl:
        update["logprob_micro_batch"] = logprob
    return base.model_copy(update=update)


def candidate_configs(base: TrainConfig, pins: Mapping[str, Any] | Pins | None = None,
                      tried: Mapping[str, tuple[Any, ...]] = TUNE_DOMAINS,
                      *, rules: tuple[Requirement, ...] = ()) -> list[TrainConfig]:
    """The whole candidate set, unpruned (what the search must be as good as)."""
    pinned = pinned_fields(pins)
    domains = tune_domains(base, pinned, {**TUNE_DOMAINS, **tried})
    configs = (_config(base, o, m, a, lp) for o in outer_settings(base, domains, pinned)
               for m, a in o.inner for lp in o.logprobs)
    return [c for c in configs if all_hold(rules, c)]


# ---------------------------------------------------------------------------------------------
# Ranking
# ---------------------------------------------------------------------------------------------
