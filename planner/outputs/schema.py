"""The JSON documents of ``check``, ``plan``, ``pareto`` and ``tune`` (``--json``) as typed models.

Each document carries ``schema_version``; ``json_schema(kind)`` is the JSON Schema (draft 2020-12)
generated from these models, shipped as ``planner/outputs/schemas/<kind>.v<version>.json`` and
printed by ``planner schema KIND``. A change to a document's keys or types changes its model here,
and a change that breaks readers raises SCHEMA_VERSION. tests/test_schema.py validates real outputs
against the shipped files and checks that the files match the models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.catalog.request import TrainConfig
from planner.solver.result import Binding, Conflict  # the typed results, as the documents hold them

SCHEMA_VERSION = 1
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Band(_Doc):
    """Where the measured value of jobs like this one lies (planner.models.bands): lo..hi, the
    split-conformal band at confidence p of the leave-one-source-out ratios measured /
    predicted of ``cases`` of ``group``."""

    lo: float
    hi: float
    p: float
    group: str
    cases: int


class Memory(_Doc):
    """Per-GPU memory: the device peak (per_gpu_gib), its parts and each phase's peak."""

    per_gpu_gib: float
    allocated_gib: float
    reserved_gib: float
    capacity_gib: float
    breakdown_gib: dict[str, float]
    peak_phase: str
    host_ram_gib: float
    precision: str
    notes: list[str]
    phases_gib: dict[str, float]
    phase_groups: dict[str, str]
    gpu_memory_utilization: float | None
    band: Band | None = None  # the band of the device-level peak


class _Speed(_Doc):
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    step_time_s: float
    limited_by: str
    stack: str
    band: Band | None = None  # the band of tokens/s
    step_time_band: Band | None = None  # the band of step_time_s (from tokens/s's)


class TrainingThroughput(_Speed):
    """A training step (SFT, pre-training, RM, DPO)."""

    mfu: float
    achieved_tflops_per_gpu: float
    precision: str


class RlThroughput(_Speed):
    """One PPO/GRPO iteration, split into phases."""

    phases_s: dict[str, float]
    phase_shares: dict[str, float]
    rollout_concurrency: int
    rollout_waves: int
    placement: str


class TrainingThroughputDetail(TrainingThroughput):
    """check and tune: with the step's time terms and the model's notes."""

    terms_s: dict[str, float]
    notes: list[str]


class RlThroughputDetail(RlThroughput):
    """RL throughput with the estimate's notes."""
    notes: list[str]


class RentalOffer(_Doc):
    """The provider's offer a rental bills (planner.catalog.offers): its instance shape and rate,
    the instances rented, the hours billed (the job's, rounded up to the increment, at least the
    minimum) and what they cost."""

    provider: str
    gpus_per_instance: int
    usd_per_hour: float
    billing_increment_hours: float
    price_as_of: str
    instance_type: str
    region: str | None
    spot: bool
    instances: int
    host_ram_gib: float | None
    minimum_hours: float
    billed_hours: float
    usd: float
    source: str
    # the instance's network to other instances, Gbit/s, where the offer states it
    network_gbit_s: float | None = None


class Cost(_Doc):
    """The cost of a plan: USD, basis, items and what it covers."""
    usd: float | None
    basis: Literal["buy", "rent", "owned"]
    items: dict[str, float]
    covers: str
    status: Literal["ok", "not offered"]
    reason: str | None
    hours: float
    job: str
    notes: list[str]
    offer: RentalOffer | None = None  # a rental: the offer billed
    band: Band | None = None  # a rental: the band of the bill (from tokens/s's band)


class Roles(_Doc):
    """The models of the critic and reward roles."""
    critic: str | None
    reward: str | None


class Framework(_Doc):
    """The framework a job runs on (frameworks.FrameworkChoice): why, and its efficiency."""

    id: str
    name: str
    version: str
    reason: str
    efficiency: str
    efficiency_note: str
    requested_version: str | None = None  # the release the framework's name carried
    # facts that hold from a later release than the one named, at their earlier value
    as_of_requested_version: list[str] | None = None


class Fix(_Doc):
    """One change that makes a configuration fit (fixes.ranked_fixes), checked."""

    changes: list[str]
    fits: bool
    per_gpu_gib: float
    tokens_per_s: float
    hours: float
    speed_vs_original: float | None


class CheckDocument(_Doc):
    """`planner check --json`."""

    schema_version: Literal[SCHEMA_VERSION]
    fits: bool
    model: str
    model_asked_as: str
    gpu: str
    num_gpus: int
    memory_margin: float
    confidence: float  # fits: the memory band's upper edge at this confidence (0: the point)
    memory_headroom: float  # that upper edge / the predicted peak
    config: TrainConfig
    memory: Memory
    framework: Framework
    platform: str | None
    throughput: TrainingThroughputDetail | RlThroughputDetail
    roles: Roles
    time_hours: float
    time_hours_band: Band | None
    cost: Cost
    fixes: list[Fix] | None = None  # `planner check` when the configuration does not fit


class RlSettings(_Doc):
    """The RL placement and rollout settings of a plan."""
    placement: str
    rollout_tp: int
    rollout_gpus: int
    role_gpus: dict[str, int] | None
    gpu_memory_utilization: float | None
    offload_idle: bool
    rollout_engine: str
    generate_micro_batch: int | None
    rollout_batch: int
    rollout_n: int
    prompt_len: int | None
    response_len: int | None
    reference: bool


class PlanBody(_Doc):
    """The plan itself: hardware, layout, batch, the full config, memory, speed, time, cost.
    What `planner export` reads."""

    model: str
    checkpoint: str | None = Field(default=None, description="what its launch loads: the "
                                   "Hugging Face repo id as asked, else the catalog's")
    gpu: str
    platform: str | None
    num_gpus: int
    num_hosts: int
    method: str
    lora_rank: int | None
    optimizer: str
    zero_stage: int
    fsdp: bool
    sharding: str  # Plan.sharding_label: zero0-3, fsdp, hsdp<group>
    tp: int
    pp: int
    dp: int
    offload: str
    checkpointing: str
    micro_batch_size: int
    grad_accum: int
    global_batch_size: int
    seq_len: int
    workload: str
    rl: RlSettings | None
    config: TrainConfig
    memory: Memory
    throughput: TrainingThroughput | RlThroughput
    time_hours: float
    time_hours_band: Band | None
    cost: Cost


class Alternative(_Doc):
    """One line of a table of plans (alternatives, Pareto points)."""

    gpu: str
    platform: str | None
    num_gpus: int
    method: str
    lora_rank: int | None
    zero_stage: int
    sharding: str  # Plan.sharding_label
    offload: str
    checkpointing: str
    tp: int
    pp: int
    micro_batch_size: int
    per_gpu_gib: float
    tokens_per_s: float
    time_hours: float
    cost_usd: float


class PlanDocument(_Doc):
    """`planner plan --json`."""

    schema_version: Literal[SCHEMA_VERSION]
    status: Literal["optimal", "feasible", "infeasible", "unknown"]
    plan: PlanBody | None
    binding: list[Binding]
    conflicts: list[Conflict]
    alternatives: list[Alternative]
    notes: list[str]
    # `planner plan`: the memory limit planned to (bands.request_margin)
    memory_margin: float | None = None
    confidence: float | None = None
    memory_headroom: float | None = None


class ParetoPoint(Alternative):
    """A Pareto point: its table line, and the whole plan (`planner export --point N`)."""

    job: str
    basis: Literal["buy", "rent", "owned"]
    status: Literal["optimal", "feasible"]
    plan: PlanBody


class ParetoDocument(_Doc):
    """`planner pareto --json`."""

    schema_version: Literal[SCHEMA_VERSION]
    points: list[ParetoPoint]
    more: bool = False  # the front goes on past --max-points


class TuneCandidate(_Doc):
    """One configuration tune evaluated: settings, memory and throughput."""
    settings: dict[str, str | int | float]
    per_gpu_gib: float
    tokens_per_s: float | None
    peak_phase: str


class Searched(_Doc):
    """What tune searched: the candidates evaluated and each field's values."""
    candidates_evaluated: int
    space: dict[str, list[str | int | float]]


class TuneDocument(_Doc):
    """`planner tune --json`."""

    schema_version: Literal[SCHEMA_VERSION]
    status: Literal["found", "infeasible"]
    objective: str
    model: str
    model_asked_as: str
    gpu: str
    num_gpus: int
    platform: str | None
    memory_margin: float
    confidence: float  # the limit holds the memory band's upper edge at this confidence
    memory_headroom: float  # that upper edge / the predicted peak
    memory_target: float | None
    memory_limit_gib: float
    capacity_gib: float
    tie_tolerance: float
    settings: dict[str, str | int | float] | None
    config: TrainConfig | None
    memory: Memory | None
    throughput: TrainingThroughputDetail | RlThroughputDetail | None
    runners_up: list[TuneCandidate]
    smallest: TuneCandidate | None
    searched: Searched
    notes: list[str]
    fixes: list[Fix] | None = None  # nothing fits: changes that make the closest setting fit


DOCUMENTS: dict[str, type[_Doc]] = {"check": CheckDocument, "plan": PlanDocument,
                                    "pareto": ParetoDocument, "tune": TuneDocument}


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a document kind, generated from its model."""
    schema = DOCUMENTS[kind].model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": schema_file(kind).name, **schema}


def schema_file(kind: str) -> Path:
    """Where the shipped schema of ``kind`` lives: planner/outputs/schemas/<kind>.v<N>.json."""
    return SCHEMA_DIR / f"{kind}.v{SCHEMA_VERSION}.json"


def schema_text(kind: str) -> str:
    """The JSON schema of document ``kind``, as sorted, indented JSON text."""
    return json.dumps(json_schema(kind), indent=2, sort_keys=True) + "\n"


def write_schemas() -> list[Path]:
    """Regenerate the shipped schema files (python -m planner.outputs.schema)."""
    SCHEMA_DIR.mkdir(exist_ok=True)
    paths = []
    for kind in DOCUMENTS:
        schema_file(kind).write_text(schema_text(kind), encoding="utf-8")
        paths.append(schema_file(kind))
    return paths


if __name__ == "__main__":
    for path in write_schemas():
        print(path)
