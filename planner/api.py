"""The library API: what the CLI, tests and examples call."""

from __future__ import annotations

from typing import Any

from planner import render
from planner.catalog import Catalog, load_catalog
from planner.cost import Job, job_cost
from planner.efficiency import default_stack
from planner.errors import PlannerError
from planner.memory import estimate_memory
from planner.request import TrainConfig, validate_config
from planner.specs import GpuSpec, PlatformSpec
from planner.throughput import estimate_throughput


def default_platform(gpu: GpuSpec, catalog: Catalog) -> PlatformSpec | None:
    """The cheapest priced host platform that takes ``gpu`` (None if no priced host does)."""
    hosts = [p for p in catalog.platforms.values()
             if gpu.form_factor in p.form_factors and p.price_usd is not None]
    return min(hosts, key=lambda p: (p.price_usd, p.id), default=None)


def check(
    *, model: str, gpu: str, config: TrainConfig, catalog: Catalog | None = None,
    margin: float = 0.02, stack: str | None = None, pricing: str = "buy",
    price_kind: str | None = None, platform: str | None = None, job: Job | None = None,
    power_usd_per_kwh: float | None = None,
) -> dict[str, Any]:
    """Memory, throughput, time and cost of one configuration: the `planner check --json`
    document."""
    cat = catalog or load_catalog()
    resolved = cat.model(model)
    gpu_spec = cat.gpu(gpu)
    cfg = config
    if resolved.weight_bits:
        if cfg.method != "qlora":
            raise PlannerError(
                f"model {model!r} is a {resolved.weight_bits}-bit checkpoint: only --method qlora "
                f"can train it (got {cfg.method})"
            )
        cfg = cfg.model_copy(update={"quant_format": "gptq"})
    validate_config(cfg, resolved.spec)
    plat = cat.platform(platform) if platform else default_platform(gpu_spec, cat)
    per_node = min(plat.max_gpus, gpu_spec.max_gpus_per_node) if plat else None
    est = estimate_memory(resolved.spec, gpu_spec, cfg, gpus_per_node=per_node)
    tput = estimate_throughput(resolved.spec, gpu_spec, cfg, platform=plat,
                               stack=stack or default_stack(cfg))
    cost = job_cost(gpu_spec, cfg.num_gpus, tokens_per_s=tput.tokens_per_s, job=job,
                    pricing=pricing, platform=plat if pricing == "buy" else None,
                    price_kind=price_kind, power_usd_per_kwh=power_usd_per_kwh)
    doc = render.check_doc(
        model=resolved.spec, asked_as=model, gpu=gpu_spec, cfg=cfg, est=est,
        fits=est.fits(margin), margin=margin,
    )
    doc["platform"] = plat.id if plat else None
    doc["throughput"] = tput.summary()
    doc["throughput"]["terms_s"] = dict(tput.terms)
    doc["throughput"]["notes"] = list(tput.notes)
    doc["time_hours"] = cost.hours
    doc["cost"] = cost.summary()
    doc["cost"]["notes"] = list(cost.notes)
    return doc
