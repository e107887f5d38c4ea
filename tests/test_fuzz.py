"""Fuzzing every command and every file kind (issue 20, part 1).

Each property draws an input (a command line, or a file derived from a valid seed by mutating
one value, dropping or adding a key, or corrupting its bytes), runs ``planner.cli.main``
in-process and asserts: no traceback and no exit 3 (an exception past the input boundary is a
bug); exit 0, 1 or 2; exit 2 is one stderr line naming the input (a flag, a value or the file);
``--json`` output parses with finite numbers only; no run takes 30 s or more (SIGALRM).

Two tiers of the same properties: a fast sample in the default run, and the ``slow`` tier
(>= 10,000 generated inputs in all; deselected by default, the run's summary says so):

    python -m pytest -m slow -n 2 tests/test_fuzz.py

Hypothesis is derandomized (tests/conftest.py): every run draws the same inputs. With
FUZZ_LOG=DIR set, each property writes its count of inputs, exit codes and slowest run there
(one JSON file per test) for the figures in the issue.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.catalog.specs import LAUNCH_FORMATS
from tests.test_hardening import (
    RL_BASE,
    TEST_CATALOG,
    check_argv,
    mostly,
    plan_argv,
    run_cli,
    tune_argv,
)

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 30
BASE = dict(derandomize=True, database=None, deadline=None,
            suppress_health_check=list(HealthCheck))
# (fast, slow) examples per property; the slow tier's sum is >= 10,000 (see test_slow_tier_size;
# `schema` has only 8 distinct inputs)
TIERS: dict[str, tuple[int, int]] = {
    "check": (60, 2800), "tune": (10, 500), "plan": (6, 400), "validate": (25, 1600),
    "catalog": (20, 1300), "config_json": (25, 1600), "export": (25, 1800), "schema": (3, 8),
    "pareto_export": (8, 600), "library": (30, 800), "catalog_extremes": (8, 500),
}


def fuzz(name: str):
    """Two tests from one property: ``test_<name>`` (fast) and ``test_<name>_slow``."""
    fast, slow = TIERS[name]

    def wrap(prop):
        strategy = prop._strategy  # set by @strategy below

        @settings(**BASE, max_examples=fast)
        @given(strategy)
        def fast_test(args):
            prop(args, name=name)

        @pytest.mark.slow
        @settings(**BASE, max_examples=slow)
        @given(strategy)
        def slow_test(args):
            prop(args, name=name)

        fast_test.prop = slow_test.prop = prop  # the property itself (tools, debugging)
        return fast_test, slow_test

    return wrap


def strategy(s):
    def mark(prop):
        prop._strategy = s
        return prop
    return mark


# ---- running one input ------------------------------------------------------------------------
_LOG: dict[str, dict[str, Any]] = {}


class Hang(Exception):
    pass


def _alarm(_signum, _frame):
    raise Hang(f"no answer in {HANG_S} s")


def run_checked(argv: list[str], *, name: str, named: list[str]) -> tuple[int, str, str]:
    """Run ``planner argv`` and assert the hardening contract; ``named`` are the strings one
    of which an exit-2 message must contain (flags, values, file paths, document keys)."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    start = time.perf_counter()
    try:
        code, out, err = run_cli(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    seconds = time.perf_counter() - start
    _record(name, code, seconds)
    assert "Traceback" not in out + err, (argv, err[-2000:])
    assert code in (0, 1, 2), (argv, code, err[-2000:])
    if code == 2:
        assert err.startswith("planner: error: ") and err.count("\n") == 1, (argv, err[-2000:])
        assert any(n and n in err for n in named), (argv, err)
    elif "--json" in argv:
        json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in --json of {argv}"))
    return code, out, err


def _record(name: str, code: object, seconds: float) -> None:
    entry = _LOG.setdefault(name, {"inputs": 0, "exit": {}, "slowest_s": 0.0, "total_s": 0.0})
    entry["inputs"] += 1
    entry["exit"][str(code)] = entry["exit"].get(str(code), 0) + 1
    entry["slowest_s"] = max(entry["slowest_s"], round(seconds, 3))
    entry["total_s"] = round(entry["total_s"] + seconds, 3)
    folder = os.environ.get("FUZZ_LOG")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}-{os.getpid()}.json").write_text(json.dumps(_LOG[name]))


def flags_and_values(argv: list[str]) -> list[str]:
    return [a for a in argv if a]


# ---- mutations of documents -------------------------------------------------------------------
NASTY = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3),
    st.sampled_from([0, -1, 2**31, 2**53 + 1, 10**30, 10**400, 1e308, -1e-300]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "80", "1e400", "nan", "²", "x" * 300, "../../etc/passwd", "all-linear",
                     "q,v", "fsdp", "h100-sxm", "qwen2.5-0.5b", "grpo", "peak", "oom"]),
    st.lists(st.integers(-2, 2), max_size=3),
    st.dictionaries(st.sampled_from(["a", "kind", "id", "x"]), st.integers(-1, 2), max_size=2),
)
BAD_BYTES = st.sampled_from([b"", b"\xff\xfe\x00", b"[" * 60_000, b"{" * 5, b"a: [", b"- - -",
                             b"\x00" * 64, b"null", b"[]", b"42", b'"text"', b"cases: 3",
                             "\u00e9t\u00e9: \u00b2".encode("latin-1"), b"a: " + b"9" * 5000,
                             b"[" + b"1e99999, " * 3 + b"]"])


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw, seed: Any) -> tuple[Any, list[str]]:
    """(document, keys touched): ``seed`` with 1-3 changes: a value replaced, a key dropped or
    a key added."""
    doc = copy.deepcopy(seed)
    touched: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(["set", "set", "set", "drop", "add"]))
        key = path[-1]
        touched += [str(k) for k in path]
        if op == "drop" and isinstance(parent, dict):
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            new = draw(st.sampled_from(["surprise", "num_gpus", "id", "extra", "cases", "zz"]))
            parent[new] = draw(NASTY)
            touched.append(new)
        else:
            parent[key] = draw(NASTY)
    return doc, touched


def _dump(doc: Any, kind: str) -> bytes:
    if kind == "json":
        return json.dumps(doc).encode("utf-8")
    return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8")


@st.composite
def file_bytes(draw, seed: Any, kind: str) -> tuple[bytes, list[str]]:
    """The bytes of a mutated seed file, or (one time in eight) corrupt bytes."""
    if draw(st.integers(0, 7)) == 0:
        return draw(BAD_BYTES), []
    doc, touched = draw(mutated(seed))
    return _dump(doc, kind), touched


@contextlib.contextmanager
def _tmp_file(name: str, data: bytes) -> Iterator[Path]:
    """``data`` as a file ``name`` in a folder of its own, removed afterwards (the slow tier
    runs >= 10,000 inputs)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        yield path


# ---- seeds ------------------------------------------------------------------------------------
def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


HF_CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
             "intermediate_size": 4864, "num_attention_heads": 14, "num_hidden_layers": 24,
             "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
             "tie_word_embeddings": True, "hidden_act": "silu", "num_experts": None,
             "kv_lora_rank": None, "qk_nope_head_dim": None, "qk_rope_head_dim": None,
             "v_head_dim": None, "head_dim": None}
CASES = {"schema_version": 1, "cases": [
    {"id": "sft", "framework": "trl+peft", "model": "Qwen/Qwen2.5-0.5B", "workload": "sft",
     "method": "lora", "lora_rank": 8, "optimizer": "adamw", "gpu": "h100-sxm",
     "gpu_memory_gib": 80, "num_gpus": 2, "sharding": "zero2", "offload": "none", "tp": 1,
     "pp": 1, "cp": 1, "grad_checkpointing": "full", "micro_batch_size": 2, "seq_len": 512,
     "precision": "bf16", "rl": None, "usable_for_accuracy": True, "params_b": 0.5,
     "outcome": {"kind": "peak", "peak_gib": 5.0, "measured_as": "reserved"},
     "extra": {"grad_accum": 2, "target_modules": "q_proj,v_proj"}},
    {"id": "grpo", "framework": "verl", "model": "Qwen/Qwen2.5-0.5B-Instruct", "workload": "grpo",
     "method": "lora", "lora_rank": 32, "gpu": "h100-sxm", "gpu_memory_gib": 80, "num_gpus": 1,
     "sharding": "fsdp", "offload": "none", "tp": 1, "pp": 1, "cp": 1, "micro_batch_size": 8,
     "seq_len": 1536, "precision": "bf16", "usable_for_accuracy": True, "optimizer": "adamw",
     "grad_checkpointing": "full",
     "rl": {"rollout_n": 5, "prompt_len": 512, "response_len": 1024,
            "gpu_memory_utilization": 0.4, "rollout_tp": 1},
     "outcome": {"kind": "fits", "peak_gib": None, "measured_as": None},
     "extra": {"use_remove_padding": True, "train_batch_size": 8}},
    {"id": "minimal", "model": "meta-llama/Llama-2-7b-hf", "num_gpus": 1, "workload": "dpo",
     "gpu": "rtx-4090", "micro_batch_size": 2, "seq_len": 1024},  # keys a user may leave out
]}
THROUGHPUT_CASES = {"schema_version": 1, "cases": [
    {"id": "tps", "framework": "nemo", "model": "meta-llama/Llama-2-70b-hf", "params_b": 70,
     "workload": "lora", "precision": "bf16", "gpu": "h100-sxm", "num_gpus": 8, "tp": 4, "pp": 1,
     "cp": 1, "micro_batch_size": 1, "global_batch_size": 8, "seq_len": 8192, "rl": None,
     "sharding": "megatron", "grad_checkpointing": None,
     "metric": "tokens_per_sec_per_gpu", "value": 2205, "usable_for_accuracy": True,
     "extra": {"lora_rank": 16}},
]}


@functools.cache
def saved_plan(workload: str = "sft") -> dict:
    rl = [*RL_BASE, "--rollout-batch", "16"] if workload == "grpo" else []
    code, out, err = run_cli(["plan", "--model", "0.5b", "--gpus", "rtx-4090", "--max-gpus", "2",
                              "--method", "lora", *rl, "--json"])
    assert code == 0, err
    return json.loads(out)


@functools.cache
def saved_pareto() -> dict:
    code, out, err = run_cli(["pareto", "--model", "0.5b", "--gpus", "rtx-4090,a100-80gb-sxm",
                              "--max-gpus", "4", "--max-points", "3", "--json"])
    assert code == 0, err
    return json.loads(out)


CATALOG_SEEDS = {
    "gpus/fuzz-gpu.yaml": _yaml(ROOT / "catalog" / "gpus" / "rtx-4090.yaml") | {"id": "fuzz-gpu"},
    "models/fuzz-model.yaml": _yaml(ROOT / "catalog" / "models" / "qwen2.5-0.5b.yaml")
    | {"id": "fuzz-model"},
    "platforms/fuzz-host.yaml": _yaml(ROOT / "catalog" / "platforms" / "hgx-8gpu-sxm.yaml")
    | {"id": "fuzz-host"},
    "size_aliases.yaml": {"fuzzy": "qwen2.5-0.5b", "7b": "fuzz-model"},
}


# ---- command lines ----------------------------------------------------------------------------
@fuzz("check")
@strategy(check_argv())
def check_prop(argv: list[str], *, name: str) -> None:
    run_checked(argv, name=name, named=flags_and_values(argv))


test_check, test_check_slow = check_prop


@fuzz("tune")
@strategy(tune_argv())
def tune_prop(argv: list[str], *, name: str) -> None:
    run_checked(argv, name=name, named=flags_and_values(argv))


test_tune, test_tune_slow = tune_prop


@fuzz("plan")
@strategy(plan_argv())
def plan_prop(argv: list[str], *, name: str) -> None:
    run_checked(argv, name=name, named=flags_and_values(argv))


test_plan_and_pareto, test_plan_and_pareto_slow = plan_prop


@fuzz("schema")
@strategy(st.sampled_from(["check", "plan", "pareto", "tune", "PLAN", "nope", "", "-"]))
def schema_prop(kind: str, *, name: str) -> None:
    argv = ["schema", kind]
    code, out, _ = run_checked(argv, name=name, named=[kind or "KIND", "KIND"])
    if code == 0:
        json.loads(out)


test_schema, test_schema_slow = schema_prop


# ---- files ------------------------------------------------------------------------------------
@st.composite
def _config_json(draw):
    data, touched = draw(file_bytes({k: v for k, v in HF_CONFIG.items() if v is not None}
                                    | draw(st.sampled_from([{}, {"num_experts": 8,
                                                                  "num_experts_per_tok": 2},
                                                             {"kv_lora_rank": 64}])), "json"))
    extra = draw(st.sampled_from([[], ["--json"], ["--method", "qlora"], RL_BASE]))
    return data, touched, extra


@fuzz("config_json")
@strategy(_config_json())
def config_json_prop(args, *, name: str) -> None:
    data, touched, extra = args
    with _tmp_file("config.json", data) as path:
        argv = ["check", "--model", str(path), "--gpu", "h100-sxm", *extra]
        run_checked(argv, name=name, named=[str(path), path.stem, *touched, *extra])


test_config_json, test_config_json_slow = config_json_prop


@st.composite
def _overlay(draw):
    chosen = draw(st.lists(st.sampled_from(sorted(CATALOG_SEEDS)), min_size=1, max_size=2,
                           unique=True))
    files = {name: draw(file_bytes(CATALOG_SEEDS[name], "yaml")) for name in chosen}
    command = draw(st.sampled_from([["catalog", "gpus"], ["catalog", "models", "--json"],
                                    ["catalog", "platforms"],
                                    ["check", "--model", "fuzzy", "--gpu", "fuzz-gpu",
                                     "--platform", "fuzz-host"],
                                    ["check", "--model", "fuzz-model", "--gpu", "rtx-4090",
                                     "--json"]]))
    return files, command


@fuzz("catalog")
@strategy(_overlay())
def catalog_prop(args, *, name: str) -> None:
    files, command = args
    with tempfile.TemporaryDirectory(prefix="fuzz-overlay-") as tmp:
        folder = Path(tmp)
        touched: list[str] = []
        for rel, (data, keys) in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(data)
            touched += keys
        argv = [*command, "--catalog", str(folder)]
        run_checked(argv, name=name, named=[str(folder), *touched, *command])


test_catalog_overlay, test_catalog_overlay_slow = catalog_prop


def _bounds(schema, field: str) -> tuple[float, float] | None:
    """(lowest, highest) a numeric catalog field accepts, from its schema's constraints."""
    info = schema.model_fields[field]
    lo = hi = None
    for item in info.metadata:
        lo = getattr(item, "ge", None) or getattr(item, "gt", None) or lo
        hi = getattr(item, "le", None) or hi
    return (float(lo or 1), float(hi)) if hi else None


@st.composite
def _extreme_overlay(draw):
    """Valid catalog entries with 1-3 numbers at or near their bounds: the models downstream
    meet the most extreme catalog that passes validation."""
    from planner.catalog.specs import GpuSpec, ModelSpec, PlatformSpec

    files = {}
    for rel, schema in (("gpus/fuzz-gpu.yaml", GpuSpec), ("models/fuzz-model.yaml", ModelSpec),
                        ("platforms/fuzz-host.yaml", PlatformSpec)):
        doc = dict(CATALOG_SEEDS[rel])
        numeric = [k for k, v in doc.items() if isinstance(v, int | float)
                   and not isinstance(v, bool) and _bounds(schema, k)]
        for key in draw(st.lists(st.sampled_from(numeric), max_size=3, unique=True)):
            lo, hi = _bounds(schema, key)
            value = draw(st.sampled_from([lo, hi, lo * 1.5, hi / 2, (lo * hi) ** 0.5]))
            doc[key] = int(value) if isinstance(doc[key], int) else value
        files[rel] = yaml.safe_dump(doc).encode("utf-8")
    command = draw(st.sampled_from([
        ["check", "--model", "fuzz-model", "--gpu", "fuzz-gpu", "--platform", "fuzz-host",
         "--json"],
        ["check", "--model", "fuzz-model", "--gpu", "fuzz-gpu", "--pricing", "rent", "--tokens",
         "1e18", "--json"],
        ["check", "--model", "fuzz-model", "--gpu", "fuzz-gpu", "--num-gpus", "8", "--zero", "3",
         *RL_BASE, "--json"],
        ["tune", "--model", "fuzz-model", "--gpu", "fuzz-gpu", "--json"],
        ["plan", "--model", "fuzz-model", "--gpus", "fuzz-gpu", "--max-gpus", "8", "--json"],
        ["plan", "--model", "fuzz-model", "--gpus", "fuzz-gpu", "--max-gpus", "8", "--pricing",
         "rent", "--objective", "time", "--budget", "1e9", "--json"],
    ]))
    return files, command


@fuzz("catalog_extremes")
@strategy(_extreme_overlay())
def catalog_extremes_prop(args, *, name: str) -> None:
    files, command = args
    folder = Path(tempfile.mkdtemp(prefix="fuzz-extreme-"))
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    argv = [*command, "--catalog", str(folder)]
    run_checked(argv, name=name, named=[*command, str(folder)])


test_catalog_extremes, test_catalog_extremes_slow = catalog_extremes_prop


@st.composite
def _cases(draw):
    seed = draw(st.sampled_from([CASES, THROUGHPUT_CASES]))
    data, touched = draw(file_bytes(seed, "yaml"))
    return data, touched, draw(st.sampled_from([[], ["--json"]]))


@fuzz("validate")
@strategy(_cases())
def validate_prop(args, *, name: str) -> None:
    data, touched, extra = args
    with _tmp_file("cases.yaml", data) as path:
        argv = ["validate", str(path), *extra]
        run_checked(argv, name=name, named=[str(path), *touched])


test_validate, test_validate_slow = validate_prop


FORMATS = [*LAUNCH_FORMATS, "nope"]


@st.composite
def _plan_file(draw):
    doc = saved_plan(draw(st.sampled_from(["sft", "grpo"])))
    if draw(st.booleans()):
        doc = doc["plan"]  # the plan body alone, as a pareto point's
    data, touched = draw(file_bytes(doc, "json"))
    return data, touched, draw(st.sampled_from(FORMATS))


@fuzz("export")
@strategy(_plan_file())
def export_prop(args, *, name: str) -> None:
    data, touched, fmt = args
    with _tmp_file("plan.json", data) as path:
        argv = ["export", "--format", fmt, str(path)]
        run_checked(argv, name=name, named=[str(path), fmt, *touched, "plan"])


test_export, test_export_slow = export_prop


@st.composite
def _pareto_file(draw):
    data, touched = draw(file_bytes(saved_pareto(), "json"))
    point = draw(mostly([0, 1, 2], st.sampled_from(["-1", "3", "x", "99999999999"])))
    return data, touched, str(point), draw(st.sampled_from(FORMATS[:3]))


@fuzz("pareto_export")
@strategy(_pareto_file())
def pareto_export_prop(args, *, name: str) -> None:
    data, touched, point, fmt = args
    with _tmp_file("front.json", data) as path:
        argv = ["export", "--format", fmt, "--point", point, str(path)]
        run_checked(argv, name=name, named=[str(path), point, "--point", *touched, "plan"])


test_pareto_export, test_pareto_export_slow = pareto_export_prop


# ---- the library: PlannerError subclasses only ------------------------------------------------
def _small_request():
    from planner import PlanRequest

    return PlanRequest(model="0.5b", gpus=("rtx-4090",), max_gpus=1, method="lora")


LIB_VALUES = NASTY | st.sampled_from(["7b", "0.5b", "h100-sxm", "rtx-4090", "buy", "rent", "new",
                                      "hf", "hgx-8gpu-sxm", 0.02, 12, (), [TEST_CATALOG],
                                      10**5000])  # beyond int's 4300-digit str() limit
CALLS = {
    "check": ("model", "gpu", "config", "catalog", "margin", "stack", "pricing", "price_kind",
              "platform", "job", "power_usd_per_kwh", "critic_model", "reward_model"),
    "tune": ("model", "gpu", "config", "catalog", "objective", "memory_target", "margin", "stack",
             "platform", "pins", "tie_tolerance"),
    "TrainConfig": ("workload", "method", "num_gpus", "micro_batch_size", "seq_len", "lora_rank",
                    "tp", "role_gpus", "gpu_memory_utilization", "lora_targets"),
    "PlanRequest": ("model", "budget_usd", "gpus", "max_gpus", "tokens", "seq_len", "pricing",
                    "memory_margin", "time_limit_s"),
    "pareto": ("request", "catalog", "max_points"),
    "plan": ("request", "catalog"),
    "load_catalog": ("overlays",),
    "export_plan": ("plan", "fmt", "catalog", "model_path"),
}


@st.composite
def _library_call(draw):
    from planner import TrainConfig

    name = draw(st.sampled_from(sorted(CALLS)))
    defaults = {"model": "0.5b", "gpu": "rtx-4090", "config": TrainConfig(method="lora"),
                "request": _small_request(), "plan": saved_plan(), "fmt": "deepspeed",
                "overlays": ()}
    kwargs = {k: v for k, v in defaults.items() if k in CALLS[name]}
    for key in draw(st.lists(st.sampled_from(CALLS[name]), min_size=1, max_size=2, unique=True)):
        kwargs[key] = draw(LIB_VALUES)
    return name, kwargs


@fuzz("library")
@strategy(_library_call())
def library_prop(args, *, name: str) -> None:
    import planner
    from planner.errors import PlannerError
    from planner.outputs.export import export_plan

    call, kwargs = args
    fn = export_plan if call == "export_plan" else getattr(planner, call)
    start = time.perf_counter()
    try:
        if call in ("pareto", "plan"):
            request = kwargs.pop("request")
            fn(request, **kwargs)
        elif call == "load_catalog":
            fn(kwargs["overlays"])
        elif call == "export_plan":
            fn(kwargs.pop("plan"), kwargs.pop("fmt"), **kwargs)
        else:
            fn(**kwargs)
        code = 0
    except PlannerError as exc:  # the only exception the library raises for bad arguments
        assert "\n" not in str(exc), (call, kwargs, str(exc))
        code = 2
    _record(name, code, time.perf_counter() - start)


test_library, test_library_slow = library_prop


def test_slow_tier_size():
    """The slow tier draws at least 10,000 inputs over every command and file kind."""
    assert sum(slow for _, slow in TIERS.values()) >= 10_000
    # commands: check, tune, plan/pareto, validate, catalog, export, schema; files: config.json,
    # overlays (gpus, models, platforms, size_aliases), plan and pareto documents, case files
    assert set(TIERS) == {"check", "tune", "plan", "validate", "catalog", "config_json",
                          "export", "schema", "pareto_export", "library", "catalog_extremes"}


def test_the_properties_can_fail():
    """The contract check is not vacuous: a traceback, exit 3 and a two-line error all fail."""
    with pytest.raises(AssertionError):
        run_checked(["check", "--model", "0.5b", "--gpu", "nope"], name="selftest",
                    named=["no such word in the message"])
    import planner.cli as cli

    original = cli.check_config
    cli.check_config = lambda **_: 1 / 0
    try:
        with pytest.raises(AssertionError):
            run_checked(["check", "--model", "0.5b", "--gpu", "h100-sxm"], name="selftest",
                        named=["0.5b"])
    finally:
        cli.check_config = original
