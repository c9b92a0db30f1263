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

The examples are those of :mod:`~literate_transformer.trace`: the BERT
modules read "time flies like an arrow" through the pretrained checkpoint;
the book's modules a small random batch through a small random model,
loaded into PyTorch's modules with :mod:`~literate_transformer.interop`.

>>> [proof.subject for proof in PROOFS][:2]
['models.bert.BertEmbeddings', 'models.bert.BertSelfAttention']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["Proof", "PROOFS", "Measurement", "run_all"]

#: The tolerance of the float32 comparisons (the tests' absolute tolerance).
ATOL = 1e-5


@dataclass(frozen=True)
class Proof:
    """One equality, measured on the running example.

    Attributes:
        subject: The object it is about, relative to the package (``"models.bert.BertSelfAttention"``).
        reference: What it equals, as the badge names it.
        test: The test that proves it in general (``path::function``).
        run: Runs both sides and returns the largest absolute difference.
        tolerance: The largest difference allowed.
        example: The running example it ran on (a name of :data:`~literate_transformer.trace.RUNNING_EXAMPLES`).
    """

    subject: str
    reference: str
    test: str
    run: Callable[[], float] = field(repr=False)
    tolerance: float = ATOL
    example: str = "bert"


@dataclass
class Measurement:
    """A proof's result on this machine: the difference measured, and whether it is within tolerance."""

    subject: str
    reference: str
    test: str
    max_abs_diff: float
    tolerance: float
    example: str
    dtype: str = "float32"

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance


def _max_diff(ours: Tensor, theirs: Tensor, where: Tensor | None = None) -> float:
    if where is not None:
        ours, theirs = ours[where], theirs[where]
    return (ours.float() - theirs.float()).abs().max().item()


def _first(output: Any) -> Tensor:
    """A HuggingFace module's main output, whether it returns a tensor or a tuple (releases differ)."""
    return output[0] if isinstance(output, tuple) else output


# ---------------------------------------------------------------------------
# BERT, on the sentence, through the pretrained checkpoint
# ---------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _bert_example() -> dict[str, Any]:
    from .checkpoints import load_hf_model, load_tokenizer
    from .models.bert import BertModel

    encoded = load_tokenizer()("time flies like an arrow", return_tensors="pt")
    hf = load_hf_model()
    ours = BertModel.from_hf(hf).eval()
    return {"hf": hf, "ours": ours, "input_ids": encoded["input_ids"], "token_type_ids": encoded["token_type_ids"]}


@torch.no_grad()
def _bert_embeddings() -> float:
    example = _bert_example()
    ours = example["ours"].embeddings(example["input_ids"], example["token_type_ids"])
    theirs = example["hf"].embeddings(input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    return _max_diff(ours, theirs)


@torch.no_grad()
def _bert_self_attention() -> float:
    example = _bert_example()
    hidden = example["hf"].embeddings(input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    ours, _ = example["ours"].encoder.layer[0].attention.self(hidden)
    theirs = _first(example["hf"].encoder.layer[0].attention.self(hidden))
    return _max_diff(ours, theirs)


@torch.no_grad()
def _bert_layer() -> float:
    example = _bert_example()
    hidden = example["hf"].embeddings(input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    ours = example["ours"].encoder.layer[0](hidden).hidden_states
    theirs = _first(example["hf"].encoder.layer[0](hidden))
    return _max_diff(ours, theirs)


@torch.no_grad()
def _bert_model() -> float:
    example = _bert_example()
    ours = example["ours"](example["input_ids"], token_type_ids=example["token_type_ids"])
    theirs = example["hf"](input_ids=example["input_ids"], token_type_ids=example["token_type_ids"])
    return max(
        _max_diff(ours.last_hidden_state, theirs.last_hidden_state),
        _max_diff(ours.pooler_output, theirs.pooler_output),
    )


@torch.no_grad()
def _book_feed_forward_with_bert_weights() -> float:
    from .interop import bert_layer_to_book

    example = _bert_example()
    hidden = torch.randn(1, example["input_ids"].shape[1], example["ours"].config.hidden_size)
    book = bert_layer_to_book(example["ours"].encoder.layer[0]).eval().feed_forward
    hf_layer = example["hf"].encoder.layer[0]
    theirs = hf_layer.output.dense(hf_layer.intermediate(hidden))
    return _max_diff(book(hidden), theirs)


@torch.no_grad()
def _book_embeddings_with_bert_weights() -> float:
    from .book.embeddings import Embeddings

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
    return _max_diff(book(example["input_ids"], example["token_type_ids"]), theirs)


# ---------------------------------------------------------------------------
# The book's modules, on a small random batch, against PyTorch's
# ---------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _book_example() -> dict[str, Any]:
    from .core.config import TransformerConfig
    from .trace import BOOK_EXAMPLE_SIZES

    generator = torch.Generator().manual_seed(0)
    config = TransformerConfig(
        **BOOK_EXAMPLE_SIZES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, layer_norm_eps=1e-5
    )
    batch, target_length, source_length = 2, 5, 7
    source_mask = torch.ones(batch, source_length, dtype=torch.long)
    source_mask[1, -2:] = 0
    return {
        "config": config,
        "hidden": torch.randn(batch, target_length, config.hidden_size, generator=generator),
        "memory": torch.randn(batch, source_length, config.hidden_size, generator=generator),
        "source_ids": torch.randint(3, config.vocab_size, (batch, source_length), generator=generator),
        "source_mask": source_mask,
    }


def _randomized(module: nn.Module, seed: int = 0) -> nn.Module:
    """Random weights, layer norms included (fresh ones are the identity and would hide a misplaced norm)."""
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


@torch.no_grad()
def _sdpa_function() -> float:
    import torch.nn.functional as F

    from .book.attention import scaled_dot_product_attention
    from .core.masks import padding_mask

    example = _book_example()
    heads, head_size = example["config"].num_attention_heads, example["config"].head_size
    generator = torch.Generator().manual_seed(1)
    query = torch.randn(2, heads, 5, head_size, generator=generator)
    key, value = (torch.randn(2, heads, 7, head_size, generator=generator) for _ in range(2))
    mask = padding_mask(example["source_mask"])
    ours, _ = scaled_dot_product_attention(query, key, value, mask)
    return _max_diff(ours, F.scaled_dot_product_attention(query, key, value, attn_mask=mask))


@torch.no_grad()
def _multi_head_attention() -> float:
    from .book.attention import MultiHeadAttention
    from .core.masks import padding_mask
    from .interop import book_attention_to_torch

    example = _book_example()
    ours = _randomized(MultiHeadAttention(example["config"]))
    hidden, memory = example["hidden"], example["memory"]
    theirs, _ = book_attention_to_torch(ours)(hidden, memory, memory, key_padding_mask=example["source_mask"] == 0)
    mine = ours(hidden, memory, padding_mask(example["source_mask"])).hidden_states
    return _max_diff(mine, theirs)


def _encoder_layer(norm_first: bool) -> Callable[[], float]:
    @torch.no_grad()
    def run() -> float:
        from .book.encoder import TransformerEncoderLayer
        from .core.masks import padding_mask
        from .interop import book_encoder_layer_to_torch

        example = _book_example()
        ours = _randomized(TransformerEncoderLayer(example["config"], norm_first=norm_first))
        memory, mask = example["memory"], example["source_mask"]
        theirs = book_encoder_layer_to_torch(ours)(memory, src_key_padding_mask=mask == 0)
        return _max_diff(ours(memory, padding_mask(mask)).hidden_states, theirs, mask.bool())

    return run


@torch.no_grad()
def _encoder_stack() -> float:
    from .book.encoder import TransformerEncoder
    from .interop import book_encoder_to_torch

    example = _book_example()
    ours = _randomized(TransformerEncoder(example["config"]))
    ids, mask = example["source_ids"], example["source_mask"]
    theirs = book_encoder_to_torch(ours)(ours.embeddings(ids), src_key_padding_mask=mask == 0)
    return _max_diff(ours(ids, mask).last_hidden_state, theirs, mask.bool())


def _decoder_layer(norm_first: bool) -> Callable[[], float]:
    @torch.no_grad()
    def run() -> float:
        from .book.decoder import TransformerDecoderLayer
        from .core.masks import causal_mask, padding_mask
        from .interop import book_decoder_layer_to_torch

        example = _book_example()
        ours = _randomized(TransformerDecoderLayer(example["config"], norm_first=norm_first))
        hidden, memory, mask = example["hidden"], example["memory"], example["source_mask"]
        length = hidden.shape[1]
        theirs = book_decoder_layer_to_torch(ours)(
            hidden, memory, tgt_mask=~causal_mask(length), memory_key_padding_mask=mask == 0
        )
        mine = ours(hidden, memory, causal_mask(length), padding_mask(mask)).hidden_states
        return _max_diff(mine, theirs)

    return run


@torch.no_grad()
def _cached_generation() -> float:
    from .book.decoder import EncoderDecoderTransformer
    from .book.generation import greedy_generate

    example = _book_example()
    model = _randomized(EncoderDecoderTransformer(example["config"]))
    ids, mask = example["source_ids"], example["source_mask"]
    cached = greedy_generate(model, ids, 6, bos_token_id=1, attention_mask=mask)
    full = greedy_generate(model, ids, 6, bos_token_id=1, attention_mask=mask, use_cache=False)
    if not torch.equal(cached.sequences, full.sequences):
        return float("inf")
    return _max_diff(cached.logits, full.logits)


@torch.no_grad()
def _encoder_decoder_as_torch_transformer() -> float:
    from .book.decoder import EncoderDecoderTransformer
    from .core.masks import causal_mask
    from .interop import book_transformer_to_torch

    example = _book_example()
    model = _randomized(EncoderDecoderTransformer(example["config"], final_layer_norm=True))
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
    return _max_diff(ours, theirs)


def _hf_and_ours(config_class: str, model_class: str, sizes: dict[str, Any], **ids: int) -> tuple[nn.Module, nn.Module]:
    """A ``transformers`` model with random weights (layer norms included), and the package's from ``from_hf``."""
    import transformers

    from .interop import from_hf

    config = getattr(transformers, config_class)(**sizes, **ids, attn_implementation="eager")
    torch.manual_seed(0)
    hf = _randomized(getattr(transformers, model_class)(config))
    return hf, from_hf(hf)


@torch.no_grad()
def _gpt2() -> float:
    example = _book_example()
    # The running example's sizes under GPT-2's names.
    c = example["config"]
    sizes = dict(vocab_size=c.vocab_size, n_embd=c.hidden_size, n_inner=c.intermediate_size)
    sizes.update(n_layer=c.num_hidden_layers, n_head=c.num_attention_heads, n_positions=c.max_position_embeddings)
    hf, ours = _hf_and_ours("GPT2Config", "GPT2LMHeadModel", sizes, bos_token_id=1, eos_token_id=2)
    ids = example["source_ids"]
    mask = torch.ones_like(ids)
    mask[1, -2:] = 0  # right padding: every query row keeps a real key
    logits = ours(ids, attention_mask=mask).logits
    return _max_diff(logits, hf(input_ids=ids, attention_mask=mask).logits, mask.bool())


@torch.no_grad()
def _bart() -> float:
    example = _book_example()
    # The running example's sizes under BART's names, for encoder and decoder alike.
    c = example["config"]
    sizes = dict(vocab_size=c.vocab_size, d_model=c.hidden_size, max_position_embeddings=c.max_position_embeddings)
    for stack in ("encoder", "decoder"):
        sizes[f"{stack}_layers"], sizes[f"{stack}_attention_heads"] = c.num_hidden_layers, c.num_attention_heads
        sizes[f"{stack}_ffn_dim"] = c.intermediate_size
    special = dict(pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    hf, ours = _hf_and_ours("BartConfig", "BartForConditionalGeneration", sizes, **special)
    ids, mask = example["source_ids"], example["source_mask"]
    target = ids[:, :5]
    logits = ours(ids, mask, target).logits
    return _max_diff(logits, hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits)


@torch.no_grad()
def _t5_relative_bias() -> float:
    import inspect

    import transformers
    from transformers.models.t5.modeling_t5 import T5Attention

    from .book.embeddings import RelativePositionBias

    config = transformers.T5Config(
        d_model=24, d_kv=6, num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16
    )
    arguments = {"layer_idx": 0} if "layer_idx" in inspect.signature(T5Attention.__init__).parameters else {}
    theirs = T5Attention(config, has_relative_attention_bias=True, **arguments)
    ours = RelativePositionBias(4, num_buckets=8, max_distance=16)
    theirs.relative_attention_bias.weight.normal_(generator=torch.Generator().manual_seed(0))
    ours.relative_attention_bias.weight.copy_(theirs.relative_attention_bias.weight)
    return _max_diff(ours(5, 7), theirs.compute_bias(5, 7))


#: Every proof the site shows, in reading order.
PROOFS: tuple[Proof, ...] = (
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
        "book.attention.scaled_dot_product_attention",
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
        "book.embeddings.RelativePositionBias",
        "transformers T5Attention.compute_bias",
        "tests/book/test_relative_positions.py::test_bias_equals_t5_compute_bias",
        _t5_relative_bias,
        example="families",
    ),
    Proof(
        "models.gpt2.GPT2LMHeadModel",
        "transformers GPT2LMHeadModel",
        "tests/models/test_gpt2.py::test_logits_hidden_states_and_attentions_equal_hf_with_padding",
        _gpt2,
        example="families",
    ),
    Proof(
        "models.bart.BartForConditionalGeneration",
        "transformers BartForConditionalGeneration",
        "tests/models/test_bart.py::test_logits_encoder_output_and_attentions_equal_hf_with_padded_sources",
        _bart,
        example="families",
    ),
    Proof(
        "book.generation.greedy_generate",
        "the same decoding without the key/value cache",
        "tests/book/test_generation.py::test_greedy_generate_with_and_without_cache_agree",
        _cached_generation,
        example="book",
    ),
)


def run_all(proofs: tuple[Proof, ...] = PROOFS) -> list[Measurement]:
    """Run every proof on its example (no gradients, a fixed seed).

    Returns:
        One :class:`Measurement` per proof, in order.
    """
    results = []
    for proof in proofs:
        torch.manual_seed(0)
        results.append(
            Measurement(proof.subject, proof.reference, proof.test, proof.run(), proof.tolerance, proof.example)
        )
    return results
