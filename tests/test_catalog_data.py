"""The shipped catalog data: every file validates, matches gpus.csv, and covers what is used.

The reference CSV lives in ../shared beside the repository (CI has it); tests that need it are
skipped with a reason when that folder is absent. The validation cases are the project's copy
(validation/).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from planner.catalog.specs import GpuSpec, PlatformSpec

REPO = Path(__file__).parents[1]
CATALOG = REPO / "catalog"
SHARED = REPO.parent / "shared"
GPUS_CSV = SHARED / "reference" / "gpus.csv"
VALIDATION = REPO / "validation"

GPU_FILES = sorted((CATALOG / "gpus").glob("*.yaml"))
PLATFORM_FILES = sorted((CATALOG / "platforms").glob("*.yaml"))

# gpus.csv numeric column -> GpuSpec field
NUMERIC_COLUMNS = {
    "memory_gb": "memory_gib",
    "memory_bandwidth_gbps": "memory_bandwidth_gbps",
    "bf16_dense_tflops": "bf16_dense_tflops",
    "fp8_dense_tflops": "fp8_dense_tflops",
    "p2p_bandwidth_gbps": "p2p_bandwidth_gbps",
    "max_gpus_per_node": "max_gpus_per_node",
    "tdp_watts": "tdp_watts",
    "purchase_price_usd_new": "price_usd_new",
    "purchase_price_usd_used": "price_usd_used",
    "cloud_price_usd_per_gpu_hour": "price_usd_per_hour",
}


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _gpus() -> dict[str, GpuSpec]:
    return {p.stem: GpuSpec.model_validate(_load(p)) for p in GPU_FILES}


def _platforms() -> dict[str, PlatformSpec]:
    return {p.stem: PlatformSpec.model_validate(_load(p)) for p in PLATFORM_FILES}


def _need_shared(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not found: the shared reference data sits beside the repo in CI")


def _csv_rows() -> list[dict[str, str]]:
    _need_shared(GPUS_CSV)
    with GPUS_CSV.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_catalog_has_files():
    assert len(GPU_FILES) >= 33  # 32 CSV rows + ascend-910b
    assert len(PLATFORM_FILES) >= 6


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_gpu_file_validates_and_is_named_by_id(path):
    spec = GpuSpec.model_validate(_load(path))
    assert spec.id == path.stem


@pytest.mark.parametrize("path", PLATFORM_FILES, ids=lambda p: p.stem)
def test_platform_file_validates_and_is_named_by_id(path):
    spec = PlatformSpec.model_validate(_load(path))
    assert spec.id == path.stem
    if spec.price_usd is not None:
        assert spec.price_as_of and spec.price_source_urls, "a priced host needs date and source"
    else:
        assert "price" in spec.notes.lower(), "a host without a price must say why in notes"


def test_every_csv_row_has_a_matching_yaml():
    gpus = _gpus()
    for row in _csv_rows():
        gpu_id = row["id"]
        assert gpu_id in gpus, f"{gpu_id} from gpus.csv has no catalog/gpus/{gpu_id}.yaml"
        spec = gpus[gpu_id]
        for column, field in NUMERIC_COLUMNS.items():
            expected = float(row[column]) if row[column].strip() else None
            assert getattr(spec, field) == expected, f"{gpu_id}.{field}"
        assert spec.name == row["name"]
        assert spec.vendor == row["vendor"]
        assert spec.interconnect == row["interconnect"]
        assert spec.supports_bf16 == (row["supports_bf16"].strip().lower() == "true")
        assert list(spec.spec_source_urls) == row["spec_source_url"].split()
        assert list(spec.price_source_urls) == row["price_source_url"].split()


def test_prices_are_dated():
    for gpu_id, spec in _gpus().items():
        prices = (spec.price_usd_new, spec.price_usd_used, spec.price_usd_per_hour)
        if any(p is not None for p in prices):
            assert spec.price_as_of, gpu_id
            assert "Price dates:" in spec.notes or gpu_id == "ascend-910b", gpu_id


def _validation_gpu_ids() -> set[str]:
    ids: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "gpu" and isinstance(value, str):
                    ids.add(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for name in ("memory_cases.yaml", "throughput_cases.yaml"):
        path = VALIDATION / name
        walk(_load(path))
    return ids


def test_validation_gpu_ids_exist():
    used = _validation_gpu_ids()
    assert used, "no gpu ids found in the validation cases"
    missing = sorted(used - set(_gpus()))
    assert not missing, f"validation cases use GPUs missing from the catalog: {missing}"


def test_models_of_usable_validation_cases_resolve():
    """Every model a usable case names (policy, critic, reward) resolves to a catalog entry."""
    from conftest import load_tool

    tool = load_tool("validation_models")
    files = [VALIDATION / name for name in tool.CASE_FILES]
    for path in files:
        _need_shared(path)
    found = tool.resolutions(files)
    assert len(found) >= 30
    missing = sorted(name for name, (resolved, _) in found.items() if resolved is None)
    assert not missing, f"usable validation cases name models missing from the catalog: {missing}"


def test_every_gpu_form_factor_has_a_platform():
    taken = {ff for platform in _platforms().values() for ff in platform.form_factors}
    for gpu_id, spec in _gpus().items():
        assert spec.form_factor in taken, f"{gpu_id}: no platform takes {spec.form_factor}"


def test_every_platform_takes_some_gpu():
    form_factors = {spec.form_factor for spec in _gpus().values()}
    for platform_id, platform in _platforms().items():
        assert set(platform.form_factors) & form_factors, f"{platform_id} takes no catalog GPU"
