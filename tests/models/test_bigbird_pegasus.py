"""BigBird-Pegasus, BART's block-sparse descendant in the package, equals transformers' in ``block_sparse`` mode.

Random HuggingFace BigBird-Pegasus models (with and without ``use_bias``;
blocks of 4 tokens, 2 random blocks, so that block-sparse attention starts
above (5 + 2 * 2) * 4 = 36 tokens), every parameter randomised, are
converted with ``from_hf`` and compared in evaluation mode.  Each
comparison of a long input uses a HuggingFace model that has not read a
short one: ``transformers`` switches its encoder to full attention for good
on the first short input.

Tolerance: fp32, absolute 1e-5 on the logits (unpadded targets) and the
encoder's output at the real positions of padded sources, for lengths that
are and are not multiples of the block size.  Generation: exactly the token
ids of HuggingFace's greedy ``generate()`` from a source read block-sparse.
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import BART, padded_batch

from literate_transformer import from_hf
from literate_transformer.core.masks import build_attention_mask
from literate_transformer.models.bigbird_pegasus import (
    BigBirdPegasusForConditionalGeneration,
    BigBirdPegasusModel,
    block_sparse_layout,
)

PAD, EOS, START = 0, 1, 2
BLOCK_SIZE, RANDOM_BLOCKS = 4, 2
#: Longer than (5 + 2 * RANDOM_BLOCKS) * BLOCK_SIZE = 36 tokens: read block-sparse; the first is no multiple of 4.
LONG, WHOLE_BLOCKS, SHORT = 38, 44, 20


def hf_bigbird(use_bias: bool, cls=transformers.BigBirdPegasusForConditionalGeneration, randomize=None):
    torch.manual_seed(0)
    blocks = dict(block_size=BLOCK_SIZE, num_random_blocks=RANDOM_BLOCKS, use_bias=use_bias)
    special = dict(pad_token_id=PAD, eos_token_id=EOS, bos_token_id=START, decoder_start_token_id=START)
    config = transformers.BigBirdPegasusConfig(
        **BART("deeper_encoder_gelu_new"), **blocks, **special, attn_implementation="eager"
    )
    hf = randomize(cls(config), scale=0.3)
    if hasattr(hf, "final_logits_bias"):
        with torch.no_grad():
            hf.final_logits_bias.normal_(0.0, 0.3)
    return hf


@pytest.fixture(params=[False, True], ids=["no_bias", "use_bias"], scope="module")
def hf_and_ours(request, randomize):
    hf = hf_bigbird(request.param, randomize=randomize)
    return hf, from_hf(hf)


targets = families.seq2seq_targets


def sources(config, length: int):
    """Three sources, the last two padded (the last one to 5 real tokens)."""
    return padded_batch(config.vocab_size, length, (0, 7, length - 5), PAD)


def compare(hf, ours, length: int, padded: bool = True) -> None:
    input_ids, attention_mask = sources(hf.config, length)
    if not padded:
        input_ids, attention_mask = padded_batch(hf.config.vocab_size, length, (0, 0, 0), PAD)
    decoder_input_ids = targets(hf.config)
    with torch.no_grad():
        expected = hf(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
        actual = ours(input_ids, attention_mask, decoder_input_ids)
    torch.testing.assert_close(actual.logits, expected.logits, atol=families.ATOL, rtol=0)
    real = attention_mask.bool()
    torch.testing.assert_close(
        actual.encoder_last_hidden_state[real], expected.encoder_last_hidden_state[real], atol=families.ATOL, rtol=0
    )


# ---------------------------------------------------------------------------
# Equal to HuggingFace
# ---------------------------------------------------------------------------
def test_from_hf_builds_bigbird_pegasus_under_hfs_names(hf_and_ours):
    hf, ours = hf_and_ours
    assert isinstance(ours, BigBirdPegasusForConditionalGeneration) and not ours.training
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    assert all(layer.norm_first for layer in [*ours.encoder.layers, *ours.decoder.layers])
    assert ours.encoder.embed_positions.offset == 0
    assert ours.encoder.layers[0].self_attn.self.query.bias is None or hf.config.use_bias


@pytest.mark.parametrize("length", [LONG, WHOLE_BLOCKS], ids=["padded_to_blocks", "whole_blocks"])
def test_block_sparse_logits_and_encoder_output_equal_hf_in_evaluation(hf_and_ours, length):
    hf, ours = hf_and_ours
    hf.model.encoder.set_attention_type("block_sparse")  # in case an earlier call read a short input
    assert ours.encoder.uses_block_sparse(length)
    compare(hf, ours, length)
    assert hf.model.encoder.attention_type == "block_sparse"


def test_short_inputs_fall_back_to_full_attention_as_hf_does(randomize):
    hf = hf_bigbird(False, randomize=randomize)
    ours = from_hf(hf)
    threshold = (5 + 2 * RANDOM_BLOCKS) * BLOCK_SIZE
    assert not ours.encoder.uses_block_sparse(threshold) and ours.encoder.uses_block_sparse(threshold + 1)
    compare(hf, ours, SHORT, padded=False)
    # transformers switched its encoder to full attention for good; the package decides for each call.
    assert hf.model.encoder.attention_type == "original_full" and ours.encoder.uses_block_sparse(LONG)


def test_short_padded_inputs_equal_hfs_full_attention(randomize, hf_api):
    if not hf_api.bigbird_fallback_masks_padding():
        pytest.skip("this transformers attends to padding after its fallback to full attention (see HFApi)")
    hf = hf_bigbird(True, randomize=randomize)
    compare(hf, from_hf(hf), SHORT)


def test_greedy_generation_gives_hfs_token_ids(hf_and_ours, hf_api):
    hf, ours = hf_and_ours
    hf.model.encoder.set_attention_type("block_sparse")
    families.assert_seq2seq_greedy_ids_equal_hfs(hf, ours, hf_api, *sources(hf.config, LONG), max_new_tokens=6)


@torch.no_grad()
def test_cached_decoding_equals_uncached(hf_and_ours):
    hf, ours = hf_and_ours
    families.assert_cached_decoding_equals_uncached(
        ours, *sources(hf.config, LONG), max_new_tokens=5, bos_token_id=START
    )


# ---------------------------------------------------------------------------
# The pattern: what the block-sparse code computes, and what transformers reports
# ---------------------------------------------------------------------------
@torch.no_grad()
def test_block_sparse_attention_is_full_attention_under_the_pattern_it_draws(hf_and_ours):
    """softmax over the blocks read, a block read twice counting twice = softmax(scores + log(count)) V."""
    hf, ours = hf_and_ours
    encoder = ours.encoder
    input_ids, attention_mask = sources(hf.config, WHOLE_BLOCKS)
    mask = encoder.block_sparse_mask(attention_mask, torch.float32)
    attention = encoder.layers[0].self_attn.self
    hidden_states = torch.randn(3, WHOLE_BLOCKS, hf.config.d_model)
    sparse = attention(hidden_states, mask, output_attentions=True)
    counts = mask.to_dense()
    # Every query reads its own block, both global blocks and its random ones: block 0 (1 + r) times.
    assert counts.diagonal().min() >= 1 and counts[BLOCK_SIZE * 3, 0] == 1 + RANDOM_BLOCKS
    dense_mask = torch.log(counts.float()) + build_attention_mask(attention_mask, query_length=1, dtype=torch.float32)
    full = attention(hidden_states, dense_mask.clamp(min=torch.finfo(torch.float32).min), output_attentions=True)
    real = attention_mask.bool()
    families.assert_close_at_real_positions(sparse.hidden_states, full.hidden_states, attention_mask, 1e-5, "context")
    # The probabilities, summed over repeats, are full attention's under the counted mask; rows sum to 1.
    probs = sparse.attention_probs.transpose(1, 2)[real]
    torch.testing.assert_close(probs, full.attention_probs.transpose(1, 2)[real], atol=1e-6, rtol=0)
    torch.testing.assert_close(probs.sum(-1), torch.ones_like(probs.sum(-1)), atol=1e-5, rtol=0)
    # Not full attention: the blocks not read change the result.
    padding_only = build_attention_mask(attention_mask, query_length=1, dtype=torch.float32)
    unrestricted = attention(hidden_states, padding_only).hidden_states
    assert (sparse.hidden_states - unrestricted)[real].abs().max() > 1e-3


@torch.no_grad()
def test_transformers_reports_the_first_block_once_where_its_rows_read_it_one_plus_r_times(hf_and_ours):
    hf, ours = hf_and_ours
    hf.model.encoder.set_attention_type("block_sparse")
    input_ids, attention_mask = sources(hf.config, WHOLE_BLOCKS)
    theirs = hf.model.encoder(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True).attentions
    actual = ours.encoder(input_ids, attention_mask, output_attentions=True).attentions
    factor = torch.ones(WHOLE_BLOCKS, WHOLE_BLOCKS)
    factor[BLOCK_SIZE:-BLOCK_SIZE, :BLOCK_SIZE] = 1 + RANDOM_BLOCKS
    real = attention_mask.bool()
    for ours_layer, hf_layer in zip(actual, theirs, strict=True):
        torch.testing.assert_close(
            ours_layer.transpose(1, 2)[real], (hf_layer * factor).transpose(1, 2)[real], atol=1e-6, rtol=0
        )


def test_random_blocks_are_block_0_in_evaluation_and_unread_blocks_in_training(hf_and_ours):
    _, ours = hf_and_ours
    encoder = ours.encoder
    assert (encoder.random_blocks(11, torch.device("cpu")) == 0).all()
    encoder.train()
    try:
        torch.manual_seed(1)
        drawn = encoder.random_blocks(11, torch.device("cpu"))
    finally:
        encoder.eval()
    blocks, read = block_sparse_layout(11, drawn)
    rows = torch.arange(1, 10)[:, None]
    assert drawn.shape == (9, RANDOM_BLOCKS) and (drawn > 0).all() and (drawn < 10).all()
    assert ((drawn - rows).abs() > 1).all() and all(len(set(row)) == RANDOM_BLOCKS for row in drawn.tolist())
    # The window's repeats of a global block are not read; everything else is.
    assert read[:, [0, 4, 5, 6]].all() and not read[0, 1] and not read[-1, 3] and read[1:-1, 1:4].all()


# ---------------------------------------------------------------------------
# The key map, and bad input
# ---------------------------------------------------------------------------
def test_key_map_names_a_missing_tensor_and_fills_a_missing_final_logits_bias(hf_and_ours):
    hf, ours = hf_and_ours
    state, expected = hf.state_dict(), ours.state_dict()
    families.assert_key_map_names_a_missing_tensor(
        BigBirdPegasusForConditionalGeneration.map_hf_state_dict,
        state,
        expected,
        "model.encoder.layers.1.self_attn.self.key.weight",
    )
    without_bias = {key: value for key, value in state.items() if key != "final_logits_bias"}
    assert (
        BigBirdPegasusForConditionalGeneration.map_hf_state_dict(without_bias, expected)["final_logits_bias"] == 0
    ).all()


def test_bigbird_pegasus_model_without_head_equals_hf(randomize):
    hf = hf_bigbird(True, transformers.BigBirdPegasusModel, randomize)
    ours = from_hf(hf)
    assert type(ours) is BigBirdPegasusModel
    families.assert_seq2seq_model_equals_hf(hf, ours, *sources(hf.config, LONG), targets(hf.config), families.ATOL)


def test_hidden_states_that_do_not_split_into_blocks_are_refused(hf_and_ours):
    hf, ours = hf_and_ours
    _, attention_mask = sources(hf.config, WHOLE_BLOCKS)
    mask = ours.encoder.block_sparse_mask(attention_mask, torch.float32)
    attention = ours.encoder.layers[0].self_attn.self
    with pytest.raises(ValueError, match="hidden_states has 42 positions, which do not split into the 11 blocks"):
        attention(torch.randn(3, WHOLE_BLOCKS - 2, hf.config.d_model), mask)


def test_bad_input_and_configs_are_refused(hf_and_ours):
    hf, ours = hf_and_ours
    input_ids, attention_mask = sources(hf.config, LONG)
    with pytest.raises(ValueError, match=r"input_ids must be token ids in \[0, vocab_size=61\)"):
        ours(input_ids + 61, attention_mask, targets(hf.config))
    families.assert_seq2seq_refuses_masks_of_the_wrong_shape(ours, input_ids, attention_mask, targets(hf.config))
    with pytest.raises(ValueError, match="more than max_position_embeddings=64"):
        ours(torch.full((1, 65), 5), decoder_input_ids=torch.tensor([[START]]))
    config = transformers.BigBirdPegasusConfig(d_model=8, encoder_attention_heads=2, decoder_attention_heads=2)
    config.attention_type = "sliding"
    with pytest.raises(ValueError, match="attention_type must be one of"):
        BigBirdPegasusModel(config)
