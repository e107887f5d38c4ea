"""The command line: exit codes, one-line errors, JSON shape."""

from __future__ import annotations

import json

import pytest

from planner.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_check_fits_json(capsys):
    code, out, _ = run(capsys, "check", "--model", "7b", "--gpu", "a100-80gb-sxm",
                       "--method", "lora", "--seq-len", "4096", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["fits"] is True
    assert doc["model"] == "qwen2.5-7b" and doc["model_asked_as"] == "7b"
    m = doc["memory"]
    for key in ("per_gpu_gib", "reserved_gib", "capacity_gib", "breakdown_gib", "host_ram_gib"):
        assert key in m
    assert m["capacity_gib"] == 80
    assert sum(m["breakdown_gib"].values()) == pytest.approx(m["per_gpu_gib"], abs=0.02)


def test_check_does_not_fit_exit_1(capsys):
    # full fine-tuning of a 70B model needs ~16 B/param = 1.1 TB: never on one 24 GB card
    code, out, _ = run(capsys, "check", "--model", "70b", "--gpu", "rtx-4090")
    assert code == 1
    assert "DOES NOT FIT" in out


def test_check_text_lists_terms(capsys):
    # without recomputation the forward/backward phase (with its activations) is the peak; with
    # it, ZeRO-3's fp32 gradient sub-group at the optimizer step is
    code, out, _ = run(capsys, "check", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                       "--num-gpus", "8", "--zero", "3", "--checkpointing", "none")
    assert code == 0
    for word in ("weights", "optimizer states", "activations", "capacity", "FITS"):
        assert word in out
    code, out, _ = run(capsys, "check", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                       "--num-gpus", "8", "--zero", "3", "--checkpointing", "full")
    assert code == 0 and "optimizer step" in out


SPLIT = ["--workload", "ppo", "--prompt-len", "128", "--response-len", "128", "--zero", "3",
         "--num-gpus", "8", "--placement", "split"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "llama-9b"], "unknown model 'llama-9b'"),
        (["--gpu", "a100"], "GPU 'a100' is one of a100-40gb-pcie, a100-40gb-sxm, a100-80gb-pcie"),
        (["--method", "full", "--lora-rank", "16"], "--lora-rank 16 needs --method lora"),
        (["--tp", "3", "--num-gpus", "6"], "--tp 3 must divide"),
        (["--tp", "2", "--num-gpus", "3"], "does not divide --num-gpus 3"),
        (["--pp", "200", "--num-gpus", "200"], "--pp 200 exceeds the"),
        (["--micro-batch", "0"], "--micro-batch 0"),
        (["--seq-len", "-5"], "--seq-len -5"),
        (["--method", "lorra"], "lorra"),
        (["--lora-targets", "qq", "--method", "lora"], "--lora-targets 'qq'"),
        (["--offload", "optimizer"], "--offload optimizer needs"),
        (SPLIT + ["--role-gpus", "critic=1"], "the actor included"),
        (SPLIT + ["--role-gpus", "critc=1,actor=1"], "did you mean: critic"),
        (SPLIT + ["--role-gpus", "actor=8"], "the rollout engines need GPUs"),
        (SPLIT + ["--role-gpus", "actor=2,reference=1"], "gives no GPUs to the critic"),
        (SPLIT + ["--role-gpus", "actor=x"], "write role=GPUs"),
        (SPLIT[:-2] + ["--role-gpus", "actor=2"], "needs --placement split"),
        (SPLIT[:-2] + ["--placement", "split", "--num-gpus", "6"], "a multiple of 5"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, args, needle):
    base = {"--model": "llama-3.1-8b", "--gpu": "a100-80gb-sxm"}
    argv = ["check"]
    for k, v in base.items():
        if k not in args:
            argv += [k, v]
    code, _, err = run(capsys, *argv, *args)
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_catalog_lists(capsys):
    code, out, _ = run(capsys, "catalog", "gpus")
    assert code == 0 and "h100-sxm" in out and "prices as of" in out
    code, out, _ = run(capsys, "catalog", "models", "--json")
    docs = json.loads(out)
    assert any(d.get("id") == "llama-2-7b" for d in docs)


def test_validate_json_shape(capsys, tmp_path):
    case = {
        "id": "mine", "framework": "peft+transformers", "workload": "sft", "method": "lora",
        "precision": "bf16", "optimizer": "adamw", "rl": None, "extra": {}, "lora_rank": 8,
        "model":
        "meta-llama/Llama-2-7b-hf", "gpu": "rtx-4090", "gpu_memory_gib": 24, "num_gpus": 1,
        "sharding": "none", "offload": "none", "tp": 1, "pp": 1, "cp": 1,
        "grad_checkpointing": "full", "micro_batch_size": 1, "seq_len": 1024,
        "outcome": {"kind": "peak", "peak_gib": 16.0, "measured_as": "reserved"},
        "usable_for_accuracy": True,
    }
    rl = {**case, "id": "rl", "workload": "grpo"}
    f = tmp_path / "cases.yaml"
    f.write_text(json.dumps({"schema_version": 1, "cases": [case, rl]}))
    code, out, _ = run(capsys, "validate", str(f), "--json")
    doc = json.loads(out)
    assert code == 0
    mine, other = doc["cases"]
    assert mine["predicted"]["peak_gib"] > 0 and mine["reason"] is None
    assert other["predicted"] is None and "grpo" in other["reason"]
    assert "summary" in doc


def test_catalog_overlay_and_bad_overlay(capsys):
    from pathlib import Path

    data = Path(__file__).parent / "data"
    code, out, _ = run(capsys, "check", "--model", "tiny-llama", "--gpu", "test-gpu",
                       "--catalog", str(data / "catalog"), "--json")
    assert code == 0 and json.loads(out)["gpu"] == "test-gpu"
    code, _, err = run(capsys, "catalog", "gpus", "--catalog", str(data / "bad_catalog"))
    assert code == 2 and "broken.yaml" in err and err.count("\n") == 1


def test_check_json_is_deterministic(capsys):
    args = ("check", "--model", "qwen2.5-14b", "--gpu", "h100-sxm", "--num-gpus", "4",
            "--fsdp", "--method", "dora", "--json")
    first = run(capsys, *args)[1]
    assert run(capsys, *args)[1] == first


def test_quantized_checkpoint_needs_qlora(capsys):
    code, _, err = run(capsys, "check", "--model", "Qwen/Qwen-7B-Chat-Int4", "--gpu", "rtx-4090")
    assert code == 2 and "--method qlora" in err
    code, out, _ = run(capsys, "check", "--model", "Qwen/Qwen-7B-Chat-Int4", "--gpu", "rtx-4090",
                       "--method", "qlora", "--json")
    assert json.loads(out)["config"]["quant_format"] == "gptq"


def test_check_reports_throughput_time_and_cost(capsys):
    code, out, _ = run(capsys, "check", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                       "--num-gpus", "8", "--zero", "2", "--pricing", "rent", "--tokens", "1e9",
                       "--json")
    doc = json.loads(out)
    assert code == 0
    t = doc["throughput"]
    assert t["tokens_per_s"] > 0 and 0 < t["mfu"] < 1 and t["limited_by"]
    # the efficiency is the framework's: the SFT default (HF Trainer) runs ZeRO-2 through
    # DeepSpeed at its own measured rate; the DeepSpeed engine profile brings DeepSpeed's
    assert doc["framework"]["id"] == "hf-trainer" and t["stack"] == "hf"
    code, out, _ = run(capsys, "check", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                       "--num-gpus", "8", "--zero", "2", "--framework", "hf-deepspeed",
                       "--json")
    assert json.loads(out)["throughput"]["stack"] == "deepspeed"
    assert doc["cost"]["basis"] == "rent" and doc["cost"]["usd"] > 0
    # rent cost = the offer's bill: whole instances x rate x the job's hours billed
    assert_billed(doc["cost"], doc["time_hours"], gpus=8)
    assert doc["time_hours"] == pytest.approx(1e9 / t["tokens_per_s"] / 3600, rel=1e-6)


def test_job_defined_twice_is_bad_input(capsys):
    code, _, err = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--tokens", "1e9",
                       "--steps", "100")
    assert code == 2 and "one way only" in err


def test_validate_throughput_file(capsys):
    from planner.catalog.load import shipped_validation_dir

    f = shipped_validation_dir() / "throughput_cases.yaml"
    code, out, _ = run(capsys, "validate", str(f), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["training"]["predicted"] >= 30
    assert any(c["predicted"] is None and c["reason"] for c in doc["cases"])


def test_plan_main_job(capsys):
    code, out, _ = run(capsys, "plan", "--budget", "3000", "--model", "7b", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "optimal"
    p = doc["plan"]
    for key in ("gpu", "num_gpus", "num_hosts", "method", "lora_rank", "optimizer", "zero_stage",
                "fsdp", "tp", "pp", "dp", "offload", "checkpointing", "micro_batch_size",
                "grad_accum", "global_batch_size", "seq_len", "memory", "throughput",
                "time_hours", "cost"):
        assert key in p
    assert p["cost"]["usd"] <= 3000
    assert p["micro_batch_size"] * p["grad_accum"] * p["dp"] == p["global_batch_size"] == 64
    assert p["memory"]["per_gpu_gib"] <= p["memory"]["capacity_gib"] * 0.95
    assert {b["name"] for b in doc["binding"]} >= {"gpu_memory", "budget"}


def test_plan_infeasible_exit_1_with_fix(capsys):
    code, out, _ = run(capsys, "plan", "--model", "70b", "--budget", "2000", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "infeasible" and doc["plan"] is None
    assert any(c["name"] == "budget" and c["fix"].startswith("budget >= $")
               for c in doc["conflicts"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--budget", "-5"], "--budget -5"),
        (["--budget", "0"], "--budget 0"),
        (["--gpus", "rtx-4091"], "unknown GPU 'rtx-4091'"),
        (["--method", "full", "--lora-rank", "16"], "--lora-rank 16 needs"),
        (["--tp", "3"], "--tp 3 must divide"),
        (["--num-gpus", "6", "--tp", "4"], "does not divide --num-gpus 6"),
    ],
)
def test_plan_bad_input(capsys, args, needle):
    code, _, err = run(capsys, "plan", "--model", "7b", *args)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_plan_json_is_byte_identical(capsys):
    args = ("plan", "--model", "qwen2.5-3b", "--budget", "20000", "--method", "lora", "--json")
    first = run(capsys, *args)[1]
    assert run(capsys, *args)[1] == first


def test_plan_rent_costs_the_job(capsys):
    code, out, _ = run(capsys, "plan", "--model", "7b", "--pricing", "rent", "--tokens", "2e8",
                       "--json")
    doc = json.loads(out)
    assert code == 0 and doc["plan"]["cost"]["basis"] == "rent"
    p = doc["plan"]
    assert_billed(p["cost"], p["time_hours"], gpus=p["num_gpus"])


def assert_billed(cost: dict, hours: float, *, gpus: int) -> None:
    """A rental's cost is its offer's bill: instances x $/h x the hours billed (the job's hours
    rounded up to the increment, at least the minimum), the instances holding the GPUs."""
    import math

    o = cost["offer"]
    assert o["instances"] == math.ceil(gpus / o["gpus_per_instance"])
    inc = o["billing_increment_hours"]
    want = max(o["minimum_hours"], math.ceil(hours / inc * (1 - 1e-9)) * inc)
    assert o["billed_hours"] == pytest.approx(want, rel=1e-9) and want >= hours * (1 - 1e-9)
    assert cost["usd"] == pytest.approx(o["instances"] * o["usd_per_hour"] * want, rel=1e-9)


def test_plan_deadline_is_met(capsys):
    loose = json.loads(run(capsys, "plan", "--model", "7b", "--budget", "20000", "--json")[1])
    hours = loose["plan"]["time_hours"] / 2
    code, out, _ = run(capsys, "plan", "--model", "7b", "--budget", "20000", "--max-hours",
                       str(hours), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["plan"]["time_hours"] <= hours
    assert doc["plan"]["cost"]["usd"] >= loose["plan"]["cost"]["usd"]


def test_plan_time_objective_spends_the_budget_on_speed(capsys):
    cheap = json.loads(run(capsys, "plan", "--model", "7b", "--budget", "20000", "--json")[1])
    fast = json.loads(run(capsys, "plan", "--model", "7b", "--budget", "20000", "--objective",
                          "time", "--json")[1])
    assert fast["status"] == "optimal" and fast["plan"]["cost"]["usd"] <= 20000
    assert fast["plan"]["time_hours"] <= cheap["plan"]["time_hours"]
    assert fast["plan"]["cost"]["usd"] >= cheap["plan"]["cost"]["usd"]


def test_plan_time_objective_needs_a_limit(capsys):
    code, _, err = run(capsys, "plan", "--model", "7b", "--objective", "time")
    assert code == 2 and "--budget" in err


def test_plan_deadline_conflict_fixes_are_solved(capsys):
    code, out, _ = run(capsys, "plan", "--model", "7b", "--budget", "3000", "--max-hours", "1",
                       "--json")
    doc = json.loads(out)
    assert code == 1
    fixes = {c["name"]: c["fix"] for c in doc["conflicts"]}
    assert fixes["budget"].startswith("budget >= $") and fixes["max_hours"].startswith(
        "max-hours >= ")
    # the fix is real: the deadline it names is met within the budget
    hours = float(fixes["max_hours"].split(">=")[1])
    code, out, _ = run(capsys, "plan", "--model", "7b", "--budget", "3000", "--max-hours",
                       str(hours * 1.001), "--json")
    assert code == 0 and json.loads(out)["plan"]["time_hours"] <= hours * 1.001


def test_pareto_json(capsys):
    code, out, _ = run(capsys, "pareto", "--model", "qwen2.5-1.5b", "--gpus", "rtx-3090,rtx-4090",
                       "--max-gpus", "8", "--budget", "20000", "--max-points", "4", "--json")
    doc = json.loads(out)
    assert code == 0 and 1 <= len(doc["points"]) <= 4
    costs = [p["cost_usd"] for p in doc["points"]]
    hours = [p["time_hours"] for p in doc["points"]]
    assert costs == sorted(costs) and hours == sorted(hours, reverse=True)


def test_pareto_marks_points_whose_tie_break_the_time_limit_stopped(monkeypatch, capsys):
    """A Pareto point whose tie-break chain ended at the time limit is reported as feasible,
    not proven optimal (json status, a starred row and a footnote in the table)."""
    import dataclasses

    import planner.solver.solve as solve

    real = solve.solve_timed
    monkeypatch.setattr(solve, "solve_timed", lambda *a, **k: dataclasses.replace(
        real(*a, **k), status="feasible"))
    argv = ["pareto", "--model", "qwen2.5-1.5b", "--gpus", "rtx-4090", "--max-gpus", "4",
            "--max-points", "2"]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0 and {p["status"] for p in json.loads(out)["points"]} == {"feasible"}
    from planner.outputs.report import report_html

    assert "not proven optimal" in report_html(None, json.loads(out))
    code, out, _ = run(capsys, *argv)
    assert " *" in out and "not proven optimal" in out
    monkeypatch.setattr(solve, "solve_timed", real)
    code, out, _ = run(capsys, *argv, "--json")
    assert {p["status"] for p in json.loads(out)["points"]} == {"optimal"}


def test_a_plan_failing_the_recheck_is_one_line_exit_3(monkeypatch, capsys):
    import planner.solver.solve as solve

    monkeypatch.setattr(solve, "check_plan", lambda space, plan: ["memory 99 GiB > 22 GiB"])
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "qwen2.5-0.5b", "--gpus", "rtx-4090", "--max-gpus", "2"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 3 and "\n" not in err and "re-check" in err


@pytest.mark.parametrize("argv, named", [
    (["check", "--model", "", "--gpu", "h100-sxm"], "--model is empty"),
    (["check", "--model", "{binary}", "--gpu", "h100-sxm"], "not UTF-8 text"),
    (["catalog", "gpus", "--catalog", "{empty}"], "holds none of"),
])
def test_more_bad_inputs_are_one_line(argv, named, tmp_path, capsys):
    binary = tmp_path / "c.json"
    binary.write_bytes(b"\xff\xfe")
    (tmp_path / "empty").mkdir()
    argv = [a.format(binary=binary, empty=tmp_path / "empty") for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in err and named in err


def _plan_json(capsys, *args: str) -> dict:
    code, out, _ = run(capsys, "plan", *args, "--json")
    assert code == 0, out
    return json.loads(out)


def test_binding_only_where_relaxing_the_rule_changes_the_plan(capsys):
    # issue 19 item 7: a 7B rental with a $3,000 budget costs $236 and is limited by its global
    # batch (64 sequences: dp <= 64), not by the money: 10 % more budget gives the same plan, so
    # the budget is not binding (main printed BINDING here, on a rounding of the step time)
    args = ("--model", "7b", "--pricing", "rent", "--tokens", "1e9", "--objective", "time")
    doc = _plan_json(capsys, *args, "--budget", "3000")
    rule = next(b for b in doc["binding"] if b["name"] == "budget")
    loose = _plan_json(capsys, *args, "--budget", "3300")
    assert loose["plan"]["time_hours"] == pytest.approx(doc["plan"]["time_hours"], rel=1e-5)
    assert rule["binding"] is False and rule["relaxed"] is None and rule["slack"] > 0.5
    code, out, _ = run(capsys, "plan", *args, "--budget", "3000")
    row = next(line for line in out.splitlines() if line.startswith("budget "))
    assert "BINDING" not in row and "3,000" in row
    # a purchase for time with $6,000 is held back by its budget: $6,600 buys a faster plan
    doc = _plan_json(capsys, "--model", "7b", "--budget", "6000", "--objective", "time")
    rule = next(b for b in doc["binding"] if b["name"] == "budget")
    loose = _plan_json(capsys, "--model", "7b", "--budget", "6600", "--objective", "time")
    assert rule["binding"] is True and rule["relaxed"].startswith("with budget $6,600: ")
    assert loose["plan"]["time_hours"] < doc["plan"]["time_hours"]
    assert f"{loose['plan']['time_hours']:,.2f} h" in rule["relaxed"]


def _fixes(doc: dict) -> list[str]:
    return [f for c in doc["conflicts"] for f in c["fix"].split(" or ")]


def _with_fix(args: tuple[str, ...], fix: str) -> list[str]:
    """The request's flags with one suggested fix applied: '--flag value' pairs replace the
    request's, 'with budget >= $N' sets the budget; the words in brackets are commentary."""
    words = fix.split(" (")[0].split()
    new: dict[str, str | None] = {}
    for i, w in enumerate(words if words[0].startswith("--") else ()):
        if w.startswith("--"):  # a flag, with its value unless it is a switch
            nxt = words[i + 1] if i + 1 < len(words) else "--"
            new[w] = None if nxt.startswith("--") else nxt
    if "with budget >= $" in fix:
        new = {words[0]: words[1], "--budget": fix.split("$")[1].split()[0].replace(",", "")}
    out, it = [], iter(args)
    for flag in it:
        value = next(it)
        out += [flag, new.pop(flag, None) or value]
    return out + [w for k, v in new.items() for w in (k, v) if w is not None]


def _assert_each_fix_plans(capsys, args: tuple[str, ...], fixes: list[str]) -> list[dict]:
    plans = []
    for fix in fixes:
        if fix.startswith("--"):
            code, out, _ = run(capsys, "plan", *_with_fix(args, fix), "--json")
            assert code == 0, (fix, out)
            plans.append(json.loads(out)["plan"])
    return plans


def test_a_pinned_gpu_count_is_kept_before_it_is_dropped(capsys):
    # issue 19 item 7: 6 GPUs cannot split a global batch of 64 evenly; main answered "leave
    # --num-gpus open (1 works)" first (or only, at $3,000). The nearest global batch that 6
    # divides keeps the user's GPUs, then the nearest other count; dropping the pin comes last
    args = ("--model", "7b", "--budget", "10000", "--num-gpus", "6")
    code, out, _ = run(capsys, "plan", *args, "--json")
    fixes = _fixes(json.loads(out))
    assert code == 1 and fixes[0] == "--global-batch 66 (keeps --num-gpus 6)"
    assert fixes[1] == "--num-gpus 4" and fixes[-1].startswith("leave --num-gpus open")
    kept, other = _assert_each_fix_plans(capsys, args, fixes)
    assert kept["num_gpus"] == 6 and kept["global_batch_size"] == 66
    assert other["num_gpus"] == 4
    # with $3,000 no 6 GPUs can be bought: keeping them needs the budget the solver finds
    args = ("--model", "7b", "--budget", "3000", "--num-gpus", "6")
    code, out, _ = run(capsys, "plan", *args, "--json")
    fixes = _fixes(json.loads(out))
    assert code == 1 and fixes[0].startswith("--global-batch 66 with budget >= $")
    assert fixes[-1].startswith("leave --num-gpus open")
    kept, = _assert_each_fix_plans(capsys, args, fixes[:1])
    need = float(fixes[0].split("$")[1].split()[0].replace(",", ""))
    assert kept["num_gpus"] == 6 and kept["cost"]["usd"] == pytest.approx(need, abs=0.5)


def test_memory_fixes_change_the_pinned_value_first_and_really_plan(capsys):
    # micro-batch 8 of a 7B LoRA does not fit a 24 GB RTX 4090: the largest micro-batch that
    # plans (4; main said 1) comes first, then other GPU types; every fix really plans (point
    # estimates: at the default p90 memory band the largest is 2)
    args = ("--model", "7b", "--budget", "9000", "--gpus", "rtx-4090", "--micro-batch", "8",
            "--method", "lora", "--confidence", "0")
    code, out, _ = run(capsys, "plan", *args, "--json")
    fixes = _fixes(json.loads(out))
    assert code == 1 and fixes[0] == "--micro-batch 4"
    plans = _assert_each_fix_plans(capsys, args, fixes)
    assert plans[0]["micro_batch_size"] == 4 and plans[0]["gpu"] == "rtx-4090"
    code, _, _ = run(capsys, "plan", *_with_fix(args, "--micro-batch 8"))
    assert code == 1
    # a pinned sharding: a stronger stage keeps the pin's intent before leaving it open
    args = ("--model", "3b", "--budget", "20000", "--gpus", "rtx-4090", "--num-gpus", "4",
            "--method", "full", "--sharding", "none", "--offload", "none", "--confidence", "0")
    code, out, _ = run(capsys, "plan", *args, "--json")
    fixes = _fixes(json.loads(out))
    assert code == 1 and fixes[0].startswith("--sharding zero")
    assert _assert_each_fix_plans(capsys, args, fixes[:1])[0]["zero_stage"] >= 2
    # full fine-tuning on $3,000 of RTX 4090s: micro-batch 1 fits the memory but not the
    # budget, so it is no fix (main suggested it)
    args = ("--model", "7b", "--budget", "3000", "--gpus", "rtx-4090", "--micro-batch", "16",
            "--method", "full", "--confidence", "0")
    code, out, _ = run(capsys, "plan", *args, "--json")
    fixes = _fixes(json.loads(out))
    assert code == 1 and not any(f.startswith("--micro-batch") for f in fixes)
    _assert_each_fix_plans(capsys, args, fixes)


def test_pipelining_across_hosts_says_what_the_flat_layout_takes(capsys):
    # issue 19 item 5: 7 owned RTX 3090s were pipelined pp=7 over 2 hosts without a word (an
    # 8-slot host now holds 7; 14 span two). The note names the best plan without pipelining;
    # its figures are those of that plan
    args = ("--model", "7b", "--pricing", "owned", "--gpus", "rtx-3090", "--tokens", "1e8",
            "--method", "full", "--framework", "nemo-automodel")
    n = 14  # global batch 64 has no flat split over 14 GPUs (dp 14, or dp 7 x tp 2)
    doc = _plan_json(capsys, *args, "--num-gpus", str(n))
    p = doc["plan"]
    assert p["pp"] > 1 and p["num_hosts"] > 1
    note = next(n for n in doc["notes"] if n.startswith("pipeline: "))
    flat_n = int(note.split("without pipelining: ")[1].split(" x ")[0])
    flat = _plan_json(capsys, *args, "--num-gpus", str(flat_n), "--pp", "1")["plan"]
    assert flat_n < n and f"{flat['time_hours']:,.1f} h against {p['time_hours']:,.1f} h" in note
    assert ("it is faster" in note) == (p["time_hours"] < flat["time_hours"])
    assert f"{n} GPUs have no plan without pipelining" in note
    for k in range(flat_n + 1, n):  # the counts between have no flat plan: that is the reason
        code, _, _ = run(capsys, "plan", *args, "--num-gpus", str(k), "--pp", "1")
        assert code == 1
    # a purchase: the same request with --pp 1 is the comparison (4 GPUs pinned: the budget
    # buys two 2-GPU desktops, not the 8-slot rig; a 13B, whose full training the 4-GPU hosts
    # cannot hold within the memory band; an 8B fits one with tp 4 since the 2026-11-26 bands)
    args = ("--model", "13b", "--budget", "8000", "--gpus", "rtx-3090", "--method", "full",
            "--framework", "nemo-automodel", "--num-gpus", "4")
    doc = _plan_json(capsys, *args)
    p, note = doc["plan"], next(n for n in doc["notes"] if n.startswith("pipeline: "))
    flat = _plan_json(capsys, *args, "--pp", "1")["plan"]
    assert p["pp"] > 1 and p["num_hosts"] > 1 and flat["pp"] == 1
    assert f"${flat['cost']['usd']:,.0f}, {flat['time_hours']:,.1f} h" in note
    assert (p["cost"]["usd"], p["time_hours"]) < (flat["cost"]["usd"], flat["time_hours"])
    # a plan on one host, or without stages, has no such note
    doc = _plan_json(capsys, "--model", "7b", "--budget", "3000")
    assert doc["plan"]["pp"] == 1 and not any(n.startswith("pipeline: ") for n in doc["notes"])


@pytest.mark.parametrize("name, gpu", [
    ("RTX 5090", "rtx-5090"), ("NVIDIA H200", "h200-sxm"), ("4090", "rtx-4090"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("AMD Instinct MI300X", "mi300x"),
    ("RTX 6000 Ada", "rtx-6000-ada"), ("h100-sxm", "h100-sxm"), ("A800", "a800-80gb"),
])
def test_gpu_names_as_vendors_write_them(name, gpu):
    """A GPU name leads to its catalog id when it names one: case, spaces, the vendor and brand
    words do not matter, and a name the id begins or ends with finds it (catalog.gpu_names)."""
    from planner.catalog.load import load_catalog

    assert load_catalog().gpu(name).id == gpu


def test_an_ambiguous_gpu_name_names_its_variants():
    from planner.catalog.load import load_catalog
    from planner.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="h100-nvl, h100-pcie, h100-sxm: name the variant"):
        load_catalog().gpu("H100")
