"""Hybrid sharding (HSDP) in plans: which shard groups a framework's plans search, and which
profiles built on a framework search them where it does not (for a plan over hosts to name).
The launch formats that write it are frameworks.HYBRID_SHARD_LAUNCHES (an RL trainer's:
RL_HYBRID_SHARD_LAUNCHES)."""

from __future__ import annotations

from planner.catalog.frameworks import Profile, hybrid_shard_writers, plan_shardings, resolve
from planner.catalog.launches import launch_format_of
from planner.catalog.load import Catalog
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import RL_WORKLOADS
from planner.errors import PlannerError


def plan_hybrid_shards(request: PlanRequest, profile: Profile, host_sizes: tuple[int, ...], *,
                       cp: int) -> tuple[int, ...]:
    """The hybrid shard groups a plan of ``request`` on ``profile`` searches (hybrid_shard_sizes
    over the offers' host sizes; none with context parallel); --sharding hsdp with none is bad
    input."""
    found = () if cp > 1 else hybrid_shard_sizes(
        profile, host_sizes, max_gpus=request.num_gpus or request.max_gpus, rl=request.is_rl)
    if request.sharding == "hsdp" and not found:
        writers = hybrid_shard_writers(request.is_rl)
        raise PlannerError(
            f"--sharding hsdp: no hybrid shard group to plan on --framework {profile.id} (its "
            f"launch must write one{' for RL' if request.is_rl else ''}: {', '.join(writers)} "
            "with FSDP; two hosts must fit in --max-gpus / --num-gpus; not with context "
            "parallel); use --sharding fsdp, or a framework whose launch writes it")
    return found


def hybrid_relatives(catalog: Catalog, profile: Profile, workload: str) -> list[Profile]:
    """The profiles built on ``profile`` (their base) whose plans of ``workload`` search hybrid
    sharding where ``profile``'s do not: the same training code under FSDP's HYBRID_SHARD
    (hf-trainer: accelerate-fsdp)."""
    rl = workload in RL_WORKLOADS
    if plans_hybrid(profile, rl=rl):
        return []
    found = [resolve(catalog, fid) for fid, spec in sorted(catalog.frameworks.items())
             if spec.base == profile.id]
    return [p for p in found if plans_hybrid(p, rl=rl) and launch_format_of(p, workload)
            is not None]


def plans_hybrid(profile: Profile, *, rl: bool = False) -> bool:
    """Plans on ``profile`` search hybrid sharding: its launch writes FSDP's hybrid sharding
    (HYBRID_SHARD_LAUNCHES; ``rl``, an RL trainer's: RL_HYBRID_SHARD_LAUNCHES) and its plans
    shard with FSDP."""
    return profile.value("launch_format") in hybrid_shard_writers(rl) and \
        "fsdp" in plan_shardings(profile)


def hybrid_shard_sizes(profile: Profile, host_sizes: tuple[int, ...], *,
                       max_gpus: int, rl: bool = False) -> tuple[int, ...]:
    """The hybrid shard groups a plan on ``profile`` searches: one host's GPUs (each size in
    ``host_sizes`` from 2 up, with room for two hosts within ``max_gpus``) where
    plans_hybrid; none elsewhere. Within one host hybrid sharding is full sharding, so only
    jobs over several hosts take it."""
    if not plans_hybrid(profile, rl=rl):
        return ()
    return tuple(s for s in host_sizes if s >= 2 and 2 * s <= max_gpus)
