"""Every calibrated constant of the memory model, in one place, with the cases that set it.

Physics lives in memory.py; what cannot be derived from first principles (allocator behaviour,
CUDA context size, how a framework materialises the loss) is a named constant here. Case ids refer
to validation/memory_cases.yaml. Change a constant only together with the cases it lists,
and re-run ``planner validate`` / ``benchmarks/accuracy.py``.
"""

from __future__ import annotations

GIB = 2**30

# --- loss / logits -----------------------------------------------------------------------------
# Bytes per logit element (tokens x vocab) alive at the loss peak (end of forward / start of
# backward) for a standard (unchunked) cross-entropy in 16-bit training:
#   at the end of forward: 4 (fp32 logits, upcast for the loss: HF `logits.float()` or autocast)
#   + 4 (their shifted contiguous copy, labels[1:]) + 4 (fp32 log-softmax saved for backward);
#   in the log-softmax backward: 4 (saved output) + 4 (incoming gradient) + 4 (gradient of the
#   input) after the forward copies are freed. Both moments hold 12 B per element.
# Set by the long-sequence large-vocabulary cases where logits dominate: qwen-1.8b-lora-8192,
# qwen-1.8b-full-8192, qwen-7b-lora-8192, qwen-14b-lora-8192 (vocab 151,851, 8192 tokens).
LOGIT_BYTES_UNCHUNKED = 12.0
# The same loss computed in 16 bit (no autocast, model code without an upcast: e.g. Qwen-1's
# modeling code under DeepSpeed's fp16/bf16 engine): 2 + 2 + 2 at both moments. Set by
# qwen-7b-qlora-8192, qwen-14b-qlora-8192, qwen-72b-qlora-8192.
LOGIT_BYTES_16BIT_LOSS = 6.0
# Chunked / fused cross-entropy (torchtune CEWithChunkedOutputLoss, Liger, Unsloth): the 16-bit
# logits (2 B) plus one fp32 chunk of 1/8 at a time with its gradient (2 x 4 B / 8 = 1 B).
# Set by torchtune-llama3.2-3b-full-packed-compile-chunkedce and -packed-ac.
LOGIT_BYTES_CHUNKED = 3.0
LOSS_CHUNKS = 8
# Forward-only log-prob passes (RL old/reference log-probs, DPO reference): the 16-bit logits
# (2 B), their fp32 upcast (4 B) and the fp32 log-softmax (4 B) are alive when the token
# log-probs are gathered (HF/verl/OpenRLHF compute log_softmax(logits.float()); no backward).
LOGIT_BYTES_FORWARD = 10.0
# The same pass without the upcast: 16-bit logits (2 B) and a 16-bit log-softmax or a fused
# cross-entropy's output (2 B).
LOGIT_BYTES_FORWARD_16BIT = 4.0

# --- framework buffers ------------------------------------------------------------------------
# DeepSpeed ZeRO-1/2 gradient reduce buckets: two buckets (overlap_comm) of reduce_bucket_size
# elements in 16 bit. Qwen's ds_config_zero2.json and DeepSpeed's documented examples use 2e8.
# Set by qwen-1.8b-full-2048, qwen-7b-full-2gpu-256.
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
# FRAGMENTATION_FRACTION * transient + FRAGMENTATION_FLOOR_GIB. Set by the torchtune rows that
# report reserved/active pairs (torchtune-llama3.2-3b-* extra.peak_reserved_gib where given).
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

# --- host RAM ---------------------------------------------------------------------------------
# Resident memory of one training process (Python, torch, CUDA host allocations) besides the
# offloaded tensors; typical 3-5 GiB per rank for HF/DeepSpeed processes.
HOST_RAM_PER_PROCESS_GIB = 4.0
# Pinned staging buffers that DeepSpeed/FSDP CPU offload adds on top of the offloaded tensors.
HOST_OFFLOAD_OVERHEAD = 0.10
