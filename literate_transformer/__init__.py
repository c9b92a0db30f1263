"""literate_transformer: BERT and the transformer, built line by line and proved equal.

Each module of this package is an article on one part of the transformer:
its docstring is the text, the comment above each non-obvious line of a
``forward`` names the math it computes, and a trailing comment gives the
tensor's shape wherever the shape changes, with one legend for the whole
package: ``B`` batch, ``T`` query (target) length, ``S`` key (source)
length, ``H`` heads, ``K`` key/value heads, ``D`` head size, ``R`` rotated
features per head (``D`` unless only part of a head turns), ``E`` hidden
size, ``F`` intermediate size, ``V`` vocabulary size, ``C`` labels, ``L``
layers, ``W`` embedding width (where it is not ``E``), ``A`` rows of a
relative-position table (twice the attention span), ``U`` the real tokens of
an unpadded (packed) batch; block-sparse attention (BigBird) cuts a sequence
into ``N`` blocks of ``Z`` tokens, and each of the ``M = N - 2`` blocks
between the first and the last reads ``G`` blocks of keys.  Tests execute
every shape comment and prove each module equal to what HuggingFace's
``transformers`` or PyTorch's own modules compute.

The modules sit in floors, each importing only the floors below it: the
ground floor (``core``: config, checkpoints, masks, kernels, validation),
the parts that models assemble (``parts``: norms, positions, feed-forward
variants, heads), the book's from-scratch path (``book``), the model
families under HuggingFace's names (``models``, one file a family), the same models made fast (``fast``), and the
conversions between the book's modules, BERT's and PyTorch's
(``interop``).  Both lists below are generated from
:mod:`~literate_transformer.manifest`.

``import literate_transformer as lt`` is all a reader needs: the public
names are here, each loaded the first time it is used (importing the
package loads no model family).  ``lt.from_hf(model)`` turns a
``transformers`` model into the package's equivalent, and every family's
models are here under their HuggingFace names (``lt.BertModel``,
``lt.GPT2LMHeadModel``, ...); their layers stay in their module
(``literate_transformer.models.bert.BertLayer``, like
``transformers.models.bert.modeling_bert.BertLayer``).

"""

from __future__ import annotations

import importlib as _importlib
from typing import Any as _Any

from . import manifest

# The reading order and the layout, from the manifest (one source for the docstring, the site and its pages).
__doc__ = __doc__ + manifest.reading_order_rst()

__version__ = "0.1.0"

#: Each public name and the module (relative to the package) that defines it.
_EXPORTS: dict[str, str] = {
    # The ground floor
    "TransformerConfig": "core.config",
    "as_config": "core.config",
    "AttentionOutput": "core.outputs",
    "LayerOutput": "core.outputs",
    "LayerCache": "core.outputs",
    "ModelOutput": "core.outputs",
    "Seq2SeqOutput": "core.outputs",
    "scaled_dot_product_attention": "core.kernels",
    "CheckpointError": "core.checkpoints",
    "CheckpointIntegrityError": "core.checkpoints",
    "CheckpointNotFoundError": "core.checkpoints",
    "load_hf_model": "core.checkpoints",
    "load_tokenizer": "core.checkpoints",
    "resolve_decoder": "core.checkpoints",
    "resolve_checkpoint": "core.checkpoints",
    # The parts
    "RMSNorm": "parts.norms",
    "make_norm": "parts.norms",
    "SinusoidalPositionalEncoding": "parts.positions",
    "relative_position_bucket": "parts.positions",
    "RelativePositionBias": "parts.positions",
    # The book's path
    "AttentionHead": "book.attention",
    "MultiHeadAttention": "book.attention",
    "FeedForward": "book.feed_forward",
    "Embeddings": "book.embeddings",
    "TransformerEncoderLayer": "book.encoder",
    "TransformerEncoder": "book.encoder",
    "TransformerForSequenceClassification": "book.classification",
    "TransformerDecoderLayer": "book.decoder",
    "TransformerDecoder": "book.decoder",
    "EncoderDecoderTransformer": "book.decoder",
    "greedy_generate": "book.generation",
    "GenerationOutput": "book.generation",
    "train_reversal": "book.training",
    "TrainingResult": "book.training",
    # Pretraining a language model on a token stream
    "train": "pretraining.causal_lm",
    "TrainingHistory": "pretraining.causal_lm",
    # From transformers to the package, and BERT's sentence vectors
    "from_hf": "models.registry",
    "mean_pooling": "models.bert",
    "sentence_embeddings": "models.bert",
    # Fast: sentence embeddings on the fast path
    "encode": "fast.encode",
    "FastBertModel": "fast.bert",
    # The trained decoder, read from its GGUF file
    "load_decoder": "trained",
    "read_gguf": "core.gguf",
}

#: The sub-packages and modules a reader may reach as attributes (``lt.interop``).
_MODULES = (
    "core",
    "parts",
    "book",
    "pretraining",
    "models",
    "fast",
    "interop",
    "trained",
    "onnx_export",
    "manifest",
    "visualize",
    "diagrams",
    "lens",
    "bpe",
    "lora",
    "tasks",
    "fine_tuning",
)


def __getattr__(name: str) -> _Any:
    """A public name, imported when it is first used (PEP 562); every family's models by their own names."""
    if name in _MODULES:
        module = _importlib.import_module(f".{name}", __name__)
    elif name in _EXPORTS:
        module = _importlib.import_module(f".{_EXPORTS[name]}", __name__)
    else:
        # A model family's model, under HuggingFace's class name: the family registered it with from_hf.
        registry = _importlib.import_module(".models.registry", __name__)
        found = registry.model_class(name)
        if found is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = found
        return found
    value = module if name in _MODULES else getattr(module, name)
    globals()[name] = value
    return value


def _model_modules() -> dict[str, str]:
    """The models the families register under HuggingFace's class names, each with its family's module.

    Read from the source, nothing imported (``models.registered_models``).
    """
    from .models import registered_models

    return {name: f"models.{family}" for name, family in registered_models().items()}


def _model_names() -> frozenset[str]:
    """The models' HuggingFace class names (:func:`_model_modules`)."""
    return frozenset(_model_modules())


def _public_targets() -> dict[str, str]:
    """Each ``lt.`` name a reader calls and the object it is, by its full dotted name (for the API reference)."""
    modules = {**_EXPORTS, **_model_modules()}
    return {name: f"{__name__}.{modules[name]}.{name}" for name in sorted(modules, key=str.lower)}


def __dir__() -> list[str]:
    """What ``lt.`` offers: the exported names, the sub-packages and every family's models (tab completion)."""
    return sorted({"__version__", *_EXPORTS, *_MODULES, *_model_names()})


__all__ = sorted(_EXPORTS)
