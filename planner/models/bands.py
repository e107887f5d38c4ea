"""Error bands on predictions: where the measured value of a job like this one lies, from the
leave-one-source-out errors of its group (benchmarks/bands.py writes planner/models/bands.yaml).

A group's band spans the smallest to the largest relative error (predicted - measured) /
measured of its n cases, each predicted with every constant refitted without its own source.
For a prediction P the measured value M = P / (1 + e) then lies in [P / (1 + e_max),
P / (1 + e_min)]: a distribution-free prediction interval, which holds a new case's error with
probability (n - 1) / (n + 1) (the band's "p"). A group with fewer than MIN_CASES cases takes
the errors of every case of its kind (memory or throughput), a wider default, and says so.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

BANDS_FILE = Path(__file__).resolve().parent / "bands.yaml"
MIN_CASES = 5
SFT_FAMILY = ("sft", "pretrain")
PEFT = ("lora", "dora", "qlora")


def memory_group(workload: str, method: str) -> str:
    """The memory group of a job: SFT-family or RL/preference, full or adapters."""
    family = "sft" if workload in SFT_FAMILY else "rl"
    return f"{family}/{'peft' if method in PEFT else 'full'}"


def throughput_group(workload: str, stack: str) -> str:
    """The speed group of a job: RL iterations by workload, training steps by stack."""
    return f"rl/{workload}" if workload in ("ppo", "grpo") else f"training/{stack}"


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return yaml.safe_load(BANDS_FILE.read_text(encoding="utf-8"))


def band(kind: str, group: str, value: float) -> dict[str, Any]:
    """The p90 band of ``value`` (a predicted memory peak or rate) for ``kind`` ("memory" or
    "throughput") and ``group``: {"lo", "hi", "p", "group", "cases"}; a group with too few
    cases uses its kind's pooled errors ("group": "<kind>/all")."""
    table = _table()[kind]
    entry, name = table.get(group), group
    if entry is None or entry["cases"] < MIN_CASES:
        entry, name = table["all"], f"{kind}/all"
    n = entry["cases"]
    return {"lo": value / (1 + entry["hi"]), "hi": value / (1 + entry["lo"]),
            "p": round((n - 1) / (n + 1), 3), "group": name, "cases": n}
