r"""
The causal mask
===============

A decoder predicts token :math:`t+1` from tokens :math:`\le t`.  In training
it sees the whole target at once, so query :math:`i` must not look at keys
:math:`j > i`: the look-ahead (causal) mask,
:func:`literate_transformer.core.masks.causal_mask`, a lower-triangular matrix of
``True`` ("may attend").  This example draws the mask and what it does to a
set of attention weights, then adds padding and shows that a row whose keys
are *all* masked stays finite (no NaN), unlike filling with :math:`-\infty`.

Set ``LT_GALLERY_SCALE=gpu`` (or ``large``) for a longer sequence.
"""

# %%
# Set-up
# ------
import os

import matplotlib.pyplot as plt
import torch

import literate_transformer as lt
from literate_transformer.core.masks import causal_mask, combine_masks, masked_fill_scores, padding_mask
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)
large = os.environ.get("LT_GALLERY_SCALE", "cpu") in ("gpu", "large")
length = 24 if large else 8  # T = S: self-attention
head_size = 16  # D

# %%
# Weights with and without the mask
# ---------------------------------
# Random queries and keys stand in for a trained head; what matters is the
# shape of the weights.  :func:`~literate_transformer.core.kernels.scaled_dot_product_attention`
# applies the mask before the softmax, so masked keys get weight 0 and each
# row still sums to 1 over the keys it may see.
query = torch.randn(1, length, head_size, device=device)  # (B, T, D)
key = torch.randn(1, length, head_size, device=device)  # (B, S, D)
value = torch.randn(1, length, head_size, device=device)  # (B, S, D)
mask = causal_mask(length, device=device)  # (T, S)

_, free = lt.scaled_dot_product_attention(query, key, value)
_, causal = lt.scaled_dot_product_attention(query, key, value, attention_mask=mask)
free, causal = free[0].cpu(), causal[0].cpu()
print(f"weight above the diagonal: {free.triu(1).sum():.3f} without the mask, {causal.triu(1).sum():.3f} with it")
print(f"rows sum to 1 with the mask: max |sum - 1| = {(causal.sum(-1) - 1).abs().max():.1e}")

fig, axes = plt.subplots(1, 3, figsize=(11, 3.8), layout="constrained")
panels = [
    (mask.cpu().float(), "causal_mask(T): True = may attend", "Greys"),
    (free, "weights without a mask", "viridis"),
    (causal, "weights with the causal mask", "viridis"),
]
for ax, (data, title, cmap) in zip(axes, panels, strict=True):
    image = ax.imshow(data, cmap=cmap, vmin=0.0, vmax=1.0)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
fig.colorbar(image, ax=axes, shrink=0.8, label="weight")
show()

# %%
# Padding, and a row with nothing to see
# --------------------------------------
# A batch pads its short sequences.  The padding mask hides padded *keys*;
# combined with the causal mask it is a ``(B, 1, T, S)`` boolean mask.  Here
# the first key is padding too (as if the sequence were left-padded), so
# query 0 may see *no* key at all.  Filled with :math:`-\infty`, its row would
# be :math:`0/0` = NaN; filled with the dtype's most negative finite number
# (what :func:`~literate_transformer.core.masks.masked_fill_scores` does) it is a
# uniform row: meaningless, and harmless only because no real token reads
# the output of a query that may see nothing.
attention_mask = torch.ones(1, length, dtype=torch.long, device=device)
attention_mask[0, 0] = 0  # a left pad
attention_mask[0, -2:] = 0  # and two right pads
combined = combine_masks(causal_mask(length, device=device), padding_mask(attention_mask))  # (B, 1, T, S)
scores = query @ key.transpose(-2, -1) / head_size**0.5  # (B, T, S)

with_inf = torch.softmax(scores.masked_fill(~combined[:, 0], float("-inf")), dim=-1)
finite = torch.softmax(masked_fill_scores(scores, combined[:, 0]), dim=-1)
print(f"-inf fill: {int(with_inf.isnan().any(-1).sum())} row(s) of NaN")
print(f"finfo.min fill: {int(finite.isnan().any(-1).sum())} row(s) of NaN; row 0 = {finite[0, 0, :4].tolist()} ...")

fig, axes = plt.subplots(1, 2, figsize=(8, 3.8), layout="constrained")
axes[0].imshow(combined[0, 0].cpu().float(), cmap="Greys", vmin=0.0, vmax=1.0)
axes[0].set_title("causal AND padding mask", fontsize=10)
image = axes[1].imshow(finite[0].cpu(), cmap="viridis", vmin=0.0, vmax=1.0)
axes[1].set_title("weights (row 0: no visible key)", fontsize=10)
for ax in axes:
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
fig.colorbar(image, ax=axes, shrink=0.8, label="weight")
show()
