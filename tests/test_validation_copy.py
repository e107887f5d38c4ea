"""The project's copy of the validation cases (validation/) holds every case of
../shared/validation, where that folder sits beside the repository (CI has it): a case added or
corrected there fails this test until the copy is refreshed (cp ../shared/validation/*.yaml
../shared/validation/README.md validation/)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.catalog.load import shipped_validation_dir

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "validation"
FILES = ("memory_cases.yaml", "throughput_cases.yaml")


def _cases(path: Path) -> dict[str, dict]:
    return {c["id"]: c for c in yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]}


def test_the_copy_is_in_the_project():
    for name in FILES:
        assert len(_cases(shipped_validation_dir() / name)) >= 100, name


@pytest.mark.parametrize("name", FILES)
def test_the_copy_holds_every_shared_case(name):
    shared = SHARED / name
    if not shared.is_file():
        pytest.skip(f"{shared} not found: no shared validation data beside the repo to compare")
    mine, theirs = _cases(shipped_validation_dir() / name), _cases(shared)
    missing = sorted(set(theirs) - set(mine))
    assert not missing, f"validation/{name} lacks cases of {shared}: {missing}"
    changed = sorted(i for i in theirs if theirs[i] != mine[i])
    assert not changed, f"validation/{name} differs from {shared} in: {changed}"
