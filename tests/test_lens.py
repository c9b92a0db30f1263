"""The lens: run_with_cache keeps what transformers reports, patch changes exactly what it names, on every family.

The cache of a run is compared with ``transformers``' own ``output_hidden_states`` and ``output_attentions``
for the same converted model (a Llama, a BERT, a BART); then every family the package builds runs under both
functions once: its attention probabilities are probabilities, a patch that returns its input changes
nothing, and a clean run's activation patched into a corrupted run gives the clean run's output exactly.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import transformers
from shapes import BART, BERT, LLAMA_GROUPED

import literate_transformer as lt
from literate_transformer.core.records import FamilyRecord, records

ATOL = 1e-5


def ids(vocab_size: int, length: int = 7, seed: int = 0) -> torch.Tensor:
    """Two rows of ``length`` random ids from 3 up (clear of the special ids), unpadded."""
    return torch.randint(3, vocab_size, (2, length), generator=torch.Generator().manual_seed(seed))


def hf_and_ours(randomize, config_class, model_class, **fields):
    config = config_class(**fields, attn_implementation="eager")
    torch.manual_seed(0)
    hf = randomize(model_class(config))
    return hf, lt.from_hf(hf)


def assert_close(actual, expected, name):
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0, msg=name)


# ---------------------------------------------------------------------------
# The cache is what transformers reports
# ---------------------------------------------------------------------------
def test_a_llamas_cache_is_transformers_hidden_states_and_attentions(randomize):
    hf, ours = hf_and_ours(randomize, transformers.LlamaConfig, transformers.LlamaForCausalLM, **LLAMA_GROUPED)
    input_ids = ids(LLAMA_GROUPED["vocab_size"])
    outputs, cache = lt.lens.run_with_cache(ours, input_ids=input_ids)
    with torch.no_grad():
        expected = hf(input_ids=input_ids, output_hidden_states=True, output_attentions=True)
    layers = LLAMA_GROUPED["num_hidden_layers"]
    # The embeddings, every layer's output, and the last one after the final norm (as HuggingFace reports it).
    names = ["model.embed_tokens", *(f"model.layers.{i}" for i in range(layers - 1)), "model.norm"]
    assert len(expected.hidden_states) == len(names)
    for name, hidden in zip(names, expected.hidden_states, strict=True):
        assert_close(cache[name], hidden, name)
    for layer in range(layers):
        assert_close(cache.attentions(layer), expected.attentions[layer], f"attentions {layer}")
    assert torch.equal(cache["lm_head"], outputs.logits)
    # transformers' own Llama, under the lens: the same names hold the same tensors.
    with torch.no_grad():
        _, hf_cache = lt.lens.run_with_cache(hf, input_ids=input_ids)
    shared = [name for name in hf_cache.keys() if name in cache]
    # Every module transformers' Llama runs, this one runs under the same name (older releases of transformers
    # kept a rotary module in each attention: the angles here are the stack's, computed once).
    unshared = [name for name in hf_cache.keys() if name not in cache]
    assert all(name.endswith(".self_attn.rotary_emb") for name in unshared), unshared
    assert len(shared) > 20 and "model.layers.1.mlp.down_proj" in shared
    for name in shared:
        assert_close(cache[name], hf_cache[name], name)
    # The layers' hidden states are what a LayerOutput leads with, and detached.
    assert not any(cache[name].requires_grad for name in cache.keys())


def test_berts_cache_is_transformers_hidden_states_and_attentions(randomize):
    sizes = BERT("5_heads_gelu_new")
    hf, ours = hf_and_ours(randomize, transformers.BertConfig, transformers.BertForMaskedLM, **sizes)
    input_ids = ids(sizes["vocab_size"])
    _, cache = lt.lens.run_with_cache(ours, input_ids=input_ids)
    with torch.no_grad():
        expected = hf(input_ids=input_ids, output_hidden_states=True, output_attentions=True)
    names = ["bert.embeddings", *(f"bert.encoder.layer.{i}" for i in range(sizes["num_hidden_layers"]))]
    for name, hidden in zip(names, expected.hidden_states, strict=True):
        assert_close(cache[name], hidden, name)
    for layer, probabilities in enumerate(expected.attentions):
        assert_close(cache.attentions(layer), probabilities, f"attentions {layer}")


def test_barts_cache_is_transformers_per_stack_and_its_cross_attentions_are_addressed_by_kind(randomize):
    sizes = BART("scaled_5_and_3_heads")
    special = dict(pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    hf, ours = hf_and_ours(
        randomize, transformers.BartConfig, transformers.BartForConditionalGeneration, **sizes, **special
    )
    inputs = dict(input_ids=ids(sizes["vocab_size"]), decoder_input_ids=ids(sizes["vocab_size"], 5, seed=1))
    _, cache = lt.lens.run_with_cache(ours, **inputs)
    with torch.no_grad():
        expected = hf(**inputs, output_hidden_states=True, output_attentions=True)
    for stack in ("encoder", "decoder"):
        count = sizes[f"{stack}_layers"]
        names = [f"model.{stack}.layernorm_embedding", *(f"model.{stack}.layers.{i}" for i in range(count))]
        for name, hidden in zip(names, getattr(expected, f"{stack}_hidden_states"), strict=True):
            assert_close(cache[name], hidden, name)
        for layer, probabilities in enumerate(getattr(expected, f"{stack}_attentions")):
            assert_close(cache.attentions(layer, stack=stack), probabilities, f"{stack} attentions {layer}")
    for layer, probabilities in enumerate(expected.cross_attentions):
        assert_close(cache.attentions(layer, kind="cross"), probabilities, f"cross attentions {layer}")
        assert cache.attentions(layer, stack="decoder", kind="cross") is cache.attentions(layer, kind="cross")
    # The token table both stacks share ran twice: the encoder's ids first, then the decoder's.
    source, target = cache.calls("model.shared")
    assert source.shape[1] == 7 and target.shape[1] == 5 and cache["model.shared"] is source
    # An encoder-decoder's attentions need their stack.
    with pytest.raises(
        ValueError,
        match="pass stack='encoder' or 'decoder'.*encoder_attentions of 2 layers, decoder_attentions of 1 layer,",
    ):
        cache.attentions(0)


# ---------------------------------------------------------------------------
# Every family the package builds, once: (config, model, sizes, the first layer's module, seq2seq), from its record
# ---------------------------------------------------------------------------
def _family(family: FamilyRecord):
    """A family's running example as its record gives it: ``None`` for the config where this release of
    ``transformers`` lacks the family; the config of the family's own file where ``transformers`` has none
    (GPT-3's)."""
    module = importlib.import_module(f"literate_transformer.{family.module}")
    if family.since is None:
        config = getattr(module, family.config)
    else:
        config = getattr(transformers, family.config) if family.in_transformers() else None
    sizes = dict(family.sizes, **family.ids)
    return config, getattr(module, family.example_model), sizes, family.lens_layer, family.branch == "encoder-decoder"


FAMILIES = {key: _family(family) for key, family in records().items() if family.lens_layer}


def test_the_table_covers_every_registered_family():
    from literate_transformer.models import registry

    registered = {registry.model_class(name).__module__.rpartition(".")[2] for name in registry.supported()}
    assert registered <= set(FAMILIES)


def main_output(outputs) -> torch.Tensor:
    return outputs.logits if getattr(outputs, "logits", None) is not None else outputs.last_hidden_state


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_caches_patches_and_is_restored(family):
    config_class, model_class, sizes, layer, seq2seq = FAMILIES[family]
    if config_class is None:
        pytest.skip(f"this release of transformers has no config for {family}")
    torch.manual_seed(0)
    model = model_class(config_class(**sizes)).eval()
    vocab_size = model.config.vocab_size
    target = {"decoder_input_ids": ids(vocab_size, 5, seed=2)} if seq2seq else {}
    clean, corrupted = ids(vocab_size, seed=0), ids(vocab_size, seed=1)
    with torch.no_grad():
        outputs, cache = lt.lens.run_with_cache(model, input_ids=clean, **target)
        # Every layer's probabilities: (B, H, T, S), each row summing to 1.
        stacks = ("encoder", "decoder") if seq2seq else (None,)
        for stack in stacks:
            probabilities = cache.attentions(0, stack=stack)
            assert probabilities.dim() == 4 and probabilities.shape[0] == 2
            assert_close(probabilities.sum(-1), torch.ones(probabilities.shape[:-1]), f"{family} {stack}")
        assert layer in cache and cache[layer].shape[:2] == (2, 7)
        # A patch of every module that returns its input changes nothing ...
        with lt.lens.patch(model, dict.fromkeys(cache.keys(), lambda hidden: hidden)):
            assert torch.equal(main_output(model(input_ids=clean, **target)), main_output(outputs))
        # ... and the clean run's first layer, patched into a corrupted run, gives the clean run's output.
        assert not torch.equal(main_output(model(input_ids=corrupted, **target)), main_output(outputs))
        with lt.lens.patch(model, {layer: lambda hidden: cache[layer]}):
            assert torch.equal(main_output(model(input_ids=corrupted, **target)), main_output(outputs))
    assert not any(module._forward_hooks for module in model.modules())


# ---------------------------------------------------------------------------
# Patching positions, names, composition
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_llama():
    return lt.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_GROUPED)).eval()


@torch.no_grad()
def test_a_patched_position_changes_that_position_and_the_later_ones_only(small_llama):
    vocab_size = LLAMA_GROUPED["vocab_size"]
    clean, corrupted = ids(vocab_size, seed=0), ids(vocab_size, seed=1)
    clean_outputs, cache = lt.lens.run_with_cache(small_llama, names="model.layers.0", input_ids=clean)
    assert cache.keys() == ["model.layers.0"]
    corrupted_logits = small_llama(input_ids=corrupted).logits

    def restore_position_4(hidden):
        hidden = hidden.clone()
        hidden[:, 4] = cache["model.layers.0"][:, 4]
        return hidden

    with lt.lens.patch(small_llama, {"model.layers.0": restore_position_4}):
        patched = small_llama(input_ids=corrupted).logits
    # A causal model: the positions before 4 never read it.
    assert torch.equal(patched[:, :4], corrupted_logits[:, :4])
    assert not torch.equal(patched[:, 4:], corrupted_logits[:, 4:])
    # Patched at every position, the corrupted run is the clean one.
    with lt.lens.patch(small_llama, {"model.layers.0": lambda hidden: cache["model.layers.0"]}):
        assert torch.equal(small_llama(input_ids=corrupted).logits, clean_outputs.logits)


@torch.no_grad()
def test_a_cache_inside_a_patch_records_the_patched_output_and_a_shared_module_answers_to_each_name(small_llama):
    input_ids = ids(LLAMA_GROUPED["vocab_size"])
    with lt.lens.patch(small_llama, {"model.layers.0.mlp": torch.zeros_like}):
        _, cache = lt.lens.run_with_cache(small_llama, names=["model.layers.0.mlp"], input_ids=input_ids)
    assert not cache["model.layers.0.mlp"].any()
    bart_model = lt.BartModel(transformers.BartConfig(**BART("one_layer_each"))).eval()
    _, cache = lt.lens.run_with_cache(
        bart_model, names=["encoder.embed_tokens"], input_ids=input_ids % 40, decoder_input_ids=input_ids % 40
    )
    assert len(cache.calls("encoder.embed_tokens")) == 2


@torch.no_grad()
def test_the_cache_reads_as_a_mapping_and_says_what_it_holds(small_llama):
    outputs, cache = lt.lens.run_with_cache(small_llama, input_ids=ids(LLAMA_GROUPED["vocab_size"]))
    names = [name for name, _ in small_llama.named_modules() if name]
    # Every module that ran, in the order they returned: a layer's parts before the layer; the containers never ran.
    assert set(cache.keys()) == set(names) - {"model.layers"} and len(cache) == len(cache.keys())
    assert cache.keys().index("model.layers.0.self_attn") < cache.keys().index("model.layers.0")
    assert "model.norm" in cache and "model.layers" not in cache and list(cache) == cache.keys()
    assert repr(cache).startswith(f"ActivationCache({len(cache)} modules: 'model.embed_tokens', ")
    assert repr(cache).endswith("'lm_head'; attentions: attentions of 2 layers)")
    # A model without output_attentions, or a call that says False, records none.
    _, plain = lt.lens.run_with_cache(torch.nn.Linear(2, 2), input=torch.ones(1, 2))
    assert repr(plain) == "ActivationCache(0 modules; attentions: none)"
    with pytest.raises(ValueError, match="recorded: none"):
        plain.attentions(0)
    outputs, cache = lt.lens.run_with_cache(small_llama, input_ids=ids(50), output_attentions=False)
    assert outputs.attentions is None
    with pytest.raises(ValueError, match="recorded: none"):
        cache.attentions(0)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------
@torch.no_grad()
def test_bad_input_is_refused_with_a_message_that_names_it(small_llama):
    input_ids = ids(LLAMA_GROUPED["vocab_size"])
    with pytest.raises(ValueError, match=r"no module 'model.layer.0'; the nearest names: 'model.layers.0'"):
        lt.lens.run_with_cache(small_llama, names=["model.layer.0"], input_ids=input_ids)
    with pytest.raises(ValueError, match=r"no module 'model.layers.0.mpl'; the nearest names: 'model.layers.0.mlp'"):
        lt.lens.patch(small_llama, {"model.layers.0.mpl": torch.zeros_like})
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got str"):
        lt.lens.run_with_cache("gpt2", input_ids=input_ids)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got dict"):
        lt.lens.patch({}, {})
    with pytest.raises(TypeError, match="patches must be a mapping"):
        lt.lens.patch(small_llama, [("model.norm", torch.zeros_like)])
    with pytest.raises(TypeError, match="the patch of 'model.norm' must be callable"):
        lt.lens.patch(small_llama, {"model.norm": 0.0})
    with pytest.raises(TypeError, match="module names are strings, got 3"):
        lt.lens.run_with_cache(small_llama, names=[3], input_ids=input_ids)
    _, cache = lt.lens.run_with_cache(small_llama, input_ids=input_ids)
    with pytest.raises(
        KeyError, match=r"the cache holds no module 'model.layer.1'; the nearest names: 'model.layers.1'"
    ):
        cache["model.layer.1"]
    with pytest.raises(IndexError, match=r"layer must be an int in \[-2, 2\): attentions has 2 layers, got 2"):
        cache.attentions(2)
    with pytest.raises(ValueError, match=r"stack='encoder', kind='self'; recorded: attentions of 2 layers \("):
        cache.attentions(0, stack="encoder")
    # During the forward: a tensor of another shape, or no tensor at all.
    with pytest.raises(ValueError, match=r"'model.layers.0' returned shape \(2, 6, 32\), .* have shape \(2, 7, 32\)"):
        with lt.lens.patch(small_llama, {"model.layers.0": lambda hidden: hidden[:, :-1]}):
            small_llama(input_ids=input_ids)
    with pytest.raises(TypeError, match="the patch of 'model.norm' must return a tensor, got list"):
        with lt.lens.patch(small_llama, {"model.norm": lambda hidden: hidden.tolist()}):
            small_llama(input_ids=input_ids)
    assert not any(module._forward_hooks for module in small_llama.modules())


def test_the_hooks_are_removed_when_the_block_raises(small_llama):
    names = ["model.layers.0", "model.layers.1.mlp", "model.norm"]
    with pytest.raises(RuntimeError, match="the body failed"):
        with lt.lens.patch(small_llama, dict.fromkeys(names, torch.zeros_like)):
            assert all(len(small_llama.get_submodule(name)._forward_hooks) == 1 for name in names)
            raise RuntimeError("the body failed")
    # And when the forward itself fails (ids outside the vocabulary) under run_with_cache.
    with pytest.raises(ValueError, match="input_ids must be token ids"):
        lt.lens.run_with_cache(small_llama, input_ids=torch.tensor([[1, 1000]]))
    assert all(len(module._forward_hooks) == 0 for module in small_llama.modules())


@torch.no_grad()
def test_a_patch_of_a_module_no_forward_called_is_an_error_not_a_silent_no_op(small_llama):
    input_ids = ids(LLAMA_GROUPED["vocab_size"])
    # The block ran the model, but nothing in it called the patched module: nothing was patched.
    with pytest.raises(ValueError, match=r"no forward inside the block called 'model.layers'"):
        with lt.lens.patch(small_llama, {"model.layers": torch.zeros_like, "model.norm": lambda h: h}):
            small_llama(input_ids=input_ids)
    # A block that called it passes; one that raised keeps its own error.
    with lt.lens.patch(small_llama, {"model.norm": lambda h: h}):
        small_llama(input_ids=input_ids)
    with pytest.raises(RuntimeError, match="its own"):
        with lt.lens.patch(small_llama, {"model.layers": torch.zeros_like}):
            raise RuntimeError("its own")
    assert all(len(module._forward_hooks) == 0 for module in small_llama.modules())
