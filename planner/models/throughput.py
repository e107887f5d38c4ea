"""Step time, tokens/s and MFU of one training configuration; decoding throughput (pure).

A training step on one GPU takes

    compute (matmul FLOPs / (peak x vendor matmul fraction x stack utilisation), each linear's
             share at its GEMM size's measured fraction of it (gemm.py: routed experts and
             the dense linears of a small model or micro-batch)
             + attention FLOPs / (peak x the fused kernel's measured fraction, attention.py))
  + pipeline bubble            compute x (p-1)/(v*m)               (Narayanan et al. 2021)
  + exposed communication      sum over tp/cp/dp(+replicas)/pp of max(0, raw - overlap x compute)
  + offload                    PCIe copies (partly overlapped) + CPU optimizer (exposed)
  + memory-bound terms         QLoRA dequantisation, DoRA norms, GPU optimizer step, unfused
                               elementwise ops, LoRA's low-rank matmuls (traffic.py)
  + host kernel launches       what an eager stack's host takes to launch the layers' kernels
                               beyond the GPU work above (host_launch_seconds)
  + per-step overhead          fixed host time per optimizer step (efficiency.STEP_OVERHEAD_S)

Each term is one function below with its formula and source. FLOPs per token follow Kaplan et al.
2020 (6N: 2N forward, 4N backward) and Narayanan et al. 2021, "Efficient Large-Scale Language
Model Training on GPU Clusters" (attention and logits terms); flash attention (Dao et al. 2022)
skips the masked half of causal attention and recomputes the scores in backward (2.5x the forward).
Calibrated efficiency factors live in efficiency.py, the only place with fitted numbers.

MFU definition used here: model FLOPs per token = forward + the backward the method needs
(6N for full training, 4N + 6 x adapter for LoRA/QLoRA/DoRA, with N the active matmul
parameters including the LM head) + 12 x layers x seq x attention width (PaLM appendix B /
Narayanan et al. 2021: attention counted without the causal halving); recomputation is not
counted. MFU = model FLOPs x tokens/s per GPU / dense peak of the precision the matmuls run in
(fp8 peak for fp8, bf16 peak otherwise; FP16 tensor peak for V100/T4; TF32 = bf16/2 for fp32).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from planner.catalog.params import layer_linears
from planner.catalog.request import TrainConfig
from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec, hosts_for
from planner.errors import PlannerError
from planner.models import efficiency as eff
from planner.models import host_launches as hl
from planner.models.attention import attention_rate
from planner.models.flops import (
    FlopsPerToken,
    attention_fwd_flops_per_layer,
    matmul_params,
    matmul_precision,
    peak_tflops,
    recomputed_share,
    training_flops,
)
from planner.models.gemm import linear_time_scale
from planner.models.network import (
    DEFAULT_CPU_CORES_PER_GPU,
    Links,
    _grad_bytes,
    _nvlink_class,
    _spans,
    cp_bytes_per_step,
    dp_bytes_per_step,
    dp_shard_degree,
    ep_bytes_per_step,
    ep_link_gbps,
    gather_bytes_per_step,
    host_span_notes,
    params_per_gpu,
    pp_bytes_per_step,
    replica_seconds,
    resolve_links,
    stored_bytes_per_param,
    tp_bytes_per_step,
)
from planner.models.states import (
    adapted_linears,
    quantized_params,
    stage_layers,
    state_shards,
    trainable_shard,
)
from planner.models.traffic import adapter_seconds, elementwise_seconds

MFU_DEFINITION = (
    "model FLOPs (6N full / 4N + 6 x adapter for LoRA-family, N = active matmul params incl. "
    "LM head, + 12 x layers x seq x attention width, no recompute) x tokens/s per GPU / dense "
    "peak of the matmul precision"
)
# ---------------------------------------------------------------------------------------------
# Offload and memory-bound terms (seconds per step)
# ---------------------------------------------------------------------------------------------
_shards = state_shards  # ranks sharing the optimizer states (ZeRO >= 1 / FSDP): memory.py


def offload_pcie_bytes_per_step(model: ModelSpec, cfg: TrainConfig) -> float:
    """Host link traffic per GPU and step. Optimizer offload (ZeRO-Offload, Ren et al. 2021;
    FSDP CPUOffload): gradients of the trainable shard to the host (fp32 for adapters, 16 bit
    otherwise) and the updated 16-bit weights back. Parameter offload adds the weight shard
    host-to-device for every forward and backward of every micro-batch."""
    if cfg.offload == "none":
        return 0.0
    shard = trainable_shard(model, cfg, _shards(cfg))
    traffic = shard * (_grad_bytes(cfg) + 2)
    if cfg.offload == "optimizer+params":
        weights = params_per_gpu(model, cfg) / (cfg.dp if cfg.shards_weights else 1)
        traffic += cfg.grad_accum * 2 * weights * stored_bytes_per_param(cfg)
    return traffic


def cpu_optimizer_seconds(model: ModelSpec, cfg: TrainConfig, links: Links) -> float:
    """CPU optimizer step of the offloaded shard: CPU_ADAM_BYTES_PER_PARAM of host-memory
    traffic per parameter at the host bandwidth available to one GPU (a roofline; DeepSpeed's
    CPU-Adam is 5-7x faster than PyTorch's CPU Adam, DeepSpeed ZeRO-Offload tutorial)."""
    if cfg.offload == "none":
        return 0.0
    shard = trainable_shard(model, cfg, _shards(cfg))
    return shard * eff.CPU_ADAM_BYTES_PER_PARAM / (links.host_memory_gbps * 1e9)


def dequant_seconds(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig) -> float:
    """QLoRA: every forward, backward (and recomputed forward) dequantises each 4-bit matrix
    the GPU computes with (states.quantized_params; ZeRO-3/FSDP gather first):
    DEQUANT_BYTES_PER_PARAM of HBM traffic per weight per pass, per micro-batch."""
    if cfg.method != "qlora":
        return 0.0
    passes = 2 + recomputed_share(cfg)
    weights = quantized_params(model, cfg)
    traffic = cfg.grad_accum * passes * weights * eff.DEQUANT_BYTES_PER_PARAM
    return traffic / (gpu.memory_bandwidth_gbps * 1e9 * eff.HBM_EFFICIENCY)


def dora_seconds(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig) -> float:
    """DoRA: each forward (and recomputed forward) materialises W + s B A and its column norms
    for every adapted matrix (Liu et al. 2024; PEFT): DORA_BYTES_PER_PARAM of HBM traffic per
    adapted weight, plus the B A product (2 r d_in d_out FLOPs, small, ignored)."""
    if cfg.method != "dora":
        return 0.0
    adapted = sum(
        lin.d_in * lin.d_out * lin.count
        for i in range(model.num_layers) for lin in layer_linears(model, i)
        if lin.group != "router" and ("all-linear" in cfg.lora_targets
                                      or lin.name in cfg.lora_targets)
    ) / (cfg.tp * cfg.pp)
    passes = 1 + recomputed_share(cfg)
    traffic = cfg.grad_accum * passes * adapted * eff.DORA_BYTES_PER_PARAM
    return traffic / (gpu.memory_bandwidth_gbps * 1e9 * eff.HBM_EFFICIENCY)


def optimizer_step_seconds(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig) -> float:
    """GPU optimizer step: a streaming kernel over the trainable shard, OPTIMIZER_STEP_BYTES per
    parameter at HBM_EFFICIENCY of the peak bandwidth. None when offloaded (on the CPU)."""
    if cfg.offload != "none":
        return 0.0
    key = cfg.optimizer.replace("paged-", "")
    if key.startswith("sgd"):
        key = "sgd"
    elif key == "adamw" and cfg.pure_16bit:
        key = "adamw-pure-bf16"
    shard = trainable_shard(model, cfg, _shards(cfg))
    traffic = shard * eff.OPTIMIZER_STEP_BYTES[key]
    return traffic / (gpu.memory_bandwidth_gbps * 1e9 * eff.HBM_EFFICIENCY)


def host_launch_seconds(model: ModelSpec, cfg: TrainConfig, *, micro_batches: int | None = None,
                        backward: bool = True) -> float:
    """Host time to launch one step's kernels where the stack runs them eager (``micro_batches``
    of them, default the step's grad_accum; ``backward`` False: a forward-only pass, the
    forward's kernels once): micro-batches x (the stage's layers x launches per layer, plus
    host_launches.HOST_LAUNCHES_PER_MICRO_BATCH outside the layers in a training step) x
    HOST_S_PER_KERNEL. Per layer: HOST_KERNELS_PER_LAYER of the model's norm family; full
    checkpointing adds HOST_CHECKPOINT_PER_FORWARD_LAUNCH x the forward's; PEFT adds
    HOST_LAUNCHES_PER_ADAPTER per adapted matrix (its forward kernels alone in a forward-only
    pass); QLoRA a dequantisation per frozen 4-bit matrix and pass. Fused kernels launched from
    Python one by one (Liger's Triton, cfg.python_launched_fusion) take the eager time, as
    measured; 0 where the code is compiled or its fusion launched otherwise (torch.compile,
    XLA, TransformerEngine: not modelled) and for MoE layers (per-expert launches depend on the
    implementation; not modelled)."""
    fused_elsewhere = cfg.fused_elementwise and not cfg.python_launched_fusion
    if cfg.compiled or fused_elsewhere or model.moe is not None:
        return 0.0
    family = hl.HOST_KERNELS_PER_LAYER["layernorm" if model.norm == "layernorm" else "rmsnorm"]
    fwd, bwd = family["peft"] if cfg.is_peft else family["full"]
    ckpt = recomputed_share(cfg) if backward else 0.0
    adapters = 0.0
    if cfg.is_peft:
        adapted = sum(cnt for _, _, cnt in adapted_linears(model, cfg))
        adapters = adapted * (hl.HOST_LAUNCHES_PER_ADAPTER if backward
                              else hl.HOST_KERNELS_PER_ADAPTER[0])
    recompute = hl.HOST_CHECKPOINT_PER_FORWARD_LAUNCH * fwd * ckpt
    if cfg.method == "qlora":  # one dequantisation kernel per 4-bit matrix and pass
        linears = sum(lin.count for lin in layer_linears(model, 0) if lin.group != "router")
        fwd, bwd = fwd + linears, bwd + linears
        recompute += linears * ckpt
    kernels = (fwd + bwd + recompute if backward else fwd) + adapters
    micro = cfg.grad_accum if micro_batches is None else micro_batches
    outside = hl.HOST_LAUNCHES_PER_MICRO_BATCH if backward else 0.0
    return micro * (stage_layers(model, cfg) * kernels + outside) * hl.HOST_S_PER_KERNEL


def pipeline_bubble_fraction(pp: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Idle share of a 1F1B pipeline relative to its busy time: (p-1)/(v m) (Narayanan et al.
    2021, interleaved schedule; v = 1 gives the GPipe/1F1B (p-1)/m)."""
    if pp <= 1:
        return 0.0
    return (pp - 1) / (virtual_stages * micro_batches)


def exposed(raw: float, overlap: float, compute: float) -> float:
    """Communication left after hiding behind ``overlap`` x compute: max(0, raw - ov x compute)."""
    return max(0.0, raw - overlap * compute)


# ---------------------------------------------------------------------------------------------
# The estimate
# ---------------------------------------------------------------------------------------------
LIMITS = ("compute", "communication", "memory bandwidth", "offload", "host kernel launches",
          "per-step overhead")
# A step whose model FLOPs use less than this share of the dense peak is flagged (issue 18: "a
# plan whose MFU is below a stated floor (e.g. 10 %) is flagged"): the GPUs mostly wait on
# what the note names. A threshold of the output, not a model constant.
MFU_FLOOR = 0.10


def low_mfu_note(mfu: float, limited_by: str, terms: dict[str, float]) -> str | None:
    """The flag of a step below MFU_FLOOR, naming the largest term that is not compute and
    its share of the step; None at or above the floor."""
    if mfu >= MFU_FLOOR:
        return None
    step = sum(terms.values())
    idle = {k: v for k, v in terms.items() if k != "compute"}
    worst = max(idle, key=idle.get) if idle else "compute"
    share = terms.get(worst, 0.0) / step if step else 0.0
    return (f"MFU {mfu:.1%} is below the {MFU_FLOOR:.0%} floor: limited by {limited_by}; "
            f"{worst.replace('_', ' ')} is {terms.get(worst, 0.0):.3g} s of the "
            f"{step:.3g} s step ({share:.0%})")


@dataclass(frozen=True)
class ThroughputEstimate:
    """One configuration's step time and rates. ``terms`` are seconds per optimizer step as they
    add up to ``step_time_s`` (communication after overlap); ``raw`` holds the unhidden
    communication times and the per-category totals that decide ``limited_by``."""

    step_time_s: float
    tokens_per_step: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    achieved_tflops_per_gpu: float  # executed FLOPs incl. recomputation (hardware FLOPs)
    model_tflops_per_gpu: float  # MFU numerator (see MFU_DEFINITION)
    mfu: float
    limited_by: str
    terms: dict[str, float]
    raw: dict[str, float]
    stack: str
    precision: str
    efficiency: float  # matmul fraction x stack utilisation used for compute
    num_gpus: int
    nodes: int
    mfu_definition: str = MFU_DEFINITION
    notes: tuple[str, ...] = field(default_factory=tuple)
    low_mfu: str | None = None  # low_mfu_note's flag (also among the notes); None at the floor

    def summary(self) -> dict[str, float | str]:
        """The figures ``planner check --json`` reports under "throughput"."""
        return {
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "step_time_s": self.step_time_s,
            "mfu": self.mfu,
            "achieved_tflops_per_gpu": self.achieved_tflops_per_gpu,
            "limited_by": self.limited_by,
            "stack": self.stack,
            "precision": self.precision,
        }


def compute_seconds(
    flops: FlopsPerToken, gpu: GpuSpec, cfg: TrainConfig, *, util: float, tokens_per_gpu: float,
    linear_scale: float = 1.0,
) -> tuple[float, float]:
    """(seconds, efficiency): matmul-precision work at peak(precision) x MAMF fraction x stack
    utilisation ``util``, its time x ``linear_scale`` (gemm.linear_time_scale: small GEMMs,
    routed experts' and dense); adapters (16 bit) at the 16-bit peak likewise; the attention
    core at its fused kernel's measured rate (attention.attention_rate) x
    ATTENTION_UTILISATION_SHARE of ``util`` (efficiency.attention_utilisation)."""
    prec = matmul_precision(gpu, cfg.effective_precision(gpu))
    sixteen = "fp32" if prec == "fp32" else "bf16"
    t = tokens_per_gpu * (
        flops.linear * linear_scale / matmul_rate(gpu, prec, util)
        + flops.adapter / matmul_rate(gpu, sixteen, util)
        + flops.attention / (attention_rate(gpu, cfg) * eff.attention_utilisation(util))
    )
    return t, eff.matmul_fraction(gpu, prec) * util


def matmul_rate(gpu: GpuSpec, precision: str, util: float) -> float:
    """Achievable matmul FLOP/s on ``gpu`` in ``precision`` at stack utilisation ``util``:
    peak x MAMF fraction x utilisation (the one home of this product; the solver's step-time
    bound reads it too)."""
    return peak_tflops(gpu, precision) * 1e12 * (eff.matmul_fraction(gpu, precision) * util)


def fp8_over_16bit(gpu: GpuSpec, precision: str) -> float | None:
    """The GPU's achievable fp8 / 16-bit matmul rate (matmul_rate) where the matmuls run in
    fp8, which gemm.linear_time_scale needs to time fp8 routed experts; None otherwise."""
    return matmul_rate(gpu, "fp8", 1.0) / matmul_rate(gpu, "bf16", 1.0) \
        if precision == "fp8" else None


def matmul_fraction_rate(gpu: GpuSpec, cfg: TrainConfig, stack: str) -> float:
    """Achievable FLOP/s of 16-bit (or the config's matmul precision) work on ``gpu`` under
    ``stack``: peak x MAMF fraction x stack utilisation."""
    prec = matmul_precision(gpu, cfg.effective_precision(gpu))
    return matmul_rate(gpu, prec, eff.stack_utilisation(stack, prec))


def forward_flops_per_token(model: ModelSpec, seq_len: int, *, causal_skip: bool = True
                            ) -> float:
    """One forward pass per token: 2 N (matmuls of every layer and the head) + attention over
    ``seq_len`` (Kaplan et al. 2020; Narayanan et al. 2021). Used for inference passes: RL
    log-probs, DPO's reference, prefill."""
    return 2 * matmul_params(model) + model.num_layers * attention_fwd_flops_per_layer(
        model, seq_len, causal_skip=causal_skip)


def forward_time_flops_per_token(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *,
                                 micro_batch: int | None = None) -> float:
    """forward_flops_per_token at ``cfg.seq_len`` with the matmul part weighted by
    gemm.linear_time_scale (micro-batches of ``micro_batch`` sequences, else the config's; fp8
    routed experts on ``gpu`` as in training): the FLOPs that take a forward pass's time at the
    matmul rate."""
    prec = matmul_precision(gpu, cfg.effective_precision(gpu))
    return forward_flops_per_token(model, cfg.seq_len) + 2 * matmul_params(model) * (
        linear_time_scale(model, cfg, micro_batch,
                          fp8_over_16bit=fp8_over_16bit(gpu, prec)) - 1.0)


def reference_forward_flops(model: ModelSpec, cfg: TrainConfig) -> float:
    """DPO: the frozen reference's forward pass over the same tokens, unless its log-probs are
    precomputed (Rafailov et al. 2023, TRL)."""
    if cfg.workload != "dpo" or not cfg.reference or cfg.precompute_ref:
        return 0.0
    return forward_flops_per_token(model, cfg.seq_len, causal_skip=cfg.flash_attention)


def _serial_terms(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, stack: str, links: Links,
                  tokens_per_gpu: float, step_overhead_s: float | None) -> dict[str, float]:
    """The step's terms that no compute hides: CPU optimizer, memory-bound kernels and the
    per-step overhead (the stack's measured one, efficiency.MEASURED_STEP_OVERHEAD_S, else
    ``step_overhead_s``, None: the fitted efficiency.STEP_OVERHEAD_S)."""
    return {
        "cpu_optimizer": cpu_optimizer_seconds(model, cfg, links),
        "dequantize": dequant_seconds(model, gpu, cfg),
        "dora_norms": dora_seconds(model, gpu, cfg),
        "elementwise": elementwise_seconds(model, gpu, cfg, tokens=tokens_per_gpu),
        "adapters": adapter_seconds(model, gpu, cfg, tokens=tokens_per_gpu),
        "optimizer_step": optimizer_step_seconds(model, gpu, cfg),
        "step_overhead": eff.step_overhead(stack, step_overhead_s),
    }


def _categories(terms: dict[str, float], raw: dict[str, float],
                comm_kinds: tuple[str, ...]) -> dict[str, float]:
    """Seconds per LIMITS category (communication before overlap), which decide limited_by."""
    return {
        "compute": terms["compute"] + terms["pipeline_bubble"],
        "communication": sum(raw[f"{k}_comm"] for k in comm_kinds) + raw["gather_comm"],
        "memory bandwidth": terms["dequantize"] + terms["dora_norms"] + terms["optimizer_step"]
        + terms["elementwise"] + terms["adapters"],
        "offload": raw["offload_pcie"] + terms["cpu_optimizer"],
        # the host's launches where they outlast the GPU's work (host_launch_seconds)
        "host kernel launches": raw["host_launches"] if terms["host_launches"] else 0.0,
        # host-side time that no GPU work hides (efficiency.STEP_OVERHEAD_S)
        "per-step overhead": terms["step_overhead"],
    }


def _assumption_notes(cfg: TrainConfig, links: Links, gpu: GpuSpec, *, prec: str) -> list[str]:
    """The notes on what the estimate assumed: host spans (with the default network where no
    platform or offer states one), a default CPU optimizer where no platform is given, and fp8
    run in 16 bit on a GPU without fp8 matmuls."""
    notes: list[str] = host_span_notes(cfg, links)  # says so where the network is assumed
    if links.network_assumed and cfg.offload != "none":
        notes.append(f"no platform: CPU optimizer assumed {DEFAULT_CPU_CORES_PER_GPU} host cores "
                     "per GPU")
    if cfg.precision == "fp8" and prec != "fp8":  # fp16 and bf16 share the 16-bit rate
        notes.append(f"{gpu.id} has no fp8 matmuls: they run in 16 bit")
    return notes


_COLLECTIVES = ("tp", "cp", "dp", "pp")


def _host_launch_term(model: ModelSpec, cfg: TrainConfig, terms: dict[str, float],
                      raw: dict[str, float]) -> list[str]:
    """Sets terms and raw["host_launches"]: the host launches eager kernels while the GPU runs
    them, so the step holds the part of the launches its work does not cover (the CPU
    optimizer and the per-step overhead are apart from both); the note where that binds."""
    raw["host_launches"] = host_launch_seconds(model, cfg)
    gpu_work = sum(v for k, v in terms.items() if k not in ("cpu_optimizer", "step_overhead"))
    terms["host_launches"] = max(0.0, raw["host_launches"] - gpu_work)
    if not terms["host_launches"]:
        return []
    return [f"the host's eager kernel launches take {raw['host_launches']:.3g} s a step against "
            f"{gpu_work:.3g} s of GPU work: a larger micro-batch or torch.compile shortens the "
            "step (Liger's kernels, launched from Python, do not: measured as slow per layer)"]


def _comm_seconds(model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *, links: Links, stack: str,
                  compute: float, virtual_stages: int) -> tuple[dict[str, float], dict[str, float]]:
    """(exposed, raw): seconds per step of each collective and of the offload PCIe traffic,
    exposed past what overlaps ``compute`` under ``stack``, and before any overlap."""
    spans = _spans(cfg, links)
    ov = dict(eff.OVERLAP[stack])
    if not _nvlink_class(gpu, cfg.tp):
        ov["tp"] = 0.0  # comm-GEMM overlap (TE userbuffers) needs NVLink-class peer links
    comm_bytes = {
        "tp": tp_bytes_per_step(model, cfg),
        "cp": cp_bytes_per_step(model, cfg),
        "dp": dp_bytes_per_step(model, cfg),
        "pp": pp_bytes_per_step(model, cfg, virtual_stages),
    }
    group = {"tp": cfg.tp, "cp": cfg.cp, "dp": dp_shard_degree(cfg), "pp": 2}
    raw = {
        f"{k}_comm": b / (links.collective_gbps(group[k], spans[k]) * 1e9) if b else 0.0
        for k, b in comm_bytes.items()
    }
    raw["dp_comm"] += replica_seconds(model, cfg, links)  # hybrid sharding: across replicas
    if cfg.ep > 1:  # only then: every other estimate keeps its terms as they were
        comm_bytes["ep"] = ep_bytes_per_step(model, cfg)
        raw["ep_comm"] = comm_bytes["ep"] / (ep_link_gbps(cfg, links) * 1e9)
    raw["offload_pcie"] = offload_pcie_bytes_per_step(model, cfg) / (links.host_link_gbps * 1e9)
    raw["gather_comm"] = gather_bytes_per_step(model, cfg) / (
        links.collective_gbps(cfg.dp, spans["dp"]) * 1e9)
    terms = {f"{k}_comm": exposed(raw[f"{k}_comm"], ov[k], compute) for k in comm_bytes}
    # the reductions hid behind the backward; what is left of it hides the gather
    left = max(0.0, ov["dp"] * compute - raw["dp_comm"])
    terms["dp_comm"] += exposed(raw["gather_comm"], ov["gather"], left / ov["dp"]
                                if ov["dp"] else 0.0)
    terms["offload_pcie"] = exposed(raw["offload_pcie"], ov["pcie"], compute)
    return terms, raw


def estimate_throughput(
    model: ModelSpec, gpu: GpuSpec, cfg: TrainConfig, *, platform: PlatformSpec | None = None,
    stack: str = "hf", gpus_per_node: int | None = None, inter_node_gbps: float | None = None,
    virtual_stages: int = 1, utilisation: float | None = None,
    step_overhead_s: float | None = None,
) -> ThroughputEstimate:
    """Step time and tokens/s of ``cfg`` on ``cfg.num_gpus`` GPUs of type ``gpu``.

    ``platform`` (or ``gpus_per_node`` / ``inter_node_gbps``, GB/s per node) sets the node size
    and links; ``stack`` picks the calibrated efficiency (efficiency.STACKS); ``virtual_stages``
    is the interleaved-pipeline depth v; ``utilisation`` replaces the stack's calibrated factor
    and ``step_overhead_s`` the fitted per-step overhead (both used to calibrate them; a stack
    with a measured one, efficiency.MEASURED_STEP_OVERHEAD_S, keeps it). A step is
    ``global_batch_size`` sequences of ``seq_len`` tokens.
    """
    if stack not in eff.STACKS:
        raise PlannerError(f"unknown stack {stack!r}; known: {', '.join(eff.STACKS)}")
    links = resolve_links(gpu, platform=platform, gpus_per_node=gpus_per_node,
                          inter_node_gbps=inter_node_gbps)
    prec = matmul_precision(gpu, cfg.effective_precision(gpu))
    notes = _assumption_notes(cfg, links, gpu, prec=prec)
    flops = training_flops(model, cfg)
    ref = reference_forward_flops(model, cfg)
    if ref:
        flops = dataclasses.replace(flops, linear_fwd=flops.linear_fwd + ref)
    # rm/dpo: every example is a (chosen, rejected) pair of sequences.
    tokens_step = cfg.global_batch_size * cfg.sequences_per_example * cfg.seq_len
    per_gpu_tokens = tokens_step / cfg.num_gpus
    util = eff.stack_utilisation(stack, prec) if utilisation is None else utilisation
    compute, e_lin = compute_seconds(flops, gpu, cfg, util=util, tokens_per_gpu=per_gpu_tokens,
                                     linear_scale=linear_time_scale(
                                         model, cfg, fp8_over_16bit=fp8_over_16bit(gpu, prec)))
    bubble = compute * pipeline_bubble_fraction(cfg.pp, cfg.grad_accum, virtual_stages)
    comm, raw = _comm_seconds(model, gpu, cfg, links=links, stack=stack, compute=compute,
                              virtual_stages=virtual_stages)
    terms = {"compute": compute, "pipeline_bubble": bubble, **comm}
    terms.update(_serial_terms(model, gpu, cfg, stack, links, per_gpu_tokens, step_overhead_s))
    notes += _host_launch_term(model, cfg, terms, raw)
    step = sum(terms.values())
    category = _categories(terms, raw, _COLLECTIVES + (("ep",) if cfg.ep > 1 else ()))
    raw.update({f"total_{k.replace(' ', '_').replace('-', '_')}": v
                for k, v in category.items()})
    tps = tokens_step / step
    per_gpu = tps / cfg.num_gpus
    mfu = flops.model * per_gpu / (peak_tflops(gpu, prec) * 1e12)
    limited_by = max(LIMITS, key=lambda k: category[k])
    flag = low_mfu_note(mfu, limited_by, terms)
    notes += [flag] if flag else []
    return ThroughputEstimate(
        step_time_s=step, tokens_per_step=tokens_step, tokens_per_s=tps,
        tokens_per_s_per_gpu=per_gpu, achieved_tflops_per_gpu=flops.total * per_gpu / 1e12,
        model_tflops_per_gpu=flops.model * per_gpu / 1e12, mfu=mfu, limited_by=limited_by,
        terms=terms, raw=raw, stack=stack, precision=prec, efficiency=e_lin,
        num_gpus=cfg.num_gpus, nodes=hosts_for(cfg.num_gpus, links.gpus_per_node),
        notes=tuple(notes), low_mfu=flag,
    )
