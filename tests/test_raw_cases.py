"""Published RL time cases as a new source writes them: without the project's additions
(validation/case_additions.yaml), stating no sharding and no per-device batch. The reader
infers what the run must have had (validate_throughput.least_fitting_sharding,
largest_fitting_batch) and, where no batch fits, falls back on the framework's defaults
(profile facts per_device_batch, generation_batches) instead of one unsharded sequence per
GPU, which put DeepSpeed-Chat's rows at 5-14x their published times. A memory case's unstated
batch stays 1: a published "fits" needs only the smallest."""

from __future__ import annotations

import pytest
import yaml

from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.validation.validate_throughput import predict_throughput_case, rl_inputs

CAT = load_catalog()
RAW = {c["id"]: c for c in yaml.safe_load(
    (shipped_validation_dir() / "throughput_cases.yaml").read_text(encoding="utf-8"))["cases"]}


def test_unstated_sharding_is_the_least_that_fits_and_the_batch_the_largest():
    case = RAW["dschat_ppo_opt13b_8xA100-80"]
    assert case["sharding"] is None and case["micro_batch_size"] is None
    rc, cfg, _ = rl_inputs(case, CAT)
    said = " ".join(rc.assumptions)
    assert "sharding zero" in said and "the least of deepspeed-chat's" in said
    assert "the largest that fits" in said and cfg.micro_batch_size > 1 and cfg.zero_stage >= 1
    assert abs(predict_throughput_case(case, CAT).rel_err) < 0.5


def test_where_nothing_fits_the_frameworks_default_batch_stands():
    """OPT-6.7B fully trained on one A100-40GB fits no batch in the memory model (the run
    trained LoRA adapters and more; the case states neither): DeepSpeed-Chat's default
    per-device batch of 16, generated in one batch per step (generation_batches 1)."""
    case = RAW["dschat_ppo_opt6.7b_1xA100-40"]
    rc, cfg, _ = rl_inputs(case, CAT)
    said = " ".join(rc.assumptions)
    assert "no per-device batch fits the memory model: 16" in said
    assert cfg.micro_batch_size == 16 and cfg.rollout_batch == 16
    assert abs(predict_throughput_case(case, CAT).rel_err) < 0.5


@pytest.mark.parametrize("cid", ["dschat_ppo_opt13b_8xA100-80", "dschat_ppo_opt6.7b_1xA100-40"])
def test_stated_settings_are_kept(cid):
    """A case that states its sharding and batch is read as it states them."""
    case = {**RAW[cid], "sharding": "zero2", "micro_batch_size": 2}
    rc, cfg, _ = rl_inputs(case, CAT)
    assert cfg.micro_batch_size == 2 and cfg.zero_stage == 2
    assert not any("not stated" in a or "fits" in a for a in rc.assumptions)


def test_a_sharding_the_cases_offload_rules_out_is_skipped():
    """An offloaded optimizer needs ZeRO: the unsharded candidate is skipped, not an error (the
    case stated its offload but not its sharding)."""
    case = {**RAW["dschat_ppo_opt13b_8xA100-80"], "offload": "optimizer"}
    rc, cfg, _ = rl_inputs(case, CAT)
    assert cfg.zero_stage >= 1 and cfg.offload == "optimizer"
    assert any(a.startswith("sharding zero") for a in rc.assumptions)
