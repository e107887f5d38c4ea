"""planner.outputs.plot: the chart's points (dominance, merging), label placement, PNG/SVG files,
and `planner pareto --plot` (including the one-line error without matplotlib)."""

from __future__ import annotations

import json
import sys

import pytest

from planner.cli import main
from planner.errors import PlannerError
from planner.outputs.plot import (
    chart_points,
    check_target,
    dominates,
    front,
    nice_ticks,
    place_labels,
    point_label,
    use_log,
    write_plot,
)


def setup(gpu: str, n: int, method: str, cost: float, hours: float, rank: int | None = None
          ) -> dict:
    """A point as pareto_doc / plan_doc alternatives have it (only the fields the chart uses)."""
    return {"gpu": gpu, "platform": "ws", "num_gpus": n, "method": method, "lora_rank": rank,
            "zero_stage": 0, "sharding": "zero0", "offload": "none", "tp": 1, "pp": 1,
            "per_gpu_gib": 10.0, "tokens_per_s": 1000.0, "time_hours": hours, "cost_usd": cost}


FRONT = [setup("rtx-3090", 1, "lora", 2000, 9.0, 16), setup("rtx-3090", 2, "lora", 2900, 4.6, 16),
         setup("rtx-4090", 2, "lora", 5100, 2.0, 16)]
PARETO = {"points": [p | {"job": "1e8 tokens", "basis": "buy"} for p in FRONT]}
PLAN = {"status": "optimal",
        "plan": FRONT[0] | {"cost": {"usd": 2000.0}, "model": "m"},
        "alternatives": [setup("rtx-3090", 1, "full", 2000, 19.5),  # same cost, slower
                         setup("rtx-4090", 1, "lora", 3200, 3.9, 16),  # on the front
                         setup("rtx-4090", 2, "lora", 5100, 2.0, 16)]}  # = a Pareto point


def test_point_label_is_gpu_count_and_method():
    assert point_label(FRONT[0]) == "rtx-3090 x 1, lora r16"
    assert point_label(PLAN["alternatives"][0]) == "rtx-3090 x 1, full"


def test_chart_points_merge_sources_and_mark_dominated():
    pts = chart_points(PARETO, PLAN)
    # 3 Pareto points + the plan (already a Pareto point) + 3 alternatives, one a Pareto point
    assert len(pts) == 5
    by = {p["label"]: p for p in pts}
    assert by["rtx-3090 x 1, full"]["dominated"] is True  # $2000 at 9 h beats $2000 at 19.5 h
    assert by["rtx-4090 x 1, lora r16"]["dominated"] is False
    assert by["rtx-3090 x 1, lora r16"]["chosen"] is True
    assert by["rtx-3090 x 1, lora r16"]["source"] == "pareto"
    assert [p["time_hours"] for p in pts] == sorted(p["time_hours"] for p in pts)
    assert [p["label"] for p in front(pts)] == ["rtx-4090 x 2, lora r16", "rtx-4090 x 1, lora r16",
                                                "rtx-3090 x 2, lora r16", "rtx-3090 x 1, lora r16"]


def test_dominates_needs_one_strict_improvement():
    a, b = setup("g", 1, "lora", 10, 1.0), setup("g", 2, "lora", 10, 1.0)
    assert not dominates(a, b) and not dominates(b, a)
    assert dominates(a, setup("g", 3, "lora", 10, 1.5))
    assert not dominates(a, setup("g", 3, "lora", 9, 1.5))


def test_chart_points_without_docs_is_empty():
    assert chart_points(None, None) == [] and chart_points({"points": []}) == []


def test_ticks_and_log_choice():
    assert nice_ticks(0, 24.96, log=False, count=5) == [0, 5, 10, 15, 20]
    assert nice_ticks(1.5, 25, log=True) == [2, 5, 10, 20]
    assert use_log([2.0, 19.5, 9.0]) is False and use_log([1.0, 40.0]) is True
    assert use_log([0.0, 40.0]) is False  # a zero cost cannot go on a log axis


def test_labels_of_crowded_points_do_not_overlap():
    anchors = [(100.0, 100.0, "rtx-3090 x 1, lora r16"), (101.0, 100.5, "rtx-3090 x 1, qlora r16"),
               (102.0, 101.0, "rtx-3090 x 1, dora r16")]
    spots = place_labels(anchors, bounds=(0, 0, 600, 400))
    boxes = []
    for (x, y, text), (dx, dy, right) in zip(anchors, spots, strict=True):
        w = len(text) * 6.2
        left = x + dx if right else x + dx - w
        boxes.append((left, y + dy - 10, left + w, y + dy + 3))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_write_png(tmp_path):
    out = write_plot(tmp_path / "front.png", PARETO, PLAN)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_write_svg_keeps_labels_as_text(tmp_path):
    out = write_plot(tmp_path / "front.svg", PARETO, PLAN)
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    for p in chart_points(PARETO, PLAN):
        assert p["label"] in text
    for words in ("time of the job (hours)", "cost (USD)", "Pareto front",
                  "dominated candidates", "the plan"):
        assert words in text
    assert write_plot(tmp_path / "again.svg", PARETO, PLAN).read_text() == text  # deterministic


def test_write_plot_without_points(tmp_path):
    out = write_plot(tmp_path / "none.svg", {"points": []}, None)
    assert "no plan satisfies the request" in out.read_text()


def test_plot_target_must_be_png_or_svg(tmp_path):
    with pytest.raises(PlannerError, match="must end in .png or .svg"):
        check_target(tmp_path / "front.pdf")


def test_missing_matplotlib_is_one_clear_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(PlannerError, match=r"install with pip install '\.\[plot\]'"):
        check_target(tmp_path / "front.png")
    with pytest.raises(SystemExit) as exc:
        main(["pareto", "--model", "qwen2.5-0.5b", "--plot", str(tmp_path / "front.png")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert "install with pip install '.[plot]'" in err
    assert not (tmp_path / "front.png").exists()


def test_cli_pareto_plot_writes_svg_with_candidates(capsys, tmp_path):
    target = tmp_path / "front.svg"
    with pytest.raises(SystemExit) as exc:
        main(["pareto", "--model", "qwen2.5-0.5b", "--gpus", "rtx-3090,rtx-4090", "--max-gpus",
              "4", "--global-batch", "16", "--budget", "20000", "--max-points", "3",
              "--plot", str(target), "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0 and f"wrote {target}" in err
    doc = json.loads(out)  # stdout stays one JSON document
    text = target.read_text()
    for p in doc["points"]:
        assert point_label(p) in text
    assert "dominated candidates" in text  # the plan's other methods are slower at equal cost


# ---- issue 20, part 6: crowded charts and log axes --------------------------------------------
def crowded(n: int = 24) -> dict:
    """A front of ``n`` close points over two decades of time (log x axis), some dominated."""
    pts = []
    for i in range(n):
        hours = 0.5 * 1.22 ** i
        cost = 40000 / (1 + i) ** 0.5 + (900 if i % 3 == 2 else 0)
        pts.append(setup(["rtx-3090", "rtx-4090", "a100-80gb"][i % 3], 1 + i % 7,
                         ["lora", "qlora", "full"][i % 3], cost, hours, 16 if i % 3 < 2 else None))
    return {"points": [p | {"job": "1e8 tokens", "basis": "buy"} for p in pts]}


def _drawn(points):
    """The matplotlib figure write_plot draws, rendered, with its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from planner.outputs.plot import _draw

    fig = Figure(figsize=(9, 5.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw(ax, points)
    fig.canvas.draw()
    return fig, ax


def test_png_labels_do_not_overlap_and_the_log_axis_says_so():
    points = chart_points(crowded())
    fig, ax = _drawn(points)
    renderer = fig.canvas.get_renderer()
    from matplotlib.text import Text

    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]  # the text, not its arrow
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b) or min(a.x1, b.x1) - max(a.x0, b.x0) < 1 \
                or min(a.y1, b.y1) - max(a.y0, b.y0) < 1, (a, b)
    drawn = {t.get_text() for t in ax.texts}
    assert {p["label"] for p in front(points)} <= drawn  # every front point keeps its label
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "time of the job (hours), log scale"
    assert ax.get_yscale() == "linear" and ax.get_ylabel() == "cost (USD)"


def test_png_file_has_the_log_label(tmp_path):
    svg = write_plot(tmp_path / "crowded.svg", crowded()).read_text()
    assert "time of the job (hours), log scale" in svg  # the same _draw makes the PNG
    assert write_plot(tmp_path / "crowded.png", crowded()).read_bytes()[:4] == b"\x89PNG"
