"""Where the seed documents' AdamW arithmetic goes wrong (seed 004, Mistral-7B on 64 GB cards).

The seed's table puts fp32 AdamW states at "2x the parameter size" (~28 GB for 7B) and the
total of full fine-tuning at ~61 GB. Mixed-precision AdamW keeps an fp32 master copy (4 B) and
fp32 momentum and variance (4 B + 4 B) per parameter: 12 B, i.e. 87 GB for Mistral-7B, before
16-bit weights and gradients (Rajbhandari et al., ZeRO, 2020). This script prints the planner's
breakdown for supervised fine-tuning on one and on eight 64 GB Ascend 910B cards (the reward
model head of the seed changes little of this; RM workloads arrive with the RL issue).

Run: python examples/adamw_states.py
"""

from planner import TrainConfig, check, load_catalog
from planner.catalog.params import count_params

GB = 1e9


def main() -> None:
    model = load_catalog().model("mistral-7b").spec
    n = count_params(model).total
    print(f"mistral-7b: {n / 1e9:.2f} B parameters")
    print(f"  seed's optimizer states (2 x 14 GB):        {2 * 2 * n / GB:6.1f} GB")
    print(f"  fp32 master + momentum + variance (12 B/p):  {12 * n / GB:6.1f} GB")
    print(f"  + bf16 weights and gradients (16 B/p total): {16 * n / GB:6.1f} GB")
    base = TrainConfig(method="full", micro_batch_size=1, seq_len=384, grad_accum=8)
    for title, cfg in [
        ("1 x 64 GB, no sharding", base),
        ("8 x 64 GB, ZeRO-2", base.model_copy(update={"num_gpus": 8, "zero_stage": 2})),
        ("8 x 64 GB, ZeRO-3", base.model_copy(update={"num_gpus": 8, "zero_stage": 3})),
        ("1 x 64 GB, LoRA r16", base.model_copy(update={"method": "lora", "lora_rank": 16})),
    ]:
        doc = check(model="mistral-7b", gpu="ascend-910b", config=cfg)
        mem = doc["memory"]
        verdict = "fits" if doc["fits"] else "OOM"
        print(f"{title:26s} {mem['per_gpu_gib']:6.1f} GiB per card of "
              f"{mem['capacity_gib']:.0f} -> {verdict}")


if __name__ == "__main__":
    main()
