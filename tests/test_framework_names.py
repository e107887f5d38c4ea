"""Framework names as users and unseen validation files write them (catalog/slugs.py rules 7
and 8): a vendor or organisation word or a GitHub owner in front of a known name is dropped,
a vendor word alone or in front of an unknown name stays unknown, and Ray Train, an
orchestrator, resolves to the framework it is combined with or is refused in one line."""

from __future__ import annotations

import re

import pytest

from planner.catalog.load import load_catalog
from planner.errors import UnknownNameError
from tests.test_cli import run

CAT = load_catalog()


@pytest.mark.parametrize(("slug", "fid"), [
    ("Hugging Face TRL", "trl"), ("HuggingFace TRL", "trl"), ("HF TRL", "trl"),
    ("Hugging Face Accelerate", "hf-trainer"), ("Hugging Face Transformers", "hf-trainer"),
    ("Mosaic llm-foundry", "llm-foundry"), ("MosaicML LLM Foundry", "llm-foundry"),
    ("NVIDIA NeMo", "nemo"), ("NVIDIA Megatron-LM", "megatron-lm"),
    ("NVIDIA NeMo RL", "nemo-rl"), ("Microsoft DeepSpeed", "deepspeed"),
    ("Meta Lingua", "lingua"), ("PyTorch torchtune", "torchtune"),
    ("PyTorch torchtitan", "torchtitan"), ("Alibaba ROLL", "roll"),
    ("ByteDance verl", "verl"), ("Lightning AI LitGPT", "litgpt"),
    # the other rules still apply to what is left
    ("Hugging Face TRL==0.19", "trl"), ("HF TRL-DeepSpeed", "hf-deepspeed"),
    ("Hugging Face Transformers + DeepSpeed ZeRO-3", "hf-deepspeed"),
    ("NVIDIA Megatron-LM+DeepSpeed", "megatron-deepspeed"),
    # a GitHub owner in front of a repository's name
    ("huggingface/trl", "trl"), ("NVIDIA/Megatron-LM", "megatron-lm"),
    ("mosaicml/llm-foundry", "llm-foundry"), ("pytorch/torchtitan", "torchtitan"),
])
def test_rule_7_a_vendor_word_or_owner_in_front_of_a_known_name_is_dropped(slug, fid):
    found = CAT.framework_match(slug)
    assert found.spec.id == fid


@pytest.mark.parametrize(("slug", "fid"), [
    # ids and aliases that begin with a vendor word keep their own meaning
    ("PyTorch FSDP", "pytorch-fsdp"), ("pytorch_fsdp", "pytorch-fsdp"),
    ("PyTorch Lightning", "pytorch-lightning"), ("HF_Trainer", "hf-trainer"),
    ("HF_Trainer-DeepSpeed", "hf-deepspeed"), ("hf-deepspeed", "hf-deepspeed"),
    ("Meta Lingua", "lingua"), ("PyTorch FSDP2", "pytorch-fsdp"),
])
def test_rule_7_leaves_names_that_are_ids_or_aliases_alone(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize("slug", [
    "NVIDIA", "Microsoft", "Meta", "Hugging Face", "Alibaba", "ByteDance", "Lightning AI",
    "NVIDIA foo", "Meta Llama", "nvidia+deepspeed", "Microsoft-sft", "someone/unknown-repo",
])
def test_rule_7_a_vendor_word_alone_or_before_an_unknown_name_stays_unknown(slug):
    with pytest.raises(UnknownNameError, match=f"unknown framework '{re.escape(slug)}'"):
        CAT.framework(slug)


@pytest.mark.parametrize(("slug", "fid"), [
    ("ray train + deepspeed", "deepspeed"), ("Ray Train+TRL", "trl"), ("ray+fsdp", "pytorch-fsdp"),
    ("trl + ray train", "trl"), ("ray-train+verl", "verl"),
])
def test_rule_8_ray_train_combined_with_a_framework_is_that_framework(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize("slug", ["ray train", "Ray Train==2.40", "Ray", "ray-project/ray",
                                  "RayTrain"])
def test_rule_8_ray_train_alone_is_refused_naming_what_to_write(capsys, slug):
    refused_in_one_line(capsys, slug, "Ray Train", "ray train + trl")


def refused_in_one_line(capsys, slug: str, what: str, hint: str) -> None:
    """The lookup of ``slug`` raises one line saying ``what`` and ``hint``, and `planner check`
    with it exits 2 printing one line that says ``what``."""
    with pytest.raises(UnknownNameError) as err:
        CAT.framework(slug)
    text = str(err.value)
    assert "\n" not in text and what in text and hint in text
    code, _, out = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--framework", slug)
    assert code == 2 and out.count("\n") == 1 and what in out


def test_the_rule_says_which_name_was_left():
    found = CAT.framework_match("Hugging Face TRL v0.19")
    assert (found.spec.id, found.version, found.rule) == ("trl", "0.19", "trl (rules 6 to 8)")
    assert CAT.framework_match("trl").rule == "id or alias"


@pytest.mark.parametrize("slug", ["unsloth-zoo", "unsloth_zoo", "unslothai/unsloth-zoo",
                                  "Unsloth Zoo==2026.8.13"])
def test_unsloths_kernel_package_is_unsloth(slug):
    assert CAT.framework(slug).id == "unsloth"


@pytest.mark.parametrize(("slug", "fid"), [
    ("peft+bitsandbytes", "hf-trainer"), ("transformers+peft+bitsandbytes", "hf-trainer"),
    ("hf+bnb", "hf-trainer"), ("trl+bnb", "trl"), ("trl+bitsandbytes", "trl"),
    ("TRL + bitsandbytes", "trl"), ("trl-bnb", "trl"), ("axolotl+bitsandbytes", "axolotl"),
    ("Hugging Face Transformers + PEFT + bitsandbytes", "hf-trainer"),
    ("trl+peft+bnb+deepspeed", "hf-deepspeed"),
])
def test_rule_9_bitsandbytes_is_a_qlora_backend_word(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize("slug", ["bitsandbytes", "bnb", "BitsAndBytes", "bitsandbytes==0.45.0"])
def test_rule_9_bitsandbytes_alone_is_refused_as_a_library(capsys, slug):
    refused_in_one_line(capsys, slug, "quantization library", "trl+bitsandbytes")


def test_rule_9_a_framework_without_qlora_does_not_run_on_bitsandbytes():
    with pytest.raises(UnknownNameError, match="fairseq2 does not run on bitsandbytes"):
        CAT.framework("fairseq2+bnb")


@pytest.mark.parametrize(("slug", "engine"), [
    ("vllm", "vLLM"), ("vLLM v0.6", "vLLM"), ("vllm==0.6.3", "vLLM"),
    ("vllm-project/vllm", "vLLM"), ("TGI", "Text Generation Inference"),
    ("text-generation-inference", "Text Generation Inference"),
    ("Text Generation Inference", "Text Generation Inference"),
    ("Hugging Face TGI", "Text Generation Inference"),
    ("huggingface/text-generation-inference", "Text Generation Inference"),
    ("TensorRT-LLM", "TensorRT-LLM"), ("trtllm", "TensorRT-LLM"), ("TRT-LLM", "TensorRT-LLM"),
    ("tensorrt_llm 0.12", "TensorRT-LLM"), ("NVIDIA TensorRT-LLM", "TensorRT-LLM"),
    ("sglang", "SGLang"), ("SGLang v0.4.3", "SGLang"), ("lmdeploy", "LMDeploy"),
])
def test_rule_10_an_inference_engine_is_refused_as_a_training_framework(capsys, slug, engine):
    with pytest.raises(UnknownNameError) as err:
        CAT.framework(slug)
    text = str(err.value)
    assert "\n" not in text and f"is {engine}, an inference engine" in text
    assert "unknown framework" not in text
    code, _, out = run(capsys, "check", "--model", "7b", "--gpu", "h100-sxm", "--framework", slug)
    assert code == 2 and out.count("\n") == 1 and "an inference engine" in out


@pytest.mark.parametrize(("slug", "fid"), [
    ("verl+vllm", "verl"), ("verl+sglang", "verl"), ("openrlhf+vllm", "openrlhf"),
])
def test_rule_10_leaves_an_rl_framework_on_its_engine_alone(slug, fid):
    assert CAT.framework(slug).id == fid


@pytest.mark.parametrize(("spelled", "stack"), [
    ("TGI", "tgi"), ("text-generation-inference", "tgi"), ("Text Generation Inference", "tgi"),
    ("huggingface/text-generation-inference", "tgi"), ("TensorRT-LLM", "tensorrt-llm"),
    ("trtllm", "tensorrt-llm"), ("TensorRT_LLM", "tensorrt-llm"), ("vLLM v0.6", "vllm"),
    ("vllm==0.6.3", "vllm"),
    # no calibrated share of their own: vLLM's, as catalog/engines.py states
    ("sglang", "vllm"), ("lmdeploy", "vllm"),
])
def test_a_decode_case_takes_its_engines_stack_whatever_the_spelling(spelled, stack):
    from planner.catalog.engines import ENGINES
    from planner.models.efficiency import DECODE_EFFICIENCY
    from planner.validation.throughput_cases import stack_of

    assert stack_of({"framework": spelled, "workload": "decode"}) == stack
    assert stack in DECODE_EFFICIENCY
    assert all(e.stack in DECODE_EFFICIENCY and e.source for e in ENGINES)


@pytest.mark.parametrize(("slug", "fid", "version"), [
    ("Megatron-LM (core 0.8)", "megatron-lm", None),
    ("transformers (bitsandbytes)", "hf-trainer", None),
    ("verl (v0.4.1)", "verl", "0.4.1"),
    ("DeepSpeed (ZeRO-3)", "deepspeed", None),
    ("trl 0.12 (peft)", "trl", "0.12"),  # the written version wins over the remark
    ("Hugging Face Trainer", "hf-trainer", None),
])
def test_rule_2_a_trailing_remark_in_parentheses_is_dropped(slug, fid, version):
    found = CAT.framework_match(slug)
    assert (found.spec.id, found.version) == (fid, version)


@pytest.mark.parametrize("slug", ["(verl)", "Megatron-LM (core 0.8) extra", "verl (a (b))"])
def test_rule_2_leaves_other_parentheses_unknown(slug):
    with pytest.raises(UnknownNameError):
        CAT.framework_match(slug)


@pytest.mark.parametrize(("slug", "fid"), [
    ("LLaMA-Efficient-Tuning", "llama-factory"),
    ("hiyouga/LLaMA-Efficient-Tuning", "llama-factory"),
    ("tloen/alpaca-lora", "hf-trainer"), ("tatsu-lab/stanford_alpaca", "hf-trainer"),
    ("artidoro/qlora", "hf-trainer"), ("stanford_alpaca+fsdp", "accelerate-fsdp"),
    ("DPOTrainer", "trl"), ("TRL GRPOTrainer", "trl"), ("Hugging Face TRL SFTTrainer", "trl"),
])
def test_former_names_training_scripts_and_trainer_classes_name_their_framework(slug, fid):
    """A repository's former name, the training scripts that run another framework's trainer,
    and TRL's trainer classes (alone or after the framework's name: rule 6) resolve."""
    assert CAT.framework_match(slug).spec.id == fid
