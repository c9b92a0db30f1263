"""Models under HuggingFace's names, one file per family, built from the package's shared parts.

Each module here is one family of the tree of chapter 12: its classes carry
``transformers``' class, module and parameter names, so that a checkpoint
loads by name and every number can be compared with HuggingFace's.  A family
imports the shared parts (:mod:`~literate_transformer.parts`: norms,
positions, feed-forward variants, attention) and its parent's modules, and
writes only what it changes: :mod:`~literate_transformer.models.roberta`
is BERT with padding-aware positions, :mod:`~literate_transformer.models.m2m_100`
is BART with pre-LN layers and sinusoids.  Its classes declare what the one
conversion from ``transformers`` needs to know
(:class:`~literate_transformer.models.registry.ConvertsFromHF`), and each
file ends with its registration with
:func:`~literate_transformer.models.registry.register`, which is how
:func:`~literate_transformer.models.registry.from_hf` finds it;
:func:`~literate_transformer.models.registry.supported` lists the
``transformers`` classes it converts.
"""
