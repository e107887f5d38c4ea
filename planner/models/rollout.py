"""The rollout engine of PPO/GRPO on one GPU (pure functions): a vLLM-style engine's 16-bit
weights, KV cache and workspace, the trainer's own generate (hf-generate), or an engine on the
actor's own weights (DeepSpeed's hybrid engine). The workloads' memory phases (workloads.py)
and the RL iteration time (rltime.py) read it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.catalog.params import count_params
from planner.catalog.request import TrainConfig, rollout_gpu_count
from planner.catalog.specs import ModelSpec
from planner.models import calibration as cal
from planner.models import efficiency as eff
from planner.models.memory import kv_bytes_per_token, layer_activation_bytes_per_token


@dataclass(frozen=True)
class Engine:
    """The rollout generator on one GPU: bytes of weights, KV cache and workspace, and the
    sequences it decodes at once. A vLLM-style engine holds its own 16-bit weights and a
    workspace; the trainer's own generate (hf-generate) holds only what generating adds to
    the resident trainer (generate_parts); an engine on the actor's weights, what it gathers
    and DeepSpeed's workspace (hybrid_bytes_per_sequence, in kv_cache)."""

    weights: float
    kv_cache: float
    workspace: float
    concurrency: int  # sequences decoded together by one engine
    sequences_per_engine: int
    engines: int
    in_trainer: bool = False  # hf-generate: the trainer's model generates
    on_actor_weights: bool = False  # deepspeed-hybrid: generates with the actor's parameters

    @property
    def total(self) -> float:
        """Bytes the engine holds on one GPU."""
        return self.weights + self.kv_cache + self.workspace

    def awake_terms(self) -> dict[str, float]:
        """What an engine that does not sleep keeps through training: everything, but an engine
        on the actor's own parameters frees its gathered copy when generation returns
        (TrainConfig.engine_on_actor_weights) and keeps its cache and workspace."""
        out = self.terms()
        return {k: v for k, v in out.items() if k != "engine weights"} \
            if self.on_actor_weights else out

    def terms(self) -> dict[str, float]:
        """The engine's memory terms by name, bytes."""
        if self.in_trainer:
            out = {"engine gathered_weights": self.weights, "engine kv_cache": self.kv_cache,
                   "engine logits_or_prefill": self.workspace}
            return {k: v for k, v in out.items() if v}
        return {"engine weights": self.weights, "engine kv_cache": self.kv_cache,
                "engine workspace": self.workspace}


def kv_bytes_per_sequence(model: ModelSpec, cfg: TrainConfig) -> float:
    """Full-length KV cache of one sequence on one GPU: 2 x layers x kv_heads x head_dim x 2 B
    per token x (prompt + response) / rollout TP (DESIGN.md s.4)."""
    return kv_bytes_per_token(model) * cfg.seq_len / cfg.rollout_tp


# An engine on the actor's own parameters (TrainConfig.engine_on_actor_weights) has no copy of
# its own: DeepSpeed's hybrid engine wraps the training module's tensors in its inference
# containers; under ZeRO-3 generate() gathers them whole (DeepSpeed-Chat's default
# pin_parameters) or per inference-TP slice inside GatheredParameters, which frees them when it
# returns; its KV cache and activation workspace (inference_context.h GenWorkSpace, per
# sequence: hybrid_bytes_per_sequence) are freed only with --release_inference_cache
# (hybrid_engine.py generate() @ deepspeedai/DeepSpeed edaa722; DeepSpeed-Chat step3 README:
# "Release the memory reserved for sentence generation").


def policy_bytes_per_engine_gpu(model: ModelSpec, rollout_tp: int) -> float:
    """16-bit weights of the policy split over rollout TP: what each decoding step reads (QLoRA
    policies are served from the dequantised 16-bit base as verl/OpenRLHF do when they merge
    adapters)."""
    return count_params(model).total * 2 / rollout_tp


def engine_weight_bytes(model: ModelSpec, cfg: TrainConfig) -> float:
    """The engine's own copy of the policy (policy_bytes_per_engine_gpu); none for the
    trainer's own generate, which reads the weights the trainer holds, and for an engine on
    the actor's parameters only the copy it gathers from ZeRO-3 shards (see above)."""
    if cfg.generates_in_trainer or (cfg.engine_on_actor_weights and not cfg.shards_weights):
        return 0.0
    return policy_bytes_per_engine_gpu(model, cfg.rollout_tp)


def on_trainer_model(cfg: TrainConfig) -> bool:
    """The generator runs on the trainer's own model: the trainer's generate (hf-generate) or
    an engine on the actor's parameters (DeepSpeed's hybrid engine). It has no weights of its
    own to sleep, no memory fraction to set, and runs whole batches (no continuous batching:
    rltime.tail_waves); its memory parts depend on the strategy (solver tables)."""
    return cfg.generates_in_trainer or cfg.engine_on_actor_weights


def weights_sleep_on_host(cfg: TrainConfig) -> bool:
    """A colocated engine that sleeps while training runs moves weights of its own to the host
    and back (vLLM sleep mode); a generator on the trainer's model has none (on_trainer_model)."""
    return cfg.is_rl and cfg.placement == "colocate" and cfg.engine_sleep \
        and not on_trainer_model(cfg)


def hybrid_bytes_per_sequence(model: ModelSpec, cfg: TrainConfig) -> float:
    """DeepSpeed's inference workspace per sequence of the batch (csrc/transformer/inference/
    includes/inference_context.h GenWorkSpace @ deepspeedai/DeepSpeed edaa722), 16-bit, for
    max_out_tokens T = prompt + response (DeepSpeed-Chat's rlhf_engine.py): (10 x width
    activations + heads / tp x T attention scores + 2 x layers x width / tp KV cache) x T,
    width = heads x head size padded to 32, 64 or 128 (MHA: the kernels cache every head)."""
    heads, t, tp = model.num_attention_heads, cfg.seq_len, cfg.rollout_tp
    padded = next((p for p in (32, 64, 128) if model.head_dim <= p), model.head_dim)
    width = heads * padded
    return (10 * width + heads / tp * t + 2 * model.num_layers * width / tp) * t * 2


def generate_parts(model: ModelSpec, cfg: TrainConfig) -> tuple[float, float, float]:
    """(gathered weights, KV cache per sequence, transient bytes per sequence) of the trainer's
    own generate (hf-generate, e.g. TRL GRPOTrainer with use_vllm=False) on one GPU.

    * No second copy of the weights: generate reads the policy the trainer holds. Sharded
      weights (ZeRO-3/FSDP) are gathered whole for generation (TRL ds3_gather_for_generation
      defaults to True; FSDP summon_full_params), a full 16-bit copy beside the shards.
    * KV cache of each sequence at its real final length, prompt + response tokens x
      memory.kv_bytes_per_token (the cache grows with the sequence: no reserved pool).
    * Transients, the larger of: the prefill's one-layer working set over the prompt
      (memory.layer_activation_bytes_per_token, no recomputation) and a decoding step's
      last-position logits (vocab x GENERATE_LOGIT_BYTES: 16-bit logits, fp32 copy, processed
      scores, probabilities).
    The GPU's peak while generating is the trainer's residents + gathered + batch x (KV +
    transients) (Engine.total at concurrency = batch)."""
    gathered = count_params(model).total * 2 if cfg.shards_weights else 0.0
    kv = kv_bytes_per_token(model) * cfg.seq_len
    prefill = layer_activation_bytes_per_token(
        model, cfg.model_copy(update={"checkpointing": "none"})) * (cfg.prompt_len or 0)
    logits = model.vocab_size * cal.GENERATE_LOGIT_BYTES
    return gathered, kv, max(prefill, logits)


def engine_parts(model: ModelSpec, cfg: TrainConfig) -> tuple[float, float, float]:
    """(weights, workspace, bytes per sequence decoded at once) of the rollout generator on one
    GPU: a vLLM-style engine's 16-bit weights, ENGINE_WORKSPACE_GIB and full-length KV per
    sequence; the trainer's own generate, its gathered weights, no workspace and KV +
    transients per sequence (generate_parts); an engine on the actor's parameters, what it
    gathers and DeepSpeed's workspace per sequence (hybrid_bytes_per_sequence). The one home
    of both for rollout.engine and the planner's memory tables (space.memory_tables)."""
    if cfg.generates_in_trainer:
        gathered, kv, transient = generate_parts(model, cfg)
        return gathered, 0.0, kv + transient
    if cfg.engine_on_actor_weights:
        return engine_weight_bytes(model, cfg), 0.0, hybrid_bytes_per_sequence(model, cfg)
    return (engine_weight_bytes(model, cfg), cal.ENGINE_WORKSPACE_GIB * cal.GIB,
            kv_bytes_per_sequence(model, cfg))


def engine(model: ModelSpec, cfg: TrainConfig, capacity: float | None) -> Engine:
    """The engine of ``cfg`` on a GPU of ``capacity`` bytes.

    Each engine (rollout_tp GPUs) generates its share of rollout_batch x rollout_n sequences.
    With ``gpu_memory_utilization`` u the engine takes u x capacity and decodes as many
    sequences as its KV cache holds at full length; without it the engine is sized to decode
    its whole share at once, capped at the framework's max_num_seqs (cfg.rollout_max_seqs, else
    vLLM's default MAX_DECODE_BATCH), and the plan
    reports the u to set. The trainer's own generate (hf-generate) decodes
    ``generate_micro_batch`` sequences per call (default: the GPU's whole share, as TRL's one
    generate call over its local generation batch), with no cap. An engine on the actor's
    weights generates one generation batch per call, the batch its experience passes then run
    whole (cfg.logprob_batch per GPU; DeepSpeed-Chat's --per_device_generation_batch_size,
    gathered over the inference TP group: hybrid_engine.py generate() all_gather_into_tensor),
    with no cap."""
    engines = max(1, rollout_gpu_count(cfg) // cfg.rollout_tp)
    share = math.ceil(cfg.rollout_batch * cfg.samples_per_prompt / engines)
    if cfg.generates_in_trainer:
        gathered, kv, transient = generate_parts(model, cfg)
        conc = min(share, cfg.generate_micro_batch or share)
        return Engine(gathered, conc * kv, conc * transient, conc, share, engines, True)
    weights, work, per_seq = engine_parts(model, cfg)
    if cfg.gpu_memory_utilization is not None and capacity is not None:
        pool = cfg.gpu_memory_utilization * capacity
        kv = max(0.0, pool - weights - work)
        conc = min(share, cfg.rollout_max_seqs or eff.MAX_DECODE_BATCH, int(kv // per_seq))
        return Engine(weights, kv, work, conc, share, engines, False, cfg.engine_on_actor_weights)
    conc = min(share, cfg.logprob_batch * cfg.rollout_tp if cfg.engine_on_actor_weights
               else cfg.rollout_max_seqs or eff.MAX_DECODE_BATCH)
    return Engine(weights, conc * per_seq, work, conc, share, engines, False,
                  cfg.engine_on_actor_weights)
