"""The candidates of a tune search: the values tried for the open settings (``SearchSpace``),
the user's pins (``Pins``), and every configuration they span (``candidate_configs``: outer
settings, then the micro-batch and accumulation that complete each), for tune.py."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from planner.catalog.request import (
    CHECKPOINTINGS,
    TrainConfig,
    rollout_gpu_count,
)
from planner.errors import PlannerError
from planner.models.workloads import trainer_gpus
from planner.solver.requirements import Requirement, all_hold

# Less recomputation first: the order of the "smaller settings" tie-break.
CHECKPOINT_ORDER = ("none", "selective", "full")


@dataclass(frozen=True)
class SearchSpace:
    """The values tried for every setting the user leaves open (pins replace them).

    Micro-batches include 1.5 x powers of two (launch scripts use 6, 12, 24); samples per prompt
    cover the GRPO group sizes in use (DeepSeekMath 64, verl examples 5-16); prompts per
    iteration run from 8 to 1024."""

    micro_batches: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
    accumulations: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    rollout_batches: tuple[int, ...] = (8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024)
    rollout_ns: tuple[int, ...] = (2, 4, 5, 8, 12, 16, 24, 32, 48, 64)
    logprob_micro_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    checkpointings: tuple[str, ...] = CHECKPOINT_ORDER


@dataclass(frozen=True)
class Pins:
    """Settings the user fixed (None: searched)."""

    micro_batch: int | None = None
    grad_accum: int | None = None
    global_batch: int | None = None
    rollout_batch: int | None = None
    rollout_n: int | None = None
    logprob_micro_batch: int | None = None
    checkpointing: str | None = None


@dataclass(frozen=True)
class _Outer:
    """Everything but the micro-batches: the inner (micro, accumulation) pairs ascend by micro."""

    fixed: dict[str, Any]
    inner: tuple[tuple[int, int], ...]
    logprobs: tuple[int | None, ...]


def _positive(pins: Pins) -> None:
    flags = {"--micro-batch": pins.micro_batch, "--grad-accum": pins.grad_accum,
             "--global-batch": pins.global_batch, "--rollout-batch": pins.rollout_batch,
             "--rollout-n": pins.rollout_n, "--logprob-micro-batch": pins.logprob_micro_batch}
    for flag, value in flags.items():
        if value is not None and value <= 0:
            raise PlannerError(f"{flag} {value} must be a positive integer")
    if pins.checkpointing not in (None, "auto", *CHECKPOINTINGS):
        raise PlannerError(f"--checkpointing {pins.checkpointing!r} is not one of auto, "
                           f"{', '.join(CHECKPOINTINGS)}")


def _check_pins(base: TrainConfig, pins: Pins) -> None:
    """Pins that break a rule by themselves are bad input, named with the rule."""
    _positive(pins)
    dp = base.dp
    if not base.is_rl:
        for flag, value in (("--rollout-batch", pins.rollout_batch), ("--rollout-n",
                            pins.rollout_n), ("--logprob-micro-batch", pins.logprob_micro_batch)):
            if value is not None:
                raise PlannerError(f"{flag} {value} applies to --workload ppo or grpo only "
                                   f"(got {base.workload})")
    g, m, a = pins.global_batch, pins.micro_batch, pins.grad_accum
    if g is not None and g % dp:
        raise PlannerError(f"--global-batch {g} must be a multiple of dp {dp}")
    if g is not None and m is not None and g % (m * dp):
        raise PlannerError(f"--global-batch {g} must be a multiple of micro-batch x dp = "
                           f"{m} x {dp}")
    if g is not None and m is not None and a is not None and m * a * dp != g:
        raise PlannerError(f"--micro-batch {m} x --grad-accum {a} x dp {dp} = {m * a * dp} "
                           f"is not --global-batch {g}")
    if base.optimizer_in_backward and a not in (None, 1):
        raise PlannerError(f"--optimizer-in-backward needs --grad-accum 1 (got {a})")
    if base.is_rl and pins.rollout_batch is not None and pins.rollout_n is not None:
        seqs = pins.rollout_batch * pins.rollout_n
        rules = [_gpu_unit(base), (g, "--global-batch")]
        rules += [(m * dp if m else None, f"micro-batch x dp = {m} x {dp}"),
                  (pins.logprob_micro_batch * dp if pins.logprob_micro_batch else None,
                   f"logprob micro-batch x dp = {pins.logprob_micro_batch} x {dp}")]
        for unit, name in rules:
            if unit and seqs % unit:
                raise PlannerError(
                    f"rollout sequences {pins.rollout_batch} x {pins.rollout_n} = {seqs} must be "
                    f"a multiple of {name} ({unit})")


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


def _choices(pinned: Any, values: tuple[Any, ...]) -> tuple[Any, ...]:
    return (pinned,) if pinned is not None else values


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


def outer_settings(base: TrainConfig, pins: Pins, space: SearchSpace) -> list[_Outer]:
    """Every outer setting with its inner (micro, accumulation) pairs and log-prob
    micro-batches, under the divisibility rules."""
    dp = base.dp
    ckpts = _choices(None if pins.checkpointing in (None, "auto") else pins.checkpointing,
                     space.checkpointings)
    micros = _choices(pins.micro_batch, space.micro_batches)
    accums = (1,) if base.optimizer_in_backward else _choices(pins.grad_accum, space.accumulations)
    out: list[_Outer] = []
    unit = _gpu_unit(base)[0] if base.is_rl else 1
    for ckpt in ckpts:
        if not base.is_rl:
            if pins.global_batch is not None:
                pairs = tuple(_inner(pins.global_batch, pins.grad_accum, micros, dp, accums))
                out.append(_Outer({"checkpointing": ckpt}, pairs, (None,)))
                continue
            for a in accums:
                pairs = tuple(sorted((m, a) for m in set(micros)))
                out.append(_Outer({"checkpointing": ckpt, "grad_accum": a}, pairs, (None,)))
            continue
        ns = _choices(pins.rollout_n, space.rollout_ns if base.workload == "grpo"
                      else (base.samples_per_prompt,))
        for rb in _choices(pins.rollout_batch, space.rollout_batches):
            for n in ns:
                seqs = rb * n
                total = pins.global_batch or seqs
                if seqs % unit or seqs % total:
                    continue
                pairs = tuple((m, a) for m, a in _inner(total, pins.grad_accum, micros, dp,
                                                        accums)
                              if seqs % (m * dp) == 0
                              and (not base.optimizer_in_backward or a == 1))
                lps = tuple(sorted(lp for lp in set(_choices(pins.logprob_micro_batch,
                                                             space.logprob_micro_batches))
                                   if seqs % (lp * dp) == 0))
                if pairs and lps:
                    out.append(_Outer({"checkpointing": ckpt, "rollout_batch": rb,
                                       "rollout_n": n}, pairs, lps))
    return [o for o in out if o.inner]


def _config(base: TrainConfig, outer: _Outer, micro: int, accum: int,
            logprob: int | None) -> TrainConfig:
    update = {**outer.fixed, "micro_batch_size": micro, "grad_accum": accum}
    if base.is_rl:
        update["logprob_micro_batch"] = logprob
    return base.model_copy(update=update)


def candidate_configs(base: TrainConfig, pins: Pins, space: SearchSpace,
                      *, rules: tuple[Requirement, ...] = ()) -> list[TrainConfig]:
    """The whole candidate set, unpruned (what the search must be as good as)."""
    configs = (_config(base, o, m, a, lp) for o in outer_settings(base, pins, space)
               for m, a in o.inner for lp in o.logprobs)
    return [c for c in configs if all_hold(rules, c)]


# ---------------------------------------------------------------------------------------------
# Ranking
# ---------------------------------------------------------------------------------------------
