"""The running examples of the site: what the annotated source's runtime values were computed on.

Each :class:`RunningExample` runs some of the package's modules on a small
input; :func:`site_trace` runs them all under the line recorder of
:mod:`lt_site.trace` and returns, for every line of the package that
assigned a tensor, what it computed the first time it ran, and for each
example the functions its forward pass called, in order.  The
``runtime_trace`` extension (``docs/_ext``) shows those values beside the
code, and the ``top_to_bottom`` extension each family's forward path.  The
sizes of the book's example (:data:`BOOK_EXAMPLE_SIZES`) are also the tests'
tiny configuration.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from literate_transformer import diagrams, interop
from literate_transformer.book.attention import AttentionHead, MultiHeadAttention
from literate_transformer.book.classification import TransformerForSequenceClassification
from literate_transformer.book.decoder import EncoderDecoderTransformer
from literate_transformer.book.generation import greedy_generate
from literate_transformer.book.training import make_reversal_batch
from literate_transformer.core import masks
from literate_transformer.core.checkpoints import load_tokenizer
from literate_transformer.core.config import TransformerConfig
from literate_transformer.core.kernels import fused_attention, scaled_dot_product_attention
from literate_transformer.models.bert import BertModel, sentence_embeddings
from literate_transformer.parts.feed_forward import GatedFeedForward
from literate_transformer.parts.norms import make_norm
from literate_transformer.parts.positions import RelativePositionBias, SinusoidalPositionalEncoding

from . import families
from .base import BOOK_EXAMPLE_SIZES, RunningExample
from .deps import ItemCache
from .export import BrowserBert
from .trace import merge_traces, trace_example

__all__ = ["CORE_EXAMPLES", "RUNNING_EXAMPLES", "site_trace"]


# ---------------------------------------------------------------------------
# The running examples of the site
# ---------------------------------------------------------------------------
def _bert_on_the_sentence() -> None:
    encoded = load_tokenizer()("time flies like an arrow", return_tensors="pt")
    inputs = (encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    eager = BertModel.from_pretrained()
    # The eager path, with the attention probabilities (as the attention views show them) ...
    outputs = eager(*inputs, output_attentions=True)
    # ... the sentence vector the checkpoint was trained for ...
    sentence_embeddings(outputs.last_hidden_state, encoded["attention_mask"])
    # ... a mask that keeps every head (one row, for all layers) ...
    eager(*inputs, head_mask=torch.ones(eager.config.num_attention_heads))
    # ... the model the try page runs, and the head-split diagram on its first layer ...
    BrowserBert(eager)(encoded["input_ids"], encoded["token_type_ids"])
    diagrams.head_split_diagram(eager.encoder.layer[0].attention.self, length=encoded["input_ids"].shape[1])
    # ... and the fused kernel on the same weights.
    fused = BertModel(eager.config.replace(attn_implementation="sdpa")).eval()
    fused.load_state_dict(eager.state_dict())
    fused(*inputs)


def _the_book_on_a_small_batch() -> None:
    torch.manual_seed(0)
    config = TransformerConfig(**BOOK_EXAMPLE_SIZES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    batch, target_length, source_length = 2, 5, 7
    heads, head_size = config.num_attention_heads, config.head_size
    source = torch.randint(3, config.vocab_size, (batch, source_length))
    target = torch.randint(3, config.vocab_size, (batch, target_length))
    source_mask = torch.ones(batch, source_length, dtype=torch.long)
    source_mask[1, -2:] = 0
    hidden = torch.randn(batch, target_length, config.hidden_size)
    query = torch.randn(batch, heads, target_length, head_size)
    key, value = (torch.randn(batch, heads, source_length, head_size) for _ in range(2))

    masks.build_attention_mask(source_mask, query_length=target_length, causal=False)
    masks.build_attention_mask(None, query_length=target_length, causal=True)
    scaled_dot_product_attention(query, key, value, masks.padding_mask(source_mask))
    fused_attention(query, key, value, masks.padding_mask(source_mask))
    AttentionHead(config.hidden_size, head_size)(hidden)
    MultiHeadAttention(config).eval()(hidden, output_attentions=True)
    SinusoidalPositionalEncoding(config.hidden_size, config.max_position_embeddings)(hidden)
    for norm_first in (True, False):
        model = EncoderDecoderTransformer(config, norm_first=norm_first).eval()
        model(source, target, source_mask, output_attentions=True)
        greedy_generate(model, source, max_new_tokens=3, bos_token_id=1, attention_mask=source_mask)
        interop.book_encoder_to_torch(model.encoder)
    TransformerForSequenceClassification(config).eval()(source, source_mask)
    make_reversal_batch(batch, 3, 6, torch.Generator().manual_seed(0))


def _the_parts_on_a_small_batch() -> None:
    torch.manual_seed(0)
    sizes = TransformerConfig(**BOOK_EXAMPLE_SIZES)
    batch, target_length, source_length = 2, 5, 7
    RelativePositionBias(sizes.num_attention_heads, num_buckets=8, max_distance=16)(target_length, source_length)
    # The parts today's decoders assemble: an RMS norm and a gated (SwiGLU) feed-forward network.
    hidden = torch.randn(batch, target_length, sizes.hidden_size)
    make_norm(sizes.hidden_size, 1e-6, kind="rms_norm")(hidden)
    GatedFeedForward(sizes.hidden_size, sizes.intermediate_size)(hidden)


#: The running examples of the core, the parts, the book and BERT (the families add theirs).
CORE_EXAMPLES: tuple[RunningExample, ...] = (
    RunningExample(
        "bert",
        '"time flies like an arrow" ([CLS] and [SEP] included: 7 tokens) through the pretrained checkpoint, '
        "with eager and with SDPA attention",
        {"B": 1, "T": 7, "S": 7, "H": 12, "D": 32, "E": 384, "F": 1536, "L": 6},
        _bert_on_the_sentence,
    ),
    RunningExample(
        "book",
        "a batch of 2 random token sequences (5 target and 7 source tokens, the second source padded by 2) "
        "through a small model: hidden size 24, 4 heads of 6, feed-forward width 40, vocabulary 50, 2 layers",
        {"B": 2, "T": 5, "S": 7, "H": 4, "D": 6, "E": 24, "F": 40, "V": 50, "L": 2, "C": 3},
        _the_book_on_a_small_batch,
    ),
    RunningExample(
        "parts",
        "T5's relative bias for 5 queries and 7 keys, and an RMS norm and a gated feed-forward network on a "
        "(2, 5, 24) batch, with the book example's sizes",
        {"B": 2, "T": 5, "S": 7, "H": 4, "D": 6, "E": 24, "F": 40},
        _the_parts_on_a_small_batch,
    ),
)


#: The running examples, in the order their records are taken (a line keeps the first example's values): the
#: core's, then each family's (:mod:`lt_site.families`).
RUNNING_EXAMPLES: tuple[RunningExample, ...] = CORE_EXAMPLES + families.collect("EXAMPLES")


def site_trace(package_root: str | Path | None = None, cache: Sequence[Any] | None = None) -> dict[str, Any]:
    """Run every running example (:data:`RUNNING_EXAMPLES`) and return the records as JSON-ready data.

    Args:
        package_root: The package's folder (default: ``literate_transformer``'s); paths in the result are
            relative to it.
        cache: The arguments of an :class:`lt_site.deps.ItemCache` that keeps each example's trace with the
            record of what its run reached: only the examples whose code changed run again.

    Returns:
        What :func:`lt_site.trace.merge_traces` returns.
    """
    root = Path(package_root) if package_root is not None else Path(interop.__file__).resolve().parent
    items = {example.name: (lambda example=example: trace_example(example, root)) for example in RUNNING_EXAMPLES}
    if cache is None:
        return merge_traces({name: run() for name, run in items.items()})
    # What lists the examples: the site's tooling as imported, and the folder of the families' modules.
    listing = [module.__file__ for name, module in sys.modules.items() if name.partition(".")[0] == "lt_site"]
    listing.append(str(Path(families.__file__).parent))
    return merge_traces(ItemCache(*cache).compute(items, listing=listing))
