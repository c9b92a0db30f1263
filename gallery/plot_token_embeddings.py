r"""
The embedding of a sentence
===========================

A transformer's first layer replaces each token id by a row of a learned
table.  This example draws those rows for *"time flies like an arrow"* with
the pretrained BERT checkpoint, as a heatmap: one row per token, one column
per feature.
"""

# %%
# Set-up
# ------
# The device is chosen once: CUDA when it is available, else the CPU.
import matplotlib.pyplot as plt
import torch

import literate_transformer as lt
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)

tokenizer = lt.load_tokenizer()
model = lt.load_hf_model().to(device)

# %%
# Tokens and their vectors
# ------------------------
# ``word_embeddings`` is the token table of the checkpoint; indexing it with
# the ids is the whole "embedding layer" before positions are added.
text = "time flies like an arrow"
inputs = tokenizer(text, return_tensors="pt").to(device)
tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
with torch.no_grad():
    vectors = model.embeddings.word_embeddings(inputs["input_ids"])[0]  # (T, E)
print(f"{len(tokens)} tokens -> a {tuple(vectors.shape)} matrix on {device}")

# %%
# The heatmap
# -----------
# The special tokens ``[CLS]`` and ``[SEP]`` get rows of their own, like any
# word.  Nothing here depends on context: *flies* would get the same row in any
# sentence.
values = vectors.cpu().numpy()
limit = abs(values).max()
fig, ax = plt.subplots(figsize=(9, 3.2), layout="constrained")
image = ax.imshow(values, aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
ax.set_yticks(range(len(tokens)), tokens)
ax.set_xlabel(f"feature (hidden size {model.config.hidden_size})")
ax.set_title(f"Token embeddings of {text!r}")
fig.colorbar(image, ax=ax, label="value")
show()
