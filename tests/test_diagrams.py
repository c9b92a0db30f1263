"""The diagrams are drawn from the modules: they list every sub-layer, in the order forward runs them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import torch
from torch import nn

from literate_transformer import diagrams
from literate_transformer.book.decoder import EncoderDecoderTransformer, TransformerDecoderLayer
from literate_transformer.book.encoder import TransformerEncoderLayer
from literate_transformer.core.outputs import LayerOutput
from literate_transformer.models.bert import BertLayer, BertSelfAttention

SVG = "{http://www.w3.org/2000/svg}"


class LayerWithoutSecondResidual(TransformerEncoderLayer):
    """The first source notebook's forward: FFN(LN_2(x + MHA(LN_1(x)))), no residual around the FFN."""

    def forward(self, x, attention_mask=None, output_attentions=False):
        hidden_state = self.layer_norm_1(x)
        x = x + self.attention(hidden_state, attention_mask=attention_mask).hidden_states
        x = self.layer_norm_2(x)
        x = self.feed_forward(x)
        return LayerOutput(x, None)


def names(steps):
    return [step.name for step in steps]


def texts(diagram):
    root = ET.fromstring(diagram.svg)
    return [element.text for element in root.iter(f"{SVG}text")]


def test_the_encoder_layer_diagram_lists_every_sub_layer(tiny_config):
    layer = TransformerEncoderLayer(tiny_config())
    drawn = texts(diagrams.layer_diagram(layer))
    for name, child in layer.named_children():
        if not isinstance(child, nn.Dropout):
            assert name in drawn, f"{name} is not in the diagram"


def test_pre_ln_and_post_ln_are_traced_in_the_order_forward_runs(tiny_config):
    pre = diagrams.trace_layer(TransformerEncoderLayer(tiny_config(), norm_first=True))
    post = diagrams.trace_layer(TransformerEncoderLayer(tiny_config(), norm_first=False))
    assert names(pre) == ["input", "layer_norm_1", "attention", "+", "layer_norm_2", "feed_forward", "+", "output"]
    assert names(post) == ["input", "attention", "+", "layer_norm_1", "feed_forward", "+", "layer_norm_2", "output"]
    # Pre-LN adds back the layer's input; post-LN adds back the normalised value.
    assert pre[3].reads == (0, 2) and post[2].reads == (0, 1)
    assert post[5].reads[0] == names(post).index("layer_norm_1")


def test_changing_norm_first_changes_the_drawing(tiny_config):
    pre = diagrams.layer_diagram(TransformerEncoderLayer(tiny_config(), norm_first=True))
    post = diagrams.layer_diagram(TransformerEncoderLayer(tiny_config(), norm_first=False))
    assert pre.svg != post.svg


def test_a_missing_residual_connection_is_drawn_missing(tiny_config):
    steps = diagrams.trace_layer(LayerWithoutSecondResidual(tiny_config()))
    assert names(steps) == ["input", "layer_norm_1", "attention", "+", "layer_norm_2", "feed_forward", "output"]
    assert steps[-1].reads == (names(steps).index("feed_forward"),)


def test_bert_layer_is_traced_through_its_nested_blocks(tiny_config):
    steps = diagrams.trace_layer(BertLayer(tiny_config()))
    assert names(steps) == [
        "input",
        "attention.self",
        "attention.output.dense",
        "+",
        "attention.output.LayerNorm",
        "intermediate",
        "output.dense",
        "+",
        "output.LayerNorm",
        "output",
    ]


def test_cross_attention_reads_the_encoder_output(tiny_config):
    steps = diagrams.trace_layer(TransformerDecoderLayer(tiny_config()))
    cross = next(step for step in steps if step.name == "cross_attention")
    assert cross.side_input == "encoder output"
    assert [step.name for step in steps].count("+") == 3


def test_a_diagram_is_accessible_svg_in_the_page_colours(tiny_config):
    diagram = diagrams.layer_diagram(TransformerEncoderLayer(tiny_config()))
    root = ET.fromstring(diagram.svg)
    assert root.get("role") == "img"
    title, description = root.find(f"{SVG}title"), root.find(f"{SVG}desc")
    assert title.text == diagram.title and description.text == diagram.description
    assert root.get("aria-labelledby") == f"{title.get('id')} {description.get('id')}"
    # Text and lines take the page's colour (dark mode); no fixed black or white.
    assert all(element.get("fill") == "currentColor" for element in root.iter(f"{SVG}text"))
    assert "#000" not in diagram.svg and "#fff" not in diagram.svg.lower()
    assert diagram._repr_html_().startswith("<figure")


def test_the_same_module_gives_the_same_drawing(tiny_config):
    layer = TransformerEncoderLayer(tiny_config())
    assert diagrams.layer_diagram(layer).svg == diagrams.layer_diagram(layer).svg


def test_the_head_split_is_drawn_from_transpose_for_scores(tiny_config):
    config = tiny_config()
    real = diagrams.head_split_diagram(BertSelfAttention(config))

    class Interleaved(BertSelfAttention):
        # Feature e to head e % H: a different (wrong for BERT) split, which the drawing must show.
        def transpose_for_scores(self, x):
            batch, length, _ = x.shape
            return x.view(batch, length, self.attention_head_size, self.num_attention_heads).permute(0, 3, 1, 2)

    interleaved = diagrams.head_split_diagram(Interleaved(config))
    rectangles = lambda d: sum(1 for _ in ET.fromstring(d.svg).iter(f"{SVG}rect"))  # noqa: E731
    heads = config.num_attention_heads
    # The first panel has one rectangle per run of features owned by one head: H for BERT's split.
    assert rectangles(interleaved) - rectangles(real) == config.hidden_size - heads
    assert f"({heads}" in real.description or f"{heads} consecutive blocks" in real.description


def test_the_kv_cache_diagram_shows_the_cache_growing(tiny_config):
    model = EncoderDecoderTransformer(tiny_config())
    diagram = diagrams.kv_cache_diagram(model, torch.randint(3, 50, (1, 5)), steps=3)
    assert "grow from 1 to 3 positions" in diagram.description
    assert "The 5 cross-attention keys" in diagram.description or "the 5 cross-attention keys" in diagram.description


def test_the_architectures_diagram_uses_the_layers_sub_layers(tiny_config):
    diagram = diagrams.architectures_diagram(
        TransformerEncoderLayer(tiny_config()), TransformerDecoderLayer(tiny_config())
    )
    drawn = texts(diagram)
    assert drawn.count("cross_attention") == 1  # only the encoder-decoder column has it
    assert {"attention", "self_attention", "feed_forward"} <= set(drawn)


def test_an_untraceable_layer_is_refused():
    class Scales(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(4)

        def forward(self, x):
            return self.norm(x * 3.0)

    with pytest.raises(ValueError, match="cannot trace"):
        diagrams.trace_layer(Scales())
