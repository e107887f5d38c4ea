"""Predict published validation cases and summarise the error (``planner validate``).

A case file follows the schema of validation/ (``{schema_version, units, cases}``). Each memory
case is turned into a TrainConfig: the case's own fields, and for what it leaves out the profile
of the framework it names (catalog/frameworks, planner.catalog.frameworks). A case naming a
framework with no profile, or that the models cannot express yet, gets ``predicted: None`` and a
reason, never a guess.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.catalog.gpu_names import candidates, settle
from planner.catalog.load import Catalog, shipped_validation_dir
from planner.errors import PlannerError
from planner.inputs import load_file
from planner.models.memory import GIB, MemoryEstimate
from planner.models.workloads import ROLLOUT_PHASE, estimate_memory, workload_phases
from planner.validation.case_inputs import (
    RL_CASE_WORKLOADS,
    SFT_WORKLOADS,
    RLCase,
    case_config,
    rl_case,
)
from planner.validation.validation_input import (
    CaseAdditions,
    check_cases,
    parse_additions,
    with_additions,
)

EMULATING_GPU = "h100-sxm"
SFT_METHODS = ("full", "lora", "qlora", "dora", "freeze")



@dataclass(frozen=True)
class CaseResult:
    """One validation case: what was measured and what the planner predicts."""
    id: str
    kind: str  # peak | fits | oom | throughput
    workload: str
    method: str
    framework: str
    usable: bool
    measured_gib: float | None
    measured_as: str | None
    capacity_gib: float | None
    predicted_gib: float | None
    # For readings whose counter is unknown: the allocated .. device-level (nvidia-smi) range.
    predicted_range_gib: tuple[float, float] | None
    predicted_fits: bool | None
    reason: str | None
    assumptions: tuple[str, ...] = ()  # RL/preference mapping choices (case_inputs.rl_case)
    framework_version: str | None = None  # the release or commit the measurement ran
    # fields validation/case_additions.yaml corrects (what the case's source contradicts)
    corrected: tuple[str, ...] = ()

    @property
    def rel_err(self) -> float | None:
        """(predicted - measured) / measured. For a reading whose counter is unknown the
        prediction is the range from torch-allocated to device level, and the error is the
        distance to that range (0 inside it): the 'wider tolerance' the validation README asks
        for unknown readings. ``strict_rel_err`` compares with the reserved figure instead."""
        if self.predicted_gib is None or not self.measured_gib:
            return None
        if self.predicted_range_gib is not None:
            lo, hi = self.predicted_range_gib
            nearest = min(max(self.measured_gib, lo), hi)
            return (nearest - self.measured_gib) / self.measured_gib
        return self.strict_rel_err

    @property
    def strict_rel_err(self) -> float | None:
        """(predicted - measured) / measured peak; None without both."""
        if self.predicted_gib is None or not self.measured_gib:
            return None
        return (self.predicted_gib - self.measured_gib) / self.measured_gib


ADDITIONS_FILE = "case_additions.yaml"


def case_additions() -> CaseAdditions:
    """The project's additions to published cases (validation/case_additions.yaml): settings
    and framework versions their sources state that the shared case files do not carry."""
    path = shipped_validation_dir() / ADDITIONS_FILE
    data = load_file(path, what="validation additions", kind="yaml")
    return parse_additions(data, what=f"validation additions {str(path)!r}")


# The project's own cases beside the shared files (architectures without a Hugging Face id
# given as config.json files under validation/models/); fit.py, loso.py and `planner validate`
# read them with the shared ones.
PROJECT_CASES_FILE = "project_cases.yaml"
PROJECT_CASES_GLOB = "project_cases*.yaml"  # project_cases.yaml, project_cases_rl.yaml, ...


def project_cases_path() -> Path:
    """validation/project_cases.yaml: the first file of cases the project adds."""
    return shipped_validation_dir() / PROJECT_CASES_FILE


def project_case_files(folder: Path | None = None) -> list[Path]:
    """Every file of cases the project adds beside the shared files in ``folder`` (default the
    shipped validation/): project_cases*.yaml, sorted by name."""
    return sorted((folder or shipped_validation_dir()).glob(PROJECT_CASES_GLOB))


def _with_architecture_config(case: Any, folder: Path) -> Any:
    """A case that gives its architecture as ``architecture_config`` (a config.json relative to its
    file) with that file's path as its ``model`` (Catalog.model reads config.json paths)."""
    if not isinstance(case, dict) or not case.get("architecture_config") or case.get("model"):
        return case
    return {**case, "model": str(folder / str(case["architecture_config"]))}


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a validation file, read through the input boundary, with the project's
    additions for their ids (validation_input.with_additions), checked against
    validation_input's case schema; a ``architecture_config`` becomes the case's model path."""
    data = load_file(path, what="validation file", kind="yaml")
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise PlannerError(f"validation file {str(path)!r} has no 'cases' list")
    what = f"validation file {str(path)!r}"
    cases = check_cases([_with_architecture_config(c, path.parent) for c in cases], what=what)
    return check_cases(with_additions(cases, case_additions()), what=what)


def _predicted_gib(est: MemoryEstimate, measured_as: str | None) -> float:
    if measured_as == "allocated":
        return est.allocated / GIB
    if measured_as == "nvidia-smi":
        return est.device / GIB
    return est.reserved / GIB  # reserved, unknown, estimate


def case_gpu(case: dict[str, Any], catalog: Catalog) -> dict[str, Any]:
    """The case with its GPU named by the catalog id its name leads to, where the name alone
    is ambiguous but its stated memory and the SXM convention settle it (gpu_names rule 4:
    "H100", "NVIDIA H100 80GB HBM3" are h100-sxm; "A100" with gpu_memory_gib 40
    a100-40gb-sxm); otherwise unchanged (an unknown or still ambiguous name fails where the
    GPU is read, naming the candidates)."""
    name = case.get("gpu")
    if not isinstance(name, str) or not name.strip():
        return case
    found = settle(candidates(name, catalog.gpus), catalog.gpus, case.get("gpu_memory_gib"))
    return {**case, "gpu": found[0]} if len(found) == 1 and found[0] != name else case


def predict_case(case: dict[str, Any], catalog: Catalog) -> CaseResult:
    """The planner's prediction for one validation case."""
    case = case_gpu(case, catalog)
    outcome = case.get("outcome") or {}
    kind = outcome.get("kind", "throughput" if "metric" in case else "peak")
    base = {
        "id": str(case.get("id")),
        "kind": kind,
        "workload": str(case.get("workload")),
        "method": str(case.get("method") or "full"),
        "framework": str(case.get("framework")),
        "usable": bool(case.get("usable_for_accuracy")),
        "measured_gib": outcome.get("peak_gib"),
        "measured_as": outcome.get("measured_as"),
        "capacity_gib": case.get("gpu_memory_gib"),
        "framework_version": case.get("framework_version"),
        "corrected": tuple(case.get("corrected") or ()),
    }
    if kind == "throughput":
        return CaseResult(**base, predicted_gib=None, predicted_range_gib=None,
                          predicted_fits=None,
                          reason="throughput cases are predicted by the throughput model")
    if base["workload"] in RL_CASE_WORKLOADS:
        return _predict_rl_case(case, catalog, base)
    try:
        cfg, resolved = case_config(case, catalog)
        # Without a GPU model (memory budgets emulated on one large GPU, or not stated) the
        # peak is predicted on a bf16-capable datacenter GPU; with no capacity, no verdict.
        gpu = catalog.gpu(case.get("gpu") or EMULATING_GPU)
    except PlannerError as exc:
        return CaseResult(**base, predicted_gib=None, predicted_range_gib=None,
                          predicted_fits=None, reason=str(exc))
    capacity = case.get("gpu_memory_gib") or (gpu.memory_gib if case.get("gpu") else None)
    if capacity:
        gpu = gpu.model_copy(update={"memory_gib": capacity})
    est = estimate_memory(resolved.spec, gpu, cfg)
    return CaseResult(
        **{**base, "capacity_gib": capacity},
        predicted_gib=round(_predicted_gib(est, base["measured_as"]), 3),
        predicted_range_gib=(round(est.allocated / GIB, 3), round(est.device / GIB, 3))
        if base["measured_as"] == "unknown" else None,
        predicted_fits=est.fits() if capacity else None,
        reason=None,
    )


# GPU memory assumed where an RL log does not name its GPU (verl-log-*: reserved peaks of
# 80.5-92.4 GiB imply >= 94 GB cards, H100 NVL / H20 class). It sizes only the vLLM pool
# (gpu_memory_utilization x capacity), which those torch-allocated readings do not contain.
ASSUMED_RL_CAPACITY_GIB = 94.0


def rl_allocated_without_engine(rc: RLCase, gpu: Any) -> float:
    """Peak torch-allocated bytes over the phases a torch counter sees when the engine's pool
    is outside it: every phase but the rollout, without engine terms."""
    phases = workload_phases(rc.resolved.spec, rc.cfg, rc.cfg.effective_precision(gpu),
                             capacity=gpu.memory_gib * GIB, critic=rc.critic, reward=rc.reward)
    return max(sum(v for k, v in terms.items() if not k.startswith("engine "))
               for name, terms in phases.items() if name != ROLLOUT_PHASE)


def _predict_rl_case(case: dict[str, Any], catalog: Catalog, base: dict[str, Any]) -> CaseResult:
    try:
        rc = rl_case(case, catalog)
        gpu = catalog.gpu(case.get("gpu") or EMULATING_GPU)
    except PlannerError as exc:
        return CaseResult(**base, predicted_gib=None, predicted_range_gib=None,
                          predicted_fits=None, reason=f"{base['workload']}: {exc}")
    capacity = case.get("gpu_memory_gib") or (gpu.memory_gib if case.get("gpu") else None)
    gpu = gpu.model_copy(update={"memory_gib": capacity or ASSUMED_RL_CAPACITY_GIB})
    est = estimate_memory(rc.resolved.spec, gpu, rc.cfg, critic=rc.critic, reward=rc.reward)
    measured_as = base["measured_as"]
    if measured_as == "allocated" and rc.engine_outside_counter and rc.cfg.is_rl:
        predicted = rl_allocated_without_engine(rc, gpu) / GIB
    else:
        predicted = _predicted_gib(est, measured_as)
    return CaseResult(
        **{**base, "capacity_gib": capacity, "method": rc.cfg.method},
        predicted_gib=round(predicted, 3) if base["kind"] == "peak" else round(
            est.device / GIB, 3),
        predicted_range_gib=(round(est.allocated / GIB, 3), round(est.device / GIB, 3))
        if measured_as == "unknown" else None,
        predicted_fits=est.fits() if capacity else None,
        reason=None,
        assumptions=rc.assumptions,
    )


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 1])."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def error_stats(results: list[CaseResult]) -> dict[str, Any]:
    """Median/p90 |relative error|, bias and shares within 10/20% of peak cases; fits accuracy."""
    errs = [r.rel_err for r in results if r.kind == "peak" and r.rel_err is not None]
    # A measured peak means the run fitted its GPU: it counts as a "fits" verdict too.
    verdicts = [r for r in results if r.kind in ("fits", "oom", "peak")
                and r.predicted_fits is not None]
    strict = [abs(r.strict_rel_err) for r in results
              if r.kind == "peak" and r.strict_rel_err is not None]
    out: dict[str, Any] = {
        "peak_cases": len(errs),
        "fits_cases": len(verdicts),
        "not_modelled": sum(1 for r in results if r.reason),
    }
    if errs:
        abs_errs = [abs(e) for e in errs]
        out.update(
            median_abs_err=statistics.median(abs_errs),
            p90_abs_err=percentile(abs_errs, 0.9),
            bias=statistics.fmean(errs),
            within_10=sum(e <= 0.10 for e in abs_errs) / len(errs),
            within_20=sum(e <= 0.20 for e in abs_errs) / len(errs),
            strict_median_abs_err=statistics.median(strict),
            strict_p90_abs_err=percentile(strict, 0.9),
        )
    if verdicts:
        right = sum(r.predicted_fits == (r.kind != "oom") for r in verdicts)
        out["fits_accuracy"] = right / len(verdicts)
        out["fits_predicted_for_oom"] = sum(
            1 for r in verdicts if r.kind == "oom" and r.predicted_fits
        )
    return out


def confusion(results: list[CaseResult]) -> dict[str, int]:
    """Published fits/oom against the predicted verdict (cases with a capacity)."""
    out = {"fits_predicted_fits": 0, "fits_predicted_oom": 0, "oom_predicted_fits": 0,
           "oom_predicted_oom": 0, "no_verdict": 0}
    for r in results:
        if r.kind not in ("fits", "oom"):
            continue
        if r.predicted_fits is None:
            out["no_verdict"] += 1
            continue
        out[f"{r.kind}_predicted_{'fits' if r.predicted_fits else 'oom'}"] += 1
    return out


def rl_summary(results: list[CaseResult]) -> dict[str, Any]:
    """Reward-model, DPO, PPO and GRPO cases apart from the SFT acceptance set: peaks (none is
    usable_for_accuracy: GPU unknown or a secondary source) and the fits/oom confusion counts,
    overall and per workload."""
    rl = [r for r in results if r.workload in RL_CASE_WORKLOADS]
    peaks = [r for r in rl if r.kind == "peak"]
    verdicts = [r for r in rl if r.kind in ("fits", "oom")]
    return {
        "peaks": error_stats(peaks),
        "peaks_by_workload": {w: error_stats([r for r in peaks if r.workload == w])
                              for w in RL_CASE_WORKLOADS},
        "verdicts": confusion(verdicts),
        "verdicts_by_workload": {w: confusion([r for r in verdicts if r.workload == w])
                                 for w in RL_CASE_WORKLOADS},
    }


def by_framework(results: list[CaseResult]) -> dict[str, dict[str, Any]]:
    """Per framework the cases are of: the error statistics and the framework versions the
    measurements ran (those the cases state, sorted; ``unstated``: cases that state none)."""
    groups: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        groups[r.framework].append(r)
    return {fw: {**error_stats(rs),
                 "versions": sorted({r.framework_version for r in rs if r.framework_version}),
                 "unstated": sum(1 for r in rs if not r.framework_version)}
            for fw, rs in sorted(groups.items())}


def summarise(results: list[CaseResult]) -> dict[str, Any]:
    """Overall, per workload/method, the SFT-family acceptance set, and unmodelled reasons."""
    usable = [r for r in results if r.usable]
    groups: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        groups[f"{r.workload}/{r.method}"].append(r)
    reasons: dict[str, int] = defaultdict(int)
    for r in results:
        if r.reason:
            reasons[r.reason] += 1
    sft_usable = [r for r in usable if r.workload in SFT_WORKLOADS and r.method in SFT_METHODS]
    return {
        "cases": len(results),
        "usable": error_stats(usable),
        "sft_acceptance": error_stats(sft_usable),
        # verdicts: the usable SFT peaks (they ran, so "fits") plus every SFT fits/oom case
        "sft_verdicts": error_stats(sft_usable + [
            r for r in results if r.kind in ("fits", "oom") and r.workload in SFT_WORKLOADS]),
        "all_cases": error_stats(results),
        "by_workload_method": {k: error_stats(v) for k, v in sorted(groups.items())},
        "rl": rl_summary(results),
        "by_framework": by_framework(results),
        "not_modelled_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
    }


def validate_file(path: Path, catalog: Catalog) -> tuple[list[CaseResult], dict[str, Any]]:
    """The results of every case in ``path`` and their summary."""
    results = [predict_case(c, catalog) for c in load_cases(path)]
    return results, summarise(results)
