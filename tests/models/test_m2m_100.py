"""M2M-100, BART's descendant in the package, equals transformers.M2M100ForConditionalGeneration.

Random HuggingFace M2M-100s of unusual shapes (an odd ``d_model``, whose
last sinusoid feature is zero; encoder and decoder of different depths,
heads and widths; a padding id that is not 1), every parameter
randomised so that no layer norm is the identity, are converted with
``from_hf``.

Tolerance: fp32, absolute 1e-5 on the logits (unpadded targets), the
encoder's output at the real positions of a padded source, and every
attention probability.  Generation: exactly the token ids of HuggingFace's
greedy ``generate()`` with the target language forced as the first token.
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import Shapes, padded_batch

from literate_transformer import from_hf
from literate_transformer.models.m2m_100 import (
    M2M100ForConditionalGeneration,
    M2M100Model,
    M2M100SinusoidalPositionalEmbedding,
)

#: A "language token" to force (any id of the vocabulary that is no special token).
TARGET_LANGUAGE = 40

# fmt: off
M2M100_SHAPES = Shapes(
    ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
     "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings",
     "activation_function", "pad_token_id"),
    {
        # name                       V   E   layers heads  FFN     positions  activation  pad
        "odd_27_3_heads_relu":     (61, 27, 2, 3,  3, 9,  44, 36,  20,        "relu",     1),
        "even_20_5_and_2_pad_0":   (53, 20, 1, 2,  5, 2,  28, 40,  24,        "gelu",     0),
    },
)
# fmt: on


def hf_m2m_100(name: str, cls=transformers.M2M100ForConditionalGeneration):
    torch.manual_seed(0)
    fields = M2M100_SHAPES(name)
    special = dict(bos_token_id=fields["pad_token_id"] ^ 1, eos_token_id=2, decoder_start_token_id=2)
    config = transformers.M2M100Config(**fields, **special, attn_implementation="eager")
    return cls(config)


@pytest.fixture(params=M2M100_SHAPES.names, scope="module")
def models(request, randomize):
    hf = randomize(hf_m2m_100(request.param), scale=0.3)
    return hf, from_hf(hf)


targets = families.seq2seq_targets


def padded_sources(config):
    """Three sources of 8 tokens, the last two padded (the last one to a single token)."""
    return padded_batch(config.vocab_size, 8, (0, 3, 7), config.pad_token_id)


# ---------------------------------------------------------------------------
# Equal to HuggingFace
# ---------------------------------------------------------------------------
def test_from_hf_builds_m2m_100_as_a_pre_ln_bart_under_hfs_names(models):
    hf, ours = models
    assert isinstance(ours, M2M100ForConditionalGeneration) and not ours.training
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    for stack in (ours.encoder, ours.decoder):
        assert all(layer.norm_first for layer in stack.layers)
        assert hasattr(stack, "layer_norm") and not hasattr(stack, "layernorm_embedding")
        # Fixed sinusoids: no parameter for the positions.
        assert not list(stack.embed_positions.parameters())
    assert not hasattr(ours, "final_logits_bias") and ours.lm_head.weight is ours.model.shared.weight
    assert ours.model.shared.embed_scale == hf.config.d_model**0.5


def test_logits_encoder_output_and_attentions_equal_hf_with_padded_sources(models):
    hf, ours = models
    families.assert_seq2seq_equals_hf(hf, ours, *padded_sources(hf.config), targets(hf.config), families.ATOL)


def test_greedy_generation_with_a_forced_target_language_gives_hfs_token_ids(models, hf_api):
    hf, ours = models
    sources = padded_sources(hf.config)
    actual = families.assert_seq2seq_greedy_ids_equal_hfs(
        hf, ours, hf_api, *sources, max_new_tokens=8, forced_bos_token_id=TARGET_LANGUAGE
    )
    # The start token, then the language, whatever the scores said.
    assert (actual[:, 0] == 2).all() and (actual[:, 1] == TARGET_LANGUAGE).all()


@torch.no_grad()
def test_cached_decoding_equals_uncached(models):
    hf, ours = models
    families.assert_cached_decoding_equals_uncached(
        ours, *padded_sources(hf.config), max_new_tokens=6, bos_token_id=2, forced_bos_token_id=TARGET_LANGUAGE
    )


def test_m2m_100_model_without_head_equals_hf_m2m_100_model(randomize):
    hf = randomize(hf_m2m_100("even_20_5_and_2_pad_0", transformers.M2M100Model))
    ours = from_hf(hf)
    assert type(ours) is M2M100Model
    families.assert_seq2seq_model_equals_hf(hf, ours, *padded_sources(hf.config), targets(hf.config), families.ATOL)


@torch.no_grad()
def test_positions_are_fairseqs_rows_and_the_sinusoids_hfs(models, hf_api):
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding as HFSinusoids

    hf, ours = models
    config = hf.config
    input_ids, _ = padded_batch(config.vocab_size, 6, (0, 2, 5), config.pad_token_id, side="left")
    theirs = HFSinusoids(config.max_position_embeddings, config.d_model, config.pad_token_id)
    for past in (0, 3):
        rows = ours.decoder.position_ids(input_ids, None, past)
        assert torch.equal(rows, hf_api.m2m_100_position_ids(input_ids, config.pad_token_id, past))
        torch.testing.assert_close(ours.decoder.embed_positions(rows), theirs(input_ids, None, past), atol=1e-6, rtol=0)
    # A padding token reads the zero row; an odd width ends with a zero feature.
    embeddings = M2M100SinusoidalPositionalEmbedding(7, padding_idx=1)(torch.tensor([[1, 2, 3]]))
    assert embeddings[0, 0].abs().max() == 0 and embeddings[0, :, -1].abs().max() == 0


# ---------------------------------------------------------------------------
# The key map, and bad input
# ---------------------------------------------------------------------------
def test_key_map_names_a_missing_tensor_and_drops_a_saved_sinusoid_table(models):
    hf, ours = models
    state, expected = hf.state_dict(), ours.state_dict()
    families.assert_key_map_names_a_missing_tensor(
        M2M100ForConditionalGeneration.map_hf_state_dict,
        state,
        expected,
        "model.encoder.layers.0.self_attn_layer_norm.bias",
    )
    with_table = dict(state, **{"model.decoder.embed_positions.weights": torch.zeros(3, hf.config.d_model)})
    assert sorted(M2M100ForConditionalGeneration.map_hf_state_dict(with_table, expected)) == sorted(expected)


def test_bad_input_is_refused(models):
    hf, ours = models
    input_ids, attention_mask = padded_sources(hf.config)
    vocab_size, positions = hf.config.vocab_size, hf.config.max_position_embeddings
    with pytest.raises(ValueError, match=rf"decoder_input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours(input_ids, attention_mask, torch.tensor([[2, vocab_size]] * 3))
    families.assert_seq2seq_refuses_masks_of_the_wrong_shape(ours, input_ids, attention_mask, targets(hf.config))
    with pytest.raises(ValueError, match=f"more than max_position_embeddings={positions}"):
        ours(torch.full((1, positions + 1), 5), decoder_input_ids=torch.tensor([[2]]))
    with pytest.raises(ValueError, match=rf"forced_bos_token_id must be a token id in \[0, vocab_size={vocab_size}\)"):
        ours.generate(input_ids, attention_mask, max_new_tokens=2, forced_bos_token_id=vocab_size)


def test_configs_the_package_cannot_build_are_refused():
    with pytest.raises(ValueError, match="d_model must be at least 4"):
        M2M100Model(transformers.M2M100Config(d_model=3, encoder_attention_heads=1, decoder_attention_heads=1))
    with pytest.raises(TypeError, match="M2M100Config"):
        M2M100Model(transformers.BartConfig())
