"""Chapter 13's figures: the lineage table and its picture, ALBERT's parameters, DeBERTa's terms, ELECTRA's losses.

Each figure is checked against what it claims to draw: the lineage has a box per paper and an arrow per
"builds on", and every family the package builds is in its table; the bars are the parameter counts; the
heatmaps are the layer's own score terms, which add up to the scores its softmax reads; the loss bars average
to the models' losses.
"""

from __future__ import annotations

import importlib.util
import pkgutil
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

import literate_transformer.models as models_package
from literate_transformer.figures import encoders, lineage
from literate_transformer.models import albert, bert, deberta_v2, electra
from literate_transformer.models.registry import REGISTRY, supported


# ---------------------------------------------------------------------------------------------------------
# The lineage
# ---------------------------------------------------------------------------------------------------------
def test_every_family_the_package_builds_is_in_the_lineage():
    supported()  # imports every family, which registers its models
    registered = {model.__module__.rsplit(".", 1)[1] for model in REGISTRY.values()}
    files = {module.name for module in pkgutil.iter_modules([str(Path(models_package.__file__).parent)])}
    keys = {paper.key for paper in lineage.LINEAGE}
    assert registered <= keys, f"registered families missing from the lineage: {sorted(registered - keys)}"
    assert files - {"registry"} <= keys, f"family modules missing from the lineage: {sorted(files - keys)}"
    # And nothing else: every row but the root is a family module of the package.
    assert keys - {lineage.ROOT} <= files


def test_the_lineage_table_is_consistent():
    by_key = {paper.key: paper for paper in lineage.LINEAGE}
    assert len(by_key) == len(lineage.LINEAGE), "a key appears twice"
    for paper in lineage.LINEAGE:
        assert paper.branch in lineage.BRANCHES and 1 <= paper.month <= 12
        assert bool(paper.parents) == (paper.key != lineage.ROOT)
        for parent in paper.parents:
            # A model builds on one published before it.
            assert (by_key[parent].year, by_key[parent].month) <= (paper.year, paper.month), (paper.key, parent)
        if paper.arxiv is not None:
            # An arXiv identifier YYMM.NNNNN carries the year and month of the first version.
            assert (2000 + int(paper.arxiv[:2]), int(paper.arxiv[2:4])) == (paper.year, paper.month), paper.key
        if paper.later is not None:
            # A later paper of the same module comes after the first.
            assert (paper.later_year, int(paper.later[2:4])) > (paper.year, paper.month), paper.key
        # transformers' module of the family (an older release, as the compat leg installs, may predate it).
        if paper.hf_module is not None and importlib.util.find_spec("transformers.models.qwen3") is not None:
            assert importlib.util.find_spec(f"transformers.models.{paper.hf_module}") is not None, paper.hf_module
    assert by_key["bert"].cite == "Devlin et al. 2018" and by_key["gptj"].cite == "Wang & Komatsuzaki 2021"


def test_deberta_cites_v3s_paper_and_builds_on_electras_objective():
    deberta = {paper.key: paper for paper in lineage.LINEAGE}["deberta_v2"]
    # DeBERTaV3 (He, Gao & Chen, arXiv:2111.09543) trains v2's architecture with ELECTRA's replaced tokens.
    assert deberta.later == "2111.09543" and deberta.cite == "He et al. 2020, 2021"
    assert set(deberta.parents) == {"roberta", "electra"}


def _boxes_an_arrow_passes_over(figure, pad_pixels=3.0):
    """For each arrow of a lineage figure, the boxes its line comes within ``pad_pixels`` of, its own two left out."""
    figure.canvas.draw()
    (ax,) = figure.axes
    boxes = {patch.get_gid(): patch.get_window_extent() for patch in ax.patches if isinstance(patch, FancyBboxPatch)}
    passed = {}
    for arrow in (patch for patch in ax.patches if isinstance(patch, FancyArrowPatch)):
        parent, child = arrow.get_gid().split("->")
        path = arrow.get_path()
        points = ax.transData.transform(path.vertices[path.codes != path.CLOSEPOLY])
        dense = np.concatenate([np.linspace(a, b, 25) for a, b in zip(points[:-1], points[1:], strict=True)])
        passed[(parent, child)] = {
            key
            for key, box in boxes.items()
            if key not in (parent, child)
            and (
                (dense[:, 0] > box.x0 - pad_pixels)
                & (dense[:, 0] < box.x1 + pad_pixels)
                & (dense[:, 1] > box.y0 - pad_pixels)
                & (dense[:, 1] < box.y1 + pad_pixels)
            ).any()
        }
    return passed


@pytest.mark.parametrize("branch", [None, "encoder-decoder"])
def test_an_arrow_down_a_column_passes_over_no_other_box(branch):
    figure = lineage.plot_lineage(branch)
    passed = _boxes_an_arrow_passes_over(figure)
    (ax,) = figure.axes
    centres = {
        patch.get_gid(): (round(patch.get_x() + patch.get_width() / 2, 6), patch.get_y())
        for patch in ax.patches
        if isinstance(patch, FancyBboxPatch)
    }
    down_a_column = [
        (parent, child)
        for parent, child in passed
        if centres[parent][0] == centres[child][0]
        and any(
            x == centres[parent][0] and centres[parent][1] < y < centres[child][1]
            for key, (x, y) in centres.items()
            if key not in (parent, child)
        )
    ]
    # The Transformer's arrows to BigBird-Pegasus and M2M-100 skip T5 and BART: they go round, not over them.
    assert {("transformer", "bigbird_pegasus"), ("transformer", "m2m_100")} <= set(down_a_column)
    assert {arrow: passed[arrow] for arrow in down_a_column if passed[arrow]} == {}


def test_one_branch_is_drawn_with_the_root_and_the_parents_it_builds_on():
    drawn = [paper.key for paper in lineage.lineage("encoder-decoder")]
    assert drawn[0] == lineage.ROOT and {"bert", "openai_gpt", "bart", "t5"} <= set(drawn)
    assert "gpt2" not in drawn and "roberta" not in drawn
    assert {paper.branch for paper in lineage.lineage("encoder")} == {"encoder", "encoder-decoder"}


@pytest.mark.parametrize("branch", [None, "encoder"])
def test_the_lineage_draws_a_box_per_paper_and_an_arrow_per_edge(branch):
    papers = lineage.lineage(branch)
    figure = lineage.plot_lineage(branch)
    (ax,) = figure.axes
    boxes = [patch for patch in ax.patches if isinstance(patch, FancyBboxPatch)]
    arrows = [patch for patch in ax.patches if isinstance(patch, FancyArrowPatch)]
    assert sorted(box.get_gid() for box in boxes) == sorted(paper.key for paper in papers)
    keys = {paper.key for paper in papers}
    members = [paper for paper in papers if branch is None or paper.branch == branch or paper.key == lineage.ROOT]
    assert len(arrows) == sum(parent in keys for paper in members for parent in paper.parents)
    texts = {text.get_text() for text in ax.texts}
    assert {paper.cite for paper in papers} <= texts and {paper.name for paper in papers} <= texts
    years = [int(label.get_text()) for label in ax.get_yticklabels()]
    assert years == list(range(min(p.year for p in papers), max(p.year for p in papers) + 1))
    assert ax.get_ylabel() and ax.get_title()


def test_the_lineage_refuses_an_unknown_branch():
    with pytest.raises(ValueError, match="branch"):
        lineage.plot_lineage("encoders")
    with pytest.raises(TypeError, match="branch"):
        lineage.lineage(1)


# ---------------------------------------------------------------------------------------------------------
# ALBERT's parameters
# ---------------------------------------------------------------------------------------------------------
SIZES = dict(vocab_size=50, hidden_size=16, num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)


def test_the_parameter_bars_are_the_counts():
    bert_model = bert.BertModel(transformers.BertConfig(num_hidden_layers=3, **SIZES))
    albert_model = albert.AlbertModel(transformers.AlbertConfig(embedding_size=4, num_hidden_layers=3, **SIZES))
    groups = encoders.parameter_groups(albert_model)
    assert sum(groups.values()) == sum(parameter.numel() for parameter in albert_model.parameters())
    assert groups["token table"] == 50 * 4 and groups["embedding projection"] == 4 * 16 + 16
    assert groups["layers"] == sum(p.numel() for p in albert_model.layers()[0].parameters())  # one layer, shared
    figure = encoders.plot_parameter_budget({"BERT": bert_model, "ALBERT": albert_model})
    (ax,) = figure.axes
    assert len(ax.containers) == len(encoders.GROUPS)
    for group, container in zip(encoders.GROUPS, ax.containers, strict=True):
        heights = [bar.get_height() for bar in container]
        expected = [encoders.parameter_groups(model)[group] / 1e6 for model in (bert_model, albert_model)]
        assert heights == pytest.approx(expected)
    texts = " ".join(text.get_text() for text in ax.texts)
    assert "1 layer, run 3 times" in texts and "3 layers" in texts and "50×4" in texts
    with pytest.raises(ValueError, match="two or more"):
        encoders.plot_parameter_budget({"BERT": bert_model})
    with pytest.raises(TypeError, match="Module"):
        encoders.parameter_groups("BERT")


# ---------------------------------------------------------------------------------------------------------
# DeBERTa's terms
# ---------------------------------------------------------------------------------------------------------
def tiny_deberta() -> deberta_v2.DebertaV2Model:
    torch.manual_seed(0)
    config = transformers.DebertaV2Config(
        **SIZES,
        num_hidden_layers=2,
        type_vocab_size=0,
        relative_attention=True,
        pos_att_type=["p2c", "c2p"],
        position_buckets=4,
        max_relative_positions=8,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        position_biased_input=False,
    )
    return deberta_v2.DebertaV2Model(config).eval()


def test_the_three_terms_are_the_layers_scores():
    model = tiny_deberta()
    ids = torch.randint(0, 50, (1, 9))
    terms = encoders.disentangled_terms(model, ids, layer=1, head=1)
    total = terms["content → content"] + terms["content → position"] + terms["position → content"]
    assert torch.allclose(total, terms["scores"], atol=1e-6)
    with torch.no_grad():
        probabilities = model(ids, output_attentions=True).attentions[1][0, 1]  # the layer's own softmax
    assert torch.allclose(torch.softmax(total, dim=-1), probabilities, atol=1e-6)
    # Content to position depends on the query and the bucket only: keys in one bucket score alike.
    c2p, buckets = terms["content → position"], terms["bucket"]
    for i in range(9):
        for j in range(9):
            same = buckets[i] == buckets[i, j]
            assert torch.allclose(c2p[i][same], c2p[i, j].expand(int(same.sum())))
    assert model.layers()[1].attention.self.pos_att_type == ["p2c", "c2p"]  # restored


def test_the_heatmaps_are_the_terms():
    model = tiny_deberta()
    ids = torch.randint(0, 50, (9,))
    figure = encoders.plot_disentangled_attention(model, ids, [f"t{i}" for i in range(9)])
    terms = encoders.disentangled_terms(model, ids)
    images = [ax.images[0].get_array() for ax in figure.axes if ax.images]
    names = ("content → content", "content → position", "position → content", "bucket")
    for image, name in zip(images, names, strict=True):
        assert torch.allclose(torch.as_tensor(image.data).float(), terms[name].float())
    assert [ax.get_xlabel() for ax in figure.axes if ax.images] == ["key j"] * 4
    with pytest.raises(ValueError, match="tokens"):
        encoders.plot_disentangled_attention(model, ids, ["only one"])
    with pytest.raises(TypeError, match="DebertaV2Model"):
        encoders.disentangled_terms(object(), ids)


# ---------------------------------------------------------------------------------------------------------
# ELECTRA's losses
# ---------------------------------------------------------------------------------------------------------
def test_the_loss_bars_average_to_the_models_losses():
    torch.manual_seed(0)
    generator = bert.BertForMaskedLM(transformers.BertConfig(num_hidden_layers=1, **SIZES)).eval()
    discriminator = electra.ElectraForPreTraining(
        transformers.ElectraConfig(embedding_size=8, num_hidden_layers=1, **SIZES)
    ).eval()
    original = torch.randint(5, 50, (1, 8))
    labels = torch.full_like(original, -100)
    labels[0, [2, 5]] = original[0, [2, 5]]
    corrupted = original.clone()
    corrupted[0, [2, 5]] = torch.tensor([3, 4])
    replaced = (corrupted != original).long()
    with torch.no_grad():
        mlm = generator(original.masked_fill(labels != -100, 1), labels=labels)
        rtd = discriminator(corrupted, labels=replaced)
    mlm_losses, rtd_losses = encoders.token_losses(mlm.logits, labels, rtd.logits, replaced)
    assert float(mlm_losses[labels[0] != -100].mean()) == pytest.approx(float(mlm.loss), abs=1e-6)
    assert (mlm_losses[labels[0] == -100] == 0).all()
    assert float(rtd_losses.mean()) == pytest.approx(float(rtd.loss), abs=1e-6)
    tokens = [f"w{i}" for i in range(8)]
    figure = encoders.plot_replaced_token_detection(tokens, tokens, mlm.logits, labels, rtd.logits, replaced)
    top, bottom = figure.axes
    assert [bar.get_height() for bar in top.containers[0]] == pytest.approx(mlm_losses.tolist())
    assert [bar.get_height() for bar in bottom.containers[0]] == pytest.approx(rtd_losses.tolist())
    assert "2 masked positions of 8" in top.get_title() and "all 8 tokens" in bottom.get_title()
    with pytest.raises(ValueError, match="same 8 tokens"):
        encoders.token_losses(mlm.logits, labels[:, :4], rtd.logits, replaced)
