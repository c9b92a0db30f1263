r"""Generation: writing a target one token at a time, with a key/value cache.

A trained model gives, for every prefix, a distribution over the next token.
*Greedy decoding* takes the most likely token, appends it, and asks again:

.. math::

    y_{t+1} = \operatorname*{arg\,max}_{v}\; p(v \mid y_{\le t}, x),

until ``eos_token_id`` appears or ``max_new_tokens`` tokens are written.  One
loop, :func:`greedy_generate`, serves both kinds of model that write:

* an **encoder-decoder** model (the 2017 transformer,
  :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`;
  BART) reads a source :math:`x` and writes a *new* sequence, which starts
  with a start token (``bos_token_id``; BART's ``decoder_start_token_id``):
  the result is the start token followed by the new tokens;
* a **decoder-only** model (GPT-2) has no source: the prompt *is* the
  beginning of the sequence it continues, and the result is the prompt
  followed by the new tokens.

These are the conventions of HuggingFace's ``generate()``, and tests require
the same token ids as ``generate(do_sample=False, num_beams=1)`` for GPT-2
and BART.

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
  each layer (:class:`~literate_transformer.core.outputs.LayerCache`), so the one
  new query attends over all :math:`t + 1` positions;
* **cross-attention** keys and values depend only on the encoder output,
  which never changes: they are projected once, at the first step, and
  reused;
* the **encoder** runs once, before the loop; a decoder-only model reads its
  whole prompt at the first step instead.

The new token's position embedding must be :math:`t`, not 0: the decoder
reads the number of cached positions and passes it to the embeddings as
``past_length``, and the causal mask for one query over :math:`t+1` keys is a
row of ``True`` (:func:`~literate_transformer.core.masks.causal_mask` with
``query_length=1``).

Padded prompts
--------------
Prompts of different lengths are padded on the *left*, so that every row's
last token is a real one and the next token is appended right after it.  A
left-padded row's first real token would then sit at position 3, say, where
the unpadded prompt has it at 0; so, as HuggingFace's ``generate()`` does,
positions are counted over the real tokens only.  The models do that
themselves, by one rule (:func:`~literate_transformer.parts.positions.position_ids`),
from the attention mask, which grows by one real position per step.  A
batch padded on the right is refused rather than computed: its short rows
would end in padding, and be continued after it.

What kind of model it is
------------------------
The loop asks the model: a model that writes declares
``is_encoder_decoder`` (HuggingFace keeps the same flag in its configs).  An
encoder-decoder model has ``encode()`` and ``decode()``; a decoder-only model
is called with HuggingFace's arguments (``attention_mask``,
``past_key_values``, ``use_cache``) and returns ``logits``.

Both paths compute the same numbers: a test runs them side by side and
requires identical tokens and next-token logits equal to ``1e-5`` at every
step.  HuggingFace's ``generate()`` does the same with its ``DynamicCache``
(self-attention) and ``EncoderDecoderCache`` (cross-attention).

One loop, any choice of token
-----------------------------
Greedy decoding is the loop of :func:`generate_step_by_step` with one rule
for the next token, :func:`most_likely_token`.  The loop itself (encode
once, feed the newest token with the cache, stop on ``eos_token_id``, pad
what has finished) does not care how the token is chosen: sampling
(:mod:`~literate_transformer.book.decoding`) runs the same loop with a rule
that draws the token at random, and beam search asks for the same next-token
scores, one model call per step (:func:`next_token_logits`).

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

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.outputs import LayerCache
from ..core.validation import (
    Arguments,
    check_attention_mask,
    check_fits_in_memory,
    check_input_ids,
    check_token_id,
    checks_values,
    validate_with,
    value_error,
)

__all__ = [
    "GenerationOutput",
    "greedy_generate",
    "generate_step_by_step",
    "most_likely_token",
    "next_token_logits",
    "position_limit",
    "check_eos_token_id",
    "check_generate_inputs",
    "is_encoder_decoder",
    "is_decoder_only",
    "DEFAULT_MAX_NEW_TOKENS",
    "new_tokens_for",
    "generation_bytes",
]

#: How many tokens ``generate()`` writes when neither ``max_new_tokens`` nor ``max_length`` is given.
DEFAULT_MAX_NEW_TOKENS = 20


class GenerationOutput(NamedTuple):
    """What :func:`greedy_generate` (and every decoding of the loop) returns."""

    #: ``(B, P + N)`` token ids: the start token (``P = 1``, encoder-decoder) or the prompt (``P`` its length,
    #: decoder-only), then the ``N`` generated ones.
    sequences: Tensor
    #: ``(B, N, V)`` next-token scores of every step (those of sequences that had already finished included).
    logits: Tensor


def is_encoder_decoder(model: object) -> bool:
    """Whether ``model`` encodes a source and decodes a target: it says so (``is_encoder_decoder = True``)."""
    return isinstance(model, torch.nn.Module) and getattr(model, "is_encoder_decoder", None) is True


def is_decoder_only(model: object) -> bool:
    """Whether ``model`` is a language model that continues its input: it says so (``is_encoder_decoder = False``),
    as :class:`~literate_transformer.models.gpt2.GPT2LMHeadModel` does."""
    return isinstance(model, torch.nn.Module) and getattr(model, "is_encoder_decoder", None) is False


def position_limit(model: Any) -> int | None:
    """How many positions a model can read: the length of its table of positions, or ``None`` without one.

    A model with a table (learned positions, a tabulated sinusoid) has
    ``config.max_position_embeddings`` rows and cannot read a position past
    them.  A model whose positions are not looked up in a table (T5's
    relative bias, Llama's rotations) says so with ``position_limit = None``,
    or has no such field at all.
    """
    if hasattr(model, "position_limit"):
        return model.position_limit
    return getattr(model.config, "max_position_embeddings", None)


def check_generate_inputs(args: Arguments) -> None:
    """What every decoding of a model checks: the model's kind, the ids, the mask, the length, the special ids."""
    model, max_new_tokens = args.model, args.max_new_tokens
    encoder_decoder = is_encoder_decoder(model)
    if not encoder_decoder and not is_decoder_only(model):
        raise TypeError(
            "model must be an encoder-decoder model (is_encoder_decoder = True, with encode() and decode(), e.g. "
            "EncoderDecoderTransformer, BartForConditionalGeneration) or a decoder-only language model "
            f"(is_encoder_decoder = False, e.g. GPT2LMHeadModel), got {type(model).__name__}"
        )
    config = model.config
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool):
        raise TypeError(f"max_new_tokens must be an int, got {type(max_new_tokens).__name__}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    max_positions = position_limit(model)
    input_ids = check_input_ids(args.input_ids, config.vocab_size, max_positions, name="input_ids")
    if input_ids.shape[0] == 0:
        raise ValueError(
            f"input_ids must hold at least one sequence, got an empty batch of shape {tuple(input_ids.shape)}"
        )
    if args.attention_mask is not None:
        mask = check_attention_mask(args.attention_mask, *input_ids.shape, name="attention_mask")
        # A decoder-only model writes after each row's last position: a row whose real tokens are followed by
        # padding would be continued after the padding (a row of padding alone, an empty prompt, is not padded).
        if not encoder_decoder and checks_values(mask):
            real = mask.bool()
            right_padded = ~real[:, -1] & real.any(dim=1)
            if bool(right_padded.any()):
                raise value_error(
                    f"attention_mask: row {int(right_padded.nonzero()[0, 0])} of the prompts ends in padding after "
                    "its tokens; a decoder-only model continues each prompt after its last position, so prompts "
                    "must be padded on the left (a tokenizer's padding_side='left'): right padding is refused, "
                    "not computed"
                )
    # The decoder reads positions 0 .. P + N - 2, where P is what it starts from (the start token, or the
    # prompt): the last token is written, never read.
    start_length = 1 if encoder_decoder else input_ids.shape[1]
    if start_length + max_new_tokens > torch.iinfo(torch.long).max:
        raise ValueError(
            f"max_new_tokens={max_new_tokens} is beyond any sequence: after the {start_length} tokens it starts "
            "from, its positions would pass 2**63 - 1, the largest int64"
        )
    if max_positions is not None and start_length + max_new_tokens - 1 > max_positions:
        raise ValueError(
            f"max_new_tokens={max_new_tokens} would feed the decoder positions up to "
            f"{start_length + max_new_tokens - 2}"
            + ("" if encoder_decoder else f" (after a prompt of {start_length} tokens)")
            + f", beyond max_position_embeddings={max_positions}"
        )
    # Nothing else bounds the length (rotary positions have no table): what the decoding keeps must fit.
    beams = getattr(args, "num_beams", 1)
    beam_search = isinstance(beams, int) and not isinstance(beams, bool) and beams > 1
    rows, length = input_ids.shape[0] * (beams if beam_search else 1), start_length + max_new_tokens
    check_fits_in_memory(
        generation_bytes(model, rows, length, max_new_tokens, keeps_scores=not beam_search),
        f"max_new_tokens={max_new_tokens} ({length:,} positions for each of {rows} rows: their key/value cache"
        + ("" if beam_search else " and the scores of every step")
        + ")",
        input_ids.device,
    )
    if encoder_decoder:
        if args.bos_token_id is None:
            raise ValueError("bos_token_id is required: an encoder-decoder model's target starts with it")
        check_token_id(args.bos_token_id, "bos_token_id", config.vocab_size)
    elif args.bos_token_id is not None:
        raise ValueError("bos_token_id must be None for a decoder-only model: its prompt is where it starts")
    check_eos_token_id(args.eos_token_id, config.vocab_size)
    if getattr(args, "forced_bos_token_id", None) is not None:
        check_token_id(args.forced_bos_token_id, "forced_bos_token_id", config.vocab_size)
    if not callable(getattr(args, "choose_next_token", most_likely_token)):
        raise TypeError(
            f"choose_next_token must be a function of the (B, V) scores, got {type(args.choose_next_token).__name__}"
        )


def generation_bytes(model: torch.nn.Module, rows: int, length: int, new_tokens: int, keeps_scores: bool) -> int:
    r"""What a decoding keeps at its longest: every layer's keys and values for ``length`` positions of ``rows`` rows
    (the cache, static or growing; recomputed without one), and the ``(B, N, V)`` scores of every step where it
    returns them (greedy decoding and sampling do, beam search does not).

    .. math::

        2 \cdot L \cdot \text{rows} \cdot K \cdot S \cdot D \cdot \text{bytes}
        \; + \; \text{rows} \cdot N \cdot V \cdot \text{bytes}

    Args:
        model: The model (its config's sizes, its parameters' dtype).
        rows: ``B``, times the beams of beam search.
        length: ``S``: the prompt's (or the start token's) and the new tokens' positions.
        new_tokens: ``N``.
        keeps_scores: Whether the scores of every step are kept.

    Returns:
        The bytes.
    """
    config = model.config
    parameter = next(model.parameters(), None)
    itemsize = parameter.element_size() if parameter is not None else 4
    heads = getattr(config, "num_attention_heads", None) or 1
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_size = getattr(config, "head_dim", None) or getattr(config, "hidden_size", 0) // heads
    layers = getattr(config, "num_hidden_layers", None) or 0
    cache = 2 * layers * rows * kv_heads * length * head_size * itemsize
    return cache + (rows * new_tokens * config.vocab_size * itemsize if keeps_scores else 0)


def new_tokens_for(model: torch.nn.Module, input_ids: Tensor, max_new_tokens: object, max_length: object) -> object:
    """How many tokens to write: ``max_new_tokens``, or what ``transformers``' ``max_length`` leaves of the sequence.

    ``max_length`` is the length of the whole sequence ``generate()`` returns:
    the prompt and the new tokens for a decoder-only model, the start token
    and the new tokens for an encoder-decoder model.  As in ``transformers``,
    ``max_new_tokens`` wins when both are given; with neither,
    :data:`DEFAULT_MAX_NEW_TOKENS` are written.

    Raises:
        TypeError: for a ``max_length`` that is not an int.
        ValueError: for a ``max_length`` that leaves no room for a new token.
    """
    if max_new_tokens is not None or max_length is None:
        return DEFAULT_MAX_NEW_TOKENS if max_new_tokens is None else max_new_tokens
    if not isinstance(max_length, int) or isinstance(max_length, bool):
        raise TypeError(f"max_length must be an int, got {type(max_length).__name__}")
    start = 1 if is_encoder_decoder(model) else (input_ids.shape[-1] if isinstance(input_ids, Tensor) else 0)
    if max_length <= start:
        what = "the start token" if is_encoder_decoder(model) else f"the prompt's {start} tokens"
        raise ValueError(
            f"max_length={max_length} leaves no room for a new token after {what} (max_length counts the whole "
            "sequence, as in transformers; max_new_tokens counts only the new tokens)"
        )
    return max_length - start


def check_eos_token_id(eos_token_id: object, vocab_size: int) -> list[int] | None:
    """An end-of-sequence id, or a list of them (Llama 3's chat models stop at either of two), as a list."""
    if eos_token_id is None:
        return None
    ids = list(eos_token_id) if isinstance(eos_token_id, (list, tuple)) else [eos_token_id]
    if not ids:
        raise ValueError("eos_token_id must be a token id, a non-empty list of them, or None; got an empty list")
    for index, token_id in enumerate(ids):
        check_token_id(token_id, "eos_token_id" if len(ids) == 1 else f"eos_token_id[{index}]", vocab_size)
    return ids


def most_likely_token(next_token_logits: Tensor) -> Tensor:
    """Greedy choice: each row's highest-scoring token, ``(B, V) -> (B,)``."""
    return next_token_logits.argmax(dim=-1)


def next_token_logits(
    model: torch.nn.Module,
    new_ids: Tensor,
    past_key_values: tuple[LayerCache, ...] | None,
    use_cache: bool,
    *,
    attention_mask: Tensor | None = None,
    encoder_hidden_states: Tensor | None = None,
    encoder_attention_mask: Tensor | None = None,
) -> tuple[Tensor, tuple[LayerCache, ...] | None]:
    """One step of either kind of model: the scores of the token after the last position, and the grown cache.

    Args:
        model: An encoder-decoder model (then ``encoder_hidden_states`` is its encoder's output) or a
            decoder-only one.
        new_ids: The ids the decoder has not read yet (with a cache, the newest one; else all of them).
        past_key_values: The cache of the earlier steps (``None`` at the first step, or without a cache).
        use_cache: Return the cache grown by ``new_ids``' keys and values.
        attention_mask: A decoder-only model's ``(B, past + T)`` mask over the whole sequence so far.
        encoder_hidden_states: The encoder's output ``(B, S, E)`` (encoder-decoder only).
        encoder_attention_mask: The source's ``(B, S)`` padding mask (encoder-decoder only).

    Returns:
        ``(logits (B, V), past_key_values or None)``.
    """
    if is_encoder_decoder(model):
        output = model.decode(
            new_ids, encoder_hidden_states, encoder_attention_mask, past_key_values=past_key_values, use_cache=use_cache
        )
    else:
        # The model counts positions over the real tokens of the mask: a left-padded row starts at 0 too.
        output = model(new_ids, attention_mask=attention_mask, past_key_values=past_key_values, use_cache=use_cache)
    # Scores for the token after the last position; the cache now also holds the newest token's keys and values.
    return output.logits[:, -1, :], output.past_key_values


@torch.no_grad()
@validate_with(check_generate_inputs)
def generate_step_by_step(
    model: torch.nn.Module,
    input_ids: Tensor,
    max_new_tokens: int,
    bos_token_id: int | None = None,
    eos_token_id: int | list[int] | None = None,
    attention_mask: Tensor | None = None,
    use_cache: bool = True,
    forced_bos_token_id: int | None = None,
    *,
    choose_next_token: Callable[[Tensor], Tensor] = most_likely_token,
) -> GenerationOutput:
    """Write one token per step with an encoder-decoder or a decoder-only model, each chosen by ``choose_next_token``.

    With the default rule, :func:`most_likely_token`, this is greedy
    decoding (:func:`greedy_generate`); sampling passes a rule that draws.

    The model is switched to evaluation mode (no dropout) for the call and
    restored afterwards; no gradients are recorded.

    Args:
        model: An encoder-decoder model (anything with ``config``,
            ``encode`` and ``decode``, such as
            :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`)
            or a decoder-only language model (see :func:`is_decoder_only`).
        input_ids: The source ``(B, S)`` (encoder-decoder) or the prompt
            ``(B, P)``, left-padded (decoder-only).
        max_new_tokens: How many tokens to write at most (at least 1).
        bos_token_id: The start token every target begins with
            (encoder-decoder only; ``None`` for a decoder-only model).
        eos_token_id: Stop a sequence when it writes this token (or any
            of a list of them); sequences that have finished are filled with
            ``config.pad_token_id`` (or the first ``eos_token_id`` when the
            model has no padding token) until all have finished.  ``None``:
            always write ``max_new_tokens``.
        attention_mask: The ``(B, S)`` or ``(B, P)`` padding mask of ``input_ids``.
        use_cache: Feed one token per step and reuse cached keys/values
            (``True``), or recompute the whole sequence every step (``False``).
        forced_bos_token_id: The first token to write, whatever the model
            scores (HuggingFace's name: a multilingual model's target
            language); ``None`` for none.
        choose_next_token: The rule for the next token: ``(B, V)`` scores in, ``(B,)`` ids out
            (:func:`most_likely_token`, greedy decoding, by default).

    Returns:
        A :class:`GenerationOutput`: the sequences (start token or prompt
        first, then at most ``max_new_tokens`` new ones) and the logits of
        every step.

    Raises:
        ValueError: if ``max_new_tokens`` is not positive, would need
            positions beyond ``max_position_embeddings`` or beyond any int64,
            or a cache and scores larger than the device's memory (naming
            the bytes), ``input_ids`` is an empty batch, a token id is out
            of the vocabulary, ``attention_mask`` does not match
            ``input_ids`` or pads a decoder-only model's prompt on the right
            (refused, not computed: prompts are padded on the left), or
            ``bos_token_id`` is missing (encoder-decoder) or given
            (decoder-only).
        TypeError: if ``model`` is neither kind of model or an argument has
            the wrong type.
    """
    config = model.config
    batch_size = input_ids.shape[0]
    eos_token_ids = check_eos_token_id(eos_token_id, config.vocab_size)
    if eos_token_ids is not None:
        stop_ids = torch.tensor(eos_token_ids, device=input_ids.device)
        pad_token_id = config.pad_token_id if config.pad_token_id is not None else eos_token_ids[0]
    encoder_decoder = is_encoder_decoder(model)

    was_training = model.training
    model.eval()
    try:
        inputs: dict[str, Tensor | None] = {}
        if encoder_decoder:
            # 1) Encode the source once; every step reuses its output.  Every target starts with the start token.
            inputs["encoder_hidden_states"] = model.encode(input_ids, attention_mask).last_hidden_state
            inputs["encoder_attention_mask"] = attention_mask
            sequences = torch.full((batch_size, 1), bos_token_id, dtype=torch.long, device=input_ids.device)
        else:
            # 1) A decoder-only model continues the prompt itself; its mask grows with the sequence.
            sequences = input_ids
            inputs["attention_mask"] = torch.ones_like(input_ids) if attention_mask is None else attention_mask.long()
        finished = torch.zeros(batch_size, dtype=torch.bool, device=input_ids.device)
        past_key_values = None
        step_logits = []
        for _ in range(max_new_tokens):
            # 2) With a cache only the newest token is new to the decoder (the whole prompt at the first
            #    step); without one the whole sequence is decoded again.
            new_ids = sequences if past_key_values is None else sequences[:, -1:]
            # 3) Scores for the token after the last position (and the cache, grown by the new ids).
            next_logits, past_key_values = next_token_logits(model, new_ids, past_key_values, use_cache, **inputs)
            step_logits.append(next_logits)
            # 4) The choice: the rule's token (greedy: the most likely), or, first, the token the caller forces.
            next_tokens = choose_next_token(next_logits)
            if forced_bos_token_id is not None and len(step_logits) == 1:
                next_tokens = torch.full_like(next_tokens, forced_bos_token_id)
            if eos_token_ids is not None:
                # A finished sequence only pads; a sequence finishes on EOS.
                next_tokens = next_tokens.masked_fill(finished, pad_token_id)
                finished = finished | torch.isin(next_tokens, stop_ids)
            sequences = torch.cat([sequences, next_tokens[:, None]], dim=1)
            if not encoder_decoder:
                mask = inputs["attention_mask"]
                inputs["attention_mask"] = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            if eos_token_ids is not None and bool(finished.all()):
                break
    finally:
        model.train(was_training)
    return GenerationOutput(sequences, torch.stack(step_logits, dim=1))


#: Greedy decoding, the most likely token at every step: :func:`generate_step_by_step` with its default rule,
#: :func:`most_likely_token` (``transformers``' ``generate(do_sample=False, num_beams=1)``).
greedy_generate = generate_step_by_step
