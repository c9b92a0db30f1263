"""Shape scenarios of the encoder branch: every family on a padded batch, and BERT's masked-LM objective."""

from __future__ import annotations

import torch
import transformers

from literate_transformer.core.records import config_sizes
from literate_transformer.models.albert import AlbertModel
from literate_transformer.models.bert import BertForMaskedLM
from literate_transformer.models.deberta_v2 import DebertaV2Model
from literate_transformer.models.distilbert import DistilBertModel
from literate_transformer.models.electra import ElectraForPreTraining
from literate_transformer.models.roberta import RobertaModel
from literate_transformer.models.xlm import XLMModel
from literate_transformer.pretraining.masked_lm import mask_tokens

from . import DIMS, T, standard_sizes, tiny_config, token_ids, with_dims


def padding_mask() -> torch.Tensor:
    mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    mask[1, -1] = 0
    return mask


def bert_sizes(**changes):
    return dict(standard_sizes(), intermediate_size=DIMS["F"], **changes)


def scenario_masked_lm():
    input_ids, mask = token_ids(), padding_mask()
    inputs, labels = mask_tokens(input_ids, 1, DIMS["V"], mask == 0, mlm_probability=0.9)
    BertForMaskedLM(tiny_config()).eval()(inputs, mask, labels=labels)


def scenario_distilbert():
    config = transformers.DistilBertConfig(
        **config_sizes("distilbert", DIMS, max_position_embeddings=16), sinusoidal_pos_embds=True
    )
    DistilBertModel(config).eval()(token_ids(), padding_mask(), output_attentions=True)


def scenario_roberta():
    RobertaModel(transformers.RobertaConfig(**bert_sizes(), pad_token_id=0)).eval()(token_ids(), padding_mask())


def scenario_electra():
    config = transformers.ElectraConfig(**bert_sizes(embedding_size=DIMS["W"]))
    ElectraForPreTraining(config).eval()(
        token_ids(), padding_mask(), labels=torch.zeros(DIMS["B"], T, dtype=torch.long)
    )


def scenario_albert():
    config = transformers.AlbertConfig(**bert_sizes(embedding_size=DIMS["W"]), num_hidden_groups=1, inner_group_num=2)
    AlbertModel(config).eval()(token_ids(), padding_mask(), output_attentions=True)


@with_dims(F=4 * DIMS["E"])
def scenario_xlm():
    config = transformers.XLMConfig(**config_sizes("xlm", DIMS, max_position_embeddings=16), n_langs=2)
    model = XLMModel(config).eval()
    langs = torch.zeros(DIMS["B"], T, dtype=torch.long)
    model(token_ids(), padding_mask(), langs, token_type_ids=token_ids())
    model(token_ids(), langs=langs)


def scenario_deberta_v2():
    config = transformers.DebertaV2Config(
        **bert_sizes(), relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=DIMS["A"] // 2,
        norm_rel_ebd="layer_norm", type_vocab_size=2, embedding_size=DIMS["W"],
    )  # fmt: skip
    for share_att_key in (True, False):
        config.share_att_key = share_att_key
        DebertaV2Model(config).eval()(token_ids(), padding_mask(), output_attentions=True)
    DebertaV2Model(transformers.DebertaV2Config(**bert_sizes())).eval()(token_ids())
