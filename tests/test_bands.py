"""Error bands (issue 18 item 4): every prediction of check, plan, tune and pareto carries the
split-conformal band of the leave-one-source-out ratios of jobs like it (benchmarks/bands.py
writes planner/models/bands.yaml), and --confidence plans against the band's upper memory edge."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import yaml

from planner import TrainConfig, check, load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.models.bands import (
    BANDS_FILE,
    PLAN_METHODS,
    SCORES,
    band,
    case_band,
    conformal_ranks,
    group_keys,
    inverse_band,
    log_rank,
    memory_headroom,
    min_cases,
    need_scale,
    planning_margin,
    request_headroom,
    request_margin,
    select,
)
from planner.models.memory import GIB
from planner.solver.solve import plan
from planner.solver.tune import tune
from tests.test_cli import run

CAT = load_catalog()
BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
TABLE = yaml.safe_load(BANDS_FILE.read_text(encoding="utf-8"))


def test_conformal_ranks_by_hand():
    # n = 19 at p = 0.9: floor(20 x 0.05) = 1, ceil(20 x 0.95) = 19: the smallest and largest
    assert conformal_ranks(19, 0.9) == (1, 19)
    # n = 52: floor(53 x 0.05) = floor(2.65) = 2, ceil(53 x 0.95) = ceil(50.35) = 51
    assert conformal_ranks(52, 0.9) == (2, 51)
    # 18 ratios: ceil(19 x 0.95) = 19 > 18, no finite band; at p = 0.8, 9 suffice (10 x 0.1 = 1)
    assert min_cases(0.9) == 19 and min_cases(0.8) == 9


def test_log_band_by_hand():
    # 9 ratios at p = 0.9: rank ceil(10 x 0.9) = 9, the largest |log r|; 8 are too few
    assert log_rank(9, 0.9) == 9 and min_cases(0.9, score="log") == 9
    ratios = [0.5, 0.8, 0.9, 1.0, 1.0, 1.1, 1.2, 1.3, 1.6]  # |log|: 0.5 -> 0.693 the largest
    name, lo, hi, n = select({"g": ratios}, ("g",), 0.9, score="log")
    assert (name, n) == ("g", 9)
    assert hi == pytest.approx(2.0) and lo == pytest.approx(0.5)  # exp(0.693) = 2, 1 / 2
    assert select({"g": ratios[:8]}, ("g",), 0.9, score="log") is None
    # 19 ratios: rank ceil(20 x 0.9) = 18, the second largest |log r|
    many = [1.0] * 17 + [1.5, 3.0]
    assert select({"g": many}, ("g",), 0.9, score="log")[2] == pytest.approx(1.5)
    # the rate band of a throughput prediction uses the log score over the file's ratios
    b = band("throughput", 100.0, framework="nobody", workload="sft", method="full")
    group = b["group"].removeprefix("throughput/")
    _, r_lo, r_hi, _ = select(TABLE["throughput"], (group,), 0.9, score="log")
    assert b["hi"] == pytest.approx(100 * r_hi) and b["lo"] == pytest.approx(100 / r_hi)
    assert r_lo == pytest.approx(1 / r_hi)


def test_select_takes_the_most_specific_group_with_enough_cases():
    few, many = [1.0] * 18, [0.5 + i / 100 for i in range(30)]
    groups = {"fw/sft/lora": few, "sft/lora": many, "all": many + few}
    name, lo, hi, n = select(groups, ("fw/sft/lora", "sft/lora", "all"), 0.9)
    k_lo, k_hi = conformal_ranks(30, 0.9)  # (1, 30): 31 x 0.05 = 1.55, 31 x 0.95 = 29.45
    assert (name, lo, hi, n) == ("sft/lora", many[k_lo - 1], many[k_hi - 1], 30)
    assert select({"all": few}, ("all",), 0.9) is None
    assert group_keys("torchtune", "lora", None) == ("torchtune/sft/lora", "sft/lora", "all")
    assert group_keys("peft", "sft", "dora")[1] == "sft/lora"
    assert group_keys("litgpt", "qlora", None) == ("litgpt/sft/qlora", "sft/qlora", "all")
    assert group_keys("prime-rl", "grpo", "full") == ("prime-rl/grpo/full", "rl/full", "all")


def test_a_band_is_the_conformal_band_of_the_file_ratios():
    ratios = sorted(TABLE["memory"]["sft/qlora"])
    k_lo, k_hi = conformal_ranks(len(ratios), 0.9)
    b = band("memory", 10.0, framework="nobody", workload="sft", method="qlora")
    assert b["group"] == "memory/sft/qlora" and b["cases"] == len(ratios) and b["p"] == 0.9
    assert b["lo"] == pytest.approx(10 * ratios[k_lo - 1])
    assert b["hi"] == pytest.approx(10 * ratios[k_hi - 1])
    # a time from its rate's band: 2x the rate's upper edge is half the time
    rate = {"lo": 50.0, "hi": 200.0, "p": 0.9}
    assert inverse_band(rate, 100.0, 10.0) == {"lo": 5.0, "hi": 20.0, "p": 0.9}


def test_headroom_and_margin_combine_multiplicatively():
    h = memory_headroom(framework="", workload="sft", methods=("full",), p=0.9)
    found = select(TABLE["memory"], group_keys("", "sft", "full"), 0.9)
    assert h == max(1.0, found[2]) and h > 1
    assert memory_headroom(framework="", workload="sft", methods=("full",), p=0.0) == 1.0
    # usable = capacity x (1 - margin) / headroom
    assert 1 - planning_margin(0.1, 1.25) == pytest.approx(0.9 / 1.25)
    auto = request_margin(PlanRequest(model="7b", confidence=0.9, memory_margin=0.1))
    widest = memory_headroom(framework="", workload="sft",
                             methods=("full", "lora", "dora", "qlora", "freeze"), p=0.9)
    assert auto == pytest.approx(1 - 0.9 / widest)
    assert request_margin(PlanRequest(model="7b", memory_margin=0.05)) == pytest.approx(0.05)


def _doc(confidence: float, micro: int) -> dict:
    return check(model="qwen2.5-7b", gpu="rtx-4090", catalog=CAT, margin=0.0,
                 confidence=confidence, config=TrainConfig(method="qlora",
                                                           micro_batch_size=micro))


def test_check_fits_by_the_band_upper_edge_and_reports_every_band():
    point = _doc(0.0, 3)
    banded = _doc(0.9, 3)
    h = banded["memory_headroom"]
    peak, cap = point["memory"]["per_gpu_gib"], point["memory"]["capacity_gib"]
    assert point["memory_headroom"] == 1.0 and h > 1
    # this job's peak fits 24 GiB as a point, not at its p90 upper edge
    assert peak <= cap < peak * h
    assert point["fits"] and not banded["fits"]
    mem, tput = banded["memory"]["band"], banded["throughput"]
    assert mem["hi"] == pytest.approx(peak * h) and mem["lo"] < peak
    assert tput["band"]["lo"] < tput["tokens_per_s"] < tput["band"]["hi"]
    step, hours = tput["step_time_band"], banded["time_hours_band"]
    assert step["lo"] < tput["step_time_s"] < step["hi"]
    assert hours["hi"] / banded["time_hours"] == pytest.approx(
        tput["tokens_per_s"] / tput["band"]["lo"])
    assert banded["cost"]["band"] is None  # a purchase is no prediction
    rented = check(model="qwen2.5-7b", gpu="rtx-4090", catalog=CAT, pricing="rent",
                   config=TrainConfig(method="qlora"))
    usd, b = rented["cost"]["usd"], rented["cost"]["band"]
    assert b["lo"] < usd < b["hi"]


def test_plan_holds_the_upper_edge_and_confidence_zero_is_the_point_plan():
    kw = {"model": "1.5b", "budget_usd": 3000, "memory_margin": 0.0,  # a point plan near 24 GiB
          "lora_rank": 16, "fixed": {"lora_targets": ("all-linear",)}}
    point, banded = plan(PlanRequest(**kw)), plan(PlanRequest(confidence=0.9, **kw))

    def headroom(result):  # the band of the plan's own method (bands.need_scale)
        return memory_headroom(framework="", workload="sft",
                               methods=(result.plan.config.method,), p=0.9)

    for result, h in ((point, 1.0), (banded, headroom(banded))):
        mem = result.plan.memory
        assert mem.device * h <= mem.capacity
    # the point plan's peak does not fit at its band's upper edge: the plan changes
    assert point.plan.memory.device * headroom(point) > point.plan.memory.capacity
    assert banded.plan.memory.device < point.plan.memory.device


def test_an_open_method_holds_each_method_to_its_own_band():
    """With the method open the offers' usable memory is stated at the widest band of the plan
    methods (which one is data: full fine-tuning's since the fms-acceleration memory rows,
    QLoRA's before); every strategy's need is scaled by need_scale, so a LoRA strategy is held
    to LoRA's band: its scaled need is the need of the same strategy in a LoRA-only request x
    h_lora / h_widest."""
    from planner.solver.space import build_space

    kw = {"model": "7b", "budget_usd": 3000, "confidence": 0.9, "gpus": ("rtx-3090",)}
    auto, lora = PlanRequest(**kw), PlanRequest(method="lora", **kw)
    h = {m: request_headroom(auto, m) for m in PLAN_METHODS}
    assert request_headroom(auto) == max(h.values()) > h["lora"]
    assert need_scale(auto, "lora") == pytest.approx(h["lora"] / request_headroom(auto))
    assert need_scale(lora, "lora") == 1.0
    wide, own = build_space(auto, CAT), build_space(lora, CAT)
    index = {s: i for i, s in enumerate(own.strategies)}
    pairs = [(i, index[s]) for i, s in enumerate(wide.strategies) if s in index]
    assert pairs
    for i, j in pairs:
        scaled = wide.gpu_need_mib(i, 1, 1, dp=1, mb=1)
        plain = own.gpu_need_mib(j, 1, 1, dp=1, mb=1)
        assert scaled == math.ceil(plain * need_scale(auto, "lora"))
    # the plan of the open request reports the limit of its own method
    result = plan(auto)
    method = result.plan.config.method
    limit = result.plan.memory.capacity * (1 - request_margin(auto, method))
    assert result.plan.memory.device <= limit


def test_tune_limit_is_capacity_over_the_headroom():
    cfg = TrainConfig(method="lora")
    res = tune(model="qwen2.5-0.5b", gpu="rtx-4090", config=cfg, catalog=CAT, margin=0.1,
               confidence=0.9)
    assert res.memory_headroom > 1
    assert res.limit_gib == pytest.approx(24 * 0.9 / res.memory_headroom)
    assert res.best.memory.device / GIB <= res.limit_gib


def test_cli_text_and_json_show_bands(capsys):
    args = ("plan", "--budget", "3000", "--model", "1.5b",  # a point plan above 24 GiB / 1.14
            "--lora-rank", "16", "--lora-targets", "all-linear")
    code, out, _ = run(capsys, *args)
    assert code == 0 and " (p90 band " in out
    code, out, _ = run(capsys, *args, "--json")
    doc = json.loads(out)
    body, h = doc["plan"], doc["memory_headroom"]
    assert doc["confidence"] == 0.9 and doc["memory_margin"] == 0 and h > 1
    assert any(f"/ {h:.2f}" in n for n in doc["notes"])
    for b in (body["memory"]["band"], body["throughput"]["band"],
              body["throughput"]["step_time_band"], body["time_hours_band"]):
        assert set(b) >= {"lo", "hi", "p"} and b["lo"] < b["hi"] and b["p"] == 0.9
    mem = body["memory"]
    assert mem["band"]["hi"] <= mem["capacity_gib"]  # the default plans at confidence 0.9
    code, out, _ = run(capsys, *args, "--confidence", "0", "--json")
    assert json.loads(out)["plan"]["memory"]["band"]["hi"] > mem["capacity_gib"]


@pytest.mark.parametrize("value", ["1", "-0.1", "nan"])
def test_bad_confidence_is_one_line_exit_2(capsys, value):
    for command in (("plan", "--budget", "3000", "--model", "7b"),
                    ("check", "--model", "7b", "--gpu", "rtx-4090")):
        code, out, err = run(capsys, *command, "--confidence", value)
        assert code == 2 and not out and err.count("\n") == 1 and "confidence" in err


def test_validate_json_gives_each_case_its_band(capsys):
    code, out, _ = run(capsys, "validate", "--json")
    files = json.loads(out)["files"]
    banded = [c for f in files for c in f["cases"] if c["band"]]
    assert len(banded) > 100
    for c in banded:
        assert c["band"]["lo"] < c["band"]["hi"]
    # a time metric's band from the rate's: the same ratios, inverted
    b = case_band("throughput", 2.0, framework="nemo", workload="sft", method=None,
                  metric="step_time_s")
    rate = case_band("throughput", 0.5, framework="nemo", workload="sft", method=None)
    assert b["lo"] == pytest.approx(1 / rate["hi"]) and b["hi"] == pytest.approx(1 / rate["lo"])


def _script():
    spec = importlib.util.spec_from_file_location("bands_script", BENCH / "bands.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


@pytest.fixture(scope="module")
def found():
    script = _script()
    from fit import DEFAULT_DIR, load
    from loso import loso

    cases = load(DEFAULT_DIR)
    return script.ratios(loso(cases, CAT), cases, CAT)


@pytest.mark.slow
def test_the_bands_file_is_what_the_script_computes(found):
    assert _script().table(found) == TABLE


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["memory", "throughput"])
def test_the_p90_band_covers_85_percent_of_cases_of_unseen_sources(found, kind):
    # every source's cases, each against the band of the other sources' ratios alone
    results = _script().coverage(found[kind], score=SCORES[kind])
    assert sum(inside for _row, _group, inside, _below in results) >= 0.85 * len(results)
