"""One training step of every family equals transformers': the loss, every parameter's gradient, one AdamW step.

Every family the registry converts has a case (its record's ``[training]``,
:func:`~literate_transformer.pretraining.training_step.training_cases`, on
the sizes of its running example, so that the proofs page's badge and this
test measure the same models): a random ``transformers`` model and the
package's ``from_hf`` copy of it take one padded batch with labels (``-100``
where nothing is scored) and the family's own objective (causal LM for a
decoder, masked LM for BERT, replaced-token detection for ELECTRA, the
sequence-to-sequence loss of ``labels=`` for an encoder-decoder, a masked-LM
loss through one fixed matrix for an encoder built without a language-model
head), then one step of :class:`torch.optim.AdamW` with the same settings.

Tolerance: fp32, 1e-5 relative (``max |ours - theirs| / max |theirs|`` per
parameter) for the loss, every gradient and every parameter after the step.
Both models are in evaluation mode: dropout off, BigBird's random blocks not
drawn.
"""

from __future__ import annotations

import functools

import families
import pytest
import torch
import transformers
from transformers.models.mixtral import modeling_mixtral

from literate_transformer.core.masks import causal_mask
from literate_transformer.models.registry import REGISTRY, from_hf, supported
from literate_transformer.pretraining.training_step import (
    TrainingCase,
    case_batch,
    randomized,
    readout_matrix,
    training_cases,
)

CASES = training_cases()


def case_models(case: TrainingCase) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The case's ``transformers`` model (eager attention, every parameter random, as the site's badge draws it)
    and ``from_hf``'s, both in evaluation mode."""
    config = getattr(transformers, case.config_class)(**case.sizes, **case.config, attn_implementation="eager")
    torch.manual_seed(0)
    hf = randomized(getattr(transformers, case.model_class)(config, **case.model_options))
    return hf, from_hf(hf).eval()


@functools.cache
def _windows_counted_as_ours() -> bool:
    """Whether transformers' eager Mistral lets each query see its own key and ``sliding_window - 1`` before it, as
    the package does (transformers 5; 4.41's lets one more key through: Mistral's own tests skip there too)."""
    config = transformers.MistralConfig(
        vocab_size=10, hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, sliding_window=2, attn_implementation="eager",
    )  # fmt: skip
    with torch.no_grad():
        seen = transformers.MistralForCausalLM(config).eval()(torch.arange(1, 7)[None], output_attentions=True)
    return torch.equal(seen.attentions[0][0, 0] > 0, causal_mask(6, window=2))


def _why_not(case) -> str | None:
    """Why this transformers release cannot be compared with the package on ``case``, or ``None``."""
    if not hasattr(transformers, case.config_class):
        return f"transformers {transformers.__version__} has no {case.config_class}"
    if case.sizes.get("sliding_window") and not _windows_counted_as_ours():
        return f"transformers {transformers.__version__}'s eager attention counts sliding_window otherwise"
    if case.family == "mixtral" and not hasattr(modeling_mixtral, "MixtralExperts"):
        return (
            f"transformers {transformers.__version__} stores one nn.Linear per expert, which the package does not read"
        )
    return None


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case, id=case.family, marks=pytest.mark.skipif(_why_not(case) is not None, reason=str(_why_not(case)))
        )
        for case in CASES
    ],
)
def test_one_training_step_equals_transformers(case):
    hf, ours = case_models(case)
    batch = case_batch(case, hf.config)
    if case.objective != "replaced":
        # Not vacuous: some labels are -100, which both losses must leave out.
        assert (batch["labels"] == -100).any() and (batch["labels"] != -100).any()
    readout = readout_matrix(hf.config) if case.objective == "readout" else None
    families.assert_training_step_equals_hf(ours, hf, batch, readout)


def test_every_registered_family_has_a_training_step():
    registered = {REGISTRY[name].__module__.rpartition(".")[2] for name in supported()}
    assert {case.family for case in CASES} == registered


# ---------------------------------------------------------------------------
# The encoder-decoders' labels=, written once for the branch
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bart():
    case = next(case for case in CASES if case.family == "bart")
    return case_models(case)


@pytest.fixture(scope="module")
def t5():
    case = next(case for case in CASES if case.family == "t5")
    return case_models(case)


LABELS = torch.tensor([[5, 6, 7, 8], [9, 10, -100, -100]])


def test_labels_are_shifted_right_behind_the_start_token_as_transformers_shifts_them(bart, t5):
    from transformers.models.bart.modeling_bart import shift_tokens_right

    hf, ours = bart
    expected = shift_tokens_right(LABELS, hf.config.pad_token_id, hf.config.decoder_start_token_id)
    assert torch.equal(ours.shift_labels_right(LABELS), expected)
    hf, ours = t5
    assert torch.equal(ours.shift_labels_right(LABELS), hf._shift_right(LABELS))
    # A -100 read by the decoder is the padding token.
    assert ours.shift_labels_right(LABELS)[1, 3] == hf.config.pad_token_id


@torch.no_grad()
def test_given_decoder_input_ids_the_labels_are_scored_against_them_unshifted(bart):
    hf, ours = bart
    source = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 1, 1]])
    mask = (source != 1).long()
    target = ours.shift_labels_right(LABELS).flip(1)  # any target: the loss does not shift it again
    expected = hf(input_ids=source, attention_mask=mask, decoder_input_ids=target, labels=LABELS).loss
    actual = ours(source, mask, target, labels=LABELS).loss
    torch.testing.assert_close(actual, expected, atol=0, rtol=families.ATOL)


def test_labels_for_a_model_without_a_head_are_refused_naming_it():
    from literate_transformer import from_hf

    config = transformers.BartConfig(**dict(next(c for c in CASES if c.family == "bart").sizes))
    ours = from_hf(transformers.BartModel(config))
    with pytest.raises(ValueError, match="labels need a language-model head to score them: BartModel has none"):
        ours(torch.tensor([[5, 6, 7]]), labels=torch.tensor([[5, 6]]))


def test_labels_of_the_wrong_shape_or_outside_the_vocabulary_or_too_long_are_refused(bart):
    _, ours = bart
    source, target = torch.tensor([[5, 6, 7], [8, 9, 10]]), torch.tensor([[2, 5, 6], [2, 7, 8]])
    with pytest.raises(ValueError, match=r"labels must have shape \(2, 3\)"):
        ours(source, decoder_input_ids=target, labels=target[:, :2])
    with pytest.raises(ValueError, match=r"labels must have shape \(2, \*\)"):
        ours(source, labels=target[:1])
    vocab_size = ours.config.vocab_size
    with pytest.raises(ValueError, match=rf"labels must be token ids in \[0, vocab_size={vocab_size}\) or -100"):
        ours(source, labels=torch.tensor([[5, vocab_size], [5, 6]]))
    positions = ours.config.max_position_embeddings
    with pytest.raises(ValueError, match=f"labels has {positions + 1} tokens, more than max_position_embeddings"):
        ours(source, labels=torch.full((2, positions + 1), 5))


def test_labels_without_a_start_token_are_refused_naming_it(bart):
    _, ours = bart
    start, ours.config.decoder_start_token_id = ours.config.decoder_start_token_id, None
    try:
        with pytest.raises(ValueError, match="labels need config.decoder_start_token_id"):
            ours(torch.tensor([[5, 6, 7]]), labels=torch.tensor([[5, 6]]))
    finally:
        ours.config.decoder_start_token_id = start
