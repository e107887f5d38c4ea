"""What renting costs (pure): whole instances of an offer billed by its increment and minimum
(bill_usd, elementwise for the search; rental_cost with its notes for a plan), and the cheapest
cover of a GPU count by one provider's instances (cheapest_cover)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from planner.catalog.offers import OfferSpec, billing_text
from planner.errors import PlannerError

# A job's hours are compared with whole increments after dividing; a relative slack this small
# keeps 1.0 hour at a 1/60-hour increment from billing 61 minutes through rounding error.
_EPS = 1e-9


def instances_for(offer: OfferSpec, num_gpus):
    """Instances of ``offer`` that hold ``num_gpus`` GPUs (ceil); elementwise on numpy arrays."""
    return -(-num_gpus // offer.gpus_per_instance)


def bill_usd(offer: OfferSpec, num_gpus, hours):
    """What renting ``num_gpus`` GPUs of ``offer`` for ``hours`` costs: whole instances, each
    billed as _instance_cost; elementwise on numpy arrays (the planner's search scores many
    pairs at once)."""
    usd = instances_for(offer, num_gpus) * _instance_cost(offer, hours)
    return float(usd) if isinstance(usd, float | int) or np.ndim(usd) == 0 else usd


@dataclass(frozen=True)
class OfferUse:
    """``instances`` instances of one offer."""

    offer: OfferSpec
    instances: int

    @property
    def gpus(self) -> int:
        """GPUs of the instances used."""
        return self.instances * self.offer.gpus_per_instance

    @property
    def usd_per_hour(self) -> float:
        """Hourly price of the instances used, USD."""
        return self.instances * self.offer.usd_per_hour


@dataclass(frozen=True)
class Cover:
    """Instances of one provider that together give ``gpus`` >= ``gpus_needed`` GPUs."""

    provider: str
    uses: tuple[OfferUse, ...]
    gpus_needed: int

    @property
    def gpus(self) -> int:
        """GPUs of all the instances in the cover."""
        return sum(u.gpus for u in self.uses)

    @property
    def instances(self) -> int:
        """Instances in the cover."""
        return sum(u.instances for u in self.uses)

    @property
    def usd_per_hour(self) -> float:
        """Hourly price of the cover, USD."""
        return sum(u.usd_per_hour for u in self.uses)


def cheapest_cover(
    offers: Iterable[OfferSpec], gpus_needed: int, max_gpus_per_offer: int | None = None,
    *, min_gpus_per_instance: int = 1, hours: float | None = None,
) -> Cover | None:
    """The cheapest instances of ONE provider (and one of spot / on demand) giving at least
    ``gpus_needed`` GPUs; None when no provider can.

    Cost without ``hours``: the hourly rate, sum of instances x usd_per_hour. With ``hours``
    (the job's wall-clock time): the bill, sum of instances x usd_per_hour x billed_hours(hours,
    increment, minimum), so that a short job prefers per-second billing to an hourly one at a
    lower rate.

    ``max_gpus_per_offer`` caps the GPUs taken from any one offer (instances x gpus_per_instance
    <= cap): a provider's stock of one shape is finite, so a request for more must mix shapes or
    fail; an offer whose single instance exceeds the cap is not used. Several instances of one
    shape are allowed (2 x 4-GPU may beat 1 x 8-GPU). ``min_gpus_per_instance`` keeps only
    instances with at least that many GPUs: price alone prefers many 1-GPU instances when they
    are cheaper per GPU-hour, where a tensor-parallel group must share one node's NVLink.

    Ties go to fewer instances, then fewer GPUs, then the provider name. The offers a cover
    mixes may sit in different regions (the shipped data keep one region per shape); pass one
    region's offers to keep a cluster in one place.

    Method: per (provider, spot), a bounded min-cost cover (knapsack) over GPU counts 0 ..
    gpus_needed, the counts of one offer split into powers of two; exact.
    """
    if gpus_needed <= 0:
        raise PlannerError(f"GPUs needed must be positive (got {gpus_needed})")
    if max_gpus_per_offer is not None and max_gpus_per_offer <= 0:
        raise PlannerError(f"--max-gpus-per-offer must be positive (got {max_gpus_per_offer})")
    if hours is not None and hours <= 0:
        raise PlannerError(f"a rental needs positive hours (got {hours:g})")
    groups: dict[tuple[str, bool], list[OfferSpec]] = {}
    for o in offers:
        if o.gpus_per_instance < min_gpus_per_instance:
            continue
        groups.setdefault((o.provider, o.spot), []).append(o)
    best: tuple[tuple[float, int, int, str], Cover] | None = None
    for (provider, _spot), group in sorted(groups.items()):
        uses = _cover_one_provider(group, gpus_needed, max_gpus_per_offer, hours)
        if uses is None:
            continue
        cover = Cover(provider, uses, gpus_needed)
        cost = sum(u.instances * _instance_cost(u.offer, hours) for u in uses)
        rank = (round(cost, 9), cover.instances, cover.gpus, provider)
        if best is None or rank < best[0]:
            best = (rank, cover)
    return None if best is None else best[1]


def _instance_cost(offer: OfferSpec, hours):
    """One instance: its hourly rate, or its bill for ``hours`` (elementwise)."""
    if hours is None:
        return offer.usd_per_hour
    return offer.usd_per_hour * billed_hours(hours, offer.billing_increment_hours,
                                             offer.minimum_hours)


def _cover_one_provider(
    offers: Sequence[OfferSpec], need: int, cap: int | None, hours: float | None,
) -> tuple[OfferUse, ...] | None:
    # Items: (offer index, count, cost, gpus); an offer usable k times becomes items of counts
    # 1, 2, 4, ..., rest (every count 0..k is a sum of a subset of them).
    items: list[tuple[int, int]] = []
    for i, o in enumerate(offers):
        most = math.ceil(need / o.gpus_per_instance)
        if cap is not None:
            most = min(most, cap // o.gpus_per_instance)
        step = 1
        while most > 0:
            take = min(step, most)
            items.append((i, take))
            most -= take
            step *= 2
    # best[g]: (cost, instances, gpus) of the cheapest multiset reaching min(g, need) GPUs;
    # choice[g]: the items taken, as a tuple of item indices.
    inf = (math.inf, 0, 0)
    best: list[tuple[float, int, int]] = [inf] * (need + 1)
    picks: list[tuple[int, ...]] = [()] * (need + 1)
    best[0] = (0.0, 0, 0)
    for n, (i, count) in enumerate(items):
        o = offers[i]
        gpus = count * o.gpus_per_instance
        cost = count * _instance_cost(o, hours)
        for g in range(need, -1, -1):  # 0/1 knapsack: each item once
            if best[g][0] == math.inf:
                continue
            to = min(need, g + gpus)
            cand = (best[g][0] + cost, best[g][1] + count, best[g][2] + gpus)
            if (round(cand[0], 9), cand[1], cand[2]) < (round(best[to][0], 9), best[to][1],
                                                        best[to][2]):
                best[to] = cand
                picks[to] = (*picks[g], n)
    if best[need][0] == math.inf:
        return None
    counts: dict[int, int] = {}
    for n in picks[need]:
        i, count = items[n]
        counts[i] = counts.get(i, 0) + count
    return tuple(OfferUse(offers[i], c) for i, c in sorted(counts.items()))


def billed_hours(hours, increment_hours: float, minimum_hours: float = 0.0):
    """Hours billed for ``hours`` of use: max(minimum, ceil(hours / increment) x increment);
    elementwise on numpy arrays.

    A job of 61 s at a per-minute increment bills 2 minutes; 30 s at a 1-minute minimum bills
    1 minute; 1 h 1 s at an hourly increment bills 2 hours.
    """
    # a finite scalar (the search's per-pair checks) takes math's ceil and max: numpy's scalar
    # overhead dominated the GRPO rental-by-time request; one formula for both
    scalar = isinstance(hours, float | int) and math.isfinite(hours)
    h = hours if scalar else np.asarray(hours, dtype=float)
    if (h < 0) if scalar else np.any(h < 0):
        raise PlannerError(f"hours must not be negative (got {np.min(h):g})")
    ceil, maximum = (math.ceil, max) if scalar else (np.ceil, np.maximum)
    billed = maximum(minimum_hours, ceil(h / increment_hours * (1 - _EPS)) * increment_hours)
    return float(billed) if scalar or np.ndim(billed) == 0 else billed


@dataclass(frozen=True)
class BilledOffer:
    """One offer's part of a rental: its instances, billed time and cost."""

    provider: str
    instance_type: str
    region: str | None
    spot: bool
    gpu: str
    gpus_per_instance: int
    instances: int
    usd_per_hour: float
    billing_increment_hours: float
    minimum_hours: float
    price_as_of: str
    source: str
    host_ram_gib: float | None
    billed_hours: float
    usd: float
    network_gbit_s: float | None = None  # to other instances, as the offer states it

    def summary(self) -> dict[str, object]:
        """The JSON ``offer`` object of issue 19 (provider, gpus_per_instance, usd_per_hour,
        billing_increment_hours, price_as_of) with the instance count and what was billed."""
        return {
            "provider": self.provider, "gpus_per_instance": self.gpus_per_instance,
            "usd_per_hour": self.usd_per_hour,
            "billing_increment_hours": self.billing_increment_hours,
            "price_as_of": self.price_as_of, "instance_type": self.instance_type,
            "region": self.region, "spot": self.spot, "instances": self.instances,
            "host_ram_gib": self.host_ram_gib,
            "minimum_hours": self.minimum_hours, "billed_hours": self.billed_hours,
            "usd": self.usd, "source": self.source, "network_gbit_s": self.network_gbit_s,
        }


@dataclass(frozen=True)
class RentalCost:
    """A rental's bill: ``usd`` = sum of the offers' ``usd``; ``shorter_than_minimum`` when the
    job's hours are less than some offer's minimum (that minimum is billed instead)."""

    hours: float
    usd: float
    gpus: int
    offers: tuple[BilledOffer, ...]
    shorter_than_minimum: bool
    notes: tuple[str, ...]


def rental_cost(choice: Cover | OfferUse | OfferSpec, hours: float) -> RentalCost:
    """What renting ``choice`` (a cover, instances of one offer, or one instance of an offer)
    for ``hours`` costs.

    Per offer: usd = instances x usd_per_hour x billed_hours(hours, increment, minimum), every
    instance running the whole job. Notes say when the job is shorter than a minimum, and when
    rounding up to the increment adds more than 1 % to the time.
    """
    if hours <= 0:
        raise PlannerError(f"a rental needs positive hours (got {hours:g})")
    uses = choice.uses if isinstance(choice, Cover) else \
        (choice,) if isinstance(choice, OfferUse) else (OfferUse(choice, 1),)
    billed: list[BilledOffer] = []
    notes: list[str] = []
    short = False
    for use in uses:
        o = use.offer
        b = billed_hours(hours, o.billing_increment_hours, o.minimum_hours)
        if hours < o.minimum_hours:
            short = True
            notes.append(f"{o.provider} {o.instance_type}: the job ({hours * 60:.1f} min) is "
                         f"shorter than the minimum of {o.minimum_hours * 60:g} min, which is "
                         "billed")
        elif b > hours * 1.01:
            notes.append(f"{o.provider} {o.instance_type}: billed {b:.4g} h for {hours:.4g} h "
                         f"(increment {billing_text(o.billing_increment_hours)})")
        billed.append(BilledOffer(
            provider=o.provider, instance_type=o.instance_type, region=o.region, spot=o.spot,
            gpu=o.gpu, gpus_per_instance=o.gpus_per_instance, instances=use.instances,
            usd_per_hour=o.usd_per_hour, billing_increment_hours=o.billing_increment_hours,
            minimum_hours=o.minimum_hours, price_as_of=o.price_as_of, source=o.source,
            host_ram_gib=o.host_ram_gib, billed_hours=b,
            usd=use.instances * _instance_cost(o, hours), network_gbit_s=o.network_gbit_s,
        ))
    return RentalCost(hours=hours, usd=sum(b.usd for b in billed),
                      gpus=sum(b.instances * b.gpus_per_instance for b in billed),
                      offers=tuple(billed), shorter_than_minimum=short, notes=tuple(notes))
