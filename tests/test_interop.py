"""Claims of the chapters that the module tests do not already cover.

* The encoder chapter: the book's encoder layer with ``norm_first=False``
  (post-LN), given a BERT layer's weights, computes exactly that BERT layer;
  with ``norm_first=True`` (pre-LN) the same weights compute something else.

Tolerance: fp32, absolute 1e-5 on real (non-padding) tokens.
"""

from __future__ import annotations

import pytest
import torch
from shapes import TINY_SIZES

from literate_transformer import TransformerConfig
from literate_transformer.core.masks import padding_mask, to_additive
from literate_transformer.interop import bert_layer_to_book, book_layer_to_bert
from literate_transformer.models.bert import BertModel

ATOL = 1e-5


@pytest.fixture(scope="module")
def bert_and_inputs():
    torch.manual_seed(0)
    config = TransformerConfig(**TINY_SIZES)
    bert = BertModel(config).eval()
    with torch.no_grad():
        # Move every parameter (layer norms included) away from its initial value.
        for parameter in bert.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    input_ids = torch.randint(1, config.vocab_size, (2, 7))
    attention_mask = torch.ones(2, 7, dtype=torch.long)
    attention_mask[1, 4:] = 0
    return config, bert, input_ids, attention_mask


@torch.no_grad()
def test_post_ln_book_layers_with_bert_weights_equal_bert_layers(bert_and_inputs):
    config, bert, input_ids, attention_mask = bert_and_inputs
    real = attention_mask.bool()
    book_hidden = bert_hidden = bert.embeddings(input_ids)
    for bert_layer in bert.encoder.layer:
        book_layer = bert_layer_to_book(bert_layer, norm_first=False)
        book_hidden = book_layer(book_hidden, attention_mask=padding_mask(attention_mask)).hidden_states
        bert_hidden = bert_layer(bert_hidden, to_additive(padding_mask(attention_mask))).hidden_states
        torch.testing.assert_close(book_hidden[real], bert_hidden[real], atol=ATOL, rtol=0)
    final = bert(input_ids, attention_mask).last_hidden_state
    torch.testing.assert_close(book_hidden[real], final[real], atol=ATOL, rtol=0)


@torch.no_grad()
def test_pre_ln_book_layer_with_the_same_weights_is_not_bert(bert_and_inputs):
    config, bert, input_ids, attention_mask = bert_and_inputs
    real = attention_mask.bool()
    hidden = bert.embeddings(input_ids)
    bert_layer = bert.encoder.layer[0]
    pre_ln = bert_layer_to_book(bert_layer, norm_first=True)(hidden, attention_mask=padding_mask(attention_mask))
    pre_ln = pre_ln.hidden_states
    expected = bert_layer(hidden, to_additive(padding_mask(attention_mask))).hidden_states
    assert (pre_ln[real] - expected[real]).abs().max() > 0.1


@torch.no_grad()
def test_a_whole_bert_as_the_books_post_ln_encoder_is_bert(bert_and_inputs):
    from literate_transformer.interop import bert_to_book_encoder

    _, bert, input_ids, attention_mask = bert_and_inputs
    encoder = bert_to_book_encoder(bert)
    assert not encoder.norm_first and len(encoder.layers) == len(bert.encoder.layer)
    expected = bert(input_ids, attention_mask).last_hidden_state
    actual = encoder(input_ids, attention_mask).last_hidden_state
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)


@torch.no_grad()
def test_book_layer_back_to_bert_is_the_same_layer(bert_and_inputs):
    """The way back: a post-LN book layer as a BertLayer has BERT's weights and output again."""
    _, bert, input_ids, attention_mask = bert_and_inputs
    bert_layer = bert.encoder.layer[1]
    round_trip = book_layer_to_bert(bert_layer_to_book(bert_layer))
    for name, tensor in bert_layer.state_dict().items():
        torch.testing.assert_close(round_trip.state_dict()[name], tensor, atol=0, rtol=0, msg=name)
    with pytest.raises(ValueError, match="pre-LN"):
        book_layer_to_bert(bert_layer_to_book(bert_layer, norm_first=True))


# ---------------------------------------------------------------------------
# The book's encoder-decoder is torch.nn.Transformer
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
@torch.no_grad()
def test_encoder_decoder_with_final_norms_equals_torch_transformer(norm_first, tiny_config, randomize):
    """nn.Transformer ends both stacks with a layer norm: the book's model with final_layer_norm=True is it."""
    from literate_transformer.book.decoder import EncoderDecoderTransformer
    from literate_transformer.core.masks import causal_mask
    from literate_transformer.interop import book_transformer_to_torch

    config = tiny_config(num_hidden_layers=2, layer_norm_eps=1e-6)
    model = randomize(EncoderDecoderTransformer(config, norm_first=norm_first, final_layer_norm=True), scale=0.2)
    transformer = book_transformer_to_torch(model)
    assert isinstance(transformer, torch.nn.Transformer)
    source = torch.randint(1, config.vocab_size, (2, 7))
    source_mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    target = torch.randint(1, config.vocab_size, (2, 5))
    target_mask = torch.tensor([[1] * 5, [1] * 4 + [0]])

    expected = transformer(
        model.encoder.embeddings(source),
        model.decoder.embeddings(target),
        tgt_mask=~causal_mask(5),  # PyTorch's masks say True for "may not attend"
        src_key_padding_mask=~source_mask.bool(),
        tgt_key_padding_mask=~target_mask.bool(),
        memory_key_padding_mask=~source_mask.bool(),
    )
    actual = model(source, target, source_mask, target_mask)
    torch.testing.assert_close(actual.last_hidden_state, expected, atol=ATOL, rtol=0)
    # The encoder's final norm is part of it: its output is normalised (and so is PyTorch's memory).
    memory = transformer.encoder(model.encoder.embeddings(source), src_key_padding_mask=~source_mask.bool())
    torch.testing.assert_close(actual.encoder_last_hidden_state, memory, atol=ATOL, rtol=0)


@torch.no_grad()
def test_without_final_norms_the_torch_transformers_norms_become_identities(tiny_config, randomize):
    from literate_transformer.book.decoder import EncoderDecoderTransformer
    from literate_transformer.interop import book_transformer_to_torch

    model = randomize(EncoderDecoderTransformer(tiny_config(), norm_first=False), scale=0.2)
    transformer = book_transformer_to_torch(model)
    assert isinstance(transformer.encoder.norm, torch.nn.Identity)
    source, target = torch.randint(1, 50, (2, 6)), torch.randint(1, 50, (2, 4))
    from literate_transformer.core.masks import causal_mask

    expected = transformer(model.encoder.embeddings(source), model.decoder.embeddings(target), tgt_mask=~causal_mask(4))
    torch.testing.assert_close(model(source, target).last_hidden_state, expected, atol=ATOL, rtol=0)
