"""The shapes the tests compare on: one table per family, a row per shape, named for what it exercises.

The checkpoint's own shape (6 layers, 12 heads of 32, GELU, epsilon 1e-12)
is tested against the checkpoint itself; these rows are the other shapes a
port could get wrong: odd head counts, head sizes that are not powers of
two, other epsilons and activations, more segment types, a padding id that
is not 0, encoder and decoder of different depths and widths.  Every size
in a row differs from the others where it can, so that two swapped
dimensions cannot hide.  ``BERT("3_heads_relu")`` gives a row as the
keyword arguments of the family's HuggingFace config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from literate_transformer.core.records import ROOT, record

#: The tests' tiny configuration: the sizes of the book's running example (the root's record's: small, and all
#: distinct, so that a swapped dimension cannot hide), so that a badge and its test measure the same model.
TINY_SIZES = dict(record(ROOT).sizes)


@dataclass(frozen=True)
class Shapes:
    """A table of shapes: the config fields (the columns) and a row of values per named shape."""

    fields: tuple[str, ...]
    rows: dict[str, tuple[Any, ...]]

    def __call__(self, name: str, **changes: Any) -> dict[str, Any]:
        """The row ``name`` as config keyword arguments, with ``changes`` on top.

        >>> T5("3_heads_of_8", is_decoder=True)["num_heads"]
        3
        """
        return {**dict(zip(self.fields, self.rows[name], strict=True)), **changes}

    @property
    def names(self) -> list[str]:
        return sorted(self.rows)


BERT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "layer_norm_eps",
    "type_vocab_size",
    "max_position_embeddings",
    "pad_token_id",
)
# fmt: off
BERT = Shapes(BERT_FIELDS, {
    # name                    V   E   L  H  F   activation  eps    types  positions  pad
    "5_heads_gelu_new":     (97, 30, 2, 5, 52, "gelu_new", 1e-5,  3,     24,        0),
    "3_heads_relu":         (61, 24, 1, 3, 40, "relu",     1e-7,  4,     16,        0),
    "2_heads_gelu_pad_1":   (50, 32, 2, 2, 64, "gelu",     1e-12, 2,     12,        1),
    "decoder_5_heads":      (83, 30, 2, 5, 48, "gelu_new", 1e-6,  3,     20,        0),
    "bad_input":            (20, 8,  2, 2, 16, "gelu",     1e-12, 2,     6,         0),
    "4_heads_of_4":         (50, 16, 2, 4, 32, "gelu",     1e-12, 2,     512,       0),
})
# fmt: on

GPT2_FIELDS = (
    "vocab_size",
    "n_embd",
    "n_layer",
    "n_head",
    "n_inner",
    "n_positions",
    "layer_norm_epsilon",
    "activation_function",
)
# fmt: off
GPT2 = Shapes(GPT2_FIELDS, {
    # name                          V   E   L  H  F     positions  eps   activation
    "5_heads_gelu_new":           (97, 30, 2, 5, 52,   20,        1e-4, "gelu_new"),
    "3_heads_relu_default_inner": (61, 18, 1, 3, None, 14,        1e-6, "relu"),
})
# fmt: on

BART_FIELDS = (
    "vocab_size",
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "max_position_embeddings",
    "scale_embedding",
    "activation_function",
)
# fmt: off
BART = Shapes(BART_FIELDS, {
    # name                            V   E   layers heads  FFN     positions  scaled  activation
    "scaled_5_and_3_heads":         (83, 30, 2, 1,  5, 3,  44, 36,  20,        True,   "gelu"),
    "unscaled_relu_deeper_decoder": (57, 16, 1, 2,  2, 4,  24, 40,  12,        False,  "relu"),
    "one_layer_each":               (40, 12, 1, 1,  3, 2,  20, 24,  16,        False,  "gelu"),
    "deeper_encoder_gelu_new":      (61, 24, 2, 1,  3, 4,  44, 36,  64,        True,   "gelu_new"),
    "deeper_decoder_3_and_4_heads": (53, 24, 1, 2,  3, 4,  20, 28,  24,        False,  "gelu"),
})
# fmt: on

T5_FIELDS = ("d_model", "d_kv", "num_heads", "relative_attention_num_buckets", "relative_attention_max_distance")
# fmt: off
T5 = Shapes(T5_FIELDS, {
    # name              E   D  H  buckets  max_distance
    "3_heads_of_8":   (24, 8, 3, 12,      40),
})
# fmt: on


#: The two rows Llama and its descendants (Mistral, Qwen3) are compared on, by the fields their configs share:
#: grouped-query attention over two layers, and one layer whose head size (10) is not hidden_size / heads.
#: Each family's table adds its heads, key/value heads and what is its own.
LLAMA_GROUPED = dict(
    vocab_size=61,
    hidden_size=32,
    intermediate_size=44,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=24,
)
LLAMA_HEAD_OF_10 = dict(
    vocab_size=47, hidden_size=24, intermediate_size=40, num_hidden_layers=1, head_dim=10, max_position_embeddings=24
)


def padded_batch(
    vocab_size: int, length: int, padding: tuple[int, ...], pad_token_id: int = 0, seed: int = 1, side: str = "right"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and their attention mask: row ``i`` has ``padding[i]`` padded positions on ``side``.

    The ids are drawn from 3 up, clear of the special ids 0, 1 and 2; padded positions hold ``pad_token_id``.

    >>> ids, mask = padded_batch(10, 4, (0, 1, 3), pad_token_id=1, side="left")
    >>> mask.tolist()
    [[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 0, 1]]
    >>> bool((ids[mask == 0] == 1).all()) and bool((ids[mask == 1] >= 3).all())
    True
    """
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, vocab_size, (len(padding), length), generator=generator)
    attention_mask = torch.ones(len(padding), length, dtype=torch.long)
    for row, count in enumerate(padding):
        if count:
            attention_mask[row, -count:] = 0
    if side == "left":
        attention_mask = attention_mask.flip(1)
    return input_ids.masked_fill(attention_mask == 0, pad_token_id), attention_mask
