"""The library API: what the CLI, tests and examples call."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planner import render
from planner.bands import band, memory_group, throughput_group
from planner.catalog import Catalog, load_catalog
from planner.cost import Job, define_job, job_cost, job_notes
from planner.errors import PlannerError
from planner.frameworks import FrameworkChoice, apply, choose
from planner.inputs import MAX_FLOAT, check_choice, check_margin, check_range, check_type, short
from planner.request import PlanRequest, TrainConfig, fill_role_gpus, validate_config
from planner.rltime import workload_throughput
from planner.specs import GpuSpec, ModelSpec, PlatformSpec, gpus_per_host
from planner.workloads import estimate_memory

MAX_PARETO_POINTS = 50  # points of one sweep (`pareto --max-points`)


def default_platform(gpu: GpuSpec, catalog: Catalog) -> PlatformSpec | None:
    """The cheapest priced host platform that takes ``gpu`` (None if no priced host does)."""
    hosts = [p for p in catalog.platforms.values()
             if gpu.form_factor in p.form_factors and p.price_usd is not None]
    return min(hosts, key=lambda p: (p.price_usd, p.id), default=None)


def job_platform(gpu: GpuSpec, catalog: Catalog, *, pricing: str,
                 platform: str | None = None) -> PlatformSpec | None:
    """The host platform a job of ``check`` runs on, as ``plan`` prices it: the one named;
    else for a rental none (the provider's instance is the host, space._offers' rental
    offers: GPUs per node from the GPU, network and CPU defaults of the throughput model);
    else the cheapest priced host that takes the GPU (default_platform)."""
    if platform:
        return catalog.platform(platform)
    if pricing == "owned":  # the user's host: the platforms that take the GPU, priced or not
        return min((p for p in catalog.platforms.values() if gpu.form_factor in p.form_factors),
                   key=lambda p: (p.price_usd is None, p.price_usd or 0.0, p.id), default=None)
    return None if pricing == "rent" else default_platform(gpu, catalog)


def role_models(cat: Catalog, cfg: TrainConfig, critic_model: str | None,
                reward_model: str | None) -> tuple[ModelSpec | None, ModelSpec | None]:
    """Critic and reward models named by the user (PPO; a reward model also for GRPO)."""
    for name, value in (("critic_model", critic_model), ("reward_model", reward_model)):
        if value is not None:
            check_type(value, str, name=name)
    if critic_model and cfg.workload != "ppo":
        raise PlannerError(f"--critic-model {critic_model} applies to --workload ppo only "
                           f"(got {cfg.workload})")
    if reward_model and cfg.workload not in ("ppo", "grpo"):
        raise PlannerError(f"--reward-model {reward_model} applies to --workload ppo or grpo "
                           f"(got {cfg.workload})")
    critic = cat.model(critic_model).spec if critic_model else None
    reward = cat.model(reward_model).spec if reward_model else None
    return critic, reward


def resolve_job(cat: Catalog, model: str, gpu: str, config: TrainConfig, *,
                reward_model: str | None = None) -> tuple[Any, GpuSpec, TrainConfig]:
    """The catalog entries of a job and its validated config: a quantized checkpoint
    (-Int4/GPTQ) trains only with QLoRA, on its GPTQ weights; split RL placement without
    role GPUs gets equal groups (request.fill_role_gpus)."""
    resolved = cat.model(model)
    gpu_spec = cat.gpu(gpu)
    cfg = fill_role_gpus(config, has_reward=reward_model is not None)
    if resolved.weight_bits:
        if cfg.method != "qlora":
            raise PlannerError(
                f"model {model!r} is a {resolved.weight_bits}-bit checkpoint: only --method qlora "
                f"can train it (got {cfg.method})"
            )
        cfg = cfg.model_copy(update={"quant_format": "gptq"})
    validate_config(cfg, resolved.spec)
    return resolved, gpu_spec, cfg


def job_framework(cat: Catalog, cfg: TrainConfig,
                  stack: str | None = None) -> tuple[TrainConfig, FrameworkChoice, str]:
    """The framework a job runs on (frameworks.choose), the config with its memory semantics
    where the job sets none (frameworks.apply), and the efficiency stack: the framework's, or
    ``stack`` where one is given (the deprecated --stack)."""
    choice = choose(cat, cfg, cfg.framework)
    if stack is not None and stack != choice.stack:
        choice = replace(choice, stack=stack, efficiency_note=(
            f"--stack {stack} (deprecated) overrides the framework's efficiency "
            f"({choice.stack}: {choice.efficiency_note})"))
    cfg = apply(cfg, choice.profile).model_copy(update={"framework": choice.profile.id})
    return cfg, choice, choice.stack


def check(
    *, model: str, gpu: str, config: TrainConfig, catalog: Catalog | None = None,
    margin: float = 0.02, stack: str | None = None, pricing: str = "buy",
    price_kind: str | None = None, platform: str | None = None, job: Job | None = None,
    power_usd_per_kwh: float | None = None, critic_model: str | None = None,
    reward_model: str | None = None,
) -> dict[str, Any]:
    """Memory, throughput, time and cost of one configuration: the `planner check --json`
    document. Bad arguments raise PlannerError."""
    check_type(config, TrainConfig, name="config")
    check_margin(margin)
    check_choice(pricing, ("buy", "rent", "owned"), name="pricing")
    if price_kind is not None:
        check_choice(price_kind, ("new", "used"), name="price_kind")
    if power_usd_per_kwh is not None:
        check_range(power_usd_per_kwh, name="power_usd_per_kwh", lo=0, hi=MAX_FLOAT)
    if job is not None:
        check_type(job, Job, name="job")
    cat = catalog_or_default(catalog)
    resolved, gpu_spec, cfg = resolve_job(cat, model, gpu, config, reward_model=reward_model)
    cfg, framework, stack = job_framework(cat, cfg, stack)
    plat = job_platform(gpu_spec, cat, pricing=pricing, platform=platform)
    per_node = gpus_per_host(gpu_spec, plat) if plat else None
    critic, reward = role_models(cat, cfg, critic_model, reward_model)
    est = estimate_memory(resolved.spec, gpu_spec, cfg, gpus_per_node=per_node, critic=critic,
                          reward=reward)
    tput = workload_throughput(resolved.spec, gpu_spec, cfg, platform=plat,
                               stack=stack, critic=critic, reward=reward)
    cost = job_cost(gpu_spec, cfg.num_gpus, tokens_per_s=tput.tokens_per_s, job=job,
                    pricing=pricing, platform=plat if pricing == "buy" else None,
                    price_kind=price_kind, power_usd_per_kwh=power_usd_per_kwh)
    doc = render.check_doc(
        model=resolved.spec, asked_as=model, gpu=gpu_spec, cfg=cfg, est=est,
        fits=est.fits(margin), margin=margin,
    )
    doc["framework"] = framework.summary()
    doc["memory"]["band"] = band("memory", memory_group(cfg.workload, cfg.method),
                                 doc["memory"]["per_gpu_gib"])
    doc["platform"] = plat.id if plat else None
    doc["throughput"] = tput.summary()
    doc["throughput"]["band"] = band("throughput", throughput_group(cfg.workload, stack),
                                     tput.tokens_per_s)
    if hasattr(tput, "terms"):
        doc["throughput"]["terms_s"] = dict(tput.terms)
    doc["roles"] = {"critic": critic.id if critic else None,
                    "reward": reward.id if reward else None}
    doc["throughput"]["notes"] = list(tput.notes)
    doc["time_hours"] = cost.hours
    doc["cost"] = cost.summary()
    doc["cost"]["notes"] = [*cost.notes, *job_notes(
        job or define_job(), tokens_per_step=tput.tokens_per_step, hours=cost.hours)]
    if cfg.seq_len > resolved.spec.max_position_embeddings:
        doc["memory"]["notes"].append(
            f"--seq-len {cfg.seq_len} exceeds {resolved.spec.id}'s context of "
            f"{resolved.spec.max_position_embeddings} tokens: it needs a context extension "
            "(RoPE scaling) the model was not trained with")
    return doc


def catalog_or_default(catalog: Catalog | None) -> Catalog:
    """``catalog``, or the shipped one when None; PlannerError for anything else."""
    if catalog is None:
        return load_catalog()
    return check_type(catalog, Catalog, name="catalog")


def plan(request: PlanRequest, catalog: Catalog | None = None):
    """solve.plan behind the library boundary: a PlanRequest and a Catalog (or None)."""
    from planner import solve  # OR-Tools loads only when a plan is asked for

    check_type(request, PlanRequest, name="request")
    return solve.plan(request, catalog_or_default(catalog))


def pareto(request: PlanRequest, catalog: Catalog | None = None, *, max_points: int = 12):
    """solve.pareto behind the library boundary; ``max_points`` in 1..MAX_PARETO_POINTS."""
    from planner import solve  # OR-Tools loads only when a plan is asked for

    check_type(request, PlanRequest, name="request")
    if isinstance(max_points, bool) or not isinstance(max_points, int) \
            or not 1 <= max_points <= MAX_PARETO_POINTS:
        raise PlannerError(f"max_points {short(max_points)} must be an integer in "
                           f"1..{MAX_PARETO_POINTS}")
    return solve.pareto(request, catalog_or_default(catalog), max_points=max_points)
