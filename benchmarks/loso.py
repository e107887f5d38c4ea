"""Leave-one-source-out accuracy (issues 17 and 18): the headline figures of benchmarks/README.md.

    python benchmarks/loso.py [VALIDATION_DIR] [--cases]   # default: validation/ (project copy)

``--cases`` also prints every usable throughput case's LOSO and in-sample error, worst first.

Cases are grouped by the document or repository their ``source`` names (source_key). For each
source, every fitted constant is refitted without that source's cases (benchmarks/fit.py,
fit_constants) and the source's cases are predicted with the refit; the predictions of all
sources together are summarised exactly as ``planner validate`` summarises in-sample ones
(validate.summarise, validate_throughput.summarise_throughput), and printed next to them as a
Markdown table. Where a source held all the cases of a constant, the prediction uses what a user
would get without it (fit.py's fallbacks) and counts as such ("on fallback").
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit import (  # noqa: E402
    Cases,
    Fit,
    applied,
    fit_constants,
    fitted_ids,
    folder_args,
    load,
)

from planner.catalog.load import Catalog, load_catalog  # noqa: E402
from planner.validation.throughput_cases import stack_of  # noqa: E402
from planner.validation.validate import (  # noqa: E402
    CaseResult,
    load_cases,
    predict_case,
    summarise,
)
from planner.validation.validate_throughput import (  # noqa: E402
    ThroughputResult,
    error_stats,
    predict_throughput_case,
    summarise_throughput,
)

# Repositories that moved: both names are one source.
RENAMED = {"github.com/microsoft/deepspeedexamples": "github.com/deepspeedai/deepspeedexamples",
           "github.com/microsoft/deepspeed": "github.com/deepspeedai/deepspeed",
           "github.com/nvidia/nemo": "github.com/nvidia-nemo/nemo"}
CODE_HOSTS = ("github.com", "gitlab.com", "huggingface.co")


def source_key(url: str) -> str:
    """The source a case comes from, for leave-one-source-out: on a code host the repository
    (``github.com/OWNER/REPO``, any file, commit or fragment of it; huggingface.co likewise
    OWNER/NAME, its datasets/ and spaces/ with the kind), on arXiv the paper without its version
    (abs and pdf alike), elsewhere the host and path without query or fragment (``www.``
    dropped; one page or document). Lower case; repositories that moved are one source
    (RENAMED)."""
    parts = urlsplit(str(url).strip())
    host = parts.netloc.lower().removeprefix("www.")
    path = [p for p in parts.path.lower().split("/") if p]
    if host in CODE_HOSTS:
        take = 3 if path[:1] in (["datasets"], ["spaces"]) else 2
        key = "/".join([host, *path[:take]])
        return RENAMED.get(key, key)
    if host == "arxiv.org" and len(path) >= 2:
        paper = path[1].removesuffix(".pdf").split("v")[0]
        return f"arxiv.org/{paper}"
    return "/".join([host, *path])


def by_source(cases: Cases) -> dict[str, list[str]]:
    """Source key -> the ids of its cases, memory and throughput."""
    out: dict[str, list[str]] = defaultdict(list)
    for c in [*cases.memory.values(), *cases.throughput.values()]:
        out[source_key(c.get("source", ""))].append(c["id"])
    return dict(sorted(out.items()))


def on_fallback(case: dict[str, Any], fit: Fit, catalog: Catalog) -> bool:
    """The case's prediction uses a constant that fell back (no case of it left)."""
    if "metric" not in case:
        return any(f.startswith("calibration.") for f in fit.fallbacks)
    stack = stack_of(case, catalog)
    keys = [f"stack_utilisation.{stack}.", f"decode_efficiency.{stack}:"]
    if case.get("workload") in ("ppo", "grpo"):  # every generator reads the rollout factor
        keys.append("rl_rollout_decode_efficiency")
    return any(f.startswith(k) for f in fit.fallbacks for k in keys)


def predict_all(cases: Cases, ids: list[str], catalog: Catalog) -> tuple[
        list[CaseResult], list[ThroughputResult]]:
    mem = [predict_case(cases.memory[i], catalog) for i in ids if i in cases.memory]
    thr = [predict_throughput_case(cases.throughput[i], catalog) for i in ids
           if i in cases.throughput]
    return mem, thr


def loso(cases: Cases, catalog: Catalog, *, log: Callable[[str], None] = lambda s: None
         ) -> dict[str, Any]:
    """In-sample and leave-one-source-out results: {"in": (memory, throughput results),
    "loso": (...), "fallback_ids": ids predicted on a fallback, "sources": {key: (cases,
    refit: bool, fallbacks)}}."""
    everything = by_source(cases)
    full = fit_constants(cases, catalog)
    all_ids = [i for ids in everything.values() for i in ids]
    with applied(full.values):
        inside = predict_all(cases, all_ids, catalog)
    mem: list[CaseResult] = []
    thr: list[ThroughputResult] = []
    fallback_ids: list[str] = []
    info: dict[str, Any] = {}
    for key, ids in everything.items():
        held = fitted_ids() & set(ids)
        fit = fit_constants(cases, catalog, exclude=held) if held else full
        with applied(fit.values):
            m, t = predict_all(cases, ids, catalog)
            fallback_ids += [i for i in ids if held and on_fallback(
                cases.memory.get(i) or cases.throughput[i], fit, catalog)]
        mem += m
        thr += t
        info[key] = (len(ids), bool(held), fit.fallbacks)
        if held:
            log(f"refit without {key} ({len(held)} fitted cases)")
    return {"in": inside, "loso": (mem, thr), "fallback_ids": set(fallback_ids),
            "sources": info}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _verdicts_right(confusion: dict[str, int]) -> tuple[int, float | None]:
    n = sum(v for k, v in confusion.items() if k != "no_verdict")
    right = confusion["fits_predicted_fits"] + confusion["oom_predicted_oom"]
    return n, (right / n if n else None)


def rows(results: tuple[list[CaseResult], list[ThroughputResult]],
         fallback_ids: set[str]) -> dict[str, tuple]:
    """Group -> (cases, median, p90, verdict share) of one set of predictions; the usable
    training cases also split by whether their source's refit left them on a fallback."""
    m, t = summarise(results[0]), summarise_throughput(results[1])
    training = [r for r in results[1] if r.usable and r.family == "training"]
    out: dict[str, tuple] = {}

    def put(name: str, s: dict[str, Any], count: str = "predicted") -> None:
        out[name] = (s.get(count, 0), s.get("median_abs_err"), s.get("p90_abs_err"), None)

    put("memory: SFT-family peaks (usable)", m["sft_acceptance"], "peak_cases")
    put("memory: RL/preference peaks", m["rl"]["peaks"], "peak_cases")
    v = m["sft_verdicts"]
    out["memory: SFT fits/OOM verdicts right"] = (v["fits_cases"], None, None,
                                                  v.get("fits_accuracy"))
    n, share = _verdicts_right(m["rl"]["verdicts"])
    out["memory: RL/preference fits/OOM verdicts right"] = (n, None, None, share)
    put("throughput: training (usable)", t["training"])
    put("  training, own stack refitted", error_stats(
        [r for r in training if r.id not in fallback_ids]))
    put("  training, on a fallback", error_stats([r for r in training if r.id in fallback_ids]))
    for stack, s in t["training_by_stack"].items():
        put(f"  training, stack {stack}", s)
    for fw, s in t["training_by_framework"].items():
        put(f"  training, framework {fw}", s)
    for w, s in t["training_by_workload"].items():
        put(f"  training, workload {w}", s)
    for w in ("ppo", "grpo"):
        put(f"RL step time: {w} (usable)", t["rl_by_workload"].get(w, {}))
        mine = [r for r in results[1] if r.usable and r.family == "rl" and r.workload == w]
        for fw in sorted({r.framework for r in mine}):
            put(f"  {w}, framework {fw}", error_stats([r for r in mine if r.framework == fw]))
    put("decode (usable)", t["decode"])
    return out


def only(results: tuple[list[CaseResult], list[ThroughputResult]], ids: set[str]) -> tuple[
        list[CaseResult], list[ThroughputResult]]:
    """The results of the cases in ``ids``."""
    return [r for r in results[0] if r.id in ids], [r for r in results[1] if r.id in ids]


SHARED_GROUPS = ("memory: SFT-family peaks (usable)", "memory: RL/preference peaks",
                 "throughput: training (usable)", "RL step time: ppo (usable)",
                 "RL step time: grpo (usable)")


def shared_table(report: dict[str, Any], shared: set[str]) -> list[str]:
    """The headline groups on the shared validation cases alone (the acceptance figures of
    issues 17 and 18), the project's own cases (validation/project_cases*.yaml) left out of the
    summary but not out of the fits."""
    fb = report["fallback_ids"]
    inside = rows(only(report["in"], shared), fb)
    outside = rows(only(report["loso"], shared), fb)
    lines = ["", "On the ../shared/validation cases alone (project cases fitted on, not counted):",
             "", "| group | cases | LOSO median | LOSO p90 | in-sample median | in-sample p90 |",
             "|---|---|---|---|---|---|"]
    for name in SHARED_GROUPS:
        n, med, p90, _ = outside[name]
        _n, imed, ip90, _ = inside[name]
        lines.append(f"| {name} | {n} | {_pct(med)} | {_pct(p90)} | {_pct(imed)} | "
                     f"{_pct(ip90)} |")
    return lines


def table(report: dict[str, Any], cases: Cases, shared: set[str] | None = None) -> str:
    fb = report["fallback_ids"]
    inside, outside = rows(report["in"], fb), rows(report["loso"], fb)
    usable_fb = {r.id for r in report["loso"][1] if r.usable and r.id in fb}
    lines = ["| group | cases | LOSO median | LOSO p90 | in-sample median | in-sample p90 |",
             "|---|---|---|---|---|---|"]
    for name, (n, med, p90, share) in outside.items():
        _n, imed, ip90, ishare = inside[name]
        if share is not None or ishare is not None:
            lines.append(f"| {name} | {n} | {_pct(share)} right | | {_pct(ishare)} right | |")
        else:
            lines.append(f"| {name} | {n} | {_pct(med)} | {_pct(p90)} | {_pct(imed)} | "
                         f"{_pct(ip90)} |")
    lines.append("")
    lines.append(f"Usable throughput cases predicted on a fallback (no case of their constant "
                 f"left): {len(usable_fb)}: {', '.join(sorted(usable_fb)) or 'none'}.")
    refits = [k for k, (_n, held, _f) in report["sources"].items() if held]
    lines += ["", f"{len(report['sources'])} sources; {len(refits)} hold fitted cases and were "
              "refitted without them (usable cases: memory peaks, training, RL and decode "
              "throughput):", "",
              "| source held out | usable cases | LOSO median | in-sample median | fallbacks |",
              "|---|---|---|---|---|"]
    for key in refits:
        ids = set(by_source(cases)[key])
        errs = [[r.rel_err for r in rs if r.usable and r.id in ids and r.rel_err is not None
                 and getattr(r, "kind", "peak") == "peak"]
                for rs in (report["loso"][0] + report["loso"][1],
                           report["in"][0] + report["in"][1])]
        fbs = "; ".join(report["sources"][key][2]) or "-"
        lines.append(f"| {key} | {len(errs[0])} | {_pct(_median_abs(errs[0]))} | "
                     f"{_pct(_median_abs(errs[1]))} | {fbs} |")
    if shared is not None and shared != set(cases.memory) | set(cases.throughput):
        lines += shared_table(report, shared)
    return "\n".join(lines)


def shared_ids(folder: Path) -> set[str]:
    """The ids of the shared validation files of ``folder`` (not the project's own)."""
    return {c["id"] for name in ("memory_cases.yaml", "throughput_cases.yaml")
            for c in load_cases(folder / name)}


def _median_abs(errs: list[float]) -> float | None:
    return statistics.median(abs(e) for e in errs) if errs else None


def per_case(report: dict[str, Any], shared: set[str]) -> str:
    """Every usable throughput case's LOSO and in-sample error, worst first per family (the
    cases behind the medians and p90s), marked shared or project and on a fallback."""
    inside = {r.id: r for r in report["in"][1]}
    rows = sorted(((r.family, -abs(r.rel_err), r) for r in report["loso"][1]
                   if r.usable and r.rel_err is not None), key=lambda x: (x[0], x[1]))
    lines = ["| family | case | framework | LOSO | in-sample | set |", "|---|---|---|---|---|---|"]
    for family, _, r in rows:
        ins = inside[r.id].rel_err
        where = ("shared" if r.id in shared else "project") + \
            (", on a fallback" if r.id in report["fallback_ids"] else "")
        lines.append(f"| {family} | {r.id} | {r.framework} | {100 * r.rel_err:+.1f} % | "
                     f"{'-' if ins is None else f'{100 * ins:+.1f} %'} | {where} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = folder_args(__doc__, "--cases", "also print every case's error", argv)
    folder = args.folder
    start = time.perf_counter()
    cases = load(folder)
    report = loso(cases, load_catalog(), log=lambda s: print(s, file=sys.stderr))
    print(table(report, cases, shared_ids(folder)))
    if args.cases:
        print("\n" + per_case(report, shared_ids(folder)))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
