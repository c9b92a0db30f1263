r"""
Learned and sinusoidal positions
================================

Attention by itself does not know the order of the tokens: permute the keys
and the weights are permuted with them.  Transformers therefore add a vector
per *position* to each token vector.  BERT **learns** one row per position
(``embeddings.position_embeddings``, up to ``max_position_embeddings``); the
2017 paper used a fixed **sinusoidal** table,

.. math::

    PE_{(p,\,2i)} = \sin\!\left(p / 10000^{2i/E}\right), \qquad
    PE_{(p,\,2i+1)} = \cos\!\left(p / 10000^{2i/E}\right),

(:class:`literate_transformer.parts.positions.SinusoidalPositionalEncoding`).  This example
draws both tables as images and their cosine-similarity matrices: how alike
the vectors of positions :math:`p` and :math:`q` are.

Set ``LT_GALLERY_SCALE=gpu`` (or ``large``) to draw all positions.
"""

# %%
# Set-up
# ------
import os

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import literate_transformer as lt
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)
large = os.environ.get("LT_GALLERY_SCALE", "cpu") in ("gpu", "large")

model = lt.BertModel.from_pretrained().to(device)
config = model.config
positions = config.max_position_embeddings if large else min(128, config.max_position_embeddings)

# %%
# The two tables
# --------------
# Both are ``(positions, E)``: one row per position, one column per feature.
learned = model.embeddings.position_embeddings.weight[:positions].detach()  # (P, E)
sinusoidal = lt.SinusoidalPositionalEncoding(config.hidden_size, positions).to(device).encoding  # (P, E)
print(f"learned: {tuple(learned.shape)}, sinusoidal: {tuple(sinusoidal.shape)}")
print(f"mean row norm: learned {learned.norm(dim=-1).mean():.2f}, sinusoidal {sinusoidal.norm(dim=-1).mean():.2f}")

fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
for ax, table, title in ((axes[0], learned, "learned (checkpoint)"), (axes[1], sinusoidal, "sinusoidal (2017)")):
    values = table.float().cpu()
    limit = values.abs().max()
    image = ax.imshow(values, aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel(f"feature (hidden size {config.hidden_size})")
    ax.set_ylabel("position p")
    fig.colorbar(image, ax=ax, shrink=0.8)
show()


# %%
# Similarity of positions
# -----------------------
# Cosine similarity of every pair of rows.  The sinusoidal table's similarity
# depends only on the distance :math:`|p - q|` (a band along the diagonal) by
# construction.  The learned table was never told so, yet neighbouring
# positions came out alike as well: the printed averages compare the first
# off-diagonal with far-apart pairs.
def cosine_similarity_matrix(table: torch.Tensor) -> torch.Tensor:
    unit = F.normalize(table.float(), dim=-1)  # (P, E)
    return (unit @ unit.T).cpu()  # (P, P)


similarities = {"learned": cosine_similarity_matrix(learned), "sinusoidal": cosine_similarity_matrix(sinusoidal)}
far = positions // 2
for name, similarity in similarities.items():
    neighbours = similarity.diagonal(1).mean()
    distant = similarity.diagonal(far).mean()
    print(f"{name:10s}: neighbours {neighbours:.2f}, positions {far} apart {distant:.2f}")

fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
for ax, (name, similarity) in zip(axes, similarities.items(), strict=True):
    image = ax.imshow(similarity, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    ax.set_title(f"{name}: cos(PE_p, PE_q)")
    ax.set_xlabel("position q")
    ax.set_ylabel("position p")
fig.colorbar(image, ax=axes, shrink=0.8, label="cosine similarity")
show()
