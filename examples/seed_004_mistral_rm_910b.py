"""Seed 004: a Mistral-7B reward model, full fine-tuning on 8 x Ascend 910B (64 GB), OOMs.

The seed trains with 1 pair (chosen + rejected) of 384 tokens per micro-step, gradient
accumulation 8, no sharding, and runs out of memory when AdamW initialises (~61 GB in use). Its
table puts the fp32 AdamW states at "2x the parameter size" (28 GB) and the whole run at ~61 GB.
This script prints the planner's breakdown of that run, the seed's arithmetic next to the
16 B/param of mixed-precision AdamW, and the fixes the seed lists (LoRA, 8-bit AdamW, CPU
offload) plus ZeRO-1/2/3, each evaluated and ranked by time for a stated job. Every candidate
is timed with the same DeepSpeed stack, so the ranking compares layouts on equal software.

Run: python examples/seed_004_mistral_rm_910b.py
"""

from planner import TrainConfig, load_catalog
from planner.catalog.params import count_params
from planner.cli import run
from planner.fixes import Change, evaluate, evaluate_all, rank
from planner.models.cost import Job
from planner.models.workloads import value_model

MODEL, GPU, GB, GIB = "mistral-7b", "ascend-910b", 1e9, 2**30
PAIRS = 40_000
BASE = TrainConfig(workload="rm", method="full", num_gpus=8, micro_batch_size=1, grad_accum=8,
                   seq_len=384, checkpointing="none", framework="hf-deepspeed")
JOB = Job(PAIRS * 2 * BASE.seq_len, f"{PAIRS:,} pairs x 2 sequences x {BASE.seq_len} tokens")
FIXES = [
    Change("LoRA r16 (seed's recommendation)", {"method": "lora", "lora_rank": 16}),
    Change("8-bit AdamW", {"optimizer": "adamw-8bit"}),
    Change("gradient checkpointing", {"checkpointing": "full"}),
    Change("ZeRO-1", {"zero_stage": 1}),
    Change("ZeRO-2", {"zero_stage": 2}),
    Change("ZeRO-3", {"zero_stage": 3}),
    Change("ZeRO-2 + CPU Adam offload", {"zero_stage": 2, "offload": "optimizer"}),
    Change("ZeRO-3 + CPU param/Adam offload", {"zero_stage": 3, "offload": "optimizer+params"}),
]
KW = {"job": JOB}
# The same question as a user types it: the run as configured, with its ranked fixes
COMMAND = ["check", "--model", MODEL, "--gpu", GPU, "--num-gpus", "8", "--workload", "rm",
           "--seq-len", "384", "--micro-batch", "1", "--grad-accum", "8", "--checkpointing",
           "none", "--framework", "hf-deepspeed"]


def seed_arithmetic(n: float) -> None:
    print(f"Reward model = Mistral-7B with a scalar head: {n / 1e9:.2f} B parameters")
    print("  seed: weights 14 + AdamW states 28 ('2x params') + grads 14 + activations 5-8 "
          "= ~61 GB")
    print(f"  mixed-precision AdamW, 16 B/param (2 weights + 2 grads + 4 fp32 master + 8 fp32 "
          f"moments): {16 * n / GB:.0f} GB before activations")
    print(f"  the seed's 28 GB is 4 B/param; fp32 momentum + variance alone are 8 B/param = "
          f"{8 * n / GB:.0f} GB, and the fp32 master copy ({4 * n / GB:.0f} GB) is missing")
    print(f"  resident before AdamW allocates its moments: 8 of the 16 B/param (weights, master, "
          f"grads) = {8 * n / GB:.0f} GB, consistent with the seed's ~61 GB at optimizer init")


def main() -> dict:
    cat = load_catalog()
    params = count_params(value_model(cat.model(MODEL).spec)).total
    seed_arithmetic(params)
    asked = evaluate(MODEL, GPU, BASE, catalog=cat, **KW)
    print(f"\nAs run (8 cards, no sharding): {asked.per_gpu_gib:.1f} GiB per card of "
          f"{asked.capacity_gib:.0f} -> {'fits' if asked.fits else 'OOM'} "
          f"(peak: {asked.peak_phase})")
    print("  " + ", ".join(f"{k} {v:.1f}" for k, v in asked.top_terms(6)))
    print(f"\nFixes, each evaluated; job: {JOB.definition} (HF Trainer + DeepSpeed for all)")
    results = evaluate_all(MODEL, GPU, BASE, candidates=FIXES, catalog=cat, **KW)
    ranked = rank(results)
    print(f"  {'rank':4s}  {'fix':34s} {'GiB/card':>8s}  {'s/step':>6s}  {'hours':>6s}  "
          f"host RAM/node")
    for r in ranked + [r for r in results if r not in ranked]:
        place = str(ranked.index(r) + 1) if r in ranked else "OOM"
        print(f"  {place:4s}  {r.name:34s} {r.per_gpu_gib:8.1f}  {r.step_time_s:6.2f}  "
              f"{r.hours:6.2f}  {r.host_ram_gib:5.0f} GiB")
    acts = asked.breakdown_gib.get("activations", 0.0)
    print(f"\nCheckpointing does not help: of the {asked.per_gpu_gib:.1f} GiB peak "
          f"({asked.peak_phase}), the activations of a 384-token pair are {acts:.1f}; the "
          "weights, gradients and AdamW states set it.")
    print("\nThe same from the command line (fixes ranked by speed):")
    print(f"$ planner {' '.join(COMMAND)}")
    code = run(COMMAND)
    return {"params": params, "asked": asked, "results": results, "ranked": ranked,
            "command_exit": code}


if __name__ == "__main__":
    main()
