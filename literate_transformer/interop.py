r"""Interop: the same weights in the book's modules, BERT's and PyTorch's.

Three implementations of the same layers live side by side in this package
and in the libraries it is proved against:

* the book's modules (:mod:`~literate_transformer.book`): one
  :class:`~literate_transformer.book.attention.AttentionHead` per head, each
  with its own ``q``, ``k``, ``v`` projections of size ``E -> D``;
* the BERT mirror (:mod:`~literate_transformer.models.bert`, HuggingFace's
  names): one *fused* ``E -> E`` projection each for all heads' queries, keys
  and values;
* PyTorch's :class:`torch.nn.MultiheadAttention` and transformer layers:
  queries, keys and values fused further into one ``in_proj_weight`` of shape
  ``(3E, E)``.

They compute the same functions with the weights arranged differently, and
the conversions between the arrangements are lessons of their own.  Every
chapter and test that needs one imports it from here, so each is written
once, and each is proved by a test that runs both sides.

Fusing and splitting heads
--------------------------
A fused projection is the per-head projections stacked row-wise: rows
:math:`hD` to :math:`(h+1)D - 1` of BERT's ``query.weight`` *are* head
:math:`h`'s ``q.weight``.  :func:`fuse_heads` stacks, :func:`split_heads`
cuts; ``in_proj_weight`` is three fused projections stacked once more.

.. math::

    W^Q_{\text{fused}} = \begin{bmatrix} W^Q_1 \\ \vdots \\ W^Q_H \end{bmatrix}
    \in \mathbb{R}^{E \times E}, \qquad
    W_{\text{in}} = \begin{bmatrix} W^Q_{\text{fused}} \\ W^K_{\text{fused}} \\ W^V_{\text{fused}} \end{bmatrix}
    \in \mathbb{R}^{3E \times E}.

(``nn.Linear`` stores its weight as ``(out_features, in_features)`` and
computes :math:`x W^\top + b`, so one head's output features are one block
of *rows*.)

Layers
------
* :func:`bert_attention_to_book` / :func:`bert_layer_to_book`: a BERT layer's
  weights in the book's modules (a post-LN
  :class:`~literate_transformer.book.encoder.TransformerEncoderLayer`, since
  BERT is post-LN); :func:`book_layer_to_bert` goes back, and
  :func:`bert_to_book_encoder` turns a whole BERT into the book's encoder.
* :func:`book_attention_to_torch`, :func:`book_encoder_layer_to_torch`,
  :func:`book_decoder_layer_to_torch`, :func:`book_encoder_to_torch`,
  :func:`book_decoder_to_torch` and :func:`book_transformer_to_torch`: the
  book's modules as PyTorch's, ready to be compared (PyTorch's masks say
  ``True`` for *ignore*, the opposite of this package's).

Key maps
--------
A checkpoint is a dictionary from parameter names to tensors.
:func:`map_bert_state_dict` renames a BERT checkpoint's tensors to the BERT
mirror's parameter names (almost the identity, since the mirror keeps
HuggingFace's names) and checks that every tensor is accounted for;
:func:`bert_from_hf` copies a live ``transformers`` BERT through it.
:func:`map_gpt2_state_dict` and :func:`map_bart_state_dict` do the same for
GPT-2 and BART, whose models here are the book's modules, so that their
maps also transpose, split and share tensors (each explains how), and
:func:`from_hf` turns any supported ``transformers`` model into the
package's equivalent.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> from literate_transformer.models.bert import BertAttention
>>> config = TransformerConfig(hidden_size=12, num_attention_heads=3, attention_probs_dropout_prob=0.0)
>>> bert_attention = BertAttention(config)
>>> heads = bert_attention_to_book(bert_attention)
>>> len(heads.heads), heads.heads[0].q.weight.shape
(3, torch.Size([4, 12]))
>>> torch.equal(heads.heads[1].q.weight, bert_attention.self.query.weight[4:8])
True
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from .book.attention import MultiHeadAttention
from .book.decoder import EncoderDecoderTransformer, TransformerDecoder, TransformerDecoderLayer
from .book.encoder import TransformerEncoder, TransformerEncoderLayer
from .core.activations import get_activation
from .core.config import as_config
from .models.bart import BartForConditionalGeneration, BartModel, bart_config
from .models.bert import BertAttention, BertLayer, BertModel
from .models.gpt2 import GPT2LMHeadModel, GPT2Model, gpt2_config

__all__ = [
    "fuse_heads",
    "split_heads",
    "bert_attention_to_book",
    "bert_layer_to_book",
    "bert_to_book_encoder",
    "book_layer_to_bert",
    "book_attention_to_torch",
    "book_encoder_layer_to_torch",
    "book_decoder_layer_to_torch",
    "book_encoder_to_torch",
    "book_decoder_to_torch",
    "book_transformer_to_torch",
    "check_state_dict",
    "map_bert_state_dict",
    "bert_from_hf",
    "conv1d_to_linear",
    "map_gpt2_state_dict",
    "gpt2_from_hf",
    "map_bart_state_dict",
    "bart_from_hf",
    "SUPPORTED_HF_MODELS",
    "from_hf",
]


# ---------------------------------------------------------------------------
# Fusing and splitting heads
# ---------------------------------------------------------------------------
def fuse_heads(linears: Sequence[nn.Linear]) -> tuple[Tensor, Tensor]:
    """Stack per-head projections ``E -> D`` into one fused projection ``E -> H*D``.

    Args:
        linears: One ``nn.Linear`` per head, in head order (e.g. every head's ``q``).

    Returns:
        ``(weight, bias)``: ``(H*D, E)`` and ``(H*D,)``, head ``h`` in rows ``h*D`` to ``(h+1)*D - 1``.
    """
    if not linears or not all(isinstance(linear, nn.Linear) for linear in linears):
        raise TypeError("linears must be a non-empty sequence of torch.nn.Linear, one per head")
    return torch.cat([linear.weight for linear in linears]), torch.cat([linear.bias for linear in linears])


def split_heads(weight: Tensor, bias: Tensor, num_heads: int) -> list[tuple[Tensor, Tensor]]:
    """Cut a fused projection ``E -> H*D`` into its ``H`` per-head projections ``E -> D``.

    Args:
        weight: ``(H*D, E)``.
        bias: ``(H*D,)``.
        num_heads: ``H``; must divide the number of rows.

    Returns:
        ``H`` pairs ``(weight (D, E), bias (D,))``.
    """
    if weight.dim() != 2 or bias.shape != weight.shape[:1]:
        raise ValueError(f"weight must be (H*D, E) and bias (H*D,), got {tuple(weight.shape)} and {tuple(bias.shape)}")
    if not isinstance(num_heads, int) or num_heads < 1 or weight.shape[0] % num_heads:
        raise ValueError(f"num_heads must be a positive int dividing {weight.shape[0]}, got {num_heads!r}")
    return list(zip(weight.chunk(num_heads), bias.chunk(num_heads), strict=True))


def _copy(target: nn.Module, weight: Tensor, bias: Tensor) -> None:
    target.weight.copy_(weight)
    target.bias.copy_(bias)


def _book_qkv(attention: MultiHeadAttention) -> list[tuple[Tensor, Tensor]]:
    """The book's fused ``(W^Q, W^K, W^V)`` projections: ``[(weight, bias)] * 3``."""
    return [fuse_heads([getattr(head, name) for head in attention.heads]) for name in "qkv"]


# ---------------------------------------------------------------------------
# BERT's layers and the book's
# ---------------------------------------------------------------------------
@torch.no_grad()
def bert_attention_to_book(bert_attention: BertAttention) -> MultiHeadAttention:
    """A BERT attention sub-layer as the book's per-head :class:`~literate_transformer.book.attention.MultiHeadAttention`.

    Head ``h`` of BERT's fused ``query`` layer becomes the ``q`` layer of the
    book's ``heads[h]`` (likewise ``key`` and ``value``), and
    ``output.dense`` (:math:`W^O`) becomes ``output_linear``.  The result
    computes ``BertSelfAttention`` followed by ``BertSelfOutput.dense``:
    BERT's residual connection and layer norm are not part of it (the book
    puts them in its encoder layer).

    Args:
        bert_attention: A :class:`~literate_transformer.models.bert.BertAttention`
            (e.g. ``model.encoder.layer[0].attention``).

    Returns:
        A new module with copied weights, in the same training/evaluation mode.
    """
    if not isinstance(bert_attention, BertAttention):
        raise TypeError(
            "bert_attention must be a BertAttention (self-attention plus its output projection), "
            f"got {type(bert_attention).__name__}"
        )
    self_attention = bert_attention.self
    book = MultiHeadAttention(self_attention.config)
    for name, fused in (("q", self_attention.query), ("k", self_attention.key), ("v", self_attention.value)):
        for head, (weight, bias) in zip(book.heads, split_heads(fused.weight, fused.bias, book.num_heads), strict=True):
            _copy(getattr(head, name), weight, bias)
    _copy(book.output_linear, bert_attention.output.dense.weight, bert_attention.output.dense.bias)
    return book.train(bert_attention.training)


# Which module of a BERT layer holds which of the book layer's parameters.
_BERT_LAYER_PARTS = (
    ("layer_norm_1", "attention.output.LayerNorm"),
    ("feed_forward.linear_1", "intermediate.dense"),
    ("feed_forward.linear_2", "output.dense"),
    ("layer_norm_2", "output.LayerNorm"),
)


@torch.no_grad()
def bert_layer_to_book(bert_layer: BertLayer, norm_first: bool = False) -> TransformerEncoderLayer:
    """A BERT layer's weights in the book's :class:`~literate_transformer.book.encoder.TransformerEncoderLayer`.

    With ``norm_first=False`` (the default) the book's layer is post-LN and
    computes exactly what the BERT layer computes (a test proves it); with
    ``norm_first=True`` the same weights run in the book's pre-LN arrangement
    and compute something else, which the chapters measure.

    Args:
        bert_layer: A :class:`~literate_transformer.models.bert.BertLayer` without cross-attention.
        norm_first: The book layer's arrangement.

    Returns:
        A new layer with copied weights, in the same training/evaluation mode.
    """
    if not isinstance(bert_layer, BertLayer) or bert_layer.add_cross_attention:
        raise TypeError(f"bert_layer must be a BertLayer without cross-attention, got {type(bert_layer).__name__}")
    config = bert_layer.attention.self.config
    layer = TransformerEncoderLayer(config, norm_first=norm_first)
    layer.attention = bert_attention_to_book(bert_layer.attention)
    for ours, theirs in _BERT_LAYER_PARTS:
        layer.get_submodule(ours).load_state_dict(bert_layer.get_submodule(theirs).state_dict())
    return layer.train(bert_layer.training)


# BertEmbeddings' modules and the book's Embeddings' names for them.
_BERT_EMBEDDING_PARTS = (
    ("token_embeddings", "word_embeddings"),
    ("position_embeddings", "position_embeddings"),
    ("token_type_embeddings", "token_type_embeddings"),
    ("layer_norm", "LayerNorm"),
)


@torch.no_grad()
def bert_to_book_encoder(bert_model: BertModel) -> TransformerEncoder:
    """A BERT (without its pooler) as the book's post-LN :class:`~literate_transformer.book.encoder.TransformerEncoder`.

    BERT *is* the encoder branch: the book's encoder with ``norm_first=False``.
    The embeddings' tables and layer norm are copied under the book's names
    (``word_embeddings`` is ``token_embeddings``, ``LayerNorm`` is
    ``layer_norm``) and every layer goes through :func:`bert_layer_to_book`.
    Its ``last_hidden_state`` is BERT's.

    Args:
        bert_model: The package's :class:`~literate_transformer.models.bert.BertModel`
            (``from_hf`` makes one of a ``transformers`` BERT).

    Returns:
        A new encoder, in the same training/evaluation mode.
    """
    if not isinstance(bert_model, BertModel):
        raise TypeError(f"bert_model must be a literate_transformer BertModel, got {type(bert_model).__name__}")
    encoder = TransformerEncoder(bert_model.config, norm_first=False)
    for ours, theirs in _BERT_EMBEDDING_PARTS:
        getattr(encoder.embeddings, ours).load_state_dict(getattr(bert_model.embeddings, theirs).state_dict())
    encoder.layers = nn.ModuleList(bert_layer_to_book(layer) for layer in bert_model.encoder.layer)
    return encoder.train(bert_model.training)


@torch.no_grad()
def book_layer_to_bert(layer: TransformerEncoderLayer) -> BertLayer:
    """The book's post-LN encoder layer as a BERT layer (the way back of :func:`bert_layer_to_book`).

    Raises:
        ValueError: for a pre-LN layer, which no BERT layer computes.
    """
    if not isinstance(layer, TransformerEncoderLayer):
        raise TypeError(f"layer must be a TransformerEncoderLayer, got {type(layer).__name__}")
    if layer.norm_first:
        raise ValueError("layer is pre-LN (norm_first=True); BERT is post-LN, so no BertLayer computes it")
    bert_layer = BertLayer(layer.attention.config)
    self_attention = bert_layer.attention.self
    for fused, (weight, bias) in zip(
        (self_attention.query, self_attention.key, self_attention.value), _book_qkv(layer.attention), strict=True
    ):
        _copy(fused, weight, bias)
    _copy(bert_layer.attention.output.dense, layer.attention.output_linear.weight, layer.attention.output_linear.bias)
    for ours, theirs in _BERT_LAYER_PARTS:
        bert_layer.get_submodule(theirs).load_state_dict(layer.get_submodule(ours).state_dict())
    return bert_layer.train(layer.training)


# ---------------------------------------------------------------------------
# The book's modules as PyTorch's
# ---------------------------------------------------------------------------
@torch.no_grad()
def _load_torch_attention(attention: MultiHeadAttention, torch_attention: nn.MultiheadAttention) -> None:
    # in_proj_weight is W^Q, W^K and W^V stacked: (3E, E).
    weights, biases = zip(*_book_qkv(attention), strict=True)
    torch_attention.in_proj_weight.copy_(torch.cat(weights))
    torch_attention.in_proj_bias.copy_(torch.cat(biases))
    torch_attention.out_proj.load_state_dict(attention.output_linear.state_dict())


def book_attention_to_torch(attention: MultiHeadAttention) -> nn.MultiheadAttention:
    """The book's multi-head attention as :class:`torch.nn.MultiheadAttention` (``batch_first=True``).

    Returns:
        A new module with the same weights, in evaluation mode.
    """
    torch_attention = nn.MultiheadAttention(attention.hidden_size, attention.num_heads, dropout=0.0, batch_first=True)
    _load_torch_attention(attention, torch_attention)
    return torch_attention.eval()


def _torch_activation(name: str) -> str | nn.Module:
    # PyTorch's layers name "relu" and "gelu" (the exact one); anything else is passed as a module.
    return name if name in ("relu", "gelu") else get_activation(name)


def _torch_layer_options(config: Any, norm_first: bool) -> dict[str, Any]:
    return dict(
        d_model=config.hidden_size,
        nhead=config.num_attention_heads,
        dim_feedforward=config.intermediate_size,
        dropout=0.0,
        activation=_torch_activation(config.hidden_act),
        layer_norm_eps=config.layer_norm_eps,
        batch_first=True,
        norm_first=norm_first,
    )


@torch.no_grad()
def _load_feed_forward_and_norms(layer: nn.Module, torch_layer: nn.Module, norms: Sequence[str]) -> None:
    torch_layer.linear1.load_state_dict(layer.feed_forward.linear_1.state_dict())
    torch_layer.linear2.load_state_dict(layer.feed_forward.linear_2.state_dict())
    for index, name in enumerate(norms, start=1):
        getattr(torch_layer, f"norm{index}").load_state_dict(getattr(layer, name).state_dict())


def book_encoder_layer_to_torch(layer: TransformerEncoderLayer) -> nn.TransformerEncoderLayer:
    """The book's encoder layer as :class:`torch.nn.TransformerEncoderLayer`, same ``norm_first``.

    Names: the stacked ``q``/``k``/``v`` become ``self_attn.in_proj_weight``,
    ``feed_forward.linear_1``/``linear_2`` become ``linear1``/``linear2``,
    ``layer_norm_1``/``layer_norm_2`` become ``norm1``/``norm2``.

    Returns:
        A new layer (dropout 0), in evaluation mode.
    """
    if not isinstance(layer, TransformerEncoderLayer):
        raise TypeError(f"layer must be a TransformerEncoderLayer, got {type(layer).__name__}")
    config = layer.attention.config
    torch_layer = nn.TransformerEncoderLayer(**_torch_layer_options(config, layer.norm_first))
    _load_torch_attention(layer.attention, torch_layer.self_attn)
    _load_feed_forward_and_norms(layer, torch_layer, ("layer_norm_1", "layer_norm_2"))
    return torch_layer.eval()


def book_decoder_layer_to_torch(layer: TransformerDecoderLayer) -> nn.TransformerDecoderLayer:
    """The book's decoder layer as :class:`torch.nn.TransformerDecoderLayer`, same ``norm_first``.

    ``self_attention`` becomes ``self_attn``, ``cross_attention`` becomes
    ``multihead_attn``, ``layer_norm_1/2/3`` become ``norm1/2/3``.

    Returns:
        A new layer (dropout 0), in evaluation mode.
    """
    if not isinstance(layer, TransformerDecoderLayer) or layer.cross_attention is None:
        raise TypeError(f"layer must be a TransformerDecoderLayer with cross-attention, got {type(layer).__name__}")
    torch_layer = nn.TransformerDecoderLayer(**_torch_layer_options(layer.config, layer.norm_first))
    _load_torch_attention(layer.self_attention, torch_layer.self_attn)
    _load_torch_attention(layer.cross_attention, torch_layer.multihead_attn)
    _load_feed_forward_and_norms(layer, torch_layer, ("layer_norm_1", "layer_norm_2", "layer_norm_3"))
    return torch_layer.eval()


def _final_norm_copy(final_layer_norm: nn.LayerNorm | None) -> nn.LayerNorm | None:
    if final_layer_norm is None:
        return None
    norm = nn.LayerNorm(final_layer_norm.normalized_shape, eps=final_layer_norm.eps)
    norm.load_state_dict(final_layer_norm.state_dict())
    return norm


def book_encoder_to_torch(encoder: TransformerEncoder) -> nn.TransformerEncoder:
    """The book encoder's layers as :class:`torch.nn.TransformerEncoder` (which has no embeddings: feed it
    ``encoder.embeddings(input_ids)``); its ``final_layer_norm``, if any, becomes the stack's ``norm``.

    Returns:
        A new stack, in evaluation mode.
    """
    if not isinstance(encoder, TransformerEncoder):
        raise TypeError(f"encoder must be a TransformerEncoder, got {type(encoder).__name__}")
    layers = [book_encoder_layer_to_torch(layer) for layer in encoder.layers]
    stack = nn.TransformerEncoder(
        layers[0], num_layers=len(layers), norm=_final_norm_copy(encoder.final_layer_norm), enable_nested_tensor=False
    )
    stack.layers = nn.ModuleList(layers)
    return stack.eval()


def book_decoder_to_torch(decoder: TransformerDecoder) -> nn.TransformerDecoder:
    """The book decoder's layers as :class:`torch.nn.TransformerDecoder` (feed it ``decoder.embeddings(input_ids)``);
    its ``final_layer_norm``, if any, becomes the stack's ``norm``.

    Returns:
        A new stack, in evaluation mode.
    """
    if not isinstance(decoder, TransformerDecoder):
        raise TypeError(f"decoder must be a TransformerDecoder, got {type(decoder).__name__}")
    layers = [book_decoder_layer_to_torch(layer) for layer in decoder.layers]
    stack = nn.TransformerDecoder(layers[0], num_layers=len(layers), norm=_final_norm_copy(decoder.final_layer_norm))
    stack.layers = nn.ModuleList(layers)
    return stack.eval()


@torch.no_grad()
def book_transformer_to_torch(model: EncoderDecoderTransformer) -> nn.Transformer:
    """The book's encoder-decoder stacks as :class:`torch.nn.Transformer`, built by its own constructor.

    :class:`torch.nn.Transformer` has what the 2017 paper's model has between
    the embeddings and the LM head: an encoder stack and a decoder stack,
    each ending with a layer norm (``encoder.norm``, ``decoder.norm``),
    whatever ``norm_first`` says.  Every layer's weights are loaded into its
    layers; the two final norms get the model's ``final_layer_norm`` weights
    when it has them (``EncoderDecoderTransformer(..., final_layer_norm=True)``,
    and then the two compute the same function), and are replaced by
    :class:`torch.nn.Identity` when it has not, which is the one change made
    to PyTorch's module, and said here.  It has no embeddings and no LM head:
    feed it ``model.encoder.embeddings(input_ids)`` and
    ``model.decoder.embeddings(decoder_input_ids)``, and compare with the
    decoder's ``last_hidden_state``.

    Args:
        model: An :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`
            whose encoder and decoder have the same heads and feed-forward
            width (PyTorch's has one ``nhead`` and one ``dim_feedforward``).

    Returns:
        A new :class:`torch.nn.Transformer` (``batch_first=True``, dropout 0), in evaluation mode.
    """
    if not isinstance(model, EncoderDecoderTransformer):
        raise TypeError(f"model must be an EncoderDecoderTransformer, got {type(model).__name__}")
    config, decoder_config = model.config, model.decoder.config
    for name in ("num_attention_heads", "intermediate_size", "hidden_act", "layer_norm_eps"):
        if getattr(config, name) != getattr(decoder_config, name):
            raise ValueError(f"torch.nn.Transformer has one {name}; the encoder's and decoder's differ")
    options = _torch_layer_options(config, model.norm_first)
    options.pop("d_model"), options.pop("nhead")
    with warnings.catch_warnings():
        # PyTorch warns that a pre-LN encoder cannot use nested tensors, which are switched off below anyway.
        warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
        transformer = nn.Transformer(
            config.hidden_size,
            config.num_attention_heads,
            num_encoder_layers=len(model.encoder.layers),
            num_decoder_layers=len(model.decoder.layers),
            **options,
        )
    # Its encoder may turn padded batches into nested tensors (zeros at padded positions): not here.
    transformer.encoder.use_nested_tensor = False
    for stack, ours, converted in (
        (transformer.encoder, model.encoder, book_encoder_to_torch(model.encoder)),
        (transformer.decoder, model.decoder, book_decoder_to_torch(model.decoder)),
    ):
        # Every layer's weights, already under PyTorch's names ...
        for theirs, layer in zip(stack.layers, converted.layers, strict=True):
            theirs.load_state_dict(layer.state_dict())
        # ... and the stack's final norm: the book's, or none at all.
        if ours.final_layer_norm is None:
            stack.norm = nn.Identity()
        else:
            stack.norm.load_state_dict(ours.final_layer_norm.state_dict())
    return transformer.eval()


# ---------------------------------------------------------------------------
# Key maps
# ---------------------------------------------------------------------------
#: Prefix of the encoder's keys in BERT checkpoints of models with heads.
BERT_BASE_PREFIX = "bert."
#: Key prefixes of BERT's pre-training heads, which BertModel does not have.
BERT_HEAD_PREFIXES = ("cls.",)
#: Constant buffers some BERT checkpoints saved; BertModel builds them per call.
BERT_DROPPED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
#: TensorFlow-era layer-norm parameter names and today's.
LEGACY_NAMES = {"gamma": "weight", "beta": "bias"}


def check_state_dict(
    mapped: Mapping[str, Tensor], expected: Mapping[str, Tensor], unexpected: Sequence[str], model: str
) -> dict[str, Tensor]:
    """Check a renamed checkpoint against the model's own ``state_dict()``: every key, every shape.

    Args:
        mapped: The checkpoint's tensors under the model's names.
        expected: The model's ``state_dict()``.
        unexpected: Checkpoint keys that map to no parameter.
        model: The model's name, for the message.

    Returns:
        ``mapped``, as a dict.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key at once (never a
            silently half-initialised model, which ``load_state_dict(strict=False)`` would give).
    """
    missing = sorted(set(expected) - set(mapped))
    misshaped = [
        f"{key}: checkpoint {tuple(mapped[key].shape)}, model {tuple(expected[key].shape)}"
        for key in sorted(mapped)
        if key in expected and tuple(mapped[key].shape) != tuple(expected[key].shape)
    ]
    problems = []
    if missing:
        problems.append("missing tensors: " + ", ".join(missing))
    if unexpected:
        problems.append("unexpected tensors: " + ", ".join(sorted(unexpected)))
    if misshaped:
        problems.append("mis-shaped tensors: " + "; ".join(misshaped))
    if problems:
        raise ValueError(f"the checkpoint does not fit {model}: " + " | ".join(problems))
    return dict(mapped)


def map_bert_state_dict(state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Rename a BERT checkpoint's tensors to the BERT mirror's parameter names and check them all.

    Because :mod:`~literate_transformer.models.bert` keeps HuggingFace's
    module names, a checkpoint's tensors *almost* have our names already.
    The differences are few, and all written here:

    * checkpoints saved from a model with heads (``BertForPreTraining``,
      ``BertForMaskedLM``) prefix every encoder key with ``bert.``: stripped;
    * their pre-training heads (``cls.predictions.*``, ``cls.seq_relationship.*``)
      are not part of ``BertModel``: dropped;
    * ``embeddings.position_ids`` and ``embeddings.token_type_ids`` are constant
      buffers that older checkpoints saved; we build them on the fly: dropped;
    * checkpoints converted from the original TensorFlow code name the
      layer-norm parameters ``gamma`` and ``beta``: renamed ``weight`` and ``bias``.

    Args:
        state_dict: The checkpoint's tensors, by name.
        expected: The target model's ``state_dict()`` (names and shapes).

    Returns:
        A dictionary with exactly the keys of ``expected``.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key.

    >>> from literate_transformer import TransformerConfig
    >>> model = BertModel(TransformerConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...                                     num_attention_heads=2, intermediate_size=16))
    >>> state = {"bert." + key: value for key, value in model.state_dict().items()}
    >>> state["cls.seq_relationship.weight"] = torch.zeros(2, 8)
    >>> sorted(map_bert_state_dict(state, model.state_dict())) == sorted(model.state_dict())
    True
    """
    mapped: dict[str, Tensor] = {}
    unexpected: list[str] = []
    for original_key, tensor in state_dict.items():
        # 1) bert.encoder.layer.0... -> encoder.layer.0...
        key = original_key.removeprefix(BERT_BASE_PREFIX)
        # 2) Pre-training heads and constant buffers are not parameters of BertModel.
        if original_key.startswith(BERT_HEAD_PREFIXES) or key in BERT_DROPPED_BUFFERS:
            continue
        # 3) ...LayerNorm.gamma -> ...LayerNorm.weight, ...LayerNorm.beta -> ...LayerNorm.bias
        module_path, _, leaf = key.rpartition(".")
        if leaf in LEGACY_NAMES:
            key = f"{module_path}.{LEGACY_NAMES[leaf]}"
        if key not in expected:
            unexpected.append(original_key)
        elif key in mapped:
            unexpected.append(f"{original_key} (a second tensor for {key})")
        else:
            mapped[key] = tensor
    return check_state_dict(mapped, expected, unexpected, "BertModel")


def bert_from_hf(hf_model: nn.Module, cls: type[BertModel] = BertModel, **config_changes: Any) -> BertModel:
    """The BERT mirror with the config and weights of a live ``transformers`` BERT.

    Args:
        hf_model: A ``transformers`` BERT model; ``BertForPreTraining``-style
            models work too (the ``bert.`` prefix is stripped and the
            ``cls.*`` heads dropped).
        cls: The class to build (a subclass of :class:`~literate_transformer.models.bert.BertModel`).
        **config_changes: Config fields to override.

    Returns:
        The model, in the same training/evaluation mode as ``hf_model``.

    Raises:
        ValueError: for a model that is not a ``transformers`` BERT.
    """
    hf_config = getattr(hf_model, "config", None)
    if getattr(hf_config, "model_type", None) != "bert":
        raise ValueError(
            f"hf_model must be a transformers BERT model (config.model_type 'bert'), got {type(hf_model).__name__}"
        )
    config = as_config(hf_config)
    if config_changes:
        config = config.replace(**config_changes)
    state = hf_model.state_dict()
    has_pooler = any(key.removeprefix(BERT_BASE_PREFIX).startswith("pooler.") for key in state)
    model = cls(config, add_pooling_layer=has_pooler)
    model.load_state_dict(map_bert_state_dict(state, model.state_dict()), strict=True)
    # Same mode as the source (a live model may be training).
    return model.train(hf_model.training)


# ---------------------------------------------------------------------------
# GPT-2
# ---------------------------------------------------------------------------
def conv1d_to_linear(weight: Tensor) -> Tensor:
    r"""A HuggingFace ``Conv1D`` weight as an ``nn.Linear`` weight: its transpose.

    ``Conv1D(nf, nx)`` (GPT-2's, from the original TensorFlow code, where a
    "1-D convolution with kernel size 1" is a matrix product) stores its
    weight as ``(in_features, out_features)`` and computes :math:`x W + b`;
    ``nn.Linear`` stores ``(out_features, in_features)`` and computes
    :math:`x W^\top + b`.  Same function, transposed storage.

    >>> conv_weight = torch.randn(4, 6)                    # Conv1D(6, 4): 4 inputs, 6 outputs
    >>> x = torch.randn(2, 4)
    >>> torch.allclose(x @ conv_weight, x @ conv1d_to_linear(conv_weight).T)
    True
    """
    return weight.t()


#: Buffers of older GPT-2 checkpoints: a constant causal mask and the value that filled it, rebuilt per call here.
GPT2_DROPPED_BUFFERS = ("attn.bias", "attn.masked_bias")


def _split_into_heads(
    prefix: str, names: Sequence[str], weight: Tensor, bias: Tensor, num_heads: int
) -> dict[str, Tensor]:
    """Fused projections ``(len(names) * E, E)`` as the book's per-head ``q``/``k``/``v`` under ``prefix``."""
    tensors = {}
    for name, fused_weight, fused_bias in zip(names, weight.chunk(len(names)), bias.chunk(len(names)), strict=True):
        for head, (head_weight, head_bias) in enumerate(split_heads(fused_weight, fused_bias, num_heads)):
            tensors[f"{prefix}.heads.{head}.{name}.weight"] = head_weight
            tensors[f"{prefix}.heads.{head}.{name}.bias"] = head_bias
    return tensors


# Where each of a GPT-2 layer's other tensors goes in the book's decoder layer (Conv1D ones are transposed).
_GPT2_LAYER_PARTS = {
    "ln_1": "layer_norm_1",
    "attn.c_proj": "self_attention.output_linear",
    "ln_2": "layer_norm_3",
    "mlp.c_fc": "feed_forward.linear_1",
    "mlp.c_proj": "feed_forward.linear_2",
}
_GPT2_TOP_PARTS = {
    "wte.weight": "embeddings.token_embeddings.weight",
    "wpe.weight": "embeddings.position_embeddings.weight",
    "ln_f.weight": "final_layer_norm.weight",
    "ln_f.bias": "final_layer_norm.bias",
}


def map_gpt2_state_dict(
    state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor], num_attention_heads: int
) -> dict[str, Tensor]:
    r"""Rename, transpose and split a GPT-2 checkpoint's tensors into the package's GPT-2, and check them all.

    The package's :class:`~literate_transformer.models.gpt2.GPT2Model` *is*
    the book's decoder, so its parameters have the book's names
    (``layers.0.self_attention.heads.2.q.weight``) where HuggingFace's have
    GPT-2's (``h.0.attn.c_attn.weight``).  Four things happen on the way:

    * **Conv1D is a transposed Linear.**  GPT-2's projections are ``Conv1D``
      modules whose weight is ``(in, out)``: each is transposed
      (:func:`conv1d_to_linear`) into ``nn.Linear``'s ``(out, in)``.
    * **c_attn is** :math:`W^Q`, :math:`W^K`, :math:`W^V` **side by side.**
      One ``Conv1D(3E, E)`` projects every head's query, key and value at
      once; its output is split into thirds (queries, keys, values), and each
      third into ``H`` heads of ``D`` features
      (``.view(B, T, H, D)`` in HuggingFace's attention).  Transposed, the
      ``(3E, E)`` weight is three fused ``(E, E)`` projections stacked, each
      cut into the book's per-head ``q``, ``k``, ``v`` by :func:`split_heads`.
    * **Names.**  ``h.i`` is ``layers.i``; ``ln_1``/``ln_2`` are the layer's
      ``layer_norm_1`` and ``layer_norm_3`` (the book's ``layer_norm_2``
      belongs to the cross-attention sub-layer GPT-2 lacks); ``attn.c_proj`` is
      ``self_attention.output_linear``; ``mlp.c_fc``/``mlp.c_proj`` are
      ``feed_forward.linear_1``/``linear_2``; ``wte``, ``wpe`` and ``ln_f`` are
      ``embeddings.token_embeddings``, ``embeddings.position_embeddings`` and
      ``final_layer_norm``.
    * **One table, two names.**  A ``GPT2LMHeadModel`` checkpoint prefixes
      everything with ``transformer.`` and may list ``lm_head.weight``, the
      same tensor as ``wte`` (tied): it is checked to be equal and read from
      ``wte``.  Older checkpoints also saved the constant causal-mask buffers
      ``attn.bias`` and ``attn.masked_bias``: dropped.

    Args:
        state_dict: The checkpoint's tensors (of a ``GPT2Model`` or ``GPT2LMHeadModel``).
        expected: The target model's ``state_dict()``; with ``transformer.``
            keys (and ``lm_head.weight``) for a ``GPT2LMHeadModel``.
        num_attention_heads: ``H``, to split ``c_attn`` by.

    Returns:
        A dictionary with exactly the keys of ``expected``.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key, or
            for an ``lm_head.weight`` that is not ``wte`` (an untied head).
    """
    prefix = "transformer." if any(key.startswith("transformer.") for key in expected) else ""
    mapped: dict[str, Tensor] = {}
    unexpected: list[str] = []
    head = state_dict.get("lm_head.weight")
    for original_key, tensor in state_dict.items():
        key = original_key.removeprefix("transformer.")
        if key == "lm_head.weight" or key.endswith(GPT2_DROPPED_BUFFERS):
            continue
        parts = key.split(".")
        if key in _GPT2_TOP_PARTS:
            mapped[prefix + _GPT2_TOP_PARTS[key]] = tensor
        elif len(parts) == 5 and parts[0] == "h" and ".".join(parts[2:4]) == "attn.c_attn":
            # c_attn: transpose to (3E, E), then queries | keys | values, each cut into heads.
            if parts[4] == "weight":
                bias = state_dict[original_key.removesuffix("weight") + "bias"]
                split = _split_into_heads(
                    f"{prefix}layers.{parts[1]}.self_attention",
                    "qkv",
                    conv1d_to_linear(tensor),
                    bias,
                    num_attention_heads,
                )
                mapped.update(split)
        elif len(parts) >= 4 and parts[0] == "h" and ".".join(parts[2:-1]) in _GPT2_LAYER_PARTS:
            ours = _GPT2_LAYER_PARTS[".".join(parts[2:-1])]
            # Conv1D weights (every 2-D tensor of a layer) are stored transposed.
            value = conv1d_to_linear(tensor) if tensor.dim() == 2 else tensor
            mapped[f"{prefix}layers.{parts[1]}.{ours}.{parts[-1]}"] = value
        else:
            unexpected.append(original_key)
    if "lm_head.weight" in expected:
        table = mapped.get(prefix + _GPT2_TOP_PARTS["wte.weight"])
        if head is not None and table is not None and not torch.equal(head, table):
            raise ValueError("lm_head.weight differs from wte.weight: this GPT-2's head is not tied, which GPT-2 is")
        if table is not None:
            mapped["lm_head.weight"] = table
    return check_state_dict(mapped, expected, unexpected, "GPT-2")


def gpt2_from_hf(hf_model: nn.Module) -> GPT2Model | GPT2LMHeadModel:
    """The package's GPT-2 with the config and weights of a live ``transformers`` ``GPT2Model`` or ``GPT2LMHeadModel``.

    Returns:
        A :class:`~literate_transformer.models.gpt2.GPT2LMHeadModel` for a
        model with a head, else a :class:`~literate_transformer.models.gpt2.GPT2Model`,
        in evaluation mode.
    """
    config = gpt2_config(hf_model.config)
    cls = GPT2LMHeadModel if hasattr(hf_model, "lm_head") else GPT2Model
    model = cls(config)
    state = map_gpt2_state_dict(hf_model.state_dict(), model.state_dict(), config.num_attention_heads)
    model.load_state_dict(state, strict=True)
    return model.eval()


# ---------------------------------------------------------------------------
# BART
# ---------------------------------------------------------------------------
#: Keys of fairseq-era BART checkpoints that hold no tensor of the model.
BART_DROPPED_KEYS = ("encoder.version", "decoder.version")
#: BART's names for one table, all the same tensor (HuggingFace ties them to ``shared``).
BART_SHARED_NAMES = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")

# A BART layer's tensors and the book's names for them, per stack (q/k/v projections are split into heads apart).
_BART_LAYER_PARTS = {
    "encoder": {
        "self_attn.out_proj": "attention.output_linear",
        "self_attn_layer_norm": "layer_norm_1",
        "fc1": "feed_forward.linear_1",
        "fc2": "feed_forward.linear_2",
        "final_layer_norm": "layer_norm_2",
    },
    "decoder": {
        "self_attn.out_proj": "self_attention.output_linear",
        "self_attn_layer_norm": "layer_norm_1",
        "encoder_attn.out_proj": "cross_attention.output_linear",
        "encoder_attn_layer_norm": "layer_norm_2",
        "fc1": "feed_forward.linear_1",
        "fc2": "feed_forward.linear_2",
        "final_layer_norm": "layer_norm_3",
    },
}
_BART_ATTENTIONS = {
    "encoder": {"self_attn": "attention"},
    "decoder": {"self_attn": "self_attention", "encoder_attn": "cross_attention"},
}


def map_bart_state_dict(
    state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor], encoder_heads: int, decoder_heads: int
) -> dict[str, Tensor]:
    r"""Rename and split a BART checkpoint's tensors into the package's BART, and check them all.

    The package's :class:`~literate_transformer.models.bart.BartModel` *is*
    the book's encoder-decoder, so its names are the book's:

    * **Attention.**  ``self_attn``/``encoder_attn`` are the book's
      ``attention`` (encoder), ``self_attention`` and ``cross_attention``
      (decoder); their fused ``q_proj``, ``k_proj``, ``v_proj`` (``nn.Linear``,
      not transposed) are cut into per-head ``q``, ``k``, ``v`` by
      :func:`split_heads` (the encoder's and decoder's head counts may differ),
      ``out_proj`` is ``output_linear``.
    * **Layer norms.**  ``self_attn_layer_norm`` is ``layer_norm_1``,
      ``encoder_attn_layer_norm`` ``layer_norm_2``, and BART's
      ``final_layer_norm`` is the layer's *last* norm, that of the
      feed-forward sub-layer (``layer_norm_2`` in an encoder layer,
      ``layer_norm_3`` in a decoder layer), not a norm after the stack (which
      BART does not have).  ``layernorm_embedding`` is ``embeddings.layer_norm``.
    * **Positions.**  ``embed_positions`` is ``embeddings.position_embeddings``,
      rows and all: both tables have ``max_position_embeddings + 2`` rows,
      because BART reads position :math:`p` from row :math:`p + 2`.
    * **One embedding table, four names.**  ``shared``,
      ``encoder.embed_tokens``, ``decoder.embed_tokens`` and ``lm_head`` are the
      same tensor in BART (the checkpoint may list any of them); here the
      encoder's ``token_embeddings`` module is the decoder's too and its
      weight is ``lm_head.weight``.  The table is read from ``shared`` (or
      the first name present), and every other name present is checked to
      hold the same values.
    * **The logits' bias.**  ``final_logits_bias`` ``(1, V)`` is ``lm_head.bias`` ``(V,)``.
    * A ``BartForConditionalGeneration`` checkpoint prefixes the model's keys
      with ``model.``; fairseq-era ones have ``encoder.version`` and
      ``decoder.version`` entries, which hold no weights: dropped.

    Args:
        state_dict: The checkpoint's tensors.
        expected: The target model's ``state_dict()``.
        encoder_heads: The encoder's number of heads.
        decoder_heads: The decoder's number of heads.

    Returns:
        A dictionary with exactly the keys of ``expected``.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key, or
            naming a copy of the embedding table that differs from the others.
    """
    mapped: dict[str, Tensor] = {}
    unexpected: list[str] = []
    table_names = []
    for original_key, tensor in state_dict.items():
        key = original_key.removeprefix("model.")
        parts = key.split(".")
        if key in BART_DROPPED_KEYS:
            continue
        if key in BART_SHARED_NAMES:
            table_names.append(original_key)
        elif key == "final_logits_bias":
            mapped["lm_head.bias"] = tensor.reshape(-1)
        elif parts[0] in ("encoder", "decoder") and parts[1] == "embed_positions":
            mapped[f"{parts[0]}.embeddings.position_embeddings.{parts[-1]}"] = tensor
        elif parts[0] in ("encoder", "decoder") and parts[1] == "layernorm_embedding":
            mapped[f"{parts[0]}.embeddings.layer_norm.{parts[-1]}"] = tensor
        elif len(parts) >= 5 and parts[0] in ("encoder", "decoder") and parts[1] == "layers":
            stack, index, module, leaf = parts[0], parts[2], ".".join(parts[3:-1]), parts[-1]
            attention, _, projection = module.partition(".")
            if attention in _BART_ATTENTIONS[stack] and projection in ("q_proj", "k_proj", "v_proj"):
                # q_proj, k_proj and v_proj each hold every head's projection: cut them into heads.
                if leaf == "weight":
                    bias = state_dict[original_key.removesuffix("weight") + "bias"]
                    heads = encoder_heads if stack == "encoder" else decoder_heads
                    ours = f"{stack}.layers.{index}.{_BART_ATTENTIONS[stack][attention]}"
                    mapped.update(_split_into_heads(ours, projection[0], tensor, bias, heads))
            elif module in _BART_LAYER_PARTS[stack]:
                mapped[f"{stack}.layers.{index}.{_BART_LAYER_PARTS[stack][module]}.{leaf}"] = tensor
            else:
                unexpected.append(original_key)
        else:
            unexpected.append(original_key)
    if table_names:
        ordered = sorted(table_names, key=lambda name: BART_SHARED_NAMES.index(name.removeprefix("model.")))
        table = state_dict[ordered[0]]
        for name in ordered[1:]:
            if not torch.equal(state_dict[name], table):
                raise ValueError(f"{name} differs from {ordered[0]}: BART has one embedding table, shared by all four")
        for ours in (
            "encoder.embeddings.token_embeddings.weight",
            "decoder.embeddings.token_embeddings.weight",
            "lm_head.weight",
        ):
            if ours in expected:
                mapped[ours] = table
    return check_state_dict(mapped, expected, unexpected, "BART")


def bart_from_hf(hf_model: nn.Module) -> BartModel | BartForConditionalGeneration:
    """The package's BART with the config and weights of a live ``transformers`` ``BartModel`` or
    ``BartForConditionalGeneration``.

    Returns:
        A :class:`~literate_transformer.models.bart.BartForConditionalGeneration`
        for a model with a head, else a :class:`~literate_transformer.models.bart.BartModel`,
        in evaluation mode.
    """
    encoder_config, decoder_config = bart_config(hf_model.config)
    cls = BartForConditionalGeneration if hasattr(hf_model, "lm_head") else BartModel
    model = cls(encoder_config, decoder_config)
    state = map_bart_state_dict(
        hf_model.state_dict(),
        model.state_dict(),
        encoder_config.num_attention_heads,
        decoder_config.num_attention_heads,
    )
    model.load_state_dict(state, strict=True)
    return model.eval()


# ---------------------------------------------------------------------------
# Any supported model
# ---------------------------------------------------------------------------
#: The ``transformers`` classes :func:`from_hf` converts, and the package's class each becomes.
SUPPORTED_HF_MODELS: dict[str, str] = {
    "BertModel": "literate_transformer.models.bert.BertModel",
    "GPT2Model": "literate_transformer.models.gpt2.GPT2Model",
    "GPT2LMHeadModel": "literate_transformer.models.gpt2.GPT2LMHeadModel",
    "BartModel": "literate_transformer.models.bart.BartModel",
    "BartForConditionalGeneration": "literate_transformer.models.bart.BartForConditionalGeneration",
}


def from_hf(model: nn.Module) -> nn.Module:
    """The package's equivalent of a ``transformers`` model: the same weights, in evaluation mode.

    ``transformers.BertModel`` becomes :class:`~literate_transformer.models.bert.BertModel`,
    ``GPT2Model`` and ``GPT2LMHeadModel`` the classes of
    :mod:`~literate_transformer.models.gpt2`, ``BartModel`` and
    ``BartForConditionalGeneration`` those of
    :mod:`~literate_transformer.models.bart` (:data:`SUPPORTED_HF_MODELS`).
    The conversion is chosen by the model's class, exactly: a BERT with a
    task head (``BertForMaskedLM``) is refused, since the package has no such
    head.

    Args:
        model: A ``transformers`` model.

    Returns:
        The package's model.

    Raises:
        TypeError: for any other model, listing the supported classes.

    >>> from_hf(torch.nn.Linear(2, 2))
    Traceback (most recent call last):
        ...
    TypeError: from_hf supports the transformers models BertModel, GPT2Model, GPT2LMHeadModel, BartModel, BartForConditionalGeneration; got torch.nn.modules.linear.Linear
    """
    cls = type(model)
    name = cls.__name__
    if name not in SUPPORTED_HF_MODELS or not cls.__module__.startswith("transformers."):
        raise TypeError(
            f"from_hf supports the transformers models {', '.join(SUPPORTED_HF_MODELS)}; "
            f"got {cls.__module__}.{cls.__qualname__}"
        )
    if name == "BertModel":
        return bert_from_hf(model).eval()
    if name.startswith("GPT2"):
        return gpt2_from_hf(model)
    return bart_from_hf(model)
