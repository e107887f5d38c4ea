"""What an RL iteration's engine and roles take from the run's configuration: vLLM V0's host
work per sequence, the engine's max_num_seqs, passes that keep padding (verl without
use_remove_padding), PPO scored by a function (no reward model), and real tokens per step."""

from __future__ import annotations

import pytest

from planner.catalog.frameworks import resolve, unlaunchable
from planner.catalog.load import load_catalog
from planner.catalog.plan_request import PlanRequest
from planner.catalog.request import TrainConfig
from planner.cli import main
from planner.errors import PlannerError
from planner.models import decode
from planner.models.decode import estimate_decode
from planner.models.memory import GIB
from planner.models.rltime import estimate_rl_step, rollout_host_per_seq_s
from planner.models.rollout import engine
from planner.models.workloads import roles, workload_phases
from planner.outputs.export import export_plan
from planner.solver.solve import plan

CAT = load_catalog()
QWEN7 = CAT.model("qwen2.5-7b").spec
H100 = CAT.gpu("h100-sxm")


def ppo(**kw) -> TrainConfig:
    base = dict(workload="ppo", method="full", fsdp=True, num_gpus=8, prompt_len=100,
                response_len=200, micro_batch_size=8, rollout_batch=1024,
                gpu_memory_utilization=0.5, rollout_eager=True)
    return TrainConfig(**(base | kw))


def test_v0_host_work_adds_per_sequence_to_every_decoding_step():
    """Each step of a batch of b sequences takes b x the per-sequence host time more; the
    eager floor and the GPU's work are unchanged, so the difference is exactly that."""
    kw = dict(prompt_len=100, response_len=200, batch=256, host_floor_s=0.01)
    base = estimate_decode(QWEN7, H100, **kw)
    v0 = estimate_decode(QWEN7, H100, host_per_seq_s=1e-4, **kw)
    assert v0.decode_s - base.decode_s == pytest.approx(200 * 256 * 1e-4, rel=1e-9)
    assert v0.prefill_s == base.prefill_s


def test_v0_term_applies_to_vllm_v0_runs_only():
    """The iteration's generation pays the V0 term only where the run's vLLM was V0."""
    assert decode.VLLM_V0_HOST_S_PER_SEQ > 0  # fitted on VLLM_V0_CASES
    assert rollout_host_per_seq_s(ppo()) == 0.0
    assert rollout_host_per_seq_s(ppo(rollout_v0=True)) == decode.VLLM_V0_HOST_S_PER_SEQ
    assert rollout_host_per_seq_s(ppo(rollout_v0=True, rollout_engine="sglang")) == 0.0
    v1 = estimate_rl_step(QWEN7, H100, ppo(), stack="hf")
    v0 = estimate_rl_step(QWEN7, H100, ppo(rollout_v0=True), stack="hf")
    assert v0.phases["generation"] > v1.phases["generation"]
    assert {k: v for k, v in v0.phases.items() if "generation" not in k} == \
        {k: v for k, v in v1.phases.items() if "generation" not in k}
    assert any("V0" in n for n in v0.notes)


def test_engine_concurrency_is_capped_at_the_frameworks_max_num_seqs():
    """With room in the KV cache for more, an engine decodes at most max_num_seqs sequences at
    once: vLLM's default 256 unless the framework passes its own."""
    default = engine(QWEN7, ppo(), H100.memory_gib * 2**30)
    wide = engine(QWEN7, ppo(rollout_max_seqs=1024), H100.memory_gib * 2**30)
    assert default.concurrency == 128  # 1024 prompts over 8 one-GPU engines: the share
    big = ppo(rollout_batch=8192)
    assert engine(QWEN7, big, H100.memory_gib * 2**30).concurrency == 256
    assert engine(QWEN7, big.model_copy(update={"rollout_max_seqs": 1024}),
                  H100.memory_gib * 2**30).concurrency > 256
    assert wide.concurrency == default.concurrency


def test_verl_profile_states_its_max_num_seqs():
    profile = resolve(CAT, "verl")
    assert profile.value("rollout_max_num_seqs") == 256


def test_a_padded_role_sees_its_own_tokens_per_sequence():
    """role_seq_lens gives the critic the padded length; the others keep the mean. Its passes
    then take longer in proportion to the tokens (within the attention's share)."""
    cfg = ppo(role_seq_lens=(("critic", 1536),))
    by_name = {r.name: r for r in roles(QWEN7, cfg)}
    assert by_name["critic"].cfg.seq_len == 1536
    assert by_name["actor"].cfg.seq_len == 300 and by_name["reference"].cfg.seq_len == 300
    packed = estimate_rl_step(QWEN7, H100, ppo(), stack="hf").phases
    padded = estimate_rl_step(QWEN7, H100, cfg, stack="hf").phases
    assert padded["actor forward"] == packed["actor forward"]
    assert 4.5 < padded["critic forward"] / packed["critic forward"] < 6.5
    assert padded["critic update"] > 4 * packed["critic update"]


def test_ppo_scored_by_a_function_has_no_reward_model():
    """--reward-function drops PPO's reward model: no reward role, no reward pass, no reward
    weights in memory; the critic stays."""
    with_rm, fn = ppo(), ppo(reward_function=True)
    assert [r.name for r in roles(QWEN7, with_rm)] == ["actor", "critic", "reference", "reward"]
    assert [r.name for r in roles(QWEN7, fn)] == ["actor", "critic", "reference"]
    est = estimate_rl_step(QWEN7, H100, fn, stack="hf")
    assert "reward forward" not in est.phases and "critic update" in est.phases
    assert est.step_time_s < estimate_rl_step(QWEN7, H100, with_rm, stack="hf").step_time_s
    phases = workload_phases(QWEN7, fn, "bf16", capacity=H100.memory_gib * GIB)
    assert not any(k.startswith("reward") for ph in phases.values() for k in ph)
    assert any(k.startswith("reward") for ph in workload_phases(
        QWEN7, with_rm, "bf16", capacity=H100.memory_gib * GIB).values() for k in ph)


def test_reward_function_is_ppo_only_and_excludes_a_reward_model():
    from planner.catalog.request_checks import validate_workload
    from planner.catalog.resolve import role_models

    with pytest.raises(PlannerError, match="--reward-function applies to --workload ppo"):
        validate_workload(ppo(workload="grpo", reward_function=True), QWEN7)
    with pytest.raises(PlannerError, match="exclude each other"):
        role_models(CAT, ppo(reward_function=True), None, reward_model="qwen2.5-7b")


def test_rl_tokens_per_step_count_the_real_tokens_of_padding_free_passes():
    """With mean_seq_len the iteration's tokens (and tokens/s) are the real ones, as the
    planner's step-time objective counts them, not prompt + response at their maxima."""
    est = estimate_rl_step(QWEN7, H100, ppo(mean_seq_len=150), stack="hf")
    assert est.tokens_per_step == 1024 * 150
    assert est.tokens_per_s == pytest.approx(1024 * 150 / est.step_time_s)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    got = capsys.readouterr()
    return exc.value.code, got.out, got.err


RL_ARGS = ("--model", "qwen2.5-0.5b", "--prompt-len", "256", "--response-len", "256")


def test_reward_function_flags_are_checked_in_one_line(capsys):
    code, _out, err = _run(capsys, "check", *RL_ARGS, "--gpu", "h100-sxm", "--workload", "grpo",
                           "--reward-function")
    assert code == 2 and "--reward-function applies to --workload ppo" in err
    assert len(err.strip().splitlines()) == 1
    code, _out, err = _run(capsys, "plan", *RL_ARGS, "--workload", "ppo", "--reward-function",
                           "--reward-model", "qwen2.5-0.5b", "--budget", "5000")
    assert code == 2 and "exclude each other" in err


def test_a_reward_function_plan_exports_where_the_launch_scores_with_a_function():
    """verl and OpenRLHF write a reward function; a framework whose launch loads a reward
    model plans none (frameworks.unlaunchable), so no plan its exporter would refuse."""
    req = dict(model="qwen2.5-0.5b", workload="ppo", prompt_len=256, response_len=256,
               budget_usd=20000, pricing="rent", reward_function=True)
    got = plan(PlanRequest(**req), CAT).plan
    assert got is not None and not any(k.startswith("reward") for k in got.memory.phases)
    text = export_plan(got, "verl")
    assert "reward_model.enable" not in text.text
    assert any("rule-based reward function" in n for n in text.notes)
    profile = resolve(CAT, "deepspeed-chat")
    assert any("reward function" in why for why in unlaunchable(profile, got.config))
    with pytest.raises(PlannerError, match="PPO scored by a reward function"):
        plan(PlanRequest(**req, framework="deepspeed-chat"), CAT)


def test_a_case_names_its_vllm_engine_or_its_release():
    """A case's vLLM V0 engine: stated (extra.rollout_vllm_v0) or read from a vLLM release
    before 0.8.0 in its framework_version; a stated value wins."""
    from planner.validation.case_releases import vllm_v0_of

    assert vllm_v0_of({"framework_version": "verl 0.2, vLLM 0.6.3"})
    assert not vllm_v0_of({"framework_version": "verl 0.4.0.dev, vLLM 0.8.3"})
    assert not vllm_v0_of({"framework_version": "verl 0.3"})
    assert vllm_v0_of({"framework_version": "vLLM 0.8.3",
                       "extra": {"rollout_vllm_v0": True}})
    assert not vllm_v0_of({"framework_version": "vllm==0.7.3",
                           "extra": {"rollout_vllm_v0": False}})


def test_role_seq_lens_name_roles_of_an_rl_job():
    from planner.catalog.request_checks import validate_workload

    with pytest.raises(PlannerError, match="role_seq_lens critc"):
        validate_workload(ppo(role_seq_lens=(("critc", 1536),)), QWEN7)
    with pytest.raises(PlannerError, match="role_seq_lens critic"):
        validate_workload(TrainConfig(role_seq_lens=(("critic", 1536),)), QWEN7)


def test_an_engine_larger_than_the_gpu_asks_for_no_utilisation_above_one(capsys):
    """check of a job whose rollout engine alone needs more than the GPU: the phase table says
    no gpu_memory_utilization fits, never a setting above 1."""
    rc, out, _err = _run(capsys, "check", "--model", "qwen2.5-32b", "--gpu", "a100-80gb-sxm",
                         "--num-gpus", "8", "--workload", "grpo", "--framework", "verl",
                         "--prompt-len", "1024", "--response-len", "2048")
    assert rc == 1
    line = next(x for x in out.splitlines() if x.startswith("rollout engine:"))
    assert float(line.split()[2]) > 1
    assert "no gpu_memory_utilization fits" in line and ">=" not in line


@pytest.mark.parametrize("workload", ["grpo", "dpo"])
def test_openrlhf_keeps_a_reference_of_its_own_under_lora(workload):
    """OpenRLHF loads its reference as a model of its own whatever the LoRA rank (profile fact
    separate_lora_reference); verl and TRL take the policy's base with the adapters off."""
    from planner.catalog.frameworks import config_fields
    from planner.models.workloads import estimate_memory

    rl = dict(prompt_len=100, response_len=200, rollout_batch=64) if workload == "grpo" \
        else dict(seq_len=1024)
    base = dict(workload=workload, method="lora", zero_stage=3, num_gpus=8, micro_batch_size=2,
                **rl)
    weights = {}
    for fid in ("openrlhf", "verl", "trl"):
        sem = config_fields(resolve(CAT, fid), workload=workload, sharded=True)
        cfg = TrainConfig(**base, separate_lora_reference=bool(
            sem.get("separate_lora_reference")))
        ref = next(r for r in roles(QWEN7, cfg) if r.name == "reference")
        weights[fid] = (ref.shares_base, estimate_memory(QWEN7, H100, cfg).terms.get(
            "reference weights", 0.0))
    assert weights["openrlhf"][0] is False and weights["openrlhf"][1] > 1.5 * GIB
    assert weights["verl"] == weights["trl"] == (True, 0.0)
