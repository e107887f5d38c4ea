"""Hardening (issue 6, section 4): no input crashes the CLI, errors are one line naming the bad
value, returned plans pass check_plan, output is deterministic, --time-limit is a status.

The property tests draw command lines from plausible and nonsense values (zero, negative, huge,
nan/inf, non-numbers, unknown names, RL/preference options on SFT) and run ``planner.cli.main``
in-process. Hypothesis runs derandomized (tests/conftest.py), so every run draws the same cases.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planner.solver.stages as stages_mod
from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.cli import main
from planner.solver.solve import plan
from planner.solver.space import build_space
from planner.solver.stages import check_plan

ROOT = Path(__file__).resolve().parents[1]
TEST_CATALOG = str(ROOT / "tests" / "data" / "catalog")
FAST = settings(derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def run_cli(argv: list[str]) -> tuple[object, str, str]:
    """(exit code, stdout, stderr) of ``planner argv``; any other exception propagates (a
    traceback is the bug these tests look for)."""
    out, err = io.StringIO(), io.StringIO()
    code: object = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


_SEEN: dict[tuple[str, ...], tuple[object, str, str]] = {}


def run_once(argv: list[str]) -> tuple[object, str, str]:
    """run_cli, once per distinct command line (hypothesis draws some twice; output is
    deterministic, tested below)."""
    key = tuple(argv)
    if key not in _SEEN:
        _SEEN[key] = run_cli(argv)
    return _SEEN[key]


def assert_clean_exit(argv: list[str], code: object, out: str, err: str) -> None:
    """Exit 0/1/2; exit 2 is exactly one stderr line naming a flag or value the user gave."""
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err + out
    if code == 2:
        assert err.startswith("planner: error: ") and err.count("\n") == 1, (argv, err)
        given_flags = [a for a in argv if a.startswith("--")]
        given_values = [a for a in argv if not a.startswith("--") and a]
        named = any(f in err for f in given_flags) or any(v in err for v in given_values)
        assert named, (argv, err)
    else:
        assert out.strip(), argv


# --- values: mostly plausible, else boundary or nonsense ---------------------------------------
NONSENSE = st.sampled_from(["abc", "1e", "--", "-", "0x10", "1,5", "NaN", "nan", "inf", "-inf",
                            "1e400", "¿?", " 3", ""])
BAD_INTS = st.sampled_from(["0", "-1", "-7", "1000000", str(10**20), str(2**63), "65537",
                            "2.5", "2147483647", "²", "9" * 400]) | NONSENSE
BAD_FLOATS = st.floats(allow_nan=True, allow_infinity=True).map(repr) | st.sampled_from(
    ["0", "-0.0", "-5", "1e-300", "1e300"]) | NONSENSE


def mostly(plausible: list, bad: st.SearchStrategy) -> st.SearchStrategy:
    """A plausible value four times in five, else a boundary or nonsense one."""
    good = st.sampled_from([str(v) for v in plausible])
    return st.integers(0, 4).flatmap(lambda i: bad if i == 0 else good)


def ints(*plausible: int) -> st.SearchStrategy:
    return mostly(list(plausible), BAD_INTS)


def floats(*plausible: float) -> st.SearchStrategy:
    return mostly(list(plausible), BAD_FLOATS)


def choice(*values: str) -> st.SearchStrategy:
    """Valid choices, and one nonsense word, as the last value."""
    return mostly(list(values[:-1]), st.just(values[-1]) | NONSENSE)


NAMES = st.sampled_from(["7b", "0.5b", "qwen2.5-0.5b", "tiny-llama", "llama-9b", "../x", "a b",
                         "h100-sxm", "rtx-4090", "test-gpu", "a100", "nope", "config.json",
                         "/nonexistent/config.json"])
MODELS = mostly(["tiny-llama", "0.5b", "qwen2.5-0.5b"], NAMES)

COMMON_OPTIONS = {
    "--workload": choice("sft", "rm", "dpo", "ppo", "grpo", "pretrain", "rlhf"),
    "--method": choice("full", "lora", "qlora", "dora", "freeze", "lorra"),
    "--lora-rank": ints(8, 16, 64), "--tp": ints(1, 2, 4), "--pp": ints(1, 2),
    "--micro-batch": ints(1, 2, 4, 8), "--grad-accum": ints(1, 2, 4),
    "--seq-len": ints(128, 512, 2048, 8192), "--memory-margin": floats(0, 0.02, 0.1, 0.5),
    "--num-gpus": ints(1, 2, 4, 8),
    "--optimizer": choice("adamw", "adamw-8bit", "sgd", "adafactor", "adam"),
    "--offload": choice("none", "optimizer", "optimizer+params", "disk"),
    "--checkpointing": choice("none", "selective", "full", "some"),
    "--pricing": choice("buy", "rent", "lease"),
    "--price-kind": choice("new", "used", "old"),
    "--stack": choice("hf", "megatron", "fsdp", "deepspeed", "jax"),
    "--tokens": floats(1e6, 1e8, 2e9), "--epochs": floats(1, 3), "--steps": ints(10, 1000),
    "--dataset-tokens": floats(1e6, 1e8),
    # preference and RL options, also drawn for SFT
    "--critic-model": mostly(["0.5b", "tiny-llama"], NAMES),
    "--reward-model": mostly(["0.5b", "tiny-llama"], NAMES),
    "--prompt-len": ints(64, 256), "--response-len": ints(64, 512), "--rollout-n": ints(1, 4, 8),
    "--rollout-batch": ints(8, 64, 256), "--gpu-memory-utilization": floats(0.3, 0.6, 0.9),
    "--kl": floats(0, 0.05), "--mean-seq-len": ints(64, 200),
    "--placement": choice("colocate", "separate", "split", "elsewhere"),
}
CHECK_OPTIONS = {**COMMON_OPTIONS, "--zero": ints(0, 1, 2, 3), "--rollout-tp": ints(1, 2),
                 "--logprob-micro-batch": ints(1, 4), "--power-usd-per-kwh": floats(0.1, 0.3),
                 "--platform": choice("hgx-8gpu-sxm", "consumer-2gpu-am5", "nope"),
                 "--lora-targets": choice("all-linear", "q,v", "q,k,v,o", "qq"),
                 "--rollout-gpus": ints(1, 2),
                 "--role-gpus": choice("actor=1", "actor=1,reference=1", "actor=2,critic=1",
                                       "actor=1,critic=1,reference=1,reward=1", "actor=x",
                                       "critc=1", "actor=0", "=", "actor=1,actor=1")}
CHECK_FLAGS = ["--fsdp", "--pure-bf16", "--compile", "--chunked-loss", "--no-flash-attention",
               "--precompute-ref", "--offload-idle", "--no-engine-sleep", "--paged-optimizer",
               "--optimizer-in-backward", "--fused-optimizer", "--json"]
PLAN_OPTIONS = {**COMMON_OPTIONS, "--budget": floats(500, 3000, 50000),
                "--max-gpus": ints(1, 4, 8, 16), "--global-batch": ints(8, 16, 64, 256),
                "--max-hours": floats(1, 24, 1000), "--min-tokens-per-s": floats(100, 10000),
                "--time-limit": floats(5, 10), "--rollout-tp": ints(1, 2),
                "--sharding": choice("none", "zero1", "zero3", "fsdp", "zero4"),
                "--objective": choice("cost", "time", "speed"),
                "--gpus": choice("rtx-4090", "rtx-3090,rtx-4090", "test-gpu", "a10g,l4", "nope")}
PLAN_FLAGS = ["--precompute-ref", "--offload-idle", "--no-offload-idle", "--json"]
RL_BASE = ["--workload", "grpo", "--prompt-len", "128", "--response-len", "128"]


@st.composite
def command_line(draw, command: str, options: dict, flags: list[str], *, base: list[str],
                 max_options: int) -> list[str]:
    argv = [command, *base]
    names = draw(st.lists(st.sampled_from(sorted(options)), max_size=max_options, unique=True))
    for name in names:
        argv += [name, draw(options[name])]
    argv += draw(st.lists(st.sampled_from(flags), max_size=2, unique=True))
    return argv


@st.composite
def check_argv(draw) -> list[str]:
    gpu = draw(mostly(["h100-sxm", "rtx-4090", "test-gpu"], NAMES))
    rl = RL_BASE if draw(st.integers(0, 2)) == 0 else []
    return draw(command_line("check", CHECK_OPTIONS, CHECK_FLAGS, max_options=4,
                             base=["--model", draw(MODELS), "--gpu", gpu, "--catalog",
                                   TEST_CATALOG, *rl]))


@settings(FAST, max_examples=200)
@given(check_argv())
def test_check_any_arguments_exit_cleanly(argv):
    assert_clean_exit(argv, *run_once(argv))


@st.composite
def tune_argv(draw) -> list[str]:
    options = {k: v for k, v in CHECK_OPTIONS.items()
               if k not in ("--pricing", "--price-kind", "--tokens", "--epochs", "--steps",
                            "--dataset-tokens", "--power-usd-per-kwh")}
    options |= {"--objective": choice("throughput", "memory", "cost"),
                "--memory-target": floats(0.5, 0.875), "--tie-tolerance": floats(0, 0.05),
                "--global-batch": ints(8, 64)}
    rl = [*RL_BASE, "--rollout-batch", "16"] if draw(st.integers(0, 3)) == 0 else []
    return draw(command_line("tune", options, ["--json", "--fsdp"], max_options=3,
                             base=["--model", draw(MODELS), "--gpu", "rtx-4090",
                                   "--catalog", TEST_CATALOG, *rl]))


@settings(FAST, max_examples=30)
@given(tune_argv())
def test_tune_any_arguments_exit_cleanly(argv):
    assert_clean_exit(argv, *run_once(argv))


@st.composite
def plan_argv(draw) -> list[str]:
    """Small models and GPU subsets so that the requests that get past validation solve fast."""
    command = draw(st.sampled_from(["plan", "plan", "pareto"]))
    rl = [*RL_BASE, "--rollout-batch", "16"] if draw(st.integers(0, 7)) == 0 else []
    argv = draw(command_line(command, PLAN_OPTIONS, PLAN_FLAGS, max_options=3,
                             base=["--model", draw(MODELS), "--catalog", TEST_CATALOG, *rl]))
    if "--gpus" not in argv:
        argv += ["--gpus", "rtx-4090,rtx-3090"]
    if "--max-gpus" not in argv:
        argv += ["--max-gpus", "4"]
    if command == "pareto":
        argv += ["--max-points", draw(st.sampled_from(["1", "2", "0", "51", "x"]))]
    return argv


@settings(FAST, max_examples=12)
@given(plan_argv())
def test_plan_and_pareto_any_arguments_exit_cleanly(argv):
    code, out, err = run_once(argv)
    assert_clean_exit(argv, code, out, err)
    if code == 0 and "--json" in argv and argv[0] == "plan":
        doc = json.loads(out)
        assert doc["status"] in ("optimal", "feasible") and doc["plan"] is not None


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "7b", "--budget", "inf"],  # was OverflowError in encoding._add_cost
    ["plan", "--model", "7b", "--budget", "1e300"],  # was a CP-SAT TypeError
    ["plan", "--model", "7b", "--max-gpus", "99999999999999999999"],  # CP-SAT domain TypeError
    ["plan", "--model", "7b", "--global-batch", "99999999999999"],  # hung enumerating divisors
    ["pareto", "--model", "7b", "--budget", "inf"],
    ["check", "--model", "7b", "--gpu", "h100-sxm", "--tokens", "nan"],  # was accepted: nan h
    ["check", "--model", "7b", "--gpu", "h100-sxm", "--power-usd-per-kwh", "-1"],  # was accepted
    ["check", "--model", "7b", "--gpu", "h100-sxm", "--kl", "0.1"],  # sft has no reference
    ["check", "--model", "7b", "--gpu", "h100-sxm", "--offload-idle"],  # was silently ignored
    ["check", "--model", "7b", "--gpu", "h100-sxm", "--rollout-batch", "7"],  # likewise
    ["plan", "--model", "0.5b", "--workload", "rm", "--kl", "0.5"],
    ["plan", "--model", "0.5b", "--offload-idle"],
    ["plan", "--model", "7b", "--time-limit", "0"],  # named --time-limit-s before
])
def test_found_bugs_are_one_line_errors(argv):
    code, out, err = run_cli(argv)
    assert code == 2
    assert_clean_exit(argv, code, out, err)
    assert [a for a in argv if a.startswith("--")][-1] in err  # the flag itself


@st.composite
def plan_requests(draw) -> PlanRequest:
    workload = draw(st.sampled_from(["sft", "sft", "rm", "dpo", "grpo"]))
    kw: dict = {"model": draw(st.sampled_from(["tiny-llama", "0.5b", "1.5b"])),
                "workload": workload,
                "gpus": draw(st.sampled_from([("rtx-4090",), ("rtx-3090", "rtx-4090"),
                                              ("a10g", "l4"), ("test-gpu",)])),
                "max_gpus": draw(st.sampled_from([1, 2, 4, 8])),
                "method": draw(st.sampled_from(["auto", "full", "lora", "qlora"])),
                "global_batch_size": draw(st.sampled_from([8, 16, 64]))}
    if workload == "grpo":
        kw |= {"prompt_len": 128, "response_len": 256, "rollout_batch": 16}
    else:
        kw["seq_len"] = draw(st.sampled_from([256, 1024, 4096]))
    if draw(st.booleans()):
        kw["pricing"] = "rent"
        kw["tokens"] = draw(st.sampled_from([1e6, 1e8]))
    if draw(st.booleans()):
        kw["objective"] = "time"
        kw["budget_usd"] = draw(st.sampled_from([500.0, 5000.0, 50000.0]))
    return PlanRequest(**kw)


@settings(FAST, max_examples=6)
@given(plan_requests())
def test_every_returned_plan_passes_check_plan(request):
    cat = load_catalog([TEST_CATALOG])
    result = plan(request, cat)
    assert result.status in ("optimal", "feasible", "infeasible", "unknown")
    if result.plan is None:
        assert result.status in ("infeasible", "unknown")
        return
    space = build_space(request, cat)
    for p in (result.plan, *result.alternatives):
        assert check_plan(space, p) == []


# --- determinism ---------------------------------------------------------------------------------
DET_ARGV = ["plan", "--model", "7b", "--budget", "3000", "--json"]


def test_plan_json_is_byte_identical_in_process_and_across_processes():
    first = run_once(DET_ARGV)
    second = run_cli(DET_ARGV)
    assert first[0] == 0 and first == second
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    procs = [subprocess.Popen([sys.executable, "-m", "planner.cli", *DET_ARGV], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0][0] == outs[1][0]
    assert outs[0][0].decode() == first[1]


def test_same_plan_with_one_and_four_solver_workers(monkeypatch):
    one = run_once(DET_ARGV)
    original = stages_mod.cp_solver

    def four_workers(time_limit: float):
        solver = original(time_limit)
        solver.parameters.num_workers = 4
        return solver

    monkeypatch.setattr(stages_mod, "cp_solver", four_workers)
    four = run_cli(DET_ARGV)
    assert one[0] == 0 and one == four


# --- --time-limit ------------------------------------------------------------------------------
def test_tiny_time_limit_is_a_status_not_a_crash():
    code, out, err = run_cli(["plan", "--model", "7b", "--time-limit", "1e-6", "--json"])
    assert_clean_exit(["plan", "--time-limit"], code, out, err)
    doc = json.loads(out)
    assert doc["status"] in ("optimal", "feasible", "unknown", "infeasible")
    assert (doc["plan"] is not None) == (code == 0)
    if doc["status"] == "feasible":
        assert any("not proven optimal" in n for n in doc["notes"])


def test_stopped_search_gives_feasible_plan_not_proven_optimal(monkeypatch):
    """A solve stopped before proving optimality (here: after its first solution, which is
    deterministic, unlike a wall-clock limit) returns its plan with status feasible."""
    original = stages_mod.cp_solver

    def first_solution(time_limit: float):
        solver = original(time_limit)
        solver.parameters.stop_after_first_solution = True
        return solver

    monkeypatch.setattr(stages_mod, "cp_solver", first_solution)
    request = PlanRequest(model="3b", max_gpus=8, method="full")
    result = plan(request)
    assert result.status == "feasible" and result.plan is not None
    assert check_plan(build_space(request, load_catalog()), result.plan) == []
    assert any("not proven optimal" in n for n in result.notes)
    code, out, _ = run_cli(["plan", "--model", "3b", "--max-gpus", "8", "--method", "full"])
    assert code == 0 and "feasible (not proven optimal)" in out


def test_time_limit_before_any_solution_is_unknown_not_infeasible():
    # the same request solves to optimal with the default limit (1 x rtx-3090)
    result = plan(PlanRequest(model="7b", time_limit_s=1e-6))
    assert result.status == "unknown"
