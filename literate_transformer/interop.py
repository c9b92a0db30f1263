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

Checkpoints and ``transformers`` models are another matter: every model
family keeps HuggingFace's names and converts them in its own file, and
:func:`~literate_transformer.models.registry.from_hf` finds the family.

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
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from .book.attention import MultiHeadAttention
from .book.decoder import EncoderDecoderTransformer, TransformerDecoder, TransformerDecoderLayer
from .book.encoder import TransformerEncoder, TransformerEncoderLayer
from .core.activations import get_activation
from .models.bert import BertAttention, BertLayer, BertModel

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
