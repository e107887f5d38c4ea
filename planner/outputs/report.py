"""A self-contained HTML report of a plan and its cost-vs-time trade-offs.

Pure functions from the ``plan --json`` / ``pareto --json`` documents (planner.outputs.render) to
one HTML string: inline CSS and hand-written inline SVG, no scripts, fonts, images or links to
fetch, so the file opens offline and can be mailed around. Every text taken from a document is
escaped. Sections: the plan's summary, per-GPU memory bars against capacity (one bar per phase
for RL and preference workloads), the constraints at the plan, the alternatives, the Pareto
chart (the same points as ``planner.outputs.plot``) with its table, and for an infeasible request
the conflicts with their fixes.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from planner.catalog.request import TrainConfig, method_label
from planner.outputs import render
from planner.outputs.plot import (
    COST_AXIS,
    FAINT_COLOUR,
    FRONT_COLOUR,
    LOG_NOTE,
    PLAN_COLOUR,
    TIME_AXIS,
    chart_points,
    chart_title,
    front,
    label_order,
    nice_ticks,
    place_labels,
    required_labels,
    setup_key,
    usd_tick,
    use_log,
)

# Colour per memory term, in the order the breakdown lists them (Tableau 20, colour-blind safe
# enough for adjacent segments; cycled beyond 20 terms).
TERM_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295", "#a0cbe8", "#ffbe7d",
                "#8cd17d", "#b6992d", "#f1ce63", "#499894", "#d4a6c8", "#79706e")
OTHER_PHASE_COLOUR = "#9fb3c8"
CAPACITY_COLOUR = "#c0392b"
# Width of one character of an 11 px label, a little above system-ui's average, so that the
# placement's boxes cover the rendered text (checked in Chromium, tests/test_report.py).
LABEL_CHAR_PX = 6.6

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
  max-width: 1000px; color: #222; background: #fff; line-height: 1.4; padding: 0 16px; }
h1 { font-size: 1.45em; margin-bottom: 4px; } h2 { font-size: 1.15em; margin-top: 28px;
  border-bottom: 1px solid #ddd; padding-bottom: 3px; }
.status { font-weight: 600; } .status.infeasible { color: #c0392b; }
table { border-collapse: collapse; margin: 8px 0; font-size: 0.9em; }
th, td { border: 1px solid #d8d8d8; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f3f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th { width: 9em; } tr.binding td { background: #fdf1e3; font-weight: 600; }
tr.dominated td { color: #888; } p.empty, p.caption { color: #666; font-size: 0.9em; }
svg { display: block; margin: 8px 0; } svg text { font-family: inherit; }
svg.memory, svg.pareto { width: 100%; height: auto; } /* scale with the window (viewBox) */
div.scroll { overflow-x: auto; max-width: 100%; } /* a wide table scrolls in its own box */
ul.notes { font-size: 0.9em; color: #444; }
"""


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _f(x: float) -> str:
    """A coordinate with two decimals (stable, short SVG)."""
    return f"{x:.2f}"


def _hours(h: float) -> str:
    return f"{h:,.2f}" if h >= 0.1 else f"{h:.3g}"


def _usd(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x:,.0f}" if abs(x) >= 10 else f"${x:,.2f}"


def report_html(plan_doc: dict[str, Any] | None, pareto_doc: dict[str, Any] | None = None, *,
                title: str | None = None) -> str:
    """The whole report as one HTML document (UTF-8 text, no external resources)."""
    plan = (plan_doc or {}).get("plan")
    if title is None:
        title = (f"planner: {plan['model']} on {plan['num_gpus']} x {plan['gpu']}" if plan
                 else "planner: cost-vs-time report")
    body = [f"<h1>{_e(title)}</h1>"]
    if plan_doc is not None:
        body += plan_sections(plan_doc, pareto_doc)
    body += pareto_sections(pareto_doc, plan_doc)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_e(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def plan_sections(doc: dict[str, Any], pareto_doc: dict[str, Any] | None = None) -> list[str]:
    """Summary, memory, constraints, alternatives; conflicts when infeasible."""
    status = doc["status"]
    out = [f"<p>status: <span class=\"status {_e(status)}\" id=\"status\">{_e(status)}</span>"
           + ("" if status in ("optimal", "infeasible") else " (not proven optimal)") + "</p>"]
    plan = doc.get("plan")
    if plan is None:
        out += ["<h2>No plan satisfies the request</h2>", conflicts_table(doc["conflicts"])]
        return out + _notes(doc.get("notes", []))
    out += ["<h2>Plan</h2>", summary_table(plan),
            "<h2>Memory per GPU against capacity</h2>", memory_svg(plan, doc.get("binding", [])),
            "<h2>Constraints at the plan</h2>",
            f"<p class=\"caption\">{_e('; '.join(render.BINDING_LEGEND))}</p>",
            binding_table(doc.get("binding", [])),
            "<h2>Alternatives</h2>",
            "<p class=\"caption\">the best plan per other method, and on other GPU types</p>",
            alternatives_table(doc.get("alternatives", []), chart_points(pareto_doc, doc))]
    notes = list(doc.get("notes", [])) + list(plan["memory"].get("notes", []))
    notes += list(plan["throughput"].get("notes", [])) + list(plan["cost"].get("notes", []))
    return out + _notes(notes)


def _notes(notes: list[str]) -> list[str]:
    if not notes:
        return []
    return ["<ul class=\"notes\">" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>"]


def summary_rows(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """The plan as (field, text) rows: what `planner plan` prints, one line each."""
    tc = TrainConfig.model_validate(plan["config"])
    mem, t, cost = plan["memory"], plan["throughput"], plan["cost"]
    hardware = (f"buy {plan['num_gpus']} x {plan['gpu']} in {plan['num_hosts']} x "
                f"{plan['platform']}" if plan["platform"] else
                f"rent {plan['num_gpus']} x {plan['gpu']} ({plan['num_hosts']} node(s) of the "
                "provider)")
    if "mfu" in t:
        speed = (f"{t['tokens_per_s']:,.0f} tokens/s, MFU {t['mfu']:.1%}, limited by "
                 f"{t['limited_by']} (stack {t['stack']})")
    else:
        speed = (f"{t['tokens_per_s']:,.0f} tokens/s, {t['step_time_s']:.3g} s per iteration, "
                 f"limited by {t['limited_by']}")
    return [
        ("model", plan["model"]),
        ("hardware", hardware),
        ("layout", render._layout(tc)),
        ("workload", tc.workload + render._rl_line(plan.get("rl"))),
        ("method", f"{render.method_text(tc)}, optimizer {tc.optimizer}, {mem['precision']}"),
        ("batch", render.batch_line(tc)),
        ("memory", f"{mem['per_gpu_gib']:.2f} of {mem['capacity_gib']:g} GiB per GPU (peak in "
                   f"{mem['peak_phase']}); host RAM {mem['host_ram_gib']:.0f} GiB per host"),
        ("speed", speed),
        ("job", f"{cost['job']}: {_hours(plan['time_hours'])} hours"),
        ("cost", f"{_usd(cost['usd'])}: {cost['covers']}" if cost["usd"] is not None
         else f"not offered: {cost.get('reason')}"),
    ]


def summary_table(plan: dict[str, Any]) -> str:
    """The plan's summary rows as an HTML table."""
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in summary_rows(plan))
    return (f"<div class=\"scroll\"><table class=\"kv\" id=\"summary\"><thead><tr><th>field</th>"
            f"<th>value</th></tr></thead><tbody>{rows}</tbody></table></div>")


def _table(table_id: str, header: list[str], rows: list[tuple[str, list[tuple[str, bool]]]],
           empty: str) -> str:
    """A table with a header and rows of (css class, [(text, numeric)]); 'empty' when no rows."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        (f"<tr class=\"{_e(cls)}\">" if cls else "<tr>")
        + "".join(f"<td class=\"num\">{_e(v)}</td>" if num else f"<td>{_e(v)}</td>"
                  for v, num in cells) + "</tr>"
        for cls, cells in rows)
    table = (f"<div class=\"scroll\"><table id=\"{_e(table_id)}\"><thead><tr>{head}</tr></thead>"
             f"<tbody>{body}</tbody></table></div>")
    return table + ("" if rows else f"<p class=\"empty\">{_e(empty)}</p>")


def binding_table(binding: list[dict[str, Any]]) -> str:
    """The plan's rules with usage, limit and slack as an HTML table."""
    rows = [("binding" if b["binding"] else "",
             [(b["name"], False), (render._num(b["used"]), True), (render._num(b["limit"]), True),
              (b["unit"], False), (f"{b['slack']:.0%}", True),
              (render.rule_mark(b), False), (b.get("relaxed") or "", False)])
            for b in binding]
    return _table("binding", ["rule", "used", "limit", "unit", "slack", "binding", "if relaxed"],
                  rows,
                  "no constraints reported")


def _setup_cells(a: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(f"{a['num_gpus']} x {a['gpu']}", False), (a.get("platform") or "rented", False),
            (method_label(a["method"], a.get("lora_rank")), False),
            (f"{a['sharding']}/{a['offload']}", False),
            (f"tp{a['tp']} pp{a['pp']}", False), (f"{a['per_gpu_gib']:.1f}", True),
            (f"{a['tokens_per_s']:,.0f}", True), (_hours(a["time_hours"]), True),
            (_usd(a["cost_usd"]), True)]


SETUP_HEADER = ["GPUs", "host", "method", "sharding/offload", "layout", "GiB/GPU", "tokens/s",
                "hours", "cost"]


def alternatives_table(alternatives: list[dict[str, Any]],
                       points: list[dict[str, Any]] | None = None) -> str:
    """One row per alternative; with the chart's points, whether another point dominates it."""
    faint = {p["key"] for p in points or [] if p["dominated"]}
    rows = [("dominated" if setup_key(a) in faint else "",
             [*_setup_cells(a), ("dominated" if setup_key(a) in faint else "non-dominated",
                                 False)])
            for a in alternatives]
    return _table("alternatives", [*SETUP_HEADER, "cost vs time"], rows,
                  "no alternatives found")


def conflicts_table(conflicts: list[dict[str, Any]]) -> str:
    """The conflicts and their smallest fixes as an HTML table."""
    rows = [("", [(c["name"], False), (c["detail"], False), (c["fix"], False)])
            for c in conflicts]
    return _table("conflicts", ["rule", "conflict", "smallest fix"], rows,
                  "no conflicts reported")


def pareto_sections(pareto_doc: dict[str, Any] | None,
                    plan_doc: dict[str, Any] | None) -> list[str]:
    """The report's cost-vs-time HTML sections (chart and table)."""
    points = chart_points(pareto_doc, plan_doc)
    out = ["<h2>Cost vs time</h2>",
           "<p class=\"caption\">the Pareto front (each point the cheapest plan at least 1 % "
           "faster than the previous one) as a step line; the plan ringed; other candidates "
           "(alternatives) faint when another point is no dearer and no slower</p>",
           pareto_svg(points, title=chart_title(pareto_doc))]
    if pareto_doc is not None:
        pts = pareto_doc.get("points", [])
        rows = [("", _setup_cells(a)) for a in pts]
        out += ["<h2>Pareto-optimal plans</h2>",
                _table("pareto-points", SETUP_HEADER, rows, "no plan satisfies the request")]
        unproven = [f"{a['num_gpus']} x {a['gpu']}" for a in pts
                    if a.get("status", "optimal") != "optimal"]
        if unproven:
            out.append("<p class=\"caption\">feasible, not proven optimal (the solver time "
                       "limit stopped the tie-break): " + _e(", ".join(unproven))
                       + "</p>")
    return out


# ---- SVG: memory bars -----------------------------------------------------------------------

def memory_bars(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The bars of the memory chart: one per GPU (all GPUs of a plain plan hold the same), or
    one per phase for RL/preference workloads, labelled with the GPUs that run it. The peak
    phase is stacked by term (device level: terms + allocator cache + CUDA context); other
    phases are one segment, their total (the model reports terms at the peak only)."""
    mem = plan["memory"]
    terms = [(k, v) for k, v in mem["breakdown_gib"].items() if v > 0.0005]
    phases = mem.get("phases_gib") or {}
    per_phase = plan.get("rl") is not None or plan["workload"] not in ("sft", "pretrain")
    if not per_phase or not phases:
        return [{"label": f"each of {plan['num_gpus']} x {plan['gpu']}",
                 "sub": f"peak in {mem['peak_phase']}", "segments": terms,
                 "total": mem["per_gpu_gib"]}]
    groups = mem.get("phase_groups") or {}
    bars = []
    for name, total in phases.items():
        peak = name == mem["peak_phase"]
        bars.append({"label": name, "sub": (groups.get(name, "") + (" (peak)" if peak else "")),
                     "segments": terms if peak else [("phase total", total)], "total": total})
    return bars


def memory_svg(plan: dict[str, Any], binding: list[dict[str, Any]] | None = None) -> str:
    """Horizontal stacked bars (GiB) with the capacity as a red line and the planner's limit
    (capacity less the margin) dashed, and a legend of the terms with their GiB."""
    mem = plan["memory"]
    bars = memory_bars(plan)
    cap = float(mem["capacity_gib"])
    limit = next((b["limit"] for b in binding or [] if b["name"] == "gpu_memory"), None)
    top = max([cap, *(b["total"] for b in bars)]) * 1.04
    width, left, right, bar_h, gap, top_pad = 900, 210, 80, 26, 14, 40
    scale = (width - left - right) / top
    stacked = next((b for b in bars if len(b["segments"]) > 1), bars[0])
    legend_items = stacked["segments"]
    colour = {k: TERM_COLOURS[i % len(TERM_COLOURS)] for i, (k, _) in enumerate(legend_items)}
    colour["phase total"] = OTHER_PHASE_COLOUR
    axis_y = top_pad + len(bars) * (bar_h + gap)
    cols = 3
    legend_rows = math.ceil(len(legend_items) / cols) + (1 if len(bars) > 1 else 0)
    height = axis_y + 40 + legend_rows * 18 + 6
    out = [f"<svg id=\"memory-chart\" class=\"memory\" width=\"{width}\" height=\"{height}\" "
           f"viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"per-GPU memory\">"]
    for t in nice_ticks(0, top, log=False, count=8):
        x = left + t * scale
        out.append(f"<line x1=\"{_f(x)}\" y1=\"{top_pad - 6}\" x2=\"{_f(x)}\" y2=\"{axis_y}\" "
                   "stroke=\"#e4e4e4\"/>"
                   f"<text x=\"{_f(x)}\" y=\"{axis_y + 14}\" font-size=\"11\" "
                   f"text-anchor=\"middle\" fill=\"#555\">{t:g}</text>")
    out.append(f"<text x=\"{_f(left + (width - left - right) / 2)}\" y=\"{axis_y + 30}\" "
               "font-size=\"12\" text-anchor=\"middle\" fill=\"#333\">GiB per GPU (device "
               "level)</text>")
    for i, bar in enumerate(bars):
        y = top_pad + i * (bar_h + gap)
        out.append(f"<g class=\"bar\" data-total-gib=\"{bar['total']:.3f}\">")
        out.append(f"<text x=\"{left - 8}\" y=\"{_f(y + 11)}\" font-size=\"12\" "
                   f"text-anchor=\"end\" fill=\"#222\">{_e(bar['label'])}</text>")
        out.append(f"<text x=\"{left - 8}\" y=\"{_f(y + 24)}\" font-size=\"10\" "
                   f"text-anchor=\"end\" fill=\"#777\">{_e(bar['sub'])}</text>")
        x = float(left)
        for name, gib in bar["segments"]:
            w = gib * scale
            out.append(f"<rect class=\"segment\" x=\"{_f(x)}\" y=\"{_f(y)}\" width=\"{_f(w)}\" "
                       f"height=\"{bar_h}\" fill=\"{colour.get(name, OTHER_PHASE_COLOUR)}\">"
                       f"<title>{_e(name.replace('_', ' '))}: {gib:.2f} GiB</title></rect>")
            x += w
        lines = [left + v * scale for v in (cap, limit) if v is not None]
        if any(x - 4 < v < x + 70 for v in lines):  # keep the figure clear of the red lines
            x = max(lines)
        out.append(f"<text class=\"total\" x=\"{_f(x + 4)}\" y=\"{_f(y + 17)}\" "
                   f"font-size=\"11\" fill=\"#222\">{bar['total']:.2f} GiB</text></g>")
    out.append(_vline("capacity", left + cap * scale, top_pad - 8, axis_y, CAPACITY_COLOUR,
                      f"capacity {cap:g} GiB", dashed=False))
    if limit is not None and limit < cap:
        out.append(_vline("limit", left + limit * scale, top_pad - 8, axis_y, CAPACITY_COLOUR,
                          f"limit {limit:g} GiB (less the margin)", dashed=True))
    out += _memory_legend(legend_items, colour, y=axis_y + 44, cols=cols,
                          other_phases=len(bars) > 1)
    out.append("</svg>")
    return "".join(out)


def _memory_legend(items: list[tuple[str, float]], colour: dict[str, str], *, y: float,
                   cols: int, other_phases: bool) -> list[str]:
    """The memory chart's legend from ``y`` down: a swatch and GiB per term, ``cols`` a row,
    and a row for the other phases' totals when ``other_phases``."""
    out = []
    for j, (name, gib) in enumerate(items):
        lx, yy = 20 + (j % cols) * 290, y + (j // cols) * 18
        out.append(f"<rect class=\"swatch\" x=\"{lx}\" y=\"{yy - 10}\" width=\"12\" "
                   f"height=\"12\" fill=\"{colour.get(name, OTHER_PHASE_COLOUR)}\"/>"
                   f"<text x=\"{lx + 18}\" y=\"{yy}\" font-size=\"11\" fill=\"#333\">"
                   f"{_e(name.replace('_', ' '))} {gib:.2f} GiB</text>")
    if other_phases:
        yy = y + math.ceil(len(items) / cols) * 18
        out.append(f"<rect class=\"swatch\" x=\"20\" y=\"{yy - 10}\" width=\"12\" height=\"12\" "
                   f"fill=\"{OTHER_PHASE_COLOUR}\"/><text x=\"38\" y=\"{yy}\" font-size=\"11\" "
                   "fill=\"#333\">other phases: their device-level total (terms at the peak "
                   "phase only)</text>")
    return out


def _vline(cls: str, x: float, y0: float, y1: float, colour: str, label: str, *,
           dashed: bool) -> str:
    dash = " stroke-dasharray=\"5,3\"" if dashed else ""
    anchor_y = y0 - 16 if not dashed else y0 - 2  # two label rows above the bars
    return (f"<g class=\"{cls}\"><line x1=\"{_f(x)}\" y1=\"{_f(y0)}\" x2=\"{_f(x)}\" "
            f"y2=\"{_f(y1)}\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>"
            f"<text x=\"{_f(x - 4)}\" y=\"{_f(anchor_y)}\" font-size=\"11\" "
            f"text-anchor=\"end\" fill=\"{colour}\">{_e(label)}</text></g>")


# ---- SVG: cost vs time ----------------------------------------------------------------------

class _Axis:
    """Data -> pixel on one axis, linear or log, padded so points sit inside the frame."""

    def __init__(self, values: list[float], lo_px: float, hi_px: float) -> None:
        self.log = use_log(values)
        lo, hi = min(values), max(values)
        if self.log:
            lo, hi = lo / 1.25, hi * 1.25
        else:
            pad = (hi - lo) * 0.08 or max(abs(hi) * 0.1, 1e-3)
            lo, hi = max(lo - pad, 0.0) if lo >= 0 else lo - pad, hi + pad
        self.lo, self.hi, self.lo_px, self.hi_px = lo, hi, lo_px, hi_px

    def _t(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def __call__(self, v: float) -> float:
        a, b = self._t(self.lo), self._t(self.hi)
        return self.lo_px + (self._t(v) - a) / (b - a) * (self.hi_px - self.lo_px)

    def ticks(self) -> list[float]:
        return nice_ticks(self.lo, self.hi, log=self.log)



def pareto_svg(points: list[dict[str, Any]], *, title: str = "cost vs time") -> str:
    """Cost (USD, y) against job time (hours, x): the non-dominated points joined by a step
    line (going right from a point until the next, cheaper one), dominated candidates faint,
    the chosen plan ringed, every point labelled 'GPU x count, method'."""
    width, height = 900, 460
    left, right, top, bottom = 80, 30, 34, 56
    out = [f"<svg id=\"pareto-chart\" class=\"pareto\" width=\"{width}\" height=\"{height}\" "
           f"viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"cost vs time\">",
           f"<rect x=\"{left}\" y=\"{top}\" width=\"{width - left - right}\" "
           f"height=\"{height - top - bottom}\" fill=\"#fbfbfd\" stroke=\"#bbb\"/>",
           f"<text x=\"{width / 2:.0f}\" y=\"18\" font-size=\"13\" text-anchor=\"middle\" "
           f"fill=\"#222\">{_e(title)}</text>"]
    if not points:
        out.append(f"<text x=\"{width / 2:.0f}\" y=\"{height / 2:.0f}\" font-size=\"14\" "
                   "text-anchor=\"middle\" fill=\"#666\">no plan satisfies the request</text>")
        return "".join(out) + "</svg>"
    xs = _Axis([p["time_hours"] for p in points], left, width - right)
    ys = _Axis([p["cost_usd"] for p in points], height - bottom, top)
    for t in xs.ticks():
        x = xs(t)
        out.append(f"<line x1=\"{_f(x)}\" y1=\"{top}\" x2=\"{_f(x)}\" y2=\"{height - bottom}\" "
                   f"stroke=\"#e6e6e6\"/><text x=\"{_f(x)}\" y=\"{height - bottom + 16}\" "
                   f"font-size=\"11\" text-anchor=\"middle\" fill=\"#555\">{t:g}</text>")
    for t in ys.ticks():
        y = ys(t)
        out.append(f"<line x1=\"{left}\" y1=\"{_f(y)}\" x2=\"{width - right}\" y2=\"{_f(y)}\" "
                   f"stroke=\"#e6e6e6\"/><text x=\"{left - 6}\" y=\"{_f(y + 4)}\" "
                   f"font-size=\"11\" text-anchor=\"end\" fill=\"#555\">{usd_tick(t, 'g')}</text>")
    out.append(f"<text x=\"{(left + width - right) / 2:.0f}\" y=\"{height - 14}\" "
               "font-size=\"12\" text-anchor=\"middle\" fill=\"#333\">"
               + _e(TIME_AXIS + (LOG_NOTE if xs.log else "")) + "</text>")
    out.append(f"<text x=\"16\" y=\"{(top + height - bottom) / 2:.0f}\" font-size=\"12\" "
               f"text-anchor=\"middle\" fill=\"#333\" transform=\"rotate(-90 16 "
               f"{(top + height - bottom) / 2:.0f})\">"
               + _e(COST_AXIS + (LOG_NOTE if ys.log else "")) + "</text>")
    best = front(points)
    path = f"M{_f(xs(best[0]['time_hours']))},{_f(ys(best[0]['cost_usd']))}"
    for p in best[1:]:
        path += f" H{_f(xs(p['time_hours']))} V{_f(ys(p['cost_usd']))}"
    out.append(f"<path class=\"front-line\" d=\"{path}\" fill=\"none\" stroke=\"{FRONT_COLOUR}\" "
               "stroke-width=\"2\"/>")
    pixels = [(xs(p["time_hours"]), ys(p["cost_usd"]), p["label"]) for p in points]
    order = label_order(points)
    legend_x, legend_y = width - right - 190, top + 8
    spots = place_labels([pixels[i] for i in order],
                         bounds=(left + 2, top + 2, width - right - 2, height - bottom - 2),
                         obstacles=[(legend_x - 4, legend_y - 12, width - right, legend_y + 48)],
                         char_px=LABEL_CHAR_PX, required=required_labels(points))
    where = dict(zip(order, spots, strict=True))
    for i in sorted(range(len(points)), key=lambda i: not points[i]["dominated"]):
        out.append(_point_svg(points[i], pixels[i][0], pixels[i][1], where[i]))  # front on top
    out.append(_pareto_legend(legend_x, legend_y))
    return "".join(out) + "</svg>"


def _point_svg(p: dict[str, Any], x: float, y: float,
               spot: tuple[float, float, bool] | None) -> str:
    dominated = p["dominated"]
    cls = "point dominated" if dominated else "point front"
    fill, opacity = (FAINT_COLOUR, "0.45") if dominated else (FRONT_COLOUR, "1")
    tip = (f"{p['label']}: {_usd(p['cost_usd'])}, {_hours(p['time_hours'])} h"
           + (" (dominated)" if dominated else "") + (" (the plan)" if p["chosen"] else ""))
    out = [f"<g class=\"{cls}\"><circle cx=\"{_f(x)}\" cy=\"{_f(y)}\" r=\"5\" fill=\"{fill}\" "
           f"fill-opacity=\"{opacity}\"><title>{_e(tip)}</title></circle>"]
    if p["chosen"]:
        out.append(f"<circle class=\"chosen\" cx=\"{_f(x)}\" cy=\"{_f(y)}\" r=\"10\" "
                   f"fill=\"none\" stroke=\"{PLAN_COLOUR}\" stroke-width=\"2.5\"/>")
    if spot is None:  # a faint candidate with no free spot: its tooltip names it
        return "".join(out) + "</g>"
    dx, dy, rightwards = spot
    colour = "#999" if dominated else "#222"
    if abs(dy) > 15:  # a label moved away from a crowd: a leader line back to its point
        out.append(f"<line class=\"leader\" x1=\"{_f(x)}\" y1=\"{_f(y)}\" x2=\"{_f(x + dx)}\" "
                   f"y2=\"{_f(y + dy - 4)}\" stroke=\"{colour}\" stroke-width=\"0.7\"/>")
    out.append(f"<text class=\"label\" x=\"{_f(x + dx)}\" y=\"{_f(y + dy)}\" font-size=\"11\" "
               f"text-anchor=\"{'start' if rightwards else 'end'}\" "
               f"fill=\"{colour}\">{_e(p['label'])}</text></g>")
    return "".join(out)


def _pareto_legend(x: float, y: float) -> str:
    items = [(f"<line x1=\"{_f(x)}\" y1=\"{_f(y)}\" x2=\"{_f(x + 18)}\" y2=\"{_f(y)}\" "
              f"stroke=\"{FRONT_COLOUR}\" stroke-width=\"2\"/><circle cx=\"{_f(x + 9)}\" "
              f"cy=\"{_f(y)}\" r=\"4\" fill=\"{FRONT_COLOUR}\"/>", "Pareto front"),
             (f"<circle cx=\"{_f(x + 9)}\" cy=\"{_f(y + 18)}\" r=\"4\" fill=\"{FAINT_COLOUR}\" "
              "fill-opacity=\"0.45\"/>", "dominated candidate"),
             (f"<circle cx=\"{_f(x + 9)}\" cy=\"{_f(y + 36)}\" r=\"8\" fill=\"none\" "
              f"stroke=\"{PLAN_COLOUR}\" stroke-width=\"2.5\"/>", "the plan")]
    out = ["<g class=\"legend\">"]
    for i, (mark, text) in enumerate(items):
        out.append(mark + f"<text x=\"{_f(x + 26)}\" y=\"{_f(y + 4 + 18 * i)}\" "
                   f"font-size=\"11\" fill=\"#333\">{_e(text)}</text>")
    return "".join(out) + "</g>"
