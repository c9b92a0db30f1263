r"""
Every head of one layer
=======================

A BERT layer has several attention heads, and each computes its own weights
:math:`\operatorname{softmax}(Q_h K_h^\top / \sqrt{D})`: for every query token
(a row), how much it takes from every key token (a column).  This example
runs the pretrained checkpoint through :class:`literate_transformer.models.bert.BertModel`
and draws the weights of *all* heads of one layer side by side, for
*"time flies like an arrow"*.

The heads of one layer differ in where they put their weight.  The last
cell measures how much of it each head puts on the special tokens ``[CLS]``
and ``[SEP]``, against two references: a head that spread its weight evenly,
and the share of what the head actually *takes* from those tokens, the size
of each weighted, transformed value vector, :math:`\lVert \alpha_{ij} f(x_j) \rVert`
(Kobayashi et al., 2020, "Attention is Not Only a Weight: Analyzing
Transformers with Vector Norms", EMNLP 2020, arXiv:2004.10102).  Clark et
al. (2019, "What Does BERT Look At? An Analysis of BERT's Attention",
BlackboxNLP 2019, arXiv:1906.04341) speculated that heads attend to
``[SEP]`` as a "no-op" when their pattern does not apply; the two measures
show how far this checkpoint's heads fit that reading, on one sentence.

Set ``LT_GALLERY_SCALE=gpu`` (or ``large``) to draw a longer sentence pair.
"""

# %%
# Set-up
# ------
# The device is chosen once; ``LT_GALLERY_SCALE`` picks the input size.
import os

import matplotlib.pyplot as plt
import torch

import literate_transformer as lt
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)
large = os.environ.get("LT_GALLERY_SCALE", "cpu") in ("gpu", "large")

tokenizer = lt.load_tokenizer()
# The eager (step-by-step) attention path is the one that can return its weights.
model = lt.BertModel.from_pretrained(attn_implementation="eager").to(device)

# %%
# The attention weights
# ---------------------
# ``output_attentions=True`` returns one ``(B, H, T, T)`` tensor per layer.
# A test checks that these weights equal :class:`transformers.BertModel`'s.
if large:
    text = ("time flies like an arrow", "fruit flies like a banana")
else:
    text = ("time flies like an arrow",)
inputs = tokenizer(*text, return_tensors="pt").to(device)
tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
with torch.inference_mode():
    outputs = model(**inputs, output_attentions=True, output_hidden_states=True)
config = model.config
layer = config.num_hidden_layers // 2
weights = outputs.attentions[layer][0].float().cpu()  # (H, T, T)
print(f"{len(outputs.attentions)} layers of weights, each {tuple(outputs.attentions[layer].shape)}")
print(f"every row sums to 1: max |sum - 1| = {(weights.sum(-1) - 1).abs().max():.1e}")

# %%
# One panel per head
# ------------------
# Row ``i`` of a panel is where token ``i`` looks.  The colour scale is shared,
# so a dark cell means the same weight in every panel.
heads = config.num_attention_heads
columns = 4
rows = -(-heads // columns)  # ceil(heads / columns)
fig, axes = plt.subplots(rows, columns, figsize=(3.0 * columns, 3.0 * rows), layout="constrained")
for head, ax in enumerate(axes.flat):
    if head >= heads:
        ax.axis("off")
        continue
    image = ax.imshow(weights[head], cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_title(f"head {head}", fontsize=9)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
# Layers are numbered from 0, as in the chapters: layer 3 is the fourth.
fig.suptitle(f"Layer {layer} (of layers 0 to {config.num_hidden_layers - 1}): the weights of all {heads} heads")
show()

# %%
# Where does the attention go?
# ----------------------------
# For each head, averaged over the queries: the share of its weight on
# ``[CLS]`` and ``[SEP]``; the share a uniform head would give them; and the
# share of :math:`\lVert \alpha_{ij} f(x_j) \rVert` that comes from them, with
# :math:`f(x_j)` the value vector of key :math:`j` through the head's columns of
# the output projection :math:`W^O`.
special = torch.tensor([token in ("[CLS]", "[SEP]") for token in tokens])
share = weights[:, :, special].sum(-1).mean(-1)  # (H,)
attention = model.encoder.layer[layer].attention
heads, head_size = config.num_attention_heads, config.head_size
with torch.inference_mode():
    x = outputs.hidden_states[layer][0]  # the layer's input, (T, E)
    values = attention.self.value(x).view(len(tokens), heads, head_size).transpose(0, 1)  # (H, S, D)
    w_o = attention.output.dense.weight.view(config.hidden_size, heads, head_size)  # (E, H, D)
    transformed = torch.einsum("hsd,ehd->hse", values, w_o).float().cpu()  # f(x_j) per head, (H, S, E)
norms = (weights[..., None] * transformed[:, None]).norm(dim=-1)  # (H, T, S)
norm_share = (norms[:, :, special].sum(-1) / norms.sum(-1)).mean(-1)  # (H,)
print(f"a uniform head would put {special.float().mean():.1%} of its weight on [CLS]/[SEP]")
for head in range(heads):
    print(f"head {head:2d}: {share[head]:5.1%} of its weight on [CLS]/[SEP], {norm_share[head]:5.1%} of what it takes")
smaller = int((norm_share < share).sum())
print(f"{smaller} of {heads} heads take a smaller share from [CLS]/[SEP] than the weight they give them")
if smaller > heads // 2:
    print("so, for most heads here, the weights overstate what those tokens contribute")
