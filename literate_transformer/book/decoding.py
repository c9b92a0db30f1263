r"""Decoding strategies: sampling with temperature, top-k and top-p, and beam search.

Greedy decoding (:mod:`~literate_transformer.book.generation`) takes the
most likely token at every step.  It is deterministic, and it can be dull:
a language model's single most likely continuation tends to repeat itself.
The two other ways a reader meets in ``generate()`` change only which token
the loop appends.

Sampling
--------
Draw the next token at random, from the model's distribution
:math:`p(v) = \operatorname{softmax}(z)_v` over the scores :math:`z`, after
up to three filters, applied in this order (HuggingFace's order, in
``GenerationMixin._get_logits_processor``):

1. **temperature** :math:`\tau`: :math:`z / \tau`.  Below 1 the distribution
   sharpens toward the greedy choice, above 1 it flattens toward uniform
   (:func:`apply_temperature`, ``TemperatureLogitsWarper``);
2. **top-k**: keep the :math:`k` highest scores, set the others to
   :math:`-\infty` (Fan et al., 2018, arXiv:1805.04833, §5.4;
   :func:`top_k_filter`, ``TopKLogitsWarper``);
3. **top-p** (nucleus): keep the smallest set of tokens whose probabilities
   add up to at least :math:`p` (Holtzman et al., 2020, "The Curious Case of
   Neural Text Degeneration", arXiv:1904.09751, §3.1; :func:`top_p_filter`,
   ``TopPLogitsWarper``),

and then one draw per sequence, ``torch.multinomial(softmax(z), 1)``.  The
draw is the same call HuggingFace's ``_sample`` makes, on the same random
generator, one row per sequence of the batch, every step (finished
sequences included, whose draw is then replaced by padding): so under the
same ``torch.manual_seed`` the package writes the very token ids of
``generate(do_sample=True, ...)``, which tests require.  ``transformers``'
defaults are the defaults here: temperature 1, ``top_k=50``, ``top_p=1``.

Beam search
-----------
Keep the :math:`k` best partial sequences (*beams*) instead of one.  At
every step each beam is extended by every token, a candidate's score is its
beam's summed log-probability plus the token's, and the best candidates
become the new beams:

.. math::

    \text{score}(y_{1..t}) = \sum_{s \le t} \log p(y_s \mid y_{<s}).

A candidate that ends with ``eos_token_id`` (or reaches ``max_new_tokens``)
is *finished*: it joins a list of the :math:`k` best finished sequences,
ranked by its score divided by its length to the power ``length_penalty``
(1 by default: the mean log-probability per token), and is not extended.
:func:`beam_search` follows HuggingFace's ``_beam_search`` step by step (the
``2k`` candidates kept so that :math:`k` unfinished ones remain even when
:math:`k` end at once; the default stopping rule, ``early_stopping=False``,
which stops when no running beam can beat the worst finished one at its
current length; the padding of a sequence that finished early), and tests
require the ids of ``generate(num_beams=k)``.

:class:`GenerationMixin` gives every decoder-only language model of the
package its ``generate()``, under ``transformers``' argument names.

>>> scores = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
>>> top_k_filter(scores, top_k=2)
tensor([[2., 1., -inf, -inf]])
>>> top_p_filter(scores, top_p=0.6)                 # softmax: 0.61, 0.22, ...: the first alone reaches 0.6
tensor([[2., -inf, -inf, -inf]])
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.outputs import LayerCache
from ..core.validation import Arguments, check_positive_int, validate_with
from ..parts.static_cache import StaticCache, StaticCacheGeneration, static_cache_applies
from .generation import (
    check_eos_token_id,
    check_generate_inputs,
    generate_step_by_step,
    greedy_generate,
    is_encoder_decoder,
    new_tokens_for,
    next_token_logits,
)

__all__ = [
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "filter_scores",
    "sample_next_token",
    "sample_generate",
    "beam_search",
    "generate",
    "GenerationMixin",
]


# ---------------------------------------------------------------------------
# The three filters, and a draw
# ---------------------------------------------------------------------------
def apply_temperature(scores: Tensor, temperature: float) -> Tensor:
    r"""Divide the scores by the temperature :math:`\tau`: sharper below 1, flatter above (``TemperatureLogitsWarper``).

    Args:
        scores: ``(B, V)`` next-token scores.
        temperature: :math:`\tau > 0`.

    Returns:
        ``(B, V)``.
    """
    return scores / temperature


def top_k_filter(scores: Tensor, top_k: int, min_tokens_to_keep: int = 1) -> Tensor:
    """Keep each row's ``top_k`` highest scores; the others become :math:`-\\infty` (``TopKLogitsWarper``).

    Scores tied with the ``k``-th highest are kept too.

    Args:
        scores: ``(B, V)``.
        top_k: How many tokens to keep (at least ``min_tokens_to_keep``, at most ``V``).
        min_tokens_to_keep: Keep at least this many (beam sampling keeps 2).

    Returns:
        ``(B, V)``.
    """
    top_k = min(max(top_k, min_tokens_to_keep), scores.shape[-1])
    # The k-th highest score of each row is the bar to clear.
    kth_highest = torch.topk(scores, top_k)[0][..., -1, None]
    return scores.masked_fill(scores < kth_highest, -float("inf"))


def top_p_filter(scores: Tensor, top_p: float, min_tokens_to_keep: int = 1) -> Tensor:
    r"""Keep the smallest set of most likely tokens whose probabilities add up to ``top_p`` (``TopPLogitsWarper``).

    Sorted from the least likely up, a token is dropped while the
    probability of it and of everything less likely is at most
    :math:`1 - p`: what remains holds at least :math:`p`.

    Args:
        scores: ``(B, V)``.
        top_p: :math:`p \in (0, 1]`.
        min_tokens_to_keep: Keep at least this many.

    Returns:
        ``(B, V)``.
    """
    sorted_scores, sorted_indices = torch.sort(scores, descending=False)
    # The probability mass of each token and of all the tokens less likely than it.
    cumulative_probs = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative_probs <= (1 - top_p)
    # The most likely tokens are never dropped.
    drop[..., -min_tokens_to_keep:] = False
    # Back from the sorted order to the vocabulary's.
    drop = drop.scatter(1, sorted_indices, drop)
    return scores.masked_fill(drop, -float("inf"))


def filter_scores(
    scores: Tensor, temperature: float = 1.0, top_k: int = 50, top_p: float = 1.0, min_tokens_to_keep: int = 1
) -> Tensor:
    """The three filters in HuggingFace's order, each only where it changes something (as ``generate()`` builds them).

    Args:
        scores: ``(B, V)``.
        temperature: Applied unless 1.
        top_k: Applied unless 0 (keep every token).
        top_p: Applied unless 1.
        min_tokens_to_keep: What top-k and top-p always keep.

    Returns:
        ``(B, V)``.
    """
    if temperature != 1.0:
        scores = apply_temperature(scores, temperature)
    if top_k != 0:
        scores = top_k_filter(scores, top_k, min_tokens_to_keep)
    if top_p < 1.0:
        scores = top_p_filter(scores, top_p, min_tokens_to_keep)
    return scores


def sample_next_token(
    next_token_logits: Tensor, temperature: float = 1.0, top_k: int = 50, top_p: float = 1.0
) -> Tensor:
    """One token per row, drawn from the filtered distribution: ``(B, V)`` scores to ``(B,)`` ids.

    The scores are read in float32, as HuggingFace's ``generate()`` reads them, before the filters.
    """
    scores = filter_scores(next_token_logits.float(), temperature, top_k, top_p)
    probabilities = F.softmax(scores, dim=-1)
    # One draw per row from the global random generator: the same call, in the same order, as transformers.
    return torch.multinomial(probabilities, num_samples=1).squeeze(1)


# ---------------------------------------------------------------------------
# Checks of the decoding options (transformers' names)
# ---------------------------------------------------------------------------
def _check_sampling_options(temperature: object, top_k: object, top_p: object) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(
            f"temperature must be a number > 0 (1 leaves the scores as they are; for the most likely token use "
            f"do_sample=False), got {temperature!r}"
        )
    check_positive_int(top_k, "top_k", minimum=0)
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be a number in (0, 1] (1 keeps every token), got {top_p!r}")


def _check_sample_generate_inputs(args: Arguments) -> None:
    check_generate_inputs(args)
    _check_sampling_options(args.temperature, args.top_k, args.top_p)


def _check_beam_options(num_beams: object, length_penalty: object, early_stopping: object) -> None:
    check_positive_int(num_beams, "num_beams")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)):
        raise TypeError(f"length_penalty must be a number, got {length_penalty!r}")
    if early_stopping not in (True, False, "never"):
        raise ValueError(f"early_stopping must be True, False or 'never', got {early_stopping!r}")


@validate_with(_check_sample_generate_inputs)
def sample_generate(
    model: torch.nn.Module,
    input_ids: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int = 50,
    top_p: float = 1.0,
    bos_token_id: int | None = None,
    eos_token_id: int | list[int] | None = None,
    attention_mask: Tensor | None = None,
    use_cache: bool = True,
) -> Tensor:
    """Sampling: the loop of :func:`~literate_transformer.book.generation.generate_step_by_step`, drawing each token.

    Args:
        model: An encoder-decoder or a decoder-only model.
        input_ids: The source ``(B, S)`` or the left-padded prompt ``(B, P)``.
        max_new_tokens: How many tokens to write at most.
        temperature: :math:`\\tau > 0`.
        top_k: Keep the ``k`` most likely tokens (0: all).
        top_p: Keep the most likely tokens that hold ``p`` of the probability (1: all).
        bos_token_id: The start token of an encoder-decoder model's target.
        eos_token_id: Stop a sequence at this token (or any of a list of them).
        attention_mask: The padding mask of ``input_ids``.
        use_cache: Reuse cached keys and values.

    Returns:
        The sequences ``(B, P + N)``.

    Raises:
        ValueError: for ``temperature <= 0``, ``top_k < 0``, ``top_p`` outside ``(0, 1]``, and whatever greedy
            decoding refuses.
    """

    def draw(next_token_logits: Tensor) -> Tensor:
        return sample_next_token(next_token_logits, temperature, top_k, top_p)

    return generate_step_by_step(
        model,
        input_ids,
        max_new_tokens,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        attention_mask=attention_mask,
        use_cache=use_cache,
        choose_next_token=draw,
    ).sequences


# ---------------------------------------------------------------------------
# Beam search
# ---------------------------------------------------------------------------
def _reorder_cache(
    past_key_values: tuple[LayerCache, ...] | StaticCache | None, beam_index: Tensor
) -> tuple[LayerCache, ...] | StaticCache | None:
    """Each new beam takes over the keys and values of the beam it extends (``(B k, ...)`` rows, gathered)."""
    if past_key_values is None:
        return None
    if isinstance(past_key_values, StaticCache):
        # A static cache is reordered where it is (parts.static_cache).
        past_key_values.reorder(beam_index)
        return past_key_values

    def pick(pair: tuple[Tensor, Tensor] | None) -> tuple[Tensor, Tensor] | None:
        return None if pair is None else (pair[0][beam_index], pair[1][beam_index])

    return tuple(LayerCache(pick(cache.self_attention), pick(cache.cross_attention)) for cache in past_key_values)


def _gather(tensor: Tensor, index: Tensor) -> Tensor:
    """``tensor[b, index[b, j], ...]`` for every ``b`` and ``j``: the rows of each batch item's beams, picked."""
    while index.dim() < tensor.dim():
        index = index[..., None]
    return torch.take_along_dim(tensor, index, dim=1)


def _check_beam_search_inputs(args: Arguments) -> None:
    check_generate_inputs(args)
    _check_beam_options(args.num_beams, args.length_penalty, args.early_stopping)
    if args.do_sample:
        _check_sampling_options(args.temperature, args.top_k, args.top_p)


@torch.no_grad()
@validate_with(_check_beam_search_inputs)
def beam_search(
    model: torch.nn.Module,
    input_ids: Tensor,
    max_new_tokens: int,
    num_beams: int,
    bos_token_id: int | None = None,
    eos_token_id: int | list[int] | None = None,
    attention_mask: Tensor | None = None,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    use_cache: bool = True,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int = 50,
    top_p: float = 1.0,
) -> Tensor:
    """Beam search with ``num_beams`` beams: HuggingFace's ``_beam_search``, step by step.

    Args:
        model: An encoder-decoder or a decoder-only model.
        input_ids: The source ``(B, S)`` or the left-padded prompt ``(B, P)``.
        max_new_tokens: How many tokens to write at most.
        num_beams: ``k``, the sequences kept at every step.
        bos_token_id: The start token of an encoder-decoder model's target.
        eos_token_id: A sequence that writes it (or any of a list of them) is finished.
        attention_mask: The padding mask of ``input_ids``.
        length_penalty: A finished sequence's score is its log-probability divided by its length to this power.
        early_stopping: ``False``: stop when no running beam can beat the worst finished sequence at its current
            length; ``True``: as soon as ``k`` sequences are finished; ``"never"``: only when no running beam could
            beat it at any length.
        use_cache: Reuse cached keys and values (reordered with the beams).
        do_sample: Draw the ``2k`` candidates at random instead of taking the best (HuggingFace's beam sampling).
        temperature: With ``do_sample``, as in :func:`sample_generate`.
        top_k: With ``do_sample``, as in :func:`sample_generate`.
        top_p: With ``do_sample``, as in :func:`sample_generate`.

    Returns:
        The best sequence of each batch item, ``(B, P + N)``: the prompt (the start token), then ``N`` tokens,
        the longest finished sequence's length; a sequence that finished earlier is filled after its end.
    """
    config = model.config
    encoder_decoder = is_encoder_decoder(model)
    eos_token_ids = check_eos_token_id(eos_token_id, config.vocab_size)
    # The tokens a candidate finishes with, and the filler after a sequence's end (HuggingFace fills with the
    # padding id unless it is 0 or missing, else with the first end-of-sequence id).
    stop_ids = None if eos_token_ids is None else torch.tensor(eos_token_ids, device=input_ids.device)
    pad_token_id = config.pad_token_id if config.pad_token_id is not None else (eos_token_ids or [None])[0]
    fill_value = (pad_token_id or eos_token_ids[0]) if eos_token_ids is not None else -1
    batch_size = input_ids.shape[0]
    k = num_beams

    was_training = model.training
    model.eval()
    try:
        # 1) Every beam starts as a copy of its prompt (of the start token), and reads the same source.
        inputs: dict[str, Tensor | None] = {}
        if encoder_decoder:
            # (the encoder runs once, before the beams are made, and each beam reads the encoder's output)
            encoded = model.encode(input_ids, attention_mask).last_hidden_state
            inputs["encoder_hidden_states"] = encoded.repeat_interleave(k, dim=0)
            inputs["encoder_attention_mask"] = (
                None if attention_mask is None else attention_mask.repeat_interleave(k, dim=0)
            )
            prompt = torch.full((batch_size, 1), bos_token_id, dtype=torch.long, device=input_ids.device)
        else:
            prompt = input_ids
            mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask.long()
            inputs["attention_mask"] = mask.repeat_interleave(k, dim=0)
        prompt_length = prompt.shape[1]
        max_length = prompt_length + max_new_tokens
        running = torch.full((batch_size, k, max_length), fill_value, dtype=torch.long, device=input_ids.device)
        running[:, :, :prompt_length] = prompt[:, None]
        # Only the first beam is live at the start (the others are copies): they begin a billion below.
        running_scores = torch.zeros(batch_size, k, device=input_ids.device)
        running_scores[:, 1:] = -1e9
        # The k best finished sequences of each batch item, their scores and generated lengths (none yet).
        finished = running.clone()
        finished_scores = torch.full((batch_size, k), -1e9, device=input_ids.device)
        finished_lengths = torch.zeros(batch_size, k, dtype=torch.long, device=input_ids.device)
        is_finished = torch.zeros(batch_size, k, dtype=torch.bool, device=input_ids.device)
        improvable = torch.ones(batch_size, 1, dtype=torch.bool, device=input_ids.device)
        # 2k candidates per step, so that k unfinished ones remain even if k of them end (2k per end token + 1).
        candidates = max(2, 1 + (len(eos_token_ids) if eos_token_ids is not None else 0)) * k
        first_k = torch.arange(candidates, device=input_ids.device) < k
        past_key_values = None
        length = prompt_length
        while True:
            # 2) The log-probability of every next token for every beam, the beams as rows of one batch (the
            #    whole beams at the first step, or without a cache; the newest token of each beam with one).
            flat = running[:, :, :length].flatten(0, 1)
            new_ids = flat if past_key_values is None else flat[:, -1:]
            logits, past_key_values = next_token_logits(model, new_ids, past_key_values, use_cache, **inputs)
            log_probs = F.log_softmax(logits.float(), dim=-1)
            if do_sample:
                log_probs = filter_scores(log_probs, temperature, top_k, top_p, min_tokens_to_keep=candidates // k)
            vocab_size = log_probs.shape[-1]
            # 3) A candidate's score: its beam's score plus the token's; all k * V of them side by side.
            scores = (log_probs.view(batch_size, k, vocab_size) + running_scores[:, :, None]).view(batch_size, -1)
            if do_sample:
                chosen = torch.multinomial(F.softmax(scores, dim=-1), num_samples=candidates)
                candidate_scores = torch.gather(scores, 1, chosen)
            else:
                candidate_scores, chosen = torch.topk(scores, candidates)
            # Which beam each candidate extends, and with which token.
            parent, token = chosen // vocab_size, chosen % vocab_size
            extended = _gather(running, parent)
            extended[:, :, length] = token
            # 4) A candidate ends with an end-of-sequence token, or at the last position allowed.
            ends = torch.full_like(token, length + 1 >= max_length, dtype=torch.bool)
            if stop_ids is not None:
                ends = ends | torch.isin(token, stop_ids)
            # 5) The k best candidates that go on are the new beams (one that ended sinks a billion).
            going_on = candidate_scores + ends.float() * -1.0e9
            best = torch.topk(going_on, k)[1]
            running = _gather(extended, best)
            running_scores = _gather(going_on, best)
            beam_index = (_gather(parent, best) + torch.arange(batch_size, device=parent.device)[:, None] * k).flatten()
            # 6) The candidates among the first k that ended join the finished ones, scored per length, if they
            #    beat them (and while this batch item can still improve).
            just_finished = ends & first_k[None, :]
            generated = length + 1 - prompt_length
            ranked = candidate_scores / (generated**length_penalty)
            ranked += (torch.all(is_finished, dim=-1, keepdim=True) & (early_stopping is True)).float() * -1.0e9
            ranked += (~improvable).float() * -1.0e9
            ranked += (~just_finished) * -1.0e9
            merged_scores = torch.cat([finished_scores, ranked], dim=1)
            keep = torch.topk(merged_scores, k)[1]
            finished = _gather(torch.cat([finished, extended], dim=1), keep)
            finished_scores = _gather(merged_scores, keep)
            finished_lengths = _gather(torch.cat([finished_lengths, torch.full_like(token, generated)], dim=1), keep)
            is_finished = _gather(torch.cat([is_finished, just_finished], dim=1), keep)
            # 7) The cache follows the beams; a new position for every beam.
            past_key_values = _reorder_cache(past_key_values, beam_index)
            if not encoder_decoder:
                mask = inputs["attention_mask"]
                inputs["attention_mask"] = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            length += 1
            # 8) Can the best running beam still beat the worst finished sequence?  At its current length
            #    (early_stopping=False), or at the longest allowed ("never" with a positive length penalty).
            best_length = (
                max_length - prompt_length
                if early_stopping == "never" and length_penalty > 0.0
                else length - prompt_length
            )
            best_possible = running_scores[:, :1] / (best_length**length_penalty)
            worst_finished = torch.where(is_finished, torch.min(finished_scores, dim=1, keepdim=True)[0], -1.0e9)
            improvable = improvable & torch.any(best_possible > worst_finished, dim=-1, keepdim=True)
            all_done = torch.all(is_finished) & (early_stopping is True)
            if not bool(torch.any(improvable)) or bool(all_done) or bool(torch.all(ends)):
                break
    finally:
        model.train(was_training)
    # The best finished sequence of each batch item, cut after the longest of them.
    output_length = prompt_length + int(finished_lengths[:, 0].max())
    return finished[:, 0, :output_length]


# ---------------------------------------------------------------------------
# generate(), under transformers' names
# ---------------------------------------------------------------------------
def _check_generate_options(args: Arguments) -> None:
    if not isinstance(args.do_sample, bool):
        raise TypeError(f"do_sample must be a bool, got {args.do_sample!r}")
    # The decodings check the number of new tokens, whichever way it was given.
    args.max_new_tokens = new_tokens_for(args.model, args.input_ids, args.max_new_tokens, args.max_length)
    check_generate_inputs(args)
    _check_sampling_options(args.temperature, args.top_k, args.top_p)
    _check_beam_options(args.num_beams, args.length_penalty, args.early_stopping)
    if args.cache_implementation not in CACHE_IMPLEMENTATIONS:
        raise ValueError(
            f"cache_implementation must be one of {CACHE_IMPLEMENTATIONS}, got {args.cache_implementation!r}"
        )
    if args.cache_implementation == "static":
        if not args.use_cache:
            raise ValueError("cache_implementation='static' needs use_cache=True")
        reason = _why_no_static_cache(args.model)
        if reason is not None:
            raise ValueError(f"cache_implementation='static' cannot run this model: {reason}")


#: ``generate()``'s caches, by ``transformers``' names: ``None``, the fastest that computes the same tokens.
CACHE_IMPLEMENTATIONS = (None, "static", "dynamic")


def _why_no_static_cache(model: torch.nn.Module) -> str | None:
    """Why ``model`` cannot decode over a static cache (:mod:`~literate_transformer.parts.static_cache`), or ``None``."""
    if not isinstance(model, StaticCacheGeneration):
        return f"{type(model).__name__}'s family does not decode over a static cache"
    return static_cache_applies(model)


@validate_with(_check_generate_options)
def generate(
    model: torch.nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    max_new_tokens: int | None = None,
    *,
    max_length: int | None = None,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int = 50,
    top_p: float = 1.0,
    num_beams: int = 1,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    bos_token_id: int | None = None,
    eos_token_id: int | list[int] | None = None,
    use_cache: bool = True,
    cache_implementation: str | None = None,
) -> Tensor:
    """Greedy decoding, sampling or beam search, chosen as ``transformers``' ``generate()`` chooses.

    ``num_beams=1``: greedy (``do_sample=False``) or sampling; ``num_beams > 1``:
    beam search (or beam sampling with ``do_sample=True``).  The defaults are
    ``transformers``' (``top_k=50`` applies only when sampling).

    A model whose family decodes over a static cache
    (:class:`~literate_transformer.parts.static_cache.StaticCacheGeneration`:
    Llama's and its descendants') runs the same loops over its
    :class:`~literate_transformer.parts.static_cache.StaticCacheDecoder`,
    its own forward over a cache written in place, which computes the same
    tokens with less work per step; every other model, or
    ``cache_implementation="dynamic"``, runs them over the model itself, its
    cache growing by one position a step.  A model of such a family that the
    static cache cannot serve (:func:`~literate_transformer.parts.static_cache.static_cache_applies`
    says why) runs the growing cache with a warning that names the reason.

    Args:
        model: An encoder-decoder or a decoder-only model.
        input_ids: The source ``(B, S)`` or the left-padded prompt ``(B, P)``.
        attention_mask: The padding mask of ``input_ids``.
        max_new_tokens: How many tokens to write at most (20 when neither this nor ``max_length`` is given).
        max_length: The longest sequence to return, as ``transformers`` counts it: the prompt (or the start
            token) and the new tokens; ``max_new_tokens`` wins when both are given.
        do_sample: Draw the tokens at random.
        temperature: Divide the scores by it before drawing (> 0).
        top_k: Draw among the ``k`` most likely tokens only (0: all).
        top_p: Draw among the most likely tokens holding ``p`` of the probability (in ``(0, 1]``).
        num_beams: Beams of beam search (1: none).
        length_penalty: Beam search's exponent of a finished sequence's length.
        early_stopping: Beam search's stopping rule (``False``, ``True`` or ``"never"``).
        bos_token_id: The start token of an encoder-decoder model's target.
        eos_token_id: Stop a sequence at this token (or any of a list of them).
        use_cache: Reuse cached keys and values.
        cache_implementation: ``None``: a static cache where the model's family has one, else the growing one;
            ``"static"``: the static cache (refused where there is none); ``"dynamic"``: the growing cache.

    Returns:
        The sequences ``(B, P + N)``: the prompt (or the start token), then the new tokens.

    Raises:
        ValueError: for ``temperature <= 0``, ``top_p`` outside ``(0, 1]``, ``num_beams < 1``, negative
            ``top_k``, a ``max_length`` that leaves no room for a new token, an unknown ``cache_implementation``
            (or ``"static"`` for a model without one), and whatever the decoding refuses (an empty batch, ids
            outside the vocabulary, masks of the wrong shape, prompts of a decoder-only model padded on the right,
            which are refused rather than computed, more positions than the model has, a cache, static or
            growing, and scores that would take more memory than the device has, naming how much).
    """
    max_new_tokens = new_tokens_for(model, input_ids, max_new_tokens, max_length)
    if use_cache and cache_implementation != "dynamic" and isinstance(model, StaticCacheGeneration):
        reason = static_cache_applies(model)
        if reason is None:
            # The same loops, over the model's forward on a static cache of the prompt's and the new tokens' positions.
            model = model.static_cache_decoder(input_ids.shape[1] + max_new_tokens)
        else:
            # Its family decodes over a static cache, and this model cannot: said, not silently slower.
            warnings.warn(
                f"{type(model).__name__} decodes over the growing cache, not its family's static one: {reason}",
                stacklevel=3,
            )
    special = dict(bos_token_id=bos_token_id, eos_token_id=eos_token_id, attention_mask=attention_mask)
    if num_beams > 1:
        sampling = dict(do_sample=do_sample, temperature=temperature, top_k=top_k, top_p=top_p)
        return beam_search(
            model,
            input_ids,
            max_new_tokens,
            num_beams,
            length_penalty=length_penalty,
            early_stopping=early_stopping,
            use_cache=use_cache,
            **special,
            **sampling,
        )
    if do_sample:
        return sample_generate(
            model, input_ids, max_new_tokens, temperature, top_k, top_p, use_cache=use_cache, **special
        )
    return greedy_generate(model, input_ids, max_new_tokens, use_cache=use_cache, **special).sequences


class GenerationMixin:
    """``generate()`` for a decoder-only language model: :func:`generate` with the model's own special ids.

    The end-of-sequence id (a list of them, or none) and the padding id
    come from ``config``, as ``transformers`` reads them for a model built
    from a config; an end-of-sequence id outside the vocabulary (GPT-2's
    default 50256 in a small random model) can never be written, so it is
    ignored.
    """

    #: ``False``: a decoder-only model continues its input (what generation asks a model).
    is_encoder_decoder = False

    def generation_eos_token_id(self) -> int | list[int] | None:
        """``config.eos_token_id`` where every id is inside the vocabulary, else ``None`` (never stop early)."""
        eos_token_id = getattr(self.config, "eos_token_id", None)
        ids = eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id]
        vocab_size = self.config.vocab_size
        if not ids or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < vocab_size for i in ids):
            return None
        return list(ids) if isinstance(eos_token_id, (list, tuple)) else eos_token_id

    def generate(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        max_new_tokens: int | None = None,
        **options: Any,
    ) -> Tensor:
        """Continue the prompts: greedy by default; ``max_length``, ``do_sample``, ``temperature``, ``top_k``,
        ``top_p``, ``num_beams``, ``length_penalty``, ``early_stopping``, ``use_cache`` and ``cache_implementation``
        as in :func:`generate`.

        Args:
            input_ids: The prompts ``(B, P)``, padded on the left.
            attention_mask: ``(B, P)``, 0 on the padding.
            max_new_tokens: How many tokens to write at most (or ``max_length=``, the prompt's and the new tokens'
                together); a sequence stops at ``config.eos_token_id``.
            **options: The decoding options of :func:`generate` (``transformers``' names).

        Returns:
            The prompts followed by the new token ids, ``(B, P + N)``.
        """
        return generate(
            self,
            input_ids,
            attention_mask,
            max_new_tokens,
            eos_token_id=self.generation_eos_token_id(),
            **options,
        )
