r"""The training step of every family, against ``transformers``: the loss, every gradient, one AdamW step.

The families' other proofs compare what a model computes; these compare
what it *learns* from one batch.  For every family, a random
``transformers`` model and the package's copy of it (``from_hf``) take the
same padded batch with labels (``-100`` where nothing is scored) and their
family's own objective:

* a decoder, the causal language-model loss of ``labels=`` (each position
  scored against the next token, the shift done inside the model);
* BERT, the masked language-model loss of ``BertForMaskedLM(labels=...)``,
  on a batch masked by :func:`~literate_transformer.pretraining.masked_lm.mask_tokens`;
* ELECTRA, replaced-token detection (``ElectraForPreTraining(labels=...)``:
  1 where a token was replaced);
* an encoder-decoder, the sequence-to-sequence loss of ``labels=``, the
  decoder reading the labels shifted right behind the start token;
* an encoder the package builds without a language-model head (ALBERT,
  DeBERTa-v2, DistilBERT, RoBERTa, XLM-RoBERTa, XLM), a masked-LM loss read
  off its last hidden state through one fixed random ``E -> V`` matrix,
  the same on both sides (the stack built without a pooler, as
  ``transformers``' masked-LM models build it, so that the loss reaches
  every parameter).

Then :func:`training_step_difference` compares the two losses, every
parameter's gradient, and the parameters after one step of
:class:`torch.optim.AdamW` with the same settings on both sides, each by its
*relative* difference,

.. math::

    \frac{\max |g_\text{ours} - g_\text{transformers}|}{\max(\max |g_\text{transformers}|,\ \epsilon\, G)},

per parameter (a gradient's scale depends on where it sits in the model; a
relative difference reads the same for all), with :math:`G` the model's
largest gradient and :math:`\epsilon` float32's resolution.  Below
:math:`\epsilon G` on both sides a gradient is zero up to rounding, with
nothing to compare: that is the bias of every key projection, whose gradient
is zero in exact arithmetic (softmax ignores a shift that every key shares),
and the tests require it to be the only such parameter.  Both models are in
evaluation mode: dropout is off, and BigBird's random blocks, which
``transformers`` draws only in training, are not drawn.

:func:`training_cases` reads every family's case from its record
(:mod:`~literate_transformer.core.records`: its ``[training]`` section, on
the sizes of its running example); the site shows a badge for each, and the
tests run the same cases.

>>> case = next(case for case in training_cases() if case.family == "llama")
>>> case.model_class, case.objective, dict(case.config)
('LlamaForCausalLM', 'causal', {'bos_token_id': 1, 'eos_token_id': 2})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.records import FamilyRecord, records
from .masked_lm import mask_tokens

__all__ = [
    "OPTIMIZER",
    "RTOL",
    "ROUNDING",
    "TrainingCase",
    "training_cases",
    "randomized",
    "case_batch",
    "readout_matrix",
    "objective_loss",
    "StepDifference",
    "training_step_difference",
]

#: The one AdamW step both sides take.  ``eps`` is larger than PyTorch's 1e-8 for a reason of the first step:
#: it moves every weight by ``lr * g / (|g| + eps)``, about ``lr`` whatever the gradient's size, so a gradient
#: that is zero in exact arithmetic and rounding noise in floating point (the bias of a key projection:
#: softmax ignores a shift that every key shares) would move by up to ``lr`` either way, its sign a coin flip
#: on each side.  With ``eps`` far above that noise (about 1e-9 here) such a weight stays put, and every other
#: one still moves by about ``lr``.
OPTIMIZER = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-5, weight_decay=0.1)
#: The tests' and the badges' tolerance, the worst relative difference of a loss, a gradient or a parameter.
RTOL = 1e-5
#: Where a gradient is zero up to rounding, below float32's resolution times the model's largest gradient.
ROUNDING = torch.finfo(torch.float32).eps


@dataclass(frozen=True)
class TrainingCase:
    """One family's training step: the ``transformers`` model to build, and the objective it trains on (its
    record's ``[training]``, :func:`training_cases`).

    Attributes:
        family: The family's module in :mod:`literate_transformer.models` (``"llama"``).
        model_class: The ``transformers`` class (the package's class has the same name).
        config_class: Its config's class.
        sizes: The config's sizes (the family's running example's).
        objective: ``"causal"``, ``"masked"``, ``"replaced"``, ``"seq2seq"`` or ``"readout"`` (a masked-LM loss
            through a fixed matrix, for an encoder built without a language-model head).
        config: The config's other fields (special token ids, options).
        model_options: Keyword arguments of the model's constructor (``add_pooling_layer=False``).
        length: The sequences' length.
        inputs: The forward's other inputs (XLM's ``langs``).
    """

    family: str
    model_class: str
    config_class: str
    sizes: Mapping[str, Any]
    objective: str
    config: Mapping[str, Any] = field(default_factory=dict)
    model_options: Mapping[str, Any] = field(default_factory=dict)
    length: int = 7
    inputs: Mapping[str, Tensor] = field(default_factory=dict)


def _case(family: FamilyRecord) -> TrainingCase:
    training = family.training
    languages = training.get("languages")
    length = training.get("length", 7)
    # XLM's languages: row r of the batch in language languages[r] at every position.
    inputs = {} if languages is None else {"langs": torch.tensor([[language] * length for language in languages])}
    return TrainingCase(
        family.key,
        family.example_model,
        family.config,
        family.sizes,
        training["objective"],
        {**family.ids, **training.get("config", {})},
        training.get("options", {}),
        length,
        inputs,
    )


def training_cases() -> tuple[TrainingCase, ...]:
    """Every family's case, by family (each record's ``[training]``, on its running example's sizes and ids).

    Mixtral trains its routers with the load-balancing loss too (its ``config``: ``output_router_logits``;
    ``transformers`` then adds ``router_aux_loss_coef`` times it to the loss).
    """
    return tuple(_case(family) for key, family in sorted(records().items()) if family.training)


def randomized(module: nn.Module, seed: int = 0) -> nn.Module:
    """Random weights, layer norms included (fresh ones are the identity and would hide a misplaced norm), drawn
    from ``seed``: the same module gets the same weights on every machine; in evaluation mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for sub in module.modules():
            for name, parameter in sub.named_parameters(recurse=False):
                noise = torch.randn(parameter.shape, generator=generator)
                if isinstance(sub, nn.LayerNorm) and name == "weight":
                    parameter.copy_(1 + 0.2 * noise)
                else:
                    parameter.copy_(0.1 * noise)
    return module.eval()


def _pad_token_id(config: Any) -> int:
    return getattr(config, "pad_index", None) or config.pad_token_id or 0


def case_batch(case: TrainingCase, config: Any, seed: int = 0) -> dict[str, Tensor]:
    """A padded batch of 2 sequences (the second's last 2 positions padding) with labels, as ``transformers``'
    keyword arguments: ``input_ids``, ``attention_mask``, ``labels`` (and the case's other inputs)."""
    generator = torch.Generator().manual_seed(seed)
    pad = _pad_token_id(config)
    input_ids = torch.randint(3, config.vocab_size, (2, case.length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, -2:] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, pad)
    batch = dict(input_ids=input_ids, attention_mask=attention_mask, **case.inputs)
    if case.objective == "causal":
        # Padding is not scored, nor the first two tokens of the first row (a prompt, say).
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        labels[0, :2] = -100
    elif case.objective in ("masked", "readout"):
        # Half the real tokens chosen (token 3 as [MASK]); the others' labels are -100.
        batch["input_ids"], labels = mask_tokens(
            input_ids, 3, config.vocab_size, attention_mask == 0, mlm_probability=0.5, generator=generator
        )
    elif case.objective == "replaced":
        # A third of the tokens replaced by random ones: 1 there, 0 where a token is the original.
        labels = torch.bernoulli(torch.full(input_ids.shape, 1 / 3), generator=generator).long()
        replaced = torch.randint(3, config.vocab_size, input_ids.shape, generator=generator)
        batch["input_ids"] = torch.where(labels.bool() & attention_mask.bool(), replaced, input_ids)
    else:
        # Targets of 5 tokens, the second's last 2 not scored (-100, as a collator pads labels).
        labels = torch.randint(3, config.vocab_size, (2, 5), generator=generator)
        labels[1, -2:] = -100
    return dict(batch, labels=labels)


def readout_matrix(config: Any) -> Tensor:
    """The fixed ``E -> V`` matrix of the ``"readout"`` objective (seeded: the same on both sides)."""
    generator = torch.Generator().manual_seed(1)
    return torch.randn(config.hidden_size, config.vocab_size, generator=generator) / config.hidden_size**0.5


def objective_loss(model: nn.Module, batch: Mapping[str, Tensor], readout: Tensor | None = None) -> Tensor:
    """The model's loss on ``batch``: its own ``labels=`` loss, or, with ``readout``, the masked-LM loss of its
    last hidden state through that matrix (the same lines on both sides)."""
    if readout is None:
        return model(**batch).loss
    inputs = {name: value for name, value in batch.items() if name != "labels"}
    logits = model(**inputs).last_hidden_state @ readout
    return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)


def _relative(ours: Tensor, theirs: Tensor, tiny: float = 1e-30) -> float:
    """``max |ours - theirs| / max(max |theirs|, tiny)``."""
    return ((ours - theirs).abs().max() / theirs.abs().max().clamp_min(tiny)).item()


@dataclass
class StepDifference:
    """What one training step measured on both sides, each parameter by ``transformers``' name for it.

    Attributes:
        loss: The relative difference of the two losses.
        gradients: Each parameter's gradient's relative difference, its scale floored at
            :data:`ROUNDING` times the model's largest gradient; a parameter whose gradient is zero up to
            rounding on *both* sides (:attr:`zero_gradients`) is not among them.
        zero_gradients: The parameters whose gradient is below :data:`ROUNDING` times the model's largest on
            both sides: zero in exact arithmetic (a key projection's bias: softmax ignores a shift every key
            shares), rounding noise in float32, with nothing to compare.
        parameters: Each parameter's relative difference after the AdamW step.
        moved: How far the step moved each parameter on ``transformers``' side, relative to its size.
    """

    loss: float
    gradients: dict[str, float]
    zero_gradients: list[str]
    parameters: dict[str, float]
    moved: dict[str, float]


def _parameters(hf: nn.Module, ours: nn.Module) -> list[tuple[str, nn.Parameter, nn.Parameter]]:
    """Each of ``transformers``' parameters (a tied one once) with the package's of the same name.

    Raises:
        ValueError: when the package's model holds a parameter that none of ``transformers``' names reaches
            (an untied copy, which the optimizer would train apart), or one tensor under two of them.
    """
    pairs = [(name, parameter, ours.get_parameter(name)) for name, parameter in hf.named_parameters()]
    reached = {id(mine) for _, _, mine in pairs}
    extra = [name for name, parameter in ours.named_parameters() if id(parameter) not in reached]
    if extra or len(reached) != len(pairs):
        raise ValueError(f"the models' parameters differ: {extra or 'one tensor under two names'}")
    return pairs


def _gradient(parameter: nn.Parameter) -> Tensor:
    """The parameter's gradient; zeros where the loss did not reach it."""
    return torch.zeros_like(parameter) if parameter.grad is None else parameter.grad


def training_step_difference(
    hf: nn.Module,
    ours: nn.Module,
    batch: Mapping[str, Tensor],
    readout: Tensor | None = None,
    optimizer: Mapping[str, Any] = OPTIMIZER,
) -> StepDifference:
    """One training step on both models (changed in place): the loss, every gradient, then one AdamW step.

    Args:
        hf: The ``transformers`` model.
        ours: The package's, with the same weights.
        batch: ``transformers``' keyword arguments, ``labels`` included.
        readout: The fixed matrix of the ``"readout"`` objective (:func:`objective_loss`), or ``None``.
        optimizer: :class:`torch.optim.AdamW`'s settings, the same on both sides.
    """
    pairs = _parameters(hf, ours)
    with torch.enable_grad():
        losses = [objective_loss(model, batch, readout) for model in (hf, ours)]
        for loss in losses:
            loss.backward()
    tiny = ROUNDING * max(_gradient(theirs).abs().max().item() for _, theirs, _ in pairs)
    zero = [
        name for name, theirs, mine in pairs if max(_gradient(theirs).abs().max(), _gradient(mine).abs().max()) < tiny
    ]
    gradients = {
        name: _relative(_gradient(mine), _gradient(theirs), tiny) for name, theirs, mine in pairs if name not in zero
    }
    before = {name: theirs.detach().clone() for name, theirs, _ in pairs}
    for model in (hf, ours):
        torch.optim.AdamW(model.parameters(), **optimizer).step()
    return StepDifference(
        loss=_relative(losses[1].detach(), losses[0].detach()),
        gradients=gradients,
        zero_gradients=zero,
        parameters={name: _relative(mine.detach(), theirs.detach()) for name, theirs, mine in pairs},
        moved={name: _relative(theirs.detach(), before[name]) for name, theirs, _ in pairs},
    )
