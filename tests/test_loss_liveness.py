"""When the loss buffers are alive with the working set of the first recomputed layer
(memory.forward_activation_bytes, loss_buffers.loss_bytes_held_through_backward): the loss
backward ends before backward recomputes a layer, so under recomputation the phase holds the kept
inputs and the larger of the loss buffers and the working set (+ the fp32 logits a held loss
keeps referenced); without recomputation every saved tensor is alive with the loss."""

from __future__ import annotations

import pytest

from planner.catalog.load import load_catalog
from planner.catalog.request import TrainConfig
from planner.models import memory as mem
from planner.models.loss_buffers import logit_columns, loss_bytes_held_through_backward

TOKENS = 4 * 4096


@pytest.fixture(scope="module")
def mistral():
    return load_catalog().model("mistral-7b").spec


def lora(**kw) -> TrainConfig:
    base = {"method": "lora", "lora_rank": 16, "lora_targets": ("q", "k", "v", "o"),
            "checkpointing": "full", "seq_len": 4096, "micro_batch_size": 4}
    return TrainConfig(**{**base, **kw})


def fwd(model, cfg) -> tuple[float, float, float]:
    """(activations + loss of the forward/backward phase, kept inputs, working set)."""
    terms = mem.activation_phase_terms(model, cfg)[mem.FWD_PHASE]
    working = mem.backward_working_set_bytes_per_token(model, cfg) * TOKENS
    kept = mem.activation_bytes(model, cfg) - working
    return terms["activations"] + terms["logits_and_loss"], kept, working


def test_a_loss_the_loop_does_not_hold_is_freed_before_the_recompute(mistral):
    c = lora()
    total, kept, working = fwd(mistral, c)
    loss = mem.logits_bytes(mistral, c)
    assert loss_bytes_held_through_backward(mistral, c) == 0.0
    assert loss > working  # 32,000 x 12 B per token against one LoRA layer's working set
    assert total == pytest.approx(kept + loss)  # binds: the sum would add the working set
    assert total < kept + working + loss


def test_a_held_loss_keeps_its_fp32_logits_alive_with_the_recompute(mistral):
    c = lora(loss_holds_logits=True)
    total, kept, working = fwd(mistral, c)
    held = TOKENS * logit_columns(mistral, c) * 4.0  # LOGIT_BYTES_HELD_COPY
    assert loss_bytes_held_through_backward(mistral, c) == held
    assert total == pytest.approx(kept + max(mem.logits_bytes(mistral, c), working + held))


def test_the_working_set_binds_where_it_is_larger_than_the_loss(mistral):
    c = lora(method="full", lora_targets=(), lora_rank=None, chunked_loss=True)
    total, kept, working = fwd(mistral, c)
    assert working > mem.logits_bytes(mistral, c)
    assert total == pytest.approx(kept + working)


def test_without_recomputation_the_loss_is_alive_with_every_saved_tensor(mistral):
    c = lora(checkpointing="none")
    terms = mem.activation_phase_terms(mistral, c)[mem.FWD_PHASE]
    assert terms["activations"] == mem.activation_bytes(mistral, c)
    assert terms["logits_and_loss"] == mem.logits_bytes(mistral, c)


def test_an_rl_actor_keeps_its_loss_counted_with_the_working_set(mistral):
    c = lora(loss_alive_with_recompute=True)
    total, kept, working = fwd(mistral, c)
    assert total == pytest.approx(kept + working + mem.logits_bytes(mistral, c))


def test_rl_roles_take_the_rl_rule_and_sft_roles_do_not(mistral):
    from planner.models.workloads import roles

    grpo = TrainConfig(workload="grpo", method="lora", lora_rank=16, checkpointing="full",
                       prompt_len=512, response_len=1024, rollout_n=4, num_gpus=8,
                       micro_batch_size=2)
    actor = next(r for r in roles(mistral, grpo) if r.name == "actor")
    assert actor.cfg.loss_alive_with_recompute and actor.cfg.workload == "sft"
    dpo = TrainConfig(workload="dpo", method="lora", lora_rank=16, checkpointing="full")
    assert not any(r.cfg.loss_alive_with_recompute for r in roles(mistral, dpo))
    sft = TrainConfig(method="lora", lora_rank=16)
    assert not roles(mistral, sft)[0].cfg.loss_alive_with_recompute
