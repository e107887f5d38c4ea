"""Trainer's AdamW: fused from transformers 4.54 with torch >= 2.8 (the hf-trainer profile's
fused_optimizer fact), the foreach kernel and its sqrt(v) temporary before (a case naming older
releases: the fact's since), and a case's own extra.optimizer_impl over both
(case_releases.fused_optimizer_of);
measured on one H200 (validation/project_cases_hfmeasured.yaml: fused 59.87 GiB, foreach
74.79 GiB, Llama-3.1-8B pure bf16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog.frameworks import config_fields, resolve
from planner.catalog.load import load_catalog
from planner.validation.case_releases import fused_optimizer_of
from planner.validation.validate import load_cases, predict_case

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_trainer_profiles_default_to_fused_and_qwen_v1_does_not(catalog):
    assert config_fields(resolve(catalog, "hf-trainer"), workload="sft",
                         sharded=False)["fused_optimizer"] is True
    assert config_fields(resolve(catalog, "trl"), workload="sft",
                         sharded=False)["fused_optimizer"] is True  # inherited
    assert config_fields(resolve(catalog, "qwen-finetune"), workload="sft",
                         sharded=False)["fused_optimizer"] is False


@pytest.mark.parametrize(("case", "expected"), [
    ({}, True),
    ({"framework_version": "transformers 4.57.1, torch 2.8.0"}, True),
    ({"framework_version": "transformers 4.54.0"}, True),
    ({"framework_version": "transformers 4.53.3, torch 2.8.0"}, False),
    ({"extra": {"framework_version": "trl 0.13.0, transformers 4.48.1, torch 2.4.1"}}, False),
    ({"framework_version": "transformers 4.56.2, torch 2.7.1"}, False),
    ({"framework_version": "transformers 4.40", "extra": {"optimizer_impl": "adamw_torch_fused"}},
     True),
    ({"framework_version": "transformers 5.17.0", "extra": {"optimizer_impl": "adamw_torch"}},
     False),
])
def test_the_release_a_case_names_decides_trainers_default(case, expected, catalog):
    assert fused_optimizer_of(case, resolve(catalog, "trl")) is expected


def test_facts_without_a_release_bound_ignore_the_release(catalog):
    """qwen-finetune states foreach, torchtune fused (its recipes' optimizer.fused), neither
    bounded by a release: the releases a case names do not move them."""
    old = {"framework_version": "transformers 4.30.0, torch 2.1.0"}
    assert fused_optimizer_of(old, resolve(catalog, "qwen-finetune")) is False
    assert fused_optimizer_of(old, resolve(catalog, "torchtune")) is True
    assert resolve(catalog, "hf-trainer").facts["fused_optimizer"].since == (
        "transformers 4.54.0, torch 2.8.0")


def test_measured_fused_and_foreach_peaks_are_both_predicted(catalog):
    path = ROOT / "validation/project_cases_hfmeasured.yaml"
    cases = {c["id"]: c for c in load_cases(path)}
    for name in ("fused", "foreach"):
        case = cases[f"hfmeasured_llama31_8b_full_bf16_gc_mb1_s1024_{name}_mem"]
        assert abs(predict_case(case, catalog).rel_err) < 0.02, name
