"""Every calibrated constant of the memory model, in one place, with the cases that set it.

Physics lives in memory.py; what cannot be derived from first principles (allocator behaviour,
CUDA context size, how a framework materialises the loss) is a named constant here. Case ids refer
to validation/memory_cases.yaml. A constant fitted to cases (FITTED_CASES) is computed by
benchmarks/fit.py (the value on a physically meaningful grid with the lowest median |relative
error| over its cases, the others held fixed) and read from planner/models/fitted.yaml, which only
`python benchmarks/fit.py --write` writes (tests/test_fit.py checks it). The others are framework
facts, documented ranges or byte counts, not fits: change them only with their source, and re-run
``planner validate`` / ``benchmarks/accuracy.py``.
"""

from __future__ import annotations

from planner.models.fitted import fitted

_FITTED = fitted()["calibration"]

GIB = 2**30
MIB = 2**20

# --- loss / logits -----------------------------------------------------------------------------
# Bytes per logit element (tokens x vocab) alive at the loss peak (end of forward / start of
# backward) for a standard (unchunked) cross-entropy in 16-bit training:
#   at the end of forward: 4 (fp32 logits, upcast for the loss: HF `logits.float()` or autocast)
#   + 4 (their shifted contiguous copy, labels[1:]) + 4 (fp32 log-softmax saved for backward);
#   in the log-softmax backward: 4 (saved output) + 4 (incoming gradient) + 4 (gradient of the
#   input) after the forward copies are freed. Both moments hold 12 B per element.
# Set by the long-sequence large-vocabulary cases where logits dominate: qwen-1.8b-lora-8192,
# qwen-7b-lora-8192, qwen-14b-lora-8192 (vocab 151,851, 8192 tokens; FITTED_CASES):
# benchmarks/fit.py picks the value among whole tensors of 2 and 4 B (4-16 B, even).
LOGIT_BYTES_UNCHUNKED: float = _FITTED["LOGIT_BYTES_UNCHUNKED"]
# The same loss computed in 16 bit (no autocast, model code without an upcast: e.g. Qwen-1's
# modeling code under DeepSpeed's fp16/bf16 engine): 2 + 2 + 2 at both moments. Set by
# qwen-7b-qlora-8192, qwen-14b-qlora-8192, qwen-72b-qlora-8192 and this project's four H200 rows
# of that loss (torch allocated; they hold 6.1 B per logit each when the first recomputed layer
# is not counted with the loss: memory.forward_activation_bytes) (benchmarks/fit.py: 2-8 B, even).
LOGIT_BYTES_16BIT_LOSS: float = _FITTED["LOGIT_BYTES_16BIT_LOSS"]
# Chunked / fused cross-entropy (torchtune CEWithChunkedOutputLoss, Liger, Unsloth): the 16-bit
# logits (2 B) plus fp32 chunks of 1/8 of them: one chunk with its gradient is 2 x 4 B / 8 = 1 B.
# Set by the usable torchtune rows whose peak is at the loss with chunked CE (FITTED_CASES; with
# activation checkpointing, -packed-ac, the peak is elsewhere): benchmarks/fit.py picks 2 B plus
# 2-8 fp32 chunk tensors (3-6 B in steps of 0.5 B: at least one chunk and its gradient).
LOGIT_BYTES_CHUNKED: float = _FITTED["LOGIT_BYTES_CHUNKED"]
LOSS_CHUNKS = 8
# A loss that keeps the whole fp32 logits referenced through its backward adds that tensor (4 B
# per element) to LOGIT_BYTES_UNCHUNKED's moment in the log-softmax backward (saved output,
# incoming gradient, gradient of the input). prime-rl's SFT trainer (PrimeIntellect-ai/prime-rl@
# d8f290ef src/prime_rl/trainer/sft/train.py: `out = forward(...)`, whose logits are
# `.float().contiguous()` (model.py cast_float_and_contiguous); `del logits` before backward
# drops the local name only, `out["logits"]` still holds the tensor). A byte count, not a fit.
LOGIT_BYTES_HELD_COPY = 4.0
# Forward-only log-prob passes (RL old/reference log-probs, DPO reference): the 16-bit logits
# (2 B), their fp32 upcast (4 B) and the fp32 log-softmax (4 B) are alive when the token
# log-probs are gathered (HF/verl/OpenRLHF compute log_softmax(logits.float()); no backward).
LOGIT_BYTES_FORWARD = 10.0
# The same pass without the upcast: 16-bit logits (2 B) and a 16-bit log-softmax or a fused
# cross-entropy's output (2 B).
LOGIT_BYTES_FORWARD_16BIT = 4.0

# The constants benchmarks/fit.py fits, with the memory cases that set each.
FITTED_CASES: dict[str, tuple[str, ...]] = {
    # qwen-1.8b-full-8192 peaks in the optimizer step, not at the loss: it does not set it
    "LOGIT_BYTES_UNCHUNKED": ("qwen-1.8b-lora-8192", "qwen-7b-lora-8192", "qwen-14b-lora-8192"),
    # the Qwen README rows (memory counter unstated) and this project's H200 rows of the same
    # loss (torch allocated; validation/project_cases_hfmeasured.yaml set 5)
    "LOGIT_BYTES_16BIT_LOSS": ("qwen-7b-qlora-8192", "qwen-14b-qlora-8192",
                               "qwen-72b-qlora-8192",
                               "hfmeasured_loss16_llama31_8b_lora_gc_mb4_s4096_mem",
                               "hfmeasured_loss16_llama31_8b_lora_gc_mb2_s4096_mem",
                               "hfmeasured_loss16_llama32_1b_full_bf16_gc_mb4_s4096_mem",
                               "hfmeasured_loss16_qwen25_7b_lora_gc_mb2_s4096_mem"),
    "LOGIT_BYTES_CHUNKED": ("torchtune-llama3.2-3b-full-packed-compile-chunkedce",
                            "torchtune-llama3.1-8b-lora-1x4090",
                            "torchtune-llama3.1-8b-qlora-1x4090",
                            "torchtune-llama3.1-70b-lora-8xa100"),
}

# --- framework buffers ------------------------------------------------------------------------
# DeepSpeed ZeRO-1/2 gradient reduce buckets: two buckets (overlap_comm) of reduce_bucket_size
# elements in 16 bit. Qwen's ds_config_zero2.json and DeepSpeed's documented examples use 2e8:
# a framework configuration fact, not fitted (qwen-1.8b-full-2048, qwen-7b-full-2gpu-256 use it).
ZERO_BUCKET_ELEMENTS = 2e8
# DeepSpeed ZeRO-3 steps the optimizer one sub-group of the fp32 partition at a time; each
# sub-group holds sub_group_size elements (DeepSpeed's default 1e9, also in Qwen's and Hugging
# Face's ds_config_zero3.json examples), or the whole partition when it is smaller. A framework
# default, not fitted to cases.
ZERO3_SUB_GROUP_ELEMENTS = 1e9
# ZeRO-3/FSDP keep the unit being computed plus one prefetched unit gathered.
GATHERED_UNITS = 2

# --- allocator and process overheads ---------------------------------------------------------
# PyTorch's caching allocator reserves more than it allocates; the excess grows with the large
# short-lived tensors (activations, logits, optimizer temporaries). reserved = allocated +
# FRAGMENTATION_FRACTION * transient + FRAGMENTATION_FLOOR_GIB. Meant to be set by rows that
# report reserved/active pairs (extra.peak_reserved_gib); no usable case gives such a pair now,
# so both are assumed, not fitted (benchmarks/fit.py lists them as such).
FRAGMENTATION_FRACTION = 0.10
FRAGMENTATION_FLOOR_GIB = 0.25
# CUDA context, cuBLAS/cuDNN workspaces and kernels loaded by a training process, seen by
# nvidia-smi but not by torch counters: 0.5-1.5 GiB per DESIGN.md section 4 (CUDA >= 12 lazy
# loading at the low end).
CUDA_CONTEXT_GIB = 0.8
# NCCL communicator buffers per process when more than one GPU is used.
NCCL_BUFFERS_GIB = 0.5

# --- rollout engine (vLLM) --------------------------------------------------------------------
# Besides weights and KV cache, a vLLM instance holds its profiled activation peak, the sampler's
# logits and the CUDA-graph pool: vLLM's start-up log reports ~0.5-1.5 GiB for 7B-class models
# ("Graph capturing finished ... took 0.5x GiB" plus "activation peak" in the memory profile).
ENGINE_WORKSPACE_GIB = 1.0
# Hugging Face generate (the trainer's own model, RL hf-generate), per sequence and vocabulary
# entry of one decoding step: the model returns 16-bit logits of the last position only
# (logits_to_keep=1; 2 B), generate copies them to fp32 (4 B), a sampling processor such as
# temperature writes new fp32 scores (4 B) and softmax fp32 probabilities (4 B) before
# torch.multinomial. huggingface/transformers@000034a4 src/transformers/generation/utils.py
# GenerationMixin._sample (next_token_logits = outputs.logits[:, -1, :].to(copy=True,
# dtype=torch.float32); logits_processor; nn.functional.softmax).
GENERATE_LOGIT_BYTES = 2.0 + 4.0 + 4.0 + 4.0

# --- host RAM ---------------------------------------------------------------------------------
# Resident memory of one training process (Python, torch, CUDA host allocations) besides the
# offloaded tensors; typical 3-5 GiB per rank for HF/DeepSpeed processes.
HOST_RAM_PER_PROCESS_GIB = 4.0
# Pinned staging buffers that DeepSpeed/FSDP CPU offload adds on top of the offloaded tensors.
HOST_OFFLOAD_OVERHEAD = 0.10
# Host RAM a training job may plan to use: the installed RAM less what the operating system,
# the page cache of the data and the loader's worker processes keep (a stated margin, like
# the GPU's --memory-margin; not fitted: no case measures host RAM).
HOST_RAM_MARGIN = 0.10
