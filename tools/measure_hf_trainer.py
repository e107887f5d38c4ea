"""Measure peak memory and step time of transformers' Trainer on one GPU (a device-machine script).

Each run builds a model from its published config.json shape with random weights (no download:
the device machine reaches nothing), trains it a few steps with transformers.Trainer on random
token ids (every sequence full length, no padding, no attention mask: SDPA's causal path), and
writes one JSON line: torch.cuda.max_memory_allocated over model build + training (minus what was
allocated before the run), the median step time of the steps after the first two, and what ran
(versions, optimizer, dtypes, checkpointing). validation/project_cases_hfmeasured.yaml
is written from these lines by tools/hf_measured_cases.py; this script is their provenance.

    python3 tools/measure_hf_trainer.py --out results.jsonl            # on the GPU
    python3 tools/measure_hf_trainer.py --out /tmp/r.jsonl --tiny      # a CPU smoke test

Shapes: the models' config.json files on the Hugging Face hub (the same facts as catalog/models).
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from typing import Any

SHAPES: dict[str, dict[str, Any]] = {
    # meta-llama/Llama-3.1-8B config.json
    "llama-3.1-8b": dict(
        arch="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
        tie_word_embeddings=False, rope_theta=500000.0, rms_norm_eps=1e-5),
    # meta-llama/Llama-3.2-1B config.json
    "llama-3.2-1b": dict(
        arch="llama", hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
        tie_word_embeddings=True, rope_theta=500000.0, rms_norm_eps=1e-5),
    # Qwen/Qwen2.5-1.5B config.json
    "qwen2.5-1.5b": dict(
        arch="qwen2", hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
        num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
        tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6),
    # Qwen/Qwen2.5-7B config.json
    "qwen2.5-7b": dict(
        arch="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
        tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-6),
    # meta-llama/Llama-3.2-3B config.json
    "llama-3.2-3b": dict(
        arch="llama", hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
        num_attention_heads=24, num_key_value_heads=8, vocab_size=128256,
        tie_word_embeddings=True, rope_theta=500000.0, rms_norm_eps=1e-5),
    # Qwen/Qwen2.5-0.5B config.json
    "qwen2.5-0.5b": dict(
        arch="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
        tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6),
    # meta-llama/Llama-2-7b-hf config.json
    "llama-2-7b": dict(
        arch="llama", hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
        tie_word_embeddings=False, rope_theta=10000.0, rms_norm_eps=1e-5),
}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000)

ALL_LINEAR = "all-linear"
QV = ["q_proj", "v_proj"]
# (id, model, method, weights dtype, gradient checkpointing, micro-batch, sequence length,
#  LoRA targets)
RUNS: list[tuple[str, str, str, str, bool, int, int, Any]] = [
    ("llama32_1b_full_bf16_gc_mb4_s4096", "llama-3.2-1b", "full", "bf16", True, 4, 4096, None),
    ("llama32_1b_full_bf16_nogc_mb2_s2048", "llama-3.2-1b", "full", "bf16", False, 2, 2048, None),
    ("qwen25_1p5b_full_fp32_gc_mb2_s4096", "qwen2.5-1.5b", "full", "fp32", True, 2, 4096, None),
    ("llama31_8b_lora_gc_mb1_s2048", "llama-3.1-8b", "lora", "bf16", True, 1, 2048, ALL_LINEAR),
    ("llama31_8b_lora_gc_mb4_s2048", "llama-3.1-8b", "lora", "bf16", True, 4, 2048, ALL_LINEAR),
    ("llama31_8b_lora_gc_mb4_s4096", "llama-3.1-8b", "lora", "bf16", True, 4, 4096, ALL_LINEAR),
    ("llama31_8b_lora_nogc_mb1_s2048", "llama-3.1-8b", "lora", "bf16", False, 1, 2048, ALL_LINEAR),
    ("llama31_8b_loraqv_gc_mb2_s2048", "llama-3.1-8b", "lora", "bf16", True, 2, 2048, QV),
    ("qwen25_7b_lora_gc_mb2_s4096", "qwen2.5-7b", "lora", "bf16", True, 2, 4096, ALL_LINEAR),
    ("llama31_8b_full_bf16_gc_mb2_s2048", "llama-3.1-8b", "full", "bf16", True, 2, 2048, None),
    ("llama31_8b_full_bf16_gc_mb4_s4096", "llama-3.1-8b", "full", "bf16", True, 4, 4096, None),
]
# The second set (--set 2), each with its options: optim (TrainingArguments.optim), ga
# (gradient_accumulation_steps), r (LoRA rank).
RUNS2: list[tuple[str, str, str, str, bool, int, int, Any, dict[str, Any]]] = [
    ("llama31_8b_full_bf16_gc_mb1_s1024_fused", "llama-3.1-8b", "full", "bf16", True, 1, 1024,
     None, {}),
    ("llama31_8b_full_bf16_gc_mb1_s1024_foreach", "llama-3.1-8b", "full", "bf16", True, 1, 1024,
     None, {"optim": "adamw_torch"}),
    ("llama32_1b_full_bf16_gc_mb2_s4096_ga2", "llama-3.2-1b", "full", "bf16", True, 2, 4096,
     None, {"ga": 2}),
    ("llama32_1b_full_bf16_nogc_mb8_s2048", "llama-3.2-1b", "full", "bf16", False, 8, 2048,
     None, {}),
    ("llama32_3b_full_bf16_gc_mb2_s8192", "llama-3.2-3b", "full", "bf16", True, 2, 8192,
     None, {}),
    ("qwen25_0p5b_full_fp32_nogc_mb4_s2048", "qwen2.5-0.5b", "full", "fp32", False, 4, 2048,
     None, {}),
    ("llama2_7b_lora_gc_mb4_s4096", "llama-2-7b", "lora", "bf16", True, 4, 4096, ALL_LINEAR, {}),
    ("llama2_7b_lora_nogc_mb1_s4096", "llama-2-7b", "lora", "bf16", False, 1, 4096, ALL_LINEAR,
     {}),
    ("llama2_7b_full_bf16_gc_mb4_s4096", "llama-2-7b", "full", "bf16", True, 4, 4096, None, {}),
    ("llama31_8b_lora_gc_mb1_s16384", "llama-3.1-8b", "lora", "bf16", True, 1, 16384,
     ALL_LINEAR, {}),
    ("llama31_8b_lora_r64_gc_mb2_s4096", "llama-3.1-8b", "lora", "bf16", True, 2, 4096,
     ALL_LINEAR, {"r": 64}),
    ("qwen25_7b_full_bf16_gc_mb2_s4096", "qwen2.5-7b", "full", "bf16", True, 2, 4096, None, {}),
]
# The third set (--set 3): almost no GPU work per step (128-token sequences), so the step time is
# the loop's own per-step cost (launches, optimizer, host work) for each model size and method.
RUNS3: list[tuple[str, str, str, str, bool, int, int, Any, dict[str, Any]]] = [
    ("qwen25_0p5b_full_bf16_nogc_mb1_s128", "qwen2.5-0.5b", "full", "bf16", False, 1, 128,
     None, {}),
    ("llama32_1b_full_bf16_nogc_mb1_s128", "llama-3.2-1b", "full", "bf16", False, 1, 128,
     None, {}),
    ("llama32_1b_lora_nogc_mb1_s128", "llama-3.2-1b", "lora", "bf16", False, 1, 128,
     ALL_LINEAR, {}),
    ("llama31_8b_lora_nogc_mb1_s128", "llama-3.1-8b", "lora", "bf16", False, 1, 128,
     ALL_LINEAR, {}),
    ("llama31_8b_full_bf16_nogc_mb1_s128_fused", "llama-3.1-8b", "full", "bf16", False, 1, 128,
     None, {}),
    ("llama31_8b_full_bf16_nogc_mb1_s128_foreach", "llama-3.1-8b", "full", "bf16", False, 1,
     128, None, {"optim": "adamw_torch"}),
]
# The fourth set (--set 4): set 1 and 2 configurations with use_liger_kernel=True (Liger's
# RMSNorm, RoPE, SwiGLU and fused linear cross-entropy patched in by the Trainer).
LIGER = {"liger": True}
RUNS4: list[tuple[str, str, str, str, bool, int, int, Any, dict[str, Any]]] = [
    ("liger_llama32_1b_full_bf16_gc_mb4_s4096", "llama-3.2-1b", "full", "bf16", True, 4, 4096,
     None, LIGER),
    ("liger_llama32_1b_full_bf16_nogc_mb8_s2048", "llama-3.2-1b", "full", "bf16", False, 8,
     2048, None, LIGER),
    ("liger_llama31_8b_lora_gc_mb4_s4096", "llama-3.1-8b", "lora", "bf16", True, 4, 4096,
     ALL_LINEAR, LIGER),
    ("liger_llama31_8b_lora_nogc_mb1_s2048", "llama-3.1-8b", "lora", "bf16", False, 1, 2048,
     ALL_LINEAR, LIGER),
    ("liger_qwen25_7b_lora_gc_mb2_s4096", "qwen2.5-7b", "lora", "bf16", True, 2, 4096,
     ALL_LINEAR, LIGER),
    ("liger_llama31_8b_full_bf16_gc_mb4_s4096", "llama-3.1-8b", "full", "bf16", True, 4, 4096,
     None, LIGER),
]
# The fifth set (--set 5): a 16-bit loss without autocast (Qwen-1's modeling code under a bf16
# engine), to see what of the loss buffers is alive with the first recomputed layer.
LOSS16 = {"loss16": True}
RUNS5: list[tuple[str, str, str, str, bool, int, int, Any, dict[str, Any]]] = [
    ("loss16_llama31_8b_lora_gc_mb4_s4096", "llama-3.1-8b", "lora", "bf16", True, 4, 4096,
     ALL_LINEAR, LOSS16),
    ("loss16_llama31_8b_lora_gc_mb2_s4096", "llama-3.1-8b", "lora", "bf16", True, 2, 4096,
     ALL_LINEAR, LOSS16),
    ("loss16_llama32_1b_full_bf16_gc_mb4_s4096", "llama-3.2-1b", "full", "bf16", True, 4, 4096,
     None, LOSS16),
    ("loss16_qwen25_7b_lora_gc_mb2_s4096", "qwen2.5-7b", "lora", "bf16", True, 2, 4096,
     ALL_LINEAR, LOSS16),
]

# The sixth set (--set 6): the host's share of a step, apart. Llama-3.2-1B's layer shape at
# 2 to 32 layers, 128-token sequences (almost no GPU work), so step time = a fixed part + a part
# per layer; one step (the 9th) runs under torch.profiler, which counts the CUDA kernels the
# step launched and sums their GPU time: with the kernel count per layer that gives the host's
# seconds per launched kernel and the step's fixed host time, measured on a training loop
# (host_launches.HOST_S_PER_KERNEL, efficiency.MEASURED_STEP_OVERHEAD_S).
def _depth(n: int, **o: Any) -> dict[str, Any]:
    return {"layers": n, "profile_step": 9, **o}


RUNS6: list[tuple[str, str, str, str, bool, int, int, Any, dict[str, Any]]] = [
    *[(f"depth{n}_llama32_1b_full_bf16_nogc_mb1_s128", "llama-3.2-1b", "full", "bf16", False,
       1, 128, None, _depth(n)) for n in (2, 8, 16, 32)],
    *[(f"depth{n}_llama32_1b_lora_nogc_mb1_s128", "llama-3.2-1b", "lora", "bf16", False, 1,
       128, ALL_LINEAR, _depth(n)) for n in (2, 8, 32)],
    *[(f"depth{n}_llama32_1b_loraqv_nogc_mb1_s128", "llama-3.2-1b", "lora", "bf16", False, 1,
       128, QV, _depth(n)) for n in (2, 32)],
    *[(f"depth{n}_llama32_1b_full_bf16_gc_mb1_s128", "llama-3.2-1b", "full", "bf16", True, 1,
       128, None, _depth(n)) for n in (2, 32)],
    *[(f"depth{n}_qwen25_0p5b_full_bf16_nogc_mb1_s128", "qwen2.5-0.5b", "full", "bf16", False,
       1, 128, None, _depth(n)) for n in (2, 24)],
    *[(f"depth{n}_llama32_1b_full_bf16_nogc_mb4_s2048", "llama-3.2-1b", "full", "bf16", False,
       4, 2048, None, _depth(n)) for n in (2, 16)],
]

# The seventh set (--set 7): set 6 on another machine (full, 2 and 32 layers: the host-to-host
# spread) and the pairs that split the host's cost of checkpointing with adapters (LoRA on all
# matrices and on q, v with checkpointing) and per micro-batch from per step (GA 4).
RUNS7: list[tuple[str, str, str, str, bool, int, int, Any, dict[str, Any]]] = [
    *[(f"depth{n}_llama32_1b_full_bf16_nogc_mb1_s128_m2", "llama-3.2-1b", "full", "bf16", False,
       1, 128, None, _depth(n)) for n in (2, 32)],
    *[(f"depth{n}_llama32_1b_lora_gc_mb1_s128", "llama-3.2-1b", "lora", "bf16", True, 1, 128,
       ALL_LINEAR, _depth(n)) for n in (2, 32)],
    *[(f"depth{n}_llama32_1b_loraqv_gc_mb1_s128", "llama-3.2-1b", "lora", "bf16", True, 1, 128,
       QV, _depth(n)) for n in (2, 32)],
    *[(f"depth{n}_llama32_1b_full_bf16_nogc_mb1_s128_ga4", "llama-3.2-1b", "full", "bf16",
       False, 1, 128, None, _depth(n, ga=4)) for n in (2, 32)],
]

# The eighth set (--set 8, liger-kernel carried): the host's cost under Liger (RMSNorm, RoPE,
# SwiGLU and the loss fused; PEFT's adapters still eager), full and LoRA on all matrices, and
# set 6's full and LoRA lines again on another machine (the host-to-host spread). Run each in a
# process of its own (--only ID): the Trainer's Liger patch is process-wide (it replaces the
# Llama module's classes and functions), so plain runs after a Liger run in the same process are
# Liger runs too (a first attempt did that: its plain runs launched 58 kernels a layer, not
# 127). Set 4 ran Liger runs only, so it is unaffected.
RUNS8: list[tuple[str, str, str, str, bool, int, int, Any, dict[str, Any]]] = [
    *[(f"depth{n}_liger_llama32_1b_{m}_nogc_mb1_s128", "llama-3.2-1b", m.split("_")[0],
       "bf16", False, 1, 128, ALL_LINEAR if m == "lora" else None, _depth(n, liger=True))
      for m in ("full_bf16", "lora") for n in (2, 32)],
    *[(f"depth{n}_llama32_1b_{m}_nogc_mb1_s128_m3", "llama-3.2-1b", m.split("_")[0], "bf16",
       False, 1, 128, ALL_LINEAR if m == "lora" else None, _depth(n))
      for m in ("full_bf16", "lora") for n in (2, 32)],
]

# The ninth set (--set 9): the host's time outside the layers per micro-batch and per step:
# set 6's full line at GA 1, 2, 4 and 8 on one machine (at 0 layers, GA x per micro-batch +
# per step).
RUNS9: list[tuple[str, str, str, str, bool, int, int, Any, dict[str, Any]]] = [
    (f"depth{n}_llama32_1b_full_bf16_nogc_mb1_s128_ga{ga}", "llama-3.2-1b", "full", "bf16",
     False, 1, 128, None, _depth(n, ga=ga)) for ga in (1, 2, 4, 8) for n in (2, 32)
]


def _kernel_profile(prof: Any) -> dict[str, Any]:
    """Kernels launched in the profiled step (GPU events other than copies and fills), their
    summed GPU time, and the host's launch calls."""
    kernels, gpu_us, launches = 0, 0.0, 0
    for ev in prof.events():
        name = ev.name
        if str(getattr(ev, "device_type", "")).endswith("CUDA"):
            if not name.startswith(("Memcpy", "Memset")):
                kernels += 1
                gpu_us += ev.device_time
        elif "LaunchKernel" in name or name.startswith("cuLaunch"):
            launches += 1
    return {"kernels": kernels, "kernel_gpu_s": round(gpu_us * 1e-6, 5), "launch_calls": launches}


def matmul_tflops(torch: Any, device: str) -> float:
    """bf16 8192^3 matrix products per second (mean of 10 after 3 warm-ups), TFLOP/s."""
    n = 8192 if device == "cuda" else 256
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    sync(torch, device)
    return 2 * n**3 * 10 / (time.perf_counter() - t0) / 1e12


def sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _loss16_trainer(trainer: Any, torch: Any) -> Any:
    """A Trainer whose loss is cross-entropy on the 16-bit shifted logits, without autocast (run
    with bf16=False on a bf16 model), as Qwen (v1)'s modeling code computes it under DeepSpeed's
    bf16 engine: shift_logits = logits[..., :-1, :].contiguous(); CrossEntropyLoss on them."""
    class Loss16(trainer):
        def compute_loss(self, model, inputs, return_outputs=False, **kw):  # noqa: ANN001, ANN003
            labels = inputs.pop("labels")
            out = model(**inputs)
            shift = out.logits[..., :-1, :].contiguous()
            loss = torch.nn.functional.cross_entropy(
                shift.view(-1, shift.size(-1)), labels[..., 1:].contiguous().view(-1))
            return (loss, out) if return_outputs else loss
    return Loss16


def build_model(torch: Any, shape: dict[str, Any], dtype: Any, device: str, tiny: bool) -> Any:
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config
    kw = dict(shape)
    arch = kw.pop("arch")
    if tiny:
        kw.update(TINY)
    cfg = (LlamaConfig if arch == "llama" else Qwen2Config)(**kw)
    cfg._attn_implementation = "sdpa"
    with torch.device(device):
        return AutoModelForCausalLM.from_config(cfg, dtype=dtype)


def _shape(model_id: str, opts: dict[str, Any]) -> dict[str, Any]:
    """The published shape, with ``layers`` decoder layers where the run names them."""
    shape = dict(SHAPES[model_id])
    if "layers" in opts:
        shape["num_hidden_layers"] = opts["layers"]
    return shape


def one_run(torch: Any, run: tuple, *, device: str, tiny: bool, steps: int) -> dict[str, Any]:
    from transformers import Trainer, TrainerCallback, TrainingArguments
    rid, model_id, method, wdtype, ckpt, mb, seq, targets = run[:8]
    opts = run[8] if len(run) > 8 else {}
    rank, ga = opts.get("r", 16), opts.get("ga", 1)
    if tiny:
        seq = 32
    dtype = torch.bfloat16 if wdtype == "bf16" else torch.float32
    base = torch.cuda.memory_allocated() if device == "cuda" else 0
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    model = build_model(torch, _shape(model_id, opts), dtype, device, tiny)
    n_layers = model.config.num_hidden_layers
    n_params = sum(p.numel() for p in model.parameters())
    if method == "lora":
        from peft import LoraConfig, get_peft_model
        model.enable_input_require_grads()
        model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                                                 target_modules=targets, task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    vocab = model.config.vocab_size

    class Tokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return steps * mb * ga

        def __getitem__(self, i: int) -> dict[str, Any]:
            ids = torch.randint(0, vocab, (seq,))
            return {"input_ids": ids, "labels": ids.clone()}

    times: list[float] = []
    peaks: list[float] = []
    profiled: dict[str, Any] = {}
    prof_step = opts.get("profile_step")

    class Clock(TrainerCallback):
        t0 = 0.0
        prof: Any = None

        def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN003
            sync(torch, device)
            if prof_step is not None and len(times) + 1 == prof_step:
                from torch.profiler import ProfilerActivity, profile
                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda"
                                                 else [])
                Clock.prof = profile(activities=acts)
                Clock.prof.__enter__()
            Clock.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003
            sync(torch, device)
            times.append(time.perf_counter() - Clock.t0)
            if Clock.prof is not None:
                Clock.prof.__exit__(None, None, None)
                profiled.update(_kernel_profile(Clock.prof), profiled_step_s=round(times[-1], 5))
                Clock.prof = None
                times[-1] = float("nan")  # the profiler's own cost: not a step time
            if device == "cuda":
                peaks.append((torch.cuda.max_memory_allocated() - base) / 2**30)

    args = TrainingArguments(
        output_dir=f"/tmp/hfrun_{rid}", per_device_train_batch_size=mb, max_steps=steps,
        gradient_accumulation_steps=ga, **({"optim": opts["optim"]} if "optim" in opts else {}),
        **({"use_liger_kernel": True} if opts.get("liger") else {}),
        bf16=device == "cuda" and not opts.get("loss16"), gradient_checkpointing=ckpt,
        learning_rate=1e-5,
        logging_strategy="no", save_strategy="no", report_to="none", disable_tqdm=True,
        dataloader_num_workers=0, remove_unused_columns=False, use_cpu=device != "cuda")
    trainer_class = _loss16_trainer(Trainer, torch) if opts.get("loss16") else Trainer
    trainer = trainer_class(model=model, args=args, train_dataset=Tokens(), callbacks=[Clock()])
    trainer.train()
    opt = trainer.optimizer
    opt_name = type(getattr(opt, "optimizer", opt)).__name__
    state_dtypes = sorted({str(v.dtype) for s in getattr(opt, "state", {}).values()
                           for v in s.values() if hasattr(v, "dtype") and v.numel() > 1})
    result = {
        "id": rid, "model": model_id, "method": method, "weights_dtype": wdtype,
        "grad_checkpointing": ckpt, "micro_batch": mb, "grad_accum": ga, "lora_rank": rank,
        "seq_len": seq, "lora_targets": targets,
        "params": n_params, "trainable": trainable, "steps": steps,
        "step_times_s": [round(t, 4) if t == t else None for t in times],
        "median_step_s": (statistics.median([t for t in times[2:] if t == t])
                          if len(times) > 2 else None),
        "layers": n_layers, **profiled,
        "peak_allocated_gib": max(peaks) if peaks else None,
        "peak_after_step1_gib": peaks[0] if peaks else None,
        "peak_reserved_gib": (torch.cuda.max_memory_reserved() / 2**30
                              if device == "cuda" else None),
        "optim": str(args.optim), "optimizer_class": opt_name,
        "optimizer_state_dtypes": state_dtypes,
        "gc_kwargs": args.gradient_checkpointing_kwargs,
        "attn": getattr(model.config, "_attn_implementation", None),
        "liger": bool(opts.get("liger")), "loss16": bool(opts.get("loss16")),
        "norm_class": next((type(m).__name__ for m in trainer.model.modules()
                            if "norm" in type(m).__name__.lower()), None),
    }
    if result["median_step_s"]:
        result["tokens_per_s"] = mb * ga * seq / result["median_step_s"]
    del trainer, model, opt
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return result


def _liger_version() -> str | None:
    """liger_kernel's release where it is installed (set 4 needs it), else None."""
    from importlib import metadata
    try:
        return metadata.version("liger-kernel")
    except metadata.PackageNotFoundError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--deadline-s", type=float, default=400.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--set", type=int, default=1, choices=tuple(range(1, 10)))
    a = ap.parse_args()
    start = time.perf_counter()
    import peft
    import torch
    import transformers
    device = "cpu" if a.tiny else "cuda"
    with open(a.out, "a") as out:
        head = {"torch": torch.__version__, "transformers": transformers.__version__,
                "peft": peft.__version__, "liger_kernel": _liger_version(),
                "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                "bf16_matmul_tflops": matmul_tflops(torch, device)}
        out.write(json.dumps(head) + "\n")
        out.flush()
        sets = {1: RUNS, 2: RUNS2, 3: RUNS3, 4: RUNS4, 5: RUNS5, 6: RUNS6, 7: RUNS7, 8: RUNS8,
                9: RUNS9}
        for run in sets[a.set]:
            if a.only and a.only not in run[0]:
                continue
            if time.perf_counter() - start > a.deadline_s:
                out.write(json.dumps({"id": run[0], "skipped": "deadline"}) + "\n")
                continue
            t0 = time.perf_counter()
            try:
                res = one_run(torch, run, device=device, tiny=a.tiny, steps=a.steps)
            except Exception as exc:  # an OOM is a result too
                res = {"id": run[0], "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                gc.collect()
                if device == "cuda":
                    torch.cuda.empty_cache()
            res["wall_s"] = round(time.perf_counter() - t0, 1)
            out.write(json.dumps(res) + "\n")
            out.flush()
            print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
