"""Tables of what the catalog holds (GPUs, models, platforms, framework profiles, rental offers)
and of the validation reports, as text."""

from __future__ import annotations

from typing import Any

from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec
from planner.outputs.render import text_table


def gpus_table(gpus: list[GpuSpec]) -> str:
    """The GPU catalog as a text table."""
    rows = [[g.id, f"{g.memory_gib:g}", f"{g.bf16_dense_tflops:g}", g.interconnect,
             _money(g.price_usd_new), _money(g.price_usd_used),
             f"{g.price_usd_per_hour:.2f}" if g.price_usd_per_hour else "-",
             g.price_as_of or "-"] for g in gpus]
    header = ["id", "GiB", "bf16 TFLOPS", "link", "new $", "used $", "$/h", "prices as of"]
    return text_table(rows, header)


def models_table(models: list[ModelSpec], counts: dict[str, float]) -> str:
    """The model catalog as a text table (``counts``: parameters by model id)."""
    rows = [[m.id, f"{counts[m.id] / 1e9:.2f}B", str(m.num_layers), str(m.hidden_size),
             f"{m.num_attention_heads}/{m.num_kv_heads}", str(m.vocab_size),
             f"moe {m.moe.num_experts}x top{m.moe.experts_per_token}" if m.moe else "dense",
             m.hf_repo or "-"] for m in models]
    return text_table(rows, ["id", "params", "layers", "hidden", "heads/kv", "vocab", "mlp",
                             "hf repo"])


def platforms_table(platforms: list[PlatformSpec]) -> str:
    """The platform catalog as a text table."""
    rows = [[p.id, str(p.max_gpus), ",".join(p.form_factors), _money(p.price_usd),
             f"{p.host_ram_gib:g}", f"{p.inter_node_bandwidth_gbps:g}", p.price_as_of or "-"]
            for p in platforms]
    return text_table(rows, ["id", "GPUs", "takes", "host $", "RAM GiB", "net GB/s", "as of"])


def frameworks_table(profiles: list[Any]) -> str:
    """Framework profiles (frameworks.Profile) with what each runs; inherited facts included."""
    def listed(p: Any, key: str) -> str:
        value = p.value(key)
        return "-" if value is None else (",".join(value) or "-")

    rows = [[p.id, p.spec.base or "-", listed(p, "workloads"), listed(p, "methods"),
             listed(p, "sharding"), listed(p, "parallelism"), p.value("launch_format") or "-",
             p.value("efficiency") or "-"] for p in profiles]
    return text_table(rows, ["id", "base", "workloads", "methods", "sharding", "parallel",
                         "exports as", "efficiency"])


def _money(x: float | None) -> str:
    return f"{x:,.0f}" if x else "-"


def _frameworks_table(groups: dict[str, dict[str, Any]]) -> str:
    rows = [[fw, str(g["peak_cases"]), _pct(g.get("median_abs_err")), _pct(g.get("p90_abs_err")),
             str(g["fits_cases"]), _pct(g.get("fits_accuracy")), str(g["not_modelled"]),
             "; ".join(g["versions"])[:60] or "-", str(g["unstated"])]
            for fw, g in groups.items()]
    return text_table(rows, ["framework", "peaks", "median", "p90", "verdicts", "right",
                         "not modelled", "versions", "unstated"])


def validate_text(results: list[Any], summary: dict[str, Any]) -> str:
    """The memory validation results and summary as text."""
    rows = []
    for r in results:
        pred = "-" if r.predicted_gib is None else f"{r.predicted_gib:.2f}"
        if r.predicted_range_gib is not None:
            pred = "{:.1f}..{:.1f}".format(*r.predicted_range_gib)
        meas = "-" if r.measured_gib is None else f"{r.measured_gib:.2f}"
        err = "-" if r.rel_err is None else f"{r.rel_err:+.1%}"
        fit = "-" if r.predicted_fits is None else ("fits" if r.predicted_fits else "oom")
        rows.append([r.id[:48], r.kind, f"{r.workload}/{r.method}", meas, pred, err, fit,
                     "yes" if r.usable else "", (r.reason or "")[:60]])
    out = [text_table(rows, ["case", "kind", "workload/method", "measured", "predicted", "error",
                         "verdict", "usable", "not modelled because"]), ""]
    out.append("predicted: the counter the case measured (allocated, reserved or device level); "
               "for an unknown counter the allocated..device range, error 0 inside it")
    out.append("summary (|relative error| of the per-GPU peak; verdicts: fits/OOM right; "
               "strict p90: unknown counters compared with reserved)")
    srows = []
    named = [("usable cases", summary["usable"]), ("SFT-family usable (acceptance)",
             summary["sft_acceptance"]), ("SFT-family verdicts", summary["sft_verdicts"]),
             ("all cases", summary["all_cases"])]
    named += [(k, v) for k, v in summary["by_workload_method"].items()]
    for name, s in named:
        srows.append([name, str(s["peak_cases"]), _pct(s.get("median_abs_err")),
                      _pct(s.get("p90_abs_err")), _pct(s.get("strict_p90_abs_err")),
                      _pct(s.get("bias"), signed=True),
                      _pct(s.get("within_20")), str(s["fits_cases"]), _pct(s.get("fits_accuracy")),
                      str(s["not_modelled"])])
    out.append(text_table(srows, ["group", "peaks", "median", "p90", "strict p90", "bias", "<=20%",
                              "verdicts", "right", "not modelled"]))
    out += ["", "by framework (versions: the releases the cases state they ran)",
            _frameworks_table(summary["by_framework"])]
    if summary["not_modelled_reasons"]:
        out.append("")
        out.append("not modelled:")
        out += [f"  {n} x {reason}" for reason, n in summary["not_modelled_reasons"].items()]
    return "\n".join(out)


def throughput_validate_text(results: list[Any], summary: dict[str, Any]) -> str:
    """The throughput validation results and summary as text."""
    rows = []
    for r in results:
        pred = "-" if r.predicted is None else f"{r.predicted:,.4g}"
        err = "-" if r.rel_err is None else f"{r.rel_err:+.1%}"
        rows.append([r.id[:48], r.metric, f"{r.workload}/{r.stack}", f"{r.measured:,.4g}", pred,
                     err, "yes" if r.usable else "", (r.reason or "")[:50]])
    out = [text_table(rows, ["case", "metric", "workload/stack", "measured", "predicted", "error",
                         "usable", "not modelled because"]), ""]
    named = [("usable training (acceptance)", summary["training"]),
             ("usable decode", summary["decode"]), ("all predicted", summary["all_predicted"])]
    for key in ("training_by_workload", "training_by_stack", "decode_by_stack"):
        named += [(f"{key.split('_by_')[0]} {k}", v) for k, v in summary[key].items()]
    srows = [[name, str(s.get("predicted", 0)), _pct(s.get("median_abs_err")),
              _pct(s.get("p90_abs_err")), _pct(s.get("bias"), signed=True),
              _pct(s.get("within_20"))] for name, s in named]
    out.append("summary (|relative error| of each case's own metric)")
    out.append(text_table(srows, ["group", "cases", "median", "p90", "bias", "<=20%"]))
    if summary["not_modelled_reasons"]:
        out += ["", "not modelled:"]
        out += [f"  {n} x {reason}" for reason, n in summary["not_modelled_reasons"].items()]
    return "\n".join(out)


def offers_table(rows: list[dict[str, Any]]) -> str:
    """Rental offers (offers.offer_rows) as a table."""
    return text_table([[
        str(r["gpu"]), str(r["id"]), str(r["gpus_per_instance"]), f"{r['usd_per_hour']:.2f}",
        f"{r['usd_per_gpu_hour']:.3f}", "spot" if r["spot"] else "", str(r["region"] or ""),
        f"{r['host_ram_gib']:g} GiB" if r["host_ram_gib"] else "",
        f"{r['network_gbit_s']:,.0f}" if r.get("network_gbit_s") else "-", str(r["billing"]),
        str(r["price_as_of"]),
    ] for r in rows], ["gpu", "offer (--offer)", "gpus", "$/h", "$/GPU-h", "spot", "region",
                       "host RAM", "net Gb/s", "billing", "as of"])


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.1%}" if signed else f"{x:.1%}"
