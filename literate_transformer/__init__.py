"""literate_transformer: BERT and the transformer, built line by line and proved equal.

Each module of this package is an article on one part of the transformer:
its docstring is the text, the comment above each non-obvious line of a
``forward`` names the math it computes, and a trailing comment gives the
tensor's shape wherever the shape changes, with one legend for the whole
package: ``B`` batch, ``T`` query (target) length, ``S`` key (source)
length, ``H`` heads, ``D`` head size, ``E`` hidden size, ``F``
intermediate size, ``V`` vocabulary size, ``C`` labels, ``L`` layers.  Tests execute
every shape comment and prove each module equal to what HuggingFace's
``transformers`` or PyTorch's own modules compute.

The modules are read in the order of the site's chapters, and sit in
folders by what they are: the shared parts (``core``), the book's
from-scratch path (``book``), the models built from them under
HuggingFace's names (``models``), and the conversions between all of them
(``interop``).  Both lists below are generated from
:mod:`~literate_transformer.manifest`.

The public names are re-exported here, so ``import literate_transformer as lt``
and ``lt.TransformerConfig`` is all a reader needs; ``lt.from_hf(model)``
turns a ``transformers`` BERT, GPT-2 or BART into the package's equivalent.
The book's parts are all here; of each model family only the models, as
``transformers`` exports them: their layers stay in their module
(``literate_transformer.models.bert.BertLayer``, like
``transformers.models.bert.modeling_bert.BertLayer``).

"""

from . import interop, manifest
from .book.attention import AttentionHead, MultiHeadAttention, scaled_dot_product_attention
from .book.classification import TransformerForSequenceClassification
from .book.decoder import EncoderDecoderTransformer, TransformerDecoder, TransformerDecoderLayer
from .book.embeddings import Embeddings, RelativePositionBias, SinusoidalPositionalEncoding, relative_position_bucket
from .book.encoder import TransformerEncoder, TransformerEncoderLayer
from .book.feed_forward import FeedForward
from .book.generation import GenerationOutput, greedy_generate
from .book.training import TrainingResult, train_reversal
from .checkpoints import (
    CheckpointError,
    CheckpointIntegrityError,
    CheckpointNotFoundError,
    load_hf_model,
    load_tokenizer,
    resolve_checkpoint,
)
from .core.config import TransformerConfig, as_config
from .core.outputs import AttentionOutput, LayerCache, LayerOutput, ModelOutput, Seq2SeqOutput
from .interop import from_hf
from .models.bart import BartForConditionalGeneration, BartModel
from .models.bert import BertModel, mean_pooling, sentence_embeddings
from .models.gpt2 import GPT2LMHeadModel, GPT2Model

# The reading order and the layout, from the manifest (one source for the docstring, the site and its pages).
__doc__ = __doc__ + manifest.reading_order_rst()

__version__ = "0.1.0"

__all__ = [
    "interop",
    "manifest",
    "from_hf",
    # The shared core
    "TransformerConfig",
    "as_config",
    "AttentionOutput",
    "LayerOutput",
    "LayerCache",
    "ModelOutput",
    "Seq2SeqOutput",
    # The book's path
    "scaled_dot_product_attention",
    "AttentionHead",
    "MultiHeadAttention",
    "FeedForward",
    "Embeddings",
    "SinusoidalPositionalEncoding",
    "relative_position_bucket",
    "RelativePositionBias",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerForSequenceClassification",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "EncoderDecoderTransformer",
    "greedy_generate",
    "GenerationOutput",
    "train_reversal",
    "TrainingResult",
    # The models under HuggingFace's names: their parts stay in their modules, as in transformers
    "BertModel",
    "mean_pooling",
    "sentence_embeddings",
    "GPT2Model",
    "GPT2LMHeadModel",
    "BartModel",
    "BartForConditionalGeneration",
    # Checkpoints
    "CheckpointError",
    "CheckpointIntegrityError",
    "CheckpointNotFoundError",
    "load_hf_model",
    "load_tokenizer",
    "resolve_checkpoint",
]
