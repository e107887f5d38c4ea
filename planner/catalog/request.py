"""What the user asked: one concrete training configuration (TrainConfig), validated.

A TrainConfig is one point of the planner's space: the memory and throughput models take it
together with a ModelSpec and a GpuSpec. ``request_checks.validate_config`` checks it against the
model and raises PlannerError with a one-line message naming the bad value and what is allowed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.catalog.specs import GpuSpec, RolloutEngine
from planner.inputs import FieldErrors, check_number

Workload = Literal["pretrain", "sft", "rm", "dpo", "ppo", "grpo"]
Placement = Literal["colocate", "separate", "split"]
Method = Literal["full", "lora", "dora", "qlora", "freeze"]
PEFT_METHODS = ("lora", "dora", "qlora")  # the adapter methods: a LoRA rank applies to these
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw-8bit", "sgd", "sgd-momentum", "adafactor"]
Offload = Literal["none", "optimizer", "optimizer+params"]
Checkpointing = Literal["none", "selective", "full"]
Precision = Literal["bf16", "fp16", "fp32", "fp8"]
QuantFormat = Literal["nf4", "gptq"]

WORKLOADS: tuple[str, ...] = Workload.__args__  # type: ignore[attr-defined]
METHODS: tuple[str, ...] = Method.__args__  # type: ignore[attr-defined]
OPTIMIZERS: tuple[str, ...] = Optimizer.__args__  # type: ignore[attr-defined]
OFFLOADS: tuple[str, ...] = Offload.__args__  # type: ignore[attr-defined]
CHECKPOINTINGS: tuple[str, ...] = Checkpointing.__args__  # type: ignore[attr-defined]
PRECISIONS: tuple[str, ...] = Precision.__args__  # type: ignore[attr-defined]
PLACEMENTS: tuple[str, ...] = Placement.__args__  # type: ignore[attr-defined]
RL_WORKLOADS = ("ppo", "grpo")
ROLLOUT_ENGINES: tuple[str, ...] = RolloutEngine.__args__  # type: ignore[attr-defined]
# Engines that generate with the trainer's own resident weights, no reserved memory fraction:
# Hugging Face generate (TRL's GRPOTrainer, use_vllm=False); others: rollout.engine.
TRAINER_ENGINES = ("hf-generate",)
# Engines on the actor's own parameters, cache sized to the batch (models/rollout.py).
ACTOR_WEIGHT_ENGINES = ("deepspeed-hybrid",)
# The engine of a job whose framework states none (the planner's RL default).
DEFAULT_ROLLOUT_ENGINE = "vllm"
PAIRWISE_WORKLOADS = ("rm", "dpo")
# GRPO samples a group per prompt (verl's and the DeepSeekMath paper's examples use 5-64);
# PPO one response per prompt.
DEFAULT_ROLLOUT_N = {"ppo": 1, "grpo": 5}
DEFAULT_ROLLOUT_BATCH = 256

DEFAULT_LORA_RANK = 16
# LoRA alpha = 2 x rank: LLaMA-Factory's default when lora_alpha is unset ("default: lora_rank
# * 2", LoraArguments.lora_alpha, applied in FinetuningArguments.__post_init__), at
# https://github.com/hiyouga/LLaMA-Factory/blob/f9ced615c39dac9692ad2f9efd1c03628ad023ee/src/llamafactory/hparams/finetuning_args.py
# Alpha scales the adapter's output only: memory and speed do not depend on it.
LORA_ALPHA_PER_RANK = 2
# Ranks the planner tries with --lora-rank auto, highest (fullest fidelity) first.
LORA_RANKS = (64, 32, 16, 8)
LoraTarget = Literal["all-linear", "q", "k", "v", "o", "gate", "up", "down"]
LORA_TARGETS: tuple[str, ...] = LoraTarget.__args__
DEFAULT_LORA_TARGETS = ("all-linear",)

Sharding = Literal["none", "zero1", "zero2", "zero3", "fsdp", "hsdp"]

# What each sharding label is in TrainConfig's fields: (zero_stage, fsdp); a plan pinned to
# fsdp shards over every rank, to hsdp over one host's GPUs (TrainConfig.dp_shard).
SHARDING_FIELDS: dict[str, tuple[int, bool]] = {
    "none": (0, False), "zero1": (1, False), "zero2": (2, False), "zero3": (3, False),
    "fsdp": (0, True), "hsdp": (0, True)}


def zero_stage_of(sharding: str) -> int:
    """The ZeRO stage of a sharding label (0 for none and FSDP)."""
    return SHARDING_FIELDS.get(sharding, (0, False))[0]


class _Request(BaseModel):
    """A request model: frozen, finite, bounded (inputs.check_number); bad fields raise
    inputs.FieldErrors, a PlannerError, from the constructor and from model_validate."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise FieldErrors(type(self).__name__, exc.errors()) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any):  # type: ignore[override]
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise FieldErrors(cls.__name__, exc.errors()) from None

    @field_validator("*")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        return check_number(value)


def method_label(method: str, rank: int | None, *,
                 targets: tuple[str, ...] | None = None) -> str:
    """The method as plans and reports name it: 'full', or an adapter method with its rank,
    'lora r16'; given the adapter's ``targets``, the plan text's form 'lora r=16 on q,v'.
    ``rank`` None (or 0): a method without adapters."""
    if not rank:
        return method
    if targets is not None:
        return f"{method} r={rank} on {','.join(targets)}"
    return f"{method} r{rank}"


class TrainConfig(_Request):
    """One concrete configuration. Defaults follow common Hugging Face/PEFT practice."""

    workload: Workload = "sft"
    method: Method = "full"
    lora_rank: int | None = Field(default=None, gt=0)
    lora_targets: tuple[LoraTarget, ...] = DEFAULT_LORA_TARGETS
    lora_dropout: float = Field(
        default=0.0, ge=0, lt=1, description="LoRA dropout probability on the adapters' input "
        "(PEFT LoraConfig.lora_dropout, default 0.0): above 0 each dropout keeps its output and "
        "mask for backward")
    lora_dropout_shared_qkv: bool = Field(
        default=False, description="one LoRA dropout for the q, k, v adapters' shared input "
        "(LitGPT's fused LoRAQKVLinear), not one each (PEFT, torchtune)")
    freeze_trainable_layers: int = Field(default=2, gt=0, description="method freeze: last k")
    quant_format: QuantFormat = "nf4"
    optimizer: Optimizer = "adamw"
    precision: Precision = "bf16"
    pure_bf16: bool = Field(
        default=False, description="no fp32 master weights; optimizer states in 16 bit"
    )
    pure_16bit_methods: tuple[str, ...] = Field(
        default=(), description="methods the framework trains only in pure 16 bit whatever "
        "pure_bf16 says (LitGPT's quantized LoRA: bf16-true); read through pure_16bit"
    )
    num_gpus: int = Field(default=1, gt=0)
    zero_stage: int = Field(default=0, ge=0, le=3)
    fsdp: bool = False
    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    ep: int = Field(
        default=1, gt=0, description="expert parallel: each MoE layer's routed experts are "
        "split over ep GPUs of the data x context parallel ranks, tokens exchanged by "
        "all-to-all (Megatron-Core --expert-model-parallel-size); 1 = every GPU holds every "
        "expert")
    dp_shard: int | None = Field(
        default=None, gt=0, description="hybrid sharding (FSDP HYBRID_SHARD / HSDP, torchtitan "
        "data_parallel_shard_degree): weights and states sharded over dp_shard x cp ranks and "
        "replicated over dp / dp_shard groups, whose gradients are all-reduced; None: over all")
    offload: Offload = "none"
    checkpointing: Checkpointing = "full"
    checkpoint_fraction: float = Field(
        default=1.0, gt=0, le=1, description="full checkpointing on this share of the layers, "
        "evenly spaced (fms-fsdp selective_checkpointing p, Megatron --recompute-num-layers / "
        "layers, torchtitan layer AC every k-th: 1/k); the others keep their activations")
    framework: str | None = Field(
        default=None, max_length=100, description="framework profile id or alias "
        "(catalog/frameworks) the job runs on; None: the workload's default framework, or the "
        "first that runs the layout (frameworks.choose)"
    )
    fsdp_no_sync: bool = Field(
        default=False, description="FSDP with gradient accumulation skips the reduce-scatter of "
        "every micro-batch but the last (no_sync), keeping the gradients unsharded until the step"
    )
    fp32_grad_reduce: bool = Field(
        default=False, description="FSDP reduce-scatters gradients in fp32 (FSDP2 reduce_dtype "
        "float32, e.g. torchtitan, OLMo-core); False: in the 16-bit compute dtype")
    selective_checkpointing: Literal["core-attention", "op"] = Field(
        default="core-attention", description="what checkpointing 'selective' recomputes: "
        "core-attention (Megatron: the attention's softmax and dropout; nothing more under "
        "flash attention) or op (PyTorch op-level selective checkpointing as torchtitan: every "
        "other matmul output and the attention output kept, the rest recomputed)"
    )
    micro_batch_size: int = Field(default=1, gt=0)
    grad_accum: int = Field(default=1, gt=0)
    seq_len: int = Field(
        default=2048, gt=0, description="tokens per sequence as computed: the padded length of the "
        "longest sample in a batch, or the pack length with packing"
    )
    flash_attention: bool = True
    attention_kernel: Literal["fa2", "fa3", "cudnn"] | None = Field(
        default=None, description="the fused attention kernel under flash_attention: fa2 "
        "(FlashAttention-2, PyTorch SDPA's flash backend), fa3 (FlashAttention-3, Hopper), "
        "cudnn (cuDNN fused attention, TransformerEngine on Hopper and newer); None: fa2"
    )
    expand_kv_heads: bool = Field(
        default=False, description="k and v copied to every query head before attention "
        "(torchtune, Hugging Face sdpa before native GQA), not read by a GQA kernel"
    )
    chunked_loss: bool = Field(default=False, description="logits/CE computed in chunks")
    lm_head_vocab_chunk: int | None = Field(
        default=None, gt=0, description="fused LM head and loss computed over slices of this "
        "many vocabulary rows at a time: the [tokens, vocab] logits are never materialised "
        "(prime-rl FusedOutputLinear); None = the whole vocabulary at once"
    )
    loss_in_fp32: bool = Field(
        default=True, description="logits upcast to fp32 for the loss (HF models, autocast)"
    )
    loss_holds_logits: bool = Field(
        default=False, description="the fp32 logits stay referenced through the loss backward "
        "(one more fp32 [tokens, vocab] tensor at the loss peak)"
    )
    loss_alive_with_recompute: bool = Field(
        default=False, description="the loss buffers are counted alive with the working set of "
        "the first layer backward recomputes (an RL actor's update: measured peaks hold them; "
        "memory.forward_activation_bytes); False: the loss backward ends first"
    )
    shard_embeddings: bool = Field(
        default=False, description="FSDP: embedding and head wrapped as units of their own")
    compiled: bool = Field(
        default=False, description="torch.compile: norms and act(gate) are recomputed in backward")
    paged_optimizer: bool = Field(
        default=False, description="optimizer states in CUDA managed memory (bitsandbytes paged)")
    optimizer_in_backward: bool = Field(
        default=False, description="each parameter is updated as its gradient arrives")
    fused_optimizer: bool = Field(
        default=False, description="optimizer step without full-size temporaries (torch fused)")
    # --- preference and RL workloads (workloads.py) ------------------------------------------
    # rm/dpo: micro_batch_size and global_batch_size count pairs (2 sequences each).
    # ppo/grpo: seq_len = prompt_len + response_len; micro_batch_size and global_batch_size count
    # sequences of one update micro-step / optimizer step; rollout_batch counts prompts per RL
    # iteration, each sampled rollout_n times.
    prompt_len: int | None = Field(default=None, gt=0)
    response_len: int | None = Field(default=None, gt=0)
    rollout_n: int | None = Field(default=None, gt=0, description="samples per prompt")
    rollout_batch: int = Field(default=DEFAULT_ROLLOUT_BATCH, gt=0, description="prompts/iteration")
    rollout_tp: int = Field(default=1, gt=0)
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, lt=1, description="vLLM >= 0.7: fraction of total GPU memory the "
        "engine takes; None = just what the rollout batch needs"
    )
    logprob_micro_batch: int | None = Field(
        default=None, gt=0, description="sequences per forward-only micro-step (default: "
        "micro_batch_size)")
    rollout_engine: RolloutEngine = Field(
        default=DEFAULT_ROLLOUT_ENGINE, description="RL: what generates the rollouts: a "
        "vLLM-style engine (vllm, sglang, deepspeed-hybrid, megatron) or the trainer's own "
        "model (hf-generate); set from the framework profile unless given"
    )
    rollout_eager: bool = Field(
        default=False, exclude=True, description="RL: the vLLM-style engine decodes without "
        "CUDA graphs (the framework's enforce_eager; set from its profile, not written out)")
    rollout_max_seqs: int | None = Field(
        default=None, gt=0, exclude=True, description="RL: the most sequences a vLLM-style "
        "engine decodes at once (the framework's max_num_seqs); None: vLLM's default")
    rollout_v0: bool = Field(
        default=False, exclude=True, description="RL: the vLLM engine is its V0 engine (vLLM "
        "before 0.8, or a V0 fallback): per-sequence host work between decoding steps")
    generate_micro_batch: int | None = Field(
        default=None, gt=0, description="hf-generate: sequences per generate call on one GPU; "
        "None = the GPU's whole share of the iteration (TRL generates its local generation "
        "batch in one call)"
    )
    reference: bool = Field(default=True, description="frozen reference model (KL / DPO)")
    reward_function: bool = Field(
        default=False, description="PPO: rewards from a function of the response (a rule, a "
        "verifier or a remote service), no reward-model pass; GRPO's default")
    ema_copy: bool = Field(
        default=False, description="RL: an exponential-moving-average copy of the actor's "
        "16-bit weights stays on the GPUs, never run in the iteration (DeepSpeed-Chat --enable_ema)"
    )
    precompute_ref: bool = Field(
        default=False, description="DPO: reference log-probs computed before training")
    placement: Placement = "colocate"
    rollout_gpus: int | None = Field(
        default=None, gt=0, description="separate placement: GPUs of the rollout engines")
    role_gpus: tuple[tuple[str, int], ...] | None = Field(
        default=None, description="split placement: GPUs of each model role, e.g. (('actor', "
        "4), ('critic', 2), ('reference', 1), ('reward', 1)); the engines take the rest"
    )
    offload_idle: bool = Field(
        default=False, description="RL: states of idle roles move to host RAM between phases "
        "(verl param/optimizer offload)"
    )
    separate_lora_reference: bool = Field(default=False, description="LoRA RL/DPO: the "
        "reference is a model of its own (OpenRLHF), not the base with the adapters off")
    mean_response_len: int | None = Field(
        default=None, gt=0, description="RL: mean tokens a response runs to when generation "
        "stops at end-of-sequence; responses stop at response_len, and the longest decode alone "
        "at the end (the generation tail); None = every response at response_len")
    mean_seq_len: int | None = Field(
        default=None, gt=0, description="RL: average real tokens per sequence in the trainer's "
        "passes when they drop padding (verl use_remove_padding, OpenRLHF packing); None = "
        "every sequence at prompt + response"
    )
    role_seq_lens: tuple[tuple[str, int], ...] = Field(
        default=(), exclude=True, description="RL: tokens per sequence of the named roles' passes "
        "where they keep the padding the others drop (verl without use_remove_padding pads "
        "prompts and responses to their maxima), e.g. (('critic', 1536),)")
    fp32_trained_weights: bool = Field(
        default=False, description="FSDP: the trained model's flat parameters, frozen base "
        "included, are fp32 (verl loads the actor in fp32 under mixed precision)"
    )
    engine_sleep: bool = Field(
        default=True, description="RL colocated: the engine frees its KV cache and offloads its "
        "weights while training runs (vLLM sleep mode, verl free_cache_engine)"
    )
    offload_checkpoints: bool = Field(
        default=False, description="full checkpointing keeps each layer's saved input in host "
        "RAM, reloading it for the layer's recomputation (Unsloth's offloaded checkpointing)"
    )
    peft_trains_embeddings: bool = Field(default=False, description="LoRA-family: the token "
        "embedding and the LM head train beside the adapters, as PEFT modules_to_save copies")
    offload_activations: bool = Field(default=False, description="every tensor the forward "
        "saves waits in host RAM, reloaded a layer ahead of backward (torchtune's activation "
        "offloading): the layers' inputs under full checkpointing, all they save without")
    fused_elementwise: bool = Field(
        default=False, description="the framework's model code runs norms, rotary, the MLP "
        "activation and residual adds as fused kernels without torch.compile (TransformerEngine, "
        "Triton, Liger, XLA); False: eager PyTorch, one kernel per op"
    )
    python_launched_fusion: bool = Field(default=False, description="the fused kernels are "
        "launched from Python one by one (Liger's Triton): the host's time per layer is eager's")
    fused_norms: bool = Field(default=False, description="norms run as one fused kernel each "
        "where the rest run eager (torchtitan norm_type fused_rmsnorm, apex FusedRMSNorm)")
    moe_fp32_scores: bool = Field(default=False, description="MoE: the routing scores multiply "
        "all routed tokens' expert outputs at once in fp32 (torchtitan's MoE layer)")
    fused_lora_kernels: bool = Field(
        default=False, description="LoRA layers as fused autograd functions saving only their "
        "inputs (and a gated MLP's gate and up outputs), gradients written in place (Unsloth)"
    )
    qlora_16bit_rest: bool = Field(
        default=False, description="QLoRA: the unquantized parts (embeddings, head) stay 16-bit "
        "without pure bf16 (no PEFT prepare_model_for_kbit_training upcast to fp32)"
    )
    qlora_fp32_norms: bool | None = Field(
        default=None, description="QLoRA: the norm weights are fp32 (TRL before 0.26 and "
        "OpenRLHF cast them alone); None: as the rest (not qlora_16bit_rest)"
    )
    quantized_head: bool = Field(
        default=False, description="QLoRA: the LM head is stored 4-bit like the layers' "
        "linears (Lightning Fabric's BitsandbytesPrecision replaces every nn.Linear)"
    )
    quant_keeps_inputs: bool = Field(
        default=False, description="QLoRA: every 4-bit base matmul keeps its 16-bit input for "
        "backward (bitsandbytes before 0.43.2: MatMul4Bit saved ctx.tensors = (A, B); "
        "bitsandbytes-foundation/bitsandbytes 9e753741, #1270, keeps only the packed weight)"
    )
    nf4_double_quant: bool = Field(
        default=True, description="QLoRA NF4: the block constants are double-quantised (8-bit, "
        "0.127 bit a weight: bitsandbytes compress_statistics, Hugging Face "
        "bnb_4bit_use_double_quant) rather than one fp32 absmax per 64 weights (0.5 bit a weight: "
        "LitGPT's bnb.nf4)"
    )
    holds_previous_outputs: bool = Field(
        default=False, description="the training loop keeps the previous micro-batch's outputs "
        "referenced until the next forward returns (LitGPT: logits = model(...)), and with them "
        "its autograd graph: the logits and what the graph holds outside its saved tensors stay "
        "alive (held_outputs.held_bytes_per_token)"
    )
    loss_seq_chunk: int | None = Field(
        default=None, gt=0, description="a loss over chunks of this many sequence positions "
        "whose graphs are all built before backward (LitGPT's chunked_cross_entropy over 128-"
        "position lm_head chunks): every chunk's fp32 log-softmax is saved, one chunk's "
        "gradients are alive at a time; None: no such chunks"
    )
    loss_token_chunk_gib: float | None = Field(
        default=None, gt=0, description="head and loss fused over token chunks of at most this "
        "many GiB of fp32 logits, the gradient taken in the forward pass (Unsloth's fused "
        "cross-entropy); None: not fused over tokens"
    )
    loss_linear_fused: bool = Field(default=False, description="head and loss fused over token "
        "chunks of about tokens x hidden logits, gradients taken in forward (Liger's FLCE)")

    @model_validator(mode="before")
    @classmethod
    def _rl_seq_len(cls, data: object) -> object:
        return _fill_rl_seq_len(data)

    @property
    def dp(self) -> int:
        """Data-parallel degree of the trainer (separate RL placement: the non-engine GPUs)."""
        gpus = self.num_gpus
        if self.workload in RL_WORKLOADS and self.placement == "separate":
            gpus -= rollout_gpu_count(self)
        if self.workload in RL_WORKLOADS and self.placement == "split" and self.role_gpus:
            gpus = dict(self.role_gpus).get("actor", gpus)  # none: validate_workload says so
        return gpus // (self.tp * self.pp * self.cp)

    @property
    def pure_16bit(self) -> bool:
        """No fp32 master weights, optimizer states in 16 bit: pure_bf16, or a method the
        framework trains only so (pure_16bit_methods). The models read this, not pure_bf16."""
        return self.pure_bf16 or self.method in self.pure_16bit_methods

    @property
    def fuses_elementwise(self) -> bool:
        """Norms, rotary, activation and residual adds run fused: the framework's kernels
        (fused_elementwise) or torch.compile. The speed models read this."""
        return self.fused_elementwise or self.compiled

    @property
    def is_peft(self) -> bool:
        """True for an adapter method (LoRA, DoRA, QLoRA)."""
        return self.method in PEFT_METHODS

    @property
    def rank(self) -> int:
        """The LoRA rank, DEFAULT_LORA_RANK when none is set."""
        return self.lora_rank or DEFAULT_LORA_RANK

    @property
    def adapter_rank(self) -> int | None:
        """The rank of the trained adapters; None for a method without adapters."""
        return self.rank if self.is_peft else None

    @property
    def lora_alpha(self) -> int:
        """The LoRA scale numerator every launch writes: LORA_ALPHA_PER_RANK x the rank."""
        return LORA_ALPHA_PER_RANK * self.rank

    @property
    def method_label(self) -> str:
        """'full', 'lora r16': the method, with its rank for an adapter method."""
        return method_label(self.method, self.adapter_rank)

    @property
    def paged(self) -> bool:
        """True when the optimizer states are paged."""
        return self.paged_optimizer or self.optimizer == "paged-adamw-8bit"

    @property
    def shards_weights(self) -> bool:
        """True when the weights are sharded over the data-parallel ranks (FSDP or ZeRO-3)."""
        return self.fsdp or self.zero_stage == 3

    @property
    def global_batch_size(self) -> int:
        """Examples per optimizer step: micro batch x grad accumulation x dp."""
        return self.micro_batch_size * self.grad_accum * self.dp

    @property
    def is_rl(self) -> bool:
        """True for an RL workload (RL_WORKLOADS)."""
        return self.workload in RL_WORKLOADS

    @property
    def sequences_per_example(self) -> int:
        """rm and dpo train on (chosen, rejected) pairs: two sequences per example."""
        return 2 if self.workload in PAIRWISE_WORKLOADS else 1

    @property
    def samples_per_prompt(self) -> int:
        """Responses sampled per prompt; the workload's default when none is set."""
        return self.rollout_n or DEFAULT_ROLLOUT_N.get(self.workload, 1)

    @property
    def decoded_lengths(self) -> tuple[int, int | None]:
        """RL: (mean tokens each response is decoded to, the cap the longest run up to when
        that mean is below it, else None)."""
        if self.mean_response_len:
            return self.mean_response_len, self.response_len
        return self.response_len or 1, None

    @property
    def logprob_batch(self) -> int:
        """The micro batch of the log-prob passes; the training micro batch when unset."""
        return self.logprob_micro_batch or self.micro_batch_size

    @property
    def generates_in_trainer(self) -> bool:
        """RL rollouts generated by the trainer's own model (TRAINER_ENGINES), no engine."""
        return self.is_rl and self.rollout_engine in TRAINER_ENGINES

    @property
    def engine_on_actor_weights(self) -> bool:
        """RL rollouts generated on the actor's own parameters (ACTOR_WEIGHT_ENGINES)."""
        return self.is_rl and self.rollout_engine in ACTOR_WEIGHT_ENGINES

    def effective_precision(self, gpu: GpuSpec) -> Precision:
        """bf16 on GPUs without bf16 (V100, T4) becomes fp16 mixed precision with loss scaling."""
        if self.precision == "bf16" and not gpu.supports_bf16:
            return "fp16"
        if self.precision == "fp8" and gpu.fp8_dense_tflops is None:
            return "bf16" if gpu.supports_bf16 else "fp16"
        return self.precision


def rollout_gpu_count(cfg: TrainConfig) -> int:
    """GPUs that run rollout engines: all of them colocated; --rollout-gpus (default half)
    when separate; split, what the roles' groups leave."""
    if cfg.placement == "colocate":
        return cfg.num_gpus
    if cfg.placement == "split" and cfg.role_gpus:
        return max(1, cfg.num_gpus - sum(g for _, g in cfg.role_gpus))
    return cfg.rollout_gpus or max(1, cfg.num_gpus // 2)


def _fill_rl_seq_len(data: object) -> object:
    """RL: --prompt-len and --response-len replace --seq-len (seq_len = their sum)."""
    if isinstance(data, dict) and data.get("workload") in RL_WORKLOADS \
            and data.get("seq_len") is None and data.get("prompt_len") \
            and data.get("response_len"):
        return {**data, "seq_len": data["prompt_len"] + data["response_len"]}
    return data
