r"""Heads: a fused projection split into attention heads and back, and the language-model head.

Attention heads
---------------
Every model under HuggingFace's names projects the queries (keys, values)
of all :math:`H` heads with one ``E -> H D`` layer, and splits the result
into heads: ``(B, T, H D) -> (B, T, H, D) -> (B, H, T, D)``
(HuggingFace's BERT calls it ``transpose_for_scores``).  :func:`split_heads`
does that, :func:`merge_heads` the way back after attention.  Models with
*grouped-query attention* keep fewer key and value heads (:math:`K`) than
query heads; :func:`repeat_kv` repeats each of them :math:`H / K` times so
that every query head has its own copy to attend over.

The language-model head
-----------------------
A model that writes text scores every vocabulary entry at every position,
:math:`\text{logits} = h\, W^\top`.  Most decoders *tie* :math:`W` to the
token-embedding table (Press and Wolf, 2017; "Attention Is All You Need"
§3.4): a token's score is the dot product of the last hidden state with that
token's own embedding, and the model stores the table once.
:func:`tie_weights` ties a head to a table.

Trained as a causal language model, the head's scores at position
:math:`t` predict the token at :math:`t + 1`: the loss is the mean
cross-entropy of every next token (:func:`causal_lm_loss`),

.. math::

    \mathcal{L} = -\frac{1}{N} \sum_{b,\,t} \log \operatorname{softmax}(\text{logits}_{b,t})[y_{b,t+1}],

over the :math:`N` labels that are not ``-100`` (padding, or a prompt the
loss should not score).

Every decoder-only language model (GPT's ``...LMHeadModel``, Llama's
``...ForCausalLM``) is its stack and that head: :class:`LanguageModelHead`
builds the head once and turns the stack's output into scores and a loss;
its forward takes the stack's arguments, in the stack's own (HuggingFace's)
order, and ``labels``, so a family writes no forward of its own, and what it
refuses is its stack's check and the labels'.

>>> import torch
>>> x = torch.randn(2, 5, 12)                        # (B, T, H*D) with H = 3, D = 4
>>> split_heads(x, 3).shape                          # (B, H, T, D)
torch.Size([2, 3, 5, 4])
>>> torch.equal(merge_heads(split_heads(x, 3)), x)
True
>>> repeat_kv(torch.randn(2, 1, 5, 4), 3).shape       # one key/value head shared by 3 query heads
torch.Size([2, 3, 5, 4])
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.outputs import ModelOutput
from ..core.validation import Arguments, check_labels, validate_with

__all__ = [
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "extend_cache",
    "tie_weights",
    "IGNORE_INDEX",
    "causal_lm_loss",
    "LanguageModelHead",
]

#: The label that the loss ignores (PyTorch's and HuggingFace's convention).
IGNORE_INDEX = -100


def split_heads(projected: Tensor, num_heads: int) -> Tensor:
    """``(B, T, H * D) -> (B, H, T, D)``: the features of each head, heads before positions.

    Args:
        projected: The output of a fused projection, ``(B, T, H * D)``.
        num_heads: ``H``.

    Returns:
        ``(B, H, T, D)``.
    """
    batch_size, length, _ = projected.shape
    # View the last dimension as H heads of D features, then move the heads before the positions.
    return projected.view(batch_size, length, num_heads, -1).transpose(1, 2)


def merge_heads(context: Tensor) -> Tensor:
    """``(B, H, T, D) -> (B, T, H * D)``: the heads side by side again (the concatenation).

    Args:
        context: Every head's attended values, ``(B, H, T, D)``.

    Returns:
        ``(B, T, H * D)``.
    """
    batch_size, num_heads, length, head_size = context.shape
    return context.transpose(1, 2).reshape(batch_size, length, num_heads * head_size)


def repeat_kv(states: Tensor, repeats: int) -> Tensor:
    """``(B, K, S, D) -> (B, K * repeats, S, D)``: each key/value head repeated for its group of query heads.

    Head ``k`` becomes heads ``k * repeats`` to ``(k + 1) * repeats - 1``,
    the order of HuggingFace's ``repeat_kv`` (query head ``h`` reads
    key/value head ``h // repeats``).

    Args:
        states: Keys or values of ``K`` heads, ``(B, K, S, D)``.
        repeats: ``H / K``, the query heads per key/value head.

    Returns:
        ``(B, H, S, D)``.
    """
    if repeats == 1:
        return states
    batch_size, kv_heads, length, head_size = states.shape
    expanded = states[:, :, None].expand(batch_size, kv_heads, repeats, length, head_size)
    return expanded.reshape(batch_size, kv_heads * repeats, length, head_size)


def extend_cache(key: Tensor, value: Tensor, past_key_value: tuple[Tensor, Tensor] | None) -> tuple[Tensor, Tensor]:
    """The keys and values to attend over: the cached ones of earlier positions, then the new ones.

    Args:
        key: The new positions' keys, ``(B, K, T, D)``.
        value: Their values, ``(B, K, T, D)``.
        past_key_value: The cached ``(keys, values)``, each ``(B, K, S - T, D)``, or ``None``.

    Returns:
        ``(keys, values)``, each ``(B, K, S, D)`` (what a cache keeps for the next step).
    """
    if past_key_value is None:
        return key, value
    past_key, past_value = past_key_value
    # Append along the positions: S = S_past + T.
    return torch.cat([past_key, key], dim=2), torch.cat([past_value, value], dim=2)


def tie_weights(head: nn.Linear, embedding: nn.Embedding) -> nn.Linear:
    """Make ``head`` score with the token table itself: one tensor, two uses (and stored once).

    Args:
        head: The ``E -> V`` language-model head.
        embedding: The ``V x E`` token-embedding table.

    Returns:
        ``head``, whose ``weight`` *is* ``embedding.weight``.

    Raises:
        ValueError: if their shapes differ.
    """
    if head.weight.shape != embedding.weight.shape:
        raise ValueError(
            f"head.weight {tuple(head.weight.shape)} and embedding.weight {tuple(embedding.weight.shape)} "
            "must have the same shape (V, E) to be tied"
        )
    head.weight = embedding.weight
    return head


def causal_lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """The mean cross-entropy of each position's scores against the *next* token.

    Args:
        logits: ``(B, T, V)`` next-token scores.
        labels: ``(B, T)`` token ids (usually the input ids themselves), ``-100`` where nothing is to be learned.

    Returns:
        The scalar loss (computed in float32), as ``transformers``' ``labels=`` computes it.
    """
    # Position t predicts token t + 1: drop the last scores and the first labels.
    next_token_logits = logits[:, :-1].float()
    next_tokens = labels[:, 1:]
    return F.cross_entropy(next_token_logits.flatten(0, 1), next_tokens.flatten(), ignore_index=IGNORE_INDEX)


def _check_language_model_inputs(model: LanguageModelHead, args: Arguments) -> None:
    # The stack's own check (its nearest checked forward's), on the arguments handed on to it, then the labels.
    stack = getattr(model, model.stack_name)
    forward = next(c.forward for c in type(stack).__mro__ if hasattr(c.__dict__.get("forward"), "check_call"))
    forward.check_call(stack, args.input_ids, *args.args, **args.kwargs)
    if args.labels is not None:
        check_labels(args.labels, args.input_ids.shape, model.config.vocab_size)
    keep = args.logits_to_keep
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
        raise ValueError(f"logits_to_keep must be a non-negative int (0: every position), got {keep!r}")
    if keep and args.labels is not None:
        raise ValueError("labels score every position: pass logits_to_keep=0 with them")


class LanguageModelHead:
    """A decoder-only language model's head, written once: ``lm_head``, tied as the config says, the scores, the loss.

    A family's language model mixes it in (with ``nn.Module``) and declares
    its stack's class and the name HuggingFace keeps it under; it builds the
    stack and :meth:`add_lm_head`.  Its :meth:`forward` runs the stack on the
    stack's own arguments and hands the output to :meth:`score_next_tokens`.
    """

    #: The stack a family's language model builds, from the config (a family names its own).
    model_class: type[nn.Module]
    #: The attribute that holds the stack, under HuggingFace's name (GPT's ``transformer``, Llama's ``model``).
    stack_name = "model"
    #: Whether ``lm_head`` adds a bias to the scores (CTRL's and GPT-J's do).
    lm_head_bias = False

    def __init__(self, config: Any) -> None:
        super().__init__()
        stack = self.model_class(config)
        setattr(self, self.stack_name, stack)
        self.config = stack.config
        self.add_lm_head(stack, bias=self.lm_head_bias)

    def add_lm_head(self, stack: nn.Module, bias: bool = False) -> None:
        """``lm_head``, ``E -> V``, whose weight *is* the stack's token table when ``config.tie_word_embeddings`` says so.

        Args:
            stack: The model's stack (its ``config``, and its token table, ``get_input_embeddings()``).
            bias: A bias per token on the scores (CTRL's, GPT-J's heads).
        """
        config = stack.config
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=bias)
        if config.tie_word_embeddings:
            # Tied: the next token's scores are dot products with the token embeddings themselves.
            tie_weights(self.lm_head, stack.get_input_embeddings())

    @validate_with(_check_language_model_inputs)
    def forward(
        self, input_ids: Tensor, *args: Any, labels: Tensor | None = None, logits_to_keep: int = 0, **kwargs: Any
    ) -> ModelOutput:
        """Next-token scores for every position (or the last ``logits_to_keep``): the stack's forward, then the head.

        Args:
            input_ids: ``(B, T)`` token ids (with a cache, only the new ones).
            *args: The stack's other arguments, in its forward's order, which is HuggingFace's for the family
                (GPT's ``attention_mask``; GPT-2's ``past_key_values, attention_mask``; Llama's
                ``attention_mask, position_ids, past_key_values``).
            labels: ``(B, T)`` token ids to score the next-token predictions against (usually ``input_ids``,
                ``-100`` where the loss ignores them), as ``transformers``' ``labels=``.
            logits_to_keep: Score only the last this many positions (``transformers``' name; ``0``: every
                position).  Decoding wants the last position's scores alone: the head, a ``V x E`` multiply per
                position, then runs on one.
            **kwargs: The stack's arguments by name (``use_cache``, ``output_attentions``, ...).

        Returns:
            The stack's :class:`~literate_transformer.core.outputs.ModelOutput` with ``logits`` ``(B, T, V)``, and
            ``loss`` with ``labels`` (:meth:`score_next_tokens`).

        Raises:
            ValueError, TypeError: what the stack's forward refuses, labels not of the ids' shape or outside
                the vocabulary, and a ``logits_to_keep`` that is not a non-negative int or comes with labels;
                checked before anything runs.
        """
        output = getattr(self, self.stack_name)(input_ids, *args, **kwargs)
        if not logits_to_keep:
            return self.score_next_tokens(output, labels)
        # The head on the last positions only (the stack's output keeps every position).
        last = replace(output, last_hidden_state=output.last_hidden_state[:, -logits_to_keep:])
        output.logits = self.score_next_tokens(last, None).logits
        return output

    def score_next_tokens(self, output: ModelOutput, labels: Tensor | None) -> ModelOutput:
        """The stack's ``output`` with ``logits`` ``(B, T, V)``, and ``loss`` against ``labels`` (:func:`causal_lm_loss`)."""
        # Scores over the vocabulary: the last hidden state against every token's row of the head.
        output.logits = self.lm_head(output.last_hidden_state)
        if labels is not None:
            # Each position's scores against the token after it.
            output.loss = causal_lm_loss(output.logits, labels)
        return output
