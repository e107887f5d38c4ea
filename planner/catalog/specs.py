"""Pydantic schemas for catalog entries: GPUs, models and platforms (hosts).

Entries are frozen and reject unknown fields. Field names carry their units. Every number
in the shipped catalog comes with a source (``source_urls`` / ``*_source``); see catalog/README.md.
"""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from planner.inputs import MAX_STRING

Slug = str

# Upper bounds of catalog numbers: far above any real part (a GPU of 100 TiB, a 1,024-layer
# model), low enough that every model stays fast (parameter counts are linear in layers) and every
# integer the solver builds fits CP-SAT's int64 domain.
MAX_LAYERS = 1024
MAX_WIDTH = 2**20  # hidden, FFN and head sizes, heads, ranks
MAX_VOCAB = 2**24
MAX_POSITIONS = 2**30
MAX_EXPERTS = 2**16
MAX_MEMORY_GIB = 1e5
MAX_RATE = 1e9  # bandwidths (GB/s), TFLOPS, watts
MAX_PRICE_USD = 1e9
MAX_UNITS = 2**20  # GPUs per node or host, CPU cores, PCIe lanes
# Lower bounds far below any real part (the slowest shipped GPU has 65 TFLOPS, 300 GB/s): a
# rate near zero makes times and costs overflow a float.
MIN_MEMORY_GIB = 1.0
MIN_RATE = 0.01  # TFLOPS, GB/s
MIN_PRICE_USD = 0.01


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False,
                              str_max_length=MAX_STRING)


Interconnect = Literal[
    "nvlink2",
    "nvlink3",
    "nvlink4",
    "nvlink5",
    "nvlink3-bridge",
    "nvlink4-bridge",
    "pcie3",
    "pcie4",
    "pcie5",
    "infinity-fabric",
    "roce-100gbe",
    "roce-200gbe",
    "hccs",
]

FormFactor = Literal["consumer", "workstation", "pcie-datacenter", "sxm", "oam", "superchip"]
# The accelerator's architecture generation (which kernels it runs: FlashAttention needs Ampere+,
# FlashAttention-3 Hopper).
Architecture = Literal["volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2",
                       "cdna3", "gaudi", "davinci"]
# The GPU's own link to host memory: a PCIe generation (x16), or NVLink-C2C to a Grace CPU.
HostLink = Literal["pcie3", "pcie4", "pcie5", "pcie6", "nvlink-c2c"]


class GpuSpec(_Frozen):
    """One accelerator model. Prices are per card; a missing price stays ``None``."""

    id: Slug
    name: str
    vendor: str
    form_factor: FormFactor
    memory_gib: float = Field(
        ge=MIN_MEMORY_GIB, le=MAX_MEMORY_GIB,
        description="device memory as labelled (HBM/GDDR 'GB' = GiB)"
    )
    memory_bandwidth_gbps: float = Field(
        ge=MIN_RATE, le=MAX_RATE, description="peak memory bandwidth, GB/s"
    )
    bf16_dense_tflops: float = Field(
        ge=MIN_RATE, le=MAX_RATE,
        description="dense BF16 tensor TFLOPS (FP16 tensor for GPUs without BF16)"
    )
    fp8_dense_tflops: float | None = Field(default=None, ge=MIN_RATE, le=MAX_RATE)
    supports_bf16: bool
    interconnect: Interconnect
    p2p_bandwidth_gbps: float = Field(
        ge=MIN_RATE, le=MAX_RATE, description="per-GPU GPU-to-GPU bandwidth, GB/s, bidir"
    )
    max_gpus_per_node: int = Field(gt=0, le=MAX_UNITS)
    tdp_watts: float = Field(ge=MIN_RATE, le=MAX_RATE)
    price_usd_new: float | None = Field(default=None, ge=MIN_PRICE_USD, le=MAX_PRICE_USD)
    price_usd_used: float | None = Field(default=None, ge=MIN_PRICE_USD, le=MAX_PRICE_USD)
    price_usd_per_hour: float | None = Field(default=None, ge=MIN_PRICE_USD, le=MAX_PRICE_USD)
    price_as_of: str | None = Field(default=None, description="YYYY-MM or YYYY-MM-DD")
    cloud_price_source: str | None = None
    spec_source_urls: tuple[str, ...] = Field(min_length=1)
    price_source_urls: tuple[str, ...] = Field(default_factory=tuple)
    notes: str = ""
    unverified_fields: tuple[str, ...] = Field(default_factory=tuple)
    # Vendor facts of the speed model (issue 18), each with its source; absent = not measured
    # (the model then states the default it uses: efficiency.matmul_fraction, network).
    mamf_bf16_fraction: float | None = Field(
        default=None, gt=0, le=1.25, description="measured maximum achievable 16-bit matmul "
        "TFLOPS / bf16_dense_tflops (> 1: a GeForce card boosting past its datasheet clock)")
    mamf_fp8_fraction: float | None = Field(
        default=None, gt=0, le=1,
        description="measured maximum achievable FP8 matmul TFLOPS / fp8_dense_tflops")
    mamf_source: str | None = None
    architecture: Architecture | None = Field(
        default=None, description="architecture generation (the kernels it runs)")
    host_link: HostLink | None = Field(
        default=None, description="the GPU's link to host memory (PCIe generation or C2C)")
    host_link_source: str | None = None

    @model_validator(mode="after")
    def _facts_have_sources(self) -> GpuSpec:
        measured = self.mamf_bf16_fraction is not None or self.mamf_fp8_fraction is not None
        if measured and not self.mamf_source:
            raise ValueError("a measured matmul fraction needs mamf_source")
        if self.host_link is not None and not self.host_link_source:
            raise ValueError("host_link needs host_link_source")
        return self

    @model_validator(mode="after")
    def _prices_have_date(self) -> GpuSpec:
        prices = (self.price_usd_new, self.price_usd_used, self.price_usd_per_hour)
        has_price = any(p is not None for p in prices)
        if has_price and not self.price_as_of:
            raise ValueError("a GPU with a price needs price_as_of")
        if has_price and not self.price_source_urls:
            raise ValueError("a GPU with a price needs price_source_urls")
        return self


Activation = Literal["swiglu", "geglu", "gelu", "relu"]
PositionEmbedding = Literal["rotary", "alibi", "learned"]
Norm = Literal["rmsnorm", "layernorm"]


class MoeSpec(_Frozen):
    """Mixture-of-experts MLP. Memory counts all experts; compute counts the active ones."""

    num_experts: int = Field(gt=1, le=MAX_EXPERTS, description="routed experts per MoE layer")
    experts_per_token: int = Field(gt=0, le=MAX_EXPERTS, description="top-k experts per token")
    expert_ffn_hidden_size: int = Field(gt=0, le=MAX_WIDTH,
                                        description="intermediate size of one expert")
    num_shared_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    shared_expert_ffn_hidden_size: int | None = Field(
        default=None, gt=0, le=MAX_WIDTH,
        description="intermediate size of one shared expert (default: expert's)"
    )
    first_dense_layers: int = Field(
        default=0, ge=0, le=MAX_LAYERS,
        description="leading layers with a dense MLP of ffn_hidden_size"
    )
    shared_expert_gate: bool = Field(
        default=False, description="a sigmoid gate h x 1 scales the shared experts (Qwen2-MoE)"
    )
    router_bias: bool = Field(default=False, description="the router has a bias (gpt-oss)")


class MlaSpec(_Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank q and kv projections."""

    q_lora_rank: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    kv_lora_rank: int = Field(gt=0, le=MAX_WIDTH)
    qk_nope_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    qk_rope_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    v_head_dim: int = Field(gt=0, le=MAX_WIDTH)


class ModelSpec(_Frozen):
    """Architecture facts of a decoder-only transformer, as in its published config.json."""

    id: Slug
    name: str
    hf_repo: str | None = None
    aliases: tuple[str, ...] = Field(
        default_factory=tuple, description="other names: HF ids of variants with equal architecture"
    )
    num_layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden_size: int = Field(gt=0, le=MAX_WIDTH)
    num_attention_heads: int = Field(gt=0, le=MAX_WIDTH)
    num_kv_heads: int = Field(gt=0, le=MAX_WIDTH)
    head_dim: int = Field(gt=0, le=MAX_WIDTH)
    ffn_hidden_size: int = Field(
        gt=0, le=MAX_WIDTH,
        description="intermediate size of ONE MLP matrix (dense layers / dense model)"
    )
    activation: Activation
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    tied_embeddings: bool
    max_position_embeddings: int = Field(gt=0, le=MAX_POSITIONS)
    position_embedding: PositionEmbedding
    norm: Norm = "rmsnorm"
    attention_bias: bool = False
    attention_out_bias: bool | None = Field(
        default=None, description="bias on the output projection (default: attention_bias)"
    )
    mlp_bias: bool = False
    parallel_attention_mlp: bool = Field(
        default=False, description="attention and MLP read the same input (GPT-J/Falcon style)"
    )
    embedding_norm: bool = Field(default=False, description="LayerNorm after embeddings (BLOOM)")
    norms_per_layer: int = Field(
        default=2, ge=1, description="norms in each layer: 1 (Falcon-7B), 2, 4 (Gemma-2 sandwich)"
    )
    layernorm_bias: bool = Field(default=True, description="LayerNorms have a bias (MPT: none)")
    qk_norm: bool = Field(default=False, description="RMSNorm of head_dim on q and k (Qwen3)")
    qk_norm_full_width: bool = Field(default=False, description="q/k RMSNorms over heads*head_dim "
                                     "and kv_heads*head_dim, not head_dim (OLMo-2; needs qk_norm)")
    attention_sinks: bool = Field(default=False, description="a learned sink per head (gpt-oss)")
    final_norm: bool = Field(default=True, description="a norm after the last layer (not OPT-350m)")
    norm_casts_back: bool = Field(default=False, description="RMSNorm keeps its input's dtype")
    word_embed_proj_dim: int | None = Field(
        default=None, gt=0, le=MAX_WIDTH,
        description="OPT-350m: embeddings in a smaller dim, projected in/out"
    )
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
    published_params_b: float = Field(gt=0, le=1e6,
                                      description="parameter count published by the authors")
    params_source: str = Field(description="where published_params_b was read")
    source_urls: tuple[str, ...] = Field(min_length=1)
    notes: str = ""

    @model_validator(mode="after")
    def _heads_consistent(self) -> ModelSpec:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(f"num_attention_heads {self.num_attention_heads} is not a multiple "
                             f"of num_kv_heads {self.num_kv_heads}")
        if self.qk_norm_full_width and not self.qk_norm:
            raise ValueError("qk_norm_full_width needs qk_norm")
        return self

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model."""
        return self.moe is not None

    def splits_heads(self, tp: int) -> bool:
        """``tp`` ranks share the attention and kv heads evenly (Megatron-style tensor parallel
        and vLLM's engine TP shard whole heads)."""
        return self.num_attention_heads % tp == 0 and self.num_kv_heads % tp == 0

    def __hash__(self) -> int:
        # Cheap and consistent with equality (equal specs share these fields): model specs key
        # many caches, and pydantic's default hashes every field on every call.
        return hash((self.id, self.num_layers, self.hidden_size, self.vocab_size))


class PlatformSpec(_Frozen):
    """A host that holds GPUs: its price without GPUs, host RAM and links."""

    id: Slug
    name: str
    form_factors: tuple[FormFactor, ...] = Field(
        min_length=1, description="GPU form factors it takes"
    )
    max_gpus: int = Field(gt=0, le=MAX_UNITS)
    price_usd: float | None = Field(
        default=None, ge=MIN_PRICE_USD, le=MAX_PRICE_USD, description="host without GPUs, new"
    )
    price_as_of: str | None = None
    host_ram_gib: float = Field(
        ge=MIN_MEMORY_GIB, le=MAX_MEMORY_GIB, description="installed host RAM in the priced config"
    )
    max_host_ram_gib: float | None = Field(default=None, ge=MIN_MEMORY_GIB, le=MAX_MEMORY_GIB)
    cpu_cores: int = Field(gt=0, le=MAX_UNITS)
    pcie_gen: int = Field(ge=3, le=6)
    pcie_lanes_per_gpu: int = Field(default=16, gt=0, le=MAX_UNITS)
    inter_node_bandwidth_gbps: float = Field(
        ge=MIN_RATE, le=MAX_RATE,
        description="network bandwidth per node to other nodes, GB/s (bytes)"
    )
    nvlink_switch: bool = Field(default=False, description="all GPUs on NVLink/NVSwitch (HGX)")
    price_source_urls: tuple[str, ...] = Field(default_factory=tuple)
    source_urls: tuple[str, ...] = Field(min_length=1)
    notes: str = ""


PCIE_CARD_FORM_FACTORS: frozenset[str] = frozenset({"consumer", "workstation", "pcie-datacenter"})


def gpus_per_host(gpu: GpuSpec, platform: PlatformSpec | None) -> int:
    """GPUs one host holds. A PCIe card goes in any of the platform's slots: the platform's
    slot count (an 8-slot rig holds 8 RTX 4090s). A module (SXM, OAM, superchip) sits on a
    baseboard of its generation: the fewer of the platform's slots and the module's node size.
    Without a platform (a rented instance, an unnamed host): the GPU's node size."""
    if platform is None:
        return gpu.max_gpus_per_node
    if gpu.form_factor in PCIE_CARD_FORM_FACTORS:
        return platform.max_gpus
    return min(platform.max_gpus, gpu.max_gpus_per_node)


def hosts_for(num_gpus, gpus_per_host: int):
    """Hosts that hold ``num_gpus`` GPUs: ceil(GPUs / GPUs per host); also elementwise on an
    integer numpy array of GPU counts."""
    return -(-num_gpus // gpus_per_host)


def divisors(n: int, *, at_most: int) -> tuple[int, ...]:
    """The divisors of ``n`` up to ``at_most``, ascending."""
    return tuple(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def tensor_parallel_options(model: ModelSpec, gpus_per_node: int) -> tuple[int, ...]:
    """Tensor-parallel degrees, ascending: each splits the attention and kv heads evenly
    (ModelSpec.splits_heads) and stays inside one node (NVLink/PCIe domain)."""
    return tuple(t for t in divisors(model.num_kv_heads, at_most=gpus_per_node)
                 if model.splits_heads(t))


# ---- Framework profiles (catalog/frameworks/<id>.yaml) ----------------------------------------
T = TypeVar("T")

FrameworkWorkload = Literal["pretrain", "sft", "rm", "dpo", "ppo", "grpo"]
FrameworkMethod = Literal["full", "lora", "dora", "qlora", "freeze"]
ShardingKind = Literal["none", "ddp", "zero1", "zero2", "zero3", "fsdp1", "fsdp2", "megatron"]
ParallelKind = Literal["tp", "pp", "cp", "ep"]
OffloadKind = Literal["optimizer", "optimizer+params"]
PlacementKind = Literal["colocate", "separate", "split"]
RolloutEngine = Literal["vllm", "sglang", "hf-generate", "deepspeed-hybrid", "megatron"]
LaunchFormat = Literal["deepspeed", "accelerate", "torchrun", "verl", "openrlhf", "llamafactory",
                       "torchtune", "torchtitan", "litgpt", "llmfoundry",
                       "nemo-rl", "prime-rl", "deepspeed-chat", "nemo", "megatron-bridge",
                       "nemo-automodel", "axolotl", "ms-swift"]
LAUNCH_FORMATS: tuple[str, ...] = LaunchFormat.__args__  # type: ignore[attr-defined]
CheckpointingKind = Literal["none", "full", "selective"]
# flash: a kernel that reads q, k, v without an s^2 matrix and GQA-shaped k, v;
# sdpa-expanded-kv: k and v copied to every query head before the kernel; eager: the softmax
# probabilities are materialised and saved.
AttentionKind = Literal["flash", "sdpa-expanded-kv", "eager"]
# The fused kernel a flash attention runs (models/attention.py): FlashAttention-2 (and PyTorch
# SDPA's flash backend), FlashAttention-3, cuDNN fused attention (TransformerEngine).
AttentionKernelKind = Literal["fa2", "fa3", "cudnn"]
# fp32: logits upcast to fp32 for the loss; fp32-under-autocast: upcast only under autocast
# (16-bit under DeepSpeed's engine); 16bit: no upcast; chunked: the loss over token chunks of
# the 16-bit logits; vocab-fused: the head fused with the loss over vocabulary slices;
# token-fused: the head fused with the loss over token chunks, the gradient taken in forward;
# fp32-held-chunked: the fp32 logits held through backward, the loss over chunks of
# loss_seq_chunk positions whose graphs are all built before backward (LitGPT).
LossKind = Literal["fp32", "fp32-held", "fp32-under-autocast", "16bit", "chunked", "vocab-fused",
                   "token-fused", "fp32-held-chunked", "linear-fused"]


class Fact(BaseModel, Generic[T]):
    """One fact about a framework and where it was read (its file at a commit, or a docs page)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: T
    source: str = Field(min_length=1)
    since: str | None = None  # the first releases it holds from ("transformers 4.54.0, torch 2.8")


class FrameworkFacts(_Frozen):
    """What a framework runs, the memory semantics it imposes and its speed. A fact left out is
    inherited from the profile's base, and where no profile states it the planner's default
    applies (said in the output)."""

    # what it can run
    workloads: Fact[tuple[FrameworkWorkload, ...]] | None = None
    methods: Fact[tuple[FrameworkMethod, ...]] | None = None
    sharding: Fact[tuple[ShardingKind, ...]] | None = None
    parallelism: Fact[tuple[ParallelKind, ...]] | None = Field(
        default=None, description="model parallelism besides data parallel (tp, pp, cp, ep)")
    offload: Fact[tuple[OffloadKind, ...]] | None = None
    rl_placements: Fact[tuple[PlacementKind, ...]] | None = None
    rollout_engines: Fact[tuple[RolloutEngine, ...]] | None = None
    rollout_engine_default: Fact[RolloutEngine] | None = Field(
        default=None, description="RL: the engine a job generates with when none is named "
        "(else the first of rollout_engines)")
    launch_format: Fact[LaunchFormat] | None = None
    # memory semantics
    checkpointing: Fact[tuple[CheckpointingKind, ...]] | None = None
    checkpointing_default: Fact[CheckpointingKind] | None = None
    selective_checkpointing: Fact[Literal["core-attention", "op"]] | None = Field(
        default=None, description="what its selective checkpointing recomputes: Megatron's "
        "core attention, or PyTorch op-level selective checkpointing (torchtitan)")
    attention: Fact[AttentionKind] | None = None
    attention_kernel: Fact[AttentionKernelKind] | None = Field(default=None, description=(
        "the fused attention kernel its flash attention runs by default (models/attention.py)"))
    loss: Fact[LossKind] | None = None
    sft_loss: Fact[LossKind] | None = Field(
        default=None, description="the loss of SFT and pretraining where it differs from "
        "`loss` (a trainer of its own for them); fp32-held: whole fp32 logits that stay "
        "referenced through the loss backward")
    loss_vocab_chunk: Fact[int] | None = Field(default=None, description="rows per vocab slice")
    loss_seq_chunk: Fact[PositiveInt] | None = Field(
        default=None, description="sequence positions per chunk of an fp32-held-chunked loss")
    holds_previous_outputs: Fact[bool] | None = Field(
        default=None, description="the training loop keeps the previous micro-batch's outputs "
        "(and through them its autograd graph) referenced until the next forward returns")
    logprobs: Fact[Literal["fp32", "16bit"]] | None = Field(
        default=None, description="dtype of forward-only log-prob passes (DPO reference, RL)")
    master_weights: Fact[Literal["fp32", "none"]] | None = None  # none: pure 16-bit
    frozen_base_dtype: Fact[Literal["16bit", "fp32"]] | None = Field(
        default=None, description="dtype of a frozen adapter base's sharded parameters")
    idle_offload: Fact[bool] | None = Field(default=None, description="RL: offload moves a "
        "role's states to the host between phases (not ZeRO-style offload during compute)")
    engine_outside_torch: Fact[bool] | None = Field(default=None, description="RL: the engine's "
        "pool is outside torch's allocator (vLLM sleep mode's CuMem), unseen by its counters")
    separate_lora_reference: Fact[bool] | None = Field(default=None, description="LoRA RL/DPO:"
        " the reference is a model of its own, not the base with the adapters off")
    engine_sleep: Fact[bool] | None = Field(default=None, description="RL colocated: the engine "
        "frees its memory while training runs (false: DS-Chat w/o --release_inference_cache)")
    fsdp_no_sync: Fact[bool] | None = Field(default=None, description=(
        "FSDP with accumulation reduce-scatters only the last micro-batch (unsharded grads)"))
    fsdp_on_one_gpu: Fact[bool] | None = Field(default=None, description="FSDP also on one GPU")
    fused_optimizer: Fact[bool] | None = None
    shard_embeddings: Fact[bool] | None = Field(
        default=None, description="FSDP: embedding and head wrapped as units of their own")
    lora_rank: Fact[int] | None = None
    lora_targets: Fact[tuple[str, ...]] | None = None
    lora_dropout: Fact[Annotated[float, Field(ge=0, lt=1)]] | None = Field(
        default=None, description="the LoRA dropout its launches set when the job states none")
    lora_dropout_shared_qkv: Fact[bool] | None = Field(
        default=None, description="one LoRA dropout for the fused q, k, v adapters' input")
    fp8_generation: Fact[bool] | None = None  # FP8 training recipes also generate in FP8
    generation_batches: Fact[int] | None = None  # per-device batches one RL step generates
    per_device_batch: Fact[int] | None = None  # its RL loop's default per-device batch
    # speed
    efficiency: Fact[str] | None = Field(
        default=None, description="the calibrated efficiency (efficiency.STACK_UTILISATION key)")
    grad_reduce_dtype: Fact[Literal["fp32", "16bit"]] | None = Field(default=None, description=
        "dtype its sharded data parallelism reduces gradients in (FSDP2 reduce_dtype)")
    # RL engine and batch semantics (read by validate_throughput.rl_inputs and the RL time model)
    rollout_memory_utilization: Fact[Annotated[float, Field(gt=0, le=1)]] | None = Field(
        default=None, description="RL: the gpu_memory_utilization its engine's config sets")
    off_policy_placement: Fact[PlacementKind] | None = Field(
        default=None, description="RL: where an off-policy (asynchronous) run generates: "
        "separate, engines on GPUs of their own pipelined with training")
    batch_counts_prompts: Fact[bool] | None = Field(
        default=None, description="RL: its train batch size is the prompts of one iteration, "
        "each sampled n times (a run's global batch of sequences / n prompts per iteration)")
    backends: Fact[tuple[str, ...]] | None = Field(default=None, description="profiles it "
        "runs on when a run names them (a backend switch, e.g. LLaMA-Factory's use_unsloth)")
    rollout_enforce_eager: Fact[bool] | None = Field(default=None, description="RL: its vLLM "
        "engine runs enforce_eager (no CUDA graphs: each decoding step waits for the host)")
    rollout_max_num_seqs: Fact[int] | None = Field(default=None, description="RL: the most "
        "sequences its vLLM engine decodes at once (the max_num_seqs it passes; none: vLLM's)")
    offload_checkpoints: Fact[bool] | None = Field(default=None, description="full checkpointing"
        " keeps each layer's saved input in host RAM, reloaded for that layer's recomputation")
    fused_elementwise: Fact[bool] | None = Field(default=None, description="norms, rotary, "
        "activation, residual adds fused without torch.compile (TE, Triton, Liger, XLA)")
    python_launched_fusion: Fact[bool] | None = Field(default=None, description="its fused "
        "kernels are launched from Python one by one (Liger's Triton): the host's time is eager's")
    compiled_workloads: Fact[tuple[FrameworkWorkload, ...]] | None = Field(default=None,
        description="workloads whose launches torch.compile the model unless the job says not")
    moe_fp32_scores: Fact[bool] | None = Field(default=None, description="MoE: the routing "
        "scores multiply all routed tokens' expert outputs at once in fp32 (torchtitan's MoE)")
    fused_lora_kernels: Fact[bool] | None = Field(
        default=None, description="LoRA layers run as fused autograd functions that save their "
        "inputs (and a gated MLP's gate and up outputs) and write gradients in place")
    loss_token_chunk_gib: Fact[PositiveFloat] | None = Field(default=None, description=
        "token-fused loss: the most GiB of fp32 logits one token chunk may hold")
    # what it launches at all (issue 17 section 4: the space holds only launchable layouts)
    models: Fact[tuple[str, ...]] | None = Field(
        default=None, description="catalog model ids it has a model definition (builder) "
        "for; unset: any Hugging Face model")
    single_gpu_lacks: Fact[tuple[Literal["checkpointing", "offload"], ...]] | None = Field(
        default=None, description="what it cannot do on one GPU (e.g. checkpointing that "
        "only its multi-GPU strategy wraps)")
    precisions: Fact[tuple[Literal["bf16", "fp16", "fp32", "fp8"], ...]] | None = Field(
        default=None, description="compute precisions it trains in (a GPU without bf16 turns "
        "bf16 into fp16); unset: all")
    single_gpu_methods: Fact[tuple[str, ...]] | None = Field(
        default=None, description="methods it runs on one GPU only (e.g. a quantized base "
        "its multi-GPU strategy does not take)")
    # how it builds the model from a checkpoint
    unties_embeddings: Fact[bool] | None = Field(
        default=None, description="the input embedding and the LM head are two weights even "
        "where the checkpoint ties them (the head is a copy of the embedding)")
    quantizes_head: Fact[bool] | None = None  # QLoRA: the LM head is quantized too
    qlora_unquantized_dtype: Fact[Literal["16bit", "fp32"]] | None = Field(default=None,
        description="QLoRA: its unquantized embeddings and head (fp32: PEFT's kbit prep)")
    qlora_norm_dtype: Fact[Literal["16bit", "fp32"]] | None = Field(default=None,
        description="QLoRA: its norm weights (unset: as qlora_unquantized_dtype)")
    pure_16bit_methods: Fact[tuple[str, ...]] | None = Field(
        default=None, description="methods it trains only in pure 16 bit (no fp32 master "
        "weights), whatever its default precision")
    nf4_double_quant: Fact[bool] | None = Field(
        default=None, description="QLoRA: its NF4 recipe double-quantises the block constants "
        "(false: one fp32 absmax per 64 weights)")


class FrameworkSpec(_Frozen):
    """A training framework's profile: facts with sources, inheriting from ``base``."""

    id: Slug
    name: str
    base: Slug | None = None
    aliases: tuple[str, ...] = Field(
        default_factory=tuple, description="other names of it (validation-case slugs)")
    version: str = Field(description="the release or commit the facts were read at")
    homepage: str | None = None
    facts: FrameworkFacts = Field(default_factory=FrameworkFacts)
    notes: str = ""
