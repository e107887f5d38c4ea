"""Error bands (issue 18 item 4): check's memory peak and tokens/s carry the band that jobs
like them were measured in, from leave-one-source-out errors (benchmarks/bands.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from planner import TrainConfig, check, load_catalog
from planner.models.bands import BANDS_FILE, MIN_CASES, band, memory_group, throughput_group

CAT = load_catalog()
BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_a_band_is_the_spread_of_its_group_errors():
    table = yaml.safe_load(BANDS_FILE.read_text())
    entry = table["memory"]["sft/peft"]
    b = band("memory", "sft/peft", 10.0)
    assert b["lo"] == pytest.approx(10 / (1 + entry["hi"]))
    assert b["hi"] == pytest.approx(10 / (1 + entry["lo"]))
    n = entry["cases"]
    assert b["p"] == pytest.approx((n - 1) / (n + 1), abs=1e-3) and b["cases"] == n
    small = [g for g, e in table["throughput"].items() if e["cases"] < MIN_CASES]
    assert small and band("throughput", small[0], 1.0)["group"] == "throughput/all"
    assert memory_group("grpo", "lora") == "rl/peft" and memory_group("sft", "full") == "sft/full"
    assert throughput_group("ppo", "deepspeed") == "rl/ppo"


def test_check_reports_bands():
    doc = check(model="qwen2.5-7b", gpu="rtx-4090", catalog=CAT,
                config=TrainConfig(method="qlora"))
    mem, tput = doc["memory"]["band"], doc["throughput"]["band"]
    assert mem["group"] == "sft/peft" and mem["lo"] < mem["hi"]
    assert tput["lo"] < doc["throughput"]["tokens_per_s"] < tput["hi"]


@pytest.mark.slow
def test_the_bands_file_is_what_the_script_computes():
    spec = importlib.util.spec_from_file_location("bands_script", BENCH / "bands.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    from fit import DEFAULT_DIR, load
    from loso import loso

    cases = load(DEFAULT_DIR)
    computed = script.table(script.errors(loso(cases, CAT), cases))
    assert computed == yaml.safe_load(BANDS_FILE.read_text())
