"""One vocabulary for what is open (issue 16): a plan request's searched TrainConfig fields as
domains (a pin is one value, an open field its values in preference order), the candidates as
their product under the one set of combination rules that validate_config also raises."""

from __future__ import annotations

import pytest

from planner.catalog.domains import Choice, choices
from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest, validate_plan_request
from planner.catalog.request import LORA_RANKS, OFFLOADS, SHARDING_FIELDS, TrainConfig
from planner.catalog.request_checks import choice_error, validate_config
from planner.errors import PlannerError

CAT = load_catalog()
RL = dict(workload="grpo", prompt_len=256, response_len=256)


def _domains(**kw):
    req = PlanRequest(model=kw.pop("model", "7b"), **kw)
    return req.domains(model=CAT.model(req.model).spec, per_node=8)


def test_a_pin_is_one_value_and_an_open_field_its_values_in_preference_order():
    d = _domains()
    assert d[("method", "lora_rank")] == (("full", None), ("lora", 16), ("dora", 16),
                                          ("qlora", 16))
    assert d["optimizer"] == ("adamw",)  # the request's default is a pin
    assert d[("zero_stage", "fsdp")] == ((0, False), (1, False), (2, False), (3, False))
    assert d["offload"] == OFFLOADS and d["checkpointing"] == ("none", "full")
    assert d[("placement", "role_gpus")] == (("colocate", None),)
    assert d["micro_batch_size"] == (1, 2, 4, 8, 16, 32)
    pinned = _domains(method="lora", lora_rank="auto", sharding="fsdp", tp=2,
                      micro_batch_size=4, checkpointing="full")
    assert pinned[("method", "lora_rank")] == tuple(("lora", r) for r in LORA_RANKS)
    assert pinned[("zero_stage", "fsdp")] == ((0, True),)
    assert (pinned["tp"], pinned["micro_batch_size"], pinned["checkpointing"]) == \
        ((2,), (4,), ("full",))
    assert _domains(workload="pretrain")[("method", "lora_rank")] == (("full", None),)


def test_candidates_are_the_product_filtered_by_the_rules_in_preference_order():
    got = choices(_domains(optimizer="auto"))
    # per method (4) x optimizer (2) x checkpointing (2): no sharding without offload (1),
    # ZeRO-1/2 with optimizer offload or none (2 each), ZeRO-3 with every offload (3)
    assert len(got) == 4 * 2 * 2 * 8 == len(set(got))
    assert all(choice_error(c) is None for c in got)
    assert got[0] == Choice("full", None, "adamw", 0, False, "none", "none")
    assert got[1] == got[0]._replace(checkpointing="full")  # the innermost open field
    assert got[-1] == Choice("qlora", 16, "adamw-8bit", 3, False, "optimizer+params", "full")
    assert not any(c.offload == "optimizer+params" and c.zero_stage != 3 for c in got)


def test_rl_placements_split_gives_each_role_a_group_and_parks_nothing():
    got = choices(_domains(**RL))
    seen = {(c.placement, c.offload_idle) for c in got}
    assert seen == {("colocate", False), ("colocate", True), ("separate", False),
                    ("separate", True), ("split", False)}
    split = next(c for c in got if c.placement == "split")
    assert split.role_gpus == (("actor", 1), ("reference", 1))
    assert split.groups == 3 and split.role_names == ("actor", "reference")
    assert {c.rollout_tp for c in got} == set(_domains(**RL)["rollout_tp"]) and \
        len({c.rollout_tp for c in got}) > 1
    req = PlanRequest(model="7b", **RL)
    own = choices(req.domains(model=CAT.model("7b").spec, per_node=8, trainer_generates=True))
    assert {(c.placement, c.rollout_tp, c.offload_idle) for c in own} == {("colocate", 1, False)}


def test_a_choice_is_a_partial_train_config():
    c = choices(_domains(**RL, placement="split"))[0]
    cfg = TrainConfig(**RL, seq_len=512).model_copy(update=c._asdict())
    assert {k: getattr(cfg, k) for k in c._fields} == c._asdict()


@pytest.mark.parametrize(("pins", "message"), [
    (dict(method="full", lora_rank=16), "--lora-rank 16 needs --method lora, dora or qlora "
     "(got full)"),
    (dict(method="full", lora_rank="auto"), "--lora-rank auto needs --method lora"),
    (dict(offload="optimizer", sharding="none"), "--offload optimizer needs ZeRO"),
    (dict(offload="optimizer+params", sharding="zero2"), "needs the weights sharded"),
])
def test_contradictory_pins_break_train_config_rules_with_their_message(pins, message):
    model = CAT.model("7b").spec
    with pytest.raises(PlannerError) as err:
        validate_plan_request(PlanRequest(model="7b", **pins), model)
    assert message in str(err.value)
    fields = {"method": pins.get("method", "lora"), "lora_rank": pins.get("lora_rank"),
              "offload": pins.get("offload", "none")}
    if isinstance(fields["lora_rank"], int) or pins.get("sharding"):
        zero, fsdp = SHARDING_FIELDS[pins.get("sharding", "none")]
        with pytest.raises(PlannerError) as same:  # check's validate_config: the one message
            validate_config(TrainConfig(**fields, zero_stage=zero, fsdp=fsdp), model)
        assert str(same.value) == str(err.value)


@pytest.mark.parametrize("pins", [dict(offload="optimizer+params"), dict(lora_rank=16),
                                  dict(method="qlora", lora_rank=8, offload="optimizer")])
def test_pins_an_open_field_can_satisfy_are_accepted(pins):
    validate_plan_request(PlanRequest(model="7b", **pins), CAT.model("7b").spec)


@pytest.mark.parametrize(("pins", "fields"), [
    (dict(tp=3), dict(tp=3, num_gpus=3)),
    (dict(tp=2, pp=2, num_gpus=6), dict(tp=2, pp=2, num_gpus=6)),
])
def test_parallel_pins_fail_with_check_s_message(pins, fields):
    """A plan's tp pin and its model-parallel GPUs break the same rules as check's config, with
    the same one line."""
    model = CAT.model("7b").spec
    with pytest.raises(PlannerError) as plan_err:
        validate_plan_request(PlanRequest(model="7b", **pins), model)
    with pytest.raises(PlannerError) as check_err:
        validate_config(TrainConfig(**fields), model)
    assert str(plan_err.value) == str(check_err.value)
    assert "allowed" in str(plan_err.value) or "does not divide --num-gpus" in str(plan_err.value)
