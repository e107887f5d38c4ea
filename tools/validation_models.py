"""List every model named by a usable validation case and whether the catalog resolves it.

Reads the case files (default: ../shared/validation/{memory,throughput}_cases.yaml next to the
repository), keeps the cases with ``usable_for_accuracy: true``, and collects the HF ids in their
``model`` field and in the role fields of ``extra`` (critic, reward). Each id is looked up with
``Catalog.model`` after the validation reader's role mapping (``validate.ROLE_ARCHITECTURE``).

    python tools/validation_models.py [CASE_FILE ...]

Exit status 1 when any id does not resolve.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from planner.catalog import load_catalog
from planner.errors import PlannerError
from planner.validate import ROLE_ARCHITECTURE

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILES = [REPO.parent / "shared" / "validation" / f"{kind}_cases.yaml"
                 for kind in ("memory", "throughput")]
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


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or DEFAULT_FILES
    cases = [c for f in files for c in yaml.safe_load(f.read_text(encoding="utf-8"))["cases"]]
    catalog = load_catalog()
    missing = 0
    for name, case_ids in sorted(named_models(cases).items(), key=lambda kv: kv[0].lower()):
        try:
            resolved = catalog.model(ROLE_ARCHITECTURE.get(name, name)).spec.id
        except PlannerError:
            resolved, missing = "UNRESOLVED", missing + 1
        print(f"{name:50} {resolved:20} {len(case_ids):3} cases")
    print(f"{missing} unresolved")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
