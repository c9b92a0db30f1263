"""Checks every model family's tests make, written once: a family's test file calls them on its own models.

A family of the package is proved against ``transformers`` the same way
whatever it is: its key map names a tensor a checkpoint lacks, the logits
agree at the real positions of a padded batch, cached decoding equals
uncached decoding.  The helpers here state those checks; the family's test
file says which model, which key, which tolerance.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

from literate_transformer.book.generation import greedy_generate
from literate_transformer.core.validation import value_checks

#: Every family's tolerance against ``transformers``, float32, absolute: logits, losses, hidden states,
#: attention probabilities and cached decoding.
ATOL = 1e-5


class _DeviceReads(TorchDispatchMode):
    """Counts what the host reads back from a tensor's memory: ``int()``, ``bool()`` and ``.item()`` all call
    ``aten._local_scalar_dense``, which on an accelerator waits for every kernel queued before it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


@torch.no_grad()
def device_reads(call: Callable[[], object], checked: bool = False) -> int:
    """How many values ``call()`` reads back to the host, with the value checks off (as on an accelerator) or on."""
    with value_checks(checked), _DeviceReads() as reads:
        call()
    return reads.count


def assert_key_map_names_a_missing_tensor(
    key_map: Callable[..., dict[str, Tensor]], state: Mapping[str, Tensor], expected: Mapping[str, Tensor], key: str
) -> None:
    """Drop ``key`` from a checkpoint's ``state``: the family's key map must refuse it, naming that tensor."""
    state = {name: tensor for name, tensor in state.items() if name != key}
    with pytest.raises(ValueError, match=rf"missing tensors: {re.escape(key)}"):
        key_map(state, expected)


def assert_key_map_refuses_a_changed_copy(
    key_map: Callable[..., dict[str, Tensor]],
    state: Mapping[str, Tensor],
    expected: Mapping[str, Tensor],
    key: str,
    message: str,
) -> None:
    """Change the copy ``key`` of a tied tensor: the key map must refuse the checkpoint, saying ``message``."""
    state = dict(state)
    state[key] = state[key] + 1
    with pytest.raises(ValueError, match=message):
        key_map(state, expected)


def assert_encoder_equals_hf(
    hf_model,
    ours,
    input_ids,
    attention_mask,
    atol: float,
    hidden_states: bool = True,
    padded_rows: bool = True,
    **inputs,
):
    """An encoder's outputs equal ``transformers``' on a padded batch, within ``atol`` (fp32, ``rtol=0``).

    The last hidden state and (with ``hidden_states``) every layer's output at the real positions (what a
    padded position holds is each implementation's own business), and every layer's attention probabilities,
    the padded queries' rows included unless ``padded_rows`` is false (for a family whose releases of
    ``transformers`` disagree there; its test says how).  Also checks that the comparison is not vacuous:
    the mask hides the padded keys from the real queries.
    """
    kwargs = dict(attention_mask=attention_mask, output_attentions=True, output_hidden_states=hidden_states, **inputs)
    with torch.no_grad():
        expected = hf_model(input_ids=input_ids, **kwargs)
        actual = ours(input_ids, **kwargs)
    real = attention_mask.bool()
    torch.testing.assert_close(actual.last_hidden_state[real], expected.last_hidden_state[real], atol=atol, rtol=0)
    if hidden_states:
        assert len(actual.hidden_states) == len(expected.hidden_states)
        for ours_state, hf_state in zip(actual.hidden_states, expected.hidden_states, strict=True):
            torch.testing.assert_close(ours_state[real], hf_state[real], atol=atol, rtol=0)
    assert len(actual.attentions) == len(expected.attentions) > 0
    rows = slice(None) if padded_rows else real
    for ours_probs, hf_probs in zip(actual.attentions, expected.attentions, strict=True):
        ours_rows, hf_rows = ours_probs.transpose(1, 2)[rows], hf_probs.transpose(1, 2)[rows]  # (N, H, S)
        torch.testing.assert_close(ours_rows, hf_rows, atol=atol, rtol=0)
    # Not vacuous: a real query gives (numerically) no weight to a padded key.
    padded_row = int((~real).any(dim=1).nonzero()[0])
    padded_keys = ~real[padded_row]
    assert actual.attentions[0][padded_row, :, 0, padded_keys].abs().max().item() < 1e-6
    # On an accelerator (the value checks off) the forward reads nothing back: the host never waits for it.
    assert device_reads(lambda: ours(input_ids, **kwargs)) == 0
    return actual, expected


def assert_refuses_bad_input(model, input_ids, config_name: str, vocab_size: int, max_length: int, **inputs):
    """Clear errors, naming the argument: ids outside the vocabulary, a mask of the wrong shape, a sequence too long.

    ``max_length`` is the longest sequence the model accepts; one token more must be refused by naming
    ``config_name`` (the config field that limits it).
    """
    too_big = input_ids.clone()
    too_big[0, 0] = vocab_size
    with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        model(too_big, **inputs)
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        model(input_ids, attention_mask=torch.ones(input_ids.shape[0], input_ids.shape[1] + 1, dtype=torch.long))
    too_long = torch.full((1, max_length + 1), 3)
    long_inputs = {name: value[:1, :1].expand(1, max_length + 1) for name, value in inputs.items()}
    with pytest.raises(ValueError, match=config_name):
        model(too_long, **long_inputs)
    model(too_long[:, :max_length], **{name: value[:, :max_length] for name, value in long_inputs.items()})


def assert_close_at_real_positions(
    actual: Tensor, expected: Tensor, attention_mask: Tensor, atol: float = 1e-5, name: str = "output"
) -> None:
    """``(B, T, ...)`` tensors agree to ``atol`` at the positions whose ``attention_mask`` is 1 (padding aside)."""
    real = attention_mask.bool()
    assert real.any() and not real.all(), f"{name}: the batch must mix real and padded positions"
    torch.testing.assert_close(actual[real], expected[real], atol=atol, rtol=0, msg=name)


def assert_cached_decoding_equals_uncached(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None, max_new_tokens: int, **generate_kwargs: Any
) -> None:
    """Greedy decoding with the key/value cache writes what decoding without it writes, with the same scores."""
    arguments = dict(attention_mask=attention_mask, **generate_kwargs)
    cached = greedy_generate(model, input_ids, max_new_tokens, use_cache=True, **arguments)
    recomputed = greedy_generate(model, input_ids, max_new_tokens, use_cache=False, **arguments)
    assert cached.logits.shape[1] > 1, "decoding stopped after one step: nothing cached was reused"
    assert torch.equal(cached.sequences, recomputed.sequences)
    torch.testing.assert_close(cached.logits, recomputed.logits, atol=1e-5, rtol=0)


# Encoder-decoder models: a padded batch of sources, targets that start with the decoder's start token.
def seq2seq_targets(config, length: int = 5, low: int = 3, seed: int = 2) -> Tensor:
    """Three unpadded targets of ``length`` random ids from ``low`` up, each starting with the decoder start token."""
    generator = torch.Generator().manual_seed(seed)
    decoder_input_ids = torch.randint(low, config.vocab_size, (3, length), generator=generator)
    decoder_input_ids[:, 0] = config.decoder_start_token_id
    return decoder_input_ids


@torch.no_grad()
def assert_seq2seq_equals_hf(
    hf_model, ours, input_ids, attention_mask, decoder_input_ids, atol: float, padded_encoder_positions: bool = False
):
    """An encoder-decoder's logits, encoder output and attention probabilities equal ``transformers``' (fp32, ``rtol=0``).

    The encoder's output is compared at the real source positions, or everywhere with
    ``padded_encoder_positions``; the encoder's, the decoder's and the cross-attention's probabilities in every
    layer.  Not vacuous: the last layer's cross-attention gives no weight to a padded source position.
    """
    expected = hf_model(
        input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids, output_attentions=True
    )
    actual = ours(input_ids, attention_mask, decoder_input_ids, output_attentions=True)
    torch.testing.assert_close(actual.logits, expected.logits, atol=atol, rtol=0)
    if padded_encoder_positions:
        torch.testing.assert_close(
            actual.encoder_last_hidden_state, expected.encoder_last_hidden_state, atol=atol, rtol=0
        )
    else:
        assert_close_at_real_positions(
            actual.encoder_last_hidden_state, expected.encoder_last_hidden_state, attention_mask, atol, "encoder output"
        )
    for name in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
        ours_probs, hf_probs = getattr(actual, name), getattr(expected, name)
        assert len(ours_probs) == len(hf_probs) > 0, name
        for ours_layer, hf_layer in zip(ours_probs, hf_probs, strict=True):
            torch.testing.assert_close(ours_layer, hf_layer, atol=atol, rtol=0, msg=name)
    cross = actual.cross_attentions[-1]  # (B, H, T, S)
    padded_keys = (attention_mask == 0)[:, None, None, :].expand_as(cross)
    assert padded_keys.any() and cross[padded_keys].abs().max().item() < 1e-6
    # On an accelerator (the value checks off) the forward reads nothing back: the host never waits for it.
    assert device_reads(lambda: ours(input_ids, attention_mask, decoder_input_ids, output_attentions=True)) == 0
    return actual, expected


def assert_seq2seq_model_equals_hf(hf_model, ours, input_ids, attention_mask, decoder_input_ids, atol: float) -> None:
    """The model without its head: no logits, and the decoder's last hidden state equals ``transformers``'."""
    with torch.no_grad():
        expected = hf_model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
        actual = ours(input_ids, attention_mask, decoder_input_ids)
    assert actual.logits is None
    torch.testing.assert_close(actual.last_hidden_state, expected.last_hidden_state, atol=atol, rtol=0)


@torch.no_grad()
def assert_seq2seq_greedy_ids_equal_hfs(
    hf_model, ours, hf_api, input_ids, attention_mask, max_new_tokens: int, **options
) -> Tensor:
    """``generate()``'s greedy ids are exactly ``transformers``', and every target starts with the start token."""
    actual = ours.generate(input_ids, attention_mask, max_new_tokens=max_new_tokens, **options)
    expected = hf_api.greedy_generate(hf_model, input_ids, attention_mask, max_new_tokens=max_new_tokens, **options)
    assert torch.equal(actual, expected)
    assert (actual[:, 0] == hf_model.config.decoder_start_token_id).all()
    return actual


def assert_seq2seq_refuses_masks_of_the_wrong_shape(ours, input_ids, attention_mask, decoder_input_ids) -> None:
    """A source mask or a target mask one position short is refused, the error naming the shape it needs."""
    batch, length = input_ids.shape
    with pytest.raises(ValueError, match=rf"attention_mask must have shape \({batch}, {length}\)"):
        ours(input_ids, attention_mask[:, :-1], decoder_input_ids)
    batch, length = decoder_input_ids.shape
    with pytest.raises(ValueError, match=rf"decoder_attention_mask must have shape \({batch}, {length}\)"):
        ours(input_ids, attention_mask, decoder_input_ids, torch.ones(batch, length - 1))


# ---------------------------------------------------------------------------
# Decoder-only language models (the decoder branch)
# ---------------------------------------------------------------------------
#: The decodings every decoder family is proved on, by transformers' argument names (greedy: none of them).
DECODINGS = {
    "greedy": {},
    "sampled": {"do_sample": True, "temperature": 0.8, "top_k": 7, "top_p": 0.9},
    "beam": {"num_beams": 3},
}
#: The seed both sides draw from when sampling.
SEED = 7


def right_padded_batch(vocab_size: int, length: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    """Three sequences, two right-padded (by 3 and 5): every query row keeps a real key."""
    from shapes import padded_batch

    return padded_batch(vocab_size, length, (0, 3, 5))


def generation_prompts(hf_model: torch.nn.Module, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three prompts of 6, two left-padded (by 2 and 4), if transformers' generate() reads this model's mask.

    Some families' ``generate()`` in older ``transformers`` releases hands the
    model the ids alone (GPT's and CTRL's ``prepare_inputs_for_generation`` in
    4.x), so a padded prompt would be read as real tokens there: those get
    three prompts without padding instead.
    """
    from shapes import padded_batch

    input_ids, attention_mask = padded_batch(vocab_size, 6, (0, 2, 4), seed=2, side="left")
    prepared = hf_model.prepare_inputs_for_generation(input_ids, attention_mask=attention_mask)
    if prepared.get("attention_mask") is None:
        return padded_batch(vocab_size, 6, (0, 0, 0), seed=2, side="left")
    return input_ids, attention_mask


def assert_same_names_and_parameters(hf_model: torch.nn.Module, ours: torch.nn.Module) -> None:
    """HuggingFace's names, tensor for tensor, and as many parameters (a tied head counted once, on both sides)."""
    assert sorted(ours.state_dict()) == sorted(hf_model.state_dict())
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf_model.parameters())


@torch.no_grad()
def assert_logits_equal_at_real_positions(hf_model, ours, vocab_size: int, atol: float = ATOL) -> None:
    """The logits of a right-padded batch, at every real position, within ``atol``; padded positions differ freely."""
    input_ids, attention_mask = right_padded_batch(vocab_size)
    expected = hf_model(input_ids, attention_mask=attention_mask).logits
    actual = ours(input_ids, attention_mask=attention_mask).logits
    real = attention_mask.bool()
    torch.testing.assert_close(actual[real], expected[real], atol=atol, rtol=0)
    # Not vacuous: the positions' logits differ from each other (the model is not constant).
    assert (actual[0, 0] - actual[0, 1]).abs().max() > 1e-3


@torch.no_grad()
def assert_generate_gives_hfs_ids(hf_model, ours, decoding: str, max_new_tokens: int = 6) -> torch.Tensor:
    """``generate()`` with one of :data:`DECODINGS`: the very ids of ``transformers``' ``generate()``, same seed."""
    options = DECODINGS[decoding]
    input_ids, attention_mask = generation_prompts(hf_model, ours.config.vocab_size)
    torch.manual_seed(SEED)
    expected = hf_model.generate(
        input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens, **{"do_sample": False, **options}
    )
    torch.manual_seed(SEED)
    actual = ours.generate(input_ids, attention_mask, max_new_tokens, **options)
    assert torch.equal(actual, expected), f"{decoding}:\nours {actual.tolist()}\nHF   {expected.tolist()}"
    # The prompts come first, as HuggingFace returns them.
    assert torch.equal(actual[:, : input_ids.shape[1]], input_ids)
    return actual


@torch.no_grad()
def assert_cache_changes_nothing(ours, steps: int = 4) -> None:
    """:func:`assert_cached_decoding_equals_uncached` for a decoder-only model, on a left-padded batch of prompts."""
    input_ids, attention_mask = right_padded_batch(ours.config.vocab_size, length=5)
    # Left padding, as generation wants it.
    assert_cached_decoding_equals_uncached(ours, input_ids.flip(1), attention_mask.flip(1), steps)


@torch.no_grad()
def assert_causal_lm_loss_equals_hfs(hf_model, ours) -> None:
    """The loss of ``labels=`` (each position scored against the next token, padding ignored) equals HF's."""
    input_ids, attention_mask = right_padded_batch(ours.config.vocab_size)
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    expected = hf_model(input_ids, attention_mask=attention_mask, labels=labels).loss
    actual = ours(input_ids, attention_mask=attention_mask, labels=labels).loss
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)
    # Not vacuous: other labels give another loss.
    assert (ours(input_ids, attention_mask=attention_mask, labels=labels.roll(1, 1)).loss - expected).abs() > 1e-3


def assert_bad_inputs_are_refused(ours) -> None:
    """Ids outside the vocabulary, masks of the wrong shape and decoding options out of range: ValueErrors naming them."""
    vocab_size = ours.config.vocab_size
    prompt = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours(torch.tensor([[1, vocab_size]]))
    with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        ours.generate(torch.tensor([[1, vocab_size]]), max_new_tokens=2)
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(1, 3\)"):
        ours(prompt, attention_mask=torch.ones(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(1, 3\)"):
        ours.generate(prompt, torch.ones(1, 4, dtype=torch.long), max_new_tokens=2)
    for option, value, message in (
        ("top_p", 0.0, "top_p must be a number in \\(0, 1\\]"),
        ("top_p", 1.5, "top_p must be a number in \\(0, 1\\]"),
        ("temperature", 0.0, "temperature must be a number > 0"),
        ("temperature", -1.0, "temperature must be a number > 0"),
        ("num_beams", 0, "num_beams must be a positive int"),
        ("top_k", -1, "top_k must be a non-negative int"),
    ):
        with pytest.raises(ValueError, match=message):
            ours.generate(prompt, max_new_tokens=2, do_sample=True, **{option: value})
    limit = getattr(ours, "position_limit", ours.config.max_position_embeddings)
    if limit is not None:
        # P + N - 1 positions are read: a prompt of 3 leaves room for limit - 2 new tokens.
        with pytest.raises(ValueError, match=rf"max_new_tokens={limit - 1} would .* max_position_embeddings={limit}"):
            ours.generate(prompt, max_new_tokens=limit - 1)
        with pytest.raises(ValueError, match=f"more than max_position_embeddings={limit}"):
            ours(torch.ones(1, limit + 1, dtype=torch.long))


def hf_and_ours_fixture(config_class: type, model_class: type, shapes: Any, needs: Mapping[str, Any] | None = None):
    """A family's module-scoped ``models`` fixture: a random ``transformers`` model and ``from_hf``'s, per row.

    One row of ``shapes`` (the family's config fields: a table of ``tests/shapes.py``'s ``Shapes``, or a
    mapping of names to fields) per parameter, named for it; ``needs`` marks a row
    (a ``skipif`` where a release of ``transformers`` lacks what the row uses).  Eager attention, ids 1, 2
    and 0 for the start, end and padding, every parameter randomised (the ``randomize`` fixture).
    """
    from literate_transformer import from_hf

    needs = needs or {}
    rows = shapes if isinstance(shapes, Mapping) else {name: shapes(name) for name in shapes.names}

    @pytest.fixture(
        params=[pytest.param(name, marks=needs.get(name, ())) for name in sorted(rows)], scope="module", name="models"
    )
    def models(request, randomize):
        config = config_class(
            **rows[request.param], bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager"
        )
        torch.manual_seed(0)
        hf = randomize(model_class(config))
        return hf, from_hf(hf)

    return models


def assert_from_hf_builds(models: tuple[nn.Module, nn.Module], model_class: type) -> tuple[nn.Module, nn.Module]:
    """``from_hf`` built a ``model_class`` in evaluation mode, under HF's names, its head tied as the config says.

    Tied: the head's weight is the token table's very tensor (the table HF's ``get_input_embeddings()``
    names), exactly when ``tie_word_embeddings`` is set.  Returns ``models`` for the family's own checks.
    """
    hf, ours = models
    assert isinstance(ours, model_class) and not ours.training
    assert_same_names_and_parameters(hf, ours)
    table = next(name for name, module in hf.named_modules() if module is hf.get_input_embeddings())
    assert (ours.lm_head.weight is ours.get_submodule(table).weight) == hf.config.tie_word_embeddings
    return hf, ours


class DecoderFamilyTests:
    """What every decoder family proves against ``transformers``, on its file's ``models``.

    A family's test file subclasses this as ``Test...`` to run them on its own shapes: the logits are HF's
    at the real positions of a padded batch, ``generate()`` gives ``transformers``' very ids (greedy,
    sampled, beam search), cached decoding changes nothing, the ``labels=`` loss is HF's, and bad inputs
    are refused.
    """

    def test_logits_equal_hfs_at_the_real_positions_of_a_right_padded_batch(self, models):
        hf, ours = models
        assert_logits_equal_at_real_positions(hf, ours, hf.config.vocab_size)

    @pytest.mark.parametrize("decoding", list(DECODINGS))
    def test_generate_gives_hfs_ids(self, models, decoding):
        assert_generate_gives_hfs_ids(*models, decoding)

    def test_cached_decoding_equals_uncached_decoding(self, models):
        assert_cache_changes_nothing(models[1])

    def test_the_causal_lm_loss_equals_hfs_labels_loss(self, models):
        assert_causal_lm_loss_equals_hfs(*models)

    def test_bad_inputs_are_refused(self, models):
        assert_bad_inputs_are_refused(models[1])

    def test_the_host_waits_only_for_the_stopping_check(self, models):
        assert_reads_only_the_stopping_check(models[1])


def assert_reads_only_the_stopping_check(ours) -> None:
    """With the value checks off (as on an accelerator), a forward reads nothing back to the host, and greedy
    decoding one value a step (whether every row has ended); with them on (the CPU), the inputs are read once."""
    input_ids, attention_mask = right_padded_batch(ours.config.vocab_size)
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    assert device_reads(lambda: ours(input_ids, attention_mask=attention_mask, labels=labels)) == 0
    prompts, prompt_mask = input_ids.flip(1), attention_mask.flip(1)

    def decode(steps: int) -> Callable[[], object]:
        return lambda: ours.generate(prompts, prompt_mask, max_new_tokens=steps)

    assert device_reads(decode(2)) <= 2 and device_reads(decode(5)) <= 5
    # On the CPU the ids and the mask are checked once, at the call, and not again at each step.
    checked = [device_reads(decode(steps), checked=True) for steps in (2, 5)]
    assert 0 < checked[0] and checked[1] - checked[0] <= 3


def count_static_cache_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of the static-cache decoder (the path is taken, or a test of it is vacuous)."""
    from literate_transformer.parts.static_cache import StaticCacheDecoder

    calls = [0]
    forward = StaticCacheDecoder.forward

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(StaticCacheDecoder, "forward", counted)
    return calls


def generate_both_ways(
    reference: Any,
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    new_tokens: int,
    options: dict,
    seed: int,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Tensor, Tensor, int]:
    """``model``'s ids over its static cache, ``reference``'s over the growing cache (each drawn under ``seed``), and
    how many static-cache steps ``model`` ran."""
    torch.manual_seed(seed)
    expected = reference.generate(input_ids, attention_mask, new_tokens, cache_implementation="dynamic", **options)
    calls = count_static_cache_steps(monkeypatch)
    torch.manual_seed(seed)
    written = model.generate(input_ids, attention_mask, new_tokens, **options)
    return written, expected, calls[0]


# ---------------------------------------------------------------------------
# Training: one step of a family's objective against transformers'
# ---------------------------------------------------------------------------
#: The parameters whose gradient is zero in exact arithmetic: a key projection's bias (softmax ignores a shift
#: that every key shares), under each family's name for that projection.
KEY_BIAS = re.compile(r"(key|k_proj|k_lin|Wk)\.bias$")


def assert_training_step_equals_hf(
    ours: nn.Module, hf_model: nn.Module, batch: Mapping[str, Tensor], readout: Tensor | None = None
) -> Any:
    """One training step on ``batch`` (``transformers``' keyword arguments, ``labels`` included) equals
    ``transformers``': the loss, every parameter's gradient, and every parameter after one AdamW step, each
    within :data:`~literate_transformer.pretraining.training_step.RTOL` relative
    (:func:`~literate_transformer.pretraining.training_step.training_step_difference` measures them; ``readout``
    is the fixed matrix of an encoder without a language-model head).

    Not vacuous: the loss reaches every parameter (but the keys' biases, whose gradient is zero in exact
    arithmetic and rounding noise on both sides), and the step moves every parameter by several times the
    tolerance, so that the comparison after it tells a step from none.  Both models are changed in place.
    Returns the measurement (:class:`~literate_transformer.pretraining.training_step.StepDifference`).
    """
    from literate_transformer.pretraining.training_step import RTOL, training_step_difference

    difference = training_step_difference(hf_model, ours, batch, readout)
    assert difference.loss <= RTOL, f"the losses differ by {difference.loss:.2e} (relative)"
    for what, found in (("gradients", difference.gradients), ("parameters after the step", difference.parameters)):
        over = {name: f"{value:.2e}" for name, value in found.items() if not value <= RTOL}
        assert not over, f"{what} differ by more than {RTOL} (relative): {over}"
    unreached = [name for name in difference.zero_gradients if not KEY_BIAS.search(name)]
    assert not unreached, f"the loss does not reach {unreached}"
    still = {name: moved for name, moved in difference.moved.items() if not moved > 5 * RTOL}
    assert not still, f"the step barely moved {still}"
    return difference
