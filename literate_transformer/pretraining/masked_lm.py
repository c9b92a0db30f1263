r"""Masked language modelling: BERT's pretraining objective, the data and the loss.

An encoder sees the whole sequence at once, so it cannot be trained to
predict the next token (it would read it).  BERT (Devlin et al., 2019,
"BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding", NAACL, arXiv:1810.04805, section 3.1, "Task #1: Masked LM")
hides some tokens instead and trains the model to fill them in:

1. **choose** each token with probability 15% (never a special token such
   as ``[CLS]``, ``[SEP]`` or padding);
2. of the chosen tokens, replace 80% with ``[MASK]``, 10% with a random
   token, and leave 10% unchanged (so that the model cannot learn that only
   ``[MASK]`` positions matter: it must keep a good vector for every token,
   since any of them may be asked about);
3. score only the chosen positions: the loss is the mean cross-entropy of
   the model's scores there against the original tokens,

.. math::

    \mathcal{L} = -\frac{1}{|M|} \sum_{(b, t) \in M} \log \operatorname{softmax}(\text{logits}_{b,t})[x_{b,t}],

where :math:`M` is the set of chosen positions; every other label is ``-100``,
which the loss ignores.

:func:`mask_tokens` draws the random numbers of steps 1 and 2 in the order
``transformers``' ``DataCollatorForLanguageModeling.torch_mask_tokens``
draws them (a Bernoulli draw per token for the choice, one for ``[MASK]``,
one for the random token among the rest, then the random tokens), so that
under the same seed both mask the same tokens the same way; a test proves
it.  :func:`masked_lm_loss` is the loss of ``BertForMaskedLM(labels=...)``,
and :class:`~literate_transformer.models.bert.BertForMaskedLM` the head that
makes the scores.

>>> import torch
>>> ids = torch.tensor([[101, 7592, 2088, 2003, 2307, 102]])
>>> special = torch.tensor([[True, False, False, False, False, True]])
>>> inputs, labels = mask_tokens(ids, mask_token_id=103, vocab_size=30522, special_tokens_mask=special,
...                              generator=torch.Generator().manual_seed(5))
>>> labels                                          # -100 wherever nothing is to be predicted
tensor([[-100, 7592, -100, -100, -100, -100]])
>>> inputs                                          # the chosen token became [MASK]
tensor([[ 101,  103, 2088, 2003, 2307,  102]])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.validation import Arguments, check_tensor, check_token_id, validate_with
from ..parts.heads import IGNORE_INDEX

__all__ = ["mask_tokens", "masked_lm_loss"]


def _check_mask_tokens_inputs(args: Arguments) -> None:
    input_ids = check_tensor(args.input_ids, "input_ids", ndim=2, dtypes=("int",))
    if not isinstance(args.vocab_size, int) or isinstance(args.vocab_size, bool) or args.vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {args.vocab_size!r}")
    check_token_id(args.mask_token_id, "mask_token_id", args.vocab_size)
    if args.special_tokens_mask is not None:
        check_tensor(
            args.special_tokens_mask, "special_tokens_mask", dtypes=("bool", "int"), shape=tuple(input_ids.shape)
        )
    for name in ("mlm_probability", "mask_replace_prob", "random_replace_prob"):
        value = getattr(args, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    if args.mask_replace_prob + args.random_replace_prob > 1.0:
        raise ValueError(
            f"mask_replace_prob + random_replace_prob must be at most 1, got "
            f"{args.mask_replace_prob} + {args.random_replace_prob}"
        )


@validate_with(_check_mask_tokens_inputs)
def mask_tokens(
    input_ids: Tensor,
    mask_token_id: int,
    vocab_size: int,
    special_tokens_mask: Tensor | None = None,
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's masking: choose 15% of the tokens, then 80% ``[MASK]``, 10% a random token, 10% unchanged.

    Args:
        input_ids: ``(B, T)`` token ids (not changed: the masked copy is returned).
        mask_token_id: The id of ``[MASK]``.
        vocab_size: The random tokens are drawn from ``[0, vocab_size)`` (the tokenizer's length).
        special_tokens_mask: ``(B, T)``, true where a token may not be chosen
            (``[CLS]``, ``[SEP]``, padding); ``None``: every token may be.
        mlm_probability: The chance of each token to be chosen.
        mask_replace_prob: The chance of a chosen token to become ``[MASK]``.
        random_replace_prob: The chance of a chosen token to become a random token.
        generator: The random generator; ``None`` draws from PyTorch's global one
            (as ``DataCollatorForLanguageModeling`` does without a ``seed``).

    Returns:
        ``(inputs, labels)``: the masked ids ``(B, T)``, and the labels ``(B, T)``:
        the original id where a token was chosen, ``-100`` elsewhere.
    """
    labels = input_ids.clone()
    inputs = input_ids.clone()
    # 1) Choose: every token with probability mlm_probability, special tokens never.
    probability_matrix = torch.full(labels.shape, mlm_probability)  # (B, T)
    if special_tokens_mask is not None:
        probability_matrix.masked_fill_(special_tokens_mask.bool(), value=0.0)
    masked_indices = torch.bernoulli(probability_matrix, generator=generator).bool()  # (B, T)
    # Only the chosen positions are scored.
    labels[~masked_indices] = IGNORE_INDEX
    # 2a) Of the chosen, mask_replace_prob become [MASK].
    replace_draw = torch.bernoulli(torch.full(labels.shape, mask_replace_prob), generator=generator)
    indices_replaced = replace_draw.bool() & masked_indices  # (B, T)
    inputs[indices_replaced] = mask_token_id
    if mask_replace_prob == 1 or random_replace_prob == 0:
        return inputs, labels
    # 2b) Of the others, a share that makes random_replace_prob of all chosen become a random token
    #     (0.1 / (1 - 0.8) = one half, by default) ...
    random_share = random_replace_prob / (1 - mask_replace_prob)
    random_draw = torch.bernoulli(torch.full(labels.shape, random_share), generator=generator)
    indices_random = random_draw.bool() & masked_indices & ~indices_replaced  # (B, T)
    random_words = torch.randint(vocab_size, labels.shape, dtype=torch.long, generator=generator)  # (B, T)
    inputs[indices_random] = random_words[indices_random]
    # 2c) ... and the rest stay as they were (but are still scored).
    return inputs, labels


def masked_lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """The mean cross-entropy of the scores at the chosen positions against the original tokens.

    Unlike the causal loss (:func:`~literate_transformer.parts.heads.causal_lm_loss`)
    nothing is shifted: the scores at position ``t`` predict the token *at* ``t``.

    Args:
        logits: ``(B, T, V)`` scores.
        labels: ``(B, T)``, the original token where one was chosen, ``-100`` elsewhere.

    Returns:
        The scalar loss (in float32), as ``BertForMaskedLM(labels=...)`` computes it.
    """
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
