"""LoRA (literate_transformer.lora) equals peft's LoraConfig model: initialisation, outputs, adapter gradients,
merging, the saved adapter both ways, the count of trainable numbers; and bad arguments are refused by name.

Two models: a random ``transformers`` Llama (4 query heads sharing 2 key/value heads) and a random BERT, each
converted with ``from_hf``; peft adapts the ``transformers`` model, this module the package's.  The same seed
draws the same A in both; B, zero at the start (which would hide a wrong B or a wrong scale), is then given the
same random values on both sides.  float32, padded batches, compared at the real tokens.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict
from safetensors.torch import load_file
from shapes import BERT, LLAMA_GROUPED
from torch import nn

from literate_transformer import from_hf, lora

#: peft calls a method of transformers' models that transformers 5 deprecates (not this module's to fix).
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

ATOL = 1e-5
LLAMA_TARGETS = ("q_proj", "v_proj")
BERT_TARGETS = ("query", "value")
RANK, ALPHA = 8, 16


@pytest.fixture(scope="module")
def llamas(randomize):
    """A random transformers Llama (eager attention) and the package's copy of it."""
    config = transformers.LlamaConfig(
        **LLAMA_GROUPED, bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager"
    )
    torch.manual_seed(0)
    hf = randomize(transformers.LlamaForCausalLM(config))
    return hf, from_hf(hf)


@pytest.fixture(scope="module")
def berts(randomize):
    """A random transformers BertModel (eager attention) and the package's copy of it."""
    config = transformers.BertConfig(**BERT("5_heads_gelu_new"), attn_implementation="eager")
    torch.manual_seed(0)
    hf = randomize(transformers.BertModel(config))
    return hf, from_hf(hf)


def _batch(vocab_size: int) -> dict[str, torch.Tensor]:
    """Two sequences of 7 ids, the second padded after 4."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(3, vocab_size, (2, 7), generator=generator)
    attention_mask = torch.ones(2, 7, dtype=torch.long)
    attention_mask[1, 4:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def _peft_key(name: str, piece: str) -> str:
    """The name peft gives adapter ``piece`` (``lora_A``, ``lora_B``) of layer ``name`` in its model."""
    return f"base_model.model.{name}.{piece}.default.weight"


def _adapted_pair(models, targets, seed: int = 3):
    """peft's model and the package's, adapted from the same seed, then B given the same random values on both."""
    hf, ours = (copy.deepcopy(model) for model in models)
    torch.manual_seed(seed)
    theirs = get_peft_model(hf, LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=list(targets), lora_dropout=0.0))
    torch.manual_seed(seed)
    ours = lora.add(ours, rank=RANK, alpha=ALPHA, targets=targets)
    parameters = dict(theirs.named_parameters())
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, adapter in lora.adapters(ours).items():
            b = 0.1 * torch.randn(adapter.lora_B.weight.shape, generator=generator)
            adapter.lora_B.weight.copy_(b)
            parameters[_peft_key(name, "lora_B")].copy_(b)
    return theirs, ours


def _llama_logits(model, batch) -> torch.Tensor:
    return model(**batch).logits[batch["attention_mask"].bool()]


def _bert_states(model, batch) -> torch.Tensor:
    return model(**batch).last_hidden_state[batch["attention_mask"].bool()]


def _loss(outputs: torch.Tensor) -> torch.Tensor:
    """A loss that reads every output feature with its own weight."""
    weights = torch.randn(outputs.shape[-1], generator=torch.Generator().manual_seed(2))
    return (outputs * weights).tanh().sum()


# ---------------------------------------------------------------------------
# Equal to peft
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(("family", "targets"), [("llamas", LLAMA_TARGETS), ("berts", BERT_TARGETS)])
def test_the_same_seed_draws_pefts_a_and_a_zero_b(family, targets, request):
    hf, ours = (copy.deepcopy(model) for model in request.getfixturevalue(family))
    torch.manual_seed(5)
    theirs = dict(
        get_peft_model(hf, LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=list(targets))).named_parameters()
    )
    torch.manual_seed(5)
    found = lora.adapters(lora.add(ours, rank=RANK, alpha=ALPHA, targets=targets))
    assert len(found) == 2 * 2  # two targets in each of two layers
    for name, adapter in found.items():
        assert torch.equal(adapter.lora_A.weight, theirs[_peft_key(name, "lora_A")]), name
        assert torch.equal(adapter.lora_B.weight, torch.zeros_like(adapter.lora_B.weight))
        assert adapter.scaling == ALPHA / RANK


def test_a_llamas_logits_equal_pefts_on_a_padded_batch(llamas):
    theirs, ours = _adapted_pair(llamas, LLAMA_TARGETS)
    batch = _batch(llamas[0].config.vocab_size)
    with torch.no_grad():
        assert (_llama_logits(ours, batch) - _llama_logits(theirs, batch)).abs().max() <= ATOL
        # The adapters change the output: the equality is not the frozen model's with itself.
        assert (_llama_logits(ours, batch) - _llama_logits(llamas[1], batch)).abs().max() > 1e-3


def test_a_llamas_adapter_gradients_equal_pefts(llamas):
    theirs, ours = _adapted_pair(llamas, LLAMA_TARGETS)
    batch = _batch(llamas[0].config.vocab_size)
    _loss(_llama_logits(ours, batch)).backward()
    _loss(_llama_logits(theirs, batch)).backward()
    parameters = dict(theirs.named_parameters())
    for name, parameter in ours.named_parameters():
        if not parameter.requires_grad:
            assert parameter.grad is None, name
            continue
        layer, piece, _ = name.rsplit(".", 2)
        reference = parameters[_peft_key(layer, piece)].grad
        assert reference.abs().max() > 1e-4, name  # A's gradient too: B is not zero
        assert (parameter.grad - reference).abs().max() <= ATOL, name


def test_a_berts_hidden_states_and_adapter_gradients_equal_pefts(berts):
    theirs, ours = _adapted_pair(berts, BERT_TARGETS)
    batch = _batch(berts[0].config.vocab_size)
    mine, reference = _bert_states(ours, batch), _bert_states(theirs, batch)
    assert (mine - reference).abs().max() <= ATOL
    _loss(mine).backward()
    _loss(reference).backward()
    parameters = dict(theirs.named_parameters())
    for name, adapter in lora.adapters(ours).items():
        for piece in ("lora_A", "lora_B"):
            gradient, expected = getattr(adapter, piece).weight.grad, parameters[_peft_key(name, piece)].grad
            assert expected.abs().max() > 1e-4 and (gradient - expected).abs().max() <= ATOL, f"{name}.{piece}"


@pytest.mark.parametrize(("family", "targets"), [("llamas", LLAMA_TARGETS), ("berts", BERT_TARGETS)])
def test_the_trainable_count_is_pefts_and_only_the_adapters_train(family, targets, request):
    theirs, ours = _adapted_pair(request.getfixturevalue(family), targets)
    assert lora.trainable_parameters(ours) == theirs.get_nb_trainable_parameters()
    trainable = {name for name, parameter in ours.named_parameters() if parameter.requires_grad}
    assert trainable == {f"{name}.{piece}.weight" for name in lora.adapters(ours) for piece in ("lora_A", "lora_B")}


# ---------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------
def test_merged_equals_unmerged_and_leaves_plain_linear_layers(llamas):
    _, ours = _adapted_pair(llamas, LLAMA_TARGETS)
    batch = _batch(llamas[0].config.vocab_size)
    with torch.no_grad():
        unmerged = _llama_logits(ours, batch)
        merged = lora.merge(ours)
        assert (_llama_logits(merged, batch) - unmerged).abs().max() <= ATOL
    assert not lora.adapters(merged)
    assert {type(merged.get_submodule(name)) for name, _ in llamas[1].named_modules() if name.endswith("_proj")} == {
        nn.Linear
    }
    assert merged.state_dict().keys() == llamas[1].state_dict().keys()


def test_merged_weights_equal_pefts_merge_and_unload(llamas):
    theirs, ours = _adapted_pair(llamas, LLAMA_TARGETS)
    mine, reference = lora.merge(ours).state_dict(), theirs.merge_and_unload().state_dict()
    assert mine.keys() == reference.keys()
    assert max((mine[key] - reference[key]).abs().max() for key in mine) <= 1e-6


def test_generation_over_the_static_cache_reads_the_adapters(llamas):
    # The static cache fuses q, k and v from each layer's weight: an adapter's weight is W0 + (alpha/r) B A.
    _, ours = _adapted_pair(llamas, LLAMA_TARGETS, seed=4)
    prompt = _batch(llamas[0].config.vocab_size)["input_ids"][:1]
    static = ours.generate(prompt, max_new_tokens=6)
    dynamic = ours.generate(prompt, max_new_tokens=6, cache_implementation="dynamic")
    merged = lora.merge(ours).generate(prompt, max_new_tokens=6)
    assert torch.equal(static, dynamic) and torch.equal(static, merged)


# ---------------------------------------------------------------------------
# Saving and loading, as peft does
# ---------------------------------------------------------------------------
def test_the_saved_adapter_has_pefts_keys_and_peft_loads_it_to_the_same_logits(llamas, tmp_path):
    theirs, ours = _adapted_pair(llamas, LLAMA_TARGETS)
    lora.save(ours, tmp_path)
    assert load_file(str(tmp_path / lora.WEIGHTS_NAME)).keys() == get_peft_model_state_dict(theirs).keys()
    assert json.loads((tmp_path / lora.CONFIG_NAME).read_text())["target_modules"] == sorted(LLAMA_TARGETS)
    loaded = PeftModel.from_pretrained(copy.deepcopy(llamas[0]), tmp_path)
    batch = _batch(llamas[0].config.vocab_size)
    with torch.no_grad():
        assert (_llama_logits(loaded, batch) - _llama_logits(ours, batch)).abs().max() <= ATOL


def test_an_adapter_peft_saved_loads_to_pefts_logits(berts, tmp_path):
    theirs, _ = _adapted_pair(berts, BERT_TARGETS)
    theirs.save_pretrained(tmp_path)
    ours = lora.load(copy.deepcopy(berts[1]), tmp_path)
    batch = _batch(berts[0].config.vocab_size)
    with torch.no_grad():
        assert (_bert_states(ours, batch) - _bert_states(theirs, batch)).abs().max() <= ATOL


def test_loading_a_folder_without_an_adapter_names_the_missing_file(berts, tmp_path):
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        lora.load(copy.deepcopy(berts[1]), tmp_path)


def test_loading_a_config_of_another_kind_names_the_field(berts, tmp_path):
    theirs, _ = _adapted_pair(berts, BERT_TARGETS)
    theirs.save_pretrained(tmp_path)
    config = json.loads((tmp_path / lora.CONFIG_NAME).read_text())
    (tmp_path / lora.CONFIG_NAME).write_text(json.dumps({**config, "use_rslora": True}))
    with pytest.raises(ValueError, match="use_rslora"):
        lora.load(copy.deepcopy(berts[1]), tmp_path)


def test_saving_adapters_of_two_ranks_is_refused_naming_the_rank(berts, tmp_path):
    ours = lora.add(copy.deepcopy(berts[1]), rank=4, targets="query")
    lora.add(ours, rank=2, targets="value")
    with pytest.raises(ValueError, match=r"differ in r \(\[2, 4\]\)"):
        lora.save(ours, tmp_path)


# ---------------------------------------------------------------------------
# Adding adapters
# ---------------------------------------------------------------------------
def test_adapters_added_later_leave_the_earlier_ones_trainable(berts):
    ours = lora.add(copy.deepcopy(berts[1]), targets="query")
    lora.add(ours, targets="value")
    assert all(adapter.lora_A.weight.requires_grad for adapter in lora.adapters(ours).values())
    assert len(lora.adapters(ours)) == 4


def test_a_rank_of_zero_is_refused_naming_rank(berts):
    with pytest.raises(ValueError, match="rank must be a positive int, got 0"):
        lora.add(copy.deepcopy(berts[1]), rank=0, targets=BERT_TARGETS)


def test_a_negative_rank_is_refused_naming_rank(berts):
    with pytest.raises(ValueError, match="rank must be a positive int, got -2"):
        lora.add(copy.deepcopy(berts[1]), rank=-2, targets=BERT_TARGETS)


@pytest.mark.parametrize("rank", [8.0, "8", True])
def test_a_rank_that_is_not_an_int_is_refused_naming_rank(berts, rank):
    with pytest.raises(ValueError, match="rank must be a positive int"):
        lora.add(copy.deepcopy(berts[1]), rank=rank, targets=BERT_TARGETS)


def test_a_rank_above_a_layers_smaller_width_is_refused_naming_rank_and_the_layer(llamas):
    # v_proj reads 32 features and writes 2 key/value heads of 8: 16.
    with pytest.raises(
        ValueError, match=r"rank must be at most .* model.layers.0.self_attn.v_proj is 32 -> 16, got rank=17"
    ):
        lora.add(copy.deepcopy(llamas[1]), rank=17, targets=LLAMA_TARGETS)


@pytest.mark.parametrize("alpha", [0, -16, float("inf"), float("nan"), "16", True])
def test_an_alpha_that_is_not_a_positive_finite_number_is_refused_naming_alpha(berts, alpha):
    with pytest.raises(ValueError, match="alpha must be a positive finite number"):
        lora.add(copy.deepcopy(berts[1]), alpha=alpha, targets=BERT_TARGETS)


@pytest.mark.parametrize("dropout", [1.0, -0.1, "0.1"])
def test_a_dropout_outside_zero_to_one_is_refused_naming_dropout(berts, dropout):
    with pytest.raises(ValueError, match="dropout must be a probability in"):
        lora.add(copy.deepcopy(berts[1]), dropout=dropout, targets=BERT_TARGETS)


def test_a_target_that_names_no_module_is_refused_with_the_nearest_names(llamas):
    with pytest.raises(
        ValueError, match=r"targets: no module of the model is named 'q_prj'; the nearest names: 'q_proj'"
    ):
        lora.add(copy.deepcopy(llamas[1]), targets=("q_prj", "v_proj"))


def test_a_target_that_is_not_a_linear_layer_is_refused_naming_it(llamas):
    with pytest.raises(TypeError, match=r"targets: 'model.layers.0.self_attn' is a \w+, not a torch.nn.Linear"):
        lora.add(copy.deepcopy(llamas[1]), targets="self_attn")


def test_a_layer_that_already_has_an_adapter_is_refused_naming_it(llamas):
    ours = lora.add(copy.deepcopy(llamas[1]), targets=LLAMA_TARGETS)
    with pytest.raises(ValueError, match="targets: model.layers.0.self_attn.q_proj already has a LoRA adapter"):
        lora.add(ours, targets="q_proj")


@pytest.mark.parametrize("targets", [(), ("q_proj", 3)])
def test_targets_that_are_not_module_names_are_refused_naming_targets(llamas, targets):
    with pytest.raises((TypeError, ValueError), match="targets must"):
        lora.add(copy.deepcopy(llamas[1]), targets=targets)


def test_a_model_that_is_not_a_module_is_refused_naming_model():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        lora.add({"q_proj": nn.Linear(4, 4)})


def test_a_model_with_4_bit_layers_is_refused(llamas):
    from literate_transformer.core.gguf import quantize
    from literate_transformer.parts.int4 import BlockRows, PackedLinear, levels_of

    model = copy.deepcopy(llamas[1])
    attention = model.model.layers[0].self_attn
    rows, columns = attention.q_proj.weight.shape
    blocks = quantize(attention.q_proj.weight.detach(), "Q4_1").view(rows, -1)
    # What load_decoder(weights="int4") swaps in, for every linear layer: one is enough to refuse.
    attention.q_proj = PackedLinear.from_levels(levels_of(BlockRows("q", "Q4_1", blocks, columns)))
    with pytest.raises(ValueError, match="4-bit layers .*weights='float32'"):
        lora.add(model)


def test_merging_or_saving_a_model_without_adapters_is_refused(berts, tmp_path):
    with pytest.raises(ValueError, match="no LoRA adapter to merge"):
        lora.merge(copy.deepcopy(berts[1]))
    with pytest.raises(ValueError, match="no LoRA adapter to save"):
        lora.save(berts[1], tmp_path)
