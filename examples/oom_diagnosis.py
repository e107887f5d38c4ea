"""Why does this configuration run out of memory, and what are the smallest fixes?

Llama-3.1-8B, full fine-tuning with AdamW on 4 x A100 80GB (plain data parallel: every GPU
holds all 16 B/param of model states), 4096-token sequences, 2 per micro-step, no activation
checkpointing. The planner's check gives the per-GPU breakdown against capacity;
``planner.fixes`` then evaluates candidate changes with the same models (memory, throughput, job
time; never guessed), keeps the minimal sets of up to two changes that fit, and ranks them by the
time of a stated job (1e9 tokens), then by memory. Ranking is by time and memory only: LoRA and
QLoRA train adapters instead of all weights, a trade-off in quality the planner does not judge.

CLI equivalent of the first step:
  planner check --model llama-3.1-8b --gpu a100-80gb-sxm --num-gpus 4 --method full \
    --seq-len 4096 --micro-batch 2 --checkpointing none

Run: python examples/oom_diagnosis.py
"""

from planner import TrainConfig, check, load_catalog
from planner.fixes import Change, evaluate_all, rank, smallest_fixes
from planner.models.cost import define_job

MODEL, GPU = "llama-3.1-8b", "a100-80gb-sxm"
BASE = TrainConfig(method="full", optimizer="adamw", num_gpus=4, seq_len=4096,
                   micro_batch_size=2, checkpointing="none")
JOB = define_job(tokens=1e9)
CHANGES = [
    Change("activation checkpointing", {"checkpointing": "full"}),
    Change("micro-batch 1 (x2 accumulation)", {"micro_batch_size": 1, "grad_accum": 2}),
    Change("chunked loss", {"chunked_loss": True}),
    Change("ZeRO-2", {"zero_stage": 2}),
    Change("ZeRO-3", {"zero_stage": 3}),
    Change("8-bit AdamW", {"optimizer": "adamw-8bit"}),
    Change("LoRA r16", {"method": "lora", "lora_rank": 16}),
    Change("QLoRA r16", {"method": "qlora", "lora_rank": 16}),
    Change("sequence 2048", {"seq_len": 2048}),
]


def diagnose(cat) -> None:
    doc = check(model=MODEL, gpu=GPU, config=BASE, catalog=cat, job=JOB)
    mem = doc["memory"]
    print(f"As asked: {mem['per_gpu_gib']:.1f} GiB per GPU of {mem['capacity_gib']:.0f} GiB "
          f"(peak in {mem['peak_phase']}) -> {'fits' if doc['fits'] else 'OUT OF MEMORY'}")
    terms = sorted(((k, v) for k, v in mem["breakdown_gib"].items() if v >= 0.05),
                   key=lambda kv: -kv[1])
    for name, gib in terms:
        print(f"  {name.replace('_', ' '):24s} {gib:7.1f} GiB  {gib / mem['per_gpu_gib']:5.1%}")


def single_changes(cat) -> None:
    print("\nOne change at a time (those that fit, fastest first for 1e9 tokens):")
    results = evaluate_all(MODEL, GPU, BASE, candidates=CHANGES, catalog=cat, job=JOB)
    for r in results:
        if not r.valid:
            print(f"  {r.name:34s} rejected: {r.error}")
    for r in rank(results):
        print(f"  {r.name:34s} {r.per_gpu_gib:6.1f} GiB  {r.tokens_per_s:8,.0f} tokens/s  "
              f"{r.hours:6.1f} h")
    misses = [r for r in results if r.valid and not r.fits]
    print("  not enough alone: " + ", ".join(f"{r.name} ({r.per_gpu_gib:.0f} GiB)"
                                              for r in misses))


def smallest_sets(cat) -> None:
    print("\nSmallest sets of changes that fit (minimal: no subset fits), ranked:")
    for r in smallest_fixes(MODEL, GPU, BASE, changes=CHANGES, max_changes=2, catalog=cat,
                            job=JOB)[:8]:
        print(f"  {r.name:58s} {r.per_gpu_gib:5.1f} GiB  {r.hours:6.1f} h")


def main() -> None:
    cat = load_catalog()
    diagnose(cat)
    single_changes(cat)
    smallest_sets(cat)


if __name__ == "__main__":
    main()
