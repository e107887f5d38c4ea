"""Output logits and loss buffers on the last pipeline stage (memory.phase_terms): the loss
kinds of the framework profiles (fp32, held fp32, 16-bit, chunked, vocabulary- and token-fused,
LitGPT's chunks built before backward), per token and logit column."""

from __future__ import annotations

import math

from planner.catalog.request import TrainConfig
from planner.catalog.specs import ModelSpec
from planner.models import calibration as cal

GIB = cal.GIB


def tokens_per_gpu(cfg: TrainConfig) -> int:
    """Tokens of one micro-batch on one GPU (context parallel splits the sequence)."""
    return cfg.micro_batch_size * cfg.seq_len // cfg.cp


# A loss over sequence chunks whose graphs are all built before backward (LitGPT's
# chunked_cross_entropy over the lm_head_chunk_size chunks): every chunk's fp32 log-softmax
# output is saved (4 B per logit), and the backward of one chunk at a time holds that chunk's
# incoming gradient and the gradient of its input (2 x 4 B over the chunk's logits).
LOG_SOFTMAX_BYTES = 4.0
CHUNK_GRADIENT_BYTES = 2 * 4.0


def loss_chunks(cfg: TrainConfig) -> int:
    """Sequence chunks of a loss over cfg.loss_seq_chunk positions: ceil(seq_len / chunk)."""
    return math.ceil(cfg.seq_len / cfg.cp / cfg.loss_seq_chunk)


def held_chunked_loss_bytes(cfg: TrainConfig) -> float:
    """Bytes per logit at the first chunk's log-softmax backward of a loss over sequence chunks
    while the whole fp32 logits stay referenced (cfg.loss_seq_chunk with loss_holds_logits):
    the held fp32 logits (LOGIT_BYTES_HELD_COPY), every chunk's saved fp32 log-softmax and one
    chunk's two gradients. LitGPT at 5895df1: lora.py's model(..., lm_head_chunk_size=128)
    returns 128-position chunks, Fabric casts them to fp32, utils.chunked_cross_entropy runs
    F.cross_entropy(reduction="none") on each before fabric.backward; 4 + 4 + 8/n with
    n = ceil(seq_len / 128): 10 B at seq 512."""
    return cal.LOGIT_BYTES_HELD_COPY + LOG_SOFTMAX_BYTES + CHUNK_GRADIENT_BYTES / loss_chunks(cfg)


def logit_columns(model: ModelSpec, cfg: TrainConfig) -> float:
    """Vocabulary columns of the logits alive at once on one GPU: vocab / tp, or one slice of
    ``lm_head_vocab_chunk`` rows for a head fused with its loss over vocabulary slices."""
    columns = model.vocab_size / cfg.tp
    return min(columns, cfg.lm_head_vocab_chunk) if cfg.lm_head_vocab_chunk else columns


def logits_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """Output logits and cross-entropy buffers on the last stage: tokens x logit_columns x bytes
    per element (LOGIT_BYTES_UNCHUNKED for an fp32 loss, LOGIT_BYTES_16BIT_LOSS without the
    upcast, LOGIT_BYTES_CHUNKED for a chunked/fused loss; LOGIT_BYTES_HELD_COPY more where the
    fp32 logits stay referenced through the loss backward; held_chunked_loss_bytes where they
    stay referenced and the loss runs over sequence chunks built before backward, LitGPT's)
    plus the final-norm output (2h bytes per token). Dominant for large vocabularies (Qwen 152k).

    A head fused with its loss over vocabulary slices (prime-rl's _ChunkedLogProbEntropyFn,
    src/prime_rl/trainer/models/layers/lm_head.py) holds, per slice, the fp32 slice logits,
    their exponentials and the gradient of the slice (three fp32 [tokens, slice] tensors):
    LOGIT_BYTES_UNCHUNKED over the slice's columns; besides, the fp32 copy of the final hidden
    states it multiplies (4h bytes per token) and, in backward, the head weight's gradient
    allocated whole in the weight's 16-bit dtype (torch.zeros_like(weight): vocab x h x 2 B,
    also when the head is frozen)."""
    tokens = tokens_per_gpu(cfg)
    if cfg.loss_token_chunk_gib:
        return token_fused_loss_bytes(model, cfg)
    if cfg.loss_linear_fused:
        return linear_fused_loss_bytes(model, cfg)
    fused = (tokens * model.hidden_size * 4 + model.vocab_size * model.hidden_size * 2
             if cfg.lm_head_vocab_chunk else 0.0)
    if cfg.lm_head_vocab_chunk:
        per = cal.LOGIT_BYTES_UNCHUNKED
    elif cfg.chunked_loss and cfg.loss_holds_logits and cfg.loss_seq_chunk:
        per = held_chunked_loss_bytes(cfg)
    elif cfg.chunked_loss:
        per = cal.LOGIT_BYTES_CHUNKED
    elif cfg.loss_in_fp32:
        per = cal.LOGIT_BYTES_UNCHUNKED + (cal.LOGIT_BYTES_HELD_COPY if cfg.loss_holds_logits
                                           else 0.0)
    else:
        per = cal.LOGIT_BYTES_16BIT_LOSS
    return tokens * logit_columns(model, cfg) * per + tokens * model.hidden_size * 2 + fused


def loss_token_chunks(model: ModelSpec, cfg: TrainConfig) -> int:
    """Token chunks of a token-fused loss: the whole fp32 logits over the chunk target
    (cfg.loss_token_chunk_gib), rounded up to a multiple of 4, 1 where they fit one chunk
    (unslothai/unsloth-zoo@ce232d6 unsloth_zoo/fused_losses/cross_entropy_loss.py
    get_chunk_size, whose target is half the free memory, at most 4 GiB)."""
    whole = tokens_per_gpu(cfg) * logit_columns(model, cfg) * 4 / GIB
    exact = whole / cfg.loss_token_chunk_gib
    return 1 if exact <= 1.0 else 4 * math.ceil(exact / 4)


def token_fused_loss_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """A head fused with its loss over token chunks, the gradient taken chunk by chunk in the
    forward pass (Unsloth's UnslothFusedLoss: torch.func.grad_and_value per chunk): one chunk's
    logits and loss buffers (LOGIT_BYTES_UNCHUNKED per element, as a whole-vocabulary fp32
    loss), the gradient of the hidden states it fills (16-bit, every token) and the final-norm
    output (2h bytes per token each)."""
    tokens = tokens_per_gpu(cfg)
    chunk = math.ceil(tokens / loss_token_chunks(model, cfg))
    return chunk * logit_columns(model, cfg) * cal.LOGIT_BYTES_UNCHUNKED \
        + 2 * tokens * model.hidden_size * 2


def linear_fused_loss_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """Liger's fused linear cross-entropy (cfg.loss_linear_fused; linkedin/Liger-Kernel@ead96b6
    src/liger_kernel/ops/fused_linear_cross_entropy.py fused_linear_cross_entropy_forward): the
    head and loss run over token chunks of next_power_of_2(ceil(tokens / ceil(vocab / h)))
    rows, so one chunk's 16-bit logits hold about tokens x h elements; the gradients are taken
    in the forward pass into grad_input (tokens x h, the input dtype) and, where the head
    trains (full training), grad_weight (vocab x h, zeros_like(weight): the trained weights'
    16-bit dtype, fp32 where they are held in fp32), besides the fp32 per-token loss and the
    final-norm output it reads (2h bytes per token)."""
    tokens, h = tokens_per_gpu(cfg), model.hidden_size
    vocab = logit_columns(model, cfg)
    chunk = min(tokens, 2 ** math.ceil(math.log2(math.ceil(tokens / math.ceil(vocab / h)))))
    head = vocab * h * (4 if cfg.fp32_trained_weights else 2) if cfg.method == "full" else 0.0
    return chunk * vocab * 2 + 2 * tokens * h * 2 + tokens * 4 + head


def loss_bytes_held_through_backward(model: ModelSpec, cfg: TrainConfig) -> float:
    """The part of logits_bytes still alive when backward reaches the last layer (and, under
    checkpointing, recomputes it): only what the training loop keeps referenced, the whole fp32
    logits of a held loss (cfg.loss_holds_logits: LOGIT_BYTES_HELD_COPY per element); 0 else.

    Autograd frees a node's saved tensors once the node has run (retain_graph False), and the
    final norm's backward waits for every gradient reaching its output, so the head and loss
    backward (log-softmax output, its incoming gradient, the gradient of the logits) has ended
    before the first decoder layer is recomputed. A loop that keeps no reference to the logits
    leaves nothing of them: transformers' Trainer.compute_loss returns the loss alone, its
    `outputs` (the 16-bit logits) dropped before training_step calls accelerator.backward
    (huggingface/transformers@000945a9 src/transformers/trainer.py Trainer.training_step,
    compute_loss), and ForCausalLMLoss's fp32 upcast is a local of the loss function, saved by no
    node (log-softmax saves its output; huggingface/transformers@0114da07
    src/transformers/loss/loss_utils.py). prime-rl's SFT loop keeps out["logits"] (loss kind
    fp32-held) and LitGPT its fp32 logit chunks (fp32-held-chunked) through backward."""
    if not cfg.loss_holds_logits:
        return 0.0
    return tokens_per_gpu(cfg) * logit_columns(model, cfg) * cal.LOGIT_BYTES_HELD_COPY
