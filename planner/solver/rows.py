"""The candidate rows of a plan space: one layout each (``Row``), and the Pareto front of
their needs that decides feasibility and cost (``pareto_rows``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class Row(NamedTuple):
    """One candidate layout: strategy, tp, pp, dp, micro-batch, with its integer needs (a named
    tuple: requests build a few hundred thousand of them)."""

    strategy: int
    tp: int
    pp: int
    dp: int
    micro_batch: int
    grad_accum: int
    num_gpus: int
    gpu_need_mib: int
    host_need_mib: tuple[int, ...]  # per entry of PlanSpace.host_sizes


def pareto_rows(rows: list[Row]) -> list[Row]:
    """Per (GPUs, tp), the rows whose needs no other row beats in every component; enough to
    decide feasibility and cost (cost depends on GPUs and the offer only). For a fixed GPU count
    every host need is min(GPUs, per host) x the same per-rank need, so the needs are ordered
    like (GPU need, first host need): a 2-D front, found by one sorted sweep."""
    groups: dict[tuple[int, int], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.num_gpus, r.tp), []).append(r)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: (r.gpu_need_mib, r.host_need_mib, r.strategy, r.pp, r.dp,
                                  -r.micro_batch))
        best_host = None
        for r in group:
            if best_host is None or r.host_need_mib < best_host:
                out.append(r)
                best_host = r.host_need_mib
    return out


def strategy_shards(strategies: Sequence[Any]) -> np.ndarray:
    """Each strategy's hybrid shard group (domains.Choice.dp_shard; 0: over every rank)."""
    return np.array([s.dp_shard or 0 for s in strategies], dtype=np.int64)


def row_shards(strategies: Sequence[Any], rows: Sequence[Row]) -> np.ndarray:
    """Each row's hybrid shard group (its strategy's; rules.Need.dp_shard)."""
    return strategy_shards(strategies)[np.array([r.strategy for r in rows], dtype=np.int64)]
