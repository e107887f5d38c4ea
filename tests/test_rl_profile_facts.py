"""Issue 17: what an RL framework does with a case's fields is its profile's, not a table in the
validation reader. A user's framework profile (a catalog overlay) with the same facts gets the
same behaviour as the shipped one; planner/validation holds no framework-keyed table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.catalog.request import TrainConfig
from planner.models import efficiency as eff
from planner.models import rltime
from planner.validation.throughput_cases import stack_of
from planner.validation.validate import load_cases
from planner.validation.validate_throughput import rl_estimate, rl_inputs

ROOT = Path(__file__).resolve().parent.parent
CASES = {c["id"]: c for c in load_cases(shipped_validation_dir() / "throughput_cases.yaml")}
OFF_POLICY = "nemorl_v05_grpo_llama31_8b_16xH100_fp8_offpolicy"
VERL_PPO = "verl_amd_ppo_deepseek7b_8xMI300"
DSCHAT = "dschat_log_ppo_opt1.3b_critic350m_16xV100"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _overlay(tmp_path: Path, fid: str, facts: dict) -> object:
    """A catalog with a user's profile ``fid`` holding ``facts`` (every fact with a source)."""
    folder = tmp_path / "frameworks"
    folder.mkdir(parents=True)
    doc = {"id": fid, "name": fid, "version": "test", "base": "megatron-lm",
           "facts": {k: {"value": v, "source": "test"} for k, v in facts.items()}}
    (folder / f"{fid}.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return load_catalog([tmp_path])


def test_engine_memory_share_and_off_policy_placement_come_from_the_profile(catalog, tmp_path):
    """The NeMo-RL off-policy case generates on separate GPUs with the 0.6 memory share its
    profile states; the same case under a user's profile with other facts follows those."""
    case = CASES[OFF_POLICY]
    _rc, cfg, _gpu = rl_inputs(case, catalog)
    assert (cfg.placement, cfg.gpu_memory_utilization) == ("separate", 0.6)
    mine = _overlay(tmp_path, "my-rl", {
        "workloads": ["grpo"], "rl_placements": ["colocate", "separate"],
        "rollout_engines": ["vllm"], "rollout_memory_utilization": 0.45})
    _rc, cfg, _gpu = rl_inputs({**case, "framework": "my-rl"}, mine)
    # no off_policy_placement: the off-policy run stays colocated
    assert (cfg.placement, cfg.gpu_memory_utilization) == ("colocate", 0.45)
    shipped = rl_estimate(case, catalog).step_time_s
    same = _overlay(tmp_path / "b", "my-rl", {
        "workloads": ["grpo"], "rl_placements": ["colocate", "separate"],
        "rollout_engines": ["vllm"], "rollout_memory_utilization": 0.6,
        "off_policy_placement": "separate", "fp8_generation": True})
    assert rl_estimate({**case, "framework": "my-rl"}, same).step_time_s == pytest.approx(shipped)


def test_a_batch_of_prompts_per_iteration_is_the_profiles_fact(catalog, tmp_path):
    """verl's train batch counts the prompts of one iteration (global batch / n); a profile
    without that fact leaves the planner's default rollout batch."""
    case = CASES[VERL_PPO]
    _rc, cfg, _gpu = rl_inputs(case, catalog)
    assert cfg.rollout_batch * cfg.samples_per_prompt == case["global_batch_size"]
    plain = _overlay(tmp_path, "plain-rl", {"workloads": ["ppo"], "rollout_engines": ["vllm"]})
    _rc, other, _gpu = rl_inputs({**case, "framework": "plain-rl"}, plain)
    assert other.rollout_batch != cfg.rollout_batch


def test_every_engine_takes_the_in_iteration_rollout_factor(catalog):
    """DeepSpeed-Chat's cases generate with the profile's deepspeed-hybrid engine, verl's with
    vLLM: inside an RL iteration both take the fitted rollout factor (their cases imply alike:
    efficiency.RL_ROLLOUT_DECODE_EFFICIENCY), not a serving stack's; the hybrid engine still
    runs without CUDA graphs (its host floor)."""
    rc, cfg, _gpu = rl_inputs(CASES[DSCHAT], catalog)
    assert cfg.rollout_engine == "deepspeed-hybrid"
    _rc, verl, _gpu = rl_inputs(CASES[VERL_PPO], catalog)
    assert verl.rollout_engine == "vllm"
    assert rltime.rollout_decode_efficiency(cfg) == rltime.rollout_decode_efficiency(verl) \
        == eff.RL_ROLLOUT_DECODE_EFFICIENCY != eff.DECODE_EFFICIENCY["vllm"]
    assert rltime.rollout_host_floor_s(rc.resolved.spec, cfg) > 0


def test_a_backend_named_by_the_run_sets_its_stack(catalog):
    """LLaMA-Factory's rows on its Unsloth backend take Unsloth's efficiency (the profile's
    backends fact), the others the profile's own."""
    rows = [c for c in CASES.values() if c.get("framework") == "llama-factory"]
    stacks = {("unsloth" in str(c.get("location", "")).lower()): stack_of(c, catalog)
              for c in rows}
    assert stacks == {True: "unsloth", False: "hf"}


def _framework_names() -> set[str]:
    names = set()
    for path in (ROOT / "catalog" / "frameworks").glob("*.yaml"):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        names |= {doc["id"], *doc.get("aliases", ())}
    return names


def test_no_framework_keyed_table_in_the_validation_reader():
    """No string constant in planner/validation names a framework profile (or alias) unless it
    is also a word of another vocabulary (a sharding kind, a stack, an engine: fsdp, megatron,
    deepspeed, unsloth, hf; ddp). Behaviour of a framework is its profile's."""
    generic = {"fsdp", "ddp", "megatron", "deepspeed", "unsloth", "hf", "vllm"}
    names = _framework_names() - generic
    found = []
    for path in sorted((ROOT / "planner" / "validation").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value in names:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert names and not found, found


def test_an_eager_engine_decodes_no_faster_than_its_host_launches_kernels():
    """Without CUDA graphs a decoding step takes at least layers x EAGER_HOST_S_PER_LAYER: a
    small model whose GPU step is far shorter decodes at the host floor (steps x floor), a
    large one at its GPU roofline (the floor does not bind), and CUDA graphs lift the floor."""
    from planner.models.decode import EAGER_HOST_S_PER_LAYER, eager_host_floor_s, estimate_decode

    cat = load_catalog()
    small, big, gpu = cat.model("qwen3-0.6b").spec, cat.model("qwen2.5-7b").spec, cat.gpu(
        "h100-sxm")
    floor = eager_host_floor_s(small)
    assert floor == pytest.approx(small.num_layers * EAGER_HOST_S_PER_LAYER)
    kw = dict(prompt_len=128, response_len=64, batch=1, stack="vllm")
    graphs = estimate_decode(small, gpu, **kw)
    eager = estimate_decode(small, gpu, host_floor_s=floor, **kw)
    assert graphs.decode_s < 64 * floor  # the GPU step is shorter than the host's
    assert eager.decode_s == pytest.approx(64 * floor)
    assert eager.limited_by == "host kernel launches"
    wide = dict(prompt_len=512, response_len=64, batch=256, stack="vllm")
    assert estimate_decode(big, gpu, host_floor_s=eager_host_floor_s(big), **wide).decode_s \
        == pytest.approx(estimate_decode(big, gpu, **wide).decode_s)


def test_the_eager_floor_follows_the_engine_and_the_profile(catalog, tmp_path):
    """DeepSpeed's hybrid engine and HF generate are eager whatever the framework; a vLLM
    engine is eager where its framework's profile says enforce_eager (verl before 0.6; 0.7
    runs CUDA graphs) or where a case states how it ran, and a user's profile with the same
    fact gets the same generation time."""
    from planner.catalog.frameworks import apply, resolve

    model = catalog.model("qwen3-0.6b").spec
    base = TrainConfig(workload="grpo", num_gpus=8, prompt_len=256, response_len=512,
                       micro_batch_size=4, rollout_batch=64)
    assert rltime.rollout_host_floor_s(model, base) == 0.0
    for engine in rltime.EAGER_ENGINES:
        cfg = base.model_copy(update={"rollout_engine": engine})
        assert rltime.rollout_host_floor_s(model, cfg) > 0
    assert not apply(base, resolve(catalog, "verl")).rollout_eager
    assert not apply(base, resolve(catalog, "nemo-rl")).rollout_eager
    stated = CASES[VERL_PPO]  # its additions: the release it ran defaulted to enforce_eager
    assert stated["extra"]["rollout_enforce_eager"] is True
    shipped = rl_estimate(stated, catalog)
    case = {**stated, "extra": {k: v for k, v in stated["extra"].items()
                                if k != "rollout_enforce_eager"}}
    assert rl_estimate(case, catalog).phases["generation"] < shipped.phases["generation"]
    mine = _overlay(tmp_path, "my-verl", {
        "workloads": ["ppo"], "rollout_engines": ["vllm"], "batch_counts_prompts": True,
        "idle_offload": True, "rollout_enforce_eager": True, "efficiency": "hf"})
    assert rl_estimate({**case, "framework": "my-verl"}, mine).phases["generation"] \
        == pytest.approx(shipped.phases["generation"])
    graphs = _overlay(tmp_path / "g", "my-verl", {
        "workloads": ["ppo"], "rollout_engines": ["vllm"], "batch_counts_prompts": True,
        "idle_offload": True, "rollout_enforce_eager": False, "efficiency": "hf"})
    assert rl_estimate({**case, "framework": "my-verl"}, graphs).phases["generation"] \
        < shipped.phases["generation"]


def test_responses_of_unequal_length_read_more_kv_per_token():
    """The maximum-entropy length distribution with a mean and a cap: uniform at mean = cap/2
    (E[L^2] = cap^2/3), exponential when the cap is far (2 mean^2), all at the cap when the
    mean is the cap; the KV context offset is Var(L) / (2 mean), and it slows a
    continuous-batching engine's generation only where the cap exceeds the mean."""
    assert rltime.length_second_moment(500, 1000) == pytest.approx(1000**2 / 3, rel=1e-3)
    assert rltime.length_second_moment(100, 1e6) == pytest.approx(2 * 100**2, rel=1e-3)
    assert rltime.length_second_moment(1000, 1000) == pytest.approx(1000**2)
    assert rltime.length_context_offset(500, 1000) == pytest.approx(1000 / 12, rel=1e-3)
    assert rltime.length_context_offset(500, None) == 0.0
    cat = load_catalog()
    model, gpu = cat.model("qwen2.5-7b").spec, cat.gpu("h100-sxm")
    cfg = TrainConfig(workload="grpo", num_gpus=8, prompt_len=256, response_len=512,
                      micro_batch_size=4, rollout_batch=256, rollout_n=4)
    same = rltime.engine_side(model, gpu, cfg, platform=None)
    capped = rltime.engine_side(model, gpu, cfg, platform=None, max_response_len=2048)
    assert capped.generation_s > same.generation_s
    assert rltime.engine_side(model, gpu, cfg, platform=None, max_response_len=512) == same
