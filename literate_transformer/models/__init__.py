"""Models under HuggingFace's names, built from the package's shared parts.

:mod:`~literate_transformer.models.bert` rebuilds
:class:`transformers.BertModel` with its module and parameter names, so that
pretrained checkpoints load by name and every number can be compared with
HuggingFace's.
"""
