"""Chapter 14's figures draw what the package computes: turned pairs, window reach, shared heads, gradient lines."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import transformers

from literate_transformer.core.masks import causal_mask
from literate_transformer.figures import decoders
from literate_transformer.models.llama import kv_cache_bytes_per_token
from literate_transformer.models.mistral import MistralModel
from literate_transformer.parts.rotary import RotaryEmbedding, apply_rotary


def test_rotary_pairs_draws_each_pair_turned_by_its_angle_at_each_position():
    query = torch.randn(8, generator=torch.Generator().manual_seed(0))
    figure = decoders.plot_rotary_pairs(query, [0, 1, 5], [0, 3])
    panels = [ax for ax in figure.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 2
    assert [ax.get_xlabel() for ax in panels] == ["feature 0", "feature 3"]
    assert [ax.get_ylabel() for ax in panels] == ["feature 4", "feature 7"]
    for ax, pair in zip(panels, [0, 3], strict=True):
        arrows = ax.collections[0]  # the quiver
        theta = 10000.0 ** (-2 * pair / 8)
        for index, position in enumerate([0, 1, 5]):
            # The plane rotation by m * theta_i of (q_i, q_{i + R/2}), written out.
            angle = position * theta
            a, b = float(query[pair]), float(query[pair + 4])
            expected = (a * math.cos(angle) - b * math.sin(angle), a * math.sin(angle) + b * math.cos(angle))
            assert arrows.U[index] == pytest.approx(expected[0], abs=1e-5)
            assert arrows.V[index] == pytest.approx(expected[1], abs=1e-5)
    with pytest.raises(ValueError, match="even number of features"):
        decoders.plot_rotary_pairs(torch.randn(7), [0], [0])
    with pytest.raises(ValueError, match="pairs"):
        decoders.plot_rotary_pairs(query, [0], [4])
    with pytest.raises(TypeError, match="query"):
        decoders.plot_rotary_pairs(torch.arange(8), [0], [0])


def test_rotary_alignment_is_a_query_scored_against_its_own_turned_copy():
    distances = torch.tensor([0, 1, 7, 300])
    alignment = decoders.rotary_alignment(16, 10000.0, distances)
    query = torch.ones(16)  # every pair of the same length
    for distance, value in zip(distances.tolist(), alignment.tolist(), strict=True):
        cos, sin = RotaryEmbedding(16)(torch.tensor([[distance]]))
        score = apply_rotary(query, cos[0, 0], sin[0, 0]) @ query / (query @ query)
        assert value == pytest.approx(float(score), abs=1e-5)
    assert alignment[0] == 1.0
    with pytest.raises(ValueError, match="base"):
        decoders.rotary_alignment(16, 1.0, distances)


def test_rotary_decay_draws_one_line_per_base_from_rotary_alignment():
    figure = decoders.plot_rotary_decay(8, [10000.0, 500000.0], 50)
    ax = figure.axes[0]
    lines = [line for line in ax.get_lines() if line.get_label().startswith("rope_theta")]
    assert [line.get_label() for line in lines] == ["rope_theta = 10,000", "rope_theta = 500,000"]
    for line, base in zip(lines, [10000.0, 500000.0], strict=True):
        distances = torch.as_tensor(line.get_xdata())
        assert distances[0] == 1 and distances[-1] == 50
        assert torch.allclose(torch.as_tensor(line.get_ydata()), decoders.rotary_alignment(8, base, distances))
    assert ax.get_xscale() == "log"
    with pytest.raises(ValueError, match="bases"):
        decoders.plot_rotary_decay(8, [], 50)


def test_window_reach_is_what_changing_a_token_changes_in_a_mistral():
    # The reach composed from the mask is what a real model's states show: change one token, see which of the
    # last token's states move after each layer.
    config = transformers.MistralConfig(
        vocab_size=40, hidden_size=16, intermediate_size=24, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, sliding_window=3, max_position_embeddings=16,
    )  # fmt: skip
    torch.manual_seed(0)
    model = MistralModel(config).eval()
    mask = model.attention_masks(None, 9, 0, None, torch.device("cpu"))["full"]
    reach = decoders.window_reach(mask, 3)
    assert reach.tolist() == [[j >= 8 - 2 * k for j in range(9)] for k in (1, 2, 3)]  # k (W - 1) back
    ids = torch.randint(0, 40, (1, 9))
    with torch.no_grad():
        states = model(ids, output_hidden_states=True).hidden_states
        for position in range(9):
            changed = ids.clone()
            changed[0, position] = (ids[0, position] + 1) % 40
            other = model(changed, output_hidden_states=True).hidden_states
            moved = [bool((other[k][0, -1] != states[k][0, -1]).any()) for k in (1, 2, 3)]
            assert moved == reach[:, position].tolist(), position
    figure = decoders.plot_window_reach(mask, 3, window=3)
    ax = figure.axes[0]
    assert torch.equal(torch.as_tensor(ax.get_images()[0].get_array()), reach.int())
    assert [label.get_text() for label in ax.get_yticklabels()] == ["after 1 layer", "after 2 layers", "after 3 layers"]
    assert decoders.window_reach(torch.zeros(4, 4), 2).all()  # an additive mask of zeros hides nothing
    with pytest.raises(ValueError, match="square"):
        decoders.window_reach(causal_mask(3, 5), 2)


def test_grouped_query_heads_links_each_query_head_to_the_head_repeat_kv_gives_it():
    # The fields a Llama config names (transformers' own config classes are read in the window test above).
    config = SimpleNamespace(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=3)
    figure = decoders.plot_grouped_query_heads(config, bytes_per_number=2)
    assert len(figure.axes) == 3
    for ax, groups in zip(figure.axes, [4, 2, 1], strict=True):
        variant = SimpleNamespace(**{**vars(config), "num_key_value_heads": groups})
        assert f"K = {groups}" in ax.get_title()
        assert f"{kv_cache_bytes_per_token(variant, bytes_per_number=2):,} bytes a token" in ax.get_title()
        lines = ax.get_lines()
        assert len(lines) == 4  # one per query head
        size = 4 // groups
        centres = [sum(range(k * size, (k + 1) * size)) / size for k in range(groups)]
        for head, line in enumerate(lines):
            assert list(line.get_xdata()) == [head, centres[head // size]]
    assert config.num_key_value_heads == 2  # the config itself is left as it was
    one_each = SimpleNamespace(hidden_size=32, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1)
    assert len(decoders.plot_grouped_query_heads(one_each).axes) == 2  # K = H is drawn once
    with pytest.raises(TypeError, match="config"):
        decoders.plot_grouped_query_heads(object())


def test_last_block_gradients_draws_the_norms_given_and_a_reference():
    norms = {"post-LN": torch.tensor([0.3, 0.3, 0.4]), "pre-LN": torch.tensor([0.4, 0.28, 0.2])}
    figure = decoders.plot_last_block_gradients([2, 4, 8], norms, reference="pre-LN")
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines][:2] == ["post-LN", "pre-LN"]
    assert list(lines[1].get_ydata()) == pytest.approx([0.4, 0.28, 0.2])
    assert list(lines[2].get_ydata()) == pytest.approx([0.4, 0.4 / 2**0.5, 0.2])
    assert figure.axes[0].get_xlabel() == "number of blocks L"
    with pytest.raises(ValueError, match="reference"):
        decoders.plot_last_block_gradients([2, 4, 8], norms, reference="nothing")
    with pytest.raises(ValueError, match="depths"):
        decoders.plot_last_block_gradients([2, 4], norms)
