"""Shared fixtures: the offline environment, tiny configs, randomised weights and the checkpoint."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from literate_transformer.core.checkpoints import use_offline_environment

if TYPE_CHECKING:
    from torch import nn

    from literate_transformer.core.config import TransformerConfig

# PyTorch is imported where a fixture needs it, not here: under pytest-xdist this file is also imported by the
# process that starts the workers, and the workers start once it is read (importing PyTorch first held them back
# about 1.2 s).

# --doctest-modules would import every conftest.py as a module named "conftest" (and clash): they hold no doctests.
collect_ignore_glob = ["conftest.py", "*/conftest.py"]

# jsonschema (which nbformat validates notebooks with) checks the "iri" string format with rfc3987_syntax where
# that is installed, compiling its grammars on import: about 4 s in each process.  No notebook schema uses a string
# format, so it is not imported (the docs' conf.py does the same for the build).
sys.modules.setdefault("rfc3987_syntax", None)

# Tests never reach for the model hub and never print progress bars (the project's one definition).
use_offline_environment()

# Under pytest-xdist (`nox -s tests` runs one worker a core) each worker computes on one thread: two workers of two
# threads each on two cores spin-wait on each other's threads at every small operation (OpenMP), many times slower.
if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch

    torch.set_num_threads(1)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """Collect with Python's cycle collector off, then freeze what collecting made.

    Collecting imports PyTorch, ``transformers`` and every test module: millions of objects that live until the
    process ends.  Each full pass of the cycle collector walks all of them (about 0.3 s each, five seconds a
    worker over a run), and finds nothing to free there.  :func:`gc.freeze` moves them out of its reach; the
    objects the tests make are collected as before, and an object that dies is freed by its reference count,
    frozen or not.  From then on, what survives a full pass is frozen too (the modules the tests import, the
    session's models), so that the next pass walks only what was made since; a ring that dies after surviving
    one stays until the worker ends (the workers' peak memory was the same, 2.4 GB, measured with and without).
    """
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        if _freeze_after_a_full_pass not in gc.callbacks:
            gc.callbacks.append(_freeze_after_a_full_pass)
        gc.enable()


def _freeze_after_a_full_pass(phase: str, info: dict[str, int]) -> None:
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state.

    Without CUDA this seeds the CPU's generator alone: ``torch.manual_seed`` would also queue the seed
    for each device that has not started, formatting the caller's whole stack once per device to do so (0.3 ms
    to 0.4 ms under a fixture's 40 or so frames, two thousand times a run).
    """
    import torch

    if torch.cuda.is_available():
        torch.manual_seed(0)
    else:
        torch.default_generator.manual_seed(0)


@pytest.fixture
def tiny_config() -> Callable[..., TransformerConfig]:
    """A factory of small configs without dropout: ``tiny_config(hidden_size=32, ...)`` overrides fields.

    The sizes are the book's running example (small, and all distinct, so that a swapped dimension cannot
    hide), without dropout.
    """
    from shapes import TINY_SIZES

    from literate_transformer.core.config import TransformerConfig

    tiny = dict(TINY_SIZES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def make(**changes) -> TransformerConfig:
        return TransformerConfig(**{**tiny, **changes})

    return make


@pytest.fixture(scope="session")
def randomize() -> Callable[[nn.Module], nn.Module]:
    """Give every parameter random values, layer norms included, and switch to evaluation mode.

    (A stateless function, so session-scoped: module-scoped fixtures may use it too.)

    Fresh layer norms are the identity (weight 1, bias 0) and fresh biases are
    small, which could hide a swapped or missing layer norm in a comparison.
    """
    import torch
    from torch import nn

    @torch.no_grad()
    def apply(module: nn.Module, scale: float = 0.3) -> nn.Module:
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm):
                sub.weight.normal_(1.0, 0.2)
                sub.bias.normal_(0.0, 0.2)
            else:
                # Linear and embedding layers, and any other module's own weights (HuggingFace's Conv1D).
                for parameter in sub.parameters(recurse=False):
                    parameter.normal_(0.0, scale)
        return module.eval()

    return apply


@pytest.fixture(scope="session")
def tokenizer():
    from literate_transformer import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def hf_model():
    """HuggingFace's BertModel on the offline checkpoint, eager attention, eval mode."""
    from literate_transformer import load_hf_model

    return load_hf_model()


class HFApi:
    """The differences between ``transformers`` 4.x and 5.x that the comparisons meet, in one place.

    Tests that compare with HuggingFace call these instead of checking
    versions themselves.
    """

    @staticmethod
    def hidden_states(layer_output):
        """A HuggingFace layer's output tensor: 5.x returns it, 4.x a tuple whose first entry it is."""
        return layer_output[0] if isinstance(layer_output, tuple) else layer_output

    @staticmethod
    def greedy_generate(hf_model, input_ids, attention_mask, max_new_tokens: int, forced_bos_token_id=None):
        """Plain greedy decoding with ``generate()``: the most likely token at every step, nothing else.

        ``do_sample=False`` and ``num_beams=1`` select greedy search.  A
        model's generation config may also force tokens (BART's config forces
        ``eos_token_id`` at the last step, ``forced_eos_token_id=2``, and some
        checkpoints ``forced_bos_token_id``) or ban repeats
        (``no_repeat_ngram_size``): those are switched off, and ``min_length``
        set to 0, so that only ``eos_token_id`` (stop, then pad with
        ``pad_token_id``) and ``max_new_tokens`` shape the output.  A first
        token the caller forces (``forced_bos_token_id``: M2M-100's target
        language) is passed on.
        """
        generation_config = hf_model.generation_config
        generation_config.forced_bos_token_id = None
        generation_config.forced_eos_token_id = None
        generation_config.no_repeat_ngram_size = 0
        generation_config.min_length = 0
        forced = {} if forced_bos_token_id is None else {"forced_bos_token_id": forced_bos_token_id}
        return hf_model.generate(
            input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            **forced,
        )

    @staticmethod
    def m2m_100_position_ids(input_ids, padding_idx: int, past_key_values_length: int = 0):
        """M2M-100's position rows from the ids: 5.x has the function on its embedding class, 4.x in the module."""
        from transformers.models.m2m_100 import modeling_m2m_100

        function = getattr(
            modeling_m2m_100.M2M100SinusoidalPositionalEmbedding, "create_position_ids_from_input_ids", None
        )
        function = function or modeling_m2m_100.create_position_ids_from_input_ids
        return function(input_ids, padding_idx, past_key_values_length)

    @staticmethod
    def bigbird_fallback_masks_padding() -> bool:
        """Whether transformers' BigBird-Pegasus hides padding after falling back to full attention on a short input.

        4.x's ``BigBirdPegasusEncoderAttention.forward`` reads ``config.attention_type`` (still
        ``"block_sparse"``) where the module has switched itself to full attention, and passes its full
        attention no mask: padding is attended to.  5.x reads the module's own ``attention_type``.
        """
        import inspect

        from transformers.models.bigbird_pegasus import modeling_bigbird_pegasus

        source = inspect.getsource(modeling_bigbird_pegasus.BigBirdPegasusEncoderAttention.forward)
        return "self.config.attention_type" not in source

    @staticmethod
    def t5_attention_with_bias(config):
        """A ``T5Attention`` that owns the relative attention bias: 5.x (and late 4.x) also take its ``layer_idx``."""
        import inspect

        from transformers.models.t5.modeling_t5 import T5Attention

        if "layer_idx" in inspect.signature(T5Attention.__init__).parameters:
            return T5Attention(config, has_relative_attention_bias=True, layer_idx=0)
        return T5Attention(config, has_relative_attention_bias=True)


@pytest.fixture(scope="session")
def hf_api() -> HFApi:
    return HFApi()


@pytest.fixture(scope="session")
def smollm2():
    """The trained decoder, ``(tokenizer, model)``: SmolLM2-135M-Instruct read from its verified GGUF file, once."""
    from literate_transformer import load_decoder

    return load_decoder()
