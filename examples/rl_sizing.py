"""How many GPUs for GRPO (and PPO) of a 7B model? The cheapest purchase, then cost vs time.

GRPO of Qwen2.5-7B on math-style prompts: 512 prompt + 1024 response tokens, 256 prompts per
iteration, 5 samples each (verl-style: vLLM rollout engines colocated with the FSDP trainer, or
on GPUs of their own). The planner sizes every role (policy, reference, rollout engine with its
KV cache; PPO adds a critic and a reward model) and picks placement, rollout TP, the vLLM memory
fraction and offload. The job is 200 iterations (``steps`` counts RL iterations). First the
cheapest GPUs to buy, for LoRA and for full training, and PPO for comparison; the fastest
purchase within $60,000; then the cost-vs-time Pareto front of renting for the same job; last,
one PPO job on 20 H100s in the three placements (colocate, separate, split), checked as given.

The GPU types are limited to three to keep the script fast; drop ``gpus`` for the whole catalog.

CLI equivalents:
  planner plan --model qwen2.5-7b --workload grpo --prompt-len 512 --response-len 1024 \
    --method lora --steps 200 --gpus h100-sxm,a100-80gb-sxm,rtx-4090 --max-gpus 64
  planner pareto --model qwen2.5-7b --workload grpo --prompt-len 512 --response-len 1024 \
    --method lora --pricing rent --steps 200 --gpus h100-sxm,a100-80gb-sxm,rtx-4090 --max-gpus 64

Run: python examples/rl_sizing.py
"""

from planner import PlanRequest, TrainConfig, check, load_catalog, pareto, plan
from planner.catalog.request import rollout_gpu_count

GPUS = ("h100-sxm", "a100-80gb-sxm", "rtx-4090")
RL = dict(model="qwen2.5-7b", prompt_len=512, response_len=1024, rollout_batch=256, gpus=GPUS,
          max_gpus=64, steps=200)


def show_plan(cat, label: str, **kw) -> None:
    result = plan(PlanRequest(**RL, **kw), cat)
    p = result.plan
    if p is None:
        print(f"{label:22s} infeasible: " + "; ".join(c.fix for c in result.conflicts))
        return
    c, m = p.config, p.memory
    util = c.gpu_memory_utilization or m.engine_utilization
    print(f"{label:22s} {p.num_gpus:2d} x {p.gpu:13s} {p.method_label:9s} "
          f"{'FSDP' if c.fsdp else f'zero{c.zero_stage}'} {c.placement:8s} "
          f"rollout TP {c.rollout_tp}, vLLM memory {util or 0:.2f}, "
          f"{'idle roles offloaded, ' if c.offload_idle else ''}"
          f"{m.device / 2**30:.1f} of {m.capacity / 2**30:.0f} GiB; {p.time_hours:,.1f} h; "
          f"${p.cost_usd:,.0f}")


def main() -> None:
    cat = load_catalog()
    print("Cheapest purchase (GPUs + hosts) for 200 GRPO / PPO iterations of qwen2.5-7b:")
    show_plan(cat, "GRPO, LoRA", workload="grpo", method="lora")
    show_plan(cat, "GRPO, full", workload="grpo", method="full")
    show_plan(cat, "PPO, LoRA", workload="ppo", method="lora")
    print("Fastest purchase within $60,000:")
    show_plan(cat, "GRPO, LoRA", workload="grpo", method="lora", objective="time",
              budget_usd=60_000)
    show_plan(cat, "GRPO, full", workload="grpo", method="full", objective="time",
              budget_usd=60_000)
    print("\nRenting for 200 GRPO iterations (LoRA): each point the cheapest plan at least 1 % "
          "faster than the previous one")
    points = pareto(PlanRequest(**RL, workload="grpo", method="lora", pricing="rent"), cat,
                    max_points=6)
    for p in points:
        print(f"  {p.num_gpus:2d} x {p.gpu:13s} {p.config.placement:8s} "
              f"{p.throughput.tokens_per_s:9,.0f} tokens/s {p.time_hours:6.1f} h "
              f"${p.cost_usd:7,.0f}")

    print("\nFull PPO of qwen2.5-7b on 20 x h100-sxm (ZeRO-3), by placement:")
    placements(cat)


def placements(cat) -> None:
    """One job, three placements: all roles and the engines time-share 20 GPUs; engines on 10
    of them and the roles time-sharing the other 10; each role and the engines on 4 of their
    own. Fewer roles per GPU, but each sharded over fewer GPUs: split's actor holds a quarter
    of its ZeRO-3 states per GPU where separate's holds a tenth. Colocated phases run one after
    another; apart, generation overlaps training and split's roles run side by side."""
    job = dict(workload="ppo", method="full", zero_stage=3, prompt_len=512, response_len=1024,
               micro_batch_size=4, rollout_batch=256, num_gpus=20)
    for place in ("colocate", "separate", "split"):
        doc = check(model="qwen2.5-7b", gpu="h100-sxm", catalog=cat,
                    config=TrainConfig(**job, placement=place))
        t, m = doc["throughput"], doc["memory"]
        phases = t["phases_s"]
        cfg = TrainConfig.model_validate(doc["config"])  # split: the equal groups filled in
        where = ", ".join(f"{n} {g}" for n, g in cfg.role_gpus or ()) or "shared"
        print(f"  {place:8s} engines on {rollout_gpu_count(cfg):2d} GPUs, roles: {where:38s} "
              f"peak {m['per_gpu_gib']:5.1f} GiB ({m['peak_phase']}); iteration "
              f"{t['step_time_s']:5.1f} s (generation {phases['generation']:4.1f} s, actor "
              f"update {phases['actor update']:4.1f} s)")


if __name__ == "__main__":
    main()
