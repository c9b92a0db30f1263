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
  BERT is post-LN); :func:`book_layer_to_bert` goes back.
* :func:`book_attention_to_torch`, :func:`book_encoder_layer_to_torch`,
  :func:`book_decoder_layer_to_torch`, :func:`book_encoder_to_torch` and
  :func:`book_decoder_to_torch`: the book's modules as PyTorch's, ready to
  be compared (PyTorch's masks say ``True`` for *ignore*, the opposite of
  this package's).

Key maps
--------
A checkpoint is a dictionary from parameter names to tensors.
:func:`map_bert_state_dict` renames a BERT checkpoint's tensors to the BERT
mirror's parameter names (almost the identity, since the mirror keeps
HuggingFace's names) and checks that every tensor is accounted for;
:func:`bert_from_hf` copies a live ``transformers`` BERT through it.

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

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from .book.attention import MultiHeadAttention
from .book.decoder import TransformerDecoder, TransformerDecoderLayer
from .book.encoder import TransformerEncoder, TransformerEncoderLayer
from .core.activations import get_activation
from .core.config import as_config
from .models.bert import BertAttention, BertLayer, BertModel

__all__ = [
    "fuse_heads",
    "split_heads",
    "bert_attention_to_book",
    "bert_layer_to_book",
    "book_layer_to_bert",
    "book_attention_to_torch",
    "book_encoder_layer_to_torch",
    "book_decoder_layer_to_torch",
    "book_encoder_to_torch",
    "book_decoder_to_torch",
    "check_state_dict",
    "map_bert_state_dict",
    "bert_from_hf",
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


def book_encoder_to_torch(encoder: TransformerEncoder) -> nn.TransformerEncoder:
    """The book encoder's layers as :class:`torch.nn.TransformerEncoder` (which has no embeddings: feed it
    ``encoder.embeddings(input_ids)``).

    Returns:
        A new stack, in evaluation mode.
    """
    if not isinstance(encoder, TransformerEncoder):
        raise TypeError(f"encoder must be a TransformerEncoder, got {type(encoder).__name__}")
    layers = [book_encoder_layer_to_torch(layer) for layer in encoder.layers]
    stack = nn.TransformerEncoder(layers[0], num_layers=len(layers), enable_nested_tensor=False)
    stack.layers = nn.ModuleList(layers)
    return stack.eval()


def book_decoder_to_torch(decoder: TransformerDecoder) -> nn.TransformerDecoder:
    """The book decoder's layers as :class:`torch.nn.TransformerDecoder` (feed it ``decoder.embeddings(input_ids)``).

    Returns:
        A new stack, in evaluation mode.
    """
    if not isinstance(decoder, TransformerDecoder):
        raise TypeError(f"decoder must be a TransformerDecoder, got {type(decoder).__name__}")
    layers = [book_decoder_layer_to_torch(layer) for layer in decoder.layers]
    stack = nn.TransformerDecoder(layers[0], num_layers=len(layers))
    stack.layers = nn.ModuleList(layers)
    return stack.eval()


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
