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
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.api import evaluate as evaluate_config
from planner.catalog.load import Catalog, load_catalog
from planner.catalog.request import TrainConfig
from planner.errors import PlannerError
from planner.models.cost import Job
from planner.models.memory import GIB

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
        """True when the config was valid (no error)."""
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
        ev = evaluate_config(model=model, gpu=gpu, config=config, catalog=catalog,
                             margin=margin, stack=stack, job=_job(job, config), **check_kwargs)
    except PlannerError as exc:
        nan = float("nan")
        return FixResult(name=name, config=config, fits=False, per_gpu_gib=nan,
                         capacity_gib=nan, peak_phase="", step_time_s=nan, tokens_per_s=nan,
                         hours=nan, host_ram_gib=nan, changes=tuple(changes), error=str(exc))
    est, tput = ev.memory, ev.throughput
    return FixResult(
        name=name, config=config, fits=ev.fits, per_gpu_gib=est.device / GIB,
        capacity_gib=est.capacity / GIB, peak_phase=est.phase,
        step_time_s=tput.step_time_s, tokens_per_s=tput.tokens_per_s,
        hours=ev.cost.hours, host_ram_gib=est.host_ram / GIB,
        limited_by=tput.limited_by, changes=tuple(changes),
        breakdown_gib={k: v / GIB for k, v in est.device_terms().items() if v > 0},
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
    """``base`` with ``update``, validated like a new TrainConfig (model_copy does not). Fields
    ``base`` leaves unset stay unset, so the result takes its framework's semantics as ``base``
    does (a config check already evaluated keeps the semantics it was given)."""
    return TrainConfig.model_validate({**base.model_dump(exclude_unset=True), **update})


def evaluate_all(model: str, gpu: str, base: TrainConfig, *, candidates: Sequence[Change],
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


def smallest_fixes(model: str, gpu: str, base: TrainConfig, *, changes: Sequence[Change],
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


def largest_fitting(model: str, gpu: str, config: TrainConfig, *, field_name: str, lo: int,
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


# Fidelity of a method to full training, for ranking fixes that cost the same time (the user
# keeps the fuller method): full, then adapters on 16-bit weights, then on a 4-bit base.
METHOD_FIDELITY = {"full": 0, "freeze": 1, "dora": 1, "lora": 1, "qlora": 2}


def candidate_changes(cfg: TrainConfig, *, keep: Collection[str] = ()) -> list[Change]:
    """The changes an out-of-memory configuration can try (seed 004's list: ZeRO-2, ZeRO-3,
    FSDP, LoRA, QLoRA, 8-bit Adam, CPU offload, checkpointing, a smaller micro-batch, a chunked
    loss), each only where it changes ``cfg`` and leaves the fields in ``keep`` alone (tune's
    searched batch settings). A shorter sequence is found by ranked_fixes."""
    return [ch for ch in _changes(cfg) if not set(ch.update) & set(keep)]


def _changes(cfg: TrainConfig) -> list[Change]:
    out = []
    if cfg.num_gpus > 1 and not cfg.fsdp:
        out += [Change(f"--zero {z}", {"zero_stage": z}) for z in (2, 3) if cfg.zero_stage < z]
    if cfg.num_gpus > 1 and cfg.zero_stage == 0 and not cfg.fsdp:
        out.append(Change("--fsdp", {"fsdp": True}))
    if cfg.offload == "none":
        sharded = {} if cfg.zero_stage or cfg.fsdp else {"zero_stage": 3}
        out.append(Change("--offload optimizer" + (" --zero 3" if sharded else ""),
                          {"offload": "optimizer", **sharded}))
        out.append(Change("--offload optimizer+params" + (" --zero 3" if sharded else ""),
                          {"offload": "optimizer+params", **sharded}))
    if cfg.method == "full":
        out.append(Change("--method lora", {"method": "lora", "lora_rank": 16}))
    if cfg.method in ("full", "lora", "dora"):
        out.append(Change("--method qlora", {"method": "qlora", "lora_rank": cfg.lora_rank or 16}))
    if cfg.optimizer == "adamw":
        out.append(Change("--optimizer adamw-8bit", {"optimizer": "adamw-8bit"}))
    if cfg.checkpointing != "full":
        out.append(Change("--checkpointing full", {"checkpointing": "full"}))
    if cfg.micro_batch_size > 1:
        half = cfg.micro_batch_size // 2
        out.append(Change(f"--micro-batch {half} --grad-accum {cfg.grad_accum * 2}",
                          {"micro_batch_size": half, "grad_accum": cfg.grad_accum * 2}))
    if not cfg.chunked_loss and not cfg.lm_head_vocab_chunk:
        out.append(Change("--chunked-loss", {"chunked_loss": True}))
    return out


def ranked_fixes(model: str, gpu: str, config: TrainConfig, *, catalog: Catalog | None = None,
                 max_changes: int = 2, limit: int = 8, keep: Collection[str] = (),
                 **kwargs: Any) -> list[FixResult]:
    """The changes under which ``config`` (as check evaluated it: framework semantics applied)
    fits, each verified by check, ordered by what they cost the user: the job's hours first,
    then the method's fidelity, then memory. Single changes first; pairs only when no single
    change fits (smallest_fixes); the longest sequence that fits as it is, last. A change the
    framework cannot run is left out (check refuses it); the fields in ``keep`` are not
    changed."""
    cat = catalog or load_catalog()
    changes = candidate_changes(config, keep=keep)
    found = smallest_fixes(model, gpu, config, changes=changes, max_changes=1, catalog=cat,
                           **kwargs)
    if not found and max_changes > 1:
        found = smallest_fixes(model, gpu, config, changes=changes, max_changes=max_changes,
                               catalog=cat, **kwargs)
    found.sort(key=lambda r: (r.hours, METHOD_FIDELITY.get(r.config.method, 3),
                              r.per_gpu_gib, r.name))
    found = found[:limit - 1]
    if not config.is_rl and config.seq_len > 256 and "seq_len" not in keep:
        seq = largest_fitting(model, gpu, config, field_name="seq_len", lo=256,
                              hi=config.seq_len - 1, step=256, catalog=cat, **kwargs)
        if seq is not None:
            found.append(evaluate(model, gpu, _with(config, {"seq_len": seq}),
                                  name=f"--seq-len {seq}", changes=[f"--seq-len {seq}"],
                                  catalog=cat, **kwargs))
    return found


def fixes_doc(results: Sequence[FixResult], tokens_per_s: float) -> list[dict[str, Any]]:
    """The ranked fixes as the `check --json` document lists them (memory rounded as the check
    document rounds it)."""
    return [{"changes": list(r.changes), "fits": r.fits,
             "per_gpu_gib": round(r.per_gpu_gib, 3),
             "tokens_per_s": r.tokens_per_s, "hours": r.hours,
             "speed_vs_original": r.tokens_per_s / tokens_per_s if tokens_per_s else None}
            for r in results if r.valid]


def closest_fixes(model: str, gpu: str, closest: Any, *,
                  searched: Mapping[str, Collection[Any]],
                  **kwargs: Any) -> list[dict[str, Any]] | None:
    """The ranked fixes of tune's closest setting (``closest``: a solver.tune.Candidate) when
    no searched batch setting fits in memory, as ``fixes_doc`` lists them: changes to what tune
    does not search (``searched``: tune's values per field, left as tune left them, with full
    checkpointing where tune tried it, as a rerun with the change would). None when the closest
    setting fits the GPU as check sees it (tune was held back by its --require rules or a
    --memory-target, not by the GPU's memory)."""
    if closest is None or closest.fits:
        return None
    base = closest.config
    if "full" in searched.get("checkpointing", ()):
        base = _with(base, {"checkpointing": "full"})
    original = evaluate(model, gpu, base, **kwargs)
    if original.fits:  # over a --memory-target, not over the GPU: nothing to fix
        return None
    keep = {*searched, "micro_batch_size", "grad_accum"}
    found = ranked_fixes(model, gpu, base, keep=keep, **kwargs)
    return fixes_doc(found, original.tokens_per_s)
