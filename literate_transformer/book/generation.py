r"""Generation: writing a target one token at a time, with a key/value cache.

A trained :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`
gives, for every target prefix :math:`y_{\le t}` and source :math:`x`, a
distribution over the next token.  *Greedy decoding* takes the most likely
token, appends it, and asks again:

.. math::

    y_0 = \texttt{[BOS]},\qquad
    y_{t+1} = \operatorname*{arg\,max}_{v}\; p(v \mid y_{\le t}, x),

until ``eos_token_id`` appears or ``max_new_tokens`` tokens are written.

Why a cache
-----------
Step :math:`t` needs the decoder's output at the *last* position only.  In a
causal decoder, the hidden states of positions :math:`0 \dots t-1` do not
depend on position :math:`t` (that is what the mask guarantees), so they are
the same at every step, and so are the self-attention keys and values
computed from them.  Recomputing the whole prefix (``use_cache=False``)
costs :math:`O(t^2)` attention work per step; with a cache the decoder is
fed only the newest token and

* **self-attention** appends that token's key and value to the cached ones of
  each layer (:class:`~literate_transformer.book.decoder.LayerCache`), so the one
  new query attends over all :math:`t + 1` positions;
* **cross-attention** keys and values depend only on the encoder output,
  which never changes: they are projected once, at the first step, and
  reused;
* the **encoder** runs once, before the loop.

The new token's position embedding must be :math:`t`, not 0: the decoder
reads the number of cached positions and passes it to the embeddings as
``past_length``, and the causal mask for one query over :math:`t+1` keys is a
row of ``True`` (:func:`~literate_transformer.core.masks.causal_mask` with
``query_length=1``).

Both paths compute the same numbers: a test runs them side by side and
requires identical tokens and next-token logits equal to ``1e-5`` at every
step.  HuggingFace's ``generate()`` does the same with its ``DynamicCache``
(self-attention) and ``EncoderDecoderCache`` (cross-attention).

>>> from literate_transformer import TransformerConfig
>>> from literate_transformer.book.decoder import EncoderDecoderTransformer
>>> config = TransformerConfig(vocab_size=12, hidden_size=16, num_hidden_layers=1,
...                            num_attention_heads=2, intermediate_size=32)
>>> _ = torch.manual_seed(0)
>>> model = EncoderDecoderTransformer(config)
>>> source = torch.tensor([[4, 5, 6]])
>>> cached = greedy_generate(model, source, max_new_tokens=5, bos_token_id=1)
>>> cached.sequences.shape  # [BOS] + 5 new tokens
torch.Size([1, 6])
>>> torch.equal(cached.sequences, greedy_generate(model, source, 5, bos_token_id=1, use_cache=False).sequences)
True
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..core.validation import check_attention_mask, check_input_ids, check_token_id, validate_with

__all__ = ["GenerationOutput", "greedy_generate"]


class GenerationOutput(NamedTuple):
    """What :func:`greedy_generate` returns."""

    #: ``(B, 1 + N)`` token ids: the start token, then the ``N`` generated ones.
    sequences: Tensor
    #: ``(B, N, V)`` next-token scores of every step (those of sequences that had already finished included).
    logits: Tensor


def _check_generate_inputs(
    model: object,
    input_ids: object,
    max_new_tokens: object,
    bos_token_id: object,
    eos_token_id: object = None,
    attention_mask: object = None,
    use_cache: bool = True,
) -> None:
    if not all(hasattr(model, name) for name in ("config", "encode", "decode")):
        raise TypeError(
            f"model must be an encoder-decoder model with config, encode() and decode() "
            f"(e.g. EncoderDecoderTransformer), got {type(model).__name__}"
        )
    config = model.config
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool):
        raise TypeError(f"max_new_tokens must be an int, got {type(max_new_tokens).__name__}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    # The start token sits at position 0 and the last token fed to the decoder
    # at position max_new_tokens - 1 (the final token is written, never read).
    if max_new_tokens > config.max_position_embeddings:
        raise ValueError(
            f"max_new_tokens={max_new_tokens} would feed the decoder positions up to {max_new_tokens - 1}, "
            f"beyond max_position_embeddings={config.max_position_embeddings}"
        )
    input_ids = check_input_ids(input_ids, config.vocab_size, config.max_position_embeddings, name="input_ids")
    if attention_mask is not None:
        check_attention_mask(attention_mask, *input_ids.shape, name="attention_mask")
    check_token_id(bos_token_id, "bos_token_id", config.vocab_size)
    if eos_token_id is not None:
        check_token_id(eos_token_id, "eos_token_id", config.vocab_size)


@torch.no_grad()
@validate_with(_check_generate_inputs)
def greedy_generate(
    model: torch.nn.Module,
    input_ids: Tensor,
    max_new_tokens: int,
    bos_token_id: int,
    eos_token_id: int | None = None,
    attention_mask: Tensor | None = None,
    use_cache: bool = True,
) -> GenerationOutput:
    """Greedy decoding with an encoder-decoder model.

    The model is switched to evaluation mode (no dropout) for the call and
    restored afterwards; no gradients are recorded.

    Args:
        model: An :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`
            (anything with its ``config``, ``encode`` and ``decode``).
        input_ids: Source token ids ``(B, S)``.
        max_new_tokens: How many tokens to write at most (at least 1).
        bos_token_id: The start token every target begins with.
        eos_token_id: Stop a sequence when it writes this token; sequences
            that have finished are filled with ``config.pad_token_id`` until
            all have finished.  ``None``: always write ``max_new_tokens``.
        attention_mask: The source's ``(B, S)`` padding mask.
        use_cache: Feed one token per step and reuse cached keys/values
            (``True``), or recompute the whole prefix every step (``False``).

    Returns:
        A :class:`GenerationOutput`: the sequences ``(B, 1 + N)`` (start
        token first, ``N <= max_new_tokens``) and the logits of every step.

    Raises:
        ValueError: if ``max_new_tokens`` is not positive or would need
            positions beyond ``max_position_embeddings``, a token id is out
            of the vocabulary, or ``attention_mask`` does not match
            ``input_ids``.
        TypeError: if ``model`` is not an encoder-decoder model or an
            argument has the wrong type.
    """
    config = model.config
    batch_size = input_ids.shape[0]
    pad_token_id = config.pad_token_id if config.pad_token_id is not None else eos_token_id

    was_training = model.training
    model.eval()
    try:
        # 1) Encode the source once; every step reuses its output.
        encoder_hidden_states = model.encode(input_ids, attention_mask).last_hidden_state
        # 2) Every target starts with the start token.
        sequences = torch.full((batch_size, 1), bos_token_id, dtype=torch.long, device=input_ids.device)
        finished = torch.zeros(batch_size, dtype=torch.bool, device=input_ids.device)
        past_key_values = None
        step_logits = []
        for _ in range(max_new_tokens):
            # 3) With a cache only the newest token is new to the decoder;
            #    without one the whole prefix is decoded again.
            decoder_input_ids = sequences[:, -1:] if use_cache else sequences
            output = model.decode(
                decoder_input_ids,
                encoder_hidden_states,
                attention_mask,
                past_key_values=past_key_values,
                use_cache=use_cache,
            )
            # The cache now also holds the newest token's keys and values.
            past_key_values = output.past_key_values
            # 4) Scores for the token after the last position.
            next_logits = output.logits[:, -1, :]
            step_logits.append(next_logits)
            # 5) Greedy choice: the most likely token.
            next_tokens = next_logits.argmax(dim=-1)
            if eos_token_id is not None:
                # A finished sequence only pads; a sequence finishes on EOS.
                next_tokens = next_tokens.masked_fill(finished, pad_token_id)
                finished = finished | (next_tokens == eos_token_id)
            sequences = torch.cat([sequences, next_tokens[:, None]], dim=1)
            if eos_token_id is not None and bool(finished.all()):
                break
    finally:
        model.train(was_training)
    return GenerationOutput(sequences, torch.stack(step_logits, dim=1))
