"""One vocabulary for what a configuration computes with (issue 16): `plan` and `pareto` take the
flags `check` takes for the TrainConfig fields the planner does not search (precision, kernels,
loss, optimizer variants, LoRA targets), pass them into every candidate by their TrainConfig
names, and `check` of the plan's configuration gives the plan's figures."""

from __future__ import annotations

import json

import pytest

from planner import PlannerError, PlanRequest, TrainConfig
from planner.api import check
from planner.catalog.load import load_catalog
from planner.catalog.plan_request import FIXED_FIELDS
from planner.solver.solve import plan
from planner.validation.reference import reference_optimum
from tests.test_cli import run

CAT = load_catalog()


def test_fixed_fields_are_train_config_fields():
    assert set(FIXED_FIELDS) <= set(TrainConfig.model_fields)


@pytest.mark.parametrize("flags, field, value", [
    (["--precision", "fp16"], "precision", "fp16"),
    (["--no-flash-attention"], "flash_attention", False),
    (["--lora-targets", "q,v"], "lora_targets", ["q", "v"]),
    (["--chunked-loss"], "chunked_loss", True),
    (["--lora-dropout", "0.1"], "lora_dropout", 0.1),
])
def test_plan_takes_checks_flags_and_check_agrees(capsys, flags, field, value):
    code, out, _ = run(capsys, "plan", "--model", "7b", "--budget", "3000", *flags, "--json")
    assert code == 0
    p = json.loads(out)["plan"]
    assert p["config"][field] == value
    doc = check(model="7b", gpu=p["gpu"], config=TrainConfig.model_validate(p["config"]),
                catalog=CAT, platform=p["platform"])
    assert doc["memory"]["per_gpu_gib"] == p["memory"]["per_gpu_gib"]
    assert doc["throughput"]["tokens_per_s"] == pytest.approx(p["throughput"]["tokens_per_s"])


def test_eager_attention_costs_memory_in_the_plan(capsys):
    # Mistral-7B: its 32k-vocabulary loss is smaller than the recomputed layer's working set,
    # which eager attention's scores enlarge (Qwen2.5-7B's 152k-vocabulary loss would bind)
    base = PlanRequest(model="mistral-7b", budget_usd=3000, gpus=("rtx-3090",), num_gpus=1,
                       method="lora", checkpointing="full", micro_batch_size=1)
    flash = plan(base, CAT).plan
    eager = plan(base.model_copy(update={"fixed": {"flash_attention": False}}), CAT).plan
    assert eager.config.flash_attention is False
    assert eager.memory.device > flash.memory.device


def test_lora_dropout_costs_memory_and_litgpt_states_its_own(capsys):
    """--lora-dropout keeps each adapter's dropout output and mask: a LoRA check uses more
    memory with it; without the flag the framework's value holds (LitGPT 0.05, one shared
    q, k, v dropout; PEFT's 0.0 for the Hugging Face Trainer)."""
    args = ("check", "--model", "7b", "--gpu", "a100-80gb-sxm", "--method", "lora",
            "--micro-batch", "4", "--checkpointing", "none", "--json")
    _, plain, _ = run(capsys, *args)
    _, dropped, _ = run(capsys, *args, "--lora-dropout", "0.05")
    assert json.loads(dropped)["memory"]["per_gpu_gib"] > json.loads(plain)["memory"]["per_gpu_gib"]
    _, lit, _ = run(capsys, *args, "--framework", "litgpt")
    assert json.loads(lit)["config"]["lora_dropout"] == 0.05
    assert json.loads(lit)["config"]["lora_dropout_shared_qkv"] is True
    assert json.loads(plain)["config"]["lora_dropout"] == 0.0
    code, _, err = run(capsys, *args, "--lora-dropout", "1.5")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_bad_fixed_values_are_one_line_errors(capsys):
    with pytest.raises(PlannerError, match="not one of"):
        PlanRequest(model="7b", fixed={"num_gpus": 4})  # searched, not fixed: --num-gpus
    with pytest.raises(PlannerError, match="precision"):
        PlanRequest(model="7b", fixed={"precision": "fp99"})
    code, _, err = run(capsys, "plan", "--model", "7b", "--lora-targets", "q,zz")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "zz" in err


def test_the_reference_honours_fixed_fields():
    """The independent enumeration builds every candidate with the same fixed fields and
    reaches the planner's optimum."""
    req = PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-3090", "rtx-4090"), max_gpus=4,
                      global_batch_size=16, method="lora", budget_usd=5000,
                      fixed={"flash_attention": False, "precision": "fp16"})
    ref = reference_optimum(req, CAT)
    got = plan(req, CAT)
    assert ref is not None and got.plan is not None
    assert got.plan.cost_usd == pytest.approx(ref.value, abs=0.5 * (got.plan.num_gpus + 1))
    assert ref.config.flash_attention is False and ref.config.precision == "fp16"
