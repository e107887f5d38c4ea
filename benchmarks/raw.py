"""The shared cases as a new source writes them: every usable case predicted with and without
the project's additions (validation/case_additions.yaml: settings and framework versions the
cases' sources state and the shared files do not carry). A case from a source the project has
not seen arrives raw, so the raw figures say how the readers' defaults and inferences hold.

    PYTHONPATH=. python benchmarks/raw.py [VALIDATION_DIR]   # default: validation/

Prints median / p90 |error| of memory peaks and throughput and the fits/OOM verdicts right,
with and without the additions, then every usable case whose raw error differs, worst first.
In-sample constants (no refit).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit import folder_args  # noqa: E402

from planner.catalog.load import Catalog, load_catalog  # noqa: E402
from planner.errors import PlannerError  # noqa: E402
from planner.validation import validate  # noqa: E402
from planner.validation.validate_throughput import predict_throughput_case  # noqa: E402

SHARED_FILES = ("memory_cases.yaml", "throughput_cases.yaml")


def errors(folder: Path, catalog: Catalog, *, raw: bool) -> dict[str, tuple[str, Any, str]]:
    """case id -> (file, rel_err or None, framework) of every usable case of the shared files
    in ``folder``, read with the project's additions or without them (``raw``)."""
    additions = validate.case_additions()
    if raw:
        additions = additions.model_copy(update={"cases": {}})
    saved, validate.case_additions = validate.case_additions, lambda: additions
    try:
        out = {}
        for name in SHARED_FILES:
            for case in validate.load_cases(folder / name):
                if not case.get("usable_for_accuracy"):
                    continue
                try:
                    r = predict_throughput_case(case, catalog) if "metric" in case else \
                        validate.predict_case(case, catalog)
                    err = r.rel_err
                except PlannerError:
                    err = None
                out[str(case["id"])] = (name, err, str(case.get("framework")))
        return out
    finally:
        validate.case_additions = saved


def verdicts(folder: Path, catalog: Catalog, *, raw: bool) -> dict[str, tuple[int, int]]:
    """(right, cases) of the published fits/OOM statements of the shared memory file that get a
    verdict (a capacity; usable or not, as loso.py's confusion counts them), RL and preference
    workloads apart from the rest."""
    additions = validate.case_additions()
    if raw:
        additions = additions.model_copy(update={"cases": {}})
    saved, validate.case_additions = validate.case_additions, lambda: additions
    try:
        out = {"RL/preference": [0, 0], "SFT-family": [0, 0]}
        for case in validate.load_cases(folder / SHARED_FILES[0]):
            r = validate.predict_case(case, catalog)
            if r.kind not in ("fits", "oom") or r.predicted_fits is None:
                continue
            group = out["RL/preference" if r.workload in validate.RL_CASE_WORKLOADS
                        else "SFT-family"]
            group[0] += r.predicted_fits == (r.kind != "oom")
            group[1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}
    finally:
        validate.case_additions = saved


def pct(err: float | None) -> str:
    """A signed error in percent ("-": not predicted)."""
    return "-" if err is None else f"{err * 100:+.1f} %"


def summary(errs: list[float]) -> str:
    """median / p90 |error| in percent, and the count."""
    if not errs:
        return "-"
    med, p90 = validate.percentile(errs, 0.5), validate.percentile(errs, 0.9)
    return f"{med * 100:.1f} / {p90 * 100:.1f} % ({len(errs)})"


def main(argv: list[str] | None = None) -> None:
    args = folder_args(__doc__, None, argv=argv)
    catalog = load_catalog()
    added, raw = errors(args.folder, catalog, raw=False), errors(args.folder, catalog, raw=True)
    print("| file | with additions | raw |\n|---|---|---|")
    for name in SHARED_FILES:
        pick = [k for k, v in added.items() if v[0] == name]
        print(f"| {name} | {summary([abs(added[k][1]) for k in pick if added[k][1] is not None])}"
              f" | {summary([abs(raw[k][1]) for k in pick if raw[k][1] is not None])} |")
    with_v, raw_v = verdicts(args.folder, catalog, raw=False), verdicts(args.folder, catalog,
                                                                         raw=True)
    for group in with_v:
        print(f"| fits/OOM verdicts right, {group} | {with_v[group][0]} / {with_v[group][1]} | "
              f"{raw_v[group][0]} / {raw_v[group][1]} |")
    print("\n| case | framework | with additions | raw |\n|---|---|---|---|")
    worst = sorted(added, key=lambda k: -abs(raw[k][1] if raw[k][1] is not None else 1e9))
    for k in worst:
        if added[k][1] != raw[k][1]:
            print(f"| {k} | {added[k][2]} | {pct(added[k][1])} | {pct(raw[k][1])} |")


if __name__ == "__main__":
    main()
