"""Every script in examples/ runs and prints something; the seed scripts' figures are checked."""

from __future__ import annotations

import json
import runpy
import tempfile
from pathlib import Path

import pytest

from planner import check, load_catalog

FOLDER = Path(__file__).resolve().parents[1] / "examples"
EXAMPLES = sorted(FOLDER.glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, capsys):
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip()


def test_examples_exist():
    assert len(EXAMPLES) >= 2


# --- the seeds' figures ------------------------------------------------------------------------
# Each seed script answers its document's question and returns its figures; these tests check
# them against the seed's own measurements, hand arithmetic, and the same question asked on the
# command line (a second path through the planner).


def _figures(name: str, capsys) -> tuple[dict, dict, str]:
    module = runpy.run_path(str(FOLDER / name), run_name="example")
    figures = module["main"]()
    return module, figures, capsys.readouterr().out


def _cli_json(argv: list[str], capsys) -> tuple[int, dict]:
    from planner.cli import run

    code = run([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_seed_004_mistral_rm_on_8_cards_of_64gb(capsys):
    module, f, out = _figures("seed_004_mistral_rm_910b.py", capsys)
    n, asked = f["params"], f["asked"]
    # Mistral-7B is 7.24 B with its 32,000 x 4,096 LM head; a scalar head replaces it
    assert pytest.approx(n, rel=0.002) == 7.24e9 - 32_000 * 4096
    # ZeRO paper: mixed-precision AdamW keeps 16 B per parameter; the seed's 28 GB is 4 B/param
    assert f"{16 * n / 1e9:.0f} GB before activations" in out
    # the seed measured an OOM on 8 x 64 GB; model states set the peak (the step or, with
    # Trainer's fused AdamW and accumulated gradients, the forward/backward), so checkpointing
    # cannot help, as the script says
    assert not asked.fits and asked.capacity_gib == 64
    assert asked.breakdown_gib["activations"] < 0.05 * asked.per_gpu_gib
    by_name = {r.name: r for r in f["results"]}
    assert not by_name["gradient checkpointing"].fits
    assert by_name["LoRA r16 (seed's recommendation)"].fits
    ranked = f["ranked"]
    assert all(r.fits and r.per_gpu_gib <= 0.98 * r.capacity_gib for r in ranked)
    assert [r.hours for r in ranked] == sorted(r.hours for r in ranked)
    assert f"{asked.per_gpu_gib:.1f} GiB per card of 64 -> OOM" in out
    # the command line gives the same peak and the same memory for the same fixes
    assert f["command_exit"] == 1
    code, doc = _cli_json(module["COMMAND"], capsys)
    assert code == 1 and not doc["fits"]
    assert doc["memory"]["per_gpu_gib"] == pytest.approx(asked.per_gpu_gib, abs=0.001)
    cli_fixes = {" ".join(x["changes"]): x for x in doc["fixes"]}
    for flags, name in (("--method lora", "LoRA r16 (seed's recommendation)"),
                        ("--zero 2", "ZeRO-2"), ("--zero 3", "ZeRO-3")):
        assert cli_fixes[flags]["fits"]
        assert cli_fixes[flags]["per_gpu_gib"] == pytest.approx(by_name[name].per_gpu_gib,
                                                                abs=0.001)


def test_seed_003_rm_llama3_8b_on_6_rtx_4090(capsys):
    module, f, out = _figures("seed_003_rm_llama3_8b_4090.py", capsys)
    asked, before, after = f["asked"], f["before"], f["after"]
    # the seed measured: full FT at 8192 OOMs on 6 x 24 GB; LoRA + ZeRO-3 + checkpointing at
    # 8192 ran (278 h) and LoRA + ZeRO-2 at 4096 ran (24 h)
    assert not asked.fits and asked.capacity_gib == 24
    assert before.fits and after.fits
    reported = 278 / 24
    predicted = before.hours / after.hours
    assert reported / 1.5 < predicted < reported * 1.5
    assert f"speed-up {predicted:.1f}x predicted" in out
    # halving max_len halves the tokens per pair: the rest of the speed-up is tokens/s
    assert predicted == pytest.approx(2 * after.tokens_per_s / before.tokens_per_s, rel=1e-6)
    assert f["command_exits"] == [1, 0]
    code, doc = _cli_json(module["COMMAND"], capsys)
    assert code == 1 and doc["memory"]["per_gpu_gib"] == pytest.approx(asked.per_gpu_gib,
                                                                         abs=0.001)
    assert doc["fixes"] and all(x["fits"] and x["per_gpu_gib"] <= 0.98 * 24 for x in doc["fixes"])
    code, doc = _cli_json(module["AFTER"], capsys)
    assert code == 0 and doc["memory"]["per_gpu_gib"] == pytest.approx(after.per_gpu_gib,
                                                                         abs=0.001)


def test_seed_000_ppo_7b(capsys):
    module, f, out = _figures("seed_000_ppo_7b.py", capsys)
    n, table = f["params"], f["table"]
    # DoRA r16 on all linear layers of Qwen2.5-7B by hand: per layer r x (in + out) plus a
    # magnitude per output, for q, k, v, o (3584/512 wide) and gate, up, down (18,944)
    h, kv, ffn, r = 3584, 512, 18944, 16
    per_layer = sum(r * (i + o) + o for i, o in ((h, h), (h, kv), (h, kv), (h, h), (h, ffn),
                                                 (h, ffn), (ffn, h)))
    assert f["dora"] == 28 * per_layer
    assert 0.001 < f["dora"] / n < 0.01  # the seed's 0.1-1 %
    # actor + critic states at 16 B/param exceed 2 x 80 GB before anything else: the seed's
    # "2x A100 80GB with ZeRO-3" for full fine-tuning cannot fit, and the model agrees
    assert 2 * 16 * n > 2 * 80 * 2**30
    sets = module["SETS"]
    two_a100 = sets.index(("a100-80gb-sxm", 2))
    assert not table["full FT + ZeRO-3"][two_a100].fits
    assert f["full"] is not None and f["full"].config.num_gpus > 2
    # on one GPU ZeRO-3 shards nothing: DoRA alone and DoRA + ZeRO-3 have the same peak
    one_a100 = sets.index(("a100-80gb-sxm", 1))
    assert table["DoRA r16"][one_a100].per_gpu_gib == pytest.approx(
        table["DoRA r16 + ZeRO-3"][one_a100].per_gpu_gib, rel=1e-9)
    assert table["DoRA r16 + ZeRO-3"][one_a100].fits
    assert f["command_exits"] == [0, 1]
    code, doc = _cli_json(module["BEST_CHOICE"], capsys)
    best = table["DoRA r16 + ZeRO-3"][one_a100]
    assert code == 0 and doc["memory"]["per_gpu_gib"] == pytest.approx(best.per_gpu_gib,
                                                                         abs=0.001)
    assert doc["throughput"]["step_time_s"] == pytest.approx(best.step_time_s, rel=1e-6)
    code, doc = _cli_json(module["FULL_ON_TWO"], capsys)
    assert code == 1 and doc["memory"]["per_gpu_gib"] == pytest.approx(
        table["full FT + ZeRO-3"][two_a100].per_gpu_gib, abs=0.001)


def test_seed_002_verl_min_resource_table(capsys):
    module, f, out = _figures("seed_002_verl_min_resources.py", capsys)
    # every row of verl's table ran on its GPUs: most must be predicted to fit (the two 72B
    # dynamic-batching rows are the stated misses)
    assert f["fit"] >= f["expressible"] - 2
    assert f"{f['fit']} of {f['expressible']} expressible rows predicted to fit" in out
    # the scripts' tuning trails measured the first micro-batch that failed: the predicted edge
    # (largest micro that fits) lies within 30 % of it
    for case, failed in module["TRAIL_FIRST_FAILURE"].items():
        edge = f["edges"][case]
        assert edge is not None and abs(edge + 1 - failed) / failed <= 0.30, case
    row = next(r for r in module["ROWS"] if r.case == module["COMMAND_ROW"])
    script = f["results"][row.case]
    assert script.fits and f["command_exit"] == 0
    code, doc = _cli_json(module["command"](row), capsys)
    assert code == 0 and doc["framework"]["id"] == "verl"
    assert doc["memory"]["per_gpu_gib"] == pytest.approx(script.per_gpu_gib, abs=0.001)
    assert doc["throughput"]["step_time_s"] == pytest.approx(script.step_time_s, rel=1e-6)


def test_seed_001_fill_a_32gb_card(capsys):
    module, f, out = _figures("tune_32gb_card.py", capsys)
    d16 = module["D16"]
    h, layers, vocab = d16["hidden_size"], d16["num_hidden_layers"], d16["vocab_size"]
    # by hand: untied embedding and head, 4 h^2 attention and 2 x h x 4h MLP per layer
    params = 2 * vocab * h + layers * (4 * h * h + 2 * h * d16["intermediate_size"])
    # fp16 weights (V100: no bf16) + fp32 master + two fp32 moments = 14 B/param
    assert f"{14 * params / 2**30:.1f} GiB that AdamW states alone" in out
    # the seed's KV formula for 8 sequences x 512 tokens: layers x 2 x 8 heads x 128 x 2 B
    assert f"ours {layers * 2 * 8 * 128 * 2 * 512 * 8 // 2**20} MiB" in out
    # The seed's current settings (micro 4, 32 prompts x 16 samples) measured 2.6 GB. The script
    # generates with the model itself (4 sequences per call): predicted 9.08 GiB, peak in the
    # update phase (AdamW states 4.4 GiB where nanochat keeps lighter Muon states); a vLLM-style
    # engine sized to decode 256 sequences at once predicted 15.05 GiB for the same job.
    cat = load_catalog()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(d16), encoding="utf-8")
        current = module["job"](4, 32, 16)
        own = check(model=tmp, gpu=module["GPU"], config=current, catalog=cat)["memory"]
        engine = check(model=tmp, gpu=module["GPU"], catalog=cat, config=current.model_copy(
            update={"rollout_engine": "vllm", "generate_micro_batch": None}))["memory"]
    measured_gib = 2.6e9 / 2**30
    assert measured_gib < own["per_gpu_gib"] < engine["per_gpu_gib"]
    assert f"peak {own['per_gpu_gib']:5.2f} GiB in {own['peak_phase']}" in out
    # generating adds 4 sequences' KV (4 x 512 tokens x 64 KiB = 128 MiB) and their transients
    # to the resident states, where the engine holds 256 x 32 MiB = 8 GiB of KV and a 16-bit
    # copy of the weights: the rollout is no longer the peak
    assert own["phases_gib"]["rollout"] < engine["phases_gib"]["rollout"] - 8
    assert own["peak_phase"] == "actor update"
    kept, open_ = f["tuned"]
    for res in (kept, open_):
        s = res.best.settings
        # the seed script's rules, honoured
        assert s["rollout_n"] % s["micro_batch_size"] == 0
        assert res.best.per_gpu_gib <= 0.875 * 32
    assert (kept.best.settings["rollout_batch"], kept.best.settings["rollout_n"]) == (64, 32)
    assert f["command_exit"] == 0
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(d16), encoding="utf-8")
        code, doc = _cli_json(module["command"](tmp), capsys)
    assert code == 0
    for key in ("micro_batch_size", "rollout_batch", "rollout_n", "logprob_micro_batch"):
        assert doc["settings"][key] == open_.best.settings[key]
    assert doc["memory"]["per_gpu_gib"] == pytest.approx(open_.best.per_gpu_gib, abs=0.001)
