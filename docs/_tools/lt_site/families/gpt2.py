"""GPT-2 on the site: its running example (the annotated source's values) and its proof (the badge)."""

from __future__ import annotations

import torch
from transformers import GPT2Config

from literate_transformer.models.gpt2 import GPT2LMHeadModel

from ..base import BOOK_DIMS, BOOK_EXAMPLE_SIZES, Proof, RunningExample, book_example, hf_and_ours, max_diff

#: The book example's sizes, under the standard names every transformers config answers to (GPT2Config maps
#: them onto n_embd, n_head, n_layer, n_positions), and GPT-2's own name for the feed-forward width.
SIZES = dict(
    {name: value for name, value in BOOK_EXAMPLE_SIZES.items() if name not in ("intermediate_size", "num_labels")},
    n_inner=BOOK_EXAMPLE_SIZES["intermediate_size"],
)


def _gpt2_on_two_prompts() -> None:
    torch.manual_seed(0)
    prompt = torch.randint(3, SIZES["vocab_size"], (2, 5))
    prompt_mask = torch.ones(2, 5, dtype=torch.long)
    prompt_mask[1, :2] = 0  # the second prompt is left-padded, as for generation
    gpt2 = GPT2LMHeadModel(GPT2Config(**SIZES, eos_token_id=2)).eval()
    gpt2(prompt, attention_mask=prompt_mask, output_attentions=True)
    gpt2.generate(prompt, prompt_mask, max_new_tokens=3)


EXAMPLES = (
    RunningExample(
        "gpt2",
        "a small random GPT-2 with the book example's sizes: 2 prompts of 5 tokens, the second left-padded by 2, "
        "then 3 new tokens",
        dict(BOOK_DIMS, S=5),
        _gpt2_on_two_prompts,
    ),
)


@torch.no_grad()
def _gpt2() -> float:
    example = book_example()
    hf, ours = hf_and_ours("GPT2Config", "GPT2LMHeadModel", SIZES, bos_token_id=1, eos_token_id=2)
    ids = example["source_ids"]
    mask = torch.ones_like(ids)
    mask[1, -2:] = 0  # right padding: every query row keeps a real key
    logits = ours(ids, attention_mask=mask).logits
    return max_diff(logits, hf(input_ids=ids, attention_mask=mask).logits, mask.bool())


PROOFS = (
    Proof(
        "models.gpt2.GPT2LMHeadModel",
        "transformers GPT2LMHeadModel",
        "tests/models/test_gpt2.py::test_logits_hidden_states_and_attentions_equal_hf_with_padding",
        _gpt2,
        example="gpt2",
    ),
)
