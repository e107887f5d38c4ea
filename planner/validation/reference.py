"""An independent reference for the planner: every candidate built from the request with
``check``'s own functions, never from ``PlanSpace``.

``oracle.enumerate_best`` walks the planner's own tables, so it cannot see a wrong space (a pin
forgotten on one route, a front built without it). This enumeration reads the request as the
user's documentation states it (``planner plan --help``, README) and evaluates each concrete
configuration as ``planner check`` does: ``resolve.resolve_job``-style validation
(request.validate_config), workloads.estimate_memory, rltime.workload_throughput, cost.job_cost on
resolve.job_platform's host. It returns the optimum value only (the cheapest cost or the shortest
time), which the planner must reach; the tie-break chain is not its business. Pre-training and
SFT-like workloads (one trained model); slow by design: small catalogs only (tests, the
differential benchmark benchmarks/differential.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from planner.catalog.frameworks import (
    Profile,
    apply,
    built_model,
    for_request,
    lacks_model,
    plan_shardings,
    resolve,
    unlaunchable,
    unsupported,
)
from planner.catalog.hybrid import plans_hybrid
from planner.catalog.launches import launch_format_of
from planner.catalog.load import Catalog
from planner.catalog.offers import (
    DEFAULT_MAX_GPUS_PER_OFFER,
    OfferSpec,
    offer_gpus_per_host,
    offer_id,
    rental_offers,
)
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import LORA_RANKS, SHARDING_FIELDS, TrainConfig
from planner.catalog.request_checks import validate_config
from planner.catalog.specs import (
    GpuSpec,
    PlatformSpec,
    divisors,
    gpus_per_host,
    tensor_parallel_options,
)
from planner.errors import PlannerError
from planner.models.bands import request_margin
from planner.models.cost import define_job, gpu_purchase_price, job_cost
from planner.models.host_ram import usable_host_ram_gib
from planner.models.memory import GIB
from planner.models.network import instance_platform
from planner.models.rltime import workload_throughput
from planner.models.workloads import estimate_memory

# The documented search space of `planner plan` (README "planner plan searches ..."):
METHODS = ("full", "lora", "dora", "qlora")  # --method auto
DEFAULT_RANK = 16  # --lora-rank unset and the framework states no rank
OPTIMIZERS = ("adamw", "adamw-8bit")  # --optimizer auto
SHARDINGS = SHARDING_FIELDS  # the labels of --sharding, as request.SHARDING_FIELDS states them
OFFLOADS = ("none", "optimizer", "optimizer+params")
CHECKPOINTING = ("none", "full")
MICRO_BATCHES = (1, 2, 4, 8, 16, 32)
MAX_PP = 8  # pipeline stages searched when --pp is unset


@dataclass(frozen=True)
class Found:
    """The reference optimum: its objective value (USD, or hours for the time objective), and
    one configuration that reaches it (for messages)."""

    value: float
    gpu: str
    platform: str | None
    config: TrainConfig
    cost_usd: float
    hours: float


@dataclass(frozen=True)
class Host:
    """Where the GPUs run: a priced host platform (buy) or a provider's offer (rent), its GPUs
    per host, the RAM a job may use on one (None: not known) and the most GPUs it supplies."""

    platform: PlatformSpec | None
    offer: OfferSpec | None
    per_host: int
    ram_gib: float | None
    most_gpus: int


def _hosts(req: PlanRequest, gpu: GpuSpec, cat: Catalog) -> list[Host]:
    """Every priced host platform that takes the card (buy); every offer of the card as the
    user's documentation states rentals (README: instance offers of catalog/offers, else the
    GPU's catalog per-GPU rate on nodes of max_gpus_per_node; at most --max-gpus-per-offer GPUs
    of one offer, whole instances)."""
    if req.pricing == "rent":
        cap = req.max_gpus_per_offer or DEFAULT_MAX_GPUS_PER_OFFER
        out = []
        for offer in rental_offers(cat, (gpu.id,), spot=req.spot):
            per_host = offer_gpus_per_host(offer, gpu)
            ram = None if offer.host_ram_gib is None else usable_host_ram_gib(offer.host_ram_gib)
            out.append(Host(None, offer, per_host, ram,
                            cap // offer.gpus_per_instance * offer.gpus_per_instance))
        return out
    return [Host(p, None, gpus_per_host(gpu, p),
                 usable_host_ram_gib(p.host_ram_gib), req.max_gpus)
            for p in cat.platforms.values()
            if gpu.form_factor in p.form_factors and p.price_usd is not None
            and req.platform in (None, p.id)]  # --platform: that host only


def _strategies(req: PlanRequest, profile: Profile) -> list[dict[str, object]]:
    """Method, rank, optimizer, sharding, offload and checkpointing choices of the request
    (shardings: those the framework's plans search, frameworks.plan_shardings)."""
    methods = (("full",) if req.workload == "pretrain" else METHODS) \
        if req.method == "auto" else (req.method,)  # pretraining trains every weight
    optimizers = OPTIMIZERS if req.optimizer == "auto" else (req.optimizer,)
    shardings = (req.sharding,) if req.sharding else plan_shardings(profile)
    offloads = OFFLOADS if req.offload == "auto" else (req.offload,)
    ckpts = CHECKPOINTING if req.checkpointing == "auto" else (req.checkpointing,)
    out = []
    for method in methods:
        peft = method in ("lora", "dora", "qlora")
        if not peft:
            ranks: tuple[int | None, ...] = (None,)
        elif req.lora_rank == "auto":
            ranks = LORA_RANKS
        else:
            ranks = (req.lora_rank or profile.value("lora_rank") or DEFAULT_RANK,)
        for rank, opt, shard, off, ck in itertools.product(ranks, optimizers, shardings,
                                                           offloads, ckpts):
            zero, fsdp = SHARDINGS[shard]
            out.append({"method": method, "lora_rank": rank, "optimizer": opt,
                        "zero_stage": zero, "fsdp": fsdp, "offload": off, "checkpointing": ck})
    return out


def _with_hybrid(strategies: list[dict[str, object]], layout: tuple[int, ...], per_host: int,
                 *, cp: int, pinned: str | None):
    """Each strategy and, for FSDP over several hosts of two GPUs or more without tp, pp or cp,
    its hybrid variant: shards of one host's GPUs, replicated across the hosts (README:
    planner plan searches hybrid sharding where the framework's launch writes it; the others
    are left out by unlaunchable). --sharding fsdp keeps full sharding only, hsdp the hybrid."""
    tp, pp, dp = layout[:3]
    hybrid = per_host >= 2 and tp * pp * cp == 1 and dp > per_host and dp % per_host == 0
    for fields in strategies:
        if pinned != "hsdp":
            yield fields
        if hybrid and fields["fsdp"] and pinned != "fsdp":
            yield {**fields, "dp_shard": per_host}


def _layouts(req: PlanRequest, model, per_host: int) -> list[tuple[int, int, int, int, int]]:
    """(tp, pp, dp, micro-batch, accumulation) that complete the global batch within the GPU
    limit and pins; tp divides the heads and stays in one host, pp divides the layers."""
    gb = req.global_batch_size
    tps = [req.tp] if req.tp else tensor_parallel_options(model, per_host)
    pps = [req.pp] if req.pp else divisors(model.num_layers, at_most=MAX_PP)
    mbs = [req.micro_batch_size] if req.micro_batch_size else [m for m in MICRO_BATCHES
                                                               if m <= gb]
    out = []
    for tp, pp, mb in itertools.product(tps, pps, mbs):
        if tp > per_host:
            continue
        for dp in range(1, gb + 1):
            n = tp * pp * dp
            if gb % (mb * dp) or n > req.max_gpus or (req.num_gpus and n != req.num_gpus):
                continue
            ga = gb // (mb * dp)
            if req.grad_accum is None or ga == req.grad_accum:
                out.append((tp, pp, dp, mb, ga))
    return out


def reference_optimum(req: PlanRequest, cat: Catalog) -> Found | None:
    """The best objective value over every candidate the request allows (None: infeasible).

    Feasible: validate_config passes; estimate_memory fits the GPU less --memory-margin; host
    RAM of one host within the platform's (buy); the job's cost within --budget (purchase or
    rental, as check prices it); hours within --max-hours; tokens/s at least
    --min-tokens-per-s. Objective: cost (USD), or job hours with --objective time."""
    if req.workload not in ("sft", "pretrain"):
        raise PlannerError(f"the reference enumerates SFT and pre-training, not {req.workload}")
    model = cat.model(req.model).spec
    job = define_job(tokens=req.tokens, epochs=req.epochs, dataset_tokens=req.dataset_tokens,
                     steps=req.steps, global_batch=req.sequences_per_step,
                     seq_len=req.tokens_per_sequence)
    timed = (req.objective == "time" or req.pricing == "rent" or req.max_hours is not None
             or req.min_tokens_per_s is not None)
    framework = for_request(cat, req)  # the plan's framework: its layouts, semantics, speed
    model = built_model(framework.profile, model)
    best: Found | None = None
    for gpu in (cat.gpu(g) for g in (req.gpus or tuple(cat.gpus))):
        if req.pricing != "rent" and gpu_purchase_price(gpu, req.price_kind)[0] is None:
            continue
        for host in _hosts(req, gpu, cat):
            for layout in _layouts(req, model, host.per_host):
                if layout[0] * layout[1] * layout[2] <= host.most_gpus:
                    best = _best_of_layout(req, cat, model, gpu, host, layout, job, timed, best,
                                           framework)
    return best


def _best_of_layout(req, cat, model, gpu, host, layout, job, timed, best, framework):
    plat, per_host = host.platform, host.per_host
    tp, pp, dp, mb, ga = layout
    n = tp * pp * dp
    profile = framework.profile
    for fields in _with_hybrid(_strategies(req, profile), layout, per_host,
                               cp=req.fixed.get("cp", 1), pinned=req.sharding):
        cfg = TrainConfig(workload=req.workload, seq_len=req.seq_len, num_gpus=n, tp=tp, pp=pp,
                          micro_batch_size=mb, grad_accum=ga, framework=profile.id, **fields,
                          **req.fixed)
        if unsupported(profile, cfg) or unlaunchable(profile, cfg):
            continue
        cfg = apply(cfg, profile)
        try:
            validate_config(cfg, model)
        except PlannerError:
            continue
        if not timed:  # a purchase by cost: the price is known before memory is
            cost = job_cost(gpu, n, tokens_per_s=1.0, job=job, pricing="buy", platform=plat,
                            price_kind=req.price_kind).usd
            if (req.budget_usd is not None and cost > req.budget_usd) or \
                    (best is not None and cost >= best.value):
                continue
        est = estimate_memory(model, gpu, cfg, gpus_per_node=per_host)
        if not est.fits(request_margin(req, cfg.method)):
            continue
        if host.ram_gib is not None and est.host_ram > host.ram_gib * GIB:
            continue
        # a rented instance's links where its offer states its network (README: rentals)
        links = plat if host.offer is None else instance_platform(host.offer, gpu)
        tput = workload_throughput(model, gpu, cfg, platform=links, stack=framework.stack,
                                   gpus_per_node=per_host)
        cost = job_cost(gpu, n, tokens_per_s=tput.tokens_per_s, job=job, pricing=req.pricing,
                        platform=plat, price_kind=req.price_kind, offer=host.offer)
        if req.budget_usd is not None and cost.usd > req.budget_usd:
            continue
        if req.max_hours is not None and cost.hours > req.max_hours:
            continue
        if req.min_tokens_per_s is not None and tput.tokens_per_s < req.min_tokens_per_s:
            continue
        value = cost.hours if req.objective == "time" else cost.usd
        if best is None or value < best.value:
            where = plat.id if plat else f"{host.offer.provider} {host.offer.instance_type}"
            best = Found(value, gpu.id, where, cfg, cost.usd, cost.hours)
    return best


# ---------------------------------------------------------------------------------------------
# Differential testing: random requests, the planner against the reference
# ---------------------------------------------------------------------------------------------
DIFF_MODELS = ("qwen2.5-0.5b", "llama-3.2-1b", "qwen2.5-1.5b", "opt-1.3b", "qwen2.5-7b")
PIN_FIELDS = ("num_gpus", "grad_accum", "micro_batch_size", "tp", "pp", "sharding", "method",
              "lora_rank", "gpus")


def random_request(rng, cat: Catalog, *, pin_rate: float = 0.3) -> PlanRequest:
    """A random small request (a few GPU types, up to 16 GPUs, global batch up to 32) with
    pins, limits, buy or rent and either objective, one in five on a framework that plans FSDP
    and its hybrid sharding (hybrid_frameworks); ``rng`` a random.Random."""
    pricing = rng.choice(("buy", "rent"))
    priced = sorted(g for g, spec in cat.gpus.items()
                    if (rental_offers(cat, (g,)) if pricing == "rent"
                        else gpu_purchase_price(spec, None)[0] is not None))
    model = cat.model(rng.choice(DIFF_MODELS)).spec
    data: dict[str, object] = {
        "model": model.id, "pricing": pricing,
        "gpus": tuple(rng.sample(priced, rng.choice((1, 2, 3)))),
        "global_batch_size": rng.choice((8, 16, 32)), "max_gpus": rng.choice((4, 8, 16)),
        "seq_len": rng.choice((512, 1024, 2048)), "tokens": rng.choice((1e7, 1e8)),
        "objective": rng.choice(("cost", "time")),
        "method": rng.choice(("auto", "auto", "full", "lora", "qlora")),
        "optimizer": rng.choice(("adamw", "auto")),
    }
    pin = lambda: rng.random() < pin_rate  # noqa: E731
    tps = list(tensor_parallel_options(model, 2))
    if pin():
        data["tp"] = rng.choice(tps)
    if pin():
        data["pp"] = rng.choice([p for p in (1, 2) if model.num_layers % p == 0])
    if pin():  # a count that tp x pp divide (else bad input, exit 2)
        mp = data.get("tp", 1) * data.get("pp", 1)
        data["num_gpus"] = rng.choice([mp * k for k in (1, 2, 4) if mp * k <= data["max_gpus"]])
    if pin():
        data["grad_accum"] = rng.choice((1, 2, 4, 8))
    if pin():
        data["micro_batch_size"] = rng.choice((1, 2, 4))
    if pin():
        data["sharding"] = rng.choice(("none", "zero1", "zero2", "zero3", "fsdp"))
        if data["sharding"] in ("none",):
            data["offload"] = "none"
        elif data["sharding"] not in ("zero3", "fsdp"):
            data["offload"] = rng.choice(("none", "optimizer"))
    if data["method"] != "full" and pin():
        data["lora_rank"] = rng.choice((8, 64, "auto"))
    if rng.random() < 0.5:
        data["budget_usd"] = rng.choice((1500, 5000, 30000)) if pricing == "buy" else \
            rng.choice((2.0, 10.0, 50.0))
    if data["objective"] == "time" and "budget_usd" not in data and "num_gpus" not in data:
        data["budget_usd"] = 30000 if pricing == "buy" else 50.0
    if rng.random() < 0.25:
        data["max_hours"] = rng.choice((0.5, 5.0, 50.0))
    if rng.random() < 0.2:
        data["min_tokens_per_s"] = rng.choice((2000.0, 10000.0, 50000.0))
    fsdp = hybrid_frameworks(cat, model.id)  # FSDP: full and hybrid sharding (over hosts)
    if rng.random() < 0.2 and fsdp:
        data["framework"] = rng.choice(fsdp)
    return PlanRequest.model_validate(data)


def hybrid_frameworks(cat: Catalog, model_id: str) -> list[str]:
    """The profiles whose SFT plans of ``model_id`` search hybrid sharding
    (catalog.hybrid.plans_hybrid; they build the model, the planner writes their launch)."""
    profiles = [resolve(cat, f) for f in sorted(cat.frameworks)]
    return [p.id for p in profiles if plans_hybrid(p)
            and launch_format_of(p, "sft") is not None and lacks_model(p, model_id) is None]


def pinned(req: PlanRequest) -> list[str]:
    """The pins of a request: PIN_FIELDS the user fixed (not left open or auto; the GPU list
    of random_request is always set, so it is not counted)."""
    return [k for k in PIN_FIELDS if k != "gpus" and getattr(req, k) not in (None, (), "auto")]


@dataclass(frozen=True)
class Verdict:
    """One differential comparison: agree, or what differs."""

    request: PlanRequest
    agree: bool
    planner: float | None  # objective value (USD or hours), None: infeasible
    reference: float | None
    detail: str = ""


def objective_tolerance(req: PlanRequest, value: float, num_gpus: int = 1,
                        *, hosts: int = 1) -> float:
    """How far the planner's optimum may sit from the reference's: its integer units (whole
    dollars per GPU and host price when buying, milli-dollars when renting, whole microseconds
    of step time: a millionth) and nothing more."""
    if req.objective == "time":
        return 1e-5 * value
    if req.pricing == "rent":
        return 1e-3 + 1e-5 * value
    return 0.5 * (num_gpus + hosts) + 1e-9 * value


def differential(req: PlanRequest, cat: Catalog) -> Verdict:
    """The planner's answer to ``req`` against reference_optimum: same feasibility, the same
    objective value within objective_tolerance, and a plan that passes its re-check (plan()
    raises PlanCheckError otherwise) and re-checks in ``api.check`` to the same hours and
    cost."""
    from planner.api import check  # the library layer: only for the comparison helper
    from planner.solver.solve import plan  # the solver, compared against: only in that helper

    ref = reference_optimum(req, cat)
    result = plan(req, cat)
    if result.plan is None:
        agree = ref is None and result.status == "infeasible"
        return Verdict(req, agree, None, ref and ref.value,
                       "" if agree else f"planner {result.status}, reference {ref}")
    p = result.plan
    value = p.time_hours if req.objective == "time" else p.cost_usd
    if ref is None:
        return Verdict(req, False, value, None, "reference finds no plan")
    tol = objective_tolerance(req, ref.value, p.num_gpus, hosts=p.num_hosts)
    if abs(value - ref.value) > tol:
        return Verdict(req, False, value, ref.value,
                       f"planner {p.num_gpus} x {p.gpu} {p.config.method}; reference "
                       f"{ref.config.num_gpus} x {ref.gpu} on {ref.platform} {ref.config.method}")
    job = define_job(tokens=req.tokens, epochs=req.epochs, dataset_tokens=req.dataset_tokens,
                     steps=req.steps, global_batch=req.sequences_per_step,
                     seq_len=req.tokens_per_sequence)
    stack = req.stack if "stack" in req.model_fields_set else None  # deprecated override
    rented = p.cost.rental.offers[0] if p.cost.rental else None
    doc = check(model=req.model, gpu=p.gpu, config=p.config, catalog=cat, stack=stack,
                pricing=req.pricing, price_kind=req.price_kind, platform=p.platform, job=job,
                margin=request_margin(req, p.config.method), confidence=0.0,  # the plan's limit
                offer=offer_id(rented) if rented else None)
    if abs(doc["time_hours"] - p.time_hours) > 1e-9 * p.time_hours or \
            abs(doc["cost"]["usd"] - p.cost_usd) > 1e-9 * p.cost_usd or not doc["fits"]:
        return Verdict(req, False, value, ref.value,
                       f"check re-evaluates the plan to {doc['time_hours']:.4f} h, "
                       f"${doc['cost']['usd']:,.2f}, fits {doc['fits']}")
    return Verdict(req, True, value, ref.value)
