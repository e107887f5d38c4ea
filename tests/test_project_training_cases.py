"""validation/project_cases_training.yaml: the training-throughput cases the project adds from
public benchmark tables load, name known frameworks and GPUs, and their usable cases predict."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog.frameworks import resolve
from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.models import efficiency as eff
from planner.validation.validate import load_cases
from planner.validation.validate_throughput import predict_throughput_case

FILE = "project_cases_training.yaml"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    path: Path = shipped_validation_dir() / FILE
    return load_cases(path)


def test_file_loads_with_unique_ids_and_sources_at_a_commit(cases):
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)) >= 30
    # every source is a file at a commit (40 hex digits), so the row can be read again
    assert all("/blob/" in c["source"] and len(c["source"].split("/blob/")[1].split("/")[0]) == 40
               for c in cases)
    assert sum(c["usable_for_accuracy"] for c in cases) >= 20
    assert all(c["note"].count("Not usable") == 1 for c in cases if not c["usable_for_accuracy"])


def test_every_case_names_a_known_framework_and_gpu(cases, catalog):
    for c in cases:
        assert resolve(catalog, c["framework"]) is not None, c["id"]
        assert catalog.gpu(c["gpu"]) is not None, c["id"]


def test_usable_cases_predict(cases, catalog):
    for c in (c for c in cases if c["usable_for_accuracy"]):
        result = predict_throughput_case(c, catalog)
        assert result.predicted is not None and result.predicted > 0, (c["id"], result)


def test_fsdp_pool_holds_the_usable_rows_of_frameworks_inheriting_fsdp(cases):
    """The torchtitan and llm-foundry rows set the fsdp factor (efficiency.STACK_CASES)."""
    inherit = {c["id"] for c in cases if c["usable_for_accuracy"]
               and c["framework"] in ("torchtitan", "llm-foundry", "fms-fsdp")}
    assert inherit and inherit <= set(eff.STACK_CASES["fsdp"])
