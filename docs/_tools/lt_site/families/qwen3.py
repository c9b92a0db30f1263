"""Qwen3 on the site: its running example and its proof (the badge)."""

from __future__ import annotations

import transformers

from literate_transformer.models.qwen3 import Qwen3ForCausalLM

from .decoder_branch import decoder_family
from .llama import LLAMA_DIMS, LLAMA_SIZES

#: Llama's example sizes; Qwen3's config names its head size.
QWEN3_SIZES = dict(LLAMA_SIZES, head_dim=LLAMA_SIZES["hidden_size"] // LLAMA_SIZES["num_attention_heads"])

# transformers before 4.51 has no Qwen3: nothing to build the example from, nothing to prove it against.
if hasattr(transformers, "Qwen3Config"):
    #: The running example's model, in words, for the page.
    MODEL = "a small random Qwen3 (4 query heads sharing 2 key/value heads)"
    EXAMPLES, PROOFS = decoder_family(Qwen3ForCausalLM, transformers.Qwen3Config, QWEN3_SIZES, MODEL, LLAMA_DIMS)
