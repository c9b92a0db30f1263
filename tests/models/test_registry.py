"""from_hf: one registry, filled by the families, turns a transformers model into the package's equivalent."""

from __future__ import annotations

import pytest
import torch
from shapes import BART

ATOL = 1e-5


def _tiny_hf_models():
    import transformers

    bert = transformers.BertConfig(
        vocab_size=40, hidden_size=12, num_hidden_layers=1, num_attention_heads=3, intermediate_size=20
    )
    gpt2 = transformers.GPT2Config(
        vocab_size=40, n_embd=12, n_layer=1, n_head=3, n_positions=16, bos_token_id=1, eos_token_id=2
    )
    bart = transformers.BartConfig(**BART("one_layer_each"))
    return {
        "BertModel": transformers.BertModel(bert),
        "GPT2Model": transformers.GPT2Model(gpt2),
        "GPT2LMHeadModel": transformers.GPT2LMHeadModel(gpt2),
        "BartModel": transformers.BartModel(bart),
        "BartForConditionalGeneration": transformers.BartForConditionalGeneration(bart),
    }


def test_from_hf_returns_the_packages_equivalent_in_eval_mode_with_the_same_weights():
    import literate_transformer as lt

    expected = {
        "BertModel": lt.BertModel,
        "GPT2Model": lt.GPT2Model,
        "GPT2LMHeadModel": lt.GPT2LMHeadModel,
        "BartModel": lt.BartModel,
        "BartForConditionalGeneration": lt.BartForConditionalGeneration,
    }
    input_ids = torch.tensor([[5, 6, 7, 8]])
    for name, hf_model in _tiny_hf_models().items():
        ours = lt.from_hf(hf_model.train())
        assert type(ours) is expected[name], name
        assert not ours.training, name
        # Same weights: the same number of trained parameters (BART's final_logits_bias is a buffer in both),
        # and the same output.
        count = sum(parameter.numel() for parameter in hf_model.parameters())
        assert sum(parameter.numel() for parameter in ours.parameters() if parameter.requires_grad) == count, name
        hf_model.eval()
        with torch.no_grad():
            if name.startswith("Bart"):
                decoder_input_ids = torch.tensor([[2, 9]])
                theirs = hf_model(input_ids=input_ids, decoder_input_ids=decoder_input_ids)
                output = ours(input_ids, decoder_input_ids=decoder_input_ids)
            else:
                theirs, output = hf_model(input_ids), ours(input_ids)
        field = "logits" if hasattr(hf_model, "lm_head") else "last_hidden_state"
        torch.testing.assert_close(getattr(output, field), getattr(theirs, field), atol=ATOL, rtol=0, msg=name)


def test_from_hf_refuses_other_models_and_lists_what_it_supports():
    import transformers

    import literate_transformer as lt

    classifier = transformers.BertForSequenceClassification(
        transformers.BertConfig(vocab_size=40, hidden_size=12, num_hidden_layers=1, num_attention_heads=3)
    )
    for model in (classifier, torch.nn.Linear(2, 2)):
        with pytest.raises(
            TypeError, match="it converts the transformers models .*BertModel, .*GPT2LMHeadModel"
        ) as error:
            lt.from_hf(model)
        # The class refused comes first, before the long list.
        assert str(error.value).startswith(f"from_hf cannot convert a {type(model).__module__}.{type(model).__name__}:")
        listed = str(error.value)
        assert all(name in listed for name in ("BartForConditionalGeneration", "GPT2LMHeadModel", type(model).__name__))


def test_a_family_registers_itself_and_no_name_twice():
    from literate_transformer.models import registry

    names = registry.supported()
    assert {"BertModel", "GPT2Model", "GPT2LMHeadModel", "BartModel", "BartForConditionalGeneration"} <= set(names)
    impostor = type("GPT2Model", (registry.ConvertsFromHF, torch.nn.Module), {})
    with pytest.raises(ValueError, match="GPT2Model is registered twice"):
        registry.register(impostor)
    with pytest.raises(TypeError, match="register takes the family's model classes"):
        registry.register("GPT2Model")


def test_every_family_converts_through_the_one_conversion():
    from literate_transformer.models import registry

    for name in registry.supported():
        model = registry.model_class(name)
        # The procedure is the base's; a family declares data and, at most, the config it reads and a check.
        assert model.from_hf.__func__ is registry.ConvertsFromHF.from_hf.__func__, name
        assert model.build_from_hf.__func__ is registry.ConvertsFromHF.build_from_hf.__func__, name


def test_importing_the_package_loads_no_family():
    import subprocess
    import sys

    code = (
        "import sys, literate_transformer as lt; "
        "print(sorted(m for m in sys.modules if m.startswith('literate_transformer.')), 'torch' in sys.modules)"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # The manifest, and the records it reads its families' chapters from (the models package's __init__, which
    # holds them, imports no family): no family, no torch.
    expected = ["core", "core.records", "manifest", "models"]
    assert output.strip() == f"{['literate_transformer.' + name for name in expected]} False"


def test_each_family_file_registers_exactly_the_classes_its_record_names():
    from pathlib import Path

    from literate_transformer.core.records import ROOT, records
    from literate_transformer.models import registry

    registry.supported()  # imports every family the records name: each registers what its file says
    registered: dict[str, set[str]] = {}
    for name, model in registry.REGISTRY.items():
        registered.setdefault(model.__module__.rpartition(".")[2], set()).add(name)
    named = {key: set(found.models) for key, found in records().items() if found.models}
    assert registered == named
    # A family is its file and its record: neither without the other.
    folder = Path(registry.__file__).parent
    files = {path.stem for path in folder.glob("*.py")} - {"__init__", "registry"}
    assert files == set(records()) - {ROOT}


def test_dir_lists_what_lt_offers_every_model_included_and_each_name_resolves():
    import literate_transformer as lt
    from literate_transformer.models import registry

    listed = set(dir(lt))
    assert {"BertModel", "LlamaForCausalLM", "GPT2LMHeadModel", "load_decoder", "encode", "from_hf"} <= listed
    assert not {"Any", "annotations", "importlib"} & listed
    assert all(getattr(lt, name) is not None for name in listed)
    models = {name for name in registry.supported() if registry.model_class(name) is not None}
    assert models <= listed


def test_each_public_name_is_documented_under_the_object_it_is():
    # The API reference links lt.<name> to this dotted name; it must be where the object lives.
    import importlib

    import literate_transformer as lt

    targets = lt._public_targets()
    assert set(targets) == set(dir(lt)) - {"__version__", *lt._MODULES}
    for name, target in targets.items():
        module, _, attribute = target.rpartition(".")
        assert getattr(importlib.import_module(module), attribute) is getattr(lt, name), name
