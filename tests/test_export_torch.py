"""torchtune recipe YAML and torchtitan TOML exports: each writer's fields against the plan, its
refusals, and `planner export PLAN.json` with no --format on plans made with --framework."""

from __future__ import annotations

import dataclasses
import json
import shlex
import tomllib

import pytest
import yaml

from planner import PlanRequest, plan
from planner.cli import main
from planner.errors import PlannerError
from planner.outputs.export import TARGETS, export_plan

TUNE = PlanRequest(model="llama-3.1-8b", gpus=("rtx-4090",), num_gpus=1, method="lora",
                   framework="torchtune")
TITAN = PlanRequest(model="llama-3.1-8b", gpus=("h100-sxm",), num_gpus=8, method="full",
                    framework="torchtitan")


@pytest.fixture(scope="module")
def tune():
    result = plan(TUNE)
    assert result.plan is not None
    return result.plan


@pytest.fixture(scope="module")
def titan():
    result = plan(TITAN)
    assert result.plan is not None
    return result.plan


def variant(p, *, num_hosts=None, **update):
    """The plan with config fields changed (num_gpus kept consistent; a precision is also the
    effective one the exporters read from the plan's memory)."""
    cfg = p.config.model_copy(update=update)
    memory = dataclasses.replace(p.memory, precision=cfg.precision)
    return dataclasses.replace(p, config=cfg, num_gpus=cfg.num_gpus, memory=memory,
                               num_hosts=num_hosts or p.num_hosts)


def launch(text: str) -> list[str]:
    """The launch line in the file's header comment, as tokens."""
    lines = text.split("# launch:\n", 1)[1].split("\n")
    cmd = [line.removeprefix("#   ").removesuffix("\\") for line in lines
           if line.startswith("#   ")]
    return shlex.split(" ".join(cmd))


# ---------------------------------------------------------------------------------------------
# torchtune
# ---------------------------------------------------------------------------------------------
def test_torchtune_lora_fields(tune):
    c = tune.config
    res = export_plan(variant(tune, fsdp=False, offload="none", lora_targets=("q", "v")),
                      "torchtune")
    doc = yaml.safe_load(res.text)
    m = doc["model"]
    assert m["_component_"] == "torchtune.models.llama3_1.lora_llama3_1_8b"
    assert m["lora_attn_modules"] == ["q_proj", "v_proj"] and m["apply_lora_to_mlp"] is False
    assert m["lora_rank"] == c.rank and m["lora_alpha"] == c.lora_alpha
    assert "quantize_base" not in m and "use_dora" not in m
    assert doc["batch_size"] == c.micro_batch_size
    assert doc["gradient_accumulation_steps"] == c.grad_accum
    assert doc["tokenizer"]["max_seq_len"] == c.seq_len
    assert doc["tokenizer"]["_component_"] == "torchtune.models.llama3.llama3_tokenizer"
    assert doc["checkpointer"]["model_type"] == "LLAMA3"
    assert doc["dtype"] == "bf16" and "fsdp_cpu_offload" not in doc
    assert doc["enable_activation_checkpointing"] is (c.checkpointing != "none")
    assert launch(res.text) == ["tune", "run", "lora_finetune_single_device", "--config",
                                "torchtune.yaml"]
    assert f"# Targets {TARGETS['torchtune']}." in res.text


def test_torchtune_distributed_full_with_offload_and_tp(tune):
    p = variant(tune, method="full", lora_rank=None, num_gpus=16, fsdp=True,
                offload="optimizer+params", shard_embeddings=True, optimizer="adamw",
                fused_optimizer=False, num_hosts=2)
    res = export_plan(p, "torchtune")
    doc = yaml.safe_load(res.text)
    assert doc["model"] == {"_component_": "torchtune.models.llama3_1.llama3_1_8b"}
    assert doc["fsdp_cpu_offload"] is True
    assert doc["custom_sharded_layers"] == ["tok_embeddings", "output"]
    assert doc["optimizer"]["_component_"] == "torch.optim.AdamW"
    assert doc["optimizer"]["fused"] is False
    tokens = launch(res.text)
    assert tokens[:6] == ["tune", "run", "--nnodes", "2", "--nproc_per_node", "8"]
    assert "full_finetune_distributed" in tokens
    tp = yaml.safe_load(export_plan(variant(p, tp=2, offload="none"), "torchtune").text)
    assert tp["tensor_parallel_dim"] == 2
    ddp = export_plan(variant(p, fsdp=False, offload="none"), "torchtune")
    assert any("no DDP" in w for w in ddp.warnings)
    assert not any("no DDP" in w for w in res.warnings)


def test_torchtune_methods_and_dpo(tune):
    q = yaml.safe_load(export_plan(variant(tune, method="qlora"), "torchtune").text)
    assert q["model"]["quantize_base"] is True
    d = yaml.safe_load(export_plan(variant(tune, method="dora"), "torchtune").text)
    assert d["model"]["use_dora"] is True
    res = export_plan(variant(tune, workload="dpo"), "torchtune")
    dpo = yaml.safe_load(res.text)
    assert dpo["loss"]["_component_"] == "torchtune.rlhf.loss.DPOLoss"
    assert "lora_dpo_distributed" in launch(res.text)
    full = yaml.safe_load(export_plan(variant(tune, workload="dpo", method="full",
                                              lora_rank=None), "torchtune").text)
    assert full["ref_checkpointer"]["checkpoint_dir"] == full["checkpointer"]["checkpoint_dir"]
    part = export_plan(variant(tune, lora_targets=("q", "v", "gate")), "torchtune")
    assert yaml.safe_load(part.text)["model"]["apply_lora_to_mlp"] is True
    assert any("apply_lora_to_mlp adapts all three" in w for w in part.warnings)


def test_torchtune_activation_offloading_follows_offloaded_checkpoints(tune):
    on = yaml.safe_load(export_plan(variant(tune, offload_checkpoints=True,
                                            checkpointing="full"), "torchtune").text)
    assert on["enable_activation_offloading"] is True
    assert on["enable_activation_checkpointing"] is True  # torchtune requires both
    off = yaml.safe_load(export_plan(variant(tune, checkpointing="full"), "torchtune").text)
    assert off["enable_activation_offloading"] is False


def test_torchtune_optimizers(tune):
    opt = yaml.safe_load(export_plan(variant(tune, optimizer="adamw-8bit", fsdp=False),
                                     "torchtune").text)["optimizer"]
    assert opt["_component_"] == "bitsandbytes.optim.AdamW8bit"
    sgd = yaml.safe_load(export_plan(variant(tune, optimizer="sgd-momentum"),
                                     "torchtune").text)["optimizer"]
    assert sgd == {"_component_": "torch.optim.SGD", "lr": 3e-4, "momentum": 0.9}


@pytest.mark.parametrize(("update", "match"), [
    ({"pp": 2, "num_gpus": 2}, "pipeline/context parallel"),
    ({"tp": 2, "num_gpus": 2}, "tp 2 in lora_finetune_distributed"),
    ({"workload": "pretrain"}, "pretrain in a torchtune recipe"),
    ({"method": "freeze", "lora_rank": None}, "method freeze"),
    ({"precision": "fp16"}, "fp16"),
    ({"workload": "dpo", "reference": False}, "live reference"),
    ({"zero_stage": 2, "fsdp": False}, "ZeRO-2"),
])
def test_torchtune_refusals(tune, update, match):
    with pytest.raises(PlannerError, match=match) as exc:
        export_plan(variant(tune, **update), "torchtune")
    assert "\n" not in str(exc.value) and "cannot express" in str(exc.value)


def test_torchtune_refuses_dora_where_the_builder_has_none(tune):
    with pytest.raises(PlannerError, match="DoRA on llama-3.1-405b"):
        export_plan(dataclasses.replace(variant(tune, method="dora"), model="llama-3.1-405b"),
                    "torchtune")


def test_torchtune_refuses_a_model_without_builder(tune):
    with pytest.raises(PlannerError, match="no builder"):
        export_plan(dataclasses.replace(tune, model="falcon-7b"), "torchtune")


# ---------------------------------------------------------------------------------------------
# torchtitan
# ---------------------------------------------------------------------------------------------
def test_torchtitan_fields(titan):
    c = titan.config
    res = export_plan(titan, "torchtitan")
    doc = tomllib.loads(res.text)
    assert doc["model"]["name"] == "llama3" and doc["model"]["flavor"] == "8B"
    assert doc["training"]["local_batch_size"] == c.micro_batch_size
    assert doc["training"]["global_batch_size"] == c.global_batch_size
    assert doc["training"]["seq_len"] == c.seq_len
    par = doc["parallelism"]
    assert par["data_parallel_shard_degree"] == (c.dp if c.fsdp else 1)
    assert par["data_parallel_replicate_degree"] == (1 if c.fsdp else c.dp)
    assert doc["activation_checkpoint"]["mode"] == c.checkpointing
    assert doc["optimizer"]["name"] == "AdamW"
    assert doc["checkpoint"]["initial_load_in_hf"] is True  # sft starts from the HF weights
    assert any("sft: torchtitan 0.2.2 trains on text" in w for w in res.warnings)
    tokens = launch(res.text)
    assert tokens[:5] == ["torchrun", "--nnodes", "1", "--nproc_per_node", "8"]
    assert tokens[-4:] == ["-m", "torchtitan.train", "--job.config_file", "torchtitan.toml"]


def test_torchtitan_pipeline_ddp_offload_fp8(titan):
    p = variant(titan, workload="pretrain", num_gpus=16, tp=2, pp=2, fsdp=True, grad_accum=8,
                micro_batch_size=2, checkpointing="selective", selective_checkpointing="op",
                offload="optimizer+params", precision="fp8", num_hosts=2)
    doc = tomllib.loads(export_plan(p, "torchtitan").text)
    assert doc["training"]["local_batch_size"] == 16  # 8 pipeline micro-batches of 2
    assert doc["training"]["global_batch_size"] == p.config.global_batch_size == 64
    assert doc["parallelism"]["pipeline_parallel_microbatch_size"] == 2
    assert doc["parallelism"]["tensor_parallel_degree"] == 2
    assert doc["parallelism"]["data_parallel_shard_degree"] == 4
    assert doc["training"]["enable_cpu_offload"] is True
    assert doc["model"]["converters"] == ["quantize.linear.float8"]
    assert doc["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    assert "initial_load_path" not in doc["checkpoint"]
    ddp = tomllib.loads(export_plan(variant(titan, fsdp=False, pure_bf16=True, tp=1),
                                    "torchtitan").text)
    assert ddp["parallelism"]["data_parallel_replicate_degree"] == 8
    assert ddp["parallelism"]["data_parallel_shard_degree"] == 1
    assert ddp["training"]["dtype"] == "bfloat16"


@pytest.mark.parametrize(("update", "match"), [
    ({"method": "lora", "lora_rank": 8}, "method lora"),
    ({"optimizer": "sgd"}, "optimizer sgd"),
    ({"precision": "fp16"}, "fp16"),
    ({"workload": "dpo"}, "dpo in torchtitan"),
    ({"zero_stage": 3, "fsdp": False}, "ZeRO-3"),
])
def test_torchtitan_refusals(titan, update, match):
    with pytest.raises(PlannerError, match=match) as exc:
        export_plan(variant(titan, **update), "torchtitan")
    assert "\n" not in str(exc.value) and "cannot express" in str(exc.value)


def test_torchtitan_refuses_a_model_it_does_not_define(titan):
    with pytest.raises(PlannerError, match="no model definition"):
        export_plan(dataclasses.replace(titan, model="mistral-7b"), "torchtitan")


# ---------------------------------------------------------------------------------------------
# planner export PLAN.json with no --format, on plans made with --framework
# ---------------------------------------------------------------------------------------------
CLI_PLANS = [
    ("torchtune", ["--model", "llama-3.1-8b", "--gpus", "rtx-4090", "--num-gpus", "1",
                   "--method", "lora"]),
    ("torchtune", ["--model", "llama-3.1-70b", "--gpus", "h100-sxm", "--num-gpus", "8",
                   "--method", "full"]),
    ("torchtune", ["--model", "qwen2.5-7b", "--gpus", "rtx-4090", "--num-gpus", "1",
                   "--method", "qlora"]),
    ("torchtitan", ["--model", "qwen3-0.6b", "--gpus", "rtx-4090", "--num-gpus", "1",
                    "--workload", "pretrain"]),
    ("torchtitan", ["--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--num-gpus", "8",
                    "--method", "full"]),
    ("torchtitan", ["--model", "llama-3.1-70b", "--gpus", "h100-sxm", "--num-gpus", "16",
                    "--tp", "4", "--workload", "pretrain"]),
]


def _run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr()


@pytest.mark.parametrize(("framework", "args"), CLI_PLANS)
def test_export_without_format_writes_the_frameworks_own(framework, args, tmp_path, capsys):
    code, out = _run(["plan", *args, "--framework", framework, "--json"], capsys)
    assert code == 0
    saved = tmp_path / "plan.json"
    saved.write_text(out.out)
    p = json.loads(out.out)["plan"]
    c = p["config"]
    written = tmp_path / "launch"
    code, _ = _run(["export", "--out", str(written), str(saved)], capsys)
    assert code == 0
    text = written.read_text()
    if framework == "torchtune":
        doc = yaml.safe_load(text)
        assert doc["batch_size"] == c["micro_batch_size"]
        assert doc["gradient_accumulation_steps"] == c["grad_accum"]
        assert doc["tokenizer"]["max_seq_len"] == c["seq_len"]
        assert ("lora_" in doc["model"]["_component_"]) is (c["method"] != "full")
        assert doc["model"].get("quantize_base", False) is (c["method"] == "qlora")
        assert doc.get("fsdp_cpu_offload", False) is (c["offload"] != "none")
        assert launch(text)[0:2] == ["tune", "run"]
    else:
        doc = tomllib.loads(text)
        par, train = doc["parallelism"], doc["training"]
        assert par["tensor_parallel_degree"] == c["tp"]
        assert par["pipeline_parallel_degree"] == c["pp"]
        dp = p["num_gpus"] // (c["tp"] * c["pp"] * c["cp"])
        assert par["data_parallel_shard_degree"] * par["data_parallel_replicate_degree"] == dp
        assert train["global_batch_size"] == c["micro_batch_size"] * c["grad_accum"] * dp
        assert train["seq_len"] == c["seq_len"]
        assert train["enable_cpu_offload"] is (c["offload"] != "none")
        assert doc["activation_checkpoint"]["mode"] == c["checkpointing"]
        tokens = launch(text)
        assert tokens[tokens.index("--nproc_per_node") + 1] == \
            str(p["num_gpus"] // p["num_hosts"])


def test_torchtune_writes_optimizer_in_backward_for_full_recipes(tune):
    full = variant(tune, method="full", lora_rank=None, fsdp=False, optimizer_in_backward=True,
                   grad_accum=1)
    doc = yaml.safe_load(export_plan(full, "torchtune").text)
    assert doc["optimizer_in_bwd"] is True and doc["resume_from_checkpoint"] is False
    assert yaml.safe_load(export_plan(variant(full, optimizer_in_backward=False),
                                      "torchtune").text)["optimizer_in_bwd"] is False
    with pytest.raises(PlannerError, match="optimizer-in-backward with LoRA"):
        export_plan(variant(tune, optimizer_in_backward=True, grad_accum=1), "torchtune")
    with pytest.raises(PlannerError, match="optimizer-in-backward"):  # the other formats
        export_plan(full, "torchtitan")
