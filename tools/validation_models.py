"""List every model named by a usable validation case and whether the catalog resolves it.

Reads the case files (default: {memory,throughput}_cases.yaml in the repository's validation/, or
else in ../shared/validation beside it), keeps the cases with ``usable_for_accuracy: true``, and
collects the HF ids in their ``model`` field and in the role fields of ``extra`` (critic,
reward). Each id is looked up with ``Catalog.model`` after the validation reader's role mapping
(``case_inputs.ROLE_ARCHITECTURE``).

    python tools/validation_models.py [CASE_FILE ...]

Exit status 1 when any id does not resolve.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from planner.catalog.load import load_catalog
from planner.errors import PlannerError
from planner.validation.case_inputs import ROLE_ARCHITECTURE

REPO = Path(__file__).resolve().parents[1]
VALIDATION_DIRS = (REPO / "validation", REPO.parent / "shared" / "validation")
CASE_FILES = ("memory_cases.yaml", "throughput_cases.yaml")
ROLE_FIELDS = ("critic_model", "critic_reward_model", "reward_model")
# "facebook/opt-350m (step-2 reward model)": an HF id, then a comment in parentheses.
_HF_ID = re.compile(r"^([\w.-]+/[\w.-]+)")


def named_models(cases: list[dict]) -> dict[str, list[str]]:
    """HF id -> ids of the usable cases naming it (as policy model or in a role field)."""
    found: dict[str, list[str]] = {}
    for case in cases:
        if not case.get("usable_for_accuracy"):
            continue
        extra = case.get("extra") or {}
        for text in [case.get("model"), *(extra.get(f) for f in ROLE_FIELDS)]:
            match = _HF_ID.match(str(text or "").strip())
            if match:
                found.setdefault(match.group(1), []).append(case["id"])
    return found


def default_files() -> list[Path]:
    """The case files of the first validation folder that holds them all; [] when none does."""
    for folder in VALIDATION_DIRS:
        if all((folder / name).is_file() for name in CASE_FILES):
            return [folder / name for name in CASE_FILES]
    return []


def resolutions(files: list[Path]) -> dict[str, tuple[str | None, list[str]]]:
    """HF id -> (catalog id it resolves to or None, ids of the usable cases naming it)."""
    cases = [c for f in files for c in yaml.safe_load(f.read_text(encoding="utf-8"))["cases"]]
    catalog = load_catalog()
    out = {}
    for name, case_ids in sorted(named_models(cases).items(), key=lambda kv: kv[0].lower()):
        try:
            out[name] = (catalog.model(ROLE_ARCHITECTURE.get(name, name)).spec.id, case_ids)
        except PlannerError:
            out[name] = (None, case_ids)
    return out


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or default_files()
    if not files:
        print(f"no case files in {' or '.join(map(str, VALIDATION_DIRS))}")
        return 2
    found = resolutions(files)
    for name, (resolved, case_ids) in found.items():
        print(f"{name:50} {resolved or 'UNRESOLVED':20} {len(case_ids):3} cases")
    missing = sum(1 for resolved, _ in found.values() if resolved is None)
    print(f"{missing} unresolved")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
