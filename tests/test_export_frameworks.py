"""The NeMo-RL, prime-rl and DeepSpeed-Chat writers: fields mapped from the plan, refusals, the
CLI's `planner export PLAN.json` choosing them for plans made with --framework, and every
export held against the framework's config schema.

Schema checks (marked as such in each test's name): none of the three installs on a CPU test
machine (NeMo-RL's PyPI name holds only a 0.0.0 placeholder and its package needs CUDA builds;
prime-rl and its prime-rl-configs are not on PyPI and need Python 3.12; DeepSpeed-Chat's dschat
is installed from the DeepSpeedExamples checkout, not PyPI), so tests/data/launch_schemas.json
records their schemas as read from their sources at the targeted commits by
tools/launch_schemas.py: NeMo-RL's recipe key paths and value types, prime-rl's pydantic fields
and Literal choices, DeepSpeed-Chat's argparse flags per step.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from planner import PlanRequest
from planner.cli import main
from planner.errors import PlannerError
from planner.outputs.export import WRITES_FOR, export_plan
from planner.outputs.render import plan_doc, to_json
from planner.solver.solve import plan

SCHEMAS = json.loads((Path(__file__).parent / "data" / "launch_schemas.json").read_text())
RL = dict(prompt_len=256, response_len=256, rollout_batch=32)
SMALL = dict(model="qwen2.5-0.5b", gpus=("rtx-4090",))
SEVEN = dict(model="qwen2.5-7b", gpus=("h100-sxm",), num_gpus=8, method="full", offload="none")
# Pinned requests per framework (each solves in well under a second): 1-GPU LoRA, 8-GPU full
# with sharding, and a tensor/pipeline-parallel or RL case the framework runs.
REQUESTS = {
    "nemo-rl": {
        "lora1": dict(**SMALL, num_gpus=1, method="lora", checkpointing="full",
                      micro_batch_size=2),
        "full8": dict(**SEVEN, sharding="fsdp"),
        "tp": dict(model="qwen2.5-7b", gpus=("rtx-4090",), num_gpus=8, method="full", tp=2,
                   pp=1),
        "pp": dict(**SEVEN, tp=2, pp=2),
        "grpo": dict(**SMALL, workload="grpo", num_gpus=2, method="full", placement="colocate",
                     **RL),
    },
    "prime-rl": {
        "lora1": dict(**SMALL, num_gpus=1, method="lora", micro_batch_size=2),
        "full8": dict(**SEVEN),
        "grpo": dict(**SMALL, workload="grpo", method="full", placement="split",
                     budget_usd=20000, **RL),
    },
    "deepspeed-chat": {
        "lora1": dict(**SMALL, num_gpus=1, method="lora", micro_batch_size=2),
        "full8": dict(**SEVEN, sharding="zero3", pp=1),
        "dpo": dict(**SMALL, workload="dpo", num_gpus=2, method="lora", pp=1),
        "ppo": dict(model="opt-1.3b", gpus=("a100-80gb-sxm",), num_gpus=8, method="full",
                    sharding="zero2", workload="ppo", rollout_n=1, rollout_tp=1,
                    rollout_engine="deepspeed-hybrid", **RL),
    },
}
CASES = [(fw, name) for fw, reqs in REQUESTS.items() for name in reqs]


@pytest.fixture(scope="module")
def plans():
    """{(framework, case): Plan}, solved once."""
    solved = {}
    for fw, name in CASES:
        result = plan(PlanRequest(**REQUESTS[fw][name], framework=fw))
        assert result.plan is not None, (fw, name, [c.detail for c in result.conflicts])
        solved[fw, name] = result.plan
    return solved


def variant(p, **update):
    cfg = p.config.model_copy(update=update)
    return dataclasses.replace(p, config=cfg, num_gpus=cfg.num_gpus)


def body(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def argv(text: str) -> list[str]:
    return shlex.split(text.replace("\\\n", " "), comments=True)


def flags(text: str) -> dict[str, str | bool]:
    """--flag value pairs of a DeepSpeed-Chat launch (bare flags are True)."""
    tokens = argv(text)[tokens_start(text):]
    out: dict[str, str | bool] = {}
    for i, tok in enumerate(tokens):
        if tok.startswith("--"):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            out[tok] = nxt if nxt is not None and not nxt.startswith("--") else True
    return out


def tokens_start(text: str) -> int:
    return argv(text).index("main.py") + 1


# ---------------------------------------------------------------------------------------------
# NeMo-RL
# ---------------------------------------------------------------------------------------------
def nemo(p) -> dict:
    return yaml.safe_load(export_plan(p, "nemo-rl").text)


def test_nemo_rl_lora_on_one_gpu(plans):
    p = plans["nemo-rl", "lora1"]
    doc, cfg = nemo(p), p.config
    assert doc["defaults"] == "sft.yaml"
    pol = doc["policy"]
    assert pol["model_name"] == "Qwen/Qwen2.5-0.5B"
    assert pol["train_micro_batch_size"] == cfg.micro_batch_size == 2
    assert pol["train_global_batch_size"] == cfg.micro_batch_size * cfg.grad_accum * cfg.dp
    assert pol["max_total_sequence_length"] == cfg.seq_len
    lora = pol["dtensor_cfg"]["lora_cfg"]
    assert (lora["enabled"], lora["dim"], lora["alpha"]) == (True, cfg.rank, cfg.lora_alpha)
    assert pol["dtensor_cfg"]["activation_checkpointing"] is (cfg.checkpointing != "none")
    assert doc["cluster"] == {"gpus_per_node": 1, "num_nodes": 1}


def test_nemo_rl_full_sharded_and_tensor_parallel(plans):
    full = nemo(plans["nemo-rl", "full8"])
    assert "lora_cfg" not in full["policy"]["dtensor_cfg"]
    assert full["cluster"] == {"gpus_per_node": 8, "num_nodes": 1}
    p = plans["nemo-rl", "tp"]
    tp = nemo(p)
    assert tp["policy"]["dtensor_cfg"]["tensor_parallel_size"] == p.config.tp == 2
    assert tp["cluster"] == {"gpus_per_node": p.num_gpus // p.num_hosts,
                             "num_nodes": p.num_hosts}


def test_nemo_rl_pipeline_parallel_takes_the_megatron_path(plans):
    p = plans["nemo-rl", "pp"]
    pol = nemo(p)["policy"]
    assert pol["dtensor_cfg"] == {"enabled": False}
    meg = pol["megatron_cfg"]
    assert (meg["enabled"], meg["tensor_model_parallel_size"],
            meg["pipeline_model_parallel_size"]) == (True, p.config.tp, p.config.pp)
    assert meg["optimizer"]["bf16"] is True and "optimizer" not in pol
    with pytest.raises(PlannerError, match="parameter offload on the Megatron path"):
        export_plan(variant(p, offload="optimizer+params"), "nemo-rl")


def test_nemo_rl_grpo_generation(plans):
    p = plans["nemo-rl", "grpo"]
    doc, cfg = nemo(p), p.config
    assert doc["defaults"] == "grpo_math_1B.yaml"
    assert doc["grpo"] == {"num_prompts_per_step": cfg.rollout_batch,
                           "num_generations_per_prompt": cfg.samples_per_prompt}
    gen = doc["policy"]["generation"]
    assert gen["vllm_cfg"]["tensor_parallel_size"] == cfg.rollout_tp
    assert gen["colocated"]["enabled"] is True and gen["max_new_tokens"] == cfg.response_len
    sep = yaml.safe_load(export_plan(variant(p, placement="separate", rollout_gpus=1,
                                             rollout_tp=1),
                                     "nemo-rl").text)
    assert sep["policy"]["generation"]["colocated"] == {
        "enabled": False, "resources": {"gpus_per_node": 1, "num_nodes": None}}


def test_nemo_rl_refusals_and_warnings(plans):
    p = plans["nemo-rl", "lora1"]
    for update, match in ((dict(method="qlora"), "method qlora"),
                          (dict(optimizer="adamw-8bit"), "optimizer adamw-8bit"),
                          (dict(workload="rm"), "rm .NeMo-RL")):
        with pytest.raises(PlannerError, match=match):
            export_plan(variant(p, **update), "nemo-rl")
    warned = export_plan(variant(p, offload="optimizer"), "nemo-rl")
    assert any("cpu_offload moves parameters" in w for w in warned.warnings)


# ---------------------------------------------------------------------------------------------
# prime-rl
# ---------------------------------------------------------------------------------------------
def prime(p) -> dict:
    return tomllib.loads(export_plan(p, "prime-rl").text)


def test_prime_rl_sft_lora_and_full(plans):
    p = plans["prime-rl", "lora1"]
    doc, cfg = prime(p), p.config
    assert doc["model"]["name"] == "Qwen/Qwen2.5-0.5B"
    assert doc["data"]["batch_size"] == cfg.global_batch_size
    assert doc["data"]["micro_batch_size"] == cfg.micro_batch_size
    assert doc["data"]["seq_len"] == cfg.seq_len
    assert doc["model"]["lora"]["rank"] == cfg.rank
    assert doc["deployment"] == {"type": "single_node", "gpus_per_node": 1,
                                 "num_train_gpus": 1}
    full = prime(plans["prime-rl", "full8"])
    assert "lora" not in full["model"] and full["deployment"]["num_train_gpus"] == 8
    assert full["model"]["optim_cpu_offload"] is False  # prime-rl's default is on


def test_prime_rl_switches_follow_the_plan(plans):
    p = plans["prime-rl", "lora1"]
    on = prime(variant(p, checkpointing="full", offload="optimizer", compiled=True))["model"]
    assert on["ac"] == {"mode": "full"} and on["optim_cpu_offload"] is True
    assert on["compile"] == {}
    off = prime(variant(p, checkpointing="none", offload="optimizer+params"))["model"]
    assert off["ac"] == "None" and off["fsdp_cpu_offload"] is True


def test_prime_rl_grpo_sections(plans):
    p = plans["prime-rl", "grpo"]
    doc, cfg = prime(p), p.config
    infer = p.num_gpus - doc["deployment"]["num_train_gpus"]
    assert doc["deployment"]["num_infer_gpus"] == infer >= 1
    assert doc["orchestrator"]["group_size"] == cfg.samples_per_prompt
    assert doc["orchestrator"]["batch_size"] == cfg.rollout_batch * cfg.samples_per_prompt
    assert doc["orchestrator"]["train"]["sampling"]["max_completion_tokens"] == \
        cfg.response_len
    assert doc["inference"]["vllm"]["tensor_parallel_size"] == cfg.rollout_tp
    assert doc["seq_len"] == cfg.seq_len and "trainer" in doc


def test_prime_rl_refusals(plans):
    p = plans["prime-rl", "full8"]
    for update, match in ((dict(tp=2), "tensor/pipeline"), (dict(workload="dpo"), "dpo"),
                          (dict(method="qlora"), "method qlora"),
                          (dict(optimizer="adamw-8bit"), "adamw-8bit")):
        with pytest.raises(PlannerError, match=match):
            export_plan(variant(p, **update), "prime-rl")
    with pytest.raises(PlannerError, match="colocate placement"):
        export_plan(variant(plans["prime-rl", "grpo"], placement="colocate", role_gpus=None),
                    "prime-rl")


# ---------------------------------------------------------------------------------------------
# DeepSpeed-Chat
# ---------------------------------------------------------------------------------------------
def dschat(p) -> tuple[str, dict]:
    text = export_plan(p, "deepspeed-chat").text
    return text, flags(text)


def test_deepspeed_chat_supervised(plans):
    p = plans["deepspeed-chat", "lora1"]
    text, f = dschat(p)
    cfg = p.config
    assert "step1_supervised_finetuning" in text
    launch = argv(text)
    launch = launch[launch.index("deepspeed"):]
    assert launch[:5] == ["deepspeed", "--num_nodes", "1", "--num_gpus", "1"]
    assert f["--per_device_train_batch_size"] == str(cfg.micro_batch_size)
    assert f["--gradient_accumulation_steps"] == str(cfg.grad_accum)
    assert f["--max_seq_len"] == str(cfg.seq_len)
    assert f["--lora_dim"] == str(cfg.rank) and f["--only_optimize_lora"] is True
    full_text, full = dschat(plans["deepspeed-chat", "full8"])
    assert full["--zero_stage"] == "3" and "--lora_dim" not in full
    assert argv(full_text)[argv(full_text).index("--num_gpus") + 1] == "8"
    _, dpo = dschat(plans["deepspeed-chat", "dpo"])
    assert dpo["--beta"] == "0.1"


def test_deepspeed_chat_ppo(plans):
    p = plans["deepspeed-chat", "ppo"]
    text, f = dschat(p)
    cfg = p.config
    assert "step3_rlhf_finetuning" in text
    # one generation batch per log-prob pass (the plan's), the iteration's prompts in batches
    assert f["--per_device_generation_batch_size"] == str(cfg.logprob_batch)
    assert int(f["--generation_batches"]) * cfg.logprob_batch * cfg.dp == cfg.rollout_batch
    assert f["--per_device_training_batch_size"] == str(cfg.micro_batch_size)
    assert f["--actor_zero_stage"] == f["--critic_zero_stage"] == str(cfg.zero_stage)
    assert f["--max_answer_seq_len"] == str(cfg.response_len)
    assert f["--enable_hybrid_engine"] is True
    # the plan's memory frees the engine's cache while training: DeepSpeed keeps its inference
    # workspace unless --release_inference_cache is given
    assert cfg.engine_sleep and f["--release_inference_cache"] is True
    awake = flags(export_plan(variant(p, engine_sleep=False), "deepspeed-chat").text)
    assert "--release_inference_cache" not in awake
    assert "--enable_ema" not in f
    assert flags(export_plan(variant(p, ema_copy=True), "deepspeed-chat").text)["--enable_ema"]
    # actor and critic adapters share DeepSpeed-Chat's 1/rank scaling: said once
    lora = export_plan(variant(p, method="lora", lora_rank=16), "deepspeed-chat").warnings
    assert sum("lora alpha" in w for w in lora) == 1 and len(lora) == len(set(lora))


def test_deepspeed_chat_refusals(plans):
    sft, ppo = plans["deepspeed-chat", "full8"], plans["deepspeed-chat", "ppo"]
    for p, update, match in ((sft, dict(pp=2), "pipeline"),
                             (sft, dict(fsdp=True, zero_stage=0), "FSDP"),
                             (sft, dict(method="qlora"), "method qlora"),
                             (ppo, dict(rollout_n=4), "samples per prompt"),
                             (ppo, dict(rollout_tp=2), "--actor_zero_stage 3"),
                             # the hybrid engine is the actor: refused before the writer
                             (ppo, dict(placement="separate"), "--placement separate")):
        with pytest.raises(PlannerError, match=match):
            export_plan(variant(p, **update), "deepspeed-chat")
    warned = export_plan(variant(sft, offload="optimizer"), "deepspeed-chat")
    assert flags(warned.text)["--offload"] is True
    assert any("also moves the parameters" in w for w in warned.warnings)


# ---------------------------------------------------------------------------------------------
# The CLI: `planner export PLAN.json` picks the plan's framework's format
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fw,name", CASES)
def test_cli_exports_without_format(fw, name, plans, tmp_path, capsys):
    saved = tmp_path / "plan.json"
    result = plan(PlanRequest(**REQUESTS[fw][name], framework=fw))
    saved.write_text(to_json(plan_doc(result)))
    out = tmp_path / "launch"
    with pytest.raises(SystemExit) as exc:
        main(["export", "--out", str(out), str(saved)])
    capsys.readouterr()
    assert exc.value.code == 0
    text = out.read_text()
    assert text == export_plan(plans[fw, name], fw).text
    check_schema(fw, text, plans[fw, name])


def test_registry_names_the_profiles():
    assert WRITES_FOR["nemo-rl"][0] == ("nemo-rl",)
    assert WRITES_FOR["prime-rl"][1] == ("sft", "grpo")
    assert "ppo" in WRITES_FOR["deepspeed-chat"][1]


# ---------------------------------------------------------------------------------------------
# Schema checks (against tests/data/launch_schemas.json, read from the sources at the commits)
# ---------------------------------------------------------------------------------------------
def check_schema(fw: str, text: str, p) -> None:
    {"nemo-rl": nemo_schema, "prime-rl": prime_schema, "deepspeed-chat": dschat_schema}[fw](
        text, p)


def _leaves(doc: dict, prefix: str = ""):
    for key, value in doc.items():
        path = f"{prefix}{key}"
        yield path, value
        if isinstance(value, dict):
            yield from _leaves(value, f"{path}.")


def _yaml_ok(value, kind: str) -> bool:
    if kind in ("null", "interpolation"):
        return True
    if isinstance(value, bool):
        return kind == "bool"
    if isinstance(value, int | float):
        return kind in ("int", "float") and (kind == "float" or isinstance(value, int))
    return {str: "str", list: "list", dict: "table", type(None): "null"}.get(type(value)) \
        in (kind, "null")


def nemo_schema(text: str, p) -> None:
    """Schema check: every key the export sets is a key of the recipe it inherits (NeMo-RL at
    7ea279a), with a value of the recipe value's type."""
    doc = yaml.safe_load(text)
    recipe = SCHEMAS["nemo-rl"][doc.pop("defaults")]
    for path, value in _leaves(doc):
        assert path in recipe, f"{path} is not a key of the recipe"
        assert _yaml_ok(value, recipe[path]), (path, value, recipe[path])


def test_nemo_schema_check_catches_a_wrong_key(plans):
    """Schema check: the check above fails on a misspelled key and on a wrong type."""
    text = export_plan(plans["nemo-rl", "lora1"], "nemo-rl").text
    with pytest.raises(AssertionError, match="not a key"):
        nemo_schema(text.replace("train_micro_batch_size", "micro_batch_size"), None)
    with pytest.raises(AssertionError):
        nemo_schema(text.replace("precision: bfloat16", "precision: 16"), None)


_PRIME_TABLES = {  # table path -> class (file:Class), from the annotations of the sources
    "sft": {"": "sft.py:SFTConfig", "model": "trainer.py:ModelConfig",
            "model.lora": "trainer.py:LoRAConfig", "model.ac":
            "trainer.py:ActivationCheckpointConfig", "model.compile": "trainer.py:CompileConfig",
            "data": "sft.py:SFTDataConfig", "slurm": "shared.py:SlurmConfig",
            "deployment": "sft.py:{Deployment}", "optim": "trainer.py:{Optim}"},
    "rl": {"": "rl.py:RLConfig", "model": "rl.py:SharedModelConfig",
           "trainer": "trainer.py:TrainerConfig", "trainer.model": "trainer.py:ModelConfig",
           "trainer.model.lora": "trainer.py:LoRAConfig",
           "trainer.model.ac": "trainer.py:ActivationCheckpointConfig",
           "trainer.model.compile": "trainer.py:CompileConfig",
           "trainer.optim": "trainer.py:{Optim}", "deployment": "rl.py:{Deployment}",
           "orchestrator": "orchestrator.py:OrchestratorConfig",
           "orchestrator.train": "orchestrator.py:TrainConfig",
           "orchestrator.train.sampling": "orchestrator.py:TrainSamplingConfig",
           "inference": "inference.py:InferenceConfig",
           "inference.vllm": "inference.py:VllmConfig", "slurm": "shared.py:SlurmConfig"},
}


def _fields(cls: str) -> dict:
    """A class's fields with its bases' (a base looked up in its own file first)."""
    classes = SCHEMAS["prime-rl"]
    entry = classes[cls]
    fields: dict = {}
    for base in entry["bases"]:
        here = f"{cls.split(':')[0]}:{base}"
        found = here if here in classes else next(
            (k for k in classes if k.endswith(f":{base}")), None)
        if found:
            fields.update(_fields(found))
    fields.update(entry["fields"])
    return fields


def _prime_ok(value, spec: dict) -> bool:
    if "literal" in spec and value in spec["literal"]:
        return True
    ann = spec["type"]
    if value == "None":
        return "None" in ann
    if isinstance(value, bool):
        return "bool" in ann
    if isinstance(value, int):
        return "int" in ann or "float" in ann
    if isinstance(value, float):
        return "float" in ann
    if isinstance(value, list):
        return "list" in ann
    if isinstance(value, dict):
        return ann[:1].isupper()  # a config class
    return "str" in ann or "Path" in ann


def prime_schema(text: str, p) -> None:
    """Schema check: every key is a field of the pydantic class its table is read into
    (prime-rl-configs at 559b447), with a value of the field's type or Literal choices."""
    doc = tomllib.loads(text)
    tables = _PRIME_TABLES["rl" if "orchestrator" in doc else "sft"]
    for path, value in [("", doc), *_leaves(doc)]:
        if not isinstance(value, dict):
            continue
        cls = tables[path].format(
            Deployment="SingleNodeDeploymentConfig" if value.get("type") == "single_node"
            else "MultiNodeDeploymentConfig",
            Optim="AdamWConfig" if value.get("type") == "adamw" else "SGDConfig")
        fields = _fields(cls)
        for key, item in value.items():
            assert key in fields, f"{path}.{key} is not a field of {cls}"
            assert _prime_ok(item, fields[key]), (path, key, item, fields[key])


def test_prime_schema_check_catches_a_wrong_key(plans):
    """Schema check: a field the class lacks, or a value outside its Literal, fails."""
    text = export_plan(plans["prime-rl", "lora1"], "prime-rl").text
    with pytest.raises(AssertionError, match="not a field"):
        prime_schema(text.replace("micro_batch_size", "micro_batch"), None)
    with pytest.raises(AssertionError):
        prime_schema(text.replace('optimization_dtype = "float32"',
                                  'optimization_dtype = "fp32"'), None)


def dschat_schema(text: str, p) -> None:
    """Schema check: every flag is one the step's main.py defines (DeepSpeedExamples@3d83278),
    store_true flags bare, typed flags parsing as their type and within their choices."""
    step = next(s for s in SCHEMAS["deepspeed-chat"] if s in text)
    parser = SCHEMAS["deepspeed-chat"][step]
    for flag, value in flags(text).items():
        assert flag in parser, f"{flag} is not a flag of {step}/main.py"
        spec = parser[flag]
        if spec.get("action") == "store_true":
            assert value is True, flag
            continue
        assert isinstance(value, str), flag
        if spec.get("type") in ("int", "float"):
            {"int": int, "float": float}[spec["type"]](value)
        if "choices" in spec:
            assert value in spec["choices"], (flag, value)


def test_dschat_schema_check_catches_a_wrong_flag(plans):
    """Schema check: a flag main.py lacks, or a --dtype outside its choices, fails."""
    text = export_plan(plans["deepspeed-chat", "lora1"], "deepspeed-chat").text
    with pytest.raises(AssertionError, match="not a flag"):
        dschat_schema(text.replace("--lora_dim", "--lora_rank"), None)
    with pytest.raises(AssertionError):
        dschat_schema(text.replace("--dtype bf16", "--dtype fp32"), None)


@pytest.mark.parametrize("fw,workload", [("nemo-rl", "sft"), ("nemo-rl", "grpo"),
                                         ("prime-rl", "sft"), ("deepspeed-chat", "sft"),
                                         ("deepspeed-chat", "ppo")])
def test_plan_then_export_through_the_cli(fw, workload, tmp_path, capsys):
    """`planner plan --framework FW --json > p.json; planner export p.json`: the issue's
    example request (7b, $30,000; RL with 256+256 tokens) exports in FW's own format."""
    args = ["plan", "--model", "7b", "--budget", "30000", "--framework", fw, "--json",
            "--workload", workload]
    if workload in ("grpo", "ppo"):
        args += ["--prompt-len", "256", "--response-len", "256"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    saved = tmp_path / "p.json"
    saved.write_text(capsys.readouterr().out)
    assert exc.value.code == 0
    doc = json.loads(saved.read_text())
    with pytest.raises(SystemExit) as exc:
        main(["export", str(saved)])
    text = capsys.readouterr().out
    assert exc.value.code == 0, text
    assert f"--format {fw}:" in text.splitlines()[0 if fw != "deepspeed-chat" else 1]
    cfg = doc["plan"]["config"]
    if fw == "nemo-rl":
        assert yaml.safe_load(text)["policy"]["train_micro_batch_size"] == \
            cfg["micro_batch_size"]
    elif fw == "prime-rl":
        assert tomllib.loads(text)["data"]["micro_batch_size"] == cfg["micro_batch_size"]
    else:
        key = "--per_device_train" + ("ing" if workload == "ppo" else "") + "_batch_size"
        assert flags(text)[key] == str(cfg["micro_batch_size"])
    check_schema(fw, text, None)


def test_nemo_rl_separate_generation_on_several_nodes(plans):
    p = plans["nemo-rl", "grpo"]
    four = dataclasses.replace(variant(p, num_gpus=4, placement="separate", rollout_gpus=2,
                                       rollout_tp=1), num_hosts=2)
    gen = nemo(four)["policy"]["generation"]
    assert gen["colocated"]["resources"] == {"gpus_per_node": None, "num_nodes": 1}
    with pytest.raises(PlannerError, match="whole nodes"):
        export_plan(dataclasses.replace(variant(p, num_gpus=4, placement="separate",
                                                rollout_gpus=1, rollout_tp=1), num_hosts=2),
                    "nemo-rl")


def test_nemo_rl_lora_on_the_megatron_path(plans):
    p = plans["nemo-rl", "pp"]
    lora = variant(p, method="lora", lora_rank=8)
    peft = nemo(lora)["policy"]["megatron_cfg"]["peft"]
    assert peft == {"enabled": True, "dim": 8, "alpha": lora.config.lora_alpha,
                    "target_modules": ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]}
    warned = export_plan(variant(p, method="lora", lora_rank=8, lora_targets=("q", "v")),
                         "nemo-rl")
    assert yaml.safe_load(warned.text)["policy"]["megatron_cfg"]["peft"]["target_modules"] == \
        ["linear_qkv"]
    assert any("also adapt k" in w for w in warned.warnings)
    nemo_schema(warned.text, None)
