"""T5, built from the package's parts under HuggingFace's names, equals transformers.T5ForConditionalGeneration.

Random HuggingFace T5s of both feed-forward kinds (ReLU, v1.0; gated GELU,
v1.1), with tied and untied heads, encoder and decoder of different depths,
head sizes ``d_kv`` that do not divide ``d_model``, and few relative-position
buckets (so that the logarithmic buckets are reached) are converted with
``from_hf``.  Their weights are HuggingFace's initialisation (T5's own
scale, which its unscaled scores need), with every RMS norm's gain drawn
around 1 so that none is the identity; an untied head gets a weight of its
own, as a v1.1 checkpoint has.

Tolerance: fp32, absolute 1e-5 on the logits (unpadded targets: every
position), the encoder's output at the real positions of a padded source,
and every encoder, decoder and cross-attention probability.  Generation:
exactly the token ids of HuggingFace's greedy ``generate()``.
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import Shapes, padded_batch

from literate_transformer import from_hf
from literate_transformer.models.t5 import (
    T5ForConditionalGeneration,
    T5Model,
    check_t5_config,
)

PAD, EOS = 0, 1

# fmt: off
T5_SHAPES = Shapes(
    ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
     "relative_attention_num_buckets", "relative_attention_max_distance", "feed_forward_proj", "tie_word_embeddings"),
    {
        # (transformers 5's generate() sizes T5's cache by num_layers: no row has a deeper decoder.)
        # name                        V   E   D  F   layers heads buckets distance  feed-forward   tied
        "relu_tied_3_heads_of_7":   (53, 20, 7, 36, 3, 2,  3,    10,     20,       "relu",        True),
        "relu_untied_2_heads_of_5": (47, 18, 5, 28, 2, 2,  2,    8,      12,       "relu",        False),
        "gelu_tied_4_heads_of_3":   (41, 14, 3, 22, 2, 1,  4,    6,      10,       "gated-gelu",  True),
        "gelu_untied_3_heads_of_6": (59, 16, 6, 30, 2, 2,  3,    12,     24,       "gated-gelu",  False),
    },
)
# fmt: on


def hf_t5(name: str, cls=transformers.T5ForConditionalGeneration):
    """HuggingFace's T5 of the row ``name``: its own initialisation, RMS gains around 1, an untied head its own."""
    torch.manual_seed(0)
    config = transformers.T5Config(
        **T5_SHAPES(name), pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, attn_implementation="eager"
    )
    hf = cls(config).eval()
    with torch.no_grad():
        for parameter_name, parameter in hf.named_parameters():
            if "layer_norm" in parameter_name:
                parameter.normal_(1.0, 0.2)
        if hasattr(hf, "lm_head") and not T5_SHAPES(name)["tie_word_embeddings"]:
            # transformers 5 ties every T5's head (a v1.1 checkpoint loads its own): give it its own weight.
            hf.lm_head.weight = torch.nn.Parameter(torch.randn_like(hf.lm_head.weight) * config.d_model**-0.5)
    return hf


@pytest.fixture(params=T5_SHAPES.names, scope="module")
def models(request):
    hf = hf_t5(request.param)
    return hf, from_hf(hf)


def padded_sources(config):
    """Three sources of 9 tokens, the last two padded (the last one to a single token)."""
    return padded_batch(config.vocab_size, 9, (0, 4, 8), PAD)


def targets(config):
    """Three targets of 5 ids from 2 up (T5's start token is its padding id, 0; its end token 1)."""
    return families.seq2seq_targets(config, low=2)


# ---------------------------------------------------------------------------
# Equal to HuggingFace
# ---------------------------------------------------------------------------
def test_from_hf_builds_t5_under_hfs_names(models):
    hf, ours = models
    assert isinstance(ours, T5ForConditionalGeneration) and not ours.training
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    # No bias anywhere: every parameter is a weight (RMS gains included).
    assert all(name.endswith("weight") for name, _ in ours.named_parameters())
    # The bias table lives in the first block of each stack only.
    tables = [name for name, _ in ours.named_parameters() if "relative_attention_bias" in name]
    assert tables == [
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
    ]
    assert ours.encoder.embed_tokens is ours.decoder.embed_tokens is ours.shared
    # Tied where HuggingFace's head is the table, untied where it has its own.
    assert ours.tie_word_embeddings == (hf.lm_head.weight is hf.shared.weight)
    assert (ours.lm_head.weight is ours.shared.weight) == ours.tie_word_embeddings


def test_logits_encoder_output_and_attentions_equal_hf_with_padded_sources(models):
    hf, ours = models
    families.assert_seq2seq_equals_hf(hf, ours, *padded_sources(hf.config), targets(hf.config), families.ATOL)


def test_greedy_generation_gives_hfs_token_ids(models, hf_api):
    hf, ours = models
    assert hf.config.decoder_start_token_id == PAD
    families.assert_seq2seq_greedy_ids_equal_hfs(hf, ours, hf_api, *padded_sources(hf.config), max_new_tokens=8)


@torch.no_grad()
def test_cached_decoding_equals_uncached():
    ours = from_hf(hf_t5("gelu_untied_3_heads_of_6"))
    families.assert_cached_decoding_equals_uncached(
        ours, *padded_sources(ours.config), max_new_tokens=6, bos_token_id=ours.decoder_start_token_id
    )


def test_t5_model_without_head_equals_hf_t5_model():
    hf = hf_t5("relu_tied_3_heads_of_7", transformers.T5Model)
    ours = from_hf(hf)
    assert type(ours) is T5Model and not hasattr(ours, "lm_head")
    families.assert_seq2seq_model_equals_hf(hf, ours, *padded_sources(hf.config), targets(hf.config), families.ATOL)


@torch.no_grad()
def test_the_tied_head_reads_the_decoder_output_scaled_and_the_untied_one_does_not():
    for name, scale in (("relu_tied_3_heads_of_7", 20**-0.5), ("relu_untied_2_heads_of_5", 1.0)):
        ours = from_hf(hf_t5(name))
        hidden_states = torch.randn(1, 2, ours.config.d_model)
        torch.testing.assert_close(ours.head(hidden_states), ours.lm_head(hidden_states * scale), atol=1e-6, rtol=0)


def test_shift_right_starts_targets_with_the_pad_token_as_hf_does():
    hf = hf_t5("relu_tied_3_heads_of_7")
    labels = torch.tensor([[5, 6, -100, 1], [7, -100, -100, -100]])
    assert torch.equal(from_hf(hf)._shift_right(labels), hf._shift_right(labels))


# ---------------------------------------------------------------------------
# The key map
# ---------------------------------------------------------------------------
def test_key_map_names_a_missing_tensor_fills_the_table_copies_and_refuses_a_changed_one(models):
    hf, ours = models
    state, expected = hf.state_dict(), ours.state_dict()
    tied = ours.tie_word_embeddings
    missing = "decoder.block.0.layer.1.EncDecAttention.q.weight"
    families.assert_key_map_names_a_missing_tensor(
        lambda *a: T5ForConditionalGeneration.map_hf_state_dict(*a, tied), state, expected, missing
    )
    copy = "decoder.embed_tokens.weight"
    families.assert_key_map_refuses_a_changed_copy(
        lambda *a: T5ForConditionalGeneration.map_hf_state_dict(*a, tied), state, expected, copy, "one token"
    )
    # A checkpoint that stores the table once, with the unused cross-attention table older ones saved, loads.
    only_shared = {key: value for key, value in state.items() if not key.endswith("embed_tokens.weight")}
    only_shared["decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"] = torch.zeros(3, 3)
    mapped = T5ForConditionalGeneration.map_hf_state_dict(only_shared, expected, tied)
    assert torch.equal(mapped["encoder.embed_tokens.weight"], state["shared.weight"])


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------
def test_ids_outside_the_vocabulary_are_refused(models):
    hf, ours = models
    vocab_size = hf.config.vocab_size
    with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours(torch.tensor([[5, vocab_size]]), decoder_input_ids=torch.tensor([[PAD]]))
    with pytest.raises(ValueError, match=rf"decoder_input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours(torch.tensor([[5, 6]]), decoder_input_ids=torch.tensor([[PAD, -1]]))
    with pytest.raises(ValueError, match="decoder_input_ids is required"):
        ours(torch.tensor([[5, 6]]))


def test_masks_of_the_wrong_shape_are_refused(models):
    hf, ours = models
    input_ids, attention_mask = padded_sources(hf.config)
    families.assert_seq2seq_refuses_masks_of_the_wrong_shape(ours, input_ids, attention_mask, targets(hf.config))
    with pytest.raises(ValueError, match="T5's encoder reads no encoder_hidden_states"):
        ours.encoder(input_ids, attention_mask, torch.zeros(3, 9, hf.config.d_model))


def test_configs_the_package_cannot_build_are_refused():
    with pytest.raises(TypeError, match="T5Config"):
        check_t5_config(transformers.BartConfig())
    with pytest.raises(ValueError, match="feed_forward_proj='gated-quick_gelu'"):
        T5Model(transformers.T5Config(d_model=8, d_kv=4, num_heads=2, feed_forward_proj="gated-quick_gelu"))
    # transformers' own buckets would be negative here: log(max_distance / 16) = 0 divides them.
    with pytest.raises(ValueError, match="relative_attention_max_distance=16: need at least 4 buckets"):
        T5Model(transformers.T5Config(d_model=8, d_kv=4, num_heads=2, relative_attention_max_distance=16))
