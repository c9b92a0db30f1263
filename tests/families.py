"""Checks every model family's tests make, written once: a family's test file calls them on its own models.

A family of the package is proved against ``transformers`` the same way
whatever it is: its key map names a tensor a checkpoint lacks, the logits
agree at the real positions of a padded batch, cached decoding equals
uncached decoding.  The helpers here state those checks; the family's test
file says which model, which key, which tolerance.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import pytest
import torch
from torch import Tensor

from literate_transformer.book.generation import greedy_generate


def assert_key_map_names_a_missing_tensor(
    key_map: Callable[..., dict[str, Tensor]], state: Mapping[str, Tensor], expected: Mapping[str, Tensor], key: str
) -> None:
    """Drop ``key`` from a checkpoint's ``state``: the family's key map must refuse it, naming that tensor."""
    state = {name: tensor for name, tensor in state.items() if name != key}
    with pytest.raises(ValueError, match=rf"missing tensors: {re.escape(key)}"):
        key_map(state, expected)


def assert_key_map_refuses_a_changed_copy(
    key_map: Callable[..., dict[str, Tensor]],
    state: Mapping[str, Tensor],
    expected: Mapping[str, Tensor],
    key: str,
    message: str,
) -> None:
    """Change the copy ``key`` of a tied tensor: the key map must refuse the checkpoint, saying ``message``."""
    state = dict(state)
    state[key] = state[key] + 1
    with pytest.raises(ValueError, match=message):
        key_map(state, expected)


# ---------------------------------------------------------------------------
# Decoder-only language models (the decoder branch)
# ---------------------------------------------------------------------------
#: float32, absolute: logits, losses and cached decoding.
ATOL = 1e-5
#: The decodings every decoder family is proved on, by transformers' argument names (greedy: none of them).
DECODINGS = {
    "greedy": {},
    "sampled": {"do_sample": True, "temperature": 0.8, "top_k": 7, "top_p": 0.9},
    "beam": {"num_beams": 3},
}
#: The seed both sides draw from when sampling.
SEED = 7


def right_padded_batch(vocab_size: int, length: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    """Three sequences, two right-padded (by 3 and 5): every query row keeps a real key."""
    from shapes import padded_batch

    return padded_batch(vocab_size, length, (0, 3, 5))


def generation_prompts(hf_model: torch.nn.Module, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three prompts of 6, two left-padded (by 2 and 4), if transformers' generate() reads this model's mask.

    Some families' ``generate()`` in older ``transformers`` releases hands the
    model the ids alone (GPT's and CTRL's ``prepare_inputs_for_generation`` in
    4.x), so a padded prompt would be read as real tokens there: those get
    three prompts without padding instead.
    """
    from shapes import padded_batch

    input_ids, attention_mask = padded_batch(vocab_size, 6, (0, 2, 4), seed=2, side="left")
    prepared = hf_model.prepare_inputs_for_generation(input_ids, attention_mask=attention_mask)
    if prepared.get("attention_mask") is None:
        return padded_batch(vocab_size, 6, (0, 0, 0), seed=2, side="left")
    return input_ids, attention_mask


def assert_same_names_and_parameters(hf_model: torch.nn.Module, ours: torch.nn.Module) -> None:
    """HuggingFace's names, tensor for tensor, and as many parameters (a tied head counted once, on both sides)."""
    assert sorted(ours.state_dict()) == sorted(hf_model.state_dict())
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf_model.parameters())


@torch.no_grad()
def assert_logits_equal_at_real_positions(hf_model, ours, vocab_size: int, atol: float = ATOL) -> None:
    """The logits of a right-padded batch, at every real position, within ``atol``; padded positions differ freely."""
    input_ids, attention_mask = right_padded_batch(vocab_size)
    expected = hf_model(input_ids, attention_mask=attention_mask).logits
    actual = ours(input_ids, attention_mask=attention_mask).logits
    real = attention_mask.bool()
    torch.testing.assert_close(actual[real], expected[real], atol=atol, rtol=0)
    # Not vacuous: the positions' logits differ from each other (the model is not constant).
    assert (actual[0, 0] - actual[0, 1]).abs().max() > 1e-3


@torch.no_grad()
def assert_generate_gives_hfs_ids(hf_model, ours, decoding: str, max_new_tokens: int = 6) -> torch.Tensor:
    """``generate()`` with one of :data:`DECODINGS`: the very ids of ``transformers``' ``generate()``, same seed."""
    options = DECODINGS[decoding]
    input_ids, attention_mask = generation_prompts(hf_model, ours.config.vocab_size)
    torch.manual_seed(SEED)
    expected = hf_model.generate(
        input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens, **{"do_sample": False, **options}
    )
    torch.manual_seed(SEED)
    actual = ours.generate(input_ids, attention_mask, max_new_tokens, **options)
    assert torch.equal(actual, expected), f"{decoding}:\nours {actual.tolist()}\nHF   {expected.tolist()}"
    # The prompts come first, as HuggingFace returns them.
    assert torch.equal(actual[:, : input_ids.shape[1]], input_ids)
    return actual


@torch.no_grad()
def assert_cached_decoding_equals_uncached(ours, steps: int = 4) -> None:
    """Greedy decoding with the cache writes the same ids, and every step's logits within ``ATOL``, as without."""
    input_ids, attention_mask = right_padded_batch(ours.config.vocab_size, length=5)
    # Left padding, as generation wants it.
    input_ids, attention_mask = input_ids.flip(1), attention_mask.flip(1)
    cached = greedy_generate(ours, input_ids, steps, attention_mask=attention_mask)
    uncached = greedy_generate(ours, input_ids, steps, attention_mask=attention_mask, use_cache=False)
    assert torch.equal(cached.sequences, uncached.sequences)
    torch.testing.assert_close(cached.logits, uncached.logits, atol=ATOL, rtol=0)


@torch.no_grad()
def assert_causal_lm_loss_equals_hfs(hf_model, ours) -> None:
    """The loss of ``labels=`` (each position scored against the next token, padding ignored) equals HF's."""
    input_ids, attention_mask = right_padded_batch(ours.config.vocab_size)
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    expected = hf_model(input_ids, attention_mask=attention_mask, labels=labels).loss
    actual = ours(input_ids, attention_mask=attention_mask, labels=labels).loss
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)
    # Not vacuous: other labels give another loss.
    assert (ours(input_ids, attention_mask=attention_mask, labels=labels.roll(1, 1)).loss - expected).abs() > 1e-3


def assert_bad_inputs_are_refused(ours) -> None:
    """Ids outside the vocabulary, masks of the wrong shape and decoding options out of range: ValueErrors naming them."""
    vocab_size = ours.config.vocab_size
    prompt = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours(torch.tensor([[1, vocab_size]]))
    with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours.generate(torch.tensor([[1, vocab_size]]), max_new_tokens=2)
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(1, 3\)"):
        ours(prompt, attention_mask=torch.ones(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(1, 3\)"):
        ours.generate(prompt, torch.ones(1, 4, dtype=torch.long), max_new_tokens=2)
    for option, value, message in (
        ("top_p", 0.0, "top_p must be a number in \\(0, 1\\]"),
        ("top_p", 1.5, "top_p must be a number in \\(0, 1\\]"),
        ("temperature", 0.0, "temperature must be a number > 0"),
        ("temperature", -1.0, "temperature must be a number > 0"),
        ("num_beams", 0, "num_beams must be a positive int"),
        ("top_k", -1, "top_k must be a non-negative int"),
    ):
        with pytest.raises(ValueError, match=message):
            ours.generate(prompt, max_new_tokens=2, do_sample=True, **{option: value})
    limit = getattr(ours, "position_limit", ours.config.max_position_embeddings)
    if limit is not None:
        # P + N - 1 positions are read: a prompt of 3 leaves room for limit - 2 new tokens.
        with pytest.raises(ValueError, match=rf"max_new_tokens={limit - 1} would .* max_position_embeddings={limit}"):
            ours.generate(prompt, max_new_tokens=limit - 1)
        with pytest.raises(ValueError, match=f"more than max_position_embeddings={limit}"):
            ours(torch.ones(1, limit + 1, dtype=torch.long))
