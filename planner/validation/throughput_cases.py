"""One throughput case as the models' inputs: its efficiency stack (``stack_of``), family,
platform, and its training or decode prediction in the case's own metric
(``training_estimate``), for validate_throughput."""

from __future__ import annotations

from typing import Any

from planner.catalog.frameworks import efficiency_of
from planner.catalog.load import Catalog, load_catalog
from planner.catalog.request import PAIRWISE_WORKLOADS, RL_WORKLOADS, TrainConfig
from planner.catalog.slugs import inference_engine
from planner.catalog.specs import GpuSpec, PlatformSpec
from planner.errors import PlannerError
from planner.models.cost import define_job, rent_cost
from planner.models.decode import estimate_decode
from planner.models.throughput import ThroughputEstimate, estimate_throughput
from planner.validation.case_inputs import case_config, case_profile, run_profile

ROLE_WORKLOADS = RL_WORKLOADS + PAIRWISE_WORKLOADS  # workloads.py roles: rl_case mapping
PEFT_WORKLOADS = ("lora", "qlora", "dora")

# A decode case names its serving engine as its framework, in any spelling catalog.engines
# knows (TGI, text-generation-inference, trtllm, vLLM v0.6, ...), and takes that engine's decode
# stack (efficiency.DECODE_STACKS; SGLang and LMDeploy, with no case, vLLM's, as the table
# says); a decode case that names no engine is timed as vLLM. Training frameworks take their
# efficiency from their profile (catalog/frameworks).
DEFAULT_DECODE_STACK = "vllm"
# The stack of a training framework whose profile (and bases) state no measured efficiency.
DEFAULT_STACK = "hf"

# Host platform by GPU form factor, for node size and links (catalog/platforms). GB200 NVL72:
# the NVLink domain is the 72-GPU rack, so its node size is 72 (gb200-nvl72-tray notes).
PLATFORM_BY_FORM_FACTOR = {
    "sxm": "hgx-8gpu-sxm", "superchip": "gb200-nvl72-tray", "oam": "oam-8gpu-server",
    "pcie-datacenter": "pcie-server-8gpu", "workstation": "workstation-4gpu-trpro-wrx90",
    "consumer": "workstation-4gpu-trpro-wrx90",
}
NVLINK_DOMAIN_GPUS = {"superchip": 72}


def stack_of(case: dict[str, Any], catalog: Catalog | None = None) -> str:
    """The case's efficiency stack: a serving stack for decode cases, else the efficiency its
    framework's profile states or inherits (DEFAULT_STACK where none does, and for a framework
    without a profile, which training cases report as not modelled). A run on one of the
    profile's backends (a backend its location names, e.g. LLaMA-Factory's Unsloth rows) takes
    that backend's."""
    engine = inference_engine(str(case.get("framework")))  # any spelling (catalog.engines)
    if case.get("workload") == "decode" or engine is not None:
        return engine.stack if engine is not None else DEFAULT_DECODE_STACK
    catalog = catalog or load_catalog()
    try:
        profile = case_profile(case, catalog)
    except PlannerError:
        return DEFAULT_STACK
    return efficiency_of(run_profile(case, profile, catalog))[0] or DEFAULT_STACK


def family_of(workload: str) -> str:
    """The case family of a workload: decode, rl or training."""
    if workload == "decode":
        return "decode"
    return "rl" if workload in ROLE_WORKLOADS else "training"


def _grad_accum(case: dict[str, Any], dp: int) -> int:
    extra = case.get("extra") or {}
    if extra.get("grad_accum"):
        return int(extra["grad_accum"])
    mb, gbs = case.get("micro_batch_size") or 1, case.get("global_batch_size")
    if gbs and gbs % (mb * dp) == 0:
        return gbs // (mb * dp)
    if gbs:
        raise PlannerError(f"global batch {gbs} is not a multiple of micro-batch {mb} x dp {dp}")
    return 1


def memory_style_case(case: dict[str, Any]) -> dict[str, Any]:
    """The throughput case in the memory schema that validate.case_config reads."""
    out = dict(case)
    extra = dict(case.get("extra") or {})
    workload = case.get("workload")
    if workload in PEFT_WORKLOADS:
        out["workload"], out["method"] = "sft", workload
    out.setdefault("method", None)
    out["method"] = out.get("method") or "full"
    out["lora_rank"] = case.get("lora_rank") or extra.get("lora_rank")
    opt = str(extra.get("optimizer", ""))
    if "paged-adamw-8bit" in opt:
        out["optimizer"] = "paged-adamw-8bit"
    if "in backward" in opt:
        extra["optimizer_in_bwd"] = True
    if extra.get("fsdp_cpu_offload"):
        out["offload"] = "optimizer+params"
    n = case["num_gpus"]
    dp = n // ((case.get("tp") or 1) * (case.get("pp") or 1) * (case.get("cp") or 1))
    extra["grad_accum"] = _grad_accum(case, dp)
    out["extra"] = extra
    return out


def case_platform(
    gpu: GpuSpec, catalog: Catalog, case: dict[str, Any] | None = None
) -> tuple[PlatformSpec | None, int | None, float | None]:
    """(platform, node size, network per node): an NVLink domain larger than the platform
    (GB200 NVL72) is one node whose network is the sum of its hosts' (per-GPU share kept); a
    case's extra.gpus_per_node (its job on nodes of fewer GPUs than the platform holds) sets
    the node size, each GPU keeping its share of the platform's network."""
    pid = PLATFORM_BY_FORM_FACTOR.get(gpu.form_factor)
    platform = catalog.platforms.get(pid) if pid else None
    domain = ((case or {}).get("extra") or {}).get("gpus_per_node") or \
        NVLINK_DOMAIN_GPUS.get(gpu.form_factor)
    if platform is None or domain is None:
        return platform, domain, None
    return platform, domain, platform.inter_node_bandwidth_gbps * domain / platform.max_gpus


def training_estimate(
    case: dict[str, Any], catalog: Catalog, **overrides: float
) -> tuple[ThroughputEstimate, TrainConfig, GpuSpec]:
    """The throughput estimate of one training case (PlannerError when not expressible);
    ``overrides`` (utilisation, step_overhead_s) go to estimate_throughput."""
    for need in ("gpu", "model", "seq_len"):
        if not case.get(need):
            raise PlannerError(f"case has no {need}")
    mem_case = memory_style_case(case)
    pp = mem_case.get("pp") or 1
    # Megatron splits layers unevenly when pp does not divide them (first/last stages take
    # fewer, e.g. 126 layers over 8 stages in the MLPerf Llama 3.1 405B configs); TrainConfig
    # validation asks for equal stages, so the layout is checked at pp = 1 and pp set after.
    cfg, resolved = case_config({**mem_case, "pp": 1}, catalog)
    cfg = cfg.model_copy(update={"pp": pp})
    gpu = catalog.gpu(case["gpu"])
    platform, per_node, network = case_platform(gpu, catalog, case)
    vp = int((case.get("extra") or {}).get("vp") or 1)
    est = estimate_throughput(resolved.spec, gpu, cfg, platform=platform,
                              stack=stack_of(case, catalog), gpus_per_node=per_node,
                              inter_node_gbps=network, virtual_stages=vp, **overrides)
    return est, cfg, gpu


def training_metric(case: dict[str, Any], est: ThroughputEstimate, gpu: GpuSpec) -> float:
    """A training estimate in the case's own metric (tokens/s or TFLOP/s per GPU, MFU, step
    time, time to train, cost); PlannerError for a metric not modelled."""
    metric = case["metric"]
    if metric == "tokens_per_sec_per_gpu":
        return est.tokens_per_s_per_gpu
    if metric == "tflops_per_gpu":
        return est.achieved_tflops_per_gpu
    if metric == "mfu":
        return est.mfu
    if metric == "step_time_s":
        return est.step_time_s
    total = (case.get("extra") or {}).get("total_tokens")
    if not total:
        raise PlannerError(f"{metric} needs the total workload (extra.total_tokens)")
    job = define_job(tokens=float(total))
    if metric == "time_to_train_minutes":
        return job.tokens / est.tokens_per_s / 60
    if metric == "cost_usd":
        cost = rent_cost(gpu, case["num_gpus"], hours=job.tokens / est.tokens_per_s / 3600,
                         job=job)
        if cost.usd is None:
            raise PlannerError(cost.reason or "no price")
        return cost.usd
    raise PlannerError(f"unknown metric {metric!r}")


def decode_value(
    case: dict[str, Any], catalog: Catalog, efficiency: float | None = None
) -> tuple[float, str]:
    """A decode case's output tokens/s per GPU and its limiter (decode.estimate_decode;
    ``efficiency`` overrides the stack's share of the roofline)."""
    rl = case.get("rl") or {}
    if not (rl.get("prompt_len") and rl.get("response_len")):
        raise PlannerError("decode case without input/output lengths")
    if case["metric"] != "tokens_per_sec_per_gpu":
        raise PlannerError(f"decode metric {case['metric']!r} is not modelled")
    resolved = catalog.model(case["model"])
    gpu = catalog.gpu(case["gpu"])
    text = f"{case.get('id')} {case.get('location', '')}".lower()
    bits = 4 if ("gptq" in text or "awq" in text or resolved.weight_bits == 4) else None
    if "fp4" in text:
        raise PlannerError("fp4 weights are not modelled")
    tp = rl.get("rollout_tp") or case.get("tp") or 1
    est = estimate_decode(
        resolved.spec, gpu, prompt_len=int(rl["prompt_len"]),
        response_len=int(rl["response_len"]), tp=int(tp), batch=case.get("micro_batch_size"),
        precision=case.get("precision") or "bf16", weight_bits=bits, stack=stack_of(case, catalog),
        efficiency=efficiency,
    )
    return est.output_tokens_per_s / case["num_gpus"], est.limited_by
