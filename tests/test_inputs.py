"""The input boundary (issue 20, part 1): each defect the issue lists, reproduced as it was found,
now one line with exit 2 naming the input (or a PlannerError from the library); exit 3 with one
line for an exception that gets past the boundary; capped error lists.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
import yaml

import planner
from planner import PlanRequest, TrainConfig, check, load_catalog, pareto, tune
from planner.errors import PlannerError
from planner.inputs import (
    MAX_DEPTH,
    MAX_ERRORS,
    MAX_FILE_BYTES,
    MAX_NODES,
    capped,
    check_tree,
    parse_json,
    parse_yaml,
)
from planner.outputs.export import export_plan
from tests.test_hardening import run_cli

ROOT = Path(__file__).resolve().parents[1]
H100 = (ROOT / "catalog" / "gpus" / "h100-sxm.yaml").read_text(encoding="utf-8")
TINY_CONFIG = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
               "num_hidden_layers": 4, "vocab_size": 1000, "intermediate_size": 1024}


def one_line_error(argv: list[str], *named: str) -> str:
    code, out, err = run_cli(argv)
    assert code == 2, (argv, code, err[-500:])
    assert err.startswith("planner: error: ") and err.count("\n") == 1, err[-500:]
    assert "Traceback" not in err + out
    for word in named:
        assert word in err, (word, err)
    return err


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


# ---- command-line values ----------------------------------------------------------------------
def test_a_300_character_model_name_is_one_line():  # was OSError: File name too long
    one_line_error(["check", "--model", "x" * 300, "--gpu", "h100-sxm"], "unknown model")


def test_an_argument_beyond_the_limit_is_refused_before_parsing():
    err = one_line_error(["check", "--model", "x" * 5000, "--gpu", "h100-sxm"], "argument 3")
    assert len(err) < 300


def test_superscript_role_gpus_are_one_line():  # str.isdigit accepted '²'
    one_line_error(["check", "--model", "0.5b", "--gpu", "h100-sxm", "--workload", "ppo",
                    "--prompt-len", "64", "--response-len", "64", "--placement", "split",
                    "--role-gpus", "actor=²"], "--role-gpus")


@pytest.mark.parametrize("flag", ["--micro-batch", "--num-gpus", "--seq-len", "--steps"])
def test_400_digit_integers_are_one_line(flag):  # was OverflowError
    err = one_line_error(["check", "--model", "0.5b", "--gpu", "h100-sxm", flag, "9" * 400],
                         flag)
    assert len(err) < 300  # the value is shortened in the message


@pytest.mark.parametrize("argv", [
    ["check", "--model", "0.5b", "--gpu", "h100-sxm", "--tokens", "1e300"],
    ["plan", "--model", "0.5b", "--gpus", "rtx-4090", "--seq-len", "1e200"],
    ["plan", "--model", "0.5b", "--gpus", "rtx-4090", "--budget", "1e200"],
])
def test_huge_numbers_are_refused_not_infinite(argv):  # was Infinity in --json
    one_line_error(argv, argv[-2])


def test_a_rollout_tp_beyond_the_gpus_names_the_flag():  # named an internal num_gpus before
    one_line_error(["plan", "--model", "0.5b", "--workload", "grpo", "--prompt-len", "64",
                    "--response-len", "64", "--rollout-tp", "2147483647"], "--rollout-tp")


def test_json_output_is_finite_at_the_bounds():
    code, out, err = run_cli(["check", "--model", "0.5b", "--gpu", "h100-sxm", "--tokens", "1e18",
                              "--json"])
    assert code in (0, 1), err
    json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in --json"))


# ---- config.json -------------------------------------------------------------------------------
@pytest.mark.parametrize("change, named", [
    ({"num_attention_heads": "16"}, "num_attention_heads"),  # 11 crash sites before
    ({"hidden_size": True}, "hidden_size"),
    ({"kv_lora_rank": 64}, "qk_nope_head_dim"),  # a partial MLA config: KeyError before
    ({"num_hidden_layers": 10_000_000}, "num_layers"),  # hung: count_params is linear in layers
    ({"vocab_size": 2**40}, "vocab_size"),
    ({"num_key_value_heads": 0}, "num_kv_heads"),
])
def test_bad_config_json_is_one_line(tmp_path, change, named):
    cfg = write(tmp_path / "config.json", json.dumps(TINY_CONFIG | change))
    start = time.perf_counter()
    one_line_error(["check", "--model", str(cfg), "--gpu", "h100-sxm"], named)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("text, named", [
    ('{"hidden_size": ' + "9" * 400 + "}", "bits is beyond"),  # OverflowError before
    ('{"hidden_size": ' + "9" * 5000 + "}", "digits"),  # beyond int() of a string
    ("[" * 100_000, "nested deeper"),  # RecursionError before
    ('{"hidden_size": NaN}', "not a finite number"),
    ('{"hidden_size": Infinity}', "not a finite number"),
    ("", "not valid JSON"),
])
def test_malformed_config_json_is_one_line(tmp_path, text, named):
    cfg = write(tmp_path / "config.json", text)
    one_line_error(["check", "--model", str(cfg), "--gpu", "h100-sxm"], named)


# ---- files of every kind: UTF-8, size, nesting -------------------------------------------------
def _plan_file(tmp_path: Path, data: bytes) -> list[str]:
    return ["export", "--format", "deepspeed", str(write(tmp_path / "plan.json", data))]


def _overlay(tmp_path: Path, data: bytes) -> list[str]:
    write(tmp_path / "ov" / "gpus" / "x.yaml", data)
    return ["catalog", "gpus", "--catalog", str(tmp_path / "ov")]


def _cases(tmp_path: Path, data: bytes) -> list[str]:
    return ["validate", str(write(tmp_path / "cases.yaml", data))]


def _config(tmp_path: Path, data: bytes) -> list[str]:
    return ["check", "--model", str(write(tmp_path / "config.json", data)), "--gpu", "h100-sxm"]


FILE_KINDS = [_plan_file, _overlay, _cases, _config]


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_non_utf8_files_are_one_line(tmp_path, kind):  # UnicodeDecodeError before
    one_line_error(kind(tmp_path, b'{"a": "\xff\xfe"}'), "not UTF-8", "0xff")


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_integers_of_5000_digits_are_one_line(tmp_path, kind):  # ValueError from int() before
    data = b'{"cases": [{"num_gpus": ' + b"9" * 5000 + b"}]}"
    one_line_error(kind(tmp_path, data), "digits")


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_deeply_nested_files_are_one_line(tmp_path, kind):
    one_line_error(kind(tmp_path, b"[" * 100_000), "nested deeper")


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_oversized_files_are_refused_unread(tmp_path, kind):  # a 50 MB overlay took minutes
    start = time.perf_counter()
    one_line_error(kind(tmp_path, b"- x: 1\n" * (MAX_FILE_BYTES // 7 + 10)), "larger than")
    assert time.perf_counter() - start < 5


def test_a_missing_plan_file_is_one_line(tmp_path):
    one_line_error(["export", "--format", "deepspeed", str(tmp_path / "nope.json")], "not found")


# ---- catalog overlays --------------------------------------------------------------------------
def test_infinite_gpu_memory_is_refused(tmp_path):  # accepted, then OverflowError / Infinity
    write(tmp_path / "ov" / "gpus" / "h100-sxm.yaml",
          H100.replace("memory_gib: 80.0", "memory_gib: .inf"))
    one_line_error(["catalog", "gpus", "--json", "--catalog", str(tmp_path / "ov")],
                   "memory_gib", "not a finite number")


def test_a_huge_finite_gpu_memory_is_refused(tmp_path):
    write(tmp_path / "ov" / "gpus" / "h100-sxm.yaml",
          H100.replace("memory_gib: 80.0", "memory_gib: 1.0e+300"))
    one_line_error(["catalog", "gpus", "--catalog", str(tmp_path / "ov")], "memory_gib")


def test_a_near_zero_gpu_rate_is_refused(tmp_path):  # OverflowError in space.py before
    write(tmp_path / "ov" / "gpus" / "h100-sxm.yaml",
          H100.replace("bf16_dense_tflops: 989", "bf16_dense_tflops: 1.0e-300"))
    one_line_error(["plan", "--model", "7b", "--gpus", "h100-sxm", "--catalog",
                    str(tmp_path / "ov")], "bf16_dense_tflops")


def test_an_alias_bomb_stops_at_the_node_limit(tmp_path):  # 3.9 GB, MemoryError before
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    write(tmp_path / "ov" / "size_aliases.yaml", "\n".join(lines) + "\n")
    start = time.perf_counter()
    one_line_error(["catalog", "models", "--catalog", str(tmp_path / "ov")],
                   f"more than {MAX_NODES}")
    assert time.perf_counter() - start < 5


def test_aliases_must_name_model_ids(tmp_path):
    write(tmp_path / "ov" / "size_aliases.yaml", "7b: [qwen2.5-7b]\n")
    one_line_error(["catalog", "models", "--catalog", str(tmp_path / "ov")], "model id string")


def test_an_empty_overlay_file_or_folder_is_an_error(tmp_path):  # silently ignored before
    write(tmp_path / "ov" / "gpus" / "empty.yaml", "")
    one_line_error(["catalog", "gpus", "--catalog", str(tmp_path / "ov")], "empty")
    (tmp_path / "none" / "gpus").mkdir(parents=True)
    one_line_error(["catalog", "gpus", "--catalog", str(tmp_path / "none")], "no *.yaml entry")


def test_an_overlay_folder_of_too_many_files_is_refused(tmp_path, monkeypatch):
    import planner.catalog.load as catalog

    monkeypatch.setattr(catalog, "MAX_FILES", 3)
    for i in range(4):
        write(tmp_path / "ov" / "gpus" / f"g{i}.yaml", "id: 3\n")
    one_line_error(["catalog", "gpus", "--catalog", str(tmp_path / "ov")], "4 files, more than 3")


def test_many_catalog_errors_are_capped(tmp_path):  # 3 million errors on one line before
    for i in range(40):
        write(tmp_path / "ov" / "gpus" / f"g{i}.yaml", "id: 3\n")
    err = one_line_error(["catalog", "gpus", "--catalog", str(tmp_path / "ov")], "and ")
    total = int(err.split("planner: error: ")[1].split(" ")[0])
    assert total > 40 and err.rstrip().endswith(f"; and {total - MAX_ERRORS} more")
    assert len(err) < 4000


# ---- validation cases --------------------------------------------------------------------------
GOOD_CASE = {"id": "c1", "framework": "trl+peft", "model": "Qwen/Qwen2.5-0.5B", "workload": "sft",
             "method": "lora", "lora_rank": 8, "optimizer": "adamw", "offload": "none",
             "sharding": "none", "grad_checkpointing": "full", "gpu": "h100-sxm",
             "gpu_memory_gib": 80, "num_gpus": 1, "micro_batch_size": 1, "seq_len": 512,
             "precision": "bf16", "tp": 1, "pp": 1, "cp": 1, "rl": None, "extra": {},
             "outcome": {"kind": "peak", "peak_gib": 5.0, "measured_as": "reserved"},
             "usable_for_accuracy": True}


@pytest.mark.parametrize("case, named", [
    (GOOD_CASE | {"gpu_memory_gib": "80"}, "gpu_memory_gib"),  # allocated 2 GB before
    (GOOD_CASE | {"num_gpus": 0}, "num_gpus"),
    (GOOD_CASE | {"seq_len": 10**30}, "seq_len"),
    (GOOD_CASE | {"rl": [1, 2]}, "rl"),
    (GOOD_CASE | {"outcome": "oom"}, "outcome"),
    (GOOD_CASE | {"extra": {"grad_accum": "4"}}, "extra.grad_accum"),
    (GOOD_CASE | {"micro_batch_size": True}, "micro_batch_size"),
    ({k: v for k, v in GOOD_CASE.items() if k != "num_gpus"}, "num_gpus"),  # KeyError before
    ({k: v for k, v in GOOD_CASE.items() if k != "model"}, "model"),
    (GOOD_CASE | {"num_gpus": 2, "tp": 4}, "not a multiple of tp"),  # modulo by zero before
    (GOOD_CASE | {"metric": "tokens_per_sec_per_gpu"}, "value"),  # a throughput case
    ("just a string", "case 0"),
])
def test_malformed_validation_cases_are_one_line(tmp_path, case, named):
    path = write(tmp_path / "cases.yaml", yaml.safe_dump({"cases": [case]}))
    one_line_error(["validate", str(path)], named)


def test_a_well_formed_case_validates(tmp_path):
    path = write(tmp_path / "cases.yaml", yaml.safe_dump({"cases": [GOOD_CASE]}))
    code, out, err = run_cli(["validate", str(path), "--json"])
    assert code == 0, err
    assert json.loads(out)["cases"][0]["id"] == "c1"


def test_many_bad_cases_are_listed_then_counted(tmp_path):
    cases = [GOOD_CASE | {"id": f"c{i}", "num_gpus": "2"} for i in range(25)]
    path = write(tmp_path / "cases.yaml", yaml.safe_dump({"cases": cases}))
    err = one_line_error(["validate", str(path)], "25 bad field(s)")
    assert f"and {25 - MAX_ERRORS} more" in err


# ---- the library raises PlannerError subclasses only -------------------------------------------
@pytest.mark.parametrize("call, named", [
    (lambda: PlanRequest(model="7b", budget_usd=-1), "budget_usd"),  # a 4-line pydantic error
    (lambda: TrainConfig(micro_batch_size=10**400), "micro_batch_size"),
    (lambda: PlanRequest(model="7b", tokens=math.inf), "tokens"),
    (lambda: check(model="7b", gpu="h100-sxm", config=TrainConfig(), margin=-5), "margin"),
    (lambda: check(model="7b", gpu="h100-sxm", config=TrainConfig(), margin=math.nan), "margin"),
    (lambda: check(model="7b", gpu="h100-sxm", config=TrainConfig(), pricing="lease"),
     "pricing"),  # treated as buy before
    (lambda: check(model="7b", gpu=None, config=TrainConfig()), "GPU"),  # AttributeError
    (lambda: check(model="7b", gpu="h100-sxm", config={"num_gpus": 2}), "config"),
    (lambda: pareto(PlanRequest(model="7b", budget_usd=3000), max_points=-5), "max_points"),
    (lambda: planner.plan({"model": "7b"}), "request"),
    (lambda: load_catalog("no-such-dir"), "no-such-dir"),  # iterated the characters before
    (lambda: tune(model="7b", gpu="h100-sxm", config=TrainConfig(), margin=math.nan), "margin"),
    (lambda: tune(model="7b", gpu="h100-sxm", config={"num_gpus": 2}), "config"),
    (lambda: check(model="7b", gpu="h100-sxm", config=TrainConfig(), catalog="catalog/"),
     "catalog"),
    (lambda: check(model="7b", gpu="h100-sxm", config=TrainConfig(), job="1e8 tokens"), "job"),
    (lambda: check(model="7b", gpu="h100-sxm", config=TrainConfig(),
                   power_usd_per_kwh=math.nan), "power_usd_per_kwh"),  # used before
    (lambda: tune(model="7b", gpu="h100-sxm", config=TrainConfig(), tie_tolerance="x"),
     "--tie-tolerance"),  # TypeError before
    (lambda: export_plan({"plan": None}, "deepspeed", catalog="catalog/"), "catalog"),
])
def test_library_errors_are_planner_errors(call, named):
    with pytest.raises(PlannerError) as exc:
        call()
    assert named in str(exc.value) and "\n" not in str(exc.value)


def test_load_catalog_takes_one_folder_as_a_path():
    assert "test-gpu" in load_catalog(str(ROOT / "tests" / "data" / "catalog")).gpus


# ---- an exception past the boundary is a bug: exit 3, one line --------------------------------
def test_an_escaped_exception_exits_3_with_one_line_naming_the_input(monkeypatch):
    import planner.cli as cli

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli, "check_config", broken)
    code, out, err = run_cli(["check", "--model", "0.5b", "--gpu", "h100-sxm"])
    assert code == 3 and err.count("\n") == 1 and "Traceback" not in err
    assert "internal error (a bug, please report it)" in err
    assert "planner check --model 0.5b --gpu h100-sxm" in err and "ZeroDivisionError" in err


# ---- the tree check ----------------------------------------------------------------------------
def test_check_tree_bounds():
    tree = {"a": [1, 2.5, "x", None, True]}
    assert check_tree(tree, what="t") == tree
    for bad, word in ([math.inf], "finite"), ({"a": 2**60}, "61 bits"), (["x" * 30_000], "string"),\
            ([10**5000], "bits"):
        with pytest.raises(PlannerError, match=word):
            check_tree(bad, what="t")
    deep: list = []
    node = deep
    for _ in range(MAX_DEPTH + 2):
        node.append([])
        node = node[0]
    with pytest.raises(PlannerError, match="nested deeper"):
        check_tree(deep, what="t")
    with pytest.raises(PlannerError, match="not a finite"):
        parse_json("[NaN]", what="t")
    with pytest.raises(PlannerError, match="not readable YAML"):
        parse_yaml("a: [", what="t")


def test_capped_lists_then_counts():
    assert capped(["a", "b"]) == "a; b"
    assert capped([str(i) for i in range(15)], limit=3) == "0; 1; 2; and 12 more"


def test_every_bad_request_field_is_listed_in_one_line():
    one_line_error(["check", "--model", "0.5b", "--gpu", "h100-sxm", "--micro-batch", "0",
                    "--tp", "0", "--grad-accum", "-3"], "--micro-batch 0", "--tp 0",
                   "--grad-accum -3")
    one_line_error(["plan", "--model", "0.5b", "--budget", "-1", "--max-gpus", "0"],
                   "--budget -1", "--max-gpus 0")


def test_whole_floats_in_config_json_are_integers(tmp_path):
    cfg = write(tmp_path / "config.json",
                json.dumps(TINY_CONFIG | {"hidden_size": 512.0, "num_hidden_layers": 4.0}))
    code, out, err = run_cli(["check", "--model", str(cfg), "--gpu", "h100-sxm", "--json"])
    assert code == 0, err
    assert json.loads(out)["model"] == tmp_path.name.lower()  # a config.json is named by its folder
