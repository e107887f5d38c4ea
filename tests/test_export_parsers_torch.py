"""torchtune and torchtitan exports fed to the frameworks' own config readers at the targeted
releases (integration tier: ``bash tools/install_integration_deps.sh`` then
``python -m pytest -m integration``); a part of tests/test_export_parsers.py's tier, in a file of
its own.

* torchtune 0.6.1 (installed without dependencies into .integration/torchtune-0.6.1, with the
  ones its config code imports, torchao 0.13.0 among them, in .integration/torchtune-0.6.1-deps):
  the YAML is loaded with OmegaConf as ``tune run`` does, ``torchtune.config.validate`` binds
  every component's keys to the signature of the builder, tokenizer, checkpointer, optimizer,
  loss and dataset it names (a misspelled or unknown key fails), the recipe of the launch line is
  one of ``tune ls``'s (torchtune._recipe_registry) and every ``cfg.<key>`` the recipe file
  itself reads (the wheel's recipes/<recipe>.py, read with ast) is in the config.
* torchtitan 0.2.2 (into .integration/torchtitan-0.2.2 with tyro; docstring-parser and typeguard
  in .integration/tyro-deps): its ``ConfigManager.parse_args(["--job.config_file", FILE])``
  (unknown keys and wrong types fail), then ``ParallelDims`` with WORLD_SIZE = the plan's GPUs
  (the product of the degrees must be the world size), the Trainer's batch check
  (torchtitan/train.py at v0.2.2: global_batch_size divisible by local_batch_size x the batch
  mesh) and the pipeline's (distributed/pipeline_parallel.py: local batch divisible by the
  micro-batch size); the model's name is one of torchtitan/models/__init__.py's and its flavor
  a key of that model's __init__.py. torchtitan's package __init__ imports Triton (MoE kernels),
  which has no CPU wheel here: the child process registers the package without running it and
  imports its config and parallel-dims modules from their files.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib

import pytest
import yaml

from planner import PlanRequest
from planner.errors import PlannerError
from planner.outputs.export import export_plan
from planner.solver.solve import plan
from tests.test_export_parsers import CAT, DEPS, need, plans
from tests.test_export_torch import CLI_PLANS, variant

pytestmark = pytest.mark.integration

TORCHTUNE = DEPS / "torchtune-0.6.1"
TORCHTUNE_DEPS = DEPS / "torchtune-0.6.1-deps"
TORCHTITAN = DEPS / "torchtitan-0.2.2"
TYRO_DEPS = DEPS / "tyro-deps"


def _cli_plans() -> list:
    out = []
    for framework, args in CLI_PLANS:
        kw = dict(zip(args[::2], args[1::2], strict=True))
        request = {"model": kw["--model"], "gpus": (kw["--gpus"],),
                   "num_gpus": int(kw["--num-gpus"]), "framework": framework}
        for flag, key in (("--method", "method"), ("--workload", "workload")):
            if flag in kw:
                request[key] = kw[flag]
        if "--tp" in kw:
            request["tp"] = int(kw["--tp"])
        result = plan(PlanRequest(**request), CAT)
        assert result.plan is not None, request
        out.append(result.plan)
    return out


def plan_set(fmt: str) -> list[tuple[str, object, str]]:
    """(label, plan, text) of every export of ``fmt``: the CLI plans, variants reaching the
    writer's other branches, and the shared plan set's plans the format does not refuse."""
    base = _cli_plans()
    tune, titan = base[0], base[4]
    extra = {"torchtune": [
        variant(tune, fsdp=False), variant(tune, method="dora"),
        variant(tune, workload="dpo"), variant(tune, workload="dpo", fsdp=False),
        variant(tune, workload="dpo", method="full", lora_rank=None),
        variant(tune, method="full", lora_rank=None, fsdp=False, optimizer_in_backward=True,
                grad_accum=1),
        variant(base[1], tp=2, offload="none"), variant(tune, optimizer="sgd-momentum"),
    ], "torchtitan": [
        variant(titan, fsdp=False), variant(titan, checkpointing="selective"),
        variant(titan, workload="pretrain", num_gpus=16, tp=2, pp=2, grad_accum=8,
                micro_batch_size=2, num_hosts=2),
        variant(titan, pure_bf16=True, compiled=True),
        variant(titan, workload="pretrain", num_gpus=16, grad_accum=4, dp_shard=8, num_hosts=2),
    ]}[fmt]
    rows = []
    for i, p in enumerate([*base, *extra, *plans()]):
        try:
            text = export_plan(p, fmt, catalog=CAT).text
        except PlannerError:
            continue
        rows.append((f"plan {i} ({p.config.workload} {p.model} on {p.num_gpus} GPUs)", p, text))
    return rows


def launch_tokens(text: str) -> list[str]:
    """The launch line of the file's header comment."""
    lines = text.split("# launch:\n", 1)[1].split("\n")
    return shlex.split(" ".join(ln.removeprefix("#   ").removesuffix("\\") for ln in lines
                                if ln.startswith("#   ")))


def _child(script: str, jobs: list[dict], path: list[str], cwd) -> list:
    """Run ``script`` (argv[1]: the first folder of ``path``) on ``jobs``; its results."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, "-c", script, path[0]], input=json.dumps(jobs),
                         capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert line, run.stderr[-3000:]
    return json.loads(line[len("RESULTS"):])


def _check(rows, results) -> None:
    rejected = [f"{label}: {r[:400]}" for (label, _, _), r in zip(rows, results, strict=True)
                if r]
    assert rows and not rejected, "\n".join(rejected)


# ---------------------------------------------------------------------------------------------
# torchtune 0.6.1
# ---------------------------------------------------------------------------------------------
_TORCHTUNE_CHILD = """
import ast, json, os, sys
from omegaconf import OmegaConf
from torchtune import config
from torchtune._recipe_registry import get_all_recipes
import torchtune
recipes_dir = os.path.join(os.path.dirname(os.path.dirname(torchtune.__file__)), "recipes")
names = {r.name for r in get_all_recipes()}

def read_keys(recipe):
    tree = ast.parse(open(os.path.join(recipes_dir, recipe + ".py")).read())
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "cfg"
            and n.attr not in ("get", "items", "keys")}

results = []
for job in json.load(sys.stdin):
    try:
        assert job["recipe"] in names, f"recipe {job['recipe']} is not one of tune ls's"
        cfg = OmegaConf.load(job["path"])
        config.validate(cfg)
        missing = read_keys(job["recipe"]) - set(cfg.keys())
        assert not missing, f"{job['recipe']} reads cfg.{sorted(missing)} the config lacks"
        results.append(None)
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}")
print("RESULTS" + json.dumps(results))
"""


def _torchtune_recipe(text: str) -> str:
    tokens = launch_tokens(text)
    return tokens[tokens.index("--config") - 1]


def test_torchtune_validates_every_export(tmp_path):
    need("torchtune", TORCHTUNE)
    need("torchtune's dependencies (torchao)", TORCHTUNE_DEPS)
    rows = plan_set("torchtune")
    jobs = []
    for n, (_, _, text) in enumerate(rows):
        path = tmp_path / f"torchtune{n}.yaml"
        path.write_text(text)
        jobs.append({"path": str(path), "recipe": _torchtune_recipe(text)})
    results = _child(_TORCHTUNE_CHILD, jobs, [str(TORCHTUNE), str(TORCHTUNE_DEPS)], tmp_path)
    _check(rows, results)
    assert len(rows) >= 10


def test_torchtune_rejects_a_broken_export(tmp_path):
    need("torchtune", TORCHTUNE)
    need("torchtune's dependencies (torchao)", TORCHTUNE_DEPS)
    _, _, text = plan_set("torchtune")[0]
    doc = yaml.safe_load(text)
    doc["model"]["lora_rnak"] = 8
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    del doc["model"]["lora_rnak"], doc["resume_from_checkpoint"]
    lacking = tmp_path / "lacking.yaml"
    lacking.write_text(yaml.safe_dump(doc))
    jobs = [{"path": str(bad), "recipe": _torchtune_recipe(text)},
            {"path": str(lacking), "recipe": _torchtune_recipe(text)},
            {"path": str(lacking), "recipe": "lora_finetune_everywhere"}]
    results = _child(_TORCHTUNE_CHILD, jobs, [str(TORCHTUNE), str(TORCHTUNE_DEPS)], tmp_path)
    assert "lora_rnak" in results[0]
    assert "resume_from_checkpoint" in results[1]
    assert "is not one of tune ls's" in results[2]


# ---------------------------------------------------------------------------------------------
# torchtitan 0.2.2
# ---------------------------------------------------------------------------------------------
_TORCHTITAN_CHILD = """
import json, os, re, sys, types
root = os.path.join(sys.argv[1], "torchtitan")
package = types.ModuleType("torchtitan")
package.__path__ = [root]  # its __init__ imports Triton: registered, not run
sys.modules["torchtitan"] = package
from torchtitan.config.manager import ConfigManager
from torchtitan.distributed.parallel_dims import ParallelDims
models = re.search(r"_supported_models = frozenset\\(\\s*\\[([^\\]]*)\\]",
                   open(os.path.join(root, "models", "__init__.py")).read()).group(1)
supported = set(re.findall(r'"(\\w+)"', models))
results = []
for job in json.load(sys.stdin):
    try:
        cfg = ConfigManager().parse_args(["--job.config_file", job["path"]])
        par, train, model = cfg.parallelism, cfg.training, cfg.model
        assert model.name in supported, f"model {model.name} not in {sorted(supported)}"
        flavors = open(os.path.join(root, "models", model.name, "__init__.py")).read()
        assert f'"{model.flavor}":' in flavors, f"no flavor {model.flavor} of {model.name}"
        dims = ParallelDims(dp_replicate=par.data_parallel_replicate_degree,
                            dp_shard=par.data_parallel_shard_degree,
                            cp=par.context_parallel_degree, tp=par.tensor_parallel_degree,
                            pp=par.pipeline_parallel_degree, ep=par.expert_parallel_degree,
                            etp=par.expert_tensor_parallel_degree,
                            world_size=job["world_size"])
        batch = dims.dp_replicate * dims.dp_shard
        assert train.global_batch_size % (train.local_batch_size * batch) == 0, "batch"
        accum = train.global_batch_size // (train.local_batch_size * batch)
        if dims.pp > 1:
            assert train.local_batch_size % par.pipeline_parallel_microbatch_size == 0
            accum *= train.local_batch_size // par.pipeline_parallel_microbatch_size
        results.append(None if accum == job["accum"] and batch == job["dp"] else
                       f"accumulation {accum} x dp {batch}: the plan's {job['accum']} x "
                       f"{job['dp']}")
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}")
print("RESULTS" + json.dumps(results))
"""


def _torchtitan_jobs(rows, tmp_path) -> list[dict]:
    jobs = []
    for n, (_, p, text) in enumerate(rows):
        path = tmp_path / f"torchtitan{n}.toml"
        path.write_text(text)
        jobs.append({"path": str(path), "world_size": p.num_gpus,
                     "accum": p.config.grad_accum, "dp": p.config.dp})
    return jobs


def test_torchtitan_parses_every_export(tmp_path):
    need("torchtitan", TORCHTITAN)
    need("tyro's dependencies", TYRO_DEPS)
    rows = plan_set("torchtitan")
    results = _child(_TORCHTITAN_CHILD, _torchtitan_jobs(rows, tmp_path),
                     [str(TORCHTITAN), str(TYRO_DEPS)], tmp_path)
    _check(rows, results)
    assert len(rows) >= 7


def test_torchtitan_rejects_a_broken_export(tmp_path):
    need("torchtitan", TORCHTITAN)
    need("tyro's dependencies", TYRO_DEPS)
    label, p, text = next(row for row in plan_set("torchtitan")
                          if tomllib.loads(row[2])["parallelism"]["data_parallel_shard_degree"] > 1)
    rows = [(label, p, text + "\n[training]\nno_such_key = 1\n"),
            (label, p, text.replace("data_parallel_shard_degree = ",
                                    "data_parallel_shard_degree = 3"))]
    jobs = _torchtitan_jobs(rows, tmp_path)
    results = _child(_TORCHTITAN_CHILD, jobs, [str(TORCHTITAN), str(TYRO_DEPS)], tmp_path)
    assert all(results), results
    assert "Invalid parallel dims" in results[1] or "batch" in results[1], results[1]
