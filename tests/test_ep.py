"""Expert parallelism (TrainConfig.ep): its checks, the command line, validation cases reading
it, and what it changes in memory and step time."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.catalog.request_checks import validate_config
from planner.cli import main
from planner.errors import PlannerError
from planner.validation.case_inputs import case_config

CATALOG = load_catalog()
QWEN3_30B = CATALOG.model("qwen3-30b-a3b").spec
DENSE_7B = CATALOG.model("7b").spec


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_default_ep_is_one():
    assert TrainConfig().ep == 1


@pytest.mark.parametrize("args, words", [
    (("--model", "7b", "--num-gpus", "8", "--ep", "2"), "needs a Mixture-of-Experts model"),
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "3"), "must divide the data x "
     "context parallel GPUs (dp 8 x cp 1 = 8)"),
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "16"), "dp 8 x cp 1 = 8"),
    # tp 2 leaves dp 4: ep 8 does not divide it
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--tp", "2", "--ep", "8"), "dp 4"),
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "0"), "--ep 0"),
    (("--model", "qwen3-30b-a3b", "--num-gpus", "8", "--ep", "2", "--workload", "grpo",
      "--prompt-len", "256", "--response-len", "256"), "expert parallel training is not"),
])
def test_bad_ep_exits_2_with_one_line(capsys, args, words):
    code, out, err = _run(capsys, "check", "--gpu", "h100-sxm", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err


def test_ep_must_divide_the_experts():
    # 128 experts: ep 256 on 256 GPUs divides dp but not the experts
    cfg = TrainConfig(num_gpus=256, ep=256)
    with pytest.raises(PlannerError, match="must divide the 128 routed experts"):
        validate_config(cfg, QWEN3_30B)


def test_ep_is_carved_from_dp_times_cp():
    # dp 2 x cp 4 = 8: ep 8 spans both, as Megatron's expert grid and torchtitan's
    # dp_shard_in_ep do
    validate_config(TrainConfig(num_gpus=8, cp=4, ep=8, seq_len=4096), QWEN3_30B)
    with pytest.raises(PlannerError, match="dp 2 x cp 4 = 8"):
        validate_config(TrainConfig(num_gpus=8, cp=4, ep=16, seq_len=4096), QWEN3_30B)


def test_tune_takes_ep(capsys):
    code, out, _ = _run(capsys, "tune", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm",
                        "--num-gpus", "8", "--zero", "3", "--ep", "8", "--seq-len", "1024")
    assert code in (0, 1) and "qwen3-30b-a3b" in out


def _case(**fields):
    base = {"id": "t", "framework": "megatron-lm", "model": "Qwen/Qwen3-30B-A3B",
            "gpu": "h100-sxm", "num_gpus": 8, "sharding": "megatron", "seq_len": 4096,
            "micro_batch_size": 1, "precision": "bf16", "method": "full", "workload": "sft"}
    return {**base, **fields}


@pytest.mark.parametrize("fields, ep", [
    ({}, 1), ({"ep": 4}, 4), ({"extra": {"ep": 8}}, 8), ({"ep": 2, "extra": {"ep": 8}}, 2),
])
def test_cases_read_ep_or_extra_ep(fields, ep):
    cfg, _ = case_config(_case(**fields), CATALOG)
    assert cfg.ep == ep
