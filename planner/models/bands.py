"""Error bands on predictions: where the measured value of a job like this one lies, from the
leave-one-source-out ratios measured / predicted of its group (benchmarks/bands.py writes
planner/models/bands.yaml; issue 18 item 4).

Each validation case is predicted with every fitted constant refitted without its own source;
its ratio r = measured / predicted joins three groups: its own (framework x workload x method),
its family (SFT-family or RL/preference x full training, LoRA-type adapters on a 16-bit base or
a quantized base: FAMILY_KINDS, whose errors differ in size and sign) and its kind's pool
("all"); every source's ratios count, one case one ratio. A
prediction P takes the most specific group that holds enough cases for a finite band at the
asked confidence p (min_cases: 19 at p = 0.9) and gets the split-conformal band
[P * r_(k_lo), P * r_(k_hi)] of that group's n sorted ratios, with k_lo = floor((n + 1)(1 - p)/2)
and k_hi = ceil((n + 1)(1 + p)/2) (split conformal prediction with the finite-sample
correction; Lei et al. 2018, "Distribution-Free Predictive Inference for Regression",
https://arxiv.org/abs/1604.04173, section 2.2, applied to each tail at (1 - p)/2): a new case
exchangeable with the group's lies inside with probability >= p.

That two-tailed band fits memory, whose errors have a designed sign (the model brackets a
counter range and plans against the upper edge), but needs 19 ratios per group at p = 0.9. Rates
and times are banded by the absolute log ratio instead (SCORES), the absolute-residual score of
Lei et al.'s split conformal algorithm (section 2.2) taken in log space: q = the
ceil((n + 1) p)-th smallest |log r| of the group's n ratios, band [P / q, P * q]; it needs 9
ratios at p = 0.9, so groups of one framework qualify sooner. Measured on leave-one-source-out
predictions (benchmarks/bands.py, 2026-11-25): throughput 54 of 61 cases inside (88.5 %) against
50 (82.0 %) with the two-tailed band (53, 86.9 %, once LoRA's matmul traffic was timed); memory
46 of 52 (88.5 %) two-tailed, 45 (86.5 %) by log. Later the same day, every source pooled
(LitGPT's 34 peaks no longer held out) and the adapter family split into LoRA/DoRA and QLoRA
(FAMILY_KINDS): memory 100 of 114 inside (87.7 %; 48 of 51 shared), throughput 109 of 118
(55 of 61 shared); pooled with one adapter family, memory was 95 of 114.

Planning at confidence p puts the band's upper memory edge P * r_(k_hi) within the GPU:
usable capacity = capacity x (1 - margin) / headroom, headroom = max(1, r_(k_hi))
(planning_margin turns this into the single margin the solver reads). With the method open the
offers' usable memory is stated at the widest band of the methods and each candidate's need is
scaled by its own method's headroom / the widest (need_scale), so each is held to its own band.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from planner.errors import UnknownNameError

BANDS_FILE = Path(__file__).resolve().parent / "bands.yaml"
DEFAULT_CONFIDENCE = 0.9
SFT_FAMILY = ("sft", "pretrain")
PEFT = ("lora", "dora", "qlora")
# Validation metrics that are times or bills: their band is the inverse of the rate's.
TIMED_METRICS = ("step_time_s", "time_to_train_minutes", "cost_usd")
PLAN_METHODS = ("full", *PEFT, "freeze")  # request.METHODS, of which a plan may choose
# The conformity score of each kind's bands (module docstring): "tails", each tail of the ratio
# at (1 - p) / 2; "log", the absolute log ratio (a band symmetric in log scale).
SCORES = {"memory": "tails", "throughput": "log"}


def case_method(workload: str, method: str | None) -> tuple[str, str]:
    """(workload, method) of a case or job: a throughput case that names its method as its
    workload ("lora") is SFT with that method; no method is full training."""
    if workload in PEFT:
        return "sft", workload
    return workload, method or "full"


# The method part of a family group: LoRA and DoRA train adapters on a 16-bit base, QLoRA on a
# quantized one (its own 4-bit kernels and their saved tensors); the rest train the base.
FAMILY_KINDS = {"lora": "lora", "dora": "lora", "qlora": "qlora"}


def group_keys(framework: str, workload: str, method: str | None) -> tuple[str, str, str]:
    """The groups of a job, most specific first: framework/workload/method, family, all."""
    workload, method = case_method(workload, method)
    family = "sft" if workload in SFT_FAMILY else "rl"
    return (f"{framework}/{workload}/{method}",
            f"{family}/{FAMILY_KINDS.get(method, 'full')}", "all")


def conformal_ranks(n: int, p: float) -> tuple[int, int]:
    """The 1-based ranks (k_lo, k_hi) of the split-conformal band at confidence p over n sorted
    ratios (module docstring); k_lo < 1 or k_hi > n: too few cases for a finite band."""
    # the 1e-9 keeps float rounding (20 x 0.05 = 0.9999...) from moving a rank
    return (math.floor((n + 1) * (1 - p) / 2 + 1e-9),
            math.ceil((n + 1) * (1 + p) / 2 - 1e-9))


def log_rank(n: int, p: float) -> int:
    """The 1-based rank ceil((n + 1) p) of the absolute log ratio that bounds the "log" band
    at confidence p over n ratios; above n: too few cases for a finite band."""
    return math.ceil((n + 1) * p - 1e-9)


def min_cases(p: float, score: str = "tails") -> int:
    """The fewest ratios whose band at confidence p is finite (at p = 0.9: 19 with "tails",
    9 with "log")."""
    n = 1
    while not _finite(n, p, score):
        n += 1
    return n


def _finite(n: int, p: float, score: str = "tails") -> bool:
    if score == "log":
        return 1 <= log_rank(n, p) <= n
    lo, hi = conformal_ranks(n, p)
    return lo >= 1 and hi <= n


def _edges(ratios: list[float], p: float, score: str) -> tuple[float, float]:
    """(r_lo, r_hi) of a finite band over sorted ``ratios`` under ``score``."""
    if score == "log":
        q = math.exp(sorted(abs(math.log(r)) for r in ratios)[log_rank(len(ratios), p) - 1])
        return 1 / q, q
    lo, hi = conformal_ranks(len(ratios), p)
    return ratios[lo - 1], ratios[hi - 1]


def select(groups: dict[str, list[float]], keys: tuple[str, ...], p: float, *,
           score: str = "tails") -> tuple[str, float, float, int] | None:
    """(group, r_lo, r_hi, cases) of the first group of ``keys`` with a finite band at p under
    ``score`` (SCORES); None where none has enough cases."""
    for key in keys:
        ratios = sorted(groups.get(key, ()))
        if _finite(len(ratios), p, score):
            return (key, *_edges(ratios, p, score), len(ratios))
    return None


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return yaml.safe_load(BANDS_FILE.read_text(encoding="utf-8"))


def ratio_band(kind: str, *, framework: str, workload: str, method: str | None,
               p: float = DEFAULT_CONFIDENCE) -> tuple[str, float, float, int] | None:
    """select() over the bands file's ``kind`` ("memory" or "throughput") for a job."""
    return select(_table()[kind], group_keys(framework, workload, method), p,
                  score=SCORES[kind])


def band(kind: str, value: float, *, framework: str, workload: str, method: str | None,
         p: float = DEFAULT_CONFIDENCE) -> dict[str, Any] | None:
    """The band of a predicted ``value`` (memory peak or tokens/s): {"lo", "hi", "p", "group",
    "cases"}; None where even the pooled group is too small for p."""
    found = ratio_band(kind, framework=framework, workload=workload, method=method, p=p)
    if found is None:
        return None
    group, r_lo, r_hi, n = found
    return {"lo": value * r_lo, "hi": value * r_hi, "p": p, "group": f"{kind}/{group}",
            "cases": n}


def inverse_band(rate_band: dict[str, Any] | None, rate: float, value: float
                 ) -> dict[str, Any] | None:
    """The band of a quantity inversely proportional to a rate (step time, hours, rental
    cost) from the rate's band: a slower measured rate is a longer time."""
    if rate_band is None or not rate or not rate_band["lo"] or not rate_band["hi"]:
        return None
    return {**rate_band, "lo": value * rate / rate_band["hi"],
            "hi": value * rate / rate_band["lo"]}


@lru_cache(maxsize=256)
def memory_headroom(*, framework: str, workload: str, methods: tuple[str, ...],
                    p: float) -> float:
    """How far above its prediction the memory of such a job may be measured at confidence p:
    max(1, r_hi) over ``methods`` (the largest where the method is the solver's choice); 1 at
    p = 0 (point estimates) or where no group has enough cases."""
    if p <= 0:
        return 1.0
    found = [ratio_band("memory", framework=framework, workload=workload, method=m, p=p)
             for m in methods]
    return max([1.0, *(f[2] for f in found if f is not None)])


def planning_margin(margin: float, headroom: float) -> float:
    """The one margin the solver reads: capacity x (1 - margin) / headroom = capacity x
    (1 - planning_margin)."""
    return 1 - (1 - margin) / headroom


def prediction_bands(*, framework: str, workload: str, method: str | None, memory_gib: float,
                     tokens_per_s: float, step_time_s: float | None, hours: float | None,
                     rental_usd: float | None, p: float = DEFAULT_CONFIDENCE
                     ) -> dict[str, dict[str, Any] | None]:
    """The bands of one job's predictions: its memory peak, tokens/s, and from the rate's band
    the step time, hours and a rental bill (a bill by the hour; a purchase is no prediction)."""
    job = {"framework": framework, "workload": workload, "method": method, "p": p}
    rate = band("throughput", tokens_per_s, **job)
    return {"memory": band("memory", memory_gib, **job), "tokens_per_s": rate,
            "step_time_s": step_time_s and inverse_band(rate, tokens_per_s, step_time_s),
            "hours": hours and inverse_band(rate, tokens_per_s, hours),
            "cost_usd": rental_usd and inverse_band(rate, tokens_per_s, rental_usd)}


def request_headroom(request: Any, method: str | None = None) -> float:
    """memory_headroom of a plan request (a PlanRequest; duck-typed: models import no
    schemas) for a plan of ``method``; without one, the request's method, and with the method
    open the widest band of the methods (the limit the offers' usable memory is stated in)."""
    methods = ((method,) if method is not None
               else PLAN_METHODS if request.method == "auto" else (request.method,))
    return memory_headroom(framework=request.framework or "", workload=request.workload,
                           methods=methods, p=request.confidence)


def request_margin(request: Any, method: str | None = None) -> float:
    """The share of GPU memory a plan request keeps free for a plan of ``method`` (None: the
    request's widest, request_headroom): its memory_margin and the memory band's upper edge at
    its confidence together (planning_margin)."""
    return planning_margin(request.memory_margin, request_headroom(request, method))


def need_scale(request: Any, method: str) -> float:
    """The factor on a ``method`` plan's memory need that lets it be compared with the usable
    memory of the request's widest band (request_margin): need x h_method <= C (1 - margin) iff
    need x h_method / h_widest <= C (1 - margin) / h_widest. 1 where the method is the
    request's own or the bands are off."""
    return request_headroom(request, method) / request_headroom(request)


def framework_id(catalog: Any, slug: str) -> str:
    """The profile id a validation case's framework names (an alias resolved), else the slug."""
    try:
        return catalog.framework(slug).id
    except UnknownNameError:
        return slug


def case_band(kind: str, predicted: float | None, *, framework: str, workload: str,
              method: str | None, metric: str | None = None) -> dict[str, Any] | None:
    """The band of a validation case's prediction (`planner validate --json`): memory peaks
    and rates directly, a time or bill metric (TIMED_METRICS) from the rate's band."""
    if not predicted:
        return None
    job = {"framework": framework, "workload": workload, "method": method}
    if metric not in TIMED_METRICS:
        return band(kind, predicted, **job)
    return inverse_band(band(kind, 1 / predicted, **job), 1 / predicted, predicted)
