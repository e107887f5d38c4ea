"""LitGPT and LLM Foundry YAML exports, and the Liger-kernel profile's torchrun launch: each
writer's fields checked against the plan it came from, its refusals, and `planner export` of a
plan made with ``--framework ID`` writing that framework's format without --format."""

from __future__ import annotations

import dataclasses
import json
import shlex

import pytest
import yaml

from planner import PlanRequest, plan
from planner.cli import main
from planner.errors import PlannerError
from planner.outputs.export import export_plan

# Pinned requests (a few hundredths of a second each); the CLI tests reuse them as flags.
LIT_LORA = dict(model="qwen2.5-0.5b", framework="litgpt", gpus=("rtx-4090",), num_gpus=1,
                method="lora", checkpointing="none", offload="none")
FOUNDRY_FULL = dict(model="qwen2.5-1.5b", framework="llm-foundry", gpus=("a100-80gb-sxm",),
                    num_gpus=8, method="full", sharding="fsdp", tp=1)


def solved(**kw):
    result = plan(PlanRequest(**kw))
    assert result.plan is not None, (result.status, [c.detail for c in result.conflicts])
    return result.plan


@pytest.fixture(scope="module")
def lit():
    return solved(**LIT_LORA)


@pytest.fixture(scope="module")
def foundry():
    return solved(**FOUNDRY_FULL)


def variant(p, *, num_hosts=None, **update):
    """The plan with config fields changed (num_gpus kept consistent)."""
    cfg = p.config.model_copy(update=update)
    return dataclasses.replace(p, config=cfg, num_gpus=cfg.num_gpus,
                               num_hosts=num_hosts or p.num_hosts)


def _doc(p):
    from planner.outputs.render import plan_doc
    from planner.solver.result import PlanResult

    return plan_doc(PlanResult(status="optimal", plan=p))


def launch_line(text: str) -> list[str]:
    """The tokens after '# launch:' in the file's header."""
    line = next(ln for ln in text.splitlines() if ln.startswith("# launch:"))
    return shlex.split(line.removeprefix("# launch:").replace("<", "").replace(">", ""))


# ---------------------------------------------------------------------------------------------
# LitGPT
# ---------------------------------------------------------------------------------------------
def test_litgpt_lora_fields(lit):
    c = lit.config
    res = export_plan(lit, "litgpt")
    doc = yaml.safe_load(res.text)
    assert launch_line(res.text) == ["litgpt", "finetune_lora", "--config", "litgpt.yaml"]
    assert doc["checkpoint_dir"] == "Qwen/Qwen2.5-0.5B"
    assert (doc["devices"], doc["num_nodes"]) == (1, 1)
    assert doc["lora_r"] == c.rank and doc["lora_alpha"] == c.lora_alpha
    assert c.lora_targets == ("q", "v")  # LitGPT's default: query and value only
    assert doc["lora_query"] and doc["lora_value"] and doc["lora_head"] is False
    assert not any(doc[k] for k in ("lora_key", "lora_projection", "lora_mlp"))
    assert doc["precision"] == "bf16-mixed" and "quantize" not in doc
    train = doc["train"]
    # LitGPT's accumulation = global / (devices x nodes) / micro: the plan's
    assert train["global_batch_size"] // (doc["devices"] * doc["num_nodes"]) \
        // train["micro_batch_size"] == c.grad_accum
    assert train["micro_batch_size"] == c.micro_batch_size
    assert train["max_seq_length"] == c.seq_len and "max_norm" not in train
    assert doc["optimizer"]["class_path"] == "torch.optim.AdamW"
    assert any("placeholder" in n for n in res.notes)


def test_litgpt_targets_and_optimizers(lit):
    qv = yaml.safe_load(export_plan(variant(lit, lora_targets=("q", "v")), "litgpt").text)
    assert [qv[k] for k in ("lora_query", "lora_key", "lora_value", "lora_projection",
                            "lora_mlp")] == [True, False, True, False, False]
    res = export_plan(variant(lit, lora_targets=("q", "up")), "litgpt")
    assert yaml.safe_load(res.text)["lora_mlp"] is True
    assert any("every MLP projection" in w for w in res.warnings)
    for opt, path in (("adamw-8bit", "bitsandbytes.optim.AdamW8bit"),
                      ("paged-adamw-8bit", "bitsandbytes.optim.PagedAdamW8bit"),
                      ("sgd-momentum", "torch.optim.SGD"), ("adafactor", "torch.optim.Adafactor")):
        doc = yaml.safe_load(export_plan(variant(lit, optimizer=opt), "litgpt").text)
        assert doc["optimizer"]["class_path"] == path, opt
    sgd = yaml.safe_load(export_plan(variant(lit, optimizer="sgd-momentum"), "litgpt").text)
    assert sgd["optimizer"]["init_args"]["momentum"] == 0.9
    fused = yaml.safe_load(export_plan(variant(lit, fused_optimizer=True), "litgpt").text)
    assert fused["optimizer"]["init_args"]["fused"] is True


def test_litgpt_precisions(lit):
    def precision(**update):
        return yaml.safe_load(export_plan(variant(lit, **update), "litgpt").text)["precision"]

    assert precision(pure_bf16=True) == "bf16-true"
    for effective, fabric in (("fp16", "16-mixed"), ("fp32", "32-true")):
        doc = _doc(lit)
        doc["plan"]["memory"]["precision"] = effective  # as the plan's GPU runs it
        assert yaml.safe_load(export_plan(doc, "litgpt").text)["precision"] == fabric


def test_litgpt_qlora_one_gpu(lit):
    q = variant(lit, method="qlora", quant_format="nf4")
    res = export_plan(q, "litgpt")
    doc = yaml.safe_load(res.text)
    # the NF4 the memory was planned with: LitGPT's recipes, no double quantisation
    assert q.config.nf4_double_quant is False
    assert doc["quantize"] == "bnb.nf4" and doc["precision"] == "bf16-true"
    # planned in pure 16 bit as LitGPT runs quantized training (pure_16bit_methods): no
    # mismatch to warn about; a config planned with fp32 masters still gets the warning
    assert q.config.pure_16bit and not any("not fp32 as planned" in w for w in res.warnings)
    mixed = variant(lit, method="qlora", quant_format="nf4", pure_16bit_methods=())
    assert any("not fp32 as planned" in w for w in export_plan(mixed, "litgpt").warnings)
    with pytest.raises(PlannerError, match="QLoRA on 2 GPUs .*not supported for multi-GPU"):
        export_plan(variant(q, num_gpus=2, grad_accum=8), "litgpt")
    with pytest.raises(PlannerError, match="adamw-8bit with QLoRA"):
        export_plan(variant(q, optimizer="adamw-8bit"), "litgpt")


def test_litgpt_full_on_several_nodes(lit):
    p = variant(lit, method="full", lora_rank=None, num_gpus=8, grad_accum=2, fsdp=True,
                num_hosts=2)
    res = export_plan(p, "litgpt")
    doc = yaml.safe_load(res.text)
    assert launch_line(res.text)[-4:] == ["litgpt", "finetune_full", "--config", "litgpt.yaml"]
    assert "NODE_RANK=0..n-1" in launch_line(res.text)
    assert (doc["devices"], doc["num_nodes"]) == (4, 2)
    # 8 GPUs x the solved plan's micro-batch x 2 accumulation steps
    mb = p.config.micro_batch_size
    assert doc["train"]["global_batch_size"] == p.config.global_batch_size == 8 * mb * 2
    assert "lora_r" not in doc
    # LitGPT checkpoints every Block when finetuning on several GPUs; the plan did not
    assert any("activation checkpointing on every Block" in w for w in res.warnings)
    ddp = export_plan(variant(p, fsdp=False, checkpointing="full"), "litgpt")
    assert any("no DDP" in w for w in ddp.warnings)
    assert not any("every Block" in w for w in ddp.warnings)


def test_litgpt_pretrain(lit):
    p = variant(lit, workload="pretrain", method="full", lora_rank=None, num_gpus=4,
                grad_accum=4)
    res = export_plan(p, "litgpt")
    doc = yaml.safe_load(res.text)
    assert launch_line(res.text) == ["litgpt", "pretrain", "--config", "litgpt.yaml"]
    assert doc["model_name"] == "Qwen2.5-0.5B" and "checkpoint_dir" not in doc
    assert doc["train"]["max_norm"] == 1.0 and "epochs" not in doc["train"]
    assert doc["train"]["max_tokens"] > 0
    assert not any("every Block" in w for w in res.warnings)  # pretrain.py does not recompute


@pytest.mark.parametrize(("update", "match"), [
    (dict(workload="dpo"), "dpo .LitGPT pretrains and finetunes only"),
    (dict(method="dora"), "method dora"),
    (dict(offload="optimizer+params"), "offload optimizer.params .*cpu_offload=False"),
    (dict(checkpointing="full"), r"activation checkpointing \(full\) on one GPU"),
    (dict(zero_stage=2, fsdp=False), "ZeRO-2 .LitGPT has no DeepSpeed"),
    (dict(method="qlora", quant_format="gptq"), "QLoRA on a gptq base"),
])
def test_litgpt_refusals(lit, update, match):
    with pytest.raises(PlannerError, match=match) as exc:
        export_plan(variant(lit, **update), "litgpt")
    assert "\n" not in str(exc.value) and "export litgpt: cannot express" in str(exc.value)


def test_litgpt_refuses_model_parallel_and_fp16_pretraining(lit):
    full = variant(lit, method="full", lora_rank=None, num_gpus=4, grad_accum=4)
    with pytest.raises(PlannerError, match="tensor/pipeline/context/expert parallel"):
        export_plan(variant(full, tp=2), "litgpt")
    doc = _doc(variant(full, workload="pretrain"))
    doc["plan"]["memory"]["precision"] = "fp16"
    with pytest.raises(PlannerError, match="fp16 in litgpt pretrain"):
        export_plan(doc, "litgpt")


# ---------------------------------------------------------------------------------------------
# LLM Foundry
# ---------------------------------------------------------------------------------------------
def test_llmfoundry_full_fsdp(foundry):
    c = foundry.config
    res = export_plan(foundry, "llmfoundry")
    doc = yaml.safe_load(res.text)
    assert launch_line(res.text) == ["composer", "-n", "8", "scripts/train/train.py",
                                     "llmfoundry.yaml"]
    assert doc["model"]["name"] == "hf_causal_lm" and doc["model"]["pretrained"] is True
    assert doc["model"]["pretrained_model_name_or_path"] == "Qwen/Qwen2.5-1.5B"
    assert doc["model"]["use_flash_attention_2"] is c.flash_attention
    assert "peft_config" not in doc["model"]
    assert doc["max_seq_len"] == c.seq_len == doc["train_loader"]["dataset"]["max_seq_len"]
    # Composer: accumulation = global / world size / device micro-batch
    assert doc["global_train_batch_size"] // 8 // doc["device_train_microbatch_size"] \
        == c.grad_accum
    assert doc["device_train_microbatch_size"] == c.micro_batch_size
    fsdp = doc["fsdp_config"]
    assert fsdp["sharding_strategy"] == "FULL_SHARD" and fsdp["mixed_precision"] == "PURE"
    assert fsdp["activation_checkpointing"] is (c.checkpointing != "none")
    assert fsdp["cpu_offload"] is (c.offload != "none")
    assert doc["precision"] == "amp_bf16" and doc["optimizer"]["name"] == "decoupled_adamw"
    assert doc["algorithms"]["gradient_clipping"]["clipping_threshold"] == 1.0


def test_llmfoundry_lora_ddp_and_checkpointing(foundry):
    lora = variant(foundry, method="lora", lora_rank=32, lora_targets=("q", "v"), fsdp=False,
                   checkpointing="none")
    doc = yaml.safe_load(export_plan(lora, "llmfoundry").text)
    peft = doc["model"]["peft_config"]
    assert (peft["peft_type"], peft["r"], peft["lora_alpha"]) == ("LORA", 32,
                                                                  lora.config.lora_alpha)
    assert peft["target_modules"] == ["q_proj", "v_proj"]
    assert "fsdp_config" not in doc  # plain DDP
    ckpt = yaml.safe_load(export_plan(variant(lora, checkpointing="full"), "llmfoundry").text)
    # Composer checkpoints through FSDP only: NO_SHARD keeps DDP's memory
    assert ckpt["fsdp_config"]["sharding_strategy"] == "NO_SHARD"
    assert ckpt["fsdp_config"]["activation_checkpointing"] is True
    offload = export_plan(variant(foundry, offload="optimizer+params"), "llmfoundry")
    assert yaml.safe_load(offload.text)["fsdp_config"]["cpu_offload"] is True
    optimizer_only = export_plan(variant(foundry, offload="optimizer"), "llmfoundry")
    assert any("no optimizer-only offload" in w for w in optimizer_only.warnings)


def test_llmfoundry_pretrain_compile_and_nodes(foundry):
    p = variant(foundry, workload="pretrain", compiled=True, num_hosts=2)
    res = export_plan(p, "llmfoundry")
    doc = yaml.safe_load(res.text)
    assert doc["model"]["pretrained"] is False and doc["train_loader"]["name"] == "text"
    assert doc["compile_config"] == {}
    tokens = launch_line(res.text)
    assert tokens[:3] == ["composer", "-n", "4"] and "--world_size" in tokens
    assert tokens[tokens.index("--world_size") + 1] == "8"


@pytest.mark.parametrize(("update", "match"), [
    (dict(workload="rm"), "rm .LLM Foundry pretrains and finetunes only"),
    (dict(method="qlora", quant_format="nf4"), "method qlora"),
    (dict(tp=2), "tensor parallel 2 .*MPT's ffn"),
    (dict(optimizer="adamw-8bit"), "optimizer adamw-8bit .*decoupled_adamw"),
    (dict(pure_bf16=True), "pure bf16"),
    (dict(zero_stage=3, fsdp=False), "ZeRO-3"),
])
def test_llmfoundry_refusals(foundry, update, match):
    with pytest.raises(PlannerError, match=match) as exc:
        export_plan(variant(foundry, **update), "llmfoundry")
    assert "\n" not in str(exc.value)


def test_llmfoundry_refuses_what_one_gpu_drops(foundry):
    one = variant(foundry, num_gpus=1, grad_accum=64, checkpointing="full")
    with pytest.raises(PlannerError, match="on one GPU .*drops fsdp_config"):
        export_plan(one, "llmfoundry")
    fine = export_plan(variant(one, checkpointing="none", offload="none"), "llmfoundry")
    assert "fsdp_config" not in yaml.safe_load(fine.text)


# ---------------------------------------------------------------------------------------------
# The Liger-kernel profile: the Trainer with use_liger_kernel
# ---------------------------------------------------------------------------------------------
def test_liger_profile_turns_the_kernels_on(lit):
    liger = variant(lit, framework="hf-trainer-liger", chunked_loss=False)
    tokens = shlex.split(export_plan(liger, "torchrun").text.replace("\\\n", " "),
                         comments=True)
    assert tokens[tokens.index("--use_liger_kernel") + 1] == "True"
    plain = variant(lit, framework="hf-trainer", chunked_loss=False)
    assert "--use_liger_kernel" not in export_plan(plain, "torchrun").text


# ---------------------------------------------------------------------------------------------
# planner export without --format on plans made with --framework
# ---------------------------------------------------------------------------------------------
def _flags(kw: dict) -> list[str]:
    out = []
    for k, v in kw.items():
        out += [f"--{k.replace('_', '-')}", ",".join(v) if isinstance(v, tuple) else str(v)]
    return out


CLI_CASES = [
    # 1 GPU LoRA, multi-GPU full with FSDP, and 1-GPU QLoRA / pretraining on 4 GPUs
    ("litgpt", LIT_LORA),
    ("litgpt", dict(model="qwen2.5-1.5b", framework="litgpt", gpus=("a100-80gb-sxm",),
                    num_gpus=8, method="full", sharding="fsdp", offload="none")),
    ("litgpt", dict(model="qwen2.5-1.5b", framework="litgpt", gpus=("rtx-4090",), num_gpus=1,
                    method="qlora", checkpointing="none")),
    ("llmfoundry", dict(model="qwen2.5-0.5b", framework="llm-foundry", gpus=("rtx-4090",),
                        num_gpus=1, method="lora", checkpointing="none", offload="none")),
    ("llmfoundry", FOUNDRY_FULL),
    ("llmfoundry", dict(model="qwen2.5-0.5b", framework="llm-foundry", workload="pretrain",
                        method="full", gpus=("a100-80gb-sxm",), num_gpus=4, tp=1)),
    ("torchrun", dict(model="qwen2.5-0.5b", framework="hf-trainer-liger", gpus=("rtx-4090",),
                      num_gpus=2, method="lora", sharding="zero2", offload="none")),
]


def _plan_then_export(kw: dict, tmp_path, capsys) -> tuple[dict, str]:
    with pytest.raises(SystemExit) as exc:
        main(["plan", *_flags(kw), "--json"])
    assert exc.value.code == 0
    saved = tmp_path / "plan.json"
    saved.write_text(capsys.readouterr().out)
    with pytest.raises(SystemExit) as exc:
        main(["export", str(saved)])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    return json.loads(saved.read_text())["plan"], out.out


@pytest.mark.parametrize(("fmt", "kw"), CLI_CASES,
                         ids=[f"{f}-{kw['method']}-{kw['num_gpus']}" for f, kw in CLI_CASES])
def test_export_without_format_writes_the_frameworks_own(fmt, kw, tmp_path, capsys):
    p, text = _plan_then_export(kw, tmp_path, capsys)
    c = p["config"]
    assert text.startswith(f"#!/usr/bin/env bash\n# planner export --format {fmt}:") \
        if fmt == "torchrun" else text.startswith(f"# planner export --format {fmt}:")
    if fmt == "torchrun":
        tokens = shlex.split(text.replace("\\\n", " "), comments=True)
        assert tokens[tokens.index("--use_liger_kernel") + 1] == "True"
        assert tokens[tokens.index("--per_device_train_batch_size") + 1] == \
            str(c["micro_batch_size"])
        return
    doc = yaml.safe_load(text)
    if fmt == "litgpt":
        train = doc["train"]
        assert train["micro_batch_size"] == c["micro_batch_size"]
        assert train["global_batch_size"] == c["micro_batch_size"] * c["grad_accum"] * \
            p["num_gpus"]
        assert train["max_seq_length"] == c["seq_len"]
        assert doc["devices"] * doc["num_nodes"] == p["num_gpus"]
        assert ("lora_r" in doc) is (c["method"] != "full")
        assert (doc.get("quantize") == "bnb.nf4") is (c["method"] == "qlora")
    else:
        assert doc["device_train_microbatch_size"] == c["micro_batch_size"]
        assert doc["global_train_batch_size"] == c["micro_batch_size"] * c["grad_accum"] * \
            p["num_gpus"]
        assert doc["max_seq_len"] == c["seq_len"]
        assert ("peft_config" in doc["model"]) is (c["method"] == "lora")
        assert ("fsdp_config" in doc) is (p["num_gpus"] > 1 and (c["fsdp"] or
                                                                c["checkpointing"] != "none"))


def test_both_formats_state_the_versions_they_target(lit, foundry):
    from planner.outputs.export import TARGETS

    for p, fmt, version in ((lit, "litgpt", "LitGPT 0.5.13"),
                            (foundry, "llmfoundry", "llm-foundry 0.22.0")):
        res = export_plan(p, fmt)
        assert TARGETS[fmt].startswith(version)
        assert f"# Targets {TARGETS[fmt]}." in res.text and f"targets {TARGETS[fmt]}" in res.notes
