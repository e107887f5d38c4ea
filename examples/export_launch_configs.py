"""From a plan to a launch: plan a LoRA fine-tune and a GRPO run, then export each to every
launch format the planner writes (DeepSpeed JSON, Accelerate YAML, torchrun, verl, OpenRLHF,
LLaMA-Factory YAML).

A format that cannot express a plan says why in one line (GRPO has no LLaMA-Factory stage, verl
does not run SFT); one that can only approximate it returns warnings; notes say what the launch
still needs (data paths, the script that reads the flags). The same works on the command line:

    planner plan --model 0.5b --gpus rtx-4090 --method lora --json > plan.json
    planner export --format deepspeed --out ds_config.json plan.json
    planner plan ... --workload grpo --export verl --out run_verl.sh

Run: python examples/export_launch_configs.py [--out DIR]   (--out: also write the files)
"""

import sys
from pathlib import Path

from planner import PlanRequest, plan
from planner.errors import PlannerError
from planner.outputs.export import FORMATS, export_plan
from planner.solver.result import PlanResult

SFT = PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-4090",), method="lora")
GRPO = PlanRequest(model="qwen2.5-0.5b", workload="grpo", gpus=("rtx-4090",), method="lora",
                   num_gpus=4, prompt_len=256, response_len=512, rollout_batch=64,
                   global_batch_size=80)  # 16 prompts x 5 samples per optimizer step


def export_all(title: str, result: PlanResult, out_dir: Path | None) -> None:
    p = result.plan
    if p is None:
        print(f"{title}: infeasible")
        return
    c = p.config
    print(f"{title}: {p.num_gpus} x {p.gpu}, {p.method_label}, ZeRO-{c.zero_stage}, "
          f"micro-batch {c.micro_batch_size} x accumulation {c.grad_accum} x dp {c.dp}")
    for fmt in FORMATS:
        try:
            res = export_plan(result, fmt)
        except PlannerError as exc:
            print(f"  {fmt:12s} refused: {exc}")
            continue
        print(f"  {fmt:12s} -> {res.filename_suggestion} ({len(res.text.splitlines())} lines, "
              f"{len(res.warnings)} warnings)")
        for warning in res.warnings:
            print(f"  {'':12s}    warning: {warning}")
        if out_dir:
            sub = out_dir / title.lower().replace(" ", "_")
            sub.mkdir(parents=True, exist_ok=True)
            (sub / res.filename_suggestion).write_text(res.text)


def main(argv: list[str] | None = None) -> None:
    """``--out DIR`` writes every file under DIR; without it nothing is written."""
    args = sys.argv[1:] if argv is None else argv
    out_dir = Path(args[args.index("--out") + 1]) if "--out" in args[:-1] else None
    export_all("LoRA SFT", plan(SFT), out_dir)
    grpo = plan(GRPO)
    export_all("GRPO", grpo, out_dir)
    if grpo.plan is not None:
        print("\nThe GRPO plan as verl Hydra overrides:\n")
        print(export_plan(grpo, "verl").text)


if __name__ == "__main__":
    main()
