"""validation/project_cases_hf.yaml: the Hugging Face Trainer-path training-throughput cases load,
name known frameworks and GPUs, and their usable cases predict."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog.frameworks import resolve
from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.validation.validate import load_cases
from planner.validation.validate_throughput import predict_throughput_case

FILE = "project_cases_hf.yaml"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    path: Path = shipped_validation_dir() / FILE
    return load_cases(path)


def test_file_loads_with_unique_ids_and_sources_at_a_commit(cases):
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)) >= 20
    assert all("/blob/" in c["source"] and len(c["source"].split("/blob/")[1].split("/")[0]) == 40
               for c in cases)
    assert all(len(c["note"]) <= 300 and len(c["location"]) <= 200 for c in cases)
    assert all(c["note"].count("Not usable") == 1 for c in cases if not c["usable_for_accuracy"])


def test_every_case_names_a_known_framework_and_gpu(cases, catalog):
    for c in cases:
        assert resolve(catalog, c["framework"]) is not None, c["id"]
        assert catalog.gpu(c["gpu"]) is not None, c["id"]


def test_usable_cases_predict(cases, catalog):
    for c in (c for c in cases if c["usable_for_accuracy"]):
        result = predict_throughput_case(c, catalog)
        assert result.predicted is not None and result.predicted > 0, (c["id"], result)
