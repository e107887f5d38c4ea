"""Cost-vs-time pictures of plans: the points of a chart (pure) and a matplotlib file writer.

The chart's points are the Pareto sweep (``pareto_doc``) plus the plan and its alternatives
(``plan_doc``: the best plan per other method and on other GPU types), merged, with every point
marked dominated or not. matplotlib is an optional extra (``pip install '.[plot]'``), imported
only when a file is written; ``planner.outputs.report`` draws the same points as hand-written SVG.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from planner.catalog.request import method_label
from planner.errors import PlannerError

PLOT_SUFFIXES = (".png", ".svg")
MISSING_MATPLOTLIB = "--plot needs matplotlib: install with pip install '.[plot]'"
FRONT_COLOUR = "#1f5fa8"
PLAN_COLOUR = "#e07b00"
FAINT_COLOUR = "#8c8c8c"
LOG_NOTE = ", log scale"  # appended to the label of a log axis (PNG, SVG and HTML charts)
TIME_AXIS = "time of the job (hours)"
COST_AXIS = "cost (USD)"


def point_label(p: dict[str, Any]) -> str:
    """'rtx-4090 x 2, lora r16': GPU type x count, and the method."""
    return f"{p['gpu']} x {p['num_gpus']}, {method_label(p['method'], p.get('lora_rank'))}"


def setup_key(p: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two found setups the same point: hardware, method, cost and time."""
    return (p["gpu"], p.get("platform"), p["num_gpus"], p["method"], p.get("lora_rank"),
            round(p["cost_usd"], 2), round(p["time_hours"], 6))


def dominates(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """a is no dearer and no slower than b, and better in one of the two."""
    ca, ta, cb, tb = a["cost_usd"], a["time_hours"], b["cost_usd"], b["time_hours"]
    return ca <= cb and ta <= tb and (ca < cb or ta < tb)


def chart_points(pareto_doc: dict[str, Any] | None, plan_doc: dict[str, Any] | None = None
                 ) -> list[dict[str, Any]]:
    """The points of the cost-vs-time chart, fastest first: each a dict with ``label``,
    ``cost_usd``, ``time_hours``, ``source`` ('pareto', 'plan' or 'alternative'), ``chosen``
    (the plan of ``plan_doc``) and ``dominated`` (another point is no dearer, no slower and
    better in one). Identical setups found twice are shown once."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}

    def add(p: dict[str, Any], source: str, chosen: bool = False) -> None:
        key = setup_key(p)
        if key in found:
            found[key]["chosen"] = found[key]["chosen"] or chosen
            return
        found[key] = {"key": key, "label": point_label(p), "cost_usd": float(p["cost_usd"]),
                      "time_hours": float(p["time_hours"]), "source": source, "chosen": chosen,
                      "gpu": p["gpu"], "num_gpus": p["num_gpus"], "method": p["method"],
                      "tokens_per_s": p.get("tokens_per_s")}

    for p in (pareto_doc or {}).get("points", []):
        add(p, "pareto")
    if plan_doc and plan_doc.get("plan"):
        plan = plan_doc["plan"]
        add({**plan, "cost_usd": plan["cost"]["usd"] or 0.0}, "plan", chosen=True)
        for a in plan_doc.get("alternatives", []):
            add(a, "alternative")
    points = list(found.values())
    for p in points:
        p["dominated"] = any(dominates(q, p) for q in points if q is not p)
    return sorted(points, key=lambda p: (p["time_hours"], p["cost_usd"], p["label"]))


def front(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-dominated points, fastest (dearest) first: the corners of the step line."""
    return [p for p in points if not p["dominated"]]


def use_log(values: list[float]) -> bool:
    """A log axis when positive values span more than a factor of 10."""
    pos = [v for v in values if v > 0]
    return len(pos) == len(values) and len(pos) > 1 and max(pos) / min(pos) > 10


def chart_title(pareto_doc: dict[str, Any] | None) -> str:
    """The cost-vs-time chart's title, naming the job and basis of the Pareto document."""
    pts = (pareto_doc or {}).get("points") or []
    if not pts:
        return "cost vs time"
    return f"cost vs time ({pts[0]['job']}, {pts[0]['basis']})"


def check_target(path: str | Path) -> Path:
    """The --plot file, checked before any solving: a .png or .svg name, matplotlib present."""
    target = Path(path)
    if target.suffix.lower() not in PLOT_SUFFIXES:
        raise PlannerError(f"--plot {str(path)!r} must end in .png or .svg")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlannerError(MISSING_MATPLOTLIB) from None
    return target


def write_plot(path: str | Path, pareto_doc: dict[str, Any] | None,
               plan_doc: dict[str, Any] | None = None) -> Path:
    """Draw cost (USD) against time (hours) into a PNG or SVG file: the Pareto front as a step
    line through its labelled points, dominated candidates faint, the chosen plan ringed."""
    target = check_target(path)
    import matplotlib  # optional and heavy: loaded only when a plot is drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points = chart_points(pareto_doc, plan_doc)
    fig = Figure(figsize=(9, 5.5), dpi=110)
    FigureCanvasAgg(fig)  # no pyplot: no global state, no display needed
    ax = fig.add_subplot()
    ax.set_title(chart_title(pareto_doc), fontsize=10)
    _draw(ax, points)
    meta = {"Date": None} if target.suffix.lower() == ".svg" else {"Software": None}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "planner"}):
        fig.savefig(target, format=target.suffix.lower()[1:], metadata=meta)
    return target


def _draw(ax: Any, points: list[dict[str, Any]]) -> None:
    ax.set_xlabel(TIME_AXIS)
    ax.set_ylabel(COST_AXIS)
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    if not points:
        ax.text(0.5, 0.5, "no plan satisfies the request", ha="center", va="center",
                transform=ax.transAxes)
        return
    if use_log([p["time_hours"] for p in points]):
        ax.set_xscale("log")
    if use_log([p["cost_usd"] for p in points]):
        ax.set_yscale("log")
    faint = [p for p in points if p["dominated"]]
    best = front(points)
    if faint:
        ax.scatter([p["time_hours"] for p in faint], [p["cost_usd"] for p in faint],
                   color=FAINT_COLOUR, alpha=0.45, s=22, label="dominated candidates", zorder=2)
    ax.step([p["time_hours"] for p in best], [p["cost_usd"] for p in best], where="post",
            color=FRONT_COLOUR, linewidth=1.4, zorder=3)
    ax.scatter([p["time_hours"] for p in best], [p["cost_usd"] for p in best],
               color=FRONT_COLOUR, s=30, label="Pareto front", zorder=4)
    chosen = [p for p in points if p["chosen"]]
    if chosen:
        ax.scatter([p["time_hours"] for p in chosen], [p["cost_usd"] for p in chosen],
                   facecolors="none", edgecolors=PLAN_COLOUR, s=140, linewidths=1.8,
                   label="the plan", zorder=5)
    _log_ticks(ax)
    ax.yaxis.set_major_formatter(lambda v, _pos: usd_tick(v))
    legend = ax.legend(loc="upper right", fontsize=8, frameon=False)
    ax.figure.tight_layout()
    _annotate(ax, points, legend)


def _log_ticks(ax: Any) -> None:
    """Plain 1-2-5 tick labels on log axes (not 2 x 10^0), and the axis label says so."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    for axis, lim, scale in ((ax.xaxis, ax.get_xlim(), ax.get_xscale()),
                             (ax.yaxis, ax.get_ylim(), ax.get_yscale())):
        if scale == "log":
            axis.set_label_text(axis.get_label_text() + LOG_NOTE)
            axis.set_major_locator(FixedLocator(nice_ticks(*lim, log=True)))
            axis.set_major_formatter(lambda v, _pos: f"{v:g}")
            axis.set_minor_locator(NullLocator())
            axis.set_minor_formatter(NullFormatter())


def _annotate(ax: Any, points: list[dict[str, Any]], legend: Any) -> None:
    """Label every point, placed in pixels (matplotlib's y runs up; place_labels' down)."""
    fig = ax.figure
    height = fig.bbox.height
    box = ax.get_window_extent()
    leg = legend.get_window_extent(fig.canvas.get_renderer())
    xy = ax.transData.transform([(p["time_hours"], p["cost_usd"]) for p in points])
    order = label_order(points)
    spots = place_labels([(xy[i][0], height - xy[i][1], points[i]["label"]) for i in order],
                         bounds=(box.x0 + 2, height - box.y1 + 2, box.x1 - 2, height - box.y0 - 2),
                         obstacles=[(leg.x0, height - leg.y1, leg.x1, height - leg.y0)],
                         char_px=5.9, line_px=11.0, required=required_labels(points))
    to_pt = 72.0 / fig.dpi
    for i, spot in zip(order, spots, strict=True):
        if spot is None:  # a faint candidate with no free spot: left unlabelled
            continue
        dx, dy, rightwards = spot
        p = points[i]
        faint = p["dominated"]
        ax.annotate(p["label"], (p["time_hours"], p["cost_usd"]), textcoords="offset points",
                    xytext=(dx * to_pt, -dy * to_pt), ha="left" if rightwards else "right",
                    va="baseline", fontsize=7, color=FAINT_COLOUR if faint else "#222222",
                    alpha=0.8 if faint else 1.0, zorder=6,
                    arrowprops=({"arrowstyle": "-", "color": FAINT_COLOUR, "linewidth": 0.6}
                                if abs(dy) > 15 else None))


def usd_tick(v: float, digits: str = ".3g") -> str:
    """A dollar axis label: $1.2M, $35k, $950 (``digits``: format of the M/k mantissa; the HTML
    report's round ticks use "g")."""
    if v >= 1e6:
        return f"${v / 1e6:{digits}}M"
    if v >= 1e4:
        return f"${v / 1e3:{digits}}k"
    return f"${v:,.0f}" if v >= 10 or v == 0 else f"${v:.3g}"


# Label positions around a point (dx, dy of the baseline start, text to the right or left),
# nearest first; further rings get a leader line.
_OFFSETS = [(9, -7), (9, 15), (-9, -7), (-9, 15)] + [
    (dx, dy) for ring in range(1, 13) for dy in (-7 - 13 * ring, 15 + 13 * ring) for dx in (9, -9)]


Box = tuple[float, float, float, float]


def place_labels(anchors: list[tuple[float, float, str]], *, bounds: Box,
                 obstacles: list[Box] = (), char_px: float = 6.2, line_px: float = 12.0,
                 marker_px: float = 8.0, required: int | None = None
                 ) -> list[tuple[float, float, bool] | None]:
    """Greedy label placement in pixel space (y down): for each (x, y, text) anchor, in order
    of priority, the first offset whose box stays inside ``bounds`` (x0, y0, x1, y1) and
    overlaps no label placed before, no marker and no obstacle (such as a legend). The first
    ``required`` anchors (default all) take the least overlapping spot when none is free; the
    others get None (no label: where every spot is taken, an optional label is left out rather
    than drawn over another). Returns (dx, dy, right) per anchor: the baseline start offset
    and whether text runs rightwards."""
    markers = [(x - marker_px, y - marker_px, x + marker_px, y + marker_px)
               for x, y, _ in anchors] + list(obstacles)
    placed: list[Box] = []
    out: list[tuple[float, float, bool] | None] = []
    x0, y0, x1, y1 = bounds
    required = len(anchors) if required is None else required
    for index, (x, y, text) in enumerate(anchors):
        w = len(text) * char_px
        best, best_cost = None, math.inf
        for dx, dy in _OFFSETS:
            left = x + dx if dx > 0 else x + dx - w
            box = (left, y + dy - line_px + 2, left + w, y + dy + 3)
            inside = box[0] >= x0 and box[2] <= x1 and box[1] >= y0 and box[3] <= y1
            cost = sum(_overlap(box, o) for o in placed + markers) + (0 if inside else 1e6)
            if cost < best_cost:
                best, best_cost = (dx, dy, box), cost
            if cost == 0:
                break
        if best_cost > 0 and index >= required:
            out.append(None)
            continue
        dx, dy, box = best
        placed.append(box)
        out.append((dx, dy, dx > 0))
    return out


def required_labels(points: list[dict[str, Any]]) -> int:
    """How many labels (in label_order) must be drawn: the plan's and the front's."""
    return sum(1 for p in points if p["chosen"] or not p["dominated"])


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def label_order(points: list[dict[str, Any]]) -> list[int]:
    """Indices of points in labelling priority: the plan, the front, then the faint ones."""
    return sorted(range(len(points)), key=lambda i: (not points[i]["chosen"],
                                                     points[i]["dominated"], i))


def nice_ticks(lo: float, hi: float, *, log: bool, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: 1-2-5 steps on a linear axis, 1-2-5 x 10^k on a
    log axis (decades only when the range is wide)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    if log:
        k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        mults = (1, 2, 5) if k1 - k0 <= 3 else (1,)
        ticks = [m * 10.0 ** k for k in range(k0, k1 + 1) for m in mults]
        return [t for t in ticks if lo * 0.999 <= t <= hi * 1.001]
    raw = (hi - lo) / max(count, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    n = int(math.floor((hi - first) / step + 1e-9)) + 1
    return [round(first + i * step, 12) for i in range(n)]
