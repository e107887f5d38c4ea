"""The Axolotl and ms-swift exports fed to the frameworks' own parsers at the versions they
target (integration tier: ``bash tools/install_integration_deps.sh``, then ``python -m pytest -m
integration -n 2``). The plans: tests/test_launchable.py's set plus requests made with
``--framework axolotl`` / ``ms-swift``; each plan is exported to both formats, refusals aside.

* Axolotl 0.18.0: ``axolotl.utils.config.validate_config`` (its pydantic schema with every
  validator, AxolotlConfigWCapabilities) on the YAML, with the plan's GPU count and nodes as
  its capabilities, in a child process (Axolotl is installed without its dependencies in
  .integration/axolotl-0.18.0), in a folder holding Axolotl's own deepspeed_configs/ (from its
  source distribution) and the DeepSpeed files the export's note asks for. The validated
  config's batch, sequence, adapter and parallel keys must be the plan's.
* ms-swift 4.5.2: transformers' HfArgumentParser over ms-swift's own argument dataclasses
  (PretrainArguments for ``swift pt``, SftArguments for ``swift sft``, RLHFArguments for
  ``swift rlhf``) parses the command line of the script: unknown flags, wrong types and values
  outside a Literal's choices are errors. The dataclasses are not constructed: their
  __post_init__ loads the model's config and tokenizer from the hub (this tier is offline). A
  --deepspeed preset must be a file in the installed swift/config/, an --fsdp value the fsdp2
  preset or JSON that ms-swift's json_parse_to_dict reads.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner import PlanRequest, load_catalog
from planner.errors import PlannerError
from planner.outputs.export import export_plan
from planner.solver.solve import plan
from tests.test_launchable import REQUESTS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
DEPS = ROOT / ".integration"
AXOLOTL = DEPS / "axolotl-0.18.0"
AXOLOTL_DS = DEPS / "axolotl-0.18.0-deepspeed"
SWIFT = DEPS / "ms-swift-4.5.2"
INSTALL = "bash tools/install_integration_deps.sh"
CAT = load_catalog()
RL = dict(prompt_len=256, response_len=256, rollout_batch=32)
OWN = [
    dict(model="1.5b", method="lora", budget_usd=3000),
    dict(model="8b", method="full", sharding="fsdp", budget_usd=50000, objective="time",
         tokens=1e8),
    dict(model="8b", method="qlora", budget_usd=3000),
    dict(model="70b", budget_usd=60000, objective="time", tokens=5e8),
    dict(model="1.5b", workload="dpo", budget_usd=10000),
    dict(model="1.5b", workload="rm", budget_usd=10000),
    dict(model="7b", workload="pretrain", method="full", pricing="rent", tokens=1e9,
         objective="time", budget_usd=20000),
    dict(model="0.5b", workload="grpo", budget_usd=50000, num_gpus=8, **RL),
    dict(model="8b", method="full", sharding="zero2", budget_usd=50000, objective="time",
         tokens=1e8),
]


def need(path: Path) -> None:
    if not (path / ".complete").exists():
        pytest.skip(f"{path.name} is not installed: run {INSTALL}")


@functools.cache
def plans() -> tuple:
    out = []
    for kw in REQUESTS:
        out.append(plan(PlanRequest(**kw), CAT).plan)
    for framework in ("axolotl", "ms-swift"):
        for kw in OWN:
            if framework == "axolotl" or kw.get("workload") != "ppo":
                out.append(plan(PlanRequest(framework=framework, **kw), CAT).plan)
    assert all(p is not None for p in out)
    return tuple(out)


def exports(fmt: str) -> list[tuple[int, object, str]]:
    rows = []
    for i, p in enumerate(plans()):
        try:
            rows.append((i, p, export_plan(p, fmt, catalog=CAT).text))
        except PlannerError:
            continue
    assert len(rows) >= 20, f"{fmt}: only {len(rows)} plans exported"
    return rows


def child(code: str, payload: object, *, path: Path, cwd: Path) -> list:
    """Run ``code`` in a child process with ``path`` first on its path; its RESULTS line."""
    env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{ROOT}", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload),
                         capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert line, run.stderr[-3000:]
    return json.loads(line[len("RESULTS"):])


def check(rows, results, expect) -> None:
    """Every parser result is accepted and holds the values ``expect(config)`` gives; fail
    listing every rejection and every mismatch."""
    rejected, wrong = [], []
    for (i, p, _), r in zip(rows, results, strict=True):
        if isinstance(r, str):
            rejected.append(f"plan {i} ({p.config.workload} {p.model}): {r[:400]}")
            continue
        want = expect(p.config)
        got = {k: r[k] for k in want}
        if got != want:
            wrong.append(f"plan {i}: {got} != {want}")
    assert not rejected, "\n".join(rejected)
    assert not wrong, "\n".join(wrong)


# ---------------------------------------------------------------------------------------------
# Axolotl
# ---------------------------------------------------------------------------------------------
_AXOLOTL_CHILD = """
import json, sys
import torch
from axolotl.utils.config import validate_config
from axolotl.utils.dict import DictDefault
KEYS = ("micro_batch_size", "gradient_accumulation_steps", "sequence_len", "adapter", "lora_r",
        "load_in_4bit", "tensor_parallel_size", "context_parallel_size", "dp_shard_size",
        "fsdp_version", "deepspeed", "rl", "reward_model", "bf16", "fp16")
env = {"torch_version": torch.__version__.split("+")[0]}
results = []
for doc, caps in json.load(sys.stdin):
    try:
        cfg = validate_config(DictDefault(doc), capabilities=caps, env_capabilities=env)
        results.append({k: (str(cfg.get(k)) if k in ("rl", "deepspeed") and cfg.get(k)
                            else cfg.get(k)) for k in KEYS})
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}")
print("RESULTS" + json.dumps(results))
"""


def axolotl_payload(rows, folder: Path) -> list:
    (folder / "deepspeed_configs").symlink_to(AXOLOTL_DS / "deepspeed_configs")
    payload = []
    for _, p, text in rows:
        doc = yaml.safe_load(text)
        ds = doc.get("deepspeed")
        if ds and not (folder / ds).exists():  # the export's note: write it with planner
            (folder / ds).write_text(export_plan(p, "deepspeed", catalog=CAT).text)
        caps = {"bf16": p.memory.precision in ("bf16", "fp8") or p.config.precision == "bf16",
                "n_gpu": p.num_gpus, "n_node": p.num_hosts, "compute_capability": "sm_90"}
        payload.append((doc, caps))
    return payload


def test_axolotl_validates_every_export(tmp_path):
    need(AXOLOTL)
    need(AXOLOTL_DS)
    rows = exports("axolotl")
    results = child(_AXOLOTL_CHILD, axolotl_payload(rows, tmp_path), path=AXOLOTL, cwd=tmp_path)
    check(rows, results, lambda c: {
        "micro_batch_size": c.micro_batch_size, "gradient_accumulation_steps": c.grad_accum,
        "sequence_len": c.seq_len, "lora_r": c.rank if c.is_peft else None,
        "tensor_parallel_size": c.tp})


def test_axolotl_rejects_a_broken_export(tmp_path):
    need(AXOLOTL)
    need(AXOLOTL_DS)
    rows = exports("axolotl")[:1]
    payload = axolotl_payload(rows, tmp_path)
    payload[0][0]["micro_batch_size"] = "two"
    payload.append((dict(payload[0][0], micro_batch_size=1, rl="ppo"), payload[0][1]))
    results = child(_AXOLOTL_CHILD, payload, path=AXOLOTL, cwd=tmp_path)
    assert all(isinstance(r, str) for r in results), results
    assert "micro_batch_size" in results[0] and "rl" in results[1]


# ---------------------------------------------------------------------------------------------
# ms-swift
# ---------------------------------------------------------------------------------------------
_SWIFT_CHILD = """
import contextlib, io, json, os, sys
from transformers import HfArgumentParser
import swift
from swift.arguments import PretrainArguments, RLHFArguments, SftArguments
from swift.utils import json_parse_to_dict
CLASSES = {"pt": PretrainArguments, "sft": SftArguments, "rlhf": RLHFArguments}
CONFIG = os.path.join(os.path.dirname(swift.__file__), "config")
KEYS = ("per_device_train_batch_size", "gradient_accumulation_steps", "max_length",
        "tuner_type", "lora_rank", "quant_bits", "rlhf_type", "deepspeed", "fsdp",
        "sequence_parallel_size", "num_generations")
results = []
for command, argv in json.load(sys.stdin):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = HfArgumentParser([CLASSES[command]]).parse_args(argv)
        ds = ns.deepspeed
        if ds and not ds.endswith(".json"):
            assert os.path.exists(os.path.join(CONFIG, ds + ".json")), f"no preset {ds}"
        if ns.fsdp and ns.fsdp != "fsdp2":
            assert "fsdp_config" in json_parse_to_dict(ns.fsdp), ns.fsdp
        results.append({k: getattr(ns, k, None) for k in KEYS})
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc} {err.getvalue()[-300:]}")
print("RESULTS" + json.dumps(results))
"""
VARS = {"$DATASET": "data.jsonl", "$REWARD_MODEL": "reward-model", "$VLLM_HOST": "127.0.0.1"}


def swift_argv(text: str) -> tuple[str, list[str]]:
    """(swift subcommand, its arguments) of the script's command line, variables filled."""
    lines = [ln for ln in text.replace("\\\n", " ").splitlines()
             if ln.strip() and not ln.startswith("#")]
    tokens = [VARS.get(t, t) for t in shlex.split(lines[-1])]
    assert tokens[0] == "swift", tokens[:2]
    return tokens[1], tokens[2:]


def test_ms_swift_parses_every_export(tmp_path):
    need(SWIFT)
    rows = exports("ms-swift")
    results = child(_SWIFT_CHILD, [swift_argv(t) for *_, t in rows], path=SWIFT, cwd=tmp_path)
    check(rows, results, lambda c: {
        "per_device_train_batch_size": c.micro_batch_size,
        "gradient_accumulation_steps": c.grad_accum,
        "max_length": c.prompt_len if c.is_rl else c.seq_len,
        "tuner_type": "full" if c.method == "full" else "lora",
        "lora_rank": c.rank if c.is_peft else 8,  # TunerArguments.lora_rank = 8 when unset
        "sequence_parallel_size": c.cp})


def test_ms_swift_rejects_a_broken_export(tmp_path):
    need(SWIFT)
    command, argv = swift_argv(exports("ms-swift")[0][2])
    broken = [(command, [*argv, "--quant_bits", "5"]), (command, [*argv, "--no_such_flag", "1"]),
              (command, [*argv, "--deepspeed", "zero4"])]
    results = child(_SWIFT_CHILD, broken, path=SWIFT, cwd=tmp_path)
    assert all(isinstance(r, str) for r in results), results
    assert "quant_bits" in results[0] and "no_such_flag" in results[1]
    assert "zero4" in results[2]
