"""BART, built from the package's parts under HuggingFace's names, equals transformers.BartForConditionalGeneration.

Random HuggingFace BARTs of unusual shapes (encoder and decoder of different
depths, head counts and feed-forward widths, scaled and unscaled
embeddings), every parameter randomised so that no layer norm is the
identity and ``final_logits_bias`` is not zero, are converted with
``from_hf``.

Tolerance: fp32, absolute 1e-5 on logits, the encoder's output and every
encoder, decoder and cross-attention probability, with a padded source
(whole tensors: padded source positions are keys that nobody attends to,
and queries that still see the real keys).  Generation: exactly the token
ids of HuggingFace's greedy ``generate()``.
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import BART, padded_batch

from literate_transformer import from_hf
from literate_transformer.models.bart import (
    BartForConditionalGeneration,
    BartModel,
    check_bart_config,
)

PAD, BOS, EOS = 1, 0, 2

COMPARED = ["scaled_5_and_3_heads", "unscaled_relu_deeper_decoder"]


@pytest.fixture(params=COMPARED, scope="module")
def models(request, randomize):
    """HuggingFace's BART with random weights (final_logits_bias included), and the package's from ``from_hf``."""
    torch.manual_seed(0)
    config = transformers.BartConfig(
        **BART(request.param),
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        decoder_start_token_id=EOS,
        attn_implementation="eager",
    )
    hf = randomize(transformers.BartForConditionalGeneration(config), scale=0.3)
    with torch.no_grad():
        hf.final_logits_bias.normal_(0.0, 0.3)
    return hf, from_hf(hf)


targets = families.seq2seq_targets


def padded_sources(config):
    """Three sources, the last two padded (the last one to a single token)."""
    return padded_batch(config.vocab_size, 7, (0, 3, 6), PAD)


# ---------------------------------------------------------------------------
# Equal to HuggingFace
# ---------------------------------------------------------------------------
def test_from_hf_builds_bart_under_hfs_names(models):
    hf, ours = models
    assert isinstance(ours, BartForConditionalGeneration) and not ours.training
    # HuggingFace's names, tensor for tensor: post-LN layers, no norm after either stack, final_logits_bias.
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    assert not any("layer_norm" in name for name, _ in ours.model.encoder.named_children())
    assert (len(ours.encoder.layers), len(ours.decoder.layers)) == (hf.config.encoder_layers, hf.config.decoder_layers)
    assert ours.encoder.embed_positions.offset == 2 and ours.encoder.layernorm_embedding is not None
    # One table: the encoder's, the decoder's and the head's weight.
    assert ours.decoder.embed_tokens is ours.encoder.embed_tokens is ours.model.shared
    assert ours.lm_head.weight is ours.model.shared.weight
    torch.testing.assert_close(ours.final_logits_bias, hf.final_logits_bias, atol=0, rtol=0)
    assert not any(name == "final_logits_bias" for name, _ in ours.named_parameters())


def test_logits_encoder_output_and_attentions_equal_hf_with_padded_sources(models):
    hf, ours = models
    input_ids, attention_mask = padded_sources(hf.config)
    # The encoder's output everywhere: BART's padded source positions are queries that still see the real keys.
    families.assert_seq2seq_equals_hf(
        hf, ours, input_ids, attention_mask, targets(hf.config), families.ATOL, padded_encoder_positions=True
    )


def test_greedy_generation_gives_hfs_token_ids(models, hf_api):
    hf, ours = models
    families.assert_seq2seq_greedy_ids_equal_hfs(hf, ours, hf_api, *padded_sources(hf.config), max_new_tokens=8)


@torch.no_grad()
def test_cached_decoding_equals_uncached(models):
    hf, ours = models
    families.assert_cached_decoding_equals_uncached(
        ours, *padded_sources(hf.config), max_new_tokens=6, bos_token_id=hf.config.decoder_start_token_id
    )


def test_bart_model_without_head_equals_hf_bart_model(randomize):
    fields = BART("unscaled_relu_deeper_decoder")
    hf = randomize(transformers.BartModel(transformers.BartConfig(**fields, pad_token_id=PAD)))
    ours = from_hf(hf)
    assert type(ours) is BartModel and not hasattr(ours, "lm_head")
    families.assert_seq2seq_model_equals_hf(hf, ours, *padded_sources(hf.config), targets(hf.config), families.ATOL)


def test_without_decoder_input_ids_the_source_shifted_right_is_decoded_as_hf_does(models):
    hf, ours = models
    input_ids, attention_mask = padded_sources(hf.config)
    with torch.no_grad():
        expected = hf(input_ids=input_ids, attention_mask=attention_mask)
        actual = ours(input_ids, attention_mask)
    torch.testing.assert_close(actual.logits, expected.logits, atol=families.ATOL, rtol=0)
    assert actual.logits.shape[1] == input_ids.shape[1]


def test_shift_tokens_right_equals_hfs():
    from transformers.models.bart.modeling_bart import shift_tokens_right as hf_shift

    from literate_transformer.models.bart import shift_tokens_right

    labels = torch.tensor([[5, 6, -100, 2], [7, -100, -100, -100]])
    assert torch.equal(shift_tokens_right(labels, PAD, EOS), hf_shift(labels, PAD, EOS))


def test_without_a_start_token_missing_targets_are_refused():
    config = transformers.BartConfig(**BART("scaled_5_and_3_heads"), pad_token_id=PAD)
    config.decoder_start_token_id = None
    ours = BartModel(config).eval()
    with pytest.raises(ValueError, match="decoder_input_ids is None and config.decoder_start_token_id is not set"):
        ours(torch.tensor([[5, 6, 7]]))


# ---------------------------------------------------------------------------
# The key map
# ---------------------------------------------------------------------------
def test_key_map_names_a_missing_tensor_and_refuses_a_second_embedding_table(models):
    hf, ours = models
    state, expected = hf.state_dict(), ours.state_dict()
    missing = "model.decoder.layers.0.encoder_attn_layer_norm.bias"
    families.assert_key_map_names_a_missing_tensor(
        BartForConditionalGeneration.map_hf_state_dict, state, expected, missing
    )
    copy = "model.decoder.embed_tokens.weight"
    families.assert_key_map_refuses_a_changed_copy(
        BartForConditionalGeneration.map_hf_state_dict, state, expected, copy, "one embedding table"
    )


def test_each_stack_gets_its_own_sizes_and_the_config_is_checked():
    ours = BartForConditionalGeneration(transformers.BartConfig(**BART("scaled_5_and_3_heads")))
    encoder_layer, decoder_layer = ours.encoder.layers[0], ours.decoder.layers[0]
    assert (len(ours.encoder.layers), encoder_layer.self_attn.num_heads, encoder_layer.fc1.out_features) == (2, 5, 44)
    assert (len(ours.decoder.layers), decoder_layer.self_attn.num_heads, decoder_layer.fc1.out_features) == (1, 3, 36)
    assert ours.encoder.embed_positions.offset == 2 and ours.model.shared.embed_scale == 30**0.5
    with pytest.raises(TypeError, match="BartConfig"):
        check_bart_config(transformers.GPT2Config())


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------
def test_batch_sizes_that_disagree_between_source_and_target_are_refused(models):
    hf, ours = models
    input_ids, attention_mask = padded_sources(hf.config)
    with pytest.raises(ValueError, match="decoder_input_ids has batch size 2, but input_ids has batch size 3"):
        ours(input_ids, attention_mask, targets(hf.config)[:2])


def test_masks_of_the_wrong_shape_are_refused(models):
    hf, ours = models
    input_ids, attention_mask = padded_sources(hf.config)
    families.assert_seq2seq_refuses_masks_of_the_wrong_shape(ours, input_ids, attention_mask, targets(hf.config))
    with pytest.raises(TypeError, match="decoder_input_ids must be a torch.Tensor"):
        ours(input_ids, attention_mask, [[2, 5]])


def test_inputs_longer_than_the_positions_and_ids_outside_the_vocabulary_are_refused(models):
    hf, ours = models
    positions, vocab_size = hf.config.max_position_embeddings, hf.config.vocab_size
    too_long = torch.full((1, positions + 1), 5)
    with pytest.raises(ValueError, match=f"input_ids has {positions + 1} tokens, more than max_position_embeddings"):
        ours(too_long, decoder_input_ids=torch.tensor([[EOS]]))
    with pytest.raises(ValueError, match=rf"decoder_input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours(torch.tensor([[5, 6]]), decoder_input_ids=torch.tensor([[EOS, vocab_size]]))


def test_max_new_tokens_that_is_negative_or_runs_past_the_positions_is_refused(models):
    hf, ours = models
    source = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match="max_new_tokens must be at least 1, got -2"):
        ours.generate(source, max_new_tokens=-2)
    positions = hf.config.max_position_embeddings
    with pytest.raises(ValueError, match=f"max_new_tokens={positions + 1} would feed the decoder positions up to"):
        ours.generate(source, max_new_tokens=positions + 1)


@torch.no_grad()
def test_a_fully_masked_source_row_gives_finite_output(models):
    hf, ours = models
    input_ids, attention_mask = padded_sources(hf.config)
    attention_mask[2] = 0
    output = ours(input_ids, attention_mask, targets(hf.config))
    assert torch.isfinite(output.logits).all() and torch.isfinite(output.encoder_last_hidden_state).all()
    assert ours.generate(input_ids, attention_mask, max_new_tokens=3).shape[0] == 3
