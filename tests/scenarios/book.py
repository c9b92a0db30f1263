"""Shape scenarios of the book's path: attention, feed-forward, embeddings, encoder, decoder, generation."""

from __future__ import annotations

import torch

from literate_transformer.book.attention import AttentionHead, MultiHeadAttention
from literate_transformer.book.classification import TransformerForSequenceClassification
from literate_transformer.book.decoder import EncoderDecoderTransformer, TransformerDecoder, TransformerDecoderLayer
from literate_transformer.book.embeddings import Embeddings
from literate_transformer.book.encoder import TransformerEncoder, TransformerEncoderLayer
from literate_transformer.book.feed_forward import FeedForward
from literate_transformer.book.generation import greedy_generate
from literate_transformer.book.training import make_reversal_batch
from literate_transformer.core import masks
from literate_transformer.parts.positions import SinusoidalPositionalEncoding

from . import DIMS, S, T, hidden, tiny_config, token_ids


def scenario_masks():
    masks.causal_mask(T, S)
    masks.padding_mask(torch.ones(DIMS["B"], S))


def scenario_attention_head():
    head = AttentionHead(DIMS["E"], DIMS["D"])
    head(hidden())
    head(hidden(), key_value_states=hidden(S), attention_mask=torch.ones(T, S, dtype=torch.bool))


def scenario_multi_head_attention():
    attention = MultiHeadAttention(tiny_config()).eval()
    attention(hidden(), attention_mask=masks.causal_mask(T), output_attentions=True)
    encoder_states = hidden(S)
    attention(hidden(), key_value_states=encoder_states)
    cross_cache = attention.project_key_value(encoder_states)
    attention(hidden(), key_value_states=encoder_states, past_key_value=cross_cache, use_cache=True)
    # Cached decoding: one new position after S - 1 cached ones.
    past = attention(hidden(S - 1), use_cache=True).past_key_value
    attention(hidden(1), attention_mask=masks.causal_mask(1, S), past_key_value=past, use_cache=True)


def scenario_fused_attention():
    MultiHeadAttention(tiny_config(attn_implementation="sdpa")).eval()(hidden(), attention_mask=masks.causal_mask(T))


def scenario_feed_forward():
    FeedForward(tiny_config())(hidden())


def scenario_embeddings():
    embeddings = Embeddings(tiny_config()).eval()
    embeddings(token_ids())
    embeddings(token_ids(1), token_type_ids=torch.ones(DIMS["B"], 1, dtype=torch.long), past_length=T)
    SinusoidalPositionalEncoding(DIMS["E"], max_length=16)(hidden(), past_length=2)


def scenario_encoder():
    attention_mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    attention_mask[1, -1] = 0
    for norm_first in (True, False):
        TransformerEncoderLayer(tiny_config(), norm_first=norm_first).eval()(hidden(), output_attentions=True)
        encoder = TransformerEncoder(tiny_config(), norm_first=norm_first).eval()
        encoder(token_ids(), attention_mask)
        encoder(token_ids(), output_attentions=True)
    TransformerForSequenceClassification(tiny_config()).eval()(token_ids(), attention_mask)


def scenario_decoder():
    source_mask = torch.ones(DIMS["B"], S, dtype=torch.long)
    source_mask[1, -2:] = 0
    target_mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    target_mask[1, -1] = 0
    for norm_first in (True, False):
        layer = TransformerDecoderLayer(tiny_config(), norm_first=norm_first).eval()
        layer(hidden(), hidden(S), masks.causal_mask(T), masks.padding_mask(source_mask), output_attentions=True)
        decoder = TransformerDecoder(tiny_config(), norm_first=norm_first).eval()
        decoder(token_ids(), hidden(S), target_mask, source_mask)
        # Cached decoding: T - 1 target positions first, then one more.
        cache = decoder(token_ids(T - 1), hidden(S), use_cache=True).past_key_values
        decoder(token_ids(1), hidden(S), past_key_values=cache, use_cache=True)
    model = EncoderDecoderTransformer(tiny_config()).eval()
    model(token_ids(S), token_ids(), source_mask, target_mask, output_attentions=True)
    greedy_generate(model, token_ids(S), max_new_tokens=T, bos_token_id=1, eos_token_id=2, attention_mask=source_mask)
    # The training demo's data: sources of up to S digits, targets of S + 1 tokens.
    make_reversal_batch(DIMS["B"], 2, S, torch.Generator().manual_seed(0))
