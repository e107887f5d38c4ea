"""Hybrid sharding (HSDP) in plans: which shard groups a framework's plans search, and which
profiles built on a framework search them where it does not (for a plan over hosts to name).
The launch formats that write it are frameworks.HYBRID_SHARD_LAUNCHES."""

from __future__ import annotations

from planner.catalog.frameworks import HYBRID_SHARD_LAUNCHES, Profile, plan_shardings, resolve
from planner.catalog.launches import launch_format_of
from planner.catalog.load import Catalog


def hybrid_relatives(catalog: Catalog, profile: Profile, workload: str) -> list[Profile]:
    """The profiles built on ``profile`` (their base) whose plans of ``workload`` search hybrid
    sharding where ``profile``'s do not: the same training code under FSDP's HYBRID_SHARD
    (hf-trainer: accelerate-fsdp)."""
    if hybrid_shard_sizes(profile, (8,), max_gpus=16):
        return []
    found = [resolve(catalog, fid) for fid, spec in sorted(catalog.frameworks.items())
             if spec.base == profile.id]
    return [p for p in found if hybrid_shard_sizes(p, (8,), max_gpus=16)
            and launch_format_of(p, workload) is not None]


def hybrid_shard_sizes(profile: Profile, host_sizes: tuple[int, ...], *,
                       max_gpus: int) -> tuple[int, ...]:
    """The hybrid shard groups a plan on ``profile`` searches: one host's GPUs (each size in
    ``host_sizes`` from 2 up, with room for two hosts within ``max_gpus``) where its launch
    writes FSDP's hybrid sharding (HYBRID_SHARD_LAUNCHES) and its plans shard with FSDP;
    none elsewhere. Within one host hybrid sharding is full sharding, so only jobs over
    several hosts take it."""
    if profile.value("launch_format") not in HYBRID_SHARD_LAUNCHES or \
            "fsdp" not in plan_shardings(profile):
        return ()
    return tuple(s for s in host_sizes if s >= 2 and 2 * s <= max_gpus)
