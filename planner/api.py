"""The library API: what the CLI, tests and examples call."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from planner.catalog.frameworks import (
    FrameworkChoice,
    built_model,
    lacks_model,
    lacks_precision,
)
from planner.catalog.load import Catalog
from planner.catalog.offers import (
    DEFAULT_MAX_GPUS_PER_OFFER,
    offer_gpus_per_host,
    offer_id,
    rental_offers,
)
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import TrainConfig
from planner.catalog.resolve import (
    catalog_or_default,
    job_framework,
    job_platform,
    resolve_job,
    role_models,
)
from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec, gpus_per_host
from planner.errors import PlannerError
from planner.inputs import (
    MAX_FLOAT,
    check_choice,
    check_confidence,
    check_margin,
    check_range,
    check_type,
    short,
)
from planner.models.bands import memory_headroom, planning_margin
from planner.models.calibration import MIB
from planner.models.cost import CostEstimate, Job, define_job, job_cost, job_notes
from planner.models.memory import MemoryEstimate
from planner.models.network import instance_platform
from planner.models.rltime import workload_throughput
from planner.models.workloads import estimate_memory
from planner.outputs import render

MAX_PARETO_POINTS = 50  # points of one sweep (`pareto --max-points`)


@dataclass(frozen=True)
class Evaluation:
    """One configuration evaluated by the models, as ``check`` reports it (typed: the check
    document is rendered from it, and the ranked fixes compare these values, never rounded
    text). ``memory``, ``throughput`` and ``cost`` are the models' own estimates; it fits
    where the memory band's upper edge at ``confidence`` (``headroom`` over the point
    estimate; 0: the point estimate) is within capacity less ``margin``
    (bands.planning_margin)."""

    model: ModelSpec
    asked_as: str
    gpu: GpuSpec
    config: TrainConfig  # with the framework's semantics applied
    framework: FrameworkChoice
    stack: str
    platform: PlatformSpec | None
    memory: MemoryEstimate
    throughput: Any  # ThroughputEstimate or RLStepEstimate (rltime.workload_throughput)
    cost: CostEstimate
    job: Job
    margin: float
    confidence: float = 0.0
    headroom: float = 1.0
    critic: ModelSpec | None = None
    reward: ModelSpec | None = None

    @property
    def fits(self) -> bool:
        """True when the peak stays within the GPU's memory after the margin and headroom."""
        return self.memory.fits(planning_margin(self.margin, self.headroom))


def evaluate(
    *, model: str, gpu: str, config: TrainConfig, catalog: Catalog | None = None,
    margin: float = 0.02, confidence: float = 0.0,
    stack: str | None = None, pricing: str = "buy",
    price_kind: str | None = None, platform: str | None = None, job: Job | None = None,
    power_usd_per_kwh: float | None = None, critic_model: str | None = None,
    reward_model: str | None = None, offer: str | None = None,
) -> Evaluation:
    """Memory, throughput, time and cost of one configuration, typed. A rental is priced on
    ``offer`` (offers.offer_id: provider/instance_type) when given, else on the cheapest offer
    that holds the job. Bad arguments raise PlannerError."""
    check_type(config, TrainConfig, name="config")
    check_margin(margin)
    check_confidence(confidence)
    check_choice(pricing, ("buy", "rent", "owned"), name="pricing")
    if price_kind is not None:
        check_choice(price_kind, ("new", "used"), name="price_kind")
    if power_usd_per_kwh is not None:
        check_range(power_usd_per_kwh, name="power_usd_per_kwh", lo=0, hi=MAX_FLOAT)
    if job is not None:
        check_type(job, Job, name="job")
    if offer is not None:
        check_type(offer, str, name="offer")
        if pricing != "rent":
            raise PlannerError(f"--offer {short(offer)} names a rental offer: it applies to "
                               f"--pricing rent (got {pricing})")
    cat = catalog_or_default(catalog)
    resolved, gpu_spec, cfg = resolve_job(cat, model, gpu, config=config, reward_model=reward_model)
    cfg, framework, stack = job_framework(cat, cfg, stack)
    resolved = replace(resolved, spec=built_model(framework.profile, resolved.spec))
    precision = lacks_precision(framework.profile, cfg, gpu_spec)
    missing = lacks_model(framework.profile, resolved.spec.id) or (
        precision and f"{gpu_spec.id}: {precision}")
    if missing:
        raise PlannerError(missing)
    plat = job_platform(gpu_spec, cat, pricing=pricing, platform=platform,
                        num_gpus=cfg.num_gpus)
    critic, reward = role_models(cat, cfg, critic_model, reward_model=reward_model)
    if pricing == "rent" and platform is None and power_usd_per_kwh is None:
        est, tput, cost = _rented_job(cat, resolved.spec, gpu_spec, cfg, stack=stack, job=job,
                                      critic=critic, reward=reward, only=offer)
    else:
        per_node = gpus_per_host(gpu_spec, plat) if plat else None
        est = estimate_memory(resolved.spec, gpu_spec, cfg, gpus_per_node=per_node,
                              critic=critic, reward=reward)
        tput = workload_throughput(resolved.spec, gpu_spec, cfg, platform=plat,
                                   stack=stack, critic=critic, reward=reward)
        cost = job_cost(gpu_spec, cfg.num_gpus, tokens_per_s=tput.tokens_per_s, job=job,
                        pricing=pricing, platform=plat if pricing == "buy" else None,
                        price_kind=price_kind, power_usd_per_kwh=power_usd_per_kwh)
    headroom = memory_headroom(framework=framework.profile.id, workload=cfg.workload,
                               methods=(cfg.method,), p=confidence)
    return Evaluation(model=resolved.spec, asked_as=model, gpu=gpu_spec, config=cfg,
                      framework=framework, stack=stack, platform=plat, memory=est,
                      throughput=tput, cost=cost, job=job or define_job(), margin=margin,
                      confidence=confidence, headroom=headroom, critic=critic, reward=reward)


def check(
    *, model: str, gpu: str, config: TrainConfig, catalog: Catalog | None = None,
    margin: float = 0.02, confidence: float = 0.0, stack: str | None = None,
    pricing: str = "buy", price_kind: str | None = None, platform: str | None = None,
    job: Job | None = None, power_usd_per_kwh: float | None = None,
    critic_model: str | None = None, reward_model: str | None = None,
    offer: str | None = None,
) -> dict[str, Any]:
    """The `planner check --json` document of one configuration: ``evaluate`` with the same
    arguments, rendered (check_document). Bad arguments raise PlannerError."""
    return check_document(evaluate(
        model=model, gpu=gpu, config=config, catalog=catalog, margin=margin,
        confidence=confidence, stack=stack, pricing=pricing, price_kind=price_kind,
        platform=platform, job=job, power_usd_per_kwh=power_usd_per_kwh,
        critic_model=critic_model, reward_model=reward_model, offer=offer))


def check_document(ev: Evaluation) -> dict[str, Any]:
    """An Evaluation as the `planner check --json` document (figures rounded for display),
    with the bands of its predictions (render.with_bands)."""
    cfg, est, tput, cost = ev.config, ev.memory, ev.throughput, ev.cost
    doc = render.check_doc(
        model=ev.model, asked_as=ev.asked_as, gpu=ev.gpu, cfg=cfg, est=est, fits=ev.fits,
        margin=ev.margin,
    )
    doc.update(confidence=ev.confidence, memory_headroom=ev.headroom)
    doc["framework"] = ev.framework.summary()
    doc["platform"] = ev.platform.id if ev.platform else None
    doc["throughput"] = tput.summary()
    if hasattr(tput, "terms"):
        doc["throughput"]["terms_s"] = dict(tput.terms)
    doc["roles"] = {"critic": ev.critic.id if ev.critic else None,
                    "reward": ev.reward.id if ev.reward else None}
    doc["throughput"]["notes"] = list(tput.notes)
    doc["time_hours"] = cost.hours
    doc["cost"] = cost.summary()
    doc["cost"]["notes"] = [*cost.notes, *job_notes(
        ev.job, tokens_per_step=tput.tokens_per_step, hours=cost.hours)]
    if cfg.seq_len > ev.model.max_position_embeddings:
        doc["memory"]["notes"].append(
            f"--seq-len {cfg.seq_len} exceeds {ev.model.id}'s context of "
            f"{ev.model.max_position_embeddings} tokens: it needs a context extension "
            "(RoPE scaling) the model was not trained with")
    return render.with_bands(doc, ev.framework.profile.id)


def _rented_job(cat: Catalog, model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *,
                stack: str, job: Job | None, critic: ModelSpec | None,
                reward: ModelSpec | None, only: str | None = None
                ) -> tuple[Any, Any, CostEstimate]:
    """A rental as ``plan`` prices one: of the GPU's offers (offers.rental_offers) that hold the
    job (tp within one instance, the GPUs within DEFAULT_MAX_GPUS_PER_OFFER, the host RAM of an
    instance), the cheapest bill for the job (then the fastest); each offer's GPUs per instance
    set the nodes the memory and speed models see. None holds it: the cheapest offer's
    estimates, with the cost not offered and the reason."""
    found = []
    offers = rental_offers(cat, (gpu.id,))
    if only is not None:
        ids = [offer_id(o) for o in offers]
        if only not in ids:
            raise PlannerError(f"--offer {short(only)} is not an offer of {gpu.id}; its offers: "
                               f"{', '.join(ids) or 'none'}")
        offers = tuple(o for o in offers if offer_id(o) == only)
    for offer in offers:
        per_node = offer_gpus_per_host(offer, gpu)
        est = estimate_memory(model, gpu, cfg, gpus_per_node=per_node, critic=critic,
                              reward=reward)
        # the instance's stated network and cores where its offer states them (as plan)
        tput = workload_throughput(model, gpu, cfg, platform=instance_platform(offer, gpu),
                                   stack=stack, critic=critic, reward=reward,
                                   gpus_per_node=per_node)
        cost = job_cost(gpu, cfg.num_gpus, tokens_per_s=tput.tokens_per_s, job=job,
                        pricing="rent", offer=offer)
        found.append((not _offer_holds(offer, gpu, cfg, est), cost.usd or 0.0, cost.hours, est,
                      tput, cost))
    if not found:  # no offer and no catalog rate: the estimates without one
        est = estimate_memory(model, gpu, cfg, critic=critic, reward=reward)
        tput = workload_throughput(model, gpu, cfg, platform=None, stack=stack, critic=critic,
                                   reward=reward)
        return est, tput, job_cost(gpu, cfg.num_gpus, tokens_per_s=tput.tokens_per_s, job=job,
                                   pricing="rent")
    unheld, _, _, est, tput, cost = min(found, key=lambda f: f[:3])
    if unheld:
        cost = replace(cost, status="not offered", usd=None, reason=(
            f"no rental offer of {gpu.id} holds this job (tp within one instance, at most "
            f"{DEFAULT_MAX_GPUS_PER_OFFER} GPUs per offer, the instance's host RAM)"))
    return est, tput, cost


def _offer_holds(spec: Any, gpu: GpuSpec, cfg: TrainConfig, est: Any) -> bool:
    """The instance offer holds the job under the plan's fit rules other than GPU memory (which
    check's verdict weighs with its margin and band): tp within one instance, the GPUs within
    DEFAULT_MAX_GPUS_PER_OFFER, the instance's host RAM (solver.rules.fit_masks)."""
    from planner.solver.hardware import rental_offer  # the solver's modules load only here
    from planner.solver.rules import Need, fit_masks

    offer = rental_offer(spec, gpu, capacity_mib=0, most=DEFAULT_MAX_GPUS_PER_OFFER)
    need = Need(gpu_mib=0, tp=cfg.tp, host_mib=est.host_ram / MIB, num_gpus=cfg.num_gpus)
    return offer is not None and all(fit_masks(
        offer, need, names=("gpus_per_host", "max_gpus_per_offer", "host_ram")).values())


def plan(request: PlanRequest, catalog: Catalog | None = None):
    """solve.plan behind the library boundary: a PlanRequest and a Catalog (or None)."""
    from planner.solver import solve  # OR-Tools loads only when a plan is asked for

    check_type(request, PlanRequest, name="request")
    return solve.plan(request, catalog_or_default(catalog))


def pareto(request: PlanRequest, catalog: Catalog | None = None, *, max_points: int = 12):
    """solve.pareto behind the library boundary; ``max_points`` in 1..MAX_PARETO_POINTS."""
    from planner.solver import solve  # OR-Tools loads only when a plan is asked for

    check_type(request, PlanRequest, name="request")
    if isinstance(max_points, bool) or not isinstance(max_points, int) \
            or not 1 <= max_points <= MAX_PARETO_POINTS:
        raise PlannerError(f"max_points {short(max_points)} must be an integer in "
                           f"1..{MAX_PARETO_POINTS}")
    return solve.pareto(request, catalog_or_default(catalog), max_points=max_points)
