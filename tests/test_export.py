"""Launch-config export: every format parsed back and checked against the plan it came from."""

from __future__ import annotations

import dataclasses
import json
import shlex

import pytest
import yaml

from planner import PlanRequest, plan
from planner.catalog.frameworks import HYBRID_SHARD_LAUNCHES
from planner.cli import main
from planner.errors import PlannerError
from planner.outputs.export import FORMATS, export_plan
from planner.outputs.render import plan_doc, to_json
from planner.solver.result import PlanResult

# Pinned requests solve in a few hundredths of a second; one plan each per module.
SFT = PlanRequest(model="qwen2.5-0.5b", gpus=("rtx-4090",), num_gpus=2, method="lora",
                  sharding="zero2", offload="none", checkpointing="full", micro_batch_size=4)
GRPO = PlanRequest(model="qwen2.5-0.5b", workload="grpo", gpus=("rtx-4090",), num_gpus=2,
                   method="lora", sharding="zero3", offload="none", checkpointing="full",
                   micro_batch_size=4, prompt_len=256, response_len=256, rollout_batch=32,
                   rollout_tp=2, placement="colocate", offload_idle=True,
                   gpu_memory_utilization=0.4, global_batch_size=80, framework="openrlhf")


@pytest.fixture(scope="module")
def sft():
    result = plan(SFT)
    assert result.plan is not None
    return result.plan


@pytest.fixture(scope="module")
def grpo():
    result = plan(GRPO)
    assert result.plan is not None
    return result.plan


def variant(p, *, num_hosts=None, **update):
    """The plan with config fields changed (num_gpus kept consistent)."""
    cfg = p.config.model_copy(update=update)
    return dataclasses.replace(p, config=cfg, num_gpus=cfg.num_gpus,
                               num_hosts=num_hosts or p.num_hosts)


def argv(text: str) -> list[str]:
    """The exported shell script's tokens (comments and line continuations removed)."""
    return shlex.split(text.replace("\\\n", " "), comments=True)


def flag(tokens: list[str], name: str) -> str:
    return tokens[tokens.index(name) + 1]


def hydra(text: str) -> dict[str, str]:
    return dict(t.split("=", 1) for t in argv(text) if "=" in t and not t.startswith("--"))


# ---------------------------------------------------------------------------------------------
# DeepSpeed
# ---------------------------------------------------------------------------------------------
def test_deepspeed_batch_and_zero(sft):
    c = sft.config
    doc = json.loads(export_plan(sft, "deepspeed").text)
    assert doc["train_micro_batch_size_per_gpu"] == c.micro_batch_size == 4
    assert doc["gradient_accumulation_steps"] == c.grad_accum
    # micro 4 x accumulation 8 x dp 2 = 64 = the plan's global batch
    assert doc["train_batch_size"] == c.micro_batch_size * c.grad_accum * c.dp == 64
    assert doc["zero_optimization"]["stage"] == 2
    assert "offload_optimizer" not in doc["zero_optimization"]
    assert doc["bf16"]["enabled"] is True and doc["fp16"]["enabled"] is False
    assert doc["gradient_clipping"] == 1.0


def test_deepspeed_offload_and_nodes(sft):
    p = variant(sft, method="full", lora_rank=None, zero_stage=3, offload="optimizer+params",
                num_gpus=16, num_hosts=2)
    res = export_plan(p, "deepspeed")
    doc = json.loads(res.text)
    zero = doc["zero_optimization"]
    assert zero["stage"] == 3
    assert zero["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    assert zero["offload_param"] == {"device": "cpu", "pin_memory": True}
    assert doc["optimizer"]["type"] == "AdamW"  # DeepSpeed's CPU Adam steps the offload
    assert doc["train_batch_size"] == 4 * p.config.grad_accum * 16
    assert res.filename_suggestion == "ds_z3_offload_all_config.json"
    assert any("--num_nodes 2 --num_gpus 8" in n for n in res.notes)
    only_opt = json.loads(export_plan(variant(sft, offload="optimizer"), "deepspeed").text)
    assert "offload_param" not in only_opt["zero_optimization"]
    assert only_opt["zero_optimization"]["offload_optimizer"]["device"] == "cpu"


def test_deepspeed_fp16_on_v100():
    result = plan(SFT.model_copy(update={"gpus": ("v100-32gb",), "num_gpus": 1,
                                         "sharding": "zero1"}))
    res = export_plan(result, "deepspeed")
    doc = json.loads(res.text)
    assert doc["fp16"]["enabled"] is True and doc["bf16"]["enabled"] is False
    assert doc["fp16"]["loss_scale"] == 0  # dynamic loss scaling
    assert any("v100-32gb has no bf16" in n for n in res.notes)


def test_deepspeed_refuses_fsdp_and_rl(sft, grpo):
    with pytest.raises(PlannerError, match="cannot express FSDP.*accelerate"):
        export_plan(variant(sft, zero_stage=0, fsdp=True), "deepspeed")
    with pytest.raises(PlannerError, match="grpo.*verl"):
        export_plan(grpo, "deepspeed")


def test_deepspeed_selective_checkpointing_warns(sft):
    res = export_plan(variant(sft, checkpointing="selective"), "deepspeed")
    assert any("selective" in w for w in res.warnings)


# ---------------------------------------------------------------------------------------------
# Accelerate
# ---------------------------------------------------------------------------------------------
def test_accelerate_deepspeed(sft):
    res = export_plan(sft, "accelerate")
    doc = yaml.safe_load(res.text)
    assert doc["distributed_type"] == "DEEPSPEED"
    ds = doc["deepspeed_config"]
    assert ds["zero_stage"] == 2 and ds["gradient_accumulation_steps"] == sft.config.grad_accum
    assert ds["offload_optimizer_device"] == "none" and ds["offload_param_device"] == "none"
    assert doc["num_processes"] == sft.num_gpus and doc["num_machines"] == sft.num_hosts
    assert doc["mixed_precision"] == "bf16"
    launch = argv("\n".join(line.lstrip("# ") for line in res.text.splitlines()
                            if line.startswith("#   ")))
    assert flag(launch, "--per_device_train_batch_size") == "4"
    assert flag(launch, "--lora_r") == str(sft.config.rank) == "8"  # PEFT's r on the Trainer


def test_accelerate_fsdp(sft):
    p = variant(sft, method="full", lora_rank=None, zero_stage=0, fsdp=True, offload="optimizer",
                num_gpus=16, num_hosts=2)
    res = export_plan(p, "accelerate")
    doc = yaml.safe_load(res.text)
    assert doc["distributed_type"] == "FSDP"
    fsdp = doc["fsdp_config"]
    assert fsdp["fsdp_sharding_strategy"] == "FULL_SHARD"
    assert fsdp["fsdp_offload_params"] is True
    assert fsdp["fsdp_activation_checkpointing"] is True  # checkpointing full
    assert doc["num_processes"] == 16 and doc["num_machines"] == 2
    assert any("also moves the parameters" in w for w in res.warnings)  # lossy, stated


def test_accelerate_plain_data_parallel(sft):
    one = yaml.safe_load(export_plan(variant(sft, zero_stage=0, num_gpus=1), "accelerate").text)
    two = yaml.safe_load(export_plan(variant(sft, zero_stage=0), "accelerate").text)
    assert one["distributed_type"] == "NO" and two["distributed_type"] == "MULTI_GPU"


def test_accelerate_refuses_pipeline(sft):
    with pytest.raises(PlannerError, match="pipeline.*torchrun"):
        export_plan(variant(sft, method="full", lora_rank=None, pp=2, zero_stage=0),
                    "accelerate")


# ---------------------------------------------------------------------------------------------
# torchrun
# ---------------------------------------------------------------------------------------------
def test_torchrun_command(sft):
    p = variant(sft, num_gpus=16, num_hosts=2)
    tokens = argv(export_plan(p, "torchrun").text)
    start = tokens.index("torchrun")
    nnodes, per_node = int(flag(tokens, "--nnodes")), int(flag(tokens, "--nproc_per_node"))
    assert nnodes == 2 and nnodes * per_node == p.num_gpus
    assert flag(tokens, "--rdzv_backend") == "c10d"
    assert flag(tokens, "--rdzv_endpoint").endswith(":29500")
    assert tokens[start + 11] == "sft.py"
    assert flag(tokens, "--per_device_train_batch_size") == str(p.config.micro_batch_size)
    assert flag(tokens, "--gradient_accumulation_steps") == str(p.config.grad_accum)
    assert flag(tokens, "--max_length") == "2048"
    assert flag(tokens, "--lora_r") == str(p.config.rank) and flag(tokens, "--use_peft") == "True"
    assert flag(tokens, "--deepspeed") == "ds_z2_config.json"
    assert flag(tokens, "--gradient_checkpointing") == "True"


def test_torchrun_megatron_for_tensor_parallel(sft):
    p = variant(sft, method="full", lora_rank=None, tp=2, zero_stage=1, num_gpus=4,
                checkpointing="selective", micro_batch_size=2, grad_accum=16)
    tokens = argv(export_plan(p, "torchrun").text)
    assert "pretrain_gpt.py" in tokens
    assert flag(tokens, "--tensor-model-parallel-size") == "2"
    assert flag(tokens, "--pipeline-model-parallel-size") == "1"
    # micro 2 x accumulation 16 x dp 2 = 64: Megatron derives the accumulation from it
    assert flag(tokens, "--global-batch-size") == str(p.config.global_batch_size) == "64"
    assert flag(tokens, "--micro-batch-size") == "2"
    assert flag(tokens, "--recompute-granularity") == "selective"
    assert "--use-distributed-optimizer" in tokens and "--sequence-parallel" in tokens
    with pytest.raises(PlannerError, match="method lora"):
        export_plan(variant(sft, tp=2, num_gpus=4), "torchrun")


def test_torchrun_refuses_rl(grpo):
    with pytest.raises(PlannerError, match="verl"):
        export_plan(grpo, "torchrun")


# ---------------------------------------------------------------------------------------------
# verl
# ---------------------------------------------------------------------------------------------
def test_verl_grpo_overrides(grpo):
    c = grpo.config
    u = plan_doc_of(grpo)["rl"]["gpu_memory_utilization"]
    res = export_plan(grpo, "verl")
    o = hydra(res.text)
    a, r = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
    assert o["algorithm.adv_estimator"] == "grpo"
    assert o[f"{a}.ppo_micro_batch_size_per_gpu"] == str(c.micro_batch_size)
    # ppo_mini_batch_size counts prompts: 16 prompts x 5 samples = the plan's 80 sequences
    mini = int(o[f"{a}.ppo_mini_batch_size"])
    assert mini * c.samples_per_prompt == c.global_batch_size == 80
    assert (mini * c.samples_per_prompt // c.num_gpus) % c.micro_batch_size == 0
    assert o[f"{r}.tensor_model_parallel_size"] == "2" == str(c.rollout_tp)
    assert float(o[f"{r}.gpu_memory_utilization"]) == u == 0.4
    assert o[f"{r}.n"] == "5"
    assert o["data.train_batch_size"] == "32"
    assert o["data.max_prompt_length"] == "256" and o["data.max_response_length"] == "256"
    assert o[f"{a}.fsdp_config.param_offload"] == "True" == str(c.offload_idle)
    assert o[f"{a}.fsdp_config.optimizer_offload"] == "True"
    assert o["actor_rollout_ref.model.lora_rank"] == "16"
    assert o["actor_rollout_ref.model.enable_gradient_checkpointing"] == "True"
    assert o[f"{a}.use_kl_loss"] == "True"
    assert int(o["trainer.n_gpus_per_node"]) * int(o["trainer.nnodes"]) == grpo.num_gpus
    assert argv(res.text)[argv(res.text).index("-m") + 1] == "verl.trainer.main_ppo"


def plan_doc_of(p):
    from planner.solver.result import PlanResult

    return plan_doc(PlanResult(status="optimal", plan=p))["plan"]


def test_verl_mini_batch_rounding_is_stated(grpo):
    # 64 sequences per step are not whole 5-sample prompt groups: the nearest valid mini-batch
    res = export_plan(variant(grpo, grad_accum=8), "verl")
    o = hydra(res.text)
    mini = int(o["actor_rollout_ref.actor.ppo_mini_batch_size"])
    assert 32 % mini == 0 and (mini * 5 // 2) % 4 == 0
    assert any("not a whole number" in w and f"{mini} prompts" in w for w in res.warnings)


def test_verl_ppo_critic_and_kl(grpo):
    o = hydra(export_plan(variant(grpo, workload="ppo", rollout_n=1, grad_accum=4), "verl").text)
    assert o["algorithm.adv_estimator"] == "gae"
    assert o["critic.ppo_micro_batch_size_per_gpu"] == "4"
    # verl 0.9: the reward model on an engine of its own, the critic's FSDP under critic.fsdp
    assert o["reward.reward_model.enable"] == "True"
    assert o["reward.reward_model.model_path"] == "$REWARD_MODEL"
    assert o["critic.fsdp.param_offload"] == "True"
    assert o["algorithm.use_kl_in_reward"] == "True"
    assert o["actor_rollout_ref.actor.use_kl_loss"] == "False"


def test_verl_refusals(sft, grpo):
    with pytest.raises(PlannerError, match="sft.*deepspeed"):
        export_plan(sft, "verl")
    with pytest.raises(PlannerError, match="separate rollout GPUs.*openrlhf"):
        export_plan(variant(grpo, placement="separate", rollout_gpus=1, rollout_tp=1), "verl")
    with pytest.raises(PlannerError, match="qlora"):
        export_plan(variant(grpo, method="qlora"), "verl")


# ---------------------------------------------------------------------------------------------
# OpenRLHF
# ---------------------------------------------------------------------------------------------
def test_openrlhf_grpo_colocated(grpo):
    c = grpo.config
    tokens = argv(export_plan(grpo, "openrlhf@0.8").text)
    assert "openrlhf.cli.train_ppo_ray" in tokens
    assert "--colocate_all_models" in tokens and "--deepspeed_enable_sleep" in tokens
    engines, tp = int(flag(tokens, "--vllm_num_engines")), int(flag(tokens,
                                                                   "--vllm_tensor_parallel_size"))
    assert engines * tp == grpo.num_gpus and tp == c.rollout_tp
    assert float(flag(tokens, "--vllm_gpu_memory_utilization")) == 0.4
    assert flag(tokens, "--zero_stage") == "3"
    assert flag(tokens, "--micro_train_batch_size") == str(c.micro_batch_size)
    assert flag(tokens, "--train_batch_size") == str(c.global_batch_size)
    assert flag(tokens, "--rollout_batch_size") == "32"
    assert flag(tokens, "--n_samples_per_prompt") == "5"
    assert flag(tokens, "--lora_rank") == "16"
    assert flag(tokens, "--prompt_max_len") == "256" and flag(tokens, "--generate_max_len") == "256"
    assert flag(tokens, "--advantage_estimator") == "group_norm"
    for f in ("--bf16", "--flash_attn", "--gradient_checkpointing", "--use_kl_loss"):
        assert f in tokens
    nodes = int(flag(tokens, "--actor_num_nodes"))
    assert nodes * int(flag(tokens, "--actor_num_gpus_per_node")) == grpo.num_gpus


def test_openrlhf_separate_engines(grpo):
    p = variant(grpo, num_gpus=4, placement="separate", rollout_gpus=2, offload_idle=False,
                rollout_tp=1)
    tokens = argv(export_plan(p, "openrlhf@0.8").text)
    assert "--colocate_all_models" not in tokens and "--colocate_actor_ref" in tokens
    assert int(flag(tokens, "--vllm_num_engines")) == 2
    assert int(flag(tokens, "--actor_num_gpus_per_node")) == 2  # 4 GPUs - 2 for the engines


def test_openrlhf_split_gives_every_role_its_own_gpus(grpo):
    """Split placement is OpenRLHF's default layout: no --colocate_* flag, each role's own
    nodes x GPUs, the engines on the rest."""
    groups = (("actor", 4), ("critic", 2), ("reference", 1), ("reward", 1))
    p = variant(grpo, workload="ppo", rollout_n=1, num_gpus=10, placement="split",
                role_gpus=groups, offload_idle=False, rollout_tp=1, grad_accum=4)
    tokens = argv(export_plan(p, "openrlhf@0.8").text)
    assert not [t for t in tokens if t.startswith("--colocate")]
    for role, gpus in (("actor", 4), ("critic", 2), ("ref", 1), ("reward", 1)):
        assert int(flag(tokens, f"--{role}_num_nodes")) * \
            int(flag(tokens, f"--{role}_num_gpus_per_node")) == gpus
    assert int(flag(tokens, "--vllm_num_engines")) == 2
    with pytest.raises(PlannerError, match="split rollout GPUs.*openrlhf"):
        export_plan(p, "verl")


def test_openrlhf_supervised_and_offload(sft):
    tokens = argv(export_plan(variant(sft, workload="dpo", offload="optimizer"),
                              "openrlhf@0.8").text)
    assert tokens[tokens.index("--module") + 1] == "openrlhf.cli.train_dpo"
    assert "--adam_offload" in tokens and flag(tokens, "--zero_stage") == "2"
    assert int(flag(tokens, "--num_gpus")) == sft.num_gpus
    with pytest.raises(PlannerError, match="parameter offload"):
        export_plan(variant(sft, zero_stage=3, offload="optimizer+params"), "openrlhf@0.8")


def test_openrlhf_current_layout_is_dotted(grpo, sft):
    """--format openrlhf writes OpenRLHF 0.11's dotted flags: --data.max_len is prompt +
    response, --ds.param_dtype replaces --bf16, --ds.attn_implementation --flash_attn."""
    c = grpo.config
    text = export_plan(grpo, "openrlhf").text
    assert "# Targets OpenRLHF 0.11" in text
    tokens = argv(text)
    assert flag(tokens, "--ds.zero_stage") == "3"
    engines, tp = flag(tokens, "--vllm.num_engines"), flag(tokens, "--vllm.tensor_parallel_size")
    assert int(engines) * int(tp) == grpo.num_gpus
    assert flag(tokens, "--data.max_len") == "512" and flag(tokens, "--rollout.max_new_tokens") \
        == "256"
    assert flag(tokens, "--ds.param_dtype") == "bf16"
    assert flag(tokens, "--ds.attn_implementation") == "flash_attention_2"
    assert flag(tokens, "--train.batch_size") == str(c.global_batch_size)
    assert flag(tokens, "--actor.num_nodes") == "1" and "--train.colocate_all" in tokens
    assert "--algo.kl.use_loss" in tokens and flag(tokens, "--ds.lora.rank") == "16"
    assert not [t for t in tokens if t.startswith("--") and "." not in t and "_" in t]
    sup = argv(export_plan(sft, "openrlhf").text)
    assert flag(sup, "--model.model_name_or_path") and "--model.gradient_checkpointing_enable" \
        in sup
    doc = plan_doc(PlanResult(status="optimal", plan=sft))
    doc["plan"]["memory"]["precision"] = "fp32"
    with pytest.raises(PlannerError, match="fp32 training in OpenRLHF 0.11.*openrlhf@0.8"):
        export_plan(doc, "openrlhf")


def test_every_export_states_the_versions_it_targets(sft, grpo):
    from planner.outputs.export import TARGETS

    for fmt in ("deepspeed", "accelerate", "torchrun", "llamafactory", "openrlhf",
                "openrlhf@0.8", "verl"):
        result = export_plan(grpo if fmt == "verl" else sft, fmt)
        assert f"targets {TARGETS[fmt]}" in result.notes
        if fmt != "deepspeed":  # JSON has no comments
            assert f"# Targets {TARGETS[fmt]}." in result.text


def test_format_versions():
    from planner.outputs.export import TARGETS, check_format

    assert check_format("OpenRLHF@0.8") == "openrlhf@0.8"
    assert check_format("openrlhf@0.11") == check_format("openrlhf") == "openrlhf"
    with pytest.raises(PlannerError, match="unknown openrlhf version '0.9'; known: "
                                           "openrlhf@0.11, openrlhf@0.8$"):
        check_format("openrlhf@0.9")
    with pytest.raises(PlannerError, match="unknown deepspeed version .*one layout"):
        check_format("deepspeed@0.14")
    assert all(TARGETS[k] for k in ("deepspeed", "accelerate", "torchrun", "verl",
                                    "llamafactory", "openrlhf", "openrlhf@0.8"))


# ---------------------------------------------------------------------------------------------
# LLaMA-Factory
# ---------------------------------------------------------------------------------------------
def test_llamafactory_lora(sft):
    c = sft.config
    doc = yaml.safe_load(export_plan(sft, "llamafactory").text)
    assert doc["stage"] == "sft" and doc["finetuning_type"] == "lora"
    assert doc["lora_rank"] == c.rank and doc["lora_target"] == ",".join(
        f"{t}_proj" for t in c.lora_targets)  # PEFT's q,v on the Trainer: q_proj,v_proj
    assert doc["per_device_train_batch_size"] == c.micro_batch_size
    assert doc["gradient_accumulation_steps"] == c.grad_accum
    assert doc["cutoff_len"] == c.seq_len
    assert doc["bf16"] is True
    assert doc["deepspeed"].endswith("ds_z2_config.json")
    assert doc["disable_gradient_checkpointing"] is False  # checkpointing full = the default


def test_llamafactory_methods_and_stages(sft):
    q = yaml.safe_load(export_plan(variant(sft, method="qlora", zero_stage=0), "llamafactory")
                       .text)
    assert q["quantization_bit"] == 4 and "deepspeed" not in q
    d = yaml.safe_load(export_plan(variant(sft, method="dora", checkpointing="none"),
                                   "llamafactory").text)
    assert d["use_dora"] is True and d["disable_gradient_checkpointing"] is True
    rm = yaml.safe_load(export_plan(variant(sft, workload="rm"), "llamafactory").text)
    assert rm["stage"] == "rm"
    res = export_plan(variant(sft, workload="dpo", zero_stage=1), "llamafactory")
    dpo = yaml.safe_load(res.text)
    assert dpo["stage"] == "dpo" and dpo["pref_beta"] == 0.1
    assert dpo["deepspeed"] == "ds_z1_config.json"
    assert any("planner export --format deepspeed" in n for n in res.notes)


def test_llamafactory_refusals(sft, grpo):
    with pytest.raises(PlannerError, match="tensor/pipeline"):
        export_plan(variant(sft, method="full", lora_rank=None, pp=2, zero_stage=0),
                    "llamafactory")
    with pytest.raises(PlannerError, match="GRPO"):
        export_plan(grpo, "llamafactory")


def test_llamafactory_ppo_is_approximate(grpo):
    p = variant(grpo, workload="ppo", rollout_n=1, offload_idle=False, grad_accum=4)
    res = export_plan(p, "llamafactory")
    doc = yaml.safe_load(res.text)
    assert doc["stage"] == "ppo" and doc["max_new_tokens"] == 256 and doc["cutoff_len"] == 256
    assert any("no vLLM engine" in w for w in res.warnings)
    with pytest.raises(PlannerError, match="idle roles"):
        export_plan(variant(p, offload_idle=True), "llamafactory")


def test_offloaded_8bit_adam_is_refused(sft):
    p = variant(sft, optimizer="adamw-8bit", offload="optimizer")
    for fmt in ("deepspeed", "accelerate", "torchrun", "llamafactory"):
        with pytest.raises(PlannerError, match="adamw-8bit with ZeRO-Offload"):
            export_plan(p, fmt)


def test_case_only_settings_are_refused_where_no_launch_writes_them(sft):
    """A saved plan edited to carry what only validation cases state: LoRA training the
    embedding and head too (PEFT modules_to_save) in no format, activation offloading in every
    format but torchtune's (enable_activation_offloading, which needs checkpointing)."""
    emb = variant(sft, method="lora", lora_rank=8, peft_trains_embeddings=True)
    off = variant(sft, checkpointing="full", offload_activations=True)
    for fmt in FORMATS:
        with pytest.raises(PlannerError, match="peft_trains_embeddings: no launch writer"):
            export_plan(emb, fmt)
        if fmt != "torchtune":
            with pytest.raises(PlannerError, match="cannot express activation offloading"):
                export_plan(off, fmt)
    tune = dict(zero_stage=0, fsdp=sft.num_gpus > 1, offload_activations=True)
    doc = yaml.safe_load(export_plan(variant(sft, checkpointing="full", **tune),
                                     "torchtune").text)
    assert doc["enable_activation_offloading"] and doc["enable_activation_checkpointing"]
    with pytest.raises(PlannerError, match="require enable_activation_checkpointing"):
        export_plan(variant(sft, checkpointing="none", **tune), "torchtune")


def test_partial_checkpointing_and_unwritten_hybrid_sharding_are_refused(sft):
    # TrainConfig inputs of check/validate that no writer expresses: never a silent FULL_SHARD
    p = variant(sft, checkpointing="full", checkpoint_fraction=0.5)
    for fmt in FORMATS:
        with pytest.raises(PlannerError, match="no launch writer expresses it"):
            export_plan(p, fmt)
    # a shard group of 1 on a 2-GPU node: FSDP's HYBRID_SHARD would shard over the node's 2
    p = variant(sft, fsdp=True, zero_stage=0, dp_shard=1)
    for fmt in FORMATS:
        match = "shards over one node's GPUs" if fmt in HYBRID_SHARD_LAUNCHES[:2] else \
            "writes no hybrid shard group" if fmt not in HYBRID_SHARD_LAUNCHES else "cannot"
        with pytest.raises(PlannerError, match=match):
            export_plan(p, fmt)


# ---------------------------------------------------------------------------------------------
# Formats, documents and the command line
# ---------------------------------------------------------------------------------------------
def test_unknown_format_lists_the_known(sft):
    with pytest.raises(PlannerError) as exc:
        export_plan(sft, "deepspeeed")
    msg = str(exc.value)
    assert "did you mean: deepspeed" in msg and "llamafactory" in msg and "\n" not in msg


def test_every_format_exports_or_refuses_in_one_line(sft, grpo):
    for p in (sft, grpo):
        for fmt in FORMATS:
            try:
                res = export_plan(p, fmt)
            except PlannerError as exc:
                assert "\n" not in str(exc) and "cannot express" in str(exc)
            else:
                assert res.text.strip() and res.format == fmt


def test_saved_json_round_trip_through_cli(sft, tmp_path, capsys):
    saved = tmp_path / "plan.json"
    saved.write_text(to_json(plan_doc(plan(SFT))))  # what `planner plan --json` prints
    out = tmp_path / "ds.json"
    with pytest.raises(SystemExit) as exc:
        main(["export", "--format", "deepspeed", "--out", str(out), str(saved)])
    assert exc.value.code == 0
    assert json.loads(out.read_text()) == json.loads(export_plan(sft, "deepspeed").text)
    for fmt in ("accelerate", "torchrun", "llamafactory", "openrlhf"):  # the dict path = Plan
        doc = json.loads(saved.read_text())
        assert export_plan(doc, fmt).text == export_plan(sft, fmt).text
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["export", "--format", "verl", str(saved)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "cannot express sft" in err


def test_plan_export_option(tmp_path, capsys):
    out = tmp_path / "run.sh"
    args = ["plan", "--model", "qwen2.5-0.5b", "--gpus", "rtx-4090", "--num-gpus", "2",
            "--method", "lora", "--sharding", "zero2", "--offload", "none",
            "--checkpointing", "full", "--micro-batch", "4", "--confidence", "0", "--json"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--export", "openrlhf", "--out", str(out)])
    assert exc.value.code == 0
    assert json.loads(capsys.readouterr().out)["status"] == "optimal"
    assert flag(argv(out.read_text()), "--train.micro_batch_size") == "4"
    with pytest.raises(SystemExit) as exc:
        main([*args, "--export", "deepspeed"])
    assert exc.value.code == 2 and "needs --out" in capsys.readouterr().err


def test_bad_documents_are_one_line_errors(sft):
    with pytest.raises(PlannerError, match="no plan .status infeasible"):
        export_plan({"status": "infeasible", "plan": None}, "deepspeed")
    with pytest.raises(PlannerError, match="missing"):
        export_plan({"plan": {"model": "x"}}, "deepspeed")
    edited = plan_doc_of(sft)
    edited["config"] = {**edited["config"], "fsdp": True}  # with ZeRO-2: inconsistent
    with pytest.raises(PlannerError, match="--fsdp and --zero 2 exclude each other"):
        export_plan(edited, "accelerate")
    edited = {**plan_doc_of(sft), "rl": {"gpu_memory_utilization": 1.5}}
    with pytest.raises(PlannerError, match="gpu_memory_utilization 1.5"):
        export_plan(edited, "deepspeed")


# ---- issue 20: export defects ----------------------------------------------------------------
def test_trl_dtype_flag_follows_the_stated_version(sft):
    text = export_plan(variant(sft, pure_bf16=True), "torchrun").text
    tokens = argv(text)
    assert flag(tokens, "--dtype") == "bfloat16" and "--torch_dtype" not in tokens  # TRL >= 0.27


def test_megatron_tensor_parallel_exports_cuda_device_max_connections(sft):
    tp = export_plan(variant(sft, method="full", lora_rank=None, tp=2, zero_stage=1, num_gpus=4,
                             micro_batch_size=2, grad_accum=16), "torchrun").text
    assert "\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n" in tp
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in export_plan(sft, "torchrun").text


def test_uneven_gpus_per_node_are_refused_not_rounded_up(sft):
    seven = variant(sft, num_hosts=2, num_gpus=7, zero_stage=2)
    for fmt in ("torchrun", "deepspeed", "accelerate", "llamafactory", "openrlhf"):
        with pytest.raises(PlannerError, match="7 GPUs on 2 nodes"):
            export_plan(seven, fmt)


def test_llamafactory_ppo_never_points_to_a_deepspeed_file_export_refuses(grpo):
    ppo = variant(grpo, workload="ppo", rollout_n=1, offload="optimizer", zero_stage=1,
                  fsdp=False, offload_idle=False)
    with pytest.raises(PlannerError) as exc:
        export_plan(ppo, "llamafactory")
    assert "supervised training only" in str(exc.value)
    with pytest.raises(PlannerError):  # the file it would have named cannot be written
        export_plan(ppo, "deepspeed")


def test_unknown_lora_target_in_a_saved_plan_is_one_line(sft):
    doc = json.loads(to_json(plan_doc_of(sft)))
    doc["config"]["lora_targets"] = ["qq"]
    with pytest.raises(PlannerError, match="lora_targets"):
        export_plan(doc, "torchrun")


def test_lora_alpha_follows_the_rank_in_every_format(sft, grpo):
    """Every launch writes TrainConfig.lora_alpha (2 x rank): rank 8 gives alpha 16 (the default
    rank 16 would give 32)."""
    p, rl = variant(sft, lora_rank=8), variant(grpo, lora_rank=8)
    assert p.config.lora_alpha == rl.config.lora_alpha == 16
    assert flag(argv(export_plan(p, "torchrun").text), "--lora_alpha") == "16"
    assert yaml.safe_load(export_plan(p, "llamafactory").text)["lora_alpha"] == 16
    assert flag(argv(export_plan(p, "openrlhf@0.8").text), "--lora_alpha") == "16"
    assert hydra(export_plan(rl, "verl").text)["actor_rollout_ref.model.lora_alpha"] == "16"


def test_a_plan_and_its_saved_document_give_the_same_job(sft, grpo):
    """A typed Plan is exported from its own values; the saved `plan --json` of it is parsed
    into the same Job (the vLLM fraction: the engine's need rounded up, in both)."""
    from planner.outputs.export import job_of

    for p in (sft, grpo, variant(grpo, gpu_memory_utilization=None)):
        saved = json.loads(to_json(plan_doc(PlanResult(status="optimal", plan=p))))
        assert job_of(p) == job_of(saved)
    open_u = job_of(variant(grpo, gpu_memory_utilization=None))
    need = grpo.memory.engine_utilization
    assert need is not None and open_u.engine_utilization >= need
    assert open_u.engine_utilization - need < 0.01 and job_of(grpo).engine_utilization == 0.4


def test_the_launch_formats_of_profiles_are_the_writers():
    """One list: the formats a profile may name (specs.LaunchFormat, shown in the CLI's help)
    are the formats the exporters write."""
    from planner.catalog.specs import LAUNCH_FORMATS
    from planner.outputs.export import FORMATS

    assert set(LAUNCH_FORMATS) == set(FORMATS)
