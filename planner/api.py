"""The library API: what the CLI, tests and examples call."""

from __future__ import annotations

from typing import Any

from planner import render
from planner.catalog import Catalog, load_catalog
from planner.errors import PlannerError
from planner.memory import estimate_memory
from planner.request import TrainConfig, validate_config


def check(
    *, model: str, gpu: str, config: TrainConfig, catalog: Catalog | None = None,
    margin: float = 0.02,
) -> dict[str, Any]:
    """Memory check of one configuration: the `planner check --json` document."""
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
    est = estimate_memory(resolved.spec, gpu_spec, cfg)
    return render.check_doc(
        model=resolved.spec, asked_as=model, gpu=gpu_spec, cfg=cfg, est=est,
        fits=est.fits(margin), margin=margin,
    )
