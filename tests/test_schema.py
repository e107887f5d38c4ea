"""The --json documents (issue 20, part 5): schema_version in each, the shipped JSON Schemas equal
the ones generated from planner.outputs.schema's models, real outputs validate against them, the
typed results are exported from planner, and a pareto point can be exported."""

from __future__ import annotations

import contextlib
import copy
import io
import json

import jsonschema
import pytest

import planner
from planner.cli import main
from planner.outputs.schema import DOCUMENTS, SCHEMA_VERSION, json_schema, schema_file, schema_text

RL = ["--workload", "grpo", "--prompt-len", "128", "--response-len", "128"]
COMMANDS = {
    "check": [["check", "--model", "0.5b", "--gpu", "rtx-4090", "--method", "lora"],
              ["check", "--model", "0.5b", "--gpu", "h100-sxm", *RL],
              ["check", "--model", "70b", "--gpu", "rtx-4090"]],  # does not fit: exit 1
    "plan": [["plan", "--model", "0.5b", "--gpus", "rtx-4090", "--max-gpus", "2"],
             ["plan", "--model", "0.5b", "--gpus", "rtx-4090", "--max-gpus", "2",
              "--rollout-batch", "16", *RL],
             ["plan", "--model", "70b", "--gpus", "rtx-4090", "--max-gpus", "1", "--method",
              "full"]],  # infeasible
    "pareto": [["pareto", "--model", "0.5b", "--gpus", "rtx-4090,a100-80gb-sxm", "--max-gpus",
                "4", "--max-points", "3"],
               ["pareto", "--model", "70b", "--gpus", "rtx-4090", "--max-gpus", "1", "--method",
                "full"]],
    "tune": [["tune", "--model", "0.5b", "--gpu", "rtx-4090"],
             ["tune", "--model", "0.5b", "--gpu", "h100-sxm", "--rollout-batch", "16", *RL],
             ["tune", "--model", "70b", "--gpu", "rtx-4090"]],  # nothing fits
}


@pytest.fixture(scope="module")
def documents():
    """Every command's documents, produced once for the module (exit 0 or 1)."""
    docs: dict[str, list[dict]] = {}
    for kind, lines in COMMANDS.items():
        for argv in lines:
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), \
                    pytest.raises(SystemExit) as exc:
                main([*argv, "--json"])
            assert exc.value.code in (0, 1), argv
            docs.setdefault(kind, []).append(json.loads(out.getvalue()))
    return docs


def shipped(kind: str) -> dict:
    return json.loads(schema_file(kind).read_text(encoding="utf-8"))


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_shipped_schema_is_the_generated_one(kind):
    # regenerate with: python -c "from planner.outputs.schema import write_schemas; write_schemas()"
    assert schema_file(kind).read_text(encoding="utf-8") == schema_text(kind)
    assert schema_file(kind).name == f"{kind}.v{SCHEMA_VERSION}.json"
    jsonschema.Draft202012Validator.check_schema(shipped(kind))


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_real_outputs_validate_against_the_shipped_schema(kind, documents):
    validator = jsonschema.Draft202012Validator(shipped(kind))
    for doc in documents[kind]:
        assert doc["schema_version"] == SCHEMA_VERSION
        errors = [e.message for e in validator.iter_errors(doc)]
        assert errors == [], errors[:3]
        DOCUMENTS[kind].model_validate(doc)  # the typed model reads it back


def test_the_samples_cover_every_outcome(documents):
    assert {d["fits"] for d in documents["check"]} == {True, False}
    assert {d["plan"] is None for d in documents["plan"]} == {True, False}
    assert {d["status"] for d in documents["tune"]} == {"found", "infeasible"}
    assert any(d["points"] for d in documents["pareto"]) and \
        any(not d["points"] for d in documents["pareto"])
    assert any("phases_s" in d["throughput"] for d in documents["check"])  # an RL document


@pytest.mark.parametrize("kind, path, value", [
    ("plan", ("plan", "num_gpus"), "2"),  # a number turned into a string
    ("check", ("memory", "per_gpu_gib"), None),
    ("tune", ("status",), "maybe"),
    ("pareto", ("points", 0, "plan", "config", "method"), "lorra"),
])
def test_the_schema_rejects_a_changed_document(kind, path, value, documents):
    doc = copy.deepcopy(documents[kind][0])  # a plan, a front, a fit, settings found
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert list(jsonschema.Draft202012Validator(shipped(kind)).iter_errors(doc))
    extra = copy.deepcopy(documents[kind][0]) | {"surprise": 1}
    assert list(jsonschema.Draft202012Validator(shipped(kind)).iter_errors(extra))


def test_typed_results_are_exported():
    for name in ("Plan", "PlanResult", "TuneResult", "Binding", "Conflict", "PlanRequest",
                 "TrainConfig", "PlannerError", "json_schema", "SCHEMA_VERSION"):
        assert name in planner.__all__ and getattr(planner, name) is not None
    assert planner.json_schema("plan") == json_schema("plan")


def test_a_pareto_point_exports_like_its_plan(documents, tmp_path, capsys):
    doc = next(d for d in documents["pareto"] if d["points"])
    saved = tmp_path / "front.json"
    saved.write_text(json.dumps(doc), encoding="utf-8")
    point = tmp_path / "point.json"
    point.write_text(json.dumps(doc["points"][1]), encoding="utf-8")
    body = tmp_path / "plan.json"
    body.write_text(json.dumps({"plan": doc["points"][1]["plan"]}), encoding="utf-8")
    outs = []
    for argv in (["--point", "1", str(saved)], [str(point)], [str(body)]):
        with pytest.raises(SystemExit) as exc:
            main(["export", "--format", "deepspeed", *argv])
        out, err = capsys.readouterr()
        assert exc.value.code == 0, err
        outs.append(out)
    assert outs[0] == outs[1] == outs[2] and json.loads(outs[0])["train_batch_size"]
    with pytest.raises(SystemExit) as exc:  # the whole front: which point?
        main(["export", "--format", "deepspeed", str(saved)])
    assert exc.value.code == 2 and "--point" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["export", "--format", "deepspeed", "--point", "99", str(saved)])
    assert exc.value.code == 2 and "--point 99" in capsys.readouterr().err


def test_export_reads_the_versions_it_knows(documents):
    from planner.errors import PlannerError
    from planner.outputs.export import export_plan

    doc = next(d for d in documents["plan"] if d["plan"])
    assert export_plan(doc, "deepspeed").text
    assert export_plan({k: v for k, v in doc.items() if k != "schema_version"}, "deepspeed")
    for version in (SCHEMA_VERSION + 1, 0, "1"):
        with pytest.raises(PlannerError, match="schema_version"):
            export_plan(doc | {"schema_version": version}, "deepspeed")
