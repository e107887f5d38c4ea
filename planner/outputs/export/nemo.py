"""NeMo 2 recipe script (``export_nemo``): a Python file that builds the model's NeMo 2.0 recipe,
sets the plan on it and runs it with NeMo-Run (the Python form of ``nemo llm finetune --factory
<recipe> <overrides>``, whose overrides cannot name a precision plugin).

Semantics followed (NVIDIA/NeMo@v2.4.0, commit 2381f42f):
nemo/collections/llm/recipes/<recipe>.py ``finetune_recipe(dir, name, num_nodes,
num_gpus_per_node, peft_scheme='lora'|'dora'|'none', ...)`` and ``pretrain_recipe(...)``;
recipes/finetune_default.py (data: SquadDataModule with seq_length, micro_batch_size,
global_batch_size; resume from ``nemo://<hf id>``, imported once with ``nemo llm import``);
nemo/lightning/pytorch/strategies/megatron_strategy.py MegatronStrategy
(tensor_model_parallel_size, pipeline_model_parallel_size, context_parallel_size,
sequence_parallel); recipes/precision/mixed_precision.py (bf16_mixed, fp16_mixed,
bf16_with_fp8_mixed); recipes/optim/adam.py (optim.config: Megatron-Core's OptimizerConfig);
nemo/collections/llm/peft/lora.py LoRA (dim, alpha, target_modules); model.config: the
Megatron-Core TransformerConfig (recompute_*, seq_length). Launch: NeMo-Run's LocalExecutor
with torchrun (examples/llm/pretrain/default_executor.py), SlurmExecutor across nodes.
NeMo's own parser (nemo_toolkit with megatron-core, Transformer Engine and NeMo-Run) has no
CPU-only install: tests check the script against these files' field names.
"""

from __future__ import annotations

from typing import Any

from planner.outputs.export._common import ExportResult, Job, _Out
from planner.outputs.export._mcore import (
    RECIPE_STEMS,
    batch_comment,
    check_mcore,
    expert_parallel,
    kernel_notes,
    lora_modules,
    optimizer_fields,
    recipe_stem,
    recompute,
)

NEMO_VERSIONS = "NeMo 2.4.0 (NVIDIA/NeMo@v2.4.0 recipes, NeMo-Run executors)"
# NeMo 2.4.0 recipes by catalog id: the shared Megatron-Core stems and NeMo's own.
NEMO_RECIPES = {**RECIPE_STEMS, "mistral-7b": "mistral_7b", "mixtral-8x7b": "mixtral_8x7b"}
NEMO_PRECISION = {"bf16": "bf16_mixed", "fp16": "fp16_mixed", "fp8": "bf16_with_fp8_mixed"}


class _Code(str):
    """A Python expression written as is (not as a string literal)."""


def _literal(value: Any) -> str:
    return str(value) if isinstance(value, _Code) else repr(value)


def _recipe_call(job: Job, stem: str) -> str:
    """The recipe factory call: pretraining or fine-tuning with the plan's PEFT scheme."""
    cfg = job.cfg
    nodes = f"num_nodes={job.num_hosts}, num_gpus_per_node={job.per_node}"
    if cfg.workload == "pretrain":
        return f'llm.{stem}.pretrain_recipe(name="planner", {nodes})'
    scheme = cfg.method if cfg.is_peft else "none"
    return f'llm.{stem}.finetune_recipe(name="planner", {nodes}, peft_scheme="{scheme}")'


def nemo_settings(job: Job, out: _Out) -> list[tuple[str, Any]]:
    """(recipe attribute, value) of every plan setting, in the script's order."""
    cfg = job.cfg
    sets: list[tuple[str, Any]] = [
        ("trainer.strategy.tensor_model_parallel_size", cfg.tp),
        ("trainer.strategy.pipeline_model_parallel_size", cfg.pp),
        ("trainer.strategy.context_parallel_size", cfg.cp),
        ("trainer.strategy.sequence_parallel", cfg.tp > 1),
        *((f"trainer.strategy.{k}", v) for k, v in expert_parallel(job).items()),
        ("trainer.plugins", _Code(f"{NEMO_PRECISION[job.precision]}()")),
        ("data.micro_batch_size", cfg.micro_batch_size),
        ("data.global_batch_size", cfg.global_batch_size),
        ("data.seq_length", cfg.seq_len),
        ("model.config.seq_length", cfg.seq_len),
    ]
    sets += [(f"model.config.{k}", v) for k, v in recompute(job, out).items()]
    sets += [(f"optim.config.{k}", v) for k, v in optimizer_fields(job).items()]
    sets += [("optim.config.bf16", job.precision in ("bf16", "fp8")),
             ("optim.config.fp16", job.precision == "fp16"),
             ("optim.config.lr", 1e-4 if cfg.is_peft else 5e-6)]
    if cfg.is_peft:
        sets += [("peft.dim", cfg.rank), ("peft.alpha", cfg.lora_alpha),
                 ("peft.target_modules", lora_modules(job, out))]
    if cfg.workload == "sft":
        sets.append(("resume.restore_config.path", f"nemo://{job.model_path}"))
    return sets


def _executor(job: Job, out: _Out) -> list[str]:
    if job.num_hosts == 1:
        return [f'executor = run.LocalExecutor(ntasks_per_node={job.per_node}, '
                'launcher="torchrun")']
    out.note("multi-node: NeMo-Run submits to Slurm from a login node; set SLURM_ACCOUNT, "
             "SLURM_PARTITION and the NeMo container image before running")
    return ["executor = run.SlurmExecutor(",
            '    account=os.environ["SLURM_ACCOUNT"], partition=os.environ["SLURM_PARTITION"],',
            '    tunnel=run.LocalTunnel(job_dir=os.path.abspath("nemo_runs")),',
            f"    nodes={job.num_hosts}, ntasks_per_node={job.per_node}, "
            f"gpus_per_node={job.per_node},",
            '    container_image=os.environ.get("NEMO_IMAGE", "nvcr.io/nvidia/nemo:25.07"),',
            ")"]


def export_nemo(job: Job, out: _Out) -> ExportResult:
    """A NeMo 2 recipe script (Python, run with NeMo-Run) for the job."""
    cfg = job.cfg
    check_mcore(job, out, methods=("full", "lora", "dora"))
    stem = recipe_stem(job, out, NEMO_RECIPES, where="NeMo 2.4.0")
    sets = nemo_settings(job, out)
    kernel_notes(job, out)
    head = ["#!/usr/bin/env python", *out.title(job), batch_comment(job)]
    if cfg.workload == "sft":
        head.append(f'# Once before: nemo llm import model={stem} source="hf://{job.model_path}"')
        out.note(f"import the checkpoint once: nemo llm import model={stem} "
                 f'source="hf://{job.model_path}" (into $NEMO_HOME); the recipe trains on '
                 "SQuAD: set recipe.data to your data module")
    else:
        out.note("pretrain: the recipe trains on mock data; set recipe.data to a "
                 "PreTrainingDataModule over your tokenized corpus")
    head.append("# launch: python nemo_recipe.py")
    body = ["import os", ""] if job.num_hosts > 1 else []  # the Slurm executor's settings
    body += ["import nemo_run as run",
            "from nemo.collections import llm",
            "from nemo.collections.llm.recipes.precision.mixed_precision import "
            f"{NEMO_PRECISION[job.precision]}", "",
            f"recipe = {_recipe_call(job, stem)}"]
    body += [f"recipe.{attr} = {_literal(value)}" for attr, value in sets]
    body += ["", *_executor(job, out), 'run.run(recipe, executor=executor, name="planner")']
    return out.result("\n".join([*head, *body]) + "\n", "nemo_recipe.py")
