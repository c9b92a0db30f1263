"""Shape scenarios of BERT: encoder and decoder, eager and fused, sentence embeddings, the head-split diagram."""

from __future__ import annotations

import torch

from literate_transformer.diagrams import head_split_diagram
from literate_transformer.interop import bert_attention_to_book
from literate_transformer.models.bert import BertModel, mean_pooling

from . import DIMS, S, T, hidden, tiny_config, token_ids


def scenario_bert():
    attention_mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    attention_mask[1, -1] = 0
    token_type_ids = torch.ones(DIMS["B"], T, dtype=torch.long)
    for implementation in ("eager", "sdpa"):
        model = BertModel(tiny_config(attn_implementation=implementation)).eval()
        model(token_ids(), attention_mask, token_type_ids, output_attentions=True, output_hidden_states=True)
        model(token_ids(), attention_mask)
        model(token_ids(), position_ids=torch.arange(T)[None], head_mask=torch.ones(DIMS["H"]))
        # BERT as a decoder: causal self-attention over T, cross-attention over S encoder positions.
        decoder = BertModel(tiny_config(attn_implementation=implementation, is_decoder=True, add_cross_attention=True))
        encoder_attention_mask = torch.ones(DIMS["B"], S, dtype=torch.long)
        encoder_attention_mask[0, -2:] = 0
        for output_attentions in (False, True):
            decoder.eval()(
                token_ids(),
                attention_mask,
                encoder_hidden_states=hidden(S),
                encoder_attention_mask=encoder_attention_mask,
                output_attentions=output_attentions,
            )
    bert_attention_to_book(model.encoder.layer[0].attention)(hidden())
    # Sentence embeddings: the mean of the real tokens' vectors.
    mean_pooling(hidden(), attention_mask)
    # The head-split diagram runs transpose_for_scores on the feature indices.
    head_split_diagram(model.encoder.layer[0].attention.self, length=T)
