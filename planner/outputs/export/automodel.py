"""NeMo AutoModel YAML recipe config (``export_automodel``) and its launch line.

Semantics followed (NVIDIA-NeMo/Automodel@v0.5.0, commit d02f49cb):
examples/llm_finetune/llama3_1/llama3_1_8b_squad_qlora.yaml and the other example configs (the
sections recipe, step_scheduler, model, peft, distributed, quantization, loss_fn, dataset,
dataloader, optimizer); nemo_automodel/recipes/_dist_utils.py parse_distributed_section
(strategy fsdp2 | ddp, tp_size, pp_size, cp_size, dp_size, activation_checkpointing
true | false | "selective", the rest forwarded to the strategy config, offload_policy built from
its ``_target_``; pp_size > 1 needs a ``pipeline`` block); components/distributed/config.py
FSDP2Config (sequence_parallel, offload_policy, activation_checkpointing) and DDPConfig;
components/distributed/pipelining/config.py PipelineConfig (pp_microbatch_size,
pp_batch_size); components/training/step_scheduler.py (gradient accumulation =
global_batch_size / (local_batch_size x dp)); components/_peft/lora.py PeftConfig
(target_modules, match_all_linear, dim, alpha, use_dora); components/loss/masked_ce.py
MaskedCrossEntropy; cli/app.py (``automodel <config.yaml> --nproc-per-node N``, or
``torchrun ... -m nemo_automodel.cli.app <config.yaml>`` across nodes).
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.outputs.export._common import (
    ExportResult,
    Job,
    _checkpointing_warning,
    _need_not_rl,
    _Out,
    _precision_note,
)

AUTOMODEL_VERSIONS = "NeMo AutoModel 0.5.0 (NVIDIA-NeMo/Automodel@v0.5.0)"
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16"}
# The plan's LoRA targets as Automodel's wildcard module patterns (HF projection names).
AUTOMODEL_MODULES = {"q": "*.q_proj", "k": "*.k_proj", "v": "*.v_proj", "o": "*.o_proj",
                     "gate": "*.gate_proj", "up": "*.up_proj", "down": "*.down_proj"}
AUTOMODEL_OPTIMIZERS = {
    "adamw": {"_target_": "torch.optim.AdamW", "betas": [0.9, 0.999], "weight_decay": 0.01},
    "adamw-8bit": {"_target_": "bitsandbytes.optim.AdamW8bit", "weight_decay": 0.01},
    "paged-adamw-8bit": {"_target_": "bitsandbytes.optim.PagedAdamW8bit",
                         "weight_decay": 0.01},
    "sgd": {"_target_": "torch.optim.SGD"},
    "sgd-momentum": {"_target_": "torch.optim.SGD", "momentum": 0.9},
    "adafactor": {"_target_": "torch.optim.Adafactor"},
}


def _strategy(job: Job) -> str:
    """FSDP2 for a sharded plan, one GPU (Automodel's single-GPU examples) or model parallel
    sizes; DDP for plain data parallel."""
    c = job.cfg
    return "fsdp2" if c.fsdp or job.num_gpus == 1 or c.tp * c.cp * c.pp > 1 else "ddp"


def _automodel_checks(job: Job, out: _Out) -> None:
    cfg = job.cfg
    _need_not_rl(job, out)
    if cfg.workload not in ("pretrain", "sft"):
        out.refuse(f"workload {cfg.workload} (Automodel's LLM recipes train next-token "
                   "prediction)", "use --format torchrun (TRL)")
    if cfg.method == "freeze":
        out.refuse("freeze tuning (Automodel trains full weights or PEFT adapters)",
                   "re-plan with --method lora")
    if cfg.zero_stage:
        out.refuse(f"ZeRO-{cfg.zero_stage} (Automodel shards with FSDP2)",
                   "re-plan with --sharding fsdp or none")
    if cfg.offload != "none" and _strategy(job) != "fsdp2":
        out.refuse(f"offload {cfg.offload} without FSDP2 (offload_policy is an FSDP2 setting)",
                   "re-plan with --sharding fsdp or --offload none")
    if cfg.offload != "none" and (cfg.paged or cfg.optimizer == "adamw-8bit"):
        out.refuse(f"{cfg.optimizer} with FSDP2 CPU offload (bitsandbytes optimizers step on "
                   "the GPU only)", "re-plan with --optimizer adamw or --offload none")
    if cfg.method == "qlora" and cfg.quant_format != "nf4":
        out.refuse(f"QLoRA on {cfg.quant_format} (Automodel quantizes with bitsandbytes nf4)",
                   "re-plan the QLoRA with quant_format nf4 (bitsandbytes)")


def _distributed(job: Job, out: _Out) -> dict[str, Any]:
    """The distributed section: strategy, parallel sizes, checkpointing, offload, pipeline."""
    cfg = job.cfg
    dist: dict[str, Any] = {"strategy": _strategy(job), "dp_size": None, "tp_size": cfg.tp,
                            "cp_size": cfg.cp, "pp_size": cfg.pp,
                            "sequence_parallel": cfg.tp > 1}
    if job.writes_ep:  # _dist_utils.py parse_distributed_section ep_size (v0.5.0)
        dist["ep_size"] = cfg.ep
    if cfg.tp * cfg.cp * cfg.pp > 1 and not cfg.fsdp and cfg.dp > 1:
        out.warn("tensor/context/pipeline parallel run under Automodel's FSDP2 strategy: "
                 "its data-parallel ranks shard the weights (less memory than planned)")
    if dist["strategy"] == "ddp":
        del dist["sequence_parallel"]  # DDPConfig has no such field
    dist["activation_checkpointing"] = {"none": False, "full": True,
                                        "selective": "selective"}[cfg.checkpointing]
    if cfg.checkpointing == "selective" and dist["strategy"] == "ddp":
        dist["activation_checkpointing"] = True  # parse_distributed_section: FSDP2 only
        _checkpointing_warning(job, out, "activation_checkpointing true")
    elif cfg.checkpointing == "selective" and cfg.selective_checkpointing != "op":
        out.warn("Automodel's selective checkpointing is op-level (PyTorch SAC), not "
                 "Megatron's: less activation memory saved than planned")
    if cfg.offload != "none":
        dist["offload_policy"] = {"_target_": "torch.distributed.fsdp.CPUOffloadPolicy"}
        if cfg.offload == "optimizer":
            out.warn("FSDP2 CPU offload also moves the parameters and gradients (no "
                     "optimizer-only offload): less GPU memory, slower than planned")
    if cfg.pp > 1:
        dist["pipeline"] = {"pp_schedule": "1f1b", "pp_microbatch_size": cfg.micro_batch_size,
                            "pp_batch_size": cfg.micro_batch_size * cfg.grad_accum}
    return dist


def _peft(job: Job) -> dict[str, Any] | None:
    cfg = job.cfg
    if not cfg.is_peft:
        return None
    peft: dict[str, Any] = {"_target_": "nemo_automodel.components._peft.lora.PeftConfig"}
    if "all-linear" in cfg.lora_targets:
        peft["match_all_linear"] = True
    else:
        peft["target_modules"] = [AUTOMODEL_MODULES[t] for t in cfg.lora_targets]
    peft.update({"dim": cfg.rank, "alpha": cfg.lora_alpha, "dropout": 0.0})
    if cfg.method == "dora":
        peft["use_dora"] = True
    return peft


def _quantization(job: Job) -> dict[str, Any] | None:
    if job.cfg.method != "qlora":
        return None
    return {"load_in_4bit": True, "load_in_8bit": False, "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_use_double_quant": True,
            "bnb_4bit_compute_dtype": TORCH_DTYPES[job.precision],
            "bnb_4bit_quant_storage": TORCH_DTYPES[job.precision]}


def _batch(job: Job) -> dict[str, Any]:
    """step_scheduler: with a pipeline one step's local batch is the whole schedule."""
    cfg = job.cfg
    local = cfg.micro_batch_size * (cfg.grad_accum if cfg.pp > 1 else 1)
    return {"global_batch_size": cfg.global_batch_size, "local_batch_size": local,
            "ckpt_every_steps": 1000, "max_steps": 1000}


def _automodel_kernels(job: Job, out: _Out) -> dict[str, Any]:
    """The loss function, and what the framework semantics set that has no key here."""
    cfg = job.cfg
    _precision_note(job, out)
    if job.precision == "fp8":
        out.warn("fp8 has no switch in this config: bf16 set; slower than planned")
    if cfg.pure_16bit:
        out.note("pure bf16: Automodel 0.5.0 keeps bf16 parameters and optimizer states "
                 "(its default, no fp32 master weights)")
    else:
        out.warn("fp32 master weights have no Automodel 0.5.0 switch: parameters and "
                 "optimizer states stay in the model's dtype (less memory than planned)")
    if cfg.compiled:
        out.note("torch.compile is not set here (its compile section is optional): no effect")
    if cfg.chunked_loss:
        return {"_target_": "nemo_automodel.components.loss.linear_ce.FusedLinearCrossEntropy"}
    return {"_target_": "nemo_automodel.components.loss.masked_ce.MaskedCrossEntropy"}


def automodel_config(job: Job, out: _Out) -> dict[str, Any]:
    """The recipe config as a dict, section by section."""
    cfg = job.cfg
    _automodel_checks(job, out)
    doc: dict[str, Any] = {
        "recipe": "TrainFinetuneRecipeForNextTokenPrediction",
        "step_scheduler": _batch(job),
        "dist_env": {"backend": "nccl", "timeout_minutes": 10},
        "model": {"_target_": "nemo_automodel.NeMoAutoModelForCausalLM.from_pretrained",
                  "pretrained_model_name_or_path": job.model_path,
                  "torch_dtype": TORCH_DTYPES[job.precision]},
    }
    peft, quant = _peft(job), _quantization(job)
    if peft:
        doc["peft"] = peft
    doc["distributed"] = _distributed(job, out)
    if quant:
        doc["quantization"] = quant
    doc["loss_fn"] = _automodel_kernels(job, out)
    doc["dataset"] = {"_target_": "nemo_automodel.components.datasets.llm.squad."
                                  "make_squad_dataset",
                      "dataset_name": "rajpurkar/squad", "split": "train",
                      "seq_length": cfg.seq_len}
    doc["dataloader"] = {"_target_": "torchdata.stateful_dataloader.StatefulDataLoader",
                         "collate_fn": "nemo_automodel.components.datasets.utils."
                                       "default_collater", "shuffle": True}
    doc["optimizer"] = {**AUTOMODEL_OPTIMIZERS[cfg.optimizer],
                        "lr": 1e-4 if cfg.is_peft else 1e-5}
    return doc


def export_automodel(job: Job, out: _Out) -> ExportResult:
    """A NeMo AutoModel recipe config (YAML) with its launch line for the job."""
    cfg = job.cfg
    doc = automodel_config(job, out)
    out.note("the dataset is a placeholder (SQuAD): set the dataset section to your data; the "
             "optimizer's learning rate is a placeholder too")
    if cfg.workload == "pretrain":
        out.warn("pretrain: Automodel's fine-tuning recipe trains from the pretrained weights "
                 "(use its pretraining examples for a from-scratch run)")
    if job.num_hosts == 1:
        launch = f"automodel automodel.yaml --nproc-per-node {job.per_node}"
    else:
        launch = (f"torchrun --nnodes {job.num_hosts} --nproc-per-node {job.per_node} "
                  "--rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 "
                  "-m nemo_automodel.cli.app automodel.yaml  (on every node)")
    lines = [*out.title(job), f"# micro-batch {cfg.micro_batch_size} x accumulation "
             f"{cfg.grad_accum} x dp {cfg.dp} = {cfg.global_batch_size}, seq_len "
             f"{cfg.seq_len}", f"# launch: {launch}",
             yaml.safe_dump(doc, sort_keys=False).rstrip()]
    return out.result("\n".join(lines) + "\n", "automodel.yaml")
