"""Memory terms against hand-computed values (arithmetic in the comments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import tiny_config

from planner.catalog.specs import MoeSpec
from planner.models import memory as mem
from planner.models import states
from planner.models.workloads import estimate_memory

DATA = Path(__file__).parent / "data"
N = 202_048  # tiny-llama parameters (see test_catalog.py)





cfg = tiny_config


def test_full_adamw_single_gpu_is_16_bytes_plus_step(tiny, gpu):
    # 2 B weights + 4 B master + 8 B Adam moments = 14N resident; the optimizer step adds
    # 2 B gradients + 4 B fp32 temporary = 20N = 4,040,960 B.
    est = estimate_memory(tiny, gpu, cfg())
    assert est.terms["weights"] == 2 * N
    assert est.terms["master_weights"] == 4 * N
    assert est.terms["optimizer_states"] == 8 * N
    assert est.phase == "optimizer step"
    assert est.allocated == 20 * N


def test_activation_and_logit_terms(tiny):
    # per token per layer: attention q,o 2*64 + k,v 2*32 -> 192 elements * 2 B = 384;
    # two norms (normalised input + output) 4*64*2 B = 512 and their fp32 input copies
    # 2*64*4 B = 512; SwiGLU 4*128*2 B = 1024 -> 2432 B.
    c = cfg()
    assert mem.layer_activation_bytes_per_token(tiny, c) == 2432
    # 2 layers * 8 tokens * 2432 = 38,912
    assert mem.activation_bytes(tiny, c) == 38_912
    # logits 8 tokens * 1000 vocab * 12 B (fp32 loss) + final norm output 8 * 64 * 2 B = 97,024
    assert mem.logits_bytes(tiny, c) == 97_024
    # 16-bit loss: 8 * 1000 * 6 + 1024 = 49,024; chunked: 8 * 1000 * 3 + 1024 = 25,024
    assert mem.logits_bytes(tiny, cfg(loss_in_fp32=False)) == 49_024
    assert mem.logits_bytes(tiny, cfg(chunked_loss=True)) == 25_024
    # fp32 logits held through the loss backward (prime-rl SFT): one more fp32 copy,
    # 8 * 1000 * (12 + 4) + 1024 = 129,024; a vocab-fused head never holds them whole
    assert mem.logits_bytes(tiny, cfg(loss_holds_logits=True)) == 129_024


def test_moe_layer_saves_routed_copies(cat, monkeypatch):
    # Qwen3-30B-A3B: k = 8 routed experts, h = 2048: 16-bit routed input + fp32 expert output
    # per copy, 8 * 2048 * (2 + 4) = 98,304 B per token, on top of the experts' f-wide terms
    moe = cat.model("qwen3-30b-a3b").spec
    assert mem.routed_copies_bytes_per_token(moe) == 98_304
    c = cfg(seq_len=16)
    with_copies = mem.layer_activation_bytes_per_token(moe, c)
    monkeypatch.setattr(mem, "routed_copies_bytes_per_token", lambda model: 0.0)
    assert with_copies - mem.layer_activation_bytes_per_token(moe, c) == 98_304


def test_full_recompute_keeps_layer_inputs(tiny):
    # kept: 2 layers * 8 tokens * 64 * 2 B = 2048; working set of one layer's backward: its
    # 2432 saved bytes + the MLP's three f-wide gradients less down's freed input,
    # (3 - 1) * 128 * 2 B = 512 -> 8 tokens * 2944 = 23,552
    c = cfg(checkpointing="full")
    assert mem.backward_working_set_bytes_per_token(tiny, c) == 2944
    assert mem.activation_bytes(tiny, c) == 2048 + 23_552
    # LoRA on q, v: down is frozen, its input is not saved and not freed: 3 gradients
    qv = cfg(checkpointing="full", method="lora", lora_rank=4, lora_targets=("q", "v"))
    saved = mem.layer_activation_bytes_per_token(tiny, qv)
    assert mem.backward_working_set_bytes_per_token(tiny, qv) == saved + 3 * 128 * 2


def test_compile_recomputes_norms_and_activation(tiny):
    # torch.compile: no fp32 norm copies (-512) and SwiGLU saves 3f (-128*2 B): 2432 - 768
    assert mem.layer_activation_bytes_per_token(tiny, cfg(compiled=True)) == 1664


def test_expanded_kv_and_eager_attention(tiny):
    # k, v copied to all 4 query heads: +2 * (64 - 32) * 2 B = 128
    assert mem.layer_activation_bytes_per_token(tiny, cfg(expand_kv_heads=True)) == 2560
    # eager attention: fp32 softmax + 16-bit probabilities 6 B x 4 heads x 8 keys = 192, and
    # the expanded k, v (+128): 2432 + 320
    assert mem.layer_activation_bytes_per_token(tiny, cfg(flash_attention=False)) == 2752


def test_backward_end_phase(tiny):
    # the first layer's backward: its working set (8 * 2944 = 23,552) + its kept input under
    # full recomputation (8 * 64 * 2 B = 1024); every gradient, no loss buffers
    assert mem.backward_end_activation_bytes(tiny, cfg()) == 23_552
    c = cfg(checkpointing="full")
    assert mem.backward_end_activation_bytes(tiny, c) == 23_552 + 1024
    end = mem.phase_terms(tiny, c, "bf16")[mem.BWD_END_PHASE]
    assert end["gradients"] == 2 * N and "logits_and_loss" not in end


MEASURED = json.loads((DATA / "saved_activations.json").read_text())


METHODS = {"full": {}, "lora": {"method": "lora", "lora_rank": 32},
           "lora-qv": {"method": "lora", "lora_rank": 32, "lora_targets": ("q", "v")}}


@pytest.mark.parametrize("row", MEASURED["rows"], ids=lambda r: "-".join(
    str(r[k]) for k in ("implementation", "attention", "method", "compiled", "hidden")))
def test_saved_activations_match_measurement(tiny, row):
    """The per-layer count and the backward working set against the bytes autograd saved and
    the peak live bytes in a real layer (CPU measurements by tools/saved_activations.py). The
    model leaves out the logsumexp and norm statistics (4 B per head and per norm per token,
    < 0.2 %)."""
    model = tiny.model_copy(update={
        "hidden_size": row["hidden"], "ffn_hidden_size": row["ffn"],
        "num_attention_heads": row["heads"], "num_kv_heads": row["kv_heads"],
        "head_dim": row["hidden"] // row["heads"]})
    c = cfg(seq_len=row["tokens"], compiled=row["compiled"],
            flash_attention=row["attention"] != "eager",
            expand_kv_heads=row["implementation"] == "torchtune", **METHODS[row["method"]])
    predicted = mem.layer_activation_bytes_per_token(model, c)
    assert predicted == pytest.approx(row["bytes_per_token"], rel=2e-3)
    if "working_set_bytes_per_token" in row:
        working = mem.backward_working_set_bytes_per_token(model, c)
        assert working == pytest.approx(row["working_set_bytes_per_token"], rel=2e-3)


PEFT_DROPOUT = json.loads((DATA / "saved_activations_peft.json").read_text())


@pytest.mark.parametrize("row", PEFT_DROPOUT["rows"], ids=lambda r: "-".join(
    str(r[k]) for k in ("method", "lora_dropout", "hidden")))
def test_lora_dropout_matches_peft_measurement(tiny, row):
    """PEFT's own LoRA layers at lora_dropout 0 and 0.05 (tools/saved_activations.py --peft,
    native_dropout as on CUDA): with dropout every adapted matrix keeps its dropout's 16-bit
    output and bool mask (3 x d_in bytes) and no adapter keeps the shared input; e.g. q, v on
    Llama-3.2-3B: 96,488 + 2 x 3 x 3072 - 2 x 3072 (the attention norm's output) = 108,776."""
    model = tiny.model_copy(update={
        "hidden_size": row["hidden"], "ffn_hidden_size": row["ffn"],
        "num_attention_heads": row["heads"], "num_kv_heads": row["kv_heads"],
        "head_dim": row["hidden"] // row["heads"]})
    c = cfg(seq_len=row["tokens"], lora_dropout=row["lora_dropout"], **METHODS[row["method"]])
    predicted = mem.layer_activation_bytes_per_token(model, c)
    assert predicted == pytest.approx(row["bytes_per_token"], rel=2e-3)


def test_lora_dropout_shared_qkv_counts_one_input(tiny):
    """LitGPT's fused LoRAQKVLinear drops out the shared input once for q, k and v: 3 x h
    bytes less per shared matrix than PEFT's one dropout each; without dropout no change."""
    qkv = {"method": "lora", "lora_rank": 8, "lora_targets": ("q", "k", "v")}
    h = tiny.hidden_size
    each = mem.layer_activation_bytes_per_token(tiny, cfg(lora_dropout=0.05, **qkv))
    shared = mem.layer_activation_bytes_per_token(
        tiny, cfg(lora_dropout=0.05, lora_dropout_shared_qkv=True, **qkv))
    assert each - shared == 2 * 3 * h
    assert mem.layer_activation_bytes_per_token(tiny, cfg(**qkv)) == \
        mem.layer_activation_bytes_per_token(tiny, cfg(lora_dropout_shared_qkv=True, **qkv))
    full = mem.layer_activation_bytes_per_token(tiny, cfg())
    assert full == mem.layer_activation_bytes_per_token(tiny, cfg(lora_dropout=0.1))


OP_SAC = json.loads((DATA / "saved_activations_op_sac.json").read_text())


@pytest.mark.parametrize("row", OP_SAC["rows"], ids=lambda r: f"{r['method']}-{r['hidden']}")
def test_op_selective_checkpointing_matches_measurement(tiny, row):
    """What torchtitan's op-level selective checkpointing keeps of a real layer (every other
    matmul output and the attention output; tools/saved_activations.py --op-sac) is exactly
    the model's op_sac_bytes_per_token, for full training and PEFT adapters."""
    model = tiny.model_copy(update={
        "hidden_size": row["hidden"], "ffn_hidden_size": row["ffn"],
        "num_attention_heads": row["heads"], "num_kv_heads": row["kv_heads"],
        "head_dim": row["hidden"] // row["heads"]})
    c = cfg(seq_len=row["tokens"], checkpointing="selective", selective_checkpointing="op",
            **METHODS[row["method"]])
    assert mem.op_sac_bytes_per_token(model, c) == pytest.approx(row["bytes_per_token"],
                                                                 rel=1e-9)


MOE = json.loads((DATA / "saved_activations_moe.json").read_text())


@pytest.mark.parametrize("row", MOE["rows"], ids=lambda r: "-".join(
    str(r[k]) for k in ("hidden", "top_k", "experts_train")))
def test_moe_backward_working_set_matches_measurement(tiny, row):
    """torchtitan's MoE block (tools/saved_activations.py --moe, experts trained or frozen):
    what its checkpointed backward holds above the saved tensors is exactly the fp32
    routing-score multiply's 3 x 4 x k x h bytes per token, three times and more what the
    experts' f-wide gradients alone would give (the model without the fact). The block's
    input (2h, saved for the router's weight gradient) is in the measured saved bytes but not
    in the working set, which leaves the checkpointed input out."""
    moe = MoeSpec(num_experts=row["experts"], experts_per_token=row["top_k"],
                  expert_ffn_hidden_size=row["expert_ffn"])
    model = tiny.model_copy(update={"hidden_size": row["hidden"], "moe": moe})
    method = {} if row["experts_train"] else METHODS["lora-qv"]

    def above_saved(**kw):
        c = cfg(seq_len=row["tokens"], checkpointing="full", **method, **kw)
        return (mem.backward_working_set_bytes_per_token(model, c)
                - mem.layer_activation_bytes_per_token(model, c))

    measured = row["working_set_bytes_per_token"] - (row["bytes_per_token"] - 2 * row["hidden"])
    assert above_saved(moe_fp32_scores=True) == pytest.approx(measured, rel=1e-9)
    assert measured > 3 * above_saved()

def test_selective_checkpointing_sits_between_none_and_full(tiny):
    """op SAC keeps less than no checkpointing and more than full; Megatron's core-attention
    selective equals none under flash attention and drops the s^2 softmax under eager."""
    def acts(**kw):
        return mem.activation_bytes(tiny, cfg(seq_len=1024, **kw))

    none, full = acts(checkpointing="none"), acts(checkpointing="full")
    op = acts(checkpointing="selective", selective_checkpointing="op")
    assert full < op < none
    assert acts(checkpointing="selective") == none
    eager_none = acts(checkpointing="none", flash_attention=False)
    eager_sel = acts(checkpointing="selective", flash_attention=False)
    softmax = mem.eager_softmax_bytes_per_token(tiny, cfg(seq_len=1024)) * 1024 * 2
    assert eager_none - eager_sel == pytest.approx(softmax)


def test_zero_stages_shard_states(tiny, gpu):
    # dp = 4: ZeRO-1 shards master + moments (12N/4), ZeRO-2 also gradients, ZeRO-3 weights.
    z1 = estimate_memory(tiny, gpu, cfg(num_gpus=4, zero_stage=1)).terms
    z3 = estimate_memory(tiny, gpu, cfg(num_gpus=4, zero_stage=3)).terms
    assert z1["master_weights"] == pytest.approx(4 * N / 4)
    assert z1["optimizer_states"] == pytest.approx(8 * N / 4)
    assert z1["weights"] == 2 * N
    assert z3["weights"] == pytest.approx(2 * N / 4)
    assert z3["gradients"] == pytest.approx(2 * N / 4)
    assert z3["gathered_params"] > 0


def test_lora_trains_only_adapters(tiny, gpu):
    # rank 4 on q and v: per layer 4*(64+64) + 4*(64+32) = 512 + 384 = 896; 2 layers = 1792
    c = cfg(method="lora", lora_rank=4, lora_targets=("q", "v"))
    assert states.trainable_params(tiny, c) == 1792
    est = estimate_memory(tiny, gpu, c)
    assert est.terms["adapters"] == 1792 * 4  # fp32 adapters
    assert est.terms["optimizer_states"] == 1792 * 8
    assert est.terms["master_weights"] == 0
    assert est.terms["weights"] == 2 * N


def test_qlora_quantizes_layer_matrices(tiny):
    # layer matrices: 2 * (4096 + 2048 + 2048 + 4096 + 24,576) = 73,728 at 0.5159 B;
    # the rest (202,048 - 73,728 = 128,320: embeddings, head, norms) in fp32 (PEFT's
    # prepare_model_for_kbit_training), in 16 bit for GPTQ and pure bf16.
    c = cfg(method="qlora", lora_rank=4)
    expected = 73_728 * states.NF4_BYTES_PER_PARAM + 128_320 * 4
    assert states.weight_bytes(tiny, c, "bf16") == pytest.approx(expected)
    gptq = cfg(method="qlora", lora_rank=4, quant_format="gptq")
    expected = 73_728 * states.GPTQ_BYTES_PER_PARAM + 128_320 * 2
    assert states.weight_bytes(tiny, gptq, "bf16") == pytest.approx(expected)


def test_dora_adds_magnitude_and_activations(tiny):
    lora = cfg(method="lora", lora_rank=4, lora_targets=("q", "v"))
    dora = cfg(method="dora", lora_rank=4, lora_targets=("q", "v"))
    # magnitude vectors: d_out of q (64) + v (32) per layer, 2 layers = 192
    assert states.trainable_params(tiny, dora) - states.trainable_params(tiny, lora) == 192
    assert mem.layer_activation_bytes_per_token(tiny, dora) > mem.layer_activation_bytes_per_token(
        tiny, lora
    )


def test_optimizers(tiny):
    # bytes of optimizer state per trainable parameter
    per = {o: states.optimizer_state_bytes_per_param(tiny, cfg(optimizer=o))
           for o in ("adamw", "adamw-8bit", "sgd", "sgd-momentum", "adafactor")}
    assert per == {"adamw": 8, "adamw-8bit": 2, "sgd": 0, "sgd-momentum": 4,
                   "adafactor": 8 / 64}
    assert states.optimizer_state_bytes_per_param(tiny, cfg(pure_bf16=True)) == 4


def test_offload_moves_states_to_host(tiny, gpu):
    on = estimate_memory(tiny, gpu, cfg(num_gpus=2, zero_stage=2))
    off = estimate_memory(tiny, gpu, cfg(num_gpus=2, zero_stage=2, offload="optimizer"))
    assert off.terms["optimizer_states"] == 0 and off.terms["master_weights"] == 0
    assert off.host_ram > on.host_ram
    assert off.allocated < on.allocated


def test_fp16_on_gpu_without_bf16(tiny, gpu):
    old = gpu.model_copy(update={"supports_bf16": False})
    est = estimate_memory(tiny, old, cfg())
    assert est.precision == "fp16"
    assert any("loss scaling" in n for n in est.notes)


def test_tensor_and_pipeline_parallel_split(tiny, gpu):
    one = estimate_memory(tiny, gpu, cfg())
    tp2 = estimate_memory(tiny, gpu, cfg(num_gpus=2, tp=2))
    assert tp2.terms["weights"] == pytest.approx(one.terms["weights"] / 2)
    # pp = 2, grad_accum 4: the first stage keeps min(2, 4) = 2 micro-batches of its layer
    pp2 = cfg(num_gpus=2, pp=2, grad_accum=4)
    assert mem.activation_bytes(tiny, pp2) == 1 * 8 * 2432 * 2


def test_reserved_and_device_ordering(tiny, gpu):
    est = estimate_memory(tiny, gpu, cfg(num_gpus=2, zero_stage=2))
    assert est.allocated < est.reserved < est.device


def test_context_parallel_ranks_share_the_states_they_hold(tiny, gpu):
    """cp ranks hold the same weights and see 1/cp of each sequence: ZeRO/FSDP shard states
    over dp x cp (Megatron's data-parallel group with context parallel, torchtitan's
    dp_shard_cp mesh), and activations shrink with the sequence."""
    flat = estimate_memory(tiny, gpu, cfg(num_gpus=4, fsdp=True, seq_len=1024)).terms
    cp2 = estimate_memory(tiny, gpu, cfg(num_gpus=4, fsdp=True, seq_len=1024, cp=2)).terms
    for term in ("weights", "gradients", "optimizer_states"):
        assert cp2[term] == pytest.approx(flat[term])
    assert cp2["activations"] < flat["activations"]
    ddp = estimate_memory(tiny, gpu, cfg(num_gpus=2, cp=2, seq_len=1024)).terms
    assert ddp["comm_buffers"] > 0  # the gradients are reduced over the cp ranks


def test_uneven_pipeline_stages_take_the_largest_stage(tiny, gpu):
    """pp need not divide the layers: the largest stage (ceil(L / pp) layers) sets the peak."""
    four = tiny.model_copy(update={"num_layers": 4})
    three = tiny.model_copy(update={"num_layers": 3})
    even = estimate_memory(four, gpu, cfg(num_gpus=2, pp=2)).terms
    uneven = estimate_memory(three, gpu, cfg(num_gpus=2, pp=2)).terms  # stages of 2 and 1
    assert states.stage_layers(three, cfg(num_gpus=2, pp=2)) == 2
    assert uneven["activations"] == pytest.approx(even["activations"])
    assert uneven["weights"] == pytest.approx(even["weights"])


def test_fsdp_no_sync_keeps_gradients_unsharded_under_accumulation(tiny, gpu):
    """The HF Trainer skips FSDP's reduce-scatter on all micro-batches but the last
    (accelerator.no_sync): under accumulation the gradients stay whole; one micro-batch (or a
    framework that reduce-scatters each one) keeps the dp shard."""
    def grads(**kw):
        return estimate_memory(tiny, gpu, cfg(num_gpus=4, fsdp=True, **kw)).terms[
            "gradients"]

    sharded = grads(grad_accum=4)
    assert grads(grad_accum=4, fsdp_no_sync=True) == pytest.approx(4 * sharded)
    assert grads(grad_accum=1, fsdp_no_sync=True) == pytest.approx(sharded)
