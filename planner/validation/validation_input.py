"""The fields of a validation case that the predictions read, with their types and bounds.

A case file (schema of ../shared/validation) may carry any other field; those listed here must
be present (null only where the schema allows it), have the stated type (numbers stay numbers:
``gpu_memory_gib: "80"`` is an error, not 80) and lie within the bounds of the request models,
so that no prediction meets a value it cannot use.
``check_cases`` reports every bad case at once, capped (inputs.capped), naming case and field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.catalog.specs import MAX_MEMORY_GIB
from planner.errors import PlannerError
from planner.inputs import MAX_COUNT, MAX_FLOAT, MAX_STRING, capped, short

Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Amount = Annotated[float, Field(ge=0, le=MAX_FLOAT)]
Text = Annotated[str, Field(max_length=MAX_STRING)]


# The schema's model-state sharding values (../shared/validation/README.md, field table).
CASE_SHARDINGS = ("none", "ddp", "zero1", "zero2", "zero3", "fsdp", "megatron")


def case_sharding(case: dict[str, Any]) -> str:
    """The case's sharding label (null: none); PlannerError for a value outside the schema
    (a case that writes 'fsdp2' or 'zero3_offload' is not modelled rather than read as
    none)."""
    sharding = case.get("sharding") or "none"
    if sharding not in CASE_SHARDINGS:
        raise PlannerError(f"sharding {short(sharding, 30)}: the schema's values are "
                           f"{', '.join(CASE_SHARDINGS)} (null: none)")
    return str(sharding)


class _Fields(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False, frozen=True)


class _Rl(_Fields):
    prompt_len: Count | None
    response_len: Count | None
    rollout_n: Count | None
    rollout_tp: Count | None
    gpu_memory_utilization: Annotated[float, Field(ge=0, le=1)] | None


class _Outcome(_Fields):
    kind: Text
    peak_gib: Annotated[float, Field(ge=0, le=MAX_MEMORY_GIB)] | None
    measured_as: Text | None


class _Extra(_Fields):
    grad_accum: Count | None = None
    target_modules: Text | None = None
    rollouts_per_step: Count | None = None
    per_device_batch_examples: Count | None = None
    pairs_per_micro_batch: Count | None = None
    ppo_max_token_len_per_gpu: Count | None = None
    max_seq_len: Count | None = None
    avg_gen_seq_len: Amount | None = None
    ulysses_sp: Count | None = None
    train_batch_size_prompts: Count | None = None
    train_batch_size: Count | None = None
    batch_size_prompts: Count | None = None
    generation_tp: Count | None = None
    lora_rank: Count | None = None
    lora_dropout: Annotated[float, Field(ge=0, lt=1)] | None = None  # the adapters' dropout
    total_tokens: Count | None = None
    vp: Count | None = None
    paged_optimizer: bool | None = None
    optimizer_in_bwd: bool | None = None
    compile: bool | None = None
    chunked_ce: bool | None = None
    offloaded_checkpointing: bool | None = None
    fsdp_cpu_offload: bool | None = None
    rollout_enforce_eager: bool | None = None  # the vLLM rollout ran without CUDA graphs
    rollout_vllm_v0: bool | None = None  # the vLLM rollout ran vLLM's V0 engine
    rollout_max_num_seqs: Count | None = None  # the engine's max_num_seqs as the run set it
    timing_gen_s: Amount | None = None  # RL: the generation phase of the logged iteration
    reference: bool | None = None  # RL: a reference model ran (False: no KL term)
    reward_function: bool | None = None  # PPO: a function scored the responses, no reward model
    # RL: tokens per sequence of roles whose passes kept padding (verl use_remove_padding off)
    role_seq_lens: dict[str, Count] | None = None
    reward_model: Text | None = None
    critic_reward_model: Text | None = None
    weight_quant: Text | None = None
    optimizer: Text | None = None
    roles: Text | None = None
    policy: Text | None = None
    fused_lm_head_chunk_size: Count | None = None
    master_weights_dtype: Text | None = None
    frozen_base_weights_dtype: Text | None = None
    pure_bf16: bool | None = None  # bf16 weights and optimizer states, no fp32 master copy
    ema_copy: bool | None = None  # RL: the actor's EMA copy on the GPUs (--enable_ema)
    # QLoRA: dtype the parts left unquantized (norms, embeddings, head) were held in
    qlora_unquantized_dtype: Literal["16bit", "fp32"] | None = None
    attention: Text | None = None  # the kernel it ran (attention.KERNEL_NAMES) or eager
    trainer_only: bool | None = None
    critic_model: Text | None = None
    avg_prompt_len: Amount | None = None
    avg_response_len: Amount | None = None
    # DeepSpeed-Chat's --generation_batches: batches of the per-device batch an RL iteration
    # generates on every GPU (case_inputs.rl_case)
    generation_batches: Count | None = None
    # the run used the largest per-device batch that fits, at most global_batch_size prompts
    # per iteration; script_micro_batch where none fits (validate_throughput)
    largest_fitting_batch: bool | None = None
    script_micro_batch: Count | None = None
    # verl's global (deprecated) ppo_micro_batch_size before its per-rank normalisation, and
    # the reference model's param_offload: recorded settings, not read by the predictions
    ppo_micro_batch_size_global: Count | None = None
    ref_param_offload: bool | None = None
    # the job's nodes hold fewer GPUs than its platform (throughput_cases.case_platform); FSDP
    # hybrid sharding (hsdp / hybrid_shard: case_inputs._dp_shard); expert parallel degree
    gpus_per_node: Count | None = None
    sharding_strategy: Text | None = None
    ep: Count | None = None


class _Case(_Fields):
    """Fields of every case. A field without a default must be present (the predictions read
    it as case[key]); ``| None`` ones may be null."""

    model: Text | None
    id: Text | None = None
    framework: Text | None = None
    workload: Text | None = None
    gpu: Text | None = None
    precision: Text | None = None
    sharding: Text | None = None
    grad_checkpointing: Text | None = None
    micro_batch_size: Count | None = None
    seq_len: Count | None = None
    tp: Count | None = None
    pp: Count | None = None
    cp: Count | None = None
    rl: _Rl | None = None
    extra: _Extra | None = None
    usable_for_accuracy: bool | None = None
    params_b: Amount | None = None
    gpu_memory_gib: Annotated[float, Field(gt=0, le=MAX_MEMORY_GIB)] | None = None
    source: Text | None = None
    location: Text | None = None
    # The framework release or commit the measurement ran (null: the source does not say).
    framework_version: Text | None = None
    # An architecture without a Hugging Face id: a config.json path relative to the case's file
    # (validate.load_cases makes it the case's model).
    architecture_config: Text | None = None

    @model_validator(mode="after")
    def _layout(self) -> _Case:
        """The GPUs hold whole tp x pp x cp groups (the data-parallel size is their quotient)."""
        n, tp, pp, cp = self.num_gpus, self.tp, self.pp, self.cp  # type: ignore[attr-defined]
        if n is None and self.model is not None and tp is not None and pp is not None:
            raise ValueError("num_gpus is null while tp and pp state a layout")
        if n is not None and None not in (tp, pp) and n % (tp * pp * (cp or 1)):
            raise ValueError(f"num_gpus {n} is not a multiple of tp x pp x cp "
                             f"({tp} x {pp} x {cp or 1})")
        return self


class MemoryCase(_Case):
    """A memory case (memory_cases.yaml): a peak, a fit or an OOM."""

    num_gpus: Count
    method: Text | None = None
    optimizer: Text | None = None
    offload: Text | None = None
    lora_rank: Count | None = None
    outcome: _Outcome | None = None


class ThroughputCase(_Case):
    """A throughput case (throughput_cases.yaml): a measured value in its metric."""

    metric: Text
    value: Amount
    gpu: Text | None
    num_gpus: Count | None
    global_batch_size: Count | None
    # CPU offload of model states (memory schema values); project cases state it
    offload: Text | None = None


class _Addition(BaseModel):
    """Fields the project adds to one published case (validation/case_additions.yaml): what
    the case's source states but the shared case file does not carry (``set``: fills fields
    the case leaves null or out), and what the source contradicts in the case (``correct``:
    replaces the case's own values; mappings merge key by key). ``framework`` guards the
    match (a case of another framework with the same id is left alone); ``evidence`` says
    where each added or corrected value was read."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    framework: Text
    evidence: Text
    set: dict[str, Any] = Field(default_factory=dict)
    correct: dict[str, Any] = Field(default_factory=dict)


class CaseAdditions(BaseModel):
    """The case-additions file: published case id -> its additions."""
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    schema_version: Literal[1]
    cases: dict[str, _Addition]


def parse_additions(data: Any, *, what: str) -> CaseAdditions:
    """The additions document, or PlannerError naming every bad entry."""
    try:
        return CaseAdditions.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg'].lower()}"
                    for err in exc.errors()]
        raise PlannerError(f"{what}: {len(problems)} bad field(s): {capped(problems)}") from None


def _fill(own: Any, added: Any) -> Any:
    """``added`` under ``own``: the case's own non-null values win, mappings merge by key."""
    if isinstance(own, dict) and isinstance(added, dict):
        return {**added, **{k: _fill(v, added.get(k)) for k, v in own.items()}}
    return added if own is None else own


def _override(own: Any, correct: Any) -> Any:
    """``correct`` over ``own``: the corrected values win, mappings merge by key."""
    if isinstance(own, dict) and isinstance(correct, dict):
        return {**own, **{k: _override(own.get(k), v) for k, v in correct.items()}}
    return correct


def with_additions(cases: list[dict[str, Any]], additions: CaseAdditions) -> list[dict[str, Any]]:
    """Each case with the project's additions for its id: ``set`` filled in where the case
    itself is silent (a field the case states keeps its value), then ``correct`` replacing
    what the case states; the evidence under ``additions``, the corrected top-level fields
    under ``corrected``."""
    out = []
    for case in cases:
        add = additions.cases.get(str(case.get("id")))
        if add is None or case.get("framework") != add.framework:
            out.append(case)
            continue
        filled = _override(_fill(case, add.set), add.correct)
        out.append({**filled, "additions": add.evidence,
                    **({"corrected": sorted(add.correct)} if add.correct else {})})
    return out


def check_cases(cases: list[Any], *, what: str) -> list[dict[str, Any]]:
    """``cases`` unchanged when every one is a mapping whose read fields are well typed;
    PlannerError listing the bad ones (case id or index, field, problem) otherwise."""
    problems: list[str] = []
    for index, case in enumerate(cases):
        if not isinstance(case, dict):
            problems.append(f"case {index}: expected a mapping of fields, got "
                            f"{type(case).__name__}")
            continue
        try:
            (ThroughputCase if "metric" in case else MemoryCase).model_validate(case)
        except ValidationError as exc:
            name = case.get("id") if isinstance(case.get("id"), str) else f"case {index}"
            problems += [f"{short(name, 50)}: {'.'.join(str(p) for p in err['loc'])} "
                         f"{short(err.get('input'), 30)}: {err['msg'].lower()}"
                         for err in exc.errors()]
    if problems:
        raise PlannerError(f"{what}: {len(problems)} bad field(s): {capped(problems)}")
    return cases
