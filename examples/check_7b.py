"""Does LoRA fine-tuning of a 7B model at 4k tokens fit one 24 GB card? And full training?

Run: python examples/check_7b.py
"""

from planner import TrainConfig, check


def show(title: str, doc: dict) -> None:
    mem = doc["memory"]
    verdict = "fits" if doc["fits"] else "does NOT fit"
    print(f"{title}: {mem['per_gpu_gib']:.1f} GiB of {mem['capacity_gib']:.0f} GiB -> {verdict}")
    top = sorted(mem["breakdown_gib"].items(), key=lambda kv: -kv[1])[:3]
    print("   largest terms: " + ", ".join(f"{k} {v:.1f} GiB" for k, v in top))


def main() -> None:
    lora = TrainConfig(method="lora", lora_rank=16, seq_len=4096)
    qlora = TrainConfig(method="qlora", lora_rank=16, seq_len=4096)
    full = TrainConfig(method="full", seq_len=4096)
    show("7b LoRA  on 1x rtx-4090", check(model="7b", gpu="rtx-4090", config=lora))
    show("7b QLoRA on 1x rtx-4090", check(model="7b", gpu="rtx-4090", config=qlora))
    show("7b full  on 1x a100-80gb", check(model="7b", gpu="a100-80gb-sxm", config=full))
    sharded = full.model_copy(update={"num_gpus": 4, "zero_stage": 3})
    show("7b full  on 4x a100-80gb, ZeRO-3", check(model="7b", gpu="a100-80gb-sxm", config=sharded))


if __name__ == "__main__":
    main()
