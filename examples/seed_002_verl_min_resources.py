"""Seed 002: verl's minimum-resource table for GRPO, row by row, at each script's settings.

Every row of verl's device-tuning table (docs/perf/device_tuning.rst; the verl-tune-* cases in
../shared/validation/memory_cases.yaml) ran on the stated GPUs, so each should be predicted to
fit. Expressed as in the scripts: GRPO with 5 samples per prompt, FSDP, verl's param/optimizer
offload (states of idle roles moved to host RAM between phases: offload_idle), gradient
checkpointing, LoRA rank 32 on all linear layers where LoRA, rollout TP, gpu_memory_utilization,
the update and log-prob micro-batches (equal in every script), prompt and response lengths, and
prompts per iteration (train_batch_size).

verl's own memory behaviour, expressed with the planner's options:
* use_remove_padding (every row): the actor's passes see only real tokens: mean_seq_len. The
  rows ran on GSM8K: its prompts with verl's instruction and Qwen's chat template are about 120
  tokens (questions average ~46 words); the same contributor's 3B GRPO-LoRA log on GSM8K ends at
  a mean response of 304 tokens (0.5B: 602). GSM8K_MEAN_TOKENS = 120 + 330 = 450 is an
  assumption stated here; each row prints the largest mean at which it still fits.
* log-probs and entropy on bf16 logits with flash-attn's cross-entropy kernel (no fp32 copy):
  loss_in_fp32=False; the actor is built in fp32 under FSDP mixed precision, the LoRA base
  included: fp32_trained_weights=True.

What the planner cannot express, said per row (``note``) and never silently dropped:
* Ulysses sequence parallel 2 (14B/32B/72B LoRA rows): the RL trainer is data parallel only;
  expressed with the same tokens per GPU, i.e. half the DP rank's sequences per GPU at full length.
* dynamic batching (72B rows): expressed as its token budget, 24,000 real tokens per GPU = 23
  full-length 1,024-token sequences per micro-step (no mean_seq_len: the budget is real tokens).
* rollout TP 16 over 8 KV heads (72B rows): vLLM replicates KV heads; expressed as rollout TP 8,
  which puts more engine weight on each GPU (conservative).
* Megatron TP 8 training (32B on 8x H20): not expressible; only its rollout engine is checked,
  and an FSDP layout of the same job is shown for information.

Run: python examples/seed_002_verl_min_resources.py
"""

from dataclasses import dataclass

from planner import TrainConfig, check, load_catalog
from planner.cli import run
from planner.fixes import FixResult, evaluate, largest_fitting


@dataclass(frozen=True)
class Row:
    """One row of the table as the planner expresses it (``micro``: sequences per GPU)."""

    case: str  # verl-tune-* case id in memory_cases.yaml
    model: str
    gpu: str
    gpus: int
    method: str
    micro: int
    u: float
    rollout_tp: int
    prompt: int
    response: int
    prompts: int  # train_batch_size: prompts per iteration
    accum: int  # micro-steps per optimizer step (ppo_mini_batch_size x n / dp / micro)
    note: str = ""
    megatron: bool = False  # training layout not expressible
    token_budget: bool = False  # dynamic batching: micro already counts real tokens


# See the module docstring: GSM8K prompt (~120 tokens) + mean response (~330 tokens).
GSM8K_MEAN_TOKENS = 450
COMMAND_ROW = "verl-tune-qwen2.5-7b-grpolora-1xh100"  # the row also asked on the command line


SP = "Ulysses SP 2: {} sequences per DP rank over 2 GPUs = {} per GPU at full length"
ROWS = [
    Row("verl-tune-qwen2.5-0.5b-grpolora-1xh100", "qwen2.5-0.5b", "h100-sxm", 1, "lora", 116,
        0.1, 1, 512, 1024, 116, 5),
    Row("verl-tune-qwen2.5-1.5b-grpolora-1xh100", "qwen2.5-1.5b", "h100-sxm", 1, "lora", 128,
        0.1, 1, 512, 1024, 128, 5),
    Row("verl-tune-qwen2.5-3b-grpolora-1xh100", "qwen2.5-3b", "h100-sxm", 1, "lora", 62, 0.1, 1,
        512, 1024, 62, 5),
    Row("verl-tune-qwen2.5-7b-grpolora-1xh100", "qwen2.5-7b", "h100-sxm", 1, "lora", 16, 0.2, 1,
        512, 1024, 16, 5, "table says 16 prompts; the script's trail says 100 (not used)"),
    Row("verl-tune-qwen2.5-14b-grpolora-2xh100", "qwen2.5-14b", "h100-sxm", 2, "lora", 58, 0.25,
        2, 512, 1024, 116, 5, SP.format(116, 58)),
    Row("verl-tune-qwen2.5-32b-grpolora-4xh100", "qwen2.5-32b", "h100-sxm", 4, "lora", 44, 0.3,
        4, 512, 1024, 176, 5, SP.format(88, 44) + "; 44 prompts/GPU, the trail's last success "
        "(the table's 45 failed in it)"),
    Row("verl-tune-qwen2.5-72b-grpolora-8xh100", "qwen2.5-72b", "h100-sxm", 8, "lora", 22, 0.4,
        8, 512, 1024, 176, 5, SP.format(44, 22)),
    Row("verl-tune-qwen2-7b-grpo-2xh800", "qwen2-7b", "h800", 2, "full", 16, 0.6, 2, 1024, 1024,
        1024, 40),
    Row("verl-tune-qwen2.5-coder-14b-grpo-4xh800", "qwen2.5-14b", "h800", 4, "full", 16, 0.5, 4,
        1024, 1024, 1024, 20, "Qwen2.5-Coder-14B has Qwen2.5-14B's architecture"),
    Row("verl-tune-qwen2.5-32b-grpo-8xh20-megatron", "qwen2.5-32b", "h20", 8, "full", 1, 0.6, 8,
        2048, 6144, 512, 160, "Megatron TP 8 not expressible: engine checked; FSDP shown",
        megatron=True),
    Row("verl-tune-qwen2-72b-grpo-32xh20", "qwen2-72b", "h20", 32, "full", 23, 0.6, 8, 512, 512,
        1024, 2, "dynamic batching 24,000 tokens/GPU = 23 x 1,024; rollout TP 16 -> 8",
        token_budget=True),
    Row("verl-tune-qwen2-72b-grpo-32xh800", "qwen2-72b", "h800", 32, "full", 23, 0.6, 8, 512,
        512, 1024, 2, "dynamic batching 24,000 tokens/GPU = 23 x 1,024; rollout TP 16 -> 8",
        token_budget=True),
]


def config(row: Row, **update: object) -> TrainConfig:
    """The row's script settings (FSDP layout for the Megatron row)."""
    cfg = TrainConfig(
        workload="grpo", method=row.method, lora_rank=32 if row.method == "lora" else None,
        num_gpus=row.gpus, fsdp=True, offload_idle=True, checkpointing="full",
        micro_batch_size=row.micro, grad_accum=row.accum, prompt_len=row.prompt,
        response_len=row.response, rollout_n=5, rollout_batch=row.prompts,
        gpu_memory_utilization=row.u, rollout_tp=row.rollout_tp,
        mean_seq_len=None if row.token_budget else min(GSM8K_MEAN_TOKENS,
                                                       row.prompt + row.response),
        loss_in_fp32=False, fp32_trained_weights=True,
    )
    return cfg.model_copy(update=update)


# A row ran, so its memory was within the card: it is judged against the whole capacity (no
# planning margin). The tuning trails in the scripts ('58 ok -> 59 failed') sit at the edge;
# with the planner's 2 % margin an exact model would call such a row infeasible.
MARGIN = 0.0

# The first micro-batch each tuning trail saw fail, where the script records one (sequences per
# GPU as in ROWS; the 7B trail ran at a larger u than the table's row).
TRAIL_FIRST_FAILURE = {
    "verl-tune-qwen2.5-7b-grpolora-1xh100": 101,
    "verl-tune-qwen2.5-14b-grpolora-2xh100": 59,
    "verl-tune-qwen2.5-32b-grpolora-4xh100": 45,
    "verl-tune-qwen2.5-72b-grpolora-8xh100": 23,
}


def predict(row: Row, catalog=None, **update: object) -> FixResult:
    return evaluate(row.model, row.gpu, config(row, **update), name=row.case, catalog=catalog,
                    margin=MARGIN)


def largest_micro(row: Row, catalog, hi: int) -> int | None:
    """The largest micro-batch predicted to fit at the row's other settings."""
    return largest_fitting(row.model, row.gpu, config(row), field_name="micro_batch_size", lo=1,
                           hi=hi, catalog=catalog, margin=MARGIN)


def command(row: Row) -> list[str]:
    """The row as a user types it (``planner check``; verl's profile sets its memory semantics)."""
    cfg = config(row)
    argv = ["check", "--model", row.model, "--gpu", row.gpu, "--num-gpus", str(row.gpus),
            "--workload", "grpo", "--method", row.method, "--fsdp", "--offload-idle",
            "--checkpointing", "full", "--micro-batch", str(row.micro), "--grad-accum",
            str(row.accum), "--prompt-len", str(row.prompt), "--response-len", str(row.response),
            "--rollout-n", "5", "--rollout-batch", str(row.prompts), "--gpu-memory-utilization",
            str(row.u), "--rollout-tp", str(row.rollout_tp), "--framework", "verl",
            "--memory-margin", str(MARGIN)]
    if cfg.lora_rank:
        argv += ["--lora-rank", str(cfg.lora_rank)]
    if cfg.mean_seq_len:
        argv += ["--mean-seq-len", str(cfg.mean_seq_len)]
    return argv


def engine_line(row: Row, cat) -> str:
    """The Megatron row: only its rollout phase (engine at u, weights / rollout TP) is checked."""
    doc = check(model=row.model, gpu=row.gpu, config=config(row), catalog=cat)
    rollout = doc["memory"]["phases_gib"]["rollout"]
    return (f"    rollout phase {rollout:.1f} GiB of {doc['memory']['capacity_gib']:.0f}, the "
            f"engine decodes {doc['throughput']['rollout_concurrency']} sequences of "
            f"{row.prompt + row.response} tokens at once")


def main() -> dict:
    cat = load_catalog()
    print(f"{'row':36s} {'micro':>5s} {'GiB/GPU':>8s} {'cap':>4s} fits  {'max micro':>9s} "
          f"{'max mean':>8s} {'s/iter':>7s}")
    fails, results, edges = [], {}, {}
    for row in ROWS:
        r = results[row.case] = predict(row, cat)
        most = largest_micro(row, cat, 4 * row.micro) or 0
        ceiling = "-" if row.token_budget else largest_fitting(
            row.model, row.gpu, config(row), field_name="mean_seq_len", lo=1,
            hi=row.prompt + row.response, catalog=cat, margin=MARGIN) or 0
        verdict = "yes" if r.fits else "NO"
        print(f"{row.case[10:]:36s} {row.micro:5d} {r.per_gpu_gib:8.1f} {r.capacity_gib:4.0f} "
              f"{verdict:4s}  {most:9d} {ceiling!s:>8s} {r.step_time_s:7.0f}")
        if row.note:
            print(f"    {row.note}")
        if row.megatron:
            print(engine_line(row, cat))
        elif not r.fits:
            fails.append(r)
    print(f"\nmax micro: the largest micro-batch that fits at {GSM8K_MEAN_TOKENS} real tokens per "
          "sequence (capped at 4x the script's); max mean: the largest mean real tokens per "
          "sequence at which the script's micro-batch fits.")
    expressible = len(ROWS) - sum(r.megatron for r in ROWS)
    print(f"{expressible - len(fails)} of {expressible} expressible rows predicted to fit.")
    for r in fails:
        print(f"  NOT: {r.name[10:]:36s} " + ", ".join(f"{k} {v:.0f}" for k, v in r.top_terms(4)))
    print("\nThe scripts' tuning trails against the predicted edge (largest fitting micro):")
    for row in ROWS:
        if row.case in TRAIL_FIRST_FAILURE:
            failed = TRAIL_FIRST_FAILURE[row.case]
            edge = edges[row.case] = largest_micro(row, cat, 2 * failed)
            print(f"  {row.case[10:]:36s} trail: {failed - 1} ran, {failed} failed; predicted "
                  f"edge {edge} ({(edge + 1 - failed) / failed:+.0%})")
    seven_b = next(row for row in ROWS if row.case == COMMAND_ROW)
    print(f"\nThe same from the command line, the {seven_b.model} row:\n"
          f"$ planner {' '.join(command(seven_b))}")
    code = run(command(seven_b))
    return {"results": results, "edges": edges, "expressible": expressible,
            "fit": expressible - len(fails), "command_exit": code}


if __name__ == "__main__":
    main()
