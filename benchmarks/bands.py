"""The error bands of planner/models/bands.yaml, from leave-one-source-out predictions
(issue 18 item 4).

    PYTHONPATH=. python benchmarks/bands.py [--write] [VALIDATION_DIR]

Each usable case (memory peaks; training and RL throughput, a time metric as its rate) is
predicted with every fitted constant refitted without its own source (loso.loso); its ratio
measured / predicted joins its groups (planner.models.bands.group_keys). The file holds each
group's sorted ratios; planner.models.bands takes the split-conformal band of the most specific
group with enough cases (two-tailed for memory, by the absolute log ratio for throughput:
bands.SCORES). Coverage: every case's measured value is tested against the band built from the
other sources' ratios alone (its own group where they are enough, else its family, else the
pool), the band a user would have been given before that source was known; printed per group and
overall, at p = 0.9.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402
from fit import folder_args, load  # noqa: E402
from loso import loso, shared_ids, source_key  # noqa: E402

from planner.catalog.load import Catalog, load_catalog  # noqa: E402
from planner.models.bands import (  # noqa: E402
    BANDS_FILE,
    DEFAULT_CONFIDENCE,
    SCORES,
    TIMED_METRICS,
    framework_id,
    group_keys,
    select,
)


class Ratio(NamedTuple):
    keys: tuple[str, str, str]
    source: str
    ratio: float  # measured / predicted
    case: str


def ratios(report: dict[str, Any], cases: Any, catalog: Catalog) -> dict[str, list[Ratio]]:
    """kind -> the usable LOSO predictions as ratios measured / predicted (a rate's: a time
    or cost metric is inverted)."""
    mem, thr = report["loso"]
    out: dict[str, list[Ratio]] = defaultdict(list)
    for r in mem:
        if r.usable and r.kind == "peak" and r.predicted_gib and r.measured_gib:
            case = cases.memory[r.id]
            out["memory"].append(Ratio(
                group_keys(framework_id(catalog, r.framework), r.workload, r.method),
                source_key(str(case.get("source"))), r.measured_gib / r.predicted_gib, r.id))
    for r in thr:
        if r.usable and r.predicted and r.measured and r.family != "decode":
            case = cases.throughput[r.id]
            ratio = r.measured / r.predicted
            out["throughput"].append(Ratio(
                group_keys(framework_id(catalog, r.framework), r.workload,
                           getattr(r, "method", None)),
                source_key(str(case.get("source"))),
                1 / ratio if r.metric in TIMED_METRICS else ratio, r.id))
    return out


def groups(rows: list[Ratio]) -> dict[str, list[float]]:
    """group -> sorted ratios of ``rows``."""
    out: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        for key in row.keys:
            out[key].append(round(row.ratio, 4))
    return {k: sorted(v) for k, v in sorted(out.items())}


def table(found: dict[str, list[Ratio]]) -> dict[str, Any]:
    """The bands file: per kind, per group, the sorted LOSO ratios of every source."""
    return {kind: groups(rows) for kind, rows in sorted(found.items())}


def coverage(rows: list[Ratio], p: float = DEFAULT_CONFIDENCE, score: str = "tails"
             ) -> list[tuple[Ratio, str, bool, bool]]:
    """(case, group its band came from, measured value inside, measured value at or below the
    upper edge): each case of ``rows`` against the band (``score``: bands.SCORES) of the other
    sources' ratios alone; group "none" (outside) where no group had enough."""
    out = []
    for row in rows:
        others = groups([r for r in rows if r.source != row.source])
        found = select(others, row.keys, p, score=score)
        ratio = round(row.ratio, 4)
        out.append((row, found[0] if found else "none",
                    bool(found and found[1] <= ratio <= found[2]),
                    bool(found and ratio <= found[2])))
    return out


def tally(results: list[tuple[Ratio, str, bool, bool]], key: Any
          ) -> dict[str, tuple[int, int]]:
    """key(result) -> (inside, cases)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for result in results:
        out[key(result)][0] += result[2]
        out[key(result)][1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def report(found: dict[str, list[Ratio]], shared: set[str] | None = None) -> list[str]:
    """The coverage lines: per kind overall (and on the shared validation cases alone, the
    acceptance figure, where ``shared`` names them), by the group the band came from, by the
    case's family and own group."""
    lines = []
    for kind, rows in sorted(found.items()):
        results = coverage(rows, score=SCORES[kind])
        inside, below = sum(r[2] for r in results), sum(r[3] for r in results)
        lines.append(f"{kind}: measured value inside the p{round(100 * DEFAULT_CONFIDENCE)} "
                     f"band of the other sources for {inside} of {len(results)} cases "
                     f"({inside / len(results):.1%}); at or below its upper edge {below} "
                     f"({below / len(results):.1%})")
        mine = [r for r in results if shared is not None and r[0].case in shared]
        if mine and len(mine) < len(results):
            k = sum(r[2] for r in mine)
            lines.append(f"  on the shared validation cases alone: {k} of {len(mine)} "
                         f"({k / len(mine):.1%})")
        for title, key in (("band from", lambda r: r[1]), ("family", lambda r: r[0].keys[1]),
                           ("group", lambda r: r[0].keys[0])):
            lines += [f"  {title} {g}: {k} of {n}" for g, (k, n) in tally(results, key).items()]
    return lines


def main(argv: list[str] | None = None) -> None:
    args = folder_args(__doc__, "--write", "write planner/models/bands.yaml", argv)
    folder = args.folder
    start = time.perf_counter()
    cases, catalog = load(folder), load_catalog()
    found = ratios(loso(cases, catalog), cases, catalog)
    print("\n".join(report(found, shared_ids(folder))))
    bands = table(found)
    if args.write:
        BANDS_FILE.write_text("# written by benchmarks/bands.py --write: do not edit\n"
                              + yaml.safe_dump(bands, sort_keys=True), encoding="utf-8")
        print(f"wrote {BANDS_FILE}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
