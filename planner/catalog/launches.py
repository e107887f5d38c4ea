"""Which framework profiles the planner writes a launch for, per launch format and workload
(the writers live in planner.outputs.export; this table is their one list, read by the exporter
and by the plan space, so that every plan the solver returns exports: issue 17 section 4).

torchrun runs TRL's supervised/preference scripts on the Hugging Face Trainer (Unsloth's
trainers are TRL's; the Liger-kernel profile is the Trainer with use_liger_kernel) or
Megatron-LM's pretrain_gpt.py; the DeepSpeed JSON is read by DeepSpeed's engine and by the
Trainer on it; the Accelerate YAML launches the Trainer with FSDP through Accelerate. A profile
or workload not listed has no writer: `check` predicts it, `plan` does not plan on it.
"""

from __future__ import annotations

from typing import Any

SUPERVISED = ("pretrain", "sft", "rm", "dpo")

WRITES_FOR: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "torchrun": (("hf-trainer", "hf-trainer-liger", "trl", "unsloth", "megatron-lm"),
                 SUPERVISED),
    "deepspeed": (("deepspeed", "hf-deepspeed"), SUPERVISED),
    "accelerate": (("accelerate-fsdp",), SUPERVISED),
    "verl": (("verl",), ("ppo", "grpo")),
    "openrlhf": (("openrlhf",), ("sft", "rm", "dpo", "ppo", "grpo")),
    "llamafactory": (("llama-factory",), ("pretrain", "sft", "rm", "dpo", "ppo")),
    "torchtune": (("torchtune",), ("sft", "dpo")),
    "torchtitan": (("torchtitan",), ("pretrain", "sft")),
    "litgpt": (("litgpt",), ("pretrain", "sft")),
    "llmfoundry": (("llm-foundry",), ("pretrain", "sft")),
    "nemo-rl": (("nemo-rl",), ("sft", "dpo", "grpo")),
    "prime-rl": (("prime-rl",), ("sft", "grpo")),
    "deepspeed-chat": (("deepspeed-chat",), ("sft", "rm", "dpo", "ppo")),
    "nemo": (("nemo",), ("pretrain", "sft")),
    "megatron-bridge": (("megatron-bridge",), ("pretrain", "sft")),
    "nemo-automodel": (("nemo-automodel",), ("pretrain", "sft")),
    "axolotl": (("axolotl",), ("pretrain", "sft", "rm", "dpo", "grpo")),
    "ms-swift": (("ms-swift",), ("pretrain", "sft", "rm", "dpo", "ppo", "grpo")),
}


def launch_format_of(profile: Any, workload: str) -> str | None:
    """The format whose writer launches this framework (frameworks.Profile) for ``workload``:
    its profile's launch_format where WRITES_FOR covers both, else None (no writer)."""
    fmt = profile.value("launch_format")
    if fmt not in WRITES_FOR:
        return None
    frameworks, workloads = WRITES_FOR[fmt]
    return fmt if profile.id in frameworks and workload in workloads else None


def written_for(workload: str) -> tuple[str, ...]:
    """The profile ids the planner writes a launch of ``workload`` for."""
    return tuple(sorted({fid for fids, loads in WRITES_FOR.values() if workload in loads
                         for fid in fids}))
