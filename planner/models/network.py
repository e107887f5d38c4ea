"""The links one GPU sees (NVLink/PCIe/network bandwidths, GB/s) and the bytes it sends per
training step in each parallel group's collectives (pure). throughput.py times them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from planner.catalog.offers import OfferSpec
from planner.catalog.request import TrainConfig
from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec, gpus_per_host, hosts_for
from planner.models import efficiency as eff
from planner.models.flops import backward_layers, recomputed_share
from planner.models.states import (
    local_routed,
    nf4_bytes_per_param,
    params_on_gpu,
    routed_params,
    trainable_on_gpu,
    trainable_routed,
)

# Inter-node bandwidth per GPU when no platform says otherwise: 200 Gb/s per GPU (one HDR
# InfiniBand port per GPU, A100-era DGX). Stated in the notes of every estimate that uses it.
DEFAULT_INTER_NODE_GBPS_PER_GPU = 25.0
# Host CPU cores per GPU when no platform is given (a DGX/HGX host has 112 cores for 8 GPUs).
DEFAULT_CPU_CORES_PER_GPU = 14
_PCIE_GBPS_PER_LANE = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.877}  # one direction, GB/s
# PCIe generation of a GPU's host link (catalog GpuSpec.host_link); a GPU file without one
# (a user's overlay) is taken as Gen4, stated here. NVLink-C2C (GB200: one Grace CPU to its two
# Blackwell GPUs, 900 GB/s bidirectional, NVIDIA GB200 NVL72 specifications) is taken as shared
# by the two GPUs: 225 GB/s one way per GPU (Grace's LPDDR5X, up to 512 GB/s, caps it too).
_HOST_PCIE_GEN = {"pcie3": 3, "pcie4": 4, "pcie5": 5, "pcie6": 6}
DEFAULT_HOST_PCIE_GEN = 4
NVLINK_C2C_GBPS = 225.0


@lru_cache(maxsize=256)  # pure; the reference enumeration asks once per candidate layout
def instance_platform(offer: OfferSpec, gpu: GpuSpec) -> PlatformSpec | None:
    """A rented instance as the host the links see: its GPUs, the network to other instances
    its offer states (OfferSpec.network_gbit_s / 8 GB/s), half its vCPUs as cores (two
    hyperthreads each), the GPU's own PCIe generation at 16 lanes; None where the offer
    states no network or no host RAM (the models then assume DEFAULT_INTER_NODE_GBPS_PER_GPU
    and DEFAULT_CPU_CORES_PER_GPU, and say so)."""
    if offer.network_gbit_s is None or offer.host_ram_gib is None:
        return None
    gpus = offer.gpus_per_instance
    cores = offer.host_vcpus // 2 if offer.host_vcpus and offer.host_vcpus >= 2 else \
        DEFAULT_CPU_CORES_PER_GPU * gpus
    return PlatformSpec(
        id=f"{offer.provider}-{offer.instance_type}", name=f"{offer.provider} "
        f"{offer.instance_type} (rented)", form_factors=(gpu.form_factor,), max_gpus=gpus,
        host_ram_gib=offer.host_ram_gib, cpu_cores=cores,
        pcie_gen=_HOST_PCIE_GEN.get(gpu.host_link or "", DEFAULT_HOST_PCIE_GEN),
        inter_node_bandwidth_gbps=offer.network_gbit_s / 8,
        source_urls=(str(offer.network_source),))


# ---------------------------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Links:
    """Achievable one-way bandwidths one GPU sees, GB/s, and the node size they hold for."""

    gpus_per_node: int
    intra_node_gbps: float  # collective bus bandwidth inside a node (groups > 2 GPUs)
    pair_gbps: float  # inside a node for a group of 2 (NVLink bridges join pairs only)
    inter_node_gbps: float  # per-GPU share of the node's network
    host_link_gbps: float  # GPU <-> host RAM (PCIe)
    host_memory_gbps: float  # host RAM bandwidth available to one GPU's CPU optimizer
    network_assumed: bool = False  # no platform or override gave the inter-node network

    def collective_gbps(self, group: int, spans_nodes: bool) -> float:
        """Bus bandwidth, GB/s, of a collective over ``group`` GPUs, within a node or not."""
        if spans_nodes:
            return min(self.inter_node_gbps, self.intra_node_gbps)
        return self.pair_gbps if group <= 2 else self.intra_node_gbps


def host_span_notes(cfg: TrainConfig, links: Links) -> list[str]:
    """What a job across hosts is timed with (issue 18: a split over hosts is shown, with the
    slow link it has): the hosts and how the GPUs fill them, which parallel groups cross the
    network and at what bandwidth per GPU against the one inside a host."""
    g, n = links.gpus_per_node, cfg.num_gpus
    if n <= g:
        return []
    hosts = hosts_for(n, g)
    fill = f"{hosts - 1} x {g} + {n - (hosts - 1) * g}" if n % g else f"{hosts} x {g}"
    degree = {"tp": cfg.tp, "cp": cfg.cp, "dp": dp_shard_degree(cfg), "pp": cfg.pp, "ep": cfg.ep,
              "dp_replicate": cfg.dp // dp_shard_degree(cfg)}
    crossing = [k for k, v in _spans(cfg, links).items() if v and degree[k] > 1]
    where = ", ".join(crossing) or "no"
    assumed = (f"; the network is assumed, {DEFAULT_INTER_NODE_GBPS_PER_GPU:g} GB/s (200 Gb/s) "
               "per GPU: no platform or offer states it (state yours: a platform or offer "
               "file in a --catalog folder, and --platform)") if links.network_assumed else ""
    return [f"{n} GPUs on {hosts} hosts of {g} ({fill}"
            + (", an uneven split" if n % g else "") + f"): {where} group traffic crosses hosts "
            f"at {links.inter_node_gbps:.1f} GB/s per GPU (inside a host "
            f"{links.intra_node_gbps:.1f} GB/s), as timed{assumed}"]


def host_link_gbps(gpu: GpuSpec, platform: PlatformSpec | None) -> float:
    """GPU <-> host memory one way: PCIe at the lower generation of GPU (its catalog host_link)
    and host, x lanes per GPU (platform; 16), or NVLink-C2C to a Grace CPU; x
    HOST_LINK_EFFICIENCY (pinned copies)."""
    if gpu.host_link == "nvlink-c2c":
        return NVLINK_C2C_GBPS * eff.HOST_LINK_EFFICIENCY
    gen = _HOST_PCIE_GEN.get(gpu.host_link or "", DEFAULT_HOST_PCIE_GEN)
    lanes = 16
    if platform is not None:
        gen, lanes = min(gen, platform.pcie_gen), platform.pcie_lanes_per_gpu
    return _PCIE_GBPS_PER_LANE[gen] * lanes * eff.HOST_LINK_EFFICIENCY


@lru_cache(maxsize=1024)  # pure; the planner's step times ask for the same few GPUs' links
def resolve_links(
    gpu: GpuSpec, *, platform: PlatformSpec | None = None, gpus_per_node: int | None = None,
    inter_node_gbps: float | None = None,
) -> Links:
    """Bandwidths from the catalog. ``p2p_bandwidth_gbps`` is bidirectional per GPU, so one
    way is half of it. NVLink/NVSwitch, Infinity Fabric, HCCS and Gaudi RoCE reach
    NVLINK_BUS_EFFICIENCY of it; PCIe cards reach PCIE_BUS_EFFICIENCY of the PCIe link (lower
    generation of card and host, the platform's lanes per GPU); an NVLink bridge joins pairs
    only, larger groups go over PCIe. Inter-node: the
    platform's network per node (``inter_node_gbps`` overrides it) shared by its GPUs."""
    per_node = gpus_per_node or gpus_per_host(gpu, platform)
    host = host_link_gbps(gpu, platform)
    pcie = host / eff.HOST_LINK_EFFICIENCY * eff.PCIE_BUS_EFFICIENCY
    one_way = gpu.p2p_bandwidth_gbps / 2
    if gpu.interconnect.startswith("pcie"):
        intra = pair = pcie
    elif gpu.interconnect.endswith("bridge"):
        pair, intra = one_way * eff.NVLINK_BUS_EFFICIENCY, pcie
    else:
        intra = pair = one_way * eff.NVLINK_BUS_EFFICIENCY
    if inter_node_gbps is not None:
        network = inter_node_gbps
    elif platform is not None:
        network = platform.inter_node_bandwidth_gbps
    else:
        network = DEFAULT_INTER_NODE_GBPS_PER_GPU * per_node
    inter = network / per_node * eff.NETWORK_BUS_EFFICIENCY
    cores = platform.cpu_cores if platform else DEFAULT_CPU_CORES_PER_GPU * per_node
    host_mem = cores * eff.HOST_MEMORY_GBPS_PER_CORE / per_node
    assumed = platform is None and inter_node_gbps is None
    return Links(per_node, intra, pair, inter, host, host_mem, assumed)


# ---------------------------------------------------------------------------------------------
# Communication (bytes one GPU sends per step, and seconds)
# ---------------------------------------------------------------------------------------------
def ring_factor(n: int, kind: str) -> float:
    """Bytes each rank sends per byte of message: all-reduce 2(n-1)/n, all-gather and
    reduce-scatter (n-1)/n (ring algorithms; Patarasuk & Yuan 2009, NCCL)."""
    if n <= 1:
        return 0.0
    return (2 if kind == "all-reduce" else 1) * (n - 1) / n


def tp_collectives_per_layer(cfg: TrainConfig, *, has_backward: bool) -> float:
    """Megatron TP: 2 all-reduces (or reduce-scatter + all-gather with sequence parallel) in the
    forward of a layer, 2 in its backward, 2 more when the forward is recomputed
    (Shoeybi et al. 2019; Korthikanti et al. 2022)."""
    n = 2.0
    if has_backward:
        n += 2 + 2 * recomputed_share(cfg)
    return n


def tp_bytes_per_step(model: ModelSpec, cfg: TrainConfig) -> float:
    """Per GPU and step: GA x (layers on the stage) x collectives x 2(t-1)/t x (mb x s/cp x h x
    2 B); activations travel in 16 bit."""
    if cfg.tp == 1:
        return 0.0
    nb = backward_layers(model, cfg)
    per_layer = (nb * tp_collectives_per_layer(cfg, has_backward=True)
                 + (model.num_layers - nb) * tp_collectives_per_layer(cfg, has_backward=False))
    message = cfg.micro_batch_size * cfg.seq_len / cfg.cp * model.hidden_size * 2
    return cfg.grad_accum * per_layer / cfg.pp * ring_factor(cfg.tp, "all-reduce") * message


def cp_bytes_per_step(model: ModelSpec, cfg: TrainConfig) -> float:
    """Ring attention (context parallel): each layer passes this rank's K and V chunk cp-1 times
    in forward, and K, V plus their gradients in backward (3x in all; Liu et al. 2023, Megatron
    context parallelism). KV width per GPU = kv_heads x head_dim / tp, 16 bit."""
    if cfg.cp == 1:
        return 0.0
    kv_width = max(model.num_kv_heads / cfg.tp, 1) * model.head_dim * 2  # K and V
    chunk = cfg.micro_batch_size * cfg.seq_len / cfg.cp * kv_width * 2
    return cfg.grad_accum * model.num_layers / cfg.pp * 3 * (cfg.cp - 1) * chunk


def pp_bytes_per_step(model: ModelSpec, cfg: TrainConfig, virtual_stages: int) -> float:
    """Pipeline point-to-point: per micro-batch and stage boundary the activations forward and
    their gradients backward (mb x s/cp x h x 2 B / tp with sequence parallelism), with v
    boundaries per stage when interleaved (Narayanan et al. 2021)."""
    if cfg.pp == 1:
        return 0.0
    act = cfg.micro_batch_size * cfg.seq_len / cfg.cp * model.hidden_size * 2 / cfg.tp
    return cfg.grad_accum * virtual_stages * 2 * act


def moe_layers_on_stage(model: ModelSpec, cfg: TrainConfig, layers: float) -> float:
    """MoE layers among ``layers`` of a pp stage: their share of the model's layers."""
    if model.moe is None:
        return 0.0
    return layers * (model.num_layers - model.moe.first_dense_layers) / model.num_layers


def ep_bytes_per_step(model: ModelSpec, cfg: TrainConfig) -> float:
    """Expert-parallel token all-to-alls per GPU and step. Each MoE layer's forward dispatches
    every local token's top_k copies (hidden wide, 16 bit) to the ranks holding their experts
    and combines the expert outputs back: 2 all-to-alls, each sending (ep-1)/ep of
    tokens x top_k x h x 2 B (balanced routing); the backward sends their gradients the same
    way (2 more), and full checkpointing repeats the forward's (2 more). Megatron-Core
    MoEAlltoAllTokenDispatcher (NVIDIA/Megatron-LM @ bed33f89945f,
    megatron/core/transformer/moe/token_dispatcher.py: token_permutation all_to_all over the
    expert model parallel group, token_unpermutation the reverse); GShard (Lepikhin et al.
    2020) and DeepSpeed-MoE (Rajbhandari et al. 2022) the same dispatch/combine pair. Local
    tokens: micro-batch x sequence / cp / tp (sequence parallel: the dispatcher sends each TP
    rank's slice and gathers over TP after the all-to-all)."""
    if cfg.ep == 1 or model.moe is None:
        return 0.0
    nb = backward_layers(model, cfg)
    a2a = (moe_layers_on_stage(model, cfg, nb) * (4 + 2 * recomputed_share(cfg))
           + moe_layers_on_stage(model, cfg, model.num_layers - nb) * 2) / cfg.pp
    tokens = cfg.micro_batch_size * cfg.sequences_per_example * cfg.seq_len / cfg.cp / cfg.tp
    message = tokens * model.moe.experts_per_token * model.hidden_size * 2
    return cfg.grad_accum * a2a * (cfg.ep - 1) / cfg.ep * message


def ep_link_gbps(cfg: TrainConfig, links: Links) -> float:
    """Bandwidth of the EP all-to-all, GB/s per GPU. The ep ranks sit next to the tp ranks
    (Megatron's expert rank order tp-ep-dp-pp), tp x ep GPUs in a row: inside a node the
    scale-up fabric carries it; a group across nodes sends the share (ep - k) / (ep - 1) of
    its bytes to the k = gpus_per_node / tp ranks outside its node over the network, the rest
    over NVLink, both at once: the slower of the two sets the time."""
    g = links.gpus_per_node
    local = max(1, min(cfg.ep, g // cfg.tp))
    if local >= cfg.ep:
        return links.collective_gbps(cfg.ep, False)
    off = (cfg.ep - local) / (cfg.ep - 1)
    inside = links.collective_gbps(local, False)
    seconds_per_gb = max(off / links.inter_node_gbps, (1 - off) / inside)
    return 1.0 / seconds_per_gb


def _grad_bytes(cfg: TrainConfig) -> int:
    """Gradient element size on the wire: fp32 for PEFT adapters under mixed precision (PEFT
    keeps adapters in fp32) and for FSDP reducing in fp32 (the framework's reduce_dtype,
    cfg.fp32_grad_reduce), 16 bit otherwise."""
    if cfg.is_peft and not cfg.pure_16bit:
        return 4
    return 4 if cfg.fsdp and cfg.fp32_grad_reduce else 2


def stored_bytes_per_param(cfg: TrainConfig) -> float:
    """Bytes per weight that ZeRO-3/FSDP all-gather: NF4 for QLoRA, 16 bit otherwise (FSDP
    gathers in param_dtype)."""
    return nf4_bytes_per_param(cfg) if cfg.method == "qlora" else 2.0


def params_per_gpu(model: ModelSpec, cfg: TrainConfig) -> float:
    """All parameters of the most loaded tp x pp shard (before ZeRO/FSDP sharding): the memory
    model's count, so that traffic and memory agree."""
    return params_on_gpu(model, cfg)


def dp_bytes_per_step(model: ModelSpec, cfg: TrainConfig) -> float:
    """Data-parallel traffic per GPU and step (G = trainable gradient bytes of the shard,
    P = its 16-bit weight bytes, d = dp, m = grad_accum):

    DDP: one all-reduce of G per step (accumulation under no_sync): 2(d-1)/d x G.
    ZeRO-1 / Megatron distributed optimizer: reduce-scatter G once per step: (d-1)/d x G
    (Rajbhandari et al. 2020); the all-gather of the updated weights after the step is
    gather_bytes_per_step.
    ZeRO-2: gradients reduced every micro-batch (DeepSpeed reduces in backward of each
    micro-step): m x (d-1)/d x G.
    ZeRO-3 / FSDP: every micro-batch all-gathers all weights of the shard in forward and again
    in backward and reduce-scatters G: m x (d-1)/d x (2 P_all + G), i.e. 1.5x an all-reduce of
    the same bytes for full training (ZeRO paper section 7). Frozen weights are gathered too.
    """
    return sum(_dp_bytes(cfg, d, trainable, every) for d, trainable, every in _dp_groups(
        model, cfg))


def _dp_groups(model: ModelSpec, cfg: TrainConfig):
    """(group size, trainable parameters, a function of all parameters) of each set of this
    GPU's parameters that one data-parallel group reduces and gathers: all of them over dp;
    under expert parallelism the non-expert ones over dp and the rank's routed experts over
    their expert data parallel group of dp x cp / ep ranks (Megatron-Core reduces and gathers
    expert gradients and parameters over the expert data parallel group; torchtitan FSDP over
    dp_shard_in_ep). The parameters are read only by ZeRO-3/FSDP's gathers."""
    if cfg.ep == 1:
        return ((dp_shard_degree(cfg), trainable_on_gpu(model, cfg),
                 lambda: params_per_gpu(model, cfg)),)
    routed_all = local_routed(model, cfg, routed_params(model))
    routed_trainable = local_routed(model, cfg, trainable_routed(model, cfg))
    return ((cfg.dp, trainable_on_gpu(model, cfg) - routed_trainable,
             lambda: params_per_gpu(model, cfg) - routed_all),
            (cfg.dp * cfg.cp // cfg.ep, routed_trainable, lambda: routed_all))


def dp_shard_degree(cfg: TrainConfig) -> int:
    """Data-parallel ranks one gradient reduce-scatter and weight gather spans: the shard group
    under hybrid sharding (cfg.dp_shard), else every data-parallel rank."""
    return cfg.dp_shard or cfg.dp


def replica_bytes_per_step(model: ModelSpec, cfg: TrainConfig) -> float:
    """Hybrid sharding: each micro-batch's gradients, reduce-scattered inside the shard group,
    are all-reduced shard by shard across the r = dp / dp_shard replicas (FSDP HYBRID_SHARD's
    second collective, torch.distributed.fsdp _runtime_utils: reduce_scatter then all_reduce
    over the inter-node process group): m x 2(r-1)/r x G / (dp_shard x cp); 0 without it."""
    if not cfg.dp_shard or cfg.dp == cfg.dp_shard:
        return 0.0
    g = trainable_on_gpu(model, cfg) * _grad_bytes(cfg) / (cfg.dp_shard * cfg.cp)
    return cfg.grad_accum * ring_factor(cfg.dp // cfg.dp_shard, "all-reduce") * g


def replica_seconds(model: ModelSpec, cfg: TrainConfig, links: Links) -> float:
    """replica_bytes_per_step over the replicas' link (across hosts once dp x tp x cp does)."""
    b = replica_bytes_per_step(model, cfg)
    replicas = cfg.dp // dp_shard_degree(cfg)
    return b / (links.collective_gbps(replicas, _spans(cfg, links)["dp_replicate"]) * 1e9) if b \
        else 0.0


def _dp_bytes(cfg: TrainConfig, d: int, trainable: float, every) -> float:
    """dp_bytes_per_step of ``trainable`` parameters (and ``every()`` for the gathers) over a
    data-parallel group of ``d`` ranks."""
    if d <= 1:
        return 0.0
    g = trainable * _grad_bytes(cfg)
    m = cfg.grad_accum
    if cfg.shards_weights:
        p_all = every() * stored_bytes_per_param(cfg)
        return m * ring_factor(d, "all-gather") * (2 * p_all + g)
    if cfg.zero_stage == 2:
        return ring_factor(d, "reduce-scatter") * m * g
    if cfg.zero_stage == 1:
        return ring_factor(d, "reduce-scatter") * g
    return ring_factor(d, "all-reduce") * g


def gather_bytes_per_step(model: ModelSpec, cfg: TrainConfig) -> float:
    """ZeRO-1/2 and the distributed optimizer: each rank updates its shard of the weights and
    all-gathers the updated 16-bit trainable weights once per step, (d-1)/d x P_trainable,
    after the step (overlapped only where the stack overlaps it: efficiency.OVERLAP gather);
    per data-parallel group (_dp_groups)."""
    if cfg.dp == 1 or cfg.shards_weights or cfg.zero_stage not in (1, 2):
        return 0.0
    return sum(ring_factor(d, "all-gather") * trainable * 2
               for d, trainable, _ in _dp_groups(model, cfg))


def _spans(cfg: TrainConfig, links: Links) -> dict[str, bool]:
    """Which groups cross node boundaries, with Megatron's rank order tp (innermost), cp, dp,
    pp (outermost); the expert groups tp, ep, dp, pp."""
    g = links.gpus_per_node
    return {
        "tp": cfg.tp > g,
        "cp": cfg.tp * cfg.cp > g,
        "dp": cfg.tp * cfg.cp * dp_shard_degree(cfg) > g,
        "dp_replicate": cfg.tp * cfg.cp * cfg.dp > g,
        "pp": cfg.num_gpus > g,
        "ep": cfg.tp * cfg.ep > g,  # the expert grid's order tp-ep-dp-pp (ep_link_gbps)
    }


def _nvlink_class(gpu: GpuSpec, group: int) -> bool:
    """True when a group of ``group`` GPUs talks over a scale-up fabric, not PCIe."""
    if gpu.interconnect.startswith("pcie"):
        return False
    return not (gpu.interconnect.endswith("bridge") and group > 2)
