"""The host's side of an eager step: how long the CPU takes to launch a layer's kernels
(Python, the dispatcher, autograd), from a published eager-decode measurement, the kernels each
layer launches (counted by tools/host_kernels.py) and the host's cost of PEFT's adapters and of
checkpointing and of the work outside the layers (measured on a training loop by
tools/measure_hf_trainer.py --set 6 to 9).
throughput.host_launch_seconds and decode.eager_host_floor_s read them; efficiency.py keeps the
fitted stack factors and the per-step overhead."""

from __future__ import annotations

# Eager PyTorch launches every kernel of a training step from the host (Python, dispatcher,
# autograd), one after another; where the GPU finishes a kernel before the host has launched the
# next, the micro-batch takes the host's time (small models, short sequences, micro-batch 1).
# Measured (deepspeedai/DeepSpeed#8352, "Controlled Rollout Performance Attribution on NVIDIA
# H200", 2026-09-22): GPT-2 (12 layers) decoding 32 tokens at batch 1 after a 128-token prompt,
# bf16 on one H200, eager (no CUDA graphs): ms per 32 tokens by engine (with CUDA graphs vLLM
# 41.8, SGLang 33.2). GPT-2's own GPU work at batch 1 is ~0.05 ms a step (0.25 GB of weights at
# 4.8 TB/s), so the eager steps are host time (decode.EAGER_HOST_S_PER_LAYER).
EAGER_GPT2_DECODE_MS = {"deepspeed-hybrid": 144.0, "vllm": 154.1, "sglang": 156.0}
GPT2_LAYERS, GPT2_DECODE_TOKENS = 12, 32
# vLLM's row over the 11 kernels its GPT-2 block launches (vllm-project/vllm@0176894
# model_executor/models/gpt2.py GPT2Block: two LayerNorms, c_attn, the KV-cache write and the
# attention kernel, c_proj, two residual adds, c_fc, gelu_new, c_proj) is 36.5 us a launch, the
# engine's per-step work included: the training loop's rate below agrees.
VLLM_GPT2_BLOCK_KERNELS = 11
VLLM_EAGER_S_PER_KERNEL = EAGER_GPT2_DECODE_MS["vllm"] * 1e-3 / (
    GPT2_DECODE_TOKENS * GPT2_LAYERS * VLLM_GPT2_BLOCK_KERNELS)
# Kernels per decoder layer and micro-batch (forward, backward), counted by tools/host_kernels.py
# (tests/data/host_kernels.json: transformers 5.24 with sdpa, PEFT 0.21 LoRA at dropout 0,
# torch 2.13), by the norm that marks the family: a Llama layer (RMSNorm as eager ops, rotary,
# SwiGLU) 38 + 71 with every weight trained, 38 + 60 with the base frozen under PEFT; an OPT
# layer (LayerNorm one kernel, biases, ReLU; GPT-2/OPT family) 13 + 27, frozen 13 + 15; each
# adapted matrix 4 + 6 in both (LoRA A, B, scale, add and their backward).
HOST_KERNELS_PER_LAYER = {"rmsnorm": {"full": (38, 71), "peft": (38, 60)},
                          "layernorm": {"full": (13, 27), "peft": (13, 15)}}
HOST_KERNELS_PER_ADAPTER = (4, 6)
# The host's time per layer of a training loop, measured (tools/measure_hf_trainer.py --set 6, 7
# and 8 on three H200 machines, set 9 on a fourth, 2026-11-26: transformers 5.17 Trainer, PEFT
# 0.21, torch 2.11, liger-kernel 0.8.5; Llama-3.2-1B's layer at 2 and 32 layers, 128-token
# sequences, so the step is the host's; tools/measured/hf_trainer_h200_set6/7/8/9.jsonl;
# tests/test_host_launches.py recomputes every figure here from them). Seconds per added
# layer, full fine-tuning: 3.975, 3.776, 3.177 and 4.445 ms on the four machines = 109 counted
# launches x 36.47, 34.64, 29.15 and 40.78 us: HOST_S_PER_KERNEL is their median (35.55 us; a
# host-to-host spread of -18 to +15 %). In launches of each machine's own full-fine-tuning rate:
# - an adapted matrix: LoRA on all 7 matrices over full is 2.395 x (set 6) and 1.792 x (set 8),
#   (x 109 - the frozen base's 98) / 7 = 23.30 and 13.90 launches, mean 18.60, not its 10
#   kernels: PEFT's LoRA module runs Python per call (adapter lookup, dropout, scaling). Set 6's
#   q, v line puts the frozen base at 96 launches (98 counted);
# - non-reentrant torch.utils.checkpoint adds 4.79 (full; set 6), 4.83 and 4.90 ms (LoRA all,
#   q, v; set 7, scaled to set 6's host) per layer, with or without adapters: 132.8 launches,
#   3.49 x the 38 of the Llama forward it replays (saved-tensor hooks on top of the replay); the
#   ratio applies to a layer family's forward count (OPT's not measured);
# - Liger's fused Triton kernels (set 8, one process per run) halve the kernels per layer (58
#   against 127 launched) but not the host's time: 3.143 ms full, 5.781 ms LoRA against the same
#   machine's eager 3.177 and 5.693 ms. A framework whose fused kernels are launched from Python
#   one by one (TrainConfig.python_launched_fusion) keeps the eager count; compiled code
#   (torch.compile, XLA) and C++-launched fusion (TransformerEngine) are not modelled.
# - outside the layers (set 9: the full line at GA 1, 2, 4, 8 on a fourth machine, 40.8 us a
#   launch): step time at 0 layers 4.10 / 12.88 / 22.69 / 31.85 ms, by least squares 3.89 ms
#   per step + 3.73 ms per micro-batch = 95.5 + 91.45 launches (the embedding, final norm, head
#   and loss forward and backward: 72 more kernels a micro-batch, and the Trainer's Python).
#   The per micro-batch part is counted with the layers (GPU work hides it where longer);
#   the per step part is efficiency.MEASURED_STEP_OVERHEAD_S.
HOST_S_PER_KERNEL = 35.55e-6
HOST_LAUNCHES_PER_MICRO_BATCH = 91.45
HOST_LAUNCHES_PER_ADAPTER = 18.60
HOST_CHECKPOINT_PER_FORWARD_LAUNCH = 3.49
