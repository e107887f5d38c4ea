"""`plan --platform`: a purchase or owned plan on one host platform (the user's own nodes from a
--catalog overlay: GPUs per host, RAM, network), honoured by the solver and the reference."""

from __future__ import annotations

import pytest
import yaml

from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.cli import main
from planner.errors import PlannerError
from planner.solver.solve import plan
from planner.validation.reference import differential

CAT = load_catalog()


@pytest.fixture(scope="module")
def ethernet(tmp_path_factory):
    """An overlay with one 8-GPU SXM node like the shipped HGX host, on 100 Gb/s Ethernet."""
    folder = tmp_path_factory.mktemp("cat")
    doc = CAT.platform("hgx-8gpu-sxm").model_dump(mode="json")
    doc.update(id="our-h100-node", name="our 8x H100 nodes, 100 Gb Ethernet",
               inter_node_bandwidth_gbps=12.5)
    (folder / "platforms").mkdir()
    (folder / "platforms" / "our-h100-node.yaml").write_text(yaml.safe_dump(doc))
    return str(folder)


def test_an_owned_plan_runs_on_the_named_hosts_at_their_network(ethernet):
    cat = load_catalog((ethernet,))
    kw = dict(model="70b", pricing="owned", gpus=("h100-sxm",), num_gpus=16, method="full",
              tokens=1e9)
    ours = plan(PlanRequest(**kw, platform="our-h100-node"), cat).plan
    hgx = plan(PlanRequest(**kw, platform="hgx-8gpu-sxm"), cat).plan
    assert ours.platform == "our-h100-node" and hgx.platform == "hgx-8gpu-sxm"
    assert ours.num_hosts == hgx.num_hosts == 2
    # a 32x slower network between the two hosts: the fastest plan there is slower
    assert ours.time_hours > 2 * hgx.time_hours
    anywhere = plan(PlanRequest(**kw), cat).plan
    assert anywhere.time_hours <= hgx.time_hours * (1 + 1e-9)


def _run(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code, capsys.readouterr().err


def test_a_platform_is_bad_input_when_unknown_or_rented(capsys):
    code, err = _run(capsys, "plan", "--model", "7b", "--platform", "hgx-8gpu")
    assert code == 2 and "did you mean: hgx-8gpu-sxm" in err and len(err.splitlines()) == 1
    code, err = _run(capsys, "plan", "--model", "7b", "--pricing", "rent", "--platform",
                     "hgx-8gpu-sxm")
    assert code == 2 and "rentals run on the providers' instances" in err
    with pytest.raises(PlannerError, match="names hosts to buy or own"):
        plan(PlanRequest(model="7b", pricing="rent", platform="hgx-8gpu-sxm"), CAT)


def test_a_gpu_the_platform_does_not_take_is_left_out_with_the_reason():
    result = plan(PlanRequest(model="0.5b", gpus=("rtx-4090", "h100-sxm"),
                              platform="hgx-8gpu-sxm", budget_usd=10**6), CAT)
    assert result.plan is not None and result.plan.gpu == "h100-sxm"
    res = plan(PlanRequest(model="0.5b", gpus=("rtx-4090",), platform="hgx-8gpu-sxm",
                           budget_usd=10**6), CAT)
    assert res.plan is None and res.status == "infeasible"
    assert "hgx-8gpu-sxm takes consumer GPUs" in res.conflicts[0].detail
    assert "--platform hgx-8gpu-sxm takes" in res.conflicts[0].fix


@pytest.mark.parametrize("kw", [
    dict(model="qwen2.5-1.5b", gpus=("rtx-4090", "a100-80gb-sxm"), max_gpus=8,
         platform="workstation-4gpu-epyc-rome", budget_usd=20000, global_batch_size=16),
    dict(model="qwen2.5-1.5b", gpus=("h100-sxm",), max_gpus=16, objective="time",
         platform="hgx-8gpu-sxm", budget_usd=10**6, tokens=1e8, global_batch_size=16),
], ids=["workstation-cost", "hgx-time"])
def test_platform_plans_agree_with_the_reference(kw):
    verdict = differential(PlanRequest(**kw), CAT)
    assert verdict.agree, verdict.detail
