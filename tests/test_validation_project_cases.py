"""The project's own validation cases (validation/project_cases.yaml): read beside the shared
files by fit.py, loso.py and `planner validate`, architectures without a Hugging Face id given
as config.json files, and the published offloaded runs the offload terms are checked on."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.models.efficiency import OFFLOAD_CASES
from planner.validation.validate import load_cases, project_cases_path
from planner.validation.validate_throughput import predict_throughput_case

ZERO_OFFLOAD = "deepspeed_zerooffload_gpt2_10b_1xV100"


def _project() -> dict[str, dict]:
    return {c["id"]: c for c in load_cases(project_cases_path())}


def test_project_ids_are_new_and_architectures_resolve():
    """No project id repeats a shared case's; an architecture_config becomes the model path
    (relative to the case file), and the catalog reads it: the 10B GPT-2 of the ZeRO-Offload
    tutorial is 50 x 12 x 4096^2 + (50304 + 1024) x 4096 ~ 10.28e9 parameters (+ biases,
    norms)."""
    shared = {c["id"] for f in ("memory_cases.yaml", "throughput_cases.yaml")
              for c in load_cases(shipped_validation_dir() / f)}
    project = _project()
    assert project and not set(project) & shared
    case = project[ZERO_OFFLOAD]
    assert Path(case["model"]).is_file()
    assert Path(case["model"]).parent.name == "models"
    spec = load_catalog().model(case["model"]).spec
    assert (spec.num_layers, spec.hidden_size, spec.norm) == (50, 4096, "layernorm")
    assert spec.published_params_b == pytest.approx(10.28, abs=0.02)


def test_fit_reads_the_project_cases():
    """benchmarks/fit.py's load() puts the project cases beside the shared ones."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fit

    assert ZERO_OFFLOAD in fit.load().throughput


def test_zero_offload_tutorial_step_time_within_twenty_percent():
    """The ZeRO-Offload tutorial's logged 26.07 s per step (mean of iterations 8-10) is
    predicted within 20 % (-16.4 % at this commit; -7.9 % before attention was timed at its
    kernel's rate: the deepspeed factor refitted 0.528 -> 0.624 on the MLPerf LoRA rows, whose
    8k-token attention on H100 now takes FlashAttention-2's own time, and this 1k-token row's
    matmuls ride the higher factor; the PCIe copies hidden at OVERLAP pcie 0.5)."""
    r = predict_throughput_case(_project()[ZERO_OFFLOAD], load_catalog())
    assert r.reason is None and r.usable
    assert abs(r.rel_err) < 0.20


def test_offload_cases_exist_with_their_offload_kind():
    """Every case efficiency.OFFLOAD_CASES names exists and offloads as it says (a project
    case states `offload`; a shared torchtune case `extra.fsdp_cpu_offload`, read as
    optimizer+params by throughput_cases.memory_style_case)."""
    from planner.validation.throughput_cases import memory_style_case

    cases = {**{c["id"]: c for c in load_cases(
        shipped_validation_dir() / "throughput_cases.yaml")}, **_project()}
    for cid, (kind, _what) in OFFLOAD_CASES.items():
        assert memory_style_case(cases[cid]).get("offload") == kind, cid
