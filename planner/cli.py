"""The `planner` command line: parse -> request -> library call -> render. Thin by design.

Exit codes: 0 success (fits / plan found), 1 a well-formed request that does not fit or is
infeasible, 2 bad input (one line on stderr naming the value and what is allowed), 3 a bug: an
exception that got past the input boundary (planner/inputs.py) or a solver plan the analytic
models reject (one line naming the command line, never expected).
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import click

from planner.api import MAX_PARETO_POINTS
from planner.api import check as check_config
from planner.catalog.frameworks import resolve
from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.catalog.offers import offer_rows, rental_offers
from planner.catalog.params import count_params
from planner.catalog.request import (
    CHECKPOINTINGS,
    METHODS,
    OFFLOADS,
    OPTIMIZERS,
    WORKLOADS,
    TrainConfig,
)
from planner.catalog.specs import LAUNCH_FORMATS
from planner.cli_config import (
    _TUNE_FROM_CHECK,
    _TUNE_SEARCHED,
    TUNE_OPTIONS,
    _config,
    _model_file,
    _plan_request,
)
from planner.cli_files import (
    _emit_export,
    _export_target,
    _framework_format,
    _pareto_point,
    _read_plan_json,
    _validation_report,
    _write_html,
    _written,
)
from planner.cli_options import (
    CATALOG_OPTION,
    CLI_MEMORY_MARGIN,
    CONFIDENCE_HELP,
    FLOAT,
    INT,
    JSON_OPTION,
    MARGIN_HELP,
    PARALLEL_OPTIONS,
    FiniteFloat,
    _choice,
    config_options,
    plan_options,
    workload_options,
)
from planner.errors import PlannerError
from planner.inputs import check_arg, check_confidence, check_margin, short
from planner.models.bands import DEFAULT_CONFIDENCE, request_headroom
from planner.models.cost import define_job
from planner.models.efficiency import STACKS
from planner.outputs import listings, render, render_pareto, render_tune
from planner.outputs.files import check_targets
from planner.validation.validate import project_case_files


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="planner")
def cli() -> None:
    """Plan GPU hardware and training settings for large language models.

    \b
    Exit codes: 0 fits / found, 1 does not fit / infeasible, 2 bad input, 3 a bug (please
    report it).
    """


@cli.command()
@click.option("--model", required=True,
              help="Catalog id, HF repo id, size alias (7b) or config.json.")
@click.option("--gpu", required=True, help="GPU id from 'planner catalog gpus'.")
@click.option("--num-gpus", type=INT, default=1, show_default=True)
@click.option("--workload", type=_choice(WORKLOADS), default="sft", show_default=True)
@click.option("--method", type=_choice(METHODS), default="full", show_default=True)
@click.option("--lora-rank", type=INT, default=None, help="LoRA rank [default: the framework's].")
@click.option("--optimizer", type=_choice(OPTIMIZERS), default="adamw", show_default=True)
@click.option("--optimizer-in-backward", is_flag=True,
              help="Update each parameter as its gradient arrives (needs --grad-accum 1).")
@config_options
@click.option("--zero", "zero_stage", type=click.IntRange(0, 3), default=0, show_default=True)
@click.option("--fsdp", is_flag=True, help="PyTorch FSDP full sharding.")
@click.option("--tp", type=INT, default=1, show_default=True)
@click.option("--pp", type=INT, default=1, show_default=True)
@PARALLEL_OPTIONS
@click.option("--offload", type=_choice(OFFLOADS), default="none", show_default=True)
@click.option("--checkpointing", type=_choice(CHECKPOINTINGS), default="full", show_default=True)
@click.option("--micro-batch", type=INT, default=1, show_default=True)
@click.option("--grad-accum", type=INT, default=1, show_default=True)
@click.option("--seq-len", type=INT, default=None,
              help="Tokens per sequence [default: 2048; RL: prompt + response].")
@click.option("--memory-margin", type=FLOAT, default=CLI_MEMORY_MARGIN, show_default=True,
              help=MARGIN_HELP)
@click.option("--confidence", type=FLOAT, default=DEFAULT_CONFIDENCE, show_default=True,
              help=CONFIDENCE_HELP)
@click.option("--framework", default=None,
              help="Framework profile id ('planner catalog frameworks') [default: the "
                   "workload's default, or the first that runs the layout].")
@click.option("--stack", type=_choice(STACKS), default=None,
              help="Deprecated: the efficiency comes from --framework; this overrides it.")
@click.option("--pricing", type=_choice(("buy", "rent", "owned")), default="buy",
              show_default=True, help="buy, rent, or owned (hardware you have: cost is not a "
                                      "limit, time is the answer).")
@click.option("--price-kind", type=_choice(("new", "used")), default=None,
              help="Purchase price [default: new where known, else used].")
@click.option("--platform", default=None,
              help="Host platform id [default: buying, the cheapest priced host that takes the "
                   "GPU; renting, the provider's host, as planner plan prices it].")
@click.option("--tokens", type=FLOAT, default=None, help="Training tokens of the job.")
@click.option("--epochs", type=FLOAT, default=None, help="Epochs (with --dataset-tokens).")
@click.option("--dataset-tokens", type=FLOAT, default=None, help="Tokens in the data set.")
@click.option("--steps", type=INT, default=None, help="Optimizer steps of the job.")
@click.option("--power-usd-per-kwh", type=FiniteFloat(min_value=0), default=None,
              help="Add GPU power for the job to a purchase.")
@click.option("--offer", default=None,
              help="Rent on this offer, provider/instance_type ('planner catalog offers') "
                   "[default: the cheapest offer of the GPU that holds the job].")
@workload_options
@CATALOG_OPTION
@JSON_OPTION
def check(*, model: str, gpu: str, catalogs: tuple[str, ...], as_json: bool,
          memory_margin: float, confidence: float, stack: str | None, pricing: str,
          price_kind: str | None,
          platform: str | None, tokens: float | None, epochs: float | None,
          dataset_tokens: float | None, steps: int | None, power_usd_per_kwh: float | None,
          offer: str | None, critic_model: str | None, reward_model: str | None,
          **opts: object) -> None:
    """Does one configuration fit? Per-GPU memory breakdown against capacity.

    \b
    Example:
      planner check --model 7b --gpu a100-80gb-sxm --num-gpus 2 --zero 2 --seq-len 4096
      planner check --model qwen2.5-7b --workload grpo --method lora --gpu h100-sxm \
        --num-gpus 8 --fsdp --prompt-len 512 --response-len 1024 --rollout-batch 64
    """
    check_margin(memory_margin)
    check_confidence(confidence)
    cfg = _config(opts)
    catalog = load_catalog(catalogs)
    job = define_job(tokens=tokens, epochs=epochs, dataset_tokens=dataset_tokens, steps=steps,
                     global_batch=cfg.global_batch_size, seq_len=cfg.seq_len)
    kwargs = dict(catalog=catalog, margin=memory_margin, confidence=confidence, stack=stack,
                  pricing=pricing,
                  price_kind=price_kind, platform=platform, job=job,
                  power_usd_per_kwh=power_usd_per_kwh, critic_model=critic_model,
                  reward_model=reward_model, offer=offer)
    doc = check_config(model=model, gpu=gpu, config=cfg, **kwargs)
    if not doc["fits"]:
        from planner.fixes import fixes_doc, ranked_fixes  # only when it does not fit

        found = ranked_fixes(model, gpu, TrainConfig.model_validate(doc["config"]), **kwargs)
        doc["fixes"] = fixes_doc(found, doc["throughput"]["tokens_per_s"])
    click.echo(render.to_json(doc) if as_json else render.check_text(doc))
    sys.exit(0 if doc["fits"] else 1)


def _tune_params() -> list[click.Parameter]:
    shared = [p for p in check.params if p.name not in _TUNE_SEARCHED
              and (p.name in TrainConfig.model_fields or p.name in _TUNE_FROM_CHECK)]
    return [*shared, *TUNE_OPTIONS]


@cli.command("tune", params=_tune_params())
def tune_cmd(*, model: str, gpu: str, catalogs: tuple[str, ...], as_json: bool,
             memory_margin: float, confidence: float, stack: str | None, platform: str | None,
             critic_model: str | None, reward_model: str | None, objective: str,
             memory_target: float | None, checkpointing: str, micro_batch: int | None,
             grad_accum: int | None, global_batch: int | None, rollout_batch: int | None,
             rollout_n: int | None, logprob_micro_batch: int | None, tie_tolerance: float,
             requires: tuple[str, ...], **opts: object) -> None:
    """Fixed GPUs and job: the batch settings with the most throughput (or memory use up to a
    target), under divisibility rules; the runners-up; what came closest if nothing fits.

    \b
    Exit codes: 0 settings found, 1 nothing fits, 2 bad input.
    Example:
      planner tune --model 0.5b --gpu v100-32gb --workload grpo --prompt-len 256 \
        --response-len 256 --objective memory --memory-target 0.875
      planner tune --model 0.5b --gpu v100-32gb --workload grpo --prompt-len 256 \
        --response-len 256 --rollout-n 16 --require 'rollout_n % micro_batch == 0' \
        --require 'rollout_batch % num_gpus == 0'
    """
    from planner.solver.tune import tune as tune_search  # deferred: each command loads its own

    # an open checkpointing is searched; the base leaves it to frameworks.unstated_checkpointing
    cfg = _config({**opts, "micro_batch": 1, "grad_accum": 1,
                   **({} if checkpointing == "auto" else {"checkpointing": checkpointing})})
    pins = {"micro_batch_size": micro_batch, "grad_accum": grad_accum,
            "global_batch_size": global_batch, "rollout_batch": rollout_batch,
            "rollout_n": rollout_n, "logprob_micro_batch": logprob_micro_batch,
            "checkpointing": checkpointing}
    result = tune_search(model=model, gpu=gpu, config=cfg, catalog=load_catalog(catalogs),
                         objective=objective, memory_target=memory_target, margin=memory_margin,
                         confidence=confidence,
                         stack=stack, platform=platform, critic_model=critic_model,
                         reward_model=reward_model, pins=pins, tie_tolerance=tie_tolerance,
                         requires=requires)
    doc = render_tune.tune_doc(result)
    if result.best is None:
        from planner.fixes import closest_fixes  # only when nothing fits

        doc["fixes"] = closest_fixes(
            model, gpu, result.smallest, searched=result.space, catalog=load_catalog(catalogs),
            margin=memory_margin, confidence=confidence, stack=stack, platform=platform,
            critic_model=critic_model, reward_model=reward_model)
    click.echo(render.to_json(doc) if as_json else render_tune.tune_text(doc))
    sys.exit(0 if result.best is not None else 1)


@cli.command("plan")
@click.option("--objective", type=_choice(("cost", "time")), default="cost", show_default=True)
@click.option("--export", "export_fmt", default=None, metavar="FORMAT",
              help="Also write a launch config of the plan: " + ", ".join(LAUNCH_FORMATS)
                   + " (openrlhf@0.8 for OpenRLHF 0.8; with --out).")
@click.option("--out", "export_out", type=click.Path(dir_okay=False), default=None,
              help="File for --export (- for stdout after the plan).")
@plan_options
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Also write a self-contained HTML report (plan, memory bars, constraints, "
                   "alternatives, Pareto chart).")
def plan_cmd(*, catalogs: tuple[str, ...], as_json: bool, gpus: str | None, html_path: str | None,
             **opts: object) -> None:
    """The cheapest (or fastest) hardware to buy or rent for the job, and how to run it.

    \b
    Exit codes: 0 plan found, 1 infeasible (with the conflicting requirements and fixes),
    2 bad input.
    Example:
      planner plan --model 7b --budget 3000
    """
    from planner.solver.solve import plan as plan_request  # OR-Tools loads only for the solver

    export_fmt, export_out = _export_target(opts)  # checked before solving, as are the files
    check_targets([("--out", export_out), ("--html", html_path)], inputs=_model_file(opts),
                  stdout_ok=["--out"])
    request, catalog = _plan_request(catalogs, gpus, opts)
    result = plan_request(request, catalog)
    doc = render.with_memory_limit(render.plan_doc(result), margin=request.memory_margin,
                                   confidence=request.confidence,
                                   headroom=request_headroom(
                                       request, result.plan.config.method if result.plan
                                       else None))
    export = None  # rendered before anything is printed: a refusal leaves no half output
    if export_fmt and result.plan is not None:
        from planner.outputs.export import export_plan  # deferred: only with --export

        export = export_plan(result, export_fmt, catalog=catalog)
    if html_path:  # the report's Pareto chart: a short sweep of the same request
        from planner.solver.solve import pareto as pareto_sweep  # OR-Tools: only for the solver

        points = pareto_sweep(request, catalog, max_points=8) if result.plan else []
        _write_html(html_path, doc, render_pareto.pareto_doc(points))
    click.echo(render.to_json(doc) if as_json else render.plan_text(doc))
    if export is not None:
        _emit_export(export, export_fmt, export_out)
    sys.exit(0 if result.plan is not None else 1)


@cli.command("pareto")
@plan_options
@click.option("--max-points", type=click.IntRange(1, MAX_PARETO_POINTS), default=12,
              show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also draw cost vs time into FILE.png or FILE.svg (needs pip install "
                   "'.[plot]').")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Also write a self-contained HTML report (cheapest plan, memory bars, "
                   "constraints, alternatives, Pareto chart).")
def pareto_cmd(*, catalogs: tuple[str, ...], as_json: bool, gpus: str | None, max_points: int,
               plot_path: str | None, html_path: str | None, **opts: object) -> None:
    """Cost-vs-time Pareto-optimal setups: each point the cheapest plan at least 1 % faster
    than the previous one.

    \b
    Example:
      planner pareto --model 8b --pricing rent --tokens 1e9 --max-gpus 64
    """
    from planner.solver.solve import pareto as pareto_sweep  # OR-Tools loads only for the solver

    if plot_path:
        from planner.outputs.plot import check_target  # deferred: only with --plot

        check_target(plot_path)  # a .png/.svg name and matplotlib present, before solving
    check_targets([("--plot", plot_path), ("--html", html_path)], inputs=_model_file(opts))
    request, catalog = _plan_request(catalogs, gpus, opts)
    points = pareto_sweep(request, catalog, max_points=max_points + 1)  # one more: goes on?
    doc = render_pareto.pareto_doc(points[:max_points], more=len(points) > max_points)
    points = points[:max_points]
    if plot_path or html_path:  # the cheapest plan and its alternatives: the faint candidates
        from planner.solver.solve import plan as plan_request  # OR-Tools: only for the solver

        plan_doc = render.plan_doc(plan_request(request, catalog)) if points else None
        if plot_path:
            from planner.outputs.plot import write_plot  # matplotlib: only with --plot

            _written(plot_path, lambda tmp: write_plot(tmp, doc, plan_doc))
        if html_path:
            _write_html(html_path, plan_doc, doc)
    click.echo(render.to_json(doc) if as_json else render_pareto.pareto_text(doc))
    sys.exit(0 if points else 1)


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@CATALOG_OPTION
@JSON_OPTION
def validate(files: tuple[str, ...], catalogs: tuple[str, ...], as_json: bool) -> None:
    """Predict every case of validation files and report the error.

    Without FILES: the project's own cases (validation/memory_cases.yaml,
    validation/throughput_cases.yaml and validation/project_cases*.yaml).

    \b
    Example:
      planner validate
      planner validate my_cases.yaml --json
    """
    paths = [Path(f) for f in files] or [*(shipped_validation_dir() / n for n in (
        "memory_cases.yaml", "throughput_cases.yaml")), *project_case_files()]
    catalog = load_catalog(catalogs)
    docs = [_validation_report(path, catalog, as_json) for path in paths]
    if as_json:
        click.echo(render.to_json(docs[0] if len(docs) == 1 else
                                  {"files": [{"file": str(p), **d} for p, d in zip(
                                      paths, docs, strict=True)]}))
    else:
        click.echo("\n\n".join(docs))


@cli.command("catalog")
@click.argument("kind", type=_choice(("gpus", "models", "platforms", "frameworks", "offers")))
@CATALOG_OPTION
@JSON_OPTION
def catalog_cmd(kind: str, catalogs: tuple[str, ...], as_json: bool) -> None:
    """List what the catalog holds: gpus, models, platforms, frameworks or rental offers.

    \b
    Example:
      planner catalog gpus --json
      planner catalog offers
    """
    cat = load_catalog(catalogs)
    if kind == "offers":  # what --pricing rent chooses from (on demand), and spot prices
        rows = offer_rows(rental_offers(cat, cat.gpus) + rental_offers(cat, cat.gpus, spot=True))
        click.echo(render.to_json(rows) if as_json else listings.offers_table(rows))
        return
    entries = list(getattr(cat, kind).values())
    if kind == "frameworks":
        profiles = [resolve(cat, f.id) for f in sorted(entries, key=lambda f: f.id)]
        click.echo(render.to_json([{"id": p.id, **p.spec.model_dump(mode="json", exclude={
            "facts"}), "facts": {k: {**f.model_dump(mode="json"), "from": p.origin[k]}
                                 for k, f in p.facts.items()}} for p in profiles])
                   if as_json else listings.frameworks_table(profiles))
        return
    if as_json:
        docs = [e.model_dump(mode="json") for e in entries]
        if kind == "models":
            for d, m in zip(docs, entries, strict=True):
                d["params_total"] = count_params(m).total
        if kind == "models":
            docs.append({"size_aliases": cat.size_aliases})
        click.echo(render.to_json(docs))
    elif kind == "gpus":
        click.echo(listings.gpus_table(entries))
    elif kind == "models":
        click.echo(listings.models_table(entries, {m.id: count_params(m).total for m in entries}))
        click.echo("\nsize aliases: " + ", ".join(f"{k}={v}" for k, v in cat.size_aliases.items()))
    else:
        click.echo(listings.platforms_table(entries))


@cli.command("schema")
@click.argument("kind", metavar="KIND", type=_choice(("check", "plan", "pareto", "tune")))
def schema_cmd(kind: str) -> None:
    """Print the JSON Schema of a command's --json document (planner/outputs/schemas/KIND.vN.json).

    \b
    Example:
      planner schema plan > plan.schema.json
    """
    from planner.outputs.schema import schema_text  # deferred: only for planner schema

    click.echo(schema_text(kind.lower()), nl=False)


@cli.command("export")
@click.option("--format", "fmt", default=None, metavar="FORMAT",
              help=", ".join(LAUNCH_FORMATS) + " (openrlhf@0.8 for OpenRLHF 0.8) [default: the "
                   "launch format of the plan's framework].")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the config here [default: stdout].")
@click.option("--point", type=INT, default=None,
              help="Export point I (0 = cheapest) of a saved `planner pareto --json`.")
@click.argument("plan_file", metavar="PLAN.json")
@CATALOG_OPTION
def export_cmd(*, fmt: str | None, out: str | None, point: int | None, plan_file: str,
               catalogs: tuple[str, ...]) -> None:
    """Launch config from a saved `planner plan --json` (PLAN.json, or - for stdin), a
    `planner pareto --json` with --point I, or one of its points.

    \b
    Warnings (settings the format only approximates) and notes (what the launch still needs)
    go to stderr; a plan setting the format cannot express is an error naming it (exit 2).
    Example:
      planner plan --model 0.5b --gpus rtx-4090 --json > plan.json
      planner export --format deepspeed --out ds_config.json plan.json
      planner plan --model 0.5b --workload grpo --prompt-len 256 --response-len 256 \
        --export verl --out run_verl.sh
    """
    from planner.outputs.export import (  # deferred: only for export
        check_format,
        export_plan,
        job_of,
    )

    check_targets([("--out", out)], inputs=[plan_file], stdout_ok=["--out"])
    plan = _read_plan_json(plan_file)
    if point is not None:
        plan = _pareto_point(plan, point, plan_file)
    catalog = load_catalog(catalogs)
    key = None if fmt is None else check_format(fmt)
    job = job_of(plan, catalog=catalog)  # the saved document, parsed once
    key = key or check_format(_framework_format(job.cfg, catalog))
    _emit_export(export_plan(job, key, catalog=catalog), key, out)


# A planner process allocates hundreds of thousands of small objects that live to its end
# (candidate rows, memoised model terms) and makes few reference cycles; with the collector's
# default thresholds it rescanned that heap over and over (measured, 8b PPO with every choice
# open: the candidate rows 3.6 s -> 0.8 s with a larger first threshold). Cycles are still
# collected, only less often.
GC_THRESHOLDS = (100_000, 50, 100)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error becomes one line on stderr: exit 2 for bad input, 3 for an
    exception that escaped the input boundary (a bug)."""
    args = list(sys.argv[1:] if argv is None else argv)
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        _run(args)
    except Exception as exc:  # the last catch: anything here is a planner bug
        command = short(" ".join(["planner", *args]), 160)
        click.echo(f"planner: internal error (a bug, please report it) on input {command}: "
                   f"{type(exc).__name__}: {short(str(exc), 200)}".replace("\n", " "),
                   err=True)
        sys.exit(3)


def run(argv: list[str]) -> int:
    """``planner ARGV`` in this process, as a user types it: prints what the command prints and
    returns its exit code (the examples answer their questions with the commands this way)."""
    try:
        main(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def _run(args: list[str]) -> None:
    try:
        for position, arg in enumerate(args, start=1):
            check_arg(arg, position=position)
        rv = cli.main(args=args, prog_name="planner", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("planner: aborted", err=True)
        sys.exit(2)
    except click.UsageError as exc:
        click.echo(f"planner: error: {exc.format_message()}".replace("\n", " "), err=True)
        sys.exit(2)
    except PlannerError as exc:
        click.echo(f"planner: error: {exc}".replace("\n", " "), err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"planner: error: {exc.format_message()}".replace("\n", " "), err=True)
        sys.exit(2)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
