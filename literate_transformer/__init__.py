"""literate_transformer: BERT and the transformer, built line by line and proved equal.

Each module of this package is an article on one part of the transformer;
read them in this order:

1. :mod:`~literate_transformer.core.config` and :mod:`~literate_transformer.checkpoints`:
   the numbers that define a model, and the pretrained BERT we compare against.
2. :mod:`~literate_transformer.book.attention`: scaled dot-product attention, one
   head, many heads (the book's ``AttentionHead`` and ``MultiHeadAttention``).
3. :mod:`~literate_transformer.book.feed_forward`: the position-wise feed-forward layer.
4. :mod:`~literate_transformer.book.embeddings`: token, position and token-type
   embeddings, and the 2017 paper's sinusoidal positions.
5. :mod:`~literate_transformer.book.encoder`: residuals, pre- and post-layer-norm
   encoder layers, the stack, and a classification head.
6. :mod:`~literate_transformer.models.bert` and :mod:`~literate_transformer.pretrained`:
   HuggingFace's BERT line by line, with its names, loading pretrained weights
   1:1 and proved equal to :class:`transformers.BertModel`.
7. :mod:`~literate_transformer.book.decoder`: causal self-attention,
   encoder-decoder attention, the decoder stack and a full encoder-decoder model.
8. :mod:`~literate_transformer.book.generation`: greedy decoding with a key/value cache.
9. :mod:`~literate_transformer.book.training`: a tiny encoder-decoder trained from
   scratch to reverse digit sequences.
10. :mod:`~literate_transformer.visualize`: the attention weights drawn, with
    bertviz's head, model and neuron views and matplotlib heatmaps
    (``from literate_transformer import visualize``).

The public names are re-exported here, so ``import literate_transformer as lt``
and ``lt.TransformerConfig`` is all a reader needs.
"""

from .book.attention import AttentionHead, AttentionOutput, MultiHeadAttention, scaled_dot_product_attention
from .book.decoder import (
    DecoderLayerOutput,
    DecoderOutput,
    EncoderDecoderTransformer,
    LayerCache,
    Seq2SeqOutput,
    TransformerDecoder,
    TransformerDecoderLayer,
)
from .book.embeddings import Embeddings, SinusoidalPositionalEncoding
from .book.encoder import (
    EncoderLayerOutput,
    EncoderOutput,
    TransformerEncoder,
    TransformerEncoderLayer,
    TransformerForSequenceClassification,
)
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
from .models.bert import (
    BertAttention,
    BertEmbeddings,
    BertEncoder,
    BertIntermediate,
    BertLayer,
    BertLayerOutput,
    BertModel,
    BertModelOutput,
    BertOutput,
    BertPooler,
    BertSelfAttention,
    BertSelfOutput,
    split_bert_attention_into_heads,
)

__version__ = "0.1.0"

__all__ = [
    "AttentionHead",
    "AttentionOutput",
    "MultiHeadAttention",
    "scaled_dot_product_attention",
    "FeedForward",
    "Embeddings",
    "SinusoidalPositionalEncoding",
    "EncoderLayerOutput",
    "EncoderOutput",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerForSequenceClassification",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "EncoderDecoderTransformer",
    "LayerCache",
    "DecoderLayerOutput",
    "DecoderOutput",
    "Seq2SeqOutput",
    "greedy_generate",
    "GenerationOutput",
    "train_reversal",
    "TrainingResult",
    "BertModel",
    "BertModelOutput",
    "BertEmbeddings",
    "BertSelfAttention",
    "BertSelfOutput",
    "BertAttention",
    "BertIntermediate",
    "BertOutput",
    "BertLayer",
    "BertLayerOutput",
    "BertEncoder",
    "BertPooler",
    "split_bert_attention_into_heads",
    "CheckpointError",
    "CheckpointIntegrityError",
    "CheckpointNotFoundError",
    "TransformerConfig",
    "as_config",
    "load_hf_model",
    "load_tokenizer",
    "resolve_checkpoint",
]
