"""A job's names resolved against the catalog: the model, GPU, host platform, framework and
role models of one configuration, validated (what ``check``, ``tune`` and the reference share)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planner.catalog.frameworks import FrameworkChoice, apply, choose
from planner.catalog.load import Catalog, load_catalog
from planner.catalog.request import TrainConfig
from planner.catalog.request_checks import reward_conflict, validate_config, validate_engine
from planner.catalog.role_gpus import fill_role_gpus
from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec, gpus_per_host, hosts_for
from planner.errors import PlannerError
from planner.inputs import check_type


def default_platform(gpu: GpuSpec, catalog: Catalog, *, num_gpus: int = 1
                     ) -> PlatformSpec | None:
    """The priced host platform that takes ``gpu`` whose hosts for ``num_gpus`` GPUs cost
    least (then the cheaper host; None if no priced host takes the GPU)."""
    hosts = [p for p in catalog.platforms.values()
             if gpu.form_factor in p.form_factors and p.price_usd is not None]
    return min(hosts, key=lambda p: (hosts_for(num_gpus, gpus_per_host(gpu, p)) * p.price_usd,
                                     p.price_usd, p.id), default=None)


def job_platform(gpu: GpuSpec, catalog: Catalog, *, pricing: str,
                 platform: str | None = None, num_gpus: int = 1) -> PlatformSpec | None:
    """The host platform a job of ``check`` runs on, as ``plan`` prices it: the one named;
    else for a rental none (the provider's instance is the host, space._offers' rental
    offers: GPUs per node from the GPU, network and CPU defaults of the throughput model);
    for hardware the user owns, the platform that holds the ``num_gpus`` GPUs on the fewest
    hosts (then the cheapest, priced before unpriced: the user's machine, not a purchase);
    else the priced host whose hosts for ``num_gpus`` GPUs cost least (default_platform)."""
    if platform:
        return catalog.platform(platform)
    if pricing == "owned":
        takes = (p for p in catalog.platforms.values() if gpu.form_factor in p.form_factors)
        return min(takes, key=lambda p: (hosts_for(num_gpus, gpus_per_host(gpu, p)),
                                         p.price_usd is None, p.price_usd or 0.0, p.id),
                   default=None)
    return None if pricing == "rent" else default_platform(gpu, catalog, num_gpus=num_gpus)


def role_models(cat: Catalog, cfg: TrainConfig, critic_model: str | None,
                *, reward_model: str | None) -> tuple[ModelSpec | None, ModelSpec | None]:
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
    if reward_model and cfg.reward_function:
        raise PlannerError(reward_conflict(reward_model))
    critic = cat.model(critic_model).spec if critic_model else None
    reward = cat.model(reward_model).spec if reward_model else None
    return critic, reward


def resolve_job(cat: Catalog, model: str, gpu: str, *, config: TrainConfig,
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
    validate_engine(cfg)  # the profile's engine may be the trainer's own generate
    return cfg, choice, choice.stack


def catalog_or_default(catalog: Catalog | None) -> Catalog:
    """``catalog``, or the shipped one when None; PlannerError for anything else."""
    if catalog is None:
        return load_catalog()
    return check_type(catalog, Catalog, name="catalog")
