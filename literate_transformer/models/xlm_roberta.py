r"""XLM-RoBERTa: RoBERTa trained on a hundred languages, with a vocabulary to match.

XLM-R (Conneau et al., 2020, "Unsupervised Cross-lingual Representation
Learning at Scale", ACL, arXiv:1911.02116) is RoBERTa's model, unchanged,
trained with masked language modelling alone on more than two terabytes of
filtered CommonCrawl text in 100 languages (the abstract).  What changes is the vocabulary: one SentencePiece model
of 250,000 pieces shared by every language (section 3), where RoBERTa's
byte-level BPE has 50,000.  In the base model that table is most of the
parameters: the layers are RoBERTa-base's, and the chapter counts where the
rest went.

The module is RoBERTa's (:mod:`~literate_transformer.models.roberta`); only
the config's ``model_type`` differs, so this file registers
``XLMRobertaModel`` and nothing else.
"""

from __future__ import annotations

from .registry import register
from .roberta import RobertaModel

__all__ = ["XLMRobertaModel"]


class XLMRobertaModel(RobertaModel):
    """RoBERTa's model under XLM-R's name: it reads a :class:`~transformers.XLMRobertaConfig`."""

    config_type, config_name = "xlm-roberta", "XLMRobertaConfig"


register(XLMRobertaModel)
