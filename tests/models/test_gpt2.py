"""GPT-2, built from the package's parts under HuggingFace's names, equals transformers.GPT2LMHeadModel.

Random HuggingFace GPT-2s of unusual shapes (odd head counts, other
epsilons, activations and vocabularies), every parameter randomised so that
no layer norm is the identity, are converted with ``from_hf``.

Tolerance: fp32, absolute 1e-5 on logits, every hidden state and every
attention probability, padded positions included (right padding: no query
row is fully masked, so every row means something on both sides).
Generation: exactly the token ids of HuggingFace's ``generate()``, greedy,
sampled (same seed) and beam search.
"""

from __future__ import annotations

import functools

import pytest
import torch
import transformers
from families import (
    assert_causal_lm_loss_equals_hfs,
    assert_generate_gives_hfs_ids,
    assert_key_map_names_a_missing_tensor,
    assert_key_map_refuses_a_changed_copy,
    assert_logits_equal_at_real_positions,
    assert_same_names_and_parameters,
    right_padded_batch,
)
from shapes import GPT2, padded_batch

from literate_transformer import from_hf
from literate_transformer.models.gpt2 import GPT2LMHeadModel, GPT2Model, check_gpt2_config

ATOL = 1e-5


def random_hf_gpt2(randomize, **fields) -> transformers.GPT2LMHeadModel:
    config = transformers.GPT2Config(
        **fields, bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager"
    )
    return randomize(transformers.GPT2LMHeadModel(config), scale=0.3)


@pytest.fixture(params=GPT2.names, scope="module")
def models(request, randomize):
    """HuggingFace's GPT-2 with random weights, and the package's from ``from_hf``."""
    torch.manual_seed(0)
    hf = random_hf_gpt2(randomize, **GPT2(request.param))
    return hf, from_hf(hf)


def left_padded_prompts(config):
    """Three prompts, two left-padded (as generate() wants them)."""
    return padded_batch(config.vocab_size, 6, (0, 2, 4), seed=2, side="left")


# ---------------------------------------------------------------------------
# Equal to HuggingFace
# ---------------------------------------------------------------------------
def test_from_hf_builds_gpt2_under_hfs_names(models):
    hf, ours = models
    assert isinstance(ours, GPT2LMHeadModel) and not ours.training
    stack = ours.transformer
    # HuggingFace's names, tensor for tensor: pre-LN blocks (ln_1, ln_2), the final ln_f, no norm on the embeddings.
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    assert all(hasattr(block, "ln_1") and hasattr(block, "ln_2") for block in stack.h) and hasattr(stack, "ln_f")
    # One tensor for the token table and the head, as in the checkpoint.
    assert ours.lm_head.weight is stack.wte.weight
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())


@torch.no_grad()
def test_logits_hidden_states_and_attentions_equal_hf_with_padding(models):
    hf, ours = models
    input_ids, attention_mask = right_padded_batch(hf.config.vocab_size)
    expected = hf(input_ids, attention_mask=attention_mask, output_attentions=True, output_hidden_states=True)
    actual = ours(input_ids, attention_mask=attention_mask, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(actual.logits, expected.logits, atol=ATOL, rtol=0)
    assert len(actual.hidden_states) == len(expected.hidden_states) == hf.config.n_layer + 1
    for ours_state, hf_state in zip(actual.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(ours_state, hf_state, atol=ATOL, rtol=0)
    assert len(actual.attentions) == hf.config.n_layer
    for ours_probs, hf_probs in zip(actual.attentions, expected.attentions, strict=True):
        torch.testing.assert_close(ours_probs, hf_probs, atol=ATOL, rtol=0)
    # Not vacuous: the mask hides the padded keys from the padded queries after them.
    assert actual.attentions[0][2, :, -1, -5:].sum().item() == pytest.approx(0.0, abs=1e-6)


@torch.no_grad()
def test_greedy_generation_gives_hfs_token_ids_for_left_padded_prompts(models, hf_api):
    hf, ours = models
    input_ids, attention_mask = left_padded_prompts(hf.config)
    actual = ours.generate(input_ids, attention_mask, max_new_tokens=8)
    assert torch.equal(actual, hf_api.greedy_generate(hf, input_ids, attention_mask, max_new_tokens=8))
    # The prompt comes first, as HuggingFace returns it.
    assert torch.equal(actual[:, : input_ids.shape[1]], input_ids)


@pytest.mark.parametrize("decoding", ["sampled", "beam"])
def test_sampling_and_beam_search_give_hfs_ids(models, decoding):
    assert_generate_gives_hfs_ids(*models, decoding)


def test_an_untied_head_is_built_and_loaded_as_the_config_says(randomize):
    config = transformers.GPT2Config(**GPT2("3_heads_relu_default_inner"), tie_word_embeddings=False)
    hf = randomize(transformers.GPT2LMHeadModel(config))
    ours = from_hf(hf)
    assert ours.lm_head.weight is not ours.transformer.wte.weight
    assert_same_names_and_parameters(hf, ours)
    assert_logits_equal_at_real_positions(hf, ours, config.vocab_size)


@torch.no_grad()
def test_generation_with_and_without_the_cache_agree(models):
    _, ours = models
    input_ids, attention_mask = left_padded_prompts(ours.config)
    cached = ours.generate(input_ids, attention_mask, max_new_tokens=5)
    assert torch.equal(cached, ours.generate(input_ids, attention_mask, max_new_tokens=5, use_cache=False))


def test_gpt2_model_without_head_equals_hf_gpt2_model(randomize):
    hf = randomize(transformers.GPT2Model(transformers.GPT2Config(**GPT2("5_heads_gelu_new"))))
    ours = from_hf(hf)
    assert type(ours) is GPT2Model
    input_ids, attention_mask = right_padded_batch(hf.config.vocab_size, length=7)
    with torch.no_grad():
        expected = hf(input_ids, attention_mask=attention_mask).last_hidden_state
        actual = ours(input_ids, attention_mask=attention_mask).last_hidden_state
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)


@torch.no_grad()
def test_the_causal_lm_loss_equals_hfs_labels_loss(models):
    hf, ours = models
    assert_causal_lm_loss_equals_hfs(hf, ours)
    input_ids, _ = right_padded_batch(hf.config.vocab_size)
    with pytest.raises(ValueError, match=r"labels must be token ids in \[0, vocab_size"):
        ours(input_ids, labels=input_ids + hf.config.vocab_size)


@torch.no_grad()
def test_positional_arguments_mean_what_they_mean_in_hf(models):
    # HuggingFace's forward takes input_ids, past_key_values and attention_mask first; then token_type_ids,
    # which the package does not have, so from there on the arguments go by name.
    _, ours = models
    input_ids, next_ids = torch.tensor([[1, 2, 3]]), torch.tensor([[4]])
    cache = ours(input_ids, use_cache=True).past_key_values
    mask = torch.ones(1, 4, dtype=torch.long)
    by_position = ours(next_ids, cache, mask).logits
    torch.testing.assert_close(by_position, ours(next_ids, past_key_values=cache, attention_mask=mask).logits)
    with pytest.raises(TypeError, match="too many positional arguments"):
        ours(next_ids, cache, mask, torch.zeros_like(next_ids))


# ---------------------------------------------------------------------------
# The key map
# ---------------------------------------------------------------------------
#: GPT-2's conversion of a checkpoint, for a config that ties the head (GPT-2's default).
key_map = functools.partial(GPT2LMHeadModel.map_hf_state_dict, tied=True)


def test_key_map_names_a_missing_tensor_and_refuses_an_untied_head(models):
    hf, ours = models
    state, expected = hf.state_dict(), ours.state_dict()
    assert_key_map_names_a_missing_tensor(key_map, state, expected, "transformer.h.0.mlp.c_fc.bias")
    assert_key_map_refuses_a_changed_copy(key_map, state, expected, "lm_head.weight", "not tied")


def test_key_map_drops_the_causal_mask_buffers_of_older_checkpoints(models):
    hf, ours = models
    state = dict(hf.state_dict(), **{"transformer.h.0.attn.bias": torch.ones(1, 1, 4, 4)})
    assert sorted(key_map(state, ours.state_dict())) == sorted(ours.state_dict())


@torch.no_grad()
@pytest.mark.parametrize("option", ["scale_attn_by_inverse_layer_idx", "unscaled"])
def test_gpt2s_attention_scaling_options_equal_hf(option, randomize):
    options = {"scale_attn_by_inverse_layer_idx": True} if option != "unscaled" else {"scale_attn_weights": False}
    hf = random_hf_gpt2(randomize, **GPT2("5_heads_gelu_new"), **options)
    input_ids, attention_mask = right_padded_batch(hf.config.vocab_size)
    expected = hf(input_ids, attention_mask=attention_mask).logits
    torch.testing.assert_close(
        from_hf(hf)(input_ids, attention_mask=attention_mask).logits, expected, atol=ATOL, rtol=0
    )


def test_unsupported_gpt2_options_are_refused():
    with pytest.raises(ValueError, match="add_cross_attention"):
        check_gpt2_config(transformers.GPT2Config(add_cross_attention=True))
    with pytest.raises(TypeError, match="GPT2Config"):
        check_gpt2_config(transformers.BertConfig())


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------
def test_inputs_longer_than_the_positions_are_refused(models):
    _, ours = models
    too_long = torch.ones(1, ours.config.max_position_embeddings + 1, dtype=torch.long)
    with pytest.raises(ValueError, match=f"input_ids has .* more than max_position_embeddings={too_long.shape[1] - 1}"):
        ours(too_long)


def test_token_ids_outside_the_vocabulary_are_refused(models):
    _, ours = models
    vocab_size = ours.config.vocab_size
    with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours(torch.tensor([[1, vocab_size]]))
    with pytest.raises(TypeError, match="input_ids must have an int dtype"):
        ours(torch.tensor([[1.0, 2.0]]))


def test_masks_and_positions_of_the_wrong_shape_are_refused(models):
    _, ours = models
    input_ids = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(1, 3\)"):
        ours(input_ids, attention_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match=r"position_ids must have shape \(1, 3\)"):
        ours(input_ids, position_ids=torch.arange(4)[None])


@pytest.mark.parametrize("max_new_tokens", [-1, 0])
def test_non_positive_max_new_tokens_is_refused(models, max_new_tokens):
    _, ours = models
    with pytest.raises(ValueError, match=f"max_new_tokens must be at least 1, got {max_new_tokens}"):
        ours.generate(torch.tensor([[3, 4, 5]]), max_new_tokens=max_new_tokens)


def test_max_new_tokens_past_the_positions_is_refused(models):
    _, ours = models
    prompt = torch.tensor([[3, 4, 5]])
    # P + N - 1 positions are read: a prompt of 3 leaves room for max_position_embeddings - 2 new tokens.
    fits = ours.config.max_position_embeddings - 2
    with pytest.raises(ValueError, match=rf"max_new_tokens={fits + 1} would .*\(after a prompt of 3 tokens\)"):
        ours.generate(prompt, max_new_tokens=fits + 1)
    assert ours.generate(prompt, max_new_tokens=fits).shape == (1, 3 + fits)


def test_a_start_token_is_refused_for_a_decoder_only_model(models):
    from literate_transformer.book.generation import greedy_generate

    _, ours = models
    with pytest.raises(ValueError, match="bos_token_id must be None for a decoder-only model"):
        greedy_generate(ours, torch.tensor([[3, 4]]), 2, bos_token_id=1)


@torch.no_grad()
def test_a_fully_masked_prompt_row_gives_finite_output(models):
    _, ours = models
    input_ids = torch.tensor([[3, 4, 5, 6], [0, 0, 0, 0]])
    attention_mask = torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]])
    assert torch.isfinite(ours(input_ids, attention_mask=attention_mask).logits).all()
    assert ours.generate(input_ids, attention_mask, max_new_tokens=3).shape == (2, 7)
