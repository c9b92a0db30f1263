"""literate_transformer.visualize: what bertviz gets, the neuron-view model, the heatmaps,
and the site extension that serves the views without a CDN."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest
import torch

from literate_transformer import visualize

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKENS = ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]


def _attentions(layers=2, batch=1, heads=3, queries=7, keys=None):
    keys = queries if keys is None else keys
    return tuple(torch.softmax(torch.randn(batch, heads, queries, keys), dim=-1) for _ in range(layers))


def _params(html: str) -> dict:
    """The JSON data bertviz wrote into a head or model view's HTML."""
    marker = "const params = "
    return json.JSONDecoder().raw_decode(html, html.index(marker) + len(marker))[0]


def _decimals(number: float) -> int:
    text = repr(number)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 0


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ---------------------------------------------------------------------------
# Rounding and the bertviz arguments
# ---------------------------------------------------------------------------
def test_round_attention_picks_one_example_and_rounds_to_three_decimals():
    attentions = _attentions(batch=2)
    rounded = visualize.round_attention(attentions, batch_index=1)
    assert len(rounded) == 2
    for original, layer in zip(attentions, rounded, strict=True):
        assert layer.shape == (1, 3, 7, 7) and layer.dtype == torch.float64 and layer.device.type == "cpu"
        assert (layer - original[1:2].double()).abs().max() <= 5e-4 + 1e-12
        assert max(_decimals(value) for value in layer.flatten().tolist()) <= 3


def test_round_attention_reads_model_outputs_and_stacked_tensors():
    attentions = _attentions()
    from_output = visualize.round_attention(SimpleNamespace(attentions=attentions))
    from_stack = visualize.round_attention(torch.stack(attentions))  # (L, B, H, T, S)
    for a, b in zip(from_output, from_stack, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    ("attentions", "error", "words"),
    [
        ([], ValueError, "output_attentions=True"),
        (SimpleNamespace(attentions=None), ValueError, "output_attentions=True"),
        ("weights", TypeError, "sequence of (B, H, T, S)"),
        ([torch.ones(2, 7, 7)], ValueError, "(B, H, T, S)"),
        ([torch.ones(1, 2, 7, 7, dtype=torch.long)], TypeError, "floating-point"),
        ([torch.ones(1, 2, 7, 7), torch.ones(1, 2, 6, 6)], ValueError, "same shape"),
        ([torch.full((1, 2, 7, 7), float("nan"))], ValueError, "NaN"),
        (torch.ones(1, 2, 7, 7), ValueError, "(L, B, H, T, S)"),
    ],
)
def test_round_attention_rejects_bad_input(attentions, error, words):
    with pytest.raises(error, match=re.escape(words)):
        visualize.round_attention(attentions)


def test_round_attention_rejects_bad_batch_index_and_decimals():
    with pytest.raises(ValueError, match="batch_index"):
        visualize.round_attention(_attentions(batch=2), batch_index=2)
    with pytest.raises(ValueError, match="decimals"):
        visualize.round_attention(_attentions(), decimals=-1)


def test_view_arguments_for_a_sentence_pair():
    attentions = _attentions()
    arguments = visualize.view_arguments(attentions, TOKENS, sentence_b_start=4)
    assert arguments["tokens"] == TOKENS and arguments["sentence_b_start"] == 4
    assert arguments["html_action"] == "return"
    torch.testing.assert_close(arguments["attention"][1], torch.round(attentions[1].double(), decimals=3))


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"tokens": TOKENS[:-1]}, "has 6 tokens but the attention has 7"),
        ({"tokens": TOKENS, "sentence_b_start": 0}, "sentence_b_start"),
        ({"tokens": TOKENS, "sentence_b_start": 7}, "sentence_b_start"),
    ],
)
def test_view_arguments_reject_mismatches(kwargs, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        visualize.view_arguments(_attentions(), **kwargs)


def test_view_arguments_refuse_cross_attention():
    with pytest.raises(ValueError, match="square"):
        visualize.view_arguments(_attentions(queries=3, keys=7), TOKENS)


def test_tokens_must_be_a_list_not_a_string():
    with pytest.raises(TypeError, match="list of token strings"):
        visualize.view_arguments(_attentions(queries=3), "abc")


# ---------------------------------------------------------------------------
# The views' HTML
# ---------------------------------------------------------------------------
def test_head_view_writes_the_rounded_weights_and_the_sentence_parts():
    attentions = _attentions()
    html = visualize.head_view(attentions, TOKENS, sentence_b_start=4, layer=1, heads=[2]).data
    params = _params(html)
    names = [part["name"] for part in params["attention"]]
    assert names == [
        "All",
        "Sentence A -> Sentence A",
        "Sentence B -> Sentence B",
        "Sentence A -> Sentence B",
        "Sentence B -> Sentence A",
    ]
    expected = torch.stack([torch.round(layer[0].double(), decimals=3) for layer in attentions]).tolist()
    assert params["attention"][0]["attn"] == expected
    assert params["attention"][3]["left_text"] == TOKENS[:4] and params["attention"][3]["right_text"] == TOKENS[4:]
    assert params["layer"] == 1 and params["heads"] == [2]


def test_views_get_ids_that_repeat_across_builds_and_differ_within_one(monkeypatch):
    import itertools

    attentions = _attentions()

    def ids_of_two_views():
        # A build starts a fresh kernel: its count of views starts at zero.
        monkeypatch.setattr(visualize, "_views_made", itertools.count())
        first = visualize.head_view(attentions, TOKENS).data
        second = visualize.head_view(attentions, TOKENS).data
        return [set(re.findall(r"bertviz-[0-9a-f]{32}", html)) for html in (first, second)]

    first_build, second_build = ids_of_two_views(), ids_of_two_views()
    assert all(len(ids) == 1 for ids in first_build)
    assert first_build == second_build
    assert first_build[0] != first_build[1]


def test_stable_view_id_refuses_html_without_one_id():
    with pytest.raises(ValueError, match="one bertviz element id"):
        visualize.stable_view_id(SimpleNamespace(data="<div id='bertviz-x'></div>"))


def test_rounding_makes_a_view_much_smaller():
    import bertviz

    torch.manual_seed(0)
    attentions = _attentions(layers=6, heads=12)
    rounded = json.dumps(_params(visualize.head_view(attentions, TOKENS).data))
    full = json.dumps(_params(bertviz.head_view(list(attentions), TOKENS, html_action="return").data))
    # The weights are most of a view's data; bertviz's script (about 14 kB) comes on top of it.
    assert len(full) > 2.5 * len(rounded), (len(full), len(rounded))


def test_head_view_rejects_a_layer_or_head_that_does_not_exist():
    with pytest.raises(ValueError, match="layer"):
        visualize.head_view(_attentions(layers=2), TOKENS, layer=2)
    with pytest.raises(ValueError, match="heads"):
        visualize.head_view(_attentions(heads=3), TOKENS, heads=[3])


def test_model_view_covers_every_layer_and_head():
    params = _params(visualize.model_view(_attentions(layers=3, heads=4), TOKENS).data)
    assert params["include_layers"] == [0, 1, 2] and params["total_heads"] == 4
    assert len(params["attention"][0]["attn"]) == 3
    assert params["display_mode"] == "light"
    with pytest.raises(ValueError, match="display_mode"):
        visualize.model_view(_attentions(), TOKENS, display_mode="blue")


def test_encoder_decoder_view_pairs_each_attention_with_its_tokens():
    source, target = ["3", "1", "4", "1", "5"], ["[BOS]", "5", "1"]
    html = visualize.head_view(
        encoder_attentions=_attentions(queries=5),
        decoder_attentions=_attentions(queries=3),
        cross_attentions=_attentions(queries=3, keys=5),
        encoder_tokens=source,
        decoder_tokens=target,
    ).data
    parts = {part["name"]: part for part in _params(html)["attention"]}
    assert list(parts) == ["Encoder", "Decoder", "Cross"]
    assert parts["Encoder"]["left_text"] == source and parts["Encoder"]["right_text"] == source
    assert parts["Decoder"]["left_text"] == target and parts["Decoder"]["right_text"] == target
    # Cross-attention: decoder queries on the left, encoder keys on the right.
    assert parts["Cross"]["left_text"] == target and parts["Cross"]["right_text"] == source


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({}, ValueError, "at least one"),
        (
            {"cross_attentions": _attentions(queries=3, keys=5), "decoder_tokens": ["a"] * 3},
            ValueError,
            "needs encoder_tokens",
        ),
        (
            {
                "cross_attentions": _attentions(queries=3, keys=5),
                "decoder_tokens": ["a"] * 3,
                "encoder_tokens": ["b"] * 4,
            },
            ValueError,
            "encoder_tokens has 4 tokens",
        ),
    ],
)
def test_encoder_decoder_arguments_reject_mismatches(kwargs, error, words):
    with pytest.raises(error, match=re.escape(words)):
        visualize.encoder_decoder_view_arguments(**kwargs)


def test_a_view_takes_one_kind_of_model_at_a_time():
    with pytest.raises(ValueError, match="not both"):
        visualize.head_view(_attentions(), TOKENS, encoder_attentions=_attentions(), encoder_tokens=TOKENS)
    with pytest.raises(ValueError, match="sentence_b_start"):
        visualize.head_view(encoder_attentions=_attentions(), encoder_tokens=TOKENS, sentence_b_start=2)
    with pytest.raises(ValueError, match="needs tokens"):
        visualize.head_view(_attentions())


# ---------------------------------------------------------------------------
# The neuron view
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def neuron_model():
    return visualize.load_neuron_view_model()


def test_neuron_view_model_computes_what_huggingface_computes(neuron_model, hf_model, tokenizer):
    inputs = tokenizer("time flies like an arrow", "fruit flies like a banana", return_tensors="pt")
    with torch.no_grad():
        hidden, _, layers = neuron_model(inputs["input_ids"], token_type_ids=inputs["token_type_ids"])
        reference = hf_model(**inputs, output_attentions=True)
    assert len(layers) == len(reference.attentions)
    for ours, theirs in zip(layers, reference.attentions, strict=True):
        torch.testing.assert_close(ours["attn"], theirs, atol=1e-5, rtol=0)
    torch.testing.assert_close(hidden, reference.last_hidden_state, atol=1e-4, rtol=0)


def test_neuron_view_opens_the_requested_head_with_rounded_numbers(neuron_model, tokenizer):
    html = visualize.neuron_view(
        "time flies like an arrow", layer=0, head=8, model=neuron_model, tokenizer=tokenizer
    ).data
    marker = "window.bertviz_params = "
    params = json.JSONDecoder().raw_decode(html, html.index(marker) + len(marker))[0]
    assert params["layer"] == 0 and params["head"] == 8
    data = params["attention"]["all"]
    assert data["left_text"] == TOKENS
    heads = neuron_model.config.num_attention_heads
    assert len(data["queries"]) == neuron_model.config.num_hidden_layers and len(data["queries"][0]) == heads

    def floats(value):
        if isinstance(value, float):
            yield value
        elif isinstance(value, list):
            for item in value:
                yield from floats(item)

    numbers = list(floats(data["attn"])) + list(floats(data["queries"])) + list(floats(data["keys"]))
    assert numbers and max(_decimals(number) for number in numbers) <= 3


@pytest.mark.parametrize(
    ("kwargs", "words"), [({"layer": 99}, "layer"), ({"head": -1}, "head"), ({"display_mode": "x"}, "display_mode")]
)
def test_neuron_view_rejects_bad_arguments(neuron_model, tokenizer, kwargs, words):
    with pytest.raises(ValueError, match=words):
        visualize.neuron_view("time flies", model=neuron_model, tokenizer=tokenizer, **kwargs)
    with pytest.raises(ValueError, match="sentence_a"):
        visualize.neuron_view("  ", model=neuron_model, tokenizer=tokenizer)


def _tiny_checkpoint(folder: Path, drop: str | None = None, prefix: str = "") -> dict:
    """A small BERT checkpoint folder (config.json + model.safetensors) for bertviz's model."""
    from bertviz.transformers_neuron_view.modeling_bert import BertConfig, BertModel
    from safetensors.torch import save_file

    config = {
        "model_type": "bert",
        "vocab_size": 50,
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "max_position_embeddings": 16,
        "type_vocab_size": 2,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
    }
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    torch.manual_seed(1)
    state = BertModel(BertConfig.from_dict(config)).state_dict()
    if drop is not None:
        del state[drop]
    save_file({prefix + key: value.contiguous() for key, value in state.items()}, str(folder / "model.safetensors"))
    return state


def test_load_neuron_view_model_loads_every_weight_of_a_prefixed_checkpoint(tmp_path):
    state = _tiny_checkpoint(tmp_path / "tiny", prefix="bert.")
    model = visualize.load_neuron_view_model(tmp_path / "tiny")
    assert model.config.output_attentions is True and not model.training
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, state[name], rtol=0, atol=0)


def test_load_neuron_view_model_refuses_missing_weights(tmp_path):
    _tiny_checkpoint(tmp_path / "tiny", drop="encoder.layer.0.attention.self.query.weight")
    with pytest.raises(
        RuntimeError, match=r"1 parameters are missing, e\.g\. encoder\.layer\.0\.attention\.self\.query\.weight"
    ):
        visualize.load_neuron_view_model(tmp_path / "tiny")


# ---------------------------------------------------------------------------
# Heatmaps
# ---------------------------------------------------------------------------
def test_plot_attention_draws_the_weights_with_token_labels():
    weights = _attentions(layers=1)[0][0, 1]  # (T, S)
    ax = visualize.plot_attention(weights, TOKENS, title="head 1")
    (image,) = ax.get_images()
    torch.testing.assert_close(torch.as_tensor(image.get_array()), weights.double())
    assert [label.get_text() for label in ax.get_yticklabels()] == TOKENS
    assert [label.get_text() for label in ax.get_xticklabels()] == TOKENS
    assert image.get_clim() == (0.0, 1.0) and ax.get_title() == "head 1"


def test_plot_attention_cross_attention_uses_key_tokens_for_columns():
    weights = torch.softmax(torch.randn(3, 5), dim=-1)
    ax = visualize.plot_attention(
        weights.numpy(), ["a", "b", "c"], ["1", "2", "3", "4", "5"], annotate=True, vmin=None, vmax=None
    )
    assert [label.get_text() for label in ax.get_xticklabels()] == ["1", "2", "3", "4", "5"]
    assert len(ax.texts) == 15  # one annotation per cell
    assert ax.get_images()[0].get_clim() == pytest.approx((weights.min().item(), weights.max().item()))


def test_plot_attention_labels_its_axes_and_colour_bar_as_asked():
    ax = visualize.plot_attention(torch.eye(2), ["a", "b"])
    assert (ax.get_ylabel(), ax.get_xlabel()) == ("query", "key")
    ax = visualize.plot_attention(
        torch.eye(2), ["a", "b"], axis_labels=("output at i", "input at j"), colorbar_label="weight"
    )
    assert (ax.get_ylabel(), ax.get_xlabel()) == ("output at i", "input at j")
    assert ax.figure.axes[-1].get_ylabel() == "weight"  # the colour bar's own axes


@pytest.mark.parametrize(
    ("weights", "tokens", "error", "words"),
    [
        (torch.ones(2, 7, 7), TOKENS, ValueError, "select one head"),
        (torch.ones(7, 7), TOKENS[:3], ValueError, "has 3 tokens"),
        ([[1.0]], ["a"], TypeError, "torch.Tensor or numpy array"),
    ],
)
def test_plot_attention_rejects_bad_input(weights, tokens, error, words):
    with pytest.raises(error, match=re.escape(words)):
        visualize.plot_attention(weights, tokens)


def test_plot_attention_heads_draws_one_heatmap_per_head():
    weights = _attentions(layers=1, heads=5)[0][0]  # (H, T, S)
    figure = visualize.plot_attention_heads(weights, TOKENS, ncols=3, title="layer 0")
    drawn = [ax for ax in figure.axes if ax.get_images()]
    assert len(drawn) == 5 and len(figure.axes) == 6
    for head, ax in enumerate(drawn):
        torch.testing.assert_close(torch.as_tensor(ax.get_images()[0].get_array()), weights[head].double())
        assert ax.get_title() == f"head {head}"


def test_plot_what_if_draws_both_variants_on_one_scale_and_their_difference():
    first = torch.tensor([[0.0, 1.0], [0.5, 0.5]])
    second = torch.tensor([[0.2, 0.8], [0.5, 2.0]])
    before = plt.get_fignums()
    figures = visualize.plot_what_if(
        first, second, ["a", "b"], ["x", "y"], names=("on", "off"), title="t", value_label="w"
    )
    # Drawn for glueing, not for pyplot: a notebook shows them only where they are put.
    assert plt.get_fignums() == before
    assert list(figures) == ["on", "off", "difference"]
    images = {name: figure.axes[0].images[0] for name, figure in figures.items()}
    torch.testing.assert_close(torch.as_tensor(images["on"].get_array()).double(), first.double())
    torch.testing.assert_close(torch.as_tensor(images["off"].get_array()).double(), second.double())
    assert images["on"].get_clim() == images["off"].get_clim() == (0.0, 2.0)
    torch.testing.assert_close(
        torch.as_tensor(images["difference"].get_array()).double(), (first - second).abs().double()
    )
    assert images["difference"].get_clim() == pytest.approx((0.0, 1.5))
    assert [tick.get_text() for tick in figures["on"].axes[0].get_xticklabels()] == ["x", "y"]
    assert (figures["on"].axes[0].get_ylabel(), figures["on"].axes[0].get_xlabel()) == ("query", "key")
    assert [figure.axes[-1].get_ylabel() for figure in figures.values()] == ["w", "w", "|difference|"]
    assert [figure.axes[0].get_title() for figure in figures.values()] == ["t: on", "t: off", "t: difference"]


def test_plot_what_if_takes_a_difference_of_its_own_and_draws_a_zero_one():
    same = torch.ones(2, 3)
    figures = visualize.plot_what_if(
        same,
        same,
        ["a", "b"],
        ["x", "y", "z"],
        names=("p", "q"),
        title="t",
        value_label="v",
        difference=torch.zeros(2, 3),
    )
    low, high = figures["difference"].axes[0].images[0].get_clim()
    assert low == 0.0 and 0.0 < high < 1e-30


def test_plot_what_if_gives_each_variant_its_own_scale_and_writes_the_values_when_asked():
    small = torch.tensor([[5.0, 10.0], [8.0, 12.0]])
    large = torch.tensor([[5.0, 100.0], [200.0, 40.0]])
    figures = visualize.plot_what_if(
        small, large, ["a", "b"], names=("post", "pre"), title="t", value_label="v", shared_scale=False, annotate=True
    )
    # On one scale (0 to 200) the small variant would be drawn almost white; on its own it spans 0 to 12.
    assert figures["post"].axes[0].images[0].get_clim() == (0.0, 12.0)
    assert figures["pre"].axes[0].images[0].get_clim() == (0.0, 200.0)
    written = sorted(text.get_text() for text in figures["post"].axes[0].texts)
    assert written == ["10.00", "12.00", "5.00", "8.00"]
    assert (
        not visualize.plot_what_if(small, large, ["a", "b"], names=("p", "q"), title="t", value_label="v")["p"]
        .axes[0]
        .texts
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"second": torch.ones(2, 3)}, ValueError, "one shape"),
        ({"second": [[1.0, 2.0]]}, TypeError, "second must be a torch.Tensor"),
        ({"names": ("on", "on")}, ValueError, "names must be two distinct"),
        ({"names": ("on", "difference")}, ValueError, "names must be two distinct"),
        ({"rows": ["a"]}, ValueError, "rows"),
        ({"difference": torch.ones(3, 2)}, ValueError, "difference must have shape"),
        ({"shared_scale": "no"}, TypeError, "shared_scale and annotate must be bools"),
    ],
)
def test_plot_what_if_rejects_bad_input(kwargs, error, words):
    arguments = {"first": torch.ones(2, 2), "second": torch.ones(2, 2), "rows": ["a", "b"], "names": ("on", "off")}
    arguments.update(kwargs)
    with pytest.raises(error, match=words):
        visualize.plot_what_if(title="t", value_label="v", **arguments)


def _bar_heights_and_grey(axes):
    bars = axes.patches
    return [bar.get_height() for bar in bars], [bar.get_hatch() == "//" for bar in bars]


def test_plot_next_tokens_draws_the_filtered_probabilities_and_greys_what_a_filter_removes():
    scores = torch.tensor([2.0, 4.0, 1.0, 3.0, 0.0, -1.0])
    words = ["a", "b", "c", "d", "e", "f"]
    settings = {"as is": {}, "cold": {"temperature": 0.5}, "top-k 2": {"top_k": 2}, "top-p": {"top_p": 0.5}}
    figure = visualize.plot_next_tokens(scores, words, settings, top=4, title="next")
    axes = figure.axes
    assert [ax.get_title() for ax in axes] == list(settings)
    # The most likely tokens first, in every panel.
    assert [tick.get_text() for tick in axes[0].get_xticklabels()] == ["b", "d", "a", "c"]
    order = [1, 3, 0, 2]
    heights, grey = _bar_heights_and_grey(axes[0])
    torch.testing.assert_close(torch.tensor(heights, dtype=torch.float32), scores.softmax(-1)[order])
    assert not any(grey)
    heights, _ = _bar_heights_and_grey(axes[1])
    torch.testing.assert_close(torch.tensor(heights, dtype=torch.float32), (scores / 0.5).softmax(-1)[order])
    # top-k 2 keeps b and d, renormalised; a and c are grey at their unfiltered probability.
    heights, grey = _bar_heights_and_grey(axes[2])
    assert grey == [False, False, True, True]
    kept = scores[[1, 3]].softmax(-1)
    torch.testing.assert_close(
        torch.tensor(heights, dtype=torch.float32), torch.cat([kept, scores.softmax(-1)[[0, 2]]])
    )
    # top-p 0.5: b alone holds more than half.
    assert _bar_heights_and_grey(axes[3])[1] == [False, True, True, True]
    assert figure._suptitle.get_text() == "next"


def test_plot_next_tokens_draws_a_removed_token_at_the_temperature_top_k_and_top_p_read():
    scores = torch.tensor([2.0, 4.0, 1.0, 3.0, 0.0, -1.0])
    settings = {
        "0.5, then top-k 2": {"temperature": 0.5, "top_k": 2},
        "2, then top-p 0.5": {"temperature": 2.0, "top_p": 0.5},
    }
    figure = visualize.plot_next_tokens(scores, list("abcdef"), settings, top=4)
    order = torch.tensor([1, 3, 0, 2])
    for ax, temperature in zip(figure.axes, (0.5, 2.0), strict=True):
        heights, grey = _bar_heights_and_grey(ax)
        heights = torch.tensor(heights, dtype=torch.float32)
        tempered = (scores / temperature).softmax(-1)[order]
        # Grey bars: the probability at the panel's temperature, not the model's own (temperature 1).
        torch.testing.assert_close(heights[torch.tensor(grey)], tempered[torch.tensor(grey)])
        # At one temperature, what a filter removed is never likelier than what it kept.
        assert any(grey) and heights[torch.tensor(grey)].max() <= heights[~torch.tensor(grey)].min()


def test_plot_next_tokens_draws_into_a_figure_it_is_given():
    figure = plt.figure()
    assert visualize.plot_next_tokens(torch.tensor([0.0, 1.0, 2.0]), ["a", "b", "c"], top=2, figure=figure) is figure
    assert len(figure.axes) == 1 and len(figure.axes[0].patches) == 2
    with pytest.raises(ValueError, match="figure must be an empty matplotlib Figure"):
        visualize.plot_next_tokens(torch.tensor([0.0, 1.0, 2.0]), ["a", "b", "c"], top=2, figure=figure)
    plt.close(figure)


def test_plot_next_tokens_takes_a_decoding_function_for_the_labels():
    figure = visualize.plot_next_tokens(torch.tensor([0.0, 1.0, 2.0]), lambda ids: f"<{ids[0]}>", top=2)
    assert [tick.get_text() for tick in figure.axes[0].get_xticklabels()] == ["<2>", "<1>"]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"scores": torch.zeros(2, 3)}, TypeError, "scores must be a 1-d tensor of floats"),
        ({"scores": torch.tensor([1, 2])}, TypeError, "scores must be a 1-d tensor of floats"),
        ({"top": 0}, ValueError, r"top must be an int in \[1, 3\]"),
        ({"top": 4}, ValueError, r"top must be an int in \[1, 3\]"),
        ({"settings": {}}, ValueError, "settings must be a non-empty dict"),
        ({"settings": {"x": {"min_p": 0.1}}}, ValueError, r"settings\['x'\] names filters \['min_p'\]"),
        ({"label": 3}, TypeError, "label must be a function of a list of ids"),
    ],
)
def test_plot_next_tokens_rejects_bad_input(kwargs, error, words):
    arguments = {"scores": torch.tensor([0.0, 1.0, 2.0]), "label": ["a", "b", "c"], "top": 2, **kwargs}
    with pytest.raises(error, match=words):
        visualize.plot_next_tokens(**arguments)


def test_show_saves_the_figures_beside_the_script_where_there_is_no_display(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "sphinx_gallery", raising=False)
    plt.close("all")
    for _ in range(2):
        plt.figure()
        plt.plot([0, 1], [1, 0])
    written = visualize.show(tmp_path / "plot_example.py")
    assert written == [str(tmp_path / "plot_example_1.png"), str(tmp_path / "plot_example_2.png")]
    assert all((tmp_path / name).stat().st_size > 0 for name in ("plot_example_1.png", "plot_example_2.png"))
    assert f"no display: figure saved to {tmp_path / 'plot_example_1.png'}" in capsys.readouterr().out
    assert plt.get_fignums() == []
    # A second call goes on numbering: nothing is written over.
    plt.figure()
    assert visualize.show(tmp_path / "plot_example.py") == [str(tmp_path / "plot_example_3.png")]


def test_show_names_the_files_after_the_script_python_runs(tmp_path, monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "sphinx_gallery", raising=False)
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "plot_run.py")])
    plt.figure()
    assert visualize.show() == [str(tmp_path / "plot_run_1.png")]


def test_show_leaves_the_figures_to_sphinx_gallery_when_it_runs_the_script(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "sphinx_gallery", sys)  # any module: what counts is that one is loaded
    figure = plt.figure()
    assert visualize.show(tmp_path / "plot_example.py") == []
    assert not list(tmp_path.iterdir())
    plt.close(figure)


def test_every_gallery_script_shows_through_show_and_runs_one_cpu_thread():
    for script in sorted((ROOT / "gallery").glob("plot_*.py")):
        text = script.read_text()
        assert "plt.show()" not in text, f"{script.name}: plt.show() draws nothing on a machine without a display"
        assert "show()" in text, f"{script.name}: no visualize.show()"
        assert "torch.set_num_threads(1)" in text, f"{script.name}: the CPU's threads are not set as the build's"


def test_plot_attention_patterns_shares_one_colour_scale_with_a_bar_up_to_the_largest_count():
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    counts = torch.tensor([[3, 1, 0, 0], [3, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 1]])
    figure = visualize.plot_attention_patterns({"causal": causal, "counted": counts})
    panels, bar = figure.axes[:2], figure.axes[2]
    images = [ax.get_images()[0] for ax in panels]
    # One scale: a read once is the same colour in both panels, and the bar's ticks run to the largest count.
    assert images[0].norm.vmax == images[1].norm.vmax >= 3
    assert [tick for tick in bar.get_yticks() if tick == int(tick)] == [0, 1, 2, 3]
    assert "reads" in bar.get_ylabel()
    torch.testing.assert_close(torch.tensor(images[1].get_array()), counts)
    plt.close(figure)


def test_plot_attention_patterns_refuses_a_pattern_that_is_not_a_matrix():
    with pytest.raises(TypeError, match=r"patterns\['x'\] must be a \(T, S\) tensor"):
        visualize.plot_attention_patterns({"x": torch.ones(4)})
    with pytest.raises(TypeError, match="patterns must be a non-empty dict"):
        visualize.plot_attention_patterns({})
