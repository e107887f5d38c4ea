"""The checkpoint a plan's launch loads is the one the user asked for: a fine-tune or -Instruct
release that shares a catalog entry's architecture is planned on that entry but exported as
itself (catalog.load.checkpoint_of), through `plan --export` and through a saved document."""

from __future__ import annotations

import json

import pytest
import yaml

from planner import PlanRequest, plan
from planner.catalog.load import checkpoint_of, load_catalog
from planner.outputs.export import export_plan
from planner.outputs.render import plan_doc
from tests.test_cli import run

CAT = load_catalog()
SPEC = CAT.model("llama-3.1-8b").spec


@pytest.mark.parametrize(("asked", "loads"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
    ("unsloth/llama-3-8b-bnb-4bit", "unsloth/llama-3-8b-bnb-4bit"),
    ("llama-3.1-8b", SPEC.hf_repo), ("8b", SPEC.hf_repo),
    ("models/llama/config.json", "models/llama"),
])
def test_checkpoint_of_what_was_asked(asked, loads):
    assert checkpoint_of(asked, SPEC) == loads


def _lora_plan(model: str):
    result = plan(PlanRequest(model=model, gpus=("h100-sxm",), num_gpus=1, method="lora",
                              sharding="none", offload="none", checkpointing="full",
                              micro_batch_size=1))
    assert result.plan is not None
    return result


def test_an_instruct_release_is_exported_as_itself_not_as_its_base():
    result = _lora_plan("meta-llama/Llama-3.1-8B-Instruct")
    assert result.plan.model == "llama-3.1-8b"  # planned on the shared architecture
    assert result.plan.checkpoint == "meta-llama/Llama-3.1-8B-Instruct"
    text = export_plan(result, "axolotl").text
    assert yaml.safe_load(text)["base_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    doc = plan_doc(result)
    assert doc["plan"]["checkpoint"] == "meta-llama/Llama-3.1-8B-Instruct"
    saved = json.loads(json.dumps(doc))
    assert yaml.safe_load(export_plan(saved, "axolotl").text)["base_model"] == \
        "meta-llama/Llama-3.1-8B-Instruct"
    # an explicit model path still wins
    assert yaml.safe_load(export_plan(saved, "axolotl", model_path="/ckpt").text)[
        "base_model"] == "/ckpt"


def test_a_catalog_id_exports_the_entrys_repo_and_an_old_document_still_exports():
    result = _lora_plan("llama-3.1-8b")
    assert result.plan.checkpoint == SPEC.hf_repo
    doc = plan_doc(result)
    del doc["plan"]["checkpoint"]  # a document written before plans carried it
    assert yaml.safe_load(export_plan(doc, "axolotl").text)["base_model"] == SPEC.hf_repo


def test_a_bad_checkpoint_in_a_document_is_one_line_exit_2(capsys, tmp_path):
    doc = plan_doc(_lora_plan("llama-3.1-8b"))
    doc["plan"]["checkpoint"] = 7
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    code, _, out = run(capsys, "export", "--format", "axolotl", str(path))
    assert code == 2 and out.count("\n") == 1 and "checkpoint" in out
