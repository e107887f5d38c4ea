"""Print the accuracy tables of the planner's models against ../shared/validation.

Usage: python benchmarks/accuracy.py [VALIDATION_DIR]
Prints, per file, each case's prediction and the summary (median / p90 |relative error|,
bias, share within 20 %, fits/OOM verdicts), exactly as `planner validate` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from planner import render
from planner.catalog import load_catalog
from planner.validate import validate_file
from planner.validate_throughput import validate_throughput_file

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "validation"


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    catalog = load_catalog()
    for name in ("memory_cases.yaml",):
        results, summary = validate_file(folder / name, catalog)
        print(f"== {name} ==")
        print(render.validate_text(results, summary))
        print()
    t_results, t_summary = validate_throughput_file(folder / "throughput_cases.yaml", catalog)
    print("== throughput_cases.yaml ==")
    print(render.throughput_validate_text(t_results, t_summary))


if __name__ == "__main__":
    main()
