"""A case field outside the validation schema is that case's 'not modelled' reason, never read
as another value (validation_input.case_sharding): 'fsdp2' or 'zero3_offload' had silently
been no sharding at all."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.validation.validate import predict_case
from planner.validation.validation_input import CASE_SHARDINGS
from tests.test_gpu_names import MEMORY_CASE

CAT = load_catalog()


@pytest.mark.parametrize("sharding", ["fsdp2", "zero3_offload", "hsdp", "ZeRO-3"])
def test_a_sharding_outside_the_schema_is_not_modelled(sharding):
    got = predict_case({**MEMORY_CASE, "gpu": "h100-sxm", "sharding": sharding}, CAT)
    assert got.predicted_gib is None
    assert f"sharding '{sharding}'" in str(got.reason) and "zero3" in str(got.reason)


@pytest.mark.parametrize("sharding", [s for s in CASE_SHARDINGS if s != "megatron"] + [None])
def test_the_schemas_shardings_are_predicted(sharding):
    got = predict_case({**MEMORY_CASE, "gpu": "h100-sxm", "num_gpus": 8,
                        "sharding": sharding}, CAT)
    assert got.predicted_gib is not None, got.reason
