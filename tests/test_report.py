"""planner.outputs.report: the self-contained HTML report. Pure checks (escaping, no external
resources, determinism, memory bars) and a headless-Chromium check that the charts and tables
render.

The Chromium test needs the Debian packages chromium and chromium-driver (`.ci/run` installs
them) and selenium (the `test` extra). Without them it fails, naming what is missing: CI must
not pass without having looked at the page.
"""

from __future__ import annotations

import io
import json
import shutil

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.cli import main
from planner.outputs import render, render_pareto
from planner.outputs.plot import FRONT_COLOUR, PLAN_COLOUR, chart_points
from planner.outputs.report import TERM_COLOURS, memory_bars, report_html

SFT = {"model": "qwen2.5-0.5b", "gpus": ("rtx-3090", "rtx-4090"), "max_gpus": 4,
       "global_batch_size": 16, "budget_usd": 20000}
GRPO = {"model": "qwen2.5-0.5b", "workload": "grpo", "method": "lora", "gpus": ("rtx-4090",),
        "max_gpus": 4, "prompt_len": 128, "response_len": 128, "rollout_batch": 16,
        "budget_usd": 20000}


@pytest.fixture(scope="module")
def docs() -> dict[str, tuple[dict, dict | None]]:
    """(plan_doc, pareto_doc) of an SFT request with a sweep, an RL plan, an infeasible one."""
    from planner.solver.solve import pareto, plan

    cat = load_catalog()
    sft = PlanRequest(**SFT)
    out = {"sft": (render.plan_doc(plan(sft, cat)),
                   render_pareto.pareto_doc(pareto(sft, cat, max_points=4))),
           "grpo": (render.plan_doc(plan(PlanRequest(**GRPO), cat)), None)}
    broke = PlanRequest(**{**SFT, "budget_usd": 500})
    out["infeasible"] = (render.plan_doc(plan(broke, cat)), {"points": []})
    return out


# ---- pure -----------------------------------------------------------------------------------

def test_report_is_self_contained_and_deterministic(docs):
    page = report_html(*docs["sft"])
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 2
    for fetched in ("<script", "<link", "<img", "src=", "href=", "url(", "@import", "http:",
                    "https:", "<iframe"):
        assert fetched not in page, fetched
    assert report_html(*docs["sft"]) == page


def test_every_text_is_escaped(docs):
    plan_doc, pareto_doc = docs["sft"]
    evil = "<script>alert('x')</script> & \"quoted\""
    bad = json.loads(json.dumps(plan_doc))
    bad["notes"] = [evil]
    bad["plan"]["model"] = evil
    bad["binding"][0]["name"] = evil
    bad["alternatives"][0]["gpu"] = evil
    bad["plan"]["memory"]["breakdown_gib"] = {evil: 1.0, **bad["plan"]["memory"]["breakdown_gib"]}
    page = report_html(bad, pareto_doc)
    assert "<script" not in page and "alert(&#x27;x&#x27;)" in page
    assert "&amp; &quot;quoted&quot;" in page


def test_rl_plan_has_one_bar_per_phase(docs):
    plan = docs["grpo"][0]["plan"]
    mem = plan["memory"]
    bars = memory_bars(plan)
    assert [b["label"] for b in bars] == list(mem["phases_gib"])
    peak = next(b for b in bars if b["label"] == mem["peak_phase"])
    assert len(peak["segments"]) > 3  # stacked by term
    assert sum(v for _, v in peak["segments"]) == pytest.approx(mem["per_gpu_gib"], abs=0.02)
    assert all(b["total"] == mem["phases_gib"][b["label"]] for b in bars)


def test_sft_plan_has_one_bar_per_gpu(docs):
    plan = docs["sft"][0]["plan"]
    (bar,) = memory_bars(plan)
    assert bar["label"] == f"each of {plan['num_gpus']} x {plan['gpu']}"
    assert sum(v for _, v in bar["segments"]) == pytest.approx(plan["memory"]["per_gpu_gib"],
                                                               abs=0.02)


def test_cli_plan_html_keeps_json_on_stdout(capsys, tmp_path):
    target = tmp_path / "plan.html"
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "qwen2.5-0.5b", "--gpus", "rtx-4090", "--max-gpus", "1",
              "--global-batch", "16", "--budget", "20000", "--html", str(target), "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0 and f"wrote {target}" in err
    doc = json.loads(out)
    page = target.read_text(encoding="utf-8")
    assert doc["plan"]["gpu"] in page and "id=\"pareto-chart\"" in page


def test_cli_unwritable_html_is_one_line_before_solving(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "qwen2.5-0.5b", "--gpus", "rtx-4090", "--max-gpus", "1",
              "--budget", "20000", "--html", str(tmp_path / "no" / "such" / "dir.html")])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and err.count("\n") == 1 and "does not exist" in err
    assert out == ""  # checked before solving: no plan printed ahead of the error


# ---- headless Chromium ----------------------------------------------------------------------

NEEDS = ("the report test needs headless Chromium: install the Debian packages chromium and "
         "chromium-driver (apt-get install -y chromium chromium-driver; .ci/run does)")


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", driver_path))
               if path is None]
    if missing:
        pytest.fail(f"{NEEDS}; not found: {', '.join(missing)}", pytrace=False)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("the report test needs selenium: pip install '.[test]'", pytrace=False)
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", "--window-size=1100,1400", "--force-device-scale-factor=1",
                "--disable-extensions", "--no-first-run"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _open(browser, tmp_path, name: str, plan_doc, pareto_doc):
    page = tmp_path / f"{name}.html"
    page.write_text(report_html(plan_doc, pareto_doc), encoding="utf-8")
    browser.get(page.as_uri())
    return page


def _js(browser, script: str):
    return browser.execute_script(script)


def _boxes(browser, selector: str) -> list[dict]:
    """Rendered size of every element matching ``selector`` (CSS pixels)."""
    return _js(browser, f"return Array.from(document.querySelectorAll({json.dumps(selector)}))"
                        ".map(e => {const r = e.getBoundingClientRect();"
                        " return {w: r.width, h: r.height, text: e.textContent}});")


def _rows(browser, table_id: str) -> int:
    return _js(browser, f"return document.querySelectorAll('#{table_id} tbody tr').length;")


def _colours(png: bytes) -> list[tuple[int, tuple[int, int, int]]]:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    return img.getcolors(maxcolors=img.width * img.height)


def _near(colours, hex_colour: str, tol: int = 10) -> int:
    """Pixels within ``tol`` per channel of a colour."""
    target = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return sum(n for n, c in colours if all(abs(a - b) <= tol for a, b in zip(c, target,
                                                                                 strict=True)))


def test_report_renders_in_chromium(browser, docs, tmp_path):
    plan_doc, pareto_doc = docs["sft"]
    _open(browser, tmp_path, "sft", plan_doc, pareto_doc)
    assert plan_doc["plan"]["model"] in browser.title
    # nothing was fetched: the page is self-contained
    assert _js(browser, "return performance.getEntriesByType('resource').length;") == 0

    # the Pareto chart: drawn, one marker per point, the step line, every label laid out
    points = chart_points(pareto_doc, plan_doc)
    (chart,) = _boxes(browser, "#pareto-chart")
    assert chart["w"] > 600 and chart["h"] > 300
    markers = _boxes(browser, "#pareto-chart g.point > circle:first-child")
    assert len(markers) == len(points) and all(m["w"] > 5 and m["h"] > 5 for m in markers)
    faint = [p for p in points if p["dominated"]]
    assert len(_boxes(browser, "#pareto-chart g.point.dominated")) == len(faint) > 0
    assert len(_boxes(browser, "#pareto-chart circle.chosen")) == 1
    assert _js(browser, "return document.querySelector('#pareto-chart .front-line')"
                        ".getTotalLength();") > 100
    labels = _boxes(browser, "#pareto-chart text.label")
    assert sorted(lb["text"] for lb in labels) == sorted(p["label"] for p in points)
    assert all(lb["w"] > 40 and lb["h"] > 5 for lb in labels)  # fonts rendered, not blank

    # the memory bar: one stacked bar, one segment per non-zero term, capacity line
    mem = plan_doc["plan"]["memory"]
    terms = [v for v in mem["breakdown_gib"].values() if v > 0.0005]
    assert len(_boxes(browser, "#memory-chart g.bar")) == 1
    segments = _boxes(browser, "#memory-chart rect.segment")
    assert len(segments) == len(terms) and sum(s["w"] for s in segments) > 100
    (cap_line,) = _boxes(browser, "#memory-chart g.capacity line")
    assert cap_line["h"] > 20

    # tables: as many rows as the documents have entries
    assert _rows(browser, "summary") == 10
    assert _rows(browser, "binding") == len(plan_doc["binding"]) > 0
    assert _rows(browser, "alternatives") == len(plan_doc["alternatives"]) > 0
    assert _rows(browser, "pareto-points") == len(pareto_doc["points"]) > 0
    for table in ("summary", "binding", "alternatives", "pareto-points"):
        (box,) = _boxes(browser, f"#{table}")
        assert box["w"] > 200 and box["h"] > 40, table

    # pixels: the page is not blank, the chart shows the front's blue and the plan's ring,
    # the memory bar every term's colour
    shot = browser.get_screenshot_as_png()
    (tmp_path / "sft.png").write_bytes(shot)
    assert len([c for n, c in _colours(shot) if n >= 20]) >= 8
    chart_px = _colours(browser.find_element("id", "pareto-chart").screenshot_as_png)
    assert _near(chart_px, FRONT_COLOUR) > 300 and _near(chart_px, PLAN_COLOUR) > 50
    memory_chart = browser.find_element("id", "memory-chart")
    browser.execute_script("arguments[0].scrollIntoView()", memory_chart)
    bar_px = _colours(memory_chart.screenshot_as_png)
    wide = [i for i, s in enumerate(segments) if s["w"] >= 4]
    assert wide and all(_near(bar_px, TERM_COLOURS[i]) > 40 for i in wide)


def test_rl_report_renders_one_bar_per_phase_in_chromium(browser, docs, tmp_path):
    plan_doc, _ = docs["grpo"]
    _open(browser, tmp_path, "grpo", plan_doc, None)
    phases = plan_doc["plan"]["memory"]["phases_gib"]
    bars = _boxes(browser, "#memory-chart g.bar")
    assert len(bars) == len(phases) >= 3 and all(b["w"] > 50 for b in bars)
    assert _rows(browser, "binding") == len(plan_doc["binding"])
    assert _rows(browser, "alternatives") == len(plan_doc["alternatives"])
    assert len(_boxes(browser, "#pareto-chart g.point")) == 1 + len(plan_doc["alternatives"])


def test_infeasible_report_renders_conflicts_in_chromium(browser, docs, tmp_path):
    plan_doc, pareto_doc = docs["infeasible"]
    assert plan_doc["plan"] is None
    _open(browser, tmp_path, "infeasible", plan_doc, pareto_doc)
    assert _rows(browser, "conflicts") == len(plan_doc["conflicts"]) > 0
    assert _js(browser, "return document.getElementById('status').textContent;") == "infeasible"
    assert "no plan satisfies the request" in browser.find_element("id", "pareto-chart").text


# ---- issue 20, part 6: labels, scaling, headers, at a phone's and a laptop's width -----------

def _overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of boxes (x, y, w, h, text) whose rectangles intersect by more than 1 px."""
    pairs = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            w = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            h = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            if w > 1 and h > 1:
                pairs.append((a["text"], b["text"]))
    return pairs


def _text_boxes(browser, selector: str) -> list[dict]:
    return _js(browser, f"return Array.from(document.querySelectorAll({json.dumps(selector)}))"
                        ".map(e => {const r = e.getBoundingClientRect();"
                        " return {x: r.x, y: r.y, w: r.width, h: r.height,"
                        " text: e.textContent}});")


@pytest.mark.parametrize("width", [480, 1280])
def test_report_fits_the_window_and_nothing_overlaps(browser, docs, tmp_path, width):
    browser.set_window_size(width, 1000)
    try:
        for name, (plan_doc, pareto_doc) in docs.items():
            _open(browser, tmp_path, f"{name}-{width}", plan_doc, pareto_doc)
            inner = _js(browser, "return document.documentElement.clientWidth;")
            for chart in ("pareto-chart", "memory-chart"):
                boxes = _text_boxes(browser, f"#{chart}")
                if not boxes:
                    continue
                (box,) = boxes
                # the SVG scales with the window: inside it, and as wide as the text column
                assert box["x"] >= 0 and box["x"] + box["w"] <= inner + 0.5, (name, chart)
                assert box["w"] >= min(inner - 64, 900) - 1, (name, chart, box["w"], inner)
            labels = _text_boxes(browser, "#pareto-chart text.label")
            assert _overlaps(labels) == [], (name, width)
            assert _overlaps(_text_boxes(browser, "#memory-chart text")) == [], (name, width)
            # every table column has a header with text
            tables = _js(browser, """return Array.from(document.querySelectorAll('table')).map(
                t => ({id: t.id, heads: Array.from(t.querySelectorAll('thead th'))
                                             .map(h => h.textContent.trim()),
                       cols: Math.max(0, ...Array.from(t.querySelectorAll('tr'))
                                                 .map(r => r.children.length))}));""")
            for t in tables:
                assert len(t["heads"]) == t["cols"] and all(t["heads"]), (name, t)
            # nothing wider than the window: wide tables scroll inside their own box
            assert _js(browser, "return document.documentElement.scrollWidth;") <= inner, name
    finally:
        browser.set_window_size(1100, 1400)


@pytest.mark.parametrize("width", [480, 1280])
def test_crowded_chart_labels_do_not_overlap_in_chromium(browser, tmp_path, width):
    from tests.test_plot import crowded

    pareto_doc = crowded(30)
    browser.set_window_size(width, 1000)
    try:
        _open(browser, tmp_path, f"crowded-{width}", None, pareto_doc)
        labels = _text_boxes(browser, "#pareto-chart text.label")
        assert _overlaps(labels) == []
        front_labels = {p["label"] for p in chart_points(pareto_doc) if not p["dominated"]}
        assert front_labels <= {lb["text"] for lb in labels}
        axis = _js(browser, "return Array.from(document.querySelectorAll('#pareto-chart text'))"
                            ".map(t => t.textContent);")
        assert "time of the job (hours, log scale)" not in axis  # the old spelling
        assert "time of the job (hours), log scale" in axis
    finally:
        browser.set_window_size(1100, 1400)
