r"""BigBird-Pegasus: a pre-LN BART whose encoder reads long inputs by blocks, each block only a few others.

Full attention compares every query with every key: :math:`S^2` scores,
too many for a document of thousands of tokens.  BigBird (Zaheer et al.,
2020, *Big Bird: Transformers for Longer Sequences*, §2) cuts the sequence
into blocks of ``block_size`` tokens and lets each block of queries read
only a few blocks of keys:

* **global** blocks: the first and the last block read every key, and
  every block reads them;
* a **window**: each block reads the block before it, itself and the block
  after it;
* **random** blocks: ``num_random_blocks`` more blocks per block.

A middle block then reads :math:`G = 5 + r` blocks of :math:`Z` keys,
whatever the length, and the encoder's cost grows linearly with :math:`S`.
BigBird-Pegasus is Pegasus (a pre-LN encoder-decoder of BART's family) with
that encoder; the decoder, which writes short summaries, keeps full
attention.  This file subclasses BART's modules
(:mod:`~literate_transformer.models.bart`) and writes what BigBird-Pegasus
changes:

=============================================  ======================================================
BigBird-Pegasus                                here
=============================================  ======================================================
block-sparse self-attention in the encoder     :func:`block_sparse_layout` (which blocks each block
                                               reads) and :meth:`BigBirdPegasusBlockSparseAttention.block_sparse`
                                               (gather the blocks, attend within them)
full attention for short inputs                :meth:`BigBirdPegasusEncoder.uses_block_sparse`
pre-LN layers                                  ``norm_first = True`` on BART's layers
a norm after each stack, named                 :meth:`BigBirdPegasusStack.final_norm` (BART's name, used at the
``layernorm_embedding``                        other end of the stack)
no layer norm on the embeddings                :meth:`BigBirdPegasusStack.embed`
learned positions without BART's offset        ``LearnedPositionalEmbedding(..., offset=0)``
no biases in the attention (``use_bias``)      ``BartAttention(..., bias=config.use_bias)``, ``query``/
                                               ``key``/``value``/``output`` likewise
token vectors times :math:`\sqrt{E}`           ``scale_embedding=True``
=============================================  ======================================================

What ``transformers`` does in evaluation
----------------------------------------
HuggingFace's ``BigBirdPegasusBlockSparseAttention`` draws its random
blocks with NumPy only while training (``if self.training:
np.random.seed(seed)``, the seed being the layer's index); in evaluation its
helpers return ``np.zeros``: every "random" block is **block 0**, the first
global block, read again.  A middle block's softmax then counts the first
block's keys :math:`1 + r` times, as if their scores were raised by
:math:`\log(1 + r)`.  This file reproduces that in evaluation (tests
require the same outputs to ``1e-5``), and draws genuinely random blocks in
training, among the blocks a row does not read already, once per call for
every layer and head.  (HuggingFace's training blocks differ: NumPy
reseeded with the layer's index at every call, so the same blocks at every
step; its training outputs are not compared.)

Short inputs and block sizes
----------------------------
Block-sparse attention needs enough blocks for its pattern:
``transformers`` falls back to full attention when the input has at most
:math:`(5 + 2r)\,Z` tokens (its encoder's ``forward``), and so does
:meth:`BigBirdPegasusEncoder.uses_block_sparse`, per call.
(``transformers`` switches its encoder's modules to full attention for
good, ``set_attention_type("original_full")``, so a long input after a
short one is read in full there; the package decides for each call.  In
``transformers`` 4.x that full attention is also handed no padding mask:
it reads a config field the switch does not change.)
A long input whose length is not a multiple of ``block_size`` is padded
with padding tokens (masked) to the next multiple, and cut back after the
encoder, as ``transformers`` does; the attention layer itself refuses
hidden states that do not split into blocks, with a ``ValueError``.

>>> import torch
>>> from transformers import BigBirdPegasusConfig
>>> config = BigBirdPegasusConfig(vocab_size=40, d_model=24, encoder_layers=2, decoder_layers=1,
...                               encoder_attention_heads=3, decoder_attention_heads=2, encoder_ffn_dim=32,
...                               decoder_ffn_dim=40, max_position_embeddings=64, block_size=4, num_random_blocks=1)
>>> model = BigBirdPegasusForConditionalGeneration(config).eval()
>>> model.encoder.uses_block_sparse(28), model.encoder.uses_block_sparse(29)   # (5 + 2 * 1) * 4 = 28
(False, True)
>>> blocks, read = block_sparse_layout(num_blocks=8, random_blocks=torch.zeros(6, 1, dtype=torch.long))
>>> blocks[0].tolist(), read[0].tolist()   # block 1: global 0, window 0 1 2, global 7, random 0
([0, 0, 1, 2, 7, 0], [True, False, True, True, True, True])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ..core.kernels import scaled_dot_product_attention
from ..core.masks import build_attention_mask, masked_fill_scores, to_additive
from ..core.outputs import AttentionOutput, ModelOutput
from ..core.validation import Arguments, check_hidden_states, check_token_inputs, validate_with
from ..parts.attention import Attention
from ..parts.heads import merge_heads, split_heads
from ..parts.positions import LearnedPositionalEmbedding
from ..parts.stack import run_layers
from . import bart
from .registry import register

__all__ = [
    "block_sparse_layout",
    "BlockSparseMask",
    "BigBirdPegasusBlockSparseAttention",
    "BigBirdPegasusEncoderAttention",
    "BigBirdPegasusEncoderLayer",
    "BigBirdPegasusDecoderLayer",
    "BigBirdPegasusStack",
    "BigBirdPegasusEncoder",
    "BigBirdPegasusDecoder",
    "BigBirdPegasusModel",
    "BigBirdPegasusForConditionalGeneration",
]


# ---------------------------------------------------------------------------
# The block-sparse pattern
# ---------------------------------------------------------------------------
def block_sparse_layout(num_blocks: int, random_blocks: Tensor) -> tuple[Tensor, Tensor]:
    """Which key blocks each middle query block reads: global, window and random, and which of them it counts.

    Query blocks ``1 .. N-2`` (the first and last are global: they read
    everything) each read ``G = 5 + r`` key blocks, in this order: the first
    block, the window (the block before, itself, the block after), the last
    block, then its ``r`` random blocks.  Next to a global block the window
    repeats it (block 1's window starts with block 0); such a repeat is not
    read twice: ``read`` is ``False`` there.  A random block is read as
    drawn, repeats included (in evaluation ``transformers`` draws block 0).

    Args:
        num_blocks: ``N``, the blocks of the (padded) sequence, at least 3.
        random_blocks: ``(N - 2, r)`` block indices, a row per middle query block.

    Returns:
        ``(blocks, read)``, both ``(N - 2, G)``: key block indices, and whether each is read.
    """
    device = random_blocks.device
    # The middle query blocks, 1 .. N-2.
    rows = torch.arange(1, num_blocks - 1, device=device)
    # Global: every block reads the first and the last block.
    first, last = torch.zeros_like(rows)[:, None], torch.full_like(rows, num_blocks - 1)[:, None]
    # The window: the block before, the block itself, the block after.
    window = rows[:, None] + torch.arange(-1, 2, device=device)
    blocks = torch.cat([first, window, last, random_blocks], dim=1)
    # A window block that is a global block is read once, as the global one.
    read = torch.ones_like(blocks, dtype=torch.bool)
    read[:, 1:4] = (window != 0) & (window != num_blocks - 1)
    return blocks, read


class BlockSparseMask(NamedTuple):
    """What the block-sparse encoder hands each layer in place of a ``(B, 1, S, S)`` mask: built once per call.

    ``M = N - 2`` middle query blocks each read ``G`` key blocks of ``Z`` tokens.
    """

    #: The padding of the keys, ``(B, 1, 1, S)``, additive (0 for a real key, the dtype's minimum for padding).
    key_padding: Tensor
    #: The key blocks each middle query block reads, ``(M, G)`` (:func:`block_sparse_layout`).
    blocks: Tensor
    #: Which of them it reads, ``(M, G)`` (``False`` where a window block repeats a global one).
    read: Tensor
    #: The mask over the gathered keys, ``(B, 1, M, 1, G, Z)``, additive (padding, and the repeats not read).
    block_mask: Tensor
    #: The tokens per block, ``Z``.
    block_size: int

    def to_dense(self) -> Tensor:
        """How many times each query reads each key, ``(S, S)`` integers, padding aside: the pattern, drawn.

        A global row reads every key once; a middle row reads its blocks, a
        block drawn again as a random block counting again.
        """
        num_blocks = len(self.blocks) + 2
        counts = self.blocks.new_zeros(num_blocks, num_blocks)
        # The global rows read every block once.
        counts[[0, -1]] = 1
        # A middle row adds one for every block it reads (a repeat adds again).
        counts[1:-1].scatter_add_(1, self.blocks, self.read.long())
        # Every block of the (N, N) pattern is Z x Z tokens.
        return counts.repeat_interleave(self.block_size, 0).repeat_interleave(self.block_size, 1)


def _check_block_sparse_inputs(attention: BigBirdPegasusBlockSparseAttention, args: Arguments) -> None:
    length = check_hidden_states(args.hidden_states, attention.query.in_features).shape[1]
    mask = args.attention_mask
    if isinstance(mask, BlockSparseMask) and (
        length % mask.block_size or length // mask.block_size != len(mask.blocks) + 2
    ):
        raise ValueError(
            f"hidden_states has {length} positions, which do not split into the {len(mask.blocks) + 2} blocks of "
            f"block_size={mask.block_size} of the attention_mask: block-sparse attention reads whole blocks "
            "(BigBirdPegasusEncoder pads its input to a multiple of block_size)"
        )


class BigBirdPegasusBlockSparseAttention(Attention):
    """The encoder's attention between projections: block-sparse with a :class:`BlockSparseMask`, else full.

    HuggingFace's names: ``query``, ``key``, ``value`` (biases with
    ``use_bias``); its :math:`W^O` is one module up,
    :class:`BigBirdPegasusEncoderAttention`'s ``output``.

    Args:
        config: The BigBird-Pegasus config (``encoder_attention_heads``, ``use_bias``).
    """

    def __init__(self, config: Any) -> None:
        num_heads = config.encoder_attention_heads
        super().__init__(config, num_heads, config.d_model // num_heads, dropout=config.attention_dropout)
        self.query = nn.Linear(config.d_model, config.d_model, bias=config.use_bias)
        self.key = nn.Linear(config.d_model, config.d_model, bias=config.use_bias)
        self.value = nn.Linear(config.d_model, config.d_model, bias=config.use_bias)

    def project_query(self, hidden_states: Tensor) -> Tensor:
        """Every head's queries, ``query``."""
        return self.query(hidden_states)

    def project_key_value(self, states: Tensor) -> tuple[Tensor, Tensor]:
        """Every head's keys and values, ``key`` and ``value``."""
        return self.key(states), self.value(states)

    def output(self, context: Tensor) -> Tensor:
        """The heads side by side, as they are: :math:`W^O` is the enclosing module's ``output``."""
        return context

    @validate_with(_check_block_sparse_inputs)
    def forward(  # type: ignore[override]
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | BlockSparseMask | None = None,
        output_attentions: bool = False,
    ) -> AttentionOutput:
        """Block-sparse attention when the mask is a :class:`BlockSparseMask`, full attention otherwise.

        Args:
            hidden_states: ``(B, S, E)``; with a :class:`BlockSparseMask`, ``S`` a multiple of its block size.
            attention_mask: A :class:`BlockSparseMask`, or a ready full mask (a short input's).
            output_attentions: Return the probabilities ``(B, H, S, S)`` (block-sparse: zero outside the blocks
                read, a block read twice summed).

        Returns:
            An :class:`~literate_transformer.core.outputs.AttentionOutput` (before ``output``).

        Raises:
            ValueError: for hidden states that do not split into the mask's blocks.
        """
        if not isinstance(attention_mask, BlockSparseMask):
            # A short input (or attention_type="original_full"): the shared full attention.
            return super().forward(hidden_states, attention_mask=attention_mask, output_attentions=output_attentions)
        query, key, value = (split_heads(states, self.num_heads) for states in self.project(hidden_states))
        context, attention_probs = self.block_sparse(query, key, value, attention_mask, output_attentions)
        return AttentionOutput(self.output(merge_heads(context)), attention_probs)

    def block_sparse(
        self, query: Tensor, key: Tensor, value: Tensor, mask: BlockSparseMask, output_attentions: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        r"""Each block of queries attends to its blocks of keys only; the first and last block to all keys.

        Args:
            query: ``(B, H, S, D)``.
            key: ``(B, H, S, D)``.
            value: ``(B, H, S, D)``.
            mask: The :class:`BlockSparseMask` of the call.
            output_attentions: Also return the ``(B, H, S, S)`` probabilities.

        Returns:
            ``(context (B, H, S, D), probabilities or None)``.
        """
        width = mask.block_size
        scale = self.head_size**-0.5
        # 1) Queries, keys and values cut into N blocks of Z tokens.
        blocked_query = query.unflatten(2, (-1, width))  # (B, H, N, Z, D)
        blocked_key = key.unflatten(2, (-1, width))  # (B, H, N, Z, D)
        blocked_value = value.unflatten(2, (-1, width))  # (B, H, N, Z, D)
        # 2) The global blocks, first and last: their queries read every key, as in full attention.
        global_query = blocked_query[:, :, [0, -1]].flatten(2, 3)
        global_context, global_probs = scaled_dot_product_attention(
            global_query, key, value, mask.key_padding, scale=scale
        )
        global_context = global_context.unflatten(2, (2, width))  # (B, H, 2, Z, D)
        # 3) Every other block of queries gathers the G key blocks it reads (global, window, random) ...
        middle_query = blocked_query[:, :, 1:-1]  # (B, H, M, Z, D)
        key_blocks = blocked_key[:, :, mask.blocks]  # (B, H, M, G, Z, D)
        value_blocks = blocked_value[:, :, mask.blocks]  # (B, H, M, G, Z, D)
        # ... scores its Z queries against those G * Z keys, padding and repeats masked ...
        scores = torch.einsum("bhmqd,bhmgkd->bhmqgk", middle_query, key_blocks) * scale  # (B, H, M, Z, G, Z)
        scores = masked_fill_scores(scores, mask.block_mask)
        # ... and takes one softmax over all of them (a random block drawn twice counts twice).
        probs = torch.softmax(scores.flatten(-2), dim=-1).view_as(scores)  # (B, H, M, Z, G, Z)
        middle_context = torch.einsum("bhmqgk,bhmgkd->bhmqd", probs, value_blocks)  # (B, H, M, Z, D)
        # 4) The blocks back in order, then the tokens.
        blocks = [global_context[:, :, :1], middle_context, global_context[:, :, 1:]]
        context = torch.cat(blocks, dim=2).flatten(2, 3)  # (B, H, S, D)
        if not output_attentions:
            return context, None
        # The probabilities as one (S, S) matrix: each gathered block's weights added where its keys sit.
        batch_size, num_heads, middle = probs.shape[:3]
        middle_probs = probs.new_zeros(batch_size, num_heads, middle, width, middle + 2, width)
        middle_probs.scatter_add_(4, mask.blocks[None, None, :, None, :, None].expand_as(probs), probs)
        first, last = global_probs.split(width, dim=2)
        return context, torch.cat([first, middle_probs.flatten(2, 3).flatten(-2), last], dim=2)


class BigBirdPegasusEncoderAttention(nn.Module):
    """The encoder's attention sub-layer: ``self`` (:class:`BigBirdPegasusBlockSparseAttention`) and ``output``.

    Args:
        config: The BigBird-Pegasus config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        # HuggingFace's name for the attention between the projections: "self".
        self.self = BigBirdPegasusBlockSparseAttention(config)
        self.output = nn.Linear(config.d_model, config.d_model, bias=config.use_bias)

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | BlockSparseMask | None = None,
        output_attentions: bool = False,
    ) -> AttentionOutput:
        """``(B, S, E) -> (B, S, E)``: the attention, then :math:`W^O`."""
        attention = self.self(hidden_states, attention_mask, output_attentions)
        return attention._replace(hidden_states=self.output(attention.hidden_states))


class BigBirdPegasusEncoderLayer(bart.BartEncoderLayer):
    """BART's encoder layer, pre-LN, with the block-sparse attention sub-layer.

    (``transformers``' layer drops nothing out between ``fc1`` and ``fc2``; nor does this one.)
    """

    norm_first = True

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.activation_dropout = nn.Identity()

    def new_attention(self, config: Any, num_heads: int) -> nn.Module:
        """:class:`BigBirdPegasusEncoderAttention`."""
        return BigBirdPegasusEncoderAttention(config)


class BigBirdPegasusDecoderLayer(bart.BartDecoderLayer):
    """BART's decoder layer, pre-LN, its attention projections biased only with ``use_bias``."""

    norm_first = True

    def new_attention(self, config: Any, num_heads: int) -> nn.Module:
        """:class:`~literate_transformer.models.bart.BartAttention` with ``bias=config.use_bias``."""
        return bart.BartAttention(config, config.d_model, num_heads, config.attention_dropout, bias=config.use_bias)


class BigBirdPegasusStack(bart.BartStack):
    """What BigBird-Pegasus changes in both of BART's stacks: positions, the embeddings' sum, a norm at the end."""

    def position_embedding(self, config: Any) -> nn.Module:
        """Learned positions, position :math:`p` in row :math:`p` (no offset)."""
        return LearnedPositionalEmbedding(config.max_position_embeddings, config.d_model)

    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """Token vectors (times :math:`\\sqrt{E}`) plus positions, then dropout; no layer norm: ``(B, T, E)``."""
        embeddings = self.embed_tokens(input_ids) + self.embed_positions(position_ids)  # (B, T, E)
        return self.dropout(embeddings)

    def final_norm(self, hidden_states: Tensor) -> Tensor:
        """The norm after the last layer, which HuggingFace names ``layernorm_embedding`` (BART's name, moved)."""
        return self.layernorm_embedding(hidden_states)


def _check_encoder_inputs(encoder: BigBirdPegasusEncoder, args: Arguments) -> None:
    check_token_inputs(args, encoder.config)


class BigBirdPegasusEncoder(BigBirdPegasusStack, bart.BartEncoder):
    """The block-sparse encoder: BART's, with :class:`BigBirdPegasusStack`'s changes and its own ``forward``."""

    layer_class, num_layers = BigBirdPegasusEncoderLayer, "encoder_layers"

    def uses_block_sparse(self, length: int) -> bool:
        """Whether an input of ``length`` tokens is read block-sparse: only with more than ``(5 + 2r) Z`` tokens.

        (Fewer leave too few blocks for two global, three window and
        ``r`` random blocks per row, with ``transformers``' margin of ``r``
        more: it falls back to full attention there, and so does this encoder.)
        """
        config = self.config
        return (
            config.attention_type == "block_sparse" and length > (5 + 2 * config.num_random_blocks) * config.block_size
        )

    def random_blocks(self, num_blocks: int, device: torch.device) -> Tensor:
        """``(N - 2, r)``: each middle query block's random key blocks.

        In evaluation, block 0, as ``transformers`` computes it (see the module's
        text); in training, ``r`` distinct blocks among those the row does not
        read already (not global, not in its window).
        """
        rows, r = num_blocks - 2, self.config.num_random_blocks
        if not self.training:
            return torch.zeros(rows, r, dtype=torch.long, device=device)
        blocks = torch.arange(num_blocks, device=device)
        middle = torch.arange(1, num_blocks - 1, device=device)[:, None]
        allowed = (blocks > 0) & (blocks < num_blocks - 1) & ((blocks - middle).abs() > 1)
        return torch.multinomial(allowed.float(), r) if r else blocks.new_zeros(rows, 0)

    def block_sparse_mask(self, attention_mask: Tensor, dtype: torch.dtype) -> BlockSparseMask:
        """The :class:`BlockSparseMask` of a ``(B, S)`` padding mask, ``S`` a multiple of ``block_size``: built once."""
        width = self.config.block_size
        num_blocks = attention_mask.shape[1] // width
        blocks, read = block_sparse_layout(num_blocks, self.random_blocks(num_blocks, attention_mask.device))
        # The gathered keys a middle block may read: real tokens, in a slot it counts.
        real_keys = attention_mask.bool().unflatten(1, (num_blocks, width))[:, blocks]  # (B, M, G, Z)
        readable = real_keys & read[None, :, :, None]
        block_mask = to_additive(readable[:, None, :, None], dtype)  # (B, 1, M, 1, G, Z)
        key_padding = build_attention_mask(attention_mask, query_length=1, dtype=dtype)  # (B, 1, 1, S)
        return BlockSparseMask(key_padding, blocks, read, block_mask, width)

    @validate_with(_check_encoder_inputs)
    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, output_attentions: bool = False
    ) -> ModelOutput:
        """Encode the source ``(B, S)``: block-sparse above the threshold, full below it; ``(B, S, E)``."""
        batch_size, length = input_ids.shape
        embedding_output = self.embed(input_ids, self.position_ids(input_ids, None))  # (B, S, E)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if self.uses_block_sparse(length):
            # Pad to whole blocks with padding tokens' vectors (no positions), masked out, as transformers does.
            padding = -length % self.config.block_size
            padding_ids = input_ids.new_full((batch_size, padding), self.config.pad_token_id)
            hidden_states = torch.cat([embedding_output, self.embed_tokens(padding_ids)], dim=1)
            attention_mask = nn.functional.pad(attention_mask, (0, padding))
            mask = self.block_sparse_mask(attention_mask, embedding_output.dtype)
        else:
            hidden_states = embedding_output
            mask = self.attention_masks(attention_mask, length, 0, embedding_output.dtype)["full"]
        hidden_states, layer_outputs = run_layers(self.layers, hidden_states, mask, output_attentions=output_attentions)
        # The final norm, and the padding added for the blocks cut off again.
        hidden_states = self.final_norm(hidden_states)[:, :length]  # (B, S, E)
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states=False)


class BigBirdPegasusDecoder(BigBirdPegasusStack, bart.BartDecoder):
    """The decoder: BART's with full attention, pre-LN layers and :class:`BigBirdPegasusStack`'s changes."""

    layer_class, num_layers = BigBirdPegasusDecoderLayer, "decoder_layers"


#: The encoder's attention types of ``BigBirdPegasusConfig.attention_type``.
ATTENTION_TYPES = ("block_sparse", "original_full")


class BigBirdPegasusModel(bart.BartModel):
    """BigBird-Pegasus's encoder and decoder around one token table, ``shared``; no language-model head.

    Args:
        config: A ``transformers`` :class:`~transformers.BigBirdPegasusConfig`.
    """

    config_type, config_name = "bigbird_pegasus", "BigBirdPegasusConfig"
    encoder_class, decoder_class = BigBirdPegasusEncoder, BigBirdPegasusDecoder
    hf_name = "BigBird-Pegasus"

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """BART's, a known ``attention_type``, a ``block_size`` of at least 1 and no negative ``num_random_blocks``."""
        super().check_own_config(config)
        if config.attention_type not in ATTENTION_TYPES:
            raise ValueError(f"attention_type must be one of {ATTENTION_TYPES}, got {config.attention_type!r}")
        if config.block_size < 1 or config.num_random_blocks < 0:
            raise ValueError(
                f"block_size must be positive and num_random_blocks non-negative, got {config.block_size} "
                f"and {config.num_random_blocks}"
            )


class BigBirdPegasusForConditionalGeneration(bart.BartForConditionalGeneration):
    """BigBird-Pegasus with BART's head: the shared table plus ``final_logits_bias``.

    Args:
        config: A ``transformers`` :class:`~transformers.BigBirdPegasusConfig`.
    """

    model_class = BigBirdPegasusModel

    @classmethod
    def map_hf_state_dict(
        cls, state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor], tied: bool = False
    ) -> dict[str, Tensor]:
        """BART's (:meth:`~literate_transformer.models.bart.BartPreTrainedModel.map_hf_state_dict`), and a missing
        ``final_logits_bias`` is zeros (HuggingFace's class lists it among the keys it may miss on loading, and
        keeps its zeros then).

        Raises:
            ValueError: listing every missing, unexpected and mis-shaped key, or naming a copy of the embedding
                table that differs from the others.
        """
        state_dict = dict(state_dict)
        if "final_logits_bias" in expected and "final_logits_bias" not in state_dict:
            state_dict["final_logits_bias"] = torch.zeros_like(expected["final_logits_bias"])
        return super().map_hf_state_dict(state_dict, expected, tied)


register(BigBirdPegasusModel, BigBirdPegasusForConditionalGeneration)


#: The checks of a BigBird-Pegasus config, by the name they had before they were declared (:class:`BigBirdPegasusModel`).
check_bigbird_pegasus_config = BigBirdPegasusModel.check_config
