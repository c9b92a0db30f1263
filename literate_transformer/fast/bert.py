r"""BERT, fast: the same function as :class:`~literate_transformer.models.bert.BertModel`, with less work.

:class:`~literate_transformer.models.bert.BertModel` is written to be read:
three projections for queries, keys and values, every padded position
computed like a real one, one PyTorch call per step.  That is also where its
time goes.  :class:`FastBertModel` is built *from* a ``BertModel`` (the same
weights, nothing retrained) and changes six things, each one a lesson of
chapter 16; a test proves that it still computes what ``BertModel`` computes,
within ``1e-5``.

1. **One matrix multiply for Q, K and V.**  The three ``E -> E`` projections
   read the same input, so their weights stacked into one ``3E x E`` matrix
   give all three in one multiply:

   .. math::

       [Q \; K \; V] = X \, [W^Q \; W^K \; W^V]^\top + [b^Q \; b^K \; b^V],

   one pass over :math:`X` and one matrix multiply instead of three
   (Megatron-LM calls the fused layer ``query_key_value``; GPT-2's
   ``c_attn`` was born fused).

2. **No work on padding.**  A batch of sentences padded to the longest
   spends the same work on a ``[PAD]`` as on a word.  Here the real tokens
   of the batch are laid end to end, ``U = sum(lengths)`` of them, and every
   position-wise step (the projections, the feed-forward layer, the layer
   norms: almost all of the work) runs on that ``(U, E)`` matrix.  Only
   attention needs the sequences apart: the packed queries, keys and values
   are scattered into a padded ``(B, T, 3E)`` buffer, attended with the
   padding keys masked, and gathered back.  Where the lengths are all equal
   there is nothing to scatter, and attention runs without a mask.  Given
   as ``lengths=``, what the tokenizer returns as plain integers on the
   host, they cost the device nothing.  Given as an ``attention_mask``,
   they are read back from it once per call (on a GPU, a wait until its
   queue has caught up), and never again inside the layers.

3. **Fewer passes over memory.**  Each post-LN sub-layer ends with
   :math:`\operatorname{LayerNorm}(x + hW^\top + b)`.  Summing the residual
   :math:`x` and the bias :math:`b` first and letting the matrix multiply
   accumulate into that sum in place (:meth:`FusedBertLayer.add_and_norm`)
   saves one pass over the ``(U, E)`` states per sub-layer.

4. **Memory allocated once per forward.**  A new tensor of a few megabytes
   is memory the operating system has to hand over page by page: the first
   write to each 4 kB page stops the program while the kernel zeroes it
   (a "page fault").  A 6 MB feed-forward activation is about 1,500 of
   them, and an eager forward of six layers allocates such tensors by the
   dozen.  Here the three largest (the fused ``[Q K V]`` ``(U, 3E)``, the
   feed-forward's hidden layer ``(U, F)`` and the sub-layers' sums
   ``(U, E)``) are allocated once per forward, in a :class:`Workspace`
   that every layer writes over, and the GELU runs in place.  The
   arithmetic is the same, in the same order.

5. **The multiply finishes the work (on the CPU).**  A matrix multiply
   writes its output tile by tile; the bias, the GELU and the residual sum
   are each one more pass over that output once it has left the cache.
   PyTorch's CPU build carries a second matrix library besides MKL's
   ``addmm``, oneDNN, whose linear layer takes "post-ops": the bias, an
   activation, or a tensor to add, applied to each tile while it is still
   in cache (:func:`linear`, :func:`linear_activation`, :func:`linear_add`).
   The package declares them as operators of its own
   (:func:`torch.library.custom_op`), so that :func:`torch.compile` (point
   6) calls them as they are.  On a ``float32`` CPU tensor with no gradient
   wanted (:func:`onednn_applies`) the layer runs these fused steps and no
   :class:`Workspace`; everywhere else (a GPU, another dtype, training) it
   runs points 3 and 4.  The sums are the same, taken in another order:
   they agree within rounding.

6. **A compiled path where it pays.**  :meth:`FastBertModel.compile` hands
   the packed forward to :func:`torch.compile`, which fuses the steps PyTorch
   runs as separate passes over memory into fewer kernels around the matrix
   multiplies (oneDNN's, on the CPU, called as they are); with
   inference-only "freezing" it also treats the weights as constants.
   Compiling takes tens of seconds, so it can only pay on a long-running
   job (the benchmark page shows what it saves once warm), never on one
   sentence.

What stays the same: the weights (shared with the ``BertModel`` it was
built from, except the fused ``query_key_value``, which is a copy), the
embeddings, the post-layer-norm arrangement, the fused attention kernel
(:func:`torch.nn.functional.scaled_dot_product_attention`).  What it leaves
out: everything a sentence encoder does not need (the pooler, attention
probabilities, head masks, cross-attention, dropout: it is for inference).

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> from literate_transformer.models.bert import BertModel
>>> config = TransformerConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
...                            num_attention_heads=4, intermediate_size=32, max_position_embeddings=20)
>>> bert = BertModel(config).eval()
>>> fast = FastBertModel.from_bert(bert)
>>> input_ids = torch.tensor([[2, 7, 9, 3], [2, 5, 3, 0]])          # the second sentence is padded
>>> mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
>>> ours = fast(input_ids, lengths=[4, 3])
>>> theirs = bert(input_ids, attention_mask=mask).last_hidden_state
>>> torch.allclose(ours[mask.bool()], theirs[mask.bool()], atol=1e-5)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.masks import MaskHook, build_attention_mask
from ..core.validation import (
    Arguments,
    check_attention_mask,
    check_input_ids,
    check_token_type_ids,
    validate_with,
)
from ..models.bert import BertLayer, BertModel

__all__ = [
    "PackedBatch",
    "Workspace",
    "activate_in_place",
    "onednn_applies",
    "linear",
    "linear_activation",
    "linear_add",
    "FusedBertLayer",
    "FastBertModel",
]


class PackedBatch:
    """The real tokens of a batch, end to end, and where each sits in the padded ``(B, T)`` layout.

    Built on the host from the lengths the tokenizer returned (plain
    integers), so that nothing is read back from the device.

    Attributes:
        lengths: Each sequence's number of real tokens.
        batch_size: ``B``.
        max_length: ``T``, the longest length.
        index: ``(U,)`` the flat position (``b * T + t``) of each real token in
            the padded layout; ``None`` when every sequence has ``T`` tokens
            (the packed and the padded layouts are then the same).
        key_mask: ``(B, 1, 1, T)`` additive mask hiding the padding keys
            (:func:`~literate_transformer.core.masks.build_attention_mask`), or ``None``.
        position_ids: ``(U,)`` each token's position in its own sequence, ``0 .. length - 1``.
        shape: An empty ``(B, T, 0)`` tensor: the padded layout's sizes, as a shape (see
            :meth:`FastBertModel.encode_packed`).

    Args:
        lengths: Each sequence's number of real tokens.
        max_length: The padded length ``T`` (default: the longest).
        device: Where the model runs.
        dtype: The model's floating-point type (of the mask).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        max_length: int | None = None,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.lengths = tuple(int(length) for length in lengths)
        max_length = max(self.lengths) if max_length is None else max_length
        self.batch_size, self.max_length = len(self.lengths), max_length
        starts = torch.arange(self.batch_size) * max_length
        counts = torch.tensor(self.lengths)
        # Position of each real token in its sentence: 0, 1, ..., length - 1, sentence after sentence.
        ends = counts.cumsum(0)
        within = torch.arange(int(ends[-1])) - torch.repeat_interleave(ends - counts, counts)
        self.position_ids = within.to(device)
        self.shape = torch.empty(self.batch_size, max_length, 0, device=device)
        self.index = self.key_mask = None
        if any(length != max_length for length in self.lengths):
            # b * T + t for each real token: where the padded layout keeps it.
            self.index = (torch.repeat_interleave(starts, counts) + within).to(device)
            # BERT's own additive padding mask (the package's one builder), from the lengths, on the host.
            real = (torch.arange(max_length)[None, :] < counts[:, None]).long()  # (B, T)
            self.key_mask = build_attention_mask(real, query_length=max_length, dtype=dtype).to(device)

    @property
    def num_tokens(self) -> int:
        """``U``, the number of real tokens."""
        return sum(self.lengths)


@dataclass(frozen=True)
class Workspace:
    """The buffers one forward allocates once and every :class:`FusedBertLayer` writes over.

    A layer reads each buffer before the next layer writes it again, so one
    set serves the whole stack (see point 4 of this module).
    """

    #: ``(U, 3E)``, the fused projection's ``[Q K V]``.
    mixed: Tensor
    #: ``(U, F)``, the feed-forward layer's hidden activations.
    intermediate: Tensor
    #: ``(U, E)``, a sub-layer's residual + bias + product, before its layer norm.
    summed: Tensor

    @classmethod
    def for_layer(cls, hidden_states: Tensor, layer: FusedBertLayer) -> Workspace:
        """Empty buffers for ``hidden_states`` ``(U, E)`` passing through layers shaped like ``layer``."""
        num_tokens, hidden_size = hidden_states.shape
        return cls(
            mixed=hidden_states.new_empty(num_tokens, layer.query_key_value.out_features),
            intermediate=hidden_states.new_empty(num_tokens, layer.intermediate.dense.out_features),
            summed=hidden_states.new_empty(num_tokens, hidden_size),
        )

    def check_fits(self, hidden_states: Tensor, layer: FusedBertLayer) -> None:
        """Refuse buffers a layer cannot write over: each must have :meth:`for_layer`'s shape and dtype.

        Raises:
            ValueError: naming the buffer, its shape and dtype, and what the layer needs.
        """
        num_tokens, hidden_size = hidden_states.shape
        wanted = {
            "mixed": (num_tokens, layer.query_key_value.out_features),
            "intermediate": (num_tokens, layer.intermediate.dense.out_features),
            "summed": (num_tokens, hidden_size),
        }
        for name, shape in wanted.items():
            # Only the buffer's shape and dtype: its values are whatever the last layer left (or never written).
            found, dtype = tuple(getattr(self, name).shape), getattr(self, name).dtype
            if found != shape or dtype != hidden_states.dtype:
                raise ValueError(
                    f"workspace.{name} must be a {hidden_states.dtype} tensor of shape {shape} for hidden_states "
                    f"of shape {tuple(hidden_states.shape)}, got {dtype} {found} (build it with Workspace.for_layer)"
                )


def activate_in_place(activation: nn.Module, hidden: Tensor) -> Tensor:
    """``activation(hidden)``, written over ``hidden`` where PyTorch has an in-place form (BERT's exact GELU has).

    Raises:
        TypeError: if ``activation`` is not a ``torch.nn.Module`` or ``hidden`` not a tensor.
    """
    if not isinstance(activation, nn.Module):
        raise TypeError(f"activation must be a torch.nn.Module such as nn.GELU(), got {type(activation).__name__}")
    if not isinstance(hidden, Tensor):
        raise TypeError(f"hidden must be a torch.Tensor, got {type(hidden).__name__}")
    if isinstance(activation, nn.GELU):
        return torch.ops.aten.gelu_(hidden, approximate=activation.approximate)
    return activation(hidden)


#: oneDNN's name and algorithm for each activation it can apply as a post-op: BERT's exact GELU and the tanh form.
ONEDNN_ACTIVATIONS = {"none": ("gelu", "none"), "tanh": ("gelu", "tanh")}


# oneDNN's linear, declared as operators of this package: torch.compile calls an operator it is given as it is
# (the fake kernel tells it the output's shape) and fuses what lies between the calls.
@torch.library.custom_op("literate_transformer::onednn_linear", mutates_args=())
def onednn_linear(hidden: Tensor, weight: Tensor, bias: Tensor, post_op: str, algorithm: str) -> Tensor:
    """``post_op(hidden W^T + b)`` in oneDNN: ``post_op`` ``"none"`` or ``"gelu"`` (``algorithm`` ``"none"``, exact,
    or ``"tanh"``), applied to each output tile before it is written."""
    return torch.ops.mkldnn._linear_pointwise(hidden, weight, bias, post_op, [], algorithm)


@onednn_linear.register_fake
def _onednn_linear_shape(hidden: Tensor, weight: Tensor, bias: Tensor, post_op: str, algorithm: str) -> Tensor:
    return hidden.new_empty(*hidden.shape[:-1], weight.shape[0])


@torch.library.custom_op("literate_transformer::onednn_linear_add", mutates_args=())
def onednn_linear_add(hidden: Tensor, weight: Tensor, bias: Tensor, residual: Tensor) -> Tensor:
    """``residual + hidden W^T + b`` in oneDNN, the residual added to each output tile (a "binary add" post-op)."""
    return torch.ops.mkldnn._linear_pointwise.binary(hidden, residual, weight, bias, "add")


@onednn_linear_add.register_fake
def _onednn_linear_add_shape(hidden: Tensor, weight: Tensor, bias: Tensor, residual: Tensor) -> Tensor:
    return torch.empty_like(residual)


def onednn_applies(hidden_states: Tensor) -> bool:
    """Whether :func:`linear` and its kin run oneDNN's fused linear on ``hidden_states`` (point 5).

    They do for a ``float32`` CPU tensor when no gradient is wanted (oneDNN's operator has no backward)
    and PyTorch was built with oneDNN; everywhere else the layer multiplies with ``addmm``.
    """
    return (
        hidden_states.device.type == "cpu"
        and hidden_states.dtype == torch.float32
        and not torch.is_grad_enabled()
        and torch.backends.mkldnn.is_available()
    )


def _check_linear_inputs(args: Arguments) -> None:
    """Refuse what oneDNN's linear cannot read, by name, before it runs (once, where a reader calls it: inside
    :class:`FastBertModel`'s forward, which checked its own inputs, the steps trust their caller).

    Raises:
        TypeError: if ``hidden`` (or ``residual``) is not a tensor or ``layer`` not a ``torch.nn.Linear``.
        ValueError: for a layer without a bias, ``hidden`` whose last size is not the layer's input width, or a
            ``residual`` not of the output's shape.
    """
    hidden, layer = args.hidden, args.layer
    if not isinstance(hidden, Tensor):
        raise TypeError(f"hidden must be a torch.Tensor, got {type(hidden).__name__}")
    if not isinstance(layer, nn.Linear):
        raise TypeError(f"layer must be a torch.nn.Linear, got {type(layer).__name__}")
    if layer.bias is None:
        raise ValueError("layer must have a bias (the fused steps add it to each tile)")
    if hidden.ndim < 1 or hidden.shape[-1] != layer.in_features:
        raise ValueError(
            f"hidden must end in the layer's input width {layer.in_features}, got shape {tuple(hidden.shape)}"
        )
    if "residual" not in vars(args):  # linear() and linear_activation() add none
        return
    residual = args.residual
    if not isinstance(residual, Tensor):
        raise TypeError(f"residual must be a torch.Tensor, got {type(residual).__name__}")
    if tuple(residual.shape) != (*hidden.shape[:-1], layer.out_features):
        raise ValueError(
            f"residual must have the output's shape {(*hidden.shape[:-1], layer.out_features)}, "
            f"got {tuple(residual.shape)}"
        )


@validate_with(_check_linear_inputs)
def linear(hidden: Tensor, layer: nn.Linear) -> Tensor:
    """``hidden W^T + b`` in oneDNN, the bias added to each output tile as it is written.

    Raises:
        TypeError: if ``hidden`` is not a tensor or ``layer`` not a ``torch.nn.Linear``.
        ValueError: for a layer without a bias, or ``hidden`` whose last size is not the layer's input width.
    """
    return onednn_linear(hidden, layer.weight, layer.bias, "none", "")


@validate_with(_check_linear_inputs)
def linear_activation(hidden: Tensor, layer: nn.Linear, activation: nn.Module) -> Tensor:
    """``activation(hidden W^T + b)``, the activation applied by oneDNN to each tile where it has the form.

    Raises:
        TypeError: if ``activation`` is not a ``torch.nn.Module`` (from :func:`activate_in_place`); and as
            :func:`linear_add` for ``hidden`` and ``layer``.
        ValueError: as :func:`linear_add`.
    """
    if isinstance(activation, nn.GELU):
        name, algorithm = ONEDNN_ACTIVATIONS[activation.approximate]
        return onednn_linear(hidden, layer.weight, layer.bias, name, algorithm)
    return activate_in_place(activation, linear(hidden, layer))


@validate_with(_check_linear_inputs)
def linear_add(hidden: Tensor, layer: nn.Linear, residual: Tensor) -> Tensor:
    """``residual + hidden W^T + b``, the residual added by oneDNN to each tile.

    Raises:
        TypeError: if ``hidden`` or ``residual`` is not a tensor, or ``layer`` not a ``torch.nn.Linear``.
        ValueError: for a layer without a bias, ``hidden`` whose last size is not the layer's input width, or a
            ``residual`` not of the output's shape.
    """
    return onednn_linear_add(hidden, layer.weight, layer.bias, residual)


class FusedBertLayer(nn.Module):
    """:class:`~literate_transformer.models.bert.BertLayer` on packed tokens, Q, K and V in one multiply.

    Args:
        layer: The ``BertLayer`` whose weights it uses (shared, except the fused projection, a copy).
    """

    def __init__(self, layer: BertLayer) -> None:
        super().__init__()
        attention = layer.attention.self
        self.num_attention_heads = attention.num_attention_heads  # H
        self.attention_head_size = attention.attention_head_size  # D
        hidden_size = attention.all_head_size
        # W^Q, W^K and W^V stacked: one (3E x E) layer whose output is [Q K V] side by side, made where
        # (and in the dtype) the layer's weights are: a GPU model's fused layer is on its GPU.
        weight = attention.query.weight
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            self.query_key_value.weight.copy_(
                torch.cat([attention.query.weight, attention.key.weight, attention.value.weight])
            )
            self.query_key_value.bias.copy_(torch.cat([attention.query.bias, attention.key.bias, attention.value.bias]))
        # The rest is BERT's own modules: output projection, feed-forward, the two layer norms.
        self.attention_output = layer.attention.output
        self.intermediate = layer.intermediate
        self.output = layer.output

    def attend(self, mixed: Tensor, index: Tensor | None, key_mask: Tensor | None, shape: tuple[int, int]) -> Tensor:
        """Attention of each sequence over its own tokens: packed ``[Q K V]`` ``(U, 3E)`` -> context ``(U, E)``.

        ``index`` and ``key_mask`` are a :class:`PackedBatch`'s; ``shape`` is ``(B, T)``, the padded layout's.
        """
        heads, head_size = self.num_attention_heads, self.attention_head_size
        size, length = shape
        if index is not None:
            # Scatter the real tokens into the padded layout (padding rows stay 0; their keys are masked).
            padded = mixed.new_zeros(size * length, mixed.shape[-1])
            mixed = padded.index_copy_(0, index, mixed)
        # (B*T, 3E) -> (B, T, 3, H, D) -> three (B, H, T, D) views: Q, K and V.
        query, key, value = mixed.view(size, length, 3, heads, head_size).permute(2, 0, 3, 1, 4).unbind(0)
        # softmax(Q K^T / sqrt(D) + M) V in PyTorch's fused kernel, padding keys masked.
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=key_mask)  # (B, H, T, D)
        # Merge the heads, (B, H, T, D) -> (B, T, H * D), one row per position ...
        context = context.transpose(1, 2).reshape(size * length, heads * head_size)
        # ... and keep the real tokens' rows.
        return context if index is None else context.index_select(0, index)

    @staticmethod
    def add_and_norm(
        residual: Tensor, hidden: Tensor, dense: nn.Linear, norm: nn.LayerNorm, out: Tensor | None = None
    ) -> Tensor:
        r"""BERT's post-LN sub-layer end, :math:`\operatorname{LayerNorm}(x + h W^\top + b)`, in fewer passes.

        :class:`~literate_transformer.models.bert.BertSelfOutput` writes the
        product with its bias into a new tensor, then adds the residual in
        another pass.  Here the residual and the bias are summed first, and
        the matrix multiply accumulates into that sum in place
        (:func:`torch.addmm` with ``out`` its own input): one pass over the
        ``(U, E)`` states fewer, the same sum up to rounding.  ``out``, a
        ``(U, E)`` buffer to hold the sum (a :class:`Workspace`'s ``summed``);
        ``None``: a new tensor.
        """
        # x + b, in the buffer the multiply then adds h W^T into.
        summed = torch.add(residual, dense.bias, out=out)  # (U, E)
        summed = torch.addmm(summed, hidden, dense.weight.t(), out=summed)  # (U, E)
        return norm(summed)

    def forward(
        self,
        hidden_states: Tensor,
        index: Tensor | None,
        key_mask: Tensor | None,
        shape: tuple[int, int],
        workspace: Workspace | None = None,
    ) -> Tensor:
        """One layer on the packed tokens, ``(U, E) -> (U, E)`` (the other arguments: see :meth:`attend`).

        ``workspace``: the buffers to write over (:meth:`FastBertModel.encode_packed` passes one set to every
        layer where oneDNN does not apply); ``None``: oneDNN's fused steps where :func:`onednn_applies`,
        else buffers of this layer's own.
        """
        if workspace is None and onednn_applies(hidden_states):
            return self.forward_fused(hidden_states, index, key_mask, shape)
        if workspace is None:
            workspace = Workspace.for_layer(hidden_states, self)
        elif not isinstance(workspace, Workspace):
            raise TypeError(f"workspace must be a Workspace or None, got {type(workspace).__name__}")
        else:
            workspace.check_fits(hidden_states, self)
        # 1) [Q K V] for every real token in one matrix multiply, (U, E) -> (U, 3E).
        projection = self.query_key_value
        mixed = torch.addmm(projection.bias, hidden_states, projection.weight.t(), out=workspace.mixed)
        # 2) Attention within each sequence.
        context = self.attend(mixed, index, key_mask, shape)  # (U, E)
        # 3) W^O, residual, layer norm (post-LN, BERT's weights).
        output = self.attention_output
        attention_output = self.add_and_norm(
            hidden_states, context, output.dense, output.LayerNorm, out=workspace.summed
        )  # (U, E)
        # 4) The feed-forward layer, act(a W_1 + b_1) W_2 + b_2, residual and layer norm, on real tokens only.
        dense = self.intermediate.dense
        intermediate_output = torch.addmm(dense.bias, attention_output, dense.weight.t(), out=workspace.intermediate)
        intermediate_output = activate_in_place(self.intermediate.intermediate_act_fn, intermediate_output)  # (U, F)
        output = self.output
        return self.add_and_norm(
            attention_output, intermediate_output, output.dense, output.LayerNorm, workspace.summed
        )

    def forward_fused(
        self, hidden_states: Tensor, index: Tensor | None, key_mask: Tensor | None, shape: tuple[int, int]
    ) -> Tensor:
        """The same layer with oneDNN's post-ops (point 5): each multiply adds its bias, GELU or residual itself."""
        # 1) [Q K V] = X W^T + b, one multiply, (U, E) -> (U, 3E).
        mixed = linear(hidden_states, self.query_key_value)
        # 2) Attention within each sequence.
        context = self.attend(mixed, index, key_mask, shape)  # (U, E)
        # 3) LayerNorm(x + c W^O^T + b^O): the multiply adds the residual.
        output = self.attention_output
        attention_output = output.LayerNorm(linear_add(context, output.dense, hidden_states))  # (U, E)
        # 4) GELU(a W_1^T + b_1) in one step, then LayerNorm(a + h W_2^T + b_2).
        intermediate_output = linear_activation(
            attention_output, self.intermediate.dense, self.intermediate.intermediate_act_fn
        )  # (U, F)
        output = self.output
        layer_output = output.LayerNorm(linear_add(intermediate_output, output.dense, attention_output))  # (U, E)
        return layer_output


def _check_fast_inputs(model: FastBertModel, args: Arguments) -> None:
    config = model.config
    input_ids = check_input_ids(args.input_ids, config.vocab_size, config.max_position_embeddings)
    batch_size, length = input_ids.shape
    if args.attention_mask is not None and args.lengths is not None:
        raise ValueError("give the real tokens either as attention_mask or as lengths, not both")
    if args.attention_mask is not None:
        mask = check_attention_mask(args.attention_mask, batch_size, length)
        # The fast path packs each row's real tokens, which must come first: right padding, one real token at least.
        if mask.device.type == "cpu" and (mask[:, :1].eq(0).any() or (mask[:, 1:] > mask[:, :-1]).any()):
            raise ValueError(
                "attention_mask must be right-padded (each row's real tokens first, then 0s) with one real token "
                "at least: the fast path packs the real tokens of each row"
            )
    if args.token_type_ids is not None:
        check_token_type_ids(args.token_type_ids, (batch_size, length), config.type_vocab_size)
    if args.lengths is not None:
        lengths = args.lengths
        if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
            raise TypeError(
                f"lengths must be a sequence of ints (the tokenizer's lengths), got {type(lengths).__name__}"
            )
        if len(lengths) != batch_size:
            raise ValueError(f"lengths must have one entry per sequence ({batch_size}), got {len(lengths)}")
        for value in lengths:
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= length:
                raise ValueError(f"lengths must be ints in [1, {length}] (real tokens per row), got {value!r}")


class FastBertModel(nn.Module):
    """BERT's encoder on packed tokens with fused projections: what :func:`~literate_transformer.fast.encode.encode` runs.

    Build it with :meth:`from_bert` (or :meth:`from_pretrained`); it keeps
    the ``BertModel``'s embeddings and layers and adds one fused
    ``query_key_value`` projection per layer.

    Args:
        bert: The :class:`~literate_transformer.models.bert.BertModel` whose weights to use.
    """

    def __init__(self, bert: BertModel) -> None:
        super().__init__()
        self.config = bert.config
        self.embeddings = bert.embeddings
        self.layer = nn.ModuleList([FusedBertLayer(layer) for layer in bert.encoder.layer])
        self._encode_packed = self.encode_packed

    @classmethod
    def from_bert(cls, bert: BertModel) -> FastBertModel:
        """The fast model of a ``BertModel`` (in evaluation mode: the fast path is for inference)."""
        if not isinstance(bert, BertModel):
            raise TypeError(f"bert must be a literate_transformer BertModel, got {type(bert).__name__}")
        if bert.config.is_decoder:
            raise ValueError(
                "bert must be an encoder (config.is_decoder=False): the fast path does not mask the future"
            )
        if type(bert).attention_masks is not MaskHook.attention_masks:
            raise ValueError(
                f"bert ({type(bert).__name__}) builds masks of its own (attention_masks): the fast path hides "
                "the padding keys alone, as BERT's mask hook does"
            )
        return cls(bert).eval()

    @classmethod
    def from_pretrained(cls, path_or_name: Any = None) -> FastBertModel:
        """The fast model of a checkpoint (by default the offline one)."""
        return cls.from_bert(BertModel.from_pretrained(path_or_name))

    def compile(self, dynamic: bool = True, backend: str = "inductor") -> FastBertModel:
        """Run the packed forward through :func:`torch.compile` (inference only; the first calls compile).

        Inductor's "freezing" treats the weights as constants (inference
        only: change no weight afterwards) and folds what depends on them
        alone.  The matrix multiplies stay the layers' own (oneDNN's
        operators of point 5 on a ``float32`` CPU, ``addmm`` elsewhere;
        ``weight_prepack`` off: on this package's CPU benchmark, re-laid-out
        weights were no faster), with the steps between them fused into
        fewer kernels.

        Args:
            dynamic: One compilation for every batch size and length (what a corpus of sentences needs);
                ``False`` compiles each new shape anew, the best code a fixed shape can get.
            backend: :func:`torch.compile`'s backend.  The options above are Inductor's; another backend
                (``"aot_eager"``: the same tracing, no generated kernels) gets none.

        Returns:
            The model itself.

        Raises:
            TypeError: if ``backend`` is not a string.
            ValueError: for a backend :func:`torch.compiler.list_backends` does not know.
        """
        if not isinstance(backend, str):
            raise TypeError(f"backend must be a string such as 'inductor', got {type(backend).__name__}")
        known = torch.compiler.list_backends(exclude_tags=())
        if backend not in known:
            raise ValueError(f"backend must be one of {known}, got {backend!r}")
        options = {"freezing": True, "cpp.weight_prepack": False} if backend == "inductor" else None
        self._encode_packed = torch.compile(self.encode_packed, dynamic=dynamic, backend=backend, options=options)
        return self

    def encode_packed(
        self,
        input_ids: Tensor,
        position_ids: Tensor,
        index: Tensor | None,
        key_mask: Tensor | None,
        shape: Tensor,
        token_type_ids: Tensor | None = None,
    ) -> Tensor:
        """The encoder on packed tokens, tensors in and out (what :meth:`compile` compiles).

        Args:
            input_ids: ``(U,)`` the real tokens' ids, sequence after sequence.
            position_ids: ``(U,)`` their positions within their sequences.
            index: ``(U,)`` their flat positions in the padded layout, or ``None``.
            key_mask: ``(B, 1, 1, T)`` additive mask of the padding keys, or ``None``.
            shape: an empty ``(B, T, 0)`` tensor: the padded layout's sizes, carried as a shape so that a
                compiled forward treats them as sizes, not as constants.
            token_type_ids: ``(U,)`` their segments, or ``None``: every token is segment 0.

        Returns:
            ``(U, E)``, the last layer's hidden states of the real tokens.
        """
        embeddings = self.embeddings
        # The segment vectors: one lookup each, or segment 0's vector for every token.
        segments = (
            embeddings.token_type_embeddings.weight[0]
            if token_type_ids is None
            else embeddings.token_type_embeddings(token_type_ids)
        )
        # BERT's three lookups on the real tokens only, summed in its order.
        summed = (
            embeddings.word_embeddings(input_ids) + segments + embeddings.position_embeddings(position_ids)
        )  # (U, E)
        hidden_states = embeddings.LayerNorm(summed)  # (U, E)
        # oneDNN's fused steps where they apply (point 5); else the layers' large intermediates, allocated
        # once for all of them (point 4).
        workspace = None if onednn_applies(hidden_states) else Workspace.for_layer(hidden_states, self.layer[0])
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, index, key_mask, shape.shape[:2], workspace)  # (U, E)
        return hidden_states

    @torch.inference_mode()
    def forward_packed(self, input_ids: Tensor, batch: PackedBatch, token_type_ids: Tensor | None = None) -> Tensor:
        """The encoder on a packed batch, compiled if :meth:`compile` was called (under inference mode).

        Args:
            input_ids: ``(U,)`` the real tokens' ids, sequence after sequence.
            batch: Their lengths and layout.
            token_type_ids: ``(U,)`` their segments, or ``None`` (all 0).

        Returns:
            ``(U, E)``, the last layer's hidden states of the real tokens.
        """
        return self._encode_packed(
            input_ids, batch.position_ids, batch.index, batch.key_mask, batch.shape, token_type_ids
        )

    @torch.inference_mode()
    @validate_with(_check_fast_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        *,
        lengths: Sequence[int] | None = None,
    ) -> Tensor:
        """Encode right-padded token ids (under inference mode): what a tokenizer returns for ``BertModel``.

        ``fast(**tokenizer(sentences, padding=True, return_tensors="pt"))``
        computes the last hidden states of ``BertModel`` on the same call.
        The real tokens' count of each row is the mask's row sum, read back
        to the host once (a wait for the device, on a GPU); ``lengths=``, the
        same counts as plain ints, spares that read.

        Args:
            input_ids: ``(B, T)`` token ids, each row's real tokens first (right padding).
            attention_mask: ``(B, T)``, 1 on the real tokens; ``None`` (and no ``lengths``): every token is real.
            token_type_ids: ``(B, T)`` segments, as ``BertModel`` takes them; ``None``: all segment 0.
            lengths: Each row's number of real tokens as plain ints, instead of ``attention_mask``.

        Returns:
            ``(B, T, E)``: the real tokens' last hidden states, zeros at padding positions.

        Raises:
            ValueError: for both a mask and lengths, a mask that is not right-padded, segments outside the
                config's, and ids, masks and lengths of the wrong shape or range.
        """
        size, length = input_ids.shape
        if attention_mask is not None:
            lengths = attention_mask.sum(dim=1).tolist()
        lengths = [length] * size if lengths is None else lengths
        batch = PackedBatch(lengths, length, input_ids.device, self.embeddings.word_embeddings.weight.dtype)
        # The real tokens, end to end (all of them when nothing is padded), and their segments.
        flat_ids = input_ids.reshape(-1)
        flat_types = None if token_type_ids is None else token_type_ids.reshape(-1)
        if batch.index is not None:
            flat_ids = flat_ids.index_select(0, batch.index)
            flat_types = None if flat_types is None else flat_types.index_select(0, batch.index)
        packed = self.forward_packed(flat_ids, batch, flat_types)  # (U, E)
        if batch.index is None:
            return packed.view(size, length, -1)
        # Back to the padded layout, zeros where the padding was.
        padded = packed.new_zeros(size * length, packed.shape[-1])
        return padded.index_copy_(0, batch.index, packed).view(size, length, -1)
