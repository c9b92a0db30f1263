r"""Proofs: each module beside the reference it equals, measured on one example.

The tests prove, on random weights and inputs of many shapes, that this
package's modules compute what HuggingFace's ``transformers`` and PyTorch's
own modules compute.  This module measures the same equalities once more on
one running example each, so that the site can show the result next to the
code (a *proof badge*): the largest absolute difference between the two
outputs, in float32, against the tolerance the tests use.

Each :class:`Proof` names the object it is about, the reference, the
tolerance, the test that proves it in general, and a function that runs both
sides on the example.  :func:`run_all` runs them all.

The examples are those of :mod:`lt_site.examples`: the BERT
modules read "time flies like an arrow" through the pretrained checkpoint;
the book's modules a small random batch through a small random model,
loaded into PyTorch's modules with :mod:`~literate_transformer.interop`.

>>> [proof.subject for proof in PROOFS][:2]
['models.bert.BertEmbeddings', 'models.bert.BertSelfAttention']
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F
import transformers
from transformers.models.t5.modeling_t5 import T5Attention

from literate_transformer.book.attention import MultiHeadAttention
from literate_transformer.book.decoder import EncoderDecoderTransformer, TransformerDecoderLayer
from literate_transformer.book.embeddings import Embeddings
from literate_transformer.book.encoder import TransformerEncoder, TransformerEncoderLayer
from literate_transformer.book.generation import greedy_generate
from literate_transformer.core.checkpoints import load_hf_model, load_tokenizer
from literate_transformer.core.kernels import scaled_dot_product_attention
from literate_transformer.core.masks import causal_mask, padding_mask
from literate_transformer.interop import (
    bert_layer_to_book,
    book_attention_to_torch,
    book_decoder_layer_to_torch,
    book_encoder_layer_to_torch,
    book_encoder_to_torch,
    book_transformer_to_torch,
)
from literate_transformer.models.bert import BertModel
from literate_transformer.parts.positions import RelativePositionBias

from . import families, training_step
from .base import Measurement, Proof, book_example, first, max_diff, randomized

__all__ = ["CORE_PROOFS", "PROOFS", "measure", "run_all", "items"]


# ---------------------------------------------------------------------------
# BERT, on the sentence, through the pretrained checkpoint
# ---------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _bert_example() -> dict[str, Any]:

    encoded = load_tokenizer()("time flies like an arrow", return_tensors="pt")
    hf = load_hf_model()
    ours = BertModel.from_hf(hf).eval()
    return {"hf": hf, "ours": ours, "input_ids": encoded["input_ids"], "token_type_ids": encoded["token_type_ids"]}


@torch.no_grad()
def _bert_embeddings() -> float:
    example = _bert_example()
    ours = example["ours"].embeddings(example["input_ids"], example["token_type_ids"])
    theirs = example["hf"].embeddings(input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    return max_diff(ours, theirs)


@torch.no_grad()
def _bert_self_attention() -> float:
    example = _bert_example()
    hidden = example["hf"].embeddings(input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    ours, _ = example["ours"].encoder.layer[0].attention.self(hidden)
    theirs = first(example["hf"].encoder.layer[0].attention.self(hidden))
    return max_diff(ours, theirs)


@torch.no_grad()
def _bert_layer() -> float:
    example = _bert_example()
    hidden = example["hf"].embeddings(input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    ours = example["ours"].encoder.layer[0](hidden).hidden_states
    theirs = first(example["hf"].encoder.layer[0](hidden))
    return max_diff(ours, theirs)


@torch.no_grad()
def _bert_model() -> float:
    example = _bert_example()
    ours = example["ours"](example["input_ids"], token_type_ids=example["token_type_ids"])
    theirs = example["hf"](input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    return max(
        max_diff(ours.last_hidden_state, theirs.last_hidden_state),
        max_diff(ours.pooler_output, theirs.pooler_output),
    )


@torch.no_grad()
def _book_feed_forward_with_bert_weights() -> float:

    example = _bert_example()
    hidden = torch.randn(1, example["input_ids"].shape[1], example["ours"].config.hidden_size)
    book = bert_layer_to_book(example["ours"].encoder.layer[0]).eval().feed_forward
    hf_layer = example["hf"].encoder.layer[0]
    theirs = hf_layer.output.dense(hf_layer.intermediate(hidden))
    return max_diff(book(hidden), theirs)


@torch.no_grad()
def _book_embeddings_with_bert_weights() -> float:

    example = _bert_example()
    book = Embeddings(example["ours"].config).eval()
    source = example["hf"].embeddings
    for ours, theirs in (
        (book.token_embeddings, source.word_embeddings),
        (book.position_embeddings, source.position_embeddings),
        (book.token_type_embeddings, source.token_type_embeddings),
        (book.layer_norm, source.LayerNorm),
    ):
        ours.load_state_dict(theirs.state_dict())
    theirs = source(input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    return max_diff(book(example["input_ids"], example["token_type_ids"]), theirs)


# ---------------------------------------------------------------------------
# The book's modules, on a small random batch, against PyTorch's
# ---------------------------------------------------------------------------
@torch.no_grad()
def _sdpa_function() -> float:

    example = book_example()
    heads, head_size = example["config"].num_attention_heads, example["config"].head_size
    generator = torch.Generator().manual_seed(1)
    query = torch.randn(2, heads, 5, head_size, generator=generator)
    key, value = (torch.randn(2, heads, 7, head_size, generator=generator) for _ in range(2))
    mask = padding_mask(example["source_mask"])
    ours, _ = scaled_dot_product_attention(query, key, value, mask)
    return max_diff(ours, F.scaled_dot_product_attention(query, key, value, attn_mask=mask))


@torch.no_grad()
def _multi_head_attention() -> float:

    example = book_example()
    ours = randomized(MultiHeadAttention(example["config"]))
    hidden, memory = example["hidden"], example["memory"]
    theirs, _ = book_attention_to_torch(ours)(hidden, memory, memory, key_padding_mask=example["source_mask"] == 0)
    mine = ours(hidden, memory, padding_mask(example["source_mask"])).hidden_states
    return max_diff(mine, theirs)


def _encoder_layer(norm_first: bool) -> Callable[[], float]:
    @torch.no_grad()
    def run() -> float:

        example = book_example()
        ours = randomized(TransformerEncoderLayer(example["config"], norm_first=norm_first))
        memory, mask = example["memory"], example["source_mask"]
        theirs = book_encoder_layer_to_torch(ours)(memory, src_key_padding_mask=mask == 0)
        return max_diff(ours(memory, padding_mask(mask)).hidden_states, theirs, mask.bool())

    return run


@torch.no_grad()
def _encoder_stack() -> float:

    example = book_example()
    ours = randomized(TransformerEncoder(example["config"]))
    ids, mask = example["source_ids"], example["source_mask"]
    theirs = book_encoder_to_torch(ours)(ours.embeddings(ids), src_key_padding_mask=mask == 0)
    return max_diff(ours(ids, mask).last_hidden_state, theirs, mask.bool())


def _decoder_layer(norm_first: bool) -> Callable[[], float]:
    @torch.no_grad()
    def run() -> float:

        example = book_example()
        ours = randomized(TransformerDecoderLayer(example["config"], norm_first=norm_first))
        hidden, memory, mask = example["hidden"], example["memory"], example["source_mask"]
        length = hidden.shape[1]
        theirs = book_decoder_layer_to_torch(ours)(
            hidden, memory, tgt_mask=~causal_mask(length), memory_key_padding_mask=mask == 0
        )
        mine = ours(hidden, memory, causal_mask(length), padding_mask(mask)).hidden_states
        return max_diff(mine, theirs)

    return run


@torch.no_grad()
def _cached_generation() -> float:

    example = book_example()
    model = randomized(EncoderDecoderTransformer(example["config"]))
    ids, mask = example["source_ids"], example["source_mask"]
    cached = greedy_generate(model, ids, 6, bos_token_id=1, attention_mask=mask)
    full = greedy_generate(model, ids, 6, bos_token_id=1, attention_mask=mask, use_cache=False)
    if not torch.equal(cached.sequences, full.sequences):
        return float("inf")
    return max_diff(cached.logits, full.logits)


@torch.no_grad()
def _encoder_decoder_as_torch_transformer() -> float:

    example = book_example()
    model = randomized(EncoderDecoderTransformer(example["config"], final_layer_norm=True))
    ids, mask = example["source_ids"], example["source_mask"]
    target = ids[:, :5]
    transformer = book_transformer_to_torch(model)
    theirs = transformer(
        model.encoder.embeddings(ids),
        model.decoder.embeddings(target),
        tgt_mask=~causal_mask(target.shape[1]),
        src_key_padding_mask=mask == 0,
        memory_key_padding_mask=mask == 0,
    )
    ours = model(ids, target, mask).last_hidden_state
    return max_diff(ours, theirs)


@torch.no_grad()
def _t5_relative_bias() -> float:

    config = transformers.T5Config(
        d_model=24, d_kv=6, num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16
    )
    arguments = {"layer_idx": 0} if "layer_idx" in inspect.signature(T5Attention.__init__).parameters else {}
    theirs = T5Attention(config, has_relative_attention_bias=True, **arguments)
    ours = RelativePositionBias(4, num_buckets=8, max_distance=16)
    theirs.relative_attention_bias.weight.normal_(generator=torch.Generator().manual_seed(0))
    ours.relative_attention_bias.weight.copy_(theirs.relative_attention_bias.weight)
    return max_diff(ours(5, 7), theirs.compute_bias(5, 7))


#: The proofs of the core, the parts, the book and BERT, in reading order.
CORE_PROOFS: tuple[Proof, ...] = (
    Proof(
        "models.bert.BertEmbeddings",
        "transformers BertEmbeddings",
        "tests/models/test_bert.py::test_eager_matches_hf_eager_hidden_states_attentions_pooler",
        _bert_embeddings,
    ),
    Proof(
        "models.bert.BertSelfAttention",
        "transformers BertSelfAttention",
        "tests/models/test_bert_pretrained.py::test_eager_matches_hf_eager_on_the_checkpoint",
        _bert_self_attention,
    ),
    Proof(
        "models.bert.BertLayer",
        "transformers BertLayer",
        "tests/models/test_bert_pretrained.py::test_eager_matches_hf_eager_on_the_checkpoint",
        _bert_layer,
    ),
    Proof(
        "models.bert.BertModel",
        "transformers BertModel",
        "tests/models/test_bert_pretrained.py::test_eager_matches_hf_eager_on_the_checkpoint",
        _bert_model,
    ),
    Proof(
        "core.kernels.scaled_dot_product_attention",
        "torch.nn.functional.scaled_dot_product_attention",
        "tests/book/test_attention.py::test_sdpa_equals_torch_sdpa_with_boolean_mask",
        _sdpa_function,
        example="book",
    ),
    Proof(
        "book.attention.MultiHeadAttention",
        "torch.nn.MultiheadAttention",
        "tests/book/test_attention.py::test_cross_attention_equals_torch_multihead_attention",
        _multi_head_attention,
        example="book",
    ),
    Proof(
        "book.feed_forward.FeedForward",
        "transformers BertIntermediate + BertOutput.dense",
        "tests/book/test_encoder.py::test_post_ln_layer_equals_hf_bert_layer",
        _book_feed_forward_with_bert_weights,
    ),
    Proof(
        "book.embeddings.Embeddings",
        "transformers BertEmbeddings",
        "tests/book/test_embeddings.py::test_embeddings_equal_hf_bert_embeddings",
        _book_embeddings_with_bert_weights,
    ),
    Proof(
        "book.encoder.TransformerEncoderLayer",
        "torch.nn.TransformerEncoderLayer (norm_first=True)",
        "tests/book/test_encoder.py::test_encoder_layer_equals_torch_encoder_layer_with_padding_mask",
        _encoder_layer(norm_first=True),
        example="book",
    ),
    Proof(
        "book.encoder.TransformerEncoderLayer",
        "torch.nn.TransformerEncoderLayer (norm_first=False)",
        "tests/book/test_encoder.py::test_encoder_layer_equals_torch_encoder_layer_with_padding_mask",
        _encoder_layer(norm_first=False),
        example="book",
    ),
    Proof(
        "book.encoder.TransformerEncoder",
        "torch.nn.TransformerEncoder",
        "tests/book/test_encoder.py::test_encoder_stack_equals_torch_transformer_encoder",
        _encoder_stack,
        example="book",
    ),
    Proof(
        "book.decoder.TransformerDecoderLayer",
        "torch.nn.TransformerDecoderLayer (norm_first=True)",
        "tests/book/test_decoder.py::test_decoder_layer_matches_torch_decoder_layer",
        _decoder_layer(norm_first=True),
        example="book",
    ),
    Proof(
        "book.decoder.TransformerDecoderLayer",
        "torch.nn.TransformerDecoderLayer (norm_first=False)",
        "tests/book/test_decoder.py::test_decoder_layer_matches_torch_decoder_layer",
        _decoder_layer(norm_first=False),
        example="book",
    ),
    Proof(
        "book.decoder.EncoderDecoderTransformer",
        "torch.nn.Transformer",
        "tests/test_interop.py::test_encoder_decoder_with_final_norms_equals_torch_transformer",
        _encoder_decoder_as_torch_transformer,
        example="book",
    ),
    Proof(
        "parts.positions.RelativePositionBias",
        "transformers T5Attention.compute_bias",
        "tests/book/test_relative_positions.py::test_bias_equals_t5_compute_bias",
        _t5_relative_bias,
        example="parts",
    ),
    Proof(
        "book.generation.greedy_generate",
        "the same decoding without the key/value cache",
        "tests/book/test_generation.py::test_greedy_generate_with_and_without_cache_agree",
        _cached_generation,
        example="book",
    ),
)


#: Every proof the site shows: the core's, then each family's (:mod:`lt_site.families`), then each family's
#: training step (:mod:`lt_site.training_step`).
PROOFS: tuple[Proof, ...] = CORE_PROOFS + families.collect("PROOFS") + training_step.PROOFS


def measure(proof: Proof) -> Measurement:
    """Run one proof on its example, from a fixed seed."""
    torch.manual_seed(0)
    return Measurement(
        proof.subject, proof.reference, proof.test, proof.run(), proof.tolerance, proof.example, proof.dtype
    )


def run_all(proofs: tuple[Proof, ...] = PROOFS) -> list[Measurement]:
    """Run every proof on its example (no gradients, a fixed seed).

    Returns:
        One :class:`Measurement` per proof, in order.
    """
    return [measure(proof) for proof in proofs]


def items(proofs: tuple[Proof, ...] = PROOFS) -> dict[str, Callable[[], Measurement]]:
    """Each proof by its name (``subject = reference``) and the function that measures it, in order.

    The proof badges keep each measurement with the record of what its run reached, and measure again only
    the proofs whose code changed.

    Raises:
        ValueError: when two proofs have the same name.
    """
    named = {f"{proof.subject} = {proof.reference}": proof for proof in proofs}
    if len(named) != len(proofs):
        twice = sorted({name for name in named if sum(f"{p.subject} = {p.reference}" == name for p in proofs) > 1})
        raise ValueError(f"proofs need distinct subjects and references: {', '.join(twice)} appear twice")
    return {name: (lambda proof=proof: measure(proof)) for name, proof in named.items()}
