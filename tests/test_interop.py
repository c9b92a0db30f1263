"""Claims of the chapters that the module tests do not already cover.

* The encoder chapter: the book's encoder layer with ``norm_first=False``
  (post-LN), given a BERT layer's weights, computes exactly that BERT layer;
  with ``norm_first=True`` (pre-LN) the same weights compute something else.

Tolerance: fp32, absolute 1e-5 on real (non-padding) tokens.
"""

from __future__ import annotations

import pytest
import torch

from literate_transformer import TransformerConfig
from literate_transformer.core.masks import padding_mask, to_additive
from literate_transformer.interop import bert_layer_to_book, book_layer_to_bert
from literate_transformer.models.bert import BertModel

ATOL = 1e-5


@pytest.fixture(scope="module")
def bert_and_inputs():
    torch.manual_seed(0)
    config = TransformerConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=16,
    )
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
def test_book_layer_back_to_bert_is_the_same_layer(bert_and_inputs):
    """The way back: a post-LN book layer as a BertLayer has BERT's weights and output again."""
    _, bert, input_ids, attention_mask = bert_and_inputs
    bert_layer = bert.encoder.layer[1]
    round_trip = book_layer_to_bert(bert_layer_to_book(bert_layer))
    for name, tensor in bert_layer.state_dict().items():
        torch.testing.assert_close(round_trip.state_dict()[name], tensor, atol=0, rtol=0, msg=name)
    with pytest.raises(ValueError, match="pre-LN"):
        book_layer_to_bert(bert_layer_to_book(bert_layer, norm_first=True))
