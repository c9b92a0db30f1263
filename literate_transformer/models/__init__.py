"""Models under HuggingFace's names, built from the package's shared parts.

:mod:`~literate_transformer.models.bert` rebuilds
:class:`transformers.BertModel` with its module and parameter names, so that
pretrained checkpoints load by name and every number can be compared with
HuggingFace's.  :mod:`~literate_transformer.models.gpt2` and
:mod:`~literate_transformer.models.bart` are the book's decoder and
encoder-decoder, configured as GPT-2 and BART: their classes carry
HuggingFace's names and arguments, their parameters the book's names, and
the key maps of :mod:`~literate_transformer.interop` load HuggingFace's
weights into them.
"""
