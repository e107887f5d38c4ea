"""What the planner is asked (PlanRequest): the model, the money, and every choice pinned or left
open; its bounds and the checks that make contradictory or impossible pins bad input."""

from __future__ import annotations

from itertools import product
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from planner.catalog.domains import (
    AUTO_CHECKPOINTINGS,
    AUTO_METHODS,
    AUTO_OPTIMIZERS,
    MAX_EP,
    MICRO_BATCHES,
    ZERO_SHARDINGS,
    Choice,
    Domains,
    expert_parallel_options,
    method_rank_domain,
    pinned_or,
    pipeline_parallel_options,
    placement_domain,
    rank_domain,
    sharding_domain,
)
from planner.catalog.request import (
    DEFAULT_LORA_RANK,
    DEFAULT_ROLLOUT_BATCH,
    DEFAULT_ROLLOUT_N,
    OFFLOADS,
    PAIRWISE_WORKLOADS,
    PLACEMENTS,
    RL_WORKLOADS,
    SHARDING_FIELDS,
    Checkpointing,
    Method,
    Offload,
    Optimizer,
    Placement,
    Sharding,
    TrainConfig,
    Workload,
    _fill_rl_seq_len,
    _Request,
)
from planner.catalog.request_checks import (
    layout_error,
    model_parallel_error,
    reward_conflict,
    tp_error,
    validate_workload,
)
from planner.catalog.specs import ModelSpec, RolloutEngine, tensor_parallel_options
from planner.errors import PlannerError

Objective = Literal["cost", "time"]


Pricing = Literal["buy", "rent", "owned"]


PriceKind = Literal["new", "used"]


DEFAULT_GLOBAL_BATCH = 64


# The library's defaults are point estimates within a fixed 5 % margin (confidence 0); the CLI
# plans against the memory band instead (cli.CLI_MEMORY_MARGIN, bands.DEFAULT_CONFIDENCE).
DEFAULT_MEMORY_MARGIN = 0.05


# Input limits of a plan request (bad input above them, exit 2): money in whole dollars stays in
# the solver's int64 range; a million GPUs is beyond any cluster built;
# the space enumerates the divisors of the global batch (65,536 sequences: ~4 s to plan).
MAX_BUDGET_USD = 1e12


MAX_GPUS = 1_000_000


MAX_GLOBAL_BATCH = 65_536


# TrainConfig fields a plan request may fix (PlanRequest.fixed): what the configuration computes
# with, not what the planner searches (layout, sharding, method, batch are PlanRequest's own
# choices, open or pinned).
FIXED_FIELDS = ("precision", "pure_bf16", "paged_optimizer", "fused_optimizer", "compiled",
                "flash_attention", "chunked_loss", "lora_targets", "lora_dropout")


# PlanRequest fields that are TrainConfig fields of the same name and meaning: every candidate
# configuration has them as they are (PlanRequest.job_fields).
JOB_FIELDS = ("workload", "seq_len", "prompt_len", "response_len", "rollout_n", "rollout_batch",
              "gpu_memory_utilization", "reference", "precompute_ref", "mean_seq_len",
              "mean_response_len", "reward_function")


class PlanRequest(_Request):
    """What the planner is asked: the model, the money, and every choice pinned or left open.

    A field left at None (or "auto") is a decision for the solver.
    """

    model: str
    workload: Workload = "sft"
    objective: Objective = "cost"
    pricing: Pricing = "buy"
    price_kind: PriceKind | None = Field(
        default=None, description="buy: new or used price; None = new where known, else used"
    )
    budget_usd: float | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    gpus: tuple[str, ...] = Field(default=(), description="GPU types allowed; empty = all")
    max_gpus: int = Field(default=1024, gt=0, le=MAX_GPUS)
    num_gpus: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    max_gpus_per_offer: int | None = Field(
        default=None, gt=0, le=MAX_GPUS,
        description="rent: GPUs one offer may supply; None = offers.DEFAULT_MAX_GPUS_PER_OFFER")
    spot: bool = Field(default=False, description="rent: spot (preemptible) offers only")
    platform: str | None = Field(
        default=None, description="buy or owned: the host platform (catalog id, e.g. your "
        "cluster's node from a --catalog overlay, with its network); None = every platform "
        "that takes the GPU (priced ones to buy)")
    method: Method | Literal["auto"] = "auto"
    lora_rank: int | Literal["auto"] | None = Field(
        default=None, description="None: the framework's (16 where it states none); 'auto': "
        "the solver picks from LORA_RANKS"
    )
    optimizer: Optimizer | Literal["auto"] = "adamw"
    sharding: Sharding | None = None
    tp: int | None = Field(default=None, gt=0)
    pp: int | None = Field(default=None, gt=0)
    ep: int | None = Field(default=None, gt=0)  # expert parallel degree; None: searched
    offload: Offload | Literal["auto"] = "auto"
    checkpointing: Checkpointing | Literal["auto"] = "auto"
    micro_batch_size: int | None = Field(default=None, gt=0)
    grad_accum: int | None = Field(default=None, gt=0)
    global_batch_size: int = Field(default=DEFAULT_GLOBAL_BATCH, gt=0, le=MAX_GLOBAL_BATCH)
    seq_len: int = Field(default=2048, gt=0)
    memory_margin: float = Field(default=DEFAULT_MEMORY_MARGIN, ge=0, lt=1)
    confidence: float = Field(
        default=0.0, ge=0, lt=1, description="plan against the upper edge of the memory band "
        "at this confidence (planner.models.bands; the CLI's default is 0.9); 0: point estimates")
    framework: str | None = Field(
        default=None, max_length=100, description="framework profile id or alias the plan "
        "runs on (catalog/frameworks); None: the workload's default framework. The plan holds "
        "only layouts it runs, with its memory semantics and efficiency"
    )
    stack: str = Field(
        default="hf", description="deprecated: efficiency stack (efficiency.STACKS); left "
        "unset, the framework's efficiency times every candidate"
    )
    tokens: float | None = Field(default=None, gt=0, description="training tokens of the job")
    epochs: float | None = Field(default=None, gt=0)
    dataset_tokens: float | None = Field(default=None, gt=0)
    steps: int | None = Field(default=None, gt=0)
    max_hours: float | None = Field(default=None, gt=0)
    min_tokens_per_s: float | None = Field(default=None, gt=0)
    time_limit_s: float = Field(default=10.0, gt=0)
    # --- preference and RL workloads (TrainConfig has the meaning of each) ---------------------
    critic_model: str | None = None
    reward_model: str | None = None
    prompt_len: int | None = Field(default=None, gt=0)
    response_len: int | None = Field(default=None, gt=0)
    rollout_n: int | None = Field(default=None, gt=0)
    rollout_batch: int = Field(default=DEFAULT_ROLLOUT_BATCH, gt=0)
    rollout_tp: int | None = Field(default=None, gt=0, description="None: the solver picks")
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, lt=1, description="None: the engine is sized to its batch"
    )
    rollout_engine: RolloutEngine | None = Field(
        default=None, description="None: the framework profile's default engine"
    )
    reference: bool = True
    precompute_ref: bool = False
    reward_function: bool = False
    mean_seq_len: int | None = Field(default=None, gt=0)
    mean_response_len: int | None = Field(default=None, gt=0)
    placement: Placement | None = Field(default=None, description="None: the solver picks")
    offload_idle: bool | None = Field(default=None, description="None: the solver picks")
    # --- TrainConfig fields the user fixes and the planner does not search ---------------------
    fixed: dict[str, Any] = Field(
        default_factory=dict, description="TrainConfig fields by their TrainConfig names and "
        "types (FIXED_FIELDS: precision, kernels, loss, optimizer variants, LoRA targets), "
        "passed into every candidate configuration as they are")

    @model_validator(mode="before")
    @classmethod
    def _rl_seq_len(cls, data: object) -> object:
        return _fill_rl_seq_len(data)

    @field_validator("fixed")
    @classmethod
    def _fixed_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Only FIXED_FIELDS, each valid as its TrainConfig field (one vocabulary: the same
        names, types and checks as `planner check`)."""
        unknown = sorted(set(value) - set(FIXED_FIELDS))
        if unknown:
            raise ValueError(f"fixed field {unknown[0]!r} is not one of "
                             f"{', '.join(FIXED_FIELDS)}")
        return dict(TrainConfig.model_validate(value).model_dump(include=set(value)))

    @property
    def is_rl(self) -> bool:
        """True for an RL workload (RL_WORKLOADS)."""
        return self.workload in RL_WORKLOADS

    @property
    def tokens_per_sequence(self) -> int:
        """The tokens of a sequence the job counts: the real ones (mean_seq_len) where the RL
        passes drop padding, else seq_len (rltime.estimate_rl_step counts the same)."""
        return self.mean_seq_len or self.seq_len

    def prompt_group_step(self) -> dict[str, int]:
        """For a framework whose RL mini-batch counts prompts (profile fact batch_counts_prompts:
        verl's ppo_mini_batch_size x rollout.n sequences per optimizer step): the default
        optimizer step (DEFAULT_GLOBAL_BATCH sequences, the user's --global-batch unset) as
        whole groups of n samples, the fewest power-of-two prompts whose groups hold that many,
        halved until they divide the iteration's prompts. Empty where nothing changes."""
        n = self.samples_per_prompt
        if not self.is_rl or n == 1 or "global_batch_size" in self.model_fields_set:
            return {}
        prompts = 1 << max(0, (-(-DEFAULT_GLOBAL_BATCH // n) - 1).bit_length())
        while prompts > 1 and self.rollout_batch % prompts:
            prompts //= 2
        return {} if prompts * n == self.global_batch_size else {
            "global_batch_size": prompts * n}

    @property
    def samples_per_prompt(self) -> int:
        """Responses sampled per prompt; the workload's default when none is set (as
        TrainConfig.samples_per_prompt)."""
        return self.rollout_n or DEFAULT_ROLLOUT_N.get(self.workload, 1)

    @property
    def sequences_per_step(self) -> int:
        """Sequences behind one step of the job: an RL iteration's rollout_batch x n samples,
        a pairwise step's 2 x global batch, else the global batch."""
        if self.is_rl:
            return self.rollout_batch * self.samples_per_prompt
        return self.global_batch_size * (2 if self.workload in PAIRWISE_WORKLOADS else 1)

    def job_fields(self) -> dict[str, Any]:
        """The TrainConfig fields the request sets as they are (JOB_FIELDS, and the rollout
        engine when named)."""
        out = {k: getattr(self, k) for k in JOB_FIELDS}
        return out | ({"rollout_engine": self.rollout_engine} if self.rollout_engine else {})

    def domains(self, *, model: ModelSpec, per_node: int,
                shardings: tuple[str, ...] = ZERO_SHARDINGS, parallel: tuple[str, ...] = (
                    "tp", "pp"), trainer_generates: bool = False,
                default_rank: int | None = None, hybrid_shards: tuple[int, ...] = ()
                ) -> Domains:
        """The searched TrainConfig fields, each pinned (one value) or open (its values in
        preference order): the candidates' fields outermost first (domains.choices), then the
        layout's tp, pp and micro-batch. ``shardings`` and ``parallel``: the sharding labels
        and model-parallel axes the framework runs; ``per_node``: the largest host, which
        bounds the TP degrees; ``trainer_generates``: RL generating with the trainer's own
        weights, colocated at the trainer's layout with nothing parked
        (request_checks.validate_engine); ``default_rank``: the framework's LoRA rank where
        the request names none; ``hybrid_shards``: the hybrid shard groups (one host's GPUs)
        the framework's launch writes (catalog.hybrid.plan_hybrid_shards: none for RL, whose
        trainer shards over all its ranks), searched beside full sharding (hybrid_domain)."""
        return {**self._choice_domains(model=model, per_node=per_node, shardings=shardings,
                                       trainer_generates=trainer_generates, parallel=parallel,
                                       default_rank=default_rank),
                "dp_shard": hybrid_domain(self.sharding, hybrid_shards),
                **self._layout_domains(model=model, per_node=per_node, parallel=parallel)}

    def _choice_domains(self, *, model: ModelSpec, per_node: int, shardings: tuple[str, ...],
                        trainer_generates: bool, parallel: tuple[str, ...] = ("tp", "pp"),
                        default_rank: int | None = None) -> Domains:
        methods = ("full",) if self.workload == "pretrain" else AUTO_METHODS  # every weight
        rl = self.is_rl and not trainer_generates
        placements = pinned_or(self.placement, PLACEMENTS) if rl else ("colocate",)
        return {
            ("method", "lora_rank"): method_rank_domain(pinned_or(self.method, methods),
                                                        rank_domain(self.lora_rank or
                                                                    default_rank)),
            "optimizer": pinned_or(self.optimizer, AUTO_OPTIMIZERS),
            ("zero_stage", "fsdp"): sharding_domain(pinned_or(self.sharding, shardings)),
            "offload": pinned_or(self.offload, OFFLOADS),
            "checkpointing": pinned_or(self.checkpointing, AUTO_CHECKPOINTINGS),
            ("placement", "role_gpus"): placement_domain(
                placements, workload=self.workload, reference=self.reference,
                has_reward=self.reward_model is not None,
                reward_function=self.reward_function),
            "rollout_tp": pinned_or(self.rollout_tp, tensor_parallel_options(model, per_node))
            if rl else (1,),
            "offload_idle": pinned_or(self.offload_idle, (False, True)) if rl else (False,),
            # expert parallelism: MoE models on a framework whose launch writes it, not RL (its
            # trainer is data parallel: validate_workload); a row keeps ep | dp x cp
            "ep": pinned_or(self.ep, expert_parallel_options(
                model, at_most=min(MAX_EP, self.num_gpus or self.max_gpus)))
            if "ep" in parallel and not self.is_rl else (1,),
        }

    def _layout_domains(self, *, model: ModelSpec, per_node: int,
                        parallel: tuple[str, ...]) -> Domains:
        """tp and pp: 1 for RL (its trainer is data parallel: validate_workload) and for an
        axis the framework does not run, else every degree that splits the heads within a
        host and every pp that divides the layers up to 8; micro-batches up to the global
        batch."""
        tps = tensor_parallel_options(model, per_node) if "tp" in parallel else (1,)
        pps = pipeline_parallel_options(model, at_most=8) if "pp" in parallel else (1,)
        return {
            "tp": (1,) if self.is_rl else pinned_or(self.tp, tps),
            "pp": (1,) if self.is_rl else pinned_or(self.pp, pps),
            "micro_batch_size": pinned_or(self.micro_batch_size, tuple(
                m for m in MICRO_BATCHES if m <= self.global_batch_size)),
        }


def hybrid_domain(sharding: str | None, hybrid_shards: tuple[int, ...]) -> tuple[int | None, ...]:
    """The dp_shard domain: full sharding (None) and the hybrid groups; --sharding fsdp pins
    full sharding, --sharding hsdp the hybrid groups."""
    return {"fsdp": (None,), "hsdp": hybrid_shards}.get(sharding or "", (None, *hybrid_shards))


def validate_plan_request(req: PlanRequest, model: ModelSpec) -> None:
    """Contradictory or impossible pins are bad input (exit 2), not infeasibility."""
    if req.workload == "pretrain" and req.method not in ("full", "auto"):
        raise PlannerError(f"--workload pretrain trains every weight: --method full (got "
                           f"{req.method})")
    if req.pricing == "owned" and not (req.gpus and req.num_gpus):
        raise PlannerError("--pricing owned plans hardware you have: give --gpus TYPE and "
                           "--num-gpus N")
    if req.pricing == "owned" and req.budget_usd is not None:
        raise PlannerError(f"--budget {req.budget_usd:g} does not apply to --pricing owned "
                           "(nothing is bought or rented; the plan is the fastest)")
    if req.platform is not None and req.pricing == "rent":
        raise PlannerError(f"--platform {req.platform} names hosts to buy or own; rentals run "
                           "on the providers' instances (--pricing buy or owned)")
    if req.spot and req.pricing != "rent":
        raise PlannerError(f"--spot rents preemptible instances: it applies to --pricing rent "
                           f"(got {req.pricing})")
    if req.max_gpus_per_offer is not None and req.pricing != "rent":
        raise PlannerError(f"--max-gpus-per-offer {req.max_gpus_per_offer} caps rental offers: "
                           f"it applies to --pricing rent (got {req.pricing})")
    if req.price_kind is not None and req.pricing != "buy":
        raise PlannerError(f"--price-kind {req.price_kind} prices a purchase: it applies to "
                           f"--pricing buy (got {req.pricing})")
    if isinstance(req.lora_rank, int) and req.lora_rank <= 0:
        raise PlannerError(f"--lora-rank {req.lora_rank} must be a positive integer or auto")
    _validate_pinned_layout(req)
    error = tp_error(req.tp, model) if req.tp is not None else None
    if error:
        raise PlannerError(error)
    if req.ep not in (None, 1):
        if model.moe is None:
            raise PlannerError(f"--ep {req.ep} needs a Mixture-of-Experts model; {model.id} is "
                               "dense (use --ep 1)")
        if model.moe.num_experts % req.ep:
            raise PlannerError(f"--ep {req.ep} must divide the {model.moe.num_experts} routed "
                               f"experts of {model.id}")
        if req.is_rl:
            raise PlannerError(f"--ep {req.ep}: the RL trainer is data parallel only (--ep 1)")
    if req.pp is not None and model.num_layers % req.pp:  # the plan's stages are equal
        raise PlannerError(f"--pp {req.pp} must divide the {model.num_layers} layers of {model.id}")
    error = model_parallel_error(tp=req.tp or 1, pp=req.pp or 1, num_gpus=req.num_gpus) \
        if req.num_gpus is not None else None
    if error:
        raise PlannerError(error)
    if req.num_gpus is not None and req.num_gpus > req.max_gpus:
        raise PlannerError(f"--num-gpus {req.num_gpus} exceeds --max-gpus {req.max_gpus}")
    if req.micro_batch_size and req.global_batch_size % req.micro_batch_size:
        raise PlannerError(f"--micro-batch {req.micro_batch_size} does not divide --global-batch "
                           f"{req.global_batch_size}")
    _validate_plan_workload(req, model)


def _validate_pinned_layout(req: PlanRequest) -> None:
    """The pins of method, rank, sharding and offload under TrainConfig's own combination rules
    (request_checks.layout_error): bad input when no value of the open ones satisfies them,
    named by the first rule the pins break."""
    ranks = (None, DEFAULT_LORA_RANK) if req.lora_rank is None else (req.lora_rank,)
    errors = []
    for method, rank, (zero_stage, fsdp), offload in product(
            pinned_or(req.method, Method.__args__), ranks,  # type: ignore[attr-defined]
            sharding_domain(pinned_or(req.sharding, tuple(SHARDING_FIELDS))),
            pinned_or(req.offload, OFFLOADS)):
        error = layout_error(Choice(method, rank, "adamw", zero_stage, fsdp, offload, "none"))
        if error is None:
            return
        errors.append(error)
    raise PlannerError(errors[0])


def _validate_plan_workload(req: PlanRequest, model: ModelSpec) -> None:
    """The preference/RL options of a plan request, checked like TrainConfig's."""
    if req.rollout_tp is not None and req.rollout_tp > req.max_gpus:
        raise PlannerError(f"--rollout-tp {req.rollout_tp} exceeds --max-gpus {req.max_gpus}: "
                           "an engine runs on that many GPUs")
    probe = TrainConfig(
        **req.job_fields(), placement=req.placement or "colocate",
        rollout_tp=req.rollout_tp or 1, offload_idle=bool(req.offload_idle),
        num_gpus=max(2, 2 * (req.rollout_tp or 1)),
        # split: the space sizes the groups (space._with_dp); the probe gives the engines
        # rollout_tp GPUs and the actor the rest
        role_gpus=(("actor", max(1, req.rollout_tp or 1)),) if req.placement == "split"
        else None,
    )
    validate_workload(probe, model)
    if req.is_rl and (req.tp not in (None, 1) or req.pp not in (None, 1)):
        raise PlannerError(f"{req.workload}: the trainer is data parallel; --tp/--pp apply to "
                           f"SFT (use --rollout-tp for the engines)")
    if req.critic_model and req.workload != "ppo":
        raise PlannerError(f"--critic-model {req.critic_model} applies to --workload ppo only "
                           f"(got {req.workload})")
    if req.reward_model and req.reward_function:
        raise PlannerError(reward_conflict(req.reward_model))
    if req.reward_model and not req.is_rl:
        raise PlannerError(f"--reward-model {req.reward_model} applies to --workload ppo or "
                           f"grpo (got {req.workload})")
