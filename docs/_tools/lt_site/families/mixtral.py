"""Mixtral on the site: its running example (4 experts, 2 per token) and its proof (the badge)."""

from __future__ import annotations

from transformers import MixtralConfig

from literate_transformer.models.mixtral import MixtralForCausalLM

from .decoder_branch import decoder_family
from .llama import LLAMA_DIMS, LLAMA_SIZES

#: Llama's example sizes, and the mixture: 4 experts in every layer, each token sent to 2 of them.
MIXTRAL_SIZES = dict(LLAMA_SIZES, num_local_experts=4, num_experts_per_tok=2)
#: The running example's model, in words, for the page.
MODEL = "a small random Mixtral (4 query heads sharing 2 key/value heads; 4 experts, 2 per token)"

EXAMPLES, PROOFS = decoder_family(MixtralForCausalLM, MixtralConfig, MIXTRAL_SIZES, MODEL, LLAMA_DIMS)
