"""The error bands of planner/models/bands.yaml, from leave-one-source-out errors (issue 18 item 4).

    python benchmarks/bands.py [--write] [VALIDATION_DIR]

Each usable case is predicted with every fitted constant refitted without its own source
(loso.loso); its relative error joins its group (bands.memory_group, bands.throughput_group).
A group's band spans the smallest to the largest of those errors (planner.models.bands). Coverage:
every usable case's measured value is tested against the band built from the errors of the other
sources' cases of its group (or of its kind, where the group is small), the band a user would
have been given before that source was known.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402
from fit import DEFAULT_DIR, load  # noqa: E402
from loso import loso, source_key  # noqa: E402

from planner.catalog.load import load_catalog  # noqa: E402
from planner.models.bands import BANDS_FILE, MIN_CASES, memory_group, throughput_group  # noqa: E402


def errors(report: dict[str, Any], cases: Any) -> dict[str, list[tuple[str, str, float, float,
                                                                        float]]]:
    """kind -> [(group, source, error, predicted, measured)] of the usable LOSO predictions."""
    mem, thr = report["loso"]
    out: dict[str, list] = defaultdict(list)
    for r in mem:
        if r.usable and r.kind == "peak" and r.rel_err is not None:
            src = source_key(str(cases.memory[r.id].get("source")))
            out["memory"].append((memory_group(r.workload, r.method), src, r.rel_err,
                                  r.predicted_gib, r.measured_gib))
    for r in thr:
        if r.usable and r.rel_err is not None and r.family != "decode":
            src = source_key(str(cases.throughput[r.id].get("source")))
            # as an error of the rate (tokens/s): a time or cost metric runs the other way
            timed = r.metric in ("step_time_s", "time_to_train_minutes", "cost_usd")
            err = 1 / (1 + r.rel_err) - 1 if timed else r.rel_err
            pred, meas = (1 / r.predicted, 1 / r.measured) if timed else (r.predicted,
                                                                          r.measured)
            out["throughput"].append((throughput_group(r.workload, r.stack), src, err, pred,
                                      meas))
    return out


def _entry(errs: list[float]) -> dict[str, Any]:
    return {"lo": round(min(errs), 4), "hi": round(max(errs), 4), "cases": len(errs)}


def table(found: dict[str, list]) -> dict[str, Any]:
    """The bands file: per kind, per group and "all", the error percentiles and case count."""
    out: dict[str, Any] = {}
    for kind, rows in found.items():
        groups: dict[str, list[float]] = defaultdict(list)
        for group, _src, err, _p, _m in rows:
            groups[group].append(err)
        out[kind] = {"all": _entry([e for *_x, e, _p, _m in
                                    [(g, s, e, p, m) for g, s, e, p, m in rows]])}
        out[kind].update({g: _entry(errs) for g, errs in sorted(groups.items())})
    return out


def coverage(found: dict[str, list]) -> dict[str, tuple[int, int]]:
    """kind -> (inside, cases): the measured value inside the band of the other sources."""
    out = {}
    for kind, rows in found.items():
        inside = 0
        for group, src, _err, pred, meas in rows:
            own = [e for g, s, e, _p, _m in rows if g == group and s != src]
            errs = own if len(own) >= MIN_CASES else [e for _g, s, e, _p, _m in rows
                                                      if s != src]
            inside += pred / (1 + max(errs)) <= meas <= pred / (1 + min(errs))
        out[kind] = (inside, len(rows))
    return out


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--write"]
    folder = Path(args[0]) if args else DEFAULT_DIR
    start = time.perf_counter()
    cases = load(folder)
    found = errors(loso(cases, load_catalog()), cases)
    bands = table(found)
    for kind, (inside, n) in coverage(found).items():
        print(f"{kind}: measured value inside the p90 band for {inside} of {n} cases "
              f"({inside / n:.0%})")
    print(yaml.safe_dump(bands, sort_keys=True))
    if "--write" in sys.argv[1:]:
        BANDS_FILE.write_text("# written by benchmarks/bands.py --write: do not edit\n"
                              + yaml.safe_dump(bands, sort_keys=True), encoding="utf-8")
        print(f"wrote {BANDS_FILE}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
