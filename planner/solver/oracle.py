"""Exhaustive enumeration of a plan space: the test oracle for the CP-SAT encoding.

Walks every (offer, strategy, tp, pp, dp, micro-batch) with the same integer tables and the
same tie-break chain as ``solve``, and returns the lexicographically best candidate. Slow by
design; used by tests on small spaces and by benchmarks/solver.py for the speed ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.solver.rows import Row
from planner.solver.search import job_hours_at, job_steps
from planner.solver.space import PlanSpace
from planner.solver.steptime import step_time_us


@dataclass(frozen=True, order=True)
class Candidate:
    """One candidate of the enumeration; _key orders them as solve.py's chain does."""

    cost: int
    step_time_us: int
    num_gpus: int
    strategy: int
    offer: int
    tp: int
    pp: int
    neg_micro_batch: int
    dp: int
    grad_accum: int
    hosts: int
    rate: int = 0  # the encoding's cost variable (rent: milli-$ per hour of the GPUs)


def _key(req, c: Candidate) -> tuple:
    """The chain of solve.py: objective first (cost or step time), then the other, then GPUs,
    strategy, hosts, offer, tp, pp, -micro-batch."""
    second = c.rate if req.pricing == "rent" else c.cost
    head = (c.cost, c.step_time_us) if req.objective == "cost" else (c.step_time_us, second)
    return (*head, c.num_gpus, c.strategy, c.hosts, c.offer, c.tp, c.pp, c.neg_micro_batch)


def enumerate_best(space: PlanSpace) -> Candidate | None:
    """The best candidate by the request's objective and the tie-break chain, or None."""
    req = space.request
    max_gpus = req.num_gpus or req.max_gpus
    rent = req.pricing == "rent"
    steps = job_steps(space)
    tokens_step = req.sequences_per_step * req.tokens_per_sequence
    best: Candidate | None = None
    for oi, offer in enumerate(space.offers):
        for si in range(len(space.strategies)):
            for tp in space.tps:
                if tp > offer.gpus_per_host:
                    continue
                for pp in space.pps:
                    for dp in space.dps:
                        n = space.num_gpus(si, tp, pp, dp=dp)
                        s = space.strategies[si]
                        if n > max_gpus or dp % s.rollout_tp or (dp * space.base.cp) % s.ep:
                            continue
                        if s.dp_shard and (s.dp_shard != offer.gpus_per_host or tp * pp > 1
                                           or dp <= s.dp_shard or dp % s.dp_shard):
                            continue  # a hybrid shard group: one host's GPUs, several hosts
                        hosts = offer.hosts(n)
                        host_mib = offer.host_ram_mib
                        if host_mib is not None and host_mib < space.host_need_mib(
                                si, tp, pp, dp=dp, gpus_per_host=offer.gpus_per_host):
                            continue
                        cost = offer.purchase_usd(n)
                        if rent:
                            if offer.max_gpus is not None and n > offer.max_gpus:
                                continue  # the offer's supply (--max-gpus-per-offer)
                            per_gpu, per_host = offer.hourly_milli_usd()
                            cost = n * per_gpu + hosts * per_host  # rate, milli-$/h
                        elif req.budget_usd is not None and cost > int(req.budget_usd):
                            continue
                        for mb in space.micro_batches:
                            ga = space.grad_accum(dp, mb)
                            if ga is None:
                                continue
                            row = Row(si, tp, pp, dp, mb, ga, n, 0, ())
                            if not space.allows(row):  # the pins, as every route reads them
                                continue
                            if space.gpu_need_mib(si, tp, pp, dp=dp, mb=mb) > offer.capacity_mib:
                                continue
                            time_us = step_time_us(space, oi, row)
                            hours = job_hours_at(time_us, steps)
                            if req.max_hours is not None and hours > req.max_hours:
                                continue
                            if req.min_tokens_per_s is not None and \
                                    tokens_step / (time_us / 1e6) < req.min_tokens_per_s:
                                continue
                            job = offer.rental_usd(n, hours) * 1000  # rental, milli-$
                            if rent and req.budget_usd is not None and job > req.budget_usd * 1e3:
                                continue
                            cand = Candidate(round(job) if rent else cost, time_us, n, si, oi,
                                             tp, pp, -mb, dp, ga, hosts, cost)
                            if best is None or _key(req, cand) < _key(req, best):
                                best = cand
    return best
