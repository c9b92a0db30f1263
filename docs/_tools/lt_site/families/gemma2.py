"""Gemma 2 on the site: its running example (a local layer, then a global one) and its proof (the badge)."""

from __future__ import annotations

import transformers

from literate_transformer.models.gemma2 import Gemma2ForCausalLM

from .decoder_branch import decoder_family
from .llama import LLAMA_DIMS, LLAMA_SIZES

#: Llama's example sizes; Gemma 2's config names its head size and its query scale (both D, as in Gemma-2-2B,
#: where both are 256), and a window of 3 for its local layers.  Its soft-caps keep their defaults (50 and 30).
_HEAD_DIM = LLAMA_SIZES["hidden_size"] // LLAMA_SIZES["num_attention_heads"]
GEMMA2_SIZES = dict(LLAMA_SIZES, head_dim=_HEAD_DIM, query_pre_attn_scalar=_HEAD_DIM, sliding_window=3)

# transformers before 4.42 has no Gemma 2: nothing to build the example from, nothing to prove it against.
if hasattr(transformers, "Gemma2Config"):
    #: The running example's model, in words, for the page.
    MODEL = (
        "a small random Gemma 2 (4 query heads sharing 2 key/value heads; a local layer of window 3, then a global one)"
    )
    EXAMPLES, PROOFS = decoder_family(Gemma2ForCausalLM, transformers.Gemma2Config, GEMMA2_SIZES, MODEL, LLAMA_DIMS)
