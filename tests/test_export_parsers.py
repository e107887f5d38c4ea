"""Every export of a fixed plan set, fed to the real parser of the framework version it targets
(planner.outputs.export.TARGETS): the integration tier (``python -m pytest -m integration -n 2``,
after ``bash tools/install_integration_deps.sh``).

The plans are tests/test_launchable.py's 30 requests; each is exported to every format (and
OpenRLHF layout) that does not refuse it, and each export goes to:

* DeepSpeed 0.19.8: ``deepspeed.runtime.config.DeepSpeedConfig`` (batch arithmetic, ZeRO, offload
  and precision sections), on a one-process gloo group with an ``mpu`` giving the plan's
  data-parallel size.
* Accelerate 1.15.0: ``accelerate.commands.config.config_args.load_config_from_file`` (a
  ``ClusterConfig``: unknown keys and bad enum values are errors), and the TRL arguments of the
  launch line in its header as below.
* TRL 1.16.0 (torchrun): ``TrlParser`` over the dataclasses of TRL's own script (sft.py:
  ``ScriptArguments, SFTConfig, ModelConfig``; dpo.py: ``DPOConfig``; reward_modeling.py:
  ``RewardConfig``), in a folder holding the DeepSpeed file that ``--deepspeed`` names (written by
  ``export --format deepspeed``, as the export's note says): TrainingArguments loads it and checks
  it against the arguments.
* Megatron-LM (torchrun launches of pretrain_gpt.py, for tensor/pipeline/context-parallel plans)
  at megatron-core 0.17.1, whose wheel ships megatron/training (since 0.17.0; the 0.16 and older
  wheels and sdists ship megatron.core only, no PyPI package ships it otherwise, and GitHub is
  out of reach of a machine like CI's, so ``pip install git+https://...`` fails):
  ``megatron.training.arguments.parse_args`` and ``validate_args`` with pretrain_gpt.py's
  defaults, then the microbatch calculator that ``initialize_megatron`` builds, in a child
  process, with the variables the script exports, WORLD_SIZE = the plan's GPUs and the model's
  architecture flags that the export's note asks for; the parsed parallel sizes, batch sizes and
  number of microbatches must be the plan's. The plan set has three such launches; eleven
  variants of the first reach the exporter's other flags (recompute, fp16/fp8, distributed
  optimizer, SGD, no flash attention, pretrain, TP, CP). validate_args asks the GPU's
  architecture: it is answered as a Hopper (see MEGATRON_ARCH).
* LLaMA-Factory 0.9.5: ``llamafactory.hparams.get_train_args`` on the YAML, in a child process
  whose path puts LLaMA-Factory's own pinned dependencies (transformers 5.6.0, TRL 0.24.0, PEFT
  0.18.1, Accelerate 1.11.0, datasets 4.0.0: they conflict with TRL 1.16's) before the shared
  ones, as a one-process distributed run (LOCAL_RANK=0: LLaMA-Factory refuses DeepSpeed
  otherwise), with the DeepSpeed configs from LLaMA-Factory's source distribution.
* verl 0.9.1: Hydra ``compose`` of its ``ppo_trainer.yaml`` with the overrides, then
  ``verl.utils.config.validate_config``. verl is installed without its dependencies (vLLM,
  flash-attn): ``validate_config`` imports only omegaconf, torch, ray and tensordict; its LoRA
  rank check (``get_vllm_max_lora_rank``) is compiled from its own file, whose module imports
  vLLM; the PPO critic's ``model`` member (an HFModelConfig that downloads the model's config and
  tokenizer) is dropped before validate_config, after compose has checked its keys.
* NeMo AutoModel 0.5.0 (``--format nemo-automodel``): its own ``load_yaml_config`` (which
  resolves every ``_target_``), ``RecipeConfig``'s step scheduler (built with the plan's
  data-parallel size: its gradient accumulation must be the plan's), optimizer and loss sections,
  ``parse_distributed_section`` (strategy, parallel sizes, pipeline, offload policy, activation
  checkpointing), the PEFT section instantiated as its PeftConfig and the dataset arguments bound
  to the dataset function's signature, in a child process with Automodel installed without its
  dependencies (torchao and torchdata beside it: the loader imports them). The set is the plans
  that export to it plus four plans made with ``--framework nemo-automodel``.
* OpenRLHF 0.11.2 (``--format openrlhf``) and 0.8.9 (``--format openrlhf@0.8``): the argument
  parser of the real ``openrlhf/cli/<trainer>.py``. OpenRLHF cannot be installed on a CPU machine
  (flash-attn and vLLM are hard dependencies), so the wheel is unpacked without dependencies and
  the file's ``if __name__ == "__main__":`` block (argparse definitions and the argument checks
  that follow them) is executed as written, with ``train()`` replaced by a function that keeps
  the parsed arguments and ``openrlhf.utils.config`` loaded from its own file.
* LitGPT 0.5.13 (``--format litgpt``): the parser its CLI builds (jsonargparse over the
  scripts' ``setup()``, captured from ``CLI(PARSER_DATA)``), the instantiated arguments, the
  script's own ``validate_args``, TrainArgs' accumulation (must be the plan's) and the torch
  optimizer built by ``instantiate_torch_optimizer``, in a child process with LitGPT, Lightning
  and jsonargparse from .integration/litgpt-0.5.13.
* llm-foundry 0.22.0 on Composer 0.32.1 (``--format llmfoundry``): both pin torch 2.7.0 and
  transformers 4.51, so they cannot import beside the environment's; their files are unpacked
  without dependencies and the config rules run from them (see _LLMFOUNDRY_CHILD): TrainConfig
  with update_batch_size_info (device batch, accumulation and world size must be the plan's),
  process_init_device, Composer's FSDPConfig, and the registered names and constructor
  parameters the YAML uses. These two tests export the shared plan set and the litgpt /
  llm-foundry plans of tests/test_export_litgpt_foundry.py with variants.

Where a package is missing the tests skip naming the install command.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import functools
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from planner import PlanRequest, load_catalog
from planner.catalog.request import TrainConfig
from planner.errors import PlannerError
from planner.outputs.export import export_plan
from planner.outputs.render import plan_doc
from planner.solver.result import PlanResult
from planner.solver.solve import plan
from tests.test_launchable import REQUESTS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
DEPS = ROOT / ".integration"  # tools/install_integration_deps.sh installs here
INSTALL = "bash tools/install_integration_deps.sh"
CAT = load_catalog()
FORMATS = ("deepspeed", "accelerate", "torchrun", "verl", "openrlhf", "openrlhf@0.8",
           "llamafactory")
OPENRLHF = {"openrlhf": "openrlhf-0.11.2", "openrlhf@0.8": "openrlhf-0.8.9"}
LLAMAFACTORY = DEPS / "llamafactory-0.9.5"
LLAMAFACTORY_EXAMPLES = DEPS / "llamafactory-0.9.5-examples"
VERL = DEPS / "verl-0.9.1"
MEGATRON = DEPS / "megatron-core-0.17.1"
AUTOMODEL = DEPS / "nemo-automodel-0.5.0"
# What the launch scripts' $VARIABLES stand for (paths and names: nothing is loaded).
ENV = {"DATASET": "trl-lib/Capybara", "TRAIN_FILES": "train.parquet", "VAL_FILES": "val.parquet",
       "PROMPT_DATA": "prompts.jsonl", "REWARD_MODEL": "reward-model",
       "REWARD_FUNC": "http://127.0.0.1:5000/get_reward", "MASTER_ADDR": "127.0.0.1",
       "DATA_PATH": "data_text_document", "TOKENIZER": "tokenizer"}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Nothing is downloaded: a parser that reaches for the hub fails at once."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def need(module: str, path: Path | None = None) -> None:
    """Skip, naming the install command, unless ``module`` imports (or ``path`` exists)."""
    missing = not path.exists() if path is not None else \
        importlib.util.find_spec(module) is None
    if missing:
        pytest.skip(f"{module} is not installed: run {INSTALL}")


@functools.cache
def plans() -> tuple:
    out = []
    for kw in REQUESTS:
        result = plan(PlanRequest(**kw), CAT)
        assert result.plan is not None, kw
        out.append(result.plan)
    return tuple(out)


def exports(fmt: str) -> list[tuple[int, object, str | None]]:
    """(index, plan, text or None where the format refuses the plan) for every plan."""
    rows = []
    for i, p in enumerate(plans()):
        try:
            rows.append((i, p, export_plan(p, fmt, catalog=CAT).text))
        except PlannerError:
            rows.append((i, p, None))
    return rows


def command(text: str) -> list[str]:
    """The tokens of a launch script's command (its last line), $VARIABLES filled from ENV."""
    lines = [ln for ln in text.replace("\\\n", " ").splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    filled = re.sub(r"\$\{(\w+)(?::-[^}]*)?\}|\$(\w+)",
                    lambda m: ENV[m.group(1) or m.group(2)], lines[-1])
    return shlex.split(filled)


def check_all(fmt: str, parse) -> None:
    """Feed every export of ``fmt`` to ``parse(plan, text)``; fail listing every rejection."""
    rejected, accepted = [], 0
    for i, p, text in exports(fmt):
        if text is None:
            continue
        try:
            parse(p, text)
            accepted += 1
        except BaseException as exc:  # argparse exits, asserts, ValueErrors: all rejections
            rejected.append(f"plan {i} ({p.config.workload} {p.model} on {p.num_gpus} GPUs): "
                            f"{type(exc).__name__}: {str(exc)[:300]}")
    assert not rejected, f"{fmt}: {len(rejected)} rejected:\n" + "\n".join(rejected)
    assert accepted, f"{fmt}: no plan exported"


@contextlib.contextmanager
def kept_environment():
    """os.environ and the working folder as they were (the HF parsers set variables)."""
    saved, cwd = dict(os.environ), os.getcwd()
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def on_gpu():
    """TrainingArguments refuses bf16 where no GPU has it: its check answers as on the plan's
    GPU (every GPU a plan names for bf16 has it); nothing else is changed."""
    from unittest import mock

    with mock.patch("transformers.training_args.is_torch_bf16_gpu_available", lambda: True):
        yield


# ---------------------------------------------------------------------------------------------
# DeepSpeed
# ---------------------------------------------------------------------------------------------
@functools.cache
def _deepspeed_group() -> None:
    """A one-process gloo group, so that DeepSpeedConfig asks the mpu for the data-parallel
    size (it counts one rank without a group)."""
    import deepspeed

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(29500 + os.getpid() % 1000),
                       "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"})
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)


class _DataParallel:
    """DeepSpeed's mpu interface: the plan's data-parallel ranks."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_sequence_parallel_world_size(self) -> int:
        return 1


def parse_deepspeed(p, text: str) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig

    _deepspeed_group()
    DeepSpeedConfig(json.loads(text), mpu=_DataParallel(p.config.dp))


def test_deepspeed_config_accepts_every_export():
    need("deepspeed")
    check_all("deepspeed", parse_deepspeed)


# ---------------------------------------------------------------------------------------------
# TRL (torchrun, and the launch line of the Accelerate YAML)
# ---------------------------------------------------------------------------------------------
def parse_trl(p, script: str, args: list[str], folder: Path) -> None:
    from trl import DPOConfig, ModelConfig, RewardConfig, ScriptArguments, SFTConfig, TrlParser

    config = {"sft.py": SFTConfig, "dpo.py": DPOConfig, "reward_modeling.py": RewardConfig}
    ds = [args[i + 1] for i, a in enumerate(args) if a == "--deepspeed"]
    if ds:  # the file the export's note says to write with export --format deepspeed
        (folder / ds[0]).write_text(export_plan(p, "deepspeed", catalog=CAT).text)
    with kept_environment(), on_gpu():
        os.chdir(folder)
        parser = TrlParser((ScriptArguments, config[script], ModelConfig))
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parser.parse_args_and_config(args=args)
        except SystemExit as exc:
            raise ValueError(err.getvalue().strip().splitlines()[-1]) from exc


def test_trl_parses_every_torchrun_export(tmp_path):
    need("trl")
    need("deepspeed")

    def parse(p, text):
        tokens = command(text)
        script = next(t for t in tokens if t.endswith(".py"))
        if script == "pretrain_gpt.py":
            return  # test_megatron_parses_every_torchrun_export
        parse_trl(p, script, tokens[tokens.index(script) + 1:], tmp_path)

    check_all("torchrun", parse)


# ---------------------------------------------------------------------------------------------
# Megatron-LM (the torchrun launches of tensor/pipeline/context-parallel plans)
# ---------------------------------------------------------------------------------------------
_MEGATRON_CHILD = """
import contextlib, io, json, os, sys
from unittest import mock
import megatron.training.arguments as arguments
from megatron.core import num_microbatches_calculator as microbatches
results = []
for job in json.load(sys.stdin):
    saved = dict(os.environ)
    os.environ.update(job["env"])
    sys.argv = job["argv"]
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out), \\
                mock.patch.object(arguments, "get_device_arch_version", lambda: job["arch"]):
            try:
                args = arguments.parse_args()
            except SystemExit as exc:
                raise ValueError(err.getvalue().strip().splitlines()[-1]) from exc
            arguments.validate_args(args, job["defaults"])
            # what initialize_megatron does next (set_global_variables): the batch arithmetic
            microbatches.init_num_microbatches_calculator(
                args.rank, args.rampup_batch_size, args.global_batch_size,
                args.micro_batch_size, args.data_parallel_size,
                args.decrease_batch_size_if_needed)
        report = {k: getattr(args, k) for k in job["report"]}
        results.append({**report, "num_microbatches": microbatches.get_num_microbatches()})
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        microbatches.destroy_num_microbatches_calculator()
print("RESULTS" + json.dumps(results))
"""
# pretrain_gpt.py's own call: pretrain(..., args_defaults={'tokenizer_type': 'GPT2BPETokenizer'})
# (github.com/NVIDIA/Megatron-LM/blob/core_v0.17.1/pretrain_gpt.py); its extra_args_provider is
# NVIDIA ModelOpt's, only where ModelOpt is installed.
MEGATRON_DEFAULTS = {"tokenizer_type": "GPT2BPETokenizer"}
# What validate_args computes, compared with the plan (and the calculator's num_microbatches).
MEGATRON_REPORT = ("data_parallel_size", "tensor_model_parallel_size",
                   "pipeline_model_parallel_size", "context_parallel_size", "micro_batch_size",
                   "global_batch_size", "seq_length")
# validate_args asks the GPU's architecture (get_device_arch_version: 8 Ampere, 9 Hopper, 10
# Blackwell): answered as a Hopper, the newest one on which tensor/context parallel runs
# require CUDA_DEVICE_MAX_CONNECTIONS=1; the export does not depend on the GPU.
MEGATRON_ARCH = 9


def megatron_job(model: str, num_gpus: int, text: str) -> dict:
    """One launch for the child: pretrain_gpt.py's argv, plus the model's architecture flags
    that the export's note asks the user to add, the variables the script exports, and
    torchrun's WORLD_SIZE/RANK."""
    m = CAT.models[model]
    arch = ["--num-layers", str(m.num_layers), "--hidden-size", str(m.hidden_size),
            "--num-attention-heads", str(m.num_attention_heads),
            "--ffn-hidden-size", str(m.ffn_hidden_size),
            "--max-position-embeddings", str(m.max_position_embeddings)]
    if m.num_kv_heads != m.num_attention_heads:
        arch += ["--group-query-attention", "--num-query-groups", str(m.num_kv_heads)]
    tokens = command(text)
    env = dict(re.findall(r"^export (\w+)=(\S+)$", text, re.M))
    env.update(WORLD_SIZE=str(num_gpus), RANK="0")
    return {"argv": tokens[tokens.index("pretrain_gpt.py"):] + arch, "env": env,
            "arch": MEGATRON_ARCH, "defaults": MEGATRON_DEFAULTS, "report": MEGATRON_REPORT}


def parse_megatron(jobs: list[dict], folder: Path) -> list:
    """Megatron-LM's parse_args and validate_args (megatron.training.arguments) on each job, in
    a child process (Megatron keeps global state; its imports stay out of this one), then the
    microbatch calculator that initialize_megatron builds from them: per job, the
    MEGATRON_REPORT values and num_microbatches, or the rejection."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    env.update(PYTHONPATH=str(MEGATRON), CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", _MEGATRON_CHILD],
                         input=json.dumps(jobs), capture_output=True, text=True, env=env,
                         cwd=folder, timeout=600)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert line, run.stderr[-3000:]
    return json.loads(line[len("RESULTS"):])


# Changes to the first Megatron plan of the set that reach every flag the exporter writes.
MEGATRON_VARIANTS = {
    "selective recompute": {"checkpointing": "selective"},
    "full recompute": {"checkpointing": "full"},
    "no recompute": {"checkpointing": "none"},
    "fp16": {"precision": "fp16"},
    "fp8": {"precision": "fp8"},
    "distributed optimizer": {"zero_stage": 1},
    "sgd": {"optimizer": "sgd"},
    "sgd-momentum": {"optimizer": "sgd-momentum"},
    "no flash attention": {"flash_attention": False},
    "pretrain": {"workload": "pretrain"},
    "tensor parallel 2": {"tp": 2, "pp": 1},
    "context parallel 2": {"cp": 2},
}


@functools.cache
def megatron_launches() -> tuple:
    """(name, model, num_gpus, TrainConfig, text) of every Megatron launch: the plan set's,
    then the MEGATRON_VARIANTS of its first one (exported from its edited plan document)."""
    rows = [(f"plan {i}", p.model, p.num_gpus, p.config, text)
            for i, p, text in exports("torchrun")
            if text is not None and "pretrain_gpt.py" in text]
    assert rows, "no plan of the set exports a Megatron-LM launch"
    first = next(p for _, p, text in exports("torchrun")
                 if text is not None and "pretrain_gpt.py" in text)
    base = plan_doc(PlanResult(status="optimal", plan=first))["plan"]
    for name, update in MEGATRON_VARIANTS.items():
        if all(base["config"][k] == v for k, v in update.items()):
            continue  # the plan itself
        doc = copy.deepcopy(base)
        doc["config"].update(update)
        if "precision" in update:  # the precision the plan runs in (memory.precision)
            doc["memory"]["precision"] = update["precision"]
        text = export_plan(doc, "torchrun", catalog=CAT).text
        assert text != rows[0][4], f"variant {name} writes the plan's own launch"
        cfg = TrainConfig.model_validate(doc["config"])
        rows.append((f"variant {name}", first.model, first.num_gpus, cfg, text))
    return tuple(rows)


def test_megatron_parses_every_torchrun_export(tmp_path):
    need("megatron (megatron-core-0.17.1)", MEGATRON)
    rows = megatron_launches()
    results = parse_megatron([megatron_job(m, n, text) for _, m, n, _, text in rows], tmp_path)
    wrong = []
    for (name, _, _, cfg, _), r in zip(rows, results, strict=True):
        want = {"data_parallel_size": cfg.dp, "tensor_model_parallel_size": cfg.tp,
                "pipeline_model_parallel_size": cfg.pp, "context_parallel_size": cfg.cp,
                "micro_batch_size": cfg.micro_batch_size,
                "global_batch_size": cfg.global_batch_size, "seq_length": cfg.seq_len,
                "num_microbatches": cfg.grad_accum}
        if r != want:
            wrong.append(f"{name}: {r if isinstance(r, str) else f'Megatron {r}, plan {want}'}")
    assert not wrong, f"{len(wrong)} of {len(rows)} launches:\n" + "\n".join(wrong)


def test_megatron_rejects_a_broken_launch(tmp_path):
    """The check bites: an unknown flag, the missing CUDA_DEVICE_MAX_CONNECTIONS=1 of a
    tensor-parallel run, and a global batch that the data-parallel ranks do not divide."""
    need("megatron (megatron-core-0.17.1)", MEGATRON)
    _, model, n, _, text = next(row for row in megatron_launches() if row[3].tp > 1)
    good = megatron_job(model, n, text)
    unknown, no_env, batch = (copy.deepcopy(good) for _ in range(3))
    unknown["argv"].append("--no-such-flag")
    del no_env["env"]["CUDA_DEVICE_MAX_CONNECTIONS"]
    i = batch["argv"].index("--global-batch-size") + 1
    batch["argv"][i] = str(int(batch["argv"][i]) + 1)
    results = parse_megatron([good, unknown, no_env, batch], tmp_path)
    assert isinstance(results[0], dict), results[0]
    assert "unrecognized arguments: --no-such-flag" in results[1]
    assert "CUDA_DEVICE_MAX_CONNECTIONS" in results[2]
    assert "global batch size" in results[3]


# ---------------------------------------------------------------------------------------------
# Accelerate
# ---------------------------------------------------------------------------------------------
def test_accelerate_loads_every_export(tmp_path):
    need("accelerate")
    need("trl")

    def parse(p, text):
        from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file

        path = tmp_path / "accelerate_config.yaml"
        path.write_text(text)
        with kept_environment():
            config = load_config_from_file(str(path))
        assert isinstance(config, ClusterConfig)
        assert config.num_processes == p.num_gpus and config.num_machines == p.num_hosts
        launch = [ln[4:] for ln in text.splitlines() if ln.startswith("#   ")]
        tokens = command("\n".join(launch))
        script = next(t for t in tokens if t.endswith(".py"))
        parse_trl(p, script, tokens[tokens.index(script) + 1:], tmp_path)

    check_all("accelerate", parse)


# ---------------------------------------------------------------------------------------------
# verl
# ---------------------------------------------------------------------------------------------
@functools.cache
def _verl_lora_rank_check() -> None:
    """verl.workers.rollout.vllm_rollout.utils imports vLLM (no CPU wheel); validate_config
    needs only its get_vllm_max_lora_rank, which falls back to vLLM's rank list without vLLM:
    that function is compiled from the real file into a module of the same name."""
    import typing

    name = "verl.workers.rollout.vllm_rollout.utils"
    source = VERL / (name.replace(".", "/") + ".py")
    tree = ast.parse(source.read_text())
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                and n.name == "get_vllm_max_lora_rank")
    module = types.ModuleType(name)
    module.__dict__.update(Literal=typing.Literal, get_args=typing.get_args)
    exec(compile(ast.Module(body=[func], type_ignores=[]), str(source), "exec"), module.__dict__)
    for parent in ("verl.workers.rollout", "verl.workers.rollout.vllm_rollout"):
        if parent not in sys.modules:
            package = types.ModuleType(parent)
            package.__path__ = [str(VERL / parent.replace(".", "/"))]
            sys.modules[parent] = package
    sys.modules[name] = module


def parse_verl(p, text: str) -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict
    from verl.utils.config import validate_config

    _verl_lora_rank_check()

    overrides = [t for t in command(text) if "=" in t and not t.startswith("-")]
    with initialize_config_dir(config_dir=str(VERL / "verl/trainer/config"),
                               version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    ppo = p.config.workload == "ppo"
    if ppo:  # the critic's HFModelConfig downloads the model's config and tokenizer: its
        # keys are checked by compose, the critic's own rules by validate_config without it
        with open_dict(cfg):
            cfg.critic.model = None
    with contextlib.redirect_stdout(io.StringIO()):
        validate_config(cfg, use_reference_policy=p.config.reference, use_critic=ppo)


def test_verl_composes_and_validates_every_export():
    need("verl", VERL)
    need("hydra")
    need("ray")
    need("tensordict")
    if str(VERL) not in sys.path:
        sys.path.append(str(VERL))
    check_all("verl", parse_verl)


# ---------------------------------------------------------------------------------------------
# OpenRLHF
# ---------------------------------------------------------------------------------------------
def parse_openrlhf(root: Path, argv: list[str]):
    """Run the ``__main__`` block of the real openrlhf/cli/<trainer>.py (argparse and the
    checks after it) on ``argv``; train() keeps the arguments instead of training."""
    module = next(argv[i + 1] for i, a in enumerate(argv) if a in ("-m", "--module"))
    args = argv[argv.index(module) + 1:]
    source = root / (module.replace(".", "/") + ".py")
    tree = ast.parse(source.read_text())
    main = next(n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))
    code = compile(ast.Module(body=main.body, type_ignores=[]), str(source), "exec")
    kept: dict = {}
    names = ("openrlhf", "openrlhf.utils", "openrlhf.utils.config")
    saved = {k: sys.modules.get(k) for k in names}
    argv_before = sys.argv
    try:
        for name in names[:2]:  # the packages' __init__ import torch, ray, deepspeed
            package = types.ModuleType(name)
            package.__path__ = []
            sys.modules[name] = package
        config = root / "openrlhf/utils/config.py"  # hierarchize (0.11)
        if config.exists():
            spec = importlib.util.spec_from_file_location("openrlhf.utils.config", config)
            sys.modules["openrlhf.utils.config"] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(sys.modules["openrlhf.utils.config"])
        sys.argv = [str(source), *args]
        import argparse
        from datetime import datetime

        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                exec(code, {"__name__": "__main__", "argparse": argparse, "os": os,
                            "datetime": datetime, "train": lambda a: kept.setdefault("args", a)})
        except SystemExit as exc:
            raise ValueError(err.getvalue().strip().splitlines()[-1]) from exc
    finally:
        sys.argv = argv_before
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    assert "args" in kept, "the trainer's main block did not reach train()"
    return kept["args"]


@pytest.mark.parametrize("fmt", sorted(OPENRLHF))
def test_openrlhf_parses_every_export(fmt):
    root = DEPS / OPENRLHF[fmt]
    need(f"openrlhf ({OPENRLHF[fmt]})", root)
    check_all(fmt, lambda p, text: parse_openrlhf(root, command(text)))


# ---------------------------------------------------------------------------------------------
# LLaMA-Factory
# ---------------------------------------------------------------------------------------------
_LLAMAFACTORY_CHILD = """
import json, sys
from unittest import mock
from llamafactory.hparams import get_train_args
results = []
gpu = lambda: True  # the bf16 checks answer as on the plan's GPU (see on_gpu)
with mock.patch("transformers.training_args.is_torch_bf16_gpu_available", gpu), \\
        mock.patch("llamafactory.hparams.parser.is_torch_bf16_gpu_available", gpu):
    for doc in json.load(sys.stdin):
        try:
            get_train_args(doc)
            results.append(None)
        except BaseException as exc:
            results.append(f"{type(exc).__name__}: {exc}")
print("RESULTS" + json.dumps(results))
"""


def test_llamafactory_parses_every_export(tmp_path):
    need("llamafactory", LLAMAFACTORY)
    need("llamafactory examples", LLAMAFACTORY_EXAMPLES)
    rows = [(i, p, text) for i, p, text in exports("llamafactory") if text is not None]
    docs = []
    for i, p, text in rows:
        doc = yaml.safe_load(text)
        doc["output_dir"] = str(tmp_path / f"out{i}")
        ds = doc.get("deepspeed")
        if ds and not (LLAMAFACTORY_EXAMPLES / ds).exists():  # the export's note: write it
            (tmp_path / ds).write_text(export_plan(p, "deepspeed", catalog=CAT).text)
            doc["deepspeed"] = str(tmp_path / ds)
        elif ds:
            doc["deepspeed"] = str(LLAMAFACTORY_EXAMPLES / ds)
        doc["dataset_dir"] = str(LLAMAFACTORY_EXAMPLES / "data")
        docs.append(doc)
    env = {**os.environ, "PYTHONPATH": str(LLAMAFACTORY), "LOCAL_RANK": "0", "RANK": "0",
           "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(29600 + os.getpid() % 1000), "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, "-c", _LLAMAFACTORY_CHILD], input=json.dumps(docs),
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert line, run.stderr[-3000:]
    results = json.loads(line[len("RESULTS"):])
    rejected = [f"plan {i} ({p.config.workload} {p.model}): {r[:300]}"
                for (i, p, _), r in zip(rows, results, strict=True) if r]
    assert rows and not rejected, "\n".join(rejected)


# ---------------------------------------------------------------------------------------------
# NeMo AutoModel
# ---------------------------------------------------------------------------------------------
AUTOMODEL_REQUESTS = (
    {"model": "qwen2.5-0.5b", "gpus": ("rtx-4090",), "num_gpus": 1, "method": "lora"},
    {"model": "8b", "gpus": ("h100-sxm",), "num_gpus": 8, "method": "full", "sharding": "fsdp"},
    {"model": "8b", "gpus": ("rtx-4090",), "num_gpus": 1, "method": "qlora"},
    {"model": "70b", "gpus": ("h100-sxm",), "num_gpus": 16, "method": "full", "tp": 2},
)
_AUTOMODEL_CHILD = """
import inspect, json, os, sys, tempfile
from nemo_automodel.components.config.loader import load_yaml_config
from nemo_automodel.recipes._dist_utils import parse_distributed_section
from nemo_automodel.recipes._typed_config import RecipeConfig


def parse(text, dp):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    node = load_yaml_config(f.name)
    os.unlink(f.name)
    cfg = RecipeConfig(node)
    sched = cfg.step_scheduler.build(dataloader=list(range(1000)), dp_group_size=dp,
                                     local_batch_size=node.step_scheduler.local_batch_size)
    cfg.optimizer, cfg.loss_fn
    dist = parse_distributed_section(node.distributed.to_dict())
    if node.get("peft", None) is not None:
        node.peft.instantiate()
    data = node.dataset.to_dict()
    inspect.signature(data.pop("_target_")).bind(tokenizer=None, **data)
    return {"grad_acc": sched.grad_acc_steps, "tp": dist["tp_size"], "pp": dist["pp_size"],
            "cp": dist["cp_size"], "strategy": type(dist["strategy_config"]).__name__,
            "offload": getattr(dist["strategy_config"], "offload_policy", None) is not None}


results = []
for text, dp in json.loads(sys.stdin.read()):
    try:
        results.append(parse(text, dp))
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}")
print("RESULTS" + json.dumps(results))
"""


def test_automodel_parses_every_export(tmp_path):
    need("nemo_automodel", AUTOMODEL)
    rows = [(i, p, text) for i, p, text in exports("nemo-automodel") if text is not None]
    for kw in AUTOMODEL_REQUESTS:
        p = plan(PlanRequest(**kw, framework="nemo-automodel", confidence=0), CAT).plan
        assert p is not None, kw
        rows.append((f"automodel {kw['model']}", p, export_plan(p, "nemo-automodel").text))
    docs = [(text, p.config.dp) for _, p, text in rows]
    env = {**os.environ, "PYTHONPATH": str(AUTOMODEL), "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, "-c", _AUTOMODEL_CHILD], input=json.dumps(docs),
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert line, run.stderr[-3000:]
    wrong = []
    for (i, p, _), r in zip(rows, json.loads(line[len("RESULTS"):]), strict=True):
        c = p.config
        want = {"grad_acc": c.grad_accum if c.pp == 1 else 1, "tp": c.tp, "pp": c.pp,
                "cp": c.cp, "offload": c.offload != "none"}
        if isinstance(r, str) or any(r[k] != v for k, v in want.items()):
            wrong.append(f"plan {i} ({c.workload} {p.model}): {str(r)[:300]} (want {want})")
    assert len(rows) >= 4 and not wrong, "\n".join(wrong)


def summary() -> dict[str, tuple[int, int]]:
    """(exported, refused) per format over the plan set."""
    return {fmt: (sum(t is not None for *_, t in exports(fmt)),
                  sum(t is None for *_, t in exports(fmt))) for fmt in FORMATS}


def test_the_plan_set_is_large_enough():
    assert len(plans()) >= 25
    counts = summary()
    assert all(exported for exported, _ in counts.values()), counts


def test_the_parsers_reject_a_broken_export(tmp_path):
    """The checks bite: each parser rejects one export made wrong on purpose."""
    need("deepspeed")
    need("trl")
    need("accelerate")
    i, p, text = next(row for row in exports("deepspeed") if row[2] is not None)
    doc = json.loads(text)
    doc["train_batch_size"] += 1
    with pytest.raises(BaseException, match="train_batch_size"):
        parse_deepspeed(p, json.dumps(doc))
    with pytest.raises(ValueError, match="--no_such_flag"):
        parse_trl(p, "sft.py", ["--output_dir", "out", "--no_such_flag", "1"], tmp_path)
    _, p, text = next(row for row in exports("accelerate") if row[2] is not None)
    (tmp_path / "bad.yaml").write_text(text + "no_such_key: 1\n")
    from accelerate.commands.config.config_args import load_config_from_file

    with pytest.raises(ValueError, match="no_such_key"):
        load_config_from_file(str(tmp_path / "bad.yaml"))
    root = DEPS / OPENRLHF["openrlhf"]
    if root.exists():  # the 0.8 layout is not the current release's
        _, p, text = next(row for row in exports("openrlhf@0.8") if row[2] is not None)
        with pytest.raises(ValueError, match="unrecognized arguments"):
            parse_openrlhf(root, command(text))


# ---------------------------------------------------------------------------------------------
# LitGPT and LLM Foundry: the plan set, the litgpt / llm-foundry requests of
# tests/test_export_litgpt_foundry.py and variants reaching the writers' other branches
# ---------------------------------------------------------------------------------------------
LITGPT = DEPS / "litgpt-0.5.13"
LLMFOUNDRY = DEPS / "llmfoundry-0.22.0"


@functools.cache
def framework_plans() -> tuple:
    """The shared plan set, the CLI cases' plans and variants of them (precision, optimizer,
    targets, workload, nodes) that reach the exporters' other branches."""
    from tests.test_export_litgpt_foundry import CLI_CASES, solved, variant

    own = [solved(**kw) for fmt, kw in CLI_CASES if fmt != "torchrun"]
    lit, lit_full, _, foundry_lora, foundry_full, _ = own
    extra = [variant(lit, lora_targets=("q", "v")), variant(lit, pure_bf16=True),
             variant(lit, optimizer="sgd-momentum"), variant(lit, optimizer="adafactor"),
             variant(lit, fused_optimizer=True), variant(lit_full, num_hosts=2),
             variant(lit_full, workload="pretrain", checkpointing="none"),
             variant(foundry_lora, lora_targets=("q", "k", "v"), num_gpus=2, grad_accum=8,
                     checkpointing="full"),
             variant(foundry_full, offload="optimizer+params", compiled=True),
             variant(foundry_full, num_hosts=2, workload="pretrain")]
    return (*plans(), *own, *extra)


def framework_exports(fmt: str) -> list[tuple[int, object, str]]:
    """(index, plan, text) of every plan of framework_plans() that ``fmt`` writes."""
    rows = []
    for i, p in enumerate(framework_plans()):
        try:
            rows.append((i, p, export_plan(p, fmt, catalog=CAT).text))
        except PlannerError:
            continue
    return rows


def run_child(script: str, payload: list, *, path: Path, tmp_path: Path) -> list:
    """Run ``script`` in a child process with ``path`` first on sys.path; its RESULTS line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(ROOT)]),
           "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, "-c", script, str(path)], input=json.dumps(payload),
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert line, run.stderr[-3000:]
    return json.loads(line[len("RESULTS"):])


def mismatches(rows: list, results: list, more) -> list[str]:
    """Each export the child rejected, or whose parsed accumulation, micro-batch, sequence
    length, rank count (and ``more(plan)``) differ from the plan's."""
    bad = []
    for (i, p, _), r in zip(rows, results, strict=True):
        c = p.config
        want = {"accum": c.grad_accum, "micro": c.micro_batch_size, "seq": c.seq_len,
                "ranks": p.num_gpus, **more(p)}
        if isinstance(r, str) or {k: r[k] for k in want} != want:
            bad.append(f"plan {i} ({c.workload} {c.method} {p.model}): {str(r)[:300]}")
    return bad


# LitGPT's CLI parser (jsonargparse, built by litgpt/__main__.py's CLI(PARSER_DATA)), the
# instantiated arguments, the script's own validate_args, TrainArgs' accumulation and, for
# torch optimizers, litgpt.utils.instantiate_torch_optimizer on one parameter.
_LITGPT_CHILD = """
import contextlib, io, json, sys, warnings
import torch
from jsonargparse import CLI, capture_parser
import litgpt.__main__ as main
import litgpt.finetune.full, litgpt.finetune.lora, litgpt.pretrain
from litgpt.utils import instantiate_torch_optimizer
warnings.simplefilter("ignore")
parser = capture_parser(lambda: CLI(main.PARSER_DATA, args=[]))
scripts = {"finetune_lora": litgpt.finetune.lora, "finetune_full": litgpt.finetune.full,
           "pretrain": litgpt.pretrain}
results = []
for i, (command, text) in enumerate(json.load(sys.stdin)):
    try:
        with open(f"cfg{i}.yaml", "w") as f:
            f.write(text)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                cfg = parser.parse_args([command, "--config", f"cfg{i}.yaml"])
        except SystemExit:
            raise ValueError(err.getvalue().strip().splitlines()[-1]) from None
        init = parser.instantiate_classes(cfg)[command]
        if command == "pretrain":
            scripts[command].validate_args(init.train, init.eval, init.initial_checkpoint_dir,
                                           init.resume)
        else:
            scripts[command].validate_args(init.train, init.eval)
        opt = init.optimizer
        if opt["class_path"].startswith("torch."):
            instantiate_torch_optimizer(dict(opt, init_args=dict(opt["init_args"])),
                                        [torch.nn.Parameter(torch.zeros(2))])
        results.append({"accum": init.train.gradient_accumulation_iters(init.devices,
                                                                         init.num_nodes),
                        "micro": init.train.micro_batch_size,
                        "seq": init.train.max_seq_length, "ranks": init.devices * init.num_nodes,
                        "precision": init.precision, "quantize": getattr(init, "quantize", None),
                        "lora_r": getattr(init, "lora_r", None)})
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}")
print("RESULTS" + json.dumps(results))
"""


def test_litgpt_parses_every_export(tmp_path):
    need("litgpt", LITGPT)
    rows = framework_exports("litgpt")
    payload = [[launch_of(text)[1], text] for _, _, text in rows]
    results = run_child(_LITGPT_CHILD, payload, path=LITGPT, tmp_path=tmp_path)
    rejected = mismatches(rows, results, lambda p: {
        "lora_r": p.config.rank if p.config.is_peft else None,
        "quantize": ("bnb.nf4-dq" if p.config.nf4_double_quant else "bnb.nf4")
        if p.config.method == "qlora" else None})
    assert len(rows) >= 8 and not rejected, "\n".join(rejected)
    assert {launch_of(t)[1] for *_, t in rows} == {"finetune_lora", "finetune_full", "pretrain"}


def launch_of(text: str) -> list[str]:
    """The launch line of a YAML export's header, from its command on."""
    line = next(ln for ln in text.splitlines() if ln.startswith("# launch:"))
    tokens = line.removeprefix("# launch:").split()
    start = next(i for i, t in enumerate(tokens) if t in ("litgpt", "composer"))
    return tokens[start:]


# LLM Foundry's own config rules, run from its files in the 0.22.0 wheel: llmfoundry/utils/
# config_utils.py (TrainConfig, make_dataclass_and_log_config with update_batch_size_info, as
# scripts/train/train.py calls it, then process_init_device) executed with its unrelated
# imports (mlflow, Composer's logger, the model and layer registries) stubbed and Composer's
# dist answering the plan's world size; Composer 0.32.1's FSDPConfig (composer/utils/
# parallelism.py) built from fsdp_config; the names the YAML picks looked up among the
# register('...') calls of llmfoundry's packages; the model and loader keys among the
# parameters of ComposerHFCausalLM.__init__ and the dataloader builders. PEFT's LoraConfig and
# the dataset keys are not checked (PEFT and the data stack are not installed here).
_LLMFOUNDRY_CHILD = """
import ast, importlib.util, json, re, sys, types
from pathlib import Path
import yaml
from omegaconf import OmegaConf as om
root = Path(sys.argv[1])
world = {"size": 1}
def stub(name, **attrs):
    mod = sys.modules.setdefault(name, types.ModuleType(name))
    mod.__dict__.update(attrs)
    return mod
stub("mlflow"); stub("mlflow.data", delta_dataset_source=None, http_dataset_source=None,
                     huggingface_dataset_source=None, uc_volume_dataset_source=None)
stub("composer"); stub("composer.loggers", Logger=object)
stub("composer.utils", dist=types.SimpleNamespace(get_world_size=lambda: world["size"]),
     parse_uri=None)
stub("llmfoundry"); stub("llmfoundry.layers_registry", ffns_with_megablocks=[])
stub("llmfoundry.models"); stub("llmfoundry.models.utils", init_empty_weights=None)
stub("llmfoundry.registry", config_transforms=None)
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
cu = load("llmfoundry.utils.config_utils", root / "llmfoundry/utils/config_utils.py")
par = load("composer.utils.parallelism", root / "composer/utils/parallelism.py")
registered = {}
for init in (root / "llmfoundry").rglob("__init__.py"):
    for reg, name in re.findall(r"(\\w+)\\.register\\(\\s*'([\\w-]+)'", init.read_text()):
        registered.setdefault(reg, set()).add(name)
def params(path, func):
    tree = ast.parse((root / path).read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func)
    return {a.arg for a in node.args.args + node.args.kwonlyargs}
model_keys = params("llmfoundry/models/hf/hf_causal_lm.py", "__init__")
loader_keys = {"finetuning": params("llmfoundry/data/finetuning/dataloader.py",
                                    "build_finetuning_dataloader"),
               "text": params("llmfoundry/data/text_data.py", "build_text_dataloader")}
results = []
for gpus, text in json.load(sys.stdin):
    world["size"] = gpus
    try:
        doc = yaml.safe_load(text)
        _, cfg = cu.make_dataclass_and_log_config(om.create(doc), cu.TrainConfig,
                                                  cu.TRAIN_CONFIG_KEYS,
                                                  transforms=[cu.update_batch_size_info])
        cu.process_init_device(cfg.model, cfg.fsdp_config, cfg.tp_config)
        if cfg.fsdp_config is not None:
            par.FSDPConfig(**cfg.fsdp_config)
        picked = {"models": cfg.model["name"], "optimizers": cfg.optimizer["name"],
                  "schedulers": cfg.scheduler["name"], "dataloaders": cfg.train_loader["name"],
                  **{"algorithms": a for a in (cfg.algorithms or {})}}
        unknown = [f"{r} {n}" for r, n in picked.items() if n not in registered.get(r, ())]
        unknown += sorted(set(cfg.model) - model_keys - {"name"})
        unknown += sorted(set(cfg.train_loader) - loader_keys[cfg.train_loader["name"]]
                          - {"name"})
        assert not unknown, f"not in llm-foundry 0.22.0: {unknown}"
        results.append({"accum": cfg.device_train_grad_accum,
                        "micro": cfg.device_train_microbatch_size, "ranks": cfg.n_gpus,
                        "seq": cfg.max_seq_len, "precision": cfg.precision})
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}")
print("RESULTS" + json.dumps(results))
"""


def test_llmfoundry_config_rules_accept_every_export(tmp_path):
    need("llm-foundry", LLMFOUNDRY)
    rows = framework_exports("llmfoundry")
    payload = [[p.num_gpus, text] for _, p, text in rows]
    results = run_child(_LLMFOUNDRY_CHILD, payload, path=LLMFOUNDRY, tmp_path=tmp_path)
    rejected = mismatches(rows, results, lambda p: {})
    assert len(rows) >= 6 and not rejected, "\n".join(rejected)


def test_litgpt_and_llmfoundry_checks_reject_a_broken_export(tmp_path):
    """The checks bite: an unknown key, and a batch the world size does not divide."""
    need("litgpt", LITGPT)
    need("llm-foundry", LLMFOUNDRY)
    _, _, text = framework_exports("litgpt")[0]
    bad = run_child(_LITGPT_CHILD, [[launch_of(text)[1], text + "no_such_key: 1\n"]],
                    path=LITGPT, tmp_path=tmp_path)
    assert isinstance(bad[0], str) and "no_such_key" in bad[0]
    _, p, text = next(row for row in framework_exports("llmfoundry") if row[1].num_gpus > 1)
    broken = [[p.num_gpus, text + "no_such_key: 1\n"],
              [p.num_gpus, text.replace(f"global_train_batch_size: "
                                        f"{p.config.global_batch_size}",
                                        f"global_train_batch_size: "
                                        f"{p.config.global_batch_size + 1}")]]
    bad = run_child(_LLMFOUNDRY_CHILD, broken, path=LLMFOUNDRY, tmp_path=tmp_path)
    assert "no_such_key" in bad[0] and "not divisible" in bad[1]
