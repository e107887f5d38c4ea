"""The project's additions to published validation cases (validation/case_additions.yaml) and
the framework_version case field. The shared case files stay a verbatim copy
(test_validation_copy.py); what the project adds lives in the additions file, so these tests
check that every addition still names a case of the copy, sets only schema fields, and reaches
the predictions and the report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.errors import PlannerError
from planner.validation.case_inputs import rl_case
from planner.validation.validate import case_additions, load_cases, predict_case
from planner.validation.validation_input import (
    MemoryCase,
    ThroughputCase,
    _Extra,
    _Rl,
    parse_additions,
    with_additions,
)

DATA = shipped_validation_dir()
FILES = ("memory_cases.yaml", "throughput_cases.yaml")
ROOT = Path(__file__).resolve().parents[1]


def _raw(name):
    return {c["id"]: c for c in yaml.safe_load((DATA / name).read_text())["cases"]}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_every_addition_names_a_case_of_its_framework():
    raw = {**_raw(FILES[0]), **_raw(FILES[1])}
    for case_id, add in case_additions().cases.items():
        assert case_id in raw, f"stale addition: {case_id}"
        assert raw[case_id]["framework"] == add.framework, case_id


def test_additions_set_only_schema_fields():
    fields = set(MemoryCase.model_fields) | set(ThroughputCase.model_fields)
    for case_id, add in case_additions().cases.items():
        for part in (add.set, add.correct):
            assert set(part) <= fields, (case_id, set(part) - fields)
            assert set(part.get("rl") or {}) <= set(_Rl.model_fields), case_id
            # extra keys are open in the shared schema; the ones the project adds are typed
            assert set(part.get("extra") or {}) <= set(_Extra.model_fields), case_id


def test_a_correction_replaces_what_the_case_states_and_is_listed():
    add = parse_additions({"schema_version": 1, "cases": {"c1": {
        "framework": "fw", "evidence": "e", "set": {"extra": {"chunked_ce": False}},
        "correct": {"grad_checkpointing": "full", "outcome": {"peak_gib": 15.0}}}}}, what="t")
    case = {"id": "c1", "framework": "fw", "grad_checkpointing": "none", "seq_len": 512,
            "outcome": {"kind": "peak", "peak_gib": 16.2, "measured_as": "unknown"}}
    (out,) = with_additions([case], add)
    assert out["grad_checkpointing"] == "full" and out["seq_len"] == 512
    assert out["outcome"] == {"kind": "peak", "peak_gib": 15.0, "measured_as": "unknown"}
    assert out["extra"] == {"chunked_ce": False}
    assert out["corrected"] == ["grad_checkpointing", "outcome"]
    assert case["grad_checkpointing"] == "none"  # the input case is not mutated


def test_torchtune_readings_before_the_gib_logger_are_converted_from_gb():
    """torchtune logged peak memory in decimal GB (get_memory_stats / 1e9) until it switched to
    GiB on 2024-08-15: the May 2024 README rows are GB, converted by their corrections."""
    raw = _raw(FILES[0])
    cases = {c["id"]: c for c in load_cases(DATA / FILES[0])}
    for case_id, add in case_additions().cases.items():
        if not case_id.startswith("torchtune2024-") or "outcome" not in add.correct:
            continue
        stated = raw[case_id]["outcome"]["peak_gib"]
        assert cases[case_id]["outcome"]["peak_gib"] == pytest.approx(
            stated * 1e9 / 2**30, abs=1e-3), case_id
        assert cases[case_id]["extra"]["chunked_ce"] is False, case_id


def test_the_case_keeps_what_it_states_and_mappings_merge():
    add = parse_additions({"schema_version": 1, "cases": {"c1": {
        "framework": "fw", "evidence": "e", "set": {
            "micro_batch_size": 8, "seq_len": 99, "rl": {"rollout_tp": 2, "prompt_len": 1},
            "extra": {"generation_batches": 1}}}}}, what="t")
    case = {"id": "c1", "framework": "fw", "micro_batch_size": None, "seq_len": 512,
            "rl": {"prompt_len": 256, "rollout_tp": None}, "extra": {"grad_accum": 2}}
    (out,) = with_additions([case], add)
    assert out["micro_batch_size"] == 8 and out["seq_len"] == 512
    assert out["rl"] == {"prompt_len": 256, "rollout_tp": 2}
    assert out["extra"] == {"grad_accum": 2, "generation_batches": 1}
    assert out["additions"] == "e"
    other = {**case, "framework": "other"}
    assert with_additions([other], add) == [other]


def test_a_bad_additions_document_is_one_error_naming_the_entry():
    with pytest.raises(PlannerError, match=r"cases\.c1\.evidence") as err:
        parse_additions({"schema_version": 1, "cases": {"c1": {"framework": "fw",
                                                                  "set": {}}}}, what="t")
    assert "\n" not in str(err.value)


def test_framework_version_is_reported_where_stated_and_null_elsewhere(catalog):
    cases = {c["id"]: c for c in load_cases(DATA / FILES[0])}
    stated = predict_case(cases["verl-tune-qwen2.5-0.5b-grpolora-1xh100"], catalog)
    assert stated.framework_version == case_additions().cases[
        "verl-tune-qwen2.5-0.5b-grpolora-1xh100"].set["framework_version"]
    assert "49b08e9" in stated.framework_version
    assert predict_case(cases["qwen-7b-lora-2048"], catalog).framework_version is None


def test_validate_json_carries_framework_and_version():
    from click.testing import CliRunner

    from planner.cli import cli

    res = CliRunner().invoke(cli, ["validate", str(DATA / FILES[0]), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    row = next(c for c in doc["cases"] if c["id"] == "verl-tune-qwen2-7b-grpo-2xh800")
    assert row["framework"] == "verl" and "c62e7ac" in row["framework_version"]
    assert row["corrected"] == []
    fixed = next(c for c in doc["cases"] if c["id"] == "torchtune2024-llama2-7b-lora-2x4090")
    assert fixed["corrected"] == ["grad_checkpointing", "outcome"]
    assert fixed["measured"]["peak_gib"] == pytest.approx(16.2e9 / 2**30, abs=1e-3)
    verl = doc["summary"]["by_framework"]["verl"]
    assert any("49b08e9" in v for v in verl["versions"]) and verl["unstated"] > 0


def test_a_case_stating_its_dschat_settings_runs_with_them(catalog):
    """DeepSpeed-Chat's script settings are the case's fields, not a table in the reader: a
    case with another batch and inference TP gets those, and generation_batches sets the
    prompts per iteration (per-device batch x GPUs, at most global_batch_size)."""
    case = next(c for c in load_cases(DATA / FILES[0])
                if c["id"] == "dschat-max-single-gpu-a10080gb")
    rc = rl_case(case, catalog)
    assert (rc.cfg.micro_batch_size, rc.cfg.rollout_tp) == (
        case["micro_batch_size"], case["rl"]["rollout_tp"])
    assert rc.cfg.method == "lora" and rc.cfg.lora_rank == 128
    mine = {**case, "num_gpus": 2, "sharding": "zero3", "micro_batch_size": 3,
            "rl": {**case["rl"], "rollout_tp": 2}, "global_batch_size": 4}
    rc = rl_case(mine, catalog)
    assert (rc.cfg.micro_batch_size, rc.cfg.rollout_tp, rc.cfg.rollout_batch) == (3, 2, 4)
    assert rc.cfg.zero_stage == 3


def test_no_behaviour_in_the_reader_is_keyed_on_a_source():
    """Issue 17's acceptance: no URL or issue reference in validate*.py (behaviour keyed on a
    source), and no DeepSpeed-Chat script table in the reader."""
    paths = sorted((ROOT / "planner" / "validation").glob("*.py"))
    assert paths  # the readers moved into planner/validation: the glob must find them
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"github\.com|issues/", text), path.name
        assert "DSCHAT" not in text and "run_1.3b.sh" not in text, path.name
