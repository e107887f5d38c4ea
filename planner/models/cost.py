"""What a training job costs: buying GPUs (and the hosts that hold them) or renting them (pure).

The job is a number of training tokens, from one of three definitions (``define_job``): tokens;
epochs x dataset tokens; or steps x global batch x sequence length. With none given the job is
``DEFAULT_JOB_TOKENS`` and every output says so. Prices come from the catalog only: a missing price
gives a "not offered" result naming what is missing, never an invented number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from planner.catalog.freshness import stale_price_notes
from planner.catalog.offers import CATALOG_PROVIDER, OfferSpec, catalog_rate_offer
from planner.catalog.specs import GpuSpec, PlatformSpec, gpus_per_host, hosts_for
from planner.errors import PlannerError
from planner.models.rental import OfferUse, RentalCost, instances_for, rental_cost

Pricing = Literal["buy", "rent", "owned"]
PriceKind = Literal["new", "used"]

# One stated default job: 100 M training tokens (about one epoch of a 50k-example instruction
# set at 2k tokens per example). Named in every output that uses it.
DEFAULT_JOB_TOKENS = 1e8


@dataclass(frozen=True)
class Job:
    """The training work: tokens, and how that number was arrived at (shown to the user)."""

    tokens: float
    definition: str
    is_default: bool = False


def define_job(
    *, tokens: float | None = None, epochs: float | None = None,
    dataset_tokens: float | None = None, steps: int | None = None,
    global_batch: int | None = None, seq_len: int | None = None,
) -> Job:
    """The job from exactly one definition; PlannerError on a partial or double definition."""
    given = {
        "tokens": tokens is not None,
        "epochs": epochs is not None or dataset_tokens is not None,
        "steps": steps is not None,
    }
    if sum(given.values()) > 1:
        names = ", ".join(k for k, v in given.items() if v)
        raise PlannerError(f"give the job one way only (--tokens, --epochs with --dataset-tokens, "
                           f"or --steps); got {names}")
    if tokens is not None:
        if tokens <= 0:
            raise PlannerError(f"--tokens must be positive (got {tokens:g})")
        return Job(float(tokens), f"{tokens:.3g} training tokens")
    if given["epochs"]:
        if epochs is None or dataset_tokens is None or epochs <= 0 or dataset_tokens <= 0:
            raise PlannerError("--epochs needs --dataset-tokens (both positive)")
        return Job(epochs * dataset_tokens,
                   f"{epochs:g} epoch(s) x {dataset_tokens:.3g} dataset tokens")
    if steps is not None:
        if steps <= 0 or not global_batch or not seq_len:
            raise PlannerError("--steps needs a positive count, a global batch and a sequence "
                               "length")
        return Job(float(steps * global_batch * seq_len),
                   f"{steps} steps x {global_batch} sequences x {seq_len} tokens")
    return Job(DEFAULT_JOB_TOKENS,
               f"default job: {DEFAULT_JOB_TOKENS:.3g} training tokens (no job given)", True)


def job_hours(job: Job, tokens_per_s: float) -> float:
    """Wall-clock hours of the job at a steady ``tokens_per_s`` (all GPUs together)."""
    if tokens_per_s <= 0:
        raise PlannerError("tokens per second must be positive")
    return job.tokens / tokens_per_s / 3600


@dataclass(frozen=True)
class CostEstimate:
    """A cost with its basis and items (name -> USD, each name says what it covers)."""

    status: Literal["ok", "not offered"]
    basis: Pricing
    usd: float | None
    items: dict[str, float]
    covers: str
    hours: float
    job: Job
    reason: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    rental: RentalCost | None = None  # rent: the offer billed, its instances and billed hours

    def summary(self) -> dict[str, object]:
        """The ``cost`` object of ``planner check --json`` (usd None when not offered); a
        rental names its offer (rental.BilledOffer.summary)."""
        return {
            "usd": self.usd, "basis": self.basis, "items": dict(self.items),
            "covers": self.covers, "status": self.status, "reason": self.reason,
            "hours": self.hours, "job": self.job.definition, "notes": list(self.notes),
            "offer": self.rental.offers[0].summary() if self.rental else None,
        }


def gpu_purchase_price(gpu: GpuSpec, kind: PriceKind | None) -> tuple[float | None, str]:
    """(price per card, kind used): the kind asked for, or new where known, else used."""
    if kind == "used":
        return gpu.price_usd_used, "used"
    if kind == "new" or gpu.price_usd_new is not None:
        return gpu.price_usd_new, "new"
    return gpu.price_usd_used, "used"


def hosts_needed(gpu: GpuSpec, num_gpus: int, platform: PlatformSpec) -> int:
    """ceil(GPUs / GPUs per host), a host holding min(platform slots, GPU's node size)."""
    if gpu.form_factor not in platform.form_factors:
        raise PlannerError(
            f"platform {platform.id} takes {', '.join(platform.form_factors)} GPUs, not "
            f"{gpu.id} ({gpu.form_factor})"
        )
    return hosts_for(num_gpus, gpus_per_host(gpu, platform))


def power_cost(gpu: GpuSpec, num_gpus: int, hours: float, *, usd_per_kwh: float) -> float:
    """GPU board power for the job: TDP x GPUs x hours / 1000 x $/kWh (an upper bound on the
    boards' draw; host power is not in the catalog)."""
    return gpu.tdp_watts * num_gpus * hours / 1000 * usd_per_kwh


def _not_offered(basis: Pricing, hours: float, job: Job, reason: str) -> CostEstimate:
    return CostEstimate("not offered", basis, None, {}, "nothing: a price is missing", hours,
                        job, reason)


def buy_cost(
    gpu: GpuSpec, num_gpus: int, *, hours: float, job: Job,
    platform: PlatformSpec | None = None, price_kind: PriceKind | None = None,
    power_usd_per_kwh: float | None = None,
) -> CostEstimate:
    """Purchase: GPUs x card price (+ hosts x host price) (+ optional job power)."""
    price, kind = gpu_purchase_price(gpu, price_kind)
    if price is None:
        return _not_offered("buy", hours, job,
                            f"{gpu.id} has no {price_kind or 'new or used'} purchase price")
    items = {f"{num_gpus} x {gpu.id} GPU ({kind}, ${price:,.0f} each)": num_gpus * price}
    covers = f"purchase of {num_gpus} {gpu.id} GPU{'s' if num_gpus != 1 else ''} ({kind})"
    notes = [f"GPU prices as of {gpu.price_as_of}",
             *stale_price_notes([(f"GPU {gpu.id}", gpu.price_as_of)])]
    if platform is not None:
        hosts = hosts_needed(gpu, num_gpus, platform)
        if platform.price_usd is None:
            return _not_offered("buy", hours, job, f"host platform {platform.id} has no price")
        items[f"{hosts} x {platform.id} host (${platform.price_usd:,.0f} each, without GPUs)"] = (
            hosts * platform.price_usd)
        covers += f" and {hosts} {platform.id} host{'s' if hosts != 1 else ''}"
        notes.append(f"host price as of {platform.price_as_of}")
        slots = hosts * gpus_per_host(gpu, platform)
        if slots >= 4 * num_gpus:
            notes.append(f"the {platform.id} host{'s' if hosts != 1 else ''} bought "
                         f"hold{'' if hosts != 1 else 's'} {slots} GPUs for the {num_gpus} "
                         "planned: a chassis mostly empty, its price counted in full")
        notes += stale_price_notes([(f"host platform {platform.id}", platform.price_as_of)])
    else:
        covers += "; GPUs only (no host platform given)"
    if power_usd_per_kwh is not None:
        items[f"GPU power for the job ({gpu.tdp_watts:g} W TDP x {hours:.1f} h at "
              f"${power_usd_per_kwh:g}/kWh)"] = power_cost(gpu, num_gpus, hours,
                                                          usd_per_kwh=power_usd_per_kwh)
        covers += ", plus GPU power for the job"
    return CostEstimate("ok", "buy", sum(items.values()), items, covers, hours, job,
                        notes=tuple(notes))


def owned_cost(gpu: GpuSpec, num_gpus: int, *, hours: float, job: Job,
               power_usd_per_kwh: float | None = None) -> CostEstimate:
    """Hardware the user owns: nothing to buy or rent; the job's GPU power where a rate is
    given. Time is what the job costs."""
    items: dict[str, float] = {}
    covers = (f"{num_gpus} {gpu.id} GPU{'s' if num_gpus != 1 else ''} you own: nothing to buy "
              "or rent")
    if power_usd_per_kwh is not None:
        items[f"GPU power for the job ({gpu.tdp_watts:g} W TDP x {hours:.1f} h at "
              f"${power_usd_per_kwh:g}/kWh)"] = power_cost(gpu, num_gpus, hours,
                                                          usd_per_kwh=power_usd_per_kwh)
        covers += ", plus GPU power for the job"
    return CostEstimate("ok", "owned", sum(items.values()), items, covers, hours, job)


def rental_usd(usd_per_gpu_hour, num_gpus, hours):
    """A rental: $/GPU-hour x GPUs x hours (power and hosts are in the rate); elementwise on
    numpy arrays (the planner's search scores many pairs at once)."""
    return usd_per_gpu_hour * num_gpus * hours


# Minutes a rented instance runs before the first training step: boot, container image, model
# download and load. An assumption for the notes only (billed, not in the time shown), not a
# measured figure.
RENTAL_STARTUP_MINUTES = 10


def rent_cost(gpu: GpuSpec, num_gpus: int, *, hours: float, job: Job,
              offer: OfferSpec | None = None) -> CostEstimate:
    """Rental for the job: whole instances of ``offer`` (default: the GPU's catalog rate,
    offers.catalog_rate_offer), each billed for the job's hours rounded up to the offer's
    increment and at least its minimum (rental.rental_cost); power and host are in the rate."""
    offer = offer or catalog_rate_offer(gpu)
    if offer is None:
        return _not_offered("rent", hours, job, f"{gpu.id} has no rental offer or rental "
                            "price in the catalog")
    instances = instances_for(offer, num_gpus)
    bill = rental_cost(OfferUse(offer, instances), hours)
    billed = bill.offers[0]
    what = (f"{num_gpus} x {gpu.id} at ${offer.usd_per_hour:g}/GPU-hour" if
            offer.gpus_per_instance == 1 else
            f"{instances} x {offer.instance_type} ({offer.gpus_per_instance} GPUs each"
            + (f", {num_gpus} used" if instances * offer.gpus_per_instance != num_gpus else "")
            + f") at ${offer.usd_per_hour:g}/h")
    items = {f"rental of {what} from {offer.provider}, billed {billed.billed_hours:.2f} h":
             bill.usd}
    notes = [f"rental price as of {offer.price_as_of}: {offer.source}", *bill.notes]
    if hours * 60 < RENTAL_STARTUP_MINUTES:
        notes.append(f"the job ({hours * 60:.1f} min) is shorter than a rental's start-up "
                     f"(about {RENTAL_STARTUP_MINUTES} min assumed: boot, image, model load), "
                     "which is billed too and not in the time shown")
    notes += stale_price_notes([(f"GPU {gpu.id}" if offer.provider == CATALOG_PROVIDER else
                                 f"offer {offer.provider} {offer.instance_type}",
                                 offer.price_as_of)])
    return CostEstimate("ok", "rent", bill.usd, items,
                        f"rental of {num_gpus} {gpu.id} GPUs for the job ({hours:.2f} h)",
                        hours, job, notes=tuple(notes), rental=bill)


def job_cost(
    gpu: GpuSpec, num_gpus: int, *, tokens_per_s: float, job: Job | None = None,
    pricing: Pricing = "buy", platform: PlatformSpec | None = None,
    price_kind: PriceKind | None = None, power_usd_per_kwh: float | None = None,
    offer: OfferSpec | None = None,
) -> CostEstimate:
    """Cost of ``job`` (default: DEFAULT_JOB_TOKENS) at ``tokens_per_s`` on ``num_gpus`` GPUs,
    bought (GPUs, hosts of ``platform``, optional power) or rented."""
    if num_gpus <= 0:
        raise PlannerError(f"number of GPUs must be positive (got {num_gpus})")
    job = job or define_job()
    hours = job_hours(job, tokens_per_s)
    if pricing == "rent":
        if power_usd_per_kwh is not None:
            raise PlannerError("--power-usd-per-kwh applies to --pricing buy (rent includes it)")
        return rent_cost(gpu, num_gpus, hours=hours, job=job, offer=offer)
    if pricing == "owned":
        return owned_cost(gpu, num_gpus, hours=hours, job=job,
                          power_usd_per_kwh=power_usd_per_kwh)
    return buy_cost(gpu, num_gpus, hours=hours, job=job, platform=platform,
                    price_kind=price_kind, power_usd_per_kwh=power_usd_per_kwh)


# A job longer than this is said (hardware fails, prices and plans change over months).
LONG_JOB_DAYS = 30


def job_notes(job: Job, *, tokens_per_step: float, hours: float) -> list[str]:
    """What a user should hear about the job's size: shorter than one optimizer step (it still
    runs one), or longer than LONG_JOB_DAYS days."""
    notes = []
    if job.tokens < tokens_per_step:
        notes.append(f"the job ({job.tokens:,.0f} tokens) is shorter than one optimizer step "
                     f"({tokens_per_step:,.0f} tokens): the time shown is a fraction of a step; "
                     "a real run takes at least one")
    if hours > LONG_JOB_DAYS * 24:
        notes.append(f"the job runs {hours / 24:,.0f} days (over {LONG_JOB_DAYS}): plan for "
                     "restarts, checkpoints and price changes, or more GPUs")
    return notes
