"""Predict the throughput validation cases (``throughput_cases.yaml``) and summarise the error.

Each case is predicted in its own ``metric``: tokens/s per GPU, TFLOP/s per GPU, MFU, time to
train, step time or cost. Training cases become a TrainConfig through case_inputs.case_config (the
memory cases' translation, with its framework defaults); decode cases go through the decode
model; PPO/GRPO cases through rltime.estimate_rl_step (rl_inputs maps them, with
case_inputs.rl_case); rm/dpo time cases have no verified total workload and return None. Error
is (predicted - value) / value (../shared/validation/README.md, "How to count error");
summaries give median and p90 |error| per workload and per stack, decode and RL apart.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from planner.catalog.frameworks import Profile, default_engine, plan_shardings
from planner.catalog.load import Catalog
from planner.catalog.request import TrainConfig
from planner.catalog.specs import GpuSpec
from planner.errors import PlannerError
from planner.models.rltime import estimate_rl_step
from planner.models.throughput import estimate_throughput
from planner.models.workloads import estimate_memory
from planner.validation.case_inputs import case_profile, rl_case
from planner.validation.throughput_cases import (
    case_platform,
    decode_value,
    family_of,
    memory_style_case,
    stack_of,
    training_estimate,
    training_metric,
)
from planner.validation.validate import case_gpu, load_cases, percentile


@dataclass(frozen=True)
class ThroughputResult:
    """One throughput case: the measured value and the planner's prediction."""
    id: str
    metric: str
    workload: str
    framework: str
    stack: str
    precision: str
    family: str  # training | decode | rl
    usable: bool
    measured: float
    predicted: float | None
    limited_by: str | None
    reason: str | None
    framework_version: str | None = None  # the release or commit the measurement ran

    @property
    def rel_err(self) -> float | None:
        """(predicted - measured) / measured; None without both."""
        if self.predicted is None or not self.measured:
            return None
        return (self.predicted - self.measured) / self.measured


def predict_throughput_case(case: dict[str, Any], catalog: Catalog) -> ThroughputResult:
    """Predict ``case`` in its own metric; predicted None with a reason when not modelled."""
    case = case_gpu(case, catalog)
    workload = str(case.get("workload"))
    family = family_of(workload)
    base = {
        "id": str(case.get("id")), "metric": str(case.get("metric")), "workload": workload,
        "framework": str(case.get("framework")), "stack": stack_of(case, catalog),
        "precision": str(case.get("precision")), "family": family,
        "usable": bool(case.get("usable_for_accuracy")), "measured": float(case["value"]),
        "framework_version": case.get("framework_version"),
    }
    if family == "rl":
        try:
            value, limit = _rl_value(case, catalog)
        except PlannerError as exc:
            return ThroughputResult(**base, predicted=None, limited_by=None, reason=str(exc))
        return ThroughputResult(**base, predicted=value, limited_by=limit, reason=None)
    try:
        if not case.get("model"):
            raise PlannerError("no public checkpoint: architecture unknown")
        if family == "decode":
            value, limit = decode_value(case, catalog)
        else:
            if case.get("tp") is None or case.get("pp") is None:
                raise PlannerError("parallel layout (tp/pp) not stated")
            est, _cfg, gpu = training_estimate(case, catalog)
            value, limit = training_metric(case, est, gpu), est.limited_by
    except PlannerError as exc:
        return ThroughputResult(**base, predicted=None, limited_by=None, reason=str(exc))
    return ThroughputResult(**base, predicted=value, limited_by=limit, reason=None)


# ---------------------------------------------------------------------------------------------
# PPO / GRPO iterations and preference training
# ---------------------------------------------------------------------------------------------
# A case that gives only the mean prompt + response length per sequence (extra.avg_gen_seq_len,
# as NeMo-RL's performance table does) and not the split: its prompts are taken as 200 tokens
# (assumed, not read from a source: OpenMathInstruct-2 problems with a math prompt template are
# short) and the rest of the mean as response. Only the prefill/decode split of generation
# depends on it.
PROMPT_TOKENS_OF_A_MEAN_ONLY_CASE = 200
# What a framework's RL runs do with the case's fields is its profile's (catalog/frameworks):
# the engine's memory share (rollout_memory_utilization), where an off-policy run generates
# (off_policy_placement), whether its train batch counts the prompts of one iteration
# (batch_counts_prompts) and its rollout engine (rollout_engines; rltime reads the engine).
PROMPT_KEYS = ("train_batch_size_prompts", "batch_size_prompts", "train_batch_size",
               "rollouts_per_step")


def _logged_means(case: dict[str, Any]) -> bool:
    """The case logs its mean prompt and response lengths (extra.avg_prompt_len and
    extra.avg_response_len) besides the configured limits."""
    extra = case.get("extra") or {}
    return bool(extra.get("avg_prompt_len") and extra.get("avg_response_len"))


def _max_response_len(case: dict[str, Any], cfg: TrainConfig) -> int | None:
    """The longest response of an iteration when cfg.response_len is the mean: the case's
    extra.max_seq_len less the prompt, or its configured rl.response_len beside logged means."""
    extra = case.get("extra") or {}
    if extra.get("max_seq_len"):
        return int(extra["max_seq_len"]) - cfg.prompt_len
    if _logged_means(case):
        return int((case.get("rl") or {})["response_len"])
    return None


def _rollout_fields(case: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """The case's rl block with its lengths (the logged means where it has them, the prompt /
    response split of a mean-only case), engine TP and the profile's engine memory share."""
    extra = case.get("extra") or {}
    rl = dict(case.get("rl") or {})
    if not rl.get("prompt_len") and extra.get("avg_gen_seq_len"):
        total = int(extra["avg_gen_seq_len"])
        rl["prompt_len"] = PROMPT_TOKENS_OF_A_MEAN_ONLY_CASE
        rl["response_len"] = total - PROMPT_TOKENS_OF_A_MEAN_ONLY_CASE
    if not rl.get("prompt_len"):
        raise PlannerError("rollout lengths unknown")
    if _logged_means(case):
        # the logged mean lengths; the configured response length is the limit the longest
        # responses run up to (the generation tail, _max_response_len)
        rl["prompt_len"] = round(float(extra["avg_prompt_len"]))
        rl["response_len"] = round(float(extra["avg_response_len"]))
    rl["rollout_tp"] = rl.get("rollout_tp") or extra.get("generation_tp")
    if rl.get("gpu_memory_utilization") is None:
        # the engine holds the KV cache its framework's config leaves it, not one sized to
        # the share (None where the profile states no default)
        rl["gpu_memory_utilization"] = profile.value("rollout_memory_utilization")
    return rl


def _iteration_extra(case: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """extra with the prompts of one iteration where the profile says its train batch counts
    them (batch_counts_prompts: global batch of sequences / rollout n)."""
    extra = dict(case.get("extra") or {})
    if profile.value("batch_counts_prompts") and case.get("global_batch_size") \
            and not any(extra.get(k) for k in PROMPT_KEYS):
        n = int((case.get("rl") or {}).get("rollout_n") or 1)
        extra["train_batch_size"] = max(1, int(case["global_batch_size"]) // n)
    return extra


def rl_inputs(case: dict[str, Any], catalog: Catalog) -> tuple[Any, TrainConfig, GpuSpec]:
    """(case_inputs.RLCase, trainer config with the case's tp/pp, GPU) of a PPO/GRPO time case:
    the case's fields, and what its framework's profile does with them."""
    for need in ("gpu", "model"):
        if not case.get(need):
            raise PlannerError(f"case has no {need}" if need == "gpu"
                               else "no public checkpoint: architecture unknown")
    profile = case_profile(case, catalog)
    rl = _rollout_fields(case, profile)
    extra = _iteration_extra(case, profile)
    if extra.get("rollouts_per_step"):
        # only the product prompts x samples enters the model
        rl["rollout_n"] = 1
        extra["train_batch_size"] = int(extra["rollouts_per_step"])
    # a published time with no per-device batch (none stated, no token budget, no script's) ran
    # the largest that fits, as benchmarks are tuned: micro-batch 1 would decode one sequence
    # at a time where an engine on the trainer's weights generates in its batch; where none
    # fits, the framework's default per-device batch (profile fact per_device_batch) stands
    unstated = not case.get("micro_batch_size") and not any(
        extra.get(k) for k in ("ppo_max_token_len_per_gpu", "script_micro_batch"))
    if unstated and profile.value("per_device_batch"):
        extra["script_micro_batch"] = profile.value("per_device_batch")
    mem = {**case, "rl": rl, "extra": extra, "method": case.get("method")}
    inferred: tuple[str, ...] = ()
    if not case.get("sharding") and not case.get("micro_batch_size"):
        mem, inferred = least_fitting_sharding(mem, profile, catalog=catalog)
    rc = rl_case(mem, catalog, for_time=True)
    if (extra.get("largest_fitting_batch") or unstated) and not case.get("micro_batch_size"):
        rc = largest_fitting_batch(mem, rc, catalog)
    rc = replace(rc, assumptions=rc.assumptions + inferred)
    cfg = rc.cfg
    tp, pp = case.get("tp") or 1, case.get("pp") or 1
    # enforce_eager came with the case's semantics (case_inputs._semantics)
    update: dict[str, Any] = {"rollout_engine": default_engine(profile, cfg)}
    if "off-policy" in str(extra.get("policy", "")) and profile.value("off_policy_placement"):
        update["placement"] = profile.value("off_policy_placement")
    if case.get("global_batch_size") and extra.get("rollouts_per_step"):
        # global_batch_size is the train batch (optimizer steps = rollouts / GBS); a
        # generation-batch cap (extra.generation_batches) is read by case_inputs.rl_case
        gpus = cfg.num_gpus - (cfg.num_gpus // 2 if update.get("placement") == "separate"
                               else 0)
        dp = max(1, gpus // (tp * pp))
        update["grad_accum"] = max(1, int(case["global_batch_size"]) // (cfg.micro_batch_size
                                                                           * dp))
    mini = extra.get("ppo_mini_batch_size_prompts") or extra.get("ppo_mini_batch_size")
    if mini and profile.value("batch_counts_prompts") and "grad_accum" not in update:
        # verl: one optimizer step per mini-batch of prompts x n sequences, in micro-steps of at
        # most the micro batch (the log-prob passes keep theirs)
        per_rank = max(1, int(mini) * cfg.samples_per_prompt // max(1, cfg.dp))
        micro = min(cfg.micro_batch_size, per_rank)
        update.update(micro_batch_size=micro, grad_accum=-(-per_rank // micro),
                      logprob_micro_batch=cfg.logprob_batch)
    # validated at tp = pp = 1 (the RL trainer is data parallel); the Megatron layout of the
    # update is set after, as training_estimate does for uneven pipelines
    cfg = cfg.model_copy(update={**update, "tp": tp, "pp": pp})
    return rc, cfg, catalog.gpu(case["gpu"])


def _fits(case: dict[str, Any], catalog: Catalog) -> bool:
    """The time case's RL job fits its GPU (the case's capacity where stated) in the memory
    model: what the run having run implies (least_fitting_sharding, largest_fitting_batch)."""
    gpu = catalog.gpu(case["gpu"])
    if case.get("gpu_memory_gib"):
        gpu = gpu.model_copy(update={"memory_gib": case["gpu_memory_gib"]})
    r = rl_case(case, catalog, for_time=True)
    return estimate_memory(r.resolved.spec, gpu, r.cfg, critic=r.critic, reward=r.reward).fits()


def least_fitting_sharding(case: dict[str, Any], profile: Profile, *, catalog: Catalog
                           ) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A time case that states neither its sharding nor its batch ran, so its states fit: the
    case with the least sharded of its framework's shardings in which one sequence per GPU
    fits the memory model (a published run shards no more than it must; one its other
    settings rule out, e.g. an offload needing ZeRO, is skipped), and the assumption said;
    the case as it is where it fits unsharded or nowhere."""
    for label in plan_shardings(profile):  # least sharded first
        if label != "none" and case["num_gpus"] < 2:
            continue
        try:  # a sharding the case's other settings rule out is no candidate
            fits = _fits({**case, "sharding": label, "micro_batch_size": 1}, catalog)
        except PlannerError:
            continue
        if fits:
            note = f"sharding {label}: the least of {profile.id}'s in which the run fits " \
                "(not stated)"
            return (case, ()) if label == "none" else ({**case, "sharding": label}, (note,))
    return case, ()


def largest_fitting_batch(case: dict[str, Any], rc: Any, catalog: Catalog) -> Any:
    """The RLCase of a time case that states extra.largest_fitting_batch (the run used the
    largest per-device batch that does not run out of memory, at most global_batch_size
    prompts per iteration): the largest the memory model fits on the case's GPU (bisection;
    memory grows with the batch). Where none fits, the case's extra.script_micro_batch stays
    (rl_case), and the assumption says so."""
    from planner.fixes import largest_true  # validation only: off the CLI's start-up path

    cap = int(case.get("global_batch_size") or 1) // case["num_gpus"]
    batch = largest_true(lambda b: _fits({**case, "micro_batch_size": b}, catalog), 1,
                         max(1, cap))
    if batch is None:
        return replace(rc, assumptions=rc.assumptions + (
            f"no per-device batch fits the memory model: {rc.cfg.micro_batch_size}, the "
            "script's or the framework's default",))
    best = rl_case({**case, "micro_batch_size": batch}, catalog, for_time=True)
    return replace(best, assumptions=best.assumptions + (
        f"per-device batch {batch}: the largest that fits (the case's batch rule), at most "
        f"{case.get('global_batch_size')} per iteration",))


def rl_estimate(case: dict[str, Any], catalog: Catalog, *,
                decode_efficiency: float | None = None) -> Any:
    """rltime.estimate_rl_step of a PPO/GRPO case (``decode_efficiency`` overrides the
    engine's share of the decode roofline; used to calibrate it)."""
    rc, cfg, gpu = rl_inputs(case, catalog)
    platform, _per_node, _network = case_platform(gpu, catalog, case)
    cap = _max_response_len(case, cfg)
    # NeMo-RL's FP8 tables state "Precision: Generation FP8, Training FP8"
    fp8_gen = case.get("precision") == "fp8" and bool(
        case_profile(case, catalog).value("fp8_generation"))
    return estimate_rl_step(rc.resolved.spec, gpu, cfg, platform=platform,
                            stack=stack_of(case, catalog), critic=rc.critic, reward=rc.reward,
                            max_response_len=cap,
                            decode_efficiency=decode_efficiency,
                            rollout_precision="fp8" if fp8_gen else "bf16")


def rl_metric(case: dict[str, Any], est: Any) -> float:
    """The value of an RL case's metric (step time, tokens/s per GPU, minutes to train its
    extra.total_tokens) that rltime estimate ``est`` predicts."""
    metric = case["metric"]
    if metric == "step_time_s":
        return est.step_time_s
    if metric == "tokens_per_sec_per_gpu":
        return est.tokens_per_s_per_gpu
    total = (case.get("extra") or {}).get("total_tokens")
    if metric == "time_to_train_minutes" and total:
        return float(total) / est.tokens_per_s / 60
    raise PlannerError(f"RL metric {metric!r} needs extra.total_tokens" if not total
                       else f"RL metric {metric!r} is not modelled")


def implied_rl_decode_efficiency(case: dict[str, Any], catalog: Catalog) -> float:
    """The engine's decode roofline share at which an RL case's prediction equals its value
    (bisection in log space; 4.0 when even that is too slow). The calibrated
    efficiency.RL_ROLLOUT_DECODE_EFFICIENCY is the median over RL_ROLLOUT_CASES."""
    target = float(case["value"])
    # a time falls as the engine gets faster; a throughput (tokens/s) rises
    rate = case["metric"] == "tokens_per_sec_per_gpu"
    lo, hi = 0.02, 4.0
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        value = rl_metric(case, rl_estimate(case, catalog, decode_efficiency=mid))
        too_slow = value < target if rate else value > target
        lo, hi = (mid, hi) if too_slow else (lo, mid)
    return (lo * hi) ** 0.5


def _preference_value(case: dict[str, Any], catalog: Catalog) -> tuple[float, str]:
    """A reward-model or DPO training case in its metric: the training step of the pairs
    (case_inputs.rl_case maps the batch to pairs; DPO adds the reference's forward passes)."""
    if case["metric"] not in ("tokens_per_sec_per_gpu", "step_time_s"):
        raise PlannerError(f"{case['workload']} metric {case['metric']!r} needs a total "
                           "workload the case does not state")
    for need in ("gpu", "model"):
        if not case.get(need):
            raise PlannerError(f"case has no {need}")
    rc = rl_case(memory_style_case(case), catalog)
    gpu = catalog.gpu(case["gpu"])
    platform, per_node, network = case_platform(gpu, catalog, case)
    est = estimate_throughput(rc.resolved.spec, gpu, rc.cfg, platform=platform,
                              stack=stack_of(case, catalog), gpus_per_node=per_node,
                              inter_node_gbps=network)
    return training_metric(case, est, gpu), est.limited_by


def _rl_value(case: dict[str, Any], catalog: Catalog) -> tuple[float, str]:
    """A PPO/GRPO case in its metric (rltime.estimate_rl_step); rm/dpo time cases are not
    usable (no verified total workload)."""
    workload = str(case.get("workload"))
    if workload in ("rm", "dpo"):
        return _preference_value(case, catalog)
    est = rl_estimate(case, catalog)
    return rl_metric(case, est), est.limited_by


def implied_utilisation(
    case: dict[str, Any], catalog: Catalog, *, step_overhead_s: float | None = None
) -> float:
    """The stack utilisation at which the prediction of a training case equals its value
    (bisection in log space; predictions grow monotonically with utilisation). The calibrated
    factor of a stack is the median of this over its usable cases (efficiency.STACK_CASES)."""
    kw = {} if step_overhead_s is None else {"step_overhead_s": step_overhead_s}
    target = float(case["value"])
    slower = case["metric"] in ("step_time_s", "time_to_train_minutes", "cost_usd")
    lo, hi = 0.02, 4.0
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        est, _cfg, gpu = training_estimate(case, catalog, utilisation=mid, **kw)
        value = training_metric(case, est, gpu)
        too_fast = value < target if slower else value > target
        lo, hi = (lo, mid) if too_fast else (mid, hi)
    return (lo * hi) ** 0.5


def implied_decode_efficiency(case: dict[str, Any], catalog: Catalog) -> float:
    """The roofline share at which the decode prediction equals the case's value (bisection in
    log space); the calibrated factor of a serving stack is the median over its cases."""
    target = float(case["value"])
    lo, hi = 0.02, 4.0
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        value, _limit = decode_value(case, catalog, efficiency=mid)
        lo, hi = (lo, mid) if value > target else (mid, hi)
    return (lo * hi) ** 0.5


def error_stats(results: list[ThroughputResult]) -> dict[str, Any]:
    """Cases, median and p90 |relative error|, bias (mean signed error), share within 20 %."""
    errs = [r.rel_err for r in results if r.rel_err is not None]
    out: dict[str, Any] = {"cases": len(results), "predicted": len(errs),
                           "not_modelled": sum(1 for r in results if r.reason)}
    if errs:
        a = [abs(e) for e in errs]
        out.update(median_abs_err=statistics.median(a), p90_abs_err=percentile(a, 0.9),
                   bias=statistics.fmean(errs),
                   within_20=sum(e <= 0.20 for e in a) / len(a))
    return out


def _grouped(results: list[ThroughputResult], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[ThroughputResult]] = defaultdict(list)
    for r in results:
        groups[str(getattr(r, key))].append(r)
    return {k: error_stats(v) for k, v in sorted(groups.items())}


def summarise_throughput(results: list[ThroughputResult]) -> dict[str, Any]:
    """Usable training cases (the acceptance set) overall, per workload, stack, framework and
    precision; decode and RL separately; every reason a case is not modelled."""
    usable = [r for r in results if r.usable]
    training = [r for r in usable if r.family == "training"]
    decode = [r for r in usable if r.family == "decode"]
    reasons: dict[str, int] = defaultdict(int)
    for r in results:
        if r.reason:
            reasons[r.reason] += 1
    return {
        "cases": len(results),
        "training": error_stats(training),
        "training_by_workload": _grouped(training, "workload"),
        "training_by_stack": _grouped(training, "stack"),
        "training_by_framework": _grouped(training, "framework"),
        "training_by_precision": _grouped(training, "precision"),
        "decode": error_stats(decode),
        "decode_by_stack": _grouped(decode, "stack"),
        "rl": error_stats([r for r in usable if r.family == "rl"]),
        "rl_by_workload": _grouped([r for r in usable if r.family == "rl"], "workload"),
        "rl_by_framework": _grouped([r for r in usable if r.family == "rl"], "framework"),
        "rl_all_predicted": error_stats([r for r in results
                                         if r.family == "rl" and r.predicted is not None]),
        "all_predicted": error_stats([r for r in results if r.predicted is not None]),
        "not_modelled_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
    }


def validate_throughput_file(
    path: Path, catalog: Catalog
) -> tuple[list[ThroughputResult], dict[str, Any]]:
    """The results of every throughput case in ``path`` and their summary."""
    results = [predict_throughput_case(c, catalog) for c in load_cases(path)]
    return results, summarise_throughput(results)


def is_throughput_file(path: Path) -> bool:
    """True when the file's cases carry a ``metric`` (the throughput schema)."""
    cases = load_cases(path)
    return bool(cases) and all("metric" in c for c in cases)


