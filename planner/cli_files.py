"""The command line's files: validation files read into reports, saved plan documents read
for export, and exports and HTML reports written (atomically)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from planner.catalog.frameworks import resolve
from planner.errors import PlannerError
from planner.inputs import (
    MAX_FILE_BYTES,
    decode,
    load_file,
    parse_json,
    short,
)
from planner.models.bands import case_band, framework_id
from planner.outputs import listings
from planner.outputs.files import STDOUT, write_atomic
from planner.validation.validate import validate_file
from planner.validation.validate_throughput import is_throughput_file, validate_throughput_file


def _written(path: str, write, what: str = "") -> None:
    """Write ``path`` atomically with ``write(temporary path)`` (outputs.write_atomic); an
    unwritable path is bad input (one line, exit 2)."""
    try:
        verb = write_atomic(path, write)
    except OSError as exc:
        raise PlannerError(f"cannot write {short(path, 200)}: {exc.strerror or exc}") from None
    click.echo(f"planner: {verb} {path}{what}", err=True)


def _write_html(path: str, plan_doc: dict | None, pareto_doc: dict | None) -> None:
    from planner.outputs.report import report_html  # deferred: only with --html

    page = report_html(plan_doc, pareto_doc)
    _written(path, lambda tmp: tmp.write_text(page, encoding="utf-8"))


def _validation_report(path: Path, catalog: Any, as_json: bool) -> Any:
    """One validation file's report: text, or the JSON document {cases, summary}."""
    if is_throughput_file(path):
        t_results, t_summary = validate_throughput_file(path, catalog)
        if not as_json:
            return listings.throughput_validate_text(t_results, t_summary)
        cases = [{"id": r.id, "metric": r.metric, "framework": r.framework,
                  "framework_version": r.framework_version, "usable": r.usable,
                  "measured": r.measured,
                  "predicted": None if r.predicted is None else {"value": r.predicted},
                  "band": case_band("throughput", r.predicted, framework=framework_id(
                      catalog, r.framework), workload=r.workload,
                      method=getattr(r, "method", None), metric=r.metric),
                  "rel_err": r.rel_err, "reason": r.reason} for r in t_results]
        return {"cases": cases, "summary": t_summary}
    results, summary = validate_file(path, catalog)
    if not as_json:
        return listings.validate_text(results, summary)
    cases = [{"id": r.id, "kind": r.kind, "framework": r.framework,
              "framework_version": r.framework_version, "usable": r.usable,
              "corrected": list(r.corrected),
              "measured": {"peak_gib": r.measured_gib, "measured_as": r.measured_as},
              "predicted": None if r.reason else {"peak_gib": r.predicted_gib,
                                                  "range_gib": r.predicted_range_gib,
                                                  "fits": r.predicted_fits},
              "band": None if r.reason or r.kind != "peak" else case_band(
                  "memory", r.predicted_gib, framework=framework_id(catalog, r.framework),
                  workload=r.workload, method=r.method),
              "rel_err": r.rel_err,
              "reason": r.reason} for r in results]
    return {"cases": cases, "summary": summary}


def _framework_format(cfg: Any, catalog: Any) -> str:
    """The launch format of the framework a plan's config runs on (its profile's
    launch_format)."""
    fid = cfg.framework
    if fid is None:
        raise PlannerError("the plan names no framework (saved before frameworks existed): "
                           "give --format")
    from planner.outputs.export import launch_format_of  # deferred: only for export

    fmt = launch_format_of(resolve(catalog, fid), cfg.workload)
    if fmt is None:
        raise PlannerError(f"the planner writes no launch config for framework {fid}'s own "
                           f"launcher ({cfg.workload}): give --format to write another format's")
    return fmt


def _export_target(opts: dict[str, object]) -> tuple[str | None, str | None]:
    """plan --export/--out, popped from the request options and checked."""
    fmt, out = opts.pop("export_fmt", None), opts.pop("export_out", None)
    if out and not fmt:
        raise PlannerError(f"--out {out} needs --export FORMAT")
    if not fmt:
        return None, None
    from planner.outputs.export import check_format  # deferred: only when a format is given

    key = check_format(str(fmt))
    if not out:
        raise PlannerError(f"--export {key} needs --out PATH (the plan itself goes to stdout)")
    return key, str(out)


def _read_plan_json(path: str) -> object:
    """A saved plan document through the input boundary (- reads stdin)."""
    if path != "-":
        return load_file(path, what="plan document", kind="json")
    data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1) if hasattr(sys.stdin, "buffer") \
        else sys.stdin.read(MAX_FILE_BYTES + 1).encode("utf-8", "surrogateescape")
    return parse_json(decode(data, what="plan document on stdin"), what="plan document on stdin")


def _pareto_point(doc: object, index: int, name: str) -> object:
    """Point ``index`` of a saved pareto document."""
    points = doc.get("points") if isinstance(doc, dict) else None
    if not isinstance(points, list):
        raise PlannerError(f"--point {index}: {short(name, 200)} is not a `planner pareto "
                           "--json` document (no points list)")
    if not 0 <= index < len(points):
        raise PlannerError(f"--point {index}: {short(name, 200)} holds points 0.."
                           f"{len(points) - 1}" if points else f"--point {index}: "
                           f"{short(name, 200)} holds no point")
    return points[index]


def _emit_export(result, fmt: str, out: str | None) -> None:
    """An export's warnings and notes to stderr, its config to ``out`` or stdout."""
    for warning in result.warnings:
        click.echo(f"planner: warning: {warning}", err=True)
    for note in result.notes:
        click.echo(f"planner: note: {note}", err=True)
    if out in (None, STDOUT):
        click.echo(result.text, nl=False)
        return
    _written(out, lambda tmp: tmp.write_text(result.text, encoding="utf-8"), f" ({fmt})")
