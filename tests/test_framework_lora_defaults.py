"""A LoRA job's rank and targets are its framework's where the user names none (the profile's
lora_rank / lora_targets, each with its source), in check, tune and plan alike: PEFT's r 8 on
q and v under the Hugging Face Trainer, LLaMA-Factory's r 8 on every linear layer, NeMo's
attention projections; --lora-rank and --lora-targets set them."""

from __future__ import annotations

import json

import pytest

from planner.catalog.frameworks import resolve, unlaunchable
from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from tests.test_cli import run

CAT = load_catalog()
CHECK = ("check", "--model", "7b", "--gpu", "a100-80gb-sxm", "--method", "lora", "--json")


def _config(capsys, *args: str) -> dict:
    code, out, err = run(capsys, *args)
    assert code in (0, 1), err
    doc = json.loads(out)
    return doc["plan"]["config"] if "plan" in doc else doc["config"]


@pytest.mark.parametrize("framework", ["hf-trainer", "llama-factory", "nemo", "litgpt"])
def test_check_takes_the_frameworks_lora_defaults(capsys, framework):
    profile = resolve(CAT, framework)
    cfg = _config(capsys, *CHECK, "--framework", framework)
    assert cfg["lora_rank"] == profile.value("lora_rank")
    assert tuple(cfg["lora_targets"]) == tuple(profile.value("lora_targets"))


def test_the_hf_trainers_defaults_are_peft_r8_on_q_and_v(capsys):
    cfg = _config(capsys, *CHECK)
    assert (cfg["framework"], cfg["lora_rank"]) == ("hf-trainer", 8)
    assert cfg["lora_targets"] == ["q", "v"]


def test_flags_override_the_framework(capsys):
    cfg = _config(capsys, *CHECK, "--lora-rank", "64", "--lora-targets", "q,k,v,o")
    assert (cfg["lora_rank"], cfg["lora_targets"]) == (64, ["q", "k", "v", "o"])
    cfg = _config(capsys, *CHECK, "--lora-targets", "all-linear")
    assert (cfg["lora_rank"], cfg["lora_targets"]) == (8, ["all-linear"])


def test_plan_and_tune_take_them_too(capsys):
    plan = _config(capsys, "plan", "--model", "7b", "--budget", "3000", "--method", "lora",
                   "--json")
    assert (plan["lora_rank"], plan["lora_targets"]) == (8, ["q", "v"])
    plan = _config(capsys, "plan", "--model", "7b", "--budget", "3000", "--method", "lora",
                   "--lora-rank", "16", "--framework", "llama-factory", "--json")
    assert (plan["lora_rank"], plan["lora_targets"]) == (16, ["all-linear"])
    code, out, err = run(capsys, "tune", "--model", "7b", "--gpu", "a100-80gb-sxm",
                         "--method", "lora", "--json")
    assert code == 0, err
    assert '"lora_rank": 8' in out


def test_a_full_fine_tune_gets_no_rank():
    from planner.catalog.frameworks import apply

    cfg = apply(TrainConfig(method="full"), resolve(CAT, "hf-trainer"))
    assert cfg.lora_rank is None


def test_axolotl_plans_no_cpu_offload_with_tensor_parallel():
    """Its writer refuses offload with tp > 1 (planner.outputs.export.axolotl), so a plan on
    axolotl holds none (a 70B time plan on a budget chose tp 2 with the optimizer offloaded)."""
    profile = resolve(CAT, "axolotl")
    cfg = TrainConfig(method="full", num_gpus=16, tp=2, zero_stage=2, offload="optimizer")
    assert any("offload optimizer with tp 2" in m for m in unlaunchable(profile, cfg))
    assert unlaunchable(profile, cfg.model_copy(update={"offload": "none"})) == []
