"""NeMo 2 recipe scripts, Megatron-Bridge launches and NeMo AutoModel YAML: each writer's fields
parsed back and checked against the plan, its refusals, and `planner export PLAN.json` without
--format on plans made with --framework nemo / megatron-bridge / nemo-automodel.

None of the three frameworks installs CPU-only (NeMo 2 and Megatron-Bridge need megatron-core
with Transformer Engine and, for NeMo, NeMo-Run and Lightning; NeMo AutoModel pulls torch,
transformers, torchdata and its CUDA kernels), so the written names are checked against their
config schemas as read from the source at the targeted commits (SCHEMA_* below, marked with the
file each set was read from): a field a writer sets that is not in the schema fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import shlex

import pytest
import yaml

from planner import PlanRequest, plan
from planner.cli import main
from planner.errors import PlannerError
from planner.outputs.export import FORMATS, TARGETS, WRITES_FOR, export_plan
from planner.outputs.render import plan_doc, to_json

# --- Config schemas as read from the source (not the frameworks' parsers) ---------------------
# NVIDIA/NeMo@v2.4.0 nemo/lightning/pytorch/strategies/megatron_strategy.py MegatronStrategy
SCHEMA_NEMO_STRATEGY = {"tensor_model_parallel_size", "pipeline_model_parallel_size",
                        "context_parallel_size", "sequence_parallel"}
# NVIDIA/NeMo@v2.4.0 nemo/collections/llm/gpt/data/fine_tuning.py FineTuningDataModule and
# recipes/finetune_default.py SquadDataModule(seq_length, micro_batch_size, global_batch_size)
SCHEMA_NEMO_DATA = {"seq_length", "micro_batch_size", "global_batch_size"}
# megatron-core 0.17.1 megatron/core/transformer/transformer_config.py TransformerConfig
# (recompute_*) and ModelParallelConfig / GPTConfig seq_length
SCHEMA_MCORE_MODEL = {"seq_length", "recompute_granularity", "recompute_method",
                      "recompute_num_layers", "tensor_model_parallel_size",
                      "pipeline_model_parallel_size", "context_parallel_size",
                      "sequence_parallel"}
# megatron-core 0.17.1 megatron/core/optimizer/optimizer_config.py OptimizerConfig
SCHEMA_MCORE_OPTIMIZER = {"optimizer", "lr", "use_distributed_optimizer", "clip_grad", "bf16",
                          "fp16", "sgd_momentum", "optimizer_cpu_offload",
                          "optimizer_offload_fraction", "use_precision_aware_optimizer"}
# NVIDIA/NeMo@v2.4.0 nemo/collections/llm/peft/lora.py LoRA and Megatron-Bridge@v0.6.0
# src/megatron/bridge/peft/lora.py LoRA
SCHEMA_LORA = {"dim", "alpha", "target_modules"}
# NVIDIA/NeMo@v2.4.0 nemo/collections/llm/recipes/precision/mixed_precision.py
SCHEMA_NEMO_PRECISION = {"bf16_mixed", "fp16_mixed", "bf16_with_fp8_mixed"}
# Megatron-Bridge@v0.6.0 src/megatron/bridge/training/mixed_precision.py MIXED_PRECISION_RECIPES
SCHEMA_BRIDGE_PRECISION = {"bf16_mixed", "fp16_mixed", "bf16_with_fp8_current_scaling_mixed"}
# Megatron-Bridge@v0.6.0 src/megatron/bridge/training/config.py ConfigContainer sections and
# TrainingConfig / GPTDatasetConfig / CheckpointConfig fields used here
SCHEMA_BRIDGE = {"model": SCHEMA_MCORE_MODEL, "optimizer": SCHEMA_MCORE_OPTIMIZER,
                 "peft": SCHEMA_LORA, "train": {"micro_batch_size", "global_batch_size"},
                 "dataset": {"seq_length"}, "checkpoint": {"pretrained_checkpoint"}}
# Megatron-Bridge@v0.6.0 scripts/training/run_recipe.py --mode choices and the --dataset presets
# of src/megatron/bridge/recipes/utils/dataset_utils.py
SCHEMA_BRIDGE_MODES = {"pretrain", "sft", "lora", "dora"}
SCHEMA_BRIDGE_DATASETS = {"mock", "megatron-indexed", "local-jsonl", "squad"}
# NVIDIA-NeMo/Automodel@v0.5.0 nemo_automodel/recipes/_dist_utils.py _PARALLELISM_DEFAULTS and
# parse_distributed_section's own keys, components/distributed/config.py FSDP2Config (the
# fields forwarded to it here) and DDPConfig
SCHEMA_AUTOMODEL_DIST = {"strategy", "tp_size", "pp_size", "cp_size", "ep_size", "dp_size",
                         "dp_replicate_size", "pipeline", "moe", "activation_checkpointing"}
SCHEMA_FSDP2 = {"sequence_parallel", "offload_policy", "mp_policy", "tp_plan",
                "defer_fsdp_grad_sync", "reshard_after_forward", "autocast_dtype"}
SCHEMA_DDP = {"broadcast_buffers", "find_unused_parameters", "static_graph", "bucket_cap_mb",
              "gradient_as_bucket_view", "autocast_dtype"}
# Automodel@v0.5.0 components/_peft/lora.py PeftConfig; pipelining/config.py PipelineConfig
SCHEMA_AUTOMODEL_PEFT = {"_target_", "target_modules", "exclude_modules", "match_all_linear",
                         "dim", "alpha", "use_dora", "dropout", "dropout_position"}
SCHEMA_PIPELINE = {"pp_schedule", "pp_microbatch_size", "pp_batch_size", "layers_per_stage"}
# Automodel@v0.5.0 examples/llm_finetune/llama3_1/llama3_1_8b_squad_qlora.yaml sections
SCHEMA_AUTOMODEL_SECTIONS = {"recipe", "step_scheduler", "dist_env", "rng", "model", "peft",
                             "distributed", "quantization", "loss_fn", "dataset",
                             "packed_sequence", "dataloader", "validation_dataset",
                             "validation_dataloader", "optimizer"}

LORA_1GPU = PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-4090",), num_gpus=1, method="lora",
                        framework="nemo", confidence=0)
FULL_8GPU = PlanRequest(model="8b", gpus=("h100-sxm",), num_gpus=8, method="full",
                        sharding="zero1", framework="nemo", confidence=0)


@pytest.fixture(scope="module")
def lora():
    result = plan(LORA_1GPU)
    assert result.plan is not None
    return result.plan


@pytest.fixture(scope="module")
def full():
    result = plan(FULL_8GPU)
    assert result.plan is not None
    return result.plan


def at_precision(p, precision: str):
    """The plan's Job with its effective precision (the plan's memory precision) changed."""
    from planner.outputs.export import job_of

    job = job_of(p)
    return dataclasses.replace(job, precision=precision,
                               cfg=job.cfg.model_copy(update={"precision": precision}))


def variant(p, *, num_hosts=None, **update):
    """The plan with config fields changed (num_gpus kept consistent)."""
    cfg = p.config.model_copy(update=update)
    return dataclasses.replace(p, config=cfg, num_gpus=cfg.num_gpus,
                               num_hosts=num_hosts or p.num_hosts)


# ---------------------------------------------------------------------------------------------
# Parsers of the three outputs
# ---------------------------------------------------------------------------------------------
def nemo_script(text: str) -> tuple[ast.Call, dict[str, object], set[str]]:
    """(the recipe factory call, {recipe attribute: value}, imported names) of a NeMo script."""
    tree = ast.parse(text)
    call, sets, imports = None, {}, set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            imports |= {a.name for a in node.names}
        if not isinstance(node, ast.Assign):
            continue
        target = ast.unparse(node.targets[0])
        if target == "recipe":
            call = node.value
        elif target.startswith("recipe."):
            value = node.value
            sets[target.removeprefix("recipe.")] = (
                ast.unparse(value) if isinstance(value, ast.Call) else ast.literal_eval(value))
    assert isinstance(call, ast.Call)
    return call, sets, imports


def call_kwargs(call: ast.Call) -> dict[str, object]:
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def bridge_launch(text: str) -> tuple[list[str], dict[str, str]]:
    """(the launch's tokens, its KEY=VALUE overrides) of a Megatron-Bridge script."""
    tokens = shlex.split(text.replace("\\\n", " "), comments=True)
    overrides = dict(t.split("=", 1) for t in tokens[tokens.index("scripts/training/"
                                                                  "run_recipe.py"):]
                     if "=" in t and not t.startswith("-"))
    return tokens, overrides


def flag(tokens: list[str], name: str) -> str:
    return tokens[tokens.index(name) + 1]


# ---------------------------------------------------------------------------------------------
# NeMo 2
# ---------------------------------------------------------------------------------------------
def test_nemo_lora_one_gpu(lora):
    call, sets, imports = nemo_script(export_plan(lora, "nemo").text)
    c = lora.config
    assert ast.unparse(call.func) == "llm.qwen25_500m.finetune_recipe"
    assert call_kwargs(call) == {"name": "planner", "num_nodes": 1, "num_gpus_per_node": 1,
                                 "peft_scheme": "lora"}
    assert sets["peft.dim"] == c.rank and sets["peft.alpha"] == c.lora_alpha
    assert sets["data.micro_batch_size"] == c.micro_batch_size
    assert sets["data.global_batch_size"] == c.micro_batch_size * c.grad_accum  # dp 1
    assert sets["data.seq_length"] == sets["model.config.seq_length"] == c.seq_len
    assert sets["trainer.strategy.tensor_model_parallel_size"] == 1
    assert sets["resume.restore_config.path"] == "nemo://Qwen/Qwen2.5-0.5B"
    assert sets["trainer.plugins"] == "bf16_mixed()" and "bf16_mixed" in imports
    for attr in sets:  # every attribute the script sets is in the schema read from source
        section, _, name = attr.rpartition(".")
        schema = {"trainer.strategy": SCHEMA_NEMO_STRATEGY, "data": SCHEMA_NEMO_DATA,
                  "model.config": SCHEMA_MCORE_MODEL, "optim.config": SCHEMA_MCORE_OPTIMIZER,
                  "peft": SCHEMA_LORA, "trainer": {"plugins"},
                  "resume.restore_config": {"path"}}[section]
        assert name in schema, attr
    assert sets["trainer.plugins"].removesuffix("()") in SCHEMA_NEMO_PRECISION


def test_nemo_full_with_distributed_optimizer_and_recompute(full):
    p = variant(full, checkpointing="full", tp=2, num_gpus=16, num_hosts=2)
    text = export_plan(p, "nemo").text
    call, sets, _ = nemo_script(text)
    assert call_kwargs(call)["peft_scheme"] == "none"
    assert call_kwargs(call)["num_nodes"] * call_kwargs(call)["num_gpus_per_node"] == 16
    assert sets["optim.config.use_distributed_optimizer"] is True
    assert sets["optim.config.optimizer"] == "adam"
    assert sets["trainer.strategy.tensor_model_parallel_size"] == 2
    assert sets["trainer.strategy.sequence_parallel"] is True
    assert sets["model.config.recompute_granularity"] == "full"
    assert sets["model.config.recompute_num_layers"] == 1
    # micro-batch x accumulation x dp (16 / tp 2 = 8): Megatron derives the accumulation
    c = p.config
    assert sets["data.global_batch_size"] == c.micro_batch_size * c.grad_accum * 8
    assert "run.SlurmExecutor(" in text and "nodes=2" in text
    assert not any(k.startswith("peft.") for k in sets)


def test_nemo_precision_and_offload(full):
    _, sets, imports = nemo_script(export_plan(at_precision(full, "fp16"), "nemo").text)
    assert sets["trainer.plugins"] == "fp16_mixed()" and "fp16_mixed" in imports
    assert sets["optim.config.fp16"] is True and sets["optim.config.bf16"] is False
    _, sets, _ = nemo_script(export_plan(variant(full, offload="optimizer"), "nemo").text)
    assert sets["optim.config.optimizer_cpu_offload"] is True
    assert sets["optim.config.use_precision_aware_optimizer"] is True
    assert sets["optim.config.optimizer_offload_fraction"] == 1.0


def test_nemo_partial_fused_targets_warn(lora):
    res = export_plan(variant(lora, lora_targets=("q", "v")), "nemo")
    _, sets, _ = nemo_script(res.text)
    assert sets["peft.target_modules"] == ["linear_qkv"]
    assert any("fused linear_qkv" in w for w in res.warnings)
    _, sets, _ = nemo_script(export_plan(variant(lora, lora_targets=("o", "down")),
                                         "nemo").text)
    assert sets["peft.target_modules"] == ["linear_proj", "linear_fc2"]


@pytest.mark.parametrize(("update", "match"), [
    ({"method": "qlora"}, "method qlora"),
    ({"workload": "dpo"}, "workload dpo"),
    ({"zero_stage": 3}, "ZeRO-3"),
    ({"offload": "optimizer", "zero_stage": 1, "optimizer": "sgd"}, "offload with sgd"),
    ({"fsdp": True, "num_gpus": 2}, "FSDP"),
    ({"optimizer": "adamw-8bit"}, "optimizer adamw-8bit"),
    ({"precision": "fp32"}, "fp32 training"),
])
def test_nemo_and_bridge_refusals(lora, update, match):
    p = at_precision(lora, "fp32") if "precision" in update else variant(lora, **update)
    for fmt in ("nemo", "megatron-bridge"):
        with pytest.raises(PlannerError, match=match) as exc:
            export_plan(p, fmt)
        assert "\n" not in str(exc.value) and "cannot express" in str(exc.value)


def test_model_without_a_recipe_is_refused():
    p = plan(PlanRequest(model="mistral-7b", gpus=("h100-sxm",), num_gpus=1, method="lora",
                         framework="megatron-bridge", confidence=0)).plan
    assert p is not None
    with pytest.raises(PlannerError, match="model mistral-7b .Megatron-Bridge 0.6.0 ships no"):
        export_plan(p, "megatron-bridge")
    assert "llm.mistral_7b.finetune_recipe" in export_plan(p, "nemo").text  # NeMo has one


# ---------------------------------------------------------------------------------------------
# Megatron-Bridge
# ---------------------------------------------------------------------------------------------
def test_bridge_lora_overrides(lora):
    tokens, ov = bridge_launch(export_plan(lora, "megatron-bridge").text)
    c = lora.config
    assert "torchrun" in tokens and flag(tokens, "--nproc_per_node") == "1"
    assert flag(tokens, "--model") == "qwen25_500m" and flag(tokens, "--mode") == "lora"
    assert flag(tokens, "--mode") in SCHEMA_BRIDGE_MODES
    assert flag(tokens, "--dataset") in SCHEMA_BRIDGE_DATASETS
    assert ov["peft.dim"] == str(c.rank) and ov["peft.alpha"] == str(c.lora_alpha)
    # NeMo's default LoRA targets: the attention's fused qkv and output projections
    assert c.lora_targets == ("q", "k", "v", "o")
    assert ov["peft.target_modules"] == "[linear_qkv,linear_proj]"
    assert ov["train.micro_batch_size"] == str(c.micro_batch_size)
    assert ov["train.global_batch_size"] == str(c.global_batch_size)
    assert ov["dataset.seq_length"] == str(c.seq_len)
    assert ov["model.recompute_granularity"] == ("null" if c.checkpointing == "none" else
                                                 c.checkpointing)
    assert ov["mixed_precision"] in SCHEMA_BRIDGE_PRECISION
    assert ov["checkpoint.pretrained_checkpoint"] == "$MEGATRON_CKPT"
    for key in ov:
        section, _, name = key.partition(".")
        assert key == "mixed_precision" or name in SCHEMA_BRIDGE[section], key


def test_bridge_full_tensor_parallel_and_pretrain(full):
    p = variant(full, tp=4, checkpointing="selective")
    tokens, ov = bridge_launch(export_plan(p, "megatron-bridge").text)
    assert flag(tokens, "--mode") == "sft"
    assert ov["model.tensor_model_parallel_size"] == "4"
    assert ov["model.sequence_parallel"] == "true"
    assert ov["model.recompute_granularity"] == "selective"
    assert ov["optimizer.use_distributed_optimizer"] == "true"
    assert ov["train.global_batch_size"] == str(p.config.micro_batch_size
                                                * p.config.grad_accum * 2)
    assert not any(k.startswith("peft.") for k in ov)
    tokens, ov = bridge_launch(export_plan(variant(full, workload="pretrain"),
                                           "megatron-bridge").text)
    assert flag(tokens, "--mode") == "pretrain" and flag(tokens, "--dataset") == "mock"
    assert "checkpoint.pretrained_checkpoint" not in ov


def test_bridge_pretrain_only_recipes_refuse_finetuning():
    p = plan(PlanRequest(model="llama-2-7b", gpus=("h100-sxm",), num_gpus=1, method="lora",
                         framework="megatron-bridge", confidence=0)).plan
    assert p is not None
    with pytest.raises(PlannerError, match="pretraining recipe only for llama2_7b"):
        export_plan(p, "megatron-bridge")


# ---------------------------------------------------------------------------------------------
# NeMo AutoModel
# ---------------------------------------------------------------------------------------------
def automodel(p) -> dict:
    return yaml.safe_load(export_plan(p, "nemo-automodel").text)


def check_automodel_schema(doc: dict) -> None:
    assert set(doc) <= SCHEMA_AUTOMODEL_SECTIONS
    dist = doc["distributed"]
    strategy = SCHEMA_FSDP2 if dist["strategy"] == "fsdp2" else SCHEMA_DDP
    assert set(dist) <= SCHEMA_AUTOMODEL_DIST | strategy
    assert set(doc.get("peft", {})) <= SCHEMA_AUTOMODEL_PEFT
    assert set(dist.get("pipeline", {})) <= SCHEMA_PIPELINE


def test_automodel_lora_one_gpu(lora):
    doc = automodel(lora)
    c = lora.config
    check_automodel_schema(doc)
    assert doc["model"]["pretrained_model_name_or_path"] == "Qwen/Qwen2.5-0.5B"
    assert doc["peft"]["dim"] == c.rank and doc["peft"]["alpha"] == c.lora_alpha
    assert doc["step_scheduler"]["local_batch_size"] == c.micro_batch_size
    # Automodel's accumulation = global / (local x dp): the plan's
    sched = doc["step_scheduler"]
    assert sched["global_batch_size"] // (sched["local_batch_size"] * c.dp) == c.grad_accum
    assert doc["dataset"]["seq_length"] == c.seq_len
    assert doc["distributed"]["activation_checkpointing"] == (c.checkpointing != "none")
    assert "quantization" not in doc


def test_automodel_qlora_fsdp_offload_and_pipeline(lora, full):
    doc = automodel(variant(lora, method="qlora"))
    assert doc["quantization"]["load_in_4bit"] is True
    assert doc["quantization"]["bnb_4bit_quant_type"] == "nf4"
    with pytest.raises(PlannerError, match="QLoRA on gptq"):
        automodel(variant(lora, method="qlora", quant_format="gptq"))
    fsdp = variant(full, zero_stage=0, fsdp=True, offload="optimizer+params")
    doc = automodel(fsdp)
    check_automodel_schema(doc)
    assert doc["distributed"]["strategy"] == "fsdp2"
    assert doc["distributed"]["offload_policy"]["_target_"].endswith("CPUOffloadPolicy")
    pp = variant(full, zero_stage=0, fsdp=True, pp=2, grad_accum=8)
    doc = automodel(pp)
    check_automodel_schema(doc)
    assert doc["distributed"]["pp_size"] == 2
    pipe = doc["distributed"]["pipeline"]
    assert pipe["pp_microbatch_size"] == pp.config.micro_batch_size
    assert pipe["pp_batch_size"] == doc["step_scheduler"]["local_batch_size"] \
        == pp.config.micro_batch_size * 8
    # one model-parallel rank (tp x cp x pp = 1): plain data parallelism, DDP
    ddp = automodel(variant(full, zero_stage=0, checkpointing="selective", tp=1, cp=1, pp=1))
    check_automodel_schema(ddp)  # DDP has no selective checkpointing: full is written
    assert ddp["distributed"]["strategy"] == "ddp"
    assert ddp["distributed"]["activation_checkpointing"] is True
    with pytest.raises(PlannerError, match="ZeRO-1"):
        automodel(full)


# ---------------------------------------------------------------------------------------------
# Registry and the command line
# ---------------------------------------------------------------------------------------------
def test_registered_with_versions():
    for fmt, fid in (("nemo", "nemo"), ("megatron-bridge", "megatron-bridge"),
                     ("nemo-automodel", "nemo-automodel")):
        assert fmt in FORMATS and WRITES_FOR[fmt][0] == (fid,)
        assert TARGETS[fmt]


CLI_CASES = [
    ("nemo", ["--model", "qwen2.5-0.5b", "--gpus", "rtx-4090", "--num-gpus", "1",
              "--method", "lora"]),
    ("nemo", ["--model", "8b", "--gpus", "h100-sxm", "--num-gpus", "8", "--method", "full",
              "--sharding", "zero1"]),
    ("nemo", ["--model", "7b", "--budget", "30000", "--workload", "pretrain"]),
    ("megatron-bridge", ["--model", "qwen2.5-0.5b", "--gpus", "rtx-4090", "--num-gpus", "1",
                         "--method", "lora"]),
    ("megatron-bridge", ["--model", "8b", "--gpus", "h100-sxm", "--num-gpus", "8",
                         "--method", "full", "--sharding", "zero1"]),
    ("megatron-bridge", ["--model", "8b", "--budget", "30000"]),
    ("nemo-automodel", ["--model", "qwen2.5-0.5b", "--gpus", "rtx-4090", "--num-gpus", "1",
                        "--method", "lora"]),
    ("nemo-automodel", ["--model", "8b", "--gpus", "h100-sxm", "--num-gpus", "8",
                        "--method", "full", "--sharding", "fsdp"]),
    ("nemo-automodel", ["--model", "8b", "--gpus", "rtx-4090", "--num-gpus", "1",
                        "--method", "qlora"]),
]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def check_against_plan(fmt: str, text: str, p: dict) -> None:
    """The exported config parsed back: its parallel sizes and batch are the plan's."""
    c = p["config"]
    dp = p["num_gpus"] // (c["tp"] * c["pp"] * c["cp"])
    gbs = c["micro_batch_size"] * c["grad_accum"] * dp
    if fmt == "nemo":
        call, sets, _ = nemo_script(text)
        kw = call_kwargs(call)
        assert kw["num_nodes"] * kw["num_gpus_per_node"] == p["num_gpus"]
        assert sets["trainer.strategy.tensor_model_parallel_size"] == c["tp"]
        assert sets["trainer.strategy.pipeline_model_parallel_size"] == c["pp"]
        assert sets["data.micro_batch_size"] == c["micro_batch_size"]
        assert sets["data.global_batch_size"] == gbs
        assert sets["optim.config.use_distributed_optimizer"] == (c["zero_stage"] == 1)
        assert sets.get("peft.dim") == (c["lora_rank"] if c["method"] != "full" else None)
    elif fmt == "megatron-bridge":
        tokens, ov = bridge_launch(text)
        assert int(flag(tokens, "--nnodes")) * int(flag(tokens, "--nproc_per_node")) \
            == p["num_gpus"]
        assert ov["model.tensor_model_parallel_size"] == str(c["tp"])
        assert ov["model.pipeline_model_parallel_size"] == str(c["pp"])
        assert ov["train.global_batch_size"] == str(gbs)
        assert ov["dataset.seq_length"] == str(c["seq_len"])
    else:
        doc = yaml.safe_load(text)
        check_automodel_schema(doc)
        assert doc["distributed"]["tp_size"] == c["tp"]
        assert doc["distributed"]["strategy"] == ("fsdp2" if c["fsdp"] or p["num_gpus"] == 1
                                                  else "ddp")
        assert doc["step_scheduler"]["global_batch_size"] == gbs
        assert ("quantization" in doc) == (c["method"] == "qlora")


@pytest.mark.parametrize(("framework", "request_args"), CLI_CASES)
def test_cli_export_without_format(capsys, tmp_path, framework, request_args):
    code, out, _ = cli(capsys, "plan", *request_args, "--framework", framework,
                       "--confidence", "0", "--json")
    assert code == 0
    saved = tmp_path / "plan.json"
    saved.write_text(out)
    p = json.loads(out)["plan"]
    assert p["config"]["framework"] == framework
    written = tmp_path / "launch.out"
    code, _, err = cli(capsys, "export", "--out", str(written), str(saved))
    assert code == 0, err
    check_against_plan(framework, written.read_text(), p)


def test_typed_plan_and_saved_document_export_alike(lora):
    doc = json.loads(to_json(plan_doc(plan(LORA_1GPU))))
    for fmt in ("nemo", "megatron-bridge", "nemo-automodel"):
        assert export_plan(doc, fmt).text == export_plan(lora, fmt).text
