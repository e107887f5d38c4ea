"""Output files (issue 20, part 2): checked before any work, written atomically, never two
outputs to one file or an output onto an input, ``-`` for stdout only where stdout is free, and
the message says whether a file was written or replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from planner.errors import PlannerError
from planner.outputs.files import check_targets, write_atomic
from tests.test_hardening import run_cli

PLAN = ["plan", "--model", "0.5b", "--gpus", "rtx-4090", "--max-gpus", "1"]


@pytest.fixture(scope="module")
def saved_plan(tmp_path_factory) -> Path:
    code, out, err = run_cli([*PLAN, "--json"])
    assert code == 0, err
    path = tmp_path_factory.mktemp("plans") / "plan.json"
    path.write_text(out, encoding="utf-8")
    return path


def solver_must_not_run(monkeypatch):
    """Make any solve fail loudly: a refused output must be found before solving."""
    import planner.solver.solve as solve

    def boom(*_a, **_k):
        raise AssertionError("solved before checking the outputs")

    monkeypatch.setattr(solve, "plan", boom)
    monkeypatch.setattr(solve, "pareto", boom)


@pytest.mark.parametrize("extra, named", [
    (["--export", "deepspeed", "--out", "SAME", "--html", "SAME"], "name the same output"),
    (["--html", "-"], "--html -"),  # created a file named '-' before
    (["--html", "MISSING/r.html"], "does not exist"),  # found only after solving before
    (["--export", "deepspeed", "--out", "MISSING/ds.json"], "does not exist"),
    (["--html", "DIR"], "is a directory"),  # click.Path(dir_okay=False) says so first
])
def test_plan_outputs_are_refused_before_solving(monkeypatch, tmp_path, extra, named):
    solver_must_not_run(monkeypatch)
    (tmp_path / "DIR").mkdir()
    argv = [*PLAN, *(a.replace("SAME", str(tmp_path / "same.x"))
                      .replace("MISSING", str(tmp_path / "missing"))
                      .replace("DIR", str(tmp_path / "DIR")) for a in extra)]
    code, out, err = run_cli(argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and named in err, err
    assert not (tmp_path / "same.x").exists() and not Path("-").exists()


def test_pareto_plot_and_html_to_one_file_are_refused(monkeypatch, tmp_path):
    solver_must_not_run(monkeypatch)
    target = str(tmp_path / "front.svg")
    code, out, err = run_cli(["pareto", "--model", "0.5b", "--plot", target, "--html", target])
    assert code == 2 and "--plot and --html name the same output" in err


def test_export_refuses_to_overwrite_its_input(saved_plan):
    before = saved_plan.read_bytes()
    code, _, err = run_cli(["export", "--format", "deepspeed", "--out", str(saved_plan),
                            str(saved_plan)])
    assert code == 2 and "is the input file" in err
    assert saved_plan.read_bytes() == before  # overwritten before


def test_export_refuses_a_link_to_its_input(saved_plan, tmp_path):
    link = tmp_path / "alias.json"
    link.symlink_to(saved_plan)
    code, _, err = run_cli(["export", "--format", "deepspeed", "--out", str(link),
                            str(saved_plan)])
    assert code == 2 and "is the input file" in err


def test_export_to_stdout_and_replacing_is_said(saved_plan, tmp_path):
    code, out, _ = run_cli(["export", "--format", "deepspeed", "--out", "-", str(saved_plan)])
    assert code == 0 and json.loads(out)["train_batch_size"] and not Path("-").exists()
    target = tmp_path / "ds.json"
    code, _, err = run_cli(["export", "--format", "deepspeed", "--out", str(target),
                            str(saved_plan)])
    assert code == 0 and f"planner: wrote {target} (deepspeed)" in err
    code, _, err = run_cli(["export", "--format", "deepspeed", "--out", str(target),
                            str(saved_plan)])
    assert code == 0 and f"planner: replaced {target} (deepspeed)" in err
    assert [p.name for p in tmp_path.iterdir()] == ["ds.json"]  # no temporary file left


def test_plan_writes_html_and_export(tmp_path):
    html, ds = tmp_path / "r.html", tmp_path / "ds.json"
    code, out, err = run_cli([*PLAN, "--html", str(html), "--export", "deepspeed", "--out",
                              str(ds)])
    assert code == 0 and out.strip()
    assert f"wrote {html}" in err and f"wrote {ds} (deepspeed)" in err
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert json.loads(ds.read_text(encoding="utf-8"))["train_batch_size"]


def test_a_refused_export_prints_no_plan(tmp_path):
    # an RL plan cannot be a DeepSpeed JSON: refused before the plan is printed
    code, out, err = run_cli([*PLAN, "--workload", "grpo", "--prompt-len", "64",
                              "--response-len", "64", "--rollout-batch", "8", "--export",
                              "deepspeed", "--out", str(tmp_path / "ds.json")])
    assert code == 2 and out == "" and "cannot express" in err
    assert not (tmp_path / "ds.json").exists()


def test_a_failing_write_keeps_the_old_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "report.html"
    target.write_text("old report", encoding="utf-8")

    def full_disk(tmp: Path) -> None:
        tmp.write_text("half a rep", encoding="utf-8")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_atomic(target, full_disk)
    assert target.read_text(encoding="utf-8") == "old report"  # truncated before
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_atomic_write_keeps_the_mode_of_a_replaced_file(tmp_path):
    target = tmp_path / "run.sh"
    target.write_text("#!/bin/sh\n", encoding="utf-8")
    target.chmod(0o755)
    assert write_atomic(target, lambda tmp: tmp.write_text("#!/bin/sh\necho\n")) == "replaced"
    assert target.stat().st_mode & 0o777 == 0o755
    assert write_atomic(tmp_path / "new.txt", lambda tmp: tmp.write_text("x")) == "wrote"


def test_check_targets_rules(tmp_path):
    (tmp_path / "in.json").write_text("{}", encoding="utf-8")
    ok = check_targets([("--out", str(tmp_path / "a")), ("--html", None)], stdout_ok=["--out"])
    assert list(ok) == ["--out"]
    assert check_targets([("--out", "-")], stdout_ok=["--out"])["--out"].stdout
    with pytest.raises(PlannerError, match="--html - would mix"):
        check_targets([("--html", "-")])
    with pytest.raises(PlannerError, match="is the input file"):
        check_targets([("--out", str(tmp_path / "in.json"))],
                      inputs=[str(tmp_path / ".." / tmp_path.name / "in.json")])
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(PlannerError, match="not writable"):
            check_targets([("--out", str(locked / "x"))])
