"""The hardware a plan may get: offers of GPUs with their hosts (a purchase), their instances
(a rental) or the user's own, each with its usable memory, GPUs per host, host RAM and price."""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog.load import Catalog
from planner.catalog.offers import (
    CATALOG_PROVIDER,
    DEFAULT_MAX_GPUS_PER_OFFER,
    OfferSpec,
    offer_gpus_per_host,
    offer_max_gpus,
    rental_offers,
)
from planner.catalog.plan_request import PlanRequest
from planner.catalog.specs import (
    GpuSpec,
    PlatformSpec,
    gpus_per_host,
    hosts_for,
)
from planner.models.bands import request_margin
from planner.models.cost import gpu_purchase_price, rental_usd
from planner.models.host_ram import usable_host_ram_gib
from planner.models.memory import usable_mib
from planner.models.network import instance_platform
from planner.models.rental import bill_usd


# ---------------------------------------------------------------------------------------------
# The space of one request
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Offer:
    """One way to get GPUs: a GPU type, and for purchases the host platform that holds them; for
    rentals the provider's instance offer (offers.OfferSpec) and the GPUs it may supply."""

    gpu: GpuSpec
    platform: PlatformSpec | None  # None when renting (the cloud instance is the host)
    gpu_price_usd: float  # per GPU (buy) or per GPU-hour (rent: the offer's rate per GPU)
    host_price_usd: float  # per host (buy); 0 when renting
    gpus_per_host: int
    capacity_mib: int  # usable memory per GPU after the margin, rounded down
    host_ram_mib: int | None  # usable host RAM of the platform or instance (None: not known)
    rental: OfferSpec | None = None  # rent: the instance offer billed
    max_gpus: int | None = None  # rent: GPUs the offer may supply (--max-gpus-per-offer)
    # rent: the instance as a host for the links (network.instance_platform; None where its
    # offer states no network)
    instance: PlatformSpec | None = None

    @property
    def links_platform(self) -> PlatformSpec | None:
        """The host whose links the speed models read: the platform bought, else the rented
        instance where its offer states its network, else None (the models' defaults)."""
        return self.platform if self.platform is not None else self.instance

    def hosts(self, num_gpus: int) -> int:
        """Hosts that hold ``num_gpus`` GPUs (ceil of GPUs / GPUs per host)."""
        return hosts_for(num_gpus, self.gpus_per_host)

    def purchase_usd(self, num_gpus: int) -> int:
        """Whole dollars of GPUs and the hosts they need (the solver's and oracle's unit); also
        elementwise on an integer numpy array of GPU counts (solve.timed_search)."""
        return round(self.gpu_price_usd) * num_gpus + round(self.host_price_usd) * \
            self.hosts(num_gpus)

    def rental_usd(self, num_gpus, hours):
        """The bill for renting ``num_gpus`` GPUs for ``hours``: whole instances of the offer,
        each billed by its increment and minimum (rental.bill_usd); without an instance offer,
        GPU-hours at the rate (rental_floor_usd). Elementwise on numpy arrays."""
        if self.rental is None:
            return self.rental_floor_usd(num_gpus, hours)
        return bill_usd(self.rental, num_gpus, hours)

    def rental_floor_usd(self, num_gpus, hours):
        """A lower bound on rental_usd (GPUs used x hours x the rate per GPU-hour: no idle GPU
        of an instance, no rounding up), linear in both (the search's per-offer bounds)."""
        return rental_usd(self.gpu_price_usd, num_gpus, hours)

    def hourly_milli_usd(self) -> tuple[int, int]:
        """Rent: the rate in milli-dollars per hour as (per GPU, per host): an instance offer
        bills whole instances (its hosts), a per-GPU rate (catalog, or no offer) each GPU."""
        if self.rental is None:
            return round(self.gpu_price_usd * 1000), 0
        rate = round(self.rental.usd_per_hour * 1000)
        return (rate, 0) if self.rental.gpus_per_instance == 1 else (0, rate)

    @property
    def label(self) -> str:
        """The offer as words: the GPU and its platform or rental provider."""
        if self.rental is not None and self.rental.provider != CATALOG_PROVIDER:
            return f"{self.gpu.id} from {self.rental.provider} {self.rental.instance_type}"
        return self.gpu.id + (f" in {self.platform.id}" if self.platform else "")


def _timing_key(o: Offer) -> tuple[object, ...]:
    """What of an offer the throughput model reads (steptime.step_time_us, Timing.rates)."""
    return (o.gpu, o.links_platform, o.gpus_per_host)


def gpu_price(gpu: GpuSpec, request: PlanRequest) -> float | None:
    """The price the request asks for when buying or owning: the purchase price of
    cost.gpu_purchase_price (the kind named, or new where known, else used); 0 owned. Rentals
    are priced by their offers (_rental_offers)."""
    if request.pricing == "owned":
        return 0.0  # hardware the user has: every GPU of the catalog, priced or not
    return gpu_purchase_price(gpu, request.price_kind)[0]


def _offers(request: PlanRequest, catalog: Catalog) -> tuple[list[Offer], list[str]]:
    names = request.gpus or tuple(catalog.gpus)
    offers: list[Offer] = []
    unoffered: list[str] = []
    for name in names:
        gpu = catalog.gpu(name)
        if request.pricing == "rent":
            rented = _rental_offers(request, catalog, gpu,
                                    usable_mib(gpu.memory_gib, request_margin(request)))
            offers += rented
            if not rented:
                unoffered.append(f"{gpu.id}: no rental offer"
                                 + (" within --max-gpus-per-offer" if rental_offers(
                                     catalog, (gpu.id,), spot=request.spot) else "")
                                 + (" (spot)" if request.spot else ""))
            continue
        price = gpu_price(gpu, request)
        if price is None:
            unoffered.append(f"{gpu.id}: no {request.price_kind or ''} price".replace("  ", " "))
            continue
        cap = usable_mib(gpu.memory_gib, request_margin(request))
        owned = request.pricing == "owned"  # the user's hosts: any platform that takes the GPU
        hosts = [p for p in _platforms(request, catalog)
                 if gpu.form_factor in p.form_factors and (owned or p.price_usd is not None)]
        if owned and not hosts and request.platform is None:
            offers.append(Offer(gpu, None, 0.0, 0.0, gpus_per_host(gpu, None), cap, None))
        elif not hosts:
            named = f"platform {request.platform}" if request.platform else "host platform"
            unoffered.append(f"{gpu.id}: no {'' if owned else 'priced '}{named} takes "
                             f"{gpu.form_factor} GPUs")
        for p in hosts:
            per_host = gpus_per_host(gpu, p)
            ram = int(usable_host_ram_gib(p.host_ram_gib) * 1024)
            offers.append(Offer(gpu, p, price, 0.0 if owned else p.price_usd or 0.0, per_host,
                                cap, ram))
    return offers, unoffered


def _platforms(request: PlanRequest, catalog: Catalog) -> list[PlatformSpec]:
    """The host platforms a purchase or owned plan may use: the one --platform names (your
    own, from a --catalog overlay), else the catalog's."""
    if request.platform is not None:
        return [catalog.platform(request.platform)]
    return list(catalog.platforms.values())


def _rental_offers(request: PlanRequest, catalog: Catalog, gpu: GpuSpec,
                   cap: int) -> list[Offer]:
    """The GPU's rental offers (offers.rental_offers) that can supply at least one instance
    under --max-gpus-per-offer, less those another offer of the same GPU and instance size
    dominates (no dearer, no coarser billing, no longer minimum, as much known host RAM)."""
    most = request.max_gpus_per_offer or DEFAULT_MAX_GPUS_PER_OFFER
    found = (rental_offer(spec, gpu, capacity_mib=cap, most=most)
             for spec in rental_offers(catalog, (gpu.id,), spot=request.spot))
    out = [o for o in found if o is not None]
    return [o for o in out if not any(_dominates(d, o) for d in out if d is not o)]


def rental_offer(spec: OfferSpec, gpu: GpuSpec, *, capacity_mib: int, most: int
                 ) -> Offer | None:
    """One instance offer of ``gpu`` as the rules see it: its GPUs per host (instance), usable
    host RAM and the GPUs it may supply under a cap of ``most`` per offer (None when not one
    instance fits under the cap)."""
    supply = offer_max_gpus(spec, most)
    if not supply:
        return None
    ram = None if spec.host_ram_gib is None else int(usable_host_ram_gib(spec.host_ram_gib)
                                                      * 1024)
    return Offer(gpu, None, spec.usd_per_gpu_hour, 0.0, offer_gpus_per_host(spec, gpu),
                 capacity_mib, ram, spec, supply, instance_platform(spec, gpu))


def _dominates(a: Offer, b: Offer) -> bool:
    """Rental ``a`` is never worse than ``b`` (same GPU and instance size; rate, billing,
    minimum, known host RAM, and the network and cores its offer states) and, on a full tie,
    comes first in the (price-sorted) list."""
    x, y = a.rental, b.rental
    if x is None or y is None or x.gpus_per_instance != y.gpus_per_instance \
            or a.gpus_per_host != b.gpus_per_host or a.max_gpus != b.max_gpus:
        return False
    ram_ok = b.host_ram_mib is not None and a.host_ram_mib is not None \
        and a.host_ram_mib >= b.host_ram_mib or a.host_ram_mib is b.host_ram_mib is None
    keys_a = (x.usd_per_hour, x.billing_increment_hours, x.minimum_hours)
    keys_b = (y.usd_per_hour, y.billing_increment_hours, y.minimum_hours)
    links_a, links_b = _links(a), _links(b)
    links_ok = links_a is links_b is None or None not in (links_a, links_b) and all(
        p >= q for p, q in zip(links_a, links_b, strict=True))  # type: ignore[arg-type]
    if not ram_ok or not links_ok or any(p > q for p, q in zip(keys_a, keys_b, strict=True)):
        return False
    first = (x.provider, x.instance_type, x.region or "") < \
        (y.provider, y.instance_type, y.region or "")
    return keys_a != keys_b or a.host_ram_mib != b.host_ram_mib or links_a != links_b or first


def _links(o: Offer) -> tuple[float, int] | None:
    """A rented instance's network and cores as the speed models read them (instance), None
    where its offer states no network."""
    return None if o.instance is None else (o.instance.inter_node_bandwidth_gbps,
                                            o.instance.cpu_cores)


def unoffered_text(unoffered: tuple[str, ...] | list[str]) -> str:
    """The GPUs left out ("gpu: reason" each, _offers) grouped by reason, in first-seen order:
    'no price: a10, t4; no priced host platform takes oam GPUs: mi300x'."""
    by_reason: dict[str, list[str]] = {}
    for entry in unoffered:
        gpu, _, reason = entry.partition(": ")
        by_reason.setdefault(reason, []).append(gpu)
    return "; ".join(f"{reason}: {', '.join(gpus)}" for reason, gpus in by_reason.items())
