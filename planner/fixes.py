"""Candidate fixes for a configuration, each evaluated with ``check`` and ranked.

A fix is a named set of TrainConfig changes (LoRA, a ZeRO stage, checkpointing, CPU offload,
a shorter sequence, ...). Every candidate is evaluated by the same analytic models as
``planner check`` (memory, throughput, job time), never guessed; combinations that TrainConfig
rejects (e.g. offload without ZeRO) are kept with the error message instead of a number.

* ``evaluate`` / ``evaluate_all``: one result per candidate;
* ``rank``: the candidates that fit, fastest first for the stated job (then least memory);
* ``smallest_fixes``: the minimal sets of changes (up to ``max_changes``) that make a
  configuration fit; a set is minimal when no proper subset of it fits;
* ``largest_fitting``: the largest value of an integer field (seq_len, micro_batch_size)
  that still fits, by bisection (memory grows with either).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.api import check
from planner.catalog import Catalog, load_catalog
from planner.cost import Job
from planner.errors import PlannerError
from planner.request import TrainConfig

JobFor = Job | Callable[[TrainConfig], Job] | None


@dataclass(frozen=True)
class Change:
    """One named change: TrainConfig fields and their new values."""

    name: str
    update: Mapping[str, Any]


@dataclass(frozen=True)
class FixResult:
    """A candidate configuration as ``check`` sees it (GiB are device level, per GPU)."""

    name: str
    config: TrainConfig
    fits: bool
    per_gpu_gib: float
    capacity_gib: float
    peak_phase: str
    step_time_s: float
    tokens_per_s: float
    hours: float
    host_ram_gib: float
    limited_by: str = ""  # the largest time term (compute, communication, ...)
    changes: tuple[str, ...] = ()
    breakdown_gib: dict[str, float] = field(default_factory=dict)
    error: str | None = None  # set when TrainConfig rejects the combination

    @property
    def valid(self) -> bool:
        return self.error is None

    def top_terms(self, n: int = 3) -> list[tuple[str, float]]:
        """The ``n`` largest memory terms at the peak."""
        return sorted(self.breakdown_gib.items(), key=lambda kv: -kv[1])[:n]


def _job(job: JobFor, cfg: TrainConfig) -> Job | None:
    return job(cfg) if callable(job) else job


def evaluate(model: str, gpu: str, config: TrainConfig, *, name: str = "as given",
             changes: Sequence[str] = (), catalog: Catalog | None = None,
             margin: float = 0.02, stack: str | None = None, job: JobFor = None,
             **check_kwargs: Any) -> FixResult:
    """``check`` one configuration; an invalid combination gives a result with ``error``."""
    try:
        doc = check(model=model, gpu=gpu, config=config, catalog=catalog, margin=margin,
                    stack=stack, job=_job(job, config), **check_kwargs)
    except PlannerError as exc:
        nan = float("nan")
        return FixResult(name=name, config=config, fits=False, per_gpu_gib=nan,
                         capacity_gib=nan, peak_phase="", step_time_s=nan, tokens_per_s=nan,
                         hours=nan, host_ram_gib=nan, changes=tuple(changes), error=str(exc))
    mem, tput = doc["memory"], doc["throughput"]
    return FixResult(
        name=name, config=config, fits=doc["fits"], per_gpu_gib=mem["per_gpu_gib"],
        capacity_gib=mem["capacity_gib"], peak_phase=mem["peak_phase"],
        step_time_s=tput["step_time_s"], tokens_per_s=tput["tokens_per_s"],
        hours=doc["time_hours"], host_ram_gib=mem["host_ram_gib"],
        limited_by=tput["limited_by"], changes=tuple(changes),
        breakdown_gib={k: v for k, v in mem["breakdown_gib"].items() if v > 0},
    )


def apply(base: TrainConfig, changes: Sequence[Change]) -> TrainConfig | None:
    """``base`` with every change applied; None when two changes set the same field."""
    update: dict[str, Any] = {}
    for ch in changes:
        if set(ch.update) & set(update):
            return None
        update.update(ch.update)
    return _with(base, update)


def _with(base: TrainConfig, update: Mapping[str, Any]) -> TrainConfig:
    """``base`` with ``update``, validated like a new TrainConfig (model_copy does not)."""
    return TrainConfig.model_validate({**base.model_dump(), **update})


def evaluate_all(model: str, gpu: str, base: TrainConfig, candidates: Sequence[Change], *,
                 catalog: Catalog | None = None, **kwargs: Any) -> list[FixResult]:
    """One result per candidate change of ``base`` (in the given order)."""
    cat = catalog or load_catalog()
    out = []
    for ch in candidates:
        cfg = _with(base, ch.update)
        out.append(evaluate(model, gpu, cfg, name=ch.name, changes=[ch.name], catalog=cat,
                            **kwargs))
    return out


def rank(results: Sequence[FixResult]) -> list[FixResult]:
    """The results that fit, fastest first for the stated job, then least memory, then name."""
    fitting = [r for r in results if r.valid and r.fits]
    return sorted(fitting, key=lambda r: (r.hours, r.per_gpu_gib, r.name))


def smallest_fixes(model: str, gpu: str, base: TrainConfig, changes: Sequence[Change], *,
                   max_changes: int = 2, catalog: Catalog | None = None,
                   **kwargs: Any) -> list[FixResult]:
    """Every minimal set of up to ``max_changes`` changes under which ``base`` fits, ranked.

    Sets are tried by size; a set that contains a set already found to fit is not minimal
    and is skipped, as are sets that change one field twice or that TrainConfig rejects."""
    cat = catalog or load_catalog()
    found: list[FixResult] = []
    for size in range(1, max_changes + 1):
        for combo in itertools.combinations(changes, size):
            names = frozenset(c.name for c in combo)
            if any(set(r.changes) <= names for r in found):
                continue
            cfg = apply(base, combo)
            if cfg is None:
                continue
            res = evaluate(model, gpu, cfg, name=" + ".join(c.name for c in combo),
                           changes=[c.name for c in combo], catalog=cat, **kwargs)
            if res.valid and res.fits:
                found.append(res)
    return rank(found)


def largest_fitting(model: str, gpu: str, config: TrainConfig, field_name: str, *, lo: int,
                    hi: int, step: int = 1, catalog: Catalog | None = None,
                    **kwargs: Any) -> int | None:
    """The largest multiple of ``step`` in [lo, hi] for ``field_name`` at which ``config``
    fits (None if even ``lo`` does not), by bisection: memory grows with the field."""
    cat = catalog or load_catalog()

    def fits(k: int) -> bool:
        cfg = _with(config, {field_name: k * step})
        return evaluate(model, gpu, cfg, catalog=cat, **kwargs).fits

    k = largest_true(fits, -(-lo // step), hi // step)  # candidates k * step in [lo, hi]
    return None if k is None else k * step


def largest_true(pred: Callable[[int], bool], lo: int, hi: int) -> int | None:
    """The largest integer k in [lo, hi] with pred(k), by bisection, for a predicate that
    holds up to some k and fails above it (memory fits up to a batch); None if pred(lo) fails."""
    if lo > hi or not pred(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if pred(mid) else (lo, mid - 1)
    return lo
