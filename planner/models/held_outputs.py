"""What a training loop that holds its outputs keeps alive between micro-batches, and the
transients of a 4-bit LM head (memory.phase_terms): LitGPT's finetune and pretrain loops on
Lightning Fabric with bitsandbytes (cfg.holds_previous_outputs, cfg.quantized_head).

LitGPT binds the model's output to a name of the loop, ``logits = model(input_ids, ...)``
(Lightning-AI/litgpt@5895df1 litgpt/finetune/lora.py fit, finetune/full.py, pretrain.py; the
same at 2685705), and rebinds it only when the next micro-batch's forward returns. Until then the
previous outputs stay referenced, and through their grad_fn the previous autograd graph: backward
released the tensors the graph saved (save_for_backward), not what a custom autograd function
keeps as an attribute of its ctx. Lightning Fabric casts every floating output to the default
dtype (_FabricModule.forward: precision.convert_output, HalfPrecision and BitsandbytesPrecision
``apply_to_collection(data, _convert_fp_tensor, dst_type=torch.get_default_dtype())``: fp32,
Lightning-AI/pytorch-lightning@438f29f, master on 2024-03-28, the nightly LitGPT 5895df1 pins:
src/lightning/fabric/wrappers.py and plugins/precision/{half,bitsandbytes}.py), so the held
logits are fp32. Measured on the CPU with LitGPT 5895df1's own model and loss code and
bitsandbytes 0.42.0's MatMul4Bit written out (tools/held_outputs.py; tests/test_held_outputs.py):
the bytes alive between two micro-batches are these exactly.
"""

from __future__ import annotations

from planner.catalog.params import count_params
from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models.states import head_quantized, mlp_width, stage_layers

# The phases a loop that holds its outputs adds (forward_end_phases).
FWD_END_PHASE = "end of forward"
HEAD_PHASE = "4-bit head forward"


def output_bytes_per_logit(cfg: TrainConfig) -> float:
    """Bytes per logit of the model's outputs as its forward returns: the 16-bit logits and,
    where they are cast for an fp32 loss (Fabric's convert_output), their fp32 copy, both alive
    until the forward returns (6 B; 2 B without the cast)."""
    return 2.0 + (4.0 if cfg.loss_in_fp32 else 0.0)


def quant_input_bytes_per_token(model: ModelSpec, cfg: TrainConfig) -> float:
    """16-bit inputs of one micro-batch's 4-bit matmuls, per token, that bitsandbytes before
    0.43.2 keeps on the autograd ctx (MatMul4Bit.forward: ``ctx.tensors = (A, B)`` when an
    input needs a gradient, an attribute backward does not release; cfg.quant_keeps_inputs): in
    each layer the attention's input (q, k and v read one normalised tensor), o's (the attention
    output), the MLP's (gate and up read one) and down's (the MLP width f), 2 B each: (2h +
    heads x head_dim + f) x 2 B a layer, less the first layer's attention input (2h B: nothing
    before it trains, so it needs no gradient), and the quantized head's input (the final norm's
    output, 2h B). 0 for LoRA and newer bitsandbytes."""
    if not (cfg.method == "qlora" and cfg.quant_keeps_inputs):
        return 0.0
    h = model.hidden_size
    layer = (2 * h + model.num_attention_heads * model.head_dim + mlp_width(model)) * 2
    head = 2 * h if head_quantized(cfg) else 0
    return (stage_layers(model, cfg) * layer - 2 * h + head) / cfg.tp


def held_bytes_per_token(model: ModelSpec, cfg: TrainConfig, columns: float) -> float:
    """What a loop that holds its outputs (cfg.holds_previous_outputs) keeps of one micro-batch
    after its backward, per token: its logits over ``columns`` vocabulary columns (fp32 where
    the loss is, Fabric's cast; 16-bit otherwise) and the 4-bit matmul inputs its graph keeps
    (quant_input_bytes_per_token). Alive from the end of that micro-batch's backward, through
    the optimizer step, to the end of the next micro-batch's forward: the previous micro-batch
    assumed as long as the one it overlaps (the case's largest)."""
    if not cfg.holds_previous_outputs:
        return 0.0
    logits = columns * (4.0 if cfg.loss_in_fp32 else 2.0)
    return logits + quant_input_bytes_per_token(model, cfg)


def dequantized_head_bytes(model: ModelSpec, cfg: TrainConfig, precision: str) -> float:
    """The 4-bit head dequantised for its matmul (QLoRA with cfg.quantized_head): bitsandbytes
    0.42.0 MatMul4Bit.forward runs ``F.dequantize_4bit(B, quant_state).to(A.dtype)``;
    dequantize_4bit allocates the dtype the weight was quantized from (QuantState.dtype), which
    is fp16 because Lightning's _Linear4bit.quantize casts the weight ``.half()`` first
    (Lightning-AI/pytorch-lightning@438f29f plugins/precision/bitsandbytes.py), and the cast to
    a bf16 compute dtype copies it: vocab x hidden x (2 + 2) B alive at once (2 B computing in
    fp16), with every activation and the previous micro-batch's held outputs while the last
    head chunk runs. The layers' matrices dequantise the same way, each smaller than the head
    and with part of the activations not yet allocated."""
    if not head_quantized(cfg):
        return 0.0
    per = 2 + (2 if precision == "bf16" else 0)
    return count_params(model).lm_head / cfg.tp * per


def forward_end_phases(model: ModelSpec, cfg: TrainConfig, *, activations: float, held: float,
                       tokens: int, columns: float) -> dict[str, dict[str, float]]:
    """The activation terms of the phases a loop that holds its outputs adds to
    memory.phase_terms, before the next micro-batch's loss exists, each with every activation
    and the ``held`` bytes of the micro-batch before:

    - FWD_END_PHASE, the forward returning: its outputs (output_bytes_per_logit) and the final
      norm's output;
    - HEAD_PHASE, with a 4-bit head: the head's matmul (head_transient adds the dequantised
      head) and the 16-bit logits of every chunk. Measured, the forward's last chunk runs with
      the chunks before it (2 B over (n - 1) / n of the logits); the backward's first head
      chunk, where the loop holds the current fp32 logits and no 4-bit inputs of another
      micro-batch, with every chunk's 16-bit gradient: 2 B over all of them bounds both.
    """
    final_norm = tokens * model.hidden_size * 2
    out = {FWD_END_PHASE: {"activations": activations, "held_outputs": held, "logits_and_loss":
                           tokens * columns * output_bytes_per_logit(cfg) + final_norm}}
    # on cfg.quantized_head, not head_quantized: the solver's memory tables hold the same phases
    # for every strategy of a framework (methods, pp); where no head is 4-bit this phase holds
    # less than FWD_END_PHASE (2 B per logit, no dequantised head) and is never the peak
    if cfg.quantized_head:
        out[HEAD_PHASE] = {"activations": activations, "held_outputs": held,
                           "logits_and_loss": tokens * columns * 2 + final_norm}
    return out


def head_transient(phase: str, model: ModelSpec, cfg: TrainConfig, *, precision: str
                   ) -> dict[str, float]:
    """The non-activation term of a forward_end_phases phase: the dequantised head in
    HEAD_PHASE, nothing in the others."""
    if phase != HEAD_PHASE:
        return {}
    return {"dequantized_head": dequantized_head_bytes(model, cfg, precision)}
