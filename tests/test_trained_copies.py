"""LoRA with the embedding and the LM head trained beside the adapters (PEFT modules_to_save:
TrainConfig.peft_trains_embeddings, a case's extra.trainable_embeddings): trained copies in the
base's dtype, byte for byte, and the Qwen README row that measures them."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog, shipped_validation_dir
from planner.catalog.params import count_params, vocab_matrix_params
from planner.catalog.request import TrainConfig
from planner.models.memory import phase_terms
from planner.models.trained_copies import copied_params_on_gpu, trained_copy_bytes
from planner.validation.validate import load_cases, predict_case

CAT = load_catalog()
QWEN = CAT.model("qwen-7b").spec


def lora(**kw) -> TrainConfig:
    return TrainConfig(**{"method": "lora", "lora_rank": 64, "checkpointing": "full",
                          "seq_len": 2048, **kw})


def test_copies_are_the_embedding_and_the_head_in_the_bases_dtype():
    """No ZeRO: the copies, their gradients and AdamW's two moments are 16-bit (torch keeps the
    moments in the parameter's dtype), foreach AdamW's step temporary too: 2 + 2 + 4 B, and 2
    B at the step."""
    n = count_params(QWEN).embedding + vocab_matrix_params(QWEN)
    assert copied_params_on_gpu(QWEN, lora(peft_trains_embeddings=True)) == n
    got = trained_copy_bytes(QWEN, lora(peft_trains_embeddings=True), "bf16")
    assert got == pytest.approx({"adapters": 2 * n, "gradients": 2 * n, "master_weights": 0.0,
                                 "optimizer_states": 4 * n, "optimizer_step": 2 * n})
    assert trained_copy_bytes(QWEN, lora(), "bf16") == {}
    assert trained_copy_bytes(QWEN, TrainConfig(peft_trains_embeddings=True), "bf16") == {}


def test_deepspeed_zero_keeps_an_fp32_master_and_moments_of_the_copies():
    n = count_params(QWEN).embedding + vocab_matrix_params(QWEN)
    got = trained_copy_bytes(QWEN, lora(peft_trains_embeddings=True, num_gpus=4, zero_stage=2),
                             "bf16")
    assert got["master_weights"] == pytest.approx(4 * n / 4)
    assert got["optimizer_states"] == pytest.approx(8 * n / 4)
    assert got["gradients"] == pytest.approx(2 * n / 4)
    assert got["adapters"] == pytest.approx(2 * n)  # ZeRO-2 does not shard weights


def test_phase_terms_carry_the_copies():
    plain, trained = lora(), lora(peft_trains_embeddings=True)
    before, after = phase_terms(QWEN, plain, "bf16"), phase_terms(QWEN, trained, "bf16")
    copies = trained_copy_bytes(QWEN, trained, "bf16")
    for phase in before:
        added = sum(after[phase].values()) - sum(before[phase].values())
        expected = copies["adapters"] + copies["optimizer_states"] + copies["gradients"] * (
            after[phase]["gradients"] > before[phase]["gradients"]) + copies["optimizer_step"] * (
            "optimizer_step" in after[phase])
        assert added == pytest.approx(expected), phase


def test_qwen_readme_lora_emb_row():
    """Qwen's README profiles Qwen-7B LoRA at 8,192 tokens on one A100 at 36.6 GB and with the
    embedding and output layer trained (LoRA (emb)) at 48.5 GB: 11.1 GiB more. The case carries
    extra.trainable_embeddings; the copies' states add 9.3 GiB at the backward peak (the step's
    2.3 GiB temporary comes after it), and the prediction falls within 5 % of the reading."""
    case = next(c for c in load_cases(shipped_validation_dir() / "memory_cases.yaml")
                if c["id"] == "qwen-7b-lora-emb-8192")
    assert case["extra"]["trainable_embeddings"] is True
    with_copies = predict_case(case, CAT)
    without = predict_case({**case, "extra": {}}, CAT)
    added = with_copies.predicted_gib - without.predicted_gib
    assert added == pytest.approx((48.5 - 36.6) * 1e9 / 2**30, rel=0.2)
    assert abs(with_copies.rel_err) < 0.05 < abs(without.rel_err)


def test_check_flags_for_the_embedding_copies_and_activation_offloading(capsys):
    """`check --train-embeddings` adds the copies' weights and optimizer states (no persistent
    gradients at one micro-step per optimizer step); `--offload-activations` keeps two layers'
    inputs; both refuse what they cannot mean in one line, exit 2."""
    import json

    from tests.test_cli import run

    args = ["check", "--model", "qwen-7b", "--gpu", "a100-80gb-sxm", "--method", "lora",
            "--seq-len", "8192", "--micro-batch", "1", "--json"]

    def gib(*extra):
        code, out, err = run(capsys, *args, *extra)
        assert code == 0, err
        return json.loads(out)["memory"]["per_gpu_gib"]

    copies = trained_copy_bytes(QWEN, lora(peft_trains_embeddings=True), "bf16")
    added = (copies["adapters"] + copies["optimizer_states"]) / 2**30
    assert gib("--train-embeddings") - gib() == pytest.approx(added, abs=0.01)
    assert gib("--offload-activations") < gib()
    for extra, needle in ((["--method", "full", "--train-embeddings"], "--train-embeddings"),
                          (["--checkpointing", "selective", "--offload-activations"],
                           "--offload-activations needs --checkpointing full or none")):
        code, _, err = run(capsys, *args, *extra)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
