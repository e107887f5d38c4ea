"""How a framework builds the model from a checkpoint (frameworks.built_model): LitGPT keeps the
input embedding and the LM head as two weights even where the checkpoint ties them (litgpt
model.py GPT.__init__, convert_hf_checkpoint.py copies the embedding into the head), and its
QLoRA quantizes the head with the other linears (Fabric's BitsandbytesPrecision replaces every
nn.Linear): profile facts unties_embeddings and quantizes_head. picotron and nanochat build a
head of their own too (picotron model.py Llama.final_proj, nanochat gpt.py GPT.lm_head), and NeMo
AutoModel's streaming bitsandbytes load quantizes an untied head (model_init.py
_init_model_bnb_streaming: replace_with_bnb_linear with no modules left out)."""

from __future__ import annotations

import pytest
from conftest import tiny_config

import planner.api as api
from planner.api import evaluate as check
from planner.catalog.frameworks import built_model, resolve
from planner.catalog.load import load_catalog
from planner.catalog.params import count_params
from planner.catalog.request import TrainConfig as TrainConfig_
from planner.models.states import NF4_BYTES_PER_PARAM, qlora_unquantized_bytes, weight_bytes

CAT = load_catalog()
TIED = CAT.model("google/gemma-2b").spec
UNTIED = CAT.model("llama-3.1-8b").spec


def test_litgpt_builds_a_head_of_its_own_for_a_tied_checkpoint():
    assert TIED.tied_embeddings and count_params(TIED).lm_head == 0
    built = built_model(resolve(CAT, "litgpt"), TIED)
    assert count_params(built).lm_head == TIED.vocab_size * TIED.hidden_size
    assert count_params(built).total - count_params(TIED).total == count_params(built).lm_head
    # a framework that keeps the checkpoint's tie, and a checkpoint with a head already
    assert built_model(resolve(CAT, "pytorch-fsdp"), TIED) == TIED
    assert built_model(resolve(CAT, "litgpt"), UNTIED) == UNTIED


def test_the_quantized_head_is_stored_at_nf4():
    cfg = tiny_config(method="qlora", lora_rank=8, pure_bf16=True)
    head = count_params(UNTIED).lm_head
    kept = weight_bytes(UNTIED, cfg, "bf16")
    quantized = weight_bytes(UNTIED, cfg.model_copy(update={"quantized_head": True}), "bf16")
    assert kept - quantized == pytest.approx(head * (qlora_unquantized_bytes(cfg)
                                                     - NF4_BYTES_PER_PARAM))
    # LoRA keeps a 16-bit head whatever the flag says
    lora = tiny_config(method="lora", lora_rank=8)
    assert weight_bytes(UNTIED, lora, "bf16") == weight_bytes(
        UNTIED, lora.model_copy(update={"quantized_head": True}), "bf16")


def test_check_on_litgpt_counts_the_second_copy():
    """Full fine-tuning of a tied 2B model on LitGPT trains the separate head too: weights,
    gradients and AdamW states of vocab x hidden more than on a framework that keeps the tie."""
    cfg = tiny_config(method="full", num_gpus=1, seq_len=512, micro_batch_size=1,
                      checkpointing="none")
    lit = check(model="google/gemma-2b", gpu="a100-80gb-sxm", config=cfg.model_copy(
        update={"framework": "litgpt"}))
    fsdp = check(model="google/gemma-2b", gpu="a100-80gb-sxm", config=cfg.model_copy(
        update={"framework": "pytorch-fsdp"}))
    assert count_params(lit.model).lm_head == TIED.vocab_size * TIED.hidden_size
    extra = lit.memory.terms["weights"] - fsdp.memory.terms["weights"]
    head = count_params(lit.model).lm_head
    assert extra >= 2 * head * 0.999  # at least a 16-bit copy (fp32 where the stack keeps it)
    assert lit.memory.terms["optimizer_states"] > fsdp.memory.terms["optimizer_states"]


def _kept_tie(monkeypatch):
    """Evaluate as if the framework kept the checkpoint's tie (frameworks.built_model a no-op)."""
    monkeypatch.setattr(api, "built_model", lambda profile, model: model)


@pytest.mark.parametrize("framework", ["picotron", "nanochat"])
def test_a_head_of_its_own_adds_the_heads_bytes(framework, monkeypatch):
    """Pretraining tied Llama-3.2-1B on picotron or nanochat holds a second 128,256 x 2,048
    weight: every model-state term grows by the head's parameters at that term's bytes per
    parameter."""
    cfg = tiny_config(method="full", workload="pretrain", num_gpus=1, seq_len=512,
                      framework=framework)
    built = check(model="llama-3.2-1b", gpu="a100-80gb-sxm", config=cfg)
    _kept_tie(monkeypatch)
    kept = check(model="llama-3.2-1b", gpu="a100-80gb-sxm", config=cfg)
    head = count_params(built.model).lm_head
    assert count_params(kept.model).lm_head == 0 and head == 128_256 * 2_048
    ratio = head / count_params(kept.model).total
    for term in ("weights", "gradients", "optimizer_states"):
        assert built.memory.terms[term] - kept.memory.terms[term] == pytest.approx(
            kept.memory.terms[term] * ratio), term
    assert built.memory.device > kept.memory.device


def test_nemo_automodel_qlora_stores_an_untied_head_at_nf4():
    """QLoRA of Llama-3.1-8B on NeMo AutoModel: the 128,256 x 4,096 head is NF4, not 16-bit."""
    cfg = tiny_config(method="qlora", num_gpus=1, seq_len=512, framework="nemo-automodel")
    quantized = check(model="llama-3.1-8b", gpu="a100-80gb-sxm", config=cfg)
    kept = check(model="llama-3.1-8b", gpu="a100-80gb-sxm",
                 config=cfg.model_copy(update={"quantized_head": False}))
    head = count_params(UNTIED).lm_head
    assert head == 128_256 * 4_096
    saved = kept.memory.terms["weights"] - quantized.memory.terms["weights"]
    assert saved == pytest.approx(head * (qlora_unquantized_bytes(quantized.config)
                                          - NF4_BYTES_PER_PARAM))
    # a tied checkpoint has no head of its own to quantize
    tied = check(model="qwen2.5-0.5b", gpu="a100-80gb-sxm", config=cfg)
    tied_kept = check(model="qwen2.5-0.5b", gpu="a100-80gb-sxm",
                      config=cfg.model_copy(update={"quantized_head": False}))
    assert tied.memory.terms["weights"] == tied_kept.memory.terms["weights"]


def test_openrlhf_keeps_the_unquantized_parts_16bit():
    """PEFT's prepare_model_for_kbit_training upcasts a QLoRA model's embeddings and head to
    fp32; OpenRLHF skips it and casts them to bf16 (actor.py): 2 B instead of 4 B each."""
    from planner.catalog.frameworks import apply

    base = tiny_config(method="qlora", lora_rank=8)
    hf = apply(base, resolve(CAT, "hf-trainer"))
    orl = apply(base, resolve(CAT, "openrlhf"))
    assert qlora_unquantized_bytes(hf) == 4 and qlora_unquantized_bytes(orl) == 2
    c = count_params(UNTIED)
    rest = c.total - c.layer_linear
    assert weight_bytes(UNTIED, hf, "bf16") - weight_bytes(UNTIED, orl, "bf16") == \
        pytest.approx(2 * rest)


def test_an_unstated_checkpointing_takes_the_framework_default_where_full_cannot_run():
    """LitGPT checkpoints only through its multi-GPU strategy: a one-GPU job that states no
    checkpointing runs its default (none); one that states full is refused, naming it."""
    from planner.catalog.frameworks import unstated_checkpointing
    from planner.errors import PlannerError

    lit = resolve(CAT, "litgpt")
    job = TrainConfig_(method="lora", lora_rank=8, num_gpus=1, framework="litgpt")
    assert "checkpointing" not in job.model_fields_set and job.checkpointing == "full"
    assert unstated_checkpointing(lit, job).checkpointing == "none"
    assert unstated_checkpointing(resolve(CAT, "hf-trainer"), job).checkpointing == "full"
    ev = check(model="llama-3.2-1b", gpu="rtx-4090", config=job)
    assert ev.config.checkpointing == "none"
    stated = TrainConfig_(method="lora", lora_rank=8, num_gpus=1, framework="litgpt",
                          checkpointing="full")
    with pytest.raises(PlannerError, match="checkpointing on one GPU"):
        check(model="llama-3.2-1b", gpu="rtx-4090", config=stated)
