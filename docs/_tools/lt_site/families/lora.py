"""LoRA on the site: the badges of :mod:`literate_transformer.lora`, on the Llama family's running example.

Not a model family: :mod:`literate_transformer.lora` adapts any model's linear layers.  Its badges run on a random
``transformers`` Llama of the Llama example's sizes (4 query heads sharing 2 key/value heads), adapted by peft
(``get_peft_model`` with ``LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])``), and on the
package's copy of it (``from_hf``), adapted by :func:`~literate_transformer.lora.add` from the same seed; each B,
zero at the start, is then given the same random values on both sides (a zero B would hide a wrong B or scale).

* :func:`~literate_transformer.lora.add`: the logits at the real positions of the book example's padded batch,
  and every adapter's gradient of a loss on them, against peft's;
* :func:`~literate_transformer.lora.merge`: the merged model's logits against the unmerged model's;
* :func:`~literate_transformer.lora.save`: the logits of a fresh ``transformers`` Llama with the saved folder
  loaded by ``peft.PeftModel.from_pretrained``, against the package's adapted model.
"""

from __future__ import annotations

import copy
import tempfile
from functools import lru_cache
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model

from literate_transformer import lora
from literate_transformer.core.records import record

from ..base import Proof, book_example, hf_and_ours, max_diff

__all__ = ["PROOFS"]

#: Llama's running example's sizes (its record's).
LLAMA_SIZES = dict(record("llama").sizes)

#: The adapters' settings, on both sides.
RANK, ALPHA, TARGETS = 8, 16, ("q_proj", "v_proj")
#: The seed both sides draw A from; B's values are drawn from it too.
SEED = 3


@lru_cache(maxsize=1)
def _base() -> dict[str, Any]:
    hf, ours = hf_and_ours("LlamaConfig", "LlamaForCausalLM", LLAMA_SIZES, bos_token_id=1, eos_token_id=2)
    example = book_example()
    return {"hf": hf, "ours": ours, "input_ids": example["source_ids"], "attention_mask": example["source_mask"]}


def _adapted() -> tuple[Any, torch.nn.Module]:
    """peft's adapted Llama and the package's, fresh copies, the same A (one seed) and the same random B."""
    base = _base()
    torch.manual_seed(SEED)
    config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=list(TARGETS), lora_dropout=0.0)
    theirs = get_peft_model(copy.deepcopy(base["hf"]), config)
    torch.manual_seed(SEED)
    ours = lora.add(copy.deepcopy(base["ours"]), rank=RANK, alpha=ALPHA, targets=TARGETS)
    parameters = dict(theirs.named_parameters())
    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, adapter in lora.adapters(ours).items():
            b = 0.1 * torch.randn(adapter.lora_B.weight.shape, generator=generator)
            adapter.lora_B.weight.copy_(b)
            parameters[f"base_model.model.{name}.lora_B.default.weight"].copy_(b)
    return theirs, ours


def _logits(model: torch.nn.Module) -> torch.Tensor:
    """The logits at the real positions of the padded batch."""
    base = _base()
    mask = base["attention_mask"]
    return model(input_ids=base["input_ids"], attention_mask=mask).logits[mask.bool()]


@torch.no_grad()
def _add_logits() -> float:
    """max |package's LoRA logits - peft's|."""
    theirs, ours = _adapted()
    return max_diff(_logits(ours), _logits(theirs))


def _add_gradients() -> float:
    """max |gradient - peft's| over every adapter's A and B, of one loss on the logits."""
    theirs, ours = _adapted()
    parameters = dict(theirs.named_parameters())
    with torch.enable_grad():
        for model in (ours, theirs):
            logits = _logits(model)
            weights = torch.randn(logits.shape[-1], generator=torch.Generator().manual_seed(2))
            (logits * weights).tanh().sum().backward()
    differences = []
    for name, adapter in lora.adapters(ours).items():
        for piece in ("lora_A", "lora_B"):
            reference = parameters[f"base_model.model.{name}.{piece}.default.weight"].grad
            if reference is None or not reference.abs().max() > 0:
                return float("inf")  # no gradient reached peft's adapter: nothing was compared
            differences.append(max_diff(getattr(adapter, piece).weight.grad, reference))
    return max(differences)


@torch.no_grad()
def _merged() -> float:
    """max |merged model's logits - the adapted model's|."""
    _, ours = _adapted()
    unmerged = _logits(ours)
    return max_diff(_logits(lora.merge(ours)), unmerged)


@torch.no_grad()
def _saved() -> float:
    """max |logits of peft's PeftModel.from_pretrained on the saved folder - the package's|."""
    _, ours = _adapted()
    with tempfile.TemporaryDirectory() as folder:
        lora.save(ours, folder)
        loaded = PeftModel.from_pretrained(copy.deepcopy(_base()["hf"]), folder)
    return max_diff(_logits(loaded), _logits(ours))


PROOFS = (
    Proof(
        "lora.add",
        "peft LoraConfig model (logits)",
        "tests/test_lora.py::test_a_llamas_logits_equal_pefts_on_a_padded_batch",
        _add_logits,
        example="llama",
    ),
    Proof(
        "lora.add",
        "peft LoraConfig model (adapter gradients)",
        "tests/test_lora.py::test_a_llamas_adapter_gradients_equal_pefts",
        _add_gradients,
        example="llama",
    ),
    Proof(
        "lora.merge",
        "the unmerged model (logits)",
        "tests/test_lora.py::test_merged_equals_unmerged_and_leaves_plain_linear_layers",
        _merged,
        example="llama",
    ),
    Proof(
        "lora.save",
        "peft PeftModel.from_pretrained on the saved folder (logits)",
        "tests/test_lora.py::test_the_saved_adapter_has_pefts_keys_and_peft_loads_it_to_the_same_logits",
        _saved,
        example="llama",
    ),
)
