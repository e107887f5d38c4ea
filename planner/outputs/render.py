"""Turn results into JSON documents and readable tables. No decisions are made here."""

from __future__ import annotations

import json
import math
from typing import Any

from planner.catalog.offers import CATALOG_PROVIDER, billing_text
from planner.catalog.request import (
    ACTOR_WEIGHT_ENGINES,
    TRAINER_ENGINES,
    TrainConfig,
    method_label,
    rollout_gpu_count,
)
from planner.catalog.specs import GpuSpec, ModelSpec
from planner.models.bands import (
    DEFAULT_CONFIDENCE,
    prediction_bands,
)
from planner.models.memory import GIB, MemoryEstimate, engine_utilization_to_set
from planner.outputs.schema import SCHEMA_VERSION
from planner.solver.result import SLACK_TIGHT


def to_json(doc: Any) -> str:
    """The document as JSON; a non-finite number is a bug (ValueError), never NaN/Infinity."""
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False)


def _r(x: float, nd: int = 3) -> float:
    return round(x, nd)


def memory_doc(est: MemoryEstimate) -> dict[str, Any]:
    """The memory block of check/plan JSON. breakdown_gib sums to per_gpu_gib (device level)."""
    breakdown = {k: _r(v / GIB) for k, v in est.device_terms().items()}
    return {
        "per_gpu_gib": _r(est.device / GIB),
        "allocated_gib": _r(est.allocated / GIB),
        "reserved_gib": _r(est.reserved / GIB),
        "capacity_gib": _r(est.capacity / GIB),
        "breakdown_gib": breakdown,
        "peak_phase": est.phase,
        "host_ram_gib": _r(est.host_ram / GIB),
        "precision": est.precision,
        "notes": list(est.notes),
        "phases_gib": {k: _r(v / GIB) for k, v in est.phases.items()},
        "phase_groups": dict(est.groups),
        "gpu_memory_utilization": (None if est.engine_utilization is None
                                   else _r(est.engine_utilization)),
    }


def check_doc(
    *, model: ModelSpec, asked_as: str, gpu: GpuSpec, cfg: TrainConfig, est: MemoryEstimate,
    fits: bool, margin: float,
) -> dict[str, Any]:
    """The ``check`` JSON document of one memory estimate."""
    return {
        "schema_version": SCHEMA_VERSION,
        "fits": fits,
        "model": model.id,
        "model_asked_as": asked_as,
        "gpu": gpu.id,
        "num_gpus": cfg.num_gpus,
        "memory_margin": margin,
        "config": cfg.model_dump(mode="json"),
        "memory": memory_doc(est),
    }


def text_table(rows: list[list[str]], header: list[str]) -> str:
    """``rows`` under ``header`` as left-aligned text columns."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    for row in rows:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(out)


def _layout(cfg: TrainConfig) -> str:
    shard = "fsdp" if cfg.fsdp else f"zero{cfg.zero_stage}" if cfg.zero_stage else "ddp"
    if cfg.dp_shard:
        shard += f" hybrid (shards of {cfg.dp_shard}, {cfg.dp // cfg.dp_shard} replicas)"
    if cfg.num_gpus == 1 and not cfg.zero_stage and not cfg.fsdp:
        shard = "single GPU"
    return (f"dp={cfg.dp} tp={cfg.tp} pp={cfg.pp}" + (f" cp={cfg.cp}" if cfg.cp > 1 else "")
            + (f" ep={cfg.ep}" if cfg.ep > 1 else "") + f", {shard}, offload {cfg.offload}")


def method_text(cfg: TrainConfig) -> str:
    """The method line's method: 'full', or 'lora r=16 on q,v' (request.method_label)."""
    return method_label(cfg.method, cfg.adapter_rank, targets=tuple(cfg.lora_targets))


def framework_lines(framework: dict[str, Any] | None) -> list[str]:
    """The framework line of a text report: which, why, and where its efficiency comes from."""
    if not framework:
        return []
    earlier = framework.get("as_of_requested_version")
    shown = (f"; as of {framework['id']} {framework['requested_version']}: "
             + ", ".join(earlier)) if earlier else ""
    return [f"framework  {framework['id']} ({framework['reason']}); "
            f"{framework['efficiency_note']}{shown}"]


def band_text(band: dict[str, Any] | None, fmt: str) -> str:
    """' (p90 band lo-hi)' after a predicted number, or nothing."""
    if not band:
        return ""
    return (f" (p{round(100 * band['p'])} band {fmt.format(band['lo'])}-"
            f"{fmt.format(band['hi'])})")


def band_lines(unit: str, band: dict[str, Any] | None, fmt: str) -> list[str]:
    """The band line of a prediction (planner.models.bands): its range and where it comes from."""
    if not band:
        return []
    return [f"band       measured {fmt.format(band['lo'])}-{fmt.format(band['hi'])} {unit} for "
            f"jobs like this (p {band['p']:.2f}: {band['cases']} leave-one-source-out cases "
            f"of {band['group']})"]


def job_bands(cfg: TrainConfig, *, memory_gib: float, throughput: dict[str, Any],
              hours: float | None, cost: dict[str, Any], framework: str | None = None
              ) -> dict[str, dict[str, Any] | None]:
    """planner.models.bands.prediction_bands of a job's documents (a rental bill's cost only)."""
    return prediction_bands(
        framework=framework or cfg.framework or "", workload=cfg.workload, method=cfg.method,
        memory_gib=memory_gib, tokens_per_s=throughput["tokens_per_s"],
        step_time_s=throughput.get("step_time_s"), hours=hours,
        rental_usd=cost.get("usd") if cost.get("basis") == "rent" else None,
        p=DEFAULT_CONFIDENCE)


def with_bands(doc: dict[str, Any], framework: str | None = None) -> dict[str, Any]:
    """A check document or plan body with each band next to its prediction (job_bands):
    memory.band, throughput.band (tokens/s), throughput.step_time_band, time_hours_band and
    cost.band (a rental's)."""
    cfg = TrainConfig.model_validate(doc["config"])
    bands = job_bands(cfg, memory_gib=doc["memory"]["per_gpu_gib"],
                      throughput=doc["throughput"], hours=doc["time_hours"], cost=doc["cost"],
                      framework=framework)
    return {**doc, "memory": {**doc["memory"], "band": bands["memory"]},
            "throughput": {**doc["throughput"], "band": bands["tokens_per_s"],
                           "step_time_band": bands["step_time_s"]},
            "time_hours_band": bands["hours"],
            "cost": {**doc["cost"], "band": bands["cost_usd"]}}


def fix_lines(fixes: list[dict[str, Any]] | None, *, what: str = "it") -> list[str]:
    """The ranked fixes of a configuration that does not fit (fixes.ranked_fixes); ``what``
    names the configuration."""
    if fixes is None:
        return []
    if not fixes:
        return ["", f"no single change or pair of changes makes {what} fit on this hardware: "
                    "more GPUs or a larger GPU ('planner plan')"]
    rows = [[" + ".join(f["changes"]), f"{f['per_gpu_gib']:.1f}",
             f"{f['tokens_per_s']:,.0f}",
             "-" if f["speed_vs_original"] is None else f"{f['speed_vs_original'] - 1:+.0%}",
             f"{f['hours']:,.1f}", "fits" if f["fits"] else "oom"] for f in fixes]
    return ["", f"changes that make {what} fit, each checked (fastest job first, then the fuller "
                "method):",
            text_table(rows, ["change", "GiB/GPU", "tokens/s", "speed", "hours", "verdict"])]


def edge_words(doc: dict[str, Any]) -> str:
    """', X GiB at the upper edge of its p90 band' where the check holds the band's edge."""
    headroom = doc.get("memory_headroom", 1.0)
    if headroom <= 1:
        return ""
    return (f", {doc['memory']['per_gpu_gib'] * headroom:.2f} GiB at the upper edge of its "
            f"p{round(100 * doc['confidence'])} band")


def check_text(doc: dict[str, Any]) -> str:
    """The ``check`` document as text."""
    cfg, mem = doc["config"], doc["memory"]
    tc = TrainConfig.model_validate(cfg)
    head = [
        f"model      {doc['model']}" + (f" (asked as {doc['model_asked_as']})"
                                        if doc["model_asked_as"] != doc["model"] else ""),
        f"hardware   {doc['num_gpus']} x {doc['gpu']} ({mem['capacity_gib']:.1f} GiB each)",
        f"layout     {_layout(tc)}",
        f"method     {method_text(tc)}, optimizer {tc.optimizer}, {mem['precision']}"
        + (" (pure, no fp32 master)" if tc.pure_16bit else " mixed precision"),
        f"batch      {batch_line(tc)}",
        *framework_lines(doc.get("framework")),
        "",
        f"per-GPU memory at the peak ({mem['peak_phase']}):",
    ]
    rows = [[k.replace("_", " "), f"{v:8.2f}"] for k, v in mem["breakdown_gib"].items() if v > 0]
    rows.append(["total (device level)", f"{mem['per_gpu_gib']:8.2f}"])
    rows.append(["capacity", f"{mem['capacity_gib']:8.2f}"])
    table = text_table(rows, ["term", "GiB"])
    verdict = "FITS" if doc["fits"] else "DOES NOT FIT"
    tail = [
        "",
        f"torch allocated {mem['allocated_gib']:.2f} GiB, reserved {mem['reserved_gib']:.2f} GiB; "
        f"host RAM per node {mem['host_ram_gib']:.1f} GiB",
        f"verdict: {verdict} (device-level peak {mem['per_gpu_gib']:.2f} GiB{edge_words(doc)} "
        f"vs {mem['capacity_gib']:.2f} GiB"
        + (f" less a {doc['memory_margin']:.0%} margin)" if doc["memory_margin"] else ")"),
    ]
    tail += band_lines("GiB per GPU", mem.get("band"), "{:.1f}")
    tail += [f"note: {n}" for n in mem["notes"]]
    tail += fix_lines(doc.get("fixes"))
    tail += _phase_lines(doc)
    if "throughput" in doc:
        tail += [""] + _speed_lines(doc)
    return "\n".join(head) + "\n" + table + "\n" + "\n".join(tail)


def _phase_lines(doc: dict[str, Any]) -> list[str]:
    """Multi-phase workloads: device-level GiB of every phase, and the engine's share."""
    mem = doc["memory"]
    if len(mem.get("phases_gib", {})) <= 2 and doc["config"]["workload"] in ("sft", "pretrain"):
        return []
    groups = mem.get("phase_groups", {})
    out = ["", "per-GPU memory by phase (device level, GiB):"]
    rows = [[k, f"{v:8.2f}", groups.get(k, "")] for k, v in mem["phases_gib"].items()]
    out.append(text_table(rows, ["phase", "GiB", "runs on"]))
    u = mem.get("gpu_memory_utilization")
    if u is not None:
        set_u = doc["config"].get("gpu_memory_utilization")
        sized = doc["config"].get("rollout_engine") in ACTOR_WEIGHT_ENGINES
        out.append(f"rollout engine: {u:.2f} of GPU memory"
                   + (" (as set)" if set_u is not None else " (sized to the batch)" if sized
                      else " (more than the GPU holds: no gpu_memory_utilization fits)"
                      if u > 1 else
                      f" -> set gpu_memory_utilization >= {math.ceil(u * 100) / 100:.2f}"))
    return out


def _speed_lines(doc: dict[str, Any]) -> list[str]:
    t, cost = doc["throughput"], doc["cost"]
    if "phases_s" in t:
        terms = ", ".join(f"{k} {v:.3g} s ({t['phase_shares'][k]:.0%})"
                          for k, v in t["phases_s"].items() if v > 0)
        head = [f"throughput {t['tokens_per_s']:,.0f} tokens/s{band_text(t.get('band'), '{:,.0f}')}"
                f" ({t['tokens_per_s_per_gpu']:,.0f} per GPU), {t['step_time_s']:.3g} s per RL "
                f"iteration{band_text(t.get('step_time_band'), '{:.3g}')}, limited by "
                f"{t['limited_by']} ({t['placement']}, stack {t['stack']})",
                f"iteration phases: {terms}"]
    else:
        terms = ", ".join(f"{k} {v:.3g}" for k, v in t["terms_s"].items() if v > 0)
        head = [
            f"throughput {t['tokens_per_s']:,.0f} tokens/s{band_text(t.get('band'), '{:,.0f}')} "
            f"({t['tokens_per_s_per_gpu']:,.0f} per GPU), step {t['step_time_s']:.3g} s"
            f"{band_text(t.get('step_time_band'), '{:.3g}')}, MFU {t['mfu']:.1%}, limited by "
            f"{t['limited_by']} (stack {t['stack']}, {t['precision']})",
            f"step time terms (s): {terms}",
        ]
    lines = [
        *head,
        *band_lines("tokens/s", t.get("band"), "{:,.0f}"),
        f"job        {cost['job']}: {doc['time_hours']:,.2f} hours"
        f"{band_text(doc.get('time_hours_band'), '{:,.2f}')}",
    ]
    if cost["usd"] is None:
        lines.append(f"cost       not offered: {cost['reason']}")
    else:
        lines.append(f"cost       ${cost['usd']:,.0f}{band_text(cost.get('band'), '${:,.0f}')} "
                     f"({cost['basis']}: {cost['covers']})")
        lines += [f"             {name}: ${usd:,.0f}" for name, usd in cost["items"].items()]
    lines += [f"note: {n}" for n in t["notes"] + cost["notes"]]
    return lines


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _rent_line(p: dict[str, Any]) -> str:
    """The plan's rental: the offer's instances, rate, billing and price date."""
    o = p["cost"].get("offer")
    if o is None:
        return f"rent       {p['num_gpus']} x {p['gpu']} ({p['num_hosts']} node(s))"
    billing = billing_text(o["billing_increment_hours"]) + (
        f", minimum {o['minimum_hours'] * 60:g} min" if o["minimum_hours"] else "")
    if o["provider"] == CATALOG_PROVIDER:
        return (f"rent       {p['num_gpus']} x {p['gpu']} at the catalog's rate of "
                f"${o['usd_per_hour']:,.2f}/GPU-hour ({billing}; {p['num_hosts']} node(s); "
                f"price as of {o['price_as_of']})")
    idle = o["instances"] * o["gpus_per_instance"] - p["num_gpus"]
    return (f"rent       {p['num_gpus']} x {p['gpu']}: {o['instances']} x {o['provider']} "
            f"{o['instance_type']}{' (spot)' if o['spot'] else ''} "
            f"({o['gpus_per_instance']} GPUs each"
            + (f", {idle} idle" if idle else "") + f"; ${o['usd_per_hour']:,.2f}/h; {billing}; "
            + (f"network {o['network_gbit_s']:,.0f} Gb/s to other instances; "
               if o.get("network_gbit_s") else "")
            + f"price as of {o['price_as_of']})")


def plan_doc(result: Any) -> dict[str, Any]:
    """The `planner plan --json` document (keys as issue 4 specifies; schema.PlanDocument)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "status": result.status,
        "plan": None if result.plan is None else plan_body(result.plan),
        "binding": [{"name": b.name, "used": b.used, "limit": b.limit, "unit": b.unit,
                     "slack": b.slack, "binding": b.binding, "tight": b.tight,
                     "relaxed": b.relaxed}
                    for b in result.binding],
        "conflicts": [{"name": c.name, "detail": c.detail, "fix": c.fix}
                      for c in result.conflicts],
        "alternatives": [_alternative(a) for a in result.alternatives],
        "notes": list(result.notes),
    }


def with_memory_limit(doc: dict[str, Any], *, margin: float, confidence: float,
                      headroom: float) -> dict[str, Any]:
    """A plan document with the memory limit it was planned to (bands.request_margin): the
    margin, the confidence and the band's headroom, and a note saying how they combine."""
    words = (f"GPU memory planned to the upper edge of the p{round(100 * confidence)} memory "
             f"band: usable = capacity x (1 - {margin:.0%} margin) / {headroom:.2f}, the band's "
             "upper edge per predicted GiB (--confidence 0: point estimates)")
    return {**doc, "memory_margin": margin, "confidence": confidence,
            "memory_headroom": headroom,
            "notes": [*doc["notes"], *([words] if headroom > 1 else [])]}


def plan_body(p: Any) -> dict[str, Any]:
    """One plan as plan documents and Pareto points hold it (what `planner export` reads)."""
    c = p.config
    return with_bands({
        "model": p.model, "checkpoint": p.checkpoint, "gpu": p.gpu, "platform": p.platform,
        "num_gpus": p.num_gpus,
        "num_hosts": p.num_hosts, "method": c.method,
        "lora_rank": c.adapter_rank, "optimizer": c.optimizer,
        "zero_stage": c.zero_stage, "fsdp": c.fsdp, "sharding": p.sharding_label, "tp": c.tp,
        "pp": c.pp, "dp": c.dp,
        "offload": c.offload, "checkpointing": c.checkpointing,
        "micro_batch_size": c.micro_batch_size, "grad_accum": c.grad_accum,
        "global_batch_size": c.global_batch_size, "seq_len": c.seq_len,
        "workload": c.workload,
        "rl": _rl_doc(c, p.memory),
        "config": c.model_dump(mode="json"),
        "memory": memory_doc(p.memory),
        "throughput": p.throughput.summary(),
        "time_hours": p.time_hours,
        "cost": p.cost.summary(),
    })


def _rl_doc(c: TrainConfig, est: MemoryEstimate) -> dict[str, Any] | None:
    """The RL settings of a plan: placement, engines and the vLLM memory fraction to set."""
    if not c.is_rl:
        return None
    return {"placement": c.placement, "rollout_tp": c.rollout_tp,
            "rollout_gpus": rollout_gpu_count(c),
            "role_gpus": dict(c.role_gpus) if c.role_gpus else None,
            "gpu_memory_utilization": engine_utilization_to_set(c, est),
            "offload_idle": c.offload_idle,
            "rollout_engine": c.rollout_engine, "generate_micro_batch": c.generate_micro_batch,
            "rollout_batch": c.rollout_batch, "rollout_n": c.samples_per_prompt,
            "prompt_len": c.prompt_len, "response_len": c.response_len,
            "reference": c.reference}


def batch_line(tc: TrainConfig) -> str:
    """How one step is made of sequences, per workload."""
    unit = "pairs (2 sequences each)" if tc.sequences_per_example == 2 else "sequences"
    line = (f"micro-batch {tc.micro_batch_size} x accumulation {tc.grad_accum} x dp {tc.dp} = "
            f"{tc.global_batch_size} {unit} of {tc.seq_len} tokens, checkpointing "
            f"{tc.checkpointing}" + (f" on {tc.checkpoint_fraction:.0%} of the layers"
                                     if tc.checkpoint_fraction < 1 else ""))
    if tc.is_rl:
        line = (f"{tc.rollout_batch} prompts x {tc.samples_per_prompt} samples of "
                f"{tc.prompt_len}+{tc.response_len} tokens per iteration, generated by "
                f"{engine_words(tc)}; update " + line)
    return line


def engine_words(tc: TrainConfig) -> str:
    """What generates an RL job's rollouts, in words."""
    if not tc.generates_in_trainer:
        return f"a {tc.rollout_engine} engine"
    at_once = (f"{tc.generate_micro_batch} sequences per call" if tc.generate_micro_batch
               else "the GPU's whole share in one call")
    return f"the trainer's own model ({tc.rollout_engine}, {at_once})"


def _alternative(p: Any) -> dict[str, Any]:
    c = p.config
    return {"gpu": p.gpu, "platform": p.platform, "num_gpus": p.num_gpus, "method": c.method,
            "lora_rank": c.adapter_rank, "zero_stage": c.zero_stage, "sharding": p.sharding_label,
            "offload": c.offload, "checkpointing": c.checkpointing, "tp": c.tp, "pp": c.pp,
            "micro_batch_size": c.micro_batch_size, "per_gpu_gib": round(p.memory.device / GIB, 3),
            "tokens_per_s": p.throughput.tokens_per_s, "time_hours": p.time_hours,
            "cost_usd": p.cost_usd}


def _rl_line(rl: dict[str, Any] | None) -> str:
    if not rl:
        return ""
    where = ("engines share every GPU" if rl["placement"] == "colocate"
             else f"engines on {rl['rollout_gpus']} GPUs of their own")
    if rl.get("role_gpus"):
        where += ", " + ", ".join(f"{n} on {g}" for n, g in rl["role_gpus"].items())
    if rl.get("rollout_engine") in TRAINER_ENGINES:
        return f": {rl['placement']} (the trainer generates with {rl['rollout_engine']})"
    u = rl["gpu_memory_utilization"]
    return (f": {rl['placement']} ({where}), rollout TP {rl['rollout_tp']}"
            + (f", gpu_memory_utilization {u:.2f}" if u is not None else "")
            + (", idle roles offloaded to host" if rl["offload_idle"] else ""))


def _speed_line(t: dict[str, Any]) -> str:
    """The plan text's speed line: MFU for training, phase shares for RL iterations."""
    if "mfu" in t:
        return (f"speed      {t['tokens_per_s']:,.0f} tokens/s"
                f"{band_text(t.get('band'), '{:,.0f}')}, MFU {t['mfu']:.1%}, limited by "
                f"{t['limited_by']} (stack {t['stack']})")
    shares = ", ".join(f"{k} {v:.0%}" for k, v in t["phase_shares"].items() if v >= 0.005)
    return (f"speed      {t['tokens_per_s']:,.0f} tokens/s"
            f"{band_text(t.get('band'), '{:,.0f}')}, {t['step_time_s']:.3g} s per "
            f"iteration{band_text(t.get('step_time_band'), '{:.3g}')} ({shares}); "
            f"limited by {t['limited_by']}")


def plan_text(doc: dict[str, Any]) -> str:
    """The ``plan`` document as text."""
    if doc["plan"] is None:
        lines = [f"status: {doc['status']}: " + (
            "no plan found within the time limit" if doc["status"] == "unknown"
            else "no plan satisfies the request")]
        lines += [f"  conflict: {c['detail']}\n    smallest fix: {c['fix']}"
                  for c in doc["conflicts"]]
        lines += [f"  note: {n}" for n in doc["notes"]]
        return "\n".join(lines)
    p = doc["plan"]
    tc = TrainConfig.model_validate(p["config"])
    mem, t, cost = p["memory"], p["throughput"], p["cost"]
    speed = _speed_line(t)
    lines = [
        f"status     {doc['status']}" + ("" if doc["status"] == "optimal"
                                         else " (not proven optimal)"),
        f"model      {p['model']}",
        (f"own        {p['num_gpus']} x {p['gpu']}"
         + (f" in {p['num_hosts']} x {p['platform']}" if p["platform"] else "")
         if cost.get("basis") == "owned" else
         f"buy        {p['num_gpus']} x {p['gpu']} in {p['num_hosts']} x {p['platform']}"
         if p["platform"] else _rent_line(p)),
        f"layout     {_layout(tc)}",
        f"workload   {tc.workload}" + _rl_line(p.get("rl")),
        *([f"framework  {tc.framework} (efficiency {t['stack']})"] if tc.framework else []),
        f"method     {method_text(tc)}, optimizer {tc.optimizer}, {mem['precision']}",
        f"batch      {batch_line(tc)}",
        f"memory     {mem['per_gpu_gib']:.1f}{band_text(mem.get('band'), '{:.1f}')} of "
        f"{mem['capacity_gib']:.0f} GiB per GPU (peak in {mem['peak_phase']}); host RAM "
        f"{mem['host_ram_gib']:.0f} GiB per host",
        "           " + ", ".join(f"{k.replace('_', ' ')} {v:.1f}"
                                  for k, v in mem["breakdown_gib"].items() if v >= 0.05),
        speed,
        f"job        {cost['job']}: {p['time_hours']:,.1f} hours"
        f"{band_text(p.get('time_hours_band'), '{:,.1f}')}",
        f"cost       ${cost['usd']:,.0f}{band_text(cost.get('band'), '${:,.0f}')}: "
        f"{cost['covers']}",
    ]
    if doc["binding"]:
        lines.append("")
        lines.append(f"constraints at the plan ({BINDING_LEGEND[0]};\n {BINDING_LEGEND[1]}):")
        rows = [[b["name"], _num(b["used"]), _num(b["limit"]), b["unit"],
                 f"{b['slack']:.0%}", rule_mark(b), b["relaxed"] or ""]
                for b in doc["binding"]]
        lines.append(text_table(rows, ["rule", "used", "limit", "unit", "slack", "", "if relaxed"]))
    if doc["alternatives"]:
        lines += ["", "alternatives (best plan per other method, and on other GPU types):"]
        rows = [[a["method"], f"{a['num_gpus']} x {a['gpu']}", f"{a['sharding']}/{a['offload']}",
                 f"{a['per_gpu_gib']:.1f}", f"{a['tokens_per_s']:,.0f}",
                 f"{a['time_hours']:,.1f}", f"${a['cost_usd']:,.0f}"]
                for a in doc["alternatives"]]
        lines.append(text_table(rows, ["method", "GPUs", "sharding/offload", "GiB/GPU",
                                   "tokens/s", "hours", "cost"]))
    lines += [f"note: {n}" for n in doc["notes"] + cost.get("notes", [])]
    return "\n".join(lines)


BINDING_LEGEND = ("BINDING: relaxing it one step gives a better plan, found by re-solving",
                  f"tight: under {SLACK_TIGHT:.0%} slack, but relaxing it does not help")


def rule_mark(b: dict[str, Any]) -> str:
    """A constraint row's mark: BINDING (relaxing it helps), tight (little slack), or none."""
    return "BINDING" if b["binding"] else "tight" if b.get("tight") else ""


def throughput_doc(tput: Any) -> dict[str, Any]:
    """The throughput block as `planner check --json` has it (summary, step terms, notes)."""
    doc = dict(tput.summary())
    if hasattr(tput, "terms"):
        doc["terms_s"] = dict(tput.terms)
    doc["notes"] = list(tput.notes)
    return doc
