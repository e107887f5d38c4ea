"""Predict published validation cases and summarise the error (``planner validate``).

A case file follows the schema of ../shared/validation (``{schema_version, units, cases}``).
Each memory case is turned into a TrainConfig; the framework named by the case sets the
framework-specific knobs (documented in ``FRAMEWORK_DEFAULTS``). Cases that the models cannot
express yet get ``predicted: None`` and a reason, never a guess.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from planner.catalog import Catalog
from planner.errors import PlannerError
from planner.memory import GIB, MemoryEstimate, estimate_memory
from planner.request import TrainConfig, validate_config

SFT_WORKLOADS = ("sft", "pretrain")
EMULATING_GPU = "h100-sxm"
SFT_METHODS = ("full", "lora", "qlora", "dora", "freeze")

# What each framework does by default where the case does not say (sources: each framework's
# shipped recipes/configs). rank/targets: LoRA defaults; pure_bf16: bf16 weights and optimizer
# states without fp32 master copies.
FRAMEWORK_DEFAULTS: dict[str, dict[str, Any]] = {
    # torchtune recipes train in pure bf16 (dtype: bf16, AdamW states in bf16) with the fused
    # AdamW (optimizer.fused: True) and, since v0.3 (Sep 2024), CEWithChunkedOutputLoss as the
    # loss of every shipped LLM config; a case's explicit extra.chunked_ce overrides this.
    # Its distributed Llama-3 configs shard tok_embeddings and output as FSDP units of their own
    # (custom_sharded_layers).
    "torchtune": {"pure_bf16": True, "fused_optimizer": True, "chunked_loss": True,
                  "shard_embeddings": True, "lora_rank": 8, "lora_targets": ("q", "v")},
    # Qwen(1) finetune.py: lora_r 64 on c_attn, c_proj, w1, w2 (all linear layers). Qwen-1's
    # modeling code applies CrossEntropyLoss to the 16-bit logits; only autocast (HF Trainer
    # without DeepSpeed) upcasts it, so runs under DeepSpeed keep a 16-bit loss.
    "qwen-finetune": {"lora_rank": 64, "lora_targets": ("all-linear",),
                      "fp32_loss_needs_autocast": True},
    # LLaMA-Factory: lora_rank 8, lora_target all.
    "llama-factory": {"lora_rank": 8, "lora_targets": ("all-linear",)},
    # PEFT's default LoRA targets for Llama-family models are q_proj, v_proj; rank 8.
    "peft+transformers": {"lora_rank": 8, "lora_targets": ("q", "v")},
    "trl+peft": {"lora_rank": 8, "lora_targets": ("all-linear",)},
    "unsloth": {"lora_rank": 16, "lora_targets": ("all-linear",), "chunked_loss": True},
}

_TARGET_NAMES = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "output_proj": "o",
    "gate_proj": "gate", "up_proj": "up", "down_proj": "down", "q": "q", "k": "k", "v": "v",
    "o": "o", "c_attn": "all-linear", "all": "all-linear", "all-linear": "all-linear",
}


@dataclass(frozen=True)
class CaseResult:
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
        if self.predicted_gib is None or not self.measured_gib:
            return None
        return (self.predicted_gib - self.measured_gib) / self.measured_gib


def load_cases(path: Path) -> list[dict[str, Any]]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlannerError(f"validation file {str(path)!r} not found") from None
    except (OSError, yaml.YAMLError) as exc:
        raise PlannerError(f"validation file {str(path)!r} is not readable YAML: {exc}") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise PlannerError(f"validation file {str(path)!r} has no 'cases' list")
    return cases


def _targets(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if not text:
        return default
    names: list[str] = []
    for part in re.split(r"[,+ ]+", str(text).lower()):
        if part == "mlp":
            names += ["gate", "up", "down"]
        elif part in _TARGET_NAMES:
            names.append(_TARGET_NAMES[part])
    return tuple(dict.fromkeys(names)) or default


def _grad_accum(case: dict[str, Any]) -> int:
    extra = case.get("extra") or {}
    if extra.get("grad_accum"):
        return int(extra["grad_accum"])
    found = re.search(r"\bGA (\d+)", f"{case.get('note', '')} {case.get('location', '')}")
    return int(found.group(1)) if found else 1


def _chunked_loss(case: dict[str, Any], fw: dict[str, Any]) -> bool:
    """A case's explicit extra.chunked_ce wins. Otherwise the framework default, except for
    sources pinned to a commit before torchtune v0.3 (the May-2024 README, 30c75d4) and the rows
    of torchtune's cumulative optimisation table, which add chunked cross-entropy as a step of
    its own (recorded as extra.chunked_ce on the rows that have it)."""
    extra = case.get("extra") or {}
    if "chunked_ce" in extra:
        return bool(extra["chunked_ce"])
    if "30c75d4" in str(case.get("source")) or "optimisation table" in str(case.get("location")):
        return False
    return bool(fw.get("chunked_loss", False))


def case_config(case: dict[str, Any], catalog: Catalog) -> tuple[TrainConfig, Any]:
    """(TrainConfig, resolved model) for one memory case; PlannerError when not expressible."""
    workload = case.get("workload")
    if workload not in SFT_WORKLOADS:
        raise PlannerError(f"workload {workload!r} is modelled with the RL/preference roles issue")
    if not case.get("model"):
        raise PlannerError("no public checkpoint: architecture unknown")
    resolved = catalog.model(case["model"])
    extra = case.get("extra") or {}
    fw = FRAMEWORK_DEFAULTS.get(case.get("framework") or "", {})
    method = case.get("method") or "full"
    sharding = case.get("sharding") or "none"
    quant = "gptq" if "gptq" in str(extra.get("weight_quant", "")).lower() else "nf4"
    if resolved.weight_bits and method != "qlora":
        raise PlannerError("quantized checkpoint trained without a QLoRA-style adapter")
    zero = {"zero1": 1, "zero2": 2, "zero3": 3, "megatron": 1}.get(sharding, 0)
    cfg = TrainConfig(
        workload=workload,
        method=method,
        lora_rank=(case.get("lora_rank") or fw.get("lora_rank", 16))
        if method in ("lora", "dora", "qlora") else None,
        lora_targets=_targets(extra.get("target_modules"), fw.get("lora_targets", ("all-linear",))),
        quant_format=quant,
        optimizer=case.get("optimizer") or "adamw",
        precision=case.get("precision") or "bf16",
        pure_bf16=fw.get("pure_bf16", False),
        num_gpus=case["num_gpus"],
        zero_stage=zero,
        fsdp=sharding == "fsdp",
        tp=case.get("tp") or 1,
        pp=case.get("pp") or 1,
        cp=case.get("cp") or 1,
        offload=case.get("offload") or "none",
        checkpointing=case.get("grad_checkpointing") or "none",
        micro_batch_size=case.get("micro_batch_size") or 1,
        grad_accum=_grad_accum(case),
        seq_len=case.get("seq_len") or 2048,
        chunked_loss=_chunked_loss(case, fw),
        loss_in_fp32=not (fw.get("fp32_loss_needs_autocast") and zero > 0),
        fused_optimizer=fw.get("fused_optimizer", False),
        compiled=bool(extra.get("compile", False)),
        paged_optimizer=bool(extra.get("paged_optimizer", False)),
        optimizer_in_backward=bool(extra.get("optimizer_in_bwd", False)),
        shard_embeddings=fw.get("shard_embeddings", False),
    )
    validate_config(cfg, resolved.spec)
    return cfg, resolved


def _predicted_gib(est: MemoryEstimate, measured_as: str | None) -> float:
    if measured_as == "allocated":
        return est.allocated / GIB
    if measured_as == "nvidia-smi":
        return est.device / GIB
    return est.reserved / GIB  # reserved, unknown, estimate


def predict_case(case: dict[str, Any], catalog: Catalog) -> CaseResult:
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
    }
    if kind == "throughput":
        return CaseResult(**base, predicted_gib=None, predicted_range_gib=None,
                          predicted_fits=None,
                          reason="throughput cases are predicted by the throughput model")
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


def _percentile(values: list[float], q: float) -> float:
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
            p90_abs_err=_percentile(abs_errs, 0.9),
            bias=statistics.fmean(errs),
            within_10=sum(e <= 0.10 for e in abs_errs) / len(errs),
            within_20=sum(e <= 0.20 for e in abs_errs) / len(errs),
            strict_median_abs_err=statistics.median(strict),
            strict_p90_abs_err=_percentile(strict, 0.9),
        )
    if verdicts:
        right = sum(r.predicted_fits == (r.kind != "oom") for r in verdicts)
        out["fits_accuracy"] = right / len(verdicts)
        out["fits_predicted_for_oom"] = sum(
            1 for r in verdicts if r.kind == "oom" and r.predicted_fits
        )
    return out


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
        "not_modelled_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
    }


def validate_file(path: Path, catalog: Catalog) -> tuple[list[CaseResult], dict[str, Any]]:
    results = [predict_case(c, catalog) for c in load_cases(path)]
    return results, summarise(results)
