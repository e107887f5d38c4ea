"""The `planner tune` document and its text (the chosen batch settings, runners-up)."""

from __future__ import annotations

from typing import Any

from planner.catalog.request import TrainConfig
from planner.outputs.render import (
    _r,
    band_text,
    batch_line,
    fix_lines,
    job_bands,
    memory_doc,
    text_table,
    throughput_doc,
)
from planner.outputs.schema import SCHEMA_VERSION


def tune_doc(result: Any) -> dict[str, Any]:
    """The `planner tune --json` document: the chosen settings with their memory and
    throughput (as check reports them), the runners-up, and the least-memory setting."""
    best, low = result.best, result.smallest

    def brief(c: Any) -> dict[str, Any]:
        return {"settings": c.settings, "per_gpu_gib": _r(c.per_gpu_gib),
                "tokens_per_s": c.tokens_per_s, "peak_phase": c.memory.phase}

    return {
        "schema_version": SCHEMA_VERSION,
        "status": result.status, "objective": result.objective, "model": result.model,
        "model_asked_as": result.asked_as, "gpu": result.gpu, "num_gpus": result.num_gpus,
        "platform": result.platform, "memory_margin": result.margin,
        "confidence": result.confidence, "memory_headroom": result.memory_headroom,
        "memory_target": result.memory_target, "memory_limit_gib": _r(result.limit_gib),
        "capacity_gib": result.capacity_gib, "tie_tolerance": result.tie_tolerance,
        "settings": best.settings if best else None,
        "config": best.config.model_dump(mode="json") if best else None,
        **(_tune_predictions(best) if best else {"memory": None, "throughput": None}),
        "runners_up": [brief(c) for c in result.runners_up],
        "smallest": brief(low) if low else None,
        "searched": {"candidates_evaluated": result.evaluated,
                     "space": {k: list(v) for k, v in result.space.items()}},
        "notes": list(result.notes),
    }


def _tune_predictions(best: Any) -> dict[str, Any]:
    """The chosen setting's memory and throughput blocks, with their bands (job_bands)."""
    mem, tput = memory_doc(best.memory), throughput_doc(best.throughput)
    bands = job_bands(best.config, memory_gib=mem["per_gpu_gib"], throughput=tput, hours=None,
                      cost={})
    return {"memory": {**mem, "band": bands["memory"]},
            "throughput": {**tput, "band": bands["tokens_per_s"],
                           "step_time_band": bands["step_time_s"]}}


def settings_line(s: dict[str, Any]) -> str:
    """One line of tune settings: micro x accumulation = global batch, checkpointing, RL."""
    line = (f"micro-batch {s['micro_batch_size']} x accumulation {s['grad_accum']} (global "
            f"{s['global_batch_size']}), checkpointing {s['checkpointing']}")
    if "rollout_batch" in s:
        line += (f"; {s['rollout_batch']} prompts x {s['rollout_n']} samples, logprob "
                 f"micro-batch {s['logprob_micro_batch']}")
    return line


def limit_text(doc: dict[str, Any]) -> str:
    """How a memory limit was set from capacity: the margin, and the band's upper edge."""
    words = ["capacity"]
    if doc["memory_margin"]:
        words.append(f"less a {doc['memory_margin']:.0%} margin")
    if doc["memory_headroom"] > 1:
        words.append(f"/ {doc['memory_headroom']:.2f}: a peak at the upper edge of its "
                     f"p{round(100 * doc['confidence'])} band ({doc['memory_headroom']:.2f}x the "
                     "prediction) stays within it")
    text = " ".join(words)
    return text if doc["confidence"] else f"{text}; point estimates (--confidence 0)"


def tune_text(doc: dict[str, Any]) -> str:
    """The ``tune`` document as text."""
    keep = (1 - doc["memory_margin"]) / doc["memory_headroom"]
    target = (f"target {doc['memory_target']:.1%} of capacity"
              if doc["memory_target"] is not None and doc["memory_target"] <= keep
              else limit_text(doc))
    tol = f"{doc['tie_tolerance']:.0%}"
    goal = (f"most tokens/s (ties within {tol}: larger micro-batches, less memory, smaller "
            "totals)" if doc["objective"] == "throughput" else
            f"fullest memory under the limit (ties within {tol} of capacity: faster, larger "
            "micro-batches, smaller totals)")
    head = [f"tune       {doc['model']} on {doc['num_gpus']} x {doc['gpu']}, {goal}",
            f"limit      {doc['memory_limit_gib']:.2f} of {doc['capacity_gib']:g} GiB per GPU "
            f"({target})"]
    low = doc["smallest"]
    if doc["settings"] is None:
        return "\n".join([*head, "status     infeasible: no searched batch setting fits",
                          f"closest    {settings_line(low['settings'])}: "
                          f"{low['per_gpu_gib']:.2f} GiB per GPU (peak in {low['peak_phase']})",
                          f"searched   {doc['searched']['candidates_evaluated']} settings",
                          *fix_lines(doc.get("fixes"), what="a setting")])
    tc = TrainConfig.model_validate(doc["config"])
    mem, t = doc["memory"], doc["throughput"]
    u = doc["settings"].get("gpu_memory_utilization")
    lines = [*head,
             f"settings   {settings_line(doc['settings'])}"
             + (f"; gpu_memory_utilization {u:.2f}" if u is not None else ""),
             f"batch      {batch_line(tc)}",
             f"memory     {mem['per_gpu_gib']:.2f} GiB per GPU"
             f"{band_text(mem.get('band'), '{:.2f}')}, peak in {mem['peak_phase']}: "
             + ", ".join(f"{k.replace('_', ' ')} {v:.2f}"
                         for k, v in mem["breakdown_gib"].items() if v >= 0.005)]
    if tc.is_rl:
        groups = mem.get("phase_groups", {})
        lines.append("phases     " + ", ".join(
            f"{k} {v:.2f}" + (f" ({groups[k]})" if groups.get(k, "all GPUs") != "all GPUs" else "")
            for k, v in mem["phases_gib"].items()) + " GiB")
        lines.append(f"speed      {t['tokens_per_s']:,.0f} tokens/s"
                     f"{band_text(t.get('band'), '{:,.0f}')}, {t['step_time_s']:.3g} s per "
                     f"RL iteration{band_text(t.get('step_time_band'), '{:.3g}')}, limited by "
                     f"{t['limited_by']} (stack {t['stack']})")
    else:
        lines.append(f"speed      {t['tokens_per_s']:,.0f} tokens/s"
                     f"{band_text(t.get('band'), '{:,.0f}')}, step {t['step_time_s']:.3g} s"
                     f"{band_text(t.get('step_time_band'), '{:.3g}')}, MFU {t['mfu']:.1%}, "
                     f"limited by {t['limited_by']} (stack {t['stack']})")
    if doc["runners_up"]:
        rows = [[str(i), settings_line(r["settings"]), f"{r['per_gpu_gib']:.2f}",
                 f"{r['tokens_per_s']:,.0f}", f"{r['tokens_per_s'] / t['tokens_per_s'] - 1:+.1%}"]
                for i, r in enumerate(doc["runners_up"], start=2)]
        lines += ["", "runners-up (settings with equal predicted memory and speed shown once):",
                  text_table(rows, ["#", "settings", "GiB/GPU", "tokens/s", "vs chosen"])]
    lines.append(f"searched   {doc['searched']['candidates_evaluated']} settings evaluated")
    lines += [f"note: {n}" for n in doc["notes"] + mem["notes"] + t["notes"]]
    return "\n".join(lines)
