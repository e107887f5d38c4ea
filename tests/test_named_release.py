"""A framework named with a release (``--framework trl==0.20``) takes the facts as they were in
that release: a fact with a first release (Fact.since) whose first package is the framework
itself holds its earlier value before it, and the output says so."""

from __future__ import annotations

import json

import jsonschema

from planner.catalog.frameworks import config_fields, resolve
from planner.catalog.load import load_catalog
from planner.outputs.schema import schema_file
from planner.validation.case_releases import fused_optimizer_of, qlora_fp32_norms_of
from tests.test_cli import run

CAT = load_catalog()
QLORA = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--method", "qlora", "--micro-batch",
         "4", "--seq-len", "4096", "--checkpointing", "full", "--json"]


def check(capsys, *args: str) -> dict:
    code, out, _ = run(capsys, "check", *args)
    assert code == 0
    return json.loads(out)


def test_an_older_trl_keeps_fp32_qlora_norms_and_says_so(capsys):
    now = check(capsys, *QLORA, "--framework", "trl")
    old = check(capsys, *QLORA, "--framework", "trl==0.20")
    assert old["framework"]["requested_version"] == "0.20"
    assert old["framework"]["as_of_requested_version"] == [
        "qlora_norm_dtype fp32 (before trl 0.26.0)"]
    assert "as_of_requested_version" not in now["framework"]
    assert old["config"]["qlora_fp32_norms"] and not now["config"]["qlora_fp32_norms"]
    assert old["memory"]["per_gpu_gib"] > now["memory"]["per_gpu_gib"]  # fp32 residual stream
    schema = json.loads(schema_file("check").read_text(encoding="utf-8"))
    jsonschema.validate(old, schema)
    # the current release: nothing earlier
    newer = check(capsys, *QLORA, "--framework", "trl==0.27")
    assert "as_of_requested_version" not in newer["framework"]


def test_a_bound_on_another_package_is_not_the_named_framework_s():
    # trl inherits the Trainer's fused AdamW, whose first release names transformers: trl 0.20
    # says nothing about the transformers release it ran on
    old = resolve(CAT, "trl==0.20")
    assert config_fields(old, workload="sft", sharded=False)["fused_optimizer"] is True
    trainer = resolve(CAT, "transformers==4.50")
    assert config_fields(trainer, workload="sft", sharded=False)["fused_optimizer"] is False
    assert config_fields(resolve(CAT, "hf-trainer==4.57"), workload="sft",
                         sharded=False)["fused_optimizer"] is True


def test_a_validation_case_named_with_a_release_reads_the_same_way():
    case = {"framework": "trl==0.20", "extra": {}}
    assert qlora_fp32_norms_of(case, resolve(CAT, case["framework"])) is True
    assert qlora_fp32_norms_of({"extra": {}}, resolve(CAT, "trl")) is False
    old = {"framework": "hf-trainer==4.50", "extra": {}}
    assert fused_optimizer_of(old, resolve(CAT, old["framework"])) is False
